# SPDX-License-Identifier: Apache-2.0
"""PipeDream's partitioning dynamic program (Narayanan et al., SOSP'19, section 3.1) over a
profiled layer chain on one level of workers: stage boundaries, replicas per stage, the
number of minibatches in flight, and per stage how its replicas aggregate (cost.Cluster.sync:
Tally appliances or ring allreduce, the faster).

Time of a stage of layers i..j-1 on m replicas (per minibatch, steady state):
    T(i, j, m) = max(sum of fwd+bwd over the layers, sync(param bytes, m)) / m
and of the best pipeline of the first j layers on m workers:
    A(j, m) = min(T(0, j, m),
                  min over i < j, m' < m of max(A(i, m - m'), 2 C(i), T(i, j, m')))
with C(i) the transfer of layer i-1's activation. The pipeline's time per minibatch is its
slowest part, A(N, M): every worker is used."""
import json
import math

from .cost import Cluster, ClusterError

PROFILE_VERSION = 1


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
            if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0 or v != v:
                raise ProfileError(f"profile: layers[{n}].{f} must be a number >= 0, not {v!r}")
    return src


class _Chain:
    def __init__(self, layers, cluster):
        self.cl = cluster
        self.n = len(layers)
        self.comp = [0.0]
        self.par = [0]
        for layer in layers:
            self.comp.append(self.comp[-1] + layer["fwd_s"] + layer["bwd_s"])
            self.par.append(self.par[-1] + layer["param_bytes"])
        self.act = [layer["act_bytes"] for layer in layers]

    def stage(self, i, j, m):
        """(T(i, j, m), how the replicas aggregate, sync seconds)."""
        s, how = self.cl.sync(self.par[j] - self.par[i], m)
        return max(self.comp[j] - self.comp[i], s) / m, how, s

    def edge(self, i):
        """2 C(i): layer i-1's activation forward and its gradient back."""
        return 2 * self.cl.transfer(self.act[i - 1])


def _dp(ch, M):
    N = ch.n
    INF = math.inf
    A = [[INF] * (M + 1) for _ in range(N + 1)]
    choice = [[None] * (M + 1) for _ in range(N + 1)]
    for j in range(1, N + 1):
        for m in range(1, M + 1):
            best, arg = ch.stage(0, j, m)[0], None
            for i in range(1, j):
                e = ch.edge(i)
                for mp in range(1, m):
                    t = max(A[i][m - mp], e, ch.stage(i, j, mp)[0])
                    if t < best:
                        best, arg = t, (i, mp)
            A[j][m], choice[j][m] = best, arg
    bounds = []
    j, m = N, M
    while True:
        c = choice[j][m]
        if c is None:
            bounds.append((0, j, m))
            break
        i, mp = c
        bounds.append((i, j, mp))
        j, m = i, m - mp
    return A[N][M], bounds[::-1]


def _describe(ch, layers, bounds, total):
    stages = []
    rank = 0
    for s, (i, j, m) in enumerate(bounds):
        t, how, sync = ch.stage(i, j, m)
        stages.append({"stage": s, "layers": [i, j], "names": [layers[x].get("name", str(x))
                                                              for x in range(i, j)],
                       "replicas": m, "ranks": list(range(rank, rank + m)),
                       "aggregation": how, "compute_s": ch.comp[j] - ch.comp[i],
                       "param_bytes": ch.par[j] - ch.par[i], "sync_s": sync,
                       "time_s": t,
                       "send_s": ch.edge(j) if j < ch.n else 0.0})
        rank += m
    return {"stages": stages, "predicted_s_per_minibatch": total,
            # PipeDream's NOAM: enough minibatches to keep every worker busy
            "in_flight": math.ceil(ch.cl.workers / bounds[0][2])}


def plan(profile, cluster):
    """The best plan of profile (dict or path) on cluster (Cluster, dict or path)."""
    prof = load_profile(profile)
    if isinstance(cluster, str):
        cluster = Cluster.load(cluster)
    elif isinstance(cluster, dict):
        cluster = Cluster.from_dict(cluster)
    ch = _Chain(prof["layers"], cluster)
    total, bounds = _dp(ch, cluster.workers)
    out = {"version": PROFILE_VERSION, "cluster": cluster.to_dict(),
           "minibatch": prof.get("minibatch"), "layer_count": ch.n}
    out.update(_describe(ch, prof["layers"], bounds, total))
    dp_t, dp_how, _ = ch.stage(0, ch.n, cluster.workers)
    out["data_parallel"] = {"predicted_s_per_minibatch": dp_t, "aggregation": dp_how}
    return out


def exhaustive(profile, cluster):
    """Every split of the chain into contiguous stages and every replica count per stage
    using all workers: (best time, bounds). For checking the program on small chains."""
    prof = load_profile(profile)
    if isinstance(cluster, dict):
        cluster = Cluster.from_dict(cluster)
    ch = _Chain(prof["layers"], cluster)
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
    return best[0], best[1]


def format_plan(p):
    lines = [f"plan: {len(p['stages'])} stage(s) on {p['cluster']['workers']} worker(s), "
             f"{p['in_flight']} minibatch(es) in flight"]
    for s in p["stages"]:
        i, j = s["layers"]
        lines.append(f"  stage {s['stage']}: layers {i}..{j - 1} ({', '.join(s['names'])}) "
                     f"x{s['replicas']} ranks {s['ranks'][0]}..{s['ranks'][-1]} "
                     f"aggregation {s['aggregation']}  compute {s['compute_s'] * 1e3:.3f} ms  "
                     f"sync {s['sync_s'] * 1e3:.3f} ms  per minibatch {s['time_s'] * 1e3:.3f} ms")
    lines.append(f"predicted time per minibatch: {p['predicted_s_per_minibatch'] * 1e3:.3f} ms "
                 f"(pure data parallel: {p['data_parallel']['predicted_s_per_minibatch'] * 1e3:.3f}"
                 f" ms, {p['data_parallel']['aggregation']})")
    return "\n".join(lines)


__all__ = ["plan", "exhaustive", "format_plan", "load_profile", "ProfileError", "ClusterError"]
