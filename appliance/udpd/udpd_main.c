/* SPDX-License-Identifier: Apache-2.0
 * tally-udpd — the Tally appliance over kernel UDP: configuration → UDP sockets and engines
 * → the engine thread; the main thread serves the control socket (the same methods as
 * tallyd, appliance/ctl) until SIGTERM/SIGINT or a control-plane shutdown, then writes every
 * counter as one JSON line (--stats FILE, else stdout). Exit status: 0 ok, 1 runtime
 * failure, 2 bad configuration.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "tally_auth.h"
#include "tally_sum.h"
#include "tally_sd_notify.h"
#include "udpd.h"

static struct udpd g_udpd; /* large; zeroed */

static void on_signal(int sig)
{
	if (atomic_load(&g_udpd.quit)) /* a second signal skips the drain */
		atomic_store(&g_udpd.stop, 1);
	else if (sig == SIGTERM) /* as tallyd: SIGTERM drains (systemd stop, upgrades) */
		g_udpd.drain_on_quit = 1;
	atomic_store(&g_udpd.quit, 1);
}

/* Shutdown with drain: engines refuse new rounds; wait until the open ones completed.
 * Returns 3 when the timeout abandoned open rounds (workers lose them), else 0. */
static int drain(struct udpd *d)
{
	uint64_t end = udpd_now_ns() + (uint64_t)d->conf.drain_timeout_ms * 1000000u;

	for (unsigned i = 0; i < d->ncores; i++)
		tally_engine_set_draining(d->eng[i], 1); /* the engine thread has stopped */
	udpd_log(d, LOG_NOTICE, "draining: waiting up to %u ms", d->conf.drain_timeout_ms);
	while (udpd_now_ns() < end && !atomic_load(&d->stop)) {
		uint64_t open = 0;
		for (unsigned i = 0; i < d->ncores; i++)
			open += tally_engine_open_rounds(d->eng[i]);
		if (!open)
			break;
		d->mux.ops.poll(&d->mux, 1000000);
		for (unsigned i = 0; i < d->ncores; i++)
			tally_engine_poll(d->eng[i]);
	}
	uint64_t rounds = 0, chunks = 0;
	for (unsigned i = 0; i < d->ncores; i++) {
		rounds += tally_engine_open_rounds(d->eng[i]);
		chunks += tally_engine_open_chunks(d->eng[i]);
	}
	if (!rounds)
		return 0;
	udpd_log(d, LOG_ERR, "drain timed out: abandoned %llu open rounds (%llu chunks)",
		 (unsigned long long)rounds, (unsigned long long)chunks);
	return 3;
}

static void write_stats(struct udpd *d)
{
	struct tally_actl_counters t;
	FILE *f = d->conf.stats_path[0] ? fopen(d->conf.stats_path, "w") : stdout;
	char line[4096];

	udpd_ctl_collect(d, &t);
	json_t *o = tally_actl_counters_json(&t);
	/* the transports' own (udp_tx_calls, ...: system calls and GSO/GRO batching) are
	 * among the counters, as their registrations list them */
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	if (!f)
		f = stdout;
	fprintf(f, "%s\n", s ? s : "{}");
	if (f != stdout)
		fclose(f);
	free(s);
	json_decref(o);
	tally_actl_counters_line(&t, line, sizeof(line));
	udpd_log(d, LOG_NOTICE, "engine totals: %s", line);
}

static int serve(struct udpd *d)
{
	char err[512];
	pthread_t th;
	int rc;

	if ((rc = pthread_create(&th, NULL, udpd_engine_main, d))) {
		fprintf(stderr, "tally-udpd: engine thread: %s\n", strerror(rc));
		return 1;
	}
	while (!atomic_load(&d->running))
		usleep(100);
	if ((rc = udpd_ctl_start(d))) {
		fprintf(stderr, "tally-udpd: control plane: %s\n", strerror(-rc));
		rc = 1;
		goto stop;
	}
	if (d->conf.ctl_config[0] &&
	    (rc = tally_actl_replay(d->ctl, d->conf.ctl_config, err, sizeof(err)))) {
		fprintf(stderr, "tally-udpd: --control-config: %s\n", err);
		rc = 2;
		goto stop;
	}
	fprintf(stderr, "tally-udpd: %u cores on port %u\n", d->ncores, d->conf.base_port);
	tally_sd_notify("READY=1");
	while (!atomic_load(&d->quit))
		tally_actl_poll(d->ctl, 20);
	rc = 0;
stop:
	atomic_store(&d->stop, 1);
	pthread_join(th, NULL);
	if (rc == 0 && d->drain_on_quit)
		rc = drain(d);
	tally_actl_stop(d->ctl);
	d->ctl = NULL;
	return rc;
}

int main(int argc, char **argv)
{
	struct udpd *d = &g_udpd;
	struct sigaction sa;
	char err[512];
	int rc;

	/* the environment at the program's edge: the libraries read none */
	tally_sum_set_default(getenv("TALLY_ISA"));
	tally_auth_select_backend(getenv(TALLY_AUTH_BACKEND_ENV));
	udpd_conf_init(&d->conf);
	if (udpd_conf_args(&d->conf, argc, argv, err, sizeof(err))) {
		fprintf(stderr, "tally-udpd: %s\n", err);
		return 2;
	}
	if (d->conf.help) {
		udpd_usage(stdout);
		return 0;
	}
	if (d->conf.config_save) {
		udpd_conf_save(&d->conf, stdout);
		return 0;
	}
	if (udpd_conf_check_job(&d->conf, err, sizeof(err))) {
		fprintf(stderr, "tally-udpd: %s\n", err);
		return 2;
	}
	if (d->conf.world && !d->conf.token)
		fprintf(stderr, "tally-udpd: warning: job %u admitted with token 0\n", d->conf.job_id);
	if (d->conf.check_config) {
		printf("tally-udpd: %u cores, UDP ports %u..%u, mem %llu MiB per core\n"
		       "configuration OK\n", d->conf.ncores, d->conf.base_port,
		       d->conf.base_port + d->conf.ncores - 1,
		       (unsigned long long)(d->conf.mem_budget >> 20));
		return 0;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	d->start_ns = udpd_now_ns();
	if ((rc = udpd_engines_create(d, err, sizeof(err)))) {
		fprintf(stderr, "tally-udpd: %s\n", err);
		udpd_engines_destroy(d);
		return 1;
	}
	rc = serve(d);
	if (rc != 2)
		write_stats(d);
	udpd_engines_destroy(d);
	return rc;
}
