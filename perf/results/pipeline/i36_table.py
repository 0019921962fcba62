#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Within-25% counts of perf/pipeline_emulate.py launches, per configuration (the planner's
pipeline plans, pure DP through Tally, pure DP over gloo; a "plan" that is one stage of every
rank counts as DP-Tally's twin, "plan=dp"), by statistic and model:
  h36_runs.json (the h36 launches, predicted without the shared-host term):
    as h36 reported (median of windows of 4, all minibatches: at batch 32 the 57th on were
    empty), and the steady mean on whole minibatches only (the finishes of minibatches
    0-55 at batch 32);
  i36_runs.json (this branch's launches): the steady mean against the prediction with the
    shared-host term and without it, and h36's median statistic against the prediction
    without it; then one line per run.

    /usr/bin/python3 perf/results/pipeline/i36_table.py [h36_runs.json [i36_runs.json]]
(i36b_runs.json as the second file: branch i36b's launches, with each stage's 1F1B window and
NOAM after the plan chosen; "-" as the first: no h36 launches, e.g. `- s6d_runs.json`)
"""
import collections
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(SRC, "perf"))
import pipeline_emulate as pe  # noqa: E402

DIGITS = 1797
CFG = {"": "vgg b32", "--batch 16": "vgg b16",
       "--batch 16 --link-gbit 0.05 --appliance-gbit 0.2": "vgg b16 0.05/0.2",
       "--model mlp --width 256": "mlp b32"}


def setup(args):
    a = " ".join(x for x in args.replace("--bin build", "").replace("--noam-twin", "").split()
                 if x)
    for k in ("--json", "--label"):  # i36's launches name their output
        if k in a:
            w = a.split()
            i = w.index(k)
            a = " ".join(w[:i] + w[i + 2:])
    return CFG.get(a, a)


def batch_of(args):
    w = args.split()
    return int(w[w.index("--batch") + 1]) if "--batch" in w else 32


def whole_only(res, batch):
    """Each last-stage rank's finishes of whole minibatches only (h36's batch-32 runs)."""
    whole = DIGITS // batch
    last = max(x["stage"] for x in res)
    out, r = [], 0
    for x in res:
        if x["stage"] == last:
            m = x["replicas"]
            x = dict(x, done_at=[t for j, t in enumerate(x["done_at"]) if r + j * m < whole])
            r += 1
        out.append(x)
    return out


def name_of(L, r):
    return "plan=dp" if r["name"] == "plan" and len(L["plan_stages"]) == 1 else r["name"]


def within(m, p):
    return abs(m / p - 1) <= 0.25


def main():
    p1 = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "h36_runs.json")
    h36 = [] if p1 == "-" else json.load(open(p1))
    p2 = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "i36_runs.json")
    i36 = json.load(open(p2)) if os.path.exists(p2) else []
    tag = os.path.basename(p2).split("_")[0]  # i36, i36b: the branch whose launches these are
    cnt = collections.defaultdict(lambda: [0, 0])
    for L in h36:
        for k, r in enumerate(L["runs"]):
            res = [rk[k] for rk in L["ranks"]]
            n = name_of(L, r)
            old, _ = pe.measured(res, 4)
            new, _ = pe.measured(whole_only(res, batch_of(L["command_args"])), 4)
            for col, v in (("h36: median of windows, all minibatches", old["median"]),
                           ("h36: steady mean, whole minibatches", new["mean"])):
                c = cnt[(col, n)]
                c[0] += within(v, r["predicted_s"])
                c[1] += 1
    lines = []
    for L in i36:
        cells = []
        for k, r in enumerate(L["runs"]):
            res = [rk[k] for rk in L["ranks"]]
            n = name_of(L, r)
            m, _ = pe.measured(res, 4)
            p, p0 = r["predicted_s"], r["predicted_s_no_share"]
            for col, v, pp in ((f"{tag}: steady mean vs shared-host model", m["mean"], p),
                               (f"{tag}: steady mean vs model without it", m["mean"], p0),
                               (f"{tag}: median of windows vs model without it", m["median"], p0)):
                c = cnt[(col, n)]
                c[0] += within(v, pp)
                c[1] += 1
            rtx = sum(x["tcp"]["retrans_segs"] for x in res if "tcp" in x)
            rto = sum(x["tcp"]["rto_timeouts"] for x in res if "tcp" in x)
            cpu = ""
            if "cpu_s" in res[0]:  # the busiest rank's CPU per minibatch, the host's busy share
                nmb = len(res[0]["done_at"]) * res[0]["replicas"]
                hc = res[0]["host_cpu_s"]
                busy = 1 - (hc["idle"] + hc["iowait"] + hc["steal"]) / sum(hc.values())
                cpu = (f"; CPU {max(x['cpu_s'] for x in res) / nmb * 1e3:.1f} ms, "
                       f"host {busy:.0%}")
            cells.append(f"{k} {n}: {p * 1e3:.1f} ({p0 * 1e3:.1f}) / {m['mean'] * 1e3:.1f} "
                         f"[{m['median'] * 1e3:.1f}; {m['stalls']} stalls "
                         f"{m['stall_share']:.0%}; TCP rtx {rtx}, RTO {rto}{cpu}] "
                         f"**{m['mean'] / p:.2f}** ({m['mean'] / p0:.2f})")
        sh = L["plan"].get("shared_host") or {}
        comp = sum(x["fwd_s"] + x["bwd_s"] for x in L["profile"]["layers"])
        solo = sum(x.get("fwd_solo_s", 0) + x.get("bwd_solo_s", 0) for x in L["profile"]["layers"])
        win = ""
        if "in_flight" in L["plan_stages"][0]:  # i36b on: the planner's windows (NOAM)
            win = " [" + ", ".join(f"{x['in_flight']} ({x['noam']})" for x in L["plan_stages"]) + "]"
        lines.append(f"| {L['launch']} | {setup(L['command_args'])} | {L['start_utc']}, "
                     f"{L['loadavg_start'].split()[0]} → {L['loadavg_end'].split()[0]} | "
                     f"{pe.describe(L['plan_stages']).replace('|', '/')}{win} | {comp * 1e3:.1f} / "
                     f"{solo * 1e3:.1f} | {sh.get('other_load', float('nan')):.2f} | "
                     + "<br>".join(cells) + " |")
    names = [n for n in ("plan", "plan-noam", "plan=dp", "dp-tally", "dp-gloo")
             if any(v[1] for (_, m), v in cnt.items() if m == n)]  # the configurations run
    print("| statistic and model | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for col in dict.fromkeys(c for c, _ in cnt):
        print(f"| {col} | " + " | ".join(
            f"{cnt[(col, n)][0]} of {cnt[(col, n)][1]}" if cnt[(col, n)][1] else "—"
            for n in names) + " |")
    if lines:
        print("\n| launch | setup | start UTC, load avg start → end | plan chosen | profiled "
              "compute ms, all ranks at once / alone | other load e | run: predicted ms "
              "(without the shared-host term) / measured ms [median of windows of 4; stalls; TCP "
              "retransmitted segments, timeouts, all ranks; the busiest rank's CPU ms per "
              "minibatch, the host's cores busy] "
              "**measured/predicted** (without the term) |")
        print("|---|---|---|---|---|---|---|")
        print("\n".join(lines))


if __name__ == "__main__":
    main()
