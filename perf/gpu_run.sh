#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# gpu_run.sh BUNDLE OUT [STEP...] — the GPU host's runs (perf/README.md, "On a GPU host"), from a
# bundle made by perf/gpu_bundle.sh inside the source tree (BUNDLE=build-gpu: train.py and the
# tests find it as a build directory). Steps (default all, in this order):
#   env        the host: OS, CPUs, GPU, driver, CUDA, PyTorch; which bundled libraries it lacks
#   cuda       the CUDA tests: test_opt_cuda, test_agent_lanes_cuda
#   optbench   tally-opt-bench at 1e6..1e9 elements
#   train      tests/agent/test_train_cuda.py (2 ranks sharing the GPU, Tally vs gloo)
#   trainwide  the same, hidden 2048 (2.2 M parameters)
#   line       tally-perf line, 1 2 4 8 DPDK workers on net_memif, aggregation vs --io-forward
#   engine     tally-perf engine (one core)
#   allreduce  tally-perf allreduce W=4, Tally vs gloo vs OpenMPI (the host's mpirun), 1 MiB and 64 MiB
#   nccl       libnccl-net-tally.so in PyTorch's NCCL: DDP losses and busbw vs NCCL's socket
#              transport, two NCCL "nodes" on the GPU (perf/nccl_gpu.sh; OUT/nccl/)
# Everything goes to OUT/gpu_run.log (and the figures' JSON lines to OUT/results.jsonl).
set -u
[ $# -ge 2 ] || { echo "usage: $0 BUNDLE OUT [STEP...]" >&2; exit 2; }
B=$(cd "$1" && pwd) || exit 2
OUT=$2
shift 2
STEPS=${*:-env cuda optbench train trainwide line engine allreduce nccl}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$OUT"
LOG=$OUT/gpu_run.log
RES=$OUT/results.jsonl
PY=$(command -v python3)

say() { echo "$*" | tee -a "$LOG"; }
run() { # run TIMEOUT CMD...: logged with its exit status
	local t=$1
	shift
	say "\$ $*"
	timeout -k 5 "$t" "$@" >>"$LOG" 2>&1
	local rc=$?
	say "  -> exit $rc"
	return $rc
}

# Libraries: the bundle's, only those this host lacks; libnccl from the host (PyTorch's wheel).
LIBS=/tmp/tally-gpu-lib
rm -rf "$LIBS" && mkdir -p "$LIBS"
for f in "$B"/lib/*; do
	so=$(basename "$f")
	ldconfig -p | grep -q "[[:space:]]$so " || ln -s "$f" "$LIBS/$so"
done
NCCL=$("$PY" -c 'import nvidia.nccl as n, os; print(os.path.join(list(n.__path__)[0], "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH=$LIBS:$B/gpu_agent${NCCL:+:$NCCL}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# DPDK's drivers where its EAL looks for them (only in a folder this script made: a host
# with DPDK installed keeps its own)
PMDS=/usr/lib/x86_64-linux-gnu/dpdk/pmds-23.0
if [ ! -d "$PMDS" ] || [ -f "$PMDS/.tally-gpu-bundle" ]; then
	# emptied first: a driver left by an older bundle is loaded all the same
	mkdir -p "$PMDS" && rm -f "$PMDS"/*.so && cp "$B"/pmds/* "$PMDS"/ && touch "$PMDS/.tally-gpu-bundle"
fi
# iproute2 where the host has none
command -v ip >/dev/null || export PATH=$PATH:$B/bin
export TALLY_AGENT_LIB=$B/gpu_agent/libtally_agent.so TALLY_TEST_UDPD=$B/appliance/udpd/tally-udpd
export TALLY_TEST_RELAY=$B/tests/agent/agent_relay TALLY_TEST_TALLYD=$B/appliance/tallyd
export TALLY_BUILD=$B TALLY_PERF_SCRIPTS=$ROOT/perf TALLY_PERF_PYTHON=$PY PYTHONUNBUFFERED=1

step_env() {
	say "date: $(date -u +%FT%TZ)  bundle: $(tr '\n' ' ' <"$B/BUILT_FROM")"
	run 10 sh -c 'uname -a; . /etc/os-release; echo "$PRETTY_NAME"; nproc; free -g | head -2; lscpu | grep -E "Model name|NUMA node"'
	run 30 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv
	run 10 sh -c 'nvcc --version | tail -2'
	run 60 "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0), "nccl", torch.cuda.nccl.version())'
	say "bundled libraries linked (host lacks them): $(ls "$LIBS" | tr '\n' ' ')"
	say "libnccl from: ${NCCL:-none found}"
	for f in "$B"/appliance/tallyd "$B"/appliance/udpd/tally-udpd "$B"/perf/tally-perf "$B"/perf/tally-worker \
		"$B"/gpu_agent/libtally_agent.so "$B"/tests/agent/test_opt_cuda; do
		ldd "$f" | grep "not found" | sed "s|^|  $(basename "$f"): |" | tee -a "$LOG"
	done
	run 20 sh -c 'ip netns add tlyprobe && ip link add tlyp0 type veth peer name tlyp1 && echo "netns and veth: ok"; ip link del tlyp0 2>/dev/null; ip netns del tlyprobe 2>/dev/null; true'
}

step_cuda() {
	run 180 "$B"/tests/agent/test_opt_cuda
	run 180 "$B"/tests/agent/test_agent_lanes_cuda
}

step_optbench() {
	run 240 "$B"/gpu_agent/tally-opt-bench
	run 240 sh -c "'$B/gpu_agent/tally-opt-bench' --json --tensors 64 | grep '^{' | tee -a '$RES'"
}

step_train() {
	run 420 "$PY" "$ROOT"/tests/agent/test_train_cuda.py
}

step_trainwide() { # the same with a 2.2 M-parameter MLP (8.8 MB of gradients per step)
	run 420 env TALLY_TEST_HIDDEN=2048 "$PY" "$ROOT"/tests/agent/test_train_cuda.py
}

step_line() {
	for w in 1 2 4 8; do
		run 120 sh -c "'$B/perf/tally-perf' line --workers $w --seconds 5 --json | tee -a '$RES'"
	done
}

step_engine() {
	run 120 sh -c "'$B/perf/tally-perf' engine --json | tee -a '$RES'"
}

step_allreduce() {
	for s in 1M 64M; do
		run 240 "$B"/perf/tally-perf allreduce --impl tally --impl gloo --impl mpi --workers 4 --size $s --rounds 20
	done
}

step_nccl() {
	run 2400 "$ROOT"/perf/nccl_gpu.sh "$B" "$OUT/nccl"
}

for s in $STEPS; do
	say "=== $s"
	"step_$s"
done
say "=== done"
