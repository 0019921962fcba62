#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Every run of h36_runs.json (perf/pipeline_emulate.py launches, their profiles and each
rank's finished-minibatch times) as perf/README.md's table: measured by pipeline_emulate's own
measured() (median over sliding windows of 4 minibatches, the steady part's mean), predicted
by tally.plan.evaluate with the profile's measured runtime terms and, in parentheses, without
them (PipeDream's formula alone, as before issue 36's h36 change); then the counts within 25%.

    /usr/bin/python3 perf/results/pipeline/h36_table.py [h36_runs.json]
"""
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(SRC, "perf"))
import pipeline_emulate as pe  # noqa: E402
import tally.plan as tp  # noqa: E402

CFG = {"": "vgg b32", "--batch 16": "vgg b16",
       "--batch 16 --link-gbit 0.05 --appliance-gbit 0.2": "vgg b16, 0.05/0.2 Gbit/s",
       "--model mlp --width 256": "mlp b32"}


def bare(prof):
    b = json.loads(json.dumps(prof))
    b.pop("overhead", None)
    for layer in b["layers"]:
        for f in pe.tp_planner.LAYER_EXTRA:
            layer.pop(f, None)
    return b


def within(m, p):
    return abs(m / p - 1) <= 0.25


def main():
    launches = json.load(open(sys.argv[1] if len(sys.argv) > 1 else
                              os.path.join(HERE, "h36_runs.json")))
    c = dict.fromkeys(("runs", "new", "new_mean", "old", "old_mean", "above", "above_old",
                       "cfgs", "cfg_new", "cfg_old"), 0)
    print("| launch | setup | start UTC, load avg start → end | plan chosen | profiled compute ms "
          "| message_s ms | run: predicted ms (without the new terms) / measured median ms "
          "[p10-p90] **median/predicted** (mean/predicted) | mean of 2 runs / predicted: "
          "plan / DP-Tally / DP-gloo |")
    print("|---|---|---|---|---|---|---|---|")
    for L in launches:
        whole = {"layers": [0, len(L["profile"]["layers"])], "ranks": [0, 1, 2, 3]}
        st = {"plan": L["plan_stages"], "dp-tally": [dict(whole, aggregation="tally")],
              "dp-gloo": [dict(whole, aggregation="ring")]}
        old_prof = bare(L["profile"])
        cells, per = [], {}
        for k, r in enumerate(L["runs"]):
            m, _ = pe.measured([rk[k] for rk in L["ranks"]], 4)
            p = tp.evaluate(L["profile"], L["cluster"], st[r["name"]])["predicted_s_per_minibatch"]
            assert abs(p - r["predicted_s"]) < 1e-12  # what the launch printed
            po = tp.evaluate(old_prof, L["cluster"], st[r["name"]])["predicted_s_per_minibatch"]
            c["runs"] += 1
            c["new"] += within(m["median"], p)
            c["new_mean"] += within(m["mean"], p)
            c["old"] += within(m["median"], po)
            c["old_mean"] += within(m["mean"], po)
            c["above"] += m["median"] > p
            c["above_old"] += m["median"] > po
            c.setdefault(r["name"], [0, 0])
            c[r["name"]][0] += within(m["median"], p)
            c[r["name"]][1] += 1
            per.setdefault(r["name"], []).append((m["median"], p, po))
            cells.append(f"{k} {r['name']}: {p * 1e3:.1f} ({po * 1e3:.1f}) / "
                         f"{m['median'] * 1e3:.1f} [{m['p10'] * 1e3:.0f}-{m['p90'] * 1e3:.0f}] "
                         f"**{m['median'] / p:.2f}** ({m['mean'] / p:.2f})")
        means = []
        for n in ("plan", "dp-tally", "dp-gloo"):
            v = per[n]
            mm = statistics.mean(x[0] for x in v)
            c["cfgs"] += 1
            c["cfg_new"] += within(mm, v[0][1])
            c["cfg_old"] += within(mm, v[0][2])
            means.append(f"{mm / v[0][1]:.2f}")
        comp = sum(x["fwd_s"] + x["bwd_s"] for x in L["profile"]["layers"])
        args = L["command_args"].replace("--bin build", "").strip()
        print(f"| {L['launch']} | {CFG.get(args, args)} | {L['start_utc']}, "
              f"{L['loadavg_start'].split()[0]} → {L['loadavg_end'].split()[0]} | "
              f"{pe.describe(L['plan_stages']).replace('|', '/')} | {comp * 1e3:.0f} | "
              f"{L['profile']['overhead']['message_s'] * 1e3:.2f} | " + "<br>".join(cells)
              + f" | {' / '.join(means)} |")
    print(f"\nsingle runs within 25%: {c['new']} of {c['runs']} (median; {c['new_mean']} by "
          f"the mean); without the new terms {c['old']} ({c['old_mean']} by the mean); "
          f"measured above predicted in {c['above']} ({c['above_old']} without the terms)")
    print("by configuration: " + ", ".join(f"{n} {c[n][0]} of {c[n][1]}"
                                          for n in ("plan", "dp-tally", "dp-gloo")))
    print(f"means of a configuration's 2 runs within 25%: {c['cfg_new']} of {c['cfgs']} "
          f"({c['cfg_old']} without the new terms)")


if __name__ == "__main__":
    main()
