/*
 * diff.c - what a sandbox changed in its workspace, read from the overlay's
 * upper layer against the lower (the original workspace).
 *
 * overlayfs (Documentation/filesystems/overlayfs.rst) keeps in the upper
 * layer every entry the sandbox created or changed (copied up whole), a
 * whiteout for each it deleted (a character device 0/0, or an empty file
 * with an "overlay.whiteout" xattr), and marks a directory that replaced
 * the lower's wholesale with "overlay.opaque" = "y".  The xattrs are
 * "user.overlay.*" when mounted with userxattr (as corral does), else
 * "trusted.overlay.*".  redirect_dir and metacopy would make the upper
 * layer incomplete on its own; corral's mounts use neither (userxattr
 * excludes them), and an upper layer that has them is refused.
 *
 * Every entry is reached one component at a time beneath a directory fd,
 * never following a symlink: the sandbox may still be writing while this
 * runs (a live box), and nothing here trusts what it saw a moment before.
 */
#include "export.h"
#include "events.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#define RESOLVE_SAFE (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | \
		      RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)

int open_beneath(int dirfd, const char *path, int flags, mode_t mode)
{
	struct open_how how = {
		/* openat2 refuses O_PATH with any flag it ignores (O_NOCTTY) */
		.flags = (uint64_t)(flags | O_CLOEXEC | O_NOFOLLOW |
				    ((flags & O_PATH) ? 0 : O_NOCTTY)),
		.mode = (flags & O_CREAT) ? mode : 0,
		.resolve = RESOLVE_SAFE,
	};
	int fd = openat2_retry(dirfd, path, &how);

	return fd < 0 ? -errno : fd;
}

int read_beneath(int dirfd, const char *path, uint64_t max, char **data,
		 size_t *len)
{
	struct stat st;
	size_t got = 0;
	char *buf;
	int fd, r = 0;

	*data = NULL;
	*len = 0;
	/* O_NONBLOCK: a fifo swapped in must not hang us; fstat refuses it */
	fd = open_beneath(dirfd, path, O_RDONLY | O_NONBLOCK, 0);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		r = S_ISREG(st.st_mode) ? -errno : -EINVAL;
		goto out;
	}
	if ((uint64_t)st.st_size > max) {
		r = -EFBIG;
		goto out;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		r = -ENOMEM;
		goto out;
	}
	/* what fstat said, no more: a file growing under us is cut there */
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			free(buf);
			goto out;
		}
		if (n == 0)
			break;
		got += n;
	}
	buf[got] = '\0';
	*data = buf;
	*len = got;
out:
	close(fd);
	return r;
}

const char *change_kind_name(enum change_kind k)
{
	static const char *const names[] = {
		[CH_ADDED] = "added", [CH_MODIFIED] = "modified",
		[CH_DELETED] = "deleted", [CH_TYPE] = "type_changed",
		[CH_MODE] = "mode_changed",
	};

	return names[k];
}

char mode_type_char(mode_t m)
{
	return S_ISREG(m) ? 'f' : S_ISDIR(m) ? 'd' : S_ISLNK(m) ? 'l' :
		S_ISFIFO(m) ? 'p' : S_ISSOCK(m) ? 's' : S_ISCHR(m) ? 'c' :
		S_ISBLK(m) ? 'b' : '?';
}

const char *mode_type_name(mode_t m)
{
	return S_ISREG(m) ? "file" : S_ISDIR(m) ? "directory" :
		S_ISLNK(m) ? "symlink" : S_ISFIFO(m) ? "fifo" :
		S_ISSOCK(m) ? "socket" : S_ISCHR(m) ? "char device" :
		S_ISBLK(m) ? "block device" : "unknown";
}

void changes_free(struct changes *c)
{
	for (size_t i = 0; i < c->n; i++) {
		free(c->v[i].path);
		free(c->v[i].target);
		free(c->v[i].old_target);
	}
	free(c->v);
	*c = (struct changes){ 0 };
}

