#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""perf_model.py - driver behind `tally-perf model`: projects the communication time per
training iteration of W workers on a real cluster, Tally's summation service (BytePS's
formulas, OSDI'20 sections 3 and 4) against a ring allreduce, and the appliance cores the
summation needs at the per-core engine rate measured here (`tally-perf engine`).

Units: sizes in bytes, link and engine rates in Gbit/s (10^9 bit/s), times in seconds.
Assumptions (perf/README.md "model"): full-duplex links, no congestion or loss, transfers
pipelined in small chunks (a time is bandwidth terms plus per-step latency), an appliance's
summation bound only by its cores at the measured per-core rate. Nothing here is measured but
the engine rate and, as a check, the emulated cluster's time per round.
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys

# Parameters of well-known models: the BytePS talk's table (Guo, HPC China 2020, seed 000).
KNOWN_MODELS = {"resnet50": 26e6, "vgg16": 138e6, "transformer": 61e6, "bert-base": 148e6,
                "bert-large": 387e6}
DEFAULT_PARAMS = 100e6
DEFAULT_WORKERS = (8, 16, 32, 64, 128, 256, 512, 1024)
DEFAULT_LINKS = (100.0, 400.0)
# The emulated cluster that checks the model (also a step of the full `tally-perf report`).
CHECK_ARGS = ["--emulate", "--link-gbit", "1", "--appliances", "2", "--workers", "4",
              "--size", "64M"]
EPS = 1e-9


