#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# auth_replay.sh --bin BUILDDIR — recordings of an earlier run of a keyed job replayed into
# the next run of the same job (same id, token, key file), issue 33 (suite 'security').
# tally-udpd on loopback; auth_replay.py records every signed packet of job 5 on lo during
#  run 1 (two ranks, 20 rounds) and run 1b (rank 1 killed -9: rank 0 gets a signed ERROR
#  rank_silent), then replays them:
#  A. after `tallyctl evict` + `job-add` with the same key: the recorded JOINs first (before
#     the real ranks start: they bind the free ranks), then the real ranks run (they take
#     the ranks: unconfirmed_rebinds), and during their run every recorded packet again:
#     PUSH, PULL, REGISTER, BYE to the appliance (refused bad_mac), JOIN and PING (refused
#     replay), RESULT, HELD, JOIN_OK, REGISTER acks, ERROR rank_silent to the ranks from
#     the appliance's address (refused bad_mac by the workers). The run is bit-exact and
#     every replayed packet is counted, exactly.
#  B. the same after kill -9 of the appliance and a fresh one (new boot, new run nonce).
# Before issue 33 the replayed pushes were summed (wrong sums), the ERROR rank_silent
# failed the healthy job, and the JOINs bound the ranks (rank_taken).
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/faults/udpd_bins.sh
. "$here/../faults/udpd_bins.sh"
[ -x "$CTL" ] || { echo "no tallyctl under $bin" >&2; exit 1; }
if [ "$(id -u)" != 0 ]; then
	echo "SKIP: auth_replay needs root (a packet socket on lo to record, a raw socket to spoof)"
	exit 77
fi
udpd_scratch arpl
port=$((20000 + ($$ % 20000)))
mult=${TALLY_TIMEOUT_MULTIPLIER:-1}
scaled() { python3 -c "import math; print(math.ceil($1 * float('$mult')))"; }
python3 -c "import os; print(os.urandom(32).hex())" >"$tmp/key"
chmod 600 "$tmp/key"
RP=(python3 "$here/auth_replay.py" --port $port --cores 2 --job 5)

start_app() {
	rm -f "$tmp/$1.sock"
	"$UDPD" --addr 127.0.0.1 --port $port --cores 2 --max-jobs 4 --mem 64M --det-pool 4M \
		--dead-rank-timeout-ms 1000 --ctl-socket "$tmp/$1.sock" 2>"$tmp/$1.err" &
	app=$!
	for _ in $(seq 100); do [ -S "$tmp/$1.sock" ] && break; sleep 0.1; done
	[ -S "$tmp/$1.sock" ] || fail "tally-udpd $1 did not start"
	C=("$CTL" --socket "$tmp/$1.sock")
	"${C[@]}" job-add 5 --token 77 --world-size 2 --key-file "$tmp/key" >/dev/null ||
		fail "job-add with the key failed on $1"
}
W=("$WORKER" --host 127.0.0.1 --port $port --job 5 --token 77 --world 2 --keys 4
   --key-file "$tmp/key" --deterministic --json --give-up-ms $(scaled 30000))
