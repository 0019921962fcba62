/* SPDX-License-Identifier: Apache-2.0
 * mpi_comm.c — a communicator's Tally job: agreed once over PMPI at its first taken-over
 * collective, cached as an attribute, released (BYE) by MPI_Comm_free or MPI_Finalize.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "mpi_int.h"

static int comm_keyval = MPI_KEYVAL_INVALID;
static pthread_mutex_t comm_mu = PTHREAD_MUTEX_INITIALIZER; /* the list, one warning */
static struct tally_mpi_comm *comm_list;
static int comm_warned;

/* BYE and free what c holds; c itself stays while an attribute points at it. */
static void comm_release(struct tally_mpi_comm *c)
{
	pthread_mutex_lock(&comm_mu);
	for (struct tally_mpi_comm **p = &comm_list; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			break;
		}
	pthread_mutex_unlock(&comm_mu);
	if (c->agent) {
		struct tally_agent_stats st;

		/* Iallreduces still open (MPI_Comm_free lets pending operations complete) */
		for (unsigned i = 0; i < c->nshapes; i++)
			for (unsigned k = 0; k < TALLY_MPI_SLOTS; k++) {
				struct tally_mpi_req *r = c->shapes[i].busy[k];

				if (!r)
					continue;
				r->status = tally_agent_wait(c->agent, r->handle);
				r->done = 1;
				c->shapes[i].busy[k] = NULL;
			}

		tally_agent_get_stats(c->agent, &st);
		atomic_fetch_add(&tally_mpi_failovers, st.failovers);
		for (unsigned i = 0; i < tally_mpi_settings.agent.nappliances; i++) {
			int g = tally_agent_gso(c->agent, i);

			if (g > TALLY_AGENT_GSO_NONE) /* a local non-root rank sends none */
				atomic_store(&tally_mpi_gso[i], g);
		}
		tally_agent_destroy(c->agent); /* BYE to every appliance */
	}
	free(c->shapes);
	free(c->scratch);
	c->agent = NULL;
	c->shapes = NULL;
	c->scratch = NULL;
	c->nshapes = c->cap = 0;
	c->scratch_bytes = 0;
}

/* The attribute's delete callback: MPI_Comm_free, or MPI_Finalize's delete_attr. */
static int comm_delete(MPI_Comm comm, int keyval, void *val, void *extra)
{
	(void)comm, (void)keyval, (void)extra;
	comm_release(val);
	free(val);
	return MPI_SUCCESS;
}

int tally_mpi_comm_setup(void)
{
	return PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, comm_delete, &comm_keyval, NULL);
}

void tally_mpi_comm_release_all(void)
{
	if (comm_keyval != MPI_KEYVAL_INVALID)
		PMPI_Comm_delete_attr(MPI_COMM_WORLD, comm_keyval);
	/* communicators never freed: BYE now; MPI may still call comm_delete for them */
	for (;;) {
		pthread_mutex_lock(&comm_mu);
		struct tally_mpi_comm *c = comm_list;
		pthread_mutex_unlock(&comm_mu);
		if (!c)
			break;
		comm_release(c);
		c->size = 0; /* passes everything through from now on */
	}
}

int tally_mpi_fail(MPI_Comm comm, const char *fmt, ...)
{
	/* stderr gets the whole text (an agent's error with its drop summary runs past
	 * Open MPI's 256-byte MPI_MAX_ERROR_STRING); the MPI error string its start */
	char msg[1024], mpimsg[MPI_MAX_ERROR_STRING];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	atomic_fetch_add(&tally_mpi_errors, 1);
	fprintf(stderr, "%s\n", msg);
	int code = tally_mpi_errclass != MPI_ERR_OTHER ? tally_mpi_errclass : MPI_ERR_OTHER;
	size_t n = strnlen(msg, sizeof(mpimsg) - 1);

	memcpy(mpimsg, msg, n);
	mpimsg[n] = '\0';
	if (code != MPI_ERR_OTHER)
		PMPI_Add_error_string(code, mpimsg);
	PMPI_Comm_call_errhandler(comm, code);
	return code;
}

/* Rank 0 draws the job; every rank joins; all agree that all joined. */
static void comm_join(struct tally_mpi_comm *c, MPI_Comm comm)
{
	uint64_t id[3] = {0, 0, 0}; /* job id, token, incarnation */
	struct tally_agent_cfg cfg = tally_mpi_settings.agent;
	int err = 0, ok, all = 0;

	if (c->rank == 0 && getrandom(id, sizeof(id), 0) != sizeof(id))
		id[0] = 0; /* all ranks see the failure below */
	PMPI_Bcast(id, 3, MPI_UINT64_T, 0, comm);
	cfg.job_id = (uint32_t)(1u << 20 | (id[0] & 0xfffffu)); /* below 2^24: sharded lanes */
	cfg.token = id[1] | 1;
	cfg.incarnation = id[2] | 1;
	cfg.rank = c->rank;
	cfg.world_size = c->size;
	cfg.local_rank = 0;
	cfg.local_size = 1;
	cfg.local_agg = TALLY_AGENT_LOCAL_OFF;
	cfg.gpu_hosts = (unsigned)c->size;
	cfg.average = 0;
	if (id[0])
		c->agent = tally_agent_create(&cfg, &err, c->err, sizeof(c->err));
	else
		snprintf(c->err, sizeof(c->err), "no random job id (getrandom)");
	if (c->agent && tally_agent_set_order(c->agent, TALLY_AGENT_ORDER_SUBMIT)) {
		snprintf(c->err, sizeof(c->err), "%s", tally_agent_strerror(c->agent));
		tally_agent_destroy(c->agent);
		c->agent = NULL;
	}
	ok = c->agent != NULL;
	PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
	if (!all && c->agent) {
		tally_agent_destroy(c->agent);
		c->agent = NULL;
		snprintf(c->err, sizeof(c->err), "another rank of the communicator could not join");
	}
}

