/* SPDX-License-Identifier: Apache-2.0
 * perf_line_build.c — the command lines `tally-perf line` runs (tallyd, the workers, wrapped in
 * the remote command for --hosts), built from validated options (perf_line_cmd.c), and their
 * shell-quoted form for --dry-run and for the remote shell.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf_line.h"

unsigned ln_app_cores(const struct ln_opts *o)
{
	return o->app == LN_APP_MEMIF ? o->workers :
	       o->app == LN_APP_PCI ? o->n_app_port * o->queues : o->ext_cores;
}

int ln_has_forward(const struct ln_opts *o)
{
	return o->app != LN_APP_EXTERNAL;
}

static int ln_add(struct ln_cmd *c, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (c->argc >= LN_MAX_ARGS || c->used >= sizeof(c->buf))
		return -E2BIG;
	va_start(ap, fmt);
	n = vsnprintf(c->buf + c->used, sizeof(c->buf) - c->used, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(c->buf) - c->used)
		return -E2BIG;
	c->argv[c->argc++] = c->buf + c->used;
	c->argv[c->argc] = NULL;
	c->used += (size_t)n + 1;
	return 0;
}

/* Words of a space-separated string, each an argument. */
static int ln_add_words(struct ln_cmd *c, const char *s)
{
	char w[512];

	while (s && *s) {
		size_t l;

		s += strspn(s, " \t");
		l = strcspn(s, " \t");
		if (!l)
			break;
		if (l >= sizeof(w))
			return -E2BIG;
		memcpy(w, s, l);
		w[l] = '\0';
		if (ln_add(c, "%s", w))
			return -E2BIG;
		s += l;
	}
	return 0;
}

int ln_build_tallyd(const struct ln_opts *o, int forward, const char *tmp, const char *prefix,
		    struct ln_cmd *c)
{
	char lcores[256];
	size_t n;
	int rc = 0;

	c->argc = 0;
	c->used = 0;
	if (o->app == LN_APP_EXTERNAL)
		return -EINVAL;
	rc |= ln_add(c, "%s", o->tallyd);
	if (o->app == LN_APP_MEMIF) {
		for (unsigned i = 0; i < o->workers; i++) {
			rc |= ln_add(c, "--port");
			rc |= ln_add(c, "net_memif%u,role=server,socket=%s/m%c%u.sock,"
				     "socket-abstract=no,bsize=9216,id=0", i, tmp,
				     forward ? 'f' : 'a', i);
			rc |= ln_add(c, "--ip");
			rc |= ln_add(c, "10.99.%u.1/24", i + 1);
		}
	} else {
		for (unsigned i = 0; i < o->n_app_port; i++) {
			rc |= ln_add(c, "--port");
			rc |= ln_add(c, "%s", o->app_port[i]);
			rc |= ln_add(c, "--ip");
			rc |= ln_add(c, "%s", o->app_ip[i]);
			rc |= ln_add(c, "--queues");
			rc |= ln_add(c, "%u", o->queues);
		}
	}
	rc |= ln_add(c, "--ctl-socket"); /* not the system's default socket */
	rc |= ln_add(c, "%s/ctl-%s.sock", tmp, forward ? "fwd" : "agg");
	rc |= ln_add(c, "--idle-backoff");
	rc |= ln_add(c, "off"); /* pure polling: this is the line-rate measurement */
	rc |= ln_add(c, "--mem");
	rc |= ln_add(c, "1G");
	rc |= ln_add(c, forward ? "--io-forward" : "--open-admission");
	rc |= ln_add(c, "--");
	if (o->app == LN_APP_MEMIF) {
		/* main lcore, then one datapath lcore per port on the next CPUs; the workers
		 * take the CPUs after those (wrapping where there are fewer CPUs) */
		n = (size_t)snprintf(lcores, sizeof(lcores), "0@%u", o->cpu[0]);
		for (unsigned i = 0; i < o->workers && n < sizeof(lcores); i++)
			n += (size_t)snprintf(lcores + n, sizeof(lcores) - n, ",%u@%u", i + 1,
					      o->cpu[(i + 1) % o->ncpu]);
		/* EAL memory: 1G of keys plus each port's RX pool and dispatch rings */
		rc |= ln_add_words(c, "--no-huge --no-pci -m");
		rc |= ln_add(c, "%u", 2048 + 512 * (o->workers - 1));
		rc |= ln_add(c, "--lcores");
		rc |= ln_add(c, "%s", lcores);
	} else {
		/* real ports: hugepages (DMA), the ports allowed explicitly, tallyd maps the
		 * lcores unless --eal gives a core list */
		for (unsigned i = 0; i < o->n_app_port; i++) {
			rc |= ln_add(c, "-a");
			rc |= ln_add(c, "%s", o->app_port[i]);
		}
	}
	rc |= ln_add(c, "--file-prefix");
	rc |= ln_add(c, "%s", prefix);
	rc |= ln_add_words(c, o->eal);
	return rc ? -E2BIG : 0;
}

