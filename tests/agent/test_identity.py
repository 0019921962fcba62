#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The default job identity (no TALLY_JOB_ID / TALLY_TOKEN), through a real appliance with
open admission (tally-udpd --open) and real worker processes:
  A. the same command twice in a row (torch.distributed initialised, no run id): both runs
     complete every step with the exact sums (the second does not meet the first's rounds:
     stale_round), each under its own random job id agreed through torch's store;
  B. torchrun's shape (its agent store at MASTER_ADDR:MASTER_PORT, TORCHELASTIC_USE_AGENT_STORE,
     a run id, TORCHELASTIC_RESTART_COUNT), no init_process_group: launch 0 is killed
     (SIGKILL) mid-run, the relaunch (restart 1) keeps the job id and token, takes a new
     incarnation and completes; so does a third launch (restart 2) after a clean end;
  C. two default runs at once against the one appliance, different data: both exact;
  D. without a store: the C library derives the job from TORCHELASTIC_RUN_ID and the world
     size (torchrun's "none" does not count), the operator's TALLY_JOB_ID / TALLY_TOKEN win,
     and where nothing can be agreed the warning names what to set.
Exit 77 (skip) without torch or without the appliance binary.
"""
import contextlib
import ctypes
import io
import multiprocessing as mp
import os
import signal
import sys
import time

import udpd_proc

torch = udpd_proc.need_torch()
import torch.distributed as dist  # noqa: E402
udpd_proc.need_udpd()
import train  # noqa: E402  free_port_block, torch_store_compat

W = 2
OPERATOR = ("TALLY_JOB_ID", "TALLY_TOKEN", "TALLY_INCARNATION", "TORCHELASTIC_RUN_ID",
            "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_USE_AGENT_STORE")


def worker(rank, port, env, mode, tag, steps, hang_after, q, barrier):
    try:
        torch.set_num_threads(1)
        for k in OPERATOR:
            os.environ.pop(k, None)
        pause = 0.02
        if mode == "pg-job1":  # the old default, every run job 1 / token 0
            os.environ.update(TALLY_JOB_ID="1", TALLY_TOKEN="0", TALLY_CONNECT_TIMEOUT_MS="3000")
            mode = "pg"
            pause = 0.25  # each run lasts past the other's JOIN retries (3 s): they overlap
        os.environ.update(TALLY_APPLIANCES=f"127.0.0.1:{port}", RANK=str(rank), WORLD_SIZE=str(W),
                          TALLY_OP_TIMEOUT_MS="20000", **env)
        if mode == "pg":
            train.torch_store_compat()
            dist.init_process_group("gloo", rank=rank, world_size=W)
        import tally
        import tally.torch as tt
        if barrier is not None:  # runs at once: every worker of both JOINs together
            barrier.wait(60)
        a = tally.init()
        done = 0
        for step in range(steps):
            if barrier is not None:
                time.sleep(pause)  # the runs overlap for their whole length
            x = torch.full((1000,), float(tag * 1000 + rank + step))
            y = tt.allreduce(x, name="w", op=tt.Sum)
            want = float(sum(tag * 1000 + r + step for r in range(W)))
            if not bool((y == want).all()):
                raise AssertionError(f"step {step}: got {y[0].item()}, want {want}")
            done += 1
            if hang_after is not None and done == hang_after:
                q.put((rank, "hang", dict(job=a.job_id, inc=a.incarnation, identity=a.identity, steps=done)))
                time.sleep(600)  # killed by the parent
        q.put((rank, "ok", dict(job=a.job_id, inc=a.incarnation, identity=a.identity, steps=done)))
        tally.shutdown()
        if mode == "pg":
            dist.destroy_process_group()
    except Exception:  # report, never hang the parent
        import traceback
        q.put((rank, "error", traceback.format_exc()))
        raise SystemExit(1)


def check(ok, what):
    print(f"{'ok  ' if ok else 'FAIL'} {what}", flush=True)
    return 0 if ok else 1


_ctx = mp.get_context("fork")


def launch(port, env, mode, tag, steps, hang_after=None, barrier=None):
    """Start W workers; returns (processes, queue)."""
    ctx = _ctx
    q = ctx.Queue()
    env = dict(env)
    env.setdefault("MASTER_ADDR", "127.0.0.1")
    env.setdefault("MASTER_PORT", str(udpd_proc.free_tcp()))
    ps = [ctx.Process(target=worker, args=(r, port, env, mode, tag, steps, hang_after, q, barrier))
          for r in range(W)]
    for p in ps:
        p.start()
    return ps, q


def collect(ps, q, timeout=120):
    res = {}
    t_end = time.time() + timeout
    for _ in ps:
        try:
            rank, status, out = q.get(timeout=max(1, t_end - time.time()))
        except Exception:
            break
        if status == "error":
            print(f"     rank {rank}:\n{out}")
        res[rank] = (status, out)
    return res


def finish(ps):
    for p in ps:
        p.join(30)
        if p.is_alive():
            p.kill()


def all_ok(res, steps, status="ok"):
    return len(res) == W and all(s == status and o["steps"] == steps for s, o in res.values())


def one(res, field):
    vals = {o[field] for _, o in res.values()} if res and all(isinstance(o, dict) for _, o in res.values()) else set()
    return vals.pop() if len(vals) == 1 else None


def scenario_a(port):
    failed = 0
    jobs = []
    for n in range(2):
        t0 = time.time()
        ps, q = launch(port, {}, "pg", tag=1, steps=5)
        res = collect(ps, q)
        finish(ps)
        failed += check(all_ok(res, 5) and one(res, "identity") == "store" and one(res, "job") is not None,
                        f"A. run {n + 1} of the same command: 5 exact steps in {time.time() - t0:.1f} s "
                        f"(identity {one(res, 'identity')}, job {one(res, 'job')})")
        jobs.append(one(res, "job"))
    failed += check(None not in jobs and jobs[0] != jobs[1], f"A. the two runs had their own job ids {jobs}")
    return failed


def scenario_b(port):
    failed = 0
    mport = udpd_proc.free_tcp()
    train.torch_store_compat()
    # as torchrun's agent hosts it (torch 2.x waits for world_size clients unless told not to)
    kw = dict(is_master=True, wait_for_workers=False)
    try:
        store = dist.TCPStore("127.0.0.1", mport, use_libuv=False, **kw)
    except TypeError:
        store = dist.TCPStore("127.0.0.1", mport, **kw)
    base = dict(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(mport), TORCHELASTIC_USE_AGENT_STORE="True",
                TORCHELASTIC_RUN_ID="tally-test-b")
    ps, q = launch(port, dict(base, TORCHELASTIC_RESTART_COUNT="0"), "agentstore", tag=2, steps=100, hang_after=3)
    res0 = collect(ps, q)
    for p in ps:
        os.kill(p.pid, signal.SIGKILL)
    finish(ps)
    failed += check(all_ok(res0, 3, "hang") and one(res0, "identity") == "store",
                    f"B. launch 0 (torchrun agent store, run id): 3 steps, then killed (SIGKILL); job {one(res0, 'job')}")
    t0 = time.time()
    ps, q = launch(port, dict(base, TORCHELASTIC_RESTART_COUNT="1"), "agentstore", tag=3, steps=5)
    res1 = collect(ps, q)
    finish(ps)
    failed += check(all_ok(res1, 5), f"B. relaunch (restart 1) after the kill: 5 exact steps in {time.time() - t0:.1f} s")
    failed += check(one(res1, "job") == one(res0, "job") and one(res1, "inc") not in (None, one(res0, "inc")),
                    f"B. same job id {one(res1, 'job')}, new incarnation ({one(res0, 'inc')} -> {one(res1, 'inc')})")
    ps, q = launch(port, dict(base, TORCHELASTIC_RESTART_COUNT="2"), "agentstore", tag=4, steps=5)
    res2 = collect(ps, q)
    finish(ps)
    failed += check(all_ok(res2, 5) and one(res2, "job") == one(res0, "job"),
                    "B. relaunch (restart 2) after a clean end: 5 exact steps, same job id")
    del store
    return failed


def concurrent(port, mode):
    barrier = _ctx.Barrier(2 * W)
    runs = [launch(port, {}, mode, tag=5 + i, steps=20, barrier=barrier) for i in range(2)]
    res = [collect(ps, q, 180) for ps, q in runs]
    for ps, _ in runs:
        finish(ps)
    return res


def scenario_c(port):
    res = concurrent(port, "pg")
    jobs = [one(r, "job") for r in res]
    failed = check(all(all_ok(r, 20) for r in res) and None not in jobs and jobs[0] != jobs[1],
                   f"C. two default runs at once, different data: both 20 exact steps (jobs {jobs})")
    # the control: the old default (job 1, token 0 for every run) does collide
    res = concurrent(port, "pg-job1")
    failed += check(not all(all_ok(r, 20) for r in res),
                    "C. control: the same two runs both as job 1 / token 0 do not both succeed "
                    f"({sum(all_ok(r, 20) for r in res)} of 2 did)")
    return failed


def scenario_d():
    import tally
    from tally import _lib, identity
    failed = 0
    saved = {k: os.environ.pop(k, None) for k in OPERATOR + ("WORLD_SIZE",)}
    try:
        def c_cfg(**env):
            os.environ.update(env)
            cfg = _lib.AgentCfg()
            _lib.lib.tally_agent_cfg_defaults(ctypes.byref(cfg))
            err = ctypes.create_string_buffer(256)
            assert _lib.lib.tally_agent_cfg_from_env(ctypes.byref(cfg), err, len(err)) == 0, err.value
            for k in env:
                del os.environ[k]
            return cfg.job_id, cfg.token, cfg.incarnation
        j2 = c_cfg(TORCHELASTIC_RUN_ID="abc", WORLD_SIZE="2")
        j2b = c_cfg(TORCHELASTIC_RUN_ID="abc", WORLD_SIZE="2")
        j3 = c_cfg(TORCHELASTIC_RUN_ID="abc", WORLD_SIZE="3")
        r1 = c_cfg(TORCHELASTIC_RUN_ID="abc", WORLD_SIZE="2", TORCHELASTIC_RESTART_COUNT="1")
        other = c_cfg(TORCHELASTIC_RUN_ID="abd", WORLD_SIZE="2")
        none = c_cfg(TORCHELASTIC_RUN_ID="none", WORLD_SIZE="2")
        op = c_cfg(TORCHELASTIC_RUN_ID="abc", WORLD_SIZE="2", TALLY_JOB_ID="42", TALLY_TOKEN="7")
        failed += check(j2 == j2b and 1 << 20 <= j2[0] < 1 << 24 and j2[1] != 0,
                        f"D. C: run id 'abc', world 2 -> job {j2[0]}, token set, the same on every rank")
        failed += check(j3[0] != j2[0] and other[0] != j2[0] and other[1] != j2[1],
                        f"D. C: another world size ({j3[0]}) or run id ({other[0]}) is another job")
        failed += check(r1[:2] == j2[:2] and r1[2] != j2[2], "D. C: a restart keeps job and token, new incarnation")
        failed += check(none == (1, 0, 0), f"D. C: torchrun's default run id 'none' derives nothing: {none}")
        failed += check(op[:2] == (42, 7), f"D. C: the operator's TALLY_JOB_ID / TALLY_TOKEN win: {op[:2]}")
        os.environ["TALLY_JOB_ID"] = "42"
        out, src = identity.resolve({}, 0, 2, store=object())
        del os.environ["TALLY_JOB_ID"]
        failed += check(out == {} and src == "operator", "D. Python: TALLY_JOB_ID set -> the store is not used")
        out, src = identity.resolve({"token": 5}, 0, 2, store=object())
        failed += check(out == {} and src == "operator", "D. Python: token= given -> nothing derived")
        out, src = identity.resolve({}, 0, 1)
        failed += check(src == "one rank" and 1 << 20 <= out["job_id"] < 1 << 24 and out["token"] != 0,
                        f"D. Python: one rank, nothing set -> random job {out.get('job_id')}")
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            out, src = identity.resolve({}, 1, 2)
        failed += check(src == "default" and out == {} and "TALLY_JOB_ID" in err.getvalue()
                        and "init_process_group" in err.getvalue(),
                        f"D. Python: nothing to agree on -> warning: {err.getvalue().strip()[:100]}...")
        del tally
    finally:
        for k, v in saved.items():
            if v is not None:
                os.environ[k] = v
    return failed


def main():
    failed = scenario_d()
    port = train.free_port_block(1)
    sock = f"/tmp/tally-test-identity-{os.getpid()}.sock"
    try:
        with udpd_proc.running(port, "--cores", "1", "--open", "--ctl-socket", sock):
            failed += scenario_a(port)
            failed += scenario_b(port)
            failed += scenario_c(port)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(sock)
    print(f"{failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
