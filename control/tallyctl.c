/* SPDX-License-Identifier: Apache-2.0
 * tallyctl — operate a tally appliance over its control socket.
 * Commands, options and help are generated from the method schema (ctl_schema.c).
 * Exit codes: 0 ok, 1 error answered by the appliance, 2 usage, 3 cannot reach the socket.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ctl_render.h"
#include "tally_ctl.h"

enum { EX_OK = 0, EX_APPLIANCE = 1, EX_USAGE = 2, EX_UNREACHABLE = 3 };

struct opts {
	const char *socket;
	int json;
	int timeout_ms;
};

static void upper(char *dst, size_t len, const char *src)
{
	size_t i;

	for (i = 0; i + 1 < len && src[i]; i++)
		dst[i] = src[i] >= 'a' && src[i] <= 'z' ? (char)(src[i] - 32) : src[i];
	dst[i] = '\0';
}

static void optname(char *dst, size_t len, const char *name)
{
	size_t i;

	for (i = 0; i + 1 < len && name[i]; i++)
		dst[i] = name[i] == '_' ? '-' : name[i];
	dst[i] = '\0';
}

static void usage_main(FILE *f)
{
	size_t n;
	const struct tally_ctl_method *m = tally_ctl_methods(&n);

	fprintf(f,
		"usage: tallyctl [--socket PATH] [--json] [--timeout MS] COMMAND [ARGS]\n"
		"       tallyctl COMMAND --help\n\n"
		"Operate a tally appliance over its control socket.\n\n"
		"options:\n"
		"  --socket PATH  control socket (default %s, or $TALLY_CTL_SOCKET)\n"
		"  --json         print the raw JSON result\n"
		"  --timeout MS   give up waiting for an answer after MS (default 10000)\n"
		"  --help         this help\n\ncommands:\n", TALLY_CTL_DEFAULT_SOCKET);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "  %-12s %s\n", m[i].cmd, m[i].help);
	fprintf(f, "\nexit status: 0 ok, 1 error answered by the appliance, 2 usage, "
		"3 cannot reach the socket\n");
}

static void usage_cmd(FILE *f, const struct tally_ctl_method *m)
{
	char on[64], up[64];

	fprintf(f, "usage: tallyctl [--socket PATH] [--json] %s", m->cmd);
	for (unsigned i = 0; i < m->nparams; i++) {
		const struct tally_ctl_param *p = &m->params[i];
		upper(up, sizeof(up), p->name);
		optname(on, sizeof(on), p->name);
		if (p->positional)
			fprintf(f, p->required ? " %s" : " [%s]", up);
		else if (p->flag)
			fprintf(f, " [--%s]", on);
		else
			fprintf(f, p->required ? " --%s %s" : " [--%s %s]", on, up);
	}
	fprintf(f, "\n\n%s.\n", m->help);
	if (m->nparams) {
		fprintf(f, "\narguments:\n");
		for (unsigned i = 0; i < m->nparams; i++) {
			const struct tally_ctl_param *p = &m->params[i];
			char typ[80];
			optname(on, sizeof(on), p->name);
			upper(up, sizeof(up), p->name);
			if (p->type == TALLY_CTL_T_UINT)
				snprintf(typ, sizeof(typ), "integer %" PRIu64 "..%" PRIu64, p->min,
					 p->max);
			else if (p->type == TALLY_CTL_T_ENUM)
				snprintf(typ, sizeof(typ), "%s", p->choices);
			else
				snprintf(typ, sizeof(typ), "%s", tally_ctl_ptype_name(p->type));
			char lhs[256];
			if (p->positional)
				snprintf(lhs, sizeof(lhs), "%s | --%s %s", up, on, up);
			else if (p->flag)
				snprintf(lhs, sizeof(lhs), "--%s", on);
			else
				snprintf(lhs, sizeof(lhs), "--%s %s", on, up);
			fprintf(f, "  %-30s %s (%s%s%s%s)\n", lhs, p->help, typ,
				p->required ? ", required" : "", p->def ? ", default " : "",
				p->def ? p->def : "");
		}
	}
	if (m->need_one_of)
		fprintf(f, "\nat least one of --quorum, --deadline-us, --deterministic must be given.\n");
	fprintf(f, "\nJSON-RPC method: %s\nresult: %s\n", m->name, m->result);
}

/* Builds params (sent) and cli (tallyctl-only values) from the command's arguments. */
static int parse_cmd_args(const struct tally_ctl_method *m, int argc, char **argv,
			  json_t *params, json_t *cli)
{
	unsigned next_pos = 0;
	char msg[256], on[64];

	for (int i = 0; i < argc; i++) {
		const struct tally_ctl_param *p = NULL;
		const char *val = NULL, *a = argv[i];

		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage_cmd(stdout, m);
			exit(EX_OK);
		}
		if (!strncmp(a, "--", 2)) {
			const char *eq = strchr(a, '=');
			size_t nl = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
			for (unsigned k = 0; k < m->nparams; k++) {
				optname(on, sizeof(on), m->params[k].name);
				if (strlen(on) == nl && !strncmp(on, a + 2, nl))
					p = &m->params[k];
			}
			if (!p) {
				fprintf(stderr, "tallyctl %s: unknown option '%s' (see tallyctl %s "
					"--help)\n", m->cmd, a, m->cmd);
				return -1;
			}
			if (eq) {
				val = eq + 1;
			} else if (p->flag) {
				val = "true";
			} else if (i + 1 < argc) {
				val = argv[++i];
			} else {
				fprintf(stderr, "tallyctl %s: option '%s' needs a value\n", m->cmd, a);
				return -1;
			}
		} else {
			while (next_pos < m->nparams && (!m->params[next_pos].positional ||
			       json_object_get(m->params[next_pos].cli_only ? cli : params,
					       m->params[next_pos].name)))
				next_pos++;
			if (next_pos == m->nparams) {
				fprintf(stderr, "tallyctl %s: unexpected argument '%s' (see tallyctl "
					"%s --help)\n", m->cmd, a, m->cmd);
				return -1;
			}
			p = &m->params[next_pos++];
			val = a;
		}
		json_t *dst = p->cli_only ? cli : params;
		if (json_object_get(dst, p->name)) {
			fprintf(stderr, "tallyctl %s: '%s' given twice\n", m->cmd, p->name);
			return -1;
		}
		json_t *v = p->type == TALLY_CTL_T_STRING ? json_string(val)
			    : tally_ctl_param_parse(p, val, msg, sizeof(msg));
		if (!v) {
			fprintf(stderr, "tallyctl %s: %s\n", m->cmd, msg);
			return -1;
		}
		json_object_set_new(dst, p->name, v);
	}
	json_t *chk = tally_ctl_params_check(m, params, msg, sizeof(msg));
	if (!chk) {
		fprintf(stderr, "tallyctl %s: %s (see tallyctl %s --help)\n", m->cmd, msg, m->cmd);
		return -1;
	}
	json_decref(chk);
	if (json_object_get(cli, "count") && !json_object_get(cli, "watch")) {
		fprintf(stderr, "tallyctl %s: --count needs --watch\n", m->cmd);
		return -1;
	}
	return 0;
}

