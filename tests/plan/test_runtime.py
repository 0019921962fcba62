#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""tally.plan's pipeline runtime on 4 CPU ranks (gloo point-to-point between stages, each
stage's replicas summing through a real tally-udpd as their own job):
  - the synchronous schedule gives the parameters of one process's SGD on the same
    minibatches (fp tolerance), for plans 2x2, 1+3 and 1+1+2 (stages x replicas; its first
    stage has no weights), and 2x2 with stage 0 on a gloo ring ("aggregation": "ring");
  - 1F1B with weight stashing equals a one-process reference of PipeDream's update rule
    (1+1+1+1 with a first stage without weights, 2x2, 1+3), and differs from plain SGD; also
    with the plan's per-stage windows deeper than NOAM (1+1+1+1 [6, 4, 3, 1], 2x2 [3, 2]);
  - a stage replica killed (SIGKILL) mid-run: every survivor ends with PipelineError naming
    its stage and rank and the peer or the stage's replicas; nothing hangs."""
import os
import signal
import sys
import time
import traceback

SRC = os.environ.get("TALLY_SRC", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "agent"))
sys.path.insert(0, os.path.join(SRC, "gpu_agent", "python"))
import udpd_proc  # noqa: E402

torch = udpd_proc.need_torch()
udpd_proc.need_udpd()
import torch.multiprocessing as mp  # noqa: E402
import train  # noqa: E402  (gpu_agent/examples: free_port_block)

# Debian's torch 2.x has no libuv: stores without it (USE_LIBUV=0, inherited by the ranks)
train.torch_store_compat()

W = 4
NB = 12  # minibatches of the 1F1B runs (a multiple of every replica count used)
STEPS = 3
K = 4
MB = 16
MULT = float(os.environ.get("TALLY_TIMEOUT_MULTIPLIER", "1"))


def layers():
    torch.manual_seed(5)
    # Flatten (an identity on these inputs, no weights): plans whose first stage has no
    # weights (its output needs no backward) run too
    return [torch.nn.Flatten(), torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 12),
            torch.nn.ReLU(), torch.nn.Linear(12, 3)]


def data(step):
    g = torch.Generator().manual_seed(100 + step)
    return torch.randn(MB, 8, generator=g), torch.randint(0, 3, (MB,), generator=g)


def mkplan(split, depth=None):
    """split: [(first layer, end layer, replicas[, aggregation])]; depth: each stage's
    "in_flight" (the planner's window), or None: a plan without it (NOAM)"""
    st, rank = [], 0
    for s, (i, j, m, *agg) in enumerate(split):
        st.append({"stage": s, "layers": [i, j], "ranks": list(range(rank, rank + m)),
                   "aggregation": agg[0] if agg else "tally"})
        if depth is not None:
            st[-1]["in_flight"] = depth[s]
        rank += m
    assert rank == W
    return {"stages": st}


def worker(rank, plan, uport, tport, q, die_at):
    try:
        import torch.distributed as dist
        from tally.plan.runtime import PipelineTrainer
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{tport}", rank=rank,
                                world_size=W, timeout=__import__("datetime").timedelta(
                                    seconds=60 * MULT))
        tr = PipelineTrainer(layers(), plan, rank, torch.nn.functional.cross_entropy, lr=0.1,
                             appliances=f"127.0.0.1:{uport}", job_base=40, token=77,
                             op_timeout_ms=int(8000 * MULT))
        if die_at == "1f1b":
            tr.train_1f1b([data(t) for t in range(NB)])
        else:
            for step in range(STEPS):
                if step == die_at[0] and rank == die_at[1]:
                    os.kill(os.getpid(), signal.SIGKILL)
                x, y = data(step)
                tr.step(x, y, K)
        q.put((rank, "ok", [p.detach().tolist() for p in tr.module.parameters()]))
        tr.close()
        dist.destroy_process_group()
    except Exception as e:
        q.put((rank, type(e).__name__, f"{e}\n{traceback.format_exc()}"))


def reference():
    model = torch.nn.Sequential(*layers())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(STEPS):
        x, y = data(step)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return model


