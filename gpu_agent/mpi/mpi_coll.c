/* SPDX-License-Identifier: Apache-2.0
 * mpi_coll.c — the collectives libtally_mpi takes over: MPI_Allreduce, MPI_Iallreduce,
 * MPI_Reduce_scatter_block, MPI_Reduce_scatter. A call is taken over when it is an
 * MPI_SUM of a contiguous MPI_FLOAT, 32-bit integer or 16-bit float type (MPICH's
 * MPIX_C_FLOAT16, the appliance's f16; Open MPI 4.1 has no 16-bit float type), of at
 * least the threshold's bytes, on an intra-communicator of 2 or more ranks whose job
 * joined; else PMPI does it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_int.h"

/* enum tally_dtype's values (tally_sum.h; tally_agent_declare takes them as int) */
enum { COLL_F32 = 0, COLL_F16 = 1, COLL_I32 = 3 };

/* The dtype for an MPI type we sum, or -1. */
static int coll_dtype(MPI_Datatype t)
{
	if (t == MPI_FLOAT)
		return COLL_F32;
	if (t == MPI_INT32_T || (t == MPI_INT && sizeof(int) == 4))
		return COLL_I32;
#ifdef MPIX_C_FLOAT16 /* MPICH >= 4.0: IEEE binary16, the appliance's f16 */
	if (t == MPIX_C_FLOAT16)
		return COLL_F16;
#endif
	return -1;
}

/* Bytes per element of a dtype coll_dtype returns. */
static size_t coll_esize(int dtype)
{
	return dtype == COLL_F16 ? 2 : 4;
}

static void coll_count(int which, enum tally_mpi_fn fn, size_t bytes)
{
	atomic_fetch_add(&tally_mpi_count[which][fn], 1);
	atomic_fetch_add(&tally_mpi_count[which + 1][fn], bytes);
}

/* The communicator's job when this call (total elements n of type t, op) is taken over;
 * NULL to pass through (*rc MPI_SUCCESS) or to fail (*rc the error). */
static struct tally_mpi_comm *coll_take(MPI_Comm comm, size_t n, MPI_Datatype t, MPI_Op op,
					int *dtype, int *rc)
{
	*rc = MPI_SUCCESS;
	*dtype = coll_dtype(t);
	if (op != MPI_SUM || *dtype < 0 || n == 0 ||
	    n * coll_esize(*dtype) < tally_mpi_settings.threshold)
		return NULL;
	return tally_mpi_comm_get(comm, rc);
}

static size_t coll_type_bytes(MPI_Datatype t, size_t n)
{
	int sz = 0;

	if (PMPI_Type_size(t, &sz) != MPI_SUCCESS || sz < 0)
		return 0;
	return (size_t)sz * n;
}

/* Sum buf (bytes) on c, in place, blocking. */
static int coll_sum(struct tally_mpi_comm *c, MPI_Comm comm, void *buf, size_t bytes,
		    int dtype, const char *fn)
{
	struct tally_mpi_shape *s;
	unsigned k;
	int t = tally_mpi_comm_tensor(c, dtype, bytes, 0, &s, &k);
	int st = t < 0 ? t : tally_agent_push_pull(c->agent, t, buf, bytes, TALLY_AGENT_CPU,
						     NULL, NULL, NULL);

	if (st >= 0)
		st = tally_agent_wait(c->agent, st);
	if (st < 0)
		return tally_mpi_fail(comm, "tally_mpi: %s of %zu bytes failed: %s (errno %d; "
				      "appliances: TALLY_APPLIANCES, deadline: TALLY_OP_TIMEOUT_MS)",
				      fn, bytes, tally_agent_strerror(c->agent), -st);
	return MPI_SUCCESS;
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype t, MPI_Op op,
		  MPI_Comm comm)
{
	int dtype, rc;
	struct tally_mpi_comm *c = count > 0 ? coll_take(comm, (size_t)count, t, op, &dtype, &rc)
					     : (rc = MPI_SUCCESS, NULL);
	size_t bytes;

	if (rc != MPI_SUCCESS)
		return rc;
	if (!c) {
		coll_count(TALLY_MPI_PASSED_C, TALLY_MPI_ALLREDUCE,
			   coll_type_bytes(t, count > 0 ? (size_t)count : 0));
		return PMPI_Allreduce(sendbuf, recvbuf, count, t, op, comm);
	}
	bytes = (size_t)count * coll_esize(dtype);
	coll_count(TALLY_MPI_TAKEN_C, TALLY_MPI_ALLREDUCE, bytes);
	if (sendbuf != MPI_IN_PLACE && sendbuf != recvbuf)
		memcpy(recvbuf, sendbuf, bytes);
	return coll_sum(c, comm, recvbuf, bytes, dtype, "MPI_Allreduce");
}

