/*
 * sandbox.c - build a sandbox, run one command in it, explain how it ended.
 *
 * The supervisor (the caller of corral_run) stays outside every namespace.
 * It clones the sandbox's first process into new user, mount, pid, net, ipc
 * and uts namespaces, gives it its identity and its cgroup, then lets it go.
 * That process builds the boundary in this order, top to bottom in
 * sandbox_init(): identity -> cgroup namespace -> mounts and pivot ->
 * loopback -> rlimits -> Landlock -> capabilities -> seccomp -> exec.
 * It then stays as PID 1: it reaps, forwards signals, and reports the
 * command's end to the supervisor over a pipe the command never sees.
 */
#include "internal.h"
#include "sandbox.h"
#include "events.h"
#include "proxy.h"
#include "egress.h"
#include "sensor.h"
#include "abort.h"
#include "tripwire.h"

#include <event2/event.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

#define DRAIN_MS 2000	/* how long to wait for output after the end */

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

struct supervise;

struct capture {
	int fd;
	struct corral_output *out;
	uint64_t cap;
	struct event *ev;
	struct supervise *s;
};

struct supervise {
	struct event_base *base;
	struct cg *cg;
	int pidfd;
	pid_t pid;
	int msg_rd;
	int sigfd;
	struct capture out, err;
	struct event *ev_exit, *ev_msg, *ev_sig, *ev_deadline, *ev_drain;
	uint64_t timeout_ms;
	bool timed_out;
	bool exited;
	struct child_msg setup;	/* MSG_SETUP_FAILED / MSG_EXEC_FAILED, if any */
	bool have_status;
	int status;		/* the command's wait status */
	int landlock_abi;
	struct events *ev;
	struct sensor *sensor;	/* denied syscalls, if USER_NOTIF works */
	const struct corral_policy *p;
	uint64_t t0;
	struct abort_state *abort;
	struct event *ev_usage;	/* CPU and wall budgets, polled */
	struct tripwire *tripwire;
	int rootfd;		/* the sandbox's "/", for the tripwires */
	int sync_wr;		/* "t" once the tripwires are watched */
	bool halted;		/* an abort criterion was met */
	bool halt_killed;
	bool halt_held;		/* on_abort "freeze": held until timeout/signal */
	bool halt_frozen;
	char halt_reason[CORRAL_ERR_MAX];
};

static void drop_event(struct event **ev)
{
	if (*ev)
		event_free(*ev);
	*ev = NULL;
}

/* Done when the command is gone and every pipe from the sandbox is closed. */
static void maybe_done(struct supervise *s)
{
	if (s->exited && s->msg_rd < 0 && s->out.fd < 0 && s->err.fd < 0)
		event_base_loopbreak(s->base);
}

/* Keep up to cap bytes; read and drop the rest so the writer never blocks. */
static void on_capture(evutil_socket_t fd, short what, void *arg)
{
	struct capture *cp = arg;
	char buf[65536];
	ssize_t n = read(fd, buf, sizeof(buf));

	(void)what;
	if (n <= 0) {
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			return;
		drop_event(&cp->ev);
		close(cp->fd);
		cp->fd = -1;
		maybe_done(cp->s);
		return;
	}
	size_t room = cp->out->len < cp->cap ? cp->cap - cp->out->len : 0;
	size_t take = (size_t)n < room ? (size_t)n : room;

	if (take) {
		char *grown = realloc(cp->out->data, cp->out->len + take + 1);

		if (!grown) {
			cp->out->truncated = true;
			return;
		}
		memcpy(grown + cp->out->len, buf, take);
		cp->out->len += take;
		grown[cp->out->len] = '\0';
		cp->out->data = grown;
	}
	if (take < (size_t)n)
		cp->out->truncated = true;
}