/* The worker's own command line (before any remote wrapping). */
static int ln_worker_argv(const struct ln_opts *o, unsigned i, int forward, const char *tmp,
			  const char *prefix, struct ln_cmd *c)
{
	const char *remote = o->n_host ? o->remote_worker : o->worker;
	char app_ip[300] = "";
	int rc = 0;

	c->argc = 0;
	c->used = 0;
	if (o->app == LN_APP_PCI) {
		const char *ip = o->app_ip[i % o->n_app_port];

		snprintf(app_ip, sizeof(app_ip), "%.*s", (int)strcspn(ip, "/"), ip);
	} else if (o->app == LN_APP_EXTERNAL) {
		snprintf(app_ip, sizeof(app_ip), "%s", o->ext_host);
	} else {
		snprintf(app_ip, sizeof(app_ip), "10.99.%u.1", i + 1);
	}
	rc |= ln_add(c, "%s", remote);
	switch (o->wkind) {
	case LN_WK_MEMIF:
		rc |= ln_add_words(c, "--transport dpdk --dpdk");
		rc |= ln_add(c, "--no-huge --no-pci -m 512 --file-prefix %sw%u --lcores 0@%u "
			     "--vdev net_memif0,role=client,socket=%s/m%c%u.sock,"
			     "socket-abstract=no,bsize=9216,id=0", prefix, i,
			     o->cpu[(o->workers + 1 + i) % o->ncpu], tmp,
			     forward ? 'f' : 'a', i);
		rc |= ln_add(c, "--local-ip");
		rc |= ln_add(c, "10.99.%u.2/24", i + 1);
		break;
	case LN_WK_PCI:
		rc |= ln_add_words(c, "--transport dpdk --dpdk");
		rc |= ln_add(c, "-a %s --file-prefix %sw%u%s%s",
			     o->worker_port[o->n_worker_port == 1 ? 0 : i], prefix, i,
			     o->worker_eal ? " " : "", o->worker_eal ? o->worker_eal : "");
		rc |= ln_add(c, "--local-ip");
		rc |= ln_add(c, "%s", o->worker_ip[i]);
		break;
	case LN_WK_UDP:
		rc |= ln_add_words(c, "--transport udp");
		break;
	}
	rc |= ln_add(c, "--host");
	rc |= ln_add(c, "%s", app_ip);
	rc |= ln_add(c, "--port");
	rc |= ln_add(c, "%u", o->app == LN_APP_EXTERNAL ? o->ext_port : 9170u);
	rc |= ln_add(c, "--rank");
	rc |= ln_add(c, "%u", i);
	rc |= ln_add(c, "--world");
	rc |= ln_add(c, "%u", o->workers);
	rc |= ln_add(c, "--seconds");
	rc |= ln_add(c, "%.3f", o->seconds);
	rc |= ln_add_words(c, "--rounds 1000000 --chunk");
	rc |= ln_add(c, "%u", o->chunk);
	rc |= ln_add(c, "--dtype");
	rc |= ln_add(c, "%s", o->dtype);
	rc |= ln_add(c, "--bytes");
	rc |= ln_add(c, "%s", o->bytes);
	rc |= ln_add_words(c, "--no-verify --json --rto-us");
	rc |= ln_add(c, "%s", o->rto_us);
	rc |= ln_add(c, "--window");
	rc |= ln_add(c, "%s", o->window);
	rc |= ln_add(c, "--blast-cores"); /* as keys spread over the appliance's cores */
	rc |= ln_add(c, "%u", ln_app_cores(o));
	/* a memif server must stop before its clients detach: they linger after the report */
	if (o->wkind == LN_WK_MEMIF)
		rc |= ln_add(c, "--linger");
	if (forward)
		rc |= ln_add(c, "--blast");
	for (unsigned k = 0; k < o->n_wargs; k++)
		rc |= ln_add(c, "%s", o->wargs[k]);
	return rc ? -E2BIG : 0;
}

