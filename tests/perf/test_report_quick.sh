#!/usr/bin/env bash
# tests/perf/test_report_quick.sh TALLY_PERF — `tally-perf report --quick` end to end: writes
# report.md with every section, each with measured figures (a table) and a PNG plot, the machine
# described, and its own run time per step and in total (a figure that is printed, never
# asserted: machines are shared). Skips (77) without root / netns.
set -u
perf=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (network namespaces, DPDK vdevs)"; exit 77; }
ip netns add perfprobe$$ 2>/dev/null || { echo "SKIP: no network namespaces"; exit 77; }
ip netns del perfprobe$$
out=$(mktemp -d /tmp/perfrep.XXXXXX)
trap 'rm -rf "$out"' EXIT
"$perf" report --quick --out "$out" 2>"$out/progress.txt" || fail "report exited $?"
grep -q '^\[report 1/[0-9]*\] .* left' "$out/progress.txt" || fail "no progress lines"
md=$out/report.md
[ -s "$md" ] || fail "no report.md"
# The run time: one figure per step (as many as progress reported) and a numeric total.
rt=$(grep '^Run time, measured: ' "$md") || fail "no run time line"
echo "$rt"
grep -Eq '; total [0-9]+\.[0-9] s$' <<<"$rt" || fail "run time total missing or not numeric"
nsteps=$(grep -c '^\[report [0-9]*/[0-9]*\] .*: [0-9.]* s$' "$out/progress.txt")
nfig=$(grep -Eo ' [0-9]+\.[0-9] s(;|$)' <<<"$rt" | wc -l)
[ "$nsteps" -ge 1 ] && [ "$nfig" -eq $((nsteps + 1)) ] ||
	fail "run time has $nfig figures for $nsteps steps (want one per step and the total)"
for s in "Machine" "Sum rates" "Engine goodput" "Line rate" "Line-rate search (NDR/PDR)" "Allreduce vs peers" \
	"Cluster model"; do
	grep -q "^## $s" "$md" || fail "section '$s' missing"
done
grep -q "| CPU | .*[A-Za-z]" "$md" || fail "CPU model missing"
grep -q "| kernel | $(uname -r) |" "$md" || fail "kernel missing"
grep -q "| DPDK | [0-9]" "$md" || fail "DPDK version missing"
# Each measured section: a table row with numbers and a plot that is a PNG.
sect() { awk -v s="## $1" '$0 == s {on=1; next} /^## / {on=0} on' "$md"; }
for s in "Sum rates" "Engine goodput" "Line rate" "Line-rate search (NDR/PDR)" "Allreduce vs peers" \
	"Cluster model"; do
	body=$(sect "$s")
	# header + separator + at least one data row with a number in it
	n=$(grep -A1000 '^|---' <<<"$body" | grep -c '^| .*[0-9]')
	[ "$n" -ge 1 ] || { echo "$body"; fail "section '$s' has no measured rows"; }
	png=$(grep -o '([a-z_0-9]*\.png)' <<<"$body" | head -1 | tr -d '()')
	[ -n "$png" ] || fail "section '$s' has no plot"
	[ "$(head -c 4 "$out/$png" | od -An -c | tr -d ' ')" = "211PNG" ] || fail "$png is not a PNG"
	if grep -q "not measured" <<<"$body"; then echo "note in '$s':"; grep "not measured" <<<"$body"; fi
done
# The allreduce rows were verified (every implementation that ran).
body=$(sect "Allreduce vs peers")
grep -q '| tally | 2 | 1M | [0-9.]* | [0-9.]* | [0-9.]* | True |' <<<"$body" ||
	{ echo "$body"; fail "Tally allreduce not measured and verified"; }
# The cluster model: projected from this run's engine rate, W = 8..1024 at 100 and 400 Gbit/s
# (ring and Tally times, cores); --quick runs no emulated cluster, so its check says so.
body=$(sect "Cluster model")
grep -q '^Engine rate: [0-9.]* Gbit/s per core' <<<"$body" ||
	{ echo "$body"; fail "model: no engine rate"; }
for link in 100 400; do
	# W | link | k | ring ms | Tally ms | speed-up | ... | cores total | bound
	row="^\| 1024 \| $link \| 1024 \| [0-9.]+ \| [0-9.]+ \| [0-9.]+x \|.* \| [0-9]+ \| [a-z ]+ \|\$"
	grep -Eq "$row" <<<"$body" ||
		{ echo "$body"; fail "model: no W=1024 row at $link Gbit/s with cores"; }
done
chk='Tally: predicted [0-9.]+ s, measured [0-9.]+ s|not measured: check: no emulated allreduce'
grep -Eq "$chk" <<<"$body" || { echo "$body"; fail "model: neither a check point nor why not"; }
echo PASS
