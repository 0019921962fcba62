/* SPDX-License-Identifier: Apache-2.0
 * tally_agent.h — libtally_agent, the training-host side of Tally (BytePS's communication
 * service): tensors are declared once, split into partitions of partition_bytes, each
 * partition is one key owned by one appliance; push_pull sums a tensor across all workers.
 *
 *  - Keys: partitions numbered in declaration order (every rank must declare the same
 *    tensors in the same order, as DDP's buckets are). Keys are placed on appliances by the
 *    BytePS optimal split weighted by link rate (tally_agent_split), deterministic, so every
 *    rank computes the same placement; each key is REGISTERed with its appliance at declare.
 *  - Scheduling (ByteScheduler): partitions start in one global order, the same on every
 *    rank: round by round (a tensor's n-th push_pull), within a round by priority (lower
 *    value = lower layer index first; ties: declaration order; round 0, the first pushes:
 *    declaration order only), then partition order, while
 *    the bytes in flight stay within credit_bytes (one partition may always start). A
 *    partition completes only when every worker pushed it, so workers that ordered their
 *    partitions differently would hold each other's windows for ever; a partition waits
 *    for what sorts before it even when that was not submitted yet (tally_agent_set_ordered).
 *  - A progress thread owns the client sessions and drives them; push_pull returns at once.
 *  - Averaging divides every sum by world_size (f32, f16, bf16; not i32).
 *  - Intra-machine aggregation (cfg.local_agg; needs world_size % local_size == 0 and ranks
 *    contiguous per machine; the machine index is rank / local_size):
 *    TALLY_AGENT_LOCAL_SUM (1, "CPU-assisted"): local ranks sum through shared memory with
 *    sum_avx, local rank 0 pushes the machine's sum (as rank = machine, world = machines),
 *    the result is shared back.
 *    TALLY_AGENT_LOCAL_SHARD (2, BytePS's pipeline): local rank lr owns shard lr of every
 *    tensor (ceil(elements / local_size) elements each, the last ones padded). push_pull
 *    reduce-scatters the tensor over the local ranks (host buffers: shared memory + sum_avx;
 *    CUDA buffers: NCCL on `stream`, the shard copied to pinned host memory), pushes the
 *    shard on the rank's own lane — a network session as rank = machine, world = machines,
 *    job = job_id | lr << 24 (job ids must stay below 2^24; an operator admits the jobs
 *    job, job | 1 << 24, ... with the same token) — then averages by the GLOBAL world size
 *    and all-gathers back. Every local rank must call push_pull for the same tensors in the
 *    same order, from one thread (DDP does); a push_pull blocks until the local ranks'
 *    reduce-scatter is done. tally_agent_partitions then lists the shard's partitions
 *    (offsets within the shard), stats count this lane's bytes.
 *  - Devices: TALLY_AGENT_CPU buffers are used in place. TALLY_AGENT_CUDA buffers (builds
 *    with CUDA) are copied to pinned host memory on `stream`, pushed, and copied back (in the
 *    sharded mode: through NCCL, builds with NCCL; -ENOTSUP otherwise).
 * All functions return 0 / an id >= 0, or a negative errno; the text of the last error is in
 * tally_agent_strerror() (or the errbuf of the create/config calls).
 */
#ifndef TALLY_AGENT_H
#define TALLY_AGENT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TALLY_AGENT_MAX_APPLIANCES 32
#define TALLY_AGENT_NAME_MAX 128

enum tally_agent_local {
	TALLY_AGENT_LOCAL_OFF = 0,
	TALLY_AGENT_LOCAL_SUM = 1,   /* local rank 0 pushes the machine's sum */
	TALLY_AGENT_LOCAL_SHARD = 2, /* reduce-scatter, every local rank pushes its shard */
};

enum tally_agent_device {
	TALLY_AGENT_CPU = 0,
	TALLY_AGENT_CUDA = 1,
};

struct tally_agent_appliance {
	char host[64];
	uint16_t port;        /* UDP base port (core 0) */
	double rate_gbps;     /* link rate, weights the key split (default 100) */
	int colocated;        /* a summation service on a GPU host (BytePS M_gpu share) */
};

