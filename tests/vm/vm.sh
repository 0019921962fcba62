#!/usr/bin/env bash
# tests/vm/vm.sh — boot a Debian 12 guest (Debian's 6.1 kernel, a debootstrap'd minbase root as
# the initramfs) under QEMU, run one script in it, and bring its exit status and /out back.
#
#   vm.sh check                       can VMs run here? prints why not and exits 77
#   vm.sh build [--packages "p1 p2"]  build (or find cached) the guest for that package list;
#                                     prints the guest's cache directory
#   vm.sh run --script FILE [--packages "p1 p2"] [--share DIR] [--out DIR] [--timeout S]
#             [--nics N] [--log FILE] [--append "kernel args"]
#                                     (console log: --log FILE, default $CACHE/logs/run-*.log)
#                                     boot the guest (built first if needed), run FILE as root
#                                     in it; exit status = the script's, 124 on timeout,
#                                     125 when the guest died without reporting one
#   vm.sh key [--packages "p1 p2"]    print the cache key (package list + kernel version)
#   vm.sh clean                       remove every cached guest
#
# In the guest: the script runs from / with bash, cwd /, as root (PID 1's child); --share DIR
# is a read-only copy at /share; whatever it leaves in /out ends up in --out DIR on the host;
# NICs eth0..eth{N-1} are virtio-net on one QEMU hub (nothing leaves this machine), down and
# without addresses; the kernel modules are there (modprobe works, no udev).
#
# Environment: TALLY_VM_CACHE (default /var/cache/tally-vm), TALLY_VM_KVM=1 (-enable-kvm -cpu
# host, for hosts with VMX/SVM; the default is TCG), TALLY_VM_MEM (2G), TALLY_VM_SMP (2),
# TALLY_VM_MIRROR (default: the host's apt source for Debian), TALLY_VM_SUITE (bookworm),
# TALLY_VM_KEEP=1 (keep the run's temp dir), TALLY_VM_VERBOSE=1 (echo the console live).
set -eEuo pipefail

readonly CACHE=${TALLY_VM_CACHE:-/var/cache/tally-vm}
readonly SUITE=${TALLY_VM_SUITE:-bookworm}
readonly MEM=${TALLY_VM_MEM:-2G}
readonly SMP=${TALLY_VM_SMP:-2}
# Bump when the guest's layout (init, pruning) changes: it is part of the cache key.
readonly LAYOUT=3
# Always in the guest: what init and the harness use.
readonly BASE_PACKAGES="kmod iproute2 procps"
readonly NEED_GB=3

log() { printf 'vm.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 2; }
usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }

# ---- host side: tools ------------------------------------------------------------------------
apt_install() { # apt_install PKG... — quietly, waiting for other engineers' dpkg locks
	[ "$(id -u)" -eq 0 ] || return 1
	log "installing ${*} (apt-get)"
	export DEBIAN_FRONTEND=noninteractive
	local opts=(-o DPkg::Lock::Timeout=600 -y -qq --no-install-recommends)
	apt-get install "${opts[@]}" "$@" </dev/null >/dev/null 2>&1 && return 0
	apt-get update -qq -o DPkg::Lock::Timeout=600 </dev/null >/dev/null 2>&1 || true
	apt-get install "${opts[@]}" "$@" </dev/null >/dev/null 2>&1
}

