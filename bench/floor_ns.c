/*
 * floor_ns.c - the least the kernel spends to make a burst of sandboxes'
 * namespaces on this host, for bench/serve.py to print beside the
 * daemon's burst of creates (issue 17's aim: 100 at once within 250 ms).
 *
 *   floor_ns COUNT THREADS [root]
 *
 * THREADS threads (one a CPU is what the daemon's burst can use) each
 * clone COUNT / THREADS children into new user, mount, pid, ipc, uts and
 * network namespaces, as sandbox.c does, and write their uid and gid
 * maps (one id: what any caller may write).  A child says it is there
 * and waits; nothing is mounted, no loopback is brought up, no cgroup
 * made, nothing exec'd: every sandbox needs at least this much.  Prints
 * the milliseconds from the first clone until every child has said it is
 * there, then those from the kill of all until all are reaped (the
 * teardown a burst leaves the host, mostly the network namespaces').
 *
 * With "root", each child first makes the least root a sandbox of the
 * host's programs has (a tmpfs, /usr read-only, /proc, pivot_root) and
 * runs /bin/true there (a pool-0 burst's "create + first exec" at the
 * least); once all have, each runs /bin/true again, all at once (a full
 * pool's burst at the least).  Prints the three times: until all ran
 * once, until all ran again, the teardown.
 * Exit 1 if anything fails, every child made killed and reaped first.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NS_FLAGS (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | \
		  CLONE_NEWUTS | CLONE_NEWNET)
#define COUNT_MAX 4096

struct worker {
	pthread_t tid;
	int from, to;		/* children [from, to) */
	int failed;
};

static pid_t pids[COUNT_MAX];
static int ready_rd, ready_wr, again_rd, again_wr;

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int write_file(pid_t pid, const char *what, const char *text)
{
	char path[64];
	int fd, r = 0;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, what);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text)) {
		fprintf(stderr, "floor_ns: cannot write %s: %s\n", path, strerror(errno));
		r = -1;
	}
	if (fd >= 0)
		close(fd);
	return r;
}

static bool with_root;

/*
 * The least view a sandbox of the host's programs has: a tmpfs root, the
 * host's /usr bound read-only (and the usual links into it), its own
 * /proc; the old root detached.  Then one command run and waited for.
 */
static int run_true(void);

static int root_and_true(void)
{
	static const char *const links[][2] = {
		{ "usr/bin", "/tmp/bin" }, { "usr/lib", "/tmp/lib" },
		{ "usr/lib64", "/tmp/lib64" }, { "usr/sbin", "/tmp/sbin" },
	};

	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") < 0 ||
	    mkdir("/tmp/usr", 0755) < 0 || mkdir("/tmp/proc", 0755) < 0 ||
	    mkdir("/tmp/old", 0755) < 0 ||
	    mount("/usr", "/tmp/usr", NULL, MS_BIND | MS_REC, NULL) < 0 ||
	    mount(NULL, "/tmp/usr", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) < 0 ||
	    mount("proc", "/tmp/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return -1;
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++)
		if (symlink(links[i][0], links[i][1]) < 0)
			return -1;
	if (syscall(SYS_pivot_root, "/tmp", "/tmp/old") < 0 || chdir("/") < 0 ||
	    umount2("/old", MNT_DETACH) < 0)
		return -1;
	return run_true();
}

/* What a sandbox's init does for each command: fork, exec, wait. */
static int run_true(void)
{
	char *argv[] = { "/bin/true", NULL }, *envp[] = { NULL };
	int status;
	pid_t pid;

	/* not fork(): cloned from a process with threads, the child may hold
	 * none of glibc's locks that fork() takes */
	pid = (pid_t)syscall(SYS_clone, SIGCHLD, NULL, NULL, NULL, 0);
	if (pid == 0) {
		execve(argv[0], argv, envp);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || status != 0)
		return -1;
	return 0;
}

/* In the new namespaces: wait for the maps, say so, wait to be killed. */
static void child(int go_rd)
{
	char c;

	if (read(go_rd, &c, 1) != 1)
		_exit(1);
	if (with_root && root_and_true() < 0) {
		static const char msg[] = "floor_ns: a child's root or /bin/true failed\n";

		/* no stdio: its lock may be another thread's, copied held */
		(void)!write(2, msg, sizeof(msg) - 1);
		_exit(1);
	}
	if (write(ready_wr, "r", 1) != 1)
		_exit(1);
	/* with a root: a second command when told, as into a pooled sandbox */
	if (read(again_rd, &c, 1) != 1 || !with_root)
		_exit(1);
	if (run_true() < 0 || write(ready_wr, "a", 1) != 1)
		_exit(1);
	for (;;)
		pause();	/* until killed (a read would take another's word) */
}

