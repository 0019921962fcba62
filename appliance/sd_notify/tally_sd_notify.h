/* tally_sd_notify.h — systemd readiness notification (the sd_notify protocol) without
 * linking libsystemd: one datagram to the AF_UNIX socket named by $NOTIFY_SOCKET.
 * tallyd calls tally_sd_notify("READY=1") once its ports are up (Type=notify in
 * tallyd.service) and "STOPPING=1" when it starts draining. */
#ifndef TALLY_SD_NOTIFY_H
#define TALLY_SD_NOTIFY_H

/* Send STATE (newline-separated VAR=VALUE assignments, e.g. "READY=1\nSTATUS=2 ports up")
 * to the service manager. Returns 0 when sent and also when not run by systemd
 * ($NOTIFY_SOCKET unset or empty); -EINVAL for a NULL/empty STATE or a socket path that is
 * not absolute ('/') or abstract ('@') or too long; other negative errno from socket/sendmsg. */
int tally_sd_notify(const char *state);

#endif
