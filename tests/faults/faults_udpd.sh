#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# faults_udpd.sh --bin BUILDDIR — an appliance that runs for months, with real processes:
# tally-udpd on loopback and tally-worker jobs (suite 'faults').
#  1. 20 jobs in a row (each ends with BYE) on an appliance of 16 job slots all pass;
#  2. a job whose workers are all killed (-9) mid-round is relaunched with the same job id
#     (a new --incarnation) and passes, no operator involved;
#  3. one worker of three killed (-9) mid-round: the others exit non-zero before the
#     client's 30 s give-up, their stderr naming the silent rank.
set -u
# shellcheck source=tests/faults/udpd_bins.sh
. "$(dirname "$0")/udpd_bins.sh"
udpd_scratch faults
port=$((20000 + ($$ % 20000)))

# rejoin 2 s: a relaunch takes over a silent job that fast; dead rank 3 s.
"$UDPD" --addr 127.0.0.1 --port $port --cores 2 --open --max-jobs 16 --mem 64M \
	--det-pool 1M --dead-rank-timeout-ms 3000 --rejoin-timeout-ms 2000 \
	--ctl-socket "$tmp/ctl.sock" --stats "$tmp/app.json" 2>"$tmp/udpd.err" &
app=$!
for _ in $(seq 100); do [ -S "$tmp/ctl.sock" ] && break; sleep 0.1; done
[ -S "$tmp/ctl.sock" ] || fail "tally-udpd did not start"

W=("$WORKER" --host 127.0.0.1 --port $port --token 77 --bytes 256K --keys 4 --join-ms 15000)

# 1. 20 jobs in a row, two workers each
for j in $(seq 1 20); do
	"${W[@]}" --job $j --rank 0 --world 2 --rounds 2 >/dev/null 2>"$tmp/j$j.0.err" & a=$!
	"${W[@]}" --job $j --rank 1 --world 2 --rounds 2 >/dev/null 2>"$tmp/j$j.1.err" & b=$!
	wait $a || fail "job $j rank 0 failed: $(tail -1 "$tmp/j$j.0.err")"
	wait $b || fail "job $j rank 1 failed: $(tail -1 "$tmp/j$j.1.err")"
done
echo "ok 1 - 20 jobs in a row on 16 job slots"

# 2. kill -9 every worker of job 100 mid-round, relaunch it (new incarnation)
for r in 0 1; do
	"${W[@]}" --job 100 --incarnation 1 --rank $r --world 2 --rounds 100000 --no-verify \
		>/dev/null 2>"$tmp/old$r.err" & eval "old$r=\$!"
done
sleep 1.5
kill -9 "$old0" "$old1"; wait "$old0" "$old1" 2>/dev/null
for r in 0 1; do
	"${W[@]}" --job 100 --incarnation 2 --rank $r --world 2 --rounds 3 \
		>/dev/null 2>"$tmp/new$r.err" & eval "new$r=\$!"
done
wait "$new0" || fail "relaunch rank 0: $(tail -1 "$tmp/new0.err")"
wait "$new1" || fail "relaunch rank 1: $(tail -1 "$tmp/new1.err")"
echo "ok 2 - relaunch of a killed job without an operator"

# 3. kill -9 one worker of three mid-round
for r in 0 1 2; do
	"${W[@]}" --job 200 --rank $r --world 3 --rounds 100000 --no-verify \
		>/dev/null 2>"$tmp/d$r.err" & eval "d$r=\$!"
done
sleep 1.5
kill -9 "$d1"; wait "$d1" 2>/dev/null
t0=$(date +%s)
for r in 0 2; do
	pid=$(eval echo "\$d$r")
	wait "$pid"; rc=$?
	[ $rc -ne 0 ] || fail "rank $r exited 0 after rank 1 died"
	grep -q "rank 1 silent for .* at appliance 127.0.0.1:$port" "$tmp/d$r.err" ||
		fail "rank $r's error does not name rank 1: $(tail -1 "$tmp/d$r.err")"
done
el=$(($(date +%s) - t0))
[ $el -lt 25 ] || fail "the survivors took ${el}s (the client's own give-up is 30 s)"
echo "ok 3 - the survivors named the dead rank after ${el}s: $(tail -1 "$tmp/d0.err")"

kill -TERM "$app"; wait "$app"; app=
grep -q '"jobs_freed_bye"' "$tmp/app.json" || fail "no jobs_freed_bye counter in the stats"
echo "counters: $(grep -o '"\(jobs_freed_bye\|jobs_freed_idle\|incarnations\|dead_rank_errors\)":[0-9]*' "$tmp/app.json" | tr '\n' ' ')"
exit 0
