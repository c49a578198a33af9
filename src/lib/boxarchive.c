/*
 * boxarchive.c - a box's directory as a tar archive, out and in
 * (corral_box_tar, corral_box_untar), every name resolved beneath the
 * sandbox's root as boxfiles.c resolves it, with nothing followed.
 */
#include "internal.h"
#include "box.h"
#include "sandbox.h"
#include "tripwire.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define TAR_BUF		(64 * 1024)
#define UNTAR_ENTRIES	100000	/* entries an archive may hold */

/* ---- out ------------------------------------------------------------------ */

struct tar_out {
	struct corral_box *b;
	struct archive *a;
	uint64_t max, written;
	int (*write)(void *arg, const void *buf, size_t len);
	void *arg;
	struct corral_err *err;
	int failed;		/* err set: the walk or a write said why */
};

static la_ssize_t tar_sink(struct archive *a, void *arg, const void *buf,
			   size_t len)
{
	struct tar_out *t = arg;
	int r;

	if (t->written + len > t->max) {
		t->failed = corral_set_err(t->err, -EFBIG, "the archive is over "
					   "%llu bytes", (unsigned long long)t->max);
		archive_set_error(a, EFBIG, "too large");
		return -1;
	}
	r = t->write(t->arg, buf, len);
	if (r < 0) {
		t->failed = corral_set_errno(t->err, -r, "writing the archive");
		archive_set_error(a, -r, "write");
		return -1;
	}
	t->written += len;
	return len;
}

/*
 * archive_write_header's ARCHIVE_WARN is a header written all the same: a
 * name that is not UTF-8 (the sandbox names its files in any bytes) goes
 * out as it is, marked hdrcharset=BINARY.  Taken for a failure, such a
 * name made the whole archive a 500.
 */
static int tar_failed(struct tar_out *t, const char *what, const char *path)
{
	if (t->failed)
		return t->failed;
	return corral_set_err(t->err, -EIO, "%s %.300s: %s", what, path,
			      archive_error_string(t->a));
}

/*
 * The file's bytes, read from the inode the walk judged, not its name.
 * The name is opened O_PATH (no open a watch hears) and only the inode
 * the walk judged is opened for reading, through that fd: the sandbox may
 * have swapped a hard link of a tripwire in since the walk's fstatat, and
 * opening it would stop this process on its own fanotify permission
 * event, for good (tripwire.h), or be taken for the agent's by inotify.
 */
static int tar_file(struct tar_out *t, int dfd, const char *name,
		    const struct corral_entry *e, const struct stat *st,
		    struct archive_entry *ae)
{
	cleanup_close int p = -1, fd = -1;
	char buf[TAR_BUF], self[64];
	uint64_t left = st->st_size;
	struct stat now;

