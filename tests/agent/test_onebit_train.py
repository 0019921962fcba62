#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Convergence and bytes of tally.optim.OneBitAdam vs Adam through the appliance (4 torchrun
workers, tally-udpd), CI size: perf/onebit_report.py --quick on the digits MLP (6 epochs, 66
steps, warm-up 15%) and, with TALLY_TEST_ONEBIT_FULL=1, also the transformer and the LAMB pair.
Pass: the report's verdicts (final train loss not worse by more than 1% or test accuracy not
worse by more than 0.5 points; the appliance's push_bytes >= 4x less over the run and >= 20x
less per compressed step). Exit 77 (skip) without torch / sklearn, the appliance binary, or
the agent's set_compression (the C side of 1-bit compression).
"""
import os
import subprocess
import sys
import tempfile

try:
    import torch  # noqa: F401
    import sklearn  # noqa: F401
except ImportError as e:
    print(f"SKIP: {e}")
    sys.exit(77)
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "gpu_agent", "python"))
import tally  # noqa: E402

if not hasattr(tally.Agent, "set_compression"):
    print("SKIP: tally.Agent has no set_compression (the C side of 1-bit compression)")
    sys.exit(77)

full = os.environ.get("TALLY_TEST_ONEBIT_FULL") == "1"
with tempfile.TemporaryDirectory(prefix="tally-onebit-") as out:
    cmd = [sys.executable, os.path.join(ROOT, "perf", "onebit_report.py"), "--quick", "--out", out]
    if not full:
        cmd += ["--models", "mlp", "--pairs", "adam"]
    if os.environ.get("TALLY_TEST_UDPD"):
        os.environ["PATH"] = os.path.dirname(os.environ["TALLY_TEST_UDPD"]) + ":" + os.environ["PATH"]
    rc = subprocess.call(cmd)
sys.exit(rc)
