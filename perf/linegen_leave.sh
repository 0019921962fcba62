# perf/linegen_leave.sh — sourced by perf/linegen_memif.sh and tests/perf/test_linegen_memif*.sh.
# linegen_await_leave PID ERRFILE TENTHS: wait until tally-linegen (PID, its stderr in
# ERRFILE) says it is "leaving last", or has exited, or TENTHS tenths of a second passed;
# the caller then stops tallyd first. Why: with --leave-last the generator keeps its port
# until tallyd is gone, because DPDK 22.11's memif unmaps the rings under an lcore still
# polling them, so the side that leaves first must be the one that stopped polling
# (tallyd segfaulted when the generator left first).
linegen_await_leave() {
	local _
	for _ in $(seq "$3"); do
		grep -q "leaving last" "$2" 2>/dev/null && return 0
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.1
	done
}
