/* SPDX-License-Identifier: Apache-2.0
 * ctl_client.c — connect to the control socket and make one call (tallyctl, tests).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "tally_ctl.h"

#define CTL_MAX_ANSWER (256u << 20)

int tally_ctl_connect(const char *path, char *msg, size_t msglen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int fd, e;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(msg, msglen, "%s: path too long for a unix socket", path);
		return -ENAMETOOLONG;
	}
	strcpy(sa.sun_path, path);
	if (stat(path, &st)) {
		e = errno;
		snprintf(msg, msglen, "%s: %s", path,
			 e == ENOENT ? "missing (no control socket: is tallyd running, with "
				       "this --control path?)"
			 : e == EACCES ? "permission denied (a directory on the path is not "
					 "searchable: run as root or a member of group tally)"
			 : strerror(e));
		return -e;
	}
	if (!S_ISSOCK(st.st_mode)) {
		snprintf(msg, msglen, "%s: not a socket", path);
		return -ENOTSOCK;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		e = errno;
		snprintf(msg, msglen, "socket: %s", strerror(e));
		return -e;
	}
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		e = errno;
		close(fd);
		snprintf(msg, msglen, "%s: %s", path,
			 e == EACCES || e == EPERM
			 ? "permission denied (run as root or a member of group tally)"
			 : e == ECONNREFUSED ? "connection refused (stale socket: tallyd not running)"
			 : strerror(e));
		return -e;
	}
	return fd;
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int wait_fd(int fd, short ev, int64_t deadline)
{
	struct pollfd p = { .fd = fd, .events = ev };
	int64_t left = deadline < 0 ? -1 : deadline - mono_ms();
	int n;

	if (deadline >= 0 && left <= 0)
		return -ETIMEDOUT;
	n = poll(&p, 1, (int)left);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	return n == 0 ? -ETIMEDOUT : 0;
}

int tally_ctl_call(int fd, const char *method, const json_t *params, int timeout_ms,
		   json_t **result, json_t **error)
{
	static json_int_t next_id = 1;
	json_int_t id = next_id++;
	int64_t deadline = timeout_ms < 0 ? -1 : mono_ms() + timeout_ms;
	json_t *req = json_pack("{s:s, s:s, s:I}", "jsonrpc", "2.0", "method", method, "id", id);
	char *text = NULL, *buf = NULL;
	size_t len, off = 0, cap = 0, have = 0;
	json_t *resp = NULL;
	int rc = -ENOMEM;

	*result = *error = NULL;
	if (!req)
		return -ENOMEM;
	if (params)
		json_object_set(req, "params", (json_t *)params);
	text = json_dumps(req, JSON_COMPACT);
	if (!text)
		goto out;
	len = strlen(text);
	text[len] = '\n'; /* json_dumps left room for the NUL: reuse it */
	len++;
	while (off < len) {
		ssize_t n = send(fd, text + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			rc = wait_fd(fd, POLLOUT, deadline);
			if (rc)
				goto out;
			continue;
		}
		/* The server may have refused us already: still read its answer. */
		break;
	}
	for (;;) {
		json_error_t jerr;
		if (have) {
			resp = json_loadb(buf, have, JSON_DISABLE_EOF_CHECK, &jerr);
			if (resp)
				break;
			if (json_error_code(&jerr) != json_error_premature_end_of_input &&
			    (size_t)jerr.position < have) {
				rc = -EPROTO;
				goto out;
			}
		}
		if (have == cap) {
			cap = cap ? cap * 2 : 65536;
			if (cap > CTL_MAX_ANSWER) {
				rc = -EMSGSIZE;
				goto out;
			}
			char *nb = realloc(buf, cap);
			if (!nb) {
				rc = -ENOMEM;
				goto out;
			}
			buf = nb;
		}
		ssize_t n = recv(fd, buf + have, cap - have, MSG_DONTWAIT);
		if (n > 0) {
			have += (size_t)n;
			continue;
		}
		if (n == 0) {
			rc = -ECONNRESET;
			goto out;
		}
		if (errno != EAGAIN && errno != EINTR) {
			rc = -errno;
			goto out;
		}
		rc = wait_fd(fd, POLLIN, deadline);
		if (rc)
			goto out;
	}
	{
		json_t *r = json_object_get(resp, "result");
		json_t *e = json_object_get(resp, "error");
		json_t *rid = json_object_get(resp, "id");
		if (e && json_is_object(e)) {
			*error = json_incref(e);
			rc = 0;
		} else if (r && json_is_integer(rid) && json_integer_value(rid) == id) {
			*result = json_incref(r);
			rc = 0;
		} else {
			rc = -EPROTO;
		}
	}
out:
	json_decref(resp);
	json_decref(req);
	free(text);
	free(buf);
	return rc;
}
