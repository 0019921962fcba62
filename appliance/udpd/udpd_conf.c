/* SPDX-License-Identifier: Apache-2.0
 * udpd_conf.c — tally-udpd's settings: flags and/or a config file in tallyd's format (one
 * `name = value` a line, `name` alone for a switch, `#` comments) with tallyd's names where
 * they apply (base-port, mem, det-pool, max-chunk, max-jobs, open-admission, ctl-socket,
 * control-config, log-level, drain-timeout-ms) and the kernel-UDP ones (ip, cores; port,
 * addr and open are the older spellings of base-port, ip and open-admission).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

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

/* "4096", "64M", "2G", "0x10": a number with an optional K/M/G suffix. */
static int num(const char *s, unsigned long long max, unsigned long long *out)
{
	char *end = NULL;
	unsigned long long v;

	if (!s || !*s)
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (*end == 'K' || *end == 'k')
		v <<= 10, end++;
	else if (*end == 'M' || *end == 'm')
		v <<= 20, end++;
	else if (*end == 'G' || *end == 'g')
		v <<= 30, end++;
	if (errno || end == s || *end || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

static int set_str(char *dst, size_t cap, const char *n, const char *v, char *err, size_t el)
{
	if (!v || strlen(v) >= cap)
		return cerr(err, el, "'%s' needs a value under %zu characters", n, cap);
	snprintf(dst, cap, "%s", v);
	return 0;
}

static int set_level(struct udpd_conf *c, const char *v, char *err, size_t el)
{
	static const char *const lv[] = { "emerg", "alert", "crit", "err", "warning", "notice",
					   "info", "debug" };
	static const char *const alias[] = { [LOG_ERR] = "error" };

	for (int i = 0; i < 8; i++)
		if (v && (!strcmp(v, lv[i]) || (i == LOG_ERR && !strcmp(v, alias[i])))) {
			c->log_level = i < LOG_ERR ? LOG_ERR : i;
			return 0;
		}
	return cerr(err, el, "'log-level %s': emerg..debug", v ? v : "");
}

/* Settings of the form name → numeric field. */
struct num_set {
	const char *name;
	unsigned long long lo, max;
	size_t off, size;
};

#define NS(n, lo, max, f) { n, lo, max, offsetof(struct udpd_conf, f), \
			    sizeof(((struct udpd_conf *)0)->f) }
static const struct num_set nums[] = {
	NS("base-port", 1, 65535, base_port), NS("port", 1, 65535, base_port),
	NS("cores", 1, UDPD_MAX_CORES, ncores), NS("mem", 1, 1ull << 40, mem_budget),
	NS("det-pool", 0, 1ull << 40, det_pool), NS("max-chunk", 64, TALLY_MAX_PAYLOAD, max_chunk),
	NS("max-jobs", 1, 64, max_jobs), NS("job", 0, UINT32_MAX, job_id),
	NS("world", 0, TALLY_MAX_WORKERS, world), NS("token", 0, UINT64_MAX, token),
	NS("drain-timeout-ms", 0, 3600000, drain_timeout_ms),
	NS("dead-rank-timeout-ms", 0, 86400000, dead_rank_timeout_ms),
	NS("job-idle-timeout-ms", 0, UINT32_MAX, job_idle_timeout_ms),
};

static void store(void *p, size_t size, unsigned long long v)
{
	if (size == 2)
		*(uint16_t *)p = (uint16_t)v;
	else if (size == 4)
		*(uint32_t *)p = (uint32_t)v;
	else
		*(uint64_t *)p = v;
}

static int set_switch(int *field, const char *n, const char *v, char *err, size_t el)
{
	if (!v || !strcmp(v, "on") || !strcmp(v, "yes") || !strcmp(v, "1") || !strcmp(v, "true"))
		*field = 1;
	else if (!strcmp(v, "off") || !strcmp(v, "no") || !strcmp(v, "0") || !strcmp(v, "false"))
		*field = 0;
	else
		return cerr(err, el, "'%s %s': say on or off", n, v);
	return 0;
}

int udpd_conf_set(struct udpd_conf *c, const char *n, const char *v, char *err, size_t el)
{
	unsigned long long x;
	int rc = tally_actl_guard_set(&c->guard, n, v, err, el);

	if (rc <= 0)
		return rc;
	for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
		if (strcmp(n, nums[i].name))
			continue;
		if (num(v, nums[i].max, &x) || x < nums[i].lo)
			return cerr(err, el, "'%s %s': a number in %llu..%llu", n, v ? v : "",
				    nums[i].lo, nums[i].max);
		store((char *)c + nums[i].off, nums[i].size, x);
		return 0;
	}
	if (!strcmp(n, "ip") || !strcmp(n, "addr")) {
		int rc = set_str(c->host, sizeof(c->host), n, v, err, el);
		char *slash = strchr(c->host, '/'); /* tallyd's A.B.C.D/LEN: the address */
		if (slash)
			*slash = '\0';
		return rc;
	}
	if (!strcmp(n, "open-admission") || !strcmp(n, "open"))
		return set_switch(&c->open_admission, n, v, err, el);
	if (!strcmp(n, "check-config"))
		return set_switch(&c->check_config, n, v, err, el);
	if (!strcmp(n, "no-auth"))
		return set_switch(&c->no_auth, n, v, err, el);
	if (!strcmp(n, "gso"))
		return set_switch(&c->gso, n, v, err, el);
	if (!strcmp(n, "gro"))
		return set_switch(&c->gro, n, v, err, el);
	if (!strcmp(n, "key-file"))
		return set_str(c->key_file, sizeof(c->key_file), n, v, err, el);
	if (!strcmp(n, "ctl-socket") || !strcmp(n, "control"))
		return set_str(c->ctl_path, sizeof(c->ctl_path), n, v, err, el);
	if (!strcmp(n, "control-config"))
		return set_str(c->ctl_config, sizeof(c->ctl_config), n, v, err, el);
	if (!strcmp(n, "stats"))
		return set_str(c->stats_path, sizeof(c->stats_path), n, v, err, el);
	if (!strcmp(n, "log-level"))
		return set_level(c, v, err, el);
	if ((rc = tally_actl_verbs_set(&c->rdma, n, v, err, el)) <= 0)
		return rc;
	return cerr(err, el, "unknown setting '%s' (tally-udpd --help)", n);
}

