#!/bin/sh
# tests/perf/fake_ssh.sh HOST COMMAND-LINE... — an ssh stand-in for the harness tests: runs the
# command line with this host's shell, as ssh runs it with the remote one (its words joined by
# spaces, then parsed by sh), and appends HOST to $FAKE_SSH_LOG so a test sees who was "reached".
host=$1
shift
[ -n "$host" ] || { echo "fake_ssh: no host" >&2; exit 255; }
[ -n "${FAKE_SSH_LOG:-}" ] && echo "$host" >>"$FAKE_SSH_LOG"
exec /bin/sh -c "$*"
