/*
 * child.c - the sandbox's side: its first process builds the boundary and
 * then stays as PID 1.
 *
 * sandbox_child() runs in the new namespaces, top to bottom: its network
 * namespace -> identity ->
 * stdio -> mounts and pivot -> loopback -> rlimits -> (network off) DNS
 * socket -> (in its cgroup now)
 * cgroup namespace -> Landlock -> capabilities -> seccomp, paced by the
 * supervisor's half, sandbox_spawn() (sandbox.c).  Then, for corral_run,
 * it starts the one command and reaps until it ends; for a long-lived
 * sandbox (box.c) it waits for the supervisor to ask for calls and starts
 * each one.  Either way it reports over a socket the commands never see.
 */
#include "internal.h"
#include "sandbox.h"
#include "policy_int.h"
#include "fdpass.h"
#include "dnsoff.h"
#include "proxy.h"
#include "net.h"
#include "sensor.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 35)
#include <sys/rseq.h>		/* __rseq_offset: own_pages_again */
#endif
#include <sys/signalfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static const int forwarded_signals[] = {
	SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH,
};

/* ---- the sandbox side -------------------------------------------------- */

/*
 * A container's supervisor may be gone by the time its command ends
 * (killed with it): the status still goes out as init's own.
 */
static void send_msg_quiet(int fd, int kind, int code)
{
	struct child_msg m = { .kind = kind, .code = code };

	if (write(fd, &m, sizeof(m)) < 0) {
		/* nobody to tell; the exit status says it */
	}
}

static void send_msg(int fd, int kind, int code, int abi, const char *text)
{
	struct child_msg m = { .kind = kind, .code = code, .landlock_abi = abi };

	if (text)
		snprintf(m.text, sizeof(m.text), "%s", text);
	/* One SEQPACKET message, whole or not at all; if it fails there is no
	 * one to tell. */
	if (write(fd, &m, sizeof(m)) < 0)
		_exit(125);
}

/* Hand an fd to the supervisor (the caller closes its own copy after). */
static int send_fd(int sock, int kind, int fd)
{
	struct child_msg m = { .kind = kind };
	ssize_t r = fd_send(sock, &m, sizeof(m), &fd, 1, 0);

	return r < 0 ? (int)r : 0;
}

/*
 * READY, and with it every fd the supervisor keeps (sandbox.h,
 * ready_fd_kinds), made each at its own step: one message, one wake of the
 * supervisor, where a message each woke it for each (issue 17).  Ours
 * are closed after, before the command starts; all are CLOEXEC.
 */
static void send_ready(const struct child_ctx *c, int abi, struct dnsoff_socks *dns,
		       int upperfd, int rootfd, int notify_fd)
{
	struct child_msg m = { .kind = MSG_READY, .landlock_abi = abi,
			       .id = dns->netns };
	int fds[READY_FDS_MAX];
	size_t n = 0;
	ssize_t sent;

	for (size_t i = 0; i < READY_FDS_MAX; i++) {
		int kind = ready_fd_kinds[i];
		int fd = kind == MSG_DNS_DIAG_FD ? dns->diag : kind == MSG_DNS_FD ? dns->fd :
			 kind == MSG_UPPER_FD ? upperfd : kind == MSG_ROOT_FD ? rootfd :
			 kind == MSG_NOTIFY_FD ? notify_fd : -1;

		if (fd < 0)
			continue;
		m.code |= 1 << kind;
		fds[n++] = fd;
	}
	sent = fd_send(c->msg_wr, &m, sizeof(m), fds, n, 0);
	while (n)
		close(fds[--n]);
	dns->fd = dns->diag = -1;
	/* One SEQPACKET message, whole or not at all: nobody to tell if not. */
	if (sent != sizeof(m))
		_exit(125);
}

static __attribute__((noreturn)) void setup_failed(const struct child_ctx *c,
						   const struct corral_err *err)
{
	send_msg(c->msg_wr, MSG_SETUP_FAILED, err->code ? err->code : -EIO, 0,
		 err->msg);
	_exit(125);
}

/* Close every fd of the caller but the ones this process needs. */
static int close_inherited(const int *keep, size_t n, struct corral_err *err)
{
	unsigned int from = 3;

	for (;;) {
		unsigned int next = ~0U;

		for (size_t i = 0; i < n; i++)
			if (keep[i] >= (int)from && (unsigned int)keep[i] < next)
				next = keep[i];
		if (next > from && syscall(SYS_close_range, from, next - 1, 0) < 0)
			return corral_set_errno(err, errno, "close_range");
		if (next == ~0U)
			return 0;
		from = next + 1;
	}
}

/*
 * The caller's supplementary groups go, where the id maps let them: root's
 * (gid 0 must not follow it in) always; an unprivileged caller's when
 * newgidmap wrote the maps and left setgroups allowed.  Kept, they are
 * still the kernel's to check (shown as nogroup): a sandbox of a member
 * of the docker group could connect to a docker.sock a bind shows.  A
 * single mapped id needs setgroups denied (user_namespaces(7)): there
 * they stay, and SECURITY.md says so.
 */
static int set_identity(bool caller_root, bool subid_maps, struct corral_err *err)
{
	if ((caller_root || subid_maps) && setgroups(0, NULL) < 0 &&
	    (caller_root || errno != EPERM))
		return corral_set_errno(err, errno, "setgroups");
	if (setresgid(CORRAL_AGENT_GID, CORRAL_AGENT_GID, CORRAL_AGENT_GID) < 0 ||
	    setresuid(CORRAL_AGENT_UID, CORRAL_AGENT_UID, CORRAL_AGENT_UID) < 0)
		return corral_set_errno(err, errno, "cannot become uid %d",
				      CORRAL_AGENT_UID);
	return 0;
}

static int loopback_up(struct corral_err *err)
{
	struct ifreq ifr = { 0 };
	int fd, r = 0;

	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return corral_set_errno(err, errno, "socket");
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0) {
		r = corral_set_errno(err, errno, "lo");
	} else {
		ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
		if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
			r = corral_set_errno(err, errno, "cannot bring lo up");
	}
	close(fd);
	return r;
}

/*
 * The command's stdin, stdout, stderr: what the supervisor handed in, and
 * /dev/null for the rest.  Whatever the supervisor's own 0-2 are (the
 * caller's terminal, a host file, a directory) never stays open here.
 * The handed-in fds stay open at their own numbers: close_inherited,
 * next, closes them with the rest (3 close calls fewer, and the kept
 * fds fewer and so fewer ranges between them).
 */
static int set_stdio(const int stdio[3], struct corral_err *err)
{
	int null = -1;	/* opened once for all three (a serving init's) */

	for (int i = 0; i < 3; i++) {
		if (stdio[i] < 0) {
			/* no O_CLOEXEC: it may land on i itself */
			if (null < 0)
				null = open("/dev/null", O_RDWR);
			if (null < 0 || (null != i && dup2(null, i) < 0))
				return corral_set_err(err, -errno, "/dev/null as fd %d: %s",
						      i, strerror(errno));
			continue;
		}
		/* already in place: dup2 would keep its close-on-exec */
		if (stdio[i] == i) {
			if (fcntl(i, F_SETFD, 0) < 0)
				return corral_set_errno(err, errno, "fd %d", i);
			continue;
		}
		if (dup2(stdio[i], i) < 0)
			return corral_set_errno(err, errno, "dup2 %d to %d",
					      stdio[i], i);
	}
	/* at 0-2 it is one of them, or a later dup2 replaced it */
	if (null > 2)
		close(null);
	return 0;
}

/*
 * Pending signals and POSIX message queue bytes are counted per uid at
 * each level of user namespaces, up to the host's: a sandbox's count also
 * against its caller's uid there, whose processes check the same count
 * against their own limit.  Unbounded, one sandbox queued all 96362
 * signals of its caller's uid, and the caller's own processes got EAGAIN
 * from sigqueue and timer_create until it ended.  Each is lowered to a
 * quarter of the caller's limit here, hard and soft, before anything of
 * the sandbox's runs (every uid inside has its own count: with identity
 * root, a process that changes uid starts another quarter).
 */
static const struct { int res; const char *name; } shared_rlimits[] = {
	{ RLIMIT_SIGPENDING, "RLIMIT_SIGPENDING" },
	{ RLIMIT_MSGQUEUE, "RLIMIT_MSGQUEUE" },
};
#define SHARED_RLIMIT_SHARE	4

static int limit_shared(struct corral_err *err)
{
	for (size_t i = 0; i < sizeof(shared_rlimits) / sizeof(shared_rlimits[0]); i++) {
		struct rlimit rl;

		if (getrlimit(shared_rlimits[i].res, &rl) < 0)
			return corral_set_errno(err, errno, "getrlimit(%s)", shared_rlimits[i].name);
		if (rl.rlim_cur == RLIM_INFINITY)
			continue;	/* no limit on the host either: nothing to exhaust */
		rl.rlim_cur /= SHARED_RLIMIT_SHARE;
		rl.rlim_max = rl.rlim_cur;
		if (setrlimit(shared_rlimits[i].res, &rl) < 0)
			return corral_set_errno(err, errno, "setrlimit(%s, %llu)",
						shared_rlimits[i].name,
						(unsigned long long)rl.rlim_cur);
	}
	return 0;
}