static void on_tripwire(void *arg, const char *path, pid_t pid, const char *how,
			const char *group)
{
	struct supervise *s = arg;

	(void)group;	/* one run, one call */
	events_emit(s->ev, "tripwire", json_pack("{s:s, s:i, s:s, s:s}", "path", path,
		    "pid", (int)pid, "how", how, "reason",
		    "a decoy file planted by the policy was touched"));
}

static void watch_tripwires(struct supervise *s)
{
	struct corral_err err = { 0 };

	const char *over = NULL;

	for (size_t i = 0; i < s->p->abort.ntripwires && !over; i++)
		over = tripwire_bind_over(s->p, s->p->abort.tripwires[i]);
	if (over)
		corral_set_err(&err, -EINVAL, "a tripwire lies under the bind on %s", over);
	else if (s->rootfd < 0)
		corral_set_err(&err, -EBADF, "the sandbox sent no root to watch in");
	else
		s->tripwire = tripwire_start_at(s->base, s->rootfd,
				(const char *const *)s->p->abort.tripwires,
				s->p->abort.ntripwires, 0, on_tripwire, s, &err);
	close_fd(&s->rootfd);
	events_emit(s->ev, "tripwire.armed", json_pack("{s:s, s:i, s:s}",
		    "mode", s->tripwire ? tripwire_mode(s->tripwire) : "none",
		    "files", (int)s->p->abort.ntripwires,
		    "detail", s->tripwire ? "" : err.msg));
}

static void on_msg(evutil_socket_t fd, short what, void *arg)
{
	struct supervise *s = arg;
	struct child_msg m;
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &m, sizeof(m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	ssize_t n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	struct cmsghdr *cm;

	(void)what;
	cm = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL;
	if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
		int nfd;

		memcpy(&nfd, CMSG_DATA(cm), sizeof(int));
		if (n == sizeof(m) && m.kind == MSG_NOTIFY_FD && !s->sensor)
			s->sensor = sensor_start(s->base, nfd, s->ev);
		else if (n == sizeof(m) && m.kind == MSG_ROOT_FD && s->rootfd < 0)
			s->rootfd = nfd;
		else
			close(nfd);	/* one of each, and nothing else */
		return;
	}
	if (n != sizeof(m)) {
		if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
			drop_event(&s->ev_msg);
			close(s->msg_rd);
			s->msg_rd = -1;
			maybe_done(s);
		}
		return;
	}
	switch (m.kind) {
	case MSG_READY:
		s->landlock_abi = m.landlock_abi;
		if (s->sync_wr >= 0) {
			watch_tripwires(s);
			/* armed or not (then said in an event), the command may start */
			if (send(s->sync_wr, "t", 1, MSG_NOSIGNAL) != 1) {
				/* the sandbox is gone: its exit is handled elsewhere */
			}
			close(s->sync_wr);
			s->sync_wr = -1;
		}
		break;
	case MSG_SETUP_FAILED:
	case MSG_EXEC_FAILED:
		s->setup = m;
		break;
	case MSG_EXITED:
		s->have_status = true;
		s->status = m.code;
		break;
	}
}

static void kill_tree(struct supervise *s)
{
	/* PID 1 dying takes every process of the namespace with it. */
	syscall(SYS_pidfd_send_signal, s->pidfd, SIGKILL, NULL, 0);
	cg_kill(s->cg);
}

/*
 * The policy's decision, carried out: freeze first (nothing runs, the
 * evidence stays), record, then kill or hold frozen as the policy says.
 */
