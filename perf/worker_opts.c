/* SPDX-License-Identifier: Apache-2.0
 * worker_opts.c — tally-worker's command line: usage text, number/size parsers, option
 * parsing with defaults and range checks.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tally_xport_reg.h"
#include "worker_opts.h"

void wk_usage(FILE *f)
{
	fprintf(f,
		"usage: tally-worker --host ADDR [options]\n"
		"  --host ADDR          appliance address (udp) \n"
		"  --port N             appliance UDP base port (default 9170)\n"
		"  --transport T        udp (default), dpdk or verbs where built (also\n"
		"                       TALLY_TRANSPORT=verbs, or --host rdma://ADDR:PORT)\n"
		"  --rdma-gid-index N   verbs: check this GID index (-1: rdma_cm chooses, default)\n"
		"  --dpdk ARGS          EAL arguments for --transport dpdk (one string)\n"
		"  --local-ip A/LEN     our address on the DPDK port; --dpdk-port NAME (default first)\n"
		"  --bind ADDR          local address (udp)\n"
		"  --gso / --no-gro     UDP segmentation offload on send / no GRO on receive\n"
		"  --busy-poll-us N     udp: spin this long for a RESULT before sleeping, yielding\n"
		"                       the CPU meanwhile (default 50, 0 = off; within 2 ms of\n"
		"                       traffic; TALLY_UDP_BUSY_POLL_US overrides)\n"
		"  --job N --token N    job id and 64-bit token (default 1, 1)\n"
		"  --rank N --world N   this worker's rank and the job's world size (default 0, 1)\n"
		"  --bytes SIZE         gradient bytes per worker per round (default 64M)\n"
		"  --keys N             split into N keys (default 16); --key-base N: first key id\n"
		"  --dtype T            f32 (default), bf16, f16, i32\n"
		"  --chunk BYTES        largest chunk payload (default 8192)\n"
		"  --rounds N           rounds (default 3)\n"
		"  --window N           chunks in flight per appliance core at most (default 128):\n"
		"                       the cap of the delay-based window (tally_client.h)\n"
		"  --seed N             data seed (default 1)\n"
		"  --values V           random (default) or exact (order-independent sums)\n"
		"  --deterministic      register deterministic keys: results checked bit-exact\n"
		"  --no-verify          skip the check (benchmarking only)\n"
		"  --join-ms N          JOIN timeout (default 10000); --give-up-ms N (default 30000)\n"
		"  --rto-us N           initial retransmission timeout (default 500)\n"
		"  --rto-min-us N       floor of the adaptive timeout (default 20; shaped links:\n"
		"                       their queueing delay, or waiting is taken for loss)\n"
		"  --seconds T          stop starting rounds after T seconds (--rounds is the cap)\n"
		"  --no-barrier         do not wait for every rank before each round\n"
		"  --probe-ms N         probe a silent appliance after N ms (default 200);\n"
		"  --dead-ms N          call it down after N ms (default 1000)\n"
		"  --events             one JSON line on stderr per round done and per session\n"
		"                       state change (up/silent/down/draining, restarts),\n"
		"                       CLOCK_MONOTONIC seconds: perf/faults_bench.py\n"
		"  --warmup N           N untimed (still verified) rounds first (default 0)\n"
		"  --incarnation N      this launch of the job (default 0: none); every rank of a\n"
		"                       launch gives the same N, a new N replaces an earlier launch's\n"
		"                       state on the appliance (a relaunch after a crash)\n"
		"  --failover LIST      HOST:PORT[,...]: when the appliance is down (silent 1 s with\n"
		"                       work outstanding) the job moves to the first of these that\n"
		"                       answers, keys registered again, the round pushed again;\n"
		"                       every rank of the job must give the same list\n"
		"  --blast              I/O baseline against tallyd --io-forward: send PUSH frames of\n"
		"                       one chunk for --seconds, count what comes back (no JOIN)\n"
		"  --blast-cores N      appliance cores to spread the blast over (default 1)\n"
		"  --key-file F         the job's key file: sign and verify every packet (a job\n"
		"                       admitted with a key); default $TALLY_AUTH_KEY_FILE\n"
		"  --json               one JSON object on stdout\n"
		"  --linger             after the report stay attached (no polling) until SIGTERM:\n"
		"                       a memif server must stop before its clients detach\n");
}

static int wk_u64(const char *s, uint64_t *v)
{
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 0);
	return (errno || end == s || *end || *s == '-') ? -EINVAL : 0;
}

static int wk_u32(const char *s, uint32_t *v)
{
	uint64_t x;

	if (wk_u64(s, &x) || x > UINT32_MAX)
		return -EINVAL;
	*v = (uint32_t)x;
	return 0;
}

static int wk_size(const char *s, size_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	default: break;
	}
	if (*end)
		return -EINVAL;
	*out = (size_t)v;
	return 0;
}

/* --transport, else TALLY_TRANSPORT, else an rdma:// appliance address, else udp: the name
 * the registry opens (tally_xport_lookup checks it here, naming the setting). 0 or 1 (bad
 * value, with a message). */
