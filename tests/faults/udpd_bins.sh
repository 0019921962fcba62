# shellcheck shell=bash
# SPDX-License-Identifier: Apache-2.0
# Sourced by the tally-udpd scripts whose only argument is --bin BUILDDIR (faults, e2e
# udpd_gso, security auth_udpd): sets bin, UDPD, WORKER and CTL (tally-udpd, tally-worker,
# tallyctl under it); exit 2 on another argument, 1 where tally-udpd or tally-worker is
# missing. Then udpd_scratch TAG gives the script its scratch and the helpers below.
bin=
while [ $# -gt 0 ]; do
	case "$1" in
	--bin) bin=$2; shift 2 ;;
	*) echo "$(basename "$0"): unknown argument $1" >&2; exit 2 ;;
	esac
done
UDPD=$bin/appliance/udpd/tally-udpd
WORKER=$bin/perf/tally-worker
CTL=$bin/control/tallyctl
[ -x "$UDPD" ] && [ -x "$WORKER" ] || { echo "no tally-udpd/tally-worker under $bin" >&2; exit 1; }

# udpd_scratch TAG: tmp, a new folder /tmp/tally-TAG.*; at exit the appliance in $app, those
# in apps and every background job are killed and tmp is removed (kept with KEEP_TMP=1).
udpd_scratch() {
	tmp=$(mktemp -d "/tmp/tally-$1.XXXXXX")
	app=
	apps=()
	trap udpd_cleanup EXIT
}
udpd_cleanup() {
	for p in ${app:+"$app"} "${apps[@]}" $(jobs -p); do kill -9 "$p" 2>/dev/null; done
	wait 2>/dev/null
	[ -n "${KEEP_TMP:-}" ] || rm -rf "$tmp"
}
# fail MSG: MSG and the last lines of each non-empty $tmp/*.err on stderr, exit 1.
fail() { echo "FAIL: $*" >&2; for f in "$tmp"/*.err; do [ -s "$f" ] && { echo "--- $f"; tail -5 "$f"; }; done >&2; exit 1; }
# jget FILE EXPR: EXPR (Python) of the JSON document d in FILE.
jget() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }
