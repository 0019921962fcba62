# SPDX-License-Identifier: Apache-2.0
"""PipeDream-style profiler: per layer of a chain (the children of an nn.Sequential, or the
module list given) its forward and backward time, output activation size and parameter size,
averaged over a number of minibatches; the planner reads the result.

The layers run as tally.plan.runtime runs a stage: forward through _functional_call on a
weight stash, the last layer's forward with the loss. Besides the layers' compute, it
measures what the runtime adds per minibatch by timing the runtime's own functions: the
first two in the layers' own pass, in the order a stage runs them (mean per minibatch), the
rest alone (median of the timed repetitions after warm-up):
  layers[k].opt_s        runtime.update() on the layer's weights (gradient averaging and
                         SGD's step), less the step's fixed cost overhead.opt_call_s
  layers[k].stash_s      runtime.stash_weights() of the layer's weights (1F1B's weight stash)
  layers[k].grad_copy_s  runtime.pack() + unpack(): its gradients into the stage's flat
                         buffer and back (where the stage's replicas aggregate)
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


def _grad_copy_s(mod, reps, warmup):
    """runtime.pack() + unpack() of the layer's gradients (0 without weights)."""
    ws = _copies([p for p in mod.parameters() if p.requires_grad])
    if not ws:
        return 0.0
    flat = torch.zeros(sum(w.numel() for w in ws), dtype=torch.float32)

    def copy():
        runtime.pack(ws, flat)
        runtime.unpack(ws, flat)
    return _median(copy, reps, warmup)


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
    """The measured terms besides the layers' compute that are not timed in the layers' own
    pass (the module docstring): (per-layer grad_copy_s, overhead dict)."""
    call_s = _update_s(_copies([torch.nn.Parameter(torch.zeros(1))]), reps, warmup)
    per = [_grad_copy_s(m, reps, warmup) for m in mods]
    ov = {"opt_call_s": call_s, "microbatch_s": _microbatch_s(sample_batch, reps, warmup)}
    if messages == "group":
        ov["message_s"] = _message_s_group(reps, warmup)
    elif messages:
        ov["message_s"] = _message_s(reps, warmup)
    return per, ov


def _weights(mod):
    """(names, copies, SGD over the copies) of a layer's trainable weights: the timed steps
    run on copies, so the model's own weights and gradients are left as they were."""
    named = [(n, p) for n, p in mod.named_parameters() if p.requires_grad]
    ws = _copies([p for _, p in named])
    return [n for n, _ in named], ws, (torch.optim.SGD(ws, lr=1e-3) if ws else None)


def _time_layers(mods, sample_batch, minibatches, warmup, loss_fn, target):
    """{'fwd', 'bwd', 'act', 'stash', 'update'}: per layer, the mean seconds of each step the
    runtime runs on it, timed in the order tally.plan.runtime runs them for a minibatch
    (each layer as a stage of its own), over `minibatches` runs after `warmup`, and its
    output's bytes. Forward, first layer to last: runtime.stash_weights() ('stash'), the
    forward through the stash on the layer's detached input ('fwd'; the last layer's includes
    the loss and reading it, as the last stage's forward does). Then last layer to first: its
    backward ('bwd'), its gradients handed to its weights and runtime.update() ('update').
    Timed in this order, each step finds the caches as a stage leaves them: a stash or step
    timed alone in a loop runs from warm caches (vgg's 2.1 MB layer: 0.05 ms stash and 0.11
    ms step so, 0.30 and 0.26 ms in a 1F1B run)."""
    n = len(mods)
    sums = {f: [0.0] * n for f in ("fwd", "bwd", "stash", "update")}
    act = [0] * n
    wts = [_weights(mod) for mod in mods]
    pc = time.perf_counter
    for it in range(warmup + minibatches):
        keep = it >= warmup
        x = sample_batch
        ins, outs, stashes = [], [], []
        for k, mod in enumerate(mods):
            xi = x.detach().requires_grad_(x.is_floating_point())
            t0 = pc()
            w = runtime.stash_weights(wts[k][0], wts[k][1])
            t1 = pc()
            y = runtime._functional_call(mod, w, (xi,))
            if k == n - 1:
                out = loss_fn(y, target) if loss_fn is not None else y.sum()
                float(out)
            t2 = pc()
            if keep:
                sums["stash"][k] += t1 - t0
                sums["fwd"][k] += t2 - t1
            act[k] = _nbytes(y)
            ins.append(xi)
            outs.append(y)
            stashes.append(w)
            x = y
        grad = None
        for k in range(n - 1, -1, -1):
            names, ws, opt = wts[k]
            t0 = pc()
            if k == n - 1:
                out.backward()
            else:
                outs[k].backward(grad)
            t1 = pc()
            for name, p in zip(names, ws):
                g = stashes[k][name].grad
                p.grad = g if g is not None else torch.zeros_like(p)
            if ws:
                runtime.update(ws, opt, 1)
            t2 = pc()
            if keep:
                sums["bwd"][k] += t1 - t0
                sums["update"][k] += t2 - t1
            grad = ins[k].grad
    out = {f: [v / minibatches for v in sums[f]] for f in sums}
    out["act"] = act
    return out


def _time_solo(mods, sample_batch, minibatches, warmup, loss_fn, target):
    """_time_layers on this rank while the other ranks of the default group wait in a
    barrier: the ranks take turns, in rank order. (its result, group size)."""
    import torch.distributed as dist
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError("tally.plan.profile: solo=True needs torch.distributed's default "
                           "group initialised (every rank calling profile); pass solo=False")
    me, n = dist.get_rank(), dist.get_world_size()
    got = None
    for r in range(n):
        dist.barrier()
        if r == me:
            got = _time_layers(mods, sample_batch, minibatches, warmup, loss_fn, target)
    dist.barrier()
    return got, n


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
    t = _time_layers(mods, sample_batch, minibatches, warmup, loss_fn, target)
    if solo:
        alone, at_once = _time_solo(mods, sample_batch, minibatches, warmup, loss_fn, target)
    copy_s, ov = overheads(mods, sample_batch, max(minibatches, 30), max(warmup, 3), messages)
    # the stash and the step as the runtime runs them, from the pass that had the host as a
    # stage does (alone where timed alone: the planner scales compute, not these)
    steps = alone if solo else t
    prof = {"version": PROFILE_VERSION, "minibatch": int(sample_batch.shape[0]),
            "minibatches": minibatches, "overhead": ov, "layers": []}
    if solo:
        prof["ranks_at_once"] = at_once
    for k, mod in enumerate(mods):
        weighted = any(p.requires_grad for p in mod.parameters())
        prof["layers"].append(dict({
            "name": f"{k}:{type(mod).__name__}",
            "fwd_s": t["fwd"][k], "bwd_s": t["bwd"][k],
            "act_bytes": t["act"][k],
            "param_bytes": sum(_nbytes(p) for p in mod.parameters() if p.requires_grad),
            "opt_s": max(steps["update"][k] - ov["opt_call_s"], 0.0) if weighted else 0.0,
            "stash_s": steps["stash"][k] if weighted else 0.0,
            "grad_copy_s": copy_s[k]}))
        if solo:
            prof["layers"][-1].update(fwd_solo_s=alone["fwd"][k], bwd_solo_s=alone["bwd"][k])
    if path is not None:
        with open(path, "w") as f:
            json.dump(prof, f, indent=1)
    return prof
