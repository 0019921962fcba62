#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# mpi_run.sh — libtally_mpi under a real mpirun (4 ranks, loopback) against real tally-udpd:
#   --mpi ompi|mpich  --lib libtally_mpi*.so  --test test_mpi_*  --udpd tally-udpd  CASE
# CASE: all        every case of test_mpi.c, 0 .. 64 MiB, through the appliance (every
#                  completion call, MPIX_C_FLOAT16 under MPICH); counters show every
#                  function taken over and the small / unsupported ones passed
#       det        TALLY_DETERMINISTIC=1: bit-exact against the rank-ordered sum (f32, and
#                  f16 under MPICH)
#       plain      the same binary without the preload: same results, no counters
#       absent     no appliance at start: default fails naming it; fallback passes, warns once
#       py         mpi4py + numpy sums; a PyTorch loop's parameters vs plain MPI (Open MPI)
#       kill1      the only appliance killed -9 mid-run: the error names it
#       kill       one of two appliances killed -9 mid-run: the job finishes (failover)
# Exit 0 pass, 1 fail, 77 skip (no mpirun of that MPI).
set -u
mpi= lib= test= udpd= case= src=$(dirname "$0")
while [ $# -gt 0 ]; do
	case "$1" in
	--mpi) mpi=$2; shift ;;
	--lib) lib=$2; shift ;;
	--test) test=$2; shift ;;
	--udpd) udpd=$2; shift ;;
	--src) src=$2; shift ;;
	*) case=$1 ;;
	esac
	shift
done
lib=$(realpath "$lib") test=$(realpath "$test") udpd=$(realpath "$udpd") src=$(realpath "$src")
mult=${TALLY_TIMEOUT_MULTIPLIER:-1}
T() { echo $(($1 * ${mult%.*})); }
if [ "$mpi" = ompi ]; then
	run=mpirun.openmpi
	command -v $run >/dev/null || { echo "SKIP: $run absent (openmpi-bin)"; exit 77; }
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
	# Open MPI passes only the variables named with -x to its ranks
	mpirun() {
		local xs=() v
		for v in LD_PRELOAD TALLY_APPLIANCES TALLY_MPI_THRESHOLD TALLY_MPI_STATS \
			 TALLY_DETERMINISTIC TALLY_MPI_FALLBACK TALLY_CONNECT_TIMEOUT_MS \
			 TALLY_OP_TIMEOUT_MS; do
			[ -n "${!v+x}" ] && xs+=(-x "$v")
		done
		timeout "$(T 300)" $run --oversubscribe -np 4 --mca btl self,vader "${xs[@]}" "$@"
	}
else
	run=mpirun.mpich
	command -v $run >/dev/null || { echo "SKIP: $run absent (mpich)"; exit 77; }
	# Hydra passes the whole environment to its ranks
	mpirun() { timeout "$(T 300)" $run -np 4 "$@"; }
fi
unset MALLOC_PERTURB_ TALLY_GSO # meson's: glibc would fill the appliance's whole key arena

dir=$(mktemp -d /tmp/tally-mpi-test.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

freeport() {
	python3 -c 'import socket
for _ in range(50):
    s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.bind(("127.0.0.1",0)); p=s.getsockname()[1]
    t=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)
    try: t.bind(("127.0.0.1",p+1)); print(p); break
    except OSError: pass'
}
# start_udpd NAME: an open appliance (any job) on a free port; sets port_NAME, pid_NAME
start_udpd() {
	local p i
	p=$(freeport)
	"$udpd" --addr 127.0.0.1 --port "$p" --cores 2 --open --mem 512M \
		--ctl-socket "$dir/$1.sock" >"$dir/$1.log" 2>&1 &
	local pid=$!
	pids+=("$pid")
	for i in $(seq 1 $((50 * ${mult%.*}))); do
		grep -q "cores on port" "$dir/$1.log" && break
		sleep 0.1
	done
	grep -q "cores on port" "$dir/$1.log" || fail "tally-udpd did not start: $(cat "$dir/$1.log")"
	eval "port_$1=$p pid_$1=$pid"
}
# stat RANK-LINE FIELD... : a counter from the stats file (sum over ranks)
stat() {
	python3 -c 'import json,sys
rows=[json.loads(l) for l in open(sys.argv[1])]
v=0
for r in rows:
    x=r
    for k in sys.argv[2:]: x=x[k]
    v+=x
print(v)' "$dir/stats" "$@"
}

