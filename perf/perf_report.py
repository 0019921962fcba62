#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""perf_report.py - driver behind `tally-perf report [--out DIR] [--quick]`: runs the standard
suite (sum, engine, line, allreduce), shows progress, writes DIR/report.md with tables and PNG
plots, and a cluster model projected from the measured engine rate (perf_model.py). Every
figure in the report comes from this run's JSON output; a step that could not run says so (and
why) in its section instead of showing numbers."""
import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time

import perf_model

HERE = os.path.dirname(os.path.abspath(__file__))
SECTIONS = ("Machine", "Sum rates", "Engine goodput", "Line rate", "Line-rate search (NDR/PDR)",
            "Allreduce vs peers", "Cluster model")
BENCHES = {"sum", "engine", "line", "linegen", "allreduce"}
# A step whose argv starts with MEMIF runs perf/linegen_memif.sh (tally-linegen against tallyd
# on net_memif, aggregating and --io-forward) instead of tally-perf.
MEMIF = "@linegen_memif"


def human(n):
    for unit, sh in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << sh and n % (1 << sh) == 0:
            return f"{n >> sh}{unit}"
    return str(n)


def suite(quick):
    """(key, what, argv after tally-perf, estimated seconds) of the standard suite."""
    steps = []
    if quick:
        steps.append(("sum", "sum: f32,bf16 x 64K,4M, 4-way",
                      ["sum", "--dtype", "f32", "--dtype", "bf16", "--ways", "4", "--size", "64K",
                       "--size", "4M", "--reps", "3", "--json"], 5))
        for c in ("1K", "8K"):
            steps.append(("engine", f"engine: chunk {c}",
                          ["engine", "--chunk", c, "--chunks", "64", "--reps", "1",
                           "--min-time", "0.05", "--json"], 3))
        steps.append(("line", "line: 1 worker, chunk 8K, 1 s",
                      ["line", "--workers", "1", "--seconds", "1", "--bytes", "4M", "--json"], 35))
        steps.append(("linegen", "linegen: NDR/PDR, synthetic DUT 200 k/s, 1K/8K, 2 steps",
                      ["linegen", "--synthetic-cap", "200000", "--chunk-kib", "1,8", "--trial-s",
                       "0.05", "--trials", "2", "--steps", "2", "--json"], 5))
        steps.append(("linegen", "linegen: tallyd on memif, aggregation + io-forward, 1K, 1 step",
                      [MEMIF, "--chunk-kib", "1", "--trial-s", "0.05", "--trials", "1",
                       "--steps", "1", "--lo", "1000", "--hi", "20000", "--drain-s", "0.5", "--json"],
                      30))
        steps.append(("allreduce", "allreduce: W=2, 1M, unshaped, tally/mpi/gloo",
                      ["allreduce", "--workers", "2", "--size", "1M", "--rounds", "2", "--json",
                       "--timeout", "40"], 25))
        return steps
    steps.append(("sum", "sum: f32,f16,bf16 x 16K..256M, 2 and 4 ways",
                  ["sum", "--dtype", "f32", "--dtype", "f16", "--dtype", "bf16", "--ways", "2",
                   "--ways", "4"]
                  + [a for s in ("16K", "256K", "4M", "64M", "256M") for a in ("--size", s)]
                  + ["--json"], 120))
    for c in ("1K", "2K", "4K", "8K"):
        steps.append(("engine", f"engine: chunk {c}", ["engine", "--chunk", c, "--json"], 15))
    for w in (1, 2, 4):
        steps.append(("line", f"line: {w} workers, chunk 8K",
                      ["line", "--workers", str(w), "--seconds", "5", "--json"], 60))
    for c in (2048,):  # line takes plain bytes
        steps.append(("line", f"line: 2 workers, chunk {c}",
                      ["line", "--workers", "2", "--seconds", "5", "--chunk", str(c), "--json"],
                      60))
    steps.append(("linegen", "linegen: NDR/PDR, synthetic DUT 1 M/s, 1K/4K/8K",
                  ["linegen", "--synthetic-cap", "1000000", "--json"], 120))
    steps.append(("linegen", "linegen: tallyd on memif, aggregation + io-forward, 1K/4K/8K",
                  [MEMIF, "--trial-s", "0.5", "--trials", "3", "--steps", "6", "--lo", "1000",
                   "--hi", "1000000", "--repair-us", "50000", "--json"], 240))
    steps.append(("allreduce", "allreduce: W=4, 64M, unshaped",
                  ["allreduce", "--workers", "4", "--size", "64M", "--rounds", "3", "--json"], 120))
    steps.append(("allreduce", "allreduce: W=4, K=2, 64M, links 1 Gbit/s (emulated)",
                  ["allreduce", "--workers", "4", "--size", "64M", "--rounds", "3", "--emulate",
                   "--link-gbit", "1", "--appliances", "2", "--json"], 150))
    # On a small shared box the CPUs bind at 1 Gbit/s; a slower link shows the link-bound case.
    steps.append(("allreduce", "allreduce: W=4, K=2, 64M, links 0.25 Gbit/s (emulated)",
                  ["allreduce", "--workers", "4", "--size", "64M", "--rounds", "3", "--emulate",
                   "--link-gbit", "0.25", "--appliances", "2", "--json"], 150))
    return steps


def machine():
    m = {"cpu": "?", "cores": os.cpu_count(), "flags": "", "kernel": platform.release(),
         "dpdk": "?", "python": platform.python_version()}
    try:
        with open("/proc/cpuinfo") as f:
            txt = f.read()
        mm = re.search(r"^model name\s*:\s*(.*)$", txt, re.M)
        m["cpu"] = mm.group(1).strip() if mm else "?"
        fl = re.search(r"^flags\s*:\s*(.*)$", txt, re.M)
        keep = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
                "avx512_bf16", "avx512_fp16", "avx512vnni")
        have = set(fl.group(1).split()) if fl else set()
        m["flags"] = " ".join(k for k in keep if k in have)
    except OSError:
        pass
    for cmd in (["pkg-config", "--modversion", "libdpdk"], ["dpdk-testpmd", "--version"]):
        try:
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                               timeout=10)
            if r.returncode == 0 and r.stdout.strip():
                m["dpdk"] = r.stdout.strip().splitlines()[0]
                break
        except (OSError, subprocess.TimeoutExpired):
            pass
    return m


def parse_json_lines(text):
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def run_suite(perf, steps, progress=sys.stderr, timeout=600, times=None):
    """Runs each step; returns {key: {"rows": [...], "errors": [...]}}; prints progress lines.
    Appends (what, seconds) per step to `times` when given (the report prints them)."""
    res = {}
    est_total = sum(s[3] for s in steps)
    t_start = time.time()
    est_done = 0
    for i, (key, what, argv, est) in enumerate(steps):
        el = time.time() - t_start
        # Scale the remaining estimate by how the finished steps compared with theirs.
        scale = el / est_done if est_done else 1.0
        left = (est_total - est_done) * scale
        print(f"[report {i + 1}/{len(steps)}] {what} ... elapsed {el:.0f} s, ~{left:.0f} s left",
              file=progress, flush=True)
        ent = res.setdefault(key, {"rows": [], "errors": []})
        t0 = time.time()
        try:
            cmd = [perf] + argv
            if argv and argv[0] == MEMIF:
                cmd = ["bash", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                            "linegen_memif.sh")] + argv[1:]
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, timeout=timeout)
            rows = parse_json_lines(r.stdout)
            for row in rows:
                row["_step"] = what
            ent["rows"] += rows
            if r.returncode == 77:
                ent["errors"].append(f"{what}: skipped ({r.stderr.strip()[-200:]})")
            elif r.returncode != 0 or not rows:
                ent["errors"].append(f"{what}: exit {r.returncode}: "
                                     f"{(r.stderr or r.stdout).strip()[-300:]}")
        except subprocess.TimeoutExpired:
            ent["errors"].append(f"{what}: timed out after {timeout} s")
        est_done += est
        took = time.time() - t0
        if times is not None:
            times.append((what, took))
        print(f"[report {i + 1}/{len(steps)}] {what}: {took:.1f} s", file=progress, flush=True)
    return res


def table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        out.append("| " + " | ".join("" if v is None else str(v) for v in r) + " |")
    return "\n".join(out)


def plot_md(md, out, name, alt, title, xlabel, ylabel, series, **kw):
    """Plots series into out/name and links it from md under alt (nothing without matplotlib)."""
    f = plot(os.path.join(out, name), title, xlabel, ylabel, series, **kw)
    if f:
        md.append(f"\n![{alt}]({f})")


def plot(path, title, xlabel, ylabel, series, logx=False, bar=False, logy=False, xticks=None):
    """series: {label: [(x, y), ...]}; returns the file name or None without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 4))
    if bar:
        labels = [lab for lab in series]
        ax.bar(labels, [series[lab][0][1] for lab in labels])
    else:
        for lab, pts in series.items():
            pts = sorted(pts)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=lab)
        if logx:
            ax.set_xscale("log", base=2)
        if logy:
            ax.set_yscale("log")
        if xticks:
            ax.set_xticks([t[0] for t in xticks], [t[1] for t in xticks])
        ax.legend(fontsize=8)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return os.path.basename(path)