/* One call; prints errors; returns an exit code. *result set on EX_OK. */
static int do_call(const struct opts *o, const char *method, const json_t *params,
		   json_t **result)
{
	char msg[512];
	json_t *err = NULL;
	int fd = tally_ctl_connect(o->socket, msg, sizeof(msg));
	int rc;

	*result = NULL;
	if (fd < 0) {
		fprintf(stderr, "tallyctl: cannot reach the appliance: %s\n", msg);
		return EX_UNREACHABLE;
	}
	rc = tally_ctl_call(fd, method, params, o->timeout_ms, result, &err);
	close(fd);
	if (rc) {
		fprintf(stderr, "tallyctl: cannot reach the appliance: %s: %s\n", o->socket,
			rc == -ETIMEDOUT ? "no answer (timed out)"
			: rc == -EPROTO ? "malformed answer" : strerror(-rc));
		return EX_UNREACHABLE;
	}
	if (err) {
		json_int_t code = json_integer_value(json_object_get(err, "code"));
		const char *m = json_string_value(json_object_get(err, "message"));
		if (o->json) {
			char *t = json_dumps(err, JSON_INDENT(2));
			fprintf(stderr, "%s\n", t ? t : "");
			free(t);
		}
		if (code == TALLY_CTL_E_REFUSED || code == TALLY_CTL_E_BUSY) {
			fprintf(stderr, "tallyctl: cannot reach the appliance: %s: %s\n", o->socket,
				m ? m : "refused");
			json_decref(err);
			return EX_UNREACHABLE;
		}
		fprintf(stderr, "tallyctl: %s: %s\n", method, m ? m : "error");
		json_decref(err);
		return EX_APPLIANCE;
	}
	return EX_OK;
}

