#!/bin/sh
# perf_allreduce_rsh.sh HOST CMD... — OpenMPI's rsh agent for the emulated cluster: runs CMD
# (a shell command line, as ssh would) inside the network namespace that HOST maps to in
# $TALLY_PERF_HOSTMAP ("ip namespace" lines).
host=$1
shift
ns=$(awk -v h="$host" '$1 == h { print $2 }' "$TALLY_PERF_HOSTMAP")
[ -n "$ns" ] || { echo "perf_allreduce_rsh: unknown host $host" >&2; exit 255; }
exec ip netns exec "$ns" /bin/sh -c "$*"
