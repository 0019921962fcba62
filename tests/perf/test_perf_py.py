#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""tests/perf/test_perf_py.py - the harness's own logic: argument parsing, bandwidth figures,
result verification/folding, report writing (from given rows; the figures of a real report are
checked by test_report_quick.sh)."""
import contextlib
import io
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "perf"))
import allreduce_netns as an  # noqa: E402
import allreduce_remote as ar  # noqa: E402
import loss_bench as lb  # noqa: E402
import perf_allreduce as pa  # noqa: E402
import perf_report as pr  # noqa: E402


class Args(unittest.TestCase):
    def test_defaults(self):
        o = pa.parse_args([])
        self.assertEqual(o.impls, ["tally", "mpi", "gloo"])
        self.assertEqual((o.workers, o.bytes, o.rounds, o.dtype), (4, 64 << 20, 3, "f32"))

    def test_impl_lists(self):
        self.assertEqual(pa.parse_args(["--impl", "gloo,tally", "--impl", "gloo"]).impls,
                         ["gloo", "tally"])

    def test_sizes(self):
        self.assertEqual(pa.parse_size("4096"), 4096)
        self.assertEqual(pa.parse_size("512K"), 512 << 10)
        self.assertEqual(pa.parse_size("1g"), 1 << 30)
        for bad in ("", "12X", "-4", "0", "1.5M", "M"):
            with self.assertRaises(pa.UsageError, msg=bad):
                pa.parse_size(bad)

    def test_rejects(self):
        for argv in (["--impl", "nccl"], ["--workers", "1"], ["--workers", "17"],
                     ["--size", "6"], ["--rounds", "0"], ["--dtype", "f64"],
                     ["--dtype", "bf16"], ["--appliances", "0"], ["--link-gbit", "0"],
                     ["--prefix", "Bad-Name"], ["--bogus"], ["--size", "64", "--appliances", "8"]):
            with self.assertRaises(pa.UsageError, msg=str(argv)):
                pa.parse_args(argv)

    def test_warmup(self):
        self.assertEqual(pa.parse_args([]).warmup, 1)
        self.assertEqual(pa.parse_args(["--warmup", "0"]).warmup, 0)
        for bad in ("-1", "101"):
            with self.assertRaises(pa.UsageError):
                pa.parse_args(["--warmup", bad])

    def test_worker_args_dashes(self):
        self.assertEqual(pa.parse_args(["--worker-args", "--gso --window 8"]).worker_args,
                         "--gso --window 8")

    def test_dtype_for_tally_alone(self):
        self.assertEqual(pa.parse_args(["--impl", "tally", "--dtype", "bf16"]).dtype, "bf16")

    def test_appliance_rate_default(self):
        o = pa.parse_args(["--emulate", "--link-gbit", "1", "--workers", "4", "--appliances", "2"])
        self.assertAlmostEqual(o.appliance_gbit, 2.0)
        o = pa.parse_args(["--link-gbit", "1", "--appliance-gbit", "5"])
        self.assertAlmostEqual(o.appliance_gbit, 5.0)


class Netns(unittest.TestCase):
    def test_appliance_port_segments_gso(self):
        """tally-worker --gso: the bridge's port to each AF_PACKET appliance segments UDP GSO
        super-frames (gso_max_segs 1); worker ports keep GSO (a NIC's job on real hosts)."""
        o = pa.parse_args(["--impl", "tally", "--workers", "2", "--appliances", "2",
                           "--prefix", "ptest"])
        cl = an.Cluster(o, "/tmp/none")
        cmds = []
        cl.sh = lambda *c, check=True: cmds.append(c)
        cl.build()
        segs = [c for c in cmds if "gso_max_segs" in c]
        self.assertEqual(sorted(c[c.index("set") + 1] for c in segs), ["ptesta0b", "ptesta1b"])
        self.assertTrue(all(c[c.index("gso_max_segs") + 1] == "1" and c[2] == "ptestbr"
                            for c in segs))

    def test_udpd_appliance_has_an_address(self):
        """--appliance-kind udpd: the kernel takes the appliance's packets, so its veth has the
        address workers send to, and no GSO segmentation on the bridge (tally-udpd takes GRO)."""
        o = pa.parse_args(["--impl", "tally", "--workers", "2", "--appliances", "2",
                           "--prefix", "ptest", "--appliance-kind", "udpd"])
        cl = an.Cluster(o, "/tmp/none")
        cmds = []
        cl.sh = lambda *c, check=True: cmds.append(c)
        cl.build()
        self.assertFalse([c for c in cmds if "gso_max_segs" in c])
        addrs = [c[-3] for c in cmds if "addr" in c and c[-2:] == ("dev", c[-1])]
        for k in range(2):
            self.assertIn(f"{cl.app_ip(k)}/24", addrs)


class RemoteArgs(unittest.TestCase):
    """--hosts: real hosts through a remote command, appliances running or started on ports."""

    def test_hosts_set_workers_and_appliances(self):
        o = pa.parse_args(["--hosts", "h1,h2,h3", "--appliance", "10.0.0.1:9170,10.0.0.2:9171"])
        self.assertEqual((o.workers, o.appliances), (3, 2))
        self.assertEqual(o.apps_ext, [("10.0.0.1", 9170), ("10.0.0.2", 9171)])
        self.assertEqual(o.remote, ["ssh", "-o", "BatchMode=yes"])
        o = pa.parse_args(["--hosts", "a,b", "--appliance-port", "0000:3b:00.0",
                           "--appliance-ip", "10.0.0.1/24", "--remote-cmd", "ssh -p 2222"])
        self.assertEqual(o.apps_pci, [("0000:3b:00.0", "10.0.0.1/24")])
        self.assertEqual(o.remote, ["ssh", "-p", "2222"])

    def test_rejects(self):
        for argv in (["--hosts", "a,b"],  # tally needs an appliance
                     ["--hosts", "a,,b", "--impl", "gloo"], ["--hosts", "-oX", "--impl", "gloo"],
                     ["--hosts", "a,b", "--workers", "3", "--impl", "gloo"],
                     ["--hosts", "a,b", "--emulate", "--impl", "gloo"],
                     ["--hosts", "u@a,b", "--impl", "mpi"],
                     ["--hosts", "a,b", "--appliance", "h"], ["--hosts", "a,b", "--appliance", "h:0"],
                     ["--hosts", "a,b", "--appliance", "h:1", "--appliances", "2"],
                     ["--hosts", "a,b", "--appliance-port", "3b:00.9"],
                     ["--hosts", "a,b", "--appliance-port", "0000:3b:00.0"],
                     ["--hosts", "a,b", "--appliance-port", "0000:3b:00.0", "--appliance-ip",
                      "300.0.0.1/24"],
                     ["--hosts", "a,b", "--appliance", "h:1", "--appliance-port", "0000:3b:00.0",
                      "--appliance-ip", "10.0.0.1/24"],
                     ["--appliance", "h:1"], ["--iface", "eth0"],
                     ["--hosts", "a,b", "--impl", "gloo", "--iface", "bad iface"],
                     ["--hosts", "a,b", "--impl", "gloo", "--remote-cmd", ""]):
            with self.assertRaises(pa.UsageError, msg=str(argv)):
                pa.parse_args(argv)

    def test_plans(self):
        o = pa.parse_args(["--hosts", "h1,root@h2", "--impl", "tally,gloo", "--appliance-port", "0000:3b:00.0",
                           "--appliance-ip", "10.0.0.1/24", "--remote-bin", "/opt/t",
                           "--size", "1M", "--iface", "ens1", "--tallyd-eal", "-l 0,2"])
        o.bin = "/b"
        cl = ar.Remote(o, "/tmp/x")
        apps, workers, _ = pa.tally_plan(cl, o)
        self.assertEqual(len(apps), 1)
        where, _, argv = apps[0]
        self.assertIsNone(where)  # started here, on the port
        self.assertEqual(argv[:5], ["/b/appliance/tallyd", "--port", "0000:3b:00.0", "--ip",
                                    "10.0.0.1/24"])
        self.assertEqual(argv[argv.index("--") + 1:argv.index("--") + 3], ["-a", "0000:3b:00.0"])
        self.assertEqual(argv[-2:], ["-l", "0,2"])
        self.assertEqual([(r, w) for r, w, _, _ in workers], [(0, "h1"), (1, "root@h2")])
        line = cl.line(workers[1][1], workers[1][3])
        self.assertEqual(line[:4], ["ssh", "-o", "BatchMode=yes", "root@h2"])
        self.assertTrue(line[4].startswith("/opt/t/perf/tally-worker --host 10.0.0.1 --port 9170"))
        o.hosts = ["h1", "h2"]
        _, mpi, _ = pa.mpi_plan(cl, o, "mpirun")
        self.assertIn("h1:1,h2:1", mpi)
        self.assertEqual(mpi[mpi.index("plm_rsh_agent") + 1], "ssh -o BatchMode=yes")
        self.assertEqual(mpi[mpi.index("plm") + 1], "rsh")  # not a launcher from the environment
        self.assertEqual(mpi[-4:], ["/opt/t/perf/tally-perf-mpi", str(1 << 20), "3", "1"])
        self.assertEqual(cl.master(), "h1")
        self.assertEqual(cl.line(None, ["x"], {"A": "1"}), ["env", "A=1", "x"])


class Figures(unittest.TestCase):
    def test_nccl_definitions(self):
        alg, bus = pa.bandwidths(1e9 / 8, 4, 1.0)  # 1 Gbit in one second
        self.assertAlmostEqual(alg, 1.0)
        self.assertAlmostEqual(bus, 1.5)
        self.assertEqual(pa.bandwidths(100, 4, 0), (0.0, 0.0))
        self.assertAlmostEqual(pa.bandwidths(1e9 / 8, 2, 0.5)[1], 2.0)

    def test_summarize_slowest_rank(self):
        r = pa.summarize("x", 2, 1 << 20, 4, [{"seconds": 1.0, "ok": True},
                                               {"seconds": 2.0, "ok": True}])
        self.assertEqual(r["seconds_per_round"], 0.5)
        self.assertTrue(r["verified"])
        self.assertAlmostEqual(r["algbw_gbps"], round((1 << 20) * 8 / 0.5 / 1e9, 4))

    def test_summarize_unverified(self):
        r = pa.summarize("x", 2, 64, 1, [{"seconds": 1, "ok": True}, {"seconds": 1, "ok": False}])
        self.assertFalse(r["verified"])
        r = pa.summarize("x", 3, 64, 1, [{"seconds": 1, "ok": True}, None, None])
        self.assertFalse(r["verified"])
        self.assertIsNone(r["seconds_per_round"])
        self.assertTrue(r["note"])

    def test_tally_rank_fold(self):
        good = {"ok": True, "mismatches": 0, "checked": 10, "seconds": 1.0}
        self.assertEqual(pa.tally_rank_result([dict(good, retransmits=2),
                                               dict(good, seconds=3.0, retransmits=5)]),
                         {"seconds": 3.0, "ok": True, "retransmits": 7, "gso_sends": 0,
                          "first_round_seconds": 0})
        self.assertEqual(pa.tally_rank_result([dict(good, udp={"tx_gso_sends": 4}),
                                               dict(good, udp={"tx_gso_sends": 5})])["gso_sends"],
                         9)
        self.assertFalse(pa.tally_rank_result([good, dict(good, mismatches=1)])["ok"])
        self.assertFalse(pa.tally_rank_result([dict(good, checked=0)])["ok"])
        self.assertFalse(pa.tally_rank_result([dict(good, ok=False)])["ok"])
        self.assertIsNone(pa.tally_rank_result([]))

    def test_emulated_rto(self):
        # 64 chunks of 8 KiB queue 4.2 ms on 1 Gbit/s, up and down: twice the 8.4 ms
        self.assertEqual(pa.emulated_rto_us(1.0), 16777)
        # K appliances: K windows share the rank's link
        self.assertEqual(pa.emulated_rto_us(1.0, appliances=2), 33554)
        self.assertEqual(pa.emulated_rto_us(1.0, window=16, appliances=2), 8388)
        self.assertEqual(pa.emulated_rto_us(100.0), 500)
        self.assertEqual(pa.emulated_rto_us(0.001), 200000)
        self.assertGreater(pa.emulated_rto_us(0.25), pa.emulated_rto_us(1.0))

    def test_gso_default(self):
        o = pa.parse_args(["--impl", "tally"])
        o.bin = "/b"
        cl = an.Cluster(o, "/tmp/none")
        self.assertEqual(pa.tally_plan(cl, o)[2], ["--gso"])
        o.worker_args = "--gso --window 8"
        self.assertEqual(pa.tally_plan(cl, o)[2], ["--gso", "--window", "8"])
        with self.assertRaises(pa.UsageError):
            pa.parse_args(["--gso", "maybe"])

    def test_job_quota_is_the_appliance(self):
        # a 64 MiB tensor's keys overran tallyd's default job quota (half of --mem): the one
        # job may take all of --mem, namespaces and real ports alike
        o = pa.parse_args(["--impl", "tally", "--size", "64M", "--workers", "4"])
        o.bin = "/b"
        apps, _, _ = pa.tally_plan(an.Cluster(o, "/tmp/none"), o)
        argv = apps[0][2]
        self.assertEqual(argv[argv.index("--quota-bytes") + 1], argv[argv.index("--mem") + 1])
        self.assertGreaterEqual(int(argv[argv.index("--mem") + 1].rstrip("M")) << 20, 3 * (64 << 20))

    def test_idle_backoff(self):
        o = pa.parse_args(["--impl", "tally", "--workers", "4"])
        o.bin = "/b"
        cl = an.Cluster(o, "/tmp/none")
        for choice in ("on", "off"):
            o.idle_backoff = choice
            argv = pa.tally_plan(cl, o)[0][0][2]
            self.assertEqual(argv[argv.index("--idle-backoff") + 1], choice)
        o.idle_backoff = "auto"  # 1 lcore + 4 workers + main: polling from 6 CPUs up
        argv = pa.tally_plan(cl, o)[0][0][2]
        self.assertEqual(argv[argv.index("--idle-backoff") + 1],
                         "off" if (os.cpu_count() or 1) >= 6 else "on")

    def test_appliance_kind(self):
        o = pa.parse_args(["--impl", "tally", "--workers", "4", "--appliances", "2",
                           "--appliance-kind", "udpd"])
        o.bin = "/b"
        apps, workers, _ = pa.tally_plan(an.Cluster(o, "/tmp/none"), o)
        self.assertEqual([a[2][0] for a in apps], ["/b/appliance/udpd/tally-udpd"] * 2)
        for k, a in enumerate(apps):
            argv = a[2]
            self.assertEqual(argv[argv.index("--addr") + 1], f"10.77.0.{100 + k}")
            self.assertEqual(argv[argv.index("--quota-bytes") + 1], argv[argv.index("--mem") + 1])
            self.assertNotIn("--idle-backoff", argv)
        # every worker names the udpd it shards to, at the port udpd listens on
        for w in workers:
            argv = w[3]
            k = int(w[2].split("-")[1])
            self.assertEqual(argv[argv.index("--host") + 1], f"10.77.0.{100 + k}")
            self.assertEqual(argv[argv.index("--port") + 1], apps[k][2][apps[k][2].index("--port") + 1])
        with self.assertRaises(pa.UsageError):
            pa.parse_args(["--appliance-kind", "dpdk"])
        with self.assertRaises(pa.UsageError) as e:
            pa.parse_args(["--appliance-kind", "udpd", "--hosts", "h1,h2", "--appliance", "x:1"])
        self.assertIn("--appliance-kind", str(e.exception))

    def test_mpi_launcher_named(self):
        # the GPU host's environment had OMPI_MCA_plm=isolated: every rank on one node
        o = pa.parse_args(["--impl", "mpi", "--workers", "4", "--dry-run"])
        o.bin = "/b"
        _, _, env = pa.mpi_plan(an.Cluster(o, "/tmp/none"), o, "mpirun")
        self.assertEqual(env["OMPI_MCA_plm"], "rsh")

    def test_worker_opt(self):
        self.assertEqual(pa.worker_opt(["--gso", "--window", "16"], "--window", 64), "16")
        self.assertEqual(pa.worker_opt(["--window=8", "--window", "32"], "--window", 64), "32")
        self.assertEqual(pa.worker_opt([], "--window", 64), 64)

    def test_emulated_worker_args(self):
        o = pa.parse_args(["--impl", "tally", "--emulate", "--link-gbit", "1", "--appliances",
                           "2", "--worker-args", "--window 16", "--gso", "off"])
        o.bin = "/b"
        cl = an.Cluster(o, "/tmp/none")
        _, workers, extra = pa.tally_plan(cl, o)
        self.assertEqual(extra, ["--window", "16", "--rto-us", "8388", "--rto-min-us", "8388"])
        self.assertEqual(workers[0][3][-6:], extra)
        o.worker_args = "--rto-min-us 100"
        self.assertEqual(pa.tally_plan(cl, o)[2][-4:],
                         ["--rto-min-us", "100", "--rto-us", "33554"])

    def test_ratio_faster_peer(self):
        rs = [{"impl": "tally", "verified": True, "seconds_per_round": 1.0},
              {"impl": "mpi", "verified": True, "seconds_per_round": 2.0},
              {"impl": "gloo", "verified": True, "seconds_per_round": 1.5},
              {"impl": "gloo", "verified": False, "seconds_per_round": 0.1}]
        self.assertEqual(pa.ratios(rs), ("gloo", 1.5))
        self.assertEqual(pa.ratios(rs[:1]), (None, None))

    def test_last_json(self):
        self.assertEqual(pa.last_json('noise\n{"a": 1}\n{"a": 2}\ntrailer\n'), {"a": 2})
        self.assertIsNone(pa.last_json("no json here"))
        self.assertIsNone(pa.last_json("{broken"))


class Report(unittest.TestCase):
    def test_cores_per_100g(self):
        row = {"dut": "dpdk", "gen_lcores": 4, "dut_cores": 2, "gen_limited_trials": 0,
               "unpaced_gen_cpu": 0.99, "unpaced_dut_cpu": [0.99, 0.98],
               "unpaced_dut_busy": 0.95, "at_ndr": {"payload_gbps": 40.0}}
        self.assertEqual(pr.cores_per_100g(row), 5.0)  # 20 Gbit/s per appliance core
        self.assertEqual(pr.cores_per_100g(dict(row, gen_limited_trials=1)), "-")
        self.assertEqual(pr.cores_per_100g(dict(row, unpaced_gen_cpu=0.5)), "-")  # OS
        self.assertEqual(pr.cores_per_100g(dict(row, at_ndr={"payload_gbps": 0})), "-")
        self.assertIn("| 4 / 2 |", pr.linegen_rows_md([dict(row, mode="aggregation",
                                                            chunk_bytes=1024, ranks=32,
                                                            ndr_pps=1, pdr_pps=1,
                                                            unpaced_offered_pps=1,
                                                            unpaced_accepted_pps=1)]))

    def test_suite_covers_every_bench(self):
        for quick in (True, False):
            keys = {s[0] for s in pr.suite(quick)}
            self.assertEqual(keys, pr.BENCHES)
            self.assertTrue(all(s[2][-1] == "--json" or "--json" in s[2] for s in pr.suite(quick)))

    def test_write_report_sections_tables_plots(self):
        res = {"sum": {"rows": [{"op": "kway", "dtype": "f32", "ways": 4, "size": 65536,
                                 "isa": "avx512", "gbps": 11.5, "memcpy_gbps": 20.0,
                                 "ratio": 0.575}], "errors": []},
               "engine": {"rows": [{"bench": "engine", "dtype": "f32", "workers": 4,
                                    "chunk_bytes": 1024, "deterministic": False, "gbps": 3.25,
                                    "pps": 1e6, "cores_per_100g": 30.7}], "errors": []},
               "line": {"rows": [], "errors": ["line: exit 1: no memif"]},
               "linegen": {"rows": [{"dut": "synthetic", "chunk_bytes": 1024, "ranks": 32,
                                     "ndr_pps": 101750, "pdr_pps": 151625,
                                     "gen_limited_trials": 2,
                                     "unpaced_offered_pps": 9e6, "unpaced_accepted_pps": 0,
                                     "at_ndr": {"payload_gbps": 0.834, "gen_busy": 0.0018,
                                                "chunk": {"p50_us": 163.8, "p99_us": 311.3,
                                                          "p999_us": 311.3, "max_us": 332.6},
                                                "push": {"p99_us": 600.5},
                                                "round": {"p99_us": 5023.0}}},
                                    # tallyd on memif, aggregating and its io-forward twin
                                    {"dut": "dpdk", "mode": "aggregation", "chunk_bytes": 8192,
                                     "ranks": 32, "ndr_pps": 50000, "pdr_pps": 60000,
                                     "gen_limited_trials": 0, "unpaced_offered_pps": 80000,
                                     "unpaced_accepted_pps": 80000, "unpaced_gen_busy": 0.01,
                                     "unpaced_dut_busy": 0.95, "unpaced_gen_cpu": 0.99,
                                     "unpaced_dut_cpu": [0.98],
                                     "trials_log": [[200000, 150000, 90000, 1, 1, 0, 0, 0.99]],
                                     "at_ndr": {"payload_gbps": 3.277, "gen_busy": 0.01,
                                                "dut_busy": 0.9,
                                                "chunk": {"p50_us": 10.0, "p99_us": 20.0,
                                                          "p999_us": 30.0, "max_us": 40.0}}},
                                    {"dut": "dpdk", "mode": "io-forward", "chunk_bytes": 8192,
                                     "ranks": 32, "ndr_pps": 100000, "pdr_pps": 100000,
                                     "gen_limited_trials": 0, "unpaced_offered_pps": 160000,
                                     "unpaced_accepted_pps": 160000, "unpaced_gen_busy": 0.02,
                                     "unpaced_dut_busy": 0.3, "unpaced_gen_cpu": 0.99,
                                     "unpaced_dut_cpu": [0.5], "at_ndr": {}}],
                           "errors": []},
               "allreduce": {"rows": [
                   {"impl": "tally", "workers": 2, "bytes": 1 << 20, "seconds_per_round": 0.25,
                    "algbw_gbps": 0.0335, "busbw_gbps": 0.0335, "verified": True, "note": "",
                    "retransmits": 7, "_step": "s"},
                   {"impl": "mpi", "workers": 2, "bytes": 1 << 20, "seconds_per_round": 0.5,
                    "algbw_gbps": 0.0168, "busbw_gbps": 0.0168, "verified": True, "note": "",
                    "_step": "s"}], "errors": []}}
        mach = {"cpu": "TestCPU 9", "cores": 2, "flags": "avx2", "kernel": "6.1", "dpdk": "22.11"}
        with tempfile.TemporaryDirectory() as d:
            path = pr.write_report(d, mach, res, True, 12.0, [("sum: a", 3.25), ("line: b", 8.0)])
            with open(path) as f:
                txt = f.read()
            for s in pr.SECTIONS:
                self.assertIn("## " + s, txt)
            self.assertIn("TestCPU 9", txt)
            self.assertIn("\nRun time, measured: sum: a 3.2 s; line: b 8.0 s; total 12.0 s\n", txt)
            self.assertIn("| kway | f32 | 4 | 64K | avx512 | 11.5 |", txt)
            self.assertIn("3.25", txt)
            self.assertIn("not measured: line: exit 1: no memif", txt)
            self.assertIn("Tally 2.00x the speed of the faster peer (mpi)", txt)
            self.assertIn("| s | tally | 2 | 1M | 0.25 | 0.0335 | 0.0335 | True | 7 |  |", txt)
            # the cluster model, from the engine row (3.25 GB/s = 26 Gbit/s per core)
            self.assertIn("Engine rate: 26.0 Gbit/s per core", txt)
            self.assertIn("| 1024 | 400 | 1024 |", txt)
            self.assertIn("not measured: check: no emulated allreduce", txt)
            self.assertIn("| synthetic | aggregation | 1 / 1 | 1024 | 32 | 101750 | 0.1017 | "
                          "151625 | 2 | "
                          "0.834 | 9000000.0 | 0 | - | 0.0018 | - | - / - | - / - | "
                          "163.8/311.3/311.3/332.6 | 600.5 | 5023.0 | "
                          "generator (gen-limited trials) | - |", txt)
            # which side: the appliance's lcore busy and running; the twin's starved by the OS
            # cores per 100G at the NDR: 100 / 3.277 Gbit/s on one core
            self.assertIn("| dpdk | aggregation | 1 / 1 | 8192 | 32 | 50000 | 0.05 | 60000 | 0 | "
                          "3.277 | "
                          "80000 | 80000 | 200000: 150000 / 90000 | 0.01 | 0.9 | 0.01 / 0.95 | "
                          "0.99 / 0.98 | "
                          "10.0/20.0/30.0/40.0 | - | - | appliance | 30.5 |", txt)
            self.assertIn("| OS: appliance lcore ran 50% of the time | - |", txt)
            # like for like: aggregation / io-forward per chunk size
            self.assertIn("| - | dpdk | 1 / 1 | 8192 | 50000 | 100000 | 0.5 | 60000 | 100000 | 0.6 | "
                          "80000 | "
                          "160000 | 0.5 | 0 | 0 |", txt)
            for png in ("sum.png", "engine.png", "allreduce1.png", "model.png",
                        "linegen_latency.png"):
                self.assertIn(f"]({png})", txt)
                with open(os.path.join(d, png), "rb") as f:
                    self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
            self.assertFalse(os.path.exists(os.path.join(d, "line_workers.png")))

    def test_run_suite_times_each_step(self):
        times, progress = [], io.StringIO()
        res = pr.run_suite("/bin/echo", [("sum", "s1", ['{"x": 1}'], 1), ("line", "s2", ["-"], 1)],
                           progress=progress, times=times)
        self.assertEqual([w for w, _ in times], ["s1", "s2"])
        self.assertTrue(all(isinstance(t, float) and t >= 0 for _, t in times))
        self.assertEqual(res["sum"]["rows"], [{"x": 1, "_step": "s1"}])
        self.assertIn("[report 2/2] s2: ", progress.getvalue())

    def test_json_lines(self):
        self.assertEqual(pr.parse_json_lines('x\n{"a":1}\n{bad\n {"b":2}\n'), [{"a": 1}, {"b": 2}])

    def test_human(self):
        self.assertEqual([pr.human(x) for x in (4096, 1 << 20, 3 << 30, 1000)],
                         ["4K", "1M", "3G", "1000"])


# two dtypes of one e2e_run.sh run, as it prints them (bf16 without its window line)
E2E_OUT = """[13:48:37 tlyLB4069] f32 (seed 27004): 2 workers x 8M x 40 rounds over udpd (relay:seed=1,drop=1)
f32: 2 workers ok=2 checked=167772160 mismatches=0 aggregate=3.90 Gbit/s retransmits=1204 dup_results=18 max_err_ratio=1
  rounds/s=29.030 pushes=82000 fast_retransmits=1132 probes=17429
  window: now=208 decreases=481 increases=1947 min=4 qdelay_us=650 qtarget_us=1000
bf16: 2 workers ok=2 checked=335544320 mismatches=0 aggregate=3.04 Gbit/s retransmits=1255 dup_results=106 max_err_ratio=1
  rounds/s=22.635 pushes=82000 fast_retransmits=1175 probes=16245
[13:48:47 tlyLB4069] appliance: {"rx_pkts":198189,"pushes":82000,"duplicates":41,"resends":1803}
[13:48:47 tlyLB4069] PASS
"""


class LossBench(unittest.TestCase):
    def test_abba_order(self):
        self.assertEqual(lb.order(1, 1.0), [0.0, 1.0])
        self.assertEqual(lb.order(3, 10.0), [0.0, 10.0, 10.0, 0.0, 0.0, 10.0])

    def test_parse_run(self):
        r = lb.parse_run(E2E_OUT)
        self.assertTrue(r["passed"])
        self.assertEqual(r["dtypes"]["f32"], {"mismatches": 0, "retransmits": 1204,
                                              "dup_results": 18, "rounds_s": 29.03})
        self.assertEqual(r["dtypes"]["bf16"]["rounds_s"], 22.635)
        self.assertEqual(r["appliance"], {"pushes": 82000, "duplicates": 41, "resends": 1803})

    def test_parse_run_failures(self):
        self.assertFalse(lb.parse_run(E2E_OUT.replace("] PASS", "] FAIL: worker 1"))["passed"])
        self.assertFalse(lb.parse_run(E2E_OUT.replace("mismatches=0 aggregate=3.04",
                                                      "mismatches=3 aggregate=3.04"))["passed"])
        self.assertFalse(lb.parse_run("")["passed"])

    def test_summary_is_total_rounds_over_total_time(self):
        def run(f32):
            return {"dtypes": {"f32": {"rounds_s": f32}}}
        # ABBA: none 20, loss 10, loss 40, none 20; 100 rounds a run
        s = lb.summarize([(0, run(20.0)), (1, run(10.0)), (1, run(40.0)), (0, run(20.0))], 100)
        f = s["f32"]
        self.assertAlmostEqual(f["none_rounds_s"], 20.0)
        self.assertAlmostEqual(f["loss_rounds_s"], 200 / (10 + 2.5))  # not the mean 25
        self.assertAlmostEqual(f["ratio"], 16.0 / 20.0)
        self.assertEqual(f["pair_ratios"], [0.5, 2.0])
        self.assertEqual(f["runs"], {"none": 2, "loss": 2})
        self.assertEqual(lb.summarize([(0, run(20.0))], 100), {})  # one level only: no ratio

    def test_rejects(self):
        for argv in (["--drop", "0"], ["--drop", "100"], ["--pairs", "0"], ["--workers", "1"],
                     ["--dtypes", "f64"], ["--dtypes", ""]):
            with self.assertRaises(SystemExit, msg=argv):
                with contextlib.redirect_stderr(io.StringIO()):
                    lb.parse_args(argv)


if __name__ == "__main__":
    unittest.main()
