#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""DDP's bucket rebuild through the Tally hook, with timing skew: 4 workers (torchrun), a
model whose parameters are registered in another order than backward produces their
gradients (3.4 MB of them, bucket_cap_mb 1): DDP's rebuild after the first iteration
changes the bucket set (one bucket, then three; checked: the hook sees other bucket sizes
in iteration 1 than in 0).
One rank, another in each repetition, sleeps a seeded random 0-20 ms before its bucket
pushes in the first 3 iterations. REPS repetitions, each a fresh DDP model (a fresh rebuild),
6 SGD steps, run once through Tally and once over plain DDP/gloo (same seeds, same data).

Pass: no stall (the agent's op timeout is 20 s and the whole run is bounded), every
repetition rebuilt its buckets, and every parameter after every repetition equals gloo's
within |diff| <= 1e-5 + 1e-4*|gloo| (sums of the same 4 numbers in another order).
Exit 77 (skip) without torch or the software appliance.
"""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "gpu_agent", "examples"))
import train as launcher  # noqa: E402  (torchrun shim, ports)

REPS = int(os.environ.get("TALLY_TEST_REBUILD_REPS", "6"))
STEPS = 6
ATOL, RTOL = 1e-5, 1e-4


def make_model(torch, seed):
    nn = torch.nn

    class Net(nn.Module):
        """Registered c, a, b; used a -> b -> c: backward's gradient order differs from
        the reversed registration order DDP builds its first buckets from."""

        def __init__(self):
            super().__init__()
            self.c = nn.Linear(512, 10)
            self.a = nn.Linear(256, 1024)
            self.b = nn.Linear(1024, 512)
            self.d = nn.Linear(256, 256)

        def forward(self, x):
            return self.c(torch.relu(self.b(torch.relu(self.a(torch.tanh(self.d(x)))))))
    torch.manual_seed(seed)
    return Net()


def worker(out):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    launcher.torch_store_compat()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    import tally.torch as tt

    results = []
    for rep in range(REPS):
        res = {}
        for backend in ("gloo", "tally"):
            model = make_model(torch, seed=rep)
            ddp = DDP(model, bucket_cap_mb=1)
            seen = []  # (iteration, bucket index, numel) of this rank's hook calls
            slow = rep % world
            rnd = random.Random(1000 * rep + rank)
            it = [0]
            if backend == "tally":
                state = tt.TallyState()

                def hook(st, bucket):
                    t = bucket.buffer() if hasattr(bucket, "buffer") else bucket.get_tensor()
                    seen.append((it[0], bucket.index() if hasattr(bucket, "index") else bucket.get_index(),
                                 t.numel()))
                    if rank == slow and it[0] < 3:
                        time.sleep(rnd.uniform(0, 0.02))
                    return tt.comm_hook(st, bucket)
                ddp.register_comm_hook(state, hook)
            opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
            for step in range(STEPS):
                it[0] = step
                g = torch.Generator().manual_seed(100 * rep + 10 * step + rank)
                x, y = torch.randn(16, 256, generator=g), torch.randint(0, 10, (16,), generator=g)
                opt.zero_grad()
                torch.nn.functional.cross_entropy(ddp(x), y).backward()
                opt.step()
            res[backend] = [p.detach().reshape(-1).tolist() for p in model.parameters()]
            if backend == "tally":
                sig = [[n for i, _, n in seen if i == k] for k in range(2)]
                res["buckets"] = sig
        results.append(res)
        dist.barrier()
    if rank == 0:
        with open(out, "w") as f:
            json.dump(results, f)
    dist.barrier()
    import tally
    tally.shutdown()
    dist.destroy_process_group()
    return 0


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        return worker(sys.argv[2])
    try:
        import torch  # noqa: F401
    except ImportError:
        print("SKIP: torch not importable by", sys.executable)
        return 77
    udpd = os.environ.get("TALLY_TEST_UDPD")
    if not udpd or not os.path.exists(udpd):
        print("SKIP: TALLY_TEST_UDPD (tally-udpd) not built")
        return 77
    import torch
    print(f"torch {torch.__version__}; {REPS} repetitions of {STEPS} steps, 4 workers")
    port = launcher.free_port_block(2)
    # a private control socket (never the default /run/tally/tallyd.sock, a real appliance's)
    ctl_dir = tempfile.mkdtemp(prefix="tally-rebuild-ctl-")
    appl = subprocess.Popen([udpd, "--addr", "127.0.0.1", "--port", str(port), "--cores", "2", "--job", "5",
                             "--no-auth", "--token", "55", "--world", "4", "--mem", "128M",
                             "--ctl-socket", os.path.join(ctl_dir, "ctl.sock")], stdout=subprocess.DEVNULL)
    time.sleep(0.3)
    env = dict(os.environ, TALLY_APPLIANCES=f"127.0.0.1:{port}", TALLY_JOB_ID="5", TALLY_TOKEN="55",
               TALLY_OP_TIMEOUT_MS="20000", TALLY_PARTITION_BYTES="262144", TALLY_CREDIT_BYTES="524288")
    env["PYTHONPATH"] = os.path.join(ROOT, "gpu_agent", "python") + (
        ":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    with tempfile.TemporaryDirectory(prefix="tally-rebuild-") as tmp:
        out = os.path.join(tmp, "res.json")
        cmd = [sys.executable, "-c", launcher.TORCHRUN] + launcher.torchrun_args(4) + [
            os.path.abspath(__file__), "--worker", out]
        t0 = time.time()
        try:
            p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=60 + 15 * REPS)
            rc, text = p.returncode, p.stdout
        except subprocess.TimeoutExpired as e:
            rc, text = "timeout (stall)", e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        finally:
            launcher.stop(appl)
            shutil.rmtree(ctl_dir, ignore_errors=True)
        if rc != 0:
            print(text[-5000:])
            print(f"FAIL: workers exited with {rc}")
            return 1
        with open(out) as f:
            results = json.load(f)
    print(f"{REPS} repetitions in {time.time() - t0:.1f} s, no stall")
    failed = 0
    for rep, r in enumerate(results):
        rebuilt = r["buckets"][0] != r["buckets"][1]
        worst = 0.0
        for a, b in zip(r["tally"], r["gloo"]):
            for x, y in zip(a, b):
                worst = max(worst, abs(x - y) / (ATOL + RTOL * abs(y)))
        ok = rebuilt and worst <= 1.0
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} rep {rep:2d}: buckets {r['buckets'][0]} -> {r['buckets'][1]} "
              f"({'rebuilt' if rebuilt else 'NOT rebuilt'}), worst |tally - gloo| / tol {worst:.3g}")
    print(f"{failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
