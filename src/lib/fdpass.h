/*
 * fdpass.h - file descriptors handed over a unix socket.
 */
#ifndef CORRAL_FDPASS_H
#define CORRAL_FDPASS_H

#include <stddef.h>
#include <sys/types.h>

/* The most fds one message carries (the proxy's listeners from init: 11). */
#define FD_SEND_MAX 16

/*
 * One message of len bytes over a unix socket, with nfds fds as SCM_RIGHTS
 * (none when nfds is 0).  flags go to sendmsg (MSG_NOSIGNAL, MSG_DONTWAIT).
 * Returns the bytes sent, or -errno.  No allocation: a forked child may
 * call it.
 */
ssize_t fd_send(int sock, const void *buf, size_t len, const int *fds,
		size_t nfds, int flags);

/*
 * One message into buf (at most len bytes), and the fds that came with it
 * into fds (at most max; more are closed, and so are all of them when the
 * kernel had to drop some: -EMSGSIZE).  Returns the bytes read, 0 at EOF,
 * or -errno.  No allocation: a forked child may call it.
 */
ssize_t fd_recv(int sock, void *buf, size_t len, int *fds, size_t max,
		size_t *nfds, int flags);

#endif
