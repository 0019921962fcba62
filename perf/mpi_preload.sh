#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# mpi_preload.sh — MPI_Allreduce (f32 sum) latency and bandwidth per size, libtally_mpi
# preloaded (through one tally-udpd on loopback) vs the plain MPI_Allreduce, for Open MPI
# and MPICH, 4 ranks on this host, in one run (compare ratios within a run, MEASURED.md).
#   perf/mpi_preload.sh BUILD_DIR [SIZES (bytes, default 1K..256M x4)] [RANKS (default 4)]
# Prints one row per (MPI, size): seconds per allreduce (the slowest rank's mean over the
# timed rounds), algorithm bandwidth (bytes / seconds), plain/tally time ratio; every
# result is verified by tally-perf-mpi (ok=false rows are flagged).
set -u
b=$(realpath "${1:?usage: mpi_preload.sh BUILD_DIR [SIZES] [RANKS]}")
sizes=${2:-"1024 4096 16384 65536 262144 1048576 4194304 16777216 67108864 268435456"}
np=${3:-4}
dir=$(mktemp -d /tmp/tally-mpi-perf.XXXXXX)
udpd_pid=
trap '[ -n "$udpd_pid" ] && kill "$udpd_pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT
unset MALLOC_PERTURB_
port=$(python3 -c 'import socket;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
"$b/appliance/udpd/tally-udpd" --addr 127.0.0.1 --port "$port" --cores 2 --open --mem 2G \
	--ctl-socket "$dir/ctl.sock" >"$dir/udpd.log" 2>&1 &
udpd_pid=$!
sleep 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export TALLY_APPLIANCES=127.0.0.1:$port TALLY_MPI_THRESHOLD=1024
# run MPI SIZE ROUNDS PRELOAD: "seconds-per-allreduce ok"
run() {
	local exe="$b/perf/tally-perf-mpi-$1" pre=() out
	[ "$4" = tally ] && pre=("$b/gpu_agent/mpi/libtally_mpi$([ "$1" = mpich ] && echo _mpich).so")
	if [ "$1" = ompi ]; then
		out=$(timeout 600 mpirun.openmpi --oversubscribe -np "$np" --mca btl self,vader \
			${pre:+-x LD_PRELOAD="${pre[0]}"} -x TALLY_APPLIANCES -x TALLY_MPI_THRESHOLD \
			"$exe" "$2" "$3" 2 2>&1)
	else
		out=$(LD_PRELOAD="${pre[0]:-}" timeout 600 mpirun.mpich -np "$np" "$exe" "$2" "$3" 2 2>&1)
	fi
	echo "$out" | python3 -c 'import json,sys
lines=sys.stdin.readlines()
rows=[json.loads(l) for l in lines if l.startswith("{")]
r=int(sys.argv[1])
if len(rows)!=int(sys.argv[2]):
    print("nan false")
    sys.stderr.write("".join(l for l in lines if not l.startswith("{"))[-800:])
    sys.exit()
print(max(x["seconds"] for x in rows)/r, "true" if all(x["ok"] for x in rows) else "false")' "$3" "$np"
}
printf "%-6s %10s %12s %12s %11s %11s %7s %s\n" mpi bytes plain_s tally_s plain_GB/s tally_GB/s ratio ok
for m in ompi mpich; do
	for s in $sizes; do
		r=$((s >= 268435456 ? 3 : s >= 16777216 ? 5 : s >= 1048576 ? 20 : 100))
		read -r tp okp <<<"$(run $m "$s" $r plain)"
		read -r tt okt <<<"$(run $m "$s" $r tally)"
		python3 -c 'import sys
m,s,tp,tt,okp,okt=sys.argv[1],int(sys.argv[2]),float(sys.argv[3]),float(sys.argv[4]),sys.argv[5],sys.argv[6]
print(f"{m:<6} {s:>10} {tp:>12.6f} {tt:>12.6f} {s/tp/1e9:>11.3f} {s/tt/1e9:>11.3f} {tp/tt:>7.2f} {okp}/{okt}")' \
			"$m" "$s" "$tp" "$tt" "$okp" "$okt"
	done
done