	p = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (p < 0)
		return corral_set_errno(t->err, errno, "%.300s", e->path);
	if (fstat(p, &now) < 0 || now.st_ino != st->st_ino ||
	    now.st_dev != st->st_dev || !S_ISREG(now.st_mode))
		return corral_set_err(t->err, -ESTALE, "%.300s changed while it "
				      "was archived", e->path);
	snprintf(self, sizeof(self), "/proc/self/fd/%d", p);
	fd = open(self, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return corral_set_errno(t->err, errno, "%.300s", e->path);
	if (archive_write_header(t->a, ae) < ARCHIVE_WARN)
		return tar_failed(t, "archiving", e->path);
	while (left) {
		ssize_t n = read(fd, buf, left < sizeof(buf) ? left : sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return corral_set_errno(t->err, errno, "reading %.300s", e->path);
		/* it shrank: libarchive pads the entry to the size it announced */
		if (n == 0)
			break;
		if (archive_write_data(t->a, buf, n) < 0)
			return tar_failed(t, "archiving", e->path);
		left -= n;
	}
	return 0;
}

static int tar_entry(void *arg, int dfd, const char *name,
		     const struct corral_entry *e, const struct stat *st)
{
	struct tar_out *t = arg;
	struct archive_entry *ae;
	int r = 0;

	/* a tripwire is never opened, and nothing but these three is a file here */
	if (e->wire || e->type == 'o')
		return 0;
	ae = archive_entry_new();
	if (!ae)
		return corral_set_err(t->err, -ENOMEM, "out of memory archiving "
				      "%.300s", e->path);
	archive_entry_set_pathname(ae, e->path);
	archive_entry_set_mode(ae, st->st_mode);
	archive_entry_set_mtime(ae, st->st_mtime, 0);
	/* the sandbox's ids mean nothing outside it */
	archive_entry_set_uid(ae, 0);
	archive_entry_set_gid(ae, 0);
	if (e->type == 'f') {
		archive_entry_set_size(ae, st->st_size);
		r = tar_file(t, dfd, name, e, st, ae);
	} else {
		archive_entry_set_size(ae, 0);
		if (e->type == 'l')
			archive_entry_set_symlink(ae, e->target);
		if (archive_write_header(t->a, ae) < ARCHIVE_WARN)
			r = tar_failed(t, "archiving", e->path);
	}
	archive_entry_free(ae);
	return r;
}

int corral_box_tar(struct corral_box *b, const char *path, uint64_t max_bytes,
		   int (*write)(void *arg, const void *buf, size_t len),
		   void *arg, struct corral_err *err)
{
	struct tar_out t = { b, NULL, max_bytes, 0, write, arg, err, 0 };
	int r;

	t.a = archive_write_new();
	if (!t.a)
		return corral_set_err(err, -ENOMEM, "cannot allocate a tar writer");
	archive_write_set_format_pax_restricted(t.a);
	archive_write_set_bytes_in_last_block(t.a, 1);
	if (archive_write_open(t.a, &t, NULL, tar_sink, NULL) != ARCHIVE_OK) {
		r = corral_set_err(err, -EIO, "cannot start the archive: %s",
				   archive_error_string(t.a));
		archive_write_free(t.a);
		return r;
	}
	r = box_walk(b, path, true, SIZE_MAX, tar_entry, &t, err);
	if (r == 0 && archive_write_close(t.a) != ARCHIVE_OK)
		r = tar_failed(&t, "finishing the archive of", path);
	archive_write_free(t.a);
	return r < 0 ? r : 0;
}

/* ---- out, off the caller's loop --------------------------------------------- */

/*
 * Walked on the loop, a tree of 240,000 FIFOs (skipped: no byte of the
 * archive, so the 64 MiB cap never stops it) held every other client of
 * the daemon 0.4 s a request, for as long as one kept asking.  A worker
 * walks it and writes the archive into the caller's fd (a spool).
 */
struct tar_work {
	const char *path;
	uint64_t max;
};

/* In the worker: every byte into the spool, whatever a write takes. */
static int to_fd(void *arg, const void *buf, size_t len)
{
	const char *p = buf;
	int fd = *(int *)arg;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n;
		len -= n;
	}
	return 0;
}

static int tar_work(struct corral_box *b, void *arg, int fd, struct corral_err *err)
{
	struct tar_work *t = arg;

	return corral_box_tar(b, t->path, t->max, to_fd, &fd, err);
}

int corral_box_tar_start(struct corral_box *b, const char *path, uint64_t max_bytes,
			 int fd, corral_box_work_done_fn done, void *arg,
			 struct corral_box_work **out, struct corral_err *err)
{
	/* the worker's copy is made at its fork, before this returns */
	struct tar_work t = { path, max_bytes };

	return corral_box_work_start(b, path, tar_work, &t, fd, done, arg, out, err);
}

/* ---- in ------------------------------------------------------------------- */

struct untar {
	struct corral_box *b;
	const char *dir;
	struct corral_err *err;
	char **made;		/* names this archive created, undone on failure */
	size_t nmade, capmade;
};

/*
 * The name an entry is written at, relative to the archive's directory:
 * "./a//b/" is "a/b".  An absolute name, "..", or a control byte refuses
 * the archive: its names are meant to land beneath dir, and a name that
 * says otherwise is an archive made to escape.
 */
static int entry_name(const char *orig, char *out, size_t len,
		      struct corral_err *err)
{
	size_t n = 0;

