/*
 * unit_box.c - the parts of a sandbox's supervision that end-to-end tests
 * reach only through a running sandbox: the decoder of init's control
 * messages (child_msg_recv), the box id rule, the policy check before a
 * spawn, and attribution's lookup of an event's call on synthetic calls.
 */
#include "internal.h"
#include "sandbox.h"
#include "box.h"
#include "events.h"
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- child_msg_recv ----------------------------------------------------- */

/* One message as init sends it: whole, with at most one fd. */
static ssize_t send_msg_fd(int sock, const void *m, size_t len, int fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { (void *)m, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;

	if (fd >= 0) {
		mh.msg_control = cbuf;
		mh.msg_controllen = sizeof(cbuf);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	}
	return sendmsg(sock, &mh, 0);
}

static int seqpacket(int sv[2])
{
	return socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv);
}

TEST(msg_whole_message)
{
	struct child_msg in = { .kind = MSG_EXITED, .id = 7, .code = 256,
				.landlock_abi = 5 }, out;
	int sv[2], fd = 0;

	CHECK(seqpacket(sv) == 0);
	CHECK(send_msg_fd(sv[1], &in, sizeof(in), -1) == sizeof(in));
	CHECK(child_msg_recv(sv[0], &out, &fd) == 1);
	CHECK(fd == -1);
	CHECK(out.kind == MSG_EXITED && out.id == 7 && out.code == 256 &&
	      out.landlock_abi == 5);
	/* nothing more to read: not an error, not the end */
	CHECK(child_msg_recv(sv[0], &out, &fd) == 0);
	close(sv[0]);
	close(sv[1]);
}

TEST(msg_text_is_terminated)
{
	struct child_msg in = { .kind = MSG_SETUP_FAILED, .code = -EPERM }, out;
	int sv[2], fd;

	memset(in.text, 'x', sizeof(in.text));	/* no NUL from a hostile init */
	CHECK(seqpacket(sv) == 0);
	CHECK(send_msg_fd(sv[1], &in, sizeof(in), -1) == sizeof(in));
	CHECK(child_msg_recv(sv[0], &out, &fd) == 1);
	CHECK(strlen(out.text) == sizeof(out.text) - 1);
	close(sv[0]);
	close(sv[1]);
}

TEST(msg_short_is_dropped)
{
	struct child_msg in = { .kind = MSG_READY, .landlock_abi = 3 }, out;
	int sv[2], fd;

	CHECK(seqpacket(sv) == 0);
	CHECK(send_msg_fd(sv[1], &in, sizeof(in) / 2, -1) == sizeof(in) / 2);
	CHECK(send_msg_fd(sv[1], &in, sizeof(in), -1) == sizeof(in));
	CHECK(child_msg_recv(sv[0], &out, &fd) == 0);	/* the half, dropped */
	CHECK(child_msg_recv(sv[0], &out, &fd) == 1);	/* the next, whole */
	CHECK(out.kind == MSG_READY && out.landlock_abi == 3);
	close(sv[0]);
	close(sv[1]);
}

TEST(msg_fd_comes_with_its_kind)
{
	struct child_msg in = { .kind = MSG_NOTIFY_FD }, out;
	int sv[2], p[2], fd = -1;
	char c = 0;

	CHECK(seqpacket(sv) == 0);
	CHECK(pipe2(p, O_CLOEXEC) == 0);
	CHECK(send_msg_fd(sv[1], &in, sizeof(in), p[1]) == sizeof(in));
	close(p[1]);
	CHECK(child_msg_recv(sv[0], &out, &fd) == 1);
	CHECK(out.kind == MSG_NOTIFY_FD);
	CHECK(fd >= 0);
	/* it is the fd that was sent: what goes in comes out of the pipe */
	CHECK(write(fd, "z", 1) == 1);
	CHECK(read(p[0], &c, 1) == 1 && c == 'z');
	CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	close(fd);
	close(p[0]);
	close(sv[0]);
	close(sv[1]);
}

TEST(msg_stray_fd_is_closed)
{
	struct child_msg in = { .kind = MSG_READY }, out;
	int sv[2], p[2], fd = 0;
	char c;

	signal(SIGPIPE, SIG_IGN);
	CHECK(seqpacket(sv) == 0);
	CHECK(pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0);
	/* READY carries no fd: the one attached must not stay open with us */
	CHECK(send_msg_fd(sv[1], &in, sizeof(in), p[1]) == sizeof(in));
	close(p[1]);
	CHECK(child_msg_recv(sv[0], &out, &fd) == 0);
	CHECK(fd == -1);
	/* every write end is closed: EOF, not "nothing yet" */
	CHECK(read(p[0], &c, 1) == 0);
	close(p[0]);
	close(sv[0]);
	close(sv[1]);
}

