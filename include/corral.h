/*
 * corral.h - run untrusted code behind a boundary the kernel enforces.
 *
 * The library behind the corral CLI.  A caller fills a struct corral_policy
 * (from the built-in defaults, a JSON policy file, then explicit overrides),
 * hands it and an argv to corral_run(), and gets back a struct corral_result
 * that says what happened and why.
 *
 * Conventions: functions return 0 on success or a negative errno; on failure
 * they fill the struct corral_err the caller passed (never NULL) with a
 * sentence that names the offending value.  Nothing here keeps global state.
 */
#ifndef CORRAL_H
#define CORRAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CORRAL_VERSION "0.1.0"

/* ---- errors ---------------------------------------------------------- */

#define CORRAL_ERR_MAX 512

struct corral_err {
	int code;			/* negative errno, 0 if none */
	char msg[CORRAL_ERR_MAX];	/* one sentence, no trailing newline */
};

/* ---- policy ---------------------------------------------------------- */

struct corral_bind {
	char *src;		/* host path, absolute */
	char *dst;		/* path inside the sandbox, absolute */
	bool writable;
};

struct corral_env {
	char *name;
	char *value;
};

enum corral_net_mode {
	CORRAL_NET_NONE = 0,	/* loopback only */
	CORRAL_NET_PROXY,	/* egress through the supervisor's proxy, by name */
};

/*
 * Abort criteria, written before the run: when one is met the supervisor
 * halts the sandbox by itself (freeze, record, then kill or hold).
 * 0 means "no such criterion".
 */
struct corral_abort {
	uint64_t max_denied_egress;	/* egress.denied events in the run */
	uint64_t max_distinct_denied;	/* distinct denied host:port ... */
	uint64_t window_ms;		/* ... within this window (0: the run) */
	uint64_t max_denied_syscalls;	/* syscall.denied events */
	char **tripwires;		/* decoy files planted inside; any open aborts */
	size_t ntripwires;
	uint64_t max_cpu_ms;		/* CPU time of the whole tree */
	uint64_t max_wall_ms;		/* wall time of the run */
	bool kill;			/* on_abort "kill"; false: "freeze" (hold) */
};

/*
 * What may leave the sandbox's workspace (policy section "export").  The
 * built-in table of files that make host tools run code later (git's
 * config and hooks, editor tasks, .envrc ...) always applies; hold adds
 * rules to it.
 */
struct corral_hold_rule {
	char *path;		/* glob: without '/', any depth; "**": any dirs */
	char *check;		/* "always", "git-config", "gitattributes", ... */
};

struct corral_export_policy {
	struct corral_hold_rule *hold;
	size_t nhold;
	uint64_t max_files;		/* entries an export may walk or write */
	uint64_t max_bytes;		/* bytes of files it may read or write */
};

struct corral_policy {
	/* filesystem */
	char *workspace;		/* host dir shown at /workspace (overlay), or NULL */
	struct corral_bind *binds;
	size_t nbinds;

	/* limits; 0 means "no limit" except where noted */
	uint64_t memory_bytes;
	uint64_t pids;
	double cpus;			/* CPU bandwidth in cores, e.g. 1.5 */
	uint64_t disk_bytes;		/* size of the sandbox's writable tmpfs (required > 0) */
	uint64_t timeout_ms;
	uint64_t output_bytes;		/* cap per captured stream (required > 0) */

	/* environment: cleared, then PATH HOME LANG TERM TMPDIR USER, then these */
	struct corral_env *env;
	size_t nenv;
	char **env_pass;		/* names copied from the caller's environment */
	size_t nenv_pass;

	enum corral_net_mode net;
	/* network "proxy" mode: patterns as written, validated on load */
	char **net_allow;		/* "pypi.org", "*.example.com:443", "10.0.0.0/8:5432" */
	size_t nnet_allow;
	char **net_deny;
	size_t nnet_deny;
	struct corral_env *net_hosts;	/* name -> address, like /etc/hosts */
	size_t nnet_hosts;
	bool net_transparent;		/* redirect all TCP to the proxy (nftables) */
	char *net_resolver;		/* "IP[:PORT]" for allowed names; NULL: resolv.conf */

	struct corral_abort abort;
	struct corral_export_policy export;
};

/* The built-in default policy (what `corral run` uses without --policy). */
void corral_policy_init(struct corral_policy *p);
void corral_policy_free(struct corral_policy *p);

/*
 * Merge a JSON policy over *p.  Strict: unknown keys, wrong types, bad sizes
 * and impossible values are errors; err->msg then reads
 * "FILE:LINE:COL: KEY: reason (got VALUE)".
 */
