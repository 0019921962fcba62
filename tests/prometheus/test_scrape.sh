#!/usr/bin/env bash
# tests/prometheus/test_scrape.sh BUILDDIR — tally-exporter against a real tally-udpd on
# loopback (no root): flag errors name the flag; a scrape after a verified worker run passes
# prom_lint.py and `promtool check metrics`, and its pushes equal the appliance's own stats
# JSON; the shipped rules pass `promtool check rules`; a silent client does not hold up
# other scrapers; connections over the cap get 503; unknown paths 404; an appliance that
# went away reads tally_up 0. Exit 0 pass, 1 fail, 77 skip (no promtool to be had).
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=${TALLY_SRC:-$here/../..}
bin=${1:?usage: test_scrape.sh BUILDDIR}
# shellcheck source=lib.sh
. "$here/lib.sh"
EXP=$bin/control/tally-exporter
[ -x "$EXP" ] || pt_fail "no tally-exporter at $EXP"

# 1. flags: each error names its flag, exit status 2
check_flag() {
	local want=$1; shift
	out=$("$EXP" "$@" 2>&1); rc=$?
	[ $rc = 2 ] && grep -q -- "$want" <<<"$out" || pt_fail "'$*': rc $rc, '$out' (want $want)"
}
check_flag --listen --listen nohost
check_flag --listen --listen 127.0.0.1:0
check_flag --listen --listen localhost:9471
check_flag --listen --listen 127.0.0.1:99999
check_flag --cache-ms --cache-ms -5
check_flag --cache-ms --cache-ms 70000
check_flag --cache-ms --cache-ms=abc
check_flag --socket --socket ""
check_flag --socket --socket "$(printf 'x%.0s' $(seq 200))"
check_flag --max-conns --max-conns 0
check_flag --bogus --bogus 1
"$EXP" --help | grep -q -- "--cache-ms" || pt_fail "--help"
pt_log "flag errors name their flag"

# 2. an appliance, a verified run, a scrape
uport=$(pt_free_port 2 udp) || pt_fail "no free UDP ports"
hport=$(pt_free_port 1 tcp) || pt_fail "no free TCP port"
sock=$PT_TMP/ctl.sock
pt_udpd "$bin" "$uport" 2 "$sock"
for r in 0 1; do
	pt_bg "worker$r" "$bin/perf/tally-worker" --host 127.0.0.1 --port "$uport" --job 7 \
		--token 0x5eed --rank $r --world 2 --bytes 2M --keys 4 --rounds 3 --seed 11 --json
	wpids+=("$PT_LAST_PID")
done
for p in "${wpids[@]}"; do wait "$p" || pt_fail "worker failed"; done
pt_bg exporter "$EXP" --listen "127.0.0.1:$hport" --socket "$sock" --appliance udpd-test \
	--cache-ms 1000 --max-conns 4 --http-timeout-ms 1500
exp_pid=$PT_LAST_PID
url=http://127.0.0.1:$hport/metrics
pt_wait_http "$url" 10 "$exp_pid"
$PY -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' \
	"$url" >"$PT_TMP/scrape.txt" || pt_fail "scrape"
"$bin/control/tallyctl" --socket "$sock" --json stats >"$PT_TMP/stats.json" || pt_fail "tallyctl stats"
# The job ended (every rank said BYE) before the scrape, so it has no per-job series
# (tally_stuck_chunks); the lifecycle counter shows it instead.
$PY "$here/prom_lint.py" "$PT_TMP/scrape.txt" --expect tally_up tally_pushes_total \
	tally_drops_total tally_frame_drops_total tally_memory_used_bytes \
	tally_memory_budget_bytes tally_results_total tally_duplicates_total \
	tally_quorum_completions_total tally_deadline_completions_total tally_jobs \
	tally_jobs_freed_bye_total tally_info || pt_fail "prom_lint"
$PY - "$PT_TMP/scrape.txt" "$PT_TMP/stats.json" <<'PY' || pt_fail "scrape does not match the stats JSON"
import json, re, sys
text = open(sys.argv[1]).read()
stats = json.load(open(sys.argv[2]))
def total(name):
    return sum(float(v) for v in re.findall(r"^%s\{[^}]*\} (\S+)$" % name, text, re.M))
