/* SPDX-License-Identifier: Apache-2.0
 * agent_cfg.c — agent configuration: defaults, environment (torchrun's variables), the
 * appliance list, and checks with messages that name what is wrong. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_internal.h"
#include "tally_agent.h"
#include "tally_auth.h"
#include "tally_client.h"
#include "tally_sum.h"
#include "tally_xport_reg.h"

void agent_errf(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!err || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
}

void tally_agent_cfg_defaults(struct tally_agent_cfg *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->job_id = 1;
	cfg->rank = cfg->world_size = cfg->local_rank = cfg->local_size = -1;
	cfg->partition_bytes = 1u << 20;
	cfg->credit_bytes = 4u << 20;
	cfg->connect_timeout_ms = 10000;
	cfg->op_timeout_ms = 30000;
	cfg->max_tensors = 4096;
	cfg->max_handles = 1024;
	cfg->credit_stall_ms = 10;
}

/* Strict unsigned parse: the whole string, base 10 or 0x. */
static int parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!s || !*s || *s == '-' || *s == '+')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

int tally_agent_parse_appliances(struct tally_agent_cfg *cfg, const char *list, char *err,
				 size_t errlen)
{
	struct tally_agent_appliance tmp[TALLY_AGENT_MAX_APPLIANCES];
	unsigned n = 0;
	const char *p = list;

	if (!list || !*list) {
		agent_errf(err, errlen, "appliance list is empty (expected host[:port][@gbps][+colo],...)");
		return -EINVAL;
	}
	while (*p) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		char item[160], *at, *colon, *plus;
		struct tally_agent_appliance ap = {.port = TALLY_AGENT_DEFAULT_PORT, .rate_gbps = 100.0};
		uint64_t v;

		if (len == 0 || len >= sizeof(item)) {
			agent_errf(err, errlen, "appliance list '%s': entry %u is %s", list, n + 1,
				   len ? "too long" : "empty");
			return -EINVAL;
		}
		if (n == TALLY_AGENT_MAX_APPLIANCES) {
			agent_errf(err, errlen, "appliance list '%s': more than %d appliances", list,
				   TALLY_AGENT_MAX_APPLIANCES);
			return -EINVAL;
		}
		memcpy(item, p, len);
		item[len] = 0;
		if ((plus = strchr(item, '+'))) {
			if (strcmp(plus, "+colo") != 0) {
				agent_errf(err, errlen, "appliance '%s': unknown suffix '%s' (only +colo)", item, plus);
				return -EINVAL;
			}
			ap.colocated = 1;
			*plus = 0;
		}
		if ((at = strchr(item, '@'))) {
			char *e;
			*at = 0;
			ap.rate_gbps = strtod(at + 1, &e);
			if (*e || !(ap.rate_gbps > 0.0) || ap.rate_gbps > 1e6) {
				agent_errf(err, errlen, "appliance '%s': bad link rate '%s' (Gbit/s > 0)", item, at + 1);
				return -EINVAL;
			}
		}
		if ((colon = strrchr(item, ':'))) {
			*colon = 0;
			if (parse_u64(colon + 1, 65535, &v) || v == 0) {
				agent_errf(err, errlen, "appliance '%s': bad port '%s'", item, colon + 1);
				return -EINVAL;
			}
			ap.port = (uint16_t)v;
		}
		if (!*item || strlen(item) >= sizeof(ap.host)) {
			agent_errf(err, errlen, "appliance entry %u of '%s': bad host", n + 1, list);
			return -EINVAL;
		}
		strcpy(ap.host, item);
		tmp[n++] = ap;
		p += len;
		if (*p == ',' && !*++p) {
			agent_errf(err, errlen, "appliance list '%s' ends with a comma", list);
			return -EINVAL;
		}
	}
	memcpy(cfg->appliances, tmp, n * sizeof(tmp[0]));
	cfg->nappliances = n;
	return 0;
}

static int env_u64(const char *name, uint64_t max, uint64_t *out, int *found, char *err,
		   size_t errlen)
{
	const char *s = getenv(name);

	*found = 0;
	if (!s)
		return 0;
	if (parse_u64(s, max, out)) {
		agent_errf(err, errlen, "environment %s='%s' is not a number in 0..%" PRIu64, name, s, max);
		return -EINVAL;
	}
	*found = 1;
	return 0;
}

/* FNV-1a of a tag, the string s and a number: every rank of a launch hashes the same. */
static uint64_t fnv(const char *tag, const char *s, uint64_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (const char *p = tag; *p; p++)
		h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
	for (int i = 0; i < 8; i++, n >>= 8)
		h = (h ^ (n & 0xff)) * 0x100000001b3ull;
	return h ? h : 1;
}

