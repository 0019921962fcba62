#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The same torchrun command twice (issue 39): `python3 -m tally.run` (torchrun with the
Python 3.11 fix: plain torchrun 1.13 fails there with "'NoneType' object has no attribute
'get'") with a fixed --rdzv_id 101, no TALLY_JOB_ID / TALLY_TOKEN, no init_process_group in
the script, against one tally-udpd with open admission. Both runs finish with the exact sums,
each under its own job id agreed through torch's store (the second used to meet the first
one's rounds: stale_round drops, then "got no RESULT" after 30 s). Exit 77 without torch or
tally-udpd.
And an operator's fixed identity run twice, the first without BYE: the second run's workers
fail within seconds naming stale_round (the appliance answers stale pushes with ERROR
STALE_ROUND), not after the 30 s operation timeout."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import udpd_proc

udpd_proc.need_torch()
udpd_proc.need_udpd()
HERE = os.path.dirname(os.path.abspath(__file__))
W, STEPS = 2, 5
TMO = 120 * float(os.environ.get("TALLY_TIMEOUT_MULTIPLIER", "1"))


def launch(port, rdzv_port, n):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TALLY_") or k == "TALLY_AGENT_LIB"}
    env.update(TALLY_APPLIANCES=f"127.0.0.1:{port}", TALLY_OP_TIMEOUT_MS="20000", OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "tally.run", "--nnodes", "1", "--nproc_per_node", str(W), "--rdzv_id", "101",
           "--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{rdzv_port}", "--max_restarts", "0",
           os.path.join(HERE, "rerun_worker.py"), str(STEPS)]
    t0 = time.monotonic()
    outdir = tempfile.mkdtemp(prefix="tally-rerun.")
    env["RERUN_OUT"] = outdir
    with tempfile.TemporaryFile("w+") as log:
        p = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=tempfile.gettempdir())
        try:
            rc = p.wait(TMO)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(30)
            rc = "timeout"
        log.seek(0)
        out = log.read()
    text = ""
    for r in range(W):
        try:
            with open(os.path.join(outdir, f"rank{r}")) as f:
                text += f.read()
        except OSError:
            pass
    shutil.rmtree(outdir, ignore_errors=True)
    res = [m.groups() for m in re.finditer(r"RESULT (\d+) (\d+) (\S+) (\[.*\])", text)]
    return rc, res, out, time.monotonic() - t0


def stale_launch(port, steps, tmp, tag):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TALLY_") or k == "TALLY_AGENT_LIB"}
    env.update(TALLY_APPLIANCES=f"127.0.0.1:{port}", TALLY_JOB_ID="9", TALLY_TOKEN="5", TALLY_INCARNATION="77",
               TALLY_OP_TIMEOUT_MS="30000", WORLD_SIZE=str(W), OMP_NUM_THREADS="1")
    ps, outs = [], []
    for r in range(W):
        outs.append(os.path.join(tmp, f"{tag}.{r}"))
        ps.append(subprocess.Popen([sys.executable, os.path.join(HERE, "stale_worker.py"), str(steps), outs[-1]],
                                   env=dict(env, RANK=str(r), LOCAL_RANK=str(r), LOCAL_WORLD_SIZE=str(W))))
    for p in ps:
        try:
            p.wait(TMO)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(30)
    res = []
    for o in outs:
        try:
            with open(o) as f:
                res.append(f.read())
        except OSError:
            res.append("no result")
    return res


def stale_scenario():
    """An operator's fixed identity (TALLY_JOB_ID, TALLY_TOKEN, TALLY_INCARNATION) run twice,
    the first run gone without BYE: the appliance still holds round 20 of the key, the second
    run's round 0 is stale. Its workers are told so (ERROR STALE_ROUND) and fail within
    seconds naming stale_round and what to change, not after TALLY_OP_TIMEOUT_MS (30 s)."""
    port = udpd_proc.free_tcp()
    tmp = tempfile.mkdtemp(prefix="tally-stale.")
    try:
        with udpd_proc.running(port, "--cores", "1", "--job", "9", "--no-auth", "--token", "5", "--world", str(W),
                               "--rejoin-timeout-ms", "500"):
            first = stale_launch(port, 20, tmp, "a")
            second = stale_launch(port, 3, tmp, "b")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ok1 = all(r.startswith("ok") for r in first)
    print(f"{'ok  ' if ok1 else 'FAIL'} fixed identity, run 1: {first}")
    secs = [float(r.split()[1]) for r in second if r.startswith("error")]
    ok2 = len(secs) == W and all("stale_round" in r and "TALLY_INCARNATION" in r for r in second) and \
        max(secs) < 10
    print(f"{'ok  ' if ok2 else 'FAIL'} fixed identity, run 2 (the first left no BYE): told within "
          f"{max(secs) if secs else '-'} s: {second[0][:260]}")
    return (0 if ok1 else 1) + (0 if ok2 else 1)


def main():
    failed = 0
    port = udpd_proc.free_tcp()
    want = str([float(sum(r + 1 + s for r in range(W))) for s in range(STEPS)])
    jobs = []
    with udpd_proc.running(port, "--cores", "1", "--open"):
        for n in range(2):
            rc, res, out, dt = launch(port, udpd_proc.free_tcp(), n)
            ok = rc == 0 and len(res) == W and all(r[3] == want for r in res) and len({r[1] for r in res}) == 1 \
                and all(r[2] == "store" for r in res)
            print(f"{'ok  ' if ok else 'FAIL'} run {n + 1} of the same command (--rdzv_id 101): rc {rc}, "
                  f"{len(res)} ranks done in {dt:.1f} s, job {res[0][1] if res else '-'} "
                  f"({res[0][2] if res else '-'}), sums {res[0][3] if res else '-'}", flush=True)
            if not ok:
                print(out[-3000:])
                failed += 1
            if res:
                jobs.append(res[0][1])
    ok = len(jobs) == 2 and jobs[0] != jobs[1]
    print(f"{'ok  ' if ok else 'FAIL'} the two runs are two jobs: {jobs}")
    failed += 0 if ok else 1
    failed += stale_scenario()
    print(f"{'FAIL' if failed else 'ok'}: {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
