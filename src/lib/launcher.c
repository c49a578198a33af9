/*
 * launcher.c - a thread of an unprivileged daemon's that fills the
 * seccomp chain once and clones every sandbox's init.
 *
 * Each sandbox's init loads 8 filling filters under corral's own (3 ms of
 * kernel CPU: seccomp_stack.c).  Root's daemon fills its own chain once
 * instead (corral_seccomp_prefill); an unprivileged one cannot, as that
 * needs no_new_privs on itself, and newuidmap, which it runs, is setuid.
 * But seccomp filters and no_new_privs are a thread's own, and a clone
 * inherits the calling thread's: so the launcher sets no_new_privs on
 * itself alone where loading a filter needs it (no CAP_SYS_ADMIN), fills
 * its own chain a filter at a time, and is the thread that clones init
 * when asked, once it has filled.  init then starts with that chain,
 * and fills only what is left after its own filter, as under root's
 * daemon's (sc_pad_chain).  The other threads, the main
 * one above all, keep no filter and no no_new_privs: newuidmap still
 * gains its privilege, and the daemon's other forks are as before.
 *
 * The clone copies the whole process as the launcher sees it: the caller
 * waits in pthread_cond_wait meanwhile, holding none of glibc's locks
 * (the mutex is released there), as the main thread held none in its own
 * clone before.  The clone runs on the launcher's stack and TLS, which
 * are its own copy; it never returns into the launcher's loop (child_fn
 * does not return, or _exit).  It takes the caller's signal mask, not
 * the launcher's, which blocks all signals so that none of the daemon's
 * handlers ever runs on it.  init's parent-death signal fires when the
 * thread that cloned it exits: the launcher never does, until the whole
 * process does.  Which thread made init changes nothing else the daemon
 * does with it: its pid is the process's child for wait, SIGCHLD and
 * pidfds.  Not for an OCI container, whose init joins a network
 * namespace the caller's thread entered (setns is a thread's own) and
 * has the CLI's parent.
 *
 * Not for `corral run`: from its main() to the clone of init is 0.3 ms
 * (the rest of its start is execve and the loader's, before any thread
 * of ours), a filter at most, and the clone then waits for the
 * launcher's filter in the kernel.
 */
#include "internal.h"

#include <linux/filter.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>

struct launcher {
	pthread_mutex_t mu;
	pthread_cond_t cv;		/* a request, or its answer */
	bool fill_over;			/* filled, or refused */
	bool refused;			/* a filling filter refused, or none to load */
	bool busy;			/* a caller holds the request */
	bool asked;			/* the request is the launcher's to serve */
	bool answered;			/* pid and err are the caller's to read */
	pid_t (*clone_fn)(void *);
	void *clone_arg;
	void (*child_fn)(void *);
	void *child_arg;
	sigset_t mask;			/* the caller's, for the clone */
	pid_t pid;
	int err;
	size_t filled;			/* the launcher's chain, as the kernel counts */
	char comm[16];			/* the caller's thread's name, for the clone */
	pid_t owner;			/* the process it is a thread of */
};

static struct launcher *the_launcher;

/* On the launcher: the clone asked for; in the clone, its start. */
static void serve(struct launcher *l)
{
	pid_t pid = l->clone_fn(l->clone_arg);
	int e = errno;

	if (pid == 0) {
		prctl(PR_SET_NAME, l->comm, 0, 0, 0);
		pthread_sigmask(SIG_SETMASK, &l->mask, NULL);
		sc_prefilled_set(l->filled);
		l->child_fn(l->child_arg);
		_exit(125);
	}
	pthread_mutex_lock(&l->mu);
	l->pid = pid;
	l->err = e;
	l->asked = false;
	l->answered = true;
	pthread_cond_broadcast(&l->cv);
	pthread_mutex_unlock(&l->mu);
}

/*
 * One filling filter more; no_new_privs set on this thread first where
 * the kernel asks for it.  -errno if refused otherwise (the JIT pool
 * full).
 */
static int fill_one(struct launcher *l, struct sock_filter *buf, size_t *left)
{
	size_t before = *left;
	int r = sc_prefill_one(buf, left);

	if (r == -EACCES && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0)
		r = sc_prefill_one(buf, left);
	if (r == 0)
		l->filled += before - *left;
	return r;
}

