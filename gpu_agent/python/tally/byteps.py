# SPDX-License-Identifier: Apache-2.0
"""BytePS's API by its names on Tally (`import byteps.torch as bps` -> `import tally.byteps as
bps`, or the opt-in `byteps` shim of gpu_agent/python/shims): push_pull (sync, async, in
place), declare, suspend / resume, with init, rank, size, DistributedOptimizer,
broadcast_parameters and broadcast_optimizer_state as in tally.horovod. push_pull sums or
averages through the appliance."""
from .broadcast import broadcast_optimizer_state, broadcast_parameters  # noqa: F401
from .compression import Compression  # noqa: F401
from .horovod import (DistributedOptimizer, allreduce_async_, init, local_rank,  # noqa: F401
                      local_size, poll, rank, shutdown, size, synchronize)

_declared = {}


def _op(average):
    return "Average" if average else "Sum"


def declare(name, **_):
    """BytePS's declare: register a tensor name before use. Tally declares a key at a name's
    first push_pull, every rank in the same order; this records the name (for declared())."""
    _declared.setdefault(name, len(_declared))


def declared():
    return dict(_declared)


def push_pull_async_inplace(tensor, average=True, name=None, version=0, priority=0, compression=None):
    """Start the sum (average=False) or average of `tensor` in place over every worker;
    a Handle for synchronize() / poll()."""
    return allreduce_async_(tensor, None, name, _op(average), compression=compression)


def push_pull_async(tensor, average=True, name=None, version=0, priority=0, compression=None):
    """BytePS's push_pull_async: into a new tensor that synchronize(handle) returns."""
    return push_pull_async_inplace(tensor.detach().clone(), average, name, version, priority, compression)


def push_pull_inplace(tensor, average=True, name=None, version=0, priority=0, compression=None):
    """BytePS's push_pull_inplace: in place; returns the tensor."""
    return synchronize(push_pull_async_inplace(tensor, average, name, version, priority, compression))


def push_pull(tensor, average=True, name=None, version=0, priority=0, compression=None):
    """BytePS's push_pull: the average (or sum) over every worker, as a new tensor."""
    return push_pull_inplace(tensor.detach().clone(), average, name, version, priority, compression)


def suspend():
    """BytePS's suspend (elastic training): leaves the appliance (the agent is closed; the
    declared names are kept). Call resume() to continue."""
    from .inflight import _inflights
    _inflights.clear()
    shutdown()


def resume(num_workers=None, num_servers=None, global_rank=None, context=None):
    """BytePS's resume after suspend(): a new agent, from the environment (TALLY_APPLIANCES,
    RANK, WORLD_SIZE ...) under a new incarnation agreed through torch.distributed;
    num_workers / global_rank override the world size and rank.
    num_servers is the appliances' business (TALLY_APPLIANCES)."""
    import secrets

    import torch.distributed as dist

    from .collectives import group
    # a new incarnation, the same on every rank: the appliance drops the suspended agents'
    # keys and rounds instead of refusing the new ones (key_conflict)
    group()
    inc = [secrets.randbits(63) or 1]
    dist.broadcast_object_list(inc, 0)
    kw = {"incarnation": inc[0]}
    if num_workers is not None:
        kw["world_size"] = int(num_workers)
    if global_rank is not None:
        kw["rank"] = int(global_rank)
    return init(**kw)
