#!/bin/bash
# tests/e2e/e2e_idle.sh — tallyd's idle wait, functional only (timing goals live in perf
# output): tallyd with the default `idle = interrupt` on a port with RX interrupts (net_tap)
# and on one without (net_af_packet on a veth, which falls back to capped sleeps); each is
# left idle, `tallyctl status` must name the mode each core uses and whether the port has RX
# interrupts, then 2 workers run 1 MiB rounds against the idle appliance and must verify.
# usage: e2e_idle.sh --bin BUILD_DIR --device tap|afpacket
set -u
BIN="" DEVICE=tap
while [ $# -gt 0 ]; do
	case "$1" in
	--bin) BIN=$2; shift 2 ;;
	--device) DEVICE=$2; shift 2 ;;
	*) echo "usage: $0 --bin BUILD_DIR --device tap|afpacket" >&2; exit 2 ;;
	esac
done
E2E_TAG=i
# shellcheck source=tests/e2e/lib.sh
. "$(dirname "$0")/lib.sh"
e2e_require_netns
TALLYD="$BIN/appliance/tallyd" WORKER="$BIN/perf/tally-worker" CTL="$BIN/control/tallyctl"
for b in "$TALLYD" "$WORKER" "$CTL"; do [ -x "$b" ] || e2e_fail "no $b"; done

port=9170 app_ip=10.98.0.1
e2e_ns a
case "$DEVICE" in
tap)
	# tallyd creates the tap inside namespace a; the workers run there too (MTU 1500: the
	# tap cannot transmit larger frames, so 1 KiB chunks)
	dev="net_tap0,iface=${ID}t0" want_mode=interrupt want_intr=true wns=a wip=10.98.0.2/24
	chunk=1024 extra=(--mtu 1500 --frame-size 2048 --max-chunk 1024)
	;;
afpacket)
	e2e_ns w
	e2e_veth a a0 w w0 9000
	e2e_addr w w0 10.98.0.2/24
	dev="net_af_packet0,iface=${ID}a0,framesz=9216,blocksz=36864,framecnt=2048,qpairs=1"
	want_mode=sleep want_intr=false wns=w wip="" chunk=8192 extra=()
	;;
*) e2e_fail "unknown device '$DEVICE'" ;;
esac
e2e_bg a appliance "$TALLYD" --port "$dev" --ip $app_ip/24 --base-port $port --open-admission \
	--mem 256M --log-level info "${extra[@]}" --ctl-socket "$E2E_TMP/ctl.sock" \
	-- --no-huge --no-pci -m 1024 --file-prefix "$ID" --lcores "0@0,1@1"
app_pid=$E2E_LAST_PID
e2e_wait_log appliance "ready" 60 $app_pid
if [ -n "$wip" ]; then
	ip -n "$ID$wns" addr add "$wip" dev "${ID}t0" || e2e_fail "address on the tap"
	ip -n "$ID$wns" link set "${ID}t0" up
fi
grep -q "idle = $want_mode" "$E2E_TMP/appliance.log" || e2e_fail "tallyd did not log idle = $want_mode"

sleep 1 # idle: the lcore is waiting (interrupt) or sleeping when the round starts
"$CTL" --socket "$E2E_TMP/ctl.sock" --json status >"$E2E_TMP/status.json" ||
	e2e_fail "tallyctl status failed"
$PY - "$E2E_TMP/status.json" "$want_mode" "$want_intr" <<'EOF' || e2e_fail "status: idle mode not reported as expected"
import json, sys
s = json.load(open(sys.argv[1]))
s = s.get("result", s)
modes = [c.get("idle") for c in s["cores"]]
intr = [p.get("rx_interrupts") for p in s["ports"]]
print("idle per core:", modes, "rx_interrupts per port:", intr)
assert modes == [sys.argv[2]], modes
assert intr == [sys.argv[3] == "true"], intr
assert all(c.get("idle_waits", 0) > 0 for c in s["cores"]), "an idle core never waited"
EOF

pids=()
for r in 0 1; do
	e2e_bg $wns "w$r" "$WORKER" --host $app_ip --port $port --job 5 --token 1 --rank $r \
		--world 2 --bytes 1M --keys 4 --rounds 3 --chunk $chunk --json
	pids+=("$E2E_LAST_PID")
done
e2e_wait_pids 120 "${pids[@]}" || e2e_fail "a worker failed"
for r in 0 1; do
	grep -q '"ok": *true' "$E2E_TMP/w$r.log" || e2e_fail "worker $r did not verify"
done
e2e_stop $app_pid
e2e_log "idle = $want_mode on $DEVICE: reported, 1 MiB rounds verified"