struct tally_mpi_comm *tally_mpi_comm_get(MPI_Comm comm, int *rc)
{
	struct tally_mpi_comm *c = NULL;
	int found = 0, inter = 0;

	*rc = MPI_SUCCESS;
	if (!tally_mpi_settings.enabled || comm_keyval == MPI_KEYVAL_INVALID)
		return NULL;
	if (PMPI_Comm_test_inter(comm, &inter) || inter)
		return NULL;
	PMPI_Comm_get_attr(comm, comm_keyval, &c, &found);
	if (!found) {
		c = calloc(1, sizeof(*c));
		if (!c)
			return NULL;
		PMPI_Comm_rank(comm, &c->rank);
		PMPI_Comm_size(comm, &c->size);
		if (c->size > 1)
			comm_join(c, comm);
		pthread_mutex_lock(&comm_mu);
		c->next = comm_list;
		comm_list = c;
		pthread_mutex_unlock(&comm_mu);
		if (c->agent)
			atomic_fetch_add(&tally_mpi_comms, 1);
		PMPI_Comm_set_attr(comm, comm_keyval, c);
	}
	if (c->size < 2)
		return NULL;
	if (c->agent)
		return c;
	if (tally_mpi_settings.fallback == TALLY_MPI_FALLBACK) {
		pthread_mutex_lock(&comm_mu);
		int warn = !comm_warned;
		comm_warned = 1;
		pthread_mutex_unlock(&comm_mu);
		if (warn && c->rank == 0)
			fprintf(stderr, "tally_mpi: warning: %s; TALLY_MPI_FALLBACK=fallback: "
				"plain MPI collectives instead\n", c->err);
		atomic_fetch_add(&tally_mpi_fallbacks, 1);
		return NULL;
	}
	/* the settings first: MPI's error string keeps only the start of the text */
	*rc = tally_mpi_fail(comm, "tally_mpi: no appliance for this communicator (TALLY_APPLIANCES; "
			     "set TALLY_MPI_FALLBACK=fallback to use plain MPI instead): %s", c->err);
	return NULL;
}

void *tally_mpi_comm_scratch(struct tally_mpi_comm *c, size_t bytes)
{
	if (bytes > c->scratch_bytes) {
		void *p = realloc(c->scratch, bytes);

		if (!p)
			return NULL;
		c->scratch = p;
		c->scratch_bytes = bytes;
	}
	return c->scratch;
}

static struct tally_mpi_shape *comm_shape(struct tally_mpi_comm *c, int dtype, size_t bytes)
{
	for (unsigned i = 0; i < c->nshapes; i++)
		if (c->shapes[i].dtype == dtype && c->shapes[i].bytes == bytes)
			return &c->shapes[i];
	if (c->nshapes == c->cap) {
		/* requests point at shapes: grow only while none is in flight on c */
		unsigned cap = c->cap ? c->cap * 2 : 16;
		struct tally_mpi_shape *s = realloc(c->shapes, cap * sizeof(*s));

		if (!s)
			return NULL;
		for (unsigned i = 0; i < c->nshapes; i++)
			for (unsigned k = 0; k < TALLY_MPI_SLOTS; k++)
				if (s[i].busy[k])
					s[i].busy[k]->shape = &s[i];
		c->shapes = s;
		c->cap = cap;
	}
	struct tally_mpi_shape *s = &c->shapes[c->nshapes++];
	memset(s, 0, sizeof(*s));
	s->dtype = dtype;
	s->bytes = bytes;
	for (unsigned k = 0; k < TALLY_MPI_SLOTS; k++)
		s->tensor[k] = -1;
	return s;
}

int tally_mpi_comm_tensor(struct tally_mpi_comm *c, int dtype, size_t bytes, int nb,
			  struct tally_mpi_shape **shape, unsigned *slot)
{
	struct tally_mpi_shape *s = comm_shape(c, dtype, bytes);
	char name[64];

	if (!s)
		return -ENOMEM;
	/* a blocking sum is over before the next call: slot 0 again (one tensor's memory on the
	 * appliance, not 8); Iallreduces rotate over the slots. Both the same on every rank. */
	unsigned k = nb ? s->seq++ % TALLY_MPI_SLOTS : 0;
	if (s->busy[k]) { /* the Iallreduce 8 uses ago is still open: finish it first */
		struct tally_mpi_req *r = s->busy[k];

		r->status = tally_agent_wait(c->agent, r->handle);
		r->done = 1;
		s->busy[k] = NULL;
	}
	if (s->tensor[k] < 0) {
		snprintf(name, sizeof(name), "mpi:%d:%zu:%u", dtype, bytes, k);
		int t = tally_agent_declare(c->agent, name, bytes, dtype, 0);
		if (t < 0)
			return t;
		s->tensor[k] = t;
	}
	*shape = s;
	*slot = k;
	return s->tensor[k];
}