	if (!orig || !orig[0])
		return corral_set_err(err, -EINVAL, "an entry with no name");
	if (orig[0] == '/')
		return corral_set_err(err, -EPERM, "\"%.200s\": an absolute name "
				      "(names must be relative to the directory)", orig);
	for (const char *p = orig; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return corral_set_err(err, -EPERM, "\"%.200s\": a control "
					      "byte in the name", orig);
	out[0] = '\0';
	for (const char *c = orig; *c;) {
		size_t l = strcspn(c, "/");

		if (l == 2 && !strncmp(c, "..", 2))
			return corral_set_err(err, -EPERM, "\"%.200s\": \"..\" in "
					      "the name", orig);
		if (l && !(l == 1 && c[0] == '.')) {
			if (n + l + 2 > len)
				return corral_set_err(err, -ENAMETOOLONG, "\"%.200s\": "
						      "too long", orig);
			n += snprintf(out + n, len - n, "%s%.*s", n ? "/" : "", (int)l, c);
		}
		c += l;
		c += *c == '/';
	}
	return 0;
}

/* What the sandbox's disk has left; UINT64_MAX where it cannot be told. */
struct untar_room {
	uint64_t bytes, files;
};

static void untar_room_of(struct corral_box *b, struct untar_room *room)
{
	struct statvfs sv;

	room->bytes = room->files = UINT64_MAX;
	if (b->sb->scratchfd < 0 || fstatvfs(b->sb->scratchfd, &sv) < 0)
		return;
	room->bytes = (uint64_t)sv.f_bavail * sv.f_frsize;
	room->files = sv.f_favail;
}

/*
 * An archive larger than the disk is refused whole, and as soon as its
 * headers say so: the next header is read only after the data before it
 * has been decompressed and skipped, and a 64 MiB gzip of zeros is 64 GiB
 * of it, minutes of the daemon's loop.  Judged at each header, what is
 * decompressed to judge is bounded by the room.
 */
static int untar_room_check(const struct corral_untar *st,
			    const struct untar_room *room, struct corral_err *err)
{
	if (st->bytes > room->bytes)
		return corral_set_err(err, -ENOSPC, "the archive holds at least "
				      "%llu bytes; the sandbox's disk has %llu free",
				      (unsigned long long)st->bytes,
				      (unsigned long long)room->bytes);
	if (st->entries > room->files)
		return corral_set_err(err, -ENOSPC, "the archive holds at least "
				      "%llu entries; the sandbox's disk has room for "
				      "%llu more files", (unsigned long long)st->entries,
				      (unsigned long long)room->files);
	return 0;
}

/* The first pass: every entry judged, its bytes counted; nothing written. */
static int untar_judge(struct archive *a, const struct untar_room *room,
		       struct corral_untar *st, struct corral_err *err)
{
	struct archive_entry *ae;
	char name[4096];
	int r;