def run(plan, die_at=(-1, -1)):
    uport = train.free_port_block(1)
    tport = udpd_proc.free_tcp()
    out = {}
    with udpd_proc.running(uport, "--cores", "1", "--open-admission"):
        # not fork: the reference runs autograd in this process, and torch 2.x refuses
        # autograd in a child forked after that; the fork server never runs it
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["torch"])
        q = ctx.Queue()
        ps = [ctx.Process(target=worker, args=(r, plan, uport, tport, q, die_at))
              for r in range(W)]
        for p in ps:
            p.start()
        want = W - (1 if die_at != "1f1b" and die_at[1] >= 0 else 0)
        deadline = time.monotonic() + 180 * MULT
        try:
            while len(out) < want:
                r = q.get(timeout=max(1, deadline - time.monotonic()))
                out[r[0]] = r[1:]
        finally:
            for p in ps:
                p.join(max(1, deadline - time.monotonic()))
                if p.is_alive():
                    p.kill()
                    p.join(10)
    return out


def check_same(split):
    plan = mkplan(split)
    out = run(plan)
    ref = list(reference())
    fails = 0
    for rank, (status, params) in sorted(out.items()):
        if status != "ok":
            print(f"FAIL {split} rank {rank}: {status}: {params}")
            fails += 1
            continue
        s = next(st for st in plan["stages"] if rank in st["ranks"])
        mine = [p for m in ref[s["layers"][0]:s["layers"][1]] for p in m.parameters()]
        for a, b in zip(params, mine):
            if not torch.allclose(torch.tensor(a), b.detach(), rtol=1e-5, atol=1e-6):
                print(f"FAIL {split} rank {rank}: params differ from one process's, max "
                      f"{(torch.tensor(a) - b.detach()).abs().max():.3g}")
                fails += 1
        if len(params) != len(mine):
            print(f"FAIL {split} rank {rank}: {len(params)} params, want {len(mine)}")
            fails += 1
    # the reference moved: a pipeline that did nothing would fail
    if all(torch.equal(a.detach(), b.detach()) for a, b in
           zip(torch.nn.Sequential(*layers()).parameters(), torch.nn.Sequential(*ref).parameters())):
        print("FAIL reference did not train")
        fails += 1
    print(("ok" if not fails else "FAIL") + f": sync schedule {split} == one process")
    return fails


