#!/usr/bin/env bash
# test-image.sh BUILDDIR — the deploy suite's image test (meson test 'image'), also runnable
# by hand as root:
#   1. build the .debs (deploy/build-debs.sh) and check what each package holds;
#   2. build the appliance image as a directory with mkosi (deploy/build-image.sh, the
#      recipe in deploy/mkosi; installed if missing), or with debootstrap and the same package
#      list (TALLY_IMAGE_TOOL=debootstrap, or when mkosi cannot be had) plus
#      deploy/install-debs.sh; the tree before the .debs is cached under
#      /var/cache/tally-deploy (TALLY_DEPLOY_CACHE), so repeated runs skip the download;
#   3. check inside (chroot, systemctl --root): packages installed, tallyd.service enabled and
#      verified, group tally, the shipped config valid (tallyd --check-config); then tallyd
#      starts in the chroot on a virtual device (net_tap in a private network namespace,
#      --no-huge), reports READY=1 on $NOTIFY_SOCKET, answers `tallyctl status`, and drains
#      and exits 0 on SIGTERM.
# Exit 77 (skip) with the reason when it cannot run here: not root, tallyd not built, build
# tools missing and no Debian mirror to install them from, no mirror and no cached base.
# TALLY_IMAGE_TOOL=mkosi|debootstrap forces the image builder; TALLY_DEPLOY_KEEP=1 keeps
# the work tree (BUILDDIR/deploy-image); TALLY_DEPLOY_DEBS=DIR tests .debs built before.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
step() { printf '\n== %s (%d s)\n' "$*" "$SECONDS"; }

[ "$(id -u)" -eq 0 ] || skip "needs root (chroot, mounts, network namespace)"
ls "$build"/appliance/tallyd >/dev/null 2>&1 || skip "tallyd is not built in $build (appliance/ needs DPDK)"
mirror=http://deb.debian.org/debian
have_mirror() { timeout 8 bash -c "exec 3<>/dev/tcp/deb.debian.org/80" 2>/dev/null; }

