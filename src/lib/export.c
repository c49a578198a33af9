/*
 * export.c - the sandbox's changes, written on the host: into a new
 * directory (the workspace as the sandbox left it), onto the original
 * workspace (--apply, with conflicts), or as a git patch.
 *
 * Rules on the way out, whatever the destination:
 * - every host path is resolved beneath the destination's fd with openat2
 *   RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS: a
 *   symlink in the destination, old or just made, is never followed;
 * - a file is written to a new temporary name and renamed into place, so
 *   nothing is written through an existing file (a hardlink to a file
 *   outside stays untouched), and it is the caller's, with the mode's
 *   permission bits only (no setuid, setgid or sticky bit), less the
 *   caller's umask and never writable by others;
 * - device nodes, fifos and sockets never come out, nor a symlink whose
 *   target leaves the tree (absolute, or more ".." than it is deep, or a
 *   ".." after a name, which a symlink there could turn around), nor one
 *   the kernel, resolving it in the destination, finds leading out;
 * - changes the hold table names are held back, unless allow_risky does;
 * - limits on entries and bytes, with a sentence saying which was hit.
 */
#include "export.h"
#include "policy_int.h"
#include "events.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/openat2.h>
#include <nettle/sha2.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEFAULT_MAX_FILES	100000
#define DEFAULT_MAX_BYTES	(1ULL << 30)
#define BECOME_GROUPS_MAX	256

void export_limits_of(const struct corral_policy *p, struct export_limits *lim)
{
	lim->max_files = p && p->export.max_files ? p->export.max_files : DEFAULT_MAX_FILES;
	lim->max_bytes = p && p->export.max_bytes ? p->export.max_bytes : DEFAULT_MAX_BYTES;
}

/* ---- the workspace at the start, for conflicts ------------------------- */

/*
 * What the host held at a path: as found when the sandbox started, or as
 * an apply wrote it.  An apply's entry carries the SHA-256 of the bytes it
 * wrote (a symlink's target), taken as they were written, and the stat of
 * the fd it wrote through, taken after the rename: a host edit in between
 * (or within the timestamps' granularity after) changes the bytes, so it
 * is a conflict however its stat looks.
 */
struct base_ent {
	char *path;
	struct stat st;
	bool written;
	uint8_t sum[SHA256_DIGEST_SIZE];
};

struct baseline {
	struct base_ent *v;
	size_t n, cap;
};

static int base_cmp(const void *a, const void *b)
{
	return strcmp(((const struct base_ent *)a)->path,
		      ((const struct base_ent *)b)->path);
}

