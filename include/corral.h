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
#include <stdio.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CORRAL_VERSION "0.1.0"

/*
 * What the library exports: it is built with -fvisibility=hidden, so a
 * function not marked here stays inside it, whatever its linkage.
 */
#if defined(__GNUC__)
#define CORRAL_PUBLIC __attribute__((visibility("default")))
#else
#define CORRAL_PUBLIC
#endif

/* ---- errors ---------------------------------------------------------- */

#define CORRAL_ERR_MAX 512

struct corral_err {
	int code;			/* negative errno or CORRAL_E_*, 0 if none */
	char msg[CORRAL_ERR_MAX];	/* one sentence, no trailing newline */
};

/*
 * A long-lived sandbox's state refusing a request has codes of its own,
 * below errno's range (the kernel's errnos stay under 4096), so that an
 * EPERM or ESRCH from the kernel is never read as "halted" or "gone".
 */
#define CORRAL_E_HALTED		(-4097)	/* halted: its files are evidence */
#define CORRAL_E_GONE		(-4098)	/* dead, or not started yet */
#define CORRAL_E_PAUSED		(-4099)	/* paused: resume it first */
#define CORRAL_E_STARTING	(-4100)	/* still starting: try again */

/* Fill err, return code (a negative errno); for the callers' own errors too. */
CORRAL_PUBLIC
int corral_set_err(struct corral_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * As corral_set_err() for a failed call: errnum is the errno it left
 * (positive); its text is appended once, "<message>: <strerror>", and
 * -errnum returned.  No allocation (strerror_r), so safe after fork.
 */
CORRAL_PUBLIC
int corral_set_errno(struct corral_err *err, int errnum, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* ---- ids -------------------------------------------------------------- */

/*
 * A sandbox id: 1 to 48 of [A-Za-z0-9._-], not starting with '.'.  The
 * library has refused longer ones from the start, so no sandbox has one.
 */
#define CORRAL_SANDBOX_ID_MAX 48
CORRAL_PUBLIC
int corral_check_sandbox_id(const char *id, struct corral_err *err);

/* limits.call_timeout of the built-in policy: 10 minutes. */
#define CORRAL_CALL_TIMEOUT_DEFAULT_MS (10 * 60 * 1000)

/* A tool call's id: 1 to 127 bytes of UTF-8. */
#define CORRAL_TOOL_CALL_ID_MAX 127
CORRAL_PUBLIC
int corral_check_tool_call_id(const char *id, struct corral_err *err);

/* ---- policy ---------------------------------------------------------- */

struct corral_bind {
	char *src;		/* host path, absolute */
	char *dst;		/* path inside the sandbox, absolute */
	bool writable;
	/*
	 * pinned: the source is the object fd holds (O_PATH), which the
	 * caller judged, and src the path it had then: the sandbox gets that
	 * object or is refused, whatever src names by the time it is built.
	 * The fd is the policy's (corral_policy_free closes it, a copy has
	 * its own): corral_policy_add_pinned_bind, corral_policy_pin_workspace.
	 */
	bool pinned;
	int fd;
};

/*
 * A tmpfs as a container asks for one (docker --tmpfs, podman --tmpfs, a
 * config.json mount of type tmpfs): a writable, empty, private directory
 * at dst.  Not a tmpfs of its own, which would be a second pool to fill
 * past the disk limit: a fresh directory of the sandbox's one scratch
 * (limits.disk, its files budget), bound at dst; nosuid and nodev always.
 * corral_policy_add_tmpfs() fills it.
 */
struct corral_tmpfs {
	char *dst;		/* inside the sandbox: absolute, normalised */
	mode_t mode;		/* the directory's: 01777 (a tmpfs's) unless mode= */
	bool ro;		/* read-only: empty, and stays so */
	bool noexec;
};

/* A sandbox's tmpfs mounts at most (each is a mount and a Landlock rule). */
#define CORRAL_TMPFS_MAX 16

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
	/*
	 * Syscalls whose denial does not count toward max_denied_syscalls:
	 * the ordinary probes of tools (still denied, still recorded).
	 */
	char **ignore_syscalls;
	size_t nignore_syscalls;
	char **tripwires;		/* decoy files planted inside; any open aborts */
	size_t ntripwires;
	uint64_t max_cpu_ms;		/* CPU time of the whole tree */
	uint64_t max_wall_ms;		/* wall time of the run */
	bool kill;			/* on_abort "kill"; false: "freeze" (hold) */
};

/*
 * What a sandbox may write to its log (the events file, or its share of
 * the daemon's audit log): a repeated event (a denial of one syscall, of
 * one destination) is written whole `verbatim` times, then counted in one
 * summary event per `interval_ms`; past `budget_bytes` only summaries and
 * the run's end are written.  Counting is exact either way (abort sees all).
 */
struct corral_event_limits {
	uint64_t budget_bytes;		/* the sandbox's share of its log (> 0) */
	uint64_t verbatim;		/* events of one kind written whole */
	uint64_t interval_ms;		/* then one summary per kind per this */
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
	/* directories of the scratch at their destinations (corral_policy_add_tmpfs) */
	struct corral_tmpfs *tmpfs;
	size_t ntmpfs;
	/*
	 * filesystem.hide: paths as the sandbox sees them, masked after the
	 * binds (an empty read-only file over a file, an empty read-only
	 * tmpfs over a directory): srt's denyRead inside a bind.
	 */
	char **hide;
	size_t nhide;
	/*
	 * The root: none, the host's /usr (and friends) read-only; else these
	 * host directories stacked as one overlay, lowest first (an image's
	 * layers, or a --rootfs DIR), with corral's own /etc entries, /tmp,
	 * /home/agent, /workspace, /dev and /proc over it as always.
	 */
	char **root_layers;
	size_t nroot_layers;
	/*
	 * The root as the caller judged it (one layer, corral_policy_pin_root):
	 * as a pinned bind's source, the sandbox gets that directory or none.
	 */
	bool root_pinned;
	int root_fd;
	bool root_writable;		/* filesystem.root_writable: copy-on-write */
	/*
	 * identity.user "root": the commands run as uid 0 of the sandbox's
	 * user namespace with child.c's few file capabilities (dpkg, apt),
	 * on an image or --rootfs, with a full id range mapped (ns.c).
	 */
	bool root_inside;
	/*
	 * filesystem.image: an image of the store, by name or digest; whoever
	 * runs the policy resolves it against its store (corral_policy_use_image)
	 * into root_layers, Env and WorkingDir.  Only a reference: never a path.
	 */
	char *image;
	/*
	 * The sandbox user's name and home (uid 1000 either way): an image's
	 * User, looked up in its /etc/passwd.  NULL: "agent", /home/agent.
	 */
	char *user_name;
	char *user_home;
	/*
	 * A snapshot (corral_box_snapshot) the workspace starts as: that tree
	 * is copied into the sandbox's upper layer before it is mounted.  Set
	 * by corral_policy_set_workspace_layer(), not by the policy file; the
	 * fd and the path are the caller's, kept until the sandbox is built.
	 */
	bool workspace_layer;
	int workspace_layer_fd;		/* a detached copy of its mount, or -1 */
	/* the workspace as the caller judged it: as a pinned bind's source */
	bool workspace_pinned;
	int workspace_fd;
	const char *workspace_layer_path;	/* else the sandbox opens this */
	char *workdir;			/* where the command starts; NULL: /workspace */

	/* limits; 0 means "no limit" except where noted */
	uint64_t memory_bytes;
	uint64_t pids;
	double cpus;			/* CPU bandwidth in cores, e.g. 1.5 */
	uint64_t disk_bytes;		/* size of the sandbox's writable tmpfs (required > 0) */
	uint64_t timeout_ms;
	/*
	 * A call in a long-lived sandbox (corral serve, mcp) that gives no
	 * timeout of its own and has no timeout_ms above: this one (0: none).
	 */
	uint64_t call_timeout_ms;
	uint64_t output_bytes;		/* cap per captured stream (required > 0) */
	/*
	 * Connections the egress proxy holds for the sandbox at once
	 * (tunnels, requests, DNS over TCP); past it one is refused with an
	 * event that names the limit (required > 0).
	 */
	uint64_t connections;
	/*
	 * limits.open_files: each of the command's processes' hard
	 * RLIMIT_NOFILE (and its soft one, where the caller's is higher).
	 * Checked when the sandbox starts, on the host it runs on:
	 * open_files x pids at most a quarter of fs.file-max (or no more than
	 * the default below), and at most half of the caller's own hard
	 * limit.  0: the default, a quarter of fs.file-max over pids, but
	 * not below 1024.  Not in an OCI container (process.rlimits).
	 */
	uint64_t open_files;

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
	/* TLS termination, rules by method and path, secrets (src/lib/tls.h) */
	struct corral_tls_policy *net_tls;

	struct corral_abort abort;
	struct corral_event_limits events;
	struct corral_export_policy export;

	/*
	 * As root: the host uids the sandbox may run as.  The workspace's
	 * owner when within [host_uid_min, host_uid_max], else 65534.  Both
	 * 0 (the default, corral run): the owner, whoever it is (not root).
	 */
	uid_t host_uid_min, host_uid_max;
};

/* The built-in default policy (what `corral run` uses without --policy). */
CORRAL_PUBLIC
void corral_policy_init(struct corral_policy *p);
CORRAL_PUBLIC
void corral_policy_free(struct corral_policy *p);

/*
 * Lay a JSON policy over *p, as corral_json_merge lays one document over
 * another: a scalar replaces p's, an object (env.set, network.hosts) is
 * merged key by key, and a list replaces p's whole: a later layer's
 * "tripwires": [] leaves none, its "network.allow" is the allowlist.
 * So a layer written by someone else may drop a denial of p's: check the
 * result with corral_policy_keeps_denials (or corral_policy_within).
 * Strict: unknown keys, wrong types, bad sizes and impossible values are
 * errors, and *p is left as it was; err->msg then reads
 * "FILE:LINE:COL: KEY: reason (got VALUE)".
 */
CORRAL_PUBLIC
int corral_policy_load_file(struct corral_policy *p, const char *path,
			    struct corral_err *err);
CORRAL_PUBLIC
int corral_policy_load_string(struct corral_policy *p, const char *text,
			      size_t len, const char *name,
			      struct corral_err *err);

/*
 * The settings file of Anthropic's sandbox-runtime (srt), translated to a
 * policy and loaded like one.  *report (free() it; NULL on error) says key
 * by key what each setting became, or why it did not map.  *made (NULL
 * on error): what srt keeps read-only inside a write bind, held for the
 * run, and made on the host, empty, where it was not there (so that the
 * sandbox cannot make it): give it to corral_srt_made_remove once the
 * sandbox is gone.
 */
struct corral_srt_made;
CORRAL_PUBLIC
int corral_policy_load_srt_file(struct corral_policy *p, const char *path,
				char **report, struct corral_srt_made **made,
				struct corral_err *err);
/*
 * Removes what is corral's (made by this run, or marked as made by
 * another) that is still as made and no other run holds; frees m, and
 * ends the janitor (a child, corral-janitor) that removes them if this
 * process is killed first.
 */
CORRAL_PUBLIC
void corral_srt_made_remove(struct corral_srt_made *m);
/* The same removal, nothing freed: for a signal handler (only syscalls). */
CORRAL_PUBLIC
void corral_srt_made_unmake(const struct corral_srt_made *m);

/*
 * What a policy's TLS part makes the supervisor read from the host, for
 * front ends that gate it (the daemon's API): the i-th source, *kind "env"
 * (a variable of the supervisor's environment) or "file" (a path), in
 * *name.  0 while i is in range, -1 after the last.
 */
CORRAL_PUBLIC
int corral_policy_host_read(const struct corral_policy *p, size_t i,
			    const char **kind, const char **name);
/*
 * Is p's TLS part (secrets, upstream CA, termination, allowlist objects,
 * request caps) the bound's, or narrower?  NULL, or why not (static text).
 */
CORRAL_PUBLIC
const char *corral_policy_tls_within(const struct corral_policy *p,
				     const struct corral_policy *bound);
/*
 * Is p within bound, the operator's policy (src/lib/policy_bounds.c)?  p
 * may narrow (lower limits, fewer hosts, more denials and abort criteria,
 * the operator's export holds kept), never widen.  0, or -EPERM with
 * err->msg naming the field, the bound and what p asks.  Host paths,
 * env.pass, the image and identity.user are not judged: each front end
 * gates those its own way.
 */
CORRAL_PUBLIC
int corral_policy_within(const struct corral_policy *p,
			 const struct corral_policy *bound, struct corral_err *err);
/*
 * What a refusal calls the bound: .policy the whole ("the operator's
 * policy"), .owner whose its parts are ("the operator's" allowlist,
 * tripwire, export rule).
 */
struct corral_bound_name {
	const char *policy;
	const char *owner;
};
/*
 * corral_policy_within, the refusal naming the bound as name says (NULL:
 * the operator's policy).  corral serve's bound of a TCP client without
 * --policy is its built-in default, no operator's policy.
 */
CORRAL_PUBLIC
int corral_policy_within_named(const struct corral_policy *p,
			       const struct corral_policy *bound,
			       const struct corral_bound_name *name,
			       struct corral_err *err);
/*
 * Does p still deny what base does: each of its network.deny patterns,
 * abort.tripwires and export.hold rules?  0, or -EPERM with err->msg
 * naming the first one dropped.  (Part of corral_policy_within; alone for
 * a layer that may widen, but not take the base's denials away.)
 */
CORRAL_PUBLIC
int corral_policy_keeps_denials(const struct corral_policy *p,
				const struct corral_policy *base,
				struct corral_err *err);
/* A deep copy of src into dst (pinned fds duplicated); 0 or -errno. */
CORRAL_PUBLIC
int corral_policy_copy(struct corral_policy *dst, const struct corral_policy *src,
		       struct corral_err *err);
/*
 * src over dst, both JSON objects (jansson's): objects merged key by key,
 * anything else replaced, as a policy asked for is laid over the
 * operator's.  0, -EINVAL (not objects) or -ENOMEM.
 */
struct json_t;
CORRAL_PUBLIC
int corral_json_merge(struct json_t *dst, const struct json_t *src);

/* Overrides, as the CLI flags give them. */
CORRAL_PUBLIC
int corral_policy_add_bind(struct corral_policy *p, const char *spec,
			   bool writable, struct corral_err *err); /* HOST[:PATH] */
/*
 * A bind of the object fd holds (O_PATH, opened and judged by the caller):
 * checked by what it is, not by a path that can be swapped before the
 * sandbox is built (a bind the caller allows by where it lies).  fd is
 * the policy's from the call on, whatever it returns.
 */
CORRAL_PUBLIC
int corral_policy_add_pinned_bind(struct corral_policy *p, int fd, const char *dst,
				  bool writable, struct corral_err *err);
/*
 * A tmpfs mount at dst (struct corral_tmpfs), with a mount's options as
 * an engine gives them: ro/rw, noexec/exec, mode=OCTAL (no setuid or
 * setgid bit); nosuid, nodev (always on), suid, dev, size=, nr_inodes=
 * (the scratch's size and files bound it), propagation (the sandbox's
 * mounts are private), tmpcopyup (the directory starts empty), atime
 * (strictatime, relatime, noatime, nodiratime, lazytime and their
 * negations: the scratch's own) taken and not applied; uid=/gid= only
 * as the sandbox's user (1000), who owns it.  Refused, with why: dst not
 * absolute or with "..", "/", corral's own trees (/proc /dev /sys
 * /oldroot /.corral /.scratch) and what holds
 * corral's own mounts (/tmp, /home/agent, /workspace, /etc, or a
 * directory above one), a dst given twice or already a bind's, more than
 * CORRAL_TMPFS_MAX, an option unknown or malformed.
 */
CORRAL_PUBLIC
int corral_policy_add_tmpfs(struct corral_policy *p, const char *dst,
			    const char *const *options, size_t nopts,
			    struct corral_err *err);
/* Bind i, or the workspace, as the object fd holds (taken, as above). */
CORRAL_PUBLIC
int corral_policy_pin_bind(struct corral_policy *p, size_t i, int fd,
			   struct corral_err *err);
CORRAL_PUBLIC
int corral_policy_pin_workspace(struct corral_policy *p, int fd,
				struct corral_err *err);
CORRAL_PUBLIC
int corral_policy_set_env(struct corral_policy *p, const char *assignment,
			  struct corral_err *err);	/* NAME=VALUE */
CORRAL_PUBLIC
int corral_policy_pass_env(struct corral_policy *p, const char *name,
			   struct corral_err *err);
CORRAL_PUBLIC
int corral_policy_set_workspace(struct corral_policy *p, const char *dir,
				struct corral_err *err);
/*
 * Whether the host object fd (O_PATH is enough; path names it in err) may
 * be a sandbox's workspace or a bind's source, as the sandbox's build will
 * judge it: never the host's root, /proc, /sys, /dev, nor /run, /tmp,
 * /run/user or a session's directory there (their unix sockets), however
 * reached.  -EACCES with why; another -errno when fd cannot be judged.
 * For a caller (the daemon) that refuses a client before building.
 */
CORRAL_PUBLIC
int corral_host_path_check(int fd, const char *path, struct corral_err *err);

/*
 * Whether the directory fd (O_PATH; what, "--rootfs DIR", begins err's
 * sentence) may be a root (--rootfs, an OCI rootfs, a bundle): -EPERM
 * where it lies on a FUSE filesystem
 * whose daemon is another user's, judged before anything there is asked
 * (a stat is a request to that daemon, and one that never answers held
 * the caller); 0 otherwise, -errno when it cannot be judged (fuseroot.c).
 */
CORRAL_PUBLIC
int corral_root_fd_check(int fd, const char *what, struct corral_err *err);

/*
 * path (absolute, within the tree at the directory fd root) as the
 * kernel finds it there, each symbolic link on the way followed as if
 * root were "/" (openat2 RESOLVE_IN_ROOT), into out: the deepest name
 * that exists, resolved, then the rest as written.  Never across a mount
 * beneath root (whose filesystem may never answer) nor through a magic
 * link: there, and for a path with a ".." component, path itself.  For
 * where an engine's runtime mounts (runc follows /var/run -> ../run);
 * the result is only a name: what is mounted there later must still be
 * made without following links.  -ENAMETOOLONG when out is too small.
 */
CORRAL_PUBLIC
int corral_path_in_root(int root, const char *path, char *out, size_t len);
/*
 * Whether p's view (workspace, binds, root) holds a secret's from_file, or
 * its env.pass a secret's from_env variable, as the sandbox's start will
 * judge it: -EACCES with why; another -errno when a file cannot be judged.
 * For a caller (the daemon) that refuses a client before building.
 */
CORRAL_PUBLIC
int corral_policy_secrets_unseen(const struct corral_policy *p, struct corral_err *err);
/*
 * Whether p's values fit this host, as a sandbox's start will judge them
 * (limits.open_files against fs.file-max and our own hard open-files
 * limit); err says which does not.  A policy file is read anywhere: this
 * is the part only the host it runs on can answer.
 */
CORRAL_PUBLIC
int corral_policy_check_host(const struct corral_policy *p, struct corral_err *err);
/* The root's layers (absolute host directories, lowest first); n 0: the host's. */
CORRAL_PUBLIC
int corral_policy_set_root(struct corral_policy *p, char *const *layers, size_t n,
			   struct corral_err *err);
/*
 * The root as the one directory fd holds (O_PATH, opened and judged by the
 * caller: a bundle's rootfs), never its path again: taken as a pinned
 * bind's fd is, whatever it returns.  Refused: the host's root, /proc,
 * /sys, /dev, anything but a directory.
 */
CORRAL_PUBLIC
int corral_policy_pin_root(struct corral_policy *p, int fd, struct corral_err *err);
/* The command's working directory inside (absolute); NULL: /workspace. */
CORRAL_PUBLIC
int corral_policy_set_workdir(struct corral_policy *p, const char *dir,
			      struct corral_err *err);
/*
 * limits.KEY from text ("memory", "256M"), validated exactly as in a
 * policy file; err->msg then reads "limits.KEY: reason (got ...)".
 */
CORRAL_PUBLIC
int corral_policy_set_limit(struct corral_policy *p, const char *key,
			    const char *value, struct corral_err *err);
/* network mode "none" | "proxy" */
CORRAL_PUBLIC
int corral_policy_set_net(struct corral_policy *p, const char *mode,
			  struct corral_err *err);
/* one network.allow / network.deny pattern, checked as in a policy file */
CORRAL_PUBLIC
int corral_policy_add_allow(struct corral_policy *p, const char *pattern,
			    struct corral_err *err);
CORRAL_PUBLIC
int corral_policy_add_deny(struct corral_policy *p, const char *pattern,
			   struct corral_err *err);

/*
 * A host path as a policy holds it: absolute, "//" and "." collapsed, no
 * trailing "/"; ".." refused, not resolved.  malloc'd into *out; -errno
 * (and err) for a path a policy would refuse.
 */
CORRAL_PUBLIC
int corral_path_normalise(const char *path, char **out, struct corral_err *err);

/* "256M", "1GiB", "4096", "1.5G" -> bytes.  Suffixes are binary (K = 1024). */
CORRAL_PUBLIC
int corral_parse_size(const char *s, uint64_t *bytes, struct corral_err *err);
/* "30", "30s", "500ms", "2m", "1h", "1.5s" -> milliseconds.  Bare = seconds. */
CORRAL_PUBLIC
int corral_parse_duration(const char *s, uint64_t *ms, struct corral_err *err);
/* 268435456 -> "256 MiB"; writes at most len bytes. */
CORRAL_PUBLIC
void corral_format_size(uint64_t bytes, char *buf, size_t len);
/*
 * CLOCK_MONOTONIC in milliseconds: the clock of every timeout, meter and
 * budget in corral, for front ends whose own timers must agree with them.
 */
CORRAL_PUBLIC
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
	uint64_t dropped;	/* bytes written and not kept */
	size_t dropped_at;	/* where in data they were: head before, tail after */
};

