/*
 * cgroup_move.c - moving a process into its groups without holding the
 * event loop.
 *
 * A write to cgroup.procs takes the kernel's threadgroup lock for
 * writing, and that waits for an RCU grace period when no move came in
 * the last one: 20-30 ms on these hosts, for every move of a daemon that
 * calls once in a while, in every hierarchy's first write.  The daemon
 * serves every sandbox from one loop; a call to one sandbox that came
 * right after another's answer waited for that other's next process to
 * be moved (16 ms p50 against 3.3 ms measured, bench/serve.py).
 *
 * So one helper process, forked when first needed, does the writes.  The
 * loop opens each hierarchy's cgroup.procs itself (cheap) and sends the
 * fds with a pidfd of the process; the helper writes the pid to each and
 * answers, in order.  A process, not a thread, for the reason
 * cgroup_reap.c gives.  The kernel serialises every move on the host
 * behind that one lock, so a second helper would wait for the same grace
 * period: one is enough, and its queue keeps the order of requests.
 *
 * A move may wait in the queue; its process may die meanwhile, and its
 * pid go to a process that is none of ours.  The helper asks the pidfd
 * before each write, and writes nothing for a process that is gone.
 *
 * The same helper removes the empty groups of ended calls (cg_remove_start):
 * an rmdir in the cgroup2 tree waits on RCU now and then (7.3 ms seen, one
 * in a few hundred), and on the loop it held every other request; in the
 * queue it waits for the moves before it, as it did on the loop.
 */
#include "cgroup_internal.h"
#include "fdpass.h"

#include <event2/event.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define MOVE_FDS	(C_COUNT + 2)	/* the pidfd, then each hierarchy */
/*
 * Moves sent to the helper and not answered yet, at most: the rest wait
 * here, so that a burst of a thousand sandboxes neither fills the socket
 * nor puts thousands of fds in flight (the kernel refuses past
 * RLIMIT_NOFILE: ETOOMANYREFS).
 */
#define MOVE_INFLIGHT	4

struct move_req {
	uint32_t id;
	int32_t pid;		/* 0: a removal, its group's dirs after this */
};

/* a removal's message: the dirs, each ending in NUL, "" for a hierarchy skipped */
#define REMOVE_MSG_MAX	(sizeof(struct move_req) + (C_COUNT + 1) * PATH_MAX)

struct move_ans {
	uint32_t id;
	int32_t r;		/* 0, or the negative errno of the write */
	uint32_t failed;	/* which hierarchy (index into cg->hier; a removal's order) */
};

struct cg_move {
	struct cg_move *next;
	uint32_t id;		/* 0 until sent */
	struct cg *cg;
	pid_t pid;		/* 0: the group's removal, not a move */
	int pidfd;		/* opened when the move was asked for; -1 for a removal */
	cg_move_fn done;
	void *arg;
};

/* The one helper of this process, and the moves it was asked for, in order. */
static struct {
	pid_t pid;
	int sock;
	struct event *ev;
	struct event_base *base;
	struct cg_move *head, *tail;	/* sent first, then waiting */
	unsigned inflight;		/* sent, answer not read (cancelled too) */
	uint32_t next_id;
} mover = { .sock = -1 };

/* ---- the helper ---------------------------------------------------- */

static int write_pid(int pidfd, int fd, const char *pid, size_t len)
{
	ssize_t n;

	/* reaped (ESRCH): its pid may be anyone's now; a zombie still holds it */
	if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0)
		return -errno;
	do
		n = write(fd, pid, len);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

static void move_one(int sock, const struct move_req *q, int *fds, size_t n)
{
	struct move_ans a = { .id = q->id };
	char pid[16];
	size_t len;

	/* tests/serve.sh t_moves_off_loop holds each move */
	cg_hold_for_test("CORRAL_TEST_MOVE_FIFO");
	len = (size_t)snprintf(pid, sizeof(pid), "%d", (int)q->pid);
	if (n < 2)
		a.r = -EINVAL;
	for (size_t i = 1; i < n && a.r == 0; i++) {
		a.r = write_pid(fds[0], fds[i], pid, len);
		a.failed = (uint32_t)(i - 1);
	}
	for (size_t i = 0; i < n; i++)
		close(fds[i]);
	fd_send(sock, &a, sizeof(a), NULL, 0, MSG_NOSIGNAL);
}

