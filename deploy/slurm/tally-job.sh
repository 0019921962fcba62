#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# deploy/slurm/tally-job.sh — the batch script of a Tally job under Slurm (deploy/README.md,
# "Slurm"). Submitted as a heterogeneous job, component 0 on CPU nodes for the appliances,
# component 1 on the GPU nodes for the training:
#
#   sbatch -N2 --ntasks-per-node=1 -c4 : -N1 -n1 -c8 deploy/slurm/tally-job.sh \
#       /usr/bin/python3 gpu_agent/examples/train.py --workers 4
#
# or, with TALLY_COLOCATED=1 (or a plain, non-heterogeneous job), one appliance on each node of
# the training component (BytePS's colocated summation service). It
#  1. makes a fresh job key (32 random bytes) in $TALLY_SLURM_DIR/<jobid>/job.key, mode 0600 in
#     a 0700 directory (the dir must be shared by the nodes: default $HOME/.tally/slurm);
#  2. starts one appliance per node of the appliance component (tally-appliance.sh via srun),
#     admitting job id = $SLURM_JOB_ID, a random token, world size = tasks of the training
#     component x TALLY_RANKS_PER_TASK, quota TALLY_QUOTA_BYTES (default: the appliance's own);
#  3. waits (TALLY_READY_TIMEOUT_S, 60) until every appliance answers `tallyctl status`, and
#     stops with an error naming the appliance that failed;
#  4. runs the training command once per task of the training component (srun), with
#     TALLY_APPLIANCES (from the nodes' addresses), TALLY_JOB_ID, TALLY_TOKEN and
#     TALLY_AUTH_KEY_FILE in its environment;
#  5. when the training ends, fails or the job is cancelled: drains and stops the appliances,
#     prints their counters, removes the key; exit status: the training's.
# TALLY_ROOT (default: the submit dir) is the source tree; TALLY_BIN its build's binaries.
set -u
: "${SLURM_JOB_ID:?tally-job.sh runs inside a Slurm job (sbatch)}"
[ $# -gt 0 ] || { echo "tally-job.sh: usage: sbatch [...] : [...] tally-job.sh TRAINING-COMMAND [ARGS]" >&2; exit 2; }
root=${TALLY_ROOT:-${SLURM_SUBMIT_DIR:-$PWD}}
export TALLY_BIN=${TALLY_BIN:-$root/build}
for b in appliance/udpd/tally-udpd control/tallyctl; do
	[ -x "$TALLY_BIN/$(basename $b)" ] && continue
	[ -x "$TALLY_BIN/$b" ] || { echo "tally-job.sh: $TALLY_BIN/$b missing: set TALLY_BIN (or TALLY_ROOT) to the build" >&2; exit 2; }
done

hets=${SLURM_HET_SIZE:-1}
train_group=$((hets - 1))
if [ "$hets" -ge 2 ] && [ "${TALLY_COLOCATED:-0}" != 1 ]; then appl_group=0; else appl_group=$train_group; fi
groupvar() { # groupvar NAME G: $NAME_HET_GROUP_G in a heterogeneous job, $NAME otherwise
	local v=$1_HET_GROUP_$2
	[ "$hets" -ge 2 ] && echo "${!v:-}" || { v=$1; echo "${!v:-}"; }
}
# hetopt G: srun's --het-group=G in a heterogeneous job, nothing otherwise (the array het)
hetopt() { het=(); [ "$hets" -ge 2 ] && het=("--het-group=$1"); return 0; }
appl_nodes=$(scontrol show hostnames "$(groupvar SLURM_JOB_NODELIST $appl_group)")
nappl=$(echo "$appl_nodes" | wc -l)
train_tasks=$(groupvar SLURM_NTASKS $train_group)
export TALLY_WORLD=$((${train_tasks:-1} * ${TALLY_RANKS_PER_TASK:-1}))

umask 077
export TALLY_SLURM_JOB_DIR=${TALLY_SLURM_DIR:-$HOME/.tally/slurm}/$SLURM_JOB_ID
mkdir -p "$(dirname "$TALLY_SLURM_JOB_DIR")" && mkdir -m 0700 "$TALLY_SLURM_JOB_DIR" || {
	echo "tally-job.sh: cannot create $TALLY_SLURM_JOB_DIR (TALLY_SLURM_DIR: a directory every node sees)" >&2; exit 2; }
# a build tree keeps the binaries in subdirs, an install (TALLY_BIN=/usr/bin) does not: links
# in the (shared) job dir give the appliances one layout
if [ -x "$TALLY_BIN/appliance/udpd/tally-udpd" ]; then
	mkdir "$TALLY_SLURM_JOB_DIR/bin"
	ln -s "$TALLY_BIN/appliance/udpd/tally-udpd" "$TALLY_BIN/control/tallyctl" "$TALLY_SLURM_JOB_DIR/bin/"
	[ -x "$TALLY_BIN/appliance/tallyd" ] && ln -s "$TALLY_BIN/appliance/tallyd" "$TALLY_SLURM_JOB_DIR/bin/"
	export TALLY_BIN=$TALLY_SLURM_JOB_DIR/bin
fi
export TALLY_AUTH_KEY_FILE=$TALLY_SLURM_JOB_DIR/job.key
head -c 32 /dev/urandom >"$TALLY_AUTH_KEY_FILE" && chmod 0600 "$TALLY_AUTH_KEY_FILE"
export TALLY_JOB_ID=$SLURM_JOB_ID
TALLY_TOKEN=$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')
export TALLY_TOKEN

appl_pid='' train_pid='' rc=''
stop_appliances() {
	[ -n "$appl_pid" ] || return 0
	: >"$TALLY_SLURM_JOB_DIR/stop"
	local deadline=$((SECONDS + ${TALLY_STOP_TIMEOUT_S:-20}))
	while kill -0 "$appl_pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
	if kill -0 "$appl_pid" 2>/dev/null; then
		echo "tally-job.sh: appliances still running after ${TALLY_STOP_TIMEOUT_S:-20} s (TALLY_STOP_TIMEOUT_S):" \
			"cancelling their step" >&2
		kill -TERM "$appl_pid" 2>/dev/null; sleep 1; kill -KILL "$appl_pid" 2>/dev/null
	fi
	wait "$appl_pid" 2>/dev/null
	appl_pid=
	local f n
	for f in "$TALLY_SLURM_JOB_DIR"/job.*.json "$TALLY_SLURM_JOB_DIR"/stats.*.json; do
		[ -s "$f" ] || continue
		n=${f##*/}; n=${n#*.}; n=${n%.json}
		case "$f" in
		*/job.*) echo "tally-job.sh: appliance $n job record: $(cat "$f")" ;;
		*) echo "tally-job.sh: appliance $n counters: $(cat "$f")" ;;
		esac
	done
}
finish() {
	trap - TERM INT HUP EXIT
	[ -n "$train_pid" ] && kill -TERM "$train_pid" 2>/dev/null && wait "$train_pid" 2>/dev/null
	stop_appliances
	rm -rf "$TALLY_SLURM_JOB_DIR"
	exit "${rc:-1}"
}
on_signal() { echo "tally-job.sh: $1: stopping the training and the appliances" >&2; rc=${rc:-$2}; finish; }
trap 'on_signal SIGTERM 143' TERM
trap 'on_signal SIGINT 130' INT
trap 'on_signal SIGHUP 129' HUP
trap finish EXIT

