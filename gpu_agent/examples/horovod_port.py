#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A Horovod training script moved to Tally through the migration table of README.md: the
only change is the import (`import horovod.torch as hvd` -> `import tally.torch as hvd`);
hvd.init, hvd.rank, hvd.size, hvd.broadcast_parameters, hvd.broadcast_optimizer_state,
hvd.DistributedOptimizer and hvd.allreduce keep their names and meaning.

    # one appliance, two workers (tally-udpd from the build tree)
    build/appliance/udpd/tally-udpd --addr 127.0.0.1 --port 9170 --job 1 --no-auth --token 7 --world 2 &
    for r in 0 1; do TALLY_APPLIANCES=127.0.0.1:9170 TALLY_JOB_ID=1 TALLY_TOKEN=7 RANK=$r \\
        WORLD_SIZE=2 PYTHONPATH=gpu_agent/python python3 gpu_agent/examples/horovod_port.py & done

--backend gloo runs the same script on `GlooHvd`, a stand-in for Horovod over
torch.distributed (gloo; MASTER_ADDR / MASTER_PORT), for comparison: the losses agree.
"""
import argparse
import os
import sys


class GlooHvd:
    """What the script uses of horovod.torch, on torch.distributed gloo (the reference)."""

    Average, Sum = "Average", "Sum"

    def __init__(self):
        import torch.distributed as dist
        self.dist = dist

    def init(self):
        if not self.dist.is_initialized():
            self.dist.init_process_group("gloo")

    def rank(self):
        return self.dist.get_rank()

    def size(self):
        return self.dist.get_world_size()

    def broadcast_parameters(self, params, root_rank):
        for _, t in sorted(params.items()):
            self.dist.broadcast(t, root_rank)

    def broadcast_optimizer_state(self, opt, root_rank):
        pass  # a fresh SGD optimizer has no state

    def allreduce(self, t, name=None, op="Average"):
        t = t.detach().clone()
        self.dist.all_reduce(t)
        return t / self.size() if op == "Average" else t

    def DistributedOptimizer(self, opt, named_parameters=None, op="Average"):
        hvd, step = self, opt.step

        def averaged_step(closure=None):
            for g in opt.param_groups:
                for p in g["params"]:
                    if p.grad is not None:
                        p.grad.copy_(hvd.allreduce(p.grad, op=op))
            return step(closure)
        opt.step = averaged_step
        return opt


def train(hvd, steps=20, seed=0):
    """The Horovod script proper. Returns the averaged loss per step."""
    import torch
    import torch.nn as nn

    hvd.init()
    torch.set_num_threads(1)
    torch.manual_seed(seed + hvd.rank())  # different on purpose: broadcast_parameters fixes it
    model = nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05 * hvd.size(), momentum=0.9)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    g = torch.Generator().manual_seed(100 + hvd.rank())
    w = torch.linspace(-1, 1, 10)
    losses = []
    for step in range(steps):
        x = torch.randn(16, 10, generator=g)
        y = (x @ w).unsqueeze(1) + 0.1 * torch.randn(16, 1, generator=g)
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(hvd.allreduce(loss.detach(), name="loss").item())
    return losses


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", choices=("tally", "gloo"), default="tally")
    p.add_argument("--steps", type=int, default=20)
    a = p.parse_args()
    if a.backend == "tally":
        import tally.torch as hvd  # was: import horovod.torch as hvd
    else:
        hvd = GlooHvd()
    losses = train(hvd, a.steps)
    if hvd.rank() == 0:
        for i, l in enumerate(losses):
            print(f"step {i} loss {l:.6f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
