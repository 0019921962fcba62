#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# deploy / container BUILDDIR: the appliance image (deploy/container/) built by this test with
# podman from this tree's .debs (deploy/build-debs.sh; TALLY_DEPLOY_DEBS=DIR reuses built
# ones), then:
#  - tally-udpd in it (--network host, --cap-drop ALL: no capability at all), healthy by its
#    HEALTHCHECK (tallyctl status); the quick-start training (train.py, 2 workers, 4 epochs)
#    outside the container trains through it to the accuracy of the same run over gloo, and
#    the appliance's counters (tallyctl in the container) show the pushes;
#  - tallyd without CAP_IPC_LOCK, then without CAP_NET_RAW, then without hugepages: each
#    refused at once with a message naming what is missing.
# Root, podman, debootstrap and the Debian mirror for the first base root (cached); 77 otherwise.
set -u
BUILD=${1:?usage: test_container.sh BUILDDIR}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
MULT=${TALLY_TIMEOUT_MULTIPLIER:-1}
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (podman import/build, chroot)"; exit 77; }
for t in podman debootstrap dpkg-buildpackage; do
	command -v $t >/dev/null || { echo "SKIP: $t missing (Debian packages podman debootstrap dpkg-dev)"; exit 77; }
done
/usr/bin/python3 -c 'import torch, sklearn' 2>/dev/null || { echo "SKIP: /usr/bin/python3 lacks torch/sklearn"; exit 77; }
# This machine (a container itself): cgroup v1 with a cgroup2 mount at /sys/fs/cgroup/unified,
# which crun refuses ("cgroups in hybrid mode not supported"): run in a private mount
# namespace without it and the containers without cgroups. podman's default ulimits exceed
# this machine's hard limits (crun: setrlimit ... Operation not permitted): set ours.
if [ -z "${TALLY_CT_NS:-}" ] && grep -qs ' /sys/fs/cgroup/unified cgroup2 ' /proc/mounts; then
	export TALLY_CT_NS=1
	exec unshare -m bash -c 'umount /sys/fs/cgroup/unified && exec "$0" "$@"' "$0" "$@"
