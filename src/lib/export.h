/*
 * export.h - the workspace's way out: what the sandbox changed (diff.c),
 * as a git patch (patch.c, linediff.c), which changes must not come out
 * (hold.c), and writing them on the host (export.c).
 *
 * Everything here reads an overlay's upper layer and the lower (the
 * original workspace) through directory fds, one component at a time or
 * with openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, and writes on the
 * host the same way.  No path string the sandbox could swap is followed.
 */
#ifndef CORRAL_EXPORT_H
#define CORRAL_EXPORT_H

#include "internal.h"

#include <jansson.h>
#include <string.h>
#include <sys/stat.h>

struct events;

/* ---- diff.c ------------------------------------------------------------ */

enum change_kind {
	CH_ADDED,
	CH_MODIFIED,		/* content (and maybe mode) */
	CH_DELETED,
	CH_TYPE,		/* e.g. a file became a symlink or a directory */
	CH_MODE,		/* permission bits only */
};

struct change {
	char *path;		/* relative, '/'-separated, never "" or "/.." */
	enum change_kind kind;
	mode_t mode, old_mode;	/* st_mode with the type; 0 where absent */
	uint64_t size, old_size;
	char *target, *old_target;	/* symlinks: the link text, never followed */
	bool opaque;		/* a directory that hides the lower's entries */
};

struct changes {
	struct change *v;
	size_t n, cap;
};

struct export_limits {
	uint64_t max_files;	/* entries walked or written */
	uint64_t max_bytes;	/* bytes of regular files read or written */
};

/*
 * The bytes of the changes' paths and symlink targets, whatever the
 * limits: a path is up to 4 KiB, and empty files cost the sandbox's disk
 * nothing, so max_files of them deep in long-named directories were a
 * 400 MB diff (800 MB as a patch) and 2 GB of the daemon's memory.
 */
#define EXPORT_MAX_NAME_BYTES	(32ULL << 20)

/* The upper and lower layers of one workspace (fds borrowed, not closed). */
struct layers {
	int upper;		/* the overlay's upperdir */
	int lower;		/* the original workspace; -1: none */
	/* whose tripwires under /workspace are no change (corral's); or NULL */
	const struct corral_policy *planted;
};

/*
 * Whether rel (a path beneath /workspace, as a change names it) is where
 * the policy plants a tripwire: a decoy of corral's, never the agent's.
 */
bool workspace_tripwire(const struct corral_policy *p, const char *rel);

/*
 * Every change the upper layer holds against the lower, in an order that
 * can be applied top to bottom (a directory's deleted entries before it).
 * Files copied up but equal to the lower are not changes.
 */
int diff_changes(const struct layers *l, const struct export_limits *lim,
		 struct changes *out, struct corral_err *err);
void changes_free(struct changes *c);
/* Keep only the changes at top ("a/b", no leading '/') or beneath it. */
void changes_keep_under(struct changes *c, const char *top);
const char *change_kind_name(enum change_kind k);
/* 'f' file, 'd' directory, 'l' symlink, 'p' fifo, 's' socket, 'c'/'b' devices */
char mode_type_char(mode_t m);
const char *mode_type_name(mode_t m);
json_t *change_json(const struct change *c);
json_t *changes_json(const struct changes *c);

/*
 * Open path (relative) beneath dirfd: no symlink, no magic link, no ".."
 * out of it, no other mount.  -errno on failure.
 */
int open_beneath(int dirfd, const char *path, int flags, mode_t mode);
/* The whole regular file at path beneath dirfd, at most max bytes. */
int read_beneath(int dirfd, const char *path, uint64_t max, char **data,
		 size_t *len);
/* Whether path exists in the merged view of the two layers. */
bool layers_exists(const struct layers *l, const char *path);

/* ---- hold.c: changes that would make a host tool run code later ------- */

enum hold_check {
	HOLD_ALWAYS,		/* any new content is held */
	HOLD_GIT_CONFIG,	/* keys that run programs, includes */
	HOLD_GIT_BARE_CONFIG,	/* the same, where the directory is a git dir */
	HOLD_GITATTRIBUTES,	/* filter / diff / merge drivers */
	HOLD_GITMODULES,	/* update = !command, ext:: and "-" URLs */
	HOLD_VSCODE_TASKS,	/* runOn: folderOpen */
	HOLD_VSCODE_SETTINGS,	/* keys that name executables */
	HOLD_VSCODE_WORKSPACE,	/* *.code-workspace: both of the above */
};

