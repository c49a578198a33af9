/*
 * snapshot.c - a box's workspace as an object: its overlay upper layer
 * copied, while the box is frozen, into a directory of the caller's (the
 * daemon's state dir); a later box starts on it (corral_policy's
 * workspace_layer: the copy as a read-only layer between the host
 * workspace and the new box's empty upper, mount.c).
 *
 * The freeze is asynchronous (cgroup_freeze.c): the copy starts from
 * freeze_done() once every task is stopped, in a worker process (box_job.c:
 * a large tree never holds the caller's loop), and when the worker ends
 * the box is thawed unless something else (idle, pause, halt) wanted it
 * frozen too.  A box already
 * frozen is copied at once; one with no freezer (unprivileged, no
 * delegated cgroups) is copied running, and the answer says so.
 *
 * The copy is safe whatever the agent left in the upper layer: nothing
 * is followed (every entry opened beneath its parent's fd with O_NOFOLLOW,
 * and checked to be what was stat'ed), symlinks are copied as links, a
 * character device 0/0 (an overlay whiteout: a deleted lower file) is
 * made again as a whiteout, every other device node, fifo and socket is
 * left out, setuid/setgid/sticky bits are dropped, hardlinks become
 * separate files, and the bytes (in whole blocks of the copy's
 * filesystem) and entries are counted against the caller's budget.
 * Owners are kept (as root), so that the next box's user, the same as
 * this one's, reads the layer.  Of the xattrs only
 * overlay's opaque mark (user.overlay.opaque, userxattr mounts) is kept:
 * a directory the agent replaced whole stays replaced.
 */
#include "internal.h"
#include "box.h"
#include "export.h"
#include "image.h"
#include "sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#define SNAP_DEPTH_MAX	128		/* directories deep: two fds a level */
#define SNAP_ENTRY_BYTES 512		/* what an entry costs the budget */
#define SNAP_BLOCK	4096		/* a block, where statfs does not say */
#define OPAQUE_XATTR	"user.overlay.opaque"
#define TALLY_SLOTS	16		/* copies under way at once, in one tally */

/*
 * Shared (MAP_SHARED) between the caller and its copies' workers: slot i
 * is written by the one copy that holds it, kept and claimed by the
 * caller's loop alone.  A copy stores its bytes, then reads them all:
 * of two that pass the budget together, at least one sees the other.
 */
struct corral_snapshot_tally {
	uint64_t budget;
	_Atomic uint64_t kept;
	_Atomic uint64_t copying[TALLY_SLOTS];
	bool claimed[TALLY_SLOTS];
};

struct box_snap {
	char *dir;
	uint64_t max_bytes, max_files;
	struct corral_snapshot_tally *tally;
	int slot;		/* in tally, or -1 */
	corral_snapshot_fn done;
	void *arg;
	struct corral_box *box;
	struct box_job *job;	/* the copy under way (box_job.c), or NULL */
	bool frozen;		/* copied frozen */
	bool ours;		/* frozen for the copy only: thawed after it */
};

struct snapcopy {
	struct corral_snapshot_info *info;
	uint64_t max_bytes, max_files;
	struct corral_snapshot_tally *tally;	/* or NULL */
	int slot;
	uint64_t block;			/* the copy's filesystem's block size */
	const struct corral_policy *planted;	/* its /workspace tripwires left out */
	bool chown;
	struct corral_err *err;
	char path[PATH_MAX];		/* of the entry at hand, for messages */
};

static int keep_owner(struct snapcopy *s, int dirfd, const char *name,
		      const struct stat *st)
{
	if (!s->chown || fchownat(dirfd, name, st->st_uid, st->st_gid,
				  AT_SYMLINK_NOFOLLOW | (name[0] ? 0 : AT_EMPTY_PATH)) == 0)
		return 0;
	return corral_set_err(s->err, -errno, "snapshot: chown %s: %s", s->path,
			      strerror(errno));
}

/*
 * What an entry takes on the disk, not only its length: data in whole
 * blocks, a directory one.  200200 empty directories counted 512 bytes
 * each, 102 MB of the budget, and took 804 MB of the host's disk (a
 * one-byte file takes a block too): a budget of 1 GiB let about 8 GiB be
 * written.  A symlink's target is counted as it is (a short one takes
 * no block).
 */
