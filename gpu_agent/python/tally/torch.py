# SPDX-License-Identifier: Apache-2.0
"""PyTorch integration: Tally does the gradient exchange, torch.distributed (gloo) only the
setup and broadcasts.

DDP (main path):
    ddp = DistributedDataParallel(model)
    ddp.register_comm_hook(tally.torch.TallyState(), tally.torch.comm_hook)

Without DDP (Horovod / BytePS names):
    opt = tally.torch.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    tally.torch.broadcast_parameters(model.state_dict(), root_rank=0)

Works with torch 1.13 and 2.x: only public torch APIs, and the library is reached over
ctypes (nothing compiled against torch).

This module is the one import for all of it; the code lives by responsibility in
tally.ddp (the DDP hook), tally.horovod (Horovod's names), tally.broadcast (broadcasts) and
tally.inflight (push_pulls of tensors in flight, shared by the three), tally.byteps
(BytePS's names), tally.collectives (allgather, alltoall, barrier, join, Min / Max /
Product: through torch.distributed, the appliance only sums).
"""
from .broadcast import (_as_bytes, _bcast_bytes, _items, broadcast_object,  # noqa: F401
                        broadcast_optimizer_state, broadcast_parameters)
from .ddp import (DistributedDataParallel, TallyState, _bucket_index,  # noqa: F401
                  _bucket_tensor, _ddp_patch_lock, _over, comm_hook)
from .horovod import (Average, Compression, DistributedOptimizer, Max, Min, Product,  # noqa: F401
                      _DistributedOptimizer, _noname, _start, allgather, allgather_object, allreduce,
                      allreduce_, allreduce_async, allreduce_async_, alltoall, barrier, broadcast,
                      broadcast_, broadcast_async, broadcast_async_, cross_rank, cross_size,
                      grouped_allreduce, grouped_allreduce_, grouped_allreduce_async,
                      grouped_allreduce_async_, init, is_initialized, join, local_rank, local_size,
                      poll, rank, reducescatter, shutdown, size, synchronize, Sum, SyncBatchNorm)
from .byteps import (declare, push_pull, push_pull_async, push_pull_async_inplace,  # noqa: F401
                     push_pull_inplace, resume, suspend)
from .inflight import (_DT, Handle, _agent, _device_args, _dtype_name,  # noqa: F401
                       _Inflight, _inflight, _inflights, _wire)
