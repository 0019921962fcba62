#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# auth_udpd.sh --bin BUILDDIR — authenticated packets end to end with real processes:
# tally-udpd on loopback, a job admitted with a key (tallyctl job-add --key-file), two
# tally-worker ranks with the key (TALLY_AUTH_KEY_FILE and --key-file), and an attacker
# (auth_attack.py: spoofed pushes, BYEs and RESULTs as joined ranks, from their own
# addresses when root allows raw sockets) during the run (suite 'security').
#  1. admission refuses bad key files with a message naming the file;
#  2. a worker with the wrong key, and one without a key, fail at JOIN within seconds
#     with a message naming TALLY_AUTH_KEY_FILE (not the 30 s timeout);
#  3. the attacked run completes bit-exact (deterministic keys) and every attempt is
#     counted: appliance drops auth_required and bad_mac, workers' drops of the spoofed
#     RESULTs, no BYE accepted but the workers' own.
set -u
here=$(cd "$(dirname "$0")" && pwd)
# --bin BUILDDIR -> bin, UDPD, WORKER, CTL; udpd_scratch, fail, jget
# shellcheck source=tests/faults/udpd_bins.sh
. "$here/../faults/udpd_bins.sh"
[ -x "$CTL" ] || { echo "no tallyctl under $bin" >&2; exit 1; }
udpd_scratch auth
port=$((20000 + ($$ % 20000)))

python3 -c "import os; print(os.urandom(32).hex())" >"$tmp/key"
python3 -c "import os; print(os.urandom(32).hex())" >"$tmp/wrong"
head -c 16 /dev/urandom >"$tmp/short"
chmod 600 "$tmp/key" "$tmp/wrong" "$tmp/short"

# a GMAC backend that does not exist: the appliance does not start, and says which setting
rc=0
TALLY_AUTH_BACKEND=bogus timeout 10 "$UDPD" --addr 127.0.0.1 --port $port --cores 1 --max-jobs 2 \
	--mem 16M --det-pool 1M --ctl-socket "$tmp/bogus.sock" 2>"$tmp/bogus.err" || rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "tally-udpd ran with TALLY_AUTH_BACKEND=bogus (rc $rc)"
grep -q "TALLY_AUTH_BACKEND=bogus is not a GMAC backend: set it to openssl or ipsec-mb" \
	"$tmp/bogus.err" || fail "bad TALLY_AUTH_BACKEND: unclear error: $(cat "$tmp/bogus.err")"
! grep -q "Cannot allocate memory" "$tmp/bogus.err" ||
	fail "bad TALLY_AUTH_BACKEND reported as out of memory: $(cat "$tmp/bogus.err")"
echo "ok 0 - TALLY_AUTH_BACKEND=bogus: $(head -1 "$tmp/bogus.err")"

# the appliance on OpenSSL's GMAC, the workers on the default (ipsec-mb where built in): the
# two backends meet on the wire
TALLY_AUTH_BACKEND=openssl "$UDPD" --addr 127.0.0.1 --port $port --cores 2 --max-jobs 4 --mem 64M --det-pool 4M \
	--ctl-socket "$tmp/ctl.sock" --stats "$tmp/app.json" 2>"$tmp/udpd.err" &
app=$!
for _ in $(seq 100); do [ -S "$tmp/ctl.sock" ] && break; sleep 0.1; done
[ -S "$tmp/ctl.sock" ] || fail "tally-udpd did not start"
C=("$CTL" --socket "$tmp/ctl.sock")
"${C[@]}" --json status >"$tmp/status.json" || fail "tallyctl status"
[ "$(jget "$tmp/status.json" "d['gmac_backend'].startswith('openssl ')")" = True ] ||
	fail "status: gmac_backend is not the openssl one asked for: $(cat "$tmp/status.json")"
echo "appliance GMAC: $(jget "$tmp/status.json" "d['gmac_backend']")"

# 1. admission with bad key files: refused, the file named; then the real one
out=$("${C[@]}" job-add 5 --token 77 --world-size 2 --key-file "$tmp/short" 2>&1) &&
	fail "a 16-byte key file was accepted"
echo "$out" | grep -q "$tmp/short: 16 bytes" || fail "short key: unclear error: $out"
out=$("${C[@]}" job-add 5 --token 77 --world-size 2 --key-file key 2>&1) &&
	fail "a relative key path was accepted"
echo "$out" | grep -q "absolute path" || fail "relative key path: unclear error: $out"
"${C[@]}" --json job-add 5 --token 77 --world-size 2 --key-file "$tmp/key" >"$tmp/add.json" ||
	fail "job-add with the key failed"
[ "$(jget "$tmp/add.json" "d['authenticated']")" = True ] || fail "job-add: not authenticated"
echo "ok 1 - admission with a key file; bad key files refused with the file named"

# 2. wrong key / no key: a clear error at JOIN, well before the 30 s give-up
W=("$WORKER" --host 127.0.0.1 --port $port --job 5 --token 77 --world 2 --keys 4
   --join-ms 20000)
t0=$(date +%s)
"${W[@]}" --rank 0 --key-file "$tmp/wrong" --bytes 64K >/dev/null 2>"$tmp/wrong.err" &&
	fail "a worker with the wrong key passed"
