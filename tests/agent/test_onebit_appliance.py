#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The C worker stage (libtally_agent) and server stage (the appliance, tally-udpd) of 1-bit
compression against the NumPy reference (onebit_ref.compressed_allreduce), then
tally.optim.OneBitAdam / OneBitLamb over the real appliance against onebit_ref's optimizers.

4 worker processes, each an agent (no torch.distributed):
 1. one f32 tensor of N elements (several chunks, a ragged last one), set_compression(onebit,
    from_round=2): rounds 0-1 are plain averages, rounds 2..6 compressed. Every worker keeps
    its inputs per round; the parent runs the reference with the same inputs and chunk layout
    (the agent's partitions, each cut into chunks of 8 * (max_chunk_bytes - 4) elements) and
    compares each round's result:
      - compressed rounds: the sign pattern of every element exact (bit for bit: the server's
        signs follow from the same f32 operations: c = x + e in f32, ±s_w / 4 exact for W = 4,
        so sum / contributors = sum of ±s_w / 4); the server scale of each chunk within 1 ULP
        (the norm is f64 in both, summed in another order: 32 lanes + fixed fold in C, NumPy's
        pairwise here, so the f64 sums differ by a few 2^-53 relative and only the final
        rounding to f32 can differ, by one unit). Worker and server errors are not visible
        from outside; they are checked through the later rounds, whose inputs include them:
        a wrong error would change the next rounds' signs and scales. A 1-ULP scale
        difference propagates into the errors by at most |Δscale| per element, which can flip
        the sign of an element whose c is within that of 0: flips are counted and must stay
        below 1e-4 of the elements (0 expected; a wrong stage flips about half);
      - plain rounds: |diff| <= 4 eps_f32 mean_w |x_w| from the reference mean (the appliance
        adds in arrival order; ULPs mean nothing where the mean cancels to near 0).
 2. OneBitAdam (freeze_step 3) and OneBitLamb (freeze_step 3) on a small model for 8 steps
    with per-worker fixed gradients: every worker's parameters within 1e-4 + 1e-3 |p| of the
    reference's (the compressed scales may differ by an ULP, see above) and equal on all
    workers.
Exit 77 (skip) without torch / NumPy, the appliance binary, or the agent's set_compression.
"""
import multiprocessing as mp
import os
import sys

try:
    import numpy as np
    import torch
except ImportError as e:
    print(f"SKIP: {e}")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import onebit_ref as ref  # noqa: E402
import udpd_proc  # noqa: E402
import train  # noqa: E402  free_port_block

udpd_proc.need_udpd()

W = 4
N = 150000
FROM = 2
ROUNDS = 7
MAX_CHUNK = 8192
SHAPES = [(60, 40), (40,), (10, 40), (10,)]


def inputs(rank, rnd):
    r = np.random.default_rng(100 * rnd + rank)
    x = (r.standard_normal(N) * r.choice([1e-3, 1.0, 10.0], N)).astype(np.float32)
    x[:5] = 0.0  # exact zeros: bit 1, the error keeps -scale
    return x


def grads_for(rank, step, n):
    r = np.random.default_rng(1000 * step + rank)
    return (r.standard_normal(n) * (1 + rank)).astype(np.float32)


def worker(rank, port, q):
    try:
        os.environ.update(TALLY_APPLIANCES=f"127.0.0.1:{port}", TALLY_JOB_ID="5", TALLY_TOKEN="77", TALLY_OP_TIMEOUT_MS="20000",
                          RANK=str(rank), WORLD_SIZE=str(W), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(W))
        import tally
        from tally import onebit
        a = tally.init(max_chunk_bytes=MAX_CHUNK)
        # submission order: the raw tensor stops being pushed when the optimizers start (in
        # "rounds" order every ordered tensor must be pushed each round)
        a.set_order("submit")
        if not hasattr(a, "set_compression"):
            q.put((rank, "skip", "tally.Agent has no set_compression (C side not merged)"))
            return
        t = a.declare("ob.test", N * 4, "f32", average=True)
        a.set_compression(t, "onebit", FROM)
        parts = a.partitions(t)
        outs = []
        for rnd in range(ROUNDS):
            buf = inputs(rank, rnd).copy()
            a.wait(a.push_pull(t, buf.ctypes.data, N * 4))
            if os.environ.get("TALLY_TEST_VERBOSE"):
                print(f"rank {rank} round {rnd} done", file=sys.stderr, flush=True)
            outs.append(buf)
        res = {"parts": parts, "outs": [o.tolist() for o in outs]}
        for name, cls, hp in (("adam", onebit.OneBitAdam, dict(lr=0.01, eps=1e-8)),
                              ("lamb", onebit.OneBitLamb, dict(lr=0.01, eps=1e-8, weight_decay=0.01,
                                                               coeff_beta=0.5))):
            ps = [torch.nn.Parameter(torch.from_numpy(p.copy())) for p in init_params()]
            opt = cls(ps, freeze_step=3, agent=a, name=f"ob.{name}", **hp)
            n = sum(p.numel() for p in ps)
            traj = []
            for step in range(8):
                g = torch.from_numpy(grads_for(rank, step, n))
                o = 0
                for p in ps:
                    p.grad = g[o:o + p.numel()].view_as(p).clone()
                    o += p.numel()
                opt.step()
                traj.append(torch.cat([p.detach().reshape(-1) for p in ps]).tolist())
            res[name] = traj
        q.put((rank, "ok", res))
        tally.shutdown()
    except Exception as e:  # noqa: BLE001
        import traceback
        q.put((rank, "error", traceback.format_exc() + repr(e)))


def init_params():
    r = np.random.default_rng(7)
    return [r.standard_normal(s).astype(np.float32) for s in SHAPES]


def ulps(a, b):
    ia = np.asarray(a, np.float32).view(np.int32).astype(np.int64)
    ib = np.asarray(b, np.float32).view(np.int32).astype(np.int64)
    ia = np.where(ia < 0, -(ia & 0x7fffffff), ia)
    ib = np.where(ib < 0, -(ib & 0x7fffffff), ib)
    return np.abs(ia - ib)


def chunk_layout(parts):
    per = 8 * (MAX_CHUNK - 4)
    out = []
    for _key, _app, off, nbytes in sorted(parts, key=lambda p: p[2]):
        o, n = off // 4, nbytes // 4
        out += [(o + c, min(per, n - c)) for c in range(0, n, per)]
    return out


def main():
    port = train.free_port_block(2)
    with udpd_proc.running(port, "--cores", "2", "--job", "5", "--no-auth", "--token", "77", "--world", str(W),
                           settle=0.3, quiet=False):
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        procs = [ctx.Process(target=worker, args=(r, port, q)) for r in range(W)]
        try:
            for p in procs:
                p.start()
            got = {}
            for _ in range(W):
                rank, status, res = q.get(timeout=int(os.environ.get("TALLY_TEST_ONEBIT_WAIT", "240")))
                got[rank] = (status, res)
            for p in procs:
                p.join(30)
        finally:
            for p in procs:
                if p.is_alive():
                    p.kill()
    for r, (status, res) in sorted(got.items()):
        if status == "skip":
            print("SKIP:", res)
            return 77
        if status != "ok":
            print(f"FAIL: worker {r}:\n{res}")
            return 1
    ok = True
    chunks = chunk_layout(got[0][1]["parts"])
    print(f"{N} elements, {len(chunks)} chunks of <= {8 * (MAX_CHUNK - 4)} elements, compressed from round {FROM}")
    werr = [np.zeros(N, np.float32) for _ in range(W)]
    serr = np.zeros(N, np.float32)
    flips_total = 0
    max_scale_ulp = 0
    for rnd in range(ROUNDS):
        xs = [inputs(w, rnd) for w in range(W)]
        outs = [np.array(got[w][1]["outs"][rnd], np.float32) for w in range(W)]
        same = all(np.array_equal(outs[0].view(np.uint32), o.view(np.uint32)) for o in outs)
        if not same:
            ok = False
            print(f"FAIL round {rnd}: workers received different results")
        if rnd < FROM:
            # another summation order: |diff| <= 4 eps_f32 * mean |x_w| (3 adds + the average)
            bound = 4 * np.float32(2.0 ** -23) * sum(np.abs(x) for x in xs) / W + 1e-45
            q_ = float((np.abs(outs[0] - ref.mean(xs)) / bound).max())
            good = q_ <= 1.0
            print(f"{'ok  ' if good else 'FAIL'} round {rnd} (plain average): diff / (4 eps mean|x|) max {q_:.3g}")
            ok &= good
            continue
        r_out, werr, serr, det = ref.compressed_allreduce(xs, werr, serr, chunks)
        flips = int(np.sum(np.signbit(outs[0]) != np.signbit(r_out)))
        su = 0
        for (o, k), s_ref in zip(chunks, det["server_scales"]):
            s_c = np.abs(outs[0][o:o + k])
            if not np.all(s_c == s_c[0]):
                ok = False
                print(f"FAIL round {rnd}: chunk at {o}: the result is not ±one scale")
            su = max(su, int(ulps(s_c[0], s_ref)))
        max_scale_ulp = max(max_scale_ulp, su)
        flips_total += flips
        good = su <= 1 and flips <= N * 1e-4
        ok &= good
        print(f"{'ok  ' if good else 'FAIL'} round {rnd} (compressed): {flips} sign differences in {N}, server "
              f"scales within {su} ULP (bound 1)")
    for name, cls, hp in (("adam", ref.AdamRef, dict(lr=0.01, eps=1e-8)),
                          ("lamb", ref.LambRef, dict(lr=0.01, eps=1e-8, weight_decay=0.01, coeff_beta=0.5))):
        sizes = [int(np.prod(s)) for s in SHAPES]
        n = sum(sizes)
        from tally import _lib  # noqa: F401  (chunks of the optimizer's tensor: one partition here)
        rr = cls(sizes, np.concatenate([p.reshape(-1) for p in init_params()]), W, 8 * (MAX_CHUNK - 4), 3, **hp)
        worst = 0.0
        good = True
        for step in range(8):
            pr = rr.step([grads_for(w, step, n) for w in range(W)])[0]
            for w in range(W):
                pc = np.array(got[w][1][name][step], np.float32)
                q_ = float((np.abs(pc - pr) / (1e-4 + 1e-3 * np.abs(pr))).max())
                worst = max(worst, q_)
                if w and not np.array_equal(pc, np.array(got[0][1][name][step], np.float32)):
                    good = False
        good &= worst <= 1.0
        ok &= good
        print(f"{'ok  ' if good else 'FAIL'} OneBit{name.capitalize()} over the appliance, 8 steps (freeze 3) x {W} "
              f"workers vs the reference: worst diff/tol {worst:.3g}, workers equal")
    print(f"compressed rounds: {flips_total} sign differences, server scale max {max_scale_ulp} ULP")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
