#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""allreduce throughput of one tensor between 2 ranks on loopback, the way a Horovod script
calls it: torch.distributed gloo's all_reduce vs tally.torch.allreduce_ (named, in place)
through one tally-udpd, measured in one run (issue 39's figure: 6.4 MB).

    PYTHONPATH=gpu_agent/python TALLY_AGENT_LIB=build/gpu_agent/libtally_agent.so \\
        python3 perf/hvd_allreduce.py --udpd build/appliance/udpd/tally-udpd [--mb 6.4] [--iters 30] \
        [--rounds N] [--variant NAME:K=V,...]

Prints MB/s (tensor bytes / seconds per allreduce, median of the timed iterations) for each
and the ratio to gloo's of the same round, and "cpu": a rank's CPU time (user + system, all its
threads, getrusage) per allreduce, mean of the 2 ranks, and the appliance's (/proc, over the
ranks' whole run, joins and warm-ups included, per allreduce); --variant also measures Tally with other
environment settings (e.g. nogso:TALLY_GSO=0), --rounds repeats all of them interleaved."""
import argparse
import multiprocessing as mp
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time


def free(kind=socket.SOCK_STREAM):
    s = socket.socket(socket.AF_INET, kind)
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def worker(rank, a, env, q):
    os.environ.update(env, RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE="2")
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    n = int(a.mb * 1e6 / 4)
    t = torch.ones(n)
    times = []
    warm = 3
    cpu0 = None
    if a.impl == "gloo":
        dist.init_process_group("gloo")
        for i in range(a.iters + warm):
            dist.barrier()
            if i == warm:
                cpu0 = resource.getrusage(resource.RUSAGE_SELF)
            t0 = time.perf_counter()
            dist.all_reduce(t)
            times.append(time.perf_counter() - t0)
        ok = True
    else:
        import tally.torch as hvd
        hvd.init()
        for i in range(a.iters + warm):
            t.fill_(1.0)
            if i == warm:
                cpu0 = resource.getrusage(resource.RUSAGE_SELF)
            t0 = time.perf_counter()
            hvd.allreduce_(t, name="bench", op=hvd.Sum)
            times.append(time.perf_counter() - t0)
        ok = bool((t == 2.0).all())
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)  # all the rank's threads (the agent's too)
    cpu = (cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime) / a.iters
    q.put((rank, ok, times[warm:], cpu))


def run(a, impl, env):
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    a.impl = impl
    ps = [ctx.Process(target=worker, args=(r, a, env, q)) for r in range(2)]
    for p in ps:
        p.start()
    res = [q.get(timeout=300) for _ in ps]
    for p in ps:
        p.join(30)
    ok = all(r[1] for r in res)
    med = statistics.median(max(x) for x in zip(*[r[2] for r in res]))
    return ok, a.mb / med, statistics.mean(r[3] for r in res) * 1e3


def proc_cpu(pid):
    """User + system seconds of a process so far (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_tally(a, extra):
    """One tally-udpd for this measurement (a fresh job each time), the ranks with extra env."""
    port = free(socket.SOCK_DGRAM)
    tmp = tempfile.mkdtemp(prefix="hvd-bench.")
    appl = subprocess.Popen([a.udpd, "--addr", "127.0.0.1", "--port", str(port), "--cores", a.cores, "--job", "9",
                             "--no-auth", "--token", "5", "--world", "2", "--mem", "256M",
                             "--ctl-socket", os.path.join(tmp, "ctl.sock")], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    try:
        c0 = proc_cpu(appl.pid)
        ok, mbs, cpu = run(a, "tally", dict(extra, TALLY_APPLIANCES=f"127.0.0.1:{port}", TALLY_JOB_ID="9",
                                            TALLY_TOKEN="5"))
        # the appliance's CPU over the ranks' whole run (joins and warm-ups too) per allreduce
        return ok, mbs, cpu, (proc_cpu(appl.pid) - c0) / (a.iters + 3) * 1e3
    finally:
        appl.terminate()
        appl.wait(30)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--udpd", required=True)
    ap.add_argument("--mb", type=float, default=6.4)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--cores", default="1")
    ap.add_argument("--rounds", type=int, default=1,
                    help="measure gloo, Tally and every variant this many times, interleaved")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME:K=V[,K=V]",
                    help="also measure Tally with these environment settings (e.g. nogso:TALLY_GSO=0)")
    a = ap.parse_args()
    variants = [("tally", {})]
    for v in a.variant:
        name, _, kvs = v.partition(":")
        variants.append((name, dict(kv.split("=", 1) for kv in kvs.split(",") if kv)))
    good = True
    for rnd in range(a.rounds):
        ok_g, g, cg = run(a, "gloo", {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free())})
        good &= ok_g
        figs = []
        for name, extra in variants:
            ok_t, t, ct, ca = run_tally(a, extra)
            good &= ok_t
            figs.append(f"{name} {t:.0f} MB/s{'' if ok_t else ' (WRONG SUM)'} ({t / g:.2f} of gloo; "
                        f"cpu {ct:.1f} ms, appliance {ca:.1f} ms)")
        print(f"allreduce {a.mb} MB, 2 ranks, loopback, median of {a.iters}, round {rnd + 1}: gloo {g:.0f} MB/s"
              f"{'' if ok_g else ' (WRONG)'} (cpu {cg:.1f} ms), tally-udpd (--cores {a.cores}): {', '.join(figs)}, "
              f"load {os.getloadavg()[0]:.1f}", flush=True)
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
