# SPDX-License-Identifier: Apache-2.0
"""mpi4py (Debian's, built for Open MPI) with numpy buffers, and a data-parallel PyTorch
loop that averages gradients with comm.Allreduce, under mpirun, with or without
LD_PRELOAD=libtally_mpi.so. Checks every numpy sum exactly (small integers); writes the
loop's final parameters to OUT.RANK.npy for the driver to compare with a plain-MPI run.
test_mpi4py.py OUT"""
import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, world = comm.Get_rank(), comm.Get_size()
fails = 0


def vals(r, n, salt, dt):
    rng = np.random.default_rng(1000 * salt + r)
    return rng.integers(-512, 512, n).astype(dt)


for k, n in enumerate([256, 1024, 16384, 262144, 1 << 20]):
    for dt, mt in ((np.float32, MPI.FLOAT), (np.int32, MPI.INT32_T)):
        want = sum(vals(p, n, k, np.int64) for p in range(world)).astype(dt)
        a = vals(rank, n, k, dt)
        out = np.empty_like(a)
        comm.Allreduce([a, mt], [out, mt], op=MPI.SUM)
        inp = a.copy()
        comm.Allreduce(MPI.IN_PLACE, [inp, mt], op=MPI.SUM)
        for name, got in (("out of place", out), ("in place", inp)):
            if not np.array_equal(got, want):
                print(f"rank {rank}: FAIL numpy {dt.__name__} n={n} {name}", flush=True)
                fails += 1

# Data-parallel training: each rank its shard of one synthetic regression set; gradients
# flattened into one f32 buffer, summed with comm.Allreduce, divided by the world size.
import torch  # noqa: E402

torch.manual_seed(0)
X = torch.randn(4096, 64)
w_true = torch.randn(64, 1)
Y = X @ w_true + 0.01 * torch.randn(4096, 1)
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
shard = slice(rank * 4096 // world, (rank + 1) * 4096 // world)
params = list(model.parameters())
buf = np.empty(sum(p.numel() for p in params), dtype=np.float32)
for step in range(40):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(X[shard]), Y[shard])
    loss.backward()
    o = 0
    for p in params:
        buf[o:o + p.numel()] = p.grad.numpy().ravel()
        o += p.numel()
    comm.Allreduce(MPI.IN_PLACE, [buf, MPI.FLOAT], op=MPI.SUM)
    buf /= world
    o = 0
    for p in params:
        p.grad.copy_(torch.from_numpy(buf[o:o + p.numel()]).view_as(p.grad))
        o += p.numel()
    opt.step()
final = np.concatenate([p.detach().numpy().ravel() for p in params])
np.save(f"{sys.argv[1]}.{rank}.npy", final)
total = comm.allreduce(fails, op=MPI.SUM)
if rank == 0:
    print(f"test_mpi4py: {'FAIL' if total else 'ok'} ({total} failures), "
          f"{buf.nbytes} gradient bytes per step, last loss {loss.item():.5f}", flush=True)
sys.exit(1 if total else 0)
