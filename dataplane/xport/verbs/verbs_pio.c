/* SPDX-License-Identifier: Apache-2.0
 * verbs_pio.c — RESULTs placed in the worker's registered buffer, over a connection (the
 * logic is verbs_place.c's): the client's registration cache and advertisements, the
 * listener's table of them and the choice per RESULT, the client's receipt of a placed one.
 */
#include "verbs_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- listener ----------------------------------------------------------------------- */

void verbs_pio_adv_rx(struct tally_verbs *v, struct verbs_conn *c, const void *buf, size_t len)
{
	struct verbs_adv a;
	enum verbs_adv_verdict r;

	r = verbs_adv_check(buf, len, c->addr.conn_authed, c->addr.conn_job, c->addr.conn_rank,
			    &a);
	if (r != VA_OK && r != VA_WITHDRAW) {
		v->st.adv_refused++;
		verbs_err(v, "verbs: core %u refused an advertisement (%s): its RESULTs are sent "
			  "with their payload", c->core, r == VA_BAD_FORMAT ? "malformed" :
			  r == VA_BAD_RANGE ? "address/length out of range" :
			  "it names another job or rank than its connection");
		return;
	}
	v->st.adv_ok++;
	c->adv[verbs_adv_idx(a.key, a.round)] = r == VA_OK ? a : (struct verbs_adv){ 0 };
}

int verbs_pio_stage(struct tally_verbs *v, struct verbs_conn *c, const uint8_t *hdr,
		    const void *payload, size_t len)
{
	struct verbs_ptx pl = { 0 };
	struct tally_hdr h;
	int how;

	/* a 16-byte payload would read like a placement record at the worker: copy it */
	if (!c->adv || !len || len == VERBS_PLACE_BYTES || hdr[5] != TALLY_OP_RESULT)
		return verbs_conn_stage(v, c, hdr, payload, len, NULL);
	tally_proto_peek_hdr(hdr, &h);
	how = verbs_adv_place(c->adv, h.job_id, h.rank, h.key, h.round, h.flags, h.offset,
			      h.count, len, &pl.raddr, &pl.rkey);
	int rc = verbs_conn_stage(v, c, hdr, payload, len, how > 0 ? &pl : NULL);
	if (rc)
		return rc;
	if (how > 0) {
		v->st.results_placed++;
	} else {
		v->st.results_copied++;
		if (how < 0)
			v->st.place_out_of_range++;
	}
	return 0;
}

/* ---- client ------------------------------------------------------------------------- */

int verbs_pio_rx(struct tally_verbs *v, struct verbs_conn *c, const uint8_t *b, size_t len)
{
	struct tally_hdr h;
	uint64_t addr;
	uint32_t plen;
	size_t hl;

	(void)c;
	if (len < TALLY_HDR_LEN || b[5] != TALLY_OP_RESULT)
		return 0;
	hl = tally_proto_hdr_len(b);
	tally_proto_peek_hdr(b, &h);
	if (len != hl + VERBS_PLACE_BYTES || h.payload_len == VERBS_PLACE_BYTES ||
	    verbs_place_decode(b + hl, &addr, &plen)) {
		if (len > hl)
			v->st.rx_results_copied++;
		return 0;
	}
	/* the payload must be where we let the appliance write: our own registered memory */
	if (plen != h.payload_len || !v->rx_placed || !verbs_mrc_covers(&v->mrc, addr, plen)) {
		v->st.rx_bad_place++;
		return 1;
	}
	v->st.rx_placed++;
	v->rx_placed(v->rx_arg, b, hl, (const void *)(uintptr_t)addr, plen);
	return 1;
}

static int adv_post(struct tally_verbs *v, struct verbs_conn *c, const struct verbs_adv *a)
{
	uint8_t msg[VERBS_ADV_BYTES];
	struct verbs_adv w = *a;
	int rc;

	if (v->bad_advert && w.len) {
		w.addr = UINT64_MAX - 4096; /* wraps: the appliance must refuse it */
		w.len = 8192;
	}
	if (v->short_advert)
		w.len /= 2;
	verbs_adv_encode(msg, &w);
	if ((rc = verbs_conn_stage(v, c, NULL, msg, sizeof(msg), NULL)))
		return rc;
	rc = verbs_conn_flush(v, c);
	if (rc >= 0)
		v->st.adv_sent++;
	return rc < 0 ? rc : 0;
}

/* Withdraw every advertisement inside [addr, addr + len) (its registration goes). A RESULT
 * the appliance posted before it read the withdrawal fails on the dead rkey and breaks
 * the QP (the client reconnects): the cache is sized so the agent's fixed buffers never
 * leave it. */
static void withdraw(struct tally_verbs *v, uint64_t addr, uint64_t len)
{
	for (uint32_t core = 0; core < v->cfg.ncores; core++) {
		struct verbs_adv *t = v->cadv[core];
		struct verbs_conn *c = v->by_core[core];

		for (uint32_t i = 0; t && i < VERBS_ADV_TABLE; i++) {
			if (!t[i].valid || t[i].addr < addr || t[i].addr - addr >= len)
				continue;
			t[i].len = 0;
			if (c && c->state == VC_UP)
				adv_post(v, c, &t[i]);
			t[i] = (struct verbs_adv){ 0 };
		}
	}
}

