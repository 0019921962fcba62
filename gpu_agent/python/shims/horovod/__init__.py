# SPDX-License-Identifier: Apache-2.0
"""Opt-in shim (gpu_agent/python/shims on PYTHONPATH): `import horovod.torch as hvd` runs on
Tally (tally.torch). Not the real Horovod."""
__version__ = "tally"
