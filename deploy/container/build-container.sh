#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# deploy/container/build-container.sh DEBDIR [TAG] — the appliance's OCI image with podman,
# offline but for the Debian mirror (no registry: there is no `FROM debian:12` to pull):
#  1. a Debian 12 minbase root by debootstrap from the mirror (TALLY_CONTAINER_MIRROR, default
#     http://deb.debian.org/debian), cached as $TALLY_CONTAINER_CACHE/base-bookworm.tar
#     (default /var/cache/tally-container);
#  2. DEBDIR's tally-appliance and tally-tools .debs (deploy/build-debs.sh) installed into a
#     copy with apt (their dependencies from the mirror), apt's caches emptied;
#  3. `podman import` of that root as localhost/tally-rootfs:TAG, then `podman build` of the
#     Containerfile on it (entrypoint, user tally, HEALTHCHECK = tallyctl status) as
#     localhost/tally-appliance:TAG.
# Root. Prints each step's time.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: build-container.sh DEBDIR [TAG]" >&2; exit 2; }
debs=$(cd "$1" && pwd)
tag=${2:-latest}
here=$(cd "$(dirname "$0")" && pwd)
cache=${TALLY_CONTAINER_CACHE:-/var/cache/tally-container}
mirror=${TALLY_CONTAINER_MIRROR:-http://deb.debian.org/debian}
for f in "$debs"/tally-appliance_*.deb "$debs"/tally-tools_*.deb; do
	[ -f "$f" ] || { echo "build-container.sh: no $f (deploy/build-debs.sh DEBDIR)" >&2; exit 2; }
done
mkdir -p "$cache"
t=$SECONDS
if [ ! -s "$cache/base-bookworm.tar" ]; then
	rm -rf "$cache/base.tmp"
	debootstrap --variant=minbase bookworm "$cache/base.tmp" "$mirror" >"$cache/debootstrap.log" 2>&1 || {
		echo "build-container.sh: debootstrap from $mirror failed (TALLY_CONTAINER_MIRROR):" >&2
		tail -n 5 "$cache/debootstrap.log" >&2; exit 1; }
	tar -C "$cache/base.tmp" -cf "$cache/base-bookworm.tar.tmp" .
	mv "$cache/base-bookworm.tar.tmp" "$cache/base-bookworm.tar"
	rm -rf "$cache/base.tmp"
	echo "build-container.sh: base root (debootstrap minbase bookworm): $((SECONDS - t)) s"
else
	echo "build-container.sh: base root from $cache/base-bookworm.tar"
fi

work=$(mktemp -d /tmp/tally-container.XXXXXX)
trap 'umount "$work/root/proc" 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir "$work/root" "$work/root/tmp/debs" -p
tar -C "$work/root" -xf "$cache/base-bookworm.tar"
mkdir -p "$work/root/tmp/debs"
cp "$debs"/tally-appliance_*.deb "$debs"/tally-tools_*.deb "$work/root/tmp/debs/"
cp /etc/resolv.conf "$work/root/etc/resolv.conf"
echo "deb $mirror bookworm main" >"$work/root/etc/apt/sources.list"
mount -t proc proc "$work/root/proc"
t=$SECONDS
chroot "$work/root" sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	--no-install-recommends /tmp/debs/*.deb >/tmp/apt.log 2>&1 || { tail -n 20 /tmp/apt.log; exit 1; }
	apt-get clean; rm -rf /var/lib/apt/lists/* /tmp/debs /tmp/apt.log
	# the appliance runs as user tally (group tally: the control socket'"'"'s group), no root
	getent group tally >/dev/null || groupadd --system tally
	useradd --system -g tally -M -d /nonexistent -s /usr/sbin/nologin tally
	install -d -o tally -g tally -m 0750 /run/tally' || {
	echo "build-container.sh: installing the .debs into the root failed" >&2; exit 1; }
umount "$work/root/proc"
: >"$work/root/etc/resolv.conf"
echo "build-container.sh: .debs installed: $((SECONDS - t)) s"
t=$SECONDS
tar -C "$work/root" -cf - . | podman import - "localhost/tally-rootfs:$tag" >/dev/null
podman build -q --format docker --build-arg "BASE=localhost/tally-rootfs:$tag" \
	-t "localhost/tally-appliance:$tag" -f "$here/Containerfile" "$here" >/dev/null
echo "build-container.sh: podman import + build: $((SECONDS - t)) s: localhost/tally-appliance:$tag"
