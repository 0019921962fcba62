#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""pipeline_emulate.py - predicted vs measured time per minibatch of tally.plan's plans on the
emulated cluster (issue 36), and the planner's plan vs pure data parallelism through Tally and
over gloo, measured in one run.

The cluster is allreduce_netns.py's (as `tally-perf allreduce --emulate`): every rank in its
own network namespace, one tally-udpd in another, all on one bridge, every host link shaped
with tc tbf. The cost model's inputs are measured, never fitted to the answer:
  - layer times and sizes: tally.plan.profile run by all ranks at once in the cluster (the
    compute each rank gets while the others compute on this host's shared cores), and each
    layer alone (solo=True: the ranks take turns) for the shared-host term;
  - host_cores: this host's cores (--host-cores), which the ranks share;
  - link rate: the tbf rate set (--link-gbit, --appliance-gbit); alpha: half the median round
    trip of a small gloo send/recv between two ranks of the cluster;
  - appliance rate: one agent's push_pull of --engine-bytes through a tally-udpd on loopback
    (unshaped): bytes / median time = engine_gbit for cores = 1.
  - the runtime's own costs (optimizer step, weight stash, gradient copy, per-microbatch
    fixed work, gloo message calls): measured by the same profile (tally.plan.profiler).
Then for each plan (the planner's, pure DP through Tally, pure DP over a gloo ring), --repeat
times in ABBA order in one launch of the ranks (the host's load drifts alike for each), the
ranks train --minibatches minibatches of --batch samples (digits' whole batches, cycled)
with 1F1B (tally.plan.runtime); measured = the steady-state time per minibatch: a
last-stage replica's minibatches finished after its first quarter (warm-up, the pipeline
filling) over the time they took, / that stage's replicas, the mean over them (measured()
also prints the median over short windows and the stalls); predicted = tally.plan.evaluate
of the plan on the measured cluster, with "overlap": false (the runtime sums a replica's
gradients after its backward), and without the shared-host term. Prints one line per run
(every run) with predicted, measured and measured/predicted, the means, and samples/s
ratios; --json writes the launch with every rank's finish times.

    sudo /usr/bin/python3 perf/pipeline_emulate.py --bin build [--model vgg|mlp]
"""
import argparse
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from types import SimpleNamespace

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(SRC, "gpu_agent", "python"))
PORT = 9170
GLOO_PORT = 29536


def layers(model, seed, width):
    """The chain (every rank builds the same from the seed). vgg: two 3x3 convolutions (compute
    heavy, few weights) then a wide fully connected layer (weights heavy), as VGG; mlp: the
    digits MLP of gpu_agent/examples/pipeline.py."""
    import torch
    import torch.nn as nn
    torch.manual_seed(seed)
    if model == "vgg":
        c = 32
        return [nn.Unflatten(1, (1, 8, 8)), nn.Conv2d(1, c, 3, padding=1), nn.ReLU(),
                nn.Conv2d(c, c, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                nn.Linear(c * 16, width), nn.ReLU(), nn.Linear(width, 10)]
    return [nn.Linear(64, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
            nn.Linear(width, width // 2), nn.ReLU(), nn.Linear(width // 2, 10)]


def digits():
    import torch
    from sklearn.datasets import load_digits
    d = load_digits()
    X = torch.tensor(d.data, dtype=torch.float32) / 16.0
    y = torch.tensor(d.target, dtype=torch.int64)
    perm = torch.randperm(len(X), generator=torch.Generator().manual_seed(1))
    return X[perm], y[perm]


def tcp_counters():
    """This namespace's TCP retransmitted segments and retransmission timeouts (a stall in a
    run: losses at a tbf queue, or the host's load?)."""
    got = {}
    for path, want in (("/proc/net/snmp", {"RetransSegs": "retrans_segs"}),
                       ("/proc/net/netstat", {"TCPTimeouts": "rto_timeouts"})):
        with open(path) as f:
            rows = [line.split() for line in f if line.startswith(("Tcp:", "TcpExt:"))]
        for head, vals in zip(rows[::2], rows[1::2]):
            for k, v in zip(head[1:], vals[1:]):
                if k in want:
                    got[want[k]] = int(v)
    return got


def cpu_s():
    """This process's CPU seconds (every thread, user + system)."""
    import resource
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def host_cpu():
    """The host's CPU seconds by state (/proc/stat's cpu line): how busy the cores were in a
    run, and what the hypervisor took (steal)."""
    hz = os.sysconf("SC_CLK_TCK")
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return dict(zip(("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"),
                    (x / hz for x in v)))


def full_batches(X, y, batch, n):
    """n minibatches of exactly `batch` samples, cycling over the data set's whole batches.
    (Slicing past the end gave the runs of h36 at batch 32 empty minibatches from the 57th on:
    digits has 1797 samples, 96 x 32 = 3072; those finished in ~5 ms, no data to send.)"""
    whole = len(X) // batch
    if whole < 1:
        raise ValueError(f"batch {batch} is larger than the data set ({len(X)} samples)")
    return [(X[k * batch:(k + 1) * batch], y[k * batch:(k + 1) * batch])
            for k in (i % whole for i in range(n))]


# ---------------------------------------------------------------------------------------------
# one rank (run in its namespace by the launcher)

def rank_main(a):
    import datetime
    import torch
    import torch.distributed as dist
    import tally.plan as tp
    torch.set_num_threads(1)
    sys.path.insert(0, os.path.join(SRC, "gpu_agent", "examples"))
    import train
    train.torch_store_compat()  # Debian's torch 2.x: stores without libuv
    dist.init_process_group("gloo", init_method=f"tcp://{a.master}:{GLOO_PORT}", rank=a.rank,
                            world_size=a.workers, timeout=datetime.timedelta(seconds=120))
    X, y = digits()
    out = {"rank": a.rank}
    if a.phase == "profile":
        dist.barrier()
        prof = tp.profile(torch.nn.Sequential(*layers(a.model, a.seed, a.width)),
                          X[:a.batch], minibatches=a.profile_minibatches, messages="group",
                          loss_fn=torch.nn.functional.cross_entropy, target=y[:a.batch],
                          solo=True)
        dist.barrier()
        rtts = []
        t = torch.zeros(1)
        for _ in range(40):  # ranks 0 and 1: small-message round trips (alpha)
            if a.rank == 0:
                t0 = time.perf_counter()
                dist.send(t, 1)
                dist.recv(t, 1)
                rtts.append(time.perf_counter() - t0)
            elif a.rank == 1:
                dist.recv(t, 0)
                dist.send(t, 0)
        out.update(profile=prof, rtt_s=statistics.median(rtts) if rtts else None)
    else:
        # every plan of the run in one launch, in the order given (ABBA): the host's load
        # drifts, and each run then sees the same drift
        from tally.plan.runtime import PipelineTrainer
        out["runs"] = []
        for n, path in enumerate(a.plan.split(",")):
            with open(path) as f:
                plan = json.load(f)
            nmb = plan["minibatches"]
            tr = PipelineTrainer(layers(a.model, a.seed, a.width), plan, a.rank,
                                 torch.nn.functional.cross_entropy, lr=0.05,
                                 appliances=a.appliance, job_base=a.job_base + 10 * n,
                                 token=1, op_timeout_ms=60000)
            batches = full_batches(X, y, a.batch, nmb)
            dist.barrier()
            tcp0, cpu0, host0 = tcp_counters(), cpu_s(), host_cpu()
            t0 = time.perf_counter()
            losses = tr.train_1f1b(batches)
            wall = time.perf_counter() - t0
            tcp1, cpu1, host1 = tcp_counters(), cpu_s(), host_cpu()
            dist.barrier()
            out["runs"].append(dict(stage=tr.s, replicas=tr.reps[tr.s], in_flight=tr.in_flight(),
                                    done_at=[x - t0 for x in tr.done_at], wall_s=wall,
                                    losses=losses,
                                    tcp={k: tcp1[k] - tcp0[k] for k in tcp1},
                                    cpu_s=cpu1 - cpu0,
                                    host_cpu_s={k: host1[k] - host0[k] for k in host1}))
            tr.close()
    dist.destroy_process_group()
    with open(a.out, "w") as f:
        json.dump(out, f)
    return 0


# ---------------------------------------------------------------------------------------------
# the launcher

def engine_gbit(a):
    """One agent's push_pull of a.engine_bytes through a tally-udpd on loopback (no shaping):
    the appliance's rate with one core, bytes / median of 5 timed rounds after one warm-up."""
    import torch
    sys.path.insert(0, os.path.join(SRC, "tests", "agent"))
    sys.path.insert(0, os.path.join(SRC, "gpu_agent", "examples"))
    import train
    import udpd_proc
    from tally.agent import Agent
    port = train.free_port_block(1)
    n = a.engine_bytes // 4
    buf = torch.ones(n)
    ts = []
    with udpd_proc.running(port, "--cores", "1", "--open-admission", "--mem", "256M"):
        ag = Agent(appliances=f"127.0.0.1:{port}", job_id=3, token=1, rank=0, world_size=1,
                   local_rank=0, local_size=1, average=0)
        tid = ag.declare("engine", n * 4, "f32", 0, average=False)
        for k in range(6):
            t0 = time.perf_counter()
            ag.wait(ag.push_pull(tid, buf.data_ptr(), n * 4))
            if k:
                ts.append(time.perf_counter() - t0)
        ag.close()
    return a.engine_bytes * 8 / statistics.median(ts) / 1e9


def run_ranks(cl, a, phase, tag, plan_path=None, job_base=100):
    """The ranks of one phase, each in its namespace; their JSON results (rank order)."""
    env = {"PYTHONPATH": os.path.join(SRC, "gpu_agent", "python"),
           "TALLY_AGENT_LIB": os.path.join(a.bin, "gpu_agent", "libtally_agent.so"),
           # a shaped link's window and timeouts (as tally-perf allreduce --emulate)
           "TALLY_WINDOW": "64", "TALLY_MAX_CHUNK_BYTES": "8192",
           "TALLY_RTO_INIT_US": str(a.rto_us), "TALLY_RTO_MIN_US": str(a.rto_us),
           "TALLY_RTO_MAX_US": str(4 * a.rto_us),
           "OMP_NUM_THREADS": "1"}
    procs, outs = [], []
    for r, (ns, hif) in enumerate(cl.hosts):
        o = os.path.join(cl.tmp, f"{tag}-r{r}.json")
        outs.append(o)
        cmd = [sys.executable, os.path.abspath(__file__), "--rank", str(r), "--phase", phase,
               "--workers", str(a.workers), "--master", cl.master(), "--model", a.model,
               "--width", str(a.width), "--batch", str(a.batch), "--seed", str(a.seed),
               "--minibatches", str(a.minibatches), "--profile-minibatches",
               str(a.profile_minibatches), "--out", o, "--job-base", str(job_base),
               "--appliance", f"{cl.app_ip(0)}:{PORT}"] + (["--plan", plan_path] if plan_path
                                                          else [])
        procs.append(cl.bg(ns, f"{tag}-r{r}", cmd, dict(env, GLOO_SOCKET_IFNAME=hif)))
    if not cl.wait_all(procs, a.timeout):
        raise RuntimeError(f"{tag}: the ranks did not finish in {a.timeout} s; logs in {cl.tmp}")
    res = []
    for r, (p, o) in enumerate(zip(procs, outs)):
        if p.returncode != 0 or not os.path.exists(o):
            raise RuntimeError(f"{tag}: rank {r} exit {p.returncode}:\n"
                               + cl.logtext(f"{tag}-r{r}")[-3000:])
        with open(o) as f:
            res.append(json.load(f))
    return res


def measured(res, window=4):
    """Steady-state seconds per minibatch from the last stage's replicas: per replica, the
    time from its finish at the end of its first quarter (the pipeline filling, warm-up) to
    its last finish, over the minibatches it finished in between, / that stage's replicas;
    the mean over its replicas ("mean": minibatches done / time taken, the figure compared
    with the prediction). The last stage finishes a minibatch as soon as its forward
    arrives, so the end has no drain to leave out. For information also the median and
    10th-90th percentiles of the same over sliding windows of `window` finished minibatches
    (a pipeline's last stage finishes in bursts: the median of short windows can pick the
    fast mode; h36 headlined it and read 0.21x predicted where the mean read 0.48x), and the
    stalls: intervals between finishes longer than 4x their median and 150 ms, their count
    and share of the steady time. Returns that dict and the longest rank's whole run (s)."""
    last = max(x["stage"] for x in res)
    per, means, stalls, steady = [], [], [], 0.0
    for x in res:
        if x["stage"] != last:
            continue
        t = x["done_at"]
        st = t[max(1, len(t) // 4) - 1:]
        w = min(window, len(st) - 1)
        if len(st) - w < 4:
            raise RuntimeError("too few minibatches per replica to time: raise --minibatches")
        per += [(st[k + w] - st[k]) / w / x["replicas"] for k in range(len(st) - w)]
        means.append((st[-1] - st[0]) / (len(st) - 1) / x["replicas"])
        iv = [b - a for a, b in zip(st, st[1:])]
        med = statistics.median(iv)
        stalls += [v for v in iv if v > 4 * med and v > 0.15]
        steady += st[-1] - st[0]
    q = statistics.quantiles(per, n=10)
    return dict(mean=statistics.mean(means), median=statistics.median(per), p10=q[0],
                p90=q[-1], n=len(per), window=window, stalls=len(stalls),
                stall_share=sum(stalls) / steady if steady else 0.0), \
        max(x["wall_s"] for x in res)


from tally.plan import planner as tp_planner  # noqa: E402


def mean_profile(profs):
    """The ranks' profiles, layer times averaged (sizes are the same on every rank)."""
    out = json.loads(json.dumps(profs[0]))
    for k, layer in enumerate(out["layers"]):
        for f in ("fwd_s", "bwd_s") + tp_planner.LAYER_EXTRA + tp_planner.LAYER_SOLO:
            layer[f] = statistics.mean(p["layers"][k][f] for p in profs)
    for f in tp_planner.OVERHEAD:
        out["overhead"][f] = statistics.mean(p["overhead"][f] for p in profs)
    return out


def describe(stages):
    return " | ".join(f"{s['layers'][0]}-{s['layers'][1] - 1} x{len(s['ranks'])}"
                      + (f" {s['aggregation']}" if len(s["ranks"]) > 1 else "")
                      for s in stages)


def launch(a):
    import tally.plan as tp
    from allreduce_netns import Cluster
    from perf_allreduce import emulated_rto_us
    a.rto_us = emulated_rto_us(a.link_gbit, 64, 8192, 1)
    a.bin = os.path.abspath(a.bin)
    udpd = os.path.join(a.bin, "appliance", "udpd", "tally-udpd")
    lib = os.path.join(a.bin, "gpu_agent", "libtally_agent.so")
    for f in (udpd, lib):
        if not os.path.exists(f):
            print(f"pipeline_emulate: {f} not built (ninja -C {a.bin} gpu_agent/libtally_agent.so "
                  "appliance/udpd/tally-udpd)", file=sys.stderr)
            return 2
    os.environ["TALLY_AGENT_LIB"] = lib
    os.environ["TALLY_TEST_UDPD"] = udpd
    t_start = time.time()
    load_start = open("/proc/loadavg").read().strip()
    eng = engine_gbit(a)
    print(f"appliance (tally-udpd, 1 core, loopback): {eng:.2f} Gbit/s for "
          f"{a.engine_bytes >> 20} MiB push_pulls", flush=True)
    o = SimpleNamespace(prefix=a.prefix, workers=a.workers, appliances=1, impls=["tally"],
                        link_gbit=a.link_gbit, appliance_gbit=a.appliance_gbit, emulate=True,
                        appliance_kind="udpd", dry_run=False)
    tmp = tempfile.mkdtemp(prefix="pipeline-emulate.")
    cl = Cluster(o, tmp)
    rows = []
    try:
        cl.build()
        res = run_ranks(cl, a, "profile", "profile")
        prof = mean_profile([x["profile"] for x in res])
        alpha_us = res[0]["rtt_s"] / 2 * 1e6
        # overlap false: tally.plan.runtime sums a replica's gradients after its backward
        cluster = {"workers": a.workers, "link_gbit": a.link_gbit, "alpha_us": alpha_us,
                   "overlap": False, "host_cores": a.host_cores,
                   "appliance": {"count": 1, "link_gbit": a.appliance_gbit, "cores": 1,
                                 "engine_gbit": eng}}
        comp = sum(x["fwd_s"] + x["bwd_s"] for x in prof["layers"])
        par = sum(x["param_bytes"] for x in prof["layers"])
        ov = prof["overhead"]
        print("measured runtime costs (per minibatch, whole chain): optimizer "
              f"{(ov['opt_call_s'] + sum(x['opt_s'] for x in prof['layers'])) * 1e3:.3f} ms, "
              f"weight stash {sum(x['stash_s'] for x in prof['layers']) * 1e3:.3f} ms, gradient "
              f"copy {sum(x['grad_copy_s'] for x in prof['layers']) * 1e3:.3f} ms; per "
              f"microbatch {ov['microbatch_s'] * 1e3:.3f} ms, per message "
              f"{ov['message_s'] * 1e3:.3f} ms", flush=True)
        print(f"model {a.model} (width {a.width}), batch {a.batch}: compute {comp * 1e3:.2f} ms "
              f"per minibatch (profiled by {a.workers} ranks at once), {par / 1e6:.2f} MB of "
              f"weights; links {a.link_gbit:g} Gbit/s, appliance link {a.appliance_gbit:g} "
              f"Gbit/s, alpha {alpha_us:.0f} us (measured)", flush=True)
        p = tp.plan(prof, cluster)
        print(tp.format_plan(p), flush=True)
        # the same model without the shared-host term (the planner before issue 36's i36)
        plain = {k: v for k, v in cluster.items() if k != "host_cores"}
        whole = {"stage": 0, "layers": [0, len(prof["layers"])], "names": [],
                 "replicas": a.workers, "ranks": list(range(a.workers))}
        runs = [("plan", p["stages"]), ("dp-tally", [dict(whole, aggregation="tally")]),
                ("dp-gloo", [dict(whole, aggregation="ring")])]
        if a.noam_twin and any(x.get("in_flight", x.get("noam")) != x.get("noam")
                               for x in p["stages"]):
            # the same plan with PipeDream's NOAM windows (no per-stage in_flight: the
            # runtime's fallback), in the same launch: what the deeper windows change
            runs.insert(1, ("plan-noam", [{k: v for k, v in x.items() if k != "in_flight"}
                                          for x in p["stages"]]))
        order = []
        for k in range(a.repeat):  # ABBA: plan, dp-tally, dp-gloo, dp-gloo, dp-tally, plan, ...
            order += runs if k % 2 == 0 else runs[::-1]
        pred, pred0, files = {}, {}, []
        for k, (name, stages) in enumerate(order):
            pred[name] = tp.evaluate(prof, cluster, stages)["predicted_s_per_minibatch"]
            pred0[name] = tp.evaluate(prof, plain, stages)["predicted_s_per_minibatch"]
            # 1F1B runs a multiple of every stage's replicas (each replica, the same count)
            step = math.lcm(*[len(st["ranks"]) for st in stages])
            files.append(os.path.join(tmp, f"{k}-{name}.json"))
            with open(files[-1], "w") as f:
                json.dump({"stages": stages,
                           "minibatches": -(-a.minibatches // step) * step}, f)
        app = cl.bg(cl.apps[0][0], "udpd", [
            udpd, "--addr", cl.app_ip(0), "--port", str(PORT), "--cores", "1",
            "--open-admission", "--mem", "256M", "--ctl-socket", os.path.join(tmp, "ctl.sock")])
        time.sleep(1.0)
        try:
            res = run_ranks(cl, a, "train", "train", ",".join(files))
        finally:
            cl.stop(app, 10)
        for k, (name, stages) in enumerate(order):
            st, wall = measured([x["runs"][k] for x in res], a.window)
            nmb = len(res[0]["runs"][k]["done_at"]) * res[0]["runs"][k]["replicas"]
            wall /= nmb
            rows.append((name, describe(stages), pred[name], st["mean"], wall, st, pred0[name]))
            tcp = {f: sum(x["runs"][k]["tcp"][f] for x in res) for f in res[0]["runs"][k]["tcp"]}
            cpu = " ".join(f"{x['runs'][k]['cpu_s'] / nmb * 1e3:.1f}" for x in res)
            hc = res[0]["runs"][k]["host_cpu_s"]
            busy = 1 - (hc["idle"] + hc["iowait"] + hc["steal"]) / max(sum(hc.values()), 1e-9)
            print(f"run {k} {name:8s} [{describe(stages)}]: predicted {pred[name] * 1e3:.2f} ms "
                  f"(without the shared-host term {pred0[name] * 1e3:.2f}), measured "
                  f"{st['mean'] * 1e3:.2f} ms (steady mean; median of {st['n']} windows of "
                  f"{a.window} {st['median'] * 1e3:.2f}, p10-p90 {st['p10'] * 1e3:.2f}-"
                  f"{st['p90'] * 1e3:.2f}; {st['stalls']} stalls, {st['stall_share']:.0%} of "
                  f"the steady time; TCP retransmitted segments {tcp['retrans_segs']}, "
                  f"CPU ms per minibatch by rank {cpu}, host busy {busy:.0%}, steal "
                  f"{hc['steal'] / max(sum(hc.values()), 1e-9):.0%}; "
                  f"timeouts {tcp['rto_timeouts']}; whole run {wall * 1e3:.2f} ms/minibatch, "
                  f"{nmb}), "
                  f"measured/predicted {st['mean'] / pred[name]:.3f} (without the term "
                  f"{st['mean'] / pred0[name]:.3f}), {a.batch / st['mean']:.0f} samples/s",
                  flush=True)
    finally:
        cl.cleanup()
    load_end, t_end = open("/proc/loadavg").read().strip(), time.time()
    # per configuration: the mean of its runs' measured times
    mean = {n: statistics.mean(r[3] for r in rows if r[0] == n) for n, _ in runs}
    for n, _ in runs:
        print(f"mean {n:8s}: predicted {pred[n] * 1e3:.2f} ms, measured {mean[n] * 1e3:.2f} ms "
              f"over {a.repeat} run(s), measured/predicted {mean[n] / pred[n]:.3f}, "
              f"{a.batch / mean[n]:.0f} samples/s")
    print(f"samples/s (means): plan / dp-tally {mean['dp-tally'] / mean['plan']:.3f}, plan / "
          f"dp-gloo {mean['dp-gloo'] / mean['plan']:.3f}, dp-tally / dp-gloo "
          f"{mean['dp-gloo'] / mean['dp-tally']:.3f}; predicted plan / dp-tally "
          f"{pred['dp-tally'] / pred['plan']:.3f}, plan / dp-gloo "
          f"{pred['dp-gloo'] / pred['plan']:.3f}")
    for label, col in (("", 2), (" (without the shared-host term)", 6)):
        print(f"within 25%{label}: " + ", ".join(
            f"run {k} {r[0]} {'yes' if abs(r[3] / r[col] - 1) <= 0.25 else 'NO'}"
            for k, r in enumerate(rows)))
    print(f"load average {load_start} -> {load_end}; {t_end - t_start:.0f} s in all")
    if a.json:
        # as perf/results/pipeline/h36_runs.json's entries: every rank's finish times
        rec = {"launch": a.label, "command_args": " ".join(sys.argv[1:]),
               "start_utc": time.strftime("%H:%M:%S", time.gmtime(t_start)),
               "loadavg_start": load_start,
               "end_utc": time.strftime("%H:%M:%S", time.gmtime(t_end)),
               "loadavg_end": load_end, "cluster": cluster, "profile": prof,
               "plan_stages": p["stages"], "plan": p,
               "runs": [{"name": r[0], "predicted_s": r[2], "predicted_s_no_share": r[6],
                         "measured": r[5]} for r in rows],
               "ranks": [[{f: x[f] for f in ("stage", "replicas", "in_flight", "wall_s",
                                             "done_at", "tcp", "cpu_s", "host_cpu_s")}
                          for x in rk["runs"]] for rk in res]}
        with open(a.json, "w") as f:
            json.dump(rec, f)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join(SRC, "build"), help="the meson build dir")
    ap.add_argument("--model", choices=("vgg", "mlp"), default="vgg")
    ap.add_argument("--width", type=int, default=1024, help="the wide layer's outputs")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--minibatches", type=int, default=96,
                    help="per run (rounded up to a multiple of every stage's replicas)")
    ap.add_argument("--repeat", type=int, default=2,
                    help="runs of each configuration, in ABBA order, in one launch")
    ap.add_argument("--window", type=int, default=4,
                    help="finished minibatches per window (the windows' median, printed too)")
    ap.add_argument("--profile-minibatches", type=int, default=10)
    ap.add_argument("--link-gbit", type=float, default=0.1, help="every worker's link (tbf)")
    ap.add_argument("--appliance-gbit", type=float, default=0.4, help="the appliance's link")
    ap.add_argument("--engine-bytes", type=int, default=4 << 20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=int, default=240, help="seconds per phase")
    ap.add_argument("--prefix", default=f"pe{os.getpid() % 100000}", help="namespace prefix")
    ap.add_argument("--json", default=None,
                    help="write the launch here (profile, plan, every rank's finish times)")
    ap.add_argument("--label", default="", help="the launch's name in --json")
    ap.add_argument("--noam-twin", action="store_true",
                    help="where the planner's 1F1B windows are deeper than NOAM, also run the "
                         "plan with NOAM's windows (\"plan-noam\")")
    ap.add_argument("--host-cores", type=int, default=os.cpu_count(),
                    help="the cores the ranks share (the cluster's host_cores; this host's)")
    # one rank (internal)
    ap.add_argument("--rank", type=int, default=None)
    ap.add_argument("--phase", choices=("profile", "train"), default="train")
    ap.add_argument("--master", default=None)
    ap.add_argument("--plan", default=None, help="plan files, comma-separated")
    ap.add_argument("--out", default=None)
    ap.add_argument("--job-base", type=int, default=100)
    ap.add_argument("--appliance", default=None)
    a = ap.parse_args()
    if a.rank is not None:
        return rank_main(a)
    # SIGTERM (a timeout) unwinds: the namespaces are removed in launch()'s finally
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if os.geteuid() != 0:
        print("pipeline_emulate: needs root (network namespaces, tc)", file=sys.stderr)
        return 2
    if subprocess.run(["tc", "-V"], capture_output=True).returncode != 0:
        print("pipeline_emulate: tc (iproute2) missing", file=sys.stderr)
        return 2
    return launch(a)


if __name__ == "__main__":
    sys.exit(main())
