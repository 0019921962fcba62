/* SPDX-License-Identifier: Apache-2.0
 * tallyd_config.c — flags and config file → struct tallyd_conf, and its validation. Every
 * bad input gets a sentence that names the setting and what is wrong with it.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "tally_pkt.h"
#include "tally_proto.h"
#include "tallyd_config.h"

static int cfg_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int cfg_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

void tallyd_conf_init(struct tallyd_conf *c)
{
	memset(c, 0, sizeof(*c));
	c->base_port = TALLY_DEFAULT_PORT;
	c->mem_budget = 256ull << 20;
	c->frame_room = 9216;
	c->rx_desc = 1024;
	c->tx_desc = 1024;
	c->mtu = 9000;
	c->max_chunk = 8192;
	c->max_jobs = 16;
	c->log_level = 7; /* RTE_LOG_INFO */
	c->idle_mode = TALLYD_IDLE_INTERRUPT;
	c->idle_polls = 1000;
	c->idle_max_us = 20;
	c->rss = 1;
	c->tx_flush_us = 10;
	c->drain_timeout_ms = 10000;
	snprintf(c->ctl_path, sizeof(c->ctl_path), "/run/tally/tallyd.sock");
	tally_actl_guard_init(&c->guard);
	tally_actl_verbs_init(&c->rdma);
}

int tallyd_parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	unsigned shift = 0;
	switch (toupper((unsigned char)*end)) {
	case '\0': break;
	case 'K': shift = 10; end++; break;
	case 'M': shift = 20; end++; break;
	case 'G': shift = 30; end++; break;
	default: return -EINVAL;
	}
	if (shift && (*end == 'i' || *end == 'B'))
		end += (*end == 'i' && end[1] == 'B') ? 2 : 1;
	if (*end || (shift && v > (ULLONG_MAX >> shift)))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

static int cfg_uint(const char *s, unsigned long lo, unsigned long hi, unsigned long *out)
{
	char *end;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return -EINVAL;
	*out = v;
	return 0;
}

static int cfg_bool(const char *s, int *out)
{
	if (!s || !strcmp(s, "on") || !strcmp(s, "yes") || !strcmp(s, "true") || !strcmp(s, "1"))
		*out = 1;
	else if (!strcmp(s, "off") || !strcmp(s, "no") || !strcmp(s, "false") || !strcmp(s, "0"))
		*out = 0;
	else
		return -EINVAL;
	return 0;
}

int tallyd_parse_lcores(const char *s, uint16_t *ids, uint16_t max, uint16_t *n)
{
	char buf[512];
	char *save = NULL, *tok;

	if (!s || !*s || strlen(s) >= sizeof(buf))
		return -EINVAL;
	snprintf(buf, sizeof(buf), "%s", s);
	*n = 0;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		unsigned long a, b;
		char *dash = strchr(tok, '-');

		if (dash)
			*dash = '\0';
		if (cfg_uint(tok, 0, 1023, &a))
			return -EINVAL;
		b = a;
		if (dash && (cfg_uint(dash + 1, 0, 1023, &b) || b < a))
			return -EINVAL;
		for (unsigned long i = a; i <= b; i++) {
			if (*n >= max)
				return -E2BIG;
			for (uint16_t j = 0; j < *n; j++)
				if (ids[j] == i)
					return -EINVAL; /* listed twice */
			ids[(*n)++] = (uint16_t)i;
		}
	}
	return *n ? 0 : -EINVAL;
}

int tallyd_conf_eal_has(const struct tallyd_conf *c, const char *arg)
{
	size_t n = strlen(arg);

	for (int i = 0; i < c->eal_argc; i++)
		if (!strncmp(c->eal_argv[i], arg, n) &&
		    (c->eal_argv[i][n] == '\0' || c->eal_argv[i][n] == '='))
			return i;
	return -1;
}

