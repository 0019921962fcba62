/* SPDX-License-Identifier: Apache-2.0
 * tallyd_ctl_ops.c — control methods that read counters (status, stats) or change the
 * appliance (jobs, policy, drain, shutdown, log level, config). Counters are read by summing
 * the per-lcore blocks; changes go to the lcores as commands on their SP/SC rings and are
 * acknowledged (tallyd_cmd_exec).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_ethdev.h>
#include <rte_log.h>
#include <rte_version.h>

#include "tallyd_ctl_int.h"

#ifndef TALLY_VERSION_STR
#define TALLY_VERSION_STR "0.1.0"
#endif

#define MAX_POLICY_KEYS 65536

static const char *const level_names[] = { [RTE_LOG_ERR] = "error",
					   [RTE_LOG_WARNING] = "warning",
					   [RTE_LOG_NOTICE] = "notice", [RTE_LOG_INFO] = "info",
					   [RTE_LOG_DEBUG] = "debug" };

static json_t *mac_json(const uint8_t *m)
{
	char b[24];
	snprintf(b, sizeof(b), "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
	return json_string(b);
}

int ctl_h_status(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	struct ctl *c = ctx;
	struct tallyd *d = c->d;
	json_t *cores = json_array(), *ports = json_array();
	size_t used = 0;
	int err;
	(void)p;

	for (unsigned i = 0; i < d->ncores; i++) {
		const struct tallyd_lcore *lc = d->lcore[i];
		if (lc->engine)
			used += tally_engine_mem_used(lc->engine);
		json_array_append_new(cores, json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:b, s:b}",
			"core", (int)i, "lcore", (int)lc->lcore_id, "socket", lc->socket, "port",
			(int)lc->port_idx, "queue", (int)lc->rxq, "udp_port",
			(int)(d->conf.base_port + i), "running", lc->running, "draining",
			lc->draining));
	}
	for (uint16_t i = 0; i < d->nports; i++) {
		const struct tallyd_port *pt = &d->port[i];
		struct rte_eth_link link = { 0 };
		struct in_addr in = { .s_addr = pt->ifa.ip };
		char ip[INET_ADDRSTRLEN];
		rte_eth_link_get_nowait(pt->port_id, &link);
		inet_ntop(AF_INET, &in, ip, sizeof(ip));
		json_t *o = json_pack("{s:i, s:i, s:s, s:s, s:i, s:i, s:b, s:b, s:I}", "port", (int)i,
			"port_id", (int)pt->port_id, "driver", pt->driver, "ip", ip, "rx_queues",
			(int)pt->nrxq, "tx_queues", (int)pt->ntxq, "steered", pt->steered,
			"link_up", link.link_status == RTE_ETH_LINK_UP, "speed_mbps",
			(json_int_t)link.link_speed);
		json_object_set_new(o, "mac", mac_json(pt->ifa.mac));
		json_array_append_new(ports, o);
	}
	json_t *jobs = NULL;
	if (ctl_h_jobs(c, NULL, &jobs, m, ml))
		jobs = NULL;
	struct tally_ctl_server_stats ss = { 0 };
	if (c->srv) /* NULL when replaying a config without a socket */
		tally_ctl_server_stats(c->srv, &ss);
	*r = json_pack("{s:s, s:s, s:f, s:b, s:b, s:o, s:o, s:{s:I, s:I, s:I}, s:i, s:{s:s, s:i}}",
		"version", TALLY_VERSION_STR, "dpdk", rte_version(), "uptime_s", tallyd_uptime(d),
		"draining", d->draining, "open_admission", d->conf.open_admission, "cores", cores,
		"ports", ports, "memory", "budget_bytes", (json_int_t)d->conf.mem_budget,
		"used_bytes", (json_int_t)used, "det_pool_bytes", (json_int_t)d->conf.det_pool,
		"jobs", jobs ? (int)json_array_size(jobs) : -1, "control",
		"socket", c->srv ? tally_ctl_server_path(c->srv) : "-", "clients", (int)ss.clients);
	json_decref(jobs);
	err = *r ? 0 : -ENOMEM;
	return err;
}

/* Engine counters and lcore counters of one core, as JSON; adds them to tot. */
static json_t *core_stats(const struct tallyd_lcore *lc, struct tally_engine_stats *tot,
			  struct tallyd_lcore_stats *ltot)
{
	static const struct tally_engine_stats zero;
	const struct tally_engine_stats *e = lc->engine ? tally_engine_stats(lc->engine) : &zero;
	json_t *drops = json_object(), *fdrops = json_object();
	uint64_t tx_pkts = lc->tx.st.tx_pkts, tx_bytes = lc->tx.st.tx_bytes;

