/* SPDX-License-Identifier: Apache-2.0
 * actl_jobs.c — control methods that change the appliance: job_add, job_evict,
 * job_set_policy, drain, shutdown, log level and config_save, registered here beside their
 * handlers. Changes run on each engine's own thread (the backend's exec/exec_all).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <syslog.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "actl_int.h"
#include "tally_auth.h"

static const char *const level_names[] = { [LOG_ERR] = "error", [LOG_WARNING] = "warning",
					   [LOG_NOTICE] = "notice", [LOG_INFO] = "info",
					   [LOG_DEBUG] = "debug" };
#define NLEVELS ((int)(sizeof(level_names) / sizeof(level_names[0])))

struct job_arg {
	uint32_t job_id, world_size;
	uint64_t token;
	uint32_t quota_keys;       /* per core (the appliance's split over its cores) */
	uint64_t quota_bytes;
	int has_key;
	uint8_t key[TALLY_AUTH_KEY_LEN];
	uint64_t run;              /* one run nonce for every core (tally_engine_job_run) */
};

static int e_job_add(struct tally_engine *e, unsigned core, void *arg)
{
	const struct job_arg *j = arg;
	(void)core;
	if (!e)
		return -ENOTSUP;
	int rc = tally_engine_job_add(e, j->job_id, j->token, j->world_size);
	if (rc == 0)
		rc = tally_engine_job_quota(e, j->job_id, j->quota_keys, j->quota_bytes);
	if (rc == 0 && j->has_key)
		rc = tally_engine_job_key(e, j->job_id, j->key);
	if (rc == 0 && j->has_key)
		rc = tally_engine_job_run(e, j->job_id, j->run);
	return rc;
}

/* The key_file of job_add: read here, by the appliance, so the key crosses no socket.
 * Operator-admitted jobs are authenticated unless the request says no_auth (issue 14), so
 * a job with neither, or both, is refused before anything changes. 0 (read, or no_auth),
 * or -EINVAL with the message naming the way out. */
static int job_key_load(const json_t *p, struct job_arg *j, char *m, size_t ml)
{
	const char *path = json_string_value(json_object_get(p, "key_file"));
	int no_auth = json_is_true(json_object_get(p, "no_auth"));
	char err[256];

	if (!path && !no_auth) {
		snprintf(m, ml, "job %u: operator-admitted jobs are authenticated by default: "
			 "give --key-file FILE (a 32-byte hex key: openssl rand -hex 32 > FILE, "
			 "mode 0600) or --no-auth for an unauthenticated job on a trusted fabric",
			 j->job_id);
		return -EINVAL;
	}
	if (path && no_auth) {
		snprintf(m, ml, "job %u: give either --key-file or --no-auth, not both",
			 j->job_id);
		return -EINVAL;
	}
	if (!path)
		return 0;
	if (strlen(path) >= sizeof(((struct actl_job *)0)->key_file)) {
		snprintf(m, ml, "key_file: path longer than 255 bytes");
		return -EINVAL;
	}
	if (path[0] != '/') {
		snprintf(m, ml, "key_file '%s': give an absolute path (the appliance reads it)",
			 path);
		return -EINVAL;
	}
	if (tally_auth_key_load(path, j->key, err, sizeof(err)) < 0) {
		snprintf(m, ml, "job %u: %s", j->job_id, err);
		return -EINVAL;
	}
	if (getrandom(&j->run, sizeof(j->run), 0) != (ssize_t)sizeof(j->run) || !j->run) {
		snprintf(m, ml, "job %u: getrandom failed for the run nonce", j->job_id);
		return -EIO;
	}
	j->has_key = 1;
	return 0;
}

static int e_job_remove(struct tally_engine *e, unsigned core, void *arg)
{
	const struct job_arg *j = arg;
	(void)core;
	return e ? tally_engine_job_remove(e, j->job_id) : -ENOTSUP;
}

