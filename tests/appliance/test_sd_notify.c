/* test_sd_notify.c — tally_sd_notify() speaks systemd's notify protocol: the datagram reaches
 * a socket bound at $NOTIFY_SOCKET (path and abstract), bad input is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "tally_sd_notify.h"

/* Bind a datagram socket at NAME ('@' = abstract) and return it. */
static int bind_listener(const char *name)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t len = strlen(name);
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_true(len < sizeof(sa.sun_path));
	memcpy(sa.sun_path, name, len);
	if (name[0] == '@')
		sa.sun_path[0] = '\0';
	assert_int_equal(bind(fd, (struct sockaddr *)&sa,
			      (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len +
					  (name[0] == '/'))), 0);
	return fd;
}

static void expect_datagram(int fd, const char *want)
{
	char buf[256];
	ssize_t n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);

	assert_true(n >= 0);
	buf[n] = '\0';
	assert_string_equal(buf, want);
}

static void test_unset_is_noop(void **state)
{
	(void)state;
	unsetenv("NOTIFY_SOCKET");
	assert_int_equal(tally_sd_notify("READY=1"), 0);
	setenv("NOTIFY_SOCKET", "", 1);
	assert_int_equal(tally_sd_notify("READY=1"), 0);
}

static void test_path_socket(void **state)
{
	char path[64];
	int fd;

	(void)state;
	snprintf(path, sizeof(path), "/tmp/deploy-sdnotify-%d.sock", (int)getpid());
	unlink(path);
	fd = bind_listener(path);
	setenv("NOTIFY_SOCKET", path, 1);
	assert_int_equal(tally_sd_notify("READY=1\nSTATUS=2 ports up"), 0);
	expect_datagram(fd, "READY=1\nSTATUS=2 ports up");
	assert_int_equal(tally_sd_notify("STOPPING=1"), 0);
	expect_datagram(fd, "STOPPING=1");
	close(fd);
	unlink(path);
	/* the listener is gone: the error comes back, nothing hangs */
	assert_true(tally_sd_notify("READY=1") < 0);
}

static void test_abstract_socket(void **state)
{
	char name[64];
	int fd;

	(void)state;
	snprintf(name, sizeof(name), "@deploy-sdnotify-%d", (int)getpid());
	fd = bind_listener(name);
	setenv("NOTIFY_SOCKET", name, 1);
	assert_int_equal(tally_sd_notify("READY=1"), 0);
	expect_datagram(fd, "READY=1");
	close(fd);
}

static void test_bad_input(void **state)
{
	char longpath[200];

	(void)state;
	setenv("NOTIFY_SOCKET", "/tmp/deploy-sdnotify-none.sock", 1);
	assert_int_equal(tally_sd_notify(NULL), -EINVAL);
	assert_int_equal(tally_sd_notify(""), -EINVAL);
	assert_int_equal(tally_sd_notify("READY=1"), -ENOENT);
	setenv("NOTIFY_SOCKET", "relative/path", 1);
	assert_int_equal(tally_sd_notify("READY=1"), -EINVAL);
	memset(longpath, 'x', sizeof(longpath) - 1);
	longpath[0] = '/';
	longpath[sizeof(longpath) - 1] = '\0';
	setenv("NOTIFY_SOCKET", longpath, 1);
	assert_int_equal(tally_sd_notify("READY=1"), -EINVAL);
	unsetenv("NOTIFY_SOCKET");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unset_is_noop),
		cmocka_unit_test(test_path_socket),
		cmocka_unit_test(test_abstract_socket),
		cmocka_unit_test(test_bad_input),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
