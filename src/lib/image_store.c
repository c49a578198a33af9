/*
 * image_store.c - the content-addressed image store.
 *
 *   DIR/blobs/sha256/HEX     manifests, configs, layer blobs, as imported
 *   DIR/layers/HEX/root      a layer unpacked (HEX: its diff-id), overlay form
 *   DIR/layers/HEX/owners    the owners its tar gave (see image_unpack.c)
 *   DIR/index.json           manifest digest -> names, config, blobs, layers
 *   DIR/tmp/                 imports under way; emptied by the next import
 *   DIR/lock                 flock: imports and removals exclusive
 *
 * As root, the layers are IMAGE_OWNER_UID's (image.h): the store decides it
 * once it is open, from the same check of the host's files that a spawn
 * makes of corral's range (ns.c).
 *
 * Nothing is trusted because of its name: a blob is hashed while it is
 * copied in and again whenever it is read whole; a layer directory appears
 * (one rename) only once its blob and its tar matched both digests.
 */
#include "image.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <nettle/sha2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define INDEX_MAX (64u << 20)

/* ---- sha256 ----------------------------------------------------------- */

void image_hash_init(struct image_hash *h)
{
	sha256_init(&h->ctx);
	h->live = true;
}

void image_hash_update(struct image_hash *h, const void *buf, size_t len)
{
	if (h->live && len)
		sha256_update(&h->ctx, len, buf);
}

void image_hash_final(struct image_hash *h, char *out)
{
	unsigned char md[SHA256_DIGEST_SIZE];

	out[0] = '\0';
	if (h->live) {
		sha256_digest(&h->ctx, sizeof(md), md);
		strcpy(out, "sha256:");
		for (unsigned int i = 0; i < sizeof(md); i++)
			sprintf(out + 7 + 2 * i, "%02x", md[i]);
	}
	image_hash_free(h);
}

void image_hash_free(struct image_hash *h)
{
	h->live = false;
}

/* ---- small things ------------------------------------------------------ */

int image_strv_add(char ***v, size_t *n, const char *s)
{
	char **nv = realloc(*v, (*n + 2) * sizeof(**v));

	if (!nv)
		return -ENOMEM;
	*v = nv;
	nv[*n] = strdup(s);
	if (!nv[*n])
		return -ENOMEM;
	nv[++*n] = NULL;
	return 0;
}

void image_strv_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

void image_report_note(struct corral_image_import_report *rep, const char *fmt, ...)
{
	char buf[CORRAL_ERR_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	image_strv_add(&rep->notes, &rep->nnotes, buf);
}

void corral_image_import_report_free(struct corral_image_import_report *r)
{
	image_strv_free(r->digests, r->ndigests);
	image_strv_free(r->names, r->nnames);
	image_strv_free(r->notes, r->nnotes);
	memset(r, 0, sizeof(*r));
}

void corral_image_limits_init(struct corral_image_limits *l)
{
	l->max_bytes = 16ull << 30;
	l->max_files = 1000000;
	l->max_ratio = 100;
	l->ratio_after = 32ull << 20;
}

static const char *hex_of(const char *digest)
{
	return digest + 7;
}

int store_remove_tree(int dfd, const char *name)
{
	DIR *d;
	struct dirent *de;
	int fd, e = 0;

	if (unlinkat(dfd, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return -1;
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	/* a 0555 directory of the caller's own is emptied all the same */
	fchmod(fd, 0700);
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -1;
	}
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (store_remove_tree(dirfd(d), de->d_name) < 0 && !e)
			e = errno;
	}
	closedir(d);
	if (unlinkat(dfd, name, AT_REMOVEDIR) < 0)
		return -1;
	errno = e;
	return e ? -1 : 0;
}

/* ---- the store's directory ------------------------------------------------ */

char *corral_image_store_path(const char *state_dir)
{
	const char *base;
	char *p = NULL;

	if (state_dir && *state_dir)
		return asprintf(&p, "%s/images", state_dir) < 0 ? NULL : p;
	if (geteuid() == 0)
		return strdup("/var/lib/corral/images");
	base = getenv("XDG_DATA_HOME");
	if (base && base[0] == '/')
		return asprintf(&p, "%s/corral/images", base) < 0 ? NULL : p;
	base = getenv("HOME");
	if (!base || base[0] != '/') {
		errno = ENOENT;
		return NULL;
	}
	return asprintf(&p, "%s/.local/share/corral/images", base) < 0 ? NULL : p;
}

static int mkdir_parents(const char *path, struct corral_err *err)
{
	char buf[4096];

	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return corral_set_err(err, -ENAMETOOLONG, "store path too long: %s", path);
	for (char *s = buf + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(buf, 0700) < 0 && errno != EEXIST)
			return corral_set_err(err, -errno, "mkdir %s: %s", buf, strerror(errno));
		*s = '/';
	}
	if (mkdir(buf, 0700) < 0 && errno != EEXIST)
		return corral_set_err(err, -errno, "mkdir %s: %s", buf, strerror(errno));
	return 0;
}

