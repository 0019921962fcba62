/* SPDX-License-Identifier: Apache-2.0
 * udpd_engine.c — tally-udpd's engines over the kernel UDP transport (listen mode, one
 * socket per core), the engine thread that polls them, and its mailbox: the main thread
 * posts one command at a time; the engine thread runs it between polls and marks it done.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "tally_auth.h"
#include "udpd.h"

#define POLL_NS 1000000ull /* the longest a posted command waits for the engine thread */

uint64_t udpd_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* --job at start on every core, with its --key-file key (udpd_conf_check_job made sure
 * it has one or says --no-auth). */
static int start_job(struct udpd *d, char *err, size_t errlen)
{
	uint8_t key[TALLY_AUTH_KEY_LEN];
	char kerr[256];
	int rc = 0;

	if (d->conf.key_file[0] && tally_auth_key_load(d->conf.key_file, key, kerr,
						       sizeof(kerr)) < 0) {
		snprintf(err, errlen, "job %u: %s", d->conf.job_id, kerr);
		return -EINVAL;
	}
	uint64_t run = 0; /* one run nonce for every core (tally_engine_job_run) */
	if (d->conf.key_file[0] &&
	    (getrandom(&run, sizeof(run), 0) != (ssize_t)sizeof(run) || !run))
		rc = -EIO;
	for (unsigned i = 0; i < d->ncores && !rc; i++) {
		rc = tally_engine_job_add(d->eng[i], d->conf.job_id, d->conf.token, d->conf.world);
		if (!rc && d->conf.key_file[0])
			rc = tally_engine_job_key(d->eng[i], d->conf.job_id, key);
		if (!rc && d->conf.key_file[0])
			rc = tally_engine_job_run(d->eng[i], d->conf.job_id, run);
	}
	OPENSSL_cleanse(key, sizeof(key));
	if (rc)
		snprintf(err, errlen, "job %u: %s", d->conf.job_id, strerror(-rc));
	return rc;
}

int udpd_engines_create(struct udpd *d, char *err, size_t errlen)
{
	int rc;

	if ((rc = udpd_xport_open(d, err, errlen)))
		return rc;
	d->ncores = d->conf.ncores;
	/* one boot id for every core: workers tell a restart by it (tally_proto.h PING) */
	uint64_t boot = 0;
	if (getrandom(&boot, sizeof(boot), 0) != sizeof(boot))
		boot = 0; /* each engine draws its own */
	void *xctx;
	const struct tally_xport_ops *xops = tally_xport_mux_ops(&d->mux, &xctx);
	d->live = tally_engine_live_create(d->conf.max_jobs);
	if (!d->live) {
		snprintf(err, errlen, "liveness table: %s", strerror(ENOMEM));
		return -ENOMEM;
	}
	for (unsigned i = 0; i < d->ncores; i++) {
		/* defaults once, after every setting: admit_bytes and admit_claims follow
		 * mem_budget and max_jobs */
		struct tally_engine_cfg ec = { 0 };

		ec.core_index = (uint16_t)i;
		ec.ncores = (uint16_t)d->ncores;
		ec.base_port = d->conf.base_port;
		ec.mem_budget = (size_t)d->conf.mem_budget;
		tally_actl_guard_engine(&d->conf.guard, &ec, 1); /* --mem is per core */
		ec.det_pool_bytes = (size_t)d->conf.det_pool;
		ec.max_chunk_bytes = d->conf.max_chunk;
		ec.max_jobs = d->conf.max_jobs;
		ec.open_admission = d->conf.open_admission;
		ec.dead_rank_timeout_ns = (uint64_t)d->conf.dead_rank_timeout_ms * 1000000u;
		ec.job_idle_timeout_ns = (uint64_t)d->conf.job_idle_timeout_ms * 1000000u;
		ec.boot_id = boot;
		ec.takes_gso = 1; /* kernel UDP sockets: workers may send with GSO */
		ec.live = d->live; /* a rank heard on any core is alive on all */
		tally_engine_cfg_defaults(&ec); /* 0: the engine's defaults */
		d->eng[i] = tally_engine_create(&ec, xops, xctx, &rc);
		if (!d->eng[i]) {
			snprintf(err, errlen, "engine %u: %s", i, strerror(-rc));
			return rc;
		}
	}
	return d->conf.world ? start_job(d, err, errlen) : 0;
}

void udpd_engines_destroy(struct udpd *d)
{
	for (unsigned i = 0; i < d->ncores; i++)
		tally_engine_destroy(d->eng[i]);
	d->ncores = 0;
	tally_engine_live_destroy(d->live);
	d->live = NULL;
	udpd_xport_close(d);
}

static int run_cmd(struct udpd *d, struct udpd_cmd *c)
{
	if (!c->all)
		return c->core < d->ncores ? c->fn(d->eng[c->core], c->core, c->arg) : -ENODEV;
	int first = 0;
	for (unsigned i = 0; i < d->ncores; i++) {
		int rc = c->fn(d->eng[i], i, c->arg);
		if (rc && !first)
			first = rc;
	}
	return first;
}

void *udpd_engine_main(void *arg)
{
	struct udpd *d = arg;

	atomic_store(&d->running, 1);
	while (!atomic_load(&d->stop)) {
		d->mux.ops.poll(&d->mux, POLL_NS);
		for (unsigned i = 0; i < d->ncores; i++)
			tally_engine_poll(d->eng[i]);
		struct udpd_cmd *c = atomic_load_explicit(&d->mbox, memory_order_acquire);
		if (c) {
			c->result = run_cmd(d, c);
			atomic_store_explicit(&d->mbox, NULL, memory_order_relaxed);
			atomic_store_explicit(&c->done, 1, memory_order_release);
		}
	}
	tally_xport_flush(&d->udpx);
	atomic_store(&d->running, 0);
	return NULL;
}

int udpd_exec(struct udpd *d, int all, unsigned core, tally_actl_engine_fn fn, void *arg)
{
	struct udpd_cmd c = { .fn = fn, .arg = arg, .all = all, .core = core };

	if (!all && core >= d->ncores)
		return -ENODEV;
	if (!atomic_load(&d->running)) /* before start or after stop: the caller's thread */
		return atomic_load(&d->stop) ? -ESHUTDOWN : run_cmd(d, &c);
	atomic_store_explicit(&d->mbox, &c, memory_order_release);
	while (!atomic_load_explicit(&c.done, memory_order_acquire)) {
		if (!atomic_load(&d->running) && !atomic_load(&c.done)) {
			atomic_store(&d->mbox, NULL);
			return -ESHUTDOWN;
		}
		usleep(20);
	}
	return c.result;
}
