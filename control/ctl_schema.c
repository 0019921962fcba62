/* SPDX-License-Identifier: Apache-2.0
 * ctl_schema.c — the one table of control methods. Dispatch, validation, config replay and
 * tallyctl's parsing and help are all generated from it.
 */
#include <string.h>

#include "tally_ctl.h"

#define U32MAX 4294967295ull
#define P_END(arr) arr, sizeof(arr) / sizeof(arr[0])

static const struct tally_ctl_param p_job_req[] = {
	{ .name = "job_id", .type = TALLY_CTL_T_UINT, .required = 1, .positional = 1,
	  .max = U32MAX, .help = "job id" },
};

static const struct tally_ctl_param p_stats[] = {
	{ .name = "watch", .type = TALLY_CTL_T_UINT, .cli_only = 1, .min = 1, .max = 3600,
	  .help = "print the counters again every SECONDS (rates over that interval)" },
	{ .name = "count", .type = TALLY_CTL_T_UINT, .cli_only = 1, .min = 1, .max = U32MAX,
	  .help = "with --watch: stop after this many samples" },
};

static const struct tally_ctl_param p_job_add[] = {
	{ .name = "job_id", .type = TALLY_CTL_T_UINT, .required = 1, .positional = 1,
	  .max = U32MAX, .help = "job id (as the workers send it)" },
	{ .name = "token", .type = TALLY_CTL_T_U64, .required = 1,
	  .help = "64-bit job token every packet must carry (decimal or 0x hex)" },
	{ .name = "world_size", .type = TALLY_CTL_T_UINT, .required = 1, .min = 1, .max = 1024,
	  .help = "number of workers (ranks 0..world_size-1)" },
	{ .name = "quota_keys", .type = TALLY_CTL_T_UINT, .max = U32MAX,
	  .help = "keys this job may register (default: the appliance's --quota-keys)" },
	{ .name = "quota_bytes", .type = TALLY_CTL_T_U64,
	  .help = "key memory this job may hold, bytes (default: the appliance's --quota-bytes)" },
	{ .name = "key_file", .type = TALLY_CTL_T_STRING,
	  .help = "absolute path of the job's key file (32 random bytes or 64 hex digits, "
		  "mode 0600), read by the appliance: every packet of the job is then "
		  "authenticated (AES-256-GMAC); workers read the same file from "
		  "TALLY_AUTH_KEY_FILE" },
	{ .name = "no_auth", .type = TALLY_CTL_T_BOOL, .flag = 1,
	  .help = "admit the job unauthenticated (CRC only), for a trusted fabric: without "
		  "it, job-add needs --key-file" },
};

static const struct tally_ctl_param p_keys[] = {
	{ .name = "job_id", .type = TALLY_CTL_T_UINT, .positional = 1, .max = U32MAX,
	  .help = "only this job's keys" },
	{ .name = "limit", .type = TALLY_CTL_T_UINT, .min = 1, .max = 65536, .def = "1000",
	  .help = "at most this many keys" },
};

static const struct tally_ctl_param p_stuck[] = {
	{ .name = "threshold_ms", .type = TALLY_CTL_T_UINT, .positional = 1, .max = 86400000,
	  .def = "1000", .help = "chunks open longer than this (milliseconds)" },
	{ .name = "job_id", .type = TALLY_CTL_T_UINT, .max = U32MAX,
	  .help = "only this job's chunks" },
	{ .name = "limit", .type = TALLY_CTL_T_UINT, .min = 1, .max = 10000, .def = "100",
	  .help = "at most this many chunks (oldest first)" },
};

static const struct tally_ctl_param p_workers[] = {
	{ .name = "job_id", .type = TALLY_CTL_T_UINT, .positional = 1, .max = U32MAX,
	  .help = "only this job's workers" },
};