TEST(msg_fd_kind_without_fd_is_dropped)
{
	struct child_msg in = { .kind = MSG_ROOT_FD }, out;
	int sv[2], fd = 0;

	CHECK(seqpacket(sv) == 0);
	CHECK(send_msg_fd(sv[1], &in, sizeof(in), -1) == sizeof(in));
	CHECK(child_msg_recv(sv[0], &out, &fd) == 0);
	CHECK(fd == -1);
	close(sv[0]);
	close(sv[1]);
}

/* Several fds in one message, as READY carries them: NFDS of fds[]. */
static ssize_t send_msg_fds(int sock, const void *m, size_t len, const int *fds,
			    size_t nfds)
{
	char cbuf[CMSG_SPACE(8 * sizeof(int))] = { 0 };
	struct iovec iov = { (void *)m, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cbuf,
			     .msg_controllen = CMSG_SPACE(nfds * sizeof(int)) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(nfds * sizeof(int));
	memcpy(CMSG_DATA(cm), fds, nfds * sizeof(int));
	return sendmsg(sock, &mh, 0);
}

/* READY brings the supervisor's fds in one message, as its code says */
TEST(msg_ready_carries_its_fds)
{
	struct child_msg in = { .kind = MSG_READY, .landlock_abi = 7,
				.code = 1 << MSG_ROOT_FD | 1 << MSG_NOTIFY_FD }, out;
	int sv[2], p[2], q[2], fds[READY_FDS_MAX], fd, sent[2];
	size_t n = 9;
	char c = 0;

	CHECK(seqpacket(sv) == 0);
	CHECK(pipe2(p, O_CLOEXEC) == 0 && pipe2(q, O_CLOEXEC) == 0);
	/* in ready_fd_kinds[] order: the root before the listener */
	sent[0] = p[1];
	sent[1] = q[1];
	CHECK(send_msg_fds(sv[1], &in, sizeof(in), sent, 2) == sizeof(in));
	CHECK(child_msg_recv_fds(sv[0], &out, fds, READY_FDS_MAX, &n) == 1);
	CHECK(out.kind == MSG_READY && out.landlock_abi == 7 && n == 2);
	CHECK(write(fds[0], "r", 1) == 1 && read(p[0], &c, 1) == 1 && c == 'r');
	CHECK(write(fds[1], "n", 1) == 1 && read(q[0], &c, 1) == 1 && c == 'n');
	CHECK(fcntl(fds[0], F_GETFD) & FD_CLOEXEC);
	close(fds[0]);
	close(fds[1]);
	/* child_msg_recv, which takes one fd: such a READY is not for it */
	CHECK(send_msg_fds(sv[1], &in, sizeof(in), sent, 2) == sizeof(in));
	CHECK(child_msg_recv(sv[0], &out, &fd) == 0);
	CHECK(fd == -1);
	close(p[1]);
	close(q[1]);
	/* every copy of the write ends is closed: EOF, not "nothing yet" */
	CHECK(read(p[0], &c, 1) == 0 && read(q[0], &c, 1) == 0);
	close(p[0]);
	close(q[0]);
	close(sv[0]);
	close(sv[1]);
}

/* A hostile init's READY: fds that do not match its code are all closed. */
TEST(msg_ready_fds_must_match_code)
{
	struct child_msg in = { .kind = MSG_READY, .code = 1 << MSG_ROOT_FD }, out;
	int sv[2], p[2], fds[READY_FDS_MAX], two[2];
	size_t n = 9;
	char c;

	CHECK(seqpacket(sv) == 0);
	CHECK(pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0);
	two[0] = two[1] = p[1];
	/* one kind said, two fds sent */
	CHECK(send_msg_fds(sv[1], &in, sizeof(in), two, 2) == sizeof(in));
	CHECK(child_msg_recv_fds(sv[0], &out, fds, READY_FDS_MAX, &n) == 0 && n == 0);
	/* a kind READY does not carry (the pty's) */
	in.code = 1 << MSG_PTY_FD;
	CHECK(send_msg_fds(sv[1], &in, sizeof(in), two, 1) == sizeof(in));
	CHECK(child_msg_recv_fds(sv[0], &out, fds, READY_FDS_MAX, &n) == 0 && n == 0);
	/* a kind said, no fd sent */
	in.code = 1 << MSG_NOTIFY_FD;
	CHECK(send_msg_fd(sv[1], &in, sizeof(in), -1) == sizeof(in));
	CHECK(child_msg_recv_fds(sv[0], &out, fds, READY_FDS_MAX, &n) == 0 && n == 0);
	close(p[1]);
	CHECK(read(p[0], &c, 1) == 0);	/* none of them stayed open with us */
	close(p[0]);
	close(sv[0]);
	close(sv[1]);
}

/*
 * More fds than READY_FDS_MAX: the buffer for five has room for a sixth
 * (CMSG_SPACE rounds up), which the kernel installs.  None may stay open
 * with us, whether the message is taken or dropped.
 */
TEST(msg_fds_past_the_most_are_closed)
{
	struct child_msg in = { .kind = MSG_READY }, out;
	int sv[2], p[2], fds[READY_FDS_MAX], six[READY_FDS_MAX + 1];
	size_t n = 9;
	char c;

	for (size_t i = 0; i < READY_FDS_MAX; i++)
		in.code |= 1 << ready_fd_kinds[i];
	CHECK(seqpacket(sv) == 0);
	CHECK(pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0);
	for (size_t i = 0; i < READY_FDS_MAX + 1; i++)
		six[i] = p[1];
	/* every kind said, one fd more sent */
	CHECK(send_msg_fds(sv[1], &in, sizeof(in), six, READY_FDS_MAX + 1) == sizeof(in));
	if (child_msg_recv_fds(sv[0], &out, fds, READY_FDS_MAX, &n) == 1)
		while (n)
			close(fds[--n]);
	/* a kind with one fd, six sent */
	in.kind = MSG_ROOT_FD;
	in.code = 0;
	CHECK(send_msg_fds(sv[1], &in, sizeof(in), six, READY_FDS_MAX + 1) == sizeof(in));
	if (child_msg_recv_fds(sv[0], &out, fds, READY_FDS_MAX, &n) == 1)
		while (n)
			close(fds[--n]);
	close(p[1]);
	CHECK(read(p[0], &c, 1) == 0);	/* none of them stayed open with us */
	close(p[0]);
	close(sv[0]);
	close(sv[1]);
}

TEST(msg_end_of_init)
{
	struct child_msg out;
	int sv[2], fd;

	CHECK(seqpacket(sv) == 0);
	close(sv[1]);
	CHECK(child_msg_recv(sv[0], &out, &fd) == -EPIPE);
	close(sv[0]);
	CHECK(child_msg_recv(sv[0], &out, &fd) == -EBADF);
}

/* ---- a call's gate: the pidfd of its process ------------------------------ */

/* The pid an fd of ours is a pidfd of (its fdinfo), or -1. */
static pid_t pidfd_pid(int fd)
{
	char path[64], line[128];
	pid_t pid = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "Pid:", 4))
			pid = (pid_t)atoi(line + 4);
	if (f)
		fclose(f);
	return pid;
}