int tallyd_conf_eal_add(struct tallyd_conf *c, const char *arg)
{
	size_t n = strlen(arg) + 1;

	if (c->eal_argc >= TALLYD_MAX_EAL_ARGS - 1 || c->eal_used + n > sizeof(c->eal_buf))
		return -ENOSPC;
	memcpy(c->eal_buf + c->eal_used, arg, n);
	c->eal_argv[c->eal_argc++] = c->eal_buf + c->eal_used;
	c->eal_used += n;
	return 0;
}

static struct tallyd_port_conf *cfg_cur_port(struct tallyd_conf *c, const char *name, char *err,
					     size_t errlen)
{
	if (!c->nports) {
		cfg_err(err, errlen, "'%s' needs a 'port' before it (it sets that port)", name);
		return NULL;
	}
	return &c->port[c->nports - 1];
}

static int cfg_set_port(struct tallyd_conf *c, const char *v, char *err, size_t errlen)
{
	if (!v || !*v)
		return cfg_err(err, errlen, "'port' needs a PCI address or a vdev spec");
	if (c->nports >= TALLYD_MAX_PORTS)
		return cfg_err(err, errlen, "too many ports (at most %d)", TALLYD_MAX_PORTS);
	if (strlen(v) >= TALLYD_DEV_LEN)
		return cfg_err(err, errlen, "port '%.40s...' is longer than %d characters", v,
			       TALLYD_DEV_LEN - 1);
	int vdev = !strncmp(v, "net_", 4) || !strncmp(v, "eth_", 4);
	if (!vdev && !tally_pkt_is_pci(v))
		return cfg_err(err, errlen, "port '%s' is neither a PCI address (0000:3b:00.0) "
			       "nor a virtual device (net_memif0,..., net_af_packet0,iface=...)", v);
	struct tallyd_port_conf *p = &c->port[c->nports++];
	memset(p, 0, sizeof(*p));
	snprintf(p->dev, sizeof(p->dev), "%s", v);
	p->is_vdev = vdev;
	return 0;
}

static int cfg_set_eal(struct tallyd_conf *c, const char *v, char *err, size_t errlen)
{
	char buf[1024];
	char *save = NULL, *tok;

	if (!v || strlen(v) >= sizeof(buf))
		return cfg_err(err, errlen, "'eal' needs its arguments in one string (under %zu "
			       "characters)", sizeof(buf));
	snprintf(buf, sizeof(buf), "%s", v);
	for (tok = strtok_r(buf, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save))
		if (tallyd_conf_eal_add(c, tok))
			return cfg_err(err, errlen, "too many EAL arguments");
	return 0;
}

