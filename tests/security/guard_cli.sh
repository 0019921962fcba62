#!/usr/bin/env bash
# tests/security/guard_cli.sh — the trust settings from the outside: every bad value makes
# tallyd, tally-udpd and tallyctl exit with status 2 and a sentence naming the setting (in a
# config file too, with its line), and a REGISTER refused by a quota reaches the worker as
# an error that names the setting to change. No root needed (tally-udpd on 127.0.0.1).
#   guard_cli.sh BUILDDIR
set -u
b=$1
tmp=$(mktemp -d /tmp/tlyguardcli.XXXXXX)
udpd_pid=
cleanup() { [ -n "$udpd_pid" ] && kill "$udpd_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
fail=0
# expect_err WANT CMD...: exit status 2 and WANT in its output
expect_err() {
	local want=$1 out rc
	shift
	out=$("$@" 2>&1); rc=$?
	if [ $rc != 2 ] || ! grep -qF -- "$want" <<<"$out"; then
		echo "FAIL: $* -> exit $rc, '$out' (want exit 2 and '$want')"; fail=1
	else
		echo "ok: $* -> $out"
	fi
}
U=$b/appliance/udpd/tally-udpd
expect_err "'allow 10.0.0.1/24': host bits set; the network is 10.0.0.0/24" $U --allow 10.0.0.1/24
expect_err "'admit-subnet 10.0.0.0': expected a network" $U --admit-subnet 10.0.0.0
expect_err "'quota-bytes 1T': a size" $U --quota-bytes 1T
expect_err "'quota-ranks 5000': a whole number in 0..1024" $U --quota-ranks 5000
expect_err "'admit-claims 100': a whole number in 0..64" $U --admit-claims 100
expect_err "'ctl-idle-timeout-ms 1': a whole number in 100.." $U --ctl-idle-timeout-ms 1
printf 'cores = 1\nallow = 10.0.0.0/8\nallow = 300.0.0.0/8\n' >"$tmp/u.conf"
expect_err "u.conf:3: 'allow 300.0.0.0/8': expected a network" $U --config "$tmp/u.conf"
if [ -x "$b/appliance/tallyd" ]; then
	T="$b/appliance/tallyd --port net_null0 --ip 10.0.0.1/24 --check-config"
	expect_err "'allow 10.0.0.1/24': host bits set" $T --allow 10.0.0.1/24
	expect_err "'quota-keys x': a whole number" $T --quota-keys x
	printf 'allow = 10.0.0.0/8\n' >"$tmp/t.conf"
	for i in $(seq 16); do echo "allow = 10.$i.0.0/16" >>"$tmp/t.conf"; done
	expect_err "t.conf:17: 'allow 10.16.0.0/16': at most 16 allow entries" $T --config "$tmp/t.conf"
fi
expect_err "quota_bytes: 'x' is not an unsigned 64-bit integer" \
	"$b/control/tallyctl" --socket "$tmp/none.sock" job-add 5 --token 1 --world-size 2 --quota-bytes x
# A quota refusal reaches the worker with the setting's name.
port=$(( 20000 + RANDOM % 20000 ))
$U --addr 127.0.0.1 --port $port --cores 1 --open --quota-bytes 1M --ctl-socket "$tmp/ctl.sock" \
	>"$tmp/udpd.log" 2>&1 &
udpd_pid=$!
for i in $(seq 50); do grep -q "cores on port" "$tmp/udpd.log" && break; sleep 0.1; done
out=$(timeout 20 "$b/perf/tally-worker" --host 127.0.0.1 --port $port --bytes 8M --keys 1 \
	--rounds 1 2>&1); rc=$?
if [ $rc = 0 ] || ! grep -qF "quota_bytes: the job's memory quota is reached (tallyd --quota-bytes" <<<"$out"; then
	echo "FAIL: worker over its quota: exit $rc, $(tail -n 2 <<<"$out")"; fail=1
else
	echo "ok: worker over its quota: $(grep -o 'register key.*' <<<"$out" | head -1)"
fi
# An operator-admitted job's own quotas: shown by `job`, kept by config-save.
C="$b/control/tallyctl --socket $tmp/ctl.sock"
$C job-add 5 --no-auth --token 1 --world-size 2 --quota-keys 10 --quota-bytes 1048576 >/dev/null ||
	{ echo "FAIL: job-add with quotas"; fail=1; }
q=$($C --json job 5 | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["quota_keys"], j["quota_bytes"])')
s=$($C --json config-save | python3 -c 'import json,sys; print([c["params"] for c in json.load(sys.stdin)["calls"] if c["method"]=="job_add"])')
if [ "$q" != "10 1048576" ] || ! grep -q "'quota_keys': 10" <<<"$s"; then
	echo "FAIL: job 5 quotas '$q', config-save $s"; fail=1
else
	echo "ok: job 5 quotas $q; config-save $s"
fi
exit $fail
