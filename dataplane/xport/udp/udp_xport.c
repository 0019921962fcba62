/* SPDX-License-Identifier: Apache-2.0
 * xport_udp.c — kernel UDP transport: one socket per appliance core, sendmmsg/recvmmsg
 * batching, optional UDP GSO/GRO. See tally_udp.h.
 */
#include "tally_udp.h"

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

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif
#ifndef SOL_UDP
#define SOL_UDP 17
#endif

#define UDP_SLOT (TALLY_HDR_LEN + TALLY_MAX_PAYLOAD)
#define UDP_GRO_BUF 65536u
#define UDP_GSO_MAX_BYTES 65000u
#define UDP_GSO_MAX_SEGS 64u
#define UDP_RX_ROUNDS 4 /* recvmmsg batches per socket per poll, so one socket cannot starve others */

struct udp_sock {
	int fd;
	uint32_t nq;                 /* queued packets */
	uint8_t *slots;              /* batch * UDP_SLOT */
	uint32_t *lens;
	struct sockaddr_in *dst;     /* listen mode: per-slot destination */
};

struct tally_udp {
	struct tally_udp_cfg cfg;
	struct sockaddr_in peer;     /* client: appliance address, port = base */
	struct sockaddr_in local;    /* client: bind address (port 0) */
	int has_local;
	tally_udp_rx_fn rx;
	void *rx_arg;
	uint16_t nsocks;             /* entries in socks[] */
	struct udp_sock socks[TALLY_UDP_MAX_CORES];
	struct pollfd pfd[TALLY_UDP_MAX_CORES];
	uint16_t pfd_core[TALLY_UDP_MAX_CORES];
	uint16_t npfd;
	/* receive and GSO send scratch */
	struct mmsghdr *rmsg;
	struct iovec *riov;
	uint8_t *rbuf;
	size_t rbuf_len;
	char *rctl;
	struct mmsghdr *smsg;
	struct iovec *siov;
	char *sctl;
	struct tally_udp_stats st;
	char err[256];
};

#define UDP_CTL_LEN CMSG_SPACE(sizeof(int))

static void udp_err(struct tally_udp *u, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void udp_err(struct tally_udp *u, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(u->err, sizeof(u->err), fmt, ap);
	va_end(ap);
}

static const char *udp_fmt(const struct sockaddr_in *sa, char *buf, size_t len)
{
	char ip[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &sa->sin_addr, ip, sizeof(ip));
	snprintf(buf, len, "%s:%u", ip, ntohs(sa->sin_port));
	return buf;
}

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

static uint64_t udp_now_ns(void *ctx)
{
	struct timespec ts;

	(void)ctx;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
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

/* Open the socket of one appliance core (client: connected to base + core; listen: bound). */
static int udp_open(struct tally_udp *u, uint16_t core)
{
	struct udp_sock *s = &u->socks[core];
	struct sockaddr_in sa;
	char where[64];
	int fd, one = 1, buf = u->cfg.sock_buf;

	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		udp_err(u, "udp: socket: %s", strerror(errno));
		return -errno;
	}
	/* Large buffers: a window of 8 KiB chunks per core must fit, or the kernel drops. FORCE
	 * works past rmem_max for root; otherwise take what the sysctl allows. */
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof(buf)))
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf)))
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	if (u->cfg.gro && setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof(one)))
		u->cfg.gro = 0; /* kernel without UDP GRO: plain datagrams */
	if (u->cfg.listen) {
		sa = u->local;
		sa.sin_port = htons((uint16_t)(u->cfg.base_port + core));
		/* No SO_REUSEADDR: a second appliance on the same port must fail, not share. */
		if (bind(fd, (struct sockaddr *)&sa, sizeof(sa))) {
			int e = errno;

			udp_err(u, "udp: bind %s: %s", udp_fmt(&sa, where, sizeof(where)),
				strerror(e));
			close(fd);
			return -e;
		}
	} else {
		if (u->has_local && bind(fd, (struct sockaddr *)&u->local, sizeof(u->local))) {
			int e = errno;

			udp_err(u, "udp: bind %s: %s", udp_fmt(&u->local, where, sizeof(where)),
				strerror(e));
			close(fd);
			return -e;
		}
		sa = u->peer;
		sa.sin_port = htons((uint16_t)(u->cfg.base_port + core));
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
			int e = errno;

			udp_err(u, "udp: connect %s: %s", udp_fmt(&sa, where, sizeof(where)),
				strerror(e));
			close(fd);
			return -e;
		}
	}
	s->slots = malloc((size_t)u->cfg.batch * UDP_SLOT);
	s->lens = calloc(u->cfg.batch, sizeof(*s->lens));
	s->dst = u->cfg.listen ? calloc(u->cfg.batch, sizeof(*s->dst)) : NULL;
	if (!s->slots || !s->lens || (u->cfg.listen && !s->dst)) {
		free(s->slots);
		free(s->lens);
		free(s->dst);
		close(fd);
		udp_err(u, "udp: out of memory for core %u's queue", core);
		return -ENOMEM;
	}
	s->fd = fd;
	s->nq = 0;
	u->pfd[u->npfd].fd = fd;
	u->pfd[u->npfd].events = POLLIN;
	u->pfd_core[u->npfd++] = core;
	if (core >= u->nsocks)
		u->nsocks = (uint16_t)(core + 1);
	return 0;
}