export TALLY_MPI_THRESHOLD=4096 TALLY_MPI_STATS=$dir/stats
f16= # MPIX_C_FLOAT16 sums (MPICH; only where an appliance takes them: MPICH aborts on them)
[ "$mpi" = mpich ] && f16=--f16
case "$case" in
all)
	start_udpd a
	export TALLY_APPLIANCES=127.0.0.1:$port_a
	LD_PRELOAD=$lib mpirun "$test" $f16 >"$dir/out" 2>&1
	rc=$?
	cat "$dir/out"
	[ $rc = 0 ] || fail "test_mpi exit $rc"
	grep -q "test_mpi: ok" "$dir/out" || fail "no ok line"
	if [ "$mpi" = mpich ]; then
		grep -q "f16: MPIX_C_FLOAT16 sums checked at [1-9]" "$dir/out" || fail "no f16 sums"
	fi
	[ "$(wc -l <"$dir/stats")" = 4 ] || fail "counters from $(wc -l <"$dir/stats") ranks, not 4"
	for f in allreduce iallreduce reduce_scatter_block reduce_scatter; do
		n=$(stat $f taken_calls)
		[ "$n" -gt 0 ] || fail "$f: nothing taken over"
		echo "$f: taken over $n calls, $(stat $f taken_bytes) bytes (4 ranks)"
	done
	[ "$(stat allreduce passed_calls)" -gt 0 ] || fail "no allreduce passed through"
	[ "$(stat errors)" = 0 ] || fail "errors counted"
	[ "$(stat comms)" -ge 20 ] || fail "communicators with a job: $(stat comms)"
	# TALLY_GSO unset: tally-udpd's JOIN_OK offers TALLY_CAP_GSO, so every rank sends with it
	python3 -c 'import json,sys
g=[json.loads(l).get("gso") for l in open(sys.argv[1])]
print("GSO per rank:", g); sys.exit(0 if all(x == ["on (auto)"] for x in g) else 1)' \
		"$dir/stats" || fail "GSO not on (auto) against tally-udpd"
	;;
det)
	start_udpd a
	export TALLY_APPLIANCES=127.0.0.1:$port_a TALLY_DETERMINISTIC=1
	LD_PRELOAD=$lib mpirun "$test" --det 4096 --max $((16 << 20)) $f16 >"$dir/out" 2>&1
	rc=$?
	cat "$dir/out"
	[ $rc = 0 ] || fail "deterministic sums differ from the rank-ordered ones (exit $rc)"
	[ "$(stat allreduce taken_calls)" -gt 0 ] || fail "nothing taken over"
	if [ "$mpi" = mpich ]; then # MPIX_C_FLOAT16 through the appliance's f16
		grep -q "f16: MPIX_C_FLOAT16 sums checked at [1-9]" "$dir/out" || fail "no f16 sums"
	fi
	;;
plain)
	start_udpd a
	export TALLY_APPLIANCES=127.0.0.1:$port_a
	mpirun "$test" --max $((16 << 20)) >"$dir/out" 2>&1 # no LD_PRELOAD
	rc=$?
	cat "$dir/out"
	[ $rc = 0 ] || fail "plain run exit $rc"
	[ ! -e "$dir/stats" ] || fail "counters written without the library"
	;;
absent)
	p=$(freeport) # nothing listens there
	export TALLY_APPLIANCES=127.0.0.1:$p TALLY_CONNECT_TIMEOUT_MS=1000
	LD_PRELOAD=$lib mpirun "$test" --loop 2 >"$dir/out" 2>&1
	rc=$?
	cat "$dir/out"
	[ $rc != 0 ] || fail "default policy: the job passed with no appliance"
	grep -q "127.0.0.1:$p" "$dir/out" || fail "the error does not name the appliance"
	grep -q "TALLY_MPI_FALLBACK" "$dir/out" || fail "the error does not name the setting"
	rm -f "$dir/stats"
	TALLY_MPI_FALLBACK=fallback LD_PRELOAD=$lib mpirun "$test" --max 65536 --no-threads \
		>"$dir/out" 2>&1
	rc=$?
	cat "$dir/out"
	[ $rc = 0 ] || fail "fallback policy: exit $rc"
	[ "$(grep -c "warning:.*plain MPI" "$dir/out")" = 1 ] || fail "not exactly one warning"
	[ "$(stat fallbacks)" -gt 0 ] || fail "no fallback counted"
	[ "$(stat allreduce taken_calls)" = 0 ] || fail "taken over with no appliance?"
	;;
