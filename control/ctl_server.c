/* SPDX-License-Identifier: Apache-2.0
 * ctl_server.c — the non-blocking unix-socket JSON-RPC server. Polled by its owner's thread
 * (tallyd's main thread), never by a datapath core. Everything a client can make it hold is
 * bounded: request bytes, answer bytes, clients, time.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "tally_ctl.h"
#include "ctl_listen.h"

struct ctl_client {
	int fd;
	uid_t uid;
	pid_t pid;
	char *in;
	size_t in_len, in_cap;
	char *out;
	size_t out_len, out_off;
	uint64_t last_ms;      /* last byte received or sent */
	uint64_t busy_ms;      /* a partial request or unsent answer since then; 0: none */
	int closing;           /* close once the answer is sent */
	int eof;               /* the client finished sending: answer what it sent, then close */
	int priv;              /* root or our own uid: the operator (reserved slots, see accept) */
	int dead;              /* closed; freed after the current epoll batch (see client_close) */
	struct ctl_client *next;
};

struct tally_ctl_server {
	struct tally_ctl_server_cfg cfg;
	struct tally_ctl_backend b;
	int lfd, epfd;
	gid_t gid;
	int have_gid;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char group[64];
	struct ctl_client *clients;
	struct ctl_client *dead;   /* closed this batch; their events may still be in it */
	struct tally_ctl_server_stats st;
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

__attribute__((format(printf, 3, 4)))
static void slog(struct tally_ctl_server *s, int prio, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (s->cfg.log)
		s->cfg.log(s->cfg.log_ctx, prio, buf);
	else if (prio <= LOG_NOTICE)
		fprintf(stderr, "tally-ctl: %s\n", buf);
}

struct tally_ctl_server *tally_ctl_server_create(const struct tally_ctl_server_cfg *cfg,
						 const struct tally_ctl_backend *b, int *err)
{
	struct tally_ctl_server *s = calloc(1, sizeof(*s));
	struct epoll_event ev = { .events = EPOLLIN };
	int rc;

	if (!s) {
		*err = -ENOMEM;
		return NULL;
	}
	s->cfg = *cfg;
	s->b = *b;
	s->lfd = s->epfd = -1;
	if (!s->cfg.path)
		s->cfg.path = TALLY_CTL_DEFAULT_SOCKET;
	if (!s->cfg.mode)
		s->cfg.mode = 0660;
	if (!s->cfg.max_request)
		s->cfg.max_request = TALLY_CTL_MAX_REQUEST;
	if (!s->cfg.max_output)
		s->cfg.max_output = 16u << 20;
	if (!s->cfg.max_clients)
		s->cfg.max_clients = 64;
	if (!s->cfg.reserved_clients)
		s->cfg.reserved_clients = TALLY_CTL_RESERVED_CLIENTS;
	if (!s->cfg.request_timeout_ms)
		s->cfg.request_timeout_ms = 5000;
	if (!s->cfg.idle_timeout_ms)
		s->cfg.idle_timeout_ms = TALLY_CTL_IDLE_TIMEOUT_MS;
	snprintf(s->path, sizeof(s->path), "%s", s->cfg.path);
	s->cfg.path = s->path;
	if (s->cfg.allow_gid_set) {
		s->gid = s->cfg.allow_gid;
		s->have_gid = 1;
		snprintf(s->group, sizeof(s->group), "gid %u", (unsigned)s->gid);
	} else {
		const char *gname = s->cfg.group ? s->cfg.group : TALLY_CTL_DEFAULT_GROUP;
		struct group *g = getgrnam(gname);
		snprintf(s->group, sizeof(s->group), "%s", gname);
		if (g) {
			s->gid = g->gr_gid;
			s->have_gid = 1;
		}
	}
	s->cfg.group = NULL;
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (s->epfd < 0) {
		rc = -errno;
		goto fail;
	}
	rc = ctl_listen_socket(s->cfg.path, s->cfg.mode, s->have_gid, s->gid, &s->lfd);
	if (rc)
		goto fail;
	ev.data.ptr = NULL;
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->lfd, &ev)) {
		rc = -errno;
		goto fail;
	}
	slog(s, LOG_INFO, "control socket %s (mode %04o, group %s%s)", s->path,
	     (unsigned)s->cfg.mode, s->group, s->have_gid ? "" : " absent: root only");
	return s;
fail:
	*err = rc;
	tally_ctl_server_destroy(s);
	return NULL;
}

