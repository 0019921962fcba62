#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Horovod's Compression.fp16 as the agent's worker-stage codec "fp16" over a real appliance
(tally-udpd, private control socket): f32 tensors sent as f16, summed in f32 by the
appliance, widened back on every rank.

3 worker processes (spawn), each an agent:
 1. tensor "s" (f32, N elements over several partitions and chunks), sum: codec fp16 from
    round 1 (round 0 plain f32); tensor "m" (f32), average, fp16 from round 0. Each round's
    result on each rank equals the f32 (float64) sum / mean of the inputs within f16
    tolerance: |out - ref| <= 2^-10 (sum_w |x_w| (/W)) + 1e-6 (each input and the result
    rounded to f16 once, 2^-11 each). The plain round 0 is exact to f32 (4 eps). All ranks
    bit-identical. The compressed rounds push half the bytes (stats push_bytes).
 2. An unknown codec name is refused with ENOENT naming the known ones.
 3. With torch: tally.torch.Compression.fp16 is tally.compression.Compression.fp16, and
    DistributedOptimizer(..., compression=Compression.fp16, op=Sum) gives every rank the
    f32 sum of the gradients within f16 tolerance, and the DDP hook (comm_hook with
    TallyState(compression=Compression.fp16)) the f32 average of a bucket.
