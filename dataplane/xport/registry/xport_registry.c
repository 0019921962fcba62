/* SPDX-License-Identifier: Apache-2.0
 * xport_registry.c — the transport registry: registration, lookup by name with an error
 * that names the setting and the known transports, settings applied from a program's
 * lookup, and the calls over an open transport. See tally_xport_reg.h.
 */
#include "tally_xport_reg.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tally_client.h"

/* Transports a full build has, and what a build needs for each: only for the error when
 * this program lacks one. Generated from dataplane/meson.build's list tally_xports, the one
 * that builds them (xport_known.h). */
#define XPORT_KNOWN(n, a, needs) { n, a, needs },
#include "xport_known.h"
static const struct {
	const char *name, *alias, *needs;
} xport_known[] = { TALLY_XPORT_KNOWN(XPORT_KNOWN) };

static const struct tally_xport_impl *xport_tab[TALLY_XPORT_MAX];
static unsigned xport_n;

const struct tally_xport_impl *tally_xport_impl_at(unsigned i)
{
	return i < xport_n ? xport_tab[i] : NULL;
}

int tally_xport_register(const struct tally_xport_impl *impl)
{
	for (unsigned i = 0; i < xport_n; i++)
		if (!strcmp(xport_tab[i]->name, impl->name))
			return xport_tab[i] == impl ? 0 : -EEXIST;
	if (xport_n >= TALLY_XPORT_MAX)
		return -ENOSPC;
	xport_tab[xport_n++] = impl;
	return 0;
}

static int xport_is(const char *name, const char *n, const char *alias)
{
	return !strcmp(name, n) || (alias && !strcmp(name, alias));
}

const char *tally_xport_names(char *buf, size_t len)
{
	size_t off = 0;

	if (!len)
		return buf;
	buf[0] = 0;
	for (unsigned i = 0; i < xport_n && off < len; i++) {
		int w = snprintf(buf + off, len - off, "%s%s", i ? ", " : "", xport_tab[i]->name);

		off += w > 0 ? (size_t)w : 0;
	}
	return buf;
}

const struct tally_xport_impl *tally_xport_lookup(const char *name, const char *setting,
						  char *err, size_t errlen)
{
	char names[128];

	if (!setting)
		setting = "transport";
	for (unsigned i = 0; name && i < xport_n; i++)
		if (xport_is(name, xport_tab[i]->name, xport_tab[i]->alias))
			return xport_tab[i];
	tally_xport_names(names, sizeof(names));
	for (size_t i = 0; name && i < sizeof(xport_known) / sizeof(xport_known[0]); i++)
		if (xport_is(name, xport_known[i].name, xport_known[i].alias)) {
			snprintf(err, errlen, "%s: this program was built without the %s transport "
				 "(it needs %s); it has: %s", setting, xport_known[i].name,
				 xport_known[i].needs, names);
			return NULL;
		}
	snprintf(err, errlen, "%s='%s': unknown transport: want one of %s", setting,
		 name ? name : "", names);
	return NULL;
}

int tally_xport_opts_env(const char *name, struct tally_xport_opts *o,
			 char *(*get)(const char *), char *err, size_t errlen)
{
	const struct tally_xport_impl *t = tally_xport_lookup(name, NULL, err, errlen);
	int rc;

	if (!t)
		return -ENOENT;
	for (const char *const *s = t->settings; s && *s && get; s++) {
		const char *v = get(*s);

		if (v && *v && t->setting && (rc = t->setting(o, *s, v, err, errlen)))
			return rc;
	}
	return 0;
}

int tally_xport_open(const char *name, const char *setting, const struct tally_xport_opts *o,
		     struct tally_xport *x, char *err, size_t errlen)
{
	const struct tally_xport_impl *t = tally_xport_lookup(name, setting, err, errlen);
	int rc = 0;

