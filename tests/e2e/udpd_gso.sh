#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# udpd_gso.sh --bin BUILDDIR — tally-udpd's batching on the kernel path (suite 'e2e'):
#  1. by default RESULTs leave as UDP GSO super-datagrams and pushes arrive as GRO batches
#     (tally-udpd's --stats: udp_tx_gso_sends, udp_rx_gro_batches > 0), the sums verified
#     by three tally-worker ranks, no duplicate push and no re-sent chunk;
#  2. with --gso off --gro off the same job runs with neither (and still verifies);
#  3. a bad value ('--gso maybe') is refused at start (exit 2) naming the setting.
set -u
# --bin BUILDDIR -> bin, UDPD, WORKER; udpd_scratch, fail, jget
# shellcheck source=tests/faults/udpd_bins.sh
. "$(cd "$(dirname "$0")" && pwd)/../faults/udpd_bins.sh"
udpd_scratch udpd-gso
port=$((21000 + ($$ % 20000)))

# run_job TAG [udpd settings]: a 3-rank job of 2 MiB x 3 rounds, verified; stats in $tmp/TAG.json
run_job() {
	local tag=$1; shift
	"$UDPD" --addr 127.0.0.1 --port "$port" --cores 2 --job 5 --no-auth --token 9 --world 3 \
		--mem 256M --ctl-socket "$tmp/$tag.sock" --stats "$tmp/$tag.json" "$@" \
		>/dev/null 2>"$tmp/$tag-udpd.err" &
	app=$!
	sleep 0.3
	local pids=()
	for r in 0 1 2; do
		timeout 60 "$WORKER" --host 127.0.0.1 --port "$port" --job 5 --token 9 --rank $r \
			--world 3 --bytes 2M --keys 4 --rounds 3 --gso --json \
			>"$tmp/$tag-w$r.json" 2>"$tmp/$tag-w$r.err" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || fail "$tag: a worker failed"; done
	kill -TERM "$app"; wait "$app"; app=
	for r in 0 1 2; do
		[ "$(jget "$tmp/$tag-w$r.json" 'd["ok"] and d["mismatches"] == 0')" = True ] ||
			fail "$tag: rank $r did not verify"
		[ "$(jget "$tmp/$tag-w$r.json" 'd["retransmits"]')" = 0 ] ||
			fail "$tag: rank $r re-sent chunks with no loss"
	done
	[ "$(jget "$tmp/$tag.json" 'd["duplicates"]')" = 0 ] || fail "$tag: duplicate pushes"
	echo "$tag: $(jget "$tmp/$tag.json" '{k: d[k] for k in ("pushes", "tx_pkts", "udp_tx_calls", "udp_tx_gso_sends", "udp_rx_calls", "udp_rx_gro_batches")}')"
}

run_job default
[ "$(jget "$tmp/default.json" 'd["udp_tx_gso_sends"] > 0')" = True ] ||
	fail "default: RESULTs did not leave as GSO super-datagrams"
[ "$(jget "$tmp/default.json" 'd["udp_rx_gro_batches"] > 0')" = True ] ||
	fail "default: pushes did not arrive as GRO batches"

run_job off --gso off --gro off
[ "$(jget "$tmp/off.json" 'd["udp_tx_gso_sends"]')" = 0 ] || fail "--gso off: GSO used"
[ "$(jget "$tmp/off.json" 'd["udp_rx_gro_batches"]')" = 0 ] || fail "--gro off: GRO used"

"$UDPD" --addr 127.0.0.1 --port "$port" --gso maybe >/dev/null 2>"$tmp/bad.err"
rc=$?
[ $rc = 2 ] || fail "--gso maybe: exit $rc, not 2"
grep -q "gso maybe" "$tmp/bad.err" || fail "--gso maybe: the error does not name the setting: $(cat "$tmp/bad.err")"
echo "udpd_gso: ok"
