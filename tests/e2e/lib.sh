# shellcheck shell=bash
# tests/e2e/lib.sh — namespaces, veths and processes for the e2e tests, always cleaned up.
# Every name starts with "tly" + the test's tag + this shell's pid, so tests run in parallel.

E2E_TAG=${E2E_TAG:-x}
ID="tly${E2E_TAG}$(( $$ % 100000 ))"
E2E_PIDS=()
E2E_NSES=()
E2E_TMP=$(mktemp -d "/tmp/${ID}.XXXXXX")

e2e_log() { echo "[$(date +%T) $ID] $*"; }
e2e_skip() { echo "SKIP: $*"; exit 77; }
e2e_fail() { echo "FAIL: $*" >&2; exit 1; }

# shellcheck source=tests/procs.sh
. "$(dirname "${BASH_SOURCE[0]}")/../procs.sh"

e2e_cleanup() {
	local rc=$? p ns
	trap - EXIT INT TERM
	procs_stop "${E2E_PIDS[@]}"
	for ns in "${E2E_NSES[@]}"; do
		# Anything still inside one of our namespaces was started by this test.
		for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
		ip netns del "$ns" 2>/dev/null
	done
	procs_logs $rc "$E2E_TMP"
	rm -rf "$E2E_TMP"
	exit $rc
}
trap e2e_cleanup EXIT
trap 'exit 1' INT TERM

e2e_require_netns() {
	[ "$(id -u)" = 0 ] || e2e_skip "needs root for network namespaces"
	command -v ip >/dev/null || e2e_skip "no iproute2"
	ip netns add "${ID}probe" 2>/dev/null || e2e_skip "no network namespace support"
	ip netns del "${ID}probe"
}

# e2e_ns NAME: create namespace $ID$NAME (lo up); prints nothing.
e2e_ns() {
	local ns="$ID$1"
	ip netns add "$ns" || e2e_fail "ip netns add $ns"
	E2E_NSES+=("$ns")
	ip -n "$ns" link set lo up
}

# e2e_veth NS1 IF1 NS2 IF2 MTU: a veth pair between two of our namespaces.
e2e_veth() {
	ip link add "$ID$2" mtu "$5" netns "$ID$1" type veth peer name "$ID$4" mtu "$5" netns "$ID$3" ||
		e2e_fail "veth $ID$2/$ID$4"
	ip -n "$ID$1" link set "$ID$2" up
	ip -n "$ID$3" link set "$ID$4" up
}

e2e_addr() { ip -n "$ID$1" addr add "$3" dev "$ID$2" || e2e_fail "addr $3 on $ID$2"; }

# e2e_bg NS LOGNAME CMD...: run CMD in namespace $ID$NS in the background, output to a log.
e2e_bg() {
	local ns="$ID$1" log="$E2E_TMP/$2.log"
	shift 2
	ip netns exec "$ns" "$@" >"$log" 2>&1 &
	E2E_PIDS+=($!)
	E2E_LAST_PID=$!
}

# e2e_wait_pids TIMEOUT PID...: wait for the pids; fail on timeout; returns the first non-zero rc.
e2e_wait_pids() {
	local deadline=$(( $(date +%s) + $1 )) rc=0 p r
	shift
	for p in "$@"; do
		while kill -0 "$p" 2>/dev/null; do
			[ "$(date +%s)" -ge $deadline ] && e2e_fail "pid $p still running after the time limit"
			sleep 0.2
		done
		wait "$p"; r=$?
		[ $r != 0 ] && [ $rc = 0 ] && rc=$r
	done
	return $rc
}

# e2e_stop PID: SIGTERM and wait (30 s: a drain may take 10 s, then KILL); returns its
# exit status (137 after KILL).
e2e_stop() {
	local i
	kill -TERM "$1" 2>/dev/null
	for i in $(seq 300); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
	kill -KILL "$1" 2>/dev/null
	wait "$1"
}

PY=/usr/bin/python3
[ -x $PY ] || PY=python3

# e2e_wait_log LOGNAME PATTERN SECONDS PID: wait until the log shows PATTERN (SECONDS times
# TALLY_TIMEOUT_MULTIPLIER at most); fail if PID exits.
e2e_wait_log() {
	# scaled like meson's own timeouts: a busy CI machine starts processes slowly
	local m=${TALLY_TIMEOUT_MULTIPLIER:-1}
	local log="$E2E_TMP/$1.log" deadline=$(( $(date +%s) + $3 * ${m%.*} ))
	while ! grep -q "$2" "$log" 2>/dev/null; do
		kill -0 "$4" 2>/dev/null || e2e_fail "$1 exited before '$2' (see its log)"
		[ "$(date +%s)" -ge $deadline ] && e2e_fail "$1 did not show '$2' within $3 s"
		sleep 0.1
	done
}
