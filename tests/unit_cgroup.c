/*
 * unit_cgroup.c - the cgroup managers against the real kernel, and their
 * parsers against text.
 *
 * The readers of /proc/PID/cgroup and mountinfo and the managers' table
 * are checked everywhere.  Without a usable cgroup (unprivileged, nothing
 * delegated) only the CG_NONE path and the rlimit fallback are checked.
 * With one (root, or a delegated corral.<uid>) the limits are tested for
 * real: OOM kill (and v1's OOM events), pids.max, freezer (waiting, and
 * from an event loop), cg_kill of a process tree (waiting, and from an
 * event loop), CPU quota, and that cg_destroy leaves nothing.
 *
 * The test process is a child subreaper, so orphaned grandchildren come back
 * to it and every process it made is reaped.  Every wait is bounded.
 */
#include "cgroup_internal.h"
#include "unit.h"
#include "fdpass.h"

#include <event2/event.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MiB (UINT64_C(1) << 20)

/* ---- helpers --------------------------------------------------------- */

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void group_name(char *buf, size_t len, const char *tag)
{
	snprintf(buf, len, "ut%d-%s", (int)getpid(), tag);
}

/*
 * Call fn on every "<mount>/<corral|corral.uid>/corral-<name>" directory of
 * every cgroup mount; returns how many exist.
 */
static int group_dirs_each(const char *name,
			   int (*fn)(const char *dir, void *arg), void *arg)
{
	char line[4096], mnt[1024], fstype[64], dir[2048], parent[64];
	int found = 0;
	FILE *f;

	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char *sep = strstr(line, " - ");
		struct stat st;

		if (!sep || sscanf(line, "%*s %*s %*s %*s %1023s", mnt) != 1 ||
		    sscanf(sep, " - %63s", fstype) != 1)
			continue;
		if (strcmp(fstype, "cgroup") && strcmp(fstype, "cgroup2"))
			continue;
		for (int i = 0; i < 2; i++) {
			if (i)
				snprintf(parent, sizeof(parent), "corral.%u",
					 (unsigned)geteuid());
			else
				snprintf(parent, sizeof(parent), "corral");
			snprintf(dir, sizeof(dir), "%s/%s/corral-%s", mnt,
				 parent, name);
			if (stat(dir, &st) == 0) {
				found++;
				if (fn && fn(dir, arg))
					break;
			}
		}
	}
	fclose(f);
	return found;
}

static int group_dirs(const char *name)
{
	return group_dirs_each(name, NULL, NULL);
}

struct file_query {
	const char *file;
	char buf[256];
	bool found;
};

static int read_one(const char *dir, void *arg)
{
	struct file_query *q = arg;
	char path[4096];
	FILE *f;

	if (q->found)
		return 1;
	snprintf(path, sizeof(path), "%s/%s", dir, q->file);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (fgets(q->buf, sizeof(q->buf), f)) {
		q->buf[strcspn(q->buf, "\n")] = '\0';
		q->found = true;
	}
	fclose(f);
	return q->found;
}

/* Contents (first line) of a file in the group, whichever hierarchy has it. */
static bool group_file(const char *name, const char *file, char *buf,
		       size_t len)
{
	struct file_query q = { .file = file };

	group_dirs_each(name, read_one, &q);
	if (q.found)
		snprintf(buf, len, "%s", q.buf);
	return q.found;
}

/* A child that waits on a pipe before running fn: attach it first. */
struct kid {
	pid_t pid;
	int go;
};

static int kid_spawn(struct kid *k, void (*fn)(void *), void *arg)
{
	int p[2];
	char c;

	k->pid = -1;
	k->go = -1;
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	k->pid = fork();
	if (k->pid < 0) {
		close(p[0]);
		close(p[1]);
		return -errno;
	}
	if (k->pid == 0) {
		close(p[1]);
		if (read(p[0], &c, 1) != 1)
			_exit(99);
		close(p[0]);
		fn(arg);
		_exit(0);
	}
	close(p[0]);
	k->go = p[1];
	return 0;
}

static void kid_go(struct kid *k)
{
	if (k->go >= 0) {
		if (write(k->go, "g", 1) != 1)
			perror("kid_go");
		close(k->go);
		k->go = -1;
	}
}

/* A kid moved into cg before it runs fn; one that cannot be is killed. */
static void spawn_in(struct cg *cg, struct kid *k, void (*fn)(void *),
		     void *arg)
{
	struct corral_err err = { 0 };

	CHECK(kid_spawn(k, fn, arg) == 0);
	if (k->pid > 0 && cg_attach(cg, k->pid, &err) < 0) {
		fprintf(stderr, "  %s\n", err.msg);
		CHECK(!"cg_attach");
		kill(k->pid, SIGKILL);
	}
	kid_go(k);
}

/* Reap k (bounded); after timeout_ms it is SIGKILLed.  Status or -1. */
static int kid_wait(struct kid *k, unsigned timeout_ms)
{
	uint64_t deadline = corral_now_ms() + timeout_ms;
	bool killed = false;
	int st;

	if (k->go >= 0) {
		close(k->go);	/* a waiting child reads EOF and exits */
		k->go = -1;
	}
	if (k->pid <= 0)
		return -1;
	for (;;) {
		pid_t r = waitpid(k->pid, &st, WNOHANG);

		if (r == k->pid) {
			k->pid = -1;
			return st;
		}
		if (r < 0)
			return -1;
		if (corral_now_ms() >= deadline) {
			if (killed) {
				fprintf(stderr, "  pid %d did not die\n",
					(int)k->pid);
				return -1;
			}
			fprintf(stderr, "  pid %d: timeout, SIGKILL\n",
				(int)k->pid);
			kill(k->pid, SIGKILL);
			killed = true;
			deadline = corral_now_ms() + 2000;
		}
		sleep_ms(5);
	}
}

/* Reap every remaining child (orphans come to us: subreaper).  Bounded. */
static int reap_all(unsigned timeout_ms)
{
	uint64_t deadline = corral_now_ms() + timeout_ms;
	int n = 0, st;

	for (;;) {
		pid_t r = waitpid(-1, &st, WNOHANG);

		if (r > 0) {
			n++;
			continue;
		}
		if (r < 0 || corral_now_ms() >= deadline)
			return n;
		sleep_ms(5);
	}
}

/* Read exactly len bytes within timeout_ms; false on EOF or timeout. */
static bool read_full(int fd, void *buf, size_t len, unsigned timeout_ms)
{
	uint64_t deadline = corral_now_ms() + timeout_ms;
	size_t got = 0;

	while (got < len) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		uint64_t now = corral_now_ms();
		ssize_t n;

		if (now >= deadline ||
		    poll(&pfd, 1, (int)(deadline - now)) <= 0)
			return false;
		n = read(fd, (char *)buf + got, len - got);
		if (n <= 0)
			return false;
		got += (size_t)n;
	}
	return true;
}

/*
 * The group's CPU time moves past from's by 20 ms (a spinner thawed gets
 * it however loaded the machine is): true, *now the reading.  5 s at most.
 */
static bool cpu_grows(struct cg *cg, const struct cg_stats *from,
		      struct cg_stats *now)
{
	uint64_t deadline = corral_now_ms() + 5000;

	do {
		sleep_ms(20);
		if (cg_stats(cg, now) < 0)
			return false;
		if (now->cpu_ns > from->cpu_ns + 20 * 1000000ull)
			return true;
	} while (corral_now_ms() < deadline);
	return false;
}

static bool have_cgroup(void)
{
	struct corral_features f = { 0 };

	cg_probe(&f);
	return strcmp(f.limits, "rlimit") != 0;
}

/* cg_create with a check, or NULL (and a note) when there is no cgroup. */
static struct cg *make_group(const char *name, const struct corral_policy *p)
{
	struct corral_err err = { 0 };
	struct cg *cg = NULL;
	int r;

	r = cg_create(&cg, name, p, 0, &err);
	if (r < 0)
		fprintf(stderr, "  cg_create(%s): %s\n", name, err.msg);
	CHECK(r == 0);
	if (r == 0 && cg_mode(cg) == CG_NONE) {
		printf("# skip: no cgroup here (%s)\n", cg_mode_name(cg));
		cg_destroy(cg);
		return NULL;
	}
	return cg;
}

static void destroy_and_check(struct cg *cg, const char *name)
{
	cg_destroy(cg);
	CHECK(group_dirs(name) == 0);
}

/* ---- children -------------------------------------------------------- */