struct hold_rule {
	const char *glob;	/* no '/': any depth; '**' any components */
	enum hold_check check;
	const char *why;	/* what a host tool would do with it */
	const char *source;	/* where that behaviour is documented */
};

/* The built-in table, terminated by a NULL glob. */
extern const struct hold_rule hold_defaults[];

/* A check's name in a policy ("git-config"); inline, so that the policy's
 * parser (and its fuzzer) need nothing else of this module. */
static const char *const hold_check_names[] = {
	[HOLD_ALWAYS] = "always",
	[HOLD_GIT_CONFIG] = "git-config",
	[HOLD_GIT_BARE_CONFIG] = "git-bare-config",
	[HOLD_GITATTRIBUTES] = "gitattributes",
	[HOLD_GITMODULES] = "gitmodules",
	[HOLD_VSCODE_TASKS] = "vscode-tasks",
	[HOLD_VSCODE_SETTINGS] = "vscode-settings",
	[HOLD_VSCODE_WORKSPACE] = "vscode-workspace",
};

static inline int hold_check_parse(const char *name, enum hold_check *check)
{
	for (size_t i = 0; i < sizeof(hold_check_names) / sizeof(hold_check_names[0]); i++)
		if (!strcmp(name, hold_check_names[i])) {
			*check = (enum hold_check)i;
			return 0;
		}
	return -1;
}

/* "a/./b/../c" -> "a/c" in place (< 4096 bytes); -1 if it climbs out. */
int path_normalize(char *path);

/* Shell-like glob over '/'-separated paths, as the table uses them. */
bool hold_glob_match(const char *glob, const char *path);

/*
 * hold_formats.c: git's config syntax, one key at a time: fn(arg, item)
 * with section and name lower-cased, subsection as written (NULL if
 * none), value unquoted (NULL for a bare boolean).  -EINVAL (and *errline)
 * where git would stop; a negative return of fn stops it too.
 */
struct gitcfg_item {
	const char *sec, *sub, *name, *value;
};

int gitcfg_parse(const char *data, size_t len,
		 int (*fn)(void *arg, const struct gitcfg_item *it), void *arg,
		 int *errline);

/* Whether git runs what the item's value names (core.fsmonitor, alias.*, ...). */
bool gitcfg_key_runs(const struct gitcfg_item *it);

/*
 * The risky items content holds under check: "core.fsmonitor = x" and
 * the like, one string each, NUL-separated in *found (malloc'd; *nfound
 * items).  Content that cannot be read as its format is itself one item.
 */
int hold_findings(enum hold_check check, const char *data, size_t len,
		  char **found, size_t *nfound);

struct hold_ctx;

/*
 * The table for one export: the built-in rules, the policy's, and the
 * git configs the lower's .git/config includes (checked like it).
 */
int hold_ctx_new(struct hold_ctx **out, const struct corral_policy *p,
		 const struct layers *l, struct corral_err *err);
void hold_ctx_free(struct hold_ctx *h);

/*
 * Whether change c must be held back, and why (a sentence in why).  data
 * is the new content the decision was made on (malloc'd, or NULL when
 * no rule looked at content): the caller writes exactly those bytes.
 */
int hold_decide(struct hold_ctx *h, const struct layers *l,
		const struct change *c, char *why, size_t whylen,
		char **data, size_t *len);

/* ---- patch.c, linediff.c --------------------------------------------- */

/*
 * Myers' O(ND) difference of two sequences: del[i] for each a[i] that
 * goes, ins[j] for each b[j] that comes.  Past a cost bound it gives a
 * correct but longer script rather than take quadratic time.
 */
int linediff(const uint32_t *a, size_t na, const uint32_t *b, size_t nb,
	     bool *del, bool *ins);

/*
 * A patch as it is written: whole in memory, or (sink) written out to fd
 * each PB_FLUSH bytes, so that a patch as large as the sandbox's disk is
 * never held whole (a 387 MB patch took 759 MB of the daemon).
 */
#define PB_FLUSH	(1u << 20)

struct patch_buf {
	char *data;
	size_t len, cap;
	bool failed;		/* out of memory: the buffer is incomplete */
	bool sink;		/* written to fd as it grows */
	int fd;
	int werr;		/* sink: the write's errno that failed it */
	uint64_t flushed;	/* sink: bytes written to fd so far */
	struct patch_stream *zs;	/* patch_file_src's slice and zlib state,
					   made once for every file: pb_done */
	int (*stop)(void *arg);		/* sink: asked before each write */
	void *stop_arg;
	int stopped;			/* what stop said: the sink failed */
};