/*
 * File descriptors in flight over unix sockets (SCM_RIGHTS) are counted
 * per host uid, in no namespace or cgroup, and the kernel refuses a send
 * (ETOOMANYREFS) while the count is above the sender's RLIMIT_NOFILE.
 * Unprivileged, the agent is its caller's uid, as init and the supervisor
 * are, and they pass fds at every sandbox's start and call: one sandbox
 * that kept 20240 fds in flight made every new sandbox of its caller fail
 * ("cannot bind 127.0.0.1:53 for the sandbox's DNS: Too many references").
 * A command gets half of init's hard limit, so its sends stop at half and
 * init's and the supervisor's, under the whole limit, still go.  Not in
 * an OCI container, whose process.rlimits are the engine's to set.
 */
#define INFLIGHT_SHARE	2

/*
 * Every open file is a struct file in one table for the whole host,
 * fs.file-max, that no namespace, cgroup or rlimit divides, and past it
 * the kernel refuses every open of every process but root's (ENFILE).
 * One sandbox of the default policy, 1024 processes of 10000 fds each,
 * opened 2,465,693 of this host's 2,466,248: `cat` as nobody on the host
 * could not load libc, and the next sandbox could not start.  A command's
 * hard RLIMIT_NOFILE is so at most a quarter of the table over the pids
 * limit, but not below 1024, the soft limit programs take for granted (a
 * host whose table is small against pids x 1024 lowers pids).  Without a
 * pids limit nothing bounds the processes, and so nothing is taken here.
 *
 * The policy's limits.open_files chooses the split instead: that many
 * for each process, if open_files x pids fits in the same quarter (or is
 * no more than the default would give: 1024 is always there), and if it
 * is at most half of our own hard limit, which init keeps (INFLIGHT_SHARE
 * above).  Else the sandbox is refused, with the numbers: the file table
 * is this host's, so the check is here, when a sandbox starts, not when a
 * policy file is read.  Pure, for the unit tests: file_max 0 is a host
 * without /proc (no share then), init_hard our RLIMIT_NOFILE's rlim_max.
 */
#define FILE_TABLE_SHARE	4
#define NOFILE_FLOOR		1024

int nofile_cap_of(uint64_t open_files, uint64_t pids, unsigned long long file_max,
		  rlim_t init_hard, rlim_t *cap, struct corral_err *err)
{
	rlim_t share = 0;

	if (pids && file_max) {
		share = (rlim_t)(file_max / FILE_TABLE_SHARE / pids);
		if (share < NOFILE_FLOOR)
			share = NOFILE_FLOOR;
	}
	*cap = share;
	if (!open_files)
		return 0;
	/* open_files <= 2^31 and pids <= 2^22: the product fits */
	if (share && open_files > share)
		return corral_set_err(err, -EINVAL, "limits.open_files %llu x "
				      "limits.pids %llu is %llu files, more than a "
				      "quarter of this host's file table (%llu of "
				      "fs.file-max %llu): lower one of them",
				      (unsigned long long)open_files,
				      (unsigned long long)pids,
				      (unsigned long long)(open_files * pids),
				      file_max / FILE_TABLE_SHARE, file_max);
	if (init_hard != RLIM_INFINITY && open_files > init_hard / INFLIGHT_SHARE)
		return corral_set_err(err, -EINVAL, "limits.open_files %llu is more "
				      "than half of corral's own hard open-files "
				      "limit (%llu), which the sandbox's init keeps: "
				      "raise it (ulimit -Hn %llu) or lower "
				      "limits.open_files",
				      (unsigned long long)open_files,
				      (unsigned long long)init_hard,
				      (unsigned long long)open_files * INFLIGHT_SHARE);
	*cap = (rlim_t)open_files;
	return 0;
}

int sandbox_nofile_cap(const struct corral_policy *p, rlim_t *cap, rlim_t *hard,
		       struct corral_err *err)
{
	unsigned long long max = 0;
	struct rlimit init;
	char buf[32], *end;
	ssize_t n;

	if (getrlimit(RLIMIT_NOFILE, &init) < 0)
		return corral_set_errno(err, errno, "getrlimit(RLIMIT_NOFILE)");
	/* a second old at most (hostsysctl.c); no /proc: the rlimits alone */
	n = host_sysctl_read("/proc/sys/fs/file-max", buf, sizeof(buf));
	if (n > 0) {
		errno = 0;
		max = strtoull(buf, &end, 10);
		if (errno || end == buf || buf[0] == '-')
			max = 0;	/* unreadable: as if there were no /proc */
	}
	if (nofile_cap_of(p->open_files, p->pids, max, init.rlim_max, cap, err) < 0)
		return err->code;
	/* what inflight_nofile will give each command */
	*hard = init.rlim_max == RLIM_INFINITY ? *cap : init.rlim_max / INFLIGHT_SHARE;
	if (*cap && *hard > *cap)
		*hard = *cap;
	return 0;
}

static bool inflight_nofile(const struct rlimit *init, rlim_t cap,
			    struct rlimit *want)
{
	if (init->rlim_max == RLIM_INFINITY && !cap)
		return false;	/* no limit to keep a part of (nr_open bounds it) */
	want->rlim_max = init->rlim_max == RLIM_INFINITY ? cap :
			 init->rlim_max / INFLIGHT_SHARE;
	if (cap && want->rlim_max > cap)
		want->rlim_max = cap;
	want->rlim_cur = init->rlim_cur < want->rlim_max ? init->rlim_cur : want->rlim_max;
	return true;
}

static int limit_inflight(rlim_t cap, struct corral_err *err)
{
	struct rlimit init, want;

	if (getrlimit(RLIMIT_NOFILE, &init) < 0)
		return corral_set_errno(err, errno, "getrlimit(RLIMIT_NOFILE)");
	if (inflight_nofile(&init, cap, &want) && setrlimit(RLIMIT_NOFILE, &want) < 0)
		return corral_set_errno(err, errno, "setrlimit(RLIMIT_NOFILE, %llu)",
					(unsigned long long)want.rlim_max);
	return 0;
}

/*
 * Real-time scheduling and a nice value below 0 need only these rlimits,
 * not a capability, and the caller's pass on to the sandbox: an audio
 * group's rtprio limit would let a sandbox run SCHED_FIFO beside the
 * host's work, outside its CPU quota where the host has no real-time
 * group scheduling.  None for the sandbox, whatever its caller has.
 */
static int limit_priority(struct corral_err *err)
{
	struct rlimit none = { 0, 0 };

	if (setrlimit(RLIMIT_RTPRIO, &none) < 0)
		return corral_set_errno(err, errno, "setrlimit(RLIMIT_RTPRIO, 0)");
	if (setrlimit(RLIMIT_NICE, &none) < 0)
		return corral_set_errno(err, errno, "setrlimit(RLIMIT_NICE, 0)");
	return 0;
}

/*
 * No core dumps, by a limit of 1 rather than 0.  Where the host's
 * kernel.core_pattern is a pipe (systemd-coredump, apport, abrt), the
 * kernel ignores RLIMIT_CORE but for the value 1, which it keeps for its
 * own helpers: a limit of 0 still starts the host's helper, as root in
 * the host's namespaces, with the crashed process's memory on its stdin,
 * to be written to the host's disk (a sandbox's crash reached a test
 * helper with a 364 KiB core).  A file pattern needs a page at least, so
 * 1 writes nothing either.  Neither hard limit can be raised inside, and
 * the filter answers the calls that would lower one to 0 (seccomp.c).
 */
#define CORE_LIMIT_NONE 1

static int no_core_dumps(struct corral_err *err)
{
	struct rlimit one = { CORE_LIMIT_NONE, CORE_LIMIT_NONE }, none = { 0, 0 };

	if (setrlimit(RLIMIT_CORE, &one) == 0)
		return 0;
	/*
	 * The caller's hard limit is 0 and only the host's root may raise
	 * it: the caller's own processes reach a pipe helper as the sandbox's
	 * then do; 0 is the least we can give.
	 */
	if (errno == EPERM && setrlimit(RLIMIT_CORE, &none) == 0)
		return 0;
	return corral_set_errno(err, errno, "setrlimit(RLIMIT_CORE, 1)");
}

static int set_rlimits(struct corral_err *err)
{
	if (no_core_dumps(err) < 0)
		return err->code;
	if (limit_priority(err) < 0)
		return err->code;
	return limit_shared(err);
}

int sandbox_set_rlimits(const struct corral_rlimit *r, size_t n,
			struct corral_err *err)
{
	for (size_t i = 0; i < n; i++) {
		struct rlimit cur, want;

		if (getrlimit(r[i].resource, &cur) < 0)
			return corral_set_errno(err, errno, "rlimit %d", r[i].resource);
		want.rlim_max = r[i].hard < cur.rlim_max ? r[i].hard : cur.rlim_max;
		want.rlim_cur = r[i].soft < want.rlim_max ? r[i].soft : want.rlim_max;
		/* a core limit of 0 asks for no core: 1 is the one that holds */
		if (r[i].resource == RLIMIT_CORE && cur.rlim_max >= CORE_LIMIT_NONE) {
			if (want.rlim_max < CORE_LIMIT_NONE)
				want.rlim_max = CORE_LIMIT_NONE;
			if (want.rlim_cur < CORE_LIMIT_NONE)
				want.rlim_cur = CORE_LIMIT_NONE;
		}
		if (setrlimit(r[i].resource, &want) < 0)
			return corral_set_errno(err, errno, "rlimit %d to %llu/%llu",
						r[i].resource,
						(unsigned long long)want.rlim_cur,
						(unsigned long long)want.rlim_max);
	}
	return 0;
}