static void child_hog(void *arg)
{
	size_t len = 100 * MiB;
	char *m;

	(void)arg;
	m = mmap(NULL, len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		_exit(3);
	for (size_t i = 0; i < len; i += 4096)
		m[i] = 1;
	_exit(0);
}

struct fork_report {
	int ok, failed, first_errno;
};

static void child_forker(void *arg)
{
	struct fork_report rep = { 0 };
	int fd = *(int *)arg;

	setpgid(0, 0);		/* the test's safety net: kill(-pid) */
	for (int i = 0; i < 64; i++) {
		pid_t pid = fork();

		if (pid == 0) {
			for (;;)
				pause();
		}
		if (pid > 0)
			rep.ok++;
		else if (rep.failed++ == 0)
			rep.first_errno = errno;
	}
	if (write(fd, &rep, sizeof(rep)) != sizeof(rep))
		_exit(4);
	for (;;)
		pause();
}

/*
 * Loopback connections whose buffers nobody reads, filled until the
 * kernel takes no more (at most 24 of them), then one byte on *arg: the
 * sockets are held until the kid is killed.
 */
static void child_tcp_filler(void *arg)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	static char chunk[65536];
	int fd = *(int *)arg, l;

	setpgid(0, 0);
	l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(l, 32) < 0 || getsockname(l, (struct sockaddr *)&a, &len) < 0)
		_exit(3);
	for (int i = 0; i < 24; i++) {
		int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);

		if (c < 0 || (connect(c, (struct sockaddr *)&a, sizeof(a)) < 0 &&
			      errno != EINPROGRESS) || accept(l, NULL, NULL) < 0)
			_exit(3);
		for (int n = 0; n < 1024 && send(c, chunk, sizeof(chunk), 0) > 0; n++)
			;
	}
	if (write(fd, "f", 1) != 1)
		_exit(4);
	for (;;)
		pause();
}

static void child_spin(void *arg)
{
	volatile unsigned long x = 0;

	(void)arg;
	for (;;)
		x++;
}

static void child_pause(void *arg)
{
	(void)arg;
	for (;;)
		pause();
}

static void report_and_pause(int fd)
{
	pid_t me = getpid();

	if (write(fd, &me, sizeof(me)) != sizeof(me))
		_exit(5);
	for (;;)
		pause();
}

/* 1 + 2 children + 2 grandchildren = 5 processes, each reports its pid. */
static void child_tree(void *arg)
{
	int fd = *(int *)arg;

	setpgid(0, 0);		/* the test's safety net: kill(-pid) */
	for (int i = 0; i < 2; i++) {
		pid_t a = fork();

		if (a == 0) {
			if (fork() == 0)
				report_and_pause(fd);
			report_and_pause(fd);
		}
	}
	report_and_pause(fd);
}

/* ---- tests that need no cgroup --------------------------------------- */

TEST(name_rules)
{
	static const char *const bad[] = { "", "a/b", ".", "..", NULL };
	struct corral_policy p = { 0 };
	struct corral_err err = { 0 };
	char longname[300];
	struct cg *cg = (struct cg *)&err;	/* must be reset to NULL */

	for (int i = 0; bad[i]; i++) {
		CHECK(cg_create(&cg, bad[i], &p, 0, &err) == -EINVAL);
		CHECK(cg == NULL);
		CHECK_STR_CONTAINS(err.msg, "bad cgroup name");
	}
	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	CHECK(cg_create(&cg, longname, &p, 0, &err) == -EINVAL);
	CHECK(cg_create(&cg, NULL, &p, 0, &err) == -EINVAL);
}

TEST(null_handles)
{
	struct corral_err err = { 0 };
	struct cg_stats st;

	cg_destroy(NULL);
	CHECK(cg_mode(NULL) == CG_NONE);
	CHECK(strcmp(cg_mode_name(NULL), "rlimit") == 0);
	CHECK(cg_kill(NULL) == -ENOTSUP);
	CHECK(cg_attach(NULL, getpid(), &err) == 0);
	CHECK(cg_stats(NULL, &st) == 0 && !st.valid);
	CHECK(cg_freeze(NULL, true, &err) == -ENOTSUP);
	CHECK_STR_CONTAINS(err.msg, "no freezer");
}

TEST(probe_agrees_with_create)
{
	struct corral_features f = { 0 };
	struct corral_policy p = { 0 };
	struct corral_err err = { 0 };
	struct cg *cg = NULL;
	char name[64];
	int r;

	cg_probe(&f);
	printf("# limits: %s\n# detail: %s\n", f.limits, f.limits_detail);
	CHECK(f.limits != NULL && f.limits_detail[0] != '\0');
	group_name(name, sizeof(name), "probe");
	r = cg_create(&cg, name, &p, 0, &err);
	CHECK(r == 0);
	if (r < 0) {
		fprintf(stderr, "  %s\n", err.msg);
		return;
	}
	CHECK(strcmp(cg_mode_name(cg), f.limits) == 0);
	if (cg_mode(cg) == CG_NONE) {
		CHECK_STR_CONTAINS(f.limits_detail, "rlimit");
		CHECK(!f.cg_memory && !f.cg_pids && !f.cg_cpu && !f.cg_freezer);
		CHECK(group_dirs(name) == 0);
	} else {
		CHECK_STR_CONTAINS(f.limits_detail, "cgroup v");
		CHECK(f.cg_memory && f.cg_pids);
		CHECK(group_dirs(name) > 0);
	}
	destroy_and_check(cg, name);
}

TEST(none_mode_is_inert)
{
	struct corral_policy p = { .memory_bytes = 64 * MiB, .pids = 8 };
	struct corral_err err = { 0 };
	struct cg_stats st;
	struct cg *cg = NULL;
	char name[64];

	group_name(name, sizeof(name), "inert");
	CHECK(cg_create(&cg, name, &p, 0, &err) == 0);
	if (!cg || cg_mode(cg) != CG_NONE) {
		printf("# skip: have a cgroup\n");
		cg_destroy(cg);
		return;
	}
	CHECK(cg_attach(cg, getpid(), &err) == 0);
	CHECK(cg_stats(cg, &st) == 0 && !st.valid);
	CHECK(cg_freeze(cg, true, &err) == -ENOTSUP);
	CHECK(cg_kill(cg) == -ENOTSUP);
	destroy_and_check(cg, name);
}

TEST(rlimits_in_child)
{
	struct corral_policy p = { .memory_bytes = 64 * MiB, .pids = 5 };
	struct kid k;
	int st;

	/* run in a child: the limits must not reach the test process */
	k.pid = fork();
	if (k.pid == 0) {
		struct corral_err err = { 0 };
		struct rlimit rl;
		void *m;

		if (cg_apply_rlimits(&p, &err) < 0)
			_exit(10);
		if (getrlimit(RLIMIT_DATA, &rl) < 0 ||
		    rl.rlim_cur != 64 * MiB || rl.rlim_max != 64 * MiB)
			_exit(11);
		if (getrlimit(RLIMIT_NPROC, &rl) < 0 ||
		    rl.rlim_cur != 5 || rl.rlim_max != 5)
			_exit(12);
		/* private writable memory past the limit is refused ... */
		m = mmap(NULL, 128 * MiB, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m != MAP_FAILED || errno != ENOMEM)
			_exit(13);
		/* ... a reservation that costs no memory is not (Go, V8, JVM) */
		m = mmap(NULL, 1024 * MiB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS |
			 MAP_NORESERVE, -1, 0);
		if (m == MAP_FAILED)
			_exit(14);
		_exit(0);
	}
	CHECK(k.pid > 0);
	k.go = -1;
	st = kid_wait(&k, 5000);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		fprintf(stderr, "  rlimit child: status 0x%x\n", st);
}

/* ---- tests on a real cgroup ------------------------------------------ */

TEST(create_sets_limits)
{
	struct corral_policy p = {
		.memory_bytes = 32 * MiB, .pids = 16, .cpus = 0.5,
	};
	struct corral_err err = { 0 };
	struct cg *cg, *dup = NULL;
	char name[64], v[256];

	group_name(name, sizeof(name), "limits");
	cg = make_group(name, &p);
	if (!cg)
		return;
	CHECK(group_dirs(name) > 0);
	if (cg_mode(cg) == CG_V1) {
		CHECK(group_file(name, "memory.limit_in_bytes", v, sizeof(v)) &&
		      strtoull(v, NULL, 10) == 32 * MiB);
		if (group_file(name, "memory.memsw.limit_in_bytes", v,
			       sizeof(v)))
			CHECK(strtoull(v, NULL, 10) == 32 * MiB);
		if (group_file(name, "cpu.cfs_quota_us", v, sizeof(v)))
			CHECK(strcmp(v, "50000") == 0);
	} else {
		CHECK(group_file(name, "memory.max", v, sizeof(v)) &&
		      strtoull(v, NULL, 10) == 32 * MiB);
		if (group_file(name, "cpu.max", v, sizeof(v)))
			CHECK(strcmp(v, "50000 100000") == 0);
	}
	CHECK(group_file(name, "pids.max", v, sizeof(v)) &&
	      strcmp(v, "16") == 0);

	/* names are never reused, and a clash removes nothing */
	CHECK(cg_create(&dup, name, &p, 0, &err) == -EEXIST);
	CHECK(dup == NULL);
	CHECK_STR_CONTAINS(err.msg, "already exists");
	CHECK(group_dirs(name) > 0);

	destroy_and_check(cg, name);
}

