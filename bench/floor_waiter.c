/*
 * floor_waiter.c - what a waiting call's process costs its call at exec,
 * by what it is while it waits (issue 17).  init's spare is a fork of
 * init: at its exec the kernel tears down its copy of init's memory
 * (page tables, the pages it mapped), on the call's path.  A process
 * that had already exec'd a tiny program while it waited (floor_wait.c)
 * has nearly nothing to tear down.  Both are timed here the same way:
 * the parent writes a byte to the waiting child's pipe, the child execs
 * EXIT (floor_exit.c), the parent's waitpid returns.
 *
 *   floor_waiter RUNS PACE_MS MB WAIT EXIT
 *
 * MB: anonymous memory the parent touched before its forks (init's
 * spare holds ~0.3 MB of its own and ~1 MB of mapped files).  The two
 * kinds alternate, RUNS rounds of each, PACE_MS apart (0: 2 ms, for the
 * child to be waiting); prints p10, p50 and p90 in us of each.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void pause_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* One round: a child that waits as a fork (wait NULL) or in WAIT. */
static double one(const char *wait, const char *exit_path, long pace)
{
	char *wargv[] = { (char *)wait, (char *)exit_path, NULL };
	char *eargv[] = { (char *)exit_path, NULL };
	int p[2], st;
	double t;
	pid_t pid;
	char c;

	if (pipe(p) < 0) {
		perror("floor_waiter: pipe");
		exit(1);
	}
	pid = fork();
	if (pid < 0) {
		perror("floor_waiter: fork");
		exit(1);
	}
	if (pid == 0) {
		if (dup2(p[0], 3) < 0)
			_exit(126);
		close(p[1]);
		if (wait)
			execve(wait, wargv, environ);
		else if (read(3, &c, 1) == 1)
			execve(exit_path, eargv, environ);
		_exit(127);
	}
	close(p[0]);
	pause_ms(pace > 0 ? pace : 2);
	t = now_us();
	if (write(p[1], "x", 1) != 1 || waitpid(pid, &st, 0) != pid) {
		perror("floor_waiter: write or waitpid");
		exit(1);
	}
	t = now_us() - t;
	close(p[1]);
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "floor_waiter: the child ended with status 0x%x\n", st);
		exit(1);
	}
	return t;
}

static void print(const char *what, double *t, long n)
{
	qsort(t, n, sizeof(*t), cmp);
	printf("%-34s p10 %5.0f  p50 %5.0f  p90 %5.0f us\n", what, t[n / 10], t[n / 2], t[n * 9 / 10]);
}

int main(int argc, char **argv)
{
	long runs, pace, mb;
	double *fork_t, *wait_t;
	char *mem;

	if (argc != 6) {
		fprintf(stderr, "usage: floor_waiter RUNS PACE_MS MB WAIT EXIT\n");
		return 2;
	}
	runs = strtol(argv[1], NULL, 10);
	pace = strtol(argv[2], NULL, 10);
	mb = strtol(argv[3], NULL, 10);
	fork_t = calloc(runs, sizeof(double));
	wait_t = calloc(runs, sizeof(double));
	mem = malloc((size_t)mb << 20 | 1);
	if (runs < 1 || !fork_t || !wait_t || !mem) {
		fprintf(stderr, "floor_waiter: RUNS >= 1, and memory for them\n");
		return 1;
	}
	memset(mem, 1, (size_t)mb << 20);
	for (long i = 0; i < 5; i++) {
		one(NULL, argv[5], 0);
		one(argv[4], argv[5], 0);
	}
	for (long i = 0; i < runs; i++) {
		fork_t[i] = one(NULL, argv[5], pace);
		wait_t[i] = one(argv[4], argv[5], pace);
	}
	print("a waiting fork execs, exits", fork_t, runs);
	print("a waiting tiny program does", wait_t, runs);
	return 0;
}
