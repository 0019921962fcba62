#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# slurm / hetjob_train: sbatch of the quick-start training as a heterogeneous job through
# deploy/slurm/tally-job.sh (appliance component on one node, 2-rank training on the other):
# test accuracy as the same run over gloo (within 0.03, >= 0.85), the appliance's counters show
# the job (its id, world size, key and quota from Slurm; joins, pushes, every packet
# authenticated with the job key), exit status 0, and
# afterwards no appliance or training process and nothing in the job table. Then the colocated
# option (a plain job: the appliance on the training node).
. "$(dirname "$0")/lib.sh"
slurm_skip_checks
trap slurm_down EXIT
slurm_up || exit 1
EPOCHS=4
gloo_reference $EPOCHS

SBATCH_OPTS="-N1 -n1 -c2 : -N1 -n1 -c2"
id=$(TALLY_RANKS_PER_TASK=2 tally_submit "${TRAIN[@]}" --workers 2 --epochs $EPOCHS) || exit 1
check_run hetjob "$id"
SBATCH_OPTS="-N1 -n1 -c2"
id=$(TALLY_RANKS_PER_TASK=2 tally_submit "${TRAIN[@]}" --workers 2 --epochs $EPOCHS) || exit 1
check_run colocated "$id"
grep -q colocated "$W/out/job-$id.out" || { echo "FAIL: not colocated"; exit 1; }
echo PASS
