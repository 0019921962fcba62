#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""mpi_netns.py - libtally_mpi (LD_PRELOAD) vs plain MPI_Allreduce of Open MPI and of MPICH
on the emulated cluster of `tally-perf allreduce --emulate` (allreduce_netns.py: every rank
and every tally-udpd in its own network namespace on one bridge, each host link shaped with
tc tbf; appliance links link*W/K as there), in one run per size: the same rank program
(tally-perf-mpi-ompi / -mpich, f32 sum, every round verified) with and without the preload.
MPI ranks talk over TCP only (Open MPI: pml ob1, btl tcp,self; MPICH's UCX: UCX_TLS=tcp,self),
never shared memory, so both MPIs cross the shaped links as Tally does.

  perf/mpi_netns.py --bin BUILD [--sizes 1K,...,256M] [--link-gbit 1] [--appliances 2]
                    [--mpi ompi,mpich] [--workers 4] [--tally-env VAR=VALUE ...]
Needs root (ip netns, tc). Prints one row per (MPI, size): seconds per allreduce (slowest
rank's mean), algorithm bandwidth, plain/tally ratio, ok (every round's sum verified; for
Tally also every timed allreduce counted as taken over, TALLY_MPI_STATS); and a JSON line
each on stderr."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from types import SimpleNamespace

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from allreduce_netns import SUBNET, Cluster  # noqa: E402
from perf_allreduce import emulated_rto_us  # noqa: E402

PORT = 9170


def size_arg(s):
    m = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * m[s[-1].upper()] if s[-1].upper() in m else int(s)


def rounds_for(size):
    # bounded: 256 MiB at 1 Gbit/s is ~2-3 s a round
    return (2, 1) if size >= 256 << 20 else (3, 1) if size >= 64 << 20 else \
        (5, 1) if size >= 16 << 20 else (10, 2)


def mpirun_argv(cl, o, mpi, size, tally, stats):
    exe = os.path.join(o.bin, "perf", f"tally-perf-mpi-{mpi}")
    lib = os.path.join(o.bin, "gpu_agent", "mpi",
                       "libtally_mpi.so" if mpi == "ompi" else "libtally_mpi_mpich.so")
    rounds, warm = rounds_for(size)
    rto = emulated_rto_us(o.link_gbit, 64, 8192, o.appliances)
    env = {}
    if tally:
        env = {"LD_PRELOAD": lib, "TALLY_MPI_THRESHOLD": "1024", "TALLY_MPI_STATS": stats,
               "TALLY_APPLIANCES": ",".join(f"{cl.app_ip(k)}:{PORT}"
                                            for k in range(o.appliances)),
               # shaped links: tally-perf allreduce --emulate's window and RTO
               "TALLY_WINDOW": "64", "TALLY_RTO_INIT_US": str(rto),
               "TALLY_RTO_MIN_US": str(rto)}
        env.update(kv.split("=", 1) for kv in o.tally_env)
    ips = [cl.worker_ip(i) for i in range(o.workers)]
    rsh = os.path.join(HERE, "perf_allreduce_rsh.sh")
    if mpi == "ompi":
        xs = []
        for k, v in env.items():
            xs += ["-x", f"{k}={v}"]
        return ["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "-np",
                str(o.workers), "-H", ",".join(f"{ip}:1" for ip in ips), "--map-by", "node",
                "--mca", "pml", "ob1", "--mca", "btl", "tcp,self",
                "--mca", "btl_tcp_if_include", f"{SUBNET}.0/24",
                "--mca", "oob_tcp_if_include", f"{SUBNET}.0/24",
                "--mca", "plm", "rsh", "--mca", "plm_rsh_agent", rsh,
                "--mca", "plm_rsh_no_tree_spawn", "1"] + xs + [exe, str(size), str(rounds),
                                                               str(warm)], rounds
    gs = ["-genv", "UCX_TLS", "tcp,self"]
    for k, v in env.items():
        gs += ["-genv", k, v]
    return ["mpirun.mpich", "-launcher", "rsh", "-launcher-exec", rsh, "-localhost",
            f"{SUBNET}.5", "-hosts", ",".join(ips), "-ppn", "1", "-np", str(o.workers)] + gs + [
            exe, str(size), str(rounds), str(warm)], rounds


def run_one(cl, o, mpi, size, tally):
    """(seconds, ok, why): one mpirun; a launch that gives no result (Open MPI's rsh start
    of a daemon in a namespace now and then hangs) is tried once more, and said so."""
    r = run_try(cl, o, mpi, size, tally, 0)
    if r[0] is None and o.no_retry:
        return r
    if r[0] is None:
        print(f"# {mpi} {size} {'tally' if tally else 'plain'}: no result, run again: "
              f"{r[2][-300:]!r}", flush=True)
        r = run_try(cl, o, mpi, size, tally, 1)
    return r


def appliance_state(cl, o):
    """What the appliances say while a run hangs (tallyctl over their control sockets): each
    job's gone_appliances (a failover one of them was told about) and the stuck chunks per
    (key, round, missing ranks)."""
    ctl = os.path.join(o.bin, "control", "tallyctl")
    out = []
    for k in range(o.appliances):
        sock = os.path.join(cl.tmp, f"ctl{k}.sock")
        try:
            jobs = json.loads(subprocess.run([ctl, "--socket", sock, "--json", "jobs"],
                                             stdout=subprocess.PIPE, text=True,
                                             timeout=15).stdout or "{}")
            stuck = json.loads(subprocess.run([ctl, "--socket", sock, "--json", "stuck"],
                                              stdout=subprocess.PIPE, text=True,
                                              timeout=15).stdout or "{}")
        except (OSError, ValueError, subprocess.TimeoutExpired) as e:
            out.append(f"appliance {k}: {e}")
            continue
        gone = [(j.get("job_id"), j.get("gone_appliances")) for j in jobs
                if isinstance(j, dict)]
        chunks = {}
        for e in stuck if isinstance(stuck, list) else []:
            w = (e.get("key"), e.get("round"), tuple(e.get("missing") or ()))
            chunks[w] = chunks.get(w, 0) + 1
        out.append(f"appliance {k}: (job, gone_appliances) {gone}; stuck chunks by (key, "
                   f"round, missing ranks) {sorted(chunks.items())[:12]}")
    return "; ".join(out)


def run_try(cl, o, mpi, size, tally, attempt):
    name = f"{mpi}-{size}-{'tally' if tally else 'plain'}-{attempt}"
    stats = os.path.join(cl.tmp, name + ".stats")
    argv, rounds = mpirun_argv(cl, o, mpi, size, tally, stats)
    env = {"TALLY_PERF_HOSTMAP": cl.hostmap, "OMPI_ALLOW_RUN_AS_ROOT": "1",
           "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    p = cl.bg(cl.ns("c"), name, argv, env=env)
    # bounded: a minute of start-up and slack, and 20 s per round at 256 MiB; done when
    # mpirun exits or every rank has printed (and, for Tally, written its counters at
    # MPI_Finalize): Hydra over rsh now and then outlives its ranks
    deadline = time.time() + min(o.timeout, 60 + size * 8 / 1e9 * 10 * sum(rounds_for(size)))
    done = False
    while time.time() < deadline:
        if p.poll() is not None:
            done = True
            break
        n = sum(1 for x in cl.logtext(name).splitlines() if x.startswith("{"))
        try:
            with open(stats) as f:
                ns = len(f.readlines())
        except OSError:
            ns = 0
        if n == o.workers and (not tally or ns == o.workers):
            time.sleep(1)
            done = True
            break
        time.sleep(0.2)
    state = appliance_state(cl, o) if tally and not done else ""
    cl.stop(p, 5)
    rows = []
    for line in cl.logtext(name).splitlines():
        if line.startswith("{"):
            try:
                rows.append(json.loads(line))
            except ValueError:
                pass
    if len(rows) != o.workers:
        return None, False, ("timed out: " if not done else "") + cl.logtext(name)[-600:] + \
            (f" [{state}]" if state else "")
    ok = all(r["ok"] for r in rows)
    gso = ""
    if tally:  # every timed allreduce went through the appliances (counters at Finalize)
        try:
            with open(stats) as f:
                st = [json.loads(x) for x in f]
            taken = sum(x["allreduce"]["taken_calls"] for x in st)
            # each appliance's GSO state as the ranks saw it ("on (auto)": its JOIN_OK)
            gso = ",".join(sorted({g for x in st for g in x.get("gso", [])}))
        except (OSError, ValueError, KeyError):
            taken = 0
        ok = ok and taken >= o.workers * rounds
    return max(r["seconds"] for r in rows) / rounds, ok, gso


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--sizes", default="1K,4K,16K,64K,256K,1M,4M,16M,64M,256M")
    ap.add_argument("--mpi", default="ompi,mpich")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--appliances", type=int, default=2)
    ap.add_argument("--link-gbit", type=float, default=1.0)
    ap.add_argument("--timeout", type=float, default=240, help="seconds per mpirun")
    ap.add_argument("--prefix", default="tm")
    ap.add_argument("--no-retry", action="store_true",
                    help="a launch without a result is not tried again (to study it)")
    ap.add_argument("--tally-env", action="append", default=[], metavar="VAR=VALUE",
                    help="more settings for the preloaded ranks (libtally_mpi / agent)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("mpi_netns.py: needs root (ip netns, tc)", file=sys.stderr)
        return 77
    o = SimpleNamespace(prefix=a.prefix, workers=a.workers, impls=["tally"],
                        appliances=a.appliances, emulate=True, link_gbit=a.link_gbit,
                        appliance_gbit=a.link_gbit * a.workers / a.appliances,
                        appliance_kind="udpd", dry_run=False, bin=os.path.abspath(a.bin),
                        timeout=a.timeout, tally_env=a.tally_env, no_retry=a.no_retry)
    sizes = [size_arg(s) for s in a.sizes.split(",")]
    tmp = tempfile.mkdtemp(prefix="tally-mpi-netns.")
    cl = Cluster(o, tmp)
    try:
        cl.build()
        cl.hostmap = os.path.join(tmp, "hostmap")
        with open(cl.hostmap, "w") as f:
            for i, (ns, _) in enumerate(cl.hosts):
                f.write(f"{cl.worker_ip(i)} {ns}\n")
        # the job quota: a 256 MiB tensor over 2 appliances took more than 512 MiB
        mem = max(1024, (max(sizes) * 3) >> 20)
        for k, (ns, _) in enumerate(cl.apps):
            cl.bg(ns, f"udpd{k}", [
                os.path.join(o.bin, "appliance", "udpd", "tally-udpd"), "--addr", cl.app_ip(k),
                "--port", str(PORT), "--cores", "1", "--open-admission", "--mem", f"{mem}M",
                "--quota-bytes", f"{mem}M", "--ctl-socket", os.path.join(tmp, f"ctl{k}.sock")])
        deadline = time.time() + 30
        while not all("cores on port" in cl.logtext(f"udpd{k}") for k in range(o.appliances)):
            if time.time() > deadline:
                print("tally-udpd did not start:", cl.logtext("udpd0")[-300:], file=sys.stderr)
                return 1
            time.sleep(0.1)
        print(f"# {o.workers} ranks, {o.appliances} tally-udpd, links {o.link_gbit} Gbit/s "
              f"(appliances {o.appliance_gbit:g}), tbf both ends; tally env "
              f"{' '.join(o.tally_env) or '-'}; logs and counters in {tmp}")
        print(f"{'mpi':6} {'bytes':>10} {'plain_s':>10} {'tally_s':>10} {'plain_GB/s':>10} "
              f"{'tally_GB/s':>10} {'ratio':>6} ok")
        for mpi in a.mpi.split(","):
            for s in sizes:
                tp, okp, why_p = run_one(cl, o, mpi, s, False)
                tt, okt, why_t = run_one(cl, o, mpi, s, True)
                gso = why_t if tt else ""  # a result's third field: the ranks' GSO state
                for w in (why_p, "" if tt else why_t):
                    if w:
                        print(f"# {mpi} {s}: no result: {w}", file=sys.stderr)
                f = (lambda x: f"{x:10.6f}" if x else f"{'-':>10}")
                bw = (lambda x: f"{s / x / 1e9:10.3f}" if x else f"{'-':>10}")
                ratio = f"{tp / tt:6.2f}" if tp and tt else f"{'-':>6}"
                print(f"{mpi:6} {s:>10} {f(tp)} {f(tt)} {bw(tp)} {bw(tt)} {ratio} "
                      f"{str(okp).lower()}/{str(okt).lower()} gso {gso or '-'}", flush=True)
                print(json.dumps({"mpi": mpi, "bytes": s, "plain_s": tp, "tally_s": tt,
                                  "plain_ok": okp, "tally_ok": okt, "gso": gso}),
                      file=sys.stderr)
    finally:
        cl.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
