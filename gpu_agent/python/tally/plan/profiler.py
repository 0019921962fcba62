# SPDX-License-Identifier: Apache-2.0
"""PipeDream-style profiler: per layer of a chain (the children of an nn.Sequential, or the
module list given) its forward and backward time, output activation size and parameter size,
averaged over a number of minibatches; the planner reads the result.

Besides the layers' compute, it measures what tally.plan.runtime adds per minibatch (each by
timing the runtime's own functions, median of the timed repetitions after warm-up):
  layers[k].opt_s        runtime.update() on the layer's weights (gradient averaging and
                         SGD's step), less the step's fixed cost overhead.opt_call_s
  layers[k].stash_s      runtime.stash_weights() of the layer's weights (1F1B's weight stash)
  layers[k].grad_copy_s  runtime.pack() + unpack(): its gradients into the agent's flat
                         buffer and back
  overhead.opt_call_s    runtime.update() on one 1-element weight: a step's fixed cost
  overhead.microbatch_s  a stage's fixed work per microbatch around its layers: frame() and
                         unframe() of the activation and of its gradient, detach, the stash
                         and functional call of a weightless stage, one autograd launch
  overhead.message_s     one small message's software cost at both ends, as the runtime
                         pays it: a gloo send call plus the receive of a message sent 5 ms
                         before (this process and a child, two gloo ranks over loopback; or,
                         messages="group", pairs of ranks of torch.distributed's group)
The planner (planner.py's docstring) adds them to PipeDream's stage time.

With solo=True (every rank of torch.distributed's default group calling profile at once, as
on a cluster emulated on one host), each layer is also timed alone: the ranks take turns,
the others waiting in a barrier, as fwd_solo_s and bwd_solo_s, and the profile says
ranks_at_once (the group's size): the planner's shared-host term reads them."""
import datetime
import json
import statistics
import time

import torch

from . import runtime
from .planner import PROFILE_VERSION


def _layers(model, layers):
    if layers is not None:
        mods = list(layers)
    elif isinstance(model, torch.nn.Sequential):
        mods = list(model.children())
    else:
        raise TypeError("tally.plan.profile: model is not an nn.Sequential; pass layers=[...] "
                        "(the module boundaries, in order)")
    if not mods:
        raise ValueError("tally.plan.profile: no layers to profile")
    return mods


def _nbytes(t):
    return t.numel() * t.element_size()


def _median(f, reps, warmup):
    ts = []
    for k in range(warmup + reps):
        t0 = time.perf_counter()
        f()
        t1 = time.perf_counter()
        if k >= warmup:
            ts.append(t1 - t0)
    return statistics.median(ts)


def _copies(params):
    """Weights like params (same shapes), with zero gradients: the update, stash and copy
    run on these, so the model's own weights and gradients are left as they were."""
    out = []
    for p in params:
        c = p.detach().clone().requires_grad_(True)
        c.grad = torch.zeros_like(c)
        out.append(c)
    return out


def _update_s(ws, reps, warmup):
    opt = torch.optim.SGD(ws, lr=0.1)
    return _median(lambda: runtime.update(ws, opt, 2), reps, warmup)


def _layer_extra(mod, reps, warmup, call_s):
    ws = _copies([p for p in mod.parameters() if p.requires_grad])
    if not ws:
        return {"opt_s": 0.0, "stash_s": 0.0, "grad_copy_s": 0.0}
    names = [str(k) for k in range(len(ws))]
    flat = torch.zeros(sum(w.numel() for w in ws), dtype=torch.float32)

    def copy():
        runtime.pack(ws, flat)
        runtime.unpack(ws, flat)
    return {"opt_s": max(_update_s(ws, reps, warmup) - call_s, 0.0),
            "stash_s": _median(lambda: runtime.stash_weights(names, ws), reps, warmup),
            "grad_copy_s": _median(copy, reps, warmup)}


def _microbatch_s(x, reps, warmup):
    ident = torch.nn.Identity()
    x = x.detach().float()

    def one():
        runtime.unframe(runtime.frame(x))
        inp = x.detach().requires_grad_(True)
        out = runtime._functional_call(ident, runtime.stash_weights([], []), (inp,)) * 1.0
        runtime.unframe(runtime.frame(out))
        out.backward(x)
        time.perf_counter()
    return _median(one, reps, warmup)


