/* SPDX-License-Identifier: Apache-2.0
 * fake_appliance.c — the scripted appliance core of fake_appliance.h.
 */
#include "fake_appliance.h"

#include <string.h>

static void fake_send(struct fake_app *f, struct tally_hdr *h, const void *pl, size_t len)
{
	uint8_t hdr[TALLY_HDR_LEN];

	tally_proto_finish(hdr, h, pl, len);
	simnet_ops()->send(simnet_ctx(f->net, simnet_engine_node(f->net, f->core)), &f->client,
			   hdr, pl, len);
}

void fake_send_raw(struct fake_app *f, const void *buf, size_t len)
{
	simnet_inject(f->net, simnet_engine_node(f->net, f->core), &f->client, buf, len);
}

/* A keyed job's core: a JOIN_OK signed under its session (tally_auth.h: the run nonce in
 * offset|count, the JOIN's nonce echoed in reserved), payload after the auth block. */
static void fake_send_signed(struct fake_app *f, struct tally_hdr *h, const void *pl, size_t len)
{
	uint8_t hdr[TALLY_HDR_MAX], sess[TALLY_AUTH_SESS_LEN];

	h->flags |= TALLY_F_AUTH;
	h->crc = 0;
	h->payload_len = (uint32_t)len;
	h->offset = 0x52554e31; /* a run nonce */
	h->count = 0;
	tally_proto_encode_hdr(hdr, h);
	tally_auth_sess(sess, (uint64_t)h->count << 32 | h->offset, h->reserved);
	if (tally_auth_sign_s(f->auth, hdr, sess, pl, len) != 0)
		return;
	simnet_ops()->send(simnet_ctx(f->net, simnet_engine_node(f->net, f->core)), &f->client,
			   hdr, pl, len);
}

static void fake_answer(struct fake_app *f, const struct tally_pkt *p, bool included,
			const void *payload)
{
	struct tally_hdr h = p->hdr;

	h.op = TALLY_OP_RESULT;
	h.flags = included ? TALLY_F_INCLUDED : 0;
	h.contrib = 1;
	fake_send(f, &h, payload, p->hdr.payload_len);
}

static void fake_error(struct fake_app *f, const struct tally_pkt *p, int reason)
{
	struct tally_hdr h = p->hdr;

	h.op = TALLY_OP_ERROR;
	h.flags = 0; /* unsigned, whatever the request was */
	h.payload_len = 0;
	h.reason = (uint8_t)reason;
	h.aux = p->hdr.op;
	fake_send(f, &h, NULL, 0);
}

