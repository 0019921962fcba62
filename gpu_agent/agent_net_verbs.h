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
 * every push of every iteration (the agent's staging copies into them). */
int agent_net_verbs_open(const char *host, uint16_t port, void **x,
			 const struct tally_xport_ops **ops, char *err, size_t errlen);
void agent_net_verbs_attach(void *x, struct tally_client *c);
void agent_net_verbs_close(void *x);

#endif
