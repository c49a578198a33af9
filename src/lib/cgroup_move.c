/*
 * cgroup_move.c - moving a process into a group off the event loop.
 *
 * A write of a pid to cgroup.procs takes the kernel's global
 * cgroup_threadgroup_rwsem for writing, and that waits for an RCU grace
 * period when no move happened within the last one: 5-22 ms measured on
 * the daemon's loop, once for every call's process.  A daemon's loop
 * serves every sandbox, so the move goes to one worker thread, and the
 * loop hears of the result through a pipe.
 *
 * The daemon forks and clones from its loop thread while the worker may
 * be anywhere in its loop, so the worker takes no lock a child could
 * inherit held: no malloc, no stdio, no libevent; only read, write, open
 * and close on what the loop prepared.  The paths are joined and every
 * message is written by the loop.
 */
#include "cgroup_internal.h"

#include <event2/event.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct cg_move {
	/* the loop's, read by the worker */
	size_t n;
	char pid[16];
	char path[C_COUNT + 1][PATH_MAX];
	/* the worker's, read by the loop once the move is back */
	int r;			/* 0, or the errno of the write that failed */
	size_t failed;		/* which path */
	/* the loop's only */
	cg_move_done_fn done;
	void *arg;
	struct cg_move *next, **pprev;	/* in flight: freed at exit too */
};

/* The loop's, but for the pipes' fds, which the worker reads only. */
static struct {
	bool started;
	struct event_base *base;	/* cg_move_start's, until cg_move_stop */
	int req[2], res[2];
	struct event *ev;
	struct cg_move *flying;
} worker = { .req = { -1, -1 }, .res = { -1, -1 } };

/* No allocation, no lock: see the top of the file. */
static int move_one(const char *path, const char *pid)
{
	size_t len = strlen(pid);
	ssize_t n;
	int fd, r = 0;

	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	do
		n = write(fd, pid, len);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		r = errno;
	else if ((size_t)n != len)
		r = EIO;
	close(fd);
	return r;
}

static void *work(void *arg)
{
	struct cg_move *m;
	ssize_t n;

	(void)arg;
	for (;;) {
		n = read(worker.req[0], &m, sizeof(m));
		if (n < 0 && errno == EINTR)
			continue;
		if (n != sizeof(m))
			return NULL;	/* the loop's end closed: never, in a daemon */
		for (m->r = 0, m->failed = 0; m->failed < m->n; m->failed++) {
			m->r = move_one(m->path[m->failed], m->pid);
			if (m->r)
				break;
		}
		/* a pointer is one atomic write to a pipe */
		while (write(worker.res[1], &m, sizeof(m)) < 0 && errno == EINTR)
			;
	}
}

/* Moves back from the worker: tell their owners, free them. */
static void on_moved(evutil_socket_t fd, short what, void *arg)
{
	struct cg_move *m;

	(void)what;
	(void)arg;
	while (read(fd, &m, sizeof(m)) == sizeof(m)) {
		struct corral_err err = { 0 };

		if (m->done) {
			if (m->r)
				corral_set_errno(&err, m->r, "cannot move process %s "
						 "into cgroup %s", m->pid,
						 m->path[m->failed]);
			m->done(m->arg, m->r ? -m->r : 0, &err);
		}
		*m->pprev = m->next;
		if (m->next)
			m->next->pprev = m->pprev;
		free(m);
	}
	if (!worker.flying && worker.ev)
		event_del(worker.ev);
}

int cg_move_start(struct event_base *base)
{
	sigset_t all, old;
	pthread_t t;
	int r = 0;

	if (worker.base)
		return worker.base == base ? 0 : -EBUSY;
	if (!worker.started) {
		if (pipe2(worker.req, O_CLOEXEC) < 0 ||
		    pipe2(worker.res, O_CLOEXEC | O_NONBLOCK) < 0) {
			r = -errno;
			goto fail;
		}
		/* every signal stays the loop's (signalfd, SIGCHLD) */
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		r = -pthread_create(&t, NULL, work, NULL);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (r < 0)
			goto fail;
		pthread_detach(t);
		worker.started = true;
	}
	/* added only while moves are out: a loop with nothing else to do ends */
	worker.ev = event_new(base, worker.res[0], EV_READ | EV_PERSIST, on_moved, NULL);
	if (!worker.ev)
		return -ENOMEM;
	worker.base = base;
	return 0;
fail:
	for (int i = 0; i < 2; i++) {
		if (worker.req[i] >= 0)
			close(worker.req[i]);
		if (worker.res[i] >= 0)
			close(worker.res[i]);
		worker.req[i] = worker.res[i] = -1;
	}
	return r;
}

void cg_move_stop(struct event_base *base)
{
	if (!base || worker.base != base)
		return;
	/* moves still out are freed when they come back, on a later loop */
	for (struct cg_move *m = worker.flying; m; m = m->next)
		m->done = NULL;
	event_free(worker.ev);
	worker.ev = NULL;
	worker.base = NULL;
}

struct cg_move *cg_attach_async(struct cg *cg, pid_t pid, cg_move_done_fn done,
				void *arg)
{
	struct cg_move *m;

	if (!worker.base || !cg || cg->ops->mode == CG_NONE || !cg->nhier)
		return NULL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	snprintf(m->pid, sizeof(m->pid), "%d", (int)pid);
	for (size_t i = 0; i < cg->nhier; i++) {
		if (!cg->hier[i].dir ||
		    cg_file_path(m->path[i], sizeof(m->path[i]), cg->hier[i].dir,
				 "cgroup.procs") < 0) {
			free(m);
			return NULL;
		}
	}
	m->n = cg->nhier;
	m->done = done;
	m->arg = arg;
	if (!worker.flying && event_add(worker.ev, NULL) < 0) {
		free(m);
		return NULL;
	}
	if (write(worker.req[1], &m, sizeof(m)) != sizeof(m)) {
		if (!worker.flying)
			event_del(worker.ev);
		free(m);
		return NULL;
	}
	m->next = worker.flying;
	if (m->next)
		m->next->pprev = &m->next;
	m->pprev = &worker.flying;
	worker.flying = m;
	return m;
}

void cg_attach_cancel(struct cg_move *m)
{
	/* the worker may be writing it: it is freed when it comes back */
	if (m)
		m->done = NULL;
}

void cg_attach_retarget(struct cg_move *m, cg_move_done_fn done, void *arg)
{
	m->done = done;
	m->arg = arg;
}
