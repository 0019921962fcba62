/* SPDX-License-Identifier: Apache-2.0
 * it_util.h — helpers of the tallyd integration tests: run shell commands, start tallyd
 * with its output captured, wait for a line, stop it and collect its exit status.
 */
#ifndef IT_UTIL_H
#define IT_UTIL_H

#include <stddef.h>
#include <sys/types.h>

struct it_proc {
	pid_t pid;
	int out;             /* read end of its stdout + stderr */
	char log[1 << 16];
	size_t len;
};

/* system() of a formatted command; its exit status (or -1). */
int it_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* First line of a command's output into buf; 0 or -1. */
int it_sh_out(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Start argv[0] with argv; 0 or -errno. */
int it_start(struct it_proc *p, char *const argv[]);
/* Read its output until `needle` appears (1), EOF (0) or the timeout (0). */
int it_wait_for(struct it_proc *p, const char *needle, int timeout_ms);
/* Signal it, read output until it exits (up to timeout_ms, then SIGKILL); its exit status,
 * -1 when it had to be killed, -1000 - N when it died of signal N. */
int it_stop(struct it_proc *p, int sig, int timeout_ms);
/* Wait for it to exit on its own; exit status, -1 (killed on timeout) or -1000 - signal. */
int it_wait_exit(struct it_proc *p, int timeout_ms);
/* Kill without waiting for output (cleanup). */
void it_kill(struct it_proc *p);

/* Value of "name=NUMBER" in the captured output (last occurrence), or -1. */
long long it_counter(const struct it_proc *p, const char *name);

#endif
