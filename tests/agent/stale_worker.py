# SPDX-License-Identifier: Apache-2.0
"""test_rerun.py's operator-identity worker: RANK, WORLD_SIZE, TALLY_JOB_ID / TALLY_TOKEN /
TALLY_INCARNATION from the test; `steps` allreduces, then exits without BYE (os._exit, as a
killed run does). Writes 'ok <seconds>' or 'error <seconds> <message>' to argv[2]."""
import os
import sys
import time

import torch

import tally.torch as hvd

hvd.init()
t0 = time.monotonic()
try:
    for step in range(int(sys.argv[1])):
        hvd.allreduce(torch.ones(300000), op=hvd.Sum, name="x")
    out = f"ok {time.monotonic() - t0:.1f}"
except Exception as e:  # noqa: BLE001  the test reads the text
    out = f"error {time.monotonic() - t0:.1f} {e}"
with open(sys.argv[2], "w") as f:
    f.write(out)
os._exit(0)  # no BYE: the appliance keeps the job's rounds
