#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Training with CUDA tensors: gpu_agent/examples/train.py --device cuda, 2 workers sharing
the GPU(s) there are, gradients averaged by Tally through the DDP hook (the agent copies each
CUDA bucket to pinned host memory, pushes, and copies the sum back on the bucket's stream) vs
the same run with DDP over gloo. The Tally run goes through the software appliance over kernel
UDP, and once more through tallyd on a virtual DPDK device when tallyd is built and we are root.

Pass: the tolerance of test_train.py (parameters within 1e-4 + 1e-3*|gloo| element-wise after
3 epochs, per-step losses within 1e-3, same step count). Prints samples/s of each run, from
rank 0's step times after the first 5 steps (CUDA and connection warm-up).
TALLY_TEST_HIDDEN=N widens the MLP (train.py --hidden; default 128, 17 k parameters; 2048 makes
2.2 M, 8.8 MB of gradients per step) for a figure where the exchange, not the step's fixed
costs, dominates.
Exit 77 (skip) where torch sees no GPU or the agent library was built without CUDA.
"""
import os
import statistics
import sys
import tempfile

import test_train as tt  # exits 77 where torch or sklearn is missing

import torch

sys.path.insert(0, os.path.join(tt.ROOT, "gpu_agent", "python"))


def samples_per_s(d):
    steps = d["step_seconds"][5:]
    return d["batch"] * d["workers"] * len(steps) / sum(steps) if steps else float("nan")


def main():
    if not torch.cuda.is_available():
        print("SKIP: torch sees no usable GPU (torch.cuda.is_available() is False)")
        return 77
    from tally import _lib
    if not _lib.lib.tally_opt_have_cuda():
        print("SKIP: the agent library was built without CUDA (meson -Dcuda=enabled)")
        return 77
    print(f"GPU: {torch.cuda.get_device_name(0)} ({torch.cuda.device_count()} visible), torch "
          f"{torch.__version__}, CUDA {torch.version.cuda}", flush=True)
    common = ["--device", "cuda", "--hidden", os.environ.get("TALLY_TEST_HIDDEN", "128")]
    runs = [("gloo", ["--backend", "gloo"]), ("tally-udp", ["--backend", "tally", "--appliance", "udp"])]
    tallyd = find_tallyd()
    if os.geteuid() == 0 and tallyd:
        runs.append(("tally-tallyd", ["--backend", "tally", "--appliance", "tallyd", "--tallyd", tallyd]))
    res, ok = {}, True
    with tempfile.TemporaryDirectory(prefix="tally-train-cuda-") as tmp:
        for tag, extra in runs:
            try:
                res[tag] = tt.run(tag, common + extra, tmp, workers=2)
            except SystemExit as e:  # the others still run and compare
                print(e)
                ok = False
    if "gloo" not in res:
        return 1
    for tag, d in res.items():
        if d.get("device", "").split(":")[0] != "cuda":
            print(f"FAIL {tag}: ran on {d.get('device')}, not on the GPU")
            ok = False
    for tag in res:
        if tag != "gloo":
            ok &= tt.compare(f"{tag} vs gloo (CUDA tensors)", res[tag], res["gloo"])
    g = samples_per_s(res["gloo"])
    for tag, d in res.items():
        s = samples_per_s(d)
        print(f"{tag:13s} {s:9.0f} samples/s  (median step {1e3 * statistics.median(d['step_seconds']):.2f} ms,"
              f" {d['steps']} steps)  / gloo {s / g:.2f}")
    return 0 if ok else 1


def find_tallyd():
    if os.environ.get("TALLY_TEST_TALLYD"):
        return os.environ["TALLY_TEST_TALLYD"]
    sys.path.insert(0, os.path.join(tt.ROOT, "gpu_agent", "examples"))
    import train  # build_dirs(): $TALLY_BUILD, then build/, then the other trees
    return train.find_binary("tallyd", None)


if __name__ == "__main__":
    sys.exit(main())
