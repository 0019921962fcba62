/* SPDX-License-Identifier: Apache-2.0
 * perf_gen_ctl.c — the appliance's lcore counters around a trial (perf_gen_ctl.h).
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "perf_gen_ctl.h"
#include "tally_ctl.h"

static uint64_t gc_u64(const json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	return json_is_integer(v) ? (uint64_t)json_integer_value(v) : 0;
}

int gc_snap(const char *path, struct gc_snap *s, char *err, size_t errlen)
{
	json_t *res = NULL, *e = NULL, *cores, *tot, *c;
	size_t i;
	int fd = tally_ctl_connect(path, err, errlen), rc;

	memset(s, 0, sizeof(*s));
	if (fd < 0)
		return fd;
	rc = tally_ctl_call(fd, "stats_get", NULL, 2000, &res, &e);
	close(fd);
	if (rc) {
		snprintf(err, errlen, "stats_get on %s: %s", path, strerror(-rc));
		return rc;
	}
	if (e || !json_is_object(res)) {
		snprintf(err, errlen, "stats_get on %s: an error answer", path);
		rc = -EPROTO;
		goto out;
	}
	cores = json_object_get(res, "cores");
	json_array_foreach(cores, i, c) {
		if (s->n == GC_MAX_CORES)
			break;
		s->loops[s->n] = gc_u64(c, "loops");
		s->busy[s->n++] = gc_u64(c, "busy_loops");
	}
	tot = json_object_get(res, "totals");
	s->rx_pkts = gc_u64(tot, "rx_pkts");
	s->tx_pkts = gc_u64(tot, "tx_pkts");
	s->engine_rejects = gc_u64(tot, "engine_rejects");
out:
	json_decref(res);
	json_decref(e);
	return rc;
}

void gc_print(FILE *f, const char *prefix, const struct gc_snap *a, const struct gc_snap *b)
{
	double top = 0;

	for (unsigned i = 0; i < b->n && i < a->n; i++) {
		uint64_t l = b->loops[i] - a->loops[i];
		double u = l ? (double)(b->busy[i] - a->busy[i]) / (double)l : 0;

		top = u > top ? u : top;
	}
	fprintf(f, "\"%sdut_busy\":%.4f,\"%sdut_lcores\":[", prefix, top, prefix);
	for (unsigned i = 0; i < b->n && i < a->n; i++) {
		uint64_t l = b->loops[i] - a->loops[i], k = b->busy[i] - a->busy[i];

		fprintf(f, "%s{\"core\":%u,\"loops\":%llu,\"busy_loops\":%llu,\"busy\":%.4f}",
			i ? "," : "", i, (unsigned long long)l, (unsigned long long)k,
			l ? (double)k / (double)l : 0.0);
	}
	fprintf(f, "],\"%sdut_rx_pkts\":%llu,\"%sdut_tx_pkts\":%llu,\"%sdut_engine_rejects\":%llu,",
		prefix, (unsigned long long)(b->rx_pkts - a->rx_pkts),
		prefix, (unsigned long long)(b->tx_pkts - a->tx_pkts),
		prefix, (unsigned long long)(b->engine_rejects - a->engine_rejects));
}
