/* SPDX-License-Identifier: Apache-2.0
 * client.c — worker-side session: lifecycle, blocking control requests (JOIN, REGISTER,
 * BYE). Data operations live in client_op.c; shared helpers (errors, headers, sends, key
 * lookup) in client_util.c.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_int.h"

void tally_client_cfg_defaults(struct tally_client_cfg *cfg)
{
	if (!cfg->max_chunk_bytes)
		cfg->max_chunk_bytes = 8192;
	if (!cfg->window)
		cfg->window = 64;
	if (!cfg->rto_init_us)
		cfg->rto_init_us = 500;
	if (!cfg->rto_max_us)
		cfg->rto_max_us = 100000;
	if (!cfg->give_up_ms)
		cfg->give_up_ms = 30000;
	if (!cfg->max_ops)
		cfg->max_ops = 256;
	if (!cfg->rto_min_us)
		cfg->rto_min_us = CLIENT_RTO_MIN_NS / 1000;
	/* a give-up shorter than the defaults (tests, tight jobs) pulls them down */
	if (!cfg->dead_ms)
		cfg->dead_ms = cfg->give_up_ms < 1000 ? cfg->give_up_ms : 1000;
	if (!cfg->probe_ms)
		cfg->probe_ms = cfg->dead_ms < 200 ? cfg->dead_ms : 200;
}

int tally_client_state(const struct tally_client *c)
{
	return c->live;
}

const char *tally_client_strerror(const struct tally_client *c)
{
	return c ? c->errmsg : "";
}

const struct tally_client_stats *tally_client_stats(const struct tally_client *c)
{
	return &c->st;
}

uint16_t tally_client_ncores(const struct tally_client *c)
{
	return c->ncores;
}

struct tally_client *tally_client_create(const struct tally_client_cfg *cfg,
					 const struct tally_xport_ops *ops, void *xctx,
					 int *err)
{
	struct tally_client *c = NULL;
	int rc = -EINVAL;

	if (!cfg || !ops || !ops->send || !ops->now_ns)
		goto fail;
	if (cfg->world_size < 1 || cfg->world_size > TALLY_MAX_WORKERS ||
	    cfg->rank >= cfg->world_size)
		goto fail;
	rc = -ENOMEM;
	c = calloc(1, sizeof(*c));
	if (!c)
		goto fail;
	c->cfg = *cfg;
	tally_client_cfg_defaults(&c->cfg);
	rc = -EINVAL;
	if (c->cfg.max_chunk_bytes > TALLY_MAX_PAYLOAD || c->cfg.max_chunk_bytes < 4 ||
	    c->cfg.window > (1u << 20) || c->cfg.max_ops > 32768 ||
	    c->cfg.rto_max_us < c->cfg.rto_init_us || c->cfg.fail_fast > 1 ||
	    c->cfg.dead_ms < c->cfg.probe_ms || c->cfg.give_up_ms < c->cfg.dead_ms)
		goto fail;
	c->ops = ops;
	c->xctx = xctx;
	c->errmsg[0] = '\0';
	rc = client_ops_init(c);
	if (rc)
		goto fail;
	rc = client_auth_init(c);
	if (rc)
		goto fail;
	if (err)
		*err = 0;
	return c;
fail:
	tally_client_destroy(c);
	if (err)
		*err = rc;
	return NULL;
}

void tally_client_destroy(struct tally_client *c)
{
	if (!c)
		return;
	client_cores_free(c);
	client_auth_fini(c);
	for (uint32_t i = 0; i < c->nkeys; i++) {
		struct client_key *k = &c->keys[i];

		free(k->cst[0]);
		free(k->cst[1]);
		free(k->fold);
		free(k->fold_pending);
		free(k->excl_round);
		free(k->unacked);
		free(k->ackslot);
		free(k->last);
		free(k->last_round);
		free(k->last_contrib);
	}
	free(c->keys);
	free(c->khash);
	free(c->ops_tab);
	free(c->wait_core_ok);
	free(c);
}

/* ---- blocking control requests ---- */

