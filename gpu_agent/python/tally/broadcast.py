# SPDX-License-Identifier: Apache-2.0
"""Broadcasts through the appliance, bit for bit and for every dtype: parameters and buffers,
any picklable object, an optimizer's state (Horovod's broadcast_parameters /
broadcast_optimizer_state)."""
import io

import torch
import torch.distributed as dist

from .agent import configured
from .inflight import Handle, _agent, _inflight


def _bcast_bytes(a, data, root_rank):
    """A uint8 tensor broadcast from root_rank through the appliance: a sum of i32 words to
    which every other rank adds zeros (the root's bits come back unchanged)."""
    n = data.numel()
    words = torch.zeros((n + 3) // 4, dtype=torch.int32)
    if a.rank == root_rank:
        words.view(torch.uint8)[:n] = data
    tid = a.declare(f"tally.bcast.i32.{words.numel()}", words.numel() * 4, "i32", 0, average=False,
                    ordered=False)
    h = Handle(words)
    _inflight(a).start(tid, words, h._done)
    h.wait()
    return words.view(torch.uint8)[:n]


def _as_bytes(t):
    t = t.detach().contiguous().reshape(-1)
    if t.dtype == torch.bool:
        t = t.view(torch.uint8)
    return t.view(torch.uint8) if t.numel() else torch.zeros(0, dtype=torch.uint8)


def _items(params):
    if isinstance(params, dict):
        return sorted(params.items())
    out = []
    for i, x in enumerate(params):
        out.append(x if isinstance(x, tuple) else (f"param.{i}", x))
    return out


def broadcast_parameters(params, root_rank=0, agent=None):
    """Copy `params` (a state_dict, (name, tensor) pairs, or tensors) from root_rank to every
    worker in place, bit for bit, whatever their dtype (bf16, int64 buffers, bool, f64...):
    one push_pull of all their bytes as i32 words, zeros from every other rank. Without an
    appliance (TALLY_APPLIANCES unset) and with torch.distributed up, torch.distributed
    broadcasts instead. Call it on every rank in the same order."""
    items = [(n, t) for n, t in _items(params) if torch.is_tensor(t) and t.numel() > 0]
    if not configured() and agent is None and dist.is_available() and dist.is_initialized():
        with torch.no_grad():
            for _, t in items:
                dist.broadcast(t, root_rank)
        return
    a = _agent(agent)
    with torch.no_grad():
        flat = [_as_bytes(t).cpu() for _, t in items]
        sizes = [f.numel() for f in flat]
        data = torch.cat(flat) if flat else torch.zeros(0, dtype=torch.uint8)
        out = _bcast_bytes(a, data, root_rank)
        off = 0
        for (name, t), n in zip(items, sizes):
            if a.rank != root_rank:
                src = out[off:off + n].clone()
                if t.dtype == torch.bool:
                    src = src.view(torch.bool)
                else:
                    src = src.view(t.dtype)
                t.copy_(src.reshape(t.shape))
            off += n


def broadcast_object(obj, root_rank=0, agent=None):
    """Any picklable object (torch.save) from root_rank; every rank gets root's."""
    a = _agent(agent)
    buf = io.BytesIO()
    if a.rank == root_rank:
        torch.save(obj, buf)
    raw = buf.getvalue()
    n = torch.tensor([len(raw)], dtype=torch.int32).view(torch.uint8)
    size = int(_bcast_bytes(a, n, root_rank).clone().view(torch.int32)[0])
    data = torch.frombuffer(bytearray(raw), dtype=torch.uint8) if raw else torch.zeros(size, dtype=torch.uint8)
    if a.rank != root_rank:
        data = torch.zeros(size, dtype=torch.uint8)
    out = _bcast_bytes(a, data, root_rank)
    if a.rank == root_rank:
        return obj
    return torch.load(io.BytesIO(out.numpy().tobytes()))


def broadcast_optimizer_state(optimizer, root_rank=0, agent=None):
    """Horovod's broadcast_optimizer_state: every rank's optimizer gets root_rank's state
    (moments, step counts, hyper-parameters), bit for bit, whatever their dtypes."""
    sd = broadcast_object(optimizer.state_dict(), root_rank, agent)
    a = _agent(agent)
    if a.rank != root_rank:
        optimizer.load_state_dict(sd)
