# SPDX-License-Identifier: Apache-2.0
"""PipeDream's partitioning dynamic program (Narayanan et al., SOSP'19, section 3.1) over a
profiled layer chain on one level of workers: stage boundaries, replicas per stage, the
number of minibatches in flight, and per stage how its replicas aggregate (cost.Cluster.sync:
Tally appliances or ring allreduce, the faster).

Time of a stage of layers i..j-1 on m replicas (per minibatch, steady state):
    T(i, j, m) = (max(compute + fixed, sync(param bytes, m)) + update) / m
(the sum compute + fixed + sync instead of the max where the cluster says "overlap": false,
as for tally.plan.runtime, which aggregates after the backward), with, all measured by
tally.plan.profile (a profile without them counts them 0: PipeDream's formula):
    compute = sum of fwd_s + bwd_s over the layers
    fixed   = overhead.microbatch_s (the runtime's Python, framing and autograd launch per
              microbatch) + 2 overhead.message_s per boundary the stage has (i > 0, j < N):
              per microbatch, one tensor in and one out there, each a header and its data,
              and message_s is one message's send and receive calls
    update  = sum of stash_s (1F1B's weight stash) + overhead.opt_call_s + sum of opt_s
              (gradient averaging and the optimizer's step; where the stage has weights)
              + sum of grad_copy_s (into the stage's flat buffer and back; where the stage
              has replicas to aggregate with, through Tally or a ring)
and of the best pipeline of the first j layers on m workers:
    A(j, m) = min(T(0, j, m),
                  min over i < j, m' < m of max(A(i, m - m'), 2 C(i), T(i, j, m')))
with C(i) the transfer of layer i-1's activation. The pipeline's time per minibatch is its
slowest part, A(N, M): every worker is used.

Shared host (the cluster's host_cores C: every worker a process of one machine, as on the
emulated cluster): the profile's layer times were taken by R ranks at once (the profile's
ranks_at_once; fwd_s, bwd_s), but a pipeline's stages do not all compute at once. Processor
sharing: a rank computing while k of the plan's ranks compute, and e threads of the host's
other load run, takes s(k) = max(1, (k + e) / C) times its time alone. e is measured: the
ratio rho = sum(fwd_s + bwd_s) / sum(fwd_solo_s + bwd_solo_s) (the same layers timed while
the other ranks wait) is s(R) / s(1); without solo times e = 0 (the host runs nothing else).
Then a stage's compute on m replicas is compute x f(m), f(k) = s(k) / s(R) (its replicas
compute in lockstep; the other stages' ranks are counted idle), and A(N, M) is at least the
whole chain's compute x f(M) / M (the host's capacity: all M ranks computing at once): a
constant of the chain, so the program stays exact. Without host_cores, f = 1 and no bound.

Windows (1F1B's minibatches in flight per replica): the model above, like PipeDream's, takes
the transfers 2 C as overlapped with compute. That holds only if a stage keeps enough
minibatches in flight to cover the round trip from its forward of a minibatch to its backward
of it. PipeDream's NOAM_s = ceil(workers from stage s on / m_s) covers it where the transfers
are free; with P the predicted time per minibatch (A(N, M)), a replica of stage s starts one
of every m_s minibatches, one every m_s P, so its window must be
    F_s = max(NOAM_s, ceil((c_s + RT_s) / (m_s P)), ceil(F_{s+1} m_{s+1} / m_s))
with c_s its compute of one minibatch (forward, backward, fixed; x f(m_s) on a shared host),
RT_s = 2 C(j_s) + L_{s+1} the round trip beyond its end boundary j_s (the activation out, the
gradient back) and L_{s+1} the next stage's latency from an activation in to its gradient out:
L_s = c_s + max(RT_s, (F_s - 1) m_s P) (its backward of a minibatch runs after its own round
trip and after the F_s - 1 forwards its window runs first); the last stage: RT = 0, L = c. The
third term keeps windows, counted in the pipeline's minibatches, non-increasing down the
pipeline (a shallower upstream window can deadlock 1F1B). Without transfers and with equal
stages this is NOAM. Memory: a replica keeps F_s weight stashes (stash_bytes = F_s x its
weights)."""
import json
import math

