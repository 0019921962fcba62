# SPDX-License-Identifier: Apache-2.0
"""The job identity (job id, token, incarnation) a launch uses when the operator set none.

Every rank of one launch must agree on it, and two launches must not share it by accident:
without TALLY_JOB_ID / TALLY_TOKEN every run used to be job 1 with token 0, so a second run
of the same command met the first one's rounds (stale_round) and two users' runs summed
into each other. Sources, first that applies:

1. The operator: TALLY_JOB_ID or TALLY_TOKEN set (or job_id= / token= given): used as
   they are (an admitted job), nothing is derived.
2. torch's store, the one the launch already shares: torch.distributed's default store when
   init_process_group ran, else torchrun's agent store (torch >= 2, TORCHELASTIC_USE_AGENT_STORE,
   MASTER_ADDR / MASTER_PORT). Rank 0 draws a random 64-bit token and the job id and
   publishes them; a relaunch within the same store (torchrun --max-restarts) keeps them and
   gets a new random incarnation (TORCHELASTIC_RESTART_COUNT), so the appliance replaces the
   old launch's state instead of mixing rounds. The job id is drawn at random per launch
   (a new store), also when the launcher's run id is fixed (torchrun --rdzv_id 101).
   Under torchrun without an agent store (torch 1.x) and with torch loaded, torch.distributed's
   default group is made here (gloo, env://) to have that store: call init_process_group
   before tally.init() to choose another backend.
3. TORCHELASTIC_RUN_ID alone (no store): the C library derives the job id from it and the
   world size, the token from it, the incarnation from it and the restart count
   (tally_agent_cfg_from_env). That token is not a secret.
4. One rank: a random job id and token.
5. Otherwise nothing can be agreed on: job 1 / token 0 with a warning that says what to set.

Derived job ids lie in 2^20 .. 2^24 - 1: away from small operator-chosen ids, and below the
sharded local mode's limit.
"""
import datetime
import hashlib
import os
import secrets
import sys

_LO, _HI = 1 << 20, 1 << 24
WAIT_S = 60


def run_id(env=os.environ):
    """The launcher's run id, or None (unset, or torchrun's default "none")."""
    r = env.get("TORCHELASTIC_RUN_ID", "")
    return r if r and r != "none" else None


def job_from_run(run, world):
    """The job id of a run id and world size (a changed world size is another job)."""
    h = int.from_bytes(hashlib.sha256(f"tally-job/{run}/{world}".encode()).digest()[:8], "little")
    return _LO + h % (_HI - _LO)


def _random_job():
    return _LO + secrets.randbelow(_HI - _LO)


def _nonzero64():
    return secrets.randbits(64) or 1


def default_store(world):
    """The store the launch shares, or None. Never imports torch when it is not loaded."""
    if "torch" not in sys.modules:
        return None
    import torch.distributed as dist
    if not dist.is_available():
        return None
    if dist.is_initialized():
        return dist.distributed_c10d._get_default_store()
    env = os.environ
    if run_id(env) and env.get("MASTER_ADDR") and env.get("MASTER_PORT") and \
            env.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() != "true":
        # torchrun without an agent store (torch 1.x): rank 0's init_process_group hosts the
        # store at MASTER_PORT, so the group is made here (gloo, env://, as the script would);
        # without it the identity came from the run id alone and a second run of the same
        # command (fixed --rdzv_id) was the first one again (wrong token / stale_round)
        init_group()
        return dist.distributed_c10d._get_default_store()
    if env.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true" and env.get("MASTER_ADDR") and \
            env.get("MASTER_PORT"):
        kw = dict(world_size=world, is_master=False, timeout=datetime.timedelta(seconds=WAIT_S))
        try:  # Debian's torch 2.x has no libuv (see examples/train.py torch_store_compat)
            return dist.TCPStore(env["MASTER_ADDR"], int(env["MASTER_PORT"]), use_libuv=False, **kw)
        except TypeError:
            return dist.TCPStore(env["MASTER_ADDR"], int(env["MASTER_PORT"]), **kw)
    return None


def init_group():
    """torch.distributed's default group (gloo, from torchrun's environment: MASTER_ADDR,
    MASTER_PORT, RANK, WORLD_SIZE) unless the script made one; True when made here."""
    import torch.distributed as dist
    if dist.is_initialized():
        return False
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=max(WAIT_S, 60)))
    return True


def _get(store, key, rank):
    try:
        store.wait([key], datetime.timedelta(seconds=WAIT_S))
    except RuntimeError as e:
        raise RuntimeError(f"tally: rank {rank} did not get the job identity from torch's store ('{key}', "
                           f"waited up to {WAIT_S} s): rank 0 publishes it when it creates its agent; does rank 0 "
                           f"create one (tally.init)? Or set TALLY_JOB_ID and TALLY_TOKEN on every rank ({e})") from None
    return int(store.get(key))


def from_store(store, rank, world, env=os.environ):
    """(job_id, token, incarnation) agreed through `store`: rank 0 draws, everyone reads."""
    run = run_id(env)
    restart = env.get("TORCHELASTIC_RESTART_COUNT", "0")
    base = f"tally/{run or '-'}/{world}"
    kjob, ktok, kinc = f"{base}/job", f"{base}/token", f"{base}/incarnation/{restart}"
    if rank == 0:
        # a relaunch in the same store keeps the job and token (add: every torch version's
        # stores have it, and it tells the first launch from the others)
        if store.add(f"{base}/launches", 1) == 1:
            # a fresh job id per launch, also with a run id: a fixed --rdzv_id (pytorch/examples'
            # run_example.sh) made a second run the first one's job with another token, which
            # tallyd refused ("wrong token") while its state lived
            store.set(kjob, str(_random_job()))
            store.set(ktok, str(_nonzero64()))
        store.set(kinc, str(_nonzero64()))
    return _get(store, kjob, rank), _get(store, ktok, rank), _get(store, kinc, rank)


def resolve(kw, rank, world, store=None, env=os.environ):
    """The fields to set on the agent's configuration (a dict, maybe empty) and where they
    came from: "operator", "store", "run id", "one rank" or "default"."""
    if any(k in kw for k in ("job_id", "token")) or "TALLY_JOB_ID" in env or "TALLY_TOKEN" in env:
        return {}, "operator"
    rank = max(rank, 0)
    world = world if world > 0 else 1
    if store is None:
        store = default_store(world)
    if store is not None:
        job, token, inc = from_store(store, rank, world, env)
        out = {"job_id": job, "token": token}
        if "incarnation" not in kw and "TALLY_INCARNATION" not in env:
            out["incarnation"] = inc
        return out, "store"
    if run_id(env):
        return {}, "run id"  # derived by tally_agent_cfg_from_env
    if world == 1:
        return {"job_id": _random_job(), "token": _nonzero64()}, "one rank"
    print(f"tally: warning: rank {rank} of {world}: no job identity to agree on (TALLY_JOB_ID / TALLY_TOKEN "
          "unset, no torchrun run id, torch.distributed not initialised): using job 1 token 0, which every "
          "such run shares; set TALLY_JOB_ID and TALLY_TOKEN, launch with torchrun --rdzv-id, or call "
          "torch.distributed.init_process_group before tally.init()", file=sys.stderr, flush=True)
    return {}, "default"
