/* SPDX-License-Identifier: Apache-2.0
 * agent_codec.c — the worker-stage codec registry: the table meson generates from the list
 * in agent_codec/meson.build (agent_codec_table.h), looked up by name. */
#include <stdio.h>
#include <string.h>

#include "agent_codec.h"

#define AGENT_CODEC_DECL(n) extern const struct agent_codec_ops agent_codec_##n##_ops;
#define AGENT_CODEC_ENTRY(n) &agent_codec_##n##_ops,
#include "agent_codec_table.h"

AGENT_CODEC_LIST(AGENT_CODEC_DECL)

static const struct agent_codec_ops *const codecs[] = {AGENT_CODEC_LIST(AGENT_CODEC_ENTRY)};

const struct agent_codec_ops *agent_codec_by_name(const char *name)
{
	for (size_t i = 0; name && i < sizeof(codecs) / sizeof(codecs[0]); i++)
		if (!strcmp(codecs[i]->name, name))
			return codecs[i];
	return NULL;
}

void agent_codec_names(char *buf, size_t len)
{
	size_t o = 0;

	if (!len)
		return;
	buf[0] = 0;
	for (size_t i = 0; i < sizeof(codecs) / sizeof(codecs[0]) && o < len; i++) {
		int w = snprintf(buf + o, len - o, "%s%s", i ? ", " : "", codecs[i]->name);
		if (w < 0)
			break;
		o += (size_t)w;
	}
}

size_t agent_codec_key_bytes(const struct agent_codec_ops *c, uint32_t n, uint32_t ce)
{
	uint32_t full = n / ce, last = n % ce;

	return (size_t)full * c->chunk_bytes(ce) + (last ? c->chunk_bytes(last) : 0);
}