class UsageError(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# The formulas. m: bytes per worker per iteration; n: workers; k: appliances; *_bps: bytes/s.

def ring_bytes(m, n):
    """Bytes each worker sends (and receives) in a ring allreduce: reduce-scatter then
    all-gather, n-1 steps each of m/n bytes."""
    return 2 * (n - 1) / n * m


def ring_time(m, n, link_bps, alpha_s=0.0):
    """Ring allreduce: 2(n-1)/n * m / B + 2(n-1) * alpha (2(n-1) steps, one latency each)."""
    return ring_bytes(m, n) / link_bps + 2 * (n - 1) * alpha_s


def tally_terms(m, n, k, worker_bps, app_bps, cores=None, engine_bps=None):
    """The three bounds of a summation service with k appliances (BytePS section 3): every
    worker sends m and receives m through its NIC; every appliance receives m*n/k (its shard
    from each worker) and sends m*n/k (the sums); it sums m*n/k bytes of pushes with `cores`
    cores at engine_bps each (no compute term without cores)."""
    t = {"worker_link": m / worker_bps, "appliance_link": m * n / (k * app_bps)}
    if cores:
        t["compute"] = m * n / (k * cores * engine_bps)
    return t


def tally_time(m, n, k, worker_bps, app_bps, alpha_s=0.0, cores=None, engine_bps=None):
    """(seconds, binding term): max of the bounds + 2 alpha (the push and the result hop)."""
    t = tally_terms(m, n, k, worker_bps, app_bps, cores, engine_bps)
    bound = max(t, key=t.get)
    return t[bound] + 2 * alpha_s, bound


def byteps_split(n, k):
    """BytePS's optimal partition (section 4) with k CPU appliances and a summation service
    colocated on each of the n GPU machines: fractions of m summed by each CPU appliance and by
    each GPU machine, M_cpu = 2(n-1)/(n^2+kn-2k), M_gpu = (n-k)/(n^2+kn-2k). With k >= n the
    GPU machines sum nothing and the appliances share m equally (1/k each)."""
    if k >= n:
        return 1.0 / k, 0.0
    d = n * n + k * n - 2 * k
    return 2 * (n - 1) / d, (n - k) / d


def split_time(m, n, k, worker_bps, app_bps, alpha_s=0.0):
    """Time with BytePS's split: a CPU appliance moves n*M_cpu each way, a GPU machine
    m + (n-2)*M_gpu each way (its pushes and results for the others' shards plus the pushes
    and results of its own); with equal links both are 2n(n-1)/(n^2+kn-2k) * m / B
    (k = 0: the ring's 2(n-1)/n; k = n: m/B)."""
    fc, fg = byteps_split(n, k)
    t = max(n * fc * m / app_bps, (m + (n - 2) * fg * m) / worker_bps)
    return t + 2 * alpha_s


def cores_needed(rate_bps, engine_bps):
    """Whole cores that sum rate_bps of pushes at engine_bps per core."""
    return max(1, math.ceil(rate_bps / engine_bps - EPS))


def k_to_match_ring(m, n, worker_bps, app_bps, alpha_s=0.0, cores=None, engine_bps=None):
    """Fewest appliances for which Tally's time is at most the ring's (None: no k does, i.e.
    the worker's own link already exceeds the ring's time, which same links and n >= 2 never
    give: 2(n-1)/n >= 1)."""
    room = ring_time(m, n, worker_bps, alpha_s) - 2 * alpha_s
    if room <= 0 or m / worker_bps > room * (1 + EPS):
        return None
    need = m * n / (app_bps * room)
    if cores:
        need = max(need, m * n / (cores * engine_bps * room))
    return max(1, math.ceil(need - EPS))


def project(m, n, link_gbit, k, alpha_s=0.0, engine_gbit=None, cores=None, app_gbit=None):
    """One row: ring vs Tally at n workers, k appliances, links link_gbit (appliance ports
    app_gbit, default the same), engine_gbit per core (None: cores not projected)."""
    bw = link_gbit * 1e9 / 8
    ba = (app_gbit or link_gbit) * 1e9 / 8
    e = engine_gbit * 1e9 / 8 if engine_gbit else None
    if cores and not e:
        raise UsageError("--cores needs an engine rate")
    ring = ring_time(m, n, bw, alpha_s)
    tally, bound = tally_time(m, n, k, bw, ba, alpha_s, cores, e)
    net = max(tally_terms(m, n, k, bw, ba).values())  # the links' time: what cores must keep up
    row = {"bench": "model", "model_bytes": m, "workers": n, "link_gbit": link_gbit,
           "appliance_gbit": app_gbit or link_gbit, "appliances": k, "alpha_us": alpha_s * 1e6,
           "ring_s": ring, "tally_s": tally, "tally_bound": bound, "speedup": ring / tally,
           "split_s": split_time(m, n, k, bw, ba, alpha_s),
           "k_match_ring": k_to_match_ring(m, n, bw, ba, alpha_s, cores, e),
           "engine_gbit_per_core": engine_gbit, "cores_per_appliance": cores,
           "cores_per_100g": None, "appliance_cores_needed": None, "cores_total": None}
    row["split_speedup"] = ring / row["split_s"]
    if e:
        per_app = cores_needed(m * n / k / net, e)
        row.update(cores_per_100g=12.5e9 / e, appliance_cores_needed=per_app,
                   cores_total=per_app * k)
    return row


def check_point(rows, alpha_s=0.0, engine_gbit=None, cores=1):
    """Predicted vs measured for one emulated `tally-perf allreduce` run (its JSON rows, same
    W, size and link): Tally with the emulation's appliance links (link*W/K unless the row says)
    and one datapath core per appliance (as the emulation starts tallyd), the ring against the
    peers (Gloo's allreduce is a ring; OpenMPI's picks its algorithm). None without a verified
    emulated Tally row."""
    t = next((r for r in rows if r.get("impl") == "tally" and r.get("emulate")
              and r.get("link_gbit") and r.get("verified") and r.get("seconds_per_round")), None)
    if not t:
        return None
    n, m, link, k = t["workers"], t["bytes"], float(t["link_gbit"]), t.get("appliances") or 1
    app = t.get("appliance_gbit") or link * n / k
    p = project(m, n, link, k, alpha_s, engine_gbit, cores if engine_gbit else None, app)
    out = {"bench": "model_check", "workers": n, "bytes": m, "link_gbit": link, "appliances": k,
           "appliance_gbit": app, "tally_predicted_s": p["tally_s"],
           "tally_measured_s": t["seconds_per_round"],
           "tally_measured_over_predicted": t["seconds_per_round"] / p["tally_s"],
           "ring_predicted_s": p["ring_s"], "peers": {}}
    for r in rows:
        if r.get("impl") not in (None, "tally") and r.get("verified") and \
                r.get("seconds_per_round") and r.get("workers") == n and r.get("bytes") == m:
            out["peers"][r["impl"]] = {"measured_s": r["seconds_per_round"],
                                       "measured_over_ring": r["seconds_per_round"] / p["ring_s"]}
    out["speedup_predicted"] = p["ring_s"] / p["tally_s"]
    if out["peers"]:
        best = min(v["measured_s"] for v in out["peers"].values())
        out["speedup_measured"] = best / t["seconds_per_round"]
    return out


def check_points(rows, alpha_s=0.0, engine_gbit=None):
    """One check per emulated run among rows (grouped by the report's step, else by W, size
    and link rate)."""
    groups = {}
    for r in rows:
        if not r.get("emulate"):
            continue
        key = r.get("_step") or (r.get("workers"), r.get("bytes"), r.get("link_gbit"))
        groups.setdefault(key, []).append(r)
    out = []
    for key, g in groups.items():
        c = check_point(g, alpha_s, engine_gbit)
        if c:
            if isinstance(key, str):
                c["step"] = key
            out.append(c)
    return out


# ---------------------------------------------------------------------------------------------
# Inputs: the engine rate and measured allreduce rows.

def engine_rate_from_rows(rows):
    """Gbit/s per core from `tally-perf engine --json` rows: f32, non-deterministic, the 8 KiB
    chunk (a jumbo frame's) if measured, else the largest chunk. The engine's `gbps` field is
    GB/s (push payload bytes per CPU second; its cores_per_100g = 12.5 / gbps): times 8."""
    ok = [r for r in rows if r.get("bench") == "engine" and r.get("dtype") == "f32"
          and not r.get("deterministic") and r.get("gbps")]
    if not ok:
        return None, None
    r = next((r for r in ok if r.get("chunk_bytes") == 8192), None) or \
        max(ok, key=lambda r: r.get("chunk_bytes", 0))
    return r["gbps"] * 8, r


def read_rows(path):
    """JSON rows from a file: a report's results.json ({"results": {key: {"rows": ...}}}) or
    JSON lines (tally-perf engine/allreduce --json)."""
    try:
        with open(path) as f:
            txt = f.read()
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}")
    try:
        doc = json.loads(txt)
        if isinstance(doc, dict) and isinstance(doc.get("results"), dict):
            return [r for ent in doc["results"].values() if isinstance(ent, dict)
                    for r in ent.get("rows", [])]
        if isinstance(doc, dict):
            return [doc]
        if isinstance(doc, list):
            return [r for r in doc if isinstance(r, dict)]
    except ValueError:
        pass
    rows = []
    for line in txt.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                rows.append(json.loads(line))
            except ValueError:
                pass
    return rows


