/* SPDX-License-Identifier: Apache-2.0
 * ctl_exp_http.c — the smallest HTTP/1.0 server that serves GET /metrics: one thread,
 * poll(), non-blocking sockets, a cap on connections (the next one is answered 503 and
 * closed), a cap on the request head, and one deadline per connection for reading the
 * request and writing the answer, so a slow or broken scraper costs a slot for at most
 * that long and never blocks the others. Every answer closes the connection.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "ctl_exp.h"

struct conn {
	int fd;                 /* -1: free slot */
	uint64_t deadline_ns;
	size_t rlen;
	char *req;
	struct ctl_exp_buf out;
	size_t off;
	int writing;
};

struct ctl_exp_http {
	struct ctl_exp_http_cfg cfg;
	int lfd;
	struct conn *c;
	struct pollfd *pfd;
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void conn_close(struct conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->rlen = c->off = 0;
	c->writing = 0;
	ctl_exp_buf_free(&c->out);
}

static int listen_on(const struct ctl_exp_http_cfg *cfg)
{
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
	socklen_t sl;
	int one = 1, fd, rc;

	if (inet_pton(AF_INET, cfg->host, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons(cfg->port);
		sl = sizeof(*s4);
	} else if (inet_pton(AF_INET6, cfg->host, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(cfg->port);
		sl = sizeof(*s6);
	} else {
		return -EINVAL;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, sl) || listen(fd, 64)) {
		rc = -errno;
		close(fd);
		return rc;
	}
	return fd;
}

struct ctl_exp_http *ctl_exp_http_open(const struct ctl_exp_http_cfg *cfg, int *err)
{
	struct ctl_exp_http *h = calloc(1, sizeof(*h));
	int rc = -ENOMEM;

	if (!h)
		goto fail;
	h->cfg = *cfg;
	h->lfd = -1;
	h->c = calloc(cfg->max_conns, sizeof(*h->c));
	h->pfd = calloc(cfg->max_conns + 1, sizeof(*h->pfd));
	if (!h->c || !h->pfd)
		goto fail;
	for (unsigned i = 0; i < cfg->max_conns; i++) {
		h->c[i].fd = -1;
		h->c[i].req = malloc(cfg->max_request + 1);
		if (!h->c[i].req)
			goto fail;
	}
	h->lfd = listen_on(cfg);
	if (h->lfd < 0) {
		rc = h->lfd;
		goto fail;
	}
	return h;
fail:
	ctl_exp_http_close(h);
	*err = rc;
	return NULL;
}

void ctl_exp_http_close(struct ctl_exp_http *h)
{
	if (!h)
		return;
	for (unsigned i = 0; h->c && i < h->cfg.max_conns; i++) {
		conn_close(&h->c[i]);
		free(h->c[i].req);
	}
	if (h->lfd >= 0)
		close(h->lfd);
	free(h->c);
	free(h->pfd);
	free(h);
}

static void respond(struct conn *c, int code, const char *reason, const char *ctype,
		    const char *body, size_t blen)
{
	c->out.len = 0;
	ctl_exp_buf_printf(&c->out, "HTTP/1.0 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			   "Connection: close\r\n\r\n", code, reason, ctype, blen);
	if (body && blen && !c->out.oom) {
		ctl_exp_buf_printf(&c->out, "%.*s", (int)blen, body);
	}
	c->writing = 1;
	c->off = 0;
}

#define TEXT "text/plain; charset=utf-8"
#define PROM "text/plain; version=0.0.4; charset=utf-8"

/* A complete request head is in c->req: answer it. */
static void handle(struct conn *c, ctl_exp_body_fn fn, void *arg, struct ctl_exp_self *self)
{
	char method[16] = "", target[256] = "";
	const struct ctl_exp_buf *b;

	if (sscanf(c->req, "%15s %255s HTTP/", method, target) != 2) {
		self->http_rejected++;
		respond(c, 400, "Bad Request", TEXT, "bad request\n", 12);
		return;
	}
	self->http_requests++;
	if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
		respond(c, 405, "Method Not Allowed", TEXT, "GET only\n", 9);
	} else if (!strcmp(target, "/") ) {
		static const char idx[] = "tally-exporter: metrics at /metrics\n";
		respond(c, 200, "OK", TEXT, idx, sizeof(idx) - 1);
	} else if (strcmp(target, "/metrics") && strncmp(target, "/metrics?", 9)) {
		respond(c, 404, "Not Found", TEXT, "not found: try /metrics\n", 24);
	} else if (!(b = fn(arg)) || b->oom) {
		respond(c, 503, "Service Unavailable", TEXT, "no metrics\n", 11);
	} else {
		respond(c, 200, "OK", PROM, b->p, b->len);
		if (!strcmp(method, "HEAD")) /* the head only */
			c->out.len -= b->len;
	}
}

static void on_read(struct conn *c, const struct ctl_exp_http_cfg *cfg, ctl_exp_body_fn fn,
		    void *arg, struct ctl_exp_self *self)
{
	ssize_t n = read(c->fd, c->req + c->rlen, cfg->max_request - c->rlen);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		conn_close(c);
		return;
	}
	c->rlen += (size_t)n;
	c->req[c->rlen] = '\0';
	if (strstr(c->req, "\r\n\r\n") || strstr(c->req, "\n\n")) {
		handle(c, fn, arg, self);
	} else if (c->rlen == cfg->max_request) {
		self->http_rejected++;
		respond(c, 431, "Request Header Fields Too Large", TEXT, "too large\n", 10);
	}
}

static void on_write(struct conn *c)
{
	ssize_t n = send(c->fd, c->out.p + c->off, c->out.len - c->off, MSG_NOSIGNAL);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		conn_close(c);
		return;
	}
	c->off += (size_t)n;
	if (c->off == c->out.len)
		conn_close(c);
}

