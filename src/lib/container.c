/*
 * container.c - an OCI container's monitor: the supervisor's half of a
 * sandbox whose front end (`corral oci create`) exits at once.
 *
 * The runtime spec splits a container's birth in two: `create` leaves
 * init waiting, `start` lets its process run.  The CLI forks the monitor,
 * which spawns the sandbox (sandbox_spawn, opts.container: init becomes
 * the CLI's child and so, once the CLI exits, the engine's shim's),
 * tells the CLI "created PID" once init waits, then serves the verbs
 * that need what it holds (the cgroup, init's sync socket, the pidfd) on
 * a unix socket of the state directory, one request a connection, until
 * init exits.  The proxy, the seccomp sensor and the tripwires live here
 * as they do under corral run.
 */
#include "internal.h"
#include "sandbox.h"
#include "fdpass.h"
#include "events.h"
#include "sensor.h"
#include "container_stats.h"

#include <event2/event.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#define CTL_REQ_MAX	256
#define CTL_REPLY_MAX	16384	/* "stats": runc's document, ~3 KB */
#define CTL_TIMEOUT_S	10	/* a freeze may take the kernel 2 s */
/*
 * "ps": one answer of every pid, " 4194303" (pid_max's 7 digits) each at
 * most, some 16,000 of them; the socket's buffer is raised to carry it.
 */
#define PS_REPLY_MAX	(128 << 10)
#define PS_TRIES	4	/* counts a group still forking may outgrow */
#define EXEC_SENSORS_MAX 64	/* exec'd processes at once whose denials are reported */

struct monitor {
	const struct corral_container_opts *o;
	struct corral_policy limits;	/* `update` changes these only */
	struct event_base *base;
	struct events *ev;
	struct cg *cg;
	struct sandbox *sb;
	int ready_fd;
	int console_fd;
	int listen_fd;
	struct event *ev_listen;
	bool started, paused, exited;
	struct stat pidns;		/* init's pid namespace: what "join" takes */
	/* the seccomp listeners of exec'd processes (container_exec.c) */
	struct sensor *sensors[EXEC_SENSORS_MAX];
	size_t nsensors;
};

static void drop_event(struct event **ev)
{
	if (*ev)
		event_free(*ev);
	*ev = NULL;
}

/* The CLI's `create` hears once: created, or why not. */
static void tell_ready(struct monitor *m, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void tell_ready(struct monitor *m, const char *fmt, ...)
{
	char line[CORRAL_ERR_MAX + 32];
	va_list ap;
	int n;

	if (m->ready_fd < 0)
		return;
	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n > 0 && write(m->ready_fd, line, (size_t)n < sizeof(line) ?
			   (size_t)n : sizeof(line) - 1) < 0) {
		/* the CLI is gone: it reports nothing, the shim sees it fail */
	}
	cleanup_closep(&m->ready_fd);
}

/*
 * The pty's master to the engine's console socket, as runc sends it,
 * with the size config.json asked for (0 0: none, the kernel's).
 */
static int send_console(int sock, int fd, unsigned short rows, unsigned short cols,
			struct corral_err *err)
{
	static const char name[] = "/dev/ptmx";
	struct winsize ws = { .ws_row = rows, .ws_col = cols };
	ssize_t n;

	if ((rows || cols) && ioctl(fd, TIOCSWINSZ, &ws) < 0)
		return corral_set_errno(err, errno, "cannot size the pty %ux%u",
					cols, rows);
	n = fd_send(sock, name, sizeof(name) - 1, &fd, 1, MSG_NOSIGNAL);
	if (n < 0)
		return corral_set_errno(err, (int)-n, "cannot send the pty to the "
					"console socket");
	return 0;
}

