/*
 * image_migrate.c - a root store that an older corral made, handed over
 * to the layers' present owner.
 *
 * corral used to unpack a root store's layers as uid 65534 and to run the
 * agent on an image as that uid, the host's "nobody": any host process
 * running as nobody could signal the agent, trace it where Yama allows,
 * and shared its RLIMIT_NPROC count.  Layers are now the agent's host id
 * in corral's range (image.h: IMAGE_OWNER_UID), as for a sandbox without
 * an image.  A layer of such a store still owned by 65534 is chowned to
 * it, once, by root:
 *  - under the store's exclusive lock: no import, removal or resolution
 *    of an image meanwhile;
 *  - without following anything: a directory is opened beneath its
 *    parent's fd (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) and checked to be
 *    what was stat'ed, every other entry (a symlink too) is chowned in its
 *    parent with AT_SYMLINK_NOFOLLOW;
 *  - only the uid and gid 65534, each on its own: a second pass changes
 *    nothing, and nothing else's owner is touched;
 *  - a layer's root directory last: its owner says whether the layer is
 *    done, so a walk that was killed is taken up by the next one.
 * Where the range is in use on this host nothing is migrated and new
 * layers are still unpacked as 65534 (image_store.c); a layer left at
 * 65534 still runs, as its owner (idmap.c), and the run's ids note says so.
 */
#include "image.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* the unpacker stops at 256 components (image_unpack.c): one fd a level */
#define WALK_DEPTH_MAX 300

struct chown_walk {
	const char *layer;		/* its hex, for messages */
	struct corral_err *err;
};

static int open_dir_beneath(int dfd, const char *name)
{
	struct open_how how = {
		.flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};

	return openat2_retry(dfd, name, &how);
}

/* 65534 -> the owner, uid and gid apart; -1 leaves one as it is */
static void new_owner(const struct stat *st, uid_t *uid, gid_t *gid)
{
	*uid = st->st_uid == IMAGE_LEGACY_UID ? IMAGE_OWNER_UID : (uid_t)-1;
	*gid = st->st_gid == IMAGE_LEGACY_GID ? IMAGE_OWNER_GID : (gid_t)-1;
}

