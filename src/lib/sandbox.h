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

/* Messages from the sandbox's init to the supervisor, over a pipe. */
enum child_msg_kind {
	MSG_READY = 1,		/* layers in place, command about to exec */
	MSG_SETUP_FAILED,	/* code = -errno, text = why */
	MSG_EXEC_FAILED,	/* code = errno of execve */
	MSG_EXITED,		/* code = wait status of the command */
	MSG_NOTIFY_FD,		/* the seccomp listener, as SCM_RIGHTS */
	MSG_ROOT_FD,		/* an O_PATH fd of the sandbox's "/" (tripwires) */
};

struct child_msg {
	int kind;
	int code;
	int landlock_abi;
	char text[CORRAL_ERR_MAX];
};

#endif