def run_perf(perf, argv, timeout):
    r = subprocess.run([perf] + argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout)
    rows = []
    for line in r.stdout.splitlines():
        if line.strip().startswith("{"):
            try:
                rows.append(json.loads(line))
            except ValueError:
                pass
    return r.returncode, rows, r.stderr


# ---------------------------------------------------------------------------------------------
# Options.

def parse_int_list(opt, s, lo, hi):
    out = []
    for x in str(s).split(","):
        x = x.strip()
        if not re.fullmatch(r"\d+", x) or not lo <= int(x) <= hi:
            raise UsageError(f"bad {opt} '{s}': a comma list of integers {lo}..{hi}")
        out.append(int(x))
    return out


def parse_float_list(opt, s, lo, hi):
    out = []
    for x in str(s).split(","):
        try:
            v = float(x)
        except ValueError:
            v = None
        if v is None or not lo <= v <= hi:
            raise UsageError(f"bad {opt} '{s}': a comma list of numbers {lo:g}..{hi:g}")
        out.append(v)
    return out


def parse_size(s):
    """'400000000', '512M' (K/M/G binary, as the other tally-perf commands) -> bytes."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMGkmg]?)(i?[Bb]?)?\s*", s)
    if not m:
        return None
    return int(m.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[m.group(2).lower()]


def parse_models(s, bytes_per_param):
    """--model-bytes LIST: sizes (bytes, K/M/G) or names of KNOWN_MODELS -> [(label, bytes)]."""
    out = []
    for x in str(s).split(","):
        x = x.strip()
        if x.lower() in KNOWN_MODELS:
            p = KNOWN_MODELS[x.lower()]
            out.append((f"{x.lower()} ({p / 1e6:g}M params x {bytes_per_param} B)",
                        int(p * bytes_per_param)))
            continue
        v = parse_size(x) if x else None
        if not v or v < 4:
            raise UsageError(f"bad --model-bytes '{s}': sizes (e.g. 400000000, 512M) or "
                             f"model names ({', '.join(KNOWN_MODELS)})")
        out.append((f"{v} B", v))
    return out


def parse_appliances(s, n):
    """--appliances: an integer, 'W' (as many appliances as workers) or 'W/D'."""
    s = str(s).strip()
    if s == "W":
        return n
    m = re.fullmatch(r"W/(\d+)", s)
    if m and int(m.group(1)) >= 1:
        return max(1, n // int(m.group(1)))
    if re.fullmatch(r"\d+", s) and 1 <= int(s) <= 1 << 20:
        return int(s)
    raise UsageError(f"bad --appliances '{s}': an integer >= 1, W or W/D")


class _Parser(argparse.ArgumentParser):
    """argparse's own errors (unknown option, bad type) as UsageError: one exit path."""

    def error(self, message):
        raise UsageError(message)


