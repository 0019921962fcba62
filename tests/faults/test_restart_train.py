#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The PyTorch path trains through an appliance restart (suite 'faults'): two torchrun
workers (gpu_agent/examples/train.py, the DDP hook, deterministic sums: TALLY_DETERMINISTIC=1
and tally-udpd --det-pool) against a tally-udpd we start ourselves; once undisturbed, once
with the appliance killed (-9) when it has completed about 40% of the first run's chunks and
a fresh one started on the same address 0.3 s later.

Pass: the disturbed run exits 0, the fresh appliance saw the workers JOIN again and sum, and
rank 0's final parameters and per-step losses are bit-identical to the undisturbed run's.
Exit 77 (skip) without torch/sklearn or the binaries.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

try:
    import torch  # noqa: F401
    import sklearn  # noqa: F401
except ImportError as e:
    print(f"SKIP: {e} (needs Debian's python3-torch and python3-sklearn)")
    sys.exit(77)

UDPD, CTL = os.environ.get("TALLY_TEST_UDPD"), os.environ.get("TALLY_TEST_CTL")
if not UDPD or not os.path.exists(UDPD) or not CTL or not os.path.exists(CTL):
    print("SKIP: TALLY_TEST_UDPD / TALLY_TEST_CTL not built")
    sys.exit(77)
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TRAIN = os.path.join(ROOT, "gpu_agent", "examples", "train.py")
sys.path.insert(0, os.path.dirname(TRAIN))
import train as launcher  # noqa: E402  (free_port_block)
TOKEN = 0x5EED0003


def start_udpd(tmp, port, tag):
    sock = os.path.join(tmp, f"{tag}.sock")
    p = subprocess.Popen([UDPD, "--addr", "127.0.0.1", "--port", str(port), "--cores", "2", "--open",
                          "--det-pool", "64M", "--mem", "256M", "--ctl-socket", sock,
                          "--stats", os.path.join(tmp, f"{tag}.json")],
                         stderr=open(os.path.join(tmp, f"{tag}.err"), "w"))
    for _ in range(300):
        if os.path.exists(sock):
            return p, sock
        if p.poll() is not None:
            raise SystemExit(f"FAIL: tally-udpd exited {p.returncode}")
        time.sleep(0.01)
    raise SystemExit("FAIL: tally-udpd did not start")


def stop_udpd(p, tmp, tag):
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=30)
    with open(os.path.join(tmp, f"{tag}.json")) as f:
        return json.load(f)


def completions(sock):
    r = subprocess.run([CTL, "--socket", sock, "--json", "stats"], capture_output=True, text=True)
    if r.returncode:
        return 0
    s = json.loads(r.stdout)
    s = s.get("result", s)
    return int(s.get("totals", s).get("completions", 0))


def train(tmp, port, tag):
    env = dict(os.environ, TALLY_APPLIANCES=f"127.0.0.1:{port}", TALLY_JOB_ID="1",
               TALLY_TOKEN=str(TOKEN), TALLY_DETERMINISTIC="1")
    dump = os.path.join(tmp, f"{tag}.dump.json")
    cmd = [sys.executable, TRAIN, "--workers", "2", "--epochs", "2", "--seed", "3", "--deterministic",
           "--dump", dump]
    return subprocess.Popen(cmd, env=env, stdout=open(os.path.join(tmp, f"{tag}.log"), "w"),
                            stderr=subprocess.STDOUT), dump


def finish(p, tmp, tag, dump):
    rc = p.wait(timeout=400)
    if rc:
        print(open(os.path.join(tmp, f"{tag}.log")).read()[-4000:])
        raise SystemExit(f"FAIL: {tag} training exited {rc}")
    with open(dump) as f:
        return json.load(f)


def main():
    tmp = tempfile.mkdtemp(prefix="tally-restart-train.")
    port = launcher.free_port_block(2)
    # undisturbed
    app, _ = start_udpd(tmp, port, "a")
    t0 = time.monotonic()
    p, dump = train(tmp, port, "clean")
    ref = finish(p, tmp, "clean", dump)
    secs = time.monotonic() - t0
    total = stop_udpd(app, tmp, "a").get("completions", 0)
    print(f"undisturbed: {secs:.1f} s, {total} chunks completed, {len(ref['losses'])} steps")
    if total < 10:
        raise SystemExit("FAIL: the undisturbed run completed almost nothing")
    # kill -9 mid-training, restart on the same port
    app, sock = start_udpd(tmp, port, "b")
    p, dump = train(tmp, port, "restart")
    deadline = time.monotonic() + 300
    while completions(sock) < 0.4 * total:
        if p.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("FAIL: training ended (or stalled) before the kill")
        time.sleep(0.02)
    done_at_kill = completions(sock)
    app.send_signal(signal.SIGKILL)
    app.wait()
    time.sleep(0.3)
    app, sock = start_udpd(tmp, port, "c")
    got = finish(p, tmp, "restart", dump)
    st = stop_udpd(app, tmp, "c")
    print(f"restart: killed after {done_at_kill} chunks; the fresh appliance: joins {st.get('joins')}, "
          f"registers {st.get('registers')}, completions {st.get('completions')}, installs "
          f"{st.get('installs')}, pings {st.get('pings')}")
    for line in open(os.path.join(tmp, "restart.log")):
        if line.startswith(("epoch", "agent counters")):
            print("   ", line.rstrip())
    if not st.get("joins") or not st.get("completions"):
        raise SystemExit("FAIL: the workers never came back to the restarted appliance")
    if got["losses"] != ref["losses"]:
        raise SystemExit("FAIL: the per-step losses differ from the undisturbed run")
    if got["params"] != ref["params"]:
        n = sum(1 for a, b in zip(got["params"], ref["params"]) if a != b)
        raise SystemExit(f"FAIL: {n} final parameters differ from the undisturbed run")
    print(f"ok: {len(got['params'])} final parameters and {len(got['losses'])} losses bit-identical "
          "to the undisturbed run")
    subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