static int base_walk(struct baseline *b, int dirfd, const char *dir,
		     const struct export_limits *lim, struct corral_err *err)
{
	int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3), r = 0;
	struct dirent *de;
	DIR *d;

	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return corral_set_err(err, -errno, "cannot list %s in the workspace: %s",
				      *dir ? dir : ".", strerror(errno));
	}
	/* a dup shares dirfd's offset: the last walk left it at the end */
	rewinddir(d);
	while (r == 0 && (de = readdir(d))) {
		struct base_ent e = { 0 };

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (b->n >= lim->max_files) {
			r = corral_set_err(err, -EFBIG,
					   "the workspace has more than export.max_files (%llu) entries: --apply records each at the start; raise the limit in the policy's export section",
					   (unsigned long long)lim->max_files);
			break;
		}
		if (fstatat(dirfd, de->d_name, &e.st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;	/* gone meanwhile: not there at the start */
		if ((*dir ? asprintf(&e.path, "%s/%s", dir, de->d_name) :
		     asprintf(&e.path, "%s", de->d_name)) < 0) {
			r = corral_set_err(err, -ENOMEM, "out of memory recording the workspace");
			break;
		}
		if (b->n == b->cap) {
			size_t cap = b->cap ? b->cap * 2 : 256;
			struct base_ent *v = realloc(b->v, cap * sizeof(*v));

			if (!v) {
				free(e.path);
				r = corral_set_err(err, -ENOMEM, "out of memory recording the workspace");
				break;
			}
			b->v = v;
			b->cap = cap;
		}
		b->v[b->n++] = e;
		if (S_ISDIR(e.st.st_mode)) {
			int sub = open_beneath(dirfd, de->d_name, O_RDONLY | O_DIRECTORY, 0);

			if (sub < 0)
				continue;	/* unreadable: its entries count as unknown */
			r = base_walk(b, sub, e.path, lim, err);
			close(sub);
		}
	}
	closedir(d);
	return r;
}

int baseline_take(int dirfd, const struct export_limits *lim,
		  struct baseline **out, struct corral_err *err)
{
	struct baseline *b = calloc(1, sizeof(*b));
	int r;

	if (!b)
		return corral_set_err(err, -ENOMEM, "out of memory recording the workspace");
	r = base_walk(b, dirfd, "", lim, err);
	if (r < 0) {
		baseline_free(b);
		return r;
	}
	if (b->n)
		qsort(b->v, b->n, sizeof(*b->v), base_cmp);
	*out = b;
	return 0;
}

void baseline_free(struct baseline *b)
{
	if (!b)
		return;
	for (size_t i = 0; i < b->n; i++)
		free(b->v[i].path);
	free(b->v);
	free(b);
}

static struct base_ent *base_find(const struct baseline *b, const char *path)
{
	struct base_ent key = { .path = (char *)path };

	return b->n ? bsearch(&key, b->v, b->n, sizeof(*b->v), base_cmp) : NULL;
}

static bool same_stat(const struct stat *a, const struct stat *b)
{
	return a->st_mode == b->st_mode && a->st_ino == b->st_ino &&
	       a->st_dev == b->st_dev && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
	       a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec &&
	       a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* ---- what an apply wrote, for the next one ------------------------------ */

/*
 * An apply runs in a helper (box_export.c) and the baseline lives in the
 * daemon: the helper sends each entry it wrote as a record, JSON of
 * [KIND, PATH, ...] with PATH's bytes in hex (names need not be UTF-8):
 *   ["f"|"l", PATH, dev, ino, mode, size, mtime s, ns, ctime s, ns, SUM]
 *   ["d", PATH, mode]   a directory it made or kept
 *   ["-", PATH]         nothing there any more
 */
static const char hexdigits[] = "0123456789abcdef";

static char *hex_of(const void *data, size_t len)
{
	const unsigned char *p = data;
	char *h = malloc(2 * len + 1);

	if (!h)
		return NULL;
	for (size_t i = 0; i < len; i++) {
		h[2 * i] = hexdigits[p[i] >> 4];
		h[2 * i + 1] = hexdigits[p[i] & 15];
	}
	h[2 * len] = '\0';
	return h;
}

/* len bytes from 2 * len lowercase hex digits; -1 if they are not. */
static int from_hex(const char *h, size_t len, unsigned char *out)
{
	for (size_t i = 0; i < 2 * len; i++) {
		const char *d = h[i] ? strchr(hexdigits, h[i]) : NULL;

		if (!d)
			return -1;
		if (i % 2 == 0)
			out[i / 2] = (unsigned char)((d - hexdigits) << 4);
		else
			out[i / 2] |= (unsigned char)(d - hexdigits);
	}
	return h[2 * len] ? -1 : 0;
}

static json_int_t rec_int(const json_t *rec, size_t i)
{
	return json_integer_value(json_array_get(rec, i));
}

/* One record into e (its path malloc'd); *gone for "nothing there". */
static int record_parse(const json_t *rec, struct base_ent *e, bool *gone)
{
	const char *kind = json_string_value(json_array_get(rec, 0));
	const char *hp = json_string_value(json_array_get(rec, 1));
	size_t n = hp ? strlen(hp) / 2 : 0;

	*e = (struct base_ent){ 0 };
	*gone = false;
	if (!kind || !hp || !n || n >= PATH_MAX || !(e->path = calloc(1, n + 1)))
		return -EINVAL;
	if (from_hex(hp, n, (unsigned char *)e->path) < 0 || strlen(e->path) != n)
		goto bad;
	if (!strcmp(kind, "-") && json_array_size(rec) == 2) {
		*gone = true;
		return 0;
	}
	if (!strcmp(kind, "d") && json_array_size(rec) == 3) {
		e->st.st_mode = S_IFDIR | (rec_int(rec, 2) & 07777);
		return 0;
	}
	if ((strcmp(kind, "f") && strcmp(kind, "l")) || json_array_size(rec) != 11 ||
	    from_hex(json_string_value(json_array_get(rec, 10)) ?
		     json_string_value(json_array_get(rec, 10)) : "",
		     SHA256_DIGEST_SIZE, e->sum) < 0)
		goto bad;
	e->st.st_dev = (dev_t)rec_int(rec, 2);
	e->st.st_ino = (ino_t)rec_int(rec, 3);
	e->st.st_mode = (mode_t)rec_int(rec, 4);
	e->st.st_size = (off_t)rec_int(rec, 5);
	e->st.st_mtim.tv_sec = (time_t)rec_int(rec, 6);
	e->st.st_mtim.tv_nsec = (long)rec_int(rec, 7);
	e->st.st_ctim.tv_sec = (time_t)rec_int(rec, 8);
	e->st.st_ctim.tv_nsec = (long)rec_int(rec, 9);
	e->written = true;
	return 0;
bad:
	free(e->path);
	e->path = NULL;
	return -EINVAL;
}

/* Entries marked for removal (path freed, NULL) out of the array. */
static void base_compact(struct baseline *b)
{
	size_t j = 0;

	for (size_t i = 0; i < b->n; i++)
		if (b->v[i].path)
			b->v[j++] = b->v[i];
	b->n = j;
}

static int base_append(struct baseline *b, struct base_ent *e)
{
	if (b->n == b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 256;
		struct base_ent *v = realloc(b->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		b->v = v;
		b->cap = cap;
	}
	b->v[b->n++] = *e;
	return 0;
}

int baseline_update(struct baseline *b, const json_t *records,
		    const struct export_limits *lim, struct corral_err *err)
{
	struct baseline add = { 0 };
	const json_t *rec;
	size_t i, bad = 0;
	int r = 0;

	json_array_foreach(records, i, rec) {
		struct base_ent e, *was;
		bool gone;

		/* a record we cannot read leaves the entry as it was: a conflict */
		if (record_parse(rec, &e, &gone) < 0) {
			bad++;
			continue;
		}
		was = base_find(b, e.path);
		if (was && gone) {
			/* marked: base_find must still see a sorted, whole array */
			was->written = false;
			was->st = (struct stat){ 0 };
			free(e.path);
			continue;
		}
		if (was) {
			free(e.path);
			e.path = was->path;
			*was = e;
		} else if (gone || base_append(&add, &e) < 0) {
			free(e.path);
		}
	}
	/* entries with no mode are the ones gone: out, then the new ones in */
	for (i = 0; i < b->n; i++)
		if (!b->v[i].st.st_mode) {
			free(b->v[i].path);
			b->v[i].path = NULL;
		}
	base_compact(b);
	for (i = 0; i < add.n && r == 0; i++) {
		r = base_append(b, &add.v[i]);
		if (r == 0)
			add.v[i].path = NULL;
	}
	for (i = 0; i < add.n; i++)
		free(add.v[i].path);
	free(add.v);
	if (b->n)
		qsort(b->v, b->n, sizeof(*b->v), base_cmp);
	if (r < 0)
		return corral_set_err(err, r, "out of memory recording what the apply wrote");
	if (bad)
		return corral_set_err(err, -EINVAL, "%zu of the apply's records could "
				      "not be read: those paths stay as they were", bad);
	if (b->n > lim->max_files)
		return corral_set_err(err, -EFBIG, "the workspace's record holds %zu "
				      "entries after the apply, more than export.max_files "
				      "(%llu)", b->n, (unsigned long long)lim->max_files);
	return 0;
}

/*
 * Whether the host's entry at name in parent is still what an apply wrote
 * there: the same stat, and the same bytes (or symlink target) as the
 * apply's own.  Read through the fd that is checked, never by name twice.
 */
static bool still_written(int parent, const char *name, const struct base_ent *was)
{
	uint8_t now[SHA256_DIGEST_SIZE];
	struct sha256_ctx ctx;
	struct stat st;
	char buf[65536];
	off_t total = 0;
	int fd;

	sha256_init(&ctx);
	if (S_ISLNK(was->st.st_mode)) {
		ssize_t n = readlinkat(parent, name, buf, sizeof(buf));

		if (n < 0 || n == (ssize_t)sizeof(buf))
			return false;
		sha256_update(&ctx, (size_t)n, (const uint8_t *)buf);
	} else {
		fd = openat(parent, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0)
			return false;
		if (fstat(fd, &st) < 0 || !same_stat(&was->st, &st)) {
			close(fd);
			return false;
		}
		/* its recorded size and not a byte more */
		for (;;) {
			ssize_t n = read(fd, buf, sizeof(buf));

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0 || (total += n) > was->st.st_size)
				break;
			sha256_update(&ctx, (size_t)n, (const uint8_t *)buf);
		}
		close(fd);
		if (total != was->st.st_size)
			return false;
	}
	sha256_digest(&ctx, sizeof(now), now);
	return !memcmp(now, was->sum, sizeof(now));
}

/* ---- one export --------------------------------------------------------- */

struct dirmode {
	char *path;
	mode_t mode;
};

struct xp {
	const struct export_req *r;
	struct export_limits lim;
	int dest;			/* -1 for a patch */
	uint64_t files, bytes;		/* written so far */
	unsigned int tmpseq;
	uint64_t tmptag;		/* random: the sandbox cannot name our new files */
	struct dirmode *dirs;		/* modes set last, deepest first */
	size_t ndirs;
	json_t *exported, *held, *conflicts;
	size_t copied;			/* unchanged entries of the lower (--to) */
	struct stat *hidden;		/* --to: the hidden paths' host objects */
	size_t nhidden;
	mode_t perm;			/* the bits a sandbox's mode may bring out */
	int stopped;			/* the signal export_req's stop said */
	struct corral_err *err;
};

/* The caller's stop said sig: what was written so far stays, each whole. */
static int cut_short(struct xp *x, int sig, const char *at, const char *path)
{
	return corral_set_err(x->err, -EINTR, "the export was cut short by SIG%s%s%s",
			      sigabbrev_np(sig) ?: "?", path ? at : "",
			      path ? path : "");
}

static bool x_stopped(struct xp *x)
{
	return x->r->stop && (x->stopped = x->r->stop(x->r->stop_arg));
}

static json_t *entry(const char *path, const char *change, mode_t mode)
{
	json_t *o = json_pack("{s:o, s:s}", "path", corral_json_bytes(path, strlen(path)),
			      "change", change);

	if (o && mode)
		json_object_set_new(o, "type", json_string(mode_type_name(mode)));
	return o;
}

/*
 * A reason or an error as JSON text.  It may quote what the sandbox wrote
 * (a finding of the hold table, a path), which need not be UTF-8, and
 * json_string() of such bytes is NULL: the entry lost its reason and the
 * event all its fields, the path of the file held among them.
 */
static json_t *text(const char *s)
{
	return corral_json_bytes(s, strlen(s));
}

/* An export.* event: now, or kept for the process that owns the log. */
static void x_emit(const struct export_req *r, const char *type, json_t *data)
{
	if (r->ev)
		events_emit(r->ev, type, data);
	else if (r->events_out && data)
		json_array_append_new(r->events_out, json_pack("{s:s, s:o}", "type", type,
							       "data", data));
	else
		json_decref(data);
}

static void note_held(struct xp *x, const char *path, const char *change,
		      mode_t mode, const char *why)
{
	json_t *o = entry(path, change, mode);

	if (!o)
		return;
	json_object_set_new(o, "reason", text(why));
	json_array_append_new(x->held, o);
	/* an event's "type" is its own: the entry's type goes as file_type */
	if (x->r->ev || x->r->events_out)
		x_emit(x->r, "export.held",
			    json_pack("{s:o, s:s, s:s, s:o}", "path",
				      corral_json_bytes(path, strlen(path)), "change", change,
				      "file_type", mode_type_name(mode), "reason", text(why)));
}

static void note_conflict(struct xp *x, const struct change *c, const char *why)
{
	json_t *o = entry(c->path, change_kind_name(c->kind),
			  c->kind == CH_DELETED ? c->old_mode : c->mode);

	if (!o)
		return;
	json_object_set_new(o, "reason", text(why));
	json_array_append_new(x->conflicts, o);
}

static void note_exported(struct xp *x, const struct change *c, const char *note)
{
	json_t *o = entry(c->path, change_kind_name(c->kind),
			  c->kind == CH_DELETED ? c->old_mode : c->mode);

	if (!o)
		return;
	if (note && *note)
		json_object_set_new(o, "note", text(note));
	json_array_append_new(x->exported, o);
}

/* A record of path for the next apply, if this export keeps them. */
static void note_base(struct xp *x, const char *path, const char *kind,
		      const struct stat *st, const uint8_t *sum)
{
	char *hp, *hs = NULL;
	json_t *rec = NULL;

	if (!x->r->wrote)
		return;
	hp = hex_of(path, strlen(path));
	if (sum)
		hs = hex_of(sum, SHA256_DIGEST_SIZE);
	/* no record (out of memory): the old entry stays, a conflict next time */
	if (hp && sum && hs)
		rec = json_pack("[s, s, I, I, I, I, I, I, I, I, s]", kind, hp,
				(json_int_t)st->st_dev, (json_int_t)st->st_ino,
				(json_int_t)st->st_mode, (json_int_t)st->st_size,
				(json_int_t)st->st_mtim.tv_sec, (json_int_t)st->st_mtim.tv_nsec,
				(json_int_t)st->st_ctim.tv_sec, (json_int_t)st->st_ctim.tv_nsec,
				hs);
	else if (hp && st)
		rec = json_pack("[s, s, I]", kind, hp, (json_int_t)st->st_mode);
	else if (hp)
		rec = json_pack("[s, s]", kind, hp);
	if (rec && x->r->journal) {
		char *text = json_dumps(rec, JSON_COMPACT), *line = NULL;
		int n = text ? asprintf(&line, "%s\n", text) : -1;

		/*
		 * One write, a line whole or not at all (a kill waits for a
		 * memfd's write to end); none: a conflict next time, as an
		 * apply without its record always was.
		 */
		if (n > 0 && write(x->r->journal_fd, line, (size_t)n) != n) {
			/* nothing else to do: see above */
		}
		free(text);
		free(line);
	}
	if (rec)
		json_array_append_new(x->r->wrote, rec);
	free(hp);
	free(hs);
}

/*
 * The permission bits a mode the sandbox chose may carry onto the host:
 * the caller's umask applies, as it does to what git, tar or cp make
 * for it, and others' write bit never (a 0777 directory or 0666 file
 * made by root would let any local user change what the host runs
 * next).  The umask is read from /proc, not by umask(2), which sets it
 * too: a second thread could create a file in between.
 */
static mode_t export_perm_mask(void)
{
	char buf[4096];
	const char *v = proc_self_status(buf, sizeof(buf)) == 0 ?
			proc_status_value(buf, "Umask") : NULL;
	mode_t um = v ? (mode_t)strtoul(v, NULL, 8) & 0777 : 022;

	return 0777 & ~um & ~(mode_t)S_IWOTH;
}

/* c's mode as it is written: its type, and the bits export_perm_mask lets out. */
static mode_t change_mode(const struct xp *x, mode_t mode)
{
	return (mode & S_IFMT) | (mode & x->perm);
}

static int count_file(struct xp *x, const char *path)
{
	if (++x->files > x->lim.max_files)
		return corral_set_err(x->err, -EFBIG,
				      "the export exceeds export.max_files (%llu entries) at %s: raise the limit in the policy's export section",
				      (unsigned long long)x->lim.max_files, path);
	return 0;
}

/*
 * A symlink may come out when following it from its own directory stays
 * in the tree: relative, its ".." all first and no more than it is deep.
 */
static bool link_stays_inside(const char *path, const char *target)
{
	int depth = 0;
	bool named = false;

	if (!*target || target[0] == '/')
		return false;
	for (const char *p = path; *p; p++)
		depth += *p == '/';
	while (*target) {
		size_t n = strcspn(target, "/");

		if (n == 2 && target[0] == '.' && target[1] == '.') {
			if (named || --depth < 0)
				return false;
		} else if (n && !(n == 1 && target[0] == '.')) {
			named = true;
		}
		target += n + (target[n] == '/');
	}
	return true;
}

/*
 * The same, asked of the destination as it is now: the kernel resolves
 * the target from the tree's root, following what symlinks are there
 * (the host's own, with --apply), and must stay beneath it.  A target
 * that does not exist (yet) is fine; one that leads out is -EXDEV.
 */
static int link_resolves_inside(int dest, const char *path, const char *target)
{
	struct open_how how = {
		.flags = O_PATH | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
	};
	const char *slash = strrchr(path, '/');
	char joined[4096];
	int fd;

	if (snprintf(joined, sizeof(joined), "%.*s%s%s", slash ? (int)(slash - path) : 0,
		     path, slash ? "/" : "", target) >= (int)sizeof(joined))
		return -ENAMETOOLONG;
	if (path_normalize(joined) < 0)
		return -EXDEV;
	fd = openat2_retry(dest, joined, &how);
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	return errno == ENOENT || errno == ENOTDIR ? 0 : errno == ELOOP ? -ELOOP : -EXDEV;
}

/* Why an entry of this kind may never come out, or NULL. */
static const char *boundary_why(const char *path, mode_t mode, const char *target)
{
	if (S_ISFIFO(mode))
		return "a fifo never leaves the sandbox";
	if (S_ISSOCK(mode))
		return "a socket never leaves the sandbox";
	if (S_ISCHR(mode) || S_ISBLK(mode))
		return "a device node never leaves the sandbox";
	if (S_ISLNK(mode) && !link_stays_inside(path, target ? target : ""))
		return "a symlink whose target leaves the tree is held back (never followed)";
	if (!S_ISREG(mode) && !S_ISDIR(mode) && !S_ISLNK(mode))
		return "an entry of unknown type never leaves the sandbox";
	return NULL;
}

/*
 * In the writer that takes a workspace owner's fs ids (export_as_owner):
 * CAP_DAC_READ_SEARCH, which a change of fs uid takes out of the effective
 * set, is put back while the sandbox's layer is read, whatever modes the
 * agent (another host uid) gave its files, and taken out again for what
 * is the host's: the way to a destination's directory, and host files
 * copied elsewhere (--export-to's unchanged files, a patch's old side),
 * which only what the owner may read.  It never lets a write through:
 * creating, renaming and removing need write permission it does not
 * bypass.  Elsewhere (root as itself, anyone else) it does nothing.
 */
static bool reads_toggled, reads_on;

/* on or off; the state it was in, for the caller to put back */
static bool sandbox_reads(bool on)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2];
	bool was = reads_on;

	if (!reads_toggled || on == reads_on || syscall(SYS_capget, &hdr, data) < 0)
		return was;
	if (on)
		data[0].effective |= data[0].permitted & (1u << CAP_DAC_READ_SEARCH);
	else
		data[0].effective &= ~(1u << CAP_DAC_READ_SEARCH);
	if (syscall(SYS_capset, &hdr, data) == 0)
		reads_on = on;
	else if (!on)
		_exit(127);	/* never left reading past the owner's permissions */
	return was;
}