/* Closes a client now but frees it only after the epoll batch (reap_dead): an accept may
 * evict a client whose event is later in the same batch, and that event must find it dead,
 * not freed memory. */
static void client_close(struct tally_ctl_server *s, struct ctl_client *c)
{
	struct ctl_client **pp;

	if (c->dead)
		return;
	for (pp = &s->clients; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	epoll_ctl(s->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	c->fd = -1;
	free(c->in);
	free(c->out);
	c->in = c->out = NULL;
	c->dead = 1;
	c->next = s->dead;
	s->dead = c;
	s->st.clients--;
	s->st.closed++;
}

static void reap_dead(struct tally_ctl_server *s)
{
	while (s->dead) {
		struct ctl_client *c = s->dead;
		s->dead = c->next;
		free(c);
	}
}

static void client_watch(struct tally_ctl_server *s, struct ctl_client *c)
{
	struct epoll_event ev = { .data.ptr = c };

	ev.events = c->out_len > c->out_off ? EPOLLOUT : EPOLLIN;
	epoll_ctl(s->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

/* Sends what it can. 0, or -1 when the client is gone. */
static int client_flush(struct tally_ctl_server *s, struct ctl_client *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n <= 0)
			return -1;
		c->out_off += (size_t)n;
		c->last_ms = now_ms();
	}
	if (c->out_off == c->out_len) {
		c->out_off = c->out_len = 0;
		if (c->closing)
			return -1;
	}
	client_watch(s, c);
	return 0;
}

/* Queues one answer. 0, or -1 when the client must be dropped (too much unread). */
static int client_queue(struct tally_ctl_server *s, struct ctl_client *c, json_t *resp)
{
	char *text = json_dumps(resp, JSON_COMPACT);
	size_t n, need;

	if (!text)
		return -1;
	n = strlen(text);
	need = c->out_len + n + 1;
	/* one answer may be as large as it is; unread ones may not pile up */
	if (c->out_len > c->out_off && need > s->cfg.max_output) {
		free(text);
		s->st.output_overflow++;
		slog(s, LOG_WARNING, "control client pid %d: %zu unread answer bytes, dropped",
		     (int)c->pid, need);
		return -1;
	}
	if (c->out_off) {
		memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
		c->out_len -= c->out_off;
		c->out_off = 0;
		need = c->out_len + n + 1;
	}
	char *nb = realloc(c->out, need);
	if (!nb) {
		free(text);
		return -1;
	}
	c->out = nb;
	memcpy(c->out + c->out_len, text, n);
	c->out[c->out_len + n] = '\n';
	c->out_len += n + 1;
	free(text);
	if (!c->busy_ms)
		c->busy_ms = now_ms();
	return 0;
}

/* Sends an error and marks the client to be closed once it is out. */
static int client_fail(struct tally_ctl_server *s, struct ctl_client *c, int code,
		       const char *msg)
{
	json_t *e = tally_ctl_error(NULL, code, msg, NULL);
	int rc = e ? client_queue(s, c, e) : -1;

	json_decref(e);
	c->closing = 1;
	return rc ? -1 : client_flush(s, c);
}

static int peer_allowed(struct tally_ctl_server *s, int fd, struct ucred *uc)
{
	socklen_t len = sizeof(*uc);
	gid_t groups[256];

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, uc, &len))
		return 0;
	if (uc->uid == 0 || uc->uid == geteuid())
		return 1;
	if (!s->have_gid)
		return 0;
	if (uc->gid == s->gid)
		return 1;
	len = sizeof(groups);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) == 0)
		for (size_t i = 0; i < len / sizeof(gid_t); i++)
			if (groups[i] == s->gid)
				return 1;
	return 0;
}

/* A full table must not lock the operator out (idle connections held by anyone allowed):
 * the client idle the longest, with no request or answer under way, makes room. Only the
 * operator (priv) may evict the operator: a just-accepted tallyctl is idle until its request
 * arrives, and a flood of group members must not push it out. 1 if one made room. */
static int evict_idlest(struct tally_ctl_server *s, int priv)
{
	struct ctl_client *c, *old = NULL;

	for (c = s->clients; c; c = c->next)
		if (!c->busy_ms && c->out_off == c->out_len && (priv || !c->priv) &&
		    (!old || c->last_ms < old->last_ms))
			old = c;
	if (!old)
		return 0;
	slog(s, LOG_NOTICE, "control client pid %d idle %llu ms evicted: %u clients (max_clients)",
	     (int)old->pid, (unsigned long long)(now_ms() - old->last_ms), s->st.clients);
	client_close(s, old);
	s->st.evicted++;
	return 1;
}

