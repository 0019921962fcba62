#!/bin/bash
# perf/linegen_memif.sh [tally-linegen options]: tallyd (main lcore on CPU $TD_MAIN_CPU, one
# datapath lcore on CPU $TD_CPU, defaults 0 and 1) on net_memif and tally-linegen (one lcore
# on CPU $GEN_CPU, default 0: not the datapath lcore's; 32 ranks) against it, twice on the
# same memif port, frames and cores: tallyd aggregating, then tallyd --io-forward (each push
# bounced: the I/O twin). Both NDR/PDR searches as JSON lines (with the appliance's per-lcore
# busy polls read from its control socket and its worker threads' CPU share around the
# reported trials), load average before and after, tallyd's totals, and the table of both
# with the aggregation / io-forward ratio (perf_report.py --linegen-table).
# MODES="aggregation io-forward" (default) picks the runs; OUT=FILE keeps the JSON lines, and
# tallyd's logs beside it (FILE.tallyd-MODE.log). The binaries come from $TALLY_BUILD
# (default build/ under the source root: appliance/tallyd, perf/tally-linegen). Needs root
# (DPDK, /var/run/dpdk): exits 77 without it.
#
# Several cores: GEN_LCORES=N DUT_LCORES=D (defaults 1 and 1: the one-port run above). D
# a multiple of N (perf/perf_gen_mc.h says why): N memif ports, port g with D/N
# queues on tallyd's side (10.99.g+1.1/24; tallyd's cores g*D/N .. (g+1)*D/N-1); or D below
# N: N ports of one queue, tallyd --cores D polling port g with core g % D; generator
# lcore g on port g (10.99.g+1.2/24) playing its own job of --ranks ranks (32). CPUs:
# TD_CPUS (D, comma list; default 1..D) for tallyd's datapath lcores, GEN_CPUS (N; default
# D+1..D+N) for the generator's, TD_MAIN_CPU and GEN_MAIN_CPU (default 0) for the main lcores.
cd "$(dirname "$0")/.."
. perf/linegen_leave.sh
b=${TALLY_BUILD:-build}
[ "$(id -u)" = 0 ] || { echo "linegen_memif.sh: needs root (DPDK): not run" >&2; exit 77; }
[ -x "$b/appliance/tallyd" ] && [ -x "$b/perf/tally-linegen" ] ||
	{ echo "linegen_memif.sh: no $b/appliance/tallyd or $b/perf/tally-linegen: build them" >&2; exit 77; }
N=${GEN_LCORES:-1} D=${DUT_LCORES:-1}
if [ "$N" -lt 1 ] || [ "$D" -lt 1 ] || { [ "$D" -ge "$N" ] && [ $((D % N)) != 0 ]; }; then
	echo "linegen_memif.sh: GEN_LCORES=$N DUT_LCORES=$D: DUT_LCORES must be a multiple of GEN_LCORES, or below it (each generator lcore owns a memif port; tallyd polls each queue with one lcore, and deals more ports than lcores over them: port g on core g % DUT_LCORES)" >&2
	exit 2
fi
d=$(mktemp -d /tmp/tly-lg.XXXXXX); pf=tlylg$$
out=${OUT:-$d/lines.json}
: > "$out"
# CPU list item i (0-based) of a comma list, or the default (which must exist here)
cpu() {
	local v; v=$(cut -d, -f$(($2 + 1)) <<<"$1,")
	if [ -z "$v" ] && [ "$3" -ge "$(nproc)" ]; then
		echo "linegen_memif.sh: CPU $3 (a default) is not on this $(nproc)-CPU host: give TD_CPUS and GEN_CPUS" >&2
		exit 2
	fi
	echo "${v:-$3}"
}
memif() { echo "net_memif$1,role=$2,socket=$d/ma$1.sock,socket-abstract=no,bsize=9216,id=0"; }
if [ "$N" = 1 ] && [ "$D" = 1 ]; then
	td_ports=(--port "$(memif 0 server)" --ip 10.99.1.1/24)
	td_eal="-m 2048 --lcores 0@${TD_MAIN_CPU:-0},1@${TD_CPU:-1}"
	gen_eal="-m 512 --lcores 0@${GEN_CPU:-0} --vdev $(memif 0 client)"
	gen_net=(--local-ip 10.99.1.2/24 --host 10.99.1.1)
