/* SPDX-License-Identifier: Apache-2.0
 * mpi_init.c — MPI_Init / MPI_Init_thread read the settings once (and name a bad one);
 * MPI_Finalize says BYE on every communicator's job and dumps the counters when asked.
 */
#include <stdio.h>
#include <string.h>

#include "mpi_int.h"

static void init_settings(void)
{
	char err[256] = "";
	int rank = 0;

	PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
	if (tally_mpi_cfg_from_env(&tally_mpi_settings, err, sizeof(err))) {
		/* a bad setting takes nothing over, and says which one */
		if (rank == 0)
			fprintf(stderr, "tally_mpi: %s: plain MPI collectives\n", err);
		tally_mpi_settings.enabled = 0;
	}
	if (PMPI_Add_error_class(&tally_mpi_errclass) != MPI_SUCCESS)
		tally_mpi_errclass = MPI_ERR_OTHER;
	else
		PMPI_Add_error_string(tally_mpi_errclass, "tally_mpi: appliance error");
	if (tally_mpi_settings.enabled && tally_mpi_comm_setup() != MPI_SUCCESS)
		tally_mpi_settings.enabled = 0;
}

int MPI_Init(int *argc, char ***argv)
{
	int rc = PMPI_Init(argc, argv);

	if (rc == MPI_SUCCESS)
		init_settings();
	return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
	int rc = PMPI_Init_thread(argc, argv, required, provided);

	if (rc == MPI_SUCCESS)
		init_settings();
	return rc;
}

static const char *const fn_names[TALLY_MPI_NFN] = {"allreduce", "iallreduce",
	"reduce_scatter_block", "reduce_scatter"};

static void stats_dump(void)
{
	char line[1024];
	size_t o = 0;
	int rank = 0;

	PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
	o += (size_t)snprintf(line + o, sizeof(line) - o, "{\"tally_mpi\":1,\"rank\":%d", rank);
	for (int f = 0; f < TALLY_MPI_NFN && o < sizeof(line); f++)
		o += (size_t)snprintf(line + o, sizeof(line) - o,
			",\"%s\":{\"taken_calls\":%llu,\"taken_bytes\":%llu,"
			"\"passed_calls\":%llu,\"passed_bytes\":%llu}", fn_names[f],
			(unsigned long long)tally_mpi_count[TALLY_MPI_TAKEN_C][f],
			(unsigned long long)tally_mpi_count[TALLY_MPI_TAKEN_B][f],
			(unsigned long long)tally_mpi_count[TALLY_MPI_PASSED_C][f],
			(unsigned long long)tally_mpi_count[TALLY_MPI_PASSED_B][f]);
	for (unsigned i = 0; i < tally_mpi_settings.agent.nappliances && o < sizeof(line); i++)
		o += (size_t)snprintf(line + o, sizeof(line) - o, "%s\"%s\"", i ? "," : ",\"gso\":[",
				      tally_agent_gso_name(atomic_load(&tally_mpi_gso[i])));
	if (tally_mpi_settings.agent.nappliances && o < sizeof(line))
		o += (size_t)snprintf(line + o, sizeof(line) - o, "]");
	if (o < sizeof(line))
		snprintf(line + o, sizeof(line) - o,
			 ",\"fallbacks\":%llu,\"errors\":%llu,\"comms\":%llu,\"failovers\":%llu}\n",
			 (unsigned long long)tally_mpi_fallbacks,
			 (unsigned long long)tally_mpi_errors, (unsigned long long)tally_mpi_comms,
			 (unsigned long long)tally_mpi_failovers);
	if (!strcmp(tally_mpi_settings.stats, "1")) {
		fputs(line, stderr);
		return;
	}
	FILE *f = fopen(tally_mpi_settings.stats, "a");
	if (!f) {
		fprintf(stderr, "tally_mpi: TALLY_MPI_STATS=%s: cannot open\n",
			tally_mpi_settings.stats);
		return;
	}
	fputs(line, f);
	fclose(f);
}

int MPI_Finalize(void)
{
	tally_mpi_comm_release_all();
	if (tally_mpi_settings.stats[0])
		stats_dump();
	return PMPI_Finalize();
}
