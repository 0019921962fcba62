/* SPDX-License-Identifier: Apache-2.0
 * ctl_listen.c — the control socket file: its parent directory, a stale socket replaced (never
 * a live one, never something that is not a socket), mode and group set before listen.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "ctl_listen.h"

/* Is a socket at path already served? Then we must not steal it. */
static int path_in_use(const struct sockaddr_un *sa)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int used;

	if (fd < 0)
		return 0;
	used = connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0;
	close(fd);
	return used;
}

static int make_parent(const char *path)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char *slash;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = '\0';
	if (mkdir(dir, 0755) && errno != EEXIST)
		return -errno;
	return 0;
}

int ctl_listen_socket(const char *path, mode_t mode, int have_gid, gid_t gid, int *lfd)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat stt;
	int fd, rc;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	rc = make_parent(path);
	if (rc)
		return rc;
	if (lstat(path, &stt) == 0) {
		if (!S_ISSOCK(stt.st_mode))
			return -EEXIST; /* never unlink something that is not a socket */
		if (path_in_use(&sa))
			return -EADDRINUSE;
		unlink(path);
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    chmod(path, mode) ||
	    (have_gid && chown(path, (uid_t)-1, gid)) ||
	    listen(fd, 64)) {
		rc = -errno;
		close(fd);
		unlink(path);
		return rc;
	}
	*lfd = fd;
	return 0;
}