int corral_policy_load_file(struct corral_policy *p, const char *path,
			    struct corral_err *err);
int corral_policy_load_string(struct corral_policy *p, const char *text,
			      size_t len, const char *name,
			      struct corral_err *err);

/* Overrides, as the CLI flags give them. */
int corral_policy_add_bind(struct corral_policy *p, const char *spec,
			   bool writable, struct corral_err *err); /* HOST[:PATH] */
int corral_policy_set_env(struct corral_policy *p, const char *assignment,
			  struct corral_err *err);	/* NAME=VALUE */
int corral_policy_pass_env(struct corral_policy *p, const char *name,
			   struct corral_err *err);
int corral_policy_set_workspace(struct corral_policy *p, const char *dir,
				struct corral_err *err);
/*
 * limits.KEY from text ("memory", "256M"), validated exactly as in a
 * policy file; err->msg then reads "limits.KEY: reason (got ...)".
 */
int corral_policy_set_limit(struct corral_policy *p, const char *key,
			    const char *value, struct corral_err *err);

/* "256M", "1GiB", "4096", "1.5G" -> bytes.  Suffixes are binary (K = 1024). */
int corral_parse_size(const char *s, uint64_t *bytes, struct corral_err *err);
/* "30", "30s", "500ms", "2m", "1h", "1.5s" -> milliseconds.  Bare = seconds. */
int corral_parse_duration(const char *s, uint64_t *ms, struct corral_err *err);
/* 268435456 -> "256 MiB"; writes at most len bytes. */
void corral_format_size(uint64_t bytes, char *buf, size_t len);
/*
 * CLOCK_MONOTONIC in milliseconds: the clock of every timeout, meter and
 * budget in corral, for front ends whose own timers must agree with them.
 */
uint64_t corral_now_ms(void);

/* ---- running --------------------------------------------------------- */

enum corral_status {
	CORRAL_EXITED,
	CORRAL_SIGNALED,
	CORRAL_TIMEOUT,
	CORRAL_OOM,
	CORRAL_PIDS_LIMIT,
	CORRAL_HALTED,			/* an abort criterion was met */
	CORRAL_ERROR,
};

struct corral_output {
	char *data;
	size_t len;
	bool truncated;		/* more was written than the cap kept */
};

/* Which layers a run actually got; weaker ones are named, never hidden. */
struct corral_layers {
	int landlock_abi;		/* 0: not available */
	bool seccomp;
	bool seccomp_notify;		/* denials reported to the supervisor */
	const char *limits;		/* "cgroup v2", "cgroup v1", "rlimit" */
};

struct corral_result {
	enum corral_status status;
	int exit_code;			/* valid when status == CORRAL_EXITED (and limits) */
	int signal;			/* signal that ended the command, or 0 */
	char reason[CORRAL_ERR_MAX];
	struct corral_output out, err;	/* filled only when captured */
	uint64_t duration_ms;
	uint64_t cpu_ms;
	uint64_t max_rss_kb;
	struct corral_layers layers;
	char *denials;			/* JSON array of the run's denied events */
	char sandbox_id[64];
	char tool_call[128];		/* the call's id, given or generated */
	/*
	 * With opts.export: JSON {changes, exported, held, conflicts[,
	 * error]}; export_failed when it could not be done (a limit).
	 */
	char *export_report;
	bool export_failed;
};

/*
 * The workspace's way out, after the command ends (needs a workspace).
 * Every write is resolved beneath the destination, no symlink followed;
 * device nodes, fifos, sockets, setuid bits and symlinks that leave the
 * tree never come out; changes that would make a host tool run code
 * (the policy's export table) are held back unless allow_risky names them.
 */
struct corral_export_opts {
	const char *to;			/* a new directory: the workspace as left */
	bool apply;			/* the changes onto the workspace itself */
	const char *patch;		/* a git patch of the changes, to this file */
	char *const *allow_risky;	/* globs let through the table (logged) */
	size_t nallow_risky;
};

struct corral_run_opts {
	char *const *argv;		/* argv[0] looked up in the sandbox's PATH */
	bool capture;			/* capture stdout/stderr into the result */
	/*
	 * Forward SIGINT, SIGTERM, SIGHUP and SIGQUIT that the caller receives
	 * to the command while it runs (blocked and read via signalfd for the
	 * duration of the call, the caller's mask restored after).
	 */
	bool forward_signals;
	/* Append every event of the run as JSON lines to this file (or NULL). */
	const char *events_path;
	/* The tool call this run is, for attribution ("call" in events). */
	const char *tool_call;
	const struct corral_export_opts *export;	/* or NULL */
};