/* No TALLY_JOB_ID / TALLY_TOKEN: the identity of a torchrun launch from its run id (not
 * torchrun's default "none"), so launches with other run ids or world sizes never share a
 * job: job id (in 2^20 .. 2^24-1, below the sharded mode's limit) from the run id and
 * world size, token from the run id (not a secret: tally.identity takes it from torch's
 * store instead), incarnation from the run id and restart count (a restart of the launch
 * is a new incarnation). Else, as before, job 1 / token 0. */
static void cfg_identity(struct tally_agent_cfg *c, int operator_id, int inc_set,
			 uint64_t restart)
{
	const char *run = getenv("TORCHELASTIC_RUN_ID");

	if (!run || !*run || !strcmp(run, "none"))
		return;
	if (!operator_id) {
		uint64_t world = c->world_size > 0 ? (uint64_t)c->world_size : 1;
		c->job_id = (uint32_t)((1u << 20) + fnv("job", run, world) % ((1u << 24) - (1u << 20)));
		c->token = fnv("token", run, 0);
	}
	if (!inc_set)
		c->incarnation = fnv("incarnation", run, restart);
}

int tally_agent_cfg_from_env(struct tally_agent_cfg *cfg, char *err, size_t errlen)
{
	struct tally_agent_cfg c = *cfg;
	const char *s;
	uint64_t v;
	int f, rc;

#define ENV(name, max, field)                                                   \
	do {                                                                    \
		if ((rc = env_u64(name, max, &v, &f, err, errlen)))             \
			return rc;                                              \
		if (f)                                                          \
			field = v;                                              \
	} while (0)
	if ((s = getenv("TALLY_APPLIANCES")) && (rc = tally_agent_parse_appliances(&c, s, err, errlen)))
		return rc;
	ENV("TALLY_JOB_ID", UINT32_MAX, c.job_id);
	int operator_id = f;
	ENV("TALLY_TOKEN", UINT64_MAX, c.token);
	operator_id |= f;
	ENV("TALLY_INCARNATION", UINT64_MAX, c.incarnation);
	int inc_set = f;
	if ((s = getenv("TALLY_AUTH_KEY_FILE")) && *s) {
		if (strlen(s) >= sizeof(c.auth_key_file)) {
			agent_errf(err, errlen, "environment TALLY_AUTH_KEY_FILE: path longer than %zu "
				   "bytes", sizeof(c.auth_key_file) - 1);
			return -EINVAL;
		}
		snprintf(c.auth_key_file, sizeof(c.auth_key_file), "%s", s);
	}
	ENV("TALLY_PARTITION_BYTES", 1ull << 32, c.partition_bytes);
	ENV("TALLY_CREDIT_BYTES", 1ull << 40, c.credit_bytes);
	ENV("TALLY_AVERAGE", 1, c.average);
	ENV("TALLY_DETERMINISTIC", 1, c.deterministic);
	if ((s = getenv("TALLY_LOCAL_AGG")) && !strcmp(s, "shard"))
		c.local_agg = TALLY_AGENT_LOCAL_SHARD;
	else if (s && !strcmp(s, "sum"))
		c.local_agg = TALLY_AGENT_LOCAL_SUM;
	else if (s && !strcmp(s, "off"))
		c.local_agg = TALLY_AGENT_LOCAL_OFF;
	else
		ENV("TALLY_LOCAL_AGG", TALLY_AGENT_LOCAL_SHARD, c.local_agg);
	ENV("TALLY_LOCAL_SHM_BYTES", 1ull << 44, c.local_shm_bytes);
	ENV("TALLY_CONNECT_TIMEOUT_MS", UINT32_MAX, c.connect_timeout_ms);
	ENV("TALLY_OP_TIMEOUT_MS", UINT32_MAX, c.op_timeout_ms);
	ENV("TALLY_QUORUM", 65535, c.quorum);
	ENV("TALLY_CREDIT_STALL_MS", 1u << 30, c.credit_stall_ms);
	ENV("TALLY_WINDOW", 65536, c.window);
	ENV("TALLY_MAX_CHUNK_BYTES", 65536, c.max_chunk_bytes);
	ENV("TALLY_RTO_INIT_US", 10000000, c.rto_init_us);
	ENV("TALLY_RTO_MAX_US", 100000000, c.rto_max_us);
	ENV("TALLY_RTO_MIN_US", 10000000, c.rto_min_us);
	ENV("TALLY_GPU_HOSTS", 1u << 20, c.gpu_hosts);
	/* Ranks: ours first, then torchrun's. */
	ENV("RANK", 1u << 20, c.rank);
	ENV("TALLY_RANK", 1u << 20, c.rank);
	ENV("WORLD_SIZE", 1u << 20, c.world_size);
	ENV("TALLY_WORLD_SIZE", 1u << 20, c.world_size);
	ENV("LOCAL_RANK", 1u << 20, c.local_rank);
	ENV("LOCAL_WORLD_SIZE", 1u << 20, c.local_size);
	ENV("TORCHELASTIC_RESTART_COUNT", UINT32_MAX, v);
	cfg_identity(&c, operator_id, inc_set, f ? v : 0);
#undef ENV
	*cfg = c;
	return 0;
}

