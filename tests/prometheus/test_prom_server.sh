#!/usr/bin/env bash
# tests/prometheus/test_prom_server.sh BUILDDIR — Debian's real prometheus server scraping
# tally-exporter every second (rules evaluated every second) in front of tally-udpd on
# loopback (no root):
#  1. two tally-workers push a verified run; PromQL over prometheus's HTTP API gives
#     pushes = the workers' own counts = the appliance's stats JSON, up == 1, tally_up == 1;
#  2. a second job's rank 1 is killed with SIGKILL mid-run: TallyJobStuckOnRank (a test copy
#     of deploy/prometheus/tally-alerts.yml with short thresholds and `for:`) fires for that
#     job and rank.
# TALLY_SCREENSHOT=1: perf/prom_screenshot.sh saves the goodput graph (PNG) under
# $TALLY_SCREENSHOT_DIR (default tally-perf-report). Only 127.0.0.1 ports picked free; every
# process and the temporary directory are cleaned up. Exit 0 pass, 1 fail, 77 skip.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=${TALLY_SRC:-$here/../..}
bin=${1:?usage: test_prom_server.sh BUILDDIR}
# shellcheck source=lib.sh
. "$here/lib.sh"
t_start=$(date +%s)
pt_need_pkg prometheus prometheus
for f in control/tally-exporter appliance/udpd/tally-udpd perf/tally-worker control/tallyctl; do
	[ -x "$bin/$f" ] || pt_fail "not built: $bin/$f"
done

uport=$(pt_free_port 2 udp) && eport=$(pt_free_port 1 tcp) && pport=$(pt_free_port 1 tcp) ||
	pt_fail "no free ports"
[ "$eport" != "$pport" ] || pport=$((pport + 1))
sock=$PT_TMP/ctl.sock
pt_udpd "$bin" "$uport" 2 "$sock"
pt_bg exporter "$bin/control/tally-exporter" --listen "127.0.0.1:$eport" --socket "$sock" \
	--appliance itest --cache-ms 500 --stuck-threshold-ms 500

# The shipped rules with test thresholds: every `for:` 1s, stuck age above 2 s.
$PY - "$src/deploy/prometheus/tally-alerts.yml" "$PT_TMP/rules.yml" <<'PY' || pt_fail "rules copy"
import re, sys
text = open(sys.argv[1]).read()
text = re.sub(r"(\n\s+for: )\S+", r"\g<1>1s", text)
text, n = re.subn(r"(tally_stuck_rank_max_age_seconds\)) > \d+", r"\1 > 2", text)
assert n == 1, "stuck rule not found"
open(sys.argv[2], "w").write(text)
PY
cat >"$PT_TMP/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 900ms
  evaluation_interval: 1s
rule_files: ['$PT_TMP/rules.yml']
scrape_configs:
  - job_name: tally
    static_configs:
      - targets: ['127.0.0.1:$eport']
EOF
pt_bg prometheus prometheus --config.file="$PT_TMP/prometheus.yml" \
	--storage.tsdb.path="$PT_TMP/tsdb" --web.listen-address="127.0.0.1:$pport" \
	--log.level=warn
prom_pid=$PT_LAST_PID
api=http://127.0.0.1:$pport
pt_wait_http "$api/-/ready" 30 "$prom_pid"
pt_log "prometheus on 127.0.0.1:$pport, exporter on :$eport, tally-udpd on :$uport"

# q EXPR: the value of an instant query's only (or summed) result, "none" when empty.
q() {
	$PY - "$api" "$1" <<'PY'
import json, sys, urllib.parse, urllib.request
u = sys.argv[1] + "/api/v1/query?" + urllib.parse.urlencode({"query": sys.argv[2]})
r = json.load(urllib.request.urlopen(u, timeout=5))
res = r["data"]["result"]
print(sum(float(x["value"][1]) for x in res) if res else "none")
PY
}
# wait_q EXPR WANT SECONDS: until q EXPR prints WANT.
wait_q() {
	local deadline=$(( $(date +%s) + $3 )) v=
	while [ "$(date +%s)" -lt $deadline ]; do
		v=$(q "$1") && [ "$v" = "$2" ] && return 0
		sleep 0.5
	done
	pt_fail "PromQL '$1' = '$v', want '$2'"
}