struct tally_agent_cfg {
	uint32_t job_id;
	uint64_t token;
	int rank, world_size;       /* -1: from RANK / WORLD_SIZE, else 0 / 1 */
	int local_rank, local_size; /* -1: from LOCAL_RANK / LOCAL_WORLD_SIZE, else 0 / 1 */
	unsigned nappliances;
	struct tally_agent_appliance appliances[TALLY_AGENT_MAX_APPLIANCES];
	unsigned gpu_hosts;         /* n of the optimal split (default: world_size / local_size) */
	size_t partition_bytes;     /* default 1 MiB */
	size_t credit_bytes;        /* bytes in flight, default 4 MiB */
	int average;                /* divide sums by world_size */
	uint32_t connect_timeout_ms;/* JOIN of each appliance, default 10000 */
	uint32_t op_timeout_ms;     /* a partition without result fails, default 30000 */
	uint32_t window;            /* client: chunks in flight per appliance core (0: default) */
	uint32_t max_chunk_bytes;   /* client: largest payload (0: default) */
	uint32_t rto_init_us;       /* client: first retransmission timeout (0: default) */
	uint16_t quorum;            /* per key: 0 = all workers (eager-SGD otherwise) */
	unsigned max_tensors;       /* default 4096 */
	unsigned max_handles;       /* concurrent push_pulls, default 1024 */
	int deterministic;          /* keys summed in rank order: bits independent of arrival */
	uint32_t credit_stall_ms;   /* ignored (was: overdraft after a stall; it made the start
				     * order timing-dependent). Kept for compatibility.
				     * Formerly: window full and nothing completed this long: start one
				     * more partition anyway (deadlock avoidance), default 10 */
	int local_agg;              /* enum tally_agent_local: 1 sum the local ranks in shared
				     * memory first, only local rank 0 of each machine talks to
				     * the appliances; 2 sharded (see above) (both need
				     * world_size % local_size == 0, ranks contiguous per machine) */
	size_t local_shm_bytes;     /* sparse shared segment, default 4 GiB */
	uint32_t rto_max_us;        /* client: largest retransmission timeout (0: default) */
	uint32_t rto_min_us;        /* client: floor of the adaptive timeout (0: default, 20 us,
				     * for dedicated cores; raise it where workers share CPUs,
				     * or a descheduled worker reads as loss) */
	uint64_t incarnation;       /* this launch of the job, in every JOIN: a new value replaces
				     * the appliance's state of an earlier launch (a relaunch after
				     * a crash needs no operator). All ranks of a launch must agree:
				     * TALLY_INCARNATION, else TORCHELASTIC_RUN_ID hashed with
				     * TORCHELASTIC_RESTART_COUNT (torchrun gives every rank the same;
				     * its default run id "none" does not count); else, world_size 1 only, a
				     * random value at create; else 0 (none: a relaunch waits for
				     * the appliance's job idle timeout) */
	char auth_key_file[256];    /* the job's key file (TALLY_AUTH_KEY_FILE): every packet is
				     * signed and verified (AES-256-GMAC), for a job the operator
				     * admitted with that key; "" none */
};