/* sendmmsg one socket's queue; GSO groups runs of equal-length packets to one destination
 * (the last of a run may be shorter). Unsent packets stay queued on EAGAIN. */
static int udp_flush_sock(struct tally_udp *u, struct udp_sock *s)
{
	uint32_t i = 0, nm = 0, first[1024], cnt[1024];
	int rc = 0;

	if (!s->nq)
		return 0;
	while (i < s->nq) {
		struct msghdr *mh = &u->smsg[nm].msg_hdr;
		uint32_t len = s->lens[i], n = 1, total = len;

		if (u->cfg.gso)
			while (i + n < s->nq && n < UDP_GSO_MAX_SEGS &&
			       total + s->lens[i + n] <= UDP_GSO_MAX_BYTES &&
			       s->lens[i + n] <= len && s->lens[i + n - 1] == len &&
			       (!s->dst || !memcmp(&s->dst[i + n], &s->dst[i], sizeof(s->dst[i])))) {
				total += s->lens[i + n];
				n++;
			}
		memset(mh, 0, sizeof(*mh));
		for (uint32_t k = 0; k < n; k++) {
			u->siov[i + k].iov_base = s->slots + (size_t)(i + k) * UDP_SLOT;
			u->siov[i + k].iov_len = s->lens[i + k];
		}
		mh->msg_iov = &u->siov[i];
		mh->msg_iovlen = n;
		if (s->dst) {
			mh->msg_name = &s->dst[i];
			mh->msg_namelen = sizeof(s->dst[i]);
		}
		if (n > 1) {
			struct cmsghdr *cm;

			mh->msg_control = u->sctl + (size_t)nm * UDP_CTL_LEN;
			mh->msg_controllen = UDP_CTL_LEN;
			cm = CMSG_FIRSTHDR(mh);
			cm->cmsg_level = SOL_UDP;
			cm->cmsg_type = UDP_SEGMENT;
			cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
			*(uint16_t *)(void *)CMSG_DATA(cm) = (uint16_t)len;
			mh->msg_controllen = CMSG_SPACE(sizeof(uint16_t));
		}
		first[nm] = i;
		cnt[nm++] = n;
		i += n;
	}
	uint32_t done = 0, sent_pkts = 0;
	int gso_refused = 0;

	while (done < nm) {
		int r = sendmmsg(s->fd, &u->smsg[done], nm - done, MSG_DONTWAIT);

		u->st.tx_calls++;
		if (r > 0) {
			for (int k = 0; k < r; k++) {
				uint32_t m = done + (uint32_t)k;

				sent_pkts += cnt[m];
				u->st.tx_pkts += cnt[m];
				for (uint32_t q = 0; q < cnt[m]; q++)
					u->st.tx_bytes += s->lens[first[m] + q];
				if (cnt[m] > 1)
					u->st.tx_gso_sends++;
			}
			done += (uint32_t)r;
			continue;
		}
		if (errno == EAGAIN || errno == ENOBUFS)
			break; /* keep the rest queued for the next flush */
		if (errno == EINTR)
			continue;
		if (cnt[done] > 1 && (errno == EIO || errno == EINVAL || errno == ENOPROTOOPT ||
				      errno == EOPNOTSUPP)) {
			/* The path refuses GSO: switch it off for good and resend unsegmented. */
			u->cfg.gso = 0;
			udp_err(u, "udp: GSO refused (%s), sending datagrams one by one",
				strerror(errno));
			gso_refused = 1;
			break;
		}
		/* ECONNREFUSED (nobody listens yet), EMSGSIZE...: drop this message, go on. */
		if (!rc)
			rc = -errno;
		u->st.tx_errors += cnt[done];
		sent_pkts += cnt[done];
		done++;
	}
	if (sent_pkts < s->nq) {
		uint32_t left = s->nq - sent_pkts;

		memmove(s->slots, s->slots + (size_t)sent_pkts * UDP_SLOT, (size_t)left * UDP_SLOT);
		memmove(s->lens, s->lens + sent_pkts, left * sizeof(*s->lens));
		if (s->dst)
			memmove(s->dst, s->dst + sent_pkts, left * sizeof(*s->dst));
	}
	s->nq -= sent_pkts;
	if (gso_refused)
		return udp_flush_sock(u, s);
	return rc;
}