TEST(rejected_limit_is_named)
{
	/* a 100 us quota is below the kernel's 1 ms minimum */
	struct corral_policy p = { .pids = 16, .cpus = 0.001 };
	struct corral_features f = { 0 };
	struct corral_err err = { 0 };
	struct cg *cg = NULL;
	char name[64];

	cg_probe(&f);
	if (!f.cg_cpu) {
		printf("# skip: no cpu controller\n");
		return;
	}
	group_name(name, sizeof(name), "reject");
	CHECK(cg_create(&cg, name, &p, 0, &err) == -EINVAL);
	CHECK(cg == NULL);
	printf("# %s\n", err.msg);
	CHECK_STR_CONTAINS(err.msg, "\"100");
	CHECK_STR_CONTAINS(err.msg, "cpu.");
	CHECK(group_dirs(name) == 0);
}

/* CG_LATER: planned only; cg_make() makes the tree and the limits once. */
TEST(later_made_by_cg_make)
{
	struct corral_policy p = { .memory_bytes = 32 * MiB, .pids = 16 };
	struct corral_policy bad = { .pids = 16, .cpus = 0.001 };
	struct corral_features f = { 0 };
	struct corral_err err = { 0 };
	struct cg *cg = NULL;
	char name[64], v[256];

	group_name(name, sizeof(name), "later");
	CHECK(cg_create(&cg, name, &p, CG_LATER, &err) == 0);
	if (!cg || cg_mode(cg) == CG_NONE) {
		printf("# skip: no cgroup here\n");
		cg_destroy(cg);
		return;
	}
	CHECK(group_dirs(name) == 0);
	CHECK(cg_make(cg, &err) == 0);
	CHECK(group_dirs(name) > 0);
	CHECK(group_file(name, "pids.max", v, sizeof(v)) && strcmp(v, "16") == 0);
	CHECK(cg_make(cg, &err) == 0);		/* once: no EEXIST the second time */
	destroy_and_check(cg, name);

	/* a limit the kernel refuses fails cg_make, and destroy removes the tree */
	cg_probe(&f);
	if (!f.cg_cpu)
		return;
	group_name(name, sizeof(name), "later-bad");
	CHECK(cg_create(&cg, name, &bad, CG_LATER, &err) == 0);
	CHECK(cg_make(cg, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "cpu.");
	destroy_and_check(cg, name);
	cg_destroy(NULL);
}

/*
 * CG_LIMITS_ONLY on v1: the limits' hierarchies and cpuacct, cpu only
 * with a cpus limit, never the freezer; and the plan kept for the next
 * group is whole (a group without the flag still gets the freezer).
 */
TEST(limits_only_hierarchies)
{
	struct corral_policy p = { .memory_bytes = 32 * MiB, .pids = 16 };
	struct corral_policy pc = { .memory_bytes = 32 * MiB, .pids = 16, .cpus = 1 };
	struct corral_err err = { 0 };
	struct cg *lean = NULL, *cpu = NULL, *full = NULL;
	struct cg memonly = { .ops = &cg_v1_manager, .nhier = 1,
			      .hier = { { .ctrls = C_BIT(C_MEMORY) } } };
	struct cg v2 = { .ops = &cg_v2_manager };
	char a[64], b[64], c[64];

	group_name(a, sizeof(a), "lean");
	group_name(b, sizeof(b), "lean-cpu");
	group_name(c, sizeof(c), "full");
	CHECK(cg_create(&lean, a, &p, CG_LIMITS_ONLY, &err) == 0);
	if (!lean || cg_mode(lean) != CG_V1 || !cg_hier_of(lean, C_CPUACCT)) {
		printf("# skip: not cgroup v1 with cpuacct here\n");
		cg_destroy(lean);
		return;
	}
	CHECK(cg_hier_of(lean, C_MEMORY) && cg_hier_of(lean, C_PIDS));
	CHECK(cg_hier_of(lean, C_FREEZER) == NULL);
	CHECK(cg_counts_cpu(lean));
	/* a v1 group with no cpuacct (not mounted): the run takes rusage */
	CHECK(!cg_counts_cpu(&memonly));
	CHECK(cg_counts_cpu(&v2));
	CHECK(!cg_counts_cpu(NULL));
	CHECK(cg_create(&cpu, b, &pc, CG_LIMITS_ONLY, &err) == 0);
	CHECK(cg_create(&full, c, &p, 0, &err) == 0);
	for (size_t i = 0; i < full->nhier; i++) {
		unsigned k = full->hier[i].ctrls;

		if (k == C_BIT(C_CPU)) {	/* a cpu hierarchy of its own */
			CHECK(cg_hier_of(lean, C_CPU) == NULL);
			CHECK(cg_hier_of(cpu, C_CPU) != NULL);
		}
		if (k == C_BIT(C_FREEZER))
			CHECK(cg_hier_of(cpu, C_FREEZER) == NULL);
	}
	CHECK(cg_hier_of(full, C_FREEZER) != NULL);
	CHECK((size_t)group_dirs(a) == lean->nhier);
	CHECK((size_t)group_dirs(c) == full->nhier);
	destroy_and_check(lean, a);
	destroy_and_check(cpu, b);
	destroy_and_check(full, c);
}

/*
 * cg_entry_fds() over a socket as the supervisor sends them, and
 * cg_enter() in the child: it is then in the group in every hierarchy.
 * Where the manager has no such way (v2, unprivileged): -ENOTSUP.
 */
TEST(enter_self_with_fds)
{
	struct corral_policy p = { .pids = 16 };
	struct corral_err err = { 0 };
	int fds[FD_SEND_MAX], sv[2], n, st = -1;
	char name[64];
	struct cg *cg;
	pid_t pid;

	group_name(name, sizeof(name), "enter");
	cg = make_group(name, &p);
	if (!cg)
		return;
	n = cg_entry_fds(cg, fds, FD_SEND_MAX, &err);
	if (cg_mode(cg) != CG_V1 || geteuid() != 0) {
		CHECK(n == -ENOTSUP);
		destroy_and_check(cg, name);
		return;
	}
	CHECK(n == group_dirs(name));
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	pid = fork();
	if (pid == 0) {
		struct corral_err e = { 0 };
		int got[FD_SEND_MAX], in = 0;
		size_t k = 0;
		char c, line[512];
		FILE *f;

		close(sv[0]);
		if (fd_recv(sv[1], &c, 1, got, FD_SEND_MAX, &k, 0) != 1 ||
		    cg_enter(got, k, &e) < 0)
			_exit(2);
		f = fopen("/proc/self/cgroup", "re");
		while (f && fgets(line, sizeof(line), f))
			in += strstr(line, name) != NULL;
		_exit(in == n ? 0 : 3);
	}
	close(sv[1]);
	CHECK(fd_send(sv[0], "c", 1, fds, (size_t)n, MSG_NOSIGNAL) == 1);
	while (n > 0)
		close(fds[--n]);
	close(sv[0]);
	CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	destroy_and_check(cg, name);
}

TEST(oom_kill)
{
	struct corral_policy p = { .memory_bytes = 32 * MiB, .pids = 16 };
	struct cg_stats s;
	struct cg *cg;
	struct kid k;
	char name[64];
	int st;

	group_name(name, sizeof(name), "oom");
	cg = make_group(name, &p);
	if (!cg)
		return;
	spawn_in(cg, &k, child_hog, NULL);
	st = kid_wait(&k, 15000);
	CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	CHECK(cg_stats(cg, &s) == 0 && s.valid);
	printf("# oom_kills %" PRIu64 " mem_peak %" PRIu64 "\n", s.oom_kills,
	       s.mem_peak);
	CHECK(s.oom_kills >= 1);
	CHECK(s.mem_peak > 0 && s.mem_peak <= 32 * MiB);
	/* only what is asked for is read: the rest stays 0 */
	CHECK(cg_stats_some(cg, CG_ST_OOM, &s) == 0 && s.valid);
	CHECK(s.oom_kills >= 1 && s.mem_peak == 0 && s.cpu_ns == 0);
	CHECK(cg_stats_some(cg, CG_ST_MEM_PEAK | CG_ST_CPU, &s) == 0 && s.valid);
	CHECK(s.oom_kills == 0 && s.mem_peak > 0 && s.cpu_ns > 0);
	destroy_and_check(cg, name);
}

/*
 * v1 counts an OOM kill in the victim's group alone: a box's own oom_kill
 * stays 0 when its limit kills in a call's group below it.  The box's
 * OOM events (cg_oom_events_open) say it, and a kill in a group beside
 * the box, which moves the host's count, does not (call.c's
 * lingering_oomed waits on them, not on that count).
 */
TEST(oom_events_of_the_box)
{
	struct corral_policy p = { .memory_bytes = 32 * MiB, .pids = 16 };
	struct corral_err err = { 0 };
	struct cg *cg, *call = NULL, *other = NULL;
	char name[64], oname[64];
	struct cg_stats s;
	uint64_t n = 0;
	struct kid k;
	int efd, st;

	group_name(name, sizeof(name), "oomev");
	cg = make_group(name, &p);
	if (!cg)
		return;
	if (cg_mode(cg) != CG_V1) {
		CHECK(cg_oom_events_open(cg, &err) == -EOPNOTSUPP);
		printf("# skip: not cgroup v1 here\n");
		destroy_and_check(cg, name);
		return;
	}
	efd = cg_oom_events_open(cg, &err);
	if (efd < 0)
		fprintf(stderr, "  cg_oom_events_open: %s\n", err.msg);
	CHECK(efd >= 0);
	CHECK(cg_create_child(cg, "c1", &call, &err) == 0);
	group_name(oname, sizeof(oname), "oomev-beside");
	other = make_group(oname, &p);
	if (efd >= 0 && call && other) {
		spawn_in(other, &k, child_hog, NULL);
		st = kid_wait(&k, 15000);
		CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
		CHECK(eventfd_read(efd, &n) < 0 && errno == EAGAIN);
		spawn_in(call, &k, child_hog, NULL);
		st = kid_wait(&k, 15000);
		CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
		CHECK(eventfd_read(efd, &n) == 0 && n >= 1);
		CHECK(cg_stats_some(cg, CG_ST_OOM, &s) == 0 && s.valid);
		CHECK(s.oom_kills == 0);
		CHECK(cg_stats_some(call, CG_ST_OOM, &s) == 0 && s.valid);
		CHECK(s.oom_kills >= 1);
		printf("# box events %" PRIu64 ", call's oom_kill %" PRIu64 "\n",
		       n, s.oom_kills);
	}
	if (efd >= 0)
		close(efd);
	if (other)
		destroy_and_check(other, oname);
	cg_destroy(call);
	destroy_and_check(cg, name);
}

/*
 * v1's TCP limit slows and kills nothing: what says it bit is the peak
 * of the group's sockets against the limit corral set, and a box's next
 * call counts from after cg_tcp_rearm().
 */
TEST(tcp_limit_met)
{
	struct corral_policy p = { .memory_bytes = 8 * MiB, .pids = 16 };
	struct cg_stats s;
	struct cg *cg;
	struct kid k;
	char name[64], v[256], said[256];
	int fds[2], st;

	group_name(name, sizeof(name), "tcp");
	cg = make_group(name, &p);
	if (!cg)
		return;
	if (cg_mode(cg) != CG_V1 ||
	    !group_file(name, "memory.kmem.tcp.limit_in_bytes", v, sizeof(v))) {
		printf("# skip: no memory.kmem.tcp here\n");
		destroy_and_check(cg, name);
		return;
	}
	CHECK(strtoull(v, NULL, 10) == 8 * MiB);
	CHECK(cg_stats_some(cg, CG_ST_TCP, &s) == 0 && s.valid);
	CHECK(s.tcp_limit == 8 * MiB && s.tcp_peak == 0 && !cg_tcp_reached(&s));
	CHECK(pipe2(fds, O_CLOEXEC) == 0);
	spawn_in(cg, &k, child_tcp_filler, &fds[1]);
	close(fds[1]);
	CHECK(read_full(fds[0], v, 1, 10000));
	close(fds[0]);
	CHECK(cg_stats_some(cg, CG_ST_TCP, &s) == 0 && s.valid);
	printf("# tcp peak %" PRIu64 " of %" PRIu64 "\n", s.tcp_peak, s.tcp_limit);
	CHECK(cg_tcp_reached(&s));
	CHECK_STR_CONTAINS(cg_tcp_said(&s, said, sizeof(said)),
			   "TCP buffer limit 8 MiB reached (the sandbox's sockets held up to ");
	/* the sockets still full: still met after the rearm */
	cg_tcp_rearm(cg);
	CHECK(cg_stats_some(cg, CG_ST_TCP, &s) == 0 && cg_tcp_reached(&s));
	kill(-k.pid, SIGKILL);
	st = kid_wait(&k, 5000);
	CHECK(st != -1 && WIFSIGNALED(st));
	/* the sockets gone with their process: the next count starts low */
	cg_tcp_rearm(cg);
	CHECK(cg_stats_some(cg, CG_ST_TCP, &s) == 0 && s.valid);
	printf("# tcp after the rearm %" PRIu64 "\n", s.tcp_peak);
	CHECK(!cg_tcp_reached(&s) && s.tcp_peak < 8 * MiB);
	/* other counters do not read it */
	CHECK(cg_stats_some(cg, CG_ST_OOM, &s) == 0 && s.tcp_limit == 0);
	destroy_and_check(cg, name);
}

TEST(pids_limit)
{
	struct corral_policy p = { .memory_bytes = 256 * MiB, .pids = 16 };
	struct fork_report rep = { 0 };
	struct cg_stats s;
	struct cg *cg;
	struct kid k;
	char name[64];
	int fds[2], st;

	group_name(name, sizeof(name), "pids");
	cg = make_group(name, &p);
	if (!cg)
		return;
	if (pipe2(fds, O_CLOEXEC) < 0) {
		CHECK(!"pipe2");
		destroy_and_check(cg, name);
		return;
	}
	spawn_in(cg, &k, child_forker, &fds[1]);
	close(fds[1]);
	CHECK(read_full(fds[0], &rep, sizeof(rep), 10000));
	close(fds[0]);
	printf("# forks ok %d failed %d (%s)\n", rep.ok, rep.failed,
	       strerror(rep.first_errno));
	CHECK(rep.ok <= 15);
	CHECK(rep.failed >= 1 && rep.first_errno == EAGAIN);
	CHECK(cg_stats(cg, &s) == 0 && s.valid);
	CHECK(s.pids_max_hits >= 1);
	CHECK(cg_kill(cg) == 0);
	kill(-k.pid, SIGKILL);	/* no-op unless cg_kill missed some */
	st = kid_wait(&k, 5000);
	CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	CHECK(reap_all(3000) == rep.ok);
	destroy_and_check(cg, name);
}

TEST(freeze_stops_cpu)
{
	struct corral_policy p = { .pids = 16 };
	struct corral_features f = { 0 };
	struct corral_err err = { 0 };
	struct cg_stats s1, s2, s3;
	struct cg *cg;
	struct kid k;
	char name[64];
	int st;

	cg_probe(&f);
	group_name(name, sizeof(name), "freeze");
	cg = make_group(name, &p);
	if (!cg)
		return;
	if (!f.cg_freezer) {
		CHECK(cg_freeze(cg, true, &err) == -ENOTSUP);
		CHECK_STR_CONTAINS(err.msg, "freezer");
		destroy_and_check(cg, name);
		return;
	}
	spawn_in(cg, &k, child_spin, NULL);
	sleep_ms(100);
	CHECK(cg_freeze(cg, true, &err) == 0);
	CHECK(cg_stats(cg, &s1) == 0);
	sleep_ms(200);
	CHECK(cg_stats(cg, &s2) == 0);
	CHECK(cg_freeze(cg, false, &err) == 0);
	CHECK(cpu_grows(cg, &s2, &s3));
	printf("# cpu_ns frozen %" PRIu64 " -> %" PRIu64 ", thawed -> %"
	       PRIu64 "\n", s1.cpu_ns, s2.cpu_ns, s3.cpu_ns);
	CHECK(s1.cpu_ns > 0);
	CHECK(s2.cpu_ns == s1.cpu_ns);
	destroy_and_check(cg, name);
	st = kid_wait(&k, 3000);
	CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

static void child_sleep(void *arg)
{
	(void)arg;
	sleep_ms(10000);
}

/*
 * A tool call's group below its sandbox's: a process in it keeps it (one
 * rmdir says EBUSY), it goes once empty, and with CG_V2_ID on a hybrid
 * host it has a cgroup2 id, which is what /proc/PID/cgroup's "0::" names.
 */
TEST(call_group_below_sandbox)
{
	struct corral_policy p = { .pids = 16 };
	struct corral_err err = { 0 };
	struct cg *cg = NULL, *call = NULL;
	char name[64], path[64], line[512];
	struct kid k;
	FILE *f;
	int r;

	group_name(name, sizeof(name), "box");
	r = cg_create(&cg, name, &p, CG_V2_ID, &err);
	CHECK(r == 0);
	if (r < 0 || cg_mode(cg) == CG_NONE) {
		printf("# skip: no cgroup here\n");
		cg_destroy(cg);
		return;
	}
	CHECK(cg_create_child(cg, "c1", &call, &err) == 0);
	if (!call) {
		destroy_and_check(cg, name);
		return;
	}
	spawn_in(call, &k, child_sleep, NULL);
	CHECK(cg_nprocs(call) == 1);
	CHECK(cg_nprocs(cg) == 1);	/* the parent's tree holds it too */
	CHECK(cg_try_remove(call) == -EBUSY);
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)k.pid);
	f = fopen(path, "re");
	bool in_call = false;

	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "/corral-c1\n"))
			in_call = true;
	if (f)
		fclose(f);
	CHECK(in_call);
	if (cg_id(call))
		CHECK(cg_id(call) != cg_id(cg));
	else
		printf("# no cgroup2 directory here: sockets name no call\n");
	CHECK(cg_kill(call) == 0);
	kid_wait(&k, 5000);
	for (int i = 0; i < 100 && cg_try_remove(call) == -EBUSY; i++)
		sleep_ms(10);
	CHECK(cg_try_remove(call) == 0);
	cg_destroy(call);
	destroy_and_check(cg, name);
}

