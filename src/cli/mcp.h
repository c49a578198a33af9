/*
 * mcp.h - `corral mcp`: a Model Context Protocol server on stdio, a client
 * of `corral serve` underneath.  Its parts:
 *   mcp.c         the command line, the session, JSON-RPC in and out
 *   mcp_daemon.c  the daemon to talk to: a running one, or a private one
 *                 started for the session and removed with it
 *   mcp_http.c    one HTTP request to the daemon on the calling thread,
 *                 cancellable, with the answer's lines streamed
 *   mcp_tools.c   the tools: their schemas and what each one asks the daemon
 *   mcp_bounds.c  the operator's policy as the bound of what a model asks for
 *   mcp_lease.c   a shared daemon: the session's lease, a connection held
 *                 open whose end makes the daemon destroy its sandboxes
 *   mcp_reaper.c  a shared daemon: the session's sandboxes removed at its
 *                 end; for a daemon without leases, by a child that
 *                 outlives a killed session
 * Every tools/call runs on a thread of its own, so that the session goes on
 * reading stdin (pings, other calls, notifications/cancelled) meanwhile.
 */
#ifndef CORRAL_MCP_H
#define CORRAL_MCP_H

#include "client.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>

#define MCP_CALLS_MAX		32	/* tools/call in flight at once */
#define MCP_LINE_MAX		(8u << 20)	/* one JSON-RPC message */
#define MCP_EXEC_TIMEOUT_DEFAULT 60	/* seconds, when the model gives none */
#define MCP_EOF_GRACE		10	/* seconds calls may finish after stdin's end */
#define MCP_REAP_SECONDS	60	/* to remove the session's sandboxes at its end */
/*
 * A progressToken is echoed in every progress notification of its call:
 * a string of at most this many bytes (a UUID is 36), or an integer.
 */
#define MCP_PROGRESS_TOKEN_MAX	256
/*
 * Sandboxes a session holds at once (--max-sandboxes): the operator's
 * policy bounds each one, and a model that makes them in a loop would
 * otherwise hold the private daemon's 1000 (a shared one's lease: 100),
 * each with the policy's memory and pids, in about 10 s.
 */
#define MCP_SANDBOXES_DEFAULT	16
#define MCP_SANDBOXES_MAX	1000	/* the private daemon's --max-sandboxes */
/*
 * Calls whose answer may hold a whole file (file_read, archive_read, a
 * patch; file_list's page and process_list's records, as large) at once: such an answer costs about 8 times the file while it is
 * encoded and sent (the bytes, base64, the text and the structured copy,
 * the message), 470 MB for one of 60 MB; 32 at once would take the host's
 * memory.  The others wait for a turn.  So does an answer that holds a
 * program's output (exec, process_output) once it is more than
 * MCP_BIG_OUTPUT: the program chooses it, and bytes JSON escapes six
 * times over cost 12 times their size (text and structured copy), so 32
 * execs of 1 MiB of \x01 on stdout and stderr took 1.9 GB at once.  What
 * waits for a turn holds the output, not its escaped copies.
 */
#define MCP_BIG_CALLS		2
#define MCP_BIG_OUTPUT		(64u << 10)

/* The daemon we talk to, and whether we started it. */
struct mcp_daemon {
	struct conn conn;		/* where: socket or URL + token */
	pid_t pid;			/* a private daemon's, or 0 */
	char *dir;			/* its private 0700 directory, or NULL */
	char *socket_path;		/* dir/corral.sock */
	char *state_dir;		/* dir/state */
};

/* What the operator's policy allows; see mcp_bounds.c. */
struct mcp_bounds {
	json_t *policy;			/* the operator's policy object ({} none) */
	struct corral_policy limit;	/* ... loaded over the built-in default */
	char **policy_dirs;		/* --policy-dir: NAME.json for "policy": NAME */
	size_t npolicy_dirs;
};

/*
 * The host directory a model asked for as its workspace, opened once and
 * judged by what was opened: the daemon is asked for that object (its
 * path then, and its inode, which it must find there) while fd holds it.
 */
struct mcp_pin {
	int fd;				/* O_PATH, or -1: none asked for */
	char path[PATH_MAX];		/* where it was when judged */
	dev_t dev;
	ino_t ino;
};

