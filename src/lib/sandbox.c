/*
 * sandbox.c - the one way a sandbox is made: the supervisor's half.
 *
 * Every front end (corral_run in run.c, the daemon's boxes in box.c, an OCI
 * container's monitor in container.c) calls sandbox_spawn().  The
 * supervisor stays outside every namespace; in order:
 *
 *   host ids (ns.c) and idmapped workspace and binds (idmap.c) -> sockets
 *   -> clone init into new user, mount, pid, ipc and uts namespaces ->
 *   id maps -> oom_score_adj (oom.c) -> (on init's "n") egress proxy in
 *   its netns -> "g" -> cgroup (made, for a one-shot run; init moved in,
 *   or its files opened for init) -> watch -> "c" -> (on READY)
 *   tripwires -> "t"
 *
 * Init's half, top to bottom in sandbox_child() (child.c): its network
 * namespace (then "n", for the proxy) -> identity ->
 * mounts and pivot -> loopback -> rlimits -> (network off) 127.0.0.1:53 for
 * dnsoff.c -> (after "c") into the cgroup if given its files -> cgroup
 * namespace
 * -> Landlock -> capabilities -> seccomp -> READY, which brings the fds
 * the supervisor keeps (DNS sockets, upper layer, root, seccomp listener:
 * one message, one wake) -> the command, or the calls.  It then stays as
 * PID 1: it reaps, forwards signals, and reports over a socket the
 * commands never see; child_msg_recv_fds() decodes that.
 */
#include "internal.h"
#include "sandbox.h"
#include "dnsoff.h"
#include "events.h"
#include "fdpass.h"
#include "net.h"
#include "proxy.h"
#include "sensor.h"
#include "tripwire.h"
#include "tls.h"

#include <event2/event.h>

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif

/* and a network namespace, which init makes itself (child.c) */
#define SANDBOX_NS	(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | \
			 CLONE_NEWIPC | CLONE_NEWUTS)

static void drop_event(struct event **ev)
{
	if (*ev)
		event_free(*ev);
	*ev = NULL;
}

int sandbox_check_policy(const struct corral_policy *p, struct corral_err *err)
{
	struct stat st;

	if (p->disk_bytes == 0)
		return corral_set_err(err, -EINVAL, "limits.disk must be > 0");
	if (!p->workspace)
		return 0;
	if ((p->workspace_pinned ? fstat(p->workspace_fd, &st) : stat(p->workspace, &st)) < 0)
		return corral_set_err(err, -EINVAL, "workspace %s: %s",
				      p->workspace, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return corral_set_err(err, -EINVAL, "workspace %s: not a directory",
				      p->workspace);
	return 0;
}

int corral_policy_check_host(const struct corral_policy *p, struct corral_err *err)
{
	rlim_t cap, hard;

	return sandbox_nofile_cap(p, &cap, &hard, err);
}

/* ---- init's messages ----------------------------------------------------- */

/*
 * In the order init sends them: the DNS sockets first, as they went when
 * each had a message of its own.
 */
const int ready_fd_kinds[READY_FDS_MAX] = {
	MSG_DNS_DIAG_FD, MSG_DNS_FD, MSG_UPPER_FD, MSG_ROOT_FD, MSG_NOTIFY_FD,
};

static bool carries_one_fd(int kind)
{
	return kind == MSG_NOTIFY_FD || kind == MSG_ROOT_FD || kind == MSG_UPPER_FD ||
	       kind == MSG_PTY_FD || kind == MSG_DNS_FD || kind == MSG_DNS_DIAG_FD;
}

/* How many fds a READY with this code carries, or -1 if none can. */
static int ready_fds(int code)
{
	unsigned int mask = 0;

	for (size_t i = 0; i < READY_FDS_MAX; i++)
		mask |= 1u << ready_fd_kinds[i];
	return (unsigned int)code & ~mask ? -1 : __builtin_popcount((unsigned int)code);
}

int child_msg_recv_fds(int sock, struct child_msg *m, int *fds, size_t max,
		       size_t *nfds)
{
	/* aligned for the cmsghdr that CMSG_FIRSTHDR reads out of it */
	union {
		char buf[CMSG_SPACE(READY_FDS_MAX * sizeof(int))];
		struct cmsghdr align;
	} cb;
	struct iovec iov = { m, sizeof(*m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cb.buf, .msg_controllen = sizeof(cb.buf) };
	int passed[READY_FDS_MAX], want;
	size_t n_passed = 0;
	bool too_many = false;
	struct cmsghdr *cm;
	ssize_t n;

	*nfds = 0;
	n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (n < 0)
		return errno == EINTR || errno == EAGAIN ? 0 : -errno;
	if (n == 0)
		return -EPIPE;
	for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		size_t k;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS ||
		    cm->cmsg_len < CMSG_LEN(0))
			continue;
		k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		/*
		 * cb.buf, rounded up by CMSG_SPACE, holds one fd more than
		 * READY_FDS_MAX, and the kernel installs it: closed here, or
		 * it stayed open with us for good.
		 */
		for (size_t i = 0; i < k; i++) {
			int one;

			memcpy(&one, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			if (n_passed < READY_FDS_MAX) {
				passed[n_passed++] = one;
			} else {
				close(one);
				too_many = true;
			}
		}
	}
	/*
	 * A message is whole; fds come only with the kinds that carry one,
	 * and with READY as many as its code says.
	 */
	if (n != sizeof(*m))
		want = -1;
	else if (m->kind == MSG_READY)
		want = ready_fds(m->code);
	else
		want = carries_one_fd(m->kind) ? 1 : 0;
	if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || want < 0 || too_many ||
	    (size_t)want != n_passed || n_passed > max) {
		while (n_passed)
			close(passed[--n_passed]);
		return 0;
	}
	m->text[sizeof(m->text) - 1] = '\0';
	memcpy(fds, passed, n_passed * sizeof(int));
	*nfds = n_passed;
	return 1;
}

