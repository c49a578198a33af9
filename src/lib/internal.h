/*
 * internal.h - interfaces between the library's modules.  Not installed.
 */
#ifndef CORRAL_INTERNAL_H
#define CORRAL_INTERNAL_H

#include "corral.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>

#define CORRAL_AGENT_UID 1000
#define CORRAL_AGENT_GID 1000

/* err.c: fill err, return code (a negative errno). */
int corral_set_err(struct corral_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Prefix an existing message: "what: <old msg>". */
int corral_wrap_err(struct corral_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * ---- cleanup by attribute, as bubblewrap and crun do -------------------
 * cleanup_close int fd = -1;  cleanup_free char *s = NULL;  released when
 * the variable goes out of scope, on every return.  steal_fd/steal_pointer
 * hand ownership on and leave -1/NULL behind, so nothing is released twice.
 */
static inline void cleanup_closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;	/* a cleanup must not change the error */

		close(*fd);
		errno = saved;
	}
	*fd = -1;
}

static inline void cleanup_freep(void *p)
{
	free(*(void **)p);
}

#define cleanup_close __attribute__((cleanup(cleanup_closep)))
#define cleanup_free __attribute__((cleanup(cleanup_freep)))

static inline int steal_fd(int *fd)
{
	int r = *fd;

	*fd = -1;
	return r;
}

#define steal_pointer(pp) \
	({ __typeof__(*(pp)) stolen_ = *(pp); *(pp) = NULL; stolen_; })

/* ---- cgroup.c: limits on cgroup v2, v1 (hybrid hosts), or rlimits ---- */

enum cg_mode { CG_NONE, CG_V1, CG_V2 };

struct cg_stats {
	uint64_t cpu_ns;		/* CPU time of the whole tree */
	uint64_t mem_peak;		/* bytes, 0 if unknown */
	uint64_t mem_current;		/* bytes in use now */
	uint64_t oom_kills;		/* OOM kills inside the group */
	uint64_t pids_max_hits;		/* forks refused by pids.max */
	uint64_t throttled;		/* CPU periods throttled by the quota */
	bool valid;
};

struct cg;	/* one sandbox's cgroup, in every hierarchy it uses */

/*
 * Create a fresh cgroup named "corral-<name>" for one sandbox and set the
 * limits of *p in it.  If the caller may not create cgroups (unprivileged,
 * nothing delegated), *out is a CG_NONE handle and the limits must be
 * applied with cg_apply_rlimits() in the child; that is not an error.
 * A cgroup that exists but rejects a limit is an error.
 */
/*
 * CG_V2_ID: on a hybrid host, also a controller-less directory in the
 * cgroup2 tree, whose id sockets record (cg_id); for sandboxes whose calls
 * must be told apart (box.c), not for a one-shot run.
 */
#define CG_V2_ID	1u
int cg_create(struct cg **out, const char *name, const struct corral_policy *p,
	      unsigned int flags, struct corral_err *err);
/*
 * A group "corral-<name>" below parent, in each of its hierarchies, with
 * no limits of its own (the parent's apply): one tool call, so that what
 * it starts stays attributed to it.  CG_NONE parent: a CG_NONE handle.
 */
int cg_create_child(struct cg *parent, const char *name, struct cg **out,
		    struct corral_err *err);
/*
 * The group's id in the cgroup2 tree (what sockets record of their maker),
 * or 0 where it has none there.
 */
uint64_t cg_id(struct cg *cg);
/*
 * Remove the group if nobody is in it: one rmdir a hierarchy, no scan.
 * -EBUSY (and the group kept) while a process is in it.
 */
int cg_try_remove(struct cg *cg);
/* Processes in the group's tree (negative errno, -ENOTSUP without one). */
ssize_t cg_nprocs(struct cg *cg);
enum cg_mode cg_mode(const struct cg *cg);
const char *cg_mode_name(const struct cg *cg);	/* "cgroup v2" / "cgroup v1" / "rlimit" */
/* Move pid into the group (every hierarchy). */
int cg_attach(struct cg *cg, pid_t pid, struct corral_err *err);
int cg_stats(struct cg *cg, struct cg_stats *st);
int cg_freeze(struct cg *cg, bool frozen, struct corral_err *err);
/* Kill every process in the group (v2: cgroup.kill; v1: freeze, SIGKILL, thaw). */
int cg_kill(struct cg *cg);
/* Kill what is left, wait (bounded) until empty, rmdir, free.  NULL is fine. */
void cg_destroy(struct cg *cg);
/*
 * Remove the groups of supervisors that died without cleaning up (SIGKILL):
 * "corral-<pid>-*" whose pid no longer exists.  Returns how many.
 */
int cg_cleanup_stale(void);
/* Remove every "corral-<pid>-*" group, that supervisor being known dead. */
int cg_cleanup_owner(pid_t pid);
/* In the child, when cg_mode() == CG_NONE: RLIMIT_AS and RLIMIT_NPROC. */
int cg_apply_rlimits(const struct corral_policy *p, struct corral_err *err);
/* For corral doctor: what cg_create would get, and a sentence about it. */
void cg_probe(struct corral_features *f);

/* ---- seccomp.c ------------------------------------------------------- */

/*
 * Load the deny-list filter into the calling thread (after no_new_privs).
 * notify_fd non-NULL: denials notify the holder of *notify_fd (USER_NOTIF)
 * where the kernel and libseccomp can; *notify_fd is -1 where they cannot.
 */
int seccomp_apply(int *notify_fd, struct corral_err *err);
bool seccomp_available(void);
bool seccomp_notify_available(void);
/* Why the table denies syscall nr, for events. */
const char *seccomp_deny_why(int nr);

/* ---- landlock.c ------------------------------------------------------ */

struct ll_rule {
	const char *path;
	bool writable;
};

int landlock_abi(void);		/* 0 if unsupported/disabled */
/*
 * Restrict the calling thread: read/execute everywhere under the given paths,
 * write only where writable; with tcp_ports (ABI >= 4), TCP connect only to
 * those ports.  Returns the ABI used (> 0), 0 if Landlock is
 * not available, or a negative errno.
 */
int landlock_apply(const struct ll_rule *rules, size_t n,
		   const uint16_t *tcp_ports, size_t nports, struct corral_err *err);

#endif