static const struct tally_ctl_param p_policy[] = {
	{ .name = "job_id", .type = TALLY_CTL_T_UINT, .required = 1, .positional = 1,
	  .max = U32MAX, .help = "job id" },
	{ .name = "key", .type = TALLY_CTL_T_UINT, .max = U32MAX,
	  .help = "only this key, now (default: every key of the job, and its later keys)" },
	{ .name = "quorum", .one_of = 1, .type = TALLY_CTL_T_UINT, .max = 1024,
	  .help = "contributions that complete a chunk (1..participants, 0 = all)" },
	{ .name = "deadline_us", .one_of = 1, .type = TALLY_CTL_T_UINT, .max = 60000000,
	  .help = "complete a chunk this long after its first push with what it has (0 = off)" },
	{ .name = "deterministic", .one_of = 1, .type = TALLY_CTL_T_BOOL,
	  .help = "rank-order summation (fixed when a key registers: an appliance that cannot "
		  "change it answers with an error)" },
};

static const struct tally_ctl_param p_drain[] = {
	{ .name = "timeout_ms", .type = TALLY_CTL_T_UINT, .max = 600000, .def = "0",
	  .help = "wait up to this long for open rounds to finish (0: answer at once)" },
};

static const struct tally_ctl_param p_shutdown[] = {
	{ .name = "drain", .type = TALLY_CTL_T_BOOL, .def = "true",
	  .help = "finish open rounds before stopping" },
};

static const struct tally_ctl_param p_log[] = {
	{ .name = "level", .type = TALLY_CTL_T_ENUM, .required = 1, .positional = 1,
	  .choices = TALLY_CTL_LOG_LEVELS, .help = "log level" },
};

static const struct tally_ctl_param p_config_save[] = {
	{ .name = "file", .type = TALLY_CTL_T_STRING, .cli_only = 1, .positional = 1,
	  .help = "write the configuration to FILE (default: standard output)" },
};

