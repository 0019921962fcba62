/* SPDX-License-Identifier: Apache-2.0
 * actl_query.c — jobs, keys, workers and stuck chunks, registered here beside their
 * handlers. Each core's engine is walked on its own thread (the backend's exec): the walk
 * copies plain structs into a buffer the main thread allocated (no allocation, no lock on
 * the datapath); the main thread turns them into JSON.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tally_sum.h"
#include "actl_int.h"

#define MISSING_WORDS ((TALLY_MAX_WORKERS + 63) / 64)
#define STUCK_RANKS 64

struct q_arg {
	int has_job;
	uint32_t job_id;
	uint64_t min_age_ns;
	size_t cap, n;       /* entries that fit, entries written */
	uint64_t seen;       /* entries that matched (n < seen: truncated) */
	void *buf;
};

struct q_key {
	struct tally_engine_key_info ki;
	uint64_t missing[MISSING_WORDS];
	unsigned core;
};

struct q_stuck {
	struct tally_engine_stuck_info si; /* missing pointer not valid after the walk */
	unsigned core;
	uint16_t nmissing;   /* ranks missing in total */
	uint16_t ranks[STUCK_RANKS];
};

/* ---- lcore side --------------------------------------------------------------------- */

static int cb_job(void *arg, const struct tally_engine_job_info *ji)
{
	struct q_arg *q = arg;

	if (q->has_job && ji->job_id != q->job_id)
		return 0;
	if (q->n < q->cap)
		((struct tally_engine_job_info *)q->buf)[q->n++] = *ji;
	q->seen++;
	return 0;
}

static int cb_worker(void *arg, const struct tally_engine_worker_info *wi)
{
	struct q_arg *q = arg;

	if (q->has_job && wi->job_id != q->job_id)
		return 0;
	if (q->n < q->cap)
		((struct tally_engine_worker_info *)q->buf)[q->n++] = *wi;
	q->seen++;
	return 0;
}

static int cb_key(void *arg, const struct tally_engine_key_info *ki)
{
	struct q_arg *q = arg;

	if (q->has_job && ki->job_id != q->job_id)
		return 0;
	if (q->n < q->cap) {
		struct q_key *k = &((struct q_key *)q->buf)[q->n++];
		memset(k, 0, sizeof(*k));
		k->ki = *ki;
	}
	q->seen++;
	return 0;
}

/* Open chunks of the keys already copied: OR their missing ranks into the key. */
static int cb_key_missing(void *arg, const struct tally_engine_stuck_info *si)
{
	struct q_arg *q = arg;
	struct q_key *keys = q->buf;

	for (size_t i = 0; i < q->n; i++) {
		if (keys[i].ki.job_id != si->job_id || keys[i].ki.key != si->key)
			continue;
		for (uint32_t w = 0; w < si->missing_words && w < MISSING_WORDS; w++)
			keys[i].missing[w] |= si->missing[w];
		break;
	}
	return 0;
}

static int cb_stuck(void *arg, const struct tally_engine_stuck_info *si)
{
	struct q_arg *q = arg;

	if (q->has_job && si->job_id != q->job_id)
		return 0;
	q->seen++;
	if (q->n >= q->cap)
		return 0;
	struct q_stuck *s = &((struct q_stuck *)q->buf)[q->n++];
	s->si = *si;
	s->si.missing = NULL;
	s->nmissing = 0;
	for (uint32_t w = 0; w < si->missing_words; w++)
		for (uint64_t bits = si->missing[w]; bits; bits &= bits - 1) {
			if (s->nmissing < STUCK_RANKS)
				s->ranks[s->nmissing] = (uint16_t)(w * 64 + (unsigned)__builtin_ctzll(bits));
			s->nmissing++;
		}
	return 0;
}

static int q_jobs(struct tally_engine *e, unsigned core, void *arg)
{
	(void)core;
	return e ? tally_engine_walk_jobs(e, cb_job, arg) : 0;
}

static int q_workers(struct tally_engine *e, unsigned core, void *arg)
{
	(void)core;
	return e ? tally_engine_walk_workers(e, cb_worker, arg) : 0;
}

static int q_keys(struct tally_engine *e, unsigned core, void *arg)
{
	(void)core;
	if (!e)
		return 0;
	int rc = tally_engine_walk_keys(e, cb_key, arg);
	return rc ? rc : tally_engine_walk_stuck(e, 0, cb_key_missing, arg);
}

