#!/usr/bin/env bash
# tests/e2e/e2e_run.sh — one end-to-end scenario: an appliance in one network namespace, W
# tally-worker processes in another, optionally an impaired link between them; every worker
# verifies every result of every round. Exit 0 pass, 1 fail, 77 skip (no root / no netns).
#
#   e2e_run.sh --tag T --bin BUILDDIR [--appliance udpd|afpacket|memif] [--workers 4]
#              [--bytes 64M] [--rounds 3] [--keys 16] [--dtypes "f32 bf16"] [--cores 2]
#              [--impair none|nft-drop:PCT|nft-dup:PCT|relay:ARGS] [--expect-retx]
#              [--expect-dups] [--worker-args "..."] [--appliance-args "..."]
#              [--expect-log "TEXT"] (the appliance logs TEXT by the time it is ready)
# relay:ARGS is a comma list of tly_relay options, e.g. relay:drop=1,dup=1,reorder=5,delay-us=50
set -u
here=$(cd "$(dirname "$0")" && pwd)

tag=x bin= appliance=udpd workers=4 bytes=64M rounds=3 keys=16 dtypes="f32 bf16" cores=2
impair=none expect_retx=0 expect_dups=0 worker_args= time_limit=150 appliance_args= expect_log=
while [ $# -gt 0 ]; do
	case "$1" in
	--tag) tag=$2; shift ;;
	--bin) bin=$2; shift ;;
	--appliance) appliance=$2; shift ;;
	--workers) workers=$2; shift ;;
	--bytes) bytes=$2; shift ;;
	--rounds) rounds=$2; shift ;;
	--keys) keys=$2; shift ;;
	--dtypes) dtypes=$2; shift ;;
	--cores) cores=$2; shift ;;
	--impair) impair=$2; shift ;;
	--expect-retx) expect_retx=1 ;;
	--expect-dups) expect_dups=1 ;;
	--worker-args) worker_args=$2; shift ;;
	--appliance-args) appliance_args=$2; shift ;; # tallyd settings (e.g. --dispatch-ring 64)
	--time-limit) time_limit=$2; shift ;;
	--expect-log) expect_log=$2; shift ;;
	*) echo "e2e_run.sh: unknown argument $1" >&2; exit 2 ;;
	esac
	shift
done
E2E_TAG=$tag
# shellcheck source=lib.sh
. "$here/lib.sh"

WORKER=$bin/perf/tally-worker
TALLYD=$bin/appliance/tallyd
UDPD=$bin/appliance/udpd/tally-udpd
RELAY=$bin/tests/e2e/tly_relay
[ -x "$WORKER" ] || e2e_fail "no tally-worker at $WORKER"

e2e_require_netns
port=9170
job=7
token=0x5eed1234abcd
mtu=9000

# Topology: workers in $ID"w"; appliance in $ID"a"; with a relay, $ID"r" sits between them.
e2e_ns w
e2e_ns a
app_ip=10.99.0.1
if [ "${impair%%:*}" = relay ]; then
	e2e_ns r
	e2e_veth w w0 r r0 $mtu
	e2e_veth r r1 a a0 $mtu
	e2e_addr w w0 10.99.0.2/24
	e2e_addr r r0 10.99.0.1/24
	e2e_addr r r1 10.98.0.2/24
	app_ip=10.98.0.1
	target=10.99.0.1
else
	e2e_veth w w0 a a0 $mtu
	e2e_addr w w0 10.99.0.2/24
	target=$app_ip
fi

case "$appliance" in
udpd)
	[ -x "$UDPD" ] || e2e_fail "no tally-udpd at $UDPD"
	e2e_addr a a0 $app_ip/24
	e2e_bg a appliance "$UDPD" --addr $app_ip --port $port --cores "$cores" --open \
		--ctl-socket "$E2E_TMP/ctl.sock" --stats "$E2E_TMP/appliance.json"
	app_pid=$E2E_LAST_PID
	;;