static void on_msg(void *arg, const struct child_msg *cm)
{
	struct monitor *m = arg;
	struct corral_err err = { 0 };

	switch (cm->kind) {
	case MSG_SETUP_FAILED:
		tell_ready(m, "error %s\n", cm->text);
		break;
	case MSG_PTY_FD:
		if (m->console_fd >= 0 && m->sb->ptyfd >= 0 &&
		    send_console(m->console_fd, m->sb->ptyfd, m->o->console_rows,
				 m->o->console_cols, &err) < 0)
			tell_ready(m, "error %s\n", err.msg);
		cleanup_closep(&m->sb->ptyfd);
		cleanup_closep(&m->console_fd);
		break;
	case MSG_READY:
		if (m->o->tty && m->console_fd >= 0) {
			tell_ready(m, "error init made no pty for the console\n");
			sandbox_kill(m->sb);
			break;
		}
		events_emit(m->ev, "container.created", json_pack("{s:i}", "pid",
			    (int)m->sb->pid));
		tell_ready(m, "created %d\n", (int)m->sb->pid);
		break;
	case MSG_EXEC_FAILED:
		events_emit(m->ev, "exec.failed", json_pack("{s:s, s:s}", "command",
			    m->o->argv[0], "reason", strerror(cm->code)));
		break;
	case MSG_EXITED:
		events_emit(m->ev, "exit", json_pack("{s:i}", "status", cm->code));
		break;
	}
}

static void on_closed(void *arg)
{
	struct monitor *m = arg;

	tell_ready(m, "error the container's init ended while it was being "
		   "created\n");
}

static void on_exited(void *arg)
{
	struct monitor *m = arg;

	m->exited = true;
	tell_ready(m, "error the container's init exited while it was being "
		   "created\n");
	event_base_loopbreak(m->base);
}

static const struct sandbox_hooks monitor_hooks = {
	.msg = on_msg, .closed = on_closed, .exited = on_exited,
};

/* ---- requests -------------------------------------------------------- */

static int signal_init(struct monitor *m, int sig, struct corral_err *err)
{
	if (syscall(SYS_pidfd_send_signal, m->sb->pidfd, sig, NULL, 0) == 0)
		return 0;
	/* exited, the loop not told yet: runc's words, which the shims match */
	if (errno == ESRCH)
		return corral_set_err(err, -ESRCH, "container not running");
	return corral_set_errno(err, errno, "cannot send signal %d to pid %d",
				sig, (int)m->sb->pid);
}

/*
 * Each pid the group lists, signalled; the group is frozen meanwhile,
 * where a freezer is usable.  Where none is, the group may grow between
 * the count and the list: cg_pids counts every pid but stores only as
 * many as fit, and those alone are signalled (what forks later is missed
 * either way, as with runc there).
 */
static int signal_listed(struct monitor *m, int sig, struct corral_err *err)
{
	ssize_t n = cg_pids(m->cg, NULL, 0);
	size_t room;
	pid_t *pids;
	int r = 0;

	if (n < 0)
		return corral_set_err(err, (int)n, "cannot list the container's "
				      "processes: %s", strerror((int)-n));
	room = (size_t)n + 1;
	pids = calloc(room, sizeof(pid_t));
	if (!pids)
		return corral_set_err(err, -ENOMEM, "out of memory for %zd pids", n);
	n = cg_pids(m->cg, pids, room);
	if (n < 0)
		r = corral_set_err(err, (int)n, "cannot list the container's "
				   "processes: %s", strerror((int)-n));
	else if ((size_t)n > room)
		n = (ssize_t)room;	/* the rest were counted, not stored */
	for (ssize_t i = 0; r == 0 && i < n; i++)
		if (kill(pids[i], sig) < 0 && errno != ESRCH)
			r = corral_set_errno(err, errno, "cannot send signal %d to "
					     "pid %d", sig, (int)pids[i]);
	free(pids);
	return r;
}

/*
 * Every process of the container, as runc does it: the group frozen while
 * its list is read and each pid signalled, so that none forks past the
 * list and no pid of it exits and is reused by a host process before its
 * kill(2) comes (a frozen task does not exit).  A container paused before
 * stays so, its signals pending.  A host with no freezer (-ENOTSUP) gets
 * the signals all the same, unfrozen, as runc's does.
 */
