/* SPDX-License-Identifier: Apache-2.0
 * mpi_req.c — a taken-over MPI_Iallreduce is an MPI generalized request, so the caller's
 * MPI_Request is a real one; MPI_Test / MPI_Wait / MPI_Waitall drive the agent's handle,
 * then MPI_Grequest_complete it and let PMPI finish (and free) the request as usual.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
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

/* 1 done (0 or negative errno in *status), 0 pending; the generalized request is
 * completed once, when first seen done. */
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
	if (!r->gdone) {
		PMPI_Grequest_complete(r->req);
		r->gdone = 1;
	}
	return 1;
}

/* A finished one freed; its MPI error (the communicator's handler decides). */
static int req_error(struct tally_mpi_req *r)
{
	MPI_Comm comm = r->mcomm;
	int st = r->status;

	if (!st) {
		free(r);
		return MPI_SUCCESS;
	}
	const char *why = r->comm->agent ? tally_agent_strerror(r->comm->agent) : "";
	int rc = tally_mpi_fail(comm, "tally_mpi: MPI_Iallreduce failed: %s (errno %d)", why, -st);
	free(r);
	return rc;
}

/* The Tally requests of reqs[] taken out of the open list into tr[] (NULL for others),
 * polled (block: waited for). Returns how many. */
static int req_take_all(int count, MPI_Request reqs[], struct tally_mpi_req **tr, int block)
{
	int n = 0;

	for (int i = 0; i < count; i++) {
		tr[i] = req_take(reqs[i]);
		if (tr[i]) {
			req_poll(tr[i], block);
			n++;
		}
	}
	return n;
}

/* After PMPI: 1 when every taken one is done (the rest polled again, not blocking). */
static int req_poll_all(int count, struct tally_mpi_req **tr)
{
	int all = 1;

	for (int i = 0; i < count; i++)
		if (tr[i] && !req_poll(tr[i], 0))
			all = 0;
	return all;
}

/* After PMPI: the ones it finished (handle now MPI_REQUEST_NULL) freed, their errors
 * returned (the last); the others back in the open list. */
static int req_settle(int count, MPI_Request reqs[], struct tally_mpi_req **tr, int rc)
{
	int er = MPI_SUCCESS;

	for (int i = 0; i < count; i++) {
		if (!tr[i])
			continue;
		if (reqs[i] == MPI_REQUEST_NULL) {
			int e = req_error(tr[i]);
			if (e != MPI_SUCCESS)
				er = e;
		} else {
			req_put_back(tr[i]);
		}
	}
	return er != MPI_SUCCESS ? er : rc;
}

/* tr[] for count requests: on the stack for the usual few. */
#define REQ_STACK 32
static struct tally_mpi_req **req_array(int count, struct tally_mpi_req **stack)
{
	if (count <= REQ_STACK)
		return stack;
	return malloc(sizeof(*stack) * (size_t)count);
}

#define REQ_ARRAY(count)                                                                   \
	struct tally_mpi_req *tr_stack[REQ_STACK], **tr = req_array(count, tr_stack);     \
	if (!tr)                                                                           \
		return tally_mpi_fail(MPI_COMM_WORLD, "tally_mpi: out of memory (%d requests)", \
				      count)
#define REQ_ARRAY_FREE()                                                                   \
	do {                                                                               \
		if (tr != tr_stack)                                                        \
			free(tr);                                                          \
	} while (0)

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
	return req_settle(1, req, &r, rc);
}

int MPI_Wait(MPI_Request *req, MPI_Status *status)
{
	struct tally_mpi_req *r = req_take(*req);

	if (!r)
		return PMPI_Wait(req, status);
	req_poll(r, 1);
	int rc = PMPI_Wait(req, status);
	return req_settle(1, req, &r, rc);
}

int MPI_Testall(int count, MPI_Request reqs[], int *flag, MPI_Status statuses[])
{
	REQ_ARRAY(count);
	int rc;

	/* a Tally one not done yet: PMPI_Testall says false and frees none (MPI's rule) */
	req_take_all(count, reqs, tr, 0);
	rc = PMPI_Testall(count, reqs, flag, statuses);
	rc = req_settle(count, reqs, tr, rc);
	REQ_ARRAY_FREE();
	return rc;
}