	for (int k = 0; k < TALLY_R_COUNT; k++) {
		tot->drops[k] += e->drops[k];
		if (e->drops[k])
			json_object_set_new(drops, tally_reason_name(k), json_integer((json_int_t)e->drops[k]));
	}
	for (int k = 0; k < TALLY_PKT_D_COUNT; k++) {
		uint64_t v = lc->st.drops[k] + lc->tx.st.drops[k];
		ltot->drops[k] += v;
		if (v)
			json_object_set_new(fdrops, tally_pkt_drop_name(k), json_integer((json_int_t)v));
	}
#define ADD(f) tot->f += e->f
	ADD(rx_pkts); ADD(rx_bytes); ADD(tx_pkts); ADD(tx_bytes); ADD(tx_errors); ADD(joins);
	ADD(registers); ADD(pulls); ADD(byes); ADD(pushes); ADD(push_bytes); ADD(duplicates);
	ADD(late_pushes); ADD(completions); ADD(quorum_completions); ADD(deadline_completions);
	ADD(results); ADD(resends);
#undef ADD
	ltot->rx_pkts += lc->st.rx_pkts;
	ltot->rx_bytes += lc->st.rx_bytes;
	ltot->tx_pkts += tx_pkts;
	ltot->tx_bytes += tx_bytes;
	ltot->tally_pkts += lc->st.tally_pkts;
	ltot->arp_replies += lc->st.arp_replies;
	ltot->icmp_replies += lc->st.icmp_replies;
	json_t *o = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
			      "s:I, s:I, s:I}",
		"rx_pkts", (json_int_t)lc->st.rx_pkts, "rx_bytes", (json_int_t)lc->st.rx_bytes,
		"tx_pkts", (json_int_t)tx_pkts, "tx_bytes", (json_int_t)tx_bytes,
		"tally_pkts", (json_int_t)lc->st.tally_pkts, "pushes", (json_int_t)e->pushes,
		"push_bytes", (json_int_t)e->push_bytes, "summed_bytes", (json_int_t)e->push_bytes,
		"duplicates", (json_int_t)e->duplicates, "late_pushes", (json_int_t)e->late_pushes,
		"completions", (json_int_t)e->completions, "results", (json_int_t)e->results,
		"resends", (json_int_t)e->resends, "joins", (json_int_t)e->joins,
		"registers", (json_int_t)e->registers, "idle_sleeps",
		(json_int_t)lc->st.idle_sleeps);
	json_object_set_new(o, "drops", drops);
	json_object_set_new(o, "frame_drops", fdrops);
	return o;
}

void ctl_sample(struct ctl *c, struct ctl_sample *s)
{
	struct tallyd *d = c->d;

	memset(s, 0, sizeof(*s));
	s->ns = ctl_now_ns();
	for (unsigned i = 0; i < d->ncores; i++) {
		const struct tallyd_lcore *lc = d->lcore[i];
		s->rx_pkts += lc->st.rx_pkts;
		s->rx_bytes += lc->st.rx_bytes;
		s->tx_pkts += lc->tx.st.tx_pkts;
		s->tx_bytes += lc->tx.st.tx_bytes;
		if (lc->engine) {
			const struct tally_engine_stats *e = tally_engine_stats(lc->engine);
			s->pushes += e->pushes;
			s->push_bytes += e->push_bytes;
			s->results += e->results;
		}
	}
}

static double rate(uint64_t a, uint64_t b, double secs)
{
	return b >= a && secs > 0 ? (double)(b - a) / secs : 0.0;
}

