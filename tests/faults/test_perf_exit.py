#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""`tally-perf allreduce` (perf/perf_allreduce.py) exits non-zero whenever a result that ran
is not verified (suite 'faults', issue 13): main() with the cluster and the runners replaced
by stand-ins that return verified / unverified / partial results; a skipped peer does not
count, an unverified Tally run or peer does."""
import io
import os
import sys
import unittest
from contextlib import redirect_stderr, redirect_stdout

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "perf"))
import perf_allreduce as pa  # noqa: E402


class FakeCluster:
    def __init__(self, o, tmp):
        pass

    def build(self):
        pass

    def cleanup(self):
        pass


def runner(ok, note=""):
    def run(cl, o):
        if note.startswith("skipped"):
            return pa.summarize("x", o.workers, o.bytes, o.rounds, [], note)
        per_rank = [{"seconds": 0.5, "ok": ok} for _ in range(o.workers)]
        return pa.summarize("x", o.workers, o.bytes, o.rounds, per_rank, note)
    return run


class ExitStatus(unittest.TestCase):
    def setUp(self):
        self.saved = (pa.Cluster, dict(pa.RUNNERS), pa.os.geteuid, pa.shutil.which)
        pa.Cluster = FakeCluster
        pa.os.geteuid = lambda: 0          # the root / iproute2 check is not what is tested
        pa.shutil.which = lambda name: "/bin/" + name

    def tearDown(self):
        pa.Cluster, runners, pa.os.geteuid, pa.shutil.which = self.saved
        pa.RUNNERS.clear()
        pa.RUNNERS.update(runners)

    def main(self, **runners):
        pa.RUNNERS.update(runners)
        out = io.StringIO()
        with redirect_stdout(out), redirect_stderr(io.StringIO()):
            rc = pa.main(["--impl", ",".join(runners), "--workers", "2", "--size", "4096"])
        return rc, out.getvalue()

    def test_all_verified(self):
        self.assertEqual(self.main(tally=runner(True), gloo=runner(True))[0], 0)

    def test_tally_not_verified(self):
        rc, out = self.main(tally=runner(False), gloo=runner(True))
        self.assertEqual(rc, 1)
        self.assertIn("False", out)

    def test_peer_not_verified(self):
        self.assertEqual(self.main(tally=runner(True), gloo=runner(False))[0], 1)

    def test_missing_ranks(self):
        def partial(cl, o):
            return pa.summarize("tally", o.workers, o.bytes, o.rounds, [None] * o.workers)
        self.assertEqual(self.main(tally=partial)[0], 1)

    def test_skipped_peer_does_not_count(self):
        self.assertEqual(self.main(tally=runner(True), mpi=runner(False, "skipped: no mpirun"))[0], 0)

    def test_nothing_ran(self):
        self.assertEqual(self.main(mpi=runner(False, "skipped: no mpirun"))[0], 1)


if __name__ == "__main__":
    unittest.main()
