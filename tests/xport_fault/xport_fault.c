/* SPDX-License-Identifier: Apache-2.0
 * xport_fault.c — test-only: the faults TALLY_VERBS_FAULT asks for, as the transport
 * registry's fault flags (tally_xport_reg.h struct tally_xport_fault). Linked only into the
 * test builds of the programs (tally-worker-fault, tally-udpd-fault, tallyd-fault), whose
 * transport setup calls it through a weak reference; the production programs do not have
 * it, so nothing there can inject a fault.
 *
 * TALLY_VERBS_FAULT is a comma list: lose-disconnect, lose-established, replay-connect,
 * skew-connect, migrate-fail, handoff-full, bad-advert, short-advert (verbs_xport.c says
 * what each does).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tally_xport_reg.h"

const struct tally_xport_fault *tally_test_xport_fault(char *err, size_t errlen);

static struct tally_xport_fault fault;

static int set_one(const char *t)
{
	static const struct {
		const char *name;
		size_t off;
	} tab[] = {
#define F(n, f) { n, offsetof(struct tally_xport_fault, f) }
		F("lose-disconnect", lose_disconnect), F("lose-established", lose_established),
		F("replay-connect", replay_connect), F("skew-connect", skew_connect),
		F("migrate-fail", migrate_fail), F("handoff-full", handoff_full),
		F("bad-advert", bad_advert), F("short-advert", short_advert),
#undef F
	};

	for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++)
		if (!strcmp(t, tab[i].name)) {
			((uint8_t *)&fault)[tab[i].off] = 1;
			return 0;
		}
	return -1;
}

/* NULL and err "" without faults, NULL with a message for a bad list, else the flags. */
const struct tally_xport_fault *tally_test_xport_fault(char *err, size_t errlen)
{
	const char *env = getenv("TALLY_VERBS_FAULT");
	char buf[128], *save = NULL;

	if (errlen)
		err[0] = 0;
	if (!env || !*env)
		return NULL;
	memset(&fault, 0, sizeof(fault));
	snprintf(buf, sizeof(buf), "%s", env);
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
		if (set_one(t)) {
			snprintf(err, errlen, "verbs: TALLY_VERBS_FAULT='%s': the faults are "
				 "lose-disconnect, lose-established, replay-connect, skew-connect, "
				 "migrate-fail, handoff-full, bad-advert and short-advert (unset it in "
				 "production)", env);
			return NULL;
		}
	return &fault;
}
