#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# gpu_bundle.sh BUILD OUT — packs what perf/gpu_run.sh needs on a GPU host that is not Debian 12
# and cannot install packages: the binaries of BUILD (a meson build with -Dcuda=enabled) in
# BUILD's own layout (so tally-perf, train.py and the tests find them as in a build tree), the
# shared libraries they load that are not the C library or the C++ runtime (in OUT/lib; the
# GPU host links only those it lacks), the DPDK drivers (OUT/pmds) and iproute2's ip (OUT/bin).
# libnccl is not packed (~200 MiB): gpu_run.sh uses the GPU host's own (PyTorch ships one).
#   --no-cuda      without the CUDA binaries (a build without nvcc: the appliance steps only)
#   --no-ninja     BUILD as it is (no ninja run first; the test suite's own build)
# gpu_bundle.sh --check OUT: fails when a file in OUT/pmds is also a library that the bundle's
# binaries or drivers link (see the drivers below); the bundle runs it on itself.
set -eu
check() { # check OUT: no SONAME of pmds/ among the NEEDED of the ELF files (drivers included)
	needed=$(find "$1" -type f -exec readelf -d {} + 2>/dev/null |
		sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort -u)
	bad=0
	for p in "$1"/pmds/*.so; do
		so=$(readelf -d "$p" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
		if printf '%s\n' "$needed" | grep -qxF "$so"; then
			echo "$0: $p is $so, which the bundled files link: EAL would load it twice" >&2
			bad=1
		fi
	done
	return $bad
}
if [ "${1:-}" = --check ]; then
	[ $# -eq 2 ] || { echo "usage: $0 --check OUT" >&2; exit 2; }
	check "$2"
	exit
fi
cuda=1 ninja=1
while [ $# -gt 2 ]; do
	case $1 in
	--no-cuda) cuda=0 ;;
	--no-ninja) ninja=0 ;;
	*) break ;;
	esac
	shift
done
[ $# -eq 2 ] || { echo "usage: $0 [--no-cuda] [--no-ninja] BUILD OUT | --check OUT" >&2; exit 2; }
build=$1 out=$2
[ $ninja = 1 ] && ninja -C "$build" >/dev/null
rm -rf "$out"
bins="appliance/tallyd appliance/udpd/tally-udpd control/tallyctl gpu_agent/libtally_agent.so
perf/tally-perf perf/tally-worker perf/tally-linegen tests/agent/agent_relay
gpu_agent/nccl/libnccl-net-tally.so perf/tally-nccl-perf"
[ $cuda = 1 ] && bins="$bins gpu_agent/tally-opt-bench tests/agent/test_opt_cuda
tests/agent/test_agent_lanes_cuda"
for b in $bins; do
	[ -f "$build/$b" ] || { echo "$0: $build/$b missing (configure with -Dcuda=enabled)" >&2; exit 1; }
	mkdir -p "$out/$(dirname "$b")"
	cp "$build/$b" "$out/$b"
done
# OpenMPI's allreduce (tally-perf allreduce --impl mpi): built where libopenmpi-dev was at
# configure time; the host brings its own mpirun and libmpi (same 4.x ABI)
[ -f "$build/perf/tally-perf-mpi" ] && cp "$build/perf/tally-perf-mpi" "$out/perf/"
mkdir -p "$out/lib" "$out/pmds"
pmd_dir=$(pkg-config --variable=libdir libdpdk)/dpdk/pmds-23.0
# Drivers only: EAL dlopens every *.so of its driver folder (named .so: the scan skips other
# suffixes), so a library the drivers link (librte_bus_vdev) must not be there: on a host
# without DPDK the folder's copy is another file than lib/'s, loads as a second vdev bus, and a
# --vdev whose driver registered on the other one fails to probe ("failed to initialize
# net_af_packet0 device", no driver message). The bus comes from lib/, as the drivers need it.
for p in librte_net_memif librte_net_af_packet librte_mempool_ring; do
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
	libmpi.so*|libopen-rte.so*|libopen-pal.so*) ;; # the host's, with its mpirun
	*) cp -L "$lib" "$out/lib/" ;;
	esac
done
check "$out"
# the commit it was built from, for the run's log
git -C "$(dirname "$0")" rev-parse HEAD > "$out/BUILT_FROM" 2>/dev/null || echo unknown > "$out/BUILT_FROM"
du -sh "$out"