grep -q "bad_mac.*check TALLY_AUTH_KEY_FILE" "$tmp/wrong.err" ||
	fail "wrong key: unclear error: $(tail -1 "$tmp/wrong.err")"
env -u TALLY_AUTH_KEY_FILE "${W[@]}" --rank 0 --bytes 64K >/dev/null 2>"$tmp/nokey.err" &&
	fail "a worker without a key passed"
grep -q "auth_required.*set TALLY_AUTH_KEY_FILE" "$tmp/nokey.err" ||
	fail "no key: unclear error: $(tail -1 "$tmp/nokey.err")"
[ $(($(date +%s) - t0)) -lt 10 ] || fail "the key errors took $(($(date +%s) - t0)) s"
# what step 2 was counted (a JOIN is resent when its refusal is slow: at least one each);
# step 3's counts are taken against these
"${C[@]}" --json stats >"$tmp/stats2.json" || fail "tallyctl stats"
pre() { jget "$tmp/stats2.json" "d['totals']['drops'].get('$1', 0)"; }
[ "$(pre bad_mac)" -ge 1 ] && [ "$(pre auth_required)" -ge 1 ] ||
	fail "step 2 JOINs not counted: bad_mac $(pre bad_mac) auth_required $(pre auth_required)"
echo "ok 2 - wrong key and missing key fail at JOIN naming TALLY_AUTH_KEY_FILE"

# 3. the attacked run: deterministic keys, every result checked bit-exact; the ranks run for
# a time that outlives the 2 s attack however fast their rounds are (--seconds: both end at
# the same round)
secs=$((6 * ${TALLY_TIMEOUT_MULTIPLIER:-1}))
TALLY_AUTH_KEY_FILE=$tmp/key "${W[@]}" --rank 0 --bytes 1M --rounds 10000000 --seconds "$secs" --deterministic \
	--json >"$tmp/w0.json" 2>"$tmp/w0.err" & w0=$!
"${W[@]}" --rank 1 --key-file "$tmp/key" --bytes 1M --rounds 10000000 --seconds "$secs" --deterministic \
	--json >"$tmp/w1.json" 2>"$tmp/w1.err" & w1=$!
for _ in $(seq 100); do
	"${C[@]}" --json workers >"$tmp/workers.json" 2>/dev/null &&
		[ "$(jget "$tmp/workers.json" "len([w for w in d if w['job_id'] == 5])")" -ge 4 ] && break
	sleep 0.05
done
python3 "$here/auth_attack.py" --port $port --cores 2 --workers "$tmp/workers.json" --job 5 \
	--token 77 --seconds 2 >"$tmp/attack.json" 2>"$tmp/attack.err" || fail "attacker failed"
wait $w0 || fail "rank 0 failed under attack: $(tail -1 "$tmp/w0.err")"
wait $w1 || fail "rank 1 failed under attack: $(tail -1 "$tmp/w1.err")"
"${C[@]}" --json stats >"$tmp/stats.json" || fail "tallyctl stats"
cat "$tmp/attack.json"
for r in 0 1; do
	[ "$(jget "$tmp/w$r.json" "d['ok'] and d['mismatches'] == 0 and d['checked'] > 0")" = True ] ||
		fail "rank $r: not bit-exact: $(cat "$tmp/w$r.json")"
	echo "rank $r: checked $(jget "$tmp/w$r.json" "d['checked']") elements, drops $(jget "$tmp/w$r.json" "d['drop_reasons']")"
done
drops() { jget "$tmp/stats.json" "d['totals']['drops'].get('$1', 0)"; }
sent() { jget "$tmp/attack.json" "d['sent']['$1']"; }
echo "appliance drops: auth_required $(drops auth_required) bad_mac $(drops bad_mac); byes $(jget "$tmp/stats.json" "d['totals']['byes']")"
# exact: every forged packet, on top of the wrong-key and the keyless worker's JOINs of step 2
[ "$(drops bad_mac)" -eq $(($(sent push_forged) + $(sent bye_forged) + $(pre bad_mac))) ] ||
	fail "appliance bad_mac $(drops bad_mac) != forged pushes + BYEs sent + step 2's $(pre bad_mac)"
[ "$(drops auth_required)" -eq $(($(sent push_plain) + $(sent bye_plain) + $(sent join_plain) + $(pre auth_required))) ] ||
	fail "appliance auth_required $(drops auth_required) != unsigned packets sent + step 2's $(pre auth_required)"
[ "$(jget "$tmp/stats.json" "d['totals']['byes']")" -le 4 ] || fail "more BYEs than the workers sent"
# the spoofed RESULTs reached rank 0 while it ran (loopback loses nothing)
[ "$(jget "$tmp/w0.json" "d['drop_reasons'].get('bad_mac', 0)")" -eq "$(sent result_forged)" ] ||
	fail "rank 0 bad_mac drops != forged RESULTs sent"
[ "$(jget "$tmp/w0.json" "d['drop_reasons'].get('auth_required', 0)")" -eq "$(sent result_plain)" ] ||
	fail "rank 0 auth_required drops != unsigned RESULTs sent"
echo "ok 3 - attacked run bit-exact, every spoofed packet refused and counted"
