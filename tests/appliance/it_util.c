/* SPDX-License-Identifier: Apache-2.0
 * it_util.c — process helpers for the tallyd integration tests.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

#include "it_util.h"

int it_sh(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	int rc = system(cmd);
	return rc == -1 || !WIFEXITED(rc) ? -1 : WEXITSTATUS(rc);
}

int it_sh_out(char *buf, size_t len, const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	FILE *f = popen(cmd, "r");
	if (!f)
		return -1;
	buf[0] = '\0';
	if (!fgets(buf, (int)len, f))
		buf[0] = '\0';
	while (fgetc(f) != EOF)
		;
	pclose(f);
	return 0;
}

int it_start(struct it_proc *p, char *const argv[])
{
	int fd[2];

	memset(p, 0, sizeof(*p));
	p->pid = -1;
	if (pipe(fd))
		return -errno;
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		dup2(fd[1], 1);
		dup2(fd[1], 2);
		close(fd[0]);
		close(fd[1]);
		execv(argv[0], argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(fd[1]);
	fcntl(fd[0], F_SETFL, O_NONBLOCK);
	p->pid = pid;
	p->out = fd[0];
	return 0;
}

static long long it_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000ll + ts.tv_nsec / 1000000;
}

/* Read what is available (waiting up to ms); 0 at EOF, 1 otherwise. */
static int it_read(struct it_proc *p, int ms)
{
	struct pollfd pfd = { .fd = p->out, .events = POLLIN };

	if (p->out < 0)
		return 0;
	if (poll(&pfd, 1, ms) <= 0)
		return 1;
	char tmp[4096];
	ssize_t n = read(p->out, tmp, sizeof(tmp));
	if (n == 0) {
		close(p->out);
		p->out = -1;
		return 0;
	}
	if (n < 0)
		return errno == EAGAIN || errno == EINTR;
	if (p->len + (size_t)n >= sizeof(p->log)) { /* keep the tail */
		size_t drop = p->len + (size_t)n - sizeof(p->log) / 2;
		memmove(p->log, p->log + drop, p->len - drop);
		p->len -= drop;
	}
	memcpy(p->log + p->len, tmp, (size_t)n);
	p->len += (size_t)n;
	p->log[p->len] = '\0';
	return 1;
}

int it_wait_for(struct it_proc *p, const char *needle, int timeout_ms)
{
	long long end = it_ms() + timeout_ms;

	while (!strstr(p->log, needle)) {
		if (it_ms() >= end || !it_read(p, 50))
			return strstr(p->log, needle) != NULL;
	}
	return 1;
}

int it_wait_exit(struct it_proc *p, int timeout_ms)
{
	long long end = it_ms() + timeout_ms;
	int st;

	if (p->pid <= 0)
		return -1;
	for (;;) {
		it_read(p, 20);
		pid_t r = waitpid(p->pid, &st, WNOHANG);
		if (r == p->pid)
			break;
		if (it_ms() >= end) {
			kill(p->pid, SIGKILL);
			waitpid(p->pid, &st, 0);
			p->pid = -1;
			return -1;
		}
	}
	while (it_read(p, 20) && p->out >= 0)
		;
	p->pid = -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1000 - WTERMSIG(st);
}

int it_stop(struct it_proc *p, int sig, int timeout_ms)
{
	if (p->pid <= 0)
		return -1;
	kill(p->pid, sig);
	return it_wait_exit(p, timeout_ms);
}

void it_kill(struct it_proc *p)
{
	if (p->pid > 0) {
		kill(p->pid, SIGKILL);
		waitpid(p->pid, NULL, 0);
		p->pid = -1;
	}
	if (p->out >= 0) {
		close(p->out);
		p->out = -1;
	}
}

long long it_counter(const struct it_proc *p, const char *name)
{
	char pat[64];
	const char *s = p->log, *hit = NULL;

	snprintf(pat, sizeof(pat), "%s=", name);
	while ((s = strstr(s, pat))) {
		/* a whole name: preceded by a space or the start */
		if (s == p->log || s[-1] == ' ')
			hit = s;
		s++;
	}
	return hit ? strtoll(hit + strlen(pat), NULL, 10) : -1;
}
