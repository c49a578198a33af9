/*
 * kmem_hold.c - hold host kernel memory the way SECURITY.md's Known limits
 * measured it, from inside a sandbox, for bench/kmem_hold.sh to read the
 * host's /proc/meminfo and the sandbox's memory group while it is held.
 *
 *   kmem_hold MODE COUNT SECONDS
 *
 * MODE, each at most COUNT objects and 60 s of making them:
 *   netlink     routing-netlink sockets with SO_RCVBUF asked for 1 GiB,
 *               each sent requests until its unread answers fill it
 *   tstamp      UDP sockets, each 400 sends of 60 KB to a closed loopback
 *               port with software transmit timestamps (the error queue)
 *   recverr     UDP sockets with IP_RECVERR, each 20000 one-byte sends to a
 *               closed loopback port: the ICMP errors wait in the error
 *               queue, no timestamp asked for (loopback's are not
 *               rate-limited)
 *   backlog     loopback TCP listeners, each 4096 connections that sent
 *               64 KiB and closed, never accepted
 *   lowat       one loopback TCP listener that asks SO_RCVLOWAT 1 GiB
 *               (refused in a sandbox: EPERM in WHY, and on without it),
 *               COUNT connections that sent 32 MiB each and closed, never
 *               accepted
 *   timewait    loopback TCP connections the client closes first (each a
 *               TIME_WAIT bucket for 60 s), spread over 16 listeners so
 *               that the ephemeral ports last; EXTRA is the netns's
 *               buckets then (/proc/net/sockstat)
 *   locks       byte-range locks, 1000 a file (an unlinked file a 1000)
 *   md5         TCP sockets, each TCP_MD5SIG keys until optmem_max refuses
 *   sockfilt    unix sockets with a 4096-instruction classic BPF filter
 *               (refused in a sandbox: EPERM)
 *   seccomp     COUNT processes, each stacking seccomp filters of 4096
 *               instructions until the kernel's 32768 a process refuses
 * Prints "held N EXTRA WHY" (objects made, a mode's second count, why it
 * stopped), holds them SECONDS, then exits (killing its seccomp children).
 * What it holds is freed when it exits.  The sockfilt and seccomp modes
 * take from the host's one BPF JIT pool (net.core.bpf_jit_limit): run them
 * where nobody else needs a seccomp filter meanwhile.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/net_tstamp.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAKE_SECONDS	60
#define FILTER_LEN	4096

struct tally {
	long made;
	long extra;
	const char *why;
};

static time_t start;

static int expired(void)
{
	return time(NULL) - start > MAKE_SECONDS;
}

static void stop(struct tally *t, int e)
{
	t->why = strerror(e);
}

/* FILTER_LEN instructions that divide (the most JIT code an instruction), then ret */
static struct sock_fprog filter(unsigned ret)
{
	static struct sock_filter f[FILTER_LEN];

	f[0] = (struct sock_filter)BPF_STMT(BPF_LDX | BPF_W | BPF_IMM, 3);
	for (int i = 1; i < FILTER_LEN - 1; i++)
		f[i] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_DIV | BPF_K, 3);
	f[FILTER_LEN - 1] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, ret);
	return (struct sock_fprog){ .len = FILTER_LEN, .filter = f };
}

static void hold_netlink(long n, struct tally *t)
{
	struct {
		struct nlmsghdr h;
		struct ifinfomsg i;
	} req = {
		.h = { .nlmsg_len = sizeof(req), .nlmsg_type = RTM_GETLINK,
		       .nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK },
		.i = { .ifi_family = AF_UNSPEC, .ifi_index = 1 },
	};
	int big = 1 << 30;

	for (long i = 0; i < n && !expired(); i++) {
		int s = socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE);

		if (s < 0)
			return stop(t, errno);
		(void)setsockopt(s, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
		/* until an answer is dropped (ENOBUFS pending): the queue is full */
		for (int k = 0; k < 20000; k++) {
			int err = 0;
			socklen_t len = sizeof(err);

			if (send(s, &req, sizeof(req), 0) < 0 ||
			    getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err)
				break;
			t->extra++;
		}
		t->made++;
	}
}

