/*
 * oom.c - which process the kernel kills first when the host runs out.
 *
 * A sandbox's memory is bounded by its cgroup, but the sum of the
 * sandboxes' limits is not bounded by the host's memory (2G each by
 * default, a thousand sandboxes a daemon, a hundred a TCP peer), and
 * what a sandbox keeps in its tmpfs (/tmp, /dev/shm, the workspace's
 * changes) is in no process's RSS.  When the host runs out, the kernel's
 * OOM killer takes the process with the largest RSS plus its
 * oom_score_adj share of the host's memory: with every score adjustment
 * 0, a daemon of 4 MB outscored a sandbox's 1 MB processes, so the
 * sandboxes' pressure killed the supervisor of every sandbox (the other
 * tenants' die with it) or a host process before any of theirs.
 *
 * Init, before it runs anything, gets at least SANDBOX_OOM_SCORE_ADJ, and
 * every process of the sandbox inherits it: a process of some sandbox
 * goes first, whatever the daemon's size.  Written by the supervisor from
 * outside: as root (CAP_SYS_RESOURCE) that also makes it the floor the
 * sandbox cannot lower (oom_score_adj_min); an unprivileged supervisor
 * can only raise it, and the sandbox may lower it again down to its
 * caller's floor, which is where it was before.  Among sandboxes the
 * kernel still takes the largest process first: one sandbox spread over
 * small processes makes another's large one the victim (SECURITY.md).
 */
#include "internal.h"
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* half the scale: a sandbox's process of any size outscores a host's */
#define SANDBOX_OOM_SCORE_ADJ	500

/* -1001 (below the scale) when it cannot be read */
static int own_oom_score_adj(void)
{
	char buf[16];
	ssize_t n;
	int fd = open("/proc/self/oom_score_adj", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1001;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1001;
	buf[n] = '\0';
	return atoi(buf);
}

int oom_prefer_sandbox(pid_t pid, struct corral_err *err)
{
	char path[64], val[16];
	int fd, adj = own_oom_score_adj(), len;
	ssize_t w;

	/* never lower than ours: that would need a privilege we may lack */
	if (adj < SANDBOX_OOM_SCORE_ADJ)
		adj = SANDBOX_OOM_SCORE_ADJ;
	snprintf(path, sizeof(path), "/proc/%d/oom_score_adj", (int)pid);
	len = snprintf(val, sizeof(val), "%d", adj);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	/*
	 * Not ours to write: an unprivileged supervisor that is not dumpable
	 * (its launcher made it so; init inherits it, and its /proc files are
	 * then root's), a read-only /proc.  The sandbox is then as it was
	 * before, its processes scored as its supervisor's, not refused.
	 */
	if (fd < 0 && (errno == EACCES || errno == EROFS))
		return 0;
	if (fd < 0)
		return corral_set_errno(err, errno, "cannot open %s to make the "
					"sandbox the OOM killer's first choice", path);
	w = write(fd, val, (size_t)len);
	if (w != len) {
		int e = w < 0 ? errno : EIO;

		close(fd);
		return corral_set_errno(err, e, "cannot write %s to %s", val, path);
	}
	close(fd);
	return 0;
}

/*
 * The kernel counts an OOM kill here in the same step as in the victim's
 * group (__oom_kill_process: the event, then the group's oom_kill), a
 * count that says, on cgroup v1, that a group below another may have had
 * one (v1 counts it in the victim's group alone), where the box's own OOM
 * events cannot be had (call.c).  /proc/vmstat is the host's, whatever
 * namespace reads it: a count that did not move says no group had one;
 * one that moved may be any group's.
 */
int oom_kills_host(uint64_t *n)
{
	char buf[8192], *at;
	size_t len = 0;
	ssize_t r;
	int fd = open("/proc/vmstat", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	/* some 4 KiB: read whole, as one read may end mid-line */
	while (len < sizeof(buf) - 1 &&
	       (r = read(fd, buf + len, sizeof(buf) - 1 - len)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			r = -errno;
			close(fd);
			return (int)r;
		}
		len += (size_t)r;
	}
	close(fd);
	buf[len] = '\0';
	at = strstr(buf, "\noom_kill ");
	if (!at)
		return -ENOENT;	/* before 4.13, or past what was read */
	*n = strtoull(at + strlen("\noom_kill "), NULL, 10);
	return 0;
}
