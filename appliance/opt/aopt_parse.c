/* SPDX-License-Identifier: Apache-2.0
 * aopt_parse.c — values, settings, config files and command lines, all from the option
 * table (tally_aopt.h). Every bad value gets a sentence naming the option and what it
 * takes (the range, the choices).
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tally_actl.h"
#include "aopt_int.h"
#include "tally_aopt.h"

static int aopt_msg(char *err, size_t el, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int aopt_msg(char *err, size_t el, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, el, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

int tally_aopt_err(char *err, size_t el, const char *n, const char *v, const char *fmt, ...)
{
	va_list ap;
	int val = v && *v;
	int k = snprintf(err, el, "'%s%s%s': ", n, val ? " " : "", val ? v : "");

	if (k < 0 || (size_t)k >= el)
		return -EINVAL;
	va_start(ap, fmt);
	vsnprintf(err + k, el - (size_t)k, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

int tally_aopt_parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	switch (toupper((unsigned char)*end)) {
	case '\0': break;
	case 'K': shift = 10; end++; break;
	case 'M': shift = 20; end++; break;
	case 'G': shift = 30; end++; break;
	default: return -EINVAL;
	}
	if (shift && (*end == 'i' || *end == 'B'))
		end += (*end == 'i' && end[1] == 'B') ? 2 : 1;
	if (*end || (shift && v > (ULLONG_MAX >> shift)))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

/* Decimal, or hex after 0x. */
static int aopt_number(const char *s, unsigned long long *out)
{
	char *end;
	int hex = s && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');

	if (!s || !isdigit((unsigned char)*s) || (hex && !isxdigit((unsigned char)s[2])))
		return -EINVAL;
	errno = 0;
	*out = strtoull(hex ? s + 2 : s, &end, hex ? 16 : 10);
	return errno || *end ? -EINVAL : 0;
}

int tally_aopt_uint(const struct tally_aopt *o, const char *n, const char *v,
		    unsigned long long *out, char *err, size_t el)
{
	if (!aopt_number(v, out) && *out >= o->min && *out <= o->max)
		return 0;
	if (!o->what)
		return tally_aopt_err(err, el, n, v, "a whole number in %llu..%llu", o->min,
				      o->max);
	return tally_aopt_err(err, el, n, v, "%s%smust be a whole number in %llu..%llu",
			      o->what, *o->what ? " " : "", o->min, o->max);
}

static int aopt_bool(const char *s, int *out)
{
	static const char *const on[] = { "on", "yes", "true", "1" };
	static const char *const off[] = { "off", "no", "false", "0" };

	for (int i = 0; i < 4; i++) {
		if (!s || !strcmp(s, on[i])) {
			*out = 1;
			return 0;
		}
		if (!strcmp(s, off[i])) {
			*out = 0;
			return 0;
		}
	}
	return -EINVAL;
}

/* The index of v among "a|b/c|d" (b and c: one choice spelt two ways), or -1. */
static int aopt_choice(const char *choices, const char *v)
{
	size_t n = v ? strlen(v) : 0;
	int idx = 0;

	for (const char *p = choices; v && *p; idx++) {
		size_t len = strcspn(p, "|");
		for (const char *q = p; q < p + len;) {
			size_t w = strcspn(q, "/|");
			if (w == n && !strncmp(q, v, n))
				return idx;
			q += w + (q[w] == '/');
		}
		p += len + (p[len] == '|');
	}
	return -1;
}

/* "a, b or c" from "a|b/b2|c". */
static void aopt_choice_list(const char *choices, char *buf, size_t len)
{
	size_t k = 0, n = 0;

	for (const char *p = choices; *p; p += strcspn(p, "|") + (p[strcspn(p, "|")] == '|'))
		n++;
	buf[0] = '\0';
	size_t i = 0;
	for (const char *p = choices; *p && k < len; i++) {
		size_t w = strcspn(p, "|/");
		k += (size_t)snprintf(buf + k, len - k, "%s%.*s", !i ? "" : i + 1 == n ? " or " : ", ",
				      (int)w, p);
		p += strcspn(p, "|");
		p += *p == '|';
	}
}

