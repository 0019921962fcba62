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
import contextlib
import ctypes
import io
import itertools
import threading

import torch
import torch.distributed as dist

from . import _lib, metrics
from .agent import TallyError, _error, configured
from .agent import init as _agent_init

_DT = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.int32: "i32"}
Average, Sum = "Average", "Sum"


def _dtype_name(t):
    try:
        return _DT[t.dtype]
    except KeyError:
        raise TypeError(f"tally: dtype {t.dtype} is not supported (f32, f16, bf16, i32)") from None


def _device_args(t):
    if t.is_cuda:
        return _lib.DEV_CUDA, torch.cuda.current_stream(t.device).cuda_stream
    return _lib.DEV_CPU, None


def _wire(t, average, agent=None):
    """The buffer that goes to the appliance for `t`, and how the result comes back:
    f32 / i32 as they are; f16 / bf16 summed as they are (the appliance rounds its f32 sum
    once), averaged as they are where the appliance averages (agent.appliance_averages: it
    scales its f32 sum before the one rounding, 4 x 40000 in f16 averages to 40000, not inf),
    else through an f32 copy (the same single rounding, twice the bytes); other dtypes in
    f32 (floats) or i32 (integers, bool). Returns (wire tensor, wire dtype name, finish(wire)
    writing the result into t)."""
    native = t.dtype in (torch.float16, torch.bfloat16) and (
        not average or (agent is not None and agent.appliance_averages))
    if t.dtype in (torch.float32, torch.int32) or native:
        w = t if t.is_contiguous() else t.contiguous()
        return w, _DT[t.dtype], (lambda w: None) if w is t else (lambda w: t.copy_(w))
    if t.is_floating_point():
        w = t.detach().to(torch.float32).contiguous()
        return w, "f32", lambda w: t.copy_(w)
    if t.dtype == torch.int64 and t.numel() and (t.abs().max().item() > 2 ** 31 - 1):
        raise TypeError("tally: int64 values beyond i32 cannot be summed (the appliance sums i32)")
    w = t.detach().to(torch.int32).contiguous()
    return w, "i32", lambda w: t.copy_(w.to(t.dtype))


class _Inflight:
    """Completions from the agent's progress thread, matched by a cookie chosen before the
    push_pull starts (so a fast completion cannot race the bookkeeping). Nothing waits for
    ever: the agent fails a push_pull past its deadline itself (op_timeout_ms without
    progress), and the callback gets a TallyTimeoutError saying what it waited for."""

    def __init__(self, agent):
        self.agent = agent
        self.lock = threading.Lock()
        self.pending = {}
        self.ids = itertools.count(1)
        self.cb = _lib.AgentCb(self._done)  # kept alive as long as this object
        metrics.track(agent)

    def start(self, tid, t, on_done, result_view=False):
        cookie = next(self.ids)
        with self.lock:
            self.pending[cookie] = (on_done, metrics.now())
        dev, stream = _device_args(t)
        try:
            return self.agent.push_pull(tid, t.data_ptr(), t.numel() * t.element_size(), dev, stream,
                                        callback=self.cb, cb_arg=cookie, result_view=result_view)
        except Exception:
            with self.lock:
                self.pending.pop(cookie, None)
            raise

    def _done(self, arg, handle, status):
        with self.lock:
            fn, t0 = self.pending.pop(arg, (None, 0.0))
        if fn is not None:
            metrics.observe_push_pull(metrics.now() - t0, ok=status == 0)
            err = None if status == 0 else _error(status, self.agent.error())
            try:
                fn(err)
            except Exception as e:  # never let an exception cross into C
                print(f"tally: completion callback failed: {e!r}")


_inflights = {}


def _inflight(agent):
    f = _inflights.get(id(agent))
    if f is None or f.agent is not agent:
        f = _inflights[id(agent)] = _Inflight(agent)
    return f


def _agent(agent):
    a = agent if agent is not None else _agent_init()
    a.set_order("submit")
    return a


# ---- Horovod's process functions: `import horovod.torch as hvd` -> `import tally.torch as hvd`

def init(**agent_kw):
    """hvd.init(): the process-wide agent, from the environment (TALLY_APPLIANCES, torchrun's
    RANK / WORLD_SIZE / LOCAL_RANK ...), in submission order."""
    return _agent(_agent_init(**agent_kw))


def rank():
    return _agent_init().rank


def size():
    return _agent_init().world_size


def local_rank():
    return _agent_init().local_rank


def local_size():
    return _agent_init().local_size


def shutdown():
    from .agent import shutdown as _shutdown
    _inflights.clear()
    _shutdown()