/*
 * cg_destroy's first try is one rmdir a hierarchy; a group with a child
 * group holding a live process must still be emptied and removed whole.
 */
TEST(destroy_with_busy_child)
{
	struct corral_policy p = { .pids = 16 };
	struct corral_err err = { 0 };
	struct cg *cg = NULL, *call = NULL;
	char name[64];
	struct kid k;
	int st;

	group_name(name, sizeof(name), "busy");
	cg = make_group(name, &p);
	if (!cg)
		return;
	CHECK(cg_create_child(cg, "c1", &call, &err) == 0);
	if (!call) {
		destroy_and_check(cg, name);
		return;
	}
	spawn_in(call, &k, child_pause, NULL);
	CHECK(cg_nprocs(cg) == 1);
	destroy_and_check(cg, name);
	st = kid_wait(&k, 3000);
	CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	cg_destroy(call);	/* its directories went with the parent's */
}

TEST(destroy_frozen_group)
{
	struct corral_policy p = { .pids = 16 };
	struct corral_features f = { 0 };
	struct corral_err err = { 0 };
	struct cg *cg;
	struct kid k;
	char name[64];
	int st;

	cg_probe(&f);
	group_name(name, sizeof(name), "frozen");
	cg = make_group(name, &p);
	if (!cg)
		return;
	spawn_in(cg, &k, child_pause, NULL);
	if (f.cg_freezer)
		CHECK(cg_freeze(cg, true, &err) == 0);
	destroy_and_check(cg, name);
	st = kid_wait(&k, 3000);
	CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

TEST(cpu_quota)
{
	struct corral_policy p = { .pids = 16, .cpus = 0.2 };
	struct corral_features f = { 0 };
	struct corral_err err = { 0 };
	struct cg_stats s;
	struct cg *cg;
	struct kid k;
	char name[64];
	uint64_t t0, wall_ns;

	cg_probe(&f);
	if (!f.cg_cpu) {
		printf("# skip: no cpu controller\n");
		return;
	}
	group_name(name, sizeof(name), "cpu");
	cg = make_group(name, &p);
	if (!cg)
		return;
	CHECK(kid_spawn(&k, child_spin, NULL) == 0);
	if (cg_attach(cg, k.pid, &err) < 0) {
		fprintf(stderr, "  %s\n", err.msg);
		CHECK(!"cg_attach");
	}
	t0 = corral_now_ms();
	kid_go(&k);
	sleep_ms(600);
	CHECK(cg_stats(cg, &s) == 0);
	wall_ns = (corral_now_ms() - t0) * 1000000;
	printf("# cpus 0.2: %" PRIu64 " ms CPU in %" PRIu64 " ms\n",
	       s.cpu_ns / 1000000, wall_ns / 1000000);
	CHECK(s.cpu_ns > 0);
	CHECK(s.cpu_ns < wall_ns * 35 / 100);
	destroy_and_check(cg, name);
	kid_wait(&k, 3000);
}

/* ---- /proc/PID/cgroup and mountinfo, as text --------------------------- */

static int parse(struct cg_proc *p, const char *text)
{
	return cg_proc_parse(p, text, strlen(text));
}

TEST(proc_cgroup_v2)
{
	struct cg_proc p;

	CHECK(parse(&p, "0::/user.slice/corral/corral-7-sb/corral-c12\n") == 0);
	CHECK(p.n == 1);
	CHECK(p.e[0].hier == 0 && strcmp(p.e[0].ctrls, "") == 0);
	CHECK(strcmp(p.e[0].path, "/user.slice/corral/corral-7-sb/corral-c12") == 0);
	CHECK(cg_proc_v2_path(&p) == p.e[0].path);
	CHECK(strcmp(cg_proc_group(&p), "corral-c12") == 0);
	/* a process in no group of ours: the leaf of where it is */
	CHECK(parse(&p, "0::/\n") == 0 && strcmp(cg_proc_group(&p), "") == 0);
	CHECK(parse(&p, "0::/system.slice/x.service\n") == 0);
	CHECK(strcmp(cg_proc_group(&p), "x.service") == 0);
}

TEST(proc_cgroup_v1)
{
	struct cg_proc p;

	CHECK(parse(&p, "12:memory:/corral/corral-1-b/corral-c3\n"
		    "11:cpu,cpuacct:/corral/corral-1-b\n"
		    "1:name=systemd:/\n") == 0);
	CHECK(p.n == 3);
	CHECK(p.e[0].hier == 12 && strcmp(p.e[0].ctrls, "memory") == 0);
	CHECK(p.e[1].hier == 11 && strcmp(p.e[1].ctrls, "cpu,cpuacct") == 0);
	CHECK(strcmp(p.e[1].path, "/corral/corral-1-b") == 0);
	CHECK(strcmp(p.e[2].ctrls, "name=systemd") == 0 &&
	      strcmp(p.e[2].path, "/") == 0);
	CHECK(cg_proc_v2_path(&p) == NULL);
	CHECK(strcmp(cg_proc_group(&p), "corral-c3") == 0);
}

/* This host's layout: v1 lines first (name=systemd's "/" among them). */
TEST(proc_cgroup_hybrid)
{
	struct cg_proc p;

	CHECK(parse(&p, "9:name=systemd:/\n"
		    "8:pids:/corral/corral-9-x/corral-c2\n"
		    "7:blkio:/\n"
		    "6:freezer:/corral/corral-9-x/corral-c2\n"
		    "4:memory:/process_api/1a9a\n"
		    "0::/corral/corral-9-x/corral-c2\n") == 0);
	CHECK(p.n == 6);
	CHECK(cg_proc_v2_path(&p) == p.e[5].path);
	CHECK(strcmp(cg_proc_group(&p), "corral-c2") == 0);
	/* only the cgroup2 directory names the call (a v1 group elsewhere) */
	CHECK(parse(&p, "9:name=systemd:/\n4:memory:/elsewhere\n"
		    "0::/corral/corral-9-x/corral-c5\n") == 0);
	CHECK(strcmp(cg_proc_group(&p), "corral-c5") == 0);
}

TEST(proc_cgroup_garbage)
{
	static const char *const bad[] = {
		"", "\n", "garbage\n", "x:memory:/a\n", "-1:memory:/a\n",
		"+1:memory:/a\n", ":memory:/a\n", "1:memory:relative\n",
		"1:memory\n", "1:memory:/a", "99999999999999999999:m:/\n",
		"70000::/\n", "0::\n", NULL,
	};
	char big[3 * CG_PROC_MAX * 8], huge[6000];
	struct cg_proc p;
	size_t n = 0;

	for (int i = 0; bad[i]; i++) {
		p.n = 99;
		CHECK(parse(&p, bad[i]) == -EINVAL);
		CHECK(p.n == 0);
	}
	/* the good lines of a mixed text are kept, in order */
	CHECK(parse(&p, "junk\n3:pids:/a\n1:memory\n0::/b:c\n") == 0);
	CHECK(p.n == 2 && p.e[0].hier == 3 && strcmp(p.e[1].path, "/b:c") == 0);
	/* a NUL inside ends the text */
	CHECK(cg_proc_parse(&p, "3:pids:/a\n\0" "4:x:/b\n", 17) == 0 && p.n == 1);
	/* more lines than entries: the first CG_PROC_MAX */
	big[0] = '\0';
	for (int i = 0; i < 2 * CG_PROC_MAX; i++)
		n += (size_t)snprintf(big + n, sizeof(big) - n, "%d:c:/\n", i + 1);
	CHECK(parse(&p, big) == 0 && p.n == CG_PROC_MAX);
	CHECK(p.e[CG_PROC_MAX - 1].hier == CG_PROC_MAX);
	/* longer than the buffer: the cut last line is dropped */
	memset(huge, 'a', sizeof(huge));
	memcpy(huge, "1:m:/ok\n2:m:/", 13);
	CHECK(cg_proc_parse(&p, huge, sizeof(huge)) == 0 && p.n == 1);
	CHECK(strcmp(cg_path_leaf("/a/b/corral-c1"), "corral-c1") == 0);
	CHECK(strcmp(cg_path_leaf("noslash"), "noslash") == 0);
}

TEST(proc_cgroup_read)
{
	char line[1024];
	struct cg_proc p, q;
	size_t lines = 0;
	FILE *f;

	CHECK(cg_proc_read(&p, 0) == 0);
	CHECK(cg_proc_read(&q, getpid()) == 0);
	CHECK(p.n == q.n && p.n > 0);
	f = fopen("/proc/self/cgroup", "re");
	while (f && fgets(line, sizeof(line), f))
		lines++;
	if (f)
		fclose(f);
	CHECK(p.n == lines);	/* every line the kernel writes is understood */
	for (size_t i = 0; i < p.n && i < q.n; i++)
		CHECK(strcmp(p.e[i].path, q.e[i].path) == 0);
	CHECK(cg_proc_read(&p, INT_MAX) == -ENOENT);
}

TEST(mountinfo_lines)
{
	static const char *const lines[] = {
		"1 0 8:1 / / rw - ext4 /dev/vda rw\n",
		"30 23 0:26 / /sys/fs/cgroup/unified rw,nosuid shared:4 - "
		"cgroup2 cgroup2 rw,nsdelegate\n",
		"31 23 0:27 / /sys/fs/cgroup/systemd rw shared:5 - cgroup "
		"cgroup rw,xattr,name=systemd\n",
		"35 23 0:30 / /sys/fs/cgroup/mem\\040ory rw shared:15 - cgroup "
		"cgroup rw,memory\n",
		"36 23 0:31 / /sys/fs/cgroup/cpu,cpuacct rw shared:16 - cgroup "
		"cgroup rw,cpu,cpuacct\n",
		"37 23 0:32 /sub /elsewhere rw - cgroup2 cgroup2 rw\n",
		"38 23 0:33 / /sys/fs/cgroup/pids rw - cgroup cgroup\n",
		"garbage\n", "1 2 3\n", "1 2 3 4 5 6 no separator\n", "",
		NULL,
	};
	struct cg_mounts m;
	char buf[256];

	memset(&m, 0, sizeof(m));
	for (int i = 0; lines[i]; i++) {
		snprintf(buf, sizeof(buf), "%s", lines[i]);
		CHECK(cg_mounts_add_line(&m, buf) == 0);
	}
	/* the first cgroup2 mount wins; its root is kept */
	CHECK(m.v2 && strcmp(m.v2, "/sys/fs/cgroup/unified") == 0);
	CHECK(m.v2_root && strcmp(m.v2_root, "/") == 0);
	CHECK(m.v1[C_MEMORY] && strcmp(m.v1[C_MEMORY], "/sys/fs/cgroup/mem ory") == 0);
	CHECK(m.v1[C_CPU] && strcmp(m.v1[C_CPU], "/sys/fs/cgroup/cpu,cpuacct") == 0);
	CHECK(m.v1[C_CPUACCT] && strcmp(m.v1[C_CPUACCT], m.v1[C_CPU]) == 0);
	CHECK(m.v1[C_PIDS] == NULL);	/* no super options: not a controller */
	CHECK(m.v1[C_FREEZER] == NULL);
	CHECK(!m.favordynmods);
	/* a super option of a cgroup mount, v2 or v1; not of another fs */
	snprintf(buf, sizeof(buf), "50 1 0:40 / /x rw - tmpfs tmpfs rw,favordynmods\n");
	CHECK(cg_mounts_add_line(&m, buf) == 0 && !m.favordynmods);
	snprintf(buf, sizeof(buf), "51 1 0:41 / /y rw - cgroup cgroup rw,favordynmods,pids\n");
	CHECK(cg_mounts_add_line(&m, buf) == 0 && m.favordynmods);
	cg_mounts_free(&m);
	CHECK(m.v2 == NULL);
	snprintf(buf, sizeof(buf), "52 1 0:42 / /z rw - cgroup2 cgroup2 rw,nsdelegate,favordynmods\n");
	CHECK(cg_mounts_add_line(&m, buf) == 0 && m.favordynmods);
	cg_mounts_free(&m);
}

/* ---- the managers' table ----------------------------------------------- */

/* Same hierarchies and parents, in the same order. */
static bool same_plan(const struct cg *a, const struct cg *b)
{
	if (a->ops != b->ops || a->nhier != b->nhier)
		return false;
	for (size_t i = 0; i < a->nhier; i++)
		if (strcmp(a->hier[i].mount, b->hier[i].mount) ||
		    strcmp(a->hier[i].parent, b->hier[i].parent) ||
		    a->hier[i].ctrls != b->hier[i].ctrls)
			return false;
	return true;
}

/*
 * A plan that found cgroups is handed out again while the mount table
 * stays (mountinfo read and the hierarchies probed once a process), the
 * same as a fresh one; without v2_id it has no controller-less cgroup2
 * directory; forgotten, the next is fresh.
 */
TEST(plan_kept)
{
	struct corral_err err = { 0 };
	char why[CORRAL_ERR_MAX];
	struct cg a = { 0 }, b = { 0 }, c = { 0 }, d = { 0 };

	cg_plan_forget();
	CHECK(cg_plan(&a, why, sizeof(why), true, &err) == 0);
	CHECK(!a.kept_plan);
	CHECK(cg_plan(&b, why, sizeof(why), true, &err) == 0);
	CHECK(cg_plan(&c, why, sizeof(why), false, &err) == 0);
	CHECK(same_plan(&a, &b));
	if (cg_mode(&a) == CG_NONE) {
		printf("# skip: no cgroup here (%s)\n", why);
		CHECK(!b.kept_plan && !c.kept_plan);
	} else {
		CHECK(b.kept_plan && c.kept_plan);
		for (size_t i = 0; i < c.nhier; i++)
			CHECK(cg_mode(&c) != CG_V1 || c.hier[i].ctrls);
		CHECK(c.nhier <= a.nhier && c.nhier > 0);
		cg_plan_forget();
		CHECK(cg_plan(&d, why, sizeof(why), true, &err) == 0);
		CHECK(!d.kept_plan && same_plan(&a, &d));
	}
	cg_free_hiers(&a);
	cg_free_hiers(&b);
	cg_free_hiers(&c);
	cg_free_hiers(&d);
}

TEST(manager_table)
{
	static const struct {
		const struct cg_manager *m;
		enum cg_mode mode;
		const char *name;
	} want[] = {
		{ &cg_v2_manager, CG_V2, "cgroup v2" },
		{ &cg_v1_manager, CG_V1, "cgroup v1" },
		{ &cg_none_manager, CG_NONE, "rlimit" },
	};
	struct event_base *base = event_base_new();
	struct corral_err err = { 0 };

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const struct cg_manager *m = want[i].m;
		struct cg cg = { .ops = m };	/* no hierarchy: no freezer */

		CHECK(m->mode == want[i].mode);
		CHECK(strcmp(m->name, want[i].name) == 0);
		CHECK(m->plan && m->prepare && m->set_limits && m->attach &&
		      m->stats && m->freeze_request && m->freeze_reached &&
		      m->kill && m->id);
		CHECK(cg_mode(&cg) == want[i].mode);
		CHECK(strcmp(cg_mode_name(&cg), want[i].name) == 0);
		err.msg[0] = '\0';
		CHECK(cg_freeze_start(&cg, base, NULL, NULL, &err) == -ENOTSUP);
		CHECK_STR_CONTAINS(err.msg, "freeze");
		CHECK_STR_CONTAINS(err.msg, want[i].mode == CG_NONE ?
				   "it has no cgroup" : want[i].name);
		CHECK(cg_thaw(&cg, &err) == -ENOTSUP);
		CHECK(cg_id(&cg) == 0);
	}
	/* what the none manager does is nothing, and says so */
	CHECK(cg_none_manager.kill(NULL) == -ENOTSUP);
	CHECK(cg_v1_manager.kill(NULL) == -EOPNOTSUPP);	/* no cgroup.kill */
	CHECK(cg_kill_start(NULL, base) == -ENOTSUP);
	CHECK(cg_freeze_start(NULL, base, NULL, NULL, &err) == -ENOTSUP);
	CHECK(cg_thaw(NULL, &err) == -ENOTSUP);
	CHECK(event_base_get_num_events(base, EVENT_BASE_COUNT_ADDED) == 0);
	event_base_free(base);
}