static void aopt_store(void *p, size_t size, unsigned long long v)
{
	if (size == 1)
		*(uint8_t *)p = (uint8_t)v;
	else if (size == 2)
		*(uint16_t *)p = (uint16_t)v;
	else if (size == 4)
		*(uint32_t *)p = (uint32_t)v;
	else
		*(uint64_t *)p = v;
}

static int aopt_enum(const struct tally_aopt *o, const struct tally_aopt_field *f, void *p,
		     const char *n, const char *v, char *err, size_t el)
{
	char list[160];
	unsigned long long u;
	int idx = aopt_choice(o->choices, v), nch = (int)strlen(o->choices) > 0;

	for (const char *c = o->choices; *c; c++)
		nch += *c == '|';
	/* a number names the stored value itself (tallyd's log levels 1..8) */
	if (idx < 0 && v && !aopt_number(v, &u) && u >= (unsigned long long)f->bias &&
	    u < (unsigned long long)(nch + f->bias))
		idx = (int)u - f->bias;
	if (idx >= 0) {
		aopt_store(p, f->size, (unsigned long long)(idx + f->bias));
		return 0;
	}
	aopt_choice_list(o->choices, list, sizeof(list));
	return tally_aopt_err(err, el, n, v, "%s%ssay %s", o->what ? o->what : "",
			      o->what ? ": " : "", list);
}

/* One value into its field, by the row's type. */
static int aopt_value(const struct tally_aopt *o, const struct tally_aopt_field *f, void *p,
		      const char *n, const char *v, char *err, size_t el)
{
	unsigned long long u;
	uint64_t sz;

	switch (o->type) {
	case TALLY_AOPT_UINT:
		if (tally_aopt_uint(o, n, v, &u, err, el))
			return -EINVAL;
		aopt_store(p, f->size, u);
		return 0;
	case TALLY_AOPT_SIZE:
		if (tally_aopt_parse_size(v, &sz) || sz < o->min || sz > o->max)
			return tally_aopt_err(err, el, n, v, "expected a size like 512M or 2G "
					      "(%llu..%llu bytes)", o->min, o->max);
		aopt_store(p, f->size, sz);
		return 0;
	case TALLY_AOPT_BOOL:
		return aopt_bool(v, (int *)p) ? tally_aopt_err(err, el, n, v, "say on or off") : 0;
	case TALLY_AOPT_STRING:
		if (!v || !*v || strlen(v) >= f->size)
			return aopt_msg(err, el, "'%s': %s of 1..%zu characters", n,
					o->what ? o->what : "a value", f->size - 1);
		snprintf((char *)p, f->size, "%s", v);
		return 0;
	case TALLY_AOPT_ENUM:
		return aopt_enum(o, f, p, n, v, err, el);
	case TALLY_AOPT_GUARD:
		return tally_actl_guard_set(p, o->name, v, err, el);
	case TALLY_AOPT_RDMA:
		return tally_actl_verbs_set(p, o->name, v, err, el);
	case TALLY_AOPT_CUSTOM:
		break;
	}
	return aopt_msg(err, el, "'%s': no parser", n);
}

int tally_aopt_set(const struct tally_aopt_app *a, void *conf, const char *n, const char *v,
		   char *err, size_t el)
{
	const struct tally_aopt *o = tally_aopt_find(a->app, n);
	const struct tally_aopt_field *f;
	struct tally_aopt tmp;

	if (o)
		o = tally_aopt_row(o, &tmp);
	if (!o)
		return aopt_msg(err, el, "unknown setting '%s' (%s --help lists them)", n,
				a->prog);
	if (o->type == TALLY_AOPT_CUSTOM)
		return a->set(conf, o, v, err, el);
	if (!v && o->type != TALLY_AOPT_BOOL && o->type != TALLY_AOPT_ENUM)
		return aopt_msg(err, el, "'%s' needs a value", n);
	if (!(f = aopt_field(a, o->id)))
		return aopt_msg(err, el, "'%s': %s has no such setting", n, a->prog);
	return aopt_value(o, f, (char *)conf + f->off, n, v, err, el);
}
