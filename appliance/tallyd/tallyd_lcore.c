/* SPDX-License-Identifier: Apache-2.0
 * tallyd_lcore.c — one datapath lcore: rx burst → validate → engine (or bounce) → tx burst,
 * software dispatch to the owning core, engine timers, commands from the main thread; an
 * empty loop goes to the idle wait (tallyd_idle.c: RX interrupt, capped sleep or spin).
 */
#include <errno.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_pause.h>
#include <rte_ring.h>

#include "tallyd.h"

#define LC_ENGINE_POLL_US 50
#define LC_SLOW_POLLS 20 /* rdma_cm events every 20th engine poll (1 ms): a syscall each */

/* The engine path for a frame this core owns; takes the mbuf. */
static void lc_deliver(struct tallyd_lcore *lc, struct rte_mbuf *m, uint16_t pi,
		       const struct tally_pkt_parsed *p)
{
	lc->st.io.tally_pkts++;
	lc->st.last_tally_tsc = rte_rdtsc();
	if (!lc->engine) { /* --io-forward: the I/O baseline */
		tally_pkt_udp_bounce(rte_pktmbuf_mtod(m, uint8_t *));
		m->ol_flags = 0;
		tally_dpdk_tx_enqueue(&lc->tx, pi, m);
		return;
	}
	struct tally_addr from;

	tally_dpdk_addr_from(&from, p, pi);
	/* zero copy: the engine sums straight from the mbuf */
	if (tally_engine_rx(lc->engine, rte_pktmbuf_mtod_offset(m, const uint8_t *, p->l4_off),
			    p->l4_len, &from) != TALLY_OK)
		lc->st.io.engine_rejects++;
	rte_pktmbuf_free(m);
}

static void lc_drop(struct tallyd_lcore *lc, struct rte_mbuf *m, enum tally_pkt_drop why)
{
	lc->st.drops[why]++;
	rte_pktmbuf_free(m);
}

/* A PULL probe for a core whose dispatch ring is 3/4 full is dropped here, so the last
 * quarter stays for pushes and control packets. Workers probe every chunk they hold, and
 * re-probe each one their core answers late: with a core behind (two CPUs shared by four
 * lcores, four workers and stress-ng), probes were 92% of what reached the engines and a
 * re-sent push that had to win a slot against them failed for 30 s. A shed probe costs
 * its sender another probe; a dropped push costs a probe round trip and the payload. */
static int lc_shed(const struct rte_ring *ring, const uint8_t *l4, uint32_t l4_len)
{
	return tally_proto_peek_op(l4, l4_len) == TALLY_OP_PULL &&
	       rte_ring_free_count(ring) < rte_ring_get_capacity(ring) / 4;
}

/* Classify one frame; `mine` is set for frames taken from this core's dispatch ring. */
static void lc_handle(struct tallyd_lcore *lc, struct rte_mbuf *m, int mine)
{
	struct tallyd *d = lc->d;
	struct tally_pkt_parsed p;

	if (m->nb_segs != 1)
		return lc_drop(lc, m, TALLY_PKT_D_MULTISEG);
	if ((m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK) == RTE_MBUF_F_RX_IP_CKSUM_BAD ||
	    (m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK) == RTE_MBUF_F_RX_L4_CKSUM_BAD)
		return lc_drop(lc, m, TALLY_PKT_D_HW_CSUM_BAD);
	uint16_t pi = d->pidx[m->port];
	switch (tally_pkt_parse(rte_pktmbuf_mtod(m, const uint8_t *), m->data_len,
				 &d->port[pi].ifa, &p)) {
	case TALLY_PKT_C_UDP: {
		unsigned owner = (unsigned)(rte_be_to_cpu_16(p.dport) - d->conf.base_port);

		if (mine || owner == lc->idx)
			return lc_deliver(lc, m, pi, &p);
		/* the device could not steer this port to its core's queue */
		struct rte_ring *ring = d->lcore[owner]->dispatch;

		if (lc_shed(ring, rte_pktmbuf_mtod_offset(m, const uint8_t *, p.l4_off), p.l4_len))
			return lc_drop(lc, m, TALLY_PKT_D_PROBE_SHED);
		if (rte_ring_mp_enqueue(ring, m))
			return lc_drop(lc, m, TALLY_PKT_D_RING_FULL);
		lc->st.io.dispatched_out++;
		return;
	}
	case TALLY_PKT_C_ARP_REQ:
		lc->st.io.arp_replies++;
		return tally_dpdk_answer(&lc->tx, pi, m, TALLY_PKT_C_ARP_REQ);
	case TALLY_PKT_C_ICMP_ECHO:
		lc->st.io.icmp_replies++;
		return tally_dpdk_answer(&lc->tx, pi, m, TALLY_PKT_C_ICMP_ECHO);
	case TALLY_PKT_C_ARP_REPLY:
		return lc_drop(lc, m, TALLY_PKT_D_ARP_OTHER);
	default:
		return lc_drop(lc, m, p.drop);
	}
}

