/* SPDX-License-Identifier: Apache-2.0
 * perf_cmds.h — entry points of the tally-perf subcommands. Each parses its own options
 * (argv[0] is the subcommand name), prints figures, returns 0 / 1 (failure) / 2 (usage).
 */
#ifndef PERF_CMDS_H
#define PERF_CMDS_H

#include <stddef.h>

int perf_sum_main(int argc, char **argv);
int perf_engine_main(int argc, char **argv);
int perf_engine_onebit_main(int argc, char **argv); /* engine --onebit */
int perf_engine_auth_main(int argc, char **argv);   /* engine --auth */
/* The MAC candidates' rates at header + each size (perf_auth_mac.c). */
void perf_auth_mac_table(const size_t *sizes, unsigned nsizes, double min_s, int json);
int perf_line_main(int argc, char **argv);
/* `line --transport verbs` (perf_line_verbs.c): Tally over verbs against ib_write_bw. */
int perf_line_verbs_main(int argc, char **argv);
int perf_allreduce_main(int argc, char **argv);
/* `linegen` (perf_linegen.c): the line-rate generator's NDR/PDR search, issue 38. */
int perf_linegen_main(int argc, char **argv);
int perf_report_main(int argc, char **argv);
int perf_model_main(int argc, char **argv);

#endif
