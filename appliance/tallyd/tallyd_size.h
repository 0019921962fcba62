/* SPDX-License-Identifier: Apache-2.0
 * tallyd_size.h — memory sizing from the configuration, computed before EAL starts so a
 * shortage is reported as "N hugepages needed" instead of a failed allocation later.
 */
#ifndef TALLYD_SIZE_H
#define TALLYD_SIZE_H

#include <stddef.h>
#include <stdint.h>

#include "tallyd_config.h"

#define TALLYD_RING_SIZE 1024      /* software dispatch ring per core (default) */
#define TALLYD_POOL_CACHE 256
#define TALLYD_HDR_POOL_MAX 32767  /* extbuf refcounts are 16-bit */
#define TALLYD_EAL_OVERHEAD (24u << 20)
#define TALLYD_PORT_OVERHEAD (4u << 20)

struct tallyd_sizing {
	unsigned ncores;
	unsigned rx_mbufs;       /* per RX queue pool */
	unsigned rx_elt;         /* bytes of one RX mbuf object, headers included */
	size_t rx_pool_bytes;    /* one RX pool */
	unsigned hdr_mbufs;      /* per core header/extbuf pool */
	unsigned hdr_elt;
	size_t hdr_pool_bytes;
	size_t ring_bytes;       /* all dispatch and command rings */
	size_t engine_bytes;     /* per core: its share of mem + det-pool (0 with io-forward) */
	size_t overhead;         /* EAL, device rings (estimate) */
	size_t total;
	size_t hugepage_size;
	unsigned long hugepages; /* pages of hugepage_size that total needs */
};

/* Sizes for the configuration (validated first) and a hugepage size in bytes. 0, or
 * -EINVAL with err when a pool cannot be built (e.g. header pool over 32767 mbufs). */
int tallyd_size(const struct tallyd_conf *c, size_t hugepage_size, struct tallyd_sizing *s,
		char *err, size_t errlen);

/* From /proc/meminfo (or the given file): hugepage size in bytes and free pages. 0 or
 * -errno. */
int tallyd_hugepages(const char *meminfo, size_t *page_size, unsigned long *free_pages);

/* One line per item, for --check-config and the start log. */
void tallyd_size_print(const struct tallyd_sizing *s, FILE *f);

#endif