static uint64_t client_now(struct tally_client *c)
{
	return c->ops->now_ns(c->xctx);
}

/* Send a request and poll until answered, retrying with exponential backoff. */
int client_request(struct tally_client *c, uint32_t core, const uint8_t *hdr,
		      const void *payload, size_t len, uint64_t timeout_ns)
{
	uint64_t start = client_now(c), rto = (uint64_t)c->cfg.rto_init_us * 1000;
	uint64_t rto_max = (uint64_t)c->cfg.rto_max_us * 1000;

	client_wait_reset(c, core);
	for (;;) {
		uint64_t now = client_now(c), due;

		if (now - start >= timeout_ns)
			return client_auth_deadline(c);
		client_send(c, core, hdr, payload, len);
		due = now + rto;
		if (due > start + timeout_ns)
			due = start + timeout_ns;
		while (!c->wait_done && (now = client_now(c)) < due) {
			uint64_t until = client_refused_until(c, core, now,
							      client_auth_until(c, now, due));
			int rc;

			if (c->wait_done)
				break;
			if (!c->ops->poll)
				return -ENOTSUP;
			rc = c->ops->poll(c->xctx, until - now);
			if (rc < 0 && rc != -EINTR && rc != -EAGAIN)
				return rc;
		}
		if (c->wait_done)
			return c->wait_err;
		rto = rto * 2 > rto_max ? rto_max : rto * 2;
	}
}

/* client_request, retried while the appliance answers RANK_TAKEN (-EBUSY): our rank is still
 * bound to an address of ours whose BYE was lost (a restarted worker, a new socket), and
 * the appliance frees it once that address has been silent for its rejoin timeout. */
int client_request_rebind(struct tally_client *c, uint32_t core, const uint8_t *hdr,
			     const void *payload, size_t len, uint64_t timeout_ns)
{
	uint64_t start = client_now(c), pause = (uint64_t)c->cfg.rto_init_us * 1000;
	uint64_t pause_max = (uint64_t)c->cfg.rto_max_us * 1000;

	for (;;) {
		uint64_t now = client_now(c), due;
		int rc = client_request(c, core, hdr, payload, len, timeout_ns - (now - start));

		if (rc != -EBUSY)
			return rc;
		c->st.rank_taken_retries++;
		now = client_now(c);
		if (now - start + pause >= timeout_ns)
			return rc;
		due = now + pause;
		while ((now = client_now(c)) < due) {
			if (!c->ops->poll)
				return -ENOTSUP;
			rc = c->ops->poll(c->xctx, due - now);
			if (rc < 0 && rc != -EINTR && rc != -EAGAIN)
				return rc;
		}
		pause = pause * 2 > pause_max ? pause_max : pause * 2;
	}
}

void client_join_msg(struct tally_client *c, uint8_t hdr[TALLY_HDR_LEN],
		     uint8_t pl[TALLY_JOIN_LEN])
{
	struct tally_join j = {0};
	struct tally_hdr h;

	j.world_size = c->cfg.world_size;
	j.caps = TALLY_CAP_DETERMINISTIC | TALLY_CAP_QUORUM | TALLY_CAP_HELD;
	j.max_chunk_bytes = c->cfg.max_chunk_bytes;
	j.incarnation = c->cfg.incarnation;
	tally_proto_put_join(pl, &j);
	client_fill_hdr(c, &h, TALLY_OP_JOIN);
	h.reserved = c->join_nonce = client_join_nonce(c); /* JOIN_OK echoes it (auth) */
	tally_proto_finish(hdr, &h, pl, TALLY_JOIN_LEN);
}

