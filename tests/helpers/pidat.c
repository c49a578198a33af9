/*
 * pidat PID FILE [fork] [setsid]: a process of ours at host pid PID,
 * stopped (SIGSTOP), that writes FILE if it is ever continued; with
 * "setsid" it makes a session first, so that a signal to the process
 * group PID reaches it.  For a test that a pid some
 * process left (dead, reaped by another) gets no signal of the daemon's
 * meant for that process: what an attacker in a sandbox does by forking
 * until pid_max wraps.
 *
 * As root, ns_last_pid is set to PID - 1 (64 tries at most); else, or if that
 * did not get it, or "fork" was said (to time what an attacker without
 * ns_last_pid takes), we fork until the pid counter comes round to PID:
 * at most 3 * pid_max forks and 60 s, less where the rate so far says
 * the counter will not come round in time.  Prints PID once the process is
 * there, then waits for it: it is our child until we reap it, so the test
 * may kill it by that pid (kill -9 PID) and we exit 0; SIGTERM to us
 * kills it too, by its pidfd (the test's cleanup, by our pid: once we
 * reaped it, its pid is anyone's).  Exit 1: the pid was not had
 * (another process took it); 2: usage or a failed syscall.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WAIT_MAX_S	120	/* the test kills it well before */
#define WRAP_MAX_S	60

static pid_t target;
static bool own_session;
static int child_fd = -1;	/* its pidfd: exact even once we reaped it */
static const char *file;

/*
 * Not killed by the test (it failed first, SIGTERM to us; or never):
 * the stopped child with us, by its pid (our child, not reaped yet).
 */
static void on_end(int sig)
{
	(void)sig;
	syscall(SYS_pidfd_send_signal, child_fd, SIGKILL, NULL, 0);
}

/* The child: at the pid, stop; if continued, say so in FILE. */
static void child(void)
{
	int fd;

	if (getpid() != target)
		_exit(0);
	if (own_session && setsid() < 0)
		_exit(1);
	raise(SIGSTOP);
	fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd >= 0) {
		(void)!write(fd, "continued\n", 10);
		close(fd);
	}
	_exit(0);
}

static pid_t last;	/* the last child's pid */

/* One fork: the child's pid once it is the target, else 0 (reaped). */
static pid_t one(void)
{
	pid_t pid = last = fork();

	if (pid < 0) {
		fprintf(stderr, "pidat: fork: %s\n", strerror(errno));
		exit(2);
	}
	if (pid == 0)
		child();
	if (pid == target)
		return pid;
	if (waitpid(pid, NULL, 0) < 0) {
		fprintf(stderr, "pidat: waitpid %d: %s\n", (int)pid, strerror(errno));
		exit(2);
	}
	return 0;
}

/*
 * As root: the next pid named outright.  Another process may fork between
 * the write and ours, whose pid comes only once fork has copied our memory
 * (a millisecond and more on a loaded guest).  Beside make check's lanes'
 * many forks a second, five tries in a row once lost to them, and the
 * fallback, forking until the counter came round, took 28 s of CPU: 64
 * tries, each one fork.
 */
#define LAST_PID_TRIES	64

static pid_t by_last_pid(void)
{
	char buf[32];
	int len = snprintf(buf, sizeof(buf), "%d", (int)target - 1);

	for (int i = 0; i < LAST_PID_TRIES; i++) {
		int fd = open("/proc/sys/kernel/ns_last_pid", O_WRONLY | O_CLOEXEC);
		pid_t pid;

		if (fd < 0)
			return 0;
		if (write(fd, buf, (size_t)len) != len) {
			close(fd);
			return 0;
		}
		close(fd);
		if ((pid = one()) > 0)
			return pid;
	}
	return 0;
}

static long pid_max(void)
{
	FILE *f = fopen("/proc/sys/kernel/pid_max", "re");
	long n = 0;

	if (!f || fscanf(f, "%ld", &n) != 1)
		n = 32768;
	if (f)
		fclose(f);
	return n;
}

static long forks;	/* by_wrap's, said when it gives up */
static const char *why = "";

/* the kernel's first pid after a wrap (RESERVED_PIDS) */
#define PID_WRAP_TO	300

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * Whether the forks still to go (from the last pid round to the target)
 * fit in what is left of WRAP_MAX_S at the rate so far: on a loaded host
 * a fork takes 4 ms, 32768 of them two minutes, and waiting the whole
 * bound to learn it held a test's lane for nothing.
 */
/* from pid a forward to pid b, round pid_max (max) if need be */
static long pids_between(long a, long b, long max)
{
	return b >= a ? b - a : max - a + b - PID_WRAP_TO;
}

/*
 * The counter's pace so far (our forks and everyone else's) against the
 * pids still to go to the target.
 */
static bool in_time(double t0, pid_t first, long max)
{
	double spent = now_s() - t0;
	long moved = pids_between(first, last, max);
	double rate = (double)(moved > 0 ? moved : 1) / (spent > 0 ? spent : 1e-3);

	return (double)pids_between(last, target, max) / rate <= WRAP_MAX_S - spent;
}

static pid_t by_wrap(void)
{
	double t0 = now_s();
	long max = 3 * pid_max();
	pid_t first = 0;

	for (forks = 1; forks <= max && now_s() - t0 < WRAP_MAX_S; forks++) {
		pid_t pid = one();

		if (pid > 0)
			return pid;
		if (forks == 1)
			first = last;
		if (forks % 1024)
			continue;
		/* taken by another process, alive: it will not come round */
		if (kill(target, 0) == 0 || errno == EPERM) {
			why = ": another process has it";
			return 0;
		}
		if (!in_time(t0, first, max / 3)) {
			why = ": the counter would not come round in time at this rate";
			return 0;
		}
	}
	why = forks > max ? ": pid_max forks three times over" : ": out of time";
	return 0;
}

int main(int argc, char **argv)
{
	bool fork_only = false;
	pid_t pid;
	int status;

	for (int i = 3; i < argc; i++) {
		if (!strcmp(argv[i], "fork"))
			fork_only = true;
		else if (!strcmp(argv[i], "setsid"))
			own_session = true;
		else
			argc = 0;
	}
	if (argc < 3 || (target = (pid_t)atol(argv[1])) <= 1) {
		fprintf(stderr, "usage: pidat PID FILE [fork] [setsid]\n");
		return 2;
	}
	file = argv[2];
	pid = fork_only ? 0 : by_last_pid();
	if (!pid)
		pid = by_wrap();
	if (!pid) {
		fprintf(stderr, "pidat: pid %d not had (%ld forks, the last %d)%s\n",
			(int)target, forks, (int)last, why);
		return 1;
	}
	child_fd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (child_fd < 0) {
		fprintf(stderr, "pidat: pidfd_open %d: %s\n", (int)pid, strerror(errno));
		kill(pid, SIGKILL);	/* our child, not reaped: exact */
		waitpid(pid, NULL, 0);
		return 2;
	}
	printf("%d\n", (int)pid);
	fflush(stdout);
	/* bounded: the test kills it; if it never does, we do */
	signal(SIGALRM, on_end);
	signal(SIGTERM, on_end);
	alarm(WAIT_MAX_S);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return 0;
}
