#!/usr/bin/env bash
# setup-node.sh — check and prepare a CPU node for tallyd (installed as tally-setup-node).
# Checks hugepages, the hugetlbfs mount, IOMMU/vfio, NIC binding and CPU isolation, prints
# what it would change, and changes it only after asking (or with --yes). Kernel command-line
# settings (IOMMU, isolated cores, 1 GiB pages) are printed as hints: it never edits the
# bootloader, except the one syslinux/extlinux file named with --boot-config.
#
#   setup-node.sh [--check] [--yes] [--hugepages N] [--hugepage-size 2M|1G]
#                 [--nic PCI]... [--driver vfio-pci|uio_pci_generic]
#                 [--bind-with driverctl|dpdk-devbind] [--isolate CPULIST]
#                 [--boot-config FILE]
#
#   --check            only check; exit 0 when the node is ready, 1 when not. Changes nothing.
#   --yes              apply the changes without asking (automation). Without --yes and
#                      without a terminal on stdin, nothing is changed.
#   --hugepages N      hugepages to reserve (default 1024 of 2M = 2 GiB)
#   --hugepage-size S  2M (default, reserved at run time and by sysctl at boot) or 1G
#                      (reserve at boot: printed as a kernel command-line hint)
#   --nic PCI          a NIC for tallyd (e.g. 0000:3b:00.0); repeat for several. Bound to
#                      --driver unless it is an mlx5 NIC (bifurcated driver: no binding).
#   --driver D         vfio-pci (default) or uio_pci_generic
#   --bind-with T      driverctl (persistent override; default when installed) or
#                      dpdk-devbind (binds now and adds the NIC to /etc/dpdk/interfaces,
#                      which Debian's dpdk.service re-binds at boot)
#   --isolate CPULIST  cores tallyd's lcores poll on (e.g. 2-7): hints for isolcpus,
#                      nohz_full, rcu_nocbs and irqaffinity
#   --boot-config FILE with --isolate: write those parameters into the APPEND lines of
#                      this syslinux/extlinux config for the next boot (the image from
#                      deploy/make-disk.sh: /boot/firmware/syslinux.cfg)
# Exit: 0 ready (or changes applied), 1 not ready / changes not applied / error, 2 usage.
# TALLY_SETUP_ROOT=DIR reads and writes DIR/sys, DIR/proc, DIR/etc instead (tests).
set -euo pipefail

usage() { sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'; }
die_usage() { echo "setup-node.sh: $*" >&2; echo "try: setup-node.sh --help" >&2; exit 2; }

ROOT=${TALLY_SETUP_ROOT:-}
SYS=$ROOT/sys
PROC=$ROOT/proc
ETC=$ROOT/etc

check_only=0 assume_yes=0 hp_count=1024 hp_size=2M driver=vfio-pci bind_with="" isolate="" boot_config=""
nics=()
while [ $# -gt 0 ]; do
	case "$1" in
	--check) check_only=1 ;;
	--yes|-y) assume_yes=1 ;;
	--hugepages) [ $# -ge 2 ] || die_usage "--hugepages needs a number"; hp_count=$2; shift ;;
	--hugepage-size) [ $# -ge 2 ] || die_usage "--hugepage-size needs 2M or 1G"; hp_size=$2; shift ;;
	--nic) [ $# -ge 2 ] || die_usage "--nic needs a PCI address"; nics+=("$2"); shift ;;
	--driver) [ $# -ge 2 ] || die_usage "--driver needs a name"; driver=$2; shift ;;
	--bind-with) [ $# -ge 2 ] || die_usage "--bind-with needs driverctl or dpdk-devbind"; bind_with=$2; shift ;;
	--isolate) [ $# -ge 2 ] || die_usage "--isolate needs a CPU list"; isolate=$2; shift ;;
	--boot-config) [ $# -ge 2 ] || die_usage "--boot-config needs a file"; boot_config=$2; shift ;;
	-h|--help) usage; exit 0 ;;
	*) die_usage "unknown argument '$1'" ;;
	esac
	shift
