/*
 * newfile.c - a file that takes its name only once it is whole.
 *
 * A patch or a copy out is written beside the name it will have and
 * renamed onto it when complete, so that a failed write leaves the old
 * file as it was and no reader sees half of one.  Written under a name
 * of its own (NAME.corral-export.PID), it stayed there when the writer
 * was killed with SIGKILL, which no handler sees.  It is made unnamed
 * instead (O_TMPFILE): the kernel frees it with its last fd, and it gets
 * a name only in the instant before the rename.  A filesystem without
 * O_TMPFILE (some network and FUSE ones) gets the named file, as before.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/*
 * Names tried for the file beside NAME: one left by a writer killed while
 * it held it (its pid may be ours again) is passed over, not failed on.
 */
#define NEWFILE_NAMES	8

static void tmp_name(struct corral_newfile *f, int attempt)
{
	if (attempt)
		snprintf(f->tmp, sizeof(f->tmp), "%.200s.corral-export.%d.%d", f->name,
			 (int)getpid(), attempt);
	else
		snprintf(f->tmp, sizeof(f->tmp), "%.200s.corral-export.%d", f->name,
			 (int)getpid());
}

/*
 * An unnamed file is named through /proc/self/fd at the end: without a
 * /proc it could not be, and all that was written would be lost then.
 */
static bool nameable(int fd)
{
	char proc[64];

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	return faccessat(AT_FDCWD, proc, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

int corral_newfile_open(struct corral_newfile *f, int dir, const char *name,
			mode_t mode, struct corral_err *err)
{
	*f = (struct corral_newfile){ .dir = dir, .fd = -1, .name = name };
	tmp_name(f, 0);
	f->fd = newfile_unnamed(dir, mode);
	if (f->fd >= 0 && nameable(f->fd))
		return f->fd;
	if (f->fd >= 0) {
		close(f->fd);
		f->fd = -EOPNOTSUPP;
	}
	if (f->fd != -EOPNOTSUPP)
		return corral_set_err(err, f->fd, "cannot create a new file beside "
				      "%s: %s", name, strerror(-f->fd));
	for (int i = 0; i < NEWFILE_NAMES; i++) {
		tmp_name(f, i);
		f->fd = openat(dir, f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
			       O_CLOEXEC, mode);
		if (f->fd >= 0 || errno != EEXIST)
			break;
	}
	if (f->fd < 0)
		return corral_set_errno(err, errno, "cannot create %s beside %s",
					f->tmp, name);
	f->named = true;
	return f->fd;
}

int newfile_unnamed(int dir, mode_t mode)
{
	int fd = openat(dir, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, mode);

	/* EISDIR: a kernel or filesystem that knows no O_TMPFILE */
	if (fd < 0 && errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
		return -errno;
	return fd < 0 ? -EOPNOTSUPP : fd;
}

int newfile_link(int fd, int dir, const char *name)
{
	char proc[64];

	/* AT_EMPTY_PATH would need CAP_DAC_READ_SEARCH */
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	return linkat(AT_FDCWD, proc, dir, name, AT_SYMLINK_FOLLOW) < 0 ? -errno : 0;
}

/* An unnamed file's name beside its place, for the rename to take. */
static int link_tmp(struct corral_newfile *f)
{
	int r = -EEXIST;

	for (int i = 0; i < NEWFILE_NAMES && r == -EEXIST; i++) {
		tmp_name(f, i);
		r = newfile_link(f->fd, f->dir, f->tmp);
	}
	f->named = r == 0;
	return r;
}

int corral_newfile_keep(struct corral_newfile *f, struct corral_err *err)
{
	int r = 0;

	if (!f->named)
		r = link_tmp(f);
	if (close(f->fd) < 0 && r == 0)
		r = -errno;
	f->fd = -1;
	/* the name itself replaced, never a symlink there followed */
	if (r == 0 && renameat(f->dir, f->tmp, f->dir, f->name) < 0)
		r = -errno;
	if (r == 0) {
		f->named = false;
		return 0;
	}
	corral_newfile_drop(f);
	return corral_set_err(err, r, "cannot write %s: %s", f->name, strerror(-r));
}

void corral_newfile_drop(struct corral_newfile *f)
{
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
	if (f->named)
		unlinkat(f->dir, f->tmp, 0);
	f->named = false;
}
