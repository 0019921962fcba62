#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""perf/pipeline_emulate.py's measurement: every minibatch has the batch asked for (h36's runs
at batch 32 sliced past digits' 1797 samples: the 57th minibatch on were empty and finished
in ~5 ms), and measured() gives the steady time per minibatch of the last stage (minibatches
done / time taken after the first quarter, / its replicas) where the finishes come in
bursts, which the median of short windows misreads."""
import os
import sys
import unittest

SRC = os.environ.get("TALLY_SRC", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "perf"))
sys.path.insert(0, os.path.join(SRC, "gpu_agent", "python"))
try:
    import torch
except ImportError:
    print("SKIP: torch not importable")
    sys.exit(77)
import pipeline_emulate as pe  # noqa: E402


def rank(stage, replicas, done_at):
    return {"stage": stage, "replicas": replicas, "done_at": done_at, "wall_s": done_at[-1]}


class Stats(unittest.TestCase):
    def test_full_batches(self):
        X = torch.arange(1797 * 2, dtype=torch.float32).reshape(1797, 2)
        y = torch.arange(1797)
        for batch, n in ((32, 96), (16, 96), (1797, 3)):
            b = pe.full_batches(X, y, batch, n)
            self.assertEqual(len(b), n)
            self.assertTrue(all(x.shape[0] == batch and t.shape[0] == batch for x, t in b))
        b = pe.full_batches(X, y, 32, 96)
        # cycling: minibatch 56 is the data set's first batch again (56 whole batches)
        self.assertTrue(torch.equal(b[56][1], y[:32]))
        self.assertTrue(torch.equal(b[55][1], y[55 * 32:56 * 32]))
        with self.assertRaisesRegex(ValueError, "larger than the data set"):
            pe.full_batches(X, y, 1798, 1)

    def test_bursts(self):
        """A last stage finishing in bursts of 3 (1, 1, then 28 ms apart): 10 ms per
        minibatch; the median of windows of 4 reads 7.75 ms and of single intervals 1 ms."""
        t, now = [], 0.0
        for k in range(96):
            now += (0.001, 0.001, 0.028)[k % 3]
            t.append(now)
        first = [rank(0, 1, [x - 0.005 for x in t])]
        m, _ = pe.measured(first + [rank(1, 1, t)], 4)
        self.assertAlmostEqual(m["mean"], 0.010, delta=3e-4)
        self.assertAlmostEqual(m["median"], 0.00775, delta=1e-6)
        self.assertEqual(m["stalls"], 0)
        m1, _ = pe.measured(first + [rank(1, 1, t)], 1)
        self.assertAlmostEqual(m1["median"], 0.001, delta=1e-6)
        self.assertAlmostEqual(m1["mean"], m["mean"], delta=1e-12)

    def test_replicas_and_stalls(self):
        """Two last-stage replicas each finishing every 20 ms: 10 ms per minibatch; one stall
        of 400 ms in one replica's steady part: counted, and in the mean (the time it took)."""
        a = [0.02 * (k + 1) for k in range(48)]
        b = [x + 0.001 for x in a]
        m, _ = pe.measured([rank(0, 2, a), rank(0, 2, b), rank(1, 2, a), rank(1, 2, b)])
        self.assertAlmostEqual(m["mean"], 0.010, delta=1e-9)
        s = a[:30] + [x + 0.4 for x in a[30:]]
        m, _ = pe.measured([rank(0, 2, a), rank(1, 2, s), rank(1, 2, b)])
        self.assertEqual(m["stalls"], 1)
        steady = len(a) - len(a) // 4  # intervals after the first quarter
        self.assertAlmostEqual(m["mean"], (0.02 * steady * 2 + 0.4) / steady / 2 / 2,
                               delta=1e-9)
        self.assertGreater(m["stall_share"], 0.2)


if __name__ == "__main__":
    unittest.main()
