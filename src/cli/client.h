/*
 * client.h - what the verbs that talk to `corral serve` share.
 *
 * Each verb is a file of its own (create.c, exec.c, cp.c, pause.c for pause
 * and resume, halt.c, rm.c, ls.c, logs.c, events.c) and is a thin wrapper
 * over one or two HTTP requests; the daemon does the work.  Under them:
 *   args.c       a verb's command line: --help, usage errors, options, the
 *                sandbox id (corral_check_sandbox_id), the JSON body
 *                built from the options
 *   client.c     the connection (unix socket, or TCP with a bearer token),
 *                requests and replies, the API's paths
 *   sockhttp.c   a request over the unix socket, without libcurl
 *   print.c      what the verbs print: the daemon's text made safe for a
 *                terminal, JSON, the last flush of stdout
 *   localfile.c  local files read and written whole (cp, exec's stdin), or
 *                as they come (an export's patch)
 *   curl.c       libcurl, loaded on first use (a --url only)
 * Every function here that fails says why on stderr and returns the exit
 * status to end with (a usage error's, verb_usage_status: 2 but for exec;
 * EXIT_CORRAL), or -1 / NULL where noted.
 */
#ifndef CORRAL_CLIENT_H
#define CORRAL_CLIENT_H

#include "cli.h"

#define CURL_DISABLE_TYPECHECK
#include <curl/curl.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JSON_BODY_MAX	(1u << 20)	/* the daemon's limit on a JSON body */
#define FILE_MAX	(64u << 20)	/* ... and on a file, either way */
#define REPLY_MAX	(256u << 20)	/* what we keep of any other answer */
#define DURATION_MAX_MS	(UINT64_C(100) * 365 * 24 * 3600 * 1000)
#define CONNECT_WAIT_S	10		/* for a daemon that lets no connection in */

#define HELP_SHOWN	(-1)		/* from verb_parse: exit 0 */

/* ---- args.c: a verb's command line ----------------------------------- */

struct verb {
	const char *name;
	const char *head;	/* synopsis, description, the verb's options */
	const char *tail;	/* exit status, examples */
	/*
	 * A usage error's exit status: 2, or EXIT_CORRAL for a verb whose
	 * status is otherwise the command's own (exec), which may be 2.
	 */
	int usage_status;
	bool no_json;		/* takes no --json: its help says nothing of it */
};

/* Options every client verb takes; a verb numbers its own from OPT_OWN. */
enum {
	OPT_SOCKET = 256, OPT_URL, OPT_TOKEN_FILE, OPT_CA_FILE, OPT_CERT_FILE,
	OPT_KEY_FILE, OPT_JSON,
	OPT_OWN,
};

#define CONN_OPTIONS							\
	{ "socket", required_argument, NULL, OPT_SOCKET },		\
	{ "url", required_argument, NULL, OPT_URL },			\
	{ "token-file", required_argument, NULL, OPT_TOKEN_FILE },	\
	{ "ca-file", required_argument, NULL, OPT_CA_FILE },		\
	{ "cert-file", required_argument, NULL, OPT_CERT_FILE },	\
	{ "key-file", required_argument, NULL, OPT_KEY_FILE }

/* The verbs whose only option of their own is --json (rm, logs, pause ...). */
extern const struct option verb_json_options[];
/* Their option_fn: arg is a bool, set by --json. */
int set_json_flag(void *arg, int opt, const char *val);

struct conn;
typedef int (*option_fn)(void *arg, int opt, const char *val);

