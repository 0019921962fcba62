/* SPDX-License-Identifier: Apache-2.0
 * ctl_render.c — tallyctl's human output: aligned tables with units, derived from the JSON
 * result. Units follow the key names: *_bytes (IEC), *_bps (bit/s), *_pps, *_ms, *_us, *_s.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_render.h"

#define CELL 64

static void cell(const char *key, const json_t *v, char *buf, size_t len);

static int ends_with(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);

	return a >= b && strcmp(s + a - b, suf) == 0;
}

static void si(char *buf, size_t len, double v, const char *unit, int iec)
{
	static const char *pre[] = { "", "k", "M", "G", "T", "P" };
	static const char *ipre[] = { "", "Ki", "Mi", "Gi", "Ti", "Pi" };
	double base = iec ? 1024.0 : 1000.0;
	int i = 0;

	while (v >= base && i < 5) {
		v /= base;
		i++;
	}
	if (i == 0)
		snprintf(buf, len, "%.0f %s", v, unit);
	else
		snprintf(buf, len, "%.2f %s%s", v, iec ? ipre[i] : pre[i], unit);
}

static void scalar(const char *key, const json_t *v, char *buf, size_t len)
{
	double d;

	if (json_is_string(v)) {
		snprintf(buf, len, "%s", json_string_value(v));
		return;
	}
	if (json_is_true(v) || json_is_false(v)) {
		snprintf(buf, len, "%s", json_is_true(v) ? "yes" : "no");
		return;
	}
	if (json_is_null(v)) {
		snprintf(buf, len, "-");
		return;
	}
	if (!json_is_number(v)) {
		snprintf(buf, len, "?");
		return;
	}
	d = json_number_value(v);
	if (ends_with(key, "_bytes"))
		si(buf, len, d, "B", 1);
	else if (ends_with(key, "_bps"))
		si(buf, len, d, "bit/s", 0);
	else if (ends_with(key, "_pps"))
		si(buf, len, d, "pkt/s", 0);
	else if (ends_with(key, "_ms"))
		snprintf(buf, len, "%.0f ms", d);
	else if (ends_with(key, "_us"))
		snprintf(buf, len, "%.0f us", d);
	else if (ends_with(key, "_mbps"))
		snprintf(buf, len, "%.0f Mbit/s", d);
	else if (strcmp(key, "uptime_s") == 0) {
		unsigned long s = (unsigned long)d;
		snprintf(buf, len, "%lud %02lu:%02lu:%02lu", s / 86400, s / 3600 % 24, s / 60 % 60,
			 s % 60);
	} else if (ends_with(key, "_s"))
		snprintf(buf, len, "%.3g s", d);
	else if (json_is_integer(v))
		snprintf(buf, len, "%lld", (long long)json_integer_value(v));
	else
		snprintf(buf, len, "%.4g", d);
}

/* One table cell: scalars with units, lists joined by commas, objects as k=v (non-zero). */
static void cell(const char *key, const json_t *v, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	if (json_is_array(v)) {
		size_t i;
		const json_t *x;
		json_array_foreach(v, i, x) {
			char one[CELL];
			if (json_is_object(x))
				cell(key, x, one, sizeof(one)); /* k=v ... */
			else
				scalar(key, x, one, sizeof(one));
			off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? (json_is_object(x) ?
						"; " : ",") : "", one);
			if (off >= len - 4) {
				snprintf(buf + len - 4, 4, "...");
				return;
			}
		}
		if (!off)
			snprintf(buf, len, "-");
	} else if (json_is_object(v)) {
		const char *k;
		const json_t *x;
		json_object_foreach((json_t *)v, k, x) {
			char one[32];
			if (json_is_integer(x) && json_integer_value(x) == 0)
				continue;
			scalar(k, x, one, sizeof(one));
			off += (size_t)snprintf(buf + off, len - off, "%s%s=%s", off ? " " : "", k,
						one);
			if (off >= len - 4) {
				snprintf(buf + len - 4, 4, "...");
				return;
			}
		}
		if (!off)
			snprintf(buf, len, "-");
	} else {
		scalar(key, v, buf, len);
	}
}

