#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# nccl_gpu_script.sh BUILD — perf/nccl_gpu.sh's plumbing without a GPU: a stand-in for python3
# (it claims CUDA, and plays perf/nccl_ddp.py by printing what NCCL would) checks that the
# script starts a real tally-udpd, hands each transport its environment (the collnet run:
# NCCL_NET_PLUGIN=tally, NCCL_COLLNET_ENABLE=1, NCCL_ALGO, TALLY_APPLIANCES naming that
# appliance), compares the losses and reads NCCL's log: exit 0 when all agree; 1 when the
# losses differ or CollNet was not used; 3 at once with no GPU (the real python3 here).
set -u
[ $# -eq 1 ] || { echo "usage: $0 BUILD" >&2; exit 2; }
B=$1
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d /tmp/tally-nccl-gpu-script.XXXXXX)
trap 'rm -rf "$T"' EXIT
cat >"$T/fakepy" <<'PY'
#!/bin/bash
case "$1" in
-c) case "$2" in
	*is_available*) exit 0 ;;
	*"import torch; print"*) echo "torch stand-in"; exit 0 ;;
	*) exec python3 "$@" ;;
	esac ;;
-) exec python3 "$@" ;;
*nccl_ddp.py)
	l=0.5
	if [ "${NCCL_COLLNET_ENABLE:-0}" = 1 ]; then
		# the appliance the script started must be in TALLY_APPLIANCES and answer: its port is bound
		p=${TALLY_APPLIANCES##*:}
		python3 -c "import socket,sys; s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)
try: s.bind(('127.0.0.1', $p)); sys.exit(1)
except OSError: sys.exit(0)" || { echo "TALLY_APPLIANCES=$TALLY_APPLIANCES: nothing bound there"; exit 1; }
		[ "$NCCL_NET_PLUGIN" = tally ] && [ "$NCCL_ALGO" = allreduce:collnetchain ] || exit 1
		l=${STUB_LOSS:-0.5}
		if [ -z "${STUB_NO_COLLNET:-}" ]; then
			echo "h:1:2 [0] NCCL INFO NET/Tally: CollNet job 5 rank 0 of 2 on 1 appliance(s)"
			echo "h:1:2 [0] NCCL INFO AllReduce: 4 Bytes -> Algo CollNetChain proto Simple"
		fi
	fi
	[ "$2" = train ] && echo "{\"losses\": [1.0, $l]}" >"$3"
	exit 0 ;;
esac
exit 9
PY
chmod +x "$T/fakepy"
bad=0
expect() { # expect RC NAME ENV...
	local want=$1 name=$2
	shift 2
	# MALLOC_PERTURB_ (meson) would make tally-udpd write its whole --mem at start
	env -u MALLOC_PERTURB_ "$@" timeout -k 5 120 "$ROOT/perf/nccl_gpu.sh" "$B" "$T/$name" >"$T/$name.txt" 2>&1
	local rc=$?
	if [ $rc -ne "$want" ]; then
		echo "FAIL: $name: exit $rc, want $want"; cat "$T/$name.txt"; bad=1
	else
		echo "ok: $name: exit $rc"
	fi
}
expect 0 agree TALLY_PERF_PYTHON="$T/fakepy"
grep -q "losses collnet vs socket: 2 of 2 steps bit-equal" "$T/agree.txt" || { echo "FAIL: no loss comparison"; bad=1; }
expect 1 losses-differ TALLY_PERF_PYTHON="$T/fakepy" STUB_LOSS=0.25
expect 1 no-collnet TALLY_PERF_PYTHON="$T/fakepy" STUB_NO_COLLNET=1
grep -q "NCCL did NOT use CollNet" "$T/no-collnet.txt" || { echo "FAIL: no-collnet not said"; bad=1; }
expect 3 no-gpu TALLY_PERF_PYTHON="$(command -v python3)"
grep -q "no CUDA GPU visible" "$T/no-gpu.txt" || { echo "FAIL: no-gpu not said"; bad=1; }
exit $bad
