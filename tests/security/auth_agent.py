#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""auth_agent.py — the training side of authenticated packets: tally-udpd with job 11
admitted with a key (tallyctl job-add --key-file), two tally.Agent processes reading the key
from TALLY_AUTH_KEY_FILE push_pull a tensor over several rounds: the sums are exact
(integer-valued f32), every packet the appliance took was authenticated (no auth drops), and
an agent whose TALLY_AUTH_KEY_FILE holds another key, or that has none, fails at create with
a message naming TALLY_AUTH_KEY_FILE. Exit 77 without the binaries.
"""
import array
import json
import multiprocessing as mp
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

UDPD = os.environ.get("TALLY_TEST_UDPD")
CTL = os.environ.get("TALLY_TEST_CTL")
if not UDPD or not CTL or not os.path.exists(UDPD) or not os.path.exists(CTL):
    print("SKIP: TALLY_TEST_UDPD / TALLY_TEST_CTL not built")
    sys.exit(77)
import tally  # noqa: E402

N, ROUNDS, JOB, TOKEN = 300000, 5, 11, 4242


def free_port():
    for _ in range(100):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", 0))
        p = s.getsockname()[1]
        s.close()
        if p < 65000:
            t = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            try:
                t.bind(("127.0.0.1", p + 1))
                return p
            except OSError:
                pass
            finally:
                t.close()
    raise SystemExit("no free port pair")


def worker(rank, env, q):
    os.environ.update(env)
    try:
        a = tally.Agent(rank=rank, world_size=2, average=0)
        t = a.declare("w", N * 4)
        for r in range(ROUNDS):
            x = array.array("f", [float(rank + 1 + r)]) * N
            a.wait(a.push_pull(t, x.buffer_info()[0], N * 4))
            want = float(1 + r) + float(2 + r)
            if x.count(want) != N:
                q.put((rank, f"round {r}: got {x[:3].tolist()}, want {want}"))
                return
        a.close()
        q.put((rank, None))
    except Exception as e:  # reported to the parent
        q.put((rank, f"{type(e).__name__}: {e}"))


def agent_error(env):
    q = mp.Queue()
    p = mp.Process(target=worker, args=(0, env, q))
    p.start()
    p.join(60)
    return q.get(timeout=5)[1]


def main():
    tmp = tempfile.mkdtemp(prefix="tally-auth-agent.")
    key, wrong, sock = f"{tmp}/key", f"{tmp}/wrong", f"{tmp}/ctl.sock"
    for path in (key, wrong):
        with open(path, "w") as f:
            f.write(os.urandom(32).hex() + "\n")
        os.chmod(path, 0o600)
    port = free_port()
    app = subprocess.Popen([UDPD, "--addr", "127.0.0.1", "--port", str(port), "--cores", "2",
                            "--max-jobs", "4", "--mem", "64M", "--ctl-socket", sock],
                           stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(100):
            if os.path.exists(sock):
                break
            time.sleep(0.1)
        subprocess.run([CTL, "--socket", sock, "job-add", str(JOB), "--token", str(TOKEN),
                        "--world-size", "2", "--key-file", key], check=True,
                       stdout=subprocess.DEVNULL)
        env = {"TALLY_APPLIANCES": f"127.0.0.1:{port}", "TALLY_JOB_ID": str(JOB),
               "TALLY_TOKEN": str(TOKEN), "TALLY_AUTH_KEY_FILE": key,
               "TALLY_CONNECT_TIMEOUT_MS": "20000"}
        # 1. wrong key, no key: a clear error at create (JOIN), naming the variable
        e = agent_error(dict(env, TALLY_AUTH_KEY_FILE=wrong))
        assert e and "bad_mac" in e and "TALLY_AUTH_KEY_FILE" in e, f"wrong key: {e}"
        print(f"ok 1 - wrong key: {e}")
        e = agent_error(dict(env, TALLY_AUTH_KEY_FILE=""))
        assert e and "auth_required" in e and "TALLY_AUTH_KEY_FILE" in e, f"no key: {e}"
        print(f"ok 2 - no key: {e}")
        e = agent_error(dict(env, TALLY_AUTH_KEY_FILE=f"{tmp}/missing"))
        assert e and "TALLY_AUTH_KEY_FILE" in e and "cannot read" in e, f"missing file: {e}"
        print(f"ok 3 - missing key file: {e}")
        # 2. two authenticated agents: exact sums
        q = mp.Queue()
        ps = [mp.Process(target=worker, args=(r, env, q)) for r in range(2)]
        for p in ps:
            p.start()
        res = dict(q.get(timeout=120) for _ in ps)
        for p in ps:
            p.join(30)
        assert res == {0: None, 1: None}, res
        out = subprocess.run([CTL, "--socket", sock, "--json", "stats"], check=True,
                             capture_output=True, text=True).stdout
        drops = {k: v for k, v in json.loads(out)["totals"]["drops"].items() if v}
        # the refused JOINs of step 1, nothing else: the keyless one once; the wrong key's
        # JOIN is re-sent while it waits TALLY_CLIENT_UNSIGNED_GRACE_MS for a signed answer
        assert drops.get("bad_mac", 0) >= 1 and drops.get("auth_required", 0) == 1, drops
        assert set(drops) <= {"bad_mac", "auth_required"}, drops
        print(f"ok 4 - two agents with the key: {ROUNDS} rounds exact; drops {drops}")
    finally:
        app.terminate()
        app.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
