/* SPDX-License-Identifier: Apache-2.0
 * aopt_args.c — a config file and a command line into settings (tally_aopt_set). Settings
 * apply in order: flags after --config override the file.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tally_aopt.h"

static int args_err(char *err, size_t el, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int args_err(char *err, size_t el, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, el, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static char *args_trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	size_t n = strlen(s);
	while (n && isspace((unsigned char)s[n - 1]))
		s[--n] = '\0';
	return s;
}

/* One line of a config file (comment and blank lines are fine): 0 or -EINVAL with e2. */
static int args_line(const struct tally_aopt_app *a, void *conf, char *line, char *e2,
		     size_t l2)
{
	char *hash = strchr(line, '#'), *eq, *val = NULL, *s;

	if (hash)
		*hash = '\0';
	s = args_trim(line);
	if (!*s)
		return 0;
	if ((eq = strchr(s, '='))) {
		*eq = '\0';
		val = args_trim(eq + 1);
	}
	s = args_trim(s);
	if (!strcmp(s, "config"))
		return args_err(e2, l2, "a config file cannot include another");
	return tally_aopt_set(a, conf, s, val, e2, l2);
}

int tally_aopt_file(const struct tally_aopt_app *a, void *conf, const char *path, char *err,
		    size_t el)
{
	char line[1200], e2[512];
	unsigned lineno = 0;
	FILE *f = fopen(path, "r");
	int rc = 0;

	if (!f) {
		rc = -errno;
		snprintf(err, el, "config file %s: %s", path, strerror(errno));
		return rc;
	}
	while (!rc && fgets(line, sizeof(line), f)) {
		lineno++;
		if (!strchr(line, '\n') && !feof(f))
			rc = args_err(e2, sizeof(e2), "line longer than %zu characters",
				      sizeof(line) - 2);
		else
			rc = args_line(a, conf, line, e2, sizeof(e2));
		if (rc)
			snprintf(err, el, "%s:%u: %s", path, lineno, e2);
	}
	fclose(f);
	return rc;
}

/* "--name[=value]" → name; a value from argv when the option takes one. */
static int args_one(const struct tally_aopt_app *a, void *conf, int argc, char **argv, int *i,
		    char *err, size_t el)
{
	const char *arg = argv[*i], *eq, *val = NULL;
	char name[64];

	if (!strcmp(arg, "-h"))
		arg = "--help";
	if (strncmp(arg, "--", 2) || !arg[2])
		return args_err(err, el, "unexpected argument '%s' (settings are --name value%s)",
				arg, a->rest ? "; EAL arguments go after --" : "");
	eq = strchr(arg + 2, '=');
	size_t nlen = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
	if (nlen >= sizeof(name))
		return args_err(err, el, "unknown setting '%s'", arg);
	memcpy(name, arg + 2, nlen);
	name[nlen] = '\0';
	const struct tally_aopt *o = tally_aopt_find(a->app, name);
	if (!o && strcmp(name, "config")) /* unknown: say so before looking for a value */
		return tally_aopt_set(a, conf, name, NULL, err, el);
	if (eq) {
		val = eq + 1;
	} else if (!o || !o->is_switch) {
		if (*i + 1 >= argc)
			return args_err(err, el, "'--%s' needs a value", name);
		val = argv[++*i];
	}
	if (strcmp(name, "config"))
		return tally_aopt_set(a, conf, name, val, err, el);
	return tally_aopt_file(a, conf, val, err, el);
}

int tally_aopt_args(const struct tally_aopt_app *a, void *conf, int argc, char **argv,
		    char *err, size_t el)
{
	for (int i = 1; i < argc; i++) {
		int rc;

		if (!strcmp(argv[i], "--")) {
			if (!a->rest)
				return args_err(err, el, "unexpected argument '--'");
			return a->rest(conf, argc - i - 1, argv + i + 1, err, el);
		}
		if ((rc = args_one(a, conf, argc, argv, &i, err, el)))
			return rc;
	}
	return 0;
}
