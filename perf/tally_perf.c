/* SPDX-License-Identifier: Apache-2.0
 * tally-perf — Tally's benchmark tool: one binary, one subcommand per measurement.
 */
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "tally_auth.h"
#include "tally_sum.h"
#include "perf_cmds.h"

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *help;
} perf_cmds[] = {
	{ "sum", perf_sum_main, "reducer rates vs memcpy (sum_avx)" },
	{ "engine", perf_engine_main, "one engine instance fed prebuilt PUSH packets" },
	{ "line", perf_line_main, "tallyd + DPDK workers on net_memif: aggregation vs --io-forward" },
	{ "linegen", perf_linegen_main, "line-rate generator: NDR/PDR search, latency (synthetic DUT)" },
	{ "allreduce", perf_allreduce_main, "Tally vs OpenMPI vs Gloo (netns; --emulate: shaped links)" },
	{ "model", perf_model_main, "project time per iteration and appliance cores, W = 8..1024" },
	{ "report", perf_report_main, "run the standard suite, write DIR/report.md with plots" },
};

static void perf_usage(FILE *f)
{
	fprintf(f, "usage: tally-perf COMMAND [OPTIONS]   (tally-perf COMMAND --help)\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(perf_cmds) / sizeof(perf_cmds[0]); i++)
		fprintf(f, "  %-8s %s\n", perf_cmds[i].name, perf_cmds[i].help);
}

int main(int argc, char **argv)
{
	/* the environment at the program's edge: the libraries read none */
	tally_sum_set_default(getenv("TALLY_ISA"));
	tally_auth_select_backend(getenv(TALLY_AUTH_BACKEND_ENV));
	if (argc < 2) {
		perf_usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		perf_usage(stdout);
		return 0;
	}
	for (size_t i = 0; i < sizeof(perf_cmds) / sizeof(perf_cmds[0]); i++)
		if (!strcmp(argv[1], perf_cmds[i].name))
			return perf_cmds[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "tally-perf: unknown command '%s'\n", argv[1]);
	perf_usage(stderr);
	return 2;
}