/* ---- freezing and killing from an event loop ---------------------------- */

struct frozen_note {
	int calls, r;
};

static void note_frozen(void *arg, int r, const struct corral_err *err)
{
	struct frozen_note *n = arg;

	n->calls++;
	n->r = r;
	if (r < 0)
		fprintf(stderr, "  freeze: %s\n", err->msg);
}

/* Run base until nothing is armed on it or 5 s pass; true if it emptied. */
static bool loop_until_idle(struct event_base *base)
{
	uint64_t deadline = corral_now_ms() + 5000;

	while (event_base_get_num_events(base, EVENT_BASE_COUNT_ADDED) > 0) {
		if (corral_now_ms() >= deadline)
			return false;
		event_base_loop(base, EVLOOP_ONCE);
	}
	return true;
}

TEST(freeze_from_loop)
{
	struct corral_policy p = { .pids = 16 };
	struct corral_features f = { 0 };
	struct corral_err err = { 0 };
	struct frozen_note note = { 0, 1 };
	struct cg_stats s1, s2, s3;
	struct event_base *base;
	struct cg *cg;
	struct kid k;
	char name[64];
	int r, st, under_way = 0;

	cg_probe(&f);
	group_name(name, sizeof(name), "loopfreeze");
	cg = make_group(name, &p);
	if (!cg)
		return;
	base = event_base_new();
	if (!f.cg_freezer || !base) {
		CHECK(!base || cg_freeze_start(cg, base, note_frozen, &note,
					       &err) == -ENOTSUP);
		if (base)
			event_base_free(base);
		destroy_and_check(cg, name);
		return;
	}
	spawn_in(cg, &k, child_spin, NULL);
	sleep_ms(50);
	/* frozen at once or under way, as the spinner happens to run */
	for (int i = 0; i < 20; i++) {
		note.calls = 0;
		r = cg_freeze_start(cg, base, note_frozen, &note, &err);
		CHECK(r == 0 || r == 1);
		under_way += r == 0;
		CHECK(loop_until_idle(base));
		CHECK(note.calls == (r == 0) && (r == 1 || note.r == 0));
		CHECK(cg_thaw(cg, &err) == 0);
	}
	printf("# of 20 freezes, %d completed from the loop\n", under_way);
	CHECK(cg_freeze_start(cg, base, note_frozen, &note, &err) >= 0);
	CHECK(loop_until_idle(base));
	CHECK(cg_stats(cg, &s1) == 0);
	sleep_ms(100);
	CHECK(cg_stats(cg, &s2) == 0);
	CHECK(s2.cpu_ns == s1.cpu_ns);
	CHECK(cg_thaw(cg, &err) == 0);
	CHECK(cpu_grows(cg, &s2, &s3));

	/* a thaw drops a freeze under way: its done never comes */
	note.calls = 0;
	r = cg_freeze_start(cg, base, note_frozen, &note, &err);
	CHECK(r == 0 || r == 1);
	CHECK(cg_thaw(cg, &err) == 0);
	CHECK(event_base_get_num_events(base, EVENT_BASE_COUNT_ADDED) == 0);
	CHECK(note.calls == 0);
	CHECK(cg_stats(cg, &s1) == 0 && cpu_grows(cg, &s1, &s2));

	destroy_and_check(cg, name);
	event_base_free(base);
	st = kid_wait(&k, 3000);
	CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

/* How a tree of 5 is killed: waiting, from a loop, from a loop when frozen. */
enum kill_how { KILL_WAIT, KILL_LOOP, KILL_LOOP_FROZEN };

static void kill_tree_by(enum kill_how how)
{
	static const char *const tag[] = { "tree", "looptree", "frozentree" };
	struct corral_policy p = { .pids = 16 };
	struct corral_features f = { 0 };
	struct corral_err err = { 0 };
	struct event_base *base = NULL;
	pid_t pids[5], r;
	struct cg *cg;
	struct kid k;
	char name[64];
	int fds[2], reaped = 0, sigkilled = 0, st;
	uint64_t deadline;

	cg_probe(&f);
	if (how == KILL_LOOP_FROZEN && !f.cg_freezer) {
		printf("# skip: no freezer\n");
		return;
	}
	group_name(name, sizeof(name), tag[how]);
	cg = make_group(name, &p);
	if (!cg)
		return;
	if (how != KILL_WAIT)
		base = event_base_new();
	if ((how != KILL_WAIT && !base) || pipe2(fds, O_CLOEXEC) < 0) {
		CHECK(!"event_base_new or pipe2");
		if (base)
			event_base_free(base);
		destroy_and_check(cg, name);
		return;
	}
	spawn_in(cg, &k, child_tree, &fds[1]);
	close(fds[1]);
	CHECK(read_full(fds[0], pids, sizeof(pids), 5000));
	close(fds[0]);
	if (how == KILL_LOOP_FROZEN)
		CHECK(cg_freeze(cg, true, &err) == 0);	/* as a halt leaves it */
	if (how == KILL_WAIT) {
		CHECK(cg_kill(cg) == 0);
	} else {
		CHECK(cg_kill_start(cg, base) == 0);
		CHECK(loop_until_idle(base));
	}
	deadline = corral_now_ms() + 5000;
	while (reaped < 5 && corral_now_ms() < deadline) {
		r = waitpid(-1, &st, WNOHANG);
		if (r < 0)
			break;
		if (r == 0) {
			sleep_ms(5);
			continue;
		}
		reaped++;
		if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)
			sigkilled++;
	}
	CHECK(reaped == 5);
	CHECK(sigkilled == 5);
	for (int i = 0; i < 5; i++)
		CHECK(kill(pids[i], 0) < 0 && errno == ESRCH);
	CHECK(cg_nprocs(cg) == 0);
	if (reaped < 5) {	/* the kill failed: do not leak the tree */
		kill(-k.pid, SIGKILL);
		reap_all(3000);
	}
	destroy_and_check(cg, name);
	if (base)
		event_base_free(base);
}

