#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# perf/gpu_bundle.sh packs no DPDK driver that the bundle's files also link: on a host without
# DPDK such a copy (librte_bus_vdev) loaded as a second vdev bus and net_af_packet failed to
# probe. The bundle of this build (without the CUDA binaries) passes the check, and the check
# fails, naming the file, once the bus library is put back among the drivers.
# test_gpu_bundle.sh SRCROOT BUILD
set -u
src=$1 build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$src"/perf/gpu_bundle.sh --no-cuda --no-ninja "$build" "$tmp/b" >"$tmp/log" 2>&1 ||
	fail "bundle: $(cat "$tmp/log")"
for f in appliance/tallyd perf/tally-perf perf/tally-worker pmds/librte_net_af_packet.so \
	pmds/librte_net_memif.so lib/librte_bus_vdev.so.23; do
	[ -f "$tmp/b/$f" ] || fail "bundle lacks $f"
done
[ -e "$tmp/b/pmds/librte_bus_vdev.so" ] && fail "the vdev bus library is among the drivers"
"$src"/perf/gpu_bundle.sh --check "$tmp/b" 2>"$tmp/err" || fail "check of a good bundle: $(cat "$tmp/err")"
cp "$tmp/b/lib/librte_bus_vdev.so.23" "$tmp/b/pmds/librte_bus_vdev.so"
if "$src"/perf/gpu_bundle.sh --check "$tmp/b" 2>"$tmp/err"; then
	fail "check passed with librte_bus_vdev among the drivers"
fi
grep -q "pmds/librte_bus_vdev.so is librte_bus_vdev.so.23" "$tmp/err" || fail "message: $(cat "$tmp/err")"
echo "ok: drivers only in pmds/, the duplicate bus is caught: $(cat "$tmp/err")"