fi
run_opts=(--ulimit "nofile=$(ulimit -Sn):$(ulimit -Hn)" --ulimit nproc=4096:4096)
[ -n "${TALLY_CT_NS:-}" ] && run_opts+=(--cgroups disabled)
tag=t$$
name=tally-ct-$$
W=$(mktemp -d /tmp/tally-container-test.XXXXXX)
cleanup() {
	local rc=$?
	podman rm -f -t 2 "$name" >/dev/null 2>&1
	podman rmi -f "localhost/tally-appliance:$tag" "localhost/tally-rootfs:$tag" >/dev/null 2>&1
	[ $rc != 0 ] && [ $rc != 77 ] && for f in "$W"/*.log; do echo "---- $f"; tail -n 30 "$f"; done
	rm -rf "$W"
	exit $rc
}
trap cleanup EXIT

t0=$SECONDS
debs=${TALLY_DEPLOY_DEBS:-}
if [ -z "$debs" ]; then
	debs=$BUILD/container-debs
	timeout $((900 * MULT)) "$SRC/deploy/build-debs.sh" --cache "${TALLY_DEPLOY_CACHE:-/var/cache/tally-deploy}/debs" \
		"$debs" >"$W/debs.log" 2>&1 || { echo "FAIL: deploy/build-debs.sh"; exit 1; }
	echo "packages ready: $((SECONDS - t0)) s ($(grep -m1 -o 'reused\|built in [0-9]* s' "$W/debs.log"))"
fi
t1=$SECONDS
timeout $((900 * MULT)) "$SRC/deploy/container/build-container.sh" "$debs" "$tag" 2>&1 | tee "$W/image.log"
[ "${PIPESTATUS[0]}" = 0 ] || {
	grep -q "debootstrap from .* failed" "$W/image.log" && { echo "SKIP: no Debian mirror for the base root"; exit 77; }
	echo "FAIL: build-container.sh"; exit 1; }
echo "image built: $((SECONDS - t1)) s (packages + image: $((SECONDS - t0)) s)"
img=localhost/tally-appliance:$tag

port=$(/usr/bin/python3 -c '
import random, socket
while True:
    p = random.randrange(20000, 60000); s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind(("127.0.0.1", p)); s.close(); print(p); break
    except OSError:
        s.close()')
podman run -d "${run_opts[@]}" --name "$name" --network host --cap-drop ALL "$img" udpd --ip 127.0.0.1 \
	--base-port "$port" --cores 1 --mem 64M --open-admission >/dev/null || { echo "FAIL: podman run"; exit 1; }
deadline=$((SECONDS + 30 * MULT))
until podman healthcheck run "$name" >/dev/null 2>&1; do
	[ $SECONDS -lt $deadline ] || { echo "FAIL: not healthy in $((30 * MULT)) s"; podman logs "$name"; exit 1; }
	sleep 0.5
done
echo "container healthy: $(podman inspect -f '{{.State.Health.Status}}' "$name") (HEALTHCHECK tallyctl status)"
eff=$(podman exec "$name" sed -n 's/^CapEff:[[:space:]]*//p' /proc/1/status)
[ "$eff" = 0000000000000000 ] || { echo "FAIL: the appliance runs with capabilities $eff"; exit 1; }

ref=$(timeout $((120 * MULT)) /usr/bin/python3 "$SRC/gpu_agent/examples/train.py" --backend gloo --workers 2 --epochs 4 2>&1 |
	grep -o 'test accuracy [0-9.]*' | tail -1 | awk '{print $3}')
TALLY_APPLIANCES=127.0.0.1:$port TALLY_BUILD=$BUILD timeout $((180 * MULT)) \
	/usr/bin/python3 "$SRC/gpu_agent/examples/train.py" --workers 2 --epochs 4 >"$W/train.log" 2>&1 || {
	echo "FAIL: training through the container"; exit 1; }
acc=$(grep -o 'test accuracy [0-9.]*' "$W/train.log" | tail -1 | awk '{print $3}')
/usr/bin/python3 -c "import sys; a, r = float('$acc'), float('$ref'); sys.exit(0 if a >= 0.85 and abs(a - r) <= 0.03 else 1)" || {
	echo "FAIL: accuracy '$acc' through the container, gloo '$ref'"; exit 1; }
pushes=$(podman exec "$name" tallyctl --socket /run/tally/tallyd.sock --json stats | \
	/usr/bin/python3 -c 'import json, sys; d = json.load(sys.stdin); print(d.get("totals", d).get("pushes", -1))')
[ "${pushes:-0}" -gt 0 ] 2>/dev/null || { echo "FAIL: the appliance counted no pushes ($pushes)"; exit 1; }
echo "ok: training outside the container: accuracy $acc (gloo $ref), appliance pushes $pushes"
podman stop -t 15 "$name" >/dev/null
st=$(podman inspect -f '{{.State.ExitCode}}' "$name")
[ "$st" = 0 ] || { echo "FAIL: the appliance's exit status after podman stop (a drain): $st"; exit 1; }

refused() { # refused WANT PODMAN-OPTS... -- TALLYD-ARGS...: exits 78 at once, naming WANT
	local want=$1 out rc; shift
	out=$(timeout $((30 * MULT)) podman run --rm "${run_opts[@]}" --network host --cap-drop ALL "$@" 2>&1); rc=$?
	[ $rc = 78 ] && grep -q "$want" <<<"$out" || { echo "FAIL: expected a refusal naming '$want' (rc $rc): $out"; exit 1; }
	echo "ok: refused: $(grep "tally-container:" <<<"$out")"
}
refused "capability IPC_LOCK" "$img" tallyd --port net_tap0 --eal "--no-huge"
refused "capability NET_RAW" --cap-add IPC_LOCK "$img" tallyd --port net_tap0 --eal "--no-huge"
refused "hugepages mounted at /dev/hugepages" --cap-add IPC_LOCK --cap-add NET_RAW "$img" tallyd --port net_tap0
echo "PASS ($((SECONDS - t0)) s)"
