#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# nccl_gpu.sh BUILD OUT — libnccl-net-tally.so inside PyTorch's own NCCL on a GPU host
# (issue 34; perf/README.md "NCCL plugin on a GPU host"). BUILD: a build directory or a
# perf/gpu_bundle.sh bundle (gpu_run.sh's step `nccl` calls this with its bundle).
# Two NCCL "nodes" on the one GPU (NCCL_HOSTID per process, perf/nccl_ddp.py), a tally-udpd
# on 127.0.0.1, and three transports between the nodes:
#   socket   NCCL's own socket transport (NCCL_NET=Socket), ring / tree
#   tallynet the plugin's net part only (NCCL_NET_PLUGIN=tally NCCL_NET=Tally, CollNet off)
#   collnet  the plugin with NCCL_COLLNET_ENABLE=1, NCCL_ALGO=allreduce:collnetchain (NCCL 2.28
#            disables CollNetDirect without an NVSwitch: src/graph/tuning.cc), sums on the
#            appliance (TALLY_DETERMINISTIC=1)
# For each: the DDP run (losses of every step, compared with socket's), and an nccl-tests
# style busbw sweep 1 KiB .. NCCL_GPU_MAX (default 1G). Whether NCCL really used CollNet is
# read from its log (NCCL_DEBUG_SUBSYS=INIT,NET,TUNING: "Algo CollNetChain", the plugin's
# "NET/Tally: CollNet job"). Everything goes to OUT/nccl_gpu.log; exit 0 only when every run
# ran, the losses are equal and CollNet was used. Without a GPU: exit 3, saying so.
set -u
[ $# -eq 2 ] || { echo "usage: $0 BUILD OUT" >&2; exit 2; }
B=$(cd "$1" && pwd) || exit 2
OUT=$2
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${TALLY_PERF_PYTHON:-$(command -v python3)}
MAX=${NCCL_GPU_MAX:-1G}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
LOG=$OUT/nccl_gpu.log
say() { echo "$*" | tee -a "$LOG"; }

PLUGIN=$B/gpu_agent/nccl/libnccl-net-tally.so
UDPD=$B/appliance/udpd/tally-udpd
for f in "$PLUGIN" "$UDPD" "$B/gpu_agent/libtally_agent.so"; do
	[ -f "$f" ] || { say "nccl_gpu.sh: $f missing (build it, or bundle with perf/gpu_bundle.sh)"; exit 2; }
done
if ! "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 3)' 2>>"$LOG"; then
	say "nccl_gpu.sh: no CUDA GPU visible to $PY (torch.cuda.is_available() is False or torch is missing): this run needs a GPU host"
	exit 3
fi
export LD_LIBRARY_PATH=$B/gpu_agent/nccl:$B/gpu_agent${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1 NCCL_SOCKET_IFNAME=lo

say "date: $(date -u +%FT%TZ)  commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || cat "$B/BUILT_FROM" 2>/dev/null)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | sed 's/^/gpu, driver: /' | tee -a "$LOG"
"$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", ".".join(map(str, torch.cuda.nccl.version())))' 2>&1 | tee -a "$LOG"

# the appliance: a free UDP port pair on loopback (base + core index)
PORT=$("$PY" -c '
import socket
for _ in range(50):
    a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); a.bind(("127.0.0.1", 0)); p = a.getsockname()[1]
    b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        b.bind(("127.0.0.1", p + 1)); print(p); break
    except OSError:
        pass
    finally:
        a.close(); b.close()')
"$UDPD" --addr 127.0.0.1 --port "$PORT" --cores 2 --mem 2G --open --ctl-socket "$OUT/udpd-ctl.sock" \
	--drain-timeout-ms 1000 >"$OUT/udpd.out" 2>"$OUT/udpd.err" &
UPID=$!
trap 'kill $UPID 2>/dev/null; wait $UPID 2>/dev/null' EXIT
for _ in $(seq 300); do
	grep -q "cores on port" "$OUT/udpd.err" && break
	kill -0 $UPID 2>/dev/null || break
	sleep 0.2
done
grep -q "cores on port" "$OUT/udpd.err" || { say "tally-udpd did not start:"; tee -a "$LOG" <"$OUT/udpd.err"; exit 1; }
say "appliance: tally-udpd 127.0.0.1:$PORT, 2 cores, --mem 2G"

rc=0
transport_env() { # transport -> env assignments
	case $1 in
	socket) echo "NCCL_NET=Socket" ;;
	tallynet) echo "NCCL_NET_PLUGIN=tally NCCL_NET=Tally NCCL_COLLNET_ENABLE=0 TALLY_NCCL_SOCKET_ADDR=127.0.0.1" ;;
	collnet) echo "NCCL_NET_PLUGIN=tally NCCL_NET=Tally NCCL_COLLNET_ENABLE=1 NCCL_ALGO=allreduce:collnetchain" \
		"TALLY_NCCL_SOCKET_ADDR=127.0.0.1 TALLY_APPLIANCES=127.0.0.1:$PORT TALLY_DETERMINISTIC=1" ;;
	esac
}
run() { # run NAME TIMEOUT ARGS...: nccl_ddp.py under a transport's env, logged
	local name=$1 t=$2 tr=${1%%-*}
	shift 2
	say "\$ env $(transport_env "$tr") nccl_ddp.py $*"
	# shellcheck disable=SC2046 # the assignments split into words on purpose
	env $(transport_env "$tr") NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,TUNING,ENV \
		timeout -k 10 "$t" "$PY" "$ROOT/perf/nccl_ddp.py" "$@" >"$OUT/$name.log" 2>&1
	local r=$?
	grep -v '^\S* *\S*:[0-9]*:[0-9]* \[[0-9]*\] NCCL INFO' "$OUT/$name.log" | tail -40 | tee -a "$LOG"
	say "  -> exit $r"
	[ $r -eq 0 ] || rc=1
	return $r
}