class Handle:
    """An allreduce in flight (allreduce_async): synchronize(handle) or handle.wait() for the
    result, poll(handle) to ask."""

    def __init__(self, out):
        self.out = out
        self.ev = threading.Event()
        self.err = None
        self.finish = None

    def _done(self, err):
        self.err = err
        self.ev.set()

    def poll(self):
        return self.ev.is_set()

    def wait(self):
        # the agent fails a stalled push_pull after op_timeout_ms without progress: the
        # event is always set in the end
        while not self.ev.wait(1.0):
            pass
        if self.err is not None:
            raise self.err
        if self.finish is not None:
            self.finish()
            self.finish = None
        return self.out


def _start(a, name, t, average, prio=0):
    """Start an in-place sum/average of t (any dtype); the Handle."""
    h = Handle(t)
    w, dt, finish = _wire(t, average, a)
    integer = not t.is_floating_point()
    tid = a.declare(f"{name}.{w.numel()}.{dt}", w.numel() * w.element_size(), dt, prio,
                    average=bool(average) and not integer, ordered=False)

    def fin():
        if average and integer:
            w.copy_(torch.div(w, a.world_size, rounding_mode="floor"))
        finish(w)
    h.finish = fin
    _inflight(a).start(tid, w, h._done)
    return h


_noname = itertools.count()


def allreduce_async_(tensor, name=None, op=Average, agent=None):
    """Start averaging (op=Average) or summing (op=Sum) `tensor` in place across every worker;
    returns a Handle for synchronize()/poll(). Every rank makes the same calls in the same
    order. Name a tensor that is reduced again and again (an unnamed call declares a new
    key each time)."""
    if op not in (Average, Sum):
        raise ValueError("tally.torch.allreduce: op must be tally.torch.Average or tally.torch.Sum")
    a = _agent(agent)
    name = f"allreduce.{name}" if name is not None else f"allreduce.noname{next(_noname)}"
    with torch.no_grad():
        return _start(a, name, tensor, op == Average)


def allreduce_async(tensor, name=None, op=Average, agent=None):
    """As allreduce_async_, on a copy: the input is left as it is."""
    return allreduce_async_(tensor.detach().clone(), name, op, agent)


def synchronize(handle):
    """Wait for an allreduce_async; its result (raises the TallyError subclass on failure)."""
    return handle.wait()


def poll(handle):
    """True when the allreduce_async is done."""
    return handle.poll()


def allreduce_(tensor, name=None, op=Average, agent=None):
    """Average (op=Average) or sum (op=Sum) `tensor` in place across every worker; returns it.
    Unnamed calls reuse one key per size and dtype (the call waits, so none is in flight)."""
    if name is None:
        name = f"sync.{tuple(tensor.shape)}.{tensor.dtype}".replace(" ", "")
    return synchronize(allreduce_async_(tensor, name, op, agent))


def allreduce(tensor, name=None, op=Average, agent=None):
    """Horovod's hvd.allreduce: the average (or sum) of `tensor` over every worker, as a new
    tensor (f16/bf16 averaged in f32 and rounded once)."""
    return allreduce_(tensor.detach().clone(), name, op, agent)


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


# ---- Horovod / BytePS style ----

from .compression import Compression, codec_name  # noqa: E402  hvd.Compression's shape


