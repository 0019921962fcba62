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
ref=$(timeout $((120 * MULT)) "${TRAIN[@]}" --backend gloo --workers 2 --epochs $EPOCHS 2>&1 | \
	grep -o 'test accuracy [0-9.]*' | tail -1 | awk '{print $3}')
[ -n "$ref" ] || { echo "FAIL: the gloo reference run printed no accuracy"; exit 1; }
echo "reference (gloo, no Slurm): test accuracy $ref"

check_run() { # check_run WHAT ID
	local what=$1 id=$2 out st acc ex
	st=$(job_wait "$id" 180)
	out=$W/out/job-$id.out
	echo "---- $what: job $id $st, output:"; grep -v '^epoch\|counters:' "$out" | tail -n 15
	[ "$st" = COMPLETED ] || { echo "FAIL: $what: job state $st"; cat "$out"; exit 1; }
	ex=$(job_exit "$id")
	[ "$ex" = 0:0 ] || { echo "FAIL: $what: ExitCode $ex"; exit 1; }
	acc=$(grep -o 'test accuracy [0-9.]*' "$out" | tail -1 | awk '{print $3}')
	python3 -c "import sys; a, r = float('$acc'), float('$ref'); sys.exit(0 if a >= 0.85 and abs(a - r) <= 0.03 else 1)" || {
		echo "FAIL: $what: accuracy '$acc' vs gloo $ref"; exit 1; }
	grep -q "appliances 127.0.0.1:" "$out" || { echo "FAIL: $what: no appliance address from Slurm"; exit 1; }
	python3 - "$out" "$id" <<'PY' || exit 1
import json, sys
rec = [l for l in open(sys.argv[1]) if "appliance 0 job record:" in l]
if not rec:
    sys.exit("FAIL: no job record from the appliance")
j = json.loads(rec[-1].split("record: ", 1)[1])
print(f"appliance job record: job_id {j['job_id']} world {j['world_size']} auth {j['auth']} quota_bytes {j['quota_bytes']}")
# job id = Slurm's, world = 1 task x 2 ranks, keyed, quota = the 2-CPU component's memory
# (DefMemPerCPU=128 MB: 256 MB, half for keys)
if (j["job_id"], j["world_size"], j["auth"], j["quota_bytes"]) != (int(sys.argv[2]), 2, "keyed", 128 << 20):
    sys.exit("FAIL: the appliance's job is not the Slurm job's")
lines = [l for l in open(sys.argv[1]) if "appliance 0 counters:" in l]
if not lines:
    sys.exit("FAIL: no appliance counters in the job output")
c = json.loads(lines[-1].split("counters: ", 1)[1])
print(f"appliance counters: joins {c['joins']} pushes {c['pushes']} auth_verified {c['auth_verified']} "
      f"wrong_token {c['drops']['wrong_token']} bad_mac {c['drops']['bad_mac']}")
ok = c["joins"] >= 2 and c["pushes"] > 0 and c["auth_verified"] >= c["pushes"] and c["drops"]["wrong_token"] == 0
sys.exit(0 if ok else "FAIL: the counters do not show the keyed job")
PY
	local t=$((SECONDS + 10 * MULT))
	while [ $SECONDS -lt $t ] && { [ -n "$(job_procs)" ] || ! table_empty; }; do sleep 0.3; done
	[ -z "$(job_procs)" ] || { echo "FAIL: $what: processes left:"; job_procs; exit 1; }
	table_empty || { echo "FAIL: $what: job table not empty:"; squeue -s; exit 1; }
	[ -z "$(ls -A "$W/shared")" ] || { echo "FAIL: $what: job dir left: $(ls "$W/shared")"; exit 1; }
	echo "ok: $what: accuracy $acc (gloo $ref), exit 0:0, nothing left"
}

SBATCH_OPTS="-N1 -n1 -c2 : -N1 -n1 -c2"
id=$(TALLY_RANKS_PER_TASK=2 tally_submit "${TRAIN[@]}" --workers 2 --epochs $EPOCHS) || exit 1
check_run hetjob "$id"
SBATCH_OPTS="-N1 -n1 -c2"
id=$(TALLY_RANKS_PER_TASK=2 tally_submit "${TRAIN[@]}" --workers 2 --epochs $EPOCHS) || exit 1
check_run colocated "$id"
grep -q colocated "$W/out/job-$id.out" || { echo "FAIL: not colocated"; exit 1; }
echo PASS
