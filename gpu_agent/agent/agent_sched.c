/* SPDX-License-Identifier: Apache-2.0
 * agent_sched.c — the ByteScheduler queue: a binary min-heap of ready partitions ordered by
 * (round, priority, partition index), and the credit rule. */
#include <errno.h>
#include <stdlib.h>

#include "agent_internal.h"

int agent_sched_init(struct agent_sched *s, unsigned cap)
{
	s->items = calloc(cap, sizeof(*s->items));
	s->cap = cap;
	s->n = 0;
	return s->items ? 0 : -ENOMEM;
}

void agent_sched_free(struct agent_sched *s)
{
	free(s->items);
	s->items = NULL;
	s->cap = s->n = 0;
}

static int before(const struct agent_sched_item *a, const struct agent_sched_item *b)
{
	/* round first: the global start order (agent_progress.c) is round by round */
	if (a->seq != b->seq)
		return a->seq < b->seq;
	if (a->priority != b->priority)
		return a->priority < b->priority;
	return a->part < b->part;
}

int agent_sched_push(struct agent_sched *s, const struct agent_sched_item *it)
{
	unsigned i;

	if (s->n == s->cap) {
		unsigned cap = s->cap ? s->cap * 2 : 64;
		struct agent_sched_item *n = realloc(s->items, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		s->items = n;
		s->cap = cap;
	}
	i = s->n++;
	while (i > 0) {
		unsigned parent = (i - 1) / 2;

		if (!before(it, &s->items[parent]))
			break;
		s->items[i] = s->items[parent];
		i = parent;
	}
	s->items[i] = *it;
	return 0;
}

const struct agent_sched_item *agent_sched_peek(const struct agent_sched *s)
{
	return s->n ? &s->items[0] : NULL;
}

void agent_sched_pop(struct agent_sched *s, struct agent_sched_item *out)
{
	struct agent_sched_item last;
	unsigned i = 0;

	*out = s->items[0];
	last = s->items[--s->n];
	for (;;) {
		unsigned l = 2 * i + 1, r = l + 1, m = i;
		const struct agent_sched_item *best = &last;

		if (l < s->n && before(&s->items[l], best)) {
			m = l;
			best = &s->items[l];
		}
		if (r < s->n && before(&s->items[r], best))
			m = r;
		if (m == i)
			break;
		s->items[i] = s->items[m];
		i = m;
	}
	if (s->n)
		s->items[i] = last;
}

int agent_sched_may_start(size_t inflight, size_t bytes, size_t credit)
{
	/* One partition may always start, so a partition larger than the window still goes. */
	return inflight == 0 || inflight + bytes <= credit;
}