afpacket)
	[ -x "$TALLYD" ] || e2e_fail "no tallyd at $TALLYD"
	# tallyd owns a0 through AF_PACKET: the kernel must not hold the address (it would
	# answer with ICMP port unreachable); tallyd answers ARP for it. framesz must fit the
	# mbuf, blocksz be a multiple of the page size.
	# One datapath lcore per queue; EAL lcore 0 is the main thread.
	lcores="0-$cores"
	[ "$cores" -ge 2 ] && lcores="0@0,$(seq -s, 1 "$cores" | sed 's/\([0-9]*\)/\1@1/g')"
	# shellcheck disable=SC2086
	e2e_bg a appliance "$TALLYD" \
		--port "net_af_packet0,iface=${ID}a0,framesz=9216,blocksz=36864,framecnt=4096,qpairs=$cores" \
		--ip $app_ip/24 --queues "$cores" --base-port $port --open-admission --mem 2G --det-pool 64M \
		--log-level debug --idle-backoff on --ctl-socket "$E2E_TMP/ctl.sock" $appliance_args \
		-- --no-huge --no-pci -m 3072 --file-prefix "$ID" --lcores "$lcores"
	app_pid=$E2E_LAST_PID
	;;
memif)
	[ -x "$TALLYD" ] || e2e_fail "no tallyd at $TALLYD"
	# One memif port per DPDK worker (a memif connects one pair); one datapath lcore per
	# port, spread over the CPUs; the sockets live in this test's temporary directory.
	ports=() lc="0@0"
	for r in $(seq 0 $((workers - 1))); do
		ports+=(--port "net_memif$r,role=server,socket=$E2E_TMP/m$r.sock,socket-abstract=no,bsize=9216,id=0"
			--ip "10.99.$((r + 1)).1/24")
		lc="$lc,$((r + 1))@$(( (r + 1) % 2 ))"
	done
	# shellcheck disable=SC2086
	e2e_bg a appliance "$TALLYD" "${ports[@]}" --base-port $port --open-admission --mem 2G --det-pool 64M \
		--log-level debug --idle-backoff on --ctl-socket "$E2E_TMP/ctl.sock" $appliance_args \
		-- --no-huge --no-pci -m 3072 --file-prefix "$ID" --lcores "$lc"
	app_pid=$E2E_LAST_PID
	;;
*)
	e2e_fail "appliance '$appliance' not handled by this script"
	;;
esac

# Routes: with a relay, the workers reach the appliance through it.
if [ "${impair%%:*}" = relay ]; then
	args=${impair#relay:}
	rargs=()
	IFS=, read -r -a kv <<<"$args"
	for x in "${kv[@]}"; do [ -n "$x" ] && rargs+=("--${x%%=*}" "${x#*=}"); done
	e2e_bg r relay "$RELAY" --listen 10.99.0.1 --to $app_ip --base $port --ncores "$cores" \
		--stats "$E2E_TMP/relay.json" "${rargs[@]}"
	relay_pid=$E2E_LAST_PID
fi

case "$impair" in
nft-drop:*)
	command -v nft >/dev/null || e2e_fail "nftables (nft) missing: tests/run.sh installs it"
	pct=${impair#nft-drop:}
	# Drop pct% of datagrams each way, in the workers' namespace.
	ip netns exec "$ID"w nft -f - <<EOF || e2e_fail "nft rules"
table inet tly {
	chain out { type filter hook output priority 0; udp dport $port-$((port + 63)) numgen random mod 100 < $pct counter drop; }
	chain in { type filter hook input priority 0; udp sport $port-$((port + 63)) numgen random mod 100 < $pct counter drop; }
}
EOF
	;;
nft-dup:*)
	command -v nft >/dev/null || e2e_fail "nftables (nft) missing: tests/run.sh installs it"
	pct=${impair#nft-dup:}
	ip netns exec "$ID"w nft -f - <<EOF || e2e_fail "nft rules"
table ip tlydup {
	chain post { type filter hook postrouting priority 0; udp dport $port-$((port + 63)) numgen random mod 100 < $pct counter dup to $target device ${ID}w0; }
}
EOF
	;;
none|relay:*) ;;
*) e2e_fail "unknown impairment '$impair'" ;;
esac

