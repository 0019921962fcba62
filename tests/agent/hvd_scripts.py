# SPDX-License-Identifier: Apache-2.0
"""Training scripts in the usual shapes of Horovod's and BytePS's PyTorch examples, written
against their module names (`hvd`, `bps`), and GlooRef: what those scripts use of Horovod /
BytePS, on torch.distributed gloo, as the reference. tests/agent/test_hvd_byteps.py runs them
on Tally (through the opt-in shims: `import horovod.torch as hvd`) and on GlooRef."""
import torch
import torch.nn as nn


class GlooRef:
    """Horovod's and BytePS's names the scripts use, on torch.distributed (gloo)."""
    Average, Sum = "Average", "Sum"

    class Compression:
        none, fp16 = "none", "fp16"

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

    def local_rank(self):
        return self.rank()

    def broadcast_parameters(self, params, root_rank):
        for _, t in sorted(params.items()):
            self.dist.broadcast(t, root_rank)

    def broadcast_optimizer_state(self, opt, root_rank):
        pass  # fresh optimizers: no state yet

    def allreduce(self, t, average=None, name=None, op=None, compression=None):
        t = t.detach().clone()
        if compression == "fp16":
            t = t.half().float()
        self.dist.all_reduce(t)
        avg = op != "Sum" and average is not False
        return t / self.size() if avg else t

    def push_pull(self, t, average=True, name=None):
        return self.allreduce(t, average=average)

    def DistributedOptimizer(self, opt, named_parameters=None, compression="none", op="Average",
                             gradient_predivide_factor=1.0, backward_passes_per_step=1):
        ref, step = self, opt.step

        def averaged_step(closure=None):
            for g in opt.param_groups:
                for p in g["params"]:
                    if p.grad is not None:
                        p.grad.copy_(ref.allreduce(p.grad / gradient_predivide_factor, op=op,
                                                   compression=compression) * gradient_predivide_factor)
            return step(closure)
        opt.step = averaged_step
        return opt


def _data(rank, step):
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(16, 10, generator=g)
    y = (x @ torch.linspace(-1, 1, 10)).unsqueeze(1) + 0.1 * torch.randn(16, 1, generator=g)
    return x, y


def horovod_mnist_shape(hvd, steps=12, fp16=False, predivide=1.0):
    """Horovod's pytorch_mnist.py shape: init, lr scaled by size, broadcast_parameters and
    broadcast_optimizer_state from rank 0, DistributedOptimizer(named_parameters, compression
    (--fp16-allreduce), gradient_predivide_factor), metric averaging with allreduce(name=)."""
    hvd.init()
    torch.manual_seed(hvd.rank())  # different on purpose: the broadcast fixes it
    model = nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05 * hvd.size(), momentum=0.5)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    compression = hvd.Compression.fp16 if fp16 else hvd.Compression.none
    # the same names in every call: a later DistributedOptimizer reuses them (issue 39)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(), compression=compression,
                                   op=hvd.Average, gradient_predivide_factor=predivide)
    losses = []
    for step in range(steps):
        x, y = _data(hvd.rank(), step)
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        # metric_average(val, name) of the example
        losses.append(hvd.allreduce(loss.detach(), name="avg_loss").item())
    return losses, [p.detach().tolist() for p in model.parameters()]


def byteps_shape(bps, steps=12):
    """BytePS's benchmark/train shape: push_pull of the gradients by hand (named, averaged)
    and push_pull of a metric."""
    bps.init()
    torch.manual_seed(bps.rank())
    model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 1))
    bps.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for step in range(steps):
        x, y = _data(bps.rank(), step)
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        for n, p in model.named_parameters():
            p.grad.copy_(bps.push_pull(p.grad, average=True, name=f"grad.{n}"))
        opt.step()
        losses.append(bps.push_pull(loss.detach().reshape(1), average=True, name="loss").item())
    return losses, [p.detach().tolist() for p in model.parameters()]