static void on_accept(struct ctl_exp_http *h, struct ctl_exp_self *self)
{
	for (;;) {
		int fd = accept4(h->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		unsigned i;

		if (fd < 0)
			return;
		for (i = 0; i < h->cfg.max_conns && h->c[i].fd >= 0; i++)
			;
		if (i == h->cfg.max_conns) { /* over the cap: a best-effort 503, closed */
			static const char busy[] = "HTTP/1.0 503 Service Unavailable\r\n"
				"Content-Length: 0\r\nConnection: close\r\n\r\n";
			self->http_rejected++;
			(void)!send(fd, busy, sizeof(busy) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
			close(fd);
			continue;
		}
		h->c[i].fd = fd;
		h->c[i].deadline_ns = now_ns() + (uint64_t)h->cfg.timeout_ms * 1000000u;
	}
}

int ctl_exp_http_poll(struct ctl_exp_http *h, int timeout_ms, ctl_exp_body_fn fn, void *arg,
		      struct ctl_exp_self *self)
{
	unsigned n = 0, map[1024];
	uint64_t now = now_ns();
	int rc;

	h->pfd[n++] = (struct pollfd){ .fd = h->lfd, .events = POLLIN };
	for (unsigned i = 0; i < h->cfg.max_conns; i++) {
		struct conn *c = &h->c[i];
		if (c->fd < 0)
			continue;
		if (now >= c->deadline_ns) {
			self->http_timeouts++;
			conn_close(c);
			continue;
		}
		uint64_t left_ms = (c->deadline_ns - now) / 1000000u + 1;
		if (timeout_ms < 0 || (uint64_t)timeout_ms > left_ms)
			timeout_ms = (int)left_ms;
		map[n] = i;
		h->pfd[n++] = (struct pollfd){ .fd = c->fd, .events = c->writing ? POLLOUT : POLLIN };
	}
	rc = poll(h->pfd, n, timeout_ms);
	if (rc < 0)
		return errno == EINTR ? 0 : -errno;
	for (unsigned k = 1; k < n; k++) {
		struct conn *c = &h->c[map[k]];
		if (!h->pfd[k].revents)
			continue;
		if (c->writing)
			on_write(c);
		else
			on_read(c, &h->cfg, fn, arg, self);
		if (c->fd >= 0 && c->writing && (h->pfd[k].revents & (POLLERR | POLLHUP)))
			conn_close(c);
	}
	if (h->pfd[0].revents & POLLIN)
		on_accept(h, self);
	return 0;
}