static int h_job_add(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	struct tally_actl *a = ctx;
	struct job_arg j = { 0 };
	int rc;

	if (tally_ctl_get_u64(p, "token", &j.token))
		return -EINVAL;
	j.job_id = (uint32_t)json_integer_value(json_object_get(p, "job_id"));
	j.world_size = (uint32_t)json_integer_value(json_object_get(p, "world_size"));
	uint64_t qb = 0;
	uint32_t qk = (uint32_t)json_integer_value(json_object_get(p, "quota_keys"));
	if (json_object_get(p, "quota_bytes") && tally_ctl_get_u64(p, "quota_bytes", &qb))
		return -EINVAL;
	/* keys and their memory are spread over the cores (key % cores): so is the quota */
	unsigned nc = actl_ncores(a) ? actl_ncores(a) : 1;
	j.quota_keys = (uint32_t)((qk + nc - 1) / nc);
	j.quota_bytes = (qb + nc - 1) / nc;
	rc = job_key_load(p, &j, m, ml);
	if (rc)
		return rc;
	rc = a->ops->exec_all(a->ctx, e_job_add, &j);
	OPENSSL_cleanse(j.key, sizeof(j.key));
	if (rc) {
		snprintf(m, ml, rc == -EEXIST ? "job %u exists with another token, world size or "
			 "key" : rc == -ENOSPC ? "job %u: no room for another job"
			 : "job %u: cannot be added", j.job_id);
		if (rc != -EEXIST) /* do not leave it on some cores only */
			a->ops->exec_all(a->ctx, e_job_remove, &j);
		return rc;
	}
	struct actl_job *aj = actl_job_find(a, j.job_id, 1);
	if (aj) {
		const char *kf = json_string_value(json_object_get(p, "key_file"));
		aj->admitted = 1;
		aj->token = j.token;
		aj->world_size = j.world_size;
		aj->quota_keys = qk;
		aj->quota_bytes = qb;
		/* config_save names the file, never the key */
		snprintf(aj->key_file, sizeof(aj->key_file), "%s", kf ? kf : "");
		aj->no_auth = !j.has_key;
	}
	*r = json_pack("{s:I, s:I, s:b}", "job_id", (json_int_t)j.job_id, "world_size",
		       (json_int_t)j.world_size, "authenticated", j.has_key);
	return 0;
}

static int h_job_evict(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	struct tally_actl *a = ctx;
	struct job_arg j = { .job_id = (uint32_t)json_integer_value(json_object_get(p, "job_id")) };
	json_t *cur;
	int rc = actl_h_job_get(a, p, &cur, m, ml); /* ENOENT with its message */

	if (rc)
		return rc;
	json_int_t nkeys = json_integer_value(json_object_get(cur, "keys"));
	json_decref(cur);
	rc = a->ops->exec_all(a->ctx, e_job_remove, &j);
	if (rc && rc != -ENOENT) {
		snprintf(m, ml, "job %u: eviction failed: %s", j.job_id, strerror(-rc));
		return rc;
	}
	struct actl_job *aj = actl_job_find(a, j.job_id, 0);
	if (aj)
		memset(aj, 0, sizeof(*aj));
	*r = json_pack("{s:I, s:I}", "job_id", (json_int_t)j.job_id, "keys_freed", nkeys);
	return 0;
}

/* What a policy change needs to know of the job's keys, gathered on each engine. */
struct pol_check {
	uint32_t job_id, key;
	int has_key;
	unsigned core;          /* where the walk runs (set per exec) */
	uint32_t nkeys;         /* keys the change applies to */
	uint16_t min_part;      /* fewest participants among them, and whose */
	uint32_t min_key;
	unsigned key_core;      /* has_key: the key's core, quorum and deadline */
	uint16_t key_quorum;
	uint32_t key_deadline_us;
};

static int cb_pol(void *arg, const struct tally_engine_key_info *ki)
{
	struct pol_check *pc = arg;

	if (ki->job_id != pc->job_id || (pc->has_key && ki->key != pc->key))
		return 0;
	if (!pc->nkeys++ || ki->participants < pc->min_part) {
		pc->min_part = ki->participants;
		pc->min_key = ki->key;
	}
	pc->key_core = pc->core;
	pc->key_quorum = ki->quorum;
	pc->key_deadline_us = ki->deadline_us;
	return 0;
}

static int e_pol_check(struct tally_engine *e, unsigned core, void *arg)
{
	struct pol_check *pc = arg;

	pc->core = core;
	return e ? tally_engine_walk_keys(e, cb_pol, pc) : 0;
}

struct pol_arg {
	uint32_t job_id, key, deadline_us;
	int set_quorum, set_deadline;
	uint16_t quorum;
};

static int e_job_policy(struct tally_engine *e, unsigned core, void *arg)
{
	const struct pol_arg *pa = arg;
	(void)core;
	if (!e)
		return -ENOTSUP;
	int rc = tally_engine_job_policy(e, pa->job_id, pa->set_quorum, pa->quorum,
					 pa->set_deadline, pa->deadline_us);
	return rc == -ENOENT ? 0 : rc; /* an open-admission job not on this core yet */
}

