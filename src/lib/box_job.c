/*
 * box_job.c - a box's slow work (a diff, a patch, a snapshot's copy) off
 * the caller's event loop: done by a process forked for it, whose end the
 * loop hears of through its pidfd.
 *
 * The sandbox's code decides how costly its workspace is to diff or copy
 * (as much as its disk allows: a 387 MB patch took 14.6 s, 200k
 * directories 11 s to snapshot), and the daemon serves every sandbox from
 * one loop: done in line, that work held every other sandbox's requests.
 *
 * A process, not a thread, for the reasons of cgroup_reap.c: the daemon
 * clones each sandbox's init with no atfork handler, and a thread of ours
 * inside malloc at that moment would leave its lock taken in the child.
 * The worker has its own copy of the box (its fds, its policy) as it was
 * at the fork, and keeps of the daemon's fds only the ones its work reads
 * or writes: a client's connection the daemon closes is closed, and an
 * init hears of the daemon's end, as before.  It writes its answer into
 * a memfd (a few bytes, or a report as large as the export's), read once
 * it is gone; what it makes goes where the caller said (a file).  A kill
 * (the caller's cancel, the box's destroy) is SIGKILL: what it wrote is
 * the caller's to throw away.
 */
#include "internal.h"
#include "box.h"
#include "cgroup_internal.h"

#include <event2/event.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define JOB_ANSWER_MAX	(64u << 20)	/* what a worker answers: a report */
#define JOB_KEEP_MAX	8

struct box_job {
	struct box_job *next, *prev;
	struct corral_box *b;
	pid_t pid;
	int pidfd, answer;
	struct event *ev;
	box_job_end_fn end;
	void *arg;
};

static void job_unlink(struct box_job *j)
{
	if (j->prev)
		j->prev->next = j->next;
	else if (j->b->jobs == j)
		j->b->jobs = j->next;
	if (j->next)
		j->next->prev = j->prev;
	j->next = j->prev = NULL;
}

static void job_free(struct box_job *j)
{
	job_unlink(j);
	if (j->ev)
		event_free(j->ev);
	close_fd(&j->pidfd);
	close_fd(&j->answer);
	free(j);
}