/* Who unpacks and owns the layers: image.h says why. */
static void store_pick_owner(struct corral_image_store *s)
{
	char why[sizeof(s->note) - 80];

	s->uid = geteuid();
	s->gid = getegid();
	if (s->uid != 0)
		return;
	s->uid = IMAGE_OWNER_UID;
	s->gid = IMAGE_OWNER_GID;
	if (!ns_range_clashes(why, sizeof(why)))
		return;
	s->uid = IMAGE_LEGACY_UID;
	s->gid = IMAGE_LEGACY_GID;
	snprintf(s->note, sizeof(s->note), "unpacked as uid %u: corral's id range is "
		 "in use on this host (%s)", IMAGE_LEGACY_UID, why);
}

int corral_image_store_open(struct corral_image_store **out, const char *state_dir,
			    struct corral_err *err)
{
	static const char *const subdirs[] = { "blobs", IMAGE_BLOBS, IMAGE_LAYERS, IMAGE_TMP };
	struct corral_image_store *s;
	struct stat st;
	int r;

	*out = NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return corral_set_err(err, -ENOMEM, "out of memory");
	s->dirfd = s->lockfd = -1;
	s->dir = corral_image_store_path(state_dir);
	if (!s->dir) {
		r = corral_set_err(err, -ENOENT, "no place for the image store: set HOME or XDG_DATA_HOME");
		goto fail;
	}
	/*
	 * Without --state-dir the store is under $HOME, which a service
	 * user's (/nonexistent) is not: "mkdir /nonexistent: Permission
	 * denied" alone named neither the store nor the way around it.
	 */
	r = mkdir_parents(s->dir, err);
	if (r < 0) {
		corral_wrap_err(err, "cannot make the image store %s (--state-dir DIR "
				"keeps it in DIR/images)", s->dir);
		goto fail;
	}
	/* layer paths become a policy's root layers, which must be absolute */
	if (s->dir[0] != '/') {
		char *abs = realpath(s->dir, NULL);

		if (!abs) {
			r = corral_set_err(err, -errno, "the image store %s: %s", s->dir,
					   strerror(errno));
			goto fail;
		}
		free(s->dir);
		s->dir = abs;
	}
	s->dirfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (s->dirfd < 0 || fstat(s->dirfd, &st) < 0) {
		r = corral_set_err(err, -errno, "cannot open the image store %s: %s", s->dir,
				   strerror(errno));
		goto fail;
	}
	/* the layers are owned by an unprivileged uid: nobody else may reach them */
	if (st.st_uid != geteuid() || (st.st_mode & 0077)) {
		r = corral_set_err(err, -EPERM, "the image store %s must be owned by uid %d and mode 0700 (it is uid %d, mode %04o)",
				   s->dir, (int)geteuid(), (int)st.st_uid,
				   (unsigned)(st.st_mode & 07777));
		goto fail;
	}
	for (size_t i = 0; i < sizeof(subdirs) / sizeof(subdirs[0]); i++)
		if (mkdirat(s->dirfd, subdirs[i], 0700) < 0 && errno != EEXIST) {
			r = corral_set_err(err, -errno, "mkdir %s/%s: %s", s->dir, subdirs[i],
					   strerror(errno));
			goto fail;
		}
	s->lockfd = openat(s->dirfd, "lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (s->lockfd < 0) {
		r = corral_set_err(err, -errno, "%s/lock: %s", s->dir, strerror(errno));
		goto fail;
	}
	store_pick_owner(s);
	*out = s;
	return 0;
fail:
	corral_image_store_close(s);
	return r;
}

void corral_image_store_close(struct corral_image_store *s)
{
	if (!s)
		return;
	if (s->dirfd >= 0)
		close(s->dirfd);
	if (s->lockfd >= 0)
		close(s->lockfd);
	free(s->dir);
	free(s);
}

const char *corral_image_store_dir(const struct corral_image_store *s)
{
	return s->dir;
}

