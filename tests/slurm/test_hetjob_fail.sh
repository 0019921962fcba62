#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# slurm / hetjob_fail: appliances that cannot start (deploy/slurm/tally-job.sh): one with a
# setting it refuses (TALLY_APPLIANCE_ARGS="--max-chunk 1", exits at once), one that never gets
# ready (TALLY_APPLIANCE_KIND=tallyd with a tallyd that hangs): each job ends FAILED within its
# deadline with an error naming the appliance, its node and the cause; the training never ran,
# nothing is left. And a training that exits 3: the job's ExitCode is 3:0, appliances stopped.
. "$(dirname "$0")/lib.sh"
slurm_skip_checks
trap slurm_down EXIT
slurm_up || exit 1
SBATCH_OPTS="-N1 -n1 -c2 : -N1 -n1 -c2"

check_fail() { # check_fail WHAT ID PATTERN...
	local what=$1 id=$2 st out p; shift 2
	st=$(job_wait "$id" 90)
	out=$W/out/job-$id.out
	echo "---- $what: job $id $st:"; cat "$out"
	[ "$st" = FAILED ] || { echo "FAIL: $what: job state $st"; exit 1; }
	for p in "$@"; do grep -q -- "$p" "$out" || { echo "FAIL: $what: no '$p' in the job's error"; exit 1; }; done
	grep -q '^epoch\|gradients:' "$out" && { echo "FAIL: $what: the training ran"; exit 1; }
	local t=$((SECONDS + 10 * MULT))
	while [ $SECONDS -lt $t ] && { [ -n "$(job_procs)" ] || ! table_empty; }; do sleep 0.3; done
	[ -z "$(job_procs)" ] && table_empty || { echo "FAIL: $what: left:"; job_procs; squeue -s; exit 1; }
	echo "ok: $what"
}

t0=$SECONDS
id=$(TALLY_APPLIANCE_ARGS="--max-chunk 1" tally_submit "${TRAIN[@]}" --workers 2 --epochs 2) || exit 1
check_fail "bad setting" "$id" "appliance 0 (tally-udpd on node $NODE" "exited with status 2 before it was ready" "max-chunk"
echo "bad setting: failed in $((SECONDS - t0)) s"

# a tallyd that never answers its control socket: the ready deadline names it
fake=$W/fakebin
mkdir -p "$fake"
printf '#!/bin/sh\nexec sleep 1000\n' >"$fake/tallyd"; chmod +x "$fake/tallyd"
ln -s "$BUILD/control/tallyctl" "$fake/tallyctl"; ln -s "$BUILD/appliance/udpd/tally-udpd" "$fake/tally-udpd"
t0=$SECONDS
id=$(TALLY_BIN=$fake TALLY_APPLIANCE_KIND=tallyd TALLY_READY_TIMEOUT_S=5 \
	tally_submit "${TRAIN[@]}" --workers 2 --epochs 2) || exit 1
check_fail "never ready" "$id" "appliance 0 (tallyd on node $NODE" "not ready (tallyctl status) in 5 s"
echo "never ready: failed in $((SECONDS - t0)) s"

# a training that fails: the job's exit status is the training's, the appliances stopped
id=$(tally_submit /bin/sh -c 'echo training fails; exit 3') || exit 1
st=$(job_wait "$id" 90)
ex=$(job_exit "$id")
cat "$W/out/job-$id.out" | cut -c1-160
[ "$st" = FAILED ] && [ "$ex" = 3:0 ] || { echo "FAIL: failed training: job $st, ExitCode $ex (want FAILED 3:0)"; exit 1; }
grep -q 'appliance 0 counters:' "$W/out/job-$id.out" || { echo "FAIL: the appliance was not drained and stopped"; exit 1; }
t=$((SECONDS + 10 * MULT))
while [ $SECONDS -lt $t ] && { [ -n "$(job_procs)" ] || ! table_empty; }; do sleep 0.3; done
[ -z "$(job_procs)" ] && table_empty || { echo "FAIL: failed training: left:"; job_procs; squeue -s; exit 1; }
echo "ok: failed training: job FAILED, ExitCode $ex, appliance stopped"
echo PASS
