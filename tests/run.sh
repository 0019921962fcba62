#!/usr/bin/env bash
# tests/run.sh — install what Tally needs (Debian 12), build, run every test suite, and end
# with one line "N passed, N failed". Exit status is non-zero on any failure.
#   tests/run.sh                 whole suite
#   tests/run.sh --setup-only    install packages and build, run nothing
#   tests/run.sh --suite NAME    one meson suite (sum_avx, dataplane, e2e, control, agent, ...)
#   --packages main              install only the main job's packages (deploy/quickstart.sh)
#   --targets "T1 T2"            build only these ninja targets (with --setup-only)
#   TALLY_BUILD=dir              build directory (default: build)
#   TALLY_MESON_OPTS="..."       extra meson options (e.g. -Db_sanitize=address,undefined)
#   TALLY_TIMEOUT_MULTIPLIER=N   meson test --timeout-multiplier N (a loaded machine); the VM
#                                tests scale their guests' own limits by it too
#   --sanitize | TALLY_SANITIZE=1|0  then build an ASan/UBSan tree (TALLY_ASAN_BUILD, default
#                                BUILD-asan) and run suites control, security and dataplane in
#                                it (TALLY_SANITIZE_SUITES); on by default for the whole suite (CI)
set -euo pipefail
cd "$(dirname "$0")/.."

setup_only=0
sanitize=${TALLY_SANITIZE:-}
pkgset=all
targets=()
suite_args=()
while [ $# -gt 0 ]; do
	case "$1" in
	--setup-only) setup_only=1 ;;
	--suite) suite_args+=(--suite "$2"); shift ;;
	--packages) pkgset=$2; shift
		[[ $pkgset == main || $pkgset == all ]] || { echo "tests/run.sh: --packages main|all" >&2; exit 2; } ;;
	--targets) read -r -a targets <<<"$2"; shift ;;
	--sanitize) sanitize=1 ;;
	-h|--help) sed -n '2,16p' "$0"; exit 0 ;;
	*) echo "tests/run.sh: unknown argument '$1'" >&2; exit 2 ;;
	esac
	shift
done

# Debian packages. "main": what building the tree and the main job (deploy/quickstart.sh,
# gpu_agent/examples/train.py: tallyd on net_af_packet in a namespace, or tally-udpd; PyTorch
# DDP on scikit-learn's digits) need: the build (cmocka: -Dtests is on by default), DPDK,
# the dataplane's libraries, iproute2, torch, scikit-learn, numpy.
pkgs=(meson ninja-build pkg-config gcc libcmocka-dev
      libdpdk-dev dpdk libisal-dev libnuma-dev libjansson-dev libssl-dev libipsec-mb-dev iproute2
      python3 python3-numpy python3-torch python3-sklearn)
if [ "$pkgset" = all ]; then
	# what the tests drive besides: clang (fuzz targets), the verbs transport (built when
	# found), namespaces' nftables, Open MPI (perf), prometheus (promtool and the server for
	# suite prometheus), matplotlib (perf plots)
	pkgs+=(clang libclang-rt-14-dev python3-matplotlib libibverbs-dev librdmacm-dev nftables
	       openmpi-bin libopenmpi-dev prometheus)
	# suite mpi (libtally_mpi, issue 35): MPICH beside Open MPI, Debian's mpi4py
	pkgs+=(mpich libmpich-dev python3-mpi4py)
	# suite vm-deploy: QEMU, the package build, mkosi and the raw disk tools (deploy/make-disk.sh)
	pkgs+=(qemu-system-x86 qemu-utils openssh-client dpkg-dev debhelper dh-python mkosi
	       e2fsprogs dosfstools mtools syslinux syslinux-common fdisk)
	# suite slurm: a private Slurm (munged, slurmctld, slurmd, sbatch/squeue/scancel)
	pkgs+=(munge slurmctld slurmd slurm-client)
	# suite deploy, container: podman, and debootstrap for the image's base root
	pkgs+=(podman debootstrap)
