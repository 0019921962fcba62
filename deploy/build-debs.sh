#!/usr/bin/env bash
# build-debs.sh [--version V] OUTDIR — build the Debian packages (tally-appliance, tally-tools,
# python3-tally) from this tree with `dpkg-buildpackage -us -uc -b`, offline: the build
# dependencies must be installed (debian/control; `apt-get build-dep ./` installs them).
# --version V: package the tree as version V (a changelog entry is added to the copy; an
# upgrade/rollback test builds the same tree twice).
# --cache DIR: reuse the .debs built earlier from the same files and version, kept in
# DIR/KEY (KEY: a hash of every file the copy takes and V), else build them there; they are
# then copied to OUTDIR. The image, container and VM tests share one build per tree this way.
# The tree is copied (git-tracked and untracked-not-ignored files) to OUTDIR/src, so the
# checkout stays clean; the .debs end up in OUTDIR.
set -euo pipefail
version="" cache=""
while [ $# -gt 1 ]; do
	case $1 in
	--version)
		version=$2
		[[ $version =~ ^[0-9][A-Za-z0-9.+~-]*$ ]] || { echo "build-debs.sh: --version: '$version' is not a Debian version" >&2; exit 2; } ;;
	--cache) cache=$2 ;;
	*) break ;;
	esac
	shift 2
done
[ $# -eq 1 ] || { echo "usage: build-debs.sh [--version V] [--cache DIR] OUTDIR" >&2; exit 2; }
top=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)
case "$out/" in "$top"/build*/* | "$top"/mkosi.*) ;; "$top"/*)
	echo "build-debs.sh: OUTDIR must be outside the tree (or under build*/): $out" >&2; exit 2 ;;
esac
rm -rf "$out/src" "$out"/*.deb "$out"/*.changes "$out"/*.buildinfo
tree_files() {
	if git -C "$top" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		(cd "$top" && git ls-files -z -co --exclude-standard)
	else
		(cd "$top" && find . -path './build*' -prune -o -path ./.git -prune -o -type f -print0)
	fi
}
if [ -n "$cache" ]; then
	mkdir -p "$cache"
	key=$({ echo "version=$version"; tree_files | (cd "$top" && xargs -0 sha256sum); } | sha256sum | cut -c1-16)
	# One builder per key; a second caller waits (at most the build's own time) and reuses.
	exec 9>"$cache/.lock-$key"
	flock -w 1800 9 || { echo "build-debs.sh: $cache/.lock-$key held for 30 min" >&2; exit 1; }
	if [ -f "$cache/$key/.done" ]; then
		touch "$cache/$key/.done"
		cp "$cache/$key"/*.deb "$out"/
		echo "build-debs.sh: reused $cache/$key (same tree and version):"
		ls -1 "$out"/*.deb
		exit 0
	fi
	# Keep the three newest builds (a tree's v1 and v2 and one before them).
	{ ls -1dt "$cache"/*/ 2>/dev/null || true; } | tail -n +4 | while read -r d; do rm -rf "$d" "$cache/.lock-$(basename "$d")"; done
	final=$out out=$cache/$key
	rm -rf "$out" && mkdir -p "$out"
fi
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
if [ -n "$cache" ]; then
	touch "$out/.done"
	cp "$out"/*.deb "$final"/
	out=$final
fi
ls -1 "$out"/*.deb
