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
 * (seconds on a loaded machine). Exits the test process if it cannot fork. */
void udpd_start(const char *bin, pid_t *pid, unsigned *port, unsigned world);
/* SIGTERM and wait; *pid becomes 0. */
void udpd_stop(pid_t *pid);

#endif