int tally_udp_flush(struct tally_udp *u)
{
	int rc = 0;

	for (uint16_t i = 0; i < u->npfd; i++) {
		int r = udp_flush_sock(u, &u->socks[u->pfd_core[i]]);

		if (r && !rc)
			rc = r;
	}
	return rc;
}

static int udp_send(void *ctx, const struct tally_addr *to, const uint8_t *hdr,
		    const void *payload, size_t len)
{
	struct tally_udp *u = ctx;
	struct udp_sock *s;
	uint8_t *slot;
	int rc;

	if (len > TALLY_MAX_PAYLOAD || to->core >= u->cfg.ncores) {
		u->st.tx_errors++;
		return -EINVAL;
	}
	s = &u->socks[to->core];
	if (!s->slots) {
		if (u->cfg.listen) {
			u->st.tx_errors++;
			return -EINVAL;
		}
		rc = udp_open(u, (uint16_t)to->core);
		if (rc) {
			u->st.tx_errors++;
			return rc;
		}
	}
	if (s->nq == u->cfg.batch) {
		udp_flush_sock(u, s);
		if (s->nq == u->cfg.batch) {
			u->st.tx_errors++;
			return -ENOBUFS;
		}
	}
	slot = s->slots + (size_t)s->nq * UDP_SLOT;
	memcpy(slot, hdr, TALLY_HDR_LEN);
	if (len)
		memcpy(slot + TALLY_HDR_LEN, payload, len);
	s->lens[s->nq] = (uint32_t)(TALLY_HDR_LEN + len);
	if (s->dst) {
		memset(&s->dst[s->nq], 0, sizeof(s->dst[s->nq]));
		s->dst[s->nq].sin_family = AF_INET;
		s->dst[s->nq].sin_addr.s_addr = to->ip;
		s->dst[s->nq].sin_port = to->port;
	}
	s->nq++;
	if (s->nq == u->cfg.batch)
		udp_flush_sock(u, s);
	return 0;
}

