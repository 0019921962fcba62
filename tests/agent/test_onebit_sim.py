#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""tally.optim.OneBitAdam / OneBitLamb against the NumPy reference (onebit_ref.py), with an
in-process stand-in for the appliance (onebit_ref.SimGroup: 4 threads as workers, the
reference's compressed average as the server). No appliance, no network: the optimizer logic.

Every worker gets its own fixed gradients per step (the reference needs no autograd):
  - OneBitAdam, freeze_step 3, 10 steps, 2 param groups; OneBitLamb, freeze_step 4, 10 steps,
    weight decay on; both compared with the reference after every step on every worker:
    |p - p_ref| <= 2e-6 + 1e-4 |p_ref| (torch and NumPy order f32 operations differently,
    e.g. torch's add with alpha is one fused multiply-add, and the LAMB norms are f32 in
    torch, f64 here; the bound holds with margin and a sign or scale mistake is far outside);
  - every worker holds the same parameters after every step (the server result is common);
  - OneBitAdam with freeze_step=None is torch.optim.Adam on the averaged gradient
    (|diff| <= 1e-6), and Lamb (plain) is OneBitLamb's warm-up (|diff| <= 1e-6).
Exit 77 (skip) without torch or NumPy.
"""
import os
import sys
import threading

try:
    import numpy as np
    import torch
except ImportError as e:
    print(f"SKIP: {e}")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "gpu_agent", "python"))
import onebit_ref as ref  # noqa: E402
from tally import onebit  # noqa: E402

W = 4
SHAPES = [(6, 5), (5,), (3, 6), (3,)]
CHUNK = 7  # elements per compression chunk: several chunks, a ragged last one
ATOL, RTOL = 2e-6, 1e-4


def grads_for(rank, step, n):
    r = np.random.default_rng(1000 * step + rank)
    return (r.standard_normal(n) * (1 + rank)).astype(np.float32)


def init_params():
    r = np.random.default_rng(7)
    return [r.standard_normal(s).astype(np.float32) for s in SHAPES]


def run_torch(make_opt, steps, groups):
    """Each of W threads: params from init_params, make_opt(param_groups, exchange), grads."""
    sim = ref.SimGroup(W, CHUNK)
    out = [[None] * steps for _ in range(W)]
    errs = []

    def worker(rank):
        try:
            torch.set_num_threads(1)
            ps = [torch.nn.Parameter(torch.from_numpy(a.copy())) for a in init_params()]
            pg = [{"params": [ps[i] for i in g]} for g in groups] if groups else ps
            opt = make_opt(pg, sim.member(rank))
            n = sum(p.numel() for p in ps)
            order = [i for g in groups for i in g] if groups else list(range(len(ps)))
            for t in range(steps):
                g = torch.from_numpy(grads_for(rank, t, n))
                o = 0
                for i in order:
                    ps[i].grad = g[o:o + ps[i].numel()].view_as(ps[i]).clone()
                    o += ps[i].numel()
                opt.step()
                out[rank][t] = torch.cat([ps[i].detach().reshape(-1) for i in order]).numpy().copy()
        except Exception as e:  # noqa: BLE001
            import traceback
            traceback.print_exc()
            errs.append(e)
            sim.bar.abort()

    th = [threading.Thread(target=worker, args=(r,)) for r in range(W)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    if errs:
        raise SystemExit(f"FAIL: a worker raised {errs[0]!r}")
    return out


def compare(name, out, refs_per_group, steps, groups):
    """refs_per_group: [(ref object, group's flat index list)]; the torch output is in group order."""
    ok = True
    worst = 0.0
    for t in range(steps):
        ref_flat = [np.concatenate([r_steps[t][w] for r_steps in refs_per_group]) for w in range(W)]
        for w in range(W):
            d = np.abs(out[w][t] - ref_flat[w])
            q = float((d / (ATOL + RTOL * np.abs(ref_flat[w]))).max())
            worst = max(worst, q)
            if q > 1.0:
                ok = False
                print(f"FAIL {name}: step {t + 1} worker {w}: max |diff| {d.max():.3g} (diff/tol {q:.3g})")
            if not np.array_equal(out[w][t], out[0][t]):
                ok = False
                print(f"FAIL {name}: step {t + 1}: worker {w} differs from worker 0")
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {steps} steps x {W} workers vs the NumPy reference, "
          f"worst diff/tol {worst:.3g}")
    return ok


def ref_run(cls, groups, steps, freeze, **hp):
    """One reference object per param group (one Tally tensor each); returns per group the
    per-step per-worker flat params."""
    p0 = init_params()
    res = []
    offs = np.cumsum([0] + [int(np.prod(s)) for s in SHAPES])
    n = int(offs[-1])
    flat_index = {}
    o = 0
    order = [i for g in groups for i in g]
    for i in order:
        flat_index[i] = (o, o + int(np.prod(SHAPES[i])))
        o += int(np.prod(SHAPES[i]))
    for g in groups:
        sizes = [int(np.prod(SHAPES[i])) for i in g]
        r = cls(sizes, np.concatenate([p0[i].reshape(-1) for i in g]), W, CHUNK, freeze, **hp)
        steps_out = []
        for t in range(steps):
            grads = []
            for w in range(W):
                full = grads_for(w, t, n)
                grads.append(np.concatenate([full[flat_index[i][0]:flat_index[i][1]] for i in g]))
            steps_out.append([x.copy() for x in r.step(grads)])
        res.append(steps_out)
    return res


def main():
    ok = True
    steps = 10
    groups = [[0, 1], [2, 3]]
    hp = dict(lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    out = run_torch(lambda pg, x: onebit.OneBitAdam(pg, freeze_step=3, exchange=x, **hp), steps, groups)
    ok &= compare("OneBitAdam (freeze 3, 2 groups)", out, ref_run(ref.AdamRef, groups, steps, 3, **hp), steps,
                  groups)

    hpl = dict(lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, coeff_beta=0.5)
    g1 = [[0, 1, 2, 3]]
    out = run_torch(lambda pg, x: onebit.OneBitLamb(pg, freeze_step=4, exchange=x, **hpl), steps, g1)
    ok &= compare("OneBitLamb (freeze 4, weight decay)", out, ref_run(ref.LambRef, g1, steps, 4, **hpl), steps, g1)

    # freeze_step=None: torch.optim.Adam on the averaged gradient
    out = run_torch(lambda pg, x: onebit.OneBitAdam(pg, freeze_step=None, exchange=x, lr=0.01), 5, g1)
    ps = [torch.nn.Parameter(torch.from_numpy(a.copy())) for a in init_params()]
    adam = torch.optim.Adam(ps, lr=0.01)
    n = sum(p.numel() for p in ps)
    worst = 0.0
    for t in range(5):
        g = torch.from_numpy(ref.mean([grads_for(w, t, n) for w in range(W)]))
        o = 0
        for p in ps:
            p.grad = g[o:o + p.numel()].view_as(p).clone()
            o += p.numel()
        adam.step()
        flat = torch.cat([p.detach().reshape(-1) for p in ps]).numpy()
        worst = max(worst, float(np.abs(flat - out[0][t]).max()))
    good = worst <= 1e-6
    ok &= good
    print(f"{'ok  ' if good else 'FAIL'} OneBitAdam(freeze_step=None) vs torch.optim.Adam on the averaged "
          f"gradient: max |diff| {worst:.3g} over 5 steps")

    # plain Lamb = OneBitLamb's warm-up
    out = run_torch(lambda pg, x: onebit.OneBitLamb(pg, freeze_step=None, exchange=x, **hpl), 5, g1)
    ps = [torch.nn.Parameter(torch.from_numpy(a.copy())) for a in init_params()]
    lamb = onebit.Lamb(ps, **{k: v for k, v in hpl.items() if k != "coeff_beta"})
    worst = 0.0
    for t in range(5):
        g = torch.from_numpy(ref.mean([grads_for(w, t, n) for w in range(W)]))
        o = 0
        for p in ps:
            p.grad = g[o:o + p.numel()].view_as(p).clone()
            o += p.numel()
        lamb.step()
        flat = torch.cat([p.detach().reshape(-1) for p in ps]).numpy()
        worst = max(worst, float(np.abs(flat - out[0][t]).max()))
    good = worst <= 1e-6
    ok &= good
    print(f"{'ok  ' if good else 'FAIL'} Lamb vs OneBitLamb(freeze_step=None): max |diff| {worst:.3g} over 5 steps")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