/* Which layers a run actually got; weaker ones are named, never hidden. */
/*
 * Which host ids a sandbox uses (ns.c).  uid/gid 1000 inside, the agent,
 * is the host's uid/gid; any other inside id k below count is the host's
 * range_uid + k / range_gid + k: corral's reserved range as root, the
 * caller's /etc/subuid and /etc/subgid entries otherwise; count 0: only
 * the agent is mapped (other ids are the overflow id, and chown or
 * setuid to them fails with EINVAL).
 */
struct corral_ids {
	char mapping[8];		/* "range", "subuid" or "single" */
	uint32_t uid, gid;		/* the agent's host ids */
	uint32_t range_uid, range_gid;
	uint32_t count;
	/* the workspace and binds through idmapped mounts: owner -> agent */
	bool idmapped;
	/*
	 * the host uid that owns the sandbox's user namespace, and so whose
	 * per-user kernel counts (inotify, pending signals, message queues)
	 * its processes also count against; 0: the caller's euid
	 */
	uint32_t owner;
	char note[256];			/* what is weaker and why; "" if nothing */
};

struct corral_layers {
	int landlock_abi;		/* 0: not available */
	bool seccomp;
	bool seccomp_notify;		/* denials reported to the supervisor */
	const char *limits;		/* "cgroup v2", "cgroup v1", "rlimit" */
	struct corral_ids ids;
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
	/* all of them, of which denials keeps the first (1000 a run, 100 a call) */
	uint64_t denials_total;
	char sandbox_id[64];
	char tool_call[128];		/* the call's id, given or generated */
	/*
	 * With opts.export: JSON {changes, exported, held, conflicts[,
	 * error]}; export_failed when it could not be done (a limit), or
	 * was cut short by export_signal (forward_signals: one of those
	 * came after the command had ended; what was written stays, each
	 * file whole, and --patch's FILE is left as it was).
	 */
	char *export_report;
	bool export_failed;
	int export_signal;
	/*
	 * Not captured: a write of the command's output to the caller's fd 1
	 * or 2 failed (ENOSPC, EFBIG, EDQUOT; not EPIPE, a reader gone), and the
	 * rest of that stream was lost: its errno (the reason says which).
	 */
	int output_errno;
	/*
	 * Event lines of the sandbox's record the events file did not take
	 * (a full disk) while it ran: the reason says so, and the record has
	 * a gap there (a "log.gap" line once the file takes lines again).
	 */
	uint64_t events_lost;
	/* stdout and stderr as base64 in the JSON, not as text */
	bool output_base64;
	/*
	 * JSON [["stdout"|"stderr", bytes], ...]: the streams' bytes in the
	 * order they were read (of all written, kept or not), when asked for.
	 */
	char *output_order;
	/*
	 * The reason says more of the signal that ended the command than
	 * its number (who sent it; that the command was not started): an
	 * OOM kill counted beside it is said after it, not in its place.
	 */
	bool kill_said;
};

