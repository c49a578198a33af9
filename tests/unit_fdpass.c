/*
 * unit_fdpass.c - fds over a unix socket: what arrives, what is closed
 * when more come than asked for, and a message whose fds the kernel had
 * to drop (refused whole, none leaked).
 */
#include "fdpass.h"
#include "unit.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static int open_fds(void)
{
	int n = 0;

	for (int fd = 0; fd < 1024; fd++)
		n += fcntl(fd, F_GETFD) >= 0;
	return n;
}

static bool same_file(int a, int b)
{
	struct stat x, y;

	return fstat(a, &x) == 0 && fstat(b, &y) == 0 &&
	       x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

TEST(fds_arrive_close_on_exec)
{
	int sv[2], p[2], got[4];
	size_t n = 9;
	char c = 0;

	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	CHECK(pipe(p) == 0);
	CHECK(fd_send(sv[0], "x", 1, p, 2, 0) == 1);
	CHECK(fd_recv(sv[1], &c, 1, got, 4, &n, 0) == 1);
	CHECK(c == 'x' && n == 2);
	if (n == 2) {
		CHECK(same_file(got[0], p[0]) && same_file(got[1], p[1]));
		CHECK(fcntl(got[0], F_GETFD) & FD_CLOEXEC);
		close(got[0]);
		close(got[1]);
	}
	/* none sent: none received */
	CHECK(fd_send(sv[0], "y", 1, NULL, 0, 0) == 1);
	CHECK(fd_recv(sv[1], &c, 1, got, 4, &n, 0) == 1 && n == 0 && c == 'y');
	/* EOF */
	close(sv[0]);
	CHECK(fd_recv(sv[1], &c, 1, got, 4, &n, 0) == 0 && n == 0);
	close(sv[1]);
	close(p[0]);
	close(p[1]);
}

TEST(more_than_max_are_closed)
{
	int sv[2], p[2], three[3], got[2], before;
	size_t n = 0;
	char c;

	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	CHECK(pipe(p) == 0);
	three[0] = three[1] = p[0];
	three[2] = p[1];
	before = open_fds();
	CHECK(fd_send(sv[0], "x", 1, three, 3, 0) == 1);
	CHECK(fd_recv(sv[1], &c, 1, got, 2, &n, 0) == 1 && n == 2);
	CHECK(open_fds() == before + 2);
	while (n)
		close(got[--n]);
	close(sv[0]);
	close(sv[1]);
	close(p[0]);
	close(p[1]);
}

/* More fds than any message of ours carries: the kernel drops some. */
TEST(truncated_message_refused)
{
	enum { MANY = FD_SEND_MAX + 8 };
	char cbuf[CMSG_SPACE(MANY * sizeof(int))];
	struct iovec iov = { "x", 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	int sv[2], many[MANY], got[FD_SEND_MAX], before, fd;
	struct cmsghdr *cm;
	size_t n = 5;
	char c;

	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	for (int i = 0; i < MANY; i++)
		many[i] = fd;
	memset(cbuf, 0, sizeof(cbuf));
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(many));
	memcpy(CMSG_DATA(cm), many, sizeof(many));
	before = open_fds();
	CHECK(sendmsg(sv[0], &mh, 0) == 1);
	CHECK(fd_recv(sv[1], &c, 1, got, FD_SEND_MAX, &n, 0) == -EMSGSIZE);
	CHECK(n == 0);
	CHECK(open_fds() == before);
	close(fd);
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	unit_run_all();
	UNIT_DONE();
}
