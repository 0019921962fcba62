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
"""
import itertools
import threading

import torch
import torch.distributed as dist

from . import _lib, metrics
from .agent import TallyError
from .agent import init as _agent_init

_DT = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.int32: "i32"}


def _dtype_name(t):
    try:
        return _DT[t.dtype]
    except KeyError:
        raise TypeError(f"tally: dtype {t.dtype} is not supported (f32, f16, bf16, i32)") from None


def _device_args(t):
    if t.is_cuda:
        return _lib.DEV_CUDA, torch.cuda.current_stream(t.device).cuda_stream
    return _lib.DEV_CPU, None


class _Inflight:
    """Completions from the agent's progress thread, matched by a cookie chosen before the
    push_pull starts (so a fast completion cannot race the bookkeeping)."""

    def __init__(self, agent):
        self.agent = agent
        self.lock = threading.Lock()
        self.pending = {}
        self.ids = itertools.count(1)
        self.cb = _lib.AgentCb(self._done)  # kept alive as long as this object
        metrics.track(agent)

    def start(self, tid, t, on_done):
        cookie = next(self.ids)
        with self.lock:
            self.pending[cookie] = (on_done, metrics.now())
        dev, stream = _device_args(t)
        try:
            return self.agent.push_pull(tid, t.data_ptr(), t.numel() * t.element_size(), dev, stream,
                                        callback=self.cb, cb_arg=cookie)
        except Exception:
            with self.lock:
                self.pending.pop(cookie, None)
            raise

    def _done(self, arg, handle, status):
        with self.lock:
            fn, t0 = self.pending.pop(arg, (None, 0.0))
        if fn is not None:
            metrics.observe_push_pull(metrics.now() - t0, ok=status == 0)
            err = None if status == 0 else TallyError(status, self.agent.error())
            try:
                fn(err)
            except Exception as e:  # never let an exception cross into C
                print(f"tally: completion callback failed: {e!r}")


class TallyState:
    """State of the DDP communication hook: the agent (created from the environment unless
    given) and the ids of the buckets declared so far.

    The agent starts partitions in submission order (tally_agent_set_order): DDP launches
    its buckets in index order on every rank, so that order is the same everywhere whatever
    the timing, including the iteration after DDP's bucket rebuild, when new buckets are
    declared and some old ones are never pushed again."""

    def __init__(self, agent=None, **agent_kw):
        self.agent = agent if agent is not None else _agent_init(**agent_kw)
        self.agent.set_order("submit")
        self.inflight = _Inflight(self.agent)
        self.tensors = {}

    def tensor_id(self, name, t, priority):
        tid = self.tensors.get(name)
        if tid is None:
            tid = self.agent.declare(name, t.numel() * t.element_size(), _dtype_name(t), priority,
                                     average=True)
            self.tensors[name] = tid
        return tid


def _bucket_tensor(bucket):
    return bucket.buffer() if hasattr(bucket, "buffer") else bucket.get_tensor()


def _bucket_index(bucket):
    return bucket.index() if hasattr(bucket, "index") else bucket.get_index()


def comm_hook(state, bucket):
    """DDP communication hook: averages the bucket across all workers through Tally.

    Buckets are named by index, size and dtype: DDP's bucket rebuild after the first
    iteration declares new tensors (keys) instead of reusing ones of another size; the
    agent's submission order (TallyState) needs nothing more."""
    t = _bucket_tensor(bucket)
    idx = _bucket_index(bucket)
    if not t.is_contiguous():
        raise ValueError("tally: DDP bucket buffer is not contiguous")
    name = f"ddp.bucket{idx}.{t.numel()}.{_dtype_name(t)}"
    tid = state.tensor_id(name, t, priority=idx)
    fut = torch.futures.Future()

    def done(err):
        if err is None:
            fut.set_result(t)
        else:
            fut.set_exception(err)

    state.inflight.start(tid, t, done)
    return fut


# ---- Horovod / BytePS style ----

class Compression:
    """Horovod/BytePS compression names. Only `none` is offered (1-bit compression lives in
    the appliance protocol, not in this package yet)."""
    none = None
    fp16 = "fp16"


Average, Sum = "Average", "Sum"


