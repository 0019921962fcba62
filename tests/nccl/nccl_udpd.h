/* SPDX-License-Identifier: Apache-2.0
 * nccl_udpd.h — the plugin harness's tally-udpd on loopback: a free port pair, started with
 * the given extra arguments and a private control socket, stopped by pid.
 */
#ifndef TESTS_NCCL_UDPD_H
#define TESTS_NCCL_UDPD_H

#include <sys/types.h>

unsigned nccl_udpd_free_ports(void);
/* Starts `bin --addr 127.0.0.1 --port P --cores 2 --mem 256M <extra...>` (extra NULL-ended),
 * returns once it printed its "cores on port" line (at most 60 s); pid 0 on failure. */
pid_t nccl_udpd_start(const char *bin, unsigned *port, const char *const *extra);
/* SIGTERM, wait up to 30 s, then SIGKILL. */
void nccl_udpd_stop(pid_t pid);
/* SIGKILL at once (the fault test), and reap. */
void nccl_udpd_kill(pid_t pid);

#endif