ensure_tools() { # installs what is missing; prints nothing on success
	local need=()
	command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
	command -v debootstrap >/dev/null || need+=(debootstrap)
	command -v cpio >/dev/null || need+=(cpio)
	command -v zstd >/dev/null || need+=(zstd)
	command -v base64 >/dev/null || need+=(coreutils)
	command -v flock >/dev/null || need+=(util-linux)
	[ ${#need[@]} -eq 0 ] || apt_install "${need[@]}" || true
}

# why_not: prints the reasons VMs cannot run here, one a line; nothing when they can.
why_not() {
	if [ "$(id -u)" -ne 0 ]; then
		echo "not root (debootstrap, the module tree and apt-get need root)"
		return
	fi
	ensure_tools
	local t
	for t in qemu-system-x86_64 debootstrap cpio zstd; do
		command -v "$t" >/dev/null || echo "no $t (apt-get install failed: no Debian mirror?)"
	done
	mkdir -p "$CACHE" 2>/dev/null || { echo "cannot create $CACHE"; return; }
	local avail_kb
	avail_kb=$(df -Pk "$CACHE" | awk 'NR==2 { print $4 }')
	if [ "${avail_kb:-0}" -lt $((NEED_GB * 1024 * 1024)) ] && ! ls -d "$CACHE"/guest-* >/dev/null 2>&1; then
		echo "not enough space under $CACHE: $((avail_kb / 1024)) MiB free, need ${NEED_GB} GiB"
	fi
	if [ "${TALLY_VM_KVM:-0}" = 1 ] && [ ! -w /dev/kvm ]; then
		echo "TALLY_VM_KVM=1 but /dev/kvm is not usable"
	fi
}

cmd_check() {
	local why
	why=$(why_not)
	if [ -n "$why" ]; then
		printf 'vm.sh: VMs cannot run here:\n' >&2
		printf '  %s\n' "$why" >&2
		exit 77
	fi
	echo "vm.sh: VMs can run here ($(qemu-system-x86_64 --version | head -1); accel $(accel_desc))"
}

accel_desc() { if [ "${TALLY_VM_KVM:-0}" = 1 ]; then echo kvm; else echo tcg; fi; }

# ---- guest pieces: package list, kernel, cache key -------------------------------------------
# The Debian mirror apt uses (deb822 .sources or one-line .list), first one for the main archive.
mirror() {
	if [ -n "${TALLY_VM_MIRROR:-}" ]; then echo "$TALLY_VM_MIRROR"; return; fi
	local m
	m=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
		awk 'BEGIN { RS = ""; FS = "\n" }
		     /(^|\n)Suites:[^\n]*[ \t]'"$SUITE"'([ \t]|$)/ && !/(^|\n)Enabled: *no/ {
			for (i = 1; i <= NF; i++) if ($i ~ /^URIs:/) { split($i, a, /[ \t]+/); print a[2]; exit } }')
	if [ -z "$m" ]; then
		m=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
			awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i !~ /^\[/ && $i !~ /=/ && $i !~ /\]$/) break;
			                   if ($(i + 1) == "'"$SUITE"'") { print $i; exit } }')
	fi
	echo "${m:-http://deb.debian.org/debian}"
}

# Sorted, de-duplicated, comma-separated: the harness's own packages plus the caller's.
package_list() { # package_list "p1 p2"
	# shellcheck disable=SC2086 # word lists
	printf '%s\n' $BASE_PACKAGES $1 | sort -u | paste -sd, -
}

# The kernel package linux-image-amd64 depends on now, and its candidate version.
kernel_pkg() {
	local p
	p=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
	if [ -z "$p" ]; then
		apt-get update -qq -o DPkg::Lock::Timeout=600 </dev/null >/dev/null 2>&1 || true
		p=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
	fi
	[ -n "$p" ] || die "apt-cache knows no linux-image-amd64 (no Debian mirror?)"
	echo "$p $(apt-cache policy "$p" | awk '/Candidate:/ { print $2 }')"
}

cache_key() { # cache_key PACKAGE-LIST KERNEL-PKG-AND-VERSION
	printf '%s\n' "layout $LAYOUT" "suite $SUITE" "packages $1" "kernel $2" | sha256sum | cut -c1-16
}

# Module trees no test here needs: dropping them keeps the initramfs (and guest RAM) small.
readonly PRUNE_MODULES="drivers/gpu drivers/media drivers/net/wireless drivers/net/ethernet
 drivers/staging drivers/bluetooth drivers/iio drivers/hid drivers/input drivers/usb drivers/scsi
 drivers/infiniband/hw drivers/mmc drivers/mtd drivers/isdn drivers/hwmon drivers/leds
 drivers/video drivers/platform drivers/power drivers/thunderbolt drivers/nfc drivers/misc
 drivers/ata drivers/md drivers/target drivers/net/can drivers/net/usb drivers/net/wwan
 drivers/net/ipa drivers/atm drivers/firewire drivers/fpga drivers/edac drivers/rtc sound
 net/bluetooth net/wireless net/mac80211 net/mac802154 net/nfc fs/ocfs2 fs/gfs2 fs/xfs fs/btrfs"

