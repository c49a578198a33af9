/*
 * sandbox.h - what the supervisor and the sandbox's first process share.
 */
#ifndef CORRAL_SANDBOX_H
#define CORRAL_SANDBOX_H

#include <sys/resource.h>
#include "internal.h"

#include <jansson.h>
#include <sys/ioctl.h>

/* ns.c */
int ns_pick_ids(const struct corral_policy *p, uid_t *uid, gid_t *gid);
bool ns_owner_grants(const struct corral_policy *p, uid_t owner);
/* The ids a sandbox of p gets, before idmap.c decides on the agent's. */
void ns_plan_ids(const struct corral_policy *p, struct corral_ids *ids);
/* the next owner for a root's sandbox's user namespace, from corral's range */
uid_t ns_owner_next(void);
/* clone(flags) with the new user namespace owned by ids->owner (0: ours) */
pid_t ns_clone_owned(unsigned long flags, int *pidfd, struct corral_ids *ids);
int ns_write_id_maps(pid_t pid, const struct corral_ids *ids,
		     struct corral_err *err);
/*
 * oom.c: init's oom_score_adj raised (at least 500, never below the
 * supervisor's own) before it runs anything: under host memory pressure
 * the kernel kills a sandbox's process before the daemon or the host's.
 */
int oom_prefer_sandbox(pid_t pid, struct corral_err *err);
/*
 * oom.c: the kernel's OOM kills since boot, all groups' (/proc/vmstat's
 * oom_kill); -errno where it cannot be read.
 */
int oom_kills_host(uint64_t *n);
/* identity.user root: -1 and why unless on a root of its own with ids 0-65535 */
int root_inside_refused(const struct corral_policy *p, const struct corral_ids *ids,
			struct corral_err *err);

/*
 * idmap.c, as root with corral's range: the workspace and the caller's
 * binds as detached idmapped mounts (their owner's files are the agent's),
 * made before init is cloned so that init inherits them.  ws is -1 when
 * not made; binds[i] likewise.  On success ids->uid/gid become the
 * range's 1000 (65534 over a root layer of 65534's, and ids->note says
 * why); when the kernel refuses, ids keep ns_pick_ids' agent and
 * ids->note says why.
 */
struct idmap_fds {
	int ws;
	int *binds;		/* p->nbinds entries, or NULL */
	size_t nbinds;
};
void idmap_prepare(const struct corral_policy *p, struct corral_ids *ids,
		   struct idmap_fds *out);
void idmap_close(struct idmap_fds *m);
/* Whether the kernel gives this caller idmapped mounts of dir (doctor). */
bool idmap_probe(const char *dir, char *why, size_t len);

/* mount.c: build the sandbox's filesystem and pivot into it. */
/*
 * upperfd non-NULL: also a dir fd of the workspace overlay's upper layer
 * (or -1 without a workspace), which outlives the sandbox's mounts.
 */
/*
 * snapshot.c: a snapshot's tree copied into an upper layer not yet
 * mounted, but a decoy where p plants a tripwire (an older snapshot's)
 */
int snapshot_fill(int from, int to, const struct corral_policy *p,
		  struct corral_err *err);
struct idmap_fds;
/*
 * pre: the supervisor's idmapped workspace and binds (idmap.c), or NULL;
 * own_net: the network namespace is the sandbox's own, its bounds are
 * set through the proc mounted here (net_bound_uncharged)
 */
int mount_build(const struct corral_policy *p, const struct idmap_fds *pre,
		const char *tls_ca_pem, int *upperfd, bool own_net,
		struct corral_err *err);
/* A host path's fd may be shown to a sandbox (not /proc, /sys, /dev, /). */
int mount_check_host_fd(int rootfd, int fd, const char *path,
			struct corral_err *err);
/*
 * Nor is one mounted beneath it, in this view (a bind takes its
 * submounts); rootfd: where the proc to read it in is mounted, at "proc".
 */
int mount_check_submounts(int rootfd, int fd, const char *path,
			  struct corral_err *err);
/* The host's paths every view without a root of its own shows: i-th, or NULL. */
const char *mount_host_source(size_t i);
/* Beneath them, what is an empty directory instead (the host's TLS keys) */
#define MOUNT_HOST_MASKED "/etc/ssl/private"
/* unseen.c: no workspace, bind or root of p's view holds a secret's file. */
int unseen_check(const struct corral_policy *p, struct corral_err *err);
/* The paths Landlock lets the sandbox write (NULL-terminated). */
extern const char *const mount_writable_paths[];
/* The writable tmpfs (one budget), opened beneath the sandbox's "/". */
int mount_scratch_open(int rootfd);
bool mount_scratch_full(int scratchfd);
/* The scratch tmpfs's inode limit for a disk budget (nr_inodes=). */
uint64_t mount_scratch_inodes(uint64_t disk_bytes);
/* Where a tripwire may be planted: the area path lies under, or NULL. */
const char *mount_tripwire_top(const char *path);

