# tests/verbs/tallyd_guest.sh — sourced by verbs_guest.sh in the guest (case "tallyd"): the
# DPDK appliance tallyd with rdma-listen, verbs only (no port; EAL --no-huge --no-pci), 2
# datapath lcores each polling the CQ of its own connections. Needs from verbs_guest.sh: B, A,
# T, V, ok, bad, job. Checks: the no-device-address error text (as tally-udpd's); a 3-rank
# f32 job (4 MiB x 3 rounds, 8 keys) verified, its keys summed on both cores and its RESULTs
# placed in the ranks' buffers (verbs_place.h; jsum from verbs_guest.sh); a request for
# a core tallyd lacks refused and named (verbs_badcore); status shows
# the rdma settings and 3 connections per core; a keyed job authenticated at setup (no
# per-packet MAC) and a wrong key refused at connect; a rank killed -9 mid-run is named to the
# two others as silent, and the appliance counts its connections down. Case "tallyd-restart"
# (below): tallyd killed -9 mid-run and restarted, every rank finishes verified.

td=
td_stop() { # SIGTERM (tallyd drains), wait past the drain by PID, kill -9 after; td_rc = status
	[ -n "$td" ] || return 0
	kill -TERM $td 2>/dev/null
	await_exit $STOP_S $td; td_rc=$await_rc; td=
}
td_start() { # NAME [EXTRA SETTINGS]: starts tallyd, sets td
	local name=$1; shift
	# the previous case's tallyd (stopped or killed -9) has exited before this one listens
	[ -n "$td" ] && await_exit $STOP_S $td
	$B/tallyd --rdma-listen $A:9270 --cores 2 --open-admission --mem 64M \
		--ctl-socket $T/td.sock "$@" -- --no-huge --file-prefix td$name \
		>$T/td$name.out 2>$T/td$name.err &
	td=$!
	for _ in $(seq 1 300); do
		grep -q "ready:" $T/td$name.out 2>/dev/null && return 0
		kill -0 $td 2>/dev/null || break
		sleep 0.1
	done
	bad "tallyd did not start: $(tail -n 3 $T/td$name.out $T/td$name.err | tr '\n' ' ')"
	kill -9 $td 2>/dev/null
	return 1
}

# The n-th figure of KEY in a compact JSON text (1 = the first occurrence).
nth() { grep -o "\"$2\":[0-9-]*" <<<"$1" | sed -n "${3}p" | cut -d: -f2; }
# tallyctl --json, compact (it pretty-prints)
tdctl() { $B/tallyctl --socket $T/td.sock --json "$@" 2>&1 | tr -d ' \n'; }

