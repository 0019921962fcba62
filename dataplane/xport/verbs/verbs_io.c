/* SPDX-License-Identifier: Apache-2.0
 * verbs_io.c — the verbs packet path: send (one RDMA WRITE_WITH_IMM into the peer's next
 * landing slot), completion polling (hand each landed packet to the rx callback, return the
 * slot as credit, reclaim staging), and poll() with a timeout (the completion channel).
 */
#include "verbs_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define STALL_NS 500000000ull      /* messages waiting this long for credit: probe the peer */
#define STALL_DEAD_NS 8000000000ull /* a probe out this long: the peer is gone */

static void broken(struct tally_verbs *v, struct verbs_conn *c, const char *why);

uint64_t verbs_now_ns(void *ctx)
{
	struct timespec ts;

	(void)ctx;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct verbs_conn *conn_of(struct tally_verbs *v, const struct tally_addr *to)
{
	if (!v->cfg.listen) {
		struct verbs_conn *c = to->core < v->cfg.ncores ? v->by_core[to->core] : NULL;
		uint64_t now;

		if (c && c->state == VC_UP)
			return c;
		/* First use of a core, or its QP broke (appliance restarted): connect, rate
		 * limited. The control path, on the send path only while not connected. */
		if (to->core >= v->cfg.ncores)
			return NULL;
		now = verbs_now_ns(v);
		if (c && now < c->retry_at_ns)
			return NULL;
		if (c)
			v->st.reconnects++;
		if (verbs_cm_connect(v, to->core)) {
			v->by_core[to->core]->retry_at_ns = now + VERBS_RECONNECT_NS;
			return NULL;
		}
		/* a restarted appliance knows none of our buffers: tell it again */
		if (c)
			verbs_pio_readvertise(v, v->by_core[to->core]);
		return v->by_core[to->core];
	}
	uint64_t ck = to->cookie;
	uint32_t idx = (uint32_t)(ck & 0xffffffffu);

	if ((ck & 0xffff000000000000ull) != TALLY_VERBS_COOKIE_TAG || idx >= v->nconns)
		return NULL;
	struct verbs_conn *c = &v->conns[idx];
	return c->state == VC_UP && c->gen == (uint16_t)(ck >> 32) ? c : NULL;
}

/* A peer killed without its disconnect reaching us (the dying process's kernel sends
 * rdma_cm's DREQ once; it can be lost) leaves a QP that looks up: with no credit left nothing
 * more is posted, so no completion ever fails, and the session's PINGs die in staging. So
 * while messages are outstanding (staged or posted, not completed) and nothing moves (no
 * completion, no credit, no packet) for STALL_NS, a zero-length write goes out; it needs no
 * landing slot: a dead peer fails it after the QP's retries (broken: the client
 * reconnects), a live one completes it; one out for STALL_DEAD_NS is a dead peer too.
 * Reads the clock only when nothing moved since the last send. 0, or -ENOTCONN: dropped. */
static int stall_check(struct tally_verbs *v, struct verbs_conn *c)
{
	uint32_t mark = c->ring.tx_done + c->ring.peer_consumed + c->ring.rx_seq;
	uint64_t now;

	if (c->ring.tx_staged == c->ring.tx_done || mark != c->stall_mark) {
		c->stall_mark = mark;
		c->stall_ns = 0;
		return 0;
	}
	now = verbs_now_ns(v);
	if (!c->stall_ns) {
		c->stall_ns = now;
		return 0;
	}
	if (c->probe_ns) {
		if (now - c->probe_ns < STALL_DEAD_NS)
			return 0;
		v->st.stalls_dead++;
		broken(v, c, "nothing moved and a zero-length write did not complete (peer gone)");
		return -ENOTCONN;
	}
	if (now - c->stall_ns >= STALL_NS && !verbs_conn_probe(c)) {
		c->probe_ns = now;
		v->st.stall_probes++;
	}
	return 0;
}

int verbs_send(void *ctx, const struct tally_addr *to, const uint8_t *hdr, const void *payload,
	       size_t len)
{
	struct tally_verbs *v = ctx;
	struct verbs_conn *c = conn_of(v, to);
	int rc;

	if (!c) {
		v->st.tx_not_conn++;
		return -ENOTCONN;
	}
	rc = v->cfg.listen ? verbs_pio_stage(v, c, hdr, payload, len) :
			     verbs_conn_stage(v, c, hdr, payload, len, NULL);
	if (rc == -ENOBUFS) {
		v->st.tx_no_credit++;
		return stall_check(v, c) ? -ENOTCONN : rc;
	}
	if (rc || (rc = verbs_conn_flush(v, c)) < 0) {
		v->st.tx_errors++;
		return rc;
	}
	if (stall_check(v, c))
		return -ENOTCONN;
	v->st.tx_pkts++;
	v->st.tx_bytes += tally_proto_hdr_len(hdr) + len;
	return 0;
}

int verbs_advertise(void *ctx, const struct tally_addr *to, uint32_t job, uint32_t rank,
		    uint32_t key, uint32_t round, void *out, size_t len)
{
	struct tally_verbs *v = ctx;
	struct verbs_adv a = { .job = job, .rank = rank, .key = key, .round = round, .len = len };
	struct verbs_conn *c;

	if (v->cfg.listen || !v->mrc.n || !v->rx_placed)
		return -EOPNOTSUPP;
	if (!len)
		return verbs_pio_withdraw(v, to->core, &a, out != NULL);
	if (!out)
		return -EINVAL;
	if (!(c = conn_of(v, to))) {
		v->st.tx_not_conn++;
		return -ENOTCONN;
	}
	return verbs_pio_advertise(v, c, &a, out);
}

static void broken(struct tally_verbs *v, struct verbs_conn *c, const char *why)
{
	char ip[INET_ADDRSTRLEN] = "?";

	inet_ntop(AF_INET, &c->addr.ip, ip, sizeof(ip));
	verbs_err(v, "verbs: connection %s core %u broke: %s", ip, c->core, why);
	if (c->state == VC_UP)
		v->st.conns_down++;
	verbs_cm_close(v, c);
	if (!v->cfg.listen)
		c->state = VC_DEAD; /* the next send to that core reconnects */
}

/* A landed message: credit update, then the packet to the callback, then its slot back. */
static int on_recv(struct tally_verbs *v, struct verbs_conn *c, const struct ibv_wc *wc)
{
	int slot, rc;

	if ((rc = verbs_ring_rx(&c->ring, ntohl(wc->imm_data), &slot))) {
		v->st.rx_bad_credit++;
		broken(v, c, "the peer returned credits it never had");
		return 0;
	}
	if (verbs_conn_post_recv(c)) {
		broken(v, c, "cannot re-post a receive");
		return 0;
	}
	if (slot < 0) {
		v->st.rx_credit_msgs++;
	} else if ((wc->byte_len < TALLY_HDR_LEN &&
		    !(v->cfg.listen && wc->byte_len == VERBS_ADV_BYTES)) ||
		   wc->byte_len > VERBS_SLOT_BYTES) {
		v->st.rx_bad_len++;
		verbs_ring_rx_done(&c->ring);
	} else {
		const uint8_t *b = c->mem + (size_t)slot * VERBS_SLOT_BYTES;
		uint32_t magic = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
				 (uint32_t)b[3] << 24;

		v->st.rx_pkts++;
		v->st.rx_bytes += wc->byte_len;
		/* verbs-level messages (verbs_place.h) never reach the engine */
		if (v->cfg.listen && magic == VERBS_ADV_MAGIC)
			verbs_pio_adv_rx(v, c, b, wc->byte_len);
		else if ((v->cfg.listen || !verbs_pio_rx(v, c, b, wc->byte_len)) && v->rx)
			v->rx(v->rx_arg, b, wc->byte_len, &c->addr);
		verbs_ring_rx_done(&c->ring);
		rc = 1;
	}
	if (slot >= 0 && !c->dirty && v->ndirty < v->nconns) {
		c->dirty = 1;
		v->dirty[v->ndirty++] = c->idx;
	}
	/* Staged messages waiting for this credit go now (they carry our credits too); else
	 * report ours explicitly when half the ring is unreported. */
	if (c->state == VC_UP && verbs_conn_flush(v, c) < 0)
		broken(v, c, "ibv_post_send failed");
	else if (c->state == VC_UP && verbs_ring_credit_due(&c->ring) && !verbs_conn_credit(c))
		v->st.tx_credit_msgs++;
	return rc;
}

int verbs_poll_cq(struct tally_verbs *v)
{
	struct ibv_wc wc[VERBS_CQ_BATCH];
	int n, got = 0;

	if (!v->cq)
		return 0;
	n = ibv_poll_cq(v->cq, VERBS_CQ_BATCH, wc);
	v->last_wcs = n > 0 ? (uint32_t)n : 0;
	for (int i = 0; i < n; i++) {
		uint32_t idx = (uint32_t)(wc[i].wr_id >> 8) & 0xffffffffu;
		struct verbs_conn *c = idx < v->nconns ? &v->conns[idx] : NULL;

		/* Completions of a QP already closed (flushes) belong to an older generation. */
		if (!c || c->gen != (uint16_t)(wc[i].wr_id >> 40) ||
		    (c->state != VC_UP && c->state != VC_CONNECTING))
			continue;
		if (wc[i].status != IBV_WC_SUCCESS) {
			v->st.wc_errors++;
			broken(v, c, ibv_wc_status_str(wc[i].status));
			continue;
		}
		if (wc[i].opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
			/* The client sends only once it is ESTABLISHED, so its first packet proves
			 * the connection even when our ESTABLISHED is late or lost (a lost RTU):
			 * until then we could neither answer nor return its credits (CI saw a
			 * rank wait out its give-up on that). Our QP is at RTS since the accept. */
			if (c->state == VC_CONNECTING && v->cfg.listen) {
				v->st.up_by_packet++;
				verbs_cm_up(v, c);
			}
			got += on_recv(v, c, &wc[i]);
		} else if (wc[i].wr_id & VERBS_WR_PLACE) {
			/* unsignaled: only its error completes (handled above) */
		} else if (wc[i].wr_id & VERBS_WR_PROBE) {
			c->probe_ns = 0; /* the peer lives: probe again after another stall */
			c->stall_ns = 0;
		} else if (wc[i].wr_id & 1) {
			verbs_ring_tx_completed(&c->ring);
		} else if (c->credit_out && --c->credit_out < VERBS_EXTRA_RECV / 2 &&
			   verbs_ring_credit_due(&c->ring) && !verbs_conn_credit(c)) {
			v->st.tx_credit_msgs++; /* one held back by the limit */
		}
	}
	return n < 0 ? -EIO : got;
}

/* The CQ is empty: return every consumed slot not yet reported, so a peer never waits
 * for credits we hold while we have nothing to send it. One message per connection per
 * burst, on the idle path only. */
static void idle_credits(struct tally_verbs *v)
{
	uint32_t keep = 0;

	for (uint32_t i = 0; i < v->ndirty; i++) {
		struct verbs_conn *c = &v->conns[v->dirty[i]];

		if (c->state != VC_UP || c->ring.rx_consumed == c->ring.rx_reported) {
			c->dirty = 0;
			continue;
		}
		if (verbs_conn_flush(v, c) > 0 || !verbs_conn_credit(c)) {
			if (c->ring.rx_consumed == c->ring.rx_reported) {
				v->st.tx_credit_msgs++;
				c->dirty = 0;
				continue;
			}
		}
		v->dirty[keep++] = v->dirty[i]; /* the credit limit: next time */
	}
	v->ndirty = keep;
}

/* Block on the completion channel and the rdma_cm channel (nothing on the CQ). */
static void wait_events(struct tally_verbs *v, uint64_t timeout_ns)
{
	struct pollfd p[2] = { { .fd = v->ch->fd, .events = POLLIN },
			       { .fd = v->cc ? v->cc->fd : -1, .events = POLLIN } };
	struct ibv_cq *cq;
	void *cq_ctx;

	if (v->cq && !v->cq_armed) {
		if (ibv_req_notify_cq(v->cq, 0))
			return;
		v->cq_armed = 1;
		/* Completions already queued raise no event: handle them (they may be sends only,
		 * with packets behind them) and let the caller poll again before sleeping. */
		verbs_poll_cq(v);
		if (v->last_wcs)
			return;
	}
	v->st.cq_waits++;
	if (poll(p, 2, (int)((timeout_ns + 999999) / 1000000)) <= 0)
		return;
	if ((p[1].revents & POLLIN) && !ibv_get_cq_event(v->cc, &cq, &cq_ctx)) {
		v->cq_armed = 0;
		/* Acks take a lock inside libibverbs: batch them (the control path anyway). */
		if (++v->cq_unacked >= 64) {
			ibv_ack_cq_events(v->cq, v->cq_unacked);
			v->cq_unacked = 0;
		}
	}
}

/* Spin on the CQ for the busy-poll budget (within the timeout): packets delivered. */
static int spin(struct tally_verbs *v, uint64_t end)
{
	uint64_t now = verbs_now_ns(v), stop = now + v->busy_ns;
	int got = 0;

	if (stop > end)
		stop = end;
	v->st.spins++;
	while (!got && now < stop) {
		got = verbs_poll_cq(v);
		now = verbs_now_ns(v);
	}
	if (got)
		v->st.spin_hits++;
	return got;
}

int verbs_poll(void *ctx, uint64_t timeout_ns)
{
	struct tally_verbs *v = ctx;
	uint64_t end = timeout_ns ? verbs_now_ns(v) + timeout_ns : 0;
	int got, spun = 0, more = 8;

	for (;;) {
		got = verbs_poll_cq(v);
		/* Only send completions so far: the CQ may hold packets behind them. */
		if (!got && v->last_wcs == VERBS_CQ_BATCH && more-- > 0)
			continue;
		if (!got && v->last_wcs && timeout_ns && verbs_now_ns(v) < end)
			continue;
		if (!got && !v->last_wcs && v->ndirty)
			idle_credits(v);
		if (!got && timeout_ns && v->busy_ns && !spun++)
			got = spin(v, end);
		if (got)
			return got;
		if (!timeout_ns) {
			verbs_cm_events(v); /* idle: a non-blocking read for connects/disconnects */
			break;
		}
		uint64_t now = verbs_now_ns(v);
		if (now >= end)
			break;
		wait_events(v, end - now);
		verbs_cm_events(v);
	}
	return 0;
}

int tally_verbs_poll_burst(struct tally_verbs *v)
{
	int n = 0, more = 8;

	/* A full batch may hide more behind it: a few more polls, bounded (the lcore's other
	 * queues wait meanwhile). Then, CQ empty, the credits held back go out. */
	do {
		if (verbs_poll_cq(v) < 0)
			break;
		n += (int)v->last_wcs;
	} while (v->last_wcs == VERBS_CQ_BATCH && more-- > 0);
	if (!v->last_wcs && v->ndirty)
		idle_credits(v);
	return n;
}
