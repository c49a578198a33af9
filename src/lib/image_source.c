/*
 * image_source.c - the files of an image archive, wherever they are: an
 * OCI layout directory, read beneath its fd with openat2 (no symlink
 * followed), or a tar (oci-archive, docker save) read by an unprivileged
 * child (image_unprivileged) into numbered files in the store's tmp/,
 * with a table of which archive name each is; names in the tar are only
 * keys of that table, never paths on disk.
 */
#include "image.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ARCHIVE_ENTRIES_MAX 100000
#define LINK_HOPS 8

/* "./a//b/./c" -> "a/b/c"; ".." pops (a key, never a path on disk). */
static void normalize_key(const char *in, const char *base, char *out, size_t len)
{
	char buf[4096];
	size_t o = 0;

	snprintf(buf, sizeof(buf), "%s%s%s", in[0] == '/' || !base ? "" : base,
		 in[0] == '/' || !base || !*base ? "" : "/", in);
	out[0] = '\0';
	for (char *save = NULL, *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		if (!strcmp(c, "."))
			continue;
		if (!strcmp(c, "..")) {
			char *slash = strrchr(out, '/');

			o = slash ? (size_t)(slash - out) : 0;
			out[o] = '\0';
			continue;
		}
		o += snprintf(out + o, len - o, "%s%s", o ? "/" : "", c);
		if (o >= len) {
			out[0] = '\0';
			return;
		}
	}
}

static int add_ent(struct source *src, const char *key, const char *alias, long file)
{
	struct src_entry *e = realloc(src->ents, (src->nents + 1) * sizeof(*e));

	if (!e)
		return corral_set_err(src->err, -ENOMEM, "out of memory for the archive's table");
	src->ents = e;
	e[src->nents] = (struct src_entry){ strdup(key), alias ? strdup(alias) : NULL, file };
	if (!e[src->nents].path || (alias && !e[src->nents].alias))
		return corral_set_err(src->err, -ENOMEM, "out of memory for the archive's table");
	src->nents++;
	return 0;
}

/*
 * The tar's files go to tmp/ as e<N>; what each name stands for goes to
 * TABLE, one record a name: int32 N (or -1 for a link), uint32 name
 * length, uint32 target length, name, target.  Written by the
 * unprivileged child, read back by the caller.
 */
#define TABLE "table"

/*
 * No path of the archive: the child's arguments are wiped (corral_forget),
 * and its messages get the path in the caller (read_archive).
 */
struct archive_args {
	int fd, dirfd;
	uint64_t max_bytes;
	FILE *table;
};

/*
 * A file at its declared size: a sparse entry's holes count (they are
 * read back as zeros when the file is copied into the store as a blob).
 */