done

[[ $hp_count =~ ^[0-9]+$ ]] && [ "$hp_count" -le 1048576 ] || die_usage "--hugepages: '$hp_count' is not a page count"
case "$hp_size" in 2M|2m) hp_size=2M hp_kb=2048 ;; 1G|1g) hp_size=1G hp_kb=1048576 ;;
*) die_usage "--hugepage-size: '$hp_size' is not 2M or 1G" ;; esac
case "$driver" in vfio-pci|uio_pci_generic) ;; *) die_usage "--driver: '$driver' is not vfio-pci or uio_pci_generic" ;; esac
case "$bind_with" in "")
	if command -v driverctl >/dev/null 2>&1; then bind_with=driverctl; else bind_with=dpdk-devbind; fi ;;
driverctl|dpdk-devbind) ;; *) die_usage "--bind-with: '$bind_with' is not driverctl or dpdk-devbind" ;; esac

# Expand a CPU list (0-3,8) into one number per line; fails on bad syntax.
expand_cpus() {
	local part a b
	local IFS=,
	for part in $1; do
		if [[ $part =~ ^([0-9]+)-([0-9]+)$ ]]; then
			a=${BASH_REMATCH[1]} b=${BASH_REMATCH[2]}
			[ "$a" -le "$b" ] || return 1
			seq "$a" "$b"
		elif [[ $part =~ ^[0-9]+$ ]]; then
			echo "$part"
		else
			return 1
		fi
	done
}
if [ -n "$isolate" ]; then
	cpus=$(expand_cpus "$isolate") || die_usage "--isolate: '$isolate' is not a CPU list like 2-7 or 2,3,8-11"
	for c in $cpus; do
		[ -d "$SYS/devices/system/cpu/cpu$c" ] || die_usage "--isolate: CPU $c does not exist on this node"
	done
	if echo "$cpus" | grep -qx 0; then die_usage "--isolate: keep CPU 0 for the kernel and housekeeping"; fi
fi
if [ -n "$boot_config" ]; then
	[ -n "$isolate" ] || die_usage "--boot-config: give the cores with --isolate too"
	grep -qE '^[[:space:]]*APPEND[[:space:]]' "$boot_config" 2>/dev/null ||
		die_usage "--boot-config: '$boot_config' is not a syslinux/extlinux config with an APPEND line"
fi
norm_pci() { # 3b:00.0 -> 0000:3b:00.0
	local p=${1,,}
	[[ $p =~ ^[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$ ]] && p=0000:$p
	[[ $p =~ ^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$ ]] || return 1
	echo "$p"
}
for i in "${!nics[@]}"; do
	nics[i]=$(norm_pci "${nics[i]}") || die_usage "--nic: '${nics[i]}' is not a PCI address like 0000:3b:00.0"
done

plan=() actions=() errors=0 hints=()
ok()   { printf '  ok    %s\n' "$*"; }
bad()  { printf '  ERROR %s\n' "$*"; errors=$((errors + 1)); }
todo() { printf '  FIX   %s\n' "$1"; plan+=("$1"); actions+=("$2"); }
hint() { printf '  HINT  %s\n' "$*"; hints+=("$*"); }
cmdline=$(cat "$PROC/cmdline" 2>/dev/null || true)
has_arg() { [[ " $cmdline " == *" $1"* ]]; }

# The sysctl.d files systemd-sysctl applies, in its order: by file name, a name in /etc
# replacing the same name in /usr/lib (the last setting of a key wins).
sysctl_files() {
	local f n
	for f in "$ETC"/sysctl.d/*.conf "$ROOT"/usr/lib/sysctl.d/*.conf; do
		[ -f "$f" ] && echo "${f##*/}"
	done | sort -u | while read -r n; do
		if [ -f "$ETC/sysctl.d/$n" ]; then echo "$ETC/sysctl.d/$n"; else echo "$ROOT/usr/lib/sysctl.d/$n"; fi
	done
}

