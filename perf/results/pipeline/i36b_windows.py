#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The 1F1B windows of i36's plans, re-read from i36_runs.json: per stage of each launch's
plan, NOAM, the round trip RT_s and the window the planner now chooses (tally.plan.planner.
depths), whether NOAM's window covers the round trip (c_s + RT_s <= NOAM_s m_s P), and what
the plan's runs measured at that stage (CPU per minibatch of its busiest rank; the period
measured / predicted). A stage whose NOAM window does not cover its round trip waits.

    /usr/bin/python3 perf/results/pipeline/i36b_windows.py [i36_runs.json]"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(SRC, "perf"))
sys.path.insert(0, os.path.join(SRC, "gpu_agent", "python"))
import pipeline_emulate as pe  # noqa: E402
import tally.plan as tp  # noqa: E402


def main():
    runs = json.load(open(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "i36_runs.json")))
    print("| launch | plan | P ms | per stage: m, NOAM -> window, c + RT ms vs NOAM m P ms "
          "(covered?), busiest rank's CPU ms per minibatch in runs 0 / 5 | measured/predicted "
          "runs 0 / 5 |")
    print("|---|---|---|---|---|")
    for L in runs:
        stages = L["plan_stages"]
        if len(stages) == 1:
            continue
        ev = tp.evaluate(L["profile"], L["cluster"], stages)
        P = ev["predicted_s_per_minibatch"]
        ks = [k for k, r in enumerate(L["runs"]) if r["name"] == "plan"]
        cells = []
        for s, x in enumerate(ev["stages"]):
            m = x["replicas"]
            need = x["busy_s"] + x["round_trip_s"]
            cov = need <= x["noam"] * m * P
            cpu = []
            for k in ks:
                res = [rk[k] for rk in L["ranks"] if rk[k]["stage"] == s]
                nmb = sum(len(r["done_at"]) for r in res)
                cpu.append(f"{max(r['cpu_s'] for r in res) / (nmb / m) * 1e3:.1f}"
                           if "cpu_s" in res[0] else "-")
            cells.append(f"s{s} x{m}: {x['noam']} -> {x['in_flight']}, {need * 1e3:.1f} vs "
                         f"{x['noam'] * m * P * 1e3:.1f} ({'yes' if cov else '**no**'}), CPU "
                         + " / ".join(cpu))
        ratio = []
        for k in ks:
            st, _ = pe.measured([rk[k] for rk in L["ranks"]], 4)
            ratio.append(f"{st['mean'] / L['runs'][k]['predicted_s']:.2f}")
        print(f"| {L['launch']} | {pe.describe(stages).replace('|', '/')} | {P * 1e3:.1f} | "
              + "<br>".join(cells) + f" | {' / '.join(ratio)} |")


if __name__ == "__main__":
    main()
