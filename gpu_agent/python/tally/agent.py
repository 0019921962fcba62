# SPDX-License-Identifier: Apache-2.0
"""The agent: one per training process, talking to the Tally appliances.

    a = tally.Agent()                    # configuration from the environment (TALLY_*, torchrun's)
    t = a.declare("layer3.grad", nbytes, dtype="f32", priority=3)
    h = a.push_pull(t, ptr, nbytes)      # returns at once
    a.wait(h)                            # raises TallyError with the agent's message

Errors from the C library come back as TallyError carrying errno and the agent's message
(which appliance, which tensor, why).
"""
import ctypes
import errno
import os

from . import _lib, identity

_LOCAL_AGG = {"off": 0, "sum": 1, "shard": 2}
COMPRESS_NONE = _lib.COMPRESS_NONE      # tally_agent_set_compression modes
COMPRESS_ONEBIT = _lib.COMPRESS_ONEBIT
_DTYPES = {"f32": _lib.DT_F32, "f16": _lib.DT_F16, "bf16": _lib.DT_BF16, "i32": _lib.DT_I32}


class TallyError(RuntimeError):
    def __init__(self, code, message):
        self.errno = -code if code < 0 else code
        name = errno.errorcode.get(self.errno, str(self.errno))
        super().__init__(f"tally: {message} [{name}]")


class RankSilentError(TallyError):
    """The appliance waited on a worker that went silent (dead or hung): the message names the
    rank, the appliance, key and round ("rank 3 silent for 10.2 s at appliance
    10.0.0.1:9170 (key 7, round 12)")."""


class RanksDisagreeError(TallyError):
    """The ranks are alive but wait on different tensors (a rank reduces tensors in another
    order, or one the others never reduce): the message names what each rank waits on, as
    they told each other through torch.distributed's store."""


class ApplianceDrainingError(TallyError):
    """The appliance is draining (shutting down or upgrading) and refused a new round."""


class TallyTimeoutError(TallyError):
    """A push_pull made no progress for op_timeout_ms (TALLY_OP_TIMEOUT_MS): the message says
    what it waited for (tensor and round, partitions in flight at which appliance, or what
    held the start order)."""


def _error(code, message):
    """The TallyError subclass that fits the agent's error."""
    e = -code if code < 0 else code
    if e == errno.EPIPE and " silent for " in message:
        return RankSilentError(code, message)
    if e == errno.ESHUTDOWN and " is draining " in message:
        return ApplianceDrainingError(code, message)
    if e == errno.ETIMEDOUT:
        return TallyTimeoutError(code, message)
    return TallyError(code, message)


