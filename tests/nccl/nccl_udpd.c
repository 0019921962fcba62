/* SPDX-License-Identifier: Apache-2.0
 * nccl_udpd.c — see nccl_udpd.h.
 */
#include "nccl_udpd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

unsigned nccl_udpd_free_ports(void)
{
	for (int tries = 0; tries < 50; tries++) {
		struct sockaddr_in a = {.sin_family = AF_INET,
					.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		socklen_t l = sizeof(a);
		int s = socket(AF_INET, SOCK_DGRAM, 0), t, ok;
		unsigned p;

		if (s < 0)
			return 0;
		bind(s, (struct sockaddr *)&a, sizeof(a));
		getsockname(s, (struct sockaddr *)&a, &l);
		p = ntohs(a.sin_port);
		close(s);
		if (p + 1 > 65535)
			continue;
		t = socket(AF_INET, SOCK_DGRAM, 0);
		a.sin_port = htons((uint16_t)(p + 1));
		ok = bind(t, (struct sockaddr *)&a, sizeof(a)) == 0;
		close(t);
		if (ok)
			return p;
	}
	return 0;
}

static char ctl_dir[64];

pid_t nccl_udpd_start(const char *bin, unsigned *port, const char *const *extra)
{
	const char *argv[48];
	char p[16], ctl[128], line[256];
	int fds[2], n = 0;
	static unsigned seq;
	pid_t pid;
	FILE *f;

	*port = nccl_udpd_free_ports();
	if (!ctl_dir[0]) {
		snprintf(ctl_dir, sizeof(ctl_dir), "/tmp/tally-nccl-test.XXXXXX");
		if (!mkdtemp(ctl_dir))
			return 0;
	}
	snprintf(p, sizeof(p), "%u", *port);
	snprintf(ctl, sizeof(ctl), "%s/ctl-%u-%u.sock", ctl_dir, (unsigned)getpid(), seq++);
	const char *base[] = {bin, "--addr", "127.0.0.1", "--port", p, "--cores", "2", "--mem",
			      "256M", "--ctl-socket", ctl, "--drain-timeout-ms", "1000"};
	for (size_t i = 0; i < sizeof(base) / sizeof(base[0]); i++)
		argv[n++] = base[i];
	for (; extra && *extra && n < 46; extra++)
		argv[n++] = *extra;
	argv[n] = NULL;
	if (pipe(fds) != 0)
		return 0;
	pid = fork();
	if (pid == 0) {
		dup2(fds[1], 2);
		freopen("/dev/null", "w", stdout); /* its stats at exit */
		close(fds[0]);
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	close(fds[1]);
	f = fdopen(fds[0], "r");
	while (f && fgets(line, sizeof(line), f)) {
		fputs(line, stderr);
		if (strstr(line, "cores on port"))
			return pid; /* nothing more on stderr until it exits */
	}
	nccl_udpd_kill(pid);
	return 0;
}

void nccl_udpd_stop(pid_t pid)
{
	if (pid <= 0)
		return;
	kill(pid, SIGTERM);
	for (int i = 0; i < 600; i++) {
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return;
		usleep(50000);
	}
	nccl_udpd_kill(pid);
}

void nccl_udpd_kill(pid_t pid)
{
	if (pid <= 0)
		return;
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}
