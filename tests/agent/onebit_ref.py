# SPDX-License-Identifier: Apache-2.0
"""NumPy reference of 1-bit Adam (arXiv:2102.02888) and 1-bit LAMB (arXiv:2104.06069) as
Tally runs them, written from the papers (and DeepSpeed's description of the coefficients),
independent of tally.onebit's torch code:

  compressed average (DeepSpeed's two-stage error feedback, per chunk of the flat buffer):
    worker w:  c = x_w + e_w;  s_w = ||c|| / sqrt(n) (f64, rounded to f32 once);
               bits_w = c >= 0;  e_w = c - s_w * sign(c)
    server:    a = sum_w ±(s_w / W) (f32, rank order);  c = a + e_s;  s = ||c|| / sqrt(n);
               e_s = c - s * sign(c);  every worker receives ±s
  1-bit Adam: warm-up (t <= freeze_step) Adam on the averaged gradient (optional bias
    correction); after: m = b1 m + (1-b1) g_local, m = compressed_avg(m), v frozen,
    p -= lr * (m / bc1 / (sqrt(v / bc2_frozen) + eps) + wd p)
  1-bit LAMB: warm-up LAMB with the coefficient's moving average; after: momentum scaled per
    tensor to a common RMS, compressed average, unscaled; fresh variance from the reconstructed
    gradient; coefficient = frozen average * clipped max(denom / denom_fresh).

Everything is f32 like the optimizer; scalars are rounded to f32 where torch does (a Python
float times an f32 tensor computes in f32). Also SimGroup: an in-process stand-in for the
appliance (threads as workers) that tally.onebit's optimizers can use as their exchange.
"""
import math
import threading

import numpy as np

F = np.float32


# ---------------------------------------------------------------- compression

def signs(c):
    """1 for c >= 0 (-0 too), a NaN by its sign bit (tally_sum.h's rule)."""
    return np.where(np.isnan(c), ~np.signbit(c), c >= 0)


def scale_of(c):
    if c.size == 0:
        return F(0)
    d = c.astype(np.float64)
    return F(math.sqrt(float(np.sum(d * d))) / math.sqrt(c.size))


def compress(x, e):
    """One stage on one chunk: (bits, scale, new error). c = x + e in f32; bit 1 for c >= 0
    (-0 too: the sign bit decides)."""
    c = (x + e).astype(F)
    s = scale_of(c)
    b = signs(c)
    return b, s, (c - np.where(b, s, -s).astype(F)).astype(F)


def unpack(b, s):
    return np.where(b, F(s), F(-s)).astype(F)


def chunks_of(numel, chunk_elems):
    return [(o, min(chunk_elems, numel - o)) for o in range(0, numel, chunk_elems)]


def compressed_allreduce(xs, werrs, serr, chunks):
    """xs, werrs: per-worker f32 arrays; serr: server error. Returns (result, werrs, serr,
    detail) with new error arrays; detail has the per-chunk scales and bits."""
    W = len(xs)
    n = xs[0].size
    out = np.empty(n, F)
    nwerr = [np.empty(n, F) for _ in range(W)]
    nserr = np.empty(n, F)
    detail = {"worker_scales": [[] for _ in range(W)], "server_scales": [], "worker_bits": [[] for _ in range(W)],
              "server_bits": [], "acc": np.empty(n, F)}
    for o, k in chunks:
        sl = slice(o, o + k)
        acc = np.zeros(k, F)
        for w in range(W):
            b, s, e = compress(xs[w][sl], werrs[w][sl])
            nwerr[w][sl] = e
            detail["worker_scales"][w].append(s)
            detail["worker_bits"][w].append(b)
            acc = (acc + unpack(b, F(s) / F(W))).astype(F)
        detail["acc"][sl] = acc
        b, s, e = compress(acc, serr[sl])
        nserr[sl] = e
        out[sl] = unpack(b, s)
        detail["server_scales"].append(s)
        detail["server_bits"].append(b)
    return out, nwerr, nserr, detail


def mean(xs):
    acc = np.zeros_like(xs[0])
    for x in xs:
        acc = (acc + x).astype(F)
    return (acc / F(len(xs))).astype(F)


# ---------------------------------------------------------------- optimizers

