#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""tests/perf/test_perf_model.py - `tally-perf model`'s formulas at hand-computed points (ring,
summation service, BytePS's split, cores, k to match the ring), its inputs (engine rows, a
report's results.json, the emulated check) and its option checks (exit 2 naming the option).
No measurement: the engine rate is given."""
import contextlib
import importlib.util
import io
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "perf"))
import perf_model as pm  # noqa: E402

G = 1e9 / 8  # bytes/s of 1 Gbit/s


def run_main(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = pm.main(argv)
    return rc, out.getvalue(), err.getvalue()


class Formulas(unittest.TestCase):
    def test_ring(self):
        # n = 2: each worker sends and receives M/2 twice = M; n = 4: 1.5 M
        self.assertAlmostEqual(pm.ring_bytes(100, 2), 100)
        self.assertAlmostEqual(pm.ring_bytes(100, 4), 150)
        self.assertAlmostEqual(pm.ring_bytes(1000, 1000), 1998)
        # 1 GB over 1 GB/s, n = 2, 1 ms per step: 1 s + 2 steps
        self.assertAlmostEqual(pm.ring_time(1e9, 2, 1e9, 1e-3), 1.002)
        self.assertAlmostEqual(pm.ring_time(1e9, 8, 1e9), 1.75)

    def test_tally_n2_k1(self):
        # n = 2, k = 1, equal links: the appliance moves 2M, the workers M: 2 M/B
        t, bound = pm.tally_time(1e9, 2, 1, 1e9, 1e9)
        self.assertAlmostEqual(t, 2.0)
        self.assertEqual(bound, "appliance_link")
        # k = n: every link carries M, the worker's bound (first of the equal terms)
        t, bound = pm.tally_time(1e9, 2, 2, 1e9, 1e9, alpha_s=1e-3)
        self.assertAlmostEqual(t, 1.002)  # two hops of latency
        self.assertEqual(bound, "worker_link")
        # appliance ports W/K times faster (the emulation's default): M/B again
        self.assertAlmostEqual(pm.tally_time(1e9, 4, 2, 1e9, 2e9)[0], 1.0)

    def test_tally_compute_bound(self):
        # n = 4, k = 1, 1 core at 1 GB/s sums 4 GB: 4 s; links 10 GB/s: 0.4 s
        t, bound = pm.tally_time(1e9, 4, 1, 10e9, 10e9, cores=1, engine_bps=1e9)
        self.assertAlmostEqual(t, 4.0)
        self.assertEqual(bound, "compute")
        self.assertAlmostEqual(pm.tally_time(1e9, 4, 1, 10e9, 10e9, cores=8,
                                             engine_bps=1e9)[0], 0.5)
        self.assertNotIn("compute", pm.tally_terms(1, 4, 1, 1, 1))

    def test_byteps_split(self):
        # n = 2, k = 1: D = 4 + 2 - 2 = 4, M_cpu = 2/4, M_gpu = 1/4
        self.assertEqual(pm.byteps_split(2, 1), (0.5, 0.25))
        # n = 4, k = 2: D = 16 + 8 - 4 = 20, M_cpu = 6/20, M_gpu = 2/20
        fc, fg = pm.byteps_split(4, 2)
        self.assertAlmostEqual(fc, 0.3)
        self.assertAlmostEqual(fg, 0.1)
        self.assertAlmostEqual(2 * fc + 4 * fg, 1.0)  # k M_cpu + n M_gpu = M
        self.assertEqual(pm.byteps_split(4, 4), (0.25, 0.0))
        self.assertEqual(pm.byteps_split(4, 8), (0.125, 0.0))
        for n in (2, 3, 8, 100):
            for k in range(0, n + 1):
                fc, fg = pm.byteps_split(n, k) if k else (0.0, 1.0 / n)
                self.assertAlmostEqual(k * fc + n * fg, 1.0, msg=(n, k))

    def test_split_time(self):
        # equal links: 2n(n-1)/(n^2+kn-2k) M/B; n = 4, k = 2: 24/20 = 1.2
        self.assertAlmostEqual(pm.split_time(1e9, 4, 2, 1e9, 1e9), 1.2)
        # k = 0 is the ring's 2(n-1)/n, k = n is M/B
        self.assertAlmostEqual(pm.split_time(1e9, 4, 0, 1e9, 1e9), pm.ring_time(1e9, 4, 1e9))
        self.assertAlmostEqual(pm.split_time(1e9, 4, 4, 1e9, 1e9), 1.0)
        # n = 2, k = 1: 4/4 = 1.0, both machine kinds equally loaded
        self.assertAlmostEqual(pm.split_time(1e9, 2, 1, 1e9, 1e9), 1.0)

    def test_k_to_match_ring(self):
        # alpha = 0, equal links: k >= n^2 / (2(n-1)); n = 2: 2, n = 4: 8/3 -> 3, n = 8: 4.57 -> 5
        for n, k in ((2, 2), (4, 3), (8, 5), (1024, 513)):
            self.assertEqual(pm.k_to_match_ring(1e9, n, 1e9, 1e9), k, msg=n)
            t = pm.tally_time(1e9, n, k, 1e9, 1e9)[0]
            self.assertLessEqual(t, pm.ring_time(1e9, n, 1e9) * (1 + 1e-12))
            self.assertGreater(pm.tally_time(1e9, n, k - 1, 1e9, 1e9)[0],
                               pm.ring_time(1e9, n, 1e9))
        # faster appliance ports need fewer; a slow core count needs more
        self.assertEqual(pm.k_to_match_ring(1e9, 4, 1e9, 4e9), 1)
        self.assertEqual(pm.k_to_match_ring(1e9, 4, 1e9, 4e9, cores=1, engine_bps=1e9), 3)
        # latency: n = 2 has 2 steps, as Tally's 2 hops: the same k = 2
        self.assertEqual(pm.k_to_match_ring(1e9, 2, 1e9, 1e9, alpha_s=1.0), 2)
        # n = 8 with latency: the ring's 14 steps leave Tally more room, fewer appliances
        self.assertLess(pm.k_to_match_ring(1e9, 8, 1e9, 1e9, alpha_s=0.1), 5)

    def test_cores(self):
        self.assertEqual(pm.cores_needed(12.5e9, 12.5e9), 1)
        self.assertEqual(pm.cores_needed(12.5e9, 5e9), 3)
        self.assertEqual(pm.cores_needed(1.0, 5e9), 1)

    def test_project_row(self):
        # 100 Gbit/s, n = 8, k = 8, 400 MB, engine 50 Gbit/s per core, no latency
        r = pm.project(400e6, 8, 100.0, 8, 0.0, 50.0)
        self.assertAlmostEqual(r["ring_s"], 1.75 * 400e6 / (100 * G))
        self.assertAlmostEqual(r["tally_s"], 400e6 / (100 * G))
        self.assertAlmostEqual(r["speedup"], 1.75)
        self.assertAlmostEqual(r["cores_per_100g"], 2.0)
        self.assertEqual((r["appliance_cores_needed"], r["cores_total"]), (2, 16))
        self.assertEqual(r["k_match_ring"], 5)
        # 400 Gbit/s ports: 8 cores each
        self.assertEqual(pm.project(400e6, 8, 400.0, 8, 0.0, 50.0)["cores_total"], 64)
        # no engine rate: times, no cores
        r = pm.project(400e6, 8, 100.0, 8)
        self.assertIsNone(r["cores_total"])
        with self.assertRaises(pm.UsageError):
            pm.project(400e6, 8, 100.0, 8, cores=2)


class Inputs(unittest.TestCase):
    ENGINE = [{"bench": "engine", "dtype": "f32", "deterministic": False, "chunk_bytes": 1024,
               "gbps": 3.0},
              {"bench": "engine", "dtype": "f32", "deterministic": True, "chunk_bytes": 8192,
               "gbps": 1.0},
              {"bench": "engine", "dtype": "f32", "deterministic": False, "chunk_bytes": 8192,
               "gbps": 6.25},
              {"bench": "engine", "dtype": "bf16", "deterministic": False, "chunk_bytes": 8192,
               "gbps": 9.0}]
    EMUL = [{"impl": "tally", "workers": 4, "bytes": 64 << 20, "seconds_per_round": 0.6,
             "verified": True, "emulate": True, "link_gbit": 1.0, "appliances": 2},
            {"impl": "gloo", "workers": 4, "bytes": 64 << 20, "seconds_per_round": 0.9,
             "verified": True, "emulate": True, "link_gbit": 1.0, "appliances": None},
            {"impl": "mpi", "workers": 4, "bytes": 64 << 20, "seconds_per_round": 1.5,
             "verified": False, "emulate": True, "link_gbit": 1.0, "appliances": None}]

    def test_engine_rate(self):
        # GB/s in the engine's JSON -> Gbit/s; f32, not deterministic, 8 KiB chunks
        g, row = pm.engine_rate_from_rows(self.ENGINE)
        self.assertAlmostEqual(g, 50.0)
        self.assertEqual(row["chunk_bytes"], 8192)
        self.assertAlmostEqual(pm.engine_rate_from_rows(self.ENGINE[:2])[0], 24.0)
        self.assertEqual(pm.engine_rate_from_rows([]), (None, None))

    def test_read_rows(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "results.json")
            with open(p, "w") as f:
                json.dump({"machine": {}, "results": {"engine": {"rows": self.ENGINE},
                                                      "allreduce": {"rows": self.EMUL}}}, f)
            self.assertEqual(len(pm.read_rows(p)), 7)
            p = os.path.join(d, "lines.json")
            with open(p, "w") as f:
                f.write("noise\n" + "\n".join(json.dumps(r) for r in self.EMUL) + "\n")
            self.assertEqual(pm.read_rows(p), self.EMUL)
            with self.assertRaises(pm.UsageError):
                pm.read_rows(os.path.join(d, "missing"))

    def test_check_point(self):
        c = pm.check_point(self.EMUL)
        # 64 MiB over 1 Gbit/s: 0.537 s; appliances at 1*4/2 = 2 Gbit/s carry 4*64Mi/2 as fast
        t = (64 << 20) / G
        self.assertAlmostEqual(c["tally_predicted_s"], t)
        self.assertAlmostEqual(c["ring_predicted_s"], 1.5 * t)
        self.assertAlmostEqual(c["appliance_gbit"], 2.0)
        self.assertAlmostEqual(c["tally_measured_over_predicted"], 0.6 / t)
        self.assertEqual(list(c["peers"]), ["gloo"])  # mpi not verified
        self.assertAlmostEqual(c["speedup_predicted"], 1.5)
        self.assertAlmostEqual(c["speedup_measured"], 1.5)
        self.assertIsNone(pm.check_point(self.EMUL[1:]))
        self.assertIsNone(pm.check_point([dict(self.EMUL[0], emulate=False)]))
        self.assertEqual(len(pm.check_points(self.EMUL + [dict(r, link_gbit=0.25)
                                                          for r in self.EMUL])), 2)


class Cli(unittest.TestCase):
    def test_defaults(self):
        o = pm.parse_args([])
        self.assertEqual(o.worker_list, [8, 16, 32, 64, 128, 256, 512, 1024])
        self.assertEqual(o.links, [100.0, 400.0])
        self.assertEqual(o.models, [("100M params x 4 B", 400000000)])
        self.assertEqual(pm.parse_appliances(o.appliances, 64), 64)

    def test_lists(self):
        o = pm.parse_args(["--workers", "2,4", "--link-gbit", "25,100", "--model-bytes",
                           "64M,resnet50", "--appliances", "W/4"])
        self.assertEqual(o.worker_list, [2, 4])
        self.assertEqual(o.links, [25.0, 100.0])
        self.assertEqual([m for _, m in o.models], [64 << 20, 104000000])
        self.assertEqual([pm.parse_appliances("W/4", n) for n in (2, 8)], [1, 2])
        self.assertEqual(pm.parse_appliances("3", 8), 3)

    def test_rejects_name_the_option(self):
        for argv, opt in ((["--workers", "8,x"], "--workers"), (["--workers", "1"], "--workers"),
                          (["--workers", ""], "--workers"), (["--link-gbit", "0"], "--link-gbit"),
                          (["--link-gbit", "fast"], "--link-gbit"),
                          (["--model-bytes", "gpt5"], "--model-bytes"),
                          (["--appliances", "0"], "--appliances"),
                          (["--appliances", "W/0"], "--appliances"),
                          (["--cores", "0"], "--cores"), (["--alpha-us", "-1"], "--alpha-us"),
                          (["--engine-gbps", "0"], "--engine-gbps"),
                          (["--engine-gbps", "x"], "--engine-gbps"),
                          (["--bytes-per-param", "3"], "--bytes-per-param"),
                          (["--check", "a", "--check-run"], "--check"),
                          (["--bogus"], "--bogus")):
            with self.assertRaises(pm.UsageError, msg=str(argv)) as cm:
                pm.parse_args(argv)
            self.assertIn(opt, str(cm.exception), msg=str(argv))

    def test_main_exit_2(self):
        rc, out, err = run_main(["--workers", "8,x", "--engine-gbps", "50"])
        self.assertEqual(rc, 2)
        self.assertEqual(out, "")
        self.assertIn("tally-perf model: bad --workers '8,x'", err)

    def test_main_table_json_plot_check(self):
        with tempfile.TemporaryDirectory() as d:
            chk = os.path.join(d, "emul.json")
            with open(chk, "w") as f:
                f.write("\n".join(json.dumps(r) for r in Inputs.EMUL))
            rc, out, err = run_main(["--engine-gbps", "50", "--workers", "8,16",
                                     "--check", chk])
            self.assertEqual(rc, 0, err)
            self.assertIn("ring ms", out)
            self.assertIn("Tally: predicted 0.537 s, measured 0.600 s", out)
            rc, out, err = run_main(["--engine-gbps", "50", "--workers", "8", "--link-gbit",
                                     "100", "--alpha-us", "0", "--json", "--check", chk])
            self.assertEqual(rc, 0, err)
            rows = [json.loads(line) for line in out.splitlines()]
            self.assertEqual([r["bench"] for r in rows], ["model", "model_check"])
            self.assertAlmostEqual(rows[0]["speedup"], 1.75)
            self.assertEqual(rows[0]["cores_total"], 16)
            png = os.path.join(d, "m.png")
            rc, _, err = run_main(["--engine-gbps", "50", "--plot", png, "--check", chk])
            if importlib.util.find_spec("matplotlib") is None:
                self.assertEqual(rc, 1)
                return
            self.assertEqual(rc, 0, err)
            with open(png, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

    def test_engine_json(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "results.json")
            with open(p, "w") as f:
                json.dump({"results": {"engine": {"rows": Inputs.ENGINE}}}, f)
            rc, out, err = run_main(["--engine-json", p, "--workers", "8", "--link-gbit",
                                     "100", "--json"])
            self.assertEqual(rc, 0, err)
            self.assertAlmostEqual(json.loads(out)["engine_gbit_per_core"], 50.0)
            rc, _, err = run_main(["--engine-json", os.path.join(d, "none"), "--json"])
            self.assertEqual(rc, 2)
            self.assertIn("--engine-json", err)

    def test_report_section(self):
        with tempfile.TemporaryDirectory() as d:
            md, res = pm.report_section(d, Inputs.ENGINE, Inputs.EMUL)
            txt = "\n".join(md)
            self.assertTrue(txt.startswith("## Cluster model"))
            self.assertIn("| 1024 | 400 | 1024 |", txt)
            self.assertIn("Tally: predicted 0.537 s, measured 0.600 s", txt)
            self.assertEqual(len(res["rows"]), 16)
            self.assertEqual(len(res["checks"]), 1)
            self.assertEqual(res["errors"], [])
            md, res = pm.report_section(d, [], [])
            self.assertEqual(len(res["errors"]), 2)
            self.assertIn("| 8 | 100 | 8 |", "\n".join(md))


if __name__ == "__main__":
    unittest.main()