/*
 * A removal: rmdir each dir in the order given (cg_try_remove's), the first
 * that fails ends it (EBUSY: someone is still in the group, in every
 * hierarchy then).  a.failed: the dir's place in the message.
 */
static void remove_one(int sock, const struct move_req *q, const char *dirs,
		       size_t len)
{
	struct move_ans a = { .id = q->id, .failed = UINT32_MAX };
	size_t at = 0;

	/* tests/serve.sh t_call_group_removed_off_loop holds each removal */
	cg_hold_for_test("CORRAL_TEST_RMDIR_FIFO");
	for (uint32_t i = 0; at < len && a.r == 0; i++) {
		const char *dir = dirs + at;

		at += strnlen(dir, len - at) + 1;
		if (dir[0] && rmdir(dir) < 0 && errno != ENOENT) {
			a.r = -errno;
			a.failed = i;
		}
	}
	fd_send(sock, &a, sizeof(a), NULL, 0, MSG_NOSIGNAL);
}

static __attribute__((noreturn)) void helper(int sock)
{
	static union {
		struct move_req q;
		char raw[REMOVE_MSG_MAX];
	} msg;
	struct move_req q;
	int fds[MOVE_FDS];
	size_t nfds;
	ssize_t n;

	prctl(PR_SET_NAME, "corral-move", 0, 0, 0);
	/* the daemon's end is ours: nothing would read our answers */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	/* a ^C to the terminal's group is the daemon's to act on */
	cg_helper_signals();
	/* nor the sandboxes' sockets: an init hears of the daemon's end by EOF */
	if (sock != 3) {
		if (dup2(sock, 3) < 0)
			_exit(1);
		sock = 3;
	}
	syscall(SYS_close_range, 4, ~0U, 0);
	for (;;) {
		n = fd_recv(sock, msg.raw, sizeof(msg.raw), fds, MOVE_FDS, &nfds, 0);
		if (n <= 0 && n != -EMSGSIZE)
			_exit(0);	/* the daemon closed its end, or is gone */
		q = msg.q;
		if (n == (ssize_t)sizeof(q) && q.pid > 0) {
			move_one(sock, &q, fds, nfds);
			continue;
		}
		if (n > (ssize_t)sizeof(q) && q.pid == 0 && !nfds) {
			remove_one(sock, &q, msg.raw + sizeof(q), (size_t)n - sizeof(q));
			continue;
		}
		while (nfds)
			close(fds[--nfds]);
	}
}

/* ---- the loop's side ----------------------------------------------- */

static void move_unlink(struct cg_move *m)
{
	struct cg_move **pp = &mover.head, *prev = NULL;

	while (*pp && *pp != m) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	if (!*pp)
		return;
	*pp = m->next;
	if (mover.tail == m)
		mover.tail = prev;
	m->next = NULL;
}

/*
 * The move is over: its owner hears how (r, and msg when r < 0), then it
 * is freed.  A process that could not be moved is killed first, by its
 * pidfd: it must not run unattributed, and its pid may be anyone's now.
 */
static void move_end(struct cg_move *m, int r, const char *msg)
{
	move_unlink(m);
	if (r < 0 && m->pidfd >= 0)
		syscall(SYS_pidfd_send_signal, m->pidfd, SIGKILL, NULL, 0);
	if (m->pidfd >= 0)
		close(m->pidfd);
	m->done(m->arg, r, msg);
	free(m);
}

/*
 * A removal's answer: the dirs removed (those before the one that failed,
 * or all) are forgotten, as cg_try_remove forgets them.
 */
