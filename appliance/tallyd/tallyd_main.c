/* SPDX-License-Identifier: Apache-2.0
 * tallyd — the Tally appliance: configuration → EAL → ports, lcores, engines → per-lcore
 * poll loops; the main thread runs the control plane and, on SIGTERM/SIGINT, drains open
 * rounds and exits 0. Exit status: 0 ok, 1 runtime failure, 2 bad configuration.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_log.h>

#include "tally_auth.h"
#include "tally_sum.h"
#include "tally_sd_notify.h"
#include "tallyd.h"
#include "tallyd_ctl.h"
#include "tallyd_eal.h"
#include "tallyd_setup.h"
#include "tallyd_tel.h"

#define LOG(lvl, ...) rte_log(RTE_LOG_##lvl, RTE_LOGTYPE_USER1, "tallyd: " __VA_ARGS__)

static struct tallyd *g_tallyd;
static volatile sig_atomic_t g_signals;

static void on_signal(int sig)
{
	(void)sig;
	g_signals++;
	if (g_tallyd)
		g_tallyd->quit = 1;
	if (g_signals > 1 && g_tallyd) /* a second signal skips the drain */
		g_tallyd->stop = 1;
}

static void print_config(const struct tallyd_conf *c, const struct tallyd_sizing *s)
{
	char ip[INET_ADDRSTRLEN];

	printf("tallyd configuration: %u port(s), %u datapath core(s), UDP ports %u..%u%s\n",
	       c->nports, s->ncores, c->base_port, c->base_port + s->ncores - 1,
	       c->io_forward ? ", io-forward (no engine)" : "");
	for (uint16_t i = 0; i < c->nports; i++) {
		const struct tallyd_port_conf *p = &c->port[i];
		uint32_t m = ntohl(p->mask);
		int len = 0;

		while (m & 0x80000000u) {
			len++;
			m <<= 1;
		}
		inet_ntop(AF_INET, &p->ip, ip, sizeof(ip));
		printf("  port %u: %s %s/%d", i, p->dev, ip, len);
		if (p->mac_set)
			printf(" mac %02x:%02x:%02x:%02x:%02x:%02x", p->mac[0], p->mac[1],
			       p->mac[2], p->mac[3], p->mac[4], p->mac[5]);
		printf(" lcores");
		for (uint16_t j = 0; j < p->nlcores; j++)
			printf("%s%u", j ? "," : " ", p->lcores[j]);
		if (!p->nlcores)
			printf(" (EAL workers)");
		printf("\n");
	}
	printf("  mem %llu MiB, max chunk %u B, frames %u B, rx/tx desc %u/%u, idle %s (max sleep "
	       "%u us), open admission %s\n", (unsigned long long)(c->mem_budget >> 20), c->max_chunk,
	       c->frame_room, c->rx_desc, c->tx_desc, tallyd_idle_name(c->idle_mode), c->idle_max_us,
	       c->open_admission ? "on" : "off");
	if (c->rdma.listen[0])
		printf("  rdma-listen %s (slots %u, max conns %u, gid index %d)%s\n", c->rdma.listen,
		       c->rdma.slots ? c->rdma.slots : 128, c->rdma.max_conns ? c->rdma.max_conns : 256,
		       c->rdma.gid_index, c->nports ? "" : ", verbs only");
	printf("  EAL:");
	for (int i = 0; i < c->eal_argc; i++)
		printf(" %s", c->eal_argv[i]);
	printf("\n");
	tallyd_size_print(s, stdout);
}

static int drain_query(struct tallyd_lcore *lc, void *buf, size_t len, void *arg)
{
	(void)arg;
	if (len < 2 * sizeof(uint64_t))
		return -EINVAL;
	((uint64_t *)buf)[0] = lc->engine ? tally_engine_open_rounds(lc->engine) : 0;
	((uint64_t *)buf)[1] = lc->engine ? tally_engine_open_chunks(lc->engine) : 0;
	return 0;
}

/* Ask every engine to refuse new rounds, then wait until the open ones completed. Returns
 * 3 when the timeout abandoned open rounds (their workers lose them), else 0. */
static int drain(struct tallyd *d)
{
	struct tallyd_cmd cmds[TALLYD_MAX_CORES];
	uint64_t open[TALLYD_MAX_CORES][2];
	uint64_t chunks = 0;
	uint64_t hz = rte_get_tsc_hz();
	uint64_t end = rte_rdtsc() + hz / 1000 * d->conf.drain_timeout_ms;
	uint64_t total = 0;

	d->draining = 1;
	memset(cmds, 0, sizeof(cmds));
	for (unsigned i = 0; i < d->ncores; i++)
		cmds[i].op = TALLYD_CMD_DRAIN;
	tallyd_cmd_exec_all(d, cmds);
	LOG(NOTICE, "draining: waiting up to %u ms for open rounds\n", d->conf.drain_timeout_ms);
	while (!d->stop) {
		memset(cmds, 0, sizeof(cmds));
		for (unsigned i = 0; i < d->ncores; i++) {
			cmds[i].op = TALLYD_CMD_QUERY;
			cmds[i].fn = drain_query;
			cmds[i].buf = open[i];
			cmds[i].len = sizeof(open[i]);
			open[i][0] = open[i][1] = 0;
		}
		tallyd_cmd_exec_all(d, cmds);
		total = chunks = 0;
		for (unsigned i = 0; i < d->ncores; i++) {
			total += open[i][0];
			chunks += open[i][1];
		}
		if (!total)
			break;
		if (rte_rdtsc() >= end) {
			LOG(ERR, "drain timeout after %u ms: abandoned %llu open rounds (%llu chunks)\n",
			    d->conf.drain_timeout_ms, (unsigned long long)total,
			    (unsigned long long)chunks);
			return 3;
		}
		tallyd_ctl_poll(d);
		usleep(5000);
	}
	if (!total)
		LOG(NOTICE, "drained: no round open\n");
	return 0;
}