def ref_1f1b(split, depth=None):
    """PipeDream's update rule, one process: stage s (m_s replicas, F_s = ceil(sum of m from s
    on / m_s) minibatches in flight per replica, or depth[s]) runs minibatch t's forward and
    backward with weight version max(0, t // m_s - F_s + 1); version v + 1 = version v - lr *
    the mean of the gradients of minibatches v m_s .. v m_s + m_s - 1 (each with its stashed
    weights)."""
    from torch.nn.utils import stateless
    mods = layers()
    S = len(split)
    reps = [m for _, _, m in split]
    F = depth or [-(-sum(reps[s:]) // reps[s]) for s in range(S)]
    stages = [torch.nn.Sequential(*mods[i:j]) for i, j, _ in split]
    W_ = [[{n: p.detach().clone() for n, p in st.named_parameters()}] for st in stages]
    acc = [{} for _ in range(S)]
    for t in range(NB):
        x, y = data(t)
        h = x
        used = []
        for s in range(S):
            v = max(0, t // reps[s] - F[s] + 1)
            assert v < len(W_[s]), (t, s, v)
            w = {n: q.clone().requires_grad_(True) for n, q in W_[s][v].items()}
            used.append(w)
            h = stateless.functional_call(stages[s], w, (h,))
        torch.nn.functional.cross_entropy(h, y).backward()
        for s in range(S):
            acc[s].setdefault(t // reps[s], []).append({n: q.grad for n, q in used[s].items()})
            g = acc[s][t // reps[s]]
            if len(g) == reps[s]:
                last = W_[s][-1]
                W_[s].append({n: last[n] - 0.1 * sum(x[n] for x in g) / reps[s] for n in last})
    return [list(W_[s][-1].values()) for s in range(S)]


def check_1f1b(split, depth=None):
    plan = mkplan(split, depth)
    out = run(plan, die_at="1f1b")
    ref = ref_1f1b(split, depth)
    if depth is not None:
        # a deeper window is a different rule: the NOAM reference must differ somewhere
        noam = ref_1f1b(split)
        if all(torch.allclose(a, b, rtol=1e-5, atol=1e-6)
               for s in range(len(split)) for a, b in zip(ref[s], noam[s])):
            print(f"FAIL 1f1b {split} windows {depth}: same weights as NOAM's windows")
            return 1
    # plain SGD over the same minibatches, no staleness: 1F1B must differ from it (the test
    # can tell a schedule that ignores the stash or the delay)
    plain = torch.nn.Sequential(*layers())
    opt = torch.optim.SGD(plain.parameters(), lr=0.1)
    for t in range(NB):
        x, y = data(t)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(plain(x), y).backward()
        opt.step()
    plain = list(plain)
    fails = 0
    for rank, (status, params) in sorted(out.items()):
        if status != "ok":
            print(f"FAIL 1f1b {split} rank {rank}: {status}: {params}")
            fails += 1
            continue
        s = next(st for st in plan["stages"] if rank in st["ranks"])
        want = ref[s["stage"]]
        pl = [p for m in plain[s["layers"][0]:s["layers"][1]] for p in m.parameters()]
        if len(params) != len(want):
            print(f"FAIL 1f1b {split} rank {rank}: {len(params)} params, want {len(want)}")
            fails += 1
        for a, b, c in zip(params, want, pl):
            a = torch.tensor(a)
            if not torch.allclose(a, b, rtol=1e-5, atol=1e-6):
                print(f"FAIL 1f1b {split} rank {rank}: differs from PipeDream's rule by "
                      f"{(a - b).abs().max():.3g}")
                fails += 1
            if s["stage"] < len(split) - 1 and torch.allclose(a, c.detach(), rtol=1e-5,
                                                              atol=1e-6):
                print(f"FAIL 1f1b {split} rank {rank}: equals plain SGD (no staleness)")
                fails += 1
    print(("ok" if not fails else "FAIL") + f": 1F1B + weight stashing {split} windows "
          f"{depth or 'NOAM'} == PipeDream's update rule")
    return fails


def check_kill():
    # 2x2: rank 1 (stage 0 replica 1) dies at step 1
    plan = mkplan([(0, 3, 2), (3, 6, 2)])
    t0 = time.monotonic()
    out = run(plan, die_at=(1, 1))
    fails = 0
    named = 0
    for rank, (status, msg) in sorted(out.items()):
        first = msg.splitlines()[0] if isinstance(msg, str) else msg
        stage = 0 if rank < 2 else 1
        ranks = "[0, 1]" if stage == 0 else "[2, 3]"
        if status != "PipelineError" or f"stage {stage} rank {rank}" not in first:
            print(f"FAIL kill: rank {rank}: {status}: {first}")
            fails += 1
        elif "stage 0 rank 1" not in first and f"ranks {ranks}" not in first:
            # a survivor names the dead peer, or (a stalled aggregation) its stage's replicas
            print(f"FAIL kill: rank {rank}: error names neither rank 1 nor stage {stage}'s "
                  f"replicas: {first}")
            fails += 1
        else:
            named += ("stage 0 rank 1" in first) or ("ranks [0, 1]" in first)
            print(f"ok: kill: rank {rank}: {first[:200]}")
    if len(out) != W - 1 or not named:
        print(f"FAIL kill: {len(out)} survivors reported, {named} named the dead rank's stage")
        fails += 1
    print(f"kill run ended in {time.monotonic() - t0:.1f} s")
    return fails


def main():
    fails = 0
    for split in ([(0, 3, 2), (3, 6, 2)], [(0, 4, 1), (4, 6, 3)],
                  [(0, 1, 1), (1, 4, 1), (4, 6, 2)], [(0, 3, 2, "ring"), (3, 6, 2, "tally")]):
        fails += check_same(split)
    for split in ([(0, 1, 1), (1, 3, 1), (3, 5, 1), (5, 6, 1)], [(0, 3, 2), (3, 6, 2)],
                  [(0, 4, 1), (4, 6, 3)]):
        fails += check_1f1b(split)
    # the planner's windows deeper than NOAM (a round trip that does not fit behind NOAM's):
    # 1+1+1+1 NOAM [4, 3, 2, 1], 2x2 NOAM [2, 1]
    for split, depth in (([(0, 1, 1), (1, 3, 1), (3, 5, 1), (5, 6, 1)], [6, 4, 3, 1]),
                         ([(0, 3, 2), (3, 6, 2)], [3, 2])):
        fails += check_1f1b(split, depth)
    fails += check_kill()
    print("FAILED" if fails else "PASS", fails)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