/* A gate as ask_fork makes it: credentials with every message. */
static int gate_pair(int sv[2])
{
	int one = 1;

	if (seqpacket(sv) < 0)
		return -1;
	return setsockopt(sv[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));
}

/* A child that says "r" on sv[1], then waits for EOF (stay) or exits. */
static pid_t say_r(int sv[2], bool stay)
{
	pid_t pid = fork();
	char c;

	if (pid == 0) {
		close(sv[0]);
		if (send(sv[1], "r", 1, 0) != 1)
			_exit(1);
		while (stay && read(sv[1], &c, 1) > 0)
			;
		_exit(0);
	}
	close(sv[1]);
	return pid;
}

/* A living process's "r": its pidfd, and it is that process's. */
TEST(gate_pidfd_of_a_living_sender)
{
	struct exec_fail f;
	int sv[2], fd, passed, pidfd;
	pid_t child, pid;

	CHECK(gate_pair(sv) == 0);
	child = say_r(sv, true);
	CHECK(child > 0);
	CHECK(poll(&(struct pollfd){ .fd = sv[0], .events = POLLIN }, 1, 5000) == 1);
	CHECK(call_gate_recv(sv[0], &f, &pid, &fd, &passed) == 1);
	CHECK(pid == child);
	if (passed >= 0)
		close(passed);
	pidfd = call_gate_pidfd(sv[0], pid, -1);
	CHECK(pidfd >= 0);
	CHECK(pidfd_pid(pidfd) == child);
	close(pidfd);
	close(sv[0]);	/* EOF: it exits */
	CHECK(waitpid(child, NULL, 0) == child);
}

