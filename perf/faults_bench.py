#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""faults_bench.py - what an appliance restart costs a running job: tally-udpd on loopback,
W tally-worker processes (--events) running verified rounds; mid-run the appliance is
killed (-9) and, --down-ms later, a fresh one starts on the same address. Per run it prints

  detect  kill -> the first worker session noticed (state silent: probe_ms of silence while
          work was outstanding, then a PING); also when each went down (dead_ms), if it did
  rejoin  restart -> every worker had joined again (restart recognised by the new boot id or
          the ERROR to its PING, JOIN + REGISTER + re-push done)
  resume  restart -> every worker completed a round again
  verify  every worker finished all rounds with every sum checked (0 mismatches)

at the client's default settings (probe 200 ms, dead 1000 ms) unless --probe-ms/--dead-ms.
Goal (issue 13): detect <= 1 s, resume <= 3 s. Exit status 1 if any run is not verified.
usage: faults_bench.py [--bin BUILD] [--runs N] [--workers W] [--bytes SIZE] [--down-ms MS]
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "gpu_agent", "examples"))
import train as launcher  # noqa: E402  (free_port_block)


def start_udpd(o, port, tmp, tag):
    sock = os.path.join(tmp, f"ctl{tag}.sock")
    err = open(os.path.join(tmp, f"udpd{tag}.err"), "w")
    p = subprocess.Popen([os.path.join(o.bin, "appliance/udpd/tally-udpd"), "--addr", "127.0.0.1",
                          "--port", str(port), "--cores", "2", "--open", "--mem", "64M",
                          "--det-pool", "8M", "--ctl-socket", sock], stderr=err)
    for _ in range(300):
        if os.path.exists(sock):
            return p
        if p.poll() is not None:
            raise RuntimeError(f"tally-udpd exited {p.returncode}")
        time.sleep(0.01)
    raise RuntimeError("tally-udpd did not start")


def events(path):
    out, report = [], None
    for line in open(path):
        if line.startswith('{"ev"'):
            out.append(json.loads(line))
        elif line.startswith('{"mode"'):
            report = json.loads(line)
    return out, report


def one_run(o, run):
    tmp = tempfile.mkdtemp(prefix="tally-faults-bench.")
    port = launcher.free_port_block(2)
    app = start_udpd(o, port, tmp, "a")
    workers = []
    try:
        for r in range(o.workers):
            args = [os.path.join(o.bin, "perf/tally-worker"), "--host", "127.0.0.1", "--port",
                    str(port), "--job", "9", "--token", "5", "--rank", str(r), "--world",
                    str(o.workers), "--bytes", o.bytes, "--keys", "4", "--rounds",
                    str(o.rounds), "--json", "--events"]
            if o.deterministic:
                args.append("--deterministic")
            if o.probe_ms:
                args += ["--probe-ms", str(o.probe_ms)]
            if o.dead_ms:
                args += ["--dead-ms", str(o.dead_ms)]
            log = open(os.path.join(tmp, f"w{r}.log"), "w")
            workers.append(subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT))
        # mid-run: every worker has finished a few rounds
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            done = [sum(1 for e in events(os.path.join(tmp, f"w{r}.log"))[0] if e["ev"] == "round")
                    for r in range(o.workers)]
            if min(done) >= o.kill_after:
                break
            time.sleep(0.02)
        else:
            raise RuntimeError("the workers made no progress")
        t_kill = time.monotonic()
        app.send_signal(signal.SIGKILL)
        app.wait()
        time.sleep(o.down_ms / 1000)
        t_start = time.monotonic()
        app = start_udpd(o, port, tmp, "b")
        t_ready = time.monotonic()
        for w in workers:
            w.wait(timeout=120)
        res = {"run": run, "down_ms": o.down_ms, "start_ms": (t_ready - t_start) * 1000}
        det, down, rej, resume, ok = [], [], [], [], True
        for r in range(o.workers):
            evs, rep = events(os.path.join(tmp, f"w{r}.log"))
            ok &= bool(rep and rep["ok"] and rep["mismatches"] == 0 and rep["checked"] > 0
                       and rep["rounds"] == o.rounds and workers[r].returncode == 0)
            noticed = [e["t"] for e in evs if e["ev"] == "state" and e["state"] in ("silent", "down")
                       and e["t"] >= t_kill]
            det.append(min(noticed) - t_kill if noticed else None)
            d = [e["t"] for e in evs if e["ev"] == "state" and e["state"] == "down" and e["t"] >= t_kill]
            down.append(min(d) - t_kill if d else None)
            j = [e["t"] for e in evs if e["ev"] == "rejoined" and e["t"] >= t_start]
            rej.append(min(j) - t_start if j else None)
            rd = [e["t"] for e in evs if e["ev"] == "round" and e["t"] >= t_start]
            resume.append(min(rd) - t_start if rd else None)
        res.update(verified=ok, detect_s=det, down_s=down, rejoin_s=rej, resume_s=resume)
        return res
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.wait()
        if app.poll() is None:
            app.kill()
            app.wait()
        if not o.keep:
            subprocess.run(["rm", "-rf", tmp])
        else:
            print(f"logs: {tmp}", file=sys.stderr)


def fmt(v):
    return "-" if v is None else f"{v:.3f}"


def worst(vs):
    vs = [v for v in vs if v is not None]
    return max(vs) if vs else None


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.normpath(os.path.join(HERE, "..", "build")))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--bytes", default="1M")
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--kill-after", type=int, default=5, help="rounds done before the kill (5)")
    ap.add_argument("--down-ms", type=int, default=300, help="appliance down this long (300)")
    ap.add_argument("--probe-ms", type=int, default=0)
    ap.add_argument("--dead-ms", type=int, default=0)
    ap.add_argument("--deterministic", action="store_true")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the logs")
    o = ap.parse_args(argv)
    if o.runs < 1 or o.workers < 1 or o.rounds <= o.kill_after or o.down_ms < 0:
        ap.error("need --runs >= 1, --workers >= 1, --rounds > --kill-after, --down-ms >= 0")
    rows = []
    for run in range(1, o.runs + 1):
        r = one_run(o, run)
        rows.append(r)
        if o.json:
            print(json.dumps(r), flush=True)
        else:
            print(f"run {run}: detect {fmt(worst(r['detect_s']))} s (down at "
                  f"{fmt(worst(r['down_s']))} s), appliance down {o.down_ms} ms + start "
                  f"{r['start_ms']:.0f} ms, rejoin {fmt(worst(r['rejoin_s']))} s, resume "
                  f"{fmt(worst(r['resume_s']))} s after the restart, "
                  f"{'verified' if r['verified'] else 'NOT verified'}", flush=True)
    print(f"{o.runs} runs, {o.workers} workers x {o.bytes} x {o.rounds} rounds: detect (worst "
          f"worker) max {fmt(worst([worst(r['detect_s']) for r in rows]))} s, resume max "
          f"{fmt(worst([worst(r['resume_s']) for r in rows]))} s (goals: 1 s, 3 s)",
          file=sys.stderr if o.json else sys.stdout)
    return 0 if all(r["verified"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