static size_t port_add(uint16_t *ports, size_t n, size_t max, uint16_t port)
{
	for (size_t i = 0; i < n; i++)
		if (ports[i] == port)
			return n;
	if (n < max)
		ports[n++] = port;
	return n;
}

/* Explicit proxy mode: TCP connects only to the supervisor's listeners. */
static size_t tcp_ports(uint16_t *ports, size_t max)
{
	static const uint16_t proxy_ports[] = {
		PROXY_HTTP_PORT, PROXY_SOCKS_PORT, PROXY_DNS_PORT,
	};
	size_t n = 0;

	for (size_t i = 0; i < sizeof(proxy_ports) / sizeof(proxy_ports[0]); i++)
		n = port_add(ports, n, max, proxy_ports[i]);
	return n;
}

/*
 * Writable bind i needs no rule of its own: its path lies beneath one
 * that has a writable rule (a mount point's, "/" where the root is
 * writable, another writable bind's; the same path, the first of them),
 * and Landlock's rights go down a hierarchy across the mounts in it.
 * srt binds each directory on a kept path's way onto itself writable,
 * beneath the write bind: 40 submodules and 10 nested repositories in
 * a project were past the 64 rules, and its runs refused.
 */
static bool rule_beneath_another(const struct corral_policy *p, size_t i)
{
	const char *dst = p->binds[i].dst;

	if (p->root_writable && p->nroot_layers)
		return true;
	for (size_t k = 0; mount_writable_paths[k]; k++)
		if (policy_path_under(dst, mount_writable_paths[k]))
			return true;
	for (size_t k = 0; k < p->nbinds; k++) {
		const char *top = p->binds[k].dst;

		if (k == i || !p->binds[k].writable || !policy_path_under(dst, top))
			continue;
		if (strcmp(dst, top) || k < i)
			return true;
	}
	return false;
}

static int apply_landlock(const struct corral_policy *p, struct corral_err *err)
{
	struct ll_rule rules[64];
	size_t n = 0, own, want;

	/*
	 * No link followed: none is on these paths when the view is built
	 * (a bind's are refused), and an OCI exec opens them in a running
	 * container, whose process may have moved a writable bind's parent
	 * and left a link to /proc in its place.
	 */
	rules[n++] = (struct ll_rule){ "/", p->root_writable && p->nroot_layers, true };
	for (size_t i = 0; mount_writable_paths[i]; i++)
		rules[n++] = (struct ll_rule){ mount_writable_paths[i], true, true };
	own = want = n;
	for (size_t i = 0; i < p->nbinds; i++) {
		if (!p->binds[i].writable || rule_beneath_another(p, i))
			continue;
		if (want++ < sizeof(rules) / sizeof(rules[0]))
			rules[n++] = (struct ll_rule){ p->binds[i].dst, true, true };
	}
	/* a tmpfs is a directory of the scratch: as writable as /tmp */
	for (size_t i = 0; i < p->ntmpfs; i++)
		if (!p->tmpfs[i].ro && want++ < sizeof(rules) / sizeof(rules[0]))
			rules[n++] = (struct ll_rule){ p->tmpfs[i].dst, true, true };
	if (want > sizeof(rules) / sizeof(rules[0]))
		return corral_set_err(err, -E2BIG, "too many writable binds and tmpfs "
				      "mounts for Landlock: %zu, none beneath another, "
				      "where %zu at most can have a rule", want - own, sizeof(rules) / sizeof(rules[0]) - own);
	/*
	 * Transparent mode: every TCP connection is redirected to the proxy
	 * and nothing else can leave, so Landlock need not refuse ports; it
	 * must not, either: a refused connect() is a port sweep the
	 * supervisor never sees, and the abort criteria count those.
	 */
	if (p->net == CORRAL_NET_PROXY && !p->net_transparent) {
		uint16_t ports[64];
		size_t np = tcp_ports(ports, sizeof(ports) / sizeof(ports[0]));

		return landlock_apply(rules, n, ports, np, err);
	}
	return landlock_apply(rules, n, NULL, 0, err);
}

/*
 * identity.user "root": what dpkg and apt need of root, and no more.  Each
 * holds only in the sandbox's user namespace and only over inodes whose
 * owner and group are mapped into it (capable_wrt_inode_uidgid): the
 * host's files (root's, unmapped) and an idmapped bind's other owners
 * stay out of reach, whatever the capability says.
 *  - CHOWN: dpkg fchown()s every file it unpacks to its owner in the .deb.
 *  - DAC_OVERRIDE: the image's files are the agent's (uid 1000) inside;
 *    dpkg replaces them, apt writes its lists and archives as root.
 *  - FOWNER: chmod and utimes of files not root's (the image's, 1000's).
 *  - FSETID: a package's setgid file (crontab, wall) keeps its bit; it
 *    grants nothing here, no_new_privs ignores setuid/setgid on exec.
 *  - SETUID, SETGID: apt drops to _apt to fetch, maintainer scripts run
 *    su/runuser/setpriv; a process that leaves uid 0 loses every capability.
 * Not SETFCAP (file capabilities: nothing to grant under no_new_privs), not
 * DAC_READ_SEARCH (open_by_handle_at reaches past the mount namespace), not
 * SYS_ADMIN, NET_ADMIN, SYS_PTRACE, SYS_MODULE, MKNOD, KILL, SYS_CHROOT.
 */
static const int root_caps[] = {
	CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_FSETID, CAP_SETUID, CAP_SETGID,
};

static bool cap_kept(int cap, bool root)
{
	for (size_t i = 0; root && i < sizeof(root_caps) / sizeof(root_caps[0]); i++)
		if (root_caps[i] == cap)
			return true;
	return false;
}

/*
 * The agent: all five capability sets empty, and none can come back.
 * Root inside: the bounding, permitted and effective sets hold root_caps,
 * the inheritable and ambient sets nothing.  An exec as uid 0 gets the
 * bounding set, never more (and no_new_privs caps it at what the caller
 * had); an exec or a setuid() to another uid gets nothing.
 */
static int drop_caps(bool root, struct corral_err *err)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2] = { { 0 } };
	bool past_last = false;

	for (int cap = 0; cap <= 63; cap++) {
		if (cap_kept(cap, root)) {
			data[cap / 32].permitted |= 1U << (cap % 32);
			data[cap / 32].effective |= 1U << (cap % 32);
			continue;
		}
		/*
		 * EINVAL: a number past the kernel's last capability; the ones
		 * above it are too (cap_valid is a range): not asked, 22 calls
		 * that fail the same way on 6.18.
		 */
		if (past_last)
			continue;
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0) {
			if (errno != EINVAL)
				return corral_set_errno(err, errno, "cannot drop capability %d",
						      cap);
			past_last = true;
		}
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 &&
	    errno != EINVAL)
		return corral_set_errno(err, errno, "cannot clear ambient caps");
	if (syscall(SYS_capset, &hdr, data) < 0)
		return corral_set_errno(err, errno, "capset");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return corral_set_errno(err, errno, "no_new_privs");
	return 0;
}

/*
 * Root inside: uid/gid 0 of the namespace, taken after the mounts (which
 * corral builds as the agent, so that /home/agent and the rest stay
 * uid 1000's) while init still holds every capability of the namespace.
 * From uid 1000 to 0 the effective set is refilled from the permitted one.
 */
static int become_root(struct corral_err *err)
{
	if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
		return corral_set_errno(err, errno, "cannot become uid 0 inside "
				      "(identity.user root)");
	/* a change of credentials clears it, as in sandbox_child */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		return corral_set_errno(err, errno, "PR_SET_PDEATHSIG");
	return 0;
}

/*
 * The working directory must be the sandbox's /workspace, reached after
 * the pivot: a directory inherited from outside (CVE-2024-21626) would be a
 * door to the host's tree.
 */
static int enter_workspace(const char *dir, struct corral_err *err)
{
	struct stat a, b;
	char cwd[4096];

	/* worded as the daemon's call says it (call.c): "chdir X" named no side */
	if (chdir(dir) < 0)
		return corral_set_errno(err, errno, "cannot enter the working "
					"directory %s inside the sandbox", dir);
	if (!getcwd(cwd, sizeof(cwd)) || strcmp(cwd, dir) != 0)
		return corral_set_err(err, -EPERM, "working directory is outside the sandbox");
	if (stat(".", &a) < 0 || stat(dir, &b) < 0 ||
	    a.st_dev != b.st_dev || a.st_ino != b.st_ino)
		return corral_set_err(err, -EPERM, "working directory is not %s", dir);
	return 0;
}

/*
 * A pty of the sandbox's own devpts instance (mount.c): *master and
 * *slave, the slave at size *ws (none: the kernel's).  -errno.
 */
