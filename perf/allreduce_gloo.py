#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""allreduce_gloo.py - one rank of torch.distributed's Gloo allreduce (ring) over TCP.
Prints one JSON line: rank, seconds (allreduce only, the timed rounds after --warmup untimed
ones), ok (every round's result checked)."""
import argparse
import json
import time

import torch
import torch.distributed as dist


def rank_data(seed, rank, n):
    # Small integers as floats: any summation order gives the exact sum, so the check is exact.
    g = torch.Generator().manual_seed(seed * 1000 + rank)
    return torch.randint(-512, 512, (n,), generator=g).to(torch.float32)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world", type=int, required=True)
    p.add_argument("--master", required=True)
    p.add_argument("--port", type=int, default=29517)
    p.add_argument("--bytes", type=int, required=True)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--warmup", type=int, default=0, help="untimed (checked) rounds first")
    o = p.parse_args()
    torch.set_num_threads(1)
    n = o.bytes // 4
    dist.init_process_group("gloo", init_method=f"tcp://{o.master}:{o.port}",
                            rank=o.rank, world_size=o.world)
    mine = rank_data(o.seed, o.rank, n)
    want = sum(rank_data(o.seed, r, n) for r in range(o.world))
    buf = torch.empty_like(mine)
    dist.barrier()
    secs, ok = 0.0, True
    for r in range(o.warmup + o.rounds):
        buf.copy_(mine)
        dist.barrier()  # every round starts together (as tally-worker and tally-perf-mpi)
        t0 = time.perf_counter()
        dist.all_reduce(buf)
        if r >= o.warmup:
            secs += time.perf_counter() - t0
        ok = ok and torch.equal(buf, want)
    print(json.dumps({"impl": "gloo", "rank": o.rank, "seconds": secs, "ok": bool(ok)}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
