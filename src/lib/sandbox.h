/*
 * sandbox.h - what the supervisor and the sandbox's first process share.
 */
#ifndef CORRAL_SANDBOX_H
#define CORRAL_SANDBOX_H

#include "internal.h"

/* ns.c */
int ns_pick_ids(const struct corral_policy *p, uid_t *uid, gid_t *gid);
int ns_write_id_maps(pid_t pid, uid_t host_uid, gid_t host_gid,
		     struct corral_err *err);

/* mount.c: build the sandbox's filesystem and pivot into it. */
int mount_build(const struct corral_policy *p, struct corral_err *err);
/* The paths Landlock lets the sandbox write (NULL-terminated). */
extern const char *const mount_writable_paths[];
/* The writable tmpfs (one budget), opened beneath the sandbox's "/". */
int mount_scratch_open(int rootfd);
bool mount_scratch_full(int scratchfd);

/* What the first process of a sandbox needs from its supervisor. */
struct child_ctx {
	const struct corral_policy *p;
	char *const *argv;	/* corral_run: the one command */
	char **envp;
	bool caller_root;
	bool cg_none;
	bool serve;		/* long-lived (box.c): wait for MSG_EXEC */
	int sync_rd;		/* supervisor says "go", then "in the cgroup" */
	int msg_wr;		/* struct child_msg to the supervisor (a socket) */
	int out_wr, err_wr;	/* capture pipes, or -1 */
};

/* child.c: runs in the new namespaces, never returns. */
__attribute__((noreturn)) void sandbox_child(struct child_ctx *c);

/* env.c: the environment commands start with (NULL: out of memory). */
char **sandbox_env(const struct corral_policy *p);
int sandbox_env_add(char ***envp, size_t *n, const char *name, const char *value);
void sandbox_env_free(char **envp);

/* Messages from the sandbox's init to the supervisor, over a socket. */
enum child_msg_kind {
	MSG_READY = 1,		/* layers in place, command about to exec */
	MSG_SETUP_FAILED,	/* code = -errno, text = why */
	MSG_EXEC_FAILED,	/* code = errno of execve */
	MSG_EXITED,		/* code = wait status of the command */
	MSG_NOTIFY_FD,		/* the seccomp listener, as SCM_RIGHTS */
	MSG_ROOT_FD,		/* an O_PATH fd of the sandbox's "/" (tripwires) */
	/* long-lived sandboxes (box.c) */
	MSG_EXEC,		/* supervisor -> init: struct exec_msg + 4 fds */
	MSG_STARTED,		/* id, code = the call's pid inside, or -errno */
	MSG_CALL_EXITED,	/* id, code = the call's wait status */
};

struct child_msg {
	int kind;
	uint32_t id;		/* MSG_STARTED, MSG_CALL_EXITED: the call */
	int code;
	int landlock_abi;
	char text[CORRAL_ERR_MAX];
};

/*
 * A call for a long-lived sandbox.  data holds nargv strings, nenv
 * "NAME=VALUE" strings and the working directory, each NUL-terminated.
 * It travels with four fds: stdin, stdout, stderr, and the gate, a
 * SEQPACKET socket on which the new process says "r" (the supervisor
 * learns its host pid from the credentials), waits for "g" (it is in its
 * call's cgroup), and on failure writes struct exec_fail before it exits.
 */
#define EXEC_DATA_MAX	(60 * 1024)

struct exec_msg {
	int kind;		/* MSG_EXEC */
	uint32_t id;
	uint32_t nargv, nenv;
	uint32_t len;		/* bytes used in data */
	char data[EXEC_DATA_MAX];
};

enum exec_stage { EXEC_STAGE_RLIMIT = 1, EXEC_STAGE_CWD, EXEC_STAGE_EXEC };

struct exec_fail {
	int stage;
	int err;		/* errno */
};

#endif
