# SPDX-License-Identifier: Apache-2.0
"""horovod.torch on Tally: every name of tally.torch (see tally.horovod, tally.collectives)."""
from tally.torch import *  # noqa: F401,F403
from tally.torch import Compression, DistributedOptimizer, broadcast_optimizer_state, broadcast_parameters  # noqa: F401
from tally.torch import broadcast_object  # noqa: F401
from tally.agent import TallyError as HorovodInternalError  # noqa: F401
Adasum = "Adasum"  # refused by allreduce / DistributedOptimizer with a clear error
