/*
 * walkup.c - a directory's way up to the root, by "..".
 *
 * Whether a host path lies within something (a bind the sandbox writes,
 * a source of its view) is judged by identity, each directory on the way
 * up compared by device and inode, not by the path's spelling: a symlink
 * or a second bind mount of the same directory names it too.  ".." climbs
 * out of a mount as the kernel resolves it, so the walk is the host's.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

/* More levels than a path of PATH_MAX bytes can have */
#define WALK_UP_MAX	4096

int walk_up(int dir, bool (*visit)(const struct stat *st, void *arg), void *arg)
{
	struct stat st, up;
	int cur, parent, r = -ELOOP;

	cur = fcntl(dir, F_DUPFD_CLOEXEC, 3);
	if (cur < 0)
		return -errno;
	for (int depth = 0; depth < WALK_UP_MAX; depth++) {
		if (fstat(cur, &st) < 0) {
			r = -errno;
			break;
		}
		if (visit(&st, arg)) {
			r = 1;
			break;
		}
		parent = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (parent < 0 || fstat(parent, &up) < 0) {
			r = -errno;
			if (parent >= 0)
				close(parent);
			break;
		}
		close(cur);
		cur = parent;
		/* the root is its own parent */
		if (up.st_dev == st.st_dev && up.st_ino == st.st_ino) {
			r = 0;
			break;
		}
	}
	close(cur);
	return r;
}

void mountinfo_unescape(char *s)
{
	char *out = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' &&
		    s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*out++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
			s += 3;
		} else {
			*out++ = *s;
		}
	}
	*out = '\0';
}

/*
 * A mount table that checks are judged by, taken only as procfs's own
 * file: not another file mounted over its name.  init reads the host's
 * through /oldroot while it builds an image's root, where a mount onto a
 * link of the image's once laid a CA bundle over it, and what a bind held
 * beneath it was judged by certificates.  NULL with errno; EXDEV: not it.
 */
FILE *mountinfo_open(int dir, const char *path)
{
	struct statfs sf;
	struct statx stx;
	int fd = openat(dir, path, O_RDONLY | O_CLOEXEC), e;
	FILE *f;

	if (fd < 0)
		return NULL;
	if (fstatfs(fd, &sf) < 0 ||
	    syscall(SYS_statx, fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &stx) < 0) {
		e = errno;
		close(fd);
		errno = e;
		return NULL;
	}
	if (sf.f_type != PROC_SUPER_MAGIC || (stx.stx_attributes_mask &
	    stx.stx_attributes & STATX_ATTR_MOUNT_ROOT)) {
		close(fd);
		errno = EXDEV;
		return NULL;
	}
	f = fdopen(fd, "re");
	if (!f) {
		e = errno;
		close(fd);
		errno = e;
	}
	return f;
}

/*
 * A bind is recursive: what the host mounted beneath a source comes with
 * it, and the walk up from a path inside that mount never passes the
 * source.  So each mount point beneath the directory open at dir (as this
 * process's mount table names it) is stat'ed, which finds the mount's
 * root, and visited, until visit says true (1).  0 when none did; -errno
 * when the directory's path or the table cannot be read.
 */
int mounts_beneath(int dir, bool (*visit)(const struct stat *st, void *arg), void *arg)
{
	char self[64], path[PATH_MAX], *line = NULL;
	size_t len, cap = 0;
	ssize_t n;
	struct stat st;
	int r = 0;
	FILE *f;

	snprintf(self, sizeof(self), "/proc/self/fd/%d", dir);
	n = readlink(self, path, sizeof(path) - 1);
	if (n <= 0 || path[0] != '/')
		return n < 0 ? -errno : -ENOENT;
	path[n] = '\0';
	len = strcmp(path, "/") ? (size_t)n : 0;
	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -errno;
	while (r == 0 && getline(&line, &cap, f) > 0) {
		char *save = NULL, *at = strtok_r(line, " ", &save);

		/* id, parent, dev, root, then the mount point */
		for (int k = 0; at && k < 4; k++)
			at = strtok_r(NULL, " ", &save);
		if (!at)
			continue;
		mountinfo_unescape(at);
		if (strncmp(at, path, len) || at[len] != '/' || !at[len + 1])
			continue;
		if (stat(at, &st) == 0 && visit(&st, arg))
			r = 1;
	}
	free(line);
	fclose(f);
	return r;
}