# ---- hugepages -------------------------------------------------------------------------
echo "hugepages ($hp_count x $hp_size):"
hp_dir=$SYS/kernel/mm/hugepages/hugepages-${hp_kb}kB
hp_persist=$ETC/sysctl.d/60-tally-hugepages.conf
if [ ! -d "$hp_dir" ]; then
	bad "this kernel has no $hp_size hugepages ($hp_dir missing)"
else
	hp_now=$(cat "$hp_dir/nr_hugepages")
	if [ "$hp_now" -ge "$hp_count" ]; then
		ok "$hp_now reserved, $(cat "$hp_dir/free_hugepages" 2>/dev/null || echo '?') free"
	elif [ "$hp_size" = 2M ]; then
		todo "reserve $hp_count hugepages of 2M now ($hp_now reserved): write $hp_dir/nr_hugepages" set_hugepages
	else
		bad "only $hp_now of $hp_count 1G hugepages reserved; 1G pages must be reserved at boot"
		hint "kernel command line: default_hugepagesz=1G hugepagesz=1G hugepages=$hp_count"
	fi
	if [ "$hp_size" = 2M ]; then
		# The default hugepage size is 2M unless the kernel command line says otherwise;
		# vm.nr_hugepages counts pages of the default size.
		if has_arg default_hugepagesz= && ! has_arg default_hugepagesz=2M; then
			hint "default_hugepagesz is not 2M on this kernel: vm.nr_hugepages counts other pages; reserve 2M pages with NR_2M_PAGES in /etc/dpdk/dpdk.conf instead"
		else
			boot=$(sysctl_files | xargs -r cat 2>/dev/null |
				sed -n 's/^[[:space:]]*vm\.nr_hugepages[[:space:]]*=[[:space:]]*\([0-9]*\).*/\1/p' | tail -1 || true)
			if [ -n "$boot" ] && [ "$boot" -ge "$hp_count" ]; then
				ok "reserved again at boot (vm.nr_hugepages = $boot in sysctl.d)"
			else
				todo "keep $hp_count hugepages across reboots: write vm.nr_hugepages = $hp_count to $hp_persist" persist_hugepages
			fi
		fi
	fi
	if [ -f "$ETC/dpdk/dpdk.conf" ] && grep -Eq '^[[:space:]]*NR_(2M|1G)_PAGES=' "$ETC/dpdk/dpdk.conf"; then
		hint "$ETC/dpdk/dpdk.conf also reserves hugepages (NR_*_PAGES): keep one place, the later writer wins"
	fi
fi
if grep -q ' hugetlbfs ' "$PROC/mounts" 2>/dev/null; then
	ok "hugetlbfs mounted at $(awk '$3 == "hugetlbfs" { print $2; exit }' "$PROC/mounts")"
else
	todo "mount hugetlbfs at /dev/hugepages (systemd's dev-hugepages.mount does this at boot)" mount_hugetlbfs
fi

