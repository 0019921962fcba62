/* SPDX-License-Identifier: Apache-2.0
 * agent_numa.c — host staging memory on the NUMA node of a device: the GPU's copies to
 * and from pinned memory cross the socket interconnect otherwise (BytePS pins its
 * staging NUMA-local for that reason). The node comes from sysfs (the PCI device's
 * numa_node); the pages are bound with mbind(MPOL_PREFERRED) and touched, so they are
 * placed before CUDA pins them. No libnuma: two system calls do it.
 *
 * Every buffer starts AGENT_NUMA_HDR bytes after its mapping, a header before it says
 * how it was made, so one free function serves every allocator of agent_dev_*.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent_internal.h"

#define NUMA_MAGIC 0x414d554eu /* "NUMA" */
#define MPOL_PREFERRED_ 1
#define MPOL_F_NODE_ (1 << 0)
#define MPOL_F_ADDR_ (1 << 1)

struct numa_hdr {
	uint32_t magic;
	int kind;       /* AGENT_HOST_* */
	size_t map_bytes;
};

int agent_numa_node_of_pci(const char *sysfs, const char *busid)
{
	char path[256], id[32], line[32];
	size_t n = strlen(busid);
	FILE *f;
	long node;
	char *end;

	if (!n || n >= sizeof(id))
		return -EINVAL;
	/* CUDA writes 0000:3B:00.0, sysfs names it 0000:3b:00.0 */
	for (size_t i = 0; i <= n; i++)
		id[i] = (char)tolower((unsigned char)busid[i]);
	for (size_t i = 0; i < n; i++)
		if (!isxdigit((unsigned char)id[i]) && id[i] != ':' && id[i] != '.')
			return -EINVAL;
	snprintf(path, sizeof(path), "%s/bus/pci/devices/%s/numa_node", sysfs, id);
	if (!(f = fopen(path, "r")))
		return -ENOENT;
	if (!fgets(line, sizeof(line), f)) {
		fclose(f);
		return -ENOENT;
	}
	fclose(f);
	errno = 0;
	node = strtol(line, &end, 10);
	/* -1: the platform does not say (one node, or firmware without SRAT) */
	if (errno || end == line || node < 0 || node > 1023)
		return -ENOENT;
	return (int)node;
}

void *agent_numa_alloc(size_t bytes, int node, char *err, size_t errlen)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t map = (AGENT_NUMA_HDR + bytes + page - 1) & ~(page - 1);
	unsigned long mask[1024 / (8 * sizeof(unsigned long))] = { 0 };
	struct numa_hdr *h;
	uint8_t *p;

	if (node < 0 || node >= 1024) {
		agent_errf(err, errlen, "NUMA node %d out of range", node);
		return NULL;
	}
	p = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		agent_errf(err, errlen, "staging memory (%zu bytes): %s", bytes, strerror(errno));
		return NULL;
	}
	mask[node / (8 * sizeof(unsigned long))] = 1ul << (node % (8 * sizeof(unsigned long)));
	/* preferred, not bound: a full node falls back instead of failing the job */
	if (syscall(SYS_mbind, p, map, MPOL_PREFERRED_, mask, 1024ul, 0u)) {
		agent_errf(err, errlen, "mbind to NUMA node %d: %s", node, strerror(errno));
		munmap(p, map);
		return NULL;
	}
	memset(p, 0, map); /* first touch places every page now, on the node */
	h = (struct numa_hdr *)p;
	*h = (struct numa_hdr){ NUMA_MAGIC, AGENT_HOST_NUMA, map };
	return p + AGENT_NUMA_HDR;
}

int agent_numa_kind(const void *buf, size_t *map_bytes)
{
	const struct numa_hdr *h = (const void *)((const uint8_t *)buf - AGENT_NUMA_HDR);

	if (h->magic != NUMA_MAGIC)
		return -EINVAL;
	if (map_bytes)
		*map_bytes = h->map_bytes;
	return h->kind;
}

void agent_numa_set_kind(void *buf, int kind, size_t map_bytes)
{
	struct numa_hdr *h = (void *)((uint8_t *)buf - AGENT_NUMA_HDR);

	*h = (struct numa_hdr){ NUMA_MAGIC, kind, map_bytes };
}

void agent_numa_free(void *buf)
{
	size_t map;

	if (buf && agent_numa_kind(buf, &map) == AGENT_HOST_NUMA)
		munmap((uint8_t *)buf - AGENT_NUMA_HDR, map);
}

int agent_numa_node_of(const void *addr)
{
	int node = -1;

	if (syscall(SYS_get_mempolicy, &node, NULL, 0ul, addr, MPOL_F_NODE_ | MPOL_F_ADDR_))
		return -errno;
	return node;
}
