/*
 * daemon.h - corral serve: the daemon's entry point, daemon_run(), which a
 * front end (src/cli/serve.c) calls with the options it parsed; then what
 * the listener (serve.c) and the request handlers (api*.c, over the sandbox
 * registry in registry.c) share.
 */
#ifndef CORRAL_DAEMON_H
#define CORRAL_DAEMON_H

#include "corral.h"

#include <event2/event.h>
#include <event2/http.h>
#include <jansson.h>

/* What a connection may hold (api_gate.c); 0 is the default. */
struct daemon_limits {
	size_t max_connections;		/* a listener's, before it stops accepting */
	size_t max_per_peer;		/* one TCP peer address's */
	unsigned header_timeout_s;	/* from a head's first byte to its end */
	unsigned idle_timeout_s;	/* with no request, before it is closed */
	size_t max_leases;		/* open at once (api_leases.c) */
	unsigned lease_timeout_s;	/* a silent TCP lease holder's, till closed */
	unsigned tty_idle_timeout_s;	/* a terminal with no frame in or out */
	size_t tls_handshake_rate;	/* a TLS peer's handshakes a second */
	uint64_t answer_memory;		/* answers held for all slow readers */
	/*
	 * What a TCP client (anyone with the token) may hold of the host
	 * (api_sandboxes.c): a sandbox's life past its last create or
	 * keepalive, its idle freeze, and how many one peer (an IPv4
	 * address, an IPv6 /64, as max_per_peer) has alive at once.
	 */
	unsigned max_ttl_s;
	unsigned max_idle_freeze_s;
	size_t max_sandboxes_per_peer;
};

#define DAEMON_MAX_CONNECTIONS	256
#define DAEMON_MAX_PER_PEER	32
#define DAEMON_HEADER_TIMEOUT_S	10
#define DAEMON_IDLE_TIMEOUT_S	60
#define DAEMON_MAX_LEASES	64
#define DAEMON_LEASE_TIMEOUT_S	120
/*
 * A terminal nobody uses any more still holds a pty, a process and fds:
 * 900 s, the shell idle timeout (TMOUT) hardening guides ask for, and
 * more than the default limits.call_timeout, so that only a session that
 * asked for a longer timeout meets it.
 */
#define DAEMON_TTY_IDLE_TIMEOUT_S 900
#define DAEMON_TLS_HANDSHAKE_RATE 200
#define DAEMON_ANSWER_MEMORY	(256ull << 20)
#define DAEMON_MAX_TTL_S	86400		/* a day */
#define DAEMON_MAX_IDLE_FREEZE_S 600
#define DAEMON_MAX_SANDBOXES_PER_PEER 100
#define DAEMON_PEER_KEY_MAX	64	/* an address, or an IPv6 /64, as text */

/* What API clients may take from the host (api_access.c). */
struct daemon_access {
	char **allow_paths;		/* host path prefixes any client may use */
	size_t nallow_paths;
	char **allow_env;		/* the daemon's variables any client may pass */
	size_t nallow_env;
	uid_t uid_min, uid_max;		/* root: host uids a sandbox may run as */
	bool uid_range;			/* uid_min..uid_max given */
	bool allow_root_inside;		/* identity.user "root" may be asked for */
};

/* What to serve on and where to keep state; the front end fills in the
 * defaults (docs/API.md) before it calls daemon_run(). */
struct daemon_opts {
	const char *socket_path;	/* the unix socket, made mode 0600 */
	const char *state_dir;		/* audit.jsonl, the lock, a file a sandbox */
	const char *listen;		/* "HOST:PORT" to listen on TCP too, or NULL */
	const char *token_file;		/* its bearer token; required with listen */
	const char *tls_cert, *tls_key;	/* PEM: TLS on listen; needed off loopback */
	const char *tls_client_ca;	/* PEM: TLS clients need a certificate it signed */
	size_t max_sandboxes;		/* creates beyond this many are refused */
	size_t pool_size;		/* sandboxes of the default policy built ahead */
	struct daemon_limits limits;	/* zeros: the defaults below */
	struct daemon_access access;	/* nothing: the safe defaults */
	uint64_t snapshot_bytes;	/* what snapshots may take on disk; 0: default */
	/*
	 * --policy: every sandbox's base and every client's bound
	 * (api_sandboxes.c); NULL: the built-in default is the base, and a
	 * TCP client's bound (client_bound).
	 */
	const char *policy_file;
};

