# SPDX-License-Identifier: Apache-2.0
"""The DDP communication hook: TallyState + comm_hook for
DistributedDataParallel.register_comm_hook, and DistributedDataParallel(model), DDP with the
hook registered and its state broadcast through Tally."""
import contextlib
import ctypes
import threading

import torch

from .agent import TallyError
from .agent import init as _agent_init
from .broadcast import broadcast_parameters
from .compression import codec_name
from .inflight import _dtype_name, _inflight, _wire


class TallyState:
    """State of the DDP communication hook: the agent (created from the environment unless
    given) and the ids of the buckets declared so far.

    The agent starts partitions in submission order (tally_agent_set_order): DDP launches
    its buckets in index order on every rank, so that order is the same everywhere whatever
    the timing, including the iteration after DDP's bucket rebuild, when new buckets are
    declared and some old ones are never pushed again.

    A failed push_pull reaches backward() through DDP's C++ reducer, which only carries a
    text: backward raises RuntimeError("... tally: <what failed> [ETIMEDOUT]"). The typed
    error (a tally.TallyError subclass) is kept in `error`; `with state.errors():` around
    backward re-raises it as that type."""

    def __init__(self, agent=None, compression=None, **agent_kw):
        self.agent = agent if agent is not None else _agent_init(**agent_kw)
        self.codec = codec_name(compression)  # f32 buckets through this agent codec
        self.agent.set_order("submit")
        self.inflight = _inflight(self.agent)
        self.tensors = {}
        self.error = None
        self.views = 0  # buckets whose result DDP read from the agent's shared memory

    def tensor_id(self, name, t, priority):
        if self.codec and t.dtype == torch.float32:
            name += f".{self.codec}"  # a tensor keeps its first codec: another hook's own
        tid = self.tensors.get(name)
        if tid is None:
            tid = self.agent.declare(name, t.numel() * t.element_size(), _dtype_name(t), priority,
                                     average=True)
            if self.codec and t.dtype == torch.float32:
                self.agent.set_codec(tid, self.codec, 0)
            self.tensors[name] = tid
        return tid

    @contextlib.contextmanager
    def errors(self):
        """Re-raise a hook's failure inside the block as its tally.TallyError subclass."""
        self.error = None
        try:
            yield
        except RuntimeError as e:
            if self.error is not None and not isinstance(e, TallyError):
                raise self.error from e
            raise


def _bucket_tensor(bucket):
    return bucket.buffer() if hasattr(bucket, "buffer") else bucket.get_tensor()


def _bucket_index(bucket):
    return bucket.index() if hasattr(bucket, "index") else bucket.get_index()


def _over(addr, like):
    """A tensor of like's dtype and size over memory at addr (no copy)."""
    n = like.numel() * like.element_size()
    return torch.frombuffer((ctypes.c_char * n).from_address(addr), dtype=like.dtype, count=like.numel())


def comm_hook(state, bucket):
    """DDP communication hook: averages the bucket across all workers through Tally.

    Buckets are named by index, size and dtype: DDP's bucket rebuild after the first
    iteration declares new tensors (keys) instead of reusing ones of another size; the
    agent's submission order (TallyState) needs nothing more. f16 / bf16 buckets travel as
    f32 (the average is taken before rounding).

    A host bucket's result is taken where the agent leaves it (TALLY_AGENT_RESULT_VIEW): in
    the sharded local mode that is the machine's shared gather area, and DDP copies it into
    the gradients from there, one copy of the bucket fewer. It stays valid until this rank
    pushes the bucket again, in the next backward, after DDP has copied it; DDP only reads
    it."""
    t = _bucket_tensor(bucket)
    idx = _bucket_index(bucket)
    if not t.is_contiguous():
        raise ValueError("tally: DDP bucket buffer is not contiguous")
    w, dt, finish = _wire(t, True, state.agent)
    name = f"ddp.bucket{idx}.{t.numel()}.{_dtype_name(t)}" + ("" if w is t else f".{dt}")
    tid = state.tensor_id(name, w, priority=idx)
    fut = torch.futures.Future()

    view = w is t and not t.is_cuda
    res = t

    def done(err):
        nonlocal res
        if err is None:
            try:
                if view and (addr := state.agent.result_view(tid)) != t.data_ptr():
                    res = _over(addr, t)
                    state.views += 1
                finish(w)
            except Exception as e:
                err = TallyError(0, f"bucket {idx}: taking the result failed: {e}")
        if err is None:
            fut.set_result(res)
        else:
            state.error = err
            fut.set_exception(err)

    state.inflight.start(tid, w, done, result_view=view)

    def unwrap(f):
        # raising here marks the future DDP sees as failed with this text (set_exception
        # alone leaves the exception object as the value: "Unable to cast ... to Tensor")
        return f.value()
    return fut.then(unwrap)


_ddp_patch_lock = threading.Lock()


def DistributedDataParallel(module, state=None, root_rank=0, **ddp_kw):
    """torch's DistributedDataParallel with Tally doing the exchange: the module's state is
    broadcast from root_rank through Tally (any dtype: gloo cannot broadcast bf16, so DDP's
    own initial broadcast is skipped), broadcast_buffers defaults to False (buffers would go
    through gloo every forward) and the Tally hook is registered. Needs torch.distributed
    initialised (gloo) for DDP's own bookkeeping."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    state = state if state is not None else TallyState()
    broadcast_parameters(module.state_dict(), root_rank, agent=state.agent)
    ddp_kw.setdefault("broadcast_buffers", False)
    import torch.nn.parallel.distributed as ddp_mod
    # DDP's initial broadcast: _sync_module_states (torch >= 1.13) or
    # _distributed_broadcast_coalesced (older); the state is already everywhere
    patches = [(o, n, getattr(o, n)) for o, n in ((ddp_mod, "_sync_module_states"),
                                                   (DDP, "_distributed_broadcast_coalesced"))
               if hasattr(o, n)]
    with _ddp_patch_lock:
        for o, n, _ in patches:
            setattr(o, n, lambda *a, **k: None)
        try:
            ddp = DDP(module, **ddp_kw)
        finally:
            for o, n, f in patches:
                setattr(o, n, f)
    ddp.register_comm_hook(state, comm_hook)
    ddp.tally_state = state
    return ddp