else
	# D >= N: port g with m = D / N queues; N > D: one queue each, tallyd --cores D
	m=$((D >= N ? D / N : 1)) td_ports=() hosts= locals=
	td_eal="-m $((2048 + 192 * (D - 1))) --lcores 0@${TD_MAIN_CPU:-0}"
	gen_eal="-m $((512 + 24 * (D + N))) --lcores 0@${GEN_MAIN_CPU:-0}"
	for i in $(seq 0 $((D - 1))); do
		c=$(cpu "${TD_CPUS:-}" $i $((i + 1))) || exit 2
		td_eal+=",$((i + 1))@$c"
	done
	for g in $(seq 0 $((N - 1))); do
		td_ports+=(--port "$(memif $g server)" --ip 10.99.$((g + 1)).1/24)
		[ "$D" -ge "$N" ] && td_ports+=(--queues $m)
		c=$(cpu "${GEN_CPUS:-}" $g $((D + g + 1))) || exit 2
		gen_eal+=",$((g + 1))@$c"
		hosts+=${hosts:+,}10.99.$((g + 1)).1 locals+=${locals:+,}10.99.$((g + 1)).2/24
	done
	[ "$N" -gt "$D" ] && td_ports+=(--cores "$D")
	for g in $(seq 0 $((N - 1))); do gen_eal+=" --vdev $(memif $g client)"; done
	gen_net=(--local-ip "$locals" --host "$hosts" --gen-lcores "$N" --dut-cores "$D")
fi
tpid=
cleanup() { [ -n "$tpid" ] && kill "$tpid" 2>/dev/null && wait "$tpid"; rm -rf "$d"; }
trap cleanup EXIT
for mode in ${MODES:-aggregation io-forward}; do
	if [ "$mode" = io-forward ]; then extra=(--io-forward); gen=(--io-forward)
	else extra=(--open-admission); gen=(); fi
	rm -f $d/ma*.sock $d/ctl.sock
	timeout 900 "$b/appliance/tallyd" "${td_ports[@]}" --ctl-socket $d/ctl.sock --idle-backoff off --mem 1G "${extra[@]}" -- --no-huge --no-pci $td_eal --file-prefix ${pf}a > $d/tallyd.log 2>&1 &
	tpid=$!
	for i in $(seq 100); do grep -q ready $d/tallyd.log && break; sleep 0.2; done
	dpid=$(pgrep -P $tpid -x tallyd) # timeout's child: its lcores' CPU time
	echo "# $mode: GEN_LCORES=$N DUT_LCORES=$D; tallyd $(grep -o 'ready.*' $d/tallyd.log | head -1 | cut -c1-120)"
	uptime
	# --leave-last: tallyd leaves first (perf/linegen_leave.sh says why)
	( set -o pipefail; timeout 600 "$b/perf/tally-linegen" --transport dpdk --eal "--no-huge --no-pci --file-prefix ${pf}w $gen_eal" "${gen_net[@]}" --port 9170 --ctl-socket $d/ctl.sock --dut-pid ${dpid:-0} --leave-last 60 "${gen[@]}" "$@" --json 2> >(tee $d/gen.err >&2) | tee -a "$out" ) &
	gpid=$!
	linegen_await_leave $gpid $d/gen.err 6000
	uptime
	kill $tpid 2>/dev/null; wait $tpid; st=$?; tpid=
	wait $gpid; echo "rc=$?"
	# 0: stopped by our SIGTERM; 3: its drain timed out on rounds the generator left open
	[ $st = 0 ] || echo "# $mode: tallyd exited with status $st"
	[ -n "${OUT:-}" ] && cp $d/tallyd.log "$OUT.tallyd-$mode.log"
	grep "totals" $d/tallyd.log | cut -c1-300; grep -o "loops=[0-9]*\|busy_loops=[0-9]*\|stale_round=[0-9]*\|too_early=[0-9]*\|duplicates=[0-9]*\|completions=[0-9]*\|resends=[0-9]*" $d/tallyd.log | sort -u | tr '\n' ' '; echo
done
python3 perf/perf_report.py --linegen-table "$out"