/* Defaults for everything; rank etc. set to -1 (resolved at create). */
void tally_agent_cfg_defaults(struct tally_agent_cfg *cfg);
/* Overrides from the environment: TALLY_APPLIANCES=host[:port][@gbps][+colo],...,
 * TALLY_JOB_ID, TALLY_TOKEN (decimal or 0x hex), TALLY_PARTITION_BYTES, TALLY_CREDIT_BYTES,
 * TALLY_AVERAGE=0|1, TALLY_DETERMINISTIC=0|1, TALLY_LOCAL_AGG=0|1|2|off|sum|shard,
 * TALLY_LOCAL_SHM_BYTES, TALLY_CREDIT_STALL_MS, TALLY_WINDOW, TALLY_MAX_CHUNK_BYTES, TALLY_RTO_INIT_US,
 * TALLY_RTO_MAX_US, TALLY_RTO_MIN_US, TALLY_CONNECT_TIMEOUT_MS, TALLY_OP_TIMEOUT_MS, TALLY_QUORUM,
 * TALLY_INCARNATION (else TORCHELASTIC_RUN_ID, hashed: see incarnation), TALLY_AUTH_KEY_FILE,
 * and the
 * ranks from TALLY_RANK/RANK, TALLY_WORLD_SIZE/WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE.
 * With neither TALLY_JOB_ID nor TALLY_TOKEN set and a torchrun run id (TORCHELASTIC_RUN_ID,
 * not "none"), the job id is derived from the run id and the world size (2^20 .. 2^24-1),
 * the token from the run id, the incarnation from the run id and TORCHELASTIC_RESTART_COUNT;
 * the Python package agrees a random token through torch's store instead (tally.identity).
 * 0, or -EINVAL with a message naming the variable. (TALLY_GSO=0|1, UDP segmentation
 * offload on the workers' sends, is read by tally_agent_create: 1 forces it on, 0 off;
 * unset: on for each appliance whose JOIN_OK offers TALLY_CAP_GSO (tally-udpd), off for the
 * others (tallyd): tally_agent_gso.) */
int tally_agent_cfg_from_env(struct tally_agent_cfg *cfg, char *err, size_t errlen);
/* Parses "host[:port][@gbps][+colo],..." into cfg->appliances. 0 or -EINVAL (message). */
int tally_agent_parse_appliances(struct tally_agent_cfg *cfg, const char *list, char *err,
				 size_t errlen);
/* Checks a resolved configuration. 0 or -EINVAL (message). */
int tally_agent_cfg_check(const struct tally_agent_cfg *cfg, char *err, size_t errlen);

/* The BytePS optimal split (DESIGN.md): for n GPU hosts and k dedicated (CPU) appliances,
 * the fraction of the gradient bytes each dedicated appliance gets (*cpu) and each colocated
 * one gets (*gpu): M_cpu = 2(n-1)/(n^2+kn-2k), M_gpu = (n-k)/(n^2+kn-2k). With no colocated
 * appliance every dedicated one gets 1/k. 0 or -EINVAL. */
int tally_agent_split(unsigned n, unsigned k, unsigned ncolocated, double *cpu, double *gpu);

struct tally_agent;

/* Resolves the configuration, JOINs every appliance (blocking, connect_timeout_ms each) and
 * starts the progress thread. NULL with *err and errbuf ("appliance 2 (10.0.0.3:9170)
 * unreachable: no answer to JOIN after 10000 ms") on failure. */
struct tally_agent *tally_agent_create(const struct tally_agent_cfg *cfg, int *err,
				       char *errbuf, size_t errlen);
/* Fails what is still pending with -ECANCELED, says BYE, stops the thread, frees. */
void tally_agent_destroy(struct tally_agent *a);

/* Declare a tensor (dtype: enum tally_dtype of tally_sum.h: 0 f32, 1 f16, 2 bf16, 3 i32).
 * Registers its partitions' keys with their appliances (blocking). Returns the tensor id.
 * Declaring an existing name again with the same bytes/dtype returns its id; with other
 * bytes or dtype it is -EINVAL ("tensor 'x' changed shape: declared 400 bytes f32, now ..."). */
int tally_agent_declare(struct tally_agent *a, const char *name, size_t bytes, int dtype,
			int priority);
/* tally_agent_declare with the tensor's own average setting (instead of cfg.average), fixed
 * before its keys are registered: an f16 / bf16 tensor that averages is averaged by the
 * appliance on its f32 sum and rounded once (TALLY_KEY_AVERAGE; 4 x 40000 averages to 40000,
 * not inf) where tally_agent_appliance_averages says so; else the agent divides the
 * rounded sum. Such a tensor cannot be switched to sums later (set_average(0): -EINVAL). */
int tally_agent_declare_avg(struct tally_agent *a, const char *name, size_t bytes, int dtype,
			    int priority, int average);