int child_msg_recv(int sock, struct child_msg *m, int *fd)
{
	size_t n;
	int r = child_msg_recv_fds(sock, m, fd, 1, &n);

	if (r <= 0 || n == 0)
		*fd = -1;
	return r;
}

/* ---- tripwires --------------------------------------------------------- */

static void on_tripwire(void *arg, const char *path, pid_t pid, const char *how,
			const char *group)
{
	struct sandbox *sb = arg;
	json_t *o = json_pack("{s:s, s:i, s:s, s:s}", "path", path, "pid", (int)pid,
			      "how", how, "reason",
			      "a decoy file planted by the policy was touched");

	if (o && group[0])	/* read while the opener still waited */
		json_object_set_new(o, EVENTS_KEY_GROUP, json_string(group));
	if (o && sb->hooks->tripwire)
		sb->hooks->tripwire(sb->arg, o, pid);
	events_emit(sb->ev, "tripwire", o);
}

/*
 * On READY the mounts are built and nothing untrusted has run: watch the
 * decoys through the root init sent, then let the command start.  Armed
 * or not (an event says which), the sandbox goes on.
 */
/*
 * On READY: the policy's tripwires watched before the command may run.
 * One that cannot be (inotify used up by the caller's other sandboxes, a
 * tripwire under a bind) fails the start: a run must not go on without
 * the abort criteria written for it.  init, waiting for "t", is killed;
 * *m becomes the setup failure the front end reports.
 */
