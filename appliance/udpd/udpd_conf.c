/* SPDX-License-Identifier: Apache-2.0
 * udpd_conf.c — tally-udpd's settings: flags and/or a config file in tallyd's format (one
 * `name = value` a line, `name` alone for a switch, `#` comments). The settings are rows of
 * the appliances' option table (appliance/opt, tally_aopt.h), the ones tallyd takes too
 * written once there; here are where each lives in struct udpd_conf, --ip's parser, and
 * the check of a job admitted at start. port, addr and open are the older spellings of
 * base-port, ip and open-admission.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>

#include "tally_aopt.h"
#include "udpd.h"

static int cerr(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

void udpd_conf_init(struct udpd_conf *c)
{
	memset(c, 0, sizeof(*c));
	tally_actl_guard_init(&c->guard);
	c->base_port = TALLY_DEFAULT_PORT;
	c->ncores = 2;
	c->mem_budget = 1ull << 30;
	c->det_pool = 64ull << 20;
	c->max_chunk = 8192;
	c->max_jobs = 16;
	c->log_level = LOG_INFO;
	c->drain_timeout_ms = 10000;
	c->gso = 1;
	c->gro = 1;
	tally_actl_verbs_init(&c->rdma);
}

/* --ip A.B.C.D (also --addr; tallyd's A.B.C.D/LEN: the address) */
static int udpd_conf_custom(void *conf, const struct tally_aopt *o, const char *v, char *err,
			    size_t el)
{
	struct udpd_conf *c = conf;
	char *slash;

	if (!v || !*v || strlen(v) >= sizeof(c->host))
		return cerr(err, el, "'%s' needs an address (under %zu characters)", o->name,
			    sizeof(c->host));
	snprintf(c->host, sizeof(c->host), "%s", v);
	if ((slash = strchr(c->host, '/')))
		*slash = '\0';
	return 0;
}

static void udpd_conf_save_ip(FILE *f, const void *conf)
{
	const struct udpd_conf *c = conf;

	if (c->host[0])
		fprintf(f, "ip = %s\n", c->host);
}

#define UD_F(id, field) { TALLY_AOPT_ID_##id, offsetof(struct udpd_conf, field), \
			  sizeof(((struct udpd_conf *)0)->field), 0 }
static const struct tally_aopt_field udpd_fields[] = {
	UD_F(BASE_PORT, base_port), UD_F(CORES, ncores), UD_F(MEM, mem_budget),
	UD_F(DET_POOL, det_pool), UD_F(MAX_CHUNK, max_chunk), UD_F(MAX_JOBS, max_jobs),
	UD_F(OPEN_ADMISSION, open_admission), UD_F(JOB, job_id), UD_F(WORLD, world),
	UD_F(TOKEN, token), UD_F(NO_AUTH, no_auth), UD_F(KEY_FILE, key_file),
	UD_F(GSO, gso), UD_F(GRO, gro), UD_F(LOG_LEVEL, log_level), UD_F(RDMA, rdma),
	UD_F(DRAIN_TIMEOUT, drain_timeout_ms), UD_F(DEAD_RANK_TIMEOUT, dead_rank_timeout_ms),
	UD_F(JOB_IDLE_TIMEOUT, job_idle_timeout_ms), UD_F(CTL_SOCKET, ctl_path),
	UD_F(CTL_CONFIG, ctl_config), UD_F(STATS, stats_path), UD_F(CHECK_CONFIG, check_config),
	UD_F(CONFIG_SAVE, config_save), UD_F(HELP, help), UD_F(GUARD, guard),
};
_Static_assert(UDPD_MAX_CORES == TALLY_AOPT_UDPD_MAX_CORES, "tally_aopt.h's udpd cores");

static const struct tally_aopt_app udpd_app = {
	.app = TALLY_AOPT_UDPD,
	.prog = "tally-udpd",
	.fields = udpd_fields,
	.nfields = sizeof(udpd_fields) / sizeof(udpd_fields[0]),
	.set = udpd_conf_custom,
	.save = udpd_conf_save_ip,
	.usage = "usage: tally-udpd [--config FILE] [SETTINGS]\n"
		 "The Tally appliance over kernel UDP (no DPDK, no root): the engine and control\n"
		 "socket of tallyd. Settings (also in a config file as 'name = value'):\n",
	.usage_tail = "Exit status: 0; 1 start failure; 2 bad settings; 3 the shutdown drain "
		      "timed out and\nabandoned open rounds (logged with their number).\n",
};

/* syslog levels: emerg..crit would silence the errors; err is the quietest */
static int udpd_conf_level(struct udpd_conf *c, int rc)
{
	if (c->log_level < LOG_ERR)
		c->log_level = LOG_ERR;
	return rc;
}

int udpd_conf_set(struct udpd_conf *c, const char *n, const char *v, char *err, size_t el)
{
	return udpd_conf_level(c, tally_aopt_set(&udpd_app, c, n, v, err, el));
}

int udpd_conf_file(struct udpd_conf *c, const char *path, char *err, size_t el)
{
	return udpd_conf_level(c, tally_aopt_file(&udpd_app, c, path, err, el));
}

int udpd_conf_args(struct udpd_conf *c, int argc, char **argv, char *err, size_t el)
{
	return udpd_conf_level(c, tally_aopt_args(&udpd_app, c, argc, argv, err, el));
}

int udpd_conf_check_job(const struct udpd_conf *c, char *err, size_t el)
{
	if (!c->world)
		return (c->no_auth || c->key_file[0])
			? cerr(err, el, "--no-auth and --key-file are for a job admitted at start: "
			       "give --job ID --token T --world W too") : 0;
	if (c->no_auth && c->key_file[0])
		return cerr(err, el, "job %u: give either --key-file or --no-auth, not both",
			    c->job_id);
	if (!c->no_auth && !c->key_file[0])
		return cerr(err, el, "job %u: operator-admitted jobs are authenticated by default: "
			    "give --key-file FILE (a 32-byte hex key: openssl rand -hex 32 > FILE, "
			    "mode 0600) or --no-auth for an unauthenticated job on a trusted fabric",
			    c->job_id);
	return 0;
}

void udpd_usage(FILE *f)
{
	struct udpd_conf def;

	udpd_conf_init(&def);
	tally_aopt_usage(&udpd_app, &def, f);
}

void udpd_conf_save(const struct udpd_conf *c, FILE *f)
{
	tally_aopt_save(&udpd_app, c, f);
}
