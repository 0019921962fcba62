#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# torch2.sh — the Python package `tally` under torch 2.x. Debian 12 ships torch 1.13 only, so
# this builds (once; later runs reuse it) a Debian trixie chroot with python3-torch 2.x, numpy,
# scikit-learn and a C toolchain, builds libtally_agent and the software appliance inside it
# (its glibc and compiler, from this source tree mounted read-only), and runs there:
#   test_abi.py         the ctypes structures match the library built here
#   test_opt_torch.py   optimizer twins vs torch.optim
#   test_torch_api.py   broadcast_parameters, DistributedOptimizer, error messages
#   test_train.py       4 workers through Tally vs DDP over gloo (+ loss/slow rank, local agg)
#   test_ddp_rebuild.py DDP's bucket rebuild with a slow rank, many times, vs gloo
#   test_onebit_*.py    1-bit Adam/LAMB: NumPy reference, the appliance, convergence + bytes
#   test_identity.py    the default job identity (torch's store, torchrun's run id, relaunch)
#   test_avg16.py       f16/bf16 averages by the appliance; test_user_errors.py error texts
#   examples/train.py   the quick-start job (software appliance over kernel UDP)
#   tests/plan/*        tally.plan: planner, pipeline runtime (sync, 1F1B, a killed replica,
#                       1F1B's GC freeze),
#                       examples/pipeline.py (suite plan)
# Mounts are made in a private mount namespace (unshare -m): nothing is left mounted.
#
#   tests/agent/torch2.sh            build the chroot if needed, then run everything
#   tests/agent/torch2.sh --run CMD  run CMD in the chroot (source at /tally/src, build /tally/build)
#   meson test -C build agent_torch2 runs it only with TALLY_TEST_TORCH2=1 (exit 77 otherwise)
#   TALLY_TORCH2_CACHE=DIR           where the chroot lives (default /var/cache/tally-torch2)
#   TALLY_TORCH2_SUITE / _MIRROR     Debian suite (trixie) and mirror (http://deb.debian.org/debian)
# Exit 0 all passed, 1 a test failed, 77 skipped (not root, no debootstrap, the chroot cannot
# be built: offline / mirror unreachable), with the reason on stdout.
set -u

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CACHE=${TALLY_TORCH2_CACHE:-/var/cache/tally-torch2}
SUITE=${TALLY_TORCH2_SUITE:-trixie}
MIRROR=${TALLY_TORCH2_MIRROR:-http://deb.debian.org/debian}
CH=$CACHE/root
PKGS=python3-torch,python3-numpy,python3-sklearn,gcc,libc6-dev,meson,ninja-build,pkg-config,libisal-dev,libjansson-dev,libcmocka-dev,libssl-dev
# one build directory per source tree (several worktrees may share the chroot)
BTAG=$(printf '%s' "$ROOT" | md5sum | cut -c1-12)
BUILD=$CACHE/build-$BTAG

skip() { echo "SKIP: torch 2.x tests: $*"; exit 77; }

# meson runs this as an optional test: only with TALLY_TEST_TORCH2=1 (the first run downloads
# about 600 MB of Debian packages and takes minutes).
if [ "${1:-}" = "--if-enabled" ]; then
	shift
	[ "${TALLY_TEST_TORCH2:-0}" = 1 ] ||
		skip "optional, set TALLY_TEST_TORCH2=1 to build a Debian $SUITE chroot with torch 2.x and run them"
fi

[ "$(id -u)" = 0 ] || skip "need root for debootstrap and chroot"
DEBOOTSTRAP=$(command -v debootstrap || echo /usr/sbin/debootstrap)
command -v unshare >/dev/null || skip "unshare (util-linux) missing"
mkdir -p "$CACHE" || skip "cannot create $CACHE"

# One run at a time per cache (the chroot build and the shared build directory).
exec 9>"$CACHE/lock"
flock -w 1800 9 || skip "another torch2.sh holds $CACHE/lock for over 30 min"

if [ ! -f "$CH/.tally-ready" ]; then
	[ -x "$DEBOOTSTRAP" ] || skip "debootstrap not installed (apt-get install debootstrap)"
	echo "torch2: building a Debian $SUITE chroot in $CH from $MIRROR (once; several minutes)"
	if ! timeout 60 "$DEBOOTSTRAP" --version >/dev/null 2>&1; then
		skip "debootstrap does not run"
	fi
	rm -rf "$CH"
	if ! timeout 1500 "$DEBOOTSTRAP" --variant=minbase --include="$PKGS" "$SUITE" "$CH" "$MIRROR" \
		>"$CACHE/debootstrap.log" 2>&1; then
		tail -5 "$CACHE/debootstrap.log"
		rm -rf "$CH"
		skip "cannot build the $SUITE chroot from $MIRROR (offline? see $CACHE/debootstrap.log)"
	fi
	echo "$PKGS" >"$CH/.tally-ready"
fi

# A chroot built from an older package list (the project gained a dependency since, e.g.
# OpenSSL's libssl-dev): install what the list adds, from the same mirror, then record it.
if [ "$(cat "$CH/.tally-ready")" != "$PKGS" ]; then
	echo "torch2: adding packages to the chroot: $PKGS"
	if ! timeout 900 unshare -m sh -c '
		mount --make-rprivate /
		mount -t proc proc "$1/proc"
		chroot "$1" sh -c "apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $2"
	' torch2 "$CH" "$(echo "$PKGS" | tr , ' ')" >"$CACHE/apt.log" 2>&1; then
		tail -5 "$CACHE/apt.log"
		skip "cannot install $PKGS in the chroot from $MIRROR (offline? see $CACHE/apt.log)"
	fi
	echo "$PKGS" >"$CH/.tally-ready"
fi

mkdir -p "$BUILD" "$CH/tally/src" "$CH/tally/build"

# Everything below runs inside the chroot, in a private mount namespace.
ENV='cd /tally/src
export LC_ALL=C.UTF-8 HOME=/tmp
export TALLY_AGENT_LIB=/tally/build/gpu_agent/libtally_agent.so
export PYTHONPATH=/tally/src/gpu_agent/python
export TALLY_TEST_UDPD=/tally/build/appliance/udpd/tally-udpd
export TALLY_TEST_RELAY=/tally/build/tests/agent/agent_relay
export TALLY_TRAIN_APPLIANCE=udp   # no DPDK (tallyd) in the chroot
# examples/train.py looks in $TALLY_BUILD before the source tree'"'"'s build*/ folders: those
# are the host'"'"'s, linked against libraries the chroot lacks (libIPSec_MB)
export TALLY_BUILD=/tally/build
'
INNER=$ENV'
set -u
python3 -c "import torch, numpy, sklearn; print(\"torch2: torch\", torch.__version__, \"numpy\", numpy.__version__, \"sklearn\", sklearn.__version__, \"python\", __import__(\"sys\").version.split()[0], \"glibc\", __import__(\"os\").confstr(\"CS_GNU_LIBC_VERSION\"))" || exit 1
if [ ! -f /tally/build/build.ninja ]; then
	meson setup /tally/build /tally/src -Ddpdk=disabled -Dcuda=disabled -Dverbs=disabled \
		-Dnuma=disabled -Dfuzz=disabled >/tmp/torch2-meson.log 2>&1 ||
		{ tail -30 /tmp/torch2-meson.log; echo "torch2: meson setup failed in the chroot"; exit 1; }
fi
ninja -C /tally/build gpu_agent/libtally_agent.so appliance/udpd/tally-udpd tests/agent/agent_relay \
	>/tmp/torch2-ninja.log 2>&1 || { tail -40 /tmp/torch2-ninja.log; echo "torch2: build failed in the chroot"; exit 1; }
fail=0
for t in tests/agent/test_abi.py tests/agent/test_opt_torch.py tests/agent/test_torch_api.py tests/agent/test_train.py \
	tests/agent/test_ddp_rebuild.py tests/agent/test_onebit_sim.py tests/agent/test_onebit_appliance.py \
	tests/agent/test_onebit_train.py tests/agent/test_torch_user.py tests/agent/test_horovod_port.py \
	tests/agent/test_identity.py tests/agent/test_avg16.py tests/agent/test_user_errors.py \
	tests/plan/test_planner.py tests/plan/test_runtime.py tests/plan/test_runtime_gc.py; do
	echo "== torch2: $t"
	timeout 900 python3 "$t"
	rc=$?
	echo "== torch2: $t exit $rc"
	[ "$rc" = 0 ] || fail=1
done
echo "== torch2: gpu_agent/examples/train.py --epochs 3"
timeout 600 python3 gpu_agent/examples/train.py --epochs 3 --udpd "$TALLY_TEST_UDPD" >/tmp/torch2-ex.log 2>&1
rc=$?
grep -E "^(appliance|gradients|epoch|agent counters)|Error" /tmp/torch2-ex.log
[ "$rc" = 0 ] || { tail -30 /tmp/torch2-ex.log; fail=1; }
echo "== torch2: gpu_agent/examples/train.py exit $rc"
echo "== torch2: tests/plan/test_example.sh (gpu_agent/examples/pipeline.py)"
timeout 700 sh tests/plan/test_example.sh gpu_agent/examples/pipeline.py
rc=$?
echo "== torch2: tests/plan/test_example.sh exit $rc"
[ "$rc" = 0 ] || fail=1
exit $fail
'

# --run CMD...: run a command in the chroot instead of the tests (debugging).
if [ "${1:-}" = "--run" ]; then
	shift
	INNER="$ENV$*"
fi

# A private mount and PID namespace: the mounts go away and every process started inside is
# killed when the script ends, even after a timeout.
unshare -m -p -f sh -c '
set -e
mount --make-rprivate /
mount -t proc proc "$1/proc"
mount --rbind /dev "$1/dev"
mount -t tmpfs tmpfs "$1/dev/shm"
mount -t sysfs sysfs "$1/sys" 2>/dev/null || true
mount --bind /etc/hosts "$1/etc/hosts"   # torchrun and gloo resolve this host name
mount --bind "$2" "$1/tally/src"
mount -o remount,bind,ro "$1/tally/src"
mount --bind "$3" "$1/tally/build"
exec chroot "$1" /bin/sh -c "$4"
' torch2 "$CH" "$ROOT" "$BUILD" "$INNER"
rc=$?
[ "$rc" = 0 ] && echo "torch2: all passed under torch 2.x" || echo "torch2: FAILED (exit $rc)"
exit $([ "$rc" = 0 ] && echo 0 || echo 1)