for tr in socket tallynet collnet; do
	run "$tr-train" 420 train "$OUT/loss_$tr.json" --steps 200
done
for tr in tallynet collnet; do
	if [ ! -f "$OUT/loss_$tr.json" ] || [ ! -f "$OUT/loss_socket.json" ]; then
		continue
	fi
	"$PY" - "$OUT/loss_socket.json" "$OUT/loss_$tr.json" "$tr" <<'EOF' 2>&1 | tee -a "$LOG"
import json, sys
a, b = (json.load(open(f))["losses"] for f in sys.argv[1:3])
same = sum(x == y for x, y in zip(a, b))
print("losses %s vs socket: %d of %d steps bit-equal, max |diff| %.3g, last %.6f vs %.6f" %
      (sys.argv[3], same, len(a), max(abs(x - y) for x, y in zip(a, b)), a[-1], b[-1]))
sys.exit(0 if same == len(a) == len(b) else 1)
EOF
	[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
done
if grep -q "NET/Tally: CollNet job" "$OUT/collnet-train.log" && grep -q "Algo CollNetChain" "$OUT/collnet-train.log"; then
	say "collnet: NCCL chose CollNetChain and the plugin joined the appliance: $(grep -c 'Algo CollNetChain' "$OUT/collnet-train.log") collectives"
else
	say "collnet: NCCL did NOT use CollNet (no 'Algo CollNetChain' / 'NET/Tally: CollNet job' in collnet-train.log); its reasons:"
	grep -iE 'collnet|Tally|threshold|Duplicate GPU' "$OUT/collnet-train.log" | head -30 | tee -a "$LOG"
	rc=1
fi
for tr in socket tallynet collnet; do
	run "$tr-busbw" 600 busbw --min 1K --max "$MAX"
done
say "=== nccl_gpu.sh done: exit $rc"
exit $rc