/* 1 when averaged f16 / bf16 tensors are averaged by the appliances before rounding: every
 * appliance offered it (TALLY_CAP_AVERAGE), one push per rank (no local aggregation), no
 * quorum; else 0 (the agent divides the sum rounded to f16 / bf16: send an f32 copy to
 * average without overflow). */
int tally_agent_appliance_averages(const struct tally_agent *a);
/* Per-tensor override of cfg.average (0 sum, 1 divide by world_size), e.g. a broadcast done
 * as a sum with zeros from every non-root rank. 0, -ENOENT, or -EINVAL turning off the
 * average of a tensor whose keys the appliance averages (see tally_agent_declare_avg). */
int tally_agent_set_average(struct tally_agent *a, int tensor, int average);
/* Every rank must start partitions in the same order, or the workers fill their windows with
 * different chunks and wait on each other for ever. So by default each tensor is "ordered":
 * its n-th push_pull (round n) starts only after round n of every ordered tensor before it
 * in (priority, declaration) order, and round n-1 of every other ordered tensor, has been
 * submitted and started. This needs every ordered tensor pushed once per round (the DDP
 * pattern). A tensor pushed on its own schedule (a one-off broadcast) is taken out with
 * ordered = 0: it then starts in priority order as soon as credits allow, and must not be
 * pushed while ordered tensors are (all ranks must agree). 0 or -ENOENT. */
int tally_agent_set_ordered(struct tally_agent *a, int tensor, int ordered);
/* The start order of the agent's partitions (all ranks alike, before the first push_pull):
 * TALLY_AGENT_ORDER_ROUNDS (default): round by round, by priority, as described above;
 * needs every ordered tensor pushed once per round.
 * TALLY_AGENT_ORDER_SUBMIT: partitions start in the order their push_pulls were submitted
 * (a tensor's partitions in index order); priorities, rounds and `ordered` play no part.
 * One order on every rank whenever every rank submits the same push_pulls in the same order
 * -- DDP does: it launches its buckets in index order -- and nothing else is asked: tensors
 * may be declared at any time and left unused (DDP's bucket rebuild), no partition ever
 * waits for a push_pull not submitted yet. 0, -EINVAL (unknown mode) or -EBUSY (push_pulls
 * pending). */
enum tally_agent_order {
	TALLY_AGENT_ORDER_ROUNDS = 0,
	TALLY_AGENT_ORDER_SUBMIT = 1,
};
int tally_agent_set_order(struct tally_agent *a, int mode);
/* 1-bit compression (1-bit Adam / 1-bit LAMB, DeepSpeed's two-stage error feedback), the
 * appliance doing the server stage (DESIGN.md "Compression"):
 *  - mode TALLY_AGENT_COMPRESS_ONEBIT: from the tensor's from_round-th push_pull on (its
 *    push_pull count, 0-based: the warm-up / freeze switch), each push_pull does the worker
 *    stage per chunk of every partition: c = x + e_w; scale_w = ||c||_2 / sqrt(n_chunk);
 *    bits = sign(c) (1 for c >= 0, LSB first); e_w = c - scale_w * sign(c); it pushes
 *    [f32 scale_w][bits] (4 + ceil(n/8) bytes per chunk instead of 4n). The appliance
 *    averages the contributors' ±scale_w vectors (sum / contributors), adds its persistent
 *    server error, compresses with its own scale, and the tensor gets the decompressed
 *    server result: x[i] = bit_i ? scale_s : -scale_s.
 *  - The scale is per chunk (a chunk is at most max_chunk_bytes of wire payload, so about
 *    8 * (max_chunk_bytes - 4) elements), not per tensor as in DeepSpeed: each chunk is
 *    compressed on its own, so chunks travel and retransmit independently; the finer
 *    scales only lower the compression error.
 *  - The result is already the workers' average: cfg.average and set_average do not apply
 *    to compressed rounds (they still apply before from_round).
 *  - The worker error e_w is f32, one per element of the tensor, kept in the agent, zeroed
 *    at the switch (and by tally_agent_reset_compression_error). A chunk whose RESULT left
 *    this worker out (quorum) folds its whole c into e_w (e_w = c), so nothing is lost.
 *  - Keys: the compressed phase uses its own keys (the tensor's partition keys with
 *    TALLY_AGENT_KEY_ONEBIT set), REGISTERed with compression = TALLY_COMP_ONEBIT when the
 *    switch round is submitted; every rank switches at the same round.
 *  - f32 tensors only (else -EINVAL), not with cfg.local_agg (-ENOTSUP). Call it on every
 *    rank, with the same arguments, before the tensor's from_round-th push_pull is
 *    submitted (-EBUSY when a push_pull of the tensor is in flight, -EINVAL when its
 *    push_pull count is already past from_round). mode NONE switches back for good (from
 *    its from_round). 0, -ENOENT, -EINVAL, -ENOTSUP, -EBUSY. */