/* What pb holds besides its data, freed (the data stays the caller's). */
void pb_done(struct patch_buf *pb);

/* sink: what is still buffered, written out; false (and failed) if not */
bool pb_flush(struct patch_buf *pb);

void pb_add(struct patch_buf *pb, const char *s, size_t n);
void pb_printf(struct patch_buf *pb, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * What a file's patch may cost.  The sandbox decides how large and how
 * many-lined its files are; a line diff holds both sides whole and tens
 * of bytes a line (a 64 MiB file of 2-byte lines took 3 GB).  Past
 * PATCH_TEXT_MAX bytes on either side a file's patch is a whole-file
 * "GIT binary patch" (git does so past core.bigFileThreshold) made a
 * PATCH_SLICE at a time, never held whole, as is a binary file (git's
 * test: a NUL in its first 8000 bytes) of any size; past
 * PATCH_TEXT_LINES lines of both sides together a text is written as
 * binary too (from memory: it is under PATCH_TEXT_MAX).
 */
#define PATCH_TEXT_MAX		(8u << 20)
#define PATCH_TEXT_LINES	(1u << 20)
#define PATCH_SLICE		(256u << 10)

/*
 * One file's git patch: old (NULL: absent) to new (NULL: absent), with
 * the git modes (0100644, 0100755, 0120000).  Binary content becomes a
 * "GIT binary patch"; text a unified diff with 3 lines of context.
 * The sides are in memory: at most PATCH_TEXT_MAX bytes each.
 */
int patch_file(struct patch_buf *pb, const char *path,
	       const char *old, size_t oldlen, unsigned int oldmode,
	       const char *new, size_t newlen, unsigned int newmode);

/* A side of any size: bytes in memory (data), or len bytes of a file (fd). */
struct patch_src {
	const char *data;
	int fd;
	uint64_t len;
};

/*
 * The same, as a whole-file binary patch, each side read a PATCH_SLICE at
 * a time (twice: its blob id, then its literal); -ESTALE if a file shrank
 * meanwhile.  Memory: a slice and zlib's state, whatever the sizes.
 */
int patch_file_src(struct patch_buf *pb, const char *path,
		   const struct patch_src *old, unsigned int oldmode,
		   const struct patch_src *new, unsigned int newmode);
/* The git blob id of data, as 40 hex digits. */
void git_blob_id(const char *data, size_t len, char hex[41]);
/* Whether a patch can carry path: git apply refuses anything in .git. */
bool patch_path_ok(const char *path);
/* Whether a path component of n bytes is a name some filesystem takes for ".git". */
bool git_dir_alias(const char *name, size_t n);

/* ---- export.c ------------------------------------------------------- */

/* What the workspace held when the sandbox started: for --apply conflicts. */
struct baseline;

int baseline_take(int dirfd, const struct export_limits *lim,
		  struct baseline **out, struct corral_err *err);
void baseline_free(struct baseline *b);
/*
 * What an apply wrote (export_req.wrote's records) into the baseline, so
 * that the next apply does not take the apply's own writes for the host's.
 * -EFBIG when the record outgrows lim's max_files (then drop it: apply
 * can no longer tell conflicts); a record it cannot read is -EINVAL, and
 * that path keeps its old entry (a conflict, never an overwrite).
 */
int baseline_update(struct baseline *b, const json_t *records,
		    const struct export_limits *lim, struct corral_err *err);

/* A test's hook: called before each source file is opened for a write. */
typedef void (*export_fault_fn)(void *arg, const char *path);

struct export_req {
	const struct corral_policy *p;
	struct layers layers;
	const char *to;			/* a new directory */
	int apply_fd;			/* the original workspace, or -1 */
	const struct baseline *base;	/* with apply_fd */
	const char *patch;		/* a file for the git patch */
	struct patch_buf *patch_out;	/* or the patch into this buffer */
	bool patch_sink;		/* or written to patch_fd as it is made */
	int patch_fd;
	bool to_opened;			/* to: made and opened by the caller */
	int to_fd;			/* to_opened: that directory */
	/*
	 * to or patch: the directory it goes in, opened before the sandbox
	 * ran, and its last name (made beneath that fd); NULL: by its path.
	 */
	int dest_dir;
	const char *dest_name;
	const char *only;		/* changes at or below this path, or NULL */
	char *const *allow_risky;
	size_t nallow_risky;
	struct events *ev;		/* export.* events, or NULL */
	json_t *events_out;		/* without ev: {type, data} each, for the
					   caller to emit (a forked worker's) */
	json_t *wrote;			/* apply: a record of each entry written
					   appended here (baseline_update), or NULL */
	bool journal;			/* with wrote: each record also written, as a
					   line of JSON, to journal_fd at once (a
					   worker killed midway leaves them there) */
	int journal_fd;
	export_fault_fn fault;
	export_fault_fn after_write;	/* a test's: renamed, not yet recorded */
	void *fault_arg;
	/*
	 * The caller's: a signal's number ends the export, 0 lets it on (NULL:
	 * never).  Asked between changes and between a patch's slices; it
	 * must keep saying so once it has.
	 */
	int (*stop)(void *arg);
	void *stop_arg;
};

/*
 * Export, apply and/or write a patch, as asked.  *report is a JSON
 * object {changes, exported, held, conflicts}: held and conflicting
 * changes are not errors.  An error (a limit, a destination that exists)
 * is -errno with err set, and *report still says what was done.
 */
int export_run(const struct export_req *r, json_t **report,
	       struct corral_err *err);

/* Limits from the policy (its defaults when it sets none). */
void export_limits_of(const struct corral_policy *p, struct export_limits *lim);

/*
 * The directory path names (flag names it in messages), opened O_PATH
 * with its symlinks followed but for one in a --rw bind of p's, where the
 * sandbox writes: -EPERM.  The fd, or -errno with err set.
 */
/* The directories p's --rw binds share, in *ids (malloc'd): corral_box_rw_dirs. */
int export_rw_dirs(const struct corral_policy *p, struct corral_dir_id **ids,
		   size_t *n, struct corral_err *err);
int export_dest_open(const struct corral_policy *p, const char *flag, const char *path,
		     struct corral_err *err);
/*
 * export_dest_open of the directory a new entry at path goes in, and
 * that entry's last name in *name (malloc'd; dir: path names a directory,
 * and may end in '/').
 */
int export_dest_parent(const struct corral_policy *p, const char *flag, const char *path,
		       bool dir, char **name, struct corral_err *err);
/*
 * In a process forked to write on the host: take uid's fs uid, gid's fs
 * gid and uid's groups (as root), so that each write is one that user
 * could make (a directory it cannot write stops it, as it would stop
 * them); as anyone else, only check that uid is us.  A sentence in msg.
 */
int export_become(uid_t uid, gid_t gid, char *msg, size_t len);
#define EXPORT_ANSWER_MAX	(64u << 20)	/* a writer's JSON answer */
/*
 * A writer's answer ({"code", "msg", ...} as JSON on rd), read to its end
 * and the writer reaped; stop (or NULL), asked every 100 ms, names a
 * signal to send it on.  0 or -errno from "code", err from "msg"; *answer
 * the whole object, or NULL.  who names the writer in messages.
 */
int export_writer_wait(pid_t pid, int rd, const char *who, int (*stop)(void *arg),
		       void *stop_arg, json_t **answer, struct corral_err *err);
/* The new directory name beneath dir (0700), opened; path, as flag, in messages. */
int export_new_dir(int dir, const char *name, const char *flag, const char *path,
		   struct corral_err *err);

/*
 * corral_run's export: before the sandbox starts, the workspace is opened
 * (and, for --apply, recorded); after the command ends, the export runs
 * on the upper layer init sent, and the result carries its report.
 */
struct run_export {
	int lower;
	struct baseline *base;
	int dest_dir;			/* --export-to's or --patch's directory */
	char *dest_name;		/* and its last name there */
	/*
	 * As root: the owner of the directory the export writes in (the
	 * workspace; --export-to's or --patch's directory), when not root,
	 * whose fs ids a helper takes to write it (export_become).
	 */
	bool as_owner;
	uid_t uid;
	gid_t gid;
};

int run_export_prepare(struct run_export *x, const struct corral_policy *p,
		       const struct corral_export_opts *o, struct corral_err *err);
/* stop, stop_arg: as export_req's (a signal to corral run ends it) */
void run_export_finish(struct run_export *x, const struct corral_policy *p,
		       const struct corral_export_opts *o, int upperfd,
		       struct events *ev, int (*stop)(void *arg), void *stop_arg,
		       struct corral_result *res);
void run_export_free(struct run_export *x);

#endif
