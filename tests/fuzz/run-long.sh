#!/bin/sh
# run-long.sh [SECONDS] [TARGET...] — build the libFuzzer targets with clang (libFuzzer +
# ASan + UBSan, coverage on the protocol and engine sources) and fuzz each target for
# SECONDS (default 300), starting from the committed seed corpus. The reducers are linked
# from the regular build (build/, or TALLY_BUILD), uninstrumented. New inputs stay in
# build-fuzz/TARGET-long/, crash files in build-fuzz/.
#   tests/fuzz/run-long.sh 600 fuzz_engine
set -eu
cd "$(dirname "$0")/../.."
secs=${1:-300}
[ $# -gt 0 ] && shift
targets=${*:-fuzz_proto fuzz_engine}
build=${TALLY_BUILD:-build}
out=build-fuzz
[ -f "$build/build.ninja" ] || tests/run.sh --setup-only
ninja -C "$build" sum_avx/libtally_sum.a >/dev/null
mkdir -p "$out"
sumlibs=$(ls "$build"/sum_avx/*.a)
rc=0
for t in $targets; do
	clang -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined \
		-fno-sanitize-recover=undefined -Idataplane/proto -Idataplane/engine -Idataplane/xport -Isum_avx \
		"tests/fuzz/$t.c" dataplane/proto/proto.c dataplane/engine/engine*.c \
		$sumlibs -lisal -lm -o "$out/$t"
	work="$out/$t-long"
	mkdir -p "$work"
	echo "run-long.sh: $t for ${secs}s"
	(cd "$out" && "./$t" -max_total_time="$secs" -print_final_stats=1 -max_len=4096 \
		"$t-long" "../tests/fuzz/corpus/${t#fuzz_}") || rc=$?
done
exit $rc
