/* SPDX-License-Identifier: Apache-2.0
 * agent_abi.c — the sizes of the structures callers lay out themselves (the Python package
 * mirrors them with ctypes): a package and a library from different builds would otherwise
 * read each other's fields at the wrong offsets without any error. */
#include <string.h>

#include "tally_agent.h"
#include "tally_opt.h"

size_t tally_agent_struct_size(const char *name)
{
	static const struct {
		const char *name;
		size_t size;
	} sizes[] = {
		{ "tally_agent_cfg", sizeof(struct tally_agent_cfg) },
		{ "tally_agent_appliance", sizeof(struct tally_agent_appliance) },
		{ "tally_agent_stats", sizeof(struct tally_agent_stats) },
		{ "tally_agent_part", sizeof(struct tally_agent_part) },
		{ "tally_opt_cfg", sizeof(struct tally_opt_cfg) },
		{ "tally_opt_tensor", sizeof(struct tally_opt_tensor) },
	};

	for (size_t i = 0; name && i < sizeof(sizes) / sizeof(sizes[0]); i++)
		if (!strcmp(name, sizes[i].name))
			return sizes[i].size;
	return 0;
}
