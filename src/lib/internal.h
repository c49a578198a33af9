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
/* corral's host id range for root's sandboxes (ns.c says why there) */
#define CORRAL_IDS_BASE 0x70000000u
#define CORRAL_IDS_COUNT 65536u
/*
 * right above it, never mapped into a sandbox: the host uids that own
 * root's sandboxes' user namespaces (ns.c: ns_clone_owned)
 */
#define CORRAL_OWNERS_BASE (CORRAL_IDS_BASE + CORRAL_IDS_COUNT)
#define CORRAL_OWNERS_COUNT 65536u
/*
 * ns.c: why the range, or the owners' above it, cannot be used on this
 * host (the host's files name an id in them)
 */
bool ns_range_clashes(char *why, size_t len);

/* err.c, beside corral_set_err(): prefix a message, "what: <old msg>". */
int corral_wrap_err(struct corral_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* quote.c: s[0..n) quoted for a message, at most max bytes; len >= max + 8. */
enum quote_style { QUOTE_JSON, QUOTE_ASCII };
void text_quote(const char *s, size_t n, char *buf, size_t len, size_t max,
		enum quote_style style);

/* shell.c: a simple command line exec'd as /bin/sh (dash) would exec it. */
struct sh_simple {
	char **argv;		/* the command's words, one allocation with them */
	char *cd;		/* "cd DIR && " before it: DIR; else NULL */
	bool err_to_out;	/* " 2>&1" after it */
};
int sh_simple_parse(const char *line, struct sh_simple *s);
void sh_simple_free(struct sh_simple *s);
/* NULL: dash would change envp otherwise; else sandbox_env_free() it */
char **sh_simple_env(char *const *envp, const char *cd, const char **dir);
bool sh_is_dash(void);

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

/* ---- openat2.c ------------------------------------------------------- */

struct open_how;
/*
 * openat2(2), tried again while it says EAGAIN (a mount or rename on the
 * host raced a scoped walk through ".."): an fd, or -1 and errno.  No
 * allocation: a forked child may call it.
 */
int openat2_retry(int dirfd, const char *path, const struct open_how *how);

/* ---- walkup.c ------------------------------------------------------- */

struct stat;
/*
 * Each directory from dir (an fd, left open) up to the root, by "..",
 * dir's own first: visit(st, arg) returning true stops the walk.  1 when
 * it stopped it, 0 at the root, -errno where a level could not be opened
 * or read (-ELOOP past 4096 levels).
 */
int walk_up(int dir, bool (*visit)(const struct stat *st, void *arg), void *arg);
/* mountinfo's octal escapes (\040 a space, \011, \012, \134) undone in place */
void mountinfo_unescape(char *s);
/* path beneath dir opened as procfs's own mount table (not one mounted over) */
FILE *mountinfo_open(int dir, const char *path);
/* each mount beneath the directory dir, its root stat'ed (walkup.c) */
int mounts_beneath(int dir, bool (*visit)(const struct stat *st, void *arg), void *arg);

/* ---- hideview.c: where the sandbox's view shows a hidden path ---- */
struct hide_where {
	const char *mountinfo;		/* the sandbox's mount table */
	const char *proc;		/* a proc where "self" is the caller */
	const char *lower, *lower_view;	/* the workspace's host directory, and where
					   the sandbox sees it (NULL: none) */
	const char *const *unseen;	/* mount points the sandbox will not have */
	size_t nunseen;
	char **roots;			/* the root's layers, where this process
					   opens them (shown at "/") */
	size_t nroots;
};
struct hide_view {
	char *path;			/* the sandbox's path */
	bool same_inode;		/* a bind: it is the hidden inode (*id) itself */
	bool part;			/* a mount there shows part of it */
};
/*
 * Every place the sandbox's mount table shows the object at path, by
 * device and path within its filesystem (path itself among them), and
 * each mount that shows part of a hidden directory (part); the host's
 * inode in *id.  Nothing when path is not there.  Free with
 * hide_views_free.
 */
int hide_views(const struct hide_where *w, const char *path, struct hide_view **out,
	       size_t *nout, struct stat *id, struct corral_err *err);
void hide_views_free(struct hide_view *v, size_t n);
/*
 * canon (absolute) in the root layer at root, as the overlay looks it
 * up, no link followed: 1 there (*fd, O_PATH), 0 not (a lower layer may
 * have it), -1 the overlay stops at this layer (a link, a file or a
 * whiteout on the way, a mount, or an opaque directory above where it
 * is not): no layer at or below it holds it.  proc: where procfs is
 * ("/proc"), through which the layer's xattrs are read.
 */
int layer_open(const char *proc, const char *root, const char *canon, int *fd);

/* ---- cgroup*.c: limits, freezer, kill (cgroup v2, v1, or rlimits) ---- */
#include "cgroup.h"

/* ---- seccomp.c ------------------------------------------------------- */

struct sock_filter;

/* What a compiled filter holds, for corral doctor and the tests. */
struct sc_summary {
	unsigned rules;		/* libseccomp rules, the ceiling, the prefix's blocks */
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
/*
 * sc_apply in two steps: init compiles the filter while the supervisor
 * still writes its id maps and cgroups, and loads it where sc_apply would
 * have (sc_load frees it, loaded or not).
 */
struct sc_compiled {
	const struct sock_filter *prog;
	size_t len;
	bool notify;
	/* a built-in program (not to free); what a fallback compile needs */
	const struct sc_prebuilt *prebuilt;
	const struct corral_policy *p;
	bool want_notify;
};
int sc_compile(const struct corral_policy *p, bool want_notify, struct sc_compiled *f,
	       struct corral_err *err);
int sc_load(struct sc_compiled *f, int *notify_fd, struct corral_err *err);
/* sc_load's error for the kernel's errnum: -errnum, err set */
int sc_load_failed(struct corral_err *err, int errnum, size_t len);
/* Frees what sc_compile made, for a caller that does not sc_load it. */
void sc_discard(struct sc_compiled *f);
/*
 * seccomp_stack.c: eBPF instructions a process inside may still stack of
 * filters of its own (the kernel's 32768 a process, less corral's chain);
 * each is up to 14.2 bytes of the host's one BPF JIT pool.
 */
#define SC_STACK_FREE 1024
/* p's length as the kernel converts it to eBPF, which its bound counts */
size_t sc_ebpf_len(const struct sock_filter *p, size_t n);
/*
 * Fill the chain after corral's filter (own_len converted) to SC_STACK_FREE;
 * outer: a filter was loaded before corral's (of a length unknown here).
 */
int sc_pad_chain(size_t own_len, bool outer, struct corral_err *err);
/*
 * Fill this process's own chain ahead (corral_seccomp_prefill), for
 * corral's programs of up to own_max converted; what it filled, as the
 * kernel counts it, is sc_prefilled() here and in every fork.
 */
int sc_prefill(size_t own_max, struct corral_err *err);
size_t sc_prefilled(void);
/*
 * The same a filter at a time, for the launcher (launcher.c): what it is
 * to fill for programs of up to own_max converted (0: nothing), one
 * filling filter of it loaded on this thread from a buffer of
 * sc_pad_buf's, whether one more fits; and in a clone of the launcher,
 * what it had filled.  The longest of corral's programs: sc_own_max
 * (0: none built in to go by).
 */
size_t sc_prefill_size(size_t own_max);
int sc_prefill_one(struct sock_filter *buf, size_t *left);
bool sc_prefill_more(size_t left);
void sc_prefilled_set(size_t n);
struct sock_filter *sc_pad_buf(struct corral_err *err);
void sc_pad_buf_free(struct sock_filter *buf);
size_t sc_own_max(void);
/*
 * launcher.c: clone_fn(clone_arg) run on the launcher thread, if this
 * process started one (corral_launcher_start); in the clone it makes
 * (clone_fn returned 0), child_fn(child_arg), which never returns.
 * false: no launcher, or one still filling, nothing done; true: *pid
 * (or -1, errno set).
 */
bool launcher_clone(pid_t (*clone_fn)(void *), void *clone_arg,
		    void (*child_fn)(void *), void *child_arg, pid_t *pid);
/*
 * init's filling on a thread of its own while it builds the sandbox, for
 * its filter of own_len converted (seccomp_stack.c): sc_fill_start makes
 * the thread (false: none made, sc_load fills in line), sc_fill_join
 * waits for it to be gone and counts what it filled as filled ahead.
 */
struct sc_fill {
	struct sock_filter *buf;	/* in map, a filling filter's room */
	char *map;			/* the buffer and the thread's stack */
	size_t left;			/* to fill, as the kernel counts */
	size_t filled;			/* filled, as the kernel counts; 0 */
	int error;			/* what stopped the thread: -errno, a tid */
	pid_t tid;			/* cleared by the kernel at its exit */
};
bool sc_fill_start(struct sc_fill *t, size_t own_len);
void sc_fill_join(struct sc_fill *t);
/* "2026-12-01T19:39:22.123Z": an event's time (clock.c) */
void utc_stamp(char *buf, size_t len, const struct timespec *ts);
/*
 * The programs sc_program makes, compiled when corral was built
 * (tools/sc_prebuild.c writes $(BUILD)/gen/sc_prebuilt.c): one for each
 * ABI, notify and network, with libseccomp's API level at the time (for
 * the record: the program does not depend on it).  sc_compile takes one
 * that matches instead of compiling; sc_load compiles after all where the
 * kernel refuses it.
 */
struct sc_prebuilt {
	uint32_t arch;
	bool notify, net, hostw;
	unsigned int api;
	size_t len;
	const struct sock_filter *prog;
};
extern const struct sc_prebuilt sc_prebuilt[];
extern const size_t sc_nprebuilt;
const struct sc_prebuilt *sc_prebuilt_find(uint32_t arch, bool notify, bool net,
					   bool hostw);
/* Does a bind of p's write to the host (a --rw)?  The filter differs. */
bool sc_host_writable(const struct corral_policy *p);
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
const char *sc_deny_why(int nr, uint64_t arg1, uint64_t arg2);
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
	/* the sandbox's own path, no link followed (a running one's may move) */
	bool no_symlinks;
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

/* ---- ns.c ----------------------------------------------------------- */
/* text, whole, into an existing file (a /proc or /sys knob) */
int proc_write(const char *path, const char *text, struct corral_err *err);

/* ---- hostsysctl.c ---------------------------------------------------- */
/* how long a host sysctl's text is kept by a process (hostsysctl.c) */
#define HOST_SYSCTL_TTL_MS	1000
/*
 * The text of a host's sysctl file (a literal path: the key), NUL-ended,
 * as a read of len - 1 bytes would give it: read again once it is
 * HOST_SYSCTL_TTL_MS old; length or -errno (kept as long).  _at: now
 * given, in ms of CLOCK_MONOTONIC_COARSE (the unit tests').
 */
ssize_t host_sysctl_read(const char *path, char *buf, size_t len);
ssize_t host_sysctl_read_at(const char *path, char *buf, size_t len,
			    uint64_t now);

/* ---- random.c -------------------------------------------------------- */
/* n bytes from the kernel's CSPRNG (getrandom), all of them: 0 or -errno. */
int corral_random(void *buf, size_t n);

/* ---- proctree.c ------------------------------------------------------ */
/*
 * /proc/PID/stat (pid 0: this process's own) into buf: its fields after
 * "(comm)", from the space before the state (field 3), or NULL.
 */
char *proc_stat_fields(pid_t pid, char *buf, size_t len);
/*
 * /proc/self/status into buf, NUL-ended, with read(2) alone (safe in the
 * child of a raw clone): 0, or -errno.
 */
int proc_self_status(char *buf, size_t len);
/* In status's text, the value of its line "KEY:" (blanks skipped), or NULL. */
const char *proc_status_value(const char *status, const char *key);

/* ---- vault.c --------------------------------------------------------- */
/*
 * Memory no child process inherits (MADV_WIPEONFORK; and no core file):
 * for secret values and tokens.  NULL with errno set.
 */
void *vault_alloc(size_t len);
void vault_free(void *ptr);
char *vault_memdup(const void *s, size_t len);
/*
 * First in a child that takes hostile input: the environment it started
 * with zeroed, and none left; with a title, its arguments too (the title in
 * their place: what /proc/PID/cmdline and ps show of it).
 */
void corral_forget(const char *title);

/* ---- newfile.c ------------------------------------------------------- */
/*
 * A new file in dir with no name (O_TMPFILE): its fd, -EOPNOTSUPP where
 * the filesystem has none, or -errno.  It goes with its last fd, a
 * SIGKILL's too, until newfile_link gives it name in dir (0 or -errno).
 */
int newfile_unnamed(int dir, mode_t mode);
int newfile_link(int fd, int dir, const char *name);

#endif
