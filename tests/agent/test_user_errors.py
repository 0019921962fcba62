#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The texts of the errors a PyTorch user meets first, against a real appliance (tally-udpd
admitting job 5, token 77, world 2), each checked for the cause and the fix it names:
  - a job never admitted: "has no job 6: not admitted (admit it: tallyctl job-add ..." (EPERM),
    not "token mismatch";
  - a wrong token: "wrong token (TALLY_TOKEN differs ..." (EACCES);
  - another world size under the same job id: "the job has another world size than 3
    (WORLD_SIZE changed: ..." (ERANGE);
  - ranks that declared different tensors: "key_conflict (ranks declared different tensors";
  - a name reused for another size: "tensor 'x' changed shape: declared 16 bytes";
  - a push_pull of another size: "tensor 'x' shape changed between iterations";
  - nothing listening at the address (the appliance stopped): "nothing listens at
    127.0.0.1:PORT" (ECONNREFUSED, from the ICMP port unreachable) within 2 s (0.2 s here), not at
    the 10 s connect timeout; a port where a socket is bound but nothing answers still
    times out ("unreachable: no answer to JOIN after 500 ms"): only the ICMP fails it early.
These are the rows of README.md's common errors. Exit 77 (skip) without the appliance.
"""
import ctypes
import errno
import os
import socket
import sys
import time

import udpd_proc

udpd_proc.need_udpd()
import train  # noqa: E402  free_port_block

for k in ("TALLY_JOB_ID", "TALLY_TOKEN", "RANK", "WORLD_SIZE", "TORCHELASTIC_RUN_ID"):
    os.environ.pop(k, None)
import tally  # noqa: E402


def check(ok, what):
    print(f"{'ok  ' if ok else 'FAIL'} {what}", flush=True)
    return 0 if ok else 1


def refused(port, want_errno, want, **kw):
    kw.setdefault("connect_timeout_ms", 3000)
    try:
        a = tally.Agent(appliances=f"127.0.0.1:{port}", **kw)
        a.close()
        return check(False, f"{kw}: accepted")
    except tally.TallyError as e:
        return check(e.errno == want_errno and all(w in str(e) for w in want),
                     f"{errno.errorcode.get(e.errno)}: {e}")


def not_listening(port):
    """The appliance's port with nothing bound: the JOIN fails at the first ICMP port
    unreachable (plus the client's 200 ms grace), not at connect_timeout_ms."""
    mult = float(os.environ.get("TALLY_TIMEOUT_MULTIPLIER", "1") or 1)
    t0 = time.monotonic()
    try:
        tally.Agent(appliances=f"127.0.0.1:{port}", connect_timeout_ms=10000, job_id=5,
                    token=77, rank=0, world_size=2).close()
        return check(False, "nothing listening: accepted")
    except tally.TallyError as e:
        dt = time.monotonic() - t0
        return check(e.errno == errno.ECONNREFUSED and dt < 2.0 * mult and
                     f"nothing listens at 127.0.0.1:{port}" in str(e) and
                     "start the appliance" in str(e),
                     f"nothing listening, failed after {dt:.2f} s (bound {2 * mult:.0f} s, timeout 10 s): {e}")


def silent(port):
    """A socket bound there that never answers: no ICMP, so the connect timeout stands."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind(("127.0.0.1", port))
        return refused(port, errno.ETIMEDOUT, ["unreachable: no answer to JOIN after 500 ms",
                                               f"127.0.0.1:{port}"],
                       job_id=5, token=77, rank=0, world_size=2, connect_timeout_ms=500)
    finally:
        s.close()


def main():
    failed = 0
    port = train.free_port_block(1)
    sock = f"/tmp/tally-test-user-errors-{os.getpid()}.sock"
    try:
        with udpd_proc.running(port, "--cores", "1", "--job", "5", "--no-auth", "--token", "77", "--world", "2",
                               "--ctl-socket", sock):
            failed += refused(port, errno.EPERM, ["has no job 6: not admitted", "tallyctl job-add"],
                              job_id=6, token=77, rank=0, world_size=2)
            failed += refused(port, errno.EACCES, ["refused job 5: wrong token", "TALLY_TOKEN"],
                              job_id=5, token=78, rank=0, world_size=2)
            failed += refused(port, errno.ERANGE, ["another world size than 3", "WORLD_SIZE changed"],
                              job_id=5, token=77, rank=0, world_size=3)
            a0 = tally.Agent(appliances=f"127.0.0.1:{port}", job_id=5, token=77, rank=0, world_size=2)
            a1 = tally.Agent(appliances=f"127.0.0.1:{port}", job_id=5, token=77, rank=1, world_size=2)
            a0.declare("a", 16, "f32")
            try:
                a1.declare("b", 32, "f32")
                failed += check(False, "different tensors on two ranks: accepted")
            except tally.TallyError as e:
                failed += check("key_conflict (ranks declared different tensors" in str(e), f"key conflict: {e}")
            t = a0.declare("x", 16, "f32")
            try:
                a0.declare("x", 32, "f32")
                failed += check(False, "a name declared again with another size: accepted")
            except tally.TallyError as e:
                failed += check("tensor 'x' changed shape: declared 16 bytes" in str(e), f"redeclared: {e}")
            buf = (ctypes.c_float * 8)()
            try:
                a0.push_pull(t, ctypes.addressof(buf), 32)
                failed += check(False, "a push_pull of another size: accepted")
            except tally.TallyError as e:
                failed += check("tensor 'x' shape changed between iterations" in str(e), f"push_pull size: {e}")
            a0.close()
            a1.close()
        failed += not_listening(port)  # the appliance has stopped: its port is free
        failed += silent(port)
    finally:
        try:
            os.unlink(sock)
        except OSError:
            pass
    print(f"{failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
