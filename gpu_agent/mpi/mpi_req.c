/* SPDX-License-Identifier: Apache-2.0
 * mpi_req.c — a taken-over MPI_Iallreduce is an MPI generalized request, so the caller's
 * MPI_Request is a real one; MPI_Test / MPI_Wait / MPI_Waitall drive the agent's handle,
 * then MPI_Grequest_complete it and let PMPI finish (and free) the request as usual.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "mpi_int.h"

static pthread_mutex_t req_mu = PTHREAD_MUTEX_INITIALIZER;
static struct tally_mpi_req *req_list;

static int req_query(void *extra, MPI_Status *st)
{
	(void)extra;
	PMPI_Status_set_elements(st, MPI_BYTE, 0);
	PMPI_Status_set_cancelled(st, 0);
	st->MPI_SOURCE = MPI_UNDEFINED;
	st->MPI_TAG = MPI_UNDEFINED;
	return MPI_SUCCESS;
}

static int req_free(void *extra)
{
	(void)extra;
	return MPI_SUCCESS;
}

static int req_cancel(void *extra, int complete)
{
	(void)extra, (void)complete;
	return MPI_SUCCESS; /* a sum on the appliance cannot be taken back: it completes */
}

int tally_mpi_req_start(struct tally_mpi_req *r)
{
	int rc = PMPI_Grequest_start(req_query, req_free, req_cancel, r, &r->req);

	if (rc != MPI_SUCCESS)
		return rc;
	pthread_mutex_lock(&req_mu);
	r->next = req_list;
	req_list = r;
	pthread_mutex_unlock(&req_mu);
	return MPI_SUCCESS;
}

/* Ours and still open: removed from the list (the caller finishes it or puts it back). */
static struct tally_mpi_req *req_take(MPI_Request req)
{
	struct tally_mpi_req *r = NULL;

	if (req == MPI_REQUEST_NULL)
		return NULL;
	pthread_mutex_lock(&req_mu);
	for (struct tally_mpi_req **p = &req_list; *p; p = &(*p)->next)
		if ((*p)->req == req) {
			r = *p;
			*p = r->next;
			break;
		}
	pthread_mutex_unlock(&req_mu);
	return r;
}

static void req_put_back(struct tally_mpi_req *r)
{
	pthread_mutex_lock(&req_mu);
	r->next = req_list;
	req_list = r;
	pthread_mutex_unlock(&req_mu);
}

/* 1 done (0 or negative errno in *status), 0 pending. */
static int req_poll(struct tally_mpi_req *r, int block)
{
	if (!r->done) {
		int st = block ? tally_agent_wait(r->comm->agent, r->handle)
			       : tally_agent_test(r->comm->agent, r->handle);
		if (st == 0 && !block)
			return 0;
		r->status = st < 0 ? st : 0;
		r->done = 1;
		if (r->shape->busy[r->slot] == r)
			r->shape->busy[r->slot] = NULL;
	}
	PMPI_Grequest_complete(r->req);
	return 1;
}

/* A failed one's MPI error (the communicator's handler decides). */
static int req_error(struct tally_mpi_req *r)
{
	MPI_Comm comm = r->mcomm;
	int st = r->status;
	const char *why = r->comm->agent ? tally_agent_strerror(r->comm->agent) : "";

	free(r);
	if (!st)
		return MPI_SUCCESS;
	return tally_mpi_fail(comm, "tally_mpi: MPI_Iallreduce failed: %s (errno %d)", why, -st);
}

int MPI_Test(MPI_Request *req, int *flag, MPI_Status *status)
{
	struct tally_mpi_req *r = req_take(*req);

	if (!r)
		return PMPI_Test(req, flag, status);
	if (!req_poll(r, 0)) {
		req_put_back(r);
		*flag = 0;
		return MPI_SUCCESS;
	}
	int rc = PMPI_Test(req, flag, status);
	int er = req_error(r);
	return er != MPI_SUCCESS ? er : rc;
}

int MPI_Wait(MPI_Request *req, MPI_Status *status)
{
	struct tally_mpi_req *r = req_take(*req);

	if (!r)
		return PMPI_Wait(req, status);
	req_poll(r, 1);
	int rc = PMPI_Wait(req, status);
	int er = req_error(r);
	return er != MPI_SUCCESS ? er : rc;
}

int MPI_Waitall(int count, MPI_Request reqs[], MPI_Status statuses[])
{
	int er = MPI_SUCCESS;

	for (int i = 0; i < count; i++) {
		struct tally_mpi_req *r = req_take(reqs[i]);

		if (!r)
			continue;
		req_poll(r, 1);
		int e = req_error(r);
		if (e != MPI_SUCCESS)
			er = e;
	}
	int rc = PMPI_Waitall(count, reqs, statuses);
	return er != MPI_SUCCESS ? er : rc;
}