/*
 * The fd of path's directory beneath root (the destination), and its
 * last component: walked as the writer's owner may (sandbox_reads).
 */
static int open_parent(int root, const char *path, const char **name)
{
	const char *slash = strrchr(path, '/');
	char dir[4096];
	bool was;
	int fd;

	if (!slash) {
		fd = fcntl(root, F_DUPFD_CLOEXEC, 3);
		*name = path;
		return fd < 0 ? -errno : fd;
	}
	if ((size_t)(slash - path) >= sizeof(dir))
		return -ENAMETOOLONG;
	memcpy(dir, path, slash - path);
	dir[slash - path] = '\0';
	*name = slash + 1;
	was = sandbox_reads(false);
	fd = open_beneath(root, dir, O_PATH | O_DIRECTORY, 0);
	sandbox_reads(was);
	return fd;
}

static int copy_fd(struct xp *x, int in, int out, const char *path,
		   struct sha256_ctx *sum)
{
	char buf[65536];

	for (;;) {
		ssize_t n = read(in, buf, sizeof(buf)), w;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return 0;
		/* a large file must not hold a signal until it is whole */
		if (x_stopped(x))
			return cut_short(x, x->stopped, " while writing ", path);
		if ((x->bytes += n) > x->lim.max_bytes)
			return corral_set_err(x->err, -EFBIG,
					      "the export exceeds export.max_bytes (%llu bytes) at %s: raise the limit in the policy's export section",
					      (unsigned long long)x->lim.max_bytes, path);
		sha256_update(sum, (size_t)n, (const uint8_t *)buf);
		for (ssize_t off = 0; off < n; off += w) {
			w = write(out, buf + off, n - off);
			if (w < 0 && errno == EINTR) {
				w = 0;
				continue;
			}
			if (w < 0)
				return -errno;
		}
	}
}

