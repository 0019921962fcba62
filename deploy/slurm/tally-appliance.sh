#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# deploy/slurm/tally-appliance.sh — one appliance of a Slurm job, started by tally-job.sh with
# `srun --het-group=G` (one task per node): tally-udpd (no root) or tallyd (TALLY_APPLIANCE_KIND=
# tallyd, a node set up by deploy/setup-node.sh) on this node's address (its NodeAddr in
# slurm.conf, or TALLY_APPLIANCE_IP), admitting the job tally-job.sh describes in the
# environment (TALLY_JOB_ID, TALLY_TOKEN, TALLY_WORLD, TALLY_AUTH_KEY_FILE, quota). Ready when
# `tallyctl status` answers: then it writes ADDR:PORT to $TALLY_SLURM_JOB_DIR/ready.N; a start
# failure writes failed.N naming the appliance, its node and its last log lines. The file
# $TALLY_SLURM_JOB_DIR/stop (the training ended) or SIGTERM (scancel): the job's record to the
# job dir, then SIGTERM to the appliance (a drain); its counters go to stats.N.json.
set -u
dir=${TALLY_SLURM_JOB_DIR:?set by tally-job.sh}
i=${SLURM_PROCID:?run by srun}
node=${SLURMD_NODENAME:-$(hostname -s)}
kind=${TALLY_APPLIANCE_KIND:-udpd}
bin=${TALLY_BIN:?set by tally-job.sh}
cores=${TALLY_APPLIANCE_CORES:-${SLURM_CPUS_PER_TASK:-2}}
log=$dir/appliance.$i.log
sock=$dir/ctl.$i.sock
prog=tally-udpd; [ "$kind" = tallyd ] && prog=tallyd
name="appliance $i ($prog on node $node)"

fail() {
	{ echo "$name: $*"; [ -s "$log" ] && tail -n 5 "$log" | sed 's/^/    /'; } >"$dir/failed.$i.tmp"
	mv "$dir/failed.$i.tmp" "$dir/failed.$i"
	echo "tally-appliance: $name: $*" >&2
	exit 1
}

# this node's address: TALLY_APPLIANCE_IP, else NodeAddr from slurm.conf resolved to IPv4
ip=${TALLY_APPLIANCE_IP:-}
if [ -z "$ip" ]; then
	na=$(scontrol -o show node "$node" 2>/dev/null | grep -o 'NodeAddr=[^ ]*' | cut -d= -f2)
	ip=$(getent ahostsv4 "${na:-$node}" | awk 'NR == 1 { print $1 }')
	[ -n "$ip" ] || fail "cannot resolve the address of node $node (NodeAddr '${na:-}'): set TALLY_APPLIANCE_IP"
fi
# a free block of UDP ports (other jobs' appliances may share the node); tallyd: its --base-port
[ "$kind" = tallyd ] && port=${TALLY_APPLIANCE_PORT:-9170}
port=${port:-${TALLY_APPLIANCE_PORT:-$(python3 - "$ip" "$cores" <<'PY'
import random, socket, sys
ip, n = sys.argv[1], int(sys.argv[2])
for _ in range(500):
    base = random.randrange(20000, 60000 - n)
    socks = []
    try:
        for p in range(base, base + n):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); socks.append(s); s.bind((ip, p))
        print(base); sys.exit(0)
    except OSError:
        pass
    finally:
        for s in socks: s.close()
sys.exit(1)
PY
)}} || fail "no free UDP port block on $ip"

adm=(--job "$TALLY_JOB_ID" --token "$TALLY_TOKEN" --world "$TALLY_WORLD" --key-file "$TALLY_AUTH_KEY_FILE")
# key memory from the job's memory on this node (half of it, split over the cores; the rest
# for the process and its buffers); the job is the appliance's only one: its quota is all of it
mem=${TALLY_APPLIANCE_MEM:-}
if [ -z "$mem" ]; then
	mb=${SLURM_MEM_PER_NODE:-}
	[ -z "$mb" ] && [ -n "${SLURM_MEM_PER_CPU:-}" ] && mb=$((SLURM_MEM_PER_CPU * ${SLURM_CPUS_ON_NODE:-$cores}))
	[ -n "$mb" ] && mem=$((mb / 2 / cores))M
fi
[ -n "$mem" ] && adm+=(--mem "$mem")
quota=${TALLY_QUOTA_BYTES:-}
# (--quota-bytes is per core, like --mem)
[ -z "$quota" ] && quota=$mem
[ -n "$quota" ] && adm+=(--quota-bytes "$quota")
# shellcheck disable=SC2206 # extra settings, split on blanks on purpose
extra=(${TALLY_APPLIANCE_ARGS:-})
case "$kind" in
udpd) cmd=("$bin/tally-udpd" --ip "$ip" --base-port "$port" --cores "$cores") ;;
tallyd) read -r -a targs <<<"${TALLY_TALLYD_ARGS:-}"; cmd=("$bin/tallyd" "${targs[@]}") ;;
*) fail "TALLY_APPLIANCE_KIND is '$kind': udpd or tallyd" ;;
esac
"${cmd[@]}" "${adm[@]}" --ctl-socket "$sock" --stats "$dir/stats.$i.json" "${extra[@]}" >"$log" 2>&1 &
pid=$!

stopping=0
stop() {
	stopping=1
	"$bin/tallyctl" --socket "$sock" --json --timeout 2000 job "$TALLY_JOB_ID" 2>/dev/null | tr -d '\n' \
		>"$dir/job.$i.json" || true
	kill -TERM "$pid" 2>/dev/null
}
trap stop TERM INT HUP

deadline=$((SECONDS + ${TALLY_READY_TIMEOUT_S:-60}))
until "$bin/tallyctl" --socket "$sock" --timeout 1000 status >/dev/null 2>&1; do
	if ! kill -0 "$pid" 2>/dev/null; then
		wait "$pid"; rc=$?
		[ $stopping = 1 ] && exit "$rc"
		fail "exited with status $rc before it was ready"
	fi
	[ $SECONDS -lt $deadline ] || { kill -KILL "$pid"; fail "not ready (tallyctl status) in ${TALLY_READY_TIMEOUT_S:-60} s"; }
	sleep 0.2
done
echo "$ip:$port" >"$dir/ready.$i.tmp" && mv "$dir/ready.$i.tmp" "$dir/ready.$i"
echo "tally-appliance: $name ready on $ip:$port ($cores cores, key memory ${mem:-default} per core from ${mb:-?} MB of the job on this node, job $TALLY_JOB_ID, world $TALLY_WORLD)"
# until it exits: tally-job.sh asks for the stop with the file "stop" in the job dir (a signal
# to srun would cancel the step, killing the appliance before its drain)
while kill -0 "$pid" 2>/dev/null; do
	[ $stopping = 0 ] && [ -e "$dir/stop" ] && stop
	sleep 0.2
done
wait "$pid"
exit $?