/*
 * The workspace's way out, after the command ends (needs a workspace).
 * Every write is resolved beneath the destination, no symlink followed;
 * device nodes, fifos, sockets, setuid bits and symlinks that leave the
 * tree never come out; changes that would make a host tool run code
 * (the policy's export table) are held back unless allow_risky names them.
 * As root, the export is written by a forked helper with the fs ids and
 * groups of the first user other than root who owns a directory or
 * symlink on the destination's path (the workspace for apply; the
 * directory to or patch is made in), when there is one: only what that
 * user could write is written.
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
	 * duration of the call, the caller's mask restored after); one the
	 * caller has at SIG_IGN (nohup) is left alone, also with tty.
	 */
	bool forward_signals;
	/* Append every event of the run as JSON lines to this file (or NULL). */
	const char *events_path;
	/* The tool call this run is, for attribution ("call" in events). */
	const char *tool_call;
	const struct corral_export_opts *export;	/* or NULL */
	/*
	 * Give the command a pty made inside the sandbox (its controlling
	 * terminal) instead of pipes; the caller's terminal on fd 0, if it is
	 * one, is raw while it runs and restored before corral_run returns.
	 * A SIGTSTP meanwhile (not ignored) is read, and taken as the caller
	 * has it with the terminal restored, raw again after (corral_term_stop).
	 */
	bool tty;
};

/*
 * The caller's terminal, while a sandbox's pty is relayed to it (run -t,
 * exec -t).  corral_term_raw saves fd's settings in *saved and makes it
 * raw (every byte, ^C and ^Z too, goes to the sandbox's pty);
 * corral_term_restore puts back exactly what was saved (async-signal-
 * safe); corral_term_winsize: fd's window size, or 0 rows/cols if none.
 * corral_term_stop, for a SIGTSTP read with SIGTSTP blocked while fd is
 * raw: *saved back on fd, SIGTSTP raised as the caller's disposition
 * says (stopped, by default, until SIGCONT), then fd raw again with its
 * settings then in *saved; -errno if it could not be made raw (cooked).
 * fd < 0: the stop alone.
 */
struct termios;
struct winsize;
CORRAL_PUBLIC
int corral_term_raw(int fd, struct termios *saved);
CORRAL_PUBLIC
void corral_term_restore(int fd, const struct termios *saved);
CORRAL_PUBLIC
void corral_term_winsize(int fd, struct winsize *ws);
CORRAL_PUBLIC
int corral_term_stop(int fd, struct termios *saved);

/*
 * Run argv inside a fresh sandbox built from *p, wait for it, and describe
 * the end in *res.  Returns 0 when the command ran (whatever its status),
 * or a negative errno when the sandbox could not be built (err says why,
 * res->status is CORRAL_ERROR).
 */
CORRAL_PUBLIC
int corral_run(const struct corral_policy *p, const struct corral_run_opts *o,
	       struct corral_result *res, struct corral_err *err);
CORRAL_PUBLIC
void corral_result_free(struct corral_result *res);

/* The process exit status the CLI uses for a result (see corral(1)). */
CORRAL_PUBLIC
int corral_result_exit_code(const struct corral_result *res);
CORRAL_PUBLIC
const char *corral_status_name(enum corral_status s);
/* "timeout" -> CORRAL_TIMEOUT (as a result's JSON names it); -EINVAL if none. */
CORRAL_PUBLIC
int corral_status_from_name(const char *name, enum corral_status *s);
/* One JSON object, malloc'd, no trailing newline. */
CORRAL_PUBLIC
char *corral_result_json(const struct corral_result *res);
struct json_t;
/*
 * The same object as jansson's, a new reference (NULL when out of memory),
 * for a front end that adds to it before it writes it out.
 */