static int make_one(int i)
{
	char map[64];
	int go[2];

	if (pipe2(go, O_CLOEXEC) < 0)
		return -1;
	pids[i] = (pid_t)syscall(SYS_clone, NS_FLAGS | SIGCHLD, NULL, NULL, NULL, 0);
	if (pids[i] == 0) {
		close(go[1]);
		child(go[0]);
	}
	close(go[0]);
	if (pids[i] < 0) {
		fprintf(stderr, "floor_ns: clone: %s\n", strerror(errno));
		close(go[1]);
		return -1;
	}
	snprintf(map, sizeof(map), "0 %d 1\n", (int)geteuid());
	if (write_file(pids[i], "uid_map", map) < 0 ||
	    write_file(pids[i], "setgroups", "deny") < 0)
		goto fail;
	snprintf(map, sizeof(map), "0 %d 1\n", (int)getegid());
	if (write_file(pids[i], "gid_map", map) < 0 || write(go[1], "g", 1) != 1)
		goto fail;
	close(go[1]);
	return 0;
fail:
	close(go[1]);
	return -1;
}

static void *work(void *arg)
{
	struct worker *w = arg;

	for (int i = w->from; i < w->to && !w->failed; i++)
		if (make_one(i) < 0)
			w->failed = 1;
	return NULL;
}

/* n words from the children; -1 if one died first (in 30 s at most) */
static int wait_words(int n)
{
	char buf[256];
	int got = 0;

	while (got < n) {
		struct pollfd pfd = { .fd = ready_rd, .events = POLLIN };
		ssize_t k = -1;

		if (poll(&pfd, 1, 30000) == 1)
			k = read(ready_rd, buf, sizeof(buf) < (size_t)(n - got) ?
				 sizeof(buf) : (size_t)(n - got));
		if (k <= 0)
			return -1;
		got += (int)k;
	}
	return 0;
}

/* Kill and reap every child made; -1 if one could not be reaped. */
static int reap_all(int n)
{
	int r = 0;

	for (int i = 0; i < n; i++)
		if (pids[i] > 0)
			kill(pids[i], SIGKILL);
	for (int i = 0; i < n; i++)
		if (pids[i] > 0 && waitpid(pids[i], NULL, 0) < 0)
			r = -1;
	return r;
}

int main(int argc, char **argv)
{
	struct worker w[64];
	int fds[2], n, nt, failed = 0;
	double t0, t1, t2, t3;

	if (argc < 3 || argc > 4 || (argc == 4 && strcmp(argv[3], "root"))) {
		fprintf(stderr, "usage: floor_ns COUNT THREADS [root]\n");
		return 2;
	}
	with_root = argc == 4;
	n = atoi(argv[1]);
	nt = atoi(argv[2]);
	if (n < 1 || n > COUNT_MAX || nt < 1 || nt > 64 || nt > n) {
		fprintf(stderr, "floor_ns: COUNT 1..%d, THREADS 1..64 and <= COUNT\n",
			COUNT_MAX);
		return 2;
	}
	if (pipe2(fds, O_CLOEXEC) < 0)
		return 1;
	ready_rd = fds[0];
	ready_wr = fds[1];
	if (pipe2(fds, O_CLOEXEC) < 0)
		return 1;
	again_rd = fds[0];
	again_wr = fds[1];
	t0 = now_ms();
	for (int i = 0; i < nt; i++) {
		w[i] = (struct worker){ .from = n * i / nt, .to = n * (i + 1) / nt };
		if (pthread_create(&w[i].tid, NULL, work, &w[i]) != 0) {
			w[i].failed = 1;
			w[i].to = w[i].from;
			w[i].tid = pthread_self();
		}
	}
	for (int i = 0; i < nt; i++) {
		if (!pthread_equal(w[i].tid, pthread_self()))
			pthread_join(w[i].tid, NULL);
		failed |= w[i].failed;
	}
	if (!failed)
		failed = wait_words(n) < 0;
	t1 = now_ms();
	/* with a root: a second command in each, all at once */
	for (int i = 0; with_root && !failed && i < n; i++)
		failed = write(again_wr, "a", 1) != 1;
	if (with_root && !failed)
		failed = wait_words(n) < 0;
	t2 = now_ms();
	if (reap_all(n) < 0)
		failed = 1;
	t3 = now_ms();
	if (failed) {
		fprintf(stderr, "floor_ns: a child failed or did not answer\n");
		return 1;
	}
	if (with_root)
		printf("%.2f %.2f %.2f\n", t1 - t0, t2 - t1, t3 - t2);
	else
		printf("%.2f %.2f\n", t1 - t0, t3 - t2);
	return 0;
}