static int chown_at(struct chown_walk *w, int dfd, const char *name,
		    const struct stat *st)
{
	uid_t uid;
	gid_t gid;

	new_owner(st, &uid, &gid);
	if (uid == (uid_t)-1 && gid == (gid_t)-1)
		return 0;
	if (fchownat(dfd, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
		return corral_set_errno(w->err, errno, "layer %.12s: chown %.200s to %u",
					w->layer, name, IMAGE_OWNER_UID);
	return 0;
}

static int walk_dir(struct chown_walk *w, int fd, const char *name, int depth);

/* The directory name in dfd (st: its lstat), its entries first. */
static int walk_subdir(struct chown_walk *w, int dfd, const char *name,
		       const struct stat *st, int depth)
{
	struct stat now;
	int fd;

	if (depth >= WALK_DEPTH_MAX)
		return corral_set_err(w->err, -ELOOP, "layer %.12s: directories deeper "
				      "than %d at %.200s", w->layer, WALK_DEPTH_MAX, name);
	fd = open_dir_beneath(dfd, name);
	if (fd < 0)
		return corral_set_errno(w->err, errno, "layer %.12s: open %.200s",
					w->layer, name);
	/* not what was stat'ed: nothing may change the store meanwhile */
	if (fstat(fd, &now) < 0 || now.st_dev != st->st_dev || now.st_ino != st->st_ino) {
		close(fd);
		return corral_set_err(w->err, -ESTALE, "layer %.12s: %.200s changed while "
				      "it was read", w->layer, name);
	}
	return walk_dir(w, fd, name, depth + 1);
}

/* Takes fd: every entry of the directory, then the directory itself. */
static int walk_dir(struct chown_walk *w, int fd, const char *name, int depth)
{
	struct dirent *de;
	struct stat st;
	uid_t uid;
	gid_t gid;
	DIR *d;
	int r = 0;

	d = fdopendir(fd);
	if (!d) {
		r = corral_set_errno(w->err, errno, "layer %.12s: read %.200s", w->layer, name);
		close(fd);
		return r;
	}
	while (r == 0 && (errno = 0, de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			r = corral_set_errno(w->err, errno, "layer %.12s: stat %.200s",
					     w->layer, de->d_name);
		else if (S_ISDIR(st.st_mode))
			r = walk_subdir(w, dirfd(d), de->d_name, &st, depth);
		else
			r = chown_at(w, dirfd(d), de->d_name, &st);
	}
	if (r == 0 && !de && errno)
		r = corral_set_errno(w->err, errno, "layer %.12s: read %.200s", w->layer, name);
	if (r == 0 && fstat(dirfd(d), &st) < 0)
		r = corral_set_errno(w->err, errno, "layer %.12s: stat %.200s", w->layer, name);
	if (r == 0) {
		new_owner(&st, &uid, &gid);
		if ((uid != (uid_t)-1 || gid != (gid_t)-1) && fchown(dirfd(d), uid, gid) < 0)
			r = corral_set_errno(w->err, errno, "layer %.12s: chown %.200s to %u",
					     w->layer, name, IMAGE_OWNER_UID);
	}
	closedir(d);
	return r;
}

/* An older corral's layer: its root directory is still 65534's. */
static bool layer_is_legacy(int layersfd, const char *hex)
{
	char path[160];
	struct stat st;

	snprintf(path, sizeof(path), "%s/" LAYER_ROOT, hex);
	return fstatat(layersfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       S_ISDIR(st.st_mode) && st.st_uid == IMAGE_LEGACY_UID;
}

/* The layer's owners file, then its tree, the root directory last. */
static int migrate_layer(int layersfd, const char *hex, struct corral_err *err)
{
	struct chown_walk w = { hex, err };
	cleanup_close int lfd = -1;
	struct stat st;
	int r = 0;

	lfd = open_dir_beneath(layersfd, hex);
	if (lfd < 0)
		return corral_set_errno(err, errno, "open layer %.12s", hex);
	if (fstatat(lfd, LAYER_OWNERS, &st, AT_SYMLINK_NOFOLLOW) == 0)
		r = chown_at(&w, lfd, LAYER_OWNERS, &st);
	else if (errno != ENOENT)
		r = corral_set_errno(err, errno, "layer %.12s: stat %s", hex, LAYER_OWNERS);
	if (r == 0 && fstatat(lfd, LAYER_ROOT, &st, AT_SYMLINK_NOFOLLOW) < 0)
		r = corral_set_errno(err, errno, "layer %.12s: stat %s", hex, LAYER_ROOT);
	if (r == 0 && !S_ISDIR(st.st_mode))
		r = corral_set_err(err, -ENOTDIR, "layer %.12s: %s is not a directory",
				   hex, LAYER_ROOT);
	if (r == 0)
		r = walk_subdir(&w, lfd, LAYER_ROOT, &st, 0);
	return r;
}

/*
 * Each layer that needs it (all when migrate, else only whether one does):
 * how many; -1 and err on a failure.
 */
static int each_legacy_layer(struct corral_image_store *s, bool migrate,
			     struct corral_err *err)
{
	struct dirent *de;
	int fd, n = 0, r = 0;
	DIR *d;

	fd = open_dir_beneath(s->dirfd, IMAGE_LAYERS);
	if (fd < 0)
		return errno == ENOENT ? 0 : corral_set_errno(err, errno, "open %s/%s",
								s->dir, IMAGE_LAYERS);
	d = fdopendir(fd);
	if (!d) {
		r = corral_set_errno(err, errno, "read %s/%s", s->dir, IMAGE_LAYERS);
		close(fd);
		return r;
	}
	while (r == 0 && (de = readdir(d))) {
		if (de->d_name[0] == '.' || !layer_is_legacy(dirfd(d), de->d_name))
			continue;
		n++;
		if (!migrate)
			break;
		r = migrate_layer(dirfd(d), de->d_name, err);
	}
	closedir(d);
	if (r < 0)
		return corral_wrap_err(err, "cannot give the image store %s's layers from "
				       "uid %u to uid %u", s->dir, IMAGE_LEGACY_UID,
				       IMAGE_OWNER_UID);
	return n;
}

/*
 * Cost: a readdir of layers/ and a stat a layer, each time; the walk, a
 * stat and a chown an entry, once a layer (0.13 to 0.2 s for 10,000
 * entries, measured on a busy 2-CPU VM): on a daemon's loop too, once.
 */
int store_migrate(struct corral_image_store *s, enum store_migrate_lock how,
		  struct corral_err *err)
{
	int r;

	if (geteuid() != 0 || s->uid != IMAGE_OWNER_UID)
		return 0;
	if (how != MIGRATE_LOCKED) {
		r = each_legacy_layer(s, false, err);
		if (r <= 0)
			return r;
		while ((r = flock(s->lockfd, LOCK_EX | (how == MIGRATE_TRY ? LOCK_NB : 0))) < 0 &&
		       errno == EINTR)
			;
		/* its holder (an import, a removal) migrates: store_lock() */
		if (r < 0 && errno == EWOULDBLOCK)
			return 0;
		if (r < 0)
			return corral_set_errno(err, errno, "lock %s/lock", s->dir);
	}
	r = each_legacy_layer(s, true, err);
	if (how != MIGRATE_LOCKED)
		flock(s->lockfd, LOCK_UN);
	return r < 0 ? r : 0;
}