CORRAL_PUBLIC
struct json_t *corral_result_object(const struct corral_result *res);
/*
 * Program output (bytes) as a jansson string, the way results carry it:
 * invalid UTF-8 becomes U+FFFD.  A new reference, NULL when out of memory.
 */
CORRAL_PUBLIC
struct json_t *corral_json_bytes(const char *data, size_t len);
/*
 * The length of the well-formed UTF-8 character at s (at most n bytes);
 * 0 if the bytes there are none (a lone continuation byte such as 0x9b,
 * a cut, an overlong form, a surrogate).  The one rule JSON's strings and
 * the CLI's printable() both go by.
 */
CORRAL_PUBLIC
size_t corral_utf8_char(const char *s, size_t n);
/*
 * A sandbox's host ids as results and GET /v1/sandboxes/{id} carry them:
 * {mapping, uid, gid, range_uid, range_gid, count, idmapped, note}.
 */
CORRAL_PUBLIC
struct json_t *corral_ids_json(const struct corral_ids *ids);
/* Any bytes as a base64 jansson string (a call's output_base64). */
CORRAL_PUBLIC
struct json_t *corral_json_base64(const char *data, size_t len);
/* Base64 (padded) back to bytes: *out malloc'd; -EINVAL if it is not base64. */
CORRAL_PUBLIC
int corral_base64_decode(const char *in, size_t len, char **out, size_t *outlen);

/* ---- the events file as evidence (`corral audit`) ---------------------- */

/*
 * Every line of an events file is one JSON object whose last key, "prev",
 * is the SHA-256 (lowercase hex) of the line before it, byte for byte
 * without its newline; the first line has 64 zeros.
 */
#define CORRAL_AUDIT_HASH_HEX	64

struct corral_audit_report {
	size_t lines;			/* complete lines that verified */
	size_t bad_line;		/* first bad line (from 1); 0: the chain holds */
	bool incomplete;		/* ends in a line without '\n', not checked */
	size_t torn;			/* lines cut short by a crash, chained past */
	size_t torn_line;		/* the first of them */
	size_t gaps;			/* log.gap lines: lines the writer could not write */
	size_t gap_line;		/* the first of them */
	uint64_t gap_lost;		/* the lines they say were lost, all told */
	char head[CORRAL_AUDIT_HASH_HEX + 1];	/* hash of the last verified line */
	char reason[CORRAL_ERR_MAX];	/* "line 7: ..." or what was verified */
};

/* NULL members match everything. */
struct corral_audit_filter {
	const char *sandbox;
	const char *call;
	const char *type;		/* "egress.denied", or "egress" for egress.* */
};

/*
 * Check the chain of the events file at path.  Returns 0 when the file
 * could be read to the end or to its first bad line (r->bad_line says
 * which; r->reason says why, or what was verified), or a negative errno
 * when it could not be read (err names the path).
 */
CORRAL_PUBLIC
int corral_audit_verify(const char *path, struct corral_audit_report *r,
			struct corral_err *err);
/*
 * Print the events of path that match f as a timeline, one line each:
 * "HH:MM:SS.mmm  SEQ  SANDBOX  CALL  TYPE  HOST:PORT KEY=VALUE... / REASON",
 * with a "-- DATE" line whenever the day changes.  Lines that are not
 * events are named, not skipped silently.  Text from the log is escaped:
 * what a sandbox chose (host names, commands) never reaches a terminal raw.
 */
CORRAL_PUBLIC
int corral_audit_show(const char *path, const struct corral_audit_filter *f,
		      FILE *out, struct corral_err *err);

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

CORRAL_PUBLIC
int corral_log_open(struct corral_log **out, const char *path,
		    struct corral_err *err);
/* fn(arg, sandbox id, line, len) for every line written, after it is. */
CORRAL_PUBLIC
void corral_log_observe(struct corral_log *log,
			void (*fn)(void *arg, const char *sandbox,
				   const char *line, size_t len),
			void *arg);
CORRAL_PUBLIC
void corral_log_close(struct corral_log *log);
/*
 * errno of the last line that could not be written (ENOSPC: a full disk),
 * 0 once a line is written again.  Supervision goes on either way.
 */
CORRAL_PUBLIC
int corral_log_error(const struct corral_log *log);
/*
 * Record one event {type, reason} for a sandbox that has no box any more
 * (lost in a crash); its seq follows after_seq, the sandbox's last.
 */
CORRAL_PUBLIC
void corral_log_note(struct corral_log *log, const char *sandbox,
		     uint64_t after_seq, const char *type, const char *reason);
/*
 * Remove the cgroups of supervisors that died without cleaning up; how
 * many.  corral_run and corral serve call it at start.
 */
CORRAL_PUBLIC
int corral_cleanup_stale(void);
/* The same for one supervisor the caller knows is gone (a watchdog). */
CORRAL_PUBLIC
int corral_cleanup_owner(pid_t pid);
CORRAL_PUBLIC
void corral_box_set_idle_freeze(struct corral_box *b, uint64_t ms);
/* Record one event {type, reason} among the box's own (a TTL, say). */
CORRAL_PUBLIC
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
CORRAL_PUBLIC
int corral_box_create(struct event_base *base, struct corral_policy *p,
		      const struct corral_box_opts *o, struct corral_box **out,
		      struct corral_err *err);
/*
 * Kill everything in it and remove every trace (cgroups, fds, listeners).
 * The kernel's part (the namespaces' teardown, then the cgroups) finishes
 * on the loop: run it until it has no events left before freeing it.
 */
CORRAL_PUBLIC
void corral_box_destroy(struct corral_box *b);
/*
 * The same, with why (a front end's words: "the sandbox's TTL expired")
 * in the result of each call still running, after "the sandbox was
 * destroyed while the call ran: ".  NULL: nothing more is said.
 */
CORRAL_PUBLIC
void corral_box_destroy_for(struct corral_box *b, const char *why);

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

CORRAL_PUBLIC
const char *corral_box_id(const struct corral_box *b);
CORRAL_PUBLIC
enum corral_box_state corral_box_state(const struct corral_box *b);
CORRAL_PUBLIC
const char *corral_box_state_name(enum corral_box_state s);
CORRAL_PUBLIC
const char *corral_box_halt_reason(const struct corral_box *b);	/* or NULL */
CORRAL_PUBLIC
void corral_box_meters(struct corral_box *b, struct corral_meters *m);
CORRAL_PUBLIC
void corral_box_layers(const struct corral_box *b, struct corral_layers *l);
/* Processes of calls that have not ended (background ones included). */
CORRAL_PUBLIC
size_t corral_box_running(const struct corral_box *b);

/*
 * pause: freeze by a person's order; calls answer "paused" until resume.
 * A resume after the policy's CPU or wall-time budget was spent halts the
 * box instead (CORRAL_E_HALTED, with the reason): it does not run again.
 */
CORRAL_PUBLIC
int corral_box_pause(struct corral_box *b, bool paused, struct corral_err *err);
/* The same authority as an abort criterion: freeze, record, kill. */
CORRAL_PUBLIC
int corral_box_halt(struct corral_box *b, const char *reason,
		    struct corral_err *err);

struct corral_call_opts {
	char *const *argv;
	/*
	 * argv is { "/bin/sh", "-c", LINE }: where LINE is a simple command
	 * that /bin/sh (dash) would only look up and exec ("cd DIR && "
	 * before it and " 2>&1" after it too), it is exec'd without the
	 * shell, as dash would (src/lib/shell.c); anything else, and a
	 * failed cd or exec, goes to the shell.  The call's record still
	 * names argv.  A command killed by a signal is then reported as
	 * killed (exit_code 128 + N, as from the shell), without the line the
	 * shell would have written to stderr.
	 */
	bool sh_fast;
	char *const *env;		/* NAME=VALUE over the policy's, or NULL */
	const char *cwd;		/* inside; NULL: /workspace */
	/* NULL: generated; a running call's of the box: -EEXIST */
	const char *tool_call;
	const char *stdin_data;		/* given whole, then EOF; NULL: EOF */
	size_t stdin_len;
	uint64_t timeout_ms;		/* 0: the policy's */
	bool keep_tail;			/* keep only the last bytes, not head and tail */
	uint64_t output_bytes;		/* kept a stream; 0 or over: the policy's */
	bool output_base64;		/* the result's stdout/stderr as base64 */
	bool output_order;		/* record the streams' interleaving */
	/* a background process: not held to the policy's call_timeout */
	bool background;
	/*
	 * A pty made inside the sandbox (its own devpts) is the command's
	 * stdin, stdout and stderr and its controlling terminal, in a session
	 * of its own: its output is stream 1, input goes through
	 * corral_call_tty_write().  rows, cols: its first size (0: none).
	 */
	bool tty;
	unsigned short rows, cols;
	/* After corral_call_tty_write() took less than it was given: room. */
	void (*on_tty_room)(void *arg, struct corral_call *c);
	bool stdin_open;		/* stdin stays open: corral_call_write_stdin() */
	void (*on_start)(void *arg, struct corral_call *c);
	void (*on_output)(void *arg, struct corral_call *c, int stream,
			  const char *data, size_t len);	/* 1 out, 2 err */
	/* The call has ended; res lives until corral_call_free(). */
	void (*on_done)(void *arg, struct corral_call *c,
			const struct corral_result *res);
	void *arg;
};

/*
 * Start a call.  A frozen box is thawed first, unless the policy's CPU or
 * wall-time budget was spent meanwhile: then it is halted and refuses, as
 * a paused, halted or dead one does (CORRAL_E_PAUSED, CORRAL_E_HALTED,
 * CORRAL_E_GONE; err says why, with the halt reason),
 * and so does a tool_call a call still running in the box has (-EEXIST):
 * the record names calls by it.
 */
