/* SPDX-License-Identifier: Apache-2.0
 * nccl_net.c — the plugin's net part: point-to-point over kernel TCP with NCCL's request
 * model. A send comm and a recv comm are the two ends of one TCP connection; each message
 * is a 16-byte header (size, tag, magic) and its payload. Requests of a comm complete in
 * the order they were posted (NCCL posts them in order and TCP keeps it), at most
 * NCCL_NET_MAX_REQUESTS in flight; test() advances the comm without blocking.
 * One receive per irecv (maxRecvs 1), so there is nothing to match tags against.
 */
#include "nccl_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define NET_MAGIC 0x54414c59u /* "TALY" */

struct net_handle {
	uint32_t magic;
	uint32_t addr; /* network order */
	uint16_t port; /* network order */
	/* the connecting side's state between connect() calls (NCCL hands the same handle
	 * memory back until it gets a comm) */
	uint16_t connecting;
	int32_t fd;
};

struct net_listen {
	int fd;
};

struct net_req {
	struct net_comm *c;
	int used, done;
	char *data;
	size_t cap, size, off;
	int tag;
	unsigned char hdr[16];
	size_t hoff;
};

struct net_comm {
	int fd, is_send, failed;
	uint64_t alloc_seq, prog_seq;
	struct net_req reqs[NCCL_NET_MAX_REQUESTS];
};

static struct in_addr net_addr; /* what our handles carry */
static char net_ifname[IF_NAMESIZE + 16] = "lo";

/* TALLY_NCCL_SOCKET_ADDR, else the first up, non-loopback IPv4 interface, else loopback.
 * Read once, at init (the plugin's program edge). */
static void net_pick_addr(void)
{
	const char *env = getenv("TALLY_NCCL_SOCKET_ADDR");
	struct ifaddrs *ifs = NULL;

	net_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (env && inet_pton(AF_INET, env, &net_addr) == 1) {
		snprintf(net_ifname, sizeof(net_ifname), "%s", env);
		return;
	}
	if (getifaddrs(&ifs) != 0)
		return;
	for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET ||
		    (i->ifa_flags & IFF_LOOPBACK) || !(i->ifa_flags & IFF_UP))
			continue;
		net_addr = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
		snprintf(net_ifname, sizeof(net_ifname), "%s", i->ifa_name);
		break;
	}
	freeifaddrs(ifs);
}

ncclResult_t nccl_net_init(ncclDebugLogger_t log, int version)
{
	char a[INET_ADDRSTRLEN];

	nccl_log_fn = log;
	net_pick_addr();
	inet_ntop(AF_INET, &net_addr, a, sizeof(a));
	NCCL_INFO("NET/Tally: plugin libnccl-net-tally, net v%d, kernel TCP on %s (%s)", version,
		  net_ifname, a);
	return ncclSuccess;
}

ncclResult_t nccl_net_devices(int *ndev)
{
	*ndev = 1;
	return ncclSuccess;
}

void nccl_net_props(int dev, int *speed_mbps, char **name, char **pci)
{
	(void)dev;
	*speed_mbps = 10000;
	*name = net_ifname;
	*pci = NULL;
}

