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
 *
 * A worker's memory is in no cgroup of ours, and what it reads is the
 * sandbox's to choose: the patch bounds each file's cost (patch.c), and
 * RLIMIT_DATA caps whatever case those bounds missed at JOB_MEMORY_MAX
 * beyond what the worker had at its fork (the daemon's heap, which it
 * shares until written): an allocation past it fails, and the work
 * fails with a sentence, where the host's OOM killer would have chosen
 * among every process.  RLIMIT_DATA, not RLIMIT_AS: it counts what can
 * hold memory (private writable mappings, the heap), not the ASan
 * shadow's reservations (already there at the fork, so counted in the
 * base), nor libraries and files mapped read-only.
 */
#include "internal.h"
#include "box.h"
#include "cgroup_internal.h"

#include <event2/event.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define JOB_ANSWER_MAX	(64u << 20)	/* what a worker answers: a report */
#define JOB_KEEP_MAX	8
/*
 * What a worker may take beyond its fork's memory: a file's patch costs at
 * most about 70 MB (patch.c's bounds), a diff of 100000 changes about 100
 * MB of JSON.  Under ASan its quarantine keeps 256 MB of what is freed, and
 * each block its redzones.
 */
#if defined(__SANITIZE_ADDRESS__)
#define JOB_MEMORY_MAX	(1536ull << 20)
#else
#define JOB_MEMORY_MAX	(512ull << 20)
#endif

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

/* VmData and VmRSS of /proc/self/status, in bytes; false if unread. */
static bool job_vm(uint64_t *data, uint64_t *rss)
{
	char buf[4096];
	const char *d, *r;
	unsigned long long dk, rk;

	if (proc_self_status(buf, sizeof(buf)) < 0)
		return false;
	d = proc_status_value(buf, "VmData");
	r = proc_status_value(buf, "VmRSS");
	if (!d || !r || sscanf(d, "%llu", &dk) != 1 || sscanf(r, "%llu", &rk) != 1)
		return false;
	*data = (uint64_t)dk << 10;
	*rss = (uint64_t)rk << 10;
	return true;
}

/*
 * The worker's cap: its data now plus JOB_MEMORY_MAX (the test's
 * CORRAL_TEST_BUILD_MEMORY instead, to reach it with a small workspace).
 * Without /proc the worker runs uncapped, as before: the patch's own
 * bounds still hold.
 */
static void job_cap_memory(struct corral_box *b)
{
	const char *test = getenv("CORRAL_TEST_BUILD_MEMORY");
	uint64_t data, max = JOB_MEMORY_MAX;
	struct rlimit rl;

	if (test && *test)
		max = strtoull(test, NULL, 10);
	if (!job_vm(&data, &b->job_rss0))
		return;
	rl.rlim_cur = rl.rlim_max = data + max;
	if (setrlimit(RLIMIT_DATA, &rl) == 0)
		b->job_mem_max = max;
}

