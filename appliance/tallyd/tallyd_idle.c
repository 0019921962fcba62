/* SPDX-License-Identifier: Apache-2.0
 * tallyd_idle.c — how a datapath lcore waits when nothing arrives (the deliberate idle wait,
 * the one place the lcore makes syscalls). After idle-polls empty polls (the last 90% with
 * rte_pause) it either
 *   interrupt: arms the queue's RX interrupt, polls once more (a frame that arrived before
 *              the arming raises no event), then blocks in rte_epoll_wait, as DPDK's
 *              l3fwd-power does; the wait is bounded (LC_INTR_WAIT_MS) so engine timers,
 *              control commands and shutdown still run;
 *   sleep:     sleeps 1, 2, 4 ... µs up to idle-max-us (at most 1 ms, 20 µs by default;
 *              the timer slack is lowered so the kernel does not stretch them);
 *   poll:      keeps spinning with rte_pause.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_interrupts.h>
#include <rte_log.h>
#include <rte_pause.h>

#include "tallyd.h"

#define LC_INTR_WAIT_MS 1
#define LC_TIMER_SLACK_NS 1000

/* Can this lcore block on its queue's interrupt? Only when that queue is all that feeds it:
 * frames handed over by other cores (software dispatch, TX relay) raise no interrupt. */
static const char *idle_intr_refused(const struct tallyd_lcore *lc)
{
	const struct tallyd *d = lc->d;

	if (lc->port_idx == TALLYD_NO_PORT)
		return "no port (verbs only)";
	if (lc->verbs)
		return "it polls verbs completions too (they raise no RX interrupt)";
	if (!d->port[lc->port_idx].rx_intr)
		return "the port has no RX interrupts";
	if (lc->npoll > 1)
		return "it polls several ports";
	if (lc->poll[0].txin)
		return "other cores relay TX through it";
	for (uint16_t i = 0; i < d->nports; i++)
		if (lc->dispatch && !d->port[i].steered)
			return "frames are dispatched to it in software";
	return NULL;
}

void tallyd_idle_start(struct tallyd_lcore *lc)
{
	struct tallyd_idle *s = &lc->idle;
	const char *why = NULL;
	int rc;

	memset(s, 0, sizeof(*s));
	s->sleep_us = 1;
	s->mode = lc->d->conf.idle_mode;
	/* nanosleep(20 µs) with the default 50 µs slack sleeps ~70 µs */
	prctl(PR_SET_TIMERSLACK, LC_TIMER_SLACK_NS, 0, 0, 0);
	if (s->mode == TALLYD_IDLE_INTERRUPT && !(why = idle_intr_refused(lc))) {
		rc = rte_eth_dev_rx_intr_ctl_q(lc->d->port[lc->port_idx].port_id, lc->rxq,
					       RTE_EPOLL_PER_THREAD,
					       RTE_INTR_EVENT_ADD, NULL);
		if (rc)
			why = "its queue's event fd cannot join the lcore's epoll";
	}
	if (why) {
		s->mode = TALLYD_IDLE_SLEEP;
		snprintf(s->why, sizeof(s->why), "%s", why);
	}
	rte_log(RTE_LOG_INFO, RTE_LOGTYPE_USER1,
		"tallyd: core %u (lcore %u, port %d queue %u): idle = %s%s%s%s\n", lc->idx,
		lc->lcore_id, lc->port_idx == TALLYD_NO_PORT ? -1 : (int)lc->port_idx, lc->rxq,
		tallyd_idle_name(s->mode),
		why ? " (interrupt: " : "", why ? why : "", why ? ")" : "");
}

static void idle_intr_wait(struct tallyd_lcore *lc)
{
	struct tallyd_idle *s = &lc->idle;
	const struct tallyd_port *port = &lc->d->port[lc->port_idx];
	struct rte_epoll_event ev;

	if (!s->armed) {
		/* arm, then let the loop poll once more before blocking */
		int rc = rte_eth_dev_rx_intr_enable(port->port_id, lc->rxq);

		/* -ENOTSUP: always armed (net_tap: the queue's fd is the event) */
		s->armed = rc == 0 || rc == -ENOTSUP;
		if (!s->armed)
			rte_pause();
		return;
	}
	tally_dpdk_tx_flush(&lc->tx, 1); /* nothing buffered may wait through the wait */
	s->waits++;
	lc->st.io.idle_sleeps++;
	if (rte_epoll_wait(RTE_EPOLL_PER_THREAD, &ev, 1, LC_INTR_WAIT_MS) > 0)
		s->wakeups++;
	rte_eth_dev_rx_intr_disable(port->port_id, lc->rxq);
	s->armed = 0;
}

void tallyd_idle_empty(struct tallyd_lcore *lc)
{
	struct tallyd_idle *s = &lc->idle;
	uint32_t polls = lc->d->conf.idle_polls, max_us = lc->d->conf.idle_max_us;

	if (++s->empty < polls / 10)
		return;
	if (s->empty < polls || s->mode == TALLYD_IDLE_POLL) {
		if (s->empty > polls)
			s->empty = polls; /* no wrap after 4 G polls */
		rte_pause();
		return;
	}
	if (s->mode == TALLYD_IDLE_INTERRUPT)
		return idle_intr_wait(lc);
	tally_dpdk_tx_flush(&lc->tx, 1);
	rte_delay_us_sleep(s->sleep_us);
	s->waits++;
	lc->st.io.idle_sleeps++;
	if (s->sleep_us < max_us)
		s->sleep_us = s->sleep_us * 2 < max_us ? s->sleep_us * 2 : max_us;
}

void tallyd_idle_stop(struct tallyd_lcore *lc)
{
	if (lc->port_idx == TALLYD_NO_PORT)
		return;
	const struct tallyd_port *port = &lc->d->port[lc->port_idx];

	if (lc->idle.armed)
		rte_eth_dev_rx_intr_disable(port->port_id, lc->rxq);
	lc->idle.armed = 0;
	if (lc->idle.mode == TALLYD_IDLE_INTERRUPT)
		rte_eth_dev_rx_intr_ctl_q(port->port_id, lc->rxq, RTE_EPOLL_PER_THREAD,
					  RTE_INTR_EVENT_DEL, NULL);
}
