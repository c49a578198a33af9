/*
 * cgroup_internal.h - what the cgroup files share: the handle, the table
 * every manager fills, the file helpers.  Only src/lib/cgroup*.c see it.
 *
 *   cgroup.c         the common part: choosing a manager (the plan),
 *                    creating, attaching, killing, removing, stale groups
 *   cgroup_v2.c      the unified hierarchy
 *   cgroup_v1.c      one hierarchy a controller (legacy and hybrid hosts)
 *   cgroup_none.c    no cgroup: rlimits in the child, no freezer
 *   cgroup_freeze.c  freezing and killing from the event loop
 *   cgroup_fs.c      reading and writing cgroup files
 *   cgroup_proc.c    /proc/self/mountinfo and /proc/PID/cgroup
 *   cgroup_doctor.c  the sentences of corral doctor
 */
#ifndef CORRAL_CGROUP_INTERNAL_H
#define CORRAL_CGROUP_INTERNAL_H

#include "internal.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum cg_ctrl { C_MEMORY, C_PIDS, C_CPU, C_CPUACCT, C_FREEZER, C_COUNT };

#define C_BIT(c)	(1u << (c))
#define C_REQUIRED	(C_BIT(C_MEMORY) | C_BIT(C_PIDS))

extern const char *const cg_ctrl_name[C_COUNT];

#define CG_PARENT		"corral"
#define CG_PREFIX		"corral-"
#define CG_FREEZE_WAIT_MS	2000
#define CG_KILL_FREEZE_MS	500
#define CG_KILL_ROUNDS		8

#define CG_FALLBACK_SENTENCE \
	"limits fall back to rlimits (memory as RLIMIT_DATA, pids per user)"

/* One hierarchy the sandbox uses: the v2 tree, or one v1 mount. */
struct cg_hier {
	char *mount;		/* where the hierarchy is mounted */
	char *parent;		/* <mount>/corral or <mount>/corral.<uid> */
	char *dir;		/* <parent>/corral-<name>, once we created it */
	unsigned ctrls;		/* C_BIT()s this hierarchy serves */
	bool create_parent;	/* root: parent does not exist yet */
};

struct cg_op;	/* a freeze or kill under way on an event loop */

/* the files a manager's stats() reads, at most (cg_counter_file's slots) */
#define CG_COUNTERS_MAX		8
#define CG_COUNTER_ABSENT	(-2)

struct cg {
	const struct cg_manager *ops;
	bool hybrid;		/* a cgroup2 tree and v1 hierarchies side by side */
	unsigned ctrls;		/* union of the hierarchies' controllers */
	size_t nhier;
	struct cg_hier hier[C_COUNT + 1];	/* + hybrid: the cgroup2 tree */
	struct cg_op *op;	/* at most one; dropped by the next or by destroy */
	bool kept_plan;		/* planned from the plan kept (cg_plan) */
	bool root;		/* planned for euid 0: "<mount>/corral" is ours */
	unsigned skip;		/* v1 controllers not wanted (CG_LIMITS_ONLY) */
	struct {		/* CG_LATER: what cg_make() makes, until then */
		char *name;
		const struct corral_policy *p;
		bool v2_id;
	} later;
	/*
	 * cg_keep_counters(): the stats' files, opened once and read again
	 * with pread (-1: not open yet, CG_COUNTER_ABSENT: not there).
	 */
	bool counters_kept;
	int counter_fd[CG_COUNTERS_MAX];
	uint64_t tcp_limit;	/* v1: the group's own, as the kernel keeps it */
	uint64_t id;		/* cg_id(), once known (0: not yet) */
};

/* What /proc/self/mountinfo says about cgroup filesystems. */
struct cg_mounts {
	char *v2;		/* first cgroup2 mount point */
	char *v2_root;		/* its root inside the hierarchy */
	char *v1[C_COUNT];	/* mount point of each v1 controller */
	/*
	 * Some cgroup mount has favordynmods: the kernel's threadgroup lock
	 * (one for every hierarchy) then lets a move skip its grace period.
	 */
	bool favordynmods;
};