int ctl_h_stats(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	struct ctl *c = ctx;
	struct tallyd *d = c->d;
	struct tally_engine_stats et = { 0 };
	struct tallyd_lcore_stats lt = { 0 };
	json_t *cores = json_array(), *ports = json_array(), *drops = json_object();
	json_t *fdrops = json_object();
	(void)p; (void)m; (void)ml;

	for (unsigned i = 0; i < d->ncores; i++) {
		json_t *o = json_pack("{s:i}", "core", (int)i); /* first column */
		json_t *cs = core_stats(d->lcore[i], &et, &lt);
		json_object_update(o, cs);
		json_decref(cs);
		json_array_append_new(cores, o);
	}
	for (int k = 0; k < TALLY_R_COUNT; k++)
		if (et.drops[k])
			json_object_set_new(drops, tally_reason_name(k), json_integer((json_int_t)et.drops[k]));
	for (int k = 0; k < TALLY_PKT_D_COUNT; k++)
		if (lt.drops[k])
			json_object_set_new(fdrops, tally_pkt_drop_name(k), json_integer((json_int_t)lt.drops[k]));
	for (uint16_t i = 0; i < d->nports; i++) {
		struct rte_eth_stats es = { 0 };
		rte_eth_stats_get(d->port[i].port_id, &es);
		json_array_append_new(ports, json_pack("{s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
			"port", (int)i, "rx_pkts", (json_int_t)es.ipackets, "rx_bytes",
			(json_int_t)es.ibytes, "tx_pkts", (json_int_t)es.opackets, "tx_bytes",
			(json_int_t)es.obytes, "rx_missed", (json_int_t)es.imissed, "rx_errors",
			(json_int_t)es.ierrors, "tx_errors", (json_int_t)es.oerrors, "rx_nombuf",
			(json_int_t)es.rx_nombuf));
	}
	/* rates over the last sampling interval (tallyd_ctl_poll samples every second) */
	struct ctl_sample a = c->prev, b = c->last;
	if (!b.ns || b.ns == a.ns) { /* no interval yet: since start */
		ctl_sample(c, &b);
		memset(&a, 0, sizeof(a));
		a.ns = b.ns - (uint64_t)(tallyd_uptime(d) * 1e9);
	}
	double secs = (double)(b.ns - a.ns) / 1e9;
	json_t *tot = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
				"s:I, s:I, s:I, s:I, s:I, s:I}",
		"rx_pkts", (json_int_t)lt.rx_pkts, "rx_bytes", (json_int_t)lt.rx_bytes,
		"tx_pkts", (json_int_t)lt.tx_pkts, "tx_bytes", (json_int_t)lt.tx_bytes,
		"tally_pkts", (json_int_t)lt.tally_pkts, "pushes", (json_int_t)et.pushes,
		"push_bytes", (json_int_t)et.push_bytes, "summed_bytes", (json_int_t)et.push_bytes,
		"duplicates", (json_int_t)et.duplicates, "late_pushes", (json_int_t)et.late_pushes,
		"completions", (json_int_t)et.completions, "quorum_completions",
		(json_int_t)et.quorum_completions, "deadline_completions",
		(json_int_t)et.deadline_completions, "results", (json_int_t)et.results,
		"resends", (json_int_t)et.resends, "joins", (json_int_t)et.joins,
		"registers", (json_int_t)et.registers, "arp_replies", (json_int_t)lt.arp_replies,
		"icmp_replies", (json_int_t)lt.icmp_replies);
	json_object_set_new(tot, "drops", drops);
	json_object_set_new(tot, "frame_drops", fdrops);
	json_t *rates = json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f}",
		"rx_pps", rate(a.rx_pkts, b.rx_pkts, secs), "rx_bps",
		8 * rate(a.rx_bytes, b.rx_bytes, secs), "tx_pps", rate(a.tx_pkts, b.tx_pkts, secs),
		"tx_bps", 8 * rate(a.tx_bytes, b.tx_bytes, secs), "pushes_pps",
		rate(a.pushes, b.pushes, secs), "goodput_bps",
		8 * rate(a.push_bytes, b.push_bytes, secs), "results_pps",
		rate(a.results, b.results, secs));
	*r = json_pack("{s:f, s:o, s:o, s:o, s:o}", "interval_s", secs, "rates", rates, "totals",
		       tot, "cores", cores, "ports", ports);
	return *r ? 0 : -ENOMEM;
}

static int exec_all(struct ctl *c, struct tallyd_cmd *tmpl)
{
	struct tallyd_cmd *cmds = calloc(c->d->ncores, sizeof(*cmds));
	int rc;

	if (!cmds)
		return -ENOMEM;
	for (unsigned i = 0; i < c->d->ncores; i++)
		cmds[i] = *tmpl;
	rc = tallyd_cmd_exec_all(c->d, cmds);
	free(cmds);
	return rc;
}

int ctl_h_stats_reset(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	struct ctl *c = ctx;
	struct tallyd_cmd cmd = { .op = TALLYD_CMD_STATS_RESET };
	int rc = exec_all(c, &cmd);
	(void)p;

	if (rc) {
		snprintf(m, ml, "stats reset: %s", strerror(-rc));
		return rc;
	}
	memset(&c->prev, 0, sizeof(c->prev));
	ctl_sample(c, &c->last);
	c->prev = c->last;
	*r = json_pack("{s:b}", "reset", 1);
	return 0;
}

