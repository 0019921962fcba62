#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""f16 / bf16 averages taken by the appliance before rounding (REGISTER TALLY_KEY_AVERAGE),
through a real appliance (tally-udpd) and real worker processes:
  - 4 workers, f16 40000 each: the raw agent (declare(average=True), f16 on the wire) and
    tally.torch.allreduce both give 40000, not inf (the sum, 160000, does not fit f16);
  - 3 workers, random f16 and bf16 tensors in +-[0.25, 4): every element of the average is
    within 0.5 ulp (+ 2^-10 of it, the f32 quotient's own rounding) of the exact float64
    mean, while dividing the sum rounded to the dtype (the old order) misses that bound on
    the same data; tally.torch.allreduce sends f16 / bf16 as they are (2 bytes an element,
    from the agent's push_bytes), not an f32 copy;
  - the agent says the appliance averages (Agent.appliance_averages).
Exit 77 (skip) without torch or without the appliance binary.
"""
import multiprocessing as mp
import os
import sys

import udpd_proc

torch = udpd_proc.need_torch()
udpd_proc.need_udpd()
import train  # noqa: E402  free_port_block

N = 10000
DT = {"f16": torch.float16, "bf16": torch.bfloat16}


def data(rank, dt):
    g = torch.Generator().manual_seed(100 + rank)
    m = 0.25 + torch.rand(N, generator=g, dtype=torch.float64) * 3.75
    s = torch.where(torch.rand(N, generator=g) < 0.5, -1.0, 1.0).double()
    return (m * s).to(DT[dt])


def worker(rank, world, port, job, q):
    try:
        torch.set_num_threads(1)
        os.environ.update(TALLY_APPLIANCES=f"127.0.0.1:{port}", TALLY_JOB_ID=str(job), TALLY_TOKEN="99",
                          RANK=str(rank), WORLD_SIZE=str(world))
        import tally
        import tally.torch as tt
        a = tally.init()
        out = {"appliance_averages": a.appliance_averages}
        if world == 4:
            t = a.declare("big", 16, "f16", average=True)
            buf = torch.full((8,), 40000.0, dtype=torch.float16)
            a.wait(a.push_pull(t, buf.data_ptr(), 16))
            out["raw_big"] = buf.float().tolist()
            out["tt_big"] = tt.allreduce(torch.full((8,), 40000.0, dtype=torch.float16)).float().tolist()
        else:
            for dt in DT:
                x = data(rank, dt)
                t = a.declare(f"raw.{dt}", N * 2, dt, average=True)
                buf = x.clone()
                a.wait(a.push_pull(t, buf.data_ptr(), N * 2))
                out[f"raw_{dt}"] = buf.view(torch.int16).tolist()
                b0 = a.stats()["push_bytes"]
                y = tt.allreduce(x, name=f"tt.{dt}")
                out[f"tt_{dt}"] = y.view(torch.int16).tolist()
                out[f"tt_{dt}_bytes"] = a.stats()["push_bytes"] - b0
        q.put((rank, "ok", out))
        tally.shutdown()
    except Exception:  # report, never hang the parent
        import traceback
        q.put((rank, "error", traceback.format_exc()))
        raise SystemExit(1)


def check(ok, what):
    print(f"{'ok  ' if ok else 'FAIL'} {what}", flush=True)
    return 0 if ok else 1


def run(world, job):
    port = train.free_port_block(1)
    res = {}
    with udpd_proc.running(port, "--cores", "1", "--open"):
        ctx = mp.get_context("fork")
        q = ctx.Queue()
        ps = [ctx.Process(target=worker, args=(r, world, port, job, q)) for r in range(world)]
        for p in ps:
            p.start()
        for _ in range(world):
            rank, status, out = q.get(timeout=120)
            if status != "ok":
                print(f"FAIL rank {rank}:\n{out}")
                continue
            res[rank] = out
        for p in ps:
            p.join(60)
    return res


def ulp(dt, x):
    """The dtype's grid spacing at |x| (normal range; 1 at 0, where the result must be 0)."""
    e = torch.floor(torch.log2(x.abs()))
    return torch.where(x == 0, torch.ones_like(x), torch.pow(2.0, e - (10 if dt == "f16" else 7)))


def main():
    failed = 0
    res = run(4, 21)
    failed += check(len(res) == 4, f"4 workers finished ({len(res)})")
    if len(res) == 4:
        failed += check(all(r["appliance_averages"] for r in res.values()), "the agent says the appliance averages")
        for k in ("raw_big", "tt_big"):
            vals = {v for r in res.values() for v in r[k]}
            failed += check(vals == {40000.0}, f"f16 average of 4 x 40000 ({k}): {sorted(vals)} (not inf)")
    res = run(3, 22)
    failed += check(len(res) == 3, f"3 workers finished ({len(res)})")
    if len(res) == 3:
        for dt in DT:
            xs = [data(r, dt).double() for r in range(3)]
            mean = (xs[0] + xs[1] + xs[2]) / 3
            u = ulp(dt, mean)
            bound = 0.5 * (1 + 2.0 ** -10)
            for k in ("raw", "tt"):
                worst = 0.0
                for r in range(3):
                    got = torch.tensor(res[r][f"{k}_{dt}"], dtype=torch.int16).view(DT[dt]).double()
                    err = (got - mean).abs() / u
                    worst = max(worst, float("inf") if torch.isnan(err).any() else err.max().item())
                failed += check(worst <= bound, f"3-worker {dt} average ({k}) within 0.5 ulp of the float64 mean: "
                                                f"worst {worst:.4f} ulp")
            # the old order on the same data: the sum rounded to the dtype, then divided
            s = sum(x.float() for x in xs).to(DT[dt]).float() * (1.0 / 3.0)
            old = ((s.to(DT[dt]).double() - mean).abs() / u)
            print(f"     ({int((mean == 0).sum())} of {N} exact means are 0)")
            failed += check(old.max().item() > bound,
                            f"{dt}: rounding the sum first misses it ({int((old > bound).sum())} of {N} "
                            f"elements, worst {old.max().item():.3f} ulp): the check can fail")
            nb = {r[f"tt_{dt}_bytes"] for r in res.values()}
            failed += check(nb == {2 * N}, f"tally.torch.allreduce({dt}) pushed {sorted(nb)} bytes "
                                           f"({2 * N}: as {dt}, not an f32 copy)")
    print(f"{failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