	while ((r = archive_read_next_header(a, &ae)) == ARCHIVE_OK ||
	       r == ARCHIVE_WARN) {
		mode_t type = archive_entry_filetype(ae);
		const char *link = archive_entry_hardlink(ae);
		const char *shown = archive_entry_pathname(ae);

		if (++st->entries > UNTAR_ENTRIES)
			return corral_set_err(err, -E2BIG, "more than %d entries",
					      UNTAR_ENTRIES);
		r = entry_name(shown, name, sizeof(name), err);
		if (r == 0 && link)
			r = entry_name(link, name, sizeof(name), err);
		if (r < 0)
			return r;
		if (!link && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK)
			return corral_set_err(err, -EPERM, "\"%.200s\": a device, "
					      "FIFO or socket; only files, "
					      "directories and links are unpacked",
					      shown);
		if (archive_entry_mode(ae) & (S_ISUID | S_ISGID))
			return corral_set_err(err, -EPERM, "\"%.200s\": a setuid or "
					      "setgid bit (mode %04o)", shown,
					      archive_entry_mode(ae) & 07777);
		/*
		 * Every body the next header lies behind, whatever its entry:
		 * it is inflated to be skipped.  A hard link may carry one
		 * (pax), a GNU dumpdir ('D') does: counted for files only,
		 * 64 MiB of gzip'd zeros behind a link held the daemon's loop
		 * for minutes a pass, as the room check above was to prevent.
		 */
		if (archive_entry_size(ae) > 0)
			st->bytes += (uint64_t)archive_entry_size(ae);
		r = untar_room_check(st, room, err);
		if (r < 0)
			return r;
	}
	if (r != ARCHIVE_EOF)
		return corral_set_err(err, -EINVAL, "not a tar archive: %s",
				      archive_error_string(a));
	return 0;
}

static int untar_made(struct untar *u, const char *path)
{
	if (u->nmade == u->capmade) {
		size_t cap = u->capmade ? u->capmade * 2 : 64;
		char **g = realloc(u->made, cap * sizeof(*g));

		if (!g)
			return corral_set_err(u->err, -ENOMEM, "out of memory "
					      "unpacking");
		u->made = g;
		u->capmade = cap;
	}
	if (!(u->made[u->nmade] = strdup(path)))
		return corral_set_err(u->err, -ENOMEM, "out of memory unpacking");
	u->nmade++;
	return 0;
}

/* Whether path is there (a symlink too), without following anything. */
static bool exists(struct corral_box *b, const char *path)
{
	struct corral_err none = { 0 };
	int fd = box_open_in_root(b, path, O_PATH | O_NOFOLLOW, 0, &none);

	if (fd >= 0)
		close(fd);
	return fd != -ENOENT;
}

/* mkdir -p of path's parents, each new one recorded to be undone. */
static int untar_parents(struct untar *u, const char *path, size_t from)
{
	char part[4096];

	for (size_t i = from; path[i]; i++) {
		int r;

		if (path[i] != '/')
			continue;
		snprintf(part, sizeof(part), "%.*s", (int)i, path);
		if (exists(u->b, part))
			continue;
		r = corral_box_mkdir(u->b, part, 0755, false, u->err);
		if (r == 0)
			r = untar_made(u, part);
		if (r < 0)
			return r;
	}
	return 0;
}

static int untar_file(struct untar *u, struct archive *a, const char *path,
		      struct archive_entry *ae)
{
	cleanup_close int fd = -1;
	const void *buf;
	size_t len;
	la_int64_t off;
	int r;