/* Drain one socket (a few batches); returns datagrams delivered. */
static int udp_rx_sock(struct tally_udp *u, uint16_t core)
{
	struct udp_sock *s = &u->socks[core];
	uint32_t batch = u->cfg.batch;
	size_t blen = u->rbuf_len;
	int delivered = 0;

	for (int round = 0; round < UDP_RX_ROUNDS; round++) {
		struct sockaddr_in from[64];
		uint32_t nb = batch < 64 ? batch : 64;
		int r;

		for (uint32_t i = 0; i < nb; i++) {
			struct msghdr *mh = &u->rmsg[i].msg_hdr;

			u->riov[i].iov_base = u->rbuf + (size_t)i * blen;
			u->riov[i].iov_len = blen;
			memset(mh, 0, sizeof(*mh));
			mh->msg_iov = &u->riov[i];
			mh->msg_iovlen = 1;
			mh->msg_name = &from[i];
			mh->msg_namelen = sizeof(from[i]);
			mh->msg_control = u->rctl + (size_t)i * UDP_CTL_LEN;
			mh->msg_controllen = UDP_CTL_LEN;
		}
		r = recvmmsg(s->fd, u->rmsg, nb, MSG_DONTWAIT, NULL);
		u->st.rx_calls++;
		if (r <= 0) {
			if (r < 0 && errno != EAGAIN && errno != EINTR && errno != ECONNREFUSED)
				udp_err(u, "udp: recvmmsg on core %u's socket: %s", core,
					strerror(errno));
			break;
		}
		for (int i = 0; i < r; i++) {
			struct msghdr *mh = &u->rmsg[i].msg_hdr;
			size_t len = u->rmsg[i].msg_len, seg = len;
			const uint8_t *p = u->riov[i].iov_base;
			struct tally_addr a = { .core = core };
			struct cmsghdr *cm;

			if (mh->msg_flags & MSG_TRUNC) {
				u->st.rx_truncated++;
				continue;
			}
			for (cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm))
				if (cm->cmsg_level == SOL_UDP && cm->cmsg_type == UDP_GRO) {
					int gs;

					memcpy(&gs, CMSG_DATA(cm), sizeof(gs));
					if (gs > 0 && (size_t)gs < len) {
						seg = (size_t)gs;
						u->st.rx_gro_batches++;
					}
				}
			a.ip = from[i].sin_addr.s_addr;
			a.port = from[i].sin_port;
			for (size_t off = 0; off < len; off += seg) {
				size_t l = len - off < seg ? len - off : seg;

				u->st.rx_pkts++;
				u->st.rx_bytes += l;
				if (u->rx)
					u->rx(u->rx_arg, p + off, l, &a);
				delivered++;
			}
		}
		if ((uint32_t)r < nb)
			break;
	}
	return delivered;
}

static int udp_poll(void *ctx, uint64_t timeout_ns)
{
	struct tally_udp *u = ctx;
	int n = 0;

	tally_udp_flush(u);
	for (uint16_t i = 0; i < u->npfd; i++)
		n += udp_rx_sock(u, u->pfd_core[i]);
	if (n || !timeout_ns) {
		if (n) /* what the rx callbacks queued (next chunks, RESULTs) goes out now */
			tally_udp_flush(u);
		return n;
	}
	if (!u->npfd) {
		struct timespec ts = { (time_t)(timeout_ns / 1000000000ull),
				       (long)(timeout_ns % 1000000000ull) };
		nanosleep(&ts, NULL);
		return 0;
	}
	{
		struct timespec ts = { (time_t)(timeout_ns / 1000000000ull),
				       (long)(timeout_ns % 1000000000ull) };
		int r = ppoll(u->pfd, u->npfd, &ts, NULL);

		if (r < 0 && errno != EINTR) {
			udp_err(u, "udp: ppoll: %s", strerror(errno));
			return -errno;
		}
		if (r <= 0)
			return 0;
	}
	for (uint16_t i = 0; i < u->npfd; i++)
		if (u->pfd[i].revents)
			n += udp_rx_sock(u, u->pfd_core[i]);
	tally_udp_flush(u);
	return n;
}

static const struct tally_xport_ops udp_ops = {
	.send = udp_send,
	.now_ns = udp_now_ns,
	.poll = udp_poll,
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
	u->siov = calloc(u->cfg.batch, sizeof(*u->siov));
	u->sctl = calloc(u->cfg.batch, UDP_CTL_LEN);
	if (!u->rmsg || !u->riov || !u->rbuf || !u->rctl || !u->smsg || !u->siov || !u->sctl) {
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

void tally_udp_destroy(struct tally_udp *u)
{
	if (!u)
		return;
	for (unsigned i = 0; i < TALLY_UDP_MAX_CORES; i++) {
		struct udp_sock *s = &u->socks[i];

		if (s->slots) {
			udp_flush_sock(u, s);
			close(s->fd);
		}
		free(s->slots);
		free(s->lens);
		free(s->dst);
	}
	free(u->rmsg);
	free(u->riov);
	free(u->rbuf);
	free(u->rctl);
	free(u->smsg);
	free(u->siov);
	free(u->sctl);
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
