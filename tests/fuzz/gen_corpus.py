#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/{proto,engine}/).

proto: valid packets of every op and a few malformed ones.
engine: command programs for fuzz_engine.c (see its cmd_packet() for the byte format):
whole jobs with JOIN, REGISTER, rounds of PUSHes in varied orders, duplicates, replays,
PULL, BYE, quorum, deadlines with clock ticks, deterministic keys, drain, policy, job
removal and open admission.
Run from anywhere: python3 tests/fuzz/gen_corpus.py
"""
import os
import random
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def packet(op, payload=b"", flags=0, job=7, rank=0, token=0x1122334455667788, key=0,
           rnd=0, offset=0, count=0, dtype=0, reason=0, contrib=0, aux=0):
    hdr = struct.pack("<IBBHIIQIIIIBBHIII8x", 0x31594C54, 1, op, flags, job, rank, token,
                      key, rnd, offset, count, dtype, reason, contrib, len(payload),
                      crc32c(payload) if payload else 0, aux)
    assert len(hdr) == 64
    return hdr + payload


def proto_corpus():
    out = {}
    out["join"] = packet(1, struct.pack("<IIIIQ", 4, 3, 8192, 0, 7), rank=2)
    out["join_ok"] = packet(2, struct.pack("<HHIII", 9170, 4, 8192, 3, 4))
    out["register"] = packet(3, struct.pack("<IIBBHHHI12x", 1000, 256, 0, 0, 1, 4, 3, 500),
                             key=9)
    out["register_ack"] = packet(3, struct.pack("<IIBBHHHI12x", 10, 10, 1, 0, 0, 2, 2, 0),
                                 flags=1)
    out["push_f32"] = packet(4, struct.pack("<8f", *range(8)), count=8, offset=16, rnd=3)
    out["push_f16"] = packet(4, bytes(range(32)), count=16, dtype=1)
    out["push_i32"] = packet(4, struct.pack("<4i", -1, 2, -3, 4), count=4, dtype=3)
    out["result"] = packet(5, struct.pack("<4f", 1, 2, 3, 4), count=4, flags=3, contrib=4)
    # one-bit (compression 1): REGISTER, PUSH and RESULT of [f32 scale][ceil(n/8) bytes]
    out["register_onebit"] = packet(3, struct.pack("<IIBBHHHI12x", 1000, 512, 0, 1, 0, 4, 4, 0),
                                    key=11)
    out["push_onebit"] = packet(4, struct.pack("<f", 0.25) + bytes([0xA5, 0x3C, 0x01]), count=17,
                                flags=0x40, key=11)
    out["result_onebit"] = packet(5, struct.pack("<f", 0.5) + bytes(range(64)), count=512,
                                  flags=0x43, contrib=4, key=11)
    out["pull"] = packet(6, key=3, rnd=2, offset=128)
    out["error"] = packet(7, reason=20, aux=4)
    out["bye"] = packet(8, rank=5)
    # HELD (op 9): a range of whole chunks, header only; MISSING (8) or RESEND (4) flags
    out["held"] = packet(9, key=3, rnd=2, offset=256, count=768)
    out["held_missing"] = packet(9, key=3, rnd=2, offset=128, count=128, flags=8, reason=19)
    out["held_resend"] = packet(9, key=3, rnd=5, offset=0, count=64, flags=4, dtype=2)
    out["held_bad_flags"] = packet(9, key=3, offset=0, count=64, flags=12)
    # HELD+DONE (0x200): a probed chunk is complete, its RESULT went out; not with MISSING
    out["held_done"] = packet(9, key=3, rnd=2, offset=64, count=64, flags=0x200)
    out["held_done_missing"] = packet(9, key=3, offset=64, count=64, flags=0x208)
    out["pull_done"] = packet(6, key=3, rnd=2, offset=128, flags=0x200)
    out["held_zero_count"] = packet(9, key=3, offset=64, count=0)
    out["held_wraps"] = packet(9, key=3, offset=0xFFFFFF00, count=0x200)
    out["held_payload"] = packet(9, b"\x01\x02\x03\x04", key=3, count=4)
    out["result_last"] = packet(5, struct.pack("<2f", 1, 2), count=2, flags=3, contrib=2, aux=1)
    out["bad_crc"] = bytearray(out["push_f32"])
    out["bad_crc"][70] ^= 1
    out["truncated"] = out["join"][:40]
    return out


class Prog:
    def __init__(self, open_admission=0):
        self.b = bytearray([open_admission])

    def pkt(self, cmd, rank, sel=0, extra=b""):
        self.b += bytes([cmd, sel, rank]) + extra

    def join(self, rank, world=None):
        if world is None:
            self.pkt(1, rank, 0, struct.pack("<H", 8192))
        else:
            self.pkt(1, rank, 0x10, bytes([world]) + struct.pack("<H", 8192))

    def register(self, rank, key, nelems, chunk_half, dtype, parts, quorum, flags=0,
                 deadline10=0):
        self.pkt(2, rank, 0, bytes([key]) + struct.pack("<H", nelems) +
                 bytes([chunk_half, dtype, parts, quorum, flags, deadline10]))

    def push(self, rank, key, rnd, idx):
        self.pkt(3, rank, 0, bytes([key, rnd, idx]))

    def pull(self, rank, key, rnd, idx):
        self.pkt(4, rank, 0, bytes([key, rnd, idx]))

    def bye(self, rank):
        self.pkt(5, rank)

    def tick(self, n, big=0):
        self.b += bytes([6, n, big])

    def drain(self):
        self.b += bytes([7])

    def policy(self, key, q, dl10):
        self.b += bytes([8, key, q, dl10])

    def job(self, add):
        self.b += bytes([9, 0 if add else 1])

    def replay(self, slot):
        self.b += bytes([10, slot])


def engine_corpus():
    rng = random.Random(7)
    out = {}

    # All-reduce rounds, 4 of 6 ranks participate, f32, 3 chunks, random orders.
    p = Prog()
    for r in range(6):
        p.join(r)
    p.register(0, 0, 300, 64, 0, 4, 4)
    for rnd in range(4):
        for idx in range(3):
            ranks = list(range(4))
            rng.shuffle(ranks)
            for r in ranks:
                p.push(r, 0, rnd, idx)
            p.replay(rng.randrange(8))
    p.pull(1, 0, 3, 2)
    out["rounds_f32"] = bytes(p.b)

    # Quorum 3 of 4 with a straggler, f16, deadlines and ticks.
    p = Prog()
    for r in range(4):
        p.join(r)
    p.register(0, 1, 200, 100, 1, 4, 3, 0, 5)
    for rnd in range(3):
        for idx in range(2):
            for r in (0, 2, 1):
                p.push(r, 1, rnd, idx)
            p.push(3, 1, rnd, idx)
    p.register(1, 2, 50, 20, 2, 4, 4, 0, 10)
    p.push(0, 2, 0, 0)
    p.tick(20)
    p.push(1, 2, 0, 1)
    p.tick(200)
    p.push(2, 2, 0, 1)
    out["quorum_deadline"] = bytes(p.b)

    # Deterministic i32 and bf16 keys, duplicates, BYE and rejoin.
    p = Prog()
    for r in range(5):
        p.join(r)
    p.register(0, 3, 100, 32, 3, 5, 5, 1)
    p.register(0, 2, 64, 64, 2, 3, 3, 1)
    for rnd in range(2):
        for idx in range(2):
            for r in (4, 1, 3, 0, 2):
                p.push(r, 3, rnd, idx)
                p.replay(0)
        for r in (2, 0, 1):
            p.push(r, 2, rnd, 0)
    p.bye(4)
    p.push(4, 3, 2, 0)
    p.join(4)
    out["det_i32_bf16"] = bytes(p.b)

    # Drain, policy changes, job removal and re-add.
    p = Prog()
    for r in range(3):
        p.join(r)
    p.register(0, 0, 128, 64, 0, 3, 3)
    p.push(0, 0, 0, 0)
    p.drain()
    p.push(1, 0, 0, 0)
    p.push(2, 0, 0, 0)
    p.push(0, 0, 1, 0)
    p.drain()
    p.push(0, 0, 1, 0)
    p.policy(0, 1, 0)
    p.push(1, 0, 1, 1)
    p.job(False)
    p.push(2, 0, 1, 1)
    p.job(True)
    p.join(0)
    p.register(0, 0, 128, 64, 0, 1, 1)
    p.push(0, 0, 0, 0)
    out["drain_policy_remove"] = bytes(p.b)

    # Open admission: the first JOIN creates the job.
    p = Prog(open_admission=1)
    p.join(0, 3)
    p.join(1, 3)
    p.join(2, 4)
    p.register(1, 1, 10, 5, 0, 2, 2)
    p.push(0, 1, 0, 0)
    p.push(1, 1, 0, 0)
    p.push(1, 1, 0, 1)
    out["open_admission"] = bytes(p.b)

    # HELD, probes and MISSING: pushes that do not complete (HELD, coalesced), duplicates
    # of open chunks (HELD+RESEND), PULLs of open chunks with and without the sender's
    # push (HELD / MISSING), of rounds not started (MISSING, TOO_EARLY), of complete ones.
    p = Prog()
    for r in range(3):
        p.join(r)
    p.register(0, 0, 256, 32, 0, 3, 3)
    for idx in range(4):
        p.push(0, 0, 0, idx)
    p.tick(1)
    p.push(0, 0, 0, 1)
    p.pull(0, 0, 0, 2)
    p.pull(1, 0, 0, 2)
    p.pull(1, 0, 1, 0)
    p.pull(2, 0, 3, 0)
    for idx in range(4):
        p.push(1, 0, 0, idx)
        p.push(2, 0, 0, idx)
    p.pull(0, 0, 0, 3)
    p.push(0, 0, 1, 0)
    p.pull(1, 0, 1, 0)
    p.pull(0, 0, 1, 0)
    p.replay(1)
    out["held_probe_missing"] = bytes(p.b)
    return out


def auth_packet(op, payload=b"", flags=0, rank=0, key=1, count=0, nonce=0):
    """A TALLY_F_AUTH packet: header (crc 0), a zero auth block (a RESULT's is two-level,
    56 bytes), payload (proto seeds: the decoder does not check the tag)."""
    hdr = struct.pack("<IBBHIIQIIIIBBHIIIQ", 0x31594C54, 1, op, flags | 0x80, 7, rank,
                      0x1122334455667788, key, 0, 0, count, 0, 0, 0, len(payload), 0, 0, nonce)
    return hdr + bytes(56 if op == 5 else 28) + payload


def auth_proto_corpus():
    return {"push_auth": auth_packet(4, bytes(range(32)), count=8),
            "join_auth": auth_packet(1, struct.pack("<IIIIQ", 4, 4, 8192, 0, 0), nonce=99),
            "held_auth": auth_packet(9, flags=0x8, count=4),
            "result_auth": auth_packet(5, bytes(range(16)), count=4)}


def auth_corpus():
    """fuzz_auth.c inputs: op, flags, rank, key, round, offset, count, dtype, nonce,
    mutation position, xor, 4 spare bytes, then the payload."""
    rng = random.Random(14)

    def inp(op, flags=0, rank=0, key=0, rnd=0, off=0, count=0, dtype=0, nonce=0, pos=0,
            xor=1, payload=b""):
        return struct.pack("<BHBIIIHBQHB", op, flags, rank, key, rnd, off, count, dtype, nonce,
                           pos, xor) + bytes(4) + payload
    return {
        "join": inp(1, nonce=12345, payload=struct.pack("<IIIIQ", 4, 4, 8192, 0, 0), pos=60,
                    xor=0x80),
        "bye": inp(8, rank=1, nonce=12345, pos=56, xor=1),
        "push_f32": inp(4, rank=2, key=1, count=16, payload=bytes(rng.getrandbits(8)
                                                                   for _ in range(64)),
                        pos=100, xor=4),
        "push_tag": inp(4, key=1, count=8, payload=bytes(32), pos=80, xor=0xff),
        "pull": inp(6, rank=3, key=1, rnd=2, pos=8, xor=2),
        "register": inp(3, key=5, payload=struct.pack("<IIBBHHHI12x", 64, 16, 0, 0, 0, 4, 4, 0),
                        pos=92, xor=1),
        "held_flags": inp(9, flags=0x8, key=1, count=4, pos=64, xor=9),
        "result": inp(5, key=1, count=4, payload=bytes(16), pos=70, xor=3),
        "result_outer": inp(5, rank=1, key=1, count=4, payload=bytes(16), pos=110, xor=5),
    }


def write(sub, items):
    d = os.path.join(HERE, "corpus", sub)
    os.makedirs(d, exist_ok=True)
    for name, data in items.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(bytes(data))


if __name__ == "__main__":
    write("proto", proto_corpus())
    write("engine", engine_corpus())
    write("proto", auth_proto_corpus())
    write("auth", auth_corpus())