static uint64_t on_disk(const struct snapcopy *s, uint64_t bytes)
{
	uint64_t b = s->block ? s->block : SNAP_BLOCK;

	/* a length near 2^64 is over any budget as it is: not rounded past it */
	return bytes > UINT64_MAX / 2 ? bytes : (bytes + b - 1) / b * b;
}

/*
 * The budget with the snapshots being made beside this one: max_bytes is
 * what the finished ones left when this copy started, and the others
 * under way were counted by none.
 */
static int count_shared(struct snapcopy *s)
{
	struct corral_snapshot_tally *t = s->tally;
	uint64_t all;

	atomic_store(&t->copying[s->slot], s->info->bytes);
	all = atomic_load(&t->kept);
	for (int i = 0; i < TALLY_SLOTS; i++)
		all += atomic_load(&t->copying[i]);
	if (all > t->budget)
		return corral_set_err(s->err, -EDQUOT, "snapshot: more than %llu "
				      "bytes with the snapshots kept and those being "
				      "made beside it (the snapshot budget)",
				      (unsigned long long)t->budget);
	return 0;
}

static int count(struct snapcopy *s, uint64_t bytes)
{
	s->info->files++;
	s->info->bytes += bytes + SNAP_ENTRY_BYTES;
	if (s->info->files > s->max_files)
		return corral_set_err(s->err, -EDQUOT, "snapshot: more than %llu "
				      "entries (the snapshot budget's files)",
				      (unsigned long long)s->max_files);
	if (s->info->bytes > s->max_bytes)
		return corral_set_err(s->err, -EDQUOT, "snapshot: more than %llu "
				      "bytes (what is left of the snapshot budget)",
				      (unsigned long long)s->max_bytes);
	return s->tally ? count_shared(s) : 0;
}

static int copy_file(struct snapcopy *s, int from, int to, const char *name,
		     const struct stat *st)
{
	cleanup_close int in = -1, out = -1;
	struct stat now;
	off_t left;
	int r = count(s, on_disk(s, (uint64_t)st->st_size));

	if (r < 0)
		return r;
	in = openat(from, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (in < 0 || fstat(in, &now) < 0)
		return corral_set_err(s->err, -errno, "snapshot: open %s: %s", s->path,
				      strerror(errno));
	/* the box is frozen, but a running one (no freezer) may swap it */
	if (!S_ISREG(now.st_mode) || now.st_ino != st->st_ino || now.st_dev != st->st_dev)
		return corral_set_err(s->err, -EAGAIN, "snapshot: %s changed during "
				      "the copy", s->path);
	if (now.st_size != st->st_size && (r = count(s, 0)) < 0)
		return r;
	out = openat(to, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0)
		return corral_set_err(s->err, -errno, "snapshot: create %s: %s", s->path,
				      strerror(errno));
	/* no more than was counted, however the file grows */
	for (left = st->st_size; left > 0;) {
		ssize_t n = copy_file_range(in, NULL, out, NULL, (size_t)left, 0);

		if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EOPNOTSUPP)) {
			char buf[65536];

			n = read(in, buf, left < (off_t)sizeof(buf) ? (size_t)left : sizeof(buf));
			if (n > 0 && write(out, buf, (size_t)n) != n)
				n = -1;
		}
		if (n < 0)
			return corral_set_err(s->err, -errno, "snapshot: copy %s: %s",
					      s->path, strerror(errno));
		if (n == 0)
			break;
		left -= n;
	}
	/* no setuid, setgid or sticky bit comes along */
	if (fchmod(out, st->st_mode & 0777) < 0)
		return corral_set_err(s->err, -errno, "snapshot: chmod %s: %s", s->path,
				      strerror(errno));
	return keep_owner(s, out, "", st);
}

static int copy_link(struct snapcopy *s, int from, int to, const char *name,
		     const struct stat *st)
{
	char target[PATH_MAX];
	ssize_t n;
	int r = count(s, (uint64_t)st->st_size);

	if (r < 0)
		return r;
	n = readlinkat(from, name, target, sizeof(target) - 1);
	if (n < 0)
		return corral_set_err(s->err, -errno, "snapshot: readlink %s: %s",
				      s->path, strerror(errno));
	target[n] = '\0';
	if (symlinkat(target, to, name) < 0)
		return corral_set_err(s->err, -errno, "snapshot: symlink %s: %s",
				      s->path, strerror(errno));
	return keep_owner(s, to, name, st);
}