def errors_md(ent):
    return "".join(f"\n> not measured: {e}\n" for e in ent.get("errors", []))


def sec_sum(out, ent):
    rows = [r for r in ent.get("rows", []) if "op" in r]
    md = ["## Sum rates", "", "`tally-perf sum`: reducer rate (GB/s of f32 accumulator bytes) "
          "vs memcpy of the same bytes, medians, this thread's CPU time.", ""]
    if rows:
        # baseline: the plain-loop column of tally-perf sum (f32 and i32 rows only)
        md.append(table(["op", "dtype", "ways", "size", "isa", "GB/s", "memcpy GB/s", "ratio",
                         "baseline GB/s", "vs baseline"],
                        [[r["op"], r["dtype"], r["ways"], human(r["size"]), r["isa"], r["gbps"],
                          r["memcpy_gbps"], r["ratio"], r.get("baseline_gbps", "-"),
                          r.get("vs_baseline", "-")] for r in rows]))
        ser = {}
        for r in rows:
            if r["op"] == "kway":
                ser.setdefault(f"{r['dtype']} {r['ways']}-way", []).append((r["size"], r["gbps"]))
        plot_md(md, out, "sum.png", "sum rate vs size per dtype", "k-way sum rate vs size",
                "bytes", "GB/s", ser, logx=True)
    md.append(errors_md(ent))
    return md