from .cost import Cluster, ClusterError

PROFILE_VERSION = 1
# optional measured terms (tally.plan.profile writes them; absent counts 0)
LAYER_EXTRA = ("opt_s", "stash_s", "grad_copy_s")
OVERHEAD = ("microbatch_s", "message_s", "opt_call_s")
# optional: the layer timed while the other ranks of the profile waited (shared host)
LAYER_SOLO = ("fwd_solo_s", "bwd_solo_s")


class ProfileError(ValueError):
    """A profile that cannot be planned: the message names the field."""


def load_profile(src):
    """A profile dict (or a path to its JSON), checked: layers with fwd_s, bwd_s, act_bytes,
    param_bytes, all >= 0."""
    if isinstance(src, str):
        try:
            with open(src) as f:
                src = json.load(f)
        except OSError as e:
            raise ProfileError(f"cannot read profile {src}: {e.strerror}")
        except ValueError as e:
            raise ProfileError(f"profile is not JSON: {e}")
    if not isinstance(src, dict) or not isinstance(src.get("layers"), list) or not src["layers"]:
        raise ProfileError("profile: a JSON object with a non-empty 'layers' list")
    for n, layer in enumerate(src["layers"]):
        for f in ("fwd_s", "bwd_s", "act_bytes", "param_bytes"):
            v = layer.get(f) if isinstance(layer, dict) else None
            if not _nonneg(v):
                raise ProfileError(f"profile: layers[{n}].{f} must be a number >= 0, not {v!r}")
        for f in LAYER_EXTRA:
            if f in layer and not _nonneg(layer[f]):
                raise ProfileError(f"profile: layers[{n}].{f} must be a number >= 0, not "
                                   f"{layer[f]!r}")
    solo = [f for f in LAYER_SOLO if f in src["layers"][0]]
    for n, layer in enumerate(src["layers"]):
        for f in solo:
            if not _nonneg(layer.get(f)):
                raise ProfileError(f"profile: layers[{n}].{f} must be a number >= 0 (every "
                                   f"layer or none), not {layer.get(f)!r}")
    r = src.get("ranks_at_once", 1)
    if not isinstance(r, int) or isinstance(r, bool) or r < 1:
        raise ProfileError(f"profile: 'ranks_at_once' must be an integer >= 1, not {r!r}")
    ov = src.get("overhead", {})
    if not isinstance(ov, dict):
        raise ProfileError(f"profile: 'overhead' must be an object, not {ov!r}")
    for f in OVERHEAD:
        if f in ov and not _nonneg(ov[f]):
            raise ProfileError(f"profile: overhead.{f} must be a number >= 0, not {ov[f]!r}")
    return src


