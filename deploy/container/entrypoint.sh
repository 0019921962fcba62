#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# /usr/bin/tally-container-entry — the appliance image's entrypoint (deploy/container/).
#   udpd [tally-udpd SETTINGS]   the software appliance over kernel UDP: needs no capability
#   tallyd [tallyd SETTINGS]     the DPDK appliance: needs CAP_IPC_LOCK (DPDK locks its memory),
#                                CAP_NET_RAW (af_packet / af_xdp ports) and hugepages mounted
#                                at /dev/hugepages (unless --eal has --no-huge)
# It checks what the appliance needs before starting it and refuses, naming what is missing
# and the podman option that grants it. Control socket: /run/tally/tallyd.sock (the health
# check, `tallyctl status`, uses it).
set -eu
mode=${1:-udpd}
[ $# -gt 0 ] && shift
[ -d /run/tally ] || mkdir -p /run/tally

# has_cap N: bit N of the effective capability set
has_cap() {
	eff=$(sed -n 's/^CapEff:[[:space:]]*//p' /proc/self/status)
	[ $(( (0x$eff >> $1) & 1 )) = 1 ]
}
refuse() {
	echo "tally-container: $mode needs $1: $2" >&2
	exit 78
}

case "$mode" in
udpd)
	exec tally-udpd --ctl-socket /run/tally/tallyd.sock "$@" ;;
tallyd)
	has_cap 14 || refuse "capability IPC_LOCK" "podman run --cap-add IPC_LOCK (DPDK locks its memory)"
	has_cap 13 || refuse "capability NET_RAW" "podman run --cap-add NET_RAW (af_packet and af_xdp ports)"
	case " $* " in
	*--no-huge*) ;;
	*) grep -qs ' /dev/hugepages hugetlbfs ' /proc/mounts ||
		refuse "hugepages mounted at /dev/hugepages" "podman run -v /dev/hugepages:/dev/hugepages (or --eal --no-huge)" ;;
	esac
	exec tallyd --ctl-socket /run/tally/tallyd.sock "$@" ;;
*)
	echo "tally-container: the first argument is udpd or tallyd, not '$mode'" >&2
	exit 2 ;;
esac