static int q_stuck(struct tally_engine *e, unsigned core, void *arg)
{
	struct q_arg *q = arg;
	(void)core;
	return e ? tally_engine_walk_stuck(e, q->min_age_ns, cb_stuck, arg) : 0;
}

struct q_keyed {
	uint32_t job_id;
	int keyed;
};

static int q_keyed(struct tally_engine *e, unsigned core, void *arg)
{
	struct q_keyed *k = arg;
	(void)core;
	k->keyed = e ? tally_engine_job_keyed(e, k->job_id) > 0 : 0;
	return 0;
}

/* ---- main thread -------------------------------------------------------------------- */

static int run_query(struct tally_actl *a, unsigned core, tally_actl_engine_fn fn,
		     struct q_arg *q)
{
	return a->ops->exec(a->ctx, core, fn, q);
}

static void fmt_addr(const struct tally_addr *a, char *buf, size_t len)
{
	struct in_addr in = { .s_addr = a->ip };
	char ip[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &in, ip, sizeof(ip));
	snprintf(buf, len, "%s:%u", ip, (unsigned)ntohs(a->port));
}

/* Jobs merged over the cores (every core holds every job; ranks join on one core). */
static json_t *jobs_json(struct tally_actl *a, int has_job, uint32_t job_id, int *err)
{
	struct tally_engine_job_info all[ACTL_MAX_JOBS];
	unsigned nall = 0;
	json_t *arr = json_array();

	*err = 0;
	for (unsigned i = 0; i < actl_ncores(a); i++) {
		struct tally_engine_job_info ji[ACTL_MAX_JOBS];
		struct q_arg q = { .has_job = has_job, .job_id = job_id, .cap = ACTL_MAX_JOBS,
				   .buf = ji };
		int rc = run_query(a, i, q_jobs, &q);
		if (rc < 0) {
			*err = rc;
			json_decref(arr);
			return NULL;
		}
		for (size_t k = 0; k < q.n; k++) {
			unsigned j;
			for (j = 0; j < nall && all[j].job_id != ji[k].job_id; j++)
				;
			if (j == nall) {
				if (nall == ACTL_MAX_JOBS)
					continue;
				all[nall++] = ji[k];
				continue;
			}
			/* a rank may join on several cores: count it once */
			if (ji[k].joined > all[j].joined)
				all[j].joined = ji[k].joined;
			all[j].keys += ji[k].keys; /* a key lives on one core */
			all[j].mem_bytes += ji[k].mem_bytes; /* so do its memory and quotas */
			all[j].quota_keys += ji[k].quota_keys;
			all[j].quota_bytes += ji[k].quota_bytes;
			if (!all[j].incarnation) /* a core the launch has not joined yet says 0 */
				all[j].incarnation = ji[k].incarnation;
			all[j].gone |= ji[k].gone; /* core 0 hears GONE; union anyway */
		}
	}
	for (unsigned j = 0; j < nall; j++) {
		struct actl_job *cj = actl_job_find(a, all[j].job_id, 0);
		json_t *o = json_pack("{s:I, s:I, s:I, s:I, s:s}", "job_id",
				      (json_int_t)all[j].job_id, "world_size",
				      (json_int_t)all[j].world_size, "workers",
				      (json_int_t)all[j].joined, "keys", (json_int_t)all[j].keys,
				      "admission", all[j].open_admission ? "open" : "operator");
		json_t *pol = json_object();
		if (cj && cj->has_quorum)
			json_object_set_new(pol, "quorum", json_integer(cj->quorum));
		if (cj && cj->has_deadline)
			json_object_set_new(pol, "deadline_us", json_integer(cj->deadline_us));
		char inc[24] = "-"; /* 64 bits (a hash): hex text, not a JSON number */
		if (all[j].incarnation)
			snprintf(inc, sizeof(inc), "0x%016llx",
				 (unsigned long long)all[j].incarnation);
		json_object_set_new(o, "incarnation", json_string(inc));
		/* every core holds the job's key (job_add gives it to all): ask core 0 */
		struct q_keyed kq = { .job_id = all[j].job_id };
		a->ops->exec(a->ctx, 0, q_keyed, &kq);
		json_object_set_new(o, "auth", json_string(kq.keyed ? "keyed" : "no_auth"));
		json_object_set_new(o, "mem_bytes", json_integer((json_int_t)all[j].mem_bytes));
		json_object_set_new(o, "quota_keys", json_integer(all[j].quota_keys));
		json_object_set_new(o, "quota_bytes", json_integer((json_int_t)all[j].quota_bytes));
		/* appliances (indices in the job's list) its workers failed over from */
		json_t *gone = json_array();
		for (unsigned b = 0; b < 32; b++)
			if (all[j].gone & (1u << b))
				json_array_append_new(gone, json_integer(b));
		json_object_set_new(o, "gone_appliances", gone);
		json_object_set_new(o, "policy", pol);
		json_array_append_new(arr, o);
	}
	return arr;
}