int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype t, MPI_Op op,
		   MPI_Comm comm, MPI_Request *req)
{
	int dtype, rc;
	struct tally_mpi_comm *c = count > 0 ? coll_take(comm, (size_t)count, t, op, &dtype, &rc)
					     : (rc = MPI_SUCCESS, NULL);
	size_t bytes;
	struct tally_mpi_req *r;

	if (rc != MPI_SUCCESS)
		return rc;
	if (!c) {
		coll_count(TALLY_MPI_PASSED_C, TALLY_MPI_IALLREDUCE,
			   coll_type_bytes(t, count > 0 ? (size_t)count : 0));
		return PMPI_Iallreduce(sendbuf, recvbuf, count, t, op, comm, req);
	}
	bytes = (size_t)count * coll_esize(dtype);
	coll_count(TALLY_MPI_TAKEN_C, TALLY_MPI_IALLREDUCE, bytes);
	if (sendbuf != MPI_IN_PLACE && sendbuf != recvbuf)
		memcpy(recvbuf, sendbuf, bytes);
	r = calloc(1, sizeof(*r));
	if (!r)
		return tally_mpi_fail(comm, "tally_mpi: MPI_Iallreduce: out of memory");
	int tn = tally_mpi_comm_tensor(c, dtype, bytes, 1, &r->shape, &r->slot);
	int h = tn < 0 ? tn : tally_agent_push_pull(c->agent, tn, recvbuf, bytes, TALLY_AGENT_CPU,
						     NULL, NULL, NULL);
	if (h < 0) {
		free(r);
		return tally_mpi_fail(comm, "tally_mpi: MPI_Iallreduce of %zu bytes failed: %s "
				      "(errno %d)", bytes, tally_agent_strerror(c->agent), -h);
	}
	r->mcomm = comm;
	r->comm = c;
	r->handle = h;
	r->shape->busy[r->slot] = r;
	rc = tally_mpi_req_start(r);
	if (rc != MPI_SUCCESS) {
		r->shape->busy[r->slot] = NULL;
		tally_agent_wait(c->agent, h);
		free(r);
		return rc;
	}
	*req = r->req;
	return MPI_SUCCESS;
}

/* The whole vector (n elements, counts[i] of them rank i's) summed in scratch; the
 * caller's block copied out. */
static int coll_rs(struct tally_mpi_comm *c, MPI_Comm comm, const void *sendbuf,
		   void *recvbuf, size_t n, size_t off, size_t mine, int dtype, const char *fn)
{
	size_t es = coll_esize(dtype);
	void *tmp = tally_mpi_comm_scratch(c, n * es);

	if (!tmp)
		return tally_mpi_fail(comm, "tally_mpi: %s: out of memory (%zu bytes)", fn, n * es);
	memcpy(tmp, sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf, n * es);
	int rc = coll_sum(c, comm, tmp, n * es, dtype, fn);
	if (rc == MPI_SUCCESS)
		memmove(recvbuf, (char *)tmp + off * es, mine * es);
	return rc;
}

int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
			     MPI_Datatype t, MPI_Op op, MPI_Comm comm)
{
	int dtype, rc = MPI_SUCCESS, size = 0, rank = 0;
	struct tally_mpi_comm *c = NULL;

	PMPI_Comm_size(comm, &size);
	size_t n = (size_t)(recvcount > 0 ? recvcount : 0) * (size_t)(size > 0 ? size : 0);
	if (n)
		c = coll_take(comm, n, t, op, &dtype, &rc);
	if (rc != MPI_SUCCESS)
		return rc;
	if (!c) {
		coll_count(TALLY_MPI_PASSED_C, TALLY_MPI_RS_BLOCK, coll_type_bytes(t, n));
		return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, t, op, comm);
	}
	coll_count(TALLY_MPI_TAKEN_C, TALLY_MPI_RS_BLOCK, n * coll_esize(dtype));
	PMPI_Comm_rank(comm, &rank);
	return coll_rs(c, comm, sendbuf, recvbuf, n, (size_t)rank * (size_t)recvcount,
		       (size_t)recvcount, dtype, "MPI_Reduce_scatter_block");
}

int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
		       MPI_Datatype t, MPI_Op op, MPI_Comm comm)
{
	int dtype, rc = MPI_SUCCESS, size = 0, rank = 0;
	size_t n = 0, off = 0;
	struct tally_mpi_comm *c = NULL;

	PMPI_Comm_size(comm, &size);
	PMPI_Comm_rank(comm, &rank);
	for (int i = 0; i < size; i++) {
		if (i == rank)
			off = n;
		n += recvcounts[i] > 0 ? (size_t)recvcounts[i] : 0;
	}
	if (n)
		c = coll_take(comm, n, t, op, &dtype, &rc);
	if (rc != MPI_SUCCESS)
		return rc;
	if (!c) {
		coll_count(TALLY_MPI_PASSED_C, TALLY_MPI_RS, coll_type_bytes(t, n));
		return PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, t, op, comm);
	}
	coll_count(TALLY_MPI_TAKEN_C, TALLY_MPI_RS, n * coll_esize(dtype));
	return coll_rs(c, comm, sendbuf, recvbuf, n, off,
		       recvcounts[rank] > 0 ? (size_t)recvcounts[rank] : 0, dtype,
		       "MPI_Reduce_scatter");
}