static void net_tune(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

ncclResult_t nccl_net_listen(int dev, void *handle, void **listen_comm)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	struct net_handle *h = handle;
	struct net_listen *l = calloc(1, sizeof(*l));

	(void)dev;
	if (!l)
		return ncclSystemError;
	l->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (l->fd < 0 || bind(l->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    listen(l->fd, 128) != 0 || getsockname(l->fd, (struct sockaddr *)&sa, &sl) != 0) {
		NCCL_WARN("NET/Tally: listen failed: %s", strerror(errno));
		if (l->fd >= 0)
			close(l->fd);
		free(l);
		return ncclSystemError;
	}
	memset(handle, 0, NCCL_NET_HANDLE_MAXSIZE);
	h->magic = NET_MAGIC;
	h->fd = -1;
	h->addr = net_addr.s_addr;
	h->port = sa.sin_port;
	*listen_comm = l;
	return ncclSuccess;
}

static struct net_comm *net_comm_new(int fd, int is_send)
{
	struct net_comm *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->fd = fd;
	c->is_send = is_send;
	for (int i = 0; i < NCCL_NET_MAX_REQUESTS; i++)
		c->reqs[i].c = c;
	return c;
}

static ncclResult_t net_connect_fail(struct net_handle *h, int err)
{
	char a[INET_ADDRSTRLEN];
	struct in_addr in = {.s_addr = h->addr};

	inet_ntop(AF_INET, &in, a, sizeof(a));
	NCCL_WARN("NET/Tally: connect to %s:%u failed: %s", a, ntohs(h->port), strerror(err));
	if (h->connecting)
		close(h->fd);
	h->connecting = 0;
	return ncclSystemError;
}

/* Never blocks: a connect in progress returns *send_comm NULL and NCCL calls again with the
 * same handle, where the socket waits. */
ncclResult_t nccl_net_connect(int dev, void *handle, void **send_comm)
{
	struct net_handle *h = handle;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = h->addr,
				 .sin_port = h->port};
	struct pollfd pfd;
	int err = 0;
	socklen_t el = sizeof(err);

	(void)dev;
	*send_comm = NULL;
	if (h->magic != NET_MAGIC) {
		NCCL_WARN("NET/Tally: connect handle is not a Tally net handle");
		return ncclInvalidArgument;
	}
	if (!h->connecting) {
		h->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (h->fd < 0)
			return net_connect_fail(h, errno);
		h->connecting = 1;
		if (connect(h->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 && errno != EINPROGRESS)
			return net_connect_fail(h, errno);
	}
	pfd = (struct pollfd){.fd = h->fd, .events = POLLOUT};
	if (poll(&pfd, 1, 0) == 0)
		return ncclSuccess; /* still connecting */
	if (getsockopt(h->fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err)
		return net_connect_fail(h, err ? err : errno);
	net_tune(h->fd);
	if (!(*send_comm = net_comm_new(h->fd, 1)))
		return net_connect_fail(h, ENOMEM);
	h->connecting = 0;
	return ncclSuccess;
}

ncclResult_t nccl_net_accept(void *listen_comm, void **recv_comm)
{
	struct net_listen *l = listen_comm;
	int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

	*recv_comm = NULL;
	if (fd < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
			return ncclSuccess; /* NCCL calls again */
		NCCL_WARN("NET/Tally: accept failed: %s", strerror(errno));
		return ncclSystemError;
	}
	net_tune(fd);
	if (!(*recv_comm = net_comm_new(fd, 0))) {
		close(fd);
		return ncclSystemError;
	}
	return ncclSuccess;
}

/* Host memory needs no registration: the handle only says what was registered. */
ncclResult_t nccl_net_regmr(void *comm, void *data, size_t size, int type, void **mhandle)
{
	(void)comm;
	(void)data;
	(void)size;
	if (type != NCCL_PTR_HOST) {
		NCCL_WARN("NET/Tally: only host memory (NCCL_PTR_HOST) can be registered, got %d",
			  type);
		return ncclInternalError;
	}
	*mhandle = NULL;
	return ncclSuccess;
}

ncclResult_t nccl_net_deregmr(void *comm, void *mhandle)
{
	(void)comm;
	(void)mhandle;
	return ncclSuccess;
}

static struct net_req *net_req_new(struct net_comm *c)
{
	struct net_req *r = &c->reqs[c->alloc_seq % NCCL_NET_MAX_REQUESTS];

	if (r->used)
		return NULL; /* NCCL holds 32 untested requests: try again later */
	memset(&r->data, 0, sizeof(*r) - offsetof(struct net_req, data));
	r->used = 1;
	r->done = 0;
	c->alloc_seq++;
	return r;
}

ncclResult_t nccl_net_isend(void *send_comm, void *data, size_t size, int tag, void **request)
{
	struct net_comm *c = send_comm;
	struct net_req *r = net_req_new(c);
	uint64_t sz = size;
	int32_t t = tag;
	uint32_t m = NET_MAGIC;

	*request = r;
	if (!r)
		return ncclSuccess;
	r->data = data;
	r->size = size;
	memcpy(r->hdr, &sz, 8);
	memcpy(r->hdr + 8, &t, 4);
	memcpy(r->hdr + 12, &m, 4);
	return ncclSuccess;
}

ncclResult_t nccl_net_irecv(void *recv_comm, int n, void **data, const size_t *sizes,
			    const int *tags, void **request)
{
	struct net_comm *c = recv_comm;
	struct net_req *r;

	*request = NULL;
	if (n != 1) {
		NCCL_WARN("NET/Tally: irecv of %d grouped receives (maxRecvs is 1)", n);
		return ncclInternalError;
	}
	r = net_req_new(c);
	if (!r)
		return ncclSuccess;
	r->data = data[0];
	r->cap = sizes[0];
	r->tag = tags ? tags[0] : 0;
	*request = r;
	return ncclSuccess;
}

/* Host memory: nothing to flush (NCCL asks only with GPUDirect, which we do not offer). */
ncclResult_t nccl_net_iflush(void *recv_comm, void **request)
{
	(void)recv_comm;
	*request = NULL;
	return ncclSuccess;
}

/* 1 when the byte range [*off, len) went through, 0 when the socket would block, -1 on
 * error or a closed peer. */
static int net_io(struct net_comm *c, char *buf, size_t len, size_t *off)
{
	while (*off < len) {
		ssize_t n = c->is_send ? send(c->fd, buf + *off, len - *off, MSG_NOSIGNAL)
				       : recv(c->fd, buf + *off, len - *off, 0);
		if (n > 0) {
			*off += (size_t)n;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			return 0;
		NCCL_WARN("NET/Tally: %s failed: %s", c->is_send ? "send" : "receive",
			  n == 0 ? "peer closed the connection" : strerror(errno));
		return -1;
	}
	return 1;
}

static int net_step(struct net_req *r)
{
	struct net_comm *c = r->c;
	int rc = net_io(c, (char *)r->hdr, sizeof(r->hdr), &r->hoff);
	uint64_t sz;
	uint32_t m;

	if (rc <= 0)
		return rc;
	if (!c->is_send && r->off == 0 && r->size == 0) {
		memcpy(&sz, r->hdr, 8);
		memcpy(&m, r->hdr + 12, 4);
		if (m != NET_MAGIC || sz > r->cap) {
			NCCL_WARN("NET/Tally: message of %llu bytes for a receive of %zu bytes%s",
				  (unsigned long long)sz, r->cap,
				  m != NET_MAGIC ? " (bad magic)" : "");
			return -1;
		}
		r->size = sz;
	}
	return net_io(c, r->data, r->size, &r->off);
}

ncclResult_t nccl_net_test(void *request, int *done, int *sizes)
{
	struct net_req *r = request;
	struct net_comm *c = r->c;

	*done = 0;
	while (!c->failed && c->prog_seq < c->alloc_seq) {
		struct net_req *h = &c->reqs[c->prog_seq % NCCL_NET_MAX_REQUESTS];
		int rc = net_step(h);

		if (rc < 0)
			c->failed = 1;
		if (rc <= 0)
			break;
		h->done = 1;
		c->prog_seq++;
	}
	if (!r->done && c->failed)
		return ncclSystemError;
	if (r->done) {
		*done = 1;
		if (sizes)
			*sizes = (int)r->size;
		r->used = 0;
	}
	return ncclSuccess;
}

ncclResult_t nccl_net_close(void *comm)
{
	struct net_comm *c = comm;

	if (c) {
		close(c->fd);
		free(c);
	}
	return ncclSuccess;
}

ncclResult_t nccl_net_close_listen(void *listen_comm)
{
	struct net_listen *l = listen_comm;

	if (l) {
		close(l->fd);
		free(l);
	}
	return ncclSuccess;
}
