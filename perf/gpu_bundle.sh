#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# gpu_bundle.sh BUILD OUT — packs what perf/gpu_run.sh needs on a GPU host that is not Debian 12
# and cannot install packages: the binaries of BUILD (a meson build with -Dcuda=enabled) in
# BUILD's own layout (so tally-perf, train.py and the tests find them as in a build tree), the
# shared libraries they load that are not the C library or the C++ runtime (in OUT/lib; the
# GPU host links only those it lacks), the DPDK drivers (OUT/pmds) and iproute2's ip (OUT/bin).
# libnccl is not packed (~200 MiB): gpu_run.sh uses the GPU host's own (PyTorch ships one).
set -eu
[ $# -eq 2 ] || { echo "usage: $0 BUILD OUT" >&2; exit 2; }
build=$1 out=$2
ninja -C "$build" >/dev/null
rm -rf "$out"
bins="appliance/tallyd appliance/udpd/tally-udpd control/tallyctl gpu_agent/libtally_agent.so
gpu_agent/tally-opt-bench perf/tally-perf perf/tally-worker tests/agent/agent_relay
tests/agent/test_opt_cuda tests/agent/test_agent_lanes_cuda"
for b in $bins; do
	[ -f "$build/$b" ] || { echo "$0: $build/$b missing (configure with -Dcuda=enabled)" >&2; exit 1; }
	mkdir -p "$out/$(dirname "$b")"
	cp "$build/$b" "$out/$b"
done
mkdir -p "$out/lib" "$out/pmds"
pmd_dir=$(pkg-config --variable=libdir libdpdk)/dpdk/pmds-23.0
# named .so: EAL's driver folder scan loads only *.so and *.so.23.0
for p in librte_net_memif librte_net_af_packet librte_mempool_ring librte_bus_vdev; do
	cp -L "$pmd_dir/$p.so.23" "$out/pmds/$p.so"
done
# iproute2's ip: network namespaces and veth pairs for tallyd on net_af_packet (train.py,
# tally-perf allreduce); GPU hosts' images often lack it
mkdir -p "$out/bin"
cp -L "$(command -v ip)" "$out/bin/ip"
# every ELF's libraries, transitively (ldd resolves the whole tree)
for f in $(find "$out" -type f ! -path "$out/lib/*"); do
	ldd "$f" 2>/dev/null | awk '$3 ~ /^\// {print $3}'
done | sort -u | while read -r lib; do
	case $(basename "$lib") in
	libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libstdc++.so*|libgcc_s.so*) ;;
	libnccl.so*|libtally_agent.so) ;;
	*) cp -L "$lib" "$out/lib/" ;;
	esac
done
# the commit it was built from, for the run's log
git -C "$(dirname "$0")" rev-parse HEAD > "$out/BUILT_FROM" 2>/dev/null || echo unknown > "$out/BUILT_FROM"
du -sh "$out"
