/* SPDX-License-Identifier: Apache-2.0
 * simnet_engine.c — attach a real engine instance to a simnet appliance core (a separate
 * object so users of simnet that never attach an engine do not link the engine).
 */
#include "simnet.h"

static void sn_engine_rx(void *arg, const void *buf, size_t len, const struct tally_addr *from)
{
	tally_engine_rx(arg, buf, len, from);
}

static void sn_engine_timers(void *arg)
{
	tally_engine_poll(arg);
}

void simnet_attach_engine(struct simnet *net, unsigned core, struct tally_engine *e)
{
	struct simnet_node_ops o = { .rx = sn_engine_rx, .timers = sn_engine_timers };

	simnet_attach(net, simnet_engine_node(net, core), &o, e);
}
