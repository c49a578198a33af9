/*
 * image_unpack.c - one image layer (a tar, gzip, zstd or plain) into a
 * directory, in overlay form, by a process that can do little else.
 *
 * A layer is hostile input: every name in it is resolved beneath the
 * layer's directory with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS), one component at a time, so no path and no
 * symlink an earlier entry planted leads out; ".." and control bytes
 * refuse the layer, absolute names are taken relative to it (reported),
 * device nodes are dropped and setuid,
 * setgid and file capabilities stripped (each reported); whiteouts become
 * overlay whiteouts (0/0 character devices, which the kernel lets anyone
 * create) and opaque directories the "user.overlay.opaque" xattr, the form
 * an overlay mounted in a user namespace (userxattr) reads; budgets on
 * files, declared bytes (sparse files count at their full size) and the
 * compression ratio stop bombs with a sentence that names the budget.
 *
 * Least privilege: the work is done by a forked child.  As root, it
 * restricts itself with Landlock to the layer's directory, then becomes
 * the store's owner (image.h: corral's range id, 65534 only where the
 * range is in use) with no groups and no_new_privs, as pid 1 of a pid
 * namespace of its own, so a bug in the tar or decompression code runs
 * as an id that owns no file of the host's and sees no process, not as
 * root in the host's namespace.  Ownership: the tree is owned by the unpacking uid
 * (the caller when unprivileged) and the owners the tar named are kept
 * beside it in LAYER_OWNERS ("UID GID PATH" lines, only for entries not
 * owned by 0:0), not as xattrs: user.* xattrs cannot go on symlinks and
 * trusted.* needs root.  A sandbox maps a single id today (its agent), so
 * a tree owned by one id is what it can use read-only and copy up; a
 * wider map or an idmapped mount can apply the owners file later.
 */
#include "image.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <locale.h>
#include <linux/openat2.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#define IO_BUF (128 * 1024)
#define MAX_DEPTH 256

struct dir_fix {
	char *path;
	mode_t mode;
	struct timespec mtime;
};

struct unpacker {
	int blobfd, rootfd;
	FILE *owners;
	struct archive *raw, *tar;
	struct image_hash blob_hash, tar_hash;
	uint64_t stream_max;
	const struct corral_image_limits *lim;
	struct unpack_report *rep;
	struct corral_err *err;
	bool failed;			/* err says why; the archive only knows "fatal" */
	struct dir_fix *dirs;
	size_t ndirs, capdirs;
	json_t *dir_index;		/* path -> index in dirs: no quadratic search */
	char *cbuf, *rbuf;
};

/* A name from the archive, printable in a message. */
static const char *shown(const char *s, char *buf, size_t len)
{
	size_t j = 0;

	for (; *s && j + 5 < len; s++) {
		unsigned char c = (unsigned char)*s;

		if (c < 0x20 || c == 0x7f || c == '\\')
			j += snprintf(buf + j, len - j, "\\x%02x", c);
		else
			buf[j++] = (char)c;
	}
	buf[j] = '\0';
	return buf;
}

