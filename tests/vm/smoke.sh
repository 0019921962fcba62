#!/usr/bin/env bash
# tests/vm/smoke.sh — meson test 'vm_smoke' (suite vm): build the cached guest with the Soft-RoCE
# packages, boot it under QEMU and run smoke_guest.sh there (Debian 6.1 kernel, rdma_rxe port
# ACTIVE on a virtio NIC, /share readable and read-only, /out comes back). Exit 77 (skip) with
# the reason where VMs cannot run (vm.sh check). Keeps the console log in $TALLY_VM_LOGDIR
# (default: the meson build dir's meson-logs, else /tmp).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
vm=$here/vm.sh
packages="iproute2 kmod rdma-core ibverbs-utils ibverbs-providers"

"$vm" check || exit $? # 77 with the reasons when VMs cannot run here

work=$(mktemp -d "${TMPDIR:-/tmp}/tally-vm-smoke.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/share" "$work/out"
token="tally-vm-$$-$RANDOM$RANDOM"
echo "$token" >"$work/share/token"
logdir=${TALLY_VM_LOGDIR:-${MESON_BUILD_ROOT:-}}
if [ -n "$logdir" ] && [ -d "$logdir/meson-logs" ]; then logdir=$logdir/meson-logs; fi
[ -n "$logdir" ] && [ -d "$logdir" ] || logdir=/tmp
log=$logdir/vm_smoke-console.log

t0=$SECONDS
"$vm" build --packages "$packages" >/dev/null
echo "guest ready in $((SECONDS - t0)) s"
t1=$SECONDS
rc=0
"$vm" run --script "$here/smoke_guest.sh" --packages "$packages" --share "$work/share" \
	--out "$work/out" --nics 1 --timeout 420 --log "$log" || rc=$?
echo "--- guest console (script part) ---"
tr -d '\r' <"$log" | sed -n '/@@TALLY-VM READY/,/@@TALLY-VM RC=/p'
echo "vm run: exit $rc in $((SECONDS - t1)) s (total $((SECONDS - t0)) s); console log: $log"
[ "$rc" -eq 0 ] || { echo "FAIL: the guest script exited $rc"; exit 1; }
got=$(sed -n 's/^token=//p' "$work/out/result.txt" 2>/dev/null || true)
[ "$got" = "$token" ] || { echo "FAIL: /out/result.txt did not come back with the token (got '$got')"; exit 1; }
echo "ok   /out/result.txt came back to the host with the token"
echo "PASS"