static int copy_whiteout(struct snapcopy *s, int to, const char *name,
			 const struct stat *st)
{
	int r = count(s, 0);

	if (r < 0)
		return r;
	/* the kernel lets anyone make a whiteout (5.8): 0/0 is no device */
	if (mknodat(to, name, S_IFCHR | 0, makedev(0, 0)) < 0)
		return corral_set_err(s->err, -errno, "snapshot: whiteout %s: %s",
				      s->path, strerror(errno));
	return keep_owner(s, to, name, st);
}

static int copy_dir(struct snapcopy *s, int from, int to, int depth);

static int copy_subdir(struct snapcopy *s, int from, int to, const char *name,
		       const struct stat *st, int depth)
{
	cleanup_close int in = -1, out = -1;
	struct stat now;
	char v[8];
	ssize_t n;
	int r = count(s, on_disk(s, 1));	/* a directory's first block */

	if (r < 0)
		return r;
	if (depth >= SNAP_DEPTH_MAX)
		return corral_set_err(s->err, -ELOOP, "snapshot: %s: deeper than %d "
				      "directories", s->path, SNAP_DEPTH_MAX);
	in = openat(from, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (in < 0 || fstat(in, &now) < 0 || now.st_ino != st->st_ino)
		return corral_set_err(s->err, in < 0 ? -errno : -EAGAIN,
				      "snapshot: open %s: %s", s->path,
				      in < 0 ? strerror(errno) : "changed during the copy");
	if (mkdirat(to, name, 0700) < 0)
		return corral_set_err(s->err, -errno, "snapshot: mkdir %s: %s", s->path,
				      strerror(errno));
	out = openat(to, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (out < 0)
		return corral_set_err(s->err, -errno, "snapshot: open %s: %s", s->path,
				      strerror(errno));
	n = fgetxattr(in, OPAQUE_XATTR, v, sizeof(v));
	if (n > 0 && fsetxattr(out, OPAQUE_XATTR, v, (size_t)n, 0) < 0)
		return corral_set_err(s->err, -errno, "snapshot: the opaque mark of %s: %s",
				      s->path, strerror(errno));
	r = copy_dir(s, in, out, depth + 1);
	if (r == 0 && fchmod(out, st->st_mode & 0777) < 0)
		r = corral_set_err(s->err, -errno, "snapshot: chmod %s: %s", s->path,
				   strerror(errno));
	return r == 0 ? keep_owner(s, out, "", st) : r;
}

static int copy_entry(struct snapcopy *s, int from, int to, const char *name,
		      int depth)
{
	struct stat st;

	if (fstatat(from, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return corral_set_err(s->err, -errno, "snapshot: stat %s: %s", s->path,
				      strerror(errno));
	switch (st.st_mode & S_IFMT) {
	case S_IFREG:
		/*
		 * A tripwire's decoy is corral's, planted anew in each box that
		 * names it: a fork filled with this one's failed to start
		 * ("a tripwire is planted only where nothing is").
		 */
		if (workspace_tripwire(s->planted, s->path + 1))
			return 0;
		return copy_file(s, from, to, name, &st);
	case S_IFDIR:
		return copy_subdir(s, from, to, name, &st, depth);
	case S_IFLNK:
		return copy_link(s, from, to, name, &st);
	case S_IFCHR:
		if (major(st.st_rdev) == 0 && minor(st.st_rdev) == 0)
			return copy_whiteout(s, to, name, &st);
		/* fallthrough */
	default:
		s->info->skipped++;	/* devices, fifos, sockets stay behind */
		return 0;
	}
}

static int copy_dir(struct snapcopy *s, int from, int to, int depth)
{
	size_t base = strlen(s->path);
	struct dirent *de;
	DIR *d;
	int fd = fcntl(from, F_DUPFD_CLOEXEC, 3), r = 0;

	if (fd < 0 || !(d = fdopendir(fd))) {
		r = -errno;
		if (fd >= 0)
			close(fd);
		return corral_set_err(s->err, r, "snapshot: read %s: %s",
				      s->path[0] ? s->path : "/", strerror(-r));
	}
	/*
	 * A dup shares from's offset, and the box's upper layer fd has been
	 * read to its end before (an earlier snapshot, a diff): from the start.
	 */
	rewinddir(d);
	while (r == 0) {
		errno = 0;
		de = readdir(d);
		if (!de) {
			if (errno)
				r = corral_set_err(s->err, -errno, "snapshot: read %s: %s",
						   s->path[0] ? s->path : "/", strerror(errno));
			break;
		}
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(s->path + base, sizeof(s->path) - base, "/%s", de->d_name);
		r = copy_entry(s, from, to, de->d_name, depth);
		s->path[base] = '\0';
	}
	closedir(d);
	return r;
}

int snapshot_fill(int from, int to, const struct corral_policy *p,
		  struct corral_err *err)
{
	struct corral_snapshot_info info = { 0 };
	struct snapcopy s = {
		.info = &info, .max_bytes = UINT64_MAX, .max_files = UINT64_MAX,
		.planted = p, .err = err,
	};

	return copy_dir(&s, from, to, 0);
}

/* Copy the box's upper layer into the new directory dir, now. */
static int snap_copy(struct corral_box *b, struct box_snap *sn,
		     struct corral_snapshot_info *info, struct corral_err *err)
{
	struct snapcopy s = {
		.info = info, .max_bytes = sn->max_bytes, .max_files = sn->max_files,
		.tally = sn->tally, .slot = sn->slot, .chown = geteuid() == 0,
		.planted = b->p, .err = err,
	};
	cleanup_close int to = -1;
	struct statfs sf;
	struct stat st;
	int r;

	if (!b->sb || b->sb->upperfd < 0 || b->killed)
		return corral_set_err(err, -ESRCH, "the sandbox's upper layer is gone");
	to = open(sn->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (to < 0)
		return corral_set_err(err, -errno, "snapshot %s: %s", sn->dir, strerror(errno));
	if (fstatfs(to, &sf) == 0 && sf.f_bsize > 0)
		s.block = (uint64_t)sf.f_bsize;
	if (fstat(b->sb->upperfd, &st) < 0)
		return corral_set_err(err, -errno, "the upper layer: %s", strerror(errno));
	r = copy_dir(&s, b->sb->upperfd, to, 0);
	if (r == 0 && fchmod(to, st.st_mode & 0777) < 0)
		r = corral_set_err(err, -errno, "snapshot: chmod: %s", strerror(errno));
	if (r == 0)
		r = keep_owner(&s, to, "", &st);
	return r;
}

/* A slot of tally for a new copy, its count 0; -1 if every one is taken. */
static int tally_claim(struct corral_snapshot_tally *t)
{
	for (int i = 0; t && i < TALLY_SLOTS; i++)
		if (!t->claimed[i]) {
			t->claimed[i] = true;
			atomic_store(&t->copying[i], 0);
			return i;
		}
	return -1;
}

/*
 * Once done() has counted a kept snapshot (corral_snapshot_tally_keep):
 * until then its bytes stay in its slot, counted twice rather than never.
 */
static void tally_release(struct corral_snapshot_tally *t, int slot)
{
	if (!t || slot < 0)
		return;
	atomic_store(&t->copying[slot], 0);
	t->claimed[slot] = false;
}

static void snap_end(struct corral_box *b, struct box_snap *sn, int r,
		     struct corral_snapshot_info *info, const struct corral_err *err)
{
	(void)b;
	sn->done(sn->arg, r, info, err);
	tally_release(sn->tally, sn->slot);
	free(sn->dir);
	free(sn);
}

/* What the copy's worker answers, as bytes: both ends are this program. */
struct snap_answer {
	int r;
	struct corral_snapshot_info info;
	struct corral_err err;
};

/* In the worker: the copy; what a failed one copied is removed here too. */
static int snap_work(struct corral_box *b, void *arg, int answer)
{
	struct box_snap *sn = arg;
	struct snap_answer a = { .info.frozen = sn->frozen };

	a.r = snap_copy(b, sn, &a.info, &a.err);
	/* a refused snapshot leaves nothing for the loop to remove */
	if (a.r < 0)
		corral_snapshot_remove(sn->dir);
	return write(answer, &a, sizeof(a)) == (ssize_t)sizeof(a) ? 0 : -EIO;
}

/* From the loop: the copy is over; thaw if the freeze was only for it. */
static void snap_copied(void *arg, const char *answer, size_t len, int status)
{
	struct box_snap *sn = arg;
	struct corral_box *b = sn->box;
	struct snap_answer a = { 0 };

	b->snap = NULL;
	sn->job = NULL;
	if (answer && len == sizeof(a))
		memcpy(&a, answer, sizeof(a));
	else
		a.r = corral_set_err(&a.err, -EIO, "the snapshot's worker ended without "
				     "an answer (wait status %d)", status);
	/* a pause, a halt or the idle freeze that came meanwhile keeps it frozen */
	if (sn->ours && (b->state == CORRAL_BOX_IDLE || b->state == CORRAL_BOX_RUNNING)) {
		struct corral_err terr = { 0 };

		box_set_thawed(b, &terr);
		box_arm_idle(b);
	}
	snap_end(b, sn, a.r, &a.info, &a.err);
}

/* The copy, by a worker (box_job.c): a large tree never holds the loop. */
static int snap_start_copy(struct corral_box *b, struct box_snap *sn, bool frozen,
			   bool ours, struct corral_err *err)
{
	sn->frozen = frozen;
	sn->ours = ours;
	sn->box = b;
	b->snap = sn;
	if (!b->sb || b->sb->upperfd < 0 || b->killed) {
		b->snap = NULL;
		return corral_set_err(err, -ESRCH, "the sandbox's upper layer is gone");
	}
	if (box_job_start(b, snap_work, snap_copied, sn, NULL, 0, &sn->job, err) < 0) {
		b->snap = NULL;
		return err->code;
	}
	return 0;
}

/* freeze_done(), with a snapshot waiting: copy if frozen, thaw if only for us. */
void box_snap_frozen(struct corral_box *b, int r, const struct corral_err *ferr,
		     bool ours)
{
	struct box_snap *sn = b->snap;
	struct corral_snapshot_info info = { 0 };
	struct corral_err err = { 0 };

	b->snap = NULL;
	if (r == 0 && snap_start_copy(b, sn, true, ours, &err) == 0)
		return;
	if (r != 0)
		corral_set_err(&err, r, "the freeze did not complete: %s",
			       ferr ? ferr->msg : "");
	else
		r = err.code;
	if (ours) {
		struct corral_err terr = { 0 };

		box_set_thawed(b, &terr);
		box_arm_idle(b);
	}
	snap_end(b, sn, r, &info, &err);
}

/* A thaw or a destroy before the copy was made: its worker, if any, killed. */
void box_snap_cancel(struct corral_box *b, int code, const char *why)
{
	struct box_snap *sn = b->snap;
	struct corral_snapshot_info info = { 0 };
	struct corral_err err = { 0 };

	b->snap = NULL;
	box_job_kill(sn->job);
	sn->job = NULL;
	corral_set_err(&err, code, "%s", why);
	snap_end(b, sn, code, &info, &err);
}

struct corral_snapshot_tally *corral_snapshot_tally_new(uint64_t budget,
							struct corral_err *err)
{
	struct corral_snapshot_tally *t;

	t = mmap(NULL, sizeof(*t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		 -1, 0);
	if (t == MAP_FAILED) {
		corral_set_errno(err, errno, "the snapshots' tally (%zu bytes of "
				 "shared memory)", sizeof(*t));
		return NULL;
	}
	t->budget = budget;
	return t;
}

void corral_snapshot_tally_keep(struct corral_snapshot_tally *t, uint64_t kept)
{
	if (t)
		atomic_store(&t->kept, kept);
}

void corral_snapshot_tally_free(struct corral_snapshot_tally *t)
{
	if (t)
		munmap(t, sizeof(*t));
}

int corral_box_snapshot(struct corral_box *b, const char *dir, uint64_t max_bytes,
			uint64_t max_files, corral_snapshot_fn done, void *arg,
			struct corral_err *err)
{
	return corral_box_snapshot_tallied(b, dir, max_bytes, max_files, NULL, done,
					   arg, err);
}

int corral_box_snapshot_tallied(struct corral_box *b, const char *dir,
				uint64_t max_bytes, uint64_t max_files,
				struct corral_snapshot_tally *tally,
				corral_snapshot_fn done, void *arg,
				struct corral_err *err)
{
	struct corral_snapshot_info info = { 0 };
	struct box_snap *sn;
	int r;

	err->code = 0;
	err->msg[0] = '\0';
	if (!b->p->workspace)
		return corral_set_err(err, -EINVAL, "the sandbox has no workspace: "
				      "nothing to snapshot");
	if (!b->sb || b->sb->upperfd < 0 || b->killed)
		return corral_set_err(err, -ESRCH, "the sandbox's upper layer is gone "
				      "(it died or was killed)");
	if (b->state == CORRAL_BOX_STARTING)
		return corral_set_err(err, -EBUSY, "the sandbox is still starting");
	if (b->snap)
		return corral_set_err(err, -EBUSY, "a snapshot of this sandbox is under way");
	sn = calloc(1, sizeof(*sn));
	if (sn)
		sn->dir = strdup(dir);
	if (!sn || !sn->dir) {
		free(sn);
		return corral_set_err(err, -ENOMEM, "out of memory for a snapshot");
	}
	*sn = (struct box_snap){ .dir = sn->dir, .max_bytes = max_bytes,
				 .max_files = max_files, .tally = tally, .slot = -1,
				 .done = done, .arg = arg };
	if (tally && (sn->slot = tally_claim(tally)) < 0) {
		free(sn->dir);
		free(sn);
		return corral_set_err(err, -EBUSY, "%d snapshots are being made: "
				      "try again when one is done", TALLY_SLOTS);
	}
	if (mkdir(dir, 0700) < 0) {
		r = corral_set_err(err, -errno, "snapshot %s: %s", dir, strerror(errno));
		tally_release(tally, sn->slot);
		free(sn->dir);
		free(sn);
		return r;
	}
	b->snap = sn;
	/* frozen already (idle, paused, held after a halt), or being frozen */
	if (b->frozen || b->freezing) {
		if (b->frozen)
			box_snap_frozen(b, 0, NULL, false);
		return 0;
	}
	r = box_freeze(b, BF_SNAPSHOT, err);
	if (r == 1)
		box_snap_frozen(b, 0, NULL, true);
	if (r >= 0)
		return 0;
	/* no freezer here: the copy is made running, and says so */
	b->snap = NULL;
	err->code = 0;
	err->msg[0] = '\0';
	r = snap_start_copy(b, sn, false, false, err);
	if (r < 0)
		snap_end(b, sn, r, &info, err);
	return 0;
}

void corral_box_snapshot_cancel(struct corral_box *b)
{
	struct corral_err err = { 0 };
	bool ours;

	if (!b->snap)
		return;
	/* frozen (or freezing) for the snapshot only: running again after it */
	ours = b->snap->job ? b->snap->ours : b->freezing == BF_SNAPSHOT;
	box_snap_cancel(b, -ECANCELED, "the snapshot was cancelled");
	if (ours && (b->state == CORRAL_BOX_IDLE || b->state == CORRAL_BOX_RUNNING)) {
		box_set_thawed(b, &err);
		box_arm_idle(b);
	}
}

int corral_policy_set_workspace_layer(struct corral_policy *p, const char *dir,
				      int *fd, struct corral_err *err)
{
	cleanup_close int dfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	*fd = -1;
	if (dfd < 0)
		return corral_set_err(err, -errno, "snapshot %s: %s", dir, strerror(errno));
	if (dir[0] != '/')
		return corral_set_err(err, -EINVAL, "snapshot %s: not an absolute path", dir);
	/* a mount of this namespace cannot be cloned from the sandbox's: a detached one can */
	if (geteuid() == 0) {
		*fd = syscall(SYS_open_tree, dfd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC |
			      AT_EMPTY_PATH);
		if (*fd < 0)
			return corral_set_err(err, -errno, "snapshot %s: cannot take its "
					      "mount: %s", dir, strerror(errno));
	}
	p->workspace_layer = true;
	p->workspace_layer_fd = *fd;
	p->workspace_layer_path = dir;
	return 0;
}

int corral_snapshot_remove(const char *dir)
{
	char *copy = strdup(dir), *slash;
	int fd, r;

	if (!copy)
		return -ENOMEM;
	slash = strrchr(copy, '/');
	if (!slash || !slash[1]) {
		free(copy);
		return -EINVAL;
	}
	*slash = '\0';
	fd = open(slash == copy ? "/" : copy, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	r = fd < 0 ? -errno : store_remove_tree(fd, slash + 1) < 0 ? -errno : 0;
	if (fd >= 0)
		close(fd);
	free(copy);
	return r;
}
