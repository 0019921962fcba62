/* SPDX-License-Identifier: Apache-2.0
 * ctl_params.c — parameter validation against the schema (server side) and parsing of the
 * CLI text form (tallyctl). Every error names the field.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tally_ctl.h"

static int parse_u64_text(const char *s, uint64_t *out)
{
	char *end;

	if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
		return -EINVAL;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || *end)
		return -EINVAL;
	*out = v;
	return 0;
}

static int enum_has(const char *choices, const char *s)
{
	size_t n = strlen(s);
	const char *p = choices;

	while (p && *p) {
		const char *bar = strchr(p, '|');
		size_t len = bar ? (size_t)(bar - p) : strlen(p);
		if (len == n && strncmp(p, s, n) == 0)
			return 1;
		p = bar ? bar + 1 : NULL;
	}
	return 0;
}

static void type_help(const struct tally_ctl_param *p, char *buf, size_t len)
{
	switch (p->type) {
	case TALLY_CTL_T_UINT:
		snprintf(buf, len, "an integer in %" PRIu64 "..%" PRIu64, p->min, p->max);
		break;
	case TALLY_CTL_T_U64:
		snprintf(buf, len, "an unsigned 64-bit integer (number or decimal/0x string)");
		break;
	case TALLY_CTL_T_BOOL:
		snprintf(buf, len, "true or false");
		break;
	case TALLY_CTL_T_STRING:
		snprintf(buf, len, "a string");
		break;
	case TALLY_CTL_T_ENUM:
		snprintf(buf, len, "one of %s", p->choices);
		break;
	}
}

/* Checks one JSON value; returns a new normalised value or NULL. */
static json_t *check_value(const struct tally_ctl_param *p, const json_t *v)
{
	switch (p->type) {
	case TALLY_CTL_T_UINT:
		if (!json_is_integer(v) || json_integer_value(v) < 0)
			return NULL;
		if ((uint64_t)json_integer_value(v) < p->min ||
		    (uint64_t)json_integer_value(v) > p->max)
			return NULL;
		return json_integer(json_integer_value(v));
	case TALLY_CTL_T_U64: {
		uint64_t u;
		if (json_is_integer(v) && json_integer_value(v) >= 0)
			return json_integer(json_integer_value(v));
		if (!json_is_string(v) || parse_u64_text(json_string_value(v), &u))
			return NULL;
		if (u <= INT64_MAX)
			return json_integer((json_int_t)u);
		char buf[24];
		snprintf(buf, sizeof(buf), "0x%" PRIx64, u);
		return json_string(buf);
	}
	case TALLY_CTL_T_BOOL:
		return json_is_boolean(v) ? json_boolean(json_is_true(v)) : NULL;
	case TALLY_CTL_T_STRING:
		return json_is_string(v) ? json_string(json_string_value(v)) : NULL;
	case TALLY_CTL_T_ENUM:
		if (!json_is_string(v) || !enum_has(p->choices, json_string_value(v)))
			return NULL;
		return json_string(json_string_value(v));
	}
	return NULL;
}

json_t *tally_ctl_param_parse(const struct tally_ctl_param *p, const char *text, char *msg,
			      size_t msglen)
{
	json_t *raw = NULL, *v;
	uint64_t u;
	char th[96];

	switch (p->type) {
	case TALLY_CTL_T_UINT:
		if (parse_u64_text(text, &u) == 0 && u <= INT64_MAX)
			raw = json_integer((json_int_t)u);
		break;
	case TALLY_CTL_T_U64:
	case TALLY_CTL_T_STRING:
	case TALLY_CTL_T_ENUM:
		raw = json_string(text);
		break;
	case TALLY_CTL_T_BOOL:
		if (!strcasecmp(text, "true") || !strcasecmp(text, "yes") ||
		    !strcasecmp(text, "on") || !strcmp(text, "1"))
			raw = json_true();
		else if (!strcasecmp(text, "false") || !strcasecmp(text, "no") ||
			 !strcasecmp(text, "off") || !strcmp(text, "0"))
			raw = json_false();
		break;
	}
	v = raw ? check_value(p, raw) : NULL;
	json_decref(raw);
	if (!v) {
		type_help(p, th, sizeof(th));
		snprintf(msg, msglen, "%s: '%s' is not %s", p->name, text, th);
	}
	return v;
}

json_t *tally_ctl_params_check(const struct tally_ctl_method *m, const json_t *params,
			       char *msg, size_t msglen)
{
	json_t *out = json_object();
	const char *name;
	json_t *v;
	char th[96];
	int given = 0;

	if (!out) {
		snprintf(msg, msglen, "out of memory");
		return NULL;
	}
	if (params && !json_is_null(params) && !json_is_object(params)) {
		snprintf(msg, msglen, "params must be an object (named parameters)");
		goto fail;
	}
	if (params && json_is_object(params)) {
		json_object_foreach((json_t *)params, name, v) {
			const struct tally_ctl_param *p = tally_ctl_param_find(m, name);
			json_t *nv;
			if (!p || p->cli_only) {
				snprintf(msg, msglen, "unknown parameter '%s' for %s", name, m->name);
				goto fail;
			}
			nv = check_value(p, v);
			if (!nv) {
				type_help(p, th, sizeof(th));
				snprintf(msg, msglen, "parameter '%s' must be %s", name, th);
				goto fail;
			}
			json_object_set_new(out, name, nv);
			given += p->one_of;
		}
	}
	for (unsigned i = 0; i < m->nparams; i++) {
		const struct tally_ctl_param *p = &m->params[i];
		if (p->cli_only || json_object_get(out, p->name))
			continue;
		if (p->required) {
			snprintf(msg, msglen, "missing required parameter '%s' for %s", p->name,
				 m->name);
			goto fail;
		}
		if (p->def) {
			json_t *d = tally_ctl_param_parse(p, p->def, msg, msglen);
			if (!d)
				goto fail;
			json_object_set_new(out, p->name, d);
		}
	}
	if (m->need_one_of && !given) {
		size_t off = (size_t)snprintf(msg, msglen, "%s needs at least one of", m->name);
		for (unsigned i = 0; i < m->nparams && off < msglen; i++)
			if (m->params[i].one_of)
				off += (size_t)snprintf(msg + off, msglen - off, " '%s'",
							m->params[i].name);
		goto fail;
	}
	return out;
fail:
	json_decref(out);
	return NULL;
}

int tally_ctl_get_u64(const json_t *params, const char *name, uint64_t *out)
{
	const json_t *v = json_object_get(params, name);

	if (!v)
		return -ENOENT;
	if (json_is_integer(v) && json_integer_value(v) >= 0) {
		*out = (uint64_t)json_integer_value(v);
		return 0;
	}
	if (json_is_string(v))
		return parse_u64_text(json_string_value(v), out);
	return -EINVAL;
}
