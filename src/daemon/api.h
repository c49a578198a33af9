/*
 * api.h - what the parts of corral serve's HTTP API share: the replies
 * and request checks (api.c), the routes (api.c's tables, one handler a
 * method and path, in api_*.c), and the sandbox registry (registry.c).
 */
#ifndef CORRAL_API_H
#define CORRAL_API_H

#include "daemon.h"

#include <stdarg.h>

#define IDLE_FREEZE_DEFAULT_MS	2000

/* ---- api.c: replies ----------------------------------------------------- */

void reply_json(struct evhttp_request *req, int code, json_t *o);
/* {"error": error, "detail": fmt's text, any bytes}; NULL: out of memory */
json_t *api_error_obj(const char *error, const char *fmt, va_list ap);
void reply_error(struct evhttp_request *req, int code, const char *error,
		 const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/*
 * The one mapping from a library error's errno to an HTTP status and the
 * "error" word of the reply.  api_build_status() is the same for a sandbox
 * that could not be built, where a missing path is the request's fault.
 */
int api_status(int code, const char **error);
int api_build_status(int code, const char **error);
void reply_err(struct evhttp_request *req, const struct corral_err *err);
void reply_build_err(struct evhttp_request *req, const struct corral_err *err);

/* A request's fault, found before anything was created: what its reply says. */
struct api_fault {
	int status;
	const char *error;
	char detail[1024];
};

/* Fill f; always false, so a check can end with "return api_fault(...)". */
bool api_fault(struct api_fault *f, int status, const char *error,
	       const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void reply_fault(struct evhttp_request *req, const struct api_fault *f);

/* Bytes as a JSON string, invalid UTF-8 as U+FFFD (corral_json_bytes()). */
json_t *api_bytes(const char *data, size_t len);

/* Bytes evhttp still holds for this client. */
size_t api_queued(struct evhttp_request *req);
/* evhttp_send_reply_end(), its end let go only once all of it is sent */
void api_reply_end(struct evhttp_request *req);
/* evhttp_send_reply(), the answer let go only once all of it is sent */
void api_send_reply(struct evhttp_request *req, int code, const char *reason,
		    struct evbuffer *body);
/* Whether the request came over TCP (else the unix socket). */
bool api_over_tcp(struct daemon *d, struct evhttp_request *req);
/* A held request whose client went away: ending it frees it. */
void forget_request(struct evhttp_request *req);

/* ---- api_gate.c: before the API ------------------------------------------ */

/* "Bearer TOKEN" (len bytes at h) is the daemon's token; constant time, its length too. */
bool api_token_ok(const struct daemon *d, const char *h, size_t len);
/* The gate's word on a request: false when it answered it (refused). */
bool api_gate_request(struct daemon *d, struct evhttp_request *req);
/*
 * Whether an answer of len bytes, read whole into the daemon's memory
 * (a file, an archive), may be queued now: false, with a 503 sent, when
 * it and what every connection still holds for its client would pass
 * --answer-memory.
 */
bool api_answer_room(struct daemon *d, struct evhttp_request *req, uint64_t len,
		     const char *what);
/* The connection left HTTP (101, a lease): the gate stops reading and timing it. */
void api_gate_upgrade(struct daemon *d, struct evhttp_connection *evcon);
/*
 * TCP keepalive on fd: a peer gone without a word (no FIN, no RST) is
 * found timeout_s after it was last heard from; with unacked, also while
 * bytes of ours wait unacknowledged (TCP_USER_TIMEOUT).  Says on stderr
 * when it cannot, naming what.
 */
void api_tcp_keepalive(int fd, unsigned timeout_s, bool unacked, const char *what);
/*
 * Who a TCP request's connection counts as, as --max-connections-per-peer
 * counts it (an IPv4 address, an IPv6 /64), into key; false for a unix
 * socket's.
 */
bool api_peer_key(struct daemon *d, struct evhttp_request *req, char *key, size_t len);
/* evhttp_connection_set_closecb, through the gate that also needs it. */
void api_set_closecb(struct daemon *d, struct evhttp_request *req,
		     void (*cb)(struct evhttp_connection *, void *), void *arg);

/* ---- api_access.c: what of the host a client may use -------------------- */

/* path is dir or under it (both resolved, no trailing slash). */
bool path_under(const char *path, const char *dir);
/*
 * p's env.pass, workspace and binds, judged for the client of req (host
 * paths replaced by their resolved form); its host uid range set.
 */
bool api_access_check(struct daemon *d, struct evhttp_request *req, bool tcp,
		      struct corral_policy *p, struct api_fault *f);
/* A resolved host path a TCP client may have: under an --allow-host-path. */
bool api_access_remote_path(const struct daemon *d, const char *real);
/*
 * Whether p (as api_access_check left it: host paths resolved) holds what
 * no TCP client could have had: a host path outside every prefix, a
 * daemon's variable beyond --allow-env, a file the daemon read for it.
 */
bool api_access_local(const struct daemon *d, const struct corral_policy *p);

/* ---- api.c: request bodies and queries ---------------------------------- */

/* The body as JSON, strictly: an object, no duplicate keys, size-capped. */
json_t *body_parse(const char *data, size_t len, bool required,
		   struct api_fault *f);
json_t *body_json(struct evhttp_request *req, bool required);	/* answers */
bool only_fields(json_t *o, const char *const *known, struct api_fault *f);
bool seconds_field(json_t *o, const char *key, double max, uint64_t *ms,
		   struct api_fault *f);
/* An integer field from min to max; absent: *out untouched. */
bool int_field(json_t *o, const char *key, long long min, long long max,
	       long long *out, struct api_fault *f);
/* v as JSON, at most len - 1 bytes of it, for a fault's "(got ...)". */
const char *api_json_text(const json_t *v, char *buf, size_t len);
/*
 * A query parameter's number, finite, from min to max (NaN, infinities,
 * hex, blanks and overflows refused); a count, decimal digits only.  Absent
 * (v NULL): true, *out untouched.  The fault names key and the value.
 */
bool query_number(const char *key, const char *v, double min, double max,
		  double *out, struct api_fault *f);
bool query_count(const char *key, const char *v, uint64_t max, uint64_t *out,
		 struct api_fault *f);
bool string_field(json_t *o, const char *key, size_t max, const char **out,
		  struct api_fault *f);
/* A query's yes/no (list=, follow=): anything but absent, "0" and "false". */
bool query_flag(const char *v);

/* ---- api.c: routes ------------------------------------------------------ */

/*
 * One handler a method and path.  path is exact, or ends in '*' for "the
 * rest, at least one byte", handed to the handler.  A path that matches
 * with no entry for the method is a 405 saying allow; none is a 404.
 */
struct api_route {
	const char *path;
	int methods;			/* EVHTTP_REQ_* bits */
	const char *allow;
	void (*on_daemon)(struct daemon *d, struct evhttp_request *req,
			  const char *rest);
	void (*on_sandbox)(struct sandbox *sb, struct evhttp_request *req,
			   const char *rest);
};

extern const struct api_route api_routes[];		/* from "/" */
extern const struct api_route api_sandbox_routes[];	/* from /v1/sandboxes/ID */

/* 0 (*out, *rest set), 405 (*out: the path's first entry) or 404. */
int api_route_find(const struct api_route *table, const char *path, int method,
		   const struct api_route **out, const char **rest);

/* ---- registry.c: the sandboxes and the pool ----------------------------- */

struct sandbox *sandbox_find(struct daemon *d, const char *id);
/*
 * A local sandbox's id (struct sandbox's local) begins so, and no other
 * does ("sb-" and hex otherwise): the audit log's lines and a snapshot's
 * record say whose they are after the sandbox is gone, and across restarts.
 */
#define SANDBOX_LOCAL_PREFIX	"sb-h"
bool sandbox_id_local(const char *id);
/* Whether req's client may see sb, or the sandbox of id: TCP, no local one. */
bool sandbox_seen(struct daemon *d, struct evhttp_request *req, const struct sandbox *sb);
bool sandbox_id_seen(struct daemon *d, struct evhttp_request *req, const char *id);
/* How many sandboxes req's client may see, pooled ones included. */
size_t sandboxes_seen(struct daemon *d, struct evhttp_request *req);
/* An exec, run or started, in sb: counted for /v1/metrics. */
void sandbox_count_exec(struct sandbox *sb);
/*
 * A sandbox being built with p (taken, also on failure); local also when
 * p does not say so (a fork of a local sandbox's snapshot).
 */
struct sandbox *sandbox_new(struct daemon *d, struct corral_policy *p, bool local,
			    struct corral_err *err);
void sandbox_hand_out(struct sandbox *sb, struct evhttp_request *req);
/* req waits for sb to be ready; sb is destroyed if req's client goes first. */
void sandbox_await(struct sandbox *sb, struct evhttp_request *req);
/*
 * The policy a sandbox is built with: asked (a client's policy object, or
 * NULL) laid over the operator's --policy, else over the built-in
 * default.  NULL with err set: -ENOMEM, or the loader's error.
 */
struct corral_policy *daemon_policy(struct daemon *d, const json_t *asked,
				    struct corral_err *err);
/*
 * The bound req's client is held to: the operator's --policy; without
 * it, for a TCP client (a remote party with the token) the built-in
 * default; NULL for a unix-socket client of a daemon without --policy
 * (the daemon's own user, or one it let connect, who could run corral
 * itself).
 */
const struct corral_policy *client_bound(struct daemon *d, struct evhttp_request *req);
/* What a refusal calls that bound: the operator's policy, or the built-in default. */
const struct corral_bound_name *bound_name(struct daemon *d, const struct corral_policy *bound);
/* A call's own timeout within the bound's limits.timeout. */
bool call_timeout_within(struct daemon *d, const struct corral_policy *bound,
			 const struct corral_call_opts *co, struct api_fault *f);
bool fd_room(struct daemon *d);
/* A ready pooled sandbox, none a local one for a TCP client (tcp). */
struct sandbox *pool_take(struct daemon *d, bool tcp);
void sandbox_arm_ttl(struct sandbox *sb);	/* from now; again: restarted */
void pool_hold(struct daemon *d);	/* a create came: the pool waits */

/* ---- api_sandboxes.c ----------------------------------------------------- */

json_t *sandbox_json(struct sandbox *sb);
void sandboxes_create(struct daemon *d, struct evhttp_request *req, const char *rest);
void sandboxes_list(struct daemon *d, struct evhttp_request *req, const char *rest);
void sandbox_get(struct sandbox *sb, struct evhttp_request *req, const char *rest);
void sandbox_delete(struct sandbox *sb, struct evhttp_request *req, const char *rest);
void sandbox_pause(struct sandbox *sb, struct evhttp_request *req, const char *rest);
void sandbox_resume(struct sandbox *sb, struct evhttp_request *req, const char *rest);
void sandbox_halt(struct sandbox *sb, struct evhttp_request *req, const char *rest);
void sandbox_keepalive(struct sandbox *sb, struct evhttp_request *req, const char *rest);
/* ?label=K=V&label=K...: every one matches labels (V exact, K present);
 * labels NULL: only the query judged (f->status set when it is bad). */
bool labels_match(const char *query, json_t *labels, struct api_fault *f);

/* ---- api_exec.c ---------------------------------------------------------- */

/* The body of POST exec or processes, checked whole. */
struct call_args {
	json_t *o;
	char **argv, **env;
	struct corral_call_opts co;
	bool stream;
};

bool call_args_check(json_t *o, bool background, struct call_args *a,
		     struct api_fault *f);
void call_args_free(struct call_args *a);
bool call_args_read(struct evhttp_request *req, bool background,
		    struct call_args *a);	/* answers a fault */
json_t *result_json(const struct corral_result *res);
void exec_post(struct sandbox *sb, struct evhttp_request *req, const char *rest);

/* ---- api_tty.c: a terminal over an upgraded exec ------------------------- */

/* The request asks for "Upgrade: corral-tty" (with "Connection: Upgrade"). */
bool tty_upgrade_asked(struct evhttp_request *req);
/* Start a's call with a pty and answer 101: the connection is the terminal. */
void tty_session_start(struct sandbox *sb, struct evhttp_request *req,
		       struct call_args *a);

/* ---- api_procs.c --------------------------------------------------------- */

void proc_free(struct proc *pr);
void procs_post(struct sandbox *sb, struct evhttp_request *req, const char *rest);
void procs_list(struct sandbox *sb, struct evhttp_request *req, const char *rest);
void proc_get(struct sandbox *sb, struct evhttp_request *req, const char *pid);
void proc_delete(struct sandbox *sb, struct evhttp_request *req, const char *pid);
/* rest is "PID/output" and so on (api.c's route_match) */
void proc_output(struct sandbox *sb, struct evhttp_request *req, const char *rest);
void proc_wait(struct sandbox *sb, struct evhttp_request *req, const char *rest);
void proc_stdin(struct sandbox *sb, struct evhttp_request *req, const char *rest);
void proc_signal(struct sandbox *sb, struct evhttp_request *req, const char *rest);

/* ---- api_files.c --------------------------------------------------------- */

bool file_query(const char *q, char *path, size_t len, bool *list,
		struct api_fault *f);
void files_get(struct sandbox *sb, struct evhttp_request *req, const char *rest);
void files_put(struct sandbox *sb, struct evhttp_request *req, const char *rest);
void files_delete(struct sandbox *sb, struct evhttp_request *req, const char *rest);
void files_mkdir(struct sandbox *sb, struct evhttp_request *req, const char *rest);
void files_rename(struct sandbox *sb, struct evhttp_request *req, const char *rest);
void archive_get(struct sandbox *sb, struct evhttp_request *req, const char *rest);
void archive_put(struct sandbox *sb, struct evhttp_request *req, const char *rest);
/*
 * api_untar.c: an archive streamed in, over a connection upgraded to
 * "corral-tar" (docs/API.md, Files): asked for (the headers), and begun
 * for the directory path of sb, judged and with its worker's room.
 */
bool untar_stream_asked(struct evhttp_request *req);
/* Whether a header's value lists token (comma-separated, any case): api_tty.c */
bool api_has_token(const char *value, const char *token);
/* An HTTP/1.1 request's Connection: Upgrade to protocol (api_tty.c; 1.0's ignored) */
bool api_upgrade_asked(struct evhttp_request *req, const char *protocol);
void untar_stream_start(struct sandbox *sb, struct evhttp_request *req,
			const char *path);
/* A worker was given back: an archive that waits for one is told. */
void untar_stream_room(struct daemon *d);
/* A file of the state directory that has no name (-1, errno: none). */
int spool_open(struct daemon *d);
/*
 * A listing asked for: its directory, whether recursive, and the last
 * entry of the page before (from its "next" cursor), or NULL; key names
 * the listing in its cursors (sandbox, path, recursive).
 */
struct list_req {
	const char *path;
	bool recursive;
	const char *after;
	char key[17];
};
/* A listing, made by a worker into fd (api_builds.c). */
int file_list_start(struct corral_box *box, const struct list_req *lr, int fd,
		    corral_box_work_done_fn done, void *arg, struct corral_box_work **job,
		    struct corral_err *err);

/* ---- api_builds.c: answers made by a worker, sent from a spool ----------- */

#define BUILDS_MAX	4	/* workers at once: diffs, patches, snapshots, unpacks */
#define BUILDS_PER_OWNER	(BUILDS_MAX / 2)	/* one lease's or TCP peer's of them */
#define BUILDS_LOCAL_MAX	(BUILDS_MAX * 2)	/* the unix socket's, made or unread */

enum build_kind {
	BUILD_DIFF_JSON, BUILD_DIFF_PATCH,
	BUILD_ARCHIVE,			/* a directory as a tar (api_files.c) */
	BUILD_LIST,			/* a recursive listing (api_files.c) */
	BUILD_LIST_DIR,			/* one large directory's listing, likewise */
	/* the exports, from here on (kind >= BUILD_EXPORT_PATCH) */
	BUILD_EXPORT_PATCH,		/* the report and the patch, in JSON */
	BUILD_EXPORT_STREAM,		/* the report's line, then the patch */
	BUILD_EXPORT_WRITE,		/* to or apply: the report */
};

/*
 * An export's patch as it is, not a JSON string: for a client that writes
 * it to a file as it comes (corral export --patch; the CLI's client.h has
 * the same name).  The body: the report, one line of JSON; then the patch.
 */
#define EXPORT_STREAM_TYPE	"application/vnd.corral.export-patch"

/*
 * Whether one more worker may start for sb (one build of a sandbox at a
 * time when build; NULL: the daemon's own); f says why not.
 */
bool builds_room(struct daemon *d, struct sandbox *sb, bool build, struct api_fault *f);
/* An unpack's or snapshot's worker starts for sb, counted; and ends. */
void worker_own(struct daemon *d, struct worker_owner *w, const struct sandbox *sb);
void worker_disown(struct daemon *d, struct worker_owner *w);
/*
 * Counted for sb's owner (builds_room), with no worker yet: a streamed
 * archive while it arrives.  worker_take starts its worker if the daemon
 * has one free (false: none), worker_release gives it back, still counted.
 */
void worker_hold(struct daemon *d, struct worker_owner *w, const struct sandbox *sb);
bool worker_take(struct daemon *d, struct worker_owner *w);
void worker_release(struct daemon *d, struct worker_owner *w);
/* The diff (path, or NULL) or the export (x) of sb, answered to req. */
void build_start(struct sandbox *sb, struct evhttp_request *req, enum build_kind kind,
		 const char *path, const struct corral_box_export_opts *x);
/* A listing, made by a worker (BUILD_LIST or BUILD_LIST_DIR). */
void build_list_start(struct sandbox *sb, struct evhttp_request *req,
		      const struct list_req *lr);
/* builds_room's refusal: a 503 says Retry-After, for the clients that retry */
void reply_busy(struct evhttp_request *req, const struct api_fault *f);
void api_builds_stop(struct daemon *d);	/* the daemon stops: spools closed */
/* cb when req's client closes its end while req waits (EV_CLOSED), or NULL */
struct event *watch_closed(struct daemon *d, struct evhttp_request *req,
			   event_callback_fn cb, void *arg);

/* ---- api_export.c -------------------------------------------------------- */

void diff_get(struct sandbox *sb, struct evhttp_request *req, const char *rest);
void export_post(struct sandbox *sb, struct evhttp_request *req, const char *rest);

/* ---- api_snapshots.c ------------------------------------------------------ */

void snapshot_post(struct sandbox *sb, struct evhttp_request *req, const char *rest);
void snapshots_list(struct daemon *d, struct evhttp_request *req, const char *rest);
void snapshot_get(struct daemon *d, struct evhttp_request *req, const char *id);
void snapshot_delete(struct daemon *d, struct evhttp_request *req, const char *id);
/* At start: the snapshots a killed daemon did not finish, removed. */
void snapshots_sweep(struct daemon *d);
/* For a create from_snapshot: p's workspace set to the snapshot's, to be
 * judged as a client's own (api_access_check); -1 with f set when there
 * is no such snapshot (none a TCP client req may not see: a local one's).
 * *local: it is a local sandbox's, and so the fork is one. */
int snapshot_workspace(struct daemon *d, struct evhttp_request *req, const char *id,
		       struct corral_policy *p, bool *local, struct api_fault *f);
/* Then p's layer set to the snapshot's tree; *tree (malloc'd) and *fd (or
 * -1) are the caller's until the sandbox is built. */
int snapshot_layer(struct daemon *d, const char *id, struct corral_policy *p,
		   char **tree, int *fd, struct api_fault *f);

/* ---- api_events.c -------------------------------------------------------- */

bool events_query(const char *q, char *sandbox, size_t len, bool *follow,
		  struct api_fault *f);
void events_get(struct daemon *d, struct evhttp_request *req, const char *rest);

/* ---- api_leases.c: sandboxes bound to a connection ---------------------- */

void leases_create(struct daemon *d, struct evhttp_request *req, const char *rest);
/* The open lease id names, if req's client may bind to it; else NULL, f set. */
struct lease *lease_for_create(struct daemon *d, struct evhttp_request *req,
			       const char *id, struct api_fault *f);
/* Room for one more sandbox on lease l (--max-sandboxes-per-peer); else f set. */
bool lease_room(struct daemon *d, const struct lease *l, struct api_fault *f);
void lease_bind(struct lease *l, struct sandbox *sb);
void lease_unbind(struct sandbox *sb);	/* at its destroy: forgotten */
/* Lease l's number, never another's: what may be kept past its end */
uint64_t lease_serial(const struct lease *l);
void leases_stop(struct daemon *d);	/* the daemon's end */

/* ---- api_health.c -------------------------------------------------------- */

void health_get(struct daemon *d, struct evhttp_request *req, const char *rest);
void metrics_get(struct daemon *d, struct evhttp_request *req, const char *rest);

#endif