int tally_client_join(struct tally_client *c, uint32_t timeout_ms)
{
	uint8_t hdr[TALLY_HDR_LEN], pl[TALLY_JOIN_LEN];
	uint64_t timeout_ns = (uint64_t)timeout_ms * 1000000u;
	int rc;

	if (c->joined)
		return 0;
	c->errmsg[0] = '\0';
	if (c->nactive) {
		client_seterr(c, "JOIN: %u operations still running", c->nactive);
		return -EBUSY;
	}
	client_cores_free(c); /* a re-join (after BYE) may find another core count */
	client_join_msg(c, hdr, pl);

	/* Core 0 tells us how many cores there are; every core keeps its own job table,
	 * so the others are joined too (one at a time: JOIN_OK names its core in aux). */
	c->wait = CLIENT_W_JOIN;
	c->wait_key = 0;
	rc = client_request_rebind(c, 0, hdr, pl, sizeof(pl), timeout_ns);
	if (rc)
		goto out;
	if (c->jok.ncores < 1 || c->jok.max_chunk_bytes < 4 ||
	    c->jok.max_chunk_bytes > TALLY_MAX_PAYLOAD) {
		rc = -EPROTO;
		client_seterr(c, "JOIN_OK from core 0 with %u cores, max chunk %u bytes",
			  c->jok.ncores, c->jok.max_chunk_bytes);
		goto out;
	}
	c->ncores = c->jok.ncores;
	c->caps = c->jok.caps;
	c->max_chunk_bytes = c->jok.max_chunk_bytes < c->cfg.max_chunk_bytes ?
			     c->jok.max_chunk_bytes : c->cfg.max_chunk_bytes;
	for (uint32_t core = 1; core < c->ncores; core++) {
		c->wait_key = core;
		rc = client_request_rebind(c, core, hdr, pl, sizeof(pl), timeout_ns);
		if (rc)
			goto out;
	}
	rc = client_cores_init(c);
	if (rc)
		goto out;
	client_cwnd_init(c);
	/* HELD-capable: probe before re-sending from the first push on */
	for (uint32_t i = 0; i < c->ncores; i++)
		c->cores[i].seen_held = (c->caps & TALLY_CAP_HELD) != 0;
	for (uint32_t i = 0; i < c->nkeys; i++)
		c->keys[i].core = c->keys[i].key % c->ncores;
	c->joined = true;
	c->boot = c->jok_boot;
	c->live = TALLY_CLIENT_UP;
out:
	if (rc == -ETIMEDOUT)
		client_seterr(c, "JOIN of job %u rank %u: no answer from appliance core %u within %u ms",
			  c->cfg.job_id, c->cfg.rank, c->wait_key, timeout_ms);
	else if (rc && !c->errmsg[0])
		client_seterr(c, "JOIN of job %u rank %u refused by appliance core %u (%s)",
			  c->cfg.job_id, c->cfg.rank, c->wait_key, strerror(-rc));
	c->wait = CLIENT_W_NONE;
	return rc;
}

static int client_key_add(struct tally_client *c, uint32_t key, const struct tally_register *reg,
		      struct client_key **out)
{
	struct client_key *k;