def build_parser():
    p = _Parser(
        prog="tally-perf model",
        description="Project time per iteration and appliance cores on a real cluster: Tally "
                    "(summation service, BytePS's formulas) vs ring allreduce, at the engine "
                    "rate per core measured here. Rates in Gbit/s.")
    p.add_argument("--model-bytes", default=None,
                   help="comma list of gradient sizes per worker (bytes, K/M/G) or model names "
                        f"({', '.join(KNOWN_MODELS)}); default 100M params x 4 B = 400000000")
    p.add_argument("--bytes-per-param", type=int, default=4, choices=(1, 2, 4, 8),
                   help="bytes per parameter for model names (4: fp32)")
    p.add_argument("--workers", default=",".join(map(str, DEFAULT_WORKERS)),
                   help="comma list of W (default 8,16,...,1024)")
    p.add_argument("--link-gbit", default="100,400", help="worker link rates (default 100,400)")
    p.add_argument("--appliance-gbit", default=None,
                   help="appliance port rate (default: the worker link rate)")
    p.add_argument("--appliances", default="W", help="k: integer, W (default) or W/D")
    p.add_argument("--cores", type=int, default=None,
                   help="cores per appliance (default: as many as needed, no compute bound)")
    p.add_argument("--alpha-us", type=float, default=5.0, help="latency per step, us (5)")
    p.add_argument("--engine-gbps", type=float, default=None,
                   help="engine goodput per core, Gbit/s (default: measure it once with "
                        "`tally-perf engine --json --dtype f32 --det off`)")
    p.add_argument("--engine-json", default=None,
                   help="take the engine rate from engine --json lines or a report's results.json")
    p.add_argument("--check", default=None,
                   help="allreduce --json results (or a report's results.json) of an emulated "
                        "run: print predicted vs measured")
    p.add_argument("--check-run", action="store_true",
                   help="run `tally-perf allreduce " + " ".join(CHECK_ARGS) + " --json` "
                        "(root) and check the model against it")
    p.add_argument("--json", action="store_true", help="one JSON object per row and check")
    p.add_argument("--plot", default=None, help="write a PNG plot of the projection")
    p.add_argument("--perf", default=os.path.join(os.environ.get("TALLY_BUILD", ""), "perf",
                                                  "tally-perf"),
                   help="the tally-perf binary (engine, --check-run)")
    return p


