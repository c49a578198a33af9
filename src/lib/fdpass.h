/*
 * fdpass.h - file descriptors handed over a unix socket.
 */
#ifndef CORRAL_FDPASS_H
#define CORRAL_FDPASS_H

#include <stddef.h>
#include <sys/types.h>

/* The most fds one message carries (the proxy helper's listeners: 11). */
#define FD_SEND_MAX 16

/*
 * One message of len bytes over a unix socket, with nfds fds as SCM_RIGHTS
 * (none when nfds is 0).  flags go to sendmsg (MSG_NOSIGNAL, MSG_DONTWAIT).
 * Returns the bytes sent, or -errno.  No allocation: a forked child may
 * call it.
 */
ssize_t fd_send(int sock, const void *buf, size_t len, const int *fds,
		size_t nfds, int flags);

#endif