/* What the first process of a sandbox needs from its supervisor. */
struct child_ctx {
	const struct corral_policy *p;
	char *const *argv;	/* corral_run: the one command */
	char **envp;
	const char *tls_ca_pem;	/* the sandbox's CA, installed in /etc/corral */
	bool caller_root;
	bool subid_maps;	/* newuidmap/newgidmap wrote the id maps */
	bool cg_none;		/* no cgroup: told with "in the cgroup" ("n") */
	bool serve;		/* long-lived (box.c): wait for MSG_FORK */
	bool send_upper;	/* MSG_UPPER_FD: the workspace's upper layer */
	const struct idmap_fds *idmap;	/* idmap.c's mounts to take, or NULL */
	int sync_rd;		/* supervisor says "go", then "in the cgroup" */
	int msg_wr;		/* struct child_msg to the supervisor (a socket) */
	int stdio[3];		/* the command's 0, 1, 2; -1: /dev/null */
	bool tty;		/* the command's 0-2: a pty made inside */
	struct winsize winsize;	/* the pty's first size */
	bool container;		/* sandbox_opts.container */
	const char *hostname;	/* NULL: "corral" */
	const struct corral_rlimit *rlimits;	/* the command's (sandbox_opts) */
	size_t nrlimits;
	/* sandbox_opts.net_fd: lo is the namespace owner's; else init
	 * unshares its own netns first (and, for the proxy, says "n") */
	bool joined_net;
	rlim_t nofile_cap;	/* a command's hard RLIMIT_NOFILE at most; 0: none */
};

/*
 * mount.c, the supervisor's side: stack p->root_layers as the root of the
 * new namespaces of pid, owned by host_uid/gid where corral adds to it.
 */
int mount_stack_root(pid_t pid, const struct corral_policy *p, uid_t host_uid,
		     gid_t host_gid, struct corral_err *err);

/* child.c: runs in the new namespaces, never returns. */
__attribute__((noreturn)) void sandbox_child(struct child_ctx *c);
/*
 * child_ctx.nofile_cap for a sandbox of policy p on this host (0:
 * unlimited), and *hard, what each command's hard RLIMIT_NOFILE will be
 * (0: unlimited); an error if p's limits.open_files does not fit here.
 */
int sandbox_nofile_cap(const struct corral_policy *p, rlim_t *cap, rlim_t *hard,
		       struct corral_err *err);
/* The same, of the numbers alone (file_max 0: unknown; unit tests). */
int nofile_cap_of(uint64_t open_files, uint64_t pids, unsigned long long file_max,
		  rlim_t init_hard, rlim_t *cap, struct corral_err *err);

/* env.c: the environment commands start with (NULL: out of memory). */
char **sandbox_env(const struct corral_policy *p);
int sandbox_env_add(char ***envp, size_t *n, const char *name, const char *value);
void sandbox_env_free(char **envp);
/* A copy of envp, or of any NULL-terminated vector of strings (an argv);
 * NULL: out of memory.  sandbox_env_free() it. */
char **sandbox_env_copy(char *const *envp);

/* Messages from the sandbox's init to the supervisor, over a socket. */
enum child_msg_kind {
	MSG_READY = 1,		/* layers in place, command about to exec; code:
				 * the fds that come with it (ready_fd_kinds) */
	MSG_SETUP_FAILED,	/* code = -errno, text = why */
	MSG_EXEC_FAILED,	/* code = errno of execve */
	MSG_EXITED,		/* code = wait status of the command */
	MSG_NOTIFY_FD,		/* the seccomp listener, as SCM_RIGHTS */
	MSG_ROOT_FD,		/* an O_PATH fd of the sandbox's "/" (tripwires) */
	/* long-lived sandboxes (box.c) */
	MSG_FORK,		/* supervisor -> init: struct fork_msg + the gate */
	MSG_STARTED,		/* id (the fork's), code = its pid inside, or -errno */
	MSG_CALL_EXITED,	/* id (the fork's), code = its wait status */
	MSG_UPPER_FD,		/* the workspace's upper layer (export.c) */
	MSG_PTY_FD,		/* the master of the command's pty (SCM_RIGHTS) */
	MSG_DNS_FD,		/* network off: UDP 127.0.0.1:53 inside (dnsoff.c) */
	MSG_DNS_DIAG_FD,	/* ... a sock_diag socket there; id = the netns's inode */
	MSG_NOT_STARTED,	/* code = the signal to stop that came first */
};