def parse_args(argv):
    """Validated options; raises UsageError naming the option."""
    o = build_parser().parse_args(argv)
    o.worker_list = list(dict.fromkeys(parse_int_list("--workers", o.workers, 2, 1 << 20)))
    o.links = list(dict.fromkeys(parse_float_list("--link-gbit", o.link_gbit, 0.001, 1e5)))
    o.app_gbit = None
    if o.appliance_gbit is not None:
        o.app_gbit = parse_float_list("--appliance-gbit", o.appliance_gbit, 0.001, 1e5)[0]
    if o.model_bytes is None:
        o.models = [(f"{DEFAULT_PARAMS / 1e6:g}M params x {o.bytes_per_param} B",
                     int(DEFAULT_PARAMS * o.bytes_per_param))]
    else:
        o.models = parse_models(o.model_bytes, o.bytes_per_param)
    for n in o.worker_list:
        parse_appliances(o.appliances, n)  # validates
    if o.cores is not None and not 1 <= o.cores <= 4096:
        raise UsageError(f"bad --cores '{o.cores}': 1..4096")
    if not 0 <= o.alpha_us <= 1e6:
        raise UsageError(f"bad --alpha-us '{o.alpha_us}': 0..1000000")
    if o.engine_gbps is not None and not 0 < o.engine_gbps <= 1e5:
        raise UsageError(f"bad --engine-gbps '{o.engine_gbps}': a positive Gbit/s per core")
    if o.engine_gbps is not None and o.engine_json:
        raise UsageError("--engine-gbps and --engine-json: give one")
    if o.check and o.check_run:
        raise UsageError("--check and --check-run: give one")
    return o


# ---------------------------------------------------------------------------------------------
# Output.

def fmt_s(t):
    return f"{t * 1e3:.2f}" if t < 10 else f"{t * 1e3:.0f}"


def rows_for(o, m, engine):
    out = []
    for link in o.links:
        for n in o.worker_list:
            k = parse_appliances(o.appliances, n)
            out.append(project(m, n, link, k, o.alpha_us * 1e-6, engine, o.cores, o.app_gbit))
    return out


def table_rows(rows):
    """The printed table's columns: W, link, k, ring ms, Tally ms, speed-up, split ms,
    k to match ring, cores per 100G port, cores in total, binding term."""
    head = ["W", "link Gbit/s", "k", "ring ms", "Tally ms", "speed-up", "BytePS split ms",
            "k to match ring", "cores/100G", "cores total", "Tally bound"]
    body = []
    for r in rows:
        body.append([r["workers"], f"{r['link_gbit']:g}", r["appliances"], fmt_s(r["ring_s"]),
                     fmt_s(r["tally_s"]), f"{r['speedup']:.2f}x", fmt_s(r["split_s"]),
                     "-" if r["k_match_ring"] is None else r["k_match_ring"],
                     "-" if r["cores_per_100g"] is None else f"{r['cores_per_100g']:.2f}",
                     "-" if r["cores_total"] is None else r["cores_total"],
                     r["tally_bound"].replace("_", " ")])
    return head, body


def check_lines(c):
    """Human lines for one check point."""
    peers = ", ".join(f"{k} {v['measured_s']:.3f} s ({v['measured_over_ring']:.2f}x the ring's)"
                      for k, v in sorted(c["peers"].items()))
    lines = [f"W={c['workers']}, {c['bytes']} B, links {c['link_gbit']:g} Gbit/s, "
             f"k={c['appliances']} appliances at {c['appliance_gbit']:g} Gbit/s"
             + (f" ({c['step']})" if c.get("step") else ""),
             f"  Tally: predicted {c['tally_predicted_s']:.3f} s, measured "
             f"{c['tally_measured_s']:.3f} s per round ({c['tally_measured_over_predicted']:.2f}x "
             "the prediction)",
             f"  ring:  predicted {c['ring_predicted_s']:.3f} s; measured peers: "
             + (peers or "none")]
    sp = f"  speed-up: predicted {c['speedup_predicted']:.2f}x"
    if "speedup_measured" in c:
        sp += f", measured {c['speedup_measured']:.2f}x (over the faster peer)"
    lines.append(sp)
    return lines


