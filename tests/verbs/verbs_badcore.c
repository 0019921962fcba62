/* SPDX-License-Identifier: Apache-2.0
 * verbs_badcore.c — a verbs client asking an appliance for a core it does not have (run in
 * the guest by tallyd_guest.sh against tallyd's per-core listener): the connect request must
 * be refused with the reason, which the client names. usage: verbs_badcore ADDR PORT CORE.
 * Exit 0 when core 0 connected and CORE was refused as "no such appliance core".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tally_verbs.h"

int main(int argc, char **argv)
{
	struct tally_verbs_cfg c = { .gid_index = -1 }; /* rdma_cm chooses */
	struct tally_addr to = { 0 };
	uint8_t hdr[64] = { 0 };
	char err[256];
	int rc = 0, ok;
	struct tally_verbs *v;

	if (argc != 4) {
		fprintf(stderr, "usage: verbs_badcore ADDR PORT CORE\n");
		return 2;
	}
	c.host = argv[1];
	c.port = (uint16_t)atoi(argv[2]);
	to.core = (uint32_t)atoi(argv[3]);
	v = tally_verbs_create(&c, NULL, NULL, &rc, err, sizeof(err));
	if (!v) {
		printf("connect to core 0 failed: %s\n", err);
		return 1;
	}
	/* the first send to a core connects it (the control path of the client) */
	rc = tally_verbs_ops()->send(v, &to, hdr, NULL, 0);
	ok = rc < 0 && strstr(tally_verbs_strerror(v), "no such appliance core");
	printf("send to core %u: %d: %s\n", to.core, rc, tally_verbs_strerror(v));
	tally_verbs_destroy(v);
	return ok ? 0 : 1;
}
