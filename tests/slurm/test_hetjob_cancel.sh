#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# slurm / hetjob_cancel: scancel of a hetjob mid-training (deploy/slurm/tally-job.sh): the
# training and the appliances stop within seconds, no process of the job is left, nothing in
# the job table, the job key is gone. While it runs: the key file is mode 0600 in a 0700 dir.
. "$(dirname "$0")/lib.sh"
slurm_skip_checks
trap slurm_down EXIT
slurm_up || exit 1
SBATCH_OPTS="-N1 -n1 -c2 : -N1 -n1 -c2"
id=$(TALLY_RANKS_PER_TASK=2 tally_submit "${TRAIN[@]}" --workers 2 --epochs 400) || exit 1
# mid-training: epochs are being printed
deadline=$((SECONDS + 120 * MULT))
until grep -q '^epoch  2' "$W/out/job-$id.out" 2>/dev/null; do
	[ $SECONDS -lt $deadline ] || { echo "FAIL: training did not reach epoch 2"; cat "$W/out/job-$id.out"; exit 1; }
	st=$(scontrol -o show job "$id" | grep -o 'JobState=[A-Z]*')
	case "$st" in *RUNNING|*PENDING|*CONFIGURING) ;; *) echo "FAIL: job $st"; cat "$W/out/job-$id.out"; exit 1 ;; esac
	sleep 0.3
done
key=$W/shared/$id/job.key
modes=$(stat -c '%a %s' "$W/shared/$id" "$key" | tr '\n' ' ')
[ "$modes" = "700 4096 600 32 " ] || { echo "FAIL: job dir / key modes and sizes: $modes"; exit 1; }
echo "job dir 0700, key file 0600 (32 bytes)"
[ -n "$(job_procs | grep tally-udpd)" ] || { echo "FAIL: no appliance running"; job_procs; exit 1; }
nproc=$(job_procs | wc -l)
t0=$SECONDS
scancel "$id"
limit=$((15 * MULT))
while [ $((SECONDS - t0)) -lt "$limit" ] && { [ -n "$(job_procs)" ] || ! table_empty; }; do sleep 0.2; done
took=$((SECONDS - t0))
[ -z "$(job_procs)" ] || { echo "FAIL: processes left ${limit} s after scancel:"; job_procs; exit 1; }
table_empty || { echo "FAIL: job table not empty after ${limit} s:"; squeue; squeue -s; exit 1; }
[ ! -e "$key" ] || { echo "FAIL: job key left"; exit 1; }
st=$(job_wait "$id" 10)
[ "$st" = CANCELLED ] || { echo "FAIL: job state $st"; exit 1; }
grep -v '^epoch' "$W/out/job-$id.out" | tail -n 8
echo "ok: scancel: $nproc processes (training, appliance) gone in <= $took s, job table empty, key removed"
echo PASS
