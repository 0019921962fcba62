# SPDX-License-Identifier: Apache-2.0
"""Tally: gradient aggregation through Tally appliances (BytePS architecture).

tally.Agent / tally.init()  the training-host agent (libtally_agent over ctypes)
tally.torch                 DDP communication hook, DistributedOptimizer, broadcast_parameters
tally.optim                 fused optimizer updates (CPU twins / CUDA kernels)
"""
from .agent import (Agent, ApplianceDrainingError, RankSilentError, TallyError, init,  # noqa: F401
                    shutdown)

__version__ = "0.1.0"