static int arm_tripwires(struct sandbox *sb, struct child_msg *m)
{
	const struct corral_policy *p = sb->p;
	struct corral_err err = { 0 };
	const char *over = NULL;

	for (size_t i = 0; i < p->abort.ntripwires && !over; i++)
		over = tripwire_bind_over(p, p->abort.tripwires[i]);
	if (over)
		corral_set_err(&err, -EINVAL, "a tripwire lies under the bind on %s", over);
	else if (sb->rootfd < 0)
		corral_set_err(&err, -EBADF, "the sandbox sent no root to watch in");
	else
		sb->tripwire = tripwire_start_at(sb->base, sb->rootfd,
				(const char *const *)p->abort.tripwires,
				p->abort.ntripwires, 0, on_tripwire, sb, &err);
	events_emit(sb->ev, "tripwire.armed", json_pack("{s:s, s:i, s:s}",
		    "mode", sb->tripwire ? tripwire_mode(sb->tripwire) : "none",
		    "files", (int)p->abort.ntripwires,
		    "detail", sb->tripwire ? "" : err.msg));
	if (!sb->tripwire) {
		sandbox_kill(sb);
		cleanup_closep(&sb->sync_wr);
		memset(m, 0, sizeof(*m));
		m->kind = MSG_SETUP_FAILED;
		m->code = err.code < 0 ? err.code : -EIO;
		snprintf(m->text, sizeof(m->text), "the tripwires cannot be watched, so the "
			 "sandbox was not started: %.400s", err.msg);
		return -1;
	}
	if (send(sb->sync_wr, "t", 1, MSG_NOSIGNAL) != 1) {
		/* init is gone: its exit is reported by the pidfd */
	}
	if (!sb->container)	/* a container's still waits for its start */
		cleanup_closep(&sb->sync_wr);
	return 0;
}

int sandbox_release(struct sandbox *sb, struct corral_err *err)
{
	if (!sb->container || sb->sync_wr < 0)
		return corral_set_err(err, -EALREADY, "the container was started already");
	if (send(sb->sync_wr, "s", 1, MSG_NOSIGNAL) != 1)
		return corral_set_errno(err, errno, "cannot start the container's process");
	cleanup_closep(&sb->sync_wr);
	return 0;
}

/* ---- watching init ------------------------------------------------------- */

/* One of the fds init hands over, by its kind; m: the message it came with. */
static void take_fd(struct sandbox *sb, int kind, const struct child_msg *m,
		    int passed)
{
	struct child_msg one = *m;

	switch (kind) {
	case MSG_NOTIFY_FD:	/* one of each, and nothing else */
		if (!sb->sensor)
			sb->sensor = sensor_start(sb->base, passed, sb->ev, sb->pid);
		else
			close(passed);
		return;
	case MSG_ROOT_FD:
		if (sb->rootfd < 0) {
			sb->rootfd = passed;
			/* now: the scratch mount is gone with the namespace */
			sb->scratchfd = mount_scratch_open(passed);
		} else {
			close(passed);
		}
		return;
	case MSG_UPPER_FD:
		if (sb->upperfd < 0)
			sb->upperfd = passed;
		else
			close(passed);
		return;
	case MSG_DNS_FD:	/* the network is off: we answer its DNS */
	case MSG_DNS_DIAG_FD:
		if (!sb->dnsoff)
			sb->dnsoff = dnsoff_new(sb->base, sb->ev);
		one.kind = kind;
		if (sb->dnsoff)
			dnsoff_take(sb->dnsoff, &one, passed);
		else
			close(passed);
		return;
	case MSG_PTY_FD:	/* the front end takes it from sb->ptyfd */
		if (sb->ptyfd < 0)
			sb->ptyfd = passed;
		else
			close(passed);
		return;
	}
	close(passed);
}

static void on_ctl(evutil_socket_t fd, short what, void *arg)
{
	struct sandbox *sb = arg;
	struct child_msg m;
	int passed[READY_FDS_MAX], r;
	size_t n, next = 0;

	(void)what;
	r = child_msg_recv_fds(fd, &m, passed, READY_FDS_MAX, &n);
	if (r < 0) {
		drop_event(&sb->ev_ctl);
		cleanup_closep(&sb->ctl);
		sb->hooks->closed(sb->arg);
		return;
	}
	if (r == 0)
		return;
	switch (m.kind) {
	case MSG_PTY_FD:
		take_fd(sb, m.kind, &m, passed[0]);
		break;
	case MSG_READY:
		/* its fds first, in their order: the tripwires need the root */
		for (size_t i = 0; i < READY_FDS_MAX && next < n; i++)
			if (m.code & (1 << ready_fd_kinds[i]))
				take_fd(sb, ready_fd_kinds[i], &m, passed[next++]);
		sb->landlock_abi = m.landlock_abi;
		if (sb->sync_wr >= 0 && sb->p->abort.ntripwires)
			arm_tripwires(sb, &m);
		break;
	default:
		if (n) {	/* a kind with an fd of its own: nothing more */
			take_fd(sb, m.kind, &m, passed[0]);
			return;
		}
		break;
	}
	sb->hooks->msg(sb->arg, &m);	/* may free sb: the last thing done */
}