int tallyd_conf_set(struct tallyd_conf *c, const char *n, const char *v, char *err,
		    size_t errlen)
{
	unsigned long u;
	uint64_t sz;
	struct tallyd_port_conf *p;
	int rc;

#define NEED_VALUE() \
	do { if (!v) return cfg_err(err, errlen, "'%s' needs a value", n); } while (0)
#define UINT(lo, hi, field, what) \
	do { NEED_VALUE(); \
	     if (cfg_uint(v, lo, hi, &u)) \
		return cfg_err(err, errlen, "'%s %s': %s must be a whole number in %lu..%lu", \
			       n, v, what, (unsigned long)(lo), (unsigned long)(hi)); \
	     field = (__typeof__(field))u; return 0; } while (0)
#define BOOL(field) \
	do { \
		if (cfg_bool(v, &field)) \
			return cfg_err(err, errlen, "'%s %s': say on or off", n, v); \
		return 0; \
	} while (0)

	if ((rc = tally_actl_guard_set(&c->guard, n, v, err, errlen)) <= 0 ||
	    (rc = tally_actl_verbs_set(&c->rdma, n, v, err, errlen)) <= 0)
		return rc;
	if (!strcmp(n, "cores"))
		UINT(1, TALLYD_MAX_CORES, c->cores, "the datapath cores of a tallyd without ports");
	if (!strcmp(n, "eal")) {
		NEED_VALUE();
		return cfg_set_eal(c, v, err, errlen);
	}
	if (!strcmp(n, "port"))
		return cfg_set_port(c, v, err, errlen);
	if (!strcmp(n, "ip")) {
		NEED_VALUE();
		if (!(p = cfg_cur_port(c, n, err, errlen)))
			return -EINVAL;
		if (tally_pkt_parse_cidr(v, &p->ip, &p->mask))
			return cfg_err(err, errlen, "'ip %s': give the address with its prefix "
				       "length, e.g. 10.0.0.1/24", v);
		return 0;
	}
	if (!strcmp(n, "mac")) {
		NEED_VALUE();
		if (!(p = cfg_cur_port(c, n, err, errlen)))
			return -EINVAL;
		if (tally_pkt_parse_mac(v, p->mac))
			return cfg_err(err, errlen, "'mac %s': expected xx:xx:xx:xx:xx:xx", v);
		if ((p->mac[0] & 1) || !(p->mac[0] | p->mac[1] | p->mac[2] | p->mac[3] |
					 p->mac[4] | p->mac[5]))
			return cfg_err(err, errlen, "'mac %s': a port needs a unicast, non-zero "
				       "address", v);
		p->mac_set = 1;
		return 0;
	}
	if (!strcmp(n, "queues")) {
		if (!(p = cfg_cur_port(c, n, err, errlen)))
			return -EINVAL;
		UINT(1, TALLYD_MAX_CORES, p->queues, "queues");
	}
	if (!strcmp(n, "lcores")) {
		NEED_VALUE();
		if (!(p = cfg_cur_port(c, n, err, errlen)))
			return -EINVAL;
		if (tallyd_parse_lcores(v, p->lcores, TALLYD_MAX_CORES, &p->nlcores))
			return cfg_err(err, errlen, "'lcores %s': expected a list like 1,2 or 1-4 "
				       "of distinct lcore ids < 1024, at most %d", v,
				       TALLYD_MAX_CORES);
		return 0;
	}
	if (!strcmp(n, "base-port"))
		UINT(1, 65535, c->base_port, "the UDP base port");
	if (!strcmp(n, "mem") || !strcmp(n, "det-pool")) {
		NEED_VALUE();
		if (tallyd_parse_size(v, &sz))
			return cfg_err(err, errlen, "'%s %s': expected a size like 512M or 2G", n, v);
		*(!strcmp(n, "mem") ? &c->mem_budget : &c->det_pool) = sz;
		return 0;
	}
	if (!strcmp(n, "frame-size"))
		UINT(256, 65000, c->frame_room, "the largest frame");
	if (!strcmp(n, "rx-desc"))
		UINT(64, 16384, c->rx_desc, "RX descriptors");
	if (!strcmp(n, "tx-desc"))
		UINT(64, 16384, c->tx_desc, "TX descriptors");
	if (!strcmp(n, "mtu"))
		UINT(0, 65000, c->mtu, "the MTU (0 leaves it alone)");
	if (!strcmp(n, "max-chunk"))
		UINT(64, TALLY_MAX_PAYLOAD, c->max_chunk, "the largest chunk in bytes");
	/* the control plane tracks at most 64 jobs (CTL_MAX_JOBS) */
	if (!strcmp(n, "max-jobs"))
		UINT(1, 64, c->max_jobs, "the number of jobs");
	if (!strcmp(n, "log-level")) {
		static const char *const lv[] = { "emerg", "alert", "crit", "err", "warning",
						   "notice", "info", "debug" };
		NEED_VALUE();
		for (unsigned i = 0; i < 8; i++)
			if (!strcmp(v, lv[i])) {
				c->log_level = i + 1;
				return 0;
			}
		UINT(1, 8, c->log_level, "the log level (or emerg..debug)");
	}
	if (!strcmp(n, "open-admission"))
		BOOL(c->open_admission);
	if ((rc = tallyd_idle_set(c, n, v, err, errlen)) <= 0)
		return rc;
	if (!strcmp(n, "io-forward"))
		BOOL(c->io_forward);
	if (!strcmp(n, "check-config"))
		BOOL(c->check_config);
	if (!strcmp(n, "rss"))
		BOOL(c->rss);
	if (!strcmp(n, "tx-flush-us"))
		UINT(1, 10000, c->tx_flush_us, "the TX flush deadline");
	if (!strcmp(n, "drain-timeout-ms"))
		UINT(0, 3600000, c->drain_timeout_ms, "the drain timeout");
	if (!strcmp(n, "dead-rank-timeout-ms"))
		UINT(0, 86400000, c->dead_rank_timeout_ms, "the dead rank timeout");
	if (!strcmp(n, "job-idle-timeout-ms"))
		UINT(0, UINT32_MAX, c->job_idle_timeout_ms, "the job idle timeout");
	if (!strcmp(n, "ctl-socket") || !strcmp(n, "control")) {
		NEED_VALUE();
		if (!*v || strlen(v) >= sizeof(c->ctl_path))
			return cfg_err(err, errlen, "'%s': a path of 1..%zu characters", n,
				       sizeof(c->ctl_path) - 1);
		snprintf(c->ctl_path, sizeof(c->ctl_path), "%s", v);
		return 0;
	}
	if (!strcmp(n, "control-config") || !strcmp(n, "control_config")) {
		NEED_VALUE();
		if (!*v || strlen(v) >= sizeof(c->ctl_config))
			return cfg_err(err, errlen, "'%s': a path of 1..%zu characters", n,
				       sizeof(c->ctl_config) - 1);
		snprintf(c->ctl_config, sizeof(c->ctl_config), "%s", v);
		return 0;
	}
	if (!strcmp(n, "help"))
		BOOL(c->help);
	return cfg_err(err, errlen, "unknown setting '%s' (tallyd --help lists them)", n);
#undef NEED_VALUE
#undef UINT
#undef BOOL
}

