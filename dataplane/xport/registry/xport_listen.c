/* SPDX-License-Identifier: Apache-2.0
 * xport_listen.c — the registry's appliance side: per-core listening over open transports
 * (hand-off, attach, the listener's round, accept and refuse on a core) and the counters
 * the control plane shows for every registered transport. See tally_xport_reg.h.
 */
#include "tally_xport_reg.h"

#include <errno.h>
#include <string.h>

int tally_xport_set_handoff(struct tally_xport *l, tally_xport_handoff_fn fn, void *arg)
{
	if (!l->impl || !l->impl->set_handoff)
		return -ENOTSUP;
	l->impl->set_handoff(l->ctx, fn, arg);
	return 0;
}

int tally_xport_attach(struct tally_xport *l, unsigned core, struct tally_xport *c)
{
	if (!l->impl || !l->impl->attach || c->impl != l->impl)
		return -ENOTSUP;
	return l->impl->attach(l->ctx, core, c->ctx);
}

int tally_xport_listen_poll(struct tally_xport *l)
{
	return l->impl && l->impl->listen_poll ? l->impl->listen_poll(l->ctx) : 0;
}

void tally_xport_accept(struct tally_xport *c, const struct tally_xport_req *req)
{
	c->impl->accept(c->ctx, req);
}

void tally_xport_refuse(const struct tally_xport *x, const struct tally_xport_req *req)
{
	x->impl->refuse(req);
}

size_t tally_xport_ctl_count(void)
{
	const struct tally_xport_impl *t;
	size_t n = 0;

	for (unsigned i = 0; (t = tally_xport_impl_at(i)); i++)
		n += t->nctl;
	return n < TALLY_XPORT_CTL_MAX ? n : TALLY_XPORT_CTL_MAX;
}

const struct tally_xport_counter_def *tally_xport_ctl_def(size_t i, const char **xport)
{
	const struct tally_xport_impl *t;

	for (unsigned k = 0; (t = tally_xport_impl_at(k)); k++) {
		if (i < t->nctl) {
			*xport = t->name;
			return &t->ctl_defs[i];
		}
		i -= t->nctl;
	}
	return NULL;
}

void tally_xport_ctl_add(const struct tally_xport *x, uint64_t *v)
{
	const struct tally_xport_impl *t;
	uint64_t one[TALLY_XPORT_CTL_MAX];
	size_t base = 0;

	if (!x->impl || !x->impl->ctl_counters)
		return;
	for (unsigned k = 0; (t = tally_xport_impl_at(k)) && t != x->impl; k++)
		base += t->nctl;
	if (base + x->impl->nctl > TALLY_XPORT_CTL_MAX)
		return;
	x->impl->ctl_counters(x->ctx, one);
	for (size_t i = 0; i < x->impl->nctl; i++)
		v[base + i] += one[i];
}
