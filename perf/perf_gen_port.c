/* SPDX-License-Identifier: Apache-2.0
 * perf_gen_port.c — the generator's port to a real appliance (perf_gen_port.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "perf_gen_port.h"

static double gp_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void gp_rx(void *arg, const void *buf, size_t len, const struct tally_addr *from)
{
	struct gp_port *p = arg;

	(void)from;
	if (p->setup) { /* JOIN_OK, REGISTER acks, ERRORs: count them */
		struct tally_hdr h;
		const uint8_t *b = buf;

		if (len < TALLY_HDR_LEN)
			return;
		tally_proto_peek_hdr(buf, &h);
		if (h.op == TALLY_OP_JOIN_OK && len >= TALLY_HDR_LEN + TALLY_JOIN_OK_LEN) {
			/* struct tally_join_ok: base_port, then ncores (u16, little-endian) */
			unsigned n = b[TALLY_HDR_LEN + 2] | (unsigned)b[TALLY_HDR_LEN + 3] << 8;

			if (n != (p->ncores ? p->ncores : 1)) {
				p->bad_ncores++;
				p->seen_ncores = n;
			}
			p->join_ok++;
		} else if (h.op == TALLY_OP_JOIN_OK) {
			p->join_ok++;
		} else if (h.op == TALLY_OP_REGISTER && (h.flags & TALLY_F_ACK))
			p->reg_ok++;
		else if (h.op == TALLY_OP_ERROR)
			p->errors++;
		return;
	}
	if (p->tail - p->head == GP_STAGE || len > GP_FRAME) {
		p->overflow++;
		return;
	}
	memcpy(p->stage[p->tail % GP_STAGE], buf, len);
	p->len[p->tail++ % GP_STAGE] = (uint32_t)len;
	p->delivered++;
}

int gp_open(struct gp_port *p, const char *name, const struct tally_xport_opts *xo, char *err,
	    size_t errlen)
{
	struct tally_xport_rx rx = { .rx = gp_rx, .arg = p };
	int rc;

	memset(p, 0, sizeof(*p));
	rc = tally_xport_open(name, "--transport", xo, &p->x, err, errlen);
	if (rc)
		return rc;
	p->ops = p->x.ops;
	p->ctx = p->x.ctx;
	tally_xport_set_rx(&p->x, &rx);
	return 0;
}

void gp_close(struct gp_port *p)
{
	if (p->ctx)
		tally_xport_close(&p->x);
	p->ctx = NULL;
}

static unsigned gp_ncores(const struct gp_port *p)
{
	return p->ncores ? p->ncores : 1;
}



static int gp_send_ctl(struct gp_port *p, struct tally_hdr *h, const uint8_t *pl, size_t len,
		       unsigned core)
{
	uint8_t hdr[TALLY_HDR_LEN];
	struct tally_addr to = p->to;

	to.core = core;
	tally_proto_finish(hdr, h, pl, len);
	return p->ops->send(p->ctx, &to, hdr, pl, len);
}

/* Send every rank's control packet (join: JOIN at every core, else REGISTER of every key at
 * its core), then wait for as many answers; resend all once a second. */