int actl_h_jobs(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	int err;
	(void)p;
	*r = jobs_json(ctx, 0, 0, &err);
	if (!*r)
		snprintf(m, ml, "cannot read the jobs: %s", strerror(-err));
	return *r ? 0 : err;
}

int actl_h_job_get(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	uint32_t id = (uint32_t)json_integer_value(json_object_get(p, "job_id"));
	int err;
	json_t *arr = jobs_json(ctx, 1, id, &err);

	if (!arr) {
		snprintf(m, ml, "cannot read the jobs: %s", strerror(-err));
		return err;
	}
	if (json_array_size(arr) == 0) {
		json_decref(arr);
		snprintf(m, ml, "no job %u on this appliance", id);
		return -ENOENT;
	}
	*r = json_incref(json_array_get(arr, 0));
	json_decref(arr);
	return 0;
}

static int h_workers(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	struct tally_actl *a = ctx;
	const json_t *jid = json_object_get(p, "job_id");
	size_t cap = 4096;
	struct tally_engine_worker_info *wi = calloc(cap, sizeof(*wi));
	uint64_t now = actl_now_ns();
	char addr[64];

	if (!wi)
		return -ENOMEM;
	*r = json_array();
	for (unsigned i = 0; i < actl_ncores(a); i++) {
		struct q_arg q = { .has_job = jid != NULL, .job_id = (uint32_t)json_integer_value(jid),
				   .cap = cap, .buf = wi };
		int rc = run_query(a, i, q_workers, &q);
		if (rc < 0) {
			snprintf(m, ml, "core %u: %s", i, strerror(-rc));
			free(wi);
			json_decref(*r);
			*r = NULL;
			return rc;
		}
		for (size_t k = 0; k < q.n; k++) {
			fmt_addr(&wi[k].addr, addr, sizeof(addr));
			json_array_append_new(*r, json_pack("{s:I, s:I, s:s, s:i, s:I, s:I, s:I}",
				"job_id", (json_int_t)wi[k].job_id, "rank", (json_int_t)wi[k].rank,
				"addr", addr, "core", (int)i, "last_heard_ms",
				(json_int_t)(now > wi[k].last_heard_ns ?
					     (now - wi[k].last_heard_ns) / 1000000 : 0),
				"pkts", (json_int_t)wi[k].pkts, "rx_bytes", (json_int_t)wi[k].bytes));
		}
	}
	free(wi);
	return 0;
}

static json_t *ranks_json(const uint64_t *bits, unsigned words, unsigned limit)
{
	json_t *a = json_array();

	for (unsigned w = 0; w < words; w++)
		for (uint64_t b = bits[w]; b && json_array_size(a) < limit; b &= b - 1)
			json_array_append_new(a, json_integer(w * 64 + __builtin_ctzll(b)));
	return a;
}

