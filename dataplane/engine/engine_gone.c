/* SPDX-License-Identifier: Apache-2.0
 * engine_gone.c — a job's set of gone appliances (TALLY_OP_GONE, tally_proto.h). A worker
 * that found an appliance of its job dead or draining reports it to the survivors; the
 * survivor keeps the union per job and passes it on to every rank of the job when it grows,
 * so ranks that have not noticed yet move the same keys to the same places (the re-plan is
 * a function of the gone set alone: gpu_agent/README.md "Failover"). The engine does not
 * interpret the set: it is the workers' agreement, kept where they all can read it. */
#include <string.h>

#include "engine_int.h"

static void gone_send(struct tally_engine *e, const struct engine_job *job, uint32_t rank,
		      const struct tally_addr *to)
{
	struct tally_hdr h;

	memset(&h, 0, sizeof(h));
	h.op = TALLY_OP_GONE;
	h.job_id = job->id;
	h.token = job->token;
	h.rank = rank;
	h.aux = job->gone;
	engine_send(e, to, &h, NULL, 0);
}

enum tally_reason engine_rx_gone(struct tally_engine *e, const struct tally_pkt *pkt,
				 const struct tally_addr *from)
{
	struct engine_job *job;
	enum tally_reason r = engine_auth(e, &pkt->hdr, from, &job);

	if (r != TALLY_OK)
		return engine_drop(e, r);
	uint32_t grew = pkt->hdr.aux & ~job->gone;
	job->gone |= pkt->hdr.aux;
	if (!grew) { /* known already: acknowledge to the sender */
		gone_send(e, job, pkt->hdr.rank, from);
		return TALLY_OK;
	}
	e->st.gone_reports++;
	for (uint32_t i = 0; i < job->world; i++)
		if (job->ranks[i].bound)
			gone_send(e, job, i, &job->ranks[i].addr);
	return TALLY_OK;
}