static int write_all(int fd, const char *data, size_t len)
{
	while (len) {
		ssize_t w = write(fd, data, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		data += w;
		len -= w;
	}
	return 0;
}

/* What to write: these bytes, or the regular file at path beneath src. */
struct source {
	int dirfd;
	const char *data;
	size_t len;
};

/*
 * Remove whatever is at name in parent if it is in the way of a new entry
 * of type mode: rename replaces files and symlinks itself, but not a
 * directory, nor a directory by a file.
 */
static int clear_way(int parent, const char *name, mode_t mode)
{
	struct stat st;

	if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (S_ISDIR(st.st_mode) && !S_ISDIR(mode))
		return unlinkat(parent, name, AT_REMOVEDIR) < 0 ? -errno : 0;
	if (!S_ISDIR(st.st_mode) && S_ISDIR(mode))
		return unlinkat(parent, name, 0) < 0 ? -errno : 0;
	return 0;
}

/*
 * An apply's record of the entry it just renamed into place, from keep,
 * the fd it was written through (a symlink: opened with O_PATH as made),
 * not from its name, which the host may have reused already.
 */
static void note_written(struct xp *x, const char *path, mode_t mode, int keep,
			 struct sha256_ctx *sum)
{
	uint8_t md[SHA256_DIGEST_SIZE];
	struct stat st;

	sha256_digest(sum, sizeof(md), md);
	/* a test's hook: the host may write the file here */
	if (x->r->after_write)
		x->r->after_write(x->r->fault_arg, path);
	if (fstat(keep, &st) == 0)
		note_base(x, path, S_ISLNK(mode) ? "l" : "f", &st, md);
}

/*
 * The regular file's bytes into tmp, summed as written: made unnamed and
 * named tmp once whole (or, without O_TMPFILE, tmp made here, O_EXCL);
 * *made once tmp exists.
 */
static int put_file(struct xp *x, int parent, const char *tmp, const char *path,
		    mode_t mode, const struct source *src, int *keep,
		    struct sha256_ctx *sum, bool *made)
{
	int fd = -1, in = -1, r = 0;

	if (!src->data) {
		struct stat st;

		in = open_beneath(src->dirfd, path, O_RDONLY | O_NONBLOCK, 0);
		if (in < 0)
			r = in;
		else if (fstat(in, &st) < 0)
			r = -errno;
		else if (!S_ISREG(st.st_mode))
			r = -EINVAL;	/* swapped since it was looked at */
	}
	/* unnamed while written: a SIGKILL midway leaves nothing in dest */
	if (r == 0 && (fd = newfile_unnamed(parent, 0600)) == -EOPNOTSUPP) {
		fd = openat(parent, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
			    O_CLOEXEC, 0600);
		if (fd < 0)
			fd = -errno;
		*made = fd >= 0;
	}
	if (r == 0 && fd < 0)
		r = fd;
	if (r == 0 && src->data) {
		if ((x->bytes += src->len) > x->lim.max_bytes)
			r = corral_set_err(x->err, -EFBIG,
					   "the export exceeds export.max_bytes (%llu bytes) at %s: raise the limit in the policy's export section",
					   (unsigned long long)x->lim.max_bytes, path);
		else
			r = write_all(fd, src->data, src->len);
		sha256_update(sum, src->len, (const uint8_t *)src->data);
	} else if (r == 0) {
		r = copy_fd(x, in, fd, path, sum);
	}
	/* the permission bits only: no setuid, setgid or sticky bit */
	if (r == 0 && fchmod(fd, mode & 0777) < 0)
		r = -errno;
	/* whole: named for put_entry's rename */
	if (r == 0 && !*made) {
		r = newfile_link(fd, parent, tmp);
		*made = r == 0;
	}
	/* an apply stats the file after its rename, through this fd */
	if (r == 0 && x->r->wrote && (*keep = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0)
		r = -errno;
	if (fd >= 0 && close(fd) < 0 && r == 0)
		r = -errno;
	if (in >= 0)
		close(in);
	return r;
}

/*
 * Write a regular file or a symlink at path beneath dest: under a fresh
 * name, then renamed over whatever was there.  -errno; x->err is set
 * only for limits (which end the export).
 */
static int put_entry(struct xp *x, const char *path, mode_t mode,
		     const char *target, const struct source *src)
{
	struct sha256_ctx sum;
	const char *name;
	char tmp[64];
	int parent, keep = -1, r = 0;
	bool made = false;

	r = count_file(x, path);
	if (r < 0)
		return r;
	/* a test's hook: the source or the destination may change here */
	if (x->r->fault && !S_ISLNK(mode) && !src->data)
		x->r->fault(x->r->fault_arg, path);
	parent = open_parent(x->dest, path, &name);
	if (parent < 0)
		return parent;
	snprintf(tmp, sizeof(tmp), ".corral-export.%d.%u.%016llx", (int)getpid(), x->tmpseq++,
		 (unsigned long long)x->tmptag);
	sha256_init(&sum);
	if (S_ISLNK(mode)) {
		r = link_resolves_inside(x->dest, path, target);
		if (r == 0 && symlinkat(target, parent, tmp) < 0)
			r = -errno;
		made = r == 0;
		sha256_update(&sum, strlen(target), (const uint8_t *)target);
		if (r == 0 && x->r->wrote &&
		    (keep = openat(parent, tmp, O_PATH | O_NOFOLLOW | O_CLOEXEC)) < 0)
			r = -errno;
	} else {
		r = put_file(x, parent, tmp, path, mode, src, &keep, &sum, &made);
	}
	if (r == 0)
		r = clear_way(parent, name, mode);
	if (r == 0 && renameat(parent, tmp, parent, name) < 0)
		r = -errno;
	/* ours only: a name already there (the sandbox may have made one) is not */
	if (r < 0 && made)
		unlinkat(parent, tmp, 0);
	if (r == 0 && keep >= 0)
		note_written(x, path, mode, keep, &sum);
	if (keep >= 0)
		close(keep);
	close(parent);
	return r;
}

static int put_dir(struct xp *x, const char *path, mode_t mode)
{
	struct dirmode *v;
	const char *name;
	int parent, r = 0;

	r = count_file(x, path);
	if (r < 0)
		return r;
	parent = open_parent(x->dest, path, &name);
	if (parent < 0)
		return parent;
	r = clear_way(parent, name, S_IFDIR);
	/* 0700 while its entries are written; its own mode at the end */
	if (r == 0 && mkdirat(parent, name, 0700) < 0 && errno != EEXIST)
		r = -errno;
	close(parent);
	if (r < 0)
		return r;
	{
		struct stat st = { .st_mode = S_IFDIR | (mode & 0777) };

		note_base(x, path, "d", &st, NULL);
	}
	v = realloc(x->dirs, (x->ndirs + 1) * sizeof(*v));
	if (!v || !(v[x->ndirs].path = strdup(path))) {
		if (v)
			x->dirs = v;
		return corral_set_err(x->err, -ENOMEM, "out of memory exporting %s", path);
	}
	x->dirs = v;
	v[x->ndirs++].mode = mode & 0777;
	return 0;
}

static int remove_entry(struct xp *x, const char *path)
{
	const char *name;
	struct stat st;
	int parent, r = 0;

	parent = open_parent(x->dest, path, &name);
	if (parent == -ENOENT)
		note_base(x, path, "-", NULL, NULL);
	if (parent < 0)
		return parent == -ENOENT ? 0 : parent;
	if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		r = errno == ENOENT ? 0 : -errno;
	else if (unlinkat(parent, name, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) < 0)
		r = -errno;
	close(parent);
	if (r == 0)
		note_base(x, path, "-", NULL, NULL);
	return r;
}

/* Directories get their modes last, deepest first, as the entries are in. */
static void set_dir_modes(struct xp *x)
{
	for (size_t i = x->ndirs; i-- > 0;) {
		bool was = sandbox_reads(false);
		int fd = open_beneath(x->dest, x->dirs[i].path, O_RDONLY | O_DIRECTORY, 0);

		sandbox_reads(was);
		if (fd >= 0) {
			if (fchmod(fd, x->dirs[i].mode) < 0) {
				/* a mode we cannot set leaves the 0700 it was made with */
			}
			close(fd);
		}
		free(x->dirs[i].path);
	}
	free(x->dirs);
	x->dirs = NULL;
	x->ndirs = 0;
}

/* ---- --to: the lower first, as it was ---------------------------------- */

/*
 * The workspace's path (relative) of a hidden one, or NULL: one under
 * /workspace, or under a bind whose host directory holds the workspace's
 * (by name; mount.c masks the other views too).
 */
static const char *hidden_in_workspace(const struct corral_policy *p, const char *hide,
				       char *buf, size_t len)
{
	const char *src = NULL, *dst = NULL, *ws = p->workspace;
	size_t n;

	if (policy_path_under(hide, "/workspace"))
		return hide[10] ? hide + 11 : "";
	for (size_t i = 0; i < p->nbinds; i++)
		if (policy_path_under(hide, p->binds[i].dst) &&
		    (!dst || strlen(p->binds[i].dst) > strlen(dst))) {
			src = p->binds[i].src;
			dst = p->binds[i].dst;
		}
	if (!dst || (size_t)snprintf(buf, len, "%s%s", src, hide + strlen(dst)) >= len ||
	    !ws || !policy_path_under(buf, ws))
		return NULL;
	n = strlen(ws);
	return buf[n] ? buf + n + 1 : "";
}

/*
 * A path the sandbox had hidden (filesystem.hide) is not "the workspace
 * as the sandbox left it": it saw an empty mask there.  Copied from the
 * host's lower, an export to a directory carried the hidden file out,
 * where another sandbox, or a client that may not lift the operator's
 * hides, would read it.  By its path in the workspace, and by identity:
 * the host object each hidden path names (the workspace given by another
 * name of a bind's directory holds it under no path of the list).
 */
static bool hidden_lower(const struct xp *x, const char *path, const struct stat *st)
{
	const struct corral_policy *p = x->r->p;
	char buf[PATH_MAX];
	const char *rel;

	for (size_t i = 0; i < x->nhidden; i++)
		if (x->hidden[i].st_dev == st->st_dev && x->hidden[i].st_ino == st->st_ino)
			return true;
	for (size_t i = 0; p && i < p->nhide; i++) {
		rel = hidden_in_workspace(p, p->hide[i], buf, sizeof(buf));
		if (rel && (!*rel || policy_path_under(path, rel)))
			return true;
	}
	return false;
}

/*
 * The root's (--rootfs, an image): the topmost layer that has it.  A
 * workspace inside the tree shows the same file, masked there by the
 * sandbox's mount table (hideview.c), which an export never reads: by
 * path and binds alone, the hidden file was copied out.
 */
static bool hidden_in_root(const struct corral_policy *p, const char *hide, struct stat *st)
{
	for (size_t i = p->nroot_layers; i-- > 0;) {
		int fd, has = layer_open("/proc", p->root_layers[i], hide, &fd);
		bool ok;

		if (has < 0)
			return false;
		if (!has)
			continue;
		ok = fstat(fd, st) == 0;
		close(fd);
		return ok;
	}
	return false;
}

/* The host object a hidden path names: the workspace's, a bind's or the root's. */
static bool hidden_host(const struct corral_policy *p, const char *hide, struct stat *st)
{
	const char *src = NULL, *dst = NULL;
	char host[PATH_MAX];

	if (p->workspace && policy_path_under(hide, "/workspace")) {
		src = p->workspace;
		dst = "/workspace";
	}

	for (size_t i = 0; i < p->nbinds; i++)
		if (policy_path_under(hide, p->binds[i].dst) &&
		    (!dst || strlen(p->binds[i].dst) > strlen(dst))) {
			src = p->binds[i].src;
			dst = p->binds[i].dst;
		}
	if (!dst)
		return hidden_in_root(p, hide, st);
	if ((size_t)snprintf(host, sizeof(host), "%s%s", src, hide + strlen(dst)) >= sizeof(host))
		return false;
	/* what cannot be reached now is judged by its path alone */
	return lstat(host, st) == 0;
}

static int copy_lower(struct xp *x, int dirfd, const char *dir);

static int copy_lower_top(struct xp *x, int lower)
{
	const struct corral_policy *p = x->r->p;
	int r;

	x->nhidden = 0;
	x->hidden = p && p->nhide ? calloc(p->nhide, sizeof(*x->hidden)) : NULL;
	if (p && p->nhide && !x->hidden)
		return corral_set_err(x->err, -ENOMEM, "out of memory exporting");
	for (size_t i = 0; p && i < p->nhide; i++)
		x->nhidden += hidden_host(p, p->hide[i], &x->hidden[x->nhidden]);
	r = copy_lower(x, lower, "");
	free(x->hidden);
	x->hidden = NULL;
	x->nhidden = 0;
	return r;
}

static int copy_lower(struct xp *x, int dirfd, const char *dir)
{
	int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3), r = 0;
	struct dirent *de;
	DIR *d;

	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return corral_set_err(x->err, -errno, "cannot list %s in the workspace: %s",
				      *dir ? dir : ".", strerror(errno));
	}
	/*
	 * A dup shares dirfd's offset, and a box's workspace fd has been
	 * walked before (its baseline, an earlier export): from the start.
	 */
	rewinddir(d);
	while (r == 0 && (de = readdir(d))) {
		char *path, target[4096];
		const char *why;
		struct stat st;
		ssize_t n = 0;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if ((*dir ? asprintf(&path, "%s/%s", dir, de->d_name) :
		     asprintf(&path, "%s", de->d_name)) < 0) {
			r = corral_set_err(x->err, -ENOMEM, "out of memory exporting");
			break;
		}
		if (x_stopped(x)) {
			r = cut_short(x, x->stopped, " before ", path);
			free(path);
			break;
		}
		if (S_ISLNK(st.st_mode)) {
			n = readlinkat(dirfd, de->d_name, target, sizeof(target) - 1);
			target[n < 0 ? 0 : n] = '\0';
		}
		why = hidden_lower(x, path, &st) ? "hidden (filesystem.hide): the sandbox "
			"saw an empty mask there" : boundary_why(path, st.st_mode, target);
		if (why) {
			note_held(x, path, "unchanged", st.st_mode, why);
		} else if (S_ISDIR(st.st_mode)) {
			int sub = open_beneath(dirfd, de->d_name, O_RDONLY | O_DIRECTORY, 0);

			r = put_dir(x, path, st.st_mode);
			if (r == 0 && sub >= 0)
				r = copy_lower(x, sub, path);
			if (sub >= 0)
				close(sub);
			else if (r == 0)
				note_held(x, path, "unchanged", st.st_mode, strerror(-sub));
		} else {
			struct source src = { .dirfd = x->r->layers.lower };

			r = put_entry(x, path, st.st_mode, target, &src);
			if (r < 0 && x->err->code == 0) {
				note_held(x, path, "unchanged", st.st_mode, strerror(-r));
				r = 0;
			}
		}
		x->copied += r == 0 && !why;
		free(path);
	}
	closedir(d);
	return r;
}

/* ---- the changes --------------------------------------------------------- */

struct decision {
	char *why;		/* held back: the reason; NULL: it goes */
	char *data;		/* the bytes a content rule passed, or NULL */
	size_t len;
	char note[160];
};

static bool allowed_risky(const struct export_req *r, const char *path,
			  const char **pattern)
{
	for (size_t i = 0; i < r->nallow_risky; i++)
		if (hold_glob_match(r->allow_risky[i], path)) {
			*pattern = r->allow_risky[i];
			return true;
		}
	return false;
}

static int decide(struct xp *x, struct hold_ctx *h, const struct change *c,
		  struct decision *d)
{
	const char *why = NULL, *pattern;
	char buf[CORRAL_ERR_MAX];
	int r;

	*d = (struct decision){ 0 };
	if (c->kind == CH_DELETED)
		return 0;
	why = boundary_why(c->path, c->mode, c->target);
	if (why)
		return (d->why = strdup(why)) ? 0 : -ENOMEM;
	r = hold_decide(h, &x->r->layers, c, buf, sizeof(buf), &d->data, &d->len);
	if (r < 0)
		return r;
	if (buf[0] && allowed_risky(x->r, c->path, &pattern)) {
		snprintf(d->note, sizeof(d->note), "let out by --allow-risky %s", pattern);
		if (x->r->ev || x->r->events_out)
			x_emit(x->r, "export.allow_risky",
				    json_pack("{s:o, s:s, s:s}", "path",
					      corral_json_bytes(c->path, strlen(c->path)),
					      "pattern", pattern, "reason", buf));
		/* the bytes checked are the ones written; let the rest be read */
		return 0;
	}
	if (buf[0])
		return (d->why = strdup(buf)) ? 0 : -ENOMEM;
	if (S_ISREG(c->mode) && (c->mode & (S_ISUID | S_ISGID)))
		snprintf(d->note, sizeof(d->note), "setuid/setgid bits dropped");
	else if (!S_ISLNK(c->mode) && (c->mode & 0777 & ~x->perm))
		snprintf(d->note, sizeof(d->note), "mode %04o written as %04o (the "
			 "umask; never writable by others)", (unsigned)(c->mode & 07777),
			 (unsigned)(c->mode & x->perm));
	return 0;
}

