#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The PyTorch path through the loss of one of two appliances: gpu_agent/examples/train.py
(torchrun, 4 workers, the DDP hook) with TALLY_APPLIANCES listing two tally-udpd processes,
deterministic mode (TALLY_DETERMINISTIC=1, --det-pool on both), once undisturbed and once
with appliance 1 killed (-9, no restart) while gradients flow through it.

Pass: the disturbed run finishes every step and its final parameters and per-step losses
(rank 0's dump) are bit-identical to the undisturbed run's; the workers counted the
failover (agent counters in the dump). Exit 77 (skip) when torch or sklearn is missing.
  test_failover_torch.py TALLY_UDPD TALLYCTL"""
import ast
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
    print(f"SKIP: {e} (needs Debian's python3-torch and python3-sklearn under /usr/bin/python3)")
    sys.exit(77)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TRAIN = os.path.join(ROOT, "gpu_agent", "examples", "train.py")
sys.path.insert(0, os.path.dirname(TRAIN))
import train as launcher  # noqa: E402  (free_port_block)
UDPD, TALLYCTL = sys.argv[1], sys.argv[2]
EPOCHS = os.environ.get("TALLY_TEST_EPOCHS", "6")
TOKEN = "4242"


def start_udpd(tmp, idx):
    port = launcher.free_port_block(2)
    sock = os.path.join(tmp, f"ctl{idx}.sock")
    log = open(os.path.join(tmp, f"udpd{idx}.log"), "w")
    p = subprocess.Popen([UDPD, "--addr", "127.0.0.1", "--port", str(port), "--cores", "2", "--job", "1",
                          "--no-auth", "--token", TOKEN, "--world", "4", "--det-pool", "64M", "--mem", "256M",
                          "--ctl-socket", sock], stdout=log, stderr=subprocess.STDOUT)
    for _ in range(200):
        if os.path.exists(sock):
            return p, port, sock
        time.sleep(0.05)
    raise SystemExit(f"FAIL: tally-udpd {idx} did not start")


def pushes(sock):
    out = subprocess.run([TALLYCTL, "--socket", sock, "--json", "stats"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True).stdout
    try:
        return json.loads(out)["totals"]["pushes"]
    except (ValueError, KeyError, TypeError):
        return 0


def run(tag, tmp, kill_at=None):
    procs = [start_udpd(tmp, 2 * (tag == "kill") + i) for i in range(2)]
    dump = os.path.join(tmp, tag + ".json")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(ROOT, "gpu_agent", "python")
    env["TALLY_APPLIANCES"] = ",".join(f"127.0.0.1:{port}" for _, port, _ in procs)
    env["TALLY_JOB_ID"] = "1"
    env["TALLY_TOKEN"] = TOKEN
    env["TALLY_DETERMINISTIC"] = "1"
    env["TALLY_PARTITION_BYTES"] = "8192"  # the model's 68 KB bucket spans both appliances
    cmd = [sys.executable, TRAIN, "--workers", "4", "--epochs", EPOCHS, "--seed", "3", "--dump", dump]
    print(f"== {tag}: TALLY_APPLIANCES={env['TALLY_APPLIANCES']} {' '.join(cmd[1:])}", flush=True)
    out = open(os.path.join(tmp, tag + ".log"), "w")
    t = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
    before = 0
    try:
        if kill_at is not None:
            while t.poll() is None:
                before = pushes(procs[1][2])
                if before >= kill_at:
                    procs[1][0].send_signal(signal.SIGKILL)
                    print(f"   kill -9 appliance 1 after {before} pushes reached it", flush=True)
                    break
                time.sleep(0.05)
        rc = t.wait(timeout=600)
        after = [pushes(sock) for _, _, sock in procs]
    finally:
        for p, _, _ in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
    out.close()
    text = open(out.name).read()
    for line in text.splitlines():
        if line.startswith(("epoch", "agent counters", "Traceback", "RuntimeError")) or "Error" in line:
            print("   ", line)
    if rc != 0:
        print(text[-4000:])
        raise SystemExit(f"FAIL: {tag} run exited with {rc}")
    with open(dump) as f:
        d = json.load(f)
    d["appl_pushes"] = after
    d["agent"] = {}
    for line in text.splitlines():
        if line.startswith("agent counters (rank 0): "):
            d["agent"] = ast.literal_eval(line.split(": ", 1)[1])
    d["appl1_pushes_at_kill"] = before
    return d


def main():
    with tempfile.TemporaryDirectory(prefix="tally-fo-torch-") as tmp:
        ref = run("undisturbed", tmp)
        print(f"   the appliances took {ref['appl_pushes']} pushes", flush=True)
        if ref["appl_pushes"][1] == 0:
            raise SystemExit("FAIL: no key on appliance 1 in the undisturbed run")
        # kill once appliance 1 has seen about a third of what a whole run sends it
        kill = run("kill", tmp, kill_at=max(1, ref["appl_pushes"][1] // 3))
    same_p = ref["params"] == kill["params"]
    same_l = ref["losses"] == kill["losses"]
    print(f"steps {kill['steps']} vs {ref['steps']}; final parameters bit-identical: {same_p}; "
          f"losses bit-identical: {same_l}; survivor took {kill['appl_pushes'][0]} pushes "
          f"(undisturbed {ref['appl_pushes'][0]}); agent counters (rank 0): {kill.get('agent')}")
    ok = same_p and same_l and kill["steps"] == ref["steps"] and kill["appl1_pushes_at_kill"] > 0
    ok &= kill["agent"].get("failovers") == 1
    ok &= kill["appl_pushes"][0] > ref["appl_pushes"][0]  # the moved keys' rounds summed there
    print("ok" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