uint64_t box_job_memory(const struct corral_box *b)
{
	struct rusage ru;
	uint64_t peak;

	if (getrusage(RUSAGE_SELF, &ru) < 0)
		return 0;
	peak = (uint64_t)ru.ru_maxrss << 10;
	return peak > b->job_rss0 ? peak - b->job_rss0 : 0;
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
	job_cap_memory(b);
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

/* ---- a work and its answer: the caller's (corral_box_work_start), an unpack's -- */

/*
 * A walk of the sandbox's tree for a client (an archive out, a recursive
 * listing), or an archive unpacked into it: its cost is the tree or the
 * archive the sandbox chose, and the FIFOs an archive leaves out cost the
 * walk without adding a byte.  The work is a function run in the worker
 * (a fork of the caller: the function and its argument are there as they
 * were at the fork); its answer, r, err and up to BOX_WORK_OUT_MAX bytes of
 * out (an unpack's counts), comes back through the job's memfd.  One way to end
 * for every such work: done from the loop with what the worker answered,
 * or why it could not (the box destroyed, a halt, a cancel that asks for it).
 */
struct corral_box_work {
	struct corral_box_work *next;	/* the box's (b->works) */
	struct corral_box *b;
	struct box_job *job;
	box_work_fn work;
	corral_box_work_fn pub_work;	/* corral_box_work_start's, instead */
	void *work_arg;
	box_work_end_fn end;
	corral_box_work_done_fn pub_done;	/* corral_box_work_start's, instead */
	void *arg;
	int fd;
	const char *who, *doing, *halted;	/* for the sentences (box_work_how) */
};

struct work_answer {
	int r;
	struct corral_err err;
	unsigned char out[BOX_WORK_OUT_MAX];
};

static int work_run(struct corral_box *b, void *arg, int answer)
{
	struct corral_box_work *w = arg;
	struct work_answer a = { 0 };

	if (w->pub_work)
		a.r = w->pub_work(b, w->work_arg, w->fd, &a.err);
	else
		a.r = w->work(b, w->work_arg, w->fd, a.out, &a.err);
	if (a.r > 0)
		a.r = 0;
	return write(answer, &a, sizeof(a)) == (ssize_t)sizeof(a) ? 0 : -EIO;
}

static void work_free(struct corral_box_work *w)
{
	for (struct corral_box_work **p = w->b ? &w->b->works : NULL; p && *p;
	     p = &(*p)->next)
		if (*p == w) {
			*p = w->next;
			break;
		}
	free(w);
}

/* Done told a's answer, once; the work freed. */
static void work_done(struct corral_box_work *w, struct work_answer *a)
{
	/* a code the worker made up is no errno (nor CORRAL_E_*) to map */
	if (a->r > 0 || (a->r < -4095 && (a->r > CORRAL_E_HALTED ||
					  a->r < CORRAL_E_STARTING)))
		a->r = -EIO;
	w->job = NULL;
	if (w->pub_done)
		w->pub_done(w->arg, a->r, &a->err);
	else
		w->end(w->arg, a->r, a->out, &a->err);
	work_free(w);
}

static void work_end(void *arg, const char *answer, size_t len, int status)
{
	struct corral_box_work *w = arg;
	struct work_answer a = { 0 };

	if (status == -1)
		a.r = corral_set_err(&a.err, -ESRCH, "the sandbox was destroyed while "
				     "%s", w->doing);
	else if (answer && len == sizeof(a))
		memcpy(&a, answer, sizeof(a));
	else
		a.r = corral_set_err(&a.err, -EIO, "%s ended without an answer (wait "
				     "status %d)", w->who, status);
	work_done(w, &a);
}

/* A directory the work will walk, as the walk opens it: its errors now, no worker. */
static int work_dir_ok(struct corral_box *b, const char *dir, struct corral_err *err)
{
	int fd, r = box_path_ok(b, dir, false, err);

	if (r < 0)
		return r;
	fd = box_open_in_root(b, dir, O_RDONLY | O_DIRECTORY, 0, err);
	if (fd < 0)
		return fd;
	close(fd);
	return 0;
}

/* The worker forked for w, which is the box's from then on; else w freed. */
static int work_fork(struct corral_box *b, struct corral_box_work *w,
		     const struct box_work_how *how, struct corral_box_work **out,
		     struct corral_err *err)
{
	int r;

	w->fd = how->fd;
	w->who = how->who;
	w->doing = how->doing;
	w->halted = how->halted;
	r = box_job_start(b, work_run, work_end, w, how->fds, how->nfds, &w->job, err);
	if (r < 0) {
		free(w);
		return r;
	}
	w->b = b;
	w->next = b->works;
	b->works = w;
	*out = w;
	return 0;
}

int box_work_start(struct corral_box *b, const struct box_work_how *how, box_work_fn work,
		   void *work_arg, box_work_end_fn end, void *arg,
		   struct corral_box_work **out, struct corral_err *err)
{
	struct corral_box_work *w;

	*out = NULL;
	if (how->out_len > BOX_WORK_OUT_MAX)
		return corral_set_err(err, -EINVAL, "a worker's answer is at most %d "
				      "bytes (asked for %zu)", BOX_WORK_OUT_MAX,
				      how->out_len);
	if (!(w = calloc(1, sizeof(*w))))
		return corral_set_err(err, -ENOMEM, "out of memory for a worker");
	w->work = work;
	w->work_arg = work_arg;
	w->end = end;
	w->arg = arg;
	return work_fork(b, w, how, out, err);
}

int corral_box_work_start(struct corral_box *b, const char *dir, corral_box_work_fn work,
			  void *work_arg, int fd, corral_box_work_done_fn done, void *arg,
			  struct corral_box_work **out, struct corral_err *err)
{
	/* what a walk resolves beneath (the root), and where the work goes */
	int fds[2] = { b->sb->rootfd, fd }, r;
	struct box_work_how how = {
		.fds = fds, .nfds = 2, .fd = fd, .who = "the worker",
		.doing = "its worker ran",
		.halted = "the answer was cut short (ask again: a halted sandbox's "
			  "files can be read while it is held)",
	};
	struct corral_box_work *w;

	*out = NULL;
	if (dir && (r = work_dir_ok(b, dir, err)) < 0)
		return r;
	if (!(w = calloc(1, sizeof(*w))))
		return corral_set_err(err, -ENOMEM, "out of memory for a worker");
	w->pub_work = work;
	w->work_arg = work_arg;
	w->pub_done = done;
	w->arg = arg;
	return work_fork(b, w, &how, out, err);
}

void corral_box_work_cancel(struct corral_box_work *w)
{
	if (!w)
		return;
	box_job_kill(w->job);
	work_free(w);
}

void box_work_stop(struct corral_box_work *w, int code, const char *why)
{
	struct work_answer a = { .r = code };

	box_job_kill(w->job);
	corral_set_err(&a.err, code, "%s", why);
	work_done(w, &a);
}

/*
 * At a halt: the tree the work walks was frozen (or killed), and a halted
 * box's files are evidence, never changed (boxfiles.c): an unpack forked
 * before the halt stops with it.  Done told why; a walk's client may ask
 * again, from the frozen evidence.
 */
void box_works_halt(struct corral_box *b)
{
	char why[sizeof(((struct corral_err *)0)->msg)];

	while (b->works) {
		snprintf(why, sizeof(why), "halted: %.400s; %s", b->halt_reason,
			 b->works->halted);
		box_work_stop(b->works, CORRAL_E_HALTED, why);
	}
}
