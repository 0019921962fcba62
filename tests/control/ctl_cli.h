/* SPDX-License-Identifier: Apache-2.0
 * ctl_cli.h — the control tests' tallyctl runner: run the real CLI against an appliance's
 * socket, keep its stdout and stderr, parse its --json output.
 */
#ifndef TESTS_CONTROL_CTL_CLI_H
#define TESTS_CONTROL_CTL_CLI_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct ctl_cli {
	const char *bin;      /* tallyctl */
	const char *sock;     /* the appliance's control socket */
	const char *tag;      /* names the temporary capture files */
	char *out, *err;      /* the last run's stdout and stderr */
	size_t outcap, errcap;
};

/* tallyctl --socket SOCK first ... (NULL-terminated); its exit status, -1 if it died. */
int ctl_cli_run(struct ctl_cli *c, const char *first, ...);
/* The parsed stdout of a run that exited rc (fails the test unless rc is 0 and it parses). */
json_t *ctl_cli_json(struct ctl_cli *c, int rc);
/* The integer at a dotted path ("totals.pushes"), or `missing` when the path is absent. */
json_int_t ctl_cli_geti(const json_t *o, const char *path, json_int_t missing);
/* The quorum `tallyctl --json keys JOB` shows for key, or -1 when it lists no such key. */
json_int_t ctl_cli_key_quorum(struct ctl_cli *c, const char *job, uint32_t key);
/* Read a file into buf (NUL-terminated, truncated to cap - 1) and remove it. */
void ctl_cli_slurp(const char *path, char *buf, size_t cap);
void ctl_cli_sleep_ms(int ms);

#endif