void changes_keep_under(struct changes *c, const char *top)
{
	size_t n = strlen(top), kept = 0;

	while (n && top[n - 1] == '/')
		n--;
	for (size_t i = 0; i < c->n; i++) {
		struct change *e = &c->v[i];

		if (!n || (!strncmp(e->path, top, n) && (!e->path[n] || e->path[n] == '/'))) {
			c->v[kept++] = *e;
			continue;
		}
		free(e->path);
		free(e->target);
		free(e->old_target);
	}
	c->n = kept;
}

/* ---- the walk ---------------------------------------------------------- */

struct walk {
	const struct export_limits *lim;
	struct changes *out;
	uint64_t entries, bytes, names;
	struct corral_err *err;
};

static int over_limit(struct walk *w, const char *path)
{
	return corral_set_err(w->err, -EFBIG,
			      "the workspace's changes exceed export.max_files (%llu entries) at %s: raise the limit in the policy's export section",
			      (unsigned long long)w->lim->max_files, path);
}

static char *join(const char *dir, const char *name)
{
	char *p;

	if (!*dir)
		return strdup(name);
	return asprintf(&p, "%s/%s", dir, name) < 0 ? NULL : p;
}

static int nomem(struct walk *w, const char *what)
{
	return corral_set_err(w->err, -ENOMEM, "out of memory listing %s", what);
}

static int emit(struct walk *w, struct change *c)
{
	w->names += strlen(c->path) + (c->target ? strlen(c->target) : 0) +
		    (c->old_target ? strlen(c->old_target) : 0);
	if (w->names > EXPORT_MAX_NAME_BYTES) {
		corral_set_err(w->err, -EFBIG, "the workspace's changes name more than "
			       "%llu MiB of paths and symlink targets, at %.300s",
			       EXPORT_MAX_NAME_BYTES >> 20, c->path);
		free(c->path);
		free(c->target);
		free(c->old_target);
		return -EFBIG;
	}
	if (w->out->n == w->out->cap) {
		size_t cap = w->out->cap ? w->out->cap * 2 : 64;
		struct change *v = realloc(w->out->v, cap * sizeof(*v));

		if (!v) {
			free(c->path);
			free(c->target);
			free(c->old_target);
			return nomem(w, "the changes");
		}
		w->out->v = v;
		w->out->cap = cap;
	}
	w->out->v[w->out->n++] = *c;
	return 0;
}

/* The overlay xattr name in either namespace; 1 found (value in buf). */
static int ovl_xattr(int fd, const char *name, char *buf, size_t len)
{
	static const char *const ns[] = { "user.overlay.", "trusted.overlay." };
	char full[64];

	for (size_t i = 0; i < 2; i++) {
		ssize_t n;

		snprintf(full, sizeof(full), "%s%s", ns[i], name);
		n = fgetxattr(fd, full, buf, len);
		if (n >= 0) {
			if ((size_t)n < len)
				buf[n] = '\0';
			return 1;
		}
		/* trusted.* is invisible without CAP_SYS_ADMIN: ENODATA too */
		if (errno != ENODATA && errno != ENOTSUP && errno != ERANGE)
			return -errno;
		if (errno == ERANGE)
			return 1;
	}
	return 0;
}

/* Features that leave part of the truth outside the upper layer. */
static int ovl_unsupported(struct walk *w, int fd, const char *path)
{
	static const char *const names[] = { "redirect", "metacopy" };
	char v[8];

	for (size_t i = 0; i < 2; i++) {
		int r = ovl_xattr(fd, names[i], v, sizeof(v));

		if (r < 0)
			return corral_set_err(w->err, r, "cannot read the xattrs of %s: %s",
					      path, strerror(-r));
		if (r > 0)
			return corral_set_err(w->err, -ENOTSUP,
					      "%s carries overlay.%s: an overlay with redirect_dir or metacopy is not read by export",
					      path, names[i]);
	}
	return 0;
}