class _Ref:
    """State of the reference run: flat params (identical on every worker), moments, errors."""

    def __init__(self, sizes, p0, W, chunk_elems, freeze_step):
        self.sizes = list(sizes)
        self.offs = np.cumsum([0] + self.sizes)
        self.n = int(self.offs[-1])
        self.p = [np.array(p0, F).copy() for _ in range(W)]
        self.m = np.zeros(self.n, F)
        self.v = np.zeros(self.n, F)
        self.W = W
        self.chunks = chunks_of(self.n, chunk_elems)
        self.werr = [np.zeros(self.n, F) for _ in range(W)]
        self.serr = np.zeros(self.n, F)
        self.freeze = freeze_step
        self.t = 0
        self.history = []

    def seg(self, i):
        return slice(int(self.offs[i]), int(self.offs[i + 1]))

    def compressing(self):
        return self.freeze is not None and self.t > self.freeze


class AdamRef(_Ref):
    def __init__(self, sizes, p0, W, chunk_elems, freeze_step, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                 weight_decay=0.0, bias_correction=True):
        super().__init__(sizes, p0, W, chunk_elems, freeze_step)
        self.lr, self.b1, self.b2, self.eps, self.wd, self.bc = lr, betas[0], betas[1], eps, weight_decay, \
            bias_correction
        self.bc2_frozen = 1.0

    def step(self, grads):
        """grads: per-worker flat f32 gradients. Returns the per-worker params."""
        self.t += 1
        b1, b2 = F(self.b1), F(self.b2)
        if not self.compressing():
            g = mean(grads)
            self.m = (self.m * b1 + g * F(1 - self.b1)).astype(F)
            self.v = (self.v * b2 + g * g * F(1 - self.b2)).astype(F)
            bc2 = 1 - self.b2 ** self.t if self.bc else 1.0
            if self.freeze is not None and self.t == self.freeze:
                self.bc2_frozen = bc2
                self.mask = (self.v > 0).astype(F)
            ms = [self.m] * self.W
        else:
            bc2 = self.bc2_frozen
            local = [(self.m * b1 + g * F(1 - self.b1)).astype(F) for g in grads]
            avg, self.werr, self.serr, _ = compressed_allreduce(local, self.werr, self.serr, self.chunks)
            self.m = (avg * self.mask).astype(F)  # 0 where the frozen variance is 0
            ms = [self.m] * self.W
        bc1 = 1 - self.b1 ** self.t if self.bc else 1.0
        denom = (np.sqrt(self.v) / F(math.sqrt(bc2)) + F(self.eps)).astype(F)
        for w in range(self.W):
            u = ((ms[w] / denom) * F(1.0 / bc1)).astype(F)
            if self.wd:
                u = (u + self.p[w] * F(self.wd)).astype(F)
            self.p[w] = (self.p[w] - u * F(self.lr)).astype(F)
        return self.p


