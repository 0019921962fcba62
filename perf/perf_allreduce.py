#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""perf_allreduce.py - driver behind `tally-perf allreduce`: Tally vs OpenMPI vs Gloo on one
emulated cluster. Every worker (and every Tally appliance) sits in its own network namespace,
joined by a veth pair to a bridge, so all three implementations cross the same kernel path:
TCP/UDP over veth + bridge, no shared-memory shortcut. With --emulate each host link is
shaped with tc tbf so the links, not the CPUs, are the bottleneck.

Figures follow NCCL's tests (doc/PERFORMANCE.md there): algbw = S / t, busbw = algbw *
2(W-1)/W for allreduce; here in Gbit/s (NCCL prints GB/s: divide by 8).
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import sys
import time

import allreduce_remote as ar
from allreduce_netns import SUBNET, Cluster

HERE = os.path.dirname(os.path.abspath(__file__))
IMPLS = ("tally", "mpi", "gloo")
PORT = 9170


class UsageError(Exception):
    pass


def parse_size(s):
    """'64M' -> 67108864; K/M/G are binary multiples; plain digits are bytes."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMGkmg]?)(i?[Bb]?)?\s*", str(s))
    if not m:
        raise UsageError(f"bad size '{s}' (e.g. 4096, 512K, 64M, 1G)")
    v = int(m.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[m.group(2).lower()]
    if v <= 0:
        raise UsageError(f"size must be positive: '{s}'")
    return v


def bandwidths(nbytes, workers, seconds):
    """NCCL's definitions: (algbw, busbw) in Gbit/s for one allreduce of nbytes taking seconds."""
    if seconds <= 0 or workers < 1:
        return 0.0, 0.0
    alg = nbytes * 8 / seconds / 1e9
    return alg, alg * 2 * (workers - 1) / workers


def build_parser():
    p = argparse.ArgumentParser(prog="tally-perf allreduce",
                                description="Allreduce of W workers x BYTES: Tally vs peers.")
    p.add_argument("--impl", action="append", default=None,
                   help="tally, mpi, gloo (repeat or comma list; default all)")
    p.add_argument("--workers", type=int, default=None, help="W (default 4, or one per --hosts)")
    p.add_argument("--size", default="64M", help="bytes per worker (K/M/G suffixes)")
    p.add_argument("--dtype", default="f32", help="f32 (all impls); tally alone also bf16,f16,i32")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1,
                   help="untimed (verified) rounds before the timed ones, every impl (1)")
    p.add_argument("--json", action="store_true", help="one JSON object per implementation")
    p.add_argument("--emulate", action="store_true", help="shape every host link with tc tbf")
    p.add_argument("--link-gbit", type=float, default=1.0, help="worker link rate (Gbit/s)")
    p.add_argument("--appliance-gbit", type=float, default=0.0,
                   help="appliance link rate (default link-gbit*W/K: total >= the workers')")
    p.add_argument("--appliances", type=int, default=None, help="Tally appliances (K, default 1)")
    p.add_argument("--worker-args", default="", help="extra tally-worker options (one string)")
    p.add_argument("--kill-appliance", default="",
                   help="N[@SECONDS]: kill -9 Tally appliance N (0-based) SECONDS (1) after the "
                        "workers start; with 2+ appliances each tally-worker moves its job to the "
                        "next appliance that answers (tally-worker --failover)")
    p.add_argument("--gso", choices=("on", "off"), default="on",
                   help="Tally workers send with UDP GSO (on; TCP peers use TSO/GSO alike)")
    p.add_argument("--appliance-kind", choices=("tallyd", "udpd"), default="tallyd",
                   help="the Tally appliance in the namespaces: tallyd (DPDK on net_af_packet, "
                        "the default) or tally-udpd (kernel UDP with GSO/GRO batching)")
    p.add_argument("--idle-backoff", choices=("on", "off", "auto"), default="auto",
                   help="tallyd's idle sleep in namespaces (auto: off where the CPUs outnumber "
                        "the busy processes, on where it shares them)")
    p.add_argument("--bin", default=os.environ.get("TALLY_BUILD", ""), help="build directory")
    p.add_argument("--timeout", type=float, default=300, help="seconds per implementation")
    p.add_argument("--prefix", default=f"perf{os.getpid() % 100000}",
                   help="name prefix of namespaces/interfaces")
    p.add_argument("--keep-logs", default="",
                   help="copy every process's log (worker JSON with udp counters) to this folder")
    ar.add_args(p)
    return p