/*
 * Serve until SIGTERM or SIGINT, then destroy every sandbox; with TLS,
 * SIGHUP reads its files again.  Returns 0
 * after that clean stop, or a negative errno when the daemon could not
 * start (err names the path or value at fault).
 */
int daemon_run(const struct daemon_opts *opts, struct corral_err *err);

#define API_JSON_MAX		(1024 * 1024)		/* a JSON request body */
#define API_FILE_MAX		(64 * 1024 * 1024)	/* a file in or out */
#define API_LIST_MAX		100000			/* entries a listing returns */
#define API_LIST_BYTES		(32 * 1024 * 1024)	/* their names and targets */
#define API_PROCS_KEPT		256			/* process records per sandbox */
#define API_LABELS_MAX		64
#define LEASE_ID_MAX		40	/* "ls-" and 32 hex digits, NUL */
#define STREAM_QUEUE_MAX	(1024 * 1024)	/* unsent bytes before a stream waits */
#define FOLLOW_QUEUE_MAX	(4 * 1024 * 1024)	/* ... before a follower is cut off */

struct daemon;
struct lease;

/* A request held on a background process: its end, or its output. */
struct proc_watch {
	struct proc_watch *next;
	struct proc *pr;
	struct evhttp_request *req;
	struct event *ev_timeout;	/* wait: answer "running" then */
	bool follow;			/* output lines, else wait for the end */
	int streams;			/* follow: bit 1 stdout, bit 2 stderr */
};

/* A background process (POST /processes), kept after it ends until asked. */
struct proc {
	struct proc *next;
	struct sandbox *sb;
	struct corral_call *call;
	json_t *argv;
	pid_t pid;			/* as the sandbox sees it */
	struct evhttp_request *creating;	/* POST waiting for the pid */
	struct evhttp_request *deleting;	/* DELETE waiting for the end */
	struct proc_watch *watches;	/* GET .../wait and .../output?follow=1 */
	uint64_t total[2];		/* bytes written to stdout, stderr so far */
};

/* A request waiting for a call: exec, plain or streamed. */
struct pending {
	struct sandbox *sb;
	struct corral_call *call;
	struct evhttp_request *req;	/* NULL once the client has gone */
	struct event *ev_closed;	/* the client's end closing (EV_CLOSED) */
	bool stream;
	bool held;			/* output held until the client catches up */
	bool base64;			/* output_encoding "base64" */
	/* a UTF-8 sequence cut by a read, joined with the next chunk's start */
	char carry[2][4];
	size_t ncarry[2];
};

struct sandbox {
	struct sandbox *next, *prev;
	struct daemon *d;
	struct corral_box *box;
	char id[64];
	char created[32];		/* RFC 3339 */
	char expires[32];		/* RFC 3339, when the TTL runs out; "": never */
	json_t *labels;
	uint64_t ttl_ms, idle_freeze_ms;
	struct event *ev_ttl;
	struct evhttp_request *creating;	/* POST waiting for on_ready */
	struct event *ev_creator;	/* its client closing (EV_CLOSED) */
	struct proc *procs;
	size_t nprocs;
	bool ready;
	bool pooled;			/* built ahead, not handed out yet */
	bool recorded;			/* in STATE/sandboxes.log (state.c) */
	struct lease *lease;		/* bound to (api_leases.c), or NULL */
	/* the TCP peer that created it (api_peer_key); "": the unix socket's */
	char peer[DAEMON_PEER_KEY_MAX];
	/*
	 * Holds what of the host a TCP client could not have had (a host
	 * path outside every --allow-host-path, the daemon's environment or
	 * files: api_access_local): not there for TCP clients, and its id
	 * says so (SANDBOX_LOCAL_PREFIX) in the audit log and in snapshots.
	 */
	bool local;
};

struct follower {
	struct follower *next;
	struct evhttp_request *req;
	char sandbox[64];		/* "" : every sandbox */
	bool tcp;			/* a TCP client's: no local sandbox's lines */
	struct daemon *d;
};

struct gate;
struct events_reader;
struct build;
struct upload;

/*
 * A worker other than a build's (an archive's unpack, a snapshot's copy)
 * while it runs, and whose sandbox it works for (api_builds.c: owner_key),
 * which builds_room counts with the owner's builds.
 */
struct worker_owner {
	struct worker_owner *next, *prev;
	char key[DAEMON_PEER_KEY_MAX + 8];	/* "": the unix socket's, not bounded */
	bool idle;		/* counted for its owner, no worker (worker_hold) */
};