static void halt(struct supervise *s, struct abort_verdict *v)
{
	struct corral_err err;
	bool kill_now = s->p->abort.kill;

	s->halted = true;
	snprintf(s->halt_reason, sizeof(s->halt_reason), "%s", v->reason);
	s->halt_frozen = cg_freeze(s->cg, true, &err) == 0;
	events_emit(s->ev, "abort", json_pack("{s:s, s:s, s:o, s:s, s:b}",
		    "criterion", v->criterion, "reason", v->reason,
		    "evidence", v->evidence ? v->evidence : json_null(),
		    "on_abort", kill_now ? "kill" : "freeze",
		    "frozen", s->halt_frozen));
	v->evidence = NULL;
	/* Without a freezer there is nothing to hold: it is killed. */
	if (kill_now || !s->halt_frozen) {
		s->halt_killed = true;
		kill_tree(s);
	} else {
		s->halt_held = true;
	}
	events_emit(s->ev, "halt", json_pack("{s:s, s:s}", "reason", v->reason,
		    "state", s->halt_killed ? "killed" : "frozen, held until the "
		    "timeout or a signal to corral"));
}

static void on_event(void *arg, const char *type, json_t *event)
{
	struct supervise *s = arg;
	struct abort_verdict v = { 0 };

	if (!s->halted && abort_note(s->abort, type, event, &v))
		halt(s, &v);
}

static void on_usage(evutil_socket_t fd, short what, void *arg)
{
	struct supervise *s = arg;
	struct abort_verdict v = { 0 };
	struct cg_stats st = { 0 };

	(void)fd;
	(void)what;
	if (s->halted || s->exited)
		return;
	cg_stats(s->cg, &st);
	if (abort_check_usage(s->abort, corral_now_ms() - s->t0, st.cpu_ns / 1000000,
			      st.valid, &v))
		halt(s, &v);
}

static void on_drain_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct supervise *s = arg;

	(void)fd;
	(void)what;
	event_base_loopbreak(s->base);
}

static void on_exit_ready(evutil_socket_t fd, short what, void *arg)
{
	struct supervise *s = arg;
	struct timeval drain = { DRAIN_MS / 1000, (DRAIN_MS % 1000) * 1000 };

	(void)fd;
	(void)what;
	s->exited = true;
	drop_event(&s->ev_exit);
	drop_event(&s->ev_deadline);
	drop_event(&s->ev_sig);
	/* Output still in the pipes is read, but not forever. */
	s->ev_drain = evtimer_new(s->base, on_drain_timeout, s);
	if (!s->ev_drain || evtimer_add(s->ev_drain, &drain) < 0)
		event_base_loopbreak(s->base);
	maybe_done(s);
}

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct supervise *s = arg;

	(void)fd;
	(void)what;
	if (s->halted) {	/* held frozen until now */
		s->halt_killed = true;
		kill_tree(s);
		return;
	}
	s->timed_out = true;
	events_emit(s->ev, "timeout", json_pack("{s:I, s:s}", "limit_ms",
		    (json_int_t)s->timeout_ms, "reason", "the run's wall-clock "
		    "timeout was reached: everything in the sandbox is killed"));
	kill_tree(s);
}

static void on_signal(evutil_socket_t fd, short what, void *arg)
{
	struct supervise *s = arg;
	struct signalfd_siginfo si;

	(void)what;
	if (read(fd, &si, sizeof(si)) != sizeof(si))
		return;
	if (s->halted) {	/* a person ends the hold */
		s->halt_killed = true;
		kill_tree(s);
		return;
	}
	kill(s->pid, si.ssi_signo);
}

static int add_fd_event(struct supervise *s, struct event **ev, int fd,
			event_callback_fn cb, void *arg, struct corral_err *err)
{
	if (fd < 0)
		return 0;
	*ev = event_new(s->base, fd, EV_READ | EV_PERSIST, cb, arg);
	if (!*ev || event_add(*ev, NULL) < 0)
		return corral_set_err(err, -ENOMEM, "cannot watch the sandbox's fds");
	return 0;
}

