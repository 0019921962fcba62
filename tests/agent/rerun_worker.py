# SPDX-License-Identifier: Apache-2.0
"""A Horovod-shaped worker for test_rerun.py under torchrun: no init_process_group, no
TALLY_JOB_ID; hvd.init(), a few allreduces; writes 'RESULT rank job identity sums' to $RERUN_OUT/rank<r>."""
import os
import sys

import torch

import tally.torch as hvd

hvd.init()
a = hvd.init()
sums = []
for step in range(int(sys.argv[1]) if len(sys.argv) > 1 else 5):
    sums.append(hvd.allreduce(torch.tensor([float(hvd.rank() + 1 + step)]), op=hvd.Sum, name="x").item())
ident = a.identity.replace(" ", "_")
with open(os.path.join(os.environ["RERUN_OUT"], f"rank{hvd.rank()}"), "w") as f:
    f.write(f"RESULT {hvd.rank()} {a.job_id} {ident} {sums}\n")
