#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""auth_attack.py — the attacker of the auth_* integration tests (suite 'security').

During a real authenticated run it sends crafted packets as a joined rank would, from the
rank's own address (raw socket, spoofed source; as root) or else from its own socket:
  push_plain    PUSH as rank 0, right token, no auth block      -> appliance auth_required
  push_forged   PUSH as rank 0 with TALLY_F_AUTH and a guessed tag  -> appliance bad_mac
  bye_forged    BYE as rank 1 with a guessed tag (would unbind it)  -> appliance bad_mac
  bye_plain     BYE as rank 1 without auth block                -> appliance auth_required
  result_plain  RESULT to rank 0 from the appliance's port, no tag  -> worker auth_required
  result_forged RESULT to rank 0 with a guessed tag             -> worker bad_mac
  join_plain    JOIN for rank 0 from our own socket, no tag     -> appliance auth_required
Prints one JSON object: what it sent and whether it could spoof source addresses.
  auth_attack.py --port P --workers JSON --job J --token T --seconds S [--cores N] [--ip A]
"""
import argparse
import json
import os
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz"))
from gen_corpus import crc32c  # noqa: E402  (the payload CRC of tally_proto.h)

F_AUTH = 0x80


def header(op, job, token, rank, key=0, rnd=0, offset=0, count=0, dtype=0, plen=0, flags=0,
           reserved=0):
    return struct.pack("<IBBHIIQIIIIBBHIIIQ", 0x31594C54, 1, op, flags, job, rank, token, key,
                       rnd, offset, count, dtype, 0, 0, plen, 0, 0, reserved)


def plain(op, job, token, rank, payload=b"", **kw):
    h = bytearray(header(op, job, token, rank, plen=len(payload), **kw))
    struct.pack_into("<I", h, 48, crc32c(payload) if payload else 0)
    return bytes(h) + payload


def forged(op, job, token, rank, payload=b"", **kw):
    h = header(op, job, token, rank, plen=len(payload), flags=F_AUTH, **kw)
    # a guessed IV and tag (a RESULT's block is two-level: inner and outer, 56 bytes)
    return h + os.urandom(56 if op == 5 else 28) + payload


class Sender:
    def __init__(self):
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self.raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        except PermissionError:
            self.raw = None

    def send(self, data, src, dst):
        """src, dst: (ip, port); src port None: from our own socket."""
        if self.raw is None or src[1] is None:
            self.udp.sendto(data, dst)
            return
        udp = struct.pack("!HHHH", src[1], dst[1], 8 + len(data), 0) + data
        iph = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0x4000, 64, 17, 0,
                          socket.inet_aton(src[0]), socket.inet_aton(dst[0]))
        self.raw.sendto(iph + udp, (dst[0], 0))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--workers", required=True, help="tallyctl workers --json output file")
    ap.add_argument("--job", type=int, required=True)
    ap.add_argument("--token", type=int, required=True)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--ip", default="127.0.0.1", help="the appliance's address")
    a = ap.parse_args()
    with open(a.workers) as f:
        ws = json.load(f)
    if isinstance(ws, dict):
        ws = ws.get("workers", ws.get("result", []))
    # each core binds a rank to the address it joined from (a socket per core)
    addr_of = {(w["rank"], w["core"]): (w["addr"].rsplit(":", 1)[0],
                                        int(w["addr"].rsplit(":", 1)[1]))
               for w in ws if w.get("job_id") == a.job}
    nobody = (None, None)
    s = Sender()
    sent = {k: 0 for k in ("push_plain", "push_forged", "bye_forged", "bye_plain",
                           "result_plain", "result_forged", "join_plain")}
    payload = struct.pack("<256f", *([1.0e6] * 256))
    join = struct.pack("<IIIIQ", 2, 0, 8192, 0, 0)
    end = time.time() + a.seconds
    while time.time() < end:
        for core in range(a.cores):
            dst = (a.ip, a.port + core)
            w0, w1 = addr_of.get((0, core), nobody), addr_of.get((1, core), nobody)
            for key in range(4):
                kw = dict(key=key, rnd=0, count=256, dtype=0)
                s.send(plain(4, a.job, a.token, 0, payload, **kw), w0, dst)
                sent["push_plain"] += 1
                s.send(forged(4, a.job, a.token, 0, payload, **kw), w0, dst)
                sent["push_forged"] += 1
            s.send(forged(8, a.job, a.token, 1), w1, dst)
            sent["bye_forged"] += 1
            s.send(plain(8, a.job, a.token, 1), w1, dst)
            sent["bye_plain"] += 1
            s.send(plain(1, a.job, a.token, 0, join), nobody, dst)
            sent["join_plain"] += 1
            if w0 != nobody:
                kw = dict(key=0, rnd=0, count=256, dtype=0)
                s.send(plain(5, a.job, a.token, 0, payload, **kw), dst, w0)
                sent["result_plain"] += 1
                s.send(forged(5, a.job, a.token, 0, payload, **kw), dst, w0)
                sent["result_forged"] += 1
        time.sleep(0.01)
    print(json.dumps({"spoofed_source": s.raw is not None, "bindings_seen": len(addr_of),
                      "sent": sent}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
