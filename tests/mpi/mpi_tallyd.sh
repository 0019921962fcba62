#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# mpi_tallyd.sh --bin BUILD --mpi ompi|mpich — libtally_mpi against tallyd (DPDK,
# net_af_packet on a veth): 4 ranks of test_mpi under mpirun in a network namespace,
# every case (up to 16 MiB), sums through tallyd; counters show them taken over, and
# GSO off on every rank (TALLY_GSO unset: tallyd's JOIN_OK does not offer TALLY_CAP_GSO).
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
E2E_TAG=m
# shellcheck source=tests/e2e/lib.sh
. "$(dirname "$0")/../e2e/lib.sh"
e2e_require_netns
# shellcheck source=tests/mpi/mpi_netns_lib.sh
. "$(dirname "$0")/mpi_netns_lib.sh"
mpi_netns_setup "$BIN/appliance/tallyd"
e2e_addr w w0 10.98.0.2/24
e2e_bg a tallyd "$APP" --port \
	"net_af_packet0,iface=${ID}a0,framesz=9216,blocksz=36864,framecnt=2048,qpairs=1" \
	--ip 10.98.0.1/24 --base-port 9170 --open-admission --mem 512M \
	--ctl-socket "$E2E_TMP/tallyd.sock" -- --no-huge --no-pci -m 1024 --file-prefix "${ID}t" \
	--lcores "0@0,1@1"
app=$E2E_LAST_PID
e2e_wait_log tallyd "ready" 60 $app
export TALLY_APPLIANCES=10.98.0.1:9170 TALLY_MPI_THRESHOLD=4096 TALLY_MPI_STATS=$E2E_TMP/stats
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [ "$MPI" = ompi ]; then
	e2e_bg w mpi timeout $((300 * ${mult%.*})) $RUN --oversubscribe -np 4 --mca btl self,vader \
		-x LD_PRELOAD="$LIB" -x TALLY_APPLIANCES -x TALLY_MPI_THRESHOLD -x TALLY_MPI_STATS \
		"$TEST" --max $((16 << 20))
else
	e2e_bg w mpi env LD_PRELOAD="$LIB" timeout $((300 * ${mult%.*})) $RUN -np 4 \
		"$TEST" --max $((16 << 20))
fi
mp=$E2E_LAST_PID
wait $mp
rc=$?
cat "$E2E_TMP/mpi.log"
[ $rc = 0 ] || e2e_fail "test_mpi through tallyd: exit $rc"
$PY - "$E2E_TMP/stats" <<'PYEOF' || e2e_fail "counters"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 4, f"{len(rows)} ranks"
for f in ("allreduce", "iallreduce", "reduce_scatter_block", "reduce_scatter"):
    n = sum(r[f]["taken_calls"] for r in rows)
    assert n > 0, f"{f}: nothing taken over"
    print(f"{f}: taken over {n} calls through tallyd")
assert sum(r["errors"] for r in rows) == 0
# TALLY_GSO unset: tallyd's JOIN_OK offers no TALLY_CAP_GSO (its AF_PACKET port may get a
# GSO super-frame whole), so every rank sends without GSO
assert all(r.get("gso") == ["off (auto)"] for r in rows), [r.get("gso") for r in rows]
print("GSO:", rows[0]["gso"][0], "on every rank")
PYEOF
e2e_stop $app
e2e_log "PASS: $MPI through tallyd (net_af_packet)"