static void on_exit_ready(evutil_socket_t fd, short what, void *arg)
{
	struct sandbox *sb = arg;

	(void)fd;
	(void)what;
	drop_event(&sb->ev_exit);
	/*
	 * Recorded before the end is: the run may be over after exited(),
	 * and a criterion these meet is judged with the command's end known.
	 */
	proxy_drain(sb->px);
	dnsoff_drain(sb->dnsoff);
	tripwire_drain(sb->tripwire);
	sb->hooks->exited(sb->arg);
}

static int watch(struct sandbox *sb, struct corral_err *err)
{
	sb->ev_ctl = event_new(sb->base, sb->ctl, EV_READ | EV_PERSIST, on_ctl, sb);
	sb->ev_exit = event_new(sb->base, sb->pidfd, EV_READ, on_exit_ready, sb);
	if (!sb->ev_ctl || !sb->ev_exit || event_add(sb->ev_ctl, NULL) < 0 ||
	    event_add(sb->ev_exit, NULL) < 0)
		return corral_set_err(err, -ENOMEM, "cannot watch the sandbox's init");
	return 0;
}

void sandbox_unwatch(struct sandbox *sb)
{
	drop_event(&sb->ev_ctl);
	drop_event(&sb->ev_exit);
	cleanup_closep(&sb->ctl);
}

void sandbox_kill(struct sandbox *sb)
{
	/* PID 1 dying takes every process of the namespace with it. */
	if (sb && sb->pidfd >= 0)
		syscall(SYS_pidfd_send_signal, sb->pidfd, SIGKILL, NULL, 0);
}

bool sandbox_gone(const struct sandbox *sb)
{
	struct pollfd p = { .fd = sb ? sb->pidfd : -1, .events = POLLIN };

	return p.fd >= 0 && poll(&p, 1, 0) == 1;
}

void sandbox_halt_egress(struct sandbox *sb)
{
	if (sb)
		proxy_halt(sb->px);
}

bool sandbox_egress_judging(const struct sandbox *sb)
{
	return sb && proxy_judging(sb->px);
}

void sandbox_free(struct sandbox *sb)
{
	if (!sb)
		return;
	cg_move_cancel(sb->mv);
	sandbox_unwatch(sb);
	sensor_free(sb->sensor);
	tripwire_free(sb->tripwire);
	proxy_free(sb->px);
	dnsoff_free(sb->dnsoff);
	cleanup_closep(&sb->sync_wr);
	cleanup_closep(&sb->rootfd);
	cleanup_closep(&sb->scratchfd);
	cleanup_closep(&sb->upperfd);
	cleanup_closep(&sb->ptyfd);
	cleanup_closep(&sb->pidfd);
	sandbox_env_free(sb->envp);
	idmap_close(&sb->idmap);
	tlsbox_free(sb->tls);
	free(sb);
}

/* ---- spawning ------------------------------------------------------------ */

static struct sandbox *sandbox_new(const struct sandbox_opts *o,
				   struct corral_err *err)
{
	struct sandbox *sb = calloc(1, sizeof(*sb));

