/* SPDX-License-Identifier: Apache-2.0
 * agent_tensor.c — the tensor registry: declare (partitions cut from the bytes the stage's
 * keys cover, placed on appliances, REGISTERed through the progress thread), lookup, the
 * per-tensor and start-order settings, the partition listing. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "agent_core.h"
#include "tally_agent.h"
#include "tally_sum.h"

int tally_agent_lookup(struct tally_agent *a, const char *name)
{
	int id = -ENOENT;

	pthread_mutex_lock(&a->mu);
	for (unsigned i = 0; i < a->ntensors; i++)
		if (strcmp(a->tensors[i].name, name) == 0)
			id = (int)i;
	pthread_mutex_unlock(&a->mu);
	return id;
}

static int declare_check(struct tally_agent *a, const char *name, size_t bytes, int dtype)
{
	size_t esz = dtype >= 0 && dtype < TALLY_DT_COUNT ? tally_dtype_size(dtype) : 0;

	if (!name || !*name || strlen(name) >= TALLY_AGENT_NAME_MAX) {
		agent_set_err(a, "declare: tensor name empty or longer than 127 bytes%s", "");
		return -EINVAL;
	}
	if (!esz || bytes == 0 || bytes % esz) {
		agent_errf(a->err, sizeof(a->err), "declare '%s': %zu bytes is not a whole number of "
			   "elements of dtype %d", name, bytes, dtype);
		return -EINVAL;
	}
	return 0;
}

/* A tensor declared before under `name`: its id, -EINVAL if its shape changed, -ENOENT. */
static int declared_locked(struct tally_agent *a, const char *name, size_t bytes, int dtype)
{
	for (unsigned i = 0; i < a->ntensors; i++) {
		const struct agent_tensor *t = &a->tensors[i];

		if (strcmp(t->name, name) != 0)
			continue;
		if (t->bytes == bytes && t->dtype == dtype)
			return (int)i;
		agent_errf(a->err, sizeof(a->err), "tensor '%s' changed shape: declared %zu bytes "
			   "%s, now %zu bytes %s", name, t->bytes, tally_dtype_name(t->dtype), bytes,
			   tally_dtype_name(dtype));
		return -EINVAL;
	}
	return -ENOENT;
}

/* Append a tensor and its partitions (whole elements each; keys in declaration order, the
 * same on every rank); its id or negative errno. */
static int append_locked(struct tally_agent *a, const char *name, size_t bytes, int dtype,
			 int priority)
{
	size_t esz = tally_dtype_size(dtype), kb = a->stage->key_bytes(a->stage_ctx, bytes, dtype);
	size_t pb = a->cfg.partition_bytes / esz * esz;
	unsigned np = (unsigned)((kb + pb - 1) / pb);

	if (a->ntensors == a->cfg.max_tensors) {
		agent_errf(a->err, sizeof(a->err), "declare '%s': more than %u tensors", name,
			   a->cfg.max_tensors);
		return -ENOSPC;
	}
	if ((size_t)a->nparts + np > (size_t)AGENT_PART_BLOCK * AGENT_PART_BLOCKS) {
		agent_errf(a->err, sizeof(a->err), "declare '%s': more than %u partitions in all",
			   name, AGENT_PART_BLOCK * AGENT_PART_BLOCKS);
		return -ENOSPC;
	}
	for (unsigned b = a->nparts / AGENT_PART_BLOCK; b <= (a->nparts + np - 1) / AGENT_PART_BLOCK; b++)
		if (!a->pblk[b] && !(a->pblk[b] = calloc(AGENT_PART_BLOCK, sizeof(struct agent_part))))
			return -ENOMEM;
	struct agent_tensor *t = &a->tensors[a->ntensors];

	memset(t, 0, sizeof(*t));
	/* several appliances: each round's input is kept until it is summed, so a failover
	 * can push it again (agent_failover.c) */
	if (a->plan.n >= 2 && !(t->saved = malloc(kb ? kb : 1))) {
		agent_errf(a->err, sizeof(a->err), "declare '%s': no memory for the %zu bytes kept "
			   "for failover", name, kb);
		return -ENOMEM;
	}
	strcpy(t->name, name);
	t->bytes = bytes;
	t->key_bytes = kb;
	t->dtype = dtype;
	t->priority = priority;
	t->average = a->cfg.average;
	t->ordered = 1;
	t->first_part = a->nparts;
	t->nparts = np;
	for (unsigned i = 0; i < np; i++) {
		struct agent_part *p = part_at(a, a->nparts + i);

		p->key = a->nparts + i;
		p->off = (size_t)i * pb;
		p->bytes = kb - p->off < pb ? kb - p->off : pb;
		p->appl = agent_plan_place(&a->plan, p->bytes);
		p->home = p->appl;
		p->round = 0;
	}
	a->nparts += np;
	return (int)a->ntensors++;
}

/* One registration at a time; the caller reports a->reg_err, then broadcasts a->done. */
int agent_register_sync(struct tally_agent *a, int id, int comp)
{
	int rc;

	while (a->reg_tensor >= 0)
		pthread_cond_wait(&a->done, &a->mu);
	a->reg_tensor = id;
	a->reg_comp = comp;
	a->reg_rc = 1;
	pthread_cond_broadcast(&a->wake);
	while (a->reg_rc == 1)
		pthread_cond_wait(&a->done, &a->mu);
	rc = a->reg_rc;
	a->reg_tensor = -1;
	a->reg_comp = 0;
	return rc;
}