tallyd_case() {
	local TV="--transport verbs --port 9270" out st s c0 c1 pids=() rc0=0 rc2=0 t0 down0 down1
	if [ ! -x $B/tallyd ] || [ ! -x $B/tallyctl ]; then
		bad "tallyd case: no tallyd or tallyctl in /share/bin"; return
	fi
	out=$(timeout 60 $B/tallyd --rdma-listen 198.51.100.7:9270 --cores 2 --mem 64M \
		--ctl-socket $T/td0.sock -- --no-huge --file-prefix td0 2>&1)
	echo "$out" | grep -q "no RDMA device owns that address" &&
		ok "tallyd rdma-listen on an address no RDMA device has: $(echo "$out" | grep -o 'verbs: .*' | head -1)" ||
		bad "tallyd rdma-listen bad address: $(echo "$out" | tail -n 2)"

	td_start 1 --dead-rank-timeout-ms 8000 --drain-timeout-ms 1000 || return
	ok "tallyd: $(grep -o 'ready:.*' $T/td1.out)"
	job 61 "tallyd verbs only, 2 lcores: f32 4 MiB x 3 rounds" "$TV" "$TV" "$TV" \
		--bytes 4M --keys 8 --rounds 3 --dtype f32
	st=$(tdctl stats)
	c0=$(nth "$st" completions 2); c1=$(nth "$st" completions 3)
	if [ "${c0:-0}" -gt 0 ] && [ "${c1:-0}" -gt 0 ] && [ "$(nth "$st" verbs_rx_pkts 2)" -gt 0 ] &&
		[ "$(nth "$st" verbs_rx_pkts 3)" -gt 0 ]; then
		ok "tallyd: keys summed on both lcores (completions $c0 / $c1, verbs_rx_pkts $(nth "$st" verbs_rx_pkts 2) / $(nth "$st" verbs_rx_pkts 3))"
	else
		bad "tallyd: keys not spread over both lcores: $(echo "$st" | head -c 600)"
	fi
	# the lcores WRITE each RESULT's payload into the ranks' advertised buffers
	# (verbs_place.h): placed on both lcores, the ranks' copies at most 5%, the bound of
	# verbs_guest.sh's place_case: a RESULT re-sent after its advertisement was used (the
	# appliance's verbs_results_copied) goes the usual way (measured 1.06% under CI load)
	local pl=$(nth "$st" verbs_results_placed 1) cpd=$(nth "$st" verbs_results_copied 1)
	local used=$(jsum 61 results) inpl=$(jsum 61 results_placed)
	if [ "$(nth "$st" verbs_results_placed 2)" -gt 0 ] && [ "$(nth "$st" verbs_results_placed 3)" -gt 0 ] &&
		[ "$inpl" -gt 0 ] && [ $(((used - inpl) * 20)) -le "$used" ]; then
		ok "tallyd: RESULTs placed $pl (per lcore $(nth "$st" verbs_results_placed 2) / $(nth "$st" verbs_results_placed 3)), sent with payload $cpd; the ranks used $used, placed $inpl"
	else
		bad "tallyd placement: verbs_results_placed ${pl:-?} (per lcore $(nth "$st" verbs_results_placed 2) / $(nth "$st" verbs_results_placed 3)) verbs_results_copied ${cpd:-?}; ranks used $used placed $inpl"
	fi

	# ---- a connect request for a core tallyd lacks: refused by the listener, named, counted
	out=$(timeout 30 $B/verbs_badcore $A 9270 5 2>&1); rc0=$?
	st=$(tdctl stats)
	[ $rc0 = 0 ] && [ "$(nth "$st" verbs_conns_rejected 1)" -ge 1 ] &&
		ok "tallyd refused a request for core 5: $(echo "$out" | grep -o 'verbs: .*' | head -1); verbs_conns_rejected $(nth "$st" verbs_conns_rejected 1)" ||
		bad "tallyd, request for core 5 (rc $rc0, verbs_conns_rejected $(nth "$st" verbs_conns_rejected 1)): $out"
	rc0=0

	# ---- a keyed job over tallyd: each connection authenticated at setup on the lcore
	# that accepts it (it looks the key up in its own engine), no per-packet MAC; a wrong
	# key refused at connect and counted
	od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >$T/tdkey; echo >>$T/tdkey
	od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >$T/tdwrong; echo >>$T/tdwrong
	chmod 600 $T/tdkey $T/tdwrong
	out=$($B/tallyctl --socket $T/td.sock job-add 63 --token 63 --world-size 3 \
		--key-file $T/tdkey 2>&1) || bad "tallyd job-add with a key file: $out"
	job 63 "tallyd, keyed job over verbs (setup auth)" "$TV" "$TV" "$TV" \
		--bytes 4M --keys 8 --rounds 3 --dtype f32 --key-file $T/tdkey
	st=$(tdctl stats)
	if [ "$(grep -c '"auth_signed":0,"auth_verified":0' $T/j63.*.json | grep -c ':1$')" = 3 ] &&
		[ "$(nth "$st" verbs_conns_authed 1)" -ge 6 ] && [ "$(nth "$st" auth_verified 1)" = 0 ]; then
		ok "tallyd: setup-authenticated ranks, 0 per-packet MACs; verbs_conns_authed $(nth "$st" verbs_conns_authed 1), conn_auth_rx $(nth "$st" conn_auth_rx 1)"
	else
		bad "tallyd setup auth: $(grep -ho '"auth_signed":[0-9]*,"auth_verified":[0-9]*' $T/j63.*.json | tr '\n' ' ') verbs_conns_authed $(nth "$st" verbs_conns_authed 1) auth_verified $(nth "$st" auth_verified 1)"
	fi
	$B/tallyctl --socket $T/td.sock job-add 64 --token 64 --world-size 1 \
		--key-file $T/tdkey >/dev/null 2>&1
	out=$(timeout 60 $B/tally-worker $TV --host $A --job 64 --token 64 --rank 0 --world 1 \
		--bytes 64K --key-file $T/tdwrong --join-ms 20000 2>&1)
	st=$(tdctl stats)
	echo "$out" | grep -q "does not verify with the appliance's key (bad_mac)" &&
		[ "$(nth "$st" verbs_auth_bad_mac 1)" -ge 1 ] &&
		ok "tallyd: wrong key refused at connect, counted (verbs_auth_bad_mac $(nth "$st" verbs_auth_bad_mac 1))" ||
		bad "tallyd wrong key over verbs (verbs_auth_bad_mac $(nth "$st" verbs_auth_bad_mac 1)): $out"

	# ---- a rank killed -9 mid-run over tallyd: named to the others, its QPs counted down
	for r in 0 1 2; do
		timeout 150 $B/tally-worker $TV --host $A --job 62 --token 62 --rank $r --world 3 \
			--bytes 4M --keys 8 --rounds 60 >$T/tk$r.out 2>$T/tk$r.err &
		pids+=($!)
	done
	sleep 6
	s=$(tdctl status)
	if grep -q '"rdma"' <<<"$s" && [ "$(nth "$s" verbs_connections 1)" = 3 ] &&
		[ "$(nth "$s" verbs_connections 2)" = 3 ] && [ "$(nth "$s" connections 1)" = 6 ]; then
		ok "tallyctl status: rdma $(grep -o '"rdma":{[^}]*}' <<<"$s"), 3 verbs connections on each core"
	else
		bad "tallyctl status during the run: $(grep -o '"rdma":{[^}]*}' <<<"$s") verbs_connections $(nth "$s" verbs_connections 1)/$(nth "$s" verbs_connections 2): $(head -c 400 <<<"$s")"
	fi
	down0=$(nth "$(tdctl stats)" verbs_conns_down 1)
	kill -9 $(pgrep -P ${pids[1]}); t0=$SECONDS # the worker, not its timeout wrapper
	wait ${pids[1]} 2>/dev/null
	# the others wait for the dead-rank timeout (8 s) still connected: only the killed
	# rank's 2 connections may go down before it
	for _ in $(seq 1 14); do
		down1=$(nth "$(tdctl stats)" verbs_conns_down 1)
		[ $((${down1:-0} - ${down0:-0})) -ge 2 ] && break
		sleep 0.5
	done
	[ $((${down1:-0} - ${down0:-0})) = 2 ] &&
		ok "tallyd counted the killed rank's 2 connections down after $((SECONDS - t0)) s (verbs_conns_down $down0 -> $down1)" ||
		bad "tallyd verbs_conns_down $down0 -> $down1 $((SECONDS - t0)) s after a kill -9 (want 2 more)"
	wait ${pids[0]} || rc0=$?
	wait ${pids[2]} || rc2=$?
	if [ $rc0 != 0 ] && [ $rc2 != 0 ] && grep -q "rank 1 silent" $T/tk0.err $T/tk0.out &&
		grep -q "rank 1 silent" $T/tk2.err $T/tk2.out; then
		ok "tallyd: killed rank 1 named to ranks 0 and 2 after $((SECONDS - t0)) s: $(grep -ho 'rank 1 silent[^;]*' $T/tk0.err $T/tk0.out | head -1)"
	else
		bad "tallyd killed rank: survivors rc $rc0/$rc2: $(tail -n 2 $T/tk0.err $T/tk0.out $T/tk2.err | tr '\n' ' ')"
	fi
	# exit 3: the drain abandoned the killed job's open rounds (its ranks gave up)
	td_stop; rc0=$td_rc
	{ [ $rc0 = 0 ] || [ $rc0 = 3 ]; } && grep -q "tallyd: stopped" $T/td1.out $T/td1.err &&
		ok "tallyd stopped on SIGTERM (exit $rc0): $(grep -ho 'verbs_rx_pkts=[0-9]*\|verbs_conns_up=[0-9]*\|verbs_conns_down=[0-9]*' $T/td1.err | tr '\n' ' ')" ||
		bad "tallyd exit $rc0 on SIGTERM: $(tail -n 3 $T/td1.err)"
}

