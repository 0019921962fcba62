/* SPDX-License-Identifier: Apache-2.0
 * client_drops.c — what an operation's give-up text says about drops (client_err_drops):
 * this session's rejections by reason, what the transport saw lost (socket receive buffer,
 * truncation), and where the appliance's own drops are read. Appended to the text already
 * set; called by client_op.c (no RESULT), client_err.c (a silent rank) and client_live.c
 * (appliance unreachable). Calls nothing else in the client.
 */
#include <stdio.h>
#include <string.h>

#include "client_int.h"

/* The session's rejections, the largest reasons first (at most 3 named). */
static size_t err_own_drops(const struct tally_client *c, char *buf, size_t len)
{
	uint64_t total = 0, shown[3] = { 0 };
	int n, r3[3] = { -1, -1, -1 };

	for (int r = 0; r < TALLY_R_COUNT; r++) {
		uint64_t d = c->st.drops[r];

		total += d;
		for (int i = 0; i < 3 && d; i++)
			if (d > shown[i]) {
				memmove(&shown[i + 1], &shown[i], (size_t)(2 - i) * sizeof(shown[0]));
				memmove(&r3[i + 1], &r3[i], (size_t)(2 - i) * sizeof(r3[0]));
				shown[i] = d;
				r3[i] = r;
				break;
			}
	}
	if (!total)
		return 0;
	n = snprintf(buf, len, "; this session rejected %llu received packets (",
		     (unsigned long long)total);
	for (int i = 0; i < 3 && r3[i] >= 0 && n >= 0 && (size_t)n < len; i++)
		n += snprintf(buf + n, len - (size_t)n, "%s%s %llu", i ? ", " : "",
			      tally_reason_name((enum tally_reason)r3[i]),
			      (unsigned long long)shown[i]);
	if (n >= 0 && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, ")");
	return n < 0 ? 0 : (size_t)n < len ? (size_t)n : len - 1;
}

void client_err_drops(struct tally_client *c)
{
	size_t at = strnlen(c->errmsg, sizeof(c->errmsg)), left = sizeof(c->errmsg) - at;
	char loss[256];

	at += err_own_drops(c, c->errmsg + at, left);
	left = sizeof(c->errmsg) - at;
	if (c->ops->rx_loss && c->ops->rx_loss(c->xctx, loss, sizeof(loss)) && left > 1)
		at += (size_t)snprintf(c->errmsg + at, left, "; %s", loss);
	if (at < sizeof(c->errmsg) - 1)
		snprintf(c->errmsg + at, sizeof(c->errmsg) - at, "; what the appliance dropped: "
			 "`tallyctl stats` there (drops by reason; rx_missed: its receive ring "
			 "overflowed)");
}
