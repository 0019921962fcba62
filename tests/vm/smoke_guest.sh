#!/bin/bash
# Runs inside the guest (vm.sh run --script): the harness's smoke checks. Exit 0 = all passed.
set -uo pipefail
fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }

# 1. Debian's 6.1 kernel
kver=$(uname -r)
if [[ $kver == 6.1.* ]] && grep -q Debian /proc/version; then ok "kernel $kver (Debian)"; else bad "kernel $kver: $(cat /proc/version)"; fi

# 2. Soft-RoCE on a virtio NIC
modprobe virtio_net 2>/dev/null || true
if modprobe crc32_generic && modprobe rdma_rxe; then ok "modprobe crc32_generic rdma_rxe"; else bad "modprobe crc32_generic rdma_rxe"; fi
# 192.0.2.0/24 (TEST-NET-1) on a NIC whose hub has no uplink: nothing leaves the guest
if ! { ip link set eth0 up && ip addr add 192.0.2.10/24 dev eth0; }; then bad "eth0 up + address"; fi
if rdma link add rxe0 type rxe netdev eth0; then ok "rdma link add rxe0 type rxe netdev eth0"; else bad "rdma link add rxe0"; fi
state=
for _ in $(seq 1 20); do
	state=$(rdma link show rxe0/1 2>/dev/null | awk '{ for (i = 1; i < NF; i++) if ($i == "state") { print $(i + 1); exit } }')
	[ "$state" = ACTIVE ] && break
	sleep 0.5
done
rdma link show
if [ "$state" = ACTIVE ]; then ok "rxe0 port 1 ACTIVE"; else bad "rxe0 port 1 state '$state'"; fi
if command -v ibv_devinfo >/dev/null && ibv_devinfo -d rxe0 | grep -q 'PORT_ACTIVE'; then ok "ibv_devinfo: rxe0 PORT_ACTIVE"; else bad "ibv_devinfo -d rxe0"; fi

# 3. the shared folder is there, read-only
if [ -r /share/token ]; then ok "/share/token readable: $(cat /share/token)"; else bad "/share/token not readable"; fi
if ( : >/share/x ) 2>/dev/null; then bad "/share is writable"; else ok "/share is read-only"; fi

# 4. a result for the host
{ echo "token=$(cat /share/token 2>/dev/null)"; echo "kernel=$kver"; echo "rxe0=$state"; } >/out/result.txt
ibv_devinfo -v -d rxe0 >/out/ibv_devinfo.txt 2>&1 || true
echo "guest checks: $fails failed"
exit $((fails > 0))