TEST(kill_tree)
{
	kill_tree_by(KILL_WAIT);
}

TEST(kill_from_loop)
{
	kill_tree_by(KILL_LOOP);
}

TEST(kill_frozen_from_loop)
{
	kill_tree_by(KILL_LOOP_FROZEN);
}

/*
 * cg_destroy_async: the loop goes on while a helper removes the group (its
 * pidfd is all the loop holds), then nothing of it is left.
 */
TEST(destroy_async_off_loop)
{
	struct corral_policy p = { .pids = 16 };
	struct event_base *base;
	struct cg *cg;
	struct kid k;
	char name[64];
	int st;

	group_name(name, sizeof(name), "async");
	cg = make_group(name, &p);
	if (!cg)
		return;
	spawn_in(cg, &k, child_pause, NULL);
	base = event_base_new();
	CHECK(base != NULL);
	if (!base) {
		destroy_and_check(cg, name);
		return;
	}
	cg_destroy_async(base, &cg, 1);
	/* returned at once: the removal is the helper's, watched by the loop */
	CHECK(event_base_get_num_events(base, EVENT_BASE_COUNT_ADDED) == 1);
	CHECK(loop_until_idle(base));
	CHECK(group_dirs(name) == 0);
	st = kid_wait(&k, 3000);
	CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	event_base_free(base);
}

