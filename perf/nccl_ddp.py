#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""nccl_ddp.py — PyTorch's own NCCL between two "nodes" on one GPU (perf/nccl_gpu.sh runs it).

Each rank is a process on cuda:0 with its own NCCL_HOSTID, so NCCL counts two nodes (it
counts nodes by host hash, which NCCL_HOSTID replaces: src/misc/utils.cc) and its duplicate-GPU
check, which compares ranks of the same host hash only (src/init.cc), lets them share the GPU.
Whatever transport the environment picks (NCCL's socket transport, or NCCL_NET_PLUGIN=tally
with NCCL_COLLNET_ENABLE=1) carries the traffic between the two.

  nccl_ddp.py train OUT.json [--steps N] [--hidden H]
      an unmodified DDP loop (MLP on a fixed synthetic data set, SGD), rank 0 writes the loss
      of every step to OUT.json
  nccl_ddp.py busbw [--min 1K] [--max 1G] [--iters N]
      torch.distributed.all_reduce of f32, nccl-tests' columns (size, count, type, redop,
      time, algbw, busbw, #wrong): #wrong counts elements that differ from the exact sum
      (small integers: every order of the adds gives the same bits)

Without a CUDA GPU it exits with status 3 and says so.
"""
import json
import os
import socket
import sys
import time


def die(msg, code=3):
    print("nccl_ddp.py: " + msg, file=sys.stderr, flush=True)
    sys.exit(code)


try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
except ImportError as e:  # the GPU host's PyTorch wheel has it
    die("PyTorch is not importable here (%s)" % e)

WORLD = 2


def size_arg(s):
    m = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(s[:-1]) * m[s[-1].upper()]) if s[-1].upper() in m else int(s)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def setup(rank, port):
    # before NCCL initialises in this process: one "node" per rank
    os.environ["NCCL_HOSTID"] = "tally-nccl-node%d" % rank
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                            world_size=WORLD, device_id=torch.device("cuda", 0))


def train(rank, port, args):
    setup(rank, port)
    steps, hidden = args["steps"], args["hidden"]
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(4096, 64, generator=g)
    w_true = torch.randn(64, 10, generator=g)
    y = (x @ w_true).argmax(1)
    torch.manual_seed(0)  # the same initial weights on both ranks (DDP broadcasts anyway)
    model = torch.nn.Sequential(torch.nn.Linear(64, hidden), torch.nn.ReLU(),
                                torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
                                torch.nn.Linear(hidden, 10)).cuda()
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[0])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    losses = []
    t0 = time.time()
    for step in range(steps):
        lo = (step * WORLD + rank) * 64 % 4096
        xb, yb = x[lo:lo + 64].cuda(), y[lo:lo + 64].cuda()
        loss = torch.nn.functional.cross_entropy(ddp(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        # the global mean loss, as a DDP job logs it
        l = loss.detach().clone()
        dist.all_reduce(l)
        losses.append(l.item() / WORLD)
    torch.cuda.synchronize()
    params = sum(p.numel() for p in model.parameters())
    if rank == 0:
        with open(args["out"], "w") as f:
            json.dump({"losses": losses, "seconds": time.time() - t0, "params": params,
                       "torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                       "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(0),
                       "env": {k: v for k, v in os.environ.items()
                               if k.startswith(("NCCL_", "TALLY_"))}}, f)
        print("train: %d steps, %d parameters, first loss %.6f, last %.6f, %.1f s" %
              (steps, params, losses[0], losses[-1], time.time() - t0), flush=True)
    dist.destroy_process_group()


def busbw(rank, port, args):
    setup(rank, port)
    if rank == 0:
        print("#%12s %12s %8s %6s %12s %8s %8s %7s" % ("size", "count", "type", "redop", "time",
                                                       "algbw", "busbw", "#wrong"))
        print("#%12s %12s %8s %6s %12s %8s %8s %7s" % ("(B)", "(elements)", "", "", "(us)",
                                                       "(GB/s)", "(GB/s)", ""), flush=True)
    size = args["min"]
    buf = torch.empty(args["max"] // 4, dtype=torch.float32, device="cuda")
    while size <= args["max"]:
        n = size // 4
        x = buf[:n]
        pat = (torch.arange(n, device="cuda") % 1021).float()
        iters = max(2, min(args["iters"], int((256 << 20) // max(size, 1))))
        x.copy_(pat * (rank + 1))
        for _ in range(2):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        t = (time.perf_counter() - t0) / iters
        x.copy_(pat * (rank + 1))
        dist.all_reduce(x)
        wrong = int((x != pat * sum(range(1, WORLD + 1))).sum().item())
        tt = torch.tensor([t, float(wrong)], device="cuda")
        dist.all_reduce(tt, op=dist.ReduceOp.MAX)
        if rank == 0:
            algbw = size / tt[0].item() / 1e9
            print(" %12d %12d %8s %6s %12.1f %8.3f %8.3f %7d" %
                  (size, n, "float", "sum", tt[0].item() * 1e6, algbw,
                   algbw * 2 * (WORLD - 1) / WORLD, int(tt[1].item())), flush=True)
        size *= 2
    dist.destroy_process_group()


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in ("train", "busbw"):
        die("usage: nccl_ddp.py train OUT.json [--steps N] [--hidden H] | "
            "busbw [--min 1K] [--max 1G] [--iters N]", 2)
    if not torch.cuda.is_available():
        die("no CUDA GPU visible (torch.cuda.is_available() is False, torch %s): this run "
            "needs PyTorch's NCCL on a GPU" % torch.__version__)
    if not dist.is_nccl_available():
        die("this PyTorch has no NCCL backend")
    mode = sys.argv[1]
    args = {"steps": 200, "hidden": 1024, "min": 1 << 10, "max": 1 << 30, "iters": 20}
    rest = sys.argv[2:]
    if mode == "train":
        if not rest:
            die("train needs OUT.json", 2)
        args["out"] = rest.pop(0)
    while rest:
        k = rest.pop(0).lstrip("-")
        if k not in args or not rest:
            die("unknown or incomplete option --%s" % k, 2)
        args[k] = size_arg(rest.pop(0))
    mp.spawn(train if mode == "train" else busbw, args=(free_port(), args), nprocs=WORLD)


if __name__ == "__main__":
    main()