def parse_args(argv):
    """Validated options; raises UsageError with a clear message."""
    p = build_parser()
    argv = list(argv)
    for i, a in enumerate(argv[:-1]):
        # its value starts with "--": argparse takes it only in the joined form
        if a == "--worker-args":
            argv[i:i + 2] = [f"--worker-args={argv[i + 1]}"]
            break
    try:
        o = p.parse_args(argv)
    except SystemExit as e:
        if e.code == 0:
            raise
        raise UsageError("bad arguments (see --help)")
    impls = []
    for x in o.impl or ["tally,mpi,gloo"]:
        for i in x.split(","):
            i = i.strip()
            if i not in IMPLS:
                raise UsageError(f"unknown --impl '{i}' (tally, mpi, gloo)")
            if i not in impls:
                impls.append(i)
    o.impls = impls
    appliances_given = o.appliances is not None
    if not appliances_given:
        o.appliances = 1
    try:
        ar.check(o, appliances_given)
    except ar.RemoteUsage as e:
        raise UsageError(str(e))
    if o.workers is None:
        o.workers = 4
    if not 2 <= o.workers <= 16:
        raise UsageError("--workers must be 2..16")
    o.bytes = parse_size(o.size)
    if o.dtype not in ("f32", "bf16", "f16", "i32"):
        raise UsageError(f"unknown --dtype '{o.dtype}'")
    if o.dtype != "f32" and set(impls) - {"tally"}:
        raise UsageError("--dtype other than f32 is for --impl tally only")
    if o.bytes % 4:
        raise UsageError("--size must be a multiple of 4 bytes")
    if not 1 <= o.rounds <= 1000:
        raise UsageError("--rounds must be 1..1000")
    if not 0 <= o.warmup <= 100:
        raise UsageError("--warmup must be 0..100")
    if not 1 <= o.appliances <= 8:
        raise UsageError("--appliances must be 1..8")
    if (o.bytes // 4) < o.appliances * 16:
        raise UsageError("--size too small for that many appliances")
    o.kill_n, o.kill_after = None, 1.0
    if o.kill_appliance:
        m = re.fullmatch(r"(\d+)(?:@(\d+(?:\.\d+)?))?", o.kill_appliance)
        if not m or int(m.group(1)) >= o.appliances or o.appliances < 2 or o.hosts:
            raise UsageError("--kill-appliance N[@SECONDS]: N < --appliances (2 or more), "
                             "on the namespace cluster (not --hosts)")
        o.kill_n = int(m.group(1))
        o.kill_after = float(m.group(2) or 1.0)
    if not 0.001 <= o.link_gbit <= 400:
        raise UsageError("--link-gbit must be 0.001..400")
    if o.appliance_gbit == 0:
        o.appliance_gbit = o.link_gbit * o.workers / o.appliances
    if not 0.001 <= o.appliance_gbit <= 400:
        raise UsageError("--appliance-gbit must be 0.001..400")
    if o.appliance_kind == "udpd" and o.hosts:
        raise UsageError("--appliance-kind udpd is for the namespace cluster (with --hosts, "
                         "start tally-udpd yourself and name it with --appliance HOST:PORT)")
    if not re.fullmatch(r"[a-z][a-z0-9]{0,9}", o.prefix):
        raise UsageError("--prefix: 1-10 lowercase letters/digits, a letter first")
    o.seed = int(time.time()) % 100000 + 1
    return o


def summarize(impl, workers, nbytes, rounds, per_rank, note=""):
    """One result object from per-rank dicts {seconds (total over rounds), ok}.
    The round time is the slowest rank's: a collective ends when its last member has the sum."""
    out = {"impl": impl, "workers": workers, "bytes": nbytes, "rounds": rounds,
           "seconds_per_round": None, "algbw_gbps": None, "busbw_gbps": None,
           "verified": False, "note": note}
    if len(per_rank) != workers or any(r is None for r in per_rank):
        out["note"] = note or "missing results from some ranks"
        return out
    secs = max(r["seconds"] for r in per_rank) / rounds
    alg, bus = bandwidths(nbytes, workers, secs)
    out.update(seconds_per_round=round(secs, 6), algbw_gbps=round(alg, 4),
               busbw_gbps=round(bus, 4), verified=all(bool(r.get("ok")) for r in per_rank))
    return out


def tally_rank_result(objs):
    """Fold the tally-worker JSON objects of one rank (one per appliance) into {seconds, ok}:
    the shards run concurrently, so the rank's time is the longest shard's."""
    if not objs:
        return None
    ok = all(o.get("ok") and not o.get("mismatches") and o.get("checked", 0) > 0 for o in objs)
    r = {"seconds": max(o["seconds"] for o in objs), "ok": ok,
         "retransmits": sum(o.get("retransmits", 0) for o in objs),
         "gso_sends": sum((o.get("udp") or {}).get("tx_gso_sends", 0) for o in objs),
         "first_round_seconds": max(o.get("first_round_seconds", 0) for o in objs)}
    if any("median_round_seconds" in o for o in objs):  # workers that time every round
        r["median_round_seconds"] = max(o.get("median_round_seconds", 0) for o in objs)
    return r


def emulated_rto_us(link_gbit, window=64, chunk=8192, appliances=1):
    """RTO for a shaped link (initial, and the floor of the adaptive one): twice the round
    trip through full queues. A rank's K tally-workers (one per appliance) each keep a window
    of chunks on its link, queued once on the way up and once (the results) on the way down:
    2 * K * window * chunk of queueing. tally-worker's defaults (500 us first, 20 us floor)
    suit dedicated cores on 10G+ links; here a completion waits that long without any loss,
    and timeouts below it re-send chunks (and the appliance their results) that were never
    lost: measured 12% of the pushes at 1 Gbit/s, W=4, K=2, on a lossless emulated cluster."""
    q = 2 * appliances * window * chunk * 8 / (link_gbit * 1e9) * 1e6
    return int(min(200000, max(500, 2 * q)))


def worker_opt(args, name, default):
    """The value of tally-worker option `name` in an argument list (last one wins)."""
    v = default
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            v = args[i + 1]
        elif a.startswith(name + "="):
            v = a.split("=", 1)[1]
    return v


def last_json(text):
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


def log(msg):
    print(f"[allreduce {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def tally_plan(cl, o):
    """Tally's commands: appliances [(where, logname, argv)] and the workers [(rank, where,
    logname, argv)], plus the extra worker options used. Namespaces: one tallyd per appliance on
    net_af_packet over its veth; real hosts: tallyd here on each --appliance-port (EAL -a PCI),
    or the running --appliance list; one tally-worker per (rank, appliance)."""
    tallyd = os.path.join(o.bin, "appliance", "tallyd")
    worker = os.path.join(o.remote_bin or o.bin if o.hosts else o.bin, "perf", "tally-worker")
    K = o.appliances
    mem = max(256, (o.bytes // K * 3) >> 20)
    # the one job may take all of it (tallyd's default job quota is half of --mem, less than
    # a 64 MiB tensor's accumulators and results)
    quota = ["--quota-bytes", f"{mem}M"]
    apps, addrs = [], []
    if o.hosts and o.apps_ext:
        addrs = list(o.apps_ext)
    elif o.hosts:
        for k, (pci, ip) in enumerate(o.apps_pci):
            apps.append((None, f"tallyd{k}", [
                tallyd, "--port", pci, "--ip", ip, "--queues", "1", "--base-port", str(PORT),
                "--open-admission", "--mem", f"{mem}M"] + quota + ["--idle-backoff", "off",
                "--ctl-socket", os.path.join(cl.tmp, f"ctl{k}.sock"), "--", "-a", pci,
                "--file-prefix", f"{o.prefix}a{k}"] + o.tallyd_eal.split()))
            addrs.append((ip.split("/")[0], PORT))
    else:
        ncpu = os.cpu_count() or 1
        backoff = o.idle_backoff
        if backoff == "auto":
            # pure polling wherever each appliance's datapath lcore and each worker can have
            # a CPU of its own (a 16-core host); sleeping when idle where they share 2
            backoff = "off" if ncpu >= K + o.workers * K + 1 else "on"
        for k, (ns, hif) in enumerate(cl.apps):
            if o.appliance_kind == "udpd":
                # kernel UDP: one engine thread with GRO'd pushes and GSO'd RESULTs, waiting
                # in epoll when idle (one core: the thread serves every core's socket anyway)
                argv = [os.path.join(o.bin, "appliance", "udpd", "tally-udpd"),
                        "--addr", cl.app_ip(k), "--port", str(PORT), "--cores", "1",
                        "--open-admission", "--mem", f"{mem}M"] + quota + [
                        "--ctl-socket", os.path.join(cl.tmp, f"ctl{k}.sock")]
            else:
                # One datapath lcore per appliance, spread over the CPUs
                lc = f"0@{k % ncpu},1@{(k + 1) % ncpu}"
                argv = [tallyd, "--port", f"net_af_packet{k},iface={hif},framesz=9216,"
                        "blocksz=36864,framecnt=2048,qpairs=1,qdisc_bypass=0",
                        "--ip", f"{cl.app_ip(k)}/24", "--queues", "1", "--base-port", str(PORT),
                        "--open-admission", "--mem", f"{mem}M"] + quota + [
                        "--idle-backoff", backoff,
                        "--ctl-socket", os.path.join(cl.tmp, f"ctl{k}.sock"), "--",
                        "--no-huge", "--no-pci", "-m", str(mem + 512),
                        "--file-prefix", f"{o.prefix}a{k}", "--lcores", lc]
            apps.append((ns, f"tallyd{k}", argv))
            addrs.append((cl.app_ip(k), PORT))
    # Each rank shards its gradients by key over the K appliances (BytePS): one tally-worker
    # per (rank, appliance), all on the rank's host, sharing its link.
    elems = o.bytes // 4
    extra = o.worker_args.split()
    if o.gso == "on" and "--gso" not in extra:
        # UDP GSO super-frames up to the wire, as TCP's TSO/GSO for the peers; the bridge
        # port to each AF_PACKET appliance segments them (allreduce_netns.py)
        extra.append("--gso")
    if o.emulate and worker_opt(extra, "--window", None) is None:
        # shaped links keep the 64-chunk window their RTO and tbf queues were sized for
        # (tally-worker's own default, 128, sends a 1 MiB tensor in one burst)
        extra[:0] = ["--window", "64"]
    if o.emulate and "--rto-us" not in extra:
        try:
            window = int(worker_opt(extra, "--window", 64))
            chunk = int(worker_opt(extra, "--chunk", 8192))
        except ValueError:
            window, chunk = 64, 8192  # tally-worker itself rejects the bad value
        rto = emulated_rto_us(o.link_gbit, window, chunk, K)
        extra += ["--rto-us", str(rto)]
        if "--rto-min-us" not in extra:
            extra += ["--rto-min-us", str(rto)]
    seed = o.seed
    workers = []
    for i, (where, _) in enumerate(cl.hosts):
        off = 0
        for k, (ip, port) in enumerate(addrs):
            n = elems // K if k + 1 < K else elems - off
            off += n
            # several appliances: the job of appliance k moves to the next one that answers
            # when k is lost, the same list on every rank (the same choice)
            fo = [f"{addrs[(k + j) % K][0]}:{addrs[(k + j) % K][1]}" for j in range(1, K)]
            workers.append((i, where, f"tw{i}-{k}", [
                worker, "--host", ip, "--port", str(port), "--job", str(7 + k),
                "--token", "1", "--rank", str(i), "--world", str(o.workers),
                "--bytes", str(n * 4), "--keys", str(max(1, 16 // K)), "--key-base", str(k * 1000),
                "--rounds", str(o.rounds), "--warmup", str(o.warmup), "--dtype", o.dtype,
                "--seed", str(seed), "--json"]
                + (["--failover", ",".join(fo)] if fo else []) + extra))
    return apps, workers, extra


def run_tally(cl, o):
    apps_plan, workers_plan, extra = tally_plan(cl, o)
    if not o.dry_run:
        for b in [a[2][0] for a in apps_plan] + ([] if o.hosts else [workers_plan[0][3][0]]):
            if not os.access(b, os.X_OK):
                return summarize("tally", o.workers, o.bytes, o.rounds, [], f"missing {b}")
    apps = [cl.bg(where, name, argv) for where, name, argv in apps_plan]
    deadline = time.time() + 60
    for k, a in enumerate(apps if not o.dry_run else []):
        ready = "cores on port" if o.appliance_kind == "udpd" else "ready"
        while ready not in cl.logtext(f"tallyd{k}"):
            if a.poll() is not None or time.time() > deadline:
                return summarize("tally", o.workers, o.bytes, o.rounds, [],
                                 f"{o.appliance_kind} {k} did not start: "
                                 f"{cl.logtext(f'tallyd{k}')[-300:]}")
            time.sleep(0.1)
    procs = [(i, cl.bg(where, name, argv)) for i, where, name, argv in workers_plan]
    if o.dry_run:
        return None
    killer = None
    if o.kill_n is not None:  # a fault injected mid-run: the workers fail over
        killer = threading.Timer(o.kill_after, lambda: os.killpg(apps[o.kill_n].pid, signal.SIGKILL))
        killer.start()
    done = cl.wait_all([p for _, p in procs], o.timeout)
    if killer:
        killer.cancel()
    per_rank = []
    for i in range(o.workers):
        objs = [last_json(cl.logtext(p.logname)) for r, p in procs if r == i]
        per_rank.append(tally_rank_result(objs) if all(objs) else None)
    for a in apps:
        cl.stop(a)
    note = "" if done else "timed out"
    if not done or None in per_rank:
        note = note or "a worker printed no result: " + cl.logtext(procs[0][1].logname)[-300:]
    errs = [o.get("error") for o in map(lambda p: last_json(cl.logtext(p[1].logname)), procs)
            if o and o.get("error")]
    if errs:
        note = note or f"worker error: {errs[0]}"
    r = summarize("tally", o.workers, o.bytes, o.rounds, per_rank, note)
    r["appliance_kind"] = "external" if o.hosts and o.apps_ext else o.appliance_kind
    # Retransmissions explain a slow run on shaped links (tbf drops what exceeds its queue).
    r["retransmits"] = sum(x["retransmits"] for x in per_rank if x)
    r["gso_sends"] = sum(x["gso_sends"] for x in per_rank if x)  # --gso: super-frames sent
    # the first round (a warm-up one unless --warmup 0): cold state, first RTT samples
    r["first_round_seconds"] = max((x["first_round_seconds"] for x in per_rank if x), default=None)
    # the slowest rank's median round: on a shared host the mean carries descheduled rounds
    r["median_round_seconds"] = max((x.get("median_round_seconds", 0) for x in per_rank if x),
                                    default=None)
    if extra:
        r["worker_args"] = " ".join(extra)
    if o.kill_n is not None:
        r["killed_appliance"] = f"{o.kill_n} after {o.kill_after:g} s"
        r["failovers"] = sum(cl.logtext(p.logname).count(" moved to ") for _, p in procs)
    return r


def run_gloo(cl, o):
    if not o.hosts and not o.dry_run:
        try:
            import torch.distributed  # noqa: F401 (only checks that gloo is there)
        except Exception as e:
            return summarize("gloo", o.workers, o.bytes, o.rounds, [], f"skipped: no torch ({e})")
    py = o.remote_python if o.hosts else sys.executable
    script = os.path.join(o.remote_perf_dir or HERE if o.hosts else HERE, "allreduce_gloo.py")
    procs = []
    for i, (where, iface) in enumerate(cl.hosts):
        env = {"OMP_NUM_THREADS": "1"}
        if iface:
            env["GLOO_SOCKET_IFNAME"] = iface
        procs.append(cl.bg(where, f"gloo{i}", [
            py, script, "--rank", str(i), "--world", str(o.workers), "--master", cl.master(),
            "--port", "29517", "--bytes", str(o.bytes), "--rounds", str(o.rounds),
            "--warmup", str(o.warmup)], env=env))
    if o.dry_run:
        return None
    done = cl.wait_all(procs, o.timeout)
    per_rank = [last_json(cl.logtext(p.logname)) for p in procs]
    note = "" if done else "timed out"
    if None in per_rank:
        note = note or "a rank printed no result: " + cl.logtext("gloo0")[-300:]
    return summarize("gloo", o.workers, o.bytes, o.rounds, per_rank, note)


def mpi_plan(cl, o, mpirun):
    """(where, argv, env) of mpirun: namespaces get an rsh agent that enters each host's
    namespace; real hosts get --remote-cmd as the rsh agent."""
    prog = os.path.join(o.remote_bin or o.bin if o.hosts else o.bin, "perf", "tally-perf-mpi")
    if o.hosts:
        net = ["--mca", "btl_tcp_if_include", o.iface, "--mca", "oob_tcp_if_include",
               o.iface] if o.iface else []
        return None, [mpirun, "--allow-run-as-root", "-np", str(o.workers), "-H",
                      ",".join(f"{h}:1" for h in o.hosts), "--map-by", "node",
                      "--mca", "btl", "tcp,self"] + net + ["--mca", "plm", "rsh",
                      "--mca", "plm_rsh_agent", " ".join(o.remote),
                      "--mca", "plm_rsh_no_tree_spawn", "1", prog, str(o.bytes),
                      str(o.rounds), str(o.warmup)], {}
    hostmap = os.path.join(cl.tmp, "hostmap")
    hostfile = os.path.join(cl.tmp, "hostfile")
    if not o.dry_run:
        with open(hostmap, "w") as f:
            for i, (ns, _) in enumerate(cl.hosts):
                f.write(f"{cl.worker_ip(i)} {ns}\n")
        with open(hostfile, "w") as f:
            for i in range(o.workers):
                f.write(f"{cl.worker_ip(i)} slots=1\n")
    # plm rsh named: a container's environment may pin another launcher (the GPU host sets
    # OMPI_MCA_plm=isolated: local slots only, "All nodes ... are already filled")
    env = {"TALLY_PERF_HOSTMAP": hostmap, "OMPI_MCA_plm": "rsh",
           "OMPI_MCA_plm_rsh_agent": os.path.join(HERE, "perf_allreduce_rsh.sh")}
    return cl.ns("c"), [
        mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(o.workers),
        "--hostfile", hostfile, "--map-by", "node", "--mca", "btl", "tcp,self",
        "--mca", "btl_tcp_if_include", f"{SUBNET}.0/24", "--mca", "oob_tcp_if_include",
        f"{SUBNET}.0/24", "--mca", "plm_rsh_no_tree_spawn", "1",
        prog, str(o.bytes), str(o.rounds), str(o.warmup)], env


def run_mpi(cl, o):
    mpirun = shutil.which("mpirun") or ("mpirun" if o.dry_run else None)
    if not mpirun:
        return summarize("mpi", o.workers, o.bytes, o.rounds, [],
                         "skipped: mpirun missing (apt-get install openmpi-bin libopenmpi-dev)")
    where, argv, env = mpi_plan(cl, o, mpirun)
    if not o.dry_run and not o.hosts and not os.access(argv[-4], os.X_OK):
        return summarize("mpi", o.workers, o.bytes, o.rounds, [],
                         f"skipped: {argv[-4]} not built (needs libopenmpi-dev at configure time)")
    p = cl.bg(where, "mpi", argv, env=env)
    if o.dry_run:
        return None
    done = cl.wait_all([p], o.timeout)
    per_rank = [None] * o.workers
    for line in cl.logtext("mpi").splitlines():
        if line.startswith("{"):
            try:
                d = json.loads(line)
                per_rank[d["rank"]] = d
            except (ValueError, KeyError, IndexError, TypeError):
                pass
    note = "" if done else "timed out"
    if None in per_rank:
        note = note or "a rank printed no result: " + cl.logtext("mpi")[-400:]
    return summarize("mpi", o.workers, o.bytes, o.rounds, per_rank, note)


RUNNERS = {"tally": run_tally, "mpi": run_mpi, "gloo": run_gloo}


def dry_run(o):
    """Print every command the run would start, per implementation; start nothing."""
    cl = ar.Remote(o, "/tmp/" + o.prefix + ".XXXXXX") if o.hosts else \
        Cluster(o, "/tmp/" + o.prefix + ".XXXXXX")
    if not o.hosts:
        print(f"# namespaces {o.prefix}*: bridge, launcher, {o.workers} worker(s)"
              + (f", {len(cl.apps)} appliance(s)" if cl.apps else "")
              + (f"; links shaped to {o.link_gbit:g} Gbit/s" if o.emulate else ""))
    for impl in o.impls:
        cl.dry = []
        RUNNERS[impl](cl, o)
        print(f"# {impl}")
        for line in cl.dry:
            print(line)
    return 0


def main(argv):
    try:
        o = parse_args(argv)
    except UsageError as e:
        print(f"tally-perf allreduce: {e}", file=sys.stderr)
        return 2
    if not o.bin:
        o.bin = os.path.normpath(os.path.join(HERE, "..", "build"))
    if o.dry_run:
        return dry_run(o)
    if not o.hosts and (os.geteuid() != 0 or not shutil.which("ip")):
        print("tally-perf allreduce: needs root and iproute2 (network namespaces)", file=sys.stderr)
        return 77
    import tempfile
    tmp = tempfile.mkdtemp(prefix=o.prefix + ".")
    results = []
    cl = ar.Remote(o, tmp) if o.hosts else Cluster(o, tmp)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        cl.build()
        for impl in o.impls:
            log(f"{impl}: {o.workers} workers x {o.bytes} B x {o.rounds} rounds"
                + (f" on hosts {','.join(o.hosts)}" if o.hosts else "")
                + (f", links {o.link_gbit} Gbit/s (appliances {o.appliance_gbit:g})"
                   if o.emulate else ", unshaped"))
            t0 = time.time()
            r = RUNNERS[impl](cl, o)
            r.update(dtype=o.dtype, warmup=o.warmup, emulate=o.emulate,
                     link_gbit=o.link_gbit if o.emulate else None,
                     appliances=o.appliances if impl == "tally" else None,
                     hosts=o.hosts or None)
            results.append(r)
            log(f"{impl}: done in {time.time() - t0:.1f} s "
                f"{'verified' if r['verified'] else 'NOT verified'} {r['note']}")
    except RuntimeError as e:
        print(f"tally-perf allreduce: {e}", file=sys.stderr)
        return 1
    finally:
        cl.cleanup()
        if o.keep_logs:  # the per-worker counters explain a slow run (retransmits, syscalls)
            shutil.copytree(tmp, o.keep_logs, dirs_exist_ok=True,  # not the control sockets
                            ignore=shutil.ignore_patterns("*.sock"))
        shutil.rmtree(tmp, ignore_errors=True)
    print_results(results, o)
    ran = [r for r in results if not r["note"].startswith("skipped")]
    return 0 if ran and all(r["verified"] for r in ran) else 1


def ratios(results):
    """Tally's speed-up over the faster peer that ran and verified (None if none)."""
    t = next((r for r in results if r["impl"] == "tally" and r["verified"]), None)
    peers = [r for r in results if r["impl"] != "tally" and r["verified"]]
    if not t or not peers:
        return None, None
    best = min(peers, key=lambda r: r["seconds_per_round"])
    return best["impl"], best["seconds_per_round"] / t["seconds_per_round"]


def print_results(results, o):
    if o.json:
        for r in results:
            print(json.dumps(r))
    else:
        print(f"{'impl':6} {'workers':>7} {'bytes':>11} {'s/round':>9} {'algbw Gb/s':>10} "
              f"{'busbw Gb/s':>10}  verified")
        for r in results:
            if r["seconds_per_round"] is None:
                print(f"{r['impl']:6} {r['workers']:>7} {r['bytes']:>11}  -- {r['note']}")
                continue
            print(f"{r['impl']:6} {r['workers']:>7} {r['bytes']:>11} {r['seconds_per_round']:9.4f} "
                  f"{r['algbw_gbps']:10.3f} {r['busbw_gbps']:10.3f}  {r['verified']}")
    peer, ratio = ratios(results)
    if ratio is not None:
        print(f"tally vs {peer}: {ratio:.2f}x its speed (time per round, same run)",
              file=sys.stderr if o.json else sys.stdout)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