# 1. a verified run; what prometheus saw = what the workers sent = the appliance's stats
wpids=()
for r in 0 1; do
	pt_bg "w$r" "$bin/perf/tally-worker" --host 127.0.0.1 --port "$uport" --job 7 --token 0x5eed \
		--rank $r --world 2 --bytes 4M --keys 8 --rounds 5000 --seconds 6 --seed 3 --json
	wpids+=("$PT_LAST_PID")
done
for p in "${wpids[@]}"; do wait "$p" || pt_fail "a worker of job 7 failed"; done
sent=$($PY - "$PT_TMP" <<'PY'
import json, sys
tot = 0
for r in (0, 1):
    o = json.loads([l for l in open(f"{sys.argv[1]}/w{r}.log") if l.startswith("{")][-1])
    assert o["ok"] and not o["mismatches"], o["error"]
    tot += o["pushes"]
print(tot)
PY
) || pt_fail "workers' results"
app=$("$bin/control/tallyctl" --socket "$sock" --json stats |
	$PY -c 'import json, sys; print(json.load(sys.stdin)["totals"]["pushes"])') || pt_fail "tallyctl stats"
[ "$sent" = "$app" ] || pt_fail "workers pushed $sent, the appliance counted $app"
wait_q 'sum(tally_pushes_total{job="tally",appliance="itest"})' "$sent.0" 15
wait_q 'up{job="tally"}' "1.0" 5
wait_q 'tally_up{appliance="itest"}' "1.0" 5
gp=$(q 'max_over_time((sum(rate(tally_push_bytes_total[3s])) * 8)[30s:1s])')
pt_log "PromQL: pushes $sent (workers) = $app (appliance) = prometheus; up 1, tally_up 1; peak goodput $gp bit/s"

# 2. fault: kill -9 rank 1 of job 8 mid-run; the stuck-rank alert fires for job 8, rank 1
for r in 0 1; do
	pt_bg "f$r" "$bin/perf/tally-worker" --host 127.0.0.1 --port "$uport" --job 8 --token 0x5eed \
		--rank $r --world 2 --bytes 1M --keys 4 --rounds 1000000 --seconds 60 --no-barrier \
		--give-up-ms 90000 --seed 5 --json
	fpid[$r]=$PT_LAST_PID
done
sleep 1.5
kill -0 "${fpid[1]}" 2>/dev/null || pt_fail "job 8's rank 1 ended before the fault"
kill -KILL "${fpid[1]}"
pt_log "killed job 8's rank 1 (pid ${fpid[1]}) with SIGKILL"
deadline=$(( $(date +%s) + 40 ))
while :; do
	fired=$($PY - "$api" <<'PY'
import json, sys, urllib.request
a = json.load(urllib.request.urlopen(sys.argv[1] + "/api/v1/alerts", timeout=5))["data"]["alerts"]
print(" ".join(f'{x["labels"]["alertname"]}/{x["state"]}/job_id={x["labels"].get("job_id")}/rank={x["labels"].get("rank")}'
               for x in a))
PY
)
	case " $fired " in *" TallyJobStuckOnRank/firing/job_id=8/rank=1 "*) break ;; esac
	[ "$(date +%s)" -lt $deadline ] || pt_fail "TallyJobStuckOnRank did not fire (alerts: $fired)"
	sleep 1
done
pt_log "alerts: $fired"
case " $fired " in *"rank=0 "*) pt_fail "an alert blamed rank 0" ;; esac
age=$(q 'max(tally_stuck_rank_max_age_seconds{job_id="8",rank="1"})')
pt_log "stuck age of job 8 on rank 1: $age s"

if [ "${TALLY_SCREENSHOT:-0}" = 1 ]; then
	"$src/perf/prom_screenshot.sh" "$api" "${TALLY_SCREENSHOT_DIR:-tally-perf-report}" ||
		pt_fail "screenshot"
fi
pt_log "PASS in $(( $(date +%s) - t_start )) s"
