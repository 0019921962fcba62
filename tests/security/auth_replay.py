#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""auth_replay.py — record a keyed job's signed packets in one run, replay them into a later
run of the same job (same id, token, key): the attacker of auth_replay.sh (suite 'security',
issue 33). Needs root (a packet socket on lo to record; a raw socket to send the
appliance->worker packets from the appliance's address): exits 77 without.

  record --port P --cores N --job J --out FILE        until SIGTERM; FILE: one JSON list
  replay --in FILE --port P --cores N --job J [--workers JSON] [--ops OPS] [--times K]
      appliance-bound packets from our own socket to port + core (as recorded);
      worker-bound ones (with --workers: tallyctl --json workers) spoofed from the
      appliance's core port to the rank's current address on that core.
      Prints {"sent": {"<dir>_<op>": n}, "to_rank": {rank: n}}.
"""
import argparse
import base64
import json
import os
import signal
import socket
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from auth_attack import Sender  # noqa: E402

F_AUTH = 0x80
OPS = {1: "join", 2: "join_ok", 3: "register", 4: "push", 5: "result", 6: "pull",
       7: "error", 8: "bye", 9: "held", 10: "ping", 11: "gone"}
ETH_P_ALL = 3
PACKET_OUTGOING = 4


def parse(frame, port, cores):
    """(src, dst, payload) of a Tally UDP datagram to or from the appliance's ports."""
    if len(frame) < 14 + 20 + 8 or frame[12:14] != b"\x08\x00":
        return None
    ip = frame[14:]
    ihl = (ip[0] & 15) * 4
    if ip[9] != 17:
        return None
    sport, dport, ulen = struct.unpack("!HHH", ip[ihl:ihl + 6])
    data = ip[ihl + 8:ihl + ulen]
    ports = range(port, port + cores)
    if sport not in ports and dport not in ports:
        return None
    src = (socket.inet_ntoa(ip[12:16]), sport)
    dst = (socket.inet_ntoa(ip[16:20]), dport)
    return src, dst, data


def record(a):
    try:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        s.bind(("lo", 0))
    except PermissionError:
        print("auth_replay.py: recording needs root (a packet socket on lo)", file=sys.stderr)
        return 77
    # python reads slower than a run sends: a deep buffer (root: beyond rmem_max)
    s.setsockopt(socket.SOL_SOCKET, 33, 256 << 20)  # SO_RCVBUFFORCE
    s.settimeout(0.2)
    open(a.out + ".ready", "w").close()
    got = []
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    import time
    while True:
        if stop:  # drain what is queued (lo carries others' traffic too: 1 s at most)
            if len(stop) == 1:
                stop.append(time.monotonic() + 1.0)
            if time.monotonic() > stop[1]:
                break
            s.settimeout(0.05)
        try:
            frame, addr = s.recvfrom(65535)
        except socket.timeout:
            if stop:
                break
            continue
        except InterruptedError:
            continue
        if addr[2] != PACKET_OUTGOING:  # lo shows each datagram twice
            continue
        p = parse(frame, a.port, a.cores)
        if not p:
            continue
        src, dst, data = p
        if len(data) < 64 or struct.unpack_from("<I", data, 8)[0] != a.job:
            continue
        if not struct.unpack_from("<H", data, 6)[0] & F_AUTH:
            continue
        to_app = a.port <= dst[1] < a.port + a.cores
        got.append({"to_app": to_app, "core": (dst[1] if to_app else src[1]) - a.port,
                    "data": base64.b64encode(data).decode()})
    with open(a.out, "w") as f:
        json.dump(got, f)
    return 0


def replay(a):
    with open(a.inp) as f:
        recs = json.load(f)
    addr_of = {}
    if a.workers:
        with open(a.workers) as f:
            ws = json.load(f)
        addr_of = {(w["rank"], w["core"]): (w["addr"].rsplit(":", 1)[0],
                                            int(w["addr"].rsplit(":", 1)[1]))
                   for w in ws if w.get("job_id") == a.job}
    ops = set(a.ops.split(",")) if a.ops else None
    s = Sender()
    if s.raw is None and addr_of:
        print("auth_replay.py: spoofing the appliance needs root (raw socket)", file=sys.stderr)
        return 77
    sent, to_rank = {}, {}
    for _ in range(a.times):
        for r in recs:
            data = base64.b64decode(r["data"])
            op = OPS.get(data[5], str(data[5]))
            rank = struct.unpack_from("<I", data, 12)[0]
            name = ("app_" if r["to_app"] else "wk_") + op
            if ops is not None and op not in ops:
                continue
            app = (a.ip, a.port + r["core"])
            if r["to_app"]:
                s.send(data, (None, None), app)
            else:
                dst = addr_of.get((rank, r["core"]))
                if dst is None:
                    continue
                s.send(data, app, dst)
                to_rank[rank] = to_rank.get(rank, 0) + 1
            sent[name] = sent.get(name, 0) + 1
    print(json.dumps({"sent": sent, "to_rank": to_rank, "recorded": len(recs)}))
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["record", "replay"])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--job", type=int, required=True)
    ap.add_argument("--ip", default="127.0.0.1")
    ap.add_argument("--out")
    ap.add_argument("--in", dest="inp")
    ap.add_argument("--workers")
    ap.add_argument("--ops", help="only these ops (join,push,...)")
    ap.add_argument("--times", type=int, default=1)
    a = ap.parse_args()
    return record(a) if a.mode == "record" else replay(a)


if __name__ == "__main__":
    sys.exit(main())