static int lc_exec(struct tallyd_lcore *lc, struct tallyd_cmd *c)
{
	struct tally_engine *e = lc->engine;

	switch (c->op) {
	case TALLYD_CMD_NOP:
		return 0;
	case TALLYD_CMD_QUERY:
		return c->fn ? c->fn(lc, c->buf, c->len, c->arg) : -EINVAL;
	case TALLYD_CMD_STATS_RESET:
		memset(&lc->st, 0, sizeof(lc->st));
		memset(&lc->tx.st, 0, sizeof(lc->tx.st));
		if (e)
			tally_engine_stats_reset(e);
		return 0;
	case TALLYD_CMD_DRAIN:
		lc->draining = 1;
		if (e)
			tally_engine_set_draining(e, 1);
		return 0;
	default:
		return -EINVAL;
	}
}

static unsigned lc_commands(struct tallyd_lcore *lc, int shutting_down)
{
	void *objs[8];
	unsigned n = rte_ring_sc_dequeue_burst(lc->cmd, objs, 8, NULL);

	for (unsigned i = 0; i < n; i++) {
		struct tallyd_cmd *c = objs[i];

		c->result = shutting_down ? -ESHUTDOWN : lc_exec(lc, c);
		lc->st.io.cmds++;
		/* the ack ring is as large as the command ring: it has room */
		while (rte_ring_sp_enqueue(lc->ack, c))
			rte_pause();
	}
	return n;
}

/* One burst from each queue this lcore polls (one, or a few when ports outnumber cores). */
static unsigned lc_rx(struct tallyd_lcore *lc, struct rte_mbuf **pkts)
{
	unsigned work = 0;

	for (uint16_t k = 0; k < lc->npoll; k++) {
		const struct tallyd_poll *q = &lc->poll[k];
		uint16_t n = rte_eth_rx_burst(q->port_id, q->rxq, pkts, TALLY_DPDK_BURST);

		for (uint16_t i = 0; i < n; i++) {
			lc->st.io.rx_pkts++;
			lc->st.io.rx_bytes += pkts[i]->pkt_len;
			lc_handle(lc, pkts[i], 0);
		}
		work += n;
	}
	return work;
}

/* What other cores relay through this lcore for the ports it polls. */
static unsigned lc_relay(struct tallyd_lcore *lc, struct rte_mbuf **pkts)
{
	unsigned work = 0;

	for (uint16_t k = 0; k < lc->npoll; k++) {
		const struct tallyd_poll *q = &lc->poll[k];

		if (!q->txin)
			continue;
		uint16_t n = (uint16_t)rte_ring_sc_dequeue_burst(q->txin, (void **)pkts,
								 TALLY_DPDK_BURST, NULL);
		for (uint16_t i = 0; i < n; i++)
			tally_dpdk_tx_enqueue(&lc->tx, q->port_idx, pkts[i]);
		work += n;
	}
	return work;
}

