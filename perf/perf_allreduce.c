/* SPDX-License-Identifier: Apache-2.0
 * perf_allreduce.c — `tally-perf allreduce` and `tally-perf report`: both orchestrate
 * namespaces, tallyd, workers and peers (OpenMPI, Gloo), which a script does better than C;
 * the subcommands exec the Python drivers in perf/ with this build's directory. `tally-perf
 * model` (projections from the measured engine rate, plots) is a Python driver too.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perf_cmds.h"

#ifndef PERF_SCRIPT_DIR
#define PERF_SCRIPT_DIR "."
#endif
#ifndef PERF_BUILD_DIR
#define PERF_BUILD_DIR "build"
#endif

static int perf_exec_script(const char *script, int argc, char **argv)
{
	const char *dir = getenv("TALLY_PERF_SCRIPTS");
	const char *py = getenv("TALLY_PERF_PYTHON");
	char path[4096];
	char **av = calloc((size_t)argc + 3, sizeof(*av));

	if (!av)
		return 1;
	if (!dir || !*dir)
		dir = PERF_SCRIPT_DIR;
	if (!py || !*py)
		py = access("/usr/bin/python3", X_OK) ? "python3" : "/usr/bin/python3";
	if (snprintf(path, sizeof(path), "%s/%s", dir, script) >= (int)sizeof(path)) {
		fprintf(stderr, "tally-perf: script path too long\n");
		free(av);
		return 1;
	}
	/* The drivers find tallyd and tally-worker through TALLY_BUILD. */
	if (!getenv("TALLY_BUILD"))
		setenv("TALLY_BUILD", PERF_BUILD_DIR, 1);
	av[0] = (char *)py;
	av[1] = path;
	for (int i = 1; i < argc; i++)
		av[i + 1] = argv[i];
	execvp(py, av);
	fprintf(stderr, "tally-perf: cannot run %s %s: %s\n", py, path, strerror(errno));
	free(av);
	return 1;
}

int perf_allreduce_main(int argc, char **argv)
{
	return perf_exec_script("perf_allreduce.py", argc, argv);
}

int perf_report_main(int argc, char **argv)
{
	return perf_exec_script("perf_report.py", argc, argv);
}

int perf_model_main(int argc, char **argv)
{
	return perf_exec_script("perf_model.py", argc, argv);
}