static void hold_tstamp(long n, struct tally *t)
{
	static char buf[60000];
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(9),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int flags = SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE, big = 1 << 30;

	for (long i = 0; i < n && !expired(); i++) {
		int s = socket(AF_INET, SOCK_DGRAM, 0);

		if (s < 0)
			return stop(t, errno);
		(void)setsockopt(s, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
		(void)setsockopt(s, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
		if (setsockopt(s, SOL_SOCKET, SO_TIMESTAMPING, &flags, sizeof(flags)) < 0)
			return stop(t, errno);
		for (int k = 0; k < 400; k++) {
			if (sendto(s, buf, sizeof(buf), MSG_DONTWAIT, (void *)&to, sizeof(to)) < 0) {
				if (errno != EAGAIN)
					break;
				usleep(1000);
				continue;
			}
			t->extra++;
		}
		t->made++;
	}
}

static void hold_recverr(long n, struct tally *t)
{
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(9),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int on = 1, big = 1 << 30;

	for (long i = 0; i < n && !expired(); i++) {
		int s = socket(AF_INET, SOCK_DGRAM, 0);

		if (s < 0)
			return stop(t, errno);
		(void)setsockopt(s, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
		if (setsockopt(s, IPPROTO_IP, IP_RECVERR, &on, sizeof(on)) < 0)
			return stop(t, errno);
		/* every other send answers the last one's error (ECONNREFUSED) */
		for (int k = 0; k < 20000; k++)
			if (sendto(s, "x", 1, MSG_DONTWAIT, (void *)&to, sizeof(to)) == 1)
				t->extra++;
		t->made++;
	}
}

static void hold_lowat(long n, struct tally *t)
{
	static char buf[32 << 20];
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM, 0), big = 1 << 30;

	if (l < 0)
		return stop(t, errno);
	if (setsockopt(l, SOL_SOCKET, SO_RCVLOWAT, &big, sizeof(big)) < 0)
		stop(t, errno);	/* said, and on: the default buffer */
	if (bind(l, (void *)&a, sizeof(a)) < 0 || listen(l, 4096) < 0 ||
	    getsockname(l, (void *)&a, &len) < 0)
		return stop(t, errno);
	for (long i = 0; i < n && !expired(); i++) {
		int c = socket(AF_INET, SOCK_STREAM, 0);
		ssize_t w;

		if (c < 0)
			return stop(t, errno);
		if (connect(c, (void *)&a, sizeof(a)) < 0) {
			stop(t, errno);
			close(c);
			break;
		}
		w = send(c, buf, sizeof(buf), MSG_DONTWAIT);
		if (w > 0)
			t->extra += w;
		close(c);
		t->made++;
	}
}

static void hold_backlog(long n, struct tally *t)
{
	static char buf[65536];

	for (long i = 0; i < n && !expired(); i++) {
		struct sockaddr_in a = { .sin_family = AF_INET,
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		socklen_t len = sizeof(a);
		int l = socket(AF_INET, SOCK_STREAM, 0);

		if (l < 0 || bind(l, (void *)&a, sizeof(a)) < 0 || listen(l, 65535) < 0 ||
		    getsockname(l, (void *)&a, &len) < 0)
			return stop(t, errno);
		for (int k = 0; k < 4096 && !expired(); k++) {
			int c = socket(AF_INET, SOCK_STREAM, 0);
			ssize_t w;

			if (c < 0)
				return stop(t, errno);
			if (connect(c, (void *)&a, sizeof(a)) < 0) {
				stop(t, errno);
				close(c);
				break;	/* the queue is full */
			}
			w = send(c, buf, sizeof(buf), MSG_DONTWAIT);
			if (w > 0)
				t->extra += w;
			close(c);
			t->made++;
		}
	}
}

#define TW_LISTENERS	16

/* the netns's TIME_WAIT buckets, from /proc/net/sockstat's "TCP: ... tw N" */
static long tw_buckets(void)
{
	char line[256], *p;
	long tw = -1;
	FILE *f = fopen("/proc/net/sockstat", "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "TCP:", 4) && (p = strstr(line, " tw ")))
			tw = atol(p + 4);
	fclose(f);
	return tw;
}

static void hold_timewait(long n, struct tally *t)
{
	struct sockaddr_in a[TW_LISTENERS];
	int l[TW_LISTENERS];

	for (int i = 0; i < TW_LISTENERS; i++) {
		socklen_t len = sizeof(a[i]);

		a[i] = (struct sockaddr_in){ .sin_family = AF_INET,
					     .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		l[i] = socket(AF_INET, SOCK_STREAM, 0);
		if (l[i] < 0 || bind(l[i], (void *)&a[i], sizeof(a[i])) < 0 ||
		    listen(l[i], 16) < 0 || getsockname(l[i], (void *)&a[i], &len) < 0)
			return stop(t, errno);
	}
	for (long i = 0; i < n && !expired(); i++) {
		int k = (int)(i % TW_LISTENERS), c = socket(AF_INET, SOCK_STREAM, 0), s;

		if (c < 0)
			return stop(t, errno);
		if (connect(c, (void *)&a[k], sizeof(a[k])) < 0) {
			stop(t, errno);
			close(c);
			return;
		}
		s = accept(l[k], NULL, NULL);
		close(c);	/* the client first: its side waits */
		if (s >= 0)
			close(s);
		t->made++;
	}
	t->extra = tw_buckets();
}

static void hold_locks(long n, struct tally *t)
{
	int fd = -1;

	for (long i = 0; i < n && !expired(); i++) {
		struct flock f = { .l_type = F_WRLCK, .l_whence = SEEK_SET,
				   .l_start = 2 * (i % 1000), .l_len = 1 };

		if (i % 1000 == 0) {
			char path[64];

			snprintf(path, sizeof(path), "/tmp/kmem_hold.%d.%ld", (int)getpid(), i);
			fd = open(path, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
			if (fd < 0)
				return stop(t, errno);
			unlink(path);
		}
		/* every other byte: neighbours would merge into one lock */
		if (fcntl(fd, F_SETLK, &f) < 0)
			return stop(t, errno);
		t->made++;
	}
}

static void hold_md5(long n, struct tally *t)
{
	for (long i = 0; i < n && !expired(); i++) {
		int s = socket(AF_INET, SOCK_STREAM, 0);

		if (s < 0)
			return stop(t, errno);
		for (int k = 0; k < 5000; k++) {
			struct tcp_md5sig m = { .tcpm_keylen = 80 };
			struct sockaddr_in *a = (struct sockaddr_in *)&m.tcpm_addr;

			a->sin_family = AF_INET;
			a->sin_addr.s_addr = htonl(0x0a000000 + k);	/* 10.0.0.0/8 */
			if (setsockopt(s, IPPROTO_TCP, TCP_MD5SIG, &m, sizeof(m)) < 0) {
				if (k == 0)
					return stop(t, errno);
				break;
			}
			t->extra++;
		}
		t->made++;
	}
}

static void hold_sockfilt(long n, struct tally *t)
{
	struct sock_fprog p = filter(0xffff);

	for (long i = 0; i < n && !expired(); i++) {
		int s = socket(AF_UNIX, SOCK_DGRAM, 0);

		if (s < 0)
			return stop(t, errno);
		if (setsockopt(s, SOL_SOCKET, SO_ATTACH_FILTER, &p, sizeof(p)) < 0)
			return stop(t, errno);
		t->made++;
	}
}

/* each child stacks filters until refused, says how many, and waits */
static void hold_seccomp(long n, struct tally *t)
{
	struct sock_fprog p = filter(SECCOMP_RET_ALLOW);
	int pipefd[2];

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || pipe2(pipefd, O_CLOEXEC) < 0)
		return stop(t, errno);
	for (long i = 0; i < n && !expired(); i++) {
		int msg[2] = { 0, 0 };
		pid_t pid = fork();

		if (pid < 0)
			return stop(t, errno);
		if (pid == 0) {
			while (msg[0] < 64 &&
			       syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &p) == 0)
				msg[0]++;
			msg[1] = errno;
			if (write(pipefd[1], msg, sizeof(msg)) != sizeof(msg))
				_exit(1);
			pause();
			_exit(0);
		}
		if (read(pipefd[0], msg, sizeof(msg)) != sizeof(msg))
			return stop(t, EPIPE);
		t->made += msg[0];
		t->extra++;
		stop(t, msg[1]);
		if (msg[0] == 0)
			return;
	}
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		void (*hold)(long, struct tally *);
	} modes[] = {
		{ "netlink", hold_netlink }, { "tstamp", hold_tstamp },
		{ "recverr", hold_recverr }, { "lowat", hold_lowat },
		{ "backlog", hold_backlog }, { "timewait", hold_timewait },
		{ "locks", hold_locks },
		{ "md5", hold_md5 }, { "sockfilt", hold_sockfilt },
		{ "seccomp", hold_seccomp },
	};
	struct tally t = { 0, 0, "-" };
	struct rlimit nofile;
	size_t i;

	if (argc != 4) {
		fprintf(stderr, "usage: kmem_hold MODE COUNT SECONDS\n");
		return 2;
	}
	for (i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
		if (!strcmp(argv[1], modes[i].name))
			break;
	if (i == sizeof(modes) / sizeof(modes[0])) {
		fprintf(stderr, "kmem_hold: no mode '%s'\n", argv[1]);
		return 2;
	}
	/* as many files as the sandbox lets a process have */
	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0) {
		nofile.rlim_cur = nofile.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &nofile);
	}
	start = time(NULL);
	modes[i].hold(atol(argv[2]), &t);
	printf("held %ld %ld %s\n", t.made, t.extra, t.why);
	fflush(stdout);
	sleep((unsigned)atoi(argv[3]));
	if (modes[i].hold == hold_seccomp) {
		signal(SIGTERM, SIG_IGN);
		kill(0, SIGTERM);	/* its children, paused */
	}
	return 0;
}