/* The agent's transport by name (TALLY_TRANSPORT, default udp): the registry checks it when
 * it opens it (tally_xport_open names the variable and the known transports). */
const char *agent_cfg_transport(void)
{
	const char *t = getenv("TALLY_TRANSPORT");

	return t && *t ? t : "udp";
}

/* The transport's own environment settings (TALLY_UDP_BUSY_POLL_US, TALLY_VERBS_AUTH, ...),
 * read here at the agent's edge and passed to the transport in its options. */
int agent_cfg_xport_env(const char *name, struct tally_xport_opts *o, char *err, size_t errlen)
{
	char why[256];
	int rc = tally_xport_opts_env(name, o, getenv, why, sizeof(why));

	if (rc == -ENOENT) /* an unknown name: tally_xport_open says so, naming the variable */
		return 0;
	if (rc)
		snprintf(err, errlen, "%s", why);
	return rc;
}

/* Liveness (tally_client.h): TALLY_PROBE_MS / TALLY_DEAD_MS override the session's
 * defaults; with several appliances a silent one is declared gone after 800 ms, so its keys
 * move within a second of its death (one appliance: the session waits for its restart). */
int agent_cfg_live_env(struct tally_client_cfg *cc, int multi, char *err, size_t errlen)
{
	static const char *const names[2] = { "TALLY_PROBE_MS", "TALLY_DEAD_MS" };
	uint32_t *fields[2] = { &cc->probe_ms, &cc->dead_ms };

	if (multi && cc->dead_ms > 800)
		cc->dead_ms = 800;
	for (int i = 0; i < 2; i++) {
		const char *s = getenv(names[i]);
		char *end;

		if (!s || !*s)
			continue;
		errno = 0;
		unsigned long v = strtoul(s, &end, 10);
		if (errno || *end || v < 10 || v > 600000) {
			agent_errf(err, errlen, "%s must be milliseconds in 10..600000, not '%s'",
				   names[i], s);
			return -EINVAL;
		}
		*fields[i] = (uint32_t)v;
	}
	if (cc->probe_ms && cc->dead_ms && cc->probe_ms > cc->dead_ms) {
		agent_errf(err, errlen, "TALLY_PROBE_MS (%u) must not exceed TALLY_DEAD_MS (%u)",
			   cc->probe_ms, cc->dead_ms);
		return -EINVAL;
	}
	return 0;
}

/* TALLY_GSO=1: UDP segmentation offload on send (fewer, larger sends) where the appliance
 * takes kernel-segmented frames (a kernel receiver: not a DPDK AF_PACKET appliance, see
 * tally_udp.h). Unset: *gso = -1, the caller decides per appliance (on for loopback). */
int agent_cfg_gso(int *gso, char *err, size_t errlen)
{
	const char *s = getenv("TALLY_GSO");

	if (s && strcmp(s, "0") && strcmp(s, "1")) {
		agent_errf(err, errlen, "TALLY_GSO must be 0 or 1, not '%s'", s);
		return -EINVAL;
	}
	*gso = !s ? -1 : strcmp(s, "1") == 0;
	return 0;
}

/* The machine's run id for the local collective's shared segment: TALLY_LOCAL_ID, else
 * torchrun's TORCHELASTIC_RUN_ID; NULL when neither is set. */
const char *agent_cfg_local_id(void)
{
	const char *id = getenv("TALLY_LOCAL_ID");

	return id ? id : getenv("TORCHELASTIC_RUN_ID");
}

/* TALLY_ISA and TALLY_AUTH_BACKEND, read here (the agent's edge) and passed to the reducers
 * and the authentication library, which read no environment. Once per process. */
static void cfg_lib_env(void)
{
	tally_sum_set_default(getenv("TALLY_ISA"));
	tally_auth_select_backend(getenv(TALLY_AUTH_BACKEND_ENV));
}

