# vm_checks.sh — sourced by vm_deploy.sh: the checks, in order, on the booted guest.
# Each check records "ok|FAIL name (seconds): detail" in results[]; failed counts the FAILs.

results=() failed=0
check() { # check NAME COMMAND... : run it, record the outcome and its time
	local name=$1 t=$SECONDS out rc
	shift
	out=$("$@" 2>&1)
	rc=$?
	if [ $rc -eq 0 ]; then
		results+=("ok   $name ($((SECONDS - t)) s)${out:+: ${out//$'\n'/ | }}")
	else
		results+=("FAIL $name ($((SECONDS - t)) s, rc $rc): ${out//$'\n'/ | }")
		failed=$((failed + 1))
	fi
	log "${results[-1]:0:400}"
	return $rc
}
want() { # want WHAT EXPECTED ACTUAL
	[ "$2" = "$3" ] && { echo "$1 = $3"; return 0; }
	echo "$1: expected '$2', got '$3'"
	return 1
}

c_boot() {
	vd_wait_ssh 420 || { echo "no ssh within 420 s; console tail:"; tail -5 "$work/console.log"; return 1; }
	t_ssh=$((SECONDS - boot_t0))
	local st i
	for i in $(seq 90); do
		st=$(vd_ssh systemctl is-active tallyd.service)
		[ "$st" = active ] || [ "$st" = failed ] && break
		sleep 2
	done
	want "tallyd.service" active "$st" || { vd_ssh journalctl -b -u tally-firstboot -u tallyd --no-pager | tail -20; return 1; }
	local us
	us=$(vd_ssh systemctl show tallyd -p ActiveEnterTimestampMonotonic --value)
	t_ready=$(awk -v u="$us" 'BEGIN { printf "%.1f", u / 1e6 }')
	echo "ssh after $t_ssh s (host clock); READY at $t_ready s after the guest kernel started"
	echo "$t_ssh $t_ready" >"$work/boot-times"
	want Type notify "$(vd_ssh systemctl show tallyd -p Type --value)"
}

c_firstboot() {
	local r=0 drv
	want tally-firstboot "active" "$(vd_ssh systemctl is-active tally-firstboot)" || r=1
	want nr_hugepages 128 "$(vd_ssh cat /proc/sys/vm/nr_hugepages)" || r=1
	want "hugepages at boot" "vm.nr_hugepages = 128" "$(vd_ssh grep -h nr_hugepages /etc/sysctl.d/60-tally-hugepages.conf)" || r=1
	drv=$(vd_ssh readlink /sys/bus/pci/devices/0000:00:05.0/driver)
	want "0000:00:05.0 driver" vfio-pci "${drv##*/}" || r=1
	vd_ssh driverctl list-overrides | grep -q '0000:00:05.0 vfio-pci' && echo "driverctl override kept" || { echo "no driverctl override"; r=1; }
	vd_ssh "grep -q 'isolcpus=managed_irq,domain,1 nohz_full=1 rcu_nocbs=1 irqaffinity=0' /boot/firmware/syslinux.cfg" &&
		echo "isolation written to /boot/firmware/syslinux.cfg" || { echo "syslinux.cfg lacks the isolation"; r=1; }
	return $r
}

c_status() {
	local s
	s=$(vd_ssh tallyctl status) || { echo "$s"; return 1; }
	grep -q net_virtio <<<"$s" || { echo "tallyctl status does not show net_virtio: $s"; return 1; }
	vd_ssh tallyctl --json status | grep -q '"link_up": *true' || { echo "link not up in tallyctl --json status"; return 1; }
	grep -m1 -i virtio <<<"$s"
}

c_operator() {
	vd_ssh 'id tallyop >/dev/null 2>&1 || useradd -M -G tally tallyop; id nobodyop >/dev/null 2>&1 || useradd -M nobodyop' || return 1
	local c
	for c in status stats jobs; do
		vd_ssh "su tallyop -s /bin/sh -c 'tallyctl $c' >/dev/null" || { echo "tallyctl $c as a member of group tally failed"; return 1; }
	done
	if vd_ssh "su nobodyop -s /bin/sh -c 'tallyctl status' >/dev/null 2>&1"; then
		echo "a user outside group tally could use the socket"; return 1
	fi
	echo "tallyctl status/stats/jobs as group tally; refused outside it"
}

c_journal() {
	local j
	j=$(vd_ssh journalctl -b -u tallyd --no-pager)
	grep -q 'Started tallyd.service\|Started Tally gradient summation appliance' <<<"$j" || { echo "no start line"; return 1; }
	grep -q 'port 0 (net_virtio)' <<<"$j" || { echo "no port line"; return 1; }
	grep -E 'link up|ready:' <<<"$j" | head -2 | sed 's/^.*tallyd\[[0-9]*\]: //'
}

