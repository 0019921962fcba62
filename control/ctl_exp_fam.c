/* SPDX-License-Identifier: Apache-2.0
 * ctl_exp_fam.c — the pieces of the exposition text: a growable buffer, metric families
 * (one HELP and TYPE line each, samples grouped under them whatever order they come in),
 * label escaping, names in base units.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_exp.h"

void ctl_exp_buf_printf(struct ctl_exp_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->oom)
		return;
	va_start(ap, fmt);
	n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->oom = 1;
		return;
	}
	if (!b->p || b->len + (size_t)n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + (size_t)n + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->oom = 1;
			return;
		}
		b->p = p;
		b->cap = cap;
		va_start(ap, fmt);
		vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
	}
	b->len += (size_t)n;
}

void ctl_exp_buf_free(struct ctl_exp_buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

void ctl_exp_snap_clear(struct ctl_exp_snap *s)
{
	json_decref(s->status);
	json_decref(s->stats);
	json_decref(s->jobs);
	json_decref(s->workers);
	json_decref(s->stuck);
	memset(s, 0, sizeof(*s));
}

/* [a-zA-Z0-9_] kept, anything else '_', lower case. */
void ctl_exp_sanitize(char *s)
{
	for (; *s; s++) {
		char c = *s;
		if (c >= 'A' && c <= 'Z')
			*s = (char)(c - 'A' + 'a');
		else if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
			*s = '_';
	}
}

static int ends_with(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);
	return a >= b && !strcmp(s + a - b, suf);
}

/* A JSON field name in base units: *_ms → *_seconds (scale 1e-3), *_us → 1e-6,
 * *_s → *_seconds. Returns the scale. */
double ctl_exp_base_unit(const char *field, char *out, size_t len)
{
	static const struct { const char *suf; double scale; } u[] = {
		{ "_ms", 1e-3 }, { "_us", 1e-6 }, { "_ns", 1e-9 }, { "_s", 1.0 } };

	for (size_t i = 0; i < sizeof(u) / sizeof(u[0]); i++)
		if (ends_with(field, u[i].suf)) {
			snprintf(out, len, "%.*s_seconds", (int)(strlen(field) - strlen(u[i].suf)),
				 field);
			ctl_exp_sanitize(out);
			return u[i].scale;
		}
	snprintf(out, len, "%s", field);
	ctl_exp_sanitize(out);
	return 1.0;
}

static struct ctl_exp_fam *fam_get(struct ctl_exp_out *o, const char *name, const char *type, const char *help)
{
	for (size_t i = 0; i < o->n; i++)
		if (!strcmp(o->fam[i].name, name))
			return strcmp(o->fam[i].type, type) ? NULL : &o->fam[i];
	if (o->n == o->cap) {
		size_t cap = o->cap ? o->cap * 2 : 64;
		struct ctl_exp_fam *f = realloc(o->fam, cap * sizeof(*f));
		if (!f) {
			o->oom = 1;
			return NULL;
		}
		o->fam = f;
		o->cap = cap;
	}
	struct ctl_exp_fam *f = &o->fam[o->n++];
	memset(f, 0, sizeof(*f));
	snprintf(f->name, sizeof(f->name), "%s", name);
	f->type = type;
	snprintf(f->help, sizeof(f->help), "%s", help);
	return f;
}

/* key="value" with the value escaped, appended to lb (",..." when lb is not empty). */
void ctl_exp_label(char *lb, size_t len, const char *key, const char *val)
{
	size_t n = strlen(lb);

	n += (size_t)snprintf(lb + n, n < len ? len - n : 0, "%s%s=\"", n ? "," : "", key);
	for (; *val && n + 3 < len; val++) {
		if (*val == '\\' || *val == '"')
			lb[n++] = '\\';
		if (*val == '\n') {
			lb[n++] = '\\';
			lb[n++] = 'n';
			continue;
		}
		lb[n++] = *val;
	}
	if (n + 2 <= len) {
		lb[n++] = '"';
		lb[n] = '\0';
	}
}

void ctl_exp_label_int(char *lb, size_t len, const char *key, const json_t *v)
{
	char b[32];
	snprintf(b, sizeof(b), "%lld", (long long)json_integer_value(v));
	ctl_exp_label(lb, len, key, b);
}

/* One sample of family name (created with type and help on first use). */
void ctl_exp_sample(struct ctl_exp_out *o, const char *name, const char *type, const char *help,
		   const char *labels, double v)
{
	struct ctl_exp_fam *f = fam_get(o, name, type, help);

	if (!f)
		return;
	ctl_exp_buf_printf(&f->samples, "%s{%s%s%s} ", name, o->app, labels[0] ? "," : "", labels);
	if (isnan(v))
		ctl_exp_buf_printf(&f->samples, "NaN\n");
	else if (v == floor(v) && fabs(v) < 9.007199254740992e15)
		ctl_exp_buf_printf(&f->samples, "%.0f\n", v);
	else
		ctl_exp_buf_printf(&f->samples, "%.9g\n", v);
}

int ctl_exp_is_num(const json_t *v)
{
	return json_is_number(v) || json_is_boolean(v);
}

double ctl_exp_num(const json_t *v)
{
	return json_is_boolean(v) ? (json_is_true(v) ? 1.0 : 0.0) : json_number_value(v);
}


static void help_escape(struct ctl_exp_buf *b, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\')
			ctl_exp_buf_printf(b, "\\\\");
		else if (*s == '\n')
			ctl_exp_buf_printf(b, "\\n");
		else
			ctl_exp_buf_printf(b, "%c", *s);
	}
}

int ctl_exp_out_finish(struct ctl_exp_out *o, struct ctl_exp_buf *text)
{
	int oom = o->oom;

	for (size_t i = 0; i < o->n; i++) {
		struct ctl_exp_fam *f = &o->fam[i];
		ctl_exp_buf_printf(text, "# HELP %s ", f->name);
		help_escape(text, f->help);
		ctl_exp_buf_printf(text, "\n# TYPE %s %s\n", f->name, f->type);
		if (f->samples.p)
			ctl_exp_buf_printf(text, "%s", f->samples.p);
		oom |= f->samples.oom;
		ctl_exp_buf_free(&f->samples);
	}
	free(o->fam);
	memset(o, 0, sizeof(*o));
	return oom || text->oom ? -ENOMEM : 0;
}
