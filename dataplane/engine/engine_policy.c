/* SPDX-License-Identifier: Apache-2.0
 * engine_policy.c — job-wide policy (quorum, deadline): stored on the job so keys created
 * later start with it (engine_key_job_policy at creation), and applied at once to the job's
 * keys, overriding any key's own policy, as the operator's job-wide change always did.
 */
#include <errno.h>

#include "engine_int.h"

int tally_engine_job_policy(struct tally_engine *e, uint32_t job_id, int set_quorum,
			    uint16_t quorum, int set_deadline, uint32_t deadline_us)
{
	struct engine_job *job = e ? engine_job_find(e, job_id) : NULL;

	if (!job)
		return -ENOENT;
	if (set_quorum) {
		job->pol_quorum_set = 1;
		job->pol_quorum = quorum;
	}
	if (set_deadline) {
		job->pol_deadline_set = 1;
		job->pol_deadline_us = deadline_us;
	}
	for (uint32_t i = 0; i < e->nkeys; i++) {
		struct engine_key *k = e->keys[i];
		if (!k || k->job != job)
			continue;
		uint16_t q = k->quorum;
		uint32_t dl = k->deadline_us;
		if (job->pol_quorum_set)
			q = job->pol_quorum && job->pol_quorum <= k->reg.participants ?
			    job->pol_quorum : k->reg.participants;
		if (job->pol_deadline_set)
			dl = job->pol_deadline_us;
		/* through the per-key path: a lower quorum completes open chunks reaching it */
		int rc = tally_engine_key_policy(e, job_id, k->key, q, dl);
		if (rc)
			return rc;
		k->own_policy = 0;
	}
	return 0;
}