/* The entries of a {reason: n} object that are not 0. */
static json_t *nonzero(const json_t *o)
{
	json_t *out = json_object();
	const char *k;
	json_t *v;

	json_object_foreach((json_t *)o, k, v)
		if (json_integer_value(v))
			json_object_set(out, k, v);
	return out;
}

/* stats in human form: the per-core table keeps the columns an operator scans first
 * (--json has every counter). */
static json_t *stats_brief(const json_t *r)
{
	static const char *cols[] = { "core", "rx_pkts", "rx_bytes", "tx_pkts", "tx_bytes",
				      "pushes", "results", "resends", "duplicates", "late_pushes",
				      "drops", "frame_drops" };
	json_t *out = json_deep_copy(r), *cores = json_array();
	size_t i;
	const json_t *c;

	json_array_foreach(json_object_get(r, "cores"), i, c) {
		json_t *row = json_object();
		for (size_t k = 0; k < sizeof(cols) / sizeof(cols[0]); k++) {
			json_t *v = json_object_get(c, cols[k]);
			if (json_is_object(v)) /* every reason is counted; the table shows seen ones */
				json_object_set_new(row, cols[k], nonzero(v));
			else if (v)
				json_object_set(row, cols[k], v);
		}
		json_array_append_new(cores, row);
	}
	json_object_set_new(out, "cores", cores);
	return out;
}

static void print_result(const struct opts *o, const json_t *r)
{
	if (!o->json && json_is_array(json_object_get(r, "cores")) &&
	    json_object_get(r, "totals")) {
		json_t *b = stats_brief(r);
		ctl_render(stdout, b);
		json_decref(b);
	} else if (o->json) {
		char *t = json_dumps(r, JSON_INDENT(2) | JSON_ENCODE_ANY);
		printf("%s\n", t ? t : "null");
		free(t);
	} else {
		ctl_render(stdout, r);
	}
	fflush(stdout);
}

static int write_config(const char *path, const json_t *cfg)
{
	char tmp[4096];
	FILE *f;

	if (!path) {
		char *t = json_dumps(cfg, JSON_INDENT(2));
		printf("%s\n", t ? t : "{}");
		free(t);
		return EX_OK;
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
	f = fopen(tmp, "w");
	if (!f || json_dumpf(cfg, f, JSON_INDENT(2)) || fputc('\n', f) == EOF || fclose(f)) {
		fprintf(stderr, "tallyctl config-save: cannot write %s: %s\n", path,
			strerror(errno));
		unlink(tmp);
		return EX_APPLIANCE;
	}
	chmod(tmp, 0640);
	if (rename(tmp, path)) {
		fprintf(stderr, "tallyctl config-save: cannot write %s: %s\n", path,
			strerror(errno));
		unlink(tmp);
		return EX_APPLIANCE;
	}
	fprintf(stderr, "configuration saved to %s (%zu calls)\n", path,
		json_array_size(json_object_get(cfg, "calls")));
	return EX_OK;
}

static void print_rates(const json_t *prev, const json_t *cur, double secs)
{
	static const char *keys[] = { "rx_pkts", "rx_bytes", "tx_pkts", "tx_bytes", "pushes",
				      "results" };
	json_t *row = json_object();

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		json_t *a = json_object_get(prev, keys[i]), *b = json_object_get(cur, keys[i]);
		char name[48];
		if (!json_is_integer(a) || !json_is_integer(b))
			continue;
		double d = (double)(json_integer_value(b) - json_integer_value(a)) / secs;
		int bytes = strstr(keys[i], "_bytes") != NULL;
		snprintf(name, sizeof(name), "%.*s_%s", (int)(strchr(keys[i], '_') ?
				(size_t)(strchr(keys[i], '_') - keys[i]) : strlen(keys[i])), keys[i],
			 bytes ? "bps" : "pps");
		if (!strcmp(keys[i], "pushes") || !strcmp(keys[i], "results"))
			snprintf(name, sizeof(name), "%s_pps", keys[i]);
		json_object_set_new(row, name, json_real(bytes ? d * 8 : d));
	}
	printf("rates over the last %.1f s:\n", secs);
	ctl_render(stdout, row);
	json_decref(row);
}