static int signal_all(struct monitor *m, int sig, struct corral_err *err)
{
	struct corral_err e2;
	bool frozen = false;
	int r;

	if (cg_mode(m->cg) == CG_NONE)	/* init's namespace is the container */
		return signal_init(m, sig, err);
	if (sig == SIGKILL) {
		cg_kill(m->cg);
		return 0;
	}
	if (!m->paused) {
		r = cg_freeze(m->cg, true, &e2);
		if (r < 0 && r != -ENOTSUP)
			return corral_set_err(err, e2.code, "cannot freeze the "
					      "container to signal all its "
					      "processes: %s", e2.msg);
		frozen = r == 0;
	}
	r = signal_listed(m, sig, err);
	if (frozen && cg_freeze(m->cg, false, &e2) < 0 && r == 0)
		r = corral_set_err(err, e2.code, "signalled, but cannot thaw the "
				   "container: %s", e2.msg);
	return r;
}

/*
 * The pids the group lists, all of them: counted, then listed into room
 * for more (it may fork in between), again while it outgrew the room.
 * The count in *n; the list, the caller's to free; NULL and err (-ENOTSUP:
 * no group) if not.
 */
static pid_t *group_pids(struct monitor *m, ssize_t *n, struct corral_err *err)
{
	pid_t *pids = NULL;
	size_t room;
	ssize_t got = cg_pids(m->cg, NULL, 0);

	for (int i = 0; got >= 0 && i < PS_TRIES; i++) {
		room = (size_t)got + 64 + (size_t)got / 8;
		free(pids);
		pids = calloc(room, sizeof(pid_t));
		if (!pids) {
			corral_set_err(err, -ENOMEM, "out of memory for %zd pids", got);
			return NULL;
		}
		got = cg_pids(m->cg, pids, room);
		if (got >= 0 && (size_t)got <= room) {
			*n = got;
			return pids;
		}
	}
	free(pids);
	if (got < 0)
		corral_set_err(err, (int)got, "cannot list the container's "
			       "processes: %s", strerror((int)-got));
	else
		corral_set_err(err, -EAGAIN, "cannot list the container's "
			       "processes: it forked faster than %d listings "
			       "could follow", PS_TRIES);
	return NULL;
}

/*
 * "ok PID..." of every process, as runc lists them, in *out (the
 * caller's to free).  Capped at 1000 before: a container of more hid
 * the rest from the engine's `ps` (`ctr task ps`, `podman top`), on
 * cgroup v1, which sorts the list, the newest of them.  Past what one
 * answer carries, an error, never a part of the list.
 */
static int list_pids(struct monitor *m, char **out, struct corral_err *err)
{
	ssize_t n = 0;
	pid_t *pids = NULL, one = m->sb->pid;
	size_t off, len;
	char *text;

	pids = group_pids(m, &n, err);
	if (!pids && err->code == -ENOTSUP) {	/* rlimits only: init is what we know of */
		pids = &one;
		n = 1;
	}
	if (!pids)
		return err->code;
	len = 3 + 12 * (size_t)n;
	text = malloc(len);
	if (!text) {
		if (pids != &one)
			free(pids);
		return corral_set_err(err, -ENOMEM, "out of memory for %zd pids", n);
	}
	off = snprintf(text, len, "ok");
	for (ssize_t i = 0; i < n; i++)
		off += snprintf(text + off, len - off, " %d", (int)pids[i]);
	if (pids != &one)
		free(pids);
	if (off >= PS_REPLY_MAX) {
		free(text);
		return corral_set_err(err, -E2BIG, "ps: %zd processes, more than "
				      "one answer of %d bytes lists", n, PS_REPLY_MAX);
	}
	*out = text;
	return 0;
}

static int update_limits(struct monitor *m, const char *args,
			 struct corral_err *err)
{
	unsigned long long mem, pids;
	double cpus;

	if (sscanf(args, "%llu %llu %lf", &mem, &pids, &cpus) != 3)
		return corral_set_err(err, -EINVAL, "update: bad request \"%s\"", args);
	if (mem)
		m->limits.memory_bytes = mem;
	if (pids)
		m->limits.pids = pids;
	if (cpus > 0)
		m->limits.cpus = cpus;
	return cg_set_limits(m->cg, &m->limits, err);
}