enum tally_agent_compress {
	TALLY_AGENT_COMPRESS_NONE = 0,
	TALLY_AGENT_COMPRESS_ONEBIT = 1,
};
#define TALLY_AGENT_KEY_ONEBIT 0x80000000u /* key bit of a tensor's compressed-phase keys */
int tally_agent_set_compression(struct tally_agent *a, int tensor, int mode, uint64_t from_round);
/* Compression by codec name (the worker-stage codecs registered in gpu_agent/agent_codec/:
 * "onebit" as TALLY_AGENT_COMPRESS_ONEBIT above; "fp16": f32 sent as f16, summed in f32
 * on the appliance, widened back), or "none" (as TALLY_AGENT_COMPRESS_NONE), from the
 * tensor's from_round-th push_pull on. A tensor keeps the first codec it switched on (its
 * compressed keys are REGISTERed for it). Asking again for what the tensor already does
 * from from_round on (the same codec, on since a round <= from_round; or none) is 0 and
 * changes nothing, whatever rounds have passed (a second optimizer over the same names).
 * 0, -ENOENT (no such codec: the error names the known ones; or no such tensor), else as
 * tally_agent_set_compression. */
int tally_agent_set_codec(struct tally_agent *a, int tensor, const char *name,
			  uint64_t from_round);
/* Zero a tensor's worker error e_w (e.g. when the optimizer state is reset). Not while a
 * push_pull of it is in flight (-EBUSY). 0, -ENOENT, -EBUSY. */
int tally_agent_reset_compression_error(struct tally_agent *a, int tensor);
/* Look up a declared tensor by name: its id or -ENOENT. */
int tally_agent_lookup(struct tally_agent *a, const char *name);

typedef void (*tally_agent_cb)(void *arg, int handle, int status);

/* Sum `bytes` at ptr (must equal the declared size) across all workers, in place. Returns a
 * handle >= 0 at once. Without a callback the handle must be given to wait() or test().
 * With a callback, it is called once from the progress thread with the final status and the
 * handle is released after it returns (do not wait on it). Errors: -EINVAL (bytes differ
 * from the declaration: "tensor shape changed"), -EBUSY (the tensor has a push_pull in
 * flight), -ENOSPC (max_handles), -ENOTSUP (CUDA buffer, build without CUDA). */
int tally_agent_push_pull(struct tally_agent *a, int tensor, void *ptr, size_t bytes, int device,
			  void *stream, tally_agent_cb cb, void *cb_arg);
/* tally_agent_push_pull with flags (0: the same call):
 * TALLY_AGENT_RESULT_VIEW: the agent may leave the result in its own memory instead of
 *   copying it into ptr, which then keeps its input. It does so for host buffers in the
 *   sharded local mode (cfg.local_agg shard): the result lies in the machine's shared gather
 *   area, and leaving it there saves a copy of the whole tensor (a DDP hook hands that
 *   memory to DDP, which copies it into the gradients anyway). Elsewhere the result is
 *   written into ptr as usual. Either way tally_agent_result_view says where it is.
 * TALLY_AGENT_NO_RESULT: the caller does not want the sums (a reduce-scatter's shards that
 *   other ranks own): its partitions are pushed with TALLY_CLIENT_NORESULT, so the
 *   appliances answer each chunk with a header-only RESULT and the sums never cross this
 *   rank's downlink (stats.noresult_*). ptr's contents afterwards are unspecified (its
 *   input, or sums where an appliance without TALLY_CAP_NORESULT sent them). Honoured only
 *   where each rank pushes for itself: not with local aggregation (cfg.local_agg with more
 *   than one local rank: the local ranks share the one push and its result), not for a
 *   compressed round; there the push_pull runs as a plain one.
 * Other bits: -EINVAL. */
