/*
 * hostsysctl.c - the host's sysctls a sandbox's limits are derived from,
 * read at most once a second by a process.
 *
 * Every create read fs.file-max (the open-files cap, child.c) and the
 * host's net.ipv4.tcp_mem (v1's TCP limit, cgroup_v1.c) afresh.  The
 * lookup of a file under /proc/sys/net is the slow kind: each sandbox's
 * network namespace registers its own net/ sysctl directories, and their
 * dentries share the hash chains of the host's (the same parent and
 * name), so each component's lookup compares against one entry a live
 * sandbox (proc_sys_compare) before it finds the host's: a cost that
 * grows with the sandboxes a daemon holds, on its one loop, for a number
 * that an operator changes by hand if ever.
 *
 * So a file's text is kept HOST_SYSCTL_TTL_MS and read again after: a
 * limit derived from it follows a change of the sysctl within that much,
 * where it followed it at the next create before (and never for a
 * sandbox already made, as still).  Only the host's files, read by this
 * process in its own namespaces, are kept here: what a sandbox's
 * namespace says (its netns's own sysctls, net.c) is read in the sandbox
 * and never kept.  A read that failed is kept as its error the same
 * time: no /proc stays no /proc.
 *
 * Not for a process forked from one that uses it: the lock may be held
 * by a thread that is not there (the callers are the supervisor's, before
 * its clone of init).
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define HOST_SYSCTL_SLOTS	4
#define HOST_SYSCTL_TEXT	96	/* tcp_mem's three numbers with room */

struct slot {
	const char *path;	/* the caller's string: a literal */
	uint64_t read_ms;	/* when, on CLOCK_MONOTONIC_COARSE */
	ssize_t n;		/* length of text, or -errno */
	char text[HOST_SYSCTL_TEXT];
};

static struct {
	pthread_mutex_t lock;
	struct slot slot[HOST_SYSCTL_SLOTS];
	size_t used;
} kept = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* The coarse clock: the vDSO's, a tick's precision, no syscall. */
static uint64_t now_ms(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) < 0)
		return 0;	/* never read as fresh: see fresh() */
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Lock held.  The slot of path, or a new one, or NULL when all are taken. */
static struct slot *slot_of(const char *path)
{
	for (size_t i = 0; i < kept.used; i++)
		if (!strcmp(kept.slot[i].path, path))
			return &kept.slot[i];
	if (kept.used == HOST_SYSCTL_SLOTS)
		return NULL;
	kept.slot[kept.used] = (struct slot){ .path = path, .n = -ENODATA };
	return &kept.slot[kept.used++];
}

static bool fresh(const struct slot *s, uint64_t now)
{
	return s->n != -ENODATA && now && now >= s->read_ms &&
	       now - s->read_ms < HOST_SYSCTL_TTL_MS;
}

/* The file's text, whole (a sysctl's is one read), or -errno. */
static ssize_t read_text(const char *path, char *buf, size_t len)
{
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	do
		n = read(fd, buf, len - 1);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		n = -errno;
	close(fd);
	if (n >= 0)
		buf[n] = '\0';
	return n;
}

ssize_t host_sysctl_read_at(const char *path, char *buf, size_t len,
			    uint64_t now)
{
	struct slot *s;
	ssize_t n;

	if (len == 0)
		return -EINVAL;
	pthread_mutex_lock(&kept.lock);
	s = slot_of(path);
	if (!s) {		/* a fifth file: read as before, not kept */
		pthread_mutex_unlock(&kept.lock);
		return read_text(path, buf, len);
	}
	if (!fresh(s, now)) {
		s->n = read_text(path, s->text, sizeof(s->text));
		s->read_ms = now;
	}
	n = s->n;
	if (n >= 0) {
		if ((size_t)n >= len)
			n = (ssize_t)len - 1;	/* as a read of len - 1 would */
		memcpy(buf, s->text, (size_t)n);
		buf[n] = '\0';
	}
	pthread_mutex_unlock(&kept.lock);
	return n;
}

ssize_t host_sysctl_read(const char *path, char *buf, size_t len)
{
	return host_sysctl_read_at(path, buf, len, now_ms());
}
