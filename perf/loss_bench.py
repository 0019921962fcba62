#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""loss_bench.py - what packet loss costs a job's rounds/s: the same verified end-to-end job
(tests/e2e/e2e_run.sh: tally-udpd in one network namespace, W tally-worker processes in
another, the relay tly_relay between them dropping --drop percent of the packets each way)
run at drop=0 and at drop=N, alternating in ABBA order (0 N N 0 0 N ...: load drift on a
shared machine hits both levels alike). Prints every run, then per dtype the rounds/s of each
level over all its runs (total rounds / total time) and their ratio (drop=N / drop=0).

    perf/loss_bench.py [--bin build] [--drop 1] [--pairs 2] [--rounds 200] [--workers 2]
                       [--bytes 8M] [--keys 8] [--dtypes "f32 bf16"] [--json]

Needs root (network namespaces), like the e2e suite. Exit status 1 if any run did not pass
(a sum wrong, a worker failed), 2 on bad arguments.
"""
import argparse
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
E2E = os.path.join(HERE, "..", "tests", "e2e", "e2e_run.sh")
DTYPES = ("f32", "bf16", "f16", "i32")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", default="build", help="build directory (tally-worker, tally-udpd, the relay)")
    p.add_argument("--drop", type=float, default=1.0, help="percent of packets dropped each way")
    p.add_argument("--pairs", type=int, default=2, help="runs per level (ABBA order)")
    p.add_argument("--rounds", type=int, default=200)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--bytes", default="8M")
    p.add_argument("--keys", type=int, default=8)
    p.add_argument("--dtypes", default="f32 bf16")
    p.add_argument("--seed", type=int, default=1, help="the relay's drop pattern")
    p.add_argument("--json", action="store_true")
    o = p.parse_args(argv)
    if not 0 < o.drop < 100:
        p.error(f"--drop {o.drop}: a percentage above 0 and below 100")
    if o.pairs < 1 or o.rounds < 1 or o.workers < 2 or o.keys < 1:
        p.error("--pairs, --rounds and --keys must be at least 1, --workers at least 2")
    bad = [d for d in o.dtypes.split() if d not in DTYPES]
    if bad or not o.dtypes.split():
        p.error(f"--dtypes {o.dtypes!r}: a list of {', '.join(DTYPES)}")
    return o


def order(pairs, drop):
    """The levels in ABBA order: 0 N N 0 0 N ... (pairs runs of each)."""
    out = []
    for i in range(pairs):
        out += [0.0, drop] if i % 2 == 0 else [drop, 0.0]
    return out


def parse_run(text):
    """Per dtype rounds/s, workers' retransmits and RESULTs received twice from one
    e2e_run.sh output; the appliance's resends and duplicate pushes; passed (its PASS line)."""
    res, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"^(\w+): \d+ workers ok=\d+ .*mismatches=(\d+) .*retransmits=(\d+) dup_results=(\d+)", line)
        if m and m.group(1) in DTYPES:
            cur = m.group(1)
            res[cur] = {"mismatches": int(m.group(2)), "retransmits": int(m.group(3)),
                        "dup_results": int(m.group(4))}
            continue
        m = re.match(r"^\s+rounds/s=([0-9.]+)", line)
        if m and cur:
            res[cur]["rounds_s"] = float(m.group(1))
            cur = None
    appl = {}
    m = re.search(r"appliance: (\{.*\})", text)
    if m:
        try:
            st = json.loads(m.group(1))
            appl = {k: st.get(k) for k in ("pushes", "duplicates", "resends")}
        except ValueError:
            pass
    passed = bool(re.search(r"\] PASS\s*$", text, re.M)) and all(
        "rounds_s" in r and r["mismatches"] == 0 for r in res.values()) and bool(res)
    return {"dtypes": res, "appliance": appl, "passed": passed}


def summarize(runs, rounds):
    """runs: [(drop, parse_run result)]. Per dtype: rounds/s of each level over its runs
    (total rounds / total seconds), the ratio, and the ratio of each ABBA pair in order."""
    out = {}
    dts = sorted({d for _, r in runs for d in r["dtypes"]}, key=DTYPES.index)
    for dt in dts:
        secs, n, seq = {}, {}, []
        for drop, r in runs:
            x = r["dtypes"].get(dt, {}).get("rounds_s")
            if not x:
                continue
            lvl = "loss" if drop else "none"
            secs[lvl] = secs.get(lvl, 0.0) + rounds / x
            n[lvl] = n.get(lvl, 0) + 1
            seq.append((lvl, x))
        if not secs.get("none") or not secs.get("loss"):
            continue
        rate = {k: n[k] * rounds / secs[k] for k in secs}
        pairs = [b[1] / a[1] if a[0] == "none" else a[1] / b[1]
                 for a, b in zip(seq[0::2], seq[1::2]) if a[0] != b[0]]
        out[dt] = {"none_rounds_s": rate["none"], "loss_rounds_s": rate["loss"],
                   "ratio": rate["loss"] / rate["none"], "pair_ratios": pairs, "runs": n}
    return out


def run_one(o, drop, i):
    cmd = ["bash", E2E, "--tag", f"L{i % 10}", "--bin", o.bin, "--appliance", "udpd",
           "--workers", str(o.workers), "--bytes", o.bytes, "--rounds", str(o.rounds),
           "--keys", str(o.keys), "--dtypes", o.dtypes,
           "--impair", f"relay:seed={o.seed},drop={drop:g}"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    r = parse_run(p.stdout)
    r["passed"] = r["passed"] and p.returncode == 0
    if not r["passed"]:
        sys.stderr.write(p.stdout[-4000:])
    return r


def main(argv=None):
    o = parse_args(sys.argv[1:] if argv is None else argv)
    runs, ok = [], True
    for i, drop in enumerate(order(o.pairs, o.drop)):
        load = os.getloadavg()[0]
        r = run_one(o, drop, i)
        r["load"] = load
        runs.append((drop, r))
        ok = ok and r["passed"]
        if not o.json:
            parts = [f"{dt} {v.get('rounds_s', 0):.2f} rounds/s ({v['retransmits']} re-sent)"
                     for dt, v in r["dtypes"].items()]
            print(f"run {i + 1} drop={drop:g}% (load {load:.1f}): " + ", ".join(parts) +
                  f"; appliance: {r['appliance'].get('resends')} RESULTs re-sent, "
                  f"{r['appliance'].get('duplicates')} duplicate pushes"
                  + ("" if r["passed"] else "  FAILED"), flush=True)
    s = summarize(runs, o.rounds)
    if o.json:
        print(json.dumps({"drop": o.drop, "rounds": o.rounds, "workers": o.workers,
                          "bytes": o.bytes, "keys": o.keys, "summary": s,
                          "runs": [{"drop": d, **r} for d, r in runs], "passed": ok}))
    else:
        for dt, v in s.items():
            print(f"{dt}: no loss {v['none_rounds_s']:.2f} rounds/s, {o.drop:g}% loss "
                  f"{v['loss_rounds_s']:.2f} rounds/s ({v['runs']['none']} runs each): ratio "
                  f"{v['ratio']:.3f}; pairs " + ", ".join(f"{x:.3f}" for x in v["pair_ratios"]))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
