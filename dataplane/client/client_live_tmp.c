/* SPDX-License-Identifier: Apache-2.0
 * client_live_tmp.c — TEMPORARY (branch h-failover): the smallest stand-in for the
 * appliance liveness that branch h-restart adds to the client (probe_ms, dead_ms,
 * fail_fast, tally_client_state). It only exists so the agent's failover can be tested
 * before that lands; the merge keeps h-restart's version and drops this file.
 * Liveness here: while operations are outstanding, any received packet is a sign of life;
 * after probe_ms of silence each core gets a PULL for one chunk in flight every probe_ms (a
 * live appliance answers: HELD, MISSING or the RESULT); silence for dead_ms makes the
 * appliance DOWN and, with fail_fast, fails every outstanding operation with -EHOSTDOWN. */
#include "client_int.h"

/* One PULL per core for a chunk in flight: any answer shows the appliance is alive. */
static void live_probe(struct tally_client *c, uint64_t now)
{
	c->live_probe_ns = now;
	for (uint32_t core = 0; core < c->ncores; core++) {
		struct client_core *cc = &c->cores[core];

		for (uint32_t s = 0; s < 2 * c->cfg.window; s++) {
			struct client_slot *sl = &cc->slots[s];

			if (sl->op < c->cfg.max_ops) {
				client_probe(c, core, sl, now);
				break;
			}
		}
	}
}

int client_live_tick(struct tally_client *c, uint64_t now)
{
	uint64_t probe = (uint64_t)(c->cfg.probe_ms ? c->cfg.probe_ms : 200) * 1000000u;
	uint64_t dead = (uint64_t)(c->cfg.dead_ms ? c->cfg.dead_ms : 1000) * 1000000u;

	if (c->live_rx != c->st.rx_pkts) { /* a sign of life */
		c->live_rx = c->st.rx_pkts;
		c->live_ns = now;
		c->live_state = TALLY_CLIENT_UP;
		c->live_active = c->nactive;
		return 0;
	}
	if (!c->nactive || !c->live_active) { /* idle, or work starting: the clock restarts */
		c->live_active = c->nactive;
		c->live_ns = now;
		return 0;
	}
	if (now - c->live_ns < probe)
		return 0;
	if (now - c->live_ns < dead) {
		c->live_state = TALLY_CLIENT_SILENT;
		if (c->cfg.fail_fast && now - c->live_probe_ns >= probe)
			live_probe(c, now); /* only where silence fails operations */
		return 0;
	}
	c->live_state = TALLY_CLIENT_DOWN;
	if (!c->cfg.fail_fast)
		return 0;
	client_seterr(c, "appliance %s silent for %u ms with work outstanding: down",
		      c->cfg.appliance[0] ? c->cfg.appliance : "appliance",
		      (unsigned)((now - c->live_ns) / 1000000u));
	c->live_active = 0;
	return 1; /* the caller fails every outstanding operation with -EHOSTDOWN */
}

int tally_client_state(const struct tally_client *c)
{
	return c->live_state;
}