class Agent:
    """A libtally_agent instance. Keyword arguments override the environment:
    order="submit" (default; TALLY_ORDER) or "rounds" (see set_order),
    appliances="h:p,...", job_id, token, rank, world_size, local_rank, local_size,
    partition_bytes, credit_bytes, average, connect_timeout_ms, op_timeout_ms, quorum,
    local_agg (0 / "off", 1 / "sum": local rank 0 pushes the machine's sum, 2 / "shard":
    reduce-scatter over the local ranks, each pushes its shard on its own lane; the same as
    TALLY_LOCAL_AGG, see tally_agent.h). store: a torch.distributed Store the ranks share
    (default: torch.distributed's, when initialised); without TALLY_JOB_ID / TALLY_TOKEN the
    job identity is agreed through it (see tally.identity). After creation: job_id,
    incarnation and identity (where they came from: "operator", "store", "run id", "one
    rank" or "default")."""

    def __init__(self, **kw):
        order = kw.pop("order", None) or os.environ.get("TALLY_ORDER") or "submit"
        if order not in ("submit", "rounds"):
            raise ValueError(f"tally.Agent: order {order!r} (TALLY_ORDER): 'submit' or 'rounds'")
        self.order = "rounds"  # the library's default until set_order below
        self.names = {}
        cfg = _lib.AgentCfg()
        _lib.lib.tally_agent_cfg_defaults(ctypes.byref(cfg))
        err = ctypes.create_string_buffer(512)
        if _lib.lib.tally_agent_cfg_from_env(ctypes.byref(cfg), err, len(err)):
            raise TallyError(-errno.EINVAL, err.value.decode())
        app = kw.pop("appliances", None)
        if app is not None:
            if _lib.lib.tally_agent_parse_appliances(ctypes.byref(cfg), app.encode(), err, len(err)):
                raise TallyError(-errno.EINVAL, err.value.decode())
        store = kw.pop("store", None)
        ident, self.identity = identity.resolve({k: v for k, v in kw.items() if v is not None},
                                                kw.get("rank") if kw.get("rank") is not None else cfg.rank,
                                                kw.get("world_size") if kw.get("world_size") is not None
                                                else cfg.world_size, store)
        for k, v in list(ident.items()) + list(kw.items()):
            if v is None:
                continue
            if not hasattr(cfg, k) or k in ("appliances", "nappliances"):
                raise TypeError(f"tally.Agent: unknown option {k!r}")
            if k == "local_agg" and isinstance(v, str):
                if v not in _LOCAL_AGG:
                    raise ValueError(f"tally.Agent: local_agg {v!r}: one of {sorted(_LOCAL_AGG)}")
                v = _LOCAL_AGG[v]
            setattr(cfg, k, int(v))
        code = ctypes.c_int(0)
        self._h = _lib.lib.tally_agent_create(ctypes.byref(cfg), ctypes.byref(code), err, len(err))
        if not self._h:
            raise TallyError(code.value, err.value.decode())
        r, w, lr, ls = (ctypes.c_int() for _ in range(4))
        _lib.lib.tally_agent_ranks(self._h, ctypes.byref(r), ctypes.byref(w), ctypes.byref(lr), ctypes.byref(ls))
        self.rank, self.world_size, self.local_rank, self.local_size = r.value, w.value, lr.value, ls.value
        self.job_id, self.incarnation = cfg.job_id, cfg.incarnation
        self.average = bool(cfg.average)
        self.local_agg = cfg.local_agg
        self.op_timeout_ms = cfg.op_timeout_ms
        self.deterministic = bool(cfg.deterministic)
        # f16 / bf16 tensors declared with average=True are averaged by the appliance on
        # its f32 sum and rounded once (else the agent divides the rounded sum)
        self.appliance_averages = bool(_lib.lib.tally_agent_appliance_averages(self._h))
        # Submission order by default: a plain loop of push_pulls of one tensor, or tensors
        # pushed on their own schedules, never wait for a tensor that is not pushed again
        # (the library's 'rounds' order would); every rank submits the same push_pulls in
        # the same order, which every tally.torch path does (and Horovod users already do).
        self.set_order(order)
        self.appliances = [f"{cfg.appliances[i].host.decode()}:{cfg.appliances[i].port}"
                           for i in range(cfg.nappliances)]

    def _check(self, rc):
        if rc < 0:
            raise _error(rc, self.error())
        return rc

    def error(self):
        return _lib.lib.tally_agent_strerror(self._h).decode(errors="replace") if self._h else "closed"

    def declare(self, name, nbytes, dtype="f32", priority=0, average=None, ordered=None):
        """average: the tensor's own setting (None: the agent's, TALLY_AVERAGE), fixed at
        declaration: an f16 / bf16 tensor that averages is averaged by the appliance before
        rounding where `appliance_averages`. ordered=False: a tensor not pushed once per
        round (one-off broadcasts); see tally_agent_set_ordered."""
        if average is None:
            tid = self._check(_lib.lib.tally_agent_declare(self._h, name.encode(), nbytes, _DTYPES[dtype],
                                                           priority))
        else:
            tid = self._check(_lib.lib.tally_agent_declare_avg(self._h, name.encode(), nbytes, _DTYPES[dtype],
                                                               priority, int(bool(average))))
        if ordered is not None:
            self._check(_lib.lib.tally_agent_set_ordered(self._h, tid, int(bool(ordered))))
        self.names[tid] = name  # for errors that name the tensors in flight
        return tid

    def set_ordered(self, tensor, ordered):
        self._check(_lib.lib.tally_agent_set_ordered(self._h, tensor, int(bool(ordered))))

    def set_compression(self, tensor, mode, from_round):
        """1-bit compression of an f32 tensor from its from_round-th push_pull on (0-based;
        the same on every rank, before that push_pull): mode COMPRESS_ONEBIT (or "onebit")
        or COMPRESS_NONE (or "none"). In compressed rounds the tensor receives the
        appliance's server-stage result, already averaged. See tally_agent_set_compression."""
        modes = {"none": COMPRESS_NONE, "onebit": COMPRESS_ONEBIT}
        if isinstance(mode, str):
            if mode not in modes:
                raise ValueError(f"tally.Agent.set_compression: mode must be one of {sorted(modes)}")
            mode = modes[mode]
        self._check(_lib.lib.tally_agent_set_compression(self._h, tensor, int(mode), int(from_round)))

    def set_codec(self, tensor, name, from_round=0):
        """Compression of an f32 tensor by codec name (the worker-stage codecs registered in
        gpu_agent/agent_codec/): "fp16" (sent as f16, summed in f32 by the appliance, widened
        back), "onebit" (as set_compression), or "none", from its from_round-th push_pull on
        (the same on every rank). See tally_agent_set_codec."""
        self._check(_lib.lib.tally_agent_set_codec(self._h, tensor, str(name).encode(), int(from_round)))

    def set_order(self, mode):
        """"rounds" (default: round by round, by priority; every ordered tensor pushed once
        per round) or "submit" (submission order; every rank submits the same push_pulls in
        the same order, as DDP's hook does). Before the first push_pull; see
        tally_agent_set_order."""
        modes = {"rounds": _lib.ORDER_ROUNDS, "submit": _lib.ORDER_SUBMIT}
        if mode not in modes:
            raise ValueError(f"tally.Agent.set_order: mode must be one of {sorted(modes)}")
        if mode == self.order:
            return
        self._check(_lib.lib.tally_agent_set_order(self._h, modes[mode]))
        self.order = mode

    def push_pull(self, tensor, ptr, nbytes, device=_lib.DEV_CPU, stream=None, callback=None, cb_arg=0,
                  result_view=False):
        """Start a push_pull; returns a handle. `callback` is a ctypes AgentCb that the caller
        keeps alive; it runs on the agent's progress thread with (cb_arg, handle, status).
        result_view=True: the agent may leave the result in its own memory (ptr keeps its
        input); result_view() then says where it lies (tally_agent_push_pull_flags)."""
        cb = callback if callback is not None else _lib.AgentCb()
        return self._check(_lib.lib.tally_agent_push_pull_flags(
            self._h, tensor, ctypes.c_void_p(ptr), nbytes, device, ctypes.c_void_p(stream) if stream else None,
            _lib.RESULT_VIEW if result_view else 0, cb, ctypes.c_void_p(cb_arg) if cb_arg else None))

    def result_view(self, tensor):
        """The address of the tensor's last push_pull result once it completed: the pointer
        it was given, or (result_view=True) the agent's shared memory, read-only and valid
        until this rank's next push_pull of the tensor. See tally_agent_result_view."""
        out = ctypes.c_void_p()
        rc = _lib.lib.tally_agent_result_view(self._h, tensor, ctypes.byref(out))
        if rc < 0:
            why = {errno.EBUSY: "a push_pull of it is in flight", errno.ENODATA: "no push_pull of it completed",
                   errno.EIO: "its last push_pull failed", errno.ENOENT: "no such tensor"}.get(-rc, os.strerror(-rc))
            raise _error(rc, f"result_view of tensor {tensor}: {why}")
        return out.value

    def wait(self, handle):
        """Block until the push_pull is done. Never for ever: after op_timeout_ms without
        progress it raises TallyError (ETIMEDOUT) saying what the push_pull waits for."""
        self._check(_lib.lib.tally_agent_wait(self._h, handle))

    def test(self, handle):
        """True when done (the handle is released), False while pending; raises on failure."""
        return self._check(_lib.lib.tally_agent_test(self._h, handle)) == 1

    def expire(self, handle):
        """Fail a push_pull (with or without callback) that is past its deadline (no progress
        for op_timeout_ms): True when it was expired now. Not needed: the agent's progress
        thread applies every push_pull's deadline itself. See tally_agent_expire."""
        return _lib.lib.tally_agent_expire(self._h, handle) == 1 if self._h else False

    def partitions(self, tensor):
        arr = (_lib.AgentPart * 4096)()
        n = self._check(_lib.lib.tally_agent_partitions(self._h, tensor, arr, 4096))
        return [(arr[i].key, arr[i].appliance, arr[i].offset, arr[i].bytes) for i in range(min(n, 4096))]

    def stats(self):
        s = _lib.AgentStats()
        _lib.lib.tally_agent_get_stats(self._h, ctypes.byref(s))
        return {f: getattr(s, f) for f, _ in s._fields_}

    LIVENESS = ("up", "silent", "down", "draining", "gone")

    def liveness(self):
        """Per appliance, as this rank sees it: [(state, gone_unix_seconds or None)], state
        one of LIVENESS ('gone': its keys moved to the survivors)."""
        out, i = [], 0
        while True:
            t = ctypes.c_uint64(0)
            st = _lib.lib.tally_agent_liveness(self._h, i, ctypes.byref(t))
            if st < 0:
                return out
            out.append((self.LIVENESS[st] if st < len(self.LIVENESS) else str(st),
                        t.value / 1e9 if t.value else None))
            i += 1

    def close(self):
        if self._h:
            _lib.lib.tally_agent_destroy(self._h)
            self._h = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


_default = None


def init(**kw):
    """The process-wide agent (created on first call)."""
    global _default
    if _default is None:
        _default = Agent(**kw)
    return _default


def shutdown():
    global _default
    if _default is not None:
        _default.close()
        _default = None


def configured():
    return bool(os.environ.get("TALLY_APPLIANCES"))