/* "ok OOM-KILLS {runc's types.Stats}" for `corral oci events` */
static int stats_reply(struct monitor *m, char *reply, size_t len,
		       struct corral_err *err)
{
	uint64_t oom = 0;
	json_t *doc = container_stats(m->cg, &oom, err);
	char *text;
	int n;

	if (!doc)
		return err->code;
	text = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	if (!text)
		return corral_set_err(err, -ENOMEM, "out of memory for the stats");
	n = snprintf(reply, len, "ok %llu %s", (unsigned long long)oom, text);
	free(text);
	if (n < 0 || (size_t)n >= len)
		return corral_set_err(err, -E2BIG, "stats: %d bytes, more than the "
				      "%zu a reply holds", n, len);
	return 0;
}

static const char *status_name(const struct monitor *m)
{
	return m->exited ? "stopped" : m->paused ? "paused" :
	       m->started ? "running" : "created";
}

/*
 * Init's pid namespace, noted while init surely lives: just cloned, its
 * parent the CLI, which waits for "created" and reaps nothing.
 */
static int note_pidns(struct monitor *m, struct corral_err *err)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)m->sb->pid);
	if (stat(path, &m->pidns) < 0)
		return corral_set_errno(err, errno, "cannot stat %s", path);
	return 0;
}

/*
 * An exec'd process into the container's group, only if it is in the
 * container's pid namespace.  Its CLI opened the namespaces by init's
 * pid; had init exited and been reaped, and the pid gone to a process of
 * another container, the process is in that one's namespaces, and this
 * loop, busy with another request when init exited, may hear the join
 * first (the listening socket ahead of init's pidfd in epoll's list):
 * taken in, its CLI let it run there.  In the container's pid namespace
 * it was cloned while init lived, so every namespace opened before was
 * init's.
 */
static int join(struct monitor *m, pid_t pid, struct corral_err *err)
{
	struct stat st;
	char path[64];
	int r;

	snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
	if (stat(path, &st) < 0)
		return corral_set_errno(err, errno, "join: cannot stat %s", path);
	if (st.st_dev != m->pidns.st_dev || st.st_ino != m->pidns.st_ino)
		return corral_set_err(err, -EPERM, "join: process %d is not in the "
				      "container's pid namespace", (int)pid);
	r = cg_attach(m->cg, pid, err);
	if (r == 0)
		events_emit(m->ev, "exec.join", json_pack("{s:i}", "pid", (int)pid));
	return r;
}

/*
 * The listeners of exec'd processes that have all exited: their slots go
 * to the next.  Kept, an engine's 64th exec (a probe every ten seconds
 * fills them in eleven minutes) left every later one's denied calls
 * unrecorded, though none of those 64 still ran.
 */
static void reap_sensors(struct monitor *m)
{
	size_t n = 0;

	for (size_t i = 0; i < m->nsensors; i++) {
		if (sensor_idle(m->sensors[i]))
			sensor_free(m->sensors[i]);
		else
			m->sensors[n++] = m->sensors[i];
	}
	m->nsensors = n;
}

/*
 * One request; the reply in reply ("ok ..."), or one too large for it in
 * *big (the caller's to free); err says why not.
 */
static int serve_request(struct monitor *m, const char *req, int *fd,
			 char *reply, size_t len, char **big,
			 struct corral_err *err)
{
	int sig, r;
	pid_t pid;

