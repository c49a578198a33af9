/*
 * floor_spawn.c - the least a program can spend to run a command and learn
 * how it ended, for bench/serve.py to print beside the daemon's exec: no
 * sandbox, no daemon, no HTTP.  posix_spawn (glibc's clone with CLONE_VM
 * and CLONE_VFORK: no page tables copied), then waitpid.  An exec round
 * trip of `true` through any daemon on this host costs at least this.
 *
 *   floor_spawn RUNS PACE_MS COMMAND [ARG...]
 *
 * Five warm-up runs, then RUNS timed ones, PACE_MS apart (0: back to
 * back); prints each in milliseconds, one a line.  Exit 1 if a run fails.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

extern char **environ;

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void pause_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int main(int argc, char **argv)
{
	long runs, pace;
	double t;
	pid_t pid;
	int r, status;

	if (argc < 4) {
		fprintf(stderr, "usage: floor_spawn RUNS PACE_MS COMMAND [ARG...]\n");
		return 2;
	}
	runs = strtol(argv[1], NULL, 10);
	pace = strtol(argv[2], NULL, 10);
	for (long i = 0; i < runs + 5; i++) {
		if (pace > 0)
			pause_ms(pace);
		t = now_ms();
		r = posix_spawn(&pid, argv[3], NULL, NULL, argv + 3, environ);
		if (r != 0) {
			fprintf(stderr, "floor_spawn: posix_spawn %s: %s\n", argv[3], strerror(r));
			return 1;
		}
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
		    WEXITSTATUS(status) != 0) {
			fprintf(stderr, "floor_spawn: %s did not exit 0 (status %#x)\n",
				argv[3], status);
			return 1;
		}
		t = now_ms() - t;
		if (i >= 5)
			printf("%.4f\n", t);
	}
	return 0;
}