assert "tally_up{appliance=\"udpd-test\"} 1" in text, "tally_up is not 1"
t = stats["totals"]
# every number of the totals is a counter of the scrape (generic mapping), same sum; the
# appliance's own polling (receive calls, spins) goes on while idle between the scrape and
# the stats read after it: there the scrape may only be behind
polling = {"udp_rx_calls", "udp_spins", "udp_spin_hits", "loops", "idle_sleeps"}
for k, v in t.items():
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        got = total(f"tally_{k}_total")
        if k in polling:
            assert 0 <= got <= v, f"{k}: scrape {got}, stats read after it {v}"
        else:
            assert got == v, f"{k}: scrape {got}, stats {v}"
for blk in ("drops", "frame_drops"):
    for reason, v in t[blk].items():
        got = sum(float(x) for x in re.findall(r'^tally_%s_total\{[^}]*reason="%s"\} (\S+)$' % (blk, reason), text, re.M))
        assert got == v, f"{blk}/{reason}: scrape {got}, stats {v}"
assert t["pushes"] > 0
print(f"scrape matches the stats JSON: pushes={t['pushes']}, {len(t)} fields")
PY
pt_need_pkg promtool prometheus
promtool check metrics <"$PT_TMP/scrape.txt" || pt_fail "promtool check metrics"
promtool check rules "$src/deploy/prometheus/tally-alerts.yml" || pt_fail "promtool check rules"
promtool check config "$src/deploy/prometheus/prometheus.yml" >/dev/null || pt_fail "promtool check config"
pt_log "promtool: metrics, rules and config pass"

# 3. the cache: ten scrapers within --cache-ms cost the appliance at most two queries
$PY - "$url" <<'PY' || pt_fail "cache"
import re, sys, urllib.request
def refreshes():
    t = urllib.request.urlopen(sys.argv[1], timeout=5).read().decode()
    return int(re.search(r"^tally_exporter_refreshes_total\{[^}]*\} (\d+)$", t, re.M).group(1))
r0 = refreshes()
for _ in range(10):
    r = refreshes()
assert r - r0 <= 1, f"10 scrapes, {r - r0} refreshes"
print(f"cache: 10 scrapes, {r - r0} control refreshes")
PY

# 4. HTTP limits: silent clients hold a slot until --http-timeout-ms, never the others
$PY - "$hport" <<'PY' || pt_fail "HTTP limits"
import socket, sys, time, urllib.error, urllib.request
port = int(sys.argv[1])
url = f"http://127.0.0.1:{port}"
silent = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
t0 = time.time()
body = urllib.request.urlopen(url + "/metrics", timeout=5).read()   # the 4th slot
assert b"tally_up" in body and time.time() - t0 < 1.0, "a silent client held up a scrape"
hog = socket.create_connection(("127.0.0.1", port))                 # takes the 4th slot
time.sleep(0.2)
extra = socket.create_connection(("127.0.0.1", port))               # over the cap
extra.settimeout(3)
assert extra.recv(64).startswith(b"HTTP/1.0 503"), "over the cap: no 503"
time.sleep(1.8)                                                     # the timeout frees the slots
for s in silent + [hog]:
    s.settimeout(1)
    assert s.recv(16) == b"", "a silent connection was not closed after its deadline"
try:
    urllib.request.urlopen(url + "/nope", timeout=5)
    sys.exit("/nope: no error")
except urllib.error.HTTPError as e:
    assert e.code == 404, f"/nope: {e.code}"
body = urllib.request.urlopen(url + "/metrics", timeout=5).read().decode()
assert "tally_exporter_http_timeouts_total{appliance=\"udpd-test\"} 4\n" in body, "timeouts not counted"
print("HTTP limits hold: silent clients time out, 503 over the cap, 404 elsewhere")
PY

# 5. the appliance goes away: the exporter stays up and says tally_up 0
kill -TERM "$PT_UDPD_PID"; wait "$PT_UDPD_PID" 2>/dev/null
sleep 1.1
$PY -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' \
	"$url" >"$PT_TMP/down.txt" || pt_fail "scrape with the appliance down"
grep -q '^tally_up{appliance="udpd-test"} 0$' "$PT_TMP/down.txt" || pt_fail "tally_up is not 0 with the appliance down"
"$EXP" --once --socket "$sock" >/dev/null; [ $? = 1 ] || pt_fail "--once with no appliance: want exit 1"
pt_log PASS
