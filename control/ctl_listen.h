/* SPDX-License-Identifier: Apache-2.0
 * ctl_listen.h — the control server's socket file (ctl_listen.c), internal to control/.
 */
#ifndef CTL_LISTEN_H
#define CTL_LISTEN_H

#include <sys/types.h>

/* Binds and listens on path (mode, and group gid if have_gid). 0 and *lfd, or -errno
 * (-EEXIST: not a socket; -EADDRINUSE: served by another process). */
int ctl_listen_socket(const char *path, mode_t mode, int have_gid, gid_t gid, int *lfd);

#endif
