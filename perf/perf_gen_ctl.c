/* SPDX-License-Identifier: Apache-2.0
 * perf_gen_ctl.c — the appliance's lcore counters around a trial (perf_gen_ctl.h).
 */
#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "perf_gen_ctl.h"
#include "tally_ctl.h"

static uint64_t gc_u64(const json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	return json_is_integer(v) ? (uint64_t)json_integer_value(v) : 0;
}

/* utime + stime of pid's threads named rte-worker-* / lcore-worker-* (DPDK's lcores). */
static void gc_threads(int pid, struct gc_snap *s)
{
	char p[320], line[512];
	struct dirent *e;
	DIR *d;

	snprintf(p, sizeof(p), "/proc/%d/task", pid);
	d = opendir(p);
	if (!d)
		return;
	while ((e = readdir(d)) && s->nthreads < GC_MAX_CORES) {
		unsigned long long ut, st;
		char *c;
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "/proc/%d/task/%s/stat", pid, e->d_name);
		f = fopen(p, "r");
		if (!f)
			continue;
		c = fgets(line, sizeof(line), f) ? strrchr(line, ')') : NULL;
		fclose(f);
		/* comm is in parentheses; after it: state, then fields 4..13, utime, stime */
		if (!c || (!strstr(line, "(rte-worker") && !strstr(line, "(lcore-worker")) ||
		    sscanf(c + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
			   &st) != 2)
			continue;
		s->ticks[s->nthreads++] = ut + st;
	}
	closedir(d);
}

int gc_snap(const char *path, int pid, struct gc_snap *s, char *err, size_t errlen)
{
	struct timespec now;
	json_t *res = NULL, *e = NULL, *cores, *tot, *c;
	size_t i;
	int fd = tally_ctl_connect(path, err, errlen), rc;

	memset(s, 0, sizeof(*s));
	if (fd < 0)
		return fd;
	clock_gettime(CLOCK_MONOTONIC, &now);
	s->t = (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
	if (pid > 0)
		gc_threads(pid, s);
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
	fprintf(f, "\"%sdut_cpu\":[", prefix);
	for (unsigned i = 0; i < b->nthreads && i < a->nthreads && b->t > a->t; i++)
		fprintf(f, "%s%.3f", i ? "," : "", (double)(b->ticks[i] - a->ticks[i]) /
					   (double)sysconf(_SC_CLK_TCK) / (b->t - a->t));
	fprintf(f, "],");
}