	memset(x, 0, sizeof(*x));
	if (!t)
		return -ENOTSUP;
	if (o->per_core && !t->attach) {
		snprintf(err, errlen, "%s: the %s transport has no per-core listening",
			 setting ? setting : "transport", t->name);
		return -ENOTSUP;
	}
	x->ctx = t->open(o, &rc, err, errlen);
	if (!x->ctx)
		return rc ? rc : -EINVAL;
	x->impl = t;
	x->ops = t->ops(x->ctx);
	return 0;
}

void tally_xport_close(struct tally_xport *x)
{
	if (x->impl && x->ctx)
		x->impl->close(x->ctx);
	memset(x, 0, sizeof(*x));
}

void tally_xport_set_rx(struct tally_xport *x, const struct tally_xport_rx *rx)
{
	x->impl->set_rx(x->ctx, rx);
}

static void xport_client_rx(void *arg, const void *buf, size_t len, const struct tally_addr *from)
{
	(void)from;
	tally_client_rx(arg, buf, len);
}

static void xport_client_placed(void *arg, const void *hdr, size_t hlen, const void *payload,
				size_t plen)
{
	tally_client_rx_placed(arg, hdr, hlen, payload, plen);
}

void tally_xport_attach_client(struct tally_xport *x, struct tally_client *c)
{
	const struct tally_xport_rx rx = { .rx = xport_client_rx, .placed = xport_client_placed,
					   .arg = c };

	tally_xport_set_rx(x, &rx);
}

int tally_xport_flush(struct tally_xport *x)
{
	return x->impl && x->impl->flush ? x->impl->flush(x->ctx) : 0;
}

int tally_xport_setup_authed(const struct tally_xport *x)
{
	return x->impl && x->impl->setup_authed ? x->impl->setup_authed(x->ctx) : 0;
}

int tally_xport_set_gso(struct tally_xport *x, int on)
{
	return x->impl && x->impl->set_gso ? x->impl->set_gso(x->ctx, on) : -EOPNOTSUPP;
}

int tally_xport_gso(const struct tally_xport *x)
{
	return x->impl && x->impl->gso ? x->impl->gso(x->ctx) : 0;
}

unsigned tally_xport_conns(const struct tally_xport *x)
{
	return x->impl && x->impl->conns ? x->impl->conns(x->ctx) : 0;
}

size_t tally_xport_counters(const struct tally_xport *x, struct tally_xport_counter *out,
			    size_t max)
{
	return x->impl && x->impl->counters ? x->impl->counters(x->ctx, out, max) : 0;
}

size_t tally_xport_counters_copy(struct tally_xport_counter *out, size_t max,
				 const struct tally_xport_counter *all, size_t n)
{
	n = n < max ? n : max;
	memcpy(out, all, n * sizeof(*out));
	return n;
}

const char *tally_xport_strerror(const struct tally_xport *x)
{
	return x->impl && x->impl->strerror ? x->impl->strerror(x->ctx) : "";
}

int tally_xport_counter_get(const struct tally_xport *x, const char *name, uint64_t *v)
{
	struct tally_xport_counter ct[64];
	uint64_t cv[TALLY_XPORT_CTL_MAX];
	size_t n = tally_xport_counters(x, ct, 64);

	for (size_t i = 0; i < n; i++)
		if (!strcmp(ct[i].name, name)) {
			*v = ct[i].value;
			return 0;
		}
	/* then the control plane's (a listener's refusals, conns_rejected, are only there) */
	if (!x->impl || !x->impl->ctl_counters || x->impl->nctl > TALLY_XPORT_CTL_MAX)
		return -ENOENT;
	x->impl->ctl_counters(x->ctx, cv);
	for (size_t i = 0; i < x->impl->nctl; i++)
		if (!strcmp(x->impl->ctl_defs[i].name, name)) {
			*v = cv[i];
			return 0;
		}
	return -ENOENT;
}

void tally_xport_opts_defaults(const char *name, struct tally_xport_opts *o)
{
	char err[160];
	const struct tally_xport_impl *t = tally_xport_lookup(name, NULL, err, sizeof(err));

	if (t && t->defaults)
		t->defaults(o);
}

int tally_xport_events(struct tally_xport *x)
{
	return x->impl && x->impl->events ? x->impl->events(x->ctx) : 0;
}
