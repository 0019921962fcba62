#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Optimizer CPU twins (tally.optim over ctypes) vs torch.optim on the same inputs.

Three tensors (1, 1000 and 4099 elements: tails, AVX-512 body), 10 steps with fresh
gradients each step, both the AVX-512 and the scalar path. Tolerance: |ours - torch| <=
1e-6 + 1e-5*|torch| per element after 10 steps (torch may evaluate in another order or with
FMA; one step differs by a few ulp, errors compound). LAMB is not in torch.optim: its
reference is the apex/DeepSpeed per-tensor formula written with torch ops below.
Exit 77 (skip) when torch is not importable.
"""
import sys

try:
    import torch
except ImportError:
    print("SKIP: torch not importable by", sys.executable)
    sys.exit(77)

import tally.optim as topt
from tally import _lib

SIZES = (1, 1000, 4099)
STEPS = 10
RTOL, ATOL = 1e-5, 1e-6


def lamb_ref(params, grads, ms, vs, lr, b1, b2, eps, wd, step):
    with torch.no_grad():
        for p, g, m, v in zip(params, grads, ms, vs):
            m.mul_(b1).add_(g, alpha=1 - b1)
            v.mul_(b2).addcmul_(g, g, value=1 - b2)
            u = (m / (1 - b1 ** step)) / ((v / (1 - b2 ** step)).sqrt() + eps) + wd * p
            pn, un = p.double().norm(), u.double().norm()
            ratio = float(pn / un) if pn > 0 and un > 0 else 1.0
            p.add_(u, alpha=-lr * ratio)


CASES = [
    ("sgd", dict(lr=0.1)),
    ("sgd", dict(lr=0.1, momentum=0.9, weight_decay=1e-4)),
    ("sgd", dict(lr=0.1, momentum=0.9, dampening=0.1)),
    ("sgd", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3)),
    ("adam", dict(lr=1e-3)),
    ("adam", dict(lr=1e-2, betas=(0.8, 0.99), eps=1e-6, weight_decay=1e-2)),
    ("adamw", dict(lr=1e-3, weight_decay=1e-2)),
    ("lamb", dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-6, weight_decay=1e-2)),
]


def run_case(kind, hp, scalar):
    gen = torch.Generator().manual_seed(1234)
    init = [torch.randn(n, generator=gen) for n in SIZES]
    grads = [[torch.randn(n, generator=gen) * 0.1 for n in SIZES] for _ in range(STEPS)]

    # torch
    ref = [t.clone().requires_grad_(True) for t in init]
    if kind == "sgd":
        opt = torch.optim.SGD(ref, **hp)
    elif kind == "adam":
        opt = torch.optim.Adam(ref, **hp)
    elif kind == "adamw":
        opt = torch.optim.AdamW(ref, **hp)
    else:
        opt = None
        lm = [torch.zeros(n) for n in SIZES]
        lv = [torch.zeros(n) for n in SIZES]
    for s in range(STEPS):
        if opt is not None:
            for p, g in zip(ref, grads[s]):
                p.grad = g.clone()
            opt.step()
        else:
            b1, b2 = hp["betas"]
            lamb_ref([p.data for p in ref], grads[s], lm, lv, hp["lr"], b1, b2, hp["eps"],
                     hp["weight_decay"], s + 1)

    # ours
    _lib.lib.tally_opt_force_scalar(1 if scalar else 0)
    ours = [t.clone() for t in init]
    m = [torch.zeros(n) for n in SIZES]
    v = [torch.zeros(n) for n in SIZES]
    kw = dict(hp)
    for s in range(STEPS):
        topt.step(kind, ours, grads[s], m, v, first=(s == 0), step=s + 1, **kw)
    _lib.lib.tally_opt_force_scalar(0)

    worst = 0.0
    for a, b in zip(ours, ref):
        b = b.detach()
        err = ((a - b).abs() - (ATOL + RTOL * b.abs())).max().item()
        worst = max(worst, ((a - b).abs() / (ATOL + RTOL * b.abs())).max().item())
        if err > 0:
            return False, worst
    return True, worst


def main():
    print(f"torch {torch.__version__}; CPU path here: {_lib.lib.tally_opt_cpu_path().decode()}")
    failed = 0
    for kind, hp in CASES:
        for scalar in (False, True):
            ok, worst = run_case(kind, hp, scalar)
            path = "scalar" if scalar else _lib.lib.tally_opt_cpu_path().decode()
            print(f"{'ok  ' if ok else 'FAIL'} {kind:6s} {path:7s} {hp}  worst err/tol = {worst:.3g}")
            failed += not ok
    # a configuration torch rejects is rejected too, before touching anything
    p = torch.ones(4)
    try:
        topt.step("sgd", [p], [torch.ones(4)], [torch.zeros(4)], lr=0.1, nesterov=True)
        print("FAIL nesterov without momentum accepted")
        failed += 1
    except ValueError as e:
        print("ok   rejected:", e)
        if not torch.equal(p, torch.ones(4)):
            failed += 1
    print(f"{failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