static struct verbs_mrc_ent *mr_get(struct tally_verbs *v, void *out, size_t len)
{
	struct verbs_mrc_ent *e = verbs_mrc_find(&v->mrc, (uintptr_t)out, len);
	struct ibv_mr *mr;

	if (e)
		return e;
	if (!v->pd || !(e = verbs_mrc_victim(&v->mrc)))
		return NULL;
	if (e->mr) {
		withdraw(v, e->addr, e->len);
		ibv_dereg_mr(e->mr);
		*e = (struct verbs_mrc_ent){ 0 };
		v->st.mr_evictions++;
	}
	mr = ibv_reg_mr(v->pd, out, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!mr) {
		v->st.mr_fail++;
		verbs_err(v, "verbs: cannot register a %zu KiB result buffer (%s): its RESULTs "
			  "are copied; raise the memlock limit (ulimit -l, LimitMEMLOCK=)", len >> 10,
			  strerror(errno));
		return NULL;
	}
	*e = (struct verbs_mrc_ent){ .addr = (uintptr_t)out, .len = len, .mr = mr,
				     .used = ++v->mrc.tick };
	v->st.mr_regs++;
	return e;
}

int verbs_pio_advertise(struct tally_verbs *v, struct verbs_conn *c, const struct verbs_adv *a,
			void *out)
{
	struct verbs_mrc_ent *e;
	struct verbs_adv w = *a;

	if (!v->mrc.n || !v->rx_placed || !v->cadv || c->core >= v->cfg.ncores)
		return -EOPNOTSUPP;
	if (!a->len || a->len >= VERBS_ADV_MAX_BYTES)
		return -EINVAL;
	if (!(e = mr_get(v, out, a->len)))
		return -ENOMEM;
	if (!v->cadv[c->core] && !(v->cadv[c->core] = calloc(VERBS_ADV_TABLE, sizeof(w))))
		return -ENOMEM;
	w.addr = (uintptr_t)out;
	w.rkey = ((struct ibv_mr *)e->mr)->rkey;
	w.valid = 1;
	v->cadv[c->core][verbs_adv_idx(w.key, w.round)] = w;
	return adv_post(v, c, &w);
}

int verbs_pio_withdraw(struct tally_verbs *v, uint32_t core, const struct verbs_adv *a,
		       int tell)
{
	struct verbs_adv *t = v->cadv && core < v->cfg.ncores ? v->cadv[core] : NULL;
	struct verbs_adv *e = t ? &t[verbs_adv_idx(a->key, a->round)] : NULL;
	struct verbs_conn *c = v->by_core[core < v->cfg.ncores ? core : 0];
	struct verbs_adv w;

	if (!e || !e->valid || e->key != a->key || e->round != a->round)
		return 0;
	w = *e;
	*e = (struct verbs_adv){ 0 };
	if (!tell || !c || c->state != VC_UP)
		return 0;
	w.len = 0;
	return adv_post(v, c, &w);
}

void verbs_pio_readvertise(struct tally_verbs *v, struct verbs_conn *c)
{
	struct verbs_adv *t = v->cadv && c->core < v->cfg.ncores ? v->cadv[c->core] : NULL;

	/* as many as staging holds: the others' RESULTs are copied until their next round */
	for (uint32_t i = 0; t && i < VERBS_ADV_TABLE; i++)
		if (t[i].valid && adv_post(v, c, &t[i]) == -ENOBUFS)
			break;
}

int verbs_pio_init(struct tally_verbs *v)
{
	/* TALLY_VERBS_MR_CACHE is applied to cfg at the program's edge (tally_verbs_setting) */
	long n = v->cfg.mr_cache < 0 ? 0 : v->cfg.mr_cache ? (long)v->cfg.mr_cache : (long)VERBS_MRC_DEFAULT;

	if (v->cfg.listen)
		return 0;
	if (n > VERBS_MRC_MAX) {
		verbs_err(v, "verbs: mr_cache %ld out of range 0..%u", n, VERBS_MRC_MAX);
		return -EINVAL;
	}
	v->mrc.n = (uint32_t)n;
	v->mrc.ent = n ? calloc((size_t)n, sizeof(*v->mrc.ent)) : NULL;
	v->cadv = calloc(v->cfg.ncores, sizeof(*v->cadv));
	return (n && !v->mrc.ent) || !v->cadv ? -ENOMEM : 0;
}

void verbs_pio_fini(struct tally_verbs *v)
{
	for (uint32_t i = 0; v->mrc.ent && i < v->mrc.n; i++)
		if (v->mrc.ent[i].mr)
			ibv_dereg_mr(v->mrc.ent[i].mr);
	free(v->mrc.ent);
	v->mrc.ent = NULL;
	for (uint32_t i = 0; v->cadv && i < v->cfg.ncores; i++)
		free(v->cadv[i]);
	free(v->cadv);
	v->cadv = NULL;
}