	r = corral_box_open(u->b, path, O_WRONLY, &fd, u->err);
	if (r < 0)
		return r;
	while ((r = archive_read_data_block(a, &buf, &len, &off)) == ARCHIVE_OK) {
		const char *p = buf;

		while (len) {
			ssize_t n = pwrite(fd, p, len, off);

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				return corral_set_errno(u->err, n < 0 ? errno : EIO,
							"writing %.300s", path);
			p += n;
			off += n;
			len -= n;
		}
	}
	if (r != ARCHIVE_EOF)
		return corral_set_err(u->err, -EINVAL, "%.300s: %s", path,
				      archive_error_string(a));
	/* a sparse tail is a length, not a write */
	if (ftruncate(fd, archive_entry_size(ae)) < 0)
		return corral_set_errno(u->err, errno, "%.300s", path);
	if (fchmod(fd, archive_entry_perm(ae) & 0777) < 0)
		return corral_set_errno(u->err, errno, "chmod %.300s", path);
	futimens(fd, (struct timespec[2]){ { 0, UTIME_OMIT },
		  { archive_entry_mtime(ae), 0 } });
	return 0;
}

/* A symlink made, never followed; a link the archive makes twice is replaced. */
static int untar_symlink(struct untar *u, const char *path, const char *target)
{
	cleanup_close int dfd = -1;
	const char *base = strrchr(path, '/') + 1;
	char dir[4096];
	int r = 0;

	snprintf(dir, sizeof(dir), "%.*s", (int)(base - 1 - path), path);
	dfd = box_open_in_root(u->b, dir, O_PATH | O_DIRECTORY, 0, u->err);
	if (dfd < 0)
		return dfd;
	if (exists(u->b, path) && (r = corral_box_unlink(u->b, path, u->err)) < 0)
		return r;
	box_as_agent(u->b, true);
	if (symlinkat(target, dfd, base) < 0)
		r = -errno;
	box_as_agent(u->b, false);
	return r < 0 ? corral_set_errno(u->err, -r, "symlink %.300s", path) : 0;
}

/*
 * A hard link to a file the archive's tree holds: the file is opened
 * beneath dir with no link followed, and the inode linked through its fd,
 * so a link can only ever name what is already inside.
 */
static int untar_hardlink(struct untar *u, const char *path, const char *to)
{
	cleanup_close int dfd = -1, fd = -1;
	const char *base = strrchr(path, '/') + 1;
	char dir[4096], self[64];
	struct stat st;
	int r = 0;

	fd = box_open_in_root(u->b, to, O_PATH | O_NOFOLLOW, 0, u->err);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    tripwire_is_wire(u->b->sb->tripwire, &st))
		return corral_set_err(u->err, -EPERM, "%.300s: a hard link to "
				      "%.300s, which is not a regular file of the "
				      "archive", path, to);
	snprintf(dir, sizeof(dir), "%.*s", (int)(base - 1 - path), path);
	dfd = box_open_in_root(u->b, dir, O_PATH | O_DIRECTORY, 0, u->err);
	if (dfd < 0)
		return dfd;
	if (exists(u->b, path) && (r = corral_box_unlink(u->b, path, u->err)) < 0)
		return r;
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	box_as_agent(u->b, true);
	if (linkat(AT_FDCWD, self, dfd, base, AT_SYMLINK_FOLLOW) < 0)
		r = -errno;
	box_as_agent(u->b, false);
	return r < 0 ? corral_set_errno(u->err, -r, "link %.300s", path) : 0;
}

static int untar_entry(struct untar *u, struct archive *a,
		       struct archive_entry *ae)
{
	char name[4096], path[8192], to[8192];
	const char *link = archive_entry_hardlink(ae);
	mode_t type = archive_entry_filetype(ae);
	size_t dlen = strcmp(u->dir, "/") ? strlen(u->dir) : 0;
	bool was;
	int r;

	r = entry_name(archive_entry_pathname(ae), name, sizeof(name), u->err);
	if (r < 0)
		return r;
	if (!name[0])		/* "./": the directory itself */
		return 0;
	snprintf(path, sizeof(path), "%.*s/%s", (int)dlen, u->dir, name);
	if (strlen(path) >= 4096)
		return corral_set_err(u->err, -ENAMETOOLONG, "%.200s: too long "
				      "beneath %.200s", name, u->dir);
	r = untar_parents(u, path, dlen + 1);
	if (r < 0)
		return r;
	was = exists(u->b, path);
	if (link) {
		r = entry_name(link, name, sizeof(name), u->err);
		snprintf(to, sizeof(to), "%.*s/%s", (int)dlen, u->dir, name);
		if (r == 0)
			r = untar_hardlink(u, path, to);
	} else if (type == AE_IFDIR) {
		r = corral_box_mkdir(u->b, path, archive_entry_perm(ae) & 0777,
				     true, u->err);
	} else if (type == AE_IFLNK) {
		r = untar_symlink(u, path, archive_entry_symlink(ae) ?
				  archive_entry_symlink(ae) : "");
	} else {
		r = untar_file(u, a, path, ae);
	}
	if (!was && exists(u->b, path)) {
		int m = untar_made(u, path);

		r = r < 0 ? r : m;
	}
	return r;
}

/* Undo what a failed unpack made, deepest first; err keeps the first cause. */
static void untar_undo(struct untar *u)
{
	for (size_t i = u->nmade; i-- > 0;)
		corral_box_unlink(u->b, u->made[i], &(struct corral_err){ 0 });
}

/* An archive's bytes: in memory (data, len), or a spool file's (fd >= 0). */
struct untar_src {
	const void *data;
	size_t len;
	int fd;
};

#define UNTAR_READ_BLOCK	(64 * 1024)

static struct archive *untar_open(const struct untar_src *src,
				  struct corral_err *err)
{
	struct archive *a = archive_read_new();
	int r;

