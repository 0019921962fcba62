#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""gpu_agent/examples/horovod_port.py (a Horovod script, hvd.* names, moved to Tally by its
import) trains to the same losses on Tally as on gloo (two workers, |diff| <= 1e-5).
Exit 77 (skip) without torch or without the appliance binary."""
import multiprocessing as mp
import os
import sys

import udpd_proc

udpd_proc.need_torch()
udpd_proc.need_udpd()
import horovod_port  # noqa: E402
import train  # noqa: E402

W = 2


def worker(rank, backend, env, q):
    try:
        os.environ.update(env, RANK=str(rank), WORLD_SIZE=str(W), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(W))
        if backend == "tally":
            import tally.torch as hvd
        else:
            train.torch_store_compat()
            hvd = horovod_port.GlooHvd()
        q.put((rank, "ok", horovod_port.train(hvd, steps=15)))
    except Exception:
        import traceback
        q.put((rank, "error", traceback.format_exc()))


def run(backend, env):
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    ps = [ctx.Process(target=worker, args=(r, backend, env, q)) for r in range(W)]
    for p in ps:
        p.start()
    out = {}
    for _ in range(W):
        r, st, v = q.get(timeout=180)
        if st != "ok":
            raise SystemExit(f"FAIL {backend} rank {r}:\n{v}")
        out[r] = v
    for p in ps:
        p.join(30)
    return out


def main():
    mport = udpd_proc.free_tcp()
    gloo = run("gloo", {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(mport)})
    port = train.free_port_block(1)
    with udpd_proc.running(port, "--cores", "1", "--job", "9", "--no-auth", "--token", "5", "--world", str(W)):
        tl = run("tally", {"TALLY_APPLIANCES": f"127.0.0.1:{port}", "TALLY_JOB_ID": "9", "TALLY_TOKEN": "5"})
    worst = max(abs(a - b) for r in range(W) for a, b in zip(gloo[r], tl[r]))
    ok = worst <= 1e-5 and gloo[0][-1] < gloo[0][0] / 2
    print(f"{'ok  ' if ok else 'FAIL'} Horovod script on Tally vs gloo: losses {gloo[0][0]:.4f} -> "
          f"{gloo[0][-1]:.4f} (gloo) / {tl[0][-1]:.4f} (tally), max |diff| {worst:.3g}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
