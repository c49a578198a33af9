/*
 * hideview.c - every place of the sandbox's view that shows a hidden path,
 * found by identity (filesystem.hide, mount.c hide_paths).
 *
 * A bind's host path is only one name of what it shows: a symlink on the
 * way (the policy's "/srv/link" for /srv/data), a host bind mount of the
 * same directory at another path, /proc/self/root/... name it too, and a
 * check of the names alone left the hidden file readable there.  The
 * sandbox's own mount table says what each mount shows, as the kernel
 * knows it: a device and the path within that filesystem (mountinfo's
 * "root"), whatever name the mount was made from.  The hidden object's
 * place is taken the same way, from the mount it lies on; every other
 * mount of that device whose root holds it shows it, at its mount point
 * and the rest of the path; one whose root lies inside a hidden
 * directory shows part of it and is refused.
 *
 * The workspace is an overlay: its own device, its lower the host's
 * directory bound beneath the scratch (the caller names both), which
 * stands for /workspace here.  The root's layers (--rootfs, an image)
 * are an overlay's lowers in no mount: each is opened where the host's
 * root is and placed the same way, shown at "/".  Mounts the sandbox
 * will never see (the host's old root, the scratch) are passed over.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

/* A mount table longer than this is not judged: refused (hide less). */
#define HIDE_MOUNTS_MAX 65536

struct mnt {
	unsigned long id;
	char *dev;		/* "major:minor" */
	char *root;		/* the path within the filesystem */
	char *at;		/* the mount point */
};

struct table {
	struct mnt *m;
	size_t n, cap;
};

static void table_free(struct table *t)
{
	for (size_t i = 0; i < t->n; i++) {
		free(t->m[i].dev);
		free(t->m[i].root);
		free(t->m[i].at);
	}
	free(t->m);
}

/* "id parent major:minor root mount-point ..." (proc_pid_mountinfo(5)) */
static int table_line(struct table *t, char *line)
{
	char *save = NULL, *f[5];
	struct mnt *m;

	for (int k = 0; k < 5; k++)
		if (!(f[k] = strtok_r(k ? NULL : line, " ", &save)))
			return 0;
	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 64;

		m = realloc(t->m, cap * sizeof(*m));
		if (!m)
			return -ENOMEM;
		t->m = m;
		t->cap = cap;
	}
	mountinfo_unescape(f[3]);
	mountinfo_unescape(f[4]);
	m = &t->m[t->n];
	m->id = strtoul(f[0], NULL, 10);
	m->dev = strdup(f[2]);
	m->root = strdup(f[3]);
	m->at = strdup(f[4]);
	t->n++;
	return m->dev && m->root && m->at ? 0 : -ENOMEM;
}

static int table_read(const char *mountinfo, struct table *t, struct corral_err *err)
{
	char *line = NULL;
	size_t cap = 0;
	int r = 0;
	FILE *f = mountinfo_open(AT_FDCWD, mountinfo);

	if (!f)
		return corral_set_errno(err, errno, "filesystem.hide: cannot read %s%s", mountinfo,
					errno == EXDEV ? " (another file is mounted over it)" : "");
	while (r == 0 && getline(&line, &cap, f) > 0) {
		if (t->n >= HIDE_MOUNTS_MAX)
			r = corral_set_err(err, -E2BIG, "filesystem.hide: more than %d mounts: "
					   "which of them show a hidden path cannot be judged",
					   HIDE_MOUNTS_MAX);
		else if (table_line(t, line) < 0)
			r = corral_set_err(err, -ENOMEM, "filesystem.hide: out of memory reading %s",
					   mountinfo);
	}
	free(line);
	fclose(f);
	return r;
}

static bool under(const char *path, const char *top)
{
	size_t n = strlen(top);

	if (!strcmp(top, "/"))
		return path[0] == '/';
	return !strncmp(path, top, n) && (path[n] == '/' || !path[n]);
}

/* path's part below top ("" for top itself, else from its '/') */
static const char *below(const char *path, const char *top)
{
	return strcmp(top, "/") ? path + strlen(top) : path;
}

static const struct mnt *by_id(const struct table *t, unsigned long id)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->m[i].id == id)
			return &t->m[i];
	return NULL;
}

static const struct mnt *by_at(const struct table *t, const char *at)
{
	const struct mnt *found = NULL;

	/* the last one there is on top */
	for (size_t i = 0; i < t->n; i++)
		if (!strcmp(t->m[i].at, at))
			found = &t->m[i];
	return found;
}

/* Where the sandbox sees what is mounted at m, or NULL: never. */
static const char *seen_at(const struct hide_where *w, const struct mnt *m)
{
	if (w->lower && !strcmp(m->at, w->lower))
		return w->lower_view;
	for (size_t i = 0; i < w->nunseen; i++)
		if (under(m->at, w->unseen[i]))
			return NULL;
	return m->at;
}

