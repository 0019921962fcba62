/* SPDX-License-Identifier: Apache-2.0
 * ctl_exp_main.c — tally-exporter: Prometheus metrics of one Tally appliance (tallyd or
 * tally-udpd), read from its control socket and served over HTTP at /metrics. It runs
 * beside the appliance, off the datapath: one thread, one control query per cache interval
 * whatever the number of scrapers. See deploy/prometheus/README.md.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "ctl_exp.h"
#include "tally_ctl.h"

#define DEFAULT_LISTEN "127.0.0.1:9471"

struct opts {
	char host[64];
	uint16_t port;
	const char *socket;
	unsigned cache_ms, timeout_ms, max_conns, http_timeout_ms, stuck_ms;
	char appliance[128];
	int once;
};

struct exporter {
	struct opts o;
	struct ctl_exp_snap snap;
	struct ctl_exp_self self;
	struct ctl_exp_buf text;
	uint64_t fetched_ns;   /* 0: never */
};

static volatile sig_atomic_t quit;

static void on_signal(int sig)
{
	(void)sig;
	quit = 1;
}

static void usage(FILE *f)
{
	fprintf(f,
"usage: tally-exporter [options]\n"
"  Prometheus metrics of a Tally appliance (tallyd, tally-udpd) at http://LISTEN/metrics\n"
"  --listen HOST:PORT     address to serve (numeric IPv4, or [IPv6]:PORT; default %s)\n"
"  --socket PATH          the appliance's control socket (default %s)\n"
"  --cache-ms N           scrapes within N ms share one control query (0..60000, default 1000)\n"
"  --timeout-ms N         bound on each control call (1..60000, default 2000)\n"
"  --stuck-threshold-ms N chunks open longer than this count as stuck (0..86400000, default 1000)\n"
"  --appliance NAME       value of the `appliance` label (default: the host name)\n"
"  --max-conns N          concurrent HTTP connections (1..1000, default 16)\n"
"  --http-timeout-ms N    a scraper must send its request and read the answer in this\n"
"                         (100..60000, default 5000)\n"
"  --once                 print one scrape to stdout and exit (1 when the socket did not answer)\n",
		DEFAULT_LISTEN, TALLY_CTL_DEFAULT_SOCKET);
}

static int parse_uint(const char *flag, const char *v, unsigned lo, unsigned hi, unsigned *out)
{
	char *end;
	unsigned long x;

	errno = 0;
	x = v && *v != '-' ? strtoul(v, &end, 10) : 0;
	if (!v || !*v || *v == '-' || errno || *end || x < lo || x > hi) {
		fprintf(stderr, "tally-exporter: %s: '%s' is not a whole number in %u..%u\n", flag,
			v ? v : "", lo, hi);
		return -EINVAL;
	}
	*out = (unsigned)x;
	return 0;
}

/* HOST:PORT, [V6]:PORT; HOST must be a numeric address. */
static int parse_listen(const char *v, struct opts *o)
{
	const char *colon = strrchr(v, ':');
	unsigned port;
	unsigned char tmp[16];
	size_t hl;

	if (!colon || colon == v)
		goto bad;
	hl = (size_t)(colon - v);
	if (v[0] == '[') {
		if (hl < 3 || v[hl - 1] != ']')
			goto bad;
		v++;
		hl -= 2;
	}
	if (hl >= sizeof(o->host))
		goto bad;
	memcpy(o->host, v, hl);
	o->host[hl] = '\0';
	if (inet_pton(AF_INET, o->host, tmp) != 1 && inet_pton(AF_INET6, o->host, tmp) != 1)
		goto bad;
	if (parse_uint("--listen (port)", colon + 1, 1, 65535, &port))
		return -EINVAL;
	o->port = (uint16_t)port;
	return 0;
bad:
	fprintf(stderr, "tally-exporter: --listen: '%s' is not HOST:PORT with a numeric address "
		"(e.g. %s or [::1]:9471)\n", v, DEFAULT_LISTEN);
	return -EINVAL;
}

static int parse_socket(const char *v, struct opts *o)
{
	struct sockaddr_un un;

	if (!v || !*v || strlen(v) >= sizeof(un.sun_path)) {
		fprintf(stderr, "tally-exporter: --socket: '%s' must be a path of 1..%zu bytes\n",
			v ? v : "", sizeof(un.sun_path) - 1);
		return -EINVAL;
	}
	o->socket = v;
	return 0;
}

