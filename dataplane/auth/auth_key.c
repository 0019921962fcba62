/* SPDX-License-Identifier: Apache-2.0
 * auth_key.c — reading a job key file (tally_auth.h): 32 raw bytes or 64 hex digits. Every
 * refusal names the file and what to change; the key never leaves the caller's buffer.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "tally_auth.h"

static int hexval(uint8_t c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* 64 hex digits (+ optional newline) or exactly 32 raw bytes. */
static int key_parse(const uint8_t *buf, size_t n, uint8_t key[TALLY_AUTH_KEY_LEN])
{
	if (n == TALLY_AUTH_KEY_LEN) {
		memcpy(key, buf, TALLY_AUTH_KEY_LEN);
		return 0;
	}
	if (n == 2 * TALLY_AUTH_KEY_LEN + 1 && buf[n - 1] == '\n')
		n--;
	if (n != 2 * TALLY_AUTH_KEY_LEN)
		return -EINVAL;
	for (size_t i = 0; i < TALLY_AUTH_KEY_LEN; i++) {
		int hi = hexval(buf[2 * i]), lo = hexval(buf[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -EINVAL;
		key[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

int tally_auth_key_load(const char *path, uint8_t key[TALLY_AUTH_KEY_LEN], char *err,
			size_t errlen)
{
	uint8_t buf[2 * TALLY_AUTH_KEY_LEN + 2];
	struct stat st;
	ssize_t n;
	int rc, fd = -1;

	if (!path || !*path) {
		snprintf(err, errlen, "no key file given (set %s or --key-file)", TALLY_AUTH_KEY_ENV);
		return -EINVAL;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) != 0) {
		rc = -errno;
		snprintf(err, errlen, "key file %s: cannot read it: %s", path, strerror(errno));
		goto out;
	}
	if (st.st_mode & (S_IRWXO)) {
		rc = -EPERM;
		snprintf(err, errlen, "key file %s: readable by others (mode %03o): chmod 600 it",
			 path, (unsigned)(st.st_mode & 0777));
		goto out;
	}
	n = read(fd, buf, sizeof(buf));
	if (n < 0) {
		rc = -errno;
		snprintf(err, errlen, "key file %s: cannot read it: %s", path, strerror(errno));
		goto out;
	}
	rc = key_parse(buf, (size_t)n, key);
	if (rc)
		snprintf(err, errlen, "key file %s: %zd bytes%s; it must hold exactly 32 random "
			 "bytes or 64 hex digits (e.g. `openssl rand -hex 32 > %s`)", path, n,
			 n == (ssize_t)sizeof(buf) ? " or more" : "", path);
out:
	OPENSSL_cleanse(buf, sizeof(buf));
	if (fd >= 0)
		close(fd);
	return rc;
}
