/* SPDX-License-Identifier: Apache-2.0
 * tallyd_config.c — flags and config file → struct tallyd_conf, and its validation. The
 * settings are rows of the appliances' option table (appliance/opt, tally_aopt.h): here
 * are where each lives in struct tallyd_conf, the port settings (each sets the latest
 * port), the idle switches of old, and the checks across settings. Every bad input gets a
 * sentence that names the setting and what is wrong with it.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "tally_aopt.h"
#include "tally_pkt.h"
#include "tally_proto.h"
#include "tallyd_config.h"
#include "tallyd_size.h"

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
	c->dispatch_ring = TALLYD_RING_SIZE;
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
	return tally_aopt_parse_size(s, out);
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

/* ip, mac, queues, lcores: the latest port's */
static int cfg_set_port_field(struct tallyd_port_conf *p, const struct tally_aopt *o,
			      const char *n, const char *v, char *err, size_t errlen)
{
	unsigned long long u;

	if (!strcmp(n, "queues")) {
		if (tally_aopt_uint(o, n, v, &u, err, errlen))
			return -EINVAL;
		p->queues = (uint16_t)u;
		return 0;
	}
	if (!v)
		return cfg_err(err, errlen, "'%s' needs a value", n);
	if (!strcmp(n, "ip") && tally_pkt_parse_cidr(v, &p->ip, &p->mask))
		return cfg_err(err, errlen, "'ip %s': give the address with its prefix length, "
			       "e.g. 10.0.0.1/24", v);
	if (!strcmp(n, "lcores") &&
	    tallyd_parse_lcores(v, p->lcores, TALLYD_MAX_CORES, &p->nlcores))
		return cfg_err(err, errlen, "'lcores %s': expected a list like 1,2 or 1-4 of "
			       "distinct lcore ids < 1024, at most %d", v, TALLYD_MAX_CORES);
	if (strcmp(n, "mac"))
		return 0;
	if (tally_pkt_parse_mac(v, p->mac))
		return cfg_err(err, errlen, "'mac %s': expected xx:xx:xx:xx:xx:xx", v);
	if ((p->mac[0] & 1) ||
	    !(p->mac[0] | p->mac[1] | p->mac[2] | p->mac[3] | p->mac[4] | p->mac[5]))
		return cfg_err(err, errlen, "'mac %s': a port needs a unicast, non-zero address",
			       v);
	p->mac_set = 1;
	return 0;
}

/* The old idle switches: off spins (poll), on waits (interrupt unless sleep was chosen). */
static int cfg_set_backoff(struct tallyd_conf *c, const char *n, const char *v, char *err,
			   size_t errlen)
{
	int on = 0;

	if (!strcmp(n, "no-idle-backoff")) {
		if (v)
			return cfg_err(err, errlen, "'%s' takes no value", n);
	} else if (cfg_bool(v, &on)) {
		return tally_aopt_err(err, errlen, n, v, "say on or off");
	}
	if (!on)
		c->idle_mode = TALLYD_IDLE_POLL;
	else if (c->idle_mode == TALLYD_IDLE_POLL)
		c->idle_mode = TALLYD_IDLE_INTERRUPT;
	return 0;
}

/* The options with a parser of their own (TALLY_AOPT_CUSTOM rows). */
static int cfg_custom(void *conf, const struct tally_aopt *o, const char *v, char *err,
		      size_t errlen)
{
	struct tallyd_conf *c = conf;
	struct tallyd_port_conf *p;

	if (!strcmp(o->name, "port"))
		return cfg_set_port(c, v, err, errlen);
	if (!strcmp(o->name, "eal"))
		return v ? cfg_set_eal(c, v, err, errlen)
			 : cfg_err(err, errlen, "'eal' needs a value");
	if (strstr(o->name, "idle-backoff"))
		return cfg_set_backoff(c, o->name, v, err, errlen);
	if (!(p = cfg_cur_port(c, o->name, err, errlen)))
		return -EINVAL;
	return cfg_set_port_field(p, o, o->name, v, err, errlen);
}

static int cfg_rest(void *conf, int argc, char **argv, char *err, size_t errlen)
{
	for (int i = 0; i < argc; i++)
		if (tallyd_conf_eal_add(conf, argv[i]))
			return cfg_err(err, errlen, "too many EAL arguments");
	return 0;
}