	snprintf(reply, len, "ok");
	if (!strcmp(req, "state")) {
		snprintf(reply, len, "ok %s %d", status_name(m), (int)m->sb->pid);
		return 0;
	}
	if (m->exited)
		return corral_set_err(err, -ESRCH, "container not running");
	if (!strcmp(req, "start")) {
		r = sandbox_release(m->sb, err);
		if (r == 0) {
			m->started = true;
			events_emit(m->ev, "exec.start", json_pack("{s:i, s:o}", "pid",
				    (int)m->sb->pid, "command", corral_json_bytes(m->o->argv[0],
				    strlen(m->o->argv[0]))));
		}
		return r;
	}
	if (!strcmp(req, "pause") || !strcmp(req, "resume")) {
		bool freeze = req[0] == 'p';

		r = cg_freeze(m->cg, freeze, err);
		if (r == 0) {
			m->paused = freeze;
			events_emit(m->ev, freeze ? "paused" : "resumed", NULL);
		}
		return r;
	}
	if (sscanf(req, "kill %d", &sig) == 1)
		return signal_init(m, sig, err);
	if (sscanf(req, "kill-all %d", &sig) == 1)
		return signal_all(m, sig, err);
	if (!strcmp(req, "ps"))
		return list_pids(m, big, err);
	if (!strcmp(req, "stats"))
		return stats_reply(m, reply, len, err);
	if (sscanf(req, "join %d", &pid) == 1)
		return join(m, pid, err);
	if (!strncmp(req, "update ", 7))
		return update_limits(m, req + 7, err);
	if (!strcmp(req, "notify")) {	/* an exec'd process's listener */
		if (*fd < 0)
			return corral_set_err(err, -EINVAL, "notify: no fd came with it");
		reap_sensors(m);
		if (m->nsensors == EXEC_SENSORS_MAX)
			return corral_set_err(err, -EMFILE, "notify: %d exec'd processes "
					      "are running and watched already",
					      EXEC_SENSORS_MAX);
		m->sensors[m->nsensors] = sensor_start(m->base, steal_fd(fd), m->ev, 0);
		if (!m->sensors[m->nsensors])
			return corral_set_err(err, -ENOMEM, "notify: cannot watch it");
		m->nsensors++;
		return 0;
	}
	return corral_set_err(err, -EINVAL, "unknown request \"%s\"", req);
}

/* One request, and the fd that may come with it (SCM_RIGHTS). */
static ssize_t recv_request(int cfd, char *req, size_t len, int *fd, int flags)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { req, len - 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm;
	ssize_t n = recvmsg(cfd, &mh, flags | MSG_CMSG_CLOEXEC);

	if (n <= 0)
		return n;
	cm = CMSG_FIRSTHDR(&mh);
	if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
	    cm->cmsg_len >= CMSG_LEN(sizeof(int)))
		memcpy(fd, CMSG_DATA(cm), sizeof(int));
	req[n] = '\0';
	return n;
}

/*
 * One datagram, whole: one past the socket's buffer (wmem_default, 208
 * KiB here) would fail, so a large one (ps) raises it first; one the
 * host still refuses is an error said in reply's place.
 */
static void send_reply(int cfd, const char *text, char *reply, size_t len)
{
	size_t n = strlen(text);
	int want = (int)n + 4096;

	if (n > CTL_REPLY_MAX)
		setsockopt(cfd, SOL_SOCKET, SO_SNDBUF, &want, sizeof(want));
	if (send(cfd, text, n, MSG_NOSIGNAL) == (ssize_t)n)
		return;
	if (errno != EMSGSIZE)
		return;		/* the client left: nothing to tell */
	snprintf(reply, len, "error an answer of %zu bytes: more than this "
		 "host's socket buffers take (net.core.wmem_max)", n);
	if (send(cfd, reply, strlen(reply), MSG_NOSIGNAL) < 0) {
		/* the client left: nothing to tell */
	}
}

