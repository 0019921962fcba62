/* SPDX-License-Identifier: Apache-2.0
 * udpd_proc.c — see udpd_proc.h.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include "udpd_proc.h"

unsigned udpd_free_ports(void)
{
	for (int tries = 0; tries < 50; tries++) {
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		socklen_t l = sizeof(a);
		int s = socket(AF_INET, SOCK_DGRAM, 0), t;
		unsigned p;

		bind(s, (struct sockaddr *)&a, sizeof(a));
		getsockname(s, (struct sockaddr *)&a, &l);
		p = ntohs(a.sin_port);
		close(s);
		if (p + 1 > 65535)
			continue;
		t = socket(AF_INET, SOCK_DGRAM, 0);
		a.sin_port = htons((uint16_t)(p + 1));
		int ok = bind(t, (struct sockaddr *)&a, sizeof(a)) == 0;
		close(t);
		if (ok)
			return p;
	}
	return 0;
}

void udpd_start(const char *bin, pid_t *pid, unsigned *pport, unsigned world)
{
	char p[16], w[16], line[256];
	int fds[2];

	*pport = udpd_free_ports();
	snprintf(p, sizeof(p), "%u", *pport);
	snprintf(w, sizeof(w), "%u", world);
	if (pipe(fds))
		exit(1);
	*pid = fork();
	if (*pid == 0) {
		dup2(fds[1], 2);
		close(fds[0]);
		if (!world)
			execl(bin, bin, "--addr", "127.0.0.1", "--port", p, "--cores", "2", "--open",
			      (char *)NULL);
		else
			execl(bin, bin, "--addr", "127.0.0.1", "--port", p, "--cores", "2", "--job",
			      "7", "--no-auth", "--token", "1234", "--world", w, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	FILE *f = fdopen(fds[0], "r");
	while (f && fgets(line, sizeof(line), f)) {
		fputs(line, stderr);
		if (strstr(line, "cores on port"))
			break;
	}
	/* the appliance writes nothing more to stderr until it exits (its stats go to stdout) */
}

void udpd_stop(pid_t *pid)
{
	if (*pid > 0) {
		kill(*pid, SIGTERM);
		waitpid(*pid, NULL, 0);
		*pid = 0;
	}
}
