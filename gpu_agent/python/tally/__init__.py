# SPDX-License-Identifier: Apache-2.0
"""Tally: gradient aggregation through Tally appliances (BytePS architecture).

tally.torch   DDP communication hook, DistributedOptimizer, broadcast_parameters
tally.optim   fused optimizer updates of libtally_agent (CPU twins / CUDA kernels)
"""
__version__ = "0.1.0"
