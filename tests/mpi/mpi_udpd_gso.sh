#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# mpi_udpd_gso.sh --bin BUILD --mpi ompi|mpich — the workers' UDP GSO default off loopback:
# tally-udpd in one network namespace, 4 ranks of test_mpi (--loop: 1 MiB Allreduces,
# checked) under mpirun in another, joined by a veth (MTU 9000). Three runs:
#   TALLY_GSO unset: tally-udpd's JOIN_OK offers TALLY_CAP_GSO, so every rank says
#                    "on (auto)" (TALLY_MPI_STATS) and the pushes reach tally-udpd as GSO
#                    super-datagrams (its udp_rx_gro_batches > 0);
#   TALLY_GSO=0:     "off (forced)", no super-datagram arrives (udp_rx_gro_batches = 0);
#   TALLY_GSO=1:     "on (forced)", super-datagrams arrive.
# (The same rule keeps GSO off against tallyd: mpi_tallyd.sh checks "off (auto)".)
set -u
BIN= MPI=
while [ $# -gt 0 ]; do
	case "$1" in
	--bin) BIN=$(realpath "$2"); shift ;;
	--mpi) MPI=$2; shift ;;
	*) echo "usage: $0 --bin BUILD_DIR --mpi ompi|mpich" >&2; exit 2 ;;
	esac
	shift
done
E2E_TAG=g
# shellcheck source=tests/e2e/lib.sh
. "$(dirname "$0")/../e2e/lib.sh"
e2e_require_netns
# shellcheck source=tests/mpi/mpi_netns_lib.sh
. "$(dirname "$0")/mpi_netns_lib.sh"
mpi_netns_setup "$BIN/appliance/udpd/tally-udpd"
e2e_addr a a0 10.97.0.1/24
e2e_addr w w0 10.97.0.2/24
export TALLY_APPLIANCES=10.97.0.1:9170 TALLY_MPI_THRESHOLD=4096
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# run TAG WANT_STATE WANT_GRO(yes|no) [TALLY_GSO value]
run() {
	local tag=$1 want=$2 gro=$3 gso=${4:-} st="$E2E_TMP/$1.stats"
	e2e_bg a "udpd-$tag" "$APP" --addr 10.97.0.1 --port 9170 --cores 2 --open --mem 512M \
		--ctl-socket "$E2E_TMP/$tag.sock" --stats "$E2E_TMP/$tag.udpd.json"
	local app=$E2E_LAST_PID
	e2e_wait_log "udpd-$tag" "cores on port" 30 $app
	local env=(env TALLY_MPI_STATS="$st")
	[ -n "$gso" ] && env+=(TALLY_GSO="$gso")
	if [ "$MPI" = ompi ]; then
		e2e_bg w "mpi-$tag" "${env[@]}" timeout $((120 * ${mult%.*})) $RUN --oversubscribe \
			-np 4 --mca btl self,vader -x LD_PRELOAD="$LIB" -x TALLY_APPLIANCES \
			-x TALLY_MPI_THRESHOLD -x TALLY_MPI_STATS ${gso:+-x TALLY_GSO} "$TEST" --loop 10
	else
		e2e_bg w "mpi-$tag" "${env[@]}" LD_PRELOAD="$LIB" timeout $((120 * ${mult%.*})) \
			$RUN -np 4 "$TEST" --loop 10
	fi
	local mp=$E2E_LAST_PID rc
	wait $mp
	rc=$?
	e2e_stop $app
	cat "$E2E_TMP/mpi-$tag.log"
	[ $rc = 0 ] || e2e_fail "$tag: test_mpi exit $rc"
	$PY - "$st" "$E2E_TMP/$tag.udpd.json" "$want" "$gro" "$tag" <<'PYEOF' || e2e_fail "$tag: GSO"
import json, sys
st, ud, want, gro, tag = sys.argv[1:]
rows = [json.loads(l) for l in open(st)]
assert len(rows) == 4, f"{len(rows)} ranks"
assert sum(r["allreduce"]["taken_calls"] for r in rows) > 0, "nothing taken over"
assert sum(r["errors"] for r in rows) == 0, "errors"
states = [r.get("gso") for r in rows]
u = json.load(open(ud))
print(f"{tag}: ranks' GSO {states}; tally-udpd udp_rx_calls {u['udp_rx_calls']} "
      f"udp_rx_gro_batches {u['udp_rx_gro_batches']} rx_pkts {u.get('rx_pkts')}")
assert all(s == [want] for s in states), f"want [{want!r}] on every rank"
if gro == "yes":
    assert u["udp_rx_gro_batches"] > 0, "no GSO super-datagram reached tally-udpd"
else:
    assert u["udp_rx_gro_batches"] == 0, "super-datagrams arrived with GSO off"
PYEOF
}

run auto "on (auto)" yes
run off "off (forced)" no 0
run on "on (forced)" yes 1
e2e_log "PASS: $MPI: GSO on (auto) against tally-udpd over a veth, TALLY_GSO=0/1 honoured"
