/* SPDX-License-Identifier: Apache-2.0
 * client_cwnd.c — the window of data pushes in flight per appliance core, delay-based
 * (Swift / LEDBAT style). What bounds a round under loss is the repair of its last losses,
 * and a repair (gap re-send, MISSING re-send, probe) waits behind every push queued before
 * it: in the kernels, a relay, the appliance's socket. A fixed window sized for fast links
 * keeps that queue deep on a slow or loaded path (srtt 5-40 ms against a min_rtt of
 * 0.05-7 ms measured with 128 chunks on the 2-CPU box); one sized for that path wastes fast
 * links. So the window follows the queueing delay our own pushes see:
 *
 *   q = the standing RTT - min_rtt, the standing RTT being the smallest sample since the
 *       last decision (Copa's): a queue we built shows in every sample of a round trip, a
 *       process descheduled for a few ms (a loaded host) only in some, and cutting the
 *       window for those costs throughput and shortens no queue (samples: push -> first
 *       answer in client_ack.c, never a wait for other workers);
 *   target = max(min_rtt, CLIENT_QTARGET_FLOOR_NS): queueing may at most double the bare
 *       round trip, and below the floor it is scheduling noise;
 *   once per smoothed RTT (a change shows in the samples a round trip later), and only if
 *   the window or the cap held a push back meanwhile (RFC 7661: a sender that had sent
 *   all it had says nothing about its window; a burst that fit in the window queues no
 *   less behind a smaller one, and cutting for it only throttled the next burst):
 *   q > target: w *= 1 - 0.8 (q - target) / q, at most halved, at least CLIENT_CWND_MIN;
 *   q <= target: w += 1, 2, 4 or 8 (doubling after every 4 increases in a row: a path that
 *       got faster is found in a few RTTs), at most cfg.window.
 *
 * The window bounds the data pushes not yet answered (client_core.unanswered): a push
 * held at the appliance for other workers is out of the queues, and counting it would let
 * workers whose windows hold different chunks wait on each other for ever. cfg.window
 * still bounds all of them, held ones included (the appliance sizes its staging by it), and
 * is where the window starts (today's behaviour until the first samples, so a fast path
 * keeps its full window) and its cap.
 * Calls nothing else in the library.
 */
#include "client_int.h"

#ifndef CLIENT_QTARGET_FLOOR_NS
#define CLIENT_QTARGET_FLOOR_NS 1000000ull
#endif
#define CLIENT_CWND_MIN 4u

uint64_t client_cwnd_target(const struct client_core *cc)
{
	return cc->min_rtt > CLIENT_QTARGET_FLOOR_NS ? cc->min_rtt : CLIENT_QTARGET_FLOOR_NS;
}

void client_cwnd_init(struct tally_client *c)
{
	for (uint32_t i = 0; i < c->ncores; i++) {
		c->cores[i].cwnd = c->cfg.window;
		c->cores[i].cw_streak = 0;
		c->cores[i].cw_change_ns = 0;
		c->cores[i].cw_rmin = 0;
		c->cores[i].cw_limited = false;
	}
	c->st.window_now = (uint64_t)c->ncores * c->cfg.window;
}

static void cwnd_set(struct tally_client *c, struct client_core *cc, uint32_t w)
{
	c->st.window_now = c->st.window_now - cc->cwnd + w;
	cc->cwnd = w;
}

/* Swift's multiplicative decrease: in proportion to how far over the target, at most half. */
static uint32_t cwnd_cut(const struct tally_client *c, const struct client_core *cc,
			 uint64_t q, uint64_t target)
{
	uint32_t min = c->cfg.window < CLIENT_CWND_MIN ? c->cfg.window : CLIENT_CWND_MIN;
	uint64_t w = (uint64_t)cc->cwnd * (5 * q - 4 * (q - target)) / (5 * q);

	if (w < cc->cwnd / 2)
		w = cc->cwnd / 2;
	return w < min ? min : (uint32_t)w;
}

void client_cwnd_sample(struct tally_client *c, struct client_core *cc, uint64_t rtt,
			uint64_t now)
{
	uint64_t q, target = client_cwnd_target(cc);

	if (!cc->cw_rmin) { /* the first sample of an interval (after a decision, or idle) */
		cc->cw_rmin = rtt ? rtt : 1;
		cc->cw_change_ns = now;
		return;
	}
	if (rtt < cc->cw_rmin)
		cc->cw_rmin = rtt ? rtt : 1;
	/* decide once the samples span a smoothed RTT */
	if (!cc->have_rtt || now - cc->cw_change_ns < cc->srtt)
		return;
	q = cc->cw_rmin > cc->min_rtt ? cc->cw_rmin - cc->min_rtt : 0;
	cc->cw_rmin = 0;
	if (!cc->cw_limited)
		return; /* nothing was held back: no evidence either way */
	cc->cw_limited = false;
	c->st.qdelay_us = q / 1000;
	c->st.qtarget_us = target / 1000;
	if (q > target) {
		uint32_t w = cwnd_cut(c, cc, q, target);

		cc->cw_streak = 0;
		if (w >= cc->cwnd)
			return; /* at the minimum already */
		cwnd_set(c, cc, w);
		c->st.window_decreases++;
		if (!c->st.window_min || w < c->st.window_min)
			c->st.window_min = w;
	} else {
		uint32_t step = 1u << (cc->cw_streak / 4 < 3 ? cc->cw_streak / 4 : 3);

		if (cc->cwnd >= c->cfg.window)
			return;
		cc->cw_streak++;
		cwnd_set(c, cc, cc->cwnd + step < c->cfg.window ? cc->cwnd + step : c->cfg.window);
		c->st.window_increases++;
	}
}
