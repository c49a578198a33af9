/*
 * boxfiles.c - a box's files for the daemon (corral_box_open/unlink/list),
 * resolved beneath the sandbox's root by the kernel.
 */
#include "internal.h"
#include "box.h"
#include "events.h"
#include "sandbox.h"
#include "tripwire.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>

/*
 * Everything a file operation touches is resolved by the kernel from the
 * sandbox's root: RESOLVE_IN_ROOT keeps ".." and absolute symlinks inside,
 * RESOLVE_NO_SYMLINKS refuses any symlink the agent planted, so no path
 * string the sandbox could swap is ever walked by us.  The fs uid is the
 * sandbox user's: as root we would otherwise read what the agent cannot.
 */
static int as_agent(struct corral_box *b, bool on)
{
	if (geteuid() != 0)
		return 0;
	setfsgid(on ? b->sb->host_gid : 0);
	setfsuid(on ? b->sb->host_uid : 0);
	return 0;
}

/*
 * A halted sandbox's files are evidence: readable while it is held
 * frozen, never changed; once it is killed its mounts are gone with it.
 */
static int check_path(struct corral_box *b, const char *path, bool write,
		      struct corral_err *err)
{
	if (b->state == CORRAL_BOX_HALTED && b->killed)
		return corral_set_err(err, CORRAL_E_HALTED, "halted: %s; the sandbox was "
				      "killed and its files went with it",
				      b->halt_reason);
	if (b->state == CORRAL_BOX_HALTED && write)
		return corral_set_err(err, CORRAL_E_HALTED, "halted: %s; its files can be "
				      "read, not changed", b->halt_reason);
	if (b->sb->rootfd < 0 || b->state == CORRAL_BOX_DEAD)
		return corral_set_err(err, CORRAL_E_GONE, "the sandbox is dead: its files "
				      "went with it");
	if (!path || path[0] != '/')
		return corral_set_err(err, -EINVAL, "path must be absolute inside "
				      "the sandbox (got \"%.200s\")", path ? path : "");
	if (strlen(path) >= 4096)
		return corral_set_err(err, -ENAMETOOLONG, "path is over 4095 bytes");
	return 0;
}

static int open_in_root(struct corral_box *b, const char *path, uint64_t flags,
			uint64_t mode, struct corral_err *err)
{
	struct open_how how = {
		.flags = flags | O_CLOEXEC | (flags & O_PATH ? 0 : O_NOCTTY),
		.mode = mode,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS |
			   RESOLVE_NO_MAGICLINKS,
	};
	cleanup_close int fd = -1;
	struct statfs sf;
	int e;

	if (!(flags & O_CREAT))
		how.mode = 0;
	as_agent(b, true);
	fd = syscall(SYS_openat2, b->sb->rootfd, path, &how, sizeof(how));
	e = errno;
	as_agent(b, false);
	if (fd < 0)
		return corral_set_err(err, -e, "%.300s: %s", path, e == ELOOP ?
				      "a symlink is in the path (symlinks are "
				      "never followed)" : e == EXDEV ?
				      "the path leaves the sandbox" : strerror(e));
	if (fstatfs(fd, &sf) == 0 && (sf.f_type == PROC_SUPER_MAGIC ||
				      sf.f_type == SYSFS_MAGIC))
		return corral_set_err(err, -EACCES, "%.300s: /proc and /sys are "
				      "not served", path);
	return steal_fd(&fd);
}

/*
 * The directory a file is in, resolved as the file will be: /proc and
 * /sys are refused there, before the file's own permissions could give a
 * different answer.
 */
static int check_parent(struct corral_box *b, const char *path,
			struct corral_err *err)
{
	const char *slash = strrchr(path, '/');
	cleanup_close int fd = -1;
	char dir[4096];

	snprintf(dir, sizeof(dir), "%.*s", slash > path ? (int)(slash - path) : 1, path);
	fd = open_in_root(b, dir, O_PATH | O_DIRECTORY, 0, err);
	return fd < 0 ? fd : 0;
}

/*
 * A tripwire is never opened by us (tripwire.h): its content is a decoy,
 * and an open would stop this process on its own fanotify answer, or be
 * counted as the agent's by inotify.  Nothing is suppressed: every open
 * the watch hears is the sandbox's.
 */
static int refuse_tripwire(struct corral_box *b, const char *path,
			   const struct stat *st, struct corral_err *err)
{
	if (!tripwire_is_wire(b->sb->tripwire, st))
		return 0;
	return corral_set_err(err, -EACCES, "%.300s is a tripwire (or a link to "
			      "one): a decoy the sandbox is watched by, never "
			      "opened through the API", path);
}

/*
 * The file as it is now: its inode judged through an O_PATH fd (no watch
 * hears that), then that same inode opened through /proc/self/fd, so a
 * name swapped in between cannot make us open something else.  A file
 * that does not exist is made with O_EXCL, which opens nothing that was.
 */
static int open_file(struct corral_box *b, const char *path, bool write,
		     struct corral_err *err)
{
	struct corral_err none = { 0 };
	cleanup_close int p = -1;
	char self[64];
	struct stat st;
	int f, e, r;

