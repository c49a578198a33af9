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
	fd = openat2_retry(b->sb->rootfd, path, &how);
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
	/*
	 * No FIFO may block us: it is a regular file, O_NONBLOCK all the same.
	 * A write truncates in the open, the inode being known regular: an
	 * open for writing alone makes overlayfs copy a workspace file's
	 * data up first, all of it, to be thrown away (and a lower file
	 * larger than the sandbox's disk could never be replaced).
	 */
	f = open(self, (write ? O_WRONLY | O_TRUNC : O_RDONLY) | O_NONBLOCK |
		 O_CLOEXEC | O_NOCTTY);
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
	/* O_TRUNC only once it is known to be a regular file (open_file) */
	f = open_file(b, path, write, err);
	if (f < 0)
		return f;
	if (fstat(f, &st) < 0 || !S_ISREG(st.st_mode))
		return corral_set_err(err, S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL,
				      "%.300s: not a regular file", path);
	/* a write's file is empty now: truncated in its open, or just made */
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

/* ---- directories and names ------------------------------------------ */

/*
 * One directory made in its parent, resolved as every path is (no symlink,
 * no way out); an existing directory is fine when parents asks for it.
 */
static int mkdir_one(struct corral_box *b, const char *path, unsigned mode,
		     bool exist_ok, struct corral_err *err)
{
	cleanup_close int dfd = -1, fd = -1;
	struct corral_err none = { 0 };
	char dir[4096];
	const char *base;
	int r = 0;

	dfd = open_parent(b, path, dir, sizeof(dir), &base, err);
	if (dfd < 0)
		return dfd;
	as_agent(b, true);
	if (mkdirat(dfd, base, mode & 0777) < 0)
		r = -errno;
	/*
	 * The mode asked for, whatever the daemon's umask took off: set on
	 * the directory just made through an fd, never by name (a name the
	 * sandbox swapped for a symlink meanwhile is refused, not followed).
	 */
	if (r == 0 && ((fd = openat(dfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
				    O_CLOEXEC)) < 0 || fchmod(fd, mode & 0777) < 0))
		r = -errno;
	as_agent(b, false);
	if (r == -EEXIST && exist_ok) {
		/* there: a directory, not a symlink to one */
		fd = open_in_root(b, path, O_PATH | O_DIRECTORY, 0, &none);
		if (fd < 0)
			return corral_set_err(err, fd == -ENOTDIR ? -EEXIST : fd,
					      "%.300s exists and is not a directory%s",
					      path, fd == -ELOOP ? " (a symlink)" : "");
		return 0;
	}
	if (r < 0)
		return corral_set_errno(err, -r, "mkdir %.300s", path);
	return 0;
}

int corral_box_mkdir(struct corral_box *b, const char *path, unsigned mode,
		     bool parents, struct corral_err *err)
{
	char part[4096];
	size_t n;
	int r;

	r = check_path(b, path, true, err);
	if (r < 0)
		return r;
	if (!parents)
		return mkdir_one(b, path, mode, false, err);
	/* each prefix in turn: "/a", "/a/b", ...; "." and ".." name no new one */
	n = strlen(path);
	while (n > 1 && path[n - 1] == '/')
		n--;
	for (size_t i = 1; i <= n; i++) {
		if (i < n && path[i] != '/')
			continue;
		snprintf(part, sizeof(part), "%.*s", (int)i, path);
		if (part[i - 1] == '/')
			continue;
		r = mkdir_one(b, part, i == n ? mode : 0755, true, err);
		if (r < 0)
			return r;
	}
	return 0;
}

