# SPDX-License-Identifier: Apache-2.0
"""What a stalled push_pull waited on, told across the ranks: when one fails as a silent rank
(RankSilentError) or without progress (TallyTimeoutError), every rank publishes the tensors
it has in flight through torch.distributed's store and reads the others'. Different sets
mean the ranks are alive and disagree on the next tensor (one reduces them in another
order): RanksDisagreeError naming each rank's tensors, instead of "rank 0 silent", which
reads as a dead rank. Without torch.distributed, or when a rank does not answer within
ANSWER_S, the original error stays (with a note saying who did not answer)."""
import datetime
import json
import os

from .agent import RankSilentError, RanksDisagreeError, TallyTimeoutError

ANSWER_S = 5.0 * float(os.environ.get("TALLY_TIMEOUT_MULTIPLIER", "1") or 1)
_STALL = (RankSilentError, TallyTimeoutError)


def _store():
    import sys
    if "torch" not in sys.modules:
        return None
    import torch.distributed as dist
    if not (dist.is_available() and dist.is_initialized()):
        return None
    return dist.distributed_c10d._get_default_store()


def explain(agent, err, mine, seq):
    """err, or a RanksDisagreeError when the ranks wait on different tensors. mine: the names
    of this rank's tensors in flight (or failed) now; seq: this process's stall count (the
    same on every rank for the same stall)."""
    if not isinstance(err, _STALL) or agent.world_size < 2:
        return err
    store = _store()
    if store is None:
        return err
    base = f"tally/stall/{agent.job_id}/{agent.incarnation}/{seq}"
    try:
        store.set(f"{base}/{agent.rank}", json.dumps(sorted(mine)))
    except RuntimeError:
        return err
    seen, quiet = {agent.rank: sorted(mine)}, []
    for r in range(agent.world_size):
        if r == agent.rank:
            continue
        try:
            store.wait([f"{base}/{r}"], datetime.timedelta(seconds=ANSWER_S))
            seen[r] = json.loads(store.get(f"{base}/{r}"))
        except RuntimeError:
            quiet.append(r)
    if len({json.dumps(v) for v in seen.values()}) > 1:
        each = "; ".join(f"rank {r} on {', '.join(v) or 'nothing'}" for r, v in sorted(seen.items()))
        return RanksDisagreeError(-getattr(err, "errno", 0) or -71,
                                  f"the ranks disagree on the next tensor: {each}. They are alive: every rank must "
                                  "reduce the same tensors in the same order (a rank reduced them in another order, "
                                  f"or one the others never reduce). [was: {err}]")
    if quiet:
        err.args = (f"{err.args[0]} (ranks {quiet} did not say through torch.distributed's store within "
                    f"{ANSWER_S:.0f} s what they wait on: dead or hung)",)
    return err