static void cfg_save_ports(FILE *f, const void *conf)
{
	const struct tallyd_conf *c = conf;
	char a[INET_ADDRSTRLEN];

	for (uint16_t i = 0; i < c->nports; i++) {
		const struct tallyd_port_conf *p = &c->port[i];
		int len = __builtin_popcount(p->mask);

		fprintf(f, "port = %s\n", p->dev);
		if (p->ip)
			fprintf(f, "ip = %s/%d\n", inet_ntop(AF_INET, &p->ip, a, sizeof(a)), len);
		if (p->mac_set)
			fprintf(f, "mac = %02x:%02x:%02x:%02x:%02x:%02x\n", p->mac[0], p->mac[1],
				p->mac[2], p->mac[3], p->mac[4], p->mac[5]);
		if (p->queues)
			fprintf(f, "queues = %u\n", p->queues);
		for (uint16_t j = 0; j < p->nlcores; j++)
			fprintf(f, "%s%u%s", j ? "," : "lcores = ", p->lcores[j],
				j + 1 == p->nlcores ? "\n" : "");
	}
	for (int i = 0; i < c->eal_argc; i++)
		fprintf(f, "%s%s%s", i ? " " : "eal = ", c->eal_argv[i],
			i + 1 == c->eal_argc ? "\n" : "");
}

#define TD_F(id, field) { TALLY_AOPT_ID_##id, offsetof(struct tallyd_conf, field), \
			  sizeof(((struct tallyd_conf *)0)->field), 0 }
static const struct tally_aopt_field cfg_fields[] = {
	TD_F(BASE_PORT, base_port), TD_F(CORES, cores), TD_F(MEM, mem_budget),
	TD_F(DET_POOL, det_pool), TD_F(FRAME_SIZE, frame_room), TD_F(MAX_CHUNK, max_chunk),
	TD_F(MAX_JOBS, max_jobs), TD_F(RX_DESC, rx_desc), TD_F(TX_DESC, tx_desc),
	TD_F(DISPATCH_RING, dispatch_ring),
	TD_F(MTU, mtu), TD_F(OPEN_ADMISSION, open_admission), TD_F(RDMA, rdma),
	TD_F(IDLE, idle_mode), TD_F(IDLE_POLLS, idle_polls), TD_F(IDLE_MAX_US, idle_max_us),
	TD_F(TX_FLUSH_US, tx_flush_us), TD_F(RSS, rss), TD_F(DRAIN_TIMEOUT, drain_timeout_ms),
	TD_F(DEAD_RANK_TIMEOUT, dead_rank_timeout_ms),
	TD_F(JOB_IDLE_TIMEOUT, job_idle_timeout_ms), TD_F(CTL_SOCKET, ctl_path),
	TD_F(CTL_CONFIG, ctl_config), TD_F(IO_FORWARD, io_forward),
	TD_F(CHECK_CONFIG, check_config), TD_F(CONFIG_SAVE, config_save), TD_F(HELP, help),
	TD_F(GUARD, guard),
	/* RTE_LOG_EMERG is 1 */
	{ TALLY_AOPT_ID_LOG_LEVEL, offsetof(struct tallyd_conf, log_level), sizeof(int), 1 },
};

static const struct tally_aopt_app cfg_app = {
	.app = TALLY_AOPT_TALLYD,
	.prog = "tallyd",
	.fields = cfg_fields,
	.nfields = sizeof(cfg_fields) / sizeof(cfg_fields[0]),
	.set = cfg_custom,
	.save = cfg_save_ports,
	.rest = cfg_rest,
	.usage = "usage: tallyd [--config FILE] [SETTINGS] [-- EAL ARGS]\n"
		 "Settings (also in a config file as 'name = value'; port settings follow their "
		 "port):\n",
	.usage_tail = "Exit status: 0; 1 start failure; 2 bad settings; 3 the shutdown drain "
		      "timed out\nand abandoned open rounds.\n",
};

int tallyd_conf_set(struct tallyd_conf *c, const char *n, const char *v, char *err,
		    size_t errlen)
{
	return tally_aopt_set(&cfg_app, c, n, v, err, errlen);
}

int tallyd_conf_file(struct tallyd_conf *c, const char *path, char *err, size_t errlen)
{
	return tally_aopt_file(&cfg_app, c, path, err, errlen);
}

