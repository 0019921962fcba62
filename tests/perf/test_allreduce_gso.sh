#!/usr/bin/env bash
# tests/perf/test_allreduce_gso.sh TALLY_PERF — Tally workers with UDP GSO (--gso) through the
# emulated cluster: their super-frames are segmented before the AF_PACKET appliance, so every
# result arrives and verifies (before the fix every chunk timed out: tallyd dropped the
# truncated 64 KB frames as ip_length). Skips (77) without root / network namespaces.
set -u
perf=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (network namespaces)"; exit 77; }
ip netns add pgsoprobe$$ 2>/dev/null || { echo "SKIP: no network namespaces"; exit 77; }
ip netns del pgsoprobe$$
out=$("$perf" allreduce --impl tally --workers 2 --size 2M --rounds 2 --timeout 60 \
	--worker-args "--gso --window 256 --give-up-ms 20000" --prefix pgso$(( $$ % 10000 )) --json 2>&1)
rc=$?
echo "$out"
[ $rc = 0 ] || fail "allreduce with --gso exited $rc"
grep -q '"verified": true' <<<"$out" || fail "not verified"
grep -q '"gso_sends": [1-9]' <<<"$out" || fail "no GSO super-frame was sent: the test tests nothing"
echo PASS