int corral_box_rename(struct corral_box *b, const char *from, const char *to,
		      bool replace, struct corral_err *err)
{
	cleanup_close int sfd = -1, dfd = -1;
	char sdir[4096], ddir[4096];
	const char *sbase, *dbase;
	struct stat st;
	int r = 0;

	sfd = open_parent(b, from, sdir, sizeof(sdir), &sbase, err);
	if (sfd < 0)
		return sfd;
	dfd = open_parent(b, to, ddir, sizeof(ddir), &dbase, err);
	if (dfd < 0)
		return dfd;
	as_agent(b, true);
	if (fstatat(sfd, sbase, &st, AT_SYMLINK_NOFOLLOW) < 0)
		r = -errno;
	as_agent(b, false);
	if (r < 0)
		return corral_set_errno(err, -r, "%.300s", from);
	if ((r = refuse_tripwire(b, from, &st, err)) < 0)
		return r;
	as_agent(b, true);
	if (fstatat(dfd, dbase, &st, AT_SYMLINK_NOFOLLOW) == 0)
		r = refuse_tripwire(b, to, &st, err);
	as_agent(b, false);
	if (r < 0)
		return r;
	/* the names are the kernel's to swap: a symlink is moved, not followed */
	as_agent(b, true);
	if (syscall(SYS_renameat2, sfd, sbase, dfd, dbase,
		    replace ? 0 : RENAME_NOREPLACE) < 0)
		r = -errno;
	as_agent(b, false);
	if (r == -EXDEV)
		return corral_set_err(err, -EXDEV, "%.300s -> %.300s: they are on "
				      "different filesystems of the sandbox (copy, "
				      "then delete)", from, to);
	if (r < 0)
		return corral_set_errno(err, -r, "rename %.300s -> %.300s", from, to);
	return 0;
}

/* ---- a tree, walked --------------------------------------------------- */

int box_path_ok(struct corral_box *b, const char *path, bool write,
		struct corral_err *err)
{
	return check_path(b, path, write, err);
}

int box_open_in_root(struct corral_box *b, const char *path, uint64_t flags,
		     uint64_t mode, struct corral_err *err)
{
	return open_in_root(b, path, flags, mode, err);
}

void box_as_agent(struct corral_box *b, bool on)
{
	as_agent(b, on);
}

static int name_cmp(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

struct walk {
	struct corral_box *b;
	box_walk_fn fn;
	void *arg;
	bool recursive;
	size_t max, seen;
	size_t held;		/* names read and not yet freed (BOX_WALK_NAMES) */
	bool spill;		/* past max names: stop reading, answer 2 */
	struct corral_err *err;
};

static int walk_dir(struct walk *w, int dfd, char *rel, size_t rlen, int depth,
		    const char *after);

/* The directory name of dfd, rel its path, walked: after, as walk_dir's. */
static int walk_sub(struct walk *w, int dfd, const char *name, char *rel, size_t rlen,
		    int depth, const char *after)
{
	cleanup_close int sub = -1;
	struct statfs sf;

	/* one component, a directory, not a link: stays beneath */
	sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sub < 0)
		return corral_set_errno(w->err, errno, "%.300s", rel);
	/* a mount of /proc or /sys beneath is not served */
	if (fstatfs(sub, &sf) == 0 && (sf.f_type == PROC_SUPER_MAGIC ||
				       sf.f_type == SYSFS_MAGIC))
		return 0;
	if (depth >= BOX_WALK_DEPTH)
		return corral_set_err(w->err, -ELOOP, "%.300s: deeper than "
				      "%d directories", rel, BOX_WALK_DEPTH);
	return walk_dir(w, steal_fd(&sub), rel, rlen, depth + 1, after);
}

static int walk_entry(struct walk *w, int dfd, const char *name, char *rel,
		      size_t rlen, int depth)
{
	struct corral_entry e = { 0 };
	char target[4096];
	struct stat st;
	size_t n;
	int r;

	n = snprintf(rel + rlen, 4096 - rlen, "%s%s", rlen ? "/" : "", name);
	if (rlen + n >= 4096)
		return corral_set_err(w->err, -ENAMETOOLONG, "a path under the "
				      "walked directory is over 4095 bytes");
	if (++w->seen > w->max)
		return 1;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return corral_set_errno(w->err, errno, "%.300s", rel);
	e.path = rel;
	e.type = S_ISREG(st.st_mode) ? 'f' : S_ISDIR(st.st_mode) ? 'd' :
		 S_ISLNK(st.st_mode) ? 'l' : 'o';
	e.size = S_ISDIR(st.st_mode) ? 0 : st.st_size;
	e.mode = st.st_mode & 07777;
	e.mtime = st.st_mtime;
	e.wire = tripwire_is_wire(w->b->sb->tripwire, &st);
	if (S_ISLNK(st.st_mode)) {
		ssize_t t = readlinkat(dfd, name, target, sizeof(target) - 1);

		target[t > 0 ? t : 0] = '\0';
		e.target = target;
	}
	r = w->fn(w->arg, dfd, name, &e, &st);
	if (r)
		return r;
	if (S_ISDIR(st.st_mode) && w->recursive)
		return walk_sub(w, dfd, name, rel, rlen + n, depth, NULL);
	return 0;
}