/*
 * A manager: one kind of cgroup setup, as crun's libcrun_cgroup_manager.
 * The common code (cgroup.c) makes and removes the directories; a manager
 * says which, and what goes in their files.
 */
struct cg_manager {
	enum cg_mode mode;
	const char *name;	/* "cgroup v2": results, doctor, errors */
	/*
	 * Choose hierarchies and parents from the mounts, changing nothing:
	 * 1 chosen (cg filled), 0 not usable here (why may say why), <0.
	 */
	int (*plan)(struct cg *cg, const struct cg_mounts *m, uid_t euid,
		    bool v2_id, char *why, size_t len);
	/* Once the parents exist: what they must offer their children. */
	int (*prepare)(struct cg *cg, struct corral_err *err);
	int (*set_limits)(struct cg *cg, const struct corral_policy *p,
			  struct corral_err *err);
	/* Optional: what a new child of a limited group needs (v1's TCP). */
	int (*child)(struct cg *cg, struct corral_err *err);
	int (*attach)(struct cg *cg, pid_t pid, struct corral_err *err);
	/* Optional: fds for a process to move itself in (cg_entry_fds). */
	int (*entry_fds)(struct cg *cg, int *fds, size_t max,
			 struct corral_err *err);
	/* The counters of want (CG_ST_*): only their files are read. */
	int (*stats)(struct cg *cg, unsigned want, struct cg_stats *st);
	/* Ask for the state, no waiting (v1 repeats the request, as runc). */
	int (*freeze_request)(struct cg *cg, bool frozen, struct corral_err *err);
	/* 1: the kernel says the state is reached; 0: not yet; <0: error. */
	int (*freeze_reached)(struct cg *cg, bool frozen, struct corral_err *err);
	/* The kernel kills the whole tree by itself (cgroup.kill). */
	bool (*can_kill)(struct cg *cg);
	int (*kill)(struct cg *cg);
	/* The group's id in the cgroup2 tree, 0 if it has none there. */
	uint64_t (*id)(struct cg *cg);
};

extern const struct cg_manager cg_v2_manager;
extern const struct cg_manager cg_v1_manager;
extern const struct cg_manager cg_none_manager;

/* ---- cgroup.c ----------------------------------------------------------- */

/*
 * Decide the manager and the hierarchies; CG_NONE: why says why.  A plan
 * that found cgroups is kept while the mount table does not change, and
 * handed out again (cg->kept_plan): cg_plan_forget() when what it named
 * turned out to be gone.
 */
int cg_plan(struct cg *cg, char *why, size_t len, bool v2_id,
	    struct corral_err *err);
void cg_plan_forget(void);
void cg_free_hiers(struct cg *cg);
struct cg_hier *cg_hier_of(struct cg *cg, enum cg_ctrl c);
/*
 * The parent for this uid in one hierarchy.  Root: <mount>/corral, existing
 * and writable, or creatable.  Others: <mount>/corral.<uid> or <mount>/corral,
 * whichever exists and is writable first.  -EACCES when there is none.
 */
int cg_pick_parent(const char *mount, uid_t euid, char **parent, bool *create);
int cg_add_hier(struct cg *cg, const char *mount, char *parent, bool create,
		unsigned ctrls);
/*
 * Tests only: where the environment variable var names a FIFO (no API
 * client can set the daemon's environment), wait for a byte on it, or
 * for its last writer to close it, so that a test makes a helper's work
 * slow without a clock.  Opening it blocks until the test opens it too.
 */
void cg_hold_for_test(const char *var);
/*
 * In a helper forked from the daemon (the reaper, the mover): TERM, INT
 * and HUP ignored (the daemon acts on them), CHLD default, nothing
 * blocked: none of libevent's handlers, which write into the daemon's
 * signal pipe.
 */
void cg_helper_signals(void);
/* Write pid into cgroup.procs of every hierarchy. */
int cg_attach_procs(struct cg *cg, pid_t pid, struct corral_err *err);
/* Processes left in the tree, each SIGKILLed if kill; negative errno. */
ssize_t cg_procs_all(struct cg *cg, bool kill);
/* Kill by freezing, SIGKILLing each, thawing, a few rounds (may sleep). */
int cg_kill_rounds(struct cg *cg);
/* cgroup.kill if the kernel has it: 1 if rounds are still to do (cgroup_freeze.c). */
int cg_kill_by_kernel(struct cg *cg);
/* Freeze or thaw, polling until reached or wait_ms (sleeps). */
int cg_freeze_wait(struct cg *cg, bool frozen, unsigned wait_ms,
		   struct corral_err *err);
