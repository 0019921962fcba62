#!/usr/bin/env bash
# tests/verbs/verbs_vm.sh — meson test 'verbs_vm' (suite verbs): boots the cached QEMU guest
# (tests/vm/vm.sh) with Soft-RoCE and runs verbs_guest.sh there against this build's
# tally-udpd and tally-worker (copied in with --share; the guest is Debian 12 like this host,
# its packages are the binaries' runtime libraries from `ldd`). Exit 77 (skip) with the
# reason where VMs cannot run or the build has no verbs transport.
# usage: verbs_vm.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
vm=$here/../vm/vm.sh
build=${1:?usage: verbs_vm.sh BUILD_DIR}
packages="iproute2 kmod procps rdma-core ibverbs-utils ibverbs-providers perftest libbsd0 libfdt1
 libibverbs1 libipsec-mb1 libisal2 libjansson4 libmd0 libnl-route-3-200 libnuma1 librdmacm1 librte-eal23
 librte-ethdev23 librte-kvargs23 librte-mbuf23 librte-mempool23 librte-meter23 librte-net23
 librte-ring23 librte-telemetry23"
packages=$(echo $packages)

for b in appliance/udpd/tally-udpd perf/tally-worker perf/tally-perf; do
	[ -x "$build/$b" ] || { echo "SKIP: $build/$b not built"; exit 77; }
done
if ! ldd "$build/perf/tally-worker" | grep librdmacm >/dev/null; then
	echo "SKIP: this build has no verbs transport (libibverbs-dev, librdmacm-dev)"; exit 77
fi
"$vm" check || exit $?

