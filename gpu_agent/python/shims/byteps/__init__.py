# SPDX-License-Identifier: Apache-2.0
"""Opt-in shim (gpu_agent/python/shims on PYTHONPATH): `import byteps.torch as bps` runs on
Tally (tally.byteps). Not the real BytePS."""
__version__ = "tally"
