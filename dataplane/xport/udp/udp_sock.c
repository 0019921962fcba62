/* SPDX-License-Identifier: Apache-2.0
 * udp_sock.c — one kernel UDP socket per appliance core: open, buffer sizes, bind/connect,
 * GSO/GRO probing, its send queue; and the transport's error text (and its receive drops,
 * udp_rx_loss). A leaf of the transport
 * (udp_io.c opens a client's core socket lazily on its first send).
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

#include <linux/sock_diag.h>

#include "tally_proto.h"

void udp_err(struct tally_udp *u, const char *fmt, ...)
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

int udp_open(struct tally_udp *u, uint16_t core)
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
	s->ref = u->cfg.listen ? calloc(u->cfg.batch, sizeof(*s->ref)) : NULL;
	if (!s->slots || !s->lens || (u->cfg.listen && (!s->dst || !s->ref))) {
		free(s->slots);
		free(s->lens);
		free(s->dst);
		free(s->ref);
		s->slots = NULL; /* tally_udp_destroy frees what is left */
		s->lens = NULL;
		s->dst = NULL;
		s->ref = NULL;
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

/* The kernel's count of datagrams each socket dropped (SO_MEMINFO: sk_drops, almost always
 * a full receive buffer) and the buffer it got: on a loaded host the buffer fills while
 * the process waits for a CPU, and without root SO_RCVBUF stops at net.core.rmem_max. */
size_t udp_rx_loss(void *ctx, char *buf, size_t len)
{
	struct tally_udp *u = ctx;
	uint64_t drops = 0;
	int got = 0, n = 0;

	buf[0] = '\0';
	for (uint16_t i = 0; i < u->npfd; i++) {
		uint32_t mi[SK_MEMINFO_VARS];
		socklen_t sl = sizeof(mi);

		if (getsockopt(u->socks[u->pfd_core[i]].fd, SOL_SOCKET, SO_MEMINFO, mi, &sl) ||
		    sl < sizeof(mi))
			continue;
		drops += mi[SK_MEMINFO_DROPS];
		got = (int)mi[SK_MEMINFO_RCVBUF];
	}
	u->st.rx_sock_drops = drops;
	if (drops && got / 2 < u->cfg.sock_buf) /* the kernel reports twice the size set */
		n = snprintf(buf, len, "%llu datagrams dropped by this host's socket receive buffer "
			     "(%d bytes, %d asked): raise net.core.rmem_max (sysctl), or run as "
			     "root", (unsigned long long)drops, got / 2, u->cfg.sock_buf);
	else if (drops)
		n = snprintf(buf, len, "%llu datagrams dropped by this host's socket receive buffer "
			     "(%d bytes, full while this process waited for a CPU: give the worker "
			     "a core of its own)", (unsigned long long)drops, got / 2);
	if (u->st.rx_truncated && n >= 0 && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, "%s%llu datagrams over the receive size "
			      "dropped (truncated)", n ? "; " : "",
			      (unsigned long long)u->st.rx_truncated);
	return n < 0 ? 0 : (size_t)n < len ? (size_t)n : len - 1;
}
