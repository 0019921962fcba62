#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""1-bit Adam / 1-bit LAMB through Tally vs their full-precision twins: convergence and bytes.

    /usr/bin/python3 perf/onebit_report.py --out onebit-report          # the report's runs
    /usr/bin/python3 perf/onebit_report.py --quick --out /tmp/x         # CI size

For each model (the digits MLP and a small transformer on synthetic sequences, both of
gpu_agent/examples/train.py) it trains 4 torchrun workers through the appliance with
  adam          torch.optim.Adam, gradients averaged by the DDP hook (full precision)
  onebit-adam   tally.optim.OneBitAdam (no DDP)
  lamb          tally.optim.Lamb, gradients averaged by the DDP hook
  onebit-lamb   tally.optim.OneBitLamb
for the same steps (same seed, data order and initial parameters), and writes into --out:
report.md (table + verdicts), losses.png (per-step loss, smoothed), results.json.

Bytes come from the appliance's counters (tally-udpd --stats, or tallyctl stats --json for
tallyd): push_bytes = payload bytes the appliance accepted (no retransmissions: the same
count on a clean or a busy machine) and wire = engine rx + tx bytes (with retransmissions and
headers). Per compressed step = (run total - warm-up steps x the full-precision run's bytes per
step) / compressed steps (the warm-up pushes exactly what a full-precision step pushes: the same
f32 elements). Verdicts: final train-set loss within 1% of the twin's, or test accuracy within
0.5 points (one-sided: the 1-bit run may be better by any amount); push_bytes >= 4x less over the whole run, >= 20x less per compressed step.
--emulate adds perf/onebit_emulate.py's table (seconds per step of OneBitAdam vs Adam through
Tally vs Adam over gloo on the emulated cluster of namespaces with shaped links; needs root),
options for it in --emulate-args; its timings are reported, never part of the verdict.
Exit status 0 when every verdict holds, 1 otherwise.
"""
import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
TRAIN = os.path.join(ROOT, "gpu_agent", "examples", "train.py")
PAIRS = (("adam", "onebit-adam"), ("lamb", "onebit-lamb"))


def run(out, model, opt, epochs, freeze, extra, log):
    dump = os.path.join(out, f"{model}-{opt}.json")
    cmd = [sys.executable, TRAIN, "--model", model, "--optimizer", opt, "--epochs", str(epochs), "--seed", "1",
           "--dump", dump] + extra
    if opt.startswith("onebit"):
        cmd += ["--freeze-step", str(freeze)]
    t0 = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1800)
    log.write(f"$ {' '.join(cmd[1:])}\n{p.stdout}\n")
    if p.returncode != 0:
        print(p.stdout[-3000:])
        raise SystemExit(f"onebit_report: {model} {opt} exited with {p.returncode}")
    with open(dump) as f:
        d = json.load(f)
    c = d.get("counters", {})
    tot = c.get("appliance") or (c.get("tallyd") or {}).get("totals") or {}
    d["push_bytes"] = tot.get("push_bytes", 0)
    d["wire_bytes"] = tot.get("engine_rx_bytes", 0) + tot.get("engine_tx_bytes", 0)
    d["wall_s"] = time.time() - t0
    d.pop("params", None)
    print(f"  {model:11s} {opt:12s} {d['steps']} steps, train loss {d['train_loss']:.4f}, test accuracy "
          f"{d['accuracy']:.4f}, push_bytes {d['push_bytes']}, {d['wall_s']:.0f} s", flush=True)
    return d


def git_head():
    """The checkout's commit, or "?" (no git, e.g. in the torch 2.x chroot, or no checkout)."""
    try:
        r = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    except OSError:
        return "?"
    return r.stdout.strip() or "?"


def machine():
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "?")
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}, Python {platform.python_version()}"