/* Has the host's copy of path moved on since the sandbox started? */
static const char *conflict_why(struct xp *x, const struct change *c)
{
	const struct base_ent *e = base_find(x->r->base, c->path);
	const struct stat *was = e ? &e->st : NULL;
	const char *name, *why = NULL;
	struct stat now;
	bool there;
	int parent = open_parent(x->dest, c->path, &name);

	if (parent == -ELOOP || parent == -ENOTDIR || parent == -EXDEV)
		return "a symlink, a file or a mount is in the way on the host";
	there = parent >= 0 && fstatat(parent, name, &now, AT_SYMLINK_NOFOLLOW) == 0;
	if (was && there && !(S_ISDIR(was->st_mode) && S_ISDIR(now.st_mode))) {
		if (!same_stat(was, &now))
			why = e->written ? "changed on the host since corral last applied it" :
			      "changed on the host since the sandbox started";
		else if (e->written && !still_written(parent, name, e))
			why = "changed on the host since corral last applied it";
	}
	if (parent >= 0)
		close(parent);
	if (was && there)
		return why;
	if (was && !there)
		return c->kind == CH_DELETED ? NULL :
			"deleted on the host since the sandbox started";
	if (!was && there)
		return S_ISDIR(now.st_mode) && S_ISDIR(c->mode) ? NULL :
			"created on the host since the sandbox started";
	return NULL;
}

static int write_change(struct xp *x, const struct change *c,
			const struct decision *d)
{
	struct source src = { .dirfd = x->r->layers.upper, .data = d->data,
			      .len = d->len };

	if (c->kind == CH_DELETED)
		return remove_entry(x, c->path);
	if (S_ISDIR(c->mode))
		return put_dir(x, c->path, change_mode(x, c->mode));
	return put_entry(x, c->path, change_mode(x, c->mode), c->target, &src);
}

/* ---- --patch ------------------------------------------------------------ */

/* Where the caller's new entry is made: beneath dest_dir by its last name, or by its path. */
static int dest_at(const struct export_req *r, const char *path, const char **name)
{
	*name = r->dest_name ? r->dest_name : path;
	return r->dest_name ? r->dest_dir : AT_FDCWD;
}

static unsigned int git_mode(mode_t m)
{
	return S_ISLNK(m) ? 0120000 : (m & S_IXUSR) ? 0100755 : 0100644;
}

/*
 * A side of a change: a symlink's text or a copy of what the hold read
 * (data), or a regular file opened (fd, size), read whole only when both
 * sides are small (see PATCH_TEXT_MAX).
 */
struct side {
	bool present;
	char *data;
	size_t len;
	int fd;
	uint64_t size;
};

#define SIDE_NONE ((struct side){ .fd = -1 })

static void side_free(struct side *s)
{
	free(s->data);
	if (s->fd >= 0)
		close(s->fd);
	*s = SIDE_NONE;
}