	if (!a) {
		corral_set_err(err, -ENOMEM, "cannot allocate a tar reader");
		return NULL;
	}
	/* read twice (judged, then written): each time from its start */
	if (src->fd >= 0 && lseek(src->fd, 0, SEEK_SET) < 0) {
		corral_set_errno(err, errno, "the archive's spool");
		archive_read_free(a);
		return NULL;
	}
	/* built-in gzip only: no filter that libarchive runs as a program */
	r = archive_read_support_filter_gzip(a);
	if (r == ARCHIVE_OK)
		r = archive_read_support_format_tar(a);
	if (r == ARCHIVE_OK)
		r = archive_read_support_format_empty(a);
	if (r == ARCHIVE_OK)
		r = src->fd >= 0 ? archive_read_open_fd(a, src->fd, UNTAR_READ_BLOCK) :
			archive_read_open_memory(a, src->data, src->len);
	if (r != ARCHIVE_OK) {
		corral_set_err(err, -EINVAL, "not a tar archive: %s",
			       archive_error_string(a));
		archive_read_free(a);
		return NULL;
	}
	return a;
}

static int untar_from(struct corral_box *b, const char *dir, const struct untar_src *src,
		      struct corral_untar *st, struct corral_err *err)
{
	struct untar u = { b, dir, err, NULL, 0, 0 };
	struct archive_entry *ae;
	struct untar_room room;
	struct archive *a;
	int r;

	memset(st, 0, sizeof(*st));
	r = box_path_ok(b, dir, true, err);
	if (r < 0)
		return r;
	a = untar_open(src, err);
	if (!a)
		return err->code;
	untar_room_of(b, &room);
	r = untar_judge(a, &room, st, err);
	archive_read_free(a);
	a = NULL;
	if (r == 0 && !exists(b, dir) && (r = corral_box_mkdir(b, dir, 0755, true, err)) == 0)
		r = untar_made(&u, dir);
	if (r == 0 && !(a = untar_open(src, err)))
		r = err->code;
	while (r == 0 && ((r = archive_read_next_header(a, &ae)) == ARCHIVE_OK ||
			  r == ARCHIVE_WARN))
		r = untar_entry(&u, a, ae);
	if (r == ARCHIVE_EOF)
		r = 0;
	else if (r > 0 || (r < 0 && !err->code))	/* libarchive's own codes */
		r = corral_set_err(err, -EINVAL, "not a tar archive: %s",
				   archive_error_string(a));
	if (a)
		archive_read_free(a);
	if (r < 0)
		untar_undo(&u);
	for (size_t i = 0; i < u.nmade; i++)
		free(u.made[i]);
	free(u.made);
	return r;
}

int corral_box_untar(struct corral_box *b, const char *dir, const void *data,
		     size_t len, struct corral_untar *st, struct corral_err *err)
{
	struct untar_src src = { data, len, -1 };

	return untar_from(b, dir, &src, st, err);
}

/* ---- in, off the caller's loop --------------------------------------------- */

/*
 * Unpacked on the loop, a 900 KiB archive of gzip'd zeros held every other
 * client of the daemon 1.3 s: it is inflated twice, judged then written,
 * up to what the sandbox's disk has free (1 GiB by default, more as the
 * operator gives), and a client may send it again and again.
 */
struct corral_box_untar_job {
	struct corral_box_work *work;
	corral_box_untar_fn done;
	void *arg;
	char *dir;
	const void *data;	/* in the worker: its copy of the caller's bytes */
	size_t len;
	bool spooled;		/* ... or the spool file the worker is given */
};

static int untar_work(struct corral_box *b, void *arg, int fd, void *out,
		      struct corral_err *err)
{
	struct corral_box_untar_job *j = arg;
	struct untar_src src = { j->data, j->len, j->spooled ? fd : -1 };