def sec_engine(out, ent):
    rows = [r for r in ent.get("rows", []) if r.get("bench") == "engine"]
    md = ["## Engine goodput", "", "`tally-perf engine`: one engine on one core fed prebuilt "
          "PUSH packets (goodput = gradient bytes aggregated per CPU second).", ""]
    if rows:
        md.append(table(["dtype", "workers", "chunk", "deterministic", "GB/s", "Mpps",
                         "cores per 100G"],
                        [[r["dtype"], r["workers"], r["chunk_bytes"], r["deterministic"], r["gbps"],
                          round(r["pps"] / 1e6, 3), r["cores_per_100g"]] for r in rows]))
        ser = {}
        for r in rows:
            ser.setdefault("deterministic" if r["deterministic"] else "default", []).append(
                (r["chunk_bytes"], r["gbps"]))
        plot_md(md, out, "engine.png", "engine goodput vs chunk size",
                "engine goodput vs chunk size", "chunk bytes", "GB/s per core", ser, logx=True)
    md.append(errors_md(ent))
    return md


def sec_line(out, ent):
    rows = [r for r in ent.get("rows", []) if "forward_gbps" in r]
    md = ["## Line rate", "", "`tally-perf line`: tallyd + DPDK workers on net_memif (vdev) for "
          "T seconds, aggregating vs --io-forward. On a shared 2-core box this measures the "
          "CPUs, not a NIC.", ""]
    if rows:
        md.append(table(["transport", "workers", "chunk", "goodput Gbit/s", "forward Gbit/s",
                         "ratio", "retransmits/s"],
                        [[r["transport"], r["workers"], r["chunk_bytes"], r["gbps"],
                          r["forward_gbps"], r["ratio"], r["retransmits_per_s"]] for r in rows]))
        ser = {}
        for r in rows:
            ser.setdefault(f"chunk {r['chunk_bytes']}", []).append((r["workers"], r["gbps"]))
        plot_md(md, out, "line_workers.png", "goodput vs workers", "goodput vs workers",
                "workers", "Gbit/s", ser)
        ser = {}
        for r in rows:
            ser.setdefault(f"{r['workers']} workers", []).append((r["chunk_bytes"], r["gbps"]))
        plot_md(md, out, "line_chunk.png", "goodput vs chunk size", "goodput vs chunk size",
                "chunk bytes", "Gbit/s", ser, logx=True)
    md.append(errors_md(ent))
    return md


