#!/bin/bash
# perf/linegen_memif.sh [tally-linegen options]: one tallyd (main lcore CPU 0, one datapath
# lcore CPU 1) on net_memif and tally-linegen (one lcore on CPU $GEN_CPU, default 1; 32
# ranks) against it: the NDR/PDR search as JSON lines, load average before and after,
# tallyd's totals (loops, busy_loops, drop reasons). Run from the source root after building
# appliance/tallyd and perf/tally-linegen in build/. Needs root (DPDK, /var/run/dpdk).
cd "$(dirname "$0")/.."
d=$(mktemp -d /tmp/tly-lg.XXXXXX); pf=tlylg$$
timeout 400 build/appliance/tallyd --port net_memif0,role=server,socket=$d/ma0.sock,socket-abstract=no,bsize=9216,id=0 --ip 10.99.1.1/24 --ctl-socket $d/ctl.sock --idle-backoff off --mem 1G --open-admission -- --no-huge --no-pci -m 2048 --lcores 0@0,1@1 --file-prefix ${pf}a > $d/tallyd.log 2>&1 &
tpid=$!
for i in $(seq 100); do grep -q ready $d/tallyd.log && break; sleep 0.2; done
uptime
timeout 300 build/perf/tally-linegen --transport dpdk --eal "--no-huge --no-pci -m 512 --file-prefix ${pf}w --lcores 0@${GEN_CPU:-1} --vdev net_memif0,role=client,socket=$d/ma0.sock,socket-abstract=no,bsize=9216,id=0" --local-ip 10.99.1.2/24 --host 10.99.1.1 --port 9170 "$@" --json
echo rc=$?
uptime
kill $tpid; wait $tpid
grep "totals" $d/tallyd.log | cut -c1-300; grep -o "loops=[0-9]*\|busy_loops=[0-9]*\|stale_round=[0-9]*\|too_early=[0-9]*\|duplicates=[0-9]*\|completions=[0-9]*\|resends=[0-9]*" $d/tallyd.log | sort -u
rm -rf $d