static int gp_phase(struct gp_port *p, const struct pg_opts *o, int join, double timeout_s,
		    char *err, size_t errlen)
{
	unsigned nc = gp_ncores(p);
	unsigned want = join ? o->ranks * nc : o->ranks * o->keys;
	unsigned *got = join ? &p->join_ok : &p->reg_ok;
	double end = gp_now() + timeout_s, next = 0;

	*got = 0;
	p->bad_ncores = 0;
	while (*got < want || (join && p->bad_ncores)) {
		if (join && p->bad_ncores) {
			snprintf(err, errlen, "JOIN_OK: the appliance has %u cores, not %u (give "
				 "tally-linegen --dut-cores %u)", p->seen_ncores, nc, p->seen_ncores);
			return -EPROTO;
		}
		if (gp_now() > end) {
			snprintf(err, errlen, "%s: %u of %u answers in %.0f s (%u errors)",
				 join ? "JOIN" : "REGISTER", *got, want, timeout_s, p->errors);
			return -ETIMEDOUT;
		}
		if (gp_now() >= next) {
			*got = 0;
			for (unsigned r = 0; r < o->ranks; r++)
				for (unsigned k = 0; k < (join ? nc : o->keys); k++) {
					uint32_t key = join ? pg_key(o, 0) : pg_key(o, k);
					struct tally_hdr h = { .op = join ? TALLY_OP_JOIN :
								   TALLY_OP_REGISTER,
							       .job_id = o->job_id, .rank = r,
							       .token = o->token,
							       .key = key };
					uint8_t pl[32];

					if (join) {
						struct tally_join j = {
							.world_size = o->ranks,
							.max_chunk_bytes = o->chunk_bytes };
						tally_proto_put_join(pl, &j);
					} else {
						struct tally_register g = {
							.nelems = o->chunks * (o->chunk_bytes / 4),
							.chunk_elems = o->chunk_bytes / 4,
							.participants = (uint16_t)o->ranks,
							.quorum = (uint16_t)o->ranks };
						tally_proto_put_register(pl, &g);
					}
					gp_send_ctl(p, &h, pl, join ? TALLY_JOIN_LEN :
								 TALLY_REGISTER_LEN,
						    join ? k : key % nc);
				}
			tally_xport_flush(&p->x);
			next = gp_now() + 1;
		}
		p->ops->poll(p->ctx, 1000000);
	}
	return 0;
}

int gp_setup(struct gp_port *p, const struct pg_opts *o, double timeout_s, char *err,
	     size_t errlen)
{
	int rc;

	p->setup = 1;
	rc = gp_phase(p, o, 1, timeout_s, err, errlen);
	if (!rc)
		rc = gp_phase(p, o, 0, timeout_s, err, errlen);
	p->setup = 0;
	return rc;
}

/* No flush here: both transports' poll sends what is queued first, and the generator polls
 * after every tx (dpdk's flush would also busy-poll up to 100 us for replies). */
static unsigned gp_tx(void *ctx, const uint8_t *const *frames, const uint32_t *lens, unsigned n)
{
	struct gp_port *p = ctx;
	unsigned sent = 0, nc = gp_ncores(p);

	for (unsigned i = 0; i < n; i++) {
		if (nc > 1) { /* the key's core: its UDP port, and on a port of several queues
			       * the queue that core polls */
			struct tally_hdr h;

			tally_proto_peek_hdr(frames[i], &h);
			p->to.core = h.key % nc;
		}
		if (p->ops->send(p->ctx, &p->to, frames[i], frames[i] + TALLY_HDR_LEN,
				 lens[i] - TALLY_HDR_LEN))
			p->send_errors++;
		else
			sent++;
	}
	return sent;
}

static unsigned gp_rxf(void *ctx, struct pg_frame *f, unsigned max)
{
	struct gp_port *p = ctx;
	unsigned k = 0;

	p->head += p->handed; /* the generator is done with those */
	p->handed = 0;
	if (GP_STAGE - (p->tail - p->head) >= 64)
		p->ops->poll(p->ctx, 0);
	for (; k < max && p->head + k != p->tail; k++) {
		unsigned i = (unsigned)((p->head + k) % GP_STAGE);

		f[k].hdr = p->stage[i];
		f[k].hlen = TALLY_HDR_LEN;
		f[k].payload = p->stage[i] + TALLY_HDR_LEN;
		f[k].plen = p->len[i] - TALLY_HDR_LEN;
	}
	p->handed = k;
	return k;
}

void gp_io(struct gp_port *p, struct pg_io *io)
{
	io->ctx = p;
	io->tx = gp_tx;
	io->rx = gp_rxf;
}
