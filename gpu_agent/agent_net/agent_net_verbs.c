/* SPDX-License-Identifier: Apache-2.0
 * agent_net_verbs.c — the agent's RDMA verbs transport choice (see agent_net_verbs.h).
 */
#include "agent_net_verbs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TALLY_AGENT_VERBS
#include "tally_verbs.h"
#endif

int agent_net_verbs_wanted(char *err, size_t errlen)
{
	const char *t = getenv("TALLY_TRANSPORT");

	if (!t || !*t || !strcmp(t, "udp"))
		return 0;
	if (strcmp(t, "verbs") && strcmp(t, "rdma")) {
		snprintf(err, errlen, "TALLY_TRANSPORT='%s': want udp or verbs", t);
		return -EINVAL;
	}
#ifdef TALLY_AGENT_VERBS
	return 1;
#else
	snprintf(err, errlen, "TALLY_TRANSPORT=verbs: this libtally_agent was built without verbs "
		 "(libibverbs-dev, librdmacm-dev)");
	return -EINVAL;
#endif
}

#ifdef TALLY_AGENT_VERBS
static void verbs_rx(void *arg, const void *buf, size_t len, const struct tally_addr *from)
{
	(void)from;
	tally_client_rx(arg, buf, len);
}

int agent_net_verbs_open(const char *host, uint16_t port, const uint8_t *key, uint32_t job,
			 uint32_t rank, void **x, const struct tally_xport_ops **ops,
			 int *setup_authed, char *err, size_t errlen)
{
	struct tally_verbs_cfg vc = { .host = host, .port = port, .gid_index = -1,
				      .auth_key = key, .auth_job = job, .auth_rank = rank };
	int rc = 0;

	*x = tally_verbs_create(&vc, NULL, NULL, &rc, err, errlen);
	if (!*x)
		return rc ? rc : -EIO;
	*ops = tally_verbs_ops();
	*setup_authed = tally_verbs_setup_authed(*x);
	return 0;
}

static void verbs_rx_placed(void *arg, const void *hdr, size_t hlen, const void *payload,
			    size_t plen)
{
	tally_client_rx_placed(arg, hdr, hlen, payload, plen);
}

void agent_net_verbs_attach(void *x, struct tally_client *c)
{
	tally_verbs_set_rx(x, verbs_rx, c);
	tally_verbs_set_rx_placed(x, verbs_rx_placed); /* RESULTs into the staging buffers */
}

void agent_net_verbs_close(void *x)
{
	tally_verbs_destroy(x);
}
#else
int agent_net_verbs_open(const char *host, uint16_t port, const uint8_t *key, uint32_t job,
			 uint32_t rank, void **x, const struct tally_xport_ops **ops,
			 int *setup_authed, char *err, size_t errlen)
{
	(void)host, (void)port, (void)key, (void)job, (void)rank, (void)x, (void)ops;
	*setup_authed = 0;
	snprintf(err, errlen, "no verbs transport in this build");
	return -ENOTSUP;
}

void agent_net_verbs_attach(void *x, struct tally_client *c)
{
	(void)x, (void)c;
}

void agent_net_verbs_close(void *x)
{
	(void)x;
}
#endif
