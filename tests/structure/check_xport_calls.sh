#!/usr/bin/env bash
# check_xport_calls.sh SRCROOT — programs reach a transport only through the registry
# (tally_xport_reg.h): no name of a transport's own API (tally_<name>_..., where
# dataplane/xport/<name>/ is a transport folder) in a C source outside that folder and
# tests/. One exception, by design: tallyd is built on DPDK (its ports and the engine-side
# ops are its datapath), so appliance/tallyd/ may use tally_dpdk_, but not the DPDK worker
# transport (tally_dpdk_client_), which is the registry's "dpdk". Prints each finding.
set -u
root=$1
cd "$root" || exit 2
sources() { # git's list in a checkout, else every file
	if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		git ls-files '*.c' '*.h' '*.cu' '*.cc'
	else
		find . \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cc' \) -print |
			sed 's|^\./||'
	fi
}
names=()
for d in dataplane/xport/*/; do
	n=$(basename "$d")
	[ -f "$d/tally_$n.h" ] && [ -n "$(ls "$d"/*_reg.c "$d"/*reg.c 2>/dev/null)" ] && names+=("$n")
done
[ ${#names[@]} -gt 0 ] || { echo "no transport folder found under dataplane/xport"; exit 2; }
echo "transports: ${names[*]}"
bad=0
while read -r f; do
	case $f in tests/*) continue ;; esac
	for n in "${names[@]}"; do
		case $f in dataplane/xport/$n/*) continue ;; esac
		pat="\\btally_${n}_[a-z0-9_]+"
		hits=$(grep -nE "$pat" "$f" || true)
		if [ "$n" = dpdk ]; then
			case $f in appliance/tallyd/*) hits=$(grep -nE '\btally_dpdk_client_' "$f" || true) ;; esac
		fi
		if [ -n "$hits" ]; then
			echo "$f: calls the $n transport directly (use the registry, tally_xport_reg.h):"
			echo "$hits" | sed 's/^/  /'
			bad=1
		fi
	done
done < <(sources)
[ $bad = 0 ] && echo "ok: no transport is called outside its folder"
exit $bad
