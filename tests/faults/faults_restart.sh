#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# faults_restart.sh --bin BUILD --appliance udpd|tallyd — an appliance restart is a pause,
# not a lost job (suite 'faults'), with real processes in network namespaces:
#  1. kill -9 of the appliance mid-round, a fresh one started on the same address: every
#     tally-worker finishes its rounds with verified sums (deterministic keys: bit-exact)
#     and reports the restart it survived;
#  2. SIGTERM with a drain timeout while a round is open (one rank of two never comes): the
#     appliance exits with status 3 (it abandoned an open round), and the worker is told.
# tallyd runs on net_af_packet over a veth (no hugepages, no PCI), tally-udpd on loopback.
set -u
BIN="" APPL=udpd
while [ $# -gt 0 ]; do
	case "$1" in
	--bin) BIN=$2; shift 2 ;;
	--appliance) APPL=$2; shift 2 ;;
	*) echo "usage: $0 --bin BUILD_DIR --appliance udpd|tallyd" >&2; exit 2 ;;
	esac
done
E2E_TAG=k
# shellcheck source=tests/e2e/lib.sh
. "$(dirname "$0")/../e2e/lib.sh"
e2e_require_netns
WORKER="$BIN/perf/tally-worker"
port=9170
case "$APPL" in
udpd)
	APP="$BIN/appliance/udpd/tally-udpd"
	e2e_ns a
	ip -n "${ID}a" link set lo up
	app_ip=127.0.0.1 wns=a
	;;
tallyd)
	APP="$BIN/appliance/tallyd"
	e2e_ns a
	e2e_ns w
	e2e_veth a a0 w w0 9000
	e2e_addr w w0 10.98.0.2/24
	app_ip=10.98.0.1 wns=w
	;;
*) e2e_fail "unknown appliance '$APPL'" ;;
esac
[ -x "$APP" ] && [ -x "$WORKER" ] || e2e_fail "no $APP or $WORKER"

# start_app NAME [ARGS...]: the appliance in namespace a, ready when it says so
start_app() {
	local name=$1
	shift
	if [ "$APPL" = udpd ]; then
		e2e_bg a "$name" "$APP" --addr $app_ip --port $port --cores 2 --open --mem 64M \
			--det-pool 8M --ctl-socket "$E2E_TMP/$name.sock" "$@"
		app=$E2E_LAST_PID
		e2e_wait_log "$name" "cores on port" 60 $app
	else
		e2e_bg a "$name" "$APP" --port \
			"net_af_packet0,iface=${ID}a0,framesz=9216,blocksz=36864,framecnt=2048,qpairs=1" \
			--ip $app_ip/24 --base-port $port --open-admission --mem 128M --det-pool 8M \
			--ctl-socket "$E2E_TMP/$name.sock" "$@" \
			-- --no-huge --no-pci -m 512 --file-prefix "$ID$name" --lcores "0@0,1@1"
		app=$E2E_LAST_PID
		e2e_wait_log "$name" "ready" 60 $app
	fi
}

# 1. kill -9 mid-round, restart on the same address
start_app app1
pids=()
for r in 0 1 2; do
	e2e_bg $wns "w$r" "$WORKER" --host $app_ip --port $port --job 4 --token 11 --rank $r \
		--world 3 --bytes 1M --keys 4 --rounds 40 --deterministic --json --events
	pids+=("$E2E_LAST_PID")
done
# mid-run: a few rounds done
for _ in $(seq 300); do
	[ "$(grep -c '"ev":"round"' "$E2E_TMP/w0.log")" -ge 5 ] && break
	sleep 0.1
done
[ "$(grep -c '"ev":"round"' "$E2E_TMP/w0.log")" -ge 5 ] || e2e_fail "workers made no progress"
kill -9 $app
wait $app 2>/dev/null
rounds_at_kill=$(grep -c '"ev":"round"' "$E2E_TMP/w0.log")
sleep 0.3
start_app app2
e2e_wait_pids 120 "${pids[@]}" || e2e_fail "a worker failed across the restart"
for r in 0 1 2; do
	$PY - "$E2E_TMP/w$r.log" <<'PYEOF' || e2e_fail "worker $r: $(tail -n 2 "$E2E_TMP/w$r.log")"
import json, sys
rep = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{"mode"')]
assert rep, "no report"
r = rep[-1]
print(f"rank {r['rank']}: ok {r['ok']} rounds {r['rounds']} mismatches {r['mismatches']} "
      f"restarts {r['restarts']} repushes {r['repushes']} complete_pushes {r['complete_pushes']} "
      f"pings {r['pings']}")
assert r["ok"] and r["mismatches"] == 0 and r["checked"] > 0, "not verified"
assert r["rounds"] == 40, "rounds missing"
assert r["restarts"] >= 1, "no restart survived"
PYEOF
done
e2e_log "$APPL: kill -9 after $rounds_at_kill rounds, restarted: 40 rounds verified bit-exact on 3 workers"
e2e_stop $app

# 2. drain timeout with an open round: exit status 3
start_app app3 --drain-timeout-ms 500
e2e_bg $wns lone "$WORKER" --host $app_ip --port $port --job 6 --token 12 --rank 0 --world 2 \
	--bytes 64K --keys 1 --rounds 1 --no-barrier --give-up-ms 20000
lone=$E2E_LAST_PID
sleep 1.5 # its round is open, waiting for rank 1 that never comes
kill -TERM $app
for _ in $(seq 100); do kill -0 $app 2>/dev/null || break; sleep 0.1; done
kill -0 $app 2>/dev/null && e2e_fail "$APPL still running 10 s after SIGTERM with a 500 ms drain"
wait $app
rc=$?
[ $rc = 3 ] || e2e_fail "$APPL exited $rc after its drain abandoned an open round (want 3)"
grep -qi "abandon" "$E2E_TMP/app3.log" || e2e_fail "$APPL did not log the abandoned rounds"
e2e_log "$APPL: drain timeout with an open round -> exit status 3: $(grep -i abandon "$E2E_TMP/app3.log" | tail -n 1)"
kill -9 $lone 2>/dev/null
wait $lone 2>/dev/null
exit 0