def _ndr(r, k, default="-"):
    v = r.get("at_ndr", {}).get(k)
    return default if v is None else v


def _fmt(v):
    return "-" if v is None else f"{v:.2f}"


def _cpu(r, k):
    v = r.get(k)
    if isinstance(v, list):
        return max(v) if v else None
    return v


def _bottleneck(r):
    """Which side the measured figures point at (the rule is printed with the table)."""
    gcpu, dcpu = _cpu(r, "unpaced_gen_cpu"), _cpu(r, "unpaced_dut_cpu")
    if dcpu is not None and dcpu < 0.9:
        return f"OS: appliance lcore ran {dcpu:.0%} of the time"
    if gcpu is not None and gcpu < 0.9:
        return f"OS: generator ran {gcpu:.0%} of the time"
    if r.get("gen_limited_trials"):
        return "generator (gen-limited trials)"
    gen, dut = r.get("unpaced_gen_busy"), r.get("unpaced_dut_busy")
    if dut is not None and dut >= 0.9:
        return "appliance"
    if gen is not None and gen >= 0.9:
        return "generator"
    if dut is None:
        return "-"
    return "neither lcore busy (window/latency)"


def _at_hi(r):
    """Offered / accepted pushes/s in the search's first trial (its upper bound): where the
    generator offers more than the device takes, this shows it."""
    log = r.get("trials_log") or []
    if not log:
        return "-"
    return f"{log[0][0]:.0f}: {log[0][1]:.0f} / {log[0][2]:.0f}"


def _gen_limited(r):
    """The generator may have been the limit of this row, or the OS (on either side: then
    the figures are the scheduler's)."""
    return bool(r.get("gen_limited_trials")) or _bottleneck(r).startswith(("generator", "OS:"))


def _cores(r):
    return f"{r.get('gen_lcores', 1)} / {r.get('dut_cores', 1)}"


def cores_per_100g(r):
    """Appliance cores per 100 Gbit/s of gradient payload at the NDR: 100 / (NDR payload
    Gbit/s / appliance cores); "-" where the generator was the limit (the figure would be the
    generator's, or the OS's) or nothing passed."""
    g = _ndr(r, "payload_gbps", None)
    if _gen_limited(r) or not isinstance(g, (int, float)) or g <= 0:
        return "-"
    return round(100.0 * r.get("dut_cores", 1) / g, 1)


def linegen_rows_md(rows):
    """The NDR/PDR table of linegen rows, one per DUT, mode and chunk size."""
    def lat(r, k, q):
        return r.get("at_ndr", {}).get(k, {}).get(q, "-")

    def mpps(r):
        v = r.get("ndr_pps")
        return round(v / 1e6, 4) if isinstance(v, (int, float)) else "-"
    return table(["DUT", "mode", "gen lcores / DUT cores", "chunk", "ranks", "NDR push/s",
                  "NDR Mpps", "PDR push/s",
                  "gen-limited trials", "NDR Gbit/s payload", "unpaced offered/s",
                  "unpaced accepted/s", "upper bound: offered / accepted", "gen busy at NDR",
                  "DUT busy at NDR",
                  "unpaced gen / DUT busy", "unpaced gen / DUT CPU",
                  "chunk p50/p99/p99.9/max us", "push p99 us",
                  "round p99 us", "limit", "DUT cores per 100G at NDR"],
                 [[r["dut"], r.get("mode", "aggregation"), _cores(r), r["chunk_bytes"],
                   r["ranks"],
                   r["ndr_pps"], mpps(r), r["pdr_pps"], r.get("gen_limited_trials", "-"),
                   _ndr(r, "payload_gbps"), r["unpaced_offered_pps"],
                   r["unpaced_accepted_pps"], _at_hi(r), _ndr(r, "gen_busy"),
                   _ndr(r, "dut_busy"),
                   f"{r.get('unpaced_gen_busy', '-')} / {r.get('unpaced_dut_busy', '-')}",
                   f"{_fmt(_cpu(r, 'unpaced_gen_cpu'))} / {_fmt(_cpu(r, 'unpaced_dut_cpu'))}",
                   "/".join(str(lat(r, "chunk", q)) for q in
                            ("p50_us", "p99_us", "p999_us", "max_us")),
                   lat(r, "push", "p99_us"), lat(r, "round", "p99_us"), _bottleneck(r),
                   cores_per_100g(r)]
                  for r in rows])


