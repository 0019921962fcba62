# SPDX-License-Identifier: Apache-2.0
"""Pipeline trainer over torch.distributed point-to-point (gloo) between stages, a plan's
stages x replicas; each stage's replicas sum their gradients through Tally as their own job
(job id job_base + stage: a key space of their own), or over a gloo group of their own where
the plan's stage says "aggregation": "ring".

Schedule (synchronous, GPipe-style): a minibatch is cut into K microbatches; microbatch k
runs on replica k mod m_s of stage s (m_s its replicas). Every rank runs the forwards of its
microbatches in order, then their backwards in reverse order, accumulating the gradient of
loss_k / K; the stage's replicas then sum their gradients through the appliance and step.
The result equals one process's step on the whole minibatch (mean loss) to floating-point
tolerance: the same sum of per-microbatch gradients, in another order.

Failures name where they are: a peer that dies makes the point-to-point receive or send, or
the stage's push_pull (after op_timeout_ms), fail with PipelineError naming this stage and
rank and the peer stage and rank (or the stage's replica ranks)."""
import gc
import time

import torch
import torch.distributed as dist

try:  # torch 2.x
    from torch.func import functional_call as _functional_call
except ImportError:  # torch 1.13
    from torch.nn.utils.stateless import functional_call as _functional_call

HDR = 8  # int64 header before an activation: ndim, then the dims


def frame(t):
    """The header sent before tensor t: its ndim, then its dims."""
    hdr = torch.zeros(HDR, dtype=torch.int64)
    hdr[0] = t.dim()
    hdr[1:1 + t.dim()] = torch.tensor(t.shape, dtype=torch.int64)
    return hdr


def unframe(hdr, dtype=torch.float32):
    """An empty tensor of the shape a received header gives."""
    return torch.empty([int(x) for x in hdr[1:1 + int(hdr[0])]], dtype=dtype)


def stash_weights(names, params):
    """1F1B's weight stash: a copy of the weights a forward runs with (its backward uses it)."""
    return {n: p.detach().clone().requires_grad_(True) for n, p in zip(names, params)}


def pack(params, flat):
    """The gradients into the stage's flat buffer (zeros for a weight without one)."""
    off = 0
    for p in params:
        n = p.numel()
        g = p.grad if p.grad is not None else torch.zeros_like(p)
        flat[off:off + n].copy_(g.reshape(-1))
        off += n


def unpack(params, flat):
    """The summed gradients back from the flat buffer."""
    off = 0
    for p in params:
        n = p.numel()
        p.grad = flat[off:off + n].view_as(p).clone()
        off += n


def update(params, opt, m):
    """1F1B's step after a round: the m replicas' summed gradients averaged, the optimizer's
    step."""
    for p in params:
        p.grad.div_(m)
    opt.step()


class PipelineError(RuntimeError):
    """A pipeline step failed; the message names the stage and rank."""


def stage_of(plan, rank):
    """(stage index, replica index) of a rank in a plan."""
    for s in plan["stages"]:
        if rank in s["ranks"]:
            return s["stage"], s["ranks"].index(rank)
    raise PipelineError(f"rank {rank} is in no stage of the plan "
                        f"({sum(len(s['ranks']) for s in plan['stages'])} ranks)")


