/* SPDX-License-Identifier: Apache-2.0
 * loopnet.h — an in-process network for agent unit tests: W agents (threads of one process)
 * share a hub that sums each (key, round) once all W pushed and writes the sum into every
 * pusher's output. Records the order ops start, bytes in flight per rank, and can hold
 * completed sums until the test releases them (scheduling tests) or fail on purpose. */
#ifndef LOOPNET_H
#define LOOPNET_H

#include <stddef.h>
#include <stdint.h>

#include "agent_internal.h"

struct loophub;

struct loophub *loophub_create(unsigned world);
void loophub_destroy(struct loophub *h);
/* Hold completed sums until released (1), or deliver at once (0). */
void loophub_hold(struct loophub *h, int on);
/* Model the client's window: at most `ops` ops of each rank are pushed to the hub at once,
 * later ones wait in start order until a sum is delivered (0: no limit, the default). */
void loophub_window(struct loophub *h, unsigned ops);
/* Release up to n held completions, oldest first; returns how many. */
unsigned loophub_release(struct loophub *h, unsigned n);
/* Make connect of appliance `appl` fail with rc (0: none). */
void loophub_fail_connect(struct loophub *h, unsigned appl, int rc);

/* The start log: key of the i-th op started by `rank`; count in *n. */
const uint32_t *loophub_starts(struct loophub *h, unsigned rank, unsigned *n);
/* Largest bytes in flight seen for a rank (started, not yet tested done). */
size_t loophub_max_inflight(struct loophub *h, unsigned rank);
/* Bytes started by rank, not yet reported done. */
size_t loophub_inflight(struct loophub *h, unsigned rank);
/* Which appliance each key was registered at (-1: none). */
int loophub_key_appl(struct loophub *h, uint32_t key);

/* A network endpoint for rank `rank` (give to agent_create_net). */
void *loopnet_create(struct loophub *h, unsigned rank);
extern const struct agent_net_ops loopnet_ops;

#endif
