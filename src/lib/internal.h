/*
 * internal.h - interfaces between the library's modules.  Not installed.
 */
#ifndef CORRAL_INTERNAL_H
#define CORRAL_INTERNAL_H

#include "corral.h"

#include <stdarg.h>

#define CORRAL_AGENT_UID 1000
#define CORRAL_AGENT_GID 1000

/* err.c, beside corral_set_err(): prefix a message, "what: <old msg>". */
int corral_wrap_err(struct corral_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

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

struct sock_filter;

/* What a compiled filter holds, for corral doctor and the tests. */
struct sc_summary {
	unsigned rules;		/* libseccomp rules, and the ceiling */
	unsigned unresolved;	/* table names known neither to libseccomp nor numbers[] */
	int highest;		/* highest syscall number the table knows; -1: none here */
	const char *arch;	/* "x86_64" */
};

/*
 * Load the filter into the calling thread (sets no_new_privs).  notify_fd
 * non-NULL: denials notify the holder of *notify_fd (USER_NOTIF) where the
 * kernel and libseccomp can; *notify_fd is -1 where they cannot.  p decides
 * what depends on the policy (ICMP echo sockets with a network).
 */
int sc_apply(const struct corral_policy *p, int *notify_fd, struct corral_err *err);
/* The BPF program sc_apply loads, malloc'd; sum may be NULL. */
int sc_program(const struct corral_policy *p, bool notify, struct sock_filter **prog,
	       size_t *len, struct sc_summary *sum, struct corral_err *err);
bool sc_available(void);
bool sc_notify_available(void);
/* For corral doctor: seccomp, seccomp_notify, seccomp_rules, seccomp_highest. */
void sc_probe(struct corral_features *f);
/* A syscall's name, from libseccomp or the table's numbers, or "syscall N". */
const char *sc_name(uint32_t arch, int nr, char *buf, size_t len);
/* Why the filter denies syscall nr, and the errno the caller gets, for events. */
const char *sc_deny_why(int nr);
int sc_deny_errno(int nr);
/* libseccomp's number for name on arch, else the table's; __NR_SCMP_ERROR. */
int sc_resolve(uint32_t arch, const char *name);
/* The highest number the table knows on arch (an SCMP_ARCH_*); -1: none. */
int sc_highest(uint32_t arch);
/* The tables, for tests/unit_seccomp.c. */
size_t sc_table_len(void);
const char *sc_table_name(size_t i);
size_t sc_numbers_len(void);
const char *sc_number(size_t i, int *nr, uint32_t *arch);

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