/* `s` quoted for a POSIX shell into out (single quotes unless every character is safe). */
static int ln_quote(const char *s, char *out, size_t len)
{
	size_t n = 0;

	if (*s && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
			    "_@%+=:,./-") == strlen(s)) {
		if (strlen(s) >= len)
			return -E2BIG;
		memcpy(out, s, strlen(s) + 1);
		return 0;
	}
	if (n + 1 >= len)
		return -E2BIG;
	out[n++] = '\'';
	for (; *s; s++) {
		const char *piece = *s == '\'' ? "'\\''" : NULL;
		size_t pl = piece ? 4 : 1;

		if (n + pl + 2 > len)
			return -E2BIG;
		if (piece)
			memcpy(out + n, piece, pl);
		else
			out[n] = *s;
		n += pl;
	}
	out[n++] = '\'';
	out[n] = '\0';
	return 0;
}

/* The command's words quoted and joined by spaces. */
static int ln_join(const struct ln_cmd *c, char *out, size_t len)
{
	size_t n = 0;

	out[0] = '\0';
	for (int i = 0; i < c->argc; i++) {
		char q[2048];

		if (ln_quote(c->argv[i], q, sizeof(q)) || n + strlen(q) + 2 > len)
			return -E2BIG;
		n += (size_t)snprintf(out + n, len - n, "%s%s", i ? " " : "", q);
	}
	return 0;
}

int ln_build_worker(const struct ln_opts *o, unsigned i, int forward, const char *tmp,
		    const char *prefix, struct ln_cmd *c)
{
	struct ln_cmd *w;
	char *line;
	int rc;

	if (!o->n_host)
		return ln_worker_argv(o, i, forward, tmp, prefix, c);
	/* REMOTE-CMD HOST 'worker line': ssh hands the line to the remote shell */
	w = malloc(sizeof(*w));
	line = malloc(sizeof(c->buf));
	rc = w && line ? ln_worker_argv(o, i, forward, tmp, prefix, w) : -ENOMEM;
	if (!rc)
		rc = ln_join(w, line, sizeof(c->buf) / 2);
	if (!rc) {
		c->argc = 0;
		c->used = 0;
		for (unsigned k = 0; k < o->n_remote; k++)
			rc |= ln_add(c, "%s", o->remote[k]);
		rc |= ln_add(c, "%s", o->host[i]);
		rc |= ln_add(c, "%s", line);
		rc = rc ? -E2BIG : 0;
	}
	free(w);
	free(line);
	return rc;
}

void ln_print_cmd(FILE *f, const struct ln_cmd *c)
{
	char *line = malloc(sizeof(c->buf) * 2);

	if (line && !ln_join(c, line, sizeof(c->buf) * 2))
		fprintf(f, "%s\n", line);
	else
		fprintf(f, "(command too long)\n");
	free(line);
}
