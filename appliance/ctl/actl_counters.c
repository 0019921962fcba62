/* SPDX-License-Identifier: Apache-2.0
 * actl_counters.c — the counter blocks generated from their X-macro lists: sum, walk
 * (names), JSON and log line, and the one collect over the cores. `stats`, telemetry and
 * the exit logs print what tally_actl_collect returns, so they cannot disagree.
 */
#include <stdio.h>
#include <string.h>

#include "tally_actl.h"

void tally_actl_engine_stats_add(struct tally_engine_stats *sum, const struct tally_engine_stats *s)
{
#define ADD(f, name, help) sum->f += s->f;
	TALLY_ENGINE_STATS(ADD)
#undef ADD
	for (int k = 0; k < TALLY_R_COUNT; k++)
		sum->drops[k] += s->drops[k];
}

void tally_actl_counters_add(struct tally_actl_counters *sum, const struct tally_actl_counters *c)
{
#define ADD(f, help) sum->io.f += c->io.f;
	TALLY_ACTL_IO_STATS(ADD)
#undef ADD
	for (size_t i = 0; i < TALLY_XPORT_CTL_MAX; i++)
		sum->xport[i] += c->xport[i];
	tally_actl_engine_stats_add(&sum->eng, &c->eng);
	for (int k = 0; k < TALLY_PKT_D_COUNT; k++)
		sum->frame_drops[k] += c->frame_drops[k];
}

/* Each transport's counters as <transport>_<name>. */
static void xport_each(const struct tally_actl_counters *c, tally_actl_counter_fn fn, void *arg)
{
	size_t n = tally_xport_ctl_count();

	for (size_t i = 0; i < n; i++) {
		const char *x = "";
		const struct tally_xport_counter_def *d = tally_xport_ctl_def(i, &x);
		char name[64];

		snprintf(name, sizeof(name), "%s_%s", x, d->name);
		fn(arg, NULL, name, c->xport[i]);
	}
}

void tally_actl_counters_each(const struct tally_actl_counters *c, tally_actl_counter_fn fn,
			      void *arg)
{
#define IO(f, help) fn(arg, NULL, #f, c->io.f);
	TALLY_ACTL_IO_STATS(IO)
#undef IO
#define ENG(f, name, help) fn(arg, NULL, #name, c->eng.f);
	TALLY_ENGINE_STATS(ENG)
#undef ENG
	xport_each(c, fn, arg);
	/* the goodput under its older name, kept for existing readers */
	fn(arg, NULL, "summed_bytes", c->eng.push_bytes);
	for (int k = 1; k < TALLY_R_COUNT; k++) /* 0 is TALLY_OK */
		fn(arg, "drops", tally_reason_name((enum tally_reason)k), c->eng.drops[k]);
	for (int k = 1; k < TALLY_PKT_D_COUNT; k++) /* 0 is TALLY_PKT_D_NONE */
		fn(arg, "frame_drops", tally_pkt_drop_name((enum tally_pkt_drop)k),
		   c->frame_drops[k]);
}

static void json_one(void *arg, const char *group, const char *name, uint64_t v)
{
	json_t *o = arg, *g = group ? json_object_get(o, group) : o;

	if (!g) {
		g = json_object();
		json_object_set_new(o, group, g);
	}
	json_object_set_new(g, name, json_integer((json_int_t)v));
}

json_t *tally_actl_counters_json(const struct tally_actl_counters *c)
{
	json_t *o = json_object();

	if (o)
		tally_actl_counters_each(c, json_one, o);
	return o;
}

struct line {
	char *buf;
	size_t len, n;
	const char *group; /* the group printed last */
};

static void line_one(void *arg, const char *group, const char *name, uint64_t v)
{
	struct line *l = arg;

	if ((group && !v) || l->n >= l->len) /* every counter, the reasons seen */
		return;
	if (group && group != l->group) /* "rejected:" once before the engine's reasons */
		l->n += (size_t)snprintf(l->buf + l->n, l->len - l->n, "%s%s:", l->n ? " " : "",
					 strcmp(group, "drops") ? group : "rejected");
	l->group = group;
	if (l->n < l->len)
		l->n += (size_t)snprintf(l->buf + l->n, l->len - l->n, "%s%s=%llu",
					 l->n ? " " : "", name, (unsigned long long)v);
}

void tally_actl_counters_line(const struct tally_actl_counters *c, char *buf, size_t len)
{
	struct line l = { .buf = buf, .len = len };

	if (!len)
		return;
	buf[0] = '\0';
	tally_actl_counters_each(c, line_one, &l);
}

void tally_actl_collect(const struct tally_actl_ops *ops, void *ctx,
			struct tally_actl_counters *total, struct tally_actl_counters *cores)
{
	unsigned n = ops->ncores(ctx);

	memset(total, 0, sizeof(*total));
	for (unsigned i = 0; i < n; i++) {
		struct tally_actl_counters one;

		memset(&one, 0, sizeof(one));
		ops->collect(ctx, i, &one);
		tally_actl_counters_add(total, &one);
		if (cores)
			cores[i] = one;
	}
}