static int make_pty(const struct winsize *ws, int *master, int *slave)
{
	int unlock = 0, e;

	*master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (*master < 0)
		return -errno;
	/* TIOCGPTPEER: the slave by the master, not by a path to look up */
	if (ioctl(*master, TIOCSPTLCK, &unlock) < 0 ||
	    (*slave = ioctl(*master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0) {
		e = -errno;
		close(*master);
		return e;
	}
	/* the first size is set before the command can ask for it */
	if (ws->ws_row && ioctl(*slave, TIOCSWINSZ, ws) < 0) {
		e = -errno;
		close(*slave);
		close(*master);
		return e;
	}
	return 0;
}

/*
 * The command's terminal, opened by init.  The master goes to the
 * supervisor, which relays it to the caller's terminal; the slave is the
 * command's.
 */
static int open_pty(const struct child_ctx *c, int *slave, struct corral_err *err)
{
	int master, r;

	r = make_pty(&c->winsize, &master, slave);
	if (r < 0)
		return corral_set_err(err, r, "cannot make the pty: %s", strerror(-r));
	r = send_fd(c->msg_wr, MSG_PTY_FD, master);
	if (r < 0) {
		corral_set_err(err, r, "cannot send the pty: %s", strerror(-r));
		close(*slave);
		close(master);
		return r;
	}
	/* init keeps no master: the pty ends when its last slave closes */
	close(master);
	return 0;
}

/*
 * Go's errors say errno's text in lower case ("no such file or
 * directory"), glibc's begins with a capital: runc's words are Go's.
 */
static const char *go_strerror(int e, char *buf, size_t len)
{
	snprintf(buf, len, "%s", strerror(e));
	buf[0] = tolower((unsigned char)buf[0]);
	return buf;
}

/*
 * exec.LookPath's findExecutable as runc 1.1 is built with it (Go 1.19,
 * Debian's runc here): 0 for a file with an execute bit, by its mode
 * alone; 1 for a directory, or a file with none; stat's -errno.
 */
static int find_executable(const char *path)
{
	struct stat st;

	if (stat(path, &st) < 0)
		return -errno;
	return !S_ISDIR(st.st_mode) && (st.st_mode & 0111) ? 0 : 1;
}

/*
 * A container's command, looked up before `create` returns, as runc's
 * init looks it up before it waits for `start`: exec.LookPath, a name
 * with a '/' as it is, else in each directory of the command's PATH
 * (execvp's default without one), then eaccess() of what was found, as
 * the process that will exec it (a noexec mount, a mode that lets others
 * run it only).  Not there, or there and not runnable (a directory, a
 * file without an execute bit), create exited 0, `start` too, and the
 * command's 126 or 127 was the first word of it, where runc's create
 * fails with the reason, in runc's words, and engines say it then
 * (podman: 127 for "no such file", 126 for "permission denied";
 * Kubernetes' CreateContainerError).  Found here is no promise that exec
 * succeeds (a bad ELF, a missing interpreter): that is exec's to say.
 */
static int command_found(const struct child_ctx *c, struct corral_err *err)
{
	const char *name = c->argv[0], *path = "/bin:/usr/bin", *found = name;
	char buf[PATH_MAX], msg[128];
	int r;

	if (strchr(name, '/')) {
		r = find_executable(name);
		if (r == 1)
			return corral_set_err(err, -EACCES, "exec: \"%s\": permission denied",
					      name);
		if (r < 0)
			return corral_set_err(err, r, "exec: \"%s\": stat %s: %s", name, name,
					      go_strerror(-r, msg, sizeof(msg)));
	} else {
		for (char **e = c->envp; e && *e; e++)
			if (!strncmp(*e, "PATH=", 5))
				path = *e + 5;
		for (const char *d = path;; d++) {
			size_t len = strcspn(d, ":"), n = len;

			/* as Go's filepath.Join: "" and "." the working directory */
			while (n > 1 && d[n - 1] == '/')
				n--;
			if (!n || (n == 1 && d[0] == '.'))
				r = snprintf(buf, sizeof(buf), "%s", name);
			else
				r = snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, d, name);
			if (r >= 0 && (size_t)r < sizeof(buf) && find_executable(buf) == 0)
				break;
			d += len;
			if (!*d)
				return corral_set_err(err, -ENOENT, "exec: \"%s\": executable "
						      "file not found in $PATH", name);
		}
		found = buf;
	}
	if (faccessat(AT_FDCWD, found, X_OK, AT_EACCESS) < 0) {
		r = errno;
		return corral_set_err(err, -r, "exec %s: %s", found,
				      go_strerror(r, msg, sizeof(msg)));
	}
	return 0;
}

/*
 * A session of its own (a call's process leads one already: call_child),
 * with the pty as its controlling terminal.
 */
static int take_pty(int slave)
{
	if ((getsid(0) != getpid() && setsid() < 0) || ioctl(slave, TIOCSCTTY, 0) < 0)
		return -errno;
	for (int i = 0; i < 3; i++)
		if (dup2(slave, i) < 0)
			return -errno;
	close(slave);
	return 0;
}

/* The kernel's struct sigaction, not libc's. */
struct k_sigaction {
	void (*handler)(int);
	unsigned long flags;
	void (*restorer)(void);
	uint64_t mask;
};

/*
 * Every signal in mask (bit sig - 1) to SIG_DFL, by the raw syscall: glibc
 * refuses its own two (32 and 33), which a caller may have ignored (GNU
 * make's children do) and exec would hand on ignored.  Raw syscalls only:
 * spawn_child calls it on init's memory.
 */
__attribute__((no_sanitize("address", "undefined")))
static void signals_default(uint64_t mask)
{
	struct k_sigaction dfl = { .handler = SIG_DFL };

	for (int sig = 1; sig <= 64; sig++)
		if (sig != SIGKILL && sig != SIGSTOP && (mask & (1ULL << (sig - 1))))
			syscall(SYS_rt_sigaction, sig, &dfl, NULL, sizeof(uint64_t));
}

static __attribute__((noreturn)) void exec_command(const struct child_ctx *c,
						   int exec_err_wr, int slave)
{
	extern char **environ;
	sigset_t none;
	int e;

	/* Nothing of the caller's signal state (nohup, a blocked mask) goes in. */
	signals_default(~0ULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	/*
	 * A new session: without -t, no controlling terminal to push
	 * keystrokes into; with it, the sandbox's own pty.
	 */
	if (slave >= 0 && (e = take_pty(slave)) < 0) {
		if (write(exec_err_wr, &e, sizeof(e)) < 0)
			_exit(125);
		_exit(125);
	}
	if (slave < 0)
		setsid();
	/* Without a cgroup, rlimits; here, so that PID 1 is not limited. */
	if (c->cg_none || c->nrlimits || !c->container) {
		struct corral_err err;

		if ((c->cg_none && cg_apply_rlimits(c->p, &err) < 0) ||
		    sandbox_set_rlimits(c->rlimits, c->nrlimits, &err) < 0 ||
		    (!c->container && limit_inflight(c->nofile_cap, &err) < 0)) {
			e = err.code;	/* negative: not an exec failure */
			if (write(exec_err_wr, &e, sizeof(e)) < 0)
				_exit(125);
			_exit(125);
		}
	}
	environ = c->envp;
	execvp(c->argv[0], c->argv);
	e = errno;
	if (write(exec_err_wr, &e, sizeof(e)) < 0)
		_exit(127);
	_exit(127);
}

/*
 * The command without fork: clone(CLONE_VM | CLONE_VFORK) copies none of
 * init's page tables, and neither init nor the child takes copy-on-write
 * faults after it; on a paravirtualized host those cost more than the
 * command's own exec (issue 17).  init sleeps until the child has run
 * exec or _exit.  The child shares init's memory until then, so it runs
 * on a stack of its own and makes raw syscalls: no libc state, no errno
 * of its own.  The state it leaves is exec_command's: every signal at its
 * default, glibc's own two as well (glibc's posix_spawn leaves those
 * ignored), nothing blocked, a session of its own, and its rlimits (those
 * that stand in for cgroups, and a container's), worked out by init
 * beforehand.
 */
#define SPAWN_RLIMITS	20

struct spawn_rlimit {
	int resource;
	struct rlimit want;
};

struct spawn {
	const struct child_ctx *c;
	uint64_t reset;		/* signals not at SIG_DFL in init: bit sig - 1 */
	struct spawn_rlimit rl[SPAWN_RLIMITS];
	size_t nrl;
	int err;		/* exec's errno; -errno: an rlimit failed; or 0 */
};

__attribute__((no_sanitize("address", "undefined")))
static int spawn_child(void *arg)
{
	struct spawn *sp = arg;
	uint64_t none = 0;

	/*
	 * every signal is blocked (spawn_command): no handler of init's runs;
	 * those not at the default already are set to it before they open
	 */
	signals_default(sp->reset);
	syscall(SYS_setsid);
	for (size_t i = 0; i < sp->nrl; i++) {
		if (syscall(SYS_prlimit64, 0, sp->rl[i].resource, &sp->rl[i].want, NULL) < 0) {
			sp->err = -errno;
			syscall(SYS_exit, 125);
		}
	}
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, sizeof(uint64_t));
	/* execvpe as execvp: the command's PATH, sh for a file without #! */
	execvpe(sp->c->argv[0], sp->c->argv, sp->c->envp);
	sp->err = errno ? errno : ENOEXEC;
	syscall(SYS_exit, 127);
	return 127;
}

/* One "SigIgn:\t<hex>" line of /proc/self/status; false if not there. */
static bool status_mask(const char *status, const char *key, uint64_t *mask)
{
	const char *p = proc_status_value(status, key);
	char *end;

	if (!p)
		return false;
	*mask = strtoull(p, &end, 16);
	return end != p && *end == '\n';
}

/*
 * The signals whose disposition in init is not SIG_DFL, ignored or caught,
 * from one read of /proc/self/status: the only ones spawn_child must set
 * (one rt_sigaction each, where all 62 cost a call each).  Every signal
 * where the file cannot be read or parsed; *caught, those caught alone
 * (none known then).
 */
static uint64_t signal_dispositions(uint64_t *caught)
{
	char buf[4096];
	uint64_t ign, cgt;

	*caught = 0;
	if (proc_self_status(buf, sizeof(buf)) < 0)
		return ~0ULL;
	if (!status_mask(buf, "SigIgn", &ign) || !status_mask(buf, "SigCgt", &cgt))
		return ~0ULL;
	*caught = cgt;
	return ign | cgt;
}

static uint64_t signals_to_reset(void)
{
	uint64_t caught;

	return signal_dispositions(&caught);
}

/*
 * One rlimit as exec_command's steps set it: never above what init has;
 * with lower, cur = max = v (lower_rlimit); else cur and max from r.
 */
static bool plan_rlimit(struct spawn *sp, int res, bool lower, uint64_t v,
			const struct corral_rlimit *r)
{
	struct spawn_rlimit *s = &sp->rl[sp->nrl];
	struct rlimit cur;

	if (sp->nrl == SPAWN_RLIMITS || getrlimit(res, &cur) < 0)
		return false;
	s->resource = res;
	if (lower) {
		if (cur.rlim_max != RLIM_INFINITY && (uint64_t)cur.rlim_max < v)
			v = cur.rlim_max;
		s->want.rlim_cur = s->want.rlim_max = (rlim_t)v;
	} else {
		s->want.rlim_max = r->hard < cur.rlim_max ? r->hard : cur.rlim_max;
		s->want.rlim_cur = r->soft < s->want.rlim_max ? r->soft : s->want.rlim_max;
	}
	sp->nrl++;
	return true;
}

/* limit_inflight's RLIMIT_NOFILE, from init's (no NOFILE planned before) */
static bool plan_inflight(struct spawn *sp, rlim_t cap)
{
	struct rlimit init;

	if (sp->nrl == SPAWN_RLIMITS || getrlimit(RLIMIT_NOFILE, &init) < 0)
		return false;
	if (!inflight_nofile(&init, cap, &sp->rl[sp->nrl].want))
		return true;
	sp->rl[sp->nrl++].resource = RLIMIT_NOFILE;
	return true;
}

/* The command's rlimits, in exec_command's order; false: let it do them. */
static bool plan_rlimits(struct spawn *sp, const struct child_ctx *c)
{
	if (c->cg_none && c->p->memory_bytes &&
	    !plan_rlimit(sp, RLIMIT_DATA, true, c->p->memory_bytes, NULL))
		return false;
	if (c->cg_none && c->p->pids &&
	    !plan_rlimit(sp, RLIMIT_NPROC, true, c->p->pids, NULL))
		return false;
	for (size_t i = 0; i < c->nrlimits; i++)
		if (!plan_rlimit(sp, c->rlimits[i].resource, false, 0, &c->rlimits[i]))
			return false;
	return c->container || plan_inflight(sp, c->nofile_cap);
}

/*
 * The command's pid; 0 to fork instead (a pty, more rlimits than planned
 * for, or no memory for a stack); -errno if exec failed, with *setup set
 * if it was an rlimit.  The stack holds execvpe's copy of argv for sh as
 * well.
 */
static pid_t spawn_command(const struct child_ctx *c, int slave, bool *setup)
{
	extern char **environ;
	struct spawn sp = { .c = c };
	uint64_t all = ~0ULL, old;
	size_t argc = 0, size;
	char *stack;
	pid_t pid;

	*setup = false;
	if (slave >= 0 || !plan_rlimits(&sp, c))
		return 0;
	/* execvpe searches the PATH of environ, not of envp: the command's */
	environ = c->envp;
	while (c->argv[argc])
		argc++;
	size = (64 << 10) + ((argc + 2) * sizeof(char *) + 4095) / 4096 * 4096;
	stack = mmap(NULL, size, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stack == MAP_FAILED)
		return 0;
	if (syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, &old, sizeof(uint64_t)) < 0) {
		munmap(stack, size);
		return 0;
	}
	/* read with every signal blocked: no handler can change them meanwhile */
	sp.reset = signals_to_reset();
	pid = clone(spawn_child, stack + size, CLONE_VM | CLONE_VFORK | SIGCHLD, &sp);
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, sizeof(uint64_t));
	/*
	 * The stack stays mapped until init exits (init spawns its command
	 * once): unmapped now, the child having run on it from another CPU,
	 * it cost a TLB shootdown, 0.4 ms of init's time on a paravirtualized
	 * host, while the command starts.
	 */
	if (pid < 0) {
		munmap(stack, size);
		return 0;
	}
	if (sp.err) {
		waitpid(pid, NULL, 0);
		*setup = sp.err < 0;
		return sp.err < 0 ? sp.err : -sp.err;
	}
	return pid;
}

