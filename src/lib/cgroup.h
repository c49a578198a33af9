/*
 * cgroup.h - limits, freezing and killing for a sandbox: cgroup v2,
 * cgroup v1 (legacy and hybrid hosts), or rlimits where no cgroup can be
 * made.  One interface; a manager a kind behind it (cgroup_v1.c,
 * cgroup_v2.c, cgroup_none.c), chosen once per group by cg_create().
 */
#ifndef CORRAL_CGROUP_H
#define CORRAL_CGROUP_H

#include "corral.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct event_base;

enum cg_mode { CG_NONE, CG_V1, CG_V2 };

struct cg_stats {
	uint64_t cpu_ns;		/* CPU time of the whole tree */
	uint64_t mem_peak;		/* bytes, 0 if unknown */
	uint64_t mem_current;		/* bytes in use now */
	uint64_t oom_kills;		/* OOM kills inside the group */
	uint64_t pids_max_hits;		/* forks refused by pids.max */
	uint64_t throttled;		/* CPU periods throttled by the quota */
	/*
	 * Where forks were refused: the pids.max of the parent all sandboxes
	 * share (cg_pids_share), 0 for none.  v1 counts a fork that parent
	 * refused in the forker's own group, as if its own limit had.
	 */
	uint64_t pids_share;
	uint64_t mem_share;		/* the same for memory: cg_memory_share */
	/*
	 * v1's TCP buffers (cgroup_v1.c): the group's own limit (0: none)
	 * and the most its sockets held.  Since 6.16 the kernel counts no
	 * refused charge of theirs (kmem.tcp.failcnt stays 0), and a charge
	 * it may not refuse goes past the limit: the peak is what tells.
	 */
	uint64_t tcp_limit, tcp_peak;
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
/*
 * CG_LATER: nothing planned or made yet: cg_make() reads the host's
 * hierarchies and makes the directories and limits, so that a caller can
 * do it while the sandbox's first process builds its mounts (the plan
 * alone was a third of a millisecond before the clone, issue 17).  Until
 * then cg_mode() is CG_NONE.  *p must live until then.
 */
#define CG_LATER	2u
/*
 * CG_LIMITS_ONLY: on v1, only the hierarchies that *p's limits use, and
 * cpuacct: memory and pids, cpu when it sets cpus; no freezer.  Every v1
 * hierarchy a sandbox joins costs the host CPU at each start and end (a
 * directory, a move, a removal, each under the kernel's one cgroup lock).
 * For a one-shot run that never freezes (no abort criteria: init's death
 * ends its whole pid namespace).  cpuacct stays: a killed run's CPU time
 * is in no rusage (init's dying reap of the others adds nothing to its
 * own).  No effect on v2: there the controllers share one directory.
 */
#define CG_LIMITS_ONLY	4u
int cg_create(struct cg **out, const char *name, const struct corral_policy *p,
	      unsigned int flags, struct corral_err *err);
/* Plan and make what cg_create(CG_LATER) named; 0 at once for any other. */
int cg_make(struct cg *cg, struct corral_err *err);
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
/* Set *p's limits again on a live group (an OCI `update`); CG_NONE: -ENOTSUP. */
int cg_set_limits(struct cg *cg, const struct corral_policy *p,
		  struct corral_err *err);
/*
 * The host pids in the group's tree, the first max of them in pids; the
 * count found (may exceed max), or a negative errno (-ENOTSUP: no group).
 */
ssize_t cg_pids(struct cg *cg, pid_t *pids, size_t max);
enum cg_mode cg_mode(const struct cg *cg);
const char *cg_mode_name(const struct cg *cg);	/* "cgroup v2" / "cgroup v1" / "rlimit" */
/* Move pid into the group (every hierarchy). */
int cg_attach(struct cg *cg, pid_t pid, struct corral_err *err);
/*
 * The same without waiting on base's loop (cgroup_move.c): a helper
 * process writes, and done(arg, r, msg) runs on the loop once it has (r
 * 0, or a negative errno and msg the sentence; the process is SIGKILLed
 * then, before done runs, by a pidfd: a dup of pidfd, which the caller
 * took when pid was surely the process, or, -1, one opened now for the
 * caller's own child).  Returns 1 when started (*out the move, until done
 * runs or cg_move_cancel), 0 when nothing was to be written or it was
 * written here and now (no cgroup, another loop), or a negative errno
 * with err set: then done never runs, and the process was SIGKILLed (by
 * pidfd, else by pid: the caller's child).
 * Cancel a move before cg_destroy() of its group.
 */
struct cg_move;
typedef void (*cg_move_fn)(void *arg, int r, const char *msg);
int cg_move_start(struct event_base *base, struct cg *cg, pid_t pid,
		  int pidfd, cg_move_fn done, void *arg, struct cg_move **out,
		  struct corral_err *err);
/*
 * cg_try_remove() without waiting on base's loop: the same helper, in the
 * same queue, rmdirs the group's dirs, and done(arg, r, msg) runs on the
 * loop (r 0: removed, every dir forgotten; -EBUSY: still in use).
 * Returns 1 when started (*out, until done runs or cg_move_cancel), else
 * what cg_try_remove() returned, here and now (no cgroup, another loop, no
 * helper).  Cancel it before cg_destroy() of the group.
 */
int cg_remove_start(struct event_base *base, struct cg *cg, cg_move_fn done,
		    void *arg, struct cg_move **out);
/* A new owner for a move under way (a call takes the spare's). */
void cg_move_retarget(struct cg_move *m, cg_move_fn done, void *arg);
/* done will not run; the helper may still write.  NULL is fine. */
void cg_move_cancel(struct cg_move *m);
/*
 * End the helper (the daemon's last box went, and with it every move's
 * owner): its watch would keep the loop from ending.
 */
void cg_mover_stop(void);
/*
 * Where a process can move itself in more cheaply than cg_attach() moves
 * it (cgroup v1, as root: no RCU grace period), one fd a hierarchy, at
 * most max, for it to pass to cg_enter(): the count, or -ENOTSUP (use
 * cg_attach()), or another negative errno with err set.
 */
int cg_entry_fds(struct cg *cg, int *fds, size_t max, struct corral_err *err);
/*
 * In the process to be moved, single-threaded: itself into the group
 * whose cg_entry_fds() these are; closes them.  No allocation.
 */
int cg_enter(int *fds, size_t n, struct corral_err *err);
int cg_stats(struct cg *cg, struct cg_stats *st);
/*
 * Open the files of the counters in want (CG_ST_*) now, and keep them:
 * every later read of one reads it again with pread, no open or close
 * (each was an open, a read and a close, in line at the end of a run:
 * issue 17); one not in want is opened when first read, and kept.  For
 * `corral run`'s one group, all of them, while its sandbox starts, and a
 * daemon's foreground call's, those its result reads, while it runs; a
 * daemon's many idle groups do not hold five fds each.  Closed by
 * cg_drop_counters() or cg_destroy().
 */
void cg_keep_counters(struct cg *cg, unsigned want);
void cg_drop_counters(struct cg *cg);
/*
 * The host's processes are one pool that no namespace divides: a root
 * parent that corral makes gets pids.max of half of kernel.pid_max or
 * kernel.threads-max, whichever is smaller (cg_host_pids_share, 0 when
 * /proc does not say).  cg_pids_share: the pids.max of cg's top parent
 * (<mount>/corral or corral.<uid>), 0 for "max" or none.
 */
uint64_t cg_host_pids_share(void);
uint64_t cg_pids_share(struct cg *cg);
/* That pids.max, unless the parent's pids.peak says it was never reached. */
uint64_t cg_pids_share_met(struct cg *cg);
/*
 * The same for memory: a parent corral makes gets three quarters of the
 * host's memory as its limit (cg_host_memory_share); cg_memory_share reads
 * the top parent's limit, 0 for none.
 */
uint64_t cg_host_memory_share(void);
uint64_t cg_memory_share(struct cg *cg);
/* That limit, where it has ever refused a charge (v1); 0 where it never has. */
uint64_t cg_memory_share_met(struct cg *cg);
/*
 * And for TCP buffers on v1, which memory's limit does not count: a v1
 * parent corral makes gets half of net.ipv4.tcp_mem's hard limit as its
 * memory.kmem.tcp limit (cg_host_tcp_share, 0 when /proc does not say);
 * cg_tcp_share reads the top parent's, 0 for none or not v1.
 */
uint64_t cg_host_tcp_share(void);
uint64_t cg_tcp_share(struct cg *cg);
/*
 * The most all sandboxes' sockets held together since the top parent was
 * made (its kmem.tcp peak), 0 for none or not v1: the one trace of the
 * share having been met, which no sandbox's own counters show.
 */
uint64_t cg_tcp_share_peak(struct cg *cg);
/* " (or all sandboxes together ... N)" for a reason, where st has one; else "" */
#define CG_SHARE_SAID	96
const char *cg_pids_share_said(const struct cg_stats *st, char buf[CG_SHARE_SAID]);
const char *cg_memory_share_said(const struct cg_stats *st, char buf[CG_SHARE_SAID]);
/* Whether cg_stats() counts the tree's CPU time (cpu_ns); else it is 0. */
bool cg_counts_cpu(struct cg *cg);
/*
 * The CPU time of the sandbox whose init is host pid init: the group's
 * counter where it has one, else the sum over init's process tree in
 * /proc (proc_tree_cpu_ns).  0, or a negative errno when neither can say.
 */
int cg_cpu_ns(struct cg *cg, pid_t init, uint64_t *ns);
/* That sum (proctree.c), for when no cgroup counts CPU. */
int proc_tree_cpu_ns(pid_t root, uint64_t *ns);
/*
 * The counters of want only (CG_ST_*), a file or two each: a call reads
 * what its result reports, at its start and its end, on the daemon's loop.
 * The others stay 0; valid says whether those asked for could be read.
 */
#define CG_ST_CPU	(1u << 0)	/* cpu_ns */
#define CG_ST_MEM_PEAK	(1u << 1)
#define CG_ST_MEM_NOW	(1u << 2)	/* mem_current */
#define CG_ST_OOM	(1u << 3)
#define CG_ST_PIDS	(1u << 4)	/* pids_max_hits */
#define CG_ST_THROTTLED	(1u << 5)
#define CG_ST_TCP	(1u << 6)	/* tcp_limit, tcp_peak */
#define CG_ST_ALL	0x7fu
/* what a call's verdict compares, before and after (call_hits) */
#define CG_ST_HITS	(CG_ST_OOM | CG_ST_PIDS | CG_ST_THROTTLED)
int cg_stats_some(struct cg *cg, unsigned want, struct cg_stats *st);
/*
 * Whether the group's sockets met its TCP limit since it was made, or
 * since the last cg_tcp_rearm().  The kernel slows a connection whose
 * buffers it refuses, and kills nothing.
 */
bool cg_tcp_reached(const struct cg_stats *st);
const char *cg_tcp_said(const struct cg_stats *st, char *buf, size_t len);
/*
 * Start the TCP peak again from what the sockets hold now: a box's
 * calls each say what met the limit after the last one did.  v1 only.
 */
void cg_tcp_rearm(struct cg *cg);
/*
 * The same for memory: v1 counts a child's OOM kill in the victim's
 * group alone, and the box's peak at its limit is what tells that its
 * limit bit below it (call.c's box_bit), once, until this.  v1 only.
 */
void cg_mem_rearm(struct cg *cg);
/*
 * An eventfd (nonblocking, close-on-exec) that counts the OOM killer's
 * calls for the group's memory limit, whichever group below it the
 * victim is in, each signalled before its kill is counted.  v1 only
 * (-EOPNOTSUPP elsewhere; v2's memory.events counts the kills below).
 */
int cg_oom_events_open(struct cg *cg, struct corral_err *err);

/*
 * Freeze (or thaw) and wait until the kernel says it is done: polls, up
 * to 2 s.  Only where nothing else waits on the caller: `corral run`,
 * whose loop serves its one sandbox, and a halt there must hold the tree
 * before it records the evidence.  The daemon uses cg_freeze_start().
 */
int cg_freeze(struct cg *cg, bool frozen, struct corral_err *err);
/*
 * Freeze without waiting.  1: frozen now; 0: under way, and done(arg, r,
 * err) follows from base's loop (r 0 frozen, or -ETIMEDOUT after 2 s with
 * the group thawed again, err saying why); a negative errno: not started
 * (no freezer, err says why).  A later cg_freeze_start, cg_thaw,
 * cg_kill_start or cg_destroy replaces a freeze under way: its done is
 * not called.
 */
typedef void (*cg_frozen_fn)(void *arg, int r, const struct corral_err *err);
int cg_freeze_start(struct cg *cg, struct event_base *base, cg_frozen_fn done,
		    void *arg, struct corral_err *err);
/*
 * Thaw now (a freeze under way is dropped).  Never waits: the kernel
 * thaws in the write itself, and one read confirms it.
 */
int cg_thaw(struct cg *cg, struct corral_err *err);
/* Kill every process in the group (v2: cgroup.kill; v1: freeze, SIGKILL, thaw). */
int cg_kill(struct cg *cg);
/*
 * The same without waiting: cgroup.kill where there is one; else the
 * freeze, the SIGKILLs, the thaw and the rounds for stragglers run on
 * base's loop (at once when the group is already frozen).
 */
int cg_kill_start(struct cg *cg, struct event_base *base);
/*
 * The same in a helper process (cgroup_reap.c), for a tree whose init
 * has its SIGKILL already (no freeze: its pid namespace gives no new
 * pids): cgroup.kill where there is one, else rounds of SIGKILLs off
 * base's loop, which goes on; the group and its handle stay the
 * caller's.  Without memory or a fork, cg_kill_start.
 */
int cg_kill_async(struct cg *cg, struct event_base *base);
/*
 * A teardown's first half, for a group handed to cg_destroy_async next:
 * nothing of the tree may run once this returns, and no walk of its
 * groups is made here.  cgroup.kill where there is one (0: killed); else
 * the freeze requested, one write (1: the tree is stopping, left FROZEN:
 * cg_destroy_async's helper SIGKILLs each and thaws; a thaw before that
 * would let it run again); without a freezer, cg_kill_start (0).
 */
int cg_kill_begin(struct cg *cg, struct event_base *base);
/*
 * v1: an empty group "corral-<name>" held FROZEN, in the freezer hierarchy
 * only, so that no sandbox's freeze or thaw is the host's first or last
 * (cgroup.c says why that costs 5-30 ms).  *out NULL where there is no v1
 * freezer: not an error.  Released with cg_destroy.
 */
int cg_freezer_hold(struct cg **out, const char *name, struct corral_err *err);
/* Kill what is left, wait (bounded) until empty, rmdir, free.  NULL is fine. */
void cg_destroy(struct cg *cg);
/*
 * cg_destroy each of cgs[0..n) (NULLs skipped) in a helper process, so
 * that base's loop goes on; the handles are freed once the helper ends.
 * The helper first kills what is in each group, the last first: a parent
 * listed after its children (a box after its calls' groups) kills their
 * processes too, and thaws a tree cg_kill_begin left frozen.  Without a
 * loop, memory or a fork: here and now.  cgs itself is the caller's again
 * on return.
 */
void cg_destroy_async(struct event_base *base, struct cg **cgs, size_t n);
/*
 * Remove the groups of supervisors that died without cleaning up (SIGKILL):
 * "corral-<pid>-*" whose pid no longer exists.  Returns how many.
 */
int cg_cleanup_stale(void);
/*
 * The same for the sandboxes' groups only, read from the first
 * hierarchy: one directory, not one a hierarchy, for a one-shot run to
 * read at every start (in a burst of N runs each reads N entries).  A
 * daemon's freezer hold, in the freezer alone, waits for the next
 * cg_cleanup_stale() (a daemon's start, a container's create).
 */
int cg_cleanup_stale_groups(void);
/* Remove every "corral-<pid>-*" group, that supervisor being known dead. */
int cg_cleanup_owner(pid_t pid);
/* In the child, when cg_mode() == CG_NONE: RLIMIT_DATA and RLIMIT_NPROC. */
int cg_apply_rlimits(const struct corral_policy *p, struct corral_err *err);
/* For corral doctor: what cg_create would get, and a sentence about it. */
void cg_probe(struct corral_features *f);

/* ---- /proc/PID/cgroup (cgroup_proc.c) ---------------------------------- */

/* One line, "hierarchy-ID:controller-list:path"; v2's is "0::path". */
struct cg_proc_entry {
	unsigned hier;		/* 0: the cgroup2 tree */
	const char *ctrls;	/* "memory", "cpu,cpuacct", "name=systemd", "" */
	const char *path;	/* from the root of the reader's cgroup namespace */
};

#define CG_PROC_MAX	32

struct cg_proc {
	size_t n;
	struct cg_proc_entry e[CG_PROC_MAX];
	char buf[4096];
};

/*
 * Parse the text of a /proc/PID/cgroup file into *out (which keeps a copy;
 * the entries point into it).  Lines that are not "N:ctrls:/path" are
 * skipped, as is a last line cut short.  0, or -EINVAL with no entry.
 */
int cg_proc_parse(struct cg_proc *out, const char *text, size_t len);
/* Read and parse /proc/<pid>/cgroup (pid 0: self).  0 or a negative errno. */
int cg_proc_read(struct cg_proc *out, pid_t pid);
/* The path in the cgroup2 tree ("0::"), or NULL. */
const char *cg_proc_v2_path(const struct cg_proc *p);
/* The last component of path ("corral-c3" of "/corral/corral-b/corral-c3"). */
const char *cg_path_leaf(const char *path);
/*
 * The last component of the process's corral group: of the first path
 * that ends in "corral-...", else of the cgroup2 path, else of the first
 * line's ("" for a process in no group of its own).
 */
const char *cg_proc_group(const struct cg_proc *p);

#endif
