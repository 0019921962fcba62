# shellcheck shell=bash
# tests/prometheus/lib.sh — processes, free loopback ports and packages for the prometheus
# suite. Everything started is killed and the temporary directory removed on exit.
PT_PIDS=()
PT_TMP=$(mktemp -d /tmp/tly-prom.XXXXXX)
PY=${PYTHON:-python3}

pt_log() { echo "[$(date +%T)] $*"; }
pt_skip() { echo "SKIP: $*"; exit 77; }
pt_fail() { echo "FAIL: $*" >&2; exit 1; }

# shellcheck source=tests/procs.sh
. "$(dirname "${BASH_SOURCE[0]}")/../procs.sh"

pt_cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	procs_stop "${PT_PIDS[@]}"
	procs_logs $rc "$PT_TMP"
	rm -rf "$PT_TMP"
	exit $rc
}
trap pt_cleanup EXIT
trap 'exit 1' INT TERM

# pt_bg LOGNAME CMD...: CMD in the background, output to $PT_TMP/LOGNAME.log.
pt_bg() {
	local log="$PT_TMP/$1.log"
	shift
	"$@" >"$log" 2>&1 &
	PT_PIDS+=($!)
	PT_LAST_PID=$!
}

# pt_free_port [N] [udp|tcp]: a base port on 127.0.0.1 with N consecutive free ports.
pt_free_port() {
	$PY - "${1:-1}" "${2:-tcp}" <<'PY'
import random, socket, sys
n, kind = int(sys.argv[1]), sys.argv[2]
t = socket.SOCK_DGRAM if kind == "udp" else socket.SOCK_STREAM
for _ in range(200):
    base = random.randint(20000, 60000 - n)
    socks = []
    try:
        for p in range(base, base + n):
            s = socket.socket(socket.AF_INET, t)
            s.bind(("127.0.0.1", p))
            socks.append(s)
        print(base)
        sys.exit(0)
    except OSError:
        pass
    finally:
        for s in socks:
            s.close()
sys.exit("no free port")
PY
}

# pt_need_promtool: promtool on PATH, installed from Debian's prometheus package if
# missing (root, apt); skip (77) when that cannot be done.
pt_need_pkg() {
	local bin=$1 pkg=$2
	command -v "$bin" >/dev/null && return 0
	[ "$(id -u)" = 0 ] || pt_skip "no $bin and not root to install Debian's $pkg"
	command -v apt-get >/dev/null || pt_skip "no $bin and no apt-get"
	pt_log "installing $pkg for $bin"
	export DEBIAN_FRONTEND=noninteractive
	{ apt-get install -y -qq --no-install-recommends "$pkg" </dev/null ||
	  { apt-get update -qq && apt-get install -y -qq --no-install-recommends "$pkg" </dev/null; }
	} >"$PT_TMP/apt.log" 2>&1 || pt_skip "apt-get could not install $pkg"
	command -v "$bin" >/dev/null || pt_skip "$pkg installed no $bin"
}

# pt_wait_http URL SECONDS PID: until URL answers 200 (fails if PID exits first).
pt_wait_http() {
	local deadline=$(( $(date +%s) + $2 ))
	while [ "$(date +%s)" -lt $deadline ]; do
		kill -0 "$3" 2>/dev/null || pt_fail "process $3 exited before $1 answered"
		$PY -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=1).read()' \
			"$1" 2>/dev/null && return 0
		sleep 0.2
	done
	pt_fail "$1 did not answer in $2 s"
}

# pt_udpd BIN PORT CORES SOCK: tally-udpd on 127.0.0.1, open admission, ready when its
# control socket answers.
pt_udpd() {
	pt_bg udpd "$1/appliance/udpd/tally-udpd" --ip 127.0.0.1 --base-port "$2" --cores "$3" \
		--mem 64M --open-admission --ctl-socket "$4"
	PT_UDPD_PID=$PT_LAST_PID
	local i
	for i in $(seq 1 100); do
		kill -0 "$PT_UDPD_PID" 2>/dev/null || pt_fail "tally-udpd exited"
		"$1/control/tallyctl" --socket "$4" status >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	pt_fail "tally-udpd's control socket $4 did not answer"
}
