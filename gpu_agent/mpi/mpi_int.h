/* SPDX-License-Identifier: Apache-2.0
 * mpi_int.h — libtally_mpi's internals shared by its files (not installed).
 */
#ifndef MPI_INT_H
#define MPI_INT_H

#include <mpi.h>
#include <stdatomic.h>

#include "tally_mpi.h"

/* One (dtype, bytes) the communicator summed: its tensors, one per slot, declared on
 * first use; seq counts its uses (the same on every rank: MPI's order of collectives). */
struct tally_mpi_shape {
	int dtype;
	size_t bytes;
	unsigned seq;
	int tensor[TALLY_MPI_SLOTS];
	struct tally_mpi_req *busy[TALLY_MPI_SLOTS]; /* an Iallreduce in flight there */
};

/* A communicator's Tally job (its cached attribute). */
struct tally_mpi_comm {
	struct tally_agent *agent; /* NULL: no appliance joined (fallback or fail) */
	int rank, size;
	char err[320];             /* why agent is NULL */
	struct tally_mpi_shape *shapes;
	unsigned nshapes, cap;
	void *scratch;             /* reduce_scatter's whole vector */
	size_t scratch_bytes;
	struct tally_mpi_comm *next; /* every live one, for MPI_Finalize */
};

/* A taken-over MPI_Iallreduce: a generalized request completed by every Test / Wait call. */
struct tally_mpi_req {
	MPI_Request req;
	MPI_Comm mcomm;            /* for its error handler */
	struct tally_mpi_comm *comm;
	struct tally_mpi_shape *shape;
	unsigned slot;
	int handle;
	int done, status;          /* waited for early (its slot was needed) */
	int gdone;                 /* MPI_Grequest_complete called */
	struct tally_mpi_req *next;
};

extern struct tally_mpi_cfg tally_mpi_settings;
extern _Atomic uint64_t tally_mpi_count[4][TALLY_MPI_NFN]; /* taken c/b, passed c/b */
extern _Atomic uint64_t tally_mpi_fallbacks, tally_mpi_errors, tally_mpi_comms;
extern _Atomic uint64_t tally_mpi_failovers; /* the agents' (appliances moved off) */
/* per appliance, enum tally_agent_gso as the last communicator released saw it */
extern _Atomic int tally_mpi_gso[TALLY_AGENT_MAX_APPLIANCES];
extern int tally_mpi_errclass;

/* mpi_comm.c */
int tally_mpi_comm_setup(void);
/* The communicator's job, created (collectively) on first use; NULL when nothing is to be
 * taken over on it (*rc = MPI_SUCCESS: pass through; else the MPI error to return). */
struct tally_mpi_comm *tally_mpi_comm_get(MPI_Comm comm, int *rc);
void tally_mpi_comm_release_all(void);
/* The tensor for the next use of (dtype, bytes) (nb: an Iallreduce's, a slot of its own;
 * else slot 0); waits for an Iallreduce still in that slot. Negative errno. */
int tally_mpi_comm_tensor(struct tally_mpi_comm *c, int dtype, size_t bytes, int nb,
			  struct tally_mpi_shape **shape, unsigned *slot);
void *tally_mpi_comm_scratch(struct tally_mpi_comm *c, size_t bytes);
/* An error named to the caller through the communicator's error handler. */
int tally_mpi_fail(MPI_Comm comm, const char *fmt, ...);

/* mpi_req.c: a generalized request for r (r->req set) entered in the open list. */
int tally_mpi_req_start(struct tally_mpi_req *r);

#define TALLY_MPI_TAKEN_C 0
#define TALLY_MPI_TAKEN_B 1
#define TALLY_MPI_PASSED_C 2
#define TALLY_MPI_PASSED_B 3

#endif