int store_lock(struct corral_image_store *s, bool exclusive, struct corral_err *err)
{
	int r;

	while (flock(s->lockfd, exclusive ? LOCK_EX : LOCK_SH) < 0)
		if (errno != EINTR)
			return corral_set_err(err, -errno, "lock %s/lock: %s", s->dir,
					      strerror(errno));
	/* what an import adds, or a removal leaves, is not older corral's */
	r = exclusive ? store_migrate(s, MIGRATE_LOCKED, err) : 0;
	if (r < 0)
		store_unlock(s);
	return r;
}

int store_trylock_shared(struct corral_image_store *s, struct corral_err *err)
{
	while (flock(s->lockfd, LOCK_SH | LOCK_NB) < 0) {
		if (errno == EWOULDBLOCK)
			return corral_set_err(err, -EAGAIN, "the image store %s is busy (an import or a removal holds it): try again when it is done",
					      s->dir);
		if (errno != EINTR)
			return corral_set_err(err, -errno, "lock %s/lock: %s", s->dir,
					      strerror(errno));
	}
	return 0;
}

void store_unlock(struct corral_image_store *s)
{
	flock(s->lockfd, LOCK_UN);
}

int store_tmpdir(struct corral_image_store *s, char *name, size_t len,
		 struct corral_err *err)
{
	for (int i = 0; i < 100; i++) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		snprintf(name, len, IMAGE_TMP "/%d-%ld-%d", (int)getpid(), ts.tv_nsec, i);
		if (mkdirat(s->dirfd, name, 0700) == 0)
			return 0;
		if (errno != EEXIST)
			break;
	}
	return corral_set_err(err, -errno, "mkdir %s/%s: %s", s->dir, name, strerror(errno));
}

/* Under the exclusive lock nothing else imports: what tmp holds is stale. */
void store_clean_tmp(struct corral_image_store *s)
{
	store_remove_tree(s->dirfd, IMAGE_TMP);
	mkdirat(s->dirfd, IMAGE_TMP, 0700);
}

/* ---- blobs ------------------------------------------------------------------- */

static void blob_path(const char *digest, char *buf, size_t len)
{
	snprintf(buf, len, IMAGE_BLOBS "/%s", hex_of(digest));
}

static int copy_hashing(int in, int out, uint64_t max, char *digest, uint64_t *size,
			struct corral_err *err)
{
	struct image_hash h;
	char buf[64 * 1024];
	ssize_t n;
	int r = 0;	/* read after a copy without error too */

	*size = 0;
	image_hash_init(&h);
	while ((n = read(in, buf, sizeof(buf))) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			r = corral_set_err(err, -errno, "read: %s", strerror(errno));
			break;
		}
		*size += n;
		if (*size > max) {
			char a[32];

			corral_format_size(max, a, sizeof(a));
			r = corral_set_err(err, -EFBIG, "a blob larger than %s", a);
			break;
		}
		image_hash_update(&h, buf, n);
		for (ssize_t done = 0; done < n;) {
			ssize_t w = write(out, buf + done, n - done);

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				r = corral_set_err(err, w < 0 ? -errno : -EIO, "write a blob: %s",
						   w < 0 ? strerror(errno) : "short write");
				break;
			}
			done += w;
		}
		if (r < 0)
			break;
	}
	if (r < 0) {
		image_hash_free(&h);
		return r;
	}
	image_hash_final(&h, digest);
	return 0;
}

int store_put_blob(struct corral_image_store *s, int fd, const char *expected,
		   uint64_t expected_size, char *digest_out, bool *was_new,
		   struct corral_err *err)
{
	char tmp[128], dst[128], got[CORRAL_DIGEST_MAX];
	uint64_t size;
	int out, r;

