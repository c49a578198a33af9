/*
 * proctree.c - the CPU time a sandbox has used, read from /proc, where no
 * cgroup counts it: an unprivileged user without a delegated group
 * (cgroup_none.c), or cgroup v1 without cpuacct.  Without it the abort
 * criterion max_cpu_seconds was never met there, however long the run spun.
 *
 * Each process's own time (/proc/PID/stat: utime and stime, all its
 * threads) and what its reaped children used (cutime and cstime, which
 * hold their reaped children in turn), summed over the tree beneath the
 * sandbox's init: init reaps every orphan, so the sum holds the dead as
 * well as the living.  What it cannot hold: a child reaped automatically
 * (its parent ignores SIGCHLD or set SA_NOCLDWAIT), whose time the kernel
 * adds to no one; and a process that moves within the tree between two
 * reads of it (the next reading has it).
 */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* At most this many processes a reading: pids.max, where set, is lower. */
#define TREE_MAX 65536

char *proc_stat_fields(pid_t pid, char *buf, size_t len)
{
	char path[64], *end;
	ssize_t n;
	int fd;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/stat");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return NULL;
	buf[n] = '\0';
	/* "(comm)" may hold anything, ")" too: the last one ends it */
	end = strrchr(buf, ')');
	return end ? end + 1 : NULL;
}

int proc_self_status(char *buf, size_t len)
{
	ssize_t n;
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	if (n < 0)
		n = -errno;
	close(fd);
	if (n <= 0)
		return n < 0 ? (int)n : -EIO;
	buf[n] = '\0';
	return 0;
}

const char *proc_status_value(const char *status, const char *key)
{
	size_t k = strlen(key);
	const char *p = status;

	while (p) {
		if (!strncmp(p, key, k) && p[k] == ':')
			return p + k + 1 + strspn(p + k + 1, " \t");
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return NULL;
}

/* The CPU ticks of pid and its reaped children; false if it is gone. */
static bool stat_ticks(pid_t pid, uint64_t *ticks)
{
	unsigned long long ut, st;
	long long cut, cst;
	char buf[1024], *f = proc_stat_fields(pid, buf, sizeof(buf));

	/* state, then fields 4-17 */
	if (!f || sscanf(f, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
			 "%llu %llu %lld %lld", &ut, &st, &cut, &cst) != 4)
		return false;
	*ticks = ut + st + (uint64_t)(cut > 0 ? cut : 0) + (uint64_t)(cst > 0 ? cst : 0);
	return true;
}

static int push(pid_t **list, size_t *n, size_t *alloc, pid_t pid)
{
	if (*n == *alloc) {
		pid_t *bigger = realloc(*list, *alloc * 2 * sizeof(**list));

		if (!bigger)
			return -ENOMEM;
		*list = bigger;
		*alloc *= 2;
	}
	(*list)[(*n)++] = pid;
	return 0;
}

/*
 * Append the pids in a thread's children file ("12 34 ", each followed by
 * a space; a read may end inside one, kept for the next).
 */
static int read_children(int fd, pid_t **list, size_t *n, size_t *alloc)
{
	char buf[4096];
	size_t have = 0;
	ssize_t len;
	int r = 0;

	while (r == 0 && *n < TREE_MAX &&
	       (len = read(fd, buf + have, sizeof(buf) - 1 - have)) > 0) {
		char *p = buf, *space;

		have += (size_t)len;
		buf[have] = '\0';
		while (r == 0 && *n < TREE_MAX && (space = strchr(p, ' '))) {
			*space = '\0';
			r = push(list, n, alloc, (pid_t)strtol(p, NULL, 10));
			p = space + 1;
		}
		have -= (size_t)(p - buf);
		memmove(buf, p, have);
		if (have == sizeof(buf) - 1)
			break;	/* no pid is that long: not a children file */
	}
	return r;
}

/* Append the children of each of pid's threads to the list. */
static int add_children(pid_t pid, pid_t **list, size_t *n, size_t *alloc)
{
	char path[64];
	struct dirent *de;
	DIR *tasks;
	int r = 0, fd;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	tasks = opendir(path);
	if (!tasks)
		return 0;	/* gone meanwhile: no children to count */
	while (r == 0 && *n < TREE_MAX && (de = readdir(tasks))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%.20s/children", (int)pid,
			 de->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		r = read_children(fd, list, n, alloc);
		close(fd);
	}
	closedir(tasks);
	return r;
}

int proc_tree_cpu_ns(pid_t root, uint64_t *ns)
{
	long hz = sysconf(_SC_CLK_TCK);
	size_t n = 1, alloc = 64;
	pid_t *list = malloc(alloc * sizeof(*list));
	uint64_t ticks = 0, t;
	int r = 0;

	*ns = 0;
	if (!list)
		return -ENOMEM;
	if (hz <= 0)
		hz = 100;
	list[0] = root;
	/* breadth first, the list its own queue: no recursion, however deep */
	for (size_t i = 0; i < n && r == 0; i++) {
		if (!stat_ticks(list[i], &t)) {
			if (i == 0)
				r = -ESRCH;	/* init is gone: nothing to read */
			continue;
		}
		ticks += t;
		r = add_children(list[i], &list, &n, &alloc);
	}
	free(list);
	if (r == 0)
		*ns = ticks * (1000000000u / (uint64_t)hz);
	return r;
}
