#!/usr/bin/env bash
# deploy/quickstart.sh — the README's first command: install what Tally needs on a fresh
# Debian 12 machine, build it, and run the main job on the embedded default.
# Today the main job is the reducer benchmark (tally-perf sum); it grows into an aggregation
# through tallyd on a virtual DPDK device as the appliance lands.
set -euo pipefail
cd "$(dirname "$0")/.."
tests/run.sh --setup-only
build=${TALLY_BUILD:-build}
exec "$build/perf/tally-perf" sum "$@"
