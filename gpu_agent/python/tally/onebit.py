# SPDX-License-Identifier: Apache-2.0
"""1-bit Adam and 1-bit LAMB over Tally (error-compensated 1-bit compression of the momentum,
the appliance as the compression server), and a plain LAMB.

    import tally.optim
    opt = tally.optim.OneBitAdam(model.parameters(), lr=1e-3, freeze_step=400)
    opt = tally.optim.OneBitLamb(model.parameters(), lr=1e-3, freeze_step=400)
    ...
    loss.backward(); opt.step()          # no DDP: the optimizer exchanges what it needs

Algorithms (1-bit Adam, arXiv:2102.02888; 1-bit LAMB, arXiv:2104.06069; argument names as
DeepSpeed's onebit optimizers):
  warm-up (the first freeze_step steps): the local gradients of a param group, flattened into
    one buffer, are averaged through the appliance at full precision; then plain Adam / LAMB.
  freeze (after step freeze_step): Adam's variance is frozen; LAMB's variance too, and its
    layer-wise coefficient becomes the moving average of the warm-up coefficients
    (coeff_beta) times a factor from a fresh variance rebuilt from the averaged momentum
    (factor_min..factor_max, at most factor_threshold change a step).
  compression (every later step): the momentum is updated with the LOCAL gradient, then
    averaged through the appliance with 1-bit compression (worker error feedback in the agent,
    server error feedback in the appliance); the averaged momentum replaces the local one.
    No gradient is exchanged.

One Tally tensor per param group (name "<name>.group<i>.<numel>"), declared on the first step,
compressed from round freeze_step on (tally.Agent.set_compression). The exchange is an object
with declare(key, numel, freeze_round) -> handle and exchange(handles_and_tensors) (averages in
place); TallyExchange is the one over the agent; tests plug in a simulation.
"""
import math

import torch

from . import _lib

__all__ = ["OneBitAdam", "OneBitLamb", "Lamb", "TallyExchange", "ONEBIT"]

ONEBIT = "onebit"


class TallyExchange:
    """Averages flat f32 buffers through the Tally agent: uncompressed push_pull before the
    tensor's freeze round, 1-bit compressed (server average) from it on."""

    def __init__(self, agent=None, name="onebit"):
        if agent is None:
            from .agent import init
            agent = init()
        self.agent = agent
        self.name = name
        self.world_size = agent.world_size

    def declare(self, key, numel, freeze_round):
        tid = self.agent.declare(f"{self.name}.{key}.{numel}", numel * 4, "f32", priority=0, average=True)
        if freeze_round is not None:
            self.agent.set_compression(tid, ONEBIT, int(freeze_round))
        return tid

    def exchange(self, items):
        """items: [(handle, tensor)]: every push_pull is started, then all are waited for."""
        hs = []
        for tid, t in items:
            if t.is_cuda:
                dev, stream = _lib.DEV_CUDA, torch.cuda.current_stream(t.device).cuda_stream
            else:
                dev, stream = _lib.DEV_CPU, None
            hs.append(self.agent.push_pull(tid, t.data_ptr(), t.numel() * 4, dev, stream))
        for h in hs:
            self.agent.wait(h)


class _Flat:
    """One param group flattened: f32 buffers of the group's total size and per-param views."""

    def __init__(self, params, device):
        self.params = params
        self.sizes = [p.numel() for p in params]
        self.offs = [0]
        for n in self.sizes:
            self.offs.append(self.offs[-1] + n)
        self.numel = self.offs[-1]
        self.device = device

    def zeros(self):
        return torch.zeros(self.numel, dtype=torch.float32, device=self.device)

    def views(self, flat):
        return [flat[a:b].view_as(p) for a, b, p in zip(self.offs, self.offs[1:], self.params)]

    def slices(self, flat):
        return [flat[a:b] for a, b in zip(self.offs, self.offs[1:])]

    def gather_grads(self, out):
        for p, v in zip(self.params, self.slices(out)):
            if p.grad is None:
                v.zero_()  # every worker pushes the same buffer; a missing gradient is 0
            else:
                v.copy_(p.grad.detach().reshape(-1))
        return out


