#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Data-parallel training through Tally: an MLP on scikit-learn's digits (Debian's
python3-sklearn ships the data set), PyTorch DDP on CPU workers, gradients averaged by a
Tally appliance through the DDP communication hook (gloo only sets up and broadcasts).

    /usr/bin/python3 gpu_agent/examples/train.py                 # 4 workers, Tally
    /usr/bin/python3 gpu_agent/examples/train.py --backend gloo  # same run, plain DDP/gloo

Without TALLY_APPLIANCES the launcher starts an appliance itself and says which: tallyd on a
virtual DPDK device (net_af_packet on a veth, workers in a network namespace) when tallyd is
built and we are root, else the software appliance over kernel UDP (the dataplane engine,
appliance/udpd, built as tally-udpd); --appliance forces one.
It then runs torchrun with --workers processes, prints loss and accuracy per epoch (rank 0)
and the appliance's counters at the end. --drop PCT puts a seeded lossy relay between the
workers and the appliance; --slow-rank R makes one worker sleep --slow-ms per step.
--dump FILE writes rank 0's final parameters and per-step losses (JSON) for comparisons.
--device cuda puts the model, data and gradients on the GPU (ranks may share one): the DDP
hook then hands CUDA tensors to the agent, which stages them through pinned host memory.
"""
import argparse
import glob
import json
import os
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def args_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", choices=("tally", "gloo"), default="tally")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0: all epochs)")
    p.add_argument("--batch", type=int, default=32, help="per-worker batch size")
    p.add_argument("--optimizer", choices=("sgd", "adam", "lamb", "onebit-adam", "onebit-lamb"), default="sgd",
                   help="sgd/adam/lamb: gradients averaged through the DDP hook (or gloo); onebit-adam / "
                        "onebit-lamb: tally.optim.OneBitAdam / OneBitLamb, no DDP: full-precision gradient "
                        "averages for --freeze-step steps, then the momentum 1-bit compressed (tally backend only)")
    p.add_argument("--freeze-step", type=int, default=0,
                   help="1-bit optimizers: warm-up steps (0: a fifth of the run's steps)")
    p.add_argument("--model", choices=("mlp", "transformer"), default="mlp",
                   help="mlp: scikit-learn's digits; transformer: a small transformer encoder on synthetic "
                        "token sequences (class = how many of the 8 tokens are > 4)")
    p.add_argument("--lr", type=float, default=None,
                   help="default: 0.05 (sgd), 2e-3 (adam, onebit-adam), 1e-2 (lamb, onebit-lamb)")
    p.add_argument("--eps", type=float, default=None,
                   help="Adam/LAMB eps (default 1e-3 on the digits MLP, whose rarely-lit pixels have a near-zero "
                        "variance that a frozen 1-bit momentum would divide by; 1e-8 on the transformer)")
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="cuda: model, data and gradients on the GPU (local rank r on GPU r modulo the GPUs "
                        "there are, so ranks may share one); the DDP hook hands CUDA tensors to the agent")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--appliance", choices=("auto", "udp", "tallyd"),
                   default=os.environ.get("TALLY_TRAIN_APPLIANCE", "auto"),
                   help="auto: tallyd when built and running as root (and no --drop), else udp "
                        "(default: $TALLY_TRAIN_APPLIANCE or auto)")
    p.add_argument("--udpd", default=None, help="software appliance binary (tally-udpd)")
    p.add_argument("--tallyd", default=None, help="tallyd binary (default: $TALLY_BUILD, then build/, then build*/: appliance/tallyd)")
    p.add_argument("--relay", default=None, help="impairment relay binary (agent_relay / tly_relay)")
    p.add_argument("--drop", type=float, default=0.0, help="percent of packets dropped each way")
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--slow-ms", type=float, default=30.0)
    p.add_argument("--deterministic", action="store_true", help="appliance sums in rank order")
    p.add_argument("--local-agg", nargs="?", const="sum", default=None, choices=("sum", "shard"),
                   help="intra-machine aggregation: 'sum' (the default of a bare --local-agg) sums the "
                        "local workers in shared memory, one push per machine; 'shard' reduce-scatters, "
                        "each worker pushes its shard on its own lane (job 1 | lane << 24)")
    p.add_argument("--dump", default=None, help="write final params + losses (rank 0) to this JSON file")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    return p


# ---------------------------------------------------------------- launcher

def build_dirs():
    """The build trees to search: $TALLY_BUILD, then build/ (the README's), then the other
    build*/ folders by name, so a second tree (a GPU bundle, a helper's build-x) never
    shadows the one just built."""
    env = os.environ.get("TALLY_BUILD")
    dirs = [os.path.abspath(env)] if env else []
    dirs.append(os.path.join(ROOT, "build"))
    dirs += sorted(d for d in glob.glob(os.path.join(ROOT, "build*")) if d not in dirs)
    return [d for d in dirs if os.path.isdir(d)]


def find_binary(name, given):
    if given:
        return given
    for d in build_dirs():
        for sub in ("tests/agent", "tests/e2e", "appliance", "appliance/udpd", "control"):
            p = os.path.join(d, sub, name)
            if os.path.exists(p):
                return p
    return None


def free_port_block(n):
    for _ in range(50):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", 0))
        base = s.getsockname()[1]
        s.close()
        if base + n >= 65535:
            continue
        ok = True
        for i in range(n):
            t = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            try:
                t.bind(("127.0.0.1", base + i))
            except OSError:
                ok = False
            t.close()
        if ok:
            return base
    raise RuntimeError("no free UDP port block")


def torchrun_args(nproc):
    """torchrun on one machine. Not --standalone: in torch 1.13 that always rendezvouses on
    port 29400, so two launches at once would join each other; a free port and id instead."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return ["--nnodes=1", f"--nproc_per_node={nproc}", "--rdzv_backend=c10d",
            f"--rdzv_endpoint=127.0.0.1:{port}", f"--rdzv_id=tally{os.getpid()}"]


def stop(proc):
    if proc and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def torch_store_compat():
    """Debian's torch 2.x is built without libuv, which TCPStore uses by default since 2.4
    ("use_libuv was requested but PyTorch was build without libuv support"), also for the
    clients init_process_group makes under torchrun. Where a libuv store cannot be made,
    every TCPStore of this process is made without it, and USE_LIBUV=0 is inherited by the
    workers. Nothing changes on torch 1.13 or a torch with libuv."""
    import torch.distributed as dist
    try:
        dist.TCPStore("127.0.0.1", 0, is_master=True, use_libuv=True)
        return
    except TypeError:
        return  # torch < 2.2: no libuv store at all
    except RuntimeError as e:
        if "libuv" not in str(e):
            raise
    os.environ["USE_LIBUV"] = "0"
    if getattr(dist.TCPStore, "_tally_no_libuv", False):
        return

    class _Store(dist.TCPStore):
        _tally_no_libuv = True

        def __init__(self, *args, **kw):
            kw["use_libuv"] = False
            super().__init__(*args, **kw)
    import torch.distributed.elastic.rendezvous.c10d_rendezvous_backend  # noqa: F401
    dist.TCPStore = _Store
    # modules (not attributes: torch.distributed.rendezvous is also a function's name)
    for m in ("torch.distributed.rendezvous", "torch.distributed.elastic.rendezvous.c10d_rendezvous_backend"):
        if hasattr(sys.modules.get(m), "TCPStore"):
            sys.modules[m].TCPStore = _Store


def torchrun_main():
    """torchrun, i.e. torch.distributed.run's main(), with two fixes for Debian's torch.
    1.13 under Python 3.11 fails to parse its own default --redirects/--tee "0" (IntFlag
    iteration skips 0 since 3.11): a plain number maps to Std(number) where the original
    returns None, nothing else. 2.x: torch_store_compat()."""
    sys.path.insert(0, os.path.join(HERE, "..", "python"))
    from tally.run import fix_std  # the same fix as `python3 -m tally.run`
    fix_std()
    torch_store_compat()
    from torch.distributed.run import main
    sys.argv[0] = "torchrun"
    main()


TORCHRUN = f"import sys; sys.path.insert(0, {HERE!r}); import train; train.torchrun_main()"


TALLYD_IP = "10.77.0.1"


def start_tallyd(a, tallyd, cleanups):
    """tallyd on a virtual DPDK device: net_af_packet on one end of a veth pair, the workers
    in a network namespace on the other end (kernel UDP). Names carry this helper's prefix
    and are removed at the end, also on failure."""
    tag = f"agent{os.getpid() % 100000}"
    ns, va, vb = f"{tag}-ns", f"{tag}a", f"{tag}b"
    cleanups.append(f"ip link del {va}")
    cleanups.append(f"ip netns del {ns}")
    sh = (f"ip netns add {ns} && ip link add {va} type veth peer name {vb} && ip link set {vb} netns {ns} && "
          f"ip link set {va} up && ip -n {ns} addr add 10.77.0.2/24 dev {vb} && ip -n {ns} link set {vb} up && "
          f"ip -n {ns} link set lo up")
    if subprocess.call(sh, shell=True) != 0:
        raise SystemExit("train.py: cannot create the namespace / veth for tallyd (needs root and iproute2)")
    ctl = f"/tmp/{tag}-tallyd.sock"
    log = open(f"/tmp/{tag}-tallyd.log", "w+")
    cleanups.append(f"rm -f {ctl} /tmp/{tag}-tallyd.log")
    cmd = [tallyd, "--port", f"net_af_packet0,iface={va}", "--ip", f"{TALLYD_IP}/24", "--open-admission",
           "--mem", "256M", "--max-chunk", "1024", "--mtu", "0", "--ctl-socket", ctl,
           "--eal", f"--no-huge --file-prefix {tag}"]
    if a.deterministic:
        cmd += ["--det-pool", "64M"]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    for _ in range(600):
        log.seek(0)
        text = log.read()
        if "tallyd: ready" in text:
            break
        if proc.poll() is not None:
            raise SystemExit(f"train.py: tallyd exited ({proc.returncode}):\n{text}")
        time.sleep(0.1)
    else:
        stop(proc)
        raise SystemExit("train.py: tallyd did not become ready in 60 s")
    print(f"appliance: tallyd on a virtual DPDK device (net_af_packet on veth {va}, {TALLYD_IP}); "
          f"workers in network namespace {ns}", flush=True)
    return ns, ctl, proc


def launch(a):
    env = dict(os.environ)
    env.setdefault("PYTHONPATH", "")
    env["PYTHONPATH"] = os.path.join(ROOT, "gpu_agent", "python") + (":" + env["PYTHONPATH"] if env["PYTHONPATH"] else "")
    procs = []
    stats_files = []
    stats_ctl = []
    cleanups = []
    wrap = []
    ncores = 2
    try:
        if a.backend == "tally" and not env.get("TALLY_APPLIANCES"):
            tallyd = find_binary("tallyd", a.tallyd)
            use_tallyd = a.appliance == "tallyd" or (a.appliance == "auto" and tallyd and os.geteuid() == 0
                                                     and a.drop == 0)
            if use_tallyd:
                if not tallyd:
                    raise SystemExit("train.py: --appliance tallyd: no tallyd binary (build the tree)")
                ns, ctl, proc = start_tallyd(a, tallyd, cleanups)
                procs.append(proc)
                stats_ctl.append(ctl)
                env["TALLY_APPLIANCES"] = f"{TALLYD_IP}:9170"
                env["TALLY_JOB_ID"] = "1"
                env["TALLY_TOKEN"] = str(0x5EED0000 + a.seed)
                if a.deterministic:
                    env["TALLY_DETERMINISTIC"] = "1"
                wrap = ["ip", "netns", "exec", ns]
        if a.backend == "tally" and not env.get("TALLY_APPLIANCES"):
            udpd = find_binary("tally-udpd", a.udpd)
            if not udpd:
                raise SystemExit("train.py: no appliance: build the tree (ninja -C build) or set TALLY_APPLIANCES")
            port = free_port_block(ncores * (2 if a.drop > 0 else 1))
            token = 0x5EED0000 + a.seed
            st = f"/tmp/tally-train-appl-{os.getpid()}.json"
            stats_files.append(("appliance", st))
            # with intra-machine aggregation the appliance sees one participant per machine; the
            # sharded mode's lanes are one job each (1, 1 | 1 << 24, ...): their JOINs create them
            appl_world = 1 if a.local_agg else a.workers
            adm = ["--open"] if a.local_agg == "shard" else ["--job", "1", "--no-auth", "--token", str(token),
                                                              "--world", str(appl_world)]
            # its own control socket: the default one belongs to a real appliance on this host
            cmd = [udpd, "--addr", "127.0.0.1", "--port", str(port), "--cores", str(ncores)] + adm + [
                   "--stats", st, "--ctl-socket", f"/tmp/tally-train-{os.getpid()}-{port}.sock"]
            if a.deterministic:
                cmd += ["--det-pool", str(64 << 20)]
            procs.append(subprocess.Popen(cmd))
            print(f"appliance: software appliance over kernel UDP ({os.path.basename(udpd)}: dataplane engine, "
                  f"{ncores} cores) on 127.0.0.1:{port}", flush=True)
            worker_port = port
            if a.drop > 0:
                relay = find_binary("agent_relay", a.relay) or find_binary("tly_relay", None)
                if not relay:
                    raise SystemExit("train.py: --drop needs the relay binary (agent_relay)")
                worker_port = port + ncores
                rs = f"/tmp/tally-train-relay-{os.getpid()}.json"
                stats_files.append(("relay", rs))
                procs.append(subprocess.Popen([relay, "--listen", "127.0.0.1", "--to", "127.0.0.1",
                                               "--base", str(worker_port), "--to-base", str(port),
                                               "--ncores", str(ncores), "--seed", str(a.seed + 1),
                                               "--drop", str(a.drop), "--stats", rs]))
                print(f"impaired link: relay on 127.0.0.1:{worker_port} dropping {a.drop}% each way", flush=True)
            time.sleep(0.3)
            for p in procs:
                if p.poll() is not None:
                    raise SystemExit(f"train.py: {p.args[0]} exited with {p.returncode}")
            env["TALLY_APPLIANCES"] = f"127.0.0.1:{worker_port}"
            env["TALLY_JOB_ID"] = "1"
            env["TALLY_TOKEN"] = str(token)
            if a.deterministic:
                env["TALLY_DETERMINISTIC"] = "1"
        if a.local_agg == "sum":
            env["TALLY_LOCAL_AGG"] = "sum"
            print("intra-machine aggregation: local workers summed in shared memory, local rank 0 pushes",
                  flush=True)
        elif a.local_agg == "shard":
            env["TALLY_LOCAL_AGG"] = "shard"
            print("intra-machine aggregation: reduce-scatter in shared memory, every local rank pushes its "
                  "shard on its own lane, all-gather", flush=True)
        cmd = [sys.executable, "-c", TORCHRUN] + torchrun_args(a.workers) + [
               os.path.abspath(__file__), "--worker"] + [x for x in sys.argv[1:] if x != "--worker"]
        rc = subprocess.call(wrap + cmd, env=env)
        for ctl in stats_ctl:
            tallyctl = find_binary("tallyctl", None)
            if tallyctl:
                print("tallyctl stats:", flush=True)
                subprocess.call([tallyctl, "--socket", ctl, "stats"])
                if a.dump:
                    js = subprocess.run([tallyctl, "--socket", ctl, "--json", "stats"], stdout=subprocess.PIPE,
                                        text=True).stdout
                    st = f"/tmp/tally-train-tallyctl-{os.getpid()}.json"
                    with open(st, "w") as fh:
                        fh.write(" ".join(js.split()))
                    stats_files.append(("tallyd", st))
    finally:
        for p in reversed(procs):
            stop(p)
        for c in reversed(cleanups):
            subprocess.call(c, shell=True, stderr=subprocess.DEVNULL)
    counters = {}
    for what, f in stats_files:
        try:
            with open(f) as fh:
                text = fh.read().strip()
            print(f"{what} counters: {text}")
            os.unlink(f)
            counters[what] = json.loads(text)
        except (OSError, ValueError):
            pass
    if a.dump and counters and os.path.exists(a.dump):
        # the appliance's counters (wire bytes) next to rank 0's results
        with open(a.dump) as fh:
            d = json.load(fh)
        d["counters"] = counters
        with open(a.dump, "w") as fh:
            json.dump(d, fh)
    return rc


# ---------------------------------------------------------------- worker

def synthetic_sequences(seed, n=4096 + 1024, length=8):
    """Token sequences (0..9); the class is how many tokens are > 4 (0..8)."""
    import torch
    g = torch.Generator().manual_seed(seed + 77)
    x = torch.randint(0, 10, (n, length), generator=g)
    return x, (x > 4).sum(1)


def TinyTransformer(vocab=10, length=8, d=32, heads=4, classes=9):
    import torch
    import torch.nn as nn

    class _T(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, d)
            self.pos = nn.Parameter(torch.randn(length, d) * 0.1)
            self.enc = nn.TransformerEncoderLayer(d, heads, dim_feedforward=64, dropout=0.0, batch_first=True)
            self.head = nn.Linear(d, classes)

        def forward(self, x):
            return self.head(self.enc(self.emb(x) + self.pos).mean(1))
    return _T()


def worker_device(a, torch):
    if a.device == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise SystemExit("train.py: --device cuda: torch sees no usable GPU (torch.cuda.is_available() is "
                         "False); use --device cpu")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    dev = torch.device("cuda", local % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    return dev


def worker(a):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from sklearn.datasets import load_digits
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch_store_compat()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    dev = worker_device(a, torch)

    if a.model == "mlp":
        d = load_digits()
        X = torch.tensor(d.data, dtype=torch.float32) / 16.0
        y = torch.tensor(d.target, dtype=torch.int64)
        perm = torch.randperm(len(X), generator=torch.Generator().manual_seed(a.seed))
        X, y = X[perm], y[perm]
        ntrain = 1500
        model = nn.Sequential(nn.Linear(64, a.hidden), nn.ReLU(), nn.Linear(a.hidden, a.hidden // 2), nn.ReLU(),
                              nn.Linear(a.hidden // 2, 10))
    else:
        X, y = synthetic_sequences(a.seed)
        ntrain = 4096
        model = TinyTransformer()
    model, X, y = model.to(dev), X.to(dev), y.to(dev)  # built on the CPU: the same start everywhere
    Xtr, ytr, Xte, yte = X[:ntrain], y[:ntrain], X[ntrain:], y[ntrain:]
    per = ntrain // world  # equal shards: every worker takes the same number of steps
    total_steps = a.epochs * ((per - a.batch) // a.batch + 1)
    if a.max_steps:
        total_steps = min(total_steps, a.max_steps)
    lr = a.lr if a.lr is not None else {"sgd": 0.05, "adam": 2e-3, "onebit-adam": 2e-3}.get(a.optimizer, 1e-2)
    onebit = a.optimizer.startswith("onebit")
    eps = a.eps if a.eps is not None else (1e-3 if a.model == "mlp" else 1e-8)
    freeze = a.freeze_step or max(1, total_steps // 5)
    if onebit and a.backend != "tally":
        raise SystemExit("train.py: --optimizer onebit-*: the tally backend only (the appliance compresses)")

    state = None
    if onebit:
        # no DDP: the optimizer exchanges the gradients (warm-up) or the momentum itself
        import tally.optim as topt
        import tally.torch as tt
        tt.broadcast_parameters(model.state_dict(), root_rank=0)
        ddp = model
        cls = topt.OneBitAdam if a.optimizer == "onebit-adam" else topt.OneBitLamb
        opt = cls(model.parameters(), lr=lr, freeze_step=freeze, eps=eps)
        if rank == 0:
            print(f"optimizer: {cls.__name__} (lr {lr}), {freeze} warm-up steps at full precision, then the "
                  f"momentum 1-bit compressed through the appliance ({world} workers)", flush=True)
    else:
        ddp = DDP(model, device_ids=[dev.index] if dev.type == "cuda" else None)
    if a.backend == "tally" and not onebit:
        import tally.torch as tt
        state = tt.TallyState()
        ddp.register_comm_hook(state, tt.comm_hook)
        if rank == 0:
            print(f"gradients: Tally DDP comm hook, appliances {state.agent.appliances}, "
                  f"{world} workers, tensors on {dev}", flush=True)
    elif rank == 0:
        print(f"gradients: DDP allreduce over gloo, {world} workers, tensors on {dev}", flush=True)
    if a.optimizer == "sgd":
        opt = torch.optim.SGD(ddp.parameters(), lr=lr, momentum=a.momentum)
    elif a.optimizer == "adam":
        opt = torch.optim.Adam(ddp.parameters(), lr=lr, eps=eps)
    elif a.optimizer == "lamb":
        import tally.onebit
        opt = tally.onebit.Lamb(ddp.parameters(), lr=lr, eps=eps)
    if rank == 0 and not onebit:
        print(f"optimizer: {type(opt).__name__} (lr {lr})", flush=True)
    lossf = nn.CrossEntropyLoss()

    steps, losses, step_s = 0, [], []
    t0 = time.time()
    for epoch in range(a.epochs):
        g = torch.Generator().manual_seed(a.seed * 1000 + epoch)
        order = torch.randperm(ntrain, generator=g)[rank * per:(rank + 1) * per]
        ddp.train()
        tot, nb = 0.0, 0
        for b in range(0, per - a.batch + 1, a.batch):
            idx = order[b:b + a.batch]
            ts = time.time()
            opt.zero_grad()
            loss = lossf(ddp(Xtr[idx]), ytr[idx])
            loss.backward()
            opt.step()
            if rank == a.slow_rank:
                time.sleep(a.slow_ms / 1000.0)
            tot += loss.item()  # waits for the GPU: step_s is the whole step
            step_s.append(time.time() - ts)
            nb += 1
            losses.append(loss.item())
            steps += 1
            if a.max_steps and steps >= a.max_steps:
                break
        model.eval()
        with torch.no_grad():
            acc = (model(Xte).argmax(1) == yte).float().mean().item()
            train_loss = lossf(model(Xtr), ytr).item()
        if rank == 0:
            print(f"epoch {epoch + 1:2d}  loss {tot / max(nb, 1):.4f}  train loss {train_loss:.4f}  "
                  f"test accuracy {acc:.4f}  ({steps} steps, {time.time() - t0:.1f} s)", flush=True)
        if a.max_steps and steps >= a.max_steps:
            break
    if a.backend == "tally" and rank == 0:
        import tally
        print(f"agent counters (rank 0): {tally.init().stats()}", flush=True)
        if state is not None:
            print(f"tally hook: {state.views} bucket results read in place from the agent's shared memory",
                  flush=True)
    if a.dump and rank == 0:
        flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
        with open(a.dump, "w") as f:
            json.dump({"backend": a.backend, "optimizer": a.optimizer, "model": a.model, "lr": lr,
                       "freeze_step": freeze if onebit else None, "steps": steps, "losses": losses,
                       "accuracy": acc, "train_loss": train_loss, "seconds": time.time() - t0,
                       "device": str(dev), "workers": world, "batch": a.batch, "step_seconds": step_s,
                       "hook_result_views": state.views if state is not None else None,
                       "params": flat.tolist()}, f)
    dist.barrier()
    if a.backend == "tally":
        import tally
        tally.shutdown()
    dist.destroy_process_group()
    return 0


def main():
    a = args_parser().parse_args()
    if a.worker:
        return worker(a)
    return launch(a)


if __name__ == "__main__":
    sys.exit(main())