int agent_cfg_resolve(struct tally_agent_cfg *c, char *err, size_t errlen)
{
	static pthread_once_t lib_env = PTHREAD_ONCE_INIT;

	pthread_once(&lib_env, cfg_lib_env);
	if (c->rank < 0)
		c->rank = 0;
	if (c->world_size < 0)
		c->world_size = 1;
	if (c->local_rank < 0)
		c->local_rank = c->world_size == 1 ? 0 : c->rank;
	if (c->local_size < 0)
		c->local_size = c->world_size == 1 ? 1 : c->world_size;
	if (c->gpu_hosts == 0 && c->local_size > 0)
		c->gpu_hosts = (unsigned)((c->world_size + c->local_size - 1) / c->local_size);
	if (!c->max_tensors)
		c->max_tensors = 4096;
	if (!c->max_handles)
		c->max_handles = 1024;
	if (!c->credit_stall_ms)
		c->credit_stall_ms = 10;
	return tally_agent_cfg_check(c, err, errlen);
}

int tally_agent_cfg_check(const struct tally_agent_cfg *c, char *err, size_t errlen)
{
	if (c->nappliances == 0 || c->nappliances > TALLY_AGENT_MAX_APPLIANCES) {
		agent_errf(err, errlen, "no appliance configured (set TALLY_APPLIANCES=host:port,...)");
		return -EINVAL;
	}
	if (c->world_size < 1 || c->world_size > TALLY_AGENT_MAX_WORKERS) {
		agent_errf(err, errlen, "world size %d out of range 1..%d", c->world_size,
			   TALLY_AGENT_MAX_WORKERS);
		return -EINVAL;
	}
	if (c->rank < 0 || c->rank >= c->world_size) {
		agent_errf(err, errlen, "rank %d is not in 0..%d (world size %d)", c->rank,
			   c->world_size - 1, c->world_size);
		return -EINVAL;
	}
	if (c->local_size < 1 || c->local_rank < 0 || c->local_rank >= c->local_size ||
	    c->local_size > c->world_size) {
		agent_errf(err, errlen, "local rank %d / local size %d inconsistent (world size %d)",
			   c->local_rank, c->local_size, c->world_size);
		return -EINVAL;
	}
	if (c->partition_bytes < 64 || c->partition_bytes > (1ull << 32) || c->partition_bytes % 4) {
		agent_errf(err, errlen, "partition_bytes %zu: must be a multiple of 4 in 64..4 GiB",
			   c->partition_bytes);
		return -EINVAL;
	}
	if (c->credit_bytes == 0) {
		agent_errf(err, errlen, "credit_bytes must be > 0");
		return -EINVAL;
	}
	if (c->quorum > c->world_size) {
		agent_errf(err, errlen, "quorum %u larger than the world size %d", c->quorum, c->world_size);
		return -EINVAL;
	}
	for (unsigned i = 0; i < c->nappliances; i++)
		if (!c->appliances[i].host[0] || !(c->appliances[i].rate_gbps > 0.0)) {
			agent_errf(err, errlen, "appliance %u: empty host or non-positive rate", i);
			return -EINVAL;
		}
	if (c->local_agg < 0 || c->local_agg > TALLY_AGENT_LOCAL_SHARD) {
		agent_errf(err, errlen, "local_agg %d: 0 (off), 1 (sum) or 2 (shard)", c->local_agg);
		return -EINVAL;
	}
	if (c->local_agg == TALLY_AGENT_LOCAL_SHARD && c->local_size > 1 &&
	    (c->job_id >> 24 || c->local_size > 64)) {
		agent_errf(err, errlen, "sharded local mode: needs a job id below 16777216 (lane lr "
			   "talks as job | lr << 24; job %u) and at most 64 local ranks (%d)",
			   c->job_id, c->local_size);
		return -EINVAL;
	}
	if (c->local_agg && c->local_size > 1 && c->world_size % c->local_size) {
		agent_errf(err, errlen, "local aggregation needs world size %d to be a multiple of the "
			   "local size %d", c->world_size, c->local_size);
		return -EINVAL;
	}
	/* the client's defaults: first 500 us, largest 100000 us */
	if (c->rto_min_us && c->rto_min_us > (c->rto_max_us ? c->rto_max_us : 100000u)) {
		agent_errf(err, errlen, "rto_min_us %u above the largest timeout %u us (rto_max_us)",
			   c->rto_min_us, c->rto_max_us ? c->rto_max_us : 100000u);
		return -EINVAL;
	}
	if (c->connect_timeout_ms == 0 || c->op_timeout_ms == 0) {
		agent_errf(err, errlen, "timeouts must be > 0 ms");
		return -EINVAL;
	}
	return 0;
}