int ctl_h_job_add(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	struct ctl *c = ctx;
	struct tallyd_cmd cmd = { .op = TALLYD_CMD_JOB_ADD };
	uint64_t token;
	int rc;

	if (tally_ctl_get_u64(p, "token", &token))
		return -EINVAL;
	cmd.u.job.job_id = (uint32_t)json_integer_value(json_object_get(p, "job_id"));
	cmd.u.job.world_size = (uint32_t)json_integer_value(json_object_get(p, "world_size"));
	cmd.u.job.token = token;
	rc = exec_all(c, &cmd);
	if (rc) {
		snprintf(m, ml, rc == -EEXIST ? "job %u exists with another token or world size"
			 : rc == -ENOSPC ? "job %u: no room for another job"
			 : "job %u: cannot be added", cmd.u.job.job_id);
		if (rc != -EEXIST) { /* do not leave it on some cores only */
			struct tallyd_cmd rm = { .op = TALLYD_CMD_JOB_REMOVE };
			rm.u.job.job_id = cmd.u.job.job_id;
			exec_all(c, &rm);
		}
		return rc;
	}
	struct ctl_job *j = ctl_job_find(c, cmd.u.job.job_id, 1);
	if (j) {
		j->admitted = 1;
		j->token = token;
		j->world_size = cmd.u.job.world_size;
	}
	*r = json_pack("{s:I, s:I}", "job_id", (json_int_t)cmd.u.job.job_id, "world_size",
		       (json_int_t)cmd.u.job.world_size);
	return 0;
}

int ctl_h_job_evict(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	struct ctl *c = ctx;
	uint32_t id = (uint32_t)json_integer_value(json_object_get(p, "job_id"));
	struct ctl_key_ref *keys = calloc(MAX_POLICY_KEYS, sizeof(*keys));
	json_t *cur;
	int nkeys, rc;

	if (!keys)
		return -ENOMEM;
	rc = ctl_h_job_get(c, p, &cur, m, ml); /* ENOENT with its message */
	if (rc) {
		free(keys);
		return rc;
	}
	json_decref(cur);
	nkeys = ctl_job_keys(c, id, keys, MAX_POLICY_KEYS);
	free(keys);
	struct tallyd_cmd cmd = { .op = TALLYD_CMD_JOB_REMOVE };
	cmd.u.job.job_id = id;
	rc = exec_all(c, &cmd);
	if (rc && rc != -ENOENT) {
		snprintf(m, ml, "job %u: eviction failed: %s", id, strerror(-rc));
		return rc;
	}
	struct ctl_job *j = ctl_job_find(c, id, 0);
	if (j)
		memset(j, 0, sizeof(*j));
	*r = json_pack("{s:I, s:i}", "job_id", (json_int_t)id, "keys_freed", nkeys > 0 ? nkeys : 0);
	return 0;
}

