# SPDX-License-Identifier: Apache-2.0
"""Pipeline and hybrid parallelism (PipeDream): profile a layer chain, plan stages x replicas
with each stage's aggregation through Tally or a ring, whichever the cost model says."""
from .cost import Cluster, ClusterError
from .planner import (ProfileError, evaluate, exhaustive, format_plan, load_levels, load_profile,
                      plan)


def profile(*a, **kw):
    """tally.plan.profiler.profile (imports torch only when called; the module is not named
    profile: importing it would replace this function with the module on the package)."""
    from .profiler import profile as _p
    return _p(*a, **kw)


__all__ = ["Cluster", "ClusterError", "ProfileError", "evaluate", "exhaustive", "format_plan",
           "load_levels", "load_profile", "plan", "profile"]
