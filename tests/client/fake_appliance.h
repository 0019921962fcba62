/* SPDX-License-Identifier: Apache-2.0
 * fake_appliance.h — a scripted appliance core for client unit tests: answers JOIN and
 * REGISTER, logs every PUSH it gets (with virtual time) and answers it as the script says.
 */
#ifndef TALLY_FAKE_APPLIANCE_H
#define TALLY_FAKE_APPLIANCE_H

#include <stdbool.h>
#include <stdint.h>

#include "simnet.h"
#include "tally_auth.h"

enum fake_mode {
	FAKE_ECHO,     /* RESULT = the push itself, INCLUDED (a one-worker sum) */
	FAKE_SILENT,   /* never answer pushes */
	FAKE_HOLD,     /* keep pushes; fake_release() answers them (ECHO) */
	FAKE_EXCLUDE,  /* RESULT = `others` value in every element, not INCLUDED */
};

#define FAKE_LOG 4096
#define FAKE_HELD 1024

struct fake_push {
	uint64_t t;
	uint32_t key, round, offset, count;
	uint8_t dtype;
	uint16_t flags;
	float first;   /* first element as f32 (all dtypes) */
	int32_t first_i;
};

struct fake_app {
	struct simnet *net;
	unsigned core, ncores;
	enum fake_mode mode;
	unsigned silent_first;     /* ECHO mode: ignore the first N pushes */
	float others;              /* EXCLUDE: value of the others' sum */
	int join_error;            /* answer JOIN with ERROR(reason) when nonzero */
	unsigned join_error_left;  /* when nonzero: only this many more JOINs get it */
	int register_error;
	bool join_aux_zero;        /* answer with aux 0: a late copy of core 0's JOIN_OK */
	struct tally_auth *auth;   /* set: a keyed job's core: JOIN_OK signed with it */
	int unsigned_join_error;   /* before the JOIN_OK: an unsigned ERROR(reason) (a forger) */
	bool join_no_ok;           /* ... and no JOIN_OK at all (a wrong key: no signed answer) */
	struct tally_addr client;
	bool have_client;
	unsigned njoin, nregister, nbye;
	unsigned npush;
	struct fake_push log[FAKE_LOG];
	unsigned nheld;
	uint8_t held[FAKE_HELD][TALLY_HDR_LEN + 2048];
	size_t held_len[FAKE_HELD];
	unsigned outstanding, max_outstanding; /* HOLD: distinct chunks held */
};

void fake_attach(struct fake_app *f, struct simnet *net, unsigned core, unsigned ncores);
/* HOLD: answer every held push. */
void fake_release(struct fake_app *f);
/* Send an arbitrary RESULT for a logged push to the client (hostile tests). */
void fake_send_raw(struct fake_app *f, const void *buf, size_t len);

#endif
