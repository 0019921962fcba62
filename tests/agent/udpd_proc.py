# SPDX-License-Identifier: Apache-2.0
"""The preamble the agent suite's Python tests share (the Python side of udpd_proc.c): skip
(exit 77) without torch or without the tally-udpd binary meson names in TALLY_TEST_UDPD, put
gpu_agent/examples on the path (train.free_port_block), and run one tally-udpd on 127.0.0.1
for the length of a `with` block."""
import contextlib
import os
import signal
import socket
import subprocess
import sys
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


@contextlib.contextmanager
def running(port, *args, settle=0.5, quiet=True):
    """tally-udpd on 127.0.0.1:port with args, `settle` s to bind; SIGTERM and reaped on exit."""
    appl = subprocess.Popen([need_udpd(), "--addr", "127.0.0.1", "--port", str(port), *args],
                            stdout=subprocess.DEVNULL if quiet else None)
    time.sleep(settle)
    try:
        yield appl
    finally:
        appl.send_signal(signal.SIGTERM)
        appl.wait(10)
