/* SPDX-License-Identifier: Apache-2.0
 * tallyd_rdma_conf.c — how rdma-listen (the rdma-* settings themselves are parsed in
 * appliance/ctl/actl_verbs.c, as for tally-udpd) fits the rest of tallyd's configuration:
 * ports, or verbs only with `cores` lcores; and the build (the verbs meson option).
 */
#include <errno.h>
#include <stdio.h>

#include "tallyd_config.h"

int tallyd_rdma_validate(const struct tallyd_conf *c, char *err, size_t errlen)
{
	const char *why = NULL;

#ifndef TALLY_HAVE_VERBS
	if (c->rdma.listen[0])
		why = "rdma-listen: this tallyd was built without verbs (install libibverbs-dev "
		      "and librdmacm-dev and rebuild; meson option verbs)";
#endif
	if (!why && !c->nports && !c->rdma.listen[0])
		why = "no port: give at least one --port (a PCI address or a vdev such as "
		      "net_memif0,role=server,socket=/tmp/x.sock), or --rdma-listen ADDR:PORT for "
		      "verbs only";
	if (!why && c->nports && c->cores)
		why = "cores: only for a tallyd without ports (verbs only); with ports, each "
		      "port's queues set its cores";
	if (!why && c->io_forward && c->rdma.listen[0])
		why = "io-forward runs no engine: drop rdma-listen (verbs packets would have "
		      "nowhere to go)";
	if (!why)
		return 0;
	snprintf(err, errlen, "%s", why);
	return -EINVAL;
}
