#!/usr/bin/env bash
# tests/perf/test_perf_cli.sh TALLY_PERF — the subcommands' command lines through the binary:
# help succeeds, bad arguments exit 2 with a message and start nothing.
set -u
perf=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
expect() { # expect RC ARGS...: run tally-perf ARGS, check the exit status
	local want=$1 out rc
	shift
	out=$("$perf" "$@" 2>&1); rc=$?
	[ "$rc" = "$want" ] || fail "tally-perf $* exited $rc, want $want: $out"
	echo "ok: tally-perf $* -> $rc"
	LAST=$out
}
expect 0 --help
grep -q allreduce <<<"$LAST" || fail "--help does not list allreduce"
grep -q report <<<"$LAST" || fail "--help does not list report"
expect 0 allreduce --help
grep -q -- --emulate <<<"$LAST" || fail "allreduce --help lacks --emulate"
expect 2 allreduce --workers 1
grep -q "workers must be" <<<"$LAST" || fail "no clear message for --workers 1"
expect 2 allreduce --impl nccl
grep -q "unknown --impl 'nccl'" <<<"$LAST" || fail "no clear message for --impl nccl"
expect 2 allreduce --size 12Q
expect 2 allreduce --impl mpi --dtype bf16
expect 2 allreduce --rounds 0
expect 0 model --help
grep -q -- --engine-gbps <<<"$LAST" || fail "model --help lacks --engine-gbps"
expect 2 model --workers 8,x
grep -q "bad --workers '8,x'" <<<"$LAST" || fail "no clear message for model --workers 8,x"
expect 2 model --link-gbit 0 --engine-gbps 50
grep -q "bad --link-gbit" <<<"$LAST" || fail "no clear message for model --link-gbit 0"
expect 2 model --appliances 0 --engine-gbps 50
expect 0 model --engine-gbps 50 --workers 8,1024 --json
[ "$(grep -c '"bench": "model"' <<<"$LAST")" = 4 ] || fail "model --json: want 4 rows: $LAST"
expect 0 report --help
expect 0 linegen --help
grep -q -- --synthetic-cap <<<"$LAST" || fail "linegen --help lacks --synthetic-cap"
expect 2 linegen
grep -q "give --synthetic-cap" <<<"$LAST" || fail "no clear message without --synthetic-cap"
expect 2 linegen --synthetic-cap 1000 --chunk-kib 1,16
grep -q -- "--chunk-kib" <<<"$LAST" || fail "no clear message for --chunk-kib 16"
expect 2 linegen --synthetic-cap 1000 --ranks 0
expect 2 linegen --synthetic-cap 1000 --lo 5000 --hi 100
grep -q "above --hi" <<<"$LAST" || fail "no clear message for --lo above --hi"
expect 2 engine --onebit --chunk 12
expect 2 engine --onebit --bogus
expect 0 engine --onebit --chunks 2 --min-time 0.01
grep -q "onebit/bytes" <<<"$LAST" || fail "engine --onebit prints no one-bit row"
expect 2 report --only sum,bogus
# line on one box pins lcores over the CPUs this process may use (a 16-core GPU host first ran
# everything on CPUs 0 and 1) and sizes EAL memory by the worker count (8 ports did not fit 2 GiB).
expect 0 line --dry-run --workers 3
grep -q -- "-m 3072 --lcores 0@[0-9]*,1@" <<<"$LAST" || fail "line: EAL memory not sized for 3 ports: $LAST"
if command -v taskset >/dev/null && [ "$(nproc --all)" -ge 2 ]; then
	LAST=$(taskset -c 1 "$perf" line --dry-run --workers 2 2>&1)
	grep -q -- "--lcores 0@1,1@1,2@1 " <<<"$LAST" || fail "line: lcores not on the allowed CPU 1: $LAST"
	[ "$(grep -o -- "--lcores 0@[0-9]* " <<<"$LAST" | sort -u)" = "--lcores 0@1 " ] ||
		fail "line: workers not on the allowed CPU 1: $LAST"
	echo "ok: line --dry-run under taskset -c 1 pins everything to CPU 1"
fi
# A rejected run creates nothing: no namespace with its prefix.
pfx=pcli$(( $$ % 100000 ))
expect 2 allreduce --prefix "$pfx" --workers 1
if command -v ip >/dev/null && ip netns 2>/dev/null | grep -q "^$pfx"; then
	fail "a rejected run left namespace(s) $pfx*"
fi
echo PASS