def _ratio(a, b):
    return round(a / b, 3) if isinstance(a, (int, float)) and isinstance(b, (int, float)) \
        and b > 0 else "-"


def linegen_ratio_md(rows):
    """Aggregation vs io-forward on the same port, frames and cores, per run (step or file),
    DUT and chunk."""
    pairs = {}
    for r in rows:
        pairs.setdefault((r.get("_step", ""), r["dut"], r.get("gen_lcores", 1),
                          r.get("dut_cores", 1), r["chunk_bytes"]),
                         {})[r.get("mode", "aggregation")] = r
    out = []
    for (step, dut, gl, dc, chunk), m in sorted(pairs.items()):
        a, f = m.get("aggregation"), m.get("io-forward")
        if not a or not f:
            continue
        out.append([step or "-", dut, f"{gl} / {dc}", chunk, a["ndr_pps"], f["ndr_pps"], _ratio(a["ndr_pps"], f["ndr_pps"]),
                    a["pdr_pps"], f["pdr_pps"], _ratio(a["pdr_pps"], f["pdr_pps"]),
                    a["unpaced_accepted_pps"], f["unpaced_accepted_pps"],
                    _ratio(a["unpaced_accepted_pps"], f["unpaced_accepted_pps"]),
                    a.get("gen_limited_trials", "-"), f.get("gen_limited_trials", "-")])
    if not out:
        return ""
    return table(["run", "DUT", "gen lcores / DUT cores", "chunk", "aggr NDR", "fwd NDR", "NDR ratio", "aggr PDR", "fwd PDR",
                  "PDR ratio", "aggr unpaced acc/s", "fwd unpaced acc/s", "unpaced ratio",
                  "aggr gen-limited", "fwd gen-limited"], out)


LINEGEN_TEXT = (
    "`tally-perf linegen` / `tally-linegen`: one generator lcore playing R ranks, paced by the "
    "TSC; binary search for the highest push rate with no missing RESULT and no retransmission "
    "(NDR) and with at most 0.5% missing (PDR), every trial of a step passing. DUT `synthetic`: "
    "the in-process throttled appliance (perf_gen_synth.c), so those rows measure the generator "
    "and the search, not tallyd; DUT `dpdk`: tallyd on net_memif (perf/linegen_memif.sh), mode "
    "`aggregation` or `io-forward` (tallyd --io-forward bouncing every push: the I/O twin on the "
    "same port, frames and cores). Latency at the NDR: a chunk's last push -> its RESULTs (the "
    "device's latency; io-forward: each push's own round trip), each rank's own push -> its "
    "RESULT, and whole rounds. A trial whose generator offered under 95% of the rate asked fails "
    "as gen-limited: with any, a found rate is a lower bound of the device's. Busy = poll loops "
    "that found work / all poll loops, of the generator's lcore and of the busiest appliance "
    "datapath lcore (its control socket's stats_get, read around the trial). CPU = a "
    "busy-polling thread's CPU time / wall time in the unpaced trial (the generator's own "
    "thread; the appliance's DPDK worker threads from /proc): under 1 the OS ran something "
    "else on that core, which busy polls cannot show. `limit`: the OS if either side's lcore "
    "ran under 90% of the time in the unpaced trial; else the generator if any search trial "
    "was gen-limited; else the appliance if its lcore was >= 90% busy in the unpaced trial, "
    "the generator if its lcore was; else neither. `gen lcores / DUT cores`: tally-linegen "
    "--gen-lcores N (N generator lcores, a memif port and a job each, every trial at rate / N "
    "per lcore, figures summed; gen busy: the busiest lcore, gen CPU: the lowest) against "
    "tallyd's D datapath cores (perf/linegen_memif.sh GEN_LCORES=N DUT_LCORES=D). `DUT cores "
    "per 100G at NDR`: 100 / (gradient payload Gbit/s at the NDR / D), shown only where the "
    "limit is not the generator (no gen-limited trial, limit not the generator) nor the OS: "
    "else '-'.")