/*
 * Run argv inside a fresh sandbox built from *p, wait for it, and describe
 * the end in *res.  Returns 0 when the command ran (whatever its status),
 * or a negative errno when the sandbox could not be built (err says why,
 * res->status is CORRAL_ERROR).
 */
int corral_run(const struct corral_policy *p, const struct corral_run_opts *o,
	       struct corral_result *res, struct corral_err *err);
void corral_result_free(struct corral_result *res);

/* The process exit status the CLI uses for a result (see corral(1)). */
int corral_result_exit_code(const struct corral_result *res);
const char *corral_status_name(enum corral_status s);
/* "timeout" -> CORRAL_TIMEOUT (as a result's JSON names it); -EINVAL if none. */
int corral_status_from_name(const char *name, enum corral_status *s);
/* One JSON object, malloc'd, no trailing newline. */
char *corral_result_json(const struct corral_result *res);

/* ---- long-lived sandboxes (corral serve) ------------------------------ */

/*
 * A box is a sandbox that stays up across many tool calls.  It runs on the
 * caller's libevent loop: creation finishes, calls start and end, and the
 * supervisor's decisions happen in callbacks on that loop, so one process
 * can own thousands of boxes.  Every tool call lives in its own child
 * cgroup; what it starts, background processes included, stays attributed
 * to it in the events.
 */
struct event_base;
struct corral_box;
struct corral_call;

/* One audit log (JSON lines, one hash chain) for many boxes. */
struct corral_log;

int corral_log_open(struct corral_log **out, const char *path,
		    struct corral_err *err);
/* fn(arg, sandbox id, line, len) for every line written, after it is. */
void corral_log_observe(struct corral_log *log,
			void (*fn)(void *arg, const char *sandbox,
				   const char *line, size_t len),
			void *arg);
void corral_log_close(struct corral_log *log);
/*
 * errno of the last line that could not be written (ENOSPC: a full disk),
 * 0 once a line is written again.  Supervision goes on either way.
 */
int corral_log_error(const struct corral_log *log);
/*
 * Record one event {type, reason} for a sandbox that has no box any more
 * (lost in a crash); its seq follows after_seq, the sandbox's last.
 */
void corral_log_note(struct corral_log *log, const char *sandbox,
		     uint64_t after_seq, const char *type, const char *reason);
/*
 * Remove the cgroups of supervisors that died without cleaning up; how
 * many.  corral_run and corral serve call it at start.
 */
int corral_cleanup_stale(void);
/* The same for one supervisor the caller knows is gone (a watchdog). */
int corral_cleanup_owner(pid_t pid);
void corral_box_set_idle_freeze(struct corral_box *b, uint64_t ms);
/* Record one event {type, reason} among the box's own (a TTL, say). */
void corral_box_note(struct corral_box *b, const char *type, const char *reason);

struct corral_box_opts {
	const char *id;			/* [A-Za-z0-9._-]{1,48}, unique */
	struct corral_log *log;		/* where the events go, or NULL */
	uint64_t idle_freeze_ms;	/* freeze when idle this long; 0: never */
	/* err NULL: the box is up; else it failed (destroy it). */
	void (*on_ready)(void *arg, struct corral_box *b,
			 const struct corral_err *err);
	void (*on_halt)(void *arg, struct corral_box *b);	/* abort or halt */
	void (*on_dead)(void *arg, struct corral_box *b);	/* died unasked */
	void *arg;
};

/*
 * Start building a box from *p, which it takes (freed by destroy, also on
 * failure).  Returns 0 when the build is under way: on_ready says how it
 * ended.  A negative errno: nothing was created.
 */
int corral_box_create(struct event_base *base, struct corral_policy *p,
		      const struct corral_box_opts *o, struct corral_box **out,
		      struct corral_err *err);
/*
 * Kill everything in it and remove every trace (cgroups, fds, listeners).
 * The kernel's part (the namespaces' teardown, then the cgroups) finishes
 * on the loop: run it until it has no events left before freeing it.
 */
void corral_box_destroy(struct corral_box *b);

enum corral_box_state {
	CORRAL_BOX_STARTING,
	CORRAL_BOX_RUNNING,		/* a call is running */
	CORRAL_BOX_IDLE,
	CORRAL_BOX_FROZEN,		/* idle-frozen; the next call thaws it */
	CORRAL_BOX_PAUSED,		/* by a person: calls refused until resumed */
	CORRAL_BOX_HALTED,		/* abort or halt: calls refused for good */
	CORRAL_BOX_DEAD,		/* its init died */
};