static int side_open(struct xp *x, int dirfd, const char *path, mode_t m,
		     const char *target, struct side *s)
{
	struct stat st;

	*s = SIDE_NONE;
	s->present = true;
	if (S_ISLNK(m)) {
		s->data = strdup(target);
		s->len = s->size = s->data ? strlen(target) : 0;
		return s->data ? 0 : -ENOMEM;
	}
	if (!S_ISREG(m))
		return 0;
	/* O_NONBLOCK: a fifo swapped in must not hang us; fstat refuses it */
	s->fd = open_beneath(dirfd, path, O_RDONLY | O_NONBLOCK, 0);
	if (s->fd < 0)
		return s->fd;
	if (fstat(s->fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	if ((uint64_t)st.st_size > x->lim.max_bytes - x->bytes)
		return -EFBIG;
	s->size = (uint64_t)st.st_size;
	return 0;
}

/* A small file's bytes, as fstat sized it: a file growing under us is cut there. */
static int side_read(struct side *s)
{
	size_t got = 0;

	if (s->fd < 0 || s->data)
		return 0;
	if (!(s->data = malloc(s->size + 1)))
		return -ENOMEM;
	while (got < s->size) {
		ssize_t n = read(s->fd, s->data + got, s->size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	s->data[got] = '\0';
	s->len = got;
	return 0;
}

/* git's test (patch.c's is_binary), on the first 8000 bytes only: a NUL. */
static bool side_binary(const struct side *s)
{
	char buf[8000];
	ssize_t n;

	if (s->fd < 0)
		return s->data && memchr(s->data, '\0', s->len < 8000 ? s->len : 8000);
	while ((n = pread(s->fd, buf, sizeof(buf), 0)) < 0 && errno == EINTR)
		;
	return n > 0 && memchr(buf, '\0', (size_t)n);
}

/*
 * One patch_file: in memory when both sides are text of at most
 * PATCH_TEXT_MAX bytes (the answer as it always was), else a whole-file
 * binary patch read a slice at a time (the bytes patch_file made of a
 * binary file in memory, without holding it).
 */
static int patch_sides(struct patch_buf *pb, const char *path, struct side *o,
		       unsigned int omode, struct side *n, unsigned int nmode)
{
	struct patch_src os, ns;
	int r;

	if (o->size <= PATCH_TEXT_MAX && n->size <= PATCH_TEXT_MAX &&
	    !side_binary(o) && !side_binary(n)) {
		r = side_read(o);
		if (r == 0)
			r = side_read(n);
		if (r < 0)
			return r;
		return patch_file(pb, path, o->present ? (o->data ? o->data : "") : NULL,
				  o->len, omode, n->present ? (n->data ? n->data : "") : NULL,
				  n->len, nmode);
	}
	os = (struct patch_src){ .data = o->fd < 0 ? (o->data ? o->data : "") : NULL,
				 .fd = o->fd, .len = o->fd < 0 ? o->len : o->size };
	ns = (struct patch_src){ .data = n->fd < 0 ? (n->data ? n->data : "") : NULL,
				 .fd = n->fd, .len = n->fd < 0 ? n->len : n->size };
	return patch_file_src(pb, path, o->present ? &os : NULL, omode,
			      n->present ? &ns : NULL, nmode);
}

static int patch_change(struct xp *x, struct patch_buf *pb,
			const struct change *c, const struct decision *d)
{
	struct side o = SIDE_NONE, n = SIDE_NONE, none = SIDE_NONE;
	bool had = c->kind != CH_ADDED && !S_ISDIR(c->old_mode) && c->old_mode;
	bool has = c->kind != CH_DELETED && !S_ISDIR(c->mode);
	int r = 0;

	/* the host's file, into the patch: as the owner may read it */
	if (had) {
		bool was = sandbox_reads(false);

		r = side_open(x, x->r->layers.lower, c->path, c->old_mode, c->old_target, &o);
		sandbox_reads(was);
	}
	if (r == 0 && has && d->data) {
		n.present = true;
		n.data = malloc(d->len + 1);
		if (n.data) {
			memcpy(n.data, d->data, d->len);
			n.len = n.size = d->len;
		} else {
			r = -ENOMEM;
		}
	} else if (r == 0 && has) {
		if (x->r->fault)
			x->r->fault(x->r->fault_arg, c->path);
		r = side_open(x, x->r->layers.upper, c->path, c->mode, c->target, &n);
	}
	if (r == 0 && (x->bytes += o.size + n.size) > x->lim.max_bytes)
		r = corral_set_err(x->err, -EFBIG,
				   "the patch exceeds export.max_bytes (%llu bytes) at %s: raise the limit in the policy's export section",
				   (unsigned long long)x->lim.max_bytes, c->path);
	if (r == 0 && had && has && c->kind == CH_TYPE) {
		/* git writes a type change as a deletion, then an addition */
		r = patch_sides(pb, c->path, &o, git_mode(c->old_mode), &none, 0);
		if (r == 0)
			r = patch_sides(pb, c->path, &none, 0, &n, git_mode(c->mode));
	} else if (r == 0 && (had || has)) {
		r = patch_sides(pb, c->path, &o, git_mode(c->old_mode), &n, git_mode(c->mode));
	}
	if (r == -ESTALE && x->err->code == 0)
		corral_set_err(x->err, r, "%s shrank while its patch was made (the sandbox "
			       "is still writing it): export again once it is done", c->path);
	side_free(&o);
	side_free(&n);
	return r;
}

/*
 * --patch FILE is written as it is made, never held whole (it may be as
 * large as export.max_bytes and more), into a new file beside FILE that
 * takes FILE's name only once it is complete (corral_newfile): a failed
 * export leaves FILE as it was, and a reader never sees half a patch.
 */
static int patch_open(struct xp *x, struct corral_newfile *f)
{
	const char *name;
	int dir = dest_at(x->r, x->r->patch, &name);
	struct corral_err e;
	int fd = corral_newfile_open(f, dir, name, 0644, &e);

	if (fd < 0)
		return corral_set_err(x->err, fd, "cannot create the patch %s: %s",
				      x->r->patch, strerror(-fd));
	return fd;
}

/* ---- the whole ------------------------------------------------------------ */

int export_new_dir(int dir, const char *name, const char *flag, const char *path,
		   struct corral_err *err)
{
	int fd;

	if (mkdirat(dir, name, 0700) < 0)
		return corral_set_err(err, -errno, "%s %s: %s%s", flag, path,
				      strerror(errno), errno == EEXIST ?
				      " (the export goes to a new directory)" : "");
	fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return corral_set_err(err, -errno, "%s %s: %s", flag, path,
				      strerror(errno));
	return fd;
}

static int run_changes(struct xp *x, struct hold_ctx *h, struct changes *ch,
		       struct patch_buf *pb)
{
	int r = 0;

	for (size_t i = 0; r == 0 && i < ch->n; i++) {
		const struct change *c = &ch->v[i];
		struct decision d;
		const char *cw;

		if (x_stopped(x))
			return cut_short(x, x->stopped, " before ", c->path);
		r = decide(x, h, c, &d);
		if (r < 0) {
			r = corral_set_err(x->err, r, "cannot check %s: %s", c->path,
					   strerror(-r));
			break;
		}
		if (d.why) {
			note_held(x, c->path, change_kind_name(c->kind), c->mode, d.why);
		} else if (pb && !patch_path_ok(c->path)) {
			note_held(x, c->path, change_kind_name(c->kind),
				  c->kind == CH_DELETED ? c->old_mode : c->mode,
				  "git apply refuses paths inside .git: use --export-to or --apply for it");
		} else if (pb) {
			r = patch_change(x, pb, c, &d);
			/* as a workspace's owner (sandbox_reads): a host file of another's */
			if (r == -EACCES && reads_toggled && x->err->code == 0) {
				note_held(x, c->path, change_kind_name(c->kind),
					  c->kind == CH_DELETED ? c->old_mode : c->mode,
					  "the host's file is not readable by the user the patch "
					  "is written as: left out");
				r = 0;
			} else if (r == 0 && !S_ISDIR(c->kind == CH_DELETED ? c->old_mode : c->mode)) {
				note_exported(x, c, d.note);
			} else if (r < 0 && x->err->code == 0) {
				r = corral_set_err(x->err, r, "cannot write the patch of %s: %s",
						   c->path, strerror(-r));
			}
		} else if (x->r->base && (cw = conflict_why(x, c))) {
			note_conflict(x, c, cw);
		} else {
			r = write_change(x, c, &d);
			if (r == 0) {
				note_exported(x, c, d.note);
			} else if (x->err->code == 0) {
				/* this entry failed (a way blocked, a file swapped): say so, go on */
				char why[160];

				snprintf(why, sizeof(why), "not written: %s%s", strerror(-r),
					 r == -EXDEV && S_ISLNK(c->mode) ?
					 " (the symlink's target leads out of the tree through what is on the host)" :
					 r == -ELOOP || r == -ENOTDIR ?
					 " (a symlink or a file in the way: never followed)" :
					 r == -EINVAL ? " (it changed type during the export)" : "");
				note_conflict(x, c, why);
				r = 0;
			}
		}
		free(d.why);
		free(d.data);
	}
	return r;
}

int export_run(const struct export_req *r, json_t **report,
	       struct corral_err *err)
{
	struct xp x = { .r = r, .dest = -1, .err = err };
	struct changes ch = { 0 };
	struct hold_ctx *h = NULL;
	struct patch_buf pb = { .sink = r->patch_sink, .fd = r->patch_fd,
				.stop = r->stop, .stop_arg = r->stop_arg };
	const char *mode = r->to ? "to" : r->apply_fd >= 0 ? "apply" : "patch";
	bool patching = r->patch || r->patch_out || r->patch_sink;
	struct corral_newfile pnew;	/* --patch FILE, until it is whole */
	int ret, pfd = -1;

	err->code = 0;
	err->msg[0] = '\0';
	export_limits_of(r->p, &x.lim);
	/* a name taken already fails the entry (O_EXCL): a guessable one was the sandbox's to take */
	if (corral_random(&x.tmptag, sizeof(x.tmptag)) < 0)
		x.tmptag = corral_now_ms();
	x.perm = export_perm_mask();
	x.exported = json_array();
	x.held = json_array();
	x.conflicts = json_array();
	*report = json_pack("{s:s, s:O, s:O, s:O}", "mode", mode, "exported", x.exported,
			    "held", x.held, "conflicts", x.conflicts);
	if (!*report || !x.exported || !x.held || !x.conflicts) {
		ret = corral_set_err(err, -ENOMEM, "out of memory starting the export");
		goto out;
	}
	if (!!r->to + (r->apply_fd >= 0) + patching != 1 ||
	    !!r->patch + !!r->patch_out + r->patch_sink > 1) {
		ret = corral_set_err(err, -EINVAL,
				     "an export goes to one place: a new directory, the workspace or a patch");
		goto out;
	}
	if (r->apply_fd >= 0 && !r->base) {
		ret = corral_set_err(err, -EINVAL, "--apply needs the workspace as it was at the start");
		goto out;
	}
	ret = diff_changes(&r->layers, &x.lim, &ch, err);
	if (ret == 0 && r->only)
		changes_keep_under(&ch, r->only);
	if (ret == 0)
		ret = hold_ctx_new(&h, r->p, &r->layers, err);
	if (ret < 0)
		goto out;
	if (r->to && r->to_opened) {
		x.dest = fcntl(r->to_fd, F_DUPFD_CLOEXEC, 3);
		if (x.dest < 0)
			ret = corral_set_err(err, -errno, "cannot use %s: %s", r->to,
					     strerror(errno));
		/* the host's files, copied: only what the owner may read */
		if (ret == 0 && r->layers.lower >= 0) {
			bool was = sandbox_reads(false);

			ret = copy_lower_top(&x, r->layers.lower);
			sandbox_reads(was);
		}
	} else if (r->to) {
		const char *name;
		int dir = dest_at(r, r->to, &name);

		x.dest = export_new_dir(dir, name, "--export-to", r->to, err);
		ret = x.dest < 0 ? x.dest : 0;
		/* the host's files, copied: only what the owner may read */
		if (ret == 0 && r->layers.lower >= 0) {
			bool was = sandbox_reads(false);

			ret = copy_lower_top(&x, r->layers.lower);
			sandbox_reads(was);
		}
	} else if (r->apply_fd >= 0) {
		x.dest = fcntl(r->apply_fd, F_DUPFD_CLOEXEC, 3);
		if (x.dest < 0)
			ret = corral_set_err(err, -errno, "cannot use the workspace: %s",
					     strerror(errno));
	}
	if (ret == 0 && r->patch) {
		pfd = patch_open(&x, &pnew);
		ret = pfd < 0 ? pfd : 0;
		pb.sink = pfd >= 0;
		pb.fd = pfd;
	}
	if (ret == 0)
		ret = run_changes(&x, h, &ch, patching ? &pb : NULL);
	if (ret == 0 && pb.sink)
		pb_flush(&pb);
	/* heard while the patch was made: said so, not as the write's error */
	if (pb.stopped && !x.stopped)
		ret = cut_short(&x, pb.stopped, NULL, NULL);
	else if (ret == 0 && pb.failed && pb.werr)
		ret = corral_set_err(err, -pb.werr, "cannot write the patch out: %s",
				     strerror(pb.werr));
	else if (ret == 0 && patching && pb.failed)
		ret = corral_set_err(err, -ENOMEM, "out of memory writing the patch");
	if (pfd >= 0 && ret == 0) {
		struct corral_err e;

		ret = corral_newfile_keep(&pnew, &e);
		if (ret < 0)
			corral_set_err(err, ret, "cannot write the patch %s: %s",
				       r->patch, strerror(-ret));
	} else if (pfd >= 0) {
		corral_newfile_drop(&pnew);
	}
	pb_done(&pb);
	if (ret == 0 && r->patch_out) {
		*r->patch_out = pb;	/* the caller's now */
		pb = (struct patch_buf){ 0 };
	}
	if (x.dest >= 0)
		set_dir_modes(&x);
	/* a new directory ends with the workspace's own mode */
	if (r->to && x.dest >= 0 && r->layers.lower >= 0) {
		struct stat st;

		if (fstat(r->layers.lower, &st) == 0 && fchmod(x.dest, st.st_mode & 0777) < 0) {
			/* then it keeps 0700: stricter, never looser */
		}
	}
out:
	if (*report) {
		json_object_set_new(*report, "changes", json_integer((json_int_t)ch.n));
		if (r->to)
			json_object_set_new(*report, "copied_unchanged",
					    json_integer((json_int_t)x.copied));
		if (ret < 0)
			json_object_set_new(*report, "error", text(err->msg));
	}
	if (r->ev || r->events_out)
		x_emit(r, "export", json_pack("{s:s, s:i, s:i, s:i, s:o}",
			    "mode", mode,
			    "exported", (int)json_array_size(x.exported),
			    "held", (int)json_array_size(x.held),
			    "conflicts", (int)json_array_size(x.conflicts),
			    "error", text(ret < 0 ? err->msg : "")));
	if (x.dest >= 0)
		close(x.dest);
	free(pb.data);
	hold_ctx_free(h);
	changes_free(&ch);
	json_decref(x.exported);
	json_decref(x.held);
	json_decref(x.conflicts);
	return ret;
}

/* ---- for corral_run -------------------------------------------------------- */

static bool path_within(const char *path, const char *top)
{
	size_t n = strlen(top);

	return !strncmp(path, top, n) && (path[n] == '/' || path[n] == '\0' ||
					   (n == 1 && top[0] == '/'));
}

/* ---- the caller's destination --------------------------------------------- */

#define DEST_LINKS_MAX	40	/* the kernel's own bound on a path's symlinks */

/*
 * The directories p's --rw binds share with the host, by identity, in
 * *ids (malloc'd; NULL if none).  By the source's path, which names the
 * directory the bind was made of (a pinned one was checked to be it): a
 * pinned fd is gone in a daemon's worker, its number maybe another file's.
 * One that cannot be looked at now is left out: it cannot be walked
 * through either.
 */
int export_rw_dirs(const struct corral_policy *p, struct corral_dir_id **ids,
		   size_t *n, struct corral_err *err)
{
	*ids = NULL;
	*n = 0;
	if (!p || !p->nbinds)
		return 0;
	*ids = calloc(p->nbinds, sizeof(**ids));
	if (!*ids)
		return corral_set_err(err, -ENOMEM, "out of memory");
	for (size_t i = 0; i < p->nbinds; i++) {
		struct stat st;

		if (!p->binds[i].writable || stat(p->binds[i].src, &st) < 0)
			continue;
		(*ids)[(*n)++] = (struct corral_dir_id){ .dev = st.st_dev, .ino = st.st_ino };
	}
	return 0;
}

struct rw_dirs {
	const struct corral_dir_id *id;
	size_t n;
};

static bool rw_visit(const struct stat *st, void *arg)
{
	const struct rw_dirs *rw = arg;

	for (size_t i = 0; i < rw->n; i++)
		if (rw->id[i].dev == (uint64_t)st->st_dev &&
		    rw->id[i].ino == (uint64_t)st->st_ino)
			return true;
	return false;
}

/* Whether dir is, or lies below, one of the n directories rw names. */
static bool in_rw_dirs(const struct corral_dir_id *rw, size_t n, int dir)
{
	struct rw_dirs d = { .id = rw, .n = n };

	/* a directory that cannot be walked up is taken for the sandbox's */
	return n && walk_up(dir, rw_visit, &d) != 0;
}

/*
 * Who decides where a path leads: the first owner other than root of a
 * directory or symlink met on the way from / (the directory itself
 * included).  That user can rename what follows or make it a symlink:
 * `--patch ~/x/p.diff`, ~/x a link to /etc/cron.d, is theirs to write,
 * not root's.
 */
struct path_owner {
	bool found;
	uid_t uid;
	gid_t gid;
};

static void owner_note(struct path_owner *po, const struct stat *st)
{
	if (po && !po->found && st->st_uid != 0)
		*po = (struct path_owner){ .found = true, .uid = st->st_uid,
					   .gid = st->st_gid };
}

/* walking up: the last one seen is the topmost */
static bool top_visit(const struct stat *st, void *arg)
{
	struct path_owner *top = arg;

	if (st->st_uid != 0)
		*top = (struct path_owner){ .found = true, .uid = st->st_uid,
					    .gid = st->st_gid };
	return false;
}

/* A relative path's way from /: the working directory's own, topmost first. */
static void owner_up(struct path_owner *po, int dir)
{
	struct path_owner top = { 0 };

	walk_up(dir, top_visit, &top);
	if (po && !po->found && top.found)
		*po = top;
}

/*
 * The directory path names, opened (O_PATH) one component at a time, its
 * symlinks followed as the kernel would, but not one that lies where the
 * sandbox writes (a --rw bind's directory): the sandbox put it there, or
 * may have, to lead a write the caller makes (an export, as root, say)
 * into a directory of its choosing.  po (or NULL): who decides where it
 * leads.  -errno, with err set.
 */
static int dest_open(const struct corral_dir_id *rw, size_t nrw, const char *flag,
		     const char *path, bool dir, struct path_owner *po,
		     struct corral_err *err)
{
	const char *of = dir ? "'s directory" : "";
	char *rest = strdup(path), *comp, *next;
	int cur, links = 0, r = 0;

	if (!rest)
		return corral_set_err(err, -ENOMEM, "out of memory");
	cur = open(path[0] == '/' ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (cur < 0) {
		r = corral_set_err(err, -errno, "%s%s %s: %s", flag, of, path,
				   strerror(errno));
		goto out;
	}
	if (po && path[0] != '/')
		owner_up(po, cur);
	for (comp = rest; r == 0 && comp && *comp; comp = next) {
		char target[PATH_MAX], *joined;
		struct stat st;
		ssize_t n;
		int fd;

		next = strchr(comp, '/');
		if (next)
			*next++ = '\0';
		if (!*comp || !strcmp(comp, "."))
			continue;
		fd = openat(cur, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &st) < 0) {
			r = corral_set_err(err, -errno, "%s%s %s: %s: %s", flag, of, path,
					   comp, strerror(errno));
			if (fd >= 0)
				close(fd);
			break;
		}
		owner_note(po, &st);
		if (!S_ISLNK(st.st_mode)) {
			close(cur);
			cur = fd;
			continue;
		}
		n = readlinkat(fd, "", target, sizeof(target) - 1);
		close(fd);
		if (n < 0 || ++links > DEST_LINKS_MAX) {
			r = corral_set_err(err, n < 0 ? -errno : -ELOOP, "%s%s %s: the "
					   "symlink %s: %s", flag, of, path, comp,
					   strerror(n < 0 ? errno : ELOOP));
			break;
		}
		if (in_rw_dirs(rw, nrw, cur)) {
			r = corral_set_err(err, -EPERM, "%s%s %s: the symlink %s on the "
					   "way lies in a --rw bind, where the sandbox writes: "
					   "refused, as it could lead the caller anywhere it "
					   "may write or read (name what it points to)",
					   flag, of, path, comp);
			break;
		}
		target[n] = '\0';
		/* the target's components first, then what was left of path */
		if (asprintf(&joined, "%s%s%s", target, next ? "/" : "", next ? next : "") < 0) {
			r = corral_set_err(err, -ENOMEM, "out of memory");
			break;
		}
		if (target[0] == '/') {
			close(cur);
			cur = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
			if (cur < 0)
				r = corral_set_err(err, -errno, "%s%s %s: /: %s", flag, of,
						   path, strerror(errno));
		}
		free(rest);
		rest = next = joined;
	}
	if (r == 0 && dir) {
		struct stat st;

		if (fstat(cur, &st) < 0 || !S_ISDIR(st.st_mode))
			r = corral_set_err(err, -ENOTDIR, "%s%s %s: not a directory",
					   flag, of, path);
	}
	if (r < 0 && cur >= 0)
		close(cur);
out:
	free(rest);
	return r < 0 ? r : cur;
}

int export_dest_open(const struct corral_policy *p, const char *flag, const char *path,
		     struct corral_err *err)
{
	struct corral_dir_id *rw;
	size_t n;
	int r = export_rw_dirs(p, &rw, &n, err);

	if (r == 0)
		r = dest_open(rw, n, flag, path, true, NULL, err);
	free(rw);
	return r;
}

/*
 * The directory a new entry at path goes in (--export-to's directory,
 * --patch's file, a daemon's "to", the client's file), opened before the
 * sandbox runs or before its answer is written, with that entry's last
 * name in *name (malloc'd): the caller makes it beneath this fd.  Its
 * path resolved again then could lead elsewhere: a --rw bind on the way
 * puts a directory in the sandbox's hands, which it can swap for a
 * symlink to a directory only the caller may write, and the export, made
 * as the caller, followed it.
 */
static int dest_parent(const struct corral_dir_id *rw, size_t nrw, const char *flag,
		       const char *path, bool dir, char **name, struct path_owner *po,
		       struct corral_err *err)
{
	char *copy = strdup(path), *slash, *base;
	size_t n;
	int fd;

	*name = NULL;
	if (!copy)
		return corral_set_err(err, -ENOMEM, "out of memory");
	n = strlen(copy);
	/* a new directory may be named "out/"; a file may not */
	while (dir && n > 1 && copy[n - 1] == '/')
		copy[--n] = '\0';
	slash = strrchr(copy, '/');
	base = slash ? slash + 1 : copy;
	if (!*base || !strcmp(base, ".") || !strcmp(base, "..")) {
		free(copy);
		return corral_set_err(err, -EINVAL, "%s %s: names no new entry in a directory",
				      flag, path);
	}
	if (!(*name = strdup(base))) {
		free(copy);
		return corral_set_err(err, -ENOMEM, "out of memory");
	}
	if (slash && slash != copy)
		*slash = '\0';
	fd = dest_open(rw, nrw, flag, !slash ? "." : slash == copy ? "/" : copy, true, po, err);
	free(copy);
	if (fd < 0) {
		free(*name);
		*name = NULL;
	}
	return fd;
}

int corral_dest_parent(const struct corral_dir_id *rw, size_t nrw, const char *flag,
		       const char *path, bool dir, char **name, struct corral_err *err)
{
	return dest_parent(rw, nrw, flag, path, dir, name, NULL, err);
}

int corral_path_open(const struct corral_dir_id *rw, size_t nrw, const char *flag,
		     const char *path, struct corral_err *err)
{
	return dest_open(rw, nrw, flag, path, false, NULL, err);
}

/* export_dest_open and export_dest_parent, and who decides where they lead */
static int export_dest(const struct corral_policy *p, const char *flag, const char *path,
		       bool dir, char **name, struct path_owner *po,
		       struct corral_err *err)
{
	struct corral_dir_id *rw;
	size_t n;
	int r = export_rw_dirs(p, &rw, &n, err);

	if (name)
		*name = NULL;
	if (r == 0)
		r = name ? dest_parent(rw, n, flag, path, dir, name, po, err) :
		    dest_open(rw, n, flag, path, true, po, err);
	free(rw);
	return r;
}

int export_dest_parent(const struct corral_policy *p, const char *flag, const char *path,
		       bool dir, char **name, struct corral_err *err)
{
	return export_dest(p, flag, path, dir, name, NULL, err);
}

/* ---- writing as someone else -------------------------------------------- */

int export_become(uid_t uid, gid_t gid, char *msg, size_t len)
{
	gid_t groups[BECOME_GROUPS_MAX];
	int n = BECOME_GROUPS_MAX;
	struct passwd *pw;

	if (geteuid() != 0) {
		if (uid != geteuid()) {
			snprintf(msg, len, "corral runs as uid %d and cannot write as "
				 "uid %d", (int)geteuid(), (int)uid);
			return -EACCES;
		}
		return 0;
	}
	pw = getpwuid(uid);
	if (!pw || getgrouplist(pw->pw_name, gid, groups, &n) < 0) {
		groups[0] = gid;
		n = 1;
	}
	if (setgroups((size_t)n, groups) < 0) {
		snprintf(msg, len, "setgroups for uid %d: %s", (int)uid, strerror(errno));
		return -errno;
	}
	/* setfsuid/setfsgid answer the old id: ask again to know it took */
	setfsgid(gid);
	setfsuid(uid);
	if ((gid_t)setfsgid((gid_t)-1) != gid || (uid_t)setfsuid((uid_t)-1) != uid) {
		snprintf(msg, len, "cannot take uid %d gid %d for the writes",
			 (int)uid, (int)gid);
		return -EPERM;
	}
	return 0;
}

/*
 * As root: whom the export writes as, the user who decides where its
 * destination leads (path_owner: normally the owner of the workspace, or
 * of the directory --export-to's new one or --patch's file goes in),
 * when that is not root.  `sudo corral run --workspace ~/proj --apply`
 * then leaves the user's files in the user's tree, each written as only
 * the user could (no chown after the fact: a write the user may not make
 * is refused, not made as root).  Its group: that entry's, else the
 * owner's own, else nogroup (never 0).
 */
static void pick_owner(struct run_export *x, const struct path_owner *po)
{
	struct passwd *pw;

	if (geteuid() != 0 || !po->found)
		return;
	x->as_owner = true;
	x->uid = po->uid;
	x->gid = po->gid;
	if (!x->gid) {
		pw = getpwuid(po->uid);
		x->gid = pw && pw->pw_gid ? pw->pw_gid : 65534;
	}
}

int run_export_prepare(struct run_export *x, const struct corral_policy *p,
		       const struct corral_export_opts *o, struct corral_err *err)
{
	struct export_limits lim;

	*x = (struct run_export){ .lower = -1, .dest_dir = -1 };
	if (!p->workspace)
		return corral_set_err(err, -EINVAL,
				      "an export (--export-to, --apply, --patch) needs a workspace (--workspace DIR)");
	if (!!o->to + o->apply + !!o->patch != 1)
		return corral_set_err(err, -EINVAL,
				      "an export goes to one place: --export-to, --apply or --patch, not several");
	if (o->to) {
		char *dir = strdup(o->to), *slash, *real = NULL, *ws = NULL;
		bool inside = false;

		if (!dir)
			return corral_set_err(err, -ENOMEM, "out of memory");
		slash = strrchr(dir, '/');
		if (slash && slash != dir)
			*slash = '\0';
		real = realpath(slash ? (slash == dir ? "/" : dir) : ".", NULL);
		ws = realpath(p->workspace, NULL);
		inside = real && ws && path_within(real, ws);
		free(dir);
		free(real);
		free(ws);
		if (inside)
			return corral_set_err(err, -EINVAL,
					      "--export-to %s: lies inside the workspace it copies", o->to);
		if (access(o->to, F_OK) == 0 || errno != ENOENT)
			return corral_set_err(err, -EEXIST,
					      "--export-to %s: exists already (the export goes to a new directory)",
					      o->to);
	}
	if (o->to || o->patch) {
		struct path_owner po = { 0 };

		x->dest_dir = export_dest(p, o->to ? "--export-to" : "--patch",
					  o->to ? o->to : o->patch, o->to, &x->dest_name,
					  &po, err);
		if (x->dest_dir < 0) {
			run_export_free(x);
			return err->code;
		}
		pick_owner(x, &po);
	}
	/*
	 * --apply writes where this leads: not through a link a sandbox left
	 * in a --rw bind (a workspace under the bind's directory, made a
	 * link to /etc/cron.d by an earlier run, had the apply write there).
	 */
	if (o->apply) {
		struct path_owner po = { 0 };
		int dir = export_dest(p, "--workspace", p->workspace, true, NULL, &po, err);

		pick_owner(x, &po);
		x->lower = dir < 0 ? -1 : openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dir >= 0)
			close(dir);
		if (dir < 0) {
			run_export_free(x);
			return err->code;
		}
	} else {
		x->lower = open(p->workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	}
	if (x->lower < 0) {
		corral_set_err(err, -errno, "workspace %s: %s", p->workspace, strerror(errno));
		run_export_free(x);
		return err->code;
	}
	export_limits_of(p, &lim);
	if (o->apply && baseline_take(x->lower, &lim, &x->base, err) < 0) {
		run_export_free(x);
		return err->code;
	}
	return 0;
}

/* In the child: export_become, the export, its answer on wr; never returns. */
static void owner_child(const struct run_export *x, struct export_req *r,
			pid_t parent, int wr)
{
	struct corral_err err = { 0 };
	json_t *report = NULL, *events = json_array(), *answer;
	char *text;
	int ret;

	/*
	 * No corral_forget: a library caller's strings (the export's paths
	 * among them) may lie in the environment it zeroes, and this process
	 * holds nothing the export made in line before did not.
	 */
	signal(SIGPIPE, SIG_IGN);
	/* the log is the parent's: the events go back with the answer */
	r->ev = NULL;
	r->events_out = events;
	ret = export_become(x->uid, x->gid, err.msg, sizeof(err.msg));
	if (ret == 0) {
		reads_toggled = true;
		sandbox_reads(true);
	}
	/* after: a change of fs ids clears it.  corral gone, the export stops */
	if (ret == 0 && prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		ret = corral_set_err(&err, -errno, "prctl(PR_SET_PDEATHSIG): %s",
				     strerror(errno));
	if (ret == 0 && getppid() != parent)
		_exit(1);
	if (ret == 0)
		ret = export_run(r, &report, &err);
	answer = json_pack("{s:i, s:o, s:o*, s:o*}", "code", ret, "msg",
			   corral_json_bytes(err.msg, strlen(err.msg)), "report", report,
			   "events", events);
	text = answer ? json_dumps(answer, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
	if (text && write_all(wr, text, strlen(text)) < 0)
		_exit(1);
	_exit(text ? 0 : 1);
}

/*
 * A writer's answer (export_become's child: {"code", "msg", ...} as JSON
 * on rd, at most EXPORT_ANSWER_MAX bytes), read to its end, and the
 * writer reaped.  stop (may be NULL), asked every 100 ms meanwhile, names
 * a signal to send it on, once.  0 or -errno from "code", err from "msg";
 * *answer the whole object (NULL when there was none) for the other fields.
 */
int export_writer_wait(pid_t pid, int rd, const char *who, int (*stop)(void *arg),
		       void *stop_arg, json_t **answer, struct corral_err *err)
{
	size_t len = 0, cap = 0;
	char *buf = NULL;
	json_t *a = NULL, *code, *msg;
	bool sent = false;
	int ws = 0, ret = 0, sig;

	for (;;) {
		struct pollfd pfd = { .fd = rd, .events = POLLIN };
		ssize_t n;

		if (!sent && stop && (sig = stop(stop_arg))) {
			sent = true;
			kill(pid, sig);	/* gone already: its answer says how it ended */
		}
		if (poll(&pfd, 1, 100) < 0 && errno != EINTR) {
			ret = corral_set_err(err, -errno, "poll on %s: %s", who, strerror(errno));
			kill(pid, SIGKILL);
			break;
		}
		if (!pfd.revents)
			continue;
		if (len + 65536 > cap) {
			char *nb = cap + 65536 <= EXPORT_ANSWER_MAX ?
				   realloc(buf, cap + 65536) : NULL;

			if (!nb) {
				ret = corral_set_err(err, -EFBIG, "the export's report is too large");
				kill(pid, SIGKILL);
				break;
			}
			buf = nb;
			cap += 65536;
		}
		n = read(rd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
		;
	if (ret == 0)
		a = json_loadb(buf ? buf : "", len, 0, NULL);
	free(buf);
	*answer = a;
	if (ret < 0)
		return ret;
	if (!a)
		return corral_set_err(err, -EIO, "%s ended without a report (wait "
				      "status %d)", who, ws);
	code = json_object_get(a, "code");
	msg = json_object_get(a, "msg");
	ret = json_is_integer(code) ? (int)json_integer_value(code) : -EIO;
	if (ret > 0 || ret < -4095)
		ret = -EIO;
	if (ret < 0)
		corral_set_err(err, ret, "%s", json_is_string(msg) ?
			       json_string_value(msg) : "the export failed");
	return ret;
}

/*
 * The export, made by a child that writes as x->uid (pick_owner).  The
 * parent reads its answer, and asks stop meanwhile: a signal to corral
 * (read off its signalfd, which the child's own reads cannot see) is sent
 * on to the child, blocked there too, whose stop then cuts it short.
 */
static int export_as_owner(const struct run_export *x, struct export_req *r,
			   json_t **report, struct corral_err *err)
{
	char who[64];
	json_t *a, *ev;
	int p[2], ret;
	pid_t parent = getpid(), pid;
	size_t i;

	if (pipe2(p, O_CLOEXEC) < 0)
		return corral_set_err(err, -errno, "pipe for the export's writer: %s",
				      strerror(errno));
	pid = fork();
	if (pid < 0) {
		int e = errno;

		close(p[0]);
		close(p[1]);
		return corral_set_err(err, -e, "cannot fork the export's writer (as uid "
				      "%d): %s", (int)x->uid, strerror(e));
	}
	if (pid == 0) {
		close(p[0]);
		owner_child(x, r, parent, p[1]);
	}
	close(p[1]);
	snprintf(who, sizeof(who), "the export's writer (as uid %d)", (int)x->uid);
	ret = export_writer_wait(pid, p[0], who, r->stop, r->stop_arg, &a, err);
	close(p[0]);
	json_array_foreach(json_object_get(a, "events"), i, ev)
		if (r->ev && json_is_string(json_object_get(ev, "type")))
			events_emit(r->ev, json_string_value(json_object_get(ev, "type")),
				    json_incref(json_object_get(ev, "data")));
	*report = json_incref(json_object_get(a, "report"));
	json_decref(a);
	return ret;
}

void run_export_finish(struct run_export *x, const struct corral_policy *p,
		       const struct corral_export_opts *o, int upperfd,
		       struct events *ev, int (*stop)(void *arg), void *stop_arg,
		       struct corral_result *res)
{
	struct export_req r = {
		.p = p, .layers = { upperfd, x->lower, p }, .to = o->to,
		.apply_fd = o->apply ? x->lower : -1, .base = x->base,
		.patch = o->patch, .allow_risky = o->allow_risky,
		.nallow_risky = o->nallow_risky, .ev = ev,
		.stop = stop, .stop_arg = stop_arg,
		.dest_dir = x->dest_dir, .dest_name = x->dest_name,
	};
	struct corral_err err = { 0 };
	json_t *report = NULL;
	int ret;

	/* an abort criterion judged the agent: nothing of it goes out */
	if (res->status == CORRAL_HALTED || upperfd < 0) {
		ret = corral_set_err(&err, upperfd < 0 ? -EBADF : -EPERM, "%s",
				     upperfd < 0 ? "the sandbox sent no upper layer: nothing can be exported" :
				     "the sandbox was halted: nothing is exported");
		report = json_pack("{s:s}", "error", err.msg);
		if (ev)
			events_emit(ev, "export", json_pack("{s:s}", "error", err.msg));
	} else if (x->as_owner) {
		ret = export_as_owner(x, &r, &report, &err);
		/* the writer's own report says what it did; one it never sent: why */
		if (!report)
			report = json_pack("{s:o}", "error", text(err.msg));
		/* whose the new files are, and whose permissions stopped a write */
		if (report)
			json_object_set_new(report, "written_as", json_pack("{s:I, s:I}",
					    "uid", (json_int_t)x->uid, "gid", (json_int_t)x->gid));
	} else {
		ret = export_run(&r, &report, &err);
	}
	res->export_failed = ret < 0;
	res->export_signal = ret == -EINTR && stop ? stop(stop_arg) : 0;
	if (report)
		res->export_report = json_dumps(report, JSON_COMPACT | JSON_ENSURE_ASCII);
	json_decref(report);
}

void run_export_free(struct run_export *x)
{
	if (x->lower >= 0)
		close(x->lower);
	if (x->dest_dir >= 0)
		close(x->dest_dir);
	free(x->dest_name);
	baseline_free(x->base);
	*x = (struct run_export){ .lower = -1, .dest_dir = -1 };
}
