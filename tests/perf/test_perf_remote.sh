#!/usr/bin/env bash
# tests/perf/test_perf_remote.sh TALLY_PERF TALLY_WORKER TALLY_UDPD FAKE_SSH — `tally-perf line`
# and `tally-perf allreduce` against real NICs and remote hosts, as far as this box allows
# (no NIC, no second host): the options are validated (bad ones exit 2 with a clear message),
# --dry-run prints the command lines a run would start (real PCI ports through EAL -a, ssh to
# the hosts), and the remote path runs for real with an ssh stand-in that runs the line
# locally, against a running software appliance (tally-udpd).
set -u
perf=$1 worker=$2 udpd=$3 fake_ssh=$4
fail() { echo "FAIL: $*" >&2; exit 1; }
expect() { # expect RC ARGS...: run tally-perf line ARGS, check the exit status
	local want=$1 rc
	shift
	LAST=$("$perf" line "$@" 2>&1); rc=$?
	[ "$rc" = "$want" ] || fail "tally-perf line $* exited $rc, want $want: $LAST"
	echo "ok: line $* -> $rc"
}
has() { grep -q -F -- "$1" <<<"$LAST" || fail "output lacks '$1': $LAST"; }
lacks() { ! grep -q -F -- "$1" <<<"$LAST" || fail "output has '$1': $LAST"; }

# --- bad arguments: exit 2 and say what is wrong
expect 2 --appliance-port 3b:00.0x --appliance-ip 10.0.0.1/24
has "bad value '3b:00.0x' for --appliance-port"
expect 2 --appliance-port 0000:3b:00.0
has "needs --appliance-ip"
expect 2 --appliance-port 0000:3b:00.0 --appliance-port 0000:3b:00.1 --appliance-ip 10.0.0.1/24
has "one A.B.C.D/LEN per port (2 port(s))"
expect 2 --appliance-port 0000:3b:00.0 --appliance-ip 10.0.0.1
has "--appliance-ip '10.0.0.1' is not A.B.C.D/LEN"
expect 2 --appliance-port 0000:3b:00.0 --appliance-ip 10.0.0.300/24
expect 2 --appliance 10.0.0.1
has "HOST:PORT"
expect 2 --appliance 10.0.0.1:70000
expect 2 --appliance :9170
expect 2 --appliance 10.0.0.1:9170 --appliance-port 0000:3b:00.0 --appliance-ip 10.0.0.1/24
has "exclude each other"
expect 2 --appliance 10.0.0.1:9170 --hosts a,,b
has "no empty item"
expect 2 --appliance 10.0.0.1:9170 --hosts -oProxyCommand=x
has "is not a host name"
expect 2 --appliance 10.0.0.1:9170 --hosts a,b --workers 3
has "one worker per host"
expect 2 --remote-cmd ssh
has "are for --hosts"
expect 2 --hosts a,b
has "memif workers only"
expect 2 --appliance 10.0.0.1:9170 --workers 2 --worker-port 0000:af:00.0
has "one PCI address per worker"
expect 2 --appliance 10.0.0.1:9170 --hosts a --worker-port 0000:af:00.0
has "need --worker-ip"
expect 2 --appliance 10.0.0.1:9170 --hosts a --worker-port 0000:af:00.0 --worker-ip 10.0.0.2
expect 2 --appliance h:9170 --hosts a --worker-port 0000:af:00.0 --worker-ip 10.0.0.2/24
has "IPv4 address"
expect 2 --appliance 10.0.0.1:9170 --worker-ip 10.0.0.2/24
has "for DPDK workers"
expect 2 --worker-args "--rank 3"
has "--rank is set by tally-perf line"
expect 2 --worker-args "--gso --window 256"
has "for kernel UDP workers"
expect 2 --queues 2
has "--queues is for --appliance-port"
expect 2 --worker-transport tcp
expect 2 --appliance 10.0.0.1:9170 --worker-transport dpdk
expect 2 --workers 17
expect 2 --chunk 10
expect 2 --bogus
has "unknown option '--bogus'"
expect 2 stray
expect 2 --hosts
has "option --hosts needs a value"

# --- dry run: real ports, remote hosts
expect 0 --dry-run --appliance-port 0000:3b:00.0 --appliance-ip 10.0.0.1/24 --queues 4 \
	--eal "-l 0,2-5 -n 4" --hosts h1,root@h2 --worker-port 0000:af:00.0 \
	--worker-ip 10.0.0.2/24,10.0.0.3/24
tallyd=$(grep -c -- '/tallyd --port 0000:3b:00.0 --ip 10.0.0.1/24 --queues 4 ' <<<"$LAST")
[ "$tallyd" = 2 ] || fail "want 2 tallyd lines (forward, aggregation): $LAST"
has " --io-forward -- -a 0000:3b:00.0 --file-prefix "
has " -l 0,2-5 -n 4"
lacks "--no-huge --no-pci -m 2048"
n=$(grep -c "^ssh -o BatchMode=yes h1 'tally-worker --transport dpdk --dpdk '\\\\''-a 0000:af:00.0 " <<<"$LAST")
[ "$n" = 2 ] || fail "want 2 worker lines for h1: $LAST"
has "ssh -o BatchMode=yes root@h2 'tally-worker"
has "--local-ip 10.0.0.3/24 --host 10.0.0.1 --port 9170 --rank 1 --world 2"
has "--blast-cores 4 --blast'"

