/* SPDX-License-Identifier: Apache-2.0
 * tly_udpd — a software appliance over kernel UDP for the e2e tests: one engine instance per
 * "core" (UDP port base + core), all polled by one thread through the UDP transport in listen
 * mode. Not a datapath (tallyd is); it checks worker, client session and engine end to end
 * without DPDK, and is the appliance-side fallback the UDP transport offers.
 *
 *   tly_udpd [--addr 0.0.0.0] [--port 9170] [--cores 2] [--job ID --token T --world W]
 *            [--open] [--mem 1G] [--det-pool 64M] [--stats FILE]
 * Runs until SIGTERM/SIGINT, then writes the engines' summed counters as one JSON line.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tally_engine.h"
#include "tally_udp.h"

static volatile sig_atomic_t ud_stop;

static void ud_sig(int s)
{
	(void)s;
	ud_stop = 1;
}

struct ud {
	struct tally_engine *eng[TALLY_UDP_MAX_CORES];
	unsigned ncores;
};

static void ud_rx(void *arg, const void *buf, size_t len, const struct tally_addr *from)
{
	struct ud *d = arg;

	if (from->core < d->ncores)
		tally_engine_rx(d->eng[from->core], buf, len, from);
}

static void ud_stats(struct ud *d, const char *file)
{
	struct tally_engine_stats t = { 0 };
	FILE *f = file ? fopen(file, "w") : stdout;

	if (!f)
		f = stdout;
	for (unsigned c = 0; c < d->ncores; c++) {
		const struct tally_engine_stats *s = tally_engine_stats(d->eng[c]);

		t.rx_pkts += s->rx_pkts;
		t.tx_pkts += s->tx_pkts;
		t.tx_errors += s->tx_errors;
		t.pushes += s->pushes;
		t.push_bytes += s->push_bytes;
		t.duplicates += s->duplicates;
		t.late_pushes += s->late_pushes;
		t.completions += s->completions;
		t.results += s->results;
		t.resends += s->resends;
		for (int r = 0; r < TALLY_R_COUNT; r++)
			t.drops[r] += s->drops[r];
	}
	fprintf(f, "{\"rx_pkts\":%" PRIu64 ",\"tx_pkts\":%" PRIu64 ",\"tx_errors\":%" PRIu64
		",\"pushes\":%" PRIu64 ",\"push_bytes\":%" PRIu64 ",\"duplicates\":%" PRIu64
		",\"late_pushes\":%" PRIu64 ",\"completions\":%" PRIu64 ",\"results\":%" PRIu64
		",\"resends\":%" PRIu64 ",\"drops\":{",
		t.rx_pkts, t.tx_pkts, t.tx_errors, t.pushes, t.push_bytes, t.duplicates,
		t.late_pushes, t.completions, t.results, t.resends);
	for (int r = 1, first = 1; r < TALLY_R_COUNT; r++)
		if (t.drops[r]) {
			fprintf(f, "%s\"%s\":%" PRIu64, first ? "" : ",",
				tally_reason_name((enum tally_reason)r), t.drops[r]);
			first = 0;
		}
	fprintf(f, "}}\n");
	if (f != stdout)
		fclose(f);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "addr", 1, 0, 'a' }, { "port", 1, 0, 'p' }, { "cores", 1, 0, 'c' },
		{ "job", 1, 0, 'j' }, { "token", 1, 0, 't' }, { "world", 1, 0, 'w' },
		{ "open", 0, 0, 'o' }, { "mem", 1, 0, 'm' }, { "det-pool", 1, 0, 'd' },
		{ "stats", 1, 0, 's' }, { 0, 0, 0, 0 } };
	struct tally_udp_cfg uc = { .listen = 1, .ncores = 2 };
	struct tally_engine_cfg ec = { 0 };
	unsigned long long job = 0, token = 0, world = 0, mem = 1ull << 30, det = 64ull << 20;
	const char *stats = NULL;
	struct tally_udp *u;
	struct ud d = { 0 };
	char err[256];
	int c, rc = 0, open_adm = 0;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		char *end = NULL;
		unsigned long long v = 0;

		if (optarg) {
			errno = 0;
			v = strtoull(optarg, &end, 0);
			if (end && (*end == 'M' || *end == 'm'))
				v <<= 20, end++;
			else if (end && (*end == 'G' || *end == 'g'))
				v <<= 30, end++;
			if (c != 'a' && c != 's' && (errno || end == optarg || *end)) {
				fprintf(stderr, "tly_udpd: bad value '%s'\n", optarg);
				return 2;
			}
		}
		switch (c) {
		case 'a': uc.host = optarg; break;
		case 'p': uc.base_port = (uint16_t)v; break;
		case 'c': uc.ncores = (uint16_t)v; break;
		case 'j': job = v; break;
		case 't': token = v; break;
		case 'w': world = v; break;
		case 'o': open_adm = 1; break;
		case 'm': mem = v; break;
		case 'd': det = v; break;
		case 's': stats = optarg; break;
		default: return 2;
		}
	}
	if (!uc.ncores || uc.ncores > TALLY_UDP_MAX_CORES || (!open_adm && !world)) {
		fprintf(stderr, "tly_udpd: need 1 <= --cores <= %u and --open or --job/--token/--world\n",
			TALLY_UDP_MAX_CORES);
		return 2;
	}
	u = tally_udp_create(&uc, ud_rx, &d, &rc, err, sizeof(err));
	if (!u) {
		fprintf(stderr, "tly_udpd: %s\n", err);
		return 1;
	}
	d.ncores = uc.ncores;
	for (unsigned i = 0; i < d.ncores; i++) {
		tally_engine_cfg_defaults(&ec);
		ec.core_index = (uint16_t)i;
		ec.ncores = (uint16_t)d.ncores;
		ec.base_port = uc.base_port ? uc.base_port : TALLY_DEFAULT_PORT;
		ec.mem_budget = (size_t)mem;
		ec.det_pool_bytes = (size_t)det;
		ec.open_admission = open_adm;
		d.eng[i] = tally_engine_create(&ec, tally_udp_ops(), u, &rc);
		if (!d.eng[i]) {
			fprintf(stderr, "tly_udpd: engine %u: %s\n", i, strerror(-rc));
			return 1;
		}
		if (world && (rc = tally_engine_job_add(d.eng[i], (uint32_t)job, token,
							 (uint32_t)world))) {
			fprintf(stderr, "tly_udpd: job %llu: %s\n", job, strerror(-rc));
			return 1;
		}
	}
	signal(SIGTERM, ud_sig);
	signal(SIGINT, ud_sig);
	fprintf(stderr, "tly_udpd: %u cores on port %u\n", d.ncores, ec.base_port);
	while (!ud_stop) {
		tally_udp_ops()->poll(u, 1000000);
		for (unsigned i = 0; i < d.ncores; i++)
			tally_engine_poll(d.eng[i]);
	}
	tally_udp_flush(u);
	ud_stats(&d, stats);
	for (unsigned i = 0; i < d.ncores; i++)
		tally_engine_destroy(d.eng[i]);
	tally_udp_destroy(u);
	return 0;
}
