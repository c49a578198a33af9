/*
 * oci.h - `corral oci`: the runc-compatible runtime CLI that containerd's
 * io.containerd.runc.v2 shim and podman call.  oci.c parses the global
 * flags and dispatches; oci_state.c keeps a container's state directory;
 * oci_path.c opens the directory of a file the engine names (the pid
 * file, the log); oci_reach.c judges whether a tenant could reach a
 * bundle's rootfs;
 * oci_config.c reads a bundle's config.json into a corral policy (and
 * refuses what would weaken the boundary); oci_create.c has create and
 * exec, oci_events.c `events` (runc's stats and oom lines), oci_verbs.c
 * the other verbs.
 */
#ifndef CORRAL_OCI_H
#define CORRAL_OCI_H

#include "corral.h"

#include <jansson.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/types.h>

#define OCI_VERSION	"1.0.2"		/* the runtime spec we follow */
#define OCI_DEFAULT_ROOT	"/run/corral-oci"
#define OCI_OPERATOR_CONFIG	"/etc/corral/oci.json"
#define OCI_JSON_MAX	(4 << 20)	/* config.json, process.json: bytes */
/*
 * A usage error's exit status: runc's 1 (urfave/cli's), not the rest of
 * corral's 2, so that whoever drives `corral oci` as runc, a script
 * that tells runc's failures by status too, sees runc's.  The engines
 * themselves take any status but 0 alike and read the log.
 */
#define OCI_USAGE	1

struct oci_global {
	const char *root;		/* --root: state directories */
	const char *log;		/* --log FILE, or NULL: stderr only */
	bool log_json;			/* --log-format json */
	bool debug;
	bool systemd_cgroup;		/* accepted; corral's own cgroups either way */
	const char *config;		/* --corral-config: the operator's file */
};

