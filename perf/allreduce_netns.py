#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""allreduce_netns.py - the emulated cluster behind `tally-perf allreduce`: every worker (and
every Tally appliance) in its own network namespace, joined by a veth pair to one Linux bridge;
with --emulate every host link is shaped with tc tbf on both ends of its veth."""
import os
import signal
import subprocess

from allreduce_procs import Procs

SUBNET = "10.77.0"


class Cluster(Procs):
    """Namespaces on one bridge: launcher c, workers w0.., appliances a0.. (always removed)."""

    def __init__(self, o, tmp):
        self.o, self.tmp, self.p = o, tmp, o.prefix
        self.nses, self.procs = [], []
        # names first (--dry-run prints commands without building anything)
        self.hosts = [(self.ns(f"w{i}"), self.ns(f"w{i}") + "h") for i in range(o.workers)]
        self.apps = [(self.ns(f"a{k}"), self.ns(f"a{k}") + "h")
                     for k in range(o.appliances if "tally" in o.impls else 0)]
        self.dry = []

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
        else:
            # A DPDK appliance on AF_PACKET takes frames of at most its 9 KiB ring slots, but
            # a veth passes a UDP GSO super-frame (tally-worker --gso) through whole: the
            # bridge's port to the appliance segments it, as a NIC does before the wire.
            self.sh("ip", "-n", self.ns("br"), "link", "set", bif, "gso_max_segs", "1")
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
        for i in range(o.workers):
            self.add_host(f"w{i}", self.worker_ip(i), o.link_gbit if o.emulate else 0)
        for k in range(len(self.apps)):
            # tallyd owns the veth through AF_PACKET and answers ARP: no kernel address;
            # tally-udpd takes its packets from the kernel, which needs the address.
            ip = self.app_ip(k) if o.appliance_kind == "udpd" else None
            self.add_host(f"a{k}", ip, o.appliance_gbit if o.emulate else 0)

    def master(self):
        return self.worker_ip(0)

    def line(self, ns, cmd, env=None):
        """The command as run (argv): in the namespace, with env's variables set."""
        envs = [f"{k}={v}" for k, v in (env or {}).items()]
        return ["ip", "netns", "exec", ns] + (["env"] + envs if envs else []) + list(cmd)

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