static int is_table(const json_t *v)
{
	return json_is_array(v) && json_array_size(v) > 0 && json_is_object(json_array_get(v, 0));
}

/* A section of its own: a table or a non-empty object (empty ones print as "-"). */
static int is_section(const json_t *v)
{
	return is_table(v) || (json_is_object(v) && json_object_size(v) > 0);
}

void ctl_render_table(FILE *f, const json_t *rows, const char *indent)
{
	const char *cols[32];
	size_t ncols = 0, w[32], i;
	const json_t *row, *v;
	const char *k;
	char buf[CELL];

	json_array_foreach(rows, i, row) {
		json_object_foreach((json_t *)row, k, v) {
			size_t c;
			for (c = 0; c < ncols && strcmp(cols[c], k); c++)
				;
			if (c == ncols && ncols < 32) {
				cols[ncols] = k;
				w[ncols++] = strlen(k);
			}
		}
	}
	json_array_foreach(rows, i, row) {
		for (size_t c = 0; c < ncols; c++) {
			v = json_object_get(row, cols[c]);
			cell(cols[c], v ? v : json_null(), buf, sizeof(buf));
			if (strlen(buf) > w[c])
				w[c] = strlen(buf);
		}
	}
	fputs(indent, f);
	for (size_t c = 0; c < ncols; c++)
		fprintf(f, "%-*s%s", c + 1 < ncols ? (int)w[c] : 0, cols[c],
			c + 1 < ncols ? "  " : "\n");
	json_array_foreach(rows, i, row) {
		fputs(indent, f);
		for (size_t c = 0; c < ncols; c++) {
			v = json_object_get(row, cols[c]);
			cell(cols[c], v ? v : json_null(), buf, sizeof(buf));
			/* numbers right-aligned, text left-aligned */
			if (v && json_is_number(v))
				fprintf(f, "%*s%s", (int)w[c], buf, c + 1 < ncols ? "  " : "\n");
			else
				fprintf(f, "%-*s%s", c + 1 < ncols ? (int)w[c] : 0, buf,
					c + 1 < ncols ? "  " : "\n");
		}
	}
}

static void render_object(FILE *f, const json_t *obj, int depth)
{
	const char *k;
	const json_t *v;
	size_t w = 0;
	char buf[CELL * 4], indent[16];

	snprintf(indent, sizeof(indent), "%*s", depth * 2, "");
	json_object_foreach((json_t *)obj, k, v)
		if (!is_section(v) && strlen(k) > w)
			w = strlen(k);
	/* scalars first, aligned; then nested objects and tables as sections */
	json_object_foreach((json_t *)obj, k, v) {
		if (is_section(v))
			continue;
		cell(k, v, buf, sizeof(buf));
		fprintf(f, "%s%-*s  %s\n", indent, (int)w, k, buf);
	}
	json_object_foreach((json_t *)obj, k, v) {
		if (json_is_object(v) && json_object_size(v) > 0) {
			fprintf(f, "%s%s:\n", indent, k);
			render_object(f, v, depth + 1);
		} else if (is_table(v)) {
			fprintf(f, "%s%s:\n", indent, k);
			char ind2[20];
			snprintf(ind2, sizeof(ind2), "%s  ", indent);
			ctl_render_table(f, v, ind2);
		}
	}
}

void ctl_render(FILE *f, const json_t *result)
{
	char buf[CELL];

	if (is_table(result))
		ctl_render_table(f, result, "");
	else if (json_is_array(result) && json_array_size(result) == 0)
		fprintf(f, "(none)\n");
	else if (json_is_object(result))
		render_object(f, result, 0);
	else {
		cell("", result, buf, sizeof(buf));
		fprintf(f, "%s\n", buf);
	}
}