	return untar_from(b, j->dir, &src, out, err);
}

static void untar_job_free(struct corral_box_untar_job *j)
{
	free(j->dir);
	free(j);
}

_Static_assert(sizeof(struct corral_untar) <= BOX_WORK_OUT_MAX,
	       "an unpack's counts are a worker's answer");

/* The worker's answer and its counts, or why there is none (counts 0). */
static void untar_end(void *arg, int r, const void *out, const struct corral_err *err)
{
	struct corral_box_untar_job *j = arg;
	struct corral_untar st;

	memcpy(&st, out, sizeof(st));
	j->done(j->arg, r, &st, err);
	untar_job_free(j);
}

/* A job to unpack into dir (judged first), told done; NULL with err. */
static struct corral_box_untar_job *untar_job_new(struct corral_box *b, const char *dir,
						  corral_box_untar_fn done, void *arg,
						  struct corral_err *err)
{
	struct corral_box_untar_job *j;

	if (box_path_ok(b, dir, true, err) < 0)
		return NULL;
	j = calloc(1, sizeof(*j));
	if (!j || !(j->dir = strdup(dir))) {
		free(j);
		corral_set_err(err, -ENOMEM, "out of memory unpacking into %.300s", dir);
		return NULL;
	}
	j->done = done;
	j->arg = arg;
	return j;
}

/* j's worker started with fds: *out, or j freed and err */
static int untar_job_run(struct corral_box *b, struct corral_box_untar_job *j,
			 int *fds, int nfds, int fd, struct corral_box_untar_job **out,
			 struct corral_err *err)
{
	struct box_work_how how = {
		.fds = fds, .nfds = nfds, .fd = fd, .out_len = sizeof(struct corral_untar),
		.who = "the worker that unpacked the archive",
		.doing = "the archive was unpacked",
		.halted = "the archive was unpacked only in part",
	};
	int r = box_work_start(b, &how, untar_work, j, untar_end, j, &j->work, err);

	j->data = NULL;		/* a copy the worker has its own of */
	if (r < 0) {
		untar_job_free(j);
		return r;
	}
	*out = j;
	return 0;
}

int corral_box_untar_start(struct corral_box *b, const char *dir, const void *data,
			   size_t len, corral_box_untar_fn done, void *arg,
			   struct corral_box_untar_job **out, struct corral_err *err)
{
	/* what corral_box_untar resolves beneath and judges the room by */
	int fds[2] = { b->sb->rootfd, b->sb->scratchfd }, r;
	struct corral_box_untar_job *j;
	char *copy = NULL;

	*out = NULL;
	j = untar_job_new(b, dir, done, arg, err);
	if (!j)
		return err->code;
	j->len = len;
	/*
	 * The bytes on malloc's heap, which the worker's fork keeps: a
	 * request body in libevent's mappings (livemem.c) reads as zeros
	 * there, an empty archive.
	 */
	if (len && !(copy = malloc(len))) {
		untar_job_free(j);
		return corral_set_err(err, -ENOMEM, "out of memory for the %zu bytes of "
				      "an archive", len);
	}
	if (len)
		memcpy(copy, data, len);
	j->data = len ? copy : "";
	r = untar_job_run(b, j, fds, 2, -1, out, err);
	free(copy);		/* the worker has its own */
	return r;
}

int corral_box_untar_fd_start(struct corral_box *b, const char *dir, int fd,
			      corral_box_untar_fn done, void *arg,
			      struct corral_box_untar_job **out, struct corral_err *err)
{
	/* the spool beside what corral_box_untar resolves beneath */
	int fds[3] = { b->sb->rootfd, b->sb->scratchfd, fd };
	struct corral_box_untar_job *j;

	*out = NULL;
	j = untar_job_new(b, dir, done, arg, err);
	if (!j)
		return err->code;
	j->spooled = true;
	return untar_job_run(b, j, fds, 3, fd, out, err);
}

/* What it unpacked so far stays; done told -ECANCELED. */
void corral_box_untar_cancel(struct corral_box_untar_job *j)
{
	if (j)
		box_work_stop(j->work, -ECANCELED, "cut short: its client went before "
			      "the archive was unpacked");
}