static int views_add(struct hide_view **v, size_t *n, const char *at, const char *rest,
		     bool same_inode)
{
	struct hide_view *nv = realloc(*v, (*n + 1) * sizeof(**v));

	if (!nv)
		return -ENOMEM;
	*v = nv;
	if (asprintf(&nv[*n].path, "%s%s", strcmp(at, "/") ? at : "", rest) < 0)
		return -ENOMEM;
	nv[*n].same_inode = same_inode;
	nv[*n].part = false;
	(*n)++;
	return 0;
}

void hide_views_free(struct hide_view *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].path);
	free(v);
}

/*
 * The object at path as the sandbox sees it: its device and its path in
 * that filesystem (*fspath, allocated), from the mount it lies on and
 * the kernel's name for it (no symlink followed: the name is the path).
 */
/* The mount fd lies on, and the kernel's name for it (canon). */
static const struct mnt *mount_of(const struct hide_where *w, const struct table *t,
				  int fd, char *canon, size_t len)
{
	const struct mnt *m;
	struct statx stx;
	char link[64];
	ssize_t n;

	if (syscall(SYS_statx, fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW,
		    STATX_MNT_ID, &stx) < 0 || !(stx.stx_mask & STATX_MNT_ID))
		return NULL;
	snprintf(link, sizeof(link), "%s/self/fd/%d", w->proc, fd);
	n = readlink(link, canon, len - 1);
	if (n < 0)
		return NULL;
	canon[n] = '\0';
	m = by_id(t, (unsigned long)stx.stx_mnt_id);
	return m && under(canon, m->at) ? m : NULL;
}

/*
 * name's xattr of the file fd (O_PATH) holds, read through proc's
 * /self/fd/N: that file itself, no name of the layer walked again and
 * nothing opened.  fgetxattr refuses O_PATH fds; opened again by name
 * for it, a file the layer's owner swapped in after the fstat (a FIFO,
 * a FUSE file, a mount) was opened by the caller, a root supervisor.
 */
static ssize_t layer_xattr(const char *proc, int fd, const char *name, char *v, size_t len)
{
	char self[PATH_MAX];

	if ((size_t)snprintf(self, sizeof(self), "%s/self/fd/%d", proc, fd) >= sizeof(self)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return getxattr(self, name, v, len);
}

/*
 * Whether the directory at dir (O_PATH) is opaque: the overlay (userxattr,
 * as corral mounts it) looks for nothing beneath it in lower layers.  One
 * whose xattrs cannot be read counts as opaque: what lies below it in
 * lower layers is then never taken for what the sandbox sees.
 */
static bool layer_dir_opaque(const char *proc, int dir)
{
	char v[2] = "";
	ssize_t n = layer_xattr(proc, dir, "user.overlay.opaque", v, sizeof(v));

	if (n < 0)
		return errno != ENODATA && errno != EOPNOTSUPP && errno != ERANGE;
	return n == 1 && v[0] == 'y';
}

/*
 * Whether fd, st, is an xattr whiteout (overlayfs since 6.7, in its
 * userxattr form): an empty regular file marked user.overlay.whiteout,
 * which the kernel's lookup takes for a whiteout in any layer (composefs
 * trees, a layer kept on an overlay itself, where a 0:0 device would be
 * the outer overlay's whiteout; a --rootfs copied from them), where it
 * hides the name as a 0:0 device does.
 */
static bool layer_xwhiteout(const char *proc, int fd, const struct stat *st)
{
	if (!S_ISREG(st->st_mode) || st->st_size != 0)
		return false;
	return layer_xattr(proc, fd, "user.overlay.whiteout", NULL, 0) >= 0;
}

/*
 * canon beneath the layer at root, as the overlay looks it up: no link
 * followed.  1: the layer has it (*fd); 0: not there, a lower layer may
 * have it; -1: a link, a file or a whiteout on the way, or an opaque
 * directory above where it is missing, where the overlay stops looking
 * down, so no layer at or below this one holds what the sandbox sees
 * (the upper does: a directory corral made there).  Resolved as a path,
 * an image's "etc" -> "/oldroot/..." had the host's file judged, and its
 * binds masked, for the image's /etc/passwd; past an opaque directory, a
 * lower layer's file the overlay hides was judged for the upper's.  A
 * mount on the way is -1 too: the overlay's lookup in a layer never
 * crosses one (the sandbox sees the directory it covers, which no path
 * reaches), and walked into, a FUSE mount of the layer's owner there
 * (--rootfs DIR is the user's) held the caller, the export's root
 * supervisor, until its daemon answered.  Xattrs are read through proc
 * (layer_xattr): nothing of the layer's is opened.
 */
int layer_open(const char *proc, const char *root, const char *canon, int *fd)
{
	struct open_how how = {
		.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_BENEATH |
			   RESOLVE_NO_XDEV,
	};
	char name[NAME_MAX + 1];
	const char *p = canon;
	bool opaque = false;
	struct stat st;
	int dir = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC), next;

	*fd = -1;
	if (dir < 0)
		return 0;
	for (;;) {
		size_t len;

		p += strspn(p, "/");
		len = strcspn(p, "/");
		if (len > NAME_MAX) {
			close(dir);
			return 0;
		}
		memcpy(name, len ? p : ".", len ? len : 1);
		name[len ? len : 1] = '\0';
		p += len;
		next = (int)syscall(SYS_openat2, dir, name, &how, sizeof(how));
		if (next < 0) {
			int e = errno;

			close(dir);
			if (e == ELOOP || e == ENOTDIR || e == EXDEV)
				return -1;
			return opaque ? -1 : 0;
		}
		if (fstat(next, &st) < 0) {
			close(next);
			close(dir);
			return 0;
		}
		/* a whiteout (0:0, or the xattr's) hides the name in every layer below */
		if ((S_ISCHR(st.st_mode) && st.st_rdev == 0) ||
		    layer_xwhiteout(proc, next, &st)) {
			close(next);
			close(dir);
			return -1;
		}
		close(dir);
		if (!*(p + strspn(p, "/")))
			break;
		if (!S_ISDIR(st.st_mode)) {
			close(next);
			return -1;
		}
		opaque = opaque || layer_dir_opaque(proc, next);
		dir = next;
	}
	*fd = next;
	return 1;
}