static const struct tally_ctl_method methods[TALLY_CTL_M_COUNT] = {
	{ TALLY_CTL_M_APPLIANCE_STATUS, "appliance_status", "status",
	  "version, uptime, ports, cores, queues, memory, jobs",
	  "{version, uptime_s, draining, cores:[{core, lcore, port, queue}], "
	  "ports:[{port, name, mac, link_up, speed_mbps}], memory:{budget_bytes, used_bytes}, "
	  "jobs, keys, workers, rdma:{listen, slots, gid_index, max_conns, connections} "
	  "(with rdma-listen; cores[].verbs_connections on tallyd)}", NULL, 0, 0, 0 },
	{ TALLY_CTL_M_STATS_GET, "stats_get", "stats",
	  "counters per core, per port and totals, with rates over the last interval",
	  "{interval_s, rates:{rx/tx_pps, rx/tx_bps, pushes_pps, goodput_bps, results_pps}, "
	  "totals:{...}, cores:[{core, ...}], ports:[{port, ...}]}; counters: rx/tx_pkts, "
	  "rx/tx_bytes, pushes, summed_bytes, results, resends (retransmitted results), "
	  "duplicates, late_pushes, completions, <transport>_* (each transport's own, "
	  "per core: verbs_*, udp_*), "
	  "drops:{reason: n}, frame_drops:{reason: n}",
	  P_END(p_stats),
	  0, 0 },
	{ TALLY_CTL_M_STATS_RESET, "stats_reset", "stats-reset", "zero every counter",
	  "{reset: true}", NULL, 0, 0, 0 },
	{ TALLY_CTL_M_JOBS_LIST, "jobs_list", "jobs", "admitted jobs",
	  "[{job_id, world_size, workers, keys, mem_bytes, policy}]", NULL, 0, 0, 0 },
	{ TALLY_CTL_M_JOB_GET, "job_get", "job", "one job in detail",
	  "{job_id, token, world_size, workers, keys, mem_bytes, policy:{quorum, deadline_us, "
	  "deterministic}}", P_END(p_job_req), 0, 0 },
	{ TALLY_CTL_M_JOB_ADD, "job_add", "job-add", "admit a job (operator admission), authenticated with --key-file FILE unless --no-auth "
	  "is given",
	  "{job_id, world_size, authenticated}", P_END(p_job_add), 1, 0 },
	{ TALLY_CTL_M_KEYS_LIST, "keys_list", "keys",
	  "registered keys with their state: open rounds, missing contributors",
	  "[{job_id, key, core, dtype, elems, chunks, participants, quorum, deterministic, "
	  "round, open_chunks, missing:[ranks]}]", P_END(p_keys), 0, 0 },
	{ TALLY_CTL_M_CHUNKS_STUCK, "chunks_stuck", "stuck",
	  "chunks incomplete longer than a threshold, with the ranks still missing",
	  "[{job_id, key, round, chunk, age_ms, have, need, missing:[ranks]}]", P_END(p_stuck),
	  0, 0 },
	{ TALLY_CTL_M_WORKERS_LIST, "workers_list", "workers", "joined workers",
	  "[{job_id, rank, addr, port, core, last_heard_ms}]", P_END(p_workers), 0, 0 },
	{ TALLY_CTL_M_JOB_SET_POLICY, "job_set_policy", "policy",
	  "change a job's quorum or deadline, live: its keys now, keys registered later "
	  "within a second (determinism is fixed at registration: refused)",
	  "{job_id, keys_changed, quorum, deadline_us, deterministic}", P_END(p_policy), 1, 1 },
	{ TALLY_CTL_M_JOB_EVICT, "job_evict", "evict",
	  "remove a job, its keys and memory; its workers get errors", "{job_id, keys_freed}",
	  P_END(p_job_req), 0, 0 },
	{ TALLY_CTL_M_APPLIANCE_DRAIN, "appliance_drain", "drain",
	  "finish open rounds and refuse new ones", "{draining, open_rounds}", P_END(p_drain),
	  0, 0 },
	{ TALLY_CTL_M_APPLIANCE_SHUTDOWN, "appliance_shutdown", "shutdown",
	  "stop the appliance (after draining unless --drain false)", "{stopping: true}",
	  P_END(p_shutdown), 0, 0 },
	{ TALLY_CTL_M_LOG_SET_LEVEL, "log_set_level", "log-level", "set the log level",
	  "{level, previous}", P_END(p_log), 1, 0 },
	{ TALLY_CTL_M_CONFIG_SAVE, "config_save", "config-save",
	  "the configuration as the list of calls that rebuilds it (tallyd --control-config replays it)",
	  "{calls:[{method, params}]}", P_END(p_config_save), 0, 0 },
};

const struct tally_ctl_method *tally_ctl_methods(size_t *n)
{
	*n = TALLY_CTL_M_COUNT;
	return methods;
}

const struct tally_ctl_method *tally_ctl_method_by_name(const char *name)
{
	for (size_t i = 0; name && i < TALLY_CTL_M_COUNT; i++)
		if (strcmp(methods[i].name, name) == 0)
			return &methods[i];
	return NULL;
}

const struct tally_ctl_method *tally_ctl_method_by_cmd(const char *cmd)
{
	for (size_t i = 0; cmd && i < TALLY_CTL_M_COUNT; i++)
		if (strcmp(methods[i].cmd, cmd) == 0)
			return &methods[i];
	return NULL;
}

const struct tally_ctl_param *tally_ctl_param_find(const struct tally_ctl_method *m,
						   const char *name)
{
	for (unsigned i = 0; i < m->nparams; i++)
		if (strcmp(m->params[i].name, name) == 0)
			return &m->params[i];
	return NULL;
}

const char *tally_ctl_ptype_name(enum tally_ctl_ptype t)
{
	switch (t) {
	case TALLY_CTL_T_UINT: return "integer";
	case TALLY_CTL_T_U64: return "u64";
	case TALLY_CTL_T_BOOL: return "bool";
	case TALLY_CTL_T_STRING: return "string";
	case TALLY_CTL_T_ENUM: return "choice";
	}
	return "?";
}
