#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# slurm / hetjob_train: sbatch of the quick-start training as a heterogeneous job
# (deploy/slurm/train.sbatch through deploy/slurm/tally-job.sh: the appliance component on one
# node, a 2-rank training on the other): test accuracy as the same run over gloo (within 0.03,
# >= 0.85); the appliance's job record and counters show the job (id, world size, key and
# quota from Slurm; joins, pushes, every packet authenticated with the job key); exit status 0;
# afterwards no appliance or training process, nothing in the job table, the key removed. Then
# the colocated option (a plain job: the appliance on the training node).
. "$(dirname "$0")/lib.sh"
slurm_skip_checks
trap slurm_down EXIT
slurm_up || exit 1
EPOCHS=4
gloo_reference $EPOCHS

# the documented batch script, deploy/slurm/train.sbatch (its #SBATCH hetjob components)
mkdir -p "$W/shared"
id=$(cd "$W/out" && env TALLY_ROOT="$SRC" TALLY_BIN="$BUILD" TALLY_SLURM_DIR="$W/shared" TALLY_EPOCHS=$EPOCHS \
	TALLY_READY_TIMEOUT_S=$((30 * MULT)) sbatch --parsable -o "$W/out/job-%j.out" "$SRC/deploy/slurm/train.sbatch") || exit 1
check_run hetjob "$id"
grep -q "(het group 0)" "$W/out/job-$id.out" || { echo "FAIL: not a heterogeneous job"; exit 1; }
SBATCH_OPTS="-N1 -n1 -c2"
id=$(TALLY_RANKS_PER_TASK=2 tally_submit "${TRAIN[@]}" --workers 2 --epochs $EPOCHS) || exit 1
check_run colocated "$id"
grep -q colocated "$W/out/job-$id.out" || { echo "FAIL: not colocated"; exit 1; }
echo PASS
