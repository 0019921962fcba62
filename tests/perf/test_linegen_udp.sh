#!/usr/bin/env bash
# tests/perf/test_linegen_udp.sh TALLY_LINEGEN TALLY_UDPD — tally-linegen against a real
# appliance (tally-udpd, kernel UDP, no root): all 32 ranks JOIN and every key is REGISTERed
# from one address, pushes are summed and RESULTs come back and are checked (no bad CRC or
# sum), a tiny search (2 steps, 1 trial) prints its JSON line. Counts only, no timing.
set -u
lg=$1 udpd=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
dir=$(mktemp -d /tmp/lgudp.XXXXXX)
upid=
cleanup() { [ -n "$upid" ] && kill "$upid" 2>/dev/null && wait "$upid" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
# a free port: let the kernel pick one, then hand it to tally-udpd
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$udpd" --addr 127.0.0.1 --port "$port" --cores 1 --open --mem 64M >"$dir/udpd.log" 2>&1 &
upid=$!
mult=${TALLY_TIMEOUT_MULTIPLIER:-1}
for _ in $(seq 50); do grep -q "cores on port" "$dir/udpd.log" && break; sleep 0.1; done
kill -0 "$upid" 2>/dev/null || { cat "$dir/udpd.log"; fail "tally-udpd did not start"; }
timeout $((60 * mult)) "$lg" --transport udp --host 127.0.0.1 --port "$port" --chunk-kib 1 \
	--keys 2 --chunks 2 --trial-s 0.05 --trials 1 --steps 2 --lo 200 --hi 5000 --json \
	>"$dir/out.json" 2>"$dir/err.txt" || { cat "$dir/err.txt"; fail "tally-linegen exited $?"; }
line=$(grep '^{' "$dir/out.json") || fail "no JSON line: $(cat "$dir/out.json")"
grep -q '"dut":"udp"' <<<"$line" || fail "not the udp DUT: $line"
grep -q '"ranks":32' <<<"$line" || fail "not 32 ranks: $line"
kill "$upid"; wait "$upid"; upid=
tot=$(grep '^{"rx_pkts"' "$dir/udpd.log") || { tail "$dir/udpd.log"; fail "no totals from tally-udpd"; }
num() { grep -o "\"$1\":[0-9]*" <<<"$tot" | head -1 | cut -d: -f2; }
[ "$(num joins)" -ge 32 ] || fail "joins $(num joins), want >= 32"
[ "$(num registers)" -ge 64 ] || fail "registers $(num registers), want >= 64 (32 ranks x 2 keys)"
[ "$(num completions)" -ge 1 ] || fail "no chunk completed"
[ "$(num results)" -ge 32 ] || fail "results $(num results)"
[ "$(num bad_crc)" = 0 ] || fail "the appliance saw bad CRCs: $(num bad_crc)"
echo "ok: joins $(num joins) registers $(num registers) completions $(num completions) results $(num results)"