kill)
	start_udpd a
	start_udpd b
	export TALLY_APPLIANCES=127.0.0.1:$port_a,127.0.0.1:$port_b
	LD_PRELOAD=$lib mpirun "$test" --loop 150 >"$dir/out" 2>&1 &
	mp=$!
	for i in $(seq 1 $((300 * ${mult%.*}))); do
		grep -q "loop: quarter" "$dir/out" && break
		sleep 0.1
	done
	grep -q "loop: quarter" "$dir/out" || fail "the loop did not start: $(cat "$dir/out")"
	kill -9 "$pid_a" # the first: each size is one tensor (slot 0), placed there
	wait "$mp"
	rc=$?
	cat "$dir/out"
	[ $rc = 0 ] || fail "job with one of two appliances killed: exit $rc"
	[ "$(stat failovers)" -gt 0 ] || fail "no failover counted"
	echo "failovers: $(stat failovers) (sum over ranks)"
	;;
py)
	# mpi4py + numpy, and a PyTorch loop: final parameters against a plain-MPI run
	py=/usr/bin/python3
	$py -c 'import mpi4py, numpy, torch' 2>/dev/null ||
		{ echo "SKIP: python3-mpi4py / numpy / torch missing"; exit 77; }
	start_udpd a
	export TALLY_APPLIANCES=127.0.0.1:$port_a
	LD_PRELOAD=$lib mpirun $py "$src/test_mpi4py.py" "$dir/tally" >"$dir/out" 2>&1
	rc=$?
	cat "$dir/out"
	[ $rc = 0 ] || fail "mpi4py under libtally_mpi: exit $rc"
	[ "$(stat allreduce taken_calls)" -gt 0 ] || fail "nothing taken over"
	mpirun $py "$src/test_mpi4py.py" "$dir/plain" >"$dir/out" 2>&1 || fail "plain: $(cat "$dir/out")"
	# tolerance: float sums in another order, 40 SGD steps: 1e-5 absolute
	$py -c 'import numpy as np, sys
d = max(float(np.max(np.abs(np.load(f"{sys.argv[1]}/tally.{r}.npy") - np.load(f"{sys.argv[1]}/plain.{r}.npy")))) for r in range(4))
s = max(float(np.max(np.abs(np.load(f"{sys.argv[1]}/tally.0.npy") - np.load(f"{sys.argv[1]}/tally.{r}.npy")))) for r in range(4))
print(f"max |tally - plain MPI| over the parameters = {d:.3g}; ranks differ by {s:.3g}")
sys.exit(0 if d <= 1e-5 and s == 0 else 1)' "$dir" || fail "parameters differ beyond 1e-5"
	;;
kill1)
	# the only appliance killed -9 mid-run: the collective fails, naming it
	start_udpd a
	export TALLY_APPLIANCES=127.0.0.1:$port_a TALLY_OP_TIMEOUT_MS=2000
	LD_PRELOAD=$lib mpirun "$test" --loop 150 >"$dir/out" 2>&1 &
	mp=$!
	for i in $(seq 1 $((300 * ${mult%.*}))); do
		grep -q "loop: quarter" "$dir/out" && break
		sleep 0.1
	done
	grep -q "loop: quarter" "$dir/out" || fail "the loop did not start: $(cat "$dir/out")"
	kill -9 "$pid_a"
	wait "$mp"
	rc=$?
	cat "$dir/out"
	[ $rc != 0 ] || fail "the job passed with its only appliance killed"
	grep -q "tally_mpi: MPI_Allreduce.*failed.*127.0.0.1:$port_a" "$dir/out" ||
		fail "the error does not name the appliance"
	;;
*) fail "unknown case '$case'" ;;
esac
echo "PASS: $mpi $case"
