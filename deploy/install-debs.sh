#!/usr/bin/env bash
# install-debs.sh ROOT DEBDIR — install the appliance's Tally packages (tally-appliance,
# tally-tools) from DEBDIR into the Debian tree ROOT and enable tallyd.service.
# Used by mkosi.finalize and by the image test. Runs dpkg inside ROOT (chroot) in a private
# mount namespace, so /proc and /dev mounts vanish with it. Dependencies must already be in
# ROOT (deploy/build-image.sh adds them to the image's package list); nothing is downloaded.
# The package's postinst creates the group "tally"; no service is started in ROOT.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: install-debs.sh ROOT DEBDIR" >&2; exit 2; }
root=$(realpath "$1")
debdir=$(realpath "$2")
[ -x "$root/usr/bin/dpkg" ] || { echo "install-debs.sh: $root is not a Debian tree (no usr/bin/dpkg)" >&2; exit 1; }
debs=()
for p in tally-appliance tally-tools; do
	f=$(ls "$debdir/${p}"_*.deb 2>/dev/null | sort -V | tail -1 || true)
	[ -n "$f" ] || { echo "install-debs.sh: no ${p}_*.deb in $debdir" >&2; exit 1; }
	debs+=("$f")
done
stage=$root/var/cache/tally-debs
rm -rf "$stage"
mkdir -p "$stage"
cp "${debs[@]}" "$stage/"
trap 'rm -rf "$stage"' EXIT
# policy-rc.d: no daemon may start inside the tree while packages are configured
unshare --mount --propagation private /bin/bash -euo pipefail -c '
	root=$1
	mount -t proc proc "$root/proc"
	mount --bind /dev "$root/dev"
	policy=$root/usr/sbin/policy-rc.d
	had_policy=0; [ -e "$policy" ] && had_policy=1
	[ "$had_policy" = 1 ] || printf "#!/bin/sh\nexit 101\n" >"$policy"
	chmod +x "$policy"
	rc=0
	chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
		/bin/sh -c "dpkg -i /var/cache/tally-debs/*.deb" || rc=$?
	[ "$had_policy" = 1 ] || rm -f "$policy"
	if [ "$rc" != 0 ]; then
		echo "install-debs.sh: dpkg -i failed in $root (dependencies missing from the image?)" >&2
		exit "$rc"
	fi
' install-debs "$root"
systemctl --root="$root" enable tallyd.service
echo "install-debs.sh: installed ${debs[*]##*/} into $root; tallyd.service $(systemctl --root="$root" is-enabled tallyd.service)"