static char *cfg_trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	size_t n = strlen(s);
	while (n && isspace((unsigned char)s[n - 1]))
		s[--n] = '\0';
	return s;
}

int tallyd_conf_file(struct tallyd_conf *c, const char *path, char *err, size_t errlen)
{
	char line[1200], e2[512];
	unsigned lineno = 0;
	FILE *f = fopen(path, "r");
	int rc = 0;

	if (!f) {
		rc = -errno;
		snprintf(err, errlen, "config file %s: %s", path, strerror(errno));
		return rc;
	}
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		if (!strchr(line, '\n') && !feof(f)) {
			rc = cfg_err(err, errlen, "%s:%u: line longer than %zu characters", path,
				     lineno, sizeof(line) - 2);
			break;
		}
		char *hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		char *s = cfg_trim(line);
		if (!*s)
			continue;
		char *eq = strchr(s, '=');
		char *val = NULL;
		if (eq) {
			*eq = '\0';
			val = cfg_trim(eq + 1);
		}
		s = cfg_trim(s);
		if (!strcmp(s, "config")) {
			rc = cfg_err(err, errlen, "%s:%u: a config file cannot include another",
				     path, lineno);
			break;
		}
		rc = tallyd_conf_set(c, s, val, e2, sizeof(e2));
		if (rc) {
			snprintf(err, errlen, "%s:%u: %s", path, lineno, e2);
			break;
		}
	}
	fclose(f);
	return rc;
}

static int cfg_is_switch(const char *n)
{
	static const char *const sw[] = { "open-admission", "io-forward", "check-config",
					  "no-idle-backoff", "help" };
	for (size_t i = 0; i < sizeof(sw) / sizeof(sw[0]); i++)
		if (!strcmp(n, sw[i]))
			return 1;
	return 0;
}