static void remove_finish(struct cg_move *m, int r, uint32_t failed)
{
	struct cg *cg = m->cg;
	struct corral_err err = { 0 };
	uint32_t k = 0;

	for (size_t i = cg->nhier; i-- > 0; k++) {
		if (r == -EPIPE && failed == UINT32_MAX)
			break;	/* the helper died: nothing is known */
		if (r < 0 && k >= failed)
			break;
		free(cg->hier[i].dir);
		cg->hier[i].dir = NULL;
	}
	if (r == 0)
		cg_op_cancel(cg);	/* nothing left to freeze or kill */
	else if (r == -EPIPE && failed == UINT32_MAX)
		corral_set_err(&err, r, "the cgroup mover ended before the group "
			       "was removed");
	else
		corral_set_errno(&err, -r, "cannot remove %s", failed < cg->nhier ?
				 cg->hier[cg->nhier - 1 - failed].dir : "?");
	move_end(m, r, err.msg);
}

static void move_finish(struct cg_move *m, int r, uint32_t failed)
{
	struct corral_err err = { 0 };

	if (!m->pid) {
		remove_finish(m, r, failed);
		return;
	}
	if (r < 0) {
		const char *dir = failed < m->cg->nhier ?
				  m->cg->hier[failed].dir : "?";

		if (r == -ESRCH)
			corral_set_err(&err, r, "process %d ended before it "
				       "could be moved into %s", (int)m->pid, dir);
		else if (r == -EPIPE && failed == UINT32_MAX)
			corral_set_err(&err, r, "the cgroup mover ended before "
				       "process %d was moved", (int)m->pid);
		else
			corral_set_errno(&err, -r, "cannot write \"%d\" to "
					 "%s/cgroup.procs", (int)m->pid, dir);
	}
	move_end(m, r, err.msg);
}