static void accept_one(struct tally_ctl_server *s)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct ucred uc = { 0 };
	struct ctl_client *c;
	char msg[160];
	int code = TALLY_CTL_E_REFUSED;
	int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

	if (fd < 0)
		return;
	if (!peer_allowed(s, fd, &uc)) {
		s->st.refused++;
		slog(s, LOG_WARNING, "control client refused: uid %u gid %u pid %d is neither root "
		     "nor in group %s", (unsigned)uc.uid, (unsigned)uc.gid, (int)uc.pid, s->group);
		snprintf(msg, sizeof(msg), "permission denied: uid %u is neither root nor in group %s",
			 (unsigned)uc.uid, s->group);
		goto reject;
	}
	/* max_clients for everyone, reserved_clients more for root and our own uid: clients
	 * that keep requests under way (trickling bytes until request_timeout_ms, reconnecting)
	 * fill the table but never the operator's slots */
	int priv = uc.uid == 0 || uc.uid == geteuid();
	if (s->st.clients >= s->cfg.max_clients && !evict_idlest(s, priv) &&
	    (!priv || s->st.clients >= s->cfg.max_clients + s->cfg.reserved_clients)) {
		s->st.busy++;
		slog(s, LOG_WARNING, "control client pid %d refused: %u clients already",
		     (int)uc.pid, s->st.clients);
		snprintf(msg, sizeof(msg), "too many control clients (%u)", s->cfg.max_clients);
		code = TALLY_CTL_E_BUSY;
		goto reject;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return;
	}
	c->fd = fd;
	c->priv = priv;
	if (priv && s->st.clients >= s->cfg.max_clients)
		s->st.reserved++;
	c->uid = uc.uid;
	c->pid = uc.pid;
	c->last_ms = now_ms();
	ev.data.ptr = c;
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev)) {
		close(fd);
		free(c);
		return;
	}
	c->next = s->clients;
	s->clients = c;
	s->st.clients++;
	s->st.accepted++;
	return;
reject: {
		json_t *e = tally_ctl_error(NULL, code, msg, NULL);
		char *text = e ? json_dumps(e, JSON_COMPACT) : NULL;
		if (text) {
			/* best effort: a fresh socket buffer always takes this much */
			if (send(fd, text, strlen(text), MSG_NOSIGNAL | MSG_DONTWAIT) >= 0)
				(void)!send(fd, "\n", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
		}
		free(text);
		json_decref(e);
		close(fd);
	}
}

/* Parses and answers every complete request in the input buffer. -1: drop the client. */
static int client_process(struct tally_ctl_server *s, struct ctl_client *c)
{
	size_t off = 0;
	int rc = 0;

	while (!c->closing && c->out_off == c->out_len) {
		json_error_t jerr;
		json_t *req, *resp;

		while (off < c->in_len && (c->in[off] == ' ' || c->in[off] == '\n' ||
					   c->in[off] == '\r' || c->in[off] == '\t'))
			off++;
		if (off == c->in_len)
			break;
		req = json_loadb(c->in + off, c->in_len - off,
				 JSON_DISABLE_EOF_CHECK | JSON_REJECT_DUPLICATES, &jerr);
		if (!req) {
			/* An error at the end of the data may be a request cut in two. */
			if (json_error_code(&jerr) == json_error_premature_end_of_input ||
			    (size_t)jerr.position >= c->in_len - off)
				break;
			s->st.parse_errors++;
			char msg[256];
			snprintf(msg, sizeof(msg), "parse error at byte %d: %s", jerr.position,
				 jerr.text);
			return client_fail(s, c, TALLY_CTL_E_PARSE, msg);
		}
		off += (size_t)jerr.position;
		s->st.requests++;
		resp = tally_ctl_handle(&s->b, req);
		json_decref(req);
		if (resp) {
			if (json_object_get(resp, "error"))
				s->st.errors++;
			rc = client_queue(s, c, resp);
			json_decref(resp);
			if (rc)
				return -1;
			if (client_flush(s, c))
				return -1;
		}
	}
	if (off) {
		memmove(c->in, c->in + off, c->in_len - off);
		c->in_len -= off;
	}
	if (c->in_len == 0 && c->out_off == c->out_len)
		c->busy_ms = 0;
	else if (!c->busy_ms)
		c->busy_ms = now_ms();
	return 0;
}

