/* SPDX-License-Identifier: Apache-2.0
 * aopt_save.c — --config-save: an appliance's settings as a config file, one `name = value`
 * line a setting in table order, that --config reads back to the same settings.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "aopt_int.h"
#include "tally_actl.h"
#include "tally_aopt.h"

static void save_cidr(FILE *f, const char *name, const struct tally_engine_cidr *c)
{
	char a[INET_ADDRSTRLEN];
	int len = 0;

	for (uint32_t m = ntohl(c->mask); m & 0x80000000u; m <<= 1)
		len++;
	inet_ntop(AF_INET, &c->net, a, sizeof(a));
	fprintf(f, "%s = %s/%d\n", name, a, len);
}

static void save_guard(FILE *f, const struct tally_actl_guard *g)
{
	char sz[32];

	for (uint32_t i = 0; i < g->nallow; i++)
		save_cidr(f, "allow", &g->allow[i]);
	if (g->admit_subnet.mask)
		save_cidr(f, "admit-subnet", &g->admit_subnet);
	if (g->admit_claims)
		fprintf(f, "admit-claims = %u\n", g->admit_claims);
	if (g->admit_timeout_ms)
		fprintf(f, "admit-timeout-ms = %u\n", g->admit_timeout_ms);
	if (g->quota_keys)
		fprintf(f, "quota-keys = %u\n", g->quota_keys);
	if (g->quota_bytes) {
		aopt_size_text(g->quota_bytes, sz, sizeof(sz));
		fprintf(f, "quota-bytes = %s\n", sz);
	}
	if (g->quota_ranks)
		fprintf(f, "quota-ranks = %u\n", g->quota_ranks);
	if (g->rejoin_timeout_ms)
		fprintf(f, "rejoin-timeout-ms = %u\n", g->rejoin_timeout_ms);
	fprintf(f, "ctl-idle-timeout-ms = %u\n", g->ctl_idle_timeout_ms);
}

static void save_rdma(FILE *f, const struct tally_actl_verbs *v)
{
	if (v->listen[0])
		fprintf(f, "rdma-listen = %s\n", v->listen);
	if (v->slots)
		fprintf(f, "rdma-slots = %u\n", v->slots);
	fprintf(f, "rdma-gid-index = %d\n", v->gid_index);
	if (v->max_conns)
		fprintf(f, "rdma-max-conns = %u\n", v->max_conns);
	fprintf(f, "rdma-auth = %s\n", v->auth_packet ? "packet" : "setup");
}

void tally_aopt_save(const struct tally_aopt_app *a, const void *conf, FILE *f)
{
	size_t n;
	const struct tally_aopt *t = tally_aopt_table(&n);
	int guard = 0, rdma = 0;
	char buf[600];

	fprintf(f, "# %s settings (%s --config-save)\n", a->prog, a->prog);
	if (a->save)
		a->save(f, conf);
	for (size_t i = 0; i < n; i++) {
		struct tally_aopt tmp;
		const struct tally_aopt *o = tally_aopt_row(&t[i], &tmp);
		const struct tally_aopt_field *fld = aopt_field(a, o->id);

		if (!(o->apps & a->app) || o->no_save || !fld)
			continue;
		if (o->type == TALLY_AOPT_GUARD && !guard++)
			save_guard(f, (const void *)((const char *)conf + fld->off));
		else if (o->type == TALLY_AOPT_RDMA && !rdma++)
			save_rdma(f, (const void *)((const char *)conf + fld->off));
		else if (!aopt_value_text(o, fld, conf, buf, sizeof(buf)) && buf[0])
			fprintf(f, "%s = %s\n", o->name, buf);
	}
}
