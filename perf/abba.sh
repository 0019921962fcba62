#!/usr/bin/env bash
# perf/abba.sh BEFORE_BUILD AFTER_BUILD — the same tally-perf figures from two builds in one
# run, interleaved A B B A (a refactor's "no worse than before"): sum and engine (thread CPU
# time, ratio to memcpy of the same run) and allreduce (wall, Tally and Gloo on loopback
# namespaces; root). Prints every run, then per-row after/before of the ratio column.
#   e.g. git worktree add /tmp/before REV && meson setup /tmp/before/build /tmp/before &&
#        ninja -C /tmp/before/build && perf/abba.sh /tmp/before/build build
set -euo pipefail
[ $# -eq 2 ] || { sed -n '2,7p' "$0"; exit 2; }
A=$1 B=$2
here=$(cd "$(dirname "$0")" && pwd)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
runs=("sum --size 256K --size 64M --reps 9 --baseline none" "engine --det off --reps 5")
for cmd in "${runs[@]}"; do
	for who in A B B A; do
		dir=${!who}
		echo "=== $who $cmd" | tee -a "$log"
		# shellcheck disable=SC2086
		timeout 600 "$dir/perf/tally-perf" $cmd 2>&1 | tee -a "$log"
	done
done
if [ "$(id -u)" -eq 0 ]; then
	for who in A B B A; do
		dir=${!who}
		echo "=== $who allreduce" | tee -a "$log"
		TALLY_BUILD=$dir TALLY_PERF_SCRIPTS=$here timeout 600 "$dir/perf/tally-perf" allreduce \
			--impl tally,gloo --workers 4 --size 16M --rounds 20 2>/dev/null | tee -a "$log"
	done
fi
python3 - "$log" <<'PY'
import collections, math, sys
runs = collections.defaultdict(lambda: collections.defaultdict(list))
for block in open(sys.argv[1]).read().split("=== ")[1:]:
    head, *lines = block.split("\n")
    who, kind = head.split()[:2]
    cols = None
    for line in lines:
        f = line.split()
        if not f:
            continue
        if f[0] in ("op", "dt", "impl"):
            cols = f
            continue
        if kind == "allreduce" and f[0] in ("tally", "gloo") and len(f) >= 6:
            runs[(kind, f[0])][who].append(float(f[5]))  # busbw Gb/s
            continue
        if not cols or len(f) != len(cols):
            continue
        if kind == "sum" and f[0] in ("acc", "kway"):
            runs[(kind, " ".join(f[:4]))][who].append(float(f[cols.index("ratio")]))
        elif kind == "engine" and f[0] in ("f32", "f16", "bf16", "i32"):
            runs[(kind, " ".join(f[:2]))][who].append(float(f[cols.index("ratio")]))
by_kind = collections.defaultdict(list)
for (kind, row), d in sorted(runs.items()):
    if d["A"] and d["B"]:
        a, b = sum(d["A"]) / len(d["A"]), sum(d["B"]) / len(d["B"])
        by_kind[kind].append(b / a)
        print(f"{kind:9s} {row:28s} before {d['A']} after {d['B']} after/before {b / a:.3f}")
for kind, r in by_kind.items():
    g = math.exp(sum(map(math.log, r)) / len(r))
    print(f"{kind}: {len(r)} rows, geometric mean after/before {g:.3f} (min {min(r):.3f}, max {max(r):.3f})")
PY
