#!/usr/bin/env bash
# tests/verbs/tallyd_host.sh — meson test 'tallyd_rdma_host' (suite verbs), on the host, no
# VM: tallyd --rdma-listen verbs only (no port) prints its configuration (EAL without PCI),
# and where the host has no RDMA device it stops at start with the text tally-udpd gives,
# naming what to load. Skips (77) where the host has an RDMA device (the guest suite covers
# the rest) or tallyd cannot start EAL here.
# usage: tallyd_host.sh TALLYD
set -uo pipefail
td=${1:?usage: tallyd_host.sh TALLYD}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tallyd-rdma-host.XXXXXX")
trap 'rm -rf "$tmp" /var/run/dpdk/tdrh$$' EXIT
fail() { echo "FAIL: $*"; exit 1; }

out=$("$td" --rdma-listen 192.0.2.1:9170 --cores 2 --mem 16M --check-config -- --no-huge 2>&1) ||
	fail "--check-config verbs only: $out"
grep -q "rdma-listen 192.0.2.1:9170 (slots 128, max conns 256, gid index -1), verbs only" <<<"$out" ||
	fail "--check-config does not show the verbs settings: $out"
grep -q -- "--no-pci" <<<"$out" || fail "verbs only without --no-pci: $out"
echo "ok: --check-config, verbs only: $(grep rdma-listen <<<"$out")"

if [ -n "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
	echo "SKIP: this host has RDMA devices ($(ls /sys/class/infiniband | tr '\n' ' ')): the no-device error cannot be shown here"
	exit 77
fi
out=$(timeout 60 "$td" --rdma-listen 127.0.0.1:9170 --cores 2 --mem 16M --ctl-socket "$tmp/c.sock" \
	-- --no-huge --file-prefix tdrh$$ 2>&1); rc=$?
grep -q "EAL init failed" <<<"$out" && { echo "SKIP: EAL cannot start here: $out"; exit 77; }
[ $rc = 1 ] || fail "tallyd with no RDMA device exited $rc (want 1): $out"
grep -q "no RDMA device (ibv_get_device_list: .*): load the NIC's driver, or for Soft-RoCE \`modprobe rdma_rxe\`" <<<"$out" ||
	fail "no RDMA device: the error does not say so: $out"
echo "ok: no RDMA device: $(grep -o 'verbs: no RDMA device.*' <<<"$out")"
echo PASS