	if (c->nkeys == c->keys_cap) {
		uint32_t cap = c->keys_cap ? c->keys_cap * 2 : 16;
		struct client_key *nk = realloc(c->keys, cap * sizeof(*nk));

		if (!nk)
			return -ENOMEM;
		c->keys = nk;
		c->keys_cap = cap;
	}
	if ((c->nkeys + 1) * 2 > c->khash_mask + 1 || !c->khash) {
		uint32_t size = c->khash ? (c->khash_mask + 1) * 2 : 64;
		uint32_t *h = calloc(size, sizeof(*h));

		if (!h)
			return -ENOMEM;
		for (uint32_t i = 0; i < c->nkeys; i++) {
			uint32_t s = client_hash(c->keys[i].key) & (size - 1);

			while (h[s])
				s = (s + 1) & (size - 1);
			h[s] = i + 1;
		}
		free(c->khash);
		c->khash = h;
		c->khash_mask = size - 1;
	}
	k = &c->keys[c->nkeys];
	memset(k, 0, sizeof(*k));
	k->key = key;
	k->reg = *reg;
	k->esize = tally_dtype_size((enum tally_dtype)reg->dtype);
	k->codec = client_codec_by_id(reg->compression);
	k->wire_stride = k->codec ? k->codec->wire_bytes(reg->chunk_elems) : 0;
	k->nchunks = (uint32_t)(((uint64_t)reg->nelems + reg->chunk_elems - 1) / reg->chunk_elems);
	k->core = key % c->ncores;
	k->par_op[0] = k->par_op[1] = CLIENT_NONE;
	k->cst[0] = calloc(k->nchunks, sizeof(uint32_t));
	k->cst[1] = calloc(k->nchunks, sizeof(uint32_t));
	if (!k->cst[0] || !k->cst[1]) {
		free(k->cst[0]);
		free(k->cst[1]);
		return -ENOMEM;
	}
	/* The last result per chunk, for a rank that misses it across a restart. */
	if (!k->codec) {
		k->last = malloc((size_t)reg->nelems * k->esize);
		k->last_round = malloc(k->nchunks * sizeof(uint32_t));
		k->last_contrib = calloc(k->nchunks, sizeof(uint16_t));
		if (!k->last || !k->last_round || !k->last_contrib) {
			free(k->last);
			free(k->last_round);
			free(k->last_contrib);
			free(k->cst[0]);
			free(k->cst[1]);
			return -ENOMEM;
		}
		for (uint32_t i = 0; i < k->nchunks; i++)
			k->last_round[i] = CLIENT_NONE;
	}
	/* Keys that can complete without us get their fold buffer now. */
	if (reg->quorum < reg->participants || reg->deadline_us) {
		int rc = client_fold_alloc(c, k);

		if (rc) {
			free(k->last);
			free(k->last_round);
			free(k->last_contrib);
			free(k->cst[0]);
			free(k->cst[1]);
			return rc;
		}
	}
	uint32_t s = client_hash(key) & c->khash_mask;

	while (c->khash[s])
		s = (s + 1) & c->khash_mask;
	c->khash[s] = ++c->nkeys;
	*out = k;
	return 0;
}

int client_fold_alloc(struct tally_client *c, struct client_key *k)
{
	(void)c;
	if (k->fold)
		return 0;
	k->fold = calloc(k->reg.nelems, 4);
	k->fold_pending = calloc((k->nchunks + 7) / 8, 1);
	k->unacked = malloc(k->nchunks * sizeof(uint32_t));
	k->ackslot = malloc(k->nchunks * sizeof(uint32_t));
	k->excl_round = k->codec ? malloc(k->nchunks * sizeof(uint32_t)) : NULL;
	if (!k->fold || !k->fold_pending || !k->unacked || !k->ackslot ||
	    (k->codec && !k->excl_round)) {
		free(k->excl_round);
		k->excl_round = NULL;
		free(k->fold);
		free(k->fold_pending);
		free(k->unacked);
		free(k->ackslot);
		k->fold = NULL;
		k->fold_pending = NULL;
		k->unacked = NULL;
		k->ackslot = NULL;
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < k->nchunks; i++) {
		k->unacked[i] = k->ackslot[i] = CLIENT_NONE;
		if (k->excl_round)
			k->excl_round[i] = CLIENT_NONE;
	}
	return 0;
}

/* Pick (0) or check the chunk size: elements of es bytes, or a codec's chunks of
 * wire_bytes(chunk_elems) bytes, within max_chunk_bytes; 0 or -EINVAL (message). */
static int client_reg_chunk(struct tally_client *c, struct tally_register *reg, size_t es,
			    const struct client_codec *codec)
{
	uint64_t bytes;

	if (!reg->chunk_elems)
		reg->chunk_elems = codec ? codec->max_elems(c->max_chunk_bytes)
					 : c->max_chunk_bytes / (uint32_t)es;
	if (reg->chunk_elems > reg->nelems)
		reg->chunk_elems = reg->nelems;
	bytes = codec ? codec->wire_bytes(reg->chunk_elems) : (uint64_t)reg->chunk_elems * es;
	if (reg->chunk_elems && bytes > c->max_chunk_bytes) {
		client_seterr(c, "register: chunk of %u elements (%llu bytes) exceeds %u bytes",
			      reg->chunk_elems, (unsigned long long)bytes, c->max_chunk_bytes);
		return -EINVAL;
	}
	return 0;
}