int tallyd_conf_args(struct tallyd_conf *c, int argc, char **argv, char *err, size_t errlen)
{
	return tally_aopt_args(&cfg_app, c, argc, argv, err, errlen);
}

unsigned tallyd_conf_ncores(const struct tallyd_conf *c)
{
	unsigned n = 0;

	if (!c->nports) /* verbs only */
		return c->cores ? c->cores : 1;
	if (c->cores) /* ports dealt over `cores` lcores (tallyd_conf_validate checks them) */
		return c->cores;
	for (uint16_t i = 0; i < c->nports; i++)
		n += c->port[i].queues ? c->port[i].queues :
		     (c->port[i].nlcores ? c->port[i].nlcores : 1);
	return n;
}

/* How rdma-listen (parsed in appliance/ctl/actl_verbs.c) fits the rest: ports, or verbs
 * only with `cores` lcores; and the build (the verbs meson option). */
static int cfg_validate_rdma(const struct tallyd_conf *c, char *err, size_t errlen)
{
#ifndef TALLY_HAVE_VERBS
	if (c->rdma.listen[0])
		return cfg_err(err, errlen, "rdma-listen: this tallyd was built without verbs "
			       "(install libibverbs-dev and librdmacm-dev and rebuild; meson "
			       "option verbs)");
#endif
	if (!c->nports && !c->rdma.listen[0])
		return cfg_err(err, errlen, "no port: give at least one --port (a PCI address or "
			       "a vdev such as net_memif0,role=server,socket=/tmp/x.sock), or "
			       "--rdma-listen ADDR:PORT for verbs only");
	if (c->io_forward && c->rdma.listen[0])
		return cfg_err(err, errlen, "io-forward runs no engine: drop rdma-listen (verbs "
			       "packets would have nowhere to go)");
	return 0;
}

static int cfg_is_pow2(unsigned v)
{
	return v && !(v & (v - 1));
}

/* `cores` with ports: fewer lcores than ports, port p polled by core p % cores; each port
 * one queue, the lcores taken from EAL's worker list (a port's `lcores` would clash). */
static int cfg_validate_shared(const struct tallyd_conf *c, char *err, size_t errlen)
{
	if (!c->nports || !c->cores)
		return 0;
	if (c->cores > c->nports)
		return cfg_err(err, errlen, "cores %u with %u ports: with ports, cores deals them "
			       "over fewer lcores (port p polled by core p %% cores); for more "
			       "cores than ports drop cores and give the ports queues", c->cores,
			       c->nports);
	for (uint16_t i = 0; i < c->nports; i++) {
		if (c->port[i].queues > 1)
			return cfg_err(err, errlen, "port %u: queues %u with cores %u: a port dealt "
				       "over the cores has one queue (drop queues or cores)", i,
				       c->port[i].queues, c->cores);
		if (c->port[i].nlcores)
			return cfg_err(err, errlen, "port %u: lcores with cores %u: the cores' lcores "
				       "are EAL's workers in order (drop the port's lcores, or cores)",
				       i, c->cores);
	}
	return 0;
}

/* Is port pi polled by a core that an earlier port's queue made (`cores` below the number
 * of ports)? Its lcore is then that of port pi % cores. */
int tallyd_conf_port_shared(const struct tallyd_conf *c, uint16_t pi)
{
	return c->nports && c->cores && pi >= c->cores;
}

int tallyd_conf_validate(const struct tallyd_conf *c, char *err, size_t errlen)
{
	char a[INET_ADDRSTRLEN];
	int rc = cfg_validate_rdma(c, err, errlen);

	if (rc || (rc = cfg_validate_shared(c, err, errlen)))
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
	if (!cfg_is_pow2(c->dispatch_ring))
		return cfg_err(err, errlen, "dispatch-ring %u: must be a power of two",
			       c->dispatch_ring);
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

static const char *const idle_names[] = { "interrupt", "sleep", "poll" };

const char *tallyd_idle_name(int mode)
{
	return mode >= 0 && mode <= TALLYD_IDLE_POLL ? idle_names[mode] : "?";
}

void tallyd_usage(FILE *f)
{
	struct tallyd_conf def;

	tallyd_conf_init(&def);
	tally_aopt_usage(&cfg_app, &def, f);
}

void tallyd_conf_save(const struct tallyd_conf *c, FILE *f)
{
	tally_aopt_save(&cfg_app, c, f);
}