def sec_linegen(out, ent):
    rows = [r for r in ent.get("rows", []) if "ndr_pps" in r]
    md = ["## Line-rate search (NDR/PDR)", "", LINEGEN_TEXT, ""]
    if rows:
        md.append(linegen_rows_md(rows))
        ratio = linegen_ratio_md(rows)
        if ratio:
            md += ["", "Aggregation / io-forward, same port, frames and cores:", "", ratio]
        ser = {}
        for r in rows:
            c = r.get("at_ndr", {}).get("chunk", {})
            if not c.get("n", 1) or not c.get("p50_us"):
                continue  # no trial at the NDR (none found)
            lab = f"{r['dut']} {r.get('mode', 'aggregation')} {r['chunk_bytes']} B"
            if r.get("_step"):
                lab += f" ({r['_step'][:24]})"
            ser[lab] = [(x, c.get(q, 0)) for x, q in ((1, "p50_us"), (2, "p99_us"),
                                                     (3, "p999_us"), (4, "max_us"))]
        plot_md(md, out, "linegen_latency.png", "latency at NDR",
                "push -> answer at the NDR, per DUT, mode and chunk size", "percentile",
                "us (log)", ser, logy=True,
                xticks=[(1, "p50"), (2, "p99"), (3, "p99.9"), (4, "max")])
    md.append(errors_md(ent))
    return md


def sec_allreduce(out, ent):
    rows = [r for r in ent.get("rows", []) if "impl" in r]
    md = ["## Allreduce vs peers", "", "`tally-perf allreduce`: W processes, each in its own "
          "network namespace on one bridge (veth), all end with the sum; algbw = bytes/time, "
          "busbw = algbw*2(W-1)/W (NCCL's definitions, in Gbit/s here; NCCL prints GB/s). Every "
          "implementation barriers, runs its warm-up round(s) untimed, then times the rounds; "
          "retransmits: Tally's re-sent chunks (timeouts).", ""]
    if rows:
        md.append(table(["setup", "impl", "workers", "bytes", "s/round", "algbw Gbit/s",
                         "busbw Gbit/s", "verified", "retransmits", "note"],
                        [[r.get("_step", ""), r["impl"], r["workers"], human(r["bytes"]),
                          r["seconds_per_round"], r["algbw_gbps"], r["busbw_gbps"], r["verified"],
                          r.get("retransmits", ""), r.get("note", "")] for r in rows]))
        for step in dict.fromkeys(r.get("_step", "") for r in rows):
            ok = [r for r in rows if r.get("_step", "") == step and r["verified"]]
            t = next((r for r in ok if r["impl"] == "tally"), None)
            peers = [r for r in ok if r["impl"] != "tally"]
            if t and peers:
                best = min(peers, key=lambda r: r["seconds_per_round"])
                ratio = best["seconds_per_round"] / t["seconds_per_round"]
                md.append(f"\n{step}: Tally {ratio:.2f}x the speed of the faster peer "
                          f"({best['impl']}).")
        idx = 0
        for step in dict.fromkeys(r.get("_step", "") for r in rows):
            ser = {r["impl"]: [(0, r["algbw_gbps"])] for r in rows
                   if r.get("_step", "") == step and r["algbw_gbps"] is not None}
            if not ser:
                continue
            idx += 1
            plot_md(md, out, f"allreduce{idx}.png", "Tally vs peers",
                    f"Tally vs peers: {step}"[:70], "implementation", "algbw Gbit/s", ser, bar=True)
    md.append(errors_md(ent))
    return md


def sec_model(out, res):
    """The cluster model (perf_model.py) from this run's engine and allreduce rows; stores its
    rows and check points in res["model"] (results.json)."""
    md, ent = perf_model.report_section(out, res.get("engine", {}).get("rows", []),
                                        res.get("allreduce", {}).get("rows", []))
    res["model"] = ent
    md.append(errors_md(ent))
    return md