def _nonneg(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 and v == v


def other_load(rho, R, C):
    """e of the module docstring's s(k) = max(1, (k + e) / C) such that s(R) / s(1) = rho
    (R ranks at once against one alone on C cores); None where rho <= 1 (no sharing seen).
    Where two loads fit (rho from R / C to (R + C - 1) / C: one rank alone had a core, or
    even alone it shared one), the smaller: both give the same f(1) and differ only for
    stages of 2 to R - 1 replicas. Above (R + C - 1) / C (slower than sharing alone makes
    it), C - 1."""
    if rho <= 1.0:
        return None
    if rho >= R / C:
        return min(rho * C - R, C - 1.0)  # s(1) = 1: one rank alone had a core
    return (R - rho) / (rho - 1)  # s(1) > 1: even alone it shared a core


def sharing(prof, cluster):
    """{'cores', 'ranks_at_once', 'other_load', 'f': f(k)} (the module docstring's shared
    host) or None: no host_cores, or solo times no faster than all ranks at once."""
    C = cluster.host_cores
    if C is None:
        return None
    R = prof.get("ranks_at_once", 1)
    layers = prof["layers"]
    if LAYER_SOLO[0] in layers[0]:
        solo = sum(x["fwd_solo_s"] + x["bwd_solo_s"] for x in layers)
        both = sum(x["fwd_s"] + x["bwd_s"] for x in layers)
        e = other_load(both / solo, R, C) if solo > 0 else None
        if e is None:
            return None
    else:
        e = 0.0

    def s(k):
        return max(1.0, (k + e) / C)
    return {"cores": C, "ranks_at_once": R, "other_load": e, "f": lambda k: s(k) / s(R)}


class _Chain:
    """One level's view of the chain: base(i, j) is the time of layers i..j-1 on one unit of
    this level (one worker at the innermost level; one whole component of the level below,
    its best pipeline, above it)."""

    def __init__(self, layers, cluster, base=None, overhead=None, share=None):
        self.cl = cluster
        self.share = share if base is None else None  # innermost level only
        self.base = base
        self.n = len(layers)
        self.comp = [0.0]
        self.par = [0]
        self.extra = {f: [0.0] for f in LAYER_EXTRA}
        for layer in layers:
            self.comp.append(self.comp[-1] + layer["fwd_s"] + layer["bwd_s"])
            self.par.append(self.par[-1] + layer["param_bytes"])
            for f in LAYER_EXTRA:
                self.extra[f].append(self.extra[f][-1] + layer.get(f, 0.0))
        self.act = [layer["act_bytes"] for layer in layers]
        # the measured terms count once, at the innermost level (above it, base() has them)
        self.ov = {f: 0.0 for f in OVERHEAD}
        if base is None and overhead:
            self.ov.update({f: overhead.get(f, 0.0) for f in OVERHEAD})

    def _x(self, f, i, j):
        return self.extra[f][j] - self.extra[f][i]

    def overheads(self, i, j, how):
        """(fixed, update): a replica's seconds per minibatch besides its layers' compute and
        its sync (the module docstring's terms; 0 above the innermost level)."""
        if self.base is not None:
            return 0.0, 0.0
        fixed = self.ov["microbatch_s"] + 2 * self.ov["message_s"] * ((i > 0) + (j < self.n))
        upd = self._x("stash_s", i, j)
        if self.par[j] > self.par[i]:
            upd += self.ov["opt_call_s"] + self._x("opt_s", i, j)
        if how in ("tally", "ring"):
            upd += self._x("grad_copy_s", i, j)
        return fixed, upd

    def busy(self, i, j, m):
        """A replica's compute of one minibatch: its layers' forward and backward (x f(m) on a
        shared host) and the fixed per-minibatch cost; no sync, no update."""
        b = self.base(i, j) if self.base else self.comp[j] - self.comp[i]
        if self.share:
            b *= self.share["f"](m)
        return b + self.overheads(i, j, None)[0]

    def stage(self, i, j, m, how=None):
        """(T(i, j, m), how the replicas aggregate, sync seconds); how: as Cluster.sync."""
        s, how = self.cl.sync(self.par[j] - self.par[i], m, how)
        fixed, upd = self.overheads(i, j, how)
        b = self.busy(i, j, m) - fixed
        return (self.cl.combine(b + fixed, s) + upd) / m, how, s

    def cpu_bound(self, i, j, m):
        """The shared host's capacity: layers i..j-1's compute with all m ranks computing,
        over m (0 without sharing)."""
        if not self.share:
            return 0.0
        return (self.comp[j] - self.comp[i]) * self.share["f"](m) / m

    def edge(self, i):
        """2 C(i): layer i-1's activation forward and its gradient back."""
        return 2 * self.cl.transfer(self.act[i - 1])


def _dp(ch, M, i0=0, N=None):
    """The program over layers i0..N-1 on M units: (time, [(first, end, replicas)])."""
    N = ch.n if N is None else N
    INF = math.inf
    A = [[INF] * (M + 1) for _ in range(N + 1)]
    choice = [[None] * (M + 1) for _ in range(N + 1)]
    for j in range(i0 + 1, N + 1):
        for m in range(1, M + 1):
            best, arg = ch.stage(i0, j, m)[0], None
            for i in range(i0 + 1, j):
                e = ch.edge(i)
                for mp in range(1, m):
                    t = max(A[i][m - mp], e, ch.stage(i, j, mp)[0])
                    if t < best:
                        best, arg = t, (i, mp)
            A[j][m], choice[j][m] = best, arg
    A[N][M] = max(A[N][M], ch.cpu_bound(i0, N, M))
    bounds = []
    j, m = N, M
    while True:
        c = choice[j][m]
        if c is None:
            bounds.append((i0, j, m))
            break
        i, mp = c
        bounds.append((i, j, mp))
        j, m = i, m - mp
    return A[N][M], bounds[::-1]


def depths(ch, bounds, period):
    """Each stage's 1F1B window (minibatches in flight per replica) such that the round trip
    fits behind it, PipeDream's rule made to hold with transfers (module docstring, "Windows"):
    [{in_flight, noam, round_trip_s, busy_s, stash_bytes}], stages as bounds [(i, j, m)]."""
    out = [None] * len(bounds)
    lat, f_next, m_next = 0.0, 0, 1
    for s in range(len(bounds) - 1, -1, -1):
        i, j, m = bounds[s]
        noam = -(-sum(x[2] for x in bounds[s:]) // m)
        c = ch.busy(i, j, m)
        rt = ch.edge(j) + lat if s < len(bounds) - 1 else 0.0
        cycle = m * period  # a replica takes one of every m minibatches
        need = math.ceil((c + rt) / cycle * (1 - 1e-9)) if cycle > 0 else 1
        # a window no shallower, in minibatches of the whole pipeline, than the next stage's:
        # an upstream window shallower than the downstream one can deadlock 1F1B
        f = max(noam, need, -(-f_next * m_next // m), 1)
        out[s] = {"in_flight": f, "noam": noam, "round_trip_s": rt, "busy_s": c,
                  "stash_bytes": f * (ch.par[j] - ch.par[i])}
        # the latency this stage adds to the round trip of the stage before it: from an
        # activation in to its gradient out (its backward of t waits for its own round trip
        # and for the f - 1 forwards it runs first)
        lat = c + max(rt, (f - 1) * cycle)
        f_next, m_next = f, m
    return out


def _describe(ch, layers, bounds, total):
    stages = []
    rank = 0
    for s, (i, j, m) in enumerate(bounds):
        t, how, sync = ch.stage(i, j, m)
        fixed, upd = ch.overheads(i, j, how)
        stages.append({"stage": s, "layers": [i, j], "names": [layers[x].get("name", str(x))
                                                              for x in range(i, j)],
                       "replicas": m, "ranks": list(range(rank, rank + m)),
                       "aggregation": how, "compute_s": ch.comp[j] - ch.comp[i],
                       "param_bytes": ch.par[j] - ch.par[i], "sync_s": sync,
                       "fixed_s": fixed, "update_s": upd, "time_s": t,
                       "send_s": ch.edge(j) if j < ch.n else 0.0})
        if ch.share:
            stages[-1]["compute_factor"] = ch.share["f"](m)
        rank += m
    for st, d in zip(stages, depths(ch, bounds, total)):
        st.update(d)
    out = {"stages": stages, "predicted_s_per_minibatch": total,
           # the first stage's window: how many minibatches the pipeline holds per replica
           # there (PipeDream's NOAM, ceil(workers / its replicas), or deeper: depths())
           "in_flight": stages[0]["in_flight"]}
    if ch.share:
        out["shared_host"] = _share_out(ch, ch.cl.workers)
    return out


def _share_out(ch, m):
    return {k: ch.share[k] for k in ("cores", "ranks_at_once", "other_load")} | \
        {"cpu_bound_s": ch.cpu_bound(0, ch.n, m)}


def load_levels(cluster):
    """[Cluster], innermost level first: a Cluster, a dict (flat, or {"levels": [...]}, each
    level a flat cluster whose 'workers' counts units of the level below) or a JSON path."""
    if isinstance(cluster, Cluster):
        return [cluster]
    if isinstance(cluster, str):
        try:
            with open(cluster) as f:
                cluster = json.load(f)
        except OSError as e:
            raise ClusterError(f"cannot read cluster file {cluster}: {e.strerror}")
        except ValueError as e:
            raise ClusterError(f"cluster file is not JSON: {e}")
    if isinstance(cluster, dict) and "levels" in cluster:
        lv = cluster["levels"]
        if set(cluster) != {"levels"} or not isinstance(lv, list) or not lv:
            raise ClusterError("cluster: 'levels' must be a non-empty list and alone")
        out = []
        for n, x in enumerate(lv):
            try:
                out.append(Cluster.from_dict(x))
            except ClusterError as e:
                raise ClusterError(f"levels[{n}]: {e}") from None
        return out
    return [Cluster.from_dict(cluster)]


def _chains(layers, levels, overhead=None, share=None):
    """One _Chain per level; level k's base(i, j) is level k-1's best pipeline of layers
    i..j-1 on all of its units (PipeDream's hierarchical program)."""
    chains = [_Chain(layers, levels[0], overhead=overhead, share=share)]
    for k in range(1, len(levels)):
        below, units, memo = chains[-1], levels[k - 1].workers, {}

        def base(i, j, below=below, units=units, memo=memo):
            if (i, j) not in memo:
                memo[(i, j)] = _dp(below, units, i, j)
            return memo[(i, j)][0]
        chains.append(_Chain(layers, levels[k], base))
        chains[-1].memo = memo
    return chains


def _nested(chains, k, layers, bounds, total):
    """The plan at level k, with each stage's plan one level down ('inner')."""
    d = _describe(chains[k], layers, bounds, total)
    for st in d["stages"]:
        st.pop("ranks")
        if k > 0:
            i, j = st["layers"]
            t, b = chains[k].memo[(i, j)] if (i, j) in chains[k].memo else \
                _dp(chains[k - 1], chains[k - 1].cl.workers, i, j)
            st["inner"] = _nested(chains, k - 1, layers, b, t)
    return d


def _flatten(p, unit):
    """The runtime's stages (ranks numbered unit after unit): an inner stage of an outer stage
    with r replicas becomes one stage of r x its replicas, aggregating as the outer level says
    where r > 1."""
    out = []
    for st in p["stages"]:
        inner = _flatten(st["inner"], 1) if "inner" in st else \
            [{"layers": st["layers"], "names": st["names"], "replicas": 1,
              "aggregation": "none"}]
        for x in inner:
            r = st["replicas"] * x["replicas"]
            how = st["aggregation"] if st["replicas"] > 1 else x["aggregation"]
            out.append({"layers": x["layers"], "names": x["names"], "replicas": r,
                        "aggregation": how if r > 1 else "none"})
    rank = 0
    for n, x in enumerate(out):
        x["stage"] = n
        x["ranks"] = list(range(rank, rank + x["replicas"]))
        rank += x["replicas"]
    return out


def plan(profile, cluster):
    """The best plan of profile (dict or path) on cluster (Cluster, dict or path; with
    'levels', PipeDream's hierarchical program, innermost level first)."""
    prof = load_profile(profile)
    levels = load_levels(cluster)
    layers = prof["layers"]
    if any(lv.host_cores is not None for lv in levels[1:]):
        raise ClusterError("cluster: 'host_cores' only at the innermost level (the workers "
                           "of one host)")
    share = sharing(prof, levels[0])
    if len(levels) == 1:
        ch = _Chain(layers, levels[0], overhead=prof.get("overhead"), share=share)
        total, bounds = _dp(ch, levels[0].workers)
        out = {"version": PROFILE_VERSION, "cluster": levels[0].to_dict(),
               "minibatch": prof.get("minibatch"), "layer_count": ch.n}
        out.update(_describe(ch, layers, bounds, total))
        dp_t, dp_how, _ = ch.stage(0, ch.n, levels[0].workers)
        dp_t = max(dp_t, ch.cpu_bound(0, ch.n, levels[0].workers))
        out["data_parallel"] = {"predicted_s_per_minibatch": dp_t, "aggregation": dp_how}
        return out
    chains = _chains(layers, levels, prof.get("overhead"), share)
    top = chains[-1]
    total, bounds = _dp(top, levels[-1].workers)
    nested = _nested(chains, len(levels) - 1, layers, bounds, total)
    workers = math.prod(lv.workers for lv in levels)
    out = {"version": PROFILE_VERSION,
           "cluster": {"levels": [lv.to_dict() for lv in levels], "workers": workers},
           "minibatch": prof.get("minibatch"), "layer_count": top.n,
           "stages": _flatten(nested, 1), "levels": nested,
           "predicted_s_per_minibatch": total,
           "in_flight": None}
    out["in_flight"] = math.ceil(workers / out["stages"][0]["replicas"])
    for st in out["stages"]:
        st.setdefault("time_s", None)
    # pure data parallelism: every level's replicas of the whole chain, each level synced
    t = top.stage(0, top.n, levels[-1].workers)
    out["data_parallel"] = {"predicted_s_per_minibatch": _dp_only(chains, layers),
                            "aggregation": t[1]}
    return out


def _dp_only(chains, layers):
    """Time per minibatch of one stage replicated at every level."""
    t = chains[0].stage(0, chains[0].n, chains[0].cl.workers)[0]
    t = max(t, chains[0].cpu_bound(0, chains[0].n, chains[0].cl.workers))
    for ch in chains[1:]:
        s, _ = ch.cl.sync(ch.par[-1], ch.cl.workers)
        t = ch.cl.combine(t, s) / ch.cl.workers
    return t


def evaluate(profile, cluster, stages):
    """The cost model's time per minibatch of a given flat plan (stages as the runtime reads
    them: 'layers' [i, j], 'replicas' or 'ranks', 'aggregation' 'ring', 'tally' or anything
    else for the faster): {'predicted_s_per_minibatch', 'stages': [{time_s, sync_s, ...}]}.
    The same terms as plan(): max over stages of T (the module docstring: compute, sync and
    the profile's measured fixed and update terms) and over boundaries of 2 C; plan()'s own
    stages give plan()'s prediction."""
    prof = load_profile(profile)
    levels = load_levels(cluster)
    if len(levels) != 1:
        raise ClusterError("evaluate: a flat cluster (no 'levels')")
    ch = _Chain(prof["layers"], levels[0], overhead=prof.get("overhead"),
                share=sharing(prof, levels[0]))
    out, total, end, ranks = [], 0.0, 0, 0
    for n, st in enumerate(stages):
        i, j = st["layers"]
        if i != end or not i < j <= ch.n:
            raise ProfileError(f"evaluate: stage {n} layers {[i, j]} do not follow layer {end}")
        end = j
        m = st.get("replicas") or len(st["ranks"])
        ranks += m
        how = st.get("aggregation")
        t, how, s = ch.stage(i, j, m, how if how in ("ring", "tally") else None)
        fixed, upd = ch.overheads(i, j, how)
        send = ch.edge(j) if j < ch.n else 0.0
        out.append({"layers": [i, j], "replicas": m, "aggregation": how,
                    "compute_s": ch.comp[j] - ch.comp[i], "sync_s": s, "fixed_s": fixed,
                    "update_s": upd, "time_s": t, "send_s": send})
        total = max(total, t, send)
    if end != ch.n:
        raise ProfileError(f"evaluate: the stages end at layer {end}, the chain has {ch.n}")
    res = {"predicted_s_per_minibatch": max(total, ch.cpu_bound(0, ch.n, ranks)),
           "stages": out}
    bounds = [(x["layers"][0], x["layers"][1], x["replicas"]) for x in out]
    for x, d in zip(out, depths(ch, bounds, res["predicted_s_per_minibatch"])):
        x.update(d)
    if ch.share:
        for x in out:
            x["compute_factor"] = ch.share["f"](x["replicas"])
        res["shared_host"] = _share_out(ch, ranks)
    return res


def exhaustive(profile, cluster):
    """Every split of the chain into contiguous stages and every replica count per stage
    using all workers: (best time, bounds). For checking the program on small chains."""
    prof = load_profile(profile)
    if isinstance(cluster, dict):
        cluster = Cluster.from_dict(cluster)
    ch = _Chain(prof["layers"], cluster, overhead=prof.get("overhead"),
                share=sharing(prof, cluster))
    best = [math.inf, None]

    def rec(i, m_left, acc, bounds):
        if i == ch.n:
            if m_left == 0 and acc < best[0]:
                best[0], best[1] = acc, list(bounds)
            return
        for j in range(i + 1, ch.n + 1):
            for m in range(1, m_left + 1):
                t = max(acc, ch.stage(i, j, m)[0])
                if j < ch.n:
                    t = max(t, ch.edge(j))
                bounds.append((i, j, m))
                rec(j, m_left - m, t, bounds)
                bounds.pop()

    rec(0, cluster.workers, 0.0, [])
    return max(best[0], ch.cpu_bound(0, ch.n, cluster.workers)), best[1]


def format_plan(p):
    lines = [f"plan: {len(p['stages'])} stage(s) on {p['cluster']['workers']} worker(s), "
             f"{p['in_flight']} minibatch(es) in flight"]
    for s in p["stages"]:
        i, j = s["layers"]
        lines.append(f"  stage {s['stage']}: layers {i}..{j - 1} ({', '.join(s['names'])}) "
                     f"x{s['replicas']} ranks {s['ranks'][0]}..{s['ranks'][-1]} "
                     f"aggregation {s['aggregation']}  "
                     + (f"compute {s['compute_s'] * 1e3:.3f} ms  " if "compute_s" in s else "")
                     + (f"(x{s['compute_factor']:.2f} shared host)  " if "compute_factor" in s
                        else "")
                     + (f"fixed {s['fixed_s'] * 1e3:.3f} ms  update {s['update_s'] * 1e3:.3f} ms  "
                        if s.get("fixed_s") or s.get("update_s") else "")
                     + (f"sync {s['sync_s'] * 1e3:.3f} ms  per minibatch {s['time_s'] * 1e3:.3f} ms"
                        if s.get("time_s") is not None else "(hierarchical: see 'levels')")
                     + (f"\n    in flight {s['in_flight']} (NOAM {s['noam']}; round trip "
                        f"{s['round_trip_s'] * 1e3:.3f} ms behind compute {s['busy_s'] * 1e3:.3f} "
                        f"ms a minibatch), {s['in_flight']} weight stash(es) "
                        f"{s['stash_bytes'] / 1e6:.3f} MB per replica"
                        if "in_flight" in s else ""))
    sh = p.get("shared_host")
    if sh:
        lines.append(f"  shared host: {sh['cores']} core(s), profiled by {sh['ranks_at_once']} "
                     f"rank(s) at once, other load {sh['other_load']:.2f} (measured); a stage's "
                     f"compute x f(its replicas); all ranks' compute bound "
                     f"{sh['cpu_bound_s'] * 1e3:.3f} ms")
    lines.append(f"predicted time per minibatch: {p['predicted_s_per_minibatch'] * 1e3:.3f} ms "
                 f"(pure data parallel: {p['data_parallel']['predicted_s_per_minibatch'] * 1e3:.3f}"
                 f" ms, {p['data_parallel']['aggregation']})")
    return "\n".join(lines)


__all__ = ["plan", "evaluate", "exhaustive", "load_levels", "format_plan", "load_profile", "ProfileError",
           "ClusterError"]