# workers JOB ROUNDS BYTES: two ranks on the host, verified sums, JSON lines in $work
workers() {
	local job=$1 rounds=$2 bytes=$3 r pids=() rc=0
	for r in 0 1; do
		"${NX[@]}" "$build/perf/tally-worker" --host "$VM_IP" --job "$job" --token 0x77 --world 2 --rank "$r" \
			--bytes "$bytes" --keys 4 --rounds "$rounds" --give-up-ms 60000 --join-ms 30000 --json \
			${WORKER_SECONDS:+--seconds $WORKER_SECONDS} \
			>"$work/worker-$job-$r.json" 2>"$work/worker-$job-$r.err" &
		pids+=($!)
	done
	for r in "${pids[@]}"; do wait "$r" || rc=1; done
	[ $rc -eq 0 ] || { cat "$work"/worker-"$job"-*.err; grep -ho '"error":"[^"]*"' "$work"/worker-"$job"-*.json; return 1; }
	head -c 300 "$work/worker-$job-0.json"
	echo
}
c_workers() {
	vd_ssh tallyctl job-add 7 --no-auth --token 0x77 --world-size 2 >/dev/null || return 1
	workers 7 5 4M
}

c_train() {
	vd_ssh tallyctl job-add 8 --no-auth --token 0x88 --world-size 2 >/dev/null || return 1
	local out acc
	out=$("${NX[@]}" env TALLY_APPLIANCES="$VM_IP:9170" TALLY_JOB_ID=8 TALLY_TOKEN=$((0x88)) \
		/usr/bin/python3 "$top/gpu_agent/examples/train.py" --workers 2 --epochs 6 2>&1) || { tail -5 <<<"$out"; return 1; }
	acc=$(grep -o 'test accuracy [0-9.]*' <<<"$out" | tail -1 | awk '{ print $3 }')
	awk -v a="${acc:-0}" 'BEGIN { exit !(a >= 0.90) }' || { echo "accuracy ${acc:-none} < 0.90"; tail -5 <<<"$out"; return 1; }
	echo "test accuracy $acc (2 workers, 6 epochs)"
}

c_reload_restart() {
	local p1 p2
	p1=$(vd_ssh systemctl show tallyd -p MainPID --value)
	if vd_ssh systemctl reload tallyd 2>/dev/null; then echo "reload succeeded: the unit has no ExecReload"; return 1; fi
	want "MainPID after refused reload" "$p1" "$(vd_ssh systemctl show tallyd -p MainPID --value)" || return 1
	vd_ssh systemctl restart tallyd || return 1
	p2=$(vd_ssh systemctl show tallyd -p MainPID --value)
	[ "$p2" != "$p1" ] && [ "$(vd_ssh systemctl is-active tallyd)" = active ] || { echo "restart: pid $p1 -> $p2"; return 1; }
	echo "reload refused (no ExecReload), tallyd untouched; restart: pid $p1 -> $p2, active (READY again)"
}

# jobs survive a restart only if they are admitted again: the operator keeps them in a
# control config that tallyd replays at start (tallyctl config-save, --control-config)
c_persist_jobs() {
	vd_ssh 'tallyctl job-add 9 --no-auth --token 0x77 --world-size 2 >/dev/null &&
		tallyctl config-save >/etc/tally/control.conf &&
		sed -i "s|^TALLYD_OPTS=.*|TALLYD_OPTS=\"--control-config /etc/tally/control.conf\"|" /etc/default/tallyd &&
		systemctl restart tallyd && tallyctl jobs' | grep -w 9 >/dev/null || { echo "job 9 not back after restart"; return 1; }
	echo "job 9 admitted again from /etc/tally/control.conf after a restart"
}