static void fake_rx(void *arg, const void *buf, size_t len, const struct tally_addr *from)
{
	struct fake_app *f = arg;
	struct tally_pkt p;

	if (tally_proto_decode(buf, len, &p) != TALLY_OK)
		return;
	f->client = *from;
	f->have_client = true;
	switch (p.hdr.op) {
	case TALLY_OP_JOIN: {
		struct tally_join_ok jok = { .base_port = 9170, .ncores = (uint16_t)f->ncores,
					     .max_chunk_bytes = 8192, .world_size = 1 };
		uint8_t pl[TALLY_JOIN_OK_LEN];
		struct tally_hdr h = p.hdr;

		f->njoin++;
		if (f->join_error) {
			fake_error(f, &p, f->join_error);
			if (f->join_error_left && --f->join_error_left == 0)
				f->join_error = 0;
			return;
		}
		if (f->unsigned_join_error)
			fake_error(f, &p, f->unsigned_join_error);
		if (f->join_no_ok)
			return;
		tally_proto_put_join_ok(pl, &jok);
		h.op = TALLY_OP_JOIN_OK;
		h.aux = f->join_aux_zero ? 0 : f->core;
		if (f->auth) {
			fake_send_signed(f, &h, pl, sizeof(pl));
			return;
		}
		fake_send(f, &h, pl, sizeof(pl));
		return;
	}
	case TALLY_OP_REGISTER: {
		struct tally_hdr h = p.hdr;

		f->nregister++;
		if (f->register_error) {
			fake_error(f, &p, f->register_error);
			return;
		}
		h.flags = TALLY_F_ACK;
		fake_send(f, &h, p.payload, p.hdr.payload_len);
		return;
	}
	case TALLY_OP_BYE:
		f->nbye++;
		return;
	case TALLY_OP_PUSH:
		break;
	default:
		return;
	}
	if (f->npush < FAKE_LOG) {
		struct fake_push *l = &f->log[f->npush];

		l->t = simnet_now(f->net);
		l->key = p.hdr.key;
		l->round = p.hdr.round;
		l->offset = p.hdr.offset;
		l->count = p.hdr.count;
		l->dtype = p.hdr.dtype;
		l->flags = p.hdr.flags;
		l->first_i = 0;
		memcpy(&l->first_i, p.payload, p.hdr.dtype == TALLY_DT_F32 || p.hdr.dtype == TALLY_DT_I32 ? 4 : 2);
		if (p.hdr.dtype == TALLY_DT_F32)
			memcpy(&l->first, p.payload, 4);
		else if (p.hdr.dtype == TALLY_DT_F16)
			l->first = tally_f16_to_f32((uint16_t)l->first_i);
		else if (p.hdr.dtype == TALLY_DT_BF16)
			l->first = tally_bf16_to_f32((uint16_t)l->first_i);
		else
			l->first = (float)l->first_i;
	}
	f->npush++;
	switch (f->mode) {
	case FAKE_ECHO:
		if (f->silent_first) {
			f->silent_first--;
			return;
		}
		fake_answer(f, &p, true, p.payload);
		return;
	case FAKE_SILENT:
		return;
	case FAKE_HOLD:
		for (unsigned i = 0; i < f->nheld; i++) {
			struct tally_pkt q;

			tally_proto_decode(f->held[i], f->held_len[i], &q);
			if (q.hdr.key == p.hdr.key && q.hdr.round == p.hdr.round &&
			    q.hdr.offset == p.hdr.offset)
				return; /* a retransmission of a held chunk */
		}
		if (f->nheld < FAKE_HELD && len <= sizeof(f->held[0])) {
			memcpy(f->held[f->nheld], buf, len);
			f->held_len[f->nheld++] = len;
			f->outstanding++;
			if (f->outstanding > f->max_outstanding)
				f->max_outstanding = f->outstanding;
		}
		return;
	case FAKE_EXCLUDE: {
		uint8_t pl[8192];
		size_t es = tally_dtype_size((enum tally_dtype)p.hdr.dtype);

		for (uint32_t i = 0; i < p.hdr.count; i++) {
			if (p.hdr.dtype == TALLY_DT_F32)
				memcpy(pl + i * 4, &f->others, 4);
			else if (p.hdr.dtype == TALLY_DT_I32) {
				int32_t v = (int32_t)f->others;
				memcpy(pl + i * 4, &v, 4);
			} else {
				uint16_t v = p.hdr.dtype == TALLY_DT_F16 ? tally_f32_to_f16(f->others) :
					     tally_f32_to_bf16(f->others);
				memcpy(pl + i * es, &v, 2);
			}
		}
		fake_answer(f, &p, false, pl);
		return;
	}
	}
}

void fake_release(struct fake_app *f)
{
	for (unsigned i = 0; i < f->nheld; i++) {
		struct tally_pkt p;

		tally_proto_decode(f->held[i], f->held_len[i], &p);
		fake_answer(f, &p, true, p.payload);
	}
	f->nheld = 0;
	f->outstanding = 0;
}

void fake_attach(struct fake_app *f, struct simnet *net, unsigned core, unsigned ncores)
{
	struct simnet_node_ops o = { .rx = fake_rx, .tick = NULL };

	memset(f, 0, sizeof(*f));
	f->net = net;
	f->core = core;
	f->ncores = ncores;
	simnet_attach(net, simnet_engine_node(net, core), &o, f);
}
