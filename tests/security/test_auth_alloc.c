/* SPDX-License-Identifier: Apache-2.0
 * test_auth_alloc.c — signing and verifying allocate nothing (the datapath rule): malloc,
 * calloc, realloc, aligned_alloc and posix_memalign are interposed and counted over 10000
 * sign + decode + verify rounds of an 8 KiB packet after the context was keyed. Exit 0 when
 * none, 1 otherwise. Run once per GMAC backend (TALLY_AUTH_BACKEND).
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <stdlib.h>

#include "tally_auth.h"

/* The sanitizer build (tests/run.sh's pass) has ASan's own allocator: interposing malloc
 * over it aborts at start. Counting allocations is the plain build's job there. */
#if defined(__SANITIZE_ADDRESS__)
int main(void)
{
	puts("auth_alloc: skipped under AddressSanitizer (it replaces malloc)");
	return 77;
}
#else

void *__libc_malloc(size_t size);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t size);
void *__libc_memalign(size_t align, size_t size);

static long allocs;

void *malloc(size_t size)
{
	allocs++;
	return __libc_malloc(size);
}

void *calloc(size_t n, size_t size)
{
	allocs++;
	return __libc_calloc(n, size);
}

void *realloc(void *p, size_t size)
{
	allocs++;
	return __libc_realloc(p, size);
}

void *aligned_alloc(size_t align, size_t size)
{
	allocs++;
	return __libc_memalign(align, size);
}

int posix_memalign(void **p, size_t align, size_t size)
{
	allocs++;
	*p = __libc_memalign(align, size);
	return *p ? 0 : 12; /* ENOMEM */
}

int main(void)
{
	static uint8_t buf[TALLY_HDR_AUTH + 8192], res[TALLY_HDR_MAX + 8192];
	uint8_t inner[TALLY_AUTH_LEN];
	uint8_t key[TALLY_AUTH_KEY_LEN] = { 1, 2, 3 };
	struct tally_hdr h;
	struct tally_pkt p;

	tally_auth_select_backend(getenv(TALLY_AUTH_BACKEND_ENV)); /* the program's edge */
	memset(&h, 0, sizeof(h));
	h.op = TALLY_OP_PUSH;
	h.count = 2048;
	h.flags = TALLY_F_AUTH;
	h.payload_len = 8192;
	struct tally_auth *a = tally_auth_new();
	if (!a || tally_auth_set_key(a, key))
		return 1;
	tally_proto_encode_hdr(buf, &h);
	h.op = TALLY_OP_RESULT;
	tally_proto_encode_hdr(res, &h);
	long before = allocs;
	for (int i = 0; i < 10000; i++) {
		if (tally_auth_sign(a, buf, buf + TALLY_HDR_AUTH, 8192) ||
		    tally_proto_decode(buf, sizeof(buf), &p) != TALLY_OK ||
		    tally_auth_verify(a, buf, &p)) {
			fprintf(stderr, "sign/verify failed at %d\n", i);
			return 1;
		}
		/* a RESULT: the payload tag once, the header tag per copy */
		if (tally_auth_sign_payload(a, inner, res + TALLY_HDR_MAX, 8192) ||
		    tally_auth_sign_result(a, res, inner) ||
		    tally_proto_decode(res, sizeof(res), &p) != TALLY_OK ||
		    tally_auth_verify(a, res, &p)) {
			fprintf(stderr, "RESULT sign/verify failed at %d\n", i);
			return 1;
		}
	}
	long n = allocs - before;
	tally_auth_free(a);
	printf("allocations in 10000 sign + verify of a PUSH and a RESULT (%s): %ld\n",
	       tally_auth_backend(), n);
	return n == 0 ? 0 : 1;
}
#endif