struct mcp;

/* One tools/call in flight. */
struct mcp_call {
	struct mcp *m;
	json_t *id;			/* the request's id */
	json_t *progress_token;		/* params._meta.progressToken, or NULL */
	json_t *params;
	atomic_bool cancelled;		/* notifications/cancelled came */
	double progress;		/* last progress sent, strictly rising */
	uint64_t progress_bytes;	/* of output sent as progress: whole lines */
	bool progress_ended;		/* its budget spent: no more output as progress */
	pthread_t thread;
	bool used;
	bool big;			/* holds one of MCP_BIG_CALLS until answered */
};

/*
 * The sandboxes this session created: the only ones its tools reach.  A
 * daemon may be shared (the operator's own `corral serve`, other sessions):
 * its other sandboxes were made under other policies than the operator's
 * --policy, with other hosts, workspaces and binds.
 */
struct mcp_live;

/* One sandbox the session made. */
struct mcp_box {
	char *id;
	uint64_t seq;			/* the order it was recorded in */
	bool gone;			/* destroyed, or no longer in the daemon's list */
};

struct mcp_owned {
	pthread_mutex_t lock;
	struct mcp_box *boxes;		/* every one it made, gone ones too */
	size_t n, cap;
	uint64_t seq;			/* boxes recorded so far */
	size_t max;			/* --max-sandboxes: alive at once */
	size_t making;			/* creates sent and not yet answered */
	/* a shared daemon with leases: the lease, and the live ids kept here */
	char lease[64];			/* its id (mcp_lease.c), or "" */
	CURL *lease_conn;		/* its connection, held till the end */
	struct mcp_live *live;
	const struct mcp_daemon *d;
	/* a shared daemon without: the reaper */
	int reaper_fd;			/* to the reaper (mcp_reaper.c), or -1 */
	pid_t reaper;			/* its pid, or 0: a private daemon, a lease */
};

struct mcp {
	struct mcp_daemon d;
	struct mcp_bounds b;
	struct mcp_owned owned;
	pthread_mutex_t big_lock;
	pthread_cond_t big_free;
	int big_used;			/* of MCP_BIG_CALLS */
	pthread_mutex_t out_lock;	/* one message at a time on stdout */
	pthread_mutex_t calls_lock;
	pthread_cond_t calls_done;
	struct mcp_call calls[MCP_CALLS_MAX];
	size_t ncalls;
	bool stdout_broken;
};

/* ---- mcp.c --------------------------------------------------------------- */

/*
 * Write one message (a line) to stdout; takes msg's reference.  The
 * bytes written, newline included (0: none).
 */
size_t mcp_send(struct mcp *m, json_t *msg);
/*
 * notifications/progress for call, when its client asked for progress:
 * message is len bytes of UTF-8 (a NUL is a character like any other).
 * The bytes written, as mcp_send.
 */
size_t mcp_progress(struct mcp_call *call, const char *message, size_t len);

/* ---- mcp_daemon.c ---------------------------------------------------------- */

/*
 * The daemon the session talks to: --socket/--url/$CORRAL_SOCKET when given
 * (it must answer), else the default socket when a daemon answers there,
 * else (or with private) a private daemon of our own.
 */
int mcp_daemon_open(struct mcp_daemon *d, const struct verb *v, bool private);
/* Stop a private daemon (SIGTERM, then SIGKILL) and remove its directory. */
void mcp_daemon_close(struct mcp_daemon *d);

/* ---- mcp_http.c ------------------------------------------------------------ */

struct mcp_http {
	long status;
	char *buf;			/* the body (2xx streamed: the partial line) */
	size_t len, cap, max;
	/*
	 * When set, a 2xx answer goes here a line at a time: 0 goes on, 1
	 * ends the transfer as an answer (the caller has what it keeps: a
	 * follow that would never end), -1 ends it as a failure.
	 */
	int (*line)(void *arg, char *line, size_t len);
	void *arg;
	atomic_bool *cancel;		/* set: the transfer ends, the call dies */
	uint64_t deadline_ms;		/* corral_now_ms(): the transfer ends then (0: none) */
	bool timed_out;			/* it did: what came is the answer so far */
	bool enough;			/* line said 1: so is what came until then */
};