def load():
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def emulate(a, log):
    """perf/onebit_emulate.py's table (markdown), or a line saying why there is none."""
    js = os.path.join(a.out, "emulate.json")
    cmd = [sys.executable, os.path.join(ROOT, "perf", "onebit_emulate.py"), "--json", js] + shlex.split(a.emulate_args)
    shown = "/usr/bin/python3 perf/onebit_emulate.py " + " ".join(shlex.quote(x) for x in cmd[2:])
    print(f"  emulated cluster: {shown}", flush=True)
    t0, l0 = time.time(), load()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1800)
    log.write(f"$ {shown}\n{p.stdout}\n")
    head = [f"Command: `{shown}` ({time.time() - t0:.0f} s; load average before {l0}, after {load()})", ""]
    try:
        with open(js) as f:
            return head + [json.load(f)["table"]], p.returncode == 0
    except (OSError, ValueError, KeyError):
        return head + [f"no table: onebit_emulate.py exited {p.returncode}: "
                       f"{p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ''}"], False


def smooth(xs, k):
    out, acc = [], []
    for x in xs:
        acc.append(x)
        if len(acc) > k:
            acc.pop(0)
        out.append(sum(acc) / len(acc))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="onebit-report")
    ap.add_argument("--quick", action="store_true", help="CI size: fewer epochs")
    ap.add_argument("--models", default="mlp,transformer")
    ap.add_argument("--pairs", default="adam,lamb", help="adam, lamb or both")
    ap.add_argument("--epochs-mlp", type=int, default=None)
    ap.add_argument("--epochs-transformer", type=int, default=None)
    ap.add_argument("--freeze-frac", type=float, default=0.15, help="warm-up steps as a fraction of the run")
    ap.add_argument("--appliance", default="udp", help="train.py --appliance (udp: tally-udpd)")
    ap.add_argument("--emulate", action="store_true",
                    help="also time OneBitAdam vs Adam (Tally, gloo) on the emulated cluster (root)")
    ap.add_argument("--emulate-args", default="", help="options for perf/onebit_emulate.py")
    a = ap.parse_args()
    started, load0 = time.time(), load()
    command = "/usr/bin/python3 perf/onebit_report.py " + " ".join(shlex.quote(x) for x in sys.argv[1:])
    os.makedirs(a.out, exist_ok=True)
    epochs = {"mlp": a.epochs_mlp or (6 if a.quick else 30),
              "transformer": a.epochs_transformer or (3 if a.quick else 12)}
    steps_per_epoch = {"mlp": (1500 // 4 - 32) // 32 + 1, "transformer": (4096 // 4 - 32) // 32 + 1}
    extra = ["--appliance", a.appliance]
    results = {}
    ok = True
    rows = []
    with open(os.path.join(a.out, "runs.log"), "w") as log:
        for model in a.models.split(","):
            steps = epochs[model] * steps_per_epoch[model]
            freeze = max(1, int(round(a.freeze_frac * steps)))
            for base, ob in PAIRS:
                if base not in a.pairs.split(","):
                    continue
                rb = run(a.out, model, base, epochs[model], freeze, extra, log)
                ro = run(a.out, model, ob, epochs[model], freeze, extra, log)
                results[f"{model}/{base}"], results[f"{model}/{ob}"] = rb, ro
                n = rb["steps"]
                per_full = rb["push_bytes"] / n
                comp_steps = ro["steps"] - freeze
                per_comp = (ro["push_bytes"] - freeze * per_full) / max(comp_steps, 1)
                whole = rb["push_bytes"] / max(ro["push_bytes"], 1)
                per = per_full / per_comp if per_comp > 0 else float("inf")
                wire = rb["wire_bytes"] / max(ro["wire_bytes"], 1)
                # one-sided: the 1-bit run may not be worse by more than 1% loss / 0.5 points
                dloss = (ro["train_loss"] - rb["train_loss"]) / rb["train_loss"]
                dacc = (rb["accuracy"] - ro["accuracy"]) * 100
                conv = dloss <= 0.01 or dacc <= 0.5
                byt = whole >= 4 and per >= 20
                ok &= conv and byt
                rows.append((model, base, ob, n, freeze, rb, ro, dloss, dacc, conv, per_full, per_comp, whole, per,
                             wire, byt))
        train_s, load1 = time.time() - started, load()
        emu = emulate(a, log) if a.emulate else None
    md = ["# 1-bit Adam / 1-bit LAMB through Tally", "",
          f"4 workers (torchrun, CPU), appliance: {a.appliance}; warm-up = {a.freeze_frac:.0%} of the steps; "
          "same seed, data order and initial parameters in every run. Loss: the whole training set's "
          "cross-entropy after the last step. Bytes: the appliance's push_bytes (accepted payload, no "
          "retransmissions); wire: engine rx + tx bytes.", "",
          f"Command: `{command}` (commit {git_head()}). Machine: {machine()}; shared with other jobs: load "
          f"average (1, 5, 15 min) {load0} at the start, {load1} after the training runs ({train_s:.0f} s).", "",
          "| model | optimizer | steps | warm-up | train loss | test acc | push bytes | bytes/step | wire bytes |",
          "|---|---|---|---|---|---|---|---|---|"]
    for (model, base, ob, n, freeze, rb, ro, dloss, dacc, conv, per_full, per_comp, whole, per, wire, byt) in rows:
        md.append(f"| {model} | {base} | {n} | - | {rb['train_loss']:.4f} | {rb['accuracy'] * 100:.2f} | "
                  f"{rb['push_bytes']:,} | {per_full:,.0f} | {rb['wire_bytes']:,} |")
        md.append(f"| {model} | {ob} | {ro['steps']} | {freeze} | {ro['train_loss']:.4f} | "
                  f"{ro['accuracy'] * 100:.2f} | {ro['push_bytes']:,} | {per_comp:,.0f} (compressed) | "
                  f"{ro['wire_bytes']:,} |")
    md += ["", "| model | pair | loss change | acc loss (points) | converged | bytes less (run) | "
           "bytes less (compressed step) | wire less (run) | bytes ok |", "|---|---|---|---|---|---|---|---|---|"]
    for (model, base, ob, n, freeze, rb, ro, dloss, dacc, conv, per_full, per_comp, whole, per, wire, byt) in rows:
        md.append(f"| {model} | {ob} vs {base} | {dloss * 100:.2f}% | {dacc:.2f} | {'yes' if conv else 'NO'} | "
                  f"{whole:.2f}x | {per:.1f}x | {wire:.2f}x | {'yes' if byt else 'NO'} |")
    md += ["", "![losses](losses.png)", "", f"verdict: {'PASS' if ok else 'FAIL'} (loss within 1% or accuracy "
           "within 0.5 points; >= 4x fewer bytes over the run, >= 20x per compressed step)"]
    if emu:
        md += ["", "## Time per step on an emulated cluster", "", *emu[0]]
    with open(os.path.join(a.out, "report.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(results, f)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        models = sorted({r[0] for r in rows}, key=a.models.split(",").index)
        fig, axes = plt.subplots(1, len(models), figsize=(6 * len(models), 4), squeeze=False)
        for ax, model in zip(axes[0], models):
            for r in rows:
                if r[0] != model:
                    continue
                for name, d, ls in ((r[1], r[5], "-"), (r[2], r[6], "--")):
                    ax.plot(smooth(d["losses"], 10), ls, label=name)
                ax.axvline(r[4], color="grey", lw=0.5)
            ax.set_title(f"{model}: per-step loss (rank 0, moving average of 10)")
            ax.set_xlabel("step (grey: end of the warm-up)")
            ax.set_ylabel("loss")
            ax.set_yscale("log")
            ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(a.out, "losses.png"), dpi=100)
    except ImportError:
        print("matplotlib missing: no losses.png")
    print("\n".join(md))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