/*
 * One that died after its "r": its pid, there still (a zombie: we have
 * not reaped it), is not taken by number: reaped by init as the daemon
 * reads the "r", it could be any process's.
 */
TEST(gate_pidfd_not_of_a_dead_sender)
{
	struct exec_fail f;
	siginfo_t si;
	int sv[2], fd, passed, pidfd;
	pid_t child, pid;

	CHECK(gate_pair(sv) == 0);
	child = say_r(sv, false);
	CHECK(child > 0);
	/* exited, not reaped: pidfd_open by its pid would succeed */
	CHECK(waitid(P_PID, (id_t)child, &si, WEXITED | WNOWAIT) == 0);
	CHECK(call_gate_recv(sv[0], &f, &pid, &fd, &passed) == 1);
	CHECK(pid == child);
	if (passed >= 0)
		close(passed);
	errno = 0;
	pidfd = call_gate_pidfd(sv[0], pid, -1);
	CHECK(pidfd == -1 && errno == ESRCH);
	if (pidfd >= 0)
		close(pidfd);
	close(sv[0]);
	CHECK(waitpid(child, NULL, 0) == child);
}

/* The kernel's pidfd of the sender, where one came, is the one; -2 none. */
TEST(gate_pidfd_passed_is_used)
{
	int sv[2], p[2];

	CHECK(gate_pair(sv) == 0);
	CHECK(pipe2(p, O_CLOEXEC) == 0);
	CHECK(call_gate_pidfd(sv[0], getpid(), p[0]) == p[0]);
	errno = 0;
	CHECK(call_gate_pidfd(sv[0], getpid(), -2) == -1 && errno == ESRCH);
	close(p[0]);
	close(p[1]);
	close(sv[0]);
	close(sv[1]);
}

#ifndef SO_PASSPIDFD
#define SO_PASSPIDFD	76	/* asm-generic's (x86, arm64) */
#endif

/* How many fds we have open. */
static int fds_open(void)
{
	int n = 0;

	for (int fd = 0; fd < 1024; fd++)
		n += fcntl(fd, F_GETFD) >= 0;
	return n;
}

/*
 * With SO_PASSPIDFD every message brings a pidfd: kept with "r" only,
 * closed with any other; and of the fds a message carries, one kept with
 * "p", the rest closed (a second one was left open in the daemon).
 */
TEST(gate_recv_keeps_only_what_it_says)
{
	struct exec_fail f;
	int sv[2], p[2], two[2], one = 1, fd, pidfd, before;
	pid_t pid;

	CHECK(gate_pair(sv) == 0);
	if (setsockopt(sv[0], SOL_SOCKET, SO_PASSPIDFD, &one, sizeof(one)) < 0) {
		fprintf(stderr, "  (no SO_PASSPIDFD: its part skipped)\n");
	} else {
		CHECK(send(sv[1], "r", 1, 0) == 1);
		CHECK(call_gate_recv(sv[0], &f, &pid, &fd, &pidfd) == 1);
		CHECK(pid == getpid() && pidfd >= 0 && pidfd_pid(pidfd) == getpid());
		if (pidfd >= 0)
			close(pidfd);
		before = fds_open();
		CHECK(send(sv[1], "x", 1, 0) == 1);
		CHECK(call_gate_recv(sv[0], &f, &pid, &fd, &pidfd) == 1);
		CHECK(pidfd == -1 && fd == -1);
		CHECK(fds_open() == before);
	}
	CHECK(pipe2(p, O_CLOEXEC) == 0);
	two[0] = p[0];
	two[1] = p[1];
	before = fds_open();
	{
		char cbuf[CMSG_SPACE(2 * sizeof(int))] = { 0 };
		struct iovec iov = { "p", 1 };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
				     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(2 * sizeof(int));
		memcpy(CMSG_DATA(cm), two, sizeof(two));
		CHECK(sendmsg(sv[1], &mh, 0) == 1);
	}
	CHECK(call_gate_recv(sv[0], &f, &pid, &fd, &pidfd) == 1);
	CHECK(fd >= 0);
	CHECK(fds_open() == before + 1);
	if (fd >= 0)
		close(fd);
	close(p[0]);
	close(p[1]);
	close(sv[0]);
	close(sv[1]);
}

/*
 * Fill every fd slot up to a soft limit just past the highest open fd:
 * the next fd the kernel makes for us fails with EMFILE.  *old: the
 * limit to put back; fds[]: the fillers, closed by fds_unfill.
 */
static void fds_unfill(const struct rlimit *old, int *fds, int n);

