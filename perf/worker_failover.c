/* SPDX-License-Identifier: Apache-2.0
 * worker_failover.c — see worker_failover.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker_failover.h"

int wk_fo_parse(const char *list, struct wk_sess *s)
{
	const char *p = list;

	s->nfo = 0;
	while (*p) {
		const char *comma = strchr(p, ','), *colon;
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		char item[80], *end;
		unsigned long port;

		if (s->nfo == WK_FO_MAX || len == 0 || len >= sizeof(item))
			return -EINVAL;
		memcpy(item, p, len);
		item[len] = 0;
		colon = strrchr(item, ':');
		if (!colon || colon == item || (size_t)(colon - item) >= sizeof(s->fo_host[0]))
			return -EINVAL;
		port = strtoul(colon + 1, &end, 10);
		if (*end || !port || port > 65535)
			return -EINVAL;
		memcpy(s->fo_host[s->nfo], item, (size_t)(colon - item));
		s->fo_host[s->nfo][colon - item] = 0;
		s->fo_port[s->nfo++] = (uint16_t)port;
		p += len + (comma ? 1 : 0);
	}
	return s->nfo ? 0 : -EINVAL;
}

int wk_fo_move(struct wk_sess *s, uint32_t join_ms, char *err, size_t errlen)
{
	char was[96];
	int rc = -EHOSTDOWN;

	snprintf(was, sizeof(was), "%s", s->cc.appliance);
	while (s->next < s->nfo) {
		unsigned i = s->next++;

		tally_client_destroy(s->c);
		s->c = NULL;
		wx_close(&s->wx);
		s->x.host = s->fo_host[i];
		s->x.base_port = s->fo_port[i];
		snprintf(s->cc.appliance, sizeof(s->cc.appliance), "%s:%u", s->fo_host[i],
			 s->fo_port[i]);
		rc = wx_open(&s->x, &s->wx, err, errlen);
		if (rc)
			return rc;
		s->c = tally_client_create(&s->cc, s->wx.ops, s->wx.ctx, &rc);
		if (!s->c) {
			snprintf(err, errlen, "client session: %s", strerror(-rc));
			return rc;
		}
		wx_attach(&s->wx, s->c);
		rc = tally_client_join(s->c, join_ms);
		if (rc == 0) {
			s->moves++;
			fprintf(stderr, "tally-worker rank %u: appliance %s down, job %u moved to %s\n",
				s->cc.rank, was, s->cc.job_id, s->cc.appliance);
			return 0;
		}
		fprintf(stderr, "tally-worker rank %u: failover to %s: JOIN %s\n", s->cc.rank,
			s->cc.appliance, strerror(-rc));
	}
	snprintf(err, errlen, "appliance %s down and no appliance of --failover answers (%s)", was,
		 strerror(-rc));
	return rc;
}
