#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""allreduce_remote.py - `tally-perf allreduce --hosts H1,...`: the same job on real hosts
instead of namespaces. Each rank runs on its host through a remote command prefix that takes
HOST and one shell command line (default `ssh -o BatchMode=yes`, as OpenMPI's rsh agent does);
Tally's appliances are already running (--appliance HOST:PORT, one per appliance) or are
started here on real ports (--appliance-port PCI with --appliance-ip A/LEN; tallyd's EAL gets
-a PCI). OpenMPI's mpirun starts its daemons through the same remote command.
"""
import os
import re
import shlex
import signal
import subprocess
import time

HOST_RE = re.compile(r"[A-Za-z0-9._:@-]{1,255}")
PCI_RE = re.compile(r"([0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")
CIDR_RE = re.compile(r"(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})/(\d{1,2})")


class RemoteUsage(Exception):
    pass


def add_args(p):
    g = p.add_argument_group("real hosts (instead of namespaces on this box)")
    g.add_argument("--hosts", default="", help="comma list, one rank per host ([user@]host)")
    g.add_argument("--remote-cmd", default="ssh -o BatchMode=yes",
                   help="runs a shell line on HOST: CMD HOST 'LINE' (default ssh)")
    g.add_argument("--remote-bin", default="",
                   help="build directory on the hosts (default: --bin)")
    g.add_argument("--remote-perf-dir", default="",
                   help="perf/ scripts on the hosts (default: this folder)")
    g.add_argument("--remote-python", default="/usr/bin/python3", help="python with torch there")
    g.add_argument("--iface", default="", help="interface of the job's network on the hosts "
                   "(GLOO_SOCKET_IFNAME, OpenMPI btl/oob_tcp_if_include)")
    g.add_argument("--master-addr", default="", help="Gloo rendezvous address (default: host 1)")
    g.add_argument("--appliance", action="append", default=[],
                   help="a running tallyd, HOST:PORT (repeat or comma list: K appliances)")
    g.add_argument("--appliance-port", action="append", default=[],
                   help="start tallyd here on this PCI port (repeat: one tallyd each)")
    g.add_argument("--appliance-ip", default="", help="A.B.C.D/LEN per --appliance-port (comma)")
    g.add_argument("--tallyd-eal", default="", help="more EAL arguments for tallyd")
    g.add_argument("--dry-run", action="store_true", help="print the commands, start nothing")


def _split_list(values):
    out = []
    for v in values:
        out += [x.strip() for x in v.split(",")]
    return out


def check(o, appliances_given):
    """Validate the real-host options in place (o.hosts, o.apps_ext, o.apps_pci); raises
    RemoteUsage with a clear message. appliances_given: --appliances was on the command line."""
    o.hosts = [h.strip() for h in o.hosts.split(",")] if o.hosts else []
    for h in o.hosts:
        if not HOST_RE.fullmatch(h) or h.startswith("-"):
            raise RemoteUsage(f"--hosts: '{h}' is not a host name ([user@]host, no empty item)")
    try:
        o.remote = shlex.split(o.remote_cmd)
    except ValueError as e:
        raise RemoteUsage(f"--remote-cmd: {e}")
    if not o.remote:
        raise RemoteUsage("--remote-cmd: empty")
    o.apps_ext, o.apps_pci = [], []
    for a in _split_list(o.appliance):
        host, _, port = a.rpartition(":")
        if not host or not HOST_RE.fullmatch(host) or "@" in host or not port.isdigit() \
                or not 1 <= int(port) <= 65535:
            raise RemoteUsage(f"--appliance '{a}': HOST:PORT with PORT 1..65535")
        o.apps_ext.append((host, int(port)))
    ports = _split_list(o.appliance_port)
    ips = [x.strip() for x in o.appliance_ip.split(",")] if o.appliance_ip else []
    for p in ports:
        if not PCI_RE.fullmatch(p):
            raise RemoteUsage(f"--appliance-port '{p}' is not a PCI address (0000:3b:00.0)")
    if ports and len(ips) != len(ports):
        raise RemoteUsage(f"--appliance-port needs --appliance-ip with one A.B.C.D/LEN per port "
                          f"({len(ports)} port(s))")
    if ips and not ports:
        raise RemoteUsage("--appliance-ip is for --appliance-port")
    for ip in ips:
        m = CIDR_RE.fullmatch(ip)
        if not m or any(int(x) > 255 for x in m.groups()[:4]) or not 1 <= int(m.group(5)) <= 32:
            raise RemoteUsage(f"--appliance-ip '{ip}' is not A.B.C.D/LEN")
    o.apps_pci = list(zip(ports, ips))
    if o.apps_ext and o.apps_pci:
        raise RemoteUsage("--appliance (running) and --appliance-port (start here) exclude "
                          "each other")
    if o.tallyd_eal and not o.apps_pci:
        raise RemoteUsage("--tallyd-eal is for --appliance-port")
    real = o.apps_ext or o.apps_pci
    if not o.hosts:
        if real or o.iface or o.master_addr or o.remote_bin or o.remote_perf_dir:
            raise RemoteUsage("--appliance, --appliance-port, --iface, --master-addr and "
                              "--remote-* are for --hosts")
        return
    if o.emulate:
        raise RemoteUsage("--emulate builds namespaces on this box; not with --hosts")
    if o.workers is not None and o.workers != len(o.hosts):
        raise RemoteUsage(f"--workers {o.workers} but {len(o.hosts)} --hosts: one rank per host")
    o.workers = len(o.hosts)
    if "tally" in o.impls:
        if not real:
            raise RemoteUsage("--impl tally with --hosts needs --appliance HOST:PORT (running) "
                              "or --appliance-port PCI (started here)")
        k = len(real)
        if appliances_given and o.appliances != k:
            raise RemoteUsage(f"--appliances {o.appliances} but {k} appliance(s) given")
        o.appliances = k
    if "mpi" in o.impls and any("@" in h for h in o.hosts):
        raise RemoteUsage("--impl mpi: mpirun takes plain host names (put users in ~/.ssh/config)")
    if o.iface and not re.fullmatch(r"[A-Za-z0-9_.:-]{1,15}", o.iface):
        raise RemoteUsage(f"--iface '{o.iface}' is not an interface name")
    if o.master_addr and not HOST_RE.fullmatch(o.master_addr):
        raise RemoteUsage(f"--master-addr '{o.master_addr}' is not a host")


def host_addr(h):
    return h.rpartition("@")[2]


class Remote:
    """The launcher for real hosts: where=None runs here, where=HOST through the remote
    command. The same interface as the namespace cluster (bg, logtext, stop, wait_all)."""

    def __init__(self, o, tmp):
        self.o, self.tmp = o, tmp
        self.procs = []
        self.hosts = [(h, o.iface) for h in o.hosts]
        self.dry = []

    def build(self):
        pass

    def worker_ip(self, i):
        return host_addr(self.o.hosts[i])

    def master(self):
        return self.o.master_addr or host_addr(self.o.hosts[0])

    def line(self, where, cmd, env=None):
        """The command as it will be run (argv) for this host."""
        envs = [f"{k}={v}" for k, v in (env or {}).items()]
        if where is None:
            return (["env"] + envs if envs else []) + list(cmd)
        inner = " ".join(shlex.quote(x) for x in (["env"] + envs if envs else []) + list(cmd))
        return self.o.remote + [where, inner]

    def bg(self, where, logname, cmd, env=None):
        argv = self.line(where, cmd, env)
        if self.o.dry_run:
            self.dry.append(" ".join(shlex.quote(x) for x in argv))
            return None
        f = open(os.path.join(self.tmp, logname + ".log"), "w")
        p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
        p.logname = logname
        self.procs.append(p)
        return p

    def local_env(self, env):
        return env

    def logtext(self, logname):
        try:
            with open(os.path.join(self.tmp, logname + ".log")) as f:
                return f.read()
        except OSError:
            return ""

    def stop(self, p, wait=15):
        if p is None or p.poll() is not None:
            return
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
        # Killing the local ssh ends a remote command that reads its stdin or has a tty;
        # a hung remote rank is the user's to end (the log names its host).
        for p in self.procs:
            self.stop(p, 5)