#define TALLY_AGENT_RESULT_VIEW 1u
#define TALLY_AGENT_NO_RESULT 2u
int tally_agent_push_pull_flags(struct tally_agent *a, int tensor, void *ptr, size_t bytes,
				int device, void *stream, unsigned flags, tally_agent_cb cb,
				void *cb_arg);
/* Where the result of the tensor's last push_pull lies, once it completed successfully
 * (e.g. from its callback): the ptr it was given, or with TALLY_AGENT_RESULT_VIEW possibly
 * the agent's memory. That memory is the other local ranks' result too: read it, never write
 * it. It stays valid until this rank's next push_pull of the tensor (no local rank writes
 * the next round there before every one of them submitted it) or tally_agent_destroy.
 * 0 with *out set; -ENOENT (no such tensor), -EBUSY (a push_pull of it is in flight),
 * -ENODATA (no push_pull of it completed yet), -EIO (the last one failed). */
int tally_agent_result_view(struct tally_agent *a, int tensor, const void **out);
/* 1 done, 0 pending, negative errno failed (done/failed release the handle). */
int tally_agent_test(struct tally_agent *a, int handle);
/* Block until done: 0 or negative errno (-ETIMEDOUT, -ECANCELED, ...). Never for ever: when
 * the agent completed no partition for cfg.op_timeout_ms (TALLY_OP_TIMEOUT_MS) since the
 * push_pull was submitted (2 x op_timeout_ms while one of its partitions is on the network,
 * where the client fails it after op_timeout_ms with the appliance's reason), it returns
 * -ETIMEDOUT and tally_agent_strerror says what the push_pull waits for: which tensor and
 * round, partitions in flight at which appliance, or what holds the start order (e.g. "the
 * default 'rounds' start order waits until tensor 'b' ... is pushed"). The handle is
 * released; queued partitions are taken back, one on the network ends there unseen. */
int tally_agent_wait(struct tally_agent *a, int handle);
/* The same deadline holds for every push_pull, with a callback or not, waited on or not: the
 * agent's progress thread applies it itself (checked every 100 ms). Past its deadline the
 * push_pull fails with -ETIMEDOUT and the description above (strerror); the callback runs
 * with it (at once, or when the network is done with the push_pull's partitions in flight).
 * Nobody needs to call tally_agent_expire any more; it still applies the deadline to one
 * handle now: 1 when it expired it, 0 while within its deadline or when done; -ENOENT for a
 * negative handle. */
int tally_agent_expire(struct tally_agent *a, int handle);

/* The last error's text (which tensor / key / appliance, why), or "". Per agent. */
const char *tally_agent_strerror(struct tally_agent *a);

struct tally_agent_part {
	uint32_t key;
	uint32_t appliance;  /* index into cfg.appliances */
	size_t offset;       /* bytes into the tensor */
	size_t bytes;
};
/* The partitions of a tensor (up to max into out); returns their count or -ENOENT. */
int tally_agent_partitions(struct tally_agent *a, int tensor, struct tally_agent_part *out,
			   unsigned max);

