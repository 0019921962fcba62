# vm_lib.sh — sourced by vm_deploy.sh: the cached image pieces and one QEMU guest booted from
# the appliance disk (q35 + intel-iommu, TCG), its data NIC on a tap in a network namespace.
# Needs: $top (source tree), $work (this run's scratch dir), $cache.

NS=vmdeploy-ns TAP=vmdtap0 HOST_IP=192.0.2.1 VM_IP=192.0.2.10 SSH_PORT=2222
NX=(ip netns exec "$NS")
vm_pid=""

log() { printf '[%4d s] %s\n' "$SECONDS" "$*"; }

# The key of what goes into the image: the tree's tracked files (not tests/ but its site files, not *.md)
# — a changed tree rebuilds the .debs and the disk.
vd_key() {
	(cd "$top" && { git ls-files -co --exclude-standard | grep -v -e '^tests/' -e '\.md$'; find tests/vm_deploy/site -type f; } |
		sort -u | xargs -d '\n' sha256sum) | sha256sum | cut -c1-16
}

# debs-KEY/v1 (the tree's version) and debs-KEY/v2 (the same tree, version +vmup1)
# (v1 shared with the image and container tests through the packages' cache)
vd_debs() {
	local d=$cache/debs-$1 v debcache=${TALLY_DEPLOY_CACHE:-/var/cache/tally-deploy}/debs
	if [ ! -f "$d/.done" ]; then
		rm -rf "$cache"/debs-* && mkdir -p "$d"
		log "building the .debs (v1, then v2 = the same tree with a bumped version)"
		"$top/deploy/build-debs.sh" --cache "$debcache" "$d/v1" >"$work/debs-v1.log" 2>&1 || { tail -20 "$work/debs-v1.log"; return 1; }
		v=$(dpkg-deb -f "$d"/v1/tally-appliance_*.deb Version)
		"$top/deploy/build-debs.sh" --cache "$debcache" --version "$v+vmup1" "$d/v2" >"$work/debs-v2.log" 2>&1 ||
			{ tail -20 "$work/debs-v2.log"; return 1; }
		rm -f "$d"/v*/*dbgsym*.deb "$d"/v*/python3-tally_*.deb
		touch "$d/.done"
	fi
	debs=$d
}

# disk-KEY.raw: deploy/build-image.sh --format disk with this suite's site files and ssh key
vd_disk() {
	disk=$cache/disk-$1.raw
	[ -f "$disk" ] && return 0
	rm -f "$cache"/disk-*.raw
	local site=$work/site
	rm -rf "$site" && cp -a "$top/tests/vm_deploy/site" "$site"
	install -D -m 0600 "$cache/id_ed25519.pub" "$site/root/.ssh/authorized_keys"
	chmod 0700 "$site/root" "$site/root/.ssh"
	log "building the appliance disk (deploy/build-image.sh --format disk)"
	"$top/deploy/build-image.sh" --format disk --output "$cache/image" --debs "$debs/v1" --site "$site" \
		-- --incremental >"$work/image.log" 2>&1 || { tail -30 "$work/image.log"; return 1; }
	mv "$cache/image/tally-appliance.raw" "$disk.tmp" && mv "$disk.tmp" "$disk"
	rm -rf "$cache/image/debian~bookworm/tally-appliance"
}

vd_net_up() {
	vd_net_down
	ip netns add "$NS"
	"${NX[@]}" ip link set lo up
	"${NX[@]}" ip tuntap add "$TAP" mode tap
	"${NX[@]}" ip addr add "$HOST_IP/24" dev "$TAP"
	"${NX[@]}" ip link set "$TAP" mtu 9000 up
}
vd_net_down() { ip netns del "$NS" 2>/dev/null || true; }

# vd_boot: a fresh copy-on-write overlay of the cached disk unless $1 = keep (reboot paths)
vd_boot() {
	vd_stop # a QEMU still running (a reboot path) has exited before this one binds its ports
	[ "${1:-}" = keep ] || qemu-img create -q -f qcow2 -b "$disk" -F raw "$work/vm.qcow2"
	local accel=(-accel tcg,thread=multi -cpu max)
	[ "${TALLY_VM_KVM:-0}" = 1 ] && accel=(-enable-kvm -cpu host)
	"${NX[@]}" qemu-system-x86_64 -machine q35 "${accel[@]}" -m "${TALLY_VM_MEM:-2048}" -smp 2 \
		-display none -monitor none -serial "file:$work/console.log" \
		-device intel-iommu,intremap=on,caching-mode=on \
		-drive "file=$work/vm.qcow2,if=none,id=d0,format=qcow2" -device virtio-blk-pci,drive=d0 \
		-netdev "user,id=mgmt,restrict=on,hostfwd=tcp:127.0.0.1:$SSH_PORT-:22" \
		-device virtio-net-pci,netdev=mgmt,mac=52:54:00:00:aa:01 \
		-netdev "tap,id=data,ifname=$TAP,script=no,downscript=no,vhost=off" \
		-device virtio-net-pci,netdev=data,mac=52:54:00:00:bb:01,disable-legacy=on,iommu_platform=on,addr=0x5 \
		</dev/null >"$work/qemu.log" 2>&1 &
	vm_pid=$!
	boot_t0=$SECONDS
}

vd_ssh() {
	"${NX[@]}" ssh -q -i "$cache/id_ed25519" -p "$SSH_PORT" -o StrictHostKeyChecking=no \
		-o UserKnownHostsFile=/dev/null -o ConnectTimeout=5 -o BatchMode=yes \
		-o ControlMaster=auto -o "ControlPath=$work/ssh-mux" -o ControlPersist=120 root@127.0.0.1 "$@"
}
vd_scp() { # vd_scp SRC... DEST (remote)
	local dst=${*: -1}
	"${NX[@]}" scp -q -i "$cache/id_ed25519" -P "$SSH_PORT" -o StrictHostKeyChecking=no \
		-o UserKnownHostsFile=/dev/null -o BatchMode=yes "${@:1:$#-1}" "root@127.0.0.1:$dst"
}

# vd_wait_ssh TIMEOUT: until the guest answers over ssh (QEMU must stay alive)
vd_wait_ssh() {
	local end=$((SECONDS + $1))
	while [ $SECONDS -lt $end ]; do
		kill -0 "$vm_pid" 2>/dev/null || { log "QEMU exited: $(tail -3 "$work/qemu.log")"; return 1; }
		vd_ssh true 2>/dev/null && return 0
		sleep 2
	done
	return 1
}

vd_stop() {
	[ -n "$vm_pid" ] || return 0
	vd_ssh poweroff 2>/dev/null || true
	local i
	for i in $(seq 30); do kill -0 "$vm_pid" 2>/dev/null || break; sleep 1; done
	kill "$vm_pid" 2>/dev/null || true
	# the next boot binds the same hostfwd port (127.0.0.1:$SSH_PORT) and tap: this QEMU
	# must have exited first (by PID, 30 s after SIGTERM, then kill -9)
	for i in $(seq 30); do kill -0 "$vm_pid" 2>/dev/null || break; sleep 1; done
	if kill -0 "$vm_pid" 2>/dev/null; then
		log "QEMU $vm_pid still running 30 s after SIGTERM: kill -9"
		kill -9 "$vm_pid" 2>/dev/null || true
	fi
	wait "$vm_pid" 2>/dev/null || true
	"${NX[@]}" ssh -q -o "ControlPath=$work/ssh-mux" -O exit root@127.0.0.1 2>/dev/null || true
	vm_pid=""
}