class LambRef(_Ref):
    def __init__(self, sizes, p0, W, chunk_elems, freeze_step, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                 weight_decay=0.0, max_coeff=10.0, min_coeff=0.01, coeff_beta=0.9, factor_max=4.0, factor_min=0.5,
                 factor_threshold=0.1, bias_correction=False):
        super().__init__(sizes, p0, W, chunk_elems, freeze_step)
        self.lr, self.b1, self.b2, self.eps, self.wd = lr, betas[0], betas[1], eps, weight_decay
        self.maxc, self.minc, self.cb = max_coeff, min_coeff, coeff_beta
        self.fmax, self.fmin, self.fth = factor_max, factor_min, factor_threshold
        self.bc = bias_correction
        k = len(self.sizes)
        self.coeff_freeze = [0.0] * k
        self.last_factor = [1.0] * k
        self.scaling = None
        self.coeffs = []

    def _bcs(self):
        if not self.bc:
            return 1.0, 1.0
        return 1 - self.b1 ** self.t, 1 - self.b2 ** self.t

    @staticmethod
    def _norm(x):
        return math.sqrt(float(np.sum(x.astype(np.float64) ** 2)))

    def step(self, grads):
        self.t += 1
        b1, b2 = F(self.b1), F(self.b2)
        bc1, bc2 = self._bcs()
        p = self.p[0]
        self.coeffs = []
        if not self.compressing():
            g = mean(grads)
            self.m = (self.m * b1 + g * F(1 - self.b1)).astype(F)
            self.v = (self.v * b2 + g * g * F(1 - self.b2)).astype(F)
            if self.freeze is not None and self.t == self.freeze:
                self.v_fresh = self.v.copy()
                self.bc2_frozen = bc2
                self.mask = (self.v > 0).astype(F)
            upd = ((self.m / F(bc1)) / (np.sqrt(self.v / F(bc2)) + F(self.eps))).astype(F)
            for i in range(len(self.sizes)):
                s = self.seg(i)
                u = upd[s]
                if self.wd:
                    u = (u + p[s] * F(self.wd)).astype(F)
                wn, un = self._norm(p[s]), self._norm(u)
                c = 1.0
                if wn != 0 and un != 0:
                    c = min(max(wn / un, self.minc), self.maxc)
                if c != 1.0:
                    self.coeff_freeze[i] = self.cb * self.coeff_freeze[i] + (1 - self.cb) * c
                self.coeffs.append(c)
                p[s] = (p[s] - u * F(self.lr * c)).astype(F)
        else:
            m_last = self.m
            local = [(self.m * b1 + g * F(1 - self.b1)).astype(F) for g in grads]
            if self.scaling is None:
                # from the warm-up's last (averaged, so common) momentum
                rms = [self._norm(m_last[self.seg(i)]) / math.sqrt(self.sizes[i]) for i in range(len(self.sizes))]
                unit = sum(rms) / len(rms)
                self.scaling = [unit / r if r > 0 else 1.0 for r in rms]
            sc = np.concatenate([np.full(n, F(s), F) for n, s in zip(self.sizes, self.scaling)])
            local = [(x * sc).astype(F) for x in local]
            avg, self.werr, self.serr, _ = compressed_allreduce(local, self.werr, self.serr, self.chunks)
            m = ((avg / sc) * self.mask).astype(F)
            self.m = m
            grec = ((m - m_last * b1) / F(1 - self.b1)).astype(F)
            self.v_fresh = (self.v_fresh * b2 + grec * grec * F(1 - self.b2)).astype(F)
            denom = (np.sqrt(self.v / F(self.bc2_frozen)) + F(self.eps)).astype(F)
            denom_real = (np.sqrt(self.v_fresh / F(bc2)) + F(self.eps)).astype(F)
            prelim = ((m / F(bc1)) / denom).astype(F)
            ratio = (denom / denom_real).astype(F)
            for i in range(len(self.sizes)):
                s = self.seg(i)
                u = prelim[s]
                factor = float(ratio[s].max())
                if self.wd:
                    pn = self._norm(u)
                    u = (u + p[s] * F(self.wd)).astype(F)
                    un = self._norm(u)
                    ur = min(1.0, pn / un) if un else 1.0
                    factor = factor * ur + (1 - ur)
                factor = min(max(factor, self.fmin), self.fmax)
                last = self.last_factor[i]
                factor = min(max(factor, last * (1 - self.fth)), last * (1 + self.fth))
                self.last_factor[i] = factor
                c = self.coeff_freeze[i] * factor
                self.coeffs.append(c)
                p[s] = (p[s] - u * F(self.lr * c)).astype(F)
        self.p = [p] + [p.copy() for _ in range(self.W - 1)]
        return self.p


# ---------------------------------------------------------------- in-process exchange

class SimGroup:
    """W threads as workers, this object as the appliance: uncompressed average before a
    tensor's freeze round, compressed_allreduce from it on (errors kept here)."""

    def __init__(self, W, chunk_elems):
        self.W = W
        self.chunk_elems = chunk_elems
        self.bar = threading.Barrier(W)
        self.slots = {}
        self.state = {}
        self.results = {}

    def member(self, rank):
        return SimExchange(self, rank)

    def _reduce(self):
        for key, xs in self.slots.items():
            st = self.state[key]
            if st["freeze"] is None or st["round"] < st["freeze"]:
                r = mean(xs)
                self.results[key] = [r] * self.W
            else:
                r, st["werr"], st["serr"], _ = compressed_allreduce(xs, st["werr"], st["serr"], st["chunks"])
                self.results[key] = [r] * self.W
            st["round"] += 1
        self.slots = {}


class SimExchange:
    def __init__(self, group, rank):
        self.g, self.rank = group, rank
        self.world_size = group.W

    def declare(self, key, numel, freeze_round):
        g = self.g
        if key not in g.state:
            g.state[key] = {"freeze": freeze_round, "round": 0, "chunks": chunks_of(numel, g.chunk_elems),
                            "werr": [np.zeros(numel, F) for _ in range(g.W)], "serr": np.zeros(numel, F)}
        return key

    def exchange(self, items):
        g = self.g
        g.bar.wait()
        for key, t in items:
            g.slots.setdefault(key, [None] * g.W)[self.rank] = t.detach().cpu().numpy().copy()
        if g.bar.wait() == 0:
            g._reduce()
        g.bar.wait()
        import torch
        for key, t in items:
            t.copy_(torch.from_numpy(g.results[key][self.rank]))
        g.bar.wait()