# ---- IOMMU and vfio --------------------------------------------------------------------
echo "IOMMU / vfio:"
groups=$(find "$SYS/kernel/iommu_groups" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
if [ "$groups" -gt 0 ]; then
	ok "IOMMU on ($groups groups)"
else
	msg="no IOMMU groups: vfio-pci needs the IOMMU on (intel_iommu=on or amd_iommu=on, and iommu=pt)"
	if [ ${#nics[@]} -gt 0 ] && [ "$driver" = vfio-pci ]; then bad "$msg"; else printf '  note  %s\n' "$msg"; fi
	hint "kernel command line: intel_iommu=on iommu=pt (AMD: amd_iommu=on iommu=pt); mlx5 NICs need no IOMMU or binding"
fi
if [ -d "$SYS/bus/pci/drivers/$driver" ] || [ -d "$SYS/module/${driver//-/_}" ]; then
	ok "$driver driver loaded"
elif [ ${#nics[@]} -gt 0 ]; then
	todo "load the $driver module now and at boot (modprobe $driver; $ETC/modules-load.d/tally.conf)" load_driver
else
	printf '  note  %s driver not loaded (needed only to bind NICs: --nic)\n' "$driver"
fi

# ---- NICs ------------------------------------------------------------------------------
bind_list=()
if [ ${#nics[@]} -gt 0 ]; then
	echo "NICs (bind to $driver with $bind_with):"
	for p in "${nics[@]}"; do
		dev=$SYS/bus/pci/devices/$p
		if [ ! -d "$dev" ]; then bad "$p: no such PCI device"; continue; fi
		cur=$(basename "$(readlink "$dev/driver" 2>/dev/null || echo none)")
		# the interface sits in net/ or, for virtio, in virtioN/net/
		ifdirs=$(compgen -G "$dev/net/*" || true; compgen -G "$dev/*/net/*" || true)
		ifaces=""
		for d in $ifdirs; do ifaces="$ifaces$(basename "$d") "; done
		if [ "$cur" = "$driver" ]; then
			ok "$p bound to $driver"
		elif [ "$cur" = mlx5_core ]; then
			ok "$p is an mlx5 NIC (bifurcated driver): DPDK uses it as it is, no binding"
		else
			up=""
			for d in $ifdirs; do
				[ "$(cat "$d/operstate" 2>/dev/null)" = up ] && up="$up $(basename "$d")"
			done
			if [ -n "$up" ]; then
				bad "$p: interface${up} is up; take it down (and off any route) before giving it to DPDK"
			else
				todo "bind $p (driver $cur${ifaces:+, interface ${ifaces% }}) to $driver with $bind_with" bind_nics
				bind_list+=("$p")
			fi
		fi
	done
	if [ "$bind_with" = driverctl ] && ! command -v driverctl >/dev/null 2>&1; then
		bad "driverctl is not installed (apt-get install driverctl, or --bind-with dpdk-devbind)"
	fi
	if [ "$bind_with" = dpdk-devbind ] && ! command -v dpdk-devbind.py >/dev/null 2>&1; then
		bad "dpdk-devbind.py is not installed (apt-get install dpdk)"
	fi
fi

# ---- CPU isolation ---------------------------------------------------------------------
echo "CPU isolation:"
isolated=$(cat "$SYS/devices/system/cpu/isolated" 2>/dev/null || true)
if [ -n "$isolate" ]; then
	if [ -n "$isolated" ] && [ "$(expand_cpus "$isolated" | sort -n)" = "$(echo "$cpus" | sort -n)" ]; then
		ok "CPUs $isolate isolated"
	else
		online=$(cat "$SYS/devices/system/cpu/online" 2>/dev/null || echo "")
		others=$( { expand_cpus "$online" 2>/dev/null || true; } | grep -vxF -f <(echo "$cpus") | paste -sd, - || true)
		printf '  note  isolated now: %s\n' "${isolated:-none}"
		iso_args="isolcpus=managed_irq,domain,$isolate nohz_full=$isolate rcu_nocbs=$isolate${others:+ irqaffinity=$others}"
		if [ -z "$boot_config" ]; then
			hint "kernel command line: $iso_args"
		elif grep -qE "^[[:space:]]*APPEND .* ${iso_args}\$" "$boot_config"; then
			ok "next boot isolates $isolate ($boot_config): reboot to apply"
		else
			todo "write '$iso_args' into $boot_config (applies at the next boot)" write_boot_config
		fi
		hint "then give tallyd's lcores (EAL -l / the config's cores) only CPUs from $isolate"
	fi
else
	printf '  note  isolated now: %s (name tallyd'"'"'s cores with --isolate for hints)\n' "${isolated:-none}"
fi
if [ ${#hints[@]} -gt 0 ]; then
	echo "Kernel command line: add the hinted parameters to GRUB_CMDLINE_LINUX in /etc/default/grub"
	echo "and run update-grub (image builds: KernelCommandLine= in deploy/mkosi/mkosi.default), then reboot."
fi

# ---- decide ----------------------------------------------------------------------------
echo
if [ "$errors" -gt 0 ]; then
	echo "setup-node.sh: $errors problem(s) above need a human; nothing changed."
	exit 1
fi
if [ ${#plan[@]} -eq 0 ]; then
	echo "setup-node.sh: node ready for tallyd; nothing to change."
	exit 0
fi
if [ "$check_only" = 1 ]; then
	echo "setup-node.sh: ${#plan[@]} change(s) needed (--check: nothing changed)."
	exit 1
fi
echo "setup-node.sh will make ${#plan[@]} change(s):"
for i in "${!plan[@]}"; do echo "  $((i + 1)). ${plan[i]}"; done
if [ "$assume_yes" != 1 ]; then
	if [ ! -t 0 ]; then
		echo "setup-node.sh: stdin is not a terminal and --yes was not given: nothing changed."
		exit 1
	fi
	read -r -p "Apply these changes? [y/N] " answer
	case "$answer" in y|Y|yes|YES) ;; *) echo "setup-node.sh: nothing changed."; exit 1 ;; esac
fi
[ -n "$ROOT" ] || [ "$(id -u)" -eq 0 ] || { echo "setup-node.sh: changing the node needs root" >&2; exit 1; }

set_hugepages() {
	echo "$hp_count" >"$hp_dir/nr_hugepages"
	local got
	got=$(cat "$hp_dir/nr_hugepages")
	if [ "$got" -lt "$hp_count" ]; then
		echo "  only $got of $hp_count hugepages could be reserved (memory fragmented): reboot with the sysctl file in place" >&2
		return 1
	fi
	echo "  reserved $got hugepages of $hp_size"
}
persist_hugepages() {
	mkdir -p "$(dirname "$hp_persist")"
	printf '# written by tally setup-node.sh: hugepages for tallyd\nvm.nr_hugepages = %s\n' "$hp_count" >"$hp_persist"
	echo "  wrote $hp_persist"
}
mount_hugetlbfs() {
	mkdir -p "$ROOT/dev/hugepages"
	[ -n "$ROOT" ] && { echo "  (test root: mount skipped)"; return 0; }
	mount -t hugetlbfs -o pagesize="$hp_size" nodev /dev/hugepages
	echo "  mounted hugetlbfs at /dev/hugepages"
}
load_driver() {
	mkdir -p "$ETC/modules-load.d"
	echo "$driver" >"$ETC/modules-load.d/tally.conf"
	[ -n "$ROOT" ] || modprobe "$driver"
	echo "  loaded $driver (and at boot: $ETC/modules-load.d/tally.conf)"
}
bind_nics() {
	local p
	for p in "${bind_list[@]}"; do
		if [ "$bind_with" = driverctl ]; then
			driverctl set-override "$p" "$driver"
		else
			dpdk-devbind.py --bind="$driver" "$p"
			mkdir -p "$ETC/dpdk"
			grep -q "^pci[[:space:]]\+${p}[[:space:]]" "$ETC/dpdk/interfaces" 2>/dev/null ||
				printf 'pci\t%s\t%s\n' "$p" "$driver" >>"$ETC/dpdk/interfaces"
		fi
		echo "  bound $p to $driver"
	done
	bind_list=()
}
write_boot_config() {
	local tmp=$boot_config.tally-new
	# drop earlier isolation arguments, then append the new ones to every APPEND line
	sed -E '/^[[:space:]]*APPEND[[:space:]]/{s/ (isolcpus|nohz_full|rcu_nocbs|irqaffinity)=[^ ]*//g; s/$/ '"$iso_args"'/}' \
		"$boot_config" >"$tmp" && mv "$tmp" "$boot_config"
	echo "  wrote the isolation arguments into $boot_config (reboot to apply)"
}

failed=0
done_actions=" "
for a in "${actions[@]}"; do
	[[ $done_actions == *" $a "* ]] && continue # one action may cover several plan lines
	done_actions+="$a "
	$a || failed=1
done
if [ "$failed" = 1 ]; then
	echo "setup-node.sh: some changes failed (see above)."
	exit 1
fi
echo "setup-node.sh: done.${hints[0]:+ Kernel command-line hints above still need a reboot.}"