static int h_keys(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	struct tally_actl *a = ctx;
	const json_t *jid = json_object_get(p, "job_id");
	size_t limit = (size_t)json_integer_value(json_object_get(p, "limit"));
	struct q_key *keys = calloc(limit, sizeof(*keys));
	size_t total = 0;

	if (!keys)
		return -ENOMEM;
	*r = json_array();
	for (unsigned i = 0; i < actl_ncores(a) && total < limit; i++) {
		struct q_arg q = { .has_job = jid != NULL, .job_id = (uint32_t)json_integer_value(jid),
				   .cap = limit - total, .buf = keys };
		int rc = run_query(a, i, q_keys, &q);
		if (rc < 0) {
			snprintf(m, ml, "core %u: %s", i, strerror(-rc));
			free(keys);
			json_decref(*r);
			*r = NULL;
			return rc;
		}
		for (size_t k = 0; k < q.n; k++) {
			const struct tally_engine_key_info *ki = &keys[k].ki;
			json_t *o = json_pack("{s:I, s:I, s:i, s:s, s:I, s:I, s:i, s:i, s:b, s:I, s:I}",
				"job_id", (json_int_t)ki->job_id, "key", (json_int_t)ki->key,
				"core", (int)i, "dtype", tally_dtype_name(ki->dtype), "elems",
				(json_int_t)ki->nelems, "chunks", (json_int_t)ki->nchunks,
				"participants", (int)ki->participants, "quorum", (int)ki->quorum,
				"deterministic", ki->deterministic, "deadline_us",
				(json_int_t)ki->deadline_us, "open_rounds", (json_int_t)ki->rounds_open);
			json_t *rounds = json_array();
			for (int s = 0; s < 2; s++)
				if (ki->parity[s].state != TALLY_SLOT_UNUSED)
					json_array_append_new(rounds, json_pack("{s:I, s:s, s:I, s:I}",
						"round", (json_int_t)ki->parity[s].round, "state",
						ki->parity[s].state == TALLY_SLOT_OPEN ? "open" : "complete",
						"chunks_open", (json_int_t)ki->parity[s].chunks_open,
						"chunks_complete",
						(json_int_t)ki->parity[s].chunks_complete));
			json_object_set_new(o, "rounds", rounds);
			json_object_set_new(o, "missing", ranks_json(keys[k].missing, MISSING_WORDS,
								     TALLY_MAX_WORKERS));
			json_object_set_new(o, "mem_bytes", json_integer((json_int_t)ki->mem_bytes));
			json_array_append_new(*r, o);
		}
		total += q.n;
	}
	free(keys);
	return 0;
}

static int stuck_cmp(const void *a, const void *b)
{
	const struct q_stuck *x = a, *y = b;
	return x->si.age_ns < y->si.age_ns ? 1 : x->si.age_ns > y->si.age_ns ? -1 : 0;
}

static int h_stuck(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	struct tally_actl *a = ctx;
	const json_t *jid = json_object_get(p, "job_id");
	size_t limit = (size_t)json_integer_value(json_object_get(p, "limit"));
	uint64_t thr = (uint64_t)json_integer_value(json_object_get(p, "threshold_ms")) * 1000000u;
	size_t cap = limit * actl_ncores(a), n = 0;
	struct q_stuck *st = calloc(cap, sizeof(*st));

	if (!st)
		return -ENOMEM;
	/* each core's oldest `limit`, then the oldest `limit` of all */
	for (unsigned i = 0; i < actl_ncores(a); i++) {
		struct q_arg q = { .has_job = jid != NULL, .job_id = (uint32_t)json_integer_value(jid),
				   .min_age_ns = thr, .cap = limit, .buf = st + n };
		int rc = run_query(a, i, q_stuck, &q);
		if (rc < 0) {
			snprintf(m, ml, "core %u: %s", i, strerror(-rc));
			free(st);
			return rc;
		}
		for (size_t k = 0; k < q.n; k++)
			st[n + k].core = i;
		n += q.n;
	}
	qsort(st, n, sizeof(*st), stuck_cmp);
	*r = json_array();
	for (size_t k = 0; k < n && k < limit; k++) {
		const struct tally_engine_stuck_info *si = &st[k].si;
		json_t *miss = json_array();
		for (unsigned x = 0; x < st[k].nmissing && x < STUCK_RANKS; x++)
			json_array_append_new(miss, json_integer(st[k].ranks[x]));
		json_array_append_new(*r, json_pack("{s:I, s:I, s:I, s:I, s:I, s:i, s:I, s:i, s:i, "
			"s:i, s:o}", "job_id", (json_int_t)si->job_id, "key", (json_int_t)si->key,
			"round", (json_int_t)si->round, "chunk", (json_int_t)si->offset,
			"elems", (json_int_t)si->count, "core", (int)st[k].core,
			"age_ms", (json_int_t)(si->age_ns / 1000000u), "have", (int)si->contrib,
			"need", (int)si->participants, "missing_count", (int)st[k].nmissing,
			"missing", miss));
	}
	free(st);
	return 0;
}

void actl_query_register(struct tally_ctl_backend *b)
{
	b->handlers[TALLY_CTL_M_JOBS_LIST] = actl_h_jobs;
	b->handlers[TALLY_CTL_M_JOB_GET] = actl_h_job_get;
	b->handlers[TALLY_CTL_M_KEYS_LIST] = h_keys;
	b->handlers[TALLY_CTL_M_CHUNKS_STUCK] = h_stuck;
	b->handlers[TALLY_CTL_M_WORKERS_LIST] = h_workers;
}
