#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# nccl_perf_smoke.sh PERF PLUGIN UDPD — tally-nccl-perf runs (1 KiB .. 256 KiB, 2 ranks, a
# real tally-udpd) and prints one nccl-tests row per size: 9 rows, #wrong 0, the figures
# consistent with each other. Checks the tool, not the figures (those belong in perf/README.md).
# Then a --reduce-scatter run: owner mode off and on, each rank's downlink ratio under 0.5.
set -u
[ $# -eq 3 ] || { echo "usage: $0 PERF PLUGIN UDPD" >&2; exit 2; }
out=$(timeout -k 5 "$(awk "BEGIN{print int(300 * ${TALLY_TIMEOUT_MULTIPLIER:-1})}")" \
	"$1" "$2" "$3" -b 1K -e 256K -n 2 -m 1 2>/dev/null)
rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: tally-nccl-perf exited $rc" >&2; exit 1; }
echo "$out" | awk '
	/^#/ { next }
	function off(a, b) { return a > b ? a - b : b - a }
	# size doubling, #wrong 0, time > 0, algbw = size / time (GB/s, as printed), busbw = algbw
	# (W = 2), CPU figures >= 0 with usr + sys = cpu
	NF == 12 { n++; if ($1 != 1024 * 2 ^ (n - 1) || $8 != 0 || !($5 > 0) ||
			off($6, $1 / $5 / 1e3) > 0.0011 || $7 != $6 || $10 < 0 || $11 < 0 ||
			off($9, $10 + $11) > 0.0021) { bad++; print "bad row: " $0 } }
	END { if (n != 9 || bad) { printf "FAIL: %d rows, %d bad (want 9 sizes)\n", n, bad; exit 1 } }' || exit 1
echo "ok: 9 sizes, #wrong 0"
# --reduce-scatter: owner mode off then on in one run (3 ranks, 3 sizes each), #wrong 0, and
# each rank's downlink with owner mode under 0.5 of without (1/3 of the sums and headers)
out=$(timeout -k 5 "$(awk "BEGIN{print int(300 * ${TALLY_TIMEOUT_MULTIPLIER:-1})}")" \
	"$1" "$2" "$3" -w 3 -b 64K -e 256K -n 2 -m 1 --reduce-scatter 2>/dev/null)
rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: tally-nccl-perf --reduce-scatter exited $rc" >&2; exit 1; }
echo "$out" | awk '
	/^# downlink rank/ { d++; if (!($NF > 0 && $NF < 0.5)) { bad++; print "bad ratio: " $0 } next }
	/^#/ { next }
	NF == 12 { n++; if ($8 != 0) { bad++; print "bad row: " $0 } }
	END { if (n != 6 || d != 3 || bad) {
		printf "FAIL: %d rows, %d downlink lines, %d bad (want 6, 3)\n", n, d, bad; exit 1 } }' || exit 1
echo "ok: reduce-scatter, owner mode off and on, #wrong 0, downlink ratio < 0.5"