work=$(mktemp -d "${TMPDIR:-/tmp}/tally-verbs-vm.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/share/bin" "$work/out"
# The programs as the test builds with fault injection (tests/xport_fault: the same objects
# relinked with the TALLY_VERBS_FAULT hook, which the production builds lack), under their
# usual names: the guest scripts set TALLY_VERBS_FAULT for some cases.
cp "$build/tests/xport_fault/tally-udpd-fault" "$work/share/bin/tally-udpd"
cp "$build/tests/xport_fault/tally-worker-fault" "$work/share/bin/tally-worker"
cp "$build/perf/tally-perf" "$work/share/bin/"
# tally-verbs-modes (the WRITE_WITH_IMM vs SEND-into-SRQ benchmark, case "modes")
[ -x "$build/perf/tally-verbs-modes" ] && cp "$build/perf/tally-verbs-modes" "$work/share/bin/"
# tallyd and its case (case "tallyd": rdma-listen on the DPDK appliance, verbs only)
[ -x "$build/tests/xport_fault/tallyd-fault" ] && cp "$build/tests/xport_fault/tallyd-fault" "$work/share/bin/tallyd"
[ -x "$build/tests/verbs/verbs_badcore" ] && cp "$build/tests/verbs/verbs_badcore" "$work/share/bin/"
cp "$here/tallyd_guest.sh" "$work/share/"
# case "tallyd-mixed": the af_packet PMD (and the libraries it needs that tallyd does not)
pmds=$(ls -d "$(pkg-config --variable=libdir libdpdk 2>/dev/null)"/dpdk/pmds-* 2>/dev/null | head -n 1)
if [ -n "$pmds" ] && [ -e "$pmds/librte_net_af_packet.so.23" ]; then
	mkdir -p "$work/share/pmds"
	cp -L "$pmds/librte_net_af_packet.so.23" "$pmds/librte_bus_vdev.so.23" \
		"$pmds/librte_mempool_ring.so.23" "$work/share/pmds/"
	for l in $(ldd "$pmds/librte_net_af_packet.so.23" | awk '/librte_(bus_pci|pci)\.so/ {print $3}'); do
		cp -L "$l" "$work/share/pmds/"
	done
else
	echo "note: case tallyd-mixed is skipped: no af_packet PMD (librte-net-af-packet23) on this host"
fi
# tallyctl (case "auth": job-add --key-file on tally-udpd's control socket)
[ -x "$build/control/tallyctl" ] && cp "$build/control/tallyctl" "$work/share/bin/"
[ -n "${VERBS_MODES_ARGS:-}" ] && echo "$VERBS_MODES_ARGS" >"$work/share/modes_args"
[ -n "${VERBS_CASES:-}" ] && echo "$VERBS_CASES" >"$work/share/cases"
[ -n "${VERBS_BENCH_BUSY:-}" ] && echo "$VERBS_BENCH_BUSY" >"$work/share/bench_busy"
[ -n "${VERBS_BENCH_PLACE:-}" ] && echo "$VERBS_BENCH_PLACE" >"$work/share/bench_place"
[ -n "${VERBS_RESTART_REPS:-}" ] && echo "$VERBS_RESTART_REPS" >"$work/share/restart_reps"
# The agent over verbs: libtally_agent.so and agent_verbs from this build, or from
# $VERBS_AGENT_BUILD (e.g. a -Dcuda=disabled build): the guest has no CUDA runtime.
abuild=${VERBS_AGENT_BUILD:-$build}
if [ -x "$abuild/tests/verbs/agent_verbs" ] &&
	! ldd "$abuild/gpu_agent/libtally_agent.so" | grep -E 'libcudart|libnccl' >/dev/null; then
	cp "$abuild/tests/verbs/agent_verbs" "$abuild/gpu_agent/libtally_agent.so" "$work/share/bin/"
else
	echo "note: the agent-over-verbs case is skipped: $abuild/gpu_agent/libtally_agent.so needs the CUDA runtime, which the guest lacks (VERBS_AGENT_BUILD=a -Dcuda=disabled build runs it)"
fi
# meson test exports no MESON_BUILD_ROOT: the build dir given is the default, so parallel
# builds (helpers, CI jobs) never share /tmp/verbs_vm-console.log (a shared one was truncated
# under a running QEMU here, leaving a hole of NULs in the console)
logdir=${TALLY_VM_LOGDIR:-${MESON_BUILD_ROOT:-$build}}
if [ -n "$logdir" ] && [ -d "$logdir/meson-logs" ]; then logdir=$logdir/meson-logs; fi
[ -n "$logdir" ] && [ -d "$logdir" ] || logdir=/tmp
log=$logdir/verbs_vm-console.log

# The guest script's limit: 1080 s (it took 1061 s on a loaded 2-core host), times
# TALLY_TIMEOUT_MULTIPLIER (tests/run.sh passes it to meson's --timeout-multiplier too, which
# scales this test's 1200 s the same way).
mult=${TALLY_TIMEOUT_MULTIPLIER:-1}
[[ $mult =~ ^[1-9][0-9]*$ ]] || mult=1
guest_timeout=${VERBS_VM_TIMEOUT:-$((1080 * mult))}
echo "$guest_timeout" >"$work/share/timeout" # the guest's benches fit what is left of it
t0=$SECONDS
"$vm" build --packages "$packages" >/dev/null
echo "guest ready in $((SECONDS - t0)) s"
rc=0
"$vm" run --script "$here/verbs_guest.sh" --packages "$packages" --share "$work/share" \
	--out "$work/out" --nics 1 --timeout "$guest_timeout" --log "$log" || rc=$?
echo "--- guest console (script part) ---"
tr -d '\r\0' <"$log" | sed -n '/@@TALLY-VM READY/,/@@TALLY-VM RC=/p' | grep -av '^@@TALLY-VM OUT'
echo "vm run: exit $rc in $((SECONDS - t0)) s; console log: $log"
rm -rf "$logdir/verbs_vm-out"; cp -r "$work/out" "$logdir/verbs_vm-out" 2>/dev/null &&
	echo "guest files (stats, worker logs): $logdir/verbs_vm-out"
[ "$rc" -eq 0 ] || { echo "FAIL: the guest script exited $rc"; exit 1; }
echo "PASS"
