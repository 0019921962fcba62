/* SPDX-License-Identifier: Apache-2.0
 * agent_shm.c — what the local ranks of a machine share: one POSIX shared-memory segment
 * (sparse on /dev/shm: tmpfs allocates pages only when touched) created by local rank 0 and
 * attached by the others within the connect timeout, named from the job, token, node and a
 * per-launch id; and the k-way sum of the ranks' slots with sum_avx (f32 accumulation for
 * f16/bf16). Used by the summing local mode (agent_net_local.c) and the sharded one's CPU
 * collective (agent_coll_shm.c).
 *
 * The segment's first 64 bytes are a header: magic (written last by the root, after
 * ftruncate) and the local size, which every other rank checks against its own.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent_internal.h"
#include "tally_sum.h"

#define SHM_MAGIC 0x4c4c4154u /* "TALL" */

struct shm_hdr {
	uint32_t magic;
	uint32_t local_size;
};

void agent_shm_name(char *out, size_t len, const char *kind, const struct tally_agent_cfg *cfg,
		    const char *launch_id)
{
	unsigned node = (unsigned)(cfg->rank / cfg->local_size);

	snprintf(out, len, "/tally-%s-%u-%08x-n%u-%s", kind, cfg->job_id,
		 (unsigned)(cfg->token ^ (cfg->token >> 32)), node, launch_id ? launch_id : "0");
	for (char *p = out + 1; *p; p++)
		if (*p == '/')
			*p = '_';
}

void agent_shm_detach(struct agent_shm *s)
{
	if (s->base)
		munmap(s->base, s->size);
	if (s->fd >= 0)
		close(s->fd);
	if (s->owner && s->name[0])
		shm_unlink(s->name);
	s->base = NULL;
	s->fd = -1;
	s->owner = 0;
}

/* Non-root: wait until the root created the segment at its full size. */
static int shm_open_peer(struct agent_shm *s, const struct tally_agent_cfg *cfg, char *err,
			 size_t errlen)
{
	for (uint32_t waited = 0;; waited += 10) {
		struct stat st;

		s->fd = shm_open(s->name, O_RDWR, 0);
		if (s->fd >= 0 && fstat(s->fd, &st) == 0 && (size_t)st.st_size == s->size)
			return 0;
		if (s->fd >= 0)
			close(s->fd);
		s->fd = -1;
		if (waited >= cfg->connect_timeout_ms) {
			agent_errf(err, errlen, "local aggregation: local root (rank %d) did not create "
				   "%s (%zu bytes) within %u ms", cfg->rank - cfg->local_rank, s->name,
				   s->size, cfg->connect_timeout_ms);
			return -ETIMEDOUT;
		}
		usleep(10000);
	}
}

int agent_shm_attach(struct agent_shm *s, const struct tally_agent_cfg *cfg, const char *kind,
		     const char *launch_id, size_t size, char *err, size_t errlen)
{
	struct shm_hdr *h;
	int rc;

	memset(s, 0, sizeof(*s));
	s->fd = -1;
	s->size = size;
	agent_shm_name(s->name, sizeof(s->name), kind, cfg, launch_id);
	if (cfg->local_rank == 0) {
		shm_unlink(s->name); /* a stale segment of a crashed launch with the same id */
		s->fd = shm_open(s->name, O_RDWR | O_CREAT | O_EXCL, 0600);
		s->owner = s->fd >= 0;
		if (s->fd < 0 || ftruncate(s->fd, (off_t)size) != 0) {
			rc = -errno;
			agent_errf(err, errlen, "local aggregation: shm %s (%zu bytes): %s", s->name,
				   size, strerror(errno));
			goto fail;
		}
	} else if ((rc = shm_open_peer(s, cfg, err, errlen))) {
		goto fail;
	}
	s->base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
	if (s->base == MAP_FAILED) {
		s->base = NULL;
		rc = -errno;
		agent_errf(err, errlen, "local aggregation: mmap %s: %s", s->name, strerror(errno));
		goto fail;
	}
	h = (struct shm_hdr *)s->base;
	if (cfg->local_rank == 0) {
		h->local_size = (uint32_t)cfg->local_size;
		__atomic_store_n(&h->magic, SHM_MAGIC, __ATOMIC_RELEASE);
		return 0;
	}
	for (uint32_t waited = 0; __atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != SHM_MAGIC; waited++) {
		if (waited > cfg->connect_timeout_ms) {
			rc = -ETIMEDOUT;
			agent_errf(err, errlen, "local aggregation: %s never initialised", s->name);
			goto fail;
		}
		usleep(1000);
	}
	if (h->local_size != (uint32_t)cfg->local_size) {
		rc = -EINVAL;
		agent_errf(err, errlen, "local aggregation: local size %d here, %u at the local root "
			   "(segment %s)", cfg->local_size, h->local_size, s->name);
		goto fail;
	}
	return 0;
fail:
	agent_shm_detach(s);
	return rc;
}

/* Not FUTEX_PRIVATE: the word is in a MAP_SHARED segment other processes map. */
void agent_shm_wait(uint32_t *flag, uint32_t seen, uint64_t timeout_ns)
{
	struct timespec ts = {(time_t)(timeout_ns / 1000000000u), (long)(timeout_ns % 1000000000u)};

	syscall(SYS_futex, flag, FUTEX_WAIT, seen, &ts, NULL, 0);
}

void agent_shm_wake(uint32_t *flag)
{
	syscall(SYS_futex, flag, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

int agent_local_sum(int dtype, void *dst, const void *const *src, unsigned k, size_t n)
{
	float *acc;

	if (dtype == TALLY_DT_F32 || dtype == TALLY_DT_I32) {
		tally_sum_kway(dtype, dst, src, k, n);
		return 0;
	}
	/* half types: accumulate in f32, round once */
	acc = malloc(n * sizeof(float) + 1);
	if (!acc)
		return -ENOMEM;
	tally_sum_kway(dtype, acc, src, k, n);
	tally_sum_store(dtype, dst, acc, n);
	free(acc);
	return 0;
}