	*was_new = false;
	out = -1;
	for (int i = 0; out < 0 && i < 100; i++) {
		snprintf(tmp, sizeof(tmp), IMAGE_TMP "/blob-%d-%d", (int)getpid(), i);
		out = openat(s->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			     0600);
		if (out < 0 && errno != EEXIST)
			break;
	}
	if (out < 0)
		return corral_set_err(err, -errno, "create %s/%s: %s", s->dir, tmp, strerror(errno));
	r = copy_hashing(fd, out, expected_size ? expected_size : (64ull << 30), got, &size, err);
	if (r == 0 && fsync(out) < 0)
		r = corral_set_err(err, -errno, "fsync a blob: %s", strerror(errno));
	close(out);
	if (r == 0 && expected && strcmp(got, expected) != 0)
		r = corral_set_err(err, -EBADMSG, "digest mismatch: the blob named %s hashes to %s",
				   expected, got);
	if (r == 0 && expected_size && size != expected_size)
		r = corral_set_err(err, -EBADMSG, "blob %s: %llu bytes, the manifest says %llu",
				   got, (unsigned long long)size, (unsigned long long)expected_size);
	if (r < 0) {
		unlinkat(s->dirfd, tmp, 0);
		return r;
	}
	blob_path(got, dst, sizeof(dst));
	if (faccessat(s->dirfd, dst, F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
		unlinkat(s->dirfd, tmp, 0);
	} else if (renameat(s->dirfd, tmp, s->dirfd, dst) < 0) {
		r = corral_set_err(err, -errno, "rename a blob to %s/%s: %s", s->dir, dst,
				   strerror(errno));
		unlinkat(s->dirfd, tmp, 0);
		return r;
	} else {
		*was_new = true;
	}
	if (digest_out)
		strcpy(digest_out, got);
	return 0;
}

int store_open_blob(struct corral_image_store *s, const char *digest,
		    struct corral_err *err)
{
	char path[128];
	int fd;

	if (!image_valid_digest(digest))
		return corral_set_err(err, -EINVAL, "not a sha256 digest: \"%.80s\"", digest);
	blob_path(digest, path, sizeof(path));
	fd = openat(s->dirfd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return corral_set_err(err, -errno, "blob %s: %s", digest, strerror(errno));
	return fd;
}

/*
 * jansson's json_loadfd() reads a byte a call: an index of 835 bytes was
 * 836 reads of every `corral run --image`, and it grows with each image.
 * So a file is read whole here, in as many reads as it has room for
 * (fstat's size, then doubled), and parsed from memory.
 */
int image_read_fd(int fd, size_t max, char **out, size_t *len)
{
	struct stat st;
	size_t cap = max + 1, used = 0;
	char *buf, *p;

	if (fstat(fd, &st) == 0 && st.st_size >= 0 && (uint64_t)st.st_size < max)
		cap = (size_t)st.st_size + 1;	/* room to see the end in one more read */
	buf = malloc(cap + 1);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t n;

		if (used == cap) {
			if (cap > max) {
				free(buf);
				return -EFBIG;
			}
			cap = cap > (max + 1) / 2 ? max + 1 : cap * 2;
			p = realloc(buf, cap + 1);
			if (!p) {
				free(buf);
				return -ENOMEM;
			}
			buf = p;
		}
		n = read(fd, buf + used, cap - used);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			n = -errno;
			free(buf);
			return (int)n;
		}
		if (n == 0)
			break;
		used += n;
	}
	buf[used] = '\0';
	*out = buf;
	*len = used;
	return 0;
}

json_t *image_json_fd(int fd, size_t max, json_error_t *je, int *r)
{
	char *text;
	size_t len;
	json_t *j;

	*r = image_read_fd(fd, max, &text, &len);
	if (*r < 0) {
		snprintf(je->text, sizeof(je->text), "%s", strerror(-*r));
		je->line = 0;
		return NULL;
	}
	j = json_loadb(text, len, JSON_REJECT_DUPLICATES, je);
	free(text);
	if (!j)
		*r = -EINVAL;
	return j;
}

int store_read_blob(struct corral_image_store *s, const char *digest, size_t max,
		    char **out, size_t *len, struct corral_err *err)
{
	struct image_hash h;
	char got[CORRAL_DIGEST_MAX], *buf;
	size_t used;
	int fd, r;

	fd = store_open_blob(s, digest, err);
	if (fd < 0)
		return fd;
	r = image_read_fd(fd, max, &buf, &used);
	close(fd);
	if (r == -EFBIG)
		return corral_set_err(err, r, "blob %s is larger than %zu bytes", digest, max);
	if (r < 0)
		return corral_set_err(err, r, "read blob %s: %s", digest, strerror(-r));
	image_hash_init(&h);
	image_hash_update(&h, buf, used);
	image_hash_final(&h, got);
	if (strcmp(got, digest) != 0) {
		free(buf);
		return corral_set_err(err, -EBADMSG, "blob %s is damaged: it hashes to %s", digest, got);
	}
	*out = buf;
	*len = used;
	return 0;
}

/* ---- layers ---------------------------------------------------------------- */