class _DistributedOptimizer(torch.optim.Optimizer):
    def _tally_setup(self, named_parameters, compression, backward_passes_per_step, op, agent):
        if compression not in (None, Compression.none):
            raise ValueError("tally.torch.DistributedOptimizer: only Compression.none is supported")
        if op not in (Average, Sum):
            raise ValueError("tally.torch.DistributedOptimizer: op must be Average or Sum")
        self._tally_agent = agent if agent is not None else _agent_init()
        self._tally_inflight = _Inflight(self._tally_agent)
        self._tally_average = op == Average
        self._tally_bpps = int(backward_passes_per_step)
        if named_parameters is not None:
            named = list(named_parameters)
        else:
            named = [(f"param.{i}", p) for i, p in
                     enumerate(p for g in self.param_groups for p in g["params"])]
        names = [n for n, _ in named]
        if len(set(names)) != len(names):
            raise ValueError("tally.torch.DistributedOptimizer: parameter names are not unique")
        self._tally_names = {p: n for n, p in named}
        self._tally_prio = {p: i for i, (_, p) in enumerate(named)}  # layer order
        self._tally_ids = {}
        self._tally_counts = {}
        self._tally_handles = {}
        self._tally_errors = []
        self._tally_cond = threading.Condition()
        self._tally_hooks = []
        for group in self.param_groups:
            for p in group["params"]:
                if p.requires_grad:
                    self._tally_register(p)

    def _tally_register(self, p):
        tmp = p.expand_as(p)
        acc = tmp.grad_fn.next_functions[0][0]
        acc.register_hook(self._tally_make_hook(p))
        self._tally_hooks.append(acc)  # keep the accumulator alive

    def _tally_make_hook(self, p):
        def hook(*_):
            n = self._tally_counts.get(p, 0) + 1
            self._tally_counts[p] = n
            if n < self._tally_bpps or p.grad is None:
                return
            self._tally_counts[p] = 0
            self._tally_start(p)
        return hook

    def _tally_start(self, p):
        g = p.grad
        if not g.is_contiguous():
            p.grad = g = g.contiguous()
        name = self._tally_names.get(p, f"param.{id(p)}")
        tid = self._tally_ids.get(p)
        if tid is None:
            tid = self._tally_agent.declare(f"grad.{name}", g.numel() * g.element_size(), _dtype_name(g),
                                            self._tally_prio.get(p, 0), average=self._tally_average)
            self._tally_ids[p] = tid
        self._tally_seen.add(p)
        with self._tally_cond:
            self._tally_handles[p] = True

        def done(err):
            with self._tally_cond:
                self._tally_handles.pop(p, None)
                if err is not None:
                    self._tally_errors.append(err)
                self._tally_cond.notify_all()
        self._tally_inflight.start(tid, g, done)

    def synchronize(self):
        """Wait for every gradient push_pull started by backward."""
        # parameters whose hook did not fire this step (unused, or frozen by the graph) but
        # have a gradient are pushed now, so every worker sums the same keys
        for group in self.param_groups:
            for p in group["params"]:
                if p.requires_grad and p.grad is not None and p not in self._tally_seen:
                    self._tally_start(p)
        self._tally_seen = set()
        with self._tally_cond:
            while self._tally_handles:
                self._tally_cond.wait()
            errs, self._tally_errors = self._tally_errors, []
        if errs:
            raise errs[0]

    def step(self, closure=None):
        self.synchronize()
        return super(self.__class__, self).step(closure)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, agent=None):
    """Wrap a torch optimizer: gradients are averaged (op=Average) or summed through Tally as
    backward produces them, in layer order; step() waits for them, then updates."""
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               {k: v for k, v in _DistributedOptimizer.__dict__.items() if not k.startswith("__")})
    opt = cls.__new__(cls)
    opt.__dict__.update(optimizer.__dict__)
    opt._tally_seen = set()
    opt._tally_setup(named_parameters, compression, backward_passes_per_step, op, agent)
    return opt


def broadcast_parameters(params, root_rank=0, agent=None):
    """Copy `params` (a state_dict, or (name, tensor) pairs) from root_rank to every worker.
    Uses torch.distributed when it is initialised (gloo: setup traffic), else Tally: a sum in
    which every rank but the root contributes zeros."""
    items = sorted(params.items()) if isinstance(params, dict) else list(params)
    if dist.is_available() and dist.is_initialized():
        with torch.no_grad():
            for _, t in items:
                dist.broadcast(t, root_rank)
        return
    a = agent if agent is not None else _agent_init()
    inflight = _Inflight(a)
    with torch.no_grad():
        for name, t in items:
            if not torch.is_tensor(t) or t.numel() == 0:
                continue
            if t.dtype in (torch.int64, torch.bool, torch.uint8):
                raise TypeError(f"tally.broadcast_parameters: {name}: dtype {t.dtype} needs torch.distributed")
            buf = t.detach().contiguous().clone()
            if a.rank != root_rank:
                buf.zero_()
            tid = a.declare(f"bcast.{name}.{buf.numel()}", buf.numel() * buf.element_size(), _dtype_name(buf),
                            0, average=False, ordered=False)
            ev = threading.Event()
            res = []
            inflight.start(tid, buf, lambda err: (res.append(err), ev.set()))
            ev.wait()
            if res[0] is not None:
                raise res[0]
            t.copy_(buf)
