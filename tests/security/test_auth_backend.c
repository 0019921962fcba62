/* SPDX-License-Identifier: Apache-2.0
 * test_auth_backend.c — the GMAC backends of dataplane/auth agree on the wire: each case runs
 * in a child process (the backend is chosen once per process from TALLY_AUTH_BACKEND),
 * reporting through a pipe. OpenSSL and intel-ipsec-mb give the same tags for every length
 * and split; packets (PUSH and two-level RESULT) signed under one verify under the other, and
 * a flipped byte fails under the other. A bad TALLY_AUTH_BACKEND fails tally_auth_new with
 * EINVAL and a message naming the variable; unset, ipsec-mb is picked where built in.
 * tally_auth_imb_arch names ipsec-mb's paths (the backend's name and tally-gmac-bench).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <intel-ipsec-mb.h>

#include "tally_auth.h"

#define NPKT 6
#define SLOT (TALLY_HDR_MAX + 8192)

static const uint8_t key[32] = { 9, 8, 7, 6, 5, 4, 3, 2, 1 };
static uint8_t data[9000];
static uint8_t pkts[NPKT][SLOT];
static size_t pkt_len[NPKT];

typedef int (*child_fn)(int out);

/* Run fn in a child with TALLY_AUTH_BACKEND=backend selected (NULL: unset); its stderr goes to the
 * pipe too. Returns the bytes it wrote into out, *status its exit code. */
static size_t in_child(const char *backend, child_fn fn, uint8_t *out, size_t max, int *status)
{
	int fd[2], ws = 0;
	size_t got = 0;
	ssize_t r;
	assert_int_equal(pipe(fd), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fd[0]);
		/* the program's edge: its setting passed to the library */
		tally_auth_select_backend(backend);
		dup2(fd[1], 2);
		_exit(fn(fd[1]));
	}
	close(fd[1]);
	while (got < max && (r = read(fd[0], out + got, max - got)) > 0)
		got += (size_t)r;
	close(fd[0]);
	assert_int_equal(waitpid(pid, &ws, 0), pid);
	*status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128;
	return got;
}

static int put(int out, const void *p, size_t n)
{
	return write(out, p, n) == (ssize_t)n ? 0 : 1;
}

/* Tags of data[0..n) split at s, for lengths and splits on and off block boundaries. */
static int ch_tags(int out)
{
	static const size_t lens[] = { 0, 1, 15, 16, 17, 64, 92, 100, 1024, 1088, 8192, 8256 };
	struct tally_auth *a = tally_auth_new();
	uint8_t iv[12] = { 1, 2, 3 }, tag[16];
	if (!a || tally_auth_set_key(a, key))
		return 2;
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		for (size_t s = 0; s <= lens[i]; s += lens[i] / 3 + 1) {
			iv[11] = (uint8_t)(i * 16 + s);
			if (tally_auth_gmac(a, iv, data, s, data + s, lens[i] - s, tag) ||
			    put(out, tag, 16))
				return 3;
		}
	tally_auth_free(a);
	return 0;
}

/* Signed PUSHes and RESULTs of 4, 1024 and 8192 payload bytes into pkts (the child's copy),
 * written out in full. */
static int ch_sign(int out)
{
	static const uint32_t sizes[NPKT / 2] = { 4, 1024, 8192 };
	struct tally_auth *a = tally_auth_new();
	uint8_t inner[TALLY_AUTH_LEN];
	if (!a || tally_auth_set_key(a, key))
		return 2;
	for (int i = 0; i < NPKT; i++) {
		struct tally_hdr h;
		uint32_t n = sizes[i / 2];
		memset(&h, 0, sizeof(h));
		h.op = i % 2 ? TALLY_OP_RESULT : TALLY_OP_PUSH;
		h.job_id = 3;
		h.token = 42;
		h.round = (uint32_t)i;
		h.count = n / 4;
		h.dtype = TALLY_DT_F32;
		h.flags = TALLY_F_AUTH;
		h.payload_len = n;
		tally_proto_encode_hdr(pkts[i], &h);
		size_t hl = i % 2 ? TALLY_HDR_MAX : TALLY_HDR_AUTH;
		memcpy(pkts[i] + hl, data + i, n);
		int rc = i % 2 ? tally_auth_sign_payload(a, inner, pkts[i] + hl, n) ||
					 tally_auth_sign_result(a, pkts[i], inner)
			       : tally_auth_sign(a, pkts[i], pkts[i] + hl, n);
		if (rc || put(out, pkts[i], SLOT))
			return 3;
	}
	tally_auth_free(a);
	return 0;
}

/* Every packet in pkts (the parent's, inherited) verifies; with one payload or tag byte
 * flipped it does not. */