/*
 * A teardown off the loop: cg_kill_begin stops a box's tree (v1: one
 * freeze, no walk; its processes still there, none signalled), and
 * cg_destroy_async([call, box]) kills and removes it all.  The helper
 * kills the box's tree first: a call group's own kill under a FROZEN
 * parent would thaw nothing, and each would wait 2 s for a task that
 * cannot die.
 */
TEST(kill_begin_then_destroy_async)
{
	struct corral_policy p = { .pids = 16 };
	struct corral_err err = { 0 };
	struct event_base *base;
	struct cg *cgs[2] = { NULL, NULL };
	struct kid box, call;
	char name[64];
	int r, st;

	group_name(name, sizeof(name), "kb");
	cgs[1] = make_group(name, &p);
	if (!cgs[1])
		return;
	CHECK(cg_create_child(cgs[1], "c1", &cgs[0], &err) == 0);
	if (!cgs[0]) {
		destroy_and_check(cgs[1], name);
		return;
	}
	spawn_in(cgs[1], &box, child_pause, NULL);
	spawn_in(cgs[0], &call, child_pause, NULL);
	base = event_base_new();
	CHECK(base != NULL);
	if (!base) {
		cg_destroy(cgs[0]);
		destroy_and_check(cgs[1], name);
		return;
	}
	r = cg_kill_begin(cgs[1], base);
	if (r == 1) {
		/* frozen, not killed: the SIGKILLs are the helper's */
		CHECK(waitpid(box.pid, &st, WNOHANG) == 0);
		CHECK(waitpid(call.pid, &st, WNOHANG) == 0);
		CHECK(cg_nprocs(cgs[1]) == 2);
	} else {
		CHECK(r == 0);	/* cgroup.kill, or no freezer: killed here */
	}
	/* no timer or event of the loop's: nothing of it runs there */
	CHECK(event_base_get_num_events(base, EVENT_BASE_COUNT_ADDED) == 0);
	cg_destroy_async(base, cgs, 2);
	CHECK(loop_until_idle(base));
	CHECK(group_dirs(name) == 0);
	st = kid_wait(&box, 3000);
	CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	st = kid_wait(&call, 3000);
	CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	event_base_free(base);
}