/*
 * The fds the supervisor keeps come with READY, in one message: each
 * message woke the supervisor (issue 17).  code has bit 1 << kind set
 * for each kind sent, and the fds come in the order of ready_fd_kinds[];
 * id is the netns's inode when MSG_DNS_DIAG_FD is among them.
 */
#define READY_FDS_MAX	5
extern const int ready_fd_kinds[READY_FDS_MAX];

struct child_msg {
	int kind;
	uint32_t id;		/* MSG_STARTED, MSG_CALL_EXITED: the call */
	int code;
	int landlock_abi;
	char text[CORRAL_ERR_MAX];
};

/*
 * A call's process in a long-lived sandbox.  The supervisor asks init for
 * one with MSG_FORK (struct fork_msg and one fd: the gate, a SEQPACKET
 * socket), ahead of the call while the box idles, or when the call comes.
 * init forks and reports the pid as MSG_STARTED, its end as
 * MSG_CALL_EXITED, both under the fork's id.  The new process says "r" on
 * the gate (the kernel adds its credentials: the supervisor learns its
 * host pid and moves it into its call's cgroup, off the call's path when
 * forked ahead), then waits.  Only once it is in that cgroup does the
 * supervisor send the call on the gate: struct exec_msg with three fds
 * (stdin, stdout, stderr), or with EXEC_TTY none, the process then making
 * a pty of the sandbox's devpts its 0-2 and controlling terminal and
 * sending the master back with "p" (rows, cols: the pty's first size, 0
 * for the kernel's).  On failure it writes struct exec_fail before it
 * exits; EOF on the gate before the call comes: it exits, having run
 * nothing of anyone's.  data holds nargv strings, nenv "NAME=VALUE"
 * strings and the working directory, each NUL-terminated.
 */
struct fork_msg {
	int kind;		/* MSG_FORK */
	uint32_t id;
};

#define EXEC_DATA_MAX	(60 * 1024)
#define EXEC_TTY	1u
#define EXEC_SH_FAST	2u	/* argv is sh -c LINE: shell.c may exec LINE itself */
#define EXEC_MSG_KIND	0x63616c6c	/* "call": what the gate carries */

struct exec_msg {
	int kind;		/* EXEC_MSG_KIND */
	uint32_t id;		/* the call's, for its own record */
	uint32_t nargv, nenv;
	uint32_t len;		/* bytes used in data */
	uint32_t flags;		/* EXEC_TTY, EXEC_SH_FAST */
	uint16_t rows, cols;
	char data[EXEC_DATA_MAX];
};

enum exec_stage { EXEC_STAGE_RLIMIT = 1, EXEC_STAGE_CWD, EXEC_STAGE_EXEC, EXEC_STAGE_TTY };

struct exec_fail {
	int stage;
	int err;		/* errno */
};

/*
 * ---- sandbox.c: the supervisor's half of every sandbox -----------------
 *
 * sandbox_spawn() is the one way a sandbox is made, whichever front end
 * asks (corral_run in run.c, the daemon's boxes in box.c, an OCI
 * container's monitor in container.c): it clones init into new
 * namespaces, gives it its identity, the egress proxy and its cgroup,
 * then watches it on the front end's loop.  What init sends back is
 * decoded in one place (child_msg_recv); the front end hears of it
 * through its hooks.
 */
struct events;
struct proxy;
struct sensor;
struct tripwire;
struct event;
struct event_base;

struct sandbox_hooks {
	/*
	 * One of init's messages: MSG_READY (the tripwires are armed by
	 * then), MSG_SETUP_FAILED, MSG_EXEC_FAILED, MSG_EXITED, MSG_STARTED,
	 * MSG_CALL_EXITED.  The hook may free the sandbox.
	 */
	void (*msg)(void *arg, const struct child_msg *m);
	/* init's control socket closed (sb->ctl is -1 by then) */
	void (*closed)(void *arg);
	/* init exited: its pidfd became readable */
	void (*exited)(void *arg);
	/* optional: add what the front end knows to a tripwire event */
	void (*tripwire)(void *arg, json_t *event, pid_t pid);
};