def plot(path, title, rows, checks=()):
    """Time per iteration vs W, ring (dashed) and Tally (solid) per link rate, log-log; a
    second panel with the check points (predicted vs measured) when given. Returns the file's
    base name or None without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FormatStrFormatter
    except Exception:
        return None
    checks = list(checks)
    fig, axs = plt.subplots(1, 2 if checks else 1, figsize=(11 if checks else 6.4, 4.2),
                            squeeze=False)
    ax = axs[0][0]
    colors = ["tab:blue", "tab:red", "tab:green", "tab:purple", "tab:orange"]
    for i, link in enumerate(dict.fromkeys(r["link_gbit"] for r in rows)):
        pts = sorted(((r["workers"], r) for r in rows if r["link_gbit"] == link),
                     key=lambda p: p[0])
        w = [p[0] for p in pts]
        c = colors[i % len(colors)]
        ax.plot(w, [p[1]["ring_s"] * 1e3 for p in pts], "--o", color=c, ms=3,
                label=f"ring, {link:g} Gbit/s")
        ax.plot(w, [p[1]["tally_s"] * 1e3 for p in pts], "-s", color=c, ms=3,
                label=f"Tally, {link:g} Gbit/s")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(FormatStrFormatter("%g"))
    ax.tick_params(axis="y", which="minor", labelsize=7)
    ax.set_xlabel("workers W")
    ax.set_ylabel("ms per iteration (communication)")
    ax.set_title(title[:80], fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    if checks:
        ax = axs[0][1]
        labels, vals, cols = [], [], []
        for c in checks:
            sfx = f"\n{c['link_gbit']:g}G" if len(checks) > 1 else ""
            labels += [f"Tally pred{sfx}", f"Tally meas{sfx}", f"ring pred{sfx}"]
            vals += [c["tally_predicted_s"], c["tally_measured_s"], c["ring_predicted_s"]]
            cols += ["tab:gray", "tab:blue", "tab:gray"]
            for name, v in sorted(c["peers"].items()):
                labels.append(f"{name} meas{sfx}")
                vals.append(v["measured_s"])
                cols.append("tab:red")
        ax.bar(range(len(vals)), vals, color=cols)
        ax.set_xticks(range(len(vals)))
        ax.set_xticklabels(labels, fontsize=7, rotation=30)
        ax.set_ylabel("s per round")
        c = checks[0]
        ax.set_title(f"check: emulated W={c['workers']}, k={c['appliances']}, "
                     f"{c['bytes'] >> 20} MiB", fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return os.path.basename(path)


def md_table(head, body):
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(v) for v in r) + " |" for r in body]
    return out


def report_section(out, engine_rows, allreduce_rows):
    """The report's "Cluster model" section (markdown lines) from this run's engine and
    allreduce rows; writes out/model.png. Returns (lines, {"rows", "checks", "errors"})."""
    md = ["## Cluster model", "",
          "`tally-perf model`: communication time per iteration projected for W workers of "
          f"{DEFAULT_PARAMS / 1e6:g}M fp32 parameters ({int(DEFAULT_PARAMS * 4)} B) at 100 and "
          "400 Gbit/s, Tally with k = W appliances (BytePS's summation service, OSDI'20 sec. 3/4: "
          "max(M/B, M*n/(k*B))) vs ring allreduce (2(n-1)/n * M/B + 2(n-1)*alpha), alpha = 5 us "
          "per step; cores from this run's engine rate per core (f32, 8 KiB chunks). Formulas "
          "and assumptions: perf/README.md. The check compares the model with the emulated "
          "cluster measured in this run.", ""]
    res = {"rows": [], "checks": [], "errors": []}
    engine, src = engine_rate_from_rows(engine_rows)
    if engine is None:
        res["errors"].append("no f32 engine rate in this run: cores not projected")
    else:
        md.append(f"Engine rate: {engine:.1f} Gbit/s per core (`tally-perf engine`, chunk "
                  f"{src.get('chunk_bytes')} B); {100 / engine:.2f} cores per 100G port.")
        md.append("")
    o = parse_args(["--alpha-us", "5"] + (["--engine-gbps", str(engine)] if engine else []))
    rows = rows_for(o, o.models[0][1], engine)
    res["rows"] = rows
    md += md_table(*table_rows(rows))
    checks = check_points(allreduce_rows, 5e-6, engine)
    res["checks"] = checks
    f = plot(os.path.join(out, "model.png"),
             f"{o.models[0][0]}: time per iteration, ring vs Tally (k = W)", rows, checks)
    if f:
        md.append(f"\n![time per iteration vs W, ring vs Tally]({f})")
    md.append("")
    if checks:
        md.append("Check against the emulated cluster (this run, `tally-perf allreduce "
                  "--emulate`):")
        md.append("")
        for c in checks:
            md += ["    " + line for line in check_lines(c)]
    else:
        res["errors"].append("check: no emulated allreduce in this run (the full suite runs "
                             "`tally-perf allreduce " + " ".join(CHECK_ARGS) + "`)")
    return md, res


def main(argv):
    try:
        o = parse_args(argv)
    except UsageError as e:
        print(f"tally-perf model: {e}", file=sys.stderr)
        return 2
    # The engine rate: given, read, or measured once.
    if o.engine_gbps is not None:
        engine, src = o.engine_gbps, "--engine-gbps"
    else:
        if o.engine_json:
            try:
                rows = read_rows(o.engine_json)
            except UsageError as e:
                print(f"tally-perf model: --engine-json: {e}", file=sys.stderr)
                return 2
            where = o.engine_json
        else:
            if not os.access(o.perf, os.X_OK):
                print(f"tally-perf model: no tally-perf at {o.perf} to measure the engine "
                      "(give --engine-gbps)", file=sys.stderr)
                return 1
            argv_e = ["engine", "--json", "--dtype", "f32", "--det", "off"]
            rc, rows, err = run_perf(o.perf, argv_e, 300)
            where = "tally-perf " + " ".join(argv_e)
            if rc != 0:
                print(f"tally-perf model: {where} exited {rc}: {err.strip()[-300:]}",
                      file=sys.stderr)
                return 1
        engine, row = engine_rate_from_rows(rows)
        if engine is None:
            print(f"tally-perf model: no f32 non-deterministic engine row in {where}",
                  file=sys.stderr)
            return 1 if not o.engine_json else 2
        src = f"{where} (chunk {row.get('chunk_bytes')} B, measured)"
    # The check: given or run.
    checks, check_err = [], None
    if o.check:
        try:
            checks = check_points(read_rows(o.check), o.alpha_us * 1e-6, engine)
        except UsageError as e:
            print(f"tally-perf model: --check: {e}", file=sys.stderr)
            return 2
        if not checks:
            check_err = f"no verified emulated Tally run in {o.check}"
    elif o.check_run:
        argv_c = ["allreduce"] + CHECK_ARGS + ["--json"]
        print("tally-perf model: running tally-perf " + " ".join(argv_c), file=sys.stderr)
        rc, rows, err = run_perf(o.perf, argv_c, 600)
        checks = check_points(rows, o.alpha_us * 1e-6, engine)
        if not checks:
            check_err = f"tally-perf {' '.join(argv_c)} exited {rc}: {err.strip()[-300:]}"
    all_rows = []
    for label, m in o.models:
        rows = rows_for(o, m, engine)
        for r in rows:
            r["model"] = label
        all_rows += rows
        if not o.json:
            print(f"model {label}: M = {m} B per worker; engine {engine:.1f} Gbit/s per core "
                  f"({src}); alpha {o.alpha_us:g} us per step; appliances k = {o.appliances}"
                  + (f", {o.cores} cores each" if o.cores else "")
                  + (f", ports {o.app_gbit:g} Gbit/s" if o.app_gbit else ""))
            head, body = table_rows(rows)
            wid = [max(len(str(x)) for x in [h] + [b[i] for b in body])
                   for i, h in enumerate(head)]
            print("  ".join(h.rjust(w) for h, w in zip(head, wid)))
            for b in body:
                print("  ".join(str(x).rjust(w) for x, w in zip(b, wid)))
            print()
    if o.json:
        for r in all_rows:
            print(json.dumps(r))
        for c in checks:
            print(json.dumps(c))
    else:
        for c in checks:
            print("check against the emulated cluster:")
            for line in check_lines(c):
                print(line)
    if check_err:
        print(f"tally-perf model: check: {check_err}", file=sys.stderr)
    if o.plot:
        first = [r for r in all_rows if r["model"] == o.models[0][0]]
        f = plot(o.plot, f"{o.models[0][0]}: time per iteration, ring vs Tally "
                 f"(k = {o.appliances})", first, checks)
        if not f:
            print("tally-perf model: no matplotlib: no plot", file=sys.stderr)
            return 1
    return 1 if check_err else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
