#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# failover_worker.sh --bin BUILDDIR — tally-worker --failover (what tally-perf allreduce runs
# with several appliances): two tally-udpd on loopback (open admission), a job of two
# tally-workers on appliance A listing B; kill -9 of A mid-run: both move the job to B and
# every round verifies (exit 0); a bad --failover value is refused naming the option.
set -u
# shellcheck source=tests/faults/udpd_bins.sh
. "$(dirname "$0")/udpd_bins.sh"
udpd_scratch fo-worker
pa=$((21000 + ($$ % 15000))); pb=$((pa + 4))

for p in $pa $pb; do
	"$UDPD" --addr 127.0.0.1 --port $p --cores 2 --open --mem 64M \
		--ctl-socket "$tmp/ctl$p.sock" 2>"$tmp/udpd$p.err" & apps+=($!)
done
for p in $pa $pb; do
	for _ in $(seq 100); do [ -S "$tmp/ctl$p.sock" ] && break; sleep 0.1; done
	[ -S "$tmp/ctl$p.sock" ] || fail "tally-udpd on $p did not start"
done

# 1. kill -9 of the job's appliance mid-run
for r in 0 1; do
	"$WORKER" --host 127.0.0.1 --port $pa --failover 127.0.0.1:$pb --job 9 --token 5 \
		--rank $r --world 2 --bytes 1M --keys 8 --rounds 400 --json \
		>"$tmp/w$r.json" 2>"$tmp/w$r.err" & eval "w$r=\$!"
done
sleep 1
kill -9 "${apps[0]}"
for r in 0 1; do
	pid=$(eval echo "\$w$r")
	wait "$pid" || fail "rank $r exited non-zero after the failover: $(tail -1 "$tmp/w$r.err")"
	grep -q "appliance 127.0.0.1:$pa down, job 9 moved to 127.0.0.1:$pb" "$tmp/w$r.err" ||
		fail "rank $r did not say it moved the job: $(tail -1 "$tmp/w$r.err")"
	grep -q '"ok":true' "$tmp/w$r.json" || fail "rank $r: not verified"
	grep -q '"rounds":400,' "$tmp/w$r.json" || fail "rank $r: not every round ran"
done
echo "ok 1 - kill -9 of the job's appliance: both ranks moved to the other, 400 rounds verified"

# 2. a bad list is refused before anything starts
"$WORKER" --host 127.0.0.1 --port $pb --failover "127.0.0.1" --job 10 --rank 0 --world 1 \
	>/dev/null 2>"$tmp/bad.err"; rc=$?
[ $rc -eq 2 ] || fail "bad --failover exited $rc, not 2"
grep -q -- "--failover" "$tmp/bad.err" || fail "bad --failover: $(cat "$tmp/bad.err")"
echo "ok 2 - a bad --failover list is refused (exit 2) naming the option"
