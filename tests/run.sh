#!/usr/bin/env bash
# tests/run.sh — install what Tally needs (Debian 12), build, run every test suite, and end
# with one line "N passed, N failed". Exit status is non-zero on any failure.
#   tests/run.sh                 whole suite
#   tests/run.sh --setup-only    install packages and build, run nothing
#   tests/run.sh --suite NAME    one meson suite (sum_avx, dataplane, e2e, control, agent, ...)
#   TALLY_BUILD=dir              build directory (default: build)
#   TALLY_MESON_OPTS="..."       extra meson options (e.g. -Db_sanitize=address,undefined)
set -euo pipefail
cd "$(dirname "$0")/.."

setup_only=0
suite_args=()
while [ $# -gt 0 ]; do
	case "$1" in
	--setup-only) setup_only=1 ;;
	--suite) suite_args+=(--suite "$2"); shift ;;
	-h|--help) sed -n '2,8p' "$0"; exit 0 ;;
	*) echo "tests/run.sh: unknown argument '$1'" >&2; exit 2 ;;
	esac
	shift
done

# Debian packages: build, real dependencies, and what the tests drive (namespaces, nftables,
# prometheus: promtool and the server for suite prometheus).
pkgs=(meson ninja-build pkg-config gcc clang libclang-rt-14-dev python3 python3-numpy python3-torch python3-sklearn python3-matplotlib
      libdpdk-dev dpdk libisal-dev libibverbs-dev librdmacm-dev libnuma-dev
      libcmocka-dev libjansson-dev libssl-dev libipsec-mb-dev iproute2 nftables openmpi-bin libopenmpi-dev prometheus)
# suite vm-deploy: QEMU, the package build, mkosi and the raw disk tools (deploy/make-disk.sh)
pkgs+=(qemu-system-x86 qemu-utils openssh-client dpkg-dev debhelper dh-python mkosi
       e2fsprogs dosfstools mtools syslinux syslinux-common fdisk)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "tests/run.sh: missing packages: ${missing[*]} (run as root to install them)" >&2
		exit 1
	fi
	echo "tests/run.sh: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null >/dev/null
fi

# nvcc is optional (-Dcuda=auto); it lives outside PATH on these machines.
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"

build=${TALLY_BUILD:-build}
if [ -f "$build/build.ninja" ]; then
	# shellcheck disable=SC2086
	meson configure "$build" ${TALLY_MESON_OPTS:-} >/dev/null
else
	# shellcheck disable=SC2086
	meson setup "$build" ${TALLY_MESON_OPTS:-} >/dev/null
fi
ninja -C "$build"
[ "$setup_only" = 1 ] && exit 0

set +e
meson test -C "$build" --no-rebuild --print-errorlogs --num-processes "$(nproc)" "${suite_args[@]}"
set -e

# Count from meson's own log: every test program is one result.
python3 - "$build/meson-logs/testlog.json" <<'PY'
import json, sys
counts = {"OK": 0, "FAIL": 0, "SKIP": 0}
with open(sys.argv[1]) as f:
    for line in f:
        r = json.loads(line)
        res = r.get("result", "FAIL")
        if res in ("OK", "EXPECTEDFAIL"):
            counts["OK"] += 1
        elif res == "SKIP":
            counts["SKIP"] += 1
        else:
            counts["FAIL"] += 1
print(f"{counts['OK']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped")
sys.exit(1 if counts["FAIL"] else 0)
PY
