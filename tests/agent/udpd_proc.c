/* SPDX-License-Identifier: Apache-2.0
 * udpd_proc.c — see udpd_proc.h.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
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

/* A private directory for the appliances' control sockets: never the default one,
 * /run/tally/tallyd.sock, which belongs to a real appliance on the machine. */
static char ctl_dir[] = "/tmp/tally-agent-test.XXXXXX";
static unsigned ctl_n;

void udpd_start(const char *bin, pid_t *pid, unsigned *pport, unsigned world)
{
	char p[16], w[16], line[256], ctl[sizeof(ctl_dir) + 32], drain[16];
	int fds[2];

	*pport = udpd_free_ports();
	snprintf(p, sizeof(p), "%u", *pport);
	snprintf(w, sizeof(w), "%u", world);
	snprintf(drain, sizeof(drain), "%u", UDPD_DRAIN_MS);
	if (!ctl_n ? !mkdtemp(ctl_dir) : mkdir(ctl_dir, 0700) && errno != EEXIST)
		exit(1); /* (udpd_stop removes it after the last appliance) */
	snprintf(ctl, sizeof(ctl), "%s/ctl-%u.sock", ctl_dir, ctl_n++);
	if (pipe(fds))
		exit(1);
	*pid = fork();
	if (*pid == 0) {
		dup2(fds[1], 2);
		close(fds[0]);
		/* --mem 64M per core (default 1G): meson sets MALLOC_PERTURB_, so glibc fills the
		 * whole key arena at start: 2 x 1 GiB took 10 s and 2.2 GB of RSS per appliance on
		 * a loaded 2-core host; these tests' keys are a few hundred KiB. */
		if (!world)
			execl(bin, bin, "--addr", "127.0.0.1", "--port", p, "--cores", "2", "--open",
			      "--mem", "64M", "--ctl-socket", ctl, "--drain-timeout-ms", drain,
			      (char *)NULL);
		else
			execl(bin, bin, "--addr", "127.0.0.1", "--port", p, "--cores", "2", "--job",
			      "7", "--no-auth", "--token", "1234", "--world", w, "--mem", "64M",
			      "--ctl-socket", ctl, "--drain-timeout-ms", drain, (char *)NULL);
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
		/* SIGTERM drains for up to UDPD_DRAIN_MS: wait longer than that (a loaded host),
		 * then kill -9, so the next appliance never meets this one */
		kill(*pid, SIGTERM);
		for (unsigned i = 0; i < (UDPD_DRAIN_MS + UDPD_EXIT_SLACK_MS) / 50; i++) {
			if (waitpid(*pid, NULL, WNOHANG) == *pid) {
				*pid = 0;
				break;
			}
			usleep(50000);
		}
		if (*pid > 0) {
			fprintf(stderr, "udpd_stop: tally-udpd %d still running %u ms after SIGTERM: "
				"kill -9\n", (int)*pid, UDPD_DRAIN_MS + UDPD_EXIT_SLACK_MS);
			kill(*pid, SIGKILL);
			waitpid(*pid, NULL, 0);
			*pid = 0;
		}
		rmdir(ctl_dir); /* once the last one's socket is gone */
	}
}