/* Waitall: PMPI_Testall keeps MPI progressing (a plain send another rank needs before it
 * pushes) while the Tally ones finish; then PMPI_Waitall. */
int MPI_Waitall(int count, MPI_Request reqs[], MPI_Status statuses[])
{
	REQ_ARRAY(count);
	int rc = MPI_SUCCESS, flag = 0;

	if (req_take_all(count, reqs, tr, 0)) {
		while (!req_poll_all(count, tr)) {
			rc = PMPI_Testall(count, reqs, &flag, statuses);
			if (rc != MPI_SUCCESS)
				break;
			sched_yield();
		}
	}
	if (rc == MPI_SUCCESS)
		rc = PMPI_Waitall(count, reqs, statuses);
	rc = req_settle(count, reqs, tr, rc);
	REQ_ARRAY_FREE();
	return rc;
}

int MPI_Testany(int count, MPI_Request reqs[], int *idx, int *flag, MPI_Status *status)
{
	REQ_ARRAY(count);
	req_take_all(count, reqs, tr, 0);
	int rc = PMPI_Testany(count, reqs, idx, flag, status);
	rc = req_settle(count, reqs, tr, rc);
	REQ_ARRAY_FREE();
	return rc;
}

int MPI_Waitany(int count, MPI_Request reqs[], int *idx, MPI_Status *status)
{
	REQ_ARRAY(count);
	int rc, flag = 0;

	if (!req_take_all(count, reqs, tr, 0)) {
		rc = PMPI_Waitany(count, reqs, idx, status);
	} else {
		while ((rc = PMPI_Testany(count, reqs, idx, &flag, status)) == MPI_SUCCESS &&
		       !flag) {
			sched_yield();
			req_poll_all(count, tr);
		}
	}
	rc = req_settle(count, reqs, tr, rc);
	REQ_ARRAY_FREE();
	return rc;
}

int MPI_Testsome(int incount, MPI_Request reqs[], int *outcount, int idx[],
		 MPI_Status statuses[])
{
	REQ_ARRAY(incount);
	req_take_all(incount, reqs, tr, 0);
	int rc = PMPI_Testsome(incount, reqs, outcount, idx, statuses);
	rc = req_settle(incount, reqs, tr, rc);
	REQ_ARRAY_FREE();
	return rc;
}

int MPI_Waitsome(int incount, MPI_Request reqs[], int *outcount, int idx[],
		 MPI_Status statuses[])
{
	REQ_ARRAY(incount);
	int rc;

	if (!req_take_all(incount, reqs, tr, 0)) {
		rc = PMPI_Waitsome(incount, reqs, outcount, idx, statuses);
	} else {
		while ((rc = PMPI_Testsome(incount, reqs, outcount, idx, statuses)) ==
			       MPI_SUCCESS && *outcount == 0) {
			sched_yield();
			req_poll_all(incount, tr);
		}
	}
	rc = req_settle(incount, reqs, tr, rc);
	REQ_ARRAY_FREE();
	return rc;
}

/* MPI-3.1 5.12: freeing a nonblocking collective's request is erroneous; Open MPI 4.1 and
 * MPICH 4.0 refuse it (MPI_ERR_REQUEST, the request left as it was), and so does this. */
int MPI_Request_free(MPI_Request *req)
{
	struct tally_mpi_req *r = req_take(*req);

	if (!r)
		return PMPI_Request_free(req);
	MPI_Comm comm = r->mcomm;
	req_put_back(r);
	fprintf(stderr, "tally_mpi: MPI_Request_free of an MPI_Iallreduce request is erroneous "
		"(MPI-3.1 5.12): complete it with MPI_Wait or MPI_Test*\n");
	PMPI_Comm_call_errhandler(comm, MPI_ERR_REQUEST);
	return MPI_ERR_REQUEST;
}