struct corral_meters {
	double cpu_seconds;
	uint64_t memory_peak_bytes;
	double memory_byte_seconds;	/* memory in use, integrated over time */
	double active_seconds;		/* wall time not frozen or paused */
	double frozen_seconds;
	uint64_t calls;
};

const char *corral_box_id(const struct corral_box *b);
enum corral_box_state corral_box_state(const struct corral_box *b);
const char *corral_box_state_name(enum corral_box_state s);
const char *corral_box_halt_reason(const struct corral_box *b);	/* or NULL */
void corral_box_meters(struct corral_box *b, struct corral_meters *m);
void corral_box_layers(const struct corral_box *b, struct corral_layers *l);
/* Processes of calls that have not ended (background ones included). */
size_t corral_box_running(const struct corral_box *b);

/* pause: freeze by a person's order; calls answer "paused" until resume. */
int corral_box_pause(struct corral_box *b, bool paused, struct corral_err *err);
/* The same authority as an abort criterion: freeze, record, kill. */
int corral_box_halt(struct corral_box *b, const char *reason,
		    struct corral_err *err);

struct corral_call_opts {
	char *const *argv;
	char *const *env;		/* NAME=VALUE over the policy's, or NULL */
	const char *cwd;		/* inside; NULL: /workspace */
	const char *tool_call;		/* NULL: generated */
	const char *stdin_data;		/* given whole, then EOF; NULL: EOF */
	size_t stdin_len;
	uint64_t timeout_ms;		/* 0: the policy's */
	bool keep_tail;			/* keep the last bytes, not the first */
	void (*on_start)(void *arg, struct corral_call *c);
	void (*on_output)(void *arg, struct corral_call *c, int stream,
			  const char *data, size_t len);	/* 1 out, 2 err */
	/* The call has ended; res lives until corral_call_free(). */
	void (*on_done)(void *arg, struct corral_call *c,
			const struct corral_result *res);
	void *arg;
};

/*
 * Start a call.  A frozen box is thawed first; a paused, halted or dead
 * one refuses (-EBUSY, -EPERM, -ESRCH; err says why, with the halt reason).
 */
int corral_box_exec(struct corral_box *b, const struct corral_call_opts *o,
		    struct corral_call **out, struct corral_err *err);
pid_t corral_call_pid(const struct corral_call *c);	/* as the sandbox sees it */
pid_t corral_call_host_pid(const struct corral_call *c);
const char *corral_call_id(const struct corral_call *c);
/* The result once done, else NULL. */
const struct corral_result *corral_call_result(const struct corral_call *c);
/* What was kept of stream 1 or 2 so far. */
const struct corral_output *corral_call_output(const struct corral_call *c,
					       int stream);
/*
 * Stop (and start again) reading the call's output: its writes block once
 * the pipe is full.  For a caller that forwards output to a client slower
 * than the command: the command waits, nothing piles up in memory.
 */
void corral_call_hold_output(struct corral_call *c, bool hold);
/* Signal the call and everything it started (its cgroup). */
int corral_call_kill(struct corral_call *c, int sig);
/* Forget a call; one still running is killed first (no on_done then). */
void corral_call_free(struct corral_call *c);

/*
 * Files, as the sandbox's user sees them: path is absolute inside the
 * sandbox, resolved from its root with no symlink followed and no way
 * out; /proc and /sys are refused; only regular files are opened.
 */
int corral_box_open(struct corral_box *b, const char *path, int flags,
		    int *fd, struct corral_err *err);
int corral_box_unlink(struct corral_box *b, const char *path,
		      struct corral_err *err);

struct corral_dirent {
	char name[256];
	char type;			/* 'f' file, 'd' dir, 'l' symlink, 'o' other */
	uint64_t size;
	unsigned int mode;
};

/* A directory's entries, malloc'd (free it); *n how many. */
int corral_box_list(struct corral_box *b, const char *path,
		    struct corral_dirent **out, size_t *n,
		    struct corral_err *err);

/* ---- host features --------------------------------------------------- */

struct corral_features {
	bool userns;			/* user namespaces can be created */
	bool overlay_in_userns;
	bool seccomp;
	bool seccomp_notify;		/* SECCOMP_RET_USER_NOTIF for the syscall log */
	int landlock_abi;		/* 0 if absent or disabled */
	bool openat2;
	const char *limits;		/* what limits would use: cgroup v2 / v1 / rlimit */
	char limits_detail[CORRAL_ERR_MAX];
	bool cg_memory, cg_pids, cg_cpu, cg_freezer;
};

int corral_probe(struct corral_features *f);

#ifdef __cplusplus
}
#endif
#endif /* CORRAL_H */
