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
#include <sys/stat.h>
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
