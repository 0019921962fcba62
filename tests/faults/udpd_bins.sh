# shellcheck shell=bash
# SPDX-License-Identifier: Apache-2.0
# Sourced by the faults scripts whose only argument is --bin BUILDDIR: sets bin, UDPD and
# WORKER (tally-udpd, tally-worker under it); exit 2 on another argument, 1 where either
# binary is missing.
bin=
while [ $# -gt 0 ]; do
	case "$1" in
	--bin) bin=$2; shift 2 ;;
	*) echo "$(basename "$0"): unknown argument $1" >&2; exit 2 ;;
	esac
done
UDPD=$bin/appliance/udpd/tally-udpd
WORKER=$bin/perf/tally-worker
[ -x "$UDPD" ] && [ -x "$WORKER" ] || { echo "no tally-udpd/tally-worker under $bin" >&2; exit 1; }
