#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The PyTorch user's path (Horovod / BytePS names) over a real appliance (tally-udpd), two
worker processes:
  - a plain loop of push_pulls of one tensor in the default order (another tensor declared,
    never pushed) completes;
  - allreduce / allreduce_async + poll + synchronize, Average and Sum, f32 / f16 / bf16 /
    int64 against the exact values; f16 2 x 40000 averages to 40000 (not inf);
  - broadcast_parameters of every dtype (f64, f16, bf16, int64 beyond 2^31, int8, uint8,
    bool, a 0-dim tensor) bit for bit; broadcast_optimizer_state;
  - DistributedOptimizer: a parameter used on rank 0 only, zero_grad(set_to_none=True),
    backward_passes_per_step=2, synchronize() + clip + skip_synchronize() against a
    single-process reference;
  - tally.torch.DistributedDataParallel on a bf16 + f32 model (gloo cannot broadcast bf16):
    the gradients equal the exact mean rounded once;
  - errors: the 'rounds' order stall times out naming the tensor it waits for
    (TallyTimeoutError), TALLY_DETERMINISTIC without a --det-pool names --det-pool, a failed
    hook future reads "tally: ..." (not "Unable to cast").
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


def bcast_state(rank):
    g = torch.Generator().manual_seed(7 + rank)
    return {
        "f32": torch.randn(5, 3, generator=g),
        "f64": torch.randn(7, generator=g, dtype=torch.float64),
        "f16": torch.randn(9, generator=g).half(),
        "bf16": torch.randn(4, 4, generator=g).bfloat16(),
        "i64": torch.randint(-2 ** 40, 2 ** 40, (6,), generator=g),
        "i32": torch.randint(-2 ** 30, 2 ** 30, (3,), generator=g, dtype=torch.int32),
        "i8": torch.randint(-128, 127, (5,), generator=g, dtype=torch.int8),
        "u8": torch.randint(0, 255, (3,), generator=g, dtype=torch.uint8),
        "bool": torch.rand(11, generator=g) > 0.5,
        "scalar": torch.tensor(3.25 + rank),
        "steps": torch.tensor(12345678901 + rank),
    }