int tallyd_lcore_main(void *arg)
{
	struct tallyd_lcore *lc = arg;
	struct tallyd *d = lc->d;
	struct rte_mbuf *pkts[TALLY_DPDK_BURST];
	uint64_t hz = rte_get_tsc_hz();
	uint64_t poll_cycles = hz / 1000000 * LC_ENGINE_POLL_US, next_poll = 0;
	unsigned slow = 0;

	tallyd_idle_start(lc);
	lc->running = 1;
	while (!d->stop) {
		unsigned work = 0;
		uint16_t n;

		lc->st.io.loops++;
		work += lc_rx(lc, pkts); /* verbs only: no queue */
		if (lc->dispatch) {
			n = (uint16_t)rte_ring_sc_dequeue_burst(lc->dispatch, (void **)pkts,
								TALLY_DPDK_BURST, NULL);
			lc->st.io.dispatched_in += n;
			for (uint16_t i = 0; i < n; i++)
				lc_handle(lc, pkts[i], 1);
			work += n;
		}
		work += lc_relay(lc, pkts);
		if (lc->verbs)
			work += (unsigned)tallyd_verbs_poll(lc);
		uint64_t now = rte_rdtsc();
		if (lc->engine && now >= next_poll) {
			work += tally_engine_poll(lc->engine);
			next_poll = now + poll_cycles;
			/* connection management at the slow cadence, never per burst */
			if (lc->verbs && ++slow >= LC_SLOW_POLLS) {
				slow = 0;
				tallyd_verbs_slow(lc);
			}
		}
		work += lc_commands(lc, 0);
		tally_dpdk_tx_flush(&lc->tx, 0);
		if (work) {
			lc->st.io.busy_loops++;
			tallyd_idle_busy(lc);
			continue;
		}
		tallyd_idle_empty(lc);
	}
	tallyd_idle_stop(lc);
	tally_dpdk_tx_flush(&lc->tx, 1);
	lc->running = 0;
	lc_commands(lc, 1);
	/* after the acks: the main thread may take back what is posted from now on */
	rte_smp_wmb();
	lc->stopped = 1;
	return 0;
}

int tallyd_cmd_post(struct tallyd *d, unsigned idx, struct tallyd_cmd *cmd)
{
	if (idx >= d->ncores)
		return -ENODEV;
	return rte_ring_sp_enqueue(d->lcore[idx]->cmd, cmd) ? -ENOBUFS : 0;
}

int tallyd_cmd_reap(struct tallyd *d, unsigned idx, struct tallyd_cmd **cmd)
{
	void *o;

	if (idx >= d->ncores || rte_ring_sc_dequeue(d->lcore[idx]->ack, &o))
		return 0;
	*cmd = o;
	return 1;
}

/* Wait for `cmd`'s acknowledgement from core idx (acks come back in posting order). */
static int lc_wait(struct tallyd *d, unsigned idx, struct tallyd_cmd *cmd)
{
	struct tallyd_lcore *lc = d->lcore[idx];
	struct tallyd_cmd *got;

	for (;;) {
		if (tallyd_cmd_reap(d, idx, &got)) {
			if (got == cmd)
				return cmd->result;
			continue;
		}
		if (lc->stopped && !rte_ring_count(lc->ack)) {
			/* The lcore left and answered what it found. A command posted after its
			 * last look (exec checked `running` just before it stopped) would wait
			 * forever: tallyd hung at shutdown in lc_wait, its lcore gone, SIGTERM
			 * unanswered. The main thread is the only consumer now: take them back. */
			void *o;

			rte_smp_rmb();
			while (rte_ring_sc_dequeue(lc->cmd, &o) == 0)
				((struct tallyd_cmd *)o)->result = -ESHUTDOWN;
			return -ESHUTDOWN;
		}
		rte_delay_us_sleep(10);
	}
}

int tallyd_cmd_exec(struct tallyd *d, unsigned idx, struct tallyd_cmd *cmd)
{
	int rc;

	if (idx >= d->ncores)
		return -ENODEV;
	if (!d->lcore[idx]->running)
		return -ESHUTDOWN;
	while ((rc = tallyd_cmd_post(d, idx, cmd)) == -ENOBUFS)
		rte_delay_us_sleep(10);
	return lc_wait(d, idx, cmd);
}

int tallyd_cmd_exec_all(struct tallyd *d, struct tallyd_cmd *cmds)
{
	unsigned char posted[TALLYD_MAX_CORES] = { 0 };
	int first = 0;

	for (unsigned i = 0; i < d->ncores; i++) {
		if (!d->lcore[i]->running) {
			cmds[i].result = -ESHUTDOWN;
			continue;
		}
		while (tallyd_cmd_post(d, i, &cmds[i]) == -ENOBUFS)
			rte_delay_us_sleep(10);
		posted[i] = 1;
	}
	for (unsigned i = 0; i < d->ncores; i++) {
		int rc = posted[i] ? lc_wait(d, i, &cmds[i]) : cmds[i].result;

		if (rc && !first)
			first = rc;
	}
	return first;
}

double tallyd_uptime(const struct tallyd *d)
{
	return (double)(rte_rdtsc() - d->start_tsc) / (double)rte_get_tsc_hz();
}
