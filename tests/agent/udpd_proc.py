# SPDX-License-Identifier: Apache-2.0
"""The preamble the agent suite's Python tests share (the Python side of udpd_proc.c): skip
(exit 77) without torch or without the tally-udpd binary meson names in TALLY_TEST_UDPD, put
gpu_agent/examples on the path (train.free_port_block), and run one tally-udpd on 127.0.0.1
for the length of a `with` block (its own control socket, never the default one)."""
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "gpu_agent", "examples")
sys.path.insert(0, EXAMPLES)


def need_torch():
    """torch, or exit 77 (skip) where this interpreter cannot import it."""
    try:
        import torch
    except ImportError:
        print("SKIP: torch not importable by", sys.executable)
        sys.exit(77)
    return torch


def need_udpd():
    """The tally-udpd binary, or exit 77 (skip) where it was not built."""
    udpd = os.environ.get("TALLY_TEST_UDPD")
    if not udpd or not os.path.exists(udpd):
        print("SKIP: TALLY_TEST_UDPD (tally-udpd) not built")
        sys.exit(77)
    return udpd


def free_tcp():
    """A TCP port free on 127.0.0.1 now (a torch store's MASTER_PORT)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


# The appliance's --drain-timeout-ms here, and how much longer `running` waits for its exit
# after SIGTERM before it kills it with -9 (a loaded 2-core host: the drain, then the exit).
DRAIN_MS = 2000
EXIT_SLACK_S = 30


def udp_bound(port):
    """Whether something listens on UDP 127.0.0.1:port (read from /proc/net/udp: no bind)."""
    want = f"0100007F:{port:04X}"
    try:
        with open("/proc/net/udp") as f:
            return any(line.split()[1] == want for line in list(f)[1:] if len(line.split()) > 1)
    except OSError:
        return False


@contextlib.contextmanager
def running(port, *args, settle=0.5, quiet=True):
    """tally-udpd on 127.0.0.1:port with args, until it has bound the port (at least `settle`
    s); SIGTERM on exit, waited for past its drain, kill -9 after. Unless args say otherwise:
    a private control socket (never the default /run/tally/tallyd.sock, a real appliance's),
    --mem 128M per core (meson sets MALLOC_PERTURB_, so glibc fills the whole key arena: the
    default 1G per core took 10 s and 2.2 GB to start on a loaded 2-core host) and a 2 s drain."""
    extra = []
    tmp = None
    if "--ctl-socket" not in args and "--control" not in args:
        tmp = tempfile.mkdtemp(prefix="tally-agent-test.")
        extra += ["--ctl-socket", os.path.join(tmp, "ctl.sock")]
    if "--mem" not in args:
        extra += ["--mem", "128M"]
    drain_ms = DRAIN_MS
    if "--drain-timeout-ms" in args:
        drain_ms = int(args[list(args).index("--drain-timeout-ms") + 1])
    else:
        extra += ["--drain-timeout-ms", str(DRAIN_MS)]
    appl = subprocess.Popen([need_udpd(), "--addr", "127.0.0.1", "--port", str(port), *args, *extra],
                            stdout=subprocess.DEVNULL if quiet else None)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 60 and appl.poll() is None and not udp_bound(port):
        time.sleep(0.05)
    time.sleep(max(0.0, settle - (time.monotonic() - t0)))
    try:
        yield appl
    finally:
        appl.send_signal(signal.SIGTERM)
        try:
            appl.wait(drain_ms / 1000 + EXIT_SLACK_S)
        except subprocess.TimeoutExpired:
            print(f"udpd_proc: tally-udpd {appl.pid} still running {drain_ms / 1000 + EXIT_SLACK_S:.0f} s "
                  "after SIGTERM: kill -9", file=sys.stderr)
            appl.kill()
            appl.wait(30)
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