c_upgrade() {
	local v2 wpid rc=0 t0=$SECONDS t_up t_end
	vd_ssh mkdir -p /root/debs-v1 /root/debs-v2 && vd_scp "$debs"/v1/*.deb /root/debs-v1/ && vd_scp "$debs"/v2/*.deb /root/debs-v2/ || return 1
	v2=$(dpkg-deb -f "$debs"/v2/tally-appliance_*.deb Version)
	# the job runs rounds of 1 MiB for 90 s; the upgrade (dpkg -i: the packages' postinst
	# try-restarts tallyd, as with apt) restarts tallyd inside it
	{ WORKER_SECONDS=90 workers 9 100000 1M; echo "rc=$? end=$SECONDS"; } >"$work/upgrade-workers.out" 2>&1 &
	wpid=$!
	sleep 5
	vd_ssh 'dpkg -i /root/debs-v2/*.deb' >"$work/upgrade-dpkg.log" 2>&1 || { tail -5 "$work/upgrade-dpkg.log"; rc=1; }
	t_up=$SECONDS
	want "installed version" "$v2" "$(vd_ssh dpkg-query -W -f '\${Version}' tally-appliance)" || rc=1
	want "tallyd after upgrade" active "$(vd_ssh systemctl is-active tallyd)" || rc=1
	wait $wpid
	t_end=$(sed -n 's/^rc=0 end=//p' "$work/upgrade-workers.out")
	if [ -z "$t_end" ]; then
		echo "job 9 in flight across the upgrade: FAILED: $(tail -c 400 "$work/upgrade-workers.out")"; rc=1
	elif [ "$t_end" -le "$t_up" ]; then
		echo "job 9 ended (+$((t_end - t0)) s) before the upgrade's restart was done (+$((t_up - t0)) s): the check proves nothing"; rc=1
	else
		# every round was verified (rc 0); the session must have seen the restart
		local rs
		rs=$(grep -o '"restarts":[0-9]*' "$work/worker-9-0.json" | cut -d: -f2)
		if [ "${rs:-0}" -ge 1 ]; then
			echo "job 9 completed verified across the upgrade restart (upgrade done at +$((t_up - t0)) s, job at +$((t_end - t0)) s, restarts survived: $rs)"
		else
			echo "job 9 completed but its session saw no appliance restart (restarts ${rs:-none}): the check proves nothing"; rc=1
		fi
	fi
	return $rc
}

c_rollback() {
	local v1 p1
	v1=$(dpkg-deb -f "$debs"/v1/tally-appliance_*.deb Version)
	p1=$(vd_ssh systemctl show tallyd -p MainPID --value)
	# dpkg -i runs the same maintainer scripts as `apt install --allow-downgrades` (README),
	# without apt's minutes of package-list work under TCG
	vd_ssh 'dpkg -i /root/debs-v1/*.deb' >"$work/rollback-dpkg.log" 2>&1 ||
		{ tail -5 "$work/rollback-dpkg.log"; return 1; }
	grep -q 'Setting up tally-appliance' "$work/rollback-dpkg.log" || { echo "dpkg did not install the old package"; return 1; }
	want "installed version" "$v1" "$(vd_ssh dpkg-query -W -f '\${Version}' tally-appliance)" || return 1
	want "tallyd after rollback" active "$(vd_ssh systemctl is-active tallyd)" || return 1
	[ "$(vd_ssh systemctl show tallyd -p MainPID --value)" != "$p1" ] || { echo "tallyd was not restarted"; return 1; }
	vd_ssh tallyctl jobs | grep -qw 9 || { echo "job 9 not admitted after the rollback restart"; return 1; }
	echo "rolled back to $v1, tallyd restarted and active"
}

c_reboot() {
	local r=0 drv
	# Under TCG the guest crawls with nohz_full/rcu_nocbs (measured: 53 s to /init instead of
	# 9 s, udev stalled > 7 min): the reboot keeps only isolcpus= of what first boot wrote.
	vd_ssh "sed -i -E '/APPEND/s/ (nohz_full|rcu_nocbs|irqaffinity)=[^ ]*//g' /boot/firmware/syslinux.cfg" || return 1
	echo "rebooting with: $(vd_ssh grep APPEND /boot/firmware/syslinux.cfg)"
	vd_ssh 'echo "# vm_deploy marker" >>/etc/tally/tallyd.conf; systemctl reboot' 2>/dev/null
	sleep 5
	rm -f "$work/ssh-mux"
	boot_t0=$SECONDS
	vd_wait_ssh 420 || { echo "no ssh after reboot"; return 1; }
	echo "ssh after the reboot: $((SECONDS - boot_t0)) s"
	local i st
	for i in $(seq 90); do st=$(vd_ssh systemctl is-active tallyd); [ "$st" = active ] || [ "$st" = failed ] && break; sleep 2; done
	want "tallyd after reboot" active "$st" || r=1
	vd_ssh "grep -qx '# vm_deploy marker' /etc/tally/tallyd.conf" && echo "config kept (marker line)" || { echo "config lost"; r=1; }
	want "nr_hugepages after reboot" 128 "$(vd_ssh cat /proc/sys/vm/nr_hugepages)" || r=1
	drv=$(vd_ssh readlink /sys/bus/pci/devices/0000:00:05.0/driver)
	want "0000:00:05.0 driver after reboot" vfio-pci "${drv##*/}" || r=1
	want "isolated CPUs after reboot" 1 "$(vd_ssh cat /sys/devices/system/cpu/isolated)" || r=1
	want "tally-firstboot after reboot (ran once)" "no" "$(vd_ssh systemctl show tally-firstboot -p ConditionResult --value)" || r=1
	vd_ssh tallyctl status | grep -q net_virtio || { echo "tallyctl status after reboot lacks net_virtio"; r=1; }
	vd_ssh tallyctl jobs | grep -qw 9 || { echo "job 9 not admitted after reboot"; r=1; }
	workers 9 3 1M >/dev/null && echo "verified sums after reboot (job 9 from control.conf)" || r=1
	return $r
}

run_checks() {
	check "boot to READY (tallyd.service Type=notify active)" c_boot || return 0
	check "first boot: hugepages, vfio-pci by PCI address, isolation for next boot" c_firstboot
	check "tallyctl status shows the PMD (net_virtio), link up" c_status
	check "tallyctl status/stats/jobs over the socket, group tally" c_operator
	check "journalctl -u tallyd: start and port" c_journal
	check "verified sums from 2 workers outside the VM" c_workers
	check "PyTorch job (train.py, reduced) accuracy" c_train
	check "systemctl reload / restart as the unit promises" c_reload_restart
	check "jobs kept across restarts (config-save, --control-config)" c_persist_jobs
	check "upgrade to newer .debs with a job in flight" c_upgrade
	check "rollback to the previous .debs" c_rollback
	check "reboot keeps config, hugepages, binding; isolation active" c_reboot
}
