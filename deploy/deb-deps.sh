#!/usr/bin/env bash
# deb-deps.sh DEB... — the runtime dependencies of the given .debs as one comma-separated
# list of package names (first alternative, versions dropped, the given packages left out),
# for an image's package list.
set -euo pipefail
names=() deps=()
for d in "$@"; do
	names+=("$(dpkg-deb -f "$d" Package)")
	IFS=',' read -r -a list <<<"$(dpkg-deb -f "$d" Pre-Depends),$(dpkg-deb -f "$d" Depends)"
	for dep in "${list[@]}"; do
		dep=${dep%%|*}; dep=${dep%%(*}; dep=${dep%%:*}; dep=${dep//[[:space:]]/}
		[ -n "$dep" ] && deps+=("$dep")
	done
done
printf '%s\n' "${deps[@]}" | sort -u | grep -vxF -f <(printf '%s\n' "${names[@]}") | paste -sd, -