void client_register_msg(struct tally_client *c, uint32_t key, const struct tally_register *reg,
			 uint8_t hdr[TALLY_HDR_LEN], uint8_t pl[TALLY_REGISTER_LEN])
{
	struct tally_hdr h;

	tally_proto_put_register(pl, reg);
	client_fill_hdr(c, &h, TALLY_OP_REGISTER);
	h.key = key;
	tally_proto_finish(hdr, &h, pl, TALLY_REGISTER_LEN);
}

int tally_client_register(struct tally_client *c, uint32_t key, const struct tally_register *in)
{
	uint8_t hdr[TALLY_HDR_LEN], pl[TALLY_REGISTER_LEN];
	struct tally_register reg;
	struct tally_pkt pkt;
	struct client_key *k;
	size_t es;
	int rc;

	if (!c->joined) {
		client_seterr(c, "register key %u: not joined", key);
		return -ENOTCONN;
	}
	reg = *in;
	es = tally_dtype_size((enum tally_dtype)reg.dtype);
	const struct client_codec *codec = client_codec_by_id(reg.compression);
	if (!es || !reg.nelems || (reg.compression && !codec) ||
	    (codec && reg.dtype != codec->dtype) || !reg.participants ||
	    reg.participants > c->cfg.world_size || !reg.quorum ||
	    reg.quorum > reg.participants || (reg.flags & ~TALLY_KEY_FLAGS) ||
	    ((reg.flags & TALLY_KEY_AVERAGE) && !(c->caps & TALLY_CAP_AVERAGE)) ||
	    c->cfg.rank >= reg.participants) {
		client_seterr(c, "register key %u: invalid parameters", key);
		return -EINVAL;
	}
	if ((rc = client_reg_chunk(c, &reg, es, codec)))
		return rc;
	if (!reg.chunk_elems) {
		client_seterr(c, "register key %u: chunk of %u elements exceeds %u bytes", key,
			  reg.chunk_elems, c->max_chunk_bytes);
		return -EINVAL;
	}
	memset(reg.reserved, 0, sizeof(reg.reserved));
	/* Validate what we would send exactly as the appliance will. */
	client_register_msg(c, key, &reg, hdr, pl);
	client_fill_hdr(c, &pkt.hdr, TALLY_OP_REGISTER);
	pkt.hdr.key = key;
	pkt.hdr.payload_len = TALLY_REGISTER_LEN;
	pkt.payload = pl;
	if (tally_proto_get_register(&pkt, &reg) != TALLY_OK) {
		client_seterr(c, "register key %u: invalid parameters", key);
		return -EINVAL;
	}
	k = client_key_find(c, key);
	if (k) {
		if (memcmp(&k->reg, &reg, sizeof(reg)) != 0) {
			client_seterr(c, "register key %u: already registered differently", key);
			return -EEXIST;
		}
	}
	c->wait = CLIENT_W_REGISTER;
	c->wait_key = key;
	rc = client_request(c, key % c->ncores, hdr, pl, sizeof(pl),
			(uint64_t)c->cfg.give_up_ms * 1000000u);
	c->wait = CLIENT_W_NONE;
	if (rc == -ETIMEDOUT) {
		client_seterr(c, "register key %u: no answer from appliance core %u within %u ms", key,
			  key % c->ncores, c->cfg.give_up_ms);
		return rc;
	}
	if (rc) {
		if (!c->wait_done) /* else the ERROR's text is already there */
			client_seterr(c, "register key %u: appliance core %u: %s", key,
				  key % c->ncores, strerror(-rc));
		return rc;
	}
	if (k)
		return 0;
	rc = client_key_add(c, key, &reg, &k);
	if (rc)
		client_seterr(c, "register key %u: out of memory", key);
	return rc;
}

