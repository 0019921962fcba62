#!/usr/bin/env bash
# tests/perf/test_linegen_memif_mc.sh TALLY_LINEGEN TALLYD REPORT_PY TALLYCTL — tally-linegen
# --gen-lcores 2 against tallyd on two net_memif ports, aggregating and then --io-forward,
# twice: --dut-cores 2 (one queue and one datapath lcore per port) and --dut-cores 1
# (tallyd --cores 1: its one lcore polls both ports, and says so at start and in its
# status' "polls"). Each time each
# generator lcore (its own port and job of 16 ranks) sent and had its answers back and
# checked, none bad; the summed rates are the lcores' sum; every appliance core found work;
# tallyd dropped nothing; both sides exit cleanly (tallyd leaves first: --leave-last).
# --gen-lcores 2 --dut-cores 3 is refused with the reason; a generator told 1 core against
# a 2-core tallyd stops at JOIN_OK naming --dut-cores 2; perf_report.py --linegen-table
# prints the 2 / 2 and 2 / 1 ratio rows.
# Functional only (2 CPUs shared by 4 polling lcores): counts, no timing.
set -u
lg=$1 td=$2 report=$3 tctl=$4
fail() { echo "FAIL: $*" >&2; exit 1; }
. "$(dirname "$0")/../../perf/linegen_leave.sh"
[ "$(id -u)" = 0 ] || { echo "SKIP: tallyd on net_memif needs root (DPDK)"; exit 77; }
# D >= N not a multiple of N is refused before the EAL starts, saying why
msg=$("$lg" --transport dpdk --gen-lcores 2 --dut-cores 3 --eal "--no-huge" --host 10.99.5.1,10.99.6.1 \
	--local-ip 10.99.5.2/24,10.99.6.2/24 --json 2>&1 >/dev/null); rc=$?