/* The counters summed by the control plane's collect (what `stats` shows): the I/O summary
 * every 10 s (debug) and at exit, then at exit every counter ("engine totals"). */
static void log_stats(struct tallyd *d, int final)
{
	struct tally_actl_counters t;
	const struct tally_actl_io_stats *io = &t.io;
	char drops[1024], line[4096];
	size_t n = 0;

	tallyd_ctl_collect(d, &t);
	drops[0] = '\0';
	for (unsigned k = 1; k < TALLY_PKT_D_COUNT && n < sizeof(drops); k++)
		if (t.frame_drops[k])
			n += (size_t)snprintf(drops + n, sizeof(drops) - n, " %s=%llu",
					      tally_pkt_drop_name(k),
					      (unsigned long long)t.frame_drops[k]);
	rte_log(final ? RTE_LOG_NOTICE : RTE_LOG_DEBUG, RTE_LOGTYPE_USER1,
		"tallyd: %s: rx=%llu tally=%llu engine_rejects=%llu tx=%llu arp=%llu icmp=%llu "
		"dispatched=%llu relayed=%llu idle_sleeps=%llu drops:%s\n",
		final ? "totals" : "stats", (unsigned long long)io->rx_pkts,
		(unsigned long long)io->tally_pkts, (unsigned long long)io->engine_rejects,
		(unsigned long long)io->tx_pkts, (unsigned long long)io->arp_replies,
		(unsigned long long)io->icmp_replies, (unsigned long long)io->dispatched_out,
		(unsigned long long)io->tx_relayed, (unsigned long long)io->idle_sleeps,
		n ? drops : " none");
	if (!final || d->conf.io_forward)
		return;
	tally_actl_counters_line(&t, line, sizeof(line));
	LOG(NOTICE, "engine totals: %s\n", line);
}


/* rte_eal_init leaves rte_errno at 0 ("Success") when it cannot lock its runtime config:
 * the usual cause is the previous instance with the same file prefix, still exiting or
 * still running. Name the files and the two fixes. */
static void eal_fail_hint(const struct tallyd_conf *c)
{
	const char *prefix = "rte";

	for (int i = 0; i < c->eal_argc; i++) {
		const char *a = c->eal_argv[i];

		if (strcmp(a, "--file-prefix") == 0 && i + 1 < c->eal_argc)
			prefix = c->eal_argv[i + 1];
		else if (strncmp(a, "--file-prefix=", 14) == 0)
			prefix = a + 14;
	}
	const char *run = getenv("XDG_RUNTIME_DIR");
	char dir[512];

	if (geteuid() == 0 || !run)
		snprintf(dir, sizeof(dir), "/var/run/dpdk/%s", prefix);
	else
		snprintf(dir, sizeof(dir), "%s/dpdk/%s", run, prefix);
	fprintf(stderr,
		"tallyd: if EAL said \"Cannot init config\" or \"Cannot create lock\": another DPDK process with file "
		"prefix '%s' holds its runtime files in %s (a tallyd just stopped and still exiting, or still "
		"running: `fuser %s/config`). Wait for it to exit and start again, or give this instance its own "
		"prefix (--eal \"--file-prefix NAME\")\n",
		prefix, dir, dir);
}