/* One error: the JSON log's {"level":"error","msg":...} line and stderr. */
void oci_error(const struct oci_global *g, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void oci_debug(const struct oci_global *g, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* ---- oci_state.c ------------------------------------------------------ */

struct oci_state {
	char id[256];
	char dir[4096];			/* <root>/<id> */
	char ctl[4200];			/* <dir>/ctl: the monitor's socket */
	char *bundle;
	char *rootfs;
	char *created;			/* RFC 3339 */
	pid_t pid;			/* the container's init, on the host */
	pid_t monitor;
	json_t *annotations;		/* object (a reference) */
	/*
	 * config.json as create read it (a reference; NULL in a state an
	 * older corral wrote): what exec and update judge by, not the
	 * bundle's file, which may have changed or gone since.
	 */
	json_t *config;
};

/* An id the state directory may be named by (runc's rule, and no '/'). */
int oci_check_id(const char *id, struct corral_err *err);
/* Make <root>/<id> (EEXIST: "container with id exists"); fills dir, ctl. */
int oci_state_new(const struct oci_global *g, const char *id, struct oci_state *s,
		  struct corral_err *err);
int oci_state_write(const struct oci_state *s, struct corral_err *err);
/* -ENOENT with err "container does not exist", as the shims look for. */
int oci_state_load(const struct oci_global *g, const char *id, struct oci_state *s,
		   struct corral_err *err);
/* The status, as the monitor says it ("stopped" when it is gone). */
const char *oci_state_status(const struct oci_state *s);
/* The runtime spec's state document. */
json_t *oci_state_json(const struct oci_state *s, const char *status);
int oci_state_remove(const struct oci_state *s, struct corral_err *err);
void oci_state_free(struct oci_state *s);
/* Write pid to path as runc does (a new file renamed over). */
int oci_write_pid_file(const char *path, pid_t pid, struct corral_err *err);

/* ---- oci_reach.c ------------------------------------------------------ */

/*
 * The tree at fd, a directory, as root.path of a bundle: 0 where root
 * alone may write the bundle (its directory dir_st, config.json cfg_st;
 * either NULL) or its writer could search each directory from the tree up
 * to "/" (mode bits, groups and ACLs, as the kernel judges); -EPERM, err
 * saying which, where not.
 */
int oci_writer_reaches(int fd, const struct stat *dir_st, const struct stat *cfg_st,
		       const char *joined, struct corral_err *err);

/* ---- oci_path.c ------------------------------------------------------- */

/*
 * The directory path's file is in, an O_PATH fd, reached with no link
 * followed that lies in a directory another user may write; *base the
 * file's name in it.  what ("--pid-file") begins err's sentence.
 */
int oci_open_parent(const char *what, const char *path, const char **base,
		    struct corral_err *err);
/*
 * A stream socket connected to the unix socket at path, reached the same
 * way, its last name too (--console-socket: root hands the pty's master
 * to whatever listens there), bound by root or the caller, and listened
 * on by root or the caller in this pid namespace (SO_PEERCRED).
 */
int oci_connect_socket(const char *what, const char *path, struct corral_err *err);

/* ---- oci_config.c ----------------------------------------------------- */

/* What the operator allows beyond corral's defaults (/etc/corral/oci.json). */
struct oci_operator {
	char *policy;			/* the base corral policy file, or NULL */
	char *policies_dir;		/* io.corral.policy NAME: NAME.json here */
	char **allow_bind;		/* host prefixes binds may come from */
	size_t nallow_bind;
	char **allow_caps;		/* caps accepted (never granted) */
	size_t nallow_caps;
	bool egress_annotation;		/* io.corral.allow is honoured */
	/*
	 * A Kubernetes pod's namespaces: its network namespace (a path) is
	 * joined; the ipc and uts ones its pause container has are not
	 * (the container gets its own).
	 */
	bool join_pod_network;
	char *audit_dir;		/* events files; NULL: <root>/audit */
};

struct oci_spec {
	struct corral_policy p;
	char **argv;
	char *init;			/* the engine's init dropped (--init), or NULL */
	char **env;			/* process.env, NAME=VALUE */
	char *cwd;
	char *hostname;
	bool tty;
	unsigned short console_rows;	/* process.consoleSize, or 0 0 */
	unsigned short console_cols;
	int net_fd;			/* the pod's network namespace, or -1 */
	struct corral_rlimit *rlimits;	/* process.rlimits */
	size_t nrlimits;
	char *rootfs;			/* absolute */
	json_t *annotations;		/* object */
	json_t *doc;			/* config.json */
};

/* path: --corral-config; NULL: $CORRAL_OCI_CONFIG, else OCI_OPERATOR_CONFIG */
int oci_operator_load(struct oci_operator *op, const char *path,
		      struct corral_err *err);
void oci_operator_free(struct oci_operator *op);
/*
 * bundle/config.json, with the operator's policy and the annotations;
 * config (or NULL): that document as read before, instead of the file.
 */
int oci_spec_load(const struct oci_operator *op, const char *bundle, json_t *config,
		  struct oci_spec *s, struct corral_err *err);
/* A process.json (exec --process): argv, env, cwd, terminal, capabilities. */
int oci_process_load(const struct oci_operator *op, const char *path,
		     struct oci_spec *s, struct corral_err *err);
void oci_spec_free(struct oci_spec *s);
/* "KILL", "SIGKILL", "9" -> 9; -EINVAL. */
int oci_signal_parse(const char *s, struct corral_err *err);

/* ---- the verbs (oci_create.c, oci_verbs.c) ---------------------------- */

int oci_create(const struct oci_global *g, int argc, char **argv);
int oci_exec(const struct oci_global *g, int argc, char **argv);
int oci_start(const struct oci_global *g, int argc, char **argv);
int oci_state_cmd(const struct oci_global *g, int argc, char **argv);
int oci_kill(const struct oci_global *g, int argc, char **argv);
int oci_delete(const struct oci_global *g, int argc, char **argv);
int oci_ps(const struct oci_global *g, int argc, char **argv);
int oci_pause(const struct oci_global *g, int argc, char **argv);
int oci_resume(const struct oci_global *g, int argc, char **argv);
int oci_features(const struct oci_global *g, int argc, char **argv);
int oci_update(const struct oci_global *g, int argc, char **argv);
/* oci_events.c */
int oci_events(const struct oci_global *g, int argc, char **argv);
/* "5s", "250ms", "1m30s" (Go's durations) or seconds -> ms; -EINVAL, -ERANGE */
int oci_duration_ms(const char *s, long long *ms);

#endif
