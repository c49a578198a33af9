/*
 * floor_host.c - what this host charges for the kernel's smallest pieces of
 * work, for bench/launch.py to print beside the counts of what a run asks
 * of the kernel (syscalls, page faults, context switches): on a
 * paravirtualized guest each costs several times what it does on bare
 * metal, and a sandbox's start is made of them.
 *
 *   floor_host [ROUNDS]
 *
 * Prints one line a measure, "NAME MICROSECONDS", the median of ROUNDS
 * (default 5) rounds:
 *   syscall   getppid(2), which does nothing in the kernel but return
 *   fault     the first write to an anonymous page (a zeroed page mapped)
 *   cow       the first write to a page a fork left shared (copied), in
 *             the child, as a forked sandbox's init pays it
 *   switch    half the round trip of a byte bounced between two
 *             processes pinned to one CPU over two pipes: a context
 *             switch, with the pipe write before it and the read after
 * Exit 1 if something it needs fails.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PAGES		4096
#define SYSCALLS	100000
#define BOUNCES		20000
#define ROUNDS_MAX	50

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *xs, int n)
{
	qsort(xs, n, sizeof(*xs), cmp_double);
	return n % 2 ? xs[n / 2] : (xs[n / 2 - 1] + xs[n / 2]) / 2;
}

/* pipe(2) or fork(2), or the bench ends saying which failed */
static void must(int r, const char *what)
{
	if (r < 0) {
		perror(what);
		exit(1);
	}
}

static double syscall_us(void)
{
	double t = now_us();

	for (int i = 0; i < SYSCALLS; i++)
		syscall(SYS_getppid);
	return (now_us() - t) / SYSCALLS;
}

static char *map_pages(void)
{
	char *p = mmap(NULL, PAGES * 4096L, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("floor_host: mmap");
		exit(1);
	}
	return p;
}

static double touch_us(char *p, char v)
{
	double t = now_us();

	for (long i = 0; i < PAGES; i++)
		((volatile char *)p)[i * 4096] = v;
	return (now_us() - t) / PAGES;
}

static double fault_us(void)
{
	char *p = map_pages();
	double us = touch_us(p, 1);

	munmap(p, PAGES * 4096L);
	return us;
}

/* The child's copies: it sends its figure back over a pipe. */
static double cow_us(void)
{
	char *p = map_pages();
	double us = -1;
	int fd[2], st;
	pid_t pid;

	touch_us(p, 1);
	must(pipe(fd), "floor_host: pipe");
	must(pid = fork(), "floor_host: fork");
	if (pid == 0) {
		us = touch_us(p, 2);
		_exit(write(fd[1], &us, sizeof(us)) == sizeof(us) ? 0 : 1);
	}
	close(fd[1]);
	if (read(fd[0], &us, sizeof(us)) != sizeof(us))
		us = -1;
	close(fd[0]);
	waitpid(pid, &st, 0);
	munmap(p, PAGES * 4096L);
	if (us < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "floor_host: the forked child failed\n");
		exit(1);
	}
	return us;
}

static void pin_cpu0(void)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(0, &set);
	/* unpinned, the two may run on two CPUs and never switch */
	if (sched_setaffinity(0, sizeof(set), &set) < 0) {
		perror("floor_host: sched_setaffinity");
		exit(1);
	}
}

static double switch_us(void)
{
	int ab[2], ba[2], st;
	char c = 0;
	double t;
	pid_t pid;

	must(pipe(ab), "floor_host: pipe");
	must(pipe(ba), "floor_host: pipe");
	must(pid = fork(), "floor_host: fork");
	if (pid == 0) {
		for (int i = 0; i < BOUNCES; i++)
			if (read(ab[0], &c, 1) != 1 || write(ba[1], &c, 1) != 1)
				_exit(1);
		_exit(0);
	}
	t = now_us();
	for (int i = 0; i < BOUNCES; i++)
		if (write(ab[1], &c, 1) != 1 || read(ba[0], &c, 1) != 1) {
			fprintf(stderr, "floor_host: the bounce broke off\n");
			exit(1);
		}
	t = now_us() - t;
	waitpid(pid, &st, 0);
	close(ab[0]);
	close(ab[1]);
	close(ba[0]);
	close(ba[1]);
	return t / BOUNCES / 2;
}

int main(int argc, char **argv)
{
	static const char *const names[] = { "syscall", "fault", "cow", "switch" };
	double (*const fns[])(void) = { syscall_us, fault_us, cow_us, switch_us };
	double xs[ROUNDS_MAX];
	int rounds = argc > 1 ? atoi(argv[1]) : 5;

	if (rounds < 1 || rounds > ROUNDS_MAX) {
		fprintf(stderr, "floor_host: ROUNDS from 1 to %d, not %s\n",
			ROUNDS_MAX, argv[1]);
		return 1;
	}
	pin_cpu0();
	for (size_t f = 0; f < sizeof(fns) / sizeof(fns[0]); f++) {
		for (int i = 0; i < rounds; i++)
			xs[i] = fns[f]();
		printf("%s %.3f\n", names[f], median(xs, rounds));
	}
	return 0;
}