static void *launcher_main(void *arg)
{
	struct launcher *l = arg;
	struct corral_err err = { 0 };
	/* here, not in the caller's line: sc_own_max probes the kernel */
	size_t left = sc_prefill_size(sc_own_max());
	struct sock_filter *buf = left ? sc_pad_buf(&err) : NULL;
	bool more = buf && sc_prefill_more(left);
	/* nothing to fill (no built-in program to go by): nothing to give */
	bool refused = !more;

	for (;;) {
		pthread_mutex_lock(&l->mu);
		/* named once filled, for ps and top (and the tests that wait for it) */
		if (!more && !l->fill_over)
			prctl(PR_SET_NAME, "corral-launch", 0, 0, 0);
		if (!more && !l->fill_over) {
			l->fill_over = true;
			pthread_cond_broadcast(&l->cv);	/* launcher_start waits */
		}
		l->refused = refused;
		while (!l->asked && l->fill_over)
			pthread_cond_wait(&l->cv, &l->mu);
		if (l->asked) {
			pthread_mutex_unlock(&l->mu);
			serve(l);
			continue;
		}
		pthread_mutex_unlock(&l->mu);
		refused = fill_one(l, buf, &left) < 0;
		more = !refused && sc_prefill_more(left);
		if (!more && buf) {
			sc_pad_buf_free(buf);
			buf = NULL;
		}
	}
	return NULL;
}

void corral_launcher_start(void)
{
	struct launcher *l;
	pthread_attr_t attr;
	sigset_t all, old;
	int r;

	/* under a filter already: another's (probed in line), a daemon's filling */
	if (the_launcher || prctl(PR_GET_SECCOMP, 0, 0, 0, 0) != 0)
		return;
	l = calloc(1, sizeof(*l));
	if (!l)
		return;
	l->owner = getpid();
	if (prctl(PR_GET_NAME, l->comm, 0, 0, 0) < 0)
		snprintf(l->comm, sizeof(l->comm), "corral");
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->cv, NULL);
	if (pthread_attr_init(&attr) != 0) {
		free(l);
		return;
	}
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	/* the thread starts with every signal blocked: they are the others' */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	r = pthread_create(&(pthread_t){ 0 }, &attr, launcher_main, l);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	/* EAGAIN at a pids limit, say: each init fills its own, as before */
	if (r != 0) {
		free(l);
		return;
	}
	/*
	 * Nothing is cloned from any thread while this one runs on its own:
	 * a copy of the process made meanwhile holds glibc's state as this
	 * thread left it.  Right after pthread_create, its descriptor says
	 * "being created" until it runs, and a clone of init made then
	 * waited for it for ever in setresgid (glibc's set*id asks every
	 * thread it knows of, seen as 65534 at a daemon's start, its first
	 * pooled sandbox never ready); while it fills, a malloc lock of its
	 * own would be held in the copy.  So the caller waits until it has
	 * filled (some 3 ms, once), and from then on it runs only while the
	 * caller waits in launcher_clone.
	 */
	pthread_mutex_lock(&l->mu);
	while (!l->fill_over)
		pthread_cond_wait(&l->cv, &l->mu);
	pthread_mutex_unlock(&l->mu);
	the_launcher = l;
}

bool launcher_clone(pid_t (*clone_fn)(void *), void *clone_arg,
		    void (*child_fn)(void *), void *child_arg, pid_t *pid)
{
	struct launcher *l = the_launcher;
	int e;

	/* a fork of the process that started it has no launcher thread */
	if (!l || l->owner != getpid())
		return false;
	pthread_mutex_lock(&l->mu);
	/*
	 * Still filling (the daemon's first few ms): init fills its own on
	 * its thread, as without a launcher, rather than wait for the
	 * launcher's filter in the kernel or fill the rest in line.  Refused
	 * (the JIT pool full): init fills its own, and meets the same
	 * refusal with the same error.
	 */
	if (!l->fill_over || l->refused) {
		pthread_mutex_unlock(&l->mu);
		return false;
	}
	while (l->busy)
		pthread_cond_wait(&l->cv, &l->mu);
	l->busy = true;
	l->clone_fn = clone_fn;
	l->clone_arg = clone_arg;
	l->child_fn = child_fn;
	l->child_arg = child_arg;
	pthread_sigmask(SIG_SETMASK, NULL, &l->mask);
	l->asked = true;
	pthread_cond_broadcast(&l->cv);
	while (!l->answered)
		pthread_cond_wait(&l->cv, &l->mu);
	l->answered = false;
	l->busy = false;
	*pid = l->pid;
	e = l->err;
	pthread_cond_broadcast(&l->cv);
	pthread_mutex_unlock(&l->mu);
	errno = e;
	return true;
}
