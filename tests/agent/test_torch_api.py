#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""tally's Python API over a real appliance (the software appliance over kernel UDP), two
worker processes, no torch.distributed:
  - broadcast_parameters: rank 1's differently seeded model becomes rank 0's, bit for bit;
  - DistributedOptimizer (Horovod/BytePS names): 3 SGD steps with different data per rank
    give the parameters of one process stepping on the average gradient (|diff| <= 1e-6);
  - errors: an unreachable appliance names itself and the timeout; a tensor whose size
    changed is refused with "shape changed";
  - the same run once more in the sharded local mode (TALLY_LOCAL_AGG=shard: the two workers
    as the local ranks of one machine, each on its own lane, i.e. its own job, against an
    appliance with open admission).
Exit 77 (skip) without torch or without the appliance binary.
"""
import multiprocessing as mp
import os
import sys
import time

import udpd_proc

torch = udpd_proc.need_torch()
udpd_proc.need_udpd()
import train  # noqa: E402  free_port_block

W = 2


def make_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(20, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))


def data(rank, step):
    g = torch.Generator().manual_seed(100 * step + rank)
    return torch.randn(8, 20, generator=g), torch.randint(0, 3, (8,), generator=g)


def worker(rank, port, q, shard):
    try:
        os.environ.update(TALLY_APPLIANCES=f"127.0.0.1:{port}", TALLY_JOB_ID="3", TALLY_TOKEN="99",
                          RANK=str(rank), WORLD_SIZE=str(W), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(W))
        if shard:
            os.environ.update(TALLY_LOCAL_AGG="shard", TALLY_LOCAL_ID=f"pyapi{os.getppid()}")
        import tally
        import tally.torch as tt
        model = make_model(seed=rank)
        tt.broadcast_parameters(model.state_dict(), root_rank=0)
        after_bcast = [p.detach().clone() for p in model.parameters()]
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        opt = tt.DistributedOptimizer(opt, named_parameters=model.named_parameters())
        lossf = torch.nn.CrossEntropyLoss()
        for step in range(3):
            if step == 2:
                # the sharded mode's machine segment exists while the agents live: looked
                # at before the last step, which no rank finishes (and shuts down) alone
                la = tally.init()
                seg = la.local_agg == 2 and os.path.exists(
                    f"/dev/shm/tally-lanes-3-00000063-n0-pyapi{os.getppid()}")
            x, y = data(rank, step)
            opt.zero_grad()
            lossf(model(x), y).backward()
            opt.step()
        # a declared tensor whose size changed is refused
        a = tally.init()
        t = a.declare("probe", 64, "f32")
        buf = torch.zeros(32)
        try:
            a.push_pull(t, buf.data_ptr(), 128)
            shape_err = "accepted"
        except tally.TallyError as e:
            shape_err = str(e)
        view = result_view_check(a, rank)
        # plain lists: torch tensors through a Queue share fds that die with this process
        q.put((rank, "ok", [p.detach().tolist() for p in model.parameters()],
               [p.tolist() for p in after_bcast], shape_err, seg, view))
        tally.shutdown()
    except Exception as e:  # report, never hang the parent
        import traceback
        q.put((rank, "error", traceback.format_exc(), None, None, None, None))
        raise SystemExit(1) from e


def result_view_check(a, rank):
    """push_pull(result_view=True) of 32 f32 (rank + 1 each, summed): where the result lies
    (the buffer, or the sharded mode's gather area), what it holds, what the buffer holds,
    and result_view's refusal before any push_pull of the tensor completed."""
    import ctypes
    import tally
    t = a.declare("view", 128, "f32", average=False)
    buf = torch.full((32,), float(rank + 1))
    try:
        a.result_view(t)
        none = "no error"
    except tally.TallyError as e:
        none = str(e)
    a.wait(a.push_pull(t, buf.data_ptr(), 128, result_view=True))
    addr = a.result_view(t)
    got = torch.frombuffer((ctypes.c_char * 128).from_address(addr), dtype=torch.float32).tolist()
    return addr != buf.data_ptr(), got, buf.tolist(), none


def reference():
    model = make_model(seed=0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    lossf = torch.nn.CrossEntropyLoss()
    for step in range(3):
        grads = []
        for r in range(W):
            model.zero_grad()
            x, y = data(r, step)
            lossf(model(x), y).backward()
            grads.append([p.grad.clone() for p in model.parameters()])
        for i, p in enumerate(model.parameters()):
            p.grad = sum(g[i] for g in grads) / W
        opt.step()
    return [p.detach() for p in model.parameters()]


def run(shard):
    """Two workers against a fresh appliance; the number of failed checks."""
    failed = 0
    res = {}
    tag = "sharded: " if shard else ""
    port = train.free_port_block(2)
    adm = ["--open"] if shard else ["--job", "3", "--no-auth", "--token", "99", "--world", str(W)]
    with udpd_proc.running(port, "--cores", "2", *adm):
        ctx = mp.get_context("fork")
        q = ctx.Queue()
        ps = [ctx.Process(target=worker, args=(r, port, q, shard)) for r in range(W)]
        for p in ps:
            p.start()
        for _ in range(W):
            rank, status, params, bcast, shape_err, seg, view = q.get(timeout=300)
            if status != "ok":
                print(f"FAIL {tag}rank {rank}:\n{params}")
                failed += 1
                continue
            res[rank] = ([torch.tensor(x) for x in params], [torch.tensor(x) for x in bcast], shape_err, seg, view)
        for p in ps:
            p.join(60)
    return failed, res


def verify(shard, res):
    """Checks of one run's results; the number that failed. Runs after every fork: torch 2.x
    refuses to fork a process whose autograd engine has started (reference() starts it)."""
    failed = 0
    tag = "sharded: " if shard else ""
    if len(res) == W:
        ref0 = [p.detach() for p in make_model(seed=0).parameters()]
        same = all(torch.equal(a, b) for r in range(W) for a, b in zip(res[r][1], ref0))
        print(f"{'ok  ' if same else 'FAIL'} {tag}broadcast_parameters: every rank holds rank 0's initial model")
        failed += not same
        ref = reference()
        worst = max((a - b).abs().max().item() for r in range(W) for a, b in zip(res[r][0], ref))
        ok = worst <= 1e-6
        print(f"{'ok  ' if ok else 'FAIL'} {tag}DistributedOptimizer: max |param - reference| = {worst:.3g} (tol 1e-6)")
        failed += not ok
        ok = all("shape changed" in res[r][2] for r in range(W))
        print(f"{'ok  ' if ok else 'FAIL'} {tag}changed size refused: {res[0][2]}")
        failed += not ok
        ok = all(res[r][3] == shard for r in range(W))
        print(f"{'ok  ' if ok else 'FAIL'} {tag}sharded-mode segment present: {res[0][3]}")
        failed += not ok
        # the sum (1 + 2) where result_view says; the sharded mode leaves it in the shared
        # gather area and the buffer keeps its input, the plain mode writes the buffer
        ok = all(res[r][4][0] == shard and res[r][4][1] == [3.0] * 32 and
                 res[r][4][2] == ([float(r + 1)] if shard else [3.0]) * 32 and
                 "no push_pull of it completed" in res[r][4][3] for r in range(W))
        print(f"{'ok  ' if ok else 'FAIL'} {tag}result_view: elsewhere {res[0][4][0]}, result {res[0][4][1][0]}, "
              f"buffer {res[0][4][2][0]}; before any: {res[0][4][3]}")
        failed += not ok
    return failed


def main():
    (f0, r0), (f1, r1) = run(False), run(True)
    failed = f0 + f1 + verify(False, r0) + verify(True, r1)
    # unreachable appliance (a socket bound there that never answers: no ICMP port
    # unreachable to end the JOIN early): which one, after how long
    import socket
    import tally
    t0 = time.time()
    mute = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    mute.bind(("127.0.0.1", 0))
    where = f"127.0.0.1:{mute.getsockname()[1]}"
    try:
        tally.Agent(appliances=where, connect_timeout_ms=300, rank=0, world_size=1)
        print("FAIL unreachable appliance accepted")
        failed += 1
    except tally.TallyError as e:
        ok = "unreachable" in str(e) and "300 ms" in str(e) and where in str(e)
        print(f"{'ok  ' if ok else 'FAIL'} unreachable ({time.time() - t0:.1f} s): {e}")
        failed += not ok
    finally:
        mute.close()
    try:
        tally.Agent(appliances="127.0.0.1:9", local_agg="bogus")
        print("FAIL local_agg='bogus' accepted")
        failed += 1
    except ValueError as e:
        print(f"ok   local_agg words: {e}")
    print(f"{failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
