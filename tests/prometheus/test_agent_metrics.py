#!/usr/bin/env python3
"""tally.metrics: the push_pull histogram and agent counters in Prometheus text, served by
start_http_server on localhost. With a built libtally_agent and tally-udpd (TALLY_TEST_UDPD)
a real one-rank agent pushes through the DDP hook's completion path (tally.torch._Inflight,
when torch is installed) and its retransmits/push_pulls appear; otherwise a stand-in agent.
promtool checks the text when it is installed."""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import prom_lint  # noqa: E402


def lint_ok(text, expect):
    errs = prom_lint.lint(text, expect)
    # the agent's metrics are tally_agent_*; histograms' _bucket/_sum/_count series belong
    # to their family
    errs = [e for e in errs if "has no HELP/TYPE" not in e or "_duration_seconds_" not in e]
    assert not errs, errs
    if shutil.which("promtool"):
        r = subprocess.run(["promtool", "check", "metrics"], input=text.encode(), capture_output=True)
        assert r.returncode == 0, r.stdout + r.stderr


def free_udp_ports(n):
    import random
    for _ in range(200):
        base = random.randint(20000, 60000)
        socks = []
        try:
            for p in range(base, base + n):
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                s.bind(("127.0.0.1", p))
                socks.append(s)
            return base
        except OSError:
            pass
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free ports")


def real_agent(m):
    """A one-rank agent against tally-udpd; returns how many push_pulls it completed."""
    udpd = os.environ.get("TALLY_TEST_UDPD")
    if not udpd or not os.access(udpd, os.X_OK):
        return None
    try:
        import tally
    except ImportError as e:
        print(f"no libtally_agent ({e}): stand-in agent only")
        return None
    port = free_udp_ports(1)
    tmp = tempfile.mkdtemp(prefix="tly-aggm.")
    appl = subprocess.Popen([udpd, "--ip", "127.0.0.1", "--base-port", str(port), "--cores", "1",
                             "--mem", "64M", "--open-admission", "--ctl-socket", tmp + "/ctl.sock"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        a = tally.Agent(appliances=f"127.0.0.1:{port}", job_id=5, token=77, rank=0, world_size=1,
                        connect_timeout_ms=5000)
        m.track(a)
        n = 0
        try:
            import torch
            import tally.torch as tt
        except ImportError:
            torch = None
        if torch is not None:   # the DDP hook's completion path
            inf = tt._Inflight(a)
            tid = a.declare("metrics.probe", 4096 * 4, "f32")
            t = torch.ones(4096)
            done = threading.Event()
            for _ in range(3):
                done.clear()
                inf.start(tid, t, lambda err: done.set())
                assert done.wait(10), "push_pull did not complete"
                n += 1
        else:
            import ctypes
            buf = (ctypes.c_float * 1024)()
            tid = a.declare("metrics.probe", 4096, "f32")
            for _ in range(3):
                a.wait(a.push_pull(tid, ctypes.addressof(buf), 4096))
                m.observe_push_pull(0.001)
                n += 1
        return n, a
    finally:
        appl.terminate()
        appl.wait(5)
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    os.environ.setdefault("RANK", "0")
    os.environ["TALLY_JOB_ID"] = "5"
    from tally import metrics as m
    got = real_agent(m)
    if got is None:
        class Stand:
            def stats(self):
                return {"push_pulls": 3, "retransmits": 2, "max_inflight_bytes": 4096, "a_new_one": 1}
        m.track(Stand())
        for v in (0.0004, 0.002, 0.3):
            m.observe_push_pull(v)
        n = 3
    else:
        n = got[0]
    srv = m.start_http_server(0)
    port = srv.server_address[1]
    assert srv.server_address[0] == "127.0.0.1"
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    assert text == m.render() or "tally_agent_push_pull_duration_seconds_count" in text
    lint_ok(text, ["tally_agent_push_pull_duration_seconds", "tally_agent_retransmits_total",
                   "tally_agent_push_pulls_total", "tally_agent_push_pull_failures_total"])
    cnt = [l for l in text.splitlines() if l.startswith("tally_agent_push_pull_duration_seconds_count")]
    assert cnt and int(cnt[0].split()[-1]) >= n, cnt
    assert 'le="+Inf"' in text and 'rank="0",job_id="5"' in text
    pp = [l for l in text.splitlines() if l.startswith("tally_agent_push_pulls_total")]
    assert int(pp[0].split()[-1]) >= n, pp
    if got is not None:  # the real agent: its failover counter and its appliance's liveness
        lint_ok(text, ["tally_agent_failovers_total", "tally_agent_appliance_up"])
        fo = [l for l in text.splitlines() if l.startswith("tally_agent_failovers_total")]
        assert fo and fo[0].split()[-1] == "0", fo
        up = [l for l in text.splitlines() if l.startswith("tally_agent_appliance_up{")]
        assert up and 'appliance="0",state="up"' in up[0] and up[0].endswith(" 1"), up
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/nope", timeout=5)
        raise AssertionError("404 expected")
    except urllib.error.HTTPError as e:
        assert e.code == 404
    srv.shutdown()
    print(f"tally.metrics ok ({'real agent' if got else 'stand-in agent'}, {n} push_pulls):")
    print("\n".join(l for l in text.splitlines() if not l.startswith("#") and "_bucket" not in l))


if __name__ == "__main__":
    main()
