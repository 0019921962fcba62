/* sd_notify.c — the systemd notify protocol: one SOCK_DGRAM datagram to $NOTIFY_SOCKET.
 * A path starting with '@' names an abstract socket (the '@' becomes a NUL byte). */
#include "tally_sd_notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int tally_sd_notify(const char *state)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *path = getenv("NOTIFY_SOCKET");
	size_t len, state_len;
	socklen_t sa_len;
	ssize_t sent;
	int fd, ret = 0;

	if (state == NULL || (state_len = strlen(state)) == 0)
		return -EINVAL;
	if (path == NULL || path[0] == '\0')
		return 0; /* not started by systemd: nothing to tell */
	if (path[0] != '/' && path[0] != '@')
		return -EINVAL;
	len = strlen(path);
	if (len >= sizeof(sa.sun_path))
		return -EINVAL;
	memcpy(sa.sun_path, path, len);
	if (path[0] == '@')
		sa.sun_path[0] = '\0';
	/* abstract names are not NUL-terminated: the length carries the name */
	sa_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + (path[0] == '/'));

	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	sent = sendto(fd, state, state_len, MSG_NOSIGNAL, (struct sockaddr *)&sa, sa_len);
	if (sent < 0)
		ret = -errno;
	else if ((size_t)sent != state_len)
		ret = -EMSGSIZE;
	close(fd);
	return ret;
}
