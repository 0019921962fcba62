#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# gpu_agent/examples/pipeline.py, one epoch of each schedule: it profiles, plans (a pipeline
# of several stages on a 0.02 Gbit/s cluster), trains on 4 ranks through tally-udpd, and its
# loss falls and its test accuracy beats chance (0.1) by far. 0.02, not the default 0.1: the
# model now has the runtime's measured gloo message costs (2-4 messages per stage boundary
# and microbatch), and at load 15-20 on this host a message measured 1.3-12 ms; the planner
# then chose pure data parallelism at 0.1 Gbit/s in 2 of 2 runs and at 0.05 in 1 of 2. At 0.02
# data parallelism's sync (0.47 MB of weights) costs about 190 ms against 26 ms for the
# pipeline's activations, so the pipeline wins unless a message costs over about 8 ms.
set -u
EX="$1"
PY=/usr/bin/python3
$PY -c 'import torch, sklearn' 2>/dev/null || { echo "SKIP: torch or sklearn missing"; exit 77; }
[ -x "${TALLY_TEST_UDPD:-}" ] || { echo "SKIP: TALLY_TEST_UDPD not built"; exit 77; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fail=0
for sched in sync 1f1b; do
	timeout 280 $PY "$EX" --schedule $sched --epochs 2 --link-gbit 0.02 --out "$T/$sched.json" >"$T/$sched.log" 2>&1
	rc=$?
	grep -v '^tally-udpd' "$T/$sched.log"
	[ $rc -eq 0 ] || { echo "FAIL: $sched: exit $rc"; fail=1; continue; }
	$PY - "$T/$sched.json" "$T/$sched.log" <<'PYEOF' || fail=1
import json, re, sys
d = json.load(open(sys.argv[1]))
log = open(sys.argv[2]).read()
loss = [float(x) for x in re.findall(r"train loss ([0-9.]+)", log)]
ok = len(d["plan"]["stages"]) >= 2 and d["test_accuracy"] > 0.3 and len(loss) == 2 and loss[1] < loss[0]
print(("ok" if ok else "FAIL") + f": {d['schedule']}: {len(d['plan']['stages'])} stages, loss {loss}, "
      f"accuracy {d['test_accuracy']:.3f}")
sys.exit(0 if ok else 1)
PYEOF
done
exit $fail
