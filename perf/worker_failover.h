/* SPDX-License-Identifier: Apache-2.0
 * worker_failover.h — tally-worker's session and where it goes when its appliance is lost
 * (--failover HOST:PORT[,...]): the same job joins the next appliance of the list that
 * answers, its keys are registered there and the round that failed is pushed again. Every
 * rank of the job is given the same list (tally-perf allreduce does it), so every rank moves
 * the job to the same appliance; with open admission there its first JOIN creates it.
 */
#ifndef WORKER_FAILOVER_H
#define WORKER_FAILOVER_H

#include <stddef.h>
#include <stdint.h>

#include "tally_client.h"
#include "worker_xport.h"

#define WK_FO_MAX 8

struct wk_sess {
	struct worker_xport wx;
	struct tally_client *c;
	struct wx_opts x;             /* the transport's options (host/port: the current one) */
	struct tally_client_cfg cc;   /* the session's (fail_fast with a failover list) */
	unsigned nfo, next, moves;    /* failover list, the next to try, moves made */
	char fo_host[WK_FO_MAX][64];
	uint16_t fo_port[WK_FO_MAX];
};

/* "HOST:PORT[,HOST:PORT...]" (at most WK_FO_MAX) into s; 0 or -EINVAL. */
int wk_fo_parse(const char *list, struct wk_sess *s);
/* The session's appliance is down: a fresh transport and session with the next appliance
 * of the list that answers JOIN within join_ms. 0, or a negative errno with a message
 * (the list is used up, or the transport cannot open). */
int wk_fo_move(struct wk_sess *s, uint32_t join_ms, char *err, size_t errlen);

#endif