static int copy_entry(struct archive_args *a, struct archive *ar, struct archive_entry *e,
		      long n, uint64_t *total, struct corral_err *err)
{
	la_int64_t size = archive_entry_size(e), off;
	char name[32], sz[32];
	const void *buf;
	size_t len;
	int fd, r;

	if (size < 0)
		size = 0;
	if ((uint64_t)size > a->max_bytes - *total) {
		corral_format_size(a->max_bytes, sz, sizeof(sz));
		return corral_set_err(err, -EFBIG, "it holds more than %s (--max-size): %.200s declares %lld bytes",
				      sz, archive_entry_pathname(e), (long long)size);
	}
	*total += size;
	snprintf(name, sizeof(name), "e%ld", n);
	fd = openat(a->dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return corral_set_err(err, -errno, "create %s: %s", name, strerror(errno));
	while ((r = archive_read_data_block(ar, &buf, &len, &off)) == ARCHIVE_OK) {
		if (off < 0 || off + (la_int64_t)len > size) {
			close(fd);
			return corral_set_err(err, -EINVAL, "%s has data beyond its declared size",
					      archive_entry_pathname(e));
		}
		if (pwrite(fd, buf, len, off) != (ssize_t)len) {
			r = errno;
			close(fd);
			return corral_set_err(err, -r, "write %s: %s", name, strerror(r));
		}
	}
	/* a sparse file's hole at its end */
	if (r == ARCHIVE_EOF && ftruncate(fd, size) < 0) {
		r = errno;
		close(fd);
		return corral_set_err(err, -r, "truncate %s: %s", name, strerror(r));
	}
	close(fd);
	if (r != ARCHIVE_EOF)
		return corral_set_err(err, -EIO, "%s", archive_error_string(ar));
	return 0;
}

static int table_put(struct archive_args *a, long file, const char *key, const char *target,
		     struct corral_err *err)
{
	int32_t f = (int32_t)file;
	uint32_t kl = strlen(key), tl = target ? strlen(target) : 0;

	if (fwrite(&f, sizeof(f), 1, a->table) != 1 || fwrite(&kl, sizeof(kl), 1, a->table) != 1 ||
	    fwrite(&tl, sizeof(tl), 1, a->table) != 1 || fwrite(key, 1, kl, a->table) != kl ||
	    fwrite(target ? target : "", 1, tl, a->table) != tl)
		return corral_set_err(err, -EIO, "cannot write the archive's table");
	return 0;
}

/* In the unprivileged child: the tar's regular files and links. */
static int archive_fn(void *arg, void *out, struct corral_err *err)
{
	struct archive_args *a = arg;
	struct archive *ar = archive_read_new();
	struct archive_entry *e;
	char key[4096], target[4096], dir[4096];
	uint64_t total = 0;
	long n = 0;
	int r, tfd;

	(void)out;
	tfd = openat(a->dirfd, TABLE, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (!ar || tfd < 0 || !(a->table = fdopen(tfd, "w"))) {
		if (ar)
			archive_read_free(ar);
		return corral_set_err(err, -ENOMEM, "cannot start reading it");
	}
	archive_read_support_format_tar(ar);
	/* a compressed tarball too, with the built-in decompressors only */
	archive_read_support_filter_gzip(ar);
	archive_read_support_filter_zstd(ar);
	if (archive_read_open_fd(ar, a->fd, 64 * 1024) != ARCHIVE_OK) {
		r = corral_set_err(err, -EINVAL, "not a tar archive: %s", archive_error_string(ar));
		goto out;
	}
	while ((r = archive_read_next_header(ar, &e)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
		const char *p = archive_entry_pathname(e), *link;

		if (!p)
			continue;
		if (++n > ARCHIVE_ENTRIES_MAX) {
			r = corral_set_err(err, -EFBIG, "more than %d entries", ARCHIVE_ENTRIES_MAX);
			goto out;
		}
		normalize_key(p, NULL, key, sizeof(key));
		/*
		 * A body that is not a file's is inflated all the same, to
		 * reach the next header: a hard link may carry one (pax), a
		 * GNU dumpdir does.  Counted as a file's is, or 64 MiB of
		 * gzip'd zeros behind one held the import (and the store's
		 * lock, which every run on an image takes) for minutes.
		 */
		if (archive_entry_filetype(e) != AE_IFREG || archive_entry_hardlink(e)) {
			la_int64_t size = archive_entry_size(e);

			if (size > 0 && (uint64_t)size > a->max_bytes - total) {
				char sz[32];

				corral_format_size(a->max_bytes, sz, sizeof(sz));
				r = corral_set_err(err, -EFBIG, "it holds more than %s (--max-size): the body of %.200s declares %lld bytes",
						   sz, p, (long long)size);
				goto out;
			}
			total += size > 0 ? (uint64_t)size : 0;
		}
		if ((link = archive_entry_hardlink(e))) {
			normalize_key(link, NULL, target, sizeof(target));
			r = table_put(a, -1, key, target, err);
		} else if (archive_entry_filetype(e) == AE_IFLNK &&
			   (link = archive_entry_symlink(e))) {
			snprintf(dir, sizeof(dir), "%s", key);
			normalize_key(link, dirname(dir), target, sizeof(target));
			r = table_put(a, -1, key, target, err);
		} else if (archive_entry_filetype(e) == AE_IFREG) {
			r = copy_entry(a, ar, e, n, &total, err);
			if (r == 0)
				r = table_put(a, n, key, NULL, err);
		} else {
			r = 0;
		}
		if (r < 0)
			goto out;
	}
	if (r != ARCHIVE_EOF) {
		r = corral_set_err(err, -EINVAL, "a damaged tar: %s", archive_error_string(ar));
		goto out;
	}
	r = fflush(a->table) == 0 ? 0 : corral_set_err(err, -EIO, "cannot write the archive's table");
out:
	fclose(a->table);
	archive_read_free(ar);
	return r;
}

/* Back in the caller: the table the child wrote, checked as it is read. */
static int read_table(struct source *src)
{
	char key[4096], target[4096];
	int fd = openat(src->dirfd, TABLE, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
	int32_t file;
	uint32_t kl, tl;
	int r = 0;

	if (!f) {
		if (fd >= 0)
			close(fd);
		return corral_set_err(src->err, -EIO, "%s: the archive's table is missing", src->path);
	}
	while (r == 0 && fread(&file, sizeof(file), 1, f) == 1) {
		if (fread(&kl, sizeof(kl), 1, f) != 1 || fread(&tl, sizeof(tl), 1, f) != 1 ||
		    kl >= sizeof(key) || tl >= sizeof(target) || file < -1 ||
		    fread(key, 1, kl, f) != kl || fread(target, 1, tl, f) != tl) {
			r = corral_set_err(src->err, -EINVAL, "%s: the archive's table is damaged",
					   src->path);
			break;
		}
		key[kl] = target[tl] = '\0';
		r = add_ent(src, key, file < 0 ? target : NULL, file);
	}
	fclose(f);
	return r;
}

/* The tar is read by an unprivileged child: libarchive parses hostile bytes. */
static int read_archive(struct source *src, int fd)
{
	struct archive_args a = { .fd = fd, .dirfd = src->dirfd, .max_bytes = src->max_bytes };
	char path[4096 + 160];
	int r;

	if (geteuid() == 0 && fchown(src->dirfd, src->s->uid, src->s->gid) < 0)
		return corral_set_errno(src->err, errno, "chown %s to %u", src->tmp,
					(unsigned)src->s->uid);
	snprintf(path, sizeof(path), "%s/%s", src->s->dir, src->tmp);
	r = image_unprivileged(path, src->s->uid, src->s->gid, archive_fn, &a, NULL, 0,
			       src->err);
	if (r < 0)
		return corral_wrap_err(src->err, "%s", src->path);
	return read_table(src);
}

int source_file(struct source *src, const char *name)
{
	char key[4096], file[32];

	normalize_key(name, NULL, key, sizeof(key));
	if (!src->tmp[0]) {
		/* O_NONBLOCK: a FIFO there must not hold the import (and the store's lock) */
		struct open_how how = {
			.flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
			.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
		};
		int fd = openat2_retry(src->dirfd, name, &how);
		struct stat st;

		if (fd < 0)
			return corral_set_err(src->err, -errno, "%s/%s: %s", src->path, name,
					      errno == ELOOP ? "a symlink (not followed)" :
					      strerror(errno));
		if (fstat(fd, &st) < 0) {
			int e = errno;

			close(fd);
			return corral_set_err(src->err, -e, "%s/%s: %s", src->path, name,
					      strerror(e));
		}
		if (!S_ISREG(st.st_mode)) {
			close(fd);
			return corral_set_err(src->err, -EINVAL, "%s/%s: not a regular file (mode %06o)",
					      src->path, name, (unsigned)st.st_mode);
		}
		return fd;
	}
	for (int hop = 0; hop <= LINK_HOPS; hop++) {
		struct src_entry *e = NULL;

		for (size_t i = src->nents; i-- > 0;)
			if (!strcmp(src->ents[i].path, key)) {
				e = &src->ents[i];
				break;
			}
		if (!e)
			break;
		if (!e->alias) {
			struct stat st;
			int fd;

			/* written by the unprivileged child: a regular file, or nothing */
			snprintf(file, sizeof(file), "e%ld", e->file);
			fd = openat(src->dirfd, file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
			if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
				close(fd);
				fd = -1;
				errno = EINVAL;
			}
			if (fd < 0)
				return corral_set_err(src->err, -errno, "open %s: %s", file,
						      strerror(errno));
			return fd;
		}
		snprintf(key, sizeof(key), "%s", e->alias);
	}
	return corral_set_err(src->err, -ENOENT, "%s has no file %s", src->path, name);
}

bool source_has(struct source *src, const char *name)
{
	struct corral_err quiet = { 0 };
	struct corral_err *keep = src->err;
	int fd;

	src->err = &quiet;
	fd = source_file(src, name);
	src->err = keep;
	if (fd < 0)
		return fd != -ENOENT;	/* there but unreadable: reading it says why */
	close(fd);
	return true;
}

json_t *source_json(struct source *src, const char *name, size_t max)
{
	json_error_t je;
	struct stat st;
	json_t *j;
	int fd = source_file(src, name), r;

	if (fd < 0)
		return NULL;
	/* read whole, and jansson holds a document several times its size */
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
		corral_set_err(src->err, -EFBIG, "%s: %s: not a file of at most %zu bytes",
			       src->path, name, max);
		close(fd);
		return NULL;
	}
	j = image_json_fd(fd, max, &je, &r);
	close(fd);
	if (!j)
		corral_set_err(src->err, r, "%s: %s:%d: %s", src->path, name, je.line, je.text);
	return j;
}


int source_open(struct source *src, struct corral_image_store *s, const char *path,
		uint64_t max_bytes, struct corral_err *err)
{
	struct stat st;
	int fd, r;

	*src = (struct source){ .path = path, .dirfd = -1, .s = s, .max_bytes = max_bytes,
				.err = err };
	/* O_NONBLOCK: a FIFO given (a file an agent made) is refused below, not waited on */
	fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		r = corral_set_err(src->err, -errno, "%s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return r;
	}
	if (S_ISDIR(st.st_mode)) {
		src->dirfd = fd;
		return 0;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return corral_set_err(src->err, -EINVAL, "%s is neither a directory nor a file", path);
	}
	r = store_tmpdir(src->s, src->tmp, sizeof(src->tmp), src->err);
	if (r == 0) {
		src->dirfd = openat(src->s->dirfd, src->tmp,
				       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (src->dirfd < 0)
			r = corral_set_err(src->err, -errno, "open %s: %s", src->tmp,
					   strerror(errno));
	}
	if (r == 0)
		r = read_archive(src, fd);
	close(fd);
	return r;
}


void source_close(struct source *src)
{
	if (src->dirfd >= 0)
		close(src->dirfd);
	for (size_t i = 0; i < src->nents; i++) {
		free(src->ents[i].path);
		free(src->ents[i].alias);
	}
	free(src->ents);
	src->ents = NULL;
	src->nents = 0;
	src->dirfd = -1;
}
