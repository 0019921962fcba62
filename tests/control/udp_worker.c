/* SPDX-License-Identifier: Apache-2.0
 * udp_worker.c — a minimal worker for the control integration test: raw Tally packets
 * (tally_proto encode/decode) over a kernel UDP socket. One socket per rank.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "udp_worker.h"

int uw_open(struct uw *w, const char *local_ip, const char *server_ip, uint16_t port,
	    uint32_t job, uint64_t token, uint32_t rank)
{
	struct sockaddr_in la = { .sin_family = AF_INET };

	memset(w, 0, sizeof(*w));
	w->job = job;
	w->token = token;
	w->rank = rank;
	w->srv.sin_family = AF_INET;
	w->srv.sin_port = htons(port);
	inet_pton(AF_INET, server_ip, &w->srv.sin_addr);
	inet_pton(AF_INET, local_ip, &la.sin_addr);
	w->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (w->fd < 0)
		return -errno;
	if (bind(w->fd, (struct sockaddr *)&la, sizeof(la))) {
		int e = -errno;
		close(w->fd);
		return e;
	}
	return 0;
}

void uw_close(struct uw *w)
{
	if (w->fd > 0)
		close(w->fd);
	w->fd = -1;
}

static int uw_send(struct uw *w, struct tally_hdr *h, const void *payload, size_t len)
{
	uint8_t buf[TALLY_HDR_LEN + TALLY_MAX_PAYLOAD];

	h->job_id = w->job;
	h->token = w->token;
	h->rank = w->rank;
	tally_proto_finish(buf, h, payload, len);
	if (len)
		memcpy(buf + TALLY_HDR_LEN, payload, len);
	return sendto(w->fd, buf, TALLY_HDR_LEN + len, 0, (struct sockaddr *)&w->srv,
		      sizeof(w->srv)) < 0 ? -errno : 0;
}

int uw_recv(struct uw *w, int timeout_ms, struct tally_pkt *pkt)
{
	struct pollfd p = { .fd = w->fd, .events = POLLIN };

	if (poll(&p, 1, timeout_ms) <= 0)
		return -ETIMEDOUT;
	ssize_t n = recv(w->fd, w->rxbuf, sizeof(w->rxbuf), 0);
	if (n < 0)
		return -errno;
	return tally_proto_decode(w->rxbuf, (size_t)n, pkt) == TALLY_OK ? 0 : -EPROTO;
}

/* Sends until an answer with op `want` arrives (UDP: the first packet may go while the
 * kernel still resolves the appliance's MAC). */
static int uw_ask(struct uw *w, struct tally_hdr *h, const void *pl, size_t len, uint8_t want,
		  struct tally_pkt *pkt)
{
	for (int tries = 0; tries < 20; tries++) {
		struct tally_hdr copy = *h;
		int rc = uw_send(w, &copy, pl, len);
		if (rc)
			return rc;
		while (uw_recv(w, 250, pkt) == 0) {
			if (pkt->hdr.op == want)
				return 0;
			if (pkt->hdr.op == TALLY_OP_ERROR)
				return -(int)pkt->hdr.reason - 1000;
		}
	}
	return -ETIMEDOUT;
}

int uw_join(struct uw *w, uint32_t world)
{
	struct tally_join j = { .world_size = world, .max_chunk_bytes = 8192 };
	uint8_t pl[TALLY_JOIN_LEN];
	struct tally_hdr h = { .op = TALLY_OP_JOIN };
	struct tally_pkt pkt;

	tally_proto_put_join(pl, &j);
	return uw_ask(w, &h, pl, sizeof(pl), TALLY_OP_JOIN_OK, &pkt);
}

int uw_register(struct uw *w, uint32_t key, const struct tally_register *r)
{
	uint8_t pl[TALLY_REGISTER_LEN];
	struct tally_hdr h = { .op = TALLY_OP_REGISTER, .key = key };
	struct tally_pkt pkt;

	tally_proto_put_register(pl, r);
	return uw_ask(w, &h, pl, sizeof(pl), TALLY_OP_REGISTER, &pkt);
}

int uw_push(struct uw *w, uint32_t key, uint32_t round, uint32_t offset, const float *v,
	    uint32_t count)
{
	struct tally_hdr h = { .op = TALLY_OP_PUSH, .key = key, .round = round, .offset = offset,
			       .count = count, .dtype = 0 /* f32 */ };
	return uw_send(w, &h, v, count * sizeof(float));
}

int uw_result(struct uw *w, int timeout_ms, struct tally_pkt *pkt)
{
	for (;;) {
		int rc = uw_recv(w, timeout_ms, pkt);
		if (rc)
			return rc;
		if (pkt->hdr.op == TALLY_OP_RESULT)
			return 0;
	}
}