/* After wait_ms without reaching the state: thaw again, say so (-ETIMEDOUT). */
int cg_freeze_timeout(struct cg *cg, bool frozen, unsigned wait_ms,
		      struct corral_err *err);
/* The freezer's error when there is none, in the words of cg_freeze. */
int cg_no_freezer(struct cg *cg, bool frozen, struct corral_err *err);

/* ---- cgroup_v2.c -------------------------------------------------------- */

/*
 * Unprivileged: may we move our children into a group below parent in the
 * cgroup2 tree (write access to the common ancestor's cgroup.procs)?
 */
bool cg_v2_can_attach(const struct cg_mounts *m, const char *parent);

/* ---- cgroup_freeze.c ---------------------------------------------------- */

/* Drop the freeze or kill under way on cg, if any; its done is not called. */
void cg_op_cancel(struct cg *cg);

/* ---- cgroup_fs.c -------------------------------------------------------- */

void cg_sleep_ms(unsigned ms);
char *cg_path_join(const char *a, const char *b);
/* Append to a NUL-terminated sentence in buf; truncates quietly. */
void cg_appendf(char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int cg_file_path(char *buf, size_t len, const char *dir, const char *file);
bool cg_file_exists(const char *dir, const char *file);
/* false with errno saying why (ENOENT: not there; ENOTDIR; EACCES) */
bool cg_dir_writable(const char *path);
/* Read a small file into buf (NUL-terminated); length or -errno. */
ssize_t cg_read_file(const char *dir, const char *file, char *buf, size_t len);
/* The number that file holds; 0 for none, "max" or unreadable. */
uint64_t cg_read_u64(const char *dir, const char *file);
int cg_write_file(const char *dir, const char *file, const char *val,
		  struct corral_err *err);
int cg_write_u64(const char *dir, const char *file, uint64_t v,
		 struct corral_err *err);
/* The same, and 0 where this kernel has no such file (ENOENT at the open). */
int cg_write_u64_if_there(const char *dir, const char *file, uint64_t v,
			  struct corral_err *err);
/* "key value" lines (cpu.stat, ...): value of key, or -ENOENT. */
int cg_kv_get(const char *buf, const char *key, uint64_t *val);
/*
 * cg_read_file and cg_read_kv for a stats() counter: through the fd kept
 * in slot when the group keeps its counters (cg_keep_counters), else as
 * they are.  A file that is not there reads as cg_read_file's -ENOENT.
 */
ssize_t cg_counter_file(struct cg *cg, size_t slot, const char *dir,
			const char *file, char *buf, size_t len);
int cg_counter_kv(struct cg *cg, size_t slot, const char *dir,
		  const char *file, const char *key, uint64_t *val);
/*
 * One counter into *val (key NULL: the file is the number); a missing
 * file or key leaves it alone.
 */
int cg_read_kv(const char *dir, const char *file, const char *key,
	       uint64_t *val);
/* Words of a cgroup.controllers / cgroup.subtree_control file as C_BIT()s. */
unsigned cg_read_ctrl_list(const char *dir, const char *file);

/* ---- cgroup_proc.c ------------------------------------------------------ */

int cg_mounts_read(struct cg_mounts *m, struct corral_err *err);
/* The same from fd, an open /proc/self/mountinfo, read from its start. */
int cg_mounts_read_fd(struct cg_mounts *m, int fd, struct corral_err *err);
void cg_mounts_free(struct cg_mounts *m);
/* One mountinfo line into m (the first mount of each kind wins). */
int cg_mounts_add_line(struct cg_mounts *m, char *line);

/* ---- cgroup_doctor.c ---------------------------------------------------- */

/* Why no cgroup: the reason so far in why, made a sentence with advice. */
void cg_explain_none(const struct cg_mounts *m, uid_t euid, char *why,
		     size_t len);

#endif