/*
 * How many names of the next directory a walk may read: one more than it
 * can still take (it stops there, truncated), within BOX_WALK_NAMES held.
 * A directory of 262,144 empty files, which cost the sandbox almost
 * nothing, held about 70 MB of the daemon's for its names, for a listing
 * of 100,000 entries.
 */
static size_t names_room(const struct walk *w, bool *by_max)
{
	size_t left = w->max - w->seen, room = BOX_WALK_NAMES - w->held;

	*by_max = left < room;
	return *by_max ? left + 1 : room;
}

/* names[0..n) a max-heap by name: the last of those kept on top */
static void heap_up(char **h, size_t i)
{
	while (i) {
		size_t p = (i - 1) / 2;
		char *t = h[p];

		if (strcmp(t, h[i]) >= 0)
			break;
		h[p] = h[i];
		h[i] = t;
		i = p;
	}
}

static void heap_down(char **h, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, m = i;
		char *t;

		if (l < n && strcmp(h[l], h[m]) > 0)
			m = l;
		if (l + 1 < n && strcmp(h[l + 1], h[m]) > 0)
			m = l + 1;
		if (m == i)
			return;
		t = h[m];
		h[m] = h[i];
		h[i] = t;
		i = m;
	}
}

/* after's first component: its length, and *rest past its '/' (or NULL). */
static size_t after_first(const char *after, const char **rest)
{
	const char *slash = strchr(after, '/');

	*rest = slash ? slash + 1 : NULL;
	return slash ? (size_t)(slash - after) : strlen(after);
}

/* strcmp(name, the first len bytes of comp), as if those were a string. */
static int first_cmp(const char *name, const char *comp, size_t len)
{
	int r = strncmp(name, comp, len);

	return r ? r : name[len] ? 1 : 0;
}

/*
 * A walk resumed after the entry the last page ended on (corral_box_walk_after):
 * the rest of that entry's own directory, recursive, given before the names
 * that follow it here.  The entry itself was given; a directory the tree
 * has lost or changed since has nothing left to give.  Only names are
 * compared: the cursor is never opened as a path, so a forged one can
 * name nothing the same walk from the start would not.
 */
static int walk_resume(struct walk *w, int dfd, const char *first, size_t len,
		       const char *rest, char *rel, size_t rlen, int depth)
{
	char name[4096];
	struct stat st;
	size_t n;

	if (len >= sizeof(name) || rlen + len + 1 >= 4096)
		return 0;	/* no such name: nothing to resume beneath */
	snprintf(name, sizeof(name), "%.*s", (int)len, first);
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
		return 0;
	n = snprintf(rel + rlen, 4096 - rlen, "%s%s", rlen ? "/" : "", name);
	return walk_sub(w, dfd, name, rel, rlen + n, depth, rest);
}

/*
 * Takes fd; the entries in name order, so the answer is the same each time.
 * Past what the walk can still take, only the first names by order are
 * kept (a heap), so a truncated answer is the same as if all were read.
 * Only the names are kept: readdir's record ends with its name, so a copy
 * of a whole struct dirent would read past the last one in the buffer.
 */