static int fds_fill(struct rlimit *old, int *fds, int max)
{
	struct rlimit low;
	int n = 0, top = 0;

	for (int fd = 0; fd < 1024; fd++)
		if (fcntl(fd, F_GETFD) >= 0)
			top = fd;
	if (getrlimit(RLIMIT_NOFILE, old) < 0)
		return -1;
	low = (struct rlimit){ (rlim_t)top + 1, old->rlim_max };
	if (setrlimit(RLIMIT_NOFILE, &low) < 0)
		return -1;
	while (n < max && (fds[n] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0)
		n++;
	if (n == max || errno != EMFILE) {
		fds_unfill(old, fds, n);
		return -1;
	}
	return n;
}

static void fds_unfill(const struct rlimit *old, int *fds, int n)
{
	for (int i = 0; i < n; i++)
		close(fds[i]);
	setrlimit(RLIMIT_NOFILE, old);
}

/*
 * A living sender's "r" read while the daemon has no fd to spare: the
 * kernel's SCM_PIDFD says -EMFILE.  Taken for "it died", a spare was
 * kept unmoved (no pidfd, no move) and its call sent at once, running
 * outside the call's cgroup: the timeout's kill of that group reached
 * nothing.  It is "none to be had" (the process dropped), not ESRCH.
 */
TEST(gate_pidfd_at_emfile_is_no_death)
{
	struct exec_fail f;
	struct rlimit old;
	int sv[2], one = 1, fd, pidfd, fill[1024], nfill;
	pid_t child, pid;
	ssize_t n;

	CHECK(gate_pair(sv) == 0);
	if (setsockopt(sv[0], SOL_SOCKET, SO_PASSPIDFD, &one, sizeof(one)) < 0) {
		fprintf(stderr, "  (no SO_PASSPIDFD: skipped)\n");
		close(sv[0]);
		close(sv[1]);
		return;
	}
	child = say_r(sv, true);
	CHECK(child > 0);
	CHECK(poll(&(struct pollfd){ .fd = sv[0], .events = POLLIN }, 1, 5000) == 1);
	nfill = fds_fill(&old, fill, 1024);
	CHECK(nfill >= 0);
	n = call_gate_recv(sv[0], &f, &pid, &fd, &pidfd);
	fds_unfill(&old, fill, nfill < 0 ? 0 : nfill);
	CHECK(n == 1 && pid == child);
	CHECK(pidfd < -1);	/* one was due, and none came */
	errno = 0;
	CHECK(call_gate_pidfd(sv[0], pid, pidfd) == -1);
	CHECK(errno != ESRCH);	/* alive: not left to wait for news of its end */
	if (pidfd >= 0)
		close(pidfd);
	close(sv[0]);	/* EOF: it exits */
	CHECK(waitpid(child, NULL, 0) == child);
}

/* ---- box ids and the policy check -------------------------------------- */

TEST(box_id_rule)
{
	struct corral_err err;
	char id[CORRAL_SANDBOX_ID_MAX + 2];

	CHECK(corral_check_sandbox_id("a", &err) == 0);
	CHECK(corral_check_sandbox_id("agent-1.run_2", &err) == 0);
	memset(id, 'x', CORRAL_SANDBOX_ID_MAX);
	id[CORRAL_SANDBOX_ID_MAX] = '\0';
	CHECK(corral_check_sandbox_id(id, &err) == 0);
	id[CORRAL_SANDBOX_ID_MAX] = 'x';
	id[CORRAL_SANDBOX_ID_MAX + 1] = '\0';
	CHECK(corral_check_sandbox_id(id, &err) == -EINVAL);
	CHECK(corral_check_sandbox_id("", &err) == -EINVAL);
	CHECK(corral_check_sandbox_id(NULL, &err) == -EINVAL);
	CHECK(corral_check_sandbox_id(".hidden", &err) == -EINVAL);
	CHECK(corral_check_sandbox_id("..", &err) == -EINVAL);
	CHECK(corral_check_sandbox_id("a/b", &err) == -EINVAL);
	CHECK(corral_check_sandbox_id("a b", &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "bad sandbox id \"a b\"");
}

/* one rule for the library, the daemon and the CLI: 1 to 127 bytes of UTF-8 */
TEST(tool_call_id_rule)
{
	struct corral_err err;
	char id[CORRAL_TOOL_CALL_ID_MAX + 2];

	CHECK(corral_check_tool_call_id("call-7", &err) == 0);
	CHECK(corral_check_tool_call_id("toolu_01A:b.c", &err) == 0);
	CHECK(corral_check_tool_call_id("step 1 \xc3\xa9\xe2\x82\xac\xf0\x9f\x90\x8e",
					&err) == 0);
	memset(id, 'x', CORRAL_TOOL_CALL_ID_MAX);
	id[CORRAL_TOOL_CALL_ID_MAX] = '\0';
	CHECK(corral_check_tool_call_id(id, &err) == 0);
	id[CORRAL_TOOL_CALL_ID_MAX] = 'x';
	id[CORRAL_TOOL_CALL_ID_MAX + 1] = '\0';
	CHECK(corral_check_tool_call_id(id, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "1 to 127 bytes (got 128)");
	CHECK(corral_check_tool_call_id("", &err) == -EINVAL);
	CHECK(corral_check_tool_call_id(NULL, &err) == -EINVAL);
	CHECK(corral_check_tool_call_id("a\xff", &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "not UTF-8 (byte 1)");
	CHECK(corral_check_tool_call_id("\xc0\xaf", &err) == -EINVAL);	/* overlong */
	CHECK(corral_check_tool_call_id("\xed\xa0\x80", &err) == -EINVAL); /* surrogate */
	CHECK(corral_check_tool_call_id("\xe2\x82", &err) == -EINVAL);	/* cut */
	CHECK(corral_check_tool_call_id("\xf4\x90\x80\x80", &err) == -EINVAL);
}

TEST(policy_check)
{
	struct corral_policy p;
	struct corral_err err;
	char dir[] = "/tmp/unit_box.XXXXXX", file[64];
	int fd;

	corral_policy_init(&p);
	CHECK(mkdtemp(dir) != NULL);
	snprintf(file, sizeof(file), "%s/f", dir);
	fd = open(file, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	close(fd);

	p.disk_bytes = 1 << 20;
	CHECK(sandbox_check_policy(&p, &err) == 0);
	p.workspace = dir;
	CHECK(sandbox_check_policy(&p, &err) == 0);
	p.workspace = file;
	CHECK(sandbox_check_policy(&p, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "not a directory");
	p.workspace = "/nonexistent/corral-unit";
	CHECK(sandbox_check_policy(&p, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "/nonexistent/corral-unit: No such file");
	p.workspace = NULL;
	p.disk_bytes = 0;
	CHECK(sandbox_check_policy(&p, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "limits.disk");
	unlink(file);
	rmdir(dir);
	corral_policy_free(&p);
}

/* ---- a box's state refuses with codes of its own ------------------------ */

/*
 * Each state answers with its CORRAL_E_* code, never a kernel errno: the
 * daemon maps those codes alone to 409/404, so an EPERM from the kernel
 * can no longer read as "halted".  Synthetic boxes: every refusal here
 * comes before anything touches a sandbox.
 */
TEST(box_state_codes)
{
	char *argv[] = { "true", NULL };
	struct corral_call_opts o = { .argv = argv };
	struct corral_call *c = NULL;
	struct corral_box b;
	struct sandbox sb;
	struct corral_err err = { 0 };
	int fd;

	memset(&b, 0, sizeof(b));
	memset(&sb, 0, sizeof(sb));
	sb.rootfd = 3;
	b.sb = &sb;
	b.state = CORRAL_BOX_HALTED;
	snprintf(b.halt_reason, sizeof(b.halt_reason), "by request");
	CHECK(corral_box_exec(&b, &o, &c, &err) == CORRAL_E_HALTED);
	CHECK(err.code == CORRAL_E_HALTED);
	CHECK_STR_CONTAINS(err.msg, "halted: by request");
	CHECK(corral_box_pause(&b, true, &err) == CORRAL_E_HALTED);
	CHECK(corral_box_open(&b, "/tmp/x", O_WRONLY, &fd, &err) ==
	      CORRAL_E_HALTED);
	b.killed = true;
	CHECK(corral_box_open(&b, "/tmp/x", O_RDONLY, &fd, &err) ==
	      CORRAL_E_HALTED);

	b.state = CORRAL_BOX_PAUSED;
	CHECK(corral_box_exec(&b, &o, &c, &err) == CORRAL_E_PAUSED);
	b.state = CORRAL_BOX_STARTING;
	CHECK(corral_box_exec(&b, &o, &c, &err) == CORRAL_E_STARTING);
	CHECK(corral_box_halt(&b, "x", &err) == CORRAL_E_GONE);
	b.state = CORRAL_BOX_DEAD;
	CHECK(corral_box_exec(&b, &o, &c, &err) == CORRAL_E_GONE);
	CHECK(corral_box_pause(&b, true, &err) == CORRAL_E_GONE);
	b.killed = false;
	CHECK(corral_box_open(&b, "/tmp/x", O_RDONLY, &fd, &err) ==
	      CORRAL_E_GONE);
	CHECK(c == NULL);
	/* outside errno's range: no kernel error is one of them */
	CHECK(CORRAL_E_HALTED < -4095 && CORRAL_E_GONE < -4095 &&
	      CORRAL_E_PAUSED < -4095 && CORRAL_E_STARTING < -4095);
}

/* ---- attribution on synthetic calls ------------------------------------- */

/*
 * Two calls (one running, one done) and one that left a group behind:
 * events without a pid, so only what the event carries decides.
 */
struct fixture {
	struct corral_box b;
	struct corral_call run, done;
	struct lingerer left;
};

static void fixture_init(struct fixture *f)
{
	memset(f, 0, sizeof(*f));
	f->run = (struct corral_call){ .b = &f->b, .id = 1, .cgid = 1001,
				       .tool_call = "t-run", .next = &f->done };
	f->done = (struct corral_call){ .b = &f->b, .id = 2, .cgid = 1002,
					.tool_call = "t-done", .done = true };
	f->left = (struct lingerer){ .id = 3, .cgid = 1003, .tool_call = "t-left" };
	f->b.calls = &f->run;
	f->b.lingering = &f->left;
}

/*
 * Attribute e (then free it): want is the call it must be given, NULL for
 * none; bg whether it must be flagged as background.
 */
static bool names(struct fixture *f, json_t *e, const char *want, bool bg)
{
	bool named = box_attribute(&f->b, e);
	const char *call = json_string_value(json_object_get(e, "call"));
	bool is_bg = json_is_true(json_object_get(e, "background"));
	bool ok = named == (call != NULL) &&
		  (want ? call && !strcmp(call, want) && is_bg == bg : !call);

	if (!ok)
		fprintf(stderr, "  attributed to %s%s (answer %d), want %s%s\n",
			call ? call : "nobody", is_bg ? " (background)" : "", named,
			want ? want : "nobody", bg ? " (background)" : "");
	json_decref(e);
	return ok;
}

#define CG(id)		json_pack("{s:I}", EVENTS_KEY_CGROUP, (json_int_t)(id))
#define GROUP(name)	json_pack("{s:s}", EVENTS_KEY_GROUP, name)

TEST(attribute_by_socket_cgroup)
{
	struct fixture f;

	fixture_init(&f);
	CHECK(names(&f, CG(1001), "t-run", false));
	/* a call that has ended: what its group still does is background */
	CHECK(names(&f, CG(1002), "t-done", true));
	CHECK(names(&f, CG(1003), "t-left", true));
}

TEST(attribute_by_group_name)
{
	struct fixture f;

	fixture_init(&f);
	CHECK(names(&f, GROUP("corral-c1"), "t-run", false));
	CHECK(names(&f, GROUP("corral-c3"), "t-left", true));
	/* the socket's group outranks the group the opener was seen in */
	CHECK(names(&f, json_pack("{s:I, s:s}", EVENTS_KEY_CGROUP, (json_int_t)1002,
				  EVENTS_KEY_GROUP, "corral-c1"), "t-done", true));
}

TEST(attribute_unknown_is_nobody)
{
	struct fixture f;

	fixture_init(&f);
	CHECK(names(&f, CG(4242), NULL, false));
	CHECK(names(&f, GROUP("corral-c99"), NULL, false));
	CHECK(names(&f, GROUP("not-a-call"), NULL, false));
	/* no key at all: zero names no call, even one whose group id is 0 */
	f.run.cgid = 0;
	CHECK(names(&f, json_object(), NULL, false));
}

/* ---- lingering groups: read a batch a pass --------------------------- */

/*
 * The sandbox chooses how many groups its finished calls leave (up to its
 * pids limit): a pass on the loop takes LINGER_VISIT_MAX of them, and the
 * next passes the ones after, so that each is read within ceil(n / max)
 * passes, and none twice before every other one was read once.
 */
TEST(lingering_read_a_batch_at_a_time)
{
	enum { N = 1000 };
	static struct lingerer l[N];
	static unsigned seen[N];
	struct lingerer *batch[LINGER_VISIT_MAX];
	struct corral_box b;
	size_t n, passes = (N + LINGER_VISIT_MAX - 1) / LINGER_VISIT_MAX, total = 0;
	bool once = true;

	memset(&b, 0, sizeof(b));
	for (size_t i = 0; i < N; i++) {
		l[i] = (struct lingerer){ .id = (uint32_t)i,
					  .next = i + 1 < N ? &l[i + 1] : NULL };
		seen[i] = 0;
	}
	b.lingering = &l[0];
	for (size_t p = 0; p < passes; p++) {
		n = lingering_batch(&b, batch, LINGER_VISIT_MAX);
		CHECK(n == LINGER_VISIT_MAX);
		/* the last pass goes round: the first ones again, after the rest */
		for (size_t i = 0; i < n; i++)
			once &= ++seen[batch[i]->id] == 1 || p == passes - 1;
		total += n;
	}
	CHECK(once);
	CHECK(total == passes * LINGER_VISIT_MAX);
	for (size_t i = 0; i < N; i++)
		once &= seen[i] >= 1;
	CHECK(once);
	/* still every one of them, once, in the list */
	n = 0;
	for (struct lingerer *x = b.lingering; x && n <= N; x = x->next)
		n++;
	CHECK(n == N);
	/* fewer than a batch: all of them, in their order */
	b.lingering = &l[0];
	l[0].next = &l[1];
	l[1].next = NULL;
	CHECK(lingering_batch(&b, batch, LINGER_VISIT_MAX) == 2);
	CHECK(batch[0] == &l[0] && batch[1] == &l[1] && b.lingering == &l[0]);
	b.lingering = NULL;
	CHECK(lingering_batch(&b, batch, LINGER_VISIT_MAX) == 0);
}

/*
 * Without cgroups a box keeps the records of its last LINGER_MAX calls,
 * newest first, and trim_lingering drops the list's tail as the oldest:
 * a sweep reads nothing there, and must leave that order as it was.
 */
TEST(lingering_without_cgroups_keeps_its_age_order)
{
	enum { N = LINGER_VISIT_MAX + 8 };
	struct lingerer *l[N], *x;
	struct corral_box b;
	size_t i;
	bool same = true;

	memset(&b, 0, sizeof(b));	/* no cg: CG_NONE */
	for (i = N; i-- > 0;) {
		l[i] = calloc(1, sizeof(*l[i]));
		CHECK(l[i] != NULL);
		if (!l[i])
			return;
		l[i]->id = (uint32_t)i;
		l[i]->next = b.lingering;
		b.lingering = l[i];
	}
	call_sweep_lingering(&b, false);
	for (i = 0, x = b.lingering; x && i < N; x = x->next, i++)
		same &= x == l[i];
	CHECK(same && i == N && !x);
	call_sweep_lingering(&b, true);
	CHECK(b.lingering == NULL);
}

/* ---- result_limits: a verdict from state, not from the reason's text ---- */

static void limits_of(struct corral_result *res, uint64_t oom)
{
	struct corral_policy p;
	struct cg_stats hits = { .valid = true, .oom_kills = oom };

	corral_policy_init(&p);
	p.memory_bytes = 64 << 20;
	result_limits(res, &p, &hits);
	corral_policy_free(&p);
}

/*
 * A command that was never started, killed by SIGKILL beside an OOM kill
 * counted in its group: its reason said "killed: memory limit", no word
 * of the command not started, since no ';' was in it.
 */
TEST(limits_keep_a_command_not_started)
{
	struct corral_result res = { 0 };

	result_not_reached(&res, W_EXITCODE(0, SIGKILL), 2);
	limits_of(&res, 1);
	CHECK(res.status == CORRAL_OOM);
	CHECK(strstr(res.reason, "memory limit 64 MiB reached (1 process killed") != NULL);
	CHECK(strstr(res.reason, "; the command not started: the 2 processes forked for the call died") != NULL);
	CHECK(res.signal == SIGKILL);
}

/* A ';' said of something else is not who sent the kill: bare, the OOM killer's. */
TEST(limits_judge_no_text)
{
	struct corral_result res = { 0 };

	result_from_wait(&res, W_EXITCODE(0, SIGKILL));
	strcat(res.reason, "; some clause");
	limits_of(&res, 1);
	CHECK(res.status == CORRAL_OOM);
	CHECK(!strncmp(res.reason, "killed: memory limit 64 MiB reached (1 process "
		       "killed by the OOM killer)", 70));
	/* said who sent it: kept, after the limit */
	res = (struct corral_result){ 0 };
	result_from_wait(&res, W_EXITCODE(0, SIGKILL));
	res.kill_said = true;
	limits_of(&res, 1);
	CHECK(res.status == CORRAL_OOM);
	CHECK(strstr(res.reason, "; the command killed by signal 9 (SIGKILL)") != NULL);
}

int main(void)
{
	unit_run_all();
	UNIT_DONE();
}
