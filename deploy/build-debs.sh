#!/usr/bin/env bash
# build-debs.sh [--version V] OUTDIR — build the Debian packages (tally-appliance, tally-tools,
# python3-tally) from this tree with `dpkg-buildpackage -us -uc -b`, offline: the build
# dependencies must be installed (debian/control; `apt-get build-dep ./` installs them).
# --version V: package the tree as version V (a changelog entry is added to the copy; an
# upgrade/rollback test builds the same tree twice).
# The tree is copied (git-tracked and untracked-not-ignored files) to OUTDIR/src, so the
# checkout stays clean; the .debs end up in OUTDIR.
set -euo pipefail
version=""
if [ "${1:-}" = --version ]; then
	version=${2:?--version needs a Debian version}
	[[ $version =~ ^[0-9][A-Za-z0-9.+~-]*$ ]] || { echo "build-debs.sh: --version: '$version' is not a Debian version" >&2; exit 2; }
	shift 2
fi
[ $# -eq 1 ] || { echo "usage: build-debs.sh [--version V] OUTDIR" >&2; exit 2; }
top=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)
case "$out/" in "$top"/build*/* | "$top"/mkosi.*) ;; "$top"/*)
	echo "build-debs.sh: OUTDIR must be outside the tree (or under build*/): $out" >&2; exit 2 ;;
esac
rm -rf "$out/src" "$out"/*.deb "$out"/*.changes "$out"/*.buildinfo
mkdir -p "$out/src"
if git -C "$top" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	(cd "$top" && git ls-files -z -co --exclude-standard | tar --null -T - -cf -) | tar -xf - -C "$out/src"
else
	tar -C "$top" --exclude='./build*' --exclude=./.git -cf - . | tar -xf - -C "$out/src"
fi
cd "$out/src"
if [ -n "$version" ]; then
	{ printf 'tally (%s) bookworm; urgency=medium\n\n  * Rebuilt as %s by build-debs.sh --version.\n\n -- Tally developers <tally@localhost>  %s\n\n' \
		"$version" "$version" "$(date -R)"; cat debian/changelog; } >debian/changelog.new
	mv debian/changelog.new debian/changelog
fi
if ! dpkg-checkbuilddeps >/dev/null 2>&1; then
	echo "build-debs.sh: missing build dependencies:" >&2
	dpkg-checkbuilddeps >&2 || true
	echo "install them with: apt-get build-dep '$top'" >&2
	exit 1
fi
start=$SECONDS
dpkg-buildpackage -us -uc -b >"$out/dpkg-buildpackage.log" 2>&1 || {
	tail -40 "$out/dpkg-buildpackage.log" >&2
	echo "build-debs.sh: dpkg-buildpackage failed (log: $out/dpkg-buildpackage.log)" >&2
	exit 1
}
grep -h 'dh_missing: warning' "$out/dpkg-buildpackage.log" >&2 || true
rm -rf "$out/src"
echo "build-debs.sh: built in $((SECONDS - start)) s:"
ls -1 "$out"/*.deb