/* What failed when the command's rlimits or pty could not be set. */
static const char *before_exec_failure(const struct child_ctx *c)
{
	if (!c->tty)
		return c->nrlimits ? "cannot apply the command's rlimits" :
				     "cannot apply the rlimits that stand in for cgroups";
	return !c->cg_none && !c->nrlimits ? "cannot make the pty the command's terminal" :
		"cannot apply the rlimits or make the pty the command's terminal";
}

/*
 * A signal to stop the run that the supervisor forwarded after our READY
 * waits here, blocked since the clone (the supervisor's mask, inherited):
 * then the command is not started, and the supervisor hears which signal
 * it was.  One that comes after this look is the command's.  A
 * container's signals are the engine's, before its start as after.
 */
static void stop_if_signaled(const struct child_ctx *c)
{
	static const int stop[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
	sigset_t pending;

	if (c->container || sigpending(&pending) < 0)
		return;
	for (size_t i = 0; i < sizeof(stop) / sizeof(stop[0]); i++)
		if (sigismember(&pending, stop[i])) {
			send_msg(c->msg_wr, MSG_NOT_STARTED, stop[i], 0, NULL);
			_exit(0);
		}
}

/*
 * The command by fork, where spawn_command cannot (a pty, an rlimit it
 * cannot plan): exec's failure, or a step's before it, comes back over a
 * pipe that exec closes.  Returns the command's pid; on a failure it is
 * reported and we exit.
 */
static pid_t fork_command(const struct child_ctx *c, int sfd, int slave)
{
	struct corral_err err;
	int pipefd[2], e;
	pid_t cmd;
	ssize_t n;

	if (pipe2(pipefd, O_CLOEXEC) < 0) {
		corral_set_errno(&err, errno, "init");
		setup_failed(c, &err);
	}
	cmd = fork();
	if (cmd < 0) {
		struct rlimit rl;

		/*
		 * EAGAIN is most often RLIMIT_NPROC: corral's caller's (ulimit
		 * -u, which the sandbox inherits), or --pids where no cgroup
		 * could be had.  Said with its value: "Resource temporarily
		 * unavailable" alone names neither.
		 */
		e = errno;
		if (e == EAGAIN && getrlimit(RLIMIT_NPROC, &rl) == 0 &&
		    rl.rlim_cur != RLIM_INFINITY)
			corral_set_err(&err, -e, "cannot start the command: %s "
				       "(RLIMIT_NPROC is %llu: corral's caller's "
				       "ulimit -u, or --pids without a cgroup)",
				       strerror(e), (unsigned long long)rl.rlim_cur);
		else
			corral_set_errno(&err, e, "cannot start the command");
		setup_failed(c, &err);
	}
	if (cmd == 0) {
		close(sfd);
		close(pipefd[0]);
		exec_command(c, pipefd[1], slave);
	}
	close(pipefd[1]);
	n = read(pipefd[0], &e, sizeof(e));
	close(pipefd[0]);
	if (n == sizeof(e)) {
		waitpid(cmd, NULL, 0);
		if (e < 0)	/* before exec: one of the two steps a command may fail */
			send_msg(c->msg_wr, MSG_SETUP_FAILED, e, 0, before_exec_failure(c));
		else
			send_msg(c->msg_wr, MSG_EXEC_FAILED, e, 0, NULL);
		_exit(127);
	}
	return cmd;
}

/* PID 1 loaded a filter with a listener: it probes it (sensor.c) */
static bool probing;

/* PID 1: start the command, reap everything, forward signals, report. */
static __attribute__((noreturn)) void init_loop(const struct child_ctx *c,
						int slave)
{
	struct signalfd_siginfo si;
	sigset_t set;
	int sfd, status;
	pid_t cmd;
	bool setup;

	sigemptyset(&set);
	for (size_t i = 0; i < sizeof(forwarded_signals) / sizeof(int); i++)
		sigaddset(&set, forwarded_signals[i]);
	sigaddset(&set, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0 ||
	    (sfd = signalfd(-1, &set, SFD_CLOEXEC)) < 0) {
		struct corral_err err;

		corral_set_errno(&err, errno, "init");
		setup_failed(c, &err);
	}
	if (c->tty && slave < 0) {
		struct corral_err err;

		if (open_pty(c, &slave, &err) < 0)
			setup_failed(c, &err);
	}

	stop_if_signaled(c);
	/*
	 * Spawned, the command has run exec, or its failure is known: no pipe
	 * to read for it, nor to wait on until exec has closed the child's
	 * end (a switch of ours, half the time, on every start: issue 17).
	 */
	cmd = spawn_command(c, slave, &setup);
	if (cmd < 0) {
		if (setup)
			send_msg(c->msg_wr, MSG_SETUP_FAILED, cmd, 0, before_exec_failure(c));
		else
			send_msg(c->msg_wr, MSG_EXEC_FAILED, -cmd, 0, NULL);
		_exit(127);
	}
	if (cmd == 0)
		cmd = fork_command(c, sfd, slave);
	if (slave >= 0)
		close(slave);
	/*
	 * stdin is the command's alone: its last copy closed is the
	 * supervisor's EPIPE.  stdout and stderr we keep until the command
	 * is reaped, then they close with our exit, beside our last message:
	 * closed now, the command's exit ended each pipe on its own and woke
	 * the supervisor for each, and again for MSG_EXITED (issue 17).
	 * Nothing is held longer than the command lives: when it is gone, so
	 * are we, and the rest of the namespace with us.
	 */
	if (c->stdio[0] >= 0)
		close(0);

	for (;;) {
		if (read(sfd, &si, sizeof(si)) != sizeof(si)) {
			if (errno == EINTR)
				continue;
			_exit(125);
		}
		/*
		 * Passed on only when it came from outside, where the supervisor
		 * is: from an ancestor pid namespace the sender's pid reads 0.
		 * A process inside that signals PID 1 gets nothing from it, as
		 * the kernel would drop the signal at an init that does not
		 * catch it; forwarded, it reached the command's whole group.
		 */
		if (si.ssi_signo != SIGCHLD) {
			if (si.ssi_pid == 0) {
				kill(-cmd, si.ssi_signo);
				kill(cmd, si.ssi_signo);
			}
			continue;
		}
		for (;;) {
			pid_t pid = waitpid(-1, &status, WNOHANG);

			if (pid <= 0)
				break;
			if (pid == cmd) {
				/*
				 * What was dropped since the last denial read: a
				 * probe waited for at most 1 s, as our exit takes
				 * the leftovers with it and must not wait for a
				 * supervisor that is stopped.
				 */
				if (probing)
					sensor_probe_within(1000);
				/* Our exit takes the rest of the namespace with it. */
				send_msg_quiet(c->msg_wr, MSG_EXITED, status);
				if (!c->container)
					_exit(0);
				/* the container's status is ours: the shim reads it */
				_exit(WIFEXITED(status) ? WEXITSTATUS(status) :
				      128 + WTERMSIG(status));
			}
		}
	}
}

/* ---- long-lived sandboxes: init starts the calls it is asked for ----- */

struct call_pid {
	uint32_t id;
	pid_t pid;
};

/*
 * A call's argv and envp, side by side, for a call of at most CALL_VEC_MAX
 * strings and their two NULLs: one page of our own, which call_warm
 * writes while we wait.  From calloc, as they were, a call with the box's
 * environment (a few hundred bytes of pointers, past the tcache that
 * call_warm's calloc warms) was three copy-on-write faults between its
 * arrival and its exec: main_arena's bins, the free chunk of init's heap
 * it unlinked, and the one it split (traced: exceptions:page_fault_user),
 * each 10-40 us of the caller's wait on a paravirtualized host.  A larger
 * call takes calloc's, as before.
 */
#define CALL_VEC_MAX 512
static char *call_vec[CALL_VEC_MAX] __attribute__((aligned(CALL_VEC_MAX * sizeof(char *))));

/* n strings of data[*used, len) into v[0, n), v[n] NULL; false if not there. */
static bool split_strings(char **v, char *data, size_t len, size_t n, size_t *used)
{
	size_t off = *used;

	for (size_t i = 0; i < n; i++) {
		char *end = off < len ? memchr(data + off, '\0', len - off) : NULL;

		if (!end)
			return false;
		v[i] = data + off;
		off = end - data + 1;
	}
	v[n] = NULL;
	*used = off;
	return true;
}

/* The vectors for argv and envp: call_vec if they fit, else calloc's. */
static char **call_vectors(const struct exec_msg *m)
{
	size_t n = (size_t)m->nargv + m->nenv + 2;

	return n <= CALL_VEC_MAX ? call_vec : calloc(n, sizeof(char *));
}

static __attribute__((noreturn)) void call_fail(int gate, int stage, int e)
{
	struct exec_fail f = { stage, e };

	if (send(gate, &f, sizeof(f), MSG_NOSIGNAL) < 0)
		_exit(127);
	_exit(stage == EXEC_STAGE_EXEC && (e == ENOENT || e == ENOTDIR) ? 127 : 126);
}

/*
 * With a terminal: a new session whose controlling terminal is a pty of
 * the sandbox's devpts, its slave our 0-2.  Made here, before exec, by
 * code of ours: the process is init's fork, still not dumpable, so
 * nothing in the sandbox can reach it in between.  Returns the master.
 */
static int call_pty(const struct exec_msg *m)
{
	struct winsize ws = { .ws_row = m->rows, .ws_col = m->cols };
	int master, slave, r;

	r = make_pty(&ws, &master, &slave);
	if (r < 0)
		return r;
	r = take_pty(slave);
	if (r < 0) {
		close(master);
		return r;
	}
	return master;
}

/*
 * The call, once we are in its cgroup: struct exec_msg with its stdio
 * (three fds; none with EXEC_TTY).  EOF: the supervisor had no use for
 * us (the box goes, or the call was killed before it came): we die of
 * SIGKILL, having run nothing.
 */
static void wait_call(int gate, struct exec_msg *m, int fds[3])
{
	char cbuf[CMSG_SPACE(3 * sizeof(int))];
	struct iovec iov = { m, sizeof(*m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	size_t hdr = offsetof(struct exec_msg, data);
	struct cmsghdr *cm;
	int nfds = 0;
	ssize_t n;

	do
		n = recvmsg(gate, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n <= 0) {
		/* as a call killed before it ran would end */
		kill(getpid(), SIGKILL);
		_exit(137);
	}
	cm = CMSG_FIRSTHDR(&mh);
	if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
		nfds = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		memcpy(fds, CMSG_DATA(cm), (nfds > 3 ? 3 : nfds) * sizeof(int));
	}
	if ((size_t)n < hdr || m->kind != EXEC_MSG_KIND ||
	    (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
	    nfds != ((m->flags & EXEC_TTY) ? 0 : 3) ||
	    m->len > sizeof(m->data) || hdr + m->len != (size_t)n)
		call_fail(gate, EXEC_STAGE_EXEC, EINVAL);
}

/*
 * sh -c LINE without the shell, where shell.c finds that dash would only
 * cd, redirect and exec; returns where it would not, or the cd or exec
 * failed, back in the directory and with the stderr it began with, for
 * the shell to run the line (and say why it fails, as it would have).
 */
static void exec_simple(int gate, const char *line, char **envp)
{
	extern char **environ;
	struct sh_simple s;
	const char *dir;
	char **env;
	int here = -1, err = -1;

	if (!sh_is_dash() || sh_simple_parse(line, &s) < 0)
		return;
	env = sh_simple_env(envp, s.cd, &dir);
	if (!env) {
		sh_simple_free(&s);
		return;
	}
	if (s.cd && ((here = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0 ||
		     chdir(dir) < 0))
		goto undo;
	if (s.err_to_out && ((err = fcntl(2, F_DUPFD_CLOEXEC, 3)) < 0 ||
			     dup2(1, 2) < 0))
		goto undo;
	environ = env;
	execvp(s.argv[0], s.argv);
undo:
	if (err >= 0 && (dup2(err, 2) < 0 || close(err) < 0))
		call_fail(gate, EXEC_STAGE_EXEC, errno);
	if (here >= 0 && (fchdir(here) < 0 || close(here) < 0))
		call_fail(gate, EXEC_STAGE_CWD, errno);
	environ = envp;
	sandbox_env_free(env);
	sh_simple_free(&s);
}

/*
 * Touch now what the call's steps before its exec touch first.  A fork's
 * child faults at the first touch of each page, its code's too (fork
 * copies no page table of a file's mapping), and a fault costs 25-40 us
 * on a paravirtualized host: about ten of them (the message's pages,
 * memcpy, calloc and malloc's arena, memchr, environ's page, getenv)
 * came between the call's arrival and its exec, while its caller waited
 * (issue 17).  Here they come while the process waits for a call, which
 * nobody does; the pages touched are this process's own copies.
 */
static void call_warm(struct exec_msg *m)
{
	extern char **environ;
	char **volatile *env = &environ;
	char *none[] = { NULL }, **mine = environ;
	volatile size_t two = 2;
	char *volatile sink;
	char **v;

	/* the message's first page: a small call's whole message */
	memcpy(m->data, "r", two);
	/* argv's and envp's page (call_vec: one page, by its alignment) */
	((char *volatile *)call_vec)[0] = NULL;
	v = calloc(two, sizeof(char *));
	sink = memchr(m->data, 'r', two);
	free(v);
	/* getenv's code, not init's environment: the call brings its own */
	*env = none;
	sink = getenv("PATH");
	*env = mine;
	(void)sink;
}

/*
 * A call's process, forked by init ahead of its call: "r" on the gate,
 * then nothing until the supervisor has moved it into the call's cgroup
 * and sent the call; then stdio, a session of its own, and exec.  reset:
 * the signals init does not leave at SIG_DFL (signals_to_reset), ours
 * too as its fork: one rt_sigaction each, not 64 a call.
 */
static __attribute__((noreturn)) void call_child(const struct child_ctx *c,
						 struct exec_msg *m, int gate,
						 uint64_t reset)
{
	extern char **environ;
	struct corral_err err;
	size_t used = 0;
	char **argv, **envp, *cwd;
	int fds[3] = { -1, -1, -1 };
	sigset_t none;
	int master = -1;

	/* init's control socket is not ours to read or keep */
	close(c->msg_wr);
	signals_default(reset);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	call_warm(m);
	/*
	 * The call's session, made while we wait rather than once the call
	 * has come: setsid makes the session's autogroup (12-15 us after a
	 * quiet spell), and a process in the host's root cpu group (no
	 * cgroups) moves into it, which on a loaded host can put it behind
	 * the others: 0.4-0.7 ms at p50, 2 cores, 100 ms asleep before (in a
	 * cpu group: 0.02).  Issue 17.  A fork leads no group: it cannot fail.
	 */
	setsid();
	if (fd_send(gate, "r", 1, NULL, 0, MSG_NOSIGNAL) != 1)
		_exit(125);
	wait_call(gate, m, fds);
	for (int i = 0; i < 3 && fds[i] >= 0; i++)
		if (dup2(fds[i], i) < 0)
			_exit(125);
	for (int i = 0; i < 3; i++)
		if (fds[i] > 2)
			close(fds[i]);
	if (m->flags & EXEC_TTY) {
		master = call_pty(m);
		if (master < 0)
			call_fail(gate, EXEC_STAGE_TTY, -master);
		/* the supervisor relays the master */
		if (fd_send(gate, "p", 1, &master, 1, MSG_NOSIGNAL) != 1)
			_exit(125);
		close(master);
	}
	argv = call_vectors(m);
	envp = argv ? argv + m->nargv + 1 : NULL;
	if (!argv || !split_strings(argv, m->data, m->len, m->nargv, &used) ||
	    !split_strings(envp, m->data, m->len, m->nenv, &used) ||
	    used >= m->len || !memchr(m->data + used, '\0', m->len - used))
		call_fail(gate, EXEC_STAGE_EXEC, EINVAL);
	cwd = m->data + used;
	if ((c->cg_none && cg_apply_rlimits(c->p, &err) < 0) ||
	    (!c->container && limit_inflight(c->nofile_cap, &err) < 0))
		call_fail(gate, EXEC_STAGE_RLIMIT, -err.code);
	if (chdir(cwd) < 0)
		call_fail(gate, EXEC_STAGE_CWD, errno);
	if ((m->flags & EXEC_SH_FAST) && m->nargv == 3)
		exec_simple(gate, argv[2], envp);
	environ = envp;
	execvp(argv[0], argv);
	call_fail(gate, EXEC_STAGE_EXEC, errno);
}

static void send_call_msg(int fd, int kind, uint32_t id, int code)
{
	struct child_msg m = { .kind = kind, .id = id, .code = code };

	if (send(fd, &m, sizeof(m), MSG_NOSIGNAL) < 0)
		_exit(0);	/* the supervisor is gone: so are we */
}

/*
 * The fork left our pages copy-on-write, so our first write to each is a
 * fault (25-40 us on a paravirtualized host).  Two came on the path of a
 * call's answer, init woken by its SIGCHLD: errno's page, written by the
 * read that reaps it, and the rseq area glibc registered for us, which
 * the kernel writes when we are scheduled in again (in 25 of 30 reaps
 * measured).  Written now, while nobody waits: errno, and the area's
 * rseq_cs with NULL, which says what is true here (no critical section
 * open: glibc opens none, nor do we) and is the field user space may set.
 */
static void own_pages_again(void)
{
	errno = 0;
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 35)
	if (__rseq_size > 0) {
		volatile struct rseq *rs = (struct rseq *)
			((char *)__builtin_thread_pointer() + __rseq_offset);

		rs->rseq_cs = 0;
	}
#endif
}

/* One MSG_FORK off the control socket; false when the supervisor is gone. */
static bool take_fork(const struct child_ctx *c, struct exec_msg *m,
		      uint64_t reset, struct call_pid *calls, size_t max,
		      size_t *ncalls)
{
	char cbuf[CMSG_SPACE(4 * sizeof(int))];
	struct fork_msg f;
	struct iovec iov = { &f, sizeof(f) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm;
	int fds[4] = { -1, -1, -1, -1 }, nfds = 0;
	ssize_t n;
	pid_t pid;

	n = recvmsg(c->msg_wr, &mh, MSG_CMSG_CLOEXEC);
	if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
		return false;
	if (n < 0)
		return true;
	cm = CMSG_FIRSTHDR(&mh);
	if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
		nfds = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		memcpy(fds, CMSG_DATA(cm), (nfds > 4 ? 4 : nfds) * sizeof(int));
	}
	if (n != sizeof(f) || f.kind != MSG_FORK || nfds != 1) {
		for (int i = 0; i < 4 && i < nfds; i++)
			close(fds[i]);
		if ((size_t)n >= offsetof(struct fork_msg, id) + sizeof(f.id))
			send_call_msg(c->msg_wr, MSG_STARTED, f.id, -EINVAL);
		return true;
	}
	pid = *ncalls < max ? fork() : (errno = EAGAIN, -1);
	if (pid == 0)
		call_child(c, m, fds[0], reset);
	close(fds[0]);
	if (pid < 0) {
		send_call_msg(c->msg_wr, MSG_STARTED, f.id, -errno);
		return true;
	}
	calls[(*ncalls)++] = (struct call_pid){ f.id, pid };
	send_call_msg(c->msg_wr, MSG_STARTED, f.id, pid);
	own_pages_again();
	return true;
}

static void reap_calls(const struct child_ctx *c, struct call_pid *calls,
		       size_t *ncalls)
{
	int status;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		for (size_t i = 0; i < *ncalls; i++) {
			if (calls[i].pid != pid)
				continue;
			send_call_msg(c->msg_wr, MSG_CALL_EXITED, calls[i].id, status);
			/*
			 * Drops since the last denial read: counted toward the
			 * sandbox's limit, named by no call.  After the call's
			 * end, not before: a round trip of the supervisor's
			 * (20 us) the exec's answer does not wait for.  We
			 * catch no signal here, so nothing inside cuts it
			 * short.
			 */
			if (probing)
				sensor_probe(1);
			calls[i] = calls[--*ncalls];
			break;
		}
	}
}

#define CALLS_MAX 4096

/*
 * PID 1 of a long-lived sandbox.  Signals from inside the namespace reach
 * it only if it handles them, and it handles none but SIGCHLD: the agent
 * cannot talk to it.  When the supervisor goes, the control socket reads
 * EOF and PID 1's exit takes every process of the sandbox with it.
 */
static __attribute__((noreturn)) void serve_loop(const struct child_ctx *c)
{
	struct call_pid *calls = calloc(CALLS_MAX, sizeof(*calls));
	struct exec_msg *m = malloc(sizeof(*m));
	struct pollfd pfd[2];
	size_t ncalls = 0;
	sigset_t set;
	int sfd;
	uint64_t reset, caught;

	/*
	 * The daemon's handlers came with the fork (libevent's for SIGTERM,
	 * SIGINT and SIGHUP): a caught signal from inside the namespace
	 * reaches PID 1 and runs them here.  At SIG_DFL the kernel drops it.
	 */
	reset = signal_dispositions(&caught);
	signals_default(caught);
	/*
	 * What is left to reset for every call: the ignored ones (the caught
	 * are SIG_DFL now, and nothing below changes a disposition), from
	 * the one read of /proc/self/status, where a second read made two
	 * on every create.
	 */
	reset &= ~caught;
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	if (!m || !calls || sigprocmask(SIG_BLOCK, &set, NULL) < 0 ||
	    (sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK)) < 0)
		_exit(125);
	pfd[0] = (struct pollfd){ .fd = c->msg_wr, .events = POLLIN };
	pfd[1] = (struct pollfd){ .fd = sfd, .events = POLLIN };
	for (;;) {
		struct signalfd_siginfo si;

		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			_exit(125);
		}
		if (pfd[1].revents) {
			while (read(sfd, &si, sizeof(si)) == sizeof(si))
				;
			reap_calls(c, calls, &ncalls);
		}
		if (pfd[0].revents & POLLIN) {
			if (!take_fork(c, m, reset, calls, CALLS_MAX, &ncalls))
				_exit(0);
		} else if (pfd[0].revents & (POLLHUP | POLLERR)) {
			_exit(0);
		}
	}
}

