# SPDX-License-Identifier: Apache-2.0
"""Aggregation cost of one stage's replicas: Tally appliances (push + pull, BytePS's formulas)
or a ring allreduce, whichever the model says is faster.

The formulas are those of perf/perf_model.py (`tally-perf model`): ring_time and tally_time
there. They are restated here because perf/ is not part of the installed package;
tests/plan/test_planner.py checks both give the same seconds at random points."""
import json

EPS = 1e-12


class ClusterError(ValueError):
    """A cluster file that cannot be used: the message names the field."""


def ring_time(m, n, link_bps, alpha_s=0.0):
    """Ring allreduce of m bytes over n workers: 2(n-1)/n * m / B + 2(n-1) alpha."""
    return 2 * (n - 1) / n * m / link_bps + 2 * (n - 1) * alpha_s


def tally_time(m, n, k, worker_bps, app_bps, alpha_s=0.0, cores=None, engine_bps=None):
    """Push + pull through k appliances: max(worker link m/B, appliance link m n/(k B_a),
    summation m n/(k cores E)) + 2 alpha."""
    t = {"worker_link": m / worker_bps, "appliance_link": m * n / (k * app_bps)}
    if cores:
        t["compute"] = m * n / (k * cores * engine_bps)
    bound = max(t, key=t.get)
    return t[bound] + 2 * alpha_s, bound


class Cluster:
    """workers: how many; link_gbit: each worker's link (stage-to-stage and ring); alpha_us:
    latency per step; appliance (optional): {count, link_gbit, cores, engine_gbit}; overlap:
    whether the runtime aggregates a stage's gradients while it computes (PipeDream's model,
    a stage costs max(compute, sync)) or after its backward (compute + sync; what
    tally.plan.runtime does: it sums a replica's gradients once its backward is done);
    host_cores (optional): the workers share one host of this many cores (an emulated cluster:
    every rank a process of one machine), so a stage computes faster while fewer ranks
    compute at once (planner.py's docstring, "Shared host"); absent, each worker has its own."""

    def __init__(self, workers, link_gbit, alpha_us=5.0, appliance=None, overlap=True,
                 host_cores=None):
        if not isinstance(workers, int) or workers < 1:
            raise ClusterError(f"cluster: 'workers' must be an integer >= 1, not {workers!r}")
        if not isinstance(link_gbit, (int, float)) or link_gbit <= 0:
            raise ClusterError(f"cluster: 'link_gbit' must be > 0, not {link_gbit!r}")
        if not isinstance(alpha_us, (int, float)) or alpha_us < 0:
            raise ClusterError(f"cluster: 'alpha_us' must be >= 0, not {alpha_us!r}")
        if not isinstance(overlap, bool):
            raise ClusterError(f"cluster: 'overlap' must be true or false, not {overlap!r}")
        if host_cores is not None and (not isinstance(host_cores, int)
                                       or isinstance(host_cores, bool) or host_cores < 1):
            raise ClusterError(f"cluster: 'host_cores' must be an integer >= 1 (the cores the "
                               f"workers share), not {host_cores!r}")
        self.overlap = overlap
        self.host_cores = host_cores
        self.workers = workers
        self.link_gbit = float(link_gbit)
        self.alpha_s = alpha_us * 1e-6
        self.link_bps = self.link_gbit * 1e9 / 8
        self.appliance = None
        if appliance is not None:
            a = dict(appliance)
            k = a.get("count", 1)
            if not isinstance(k, int) or k < 1:
                raise ClusterError(f"cluster: 'appliance.count' must be an integer >= 1, not {k!r}")
            ag = a.get("link_gbit", link_gbit)
            if not isinstance(ag, (int, float)) or ag <= 0:
                raise ClusterError(f"cluster: 'appliance.link_gbit' must be > 0, not {ag!r}")
            cores, eg = a.get("cores"), a.get("engine_gbit")
            if cores is not None and (not isinstance(eg, (int, float)) or eg <= 0):
                raise ClusterError("cluster: 'appliance.cores' needs 'appliance.engine_gbit' > 0 "
                                   "(per core, as `tally-perf engine` measures)")
            self.appliance = {"count": k, "link_gbit": float(ag), "cores": cores,
                              "engine_gbit": eg}

    @classmethod
    def load(cls, path):
        try:
            with open(path) as f:
                d = json.load(f)
        except OSError as e:
            raise ClusterError(f"cannot read cluster file {path}: {e.strerror}")
        except ValueError as e:
            raise ClusterError(f"cluster file {path} is not JSON: {e}")
        return cls.from_dict(d)

    @classmethod
    def from_dict(cls, d):
        if not isinstance(d, dict):
            raise ClusterError("cluster: a JSON object with 'workers' and 'link_gbit'")
        unknown = set(d) - {"workers", "link_gbit", "alpha_us", "appliance", "overlap",
                            "host_cores"}
        if unknown:
            raise ClusterError(f"cluster: unknown field(s) {sorted(unknown)}")
        for f in ("workers", "link_gbit"):
            if f not in d:
                raise ClusterError(f"cluster: missing '{f}'")
        return cls(d["workers"], d["link_gbit"], d.get("alpha_us", 5.0), d.get("appliance"),
                   d.get("overlap", True), d.get("host_cores"))

    def to_dict(self):
        d = {"workers": self.workers, "link_gbit": self.link_gbit,
             "alpha_us": self.alpha_s * 1e6, "appliance": self.appliance,
             "overlap": self.overlap}
        if self.host_cores is not None:
            d["host_cores"] = self.host_cores
        return d

    def combine(self, compute, sync):
        """A stage replica's time for one round: its compute and its gradients' aggregation,
        overlapped or one after the other."""
        return max(compute, sync) if self.overlap else compute + sync

    def transfer(self, nbytes):
        """One activation (or its gradient) between stages."""
        return nbytes / self.link_bps + self.alpha_s if nbytes else 0.0

    def sync(self, nbytes, n, how=None):
        """(seconds, how) to aggregate nbytes of gradients over n replicas: 'none' (n == 1 or
        no weights), 'ring' or 'tally' (the faster; ring on a tie; or the one `how` names)."""
        if how not in (None, "ring", "tally"):
            raise ClusterError(f"aggregation {how!r}: 'ring' or 'tally'")
        if n <= 1 or nbytes <= 0:
            return 0.0, "none"
        ring = ring_time(nbytes, n, self.link_bps, self.alpha_s)
        if how == "ring":
            return ring, "ring"
        if self.appliance is None:
            if how == "tally":
                raise ClusterError("aggregation 'tally' on a cluster without 'appliance'")
            return ring, "ring"
        a = self.appliance
        eng = a["engine_gbit"] * 1e9 / 8 if a["engine_gbit"] else None
        t, _ = tally_time(nbytes, n, a["count"], self.link_bps, a["link_gbit"] * 1e9 / 8,
                          self.alpha_s, a["cores"], eng)
        if how == "tally":
            return t, "tally"
        return (t, "tally") if t < ring * (1 - EPS) else (ring, "ring")