int tallyd_conf_args(struct tallyd_conf *c, int argc, char **argv, char *err, size_t errlen)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		char name[64];
		const char *val = NULL;
		int rc;

		if (!strcmp(a, "--")) {
			for (i++; i < argc; i++)
				if (tallyd_conf_eal_add(c, argv[i]))
					return cfg_err(err, errlen, "too many EAL arguments");
			break;
		}
		if (!strcmp(a, "-h"))
			a = "--help";
		if (strncmp(a, "--", 2) || !a[2])
			return cfg_err(err, errlen, "unexpected argument '%s' (settings are --name "
				       "value; EAL arguments go after --)", a);
		const char *eq = strchr(a + 2, '=');
		size_t nlen = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
		if (nlen >= sizeof(name))
			return cfg_err(err, errlen, "unknown setting '%s'", a);
		memcpy(name, a + 2, nlen);
		name[nlen] = '\0';
		if (eq)
			val = eq + 1;
		else if (!cfg_is_switch(name)) {
			if (i + 1 >= argc)
				return cfg_err(err, errlen, "'--%s' needs a value", name);
			val = argv[++i];
		}
		if (!strcmp(name, "config")) {
			if (!val)
				return cfg_err(err, errlen, "'--config' needs a file");
			rc = tallyd_conf_file(c, val, err, errlen);
		} else {
			rc = tallyd_conf_set(c, name, val, err, errlen);
		}
		if (rc)
			return rc;
	}
	return 0;
}

unsigned tallyd_conf_ncores(const struct tallyd_conf *c)
{
	unsigned n = 0;

	if (!c->nports) /* verbs only */
		return c->cores ? c->cores : 1;
	for (uint16_t i = 0; i < c->nports; i++)
		n += c->port[i].queues ? c->port[i].queues :
		     (c->port[i].nlcores ? c->port[i].nlcores : 1);
	return n;
}

static int cfg_is_pow2(unsigned v)
{
	return v && !(v & (v - 1));
}

int tallyd_conf_validate(const struct tallyd_conf *c, char *err, size_t errlen)
{
	char a[INET_ADDRSTRLEN];

	int rc = tallyd_rdma_validate(c, err, errlen);

	if (rc)
		return rc;
	for (uint16_t i = 0; i < c->nports; i++) {
		const struct tallyd_port_conf *p = &c->port[i];
		uint32_t ip = ntohl(p->ip), m = ntohl(p->mask);

		if (!p->ip)
			return cfg_err(err, errlen, "port %u (%s): no address: add --ip A.B.C.D/LEN "
				       "after its --port", i, p->dev);
		inet_ntop(AF_INET, &p->ip, a, sizeof(a));
		if ((ip >> 28) >= 0xe || (ip >> 24) == 127 || (ip >> 24) == 0)
			return cfg_err(err, errlen, "port %u: %s is not a usable unicast address", i,
				       a);
		if (m < 0xfffffffeu && ((ip & ~m) == 0 || (ip & ~m) == ~m))
			return cfg_err(err, errlen, "port %u: %s is the network or broadcast address "
				       "of its subnet", i, a);
		if (p->queues && p->nlcores && p->queues != p->nlcores)
			return cfg_err(err, errlen, "port %u: %u queues but %u lcores: one lcore "
				       "polls each queue", i, p->queues, p->nlcores);
		for (uint16_t j = 0; j < i; j++) {
			if (c->port[j].ip == p->ip)
				return cfg_err(err, errlen, "ports %u and %u have the same address %s",
					       j, i, a);
			if (!strcmp(c->port[j].dev, p->dev))
				return cfg_err(err, errlen, "port %s is listed twice", p->dev);
			for (uint16_t x = 0; x < p->nlcores; x++)
				for (uint16_t y = 0; y < c->port[j].nlcores; y++)
					if (p->lcores[x] == c->port[j].lcores[y])
						return cfg_err(err, errlen, "lcore %u polls a queue of "
							       "port %u and of port %u: one queue "
							       "per lcore", p->lcores[x], j, i);
		}
	}
	unsigned ncores = tallyd_conf_ncores(c);
	if (ncores > TALLYD_MAX_CORES)
		return cfg_err(err, errlen, "%u datapath cores asked, at most %d", ncores,
			       TALLYD_MAX_CORES);
	if ((unsigned)c->base_port + ncores - 1 > 65535)
		return cfg_err(err, errlen, "base port %u + %u cores runs past UDP port 65535",
			       c->base_port, ncores);
	if (!cfg_is_pow2(c->rx_desc) || !cfg_is_pow2(c->tx_desc))
		return cfg_err(err, errlen, "rx-desc %u / tx-desc %u: descriptor counts must be "
			       "powers of two", c->rx_desc, c->tx_desc);
	unsigned need = TALLY_PKT_HDRS_LEN + TALLY_HDR_MAX + c->max_chunk;
	if (need > c->frame_room)
		return cfg_err(err, errlen, "max-chunk %u needs frames of %u bytes but frame-size "
			       "is %u: raise frame-size or lower max-chunk", c->max_chunk, need,
			       c->frame_room);
	if (!c->io_forward && c->mem_budget < (1u << 20) * ncores)
		return cfg_err(err, errlen, "mem %llu bytes: give the engines at least 1 MiB per "
			       "core (%u cores)", (unsigned long long)c->mem_budget, ncores);
	if (c->io_forward && c->open_admission)
		return cfg_err(err, errlen, "io-forward runs no engine: open-admission makes no "
			       "sense with it");
	return 0;
}

