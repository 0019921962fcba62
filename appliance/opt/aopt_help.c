/* SPDX-License-Identifier: Apache-2.0
 * aopt_help.c — --help from the option table: an appliance's options in table order, each
 * with its placeholder and text (continuation lines indented), headings where a row has a
 * section, the appliance's default appended where the row asks for it.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "aopt_int.h"
#include "tally_aopt.h"

#define HELP_COL 24
#define HELP_WIDTH 66

void aopt_size_text(unsigned long long v, char *buf, size_t len)
{
	static const char sfx[] = "GMK";

	for (int i = 0; i < 3; i++) {
		unsigned shift = (unsigned)(30 - 10 * i);
		if (v && !(v & ((1ull << shift) - 1))) {
			snprintf(buf, len, "%llu%c", v >> shift, sfx[i]);
			return;
		}
	}
	snprintf(buf, len, "%llu", v);
}

/* The value of a UINT, SIZE, BOOL, STRING or ENUM field as text; 0, or -1 for others. */
int aopt_value_text(const struct tally_aopt *o, const struct tally_aopt_field *f,
		    const void *conf, char *buf, size_t len)
{
	const char *p = (const char *)conf + f->off;
	unsigned long long u = f->size == 1 ? *(const uint8_t *)p :
			       f->size == 2 ? *(const uint16_t *)p :
			       f->size == 4 ? *(const uint32_t *)p : *(const uint64_t *)p;

	if ((o->type == TALLY_AOPT_UINT || o->type == TALLY_AOPT_SIZE) && u < o->min)
		return -1; /* 0 below the range: not set, the appliance picks */
	switch (o->type) {
	case TALLY_AOPT_UINT: snprintf(buf, len, "%llu", u); return 0;
	case TALLY_AOPT_SIZE: aopt_size_text(u, buf, len); return 0;
	case TALLY_AOPT_BOOL: snprintf(buf, len, "%s", *(const int *)p ? "on" : "off"); return 0;
	case TALLY_AOPT_STRING: snprintf(buf, len, "%s", p); return 0;
	case TALLY_AOPT_ENUM: {
		int idx = (int)u - f->bias;
		const char *c = o->choices;
		for (int i = 0; i < idx && c; i++)
			c = (c = strchr(c, '|')) ? c + 1 : NULL;
		if (!c || idx < 0)
			return -1;
		snprintf(buf, len, "%.*s", (int)strcspn(c, "|/"), c);
		return 0;
	}
	default:
		return -1;
	}
}

/* The help text from column HELP_COL: its own lines, and lines longer than HELP_WIDTH
 * (a control parameter's help) broken between words; `def` after the last. */
static void help_text(const char *h, const char *def, FILE *f)
{
	size_t col = 0;

	while (*h) {
		size_t w = strcspn(h, " \n");
		if (col && col + 1 + w > HELP_WIDTH) {
			fprintf(f, "\n%*s", HELP_COL, "");
			col = 0;
		} else if (col) {
			fputc(' ', f);
			col++;
		}
		fprintf(f, "%.*s", (int)w, h);
		col += w;
		h += w;
		if (*h == '\n' && h[1]) {
			fprintf(f, "\n%*s", HELP_COL, "");
			col = 0;
		}
		if (*h)
			h++;
	}
	fputs(def, f);
}

static void help_row(const struct tally_aopt_app *a, const struct tally_aopt *o,
		     const void *defaults, FILE *f)
{
	const struct tally_aopt_field *fld = aopt_field(a, o->id);
	char flag[64], def[80] = "";
	int n = snprintf(flag, sizeof(flag), "--%s%s%s", o->name, o->arg ? " " : "",
			 o->arg ? o->arg : "");

	if (o->show_def && fld && !aopt_value_text(o, fld, defaults, def + 2, sizeof(def) - 4)) {
		memcpy(def, " (", 2);
		strcat(def, ")");
	}
	if (o->section)
		fprintf(f, "%s\n", o->section);
	fprintf(f, "  %s%*s", flag, n + 3 <= HELP_COL ? HELP_COL - 2 - n : 2, "");
	help_text(o->help, def, f);
	fputc('\n', f);
}

void tally_aopt_usage(const struct tally_aopt_app *a, const void *defaults, FILE *f)
{
	size_t n;
	const struct tally_aopt *t = tally_aopt_table(&n);

	fputs(a->usage, f);
	struct tally_aopt tmp;

	for (size_t i = 0; i < n; i++)
		if (t[i].apps & a->app)
			help_row(a, tally_aopt_row(&t[i], &tmp), defaults, f);
	if (a->usage_tail)
		fputs(a->usage_tail, f);
}