int ctl_h_policy(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	struct ctl *c = ctx;
	uint32_t id = (uint32_t)json_integer_value(json_object_get(p, "job_id"));
	const json_t *jk = json_object_get(p, "key"), *jq = json_object_get(p, "quorum");
	const json_t *jd = json_object_get(p, "deadline_us");
	struct ctl_key_ref *keys;
	json_t *cur;
	int n, changed = 0, rc;

	if (json_object_get(p, "deterministic")) {
		snprintf(m, ml, "deterministic is fixed when a key is registered (workers ask for it "
			 "in REGISTER); this appliance cannot change it for job %u", id);
		return -EOPNOTSUPP;
	}
	rc = ctl_h_job_get(c, p, &cur, m, ml);
	if (rc)
		return rc;
	json_decref(cur);
	keys = calloc(MAX_POLICY_KEYS, sizeof(*keys));
	if (!keys)
		return -ENOMEM;
	n = ctl_job_keys(c, id, keys, MAX_POLICY_KEYS);
	if (n < 0) {
		free(keys);
		snprintf(m, ml, "job %u: cannot read its keys: %s", id, strerror(-n));
		return n;
	}
	/* check every key first: a change applies to all or none */
	int found = 0;
	for (int i = 0; i < n; i++) {
		if (jk && keys[i].key != (uint32_t)json_integer_value(jk))
			continue;
		found++;
		if (jq && json_integer_value(jq) > keys[i].participants) {
			snprintf(m, ml, "quorum %lld is more than key %u's %u participants",
				 (long long)json_integer_value(jq), keys[i].key, keys[i].participants);
			free(keys);
			return -EINVAL;
		}
	}
	if (jk && !found) {
		free(keys);
		snprintf(m, ml, "job %u has no key %lld", id, (long long)json_integer_value(jk));
		return -ENOENT;
	}
	struct ctl_job *cj = ctl_job_find(c, id, 1);
	if (jk && cj) { /* the key keeps its own policy from now on */
		unsigned o;
		for (o = 0; o < cj->n_own && cj->own_keys[o] != (uint32_t)json_integer_value(jk); o++)
			;
		if (o == cj->n_own) {
			if (o == CTL_OWN_KEYS) {
				free(keys);
				snprintf(m, ml, "job %u: at most %d keys with a policy of their own", id,
					 CTL_OWN_KEYS);
				return -ENOSPC;
			}
			cj->own_keys[cj->n_own++] = (uint32_t)json_integer_value(jk);
		}
	}
	for (int i = 0; i < n; i++) {
		struct tallyd_cmd cmd = { .op = TALLYD_CMD_KEY_POLICY };
		if (jk && keys[i].key != (uint32_t)json_integer_value(jk))
			continue;
		cmd.u.policy.job_id = id;
		cmd.u.policy.key = keys[i].key;
		cmd.u.policy.quorum = jq && json_integer_value(jq) ? (uint16_t)json_integer_value(jq)
			: jq ? keys[i].participants : keys[i].quorum;
		cmd.u.policy.deadline_us = jd ? (uint32_t)json_integer_value(jd) : keys[i].deadline_us;
		rc = tallyd_cmd_exec(c->d, keys[i].core, &cmd);
		if (rc) {
			snprintf(m, ml, "job %u key %u: %s (%d keys changed before it)", id,
				 keys[i].key, strerror(-rc), changed);
			free(keys);
			return rc == -EINVAL ? -EINVAL : rc;
		}
		changed++;
	}
	free(keys);
	if (!jk) { /* remembered for later keys and config_save; it overrode every key's own */
		struct ctl_job *j = cj;
		if (j)
			j->n_own = 0;
		if (j && jq) {
			j->has_quorum = 1;
			j->quorum = (uint32_t)json_integer_value(jq);
		}
		if (j && jd) {
			j->has_deadline = 1;
			j->deadline_us = (uint32_t)json_integer_value(jd);
		}
	}
	*r = json_pack("{s:I, s:i}", "job_id", (json_int_t)id, "keys_changed", changed);
	if (jq)
		json_object_set(*r, "quorum", (json_t *)jq);
	if (jd)
		json_object_set(*r, "deadline_us", (json_t *)jd);
	return 0;
}

/* The job policies the operator set also govern keys registered afterwards (and a
 * replayed config, whose policies come before any key): called every second, it applies
 * them to keys that differ. Keys whose participants are fewer than the quorum get all. */
void ctl_policy_enforce(struct ctl *c)
{
	struct ctl_key_ref *keys = NULL;

	for (int i = 0; i < CTL_MAX_JOBS; i++) {
		struct ctl_job *j = &c->jobs[i];
		uint32_t nkeys;
		if (!j->used || (!j->has_quorum && !j->has_deadline))
			continue;
		/* walk the keys (datapath time) only when the job has new ones */
		if (ctl_job_key_count(c, j->job_id, &nkeys) || nkeys == j->keys_enforced)
			continue;
		if (!keys && !(keys = calloc(MAX_POLICY_KEYS, sizeof(*keys))))
			return;
		j->keys_enforced = nkeys;
		int n = ctl_job_keys(c, j->job_id, keys, MAX_POLICY_KEYS);
		for (int k = 0; k < n; k++) {
			struct tallyd_cmd cmd = { .op = TALLYD_CMD_KEY_POLICY };
			unsigned o;
			for (o = 0; o < j->n_own && j->own_keys[o] != keys[k].key; o++)
				;
			if (o < j->n_own)
				continue;
			uint16_t q = keys[k].quorum;
			uint32_t dl = keys[k].deadline_us;
			if (j->has_quorum)
				q = j->quorum && j->quorum <= keys[k].participants ? (uint16_t)j->quorum
									: keys[k].participants;
			if (j->has_deadline)
				dl = j->deadline_us;
			if (q == keys[k].quorum && dl == keys[k].deadline_us)
				continue;
			cmd.u.policy.job_id = j->job_id;
			cmd.u.policy.key = keys[k].key;
			cmd.u.policy.quorum = q;
			cmd.u.policy.deadline_us = dl;
			tallyd_cmd_exec(c->d, keys[k].core, &cmd);
		}
	}
	free(keys);
}