struct sandbox_opts {
	struct event_base *base;	/* the front end's loop */
	const struct corral_policy *p;
	struct events *ev;		/* where the layers' events go */
	struct cg *cg;			/* made by the front end; init is moved in */
	char *const *argv;		/* the one command; NULL: calls, via ctl */
	/*
	 * The command's stdin, stdout, stderr: pipes the front end made (never
	 * a caller's fd: what an fd reaches, the sandbox reaches), handed into
	 * the sandbox and always closed here; -1: /dev/null.
	 */
	int stdio[3];
	/*
	 * Instead, a pty made inside, in the sandbox's own devpts, of this
	 * first size: the command's controlling terminal.  Its master comes
	 * back as MSG_PTY_FD, in sb->ptyfd for the front end to take.
	 */
	bool tty;
	struct winsize winsize;
	const struct sandbox_hooks *hooks;
	void *arg;
	bool want_upper;		/* keep the workspace's upper layer */
	/*
	 * An OCI container (container.c): init is cloned as a sibling of
	 * the caller (CLONE_PARENT), so that when the caller exits the
	 * container engine's shim, a subreaper, adopts it; it has no
	 * parent-death signal; the command waits for sandbox_release()
	 * after READY; and init exits with the command's status (128 +
	 * the signal when one ended it), the status the shim reports.
	 */
	bool container;
	const char *hostname;		/* the sandbox's; NULL: "corral" */
	/* the command's rlimits (lowered only: it has no capability to raise) */
	const struct corral_rlimit *rlimits;
	size_t nrlimits;
	/*
	 * A container's: a network namespace to join instead of a new one (a
	 * Kubernetes pod's, made by its CNI), or -1.  The supervisor enters
	 * it before the clone (the sandbox's user namespace has no rights
	 * over a namespace the host owns); not with the egress proxy.
	 */
	int net_fd;
	/*
	 * A daemon's box: where init cannot move itself in, it is moved by
	 * the mover (cg_move_start), not on base's loop, and "c" waits.
	 */
	bool move_off_loop;
	/*
	 * A daemon's box: the egress proxy takes at most 1/fd_shares of the
	 * process's open-files limit (proxy_start); 0: all of it.
	 */
	unsigned fd_shares;
};

struct sandbox {
	struct event_base *base;
	const struct corral_policy *p;
	struct events *ev;
	struct cg *cg;
	const struct sandbox_hooks *hooks;
	void *arg;
	char **envp;		/* the policy's environment */
	uid_t host_uid;		/* who the agent's uid is on the host */
	gid_t host_gid;
	struct corral_ids ids;	/* every host id it uses (ns.c) */
	struct idmap_fds idmap;	/* until init is cloned: its idmapped mounts */
	pid_t pid;		/* init, as the host sees it */
	int pidfd;
	int ctl;		/* init's messages; calls go the other way */
	int sync_wr;		/* "t" on MSG_READY once the tripwires are watched;
				   "c" once the mover has moved init (mv) */
	bool move_off_loop;	/* sandbox_opts.move_off_loop */
	unsigned fd_shares;	/* sandbox_opts.fd_shares */
	struct cg_move *mv;	/* init's move into its groups, under way */
	char start_err[CORRAL_ERR_MAX];	/* why init was killed while starting */
	int rootfd;		/* the sandbox's "/": tripwires and files */
	int scratchfd;		/* its writable tmpfs: was the disk limit hit? */
	int upperfd;		/* want_upper: the workspace's upper layer */
	int ptyfd;		/* MSG_PTY_FD's master, until the front end takes it */
	bool container;		/* sandbox_opts.container */
	rlim_t nofile;		/* each command's hard RLIMIT_NOFILE (0: none) */
	int landlock_abi;
	struct proxy *px;
	struct dnsoff *dnsoff;	/* network off: the DNS that says so (dnsoff.c) */
	struct tlsbox *tls;	/* the CA and secrets of terminated egress, or NULL */
	struct sensor *sensor;	/* denied syscalls, where USER_NOTIF works */
	struct tripwire *tripwire;
	struct event *ev_ctl, *ev_exit;
};

/*
 * The policy is one a sandbox can be built from (a disk budget, a
 * workspace that is a directory); the front end checks before it spends.
 */
int sandbox_check_policy(const struct corral_policy *p, struct corral_err *err);
/*
 * Build and start a sandbox; *out is watched on o->base until freed.  On
 * error, init (if it was cloned) is killed and reaped, and err holds its
 * own reason where it gave one.
 */
int sandbox_spawn(struct sandbox **out, const struct sandbox_opts *o,
		  struct corral_err *err);
/* A container's command may start now (opts.container, after READY). */
int sandbox_release(struct sandbox *sb, struct corral_err *err);
/*
 * child.c: what a process joining a running sandbox (an OCI exec) takes
 * on after setns(2) into its namespaces, as init took it: the agent's
 * identity, Landlock, no capabilities, seccomp.  *notify_fd: the
 * seccomp listener, or -1.
 */