int verb_help(const struct verb *v);
/* v's exit status for a usage error (2 unless v says otherwise) */
int verb_usage_status(const struct verb *v);
int verb_usage_error(const struct verb *v, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/*
 * getopt over a verb's options: connection options go to *c, the verb's
 * own to fn(arg, ...).  Options and operands may come in any order (GNU
 * permutation) unless shorts begins with "+".  Returns 0 to go on (optind
 * at the operands), HELP_SHOWN, or an exit status.
 */
int verb_parse(const struct verb *v, const struct option *opts,
	       const char *shorts, int argc, char **argv, struct conn *c,
	       option_fn fn, void *arg);
/* The same from optind on, for a verb that reads operands in between. */
int verb_parse_more(const struct verb *v, const struct option *opts,
		    const char *shorts, int argc, char **argv, struct conn *c,
		    option_fn fn, void *arg);
/* "30s", "500ms", "2m", a bare number of seconds -> ms, for flag. */
int verb_duration(const struct verb *v, const char *flag, const char *arg,
		  uint64_t *ms);

/* A sandbox id by the library's one rule (corral_check_sandbox_id): it
 * cannot be a path segment like "..". */
bool client_valid_id(const char *id);
/* 0, or a usage error that says what an id is. */
int verb_check_id(const struct verb *v, const char *id);

/* json_object_set_new(), which takes v even when it fails (a NULL v too). */
int body_put(json_t *o, const char *key, json_t *v);
/* A string from the command line for flag: JSON carries only UTF-8. */
int body_put_text(const struct verb *v, json_t *o, const char *key,
		  const char *flag, const char *text);
/* --label K=V, --env K=V: one key into obj, once. */
int body_put_pair(const struct verb *v, json_t *obj, const char *flag,
		  const char *arg);
/* The API counts in seconds: whole ones as an integer, "1.5s" as 1.5. */
int body_put_seconds(json_t *body, const char *key, uint64_t ms);

/* ---- client.c: the daemon, over HTTP ---------------------------------- */

struct conn {
	const char *socket;		/* unix socket, when not over TCP */
	const char *socket_from;	/* how it was found, for messages */
	const char *url;		/* --url */
	const char *token_file;		/* --token-file */
	const char *ca_file;		/* --ca-file: who signed an https daemon's certificate */
	const char *cert_file;		/* --cert-file: ours, for a daemon that asks (mTLS) */
	const char *key_file;		/* --key-file: its key */
	char *base;			/* URL prefix, no trailing slash */
	char *auth;			/* "Authorization: Bearer ..." */
	CURL *curl;			/* a --url's: rm of many reuses it */
	bool curl_global;
	bool raw;			/* raw_fd is conn_connect_raw()'s, over the socket */
	int raw_fd;
	char socket_buf[PATH_MAX];
};

/* Where to send requests, and the token to send with them; no I/O on the
 * socket yet.  Idempotent up to conn_open(). */
int conn_target(struct conn *c, const struct verb *v);
/* conn_target(), then libcurl for a --url. */
int conn_open(struct conn *c, const struct verb *v);
void conn_close(struct conn *c);
/* --ca-file, --cert-file and --key-file on a libcurl handle, if given */
CURLcode conn_curl_tls(const struct conn *c, CURL *curl);
/* what to add to a transport error rc over https: a hint, or "" */
const char *conn_tls_hint(const struct conn *c, CURLcode rc);

struct request {
	const char *method;
	const char *path;		/* "/v1/...", query already escaped */
	const char *body;		/* NULL: none */
	size_t body_len;
	const char *type;		/* "Content-Type: ..." of the body */
	const char *accept;		/* "Accept: ...", or NULL */
};

/* It sends a body (perhaps empty, with its length): POST, PUT, or any with one. */
bool request_has_body(const struct request *q);

typedef int (*line_fn)(void *arg, char *line, size_t len);
typedef int (*sink_fn)(void *arg, const char *data, size_t len);

struct reply {
	CURL *curl;
	long status;
	char type[128];			/* its Content-Type, "" if none (cut if longer) */
	char *buf;			/* NUL-terminated */
	size_t len, cap;
	size_t max;			/* refuse answers (or lines) larger */
	/* When set, a 2xx answer goes here a line at a time, not into buf. */
	line_fn line;
	/* Or here as it comes, however large: max bounds only other answers. */
	sink_fn sink;
	void *arg;
	bool stopped;			/* we ended the transfer, and said why */
};

/*
 * One request.  Returns 0 when an answer came, whatever its status (in
 * r->status), or -1 when none did (said on stderr).
 */
int conn_perform(struct conn *c, const struct request *q, struct reply *r);
/*
 * A connection of our own to the daemon, for a protocol HTTP upgrades to
 * (exec -t): connected (TLS too, for https), nothing sent.  Bytes go with
 * conn_raw_send() and conn_raw_recv(); *fd is for poll().
 */
int conn_connect_raw(struct conn *c, const char *path, int *fd);
/*
 * Bytes on that connection, without waiting: 1 moved (*n; 0 from recv is
 * the daemon's end), 0 none now (poll *fd), -1 failed (*why says).
 */
int conn_raw_send(struct conn *c, const void *buf, size_t len, size_t *n,
		  const char **why);
int conn_raw_recv(struct conn *c, void *buf, size_t len, size_t *n,
		  const char **why);
/* Why the socket would not connect (os_errno), said for a person. */
void conn_connect_error(const struct conn *c, int os_errno);
/*
 * A piece of the answer's body, as the transport got it: to r->sink, or
 * r->line, or r->buf.  -1 when that refused it (said; r->stopped).
 */
int reply_take(struct reply *r, const char *data, size_t n);
/* data to r->buf, up to r->max (else said, and -1), NUL-terminated. */
int reply_append(struct reply *r, const char *data, size_t n);
/* 0 on a 2xx answer; else says what the daemon said and returns -1. */
int reply_check(const struct reply *r);
/* The answer as a JSON object, or NULL (said on stderr). */
json_t *reply_object(const struct reply *r);
void reply_free(struct reply *r);
/*
 * A request with an optional JSON body whose answer is a JSON object; NULL
 * when anything went wrong (said on stderr).
 */
json_t *conn_call_json(struct conn *c, const char *method, const char *path,
		       const json_t *body);

/*
 * The sandbox's rw directories, from its "rw_dirs" (none from a daemon
 * that does not say): *ids malloc'd.  0, or EXIT_CORRAL (said).
 */
int sandbox_rw_dirs(struct conn *c, const char *id, struct corral_dir_id **ids,
		    size_t *n);
/* s with all but RFC 3986's unreserved characters as %XX; malloc'd, or NULL. */
char *conn_escape(const char *s);
/* "/v1/sandboxes/ID" + rest, malloc'd; NULL when out of memory (said). */
char *conn_sandbox_path(struct conn *c, const char *id, const char *rest);
/* ".../ID/files?path=FILE" (escaped), "&list=1" with list. */
char *conn_files_path(struct conn *c, const char *id, const char *file,
		      bool list);

/* ---- sockhttp.c: over the unix socket, without libcurl ------------------ */

/*
 * Connected to c->socket, blocking, and served by us or root (a socket
 * another user listens on is refused): 0, or -1 (said).
 */
int sock_connect(const struct conn *c, int *fd);
/*
 * corral mcp's start: true when a listener is there and another user's
 * (said); false when ours, root's, or nobody answers.  Its requests check
 * each connection too (sock_check_peer), but a refused health check reads
 * as "no daemon" there, which would start a private one instead of
 * saying whose socket the path is.
 */
bool sock_foreign(const struct conn *c);
/*
 * Whether fd, connected to c->socket, is served by us or root: 0, or -1
 * (said).  *peer (if not NULL): the listener's uid, when known.
 */
int sock_check_peer(const struct conn *c, int fd, uid_t *peer);
/* conn_perform() over c->socket: one connection, closed after. */
int sock_perform(struct conn *c, const struct request *q, struct reply *r);

/* ---- print.c: what the verbs print ------------------------------------ */

/* "out of memory WHAT": what was being built; returns EXIT_CORRAL. */
int out_of_memory(const char *what);
/* cli_error() for text the daemon sent, see printable(). */
void daemon_error(const char *text, const char *suffix);
int print_json(const json_t *o);
/* The id, or with as_json the daemon's whole answer o. */
int print_id_or_json(const char *id, const json_t *o, bool as_json);
/* A verb's last word: output that could not be written is a failure. */
int verb_finish(int code);

/* ---- localfile.c: local files, whole or as they come ------------------ */

/*
 * The local files a sandbox's bytes go to or come from, reached without
 * a symlink that lies in one of the sandbox's rw directories (rw, nrw:
 * sandbox_rw_dirs; none: NULL, 0), which the sandbox may have left there
 * to lead us to a file of its choosing (corral_path_open).
 */
/*
 * cp_stream.c: the tar on stdin into ID:/DIR (path: the archive's request
 * path), streamed; CP_STREAM_OLD when the daemon is too old for it and
 * nothing of stdin was read, else the exit status (said).
 */
#define CP_STREAM_OLD	(-2)
int cp_in_stream(struct conn *c, const char *path, bool as_json);

/* A local file, or "-" for stdin, up to max bytes; only regular files. */
int read_local(const char *path, size_t max, char **out, size_t *len,
	       const struct corral_dir_id *rw, size_t nrw);
/*
 * The file at path (created or truncated), or "-" for stdout: on a
 * terminal, shown as local_out_for_reading() shows text.
 */
int write_local(const char *path, const char *buf, size_t len,
		const struct corral_dir_id *rw, size_t nrw);

/*
 * A local file written as it comes, never held whole: into a new file
 * beside path (corral_newfile: unnamed, or PATH.corral-export.PID) that
 * takes path's name only once it is complete, so a failure leaves path as
 * it was; "-" is stdout.
 */
struct local_out {
	const char *path;
	int dir;			/* path's directory, judged */
	char *name;			/* path's last name, beneath dir */
	struct corral_newfile nf;	/* the new file, beneath dir */
	bool file;			/* nf is open (not stdout) */
	int fd;
	bool shown;			/* a terminal's: printable_lines() */
	char held[4];			/* a character's first bytes, shown */
	size_t nheld;
};
int local_out_open(struct local_out *o, const char *path,
		   const struct corral_dir_id *rw, size_t nrw);
int local_out_write(struct local_out *o, const char *buf, size_t len);
/*
 * Text for a person to read (a patch to review): when it goes to a
 * terminal, its controls are shown as printable_lines() shows them.
 */
void local_out_for_reading(struct local_out *o);
/* keep: the new file takes path's name; else it goes.  Either way closed. */
int local_out_close(struct local_out *o, bool keep);

/* The media type of an export's patch as it is (the report's line, then
 * the patch), which the daemon's api.h names EXPORT_STREAM_TYPE. */
#define EXPORT_STREAM_TYPE	"application/vnd.corral.export-patch"

/* ---- the verbs' command lines, parsed apart from what is sent ---------- */

/* create.c: the body of POST /v1/sandboxes */
struct create_args {
	json_t *body;
	json_t *labels;
	const char *workspace;
	bool json;
};
int create_parse(struct create_args *a, struct conn *c, int argc, char **argv);

/* exec.c: the body of POST .../exec or .../processes */
struct exec_args {
	json_t *body;
	json_t *env;
	const char *id;
	const char *command;		/* -c */
	const char *stdin_file;		/* --stdin-file, or "-" for -i */
	bool json, no_stream, background, tty;
};
int exec_parse(struct exec_args *a, struct conn *c, int argc, char **argv);
/*
 * The exit status `corral run` would give for the result object the
 * daemon's exec answers with: its status, exit_code and signal, mapped by
 * corral_result_exit_code() itself.  Returns -1 when the object does not
 * say: a status this client does not know, or no integer exit_code.
 */
int client_exit_code(const json_t *result);
/* Its exit status, the end told on stderr with tell (as corral run does). */
int exec_result_code(const json_t *result, bool tell);
/* exec_tty.c: exec -t, the call on a pty inside joined to our terminal. */
int exec_tty(struct conn *c, const char *id, json_t *body);

/* cp.c: "ID:/path" names a file in sandbox ID: true, with the id copied to
 * id[idlen] and *path pointing at the absolute path in arg.  Anything else
 * is a local path: false. */
bool client_split_remote(const char *arg, char *id, size_t idlen,
			 const char **path);

/* pause.c: POST .../ID/ACTION (pause, resume, halt); prints the id or,
 * with as_json, the sandbox object. */
int post_state(struct conn *c, const char *id, const char *action,
	       const json_t *body, bool as_json);

/* events.c: "/v1/events", of one sandbox or all, to follow or not. */
char *events_path(const char *id, bool follow);

#endif
