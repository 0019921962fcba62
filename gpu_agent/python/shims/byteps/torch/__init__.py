# SPDX-License-Identifier: Apache-2.0
"""byteps.torch on Tally: BytePS's names (tally.byteps) and the rest of tally.torch."""
from tally.torch import *  # noqa: F401,F403
from tally.byteps import *  # noqa: F401,F403
from tally.byteps import declared  # noqa: F401
