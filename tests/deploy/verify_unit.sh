#!/usr/bin/env bash
# verify_unit.sh UNIT — systemd-analyze verify the generated tallyd.service (with stand-in
# executables, since tallyd need not be installed here) and check the settings issue 8 asks
# for. Any warning from systemd-analyze fails the test (it exits 0 on parse warnings).
set -euo pipefail
unit=$1
command -v systemd-analyze >/dev/null || { echo "SKIP: systemd-analyze not installed"; exit 77; }
tmp=$(mktemp -d /tmp/deploy-verify.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin"
# Point every Exec line at stand-ins in $tmp/bin, keeping the program names.
for prog in $(sed -n 's/^Exec[A-Za-z]*=[-@:+!]*\([^ ]*\).*/\1/p' "$unit" | sort -u); do
	printf '#!/bin/sh\nexit 0\n' >"$tmp/bin/$(basename "$prog")"
	chmod +x "$tmp/bin/$(basename "$prog")"
done
sed -E "s#^(Exec[A-Za-z]*=[-@:+!]*)[^ ]*/([^/ ]+)#\1$tmp/bin/\2#" "$unit" >"$tmp/tallyd.service"
out=$(systemd-analyze verify "$tmp/tallyd.service" 2>&1) || { echo "$out"; exit 1; }
if [ -n "$out" ]; then echo "systemd-analyze verify warned:"; echo "$out"; exit 1; fi
fail=0
for want in 'Type=notify' 'RuntimeDirectory=tally' 'LimitMEMLOCK=infinity' 'Restart=on-failure' \
	'After=dpdk.service' 'Wants=dpdk.service' 'KillSignal=SIGTERM' 'WantedBy=multi-user.target'; do
	key=${want%%=*} val=${want#*=}
	grep -Eq "^$key=(.* )?$val( |\$)" "$unit" || { echo "missing: $want"; fail=1; }
done
grep -q -- '--check-config' "$unit" || { echo "missing: ExecStartPre with tallyd --check-config"; fail=1; }
[ "$fail" = 0 ] && echo "tallyd.service: systemd-analyze verify clean, required settings present"
exit "$fail"
