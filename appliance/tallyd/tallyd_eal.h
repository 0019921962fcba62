/* SPDX-License-Identifier: Apache-2.0
 * tallyd_eal.h — EAL arguments from the configuration, and the hugepage check.
 */
#ifndef TALLYD_EAL_H
#define TALLYD_EAL_H

#include <stddef.h>

#include "tallyd_config.h"
#include "tallyd_size.h"

/* CPUs of this process's affinity mask; count or -errno. */
int tallyd_eal_cpus(unsigned *cpus, unsigned max);

/* Add what EAL needs and the user did not say: each port as --vdev or -a, an --lcores map
 * (main lcore + one per queue, over the given CPUs) when no -l/-c/--lcores is given (this
 * also fills the ports' lcore lists), -m for --no-huge, the log level. 0 or -errno + err. */
int tallyd_eal_prepare(struct tallyd_conf *c, const struct tallyd_sizing *s,
		       const unsigned *cpus, unsigned ncpus, char *err, size_t errlen);

/* Unless --no-huge: -ENOMEM and a message saying how many hugepages are needed when
 * free_pages is short. */
int tallyd_eal_check_memory(const struct tallyd_conf *c, const struct tallyd_sizing *s,
			    unsigned long free_pages, char *err, size_t errlen);

#endif
