/* SPDX-License-Identifier: Apache-2.0
 * agent_net_verbs.h — the agent network's transport choice (agent_net_verbs.c): RDMA verbs
 * when TALLY_TRANSPORT=verbs (builds with libibverbs/librdmacm), else the kernel UDP one.
 */
#ifndef AGENT_NET_VERBS_H
#define AGENT_NET_VERBS_H

#include <stddef.h>
#include <stdint.h>

#include "tally_client.h"
#include "tally_xport.h"

/* 1: TALLY_TRANSPORT asks for verbs; 0: UDP (unset, "udp"); -EINVAL (message in err): junk,
 * or verbs in a build without it. */
int agent_net_verbs_wanted(char *err, size_t errlen);
/* Connect to the appliance host:port over verbs; 0 with *x and *ops set, or -errno with
 * the transport's message. The transport's rings are registered here once and reused for
 * every push of every iteration (the agent's staging copies into them). With key (the
 * job's, NULL: none) each connection is authenticated at setup as (job, rank) unless
 * TALLY_VERBS_AUTH=packet; *setup_authed then says the session must not sign packets. */
int agent_net_verbs_open(const char *host, uint16_t port, const uint8_t *key, uint32_t job,
			 uint32_t rank, void **x, const struct tally_xport_ops **ops,
			 int *setup_authed, char *err, size_t errlen);
void agent_net_verbs_attach(void *x, struct tally_client *c);
void agent_net_verbs_close(void *x);

#endif