static char *trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r'))
		*--e = '\0';
	return s;
}

int udpd_conf_file(struct udpd_conf *c, const char *path, char *err, size_t el)
{
	char line[1024], msg[256];
	unsigned lineno = 0;
	int rc = 0;
	FILE *f = fopen(path, "r");

	if (!f) {
		int e = errno;
		cerr(err, el, "config %s: %s", path, strerror(e));
		return -e;
	}
	while (!rc && fgets(line, sizeof(line), f)) {
		char *hash = strchr(line, '#'), *eq, *name, *val = NULL;
		lineno++;
		if (hash)
			*hash = '\0';
		name = trim(line);
		if (!*name)
			continue;
		if ((eq = strchr(name, '='))) {
			*eq = '\0';
			val = trim(eq + 1);
			name = trim(name);
		}
		if (!strcmp(name, "config"))
			rc = cerr(msg, sizeof(msg), "a config file cannot include another");
		else
			rc = udpd_conf_set(c, name, val, msg, sizeof(msg));
		if (rc)
			cerr(err, el, "%s:%u: %s", path, lineno, msg);
	}
	fclose(f);
	return rc;
}

int udpd_conf_args(struct udpd_conf *c, int argc, char **argv, char *err, size_t el)
{
	for (int i = 1; i < argc; i++) {
		char name[64];
		const char *a = argv[i], *v = NULL, *eq;
		int rc;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			c->help = 1;
			continue;
		}
		if (strncmp(a, "--", 2) || !a[2])
			return cerr(err, el, "unexpected argument '%s'", a);
		a += 2;
		eq = strchr(a, '=');
		snprintf(name, sizeof(name), "%.*s", eq ? (int)(eq - a) : (int)strlen(a), a);
		int is_switch = !strcmp(name, "open") || !strcmp(name, "open-admission") ||
				!strcmp(name, "check-config") || !strcmp(name, "no-auth");
		if (eq)
			v = eq + 1;
		else if (!is_switch && i + 1 < argc)
			v = argv[++i];
		rc = !strcmp(name, "config") ? (v ? udpd_conf_file(c, v, err, el)
					       : cerr(err, el, "'config' needs a file"))
					 : udpd_conf_set(c, name, v, err, el);
		if (rc)
			return rc;
	}
	return 0;
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
	fprintf(f,
		"usage: tally-udpd [--config FILE] [SETTINGS]\n"
		"The Tally appliance over kernel UDP (no DPDK, no root): the engine and control\n"
		"socket of tallyd. Settings (also in a config file as 'name = value'):\n"
		"  --ip A.B.C.D          address to listen on (any); also --addr\n"
		"  --base-port N         UDP port of core 0; core i listens on N+i (9170); also --port\n"
		"  --cores N             engines, one UDP socket each (2)\n"
		"  --mem SIZE            memory for keys per core (1G)\n"
		"  --det-pool SIZE       deterministic staging pool per core (64M)\n"
		"  --max-chunk N         largest payload accepted (8192)\n"
		"  --max-jobs N          concurrent jobs, 1..64 (16)\n"
		"  --open-admission      the first JOIN creates its job (quick start); also --open\n"
		"  --job ID --token T --world W  admit a job at start, authenticated:\n"
		"  --key-file FILE       its key (32 bytes hex, mode 0600; workers read the same\n"
		"                        file from TALLY_AUTH_KEY_FILE), or\n"
		"  --no-auth             admit it unauthenticated (a trusted fabric)\n"
		"  --gso on|off          RESULTs to one worker leave as UDP GSO super-datagrams\n"
		"                        (on; off for clients that cannot take kernel-segmented\n"
		"                        frames: DPDK on AF_PACKET over a veth)\n"
		"  --gro on|off          take pushes as UDP GRO batches, one receive each (on)\n"
		"  --log-level L         error..debug (info)\n"
		"  --drain-timeout-ms N  SIGTERM or a shutdown with drain waits this long for\n"
		"                        open rounds (10000)\n"
		"  --dead-rank-timeout-ms N  a chunk waiting this long on a rank silent as long\n"
		"                        fails the waiting workers' operation, naming the rank (10000)\n"
		"  --job-idle-timeout-ms N   a job with no packet this long ends, memory freed (60000)\n"
		"Exit status: 0; 1 start failure; 2 bad settings; 3 the shutdown drain timed out and\n"
		"abandoned open rounds (logged with their number).\n"
		"  --ctl-socket PATH     control socket (/run/tally/tallyd.sock); also --control\n"
		"  --control-config FILE replay a 'tallyctl config-save' file at start\n"
		"  --stats FILE          every counter as one JSON line at exit (stdout)\n"
		"  --check-config        validate and exit\n");
	tally_actl_verbs_usage(f);
	tally_actl_guard_usage(f);
}
