#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""onebit_ref.py LIB — the 1-bit compression reducers of libtally_sum against a NumPy
reference written from DeepSpeed's compressed_allreduce (1-bit Adam / 1-bit LAMB):

    buffer_m.add_(worker_error)                                  # c = x + e
    worker_scale = torch.norm(buffer_m) / np.sqrt(buffer_m.numel())
    worker_error.set_(buffer_m - worker_scale *
                      buffer_m.sign().add_(1).bool().float().add_(-0.5).mul_(2.0))
    signs = buffer_m.sign_().add_(1).bool()                      # packed, 1 = "+"
    # server: unpack every worker's signs * (scale_w / W), sum, add the server error,
    # then the same compression with the server's own scale and error

LIB is a shared build of libtally_sum (ctypes). Every reducer path of this CPU is checked on
one worker stage and one server stage (W = 4), for several n, data with ±0 and subnormals,
and for the sign rule on NaN/Inf. Bounds and why:
  * sign bits: exact (bit = c >= 0, -0 included; a NaN by its sign bit; packed LSB-first).
  * unpack / unpack-accumulate: exact (±scale, one f32 add).
  * scale: within 1 ULP of the f64 reference norm(c) / sqrt(n) rounded to f32. Both sum the
    exact f64 squares, in different orders (NumPy pairwise, the library 32 lanes + a fixed
    fold), so the f64 sums differ by a few 2^-53 relative at most; only the final rounding to
    f32 can then differ, by one unit. (DeepSpeed's own norm is f32 on the GPU, an error of
    many ULP for big n; printed for information, not asserted.)
  * error: exact given the library's scale (c - scale*sign(c) is one f32 rounding); against
    the reference's own scale within |scale - scale_ref| + 1 ULP of the error.
