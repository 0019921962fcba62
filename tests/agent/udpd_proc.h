/* SPDX-License-Identifier: Apache-2.0
 * udpd_proc.h — the agent tests' tally-udpd process on loopback: free ports, start (job 7
 * with token 1234 admitted for `world` workers, or open admission), stop.
 */
#ifndef TESTS_AGENT_UDPD_PROC_H
#define TESTS_AGENT_UDPD_PROC_H

#include <sys/types.h>

/* A free block of two UDP ports on loopback (the appliance binds base and base + 1); 0 if
 * none was found. */
unsigned udpd_free_ports(void);
/* Start `bin` on a free port (stored in *port) with 2 cores; world 0: open admission (the
 * first JOIN of a job creates it). Returns once it printed its "cores on port" line
 * (seconds on a loaded machine). Its control socket is a private one under /tmp, never the
 * default /run/tally/tallyd.sock. Exits the test process if it cannot fork. */
void udpd_start(const char *bin, pid_t *pid, unsigned *port, unsigned world);
/* The appliance's --drain-timeout-ms, and how much longer udpd_stop waits for its exit. */
#define UDPD_DRAIN_MS 2000u
#define UDPD_EXIT_SLACK_MS 30000u
/* SIGTERM and wait (the drain, then UDPD_EXIT_SLACK_MS, then SIGKILL); *pid becomes 0. */
void udpd_stop(pid_t *pid);

#endif