_PEER = """
import datetime, sys, torch, torch.distributed as dist
o = dist.ProcessGroupGloo._Options()
o._devices = [dist.ProcessGroupGloo.create_device(hostname="127.0.0.1")]
o._timeout = datetime.timedelta(seconds=60)
pg = dist.ProcessGroupGloo(dist.FileStore(sys.argv[1], 2), 1, 2, o)
t = torch.zeros(1)
for k in range(int(sys.argv[2])):
    pg.send([t], 0, 2 * k).wait()
    pg.recv([t], 0, 2 * k + 1).wait()
"""


def _message_s(reps, warmup):
    """One 1-element message's software cost at both ends, as the runtime pays it between
    its processes: a gloo send call (not its completion) plus the receive of a message sent
    5 ms before; rank 0 here, rank 1 a child process, over loopback; medians."""
    import subprocess
    import sys
    import tempfile
    import torch.distributed as dist
    fix = "pass messages=False (overhead.message_s is then left out)"
    if not dist.is_available() or not hasattr(dist, "ProcessGroupGloo"):
        raise RuntimeError(f"tally.plan.profile: torch.distributed has no gloo; {fix}")
    n = warmup + reps
    with tempfile.TemporaryDirectory(prefix="tally-plan-msg.") as d:
        path = f"{d}/store"
        peer = subprocess.Popen([sys.executable, "-c", _PEER, path, str(n)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            o = dist.ProcessGroupGloo._Options()
            o._devices = [dist.ProcessGroupGloo.create_device(hostname="127.0.0.1")]
            o._timeout = datetime.timedelta(seconds=60)
            pg = dist.ProcessGroupGloo(dist.FileStore(path, 2), 0, 2, o)
            t = torch.zeros(1)
            calls, got = [], []
            for k in range(n):
                time.sleep(0.005)  # the peer's message is there: time the receive's own cost
                t0 = time.perf_counter()
                pg.recv([t], 1, 2 * k).wait()
                t1 = time.perf_counter()
                w = pg.send([t], 1, 2 * k + 1)
                calls.append(time.perf_counter() - t1)
                got.append(t1 - t0)
                w.wait()
            peer.wait(60)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            peer.kill()
            peer.wait()
            raise RuntimeError(f"tally.plan.profile: timing gloo messages with a child process "
                               f"over 127.0.0.1 failed ({e}; child: "
                               f"{peer.stderr.read().decode()[-500:]!r}); {fix}") from e
        finally:
            peer.stderr.close()
    return statistics.median(calls[warmup:]) + statistics.median(got[warmup:])


def _message_s_group(reps, warmup):
    """message_s between this rank and its partner in torch.distributed's default group
    (ranks 2k and 2k+1; every rank must call this): the same two calls as _message_s, both
    partners taking turns to receive; the last rank of an odd group times it with a child
    process instead."""
    import torch.distributed as dist
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError("tally.plan.profile: messages=\"group\" needs torch.distributed's "
                           "default group initialised (every rank calling profile); pass "
                           "messages=True to time them with a child process instead")
    me, n = dist.get_rank(), dist.get_world_size()
    if n < 2 or (n % 2 and me == n - 1):
        return _message_s(reps, warmup)
    peer = me ^ 1
    t = torch.zeros(1)
    calls, got = [], []
    for k in range(2 * (warmup + reps)):
        if k % 2 == me % 2:  # this rank receives
            time.sleep(0.005)
            t0 = time.perf_counter()
            dist.recv(t, peer, tag=2 * k)
            t1 = time.perf_counter()
            w = dist.isend(t, peer, tag=2 * k + 1)
            calls.append(time.perf_counter() - t1)
            got.append(t1 - t0)
            w.wait()
        else:
            dist.send(t, peer, tag=2 * k)
            dist.recv(t, peer, tag=2 * k + 1)
    return statistics.median(calls[warmup:]) + statistics.median(got[warmup:])


def overheads(mods, sample_batch, reps=30, warmup=3, messages=True):
    """The measured terms besides the layers' compute (the module docstring): (per-layer
    dicts, overhead dict)."""
    call_s = _update_s(_copies([torch.nn.Parameter(torch.zeros(1))]), reps, warmup)
    per = [_layer_extra(m, reps, warmup, call_s) for m in mods]
    ov = {"opt_call_s": call_s, "microbatch_s": _microbatch_s(sample_batch, reps, warmup)}
    if messages == "group":
        ov["message_s"] = _message_s_group(reps, warmup)
    elif messages:
        ov["message_s"] = _message_s(reps, warmup)
    return per, ov


def _time_layers(mods, sample_batch, minibatches, warmup, loss_fn, target):
    """(fwd, bwd, act): each layer's mean forward and backward seconds over `minibatches`
    runs after `warmup` (forward on its detached input, so its backward is timed alone;
    backward from the last layer to the first) and its output's bytes."""
    n = len(mods)
    fwd = [0.0] * n
    bwd = [0.0] * n
    act = [0] * n
    for it in range(warmup + minibatches):
        x = sample_batch
        ins, outs = [], []
        for k, mod in enumerate(mods):
            xi = x.detach().requires_grad_(x.is_floating_point())
            t0 = time.perf_counter()
            y = mod(xi)
            t1 = time.perf_counter()
            if it >= warmup:
                fwd[k] += t1 - t0
            act[k] = _nbytes(y)
            ins.append(xi)
            outs.append(y)
            x = y
        out = outs[-1]
        loss = loss_fn(out, target) if loss_fn is not None else out.sum()
        grad = None
        for k in range(n - 1, -1, -1):
            t0 = time.perf_counter()
            if k == n - 1:
                loss.backward()
            else:
                outs[k].backward(grad)
            t1 = time.perf_counter()
            if it >= warmup:
                bwd[k] += t1 - t0
            grad = ins[k].grad
        for mod in mods:
            mod.zero_grad(set_to_none=True)
    return [f / minibatches for f in fwd], [b / minibatches for b in bwd], act


def _time_solo(mods, sample_batch, minibatches, warmup, loss_fn, target):
    """_time_layers on this rank while the other ranks of the default group wait in a
    barrier: the ranks take turns, in rank order. (fwd, bwd, group size)."""
    import torch.distributed as dist
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError("tally.plan.profile: solo=True needs torch.distributed's default "
                           "group initialised (every rank calling profile); pass solo=False")
    me, n = dist.get_rank(), dist.get_world_size()
    got = None
    for r in range(n):
        dist.barrier()
        if r == me:
            got = _time_layers(mods, sample_batch, minibatches, warmup, loss_fn, target)[:2]
    dist.barrier()
    return got[0], got[1], n


def profile(model, sample_batch, minibatches=10, warmup=2, layers=None, loss_fn=None,
            target=None, path=None, messages=True, solo=False):
    """Profile of the chain over `minibatches` runs (after `warmup`): each layer runs forward
    on its input (detached, so its backward is timed alone), then backward from the last
    layer to the first. loss_fn(output, target) gives the last layer's gradient (default: the
    output's sum). Then the runtime's own costs per minibatch (overheads(), at least 30
    repetitions each). messages: True times gloo messages between this process and a child
    over loopback; "group": between pairs of ranks of torch.distributed's default group, the
    path the runtime's messages take (every rank must then call profile); False leaves the
    message time out. solo: also time each layer with the group's other ranks waiting (the
    module docstring). Returns the profile dict; writes it as JSON to path if given."""
    if minibatches < 1 or warmup < 0:
        raise ValueError("tally.plan.profile: minibatches >= 1, warmup >= 0")
    mods = _layers(model, layers)
    fwd, bwd, act = _time_layers(mods, sample_batch, minibatches, warmup, loss_fn, target)
    if solo:
        fsolo, bsolo, at_once = _time_solo(mods, sample_batch, minibatches, warmup, loss_fn,
                                           target)
    per, ov = overheads(mods, sample_batch, max(minibatches, 30), max(warmup, 3), messages)
    prof = {"version": PROFILE_VERSION, "minibatch": int(sample_batch.shape[0]),
            "minibatches": minibatches, "overhead": ov, "layers": []}
    if solo:
        prof["ranks_at_once"] = at_once
    for k, mod in enumerate(mods):
        prof["layers"].append(dict({
            "name": f"{k}:{type(mod).__name__}",
            "fwd_s": fwd[k], "bwd_s": bwd[k],
            "act_bytes": act[k],
            "param_bytes": sum(_nbytes(p) for p in mod.parameters() if p.requires_grad)},
            **per[k]))
        if solo:
            prof["layers"][-1].update(fwd_solo_s=fsolo[k], bwd_solo_s=bsolo[k])
    if path is not None:
        with open(path, "w") as f:
            json.dump(prof, f, indent=1)
    return prof