CORRAL_PUBLIC
int corral_box_exec(struct corral_box *b, const struct corral_call_opts *o,
		    struct corral_call **out, struct corral_err *err);
CORRAL_PUBLIC
pid_t corral_call_pid(const struct corral_call *c);	/* as the sandbox sees it */
CORRAL_PUBLIC
pid_t corral_call_host_pid(const struct corral_call *c);
CORRAL_PUBLIC
const char *corral_call_id(const struct corral_call *c);
/* The result once done, else NULL. */
CORRAL_PUBLIC
const struct corral_result *corral_call_result(const struct corral_call *c);
/* What was kept of stream 1 or 2 so far. */
CORRAL_PUBLIC
const struct corral_output *corral_call_output(const struct corral_call *c,
					       int stream);
/*
 * Stop (and start again) reading the call's output: its writes block once
 * the pipe is full.  For a caller that forwards output to a client slower
 * than the command: the command waits, nothing piles up in memory.
 */
CORRAL_PUBLIC
void corral_call_hold_output(struct corral_call *c, bool hold);
/*
 * More stdin for a call started with stdin_open (after stdin_data, if
 * any); eof closes it once all is written.  -EPIPE once it is closed or
 * the call has ended, -EAGAIN while more than 1 MiB waits to be read.
 */
CORRAL_PUBLIC
int corral_call_write_stdin(struct corral_call *c, const void *data, size_t len,
			    bool eof, struct corral_err *err);
/* Signal the call and everything it started (its cgroup). */
CORRAL_PUBLIC
int corral_call_kill(struct corral_call *c, int sig);
/*
 * End the call for a bound of the caller's own (a terminal's idle time):
 * as its wall-clock timeout does, it and everything it started are
 * killed, the record gets a "timeout" event with limit_ms and why, and
 * its result is "timeout", its reason "killed: WHY".  Nothing once it
 * has ended or timed out.
 */
CORRAL_PUBLIC
int corral_call_time_out(struct corral_call *c, uint64_t limit_ms, const char *why);
/*
 * The CPU time the call's processes have used so far, what they started
 * included (its cgroup; without one, its process tree): -ESRCH once done.
 */
CORRAL_PUBLIC
int corral_call_cpu_ns(struct corral_call *c, uint64_t *ns);
/* Whether the call's box is paused by a person (POST /pause): it waits. */
CORRAL_PUBLIC
bool corral_call_paused(const struct corral_call *c);
/*
 * A call's terminal (o.tty).  tty_write: bytes as typed (^C is the
 * terminal's to turn into SIGINT); returns how many the pty took now, 0
 * when none (on_tty_room says when to try again), -EIO once it is gone,
 * -ENOTTY without one.  tty_resize: the window's size; the foreground job
 * gets SIGWINCH.  tty_hangup: close the terminal, as a closed terminal
 * window does: SIGHUP inside, the output ends; the call ends as its
 * process does (kill it to be sure).
 */
CORRAL_PUBLIC
ssize_t corral_call_tty_write(struct corral_call *c, const void *data, size_t len);
CORRAL_PUBLIC
int corral_call_tty_resize(struct corral_call *c, unsigned short rows,
			   unsigned short cols);
CORRAL_PUBLIC
void corral_call_tty_hangup(struct corral_call *c);
/* Forget a call; one still running is killed first (no on_done then). */
CORRAL_PUBLIC
void corral_call_free(struct corral_call *c);

/*
 * Files, as the sandbox's user sees them: path is absolute inside the
 * sandbox, resolved from its root with no symlink followed and no way
 * out; /proc and /sys are refused; only regular files are opened.
 */
CORRAL_PUBLIC
int corral_box_open(struct corral_box *b, const char *path, int flags,
		    int *fd, struct corral_err *err);
CORRAL_PUBLIC
int corral_box_unlink(struct corral_box *b, const char *path,
		      struct corral_err *err);

struct corral_dirent {
	char name[256];
	char type;			/* 'f' file, 'd' dir, 'l' symlink, 'o' other */
	uint64_t size;
	unsigned int mode;
};

/* A directory's entries, malloc'd (free it); *n how many. */
CORRAL_PUBLIC
int corral_box_list(struct corral_box *b, const char *path,
		    struct corral_dirent **out, size_t *n,
		    struct corral_err *err);

/*
 * A directory made (mode & 0777) as the sandbox's user; parents: the
 * missing ones too, and an existing directory is no error (mkdir -p).
 */
CORRAL_PUBLIC
int corral_box_mkdir(struct corral_box *b, const char *path, unsigned mode,
		     bool parents, struct corral_err *err);
/* A name moved (a symlink is moved, never followed); replace: over one. */
CORRAL_PUBLIC
int corral_box_rename(struct corral_box *b, const char *from, const char *to,
		      bool replace, struct corral_err *err);

/* One entry of a walk: path relative to the walked directory. */
struct corral_entry {
	const char *path;
	char type;			/* 'f' file, 'd' dir, 'l' symlink, 'o' other */
	uint64_t size;
	unsigned int mode;		/* & 07777 */
	int64_t mtime;
	const char *target;		/* a symlink's, read, never followed */
	bool wire;			/* a tripwire: listed, never opened */
};

/*
 * The entries under path in name order, a directory before its contents
 * (recursive: all the way down, never through a symlink, /proc or /sys),
 * at most max; *truncated when there were more.  fn returns 0 to go on,
 * 1 to stop there as at max (*truncated), or -errno to fail the walk.
 */
CORRAL_PUBLIC
int corral_box_walk(struct corral_box *b, const char *path, bool recursive,
		    size_t max, int (*fn)(void *arg, const struct corral_entry *e),
		    void *arg, bool *truncated, struct corral_err *err);

/*
 * The same, resumed after the entry named after (a path relative to path,
 * as an entry's e->path; NULL or "": from the start): the entries that
 * follow it in the walk's order, at most max.  after is only compared
 * with names, never opened: an entry the tree lost since is passed by.
 */
CORRAL_PUBLIC
int corral_box_walk_after(struct corral_box *b, const char *path, bool recursive,
			  const char *after, size_t max,
			  int (*fn)(void *arg, const struct corral_entry *e),
			  void *arg, bool *truncated, struct corral_err *err);

/*
 * One directory's entries, as corral_box_walk(b, path, false, max, ...),
 * when it holds at most max names; else *more, fn never called, and no
 * name past the first max + 1 read: a caller that must not wait long
 * (the daemon's loop) makes a large directory's listing elsewhere.
 * fn returning 1 stops the walk there: *truncated, not *more.
 */
CORRAL_PUBLIC
int corral_box_list_small(struct corral_box *b, const char *path, size_t max,
			  int (*fn)(void *arg, const struct corral_entry *e),
			  void *arg, bool *more, bool *truncated, struct corral_err *err);

/*
 * A directory as a tar archive (regular files, directories, symlinks as
 * links; other files and tripwires left out), handed to write in pieces;
 * more than max_bytes of it is -EFBIG.
 */
CORRAL_PUBLIC
int corral_box_tar(struct corral_box *b, const char *path, uint64_t max_bytes,
		   int (*write)(void *arg, const void *buf, size_t len),
		   void *arg, struct corral_err *err);

/*
 * The caller's work on the box, off its event loop: work(b, work_arg, fd,
 * err) runs in a worker process forked for it (the caller's memory as it
 * was at the fork: work_arg need live only until this returns), with the
 * box's root and fd (the caller's file, from its offset) among its fds.
 * It returns 0 (or more) or a negative errno with err set.  Returns 0 and
 * *job, then done(arg, r, err) follows from the loop; a box destroyed
 * meanwhile ends it with -ESRCH, halted with CORRAL_E_HALTED (the tree
 * it reads was frozen or killed).  corral_box_work_cancel() kills the
 * worker (done is not called); what it wrote to fd is the caller's to
 * throw away.  For a walk whose cost the sandbox chooses: dir, the
 * directory it walks (or NULL), is judged and opened now as the walk will
 * (corral_box_walk's rules), so a path that names none fails with no
 * worker forked.
 */
struct corral_box_work;
typedef int (*corral_box_work_fn)(struct corral_box *b, void *work_arg, int fd,
				  struct corral_err *err);
typedef void (*corral_box_work_done_fn)(void *arg, int r, const struct corral_err *err);
CORRAL_PUBLIC
int corral_box_work_start(struct corral_box *b, const char *dir, corral_box_work_fn work,
			  void *work_arg, int fd, corral_box_work_done_fn done, void *arg,
			  struct corral_box_work **job, struct corral_err *err);
CORRAL_PUBLIC
void corral_box_work_cancel(struct corral_box_work *job);

/*
 * corral_box_tar, made by such a worker into fd: a tree's cost is the
 * sandbox's to choose, and skipped entries (FIFOs) cost the walk without
 * adding a byte.
 */
CORRAL_PUBLIC
int corral_box_tar_start(struct corral_box *b, const char *path, uint64_t max_bytes,
			 int fd, corral_box_work_done_fn done, void *arg,
			 struct corral_box_work **job, struct corral_err *err);

struct corral_untar {
	uint64_t entries, bytes;
};

/*
 * A tar archive (plain or gzip) unpacked into dir, made if missing.  Every
 * entry is judged before anything is written: a name that is absolute or
 * climbs with "..", a device, FIFO or socket, a setuid or setgid bit, a
 * hard link to outside the archive's own tree, or more bytes than the
 * sandbox's disk has free refuse the whole archive.  Nothing is followed
 * through a symlink, also one the archive itself made.  What fails
 * midway is undone as far as it made new names (a file it replaced
 * stays replaced).
 */
