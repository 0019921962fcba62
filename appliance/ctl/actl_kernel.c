/* SPDX-License-Identifier: Apache-2.0
 * actl_kernel.c — drops the kernel makes before an appliance sees a packet, as the kernel
 * counts them in the appliance's network namespace (/proc/net/snmp): IP fragments it
 * reassembles or times out (tally-udpd's sockets, and tallyd's net_af_packet ports, whose
 * PMD asks the kernel to defragment), and datagrams a full UDP receive buffer dropped
 * (tally-udpd). Namespace-wide: other sockets of the namespace count there too. Control
 * thread only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tally_actl.h"

/* The value of field `name` in the /proc/net/snmp table `proto` ("Ip", "Udp"). */
static void snmp_pick(const char *names, const char *vals, const char *name, uint64_t *out)
{
	char n[1024], v[1024];
	char *sn = NULL, *sv = NULL;

	snprintf(n, sizeof(n), "%s", names);
	snprintf(v, sizeof(v), "%s", vals);
	for (char *a = strtok_r(n, " \n", &sn), *b = strtok_r(v, " \n", &sv); a && b;
	     a = strtok_r(NULL, " \n", &sn), b = strtok_r(NULL, " \n", &sv))
		if (!strcmp(a, name))
			*out = strtoull(b, NULL, 10);
}

int tally_actl_kernel_read(struct tally_actl_kernel *k)
{
	char names[1024], vals[1024];
	FILE *f = fopen("/proc/net/snmp", "r");

	if (!f)
		return -errno;
	memset(k, 0, sizeof(*k));
	/* each table is two lines: "Proto: names..." then "Proto: values..." */
	while (fgets(names, sizeof(names), f) && fgets(vals, sizeof(vals), f)) {
		if (!strncmp(names, "Ip: ", 4)) {
			snmp_pick(names, vals, "ReasmReqds", &k->reasm_fragments);
			snmp_pick(names, vals, "ReasmOKs", &k->reasm_ok);
			snmp_pick(names, vals, "ReasmFails", &k->reasm_failed);
		} else if (!strncmp(names, "Udp: ", 5)) {
			snmp_pick(names, vals, "RcvbufErrors", &k->udp_rcvbuf_errors);
			snmp_pick(names, vals, "InErrors", &k->udp_in_errors);
		}
	}
	fclose(f);
	return 0;
}

void tally_actl_kernel_json(json_t *port, int udp)
{
	struct tally_actl_kernel k;

	if (tally_actl_kernel_read(&k))
		return;
	json_object_set_new(port, "kernel_reasm_fragments", json_integer((json_int_t)k.reasm_fragments));
	json_object_set_new(port, "kernel_reasm_ok", json_integer((json_int_t)k.reasm_ok));
	json_object_set_new(port, "kernel_reasm_failed", json_integer((json_int_t)k.reasm_failed));
	if (!udp)
		return;
	json_object_set_new(port, "kernel_udp_rcvbuf_errors",
			    json_integer((json_int_t)k.udp_rcvbuf_errors));
	json_object_set_new(port, "kernel_udp_in_errors", json_integer((json_int_t)k.udp_in_errors));
}