# The guest's /init: mounts, loads the modules for the devices present, runs /tally/script,
# reports on the serial console, powers off. It travels in each run's payload.
write_init() { # write_init ROOT
	cat >"$1/init" <<'INIT'
#!/bin/bash
# tally-vm guest init (tests/vm/vm.sh)
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=dumb
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null || true
mkdir -p /dev/pts /dev/shm /run /tmp /out
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /run
mount -t configfs configfs /sys/kernel/config 2>/dev/null || true
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null || true
[ -d /share ] && mount --bind /share /share && mount -o remount,ro,bind /share
hostname tally-vm
# No udev: cold-plug by hand, twice (virtio_pci's devices bring virtio ones with them).
for _ in 1 2; do
	cat /sys/bus/*/devices/*/modalias 2>/dev/null | sort -u | xargs -r modprobe -qab 2>/dev/null || true
done
ip link set lo up
echo 1 >/proc/sys/kernel/printk   # keep the kernel off the console while we report
exec </dev/null >/dev/ttyS0 2>&1
echo "@@TALLY-VM READY $(uname -r)@@"
cd /
bash /tally/script
rc=$?
sync
echo "@@TALLY-VM RC=$rc@@"
if [ -n "$(ls -A /out)" ]; then
	echo "@@TALLY-VM OUT BEGIN@@"
	tar -C /out -czf - . | base64 -w 76
	echo "@@TALLY-VM OUT END@@"
fi
echo "@@TALLY-VM DONE@@"
echo o >/proc/sysrq-trigger
sleep 30
INIT
	chmod 755 "$1/init"
}