static int supervise_start(struct supervise *s, struct corral_err *err)
{
	int r;

	r = add_fd_event(s, &s->ev_exit, s->pidfd, on_exit_ready, s, err);
	if (r == 0)
		r = add_fd_event(s, &s->ev_msg, s->msg_rd, on_msg, s, err);
	if (r == 0)
		r = add_fd_event(s, &s->out.ev, s->out.fd, on_capture, &s->out, err);
	if (r == 0)
		r = add_fd_event(s, &s->err.ev, s->err.fd, on_capture, &s->err, err);
	if (r == 0)
		r = add_fd_event(s, &s->ev_sig, s->sigfd, on_signal, s, err);
	if (r == 0 && (s->p->abort.max_cpu_ms || s->p->abort.max_wall_ms)) {
		s->ev_usage = event_new(s->base, -1, EV_PERSIST, on_usage, s);
		struct timeval tick = { 0, 250 * 1000 };

		if (!s->ev_usage || event_add(s->ev_usage, &tick) < 0)
			r = corral_set_err(err, -ENOMEM, "cannot watch the budgets");
	}
	if (r == 0 && s->timeout_ms) {
		struct timeval tv = { s->timeout_ms / 1000, (s->timeout_ms % 1000) * 1000 };

		s->ev_deadline = evtimer_new(s->base, on_deadline, s);
		if (!s->ev_deadline || evtimer_add(s->ev_deadline, &tv) < 0)
			r = corral_set_err(err, -ENOMEM, "cannot arm the timeout");
	}
	return r;
}

static void supervise_stop(struct supervise *s)
{
	drop_event(&s->ev_exit);
	drop_event(&s->ev_msg);
	drop_event(&s->ev_sig);
	drop_event(&s->ev_deadline);
	drop_event(&s->ev_drain);
	drop_event(&s->ev_usage);
	drop_event(&s->out.ev);
	drop_event(&s->err.ev);
}

static void describe(struct corral_result *res, const struct supervise *s,
		     const struct corral_policy *p, const struct cg_stats *st,
		     const char *cmd)
{
	char size[32];
	int status = s->status;

	if (s->halted) {
		res->status = CORRAL_HALTED;
		res->signal = SIGKILL;
		snprintf(res->reason, sizeof(res->reason), "halted: %.300s; %s", s->halt_reason,
			 s->halt_frozen ? (s->halt_held ?
			 "the sandbox was held frozen, then killed" :
			 "the sandbox was frozen, then killed") :
			 "the sandbox was killed (no freezer to hold it)");
		return;
	}
	if (s->timed_out) {
		res->status = CORRAL_TIMEOUT;
		res->signal = SIGKILL;
		snprintf(res->reason, sizeof(res->reason),
			 "killed: wall-clock timeout of %.3g s reached",
			 p->timeout_ms / 1000.0);
		return;
	}
	if (s->setup.kind == MSG_EXEC_FAILED) {
		int e = s->setup.code;

		res->status = CORRAL_EXITED;
		res->exit_code = (e == ENOENT || e == ENOTDIR) ? 127 : 126;
		snprintf(res->reason, sizeof(res->reason), "%s: %s: %s",
			 res->exit_code == 127 ? "not found" : "cannot execute",
			 cmd, strerror(e));
		return;
	}
	if (!s->have_status)	/* PID 1 itself died: only a kill does that */
		status = W_EXITCODE(0, SIGKILL);

	if (WIFSIGNALED(status)) {
		res->status = CORRAL_SIGNALED;
		res->signal = WTERMSIG(status);
		snprintf(res->reason, sizeof(res->reason), "killed by signal %d (SIG%s)",
			 res->signal, sigabbrev_np(res->signal) ?: "?");
	} else {
		res->status = CORRAL_EXITED;
		res->exit_code = WEXITSTATUS(status);
		snprintf(res->reason, sizeof(res->reason), "exited with status %d",
			 res->exit_code);
	}

	if (st->oom_kills) {
		corral_format_size(p->memory_bytes, size, sizeof(size));
		res->status = CORRAL_OOM;
		snprintf(res->reason, sizeof(res->reason),
			 "killed: memory limit %s reached (%llu process%s killed by the OOM killer)",
			 size, (unsigned long long)st->oom_kills,
			 st->oom_kills == 1 ? "" : "es");
	} else if (st->pids_max_hits) {
		char tail[CORRAL_ERR_MAX];

		memcpy(tail, res->reason, sizeof(tail));
		res->status = CORRAL_PIDS_LIMIT;
		snprintf(res->reason, sizeof(res->reason),
			 "pids limit %llu reached: %llu fork%s refused; the command %.200s",
			 (unsigned long long)p->pids,
			 (unsigned long long)st->pids_max_hits,
			 st->pids_max_hits == 1 ? " was" : "s were", tail);
	}
}

