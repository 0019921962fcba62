# SPDX-License-Identifier: Apache-2.0
"""ctypes bindings of libtally_agent's C ABI (tally_agent.h, tally_opt.h).

Nothing here is compiled against torch, so one build of the library serves every torch
version. The library is found through $TALLY_AGENT_LIB, then next to this package in a
build tree (build*/gpu_agent/libtally_agent.so), then the system loader path.
"""
import ctypes
import glob
import os

_here = os.path.dirname(os.path.abspath(__file__))


def _candidates():
    env = os.environ.get("TALLY_AGENT_LIB")
    if env:
        yield env
    root = os.path.abspath(os.path.join(_here, "..", "..", ".."))
    for p in sorted(glob.glob(os.path.join(root, "build*", "gpu_agent", "libtally_agent.so"))):
        yield p
    yield "libtally_agent.so"


def _load():
    errors = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            errors.append(f"{path}: {e}")
    raise ImportError("tally: cannot load libtally_agent.so (set TALLY_AGENT_LIB to its path); tried:\n  "
                      + "\n  ".join(errors))


lib = _load()

# ---- tally_opt.h ----
OPT_SGD, OPT_ADAM, OPT_ADAMW, OPT_LAMB = 0, 1, 2, 3


class OptCfg(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("lr", ctypes.c_float), ("weight_decay", ctypes.c_float),
                ("momentum", ctypes.c_float), ("dampening", ctypes.c_float),
                ("nesterov", ctypes.c_int), ("first", ctypes.c_int),
                ("beta1", ctypes.c_float), ("beta2", ctypes.c_float), ("eps", ctypes.c_float),
                ("step", ctypes.c_uint64)]


class OptTensor(ctypes.Structure):
    _fields_ = [("param", ctypes.c_void_p), ("grad", ctypes.c_void_p), ("m", ctypes.c_void_p),
                ("v", ctypes.c_void_p), ("n", ctypes.c_size_t)]


lib.tally_opt_cfg_defaults.argtypes = [ctypes.POINTER(OptCfg), ctypes.c_int]
lib.tally_opt_cfg_defaults.restype = None
lib.tally_opt_cfg_check.argtypes = [ctypes.POINTER(OptCfg), ctypes.POINTER(ctypes.c_char_p)]
lib.tally_opt_cfg_check.restype = ctypes.c_int
lib.tally_opt_step_cpu.argtypes = [ctypes.POINTER(OptCfg), ctypes.POINTER(OptTensor), ctypes.c_size_t]
lib.tally_opt_step_cpu.restype = ctypes.c_int
lib.tally_opt_step_cuda.argtypes = [ctypes.POINTER(OptCfg), ctypes.POINTER(OptTensor), ctypes.c_size_t,
                                    ctypes.c_void_p]
lib.tally_opt_step_cuda.restype = ctypes.c_int
lib.tally_opt_force_scalar.argtypes = [ctypes.c_int]
lib.tally_opt_force_scalar.restype = ctypes.c_int
lib.tally_opt_cpu_path.argtypes = []
lib.tally_opt_cpu_path.restype = ctypes.c_char_p
lib.tally_opt_cuda_error.argtypes = []
lib.tally_opt_cuda_error.restype = ctypes.c_char_p
lib.tally_opt_have_cuda.argtypes = []
lib.tally_opt_have_cuda.restype = ctypes.c_int
