#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# auth_restart.sh --bin BUILDDIR — liveness PINGs of a keyed job (issue 33; suite
# 'security'), real processes: tally-udpd on loopback, a job admitted with a key, two
# tally-worker ranks with the key and --events.
# kill -9 of the appliance mid-run, a fresh one on the same port with the same job
#     and key: every worker notices the restart by its PINGs within the liveness time
# (the rejoin comes less than dead_ms after the job is back: the fresh appliance answers a
# signed PING with a signed ERROR not_joined carrying its new boot id) and finishes its
# rounds bit-exact (deterministic keys); the appliance counts the PINGs it answered and no
# bad_flags drop. (A waiting rank's PULLs are answered, so PINGs go out only in silence.)
# On a build where keyed PINGs are dropped as bad_flags, the workers never rejoin.
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/faults/udpd_bins.sh
. "$here/../faults/udpd_bins.sh"
[ -x "$CTL" ] || { echo "no tallyctl under $bin" >&2; exit 1; }
udpd_scratch arst
port=$((20000 + ($$ % 20000)))
mult=${TALLY_TIMEOUT_MULTIPLIER:-1}
scaled() { python3 -c "import math; print(math.ceil($1 * float('$mult')))"; }
python3 -c "import os; print(os.urandom(32).hex())" >"$tmp/key"
chmod 600 "$tmp/key"

now() { python3 -c "import time; print(time.monotonic())"; }
# start_app NAME: tally-udpd on $port (pid in app), job 5 admitted with the key
start_app() {
	rm -f "$tmp/$1.sock"
	"$UDPD" --addr 127.0.0.1 --port $port --cores 2 --max-jobs 4 --mem 64M --det-pool 4M \
		--ctl-socket "$tmp/$1.sock" 2>"$tmp/$1.err" &
	app=$!
	for _ in $(seq 100); do [ -S "$tmp/$1.sock" ] && break; sleep 0.1; done
	[ -S "$tmp/$1.sock" ] || fail "tally-udpd $1 did not start"
	C=("$CTL" --socket "$tmp/$1.sock")
	t_back=$(now) # before job-add: the lag measured below is an upper bound
	"${C[@]}" job-add 5 --token 77 --world-size 2 --key-file "$tmp/key" >/dev/null ||
		fail "job-add with the key failed on $1"
}
W=("$WORKER" --host 127.0.0.1 --port $port --job 5 --token 77 --world 2 --keys 4
   --key-file "$tmp/key" --deterministic --json --events --give-up-ms $(scaled 60000))
# report FILE EXPR: EXPR of the worker's JSON report (the line starting {"mode")
report() { python3 -c "
import json,sys
d=[json.loads(l) for l in open(sys.argv[1]) if l.startswith('{\"mode\"')][-1]
print(eval(sys.argv[2]))" "$@"; }
# events FILE: the --events lines of a worker's stderr
events() { grep '^{"ev"' "$1"; }

start_app app1
# kill -9 mid-run and a fresh appliance: the workers notice by PING and finish
"${W[@]}" --rank 0 --bytes 256K --rounds 3000 >"$tmp/b0.json" 2>"$tmp/b0.err" & w0=$!
"${W[@]}" --rank 1 --bytes 256K --rounds 3000 >"$tmp/b1.json" 2>"$tmp/b1.err" & w1=$!
for _ in $(seq $(scaled 300)); do
	[ "$(events "$tmp/b0.err" | grep -c '"ev":"round"')" -ge 5 ] && break
	sleep 0.1
done
[ "$(events "$tmp/b0.err" | grep -c '"ev":"round"')" -ge 5 ] || fail "step 2: no progress"
kill -9 $app
wait $app 2>/dev/null
sleep 0.5
start_app app2
wait $w0 || fail "step 2: rank 0 failed across the restart: $(tail -1 "$tmp/b0.err")"
wait $w1 || fail "step 2: rank 1 failed across the restart: $(tail -1 "$tmp/b1.err")"
for r in 0 1; do
	[ "$(report "$tmp/b$r.json" "d['ok'] and d['mismatches'] == 0 and d['checked'] > 0 and d['rounds'] == 3000")" = True ] ||
		fail "step 2: rank $r not bit-exact: $(cat "$tmp/b$r.json")"
	[ "$(report "$tmp/b$r.json" "d['restarts']")" -ge 1 ] || fail "step 2: rank $r saw no restart"
	t_rej=$(events "$tmp/b$r.err" | grep '"ev":"rejoined"' | head -1 |
		python3 -c "import json,sys; print(json.loads(sys.stdin.read())['t'])")
	lag=$(python3 -c "print(round($t_rej - $t_back, 3))")
	echo "step 2: rank $r rejoined $lag s after the job was back (dead_ms 1.0 s)"
	python3 -c "import sys; sys.exit(0 if $lag < 1.0 * max(1.0, $mult) else 1)" ||
		fail "step 2: rank $r noticed the restart $lag s after the job was back (> dead_ms)"
done
"${C[@]}" --json stats >"$tmp/stats2.json" || fail "tallyctl stats"
pings=$(jget "$tmp/stats2.json" "d['totals']['pings']")
badf=$(jget "$tmp/stats2.json" "d['totals']['drops'].get('bad_flags', 0)")
echo "step 2: workers sent $(report "$tmp/b0.json" "d['pings']") + $(report "$tmp/b1.json" "d['pings']") PINGs; fresh appliance answered $pings, bad_flags drops $badf"
[ "$badf" -eq 0 ] || fail "step 2: $badf keyed PINGs dropped as bad_flags"
[ "$pings" -ge 2 ] || fail "step 2: the fresh appliance answered $pings PINGs (want one per rank)"
echo "ok 1 - kill -9 + restart under a keyed job: PINGs notice it within dead_ms, 3000 rounds bit-exact"