/* A supervisor known dead: a child that has exited and been reaped. */
static pid_t dead_pid(void)
{
	pid_t pid = fork();

	if (pid == 0)
		_exit(0);
	CHECK(pid > 0 && waitpid(pid, NULL, 0) == pid);
	return pid;
}

/*
 * A dead supervisor's groups: cg_cleanup_stale_groups() reads the first
 * hierarchy only, where a group has a directory while it has any (made
 * first, removed last), and removes them in every hierarchy; a group
 * missing there (an older corral's order) is cg_cleanup_stale()'s.
 */
TEST(stale_groups_from_the_first_hierarchy)
{
	struct corral_policy p = { .memory_bytes = 32 * MiB, .pids = 16 };
	struct corral_err err = { 0 };
	struct cg *whole = NULL, *half = NULL;
	char a[64], b[64];
	pid_t dead = dead_pid();

	snprintf(a, sizeof(a), "%d-whole", (int)dead);
	snprintf(b, sizeof(b), "%d-half", (int)dead);
	CHECK(cg_create(&whole, a, &p, 0, &err) == 0);
	CHECK(cg_create(&half, b, &p, 0, &err) == 0);
	if (!whole || !half || cg_mode(whole) != CG_V1 || whole->nhier < 2) {
		printf("# skip: not cgroup v1 with two hierarchies here\n");
		cg_destroy(whole);
		cg_destroy(half);
		return;
	}
	/* the supervisor "died": its handles are gone, its groups stay */
	CHECK(rmdir(half->hier[0].dir) == 0);	/* removed first, as before */
	CHECK((size_t)group_dirs(a) == whole->nhier);
	CHECK((size_t)group_dirs(b) == half->nhier - 1);
	cg_free_hiers(whole);
	free(whole);
	cg_free_hiers(half);
	free(half);
	CHECK(cg_cleanup_stale_groups() >= 1);
	CHECK(group_dirs(a) == 0);
	CHECK(group_dirs(b) > 0);
	CHECK(cg_cleanup_stale() >= 1);
	CHECK(group_dirs(b) == 0);
}

/* The freezer hold: v1 only, FROZEN, empty; removed by its owner's cleanup. */
TEST(freezer_hold)
{
	struct corral_err err = { 0 };
	char name[64], state[32];
	struct cg *h = NULL;
	pid_t dead = dead_pid();
	int r;

	snprintf(name, sizeof(name), "%d-.freezer-hold-1", (int)dead);
	r = cg_freezer_hold(&h, name, &err);
	if (r < 0)
		fprintf(stderr, "  cg_freezer_hold: %s\n", err.msg);
	CHECK(r == 0);
	if (!h) {
		printf("# skip: no v1 freezer here\n");
		return;
	}
	CHECK(h->nhier == 1 && h->hier[0].ctrls & C_BIT(C_FREEZER));
	CHECK(cg_read_file(h->hier[0].dir, "freezer.state", state, sizeof(state)) > 0);
	CHECK_STR_CONTAINS(state, "FROZEN");
	CHECK(cg_nprocs(h) == 0);
	CHECK(group_dirs(name) == 1);
	/* the supervisor "died" holding it: its cleanup finds it all the same */
	cg_free_hiers(h);
	free(h);
	CHECK(cg_cleanup_owner(dead) >= 1);
	CHECK(group_dirs(name) == 0);
}

/*
 * The v2 manager's freezer and kill on a directory of the cgroup2 tree,
 * which hybrid hosts have too (without controllers): what v2-only hosts
 * do, here.  Root only (the tree's root is root's).
 */
TEST(v2_manager_on_cgroup2_tree)
{
	struct corral_err err = { 0 };
	struct frozen_note note = { 0, 1 };
	struct cg_stats s1, s2, s3;
	struct event_base *base;
	struct cg_mounts m;
	struct cg cg = { .ops = &cg_v2_manager };
	char dir[4096], events[256];
	struct kid k;
	int r, st;

	if (geteuid() != 0) {
		printf("# skip: the cgroup2 tree's root is root's\n");
		return;
	}
	CHECK(cg_mounts_read(&m, &err) == 0);
	if (!m.v2) {
		printf("# skip: no cgroup2 tree here\n");
		cg_mounts_free(&m);
		return;
	}
	snprintf(dir, sizeof(dir), "%s/corral-ut%d-v2", m.v2, (int)getpid());
	if (mkdir(dir, 0755) < 0) {
		printf("# skip: mkdir %s: %s\n", dir, strerror(errno));
		cg_mounts_free(&m);
		return;
	}
	cg.nhier = 1;
	cg.hier[0] = (struct cg_hier){ .dir = dir, .ctrls = C_BIT(C_FREEZER) };
	base = event_base_new();
	CHECK(base != NULL);
	spawn_in(&cg, &k, child_spin, NULL);
	CHECK(cg_id(&cg) != 0);
	sleep_ms(50);
	r = base ? cg_freeze_start(&cg, base, note_frozen, &note, &err) : -1;
	CHECK(r == 0 || r == 1);
	CHECK(!base || loop_until_idle(base));
	CHECK(note.calls == (r == 0) && (r == 1 || note.r == 0));
	CHECK(cg_read_file(dir, "cgroup.events", events, sizeof(events)) > 0);
	CHECK_STR_CONTAINS(events, "frozen 1");
	CHECK(cg_stats(&cg, &s1) == 0 && s1.valid && s1.cpu_ns > 0);
	sleep_ms(100);
	CHECK(cg_stats(&cg, &s2) == 0 && s2.cpu_ns == s1.cpu_ns);
	CHECK(cg_thaw(&cg, &err) == 0);
	CHECK(cpu_grows(&cg, &s2, &s3));
	/* cgroup.kill: at once, nothing left on the loop */
	CHECK(!base || cg_kill_start(&cg, base) == 0);
	CHECK(!base || event_base_get_num_events(base, EVENT_BASE_COUNT_ADDED) == 0);
	st = kid_wait(&k, 3000);
	CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	for (int i = 0; i < 100 && rmdir(dir) < 0 && errno == EBUSY; i++)
		sleep_ms(10);
	CHECK(access(dir, F_OK) < 0);
	if (base)
		event_base_free(base);
	cg_mounts_free(&m);
}

int main(void)
{
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		perror("PR_SET_CHILD_SUBREAPER");
	printf("# euid %u, cgroup %s\n", (unsigned)geteuid(),
	       have_cgroup() ? "available" : "not available");
	unit_run_all();
	reap_all(1000);
	UNIT_DONE();
}