/* The worker's answer, whole (it is bounded); NULL if there is none. */
static char *job_answer(struct box_job *j, size_t *len)
{
	struct stat st;
	char *buf;
	size_t got = 0;

	*len = 0;
	if (fstat(j->answer, &st) < 0 || st.st_size <= 0 ||
	    (uint64_t)st.st_size > JOB_ANSWER_MAX || !(buf = malloc((size_t)st.st_size + 1)))
		return NULL;
	while (got < (size_t)st.st_size) {
		ssize_t n = pread(j->answer, buf + got, (size_t)st.st_size - got, (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	buf[got] = '\0';
	*len = got;
	return buf;
}

static void on_job_exit(evutil_socket_t fd, short what, void *arg)
{
	struct box_job *j = arg;
	int status = 0;
	size_t len;
	char *answer;

	(void)fd;
	(void)what;
	/* readable: it has exited, the wait only collects it */
	while (waitpid(j->pid, &status, 0) < 0 && errno == EINTR)
		;
	answer = job_answer(j, &len);
	job_unlink(j);
	j->end(j->arg, answer, len, status);
	free(answer);
	job_free(j);
}

/* Close every fd but 0-2 and keep[] (sorted here). */
static void close_all_but(int *keep, size_t n)
{
	unsigned int from = 3;

	for (size_t i = 1; i < n; i++)
		for (size_t k = i; k > 0 && keep[k - 1] > keep[k]; k--) {
			int t = keep[k];

			keep[k] = keep[k - 1];
			keep[k - 1] = t;
		}
	for (size_t i = 0; i < n; i++) {
		if (keep[i] < (int)from)
			continue;
		if ((unsigned int)keep[i] > from)
			syscall(SYS_close_range, from, (unsigned int)keep[i] - 1, 0);
		from = (unsigned int)keep[i] + 1;
	}
	syscall(SYS_close_range, from, ~0U, 0);
}

static __attribute__((noreturn)) void job_child(struct corral_box *b, box_job_work_fn work,
						 void *arg, pid_t parent, int answer,
						 const int *fds, size_t nfds)
{
	int keep[JOB_KEEP_MAX + 3];
	size_t n = 0;

	prctl(PR_SET_NAME, "corral-build", 0, 0, 0);
	/* the daemon's end is ours: nobody would read what we make */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent)
		_exit(125);
	/* libevent's handlers would write into the daemon's signal pipe */
	cg_helper_signals();
	keep[n++] = answer;
	if (b->sb && b->sb->upperfd >= 0)
		keep[n++] = b->sb->upperfd;
	if (b->lowerfd >= 0)
		keep[n++] = b->lowerfd;
	for (size_t i = 0; i < nfds && i < JOB_KEEP_MAX; i++)
		if (fds[i] >= 0)
			keep[n++] = fds[i];
	close_all_but(keep, n);
	/* tests/snapshot.sh holds the worker here: the loop must answer meanwhile */
	cg_hold_for_test("CORRAL_TEST_BUILD_FIFO");
	/* nothing of the daemon's environment or its TLS state in the worker */
	corral_forget(NULL);
	_exit(work(b, arg, answer) < 0 ? 1 : 0);
}

int box_job_start(struct corral_box *b, box_job_work_fn work, box_job_end_fn end,
		  void *arg, const int *fds, size_t nfds, struct box_job **out,
		  struct corral_err *err)
{
	struct box_job *j = calloc(1, sizeof(*j));
	pid_t self = getpid();
	int e;

	*out = NULL;
	if (!j)
		return corral_set_err(err, -ENOMEM, "out of memory for a worker");
	*j = (struct box_job){ .b = b, .pidfd = -1, .end = end, .arg = arg };
	j->answer = memfd_create("corral-answer", MFD_CLOEXEC);
	if (j->answer < 0) {
		e = errno;
		free(j);
		return corral_set_err(err, -e, "memfd_create for a worker's answer: %s",
				      strerror(e));
	}
	j->pid = fork();
	if (j->pid == 0)
		job_child(b, work, arg, self, j->answer, fds, nfds);
	if (j->pid < 0) {
		e = errno;
		close_fd(&j->answer);
		free(j);
		return corral_set_err(err, -e, "cannot fork a worker: %s", strerror(e));
	}
	j->pidfd = (int)syscall(SYS_pidfd_open, j->pid, 0);
	if (j->pidfd < 0)
		e = errno;
	else if (!(j->ev = event_new(b->base, j->pidfd, EV_READ, on_job_exit, j)) ||
		 event_add(j->ev, NULL) < 0)
		e = ENOMEM;
	else
		e = 0;
	if (e) {
		kill(j->pid, SIGKILL);
		while (waitpid(j->pid, NULL, 0) < 0 && errno == EINTR)
			;
		job_free(j);
		return corral_set_err(err, -e, "cannot watch the worker: %s", strerror(e));
	}
	j->next = b->jobs;
	if (j->next)
		j->next->prev = j;
	b->jobs = j;
	*out = j;
	return 0;
}

/*
 * SIGKILL, then the wait in line: a killed process is gone within a
 * moment (a write under way finishes first); its end is not called.
 */
void box_job_kill(struct box_job *j)
{
	if (!j)
		return;
	if (syscall(SYS_pidfd_send_signal, j->pidfd, SIGKILL, NULL, 0) < 0 && errno != ESRCH)
		kill(j->pid, SIGKILL);
	while (waitpid(j->pid, NULL, 0) < 0 && errno == EINTR)
		;
	job_free(j);
}

/* The box goes: each worker killed, and its end told (no answer, status -1). */
void box_jobs_end(struct corral_box *b)
{
	while (b->jobs) {
		struct box_job *j = b->jobs;
		box_job_end_fn end = j->end;
		void *arg = j->arg;

		box_job_kill(j);
		end(arg, NULL, 0, -1);
	}
}
