#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# auth_tallyd.sh --bin BUILDDIR — authenticated packets on tallyd (DPDK net_af_packet on a
# veth pair between two network namespaces): a job admitted with a key (tallyctl job-add
# --key-file), two tally-worker ranks with the key, and an attacker in the workers'
# namespace (auth_attack.py: spoofed pushes, BYEs and RESULTs as joined ranks, from their
# own addresses through a raw socket) during the run (suite 'security'). The RESULTs tallyd
# sends are signed per destination in their header mbuf, chained to the shared payload.
# Passes when the run is bit-exact (deterministic keys) and every attempt is counted:
# tallyd's drops bad_mac / auth_required exactly as many as sent, rank 0's drops of the
# spoofed RESULTs exactly as many as sent. Exit 77 (skip) without root or netns.
set -u
bin=
while [ $# -gt 0 ]; do
	case "$1" in
	--bin) bin=$2; shift 2 ;;
	*) echo "auth_tallyd.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
here=$(cd "$(dirname "$0")" && pwd)
E2E_TAG=auth
# shellcheck source=../e2e/lib.sh
. "$here/../e2e/lib.sh"
TALLYD=$bin/appliance/tallyd
WORKER=$bin/perf/tally-worker
CTL=$bin/control/tallyctl
[ -x "$TALLYD" ] || e2e_skip "tallyd not built (no DPDK)"
[ -x "$WORKER" ] && [ -x "$CTL" ] || e2e_fail "binaries missing under $bin"
e2e_require_netns
jget() { $PY -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

port=9170 app_ip=10.97.0.1 wk_ip=10.97.0.2 job=5 token=77
e2e_ns w
e2e_ns a
e2e_veth w w0 a a0 9000
e2e_addr w w0 $wk_ip/24
$PY -c "import os; print(os.urandom(32).hex())" >"$E2E_TMP/key"
chmod 600 "$E2E_TMP/key"

e2e_bg a appliance "$TALLYD" \
	--port "net_af_packet0,iface=${ID}a0,framesz=9216,blocksz=36864,framecnt=2048,qpairs=2" \
	--ip $app_ip/24 --queues 2 --base-port $port --mem 512M --det-pool 16M \
	--idle-backoff on --ctl-socket "$E2E_TMP/ctl.sock" \
	-- --no-huge --no-pci -m 1024 --file-prefix "$ID" --lcores "0@0,1@1,2@1"
app=$E2E_LAST_PID
e2e_wait_log appliance "ready" 90 "$app"
C=("$CTL" --socket "$E2E_TMP/ctl.sock")
"${C[@]}" --json job-add $job --token $token --world-size 2 --key-file "$E2E_TMP/key" \
	>"$E2E_TMP/add.json" || e2e_fail "job-add with the key failed"
[ "$(jget "$E2E_TMP/add.json" "d['authenticated']")" = True ] || e2e_fail "job-add: not authenticated"

# The ranks run for a time that outlives the 2 s attack however fast their rounds are (a
# rank that has left counts no forged RESULT); --seconds ends both at the same round.
secs=$((6 * ${TALLY_TIMEOUT_MULTIPLIER:-1}))
pids=()
for r in 0 1; do
	e2e_bg w "worker$r" "$WORKER" --host $app_ip --port $port --job $job --token $token \
		--rank $r --world 2 --keys 4 --bytes 1M --rounds 10000000 --seconds "$secs" --deterministic \
		--key-file "$E2E_TMP/key" --json
	pids+=("$E2E_LAST_PID")
done
for _ in $(seq 200); do
	"${C[@]}" --json workers >"$E2E_TMP/workers.json" 2>/dev/null &&
		[ "$(jget "$E2E_TMP/workers.json" "len([w for w in d if w['job_id'] == $job])")" -ge 4 ] && break
	sleep 0.05
done
ip netns exec "$ID"w $PY "$here/auth_attack.py" --ip $app_ip --port $port --cores 2 \
	--workers "$E2E_TMP/workers.json" --job $job --token $token --seconds 2 \
	>"$E2E_TMP/attack.json" 2>"$E2E_TMP/attack.log" || e2e_fail "attacker failed"
e2e_wait_pids 150 "${pids[@]}" || e2e_fail "a worker failed under attack"
"${C[@]}" --json stats >"$E2E_TMP/stats.json" || e2e_fail "tallyctl stats"
cat "$E2E_TMP/attack.json"
for r in 0 1; do
	grep '^{' "$E2E_TMP/worker$r.log" | tail -1 >"$E2E_TMP/w$r.json"
	[ "$(jget "$E2E_TMP/w$r.json" "d['ok'] and d['mismatches'] == 0 and d['checked'] > 0")" = True ] ||
		e2e_fail "rank $r: not bit-exact"
	echo "rank $r: checked $(jget "$E2E_TMP/w$r.json" "d['checked']") elements, drops $(jget "$E2E_TMP/w$r.json" "d['drop_reasons']")"
done
drops() { jget "$E2E_TMP/stats.json" "d['totals']['drops'].get('$1', 0)"; }
sent() { jget "$E2E_TMP/attack.json" "d['sent']['$1']"; }
echo "tallyd drops: auth_required $(drops auth_required) bad_mac $(drops bad_mac); byes $(jget "$E2E_TMP/stats.json" "d['totals']['byes']")"
[ "$(jget "$E2E_TMP/attack.json" "d['spoofed_source']")" = True ] || e2e_fail "no raw socket"
[ "$(drops bad_mac)" -eq $(($(sent push_forged) + $(sent bye_forged))) ] ||
	e2e_fail "tallyd bad_mac $(drops bad_mac) != forged pushes + BYEs sent"
[ "$(drops auth_required)" -eq $(($(sent push_plain) + $(sent bye_plain) + $(sent join_plain))) ] ||
	e2e_fail "tallyd auth_required $(drops auth_required) != unsigned packets sent"
[ "$(jget "$E2E_TMP/w0.json" "d['drop_reasons'].get('bad_mac', 0)")" -eq "$(sent result_forged)" ] ||
	e2e_fail "rank 0 bad_mac drops != forged RESULTs sent"
[ "$(jget "$E2E_TMP/w0.json" "d['drop_reasons'].get('auth_required', 0)")" -eq "$(sent result_plain)" ] ||
	e2e_fail "rank 0 auth_required drops != unsigned RESULTs sent"
echo "ok - tallyd: attacked authenticated run bit-exact, every spoofed packet refused and counted"
