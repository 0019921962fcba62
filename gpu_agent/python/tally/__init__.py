# SPDX-License-Identifier: Apache-2.0
"""Tally: gradient aggregation through Tally appliances (BytePS architecture).

tally.Agent / tally.init()  the training-host agent (libtally_agent over ctypes)
tally.torch                 DDP communication hook, DistributedOptimizer, broadcast_parameters
tally.optim                 fused optimizer updates (CPU twins / CUDA kernels); OneBitAdam,
                            OneBitLamb (1-bit compressed momentum through the appliance), Lamb
tally.metrics               per-rank Prometheus metrics (push_pull latency, agent counters)
"""
from . import metrics  # noqa: F401
from .agent import (Agent, ApplianceDrainingError, RankSilentError, RanksDisagreeError,  # noqa: F401
                    TallyError, TallyTimeoutError, shutdown)
from .agent import init as _init


def init(**kw):
    """The process-wide agent (created on first call); its counters go to tally.metrics."""
    return metrics.track(_init(**kw))


__version__ = "0.1.0"
