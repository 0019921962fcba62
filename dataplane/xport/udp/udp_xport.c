/* SPDX-License-Identifier: Apache-2.0
 * udp_xport.c — kernel UDP transport setup: configuration, address resolution, one socket
 * per appliance core (GSO/GRO probing), create/destroy, stats. The packet path is in
 * udp_io.c. See tally_udp.h.
 */
#include "udp_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tally_proto.h"

void tally_udp_cfg_defaults(struct tally_udp_cfg *cfg)
{
	if (!cfg->base_port)
		cfg->base_port = TALLY_DEFAULT_PORT;
	if (!cfg->listen && !cfg->ncores)
		cfg->ncores = TALLY_UDP_MAX_CORES;
	if (!cfg->sock_buf)
		cfg->sock_buf = 32 << 20;
	if (!cfg->batch)
		cfg->batch = 64;
}

static int udp_resolve(const char *host, struct sockaddr_in *sa, char *why, size_t wlen)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_DGRAM };
	struct addrinfo *res = NULL;
	int rc;

	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	if (!host || !*host) {
		sa->sin_addr.s_addr = htonl(INADDR_ANY);
		return 0;
	}
	if (inet_pton(AF_INET, host, &sa->sin_addr) == 1)
		return 0;
	rc = getaddrinfo(host, NULL, &hints, &res);
	if (rc || !res) {
		snprintf(why, wlen, "%s", gai_strerror(rc));
		return -EHOSTUNREACH;
	}
	sa->sin_addr = ((struct sockaddr_in *)res->ai_addr)->sin_addr;
	freeaddrinfo(res);
	return 0;
}

/* The busy-poll budget: cfg (a program applies TALLY_UDP_BUSY_POLL_US there, at its edge:
 * tally_udp_busy_setting) over the mode's default. 0 or -EINVAL with the reason in errbuf. */
static int udp_busy_cfg(struct tally_udp *u, char *errbuf, size_t errlen)
{
	long us = u->cfg.busy_poll_us;

	if (us > TALLY_UDP_BUSY_POLL_MAX_US) {
		snprintf(errbuf, errlen, "udp: busy poll %ld us out of range (max %d)", us,
			 TALLY_UDP_BUSY_POLL_MAX_US);
		return -EINVAL;
	}
	if (!us) /* both modes: the spin yields to whoever needs the CPU (udp_spin) */
		us = TALLY_UDP_BUSY_POLL_DEFAULT_US;
	u->busy_ns = us > 0 ? (uint64_t)us * 1000 : 0;
	return 0;
}

int tally_udp_busy_setting(const char *value, int *busy_poll_us, char *errbuf, size_t errlen)
{
	char *end;
	long us;

	errno = 0;
	us = strtol(value, &end, 10);
	if (errno || *end || !*value || us < 0 || us > TALLY_UDP_BUSY_POLL_MAX_US) {
		snprintf(errbuf, errlen, "udp: TALLY_UDP_BUSY_POLL_US='%s': want 0..%d "
			 "microseconds (0 = off)", value, TALLY_UDP_BUSY_POLL_MAX_US);
		return -EINVAL;
	}
	*busy_poll_us = us ? (int)us : -1;
	return 0;
}

/* Open the socket of one appliance core (client: connected to base + core; listen: bound). */
/* An engine over a listening transport sends RESULTs with send_buf: their payloads are
 * gathered from its buffers, not copied into the queue (udp_send_buf). */
static const struct tally_xport_ops udp_ops = {
	.send = udp_send,
	.now_ns = udp_now_ns,
	.poll = udp_poll,
	.buf_size = sizeof(struct udp_xbuf),
	/* no buf_init: the engine's zeroed state (no packet references the buffer) is ready */
	.send_buf = udp_send_buf,
	.buf_busy = udp_buf_busy,
	.peer_error = udp_peer_error,
	.rx_loss = udp_rx_loss,
};

const struct tally_xport_ops *tally_udp_ops(void)
{
	return &udp_ops;
}

