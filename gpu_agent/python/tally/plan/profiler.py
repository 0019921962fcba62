# SPDX-License-Identifier: Apache-2.0
"""PipeDream-style profiler: per layer of a chain (the children of an nn.Sequential, or the
module list given) its forward and backward time, output activation size and parameter size,
averaged over a number of minibatches; the planner reads the result."""
import json
import time

import torch

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


def profile(model, sample_batch, minibatches=10, warmup=2, layers=None, loss_fn=None,
            target=None, path=None):
    """Profile of the chain over `minibatches` runs (after `warmup`): each layer runs forward
    on its input (detached, so its backward is timed alone), then backward from the last
    layer to the first. loss_fn(output, target) gives the last layer's gradient (default: the
    output's sum). Returns the profile dict; writes it as JSON to path if given."""
    if minibatches < 1 or warmup < 0:
        raise ValueError("tally.plan.profile: minibatches >= 1, warmup >= 0")
    mods = _layers(model, layers)
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
    prof = {"version": PROFILE_VERSION, "minibatch": int(sample_batch.shape[0]),
            "minibatches": minibatches, "layers": []}
    for k, mod in enumerate(mods):
        prof["layers"].append({
            "name": f"{k}:{type(mod).__name__}",
            "fwd_s": fwd[k] / minibatches, "bwd_s": bwd[k] / minibatches,
            "act_bytes": act[k],
            "param_bytes": sum(_nbytes(p) for p in mod.parameters() if p.requires_grad)})
    if path is not None:
        with open(path, "w") as f:
            json.dump(prof, f, indent=1)
    return prof
