#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# nccl_tallyd.sh --bin BUILDDIR — the NCCL plugin harness's CollNet sums (3 ranks, every
# dtype, all-gather, reduce-scatter, 64 MiB f32; v11 and v8 tables) against tallyd (DPDK
# net_af_packet on a veth pair between two network namespaces, open admission, deterministic
# pool), bit for bit (suite 'nccl'). Exit 77 (skip) without root, netns or tallyd.
set -u
bin=
while [ $# -gt 0 ]; do
	case "$1" in
	--bin) bin=$2; shift 2 ;;
	*) echo "nccl_tallyd.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
here=$(cd "$(dirname "$0")" && pwd)
E2E_TAG=nccl
# shellcheck source=../e2e/lib.sh
. "$here/../e2e/lib.sh"
TALLYD=$bin/appliance/tallyd
HARNESS=$bin/tests/nccl/test_nccl_plugin
PLUGIN=$bin/gpu_agent/nccl/libnccl-net-tally.so
[ -x "$TALLYD" ] || e2e_skip "tallyd not built (no DPDK)"
[ -x "$HARNESS" ] && [ -f "$PLUGIN" ] || e2e_fail "harness or plugin missing under $bin"
e2e_require_netns

port=9170 app_ip=10.96.0.1 wk_ip=10.96.0.2
e2e_ns w
e2e_ns a
e2e_veth w w0 a a0 9000
e2e_addr w w0 $wk_ip/24
# tallyd owns a0 through AF_PACKET (the kernel holds no address there; tallyd answers ARP)
e2e_bg a appliance "$TALLYD" \
	--port "net_af_packet0,iface=${ID}a0,framesz=9216,blocksz=36864,framecnt=2048,qpairs=2" \
	--ip $app_ip/24 --queues 2 --base-port $port --open-admission --mem 512M --det-pool 32M \
	--idle-backoff on --ctl-socket "$E2E_TMP/ctl.sock" \
	-- --no-huge --no-pci -m 1024 --file-prefix "$ID" --lcores "0@0,1@1,2@1"
app=$E2E_LAST_PID
e2e_wait_log appliance "ready" 60 "$app"
ip netns exec "${ID}w" env TALLY_APPLIANCES=$app_ip:$port \
	timeout $((600 * ${TALLY_TIMEOUT_MULTIPLIER:-1})) "$HARNESS" "$PLUGIN" - coll-ext ||
	e2e_fail "the plugin's sums against tallyd failed (log: $E2E_TMP/appliance.log)"
echo "PASS: CollNet sums through tallyd (net_af_packet) bit-exact"