class _DistributedOptimizer(torch.optim.Optimizer):
    """Horovod's DistributedOptimizer on Tally. Every rank pushes the same keys in the same
    order: the gradients' tensors are declared at construction (parameter order), and the
    push_pulls are submitted in one fixed order (reverse parameter order, the usual order
    in which backward produces them): a gradient that is ready early waits for those before
    it. A parameter without a gradient on this rank (unused here, or zero_grad(set_to_none))
    pushes zeros at synchronize() and gets the average like the others (as Horovod does)."""

    def _tally_setup(self, named_parameters, compression, backward_passes_per_step, op, agent):
        codec = codec_name(compression)  # the agent's worker-stage codec (f32 gradients)
        if op not in (Average, Sum):
            raise ValueError("tally.torch.DistributedOptimizer: op must be Average or Sum")
        self._tally_agent = _agent(agent)
        self._tally_inflight = _inflight(self._tally_agent)
        self._tally_average = op == Average
        self._tally_bpps = int(backward_passes_per_step)
        if self._tally_bpps < 1:
            raise ValueError("tally.torch.DistributedOptimizer: backward_passes_per_step must be >= 1")
        all_params = [p for g in self.param_groups for p in g["params"]]
        if named_parameters is not None:
            named = list(named_parameters)
            names = [n for n, _ in named]
            if len(set(names)) != len(names):
                raise ValueError("tally.torch.DistributedOptimizer: parameter names are not unique")
            byid = {id(p): n for n, p in named}
            missing = [i for i, p in enumerate(all_params) if id(p) not in byid]
            if missing:
                raise ValueError(f"tally.torch.DistributedOptimizer: {len(missing)} optimizer parameter(s) "
                                 "are not in named_parameters")
        else:
            byid = {id(p): f"param.{i}" for i, p in enumerate(all_params)}
        seen = set()
        order = []
        for p in all_params:
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                order.append(p)
        order.reverse()  # backward produces the last layers' gradients first
        self._tally_order = order
        self._tally_names = {id(p): byid[id(p)] for p in order}
        self._tally_ids = {}
        for i, p in enumerate(order):  # declared up front, the same keys on every rank
            w, dt, _ = _wire(torch.empty(0, dtype=p.dtype), self._tally_average, self._tally_agent)
            esz = torch.empty(0, dtype={"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
                                        "i32": torch.int32}[dt]).element_size()
            self._tally_ids[id(p)] = self._tally_agent.declare(
                f"grad.{self._tally_names[id(p)]}.{p.numel()}.{dt}", p.numel() * esz, dt, i,
                average=self._tally_average, ordered=False)
            if codec and dt == "f32":
                self._tally_agent.set_codec(self._tally_ids[id(p)], codec, 0)
        self._tally_lock = threading.RLock()
        self._tally_counts = {}
        self._tally_ready = set()
        self._tally_next = 0
        self._tally_handles = {}
        self._tally_synced = False
        self._tally_skip = False
        self._tally_hooks = []
        for p in order:
            self._tally_register(p)

    def _tally_register(self, p):
        tmp = p.expand_as(p)
        acc = tmp.grad_fn.next_functions[0][0]
        acc.register_hook(self._tally_make_hook(p))
        self._tally_hooks.append(acc)  # keep the accumulator alive

    def _tally_make_hook(self, p):
        def hook(*_):
            with self._tally_lock:
                n = self._tally_counts.get(id(p), 0) + 1
                self._tally_counts[id(p)] = n
                if n < self._tally_bpps or p.grad is None:
                    return
                self._tally_ready.add(id(p))
                self._tally_submit_ready(force=False)
        return hook

    def _tally_submit_ready(self, force):
        """Submit the gradients in the fixed order while they are ready (all of them when
        force: synchronize)."""
        with self._tally_lock:
            while self._tally_next < len(self._tally_order):
                p = self._tally_order[self._tally_next]
                if not force and id(p) not in self._tally_ready:
                    return
                self._tally_next += 1
                self._tally_start(p)

    def _tally_start(self, p):
        if p.grad is None:
            p.grad = torch.zeros_like(p)  # unused on this rank: zeros, the same keys everywhere
        elif not p.grad.is_contiguous():
            p.grad = p.grad.contiguous()
        g = p.grad
        w, _, finish = _wire(g, self._tally_average, self._tally_agent)
        h = Handle(g)
        h.finish = lambda: finish(w)
        self._tally_handles[id(p)] = h
        self._tally_inflight.start(self._tally_ids[id(p)], w, h._done)

    def synchronize(self):
        """Wait for every gradient's push_pull (those backward has not started are started
        now, in the fixed order; zeros for a parameter without a gradient). After it, step()
        inside `with optimizer.skip_synchronize():` updates without pushing again."""
        with torch.no_grad():
            self._tally_submit_ready(force=True)
            err = None
            for p in self._tally_order:
                h = self._tally_handles.get(id(p))
                if h is None:
                    continue
                try:
                    h.wait()
                except TallyError as e:
                    err = err or e
            with self._tally_lock:
                self._tally_handles = {}
                self._tally_ready = set()
                self._tally_counts = {}
                self._tally_next = 0
        self._tally_synced = True
        if err is not None:
            raise err

    @contextlib.contextmanager
    def skip_synchronize(self):
        """step() inside this block does not synchronize (Horovod): for a synchronize() done
        by hand before, e.g. to clip the averaged gradients."""
        self._tally_skip = True
        try:
            yield
        finally:
            self._tally_skip = False

    def step(self, closure=None):
        if not self._tally_skip:
            self.synchronize()
        elif not self._tally_synced:
            raise RuntimeError("tally.torch.DistributedOptimizer: step() in skip_synchronize() without "
                               "synchronize() before it: the gradients were not averaged")
        self._tally_synced = False
        return super(self.__class__, self).step(closure)

    def zero_grad(self, *args, **kw):
        if self._tally_handles:
            raise RuntimeError("tally.torch.DistributedOptimizer: zero_grad() while gradients are being "
                               "averaged: call step() or synchronize() first")
        return super(self.__class__, self).zero_grad(*args, **kw)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, agent=None):
    """Wrap a torch optimizer (Horovod's hvd.DistributedOptimizer / BytePS's): gradients are
    averaged (op=Average) or summed (op=Sum) through Tally as backward produces them, every
    backward_passes_per_step-th backward (the passes in between accumulate locally); step()
    waits for them, then updates. synchronize() and skip_synchronize() as in Horovod."""
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               {k: v for k, v in _DistributedOptimizer.__dict__.items() if not k.startswith("__")})
    opt = cls.__new__(cls)
    opt.__dict__.update(optimizer.__dict__)
    opt._tally_setup(named_parameters, compression, backward_passes_per_step, op, agent)
    return opt


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