/*
 * The sandbox failed before it could be started: if it said why, that is
 * the error worth reporting, not the broken pipe we met.
 */
static void child_reason(int msg_rd, struct corral_err *err)
{
	struct child_msg m;

	while (msg_rd >= 0 && recv(msg_rd, &m, sizeof(m), MSG_DONTWAIT) == sizeof(m)) {
		if (m.kind == MSG_SETUP_FAILED) {
			m.text[sizeof(m.text) - 1] = '\0';
			corral_set_err(err, m.code ? m.code : -EIO, "%s", m.text);
			return;
		}
	}
}

static int validate(const struct corral_policy *p, const struct corral_run_opts *o,
		    struct corral_err *err)
{
	struct stat st;

	if (!o->argv || !o->argv[0] || !o->argv[0][0])
		return corral_set_err(err, -EINVAL, "no command to run");
	if (p->disk_bytes == 0)
		return corral_set_err(err, -EINVAL, "limits.disk must be > 0");
	if (p->workspace) {
		if (stat(p->workspace, &st) < 0)
			return corral_set_err(err, -errno, "workspace %s: %s",
					      p->workspace, strerror(errno));
		if (!S_ISDIR(st.st_mode))
			return corral_set_err(err, -ENOTDIR, "workspace %s: not a directory",
					      p->workspace);
	}
	return 0;
}

static int open_pipes(int sync[2], int msg[2], int out[2], int errp[2],
		      bool capture, struct corral_err *err)
{
	/* msg is a socket: the seccomp listener travels on it as SCM_RIGHTS */
	/* sockets, not pipes: a write to a sandbox that died is EPIPE, not SIGPIPE */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sync) < 0 ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, msg) < 0)
		return corral_set_err(err, -errno, "pipe: %s", strerror(errno));
	if (capture && (pipe2(out, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0))
		return corral_set_err(err, -errno, "pipe: %s", strerror(errno));
	return 0;
}

static int block_signals(bool forward, sigset_t *old, int *sigfd,
			 struct corral_err *err)
{
	sigset_t set;

	*sigfd = -1;
	if (!forward)
		return 0;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGQUIT);
	if (sigprocmask(SIG_BLOCK, &set, old) < 0)
		return corral_set_err(err, -errno, "sigprocmask: %s", strerror(errno));
	*sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (*sigfd < 0) {
		int e = errno;

		sigprocmask(SIG_SETMASK, old, NULL);
		return corral_set_err(err, -e, "signalfd: %s", strerror(e));
	}
	return 0;
}

int corral_run(const struct corral_policy *p, const struct corral_run_opts *o,
	       struct corral_result *res, struct corral_err *err)
{
	int sync[2] = { -1, -1 }, msg[2] = { -1, -1 };
	int out[2] = { -1, -1 }, errp[2] = { -1, -1 };
	struct supervise s = { .pidfd = -1, .msg_rd = -1, .sigfd = -1, .sync_wr = -1,
				.rootfd = -1 };
	struct events *ev = NULL;
	struct proxy *px = NULL;
	struct cg_stats st = { 0 };
	struct child_ctx c = { 0 };
	struct rusage ru = { 0 };
	struct cg *cg = NULL;
	char name[64];
	sigset_t oldmask;
	uint64_t t0 = corral_now_ms();
	uid_t host_uid;
	gid_t host_gid;
	int r, ws = 0;

