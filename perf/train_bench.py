#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""train_bench.py — samples/s of PyTorch DDP with the Tally communication hook vs DDP over
gloo, same workers, same model, same run (one torchrun; each worker times gloo first, then
Tally, or the other order with --tally-first).

    /usr/bin/python3 perf/train_bench.py [--workers 4] [--steps 10] [--json]

Inside the machine the agent aggregates first (--local-agg, the agent's TALLY_LOCAL_AGG): by
default `shard`, BytePS's pipeline for a host of several workers (a reduce-scatter over shared
memory, each worker pushes a quarter to the appliance, an all-gather); `off` has every worker
push its whole gradient to the appliance; `sum` pushes the machine's sum from local rank 0.

Model: an MLP of ~25 M parameters (ResNet-50's size: 1024-4096-4096-1024-1000, f32,
~100 MB of gradients per step), synthetic data, batch --batch per worker, SGD, each backend timed
--rounds times in alternating order (ABBA). The Tally side
goes through an appliance started here (the software appliance over kernel UDP, tally-udpd,
unless TALLY_APPLIANCES names one). Prints measured figures only; --json prints one object
with tally_samples_s, gloo_samples_s, ratio (= tally / gloo) and the settings.
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "gpu_agent", "examples"))
import train as launcher  # noqa: E402  (find_binary, free_port_block, stop, TORCHRUN, torch_store_compat)


def parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--steps", type=int, default=10, help="timed steps per backend")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--threads", type=int, default=1, help="torch threads per worker")
    p.add_argument("--partition-bytes", type=int, default=4 << 20)
    p.add_argument("--credit-bytes", type=int, default=8 << 20)
    p.add_argument("--bucket-mb", type=int, default=25, help="DDP bucket_cap_mb")
    p.add_argument("--cores", type=int, default=2, help="appliance cores (UDP ports)")
    p.add_argument("--local-agg", choices=("off", "sum", "shard"), default="shard",
                   help="aggregation inside the machine before the appliance (TALLY_LOCAL_AGG)")
    p.add_argument("--tally-first", action="store_true")
    p.add_argument("--rounds", type=int, default=2,
                   help="timed passes per backend, alternating (gloo tally tally gloo ...: load drift "
                        "on a shared machine hits both alike); samples/s over all passes")
    p.add_argument("--appliance-nice", type=int, default=0,
                   help="nice value of the software appliance (negative: scheduled ahead of the workers)")
    p.add_argument("--gso", choices=("on", "off"), default="on",
                   help="workers send with UDP segmentation offload (TALLY_GSO)")
    p.add_argument("--udpd", default=None)
    p.add_argument("--json", action="store_true")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", default=None, help=argparse.SUPPRESS)
    return p


def model_25m():
    import torch.nn as nn
    return nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                         nn.Linear(4096, 1024), nn.ReLU(), nn.Linear(1024, 1000))