Exit 77 (skip) without NumPy or the appliance binary.
"""
import errno
import multiprocessing as mp
import os
import shutil
import sys
import tempfile

try:
    import numpy as np
except ImportError as e:
    print(f"SKIP: {e}")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import udpd_proc  # noqa: E402
import train  # noqa: E402  free_port_block

udpd_proc.need_udpd()

W = 3
N = 70000
ROUNDS = 4
TOL = 2.0 ** -10


def inputs(rank, rnd, n=N):
    r = np.random.default_rng(10 * rnd + rank)
    return (r.standard_normal(n) * r.choice([1e-2, 1.0, 100.0], n)).astype(np.float32)


def agent_part(a, q_res):
    from tally.compression import Compression
    s = a.declare("fp16.s", N * 4, "f32", average=False)
    m = a.declare("fp16.m", N * 4, "f32", average=True)
    a.set_codec(s, Compression.fp16, 1)
    a.set_codec(m, Compression.fp16, 0)
    try:
        a.set_codec(s, "zstd", 2)
        q_res["unknown"] = "accepted"
    except Exception as e:  # noqa: BLE001
        q_res["unknown"] = (getattr(e, "errno", None), str(e))
    outs, pb = [], []
    for rnd in range(ROUNDS):
        bs, bm = inputs(a.rank, rnd).copy(), inputs(a.rank, rnd + 100).copy()
        before = a.stats()["push_bytes"]
        a.wait(a.push_pull(s, bs.ctypes.data, N * 4))
        pb.append(a.stats()["push_bytes"] - before)
        a.wait(a.push_pull(m, bm.ctypes.data, N * 4))
        outs.append((bs.tolist(), bm.tolist()))
    q_res["outs"] = outs
    q_res["push_bytes"] = pb


def tally_agent():
    import tally
    return tally.init()


def torch_part(rank, q_res):
    try:
        import torch
        import tally.torch as tt
    except ImportError as e:
        q_res["torch"] = f"skip: {e}"
        return
    from tally.compression import Compression
    assert tt.Compression.fp16 is Compression.fp16, "tally.torch.Compression is not tally.compression's"
    model = torch.nn.Linear(50, 40)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    opt = tt.DistributedOptimizer(opt, named_parameters=model.named_parameters(),
                                  compression=tt.Compression.fp16, op=tt.Sum)
    grads = []
    for step in range(2):
        opt.zero_grad()
        g = torch.from_numpy(inputs(rank, 50 + step, 40 * 50 + 40))
        model.weight.grad = g[:2000].view(40, 50).clone()
        model.bias.grad = g[2000:].clone()
        opt.step()
        grads.append(torch.cat([model.weight.grad.reshape(-1), model.bias.grad]).tolist())
    q_res["torch"] = grads
    # the DDP hook's path: TallyState(compression=fp16), one f32 bucket through comm_hook
    # (torch sums DDP's bucket averages; here the average over W ranks)

    class Bucket:
        def __init__(self, t):
            self.t = t

        def buffer(self):
            return self.t

        def index(self):
            return 0

    st = tt.TallyState(agent=tally_agent(), compression=Compression.fp16)
    b = torch.from_numpy(inputs(rank, 70, 3000))
    before = st.agent.stats()["push_bytes"]
    q_res["ddp"] = tt.comm_hook(st, Bucket(b)).wait().tolist()
    q_res["ddp_bytes"] = st.agent.stats()["push_bytes"] - before


def worker(rank, port, q):
    try:
        os.environ.update(TALLY_APPLIANCES=f"127.0.0.1:{port}", TALLY_JOB_ID="5", TALLY_TOKEN="77",
                          TALLY_OP_TIMEOUT_MS="20000", RANK=str(rank), WORLD_SIZE=str(W),
                          LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(W))
        import tally
        a = tally.init()
        a.set_order("submit")
        res = {}
        agent_part(a, res)
        torch_part(rank, res)
        q.put((rank, "ok", res))
        tally.shutdown()
    except Exception as e:  # noqa: BLE001
        import traceback
        q.put((rank, "error", traceback.format_exc() + repr(e)))


def close(out, ref, scale, name):
    err = np.abs(np.asarray(out, np.float64) - ref)
    bound = TOL * scale + 1e-6
    q_ = float((err / bound).max())
    good = q_ <= 1.0
    print(f"{'ok  ' if good else 'FAIL'} {name}: |diff| / (2^-10 sum|x| + 1e-6) max {q_:.3g}")
    return good


def check_agent(got):
    ok = True
    code, text = got[0]["unknown"] if isinstance(got[0]["unknown"], tuple) else (None, "accepted")
    good = code == errno.ENOENT and "fp16" in text and "onebit" in text
    print(f"{'ok  ' if good else 'FAIL'} unknown codec refused: {errno.errorcode.get(code)}: {text}")
    ok &= good
    for rnd in range(ROUNDS):
        xs = [inputs(w, rnd).astype(np.float64) for w in range(W)]
        xm = [inputs(w, rnd + 100).astype(np.float64) for w in range(W)]
        for i, (xx, avg) in enumerate(((xs, False), (xm, True))):
            outs = [np.array(got[w]["outs"][rnd][i], np.float32) for w in range(W)]
            if not all(np.array_equal(outs[0].view(np.uint32), o.view(np.uint32)) for o in outs):
                print(f"FAIL round {rnd}: ranks received different results")
                ok = False
            ref = sum(xx) / (W if avg else 1)
            scale = sum(np.abs(x) for x in xx) / (W if avg else 1)
            if i == 0 and rnd == 0:  # plain f32 round
                ok &= close(outs[0], ref, scale * 2.0 ** -13, f"round {rnd} sum (f32, plain)")
            else:
                ok &= close(outs[0], ref, scale, f"round {rnd} {'mean' if avg else 'sum'} (fp16)")
    pb = got[0]["push_bytes"]
    good = pb[0] == N * 4 and all(b == N * 2 for b in pb[1:])
    print(f"{'ok  ' if good else 'FAIL'} push bytes per round of the sum tensor: {pb}")
    return ok and good


def check_torch(got):
    t = got[0]["torch"]
    if isinstance(t, str):
        print(f"torch part: {t}")
        return True
    ok = True
    n = 40 * 50 + 40
    for step in range(2):
        xs = [inputs(w, 50 + step, n).astype(np.float64) for w in range(W)]
        for w in range(W):
            ok &= close(got[w]["torch"][step], sum(xs), sum(np.abs(x) for x in xs),
                        f"DistributedOptimizer fp16 step {step} rank {w}")
    xs = [inputs(w, 70, 3000).astype(np.float64) for w in range(W)]
    for w in range(W):
        ok &= close(got[w]["ddp"], sum(xs) / W, sum(np.abs(x) for x in xs) / W,
                    f"DDP comm_hook (TallyState fp16) rank {w}")
        good = got[w]["ddp_bytes"] == 3000 * 2
        print(f"{'ok  ' if good else 'FAIL'} DDP bucket rank {w} pushed {got[w]['ddp_bytes']} bytes (f16: 6000)")
        ok &= good
    return ok


def main():
    port = train.free_port_block(2)
    tmp = tempfile.mkdtemp(prefix="tally-test-fp16-")
    try:
        return run(port, os.path.join(tmp, "ctl.sock"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(port, sock):
    with udpd_proc.running(port, "--cores", "2", "--job", "5", "--no-auth", "--token", "77",
                           "--world", str(W), "--ctl-socket", sock, settle=0.3):
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        procs = [ctx.Process(target=worker, args=(r, port, q)) for r in range(W)]
        got = {}
        try:
            for p in procs:
                p.start()
            for _ in range(W):
                rank, status, res = q.get(timeout=240)
                if status != "ok":
                    print(f"FAIL: worker {rank}:\n{res}")
                    return 1
                got[rank] = res
            for p in procs:
                p.join(30)
        finally:
            for p in procs:
                if p.is_alive():
                    p.kill()
    ok = check_agent(got)
    ok &= check_torch(got)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