fi
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
if [ -f "$build/build.ninja" ] && [ ${#missing[@]} -gt 0 ]; then
	# new packages (a quick start's build, then the whole suite): find the optional
	# dependencies again (-Dverbs=auto and the like)
	# shellcheck disable=SC2086
	meson setup --reconfigure "$build" ${TALLY_MESON_OPTS:-} >/dev/null
elif [ -f "$build/build.ninja" ]; then
	# shellcheck disable=SC2086
	meson configure "$build" ${TALLY_MESON_OPTS:-} >/dev/null
else
	# shellcheck disable=SC2086
	meson setup "$build" ${TALLY_MESON_OPTS:-} >/dev/null
fi
ninja -C "$build" "${targets[@]}"
[ "$setup_only" = 1 ] && exit 0

mult=${TALLY_TIMEOUT_MULTIPLIER:-1}
[[ $mult =~ ^[1-9][0-9]*$ ]] || { echo "tests/run.sh: TALLY_TIMEOUT_MULTIPLIER must be a whole number >= 1" >&2; exit 2; }
export TALLY_TIMEOUT_MULTIPLIER=$mult
echo "tests/run.sh: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg), timeout multiplier $mult"
t0=$SECONDS
set +e
meson test -C "$build" --no-rebuild --print-errorlogs --num-processes "$(nproc)" \
	--timeout-multiplier "$mult" "${suite_args[@]}"
set -e
echo "tests/run.sh: meson test took $((SECONDS - t0)) s (wall)"

# The sanitizer pass (issue 33: a use-after-free in the control server crashed tallyd; ASan
# reports such a bug at once, a plain build only sometimes crashes). Its own tree, so the
# main build's binaries and timings stay as they are; counted in the same summary below.
[ -z "$sanitize" ] && { [ ${#suite_args[@]} -eq 0 ] && sanitize=1 || sanitize=0; }
san_log=
if [ "$sanitize" = 1 ]; then
	t1=$SECONDS
	sb=${TALLY_ASAN_BUILD:-$build-asan}
	# debugoptimized: -O0 makes the dataplane tests too slow; werror off: GCC's
	# -Wformat-truncation misfires on sanitizer-instrumented code; no CUDA (nvcc and ASan)
	san_opts="-Dbuildtype=debugoptimized -Db_sanitize=address,undefined -Db_lundef=false -Dwerror=false -Dcuda=disabled"
	# shellcheck disable=SC2086
	if [ -f "$sb/build.ninja" ]; then meson configure "$sb" $san_opts >/dev/null
	else meson setup "$sb" $san_opts >/dev/null; fi
	ninja -C "$sb"
	echo "tests/run.sh: sanitizer tree built in $((SECONDS - t1)) s"
	read -r -a san_suites <<<"${TALLY_SANITIZE_SUITES:-control security dataplane}"
	san_args=()
	for su in "${san_suites[@]}"; do san_args+=(--suite "$su"); done
	set +e
	# leaks are reported too (meson sets halt_on_error/abort_on_error for ASan and UBSan)
	ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=1} \
	UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:print_stacktrace=1} \
	meson test -C "$sb" --no-rebuild --print-errorlogs --num-processes "$(nproc)" \
		--timeout-multiplier "$((mult * 2))" "${san_args[@]}"
	set -e
	san_log=$sb/meson-logs/testlog.json
	echo "tests/run.sh: sanitizer pass (${san_suites[*]}) took $((SECONDS - t1)) s (wall, build included)"
fi

# Count from meson's own log: every test program is one result.
python3 - "$build/meson-logs/testlog.json" $san_log <<'PY'
import json, re, sys
counts = {"OK": 0, "FAIL": 0, "SKIP": 0}
failed = []  # named again just above the last line, where a CI log's tail shows them
suites = {}  # suite: [tests, seconds (the tests' durations summed), longest (s, name)]
lines = []
for i, log in enumerate(sys.argv[1:]):
    with open(log) as f:
        # the sanitizer pass's results count as suites "asan-<suite>"
        lines += [(i, line) for line in f]
for san, line in lines:
        r = json.loads(line)
        res = r.get("result", "FAIL")
        d = float(r.get("duration") or 0)
        # "tally:verbs+security / verbs_auth": project:suite+suite / test
        head, _, name = r.get("name", "?").rpartition(" / ")
        if san:
            head = "+".join("asan-" + su for su in head.split(":", 1)[-1].split("+"))
        for su in (head.split(":", 1)[-1] or "-").split("+"):
            e = suites.setdefault(su, [0, 0.0, (0.0, "")])
            e[0] += 1
            e[1] += d
            e[2] = max(e[2], (d, name))
        if res in ("OK", "EXPECTEDFAIL"):
            counts["OK"] += 1
        elif res == "SKIP":
            counts["SKIP"] += 1
        else:
            counts["FAIL"] += 1
            # the test's own failure lines (at most 6), so a CI tail says why, not just which
            out = (r.get("stdout") or "") + (r.get("stderr") or "")
            why = [l.strip()[:300] for l in out.splitlines()
                   if re.search(r"^(FAIL|not ok|\[  FAILED|ERROR)|error:|Assertion", l.strip())]
            failed.append((f"{head} / {name}: {res}", why[:6] or [l.strip()[:300] for l in out.splitlines()[-3:]]))
# Per suite: its tests' durations summed (a test in two suites counts in both; tests of a
# suite may have run in parallel), the longest one, so CI logs show where the time went.
for su, (n, sec, (ld, ln)) in sorted(suites.items(), key=lambda kv: -kv[1][1]):
    print(f"suite {su:<12} {n:3d} tests {sec:8.1f} s  (longest: {ln} {ld:.1f} s)")
for f, why in failed:
    print(f"FAILED {f}")
    for w in why:
        print(f"    {w}")
print(f"{counts['OK']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped")
sys.exit(1 if counts["FAIL"] else 0)
PY