colo=()
[ "$appl_group" = "$train_group" ] && colo=(--overlap)
hetopt "$appl_group"
srun "${het[@]}" --ntasks-per-node=1 -N "$nappl" -n "$nappl" "${colo[@]}" --kill-on-bad-exit=0 \
	--job-name=tally-appliance "${TALLY_SLURM_APPLIANCE:-$root/deploy/slurm/tally-appliance.sh}" &
appl_pid=$!

# every appliance ready (it answered tallyctl status), in node order; a failure names it
deadline=$((SECONDS + ${TALLY_READY_TIMEOUT_S:-60} + 10))
while :; do
	ready=$(find "$TALLY_SLURM_JOB_DIR" -maxdepth 1 -name 'ready.*' | wc -l)
	[ "$ready" = "$nappl" ] && break
	if ls "$TALLY_SLURM_JOB_DIR"/failed.* >/dev/null 2>&1; then
		echo "tally-job.sh: an appliance failed to start; the training was not started:" >&2
		cat "$TALLY_SLURM_JOB_DIR"/failed.* >&2
		rc=1; finish
	fi
	if ! kill -0 "$appl_pid" 2>/dev/null; then
		wait "$appl_pid"; st=$?; appl_pid=
		echo "tally-job.sh: the appliance step (srun on $(echo $appl_nodes)) ended with status $st" \
			"before all $nappl appliances were ready ($ready were)" >&2
		rc=1; finish
	fi
	if [ $SECONDS -ge $deadline ]; then
		echo "tally-job.sh: $ready of $nappl appliances ready after ${TALLY_READY_TIMEOUT_S:-60} s" \
			"(TALLY_READY_TIMEOUT_S); not ready on: $(for i in $(seq 0 $((nappl - 1))); do
			[ -e "$TALLY_SLURM_JOB_DIR/ready.$i" ] || echo -n "appliance $i "; done)" >&2
		rc=1; finish
	fi
	sleep 0.2
done
TALLY_APPLIANCES=$(for i in $(seq 0 $((nappl - 1))); do cat "$TALLY_SLURM_JOB_DIR/ready.$i"; done | paste -sd,)
export TALLY_APPLIANCES
echo "tally-job.sh: job $TALLY_JOB_ID, world $TALLY_WORLD, appliances $TALLY_APPLIANCES" \
	"($( [ "$appl_group" = "$train_group" ] && echo colocated || echo "het group $appl_group"))"

hetopt "$train_group"
srun "${het[@]}" "${colo[@]}" --kill-on-bad-exit=1 "$@" &
train_pid=$!
wait "$train_pid"; rc=$?
# a trapped signal interrupts wait with 128+n: the handler already ran finish
train_pid=
echo "tally-job.sh: training ended with status $rc"
finish