case "$appliance" in
udpd) e2e_wait_log appliance "cores on port" 60 "$app_pid" ;;
*) e2e_wait_log appliance "ready" 90 "$app_pid" ;;
esac
if [ -n "$expect_log" ]; then
	grep -qF "$expect_log" "$E2E_TMP/appliance.log" || e2e_fail "the appliance did not log '$expect_log'"
	e2e_log "appliance logged: $expect_log"
fi

fail=0
summary=()
keybase=0
for dt in $dtypes; do
	pids=()
	seed=$((RANDOM + 1)) # one seed for all ranks: each computes the others' data from it
	for r in $(seq 0 $((workers - 1))); do
		# shellcheck disable=SC2086
		xargs_=()
		host=$target
		if [ "$appliance" = memif ]; then
			host=10.99.$((r + 1)).1
			xargs_=(--transport dpdk --local-ip "10.99.$((r + 1)).2/24" --dpdk
				"--no-huge --no-pci -m 512 --file-prefix ${ID}w$r-$dt --lcores 0@$((r % 2)) --vdev net_memif0,role=client,socket=$E2E_TMP/m$r.sock,socket-abstract=no,bsize=9216,id=0")
		fi
		e2e_bg w "worker-$dt-$r" "$WORKER" "${xargs_[@]}" --host $host --port $port --job $((job + keybase / 1000)) \
			--token $token --rank "$r" --world "$workers" --bytes "$bytes" --keys "$keys" \
			--rounds "$rounds" --dtype "$dt" --key-base $keybase --json \
			--seed $seed $worker_args
		pids+=("$E2E_LAST_PID")
	done
	e2e_log "$dt (seed $seed): $workers workers x $bytes x $rounds rounds over $appliance ($impair)"
	e2e_wait_pids "$time_limit" "${pids[@]}" || fail=1
	res=$($PY - "$E2E_TMP" "$dt" "$workers" "$expect_retx" <<'PY'
import glob, json, sys
tmp, dt, w, expect_retx = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
objs = []
for r in range(w):
    try:
        with open(f"{tmp}/worker-{dt}-{r}.log") as f:
            lines = [l for l in f if l.startswith("{")]
        objs.append(json.loads(lines[-1]))
    except Exception as e:
        print(f"rank {r}: no JSON result ({e})"); sys.exit(1)
bad = [o for o in objs if not o["ok"] or o["mismatches"]]
retx = sum(o["retransmits"] for o in objs)
dups = sum(o["dup_results"] for o in objs)
secs = max(o["seconds"] for o in objs)
gbps = sum(o["bytes"] * o["rounds"] for o in objs) * 8 / secs / 1e9 if secs else 0
print(f"{dt}: {len(objs)} workers ok={len(objs)-len(bad)} checked={sum(o['checked'] for o in objs)} "
      f"mismatches={sum(o['mismatches'] for o in objs)} aggregate={gbps:.2f} Gbit/s "
      f"retransmits={retx} dup_results={dups} max_err_ratio={max(o['max_err_ratio'] for o in objs):.3g}")
def tot(f):
    return sum(o.get(f, 0) for o in objs)
# how the losses were repaired (client counters summed over the ranks)
print(f"  rounds/s={objs[0]['rounds'] / secs if secs else 0:.3f} pushes={tot('pushes')} "
      f"fast_retransmits={tot('fast_retransmits')} probes={tot('probes')} helds={tot('helds')} "
      f"missing={tot('missing')} result_asks={tot('result_asks')} results={tot('results')} tx_pkts={tot('tx_pkts')} rx_pkts={tot('rx_pkts')}")
print(f"  window: now={tot('window_now')} decreases={tot('window_decreases')} "
      f"increases={tot('window_increases')} min={min((o.get('window_min', 0) for o in objs), default=0)} "
      f"qdelay_us={max(o.get('qdelay_us', 0) for o in objs)} qtarget_us={max(o.get('qtarget_us', 0) for o in objs)}")
for o in bad:
    print(f"  rank {o['rank']} FAILED: {o['error']}")
if bad or (expect_retx and retx == 0):
    if expect_retx and retx == 0:
        print("  expected retransmissions on this impaired link, saw none")
    sys.exit(1)
PY
) || { fail=1; dtfail=1; }
	echo "$res"
	summary+=("$res")
	# A failed round: what the appliance still waits for, per core, before it is stopped
	# (the chunks, the ranks missing, the key's owning core).
	if [ "${dtfail:-0}" = 1 ] && [ -x "$bin/control/tallyctl" ] && [ -S "$E2E_TMP/ctl.sock" ]; then
		for q in "keys $((job + keybase / 1000))" "stuck 0 --limit 20" workers stats status; do
			# shellcheck disable=SC2086
			timeout 20 "$bin/control/tallyctl" --socket "$E2E_TMP/ctl.sock" $q 2>&1 |
				head -n 80 | sed "s/^/  tallyctl ${q%% *}: /"
		done
	fi
	dtfail=0
	# Next dtype: new keys (a key's dtype is fixed) in a new job: a rank whose BYE was lost
	# on an impaired link stays bound to its old address for the rejoin timeout.
	keybase=$((keybase + 1000))