report() { python3 -c "
import json,sys
d=[json.loads(l) for l in open(sys.argv[1]) if l.startswith('{\"mode\"')][-1]
print(eval(sys.argv[2]))" "$@"; }
stat() { jget "$1" "d['totals']$2"; }

# run 1 and 1b, recorded
start_app app1
"${RP[@]}" record --out "$tmp/rec.json" 2>"$tmp/rec.err" & rec=$!
for _ in $(seq 100); do [ -e "$tmp/rec.json.ready" ] && break; sleep 0.1; done
[ -e "$tmp/rec.json.ready" ] || fail "the recorder did not start: $(cat "$tmp/rec.err")"
"${W[@]}" --rank 0 --bytes 64K --rounds 20 >"$tmp/r0.json" 2>"$tmp/r0.err" & w0=$!
"${W[@]}" --rank 1 --bytes 64K --rounds 20 >"$tmp/r1.json" 2>"$tmp/r1.err" & w1=$!
wait $w0 || fail "run 1: rank 0 failed"
wait $w1 || fail "run 1: rank 1 failed"
"${W[@]}" --rank 0 --bytes 64K --rounds 100000 --events >"$tmp/s0.json" 2>"$tmp/s0.err" & w0=$!
"${W[@]}" --rank 1 --bytes 64K --rounds 100000 >"$tmp/s1.json" 2>"$tmp/s1.err" & w1=$!
for _ in $(seq $(scaled 100)); do
	[ "$(grep -c '"ev":"round"' "$tmp/s0.err")" -ge 3 ] && break
	sleep 0.1
done
kill -9 $w1
wait $w1 2>/dev/null
timeout $(scaled 20) tail --pid=$w0 -f /dev/null
wait $w0 && fail "run 1b: rank 0 passed with rank 1 killed"
grep -q "rank 1 silent" "$tmp/s0.json" "$tmp/s0.err" || fail "run 1b: rank 0 was not told rank_silent: $(tail -2 "$tmp/s0.err")"
sleep 0.3
kill -TERM $rec
wait $rec || fail "recorder failed: $(cat "$tmp/rec.err")"
python3 - "$tmp/rec.json" <<'EOF' || fail "recording incomplete"
import base64, collections, json, sys
recs = json.load(open(sys.argv[1]))
n = collections.Counter((r["to_app"], base64.b64decode(r["data"])[5]) for r in recs)
# ERROR rank_silent (TALLY_R_RANK_SILENT = 30; the reason is header byte 41)
silent = [r for r in recs if not r["to_app"] and base64.b64decode(r["data"])[5] == 7 and
          base64.b64decode(r["data"])[41] == 30]
print(f"recorded {len(recs)} signed packets: "
      + ", ".join(f"{'->app' if k[0] else '->wk'} op{k[1]}: {v}" for k, v in sorted(n.items())))
print(f"recorded ERROR rank_silent: {len(silent)}")
assert n[(True, 1)] and n[(True, 4)] and n[(False, 5)] and n[(False, 2)] and silent, n
EOF

# replay_into NAME: the JOINs first, then a run of both ranks with everything replayed
replay_into() {
	local name=$1 pre
	"${C[@]}" --json stats >"$tmp/$name.pre.json" || fail "tallyctl stats"
	"${RP[@]}" replay --in "$tmp/rec.json" --ops join >"$tmp/$name.joins.json" ||
		fail "$name: replaying the JOINs failed"
	sleep 0.2
	"${C[@]}" --json workers >"$tmp/$name.w0.json"
	echo "$name: ranks bound by the replayed JOINs: $(jget "$tmp/$name.w0.json" "len([w for w in d if w['job_id'] == 5])")"
	# long enough to outlive the replay (a Python loop, a few seconds) however fast the
	# ranks' rounds are: a time, not a round count (8000 rounds ended first once the
	# transport's busy poll was on by default)
	local secs
	secs=$(scaled 12)
	"${W[@]}" --rank 0 --bytes 64K --rounds 10000000 --seconds "$secs" >"$tmp/$name.0.json" \
		2>"$tmp/$name.0.err" & w0=$!
	"${W[@]}" --rank 1 --bytes 64K --rounds 10000000 --seconds "$secs" >"$tmp/$name.1.json" \
		2>"$tmp/$name.1.err" & w1=$!
	local ok=0
	for _ in $(seq $(scaled 100)); do
		"${C[@]}" --json workers >"$tmp/$name.w.json" 2>/dev/null &&
			[ "$(jget "$tmp/$name.w.json" "len([w for w in d if w['job_id'] == 5 and w['addr'].startswith('127.') and w['last_heard_ms'] < 200])")" -ge 4 ] &&
			{ ok=1; break; }
		sleep 0.05
	done
	[ $ok = 1 ] || fail "$name: the real ranks did not bind: $(tail -1 "$tmp/$name.0.err")"
	sleep 0.2
	"${C[@]}" --json workers >"$tmp/$name.w.json"
	"${C[@]}" --json stats >"$tmp/$name.mid.json" || fail "tallyctl stats"
	"${RP[@]}" replay --in "$tmp/rec.json" --workers "$tmp/$name.w.json" \
		>"$tmp/$name.replay.json" 2>"$tmp/$name.replay.err" || fail "$name: replay failed"
	kill -0 $w0 2>/dev/null && kill -0 $w1 2>/dev/null ||
		fail "$name: a rank ended before the replay did (run too short for the check)"
	wait $w0 || fail "$name: rank 0 failed under replay: $(tail -1 "$tmp/$name.0.err")"
	wait $w1 || fail "$name: rank 1 failed under replay: $(tail -1 "$tmp/$name.1.err")"
	"${C[@]}" --json stats >"$tmp/$name.post.json" || fail "tallyctl stats"
	python3 - "$tmp" "$name" <<'EOF' || fail "$name: a replayed packet was not refused and counted"
import json, sys
tmp, name = sys.argv[1], sys.argv[2]
ld = lambda f: json.load(open(f"{tmp}/{name}.{f}.json"))
pre, mid, post, rp = ld("pre")["totals"], ld("mid")["totals"], ld("post")["totals"], ld("replay")
drop = lambda s, r: s["drops"].get(r, 0)
sent = rp["sent"]
app = lambda *ops: sum(sent.get("app_" + o, 0) for o in ops)
print(f"{name}: replayed {sum(sent.values())} packets: {sent}")
ranks = [[json.loads(l) for l in open(f"{tmp}/{name}.{r}.json") if l.startswith('{"mode"')][-1]
         for r in (0, 1)]
for r, d in enumerate(ranks):
    print(f"{name}: rank {r}: ok {d['ok']} checked {d['checked']} mismatches {d['mismatches']} "
          f"drops {d['drop_reasons']}")
    assert d["ok"] and d["mismatches"] == 0 and d["checked"] > 0, f"rank {r} not bit-exact"
    # every appliance->worker replay to this rank refused: its tag (the session is
    # another: bad_mac), or first a length that does not fit the key (len_mismatch)
    dr = d["drop_reasons"]
    assert dr.get("bad_mac", 0) > 0, f"rank {r}: no bad_mac"
    assert dr.get("bad_mac", 0) + dr.get("len_mismatch", 0) == rp["to_rank"].get(str(r), 0), \
        f"rank {r}: bad_mac + len_mismatch {dr} != replayed to it {rp['to_rank'].get(str(r), 0)}"
bad = drop(post, "bad_mac") - drop(mid, "bad_mac")
rep = drop(post, "replay") - drop(mid, "replay")
print(f"{name}: appliance bad_mac +{bad}, replay +{rep}, unconfirmed_rebinds "
      f"{post['unconfirmed_rebinds'] - pre['unconfirmed_rebinds']}, pushes summed "
      f"{post['pushes'] - mid['pushes']}")
assert bad == app("push", "pull", "register", "bye", "gone", "held"), \
    f"bad_mac +{bad} != replayed data packets {app('push', 'pull', 'register', 'bye', 'gone', 'held')}"
assert rep == app("join", "ping"), f"replay +{rep} != replayed JOINs and PINGs {app('join', 'ping')}"
assert sent.get("wk_result", 0) > 0 and sent.get("app_push", 0) > 0, "nothing replayed"
assert sent.get("wk_error", 0) > 0, "no recorded ERROR (rank_silent) replayed"
# the recorded JOINs bound ranks before the run; the real ranks took them at once
assert post["unconfirmed_rebinds"] - pre["unconfirmed_rebinds"] >= 2, "JOINs did not bind"
assert drop(post, "rank_taken") == drop(pre, "rank_taken"), "a real rank got rank_taken"
EOF
}

# A. evict + job-add with the same key, same appliance
"${C[@]}" evict 5 >/dev/null || fail "evict"
"${C[@]}" job-add 5 --token 77 --world-size 2 --key-file "$tmp/key" >/dev/null || fail "job-add again"
replay_into evict
echo "ok 1 - after evict + job-add: recorded JOINs, pushes, PULLs, RESULTs, ERROR rank_silent refused and counted; sums bit-exact"

# B. kill -9 and a fresh appliance (new boot)
kill -9 $app
wait $app 2>/dev/null
start_app app2
replay_into restart
echo "ok 2 - after an appliance restart: the same, refused and counted; sums bit-exact"
