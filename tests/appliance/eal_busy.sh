#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# tallyd started while another tallyd with the same DPDK file prefix still holds its runtime
# files (a restart right after a stop): it fails with the cause (the other instance's files
# under /var/run/dpdk/<prefix>) and the fix (wait, or --file-prefix), not just
# "EAL init failed: Success" (issue 39). Skips (77) without root.
set -u
TALLYD=${TALLYD_BIN:?TALLYD_BIN}
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (/var/run/dpdk)"; exit 77; }
M=${TALLY_TIMEOUT_MULTIPLIER:-1}
T=$(mktemp -d /tmp/tally-eal-busy.XXXXXX)
P="talleal$$"
ARGS="--port net_null0 --ip 10.9.9.1/24 --open-admission --mem 64M"
EAL="--no-huge --no-pci -m 256 --file-prefix $P"
timeout $((30 * M)) "$TALLYD" $ARGS --ctl-socket "$T/1.sock" -- $EAL >"$T/first.log" 2>&1 &
FIRST=$!
cleanup() { kill "$FIRST" 2>/dev/null; wait "$FIRST" 2>/dev/null; rm -rf "$T" "/var/run/dpdk/$P"; }
trap cleanup EXIT
# the first one holds the lock once it prints its ports; wait for that (bounded)
i=0
while ! grep -q "cores on\|port\|ctl\|control" "$T/first.log" 2>/dev/null; do
	i=$((i + 1)); [ $i -gt $((200 * M)) ] && { echo "FAIL: first tallyd did not start"; cat "$T/first.log"; exit 1; }
	kill -0 "$FIRST" 2>/dev/null || { echo "FAIL: first tallyd exited"; cat "$T/first.log"; exit 1; }
	sleep 0.1
done
sleep 1
timeout $((30 * M)) "$TALLYD" $ARGS --ctl-socket "$T/2.sock" -- $EAL >"$T/second.log" 2>&1
rc=$?
fail=0
if [ $rc = 0 ] || [ $rc = 124 ]; then echo "FAIL: second tallyd rc $rc (expected a failure)"; fail=1; fi
for want in "/var/run/dpdk/$P" "file-prefix" "Wait for it to exit"; do
	grep -q -- "$want" "$T/second.log" || { echo "FAIL: the error does not say '$want'"; fail=1; }
done
grep "tallyd:" "$T/second.log" | sed 's/^/  /'
[ $fail = 0 ] && echo "ok: a second tallyd on a busy file prefix names the previous instance's runtime files and the fix"
exit $fail