static void on_request(evutil_socket_t fd, short what, void *arg)
{
	struct monitor *m = arg;
	struct corral_err err = { 0 };
	char req[CTL_REQ_MAX], reply[CTL_REPLY_MAX], *big = NULL;
	int cfd, passed = -1;
	ssize_t n;

	(void)what;
	cfd = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
	if (cfd < 0)
		return;
	/* a client that connects and says nothing is not waited for long */
	n = recv_request(cfd, req, sizeof(req), &passed, MSG_DONTWAIT);
	if (n < 0 && errno == EAGAIN) {
		struct timeval tv = { 1, 0 };

		setsockopt(cfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		n = recv_request(cfd, req, sizeof(req), &passed, 0);
	}
	if (n > 0) {
		if (serve_request(m, req, &passed, reply, sizeof(reply), &big, &err) < 0)
			snprintf(reply, sizeof(reply), "error %s", err.msg);
		send_reply(cfd, big ? big : reply, reply, sizeof(reply));
	}
	free(big);
	cleanup_closep(&passed);
	close(cfd);
}

/*
 * The address of the monitor's socket at path: the path itself, or where
 * it is longer than sun_path holds, its directory opened (*dirfd, the
 * caller's to close once bound or connected) and named through
 * /proc/self/fd.  Docker's state root for its runtime is <exec
 * root>/runtime-runc/moby, its ids 64 characters: <root>/<id>/ctl is 98
 * bytes under /run/docker and longer than 107 under a --exec-root of 21
 * characters or more (a private dockerd's under /tmp), where every
 * create failed.
 */
static int ctl_addr(const char *path, struct sockaddr_un *sa, int *dirfd,
		    struct corral_err *err)
{
	const char *base = strrchr(path, '/');
	char dir[PATH_MAX];

	*dirfd = -1;
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (strlen(path) < sizeof(sa->sun_path)) {
		strcpy(sa->sun_path, path);
		return 0;
	}
	if (!base || base == path || (size_t)(base - path) >= sizeof(dir))
		return corral_set_err(err, -ENAMETOOLONG, "socket path %s is too "
				      "long", path);
	memcpy(dir, path, base - path);
	dir[base - path] = '\0';
	*dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (*dirfd < 0)
		return corral_set_errno(err, errno, "the directory of the socket %s", path);
	if ((size_t)snprintf(sa->sun_path, sizeof(sa->sun_path), "/proc/self/fd/%d%s",
			     *dirfd, base) >= sizeof(sa->sun_path))
		return corral_set_err(err, -ENAMETOOLONG, "socket path %s: its name "
				      "is too long", path);
	return 0;
}

static int listen_ctl(struct monitor *m, struct corral_err *err)
{
	struct sockaddr_un sa;
	cleanup_close int dirfd = -1;

	if (ctl_addr(m->o->ctl_path, &sa, &dirfd, err) < 0)
		return err->code;
	m->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (m->listen_fd < 0)
		return corral_set_errno(err, errno, "socket");
	if (bind(m->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(m->listen_fd, 16) < 0)
		return corral_set_errno(err, errno, "cannot listen on %s",
					m->o->ctl_path);
	m->ev_listen = event_new(m->base, m->listen_fd, EV_READ | EV_PERSIST,
				 on_request, m);
	if (!m->ev_listen || event_add(m->ev_listen, NULL) < 0)
		return corral_set_err(err, -ENOMEM, "cannot watch %s", m->o->ctl_path);
	return 0;
}

/* ---- the monitor ----------------------------------------------------- */

static int prepare(struct monitor *m, struct corral_err *err)
{
	char name[96];
	int r;

	cg_cleanup_stale();
	m->base = event_base_new();
	if (!m->base)
		return corral_set_err(err, -ENOMEM, "cannot create an event loop");
	r = events_open(&m->ev, m->o->events_path, m->o->id, err);
	/* as corral run's and the daemon's: a bind it writes could replace it */
	if (r == 0)
		r = events_check_reach(m->ev, m->o->p, err);
	if (r < 0)
		return r;
	events_set_limits(m->ev, &m->o->p->events);
	if (m->o->call && events_set_call(m->ev, m->o->call) < 0)
		return corral_set_err(err, -ENOMEM, "out of memory naming the "
				      "container in the events");
	/* "<pid>-": cg_cleanup_stale() removes it if this monitor dies */
	snprintf(name, sizeof(name), "%d-oci", (int)getpid());
	r = cg_create(&m->cg, name, m->o->p, 0, err);
	if (r == 0)
		r = listen_ctl(m, err);
	return r;
}

/* Nothing of the shim's may stay open here: its pipes end with the command. */
static void detach_stdio(void)
{
	int null = open("/dev/null", O_RDWR);

	for (int i = 0; null >= 0 && i < 3; i++)
		if (i != null)
			dup2(null, i);
	if (null > 2)
		close(null);
}

int corral_container_monitor(const struct corral_container_opts *o,
			     struct corral_err *err)
{
	struct monitor m = { .o = o, .ready_fd = o->ready_fd,
			     .console_fd = o->console_fd, .listen_fd = -1,
			     .limits = *o->p };
	struct sandbox_opts so = {
		.p = o->p, .argv = o->argv,
		.stdio = { o->stdio[0], o->stdio[1], o->stdio[2] },
		.tty = o->tty, .hooks = &monitor_hooks, .arg = &m,
		.container = true, .hostname = o->hostname,
		.rlimits = o->rlimits, .nrlimits = o->nrlimits,
		.net_fd = o->net_fd,
	};
	int r;

	if (!o->argv || !o->argv[0] || !o->argv[0][0])
		r = corral_set_err(err, -EINVAL, "process.args: no command to run");
	else
		r = sandbox_check_policy(o->p, err);
	if (r == 0)
		r = prepare(&m, err);
	if (r == 0) {
		so.base = m.base;
		so.ev = m.ev;
		so.cg = m.cg;
		r = sandbox_spawn(&m.sb, &so, err);
		so.stdio[0] = so.stdio[1] = so.stdio[2] = -1;	/* closed there */
		if (r == 0)
			r = note_pidns(&m, err);
	}
	for (int i = 0; i < 3; i++)
		cleanup_closep(&so.stdio[i]);
	detach_stdio();
	if (r < 0) {
		tell_ready(&m, "error %s\n", err->msg);
	} else {
		event_base_dispatch(m.base);
		/* init is gone (or this loop failed: then it must go too) */
		if (!m.exited)
			sandbox_kill(m.sb);
		events_emit(m.ev, "container.stopped", NULL);
	}
	drop_event(&m.ev_listen);
	cleanup_closep(&m.listen_fd);
	if (o->ctl_path)
		unlink(o->ctl_path);
	cleanup_closep(&m.console_fd);
	for (size_t i = 0; i < m.nsensors; i++)
		sensor_free(m.sensors[i]);
	sandbox_free(m.sb);
	events_close(m.ev);
	if (m.base) {
		event_base_loop(m.base, EVLOOP_NONBLOCK);
		event_base_free(m.base);
	}
	cg_destroy(m.cg);
	return r;
}

/* ---- the client's side ----------------------------------------------- */

int container_ctl_fd(const char *ctl_path, const char *req, int fd, char *reply,
		     size_t len, struct corral_err *err)
{
	struct sockaddr_un sa;
	struct timeval tv = { CTL_TIMEOUT_S, 0 };
	cleanup_close int sock = -1, dirfd = -1;
	bool truncated;
	ssize_t n;

	if (ctl_addr(ctl_path, &sa, &dirfd, err) < 0)
		return err->code;
	sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (sock < 0)
		return corral_set_errno(err, errno, "socket");
	setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(sock, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return corral_set_errno(err, errno, "the container's monitor (%s)",
					ctl_path);
	n = fd_send(sock, req, strlen(req), &fd, fd >= 0, MSG_NOSIGNAL);
	if (n < 0)
		return corral_set_errno(err, (int)-n, "cannot ask the monitor");
	/*
	 * With SO_RCVTIMEO a stop and continue (^Z, a debugger) ends the
	 * wait with EINTR, not a restart: the monitor may still answer.
	 */
	do
		n = recv(sock, reply, len - 1, MSG_TRUNC);
	while (n < 0 && errno == EINTR);
	if (n <= 0)	/* it exited while asked: the container is stopped */
		return corral_set_err(err, -ECONNREFUSED, "the container's monitor "
				      "did not answer \"%s\"", req);
	truncated = (size_t)n > len - 1;
	reply[truncated ? len - 1 : (size_t)n] = '\0';
	if (!strncmp(reply, "error ", 6))	/* its start says it still */
		return corral_set_err(err, -EIO, "%s", reply + 6);
	/* cut to fit, a list's last pid would be another number */
	if (truncated)
		return corral_set_err(err, -EMSGSIZE, "the monitor's answer to "
				      "\"%s\" is %zd bytes, more than the %zu "
				      "asked for", req, n, len - 1);
	return 0;
}

int corral_container_ctl(const char *ctl_path, const char *req, char *reply,
			 size_t len, struct corral_err *err)
{
	return container_ctl_fd(ctl_path, req, -1, reply, len, err);
}
