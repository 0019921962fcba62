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
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
IMPLS = ("tally", "mpi", "gloo")
SUBNET = "10.77.0"
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
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--size", default="64M", help="bytes per worker (K/M/G suffixes)")
    p.add_argument("--dtype", default="f32", help="f32 (all impls); tally alone also bf16,f16,i32")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", action="store_true", help="one JSON object per implementation")
    p.add_argument("--emulate", action="store_true", help="shape every host link with tc tbf")
    p.add_argument("--link-gbit", type=float, default=1.0, help="worker link rate (Gbit/s)")
    p.add_argument("--appliance-gbit", type=float, default=0.0,
                   help="appliance link rate (default link-gbit*W/K: total >= the workers')")
    p.add_argument("--appliances", type=int, default=1, help="Tally appliances (K)")
    p.add_argument("--worker-args", default="", help="extra tally-worker options (one string)")
    p.add_argument("--bin", default=os.environ.get("TALLY_BUILD", ""), help="build directory")
    p.add_argument("--timeout", type=float, default=300, help="seconds per implementation")
    p.add_argument("--prefix", default=f"perf{os.getpid() % 100000}",
                   help="name prefix of namespaces/interfaces")
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
    if not 1 <= o.appliances <= 8:
        raise UsageError("--appliances must be 1..8")
    if (o.bytes // 4) < o.appliances * 16:
        raise UsageError("--size too small for that many appliances")
    if not 0.001 <= o.link_gbit <= 400:
        raise UsageError("--link-gbit must be 0.001..400")
    if o.appliance_gbit == 0:
        o.appliance_gbit = o.link_gbit * o.workers / o.appliances
    if not 0.001 <= o.appliance_gbit <= 400:
        raise UsageError("--appliance-gbit must be 0.001..400")
    if not re.fullmatch(r"[a-z][a-z0-9]{0,9}", o.prefix):
        raise UsageError("--prefix: 1-10 lowercase letters/digits, a letter first")
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
    return {"seconds": max(o["seconds"] for o in objs), "ok": ok,
            "retransmits": sum(o.get("retransmits", 0) for o in objs)}


def emulated_rto_us(link_gbit, window=64, chunk=8192):
    """Initial RTO for a shaped link: twice the time a full window of chunks queues on it.
    tally-worker's default (500 us) suits 10G+ links; on a 1 Gbit/s link a window queues for
    several ms, and premature timeouts then multiply (spurious retransmissions fill the link)."""
    return int(min(200000, max(500, 2 * window * chunk * 8 / (link_gbit * 1e9) * 1e6)))


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


class Cluster:
    """Namespaces on one bridge: launcher c, workers w0.., appliances a0.. (always removed)."""

    def __init__(self, o, tmp):
        self.o, self.tmp, self.p = o, tmp, o.prefix
        self.nses, self.procs = [], []

    def sh(self, *cmd, check=True):
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if check and r.returncode:
            raise RuntimeError(f"{' '.join(cmd)}: {r.stdout.strip()}")
        return r

    def ns(self, name):
        return self.p + name

    def worker_ip(self, i):
        return f"{SUBNET}.{10 + i}"

    def app_ip(self, k):
        return f"{SUBNET}.{100 + k}"

    def add_host(self, name, ip, gbit):
        ns = self.ns(name)
        self.sh("ip", "netns", "add", ns)
        self.nses.append(ns)
        self.sh("ip", "-n", ns, "link", "set", "lo", "up")
        hif, bif = ns + "h", ns + "b"
        self.sh("ip", "link", "add", hif, "mtu", "9000", "netns", ns, "type", "veth", "peer",
                "name", bif, "mtu", "9000", "netns", self.ns("br"))
        self.sh("ip", "-n", ns, "link", "set", hif, "up")
        self.sh("ip", "-n", self.ns("br"), "link", "set", bif, "master", "br0", "up")
        if ip:
            self.sh("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", hif)
        if gbit:
            # Both directions: host egress on its end, host ingress on the bridge's end.
            rate = f"{int(gbit * 1000)}mbit"
            burst = str(max(64 * 1024, int(gbit * 1e9 / 8 / 250)))  # ~4 ms of line
            for n, dev in ((ns, hif), (self.ns("br"), bif)):
                self.sh("ip", "netns", "exec", n, "tc", "qdisc", "add", "dev", dev, "root", "tbf",
                        "rate", rate, "burst", burst, "latency", "100ms")
        return ns, hif

    def build(self):
        o = self.o
        self.sh("ip", "netns", "add", self.ns("br"))
        self.nses.append(self.ns("br"))
        self.sh("ip", "-n", self.ns("br"), "link", "add", "br0", "mtu", "9000", "type", "bridge")
        self.sh("ip", "-n", self.ns("br"), "link", "set", "br0", "up")
        self.add_host("c", f"{SUBNET}.5", 0)  # the launcher (mpirun), control traffic only
        self.hosts = []
        for i in range(o.workers):
            self.hosts.append(self.add_host(f"w{i}", self.worker_ip(i),
                                            o.link_gbit if o.emulate else 0))
        self.apps = []
        if "tally" in o.impls:
            for k in range(o.appliances):
                # tallyd owns the veth through AF_PACKET and answers ARP: no kernel address.
                self.apps.append(self.add_host(f"a{k}", None,
                                               o.appliance_gbit if o.emulate else 0))

    def bg(self, ns, logname, cmd, env=None):
        f = open(os.path.join(self.tmp, logname + ".log"), "w")
        p = subprocess.Popen(["ip", "netns", "exec", ns] + cmd, stdout=f, stderr=subprocess.STDOUT,
                             env=env, start_new_session=True)
        p.logname = logname
        self.procs.append(p)
        return p

    def logtext(self, logname):
        try:
            with open(os.path.join(self.tmp, logname + ".log")) as f:
                return f.read()
        except OSError:
            return ""

    def stop(self, p, wait=15):
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except OSError:
                pass
            try:
                p.wait(wait)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()

    def wait_all(self, procs, timeout):
        deadline = time.time() + timeout
        for p in procs:
            try:
                p.wait(max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                for q in procs:
                    self.stop(q, 2)
                return False
        return True

    def cleanup(self):
        for p in self.procs:
            self.stop(p, 5)
        for ns in reversed(self.nses):
            r = subprocess.run(["ip", "netns", "pids", ns], stdout=subprocess.PIPE, text=True)
            for pid in r.stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except OSError:
                    pass
            subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL)


def run_tally(cl, o):
    tallyd = os.path.join(o.bin, "appliance", "tallyd")
    worker = os.path.join(o.bin, "perf", "tally-worker")
    for b in (tallyd, worker):
        if not os.access(b, os.X_OK):
            return summarize("tally", o.workers, o.bytes, o.rounds, [], f"missing {b}")
    K = o.appliances
    apps = []
    for k, (ns, hif) in enumerate(cl.apps):
        # One datapath lcore per appliance, spread over the CPUs; idle back-off shares them.
        ncpu = os.cpu_count() or 1
        lc = f"0@{k % ncpu},1@{(k + 1) % ncpu}"
        mem = max(256, (o.bytes // K * 3) >> 20)
        apps.append(cl.bg(ns, f"tallyd{k}", [
            tallyd, "--port", f"net_af_packet{k},iface={hif},framesz=9216,blocksz=36864,"
            "framecnt=2048,qpairs=1,qdisc_bypass=0",
            "--ip", f"{cl.app_ip(k)}/24", "--queues", "1", "--base-port", str(PORT),
            "--open-admission", "--mem", f"{mem}M", "--idle-backoff", "on",
            "--ctl-socket", os.path.join(cl.tmp, f"ctl{k}.sock"), "--",
            "--no-huge", "--no-pci", "-m", str(mem + 512), "--file-prefix", f"{o.prefix}a{k}",
            "--lcores", lc]))
    deadline = time.time() + 60
    for k, a in enumerate(apps):
        while "ready" not in cl.logtext(f"tallyd{k}"):
            if a.poll() is not None or time.time() > deadline:
                return summarize("tally", o.workers, o.bytes, o.rounds, [],
                                 f"tallyd {k} did not start: {cl.logtext(f'tallyd{k}')[-300:]}")
            time.sleep(0.1)
    # Each rank shards its gradients over the K appliances by key (BytePS): one
    # tally-worker per (rank, appliance), all in the rank's namespace, sharing its link.
    elems = o.bytes // 4
    extra = o.worker_args.split()
    if o.emulate and "--rto-us" not in extra:
        extra += ["--rto-us", str(emulated_rto_us(o.link_gbit))]
    seed = int(time.time()) % 100000 + 1
    procs = []
    for i, (ns, _) in enumerate(cl.hosts):
        off = 0
        for k in range(K):
            n = elems // K if k + 1 < K else elems - off
            off += n
            procs.append((i, cl.bg(ns, f"tw{i}-{k}", [
                worker, "--host", cl.app_ip(k), "--port", str(PORT), "--job", str(7 + k),
                "--token", "1", "--rank", str(i), "--world", str(o.workers),
                "--bytes", str(n * 4), "--keys", str(max(1, 16 // K)), "--key-base", str(k * 1000),
                "--rounds", str(o.rounds), "--dtype", o.dtype, "--seed", str(seed), "--json"]
                + extra)))
    done = cl.wait_all([p for _, p in procs], o.timeout)
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
    # Retransmissions explain a slow run on shaped links (tbf drops what exceeds its queue).
    r["retransmits"] = sum(x["retransmits"] for x in per_rank if x)
    if "--rto-us" in extra:
        r["worker_args"] = " ".join(extra)
    return r


def run_gloo(cl, o):
    try:
        import torch.distributed  # noqa: F401 (only checks that gloo is there)
    except Exception as e:
        return summarize("gloo", o.workers, o.bytes, o.rounds, [], f"skipped: no torch ({e})")
    procs = []
    for i, (ns, hif) in enumerate(cl.hosts):
        env = dict(os.environ, GLOO_SOCKET_IFNAME=hif, OMP_NUM_THREADS="1")
        procs.append(cl.bg(ns, f"gloo{i}", [
            sys.executable, os.path.join(HERE, "allreduce_gloo.py"), "--rank", str(i),
            "--world", str(o.workers), "--master", cl.worker_ip(0), "--port", "29517",
            "--bytes", str(o.bytes), "--rounds", str(o.rounds)], env=env))
    done = cl.wait_all(procs, o.timeout)
    per_rank = [last_json(cl.logtext(p.logname)) for p in procs]
    note = "" if done else "timed out"
    if None in per_rank:
        note = note or "a rank printed no result: " + cl.logtext("gloo0")[-300:]
    return summarize("gloo", o.workers, o.bytes, o.rounds, per_rank, note)


def run_mpi(cl, o):
    mpirun = shutil.which("mpirun")
    prog = os.path.join(o.bin, "perf", "tally-perf-mpi")
    if not mpirun:
        return summarize("mpi", o.workers, o.bytes, o.rounds, [],
                         "skipped: mpirun missing (apt-get install openmpi-bin libopenmpi-dev)")
    if not os.access(prog, os.X_OK):
        return summarize("mpi", o.workers, o.bytes, o.rounds, [],
                         f"skipped: {prog} not built (needs libopenmpi-dev at configure time)")
    # Each rank in its own namespace: mpirun (in the launcher namespace) starts one orted per
    # "host" through an rsh agent that enters that host's namespace, as ssh would.
    hostmap = os.path.join(cl.tmp, "hostmap")
    hostfile = os.path.join(cl.tmp, "hostfile")
    with open(hostmap, "w") as f:
        for i, (ns, _) in enumerate(cl.hosts):
            f.write(f"{cl.worker_ip(i)} {ns}\n")
    with open(hostfile, "w") as f:
        for i in range(o.workers):
            f.write(f"{cl.worker_ip(i)} slots=1\n")
    env = dict(os.environ, TALLY_PERF_HOSTMAP=hostmap, OMPI_MCA_plm_rsh_agent=os.path.join(
        HERE, "perf_allreduce_rsh.sh"))
    p = cl.bg(cl.ns("c"), "mpi", [
        mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(o.workers),
        "--hostfile", hostfile, "--map-by", "node", "--mca", "btl", "tcp,self",
        "--mca", "btl_tcp_if_include", f"{SUBNET}.0/24", "--mca", "oob_tcp_if_include",
        f"{SUBNET}.0/24", "--mca", "plm_rsh_no_tree_spawn", "1",
        prog, str(o.bytes), str(o.rounds)], env=env)
    done = cl.wait_all([p], o.timeout)
    per_rank = [None] * o.workers
    for line in cl.logtext("mpi").splitlines():
        if line.startswith("{"):
            try:
                d = json.loads(line)
                per_rank[d["rank"]] = d
            except (ValueError, KeyError, IndexError):
                pass
    note = "" if done else "timed out"
    if None in per_rank:
        note = note or "a rank printed no result: " + cl.logtext("mpi")[-400:]
    return summarize("mpi", o.workers, o.bytes, o.rounds, per_rank, note)


RUNNERS = {"tally": run_tally, "mpi": run_mpi, "gloo": run_gloo}


def main(argv):
    try:
        o = parse_args(argv)
    except UsageError as e:
        print(f"tally-perf allreduce: {e}", file=sys.stderr)
        return 2
    if os.geteuid() != 0 or not shutil.which("ip"):
        print("tally-perf allreduce: needs root and iproute2 (network namespaces)", file=sys.stderr)
        return 77
    if not o.bin:
        o.bin = os.path.normpath(os.path.join(HERE, "..", "build"))
    import tempfile
    tmp = tempfile.mkdtemp(prefix=o.prefix + ".")
    results = []
    cl = Cluster(o, tmp)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        cl.build()
        for impl in o.impls:
            log(f"{impl}: {o.workers} workers x {o.bytes} B x {o.rounds} rounds"
                + (f", links {o.link_gbit} Gbit/s (appliances {o.appliance_gbit:g})"
                   if o.emulate else ", unshaped"))
            t0 = time.time()
            r = RUNNERS[impl](cl, o)
            r.update(dtype=o.dtype, emulate=o.emulate,
                     link_gbit=o.link_gbit if o.emulate else None,
                     appliances=o.appliances if impl == "tally" else None)
            results.append(r)
            log(f"{impl}: done in {time.time() - t0:.1f} s "
                f"{'verified' if r['verified'] else 'NOT verified'} {r['note']}")
    except RuntimeError as e:
        print(f"tally-perf allreduce: {e}", file=sys.stderr)
        return 1
    finally:
        cl.cleanup()
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