/*
 * An object of the root (--rootfs, an image): the overlay's numbers are
 * not the host's, and its lowers are in no mount; the topmost layer that
 * has the path (opened where the host's root is, no link followed in it)
 * is what the sandbox sees.  None this process can open, or one the
 * overlay stops at: nothing else is judged.
 */
static int place_in_roots(const struct hide_where *w, const struct table *t,
			  const char *canon, const char *path, const char **dev,
			  char **fspath, struct stat *id, struct corral_err *err)
{
	char lcanon[PATH_MAX];
	const struct mnt *m;

	for (size_t i = w->nroots; i-- > 0;) {
		int fd, has = layer_open(w->proc, w->roots[i], canon, &fd);

		if (has < 0)
			break;
		if (!has)
			continue;
		m = fstat(fd, id) == 0 ? mount_of(w, t, fd, lcanon, sizeof(lcanon)) : NULL;
		close(fd);
		if (!m)
			continue;
		*dev = m->dev;
		if (asprintf(fspath, "%s%s", strcmp(m->root, "/") ? m->root : "",
			     below(lcanon, m->at)) < 0)
			return corral_set_err(err, -ENOMEM, "filesystem.hide %s: out of memory", path);
		return 0;
	}
	*dev = "";
	*fspath = strdup("/");
	return *fspath ? 0 : corral_set_err(err, -ENOMEM, "filesystem.hide %s: out of memory", path);
}

static int place_of(const struct hide_where *w, const struct table *t, int fd,
		    const char *path, const char **dev, char **fspath, struct stat *id,
		    struct corral_err *err)
{
	char lowered[PATH_MAX], canon[PATH_MAX];
	const struct mnt *m, *lower;

	m = mount_of(w, t, fd, canon, sizeof(canon));
	if (!m)
		return corral_set_errno(err, errno ? errno : ENOENT, "filesystem.hide %s: its "
					"mount is not in the mount table: what else shows it "
					"cannot be judged", path);
	/* in the root's layers: the topmost that has it is what "/" shows */
	if (!strcmp(m->at, "/") && w->nroots)
		return place_in_roots(w, t, canon, path, dev, fspath, id, err);
	/* in the workspace: the host's directory beneath the overlay */
	lower = w->lower && !strcmp(m->at, w->lower_view) ? by_at(t, w->lower) : NULL;
	if (lower)
		m = lower;
	*dev = m->dev;
	if (asprintf(fspath, "%s%s", strcmp(m->root, "/") ? m->root : "",
		     below(canon, lower ? w->lower_view : m->at)) < 0)
		return corral_set_err(err, -ENOMEM, "filesystem.hide %s: out of memory", path);
	/*
	 * What a bind of the same object shows: the host's inode, the
	 * lower's for the workspace (the overlay's own numbers are not it)
	 */
	if (lower && (size_t)snprintf(lowered, sizeof(lowered), "%s%s", w->lower,
				      below(canon, w->lower_view)) >= sizeof(lowered))
		return corral_set_err(err, -ENAMETOOLONG, "filesystem.hide %s: path too long", path);
	if (lower && lstat(lowered, id) < 0) {
		if (errno != ENOENT && errno != ENOTDIR)
			return corral_set_errno(err, errno, "filesystem.hide: cannot stat %s", lowered);
		/* the upper's alone (a fork's, from its snapshot): no host view */
		if (fstat(fd, id) < 0)
			return corral_set_errno(err, errno, "filesystem.hide: cannot stat %s", path);
		*dev = "";
		free(*fspath);
		*fspath = strdup("/");
		return *fspath ? 0 : corral_set_err(err, -ENOMEM, "filesystem.hide %s: out of memory", path);
	}
	if (!lower && fstat(fd, id) < 0)
		return corral_set_errno(err, errno, "filesystem.hide: cannot stat %s", path);
	if (!**fspath) {
		free(*fspath);
		*fspath = strdup("/");
		if (!*fspath)
			return corral_set_err(err, -ENOMEM, "filesystem.hide %s: out of memory", path);
	}
	return 0;
}