int ctl_h_drain(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	struct ctl *c = ctx;
	uint64_t timeout_ms = (uint64_t)json_integer_value(json_object_get(p, "timeout_ms"));
	uint64_t end = ctl_now_ns() + timeout_ms * 1000000u, rounds = 0, chunks = 0;
	struct tallyd_cmd cmd = { .op = TALLYD_CMD_DRAIN };
	int rc;

	c->d->draining = 1;
	rc = exec_all(c, &cmd);
	if (rc) {
		snprintf(m, ml, "drain: %s", strerror(-rc));
		return rc;
	}
	/* waiting here holds other control clients, never the datapath */
	while ((rc = ctl_open_work(c, &rounds, &chunks)) == 0 && rounds && ctl_now_ns() < end &&
	       !c->d->quit)
		usleep(5000);
	if (rc) {
		snprintf(m, ml, "drain: %s", strerror(-rc));
		return rc;
	}
	*r = json_pack("{s:b, s:I, s:I}", "draining", 1, "open_rounds", (json_int_t)rounds,
		       "open_chunks", (json_int_t)chunks);
	return 0;
}

int ctl_h_shutdown(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	struct ctl *c = ctx;
	int drain = json_is_true(json_object_get(p, "drain"));
	(void)m; (void)ml;

	if (!drain)
		c->d->conf.drain_timeout_ms = 0;
	c->d->quit = 1; /* the main loop drains (or not), stops the lcores and exits */
	*r = json_pack("{s:b, s:b}", "stopping", 1, "drain", drain);
	return 0;
}

int ctl_h_log_level(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	struct ctl *c = ctx;
	const char *name = json_string_value(json_object_get(p, "level"));
	int prev = rte_log_get_level(RTE_LOGTYPE_USER1), lvl = -1;

	for (int i = 0; i < (int)(sizeof(level_names) / sizeof(level_names[0])); i++)
		if (level_names[i] && !strcmp(level_names[i], name))
			lvl = i;
	if (lvl < 0) {
		snprintf(m, ml, "level: unknown '%s'", name);
		return -EINVAL;
	}
	rte_log_set_level(RTE_LOGTYPE_USER1, (uint32_t)lvl);
	c->d->conf.log_level = (uint32_t)lvl;
	c->log_level_set = 1;
	snprintf(c->log_level, sizeof(c->log_level), "%s", name);
	*r = json_pack("{s:s, s:s}", "level", name, "previous",
		       prev >= 0 && prev < (int)(sizeof(level_names) / sizeof(level_names[0])) &&
		       level_names[prev] ? level_names[prev] : "other");
	return 0;
}

int ctl_h_config_save(void *ctx, const json_t *p, json_t **r, char *m, size_t ml)
{
	struct ctl *c = ctx;
	json_t *calls = json_array();
	char tok[24];
	(void)p; (void)m; (void)ml;

	if (c->log_level_set)
		json_array_append_new(calls, json_pack("{s:s, s:{s:s}}", "method", "log_set_level",
						       "params", "level", c->log_level));
	for (int i = 0; i < CTL_MAX_JOBS; i++) {
		const struct ctl_job *j = &c->jobs[i];
		if (!j->used || !j->admitted)
			continue;
		snprintf(tok, sizeof(tok), "0x%016" PRIx64, j->token);
		json_array_append_new(calls, json_pack("{s:s, s:{s:I, s:s, s:I}}", "method",
			"job_add", "params", "job_id", (json_int_t)j->job_id, "token", tok,
			"world_size", (json_int_t)j->world_size));
	}
	for (int i = 0; i < CTL_MAX_JOBS; i++) {
		const struct ctl_job *j = &c->jobs[i];
		if (!j->used || (!j->has_quorum && !j->has_deadline))
			continue;
		json_t *pp = json_pack("{s:I}", "job_id", (json_int_t)j->job_id);
		if (j->has_quorum)
			json_object_set_new(pp, "quorum", json_integer(j->quorum));
		if (j->has_deadline)
			json_object_set_new(pp, "deadline_us", json_integer(j->deadline_us));
		json_array_append_new(calls, json_pack("{s:s, s:o}", "method", "job_set_policy",
						       "params", pp));
	}
	*r = json_pack("{s:o}", "calls", calls);
	return 0;
}