CORRAL_PUBLIC
int corral_box_untar(struct corral_box *b, const char *dir, const void *data,
		     size_t len, struct corral_untar *st, struct corral_err *err);

/*
 * The same, off the caller's event loop: by a worker process forked for
 * it (with its own copy of data, which the caller may free at once).
 * Returns 0 and *job, then done(arg, r, st, err) follows from the loop;
 * a box destroyed meanwhile ends it with -ESRCH, and
 * corral_box_untar_cancel() kills the worker and ends it with -ECANCELED
 * (what it had unpacked stays, as after a failure midway).  An archive's
 * cost is the sandbox's disk, not its own size: 900 KiB of gzip'd zeros
 * unpack to 900 MiB.
 */
struct corral_box_untar_job;
typedef void (*corral_box_untar_fn)(void *arg, int r, const struct corral_untar *st,
				    const struct corral_err *err);
CORRAL_PUBLIC
int corral_box_untar_start(struct corral_box *b, const char *dir, const void *data,
			   size_t len, corral_box_untar_fn done, void *arg,
			   struct corral_box_untar_job **job, struct corral_err *err);
/*
 * The same from a file (a spool the caller wrote, any offset: it is read
 * from its start, twice), which the worker gets as it is: no copy of the
 * archive in the caller's memory, nor in the worker's.
 */
CORRAL_PUBLIC
int corral_box_untar_fd_start(struct corral_box *b, const char *dir, int fd,
			      corral_box_untar_fn done, void *arg,
			      struct corral_box_untar_job **job, struct corral_err *err);
CORRAL_PUBLIC
void corral_box_untar_cancel(struct corral_box_untar_job *job);

/*
 * The box's workspace: what it changed (from the overlay's upper layer,
 * never following what the sandbox made) and the way out, as for
 * corral_run's export.  path (relative to /workspace, or NULL) keeps the
 * changes at or beneath it.  diff: a JSON array of changes, or with patch
 * the git patch of what an export would let out (held changes left out).
 */
CORRAL_PUBLIC
int corral_box_diff(struct corral_box *b, const char *path, bool patch,
		    char **out, size_t *len, struct corral_err *err);

/* The host workspace the box was made on, or NULL. */
CORRAL_PUBLIC
const char *corral_box_workspace(const struct corral_box *b);

/*
 * Where the sandbox writes on the host: the directories its --rw binds
 * share, by identity.  A symlink found in one of them (or below) is the
 * sandbox's to have made, and a caller writing or reading a host path on
 * its behalf must not follow it: corral_dest_parent.
 */
struct corral_dir_id {
	uint64_t dev, ino;
};

/* The box's, in *ids (malloc'd, NULL if none); 0 or -ENOMEM. */
CORRAL_PUBLIC
int corral_box_rw_dirs(const struct corral_box *b, struct corral_dir_id **ids,
		       size_t *n);

/*
 * The directory a new entry at path goes in, opened (O_PATH) one
 * component at a time with its symlinks followed as the kernel would,
 * but none that lies in or below one of rw's nrw directories (-EPERM:
 * the sandbox may have put it there to lead the caller's write into a
 * directory of its choosing).  The entry's last name in *name (malloc'd);
 * dir: path names a directory, and may end in '/'.  flag names path in
 * messages ("--patch").  The fd, or -errno with err set.
 */
CORRAL_PUBLIC
int corral_dest_parent(const struct corral_dir_id *rw, size_t nrw, const char *flag,
		       const char *path, bool dir, char **name, struct corral_err *err);
/*
 * What path names, opened (O_PATH) by the same rule: a file the caller
 * reads for the sandbox (a copy in) is not one a symlink of the
 * sandbox's led it to.
 */
CORRAL_PUBLIC
int corral_path_open(const struct corral_dir_id *rw, size_t nrw, const char *flag,
		     const char *path, struct corral_err *err);

/*
 * A file made beside dir's entry name that takes the name only once it is
 * whole (corral_newfile_keep renames it onto name, replacing what was
 * there); dropped, nothing of it stays.  Unnamed while written (O_TMPFILE)
 * where the filesystem allows, so that a writer killed by SIGKILL leaves
 * nothing; else named tmp, which a caller's signal handler may remove
 * while named is set.  dir and name are the caller's, and must outlive it.
 */
struct corral_newfile {
	int dir, fd;
	const char *name;
	bool named;		/* tmp exists in dir */
	char tmp[256];
};

/* The new file's fd (f->fd), or -errno with err set. */
CORRAL_PUBLIC
int corral_newfile_open(struct corral_newfile *f, int dir, const char *name,
			mode_t mode, struct corral_err *err);
/* Whole: closed, and renamed onto name; else dropped, -errno, err set. */
CORRAL_PUBLIC
int corral_newfile_keep(struct corral_newfile *f, struct corral_err *err);
/* Not whole: closed, and nothing of it left. */
CORRAL_PUBLIC
void corral_newfile_drop(struct corral_newfile *f);

struct corral_box_export_opts {
	const char *to;			/* a new host directory */
	bool apply;			/* onto the workspace the box was made on */
	bool patch;			/* a git patch, handed back in *patch */
	char *const *allow_risky;	/* globs let through the hold table */
	size_t nallow_risky;
	/*
	 * to and apply write on the host as this user: a forked helper takes
	 * its fs ids and groups first, so it writes only where the user could.
	 */
	uid_t uid;
	gid_t gid;
};

/*
 * *report: JSON {mode, changes, exported, held, conflicts[, error]}, set
 * also on failure when something was done.  A halted box exports nothing
 * (CORRAL_E_HALTED).  An apply records what it wrote, so that the next
 * apply takes only later host changes for conflicts.  Its events: export,
 * export.held, export.allow_risky, export.baseline.
 */
CORRAL_PUBLIC
int corral_box_export(struct corral_box *b, const struct corral_box_export_opts *o,
		      char **report, char **patch, size_t *patch_len,
		      struct corral_err *err);

/*
 * The same diff (corral_box_diff) or export patch (corral_box_export with
 * patch), made off the caller's event loop: by a worker process forked
 * for it, which writes the diff's JSON or the patch into fd (the caller's
 * file, from its offset) as it goes, never whole in memory.  Returns 0
 * and *job, then done(arg, r, report, err) follows from the loop: report
 * is the export's (JSON, as corral_box_export's; NULL for a diff), also
 * on failure when something was done.  The export's events are emitted
 * then, by the caller's process.  A box destroyed meanwhile ends the job
 * with -ESRCH.  corral_box_job_cancel() kills the worker (done is not
 * called); what it wrote to fd is the caller's to throw away.  The worker
 * may take 512 MiB beyond what it had at its fork (RLIMIT_DATA): a job
 * that needs more ends with -EFBIG and a sentence saying so; what it
 * took is a "build" event.
 */
struct corral_box_job;
typedef void (*corral_box_job_fn)(void *arg, int r, const char *report,
				  const struct corral_err *err);
CORRAL_PUBLIC
int corral_box_diff_start(struct corral_box *b, const char *path, bool patch, int fd,
			  corral_box_job_fn done, void *arg,
			  struct corral_box_job **job, struct corral_err *err);
CORRAL_PUBLIC
int corral_box_export_start(struct corral_box *b, const struct corral_box_export_opts *o,
			    int fd, corral_box_job_fn done, void *arg,
			    struct corral_box_job **job, struct corral_err *err);
CORRAL_PUBLIC
void corral_box_job_cancel(struct corral_box_job *job);

/*
 * A snapshot: the box's workspace upper layer copied into dir (a new
 * directory), while the box is frozen (then thawed, unless it was frozen
 * already); with no freezer (unprivileged without delegated cgroups) it is
 * copied running, and info->frozen says so.  Device nodes other than
 * overlay whiteouts, fifos and sockets are left out (skipped), setuid bits
 * dropped, symlinks copied as links; more than max_bytes or max_files is
 * -EDQUOT.  Returns 0 and done(arg, r, info, err) follows (from the loop,
 * or before the return), or a negative errno and done is not called.  The
 * copy is made by a worker process forked for it, off the caller's loop
 * (the box stays frozen until it ends); one that fails removes what it
 * copied, one cut short (the box thawed by a call or a resume, or
 * destroyed) leaves it in dir: corral_snapshot_remove().
 */
struct corral_snapshot_info {
	uint64_t bytes, files, skipped;
	bool frozen;
};
typedef void (*corral_snapshot_fn)(void *arg, int r,
				   const struct corral_snapshot_info *info,
				   const struct corral_err *err);
CORRAL_PUBLIC
int corral_box_snapshot(struct corral_box *b, const char *dir, uint64_t max_bytes,
			uint64_t max_files, corral_snapshot_fn done, void *arg,
			struct corral_err *err);
/*
 * A budget that several snapshots draw on at once (a daemon's, for all
 * its sandboxes): each copy is a worker process of its own, and a limit
 * handed to each as it starts (what the finished snapshots leave) let
 * copies made side by side take that much each.  The tally is memory the
 * caller's processes share: every copy under way writes its bytes there,
 * and stops with -EDQUOT once the snapshots kept (the caller's count,
 * corral_snapshot_tally_keep) and all those being made pass budget.  Made
 * before the copies' workers are forked; used from the caller's loop.
 */
struct corral_snapshot_tally;
CORRAL_PUBLIC
struct corral_snapshot_tally *corral_snapshot_tally_new(uint64_t budget,
							struct corral_err *err);
