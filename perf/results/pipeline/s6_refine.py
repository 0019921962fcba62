#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A processor-sharing refinement of the shared-host term, tried on saved launches and not
adopted (perf/README.md, "The runtime's steps timed as it runs them"): a stage's replicas
compute at max(1, (m + e + the other stages' ranks' busy fractions) / C) times their time
alone, where the model counts the other stages idle; solved for the period by bisection.
Prints each launch's plan runs' measured/predicted, as predicted -> refined.

    /usr/bin/python3 perf/results/pipeline/s6_refine.py perf/results/pipeline/s6d_runs.json ...
"""
import json
import os
import sys

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(SRC, "gpu_agent", "python"))
from tally.plan import planner as P  # noqa: E402


def refined(prof, cl, stages):
    """The plan's period under the refinement (s)."""
    ev = P.evaluate(prof, cl, stages)
    sh = P.sharing(P.load_profile(prof), P.load_levels(cl)[0])
    if not sh or len(stages) == 1:
        return ev['predicted_s_per_minibatch']
    C, R, e = sh['cores'], sh['ranks_at_once'], sh['other_load']

    def s(k):
        return max(1.0, (k + e) / C)
    st = ev['stages']

    def T(Pp):
        out = []
        for i, x in enumerate(st):
            others = 0.0
            for j, y in enumerate(st):
                if j == i:
                    continue
                busy = y['compute_s'] * y['compute_factor'] + y['fixed_s'] + y['update_s']
                others += y['replicas'] * min(1.0, busy / (y['replicas'] * Pp))
            seff = max(1.0, (x['replicas'] + e + others) / C)
            comp = x['compute_s'] * seff / s(R)
            t = (comp + x['fixed_s'] + x['sync_s'] + x['update_s']) / x['replicas']
            out.append(max(t, x['send_s']))
        return max(out)
    lo = ev['predicted_s_per_minibatch']
    hi = max(lo, T(lo))
    for _ in range(50):
        mid = (lo + hi) / 2
        if T(mid) > mid:
            lo = mid
        else:
            hi = mid
    return hi


def main():
    for g in sys.argv[1:]:
        for L in json.load(open(g)):
            row = []
            for r in L['runs']:
                if r['name'] != 'plan':
                    continue
                stages = L['plan_stages']
                p0 = r['predicted_s']
                p1 = refined(L['profile'], L['cluster'], stages)
                m = r['measured']['mean']
                row.append(f"{m/p0:.2f}->{m/p1:.2f}")
            print(os.path.basename(g).split('_')[0], L['launch'], row)


if __name__ == "__main__":
    main()
