/* SPDX-License-Identifier: Apache-2.0
 * client_codec.c — the wire layout of each compression codec as the client sees it, one
 * line per codec in client_codec_tab, indexed by its REGISTER compression id
 * (TALLY_COMP_*). A key registered with a codec gets its entry once (k->codec); nothing
 * else in the client names a codec. The sizes are the proto header's, shared with the
 * engine (tally_proto.h). A leaf: calls nothing else in the library.
 */
#include "client_int.h"

static uint32_t onebit_wire_bytes(uint32_t n)
{
	return TALLY_ONEBIT_BYTES(n);
}

static uint32_t onebit_max_elems(uint32_t bytes)
{
	return TALLY_ONEBIT_ELEMS(bytes);
}

static const struct client_codec onebit_codec = {
	.name = "onebit", .dtype = TALLY_DT_F32, .flag = TALLY_F_ONEBIT,
	.wire_bytes = onebit_wire_bytes, .max_elems = onebit_max_elems,
};

static const struct client_codec *const client_codec_tab[TALLY_COMP_COUNT] = {
	[TALLY_COMP_ONEBIT] = &onebit_codec,
};

const struct client_codec *client_codec_by_id(uint8_t id)
{
	return id < TALLY_COMP_COUNT ? client_codec_tab[id] : NULL;
}
