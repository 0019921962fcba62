# shellcheck shell=bash
# SPDX-License-Identifier: Apache-2.0
# tests/procs.sh — sourced by the suites' shell libraries (tests/e2e/lib.sh,
# tests/prometheus/lib.sh): stopping what a test started, and its logs when it failed.

# procs_stop PID...: SIGTERM, up to 3 s for all of them to exit, then SIGKILL and reap.
procs_stop() {
	local p i alive
	for p in "$@"; do kill -TERM "$p" 2>/dev/null; done
	for i in 1 2 3 4 5 6 7 8 9 10; do
		alive=0
		for p in "$@"; do kill -0 "$p" 2>/dev/null && alive=1; done
		[ $alive = 0 ] && break
		sleep 0.3
	done
	for p in "$@"; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
}

# procs_logs RC DIR: unless RC is 0 or 77 (a skip), the last 30 lines of each non-empty
# DIR/*.log.
procs_logs() {
	local f
	[ "$1" != 0 ] && [ "$1" != 77 ] && [ -d "$2" ] || return 0
	for f in "$2"/*.log; do
		[ -s "$f" ] || continue
		echo "---- $(basename "$f") (last 30 lines)"
		tail -n 30 "$f"
	done
}