static int register_locked(struct tally_agent *a, int id)
{
	int rc = agent_register_sync(a, id, 0);

	if (rc) {
		agent_errf(a->err, sizeof(a->err), "declare '%s': %s%s", a->tensors[id].name,
			   a->reg_err, rc == -ENOTSUP && a->cfg.deterministic ?
			   " (TALLY_DETERMINISTIC=1 / cfg.deterministic asks for sums in rank "
			   "order: the appliance needs a deterministic pool, tallyd --det-pool SIZE "
			   "or tally-udpd --det-pool BYTES; or unset TALLY_DETERMINISTIC)" : "");
		/* leave it declared (keys are numbered), but unusable */
		a->tensors[id].busy = -1;
	}
	pthread_cond_broadcast(&a->done);
	return rc;
}

/* average < 0: cfg.average. */
static int declare(struct tally_agent *a, const char *name, size_t bytes, int dtype,
		   int priority, int average)
{
	int rc, id;

	if ((rc = declare_check(a, name, bytes, dtype)))
		return rc;
	pthread_mutex_lock(&a->mu);
	if ((id = declared_locked(a, name, bytes, dtype)) == -ENOENT &&
	    (id = append_locked(a, name, bytes, dtype, priority)) >= 0) {
		if (average >= 0) /* before REGISTER: its keys may be averaged by the appliance */
			a->tensors[id].average = average != 0;
		if ((rc = register_locked(a, id)))
			id = rc;
	}
	pthread_mutex_unlock(&a->mu);
	return id;
}

int tally_agent_declare(struct tally_agent *a, const char *name, size_t bytes, int dtype,
			int priority)
{
	return declare(a, name, bytes, dtype, priority, -1);
}

int tally_agent_declare_avg(struct tally_agent *a, const char *name, size_t bytes, int dtype,
			    int priority, int average)
{
	return declare(a, name, bytes, dtype, priority, average != 0);
}

int tally_agent_appliance_averages(const struct tally_agent *a)
{
	for (unsigned i = 0; i < a->cfg.nappliances; i++)
		if (!agent_avg_ok(a, i))
			return 0;
	return 1;
}

enum { FLAG_AVERAGE, FLAG_ORDERED };

/* Set a per-tensor flag; 0 or -ENOENT. */
static int set_flag(struct tally_agent *a, int tensor, int flag, int on)
{
	struct agent_tensor *t;
	int rc = -ENOENT;

	pthread_mutex_lock(&a->mu);
	if ((t = tensor_at(a, tensor))) {
		rc = 0;
		/* keys registered averaged give back averages only: no sum to return */
		for (unsigned i = 0; flag == FLAG_AVERAGE && !on && i < t->nparts; i++)
			if (part_at(a, t->first_part + i)->avg)
				rc = -EINVAL;
		if (rc)
			agent_errf(a->err, sizeof(a->err), "set_average(0) on tensor '%s': its keys "
				   "are registered averaged (the appliance averages f16/bf16 before "
				   "rounding); declare it with tally_agent_declare_avg(..., 0) for sums",
				   t->name);
		else
			*(flag == FLAG_ORDERED ? &t->ordered : &t->average) = on != 0;
	}
	pthread_mutex_unlock(&a->mu);
	return rc;
}

int tally_agent_set_average(struct tally_agent *a, int tensor, int average)
{
	return set_flag(a, tensor, FLAG_AVERAGE, average);
}

int tally_agent_set_ordered(struct tally_agent *a, int tensor, int ordered)
{
	return set_flag(a, tensor, FLAG_ORDERED, ordered);
}

int tally_agent_set_order(struct tally_agent *a, int mode)
{
	int rc = 0;

	if (mode != TALLY_AGENT_ORDER_ROUNDS && mode != TALLY_AGENT_ORDER_SUBMIT)
		return -EINVAL;
	pthread_mutex_lock(&a->mu);
	/* the queue's keys mean another thing in each mode: never mix them */
	for (unsigned i = 0; i < a->cfg.max_handles && !rc; i++)
		if (a->reqs[i].state == REQ_PENDING)
			rc = -EBUSY;
	if (rc)
		agent_set_err(a, "set_order: push_pulls pending%s", "");
	else
		a->order_mode = mode;
	pthread_mutex_unlock(&a->mu);
	return rc;
}

int tally_agent_partitions(struct tally_agent *a, int tensor, struct tally_agent_part *out,
			   unsigned max)
{
	const struct agent_tensor *t;
	int n = -ENOENT;

	pthread_mutex_lock(&a->mu);
	if ((t = tensor_at(a, tensor))) {
		for (unsigned i = 0; i < t->nparts && i < max; i++) {
			const struct agent_part *p = part_at(a, t->first_part + i);
			out[i] = (struct tally_agent_part){p->key, p->appl, p->off, p->bytes};
		}
		n = (int)t->nparts;
	}
	pthread_mutex_unlock(&a->mu);
	return n;
}
