#!/usr/bin/env bash
# deploy/quickstart.sh — the README's first command: install what Tally needs on a fresh
# Debian 12 machine, build it, and run the main job on the embedded default: data-parallel
# training of an MLP on scikit-learn's digits by 4 torchrun CPU workers whose gradients are
# summed by tallyd on a virtual DPDK device (net_af_packet on a veth pair, workers in a
# network namespace, --no-huge). Needs root (namespaces, DPDK); as another user the job runs
# through the software appliance over kernel UDP (tally-udpd, appliance/udpd) and says so.
# Extra arguments go to gpu_agent/examples/train.py (--epochs N, --workers N, --backend gloo, ...);
# --optimizer onebit-adam (or onebit-lamb) trains with 1-bit Adam (LAMB): full-precision warm-up,
# then the momentum 1-bit compressed, the appliance as the compression server.
set -euo pipefail
cd "$(dirname "$0")/.."
# Only the main job's packages (tests/run.sh --packages main: the build, DPDK, iproute2,
# PyTorch, scikit-learn; not QEMU, mkosi, Prometheus, Open MPI or the packaging tools the
# test suites use) and only what train.py runs: tallyd, tally-udpd, tallyctl, the agent
# library and the loss relay (--drop). tests/run.sh installs and builds the rest later.
tests/run.sh --setup-only --packages main --targets "appliance/tallyd appliance/udpd/tally-udpd \
	control/tallyctl gpu_agent/libtally_agent.so tests/agent/agent_relay"
# Debian's torch and scikit-learn live under /usr/bin/python3, not a python3 earlier on PATH.
for arg in "$@"; do
	case "$arg" in
	--optimizer=onebit-*|onebit-*) echo "quickstart: 1-bit optimizer ($arg): tally.optim, gpu_agent/README.md" ;;
	esac
done
exec /usr/bin/python3 gpu_agent/examples/train.py "$@"