static int cmd_stats_watch(const struct opts *o, const json_t *params, unsigned secs,
			   unsigned count)
{
	json_t *prev = NULL;
	struct timespec t0, t1;

	for (unsigned n = 0; !count || n < count; n++) {
		json_t *r;
		int rc;
		if (n) {
			struct timespec d = { secs, 0 };
			while (nanosleep(&d, &d) && errno == EINTR)
				;
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		rc = do_call(o, "stats_get", params, &r);
		if (rc) {
			json_decref(prev);
			return rc;
		}
		if (!o->json) {
			time_t now = time(NULL);
			char ts[32];
			strftime(ts, sizeof(ts), "%Y-%m-%d %H:%M:%S", localtime(&now));
			printf("--- %s ---\n", ts);
		}
		print_result(o, r);
		if (prev && !o->json)
			print_rates(json_object_get(prev, "totals"), json_object_get(r, "totals"),
				    (double)(t1.tv_sec - t0.tv_sec) +
				    (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
		fflush(stdout);
		json_decref(prev);
		prev = r;
		t0 = t1;
	}
	json_decref(prev);
	return EX_OK;
}

int main(int argc, char **argv)
{
	struct opts o = { .socket = getenv("TALLY_CTL_SOCKET"), .timeout_ms = 10000 };
	const struct tally_ctl_method *m;
	json_t *params = NULL, *cli = NULL, *r = NULL;
	int i, rc = EX_USAGE;

	if (!o.socket || !*o.socket)
		o.socket = TALLY_CTL_DEFAULT_SOCKET;
	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "--json")) {
			o.json = 1;
		} else if (!strcmp(argv[i], "--socket") && i + 1 < argc) {
			o.socket = argv[++i];
		} else if (!strncmp(argv[i], "--socket=", 9)) {
			o.socket = argv[i] + 9;
		} else if (!strcmp(argv[i], "--timeout") && i + 1 < argc) {
			char *end;
			long t = strtol(argv[++i], &end, 10);
			if (*end || t <= 0 || t > 3600000) {
				fprintf(stderr, "tallyctl: --timeout: '%s' is not 1..3600000 ms\n",
					argv[i]);
				return EX_USAGE;
			}
			o.timeout_ms = (int)t;
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage_main(stdout);
			return EX_OK;
		} else {
			fprintf(stderr, "tallyctl: unknown option '%s'\n", argv[i]);
			usage_main(stderr);
			return EX_USAGE;
		}
	}
	if (i == argc) {
		fprintf(stderr, "tallyctl: no command given\n");
		usage_main(stderr);
		return EX_USAGE;
	}
	if (!strcmp(argv[i], "help")) {
		if (i + 1 == argc) {
			usage_main(stdout);
			return EX_OK;
		}
		m = tally_ctl_method_by_cmd(argv[i + 1]);
		if (!m) {
			fprintf(stderr, "tallyctl: unknown command '%s'\n", argv[i + 1]);
			return EX_USAGE;
		}
		usage_cmd(stdout, m);
		return EX_OK;
	}
	m = tally_ctl_method_by_cmd(argv[i]);
	if (!m) {
		fprintf(stderr, "tallyctl: unknown command '%s' (tallyctl --help lists them)\n",
			argv[i]);
		return EX_USAGE;
	}
	params = json_object();
	cli = json_object();
	if (parse_cmd_args(m, argc - i - 1, argv + i + 1, params, cli))
		goto out;
	if (m->id == TALLY_CTL_M_STATS_GET && json_object_get(cli, "watch")) {
		rc = cmd_stats_watch(&o, params,
				     (unsigned)json_integer_value(json_object_get(cli, "watch")),
				     (unsigned)json_integer_value(json_object_get(cli, "count")));
		goto out;
	}
	rc = do_call(&o, m->name, params, &r);
	if (rc)
		goto out;
	if (m->id == TALLY_CTL_M_CONFIG_SAVE && !o.json)
		rc = write_config(json_string_value(json_object_get(cli, "file")), r);
	else if (m->id == TALLY_CTL_M_CONFIG_SAVE && json_object_get(cli, "file"))
		rc = write_config(json_string_value(json_object_get(cli, "file")), r);
	else
		print_result(&o, r);
out:
	json_decref(r);
	json_decref(params);
	json_decref(cli);
	return rc;
}