done

if [ -n "${relay_pid:-}" ]; then
	e2e_stop "$relay_pid"
	e2e_log "relay: $(cat "$E2E_TMP/relay.json" 2>/dev/null)"
fi
case "$impair" in nft-*)
	ip netns exec "$ID"w nft list ruleset | grep -E 'counter packets' | sed 's/^[ \t]*/  nft: /' ;;
esac
t0=$(date +%s)
e2e_stop "$app_pid" || { e2e_log "appliance exit status $? after SIGTERM"; fail=1; }
e2e_log "appliance stopped in $(( $(date +%s) - t0 )) s"
app_stats=$(cat "$E2E_TMP/appliance.json" 2>/dev/null)
if [ -z "$app_stats" ]; then
	# tallyd logs its I/O and engine totals on exit: turn "k=v ..." into one JSON object.
	e2e_log "appliance: $(grep -E "tallyd: totals:" "$E2E_TMP/appliance.log" | tail -n 1)"
	app_stats=$(grep -E "engine totals:" "$E2E_TMP/appliance.log" | tail -n 1 | $PY -c '
import json, re, sys
line = sys.stdin.read()
print(json.dumps({k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)}) if line else "")')
fi
e2e_log "appliance: $app_stats"
if [ "$expect_dups" = 1 ]; then
	# A duplicate push is answered with a re-sent RESULT (a worker's dup_results); the
	# software appliance also counts them itself.
	$PY - "$app_stats" "$E2E_TMP" <<'PY' || fail=1
import glob, json, sys
s = json.loads(sys.argv[1]) if sys.argv[1].startswith("{") else {}
dup_results = 0
for f in glob.glob(sys.argv[2] + "/worker-*.log"):
    lines = [l for l in open(f) if l.startswith("{")]
    if lines:
        dup_results += json.loads(lines[-1]).get("dup_results", 0)
print(f"duplicates: appliance duplicates={s.get('duplicates', 'n/a')} resends={s.get('resends', 'n/a')} "
      f"worker dup_results={dup_results}")
if dup_results == 0 or s.get("duplicates", 1) == 0:
    print("expected duplicates to be counted on this link, saw none"); sys.exit(1)
PY
fi
[ $fail = 0 ] && e2e_log PASS || e2e_log FAIL
exit $fail
