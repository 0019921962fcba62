/* SPDX-License-Identifier: Apache-2.0
 * actl_verbs.c — the RDMA verbs listener settings both appliances take (rdma-listen,
 * rdma-slots, rdma-gid-index, rdma-max-conns, rdma-auth), with the same names, ranges and error texts
 * on the command line and in the config file. Parsed here once (their rows in the option
 * table, appliance/opt, say so); no verbs library needed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tally_actl.h"

void tally_actl_verbs_init(struct tally_actl_verbs *v)
{
	memset(v, 0, sizeof(*v));
	v->gid_index = -1;
}

int tally_actl_verbs_set(struct tally_actl_verbs *c, const char *n, const char *v, char *err,
			 size_t el)
{
	char *end = NULL;
	long x;

	if (!strcmp(n, "rdma-listen")) {
		if (!v || strlen(v) >= sizeof(c->listen) || !strchr(v, '.')) {
			snprintf(err, el, "'rdma-listen %s': want ADDR:PORT (the IPv4 address of the "
				 "RDMA interface, e.g. 192.0.2.1:9170)", v ? v : "");
			return -EINVAL;
		}
		snprintf(c->listen, sizeof(c->listen), "%s", v);
		return 0;
	}
	if (!strcmp(n, "rdma-auth")) {
		if (!v || (strcmp(v, "setup") && strcmp(v, "packet"))) {
			snprintf(err, el, "'rdma-auth %s': want setup (authenticate each verbs "
				 "connection at connect) or packet (a MAC on every packet)", v ? v : "");
			return -EINVAL;
		}
		c->auth_packet = !strcmp(v, "packet");
		return 0;
	}
	if (strcmp(n, "rdma-slots") && strcmp(n, "rdma-gid-index") && strcmp(n, "rdma-max-conns"))
		return 1;
	x = v ? strtol(v, &end, 10) : 0;
	if (!v || !*v || *end)
		x = -1000;
	if (!strcmp(n, "rdma-slots") && x >= 4 && x <= TALLY_ACTL_RDMA_SLOTS_MAX && !(x & (x - 1)))
		c->slots = (uint32_t)x;
	else if (!strcmp(n, "rdma-gid-index") && x >= -1 && x <= 255)
		c->gid_index = (int)x;
	else if (!strcmp(n, "rdma-max-conns") && x >= 1 && x <= TALLY_ACTL_RDMA_CONNS_MAX)
		c->max_conns = (uint32_t)x;
	else {
		snprintf(err, el, "'%s %s': want %s", n, v ? v : "",
			 n[5] == 's' ? "a power of two in 4..4096 (landing slots per connection)" :
			 n[5] == 'g' ? "-1 (rdma_cm chooses) or a GID index 0..255" :
				       "1..1024 connections");
		return -EINVAL;
	}
	return 0;
}

json_t *tally_actl_verbs_json(const struct tally_actl_verbs *v)
{
	return json_pack("{s:s, s:i, s:i, s:i, s:s}", "listen", v->listen, "slots",
			 (int)(v->slots ? v->slots : 128), "gid_index", v->gid_index, "max_conns",
			 (int)(v->max_conns ? v->max_conns : 256), "auth",
			 v->auth_packet ? "packet" : "setup");
}