[ $rc = 1 ] && grep -q "multiple of N" <<<"$msg" || fail "2 lcores vs 3 cores: rc $rc, '$msg'"
dir=$(mktemp -d /tmp/lgmemifmc.XXXXXX)
pf=tlgmc$$
tpid= gpid=
cleanup() { [ -n "$gpid" ] && kill "$gpid" 2>/dev/null; [ -n "$tpid" ] && kill "$tpid" 2>/dev/null && wait "$tpid" 2>/dev/null; [ -n "${KEEP:-}" ] && cp -r "$dir" /tmp/lgmemifmc.kept; rm -rf "$dir"; }
trap cleanup EXIT
mult=${TALLY_TIMEOUT_MULTIPLIER:-1}
memif() { echo "net_memif$1,role=$2,socket=$dir/m$1.sock,socket-abstract=no,bsize=9216,id=0"; }
# D = 2: a queue and an lcore per port; D = 1: tallyd --cores 1, one lcore polls both ports
for D in 2 1; do
	if [ $D = 2 ]; then tdc=(--queues 1) tdl=0@0,1@1,2@1
	else tdc=(--cores 1) tdl=0@0,1@1; fi
	for mode in aggregation io-forward; do
		if [ $mode = io-forward ]; then extra=--io-forward; gen=--io-forward
		else extra=--open-admission; gen=; fi
		rm -f "$dir"/*.sock "$dir/td.log" "$dir/err.txt" # the last round's "ready" / "leaving last"
		timeout $((120 * mult)) "$td" --port "$(memif 0 server)" --ip 10.99.5.1/24 \
			--port "$(memif 1 server)" --ip 10.99.6.1/24 "${tdc[@]}" \
			--ctl-socket "$dir/ctl.sock" --idle-backoff off --mem 256M $extra \
			-- --no-huge --no-pci -m 1024 --lcores "$tdl" --file-prefix ${pf}a$D >"$dir/td.log" 2>&1 &
		tpid=$!
		for _ in $(seq $((100 * mult))); do grep -q ready "$dir/td.log" 2>/dev/null && break; sleep 0.1; done
		grep -q "ready: $D cores" "$dir/td.log" || { cat "$dir/td.log"; fail "$mode: tallyd did not start with $D cores"; }
		[ "$D" = 2 ] || grep -q "core 0 (lcore 1, UDP port 9170) polls port 0 queue 0, port 1 queue 0" "$dir/td.log" ||
			fail "$mode: no log line of core 0 polling both ports: $(grep polls "$dir/td.log")"
		if [ "$D" = 1 ]; then
			st_json=$(timeout 20 "$tctl" --socket "$dir/ctl.sock" --json status) || fail "$mode: tallyctl status"
			/usr/bin/python3 -c '
import json, sys
c = json.loads(sys.argv[1])["cores"]
want = [{"port": 0, "queue": 0}, {"port": 1, "queue": 0}]
sys.exit(0 if len(c) == 1 and c[0].get("polls") == want else 1)' "$st_json" ||
				fail "$mode: status does not say core 0 polls both ports: $st_json"
		fi
		dpid=$(pgrep -P "$tpid" -x tallyd)
		timeout $((90 * mult)) "$lg" --transport dpdk --gen-lcores 2 --dut-cores $D \
			--eal "--no-huge --no-pci -m 512 --file-prefix ${pf}w$D --lcores 0@0,1@0,2@0 --vdev $(memif 0 client) --vdev $(memif 1 client)" \
			--host 10.99.5.1,10.99.6.1 --local-ip 10.99.5.2/24,10.99.6.2/24 --port 9170 \
			--ctl-socket "$dir/ctl.sock" --dut-pid "${dpid:-0}" $gen --ranks 16 --chunk-kib 1 \
			--keys 2 --chunks 2 --trial-s 0.05 --trials 1 --steps 1 --lo 200 --hi 2000 \
			--repair-us 50000 --json --leave-last $((30 * mult)) >>"$dir/out.json" 2>"$dir/err.txt" &
		gpid=$!
		linegen_await_leave $gpid "$dir/err.txt" $((900 * mult))
		line=$(grep "\"mode\":\"$mode\"" "$dir/out.json" | grep "\"dut_cores\":$D,") || {
			kill $gpid 2>/dev/null; wait $gpid; cat "$dir/err.txt"; fail "no $mode line: $(cat "$dir/out.json")"; }
		/usr/bin/python3 - "$mode" "$line" "$D" <<'PY' || fail "$mode, $D cores: $line"
import json, sys
mode, r, ncores = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
def check(ok, what):
    if not ok:
        print(f"{mode}: {what}", file=sys.stderr)
        sys.exit(1)
check(r["gen_lcores"] == 2 and r["dut_cores"] == ncores, "core counts")
lc = r["unpaced_gen"]
check(len(lc) == 2, "two generator lcores reported")
for g, x in enumerate(lc):
    check(x["offered_pps"] > 0 and x["accepted_pps"] > 0, f"lcore {g} sent and got answers")
    check(x["checked"] > 0 and x["bad"] == 0, f"lcore {g} checked answers, none bad")
for k in ("offered_pps", "accepted_pps"):
    s = sum(x[k] for x in lc)
    check(abs(r["unpaced_" + k] - s) <= 0.05 * s, f"unpaced {k} is the lcores' sum")
check(r["unpaced_checked"] == sum(x["checked"] for x in lc), "checked summed")
check(r["unpaced_bad"] == 0 and r["port_overflow"] == 0, "no bad answer, no overflow")
for at in ("at_ndr", "at_pdr"):
    if r[at]["rate_pps"] > 0:
        check(len(r[at]["gen"]) == 2, f"{at}: both lcores")
# every appliance core found work in one of the reported trials
for c in range(ncores):
    check(any(x["core"] == c and x["busy_loops"] > 0 for k in
              ("unpaced_dut_lcores",) for x in r.get(k, [])) or
          any(x["core"] == c and x["busy_loops"] > 0 for at in ("at_ndr", "at_pdr")
              for x in r[at].get("dut_lcores", [])), f"appliance core {c} found work")
if mode == "io-forward":
    check(r["unpaced_dut_engine_rejects"] == 0, "io-forward ran no engine")
PY
		kill "$tpid"; wait "$tpid"; st=$?; tpid=
		wait $gpid; gst=$?; gpid=
		[ "$st" -lt 128 ] || fail "$mode, $D cores: tallyd died of signal $((st - 128)) (exit $st): $(tail -n 5 "$dir/td.log")"
		[ "$gst" = 0 ] || { cat "$dir/err.txt"; fail "$mode, $D cores: tally-linegen exited $gst"; }
		grep -q "drops: none" "$dir/td.log" || fail "$mode, $D cores: tallyd dropped frames: $(grep totals "$dir/td.log")"
	done
done
# an appliance with 2 cores and a generator told 1 (the default): JOIN_OK's core count
# stops the setup, naming the option to give; the generator still leaves last
rm -f "$dir"/*.sock "$dir/td.log" "$dir/err.txt"
timeout $((60 * mult)) "$td" --port "$(memif 0 server)" --ip 10.99.5.1/24 --queues 2 \
	--ctl-socket "$dir/ctl.sock" --idle-backoff off --mem 256M --open-admission \
	-- --no-huge --no-pci -m 1024 --lcores 0@0,1@1,2@1 --file-prefix ${pf}c >"$dir/td.log" 2>&1 &
tpid=$!
for _ in $(seq $((100 * mult))); do grep -q ready "$dir/td.log" 2>/dev/null && break; sleep 0.1; done
grep -q "ready: 2 cores" "$dir/td.log" || { cat "$dir/td.log"; fail "mismatch: tallyd did not start with 2 cores"; }
dpid=$(pgrep -P "$tpid" -x tallyd)
timeout $((60 * mult)) "$lg" --transport dpdk \
	--eal "--no-huge --no-pci -m 512 --file-prefix ${pf}x --lcores 0@0 --vdev $(memif 0 client)" \
	--host 10.99.5.1 --local-ip 10.99.5.2/24 --port 9170 --dut-pid "${dpid:-0}" --ranks 4 \
	--chunk-kib 1 --keys 2 --chunks 2 --json --leave-last $((30 * mult)) >"$dir/mm.json" 2>"$dir/err.txt" &
gpid=$!
linegen_await_leave $gpid "$dir/err.txt" $((300 * mult))
kill "$tpid"; wait "$tpid"; st=$?; tpid=
wait $gpid; gst=$?; gpid=
[ "$st" -lt 128 ] || fail "mismatch: tallyd died of signal $((st - 128))"
[ "$gst" = 1 ] && grep -q "appliance has 2 cores, not 1 (give tally-linegen --dut-cores 2)" "$dir/err.txt" ||
	fail "mismatch: exit $gst, $(grep -v EAL "$dir/err.txt")"
[ ! -s "$dir/mm.json" ] || fail "mismatch: a JSON line anyway: $(cat "$dir/mm.json")"
/usr/bin/python3 "$report" --linegen-table "$dir/out.json" >"$dir/table.md" || fail "no table"
for cd in "2 / 2" "2 / 1"; do
	grep -q "^| - | dpdk | $cd | 1024 | " "$dir/table.md" || fail "no $cd ratio row: $(cat "$dir/table.md")"
done
echo "ok: $(grep -c . "$dir/out.json") lines; $(grep '^| - | dpdk | 2 / [12] | 1024 | ' "$dir/table.md" | tr '\n' ' ')"