static int client_read(struct tally_ctl_server *s, struct ctl_client *c)
{
	for (;;) {
		if (c->in_len == c->in_cap) {
			size_t cap = c->in_cap ? c->in_cap * 2 : 4096;
			if (cap > s->cfg.max_request + 1)
				cap = s->cfg.max_request + 1;
			if (cap <= c->in_len)
				break;
			char *nb = realloc(c->in, cap);
			if (!nb)
				return -1;
			c->in = nb;
			c->in_cap = cap;
		}
		ssize_t n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n == 0) {
			c->eof = 1; /* answer what it sent, then close */
			break;
		}
		if (n < 0)
			return -1;
		c->in_len += (size_t)n;
		c->last_ms = now_ms();
		if (c->in_len > s->cfg.max_request)
			break;
	}
	if (client_process(s, c))
		return -1;
	if (c->eof && c->out_off == c->out_len)
		return -1;
	if (c->in_len > s->cfg.max_request) {
		char msg[128];
		s->st.too_large++;
		slog(s, LOG_WARNING, "control client pid %d: request over %zu bytes, closed",
		     (int)c->pid, s->cfg.max_request);
		snprintf(msg, sizeof(msg), "request larger than %zu bytes", s->cfg.max_request);
		return client_fail(s, c, TALLY_CTL_E_TOO_LARGE, msg);
	}
	return 0;
}

static void sweep_timeouts(struct tally_ctl_server *s)
{
	uint64_t t = now_ms();
	struct ctl_client *c = s->clients, *next;

	for (; c; c = next) {
		next = c->next;
		if (c->busy_ms && t - c->busy_ms > s->cfg.request_timeout_ms) {
			s->st.timeouts++;
			slog(s, LOG_NOTICE, "control client pid %d: request not completed in %u ms, "
			     "closed", (int)c->pid, s->cfg.request_timeout_ms);
			client_close(s, c);
		} else if (!c->busy_ms && s->cfg.idle_timeout_ms &&
			   t - c->last_ms > s->cfg.idle_timeout_ms) {
			s->st.timeouts++;
			client_close(s, c);
		}
	}
}

int tally_ctl_server_poll(struct tally_ctl_server *s, int timeout_ms)
{
	struct epoll_event evs[32];
	int n, handled = 0;

	if (s->clients && (timeout_ms < 0 || timeout_ms > 100))
		timeout_ms = 100; /* wake up to time out slow clients */
	n = epoll_wait(s->epfd, evs, 32, timeout_ms);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	for (int i = 0; i < n; i++) {
		struct ctl_client *c = evs[i].data.ptr;
		handled++;
		if (!c) {
			accept_one(s);
			continue;
		}
		if (c->dead) /* evicted earlier in this batch */
			continue;
		if (evs[i].events & EPOLLOUT) {
			if (client_flush(s, c) || (c->out_off == c->out_len && client_process(s, c)) ||
			    (c->eof && c->out_off == c->out_len)) {
				client_close(s, c);
				continue;
			}
		} else if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
			if (client_read(s, c))
				client_close(s, c);
		}
	}
	sweep_timeouts(s);
	reap_dead(s);
	return handled;
}

int tally_ctl_server_fd(const struct tally_ctl_server *s)
{
	return s->epfd;
}

const char *tally_ctl_server_path(const struct tally_ctl_server *s)
{
	return s->path;
}

void tally_ctl_server_stats(const struct tally_ctl_server *s, struct tally_ctl_server_stats *st)
{
	*st = s->st;
}

void tally_ctl_server_destroy(struct tally_ctl_server *s)
{
	uint64_t until;

	if (!s)
		return;
	/* Give pending answers (e.g. to appliance_shutdown) a short chance to leave. */
	until = now_ms() + 200;
	while (s->clients && now_ms() < until) {
		struct ctl_client *c;
		int pending = 0;
		for (c = s->clients; c; c = c->next)
			pending |= c->out_off < c->out_len;
		if (!pending)
			break;
		tally_ctl_server_poll(s, 10);
	}
	while (s->clients)
		client_close(s, s->clients);
	reap_dead(s);
	if (s->lfd >= 0) {
		close(s->lfd);
		unlink(s->path);
	}
	if (s->epfd >= 0)
		close(s->epfd);
	free(s);
}