	if (!sb) {
		corral_set_err(err, -ENOMEM, "out of memory for a sandbox");
		return NULL;
	}
	sb->base = o->base;
	sb->p = o->p;
	sb->ev = o->ev;
	sb->cg = o->cg;
	sb->hooks = o->hooks;
	sb->arg = o->arg;
	sb->container = o->container;
	sb->move_off_loop = o->move_off_loop;
	sb->fd_shares = o->fd_shares;
	sb->pid = -1;
	sb->pidfd = sb->ctl = sb->sync_wr = sb->rootfd = sb->scratchfd = sb->upperfd = sb->ptyfd = -1;
	/* before the environment: it names the CA and holds the placeholders */
	sb->tls = tlsbox_new(o->p, err);
	if (!sb->tls && err->code) {
		free(sb);
		return NULL;
	}
	/* the secrets' values stay outside: no view that holds their files */
	if (sb->tls && unseen_check(o->p, err) < 0) {
		tlsbox_free(sb->tls);
		free(sb);
		return NULL;
	}
	sb->envp = sandbox_env(o->p);
	if (sb->envp) {
		size_t n = 0;

		while (sb->envp[n])
			n++;
		if (tlsbox_env(sb->tls, &sb->envp, &n) < 0) {
			sandbox_env_free(sb->envp);
			sb->envp = NULL;
		}
	}
	if (!sb->envp) {
		corral_set_err(err, -ENOMEM, "out of memory building the environment");
		tlsbox_free(sb->tls);
		free(sb);
		return NULL;
	}
	/* which host ids: a range where the caller can, the agent's own */
	ns_plan_ids(o->p, &sb->ids);
	if (o->p->root_inside && root_inside_refused(o->p, &sb->ids, err) < 0) {
		sandbox_env_free(sb->envp);
		free(sb);
		return NULL;
	}
	idmap_prepare(o->p, &sb->ids, &sb->idmap);
	sb->host_uid = sb->ids.uid;
	sb->host_gid = sb->ids.gid;
	return sb;
}

/*
 * Init failed while we were still starting it: kill and reap it, and if
 * it said why, that is the error worth reporting, not the broken socket
 * we met.
 */
static void spawn_failed(struct sandbox *sb, struct corral_err *err)
{
	struct child_msg m;
	int fd;

	sandbox_kill(sb);
	/* a container's init is our parent's child: it reaps it */
	if (!sb->container)
		waitpid(sb->pid, NULL, 0);
	sb->pid = -1;
	while (sb->ctl >= 0 && child_msg_recv(sb->ctl, &m, &fd) > 0) {
		cleanup_closep(&fd);
		if (m.kind == MSG_SETUP_FAILED) {
			corral_set_err(err, m.code ? m.code : -EIO, "%s", m.text);
			return;
		}
	}
}

/*
 * After "c": with tripwires, the command waits for "t" (answered on
 * READY); a container's for "s" (sandbox_release).
 */
static bool keeps_sync(const struct sandbox *sb)
{
	return sb->p->abort.ntripwires || sb->container;
}

/* "c" told: init goes on to its mounts and its command (or calls). */
static int tell_in_group(struct sandbox *sb, int sync_wr, int *fds, int n,
			 struct corral_err *err)
{
	/* "n": no group after all (a one-shot's is planned after the clone) */
	ssize_t sent = fd_send(sync_wr, cg_mode(sb->cg) == CG_NONE ? "n" : "c",
			       1, fds, (size_t)n, MSG_NOSIGNAL);

	if (sent != 1)
		return corral_set_errno(err, sent < 0 ? (int)-sent : EIO,
					"cannot start the sandbox");
	return 0;
}

/*
 * The mover has moved init in, or killed it: its end reaches the front
 * end as any init's death does, and start_err says why.
 */
static void init_moved(void *arg, int r, const char *msg)
{
	struct sandbox *sb = arg;
	struct corral_err err;

	sb->mv = NULL;
	if (r < 0) {
		snprintf(sb->start_err, sizeof(sb->start_err), "%s", msg);
	} else if (tell_in_group(sb, sb->sync_wr, NULL, 0, &err) < 0) {
		sandbox_kill(sb);	/* init is gone, or will be */
	}
	if (!keeps_sync(sb))
		cleanup_closep(&sb->sync_wr);
}

/*
 * Into the cgroup: init moves itself in with fds (cg_entry_fds: no RCU
 * grace period that way), or is moved: here, or by the mover (then "c"
 * waits for it: *deferred).
 */
static int enter_group(struct sandbox *sb, int *fds, int *n, bool *deferred,
		       struct corral_err *err)
{
	int r;

