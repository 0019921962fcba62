# SPDX-License-Identifier: Apache-2.0
"""push_pulls of torch tensors in flight, shared by the DDP hook (tally.ddp), the Horovod-style
API (tally.horovod) and broadcasts (tally.broadcast): the wire dtype of a tensor, the agent's
completions matched to their callers, and the Handle an asynchronous caller waits on."""
import itertools
import threading

import torch

from . import _lib, metrics
from .agent import _error
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
    if t.dtype == torch.float64:
        # the appliance sums f32: an f64 sum through it would lose precision silently
        raise TypeError("tally: float64 tensors cannot be summed exactly (the appliance sums float32): convert "
                        "to float32 first (t.float(), model.float()), or sum them with torch.distributed.all_reduce, "
                        "which sums float64")
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
        self.failed, self.explained, self.stalls = set(), None, 0
        self.cb = _lib.AgentCb(self._done)  # kept alive as long as this object
        metrics.track(agent)

    def start(self, tid, t, on_done, result_view=False):
        cookie = next(self.ids)
        h = getattr(on_done, "__self__", None)
        if isinstance(h, Handle):
            h.explain = self.explain
        with self.lock:
            self.pending[cookie] = (on_done, metrics.now(), tid)
        dev, stream = _device_args(t)
        try:
            return self.agent.push_pull(tid, t.data_ptr(), t.numel() * t.element_size(), dev, stream,
                                        callback=self.cb, cb_arg=cookie, result_view=result_view)
        except Exception:
            with self.lock:
                self.pending.pop(cookie, None)
            raise

    def explain(self, err):
        """err told across the ranks (tally.disagree): once per stall, the same answer for
        every Handle that failed in it."""
        from . import disagree
        with self.lock:
            if self.explained is not None:
                return self.explained
            mine = {self.agent.names.get(t, f"tensor {t}") for t in self.failed}
            mine |= {self.agent.names.get(p[2], f"tensor {p[2]}") for p in self.pending.values()}
            self.stalls += 1
            seq = self.stalls
        out = disagree.explain(self.agent, err, mine, seq)
        with self.lock:
            self.explained = out
        return out

    def _done(self, arg, handle, status):
        with self.lock:
            fn, t0, tid = self.pending.pop(arg, (None, 0.0, None))
            if status == 0:
                self.failed, self.explained = set(), None
            elif tid is not None:
                self.failed.add(tid)
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


class Handle:
    """An allreduce in flight (allreduce_async): synchronize(handle) or handle.wait() for the
    result, poll(handle) to ask."""

    def __init__(self, out):
        self.out = out
        self.ev = threading.Event()
        self.err = None
        self.finish = None
        self.explain = None

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
            if self.explain is not None:
                self.err, self.explain = self.explain(self.err), None
            raise self.err
        if self.finish is not None:
            self.finish()
            self.finish = None
        return self.out