def _mask(v):
    """The momentum mask of the compression stage: 0 where the frozen variance is exactly 0
    (every warm-up gradient of that element was 0: an input that is always 0, a dead unit).
    1-bit compression cannot send a 0, so such an element would receive ±scale every step and
    move by ±scale / eps; DeepSpeed asks the user for this mask (exp_avg_mask), here it is
    derived at the freeze. None when every element has a variance."""
    if bool((v > 0).all()):
        return None
    return (v > 0).to(v.dtype)


class _OneBitBase(torch.optim.Optimizer):
    def __init__(self, params, defaults, freeze_step, agent, exchange, name):
        super().__init__(params, defaults)
        for g in self.param_groups:
            for p in g["params"]:
                if p.dtype != torch.float32:
                    raise TypeError(f"tally.optim.{type(self).__name__}: float32 parameters only")
        if freeze_step is not None and int(freeze_step) < 1:
            raise ValueError("freeze_step must be >= 1 (the warm-up needs at least one full-precision step)")
        self.freeze_step = None if freeze_step is None else int(freeze_step)
        self._agent = agent
        self._xchg = exchange
        self._name = name
        self._flat = {}

    # -- exchange
    def _exchange_obj(self):
        if self._xchg is None:
            self._xchg = TallyExchange(self._agent, self._name)
        return self._xchg

    def _setup(self, gi, group):
        st = self._flat.get(gi)
        if st is None:
            params = list(group["params"])
            dev = params[0].device
            f = _Flat(params, dev)
            st = {"flat": f, "step": 0, "m": f.zeros(), "v": f.zeros(), "buf": f.zeros()}
            st["handle"] = self._exchange_obj().declare(f"group{gi}", f.numel, self.freeze_step)
            self._flat[gi] = st
        return st

    def compressing(self, step):
        """True when step (1-based) exchanges the compressed momentum."""
        return self.freeze_step is not None and step > self.freeze_step

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        sts = [self._setup(gi, g) for gi, g in enumerate(self.param_groups)]
        for st in sts:
            st["step"] += 1
        groups = list(zip(self.param_groups, sts))
        warm = [(g, st) for g, st in groups if not self.compressing(st["step"])]
        comp = [(g, st) for g, st in groups if self.compressing(st["step"])]
        # warm-up: average the gradients at full precision, then the plain update
        for g, st in warm:
            st["flat"].gather_grads(st["buf"])
        items = [(st["handle"], st["buf"]) for _, st in warm]
        # compression: local momentum update, compressed average of the momentum
        for g, st in comp:
            self._pre_compress(g, st, st["flat"].gather_grads(st["buf"]))
        items += [(st["handle"], st["m"]) for _, st in comp]
        if items:
            self._exchange_obj().exchange(items)
        for g, st in warm:
            self._warm_update(g, st, st["buf"])
        for g, st in comp:
            self._post_compress(g, st)
        return loss


class OneBitAdam(_OneBitBase):
    """1-bit Adam. lr, betas, eps, weight_decay as Adam (weight decay added to the update as
    DeepSpeed's OnebitAdam, i.e. decoupled: p -= lr * (m_hat / (sqrt(v_hat) + eps) + wd * p));
    freeze_step: warm-up steps at full precision (None: never compress = Adam over Tally);
    bias_correction: Adam's 1 - beta^t factors (True: the warm-up is torch.optim.Adam's update,
    the frozen variance keeps the factor of the freeze step; False: DeepSpeed's OnebitAdam,
    which has none). agent: a tally.Agent (default: tally.init()); name: Tally tensor prefix."""

    def __init__(self, params, lr=1e-3, freeze_step=100000, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 bias_correction=True, agent=None, name="onebit_adam", exchange=None):
        if not 0.0 <= lr:
            raise ValueError(f"invalid lr {lr}")
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"invalid betas {betas}")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        bias_correction=bias_correction)
        super().__init__(params, defaults, freeze_step, agent, exchange, name)

    def _apply(self, g, st, step, bc2):
        b1, _ = g["betas"]
        bc1 = 1.0 - b1 ** step if g["bias_correction"] else 1.0
        denom = (st["v"].sqrt() / math.sqrt(bc2)).add_(g["eps"])
        upd = st["m"] / denom
        upd.mul_(1.0 / bc1)
        self._finish(g, st, upd)

    def _finish(self, g, st, upd):
        for p, u in zip(st["flat"].params, st["flat"].views(upd)):
            if g["weight_decay"] != 0.0:
                u = u.add(p.detach(), alpha=g["weight_decay"])
            p.add_(u, alpha=-g["lr"])

    def _warm_update(self, g, st, grad):
        b1, b2 = g["betas"]
        t = st["step"]
        st["m"].mul_(b1).add_(grad, alpha=1.0 - b1)
        st["v"].mul_(b2).addcmul_(grad, grad, value=1.0 - b2)
        bc2 = 1.0 - b2 ** t if g["bias_correction"] else 1.0
        if self.freeze_step is not None and t == self.freeze_step:
            st["bc2_frozen"] = bc2  # the variance is frozen from here on
            st["mask"] = _mask(st["v"])
        self._apply(g, st, t, bc2)

    def _pre_compress(self, g, st, grad):
        b1, _ = g["betas"]
        st["m"].mul_(b1).add_(grad, alpha=1.0 - b1)

    def _post_compress(self, g, st):
        if st.get("mask") is not None:
            st["m"].mul_(st["mask"])
        self._apply(g, st, st["step"], st.get("bc2_frozen", 1.0))