def run_time_md(times, seconds):
    """One line: each step's measured seconds and the total (a figure, never a limit)."""
    steps = "".join(f"{what} {t:.1f} s; " for what, t in times)
    return f"Run time, measured: {steps}total {seconds:.1f} s"


def write_report(out, mach, res, quick, seconds, times=()):
    os.makedirs(out, exist_ok=True)
    md = ["# Tally performance report", "",
          f"Generated {time.strftime('%Y-%m-%d %H:%M:%S %Z')} by `tally-perf report"
          f"{' --quick' if quick else ''}` in {seconds:.0f} s; every figure below was measured "
          "in this run.", "", run_time_md(times, seconds), "", "## Machine", "",
          table(["item", "value"], [["CPU", mach["cpu"]], ["cores", mach["cores"]],
                                    ["flags", mach["flags"]], ["kernel", mach["kernel"]],
                                    ["DPDK", mach["dpdk"]],
                                    ["vdevs", "net_memif (line), net_af_packet on veth "
                                              "(allreduce)"]]), ""]
    md += sec_sum(out, res.get("sum", {})) + [""]
    md += sec_engine(out, res.get("engine", {})) + [""]
    md += sec_line(out, res.get("line", {})) + [""]
    md += sec_linegen(out, res.get("linegen", {})) + [""]
    md += sec_allreduce(out, res.get("allreduce", {})) + [""]
    md += sec_model(out, res) + [""]
    path = os.path.join(out, "report.md")
    with open(path, "w") as f:
        f.write("\n".join(md))
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"machine": mach, "results": res}, f, indent=1)
    return path


def main(argv):
    p = argparse.ArgumentParser(prog="tally-perf report")
    p.add_argument("--out", default="tally-perf-report")
    p.add_argument("--quick", action="store_true", help="a small suite (under two minutes)")
    p.add_argument("--perf", default=os.path.join(os.environ.get("TALLY_BUILD", ""), "perf",
                                                  "tally-perf"))
    p.add_argument("--only", default="", help="comma list of sum,engine,line,linegen,allreduce")
    p.add_argument("--linegen-json", action="append", default=[], metavar="FILE",
                   help="tally-linegen JSON lines (perf/linegen_memif.sh OUT=FILE) to add to "
                        "the NDR/PDR section")
    p.add_argument("--linegen-table", metavar="FILE",
                   help="print the NDR/PDR tables of FILE's tally-linegen JSON lines and exit")
    o = p.parse_args(argv)
    if o.linegen_table:
        with open(o.linegen_table) as f:
            rows = [r for r in parse_json_lines(f.read()) if "ndr_pps" in r]
        if not rows:
            print(f"tally-perf report: no linegen lines in {o.linegen_table}", file=sys.stderr)
            return 1
        print(linegen_rows_md(rows))
        ratio = linegen_ratio_md(rows)
        print("\n" + ratio if ratio else "\n(no aggregation + io-forward pair: no ratio)")
        return 0
    extra = []
    for path in o.linegen_json:
        try:
            with open(path) as f:
                got = [r for r in parse_json_lines(f.read()) if "ndr_pps" in r]
            for r in got:
                r["_step"] = os.path.basename(path)
            extra += got
        except OSError as e:
            print(f"tally-perf report: --linegen-json {path}: {e.strerror}", file=sys.stderr)
            return 2
    if not os.access(o.perf, os.X_OK):
        print(f"tally-perf report: no tally-perf at {o.perf}", file=sys.stderr)
        return 2
    steps = suite(o.quick)
    if o.only:
        keep = set(o.only.split(","))
        bad = keep - BENCHES
        if bad:
            print(f"tally-perf report: unknown --only {','.join(sorted(bad))}", file=sys.stderr)
            return 2
        steps = [s for s in steps if s[0] in keep]
    t0 = time.time()
    times = []
    res = run_suite(o.perf, steps, times=times)
    if extra:
        res.setdefault("linegen", {"rows": [], "errors": []})["rows"] += extra
    path = write_report(o.out, machine(), res, o.quick, time.time() - t0, times)
    print(f"tally-perf report: wrote {path} in {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
