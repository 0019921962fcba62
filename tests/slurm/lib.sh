# shellcheck shell=bash
# SPDX-License-Identifier: Apache-2.0
# tests/slurm/lib.sh — sourced by the slurm suite's tests: a private Slurm cluster on this
# machine (munged with a generated key, slurmctld, and two slurmd on this host: node NODEc for
# the appliances, NODEg for the training, distinct ports), everything under one temp dir, free ports,
# stopped by PID. Needs root (slurmd runs job steps as the submitting user).
. "$(dirname "${BASH_SOURCE[0]}")/../procs.sh"

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${1:-$SRC/build}
MULT=${TALLY_TIMEOUT_MULTIPLIER:-1}
slurm_pids=()

slurm_skip_checks() {
	[ "$(id -u)" = 0 ] || { echo "SKIP: the slurm suite needs root (it starts munged, slurmctld and slurmd)"; exit 77; }
	local t
	for t in munged slurmctld slurmd sbatch scontrol scancel squeue; do
		command -v "$t" >/dev/null || { echo "SKIP: $t missing (Debian packages munge slurmctld slurmd slurm-client)"; exit 77; }
	done
	for t in "$BUILD/appliance/udpd/tally-udpd" "$BUILD/control/tallyctl" "$BUILD/gpu_agent/libtally_agent.so"; do
		[ -x "$t" ] || [ -f "$t" ] || { echo "SKIP: $t not built"; exit 77; }
	done
	/usr/bin/python3 -c 'import torch, sklearn' 2>/dev/null || { echo "SKIP: /usr/bin/python3 lacks torch/sklearn"; exit 77; }
}

# free_ports N: N consecutive free TCP+UDP ports
free_ports() {
	/usr/bin/python3 - "$1" <<'PY'
import random, socket, sys
n = int(sys.argv[1])
for _ in range(200):
    base = random.randrange(20000, 60000 - n)
    ok = True
    for p in range(base, base + n):
        for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
            s = socket.socket(socket.AF_INET, kind)
            try:
                s.bind(("0.0.0.0", p))
            except OSError:
                ok = False
            s.close()
    if ok:
        print(base); sys.exit(0)
sys.exit(1)
PY
}

# slurm_up: start the cluster; sets W (work dir), SLURM_CONF, NODE
slurm_up() {
	W=$(mktemp -d /tmp/tally-slurm-test.XXXXXX)
	chmod 0755 "$W"
	mkdir -p "$W/munge" "$W/spool" "$W/state" "$W/out"
	chmod 0711 "$W/munge"
	chmod 0777 "$W/out"
	dd if=/dev/urandom of="$W/munge/munge.key" bs=1024 count=1 status=none
	chmod 0400 "$W/munge/munge.key"
	munged -F --force --key-file="$W/munge/munge.key" --socket="$W/munge/munge.sock" \
		--pid-file="$W/munge/munged.pid" --log-file="$W/munge.log" --seed-file="$W/munge/seed" \
		--num-threads=2 &
	slurm_pids+=($!)
	local base i
	base=$(free_ports 3) || { echo "FAIL: no free ports"; exit 1; }
	NODE=tn$base
	SLURM_CONF=$W/slurm.conf
	export SLURM_CONF
	cat >"$SLURM_CONF" <<CONF
ClusterName=tally$base
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmctldPort=$base
SlurmdPort=$((base + 1))
AuthType=auth/munge
AuthInfo=socket=$W/munge/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$W/state
SlurmdSpoolDir=$W/spool/%n
SlurmctldPidFile=$W/slurmctld.pid
SlurmdPidFile=$W/slurmd.%n.pid
SlurmctldLogFile=$W/slurmctld.log
SlurmdLogFile=$W/slurmd.%n.log
SlurmctldDebug=info
DebugFlags=Backfill
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
# heterogeneous jobs are started only by the backfill scheduler: run it every second
SchedulerParameters=bf_interval=1,bf_continue
DefMemPerCPU=128
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=5
MinJobAge=600
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=60
MessageTimeout=20
NodeName=${NODE}c NodeHostname=$(hostname -s) NodeAddr=127.0.0.1 Port=$((base + 1)) CPUs=4 Sockets=1 CoresPerSocket=4 ThreadsPerCore=1 RealMemory=2048 State=UNKNOWN
NodeName=${NODE}g NodeHostname=$(hostname -s) NodeAddr=127.0.0.1 Port=$((base + 2)) CPUs=4 Sockets=1 CoresPerSocket=4 ThreadsPerCore=1 RealMemory=2048 State=UNKNOWN
PartitionName=tally Nodes=${NODE}c,${NODE}g Default=YES MaxTime=30 State=UP OverSubscribe=YES
CONF
	slurmctld -D -i -f "$SLURM_CONF" >"$W/slurmctld.out" 2>&1 &
	slurm_pids+=($!)
	for i in c g; do
		mkdir -p "$W/spool/$NODE$i"
		slurmd -D -f "$SLURM_CONF" -N "$NODE$i" >"$W/slurmd.$i.out" 2>&1 &
		slurm_pids+=($!)
	done
	local deadline=$((SECONDS + 40 * MULT))
	while [ $SECONDS -lt $deadline ]; do
		if [ "$(sinfo -h -N -o '%t' 2>/dev/null | grep -cE '^(idle|mix|alloc)')" = 2 ]; then
			return 0
		fi
		for i in "${slurm_pids[@]}"; do
			kill -0 "$i" 2>/dev/null || { echo "FAIL: a Slurm daemon (pid $i) exited"; slurm_logs; return 1; }
		done
		sleep 0.5
	done
	echo "FAIL: node $NODE not idle in $((40 * MULT)) s: $(sinfo -h -N 2>&1)"
	slurm_logs
	return 1
}

