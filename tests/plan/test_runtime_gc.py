#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""tally.plan's 1F1B on one rank (a one-stage plan: no point-to-point, no aggregation):
while it trains, the objects that lived before it are frozen out of Python's collections
(a full collection of a rank's heap stalled the emulated cluster's pipeline 60-70 ms at the
same point of every launch), and they are unfrozen when it returns, also when it fails."""
import gc
import os
import sys
import unittest

SRC = os.environ.get("TALLY_SRC", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "gpu_agent", "python"))

try:
    import torch
except ImportError:
    torch = None


@unittest.skipIf(torch is None, "torch not importable")
class GcFreeze(unittest.TestCase):
    def trainer(self, loss_fn):
        from tally.plan.runtime import PipelineTrainer
        torch.manual_seed(3)
        plan = {"stages": [{"stage": 0, "layers": [0, 2], "ranks": [0]}]}
        return PipelineTrainer([torch.nn.Linear(4, 8), torch.nn.Linear(8, 2)], plan, 0,
                               loss_fn, lr=0.1)

    def test_frozen_while_training(self):
        seen = []
        base = gc.get_freeze_count()

        def loss(out, y):
            seen.append(gc.get_freeze_count())
            return torch.nn.functional.cross_entropy(out, y)
        tr = self.trainer(loss)
        batches = [(torch.randn(6, 4), torch.randint(0, 2, (6,))) for _ in range(5)]
        losses = tr.train_1f1b(batches)
        self.assertEqual(len(losses), 5)
        self.assertEqual(len(seen), 5)
        self.assertTrue(all(n > base for n in seen), seen)  # this test's objects among them
        self.assertEqual(gc.get_freeze_count(), base)

    def test_unfrozen_after_a_failure(self):
        base = gc.get_freeze_count()

        def loss(out, y):
            raise RuntimeError("loss failed")
        tr = self.trainer(loss)
        with self.assertRaisesRegex(RuntimeError, "loss failed"):
            tr.train_1f1b([(torch.randn(6, 4), torch.randint(0, 2, (6,)))])
        self.assertEqual(gc.get_freeze_count(), base)


if __name__ == "__main__":
    unittest.main()