	*deferred = false;
	*n = cg_entry_fds(sb->cg, fds, FD_SEND_MAX, err);
	if (*n != -ENOTSUP)
		return *n < 0 ? *n : 0;
	*n = 0;
	if (!sb->move_off_loop)
		return cg_attach(sb->cg, sb->pid, err);
	r = cg_move_start(sb->base, sb->cg, sb->pid, sb->pidfd, init_moved, sb,
			  &sb->mv, err);
	*deferred = r == 1;
	return r < 0 ? r : 0;
}

/*
 * "g": identity given, build the mounts.  "c": in the cgroup now, or with
 * fds to move itself in.
 */
static int start(struct sandbox *sb, int *sync_wr, struct corral_err *err)
{
	int fds[FD_SEND_MAX], n = 0, r;
	bool deferred = false;

	r = ns_write_id_maps(sb->pid, &sb->ids, err);
	/* before "g": every process init forks inherits it */
	if (r == 0)
		r = oom_prefer_sandbox(sb->pid, err);
	if (r == 0)
		r = mount_stack_root(sb->pid, sb->p, sb->host_uid, sb->host_gid, err);
	/*
	 * The supervisor's listeners live in the sandbox's netns: init opens
	 * them there as soon as it has made it, while we wrote its maps and
	 * mount root, and hands them over (proxy_listeners_send).
	 */
	if (r == 0 && sb->p->net == CORRAL_NET_PROXY)
		r = proxy_start(sb->base, *sync_wr, sb->p, sb->fd_shares, sb->ev,
				sb->tls, &sb->px, err);
	if (r == 0 && send(*sync_wr, "g", 1, MSG_NOSIGNAL) != 1)
		r = corral_set_errno(err, errno, "cannot start the sandbox");
	/* a one-shot run's group is made now, while the mounts are built */
	if (r == 0)
		r = cg_make(sb->cg, err);
	if (r == 0)
		r = enter_group(sb, fds, &n, &deferred, err);
	if (r == 0)
		r = watch(sb, err);
	if (r == 0 && !deferred)
		r = tell_in_group(sb, *sync_wr, fds, n, err);
	while (n)
		close(fds[--n]);
	if (r == 0 && (deferred || keeps_sync(sb)))
		sb->sync_wr = steal_fd(sync_wr);
	return r;
}

/*
 * Sockets, not pipes: a write to a sandbox that died is EPIPE, not
 * SIGPIPE; ctl carries whole messages, and fds as SCM_RIGHTS.
 */
static int open_sockets(struct sandbox *sb, int *sync_rd, int *sync_wr,
			int *ctl_child, struct corral_err *err)
{
	int sync[2], ctl[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sync) < 0)
		return corral_set_errno(err, errno, "cannot make the sandbox's "
				      "sync socket");
	*sync_rd = sync[0];
	*sync_wr = sync[1];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) < 0)
		return corral_set_errno(err, errno, "cannot make the sandbox's "
				      "control socket");
	sb->ctl = ctl[0];
	*ctl_child = ctl[1];
	return 0;
}

/*
 * A seccomp filter is in force on us (Seccomp: 2): one may deny new
 * namespaces, as every corral sandbox's does.  corral run inside one was
 * told "user namespaces disabled?", which sends a user to the sysctl.
 */
static bool under_seccomp_filter(void)
{
	char buf[4096];
	const char *v;

	if (proc_self_status(buf, sizeof(buf)) < 0)
		return false;
	v = proc_status_value(buf, "Seccomp");
	return v && *v == '2';
}

/* init's clone, on this thread or the launcher's */
struct init_clone {
	unsigned long flags;
	int *pidfd;
	struct corral_ids *ids;
};

static pid_t clone_init(void *arg)
{
	struct init_clone *ic = arg;

	return ns_clone_owned(ic->flags, ic->pidfd, ic->ids);
}

static void run_init(void *c)
{
	sandbox_child(c);
}

