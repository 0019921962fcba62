# SPDX-License-Identifier: Apache-2.0
"""Horovod's API by its names on Tally (`import horovod.torch as hvd` -> `import tally.torch as
hvd`): init / rank / size, allreduce (sync and async, with Handle, synchronize, poll),
DistributedOptimizer; the broadcasts are tally.broadcast's."""
import contextlib
import itertools
import threading

import torch

from .agent import TallyError
from .agent import init as _agent_init
from .compression import Compression, codec_name  # noqa: F401  hvd.Compression's shape
from .inflight import Handle, _agent, _inflight, _inflights, _wire

Average, Sum = "Average", "Sum"


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


# ---- Horovod / BytePS style ----


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
        self._tally_error = None
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
                if n > self._tally_bpps:
                    # the gradient was submitted at the bpps-th pass and is being summed:
                    # this backward changed it under the push, so ranks would diverge
                    self._tally_error = RuntimeError(
                        f"tally.torch.DistributedOptimizer: gradients were computed {n} times before step() "
                        f"with backward_passes_per_step={self._tally_bpps} (parameter "
                        f"{self._tally_names[id(p)]!r}): call step() after every {self._tally_bpps} backward "
                        f"pass(es), or set DistributedOptimizer(..., backward_passes_per_step={n}) to accumulate "
                        "gradients locally (as Horovod asserts)")
                    raise self._tally_error
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
        if self._tally_error is not None:
            err, self._tally_error = self._tally_error, None
            with torch.no_grad():  # drain what is in flight, then refuse this step
                try:
                    self.synchronize()
                except TallyError:
                    pass
            raise err
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
