/* SPDX-License-Identifier: Apache-2.0
 * dpdk_afp.c — frames the kernel dropped in a net_af_packet port's ring. The af_packet PMD
 * (DPDK 22.11) never reads PACKET_STATISTICS, so rte_eth_stats' imissed stays 0 however
 * many frames the ring overflowed. The PMD's packet sockets belong to this process: find
 * them in /proc/self/fd by family and interface, and read their statistics here. Reading
 * resets the kernel's counters, so the caller accumulates. Control thread only (syscalls).
 * The PMD also joins its sockets in a fanout group with PACKET_FANOUT_FLAG_DEFRAG: the
 * kernel reassembles IP fragments before the PMD sees them (complete ones arrive whole,
 * incomplete ones time out in the kernel), so tallyd's own ip_fragment counter never
 * moves there; tallyd shows the namespace's reassembly counters (appliance/ctl).
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <net/if.h>
#include <linux/if_packet.h>
#include <sys/socket.h>

#include "tally_dpdk.h"

#ifndef SOL_PACKET
#define SOL_PACKET 263
#endif

/* The af_packet socket's statistics if fd is one bound to ifindex: 1, else 0. */
static int afp_fd_stats(int fd, unsigned ifindex, struct tpacket_stats_v3 *st)
{
	int dom = 0;
	socklen_t len = sizeof(dom);
	struct sockaddr_ll sll;

	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &len) || dom != AF_PACKET)
		return 0;
	len = sizeof(sll);
	memset(&sll, 0, sizeof(sll));
	if (getsockname(fd, (struct sockaddr *)&sll, &len) || (unsigned)sll.sll_ifindex != ifindex)
		return 0;
	len = sizeof(*st);
	memset(st, 0, sizeof(*st));
	return getsockopt(fd, SOL_PACKET, PACKET_STATISTICS, st, &len) == 0;
}

int tally_dpdk_afp_drops(const char *iface, uint64_t *drops)
{
	unsigned ifindex = iface ? if_nametoindex(iface) : 0;
	DIR *dir;
	struct dirent *de;
	int found = 0;

	if (!ifindex)
		return -ENODEV;
	dir = opendir("/proc/self/fd");
	if (!dir)
		return -errno;
	while ((de = readdir(dir))) {
		struct tpacket_stats_v3 st;
		char *end;
		long fd = strtol(de->d_name, &end, 10);
		if (*end || end == de->d_name || fd == dirfd(dir))
			continue;
		if (afp_fd_stats((int)fd, ifindex, &st)) {
			*drops += st.tp_drops;
			found++;
		}
	}
	closedir(dir);
	return found ? found : -ENOENT;
}

int tally_dpdk_afp_iface(const char *devargs, char *iface, size_t len)
{
	const char *p = devargs ? strstr(devargs, "iface=") : NULL;
	size_t n;

	if (!p || strncmp(devargs, "net_af_packet", 13) || !len)
		return -ENOENT;
	p += 6;
	n = strcspn(p, ",");
	if (n == 0 || n >= len || n >= IF_NAMESIZE)
		return -EINVAL;
	memcpy(iface, p, n);
	iface[n] = '\0';
	return 0;
}