static void mover_stop(void)
{
	if (mover.ev)
		event_free(mover.ev);
	mover.ev = NULL;
	if (mover.sock >= 0)
		close(mover.sock);
	mover.sock = -1;
	if (mover.pid > 0) {
		/* its end is near: it exits on EOF, or was killed */
		kill(mover.pid, SIGKILL);
		while (waitpid(mover.pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	mover.pid = 0;
	mover.base = NULL;
	mover.inflight = 0;
}

/* The helper is gone: every move it had is failed, and the next forks anew. */
static void mover_lost(void)
{
	mover_stop();
	while (mover.head)
		move_finish(mover.head, -EPIPE, UINT32_MAX);
}

static void on_answer(evutil_socket_t fd, short what, void *arg);

static int mover_start(struct event_base *base, struct corral_err *err)
{
	int sv[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return corral_set_errno(err, errno, "socketpair for the cgroup mover");
	pid = fork();
	if (pid < 0) {
		close(sv[0]);
		close(sv[1]);
		return corral_set_errno(err, errno, "cannot fork the cgroup mover");
	}
	if (pid == 0) {
		close(sv[0]);
		helper(sv[1]);
	}
	close(sv[1]);
	mover.pid = pid;
	mover.sock = sv[0];
	mover.base = base;
	/*
	 * Watched while it lives, also idle, so that its end is seen (and it
	 * is reaped) at once; it keeps the loop from ending, so the daemon
	 * stops it with its last box (cg_mover_stop).
	 */
	mover.ev = event_new(base, sv[0], EV_READ | EV_PERSIST, on_answer, NULL);
	if (!mover.ev || event_add(mover.ev, NULL) < 0) {
		mover_stop();
		return corral_set_err(err, -ENOMEM, "cannot watch the cgroup mover");
	}
	return 0;
}

static int open_procs(struct cg *cg, int *fds, size_t *n, struct corral_err *err)
{
	char path[PATH_MAX];
	int r;

	for (size_t i = 0; i < cg->nhier; i++) {
		r = cg_file_path(path, sizeof(path), cg->hier[i].dir, "cgroup.procs");
		if (r < 0)
			return corral_set_err(err, r, "cgroup path %s/cgroup.procs "
					      "is too long", cg->hier[i].dir);
		fds[*n] = open(path, O_WRONLY | O_CLOEXEC);
		if (fds[*n] < 0)
			return corral_set_errno(err, errno, "cannot open %s", path);
		(*n)++;
	}
	return 0;
}

static void close_all(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		close(fds[i]);
}

/* Hand the helper one removal: the group's dirs, in cg_try_remove's order. */
static int remove_send(struct cg_move *m, struct corral_err *err)
{
	static char buf[REMOVE_MSG_MAX];
	struct cg *cg = m->cg;
	size_t len = sizeof(struct move_req);
	ssize_t s;

	if (++mover.next_id == 0)
		mover.next_id = 1;
	memcpy(buf, &(struct move_req){ .id = mover.next_id }, len);
	for (size_t i = cg->nhier; i-- > 0;) {
		const char *dir = cg->hier[i].dir ? cg->hier[i].dir : "";
		size_t l = strlen(dir) + 1;

		if (len + l > sizeof(buf))
			return corral_set_err(err, -ENAMETOOLONG, "cgroup path %s "
					      "is too long", dir);
		memcpy(buf + len, dir, l);
		len += l;
	}
	s = fd_send(mover.sock, buf, len, NULL, 0, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (s < 0)
		return corral_set_errno(err, (int)-s, "cannot reach the cgroup "
					"mover (pid %d)", (int)mover.pid);
	m->id = mover.next_id;
	return 0;
}

/* Hand the helper one move: its pidfd and each hierarchy's cgroup.procs. */
static int move_send(struct cg_move *m, struct corral_err *err)
{
	struct move_req q;
	int fds[MOVE_FDS];
	size_t n = 0;
	ssize_t s;
	int r;

	if (!m->pid)
		return remove_send(m, err);
	fds[n++] = m->pidfd;
	r = open_procs(m->cg, fds, &n, err);
	if (r == 0) {
		if (++mover.next_id == 0)
			mover.next_id = 1;
		q = (struct move_req){ .id = mover.next_id, .pid = m->pid };
		s = fd_send(mover.sock, &q, sizeof(q), fds, n,
			    MSG_NOSIGNAL | MSG_DONTWAIT);
		if (s < 0)
			r = corral_set_errno(err, (int)-s, "cannot reach the "
					     "cgroup mover (pid %d)", (int)mover.pid);
		else
			m->id = q.id;
	}
	close_all(fds + 1, n - 1);	/* the pidfd is the move's until it ends */
	return r;
}

/*
 * Send what waits, up to MOVE_INFLIGHT; a move that cannot go ends.  From
 * the loop only: an owner's done may run.
 */
static void mover_pump(void)
{
	struct corral_err err;
	struct cg_move *m = mover.head;

	while (m && mover.sock >= 0 && mover.inflight < MOVE_INFLIGHT) {
		struct cg_move *next = m->next;

		if (m->id) {
			m = next;
			continue;
		}
		if (move_send(m, &err) < 0)
			move_end(m, err.code, err.msg);
		else
			mover.inflight++;
		m = next;
	}
}

static void on_answer(evutil_socket_t fd, short what, void *arg)
{
	struct move_ans a;
	ssize_t n;

	(void)what;
	(void)arg;
	for (;;) {
		n = recv(fd, &a, sizeof(a), MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n != (ssize_t)sizeof(a)) {
			mover_lost();
			return;
		}
		if (mover.inflight)
			mover.inflight--;
		/* answers come in order; a cancelled move's finds nobody */
		for (struct cg_move *m = mover.head; m && m->id; m = m->next) {
			if (m->id == a.id) {
				move_finish(m, a.r, a.failed);
				break;
			}
		}
	}
	mover_pump();
}

/* Into the helper's queue: sent now if nothing waits before it. */
static int move_queue(struct event_base *base, struct cg_move *m,
		      struct corral_err *err)
{
	int r;

	if (mover.sock < 0 && (r = mover_start(base, err)) < 0)
		return r;
	/* nothing before it waits: sent now, and a failure is the caller's */
	if (mover.inflight < MOVE_INFLIGHT && (!mover.tail || mover.tail->id)) {
		r = move_send(m, err);
		/*
		 * The helper died and its EOF is not read yet: a new one,
		 * once.  With moves out, their owners hear of it (on_answer).
		 */
		if (r < 0 && !mover.head) {
			mover_stop();
			r = mover_start(base, err);
			if (r == 0)
				r = move_send(m, err);
		}
		if (r < 0)
			return r;
		mover.inflight++;
	}
	if (mover.tail)
		mover.tail->next = m;
	else
		mover.head = m;
	mover.tail = m;
	return 1;
}

static int move_begin(struct event_base *base, struct cg *cg, pid_t pid,
		      int pidfd, cg_move_fn done, void *arg,
		      struct cg_move **out, struct corral_err *err)
{
	struct cg_move *m;
	int r;

	*out = NULL;
	if (cg_mode(cg) == CG_NONE)
		return 0;
	/* another loop than the helper's: the old way, here and now */
	if (!base || (mover.base && mover.base != base))
		return cg_attach(cg, pid, err) < 0 ? err->code : 0;
	m = calloc(1, sizeof(*m));
	if (!m)
		return corral_set_err(err, -ENOMEM, "out of memory for a cgroup move");
	/*
	 * The caller's pidfd, taken when pid was surely the process (a
	 * call's, gate_pidfd), else one now: the caller's own child.
	 */
	m->pidfd = pidfd >= 0 ? fcntl(pidfd, F_DUPFD_CLOEXEC, 3) :
		   (int)syscall(SYS_pidfd_open, pid, 0);
	if (m->pidfd < 0) {
		r = corral_set_errno(err, errno, "pidfd of %d", (int)pid);
		free(m);
		return r;
	}
	m->cg = cg;
	m->pid = pid;
	m->done = done;
	m->arg = arg;
	r = move_queue(base, m, err);
	if (r < 0) {
		close(m->pidfd);
		free(m);
		return r;
	}
	*out = m;
	return 1;
}

int cg_move_start(struct event_base *base, struct cg *cg, pid_t pid,
		  int pidfd, cg_move_fn done, void *arg, struct cg_move **out,
		  struct corral_err *err)
{
	int r = move_begin(base, cg, pid, pidfd, done, arg, out, err);

	/*
	 * As move_end's: a process that cannot be moved must not run.  By
	 * its pidfd where it has one: its pid may be anyone's by now.
	 */
	if (r < 0 && pidfd >= 0)
		syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
	else if (r < 0)
		kill(pid, SIGKILL);
	return r;
}

int cg_remove_start(struct event_base *base, struct cg *cg, cg_move_fn done,
		    void *arg, struct cg_move **out)
{
	struct corral_err err;
	struct cg_move *m;

	*out = NULL;
	if (cg_mode(cg) == CG_NONE)
		return 0;
	/* another loop than the helper's, or no helper to be had: here and now */
	if (!base || (mover.base && mover.base != base) ||
	    !(m = calloc(1, sizeof(*m))))
		return cg_try_remove(cg);
	m->cg = cg;
	m->pidfd = -1;
	m->done = done;
	m->arg = arg;
	if (move_queue(base, m, &err) < 0) {
		free(m);
		return cg_try_remove(cg);
	}
	*out = m;
	return 1;
}

void cg_move_retarget(struct cg_move *m, cg_move_fn done, void *arg)
{
	m->done = done;
	m->arg = arg;
}

void cg_move_cancel(struct cg_move *m)
{
	if (!m)
		return;
	/* a move sent may still be written: into a group whose owner goes */
	move_unlink(m);
	if (m->pidfd >= 0)
		close(m->pidfd);
	free(m);
}

void cg_mover_stop(void)
{
	mover_stop();
	/* none, if every owner cancelled its own as it must */
	while (mover.head)
		cg_move_cancel(mover.head);
}