CORRAL_PUBLIC
void corral_snapshot_tally_keep(struct corral_snapshot_tally *t, uint64_t kept);
CORRAL_PUBLIC
void corral_snapshot_tally_free(struct corral_snapshot_tally *t);
/* corral_box_snapshot, counted in tally as well as against max_bytes */
CORRAL_PUBLIC
int corral_box_snapshot_tallied(struct corral_box *b, const char *dir,
				uint64_t max_bytes, uint64_t max_files,
				struct corral_snapshot_tally *tally,
				corral_snapshot_fn done, void *arg,
				struct corral_err *err);
/* The snapshot under way cut short: done(-ECANCELED) now, its worker killed. */
CORRAL_PUBLIC
void corral_box_snapshot_cancel(struct corral_box *b);
/*
 * Start the workspace of sandboxes made with p as the snapshot at dir
 * left it.  As root the tree is taken here as a detached mount (the
 * sandbox's user could not walk to it); else the sandbox, the caller's own
 * uid, opens dir itself.  *fd (or -1) and dir stay the caller's: close the
 * fd once the sandbox is built (corral_box_create has returned).
 */
CORRAL_PUBLIC
int corral_policy_set_workspace_layer(struct corral_policy *p, const char *dir,
				      int *fd, struct corral_err *err);
/* Remove a snapshot's tree (whiteouts and 0555 directories too); -errno. */
CORRAL_PUBLIC
int corral_snapshot_remove(const char *dir);

/* ---- images (OCI) ----------------------------------------------------- */

/*
 * A content-addressed store of OCI images under the state directory:
 * blobs by sha256 (verified whenever read), layers unpacked once by their
 * diff-id (uncompressed digest) into overlay form, and an index of names.
 * Imports are offline: an OCI image layout directory, an oci-archive tar,
 * or a `docker save` / `podman save` tarball.
 */
#define CORRAL_DIGEST_MAX 72		/* "sha256:" + 64 hex + NUL, rounded */

struct corral_image_store;

/*
 * The one rule for where the store lives: STATE_DIR/images when a state
 * directory is given (the daemon's --state-dir), else as root
 * /var/lib/corral/images, else $XDG_DATA_HOME/corral/images or
 * ~/.local/share/corral/images.  malloc'd; NULL with errno when there is
 * no HOME to put it in.
 */
CORRAL_PUBLIC
char *corral_image_store_path(const char *state_dir);
/* Open (creating it, mode 0700) the store at corral_image_store_path(). */
CORRAL_PUBLIC
int corral_image_store_open(struct corral_image_store **out,
			    const char *state_dir, struct corral_err *err);
CORRAL_PUBLIC
void corral_image_store_close(struct corral_image_store *s);
CORRAL_PUBLIC
const char *corral_image_store_dir(const struct corral_image_store *s);

/*
 * A name as an archive tags it or a user types it, normalised the way
 * docker does: "busybox" -> "docker.io/library/busybox:latest",
 * "docker.io/x/y" -> "docker.io/x/y:latest", "quay.io/a/b@sha256:HEX"
 * kept.  A bare "sha256:HEX" is a digest, not a name (-EINVAL here).
 */
CORRAL_PUBLIC
int corral_image_ref_normalize(const char *ref, char *out, size_t len,
			       struct corral_err *err);

/* Budgets of one import; a layer over one is refused, with which. */
struct corral_image_limits {
	uint64_t max_bytes;		/* all layers' files, as declared (sparse too) */
	uint64_t max_files;		/* entries in all layers */
	uint64_t max_ratio;		/* uncompressed : compressed, per layer ... */
	uint64_t ratio_after;		/* ... once a layer has given this many bytes */
};
CORRAL_PUBLIC
void corral_image_limits_init(struct corral_image_limits *l);

struct corral_image_import_report {
	char **digests;			/* manifest digests imported */
	size_t ndigests;
	char **names;			/* normalised names now pointing at them */
	size_t nnames;
	unsigned int layers_new, layers_present, blobs_new, blobs_present;
	/* what unpacking changed or refused to create, one sentence each */
	char **notes;
	size_t nnotes;
};
CORRAL_PUBLIC
void corral_image_import_report_free(struct corral_image_import_report *r);

/*
 * Import FILE or DIR.  extra_name, if not NULL, also names the image (an
 * archive that holds exactly one).  As root the layers are unpacked by a
 * child that runs as the agent's host uid/gid in corral's id range (65534
 * where the range is in use) with no groups, no_new_privs and Landlock.
 */
CORRAL_PUBLIC
int corral_image_import(struct corral_image_store *s, const char *path,
			const char *extra_name,
			const struct corral_image_limits *lim,
			struct corral_image_import_report *rep,
			struct corral_err *err);

/* What the image's config asks of a run (all may be NULL / empty). */
struct corral_image_config {
	char **env;			/* "NAME=VALUE" */
	size_t nenv;
	char **entrypoint;
	size_t nentrypoint;
	char **cmd;
	size_t ncmd;
	char *workdir;
	char *user;			/* "uid", "uid:gid", "name", "name:group" */
	char *os, *arch;
};

struct corral_image {
	char digest[CORRAL_DIGEST_MAX];		/* the manifest's */
	char config_digest[CORRAL_DIGEST_MAX];
	char **names;
	size_t nnames;
	char **layers;			/* unpacked layer roots, lowest first */
	char **diff_ids;
	size_t nlayers;
	uint64_t size;			/* bytes of the layers' blobs */
	char *imported;			/* RFC 3339, UTC */
	struct corral_image_config config;
};

/* NAME[:TAG], NAME@sha256:HEX, sha256:HEX or a unique hex prefix (>= 12). */
CORRAL_PUBLIC
int corral_image_resolve(struct corral_image_store *s, const char *ref,
			 struct corral_image **out, struct corral_err *err);
/* Every image, sorted by first name (unnamed last). */
CORRAL_PUBLIC
int corral_image_list(struct corral_image_store *s, struct corral_image ***out,
		      size_t *n, struct corral_err *err);
CORRAL_PUBLIC
void corral_image_free(struct corral_image *img);
CORRAL_PUBLIC
void corral_image_list_free(struct corral_image **imgs, size_t n);
/* One JSON object (malloc'd): digests, names, layers, config. */
CORRAL_PUBLIC
char *corral_image_json(const struct corral_image *img);
/*
 * Run on the image: its layers become p's root; its Env is added where p
 * sets no such name; its WorkingDir is p's unless p has one.  Its User
 * (not root) names the sandbox's one identity, uid 1000, and gives its
 * home, as the image's /etc/passwd lists them (image_user.c).
 */
CORRAL_PUBLIC
int corral_policy_apply_image(struct corral_policy *p, const struct corral_image *img,
			      struct corral_err *err);
/*
 * p->image (filesystem.image), if set, resolved in the store of state_dir
 * (corral_image_store_path) and applied as corral_policy_apply_image does;
 * *out the image (free it after the run), NULL when p names none.  Only
 * reads the store: nothing is imported.  Never waits: while an import or
 * a removal holds the store, -EAGAIN (a daemon's event loop calls this).
 */
CORRAL_PUBLIC
int corral_policy_use_image(struct corral_policy *p, const char *state_dir,
			    struct corral_image **out, struct corral_err *err);
/*
 * The command docker would run: Entrypoint, then argv (or, if argv is
 * empty, Cmd).  malloc'd vector of borrowed strings, NULL-terminated;
 * -EINVAL when there is nothing to run.
 */
CORRAL_PUBLIC
int corral_image_argv(const struct corral_image *img, char *const *argv,
		      char ***out, struct corral_err *err);
/*
 * A name: drop that name (the image goes when no name is left).  A
 * digest: drop the image and all its names.  Then remove the blobs and
 * layers no image uses any more.
 */
CORRAL_PUBLIC
int corral_image_remove(struct corral_image_store *s, const char *ref,
			struct corral_err *err);

/* ---- OCI containers (container.c, container_exec.c) ------------------ */

/*
 * One container of the OCI runtime (`corral oci`), supervised by a
 * process of its own, the monitor, which runs corral_container_monitor()
 * until the container's init exits.  The monitor's parent is the CLI's
 * `create`, which exits once the container is created: init, cloned as
 * that parent's child, is then adopted by the engine's shim.
 */
/* process.rlimits: applied to the process, never above its current hard limit */
struct corral_rlimit {
	int resource;			/* RLIMIT_* */
	uint64_t soft, hard;
};

struct corral_container_opts {
	const struct corral_policy *p;	/* config.json and the operator's policy */
	const char *id;
	char *const *argv;		/* process.args */
	const char *hostname;		/* NULL: "corral" */
	const struct corral_rlimit *rlimits;
	size_t nrlimits;
	/*
	 * A network namespace to join (a Kubernetes pod's), or -1: a new one.
	 * Not with the egress proxy, which needs the sandbox's own.
	 */
	int net_fd;
	/*
	 * The process's stdin, stdout, stderr: the engine's shim's own fds,
	 * passed through (the one front end whose caller owns what the
	 * command writes to), always closed here.  Unused with tty.
	 */
	int stdio[3];
	bool tty;			/* a pty made inside; its master ... */
	int console_fd;			/* ... goes here (SCM_RIGHTS), or -1 */
	unsigned short console_rows;	/* its size before it goes (0 0: the */
	unsigned short console_cols;	/* kernel's, none until a resize) */
	const char *ctl_path;		/* the monitor's socket (a new path) */
	const char *events_path;	/* its audit log (hash-chained) */
	const char *call;		/* attribution in the events ("call"), or NULL */
	/*
	 * Where the monitor says "created PID\n" once init waits for its
	 * start, or "error MESSAGE\n"; then closed.
	 */
	int ready_fd;
};

/* Run the monitor until the container's init exits; 0 or a negative errno. */
CORRAL_PUBLIC
int corral_container_monitor(const struct corral_container_opts *o,
			     struct corral_err *err);

