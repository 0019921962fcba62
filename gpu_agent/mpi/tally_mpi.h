/* SPDX-License-Identifier: Apache-2.0
 * tally_mpi.h — libtally_mpi: MPI programs sum through Tally appliances unchanged.
 *
 * A PMPI interposition library (LD_PRELOAD, or linked before libmpi). It defines
 * MPI_Allreduce, MPI_Iallreduce, MPI_Reduce_scatter_block and MPI_Reduce_scatter (taken
 * over for MPI_SUM on contiguous MPI_FLOAT / 32-bit integers / MPICH's MPIX_C_FLOAT16 of at
 * least the threshold's bytes, MPI_IN_PLACE included; everything else is handed to PMPI
 * unchanged and counted), every completion call (MPI_Test, _Wait, _Testall, _Waitall,
 * _Testany, _Waitany, _Testsome, _Waitsome: they complete a taken-over MPI_Iallreduce) and
 * MPI_Request_free (refused for one, as MPI does for a nonblocking collective),
 * MPI_Init / MPI_Init_thread (settings read once), MPI_Comm_free and MPI_Finalize (BYE).
 *
 * Communicators: each intra-communicator gets its own Tally job at its first taken-over
 * collective: rank 0 draws the job id, token and incarnation and PMPI_Bcast's them, every
 * rank creates a libtally_agent session (rank = communicator rank), and a PMPI_Allreduce
 * agrees that all of them joined. Tensors are named by (dtype, bytes, slot: 0 for
 * blocking calls, an Iallreduce's n-th use modulo TALLY_MPI_SLOTS) in the agent's submit order, so keys follow the communicator's order
 * of collectives, the same on every rank (MPI's rule). A communicator's cached attribute
 * holds the session; MPI_Comm_free (the attribute's delete callback) and MPI_Finalize
 * destroy it (BYE). MPI_Comm_dup'ed communicators do not inherit it.
 *
 * The settings (struct tally_mpi_cfg) come from the environment at MPI_Init:
 *   TALLY_APPLIANCES (required to take anything over), TALLY_AUTH_KEY_FILE,
 *   TALLY_DETERMINISTIC, the agent's other TALLY_* knobs (tally_agent_cfg_from_env;
 *   TALLY_CREDIT_BYTES defaults to TALLY_MPI_CREDIT_BYTES here, not the agent's 4 MiB),
 *   TALLY_MPI_THRESHOLD (bytes, default 65536), TALLY_MPI_FALLBACK (fail | fallback),
 *   TALLY_MPI_STATS (1: counters as a JSON line on stderr at MPI_Finalize; a path: appended
 *   there).
 */
#ifndef TALLY_MPI_H
#define TALLY_MPI_H

#include <stddef.h>
#include <stdint.h>

#include "tally_agent.h"

#define TALLY_MPI_SLOTS 8 /* Iallreduce's of one (dtype, size) in flight per communicator */
#define TALLY_MPI_CREDIT_BYTES (64u << 20) /* bytes in flight, unless TALLY_CREDIT_BYTES */

enum tally_mpi_fallback {
	TALLY_MPI_FAIL = 0,     /* no appliance: the collective fails, naming it */
	TALLY_MPI_FALLBACK = 1, /* no appliance: plain MPI, one warning */
};

struct tally_mpi_cfg {
	int enabled;            /* TALLY_APPLIANCES set and valid */
	size_t threshold;       /* bytes from which a collective is taken over */
	int fallback;           /* enum tally_mpi_fallback */
	char stats[256];        /* "" none, "1" stderr, else a file to append to */
	struct tally_agent_cfg agent; /* template: job, token, rank, world set per comm */
};

/* The counters (bytes are the caller's buffer bytes). */
enum tally_mpi_fn { TALLY_MPI_ALLREDUCE, TALLY_MPI_IALLREDUCE, TALLY_MPI_RS_BLOCK,
		    TALLY_MPI_RS, TALLY_MPI_NFN };
struct tally_mpi_counters {
	uint64_t taken_calls[TALLY_MPI_NFN], taken_bytes[TALLY_MPI_NFN];
	uint64_t passed_calls[TALLY_MPI_NFN], passed_bytes[TALLY_MPI_NFN];
	uint64_t fallbacks;     /* collectives passed through because no appliance joined */
	uint64_t errors;        /* taken-over collectives that failed */
	uint64_t comms;         /* communicators that got a Tally job */
};

/* Settings from the environment (mpi_cfg.c). 0, or -EINVAL with a message naming the
 * variable. */
int tally_mpi_cfg_from_env(struct tally_mpi_cfg *cfg, char *err, size_t errlen);

#endif