/*
 * The root's layers (--rootfs, an image) are an overlay's lowers, in no
 * mount of the table: each is opened where the host's root is, and its
 * place found as the hidden object's was; one that holds the object shows
 * it at "/" and the rest.  A layer this process cannot open (an image
 * store the sandbox's user cannot walk) is not judged.
 */
static int root_views(const struct hide_where *w, const struct table *t, const char *path,
		      const char *dev, const char *fspath, bool dir,
		      struct hide_view **out, size_t *nout, struct corral_err *err)
{
	char canon[PATH_MAX], *lfs = NULL;
	const struct mnt *m;
	int r = 0;

	for (size_t i = 0; r == 0 && i < w->nroots; i++) {
		int fd = open(w->roots[i], O_PATH | O_DIRECTORY | O_CLOEXEC);

		if (fd < 0)
			continue;
		m = mount_of(w, t, fd, canon, sizeof(canon));
		close(fd);
		if (!m || strcmp(m->dev, dev))
			continue;
		if (asprintf(&lfs, "%s%s", strcmp(m->root, "/") ? m->root : "",
			     below(canon, m->at)) < 0)
			return corral_set_err(err, -ENOMEM, "filesystem.hide %s: out of memory", path);
		if (!*lfs || under(fspath, lfs)) {
			if (views_add(out, nout, "/", *lfs ? below(fspath, lfs) : fspath, false) < 0)
				r = corral_set_err(err, -ENOMEM, "filesystem.hide %s: out of memory", path);
		} else if (dir && under(lfs, fspath)) {
			if (views_add(out, nout, "/", "", false) < 0)
				r = corral_set_err(err, -ENOMEM, "filesystem.hide %s: out of memory", path);
			else
				(*out)[*nout - 1].part = true;
		}
		free(lfs);
		lfs = NULL;
	}
	return r;
}

int hide_views(const struct hide_where *w, const char *path, struct hide_view **out,
	       size_t *nout, struct stat *id, struct corral_err *err)
{
	struct open_how how = {
		.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	struct table t = { 0 };
	const char *dev, *at;
	char *fspath = NULL;
	struct stat st;
	int fd, r;

	*out = NULL;
	*nout = 0;
	fd = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));
	/* not there, or a symlink: hide_open says what to make of it */
	if (fd < 0)
		return 0;
	r = fstat(fd, &st) < 0 ? corral_set_errno(err, errno, "filesystem.hide: cannot stat %s", path) : 0;
	if (r == 0)
		r = table_read(w->mountinfo, &t, err);
	if (r == 0)
		r = place_of(w, &t, fd, path, &dev, &fspath, id, err);
	for (size_t i = 0; r == 0 && i < t.n; i++) {
		const struct mnt *m = &t.m[i];

		if (strcmp(m->dev, dev) || !(at = seen_at(w, m)))
			continue;
		if (under(fspath, m->root)) {
			if (views_add(out, nout, at, below(fspath, m->root), at == m->at) < 0)
				r = corral_set_err(err, -ENOMEM, "filesystem.hide %s: out of memory", path);
		} else if (S_ISDIR(st.st_mode) && under(m->root, fspath)) {
			if (views_add(out, nout, at, "", false) < 0)
				r = corral_set_err(err, -ENOMEM, "filesystem.hide %s: out of memory", path);
			else
				(*out)[*nout - 1].part = true;
		}
	}
	if (r == 0)
		r = root_views(w, &t, path, dev, fspath, S_ISDIR(st.st_mode), out, nout, err);
	if (r < 0) {
		hide_views_free(*out, *nout);
		*out = NULL;
		*nout = 0;
	}
	free(fspath);
	table_free(&t);
	close(fd);
	return r;
}
