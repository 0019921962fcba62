#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""1-bit Adam on an emulated cluster: time per training step of OneBitAdam through Tally vs
Adam through Tally vs Adam over gloo (DDP), every worker in its own network namespace.

    /usr/bin/python3 perf/onebit_emulate.py                        # 4 workers, 1 Gbit/s links
    /usr/bin/python3 perf/onebit_emulate.py --workers 2 --hidden 64 --steps 3 --warmup 1 --no-shape

The cluster is the one behind `tally-perf allreduce --emulate` (perf/allreduce_netns.py): a
bridge namespace, one namespace per worker joined to it by a veth, each host link shaped with
tc tbf on both ends (--link-gbit); the appliance (tally-udpd, the dataplane engine over kernel
UDP) in a namespace of its own whose link is shaped to link-gbit x workers. Workers are plain
processes (rank/world/master in the environment, gloo's TCP store on worker 0's address).

The model: an MLP (in --inputs, two hidden layers of --hidden, 10 classes) on synthetic data,
CPU, one thread per worker, --batch rows per worker. Each run takes --warmup + --steps steps
and times the last --steps (rank 0, wall clock; every rank waits for the same reduction).
  adam-tally     torch.optim.Adam, gradients averaged by Tally's DDP hook (f32)
  onebit-tally   tally.optim.OneBitAdam, freeze_step = --warmup: the timed steps are all
                 compressed steps (1-bit momentum + the scale, the appliance's server stage)
  adam-gloo      torch.optim.Adam under DDP over gloo (ring allreduce, TCP)
A fresh appliance per Tally run; its counters give the payload bytes it accepted per step.
Prints a markdown table (seconds per step, ratios); --json FILE writes the figures.
Namespaces and processes are removed at the end, also on failure or Ctrl-C.
"""
import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

IMPLS = ("adam-tally", "onebit-tally", "adam-gloo")
PORT = 9170


def parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--link-gbit", type=float, default=1.0, help="worker link rate (Gbit/s)")
    p.add_argument("--no-shape", action="store_true", help="unshaped links (veth speed)")
    p.add_argument("--inputs", type=int, default=1024)
    p.add_argument("--hidden", type=int, default=2048, help="hidden width (2048: 6.3 M parameters)")
    p.add_argument("--batch", type=int, default=8, help="rows per worker per step")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps (OneBitAdam's freeze step)")
    p.add_argument("--steps", type=int, default=10, help="timed steps")
    p.add_argument("--impls", default=",".join(IMPLS), help="comma list of " + ", ".join(IMPLS))
    p.add_argument("--udpd", default=None, help="tally-udpd (default: $TALLY_BUILD, then build/, then build*/: appliance/udpd/tally-udpd)")
    p.add_argument("--timeout", type=float, default=240, help="seconds per run")
    p.add_argument("--prefix", default=None, help="namespace name prefix (default ob<pid>)")
    p.add_argument("--json", default=None, help="write the results here")
    p.add_argument("--keep-logs", action="store_true", help="keep the processes' logs (removed on success)")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    return p


# ---------------------------------------------------------------- worker (in a namespace)

def worker(a):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    sys.path.insert(0, os.path.join(ROOT, "gpu_agent", "examples"))
    import train  # torch_store_compat: Debian's torch 2.x TCPStore without libuv
    train.torch_store_compat()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(a.inputs, a.hidden), nn.ReLU(), nn.Linear(a.hidden, a.hidden), nn.ReLU(),
                          nn.Linear(a.hidden, 10))
    nparams = sum(p.numel() for p in model.parameters())
    g = torch.Generator().manual_seed(100 + rank)
    X = torch.randn(4 * a.batch, a.inputs, generator=g)
    y = torch.randint(0, 10, (4 * a.batch,), generator=g)
    lr = 1e-4
    if a.worker == "onebit-tally":
        import tally.optim as topt
        import tally.torch as tt
        tt.broadcast_parameters(model.state_dict(), root_rank=0)
        net = model
        opt = topt.OneBitAdam(model.parameters(), lr=lr, freeze_step=a.warmup, eps=1e-8)
    else:
        from torch.nn.parallel import DistributedDataParallel as DDP
        net = DDP(model)
        if a.worker == "adam-tally":
            import tally.torch as tt
            net.register_comm_hook(tt.TallyState(), tt.comm_hook)
        opt = torch.optim.Adam(net.parameters(), lr=lr, eps=1e-8)
    lossf = nn.CrossEntropyLoss()
    times, losses = [], []
    dist.barrier()
    for step in range(a.warmup + a.steps):
        t = time.perf_counter()
        i = (step % 4) * a.batch
        opt.zero_grad()
        loss = lossf(net(X[i:i + a.batch]), y[i:i + a.batch])
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t)
        losses.append(loss.item())
    timed = times[a.warmup:]
    # the compute alone (no reduction) on this worker, for the table's context
    t = time.perf_counter()
    for _ in range(min(3, a.steps)):
        model.zero_grad()
        lossf(model(X[:a.batch]), y[:a.batch]).backward()
    compute = (time.perf_counter() - t) / min(3, a.steps)
    dist.barrier()
    if a.worker.endswith("tally"):
        import tally
        tally.shutdown()
    if rank == 0:
        print(json.dumps({"impl": a.worker, "params": nparams, "world": world,
                          "step_s": sum(timed) / len(timed), "min_step_s": min(timed), "max_step_s": max(timed),
                          "compute_s": compute, "steps": len(timed), "warmup": a.warmup,
                          "first_loss": losses[0], "last_loss": losses[-1]}), flush=True)
    dist.destroy_process_group()
    return 0


# ---------------------------------------------------------------- launcher

def find_udpd(given):
    if given:
        return given
    sys.path.insert(0, os.path.join(ROOT, "gpu_agent", "examples"))
    import train  # build_dirs(): $TALLY_BUILD, then build/, then the other trees
    return train.find_binary("tally-udpd", None)


def log(msg):
    print(f"[onebit-emulate {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def rto_env(a):
    """The agents' retransmission timeout: on shaped links the floor `tally-perf allreduce
    --emulate` gives tally-worker (twice the round trip through full queues, perf_allreduce.py);
    unshaped, 2 ms (workers share the CPUs: a descheduled peer is not a loss)."""
    from perf_allreduce import emulated_rto_us
    rto = 2000 if a.no_shape else emulated_rto_us(a.link_gbit)
    return {"TALLY_RTO_INIT_US": str(rto), "TALLY_RTO_MIN_US": str(rto)}


def run_one(cl, a, impl, udpd, tmp, run_no):
    """One training run on the cluster; returns rank 0's figures (+ the appliance's bytes)."""
    app, stats = None, None
    env_tally = {}
    if impl.endswith("tally"):
        stats = os.path.join(tmp, f"udpd-{impl}.json")
        token = 0x0B170000 + run_no
        app = cl.bg(cl.ns("a0"), f"udpd-{impl}", [
            udpd, "--ip", cl.app_ip(0), "--port", str(PORT), "--cores", "2", "--mem", "256M",
            "--job", "1", "--no-auth", "--token", str(token), "--world", str(a.workers), "--stats", stats,
            "--ctl-socket", os.path.join(tmp, f"udpd-{impl}.sock")])
        time.sleep(0.5)
        if app.poll() is not None:
            raise RuntimeError(f"tally-udpd exited: {cl.logtext(f'udpd-{impl}')[-500:]}")
        env_tally = {"TALLY_APPLIANCES": f"{cl.app_ip(0)}:{PORT}", "TALLY_JOB_ID": "1", "TALLY_TOKEN": str(token)}
        env_tally.update(rto_env(a))
    pypath = os.path.join(ROOT, "gpu_agent", "python")
    procs = []
    for i, (ns, iface) in enumerate(cl.hosts):
        env = {"RANK": str(i), "WORLD_SIZE": str(a.workers), "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
               "MASTER_ADDR": cl.worker_ip(0), "MASTER_PORT": str(29600 + run_no), "GLOO_SOCKET_IFNAME": iface,
               "OMP_NUM_THREADS": "1", "PYTHONPATH": pypath, **env_tally}
        procs.append(cl.bg(ns, f"{impl}{i}", [
            sys.executable, os.path.abspath(__file__), "--worker", impl, "--inputs", str(a.inputs),
            "--hidden", str(a.hidden), "--batch", str(a.batch), "--warmup", str(a.warmup),
            "--steps", str(a.steps)], env=env))
    t0 = time.time()
    done = cl.wait_all(procs, a.timeout)
    wall = time.time() - t0
    if app is not None:
        cl.stop(app)
    from perf_allreduce import last_json
    r = last_json(cl.logtext(f"{impl}0"))
    bad = [i for i, p in enumerate(procs) if p.returncode not in (0, None) and p.returncode != 0]
    if not done or r is None or bad:
        why = "timed out" if not done else f"rank(s) {bad} failed" if bad else "rank 0 printed no result"
        tail = cl.logtext(f"{impl}{bad[0] if bad else 0}")[-1500:]
        return {"impl": impl, "error": why, "log": tail, "wall_s": wall}
    r["wall_s"] = wall
    if stats:
        try:
            with open(stats) as f:
                c = json.loads(f.read().strip())
            r["push_bytes"] = c.get("push_bytes", 0)
            r["wire_bytes"] = c.get("engine_rx_bytes", 0) + c.get("engine_tx_bytes", 0)
            r["push_bytes_per_step"] = r["push_bytes"] / (a.warmup + a.steps)
        except (OSError, ValueError):
            pass
    return r


def table(results, a):
    by = {r["impl"]: r for r in results}
    names = {"adam-tally": "Adam through Tally (f32)", "onebit-tally": "OneBitAdam through Tally (compressed steps)",
             "adam-gloo": "Adam, DDP over gloo"}
    link = ("unshaped veths" if a.no_shape else
            f"{a.link_gbit:g} Gbit/s worker links (appliance link {a.link_gbit * a.workers:g} Gbit/s)")
    p = next((r["params"] for r in results if "params" in r), None)
    md = [f"{a.workers} workers, {link}; MLP {a.inputs}-{a.hidden}-{a.hidden}-10"
          + (f" ({p / 1e6:.2f} M parameters, {p * 4 / 1e6:.1f} MB of f32 gradients)" if p else "")
          + f", batch {a.batch} per worker, {a.steps} timed steps after {a.warmup} (OneBitAdam's freeze step).", "",
          "| run | s/step | min | max | compute s/step | appliance push bytes/step (whole run) | x Adam/Tally | x Adam/gloo |",
          "|---|---|---|---|---|---|---|---|"]

    def ratio(r, base):
        b = by.get(base)
        if not b or "step_s" not in b or "step_s" not in r:
            return "-"
        return f"{b['step_s'] / r['step_s']:.2f}x"
    for impl in [i for i in IMPLS if i in by]:
        r = by[impl]
        if "error" in r:
            md.append(f"| {names[impl]} | FAILED: {r['error']} | | | | | | |")
            continue
        pb = f"{r['push_bytes_per_step']:,.0f}" if "push_bytes_per_step" in r else "-"
        md.append(f"| {names[impl]} | {r['step_s']:.4f} | {r['min_step_s']:.4f} | {r['max_step_s']:.4f} | "
                  f"{r['compute_s']:.4f} | {pb} | {ratio(r, 'adam-tally')} | {ratio(r, 'adam-gloo')} |")
    md += ["", "x: the other run's seconds per step / this run's (above 1: this run is faster). Compute: one "
           "worker's forward + backward alone. Push bytes: all workers' payload the appliance accepted, "
           "warm-up (and OneBitAdam's parameter broadcast) included, / steps."]
    return "\n".join(md)


def main(argv=None):
    a = parser().parse_args(argv)
    if a.worker:
        return worker(a)
    impls = [i for i in a.impls.split(",") if i]
    for i in impls:
        if i not in IMPLS:
            raise SystemExit(f"onebit_emulate: unknown run {i!r} (one of {', '.join(IMPLS)})")
    if a.workers < 2 or a.steps < 1 or a.warmup < 1:
        raise SystemExit("onebit_emulate: --workers >= 2, --steps >= 1, --warmup >= 1")
    udpd = find_udpd(a.udpd)
    if any(i.endswith("tally") for i in impls) and not (udpd and os.access(udpd, os.X_OK)):
        raise SystemExit("onebit_emulate: no tally-udpd (build the tree: ninja -C build)")
    if os.geteuid() != 0:
        raise SystemExit("onebit_emulate: needs root (network namespaces, tc)")
    from allreduce_netns import Cluster
    o = types.SimpleNamespace(prefix=a.prefix or f"ob{os.getpid() % 100000}-", workers=a.workers, appliances=1,
                              impls="gloo",  # no tallyd appliances: tally-udpd gets an address below
                              emulate=not a.no_shape, link_gbit=a.link_gbit,
                              appliance_gbit=a.link_gbit * a.workers, dry_run=False)
    tmp = tempfile.mkdtemp(prefix="onebit-emulate-")
    cl = Cluster(o, tmp)

    def on_signal(sig, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_signal)
    results = []
    t0 = time.time()
    try:
        cl.build()
        cl.add_host("a0", cl.app_ip(0), 0 if a.no_shape else o.appliance_gbit)
        log(f"cluster up: {a.workers} workers + appliance in namespaces {o.prefix}*, "
            + ("unshaped" if a.no_shape else f"links {a.link_gbit:g} Gbit/s"))
        for n, impl in enumerate(impls):
            r = run_one(cl, a, impl, udpd, tmp, n)
            log(f"{impl}: " + (f"{r['step_s']:.4f} s/step ({r['wall_s']:.0f} s)" if "step_s" in r
                               else f"FAILED ({r['error']}): {r.get('log', '')[-600:]}"))
            results.append(r)
    finally:
        cl.cleanup()
    md = table(results, a)
    print(md)
    ok = len(results) == len(impls) and all("step_s" in r for r in results)
    if ok and not a.keep_logs:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\n(run took {time.time() - t0:.0f} s" + ("" if ok and not a.keep_logs else f"; logs in {tmp}") + ")")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "results": results, "table": md}, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
