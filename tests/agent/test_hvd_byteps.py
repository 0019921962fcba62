#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Horovod and BytePS scripts on Tally after the import swap alone (issue 39), two ranks
against a real tally-udpd, compared with gloo:

  1. Horovod's MNIST-example shape through the opt-in shim (`import horovod.torch as hvd`):
     broadcast_parameters, broadcast_optimizer_state, DistributedOptimizer with
     gradient_predivide_factor, allreduce metric averaging: losses and weights equal gloo's
     (|diff| <= 1e-5); with Compression.fp16 (--fp16-allreduce) within f16 tolerance. Then
     DistributedOptimizer again over the same parameter names: fp16 once more (bit for bit
     the first fp16 run), then none (f32 again: equal gloo's within 1e-5).
  2. BytePS's shape through `import byteps.torch as bps` (push_pull by hand): equal gloo's.
  3. Horovod's other names: allgather (ranks of different lengths), allgather_object,
     broadcast / broadcast_ / broadcast_async, alltoall, grouped_allreduce, reducescatter,
     allreduce(average=False), prescale / postscale, Min / Max / Product, barrier, join,
     is_initialized, cross_rank / cross_size; BytePS's push_pull_async / push_pull_inplace,
     declare, suspend / resume: exact values on every rank.
  4. Wrong use refused, never silent: two backward() before step() with
     backward_passes_per_step=1 raises on every rank naming backward_passes_per_step, and
     the weights stay equal on both ranks; a float64 allreduce raises (no f32 sum).
  5. Ranks that reduce tensors in different orders (alive, waiting on each other): every rank
     gets RanksDisagreeError naming the tensor each rank waits on (not "rank 0 silent").
  6. hvd.SyncBatchNorm on each rank's half of a batch equals torch's BatchNorm1d on the whole
     batch: outputs, input gradients, running statistics, eval outputs (<= 1e-5).
Exit 77 (skip) without torch or tally-udpd."""
import multiprocessing as mp
import os
import sys

import udpd_proc

udpd_proc.need_torch()
udpd_proc.need_udpd()
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
SHIMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "gpu_agent", "python", "shims")
import hvd_scripts  # noqa: E402
import train  # noqa: E402

W = 2
TMO = 240 * float(os.environ.get("TALLY_TIMEOUT_MULTIPLIER", "1"))


def api_checks(hvd, bps, rank):
    """Section 3: every value is known exactly."""
    import torch
    out = {}
    out["init"] = hvd.is_initialized()
    out["cross"] = (hvd.cross_rank(), hvd.cross_size())
    out["allgather"] = hvd.allgather(torch.full((rank + 1, 2), float(rank))).tolist()
    out["allgather_object"] = hvd.allgather_object({"r": rank})
    out["broadcast"] = hvd.broadcast(torch.tensor([rank * 10.0, 1.5], dtype=torch.float64), root_rank=1).tolist()
    t = torch.tensor([rank, rank + 1], dtype=torch.bfloat16)
    hvd.broadcast_(t, root_rank=0)
    out["broadcast_"] = t.float().tolist()
    out["broadcast_async"] = hvd.synchronize(hvd.broadcast_async(torch.tensor([rank + 7]), 1)).tolist()
    out["alltoall"] = hvd.alltoall(torch.tensor([10 * rank, 10 * rank + 1])).tolist()
    out["sum"] = hvd.allreduce(torch.tensor([1.0 + rank]), average=False).tolist()
    out["avg"] = hvd.allreduce(torch.tensor([1.0 + rank]), name="avg").tolist()
    out["scaled"] = hvd.allreduce(torch.tensor([2.0 + rank]), op=hvd.Sum, prescale_factor=0.5,
                                  postscale_factor=3.0).tolist()
    out["fp16"] = hvd.allreduce(torch.tensor([0.5 + rank]), compression=hvd.Compression.fp16).tolist()
    out["min"] = hvd.allreduce(torch.tensor([1.0 + rank, -rank]), op=hvd.Min).tolist()
    out["max"] = hvd.allreduce(torch.tensor([1.0 + rank, -rank]), op=hvd.Max).tolist()
    out["product"] = hvd.allreduce(torch.tensor([2.0 + rank]), op=hvd.Product).tolist()
    out["grouped"] = [x.tolist() for x in hvd.grouped_allreduce([torch.tensor([1.0 * rank]),
                                                                 torch.tensor([2.0, 4.0 * rank])], op=hvd.Sum)]
    out["reducescatter"] = hvd.reducescatter(torch.arange(5.0) * (rank + 1), op=hvd.Sum).tolist()
    hvd.barrier()
    out["join"] = hvd.join() in range(W)
    bps.declare("pp")
    h = bps.push_pull_async(torch.tensor([3.0 * rank]), average=False, name="pp")
    out["push_pull_async"] = bps.synchronize(h).tolist()
    x = torch.tensor([4.0 + rank])
    bps.push_pull_inplace(x, average=True, name="ppi")
    out["push_pull_inplace"] = x.tolist()
    bps.suspend()
    bps.resume()
    out["after_resume"] = bps.push_pull(torch.tensor([1.0]), average=False, name="resumed").tolist()
    try:
        hvd.allreduce(torch.tensor([1.0], dtype=torch.float64), name="f64")
        out["f64"] = "summed"
    except TypeError as e:
        out["f64"] = str(e)
    return out


def syncbn_check(hvd, rank):
    """Section 6: hvd.SyncBatchNorm on each rank's half of a batch against torch's BatchNorm1d
    on the whole batch: outputs, input gradients and running statistics."""
    import torch
    g = torch.Generator().manual_seed(7)
    x_all = torch.randn(8, 3, 5, generator=g) * 2 + 1
    coef = torch.randn(8, 3, 5, generator=g)
    half = slice(4 * rank, 4 * rank + 4)
    bn = hvd.SyncBatchNorm(3)
    ref = torch.nn.BatchNorm1d(3)
    with torch.no_grad():
        for m in (bn, ref):
            m.weight.copy_(torch.tensor([0.5, 1.5, -1.0]))
            m.bias.copy_(torch.tensor([0.1, -0.2, 0.3]))
    x = x_all[half].clone().requires_grad_(True)
    y = bn(x)
    (y * coef[half]).sum().backward()
    xr = x_all.clone().requires_grad_(True)
    yr = ref(xr)
    (yr * coef).sum().backward()
    with torch.no_grad():
        bn(x_all[half])  # a second training forward on both: running stats updated twice
        ref(x_all)
        bn.eval()
        ref.eval()
        ye, yre = bn(x_all[half]), ref(x_all)[half]

    def md(u, v):
        return float((u - v).abs().max())
    return {"y": md(y, yr[half]), "dx": md(x.grad, xr.grad[half]), "rm": md(bn.running_mean, ref.running_mean),
            "rv": md(bn.running_var, ref.running_var), "eval": md(ye, yre)}


def bpps_check(hvd, rank):
    """Section 4: two backward() before step() with backward_passes_per_step=1."""
    import torch
    import torch.nn as nn
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0),
                                   named_parameters=model.named_parameters(), backward_passes_per_step=1)
    x = torch.ones(2, 4) * (rank + 1)
    err = None
    opt.zero_grad()
    model(x).sum().backward()
    try:
        model(x).sum().backward()
    except RuntimeError as e:
        err = str(e)
    try:
        opt.step()
    except RuntimeError as e:
        err = err or str(e)
    # the second (correct) use afterwards: one backward, one step
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()
    return err, [p.detach().tolist() for p in model.parameters()]


def disagree_check(hvd, rank):
    """Section 5: after one iteration of 'a', 'b' on both ranks, rank 0 reduces 'a' then 'b',
    rank 1 'b' then 'a' (both alive)."""
    import torch

    import tally
    hvd.barrier()  # torch.distributed up on both ranks
    for n in ("a", "b"):  # declared in the same order (keys are numbered by declaration)
        hvd.allreduce(torch.ones(4), name=n)
    try:
        for n in (("a", "b") if rank == 0 else ("b", "a")):
            hvd.allreduce(torch.ones(4), name=n)
        return "no error"
    except tally.TallyError as e:
        return f"{type(e).__name__}: {e}"


def worker(rank, backend, env, what, q):
    try:
        os.environ.update(env, RANK=str(rank), WORLD_SIZE=str(W), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(W))
        import torch
        torch.set_num_threads(1)
        if backend == "tally":
            sys.path[:0] = [SHIMS]
            import byteps.torch as bps
            import horovod.torch as hvd
        else:
            train.torch_store_compat()
            hvd = bps = hvd_scripts.GlooRef()
        res = {}
        if "hvd" in what:
            res["hvd"] = hvd_scripts.horovod_mnist_shape(hvd, predivide=2.0)
            res["hvd16"] = hvd_scripts.horovod_mnist_shape(hvd, fp16=True)
            # the same parameter names wrapped again: fp16 after fp16, none after fp16
            res["hvd16b"] = hvd_scripts.horovod_mnist_shape(hvd, fp16=True)
            res["hvd_b"] = hvd_scripts.horovod_mnist_shape(hvd, predivide=2.0)
        if "bps" in what:
            res["bps"] = hvd_scripts.byteps_shape(bps)
        if "disagree" in what:
            res["disagree"] = disagree_check(hvd, rank)
        if "api" in what:
            res["api"] = api_checks(hvd, bps, rank)
            res["bpps"] = bpps_check(hvd, rank)
            res["syncbn"] = syncbn_check(hvd, rank)
        q.put((rank, "ok", res))
    except Exception:
        import traceback
        q.put((rank, "error", traceback.format_exc()))


def run(backend, env, what):
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    ps = [ctx.Process(target=worker, args=(r, backend, env, what, q)) for r in range(W)]
    for p in ps:
        p.start()
    out = {}
    try:
        for _ in range(W):
            r, st, v = q.get(timeout=TMO)
            if st != "ok":
                raise SystemExit(f"FAIL {backend} rank {r}:\n{v}")
            out[r] = v
    finally:
        for p in ps:
            p.join(30)
            if p.is_alive():
                p.kill()
                p.join(10)
    return out


def check(ok, what):
    print(f"{'ok  ' if ok else 'FAIL'} {what}", flush=True)
    return 0 if ok else 1


def maxdiff(a, b):
    import torch
    return max(float((torch.as_tensor(x) - torch.as_tensor(y)).abs().max()) for x, y in zip(a, b))


def compare(failed, gloo, tl, key, tol, label):
    for r in range(W):
        (lg, wg), (lt, wt) = gloo[r][key], tl[r][key]
        d = max(maxdiff(lg, lt), maxdiff(wg, wt))
        failed += check(d <= tol and lg[-1] < lg[0], f"{label} rank {r}: losses {lg[0]:.4f} -> {lg[-1]:.4f} (gloo) / "
                        f"{lt[-1]:.4f} (tally), max |diff| of losses and weights {d:.3g} (<= {tol})")
    return failed


def expect_api(a, rank):
    want = {
        "init": True, "cross": (0, 1),
        "allgather": [[0.0, 0.0], [1.0, 1.0], [1.0, 1.0]],
        "allgather_object": [{"r": 0}, {"r": 1}],
        "broadcast": [10.0, 1.5], "broadcast_": [0.0, 1.0], "broadcast_async": [8],
        "alltoall": [rank, 10 + rank],
        "sum": [3.0], "avg": [1.5], "scaled": [(1.0 + 1.5) * 3.0], "fp16": [1.0],
        "min": [1.0, -1.0], "max": [2.0, 0.0], "product": [6.0],
        "grouped": [[1.0], [4.0, 4.0]],
        "reducescatter": [[0.0, 3.0, 6.0], [9.0, 12.0]][rank],
        "join": True, "push_pull_async": [3.0], "push_pull_inplace": [4.5], "after_resume": [2.0],
    }
    bad = {k: (a.get(k), v) for k, v in want.items() if a.get(k) != v}
    return bad


def main():
    failed = 0
    mport = udpd_proc.free_tcp()
    gloo = run("gloo", {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(mport)}, ("hvd", "bps"))
    port = train.free_port_block(1)
    with udpd_proc.running(port, "--cores", "1", "--job", "9", "--no-auth", "--token", "5", "--world", str(W)):
        env = {"TALLY_APPLIANCES": f"127.0.0.1:{port}", "TALLY_JOB_ID": "9", "TALLY_TOKEN": "5",
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(udpd_proc.free_tcp())}
        tl = run("tally", env, ("hvd", "bps", "api"))
    port = train.free_port_block(1)
    with udpd_proc.running(port, "--cores", "1", "--job", "9", "--no-auth", "--token", "5", "--world", str(W),
                           "--dead-rank-timeout-ms", "2000"):
        env = {"TALLY_APPLIANCES": f"127.0.0.1:{port}", "TALLY_JOB_ID": "9", "TALLY_TOKEN": "5",
               "TALLY_OP_TIMEOUT_MS": "4000", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(udpd_proc.free_tcp())}
        dis = run("tally", env, ("disagree",))
    for r in range(W):
        m = dis[r]["disagree"]
        failed += check(m.startswith("RanksDisagreeError") and "rank 0 on allreduce.a" in m and
                        "rank 1 on allreduce.b" in m, f"5. rank {r}, ranks reducing a, b / b, a: {m[:230]}")
    failed = compare(failed, gloo, tl, "hvd", 1e-5, "1. Horovod script (shim import, gradient_predivide_factor=2)")
    failed = compare(failed, gloo, tl, "hvd16", 2e-3, "1. Horovod script, Compression.fp16")
    failed = compare(failed, gloo, tl, "hvd16b", 2e-3, "1. a second DistributedOptimizer, Compression.fp16, "
                     "the same parameter names")
    failed = compare(failed, gloo, tl, "hvd_b", 1e-5, "1. a third one, Compression.none, the same names (f32 again)")
    for r in range(W):
        d = max(maxdiff(tl[r]["hvd16"][0], tl[r]["hvd16b"][0]), maxdiff(tl[r]["hvd16"][1], tl[r]["hvd16b"][1]))
        failed += check(d == 0.0, f"1. rank {r}: the second fp16 optimizer repeats the first bit for bit "
                        f"(max |diff| {d})")
    failed = compare(failed, gloo, tl, "bps", 1e-5, "2. BytePS script (push_pull)")
    for r in range(W):
        a = tl[r]["api"]
        bad = expect_api(a, r)
        failed += check(not bad, f"3. rank {r}: Horovod / BytePS names give the exact values"
                        + (f"; wrong: {bad}" if bad else ""))
        failed += check("float64" in a["f64"] and "float32" in a["f64"],
                        f"4. rank {r}: float64 allreduce refused: {a['f64'][:90]}...")
        err, weights = tl[r]["bpps"]
        failed += check(err is not None and "backward_passes_per_step" in err,
                        f"4. rank {r}: two backward() before step(), backward_passes_per_step=1: {str(err)[:120]}...")
    for r in range(W):
        sb = tl[r]["syncbn"]
        failed += check(max(sb.values()) <= 1e-5, f"6. rank {r}: SyncBatchNorm on half the batch vs BatchNorm1d on "
                        f"all of it: max |diff| {sb}")
    d = maxdiff(tl[0]["bpps"][1], tl[1]["bpps"][1])
    failed += check(d == 0.0, f"4. weights after the refused step and one correct step equal on both ranks "
                    f"(max |diff| {d})")
    print(f"{'FAIL' if failed else 'ok'}: {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
