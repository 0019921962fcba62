#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# slurm / hetjob_two: two heterogeneous jobs at once on the same two nodes (each component 2 of
# the nodes' 4 CPUs): both run at the same time, each with its own key (different bytes), its
# own appliance (own port) admitting its own Slurm job id; both trained to the gloo accuracy,
# their counters show their own keyed job, and nothing is left afterwards.
. "$(dirname "$0")/lib.sh"
slurm_skip_checks
trap slurm_down EXIT
slurm_up || exit 1
EPOCHS=4
gloo_reference $EPOCHS
SBATCH_OPTS="-N1 -n1 -c2 : -N1 -n1 -c2"
a=$(TALLY_RANKS_PER_TASK=2 tally_submit "${TRAIN[@]}" --workers 2 --epochs $EPOCHS) || exit 1
b=$(TALLY_RANKS_PER_TASK=2 tally_submit "${TRAIN[@]}" --workers 2 --epochs $EPOCHS) || exit 1
# both appliances up at once: both job dirs with their keys and ready files
deadline=$((SECONDS + 90 * MULT))
until [ -e "$W/shared/$a/ready.0" ] && [ -e "$W/shared/$b/ready.0" ]; do
	[ $SECONDS -lt $deadline ] || { echo "FAIL: the two jobs' appliances were never up at the same time"; squeue; exit 1; }
	sleep 0.1
done
cmp -s "$W/shared/$a/job.key" "$W/shared/$b/job.key" && { echo "FAIL: both jobs have the same key"; exit 1; }
pa=$(cat "$W/shared/$a/ready.0") pb=$(cat "$W/shared/$b/ready.0")
[ "$pa" != "$pb" ] || { echo "FAIL: both appliances on $pa"; exit 1; }
echo "at once: job $a appliance $pa, job $b appliance $pb, keys differ"
job_wait "$a" 180 >/dev/null; job_wait "$b" 180 >/dev/null
check_run "job $a" "$a"
check_run "job $b" "$b"
grep -q "appliances $pa " "$W/out/job-$a.out" && grep -q "appliances $pb " "$W/out/job-$b.out" || {
	echo "FAIL: a job trained through the other's appliance"; exit 1; }
echo PASS
