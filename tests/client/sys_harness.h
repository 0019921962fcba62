/* SPDX-License-Identifier: Apache-2.0
 * sys_harness.h — whole-system test harness: W client sessions and M engine instances on a
 * simnet, keys registered by every worker, seeded gradients, reference sums.
 */
#ifndef TALLY_SYS_HARNESS_H
#define TALLY_SYS_HARNESS_H

#include <stdbool.h>
#include <stdint.h>

#include "simnet.h"

#define SYS_MAX_KEYS 8
#define SYS_JOB 42
#define SYS_TOKEN 0x5eed5eed12345678ull

struct sys_key {
	uint32_t key;
	uint32_t nelems, chunk_elems;
	uint8_t dtype;
	bool det;
	uint16_t quorum;       /* 0: W */
	uint32_t deadline_us;
};

struct sys_cfg {
	uint64_t seed;
	unsigned W, M;
	struct simnet_link up, down;
	uint64_t engine_poll_ns;
	unsigned nkeys;
	struct sys_key keys[SYS_MAX_KEYS];
	uint32_t window;
	uint32_t give_up_ms;
};

struct sys {
	struct sys_cfg cfg;
	struct simnet *net;
	struct tally_engine **eng;
	struct tally_client **cl;
	/* reference cache: one round per parity per key */
	struct sys_ref {
		bool valid;
		uint32_t round;
		float *acc;        /* f32 rank-order sum (i32 keys: the wrapping sum as int32) */
		double *exact, *absum;
	} ref[SYS_MAX_KEYS][2];
	double worst_rel;      /* largest |err| / bound seen in non-deterministic checks */
};

/* Build, join every worker, register every key with every worker. Fails the test on error. */
struct sys *sys_new(const struct sys_cfg *cfg);
void sys_free(struct sys *s);

/* The gradient element i of (worker, key, round), in the key's wire dtype, written to out. */
void sys_gradient(const struct sys *s, unsigned w, unsigned k, uint32_t round, void *out);

/* Check a result against the reference sum of every worker's gradient for (key, round).
 * Deterministic keys: bit-exact against the f32 (i32) sum in rank order, rounded to the
 * wire dtype. Others: within (W-1)·2^-24·Σ|x| plus half an ulp of the wire dtype.
 * Returns the index of the first bad element or -1. */
long sys_check(const struct sys *s, unsigned k, uint32_t round, const void *result,
	       double *worst_err);

/* Optional hooks of sys_run(). */
struct sys_hooks {
	/* may worker w start round `round` of key k now? (default: yes) */
	bool (*may_start)(void *arg, struct sys *s, unsigned w, unsigned k, uint32_t round);
	/* every completed result (after the reference check unless no_check) */
	void (*result)(void *arg, struct sys *s, unsigned w, unsigned k, uint32_t round,
		       const void *out);
	void *arg;
	bool no_check;
};

/* Run `rounds` rounds of every key on every worker, each worker moving to its next round
 * of a key as soon as its previous one completed, checking every result against the
 * reference. Fails the test on an error, a wrong sum, or when the virtual time exceeds
 * max_virtual_ns (a hang). */
void sys_run(struct sys *s, uint32_t rounds, uint64_t max_virtual_ns,
	     const struct sys_hooks *hooks);

/* Element i of a buffer of wire dtype dt, as a double (i32 included). */
double sys_widen(uint8_t dt, const void *p, uint32_t i);

/* Totals over all clients. */
uint64_t sys_retransmits(const struct sys *s);
uint64_t sys_client_drops(const struct sys *s);

#endif