static int e_key_policy(struct tally_engine *e, unsigned core, void *arg)
{
	const struct pol_arg *pa = arg;
	(void)core;
	return e ? tally_engine_key_policy(e, pa->job_id, pa->key, pa->quorum, pa->deadline_us)
		 : -ENOTSUP;
}

/* Checks the keys a change applies to: all or none change. */
static int policy_check(struct tally_actl *a, const json_t *p, struct pol_check *pc, char *m,
			size_t ml)
{
	const json_t *jk = json_object_get(p, "key"), *jq = json_object_get(p, "quorum");

	for (unsigned i = 0; i < actl_ncores(a); i++) {
		int rc = a->ops->exec(a->ctx, i, e_pol_check, pc);
		if (rc) {
			snprintf(m, ml, "job %u: cannot read its keys: %s", pc->job_id, strerror(-rc));
			return rc;
		}
	}
	if (jk && !pc->nkeys) {
		snprintf(m, ml, "job %u has no key %lld", pc->job_id, (long long)json_integer_value(jk));
		return -ENOENT;
	}
	if (jq && pc->nkeys && json_integer_value(jq) > pc->min_part) {
		snprintf(m, ml, "quorum %lld is more than key %u's %u participants",
			 (long long)json_integer_value(jq), pc->min_key, pc->min_part);
		return -EINVAL;
	}
	return 0;
}

static void policy_remember(struct tally_actl *a, const struct pol_arg *pa)
{
	struct actl_job *aj = actl_job_find(a, pa->job_id, 1);

	if (aj && pa->set_quorum) {
		aj->has_quorum = 1;
		aj->quorum = pa->quorum;
	}
	if (aj && pa->set_deadline) {
		aj->has_deadline = 1;
		aj->deadline_us = pa->deadline_us;
	}
}

static int h_policy(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	struct tally_actl *a = ctx;
	const json_t *jk = json_object_get(p, "key"), *jq = json_object_get(p, "quorum");
	const json_t *jd = json_object_get(p, "deadline_us");
	struct pol_check pc = { .job_id = (uint32_t)json_integer_value(json_object_get(p, "job_id")),
				.has_key = jk != NULL, .key = (uint32_t)json_integer_value(jk) };
	struct pol_arg pa = { .job_id = pc.job_id, .key = pc.key, .set_quorum = jq != NULL,
			      .quorum = (uint16_t)json_integer_value(jq), .set_deadline = jd != NULL,
			      .deadline_us = (uint32_t)json_integer_value(jd) };
	json_t *cur;
	int rc;

	if (json_object_get(p, "deterministic")) {
		snprintf(m, ml, "deterministic is fixed when a key is registered (workers ask for it "
			 "in REGISTER); this appliance cannot change it for job %u", pc.job_id);
		return -EOPNOTSUPP;
	}
	if ((rc = actl_h_job_get(a, p, &cur, m, ml)))
		return rc;
	json_decref(cur);
	if ((rc = policy_check(a, p, &pc, m, ml)))
		return rc;
	if (jk) { /* one key, on its core; it keeps this policy until a job-wide change */
		if (!jq)
			pa.quorum = pc.key_quorum;
		else if (!pa.quorum)
			pa.quorum = pc.min_part; /* 0: all participants */
		if (!jd)
			pa.deadline_us = pc.key_deadline_us;
		rc = a->ops->exec(a->ctx, pc.key_core, e_key_policy, &pa);
	} else { /* stored on every engine's job: later keys start with it */
		rc = a->ops->exec_all(a->ctx, e_job_policy, &pa);
	}
	if (rc) {
		snprintf(m, ml, "job %u: policy: %s", pc.job_id, strerror(-rc));
		return rc;
	}
	if (!jk)
		policy_remember(a, &pa);
	*r = json_pack("{s:I, s:i}", "job_id", (json_int_t)pc.job_id, "keys_changed",
		       (int)pc.nkeys);
	if (jq)
		json_object_set(*r, "quorum", (json_t *)jq);
	if (jd)
		json_object_set(*r, "deadline_us", (json_t *)jd);
	return 0;
}

static int h_drain(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	struct tally_actl *a = ctx;
	uint64_t timeout_ms = (uint64_t)json_integer_value(json_object_get(p, "timeout_ms"));
	uint64_t end = actl_now_ns() + timeout_ms * 1000000u, rounds = 0, chunks = 0;
	int rc = a->ops->drain(a->ctx);

	if (rc) {
		snprintf(m, ml, "drain: %s", strerror(-rc));
		return rc;
	}
	/* waiting here holds other control clients, never the datapath */
	while ((rc = actl_open_work(a, &rounds, &chunks)) == 0 && rounds &&
	       actl_now_ns() < end && !a->ops->quitting(a->ctx))
		usleep(5000);
	if (rc) {
		snprintf(m, ml, "drain: %s", strerror(-rc));
		return rc;
	}
	*r = json_pack("{s:b, s:I, s:I}", "draining", 1, "open_rounds", (json_int_t)rounds,
		       "open_chunks", (json_int_t)chunks);
	return 0;
}