	p = open_in_root(b, path, O_PATH | O_NOFOLLOW, 0, &none);
	if (p == -ENOENT && write)
		return open_in_root(b, path, O_WRONLY | O_CREAT | O_EXCL |
				    O_NONBLOCK | O_NOFOLLOW, 0644, err);
	if (p < 0) {
		*err = none;
		return p;
	}
	if (fstat(p, &st) < 0)
		return corral_set_err(err, -errno, "%.300s: %s", path, strerror(errno));
	r = refuse_tripwire(b, path, &st, err);
	if (r < 0)
		return r;
	/* O_PATH | O_NOFOLLOW opens a last symlink itself: still refused */
	if (S_ISLNK(st.st_mode))
		return corral_set_err(err, -ELOOP, "%.300s: a symlink is in the "
				      "path (symlinks are never followed)", path);
	if (!S_ISREG(st.st_mode))
		return corral_set_err(err, S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL,
				      "%.300s: not a regular file", path);
	snprintf(self, sizeof(self), "/proc/self/fd/%d", p);
	as_agent(b, true);
	/* no FIFO may block us: it is a regular file, O_NONBLOCK all the same */
	f = open(self, (write ? O_WRONLY : O_RDONLY) | O_NONBLOCK | O_CLOEXEC |
		 O_NOCTTY);
	e = errno;
	as_agent(b, false);
	if (f < 0)
		return corral_set_err(err, -e, "%.300s: %s", path, strerror(e));
	return f;
}

int corral_box_open(struct corral_box *b, const char *path, int flags,
		    int *fd, struct corral_err *err)
{
	bool write = (flags & O_ACCMODE) != O_RDONLY;
	cleanup_close int f = -1;
	struct stat st;
	int r;

	*fd = -1;
	r = check_path(b, path, write, err);
	if (r == 0)
		r = check_parent(b, path, err);
	if (r < 0)
		return r;
	/* no O_TRUNC before we know it is a regular file */
	f = open_file(b, path, write, err);
	if (f < 0)
		return f;
	if (fstat(f, &st) < 0 || !S_ISREG(st.st_mode))
		return corral_set_err(err, S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL,
				      "%.300s: not a regular file", path);
	if (write && ftruncate(f, 0) < 0)
		return corral_set_errno(err, errno, "%.300s", path);
	fcntl(f, F_SETFL, write ? O_WRONLY : O_RDONLY);
	*fd = steal_fd(&f);
	return 0;
}

/* The parent directory, resolved in the root, and the last component. */
static int open_parent(struct corral_box *b, const char *path, char *dir,
		       size_t len, const char **base, struct corral_err *err)
{
	const char *slash;
	int r;

	r = check_path(b, path, true, err);
	if (r < 0)
		return r;
	slash = strrchr(path, '/');
	*base = slash + 1;
	if (!**base || !strcmp(*base, ".") || !strcmp(*base, ".."))
		return corral_set_err(err, -EINVAL, "%.300s: names no file", path);
	snprintf(dir, len, "%.*s", (int)(slash - path) ? (int)(slash - path) : 1,
		 path);
	return open_in_root(b, dir, O_PATH | O_DIRECTORY, 0, err);
}

int corral_box_unlink(struct corral_box *b, const char *path,
		      struct corral_err *err)
{
	cleanup_close int dfd = -1;
	char dir[4096];
	const char *base;
	struct stat st;
	int r = 0;

	dfd = open_parent(b, path, dir, sizeof(dir), &base, err);
	if (dfd < 0)
		return dfd;
	as_agent(b, true);
	if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
		r = -errno;
	as_agent(b, false);
	/* removing a tripwire is touching it: not ours to do */
	if (r == 0 && (r = refuse_tripwire(b, path, &st, err)) < 0)
		return r;
	as_agent(b, true);
	if (r == 0 && unlinkat(dfd, base, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) < 0)
		r = -errno;
	as_agent(b, false);
	if (r < 0)
		return corral_set_errno(err, -r, "%.300s", path);
	return 0;
}

int corral_box_list(struct corral_box *b, const char *path,
		    struct corral_dirent **out, size_t *n, struct corral_err *err)
{
	struct corral_dirent *v = NULL;
	struct dirent *de;
	size_t cap = 0;
	DIR *d;
	int fd, r;

	*out = NULL;
	*n = 0;
	r = check_path(b, path, false, err);
	if (r < 0)
		return r;
	fd = open_in_root(b, path, O_RDONLY | O_DIRECTORY, 0, err);
	if (fd < 0)
		return fd;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return corral_set_errno(err, errno, "%.300s", path);
	}
	as_agent(b, true);
	while ((de = readdir(d))) {
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (*n == cap) {
			struct corral_dirent *g = realloc(v, (cap = cap ? cap * 2 : 32) *
							  sizeof(*v));
			if (!g) {
				r = corral_set_err(err, -ENOMEM, "out of memory "
						   "listing a directory");
				break;
			}
			v = g;
		}
		memset(&v[*n], 0, sizeof(v[*n]));
		snprintf(v[*n].name, sizeof(v[*n].name), "%s", de->d_name);
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
			v[*n].type = S_ISREG(st.st_mode) ? 'f' : S_ISDIR(st.st_mode) ?
				'd' : S_ISLNK(st.st_mode) ? 'l' : 'o';
			v[*n].size = st.st_size;
			v[*n].mode = st.st_mode & 07777;
		} else {
			v[*n].type = 'o';
		}
		(*n)++;
	}
	as_agent(b, false);
	closedir(d);
	if (r < 0) {
		free(v);
		*n = 0;
		return r;
	}
	*out = v;
	return 0;
}
