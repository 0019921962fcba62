# SPDX-License-Identifier: Apache-2.0
"""ctypes bindings of libtally_agent's C ABI (tally_agent.h, tally_opt.h).

Nothing here is compiled against torch, so one build of the library serves every torch
version. The library is found through $TALLY_AGENT_LIB, then next to this package in a
build tree ($TALLY_BUILD, then build/, then the other build*/ folders by name:
BUILD/gpu_agent/libtally_agent.so), then the system loader path.
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
    # $TALLY_BUILD's tree first, then build/ (the README's), then the others by name: a
    # second tree (a GPU bundle, a helper's build-x) never shadows the one just built
    first = [os.path.abspath(os.environ.get("TALLY_BUILD") or "/nonexistent"), os.path.join(root, "build")]
    for p in sorted(glob.glob(os.path.join(root, "build*", "gpu_agent", "libtally_agent.so")),
                    key=lambda p: (os.path.dirname(os.path.dirname(p)) not in first[:1],
                                   os.path.dirname(os.path.dirname(p)) not in first, p)):
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

# ---- tally_agent.h ----
MAX_APPLIANCES = 32
NAME_MAX = 128
DEV_CPU, DEV_CUDA = 0, 1
DT_F32, DT_F16, DT_BF16, DT_I32 = 0, 1, 2, 3
ORDER_ROUNDS, ORDER_SUBMIT = 0, 1
RESULT_VIEW = 1  # TALLY_AGENT_RESULT_VIEW
COMPRESS_NONE, COMPRESS_ONEBIT = 0, 1


class Appliance(ctypes.Structure):
    _fields_ = [("host", ctypes.c_char * 64), ("port", ctypes.c_uint16), ("rate_gbps", ctypes.c_double),
                ("colocated", ctypes.c_int)]


class AgentCfg(ctypes.Structure):
    _fields_ = [("job_id", ctypes.c_uint32), ("token", ctypes.c_uint64),
                ("rank", ctypes.c_int), ("world_size", ctypes.c_int),
                ("local_rank", ctypes.c_int), ("local_size", ctypes.c_int),
                ("nappliances", ctypes.c_uint), ("appliances", Appliance * MAX_APPLIANCES),
                ("gpu_hosts", ctypes.c_uint), ("partition_bytes", ctypes.c_size_t),
                ("credit_bytes", ctypes.c_size_t), ("average", ctypes.c_int),
                ("connect_timeout_ms", ctypes.c_uint32), ("op_timeout_ms", ctypes.c_uint32),
                ("window", ctypes.c_uint32), ("max_chunk_bytes", ctypes.c_uint32),
                ("rto_init_us", ctypes.c_uint32), ("quorum", ctypes.c_uint16),
                ("max_tensors", ctypes.c_uint), ("max_handles", ctypes.c_uint),
                ("deterministic", ctypes.c_int), ("credit_stall_ms", ctypes.c_uint32),
                ("local_agg", ctypes.c_int), ("local_shm_bytes", ctypes.c_size_t),
                ("rto_max_us", ctypes.c_uint32), ("rto_min_us", ctypes.c_uint32),
                ("incarnation", ctypes.c_uint64), ("auth_key_file", ctypes.c_char * 256)]


class AgentStats(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in ("push_pulls", "failed", "partitions", "bytes",
                                                "max_inflight_bytes", "credit_waits", "credit_overdrafts", "retransmits",
                                                "excluded", "order_waits", "push_bytes",
                                                "failovers", "moved_pushes", "noresult_ops",
                                                "noresult_acks", "noresult_skipped_bytes",
                                                "noresult_payloads", "rx_bytes")]


class AgentPart(ctypes.Structure):
    _fields_ = [("key", ctypes.c_uint32), ("appliance", ctypes.c_uint32), ("offset", ctypes.c_size_t),
                ("bytes", ctypes.c_size_t)]


AgentCb = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_int)
_P = ctypes.c_void_p
_sig = {
    "tally_agent_cfg_defaults": (None, [ctypes.POINTER(AgentCfg)]),
    "tally_agent_cfg_from_env": (ctypes.c_int, [ctypes.POINTER(AgentCfg), ctypes.c_char_p, ctypes.c_size_t]),
    "tally_agent_parse_appliances": (ctypes.c_int, [ctypes.POINTER(AgentCfg), ctypes.c_char_p,
                                                    ctypes.c_char_p, ctypes.c_size_t]),
    "tally_agent_create": (_P, [ctypes.POINTER(AgentCfg), ctypes.POINTER(ctypes.c_int), ctypes.c_char_p,
                                ctypes.c_size_t]),
    "tally_agent_destroy": (None, [_P]),
    "tally_agent_declare": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int]),
    "tally_agent_declare_avg": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                                               ctypes.c_int]),
    "tally_agent_appliance_averages": (ctypes.c_int, [_P]),
    "tally_agent_set_average": (ctypes.c_int, [_P, ctypes.c_int, ctypes.c_int]),
    "tally_agent_set_ordered": (ctypes.c_int, [_P, ctypes.c_int, ctypes.c_int]),
    "tally_agent_set_compression": (ctypes.c_int, [_P, ctypes.c_int, ctypes.c_int, ctypes.c_uint64]),
    "tally_agent_set_codec": (ctypes.c_int, [_P, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint64]),
    "tally_agent_reset_compression_error": (ctypes.c_int, [_P, ctypes.c_int]),
    "tally_agent_set_order": (ctypes.c_int, [_P, ctypes.c_int]),
    "tally_agent_lookup": (ctypes.c_int, [_P, ctypes.c_char_p]),
    "tally_agent_push_pull": (ctypes.c_int, [_P, ctypes.c_int, _P, ctypes.c_size_t, ctypes.c_int, _P,
                                             AgentCb, _P]),
    "tally_agent_push_pull_flags": (ctypes.c_int, [_P, ctypes.c_int, _P, ctypes.c_size_t, ctypes.c_int, _P,
                                                   ctypes.c_uint, AgentCb, _P]),
    "tally_agent_result_view": (ctypes.c_int, [_P, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)]),
    "tally_agent_test": (ctypes.c_int, [_P, ctypes.c_int]),
    "tally_agent_wait": (ctypes.c_int, [_P, ctypes.c_int]),
    "tally_agent_expire": (ctypes.c_int, [_P, ctypes.c_int]),
    "tally_agent_strerror": (ctypes.c_char_p, [_P]),
    "tally_agent_partitions": (ctypes.c_int, [_P, ctypes.c_int, ctypes.POINTER(AgentPart), ctypes.c_uint]),
    "tally_agent_get_stats": (None, [_P, ctypes.POINTER(AgentStats)]),
    "tally_agent_ranks": (None, [_P] + [ctypes.POINTER(ctypes.c_int)] * 4),
    "tally_agent_liveness": (ctypes.c_int, [_P, ctypes.c_uint, ctypes.POINTER(ctypes.c_uint64)]),
}
for _name, (_res, _args) in _sig.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args


def _check_layout():
    """The structures above must match the library's, byte for byte: a package and a
    library from different builds would otherwise exchange fields at wrong offsets."""
    size = lib.tally_agent_struct_size
    size.restype, size.argtypes = ctypes.c_size_t, [ctypes.c_char_p]
    bad = [f"{c} is {size(c.encode())} bytes in {lib._name}, {ctypes.sizeof(t)} here"
           for c, t in (("tally_agent_cfg", AgentCfg), ("tally_agent_appliance", Appliance),
                        ("tally_agent_stats", AgentStats), ("tally_agent_part", AgentPart),
                        ("tally_opt_cfg", OptCfg), ("tally_opt_tensor", OptTensor))
           if size(c.encode()) != ctypes.sizeof(t)]
    if bad:
        raise ImportError("tally: this Python package and libtally_agent come from different "
                          "builds (install both from one release): " + "; ".join(bad))


_check_layout()