	memset(res, 0, sizeof(*res));
	res->status = CORRAL_ERROR;
	err->code = 0;
	err->msg[0] = '\0';

	r = validate(p, o, err);
	if (r < 0)
		goto fail;
	c.envp = sandbox_env(p);
	if (!c.envp) {
		r = corral_set_err(err, -ENOMEM, "out of memory building the environment");
		goto fail;
	}
	ns_pick_ids(p, &host_uid, &host_gid);
	cg_cleanup_stale();
	snprintf(name, sizeof(name), "%d-%llu", getpid(),
		 (unsigned long long)(t0 ^ ((uint64_t)rand() << 20)));
	snprintf(res->sandbox_id, sizeof(res->sandbox_id), "%s", name);
	s.base = event_base_new();
	if (!s.base) {
		r = corral_set_err(err, -ENOMEM, "cannot create an event loop");
		goto fail;
	}
	r = events_open(&ev, o->events_path, name, err);
	if (r < 0)
		goto fail;
	snprintf(res->tool_call, sizeof(res->tool_call), "%s",
		 o->tool_call ? o->tool_call : name);
	if (events_set_call(ev, res->tool_call) < 0) {
		r = corral_set_err(err, -ENOMEM, "out of memory");
		goto fail;
	}
	if (abort_any(&p->abort)) {
		s.abort = abort_new(&p->abort);
		if (!s.abort) {
			r = corral_set_err(err, -ENOMEM, "out of memory");
			goto fail;
		}
		events_set_hook(ev, on_event, &s);
	}
	r = cg_create(&cg, name, p, 0, err);
	if (r < 0)
		goto fail;
	r = open_pipes(sync, msg, out, errp, o->capture, err);
	if (r < 0)
		goto fail;
	r = block_signals(o->forward_signals, &oldmask, &s.sigfd, err);
	if (r < 0)
		goto fail;

	c.p = p;
	c.argv = o->argv;
	c.caller_root = geteuid() == 0;
	c.cg_none = cg_mode(cg) == CG_NONE;
	c.sync_rd = sync[0];
	c.msg_wr = msg[1];
	c.out_wr = out[1];
	c.err_wr = errp[1];

	s.pid = syscall(SYS_clone, CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID |
			CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_PIDFD |
			SIGCHLD, NULL, &s.pidfd, NULL, 0);
	if (s.pid < 0) {
		r = corral_set_err(err, -errno, "cannot create the namespaces: %s%s",
				   strerror(errno), errno == EPERM || errno == ENOSPC ?
				   " (user namespaces disabled? see `corral doctor`)" : "");
		goto fail_signals;
	}
	if (s.pid == 0)
		sandbox_child(&c);

	close_fd(&sync[0]);
	close_fd(&msg[1]);
	close_fd(&out[1]);
	close_fd(&errp[1]);
	s.msg_rd = msg[0];
	s.out = (struct capture){ out[0], &res->out, p->output_bytes, NULL, &s };
	s.err = (struct capture){ errp[0], &res->err, p->output_bytes, NULL, &s };
	msg[0] = out[0] = errp[0] = -1;
	s.cg = cg;
	s.ev = ev;
	s.p = p;
	s.t0 = t0;
	s.timeout_ms = p->timeout_ms;

	/* "g": identity given, build the mounts; "c": now in the cgroup. */
	r = ns_write_id_maps(s.pid, host_uid, host_gid, err);
	/* The supervisor's listeners live in the sandbox's netns, not in it. */
	if (r == 0 && p->net == CORRAL_NET_PROXY)
		r = proxy_start(s.base, s.pid, p, ev, &px, err);
	if (r == 0 && send(sync[1], "g", 1, MSG_NOSIGNAL) != 1)
		r = corral_set_err(err, -errno, "cannot start the sandbox: %s",
				   strerror(errno));
	if (r == 0)
		r = cg_attach(cg, s.pid, err);
	if (r == 0)
		r = supervise_start(&s, err);
	if (r == 0 && send(sync[1], "c", 1, MSG_NOSIGNAL) != 1)
		r = corral_set_err(err, -errno, "cannot start the sandbox: %s",
				   strerror(errno));
	if (r == 0 && p->abort.ntripwires) {
		s.sync_wr = sync[1];	/* answered on READY */
		sync[1] = -1;
	}
	close_fd(&sync[1]);
	if (r < 0) {
		kill_tree(&s);
		wait4(s.pid, &ws, 0, &ru);
		child_reason(s.msg_rd, err);
		goto fail_signals;
	}