# ---- tools -------------------------------------------------------------------------------
need=()
command -v dpkg-buildpackage >/dev/null || need+=(dpkg-dev)
command -v dh >/dev/null || need+=(debhelper)
command -v dh_python3 >/dev/null || need+=(dh-python)
command -v debootstrap >/dev/null || need+=(debootstrap)
[ "${TALLY_IMAGE_TOOL:-auto}" = debootstrap ] || command -v mkosi >/dev/null || need+=(mkosi)
if [ ${#need[@]} -gt 0 ]; then
	have_mirror || skip "missing ${need[*]} and no network to the Debian mirror to install them"
	echo "installing ${need[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" </dev/null >/dev/null ||
		skip "could not install ${need[*]} (apt-get install failed)"
fi

work=$build/deploy-image
root=$work/root
cache=${TALLY_DEPLOY_CACHE:-/var/cache/tally-deploy}
mkdir -p "$work" "$cache"
cleanup() {
	ip link del deploytap0 2>/dev/null || true
	if [ "${TALLY_DEPLOY_KEEP:-0}" != 1 ]; then rm -rf "$root" "$work/debs/src"; fi
}
trap cleanup EXIT

# ---- 1. packages -------------------------------------------------------------------------
if [ -n "${TALLY_DEPLOY_DEBS:-}" ]; then
	debs=$(cd "$TALLY_DEPLOY_DEBS" && pwd)
	step "using the Debian packages in $debs (TALLY_DEPLOY_DEBS)"
else
	step "building the Debian packages"
	t0=$SECONDS
	"$top/deploy/build-debs.sh" --cache "$cache/debs" "$work/debs"
	echo "packages ready in $((SECONDS - t0)) s"
	debs=$work/debs
fi
contains() { # contains PACKAGE PATH-REGEX...
	local pkg=$1 deb list re
	shift
	deb=$(ls "$debs/${pkg}"_*.deb 2>/dev/null | head -1)
	[ -n "$deb" ] || fail "no ${pkg}_*.deb built"
	list=$(dpkg-deb -c "$deb" | awk '{ print $6 }')
	for re in "$@"; do
		grep -Eq "^\./$re\$" <<<"$list" || fail "$pkg does not contain $re"
	done
	echo "ok   $pkg holds $*"
}
contains tally-appliance 'usr/s?bin/tallyd' lib/systemd/system/tallyd.service etc/tally/tallyd.conf \
	usr/lib/sysctl.d/60-tally-hugepages.conf usr/sbin/tally-setup-node etc/default/tallyd
contains tally-tools usr/bin/tallyctl usr/bin/tally-perf usr/bin/tally-worker
contains python3-tally 'usr/lib/python3/dist-packages/tally/__init__.py' 'usr/lib/x86_64-linux-gnu/libtally_agent.so'
# the Python package loads its library from the package's files alone
x=$work/python3-tally.x
rm -rf "$x" && dpkg-deb -x "$debs"/python3-tally_*.deb "$x"
out=$(cd / && env PYTHONPATH="$x/usr/lib/python3/dist-packages" \
	TALLY_AGENT_LIB="$(ls "$x"/usr/lib/*/libtally_agent.so)" /usr/bin/python3 -c 'import tally, tally._lib; print(tally.__name__, tally._lib.lib._name)' 2>&1) ||
	fail "python3-tally: import tally failed: $out"
rm -rf "$x"
echo "ok   python3-tally: import tally ($out)"
# conffiles: an upgrade keeps the admin's config
dpkg-deb -I "$debs"/tally-appliance_*.deb conffiles | grep -qx /etc/tally/tallyd.conf ||
	fail "/etc/tally/tallyd.conf is not a conffile"
echo "ok   /etc/tally/tallyd.conf is a conffile"

# ---- 2. image ----------------------------------------------------------------------------
tool=${TALLY_IMAGE_TOOL:-auto}
if [ "$tool" = auto ]; then
	if command -v mkosi >/dev/null; then tool=mkosi; else tool=debootstrap; fi
fi
# One package list for both builders: mkosi.default's Packages= plus the .debs' dependencies.
pkgs=$(sed -n '/^Packages=/,/^[^[:space:]]/{/^[[:space:]]/p}' "$top/deploy/mkosi/mkosi.default" | tr -d ' \t' | paste -sd, -)
deps=$("$top/deploy/deb-deps.sh" "$debs"/tally-appliance_*.deb "$debs"/tally-tools_*.deb)
rm -rf "$root"
t0=$SECONDS
if [ "$tool" = mkosi ]; then
	step "building the image with mkosi (directory)"
	# --incremental keeps the tree after package installation in $out, so a second run only
	# adds the .debs; a changed package list or recipe rebuilds that cache (-ff).
	out=$cache/mkosi-out
	mkdir -p "$out"
	key=$(cat "$top/deploy/mkosi/mkosi.default" - <<<"$deps" | sha256sum | cut -c1-16)
	extra=(--incremental)
	[ "$(cat "$out/.tally-key" 2>/dev/null)" = "$key" ] || extra+=(--force)
	if ! ls "$out"/debian~bookworm/*.cache-pre-* >/dev/null 2>&1; then
		have_mirror || skip "no network to the Debian mirror and no cached mkosi tree in $out"
	fi
	"$top/deploy/build-image.sh" --format directory --output "$out" --debs "$debs" -- "${extra[@]}" \
		>"$work/mkosi.log" 2>&1 || { tail -30 "$work/mkosi.log"; fail "mkosi failed (log: $work/mkosi.log)"; }
	echo "$key" >"$out/.tally-key"
	[ -d "$out/debian~bookworm/tally-appliance" ] || fail "mkosi left no image tree in $out/debian~bookworm"
	mv "$out/debian~bookworm/tally-appliance" "$root"
else
	step "building the image with debootstrap (mkosi.default's package list)"
	include="systemd,systemd-sysv,dbus,$pkgs,$deps"
	key=$(printf '%s\n' bookworm "$mirror" "$include" | sha256sum | cut -c1-16)
	base=$cache/base-bookworm-$key.tar
	if [ ! -f "$base" ]; then
		have_mirror || skip "no network to the Debian mirror and no cached base tree ($base)"
		mkdir -p "$cache/debs" "$work/base"
		rm -rf "$work/base"
		echo "debootstrap (minbase + $include); cached afterwards as $base"
		debootstrap --variant=minbase --include="$include" --cache-dir="$cache/debs" \
			bookworm "$work/base" "$mirror" >"$work/debootstrap.log" 2>&1 ||
			{ tail -20 "$work/debootstrap.log"; fail "debootstrap failed (log: $work/debootstrap.log)"; }
		rm -rf "$work/base/var/cache/apt/archives/"*.deb
		tar -C "$work/base" --numeric-owner -cpf "$base.tmp" . && mv "$base.tmp" "$base"
		rm -rf "$work/base"
		ls -1t "$cache"/base-bookworm-*.tar | tail -n +3 | xargs -r rm -f # keep the newest two
	else
		echo "base tree from cache: $base"
	fi
	mkdir -p "$root"
	tar -C "$root" --numeric-owner -xpf "$base"
	"$top/deploy/install-debs.sh" "$root" "$debs"
fi
echo "image tree built in $((SECONDS - t0)) s ($tool)"

# ---- 3. checks inside --------------------------------------------------------------------
step "checking the image"
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@"; }
for p in tally-appliance tally-tools; do
	st=$(in_root dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	[ "$st" = "install ok installed" ] || fail "$p not installed in the image ($st)"
done
echo "ok   tally-appliance and tally-tools installed"
st=$(systemctl --root="$root" is-enabled tallyd.service || true)
[ "$st" = enabled ] || fail "tallyd.service is '$st' in the image, not enabled"
[ -L "$root/etc/systemd/system/multi-user.target.wants/tallyd.service" ] ||
	fail "no multi-user.target.wants/tallyd.service link"
echo "ok   tallyd.service enabled (multi-user.target)"
out=$(systemd-analyze verify --root="$root" tallyd.service 2>&1) || fail "systemd-analyze verify: $out"
# dpdk.service is the one unit tallyd.service names that may warn; anything else fails
out=$(grep -v '^$' <<<"$out" || true)
[ -z "$out" ] || fail "systemd-analyze verify --root warned: $out"
echo "ok   systemd-analyze verify --root: clean"
in_root getent group tally >/dev/null || fail "group tally missing in the image"
echo "ok   group tally exists"
tallyd=$(in_root sh -c 'command -v tallyd') || fail "tallyd not on PATH in the image"
out=$(in_root "$tallyd" --config /etc/tally/tallyd.conf --check-config 2>&1) ||
	fail "shipped /etc/tally/tallyd.conf rejected by tallyd --check-config: $out"
echo "ok   tallyd --check-config accepts /etc/tally/tallyd.conf:"
sed 's/^/       /' <<<"$out" | head -12

step "starting tallyd in the image (net_tap in a private network namespace, --no-huge)"
# Type=notify needs tallyd to send READY=1 (tally_sd_notify); its string is in the binary.
notify=1
grep -aq 'READY=1' "$root$tallyd" || notify=0
cat >"$root/etc/tally/deploy-test.conf" <<'EOF'
eal = -l 0-1 --no-huge -m 512 --file-prefix deploy-image
port = net_tap0,iface=deploytap0
ip = 10.91.7.1/24
queues = 1
mem = 64M
idle-backoff = on
drain-timeout-ms = 2000
EOF
mkdir -p "$root/run/tally"
rm -f "$root/run/deploy-notify.sock" "$work/notify.txt"
# A stand-in for systemd's notify socket: records what tallyd sends, until READY=1.
/usr/bin/python3 - "$root/run/deploy-notify.sock" "$work/notify.txt" <<'PY' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
s.settimeout(1.0)
end = time.time() + 90
with open(sys.argv[2], "w") as out:
    while time.time() < end:
        try:
            msg = s.recv(4096).decode(errors="replace")
        except socket.timeout:
            continue
        out.write(msg + "\n"); out.flush()
        if "READY=1" in msg.split("\n"):
            break
PY
listener=$!
# tallyd must not send READY=1 before the listener is bound
for _ in $(seq 1 300); do [ -S "$root/run/deploy-notify.sock" ] && break; sleep 0.1; done
[ -S "$root/run/deploy-notify.sock" ] || fail "the notify listener did not start"
rc=0
unshare --net --mount --propagation private /bin/bash -uo pipefail -c '
	root=$1 work=$2 tallyd=$3 notify=$4
	mount -t proc proc "$root/proc"
	mount --rbind /sys "$root/sys"
	mount --rbind /dev "$root/dev"
	ip link set lo up
	chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin NOTIFY_SOCKET=/run/deploy-notify.sock \
		"$tallyd" --config /etc/tally/deploy-test.conf >"$work/tallyd.log" 2>&1 &
	pid=$!
	ready=0
	for _ in $(seq 1 600); do
		if [ "$notify" = 1 ]; then
			grep -qx READY=1 "$work/notify.txt" 2>/dev/null && { ready=1; break; }
		else
			[ -S "$root/run/tally/tallyd.sock" ] && { ready=1; break; }
		fi
		kill -0 $pid 2>/dev/null || break
		sleep 0.1
	done
	rc=0
	if [ $ready = 1 ]; then
		if [ "$notify" = 1 ]; then
			echo "ok   tallyd sent READY=1 ($(paste -sd" " "$work/notify.txt"))"
		else
			echo "note tallyd does not send READY=1: waited for its control socket instead"
		fi
		if chroot "$root" /usr/bin/env -i PATH=/usr/bin:/bin tallyctl status >"$work/status.txt" 2>&1; then
			echo "ok   tallyctl status in the image answered:"
			sed "s/^/       /" "$work/status.txt" | head -20
		else
			echo "FAIL: tallyctl status failed:"; cat "$work/status.txt"; rc=1
		fi
		chroot "$root" /usr/bin/env -i PATH=/usr/bin:/bin tallyctl --json status >"$work/status.json" 2>&1 &&
			/usr/bin/python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$work/status.json" ||
			{ echo "FAIL: tallyctl --json status is not JSON:"; cat "$work/status.json"; rc=1; }
	else
		echo "FAIL: tallyd did not get ready within 60 s"; rc=1
	fi
	if kill -0 $pid 2>/dev/null; then
		kill -TERM $pid
		for _ in $(seq 1 150); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
		if kill -0 $pid 2>/dev/null; then
			echo "FAIL: tallyd still running 15 s after SIGTERM"; kill -KILL $pid; rc=1
		fi
	fi
	wait $pid; trc=$?
	if [ $rc = 0 ] && [ $trc != 0 ]; then echo "FAIL: tallyd exited $trc after SIGTERM (drain)"; rc=1; fi
	[ $trc = 0 ] && echo "ok   tallyd drained and exited 0 on SIGTERM"
	[ $rc = 0 ] || { echo "--- tallyd log"; tail -40 "$work/tallyd.log"; }
	exit $rc
' test-image "$root" "$work" "$tallyd" "$notify" || rc=$?
kill "$listener" 2>/dev/null || true
wait "$listener" 2>/dev/null || true
rm -f "$root/run/deploy-notify.sock" "$root/etc/tally/deploy-test.conf"
rm -rf "$root/run/tally" "$root/run/dpdk"
[ "$rc" = 0 ] || exit 1
echo
if [ "$notify" = 0 ]; then
	skip "every other check passed ($SECONDS s, image: $tool), but tallyd does not send READY=1 (it must call tally_sd_notify(\"READY=1\") from deploy/tally_sd_notify.h once its ports are up): tallyd.service (Type=notify) would time out on start"
fi
echo "test-image.sh: all checks passed in $SECONDS s (image: $tool)"