class OneBitLamb(_OneBitBase):
    """1-bit LAMB. lr, betas, eps, weight_decay as LAMB; max_coeff / min_coeff clip the
    layer-wise coefficient ||w|| / ||update|| (per parameter tensor); coeff_beta: moving
    average of that coefficient over the warm-up (frozen at freeze_step; 1/(1-coeff_beta)
    should not exceed freeze_step); factor_max / factor_min / factor_threshold: the
    compression stage multiplies the frozen coefficient by max(denom_frozen / denom_fresh),
    clipped to [factor_min, factor_max] and to ±factor_threshold of the last step's factor.
    Before compression each tensor's momentum is scaled to a common RMS (scaling
    coefficients fixed at the first compressed step), as the paper does. bias_correction:
    False (default) is DeepSpeed's OnebitLamb (none); True divides m and v by 1 - beta^t (v's
    factor frozen with v). freeze_step=None: never compress (= LAMB with gradients averaged
    through Tally)."""

    def __init__(self, params, lr=1e-3, freeze_step=100000, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 max_coeff=10.0, min_coeff=0.01, coeff_beta=0.9, factor_max=4.0, factor_min=0.5,
                 factor_threshold=0.1, bias_correction=False, agent=None, name="onebit_lamb", exchange=None):
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, max_coeff=max_coeff,
                        min_coeff=min_coeff, bias_correction=bias_correction)
        super().__init__(params, defaults, freeze_step, agent, exchange, name)
        self.coeff_beta, self.factor_max, self.factor_min = coeff_beta, factor_max, factor_min
        self.factor_threshold = factor_threshold
        self.lamb_coeffs = []

    def _bc(self, g, t):
        b1, b2 = g["betas"]
        if not g["bias_correction"]:
            return 1.0, 1.0
        return 1.0 - b1 ** t, 1.0 - b2 ** t

    def _warm_update(self, g, st, grad):
        b1, b2 = g["betas"]
        t = st["step"]
        m, v = st["m"], st["v"]
        m.mul_(b1).add_(grad, alpha=1.0 - b1)
        v.mul_(b2).addcmul_(grad, grad, value=1.0 - b2)
        bc1, bc2 = self._bc(g, t)
        f = st["flat"]
        n = len(f.params)
        if "coeff_freeze" not in st:
            st["coeff_freeze"] = [0.0] * n
            st["last_factor"] = [1.0] * n
        if self.freeze_step is not None and t == self.freeze_step:
            st["v_fresh"] = v.clone()
            st["bc2_frozen"] = bc2
            st["mask"] = _mask(v)
        upd = (m / bc1) / ((v / bc2).sqrt_().add_(g["eps"]))
        self.lamb_coeffs = []
        for i, (p, u) in enumerate(zip(f.params, f.views(upd))):
            if g["weight_decay"] != 0.0:
                u.add_(p.detach(), alpha=g["weight_decay"])
            wn = float(p.detach().norm())
            un = float(u.norm())
            c = 1.0
            if wn != 0.0 and un != 0.0:
                c = min(max(wn / un, g["min_coeff"]), g["max_coeff"])
            if c != 1.0:
                st["coeff_freeze"][i] = self.coeff_beta * st["coeff_freeze"][i] + (1.0 - self.coeff_beta) * c
            self.lamb_coeffs.append(c)
            p.add_(u, alpha=-g["lr"] * c)

    def _pre_compress(self, g, st, grad):
        b1, _ = g["betas"]
        m = st["m"]
        f = st["flat"]
        st["m_last"] = m.clone()
        if "scaling" not in st:
            # every tensor's momentum scaled to the mean RMS, from the warm-up's last momentum
            # (averaged, so the same on every worker), fixed from now on
            rms = [float(x.norm()) / math.sqrt(x.numel()) for x in f.slices(m)]
            unit = sum(rms) / len(rms)
            st["scaling"] = [unit / r if r > 0.0 else 1.0 for r in rms]
        m.mul_(b1).add_(grad, alpha=1.0 - b1)
        for x, s in zip(f.slices(m), st["scaling"]):
            x.mul_(s)

    def _post_compress(self, g, st):
        b1, b2 = g["betas"]
        t = st["step"]
        f = st["flat"]
        m, v, vf = st["m"], st["v"], st["v_fresh"]
        for x, s in zip(f.slices(m), st["scaling"]):
            x.div_(s)
        if st.get("mask") is not None:
            m.mul_(st["mask"])
        bc1, bc2 = self._bc(g, t)
        # the gradient the averaged momentum implies, into the fresh variance
        grec = (m - st.pop("m_last") * b1) / (1.0 - b1)
        vf.mul_(b2).addcmul_(grec, grec, value=1.0 - b2)
        denom = (v / st["bc2_frozen"]).sqrt_().add_(g["eps"])
        denom_real = (vf / bc2).sqrt_().add_(g["eps"])
        prelim = (m / bc1) / denom
        ratio = denom / denom_real
        self.lamb_coeffs = []
        for i, (p, u, r) in enumerate(zip(f.params, f.views(prelim), f.slices(ratio))):
            factor = float(r.max())
            if g["weight_decay"] != 0.0:
                pn = float(u.norm())
                u = u.add(p.detach(), alpha=g["weight_decay"])
                un = float(u.norm())
                ur = min(1.0, pn / un) if un != 0.0 else 1.0
                factor = factor * ur + (1.0 - ur)
            factor = min(max(factor, self.factor_min), self.factor_max)
            last = st["last_factor"][i]
            factor = min(max(factor, last * (1.0 - self.factor_threshold)), last * (1.0 + self.factor_threshold))
            st["last_factor"][i] = factor
            c = st["coeff_freeze"][i] * factor
            self.lamb_coeffs.append(c)
            p.add_(u, alpha=-g["lr"] * c)

    def get_lamb_coeffs(self):
        return list(self.lamb_coeffs)