	events_emit(ev, "exec.start", json_pack("{s:i, s:s}", "pid", s.pid,
						"command", o->argv[0]));
	event_base_dispatch(s.base);
	if (!s.exited)
		kill_tree(&s);
	wait4(s.pid, &ws, 0, &ru);
	cg_stats(cg, &st);

	if (s.setup.kind == MSG_SETUP_FAILED) {
		r = corral_set_err(err, s.setup.code, "%s", s.setup.text);
		goto fail_signals;
	}
	/* a fresh group: what its counters say all happened in this run */
	events_limit_hits(ev, NULL, &(struct cg_stats){ .valid = true }, &st, p, false);
	describe(res, &s, p, &st, o->argv[0]);
	{
		json_t *d = events_denials(ev);

		events_explain_denials(res, d, json_array_size(d), p);
		json_decref(d);
	}
	res->duration_ms = corral_now_ms() - t0;
	res->cpu_ms = st.valid ? st.cpu_ns / 1000000 :
		(uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
		(uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
	res->max_rss_kb = ru.ru_maxrss;
	res->layers.landlock_abi = s.landlock_abi;
	res->layers.seccomp = true;
	res->layers.seccomp_notify = s.sensor != NULL;
	res->layers.limits = cg_mode_name(cg);
	events_emit(ev, "exec.end", json_pack("{s:s, s:i, s:i, s:s}",
		    "status", corral_status_name(res->status),
		    "exit_code", corral_result_exit_code(res),
		    "signal", res->signal, "reason", res->reason));
	r = 0;

fail_signals:
	supervise_stop(&s);
	if (s.sigfd >= 0) {
		close(s.sigfd);
		sigprocmask(SIG_SETMASK, &oldmask, NULL);
	}
fail:
	close_fd(&sync[0]);
	close_fd(&sync[1]);
	close_fd(&msg[0]);
	close_fd(&msg[1]);
	close_fd(&out[0]);
	close_fd(&out[1]);
	close_fd(&errp[0]);
	close_fd(&errp[1]);
	close_fd(&s.msg_rd);
	close_fd(&s.out.fd);
	close_fd(&s.err.fd);
	close_fd(&s.pidfd);
	sensor_free(s.sensor);
	tripwire_free(s.tripwire);
	close_fd(&s.sync_wr);
	close_fd(&s.rootfd);
	proxy_free(px);
	if (ev)
		events_set_hook(ev, NULL, NULL);
	abort_free(s.abort);
	if (ev) {
		json_t *d = events_denials(ev);

		res->denials = json_dumps(d, JSON_COMPACT | JSON_ENSURE_ASCII);
		json_decref(d);
	}
	events_close(ev);
	/* let libevent finish what freeing the proxy deferred, then free it */
	if (s.base) {
		event_base_loop(s.base, EVLOOP_NONBLOCK);
		event_base_free(s.base);
	}
	cg_destroy(cg);
	sandbox_env_free(c.envp);
	if (r < 0) {
		res->status = CORRAL_ERROR;
		snprintf(res->reason, sizeof(res->reason), "%s", err->msg);
	}
	return r;
}

void corral_result_free(struct corral_result *res)
{
	free(res->out.data);
	free(res->err.data);
	free(res->denials);
	res->out.data = res->err.data = NULL;
	res->denials = NULL;
}
