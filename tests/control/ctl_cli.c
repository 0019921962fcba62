/* SPDX-License-Identifier: Apache-2.0
 * ctl_cli.c — see ctl_cli.h.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "ctl_cli.h"

void ctl_cli_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

void ctl_cli_slurp(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, cap - 1) : 0;
	buf[n > 0 ? n : 0] = '\0';
	if (fd >= 0)
		close(fd);
	unlink(path);
}

int ctl_cli_run(struct ctl_cli *c, const char *first, ...)
{
	const char *args[32] = { c->bin, "--socket", c->sock };
	int n = 3, status;
	char po[64], pe[64];
	va_list ap;

	va_start(ap, first);
	for (const char *a = first; a && n < 31; a = va_arg(ap, const char *))
		args[n++] = a;
	va_end(ap);
	args[n] = NULL;
	snprintf(po, sizeof(po), "/tmp/ctl-%s-out-%d", c->tag, (int)getpid());
	snprintf(pe, sizeof(pe), "/tmp/ctl-%s-err-%d", c->tag, (int)getpid());
	pid_t pid = fork();
	if (pid == 0) {
		int fo = open(po, O_CREAT | O_TRUNC | O_WRONLY, 0600);
		int fe = open(pe, O_CREAT | O_TRUNC | O_WRONLY, 0600);
		dup2(fo, 1);
		dup2(fe, 2);
		execv(c->bin, (char *const *)args);
		_exit(98);
	}
	waitpid(pid, &status, 0);
	ctl_cli_slurp(po, c->out, c->outcap);
	ctl_cli_slurp(pe, c->err, c->errcap);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

json_t *ctl_cli_json(struct ctl_cli *c, int rc)
{
	if (rc != 0)
		fail_msg("tallyctl exit %d: %s", rc, c->err);
	json_t *j = json_loads(c->out, JSON_DECODE_ANY, NULL);
	if (!j)
		fail_msg("not JSON: %.300s", c->out);
	return j;
}

json_int_t ctl_cli_geti(const json_t *o, const char *path, json_int_t missing)
{
	char buf[128], *save, *tok;
	const json_t *cur = o;

	snprintf(buf, sizeof(buf), "%s", path);
	for (tok = strtok_r(buf, ".", &save); tok && cur; tok = strtok_r(NULL, ".", &save))
		cur = json_object_get(cur, tok);
	return cur ? json_integer_value(cur) : missing;
}

json_int_t ctl_cli_key_quorum(struct ctl_cli *c, const char *job, uint32_t key)
{
	json_t *ks = ctl_cli_json(c, ctl_cli_run(c, "--json", "keys", job, NULL));
	json_int_t q = -1;
	size_t i;
	json_t *k;

	json_array_foreach(ks, i, k)
		if (ctl_cli_geti(k, "key", -1) == key)
			q = ctl_cli_geti(k, "quorum", -1);
	json_decref(ks);
	return q;
}
