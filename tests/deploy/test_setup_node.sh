#!/usr/bin/env bash
# test_setup_node.sh SCRIPT — deploy/setup-node.sh on a fake /sys, /proc, /etc tree
# (TALLY_SETUP_ROOT): --check changes nothing, no terminal and no --yes changes nothing,
# --yes applies, bad input is refused with exit 2 and changes nothing, an up interface is
# never bound, CPU isolation hints name the right cores.
set -uo pipefail
script=$(realpath "$1")
R=$(mktemp -d /tmp/deploy-setupnode.XXXXXX)
trap 'rm -rf "$R"' EXIT
export TALLY_SETUP_ROOT=$R
fails=0
check() { # check NAME CONDITION...
	local name=$1; shift
	if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}
hp=$R/sys/kernel/mm/hugepages/hugepages-2048kB
mkdir -p "$hp" "$R/proc" "$R/etc" "$R/sys/kernel/iommu_groups/0" \
	"$R/sys/bus/pci/drivers/ixgbe" "$R/sys/bus/pci/devices/0000:3b:00.0/net/eth9"
for c in 0 1 2 3; do mkdir -p "$R/sys/devices/system/cpu/cpu$c"; done
echo 0-3 >"$R/sys/devices/system/cpu/online"
: >"$R/sys/devices/system/cpu/isolated"
echo 0 >"$hp/nr_hugepages"; echo 0 >"$hp/free_hugepages"
echo "BOOT_IMAGE=/vmlinuz root=/dev/vda ro" >"$R/proc/cmdline"
echo "hugetlbfs /dev/hugepages hugetlbfs rw,relatime,pagesize=2M 0 0" >"$R/proc/mounts"
ln -s ../../../bus/pci/drivers/ixgbe "$R/sys/bus/pci/devices/0000:3b:00.0/driver"
echo up >"$R/sys/bus/pci/devices/0000:3b:00.0/net/eth9/operstate"
snapshot() { (cd "$R" && find . -type f -print0 | sort -z | xargs -0 md5sum); }

run() { out=$("$script" "$@" </dev/null 2>&1); rc=$?; }

before=$(snapshot)
run --check --hugepages 16
check "--check short of hugepages exits 1" [ "$rc" = 1 ]
check "--check lists the hugepage fix" grep -q "FIX   reserve 16 hugepages" <<<"$out"
check "--check changes nothing" [ "$before" = "$(snapshot)" ]

run --hugepages 16
check "no terminal, no --yes: exit 1" [ "$rc" = 1 ]
check "no terminal, no --yes: says so" grep -q "stdin is not a terminal and --yes was not given: nothing changed" <<<"$out"
check "no terminal, no --yes: changes nothing" [ "$before" = "$(snapshot)" ]

for bad in "--hugepages abc" "--hugepage-size 3M" "--isolate 0-2" "--isolate 9" "--isolate 3-1" \
	"--nic zz:00" "--driver e1000" "--frobnicate"; do
	# shellcheck disable=SC2086
	run $bad --yes
	check "bad input '$bad' exits 2 and changes nothing" [ "$rc" = 2 ] && [ "$before" = "$(snapshot)" ]
done

run --hugepages 16 --nic 3b:00.0 --yes
check "up interface: exit 1" [ "$rc" = 1 ]
check "up interface: names it" grep -q "interface eth9 is up" <<<"$out"
check "up interface: nothing changed, not even the hugepages" [ "$before" = "$(snapshot)" ]

run --hugepages 16 --yes
check "--yes applies: exit 0" [ "$rc" = 0 ]
check "--yes reserved the hugepages" [ "$(cat "$hp/nr_hugepages")" = 16 ]
check "--yes persisted vm.nr_hugepages" grep -qx "vm.nr_hugepages = 16" "$R/etc/sysctl.d/60-tally-hugepages.conf"

run --check --hugepages 16
check "--check after --yes: ready, exit 0" [ "$rc" = 0 ]
check "--check after --yes: says ready" grep -q "node ready for tallyd" <<<"$out"
run --check --hugepages 32
check "--check wants more hugepages than persisted: exit 1" [ "$rc" = 1 ]

run --check --hugepages 16 --isolate 2-3
check "isolation hint names the cores" grep -q "isolcpus=managed_irq,domain,2-3 nohz_full=2-3 rcu_nocbs=2-3 irqaffinity=0,1" <<<"$out"
check "isolation hints alone do not make the node unready" [ "$rc" = 0 ]

# a file of the same name in /etc/sysctl.d replaces the vendor's in /usr/lib/sysctl.d
mkdir -p "$R/usr/lib/sysctl.d"
echo "vm.nr_hugepages = 1024" >"$R/usr/lib/sysctl.d/60-tally-hugepages.conf"
echo "vm.nr_hugepages = 0" >"$R/etc/sysctl.d/60-tally-hugepages.conf"
run --check --hugepages 16
check "/etc/sysctl.d overrides /usr/lib/sysctl.d by name: not persisted (exit 1)" [ "$rc" = 1 ]
run --hugepages 16 --yes
check "--yes persists over the override" grep -qx "vm.nr_hugepages = 16" "$R/etc/sysctl.d/60-tally-hugepages.conf"
rm -f "$R/usr/lib/sysctl.d/60-tally-hugepages.conf"

# --boot-config: the isolation goes into a syslinux config's APPEND lines (make-disk.sh images)
bc=$R/boot/syslinux.cfg
mkdir -p "$R/boot"
printf 'DEFAULT tally\nLABEL tally\n  LINUX /vmlinuz\n  APPEND root=LABEL=tally-root ro isolcpus=5 quiet\n' >"$bc"
run --hugepages 16 --boot-config "$bc" --yes
check "--boot-config without --isolate: usage error (2)" [ "$rc" = 2 ]
run --hugepages 16 --isolate 2-3 --boot-config "$R/boot/none.cfg" --yes
check "--boot-config on a file without APPEND: usage error (2)" [ "$rc" = 2 ]
before=$(snapshot)
run --check --hugepages 16 --isolate 2-3 --boot-config "$bc"
check "--boot-config --check: a change is needed (exit 1)" [ "$rc" = 1 ]
check "--boot-config --check: nothing changed" [ "$before" = "$(snapshot)" ]
run --hugepages 16 --isolate 2-3 --boot-config "$bc" --yes
check "--boot-config --yes: exit 0" [ "$rc" = 0 ]
check "--boot-config wrote the isolation, replacing the old one" \
	grep -qx "  APPEND root=LABEL=tally-root ro quiet isolcpus=managed_irq,domain,2-3 nohz_full=2-3 rcu_nocbs=2-3 irqaffinity=0,1" "$bc"
run --check --hugepages 16 --isolate 2-3 --boot-config "$bc"
check "--boot-config written: ready until the reboot (exit 0)" [ "$rc" = 0 ]

echo "$fails failure(s)"
[ "$fails" = 0 ]
