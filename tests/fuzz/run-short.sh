#!/bin/sh
# run-short.sh BINARY SEED_CORPUS WORK_DIR RUNS — a bounded libFuzzer run (a test).
# New inputs go to WORK_DIR (in the build tree), never into the committed seed corpus.
set -eu
bin=$1 seed=$2 work=$3 runs=$4
mkdir -p "$work"
exec "$bin" -runs="$runs" -max_total_time=60 -seed=1 -max_len=4096 "$work" "$seed"
