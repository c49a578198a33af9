/*
 * fdpass.c - file descriptors handed over a unix socket (SCM_RIGHTS): init
 * to the supervisor, the supervisor to init, the OCI monitor and console.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

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

ssize_t fd_recv(int sock, void *buf, size_t len, int *fds, size_t max,
		size_t *nfds, int flags)
{
	union {
		char buf[CMSG_SPACE(FD_SEND_MAX * sizeof(int))];
		struct cmsghdr align;
	} cb;
	struct iovec iov = { buf, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cb.buf, .msg_controllen = sizeof(cb.buf) };
	struct cmsghdr *cm;
	ssize_t n;

	*nfds = 0;
	do
		n = recvmsg(sock, &mh, flags | MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		int got[FD_SEND_MAX];
		size_t k;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		memcpy(got, CMSG_DATA(cm), k * sizeof(int));
		for (size_t i = 0; i < k; i++) {
			if (*nfds < max)
				fds[(*nfds)++] = got[i];
			else
				close(got[i]);
		}
	}
	/* more fds than the buffer holds: the kernel dropped some, refuse all */
	if (mh.msg_flags & MSG_CTRUNC) {
		while (*nfds)
			close(fds[--*nfds]);
		return -EMSGSIZE;
	}
	return n;
}