# --- dry run: a running appliance, UDP workers with GSO (fine over a NIC)
expect 0 --dry-run --appliance 10.0.0.9:9300 --appliance-cores 2 --hosts a,b,c \
	--worker-args "--gso --window 256" --remote-cmd "ssh -p 2222"
has "# forward run: none"
lacks "/tallyd "
[ "$(grep -c "^ssh -p 2222 [abc] 'tally-worker --transport udp --host 10.0.0.9 --port 9300 " <<<"$LAST")" = 3 ] ||
	fail "want 3 udp worker lines: $LAST"
has "--blast-cores 2 --gso --window 256'"

# --- the default (one box, memif) still builds its own commands
expect 0 --dry-run --workers 2
[ "$(grep -c -- '--transport dpdk --dpdk .*net_memif0,role=client' <<<"$LAST")" = 4 ] ||
	fail "want 4 memif worker lines: $LAST"
has "--linger"

# --- remote hosts for real: the ssh stand-in runs the workers here, against tally-udpd
port=$(( 20000 + $$ % 20000 ))
log=$(mktemp /tmp/perfline.XXXXXX)
"$udpd" --addr 127.0.0.1 --port $port --cores 2 --open --mem 64M --ctl-socket "$log.sock" >"$log.udpd" 2>&1 &
upid=$!
trap 'kill $upid 2>/dev/null; wait $upid 2>/dev/null; rm -f "$log" "$log.udpd" "$log.sock"' EXIT
sleep 0.3
kill -0 $upid 2>/dev/null || { cat "$log.udpd"; fail "tally-udpd did not start"; }
LAST=$(FAKE_SSH_LOG=$log "$perf" line --appliance 127.0.0.1:$port --appliance-cores 2 \
	--hosts hostA,hostB --remote-cmd "$fake_ssh" --remote-worker "$worker" --seconds 1 \
	--bytes 1M --json 2>&1) || fail "remote run failed: $LAST"
echo "$LAST"
has '"transport":"external","worker_transport":"udp","remote_hosts":2,"workers":2,"cores":2'
has '"forward_gbps":null'
grep -q '"gbps":[0-9]*\.[0-9]*[1-9]' <<<"$LAST" || grep -q '"gbps":[1-9]' <<<"$LAST" ||
	fail "no goodput measured: $LAST"
[ "$(sort "$log" | tr '\n' ' ')" = "hostA hostB " ] || fail "hosts reached: $(cat "$log")"

# --- allreduce on real hosts
ar() { LAST=$("$perf" allreduce "$@" 2>&1); RC=$?; }
ar --hosts a,b
[ $RC = 2 ] && has "needs --appliance HOST:PORT" || fail "tally without appliance: $RC $LAST"
ar --hosts a,b --workers 3 --impl gloo
[ $RC = 2 ] && has "one rank per host" || fail "workers vs hosts: $RC $LAST"
ar --hosts a,b --emulate --impl gloo
[ $RC = 2 ] && has "not with --hosts" || fail "emulate with hosts: $RC $LAST"
ar --appliance 10.0.0.1:9170
[ $RC = 2 ] && has "are for --hosts" || fail "appliance without hosts: $RC $LAST"
ar --hosts a,b --appliance-port 0000:3b:00.0 --appliance-ip 10.0.0.1/33
[ $RC = 2 ] && has "is not A.B.C.D/LEN" || fail "bad appliance ip: $RC $LAST"
ar --hosts a,b --appliance-port 0000:3b:00.0 --appliance-ip 10.0.0.1/24 --appliance 1.2.3.4:5
[ $RC = 2 ] && has "exclude each other" || fail "both appliance kinds: $RC $LAST"
ar --hosts u@a,b --impl mpi
[ $RC = 2 ] && has "plain host names" || fail "mpi user@host: $RC $LAST"
ar --dry-run --hosts h1,h2 --appliance-port 0000:3b:00.0,0000:3b:00.1 \
	--appliance-ip 10.0.0.1/24,10.0.1.1/24 --iface ens1f0 --remote-bin /opt/tally --size 64M
[ $RC = 0 ] || fail "allreduce dry run: $RC $LAST"
has "/tallyd --port 0000:3b:00.1 --ip 10.0.1.1/24 "
has " -- -a 0000:3b:00.0 --file-prefix "
lacks "--no-huge"
has "ssh -o BatchMode=yes h2 '/opt/tally/perf/tally-worker --host 10.0.1.1 --port 9170 --job 8 "
has "-H h1:1,h2:1 --map-by node --mca btl tcp,self --mca btl_tcp_if_include ens1f0"
has "--mca plm_rsh_agent 'ssh -o BatchMode=yes'"
has "ssh -o BatchMode=yes h1 'env OMP_NUM_THREADS=1 GLOO_SOCKET_IFNAME=ens1f0 /usr/bin/python3 "
lacks "ip netns"
: >"$log"
LAST=$(FAKE_SSH_LOG=$log "$perf" allreduce --hosts hostA,hostB --remote-cmd "$fake_ssh" \
	--appliance 127.0.0.1:$port --impl tally --size 1M --rounds 2 --json 2>&1) ||
	fail "allreduce on 'remote' hosts failed: $LAST"
echo "$LAST"
has '"impl": "tally", "workers": 2, "bytes": 1048576, "rounds": 2'
has '"verified": true'
[ "$(sort "$log" | tr '\n' ' ')" = "hostA hostB " ] || fail "hosts reached: $(cat "$log")"
echo PASS