class PipelineTrainer:
    """layers: the whole chain (every rank builds it the same way, e.g. from one seed); this
    rank keeps its stage's layers. loss_fn(output, target) -> mean loss of a microbatch.
    appliances "h:p", token: of the appliance (the stage's job ids are job_base + stage);
    Tally is used only by stages with more than one replica."""

    def __init__(self, layers, plan, rank, loss_fn, lr=0.1, momentum=0.0, appliances=None,
                 job_base=100, token=None, op_timeout_ms=20000):
        self.plan = plan
        self.rank = rank
        self.s, self.r = stage_of(plan, rank)
        st = plan["stages"][self.s]
        self.nstages = len(plan["stages"])
        self.reps = [len(x["ranks"]) for x in plan["stages"]]
        self.module = torch.nn.Sequential(*list(layers)[st["layers"][0]:st["layers"][1]])
        self.loss_fn = loss_fn
        self.params = [p for p in self.module.parameters() if p.requires_grad]
        self.opt = torch.optim.SGD(self.params, lr=lr, momentum=momentum) if self.params else None
        self.agent = None
        self.tid = None
        self.where = f"stage {self.s} rank {rank} (replica {self.r} of {self.reps[self.s]})"
        # stages whose plan says "ring": a gloo group of their replicas (every rank creates
        # every group, in stage order, as torch.distributed requires)
        self.group = None
        for x in plan["stages"]:
            if x.get("aggregation") == "ring" and len(x["ranks"]) > 1:
                g = dist.new_group(x["ranks"])
                if x["stage"] == self.s:
                    self.group = g
        if self.reps[self.s] > 1 and self.params:
            # the stage's gradients in one flat buffer, one allreduce or push_pull per round
            # (a bucket, as DDP's): a call per weight pays a ring's 2(n - 1) steps per weight
            # (the digits MLP's 8 weights: 1.3x the time per minibatch over gloo on 0.1 Gbit/s)
            self.flat = torch.zeros(sum(p.numel() for p in self.params), dtype=torch.float32)
        if self.reps[self.s] > 1 and self.params and self.group is None:
            from ..agent import Agent
            kw = dict(job_id=job_base + self.s, rank=self.r, world_size=self.reps[self.s],
                      local_rank=0, local_size=1, op_timeout_ms=op_timeout_ms, average=0)
            if appliances:
                kw["appliances"] = appliances
            if token is not None:
                kw["token"] = token
            self.agent = Agent(**kw)
            self.tid = self.agent.declare(f"pipe.stage{self.s}.grads", self.flat.numel() * 4,
                                          "f32", 0, average=False)

    def _peer(self, stage, k):
        return self.plan["stages"][stage]["ranks"][k % self.reps[stage]]

    def mine(self, K):
        return [k for k in range(K) if k % self.reps[self.s] == self.r]

    def _send(self, t, dst, k, what):
        try:
            hdr = frame(t)
            dist.send(hdr, dst, tag=2 * k)
            dist.send(t.contiguous(), dst, tag=2 * k + 1)
        except RuntimeError as e:
            ps, _ = stage_of(self.plan, dst)
            raise PipelineError(f"{self.where}: sending the {what} of microbatch {k} to stage "
                                f"{ps} rank {dst} failed: {e}") from e

    def _recv(self, src, k, what, dtype=torch.float32):
        try:
            hdr = torch.zeros(HDR, dtype=torch.int64)
            dist.recv(hdr, src, tag=2 * k)
            t = unframe(hdr, dtype)
            dist.recv(t, src, tag=2 * k + 1)
            return t
        except RuntimeError as e:
            ps, _ = stage_of(self.plan, src)
            raise PipelineError(f"{self.where}: receiving the {what} of microbatch {k} from "
                                f"stage {ps} rank {src} failed: {e}") from e

    def step(self, x, y, K):
        """One synchronous step on minibatch (x, y) cut in K microbatches (every rank passes
        the same x, y; only the first stage reads x, only the last y). Returns the sum of
        the last stage's microbatch losses / K on last-stage ranks, else None."""
        if x.shape[0] % K:
            raise ValueError(f"minibatch of {x.shape[0]} does not split in {K} microbatches")
        xs, ys = x.chunk(K), y.chunk(K)
        first, last = self.s == 0, self.s == self.nstages - 1
        for p in self.params:
            p.grad = None
        saved = {}
        loss_sum = 0.0
        for k in self.mine(K):
            inp = xs[k] if first else self._recv(self._peer(self.s - 1, k), k, "activation")
            inp = inp.detach().requires_grad_(not first)
            out = self.module(inp)
            if last:
                loss = self.loss_fn(out, ys[k]) / K
                loss_sum += float(loss)
                saved[k] = (inp, loss, None)
            else:
                self._send(out.detach(), self._peer(self.s + 1, k), k, "activation")
                saved[k] = (inp, out, None)
        for k in reversed(self.mine(K)):
            inp, out, _ = saved.pop(k)
            if last:
                out.backward()
            else:
                g = self._recv(self._peer(self.s + 1, k), k, "gradient")
                if out.requires_grad:  # else a first stage without weights: nothing to do
                    out.backward(g)
            if not first:
                self._send(inp.grad, self._peer(self.s - 1, k), k, "gradient")
        self._aggregate()
        if self.opt is not None:
            self.opt.step()
        return loss_sum if last else None

    # -----------------------------------------------------------------------------------------
    # 1F1B with weight stashing (PipeDream)

    def in_flight(self):
        """Minibatches this replica keeps in flight: the plan's stage "in_flight" (the planner's
        window, deep enough that the round trip to the last stage fits: planner.depths), or
        for a plan without it the workers from this stage on over its replicas (PipeDream's
        NOAM per stage; S - s without replication)."""
        f = self.plan["stages"][self.s].get("in_flight")
        if f is not None:
            if not isinstance(f, int) or isinstance(f, bool) or f < 1:
                raise PipelineError(f"{self.where}: the plan's stages[{self.s}].in_flight must "
                                    f"be an integer >= 1, not {f!r}")
            return f
        m = self.reps[self.s]
        return -(-sum(self.reps[self.s:]) // m)

    def train_1f1b(self, batches):
        """1F1B over the minibatches `batches` [(x, y)] (every rank passes the same list):
        minibatch t runs on replica t mod m_s of stage s; each replica keeps in_flight()
        minibatches in flight, then alternates one backward, one forward. A forward uses the
        weights of the time and stashes them; its backward computes the gradient with that
        stash; after each backward the stage's replicas average their gradients (the m_s
        minibatches of that round) and step. The objects alive when it starts are left out
        of Python's collections until it returns (gc.freeze). Returns the last stage's
        losses, else []."""
        m = self.reps[self.s]
        if len(batches) % m:
            raise ValueError(f"{len(batches)} minibatches: not a multiple of stage {self.s}'s "
                             f"{m} replicas")
        mine = list(range(self.r, len(batches), m))
        F = self.in_flight()
        first, last = self.s == 0, self.s == self.nstages - 1
        names = [n for n, p in self.module.named_parameters() if p.requires_grad]
        stash, pend, losses = {}, [], []
        # when each of this replica's minibatches finished (its step done): the steady-state
        # time per minibatch is the interval between them over the stage's replicas
        self.done_at = []

        def fwd(t):
            x, y = batches[t]
            inp = x if first else self._recv(self._peer(self.s - 1, t), t, "activation")
            inp = inp.detach().requires_grad_(not first)
            w = stash_weights(names, self.params)
            out = _functional_call(self.module, w, (inp,))
            if last:
                out = self.loss_fn(out, y)
                losses.append(float(out))
            else:
                pend.append(self._isend(out.detach(), self._peer(self.s + 1, t), t,
                                        "activation"))
            stash[t] = (inp, out, w)

        def bwd(t):
            inp, out, w = stash.pop(t)
            if last:
                out.backward()
            else:
                g = self._recv(self._peer(self.s + 1, t), t, "gradient")
                if out.requires_grad:  # else a first stage without weights: nothing to do
                    out.backward(g)
            if not first:
                pend.append(self._isend(inp.grad, self._peer(self.s - 1, t), t, "gradient"))
            for n, p in zip(names, self.params):
                g = w[n].grad
                p.grad = g if g is not None else torch.zeros_like(p)
            self._aggregate()
            if self.params:
                update(self.params, self.opt, m)
            self.done_at.append(time.perf_counter())

        # Python's full collections scan every object the process holds (torch's own: some
        # 60 ms on the emulated cluster's ranks) and stall the whole pipeline while one rank
        # runs one; what lived before training is frozen out of them for its duration (as
        # Megatron-LM's manual GC, for the same straggler)
        gc.freeze()
        try:
            for t in mine[:F]:
                fwd(t)
            for j, t in enumerate(mine):
                bwd(t)
                if j + F < len(mine):
                    fwd(mine[j + F])
            for h in pend:
                self._wait(*h)
        finally:
            gc.unfreeze()
        return losses

    def _isend(self, t, dst, k, what):
        try:
            t = t.contiguous()
            hdr = frame(t)
            return (dist.isend(hdr, dst, tag=2 * k), dist.isend(t, dst, tag=2 * k + 1),
                    hdr, t, dst, k, what)
        except RuntimeError as e:
            ps, _ = stage_of(self.plan, dst)
            raise PipelineError(f"{self.where}: sending the {what} of microbatch {k} to stage "
                                f"{ps} rank {dst} failed: {e}") from e

    def _wait(self, h1, h2, hdr, t, dst, k, what):
        try:
            h1.wait()
            h2.wait()
        except RuntimeError as e:
            ps, _ = stage_of(self.plan, dst)
            raise PipelineError(f"{self.where}: sending the {what} of minibatch {k} to stage "
                                f"{ps} rank {dst} failed: {e}") from e

    def _aggregate(self):
        if self.group is not None and self.params:
            pack(self.params, self.flat)
            try:
                dist.all_reduce(self.flat, group=self.group)
            except RuntimeError as e:
                ranks = self.plan["stages"][self.s]["ranks"]
                raise PipelineError(f"{self.where}: summing stage {self.s}'s gradients over its "
                                    f"replicas (ranks {ranks}, gloo ring) failed: {e}") from e
            unpack(self.params, self.flat)
            return
        if self.agent is None:
            return
        pack(self.params, self.flat)
        try:
            self.agent.wait(self.agent.push_pull(self.tid, self.flat.data_ptr(),
                                                 self.flat.numel() * 4))
        except Exception as e:
            ranks = self.plan["stages"][self.s]["ranks"]
            raise PipelineError(f"{self.where}: summing stage {self.s}'s gradients over its "
                                f"replicas (ranks {ranks}, Tally job {self.agent.job_id}) "
                                f"failed: {e}") from e
        unpack(self.params, self.flat)

    def close(self):
        if self.agent is not None:
            self.agent.close()
            self.agent = None