struct daemon {
	struct event_base *base;
	struct gate *gates;		/* one a listener (api_gate.c) */
	struct daemon_limits limits;
	struct daemon_access access;	/* allow_paths resolved, ours */
	/*
	 * The same prefixes as the operator named them (absolute, without
	 * "." or ".." and trailing '/'; NULL where not): what a TCP client's
	 * host path must lie under by name before the daemon opens it.
	 */
	char **allow_named;
	char *state_real, *socket_dir_real;	/* resolved: never bindable */
	char *key_real[2];		/* the token's, the TLS key's file: nor these */
	dev_t socket_dev;		/* the socket's inode, never bindable */
	ino_t socket_ino;		/* either (0: not known) */
	struct evhttp *http_unix, *http_tcp;
	char *socket_path, *state_dir, *token;
	struct corral_tls_server *tls;	/* --tls-cert: what the TCP gate's connections speak */
	bool socket_bound;		/* socket_path is ours to remove at the end */
	struct corral_log *log;
	struct sandbox *sandboxes;
	size_t nsandboxes, max_sandboxes;
	uint64_t snapshot_budget;	/* bytes (api_snapshots.c) */
	struct corral_snapshot_tally *snap_tally;	/* its copies under way: shared */
	size_t pool_size;
	/*
	 * --policy FILE, as loaded (the bound a client's policy is judged
	 * against) and as written (what a client's policy is laid over);
	 * both NULL without it.
	 */
	struct corral_policy *bound;
	json_t *bound_json;
	struct corral_policy builtin;	/* without --policy: a TCP client's bound */
	struct event *ev_pool;		/* the next pool_step */
	uint64_t last_create;		/* ms, monotonic: the last POST /v1/sandboxes */
	uint64_t pool_held;		/* ms, monotonic: since when calls hold the pool */
	struct follower *followers;
	struct events_reader *readers;	/* GET /v1/events still reading the log */
	struct lease *leases;		/* open (api_leases.c) */
	struct build *builds;		/* answers made off the loop (api_builds.c) */
	struct worker_owner *owned;	/* unpacks' and snapshots' workers running */
	struct upload *uploads;		/* archives streamed in (api_untar.c) */
	size_t nworkers;		/* all workers running: builds', unpacks', snapshots' */
	size_t nleases;
	uint64_t lease_serial;		/* the last lease's (lease_serial()) */
	uint64_t requests, execs;
	/*
	 * Of them, those a TCP client is told of (/v1/metrics): the requests
	 * that came over TCP, and the execs of sandboxes not local (the unix
	 * clients' work is not a TCP client's to time).
	 */
	uint64_t requests_tcp, execs_local;
	/*
	 * What of the state directory a daemon wrote before local sandboxes
	 * had ids of their own (STATE/tcp-since, state.c): the audit log's
	 * first bytes and the snapshots made up to a time ("": none), which
	 * a TCP client does not get.
	 */
	off_t tcp_since_bytes;
	char tcp_since_time[24];
	unsigned http_timeout_s;	/* evhttp's read and write timeout (serve.c) */
	int lock_fd;
	/*
	 * STATE/sandboxes.log, appended to: "+ID" as a sandbox is handed
	 * out, "-ID" as it goes (state.c: state_write); its bytes and lines
	 * so far, and the sandboxes it holds, for its compaction.
	 */
	int record_fd;
	off_t record_bytes;
	size_t record_lines, nrecorded;
	int watchdog_fd;		/* its pipe: EOF when we are gone */
	pid_t watchdog_pid;
};

/* api_gate.c: the connections of a listener bound on http */
int api_gate_listen(struct daemon *d, struct evhttp *http,
		    struct evhttp_bound_socket *bound, const char *name,
		    bool tcp, struct corral_err *err);
void api_gate_stop(struct daemon *d);	/* before evhttp_free() */
void api_gate_free(struct daemon *d);	/* after */

/* api.c, api_events.c */
void api_handle(struct evhttp_request *req, void *arg);
void api_on_log_line(void *arg, const char *sandbox, const char *line, size_t len);
void api_events_stop(struct daemon *d);	/* the readers' replies end */
/* registry.c */
void sandbox_destroy(struct sandbox *sb, const char *why);
void pool_fill(struct daemon *d);

/* state.c */
int daemon_mkdir_p(const char *path, mode_t mode);
/* the state directory locked, its audit log opened, a killed daemon's left said */
int state_open(struct daemon *d, struct corral_err *err);
int state_write(struct daemon *d, struct sandbox *sb);
void state_remove(struct daemon *d, struct sandbox *sb);

#endif