static int ch_verify(int out)
{
	struct tally_auth *a = tally_auth_new();
	struct tally_pkt p;
	(void)out;
	if (!a || tally_auth_set_key(a, key))
		return 2;
	for (int i = 0; i < NPKT; i++) {
		if (tally_proto_decode(pkts[i], pkt_len[i], &p) != TALLY_OK ||
		    tally_auth_verify(a, pkts[i], &p) != 0)
			return 10 + i;
		size_t at[2] = { pkt_len[i] - 1, TALLY_HDR_LEN + 20 };
		for (int k = 0; k < 2; k++) {
			pkts[i][at[k]] ^= 4;
			if (tally_proto_decode(pkts[i], pkt_len[i], &p) == TALLY_OK &&
			    tally_auth_verify(a, pkts[i], &p) == 0)
				return 20 + i;
			pkts[i][at[k]] ^= 4;
		}
	}
	tally_auth_free(a);
	return 0;
}

static int ch_new(int out)
{
	errno = 0;
	struct tally_auth *a = tally_auth_new();
	const char *name = tally_auth_backend();
	if (a) {
		tally_auth_free(a);
		return put(out, name, strlen(name)) ? 3 : 0;
	}
	return errno == EINVAL && !name ? 1 : 2;
}

static void test_same_tags(void **state)
{
	(void)state;
	static uint8_t t1[8192], t2[8192];
	int s1, s2;
	size_t n1 = in_child("openssl", ch_tags, t1, sizeof(t1), &s1);
	size_t n2 = in_child("ipsec-mb", ch_tags, t2, sizeof(t2), &s2);
	assert_int_equal(s1, 0);
	assert_int_equal(s2, 0);
	assert_true(n1 > 16 * 30);
	assert_int_equal(n1, n2);
	assert_memory_equal(t1, t2, n1);
}

static void cross(const char *signer, const char *verifier)
{
	int st;
	size_t n = in_child(signer, ch_sign, &pkts[0][0], sizeof(pkts), &st);
	assert_int_equal(st, 0);
	assert_int_equal(n, sizeof(pkts));
	for (int i = 0; i < NPKT; i++)
		pkt_len[i] = (i % 2 ? TALLY_HDR_MAX : TALLY_HDR_AUTH) + (i < 2 ? 4 : i < 4 ? 1024 : 8192);
	uint8_t none[1];
	in_child(verifier, ch_verify, none, sizeof(none), &st);
	assert_int_equal(st, 0);
}

static void test_cross_verify(void **state)
{
	(void)state;
	cross("openssl", "ipsec-mb");
	cross("ipsec-mb", "openssl");
}

static void test_choice(void **state)
{
	(void)state;
	char msg[512];
	int st;
	size_t n = in_child("bogus", ch_new, (uint8_t *)msg, sizeof(msg) - 1, &st);
	msg[n] = 0;
	assert_int_equal(st, 1);
	assert_non_null(strstr(msg, "TALLY_AUTH_BACKEND=bogus"));
	assert_non_null(strstr(msg, "openssl or ipsec-mb"));
	n = in_child("openssl", ch_new, (uint8_t *)msg, sizeof(msg) - 1, &st);
	msg[n] = 0;
	assert_int_equal(st, 0);
	assert_int_equal(strncmp(msg, "openssl ", 8), 0);
	n = in_child(NULL, ch_new, (uint8_t *)msg, sizeof(msg) - 1, &st);
	msg[n] = 0;
	assert_int_equal(st, 0);
	printf("default GMAC backend: %s\n", msg);
	if (__builtin_cpu_supports("aes"))
		assert_int_equal(strncmp(msg, "ipsec-mb ", 9), 0);
}

static void test_imb_arch(void **state)
{
	(void)state;
	assert_string_equal(tally_auth_imb_arch(IMB_ARCH_NOAESNI), "no-aesni");
	assert_string_equal(tally_auth_imb_arch(IMB_ARCH_SSE), "sse");
	assert_string_equal(tally_auth_imb_arch(IMB_ARCH_AVX), "avx");
	assert_string_equal(tally_auth_imb_arch(IMB_ARCH_AVX2), "avx2");
	assert_string_equal(tally_auth_imb_arch(IMB_ARCH_AVX512), "avx512");
	assert_string_equal(tally_auth_imb_arch(IMB_ARCH_NONE), "none");
	assert_string_equal(tally_auth_imb_arch(-1), "none");
}

int main(void)
{
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 29 + 3);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_choice),
		cmocka_unit_test(test_same_tags),
		cmocka_unit_test(test_cross_verify),
		cmocka_unit_test(test_imb_arch),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
