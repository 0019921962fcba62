#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""tally.plan's planner: PipeDream's program equals exhaustive search on small random chains;
weight-heavy layers get fewer replicas, compute-heavy ones more; the appliance/ring choice
flips exactly where the cost model (perf/perf_model.py) says; the CLI writes the plan;
bad input is refused with the field named."""
import importlib.util
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
import unittest

SRC = os.environ.get("TALLY_SRC", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "gpu_agent", "python"))
from tally.plan import (Cluster, ClusterError, ProfileError, evaluate, exhaustive,  # noqa: E402
                        format_plan, plan)
from tally.plan.cost import ring_time, tally_time  # noqa: E402

spec = importlib.util.spec_from_file_location("perf_model", os.path.join(SRC, "perf",
                                                                         "perf_model.py"))
perf_model = importlib.util.module_from_spec(spec)
spec.loader.exec_module(perf_model)


def chain(specs):
    return {"layers": [{"name": f"l{k}", "fwd_s": f, "bwd_s": b, "act_bytes": a,
                        "param_bytes": p} for k, (f, b, a, p) in enumerate(specs)]}


def with_overheads(prof, rng):
    """prof with random measured runtime terms (as tally.plan.profile writes them)."""
    for layer in prof["layers"]:
        w = layer["param_bytes"] > 0
        layer.update(opt_s=rng.uniform(0, 1e-3) * w, stash_s=rng.uniform(0, 1e-3) * w,
                     grad_copy_s=rng.uniform(0, 2e-3) * w)
    prof["overhead"] = {"microbatch_s": rng.uniform(0, 1e-3), "message_s": rng.uniform(0, 1e-3),
                        "opt_call_s": rng.uniform(0, 1e-4)}
    return prof


MULT = float(os.environ.get("TALLY_TIMEOUT_MULTIPLIER", "1"))


def _solo_rank(rank, store, q):
    """One rank of test_profile_solo: profile with solo=True in a 2-rank gloo group."""
    try:
        import datetime
        import torch
        import torch.distributed as dist
        from tally.plan import profile
        torch.set_num_threads(1)
        dist.init_process_group("gloo", store=dist.FileStore(store, 2), rank=rank,
                                world_size=2, timeout=datetime.timedelta(seconds=60))
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
        q.put((rank, profile(m, torch.randn(16, 8), minibatches=3, messages=False, solo=True)))
        dist.destroy_process_group()
    except Exception as e:  # the test prints it
        q.put((rank, f"rank {rank}: {type(e).__name__}: {e}"))


class Planner(unittest.TestCase):
    def test_equals_exhaustive(self):
        rng = random.Random(36)
        for case in range(150):
            n = rng.randint(1, 5)
            layers = [(rng.uniform(1e-4, 1e-2), rng.uniform(1e-4, 2e-2),
                       rng.choice([0, rng.randint(1000, 10**7)]), rng.randint(0, 5 * 10**7))
                      for _ in range(n)]
            app = None if rng.random() < 0.3 else {"count": rng.randint(1, 4),
                                                   "link_gbit": rng.choice([1, 10, 100])}
            cl = {"workers": rng.randint(1, 5), "link_gbit": rng.choice([1, 10, 25, 100]),
                  "alpha_us": rng.choice([0, 5, 50]), "appliance": app,
                  "overlap": case % 3 != 2}
            prof = chain(layers) if case % 2 else with_overheads(chain(layers), rng)
            p = plan(prof, cl)
            best, bounds = exhaustive(prof, cl)
            with self.subTest(case=case, cl=cl, layers=layers):
                self.assertAlmostEqual(p["predicted_s_per_minibatch"], best, delta=best * 1e-9)
                # the plan's stages cover the chain and use every worker
                got = [(s["layers"][0], s["layers"][1], s["replicas"]) for s in p["stages"]]
                self.assertEqual(got[0][0], 0)
                self.assertEqual(got[-1][1], n)
                self.assertEqual(sum(g[2] for g in got), cl["workers"])
                for a, b in zip(got, got[1:]):
                    self.assertEqual(a[1], b[0])
                # and its stated time is the max of its own parts
                parts = [s["time_s"] for s in p["stages"]] + [s["send_s"] for s in p["stages"]]
                self.assertAlmostEqual(max(parts), p["predicted_s_per_minibatch"],
                                       delta=best * 1e-9)

    def test_evaluate(self):
        """evaluate() of plan()'s own stages gives plan()'s time; a forced aggregation costs
        what ring_time / tally_time say; a plan that skips layers is refused."""
        rng = random.Random(37)
        for case in range(60):
            layers = [(rng.uniform(1e-4, 1e-2), rng.uniform(1e-4, 2e-2), rng.randint(0, 10**6),
                       rng.randint(0, 5 * 10**7)) for _ in range(rng.randint(1, 5))]
            cl = {"workers": rng.randint(1, 5), "link_gbit": rng.choice([1, 10]),
                  "alpha_us": 5, "appliance": {"count": 1, "link_gbit": rng.choice([1, 10, 40])}}
            prof = chain(layers) if case % 2 else with_overheads(chain(layers), rng)
            p = plan(prof, cl)
            e = evaluate(prof, cl, p["stages"])
            with self.subTest(case=case):
                self.assertAlmostEqual(e["predicted_s_per_minibatch"],
                                       p["predicted_s_per_minibatch"], delta=1e-12)
        c = Cluster.from_dict({"workers": 4, "link_gbit": 1, "alpha_us": 50,
                               "appliance": {"count": 1, "link_gbit": 4}})
        prof = chain([(1e-3, 2e-3, 1e4, 4 * 10**6), (1e-3, 2e-3, 1e3, 10**3)])
        whole = [{"layers": [0, 2], "ranks": [0, 1, 2, 3]}]
        m = 4 * 10**6 + 10**3
        for how, want in (("ring", ring_time(m, 4, c.link_bps, c.alpha_s)),
                          ("tally", tally_time(m, 4, 1, c.link_bps, 4e9 / 8, c.alpha_s)[0])):
            e = evaluate(prof, c.to_dict(), [dict(whole[0], aggregation=how)])
            self.assertAlmostEqual(e["stages"][0]["sync_s"], want, delta=1e-12)
            self.assertEqual(e["stages"][0]["aggregation"], how)
            self.assertAlmostEqual(e["predicted_s_per_minibatch"], max(want, 6e-3) / 4,
                                   delta=1e-12)
        # a runtime that aggregates after the backward: compute + sync
        e = evaluate(prof, dict(c.to_dict(), overlap=False), [dict(whole[0], aggregation="ring")])
        self.assertAlmostEqual(e["predicted_s_per_minibatch"],
                               (ring_time(m, 4, c.link_bps, c.alpha_s) + 6e-3) / 4, delta=1e-12)
        with self.assertRaisesRegex(ClusterError, "'overlap' must be true or false"):
            evaluate(prof, dict(c.to_dict(), overlap="no"), whole)
        with self.assertRaisesRegex(ProfileError, "end at layer 1"):
            evaluate(prof, c.to_dict(), [{"layers": [0, 1], "replicas": 4}])
        with self.assertRaisesRegex(ClusterError, "without 'appliance'"):
            evaluate(prof, {"workers": 4, "link_gbit": 1}, [dict(whole[0], aggregation="tally")])

    def test_overheads_in_prediction(self):
        """The profile's measured runtime terms enter the stage time as the planner's
        docstring says, worked by hand on synthetic numbers: fixed (per microbatch, and 2
        messages per boundary) beside the compute, the update (stash, optimizer call + per
        layer, gradient copy where the stage aggregates, through Tally or a ring) after the
        sync."""
        ms = 1e-3
        prof = chain([(2 * ms, 4 * ms, 10**5, 10**6), (1 * ms, 1 * ms, 10**4, 0),
                      (3 * ms, 5 * ms, 10**3, 2 * 10**6)])
        base = {"workers": 4, "link_gbit": 1, "alpha_us": 10, "overlap": False,
                "appliance": {"count": 1, "link_gbit": 4}}
        stages = [{"layers": [0, 2], "replicas": 2, "aggregation": "tally"},
                  {"layers": [2, 3], "replicas": 2, "aggregation": "ring"}]
        single = [{"layers": [0, 2], "replicas": 1}, {"layers": [2, 3], "replicas": 3}]
        bare_prof = json.loads(json.dumps(prof))
        for layer, (o, st, g) in zip(prof["layers"], [(0.3, 0.2, 0.5), (0, 0, 0),
                                                      (0.7, 0.4, 1.1)]):
            layer.update(opt_s=o * ms, stash_s=st * ms, grad_copy_s=g * ms)
        prof["overhead"] = {"microbatch_s": 0.25 * ms, "message_s": 0.125 * ms,
                            "opt_call_s": 0.05 * ms}
        c = Cluster.from_dict(base)
        sync0 = tally_time(10**6, 2, 1, c.link_bps, 4e9 / 8, c.alpha_s)[0]
        sync1 = ring_time(2 * 10**6, 2, c.link_bps, c.alpha_s)
        # stage 0: one boundary (after it); aggregates through Tally: its copy counts
        fixed0, upd0 = (0.25 + 2 * 0.125) * ms, (0.2 + 0.05 + 0.3 + 0.5) * ms
        # stage 1: one boundary (before it); a ring: its copy counts too (one flat allreduce)
        fixed1, upd1 = (0.25 + 2 * 0.125) * ms, (0.4 + 0.05 + 0.7 + 1.1) * ms
        for overlap in (False, True):
            cl = dict(base, overlap=overlap)
            e = evaluate(prof, cl, stages)
            bare = evaluate(bare_prof, cl, stages)["stages"]
            comb = (lambda a, b: max(a, b)) if overlap else (lambda a, b: a + b)
            want = [(comb(8 * ms + fixed0, sync0) + upd0) / 2,
                    (comb(8 * ms + fixed1, sync1) + upd1) / 2]
            with self.subTest(overlap=overlap):
                for k in range(2):
                    self.assertAlmostEqual(e["stages"][k]["time_s"], want[k], delta=1e-12)
                    self.assertGreater(e["stages"][k]["time_s"], bare[k]["time_s"])
                self.assertAlmostEqual(e["stages"][0]["fixed_s"], fixed0, delta=1e-15)
                self.assertAlmostEqual(e["stages"][0]["update_s"], upd0, delta=1e-15)
                self.assertAlmostEqual(e["stages"][1]["update_s"], upd1, delta=1e-15)
                self.assertAlmostEqual(e["predicted_s_per_minibatch"],
                                       max(want + [2 * c.transfer(10**4)]), delta=1e-12)
        # a middle stage has two boundaries; a whole-chain stage none; no weights: no step
        three = [{"layers": [0, 1], "replicas": 1}, {"layers": [1, 2], "replicas": 1},
                 {"layers": [2, 3], "replicas": 2, "aggregation": "tally"}]
        e = evaluate(prof, base, three)["stages"]
        self.assertAlmostEqual(e[1]["fixed_s"], (0.25 + 4 * 0.125) * ms, delta=1e-15)
        self.assertEqual(e[1]["update_s"], 0.0)
        self.assertAlmostEqual(e[2]["update_s"], (0.4 + 0.05 + 0.7 + 1.1) * ms, delta=1e-15)
        # one replica: nothing to aggregate, no copy; three: the copy, whichever way
        e = evaluate(prof, base, single)["stages"]
        self.assertAlmostEqual(e[0]["update_s"], (0.2 + 0.05 + 0.3) * ms, delta=1e-15)
        self.assertAlmostEqual(e[1]["update_s"], (0.4 + 0.05 + 0.7 + 1.1) * ms, delta=1e-15)
        whole = evaluate(prof, base, [{"layers": [0, 3], "replicas": 4, "aggregation": "ring"}])
        self.assertAlmostEqual(whole["stages"][0]["fixed_s"], 0.25 * ms, delta=1e-15)
        # plan() predicts with them too, and data parallelism as well
        p = plan(prof, base)
        self.assertAlmostEqual(p["predicted_s_per_minibatch"],
                               evaluate(prof, base, p["stages"])["predicted_s_per_minibatch"],
                               delta=1e-12)
        dp = evaluate(prof, base, [{"layers": [0, 3], "replicas": 4,
                                    "aggregation": p["data_parallel"]["aggregation"]}])
        self.assertAlmostEqual(p["data_parallel"]["predicted_s_per_minibatch"],
                               dp["predicted_s_per_minibatch"], delta=1e-12)
        with self.assertRaisesRegex(ProfileError, r"overhead.message_s"):
            plan(dict(prof, overhead={"message_s": -1}), base)
        with self.assertRaisesRegex(ProfileError, r"layers\[2\].grad_copy_s"):
            bad = json.loads(json.dumps(prof))
            bad["layers"][2]["grad_copy_s"] = "x"
            plan(bad, base)

    def test_weight_heavy_fewer_replicas(self):
        # layer 0: conv-like, much compute, few weights; layer 1: fc-like, little compute,
        # many weights (PipeDream's VGG case): the conv stage is replicated, the fc one is not
        cl = {"workers": 4, "link_gbit": 10, "alpha_us": 5}
        p = plan(chain([(20e-3, 40e-3, 1e5, 1e5), (1e-3, 2e-3, 4e3, 4e8)]), cl)
        self.assertEqual(len(p["stages"]), 2, p)
        conv, fc = p["stages"]
        self.assertGreater(conv["replicas"], fc["replicas"])
        self.assertEqual(fc["replicas"], 1)
        # and it beats pure data parallelism, which must sync the fc weights 4 ways
        self.assertLess(p["predicted_s_per_minibatch"],
                        p["data_parallel"]["predicted_s_per_minibatch"])
        # light weights everywhere: pure data parallelism (one stage, all replicas)
        p = plan(chain([(20e-3, 40e-3, 1e7, 1e4), (10e-3, 20e-3, 1e7, 1e4)]), cl)
        self.assertEqual(len(p["stages"]), 1, p)
        self.assertEqual(p["stages"][0]["replicas"], 4)

    def test_compute_heavy_more_replicas(self):
        cl = {"workers": 6, "link_gbit": 10, "alpha_us": 0}
        # equal weights, stage 1 has 4x the compute of stage 0: it gets more replicas
        # (6-way data parallelism syncs 100 MB: 133 ms / 6 = 22 ms; 1 + 5 replicas: 15 ms)
        p = plan(chain([(5e-3, 10e-3, 1e4, 5e7), (20e-3, 40e-3, 1e4, 5e7)]), cl)
        reps = {tuple(s["layers"]): s["replicas"] for s in p["stages"]}
        self.assertEqual(len(p["stages"]), 2, p)
        self.assertGreater(reps[(1, 2)], reps[(0, 1)])
        self.assertLess(p["predicted_s_per_minibatch"],
                        p["data_parallel"]["predicted_s_per_minibatch"])

    def test_cost_equals_perf_model(self):
        rng = random.Random(7)
        for _ in range(200):
            m, n, k = rng.randint(1, 10**9), rng.randint(2, 64), rng.randint(1, 8)
            link, app, alpha = rng.choice([1, 10, 100]), rng.choice([1, 10, 100, 400]), \
                rng.choice([0, 5e-6])
            cores = rng.choice([None, 1, 4])
            eng = 80.0 if cores else None
            row = perf_model.project(m, n, link, k, alpha, eng, cores, app)
            self.assertAlmostEqual(ring_time(m, n, link * 1e9 / 8, alpha), row["ring_s"],
                                   delta=row["ring_s"] * 1e-12)
            t, _ = tally_time(m, n, k, link * 1e9 / 8, app * 1e9 / 8, alpha, cores,
                              eng * 1e9 / 8 if eng else None)
            self.assertAlmostEqual(t, row["tally_s"], delta=row["tally_s"] * 1e-12)
            c = Cluster(n, link, alpha * 1e6, {"count": k, "link_gbit": app, "cores": cores,
                                               "engine_gbit": eng})
            s, how = c.sync(m, n)
            self.assertEqual(how, "tally" if row["tally_s"] < row["ring_s"] * (1 - 1e-12)
                             else "ring")
            self.assertAlmostEqual(s, min(row["tally_s"], row["ring_s"]), delta=s * 1e-12)

    def test_choice_flips_where_model_says(self):
        # one weight-heavy stage on 4 replicas, 10 Gbit/s links, no latency: the ring moves
        # 2*3/4 m = 1.5 m per worker; Tally's appliance link carries m*4/(k*Ba). With one
        # appliance Tally wins when Ba > 4/1.5 * 10 = 26.67 Gbit/s, ring below
        prof = chain([(1e-6, 1e-6, 0, 1e8)])
        seen = []
        for ag in (10, 20, 26, 27, 40, 100):
            cl = {"workers": 4, "link_gbit": 10, "alpha_us": 0,
                  "appliance": {"count": 1, "link_gbit": ag}}
            p = plan(prof, cl)
            row = perf_model.project(1e8, 4, 10, 1, 0.0, None, None, ag)
            want = "tally" if row["tally_s"] < row["ring_s"] else "ring"
            self.assertEqual(p["stages"][0]["aggregation"], want, (ag, row))
            seen.append(want)
        self.assertEqual(seen, ["ring", "ring", "ring", "tally", "tally", "tally"])
        # more appliances at 10 Gbit/s: k = 3 gives 4/(3*10) < 1.5/10
        for k, want in ((1, "ring"), (2, "ring"), (3, "tally")):
            p = plan(prof, {"workers": 4, "link_gbit": 10, "alpha_us": 0,
                            "appliance": {"count": k, "link_gbit": 10}})
            self.assertEqual(p["stages"][0]["aggregation"], want, k)

    def test_levels_equal_nested_exhaustive(self):
        # two levels (GPUs in a host, hosts on a fabric): the hierarchical program equals an
        # exhaustive search done level by level (every split and replica count of a level,
        # each stage's time on one unit being the exhaustive best one level down)
        from tally.plan.cost import Cluster as C
        rng = random.Random(361)
        for case in range(40):
            n = rng.randint(1, 4)
            layers = [(rng.uniform(1e-4, 1e-2), rng.uniform(1e-4, 2e-2),
                       rng.randint(0, 10**6), rng.randint(0, 5 * 10**7)) for _ in range(n)]
            inner = {"workers": rng.randint(1, 3), "link_gbit": rng.choice([100, 400]),
                     "alpha_us": 1}
            outer = {"workers": rng.randint(1, 3), "link_gbit": rng.choice([1, 10]),
                     "alpha_us": 5, "appliance": rng.choice([None, {"count": 2,
                                                                   "link_gbit": 25}])}
            p = plan(chain(layers), {"levels": [inner, outer]})
            prof = chain(layers)["layers"]
            lv = [C.from_dict(inner), C.from_dict(outer)]

            def best(k, i, j):
                comp = sum(x["fwd_s"] + x["bwd_s"] for x in prof[i:j])
                if k < 0:
                    return comp
                cl = lv[k]
                res = [math.inf]

                def rec(a, m_left, acc):
                    if a == j:
                        if m_left == 0:
                            res[0] = min(res[0], acc)
                        return
                    for b in range(a + 1, j + 1):
                        for m in range(1, m_left + 1):
                            sync, _ = cl.sync(sum(x["param_bytes"] for x in prof[a:b]), m)
                            t = max(acc, max(best(k - 1, a, b), sync) / m)
                            if b < j:
                                t = max(t, 2 * cl.transfer(prof[b - 1]["act_bytes"]))
                            rec(b, m_left - m, t)
                rec(i, cl.workers, 0.0)
                return res[0]
            want = best(1, 0, n)
            with self.subTest(case=case):
                self.assertAlmostEqual(p["predicted_s_per_minibatch"], want, delta=want * 1e-9)
                self.assertEqual(sum(s["replicas"] for s in p["stages"]),
                                 inner["workers"] * outer["workers"])
                self.assertEqual(p["stages"][-1]["layers"][1], n)

    def test_levels_one_level_is_flat(self):
        cl = {"workers": 4, "link_gbit": 10, "alpha_us": 5}
        prof = chain([(20e-3, 40e-3, 1e5, 1e5), (1e-3, 2e-3, 4e3, 4e8)])
        self.assertEqual(plan(prof, {"levels": [cl]}), plan(prof, cl))

    def test_levels_slow_fabric_splits_across_hosts(self):
        # 2 hosts x 2 GPUs; weights 100 MB in layer 1 only: on a fast fabric pure data
        # parallelism; on a slow fabric the hosts split the chain (a stage per host) while
        # each host's 2 GPUs replicate inside it over its fast link
        prof = chain([(20e-3, 40e-3, 1e5, 1e5), (20e-3, 40e-3, 1e5, 1e8)])
        gpu = {"workers": 2, "link_gbit": 400, "alpha_us": 1}
        fast = plan(prof, {"levels": [gpu, {"workers": 2, "link_gbit": 400}]})
        slow = plan(prof, {"levels": [gpu, {"workers": 2, "link_gbit": 1}]})
        self.assertEqual(len(fast["levels"]["stages"]), 1, fast["levels"])
        self.assertEqual(fast["levels"]["stages"][0]["replicas"], 2)
        self.assertEqual(len(slow["levels"]["stages"]), 2, slow["levels"])
        self.assertEqual([s["replicas"] for s in slow["stages"]], [2, 2])
        self.assertLess(slow["predicted_s_per_minibatch"],
                        slow["data_parallel"]["predicted_s_per_minibatch"])
        with self.assertRaisesRegex(ClusterError, r"levels\[1\]: cluster: missing 'link_gbit'"):
            plan(prof, {"levels": [gpu, {"workers": 2}]})

    def test_bad_input(self):
        with self.assertRaisesRegex(ClusterError, "workers"):
            plan(chain([(1, 1, 1, 1)]), {"workers": 0, "link_gbit": 1})
        with self.assertRaisesRegex(ClusterError, "appliance.engine_gbit"):
            plan(chain([(1, 1, 1, 1)]), {"workers": 2, "link_gbit": 1,
                                         "appliance": {"cores": 2}})
        with self.assertRaisesRegex(ClusterError, "unknown"):
            plan(chain([(1, 1, 1, 1)]), {"workers": 2, "link_gbit": 1, "wrkers": 3})
        with self.assertRaisesRegex(ProfileError, r"layers\[1\].bwd_s"):
            plan({"layers": [{"fwd_s": 1, "bwd_s": 1, "act_bytes": 1, "param_bytes": 1},
                             {"fwd_s": 1, "bwd_s": -1, "act_bytes": 1, "param_bytes": 1}]},
                 {"workers": 2, "link_gbit": 1})

    def test_profile(self):
        try:
            import torch
        except ImportError:
            self.skipTest("torch not importable")
        from tally.plan import profile
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(8, 300), torch.nn.ReLU(),
                                torch.nn.Linear(300, 5))
        x = torch.randn(16, 8)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "prof.json")
            p = profile(m, x, minibatches=3, path=path)
            with open(path) as f:
                self.assertEqual(json.load(f), p)
        self.assertEqual([layer["param_bytes"] for layer in p["layers"]],
                         [(8 * 300 + 300) * 4, 0, (300 * 5 + 5) * 4])
        self.assertEqual([layer["act_bytes"] for layer in p["layers"]],
                         [16 * 300 * 4, 16 * 300 * 4, 16 * 5 * 4])
        # a second call through the package works (a submodule named profile would have
        # replaced the function on the package at the first call)
        import tally.plan
        self.assertEqual(len(tally.plan.profile(m, x, minibatches=1)["layers"]), 3)
        self.assertEqual(p["minibatch"], 16)
        for layer in p["layers"]:
            self.assertGreater(layer["fwd_s"], 0)
            self.assertGreater(layer["bwd_s"], 0)
        # the runtime's own costs: weighted layers have a stash and a gradient copy, ReLU none;
        # seconds, each well under a second on these sizes; a gloo message was timed
        ov = p["overhead"]
        for f in ("opt_call_s", "microbatch_s", "message_s"):
            self.assertGreater(ov[f], 0, f)
            self.assertLess(ov[f], 0.5, f)
        for k in (0, 2):
            self.assertGreater(p["layers"][k]["stash_s"], 0)
            self.assertGreater(p["layers"][k]["grad_copy_s"], 0)
            self.assertGreaterEqual(p["layers"][k]["opt_s"], 0)
            self.assertLess(p["layers"][k]["grad_copy_s"], 0.5)
        self.assertEqual([p["layers"][1][f] for f in ("opt_s", "stash_s", "grad_copy_s")],
                         [0.0, 0.0, 0.0])
        # the profile plans, and the model's own gradients were left cleared
        self.assertEqual(len(plan(p, {"workers": 2, "link_gbit": 1})["stages"][0]["ranks"]) > 0,
                         True)
        self.assertTrue(all(q.grad is None for q in m.parameters()))
        with self.assertRaisesRegex(TypeError, "layers="):
            profile(torch.nn.Linear(2, 2), torch.randn(1, 2))

    def test_profile_overheads_scale(self):
        """The weight-proportional terms grow with the weights (a 4 MB layer against a 80-byte
        one: sane units), the fixed ones do not depend on them, and measuring them leaves the
        model's weights and gradients as they were; messages=False leaves message_s out."""
        try:
            import torch
        except ImportError:
            self.skipTest("torch not importable")
        from tally.plan import profile
        torch.manual_seed(1)
        m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 1000),
                                torch.nn.Linear(1000, 1000))
        before = [q.detach().clone() for q in m.parameters()]
        p = profile(m, torch.randn(8, 4), minibatches=5, messages=False)
        self.assertNotIn("message_s", p["overhead"])
        small, big = p["layers"][0], p["layers"][2]
        for f in ("stash_s", "grad_copy_s", "opt_s"):
            self.assertGreater(big[f], small[f], f)
        # the big layer's update: a few GB/s at worst on a loaded host, not a unit slip
        self.assertLess(big["opt_s"] + big["grad_copy_s"] + big["stash_s"], 1.0)
        for a, b in zip(before, m.parameters()):
            self.assertTrue(torch.equal(a, b))
            self.assertIsNone(b.grad)
        self.assertEqual(plan(p, {"workers": 2, "link_gbit": 1})["stages"][0]["layers"][0], 0)
        # messages="group" outside torch.distributed: refused, naming the other setting
        with self.assertRaisesRegex(RuntimeError, "messages=True"):
            profile(m, torch.randn(8, 4), minibatches=1, messages="group")

    def test_profile_times_the_runtime_steps_in_order(self):
        """The stash, the step and the loss are timed in the layers' own pass, in the order
        a stage runs them (stashes first to last before the forwards' ends, steps last to
        first after each backward): runtime functions made to take a known time show in
        stash_s, opt_s and the last layer's fwd_s; a weightless layer has none; the model's
        weights and gradients are left as they were."""
        try:
            import torch
        except ImportError:
            self.skipTest("torch not importable")
        from tally.plan import profile
        from tally.plan import runtime as rt
        calls, stash0, update0 = [], rt.stash_weights, rt.update
        big = (lambda ps: any(p.numel() > 1 for p in ps))  # not overhead.opt_call_s's probe

        def stash(names, params):
            if big(params):
                calls.append(("stash", params[0].shape[0]))
                time.sleep(0.003)
            return stash0(names, params)

        def update(params, opt, m):
            if big(params):
                calls.append(("update", params[0].shape[0]))
                time.sleep(0.005)
            return update0(params, opt, m)

        def loss(out, y):
            time.sleep(0.004)
            return torch.nn.functional.cross_entropy(out, y)
        torch.manual_seed(2)
        m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
        before = [q.detach().clone() for q in m.parameters()]
        rt.stash_weights, rt.update = stash, update
        try:
            p = profile(m, torch.randn(6, 8), minibatches=3, warmup=1, messages=False,
                        loss_fn=loss, target=torch.tensor([0, 1, 2, 3, 0, 1]))
        finally:
            rt.stash_weights, rt.update = stash0, update0
        one = [("stash", 16), ("stash", 4), ("update", 4), ("update", 16)]
        self.assertEqual(calls, one * 4)  # warm-up + 3: the runtime's order, every minibatch
        for k in (0, 2):
            self.assertGreaterEqual(p["layers"][k]["stash_s"], 0.003)
            self.assertGreaterEqual(p["layers"][k]["opt_s"], 0.004)
        self.assertEqual([p["layers"][1][f] for f in ("opt_s", "stash_s")], [0.0, 0.0])
        self.assertGreaterEqual(p["layers"][2]["fwd_s"], 0.004)  # the loss is the last's
        self.assertLess(p["layers"][0]["fwd_s"], 0.004)
        for a, b in zip(before, m.parameters()):
            self.assertTrue(torch.equal(a, b))
            self.assertIsNone(b.grad)

    def test_profile_solo(self):
        """solo=True on 2 ranks of a gloo group (a FileStore): the profile says ranks_at_once
        2 and has each layer's solo times, and it plans on a shared host; without
        torch.distributed, solo=True is refused naming solo=False."""
        try:
            import torch
            import torch.multiprocessing as mp
        except ImportError:
            self.skipTest("torch not importable")
        from tally.plan import profile
        with self.assertRaisesRegex(RuntimeError, "solo=False"):
            profile(torch.nn.Sequential(torch.nn.Linear(2, 2)), torch.randn(1, 2),
                    minibatches=1, messages=False, solo=True)
        ctx = mp.get_context("spawn")
        with tempfile.TemporaryDirectory() as d:
            q = ctx.Queue()
            ps = [ctx.Process(target=_solo_rank, args=(r, os.path.join(d, "store"), q))
                  for r in range(2)]
            for p in ps:
                p.start()
            try:
                got = dict(q.get(timeout=120 * MULT) for _ in ps)
            finally:
                for p in ps:
                    p.join(30)
                    if p.is_alive():
                        p.kill()
                        p.join()
        for r in range(2):
            self.assertNotIsInstance(got[r], str, got[r])
            self.assertEqual(got[r]["ranks_at_once"], 2)
            for layer in got[r]["layers"]:
                self.assertGreater(layer["fwd_solo_s"], 0)
                self.assertGreater(layer["bwd_solo_s"], 0)
            p = plan(got[r], {"workers": 2, "link_gbit": 1, "host_cores": 1})
            self.assertEqual(p["stages"][-1]["layers"][1], 3)

    def test_shared_host_equals_exhaustive(self):
        """With host_cores and solo times (the shared-host term) the program still equals
        exhaustive search, and evaluate() of its stages gives its time."""
        rng = random.Random(38)
        for case in range(120):
            n = rng.randint(1, 5)
            prof = chain([(rng.uniform(1e-4, 1e-2), rng.uniform(1e-4, 2e-2),
                           rng.choice([0, rng.randint(1000, 10**6)]), rng.randint(0, 10**7))
                          for _ in range(n)])
            w = rng.randint(1, 5)
            prof["ranks_at_once"] = w
            for layer in prof["layers"]:
                k = rng.uniform(0.3, 1.0)
                layer.update(fwd_solo_s=layer["fwd_s"] * k, bwd_solo_s=layer["bwd_s"] * k)
            if case % 3 == 0:
                prof = with_overheads(prof, rng)
            cl = {"workers": w, "link_gbit": rng.choice([0.1, 1, 10]), "alpha_us": 50,
                  "overlap": case % 2 == 0, "host_cores": rng.randint(1, 4),
                  "appliance": {"count": 1, "link_gbit": rng.choice([0.4, 4])}}
            p = plan(prof, cl)
            best, _ = exhaustive(prof, cl)
            with self.subTest(case=case, cl=cl):
                self.assertAlmostEqual(p["predicted_s_per_minibatch"], best, delta=best * 1e-9)
                e = evaluate(prof, cl, p["stages"])
                self.assertAlmostEqual(e["predicted_s_per_minibatch"], best, delta=best * 1e-9)

    def test_other_load(self):
        """other_load() recovers e of s(k) = max(1, (k + e) / C) from s(R) / s(1) wherever
        the ratio shows sharing."""
        from tally.plan.planner import other_load
        for C in (1, 2, 4):
            for R in (2, 4, 8):
                for e in (0.0, 0.5, 1.0, 3.0, 16.0):
                    s = [max(1.0, (k + e) / C) for k in (1, R)]
                    rho = s[1] / s[0]
                    got = other_load(rho, R, C)
                    with self.subTest(C=C, R=R, e=e):
                        if rho <= 1.0:
                            self.assertIsNone(got)
                            continue
                        # the load found gives the ratio measured
                        g = [max(1.0, (k + got) / C) for k in (1, R)]
                        self.assertAlmostEqual(g[1] / g[0], rho, delta=1e-9)
                        if e <= C - 1 or rho < R / C:  # the only load that fits, or the smaller
                            self.assertAlmostEqual(got, e, delta=1e-9)
        # C = 2, R = 4, rho = 2: e = 0 (and e = 2 fits too: the smaller is taken)
        self.assertEqual(other_load(2.0, 4, 2), 0.0)
        self.assertAlmostEqual(other_load(1.5, 4, 2), 5.0, delta=1e-12)  # (4 - 1.5) / 0.5
        self.assertEqual(other_load(3.0, 4, 2), 1.0)  # above the model's most: C - 1
        self.assertIsNone(other_load(0.9, 4, 2))

    def test_shared_host_terms(self):
        """4 ranks profiled at once on 2 cores at twice their solo time (e = 0): a stage of one
        replica computes at half the profiled time, a stage of 4 at the profiled time (pure
        data parallelism is unchanged), and the plan is at least the chain's compute / 4;
        without solo times e = 0 too; at a heavy other load a stage alone gains little;
        without host_cores nothing changes."""
        prof = chain([(10e-3, 20e-3, 1000, 0), (20e-3, 40e-3, 1000, 0)])
        prof["ranks_at_once"] = 4
        for layer in prof["layers"]:
            layer.update(fwd_solo_s=layer["fwd_s"] / 2, bwd_solo_s=layer["bwd_s"] / 2)
        cl = {"workers": 4, "link_gbit": 100, "alpha_us": 0, "host_cores": 2}
        pipe = [{"layers": [0, 1], "replicas": 1}, {"layers": [1, 2], "replicas": 3}]
        e = evaluate(prof, cl, pipe)
        self.assertEqual(e["shared_host"]["other_load"], 0.0)
        # stage 0: 30 ms x f(1) = 15 ms; stage 1: 60 ms x f(3) (s(3)/s(4) = 1.5/2) / 3 = 15 ms
        self.assertAlmostEqual(e["stages"][0]["time_s"], 15e-3, delta=1e-12)
        self.assertAlmostEqual(e["stages"][1]["time_s"], 15e-3, delta=1e-12)
        # bound: 90 ms x f(4) / 4 = 22.5 ms above both stages
        self.assertAlmostEqual(e["shared_host"]["cpu_bound_s"], 22.5e-3, delta=1e-12)
        self.assertAlmostEqual(e["predicted_s_per_minibatch"], 22.5e-3, delta=1e-12)
        dp = [{"layers": [0, 2], "replicas": 4}]
        plain = dict(cl)
        plain.pop("host_cores")
        self.assertAlmostEqual(evaluate(prof, cl, dp)["predicted_s_per_minibatch"],
                               evaluate(prof, plain, dp)["predicted_s_per_minibatch"],
                               delta=1e-12)
        self.assertAlmostEqual(evaluate(prof, plain, pipe)["predicted_s_per_minibatch"],
                               30e-3, delta=1e-12)  # stage 0's 30 ms as profiled
        nosolo = chain([(10e-3, 20e-3, 1000, 0), (20e-3, 40e-3, 1000, 0)])
        nosolo["ranks_at_once"] = 4
        self.assertAlmostEqual(evaluate(nosolo, cl, pipe)["predicted_s_per_minibatch"],
                               22.5e-3, delta=1e-12)
        # heavy other load: alone 10% faster than with all 4 (rho 1.1 -> e = 29, f(1) = 30/33)
        for layer in prof["layers"]:
            layer.update(fwd_solo_s=layer["fwd_s"] / 1.1, bwd_solo_s=layer["bwd_s"] / 1.1)
        e = evaluate(prof, cl, pipe)
        self.assertAlmostEqual(e["shared_host"]["other_load"], 29.0, delta=1e-9)
        self.assertAlmostEqual(e["stages"][0]["time_s"], 30e-3 * 30 / 33, delta=1e-12)
        # solo no faster than all at once: no sharing term
        for layer in prof["layers"]:
            layer.update(fwd_solo_s=layer["fwd_s"], bwd_solo_s=layer["bwd_s"])
        self.assertNotIn("shared_host", evaluate(prof, cl, pipe))
        self.assertAlmostEqual(evaluate(prof, cl, pipe)["predicted_s_per_minibatch"], 30e-3,
                               delta=1e-12)
        self.assertIn("shared host", format_plan(plan(nosolo, cl)))

    def test_shared_host_bad_input(self):
        prof = chain([(1e-3, 2e-3, 1000, 10), (1e-3, 2e-3, 1000, 10)])
        for v in (0, "2", True, 1.5):
            with self.assertRaisesRegex(ClusterError, "host_cores"):
                plan(prof, {"workers": 2, "link_gbit": 1, "host_cores": v})
        with self.assertRaisesRegex(ClusterError, "host_cores.*innermost"):
            plan(prof, {"levels": [{"workers": 2, "link_gbit": 10},
                                   {"workers": 2, "link_gbit": 1, "host_cores": 2}]})
        for v in (0, 2.0, "4"):
            with self.assertRaisesRegex(ProfileError, "ranks_at_once"):
                plan(dict(prof, ranks_at_once=v), {"workers": 2, "link_gbit": 1})
        bad = json.loads(json.dumps(prof))
        bad["layers"][0].update(fwd_solo_s=1e-3, bwd_solo_s=1e-3)  # layer 1 has none
        with self.assertRaisesRegex(ProfileError, r"layers\[1\]\.fwd_solo_s"):
            plan(bad, {"workers": 2, "link_gbit": 1})

    def test_windows_hand_worked(self):
        # 3 stages x 1 replica on 0.1 Gbit/s (12.5e6 B/s), alpha 0: c = 6, 6, 3 ms; 2 C = 10 ms
        # (62500 B) and 4 ms (25000 B); P = max(6, 6, 3, 10, 4) = 10 ms. Last: RT 0, F 1,
        # L = 3. Stage 1: RT = 4 + 3 = 7, ceil((6 + 7) / 10) = 2 = NOAM, L = 6 + max(7, 1 x
        # 10) = 16. Stage 0: RT = 10 + 16 = 26, ceil((6 + 26) / 10) = 4 > NOAM 3
        prof = chain([(2e-3, 4e-3, 62500, 1000), (2e-3, 4e-3, 25000, 2000),
                      (1e-3, 2e-3, 10, 3000)])
        cl = {"workers": 3, "link_gbit": 0.1, "alpha_us": 0}
        st = [{"layers": [k, k + 1], "replicas": 1} for k in range(3)]
        ev = evaluate(prof, cl, st)
        self.assertAlmostEqual(ev["predicted_s_per_minibatch"], 10e-3)
        got = [(x["noam"], x["in_flight"], round(x["round_trip_s"] * 1e3, 6),
                x["stash_bytes"]) for x in ev["stages"]]
        self.assertEqual(got, [(3, 4, 26.0, 4000), (2, 2, 7.0, 4000), (1, 1, 0.0, 3000)])
        # the planner's own plan carries the windows; the plan-level field is stage 0's
        p = plan(prof, cl)
        self.assertEqual(p["in_flight"], p["stages"][0]["in_flight"])
        ev2 = evaluate(prof, cl, p["stages"])
        self.assertEqual([x["in_flight"] for x in p["stages"]],
                         [x["in_flight"] for x in ev2["stages"]])
        self.assertIn("in flight", format_plan(p))
        self.assertIn("weight stash", format_plan(p))
        # free transfers and equal stages: NOAM exactly (4, 3, 2, 1)
        eq = chain([(1e-3, 2e-3, 0, 100)] * 4)
        ev = evaluate(eq, {"workers": 4, "link_gbit": 1, "alpha_us": 0},
                      [{"layers": [k, k + 1], "replicas": 1} for k in range(4)])
        self.assertEqual([x["in_flight"] for x in ev["stages"]], [4, 3, 2, 1])
        self.assertEqual([x["noam"] for x in ev["stages"]], [4, 3, 2, 1])
        # replicas: windows never shallower (in minibatches of the pipeline) downstream
        rng = random.Random(7)
        for _ in range(30):
            n = rng.randint(2, 5)
            pr = chain([(rng.uniform(1e-4, 5e-3), rng.uniform(1e-4, 1e-2),
                         rng.choice([0, 1e3, 1e5]), rng.choice([0, 1e4, 1e6])) for _ in range(n)])
            p = plan(pr, {"workers": rng.randint(2, 6), "link_gbit": rng.choice([0.05, 1, 10])})
            fs = [(x["in_flight"], x["replicas"]) for x in p["stages"]]
            for (f, m), (g, mm) in zip(fs, fs[1:]):
                self.assertGreaterEqual(f * m, g * mm, p["stages"])
            for x in p["stages"]:
                self.assertGreaterEqual(x["in_flight"], x["noam"])
                self.assertLessEqual(x["busy_s"] + x["round_trip_s"],
                                     x["in_flight"] * x["replicas"]
                                     * p["predicted_s_per_minibatch"] * (1 + 1e-9))

    def test_windows_old_plan_loads(self):
        # a plan without per-stage windows (before this change): the runtime uses NOAM; with
        # them, the plan's; a bad one is refused naming the field
        try:
            import torch
        except ImportError:
            self.skipTest("no torch")
        from tally.plan.runtime import PipelineError, PipelineTrainer
        mods = [torch.nn.Linear(2, 2) for _ in range(3)]
        old = {"stages": [{"stage": k, "layers": [k, k + 1], "ranks": [k],
                           "aggregation": "none"} for k in range(3)], "in_flight": 3}
        self.assertEqual([PipelineTrainer(mods, old, r, None).in_flight() for r in range(3)],
                         [3, 2, 1])
        new = json.loads(json.dumps(old))
        for st, f in zip(new["stages"], (5, 2, 1)):
            st["in_flight"] = f
        self.assertEqual([PipelineTrainer(mods, new, r, None).in_flight() for r in range(3)],
                         [5, 2, 1])
        new["stages"][0]["in_flight"] = 0
        with self.assertRaisesRegex(PipelineError, r"stages\[0\]\.in_flight"):
            PipelineTrainer(mods, new, 0, None).in_flight()

    def test_cli(self):
        with tempfile.TemporaryDirectory() as d:
            pf, cf, of = (os.path.join(d, x) for x in ("p.json", "c.json", "o.json"))
            with open(pf, "w") as f:
                json.dump(chain([(20e-3, 40e-3, 1e5, 1e5), (1e-3, 2e-3, 4e3, 4e8)]), f)
            with open(cf, "w") as f:
                json.dump({"workers": 4, "link_gbit": 10}, f)
            env = dict(os.environ, PYTHONPATH=os.path.join(SRC, "gpu_agent", "python"))
            cli = os.path.join(SRC, "gpu_agent", "python", "bin", "tally-plan")
            r = subprocess.run([sys.executable, cli, pf, "--cluster", cf, "-o", of], env=env,
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("predicted time per minibatch", r.stdout)
            with open(of) as f:
                out = json.load(f)
            self.assertEqual(out, plan(pf, cf))
            with open(cf, "w") as f:
                json.dump({"workers": 4}, f)
            r = subprocess.run([sys.executable, cli, pf, "--cluster", cf], env=env,
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 2)
            self.assertIn("missing 'link_gbit'", r.stderr)


if __name__ == "__main__":
    unittest.main()