struct tally_agent_stats {
	uint64_t push_pulls;      /* completed successfully */
	uint64_t failed;          /* completed with an error */
	uint64_t partitions;      /* partition operations completed */
	uint64_t bytes;           /* gradient bytes summed (partition bytes, this worker) */
	uint64_t max_inflight_bytes;
	uint64_t credit_waits;    /* times a ready partition waited for credits */
	uint64_t credit_overdrafts; /* always 0 now (the stall overdraft is gone) */
	uint64_t retransmits;     /* sum over client sessions */
	uint64_t excluded;        /* chunks left out by a quorum (folded forward) */
	uint64_t order_waits;     /* times the next partition waited for a submission that
				   * sorts before it in the global order */
	uint64_t push_bytes;      /* PUSH payload bytes sent, first transmissions (sum over
				   * client sessions): wire bytes, so compression shows here */
	uint64_t failovers;       /* appliances this rank moved its keys off (dead, draining) */
	uint64_t moved_pushes;    /* open-round partitions pushed again on a survivor */
	/* owner mode (TALLY_AGENT_NO_RESULT), sums over the client sessions */
	uint64_t noresult_ops;    /* partition operations the appliance answers header-only */
	uint64_t noresult_acks;   /* chunks completed by a header-only RESULT */
	uint64_t noresult_skipped_bytes; /* the sum bytes those did not carry */
	uint64_t noresult_payloads; /* RESULT payloads that came anyway to such operations
				   * (the appliance had not seen the flag: a lost push completed
				   * by quorum, say): the downlink spent on sums not wanted */
	uint64_t rx_bytes;        /* every byte the client sessions received (the downlink) */
};

/* An appliance as this rank sees it (failover: gpu_agent/README.md). */
enum tally_agent_liveness {
	TALLY_AGENT_UP = 0,       /* answering */
	TALLY_AGENT_SILENT,       /* quiet past probe_ms with work outstanding */
	TALLY_AGENT_DOWN,         /* quiet past dead_ms */
	TALLY_AGENT_DRAINING,     /* refusing new rounds */
	TALLY_AGENT_GONE          /* its keys moved to the survivors */
};
/* Appliance i's liveness (enum tally_agent_liveness) and when this rank moved off it
 * (CLOCK_REALTIME ns, 0: it did not); -EINVAL for no such appliance. */
int tally_agent_liveness(struct tally_agent *a, unsigned i, uint64_t *gone_realtime_ns);
void tally_agent_get_stats(struct tally_agent *a, struct tally_agent_stats *out);

/* How this rank's UDP sends to an appliance use GSO (UDP_SEGMENT), and why. */
enum tally_agent_gso {
	TALLY_AGENT_GSO_NONE = 0,   /* no UDP sends to it from this rank (a local rank that is
				     * not its machine's root, or the verbs transport) */
	TALLY_AGENT_GSO_OFF_AUTO,   /* TALLY_GSO unset and its JOIN_OK lacks TALLY_CAP_GSO
				     * (tallyd: a DPDK port may get super-frames whole) */
	TALLY_AGENT_GSO_ON_AUTO,    /* TALLY_GSO unset and it offered TALLY_CAP_GSO (tally-udpd) */
	TALLY_AGENT_GSO_OFF_FORCED, /* TALLY_GSO=0 */
	TALLY_AGENT_GSO_ON_FORCED,  /* TALLY_GSO=1 */
	TALLY_AGENT_GSO_REFUSED     /* wanted, but the kernel refused UDP_SEGMENT on this path */
};
/* Appliance i's enum tally_agent_gso (as of the progress thread's last turn), or -EINVAL
 * for no such appliance. */
int tally_agent_gso(struct tally_agent *a, unsigned i);
/* "on (auto)", "off (forced)", ...: the state's name for counter dumps and logs. */
const char *tally_agent_gso_name(int state);
/* sizeof of a public structure by its name ("tally_agent_cfg", "tally_agent_appliance",
 * "tally_agent_stats", "tally_agent_part", "tally_opt_cfg", "tally_opt_tensor"), 0 for
 * another name: bindings that lay the structures out themselves check them at load. */
size_t tally_agent_struct_size(const char *name);
/* Resolved rank, world size, local rank, local size. */
void tally_agent_ranks(struct tally_agent *a, int *rank, int *world, int *local_rank,
		       int *local_size);

#ifdef __cplusplus
}
#endif
#endif
