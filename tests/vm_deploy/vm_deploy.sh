#!/usr/bin/env bash
# vm_deploy.sh BUILDDIR — suite vm-deploy: boot the appliance disk that
# `deploy/build-image.sh --format disk` makes (systemd as PID 1) in QEMU (q35 + intel-iommu,
# TCG) with a management NIC (QEMU user network, ssh) and a data NIC (a tap in network
# namespace vmdeploy-ns), then check as an operator would:
#   boot: tally-firstboot set the node up (hugepages, 0000:00:05.0 on vfio-pci, isolation
#     written to syslinux.cfg), tallyd.service (Type=notify) READY on net_virtio;
#   operator: tallyctl status/stats/jobs as a member of group tally (and refused otherwise),
#     journalctl -u tallyd, systemctl reload (refused: the unit has no reload) and restart;
#   traffic: tally-worker ranks on the host push verified sums; the PyTorch job
#     (gpu_agent/examples/train.py, reduced: 2 workers, 6 epochs) trains to its accuracy;
#   upgrade with a job in flight (v2 .debs = the same tree with a bumped version), rollback,
#   reboot (config, hugepages, binding, isolation kept; first boot not repeated).
# Guest pieces are cached in /var/cache/tally-vm-deploy (TALLY_VM_DEPLOY_CACHE); a changed
# tree rebuilds them. Exit 77 with the reason when it cannot run here.
# TALLY_VM_DEPLOY_KEEP=1 keeps the run's directory (console log, qcow2 overlay).
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "needs root (network namespace, tap, image build)"
for t in qemu-system-x86_64 qemu-img ssh scp mkfs.ext4 mkfs.vfat mcopy syslinux sfdisk mkosi dpkg-buildpackage git; do
	command -v $t >/dev/null || skip "$t not installed (tests/run.sh --setup-only installs the VM tools)"
done
[ -f /usr/lib/syslinux/mbr/mbr.bin ] || skip "syslinux-common (mbr.bin) not installed"
[ -x "$build/perf/tally-worker" ] || skip "tally-worker not built in $build"
git -C "$top" rev-parse >/dev/null 2>&1 || skip "$top is not a git checkout (the image cache key needs it)"
[ -r /dev/net/tun ] || skip "no /dev/net/tun (tap for the data NIC)"
cache=${TALLY_VM_DEPLOY_CACHE:-/var/cache/tally-vm-deploy}
mkdir -p "$cache"
work=$(mktemp -d /tmp/vmdeploy-run.XXXXXX)
# shellcheck source=vm_lib.sh
source "$top/tests/vm_deploy/vm_lib.sh"
source "$top/tests/vm_deploy/vm_checks.sh"
cleanup() {
	vd_stop
	vd_net_down
	[ "${TALLY_VM_DEPLOY_KEEP:-0}" = 1 ] && echo "kept $work" || rm -rf "$work"
}
trap cleanup EXIT
ip netns list | grep -qw "$NS" && skip "network namespace $NS exists: another vm_deploy run?"

exec 9>"$cache/.lock"
flock -n 9 || skip "another vm_deploy run holds $cache/.lock"
[ -f "$cache/id_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -f "$cache/id_ed25519"
t0=$SECONDS
key=$(vd_key)
vd_debs "$key" || { echo "FAIL: building the .debs"; exit 1; }
vd_disk "$key" || { echo "FAIL: building the disk image"; exit 1; }
log "image pieces ready in $((SECONDS - t0)) s (cache $cache, key $key)"

vd_net_up
vd_boot
run_checks
echo
echo "== results"
printf '%s\n' "${results[@]}"
read -r t_ssh t_ready <"$work/boot-times" 2>/dev/null
echo "first boot to ssh: ${t_ssh:-?} s (host), to READY: ${t_ready:-?} s (guest monotonic); whole run $SECONDS s"
[ "$failed" -eq 0 ] || { echo "FAIL: $failed check(s) failed; console: $work/console.log"; TALLY_VM_DEPLOY_KEEP=1; exit 1; }
echo "PASS: all ${#results[@]} checks"
