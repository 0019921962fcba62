/* SPDX-License-Identifier: Apache-2.0
 * mpi_cfg.c — libtally_mpi's settings, read from the environment once at MPI_Init (the
 * library sits at the program's edge: the MPI program has no other way to pass them).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_int.h"

/* The process's settings and counters (one MPI job per process). */
struct tally_mpi_cfg tally_mpi_settings;
_Atomic uint64_t tally_mpi_count[4][TALLY_MPI_NFN];
_Atomic uint64_t tally_mpi_fallbacks, tally_mpi_errors, tally_mpi_comms, tally_mpi_failovers;
_Atomic int tally_mpi_gso[TALLY_AGENT_MAX_APPLIANCES];
int tally_mpi_errclass = MPI_ERR_OTHER;

static int cfg_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static int cfg_threshold(struct tally_mpi_cfg *cfg, char *err, size_t errlen)
{
	const char *s = getenv("TALLY_MPI_THRESHOLD");
	char *end;

	if (!s || !*s)
		return 0;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || end == s || (*end && strcmp(end, "K") && strcmp(end, "M")))
		return cfg_err(err, errlen, "TALLY_MPI_THRESHOLD='%s': bytes (e.g. 65536, 64K, 1M)",
			       s);
	cfg->threshold = (size_t)v * (*end == 'K' ? 1024u : *end == 'M' ? 1048576u : 1u);
	return 0;
}

static int cfg_fallback(struct tally_mpi_cfg *cfg, char *err, size_t errlen)
{
	const char *s = getenv("TALLY_MPI_FALLBACK");

	if (!s || !*s || !strcmp(s, "fail") || !strcmp(s, "0"))
		cfg->fallback = TALLY_MPI_FAIL;
	else if (!strcmp(s, "fallback") || !strcmp(s, "1"))
		cfg->fallback = TALLY_MPI_FALLBACK;
	else
		return cfg_err(err, errlen, "TALLY_MPI_FALLBACK='%s': fail or fallback", s);
	return 0;
}

int tally_mpi_cfg_from_env(struct tally_mpi_cfg *cfg, char *err, size_t errlen)
{
	const char *apps = getenv("TALLY_APPLIANCES");
	const char *st = getenv("TALLY_MPI_STATS");
	int rc;

	memset(cfg, 0, sizeof(*cfg));
	cfg->threshold = 65536;
	tally_agent_cfg_defaults(&cfg->agent);
	if (st && *st && strcmp(st, "0"))
		snprintf(cfg->stats, sizeof(cfg->stats), "%s", st);
	if ((rc = cfg_threshold(cfg, err, errlen)) || (rc = cfg_fallback(cfg, err, errlen)))
		return rc;
	if (!apps || !*apps)
		return 0; /* nothing to talk to: every collective passes through */
	rc = tally_agent_cfg_from_env(&cfg->agent, err, errlen);
	if (rc)
		return rc;
	/* One collective at a time, its whole vector wanted at once: the agent's 4 MiB credit
	 * (sized for many overlapping DDP buckets) held a 16 MiB MPI_Allreduce on 1 Gbit/s
	 * links to 0.75x plain Open MPI, 64 MiB of credit made it 1.39x (perf/README.md). */
	if (!getenv("TALLY_CREDIT_BYTES"))
		cfg->agent.credit_bytes = TALLY_MPI_CREDIT_BYTES;
	if (!cfg->agent.nappliances)
		return cfg_err(err, errlen, "TALLY_APPLIANCES='%s': no appliance", apps);
	cfg->enabled = 1;
	return 0;
}