class Lamb(torch.optim.Optimizer):
    """Plain LAMB (You et al., arXiv:1904.00962) on already averaged gradients (a DDP hook or
    tally.torch.DistributedOptimizer does the exchange): the same update as OneBitLamb's
    warm-up, per parameter tensor: u = m_hat / (sqrt(v_hat) + eps) + wd * p, p -= lr * clip(
    ||p|| / ||u||, min_coeff, max_coeff) * u (1 where either norm is 0)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, max_coeff=10.0,
                 min_coeff=0.01, bias_correction=False):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      max_coeff=max_coeff, min_coeff=min_coeff, bias_correction=bias_correction))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for g in self.param_groups:
            b1, b2 = g["betas"]
            for p in g["params"]:
                if p.grad is None:
                    continue
                s = self.state[p]
                if not s:
                    s["step"] = 0
                    s["m"] = torch.zeros_like(p)
                    s["v"] = torch.zeros_like(p)
                s["step"] += 1
                t = s["step"]
                grad = p.grad
                s["m"].mul_(b1).add_(grad, alpha=1.0 - b1)
                s["v"].mul_(b2).addcmul_(grad, grad, value=1.0 - b2)
                bc1, bc2 = (1.0 - b1 ** t, 1.0 - b2 ** t) if g["bias_correction"] else (1.0, 1.0)
                u = (s["m"] / bc1) / ((s["v"] / bc2).sqrt_().add_(g["eps"]))
                if g["weight_decay"] != 0.0:
                    u.add_(p, alpha=g["weight_decay"])
                wn, un = float(p.norm()), float(u.norm())
                c = 1.0
                if wn != 0.0 and un != 0.0:
                    c = min(max(wn / un, g["min_coeff"]), g["max_coeff"])
                p.add_(u, alpha=-g["lr"] * c)
        return loss