static int fail(struct unpacker *u, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(struct unpacker *u, int code, const char *fmt, ...)
{
	va_list ap;

	if (u->failed)
		return u->err->code;
	u->failed = true;
	u->err->code = code;
	va_start(ap, fmt);
	vsnprintf(u->err->msg, sizeof(u->err->msg), fmt, ap);
	va_end(ap);
	return code;
}

static void example(struct unpacker *u, int kind, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void example(struct unpacker *u, int kind, const char *fmt, ...)
{
	va_list ap;

	if (u->rep->examples[kind][0])
		return;
	va_start(ap, fmt);
	vsnprintf(u->rep->examples[kind], sizeof(u->rep->examples[kind]), fmt, ap);
	va_end(ap);
}

/* ---- the two readers: blob -> (decompress) -> tar ---------------------- */

static la_ssize_t blob_read(struct archive *a, void *arg, const void **buf)
{
	struct unpacker *u = arg;
	ssize_t n;

	do
		n = read(u->blobfd, u->cbuf, IO_BUF);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		archive_set_error(a, errno, "read");
		return -1;
	}
	image_hash_update(&u->blob_hash, u->cbuf, n);
	u->rep->compressed += n;
	*buf = u->cbuf;
	return n;
}

static la_ssize_t tar_read(struct archive *a, void *arg, const void **buf)
{
	struct unpacker *u = arg;
	la_ssize_t n = archive_read_data(u->raw, u->rbuf, IO_BUF);
	uint64_t total;
	char a1[32], a2[32];

	if (n < 0) {
		fail(u, -EIO, "cannot decompress: %s", archive_error_string(u->raw));
		return -1;
	}
	image_hash_update(&u->tar_hash, u->rbuf, n);
	total = u->rep->stream + n;
	u->rep->stream = total;
	if (total > u->stream_max) {
		corral_format_size(u->stream_max, a1, sizeof(a1));
		fail(u, -EFBIG, "the layer's tar is larger than the import's budget (%s, --max-size)", a1);
		return -1;
	}
	if (total > u->lim->ratio_after && u->lim->max_ratio &&
	    total / (u->rep->compressed ? u->rep->compressed : 1) > u->lim->max_ratio) {
		corral_format_size(total, a1, sizeof(a1));
		corral_format_size(u->rep->compressed, a2, sizeof(a2));
		fail(u, -EFBIG, "decompression bomb: %s out of %s compressed, more than %llu:1 (--max-ratio)",
		     a1, a2, (unsigned long long)u->lim->max_ratio);
		return -1;
	}
	*buf = u->rbuf;
	return n;
}

static int open_readers(struct unpacker *u)
{
	struct archive_entry *e;

	u->raw = archive_read_new();
	u->tar = archive_read_new();
	if (!u->raw || !u->tar)
		return fail(u, -ENOMEM, "cannot allocate a tar reader");
	/*
	 * Only the filters the image formats use, and only built in: a filter
	 * that libarchive would run as an external program is refused.
	 */
	if (archive_read_support_filter_gzip(u->raw) != ARCHIVE_OK ||
	    archive_read_support_filter_zstd(u->raw) != ARCHIVE_OK)
		return fail(u, -ENOTSUP, "this libarchive has no built-in gzip or zstd");
	archive_read_support_format_raw(u->raw);
	archive_read_support_format_empty(u->raw);
	if (archive_read_open(u->raw, u, NULL, blob_read, NULL) != ARCHIVE_OK)
		return fail(u, -EIO, "cannot read the layer: %s", archive_error_string(u->raw));
	if (archive_read_next_header(u->raw, &e) != ARCHIVE_OK)
		return fail(u, -EIO, "cannot read the layer: %s", archive_error_string(u->raw));
	archive_read_support_format_tar(u->tar);
	archive_read_support_format_empty(u->tar);
	if (archive_read_open(u->tar, u, NULL, tar_read, NULL) != ARCHIVE_OK)
		return u->failed ? u->err->code :
			fail(u, -EINVAL, "not a tar: %s", archive_error_string(u->tar));
	return 0;
}

/* ---- names --------------------------------------------------------------- */

/*
 * Split an archive path into components in place: "./a//b/" -> a, b,
 * "/a" -> a.  Refused: "..", control bytes, too deep.
 */
static int split_path(struct unpacker *u, const char *orig, char *path,
		      char **comp, size_t *n)
{
	char shown_buf[160];

	*n = 0;
	/*
	 * An absolute name is taken relative to the layer's root, as docker,
	 * containerd and umoci take it (umoci writes "/" for the root itself);
	 * it is reported, and it can no more leave the layer than any other.
	 */
	if (path[0] == '/' && path[strspn(path, "/")]) {
		u->rep->absolute++;
		example(u, 4, "%s", shown(orig, shown_buf, sizeof(shown_buf)));
	}
	for (const char *p = path; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return fail(u, -EPERM, "a control byte in the name \"%s\"",
				    shown(orig, shown_buf, sizeof(shown_buf)));
	for (char *save = NULL, *c = strtok_r(path, "/", &save); c;
	     c = strtok_r(NULL, "/", &save)) {
		if (!strcmp(c, "."))
			continue;
		if (!strcmp(c, ".."))
			return fail(u, -EPERM, "\"..\" in the name \"%s\"",
				    shown(orig, shown_buf, sizeof(shown_buf)));
		if (strlen(c) > NAME_MAX)
			return fail(u, -ENAMETOOLONG, "a name longer than %d bytes in \"%s\"",
				    NAME_MAX, shown(orig, shown_buf, sizeof(shown_buf)));
		if (*n == MAX_DEPTH)
			return fail(u, -ENAMETOOLONG, "more than %d levels in \"%s\"",
				    MAX_DEPTH, shown(orig, shown_buf, sizeof(shown_buf)));
		comp[(*n)++] = c;
	}
	return 0;
}

static int beneath(int dirfd, const char *name, int flags, mode_t mode)
{
	struct open_how how = {
		.flags = flags | O_CLOEXEC | O_NOFOLLOW,
		.mode = mode,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
			   RESOLVE_NO_MAGICLINKS,
	};
	int fd = openat2_retry(dirfd, name, &how);

	return fd < 0 ? -errno : fd;
}

/* comp[0..n) joined by "/" into out; false if it does not fit. */
static bool join(char **comp, size_t n, char *out, size_t size)
{
	size_t len = 0;

	out[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		int w = snprintf(out + len, size - len, "%s%s", i ? "/" : "", comp[i]);

		if (w < 0 || (size_t)w >= size - len)
			return false;
		len += w;
	}
	return true;
}

static int remember_dir(struct unpacker *u, char **comp, size_t n, mode_t mode,
			const struct timespec *mtime)
{
	char path[PATH_MAX];
	json_t *known;

	if (!join(comp, n, path, sizeof(path)))
		return fail(u, -ENAMETOOLONG, "a path longer than %d bytes", PATH_MAX);
	known = json_object_get(u->dir_index, path);
	if (known) {
		size_t i = json_integer_value(known);

		u->dirs[i].mode = mode;
		u->dirs[i].mtime = *mtime;
		return 0;
	}
	if (u->ndirs == u->capdirs) {
		size_t cap = u->capdirs ? u->capdirs * 2 : 256;
		struct dir_fix *d = realloc(u->dirs, cap * sizeof(*d));

		if (!d)
			return fail(u, -ENOMEM, "out of memory for %zu directories", cap);
		u->dirs = d;
		u->capdirs = cap;
	}
	u->dirs[u->ndirs].path = strdup(path);
	if (!u->dirs[u->ndirs].path)
		return fail(u, -ENOMEM, "out of memory for a directory's name");
	if (json_object_set_new(u->dir_index, path, json_integer(u->ndirs)) < 0)
		return fail(u, -ENOMEM, "out of memory for a directory's name");
	u->dirs[u->ndirs].mode = mode;
	u->dirs[u->ndirs++].mtime = *mtime;
	return 0;
}

/*
 * The directory comp[0..n) beneath the root, made (0755 unless the tar
 * says otherwise later) where missing.  Directories are made 0700 while
 * the layer is written, so that a 0555 one can still be filled; their
 * modes are set at the end.
 */
static int open_dir(struct unpacker *u, char **comp, size_t n, const char *orig)
{
	int fd = dup(u->rootfd), next;
	char shown_buf[160];

	if (fd < 0)
		return fail(u, -errno, "dup: %s", strerror(errno));
	for (size_t i = 0; i < n; i++) {
		next = beneath(fd, comp[i], O_RDONLY | O_DIRECTORY, 0);
		if (next == -ENOENT) {
			struct timespec now = { 0, UTIME_OMIT };

			if (mkdirat(fd, comp[i], 0700) < 0 && errno != EEXIST) {
				next = -errno;
			} else {
				next = beneath(fd, comp[i], O_RDONLY | O_DIRECTORY, 0);
				if (next >= 0 && remember_dir(u, comp, i + 1, 0755, &now) < 0) {
					close(next);
					close(fd);
					return u->err->code;
				}
			}
		}
		if (next == -ENOTDIR) {
			struct stat st;

			if (fstatat(fd, comp[i], &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
				next = -ELOOP;
		}
		close(fd);
		if (next < 0)
			return fail(u, next, "\"%s\": %s is %s", shown(orig, shown_buf, sizeof(shown_buf)),
				    comp[i], next == -ELOOP || next == -EXDEV ?
				    "a symlink (nothing is written through one)" :
				    next == -ENOTDIR ? "not a directory" : strerror(-next));
		fd = next;
	}
	return fd;
}

/* Make room for a new entry: what is there goes, unless both are dirs. */
static int clear_leaf(struct unpacker *u, int dfd, const char *leaf, bool dir,
		      bool *exists_dir)
{
	struct stat st;

	*exists_dir = false;
	if (fstatat(dfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : fail(u, -errno, "stat %s: %s", leaf, strerror(errno));
	if (S_ISDIR(st.st_mode)) {
		if (dir) {
			*exists_dir = true;
			return 0;
		}
		if (store_remove_tree(dfd, leaf) < 0)
			return fail(u, -errno, "cannot replace the directory %s: %s", leaf,
				    strerror(errno));
		return 0;
	}
	if (unlinkat(dfd, leaf, 0) < 0)
		return fail(u, -errno, "cannot replace %s: %s", leaf, strerror(errno));
	return 0;
}

/* ---- entries ------------------------------------------------------------- */

static int write_data(struct unpacker *u, int fd, const char *name, int64_t size)
{
	const void *buf;
	size_t len;
	la_int64_t off;
	int r;

	while ((r = archive_read_data_block(u->tar, &buf, &len, &off)) == ARCHIVE_OK) {
		if (off < 0 || off + (int64_t)len > size)
			return fail(u, -EINVAL, "%s: data beyond its declared size", name);
		for (size_t done = 0; done < len;) {
			ssize_t n = pwrite(fd, (const char *)buf + done, len - done, off + done);

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				return fail(u, n < 0 ? -errno : -EIO, "write %s: %s", name,
					    n < 0 ? strerror(errno) : "short write");
			done += n;
		}
	}
	if (r != ARCHIVE_EOF)
		return u->failed ? u->err->code :
			fail(u, -EIO, "%s: %s", name, archive_error_string(u->tar));
	/* a sparse file's holes at the end */
	if (ftruncate(fd, size) < 0)
		return fail(u, -errno, "truncate %s: %s", name, strerror(errno));
	return 0;
}

static int add_file(struct unpacker *u, struct archive_entry *e, int dfd,
		    const char *leaf, const char *path, mode_t mode)
{
	struct timespec ts[2] = { { 0, UTIME_OMIT }, archive_entry_mtime_is_set(e) ?
		(struct timespec){ archive_entry_mtime(e), archive_entry_mtime_nsec(e) } :
		(struct timespec){ 0, UTIME_OMIT } };
	int64_t size = archive_entry_size(e);
	int fd, r;

	fd = beneath(dfd, leaf, O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (fd < 0)
		return fail(u, fd, "create %s: %s", path, strerror(-fd));
	r = write_data(u, fd, path, size);
	if (r == 0 && fchmod(fd, mode) < 0)
		r = fail(u, -errno, "chmod %s: %s", path, strerror(errno));
	if (r == 0 && futimens(fd, ts) < 0)
		r = fail(u, -errno, "set the time of %s: %s", path, strerror(errno));
	close(fd);
	return r;
}

static int add_whiteout(struct unpacker *u, int dfd, const char *leaf,
			const char *path)
{
	const char *name = leaf + 4;
	struct stat st;

	if (!strcmp(leaf, ".wh..wh..opq")) {
		/* the directory hides what lower layers have in it */
		if (fsetxattr(dfd, "user.overlay.opaque", "y", 1, 0) < 0)
			return fail(u, -errno, "mark %s opaque (user.overlay.opaque): %s",
				    path, strerror(errno));
		return 0;
	}
	if (!strncmp(leaf, ".wh..wh.", 8)) {
		u->rep->other++;
		example(u, 3, "%s (aufs metadata)", path);
		return 0;
	}
	if (!*name || !strcmp(name, ".") || !strcmp(name, ".."))
		return fail(u, -EPERM, "a whiteout with no name: %s", path);
	/* a whiteout hides the lower layers' file, not this layer's */
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		return 0;
	if (mknodat(dfd, name, S_IFCHR | 0, makedev(0, 0)) < 0)
		return fail(u, -errno, "whiteout %s: %s", path, strerror(errno));
	return 0;
}

static int record_owner(struct unpacker *u, struct archive_entry *e, const char *path)
{
	la_int64_t uid = archive_entry_uid(e), gid = archive_entry_gid(e);

	if ((uid || gid) && fprintf(u->owners, "%lld %lld %s\n", (long long)uid,
				    (long long)gid, path) < 0)
		return fail(u, -EIO, "cannot write the owners of the layer");
	return 0;
}

static void strip_caps(struct unpacker *u, struct archive_entry *e, const char *path)
{
	const char *name;
	const void *val;
	size_t len;

	if (archive_entry_xattr_reset(e) == 0)
		return;
	while (archive_entry_xattr_next(e, &name, &val, &len) == ARCHIVE_OK)
		if (!strcmp(name, "security.capability")) {
			u->rep->caps++;
			example(u, 2, "%s", path);
		}
}

static int add_entry(struct unpacker *u, struct archive_entry *e)
{
	const char *orig = archive_entry_pathname(e), *link;
	char *comp[MAX_DEPTH], path[PATH_MAX], buf[PATH_MAX], lbuf[PATH_MAX], sb[160];
	char *lcomp[MAX_DEPTH];
	mode_t type = archive_entry_filetype(e), mode = archive_entry_perm(e) & 07777;
	struct timespec mt = { archive_entry_mtime(e), archive_entry_mtime_nsec(e) };
	size_t n, ln;
	bool exists_dir;
	int dfd, r = 0;

	if (!orig)
		return fail(u, -EINVAL, "an entry whose name cannot be read");
	if (strlen(orig) >= sizeof(buf))
		return fail(u, -ENAMETOOLONG, "a name longer than %zu bytes", sizeof(buf));
	strcpy(buf, orig);
	if (split_path(u, orig, buf, comp, &n) < 0)
		return u->err->code;
	if (n == 0) {	/* "./": the layer's root itself */
		return type == AE_IFDIR ? remember_dir(u, comp, 0, mode & 01777, &mt) : 0;
	}
	if (!join(comp, n, path, sizeof(path)))
		return fail(u, -ENAMETOOLONG, "a path longer than %d bytes", PATH_MAX);

	if (++u->rep->files > u->lim->max_files)
		return fail(u, -EFBIG, "more than %llu files in the image (--max-files)",
			    (unsigned long long)u->lim->max_files);
	if (type == AE_IFREG && !archive_entry_hardlink(e)) {
		uint64_t size = archive_entry_size(e) < 0 ? 0 : archive_entry_size(e);
		char a1[32], a2[32];

		if (size > u->lim->max_bytes - u->rep->bytes) {
			corral_format_size(size, a1, sizeof(a1));
			corral_format_size(u->lim->max_bytes, a2, sizeof(a2));
			return fail(u, -EFBIG, "%s declares %s (sparse or not), over the import's budget of %s (--max-size)",
				    shown(path, sb, sizeof(sb)), a1, a2);
		}
		u->rep->bytes += size;
	}

	dfd = open_dir(u, comp, n - 1, orig);
	if (dfd < 0)
		return dfd;
	const char *leaf = comp[n - 1];

	if (!strncmp(leaf, ".wh.", 4)) {
		r = add_whiteout(u, dfd, leaf, path);
		goto out;
	}
	link = archive_entry_hardlink(e);
	if (!link && (type == AE_IFCHR || type == AE_IFBLK)) {
		u->rep->devices++;
		example(u, 0, "%s (%s %u:%u)", shown(path, sb, sizeof(sb)),
			type == AE_IFCHR ? "char" : "block",
			(unsigned)archive_entry_rdevmajor(e), (unsigned)archive_entry_rdevminor(e));
		goto out;
	}
	if (!link && (type == AE_IFSOCK || (type != AE_IFREG && type != AE_IFDIR &&
					     type != AE_IFLNK && type != AE_IFIFO))) {
		u->rep->other++;
		example(u, 3, "%s (file type 0%o)", shown(path, sb, sizeof(sb)), (unsigned)type);
		goto out;
	}
	if (!link && type != AE_IFDIR && (mode & (S_ISUID | S_ISGID))) {
		u->rep->setid++;
		example(u, 1, "%s (mode %04o)", shown(path, sb, sizeof(sb)), (unsigned)mode);
		mode &= ~(S_ISUID | S_ISGID);
	}
	if (type == AE_IFDIR)
		mode &= ~S_ISUID;
	strip_caps(u, e, path);
	r = clear_leaf(u, dfd, leaf, !link && type == AE_IFDIR, &exists_dir);
	if (r < 0)
		goto out;

	if (link) {
		int tfd;

		if (strlen(link) >= sizeof(lbuf)) {
			r = fail(u, -ENAMETOOLONG, "%s: a hard link target too long", path);
			goto out;
		}
		strcpy(lbuf, link);
		r = split_path(u, link, lbuf, lcomp, &ln);
		if (r == 0 && ln == 0)
			r = fail(u, -EPERM, "%s: a hard link to the layer's root", path);
		if (r < 0)
			goto out;
		tfd = open_dir(u, lcomp, ln - 1, link);
		if (tfd < 0) {
			r = tfd;
			goto out;
		}
		if (linkat(tfd, lcomp[ln - 1], dfd, leaf, 0) < 0)
			r = fail(u, -errno, "hard link %s -> %s: %s", shown(path, sb, sizeof(sb)),
				 link, strerror(errno));
		close(tfd);
	} else if (type == AE_IFREG) {
		r = add_file(u, e, dfd, leaf, path, mode);
	} else if (type == AE_IFDIR) {
		if (!exists_dir && mkdirat(dfd, leaf, 0700) < 0)
			r = fail(u, -errno, "mkdir %s: %s", path, strerror(errno));
		else
			r = remember_dir(u, comp, n, mode, &mt);
	} else if (type == AE_IFLNK) {
		/*
		 * Kept as written, also when it points out of the layer: it is
		 * never followed here, and in a sandbox it resolves in the
		 * sandbox's root.
		 */
		const char *target = archive_entry_symlink(e);
		struct timespec ts[2] = { { 0, UTIME_OMIT }, mt };

		if (!target || !*target)
			r = fail(u, -EINVAL, "%s: a symlink to nothing", path);
		else if (symlinkat(target, dfd, leaf) < 0)
			r = fail(u, -errno, "symlink %s: %s", path, strerror(errno));
		else
			utimensat(dfd, leaf, ts, AT_SYMLINK_NOFOLLOW);
	} else if (mknodat(dfd, leaf, S_IFIFO | (mode & 0777), 0) < 0) {
		r = fail(u, -errno, "mkfifo %s: %s", path, strerror(errno));
	}
	if (r == 0)
		r = record_owner(u, e, path);
out:
	close(dfd);
	return r;
}

/* Directories' modes and times, deepest first (they were kept 0700). */
static int fix_dirs(struct unpacker *u)
{
	for (size_t i = u->ndirs; i-- > 0;) {
		struct dir_fix *d = &u->dirs[i];
		struct timespec ts[2] = { { 0, UTIME_OMIT }, d->mtime };
		int fd = d->path[0] ? beneath(u->rootfd, d->path, O_RDONLY | O_DIRECTORY, 0) :
			dup(u->rootfd);

		if (fd < 0)
			continue;	/* replaced by a later entry */
		if (fchmod(fd, d->mode) < 0 || futimens(fd, ts) < 0) {
			close(fd);
			return fail(u, -errno, "set the mode of %s: %s", d->path, strerror(errno));
		}
		close(fd);
	}
	return 0;
}

/* Read to the end (a tar's trailing blocks are part of its diff-id). */
static int drain(struct unpacker *u)
{
	la_ssize_t n;
	const void *b;

	while ((n = tar_read(u->tar, u, &b)) > 0)
		;
	return n < 0 ? (u->failed ? u->err->code : fail(u, -EIO, "decompress")) : 0;
}

static int check_digest(struct unpacker *u, struct image_hash *h, const char *want,
			const char *what, char *got)
{
	image_hash_final(h, got);
	if (want && strcmp(got, want) != 0)
		return fail(u, -EBADMSG, "the layer's %s is %s, not %s as the image says",
			    what, got, want);
	return 0;
}

static int unpack_run(int blobfd, const char *blob_digest, const char *diff_id,
		      int destfd, const struct corral_image_limits *lim,
		      struct unpack_report *rep, struct corral_err *err)
{
	struct unpacker u = { .blobfd = blobfd, .rootfd = -1, .lim = lim, .rep = rep,
			      .err = err };
	struct archive_entry *e;
	char blob_got[CORRAL_DIGEST_MAX];
	int r, ofd;

	memset(rep, 0, sizeof(*rep));
	u.stream_max = image_stream_max(lim);
	u.cbuf = malloc(IO_BUF);
	u.rbuf = malloc(IO_BUF);
	u.dir_index = json_object();
	if (!u.cbuf || !u.rbuf || !u.dir_index) {
		r = fail(&u, -ENOMEM, "out of memory for buffers");
		goto out;
	}
	image_hash_init(&u.blob_hash);
	image_hash_init(&u.tar_hash);
	if (mkdirat(destfd, LAYER_ROOT, 0755) < 0) {
		r = fail(&u, -errno, "mkdir %s: %s", LAYER_ROOT, strerror(errno));
		goto out;
	}
	u.rootfd = beneath(destfd, LAYER_ROOT, O_RDONLY | O_DIRECTORY, 0);
	ofd = beneath(destfd, LAYER_OWNERS, O_WRONLY | O_CREAT | O_EXCL, 0644);
	if (u.rootfd < 0 || ofd < 0 || !(u.owners = fdopen(ofd, "w"))) {
		r = fail(&u, -EIO, "cannot create the layer's directory");
		goto out;
	}
	r = open_readers(&u);
	while (r == 0) {
		r = archive_read_next_header(u.tar, &e);
		if (r == ARCHIVE_EOF) {
			r = 0;
			break;
		}
		if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
			r = u.failed ? err->code :
				fail(&u, -EINVAL, "the layer's tar is damaged: %s",
				     archive_error_string(u.tar));
			break;
		}
		r = add_entry(&u, e);
	}
	if (r == 0)
		r = drain(&u);
	if (r == 0)
		r = fix_dirs(&u);
	if (r == 0 && fflush(u.owners) != 0)
		r = fail(&u, -EIO, "cannot write the owners of the layer");
	if (r == 0)
		r = check_digest(&u, &u.blob_hash, blob_digest, "blob's digest", blob_got);
	if (r == 0)
		r = check_digest(&u, &u.tar_hash, diff_id, "diff-id (the tar's digest)",
				 rep->diff_id);
out:
	if (u.owners)
		fclose(u.owners);
	if (u.rootfd >= 0)
		close(u.rootfd);
	if (u.raw)
		archive_read_free(u.raw);
	if (u.tar)
		archive_read_free(u.tar);
	image_hash_free(&u.blob_hash);
	image_hash_free(&u.tar_hash);
	for (size_t i = 0; i < u.ndirs; i++)
		free(u.dirs[i].path);
	free(u.dirs);
	json_decref(u.dir_index);
	free(u.cbuf);
	free(u.rbuf);
	return r < 0 ? r : 0;
}

/* ---- the child ------------------------------------------------------------ */

static int drop_privileges(const char *destpath, uid_t uid, gid_t gid,
			   struct corral_err *err)
{
	struct ll_rule rule = { destpath, true, false };
	struct rlimit core = { 0, 0 };
	int r;

	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		return corral_set_err(err, -errno, "PR_SET_PDEATHSIG: %s", strerror(errno));
	setrlimit(RLIMIT_CORE, &core);
	umask(0);
	/* names in pax headers are UTF-8: read them as such (built into glibc) */
	setlocale(LC_CTYPE, "C.UTF-8");
	/* Landlock first: its rule opens destpath, which only root can reach */
	r = landlock_apply(&rule, 1, NULL, 0, err);
	if (r < 0)
		return r;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return corral_set_err(err, -errno, "no_new_privs: %s", strerror(errno));
	if (geteuid() != 0)
		return 0;
	if (uid == 0 || gid == 0)
		return corral_set_err(err, -EPERM, "the unpacker may not stay root");
	if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 ||
	    setresuid(uid, uid, uid) < 0)
		return corral_set_errno(err, errno, "cannot become uid %u gid %u",
					(unsigned)uid, (unsigned)gid);
	return 0;
}

/*
 * As root, the rest of the child runs as pid 1 of a pid namespace of its
 * own: its uid is every root sandbox's agent's (image.h), and where
 * Landlock cannot scope signals (ABI < 6) it could signal theirs; alone,
 * it sees no process at all.  The child itself stays between, waits, and
 * ends as the unpacker did (a fork: about a millisecond an archive and a
 * layer).  wr: the report's pipe, which only the unpacker writes.
 */
static int unpacker_alone(int wr, struct corral_err *err)
{
	struct rlimit core = { 0, 0 };
	int status;
	pid_t c;

	if (geteuid() != 0)
		return 0;
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		return corral_set_errno(err, errno, "PR_SET_PDEATHSIG");
	setrlimit(RLIMIT_CORE, &core);
	if (unshare(CLONE_NEWPID) < 0)
		return corral_set_errno(err, errno, "unshare(CLONE_NEWPID)");
	c = fork();
	if (c < 0)
		return corral_set_errno(err, errno, "fork into a pid namespace");
	if (c == 0)
		return 0;
	close(wr);
	while (waitpid(c, &status, 0) < 0)
		if (errno != EINTR)
			_exit(1);
	if (WIFSIGNALED(status)) {
		signal(WTERMSIG(status), SIG_DFL);
		raise(WTERMSIG(status));
	}
	_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
}

/* Read exactly len bytes (a child's report); short: how many there were. */
static ssize_t read_full(int fd, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = read(fd, (char *)buf + got, len - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += n;
	}
	return got;
}

int image_unprivileged(const char *destpath, uid_t uid, gid_t gid,
		       int (*fn)(void *arg, void *out, struct corral_err *err),
		       void *arg, void *out, size_t outlen, struct corral_err *err)
{
	size_t len = sizeof(int) + sizeof(struct corral_err) + outlen;
	struct corral_err child_err = { 0 };
	int pipefd[2], status, rc;
	char *msg;
	pid_t pid;

	msg = calloc(1, len);
	if (!msg)
		return corral_set_err(err, -ENOMEM, "out of memory");
	if (pipe2(pipefd, O_CLOEXEC) < 0) {
		free(msg);
		return corral_set_err(err, -errno, "pipe: %s", strerror(errno));
	}
	pid = fork();
	if (pid < 0) {
		int e = errno;

		close(pipefd[0]);
		close(pipefd[1]);
		free(msg);
		return corral_set_err(err, -e, "fork: %s", strerror(e));
	}
	if (pid == 0) {
		/*
		 * import's arguments too: where its archive is and the name it
		 * was run by are nothing the hostile side needs (destpath is a
		 * copy, the caller's; no pointer into them is used from here)
		 */
		corral_forget("corral-unpack");
		close(pipefd[0]);
		rc = unpacker_alone(pipefd[1], &child_err);
		if (rc == 0)
			rc = drop_privileges(destpath, uid, gid, &child_err);
		if (rc == 0)
			rc = fn(arg, msg + sizeof(int) + sizeof(child_err), &child_err);
		memcpy(msg, &rc, sizeof(rc));
		memcpy(msg + sizeof(rc), &child_err, sizeof(child_err));
		_exit(write(pipefd[1], msg, len) == (ssize_t)len ? 0 : 1);
	}
	close(pipefd[1]);
	rc = read_full(pipefd[0], msg, len) == (ssize_t)len;
	close(pipefd[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!rc) {
		free(msg);
		if (WIFSIGNALED(status))
			return corral_set_err(err, -EIO, "the unprivileged process was killed by signal %d (%s)",
					      WTERMSIG(status), strsignal(WTERMSIG(status)));
		return corral_set_err(err, -EIO, "the unprivileged process ended without a word (status %d)",
				      status);
	}
	/*
	 * What the child says is read as a hostile archive's libarchive may
	 * have left it: its message is ended here, not where it says.
	 */
	memcpy(&rc, msg, sizeof(rc));
	if (rc < 0) {
		memcpy(err, msg + sizeof(rc), sizeof(*err));
		err->msg[sizeof(err->msg) - 1] = '\0';
		err->code = rc;
	}
	if (outlen)
		memcpy(out, msg + sizeof(rc) + sizeof(*err), outlen);
	free(msg);
	return rc < 0 ? rc : 0;
}

struct unpack_args {
	int blobfd, destfd;
	const char *blob_digest, *diff_id;
	const struct corral_image_limits *budget;
};

static int unpack_fn(void *arg, void *out, struct corral_err *err)
{
	struct unpack_args *a = arg;

	return unpack_run(a->blobfd, a->blob_digest, a->diff_id, a->destfd, a->budget,
			  out, err);
}

int image_unpack(int blobfd, const char *blob_digest, const char *diff_id,
		 int destfd, const char *destpath, uid_t uid, gid_t gid,
		 const struct corral_image_limits *budget,
		 struct unpack_report *rep, struct corral_err *err)
{
	struct unpack_args a = { blobfd, destfd, blob_digest, diff_id, budget };

	int r;

	memset(rep, 0, sizeof(*rep));
	r = image_unprivileged(destpath, uid, gid, unpack_fn, &a, rep, sizeof(*rep), err);
	if (r < 0)
		return r;
	/* the child's report, its strings ended and its counts within the budget */
	rep->diff_id[sizeof(rep->diff_id) - 1] = '\0';
	for (size_t i = 0; i < sizeof(rep->examples) / sizeof(rep->examples[0]); i++)
		rep->examples[i][sizeof(rep->examples[i]) - 1] = '\0';
	if (rep->bytes > budget->max_bytes || rep->files > budget->max_files)
		return corral_set_err(err, -EIO, "the unpacker reported %llu files and %llu bytes, past its budget of %llu and %llu",
				      (unsigned long long)rep->files, (unsigned long long)rep->bytes,
				      (unsigned long long)budget->max_files,
				      (unsigned long long)budget->max_bytes);
	return 0;
}