/*
 * One request to the daemon.  0 when an answer came (status in h->status),
 * -1 with *why (malloc'd) when none did, or it was cancelled.
 */
int mcp_http_do(const struct mcp_daemon *d, const char *method,
		const char *path, const char *body, size_t body_len,
		const char *type, struct mcp_http *h, char **why);
void mcp_http_free(struct mcp_http *h);
/* A handle's connection to the daemon's socket, checked once made. */
struct mcp_sock {
	const struct conn *conn;
	curl_socket_t fd;
	char refused[128];	/* why the connection was dropped unused, or "" */
};
/*
 * What every handle to the daemon is set to: url over its socket or TLS,
 * errors to errbuf, no signals (threads run requests at once), 10 s to
 * connect; over the socket, each connection's listener checked (w, which
 * must live as long as the handle's requests).
 */
CURLcode mcp_curl_to(const struct mcp_daemon *d, CURL *curl, const char *url,
		     char *errbuf, struct mcp_sock *w);
/* "/v1/sandboxes/ID" + rest (escaped); NULL when out of memory */
char *mcp_sandbox_path(const char *id, const char *rest);
/* s, %-escaped for a query string; NULL when out of memory */
char *mcp_escape(const char *s);

/* ---- mcp_tools.c ----------------------------------------------------------- */

/* Record id as this session's (the reaper told first); -1 when out of memory. */
int mcp_owned_add(struct mcp_owned *o, const char *id);
/* id is destroyed: the reaper forgets it. */
void mcp_owned_gone(struct mcp_owned *o, const char *id);
/* Did this session create id? */
bool mcp_owned_has(struct mcp_owned *o, const char *id);
void mcp_owned_free(struct mcp_owned *o);

/* The tools/list result. */
json_t *mcp_tools_list(void);
/* The tools/call result, or NULL with *code and *why for a JSON-RPC error
 * (an unknown tool: -32602).  With call->big set the caller owes
 * mcp_big_leave() once the answer is sent. */
json_t *mcp_tools_call(struct mcp_call *call, int *code, char **why);
void mcp_big_leave(struct mcp *m);

/* ---- mcp_bounds.c ---------------------------------------------------------- */

int mcp_bounds_load(struct mcp_bounds *b, const char *file);
void mcp_bounds_free(struct mcp_bounds *b);
/*
 * The policy object to send for a create: the operator's policy, a named
 * or inline policy of the model's merged over it, then allow_hosts and
 * limits; NULL with *why when it would go beyond the operator's policy
 * or is not a valid policy.  workspace (may be NULL) is checked too, and
 * the workspace the daemon would use (workspace, else the policy's) is
 * left in *pin (fd -1: none), for the caller to close (mcp_pin_close).
 */
json_t *mcp_bounds_policy(const struct mcp_bounds *b, const json_t *args,
			  const char *workspace, struct mcp_pin *pin, char **why);
void mcp_pin_close(struct mcp_pin *pin);
/* An exec's timeout_seconds within the operator's limits.timeout. */
int mcp_bounds_timeout(const struct mcp_bounds *b, double asked, double *out,
		       char **why);

/* ---- mcp_lease.c ----------------------------------------------------------- */

/*
 * Open a lease on d, held in o until mcp_lease_close: 0; 1 when the daemon
 * has no leases (404, 405: older than this corral); -1 with *why (malloc'd).
 */
int mcp_lease_open(struct mcp_owned *o, const struct mcp_daemon *d, char **why);
void mcp_lease_close(struct mcp_owned *o);

/* ---- mcp_reaper.c ---------------------------------------------------------- */

/*
 * For a shared daemon d, before any thread: a lease, else the reaper
 * forked.  Either way the session's sandboxes go once it has ended,
 * however it ended.
 */
int mcp_reaper_start(struct mcp_owned *o, const struct mcp_daemon *d);
/* "+ID" (made) or "-ID" (destroyed); o->lock held. */
void mcp_reaper_tell(struct mcp_owned *o, char op, const char *id);
/*
 * The session has ended: what is left is removed (here with a lease, by
 * the reaper, waited for, without), bounded; the lease closes.  0 when
 * nothing is left, -1 when some sandbox is (said on stderr, by name).
 */
int mcp_reaper_finish(struct mcp_owned *o);

#endif
