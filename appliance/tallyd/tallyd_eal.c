/* SPDX-License-Identifier: Apache-2.0
 * tallyd_eal.c — completes the EAL arguments from the configuration before rte_eal_init:
 * devices (--vdev / -a; --no-pci when every port is virtual), an lcore map when none is given, memory for --no-huge, and the
 * hugepage check that turns "not enough memory" into "N hugepages needed".
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "tallyd_eal.h"

static int eal_has_core_list(const struct tallyd_conf *c)
{
	return tallyd_conf_eal_has(c, "-l") >= 0 || tallyd_conf_eal_has(c, "-c") >= 0 ||
	       tallyd_conf_eal_has(c, "--lcores") >= 0;
}

/* An argument given as "-x VALUE" or "-xVALUE" or "--x=VALUE". */
static int eal_has_prefix(const struct tallyd_conf *c, const char *p)
{
	for (int i = 0; i < c->eal_argc; i++)
		if (!strncmp(c->eal_argv[i], p, strlen(p)))
			return 1;
	return 0;
}

static int eal_dev_listed(const struct tallyd_conf *c, const char *dev)
{
	for (int i = 0; i < c->eal_argc; i++)
		if (!strcmp(c->eal_argv[i], dev) ||
		    (!strncmp(c->eal_argv[i], "--vdev=", 7) && !strcmp(c->eal_argv[i] + 7, dev)))
			return 1;
	return 0;
}

int tallyd_eal_cpus(unsigned *cpus, unsigned max)
{
	cpu_set_t set;
	unsigned n = 0;

	if (sched_getaffinity(0, sizeof(set), &set))
		return -errno;
	for (unsigned i = 0; i < CPU_SETSIZE && n < max; i++)
		if (CPU_ISSET(i, &set))
			cpus[n++] = i;
	return (int)n;
}

static int eal_used(const struct tallyd_conf *c, unsigned id)
{
	for (uint16_t i = 0; i < c->nports; i++)
		for (uint16_t j = 0; j < c->port[i].nlcores; j++)
			if (c->port[i].lcores[j] == id)
				return 1;
	return 0;
}

int tallyd_eal_prepare(struct tallyd_conf *c, const struct tallyd_sizing *s,
		       const unsigned *cpus, unsigned ncpus, char *err, size_t errlen)
{
	char arg[TALLYD_DEV_LEN + 16];

	for (uint16_t i = 0; i < c->nports; i++) {
		const struct tallyd_port_conf *p = &c->port[i];

		if (eal_dev_listed(c, p->dev))
			continue;
		if (tallyd_conf_eal_add(c, p->is_vdev ? "--vdev" : "-a") ||
		    tallyd_conf_eal_add(c, p->dev))
			goto full;
	}
	int all_vdev = 1;
	for (uint16_t i = 0; i < c->nports; i++)
		all_vdev &= c->port[i].is_vdev;
	/* virtual ports only: leave the host's PCI devices alone */
	if (all_vdev && !eal_has_prefix(c, "-a") && !eal_has_prefix(c, "-b") &&
	    !eal_has_prefix(c, "--allow") && !eal_has_prefix(c, "--block") &&
	    tallyd_conf_eal_has(c, "--no-pci") < 0 && tallyd_conf_eal_add(c, "--no-pci"))
		goto full;
	if (!eal_has_core_list(c)) {
		/* lcore ids: main first, then each port's (explicit, or the next free ids);
		 * lcore k runs on cpus[k % ncpus]: oversubscribed cores share by back-off */
		unsigned main_id = 0, next = 1, k = 1;
		int len;

		if (!ncpus)
			return snprintf(err, errlen, "no CPU in this process's affinity mask"), -EINVAL;
		while (eal_used(c, main_id))
			main_id++;
		len = snprintf(arg, sizeof(arg), "--lcores=%u@%u", main_id, cpus[0]);
		for (uint16_t i = 0; i < c->nports; i++) {
			struct tallyd_port_conf *p = &c->port[i];
			uint16_t q = p->queues ? p->queues : (p->nlcores ? p->nlcores : 1);

			if (tallyd_conf_port_shared(c, i)) { /* the lcore of port i % cores */
				p->lcores[0] = c->port[i % c->cores].lcores[0];
				p->nlcores = 1;
				continue;
			}
			if (!p->nlcores) {
				for (uint16_t j = 0; j < q; j++) {
					while (next == main_id || eal_used(c, next))
						next++;
					p->lcores[p->nlcores++] = (uint16_t)next++;
				}
			}
			for (uint16_t j = 0; j < p->nlcores; j++, k++) {
				len += snprintf(arg + len, sizeof(arg) - (size_t)len, ",%u@%u",
						p->lcores[j], cpus[k % ncpus]);
				if ((size_t)len >= sizeof(arg))
					return snprintf(err, errlen, "lcore map too long"), -EINVAL;
			}
		}
		/* verbs only (no port): `cores` lcores on the next ids */
		for (uint16_t j = 0; !c->nports && j < tallyd_conf_ncores(c); j++, k++) {
			while (next == main_id)
				next++;
			c->core_lcores[c->ncore_lcores++] = (uint16_t)next;
			len += snprintf(arg + len, sizeof(arg) - (size_t)len, ",%u@%u", next++,
					cpus[k % ncpus]);
		}
		if ((size_t)len >= sizeof(arg))
			return snprintf(err, errlen, "lcore map too long"), -EINVAL;
		if (tallyd_conf_eal_add(c, arg))
			goto full;
	}
	if (tallyd_conf_eal_has(c, "--no-huge") >= 0) {
		if (!eal_has_prefix(c, "-m") && !eal_has_prefix(c, "--socket-mem")) {
			/* EAL gives --no-huge only 64 MiB unless told */
			snprintf(arg, sizeof(arg), "%zu", (s->total >> 20) + 64);
			if (tallyd_conf_eal_add(c, "-m") || tallyd_conf_eal_add(c, arg))
				goto full;
		}
	}
	if (tallyd_conf_eal_has(c, "--log-level") < 0) {
		snprintf(arg, sizeof(arg), "--log-level=user1:%u", c->log_level);
		if (tallyd_conf_eal_add(c, arg))
			goto full;
	}
	return 0;
full:
	snprintf(err, errlen, "too many EAL arguments (at most %d)", TALLYD_MAX_EAL_ARGS - 1);
	return -ENOSPC;
}

int tallyd_eal_check_memory(const struct tallyd_conf *c, const struct tallyd_sizing *s,
			    unsigned long free_pages, char *err, size_t errlen)
{
	if (tallyd_conf_eal_has(c, "--no-huge") >= 0)
		return 0;
	if (free_pages >= s->hugepages)
		return 0;
	snprintf(err, errlen,
		 "not enough hugepages: this configuration needs %lu pages of %zu kB (%.1f MiB: "
		 "%u cores x (RX pool %.1f + header pool %.1f + engine %.1f MiB) + rings and "
		 "EAL), %lu are free. Reserve them (echo %lu > /proc/sys/vm/nr_hugepages), lower "
		 "--mem / --rx-desc / --frame-size, or run with --eal --no-huge",
		 s->hugepages, s->hugepage_size >> 10, s->total / 1048576.0, s->ncores,
		 s->rx_pool_bytes / 1048576.0, s->hdr_pool_bytes / 1048576.0,
		 s->engine_bytes / 1048576.0, free_pages, s->hugepages);
	return -ENOMEM;
}