/*
 * A request to a container's monitor, one line: "state", "start",
 * "pause", "resume", "kill SIG", "kill-all SIG", "ps", "join PID",
 * "update MEMORY PIDS CPUS" (0: unchanged), "stats" ("ok OOM-KILLS
 * JSON", runc's types.Stats).  reply: "ok ..." or the
 * monitor's error.  -ENOENT / -ECONNREFUSED: no monitor (it has exited);
 * -EMSGSIZE: an "ok" answer longer than len - 1 (never cut: "ps" lists
 * every pid, up to 128 KiB of them).
 */
CORRAL_PUBLIC
int corral_container_ctl(const char *ctl_path, const char *req, char *reply,
			 size_t len, struct corral_err *err);

/*
 * An OCI exec: a process joining the container of init (a host pid)
 * through setns(2), in its cgroup (via the monitor at ctl_path), under
 * the same layers as its command (the agent's identity, Landlock, no
 * capabilities, seccomp).  It is the caller's child (the shim adopts it
 * when the caller exits); its host pid in *pid.
 */
struct corral_container_exec_opts {
	const struct corral_policy *p;
	pid_t init;
	const char *ctl_path;
	char *const *argv;
	char *const *envp;		/* exactly the process's environment */
	const char *cwd;
	const struct corral_rlimit *rlimits;
	size_t nrlimits;
	bool tty;			/* a pty of the container's devpts ... */
	int console_fd;			/* ... whose master goes here */
	unsigned short console_rows;	/* its size before it goes, or 0 0 */
	unsigned short console_cols;
};

CORRAL_PUBLIC
int corral_container_exec(const struct corral_container_exec_opts *o, pid_t *pid,
			  struct corral_err *err);

/* ---- credentials in memory --------------------------------------------- */
/*
 * A copy of len bytes of s (and a NUL) in memory that no child process
 * inherits and no core file holds (MADV_WIPEONFORK, MADV_DONTDUMP): a
 * sandbox's init, and every helper that reads hostile input, is a fork
 * of its supervisor.  For a daemon's token, say.  NULL with errno set.
 * corral_secret_free() zeroes it and gives it back.
 */
CORRAL_PUBLIC
char *corral_secret_dup(const char *s, size_t len);
CORRAL_PUBLIC
void corral_secret_free(char *s);
/*
 * Call first, before any libevent or jansson call: every block libevent
 * frees (the heads of requests, with a daemon's token; the proxy's
 * buffers, with a secret swapped in) and every block jansson frees (the
 * request bodies and policies parsed) is zeroed first, so that no fork
 * made later finds it in the free memory it inherits; libevent's live
 * blocks are zeroed in the library's own forks that take hostile input
 * (a sandbox's init, the image unpacker).  (corral's own binary zeroes
 * every freed block, whichever library frees it.)
 */
CORRAL_PUBLIC
void corral_memory_init(void);
/*
 * After corral_memory_init, in a daemon none of whose forks use libevent
 * or TLS again (each forgets, as a sandbox's init does, or never calls
 * them, as its helpers): from now on a fork inherits none of libevent's
 * live blocks, nor OpenSSL's (the TLS plugin's, now or once it is
 * loaded), not even until it forgets (MADV_WIPEONFORK), and the daemon's
 * writes to them after a fork copy no page.  0, or -errno of the mark
 * that failed (the mappings still to come are marked all the same; a
 * plugin loaded later whose mark fails is not loaded).
 */
CORRAL_PUBLIC
int corral_memory_unshared(void);
/*
 * For a process that forks many sandboxes (corral serve), as root, before
 * its first fork and while it has one thread: fill its own seccomp chain
 * ahead with filters that allow every call, so that each sandbox it forks
 * skips most of the filling that bounds what a process inside may stack
 * (8 filters of 4096 instructions, 3 ms of kernel CPU a start: SECURITY.md,
 * seccomp row).  Its own calls pass them through the kernel's cache.  Best
 * effort: it does nothing unprivileged, under another's filter or where
 * the kernel refuses; 0, or -errno if no memory.
 */
CORRAL_PUBLIC
int corral_seccomp_prefill(struct corral_err *err);

/*
 * For a daemon that cannot fill its own chain so (unprivileged): a thread
 * of this process's that fills the same chain on itself alone
 * (no_new_privs on it alone, never on the caller's), starting now, and
 * clones each sandbox's init, which then starts with it (SECURITY.md,
 * seccomp row).  Best effort: without it (under another's filter, a
 * chain filled already, no thread to be had), each init fills its own,
 * as before.
 */
CORRAL_PUBLIC
void corral_launcher_start(void);

/* ---- TLS for a server of the caller's ---------------------------------- */
/*
 * `corral serve --listen` over TLS (1.2 or later): the certificate chain
 * and private key of two PEM files, through the TLS plugin (corral-tls.so,
 * next to the binary).  The key's secret is kept where no fork finds it,
 * and a key file anyone may read is refused.  No session is resumed.
 * With client_ca_file (PEM, or NULL), a client must also present a
 * certificate that CA signed, or its handshake fails.  NULL with err set,
 * naming the file and why.
 */
struct corral_tls_server;
struct bufferevent;
CORRAL_PUBLIC
struct corral_tls_server *corral_tls_server_new(const char *cert_file, const char *key_file,
						const char *client_ca_file,
						struct corral_err *err);
/*
 * The same files read again, with the same checks (a renewed
 * certificate): connections made from now on use them, those open keep
 * what they began with.  On an error (err names the file), s goes on
 * with what it had.
 */
CORRAL_PUBLIC
int corral_tls_server_reload(struct corral_tls_server *s, struct corral_err *err);
/*
 * fn(fd, arg) is asked at every client's ClientHello, with the
 * connection's socket, before any of the handshake's cryptography is done:
 * false ends the handshake (an alert), at the cost of reading one message.
 * For a server that limits how fast a peer may make it work.  fn and arg
 * must stay valid until corral_tls_server_free().
 */
CORRAL_PUBLIC
void corral_tls_server_check_hello(struct corral_tls_server *s,
				   bool (*fn)(int fd, void *arg), void *arg);
/*
 * A connection's bufferevent, for evhttp_set_bevcb(): no socket yet; it
 * answers the handshake once given one, and its input is what the client
 * sent, decrypted.  NULL: out of memory.
 */
CORRAL_PUBLIC
struct bufferevent *corral_tls_server_bev(struct corral_tls_server *s, struct event_base *base);
/*
 * The end of what the daemon says on bev, its output written: a
 * close_notify where bev is one of corral_tls_server_bev's (then true),
 * before the caller's shutdown(SHUT_WR) of its socket.  NULL s: false.
 */
CORRAL_PUBLIC
bool corral_tls_server_end(struct corral_tls_server *s, struct bufferevent *bev);
CORRAL_PUBLIC
void corral_tls_server_free(struct corral_tls_server *s);

/* ---- host features --------------------------------------------------- */

struct corral_features {
	bool userns;			/* user namespaces can be created */
	bool overlay_in_userns;
	bool seccomp;
	bool seccomp_notify;		/* SECCOMP_RET_USER_NOTIF for the syscall log */
	unsigned seccomp_rules;		/* rules in the filter (0: it cannot be built) */
	unsigned seccomp_unresolved;	/* table names with no number on this host */
	int seccomp_highest;		/* calls numbered above it are denied; -1: none */
	/*
	 * The host logs the seccomp actions "log" (kernel.seccomp.actions_logged):
	 * a sandbox's own filter may then write to the host's audit or kernel
	 * log, unbounded by anything of corral's
	 */
	bool seccomp_log_to_host;
	int landlock_abi;		/* 0 if absent or disabled */
	bool openat2;
	const char *limits;		/* what limits would use: cgroup v2 / v1 / rlimit */
	char limits_detail[CORRAL_ERR_MAX];
	bool cg_memory, cg_pids, cg_cpu, cg_freezer;
	/*
	 * A cgroup mount has favordynmods: moving a process into a group
	 * does not wait for an RCU grace period (5-20 ms after a quiet spell)
	 */
	bool cg_moves_fast;
	/*
	 * What bounds all sandboxes together: the parent group they share
	 * (parent), its pids.max, its memory limit and (cgroup v1) its TCP
	 * buffers' limit in bytes (value, 0 for none); planned: the parent
	 * is not made yet, and gets host then, half of the host's
	 * processes, three quarters of its memory and half of its tcp_mem.
	 * tcp_share.parent is "" where TCP buffers count as memory (v2).
	 * tcp_share.peak: the most all sandboxes' sockets held together since
	 * the parent was made (v1 keeps that peak; 0 elsewhere): at the value,
	 * the share was met, and every sandbox's connections held back then,
	 * which no sandbox's result can say.
	 */
	struct corral_share {
		unsigned long long value, host, peak;
		bool planned;
		char parent[256];
	} pids_share, memory_share, tcp_share;
	/* the ids a sandbox of this caller would get (no workspace) */
	struct corral_ids ids;
	bool idmap_mounts;		/* idmapped mounts of a host directory */
	char idmap_detail[CORRAL_ERR_MAX];
	/*
	 * --net proxy's transparent mode: its nftables rules load in a netns
	 * of a new user namespace (tried in one); if not, why
	 */
	bool transparent;
	char transparent_detail[CORRAL_ERR_MAX];
	/*
	 * and the log of what its rules drop (nfnetlink_log): UDP and ICMP
	 * to outside addresses are events; if not, why
	 */
	bool nflog;
	char nflog_detail[CORRAL_ERR_MAX];
};

CORRAL_PUBLIC
int corral_probe(struct corral_features *f);

#ifdef __cplusplus
}
#endif
#endif /* CORRAL_H */