/* A whiteout: a 0/0 char device, or an empty file marked by xattr. */
static int is_whiteout(int dirfd, const char *name, const struct stat *st)
{
	char v[8];
	int fd, r;

	if (S_ISCHR(st->st_mode))
		return st->st_rdev == makedev(0, 0);
	if (!S_ISREG(st->st_mode) || st->st_size != 0)
		return 0;
	fd = open_beneath(dirfd, name, O_RDONLY | O_NONBLOCK, 0);
	if (fd < 0)
		return fd == -EACCES ? 0 : fd;
	r = ovl_xattr(fd, "whiteout", v, sizeof(v));
	close(fd);
	return r;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A directory's names, sorted: the changes come out in a stable order. */
static int list_dir(struct walk *w, int dirfd, const char *path, char ***names,
		    size_t *n)
{
	size_t cap = 0;
	struct dirent *de;
	DIR *d;
	int fd = dup(dirfd);

	*names = NULL;
	*n = 0;
	if (fd < 0 || !(d = fdopendir(fd))) {
		int e = errno;

		if (fd >= 0)
			close(fd);
		return corral_set_err(w->err, -e, "cannot list %s: %s",
				      *path ? path : ".", strerror(e));
	}
	rewinddir(d);
	while ((errno = 0, de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (++w->entries > w->lim->max_files) {
			closedir(d);
			return over_limit(w, *path ? path : ".");
		}
		if (*n == cap) {
			char **v = realloc(*names, (cap = cap ? cap * 2 : 16) * sizeof(char *));

			if (!v)
				goto oom;
			*names = v;
		}
		if (!((*names)[*n] = strdup(de->d_name)))
			goto oom;
		(*n)++;
	}
	closedir(d);
	if (*n)
		qsort(*names, *n, sizeof(char *), cmp_names);
	return 0;
oom:
	closedir(d);
	return nomem(w, *path ? path : ".");
}

static void free_names(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

static int read_link(struct walk *w, int dirfd, const char *name,
		     const char *path, char **out)
{
	char buf[4096];
	ssize_t n = readlinkat(dirfd, name, buf, sizeof(buf));

	if (n < 0)
		return corral_set_err(w->err, -errno, "cannot read the link %s: %s",
				      path, strerror(errno));
	if ((size_t)n >= sizeof(buf))
		return corral_set_err(w->err, -ENAMETOOLONG, "the link %s is too long", path);
	*out = strndup(buf, n);
	return *out ? 0 : nomem(w, path);
}

/* Equal bytes in two regular files; 1 equal, 0 not, -errno. */
static int same_content(int updir, int lowdir, const char *name)
{
	char a[65536], b[65536];
	int fa, fb, r = 1;

	fa = open_beneath(updir, name, O_RDONLY | O_NONBLOCK, 0);
	if (fa < 0)
		return fa;
	fb = open_beneath(lowdir, name, O_RDONLY | O_NONBLOCK, 0);
	if (fb < 0) {
		close(fa);
		return fb;
	}
	for (;;) {
		ssize_t na = read(fa, a, sizeof(a));
		ssize_t nb = na > 0 ? read(fb, b, (size_t)na) : read(fb, b, 1);

		if (na < 0 || nb < 0) {
			r = -errno;
			break;
		}
		/* read() of a regular file returns what is asked until EOF */
		if (na != nb || memcmp(a, b, na)) {
			r = 0;
			break;
		}
		if (na == 0)
			break;
	}
	close(fa);
	close(fb);
	return r;
}

static int walk_dir(struct walk *w, int up, int low, const char *path,
		    bool opaque);

/* Every entry of a lower subtree, deleted, children before their parent. */
static int delete_lower(struct walk *w, int lowdir, const char *name,
			const char *path, const struct stat *st)
{
	struct change c = { .kind = CH_DELETED, .old_mode = st->st_mode,
			    .old_size = S_ISREG(st->st_mode) ? st->st_size : 0 };
	int r;

	if (S_ISDIR(st->st_mode)) {
		char **names;
		size_t n;
		int fd = open_beneath(lowdir, name, O_RDONLY | O_DIRECTORY, 0);

		if (fd < 0)
			return corral_set_err(w->err, fd, "cannot open %s in the workspace: %s",
					      path, strerror(-fd));
		r = list_dir(w, fd, path, &names, &n);
		for (size_t i = 0; r == 0 && i < n; i++) {
			struct stat cst;
			char *cpath = join(path, names[i]);

			if (!cpath)
				r = nomem(w, path);
			else if (fstatat(fd, names[i], &cst, AT_SYMLINK_NOFOLLOW) < 0)
				r = corral_set_err(w->err, -errno, "cannot stat %s: %s",
						   cpath, strerror(errno));
			else
				r = delete_lower(w, fd, names[i], cpath, &cst);
			free(cpath);
		}
		free_names(names, n);
		close(fd);
		if (r < 0)
			return r;
	}
	if (S_ISLNK(st->st_mode) && (r = read_link(w, lowdir, name, path, &c.old_target)) < 0)
		return r;
	if (!(c.path = strdup(path))) {
		free(c.old_target);
		return nomem(w, path);
	}
	return emit(w, &c);
}

/* One upper entry against the lower's entry of the same name, if any. */
static int walk_entry(struct walk *w, int up, int low, const char *name,
		      const char *path, bool parent_opaque)
{
	struct stat ust, lst;
	struct change c = { 0 };
	bool has_lower;
	int r;

	if (fstatat(up, name, &ust, AT_SYMLINK_NOFOLLOW) < 0)
		return corral_set_err(w->err, -errno, "cannot stat %s in the upper layer: %s",
				      path, strerror(errno));
	has_lower = low >= 0 && fstatat(low, name, &lst, AT_SYMLINK_NOFOLLOW) == 0;

	r = is_whiteout(up, name, &ust);
	if (r < 0)
		return corral_set_err(w->err, r, "cannot read %s in the upper layer: %s",
				      path, strerror(-r));
	if (r > 0)
		return has_lower ? delete_lower(w, low, name, path, &lst) : 0;

	c.mode = ust.st_mode;
	c.size = S_ISREG(ust.st_mode) ? ust.st_size : 0;
	if (S_ISREG(ust.st_mode) && (w->bytes += c.size) > w->lim->max_bytes)
		return corral_set_err(w->err, -EFBIG,
				      "the workspace's changes exceed export.max_bytes (%llu bytes) at %s: raise the limit in the policy's export section",
				      (unsigned long long)w->lim->max_bytes, path);
	if (S_ISLNK(ust.st_mode) && (r = read_link(w, up, name, path, &c.target)) < 0)
		return r;

	if (S_ISDIR(ust.st_mode)) {
		bool lower_dir = has_lower && S_ISDIR(lst.st_mode);
		int ufd = open_beneath(up, name, O_RDONLY | O_DIRECTORY, 0);
		int lfd = -1;
		char v[8];

		if (ufd < 0)
			return corral_set_err(w->err, ufd, "cannot open %s in the upper layer: %s",
					      path, strerror(-ufd));
		r = ovl_unsupported(w, ufd, path);
		if (r == 0) {
			r = ovl_xattr(ufd, "opaque", v, sizeof(v));
			/* "x" marks a directory holding xattr whiteouts, not opaque */
			c.opaque = r > 0 && v[0] == 'y';
			r = r < 0 ? corral_set_err(w->err, r, "cannot read the xattrs of %s: %s",
						   path, strerror(-r)) : 0;
		}
		if (r == 0 && has_lower && !lower_dir) {
			c.kind = CH_TYPE;
			c.old_mode = lst.st_mode;
			c.old_size = S_ISREG(lst.st_mode) ? lst.st_size : 0;
			if (S_ISLNK(lst.st_mode))
				r = read_link(w, low, name, path, &c.old_target);
		} else if (r == 0 && has_lower) {
			/* an opaque one replaced the lower's contents: modified */
			c.kind = c.opaque ? CH_MODIFIED : CH_MODE;
			c.old_mode = lst.st_mode;
		} else {
			c.kind = CH_ADDED;
		}
		/* the directory first: its entries are made inside it */
		if (r == 0 && (c.kind != CH_MODE || (c.mode & 07777) != (c.old_mode & 07777))) {
			if (!(c.path = strdup(path)))
				r = nomem(w, path);
			else
				r = emit(w, &c);
		} else {
			free(c.old_target);
		}
		if (r == 0 && lower_dir) {
			lfd = open_beneath(low, name, O_RDONLY | O_DIRECTORY, 0);
			if (lfd < 0)
				r = corral_set_err(w->err, lfd, "cannot open %s in the workspace: %s",
						   path, strerror(-lfd));
		}
		/* below an opaque directory, every directory hides the lower's */
		if (r == 0)
			r = walk_dir(w, ufd, lfd, path, c.opaque || parent_opaque);
		if (lfd >= 0)
			close(lfd);
		close(ufd);
		return r;
	}

	if (!has_lower) {
		c.kind = CH_ADDED;
	} else if (S_ISDIR(lst.st_mode)) {
		/* the lower directory's entries go first, then it turns into this */
		r = delete_lower(w, low, name, path, &lst);
		if (r < 0) {
			free(c.target);
			return r;
		}
		w->out->n--;	/* the directory's own deletion: a type change instead */
		free(w->out->v[w->out->n].path);
		c.kind = CH_TYPE;
		c.old_mode = lst.st_mode;
	} else if ((ust.st_mode & S_IFMT) != (lst.st_mode & S_IFMT)) {
		c.kind = CH_TYPE;
		c.old_mode = lst.st_mode;
		c.old_size = S_ISREG(lst.st_mode) ? lst.st_size : 0;
		if (S_ISLNK(lst.st_mode) && (r = read_link(w, low, name, path, &c.old_target)) < 0) {
			free(c.target);
			return r;
		}
	} else {
		bool same = true;

		c.old_mode = lst.st_mode;
		c.old_size = S_ISREG(lst.st_mode) ? lst.st_size : 0;
		if (S_ISLNK(ust.st_mode)) {
			r = read_link(w, low, name, path, &c.old_target);
			same = r == 0 && !strcmp(c.target, c.old_target);
		} else if (S_ISREG(ust.st_mode)) {
			r = c.size != c.old_size ? 0 : same_content(up, low, name);
			if (r < 0)
				r = corral_set_err(w->err, r, "cannot compare %s: %s", path,
						   strerror(-r));
			same = r > 0;
			r = r > 0 ? 0 : r;
		}
		if (r < 0) {
			free(c.target);
			free(c.old_target);
			return r;
		}
		if (same && (c.mode & 07777) == (c.old_mode & 07777)) {
			free(c.target);	/* copied up, unchanged */
			free(c.old_target);
			return 0;
		}
		c.kind = same ? CH_MODE : CH_MODIFIED;
	}
	if (!(c.path = strdup(path))) {
		free(c.target);
		free(c.old_target);
		return nomem(w, path);
	}
	return emit(w, &c);
}

static bool name_in(char **names, size_t n, const char *name)
{
	return n && bsearch(&name, names, n, sizeof(char *), cmp_names) != NULL;
}

static int walk_dir(struct walk *w, int up, int low, const char *path,
		    bool opaque)
{
	char **names, **lnames = NULL;
	size_t n, ln = 0;
	int r;

	r = list_dir(w, up, path, &names, &n);
	for (size_t i = 0; r == 0 && i < n; i++) {
		char *cpath = join(path, names[i]);

		r = cpath ? walk_entry(w, up, low, names[i], cpath, opaque) :
			nomem(w, path);
		free(cpath);
	}
	/*
	 * An opaque directory hides the lower's: each entry there that the
	 * upper does not have again is gone; one it has again was compared
	 * with it above, as the merged view shows the same name.
	 */
	if (r == 0 && opaque && low >= 0)
		r = list_dir(w, low, path, &lnames, &ln);
	for (size_t i = 0; r == 0 && i < ln; i++) {
		struct stat st;
		char *cpath;

		if (name_in(names, n, lnames[i]))
			continue;
		if (!(cpath = join(path, lnames[i])))
			r = nomem(w, path);
		else if (fstatat(low, lnames[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
			r = corral_set_err(w->err, -errno, "cannot stat %s: %s", cpath,
					   strerror(errno));
		else
			r = delete_lower(w, low, lnames[i], cpath, &st);
		free(cpath);
	}
	free_names(lnames, ln);
	free_names(names, n);
	return r;
}

bool workspace_tripwire(const struct corral_policy *p, const char *rel)
{
	static const char top[] = "/workspace/";

	for (size_t i = 0; p && i < p->abort.ntripwires; i++)
		if (!strncmp(p->abort.tripwires[i], top, sizeof(top) - 1) &&
		    !strcmp(p->abort.tripwires[i] + sizeof(top) - 1, rel))
			return true;
	return false;
}

/* Whether a tripwire of p lies beneath the workspace's directory dir. */
static bool holds_tripwire(const struct corral_policy *p, const char *dir)
{
	static const char top[] = "/workspace/";
	size_t n = strlen(dir);

	for (size_t i = 0; i < p->abort.ntripwires; i++) {
		const char *t = p->abort.tripwires[i];

		if (!strncmp(t, top, sizeof(top) - 1) &&
		    !strncmp(t + sizeof(top) - 1, dir, n) && t[sizeof(top) - 1 + n] == '/')
			return true;
	}
	return false;
}

static bool beneath(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	return !strncmp(path, dir, n) && path[n] == '/';
}

/*
 * The policy's tripwires under /workspace, and the directories made only
 * to hold them, out of the changes: mount.c planted them through the
 * overlay before anything of the agent's ran, so the upper layer holds
 * them, but they are corral's decoys, not the agent's work.  Exported,
 * the decoy landed in the host's workspace (--apply), where every later
 * start with the same policy failed ("a tripwire is planted only where
 * nothing is"), and its bytes were in every patch.  Nothing else can be
 * at its path: moving, removing or changing a tripwire halts the
 * sandbox, and a halted one exports nothing.  A directory goes with it
 * when it was added and holds nothing else: a change's entries follow it.
 */
static int drop_planted(struct walk *w, const struct corral_policy *p)
{
	struct changes *c = w->out;
	size_t kept = 0;
	bool *drop, any = false;

	if (!p || !p->abort.ntripwires || !c->n)
		return 0;
	drop = calloc(c->n, sizeof(*drop));
	if (!drop)
		return nomem(w, "the changes");
	for (size_t i = 0; i < c->n; i++)
		if (c->v[i].kind == CH_ADDED && S_ISREG(c->v[i].mode) &&
		    workspace_tripwire(p, c->v[i].path))
			drop[i] = any = true;
	/* deepest first: a directory's own directories are judged before it */
	for (size_t j = c->n; any && j-- > 0;) {
		size_t k = j + 1;

		if (c->v[j].kind != CH_ADDED || !S_ISDIR(c->v[j].mode) ||
		    !holds_tripwire(p, c->v[j].path))
			continue;
		while (k < c->n && beneath(c->v[k].path, c->v[j].path) && drop[k])
			k++;
		drop[j] = k == c->n || !beneath(c->v[k].path, c->v[j].path);
	}
	for (size_t i = 0; i < c->n; i++) {
		if (!drop[i]) {
			c->v[kept++] = c->v[i];
			continue;
		}
		free(c->v[i].path);
		free(c->v[i].target);
		free(c->v[i].old_target);
	}
	c->n = kept;
	free(drop);
	return 0;
}

int diff_changes(const struct layers *l, const struct export_limits *lim,
		 struct changes *out, struct corral_err *err)
{
	struct walk w = { .lim = lim, .out = out, .err = err };
	int r;

	*out = (struct changes){ 0 };
	r = ovl_unsupported(&w, l->upper, "the upper layer");
	if (r == 0)
		r = walk_dir(&w, l->upper, l->lower, "", false);
	if (r == 0)
		r = drop_planted(&w, l->planted);
	if (r < 0)
		changes_free(out);
	return r;
}

/* ---- the merged view -------------------------------------------------- */

bool layers_exists(const struct layers *l, const char *path)
{
	char buf[4096], *comp, *save = NULL;
	int up, low, r;
	bool found = false, in_lower = true;
	struct stat st;

	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return false;
	up = dup(l->upper);
	low = l->lower >= 0 ? dup(l->lower) : -1;
	if (up < 0)
		goto out;
	for (comp = strtok_r(buf, "/", &save); comp; comp = strtok_r(NULL, "/", &save)) {
		bool last = !save || !*save;
		bool uhas = up >= 0 && fstatat(up, comp, &st, AT_SYMLINK_NOFOLLOW) == 0;
		int nup = -1, nlow = -1;
		char v[8];

		if (uhas && is_whiteout(up, comp, &st) > 0)
			goto out;
		if (uhas && last) {
			found = true;
			goto out;
		}
		if (uhas && !S_ISDIR(st.st_mode))
			goto out;
		if (uhas) {
			nup = open_beneath(up, comp, O_RDONLY | O_DIRECTORY, 0);
			r = nup >= 0 ? ovl_xattr(nup, "opaque", v, sizeof(v)) : 0;
			if (r > 0 && v[0] == 'y')
				in_lower = false;
		}
		if (in_lower && low >= 0) {
			if (last) {
				found = fstatat(low, comp, &st, AT_SYMLINK_NOFOLLOW) == 0;
				if (nup >= 0)
					close(nup);
				goto out;
			}
			nlow = open_beneath(low, comp, O_RDONLY | O_DIRECTORY, 0);
		}
		if (up >= 0)
			close(up);
		if (low >= 0)
			close(low);
		up = nup;
		low = nlow;
		if (up < 0 && low < 0)
			goto out;
	}
out:
	if (up >= 0)
		close(up);
	if (low >= 0)
		close(low);
	return found;
}

/* ---- JSON --------------------------------------------------------------- */

json_t *change_json(const struct change *c)
{
	json_t *o = json_pack("{s:o, s:s}", "path", corral_json_bytes(c->path, strlen(c->path)),
			      "change", change_kind_name(c->kind));
	char m[8];

	if (!o)
		return NULL;
	if (c->mode) {
		json_object_set_new(o, "type", json_string(mode_type_name(c->mode)));
		snprintf(m, sizeof(m), "%04o", (unsigned)(c->mode & 07777));
		json_object_set_new(o, "mode", json_string(m));
	}
	if (c->old_mode && c->kind != CH_DELETED && c->kind != CH_ADDED) {
		if ((c->old_mode & S_IFMT) != (c->mode & S_IFMT))
			json_object_set_new(o, "old_type",
					    json_string(mode_type_name(c->old_mode)));
		snprintf(m, sizeof(m), "%04o", (unsigned)(c->old_mode & 07777));
		json_object_set_new(o, "old_mode", json_string(m));
	}
	if (c->kind == CH_DELETED)
		json_object_set_new(o, "type", json_string(mode_type_name(c->old_mode)));
	if (S_ISREG(c->mode))
		json_object_set_new(o, "size", json_integer((json_int_t)c->size));
	if (c->target)
		json_object_set_new(o, "target", corral_json_bytes(c->target, strlen(c->target)));
	if (c->old_target)
		json_object_set_new(o, "old_target",
				    corral_json_bytes(c->old_target, strlen(c->old_target)));
	if (c->opaque)
		json_object_set_new(o, "opaque", json_true());
	return o;
}

json_t *changes_json(const struct changes *c)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < c->n; i++)
		json_array_append_new(a, change_json(&c->v[i]));
	return a;
}