/*
 * Our command line is the supervisor's (a fork's): paths, policy names, a
 * token file's path.  /proc/1/cmdline is readable by anyone in the
 * sandbox, so overwrite it in place (fields 48-49 of /proc/self/stat).
 */
static char **copy_argv(char *const *argv)
{
	size_t n = 0;
	char **v;

	while (argv[n])
		n++;
	v = calloc(n + 1, sizeof(char *));
	for (size_t i = 0; v && i < n; i++)
		if (!(v[i] = strdup(argv[i])))
			return NULL;	/* a child about to exit: nothing to free */
	return v;
}

int sandbox_join_layers(const struct corral_policy *p, int *notify_fd,
			struct corral_err *err)
{
	int abi;

	*notify_fd = -1;
	if (set_identity(true, false, err) < 0 || no_core_dumps(err) < 0 ||
	    limit_priority(err) < 0 || limit_shared(err) < 0)
		return err->code;
	abi = apply_landlock(p, err);
	if (abi < 0)
		return abi;
	/* an OCI exec runs as the agent: process.user is not honoured */
	if (drop_caps(false, err) < 0)
		return err->code;
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return corral_set_errno(err, errno, "PR_SET_DUMPABLE");
	return sc_apply(p, notify_fd, err);
}

void sandbox_child(struct child_ctx *c)
{
	struct corral_err err = { 0 };
	size_t nmapped = c->idmap ? c->idmap->nbinds : 0, nbinds = c->p->nbinds;
	size_t nkeep = 8 + nmapped + nbinds;
	int keep[8 + nmapped + nbinds];
	int abi, rootfd = -1, notify_fd = -1, upperfd = -1, slave = -1, r;
	struct dnsoff_socks dns = { .fd = -1, .diag = -1 };
	int cgfds[FD_SEND_MAX];
	size_t ncg;
	char go;
	/* compiled before the first wait, loaded after the capabilities */
	struct sc_compiled filter;
	struct corral_err sc_err = { 0 };
	int sc_r;
	struct sc_fill fill = { 0 };

	keep[0] = c->sync_rd, keep[1] = c->msg_wr;
	/* 0-2 are never closed; the stdio handed in is there by then (set_stdio) */
	keep[2] = keep[3] = keep[4] = -1;
	keep[5] = c->p->workspace_layer ? c->p->workspace_layer_fd : -1;
	/* the supervisor's idmapped workspace and binds, mounted by mount_build */
	keep[6] = c->idmap ? c->idmap->ws : -1;
	for (size_t i = 0; i < nmapped; i++)
		keep[7 + i] = c->idmap->binds[i];
	/* the sources the caller judged, compared by mount_build */
	for (size_t i = 0; i < nbinds; i++)
		keep[7 + nmapped + i] = c->p->binds[i].pinned ? c->p->binds[i].fd : -1;
	keep[7 + nmapped + nbinds] = c->p->workspace_pinned ? c->p->workspace_fd : -1;

	/* a container's parent is the CLI, which exits at once (create) */
	if (!c->container && prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		_exit(125);
	/*
	 * The seccomp filter is compiled first, while the supervisor writes
	 * our id maps and moves us into our cgroup: the same program, loaded
	 * where it always was (below), built on the other core instead of in
	 * the line (mostly taken built in: then no work at all).  A failure
	 * is reported there too, in the order it always was.  The filling
	 * that goes under it (3 ms of kernel CPU) is loaded meanwhile by a
	 * thread of ours, made now for the longest overlap with our setup,
	 * and gone before the filter is loaded (seccomp_stack.c).
	 */
	sc_r = sc_compile(c->p, true, &filter, &sc_err);
	if (sc_r == 0)
		sc_fill_start(&fill, sc_ebpf_len(filter.prog, filter.len));
	/* the command's argv may point into the area corral_forget clears */
	if (c->argv && !(c->argv = copy_argv(c->argv)))
		_exit(125);
	/* nothing of the supervisor's environment or arguments in our memory */
	corral_forget("corral-init");
	/*
	 * Our own network namespace, made here rather than in the clone: its
	 * half millisecond is then spent on this core while the supervisor
	 * writes our id maps, not in the supervisor's clone (the daemon's one
	 * loop, for every sandbox it makes).  Owned by our user namespace all
	 * the same.  The proxy's listeners are opened in it, by us, with the
	 * capabilities we have in it until set_identity, and handed to the
	 * supervisor; a fork of the supervisor that joined our namespaces to
	 * do it cost it a millisecond, in line, on every start.
	 */
	if (!c->joined_net && unshare(CLONE_NEWNET) < 0) {
		corral_set_err(&err, -errno, "cannot create the sandbox's network "
			       "namespace: %s%s", strerror(errno), errno == ENOSPC ?
			       " (user.max_net_namespaces reached? see `corral "
			       "doctor`)" : "");
		setup_failed(c, &err);
	}
	/* its bounds (net_bound_uncharged) through our own proc: mount_build */
	if (!c->joined_net && c->p->net == CORRAL_NET_PROXY &&
	    proxy_listeners_send(c->sync_rd, c->p->net_transparent,
				 c->p->connections) < 0)
		_exit(125);
	/*
	 * The supervisor's ends of our sockets go before we wait on ours: a
	 * supervisor killed before we set the parent-death signal sends no
	 * signal, and only its death closing the last end of the sync socket
	 * tells us (we would wait for "go" forever, holding an end ourselves).
	 */
	if (set_stdio(c->stdio, &err) < 0 || close_inherited(keep, nkeep, &err) < 0)
		setup_failed(c, &err);
	/* EOF instead of "go": the supervisor failed or died. */
	if (read(c->sync_rd, &go, 1) != 1)
		_exit(125);
	if (set_identity(c->caller_root, c->subid_maps, &err) < 0)
		setup_failed(c, &err);
	/*
	 * A change of credentials clears the parent-death signal: set it
	 * again.  Had the supervisor died already, the next read of the sync
	 * socket sees EOF, or the READY message meets a closed socket.
	 */
	if (!c->container && prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		_exit(125);
	if (sethostname(c->hostname ? c->hostname : "corral",
			strlen(c->hostname ? c->hostname : "corral")) < 0) {
		corral_set_errno(&err, errno, "sethostname");
		setup_failed(c, &err);
	}
	if (mount_build(c->p, c->idmap, c->tls_ca_pem, c->send_upper ? &upperfd : NULL,
			!c->joined_net, &err) < 0 ||
	    (!c->joined_net && loopback_up(&err) < 0) || set_rlimits(&err) < 0)
		setup_failed(c, &err);
	/* host fds (the host's mounts): none stays in a process of the sandbox */
	for (size_t i = 0; i < nbinds; i++)
		if (c->p->binds[i].pinned)
			close(c->p->binds[i].fd);
	if (c->p->workspace_pinned)
		close(c->p->workspace_fd);
	/* network off: 127.0.0.1:53 is the supervisor's before the command runs */
	if (c->p->net == CORRAL_NET_NONE && !c->joined_net &&
	    (r = dnsoff_bind(&dns)) < 0) {
		corral_set_err(&err, r, "cannot bind 127.0.0.1:53 for the sandbox's "
			       "DNS: %s", strerror(-r));
		setup_failed(c, &err);
	}
	/*
	 * The supervisor makes our cgroup while we build the mounts, and moves
	 * us in, or hands us its files to move ourselves (cg_entry_fds); that
	 * before anything that must be limited runs, and before the cgroup
	 * becomes our root.
	 */
	if (fd_recv(c->sync_rd, &go, 1, cgfds, FD_SEND_MAX, &ncg, 0) != 1)
		_exit(125);
	/* rlimits instead (cg_apply_rlimits), in every process it starts */
	c->cg_none = go == 'n';
	if (cg_enter(cgfds, ncg, &err) < 0)
		setup_failed(c, &err);
	if (!c->p->abort.ntripwires && !c->container)
		close(c->sync_rd);
	if (unshare(CLONE_NEWCGROUP) < 0) {
		corral_set_errno(&err, errno, "cgroup namespace");
		setup_failed(c, &err);
	}
	/*
	 * The supervisor watches the planted tripwires, reads and writes files
	 * for the daemon, and sees whether the disk limit was hit, through our
	 * root; it cannot reach /proc/1/root once PID 1 is non-dumpable.
	 */
	rootfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);	/* sent with READY */
	abi = apply_landlock(c->p, &err);
	if (abi < 0)
		setup_failed(c, &err);
	if (enter_workspace(c->p->workdir ? c->p->workdir : "/workspace", &err) < 0 ||
	    (c->p->root_inside && become_root(&err) < 0) ||
	    drop_caps(c->p->root_inside, &err) < 0)
		setup_failed(c, &err);
	/* The agent must not read PID 1's memory or fds through /proc. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) {
		corral_set_errno(&err, errno, "PR_SET_DUMPABLE");
		setup_failed(c, &err);
	}
	if (sc_r < 0)
		setup_failed(c, &sc_err);
	sc_fill_join(&fill);
	if (sc_load(&filter, &notify_fd, &err) < 0)
		setup_failed(c, &err);
	if (c->container && command_found(c, &err) < 0)
		setup_failed(c, &err);
	/* a container's console goes to the engine at create, before start */
	if (c->container && c->tty && open_pty(c, &slave, &err) < 0)
		setup_failed(c, &err);
	/*
	 * READY carries the fds: the DNS sockets, the upper layer, our root
	 * and the seccomp listener.  Nothing in the sandbox may keep the
	 * listener: whoever holds it answers the denied calls.  Unsent, it is
	 * closed all the same, and the denied calls then fail with ENOSYS.
	 */
	probing = notify_fd >= 0;
	send_ready(c, abi, &dns, upperfd, rootfd, notify_fd);
	/* the filter's first notification, before anything of ours runs */
	if (probing)
		sensor_probe(64);
	/* Tripwires: the command starts only once the supervisor watches them. */
	if (c->p->abort.ntripwires && read(c->sync_rd, &go, 1) != 1)
		_exit(125);
	/*
	 * A container's command waits for `start` (the runtime spec's
	 * create/start split): everything above is done, only exec is left.
	 */
	if (c->container && read(c->sync_rd, &go, 1) != 1)
		_exit(125);
	if (c->p->abort.ntripwires || c->container)
		close(c->sync_rd);
	if (c->serve)
		serve_loop(c);
	init_loop(c, slave);
}