Exit 77 (skipped) without NumPy.
"""
import ctypes
import sys

try:
    import numpy as np
except ImportError:
    print("numpy missing: skipped")
    sys.exit(77)

F32P = ctypes.POINTER(ctypes.c_float)
U8P = ctypes.POINTER(ctypes.c_uint8)
ISAS = ["scalar", "avx2", "avx512"]


def load(path):
    lib = ctypes.CDLL(path)
    lib.tally_sum_set_isa.argtypes = [ctypes.c_int]
    lib.tally_sum_isa_supported.argtypes = [ctypes.c_int]
    lib.tally_sum_sign_pack.argtypes = [U8P, F32P, ctypes.c_size_t]
    lib.tally_sum_sign_unpack.argtypes = [F32P, U8P, ctypes.c_size_t, ctypes.c_float]
    lib.tally_sum_sign_unpack_acc.argtypes = [F32P, U8P, ctypes.c_size_t, ctypes.c_float]
    lib.tally_sum_onebit_compress.argtypes = [U8P, F32P, F32P, ctypes.c_size_t]
    lib.tally_sum_onebit_compress.restype = ctypes.c_float
    return lib


def ptr(a, t):
    return a.ctypes.data_as(t)


# ---- the reference ----
def ref_signs(c):
    """DeepSpeed's sign(c) + 1 as bool: c >= 0 (-0 too); a NaN by its sign bit (torch's
    sign(NaN) is NaN, which bool() makes True whatever its sign: the library decides by the
    sign bit instead, documented in tally_sum.h)."""
    return np.where(np.isnan(c), ~np.signbit(c), c >= 0)


def ref_pack(c):
    return np.packbits(ref_signs(c), bitorder="little")


def ref_unpack(bits, n, scale):
    s = np.unpackbits(bits, count=n, bitorder="little").astype(bool)
    return np.where(s, np.float32(scale), -np.float32(scale)).astype(np.float32)


def ref_scale(c):
    """||c||_2 / sqrt(n), the norm in f64, rounded to f32 once."""
    if c.size == 0:
        return np.float32(0)
    c64 = c.astype(np.float64)
    return np.float32(np.sqrt(np.sum(c64 * c64)) / np.sqrt(c.size))


def ref_error(c, scale):
    sgn = np.where(ref_signs(c), np.float32(1), np.float32(-1))
    return (c - np.float32(scale) * sgn).astype(np.float32)


def ref_compress(x, e):
    """One stage: returns (bits, scale, new error)."""
    c = (x + e).astype(np.float32)
    scale = ref_scale(c)
    return ref_pack(c), scale, ref_error(c, scale), c


# ---- the library ----
def lib_compress(lib, x, e):
    e = e.copy()
    bits = np.zeros((x.size + 7) // 8, np.uint8)
    scale = lib.tally_sum_onebit_compress(ptr(bits, U8P), ptr(e, F32P), ptr(x, F32P), x.size)
    return bits, np.float32(scale), e


def ulps(a, b):
    """Distance in f32 units (finite, same sign assumed where it matters)."""
    ia = np.array(a, np.float32).view(np.int32).astype(np.int64)
    ib = np.array(b, np.float32).view(np.int32).astype(np.int64)
    ia = np.where(ia < 0, -(ia & 0x7fffffff), ia)
    ib = np.where(ib < 0, -(ib & 0x7fffffff), ib)
    return np.abs(ia - ib)


class Checker:
    def __init__(self):
        self.fails = 0
        self.max_scale_ulp = 0
        self.max_ds_ulp = 0

    def check(self, cond, msg):
        if not cond:
            self.fails += 1
            print("FAIL:", msg)

    def stage(self, lib, isa, what, x, e):
        """Compress one stage on the library and the reference; compare."""
        n = x.size
        bits, scale, enew = lib_compress(lib, x, e)
        rbits, rscale, renew, c = ref_compress(x, e)
        self.check(np.array_equal(bits, rbits), f"{isa} {what} n={n}: bits differ")
        su = int(ulps(scale, rscale))
        self.max_scale_ulp = max(self.max_scale_ulp, su)
        self.check(su <= 1, f"{isa} {what} n={n}: scale {scale!r} vs {rscale!r}: {su} ULP")
        # exact given the library's scale
        self.check(np.array_equal(enew.view(np.uint32), ref_error(c, scale).view(np.uint32)),
                   f"{isa} {what} n={n}: error != c - scale*sign(c) with the library's scale")
        # against the reference's own scale
        if n:
            ulp_e = np.spacing(np.abs(renew)).astype(np.float64)
            bound = abs(float(scale) - float(rscale)) + ulp_e
            dev = np.abs(enew.astype(np.float64) - renew.astype(np.float64))
            self.check(bool(np.all(dev <= bound)), f"{isa} {what} n={n}: error off the reference")
            # DeepSpeed's f32 norm, for information
            with np.errstate(over="ignore"):
                ds = np.float32(np.linalg.norm(c) / np.float32(np.sqrt(n)))
            if np.isfinite(ds):  # its squares overflow f32 above ~1.8e19
                self.max_ds_ulp = max(self.max_ds_ulp, int(ulps(scale, ds)))
        return bits, scale, enew


def data(rng, n, edge):
    x = (rng.standard_normal(n) * rng.choice([1e-3, 1.0, 30.0], n)).astype(np.float32)
    if edge:
        k = max(1, n // 7)
        idx = rng.integers(0, n, k) if n else []
        x[idx] = rng.choice(np.array([0.0, -0.0, 1e-40, -1e-40, 1e-45, 3e38, -3e38], np.float32), k)
    return x


def server_round(lib, isa, chk, rng, n, workers=4):
    """W workers compress, the server unpack-accumulates scale_w / W each and compresses."""
    werr = [data(rng, n, True) * np.float32(0.01) for _ in range(workers)]
    serr = data(rng, n, False) * np.float32(0.01)
    acc = np.zeros(n, np.float32)
    racc = np.zeros(n, np.float32)
    for w in range(workers):
        bits, scale, _ = chk.stage(lib, isa, f"worker{w}", data(rng, n, w % 2 == 1), werr[w])
        sw = np.float32(scale) / np.float32(workers)
        lib.tally_sum_sign_unpack_acc(ptr(acc, F32P), ptr(bits, U8P), n, float(sw))
        racc = (racc + ref_unpack(bits, n, sw)).astype(np.float32)
    chk.check(np.array_equal(acc.view(np.uint32), racc.view(np.uint32)),
              f"{isa} server n={n}: unpack-accumulate differs")
    fresh = np.empty(n, np.float32)
    lib.tally_sum_sign_unpack(ptr(fresh, F32P), ptr(bits, U8P), n, float(sw))
    chk.check(np.array_equal(fresh.view(np.uint32), ref_unpack(bits, n, sw).view(np.uint32)),
              f"{isa} n={n}: unpack differs")
    chk.stage(lib, isa, "server", acc, serr)


def sign_edges(lib, isa, chk):
    v = np.array([0.0, -0.0, 1e-45, -1e-45, np.inf, -np.inf, 1.0, -1.0], np.float32)
    nan = np.array([0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001], np.uint32).view(np.float32)
    x = np.concatenate([v, nan, v[::-1]])
    bits = np.zeros(3, np.uint8)
    lib.tally_sum_sign_pack(ptr(bits, U8P), ptr(x, F32P), x.size)
    chk.check(np.array_equal(bits, ref_pack(x)), f"{isa}: sign_pack of the edge values")


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    lib = load(sys.argv[1])
    chk = Checker()
    sizes = [0, 1, 7, 8, 9, 31, 32, 33, 63, 64, 65, 100, 200, 1001, 4099, 65537, 1000003]
    ran = []
    for i, isa in enumerate(ISAS):
        if not lib.tally_sum_isa_supported(i):
            print(f"{isa}: not on this CPU")
            continue
        assert lib.tally_sum_set_isa(i) == 0
        ran.append(isa)
        rng = np.random.default_rng(1234)  # the same data on every path
        sign_edges(lib, isa, chk)
        for n in sizes:
            server_round(lib, isa, chk, rng, n)
    print(f"paths: {' '.join(ran)}; scale vs f64 reference: max {chk.max_scale_ulp} ULP "
          f"(bound 1); vs DeepSpeed-style f32 norm: max {chk.max_ds_ulp} ULP (not asserted)")
    print("FAIL" if chk.fails else "PASS")
    return 1 if chk.fails else 0


if __name__ == "__main__":
    sys.exit(main())