bool store_has_layer(struct corral_image_store *s, const char *diff_id)
{
	char path[128];

	snprintf(path, sizeof(path), IMAGE_LAYERS "/%s/" LAYER_ROOT, hex_of(diff_id));
	return faccessat(s->dirfd, path, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

static void report_layer(struct corral_image_import_report *rep, const char *diff_id,
			 const struct unpack_report *u)
{
	static const char *const what[] = {
		"device node(s) dropped", "setuid/setgid bit(s) stripped",
		"file capabilities stripped", "other entries dropped",
		"absolute name(s) taken relative to the layer",
	};
	const uint64_t counts[] = { u->devices, u->setid, u->caps, u->other, u->absolute };

	for (int i = 0; i < 5; i++)
		if (counts[i])
			image_report_note(rep, "layer %.19s: %llu %s, e.g. %s", diff_id,
					  (unsigned long long)counts[i], what[i], u->examples[i]);
}

int store_add_layer(struct corral_image_store *s, const char *blob_digest,
		    const char *diff_id, struct corral_image_limits *budget,
		    struct corral_image_import_report *rep, struct corral_err *err)
{
	char tmp[128], path[4096 + 128], dst[128];
	struct unpack_report u;
	int blobfd = -1, destfd = -1, r;

	if (!image_valid_digest(diff_id))
		return corral_set_err(err, -EINVAL, "not a sha256 diff-id: \"%.80s\"", diff_id);
	r = store_tmpdir(s, tmp, sizeof(tmp), err);
	if (r < 0)
		return r;
	destfd = openat(s->dirfd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (destfd < 0) {
		r = corral_set_err(err, -errno, "open %s/%s: %s", s->dir, tmp, strerror(errno));
		goto out;
	}
	if (geteuid() == 0 && (fchown(destfd, s->uid, s->gid) < 0 ||
			       fchmod(destfd, 0755) < 0)) {
		r = corral_set_errno(err, errno, "chown %s/%s to %u", s->dir, tmp,
				     (unsigned)s->uid);
		goto out;
	}
	blobfd = store_open_blob(s, blob_digest, err);
	if (blobfd < 0) {
		r = blobfd;
		goto out;
	}
	snprintf(path, sizeof(path), "%s/%s", s->dir, tmp);
	r = image_unpack(blobfd, blob_digest, diff_id, destfd, path, s->uid, s->gid, budget,
			 &u, err);
	if (r < 0) {
		corral_wrap_err(err, "layer %s", blob_digest);
		goto out;
	}
	budget->max_bytes -= u.bytes;
	budget->max_files -= u.files;
	report_layer(rep, diff_id, &u);
	/* the top stays the store's own; the tree below is the unpacker's */
	if (geteuid() == 0 && fchown(destfd, 0, 0) < 0) {
		r = corral_set_err(err, -errno, "chown %s/%s: %s", s->dir, tmp, strerror(errno));
		goto out;
	}
	snprintf(dst, sizeof(dst), IMAGE_LAYERS "/%s", hex_of(diff_id));
	if (renameat(s->dirfd, tmp, s->dirfd, dst) < 0 && errno != EEXIST &&
	    errno != ENOTEMPTY) {
		r = corral_set_err(err, -errno, "rename a layer to %s/%s: %s", s->dir, dst,
				   strerror(errno));
		goto out;
	}
out:
	if (blobfd >= 0)
		close(blobfd);
	if (destfd >= 0)
		close(destfd);
	store_remove_tree(s->dirfd, tmp);
	return r;
}

/* ---- the index ---------------------------------------------------------------- */

json_t *store_load_index(struct corral_image_store *s, struct corral_err *err)
{
	json_error_t je;
	json_t *idx, *images;
	int fd, r;

	fd = openat(s->dirfd, IMAGE_INDEX, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno != ENOENT) {
			corral_set_err(err, -errno, "%s/%s: %s", s->dir, IMAGE_INDEX, strerror(errno));
			return NULL;
		}
		return json_pack("{s:i, s:{}}", "version", 1, "images");
	}
	idx = image_json_fd(fd, INDEX_MAX, &je, &r);
	close(fd);
	images = idx ? json_object_get(idx, "images") : NULL;
	if (!json_is_object(images)) {
		corral_set_err(err, -EINVAL, "%s/%s:%d: %s", s->dir, IMAGE_INDEX, je.line,
			       idx ? "no \"images\" object" : je.text);
		json_decref(idx);
		return NULL;
	}
	return idx;
}

int store_save_index(struct corral_image_store *s, json_t *idx, struct corral_err *err)
{
	char *text = json_dumps(idx, JSON_INDENT(1) | JSON_SORT_KEYS);
	size_t len = text ? strlen(text) : 0;
	int fd, r = 0;

	if (!text)
		return corral_set_err(err, -ENOMEM, "out of memory for the image index");
	fd = openat(s->dirfd, IMAGE_INDEX ".new", O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW |
		    O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, text, len) != (ssize_t)len || write(fd, "\n", 1) != 1 ||
	    fsync(fd) < 0)
		r = corral_set_err(err, -errno, "write %s/%s: %s", s->dir, IMAGE_INDEX ".new",
				   strerror(errno));
	if (fd >= 0)
		close(fd);
	free(text);
	if (r == 0 && renameat(s->dirfd, IMAGE_INDEX ".new", s->dirfd, IMAGE_INDEX) < 0)
		r = corral_set_err(err, -errno, "rename %s/%s: %s", s->dir, IMAGE_INDEX,
				   strerror(errno));
	return r;
}

/* Take name away from every image that has it (it moves, like docker tag). */
static void unname(json_t *images, const char *name)
{
	const char *key;
	json_t *img;

	json_object_foreach(images, key, img) {
		json_t *names = json_object_get(img, "names");
		size_t i;
		json_t *v;

		json_array_foreach(names, i, v)
			if (json_is_string(v) && !strcmp(json_string_value(v), name)) {
				json_array_remove(names, i);
				break;
			}
	}
}

int store_record_image(struct corral_image_store *s, const char *digest,
		       const char *config, json_t *blobs, json_t *diff_ids,
		       uint64_t size, char **names, size_t nnames,
		       struct corral_err *err)
{
	json_t *idx, *images, *img, *jnames;
	char when[32];
	time_t now = time(NULL);
	struct tm tm;
	int r;

	idx = store_load_index(s, err);
	if (!idx)
		return err->code;
	images = json_object_get(idx, "images");
	img = json_object_get(images, digest);
	jnames = json_array();
	if (img) {
		json_t *old = json_object_get(img, "names");
		size_t i;
		json_t *v;

		json_array_foreach(old, i, v)
			json_array_append(jnames, v);
	}
	for (size_t i = 0; i < nnames; i++) {
		unname(images, names[i]);
		json_array_append_new(jnames, json_string(names[i]));
	}
	gmtime_r(&now, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	img = json_pack("{s:o, s:s, s:O, s:O, s:I, s:s}", "names", jnames, "config", config,
			"blobs", blobs, "layers", diff_ids, "size", (json_int_t)size,
			"imported", when);
	if (!img || json_object_set_new(images, digest, img) < 0) {
		json_decref(idx);
		return corral_set_err(err, -ENOMEM, "out of memory for the image index");
	}
	r = store_save_index(s, idx, err);
	json_decref(idx);
	return r;
}

/* Remove blobs and layers that no image in idx refers to. */
int store_gc(struct corral_image_store *s, json_t *idx)
{
	json_t *images = json_object_get(idx, "images"), *keep = json_object(), *img;
	const char *sub[] = { IMAGE_BLOBS, IMAGE_LAYERS }, *key;
	int removed = 0;

	json_object_foreach(images, key, img) {
		const char *lists[] = { "blobs", "layers" };

		json_object_set_new(keep, hex_of(key), json_true());
		for (int l = 0; l < 2; l++) {
			size_t i;
			json_t *v;

			json_array_foreach(json_object_get(img, lists[l]), i, v)
				if (json_is_string(v) && image_valid_digest(json_string_value(v)))
					json_object_set_new(keep, hex_of(json_string_value(v)),
							    json_true());
		}
		if (json_is_string(json_object_get(img, "config")) &&
		    image_valid_digest(json_string_value(json_object_get(img, "config"))))
			json_object_set_new(keep, hex_of(json_string_value(json_object_get(img, "config"))),
					    json_true());
	}
	for (int k = 0; k < 2; k++) {
		int fd = openat(s->dirfd, sub[k], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
		struct dirent *de;

		if (!d) {
			if (fd >= 0)
				close(fd);
			continue;
		}
		while ((de = readdir(d)))
			if (de->d_name[0] != '.' && !json_object_get(keep, de->d_name) &&
			    store_remove_tree(dirfd(d), de->d_name) == 0)
				removed++;
		closedir(d);
	}
	json_decref(keep);
	return removed;
}