struct tally_udp *tally_udp_create(const struct tally_udp_cfg *cfg, tally_udp_rx_fn rx,
				   void *rx_arg, int *err, char *errbuf, size_t errlen)
{
	struct tally_udp *u = calloc(1, sizeof(*u));
	char why[128] = "";
	int rc = -ENOMEM;

	if (!u) {
		snprintf(errbuf, errlen, "udp: out of memory");
		goto fail;
	}
	u->cfg = *cfg;
	tally_udp_cfg_defaults(&u->cfg);
	u->rx = rx;
	u->rx_arg = rx_arg;
	rc = -EINVAL;
	if (u->cfg.batch > 1024 || !u->cfg.ncores || u->cfg.ncores > TALLY_UDP_MAX_CORES ||
	    (u->cfg.listen && u->cfg.base_port + u->cfg.ncores - 1 > 65535) ||
	    (!u->cfg.listen && (!u->cfg.host || !*u->cfg.host))) {
		snprintf(errbuf, errlen, "udp: bad configuration (batch %u, ncores %u, host %s)",
			 u->cfg.batch, u->cfg.ncores, u->cfg.host ? u->cfg.host : "(none)");
		goto fail;
	}
	rc = udp_busy_cfg(u, errbuf, errlen);
	if (rc)
		goto fail;
	if (u->cfg.listen)
		rc = udp_resolve(u->cfg.host, &u->local, why, sizeof(why));
	else
		rc = udp_resolve(u->cfg.host, &u->peer, why, sizeof(why));
	if (rc) {
		snprintf(errbuf, errlen, "udp: cannot resolve '%s': %s", u->cfg.host, why);
		goto fail;
	}
	if (!u->cfg.listen && u->cfg.bind_host && *u->cfg.bind_host) {
		rc = udp_resolve(u->cfg.bind_host, &u->local, why, sizeof(why));
		if (rc) {
			snprintf(errbuf, errlen, "udp: cannot resolve '%s': %s", u->cfg.bind_host, why);
			goto fail;
		}
		u->has_local = 1;
	}
	rc = -ENOMEM;
	u->rbuf_len = u->cfg.gro ? UDP_GRO_BUF : UDP_SLOT + 64;
	u->rmsg = calloc(64, sizeof(*u->rmsg));
	u->riov = calloc(64, sizeof(*u->riov));
	u->rbuf = malloc(64 * u->rbuf_len);
	u->rctl = calloc(64, UDP_CTL_LEN);
	u->smsg = calloc(u->cfg.batch, sizeof(*u->smsg));
	/* a packet whose payload is referenced takes two iovecs (udp_pkt_iov) */
	u->siov = calloc(2 * (size_t)u->cfg.batch, sizeof(*u->siov));
	u->sctl = calloc(u->cfg.batch, UDP_CTL_LEN);
	if (u->cfg.listen && u->cfg.gso) { /* the destination-grouped flush (udp_io.c) */
		u->sscratch = malloc((size_t)u->cfg.batch * UDP_SLOT);
		u->slens = calloc(u->cfg.batch, sizeof(*u->slens));
		u->sdst = calloc(u->cfg.batch, sizeof(*u->sdst));
		u->sref = calloc(u->cfg.batch, sizeof(*u->sref));
	}
	if (!u->rmsg || !u->riov || !u->rbuf || !u->rctl || !u->smsg || !u->siov || !u->sctl ||
	    (u->cfg.listen && u->cfg.gso && (!u->sscratch || !u->slens || !u->sdst ||
						   !u->sref))) {
		snprintf(errbuf, errlen, "udp: out of memory");
		goto fail;
	}
	if (u->cfg.listen)
		for (uint16_t c = 0; c < u->cfg.ncores; c++) {
			rc = udp_open(u, c);
			if (rc) {
				snprintf(errbuf, errlen, "%s", u->err);
				goto fail;
			}
		}
	else {
		/* Open core 0 now so a bad address fails here, not at the first send. */
		rc = udp_open(u, 0);
		if (rc) {
			snprintf(errbuf, errlen, "%s", u->err);
			goto fail;
		}
	}
	return u;
fail:
	if (err)
		*err = rc;
	tally_udp_destroy(u);
	return NULL;
}

void tally_udp_set_rx(struct tally_udp *u, tally_udp_rx_fn rx, void *rx_arg)
{
	u->rx = rx;
	u->rx_arg = rx_arg;
}

int tally_udp_set_gso(struct tally_udp *u, int on)
{
	if (on && u->gso_refused)
		return -EOPNOTSUPP;
	if (on && u->cfg.listen && !u->sscratch) /* no destination-grouping scratch */
		return -EINVAL;
	u->cfg.gso = on != 0; /* UDP_SEGMENT rides each send's cmsg: nothing else to change */
	return 0;
}

int tally_udp_gso(const struct tally_udp *u)
{
	return u->cfg.gso != 0;
}

void tally_udp_destroy(struct tally_udp *u)
{
	if (!u)
		return;
	for (unsigned i = 0; i < TALLY_UDP_MAX_CORES; i++) {
		struct udp_sock *s = &u->socks[i];

		if (s->slots) {
			udp_drop_refs(u, s);
			udp_flush_sock(u, s);
			close(s->fd);
		}
		free(s->slots);
		free(s->lens);
		free(s->dst);
		free(s->ref);
	}
	free(u->rmsg);
	free(u->riov);
	free(u->rbuf);
	free(u->rctl);
	free(u->smsg);
	free(u->siov);
	free(u->sctl);
	free(u->sscratch);
	free(u->slens);
	free(u->sdst);
	free(u->sref);
	free(u);
}

const struct tally_udp_stats *tally_udp_stats(const struct tally_udp *u)
{
	return &u->st;
}

const char *tally_udp_strerror(const struct tally_udp *u)
{
	return u->err;
}
