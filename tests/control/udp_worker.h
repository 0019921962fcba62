/* SPDX-License-Identifier: Apache-2.0
 * udp_worker.h — a minimal raw-protocol worker over kernel UDP (control integration test).
 */
#ifndef UDP_WORKER_H
#define UDP_WORKER_H

#include <netinet/in.h>
#include <stdint.h>

#include "tally_proto.h"

struct uw {
	int fd;
	uint32_t job, rank;
	uint64_t token;
	struct sockaddr_in srv;
	uint8_t rxbuf[TALLY_HDR_LEN + TALLY_MAX_PAYLOAD];
};

int uw_open(struct uw *w, const char *local_ip, const char *server_ip, uint16_t port,
	    uint32_t job, uint64_t token, uint32_t rank);
void uw_close(struct uw *w);
/* JOIN / REGISTER, retried until answered. 0, -ETIMEDOUT, or -(1000 + reason) on ERROR. */
int uw_join(struct uw *w, uint32_t world);
int uw_register(struct uw *w, uint32_t key, const struct tally_register *r);
int uw_push(struct uw *w, uint32_t key, uint32_t round, uint32_t offset, const float *v,
	    uint32_t count);
/* Next RESULT (other packets skipped); pkt->payload points into w->rxbuf. */
int uw_result(struct uw *w, int timeout_ms, struct tally_pkt *pkt);
int uw_recv(struct uw *w, int timeout_ms, struct tally_pkt *pkt);

#endif