slurm_logs() {
	local f
	for f in "$W"/*.log "$W"/*.out; do
		[ -s "$f" ] || continue
		echo "---- $(basename "$f") (last 30 lines)"; tail -n 30 "$f"
	done
}

slurm_down() {
	local rc=$?
	[ -n "${W:-}" ] || exit $rc
	[ "$rc" != 0 ] && [ "$rc" != 77 ] && slurm_logs
	# jobs still running (a failed test): cancel them, then kill what is left of them
	local i p
	if [ -n "$(squeue -h 2>/dev/null)" ]; then
		scancel --quiet --user="$(id -un)" 2>/dev/null
		for i in $(seq 1 30); do [ -z "$(job_procs)" ] && break; sleep 0.3; done
	fi
	for p in $(job_procs | cut -d' ' -f1); do kill -KILL "$p" 2>/dev/null; done
	for ((i = ${#slurm_pids[@]} - 1; i >= 0; i--)); do procs_stop "${slurm_pids[$i]}"; done
	# slurmstepd processes of this cluster (their job steps' spool dir is ours)
	for i in $(pgrep -x slurmstepd); do
		grep -qs "$W" "/proc/$i/cmdline" /proc/"$i"/environ && kill -KILL "$i" 2>/dev/null
	done
	rm -rf "$W"
	exit $rc
}

# job_wait ID SECONDS: until the job has left the running/pending states; prints its state
job_wait() {
	local deadline=$((SECONDS + $2 * MULT)) st
	while [ $SECONDS -lt $deadline ]; do
		st=$(scontrol -o show job "$1" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | head -1 | cut -d= -f2)
		case "$st" in
		PENDING|RUNNING|CONFIGURING|COMPLETING|SUSPENDED|"") sleep 0.5 ;;
		*) echo "$st"; return 0 ;;
		esac
	done
	echo TIMEOUT; return 1
}

# tally_submit ARGS...: sbatch the recipe (deploy/slurm/tally-job.sh) from $W/out with this
# tree's build, job dirs under $W/shared; prints the job id. SBATCH_OPTS: the components.
tally_submit() {
	mkdir -p "$W/shared"
	(cd "$W/out" && env TALLY_ROOT="$SRC" TALLY_BIN="${TALLY_BIN:-$BUILD}" TALLY_SLURM_DIR="$W/shared" \
		TALLY_READY_TIMEOUT_S=${TALLY_READY_TIMEOUT_S:-$((30 * MULT))} TALLY_BUILD="$BUILD" \
		sbatch --parsable -o "$W/out/job-%j.out" $SBATCH_OPTS "$SRC/deploy/slurm/tally-job.sh" "$@")
}

# job_procs: processes of this test's jobs (their environment names a job dir under $W/shared)
job_procs() {
	local p
	for p in /proc/[0-9]*; do
		grep -qsaF "$W/shared" "$p/environ" "$p/cmdline" && echo "${p#/proc/} $(tr '\0' ' ' <"$p/cmdline" | cut -c1-100)"
	done
}

# job_exit ID: the job's ExitCode (status:signal)
job_exit() { scontrol -o show job "$1" | grep -o ' ExitCode=[0-9:]*' | head -1 | cut -d= -f2; }

# table_empty: nothing of this cluster's jobs left running (jobs or steps)
table_empty() { [ -z "$(squeue -h 2>/dev/null)" ] && [ -z "$(squeue -h -s 2>/dev/null)" ]; }

TRAIN=(/usr/bin/python3 "$SRC/gpu_agent/examples/train.py")

# gloo_reference EPOCHS: sets ref, the test accuracy of train.py over gloo (2 workers, no Slurm)
gloo_reference() {
	ref=$(timeout $((120 * MULT)) "${TRAIN[@]}" --backend gloo --workers 2 --epochs $1 2>&1 | \
		grep -o 'test accuracy [0-9.]*' | tail -1 | awk '{print $3}')
	[ -n "$ref" ] || { echo "FAIL: the gloo reference run printed no accuracy"; exit 1; }
	echo "reference (gloo, no Slurm): test accuracy $ref"
}

# check_run WHAT ID: the job completed with exit 0:0, accuracy as gloo's ($ref), the appliance's
# job record and counters show the keyed job, nothing left afterwards
check_run() {
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
	# the appliance component's memory on its node (het offset 0, or the plain job): MinMemoryCPU x NumCPUs
	local tres
	tres=$(scontrol -o show job "$id" | head -1 | tr ' ' '\n' | grep -E '^(MinMemoryCPU|NumCPUs)=' | sort | cut -d= -f2 | paste -sd' ')
	python3 - "$out" "$id" "$tres" <<'PY' || exit 1
import json, sys
rec = [l for l in open(sys.argv[1]) if "appliance 0 job record:" in l]
if not rec:
    sys.exit("FAIL: no job record from the appliance")
j = json.loads(rec[-1].split("record: ", 1)[1])
print(f"appliance job record: job_id {j['job_id']} world {j['world_size']} auth {j['auth']} quota_bytes {j['quota_bytes']}")
# job id = Slurm's, world = 1 task x 2 ranks, keyed, quota = half the component's memory
t, ncpu = sys.argv[3].split()
quota = (int(t[:-1]) << (20 if t.endswith("M") else 30)) * int(ncpu) // 2
print(f"appliance component memory {t} x {ncpu} CPUs: expected quota {quota}")
if (j["job_id"], j["world_size"], j["auth"], j["quota_bytes"]) != (int(sys.argv[2]), 2, "keyed", quota):
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

