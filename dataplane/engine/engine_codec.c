/* SPDX-License-Identifier: Apache-2.0
 * engine_codec.c — the registry of server stages: one line per codec in engine_codec_tab,
 * indexed by its REGISTER compression id (TALLY_COMP_*). Each codec is defined in its own
 * file (a const struct engine_codec); nothing else in the engine names a codec.
 */
#include "engine_int.h"

static const struct engine_codec *const engine_codec_tab[TALLY_COMP_COUNT] = {
	[TALLY_COMP_ONEBIT] = &engine_onebit_codec,
};

const struct engine_codec *engine_codec_by_id(uint8_t id)
{
	return id < TALLY_COMP_COUNT ? engine_codec_tab[id] : NULL;
}
