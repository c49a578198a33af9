/*
 * sigdeny.c - denied calls a signal interrupts before the supervisor reads
 * them (SECURITY.md, the seccomp sensor's count of drops).
 *
 *   sigdeny N
 *
 * A thread calls unshare(CLONE_NEWUSER) N times, each denied by the
 * filter and sent to the supervisor; a sibling thread signals it
 * (SIGUSR1, a handler without SA_RESTART) without pause until it is done,
 * so that many calls come back EINTR, dropped by the kernel unread.
 * Prints "calls N eintr E denied D other O": the test compares E + D
 * with what the record counted.  The sibling stops after N calls are
 * done or 10 s, whichever is first; so does the caller.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static atomic_bool done;
static pid_t caller_tid;

static void on_usr1(int sig)
{
	(void)sig;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *signaller(void *arg)
{
	double end = now() + 10;

	(void)arg;
	while (!atomic_load(&done) && now() < end)
		if (syscall(SYS_tgkill, getpid(), caller_tid, SIGUSR1) < 0)
			break;
	return NULL;
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_usr1 };	/* no SA_RESTART */
	long n = argc > 1 ? strtol(argv[1], NULL, 0) : 200;
	long eintr = 0, denied = 0, other = 0;
	double end = now() + 10;
	pthread_t t;
	int r;

	if (n <= 0 || n > 100000 || sigaction(SIGUSR1, &sa, NULL) < 0) {
		fprintf(stderr, "sigdeny: N in 1..100000, and SIGUSR1 handled\n");
		return 2;
	}
	caller_tid = (pid_t)syscall(SYS_gettid);
	r = pthread_create(&t, NULL, signaller, NULL);
	if (r) {
		fprintf(stderr, "sigdeny: pthread_create: %s\n", strerror(r));
		return 2;
	}
	for (long i = 0; i < n && now() < end; i++) {
		if (syscall(SYS_unshare, CLONE_NEWUSER) == 0)
			other++;
		else if (errno == EINTR)
			eintr++;
		else if (errno == EPERM)
			denied++;
		else
			other++;
	}
	atomic_store(&done, true);
	pthread_join(t, NULL);
	printf("calls %ld eintr %ld denied %ld other %ld\n", n, eintr, denied, other);
	return 0;
}
