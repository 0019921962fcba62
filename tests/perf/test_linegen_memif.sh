#!/usr/bin/env bash
# tests/perf/test_linegen_memif.sh TALLY_LINEGEN TALLYD REPORT_PY — tally-linegen against tallyd
# on net_memif (DPDK, root), twice on the same port and cores: aggregating, then with tallyd
# --io-forward (the I/O twin: every push bounced). Checks each JSON line: its mode, RESULTs
# (or echoes) back and checked with none bad, the appliance's lcore counters read from its
# control socket (loops, busy loops, frames) and its worker thread's CPU share from /proc;
# then perf_report.py --linegen-table prints the pair's ratio row. Counts only, no timing.
set -u
lg=$1 td=$2 report=$3
# on failure: where tallyd's threads are (a datapath lcore that stopped looping shows here)
threads() { for t in /proc/${dpid:-0}/task/*; do [ -r "$t/stat" ] && echo "$(cat "$t/comm" 2>/dev/null) $(cut -d' ' -f3,14,15 "$t/stat") $(cat "$t/wchan" 2>/dev/null)"; done; }
fail() { echo "FAIL: $*" >&2; threads >&2; exit 1; }
. "$(dirname "$0")/../../perf/linegen_leave.sh"
[ "$(id -u)" = 0 ] || { echo "SKIP: tallyd on net_memif needs root (DPDK)"; exit 77; }
dir=$(mktemp -d /tmp/lgmemif.XXXXXX)
pf=tlgm$$
tpid= gpid=
cleanup() { [ -n "$gpid" ] && kill "$gpid" 2>/dev/null; [ -n "$tpid" ] && kill "$tpid" 2>/dev/null && wait "$tpid" 2>/dev/null; [ -n "${KEEP:-}" ] && cp -r "$dir" /tmp/lgmemif.kept; rm -rf "$dir"; }
trap cleanup EXIT
mult=${TALLY_TIMEOUT_MULTIPLIER:-1}
num() { grep -o "\"$1\":[0-9.]*" <<<"$2" | head -1 | cut -d: -f2; }
for mode in aggregation io-forward; do
	if [ $mode = io-forward ]; then extra=--io-forward; gen=--io-forward
	else extra=--open-admission; gen=; fi
	rm -f "$dir"/*.sock "$dir/td.log" "$dir/err.txt" # the last round's "ready" / "leaving last"
	timeout $((120 * mult)) "$td" --port net_memif0,role=server,socket=$dir/m.sock,socket-abstract=no,bsize=9216,id=0 \
		--ip 10.99.7.1/24 --ctl-socket "$dir/ctl.sock" --idle-backoff off --mem 256M $extra \
		-- --no-huge --no-pci -m 1024 --file-prefix ${pf}a >"$dir/td.log" 2>&1 &
	tpid=$!
	for _ in $(seq $((100 * mult))); do grep -q ready "$dir/td.log" 2>/dev/null && break; sleep 0.1; done
	grep -q ready "$dir/td.log" || { cat "$dir/td.log"; fail "$mode: tallyd did not start"; }
	dpid=$(pgrep -P "$tpid" -x tallyd)
	timeout $((90 * mult)) "$lg" --transport dpdk --eal "--no-huge --no-pci -m 512 --file-prefix ${pf}w --vdev net_memif0,role=client,socket=$dir/m.sock,socket-abstract=no,bsize=9216,id=0" \
		--local-ip 10.99.7.2/24 --host 10.99.7.1 --port 9170 --ctl-socket "$dir/ctl.sock" \
		--dut-pid "${dpid:-0}" $gen --chunk-kib 1 --keys 2 --chunks 2 --trial-s 0.05 \
		--trials 1 --steps 1 --lo 200 --hi 2000 --repair-us 50000 --json \
		--leave-last $((30 * mult)) >>"$dir/out.json" 2>"$dir/err.txt" &
	gpid=$!
	linegen_await_leave $gpid "$dir/err.txt" $((900 * mult)) # then tallyd leaves first
	line=$(grep "\"mode\":\"$mode\"" "$dir/out.json") || {
		kill $gpid 2>/dev/null; wait $gpid; cat "$dir/err.txt"; fail "no $mode line: $(cat "$dir/out.json")"; }
	[ "$(num unpaced_checked "$line")" -gt 0 ] || fail "$mode: nothing checked: $line"
	[ "$(num unpaced_bad "$line")" = 0 ] || fail "$mode: bad answers: $line"
	# counted around the unpaced trial and the latency trials (on a loaded box one trial can
	# pass without the appliance's lcore running at all: any of the three)
	grep -Eq '"(unpaced_)?dut_rx_pkts":[1-9]' <<<"$line" || fail "$mode: no appliance rx counted: $line"
	grep -Eq '"(unpaced_)?dut_lcores":\[\{"core":0,"loops":[1-9]' <<<"$line" || fail "$mode: no lcore loops: $line"
	grep -q '"unpaced_dut_cpu":\[[0-9]' <<<"$line" || fail "$mode: no worker CPU share: $line"
	[ "$(num port_overflow "$line")" = 0 ] || fail "$mode: the port's stage overflowed: $line"
	if [ $mode = io-forward ]; then
		[ "$(num unpaced_dut_engine_rejects "$line")" = 0 ] || fail "io-forward ran an engine: $line"
	fi
	kill "$tpid"; wait "$tpid"; st=$?; tpid=
	wait $gpid; gst=$?
	# a signal: tallyd crashed, e.g. the memif peer left while it copied a burst (dpdk_creg.c)
	[ "$st" -lt 128 ] || fail "$mode: tallyd died of signal $((st - 128)) (exit $st): $(tail -n 5 "$dir/td.log")"
	[ "$gst" = 0 ] || { cat "$dir/err.txt"; fail "$mode: tally-linegen exited $gst"; }
done
/usr/bin/python3 "$report" --linegen-table "$dir/out.json" >"$dir/table.md" || fail "no table"
grep -q '^| - | dpdk | 1 / 1 | 1024 | ' "$dir/table.md" || fail "no ratio row: $(cat "$dir/table.md")"
echo "ok: $(grep -c . "$dir/out.json") lines; $(grep '^| - | dpdk | 1 / 1 | 1024 | ' "$dir/table.md")"
