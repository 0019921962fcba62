# SPDX-License-Identifier: Apache-2.0
"""Horovod's collectives that are not sums, on the job's torch.distributed group:
allgather, allgather_object, alltoall, barrier, join, Min / Max / Product allreduces. The
appliance only sums, so these go through torch.distributed's default group: the script's
own (init_process_group) or one made here from the launcher's environment (gloo, env://:
MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, which torchrun sets). Sums, averages and
reduce-scatter go through the appliance (tally.horovod); broadcasts too (tally.broadcast,
bit for bit in every dtype)."""
import os
import time

import torch
import torch.distributed as dist

from . import identity

_OPS = {"Min": "MIN", "Max": "MAX", "Product": "PRODUCT"}


def group():
    """Make sure torch.distributed's default group exists (made here from the environment
    when the script did not make one)."""
    if not dist.is_available():
        raise RuntimeError("tally.torch: this collective needs torch.distributed, which this torch lacks")
    if dist.is_initialized():
        return
    if not (os.environ.get("MASTER_ADDR") and os.environ.get("MASTER_PORT")):
        raise RuntimeError("tally.torch: allgather / broadcast / alltoall / barrier / join / Min / Max / Product "
                           "use torch.distributed (the appliance only sums): launch with torchrun, or set "
                           "MASTER_ADDR and MASTER_PORT, or call torch.distributed.init_process_group first")
    identity.init_group()


def reduce_op_(t, op, prescale=1.0, postscale=1.0):
    """Min / Max / Product of t in place over every rank (torch.distributed)."""
    group()
    with torch.no_grad():
        if prescale != 1.0:
            t.mul_(prescale)
        dist.all_reduce(t, getattr(dist.ReduceOp, _OPS[op]))
        if postscale != 1.0:
            t.mul_(postscale)
    return t


def allgather(tensor, name=None, process_set=None):
    """Horovod's allgather: every rank's tensor concatenated along dimension 0 in rank order;
    the first dimension may differ between ranks, the others may not."""
    group()
    t = tensor.detach().contiguous()
    if t.dim() == 0:
        t = t.reshape(1)
    n = torch.tensor([t.shape[0]], dtype=torch.int64)
    ns = [torch.zeros_like(n) for _ in range(dist.get_world_size())]
    dist.all_gather(ns, n)
    ns = [int(x.item()) for x in ns]
    big = max(ns)
    pad = torch.zeros((big,) + tuple(t.shape[1:]), dtype=t.dtype)
    pad[:t.shape[0]] = t
    outs = [torch.empty_like(pad) for _ in ns]
    dist.all_gather(outs, pad)
    return torch.cat([o[:k] for o, k in zip(outs, ns)])


def allgather_object(obj, name=None):
    """Horovod's allgather_object: the list of every rank's object, in rank order."""
    group()
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def alltoall(tensor, splits=None, name=None, process_set=None):
    """Horovod's alltoall: rank i sends the i-th slice (along dimension 0, sizes `splits`,
    default equal) to rank i; returns what it received concatenated in rank order (and the
    received splits when splits were given, as Horovod >= 0.21 does)."""
    group()
    w = dist.get_world_size()
    t = tensor.detach().contiguous()
    if splits is None:
        if t.shape[0] % w:
            raise ValueError(f"tally.torch.alltoall: first dimension {t.shape[0]} is not divisible by the {w} ranks: "
                             "give splits")
        sp = [t.shape[0] // w] * w
    else:
        sp = [int(x) for x in (splits.tolist() if torch.is_tensor(splits) else splits)]
        if len(sp) != w or sum(sp) != t.shape[0]:
            raise ValueError(f"tally.torch.alltoall: splits {sp} must have {w} entries summing to {t.shape[0]}")
    got = allgather_object(sp)
    recv = [got[r][dist.get_rank()] for r in range(w)]
    chunks = list(torch.split(t, sp))
    # gloo has no all_to_all in torch 1.13: each rank's pieces broadcast from it as objects
    # (simple and exact, not fast)
    out = []
    for src in range(w):
        piece = chunks if src == dist.get_rank() else None
        lst = [piece]
        dist.broadcast_object_list(lst, src)
        out.append(lst[0][dist.get_rank()])
    res = torch.cat(out) if out else t[:0]
    return (res, torch.tensor(recv)) if splits is not None else res


def barrier(process_set=None):
    """Horovod's barrier."""
    group()
    dist.barrier()


def join(device=-1):
    """Horovod's join, where every rank calls it at the same point: waits for all of them and
    returns the rank that arrived last. (Horovod lets joined ranks serve the others' further
    allreduces with zeros; the appliance waits for every rank, so a rank that keeps reducing
    after another joined is reported as that rank being silent.)"""
    group()
    got = allgather_object((time.time(), dist.get_rank()))
    return max(got)[1]


def cross_size():
    """Horovod's cross_size: the number of machines (size / local_size)."""
    from .agent import init
    a = init()
    return max(1, a.world_size // max(1, a.local_size))


def cross_rank():
    """Horovod's cross_rank: this machine's index (torchrun's GROUP_RANK, else rank // local_size)."""
    from .agent import init
    a = init()
    g = os.environ.get("GROUP_RANK")
    return int(g) if g is not None else a.rank // max(1, a.local_size)