def time_backend(a, backend, rank, world):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    model = model_25m()
    ddp = DDP(model, bucket_cap_mb=a.bucket_mb)
    if backend == "tally":
        import tally.torch as tt
        ddp.register_comm_hook(tt.TallyState(), tt.comm_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    lossf = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(a.batch, 1024, generator=g)
    y = torch.randint(0, 1000, (a.batch,), generator=g)

    def step():
        opt.zero_grad()
        lossf(ddp(x), y).backward()
        opt.step()

    for _ in range(a.warmup):
        step()
    dist.barrier()
    t0 = time.perf_counter()
    marks = [t0]
    for _ in range(a.steps):
        step()
        marks.append(time.perf_counter())
    dist.barrier()
    dt = time.perf_counter() - t0
    nparams = sum(p.numel() for p in model.parameters())
    final = torch.cat([p.detach().flatten() for p in model.parameters()])
    return a.steps * a.batch * world / dt, dt, nparams, final, [y - x for x, y in zip(marks, marks[1:])]


def worker(a):
    import torch
    import torch.distributed as dist

    launcher.torch_store_compat()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(a.threads)
    pair = ["tally", "gloo"] if a.tally_first else ["gloo", "tally"]
    order = []
    for r in range(max(1, a.rounds)):
        order += pair if r % 2 == 0 else pair[::-1]
    res = {"tally": [], "gloo": []}
    steps = {"tally": [], "gloo": []}  # rank 0's step times, per pass
    final = {}  # the parameters after the first pass of each backend (same seed, same data)
    for b in order:
        sps, dt, nparams, params, times = time_backend(a, b, rank, world)
        res[b].append(dt)
        steps[b].append([round(x, 4) for x in times])
        final.setdefault(b, params)
        if rank == 0:
            print(f"{b}: {sps:.1f} samples/s ({a.steps} steps in {dt:.2f} s)", flush=True)
    if rank == 0 and a.out:
        import tally
        st = tally.init().stats()
        rate = {b: len(v) * a.steps * a.batch * world / sum(v) for b, v in res.items()}
        # the same training through both: the final parameters agree up to summation order
        # (the appliance sums in f32 in arrival order, gloo's ring in its own)
        diff = (final["tally"] - final["gloo"]).abs().max().item()
        scale = final["gloo"].abs().max().item()
        with open(a.out, "w") as f:
            json.dump({"tally_samples_s": rate["tally"], "gloo_samples_s": rate["gloo"],
                       "ratio": rate["tally"] / rate["gloo"], "params": nparams,
                       "order": order, "seconds": res, "step_seconds": steps,
                       "workers": world, "batch": a.batch, "steps": a.steps, "threads": a.threads,
                       "partition_bytes": a.partition_bytes, "credit_bytes": a.credit_bytes,
                       "param_max_abs_diff": diff, "param_max_abs": scale,
                       "params_bit_equal": bool(torch.equal(final["tally"], final["gloo"])),
                       "gso": a.gso, "local_agg": a.local_agg, "appliance_nice": a.appliance_nice, "agent_retransmits_rank0": st["retransmits"],
                       "loadavg": os.getloadavg()}, f)
    dist.barrier()
    import tally
    tally.shutdown()
    dist.destroy_process_group()
    return 0


def main():
    a = parser().parse_args()
    if a.worker:
        return worker(a)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(ROOT, "gpu_agent", "python") + (
        ":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["TALLY_PARTITION_BYTES"] = str(a.partition_bytes)
    env["TALLY_CREDIT_BYTES"] = str(a.credit_bytes)
    env["TALLY_AVERAGE"] = "1"
    env["TALLY_LOCAL_AGG"] = a.local_agg
    env["TALLY_GSO"] = "1" if a.gso == "on" else "0"
    # A loaded machine with one software appliance thread: back off retransmissions (chunks
    # wait for the slowest worker, not for the network) and allow slow steps.
    env.setdefault("TALLY_RTO_INIT_US", "5000")
    env.setdefault("TALLY_RTO_MAX_US", "1000000")
    env.setdefault("TALLY_OP_TIMEOUT_MS", "600000")
    out = f"/tmp/tally-train-bench-{os.getpid()}.json"
    appl = None
    try:
        if not env.get("TALLY_APPLIANCES"):
            udpd = launcher.find_binary("tally-udpd", a.udpd)
            if not udpd:
                raise SystemExit("train_bench: build the tree first (tally-udpd not found)")
            port = launcher.free_port_block(a.cores)
            # the appliance is a machine of its own in a deployment; here it shares the
            # CPUs with the workers: --appliance-nice N (negative: ahead of the workers)
            # the job as the appliance sees it: one rank per worker (off), one per machine
            # (sum), or one job per local rank ("lane": shard), admitted as they join
            admit = {"off": ["--job", "1", "--no-auth", "--token", "77", "--world", str(a.workers)],
                     "sum": ["--job", "1", "--no-auth", "--token", "77", "--world", "1"],
                     "shard": ["--open-admission"]}[a.local_agg]
            appl = subprocess.Popen(["nice", "-n", str(a.appliance_nice), udpd, "--addr", "127.0.0.1", "--port", str(port), "--cores", str(a.cores),
                                     "--mem", str(1 << 30), "--stats", out + ".udpd"] + admit,
                                    stdout=subprocess.DEVNULL)
            time.sleep(0.3)
            env.update(TALLY_APPLIANCES=f"127.0.0.1:{port}", TALLY_JOB_ID="1", TALLY_TOKEN="77")
            if not a.json:
                print(f"appliance: software appliance over kernel UDP ({a.cores} cores) on 127.0.0.1:{port}, "
                      f"local aggregation {a.local_agg}")
        cmd = [sys.executable, "-c", launcher.TORCHRUN] + launcher.torchrun_args(a.workers) + [
               os.path.abspath(__file__), "--worker", "--out", out] + [x for x in sys.argv[1:] if x != "--json"]
        log = open(out + ".log", "w+") if a.json else None
        rc = subprocess.call(cmd, env=env, stdout=log, stderr=subprocess.STDOUT if log else None)
        if log and rc != 0:
            log.seek(0)
            sys.stderr.write(log.read()[-6000:])
    finally:
        launcher.stop(appl)
    if rc != 0 or not os.path.exists(out):
        print(f"train_bench: workers failed (exit {rc})", file=sys.stderr)
        return 1
    with open(out) as f:
        r = json.load(f)
    os.unlink(out)
    if os.path.exists(out + ".udpd"):  # the appliance's counters (--stats at its exit)
        with open(out + ".udpd") as f:
            st = json.loads(f.read() or "{}")
        os.unlink(out + ".udpd")
        r["appliance"] = {k: st.get(k) for k in (
            "pushes", "duplicates", "pulls", "resends", "tx_pkts", "rx_pkts", "udp_tx_calls",
            "udp_tx_gso_sends", "udp_rx_calls", "udp_rx_gro_batches")}
    if os.path.exists(out + ".log"):
        os.unlink(out + ".log")
    if a.json:
        print(json.dumps(r))
    else:
        print(f"{r['params'] / 1e6:.1f} M parameters, {r['workers']} workers, batch {r['batch']}: "
              f"tally {r['tally_samples_s']:.1f} samples/s, gloo {r['gloo_samples_s']:.1f} samples/s, "
              f"ratio {r['ratio']:.3f}; final parameters: max |tally - gloo| "
              f"{r['param_max_abs_diff']:.3g} (max |param| {r['param_max_abs']:.3g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