static int walk_dir(struct walk *w, int fd, char *rel, size_t rlen, int depth,
		    const char *after)
{
	char **names = NULL;
	DIR *d = fdopendir(fd);
	struct dirent *de;
	size_t n = 0, cap = 0, room, alen = 0;
	const char *rest = NULL;
	bool by_max;
	int r = 0;

	if (!d) {
		close(fd);
		return corral_set_errno(w->err, errno, "%.300s", rlen ? rel : ".");
	}
	if (after) {
		alen = after_first(after, &rest);
		if (w->recursive)
			r = walk_resume(w, dirfd(d), after, alen, rest, rel, rlen, depth);
		rel[rlen] = '\0';
	}
	room = names_room(w, &by_max);
	while (r == 0 && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		/* given by the pages before, or beneath the one resumed above */
		if (after && first_cmp(de->d_name, after, alen) <= 0)
			continue;
		if (n == room && !by_max) {
			r = corral_set_err(w->err, -EFBIG, "%s%.300s: more than %d entries "
					   "to walk at once", rlen ? "" : "the directory",
					   rel, BOX_WALK_NAMES);
			break;
		}
		if (n == room) {
			char *keep;

			if (strcmp(de->d_name, names[0]) >= 0)
				continue;	/* after all those kept: never reached */
			if (!(keep = strdup(de->d_name))) {
				r = corral_set_err(w->err, -ENOMEM, "out of memory "
						   "walking %.300s", rel);
				break;
			}
			free(names[0]);
			names[0] = keep;
			heap_down(names, n, 0);
			continue;
		}
		if (n == cap) {
			char **g = realloc(names, (cap = cap ? cap * 2 : 64) *
					   sizeof(*names));
			if (!g) {
				r = corral_set_err(w->err, -ENOMEM, "out of memory "
						   "walking %.300s", rel);
				break;
			}
			names = g;
		}
		if (!(names[n] = strdup(de->d_name))) {
			r = corral_set_err(w->err, -ENOMEM, "out of memory walking "
					   "%.300s", rel);
			break;
		}
		if (by_max)
			heap_up(names, n);
		/* more than max: the rest is not read, nor one entry handed on */
		if (++n == room && by_max && w->spill) {
			r = 2;
			break;
		}
	}
	if (r == 0 && n > 1)	/* an empty directory has no array to sort */
		qsort(names, n, sizeof(*names), name_cmp);
	w->held += n;
	for (size_t i = 0; i < n && r == 0; i++) {
		r = walk_entry(w, dirfd(d), names[i], rel, rlen, depth);
		rel[rlen] = '\0';
	}
	w->held -= n;
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	closedir(d);
	return r;
}

static int walk_at(struct corral_box *b, const char *path, bool recursive,
		   const char *after, size_t max, bool spill, box_walk_fn fn, void *arg,
		   struct corral_err *err)
{
	struct walk w = { b, fn, arg, recursive, max, 0, 0, spill, err };
	char rel[4096] = "";
	int fd, r;

	r = check_path(b, path, false, err);
	if (r < 0)
		return r;
	fd = open_in_root(b, path, O_RDONLY | O_DIRECTORY, 0, err);
	if (fd < 0)
		return fd;
	as_agent(b, true);
	r = walk_dir(&w, fd, rel, 0, 0, after && *after ? after : NULL);
	as_agent(b, false);
	return r;
}

int box_walk(struct corral_box *b, const char *path, bool recursive, size_t max,
	     box_walk_fn fn, void *arg, struct corral_err *err)
{
	return walk_at(b, path, recursive, NULL, max, false, fn, arg, err);
}

struct pub_walk {
	int (*fn)(void *arg, const struct corral_entry *e);
	void *arg;
	struct corral_err *err;
};

static int pub_entry(void *arg, int dfd, const char *name,
		     const struct corral_entry *e, const struct stat *st)
{
	struct pub_walk *p = arg;
	int r;

	(void)dfd;
	(void)name;
	(void)st;
	r = p->fn(p->arg, e);
	if (r < 0)
		corral_set_errno(p->err, -r, "%.300s", e->path);
	return r;
}

int corral_box_walk_after(struct corral_box *b, const char *path, bool recursive,
			  const char *after, size_t max,
			  int (*fn)(void *arg, const struct corral_entry *e),
			  void *arg, bool *truncated, struct corral_err *err)
{
	struct pub_walk p = { fn, arg, err };
	int r = walk_at(b, path, recursive, after, max, false, pub_entry, &p, err);

	*truncated = r == 1;
	return r == 1 ? 0 : r;
}

int corral_box_walk(struct corral_box *b, const char *path, bool recursive,
		    size_t max, int (*fn)(void *arg, const struct corral_entry *e),
		    void *arg, bool *truncated, struct corral_err *err)
{
	return corral_box_walk_after(b, path, recursive, NULL, max, fn, arg,
				     truncated, err);
}

int corral_box_list_small(struct corral_box *b, const char *path, size_t max,
			  int (*fn)(void *arg, const struct corral_entry *e),
			  void *arg, bool *more, bool *truncated, struct corral_err *err)
{
	struct pub_walk p = { fn, arg, err };
	int r = walk_at(b, path, false, NULL, max, true, pub_entry, &p, err);

	*more = r == 2;
	*truncated = r == 1;
	return r == 1 || r == 2 ? 0 : r;
}