# build_guest PACKAGES → GUEST_DIR, the cached guest's directory (vmlinuz, initrd.zst, info).
# Runs in this shell (not in $(...)) so that the EXIT trap removes a failed build's temp dir.
GUEST_DIR=
build_fail() { # build_fail LOG MESSAGE — keeps the log next to the cache, then dies
	cp "$1" "$CACHE/last-build-failure.log" 2>/dev/null || true
	tail -20 "$1" >&2
	die "$2 (log: $CACHE/last-build-failure.log)"
}
build_guest() {
	local pkgs kern key dir
	pkgs=$(package_list "$1")
	kern=$(kernel_pkg)
	key=$(cache_key "$pkgs" "$kern")
	dir=$CACHE/guest-$key
	GUEST_DIR=$dir
	if [ -f "$dir/info" ]; then return; fi
	mkdir -p "$CACHE"
	exec 8>"$CACHE/.lock-$key"
	flock 8 # a concurrent build of the same guest: wait for it, then use its result
	if [ -f "$dir/info" ]; then exec 8>&-; return; fi

	local t0=$SECONDS tmp mirror_url kpkg kver
	read -r kpkg kver <<<"$kern"
	mirror_url=$(mirror)
	tmp=$(mktemp -d "$CACHE/.build-$key.XXXXXX")
	BUILD_TMP=$tmp
	log "building guest $key: $kpkg $kver; packages $pkgs; mirror $mirror_url"
	(cd "$tmp" && apt-get download -o DPkg::Lock::Timeout=600 "$kpkg" >"$tmp/download.log" 2>&1) ||
		build_fail "$tmp/download.log" "apt-get download $kpkg failed"
	dpkg-deb -x "$tmp"/"$kpkg"_*.deb "$tmp/kernel"
	local kvers
	kvers=$(ls "$tmp/kernel/lib/modules")
	log "kernel $kvers unpacked ($((SECONDS - t0)) s); debootstrap (minbase + packages)"
	mkdir -p "$CACHE/debs"
	debootstrap --variant=minbase --include="$pkgs" --cache-dir="$CACHE/debs" \
		"$SUITE" "$tmp/root" "$mirror_url" >"$tmp/debootstrap.log" 2>&1 ||
		build_fail "$tmp/debootstrap.log" "debootstrap failed"
	log "debootstrap done ($((SECONDS - t0)) s); modules, init, initramfs"
	local r=$tmp/root
	rm -rf "$r"/var/cache/apt/archives/*.deb "$r"/var/lib/apt/lists/* "$r"/usr/share/doc \
		"$r"/usr/share/man "$r"/usr/share/info "$r"/usr/share/locale
	mkdir -p "$r/lib/modules"
	cp -a "$tmp/kernel/lib/modules/$kvers" "$r/lib/modules/"
	if [ "${TALLY_VM_ALL_MODULES:-0}" != 1 ]; then
		local d
		for d in $PRUNE_MODULES; do rm -rf "$r/lib/modules/$kvers/kernel/$d"; done
	fi
	chroot "$r" /sbin/depmod "$kvers" # the guest's kmod: the host may have none
	mkdir -p "$r/tally" "$r/out" "$r/share"
	(cd "$r" && find . -print0 | LC_ALL=C sort -z |
		cpio --null -o -H newc -R 0:0 --quiet | zstd -q -T0 -9 -o "$tmp/initrd.zst")
	mkdir -p "$tmp/guest"
	cp "$tmp/kernel/boot/vmlinuz-$kvers" "$tmp/guest/vmlinuz"
	mv "$tmp/initrd.zst" "$tmp/guest/initrd.zst"
	printf 'key=%s\nkernel=%s\nkernel_pkg=%s %s\npackages=%s\nmirror=%s\nbuilt=%s\nbuild_s=%s\n' \
		"$key" "$kvers" "$kpkg" "$kver" "$pkgs" "$mirror_url" "$(date -u +%FT%TZ)" \
		"$((SECONDS - t0))" >"$tmp/guest/info"
	rm -rf "$dir" # a half-made one (no info) from a killed build
	mv "$tmp/guest" "$dir"
	rm -rf "$tmp"
	BUILD_TMP=
	exec 8>&-
	log "guest $key built in $((SECONDS - t0)) s: $(du -sh "$dir" | cut -f1) in $dir"
}

# ---- run -------------------------------------------------------------------------------------
QEMU_PID=
RUN_TMP=
BUILD_TMP=
cleanup() {
	local rc=$?
	if [ -n "$QEMU_PID" ] && kill -0 "$QEMU_PID" 2>/dev/null; then
		kill "$QEMU_PID" 2>/dev/null || true
		sleep 1
		kill -9 "$QEMU_PID" 2>/dev/null || true
	fi
	[ -z "$BUILD_TMP" ] || rm -rf "$BUILD_TMP"
	if [ -n "$RUN_TMP" ] && [ "${TALLY_VM_KEEP:-0}" != 1 ]; then rm -rf "$RUN_TMP"; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'log "failed (status $?) at line $LINENO: $BASH_COMMAND"' ERR
trap 'exit 130' INT
trap 'exit 143' TERM

cmd_run() {
	local script='' share='' out='' timeout=600 nics=1 logf='' packages='' append=
	while [ $# -gt 0 ]; do
		case "$1" in
		--script) script=$2; shift ;;
		--share) share=$2; shift ;;
		--out) out=$2; shift ;;
		--timeout) timeout=$2; shift ;;
		--nics) nics=$2; shift ;;
		--log) logf=$2; shift ;;
		--packages) packages=$2; shift ;;
		--append) append=$2; shift ;;
		*) die "run: unknown argument '$1'" ;;
		esac
		shift
	done
	[ -f "$script" ] || die "run: --script FILE is required (and must exist)"
	[ -z "$share" ] || [ -d "$share" ] || die "run: --share $share is not a directory"
	[[ $timeout =~ ^[0-9]+$ ]] || die "run: --timeout takes seconds"
	if ! [[ $nics =~ ^[0-9]$ ]] || [ "$nics" -gt 8 ]; then die "run: --nics takes 0..8"; fi
	local why
	why=$(why_not)
	[ -z "$why" ] || { printf 'vm.sh: VMs cannot run here:\n' >&2; printf '  %s\n' "$why" >&2; exit 77; }

	build_guest "$packages"
	local guest=$GUEST_DIR
	RUN_TMP=$(mktemp -d "${TMPDIR:-/tmp}/tally-vm-run.XXXXXX")
	if [ -z "$logf" ]; then # kept: $CACHE/logs, the newest 20
		mkdir -p "$CACHE/logs"
		logf=$CACHE/logs/run-$(date +%Y%m%d-%H%M%S)-$$.log
		{ ls -1t "$CACHE"/logs/run-*.log 2>/dev/null || true; } | tail -n +20 | xargs -r rm -f
	fi
	mkdir -p "$(dirname "$logf")"
	: >"$logf"

	# The run's own pieces: /tally/script and /share, one more (uncompressed) cpio appended
	# to the cached initrd; the kernel unpacks the archives one after the other.
	local p=$RUN_TMP/payload
	mkdir -p "$p/tally"
	cp "$script" "$p/tally/script"
	write_init "$p" # per run, so a change to init needs no rebuild of the cached guest
	if [ -n "$share" ]; then mkdir -p "$p/share" && cp -a "$share/." "$p/share/"; fi
	(cd "$p" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc -R 0:0 --quiet) >"$RUN_TMP/payload.cpio"
	# The kernel aligns an uncompressed archive's headers to 4 bytes from the start of the
	# whole initrd, and skips zeros between archives: pad the compressed one to 4.
	local pad=$(((4 - $(stat -c %s "$guest/initrd.zst") % 4) % 4))
	{ cat "$guest/initrd.zst"; head -c "$pad" /dev/zero; cat "$RUN_TMP/payload.cpio"; } >"$RUN_TMP/initrd"

	local qemu=(qemu-system-x86_64 -nodefaults -no-user-config -machine pc -m "$MEM" -smp "$SMP"
		-display none -monitor none -serial "file:$logf" -no-reboot
		-kernel "$guest/vmlinuz" -initrd "$RUN_TMP/initrd"
		-append "console=ttyS0 panic=-1 quiet loglevel=4 $append")
	if [ "${TALLY_VM_KVM:-0}" = 1 ]; then
		qemu+=(-enable-kvm -cpu host)
	else
		qemu+=(-accel "tcg,thread=multi" -cpu max)
	fi
	local i
	for ((i = 0; i < nics; i++)); do # one hub, no uplink: traffic stays in the guest
		qemu+=(-netdev "hubport,id=n$i,hubid=0" -device "virtio-net-pci,netdev=n$i,mac=52:54:00:7a:11:$(printf %02x $((16 + i)))")
	done

	local t0=$SECONDS
	log "booting $(sed -n 's/^kernel=//p' "$guest/info") ($(accel_desc), -m $MEM -smp $SMP, $nics NIC(s), timeout ${timeout}s); console: $logf"
	local tail_pid=
	if [ "${TALLY_VM_VERBOSE:-0}" = 1 ]; then
		tail -F -n +1 "$logf" 2>/dev/null >&2 &
		tail_pid=$!
	fi
	"${qemu[@]}" </dev/null >"$RUN_TMP/qemu.out" 2>&1 &
	QEMU_PID=$!
	local timed_out=0
	while kill -0 "$QEMU_PID" 2>/dev/null; do
		if grep -aq '@@TALLY-VM DONE@@' "$logf" 2>/dev/null; then
			sleep 5 # poweroff follows; give it a moment, then it is ours to end
			kill "$QEMU_PID" 2>/dev/null || true
			break
		fi
		if [ $((SECONDS - t0)) -ge "$timeout" ]; then
			timed_out=1
			kill "$QEMU_PID" 2>/dev/null || true
			break
		fi
		sleep 1
	done
	wait "$QEMU_PID" 2>/dev/null || true
	QEMU_PID=
	[ -z "$tail_pid" ] || kill "$tail_pid" 2>/dev/null || true
	if [ "$timed_out" = 1 ]; then
		log "timeout after ${timeout}s (QEMU killed); console: $logf"
		tail -20 "$logf" | tr -d '\r' >&2
		exit 124
	fi

	local rc
	rc=$(tr -d '\r' <"$logf" | sed -n 's/^@@TALLY-VM RC=\([0-9]*\)@@$/\1/p' | tail -1)
	if [ -z "$rc" ]; then
		log "the guest ended without reporting a status ($((SECONDS - t0)) s); console: $logf"
		tail -30 "$logf" | tr -d '\r' >&2
		grep -v 'is not connected to host network' "$RUN_TMP/qemu.out" | sed 's/^/qemu: /' >&2 || true
		exit 125
	fi
	if [ -n "$out" ] && grep -aq '@@TALLY-VM OUT BEGIN@@' "$logf"; then
		mkdir -p "$out"
		tr -d '\r' <"$logf" | sed -n '/^@@TALLY-VM OUT BEGIN@@$/,/^@@TALLY-VM OUT END@@$/p' |
			grep -E '^[A-Za-z0-9+/=]+$' | base64 -d | tar -C "$out" -xzf - ||
			{ log "could not unpack /out from the console"; exit 125; }
	fi
	log "guest script exited $rc ($((SECONDS - t0)) s)"
	exit "$rc"
}

cmd_build() {
	local packages=
	while [ $# -gt 0 ]; do
		case "$1" in
		--packages) packages=$2; shift ;;
		*) die "build: unknown argument '$1'" ;;
		esac
		shift
	done
	local why
	why=$(why_not)
	[ -z "$why" ] || { printf 'vm.sh: VMs cannot run here:\n' >&2; printf '  %s\n' "$why" >&2; exit 77; }
	build_guest "$packages"
	echo "$GUEST_DIR"
}

cmd_key() {
	local packages=
	[ "${1:-}" != --packages ] || packages=${2:-}
	cache_key "$(package_list "$packages")" "$(kernel_pkg)"
}

main() {
	local sub=${1:-}
	[ $# -eq 0 ] || shift
	case "$sub" in
	check) cmd_check ;;
	build) cmd_build "$@" ;;
	run) cmd_run "$@" ;;
	key) cmd_key "$@" ;;
	clean) rm -rf "${CACHE:?}"/guest-* "$CACHE"/.build-* "$CACHE"/.lock-* && log "cleaned $CACHE (the .deb cache $CACHE/debs stays)" ;;
	-h | --help | help) usage ;;
	*) usage >&2; exit 2 ;;
	esac
}
main "$@"
