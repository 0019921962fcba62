#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Pipeline + data-parallel training through Tally, planned from a profile: the digits MLP
(scikit-learn's digits, as train.py) is profiled (tally.plan.profile), the planner
(tally.plan.plan) splits it into stages x replicas for --workers CPU ranks on the cluster
given (--link-gbit, --appliance-gbit: the links the plan is made for), and the ranks train it
with tally.plan.runtime (gloo point-to-point between stages; each stage's replicas sum their
gradients through a tally-udpd this script starts, one job per stage). Prints the profile,
the plan, the loss per epoch, the measured time per minibatch, and the test accuracy of the
assembled model.

    /usr/bin/python3 gpu_agent/examples/pipeline.py --schedule 1f1b --epochs 3
"""
import argparse
import datetime
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, HERE)


def model(hidden):
    import torch.nn as nn
    return [nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, hidden // 2), nn.ReLU(), nn.Linear(hidden // 2, 10)]


def data(seed):
    import torch
    from sklearn.datasets import load_digits
    d = load_digits()
    X = torch.tensor(d.data, dtype=torch.float32) / 16.0
    y = torch.tensor(d.target, dtype=torch.int64)
    perm = torch.randperm(len(X), generator=torch.Generator().manual_seed(seed))
    X, y = X[perm], y[perm]
    return X[:1500], y[:1500], X[1500:], y[1500:]


def layers(a):
    import torch
    torch.manual_seed(a.seed)
    return model(a.hidden)


def worker(rank, a, plan, uport, tport, q):
    import torch
    import torch.distributed as dist
    from tally.plan.runtime import PipelineTrainer
    torch.set_num_threads(1)
    try:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{tport}", rank=rank,
                                world_size=a.workers, timeout=datetime.timedelta(seconds=120))
        tr = PipelineTrainer(layers(a), plan, rank, torch.nn.functional.cross_entropy,
                             lr=a.lr, appliances=f"127.0.0.1:{uport}", job_base=60, token=1)
        Xtr, ytr, _, _ = data(a.seed)
        nb = len(Xtr) // a.batch
        nb -= nb % max(len(s["ranks"]) for s in plan["stages"])
        losses, t0 = [], time.perf_counter()
        for ep in range(a.epochs):
            batches = [(Xtr[i * a.batch:(i + 1) * a.batch], ytr[i * a.batch:(i + 1) * a.batch])
                       for i in range(nb)]
            # (sum of losses, minibatches they stand for) on last-stage ranks: in 1F1B a
            # replica's own minibatches; in the sync schedule each replica's share of every
            # minibatch's loss (its microbatches' losses / K), so the shares add up
            if a.schedule == "1f1b":
                ls = tr.train_1f1b(batches)
                losses.append((sum(ls), len(ls)))
            else:
                ls = [tr.step(x, y, a.microbatches) for x, y in batches]
                ls = [v for v in ls if v is not None]
                losses.append((sum(ls), nb / len(plan["stages"][-1]["ranks"])) if ls else None)
        dt = time.perf_counter() - t0
        state = {k: v.tolist() for k, v in tr.module.state_dict().items()} if tr.r == 0 else None
        q.put((rank, "ok", losses, dt / (a.epochs * nb), state, tr.s))
        tr.close()
        dist.destroy_process_group()
    except Exception as e:
        import traceback
        q.put((rank, type(e).__name__, f"{e}\n{traceback.format_exc()}", None, None, None))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--microbatches", type=int, default=4, help="sync schedule: per minibatch")
    p.add_argument("--schedule", choices=("sync", "1f1b"), default="1f1b")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--link-gbit", type=float, default=0.1, help="the cluster planned for")
    p.add_argument("--alpha-us", type=float, default=50.0)
    p.add_argument("--appliance-gbit", type=float, default=1.0,
                   help="one appliance at this rate (0: none, ring only)")
    p.add_argument("--plan", default=None, help="use this plan JSON instead of planning")
    p.add_argument("--out", default=None, help="write profile, plan and figures here (JSON)")
    a = p.parse_args()

    import torch
    import torch.multiprocessing as mp
    import tally.plan as tp
    import train
    sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "agent"))
    import udpd_proc

    torch.set_num_threads(1)
    train.torch_store_compat()  # Debian's torch 2.x: stores without libuv (USE_LIBUV=0 for the ranks)
    Xtr, ytr, Xte, yte = data(a.seed)
    prof = tp.profile(torch.nn.Sequential(*layers(a)), Xtr[:a.batch], minibatches=20,
                      loss_fn=torch.nn.functional.cross_entropy, target=ytr[:a.batch])
    # overlap: false: the runtime sums a stage's gradients after its backward, not during it
    cluster = {"workers": a.workers, "link_gbit": a.link_gbit, "alpha_us": a.alpha_us,
               "overlap": False}
    if a.appliance_gbit:
        cluster["appliance"] = {"count": 1, "link_gbit": a.appliance_gbit}
    if a.plan:
        with open(a.plan) as f:
            plan = json.load(f)
    else:
        plan = tp.plan(prof, cluster)
    print(tp.format_plan(plan) if "data_parallel" in plan else json.dumps(plan))
    uport = train.free_port_block(1)
    tport = udpd_proc.free_tcp()
    res = {}
    with udpd_proc.running(uport, "--cores", "1", "--open-admission"):
        # not fork: the profile ran autograd in this process, and torch 2.x refuses autograd
        # in a child forked after that; the fork server never runs it
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["torch"])
        q = ctx.Queue()
        ps = [ctx.Process(target=worker, args=(r, a, plan, uport, tport, q))
              for r in range(a.workers)]
        for pr in ps:
            pr.start()
        try:
            for _ in range(a.workers):
                r = q.get(timeout=1800)
                res[r[0]] = r[1:]
        finally:
            for pr in ps:
                pr.join(60)
                if pr.is_alive():
                    pr.kill()
    bad = {r: v for r, v in res.items() if v[0] != "ok"}
    if bad:
        for r, v in sorted(bad.items()):
            print(f"rank {r}: {v[0]}: {v[1]}", file=sys.stderr)
        return 1
    last = [v for v in res.values() if v[4] == len(plan["stages"]) - 1]
    for ep in range(a.epochs):
        ls = [v[1][ep] for v in last if v[1][ep] is not None]
        print(f"epoch {ep}: train loss {sum(x for x, _ in ls) / sum(n for _, n in ls):.4f}")
    per_mb = max(v[2] for v in res.values())
    # the whole model from each stage's replica 0, evaluated here
    full = torch.nn.Sequential(*layers(a))
    for s in plan["stages"]:
        st = next(v[3] for v in res.values() if v[4] == s["stage"] and v[3] is not None)
        i, j = s["layers"]
        torch.nn.Sequential(*list(full)[i:j]).load_state_dict(
            {k: torch.tensor(x) for k, x in st.items()})
    with torch.no_grad():
        acc = (full(Xte).argmax(1) == yte).float().mean().item()
    print(f"measured time per minibatch: {per_mb * 1e3:.2f} ms (predicted "
          f"{plan.get('predicted_s_per_minibatch', float('nan')) * 1e3:.2f} ms on the cluster "
          f"planned for; this host's ranks share its cores)")
    print(f"test accuracy: {acc:.4f}")
    print(f"samples/s: {a.batch / per_mb:.0f}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"profile": prof, "plan": plan, "schedule": a.schedule,
                       "samples_per_s": a.batch / per_mb,
                       "measured_s_per_minibatch": per_mb, "test_accuracy": acc}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