void tallyd_usage(FILE *f)
{
	fprintf(f,
		"usage: tallyd [--config FILE] [SETTINGS] [-- EAL ARGS]\n"
		"Settings (also in a config file as 'name = value'; port settings follow their port):\n"
		"  --port DEV            PCI address or vdev spec (repeat for more ports)\n"
		"  --ip A.B.C.D/LEN      the port's address (required)\n"
		"  --mac XX:..:XX        the port's MAC (default: the device's)\n"
		"  --queues N            RX queues of the port, one datapath lcore each (1)\n"
		"  --lcores LIST         the lcores polling those queues (default: EAL's workers)\n"
		"  --eal \"ARGS\"          EAL arguments (or after --)\n"
		"  --base-port N         UDP port of core 0; core i listens on N+i (9170)\n"
		"  --mem SIZE            memory for keys, whole appliance (256M)\n"
		"  --det-pool SIZE       deterministic staging pool per core (0)\n"
		"  --frame-size N        largest frame an RX mbuf holds (9216)\n"
		"  --max-chunk N         largest payload accepted (8192)\n"
		"  --max-jobs N          concurrent jobs, 1..64 (16; a sharded agent job takes one\n"
		"                        per local rank)\n"
		"  --rx-desc N, --tx-desc N  descriptors per queue (1024)\n"
		"  --mtu N               set the port MTU if the device allows (9000; 0 leaves it)\n"
		"  --log-level L         emerg..debug or 1..8 (info)\n"
		"  --open-admission      the first JOIN creates its job (quick start only)\n"
		"  --cores N             datapath lcores of a tallyd without ports (verbs only) (1)\n");
	tally_actl_verbs_usage(f);
	tallyd_idle_usage(f);
	fprintf(f,
		"  --tx-flush-us N       a buffered packet waits at most this long (10)\n"
		"  --rss on|off          RSS over a port's queues where offered (on)\n"
		"  --drain-timeout-ms N  on SIGTERM wait this long for open rounds (10000); exit\n"
		"                        status 3 when it abandoned open rounds (else 0; 1, 2: errors)\n"
		"  --dead-rank-timeout-ms N  name a rank silent this long to the ranks waiting (10000)\n"
		"  --job-idle-timeout-ms N   end a job silent this long, freeing its memory (60000)\n"
		"  --ctl-socket PATH     control socket (/run/tally/tallyd.sock); also --control\n"
		"  --control-config FILE replay a 'tallyctl config-save' file (jobs, policies, log level)\n"
		"                        once the control plane is up; an error stops tallyd\n"
		"  --io-forward          bounce Tally packets back, no engine (I/O baseline)\n"
		"  --check-config        validate, print the sizing, exit\n");
	tally_actl_guard_usage(f);
}