static int parse_one(struct opts *o, const char *a, const char *v)
{
	if (!strcmp(a, "--listen"))
		return parse_listen(v, o);
	if (!strcmp(a, "--socket"))
		return parse_socket(v, o);
	if (!strcmp(a, "--cache-ms"))
		return parse_uint(a, v, 0, 60000, &o->cache_ms);
	if (!strcmp(a, "--timeout-ms"))
		return parse_uint(a, v, 1, 60000, &o->timeout_ms);
	if (!strcmp(a, "--stuck-threshold-ms"))
		return parse_uint(a, v, 0, 86400000, &o->stuck_ms);
	if (!strcmp(a, "--max-conns"))
		return parse_uint(a, v, 1, 1000, &o->max_conns);
	if (!strcmp(a, "--http-timeout-ms"))
		return parse_uint(a, v, 100, 60000, &o->http_timeout_ms);
	if (!strcmp(a, "--appliance")) {
		if (!*v || strlen(v) >= sizeof(o->appliance)) {
			fprintf(stderr, "tally-exporter: --appliance: '%s' must be 1..%zu bytes\n", v,
				sizeof(o->appliance) - 1);
			return -EINVAL;
		}
		snprintf(o->appliance, sizeof(o->appliance), "%s", v);
		return 0;
	}
	fprintf(stderr, "tally-exporter: unknown option '%s' (--help lists them)\n", a);
	return -EINVAL;
}

/* 0, 1 (--help printed) or -EINVAL (message printed). */
static int parse_args(int argc, char **argv, struct opts *o)
{
	*o = (struct opts){ .socket = TALLY_CTL_DEFAULT_SOCKET, .cache_ms = 1000,
			    .timeout_ms = 2000, .max_conns = 16, .http_timeout_ms = 5000,
			    .stuck_ms = 1000 };
	parse_listen(DEFAULT_LISTEN, o);
	if (gethostname(o->appliance, sizeof(o->appliance) - 1) || !o->appliance[0])
		snprintf(o->appliance, sizeof(o->appliance), "tally");
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *eq = strchr(a, '=');
		char flag[64];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 1;
		}
		if (!strcmp(a, "--once")) {
			o->once = 1;
			continue;
		}
		if (eq && (size_t)(eq - a) < sizeof(flag)) { /* --flag=value */
			snprintf(flag, sizeof(flag), "%.*s", (int)(eq - a), a);
			if (parse_one(o, flag, eq + 1))
				return -EINVAL;
			continue;
		}
		if (strncmp(a, "--", 2) || i + 1 >= argc) {
			fprintf(stderr, "tally-exporter: %s: %s\n", a, strncmp(a, "--", 2) ?
				"unexpected argument (options are --name VALUE)" : "needs a value");
			return -EINVAL;
		}
		if (parse_one(o, a, argv[++i]))
			return -EINVAL;
	}
	return 0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The cached text, refreshed when older than the cache interval. */
static const struct ctl_exp_buf *body(void *arg)
{
	struct exporter *x = arg;
	uint64_t now = now_ns();

	if (x->fetched_ns && now - x->fetched_ns < (uint64_t)x->o.cache_ms * 1000000u)
		return &x->text;
	ctl_exp_query(x->o.socket, (int)x->o.timeout_ms, x->o.stuck_ms, &x->snap);
	x->self.refreshes++;
	x->self.control_errors += !x->snap.up;
	x->fetched_ns = now_ns();
	ctl_exp_buf_free(&x->text);
	if (ctl_exp_render(&x->snap, &x->self, x->o.appliance, &x->text))
		return NULL;
	return &x->text;
}

static int serve(struct exporter *x)
{
	struct ctl_exp_http_cfg hc = { .host = x->o.host, .port = x->o.port,
				       .max_conns = x->o.max_conns,
				       .timeout_ms = x->o.http_timeout_ms, .max_request = 8192 };
	int err = 0, rc = 0;
	struct ctl_exp_http *h = ctl_exp_http_open(&hc, &err);

	if (!h) {
		fprintf(stderr, "tally-exporter: --listen %s:%u: %s\n", x->o.host, x->o.port,
			strerror(-err));
		return 1;
	}
	fprintf(stderr, "tally-exporter: serving http://%s%s%s:%u/metrics for %s (socket %s)\n",
		strchr(x->o.host, ':') ? "[" : "", x->o.host, strchr(x->o.host, ':') ? "]" : "",
		x->o.port, x->o.appliance, x->o.socket);
	while (!quit && rc == 0)
		rc = ctl_exp_http_poll(h, 1000, body, x, &x->self);
	if (rc)
		fprintf(stderr, "tally-exporter: poll: %s\n", strerror(-rc));
	ctl_exp_http_close(h);
	return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct exporter x = { 0 };
	struct sigaction sa = { .sa_handler = on_signal };
	int rc = parse_args(argc, argv, &x.o);

	if (rc)
		return rc > 0 ? 0 : 2;
	if (x.o.once) {
		const struct ctl_exp_buf *b = body(&x);
		if (b)
			fwrite(b->p, 1, b->len, stdout);
		rc = !b ? 2 : x.snap.up ? 0 : 1;
		goto cleanup;
	}
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	rc = serve(&x);
cleanup:
	ctl_exp_snap_clear(&x.snap);
	ctl_exp_buf_free(&x.text);
	return rc;
}
