/* SPDX-License-Identifier: Apache-2.0
 * agent_codec.h — the worker stage of compression as registered codecs. A codec turns a
 * tensor's f32 partition into the bytes a compressed key carries (compress, before the
 * push) and the appliance's RESULT of that key back into f32 (decompress, after it); the
 * agent core (agent/agent_compress.c) drives it chunk by chunk, owns the buffers and keys,
 * and knows no codec by name. The server stage, where one is needed, is the engine's
 * (struct engine_codec); a codec whose wire is a plain dtype (fp16) needs none.
 *
 * Registration: agent_codec/meson.build's list `agent_codecs` names each codec; meson
 * compiles agent_codec_<name>.c and generates the table (agent_codec_table.h) naming
 * agent_codec_<name>_ops. Adding a codec is its file and one word in that list.
 *
 * Datapath (compress, decompress): no allocation, no locks, no syscalls. */
#ifndef AGENT_CODEC_H
#define AGENT_CODEC_H

#include <stddef.h>
#include <stdint.h>

struct tally_register;

struct agent_codec_ops {
	const char *name;    /* what tally_agent_set_codec selects it by */
	int server_averages; /* 1: the RESULT is the average already (the server stage's) */
	size_t state_elem_bytes; /* per-tensor state: bytes per f32 element (error feedback) */
	/* The compressed key's REGISTER from the plain one (nelems f32 elements, flags): wire
	 * dtype, compression mode, chunk_elems (chunk_elems from agent_codec_chunk_elems). */
	void (*reg)(struct tally_register *reg, uint32_t chunk_elems);
	/* Elements of a chunk of a key of n elements fitting max_chunk_bytes (>= 1). */
	uint32_t (*chunk_elems)(uint32_t max_chunk_bytes, uint32_t n);
	size_t (*chunk_bytes)(uint32_t m);    /* wire bytes of a chunk of m elements */
	/* Worker stage of one chunk of m elements: src (f32) into wire, chunk_bytes(m) bytes;
	 * state: the chunk's state (state_elem_bytes * m bytes, NULL when 0). */
	void (*compress)(uint8_t *wire, void *state, const float *src, uint32_t m);
	/* The RESULT of one chunk (res, res_bytes) into dst (m f32); mine: what this worker
	 * pushed for it; excluded: a quorum left this worker out of it. 0 or -EINVAL (a
	 * payload of the wrong length; dst untouched). */
	int (*decompress)(float *dst, void *state, const uint8_t *mine, const uint8_t *res,
			  size_t res_bytes, uint32_t m, int excluded);
	void (*reset)(void *state, size_t n); /* a fresh state for n elements */
};

/* The registered codec named name, or NULL. */
const struct agent_codec_ops *agent_codec_by_name(const char *name);
/* The names of the registered codecs, ", "-separated, into buf (for error messages). */
void agent_codec_names(char *buf, size_t len);
/* Wire bytes of a key of n elements in chunks of ce elements (the last one shorter). */
size_t agent_codec_key_bytes(const struct agent_codec_ops *c, uint32_t n, uint32_t ce);

#endif