static int h_shutdown(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	struct tally_actl *a = ctx;
	int drain = json_is_true(json_object_get(p, "drain"));
	(void)m; (void)ml;

	a->ops->shutdown(a->ctx, drain); /* the main loop drains (or not) and exits */
	*r = json_pack("{s:b, s:b}", "stopping", 1, "drain", drain);
	return 0;
}

static int h_log_level(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	struct tally_actl *a = ctx;
	const char *name = json_string_value(json_object_get(p, "level"));
	int lvl = -1, prev;

	for (int i = 0; i < NLEVELS; i++)
		if (level_names[i] && !strcmp(level_names[i], name))
			lvl = i;
	if (lvl < 0) {
		snprintf(m, ml, "level: unknown '%s'", name);
		return -EINVAL;
	}
	prev = a->ops->set_log_level(a->ctx, lvl);
	a->log_level_set = 1;
	snprintf(a->log_level, sizeof(a->log_level), "%s", name);
	*r = json_pack("{s:s, s:s}", "level", name, "previous",
		       prev >= 0 && prev < NLEVELS && level_names[prev] ? level_names[prev] : "other");
	return 0;
}

static json_t *policy_call(const struct actl_job *j)
{
	json_t *pp = json_pack("{s:I}", "job_id", (json_int_t)j->job_id);

	if (j->has_quorum)
		json_object_set_new(pp, "quorum", json_integer(j->quorum));
	if (j->has_deadline)
		json_object_set_new(pp, "deadline_us", json_integer(j->deadline_us));
	return json_pack("{s:s, s:o}", "method", "job_set_policy", "params", pp);
}

static int h_config_save(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	struct tally_actl *a = ctx;
	json_t *calls = json_array();
	char tok[24];
	(void)p; (void)m; (void)ml;

	if (a->log_level_set)
		json_array_append_new(calls, json_pack("{s:s, s:{s:s}}", "method", "log_set_level",
						       "params", "level", a->log_level));
	for (int i = 0; i < ACTL_MAX_JOBS; i++) {
		const struct actl_job *j = &a->jobs[i];
		if (!j->used || !j->admitted)
			continue;
		snprintf(tok, sizeof(tok), "0x%016" PRIx64, j->token);
		json_t *c = json_pack("{s:s, s:{s:I, s:s, s:I}}", "method",
			"job_add", "params", "job_id", (json_int_t)j->job_id, "token", tok,
			"world_size", (json_int_t)j->world_size);
		json_t *cp = json_object_get(c, "params");
		if (j->quota_keys)
			json_object_set_new(cp, "quota_keys", json_integer(j->quota_keys));
		if (j->quota_bytes)
			json_object_set_new(cp, "quota_bytes", json_integer((json_int_t)j->quota_bytes));
		if (j->key_file[0])
			json_object_set_new(cp, "key_file", json_string(j->key_file));
		else /* replayed as it was: job_add refuses a job with neither */
			json_object_set_new(cp, "no_auth", json_true());
		json_array_append_new(calls, c);
	}
	for (int i = 0; i < ACTL_MAX_JOBS; i++) /* policies after every job they refer to */
		if (a->jobs[i].used && (a->jobs[i].has_quorum || a->jobs[i].has_deadline))
			json_array_append_new(calls, policy_call(&a->jobs[i]));
	*r = json_pack("{s:o}", "calls", calls);
	return 0;
}

void actl_jobs_register(struct tally_ctl_backend *b)
{
	b->handlers[TALLY_CTL_M_JOB_ADD] = h_job_add;
	b->handlers[TALLY_CTL_M_JOB_EVICT] = h_job_evict;
	b->handlers[TALLY_CTL_M_JOB_SET_POLICY] = h_policy;
	b->handlers[TALLY_CTL_M_APPLIANCE_DRAIN] = h_drain;
	b->handlers[TALLY_CTL_M_APPLIANCE_SHUTDOWN] = h_shutdown;
	b->handlers[TALLY_CTL_M_LOG_SET_LEVEL] = h_log_level;
	b->handlers[TALLY_CTL_M_CONFIG_SAVE] = h_config_save;
}