int sandbox_join_layers(const struct corral_policy *p, int *notify_fd,
			struct corral_err *err);
/* child.c: each rlimit, capped at the current hard limit. */
int sandbox_set_rlimits(const struct corral_rlimit *r, size_t n,
			struct corral_err *err);
/*
 * container.c: corral_container_ctl() with an fd (SCM_RIGHTS): "notify"
 * hands the monitor an exec'd process's seccomp listener.
 */
int container_ctl_fd(const char *ctl_path, const char *req, int fd, char *reply,
		     size_t len, struct corral_err *err);
/* Stop watching init (the pidfd and the control socket; ctl is closed). */
void sandbox_unwatch(struct sandbox *sb);
/*
 * SIGKILL init: the whole pid namespace goes with it.  What left the
 * namespace's reach (nothing should) is the cgroup's: the front end kills
 * that as its loop allows (cg_kill, cg_kill_start).  NULL is fine.
 */
void sandbox_kill(struct sandbox *sb);
/* Init has exited, whether or not the loop has heard of it yet. */
bool sandbox_gone(const struct sandbox *sb);
/* Halted: its connections are reset, nothing more is relayed (proxy_halt). */
void sandbox_halt_egress(struct sandbox *sb);
/* A connection it made still waits for its verdict (proxy_judging). */
bool sandbox_egress_judging(const struct sandbox *sb);
/*
 * Free what the supervisor holds for the sandbox (proxy, sensor,
 * tripwires, fds).  It neither kills nor reaps init: the front end does,
 * before, or steals the pidfd to wait on it.  NULL is fine.
 */
void sandbox_free(struct sandbox *sb);

/*
 * result.c: how a command in a sandbox ended, in res's status, exit code,
 * signal and reason; the same words for corral_run and a box's calls.
 */
void result_from_wait(struct corral_result *res, int status);
void result_exec_failed(struct corral_result *res, const char *cmd, int e);
void result_timeout(struct corral_result *res, uint64_t timeout_ms);
/* Signal sig came before the command was started, and it never was. */
void result_not_started(struct corral_result *res, int sig);
/* The lost processes forked for a call died (the last: wait status) before it reached them. */
void result_not_reached(struct corral_result *res, int status, unsigned lost);
/*
 * Halted, but the command (wait status) had ended by itself first: how it
 * ended stays in exit_code, signal and the reason's tail ("halted: HALT;
 * THEN the command had ended: exited with status 0").
 */
void result_halted_after_end(struct corral_result *res, int status,
			     const char *halt, const char *then);
/*
 * The limits the command hit (hits: oom_kills, pids_max_hits, throttled),
 * each in the reason: the memory or pids limit as its status where the
 * command ended by itself, after the status otherwise (result.c).
 */
void result_limits(struct corral_result *res, const struct corral_policy *p,
		   const struct cg_stats *hits);
/* "; memory limit 64 MiB reached too: 1 background process of call X killed ..." */
void result_background_hits(struct corral_result *res, const struct corral_policy *p,
			    const char *call, uint64_t oom, uint64_t pids);
/* Without cgroups: an rlimit named in the reason of a failure it explains. */
void result_explain_rlimits(struct corral_result *res, const struct corral_policy *p);
void result_explain_open_files(struct corral_result *res, const struct corral_policy *p,
			       rlim_t nofile);
/* Network off: a failure to resolve or connect says the policy is why. */
void result_explain_network(struct corral_result *res, const struct corral_policy *p);

/*
 * One message off init's control socket.  1: *m holds it, and *fd the fd
 * it carried (MSG_NOTIFY_FD, MSG_ROOT_FD, MSG_UPPER_FD, MSG_PTY_FD,
 * MSG_DNS_FD, MSG_DNS_DIAG_FD) or -1; any other fd is closed.
 * 0: nothing to take now, or a malformed message (dropped).  Negative:
 * the socket is closed (-EPIPE) or failed (-errno).
 */
int child_msg_recv(int sock, struct child_msg *m, int *fd);
/*
 * The same, for the supervisor's loop: a MSG_READY's fds too.  1: *m
 * holds the message and fds[0..*nfds) the fds it carried (as
 * child_msg_recv's one, or READY's in ready_fd_kinds[] order, as its code
 * says); a message whose fds do not match its kind or code is dropped
 * (0) and they are closed.  max: READY_FDS_MAX at least.
 */
int child_msg_recv_fds(int sock, struct child_msg *m, int *fds, size_t max,
		       size_t *nfds);

#endif