int sandbox_spawn(struct sandbox **out, const struct sandbox_opts *o,
		  struct corral_err *err)
{
	cleanup_close int in = o->stdio[0], outw = o->stdio[1], errw = o->stdio[2];
	cleanup_close int sync_rd = -1, sync_wr = -1, ctl_child = -1;
	struct sandbox *sb;
	rlim_t nofile_cap = 0, nofile = 0;
	struct child_ctx c;
	struct init_clone ic;
	bool new_net = true;
	int r;

	*out = NULL;
	/* an OCI container's rlimits are its engine's (process.rlimits) */
	if (!o->container && (r = sandbox_nofile_cap(o->p, &nofile_cap, &nofile, err)) < 0)
		return r;
	if (o->container && o->net_fd >= 0) {
		if (o->p->net == CORRAL_NET_PROXY)
			return corral_set_err(err, -EINVAL, "the egress proxy needs the "
					      "sandbox's own network namespace, not a "
					      "joined one");
		if (setns(o->net_fd, CLONE_NEWNET) < 0)
			return corral_set_errno(err, errno, "cannot join the network "
						"namespace");
		/*
		 * A pod's netns gets the bound of socket options a sandbox's
		 * own gets (net.c), because they are host memory no cgroup
		 * is charged for all the same, and the pod's other
		 * containers are this runtime's too.  Not TIME_WAIT's: on
		 * a real network that bound changes TCP.  Best effort, as
		 * there: a netns we have no rights in keeps its values.
		 */
		net_bound_uncharged(true);
		new_net = false;
	}
	sb = sandbox_new(o, err);
	if (!sb)
		return err->code;
	sb->nofile = nofile;
	r = open_sockets(sb, &sync_rd, &sync_wr, &ctl_child, err);
	if (r < 0)
		goto fail;
	c = (struct child_ctx){
		.p = o->p, .argv = o->argv, .envp = sb->envp,
		.tls_ca_pem = sb->tls ? sb->tls->ops->ca_pem(sb->tls->ca) : NULL,
		.caller_root = geteuid() == 0,
		.subid_maps = !strcmp(sb->ids.mapping, "subuid"),
		.serve = !o->argv,
		.send_upper = o->want_upper && o->p->workspace,
		.idmap = &sb->idmap,
		.sync_rd = sync_rd, .msg_wr = ctl_child,
		.stdio = { in, outw, errw },
		.tty = o->tty, .winsize = o->winsize,
		.container = o->container, .hostname = o->hostname,
		.rlimits = o->rlimits, .nrlimits = o->nrlimits,
		.joined_net = !new_net,
		.nofile_cap = nofile_cap,
	};
	ic = (struct init_clone){ .flags = SANDBOX_NS | CLONE_PIDFD | SIGCHLD |
				  (o->container ? CLONE_PARENT : 0),
				  .pidfd = &sb->pidfd, .ids = &sb->ids };
	/* the launcher's filling under init's chain (launcher.c); not a container's */
	if (o->container || !launcher_clone(clone_init, &ic, run_init, &c, &sb->pid))
		sb->pid = clone_init(&ic);
	if (sb->pid < 0) {
		int e = errno;

		r = corral_set_err(err, -e, "cannot create the namespaces: %s%s",
				   strerror(e), e == EPERM && under_seccomp_filter() ?
				   " (this process is under a seccomp filter, which may deny "
				   "them: inside a sandbox, corral's own too, corral cannot "
				   "make another)" : e == EPERM || e == ENOSPC ?
				   " (user namespaces disabled? see `corral doctor`)" : "");
		goto fail;
	}
	if (sb->pid == 0)
		sandbox_child(&c);
	/* init's ends: ours closed now, so that its death is our EOF */
	cleanup_closep(&sync_rd);
	cleanup_closep(&ctl_child);
	cleanup_closep(&in);
	cleanup_closep(&outw);
	cleanup_closep(&errw);
	idmap_close(&sb->idmap);	/* init has its copies */
	r = start(sb, &sync_wr, err);
	if (r < 0) {
		spawn_failed(sb, err);
		goto fail;
	}
	*out = sb;
	return 0;
fail:
	sandbox_free(sb);
	return r;
}