static int run(struct tallyd *d)
{
	char err[512];
	unsigned cpus[1024];
	size_t hpsz = 2u << 20;
	unsigned long hpfree = 0;
	char *argv[TALLYD_MAX_EAL_ARGS + 1];
	int ncpus, rc;

	if ((rc = tallyd_conf_validate(&d->conf, err, sizeof(err)))) {
		fprintf(stderr, "tallyd: %s\n", err);
		return 2;
	}
	tallyd_hugepages(NULL, &hpsz, &hpfree);
	if ((rc = tallyd_size(&d->conf, hpsz, &d->size, err, sizeof(err)))) {
		fprintf(stderr, "tallyd: %s\n", err);
		return 2;
	}
	ncpus = tallyd_eal_cpus(cpus, 1024);
	if (ncpus <= 0 ||
	    (rc = tallyd_eal_prepare(&d->conf, &d->size, cpus, (unsigned)ncpus, err, sizeof(err)))) {
		fprintf(stderr, "tallyd: %s\n", ncpus <= 0 ? "cannot read the CPU affinity" : err);
		return 2;
	}
	if (d->conf.check_config) {
		print_config(&d->conf, &d->size);
		if (tallyd_eal_check_memory(&d->conf, &d->size, hpfree, err, sizeof(err)))
			printf("  warning: %s\n", err);
		printf("configuration OK\n");
		return 0;
	}
	if (tallyd_eal_check_memory(&d->conf, &d->size, hpfree, err, sizeof(err))) {
		fprintf(stderr, "tallyd: %s\n", err);
		return 1;
	}
	static char prog[] = "tallyd";

	argv[0] = prog;
	for (int i = 0; i < d->conf.eal_argc; i++)
		argv[i + 1] = d->conf.eal_argv[i];
	if (rte_eal_init(d->conf.eal_argc + 1, argv) < 0) {
		fprintf(stderr, "tallyd: EAL init failed: %s (EAL arguments:", rte_strerror(rte_errno));
		for (int i = 0; i < d->conf.eal_argc; i++)
			fprintf(stderr, " %s", d->conf.eal_argv[i]);
		fprintf(stderr, ")\n");
		eal_fail_hint(&d->conf);
		return 1;
	}
	rte_log_set_level(RTE_LOGTYPE_USER1, d->conf.log_level);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	d->start_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	d->start_tsc = rte_rdtsc();
	rc = tallyd_setup(d, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "tallyd: %s\n", err);
		goto out;
	}
	for (unsigned i = 0; i < d->ncores; i++)
		rte_eal_remote_launch(tallyd_lcore_main, d->lcore[i], d->lcore[i]->lcore_id);
	for (unsigned i = 0; i < d->ncores; i++)
		while (!d->lcore[i]->running)
			usleep(100);
	if ((rc = tallyd_ctl_start(d))) {
		fprintf(stderr, "tallyd: control plane: %s\n", strerror(-rc));
		d->stop = 1;
		rte_eal_mp_wait_lcore();
		goto out;
	}
	tallyd_tel_register(d);
	if (d->conf.ctl_config[0] &&
	    (rc = tallyd_ctl_replay(d, d->conf.ctl_config, err, sizeof(err)))) {
		fprintf(stderr, "tallyd: --control-config: %s\n", err);
		tallyd_tel_unregister();
		tallyd_ctl_stop(d);
		d->stop = 1;
		rte_eal_mp_wait_lcore();
		rc = 2;
		goto out;
	}
	for (uint16_t i = 0; i < d->nports; i++) {
		char ip[INET_ADDRSTRLEN];
		const uint8_t *m = d->port[i].ifa.mac;

		inet_ntop(AF_INET, &d->port[i].ifa.ip, ip, sizeof(ip));
		LOG(INFO, "port %u (%s): %s %02x:%02x:%02x:%02x:%02x:%02x, %u RX queues\n", i,
		    d->port[i].driver, ip, m[0], m[1], m[2], m[3], m[4], m[5], d->port[i].nrxq);
	}
	if (d->nports)
		printf("tallyd: ready: %u cores, UDP ports %u..%u%s", d->ncores, d->conf.base_port,
		       d->conf.base_port + d->ncores - 1, d->conf.io_forward ? ", io-forward" : "");
	else
		printf("tallyd: ready: %u cores, verbs only", d->ncores);
	printf("%s%s\n", d->verbs ? ", rdma_cm listening on " : "", d->verbs ? d->conf.rdma.listen : "");
	fflush(stdout);
	/* Type=notify units start their dependants only now; a no-op outside systemd. */
	tally_sd_notify("READY=1");
	uint64_t next_log = rte_rdtsc();
	while (!d->quit) {
		tallyd_ctl_poll(d);
		tallyd_verbs_listen(d);
		if (rte_rdtsc() >= next_log) {
			log_stats(d, 0);
			next_log = rte_rdtsc() + rte_get_tsc_hz() * 10;
		}
		usleep(1000);
	}
	int drained = drain(d);
	tallyd_tel_unregister();
	tallyd_ctl_stop(d);
	d->stop = 1;
	rte_eal_mp_wait_lcore();
	log_stats(d, 1);
	LOG(NOTICE, "stopped\n");
	rc = drained; /* 3: the drain abandoned open rounds */
out:
	tallyd_teardown(d);
	rte_eal_cleanup();
	return rc == 2 || rc == 3 ? rc : rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	static struct tallyd d; /* large; zeroed */
	char err[512];
	struct sigaction sa;

	/* the environment at the program's edge: the libraries read none */
	tally_sum_set_default(getenv("TALLY_ISA"));
	tally_auth_select_backend(getenv(TALLY_AUTH_BACKEND_ENV));
	tallyd_conf_init(&d.conf);
	if (tallyd_conf_args(&d.conf, argc, argv, err, sizeof(err))) {
		fprintf(stderr, "tallyd: %s\n", err);
		return 2;
	}
	if (d.conf.help) {
		tallyd_usage(stdout);
		return 0;
	}
	if (d.conf.config_save) {
		tallyd_conf_save(&d.conf, stdout);
		return 0;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	g_tallyd = &d;
	return run(&d);
}
