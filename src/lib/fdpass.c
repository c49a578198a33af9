/*
 * fdpass.c - file descriptors handed over a unix socket (SCM_RIGHTS): init
 * to the supervisor, the supervisor to init, the OCI monitor and console.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "fdpass.h"

ssize_t fd_send(int sock, const void *buf, size_t len, const int *fds,
		size_t nfds, int flags)
{
	char cbuf[CMSG_SPACE(FD_SEND_MAX * sizeof(int))];
	struct iovec iov = { (void *)buf, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (nfds > FD_SEND_MAX)
		return -EINVAL;
	if (nfds) {
		struct cmsghdr *cm;

		memset(cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf;
		mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, nfds * sizeof(int));
	}
	n = sendmsg(sock, &mh, flags);
	return n < 0 ? -errno : n;
}