# Case "tallyd-mixed": tallyd with a DPDK port (net_af_packet on a veth whose peer is in a
# namespace) and rdma-listen beside it, 2 lcores: one job with ranks 0 and 2 over verbs and
# rank 1 over kernel UDP through the port. The lcores' transport sends each RESULT the way
# its rank joined (verbs staging, or the port's zero-copy chain). The PMDs come from the
# host in /share/pmds (the guest's packages are the binaries' libraries only).
tallyd_mixed_case() {
	local P=/share/pmds pids=() rc=0 r good st
	if [ ! -f $P/librte_net_af_packet.so.23 ]; then
		echo "SKIP tallyd-mixed: no af_packet PMD in /share/pmds (see the host's note)"; return
	fi
	ip netns add tdw && ip link add tdv0 mtu 9000 type veth peer name tdv1 mtu 9000 &&
		ip link set tdv1 netns tdw && ip link set tdv0 up &&
		ip -n tdw addr add 10.9.0.2/24 dev tdv1 && ip -n tdw link set tdv1 up &&
		ip -n tdw link set lo up || { bad "tallyd-mixed: veth/namespace setup"; return; }
	[ -n "$td" ] && await_exit $STOP_S $td # the previous case's tallyd
	LD_LIBRARY_PATH=$P $B/tallyd --port "net_af_packet0,iface=tdv0,framesz=9216,blocksz=36864,framecnt=512,qpairs=2" \
		--ip 10.9.0.1/24 --queues 2 --rx-desc 512 --tx-desc 512 --rdma-listen $A:9270 \
		--open-admission --mem 64M --drain-timeout-ms 1000 --ctl-socket $T/td.sock \
		-- --no-huge --file-prefix tdm -d $P/librte_bus_vdev.so.23 -d $P/librte_mempool_ring.so.23 \
		-d $P/librte_net_af_packet.so.23 >$T/tdm.out 2>$T/tdm.err &
	td=$!
	for _ in $(seq 1 300); do
		grep -q "ready:" $T/tdm.out 2>/dev/null && break
		kill -0 $td 2>/dev/null || break
		sleep 0.1
	done
	if ! grep -q "ready:" $T/tdm.out; then
		bad "tallyd-mixed did not start: $(tail -n 3 $T/tdm.out $T/tdm.err | tr '\n' ' ')"
		kill -9 $td 2>/dev/null; ip netns del tdw; return
	fi
	for r in 0 1 2; do
		if [ $r = 1 ]; then
			ip netns exec tdw timeout 150 $B/tally-worker --transport udp --host 10.9.0.1 \
				--job 63 --token 63 --rank 1 --world 3 --json --bytes 4M --keys 8 \
				--rounds 3 --dtype f32 >$T/tm1.json 2>$T/tm1.err &
		else
			timeout 150 $B/tally-worker --transport verbs --port 9270 --host $A --job 63 \
				--token 63 --rank $r --world 3 --json --bytes 4M --keys 8 --rounds 3 \
				--dtype f32 >$T/tm$r.json 2>$T/tm$r.err &
		fi
		pids+=($!)
	done
	for r in 0 1 2; do wait ${pids[$r]} || rc=1; done
	good=$(grep -l '"ok":true' $T/tm*.json 2>/dev/null | wc -l)
	st=$(tdctl stats)
	if [ $rc = 0 ] && [ "$good" = 3 ] && [ "$(nth "$st" verbs_rx_pkts 1)" -gt 0 ] &&
		[ "$(nth "$st" rx_pkts 1)" -gt 0 ]; then
		ok "tallyd-mixed: verbs beside a DPDK port, ranks verbs/UDP/verbs verified, $(grep -o '"checked":[0-9]*,"mismatches":[0-9]*' $T/tm0.json); port frames $(nth "$st" rx_pkts 1), verbs packets $(nth "$st" verbs_rx_pkts 1)"
	else
		bad "tallyd-mixed (rc $rc, $good/3 ok): $(grep -ho '"error":"[^"]*"' $T/tm*.json | tr '\n' ' ') $(tail -n 2 $T/tm*.err $T/tdm.err | tr '\n' ' ')"
	fi
	td_stop
	ip netns del tdw
}

# Case "tallyd-restart": tallyd (verbs only, 2 lcores) killed -9 mid-run and started again
# with the same settings: the workers' QPs break, they reconnect to each lcore, rejoin and
# re-push, and all finish verified; the restarted tallyd brings up every rank's 2
# connections and gets credit messages on them (the workers' new QPs return credits).
tallyd_restart_case() {
	local TV="--transport verbs --port 9270" pids=() rcs="" r st up crd
	[ -x $B/tallyd ] || { bad "tallyd-restart: no tallyd in /share/bin"; return; }
	td_start r1 --dead-rank-timeout-ms 15000 --rejoin-timeout-ms 2000 || return
	for r in 0 1 2; do
		timeout 150 $B/tally-worker $TV --host $A --job 65 --token 65 --rank $r --world 3 \
			--bytes 4M --keys 8 --rounds 12 --give-up-ms 60000 \
			>$T/tr$r.out 2>$T/tr$r.err &
		pids+=($!)
	done
	sleep 6
	kill -9 $td; await_exit $STOP_S $td; td=
	td_start r2 --dead-rank-timeout-ms 15000 --rejoin-timeout-ms 2000 || return
	for r in 0 1 2; do wait ${pids[$r]}; rcs="$rcs $?"; done
	st=$(tdctl stats)
	up=$(nth "$st" verbs_conns_up 1); crd=$(nth "$st" verbs_rx_credit_msgs 1)
	if [ "$rcs" = " 0 0 0" ] && [ "${up:-0}" -ge 6 ] && [ "${crd:-0}" -gt 0 ] &&
		[ "$(grep -l 'checked [0-9]* elements, 0 mismatches' $T/tr[012].out | wc -l)" = 3 ]; then
		ok "tallyd restarted mid-run (kill -9): all ranks finished verified; $(grep -h 'verbs: conn' $T/tr0.out); restarted tallyd: verbs_conns_up $up, credit messages from the workers $crd"
	else
		bad "tallyd restarted (rc$rcs, verbs_conns_up ${up:-?}, credit messages ${crd:-?}): $(tail -n 3 $T/tr[012].err $T/tr[012].out | tr '\n' ' ')"
	fi
	td_stop
}

# Case "tallyd-handoff": the listener's two refusal paths, injected (TALLY_VERBS_FAULT):
# the first connect request's move to its core's channel fails (migrate-fail), the next finds
# that core's hand-off ring full (handoff-full). Each is refused and counted, the worker is
# told "no free connection" and retries (a full appliance may free a connection), and the
# job finishes verified on a tallyd still serving.
tallyd_handoff_case() {
	local TV="--transport verbs --port 9270" st rej r pids=() rcs=""
	[ -x $B/tallyd ] || { bad "tallyd-handoff: no tallyd in /share/bin"; return; }
	TALLY_VERBS_FAULT=migrate-fail,handoff-full td_start h1 || return
	for r in 0 1 2; do
		timeout 120 $B/tally-worker $TV --host $A --job 66 --token 66 --rank $r --world 3 \
			--bytes 1M --keys 4 --rounds 2 >$T/th$r.out 2>$T/th$r.err &
		pids+=($!)
	done
	for r in 0 1 2; do wait ${pids[$r]}; rcs="$rcs $?"; done
	st=$(tdctl stats); rej=$(nth "$st" verbs_conns_rejected 1)
	if [ "$rcs" = " 0 0 0" ] && [ "${rej:-0}" = 2 ] &&
		[ "$(grep -l 'checked [0-9]* elements, 0 mismatches' $T/th[012].out | wc -l)" = 3 ] &&
		grep -q "rdma_migrate_id to core" $T/tdh1.err $T/tdh1.out &&
		[ "$(grep -l 'last error: .*no free connection' $T/th[012].out | wc -l)" -ge 1 ]; then
		ok "tallyd hand-off faults: verbs_conns_rejected $rej, the refused ranks retried and all 3 finished verified; told: $(grep -ho 'last error: .*no free connection[^;]*' $T/th[012].out | head -1)"
	else
		bad "tallyd hand-off faults (rc$rcs, verbs_conns_rejected ${rej:-?}, want 2): $(grep -h 'migrate' $T/tdh1.err $T/tdh1.out | head -1) $(tail -n 3 $T/th[012].err $T/th[012].out | tr '\n' ' ')"
	fi
	td_stop
}