void tally_client_bye(struct tally_client *c)
{
	uint8_t hdr[TALLY_HDR_LEN];
	struct tally_hdr h;

	if (!c->joined)
		return;
	client_fill_hdr(c, &h, TALLY_OP_BYE);
	h.reserved = c->join_nonce; /* a keyed job's appliance takes only the bound JOIN's */
	tally_proto_finish(hdr, &h, NULL, 0);
	for (uint32_t core = 0; core < c->ncores; core++)
		client_send(c, core, hdr, NULL, 0);
	c->joined = false;
}

/* JOIN_OK, REGISTER acks and ERRORs for the blocking request in progress. */
void client_rx_control(struct tally_client *c, const struct tally_pkt *p)
{
	const struct tally_hdr *h = &p->hdr;

	switch (h->op) {
	case TALLY_OP_JOIN_OK: {
		struct tally_join_ok jok;

		if (c->wait != CLIENT_W_JOIN || c->wait_done) {
			c->st.dup_results++;
			return;
		}
		/* aux names the answering core. Every core echoes the same JOIN nonce, so
		 * aux is all that tells a late copy of core 0's JOIN_OK (a lost or slow core
		 * 1 answer, a retried JOIN) from core 1's: taken for it, core 1 never bound
		 * the rank and never answered its probes (the udpd_relay hang). */
		if (h->aux != c->wait_key) {
			c->st.dup_results++; /* a late copy, as above */
			return;
		}
		if (tally_proto_get_join_ok(p, &jok) != TALLY_OK) {
			c->st.drops[TALLY_R_LEN_MISMATCH]++;
			return;
		}
		if (c->wait_key == 0) {
			c->jok = jok;
			c->jok_boot = (uint64_t)h->round << 32 | h->key; /* boot id (client_live.c) */
			c->run = (uint64_t)h->count << 32 | h->offset; /* keyed: the run nonce */
		} else if (c->auth && ((uint64_t)h->count << 32 | h->offset) != c->run) {
			c->wait_err = -EPROTO; /* restarted between our JOINs? */
			client_seterr(c, "JOIN_OK from core %u: another run than core 0's", c->wait_key);
		}
		else if (jok.ncores != c->ncores) {
			c->wait_err = -EPROTO;
			client_seterr(c, "JOIN_OK from core %u says %u cores, core 0 said %u",
				  c->wait_key, jok.ncores, c->ncores);
		}
		c->wait_done = true;
		return;
	}
	case TALLY_OP_REGISTER:
		if (!(h->flags & TALLY_F_ACK)) {
			c->st.drops[TALLY_R_UNEXPECTED_OP]++;
			return;
		}
		if (c->wait != CLIENT_W_REGISTER || h->key != c->wait_key || c->wait_done) {
			c->st.dup_results++;
			return;
		}
		c->wait_done = true;
		return;
	case TALLY_OP_ERROR:
		c->st.errors++;
		if (h->aux == TALLY_OP_JOIN && c->wait == CLIENT_W_JOIN && !c->wait_done) {
			client_join_refused(c, h->reason);
		} else if (h->aux == TALLY_OP_REGISTER && c->wait == CLIENT_W_REGISTER &&
			   h->key == c->wait_key && !c->wait_done) {
			c->wait_err = client_err_from_reason(h->reason);
			client_seterr(c, "register key %u refused by appliance core %u: %s%s%s", h->key,
				  h->key % c->ncores,
				  tally_reason_name((enum tally_reason)h->reason),
				  *tally_reason_hint((enum tally_reason)h->reason) ? ": " : "",
				  tally_reason_hint((enum tally_reason)h->reason));
			c->wait_done = true;
		}
		return;
	default:
		c->st.drops[TALLY_R_UNEXPECTED_OP]++;
		return;
	}
}

uint32_t tally_client_max_chunk_bytes(const struct tally_client *c)
{
	return c->max_chunk_bytes ? c->max_chunk_bytes : c->cfg.max_chunk_bytes;
}

uint32_t tally_client_caps(const struct tally_client *c)
{
	return c->joined ? c->caps : 0;
}