static int wk_transport(struct wk_opts *o)
{
	const char *t = getenv("TALLY_TRANSPORT");
	const struct tally_xport_impl *impl;
	char err[256];

	if (!o->x.transport && t && *t) {
		o->x.transport = t;
		o->x.setting = "TALLY_TRANSPORT";
	}
	if (!o->x.transport && o->x.host && !strncmp(o->x.host, "rdma://", 7)) {
		o->x.transport = "verbs";
		o->x.setting = "--host rdma://";
	}
	if (!o->x.transport)
		o->x.transport = "udp";
	if (!(impl = tally_xport_lookup(o->x.transport, o->x.setting, err, sizeof(err)))) {
		fprintf(stderr, "tally-worker: %s\n", err);
		return 1;
	}
	o->x.transport = impl->name; /* "rdma" is "verbs" */
	return 0;
}

int wk_parse(int argc, char **argv, struct wk_opts *o)
{
	enum { O_HOST = 256, O_PORT, O_TRANSPORT, O_DPDK, O_BIND, O_GSO, O_NOGRO, O_JOB,
	       O_TOKEN, O_RANK, O_WORLD, O_BYTES, O_KEYS, O_KEYBASE, O_DTYPE, O_CHUNK, O_ROUNDS,
	       O_WINDOW, O_SEED, O_VALUES, O_DET, O_NOVERIFY, O_JOINMS, O_GIVEUP, O_RTO, O_JSON,
	       O_HELP, O_LOCALIP, O_DPDKPORT, O_SECONDS, O_BLAST, O_BLASTCORES, O_LINGER,
	       O_NOBARRIER, O_WARMUP, O_RTOMIN, O_INCARNATION, O_BUSYPOLL, O_EVENTS, O_PROBE,
	       O_DEAD, O_FAILOVER, O_KEYFILE, O_GIDINDEX };
	static const struct option lo[] = {
		{ "host", 1, 0, O_HOST }, { "port", 1, 0, O_PORT },
		{ "transport", 1, 0, O_TRANSPORT }, { "dpdk", 1, 0, O_DPDK },
		{ "bind", 1, 0, O_BIND }, { "gso", 0, 0, O_GSO }, { "no-gro", 0, 0, O_NOGRO },
		{ "job", 1, 0, O_JOB }, { "token", 1, 0, O_TOKEN }, { "rank", 1, 0, O_RANK },
		{ "world", 1, 0, O_WORLD }, { "bytes", 1, 0, O_BYTES }, { "keys", 1, 0, O_KEYS },
		{ "key-base", 1, 0, O_KEYBASE }, { "dtype", 1, 0, O_DTYPE },
		{ "chunk", 1, 0, O_CHUNK }, { "rounds", 1, 0, O_ROUNDS },
		{ "window", 1, 0, O_WINDOW }, { "seed", 1, 0, O_SEED },
		{ "values", 1, 0, O_VALUES }, { "deterministic", 0, 0, O_DET },
		{ "no-verify", 0, 0, O_NOVERIFY }, { "join-ms", 1, 0, O_JOINMS },
		{ "give-up-ms", 1, 0, O_GIVEUP }, { "rto-us", 1, 0, O_RTO },
		{ "json", 0, 0, O_JSON }, { "help", 0, 0, O_HELP },
		{ "local-ip", 1, 0, O_LOCALIP }, { "dpdk-port", 1, 0, O_DPDKPORT },
		{ "seconds", 1, 0, O_SECONDS }, { "blast", 0, 0, O_BLAST },
		{ "blast-cores", 1, 0, O_BLASTCORES }, { "linger", 0, 0, O_LINGER },
		{ "no-barrier", 0, 0, O_NOBARRIER }, { "warmup", 1, 0, O_WARMUP },
		{ "events", 0, 0, O_EVENTS }, { "probe-ms", 1, 0, O_PROBE },
		{ "dead-ms", 1, 0, O_DEAD },
		{ "rto-min-us", 1, 0, O_RTOMIN }, { "incarnation", 1, 0, O_INCARNATION },
		{ "busy-poll-us", 1, 0, O_BUSYPOLL }, { "failover", 1, 0, O_FAILOVER },
		{ "key-file", 1, 0, O_KEYFILE }, { "rdma-gid-index", 1, 0, O_GIDINDEX },
		{ 0, 0, 0, 0 } };
	uint32_t port = TALLY_DEFAULT_PORT;
	int c, bad = 0;

	o->x.gid_index = -1;

	o->key_file = getenv("TALLY_AUTH_KEY_FILE"); /* --key-file overrides */
	if (o->key_file && !*o->key_file)
		o->key_file = NULL;

	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case O_HOST: o->x.host = optarg; break;
		case O_PORT: bad |= wk_u32(optarg, &port) || !port || port > 65535; break;
		case O_TRANSPORT:
			o->x.transport = optarg;
			o->x.setting = "--transport";
			break;
		case O_DPDK: o->x.eal_args = optarg; break;
		case O_LOCALIP: o->x.local_ip = optarg; break;
		case O_DPDKPORT: o->x.dpdk_port = optarg; break;
		case O_GIDINDEX: {
			char *e;
			long g = strtol(optarg, &e, 10);

			bad |= *e || !*optarg || g < -1 || g > 255;
			o->x.gid_index = (int)g;
			break;
		}
		case O_SECONDS: {
			char *e;

			o->seconds = strtod(optarg, &e);
			bad = e == optarg || *e || !(o->seconds >= 0);
			break;
		}
		case O_BLAST: o->blast = 1; break;
		case O_LINGER: o->linger = 1; break;
		case O_NOBARRIER: o->barrier = 0; break;
		case O_EVENTS: o->events = 1; break;
		case O_PROBE: bad |= wk_u32(optarg, &o->probe_ms); break;
		case O_DEAD: bad |= wk_u32(optarg, &o->dead_ms); break;
		case O_WARMUP: bad |= wk_u32(optarg, &o->warmup) || o->warmup > 1000; break;
		case O_BLASTCORES:
			bad |= wk_u32(optarg, &o->blast_cores) || !o->blast_cores ||
			       o->blast_cores > 256;
			break;
		case O_BIND: o->x.bind = optarg; break;
		case O_GSO: o->x.gso = 1; break;
		case O_NOGRO: o->x.gro = 0; break;
		case O_BUSYPOLL: {
			uint32_t v = 0;

			/* 0 means off here; the transport takes < 0 as off, 0 as its default */
			bad |= wk_u32(optarg, &v) || v > TALLY_XPORT_BUSY_POLL_MAX_US;
			o->x.busy_poll_us = v ? (int)v : -1;
			break;
		}
		case O_FAILOVER: o->failover = optarg; break; /* checked by wk_fo_parse */
		case O_JOB: bad |= wk_u32(optarg, &o->job_id); break;
		case O_TOKEN: bad |= wk_u64(optarg, &o->token); break;
		case O_INCARNATION: bad |= wk_u64(optarg, &o->incarnation); break;
		case O_RANK: bad |= wk_u32(optarg, &o->rank); break;
		case O_WORLD: bad |= wk_u32(optarg, &o->world); break;
		case O_BYTES: bad |= wk_size(optarg, &o->bytes); break;
		case O_KEYS: bad |= wk_u32(optarg, &o->nkeys); break;
		case O_KEYBASE: bad |= wk_u32(optarg, &o->key_base); break;
		case O_DTYPE: {
			int d = tally_dtype_parse(optarg);

			if (d < 0)
				bad = 1;
			else
				o->dtype = (enum tally_dtype)d;
			break;
		}
		case O_CHUNK: bad |= wk_u32(optarg, &o->chunk_bytes); break;
		case O_ROUNDS: bad |= wk_u32(optarg, &o->rounds); break;
		case O_WINDOW: bad |= wk_u32(optarg, &o->window); break;
		case O_SEED: bad |= wk_u64(optarg, &o->seed); break;
		case O_VALUES:
			if (!strcmp(optarg, "random"))
				o->values = WD_RANDOM;
			else if (!strcmp(optarg, "exact"))
				o->values = WD_EXACT;
			else
				bad = 1;
			break;
		case O_DET: o->deterministic = 1; break;
		case O_NOVERIFY: o->verify = 0; break;
		case O_JOINMS: bad |= wk_u32(optarg, &o->join_ms); break;
		case O_GIVEUP: bad |= wk_u32(optarg, &o->give_up_ms); break;
		case O_RTO: bad |= wk_u32(optarg, &o->rto_us); break;
		case O_RTOMIN:
			bad |= wk_u32(optarg, &o->rto_min_us) || !o->rto_min_us ||
			       o->rto_min_us > 10000000;
			break;
		case O_JSON: o->json = 1; break;
		case O_KEYFILE: o->key_file = optarg; bad = !*optarg; break;
		case O_HELP: case 'h': wk_usage(stdout); exit(0);
		default: return -EINVAL;
		}
		if (bad) {
			fprintf(stderr, "tally-worker: bad value '%s' for --%s\n", optarg,
				lo[c - O_HOST].name);
			return -EINVAL;
		}
	}
	o->x.base_port = (uint16_t)port;
	if (wk_transport(o))
		return -EINVAL;
	if (optind < argc) {
		fprintf(stderr, "tally-worker: unexpected argument '%s'\n", argv[optind]);
		return -EINVAL;
	}
	if (!o->x.host) {
		fprintf(stderr, "tally-worker: --host is required\n");
		return -EINVAL;
	}
	if (!o->world || o->world > TALLY_MAX_WORKERS || o->rank >= o->world) {
		fprintf(stderr, "tally-worker: need rank < world <= %u (rank %u, world %u)\n",
			TALLY_MAX_WORKERS, o->rank, o->world);
		return -EINVAL;
	}
	if (!o->nkeys || !o->rounds || o->chunk_bytes < 64 || o->chunk_bytes > TALLY_MAX_PAYLOAD ||
	    o->bytes / tally_dtype_size(o->dtype) < o->nkeys ||
	    o->bytes / tally_dtype_size(o->dtype) / o->nkeys > UINT32_MAX) {
		fprintf(stderr, "tally-worker: need keys >= 1, rounds >= 1, 64 <= chunk <= %u, "
			"1 <= bytes/keys/dtype size < 2^32 elements\n", TALLY_MAX_PAYLOAD);
		return -EINVAL;
	}
	return 0;
}
