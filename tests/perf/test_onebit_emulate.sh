#!/usr/bin/env bash
# tests/perf/test_onebit_emulate.sh [TALLY_UDPD] — perf/onebit_emulate.py in a tiny configuration
# (2 workers, a tiny MLP, 3 timed steps, 1 Gbit/s shaped links): every run (Adam through Tally,
# OneBitAdam through Tally, Adam over gloo) finishes and the table carries numeric seconds per
# step and ratios; no namespace is left behind. Timings are never asserted. Skips (77) without
# root / network namespaces / torch.
set -u
here=$(cd "$(dirname "$0")" && pwd)
script=$here/../../perf/onebit_emulate.py
udpd=${1:-}
fail() { echo "FAIL: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (network namespaces, tc)"; exit 77; }
ip netns add obprobe$$ 2>/dev/null || { echo "SKIP: no network namespaces"; exit 77; }
ip netns del obprobe$$
/usr/bin/python3 -c 'import torch.distributed' 2>/dev/null || { echo "SKIP: no torch"; exit 77; }
tmp=$(mktemp -d /tmp/obemu.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
prefix=obt$$-
args=(--workers 2 --inputs 32 --hidden 32 --steps 3 --warmup 1 --link-gbit 1 --timeout 120
      --prefix "$prefix" --json "$tmp/r.json")
[ -n "$udpd" ] && args+=(--udpd "$udpd")
/usr/bin/python3 "$script" "${args[@]}" >"$tmp/out.txt" 2>"$tmp/err.txt"
rc=$?
cat "$tmp/out.txt"
[ $rc = 0 ] || { cat "$tmp/err.txt"; fail "onebit_emulate.py exited $rc"; }
ip netns list | grep -q "^$prefix" && fail "namespaces left behind: $(ip netns list | grep "^$prefix")"
num='[0-9]+\.[0-9]+'
for run in "Adam through Tally" "OneBitAdam through Tally" "Adam, DDP over gloo"; do
	grep -Eq "^\| $run[^|]* \| $num \| $num \| $num \| $num \| [-0-9,]+ \| $num"'x \| '"$num"'x \|$' "$tmp/out.txt" ||
		fail "no numeric row for '$run'"
done
# the compressed run pushes fewer bytes per step than the f32 one (a count, not a timing)
/usr/bin/python3 - "$tmp/r.json" <<'PY' || fail "results JSON"
import json, sys
r = {x["impl"]: x for x in json.load(open(sys.argv[1]))["results"]}
assert set(r) == {"adam-tally", "onebit-tally", "adam-gloo"}, r.keys()
assert all(x["step_s"] > 0 for x in r.values())
assert r["onebit-tally"]["push_bytes"] < r["adam-tally"]["push_bytes"], (r["onebit-tally"], r["adam-tally"])
PY
echo PASS