class Partial(torch.nn.Module):
    """`extra` is used on rank 0 only."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(5)
        self.a = torch.nn.Linear(6, 4)
        self.extra = torch.nn.Linear(4, 4)
        self.b = torch.nn.Linear(4, 2)

    def forward(self, x, rank):
        h = torch.tanh(self.a(x))
        if rank == 0:
            h = h + self.extra(h)
        return self.b(h)


class Mixed(torch.nn.Module):
    def __init__(self, seed):
        super().__init__()
        torch.manual_seed(seed)
        self.a = torch.nn.Linear(8, 16).bfloat16()
        self.b = torch.nn.Linear(16, 3)
        self.register_buffer("count", torch.tensor(seed, dtype=torch.int64))

    def forward(self, x):
        return self.b(torch.relu(self.a(x.bfloat16())).float())


def pdata(rank, step, k):
    g = torch.Generator().manual_seed(1000 * step + 10 * k + rank)
    return torch.randn(4, 6, generator=g), torch.randn(4, 2, generator=g)


STEPS, BPPS = 3, 2


def dopt_run(rank):
    import tally.torch as tt
    model = Partial()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    opt = tt.DistributedOptimizer(opt, named_parameters=model.named_parameters(), backward_passes_per_step=BPPS)
    for step in range(STEPS):
        opt.zero_grad(set_to_none=True)
        for k in range(BPPS):
            x, y = pdata(rank, step, k)
            ((model(x, rank) - y) ** 2).mean().backward()
        opt.synchronize()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        with opt.skip_synchronize():
            opt.step()
    return [p.detach().clone() for p in model.parameters()]


def dopt_reference():
    model = Partial()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for step in range(STEPS):
        grads = []
        for r in range(W):
            model.zero_grad(set_to_none=True)
            for k in range(BPPS):
                x, y = pdata(r, step, k)
                ((model(x, r) - y) ** 2).mean().backward()
            grads.append([p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in model.parameters()])
        for i, p in enumerate(model.parameters()):
            p.grad = (grads[0][i] + grads[1][i]) / W
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def mixed_data(rank):
    g = torch.Generator().manual_seed(50 + rank)
    return torch.randn(5, 8, generator=g), torch.randint(0, 3, (5,), generator=g)


def mixed_grads(model, rank):
    x, y = mixed_data(rank)
    torch.nn.functional.cross_entropy(model(x), y).backward()


def worker(rank, port, mport, q):
    try:
        torch.set_num_threads(1)
        os.environ.update(TALLY_APPLIANCES=f"127.0.0.1:{port}", TALLY_JOB_ID="5", TALLY_TOKEN="77",
                          RANK=str(rank), WORLD_SIZE=str(W), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(W),
                          MASTER_ADDR="127.0.0.1", MASTER_PORT=str(mport))
        import tally
        import tally.torch as tt
        out = {}
        a = tally.init()
        # 1. a loop of push_pulls of one tensor, another tensor declared and never pushed
        t = a.declare("loop", 16, "f32", average=False)
        a.declare("never", 16, "f32")
        buf = torch.zeros(4)
        for i in range(5):
            buf.fill_(float(i + rank))
            a.wait(a.push_pull(t, buf.data_ptr(), 16))
            assert buf.tolist() == [float(2 * i + 1)] * 4, buf
        out["loop"] = True
        # 2. allreduce
        g = torch.Generator().manual_seed(rank)
        x = torch.randn(1000, generator=g)
        out["avg"] = tt.allreduce(x, name="x")
        out["sum"] = tt.allreduce(x, op=tt.Sum)
        h = tt.allreduce_async(x * 2, name="x2")
        while not tt.poll(h):
            time.sleep(0.001)
        out["async"] = tt.synchronize(h)
        out["f16big"] = tt.allreduce(torch.full((8,), 40000.0, dtype=torch.float16))
        out["bf16"] = tt.allreduce(x.bfloat16(), name="xb")
        out["f16"] = tt.allreduce(x.half(), name="xh")
        out["i64"] = tt.allreduce(torch.tensor([3 + rank, -7], dtype=torch.int64), op=tt.Sum)
        # 3. broadcast of every dtype, optimizer state
        st = bcast_state(rank)
        tt.broadcast_parameters(st, root_rank=0)
        out["bcast"] = st
        m = torch.nn.Linear(3, 2)
        o = torch.optim.Adam(m.parameters(), lr=0.01 * (rank + 1))
        if rank == 0:
            m(torch.ones(1, 3)).sum().backward()
            o.step()
        tt.broadcast_optimizer_state(o, root_rank=0)
        sd = o.state_dict()
        out["optstate"] = (sd["param_groups"][0]["lr"], [sd["state"][k]["exp_avg"] for k in sorted(sd["state"])])
        # 4. DistributedOptimizer
        out["dopt"] = dopt_run(rank)
        # 5. DDP, bf16 + f32 model, rank-dependent initial state
        import torch.distributed as dist
        train.torch_store_compat()
        dist.init_process_group("gloo", rank=rank, world_size=W)
        model = Mixed(seed=rank)
        ddp = tt.DistributedDataParallel(model)
        out["ddp_init"] = {k: v.clone() for k, v in model.state_dict().items()}
        with ddp.tally_state.errors():
            mixed_grads(ddp, rank)
        out["ddp_grads"] = [p.grad.clone() for p in model.parameters()]
        dist.destroy_process_group()
        q.put((rank, "ok", {k: v.tolist() if torch.is_tensor(v) else v for k, v in out.items()
                            if k not in ("bcast", "ddp_init", "ddp_grads", "dopt", "optstate")},
               {"bcast": {k: (v.dtype, v.tolist()) for k, v in out["bcast"].items()},
                "ddp_init": {k: (v.dtype, v.tolist()) for k, v in out["ddp_init"].items()},
                "ddp_grads": [(v.dtype, v.tolist()) for v in out["ddp_grads"]],
                "dopt": [v.tolist() for v in out["dopt"]],
                "optstate": (out["optstate"][0], [v.tolist() for v in out["optstate"][1]])}))
        tally.shutdown()
    except Exception:  # report, never hang the parent
        import traceback
        q.put((rank, "error", traceback.format_exc(), None))
        raise SystemExit(1)


def T(pair):
    dt, v = pair
    return torch.tensor(v, dtype=dt)


def check(ok, what):
    print(f"{'ok  ' if ok else 'FAIL'} {what}", flush=True)
    return 0 if ok else 1


def errors_checks():
    """Against an appliance with open admission, one rank."""
    import tally
    failed = 0
    port = train.free_port_block(1)
    with udpd_proc.running(port, "--cores", "1", "--open", "--det-pool", "0"):
        a = tally.Agent(appliances=f"127.0.0.1:{port}", job_id=11, token=1, rank=0, world_size=1,
                        op_timeout_ms=1000, order="rounds")
        ta, _ = a.declare("a", 16, "f32"), a.declare("b", 16, "f32")
        buf = torch.ones(4)
        a.wait(a.push_pull(ta, buf.data_ptr(), 16))
        t0 = time.time()
        try:
            a.wait(a.push_pull(ta, buf.data_ptr(), 16))
            failed += check(False, "rounds-order stall: second push_pull returned")
        except tally.TallyTimeoutError as e:
            msg = str(e)
            failed += check("tensor 'b'" in msg and "'a'" in msg and "set_order(submit)" in msg
                            and time.time() - t0 < 10,
                            f"rounds-order stall times out in {time.time() - t0:.1f} s: {msg}")
        # the same stall with a callback (how the DDP hook, DistributedOptimizer and
        # allreduce_async push): the agent fails it after op_timeout_ms
        import tally.torch as tt
        tb = a.declare("c", 16, "f32")  # round 0 of 'c' waits for 'b' (declared before it)
        h = tt.Handle(buf)
        t0 = time.time()
        tt._inflight(a).start(tb, buf, h._done)
        try:
            h.wait()
            failed += check(False, "callback stall: returned")
        except tally.TallyTimeoutError as e:
            failed += check("tensor 'c'" in str(e) and "tensor 'b'" in str(e) and time.time() - t0 < 10,
                            f"callback stall fails in {time.time() - t0:.1f} s: {str(e)[:90]}...")
        a.close()
        os.environ["TALLY_DETERMINISTIC"] = "1"
        try:
            a = tally.Agent(appliances=f"127.0.0.1:{port}", job_id=12, token=1, rank=0, world_size=1)
            a.declare("d", 16, "f32")
            failed += check(False, "TALLY_DETERMINISTIC without --det-pool accepted")
        except tally.TallyError as e:
            failed += check("--det-pool" in str(e), f"deterministic without pool: {e}")
        finally:
            del os.environ["TALLY_DETERMINISTIC"]
    # a failed hook future: what DDP's reducer reads is the text, not a cast error
    fut = torch.futures.Future()
    fut2 = fut.then(lambda f: f.value())
    fut.set_exception(tally.TallyTimeoutError(-110, "push_pull 3 of tensor 'ddp.bucket0': no progress"))
    try:
        fut2.wait()
        failed += check(False, "hook future error lost")
    except RuntimeError as e:
        failed += check("tally: push_pull 3" in str(e) and "Unable to cast" not in str(e),
                        f"hook future error text: {str(e).splitlines()[0]}")
    return failed


def main():
    failed = 0
    port = train.free_port_block(2)
    res = {}
    with udpd_proc.running(port, "--cores", "2", "--job", "5", "--no-auth", "--token", "77", "--world", str(W)):
        ctx = mp.get_context("fork")
        q = ctx.Queue()
        mport = udpd_proc.free_tcp()
        ps = [ctx.Process(target=worker, args=(r, port, mport, q)) for r in range(W)]
        for p in ps:
            p.start()
        for _ in range(W):
            rank, status, simple, big = q.get(timeout=240)
            if status != "ok":
                print(f"FAIL rank {rank}:\n{simple}")
                failed += 1
                continue
            res[rank] = (simple, big)
        for p in ps:
            p.join(60)
    if len(res) == W:
        s0, s1 = res[0][0], res[1][0]
        failed += check(s0["loop"] and s1["loop"], "5 push_pulls of one tensor in the default order")
        x = [torch.randn(1000, generator=torch.Generator().manual_seed(r)) for r in range(W)]
        ex = (x[0] + x[1]) / 2
        failed += check(all(torch.equal(torch.tensor(s["avg"]), ex) for s in (s0, s1)), "allreduce Average == exact")
        failed += check(all(torch.equal(torch.tensor(s["sum"]), x[0] + x[1]) for s in (s0, s1)), "allreduce Sum == exact")
        failed += check(all(torch.equal(torch.tensor(s["async"]), (2 * x[0] + 2 * x[1]) / 2) for s in (s0, s1)),
                        "allreduce_async + poll + synchronize")
        f16 = torch.tensor(s0["f16big"], dtype=torch.float16)
        failed += check(bool((f16 == 40000).all()), f"f16 average of 2 x 40000: {f16[0].item()} (not inf)")
        want = ((x[0].bfloat16().float() + x[1].bfloat16().float()) / 2).bfloat16()
        failed += check(torch.equal(torch.tensor(s0["bf16"], dtype=torch.bfloat16), want),
                        "bf16 average = f32 mean of the bf16 inputs rounded once")
        want = ((x[0].half().float() + x[1].half().float()) / 2).half()
        failed += check(torch.equal(torch.tensor(s1["f16"], dtype=torch.float16), want),
                        "f16 average = f32 mean of the f16 inputs rounded once")
        failed += check(s0["i64"] == [7, -14], f"int64 Sum: {s0['i64']}")
        root = bcast_state(0)
        b1 = {k: T(v) for k, v in res[1][1]["bcast"].items()}
        bad = [k for k, v in root.items() if not (b1[k].dtype == v.dtype and torch.equal(
            b1[k].view(-1).view(torch.uint8) if v.dtype != torch.bool else b1[k], v.view(-1).view(torch.uint8)
            if v.dtype != torch.bool else v))]
        failed += check(not bad, f"broadcast_parameters of {sorted(root)} bit for bit (bad: {bad})")
        os0, os1 = res[0][1]["optstate"], res[1][1]["optstate"]
        failed += check(os0 == os1 and len(os1[1]) == 2, f"broadcast_optimizer_state (lr {os1[0]})")
        d0 = [torch.tensor(v) for v in res[0][1]["dopt"]]
        d1 = [torch.tensor(v) for v in res[1][1]["dopt"]]
        ref = dopt_reference()
        worst = max((a - b).abs().max().item() for d in (d0, d1) for a, b in zip(d, ref))
        failed += check(worst <= 1e-6, f"DistributedOptimizer (partial use, set_to_none, bpps {BPPS}, "
                                       f"synchronize + clip + skip_synchronize): max |diff| {worst:.3g}")
        i0 = {k: T(v) for k, v in res[0][1]["ddp_init"].items()}
        i1 = {k: T(v) for k, v in res[1][1]["ddp_init"].items()}
        m0 = Mixed(seed=0)
        failed += check(all(torch.equal(i0[k], v) and torch.equal(i1[k], v) for k, v in m0.state_dict().items()),
                        "DDP helper: bf16 + f32 + int64 state broadcast from rank 0")
        gs = []
        for r in range(W):
            m = Mixed(seed=0)
            torch.set_num_threads(1)
            mixed_grads(m, r)
            gs.append([p.grad for p in m.parameters()])
        want = [((a.float() + b.float()) / 2).to(a.dtype) for a, b in zip(*gs)]
        got = [[T(v) for v in res[r][1]["ddp_grads"]] for r in range(W)]
        ok = all(g.dtype == w.dtype and torch.equal(g, w) for r in range(W) for g, w in zip(got[r], want))
        worst = max((g.float() - w.float()).abs().max().item() for r in range(W) for g, w in zip(got[r], want))
        failed += check(ok, f"DDP bf16 + f32 gradients == exact mean rounded once (max |diff| {worst:.3g}; "
                            f"dtypes {[str(w.dtype) for w in want]})")
    failed += errors_checks()
    print(f"{failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
