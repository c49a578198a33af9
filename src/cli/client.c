/*
 * client.c - the verbs that talk to `corral serve` (docs/API.md): create,
 * exec, cp, pause, resume, halt, rm, ls, logs, events.  Each is a thin
 * wrapper over one or two HTTP requests, made with libcurl over the daemon's
 * unix socket (or TCP with a bearer token); the daemon does the work.
 */
#include "cli.h"
#include "client.h"

#define CURL_DISABLE_TYPECHECK
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define JSON_BODY_MAX	(1u << 20)	/* the daemon's limit on a JSON body */
#define FILE_MAX	(64u << 20)	/* ... and on a file, either way */
#define REPLY_MAX	(256u << 20)	/* what we keep of any other answer */
#define DURATION_MAX_MS	(UINT64_C(100) * 365 * 24 * 3600 * 1000)

#define HELP_SHOWN	(-1)		/* from parse_options: exit 0 */

/* ---- help and usage ---------------------------------------------------- */

struct verb {
	const char *name;
	const char *head;	/* synopsis, description, the verb's options */
	const char *tail;	/* exit status, examples */
};

static const char conn_help[] =
"\n"
"Connection (every verb that talks to the daemon):\n"
"  --socket PATH        the daemon's unix socket; default: $CORRAL_SOCKET,\n"
"                       else /run/corral/corral.sock as root, else\n"
"                       $XDG_RUNTIME_DIR/corral.sock, where `corral serve`\n"
"                       makes it\n"
"  --url URL            talk to the daemon over TCP instead: http://HOST:PORT,\n"
"                       as `corral serve --listen` opened it; needs\n"
"                       --token-file\n"
"  --token-file FILE    the bearer token for --url: the first line of FILE\n"
"  -h, --help           this text\n"
"The daemon's refusals are printed as \"corral: DETAIL (HTTP STATUS)\".\n"
"\n";

static int show_help(const struct verb *v)
{
	fputs(v->head, stdout);
	fputs(conn_help, stdout);
	fputs(v->tail, stdout);
	return 0;
}

static int usage_error(const struct verb *v, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int usage_error(const struct verb *v, const char *fmt, ...)
{
	va_list ap;

	fputs("corral: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "; see `corral %s --help`\n", v->name);
	return 2;
}

static int out_of_memory(void)
{
	cli_error("out of memory");
	return EXIT_CORRAL;
}

/*
 * Text the daemon relays (file names, labels, reasons, details) may have
 * been chosen inside a sandbox: a terminal must not take it for control
 * sequences.  C0 controls, DEL and the C1 controls (UTF-8 c2 80..9f) become
 * \xNN; the result is malloc'd, NULL when out of memory.
 */
static char *printable(const char *s, size_t n)
{
	char *out = malloc(n * 4 + 1), *w = out;
	size_t i;

	if (!out)
		return NULL;
	for (i = 0; i < n; i++) {
		unsigned char ch = s[i];

		if (ch < 0x20 || ch == 0x7f) {
			w += sprintf(w, "\\x%02x", ch);
		} else if (ch == 0xc2 && i + 1 < n &&
			   (unsigned char)s[i + 1] >= 0x80 &&
			   (unsigned char)s[i + 1] <= 0x9f) {
			w += sprintf(w, "\\x%02x\\x%02x", ch,
				     (unsigned char)s[i + 1]);
			i++;
		} else {
			*w++ = ch;
		}
	}
	*w = '\0';
	return out;
}

/* cli_error() for text the daemon sent, see printable(). */
static void daemon_error(const char *text, const char *suffix)
{
	char *safe = printable(text, strlen(text));

	cli_error("%s%s", safe ? safe : "(out of memory)", suffix);
	free(safe);
}

/* ---- options ----------------------------------------------------------- */

enum {
	OPT_SOCKET = 256, OPT_URL, OPT_TOKEN_FILE,
	OPT_JSON, OPT_POLICY, OPT_WORKSPACE, OPT_TTL, OPT_IDLE_FREEZE,
	OPT_LABEL, OPT_TOOL_CALL, OPT_CWD, OPT_ENV, OPT_STDIN_FILE,
	OPT_TIMEOUT, OPT_NO_STREAM, OPT_BACKGROUND, OPT_REASON, OPT_LIST,
};

struct conn {
	const char *socket;		/* unix socket, when not over TCP */
	const char *socket_from;	/* how it was found, for messages */
	const char *url;		/* --url */
	const char *token_file;		/* --token-file */
	char *base;			/* URL prefix, no trailing slash */
	char *auth;			/* "Authorization: Bearer ..." */
	CURL *curl;			/* one handle: rm of many reuses it */
	bool curl_global;
	char socket_buf[PATH_MAX];
};

static bool conn_option(struct conn *c, int opt, const char *arg)
{
	switch (opt) {
	case OPT_SOCKET:
		c->socket = arg;
		c->socket_from = "--socket";
		return true;
	case OPT_URL:
		c->url = arg;
		return true;
	case OPT_TOKEN_FILE:
		c->token_file = arg;
		return true;
	}
	return false;
}

static int bad_option(const struct verb *v, int opt, char **argv)
{
	const char *arg = argv[optind - 1];

	if (opt == ':')
		return usage_error(v, "option \"%s\" needs a value", arg);
	if (optopt > 0 && optopt < 256)
		return usage_error(v, "unknown option \"-%c\"", optopt);
	return usage_error(v, "unknown option \"%s\"", arg);
}

typedef int (*option_fn)(void *arg, int opt, const char *val);

/*
 * getopt over a verb's options from optind on: connection options go to
 * *c, the verb's own to fn.  Returns 0 to go on, HELP_SHOWN, or an exit
 * code.
 */
static int parse_more(const struct verb *v, const struct option *opts,
		      const char *shorts, int argc, char **argv,
		      struct conn *c, option_fn fn, void *arg)
{
	int opt, code;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, shorts, opts, NULL)) != -1) {
		if (opt == 'h') {
			show_help(v);
			return HELP_SHOWN;
		}
		if (opt == ':' || opt == '?')
			return bad_option(v, opt, argv);
		if (conn_option(c, opt, optarg))
			continue;
		code = fn ? fn(arg, opt, optarg) : 0;
		if (code)
			return code;
	}
	return 0;
}

/* All of them; options and operands may come in any order (GNU permutation). */
static int parse_options(const struct verb *v, const struct option *opts,
			 const char *shorts, int argc, char **argv,
			 struct conn *c, option_fn fn, void *arg)
{
	optind = 1;
	return parse_more(v, opts, shorts, argc, argv, c, fn, arg);
}

static int parse_duration(const struct verb *v, const char *flag,
			  const char *arg, uint64_t *ms)
{
	struct corral_err err = { 0 };

	if (corral_parse_duration(arg, ms, &err) < 0)
		return usage_error(v, "%s: %s", flag, err.msg);
	if (*ms > DURATION_MAX_MS)
		return usage_error(v, "%s: too long (got \"%s\")", flag, arg);
	return 0;
}

bool client_valid_id(const char *id)
{
	static const char id_chars[] =
		"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		"0123456789._-";
	size_t n = strlen(id);

	return n > 0 && n <= 120 && id[0] != '.' && strspn(id, id_chars) == n;
}

static int check_id(const struct verb *v, const char *id)
{
	if (client_valid_id(id))
		return 0;
	return usage_error(v, "\"%s\" is not a sandbox id (1 to 120 letters, digits and ._-, as `corral create` prints them)",
			   id);
}

/* json_object_set_new() takes v even when it fails; a NULL v fails too. */
static int put(json_t *o, const char *key, json_t *v)
{
	if (json_object_set_new(o, key, v) < 0)
		return out_of_memory();
	return 0;
}

/* A string from the command line: JSON carries only UTF-8. */
static int put_text(const struct verb *v, json_t *o, const char *key,
		    const char *flag, const char *text)
{
	json_t *s = json_string(text);

	if (!s)
		return usage_error(v, "%s: \"%s\" is not UTF-8 text", flag, text);
	return put(o, key, s);
}

/* --label K=V, --env K=V: one key into obj, once. */
static int put_pair(const struct verb *v, json_t *obj, const char *flag,
		    const char *arg)
{
	const char *eq = strchr(arg, '=');
	json_t *val;
	char *key;
	int code = 0;

	if (!eq || eq == arg)
		return usage_error(v, "%s: expected KEY=VALUE (got \"%s\")",
				   flag, arg);
	key = strndup(arg, eq - arg);
	if (!key)
		return out_of_memory();
	if (json_object_get(obj, key)) {
		code = usage_error(v, "%s: %s is given twice", flag, key);
	} else {
		/* jansson checks both key and value are UTF-8, and takes val */
		val = json_string(eq + 1);
		if (!val || json_object_set_new(obj, key, val) < 0)
			code = usage_error(v, "%s: \"%s\" is not UTF-8 text",
					   flag, arg);
	}
	free(key);
	return code;
}

/* ---- connection -------------------------------------------------------- */

/* Where the daemon listens when no --socket says: as docs/API.md has it. */
static int find_socket(struct conn *c)
{
	const char *env = getenv("CORRAL_SOCKET"), *run;
	int n;

	if (c->socket)
		return 0;
	if (env && *env) {
		c->socket = env;
		c->socket_from = "$CORRAL_SOCKET";
		return 0;
	}
	if (geteuid() == 0) {
		c->socket = "/run/corral/corral.sock";
		c->socket_from = "the default as root";
		return 0;
	}
	run = getenv("XDG_RUNTIME_DIR");
	if (!run || run[0] != '/') {
		cli_error("cannot tell where the daemon's socket is: XDG_RUNTIME_DIR is not set to an absolute path; give --socket PATH or set CORRAL_SOCKET");
		return EXIT_CORRAL;
	}
	n = snprintf(c->socket_buf, sizeof(c->socket_buf), "%s/corral.sock",
		     run);
	if (n < 0 || (size_t)n >= sizeof(c->socket_buf)) {
		cli_error("XDG_RUNTIME_DIR is too long (%zu bytes)", strlen(run));
		return EXIT_CORRAL;
	}
	c->socket = c->socket_buf;
	c->socket_from = "$XDG_RUNTIME_DIR/corral.sock";
	return 0;
}

/* The token is the first line of the file; it must fit in a header. */
static int read_token(struct conn *c)
{
	char *line = NULL;
	size_t cap = 0, i;
	ssize_t n;
	FILE *f;
	int code = EXIT_CORRAL;

	f = fopen(c->token_file, "re");
	if (!f) {
		cli_error("--token-file %s: %s", c->token_file, strerror(errno));
		return EXIT_CORRAL;
	}
	n = getline(&line, &cap, f);
	if (n < 0 && ferror(f))
		cli_error("--token-file %s: %s", c->token_file, strerror(errno));
	else if (n < 0)
		cli_error("--token-file %s: the file is empty", c->token_file);
	fclose(f);
	if (n < 0)
		goto out;
	while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		line[--n] = '\0';
	for (i = 0; i < (size_t)n; i++)
		if ((unsigned char)line[i] <= ' ' || line[i] == 0x7f)
			break;
	if (n == 0 || i < (size_t)n) {
		cli_error("--token-file %s: the first line must be the token: not empty, no spaces or control characters",
			  c->token_file);
		goto out;
	}
	if (asprintf(&c->auth, "Authorization: Bearer %s", line) < 0) {
		c->auth = NULL;
		code = out_of_memory();
		goto out;
	}
	code = 0;
out:
	if (line)
		explicit_bzero(line, cap);
	free(line);
	return code;
}

static int conn_target(struct conn *c, const struct verb *v)
{
	struct sockaddr_un sa;
	size_t n;
	int code;

	if (c->url && c->socket)
		return usage_error(v, "--socket and --url exclude each other");
	if (c->token_file && !c->url)
		return usage_error(v, "--token-file goes with --url; the unix socket needs no token");
	if (c->url) {
		if (strncmp(c->url, "http://", 7) && strncmp(c->url, "https://", 8))
			return usage_error(v, "--url: expected http://HOST:PORT (got \"%s\")",
					   c->url);
		if (!c->token_file)
			return usage_error(v, "--url needs --token-file: over TCP the daemon answers only requests that carry its token");
		code = read_token(c);
		if (code)
			return code;
		c->base = strdup(c->url);
		if (!c->base)
			return out_of_memory();
		n = strlen(c->base);
		while (n > 0 && c->base[n - 1] == '/')
			c->base[--n] = '\0';
		return 0;
	}
	code = find_socket(c);
	if (code)
		return code;
	if (strlen(c->socket) >= sizeof(sa.sun_path)) {
		cli_error("socket path %s (%s) is too long: %zu bytes, a unix socket path has at most %zu",
			  c->socket, c->socket_from, strlen(c->socket),
			  sizeof(sa.sun_path) - 1);
		return EXIT_CORRAL;
	}
	/* the host part is not looked at: the socket decides where it goes */
	c->base = strdup("http://localhost");
	if (!c->base)
		return out_of_memory();
	return 0;
}

/* Idempotent up to here: exec checks the target before it reads stdin. */
static int conn_open(struct conn *c, const struct verb *v)
{
	int code = c->base ? 0 : conn_target(c, v);

	if (code)
		return code;
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		cli_error("libcurl could not be initialised");
		return EXIT_CORRAL;
	}
	c->curl_global = true;
	c->curl = curl_easy_init();
	if (!c->curl)
		return out_of_memory();
	return 0;
}

static void conn_close(struct conn *c)
{
	if (c->curl)
		curl_easy_cleanup(c->curl);
	if (c->curl_global)
		curl_global_cleanup();
	if (c->auth)
		explicit_bzero(c->auth, strlen(c->auth));
	free(c->auth);
	free(c->base);
}

/* ---- requests and replies ---------------------------------------------- */

struct request {
	const char *method;
	const char *path;		/* "/v1/...", query already escaped */
	const char *body;		/* NULL: none */
	size_t body_len;
	const char *type;		/* "Content-Type: ..." of the body */
};

typedef int (*line_fn)(void *arg, char *line, size_t len);

struct reply {
	CURL *curl;
	long status;
	char *buf;			/* NUL-terminated */
	size_t len, cap;
	size_t max;			/* refuse answers (or lines) larger */
	/* When set, a 2xx answer goes here a line at a time, not into buf. */
	line_fn line;
	void *arg;
	bool stopped;			/* we ended the transfer, and said why */
};

static bool is_success(long status)
{
	return status >= 200 && status < 300;
}

static int reply_append(struct reply *r, const char *data, size_t n)
{
	size_t need = r->len + n + 1, cap;
	char *p;

	if (r->len + n > r->max) {
		char size[32];

		corral_format_size(r->max, size, sizeof(size));
		cli_error("the daemon's answer is larger than %s; stopped reading it",
			  size);
		return -1;
	}
	if (need > r->cap) {
		cap = r->cap ? r->cap : 4096;
		while (cap < need)
			cap *= 2;
		p = realloc(r->buf, cap);
		if (!p) {
			out_of_memory();
			return -1;
		}
		r->buf = p;
		r->cap = cap;
	}
	memcpy(r->buf + r->len, data, n);
	r->len += n;
	r->buf[r->len] = '\0';
	return 0;
}

/* Hand the complete lines in buf to r->line; keep the partial last one. */
static int reply_lines(struct reply *r, size_t from)
{
	size_t start = 0;
	char *nl;

	while ((nl = memchr(r->buf + from, '\n', r->len - from))) {
		*nl = '\0';
		if (r->line(r->arg, r->buf + start, nl - (r->buf + start)) < 0)
			return -1;
		start = from = nl - r->buf + 1;
	}
	memmove(r->buf, r->buf + start, r->len - start);
	r->len -= start;
	r->buf[r->len] = '\0';
	return 0;
}

static size_t on_data(char *data, size_t size, size_t nmemb, void *arg)
{
	struct reply *r = arg;
	size_t n = size * nmemb, old = r->len;

	if (!r->status &&
	    curl_easy_getinfo(r->curl, CURLINFO_RESPONSE_CODE, &r->status) != CURLE_OK)
		r->status = 0;
	if (reply_append(r, data, n) < 0)
		goto stop;
	if (r->line && is_success(r->status) && reply_lines(r, old) < 0)
		goto stop;
	return n;
stop:
	r->stopped = true;
	return 0;		/* libcurl ends the transfer: CURLE_WRITE_ERROR */
}

static void reply_free(struct reply *r)
{
	free(r->buf);
	r->buf = NULL;
	r->len = r->cap = 0;
}

/* Say why nothing came back; most often: no daemon at that socket. */
static void transport_error(const struct conn *c, CURLcode rc,
			    const char *errbuf)
{
	const char *what = errbuf[0] ? errbuf : curl_easy_strerror(rc);
	long os_errno = 0;
	struct stat st = { 0 };

	if (c->url) {
		cli_error("cannot talk to the daemon at %s: %s", c->url, what);
		return;
	}
	if (rc != CURLE_COULDNT_CONNECT) {
		cli_error("talking to the daemon at %s: %s", c->socket, what);
		return;
	}
	if (stat(c->socket, &st) < 0 && errno == ENOENT) {
		cli_error("no daemon socket at %s (%s); start the daemon with `corral serve`, or name its socket with --socket PATH",
			  c->socket, c->socket_from);
		return;
	}
	if (st.st_mode && !S_ISSOCK(st.st_mode)) {
		cli_error("%s (%s) is not a socket; name the daemon's with --socket PATH",
			  c->socket, c->socket_from);
		return;
	}
	if (curl_easy_getinfo(c->curl, CURLINFO_OS_ERRNO, &os_errno) != CURLE_OK)
		os_errno = 0;
	if (os_errno == EACCES || os_errno == EPERM)
		cli_error("%s: permission denied; the daemon's socket is mode 0600: run as the user who started `corral serve`",
			  c->socket);
	else if (os_errno == ECONNREFUSED)
		cli_error("nothing answers at %s (%s): a socket left by a daemon that is gone?  Start one with `corral serve`",
			  c->socket, c->socket_from);
	else
		cli_error("cannot connect to the daemon at %s: %s", c->socket,
			  os_errno ? strerror(os_errno) : what);
}

static int append_header(struct curl_slist **h, const char *line)
{
	struct curl_slist *n = curl_slist_append(*h, line);

	if (!n) {
		out_of_memory();
		return -1;
	}
	*h = n;
	return 0;
}

static int build_headers(const struct conn *c, const struct request *q,
			 struct curl_slist **h)
{
	/* Send a body at once, without waiting for a "100 Continue". */
	if (append_header(h, "Expect:") < 0)
		return -1;
	if (c->auth && append_header(h, c->auth) < 0)
		return -1;
	/* "Content-Type:" alone drops libcurl's form-urlencoded default. */
	if (append_header(h, q->type ? q->type : "Content-Type:") < 0)
		return -1;
	return 0;
}

/* POSTFIELDS with CUSTOMREQUEST is how libcurl sends a PUT from memory. */
static CURLcode set_method(CURL *curl, const struct request *q)
{
	bool with_body = q->body || !strcmp(q->method, "POST") ||
			 !strcmp(q->method, "PUT");
	CURLcode rc = CURLE_OK;

	if (with_body) {
		rc = curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
				      (curl_off_t)q->body_len);
		if (rc == CURLE_OK)
			rc = curl_easy_setopt(curl, CURLOPT_POSTFIELDS,
					      q->body ? q->body : "");
	}
	if (rc == CURLE_OK && strcmp(q->method, with_body ? "POST" : "GET"))
		rc = curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, q->method);
	return rc;
}

static CURLcode set_options(const struct conn *c, const struct request *q,
			    struct reply *r, const char *url,
			    struct curl_slist *h, char *errbuf)
{
	CURL *curl = c->curl;
	CURLcode rc;

	rc = curl_easy_setopt(curl, CURLOPT_URL, url);
	if (rc == CURLE_OK && c->socket)
		rc = curl_easy_setopt(curl, CURLOPT_UNIX_SOCKET_PATH, c->socket);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(curl, CURLOPT_HTTPHEADER, h);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_data);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(curl, CURLOPT_WRITEDATA, r);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 10L);
	if (rc == CURLE_OK)
		rc = set_method(curl, q);
	return rc;
}

/*
 * One request.  Returns 0 when an answer came, whatever its status (in
 * r->status), or -1 when none did (said on stderr).
 */
static int perform(struct conn *c, const struct request *q, struct reply *r)
{
	char errbuf[CURL_ERROR_SIZE] = "";
	struct curl_slist *h = NULL;
	char *url = NULL;
	CURLcode rc;
	int ret = -1;

	if (asprintf(&url, "%s%s", c->base, q->path) < 0) {
		url = NULL;
		out_of_memory();
		goto out;
	}
	if (build_headers(c, q, &h) < 0)
		goto out;
	curl_easy_reset(c->curl);
	r->curl = c->curl;
	r->status = 0;
	rc = set_options(c, q, r, url, h, errbuf);
	if (rc != CURLE_OK) {
		cli_error("libcurl: %s", curl_easy_strerror(rc));
		goto out;
	}
	rc = curl_easy_perform(c->curl);
	if (rc != CURLE_OK) {
		if (!r->stopped)
			transport_error(c, rc, errbuf);
		goto out;
	}
	if (curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &r->status) != CURLE_OK) {
		cli_error("libcurl did not tell the HTTP status of the answer");
		goto out;
	}
	/* a stream's last line may lack its newline */
	if (r->line && is_success(r->status) && r->len) {
		if (r->line(r->arg, r->buf, r->len) < 0)
			goto out;
		r->len = 0;
	}
	ret = 0;
out:
	curl_slist_free_all(h);
	free(url);
	return ret;
}

/* {"error": CODE, "detail": SENTENCE} -> "corral: SENTENCE (HTTP 409)" */
static void reply_error(const struct reply *r)
{
	json_t *o = json_loadb(r->buf ? r->buf : "", r->len, 0, NULL);
	const char *detail = json_string_value(json_object_get(o, "detail"));
	char suffix[32];

	if (!detail)
		detail = json_string_value(json_object_get(o, "error"));
	snprintf(suffix, sizeof(suffix), " (HTTP %ld)", r->status);
	if (detail) {
		daemon_error(detail, suffix);
	} else {
		char *safe = printable(r->buf ? r->buf : "",
				       r->len < 200 ? r->len : 200);

		cli_error("the daemon answered HTTP %ld%s%s", r->status,
			  safe && *safe ? ": " : "", safe ? safe : "");
		free(safe);
	}
	json_decref(o);
}

/* 0 on a 2xx answer; else says what the daemon said and returns -1. */
static int check_reply(const struct reply *r)
{
	if (is_success(r->status))
		return 0;
	reply_error(r);
	return -1;
}

static json_t *reply_object(const struct reply *r)
{
	json_error_t jerr;
	json_t *o = json_loadb(r->buf ? r->buf : "", r->len, 0, &jerr);

	if (!o) {
		cli_error("the daemon's answer is not JSON: %s", jerr.text);
		return NULL;
	}
	if (!json_is_object(o)) {
		cli_error("the daemon's answer is not a JSON object");
		json_decref(o);
		return NULL;
	}
	return o;
}

/*
 * A request with an optional JSON body whose answer is a JSON object; NULL
 * when anything went wrong (said on stderr).
 */
static json_t *call_json(struct conn *c, const char *method, const char *path,
			 const json_t *body)
{
	struct request q = { .method = method, .path = path };
	struct reply r = { .max = REPLY_MAX };
	json_t *o = NULL;
	char *text = NULL;

	if (body) {
		text = json_dumps(body, JSON_COMPACT);
		if (!text) {
			out_of_memory();
			return NULL;
		}
		q.body = text;
		q.body_len = strlen(text);
		q.type = "Content-Type: application/json";
	}
	if (perform(c, &q, &r) == 0 && check_reply(&r) == 0)
		o = reply_object(&r);
	free(text);
	reply_free(&r);
	return o;
}

/* "/v1/sandboxes/ID" + rest; the id was checked, escaping is belt and braces. */
static char *sandbox_path(struct conn *c, const char *id, const char *rest)
{
	char *esc = curl_easy_escape(c->curl, id, 0), *path;

	if (!esc) {
		out_of_memory();
		return NULL;
	}
	if (asprintf(&path, "/v1/sandboxes/%s%s", esc, rest) < 0) {
		path = NULL;
		out_of_memory();
	}
	curl_free(esc);
	return path;
}

static char *files_path(struct conn *c, const char *id, const char *file,
			bool list)
{
	char *esc = curl_easy_escape(c->curl, file, 0), *rest, *path;

	if (!esc) {
		out_of_memory();
		return NULL;
	}
	if (asprintf(&rest, "/files?path=%s%s", esc, list ? "&list=1" : "") < 0) {
		curl_free(esc);
		out_of_memory();
		return NULL;
	}
	curl_free(esc);
	path = sandbox_path(c, id, rest);
	free(rest);
	return path;
}

static int print_json(const json_t *o)
{
	if (json_dumpf(o, stdout, JSON_COMPACT | JSON_ENSURE_ASCII) < 0 ||
	    putchar('\n') == EOF) {
		cli_error("writing to standard output: %s", strerror(errno));
		return EXIT_CORRAL;
	}
	return 0;
}

/* A verb's last word: output that could not be written is a failure. */
static int finish(int code)
{
	if (fflush(stdout) == EOF || ferror(stdout)) {
		cli_error("writing to standard output: %s", strerror(errno));
		return code ? code : EXIT_CORRAL;
	}
	return code;
}

/* ---- local files ------------------------------------------------------- */

/* All of fd, up to max bytes; name is for messages. */
static int read_all(int fd, const char *name, size_t max, char **out,
		    size_t *len)
{
	size_t cap = 65536, n = 0;
	char *buf = malloc(cap), *p;
	ssize_t got;

	if (!buf)
		return out_of_memory();
	for (;;) {
		if (n == cap) {
			cap *= 2;
			p = realloc(buf, cap);
			if (!p) {
				free(buf);
				return out_of_memory();
			}
			buf = p;
		}
		got = read(fd, buf + n, cap - n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			cli_error("reading %s: %s", name, strerror(errno));
			free(buf);
			return EXIT_CORRAL;
		}
		if (got == 0)
			break;
		n += got;
		if (n > max) {
			char size[32];

			corral_format_size(max, size, sizeof(size));
			cli_error("%s is larger than %s, the most the daemon takes",
				  name, size);
			free(buf);
			return EXIT_CORRAL;
		}
	}
	*out = buf;
	*len = n;
	return 0;
}

/* A local file, or "-" for stdin; only regular files (or whatever stdin is). */
static int read_local(const char *path, size_t max, char **out, size_t *len)
{
	struct stat st;
	int fd, code;

	if (!strcmp(path, "-"))
		return read_all(STDIN_FILENO, "standard input", max, out, len);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		cli_error("%s: %s", path, strerror(errno));
		return EXIT_CORRAL;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		cli_error("%s: not a regular file; one file is copied at a time",
			  path);
		close(fd);
		return EXIT_CORRAL;
	}
	code = read_all(fd, path, max, out, len);
	close(fd);
	return code;
}

static int write_all(int fd, const char *name, const char *buf, size_t len)
{
	ssize_t n;

	while (len) {
		n = write(fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			cli_error("writing %s: %s", name, strerror(errno));
			return EXIT_CORRAL;
		}
		buf += n;
		len -= n;
	}
	return 0;
}

static int write_local(const char *path, const char *buf, size_t len)
{
	int fd, code;

	if (!strcmp(path, "-")) {
		if (fflush(stdout) == EOF)
			return finish(0);
		return write_all(STDOUT_FILENO, "standard output", buf, len);
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (fd < 0) {
		cli_error("%s: %s", path, strerror(errno));
		return EXIT_CORRAL;
	}
	code = write_all(fd, path, buf, len);
	if (close(fd) < 0 && !code) {
		cli_error("writing %s: %s", path, strerror(errno));
		code = EXIT_CORRAL;
	}
	return code;
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* ---- create ------------------------------------------------------------ */

static const struct verb create_verb = {
	.name = "create",
	.head =
"Usage: corral create [--policy FILE] [--workspace DIR] [--ttl DURATION]\n"
"                     [--idle-freeze DURATION] [--label KEY=VALUE]... [--json]\n"
"\n"
"Ask the daemon (`corral serve`) for a sandbox that lives across many calls,\n"
"and print its id.  The sandbox is built from the built-in default policy\n"
"with FILE merged over it, then waits for `corral exec`.  When no call has\n"
"run in it for a while it is frozen (no CPU, its memory kept) and the next\n"
"exec thaws it.  It lives until `corral rm ID`, or until its TTL runs out.\n"
"\n"
"Options:\n"
"  --policy FILE        a JSON policy file (`corral policy check FILE`); it\n"
"                       is sent as an object and the daemon checks it\n"
"  --workspace DIR      show DIR at /workspace, copy-on-write: the host copy\n"
"                       is never written.  Over the unix socket DIR is made\n"
"                       absolute here and must be a directory; over --url it\n"
"                       is a path on the daemon's host and must be absolute\n"
"  --ttl DURATION       destroy the sandbox this long after it was created\n"
"                       (\"90s\", \"30m\", \"2h\", \"1d\"; a bare number is\n"
"                       seconds); absent or 0: no TTL\n"
"  --idle-freeze DURATION\n"
"                       freeze the sandbox once no call or process has run\n"
"                       for this long (default 2s; 0: never freeze it)\n"
"  --label KEY=VALUE    attach a label (repeatable); `corral ls` shows them\n"
"  --json               print the whole sandbox object, not only its id\n",
	.tail =
"Exit status: 0 the sandbox exists and its id was printed; 2 bad usage (an\n"
"unknown option, a bad DURATION or KEY=VALUE); 125 FILE or DIR cannot be\n"
"used, the daemon refused (a policy it rejects reads \"corral: KEY: reason\n"
"(got ...) (HTTP 422)\"), or the daemon could not be reached.\n"
"\n"
"Example:\n"
"  id=$(corral create --policy policies/offline.json --workspace . --ttl 1h)\n"
"  corral exec \"$id\" -- make test\n"
"  corral rm \"$id\"\n",
};

static const struct option create_options[] = {
	{ "socket", required_argument, NULL, OPT_SOCKET },
	{ "url", required_argument, NULL, OPT_URL },
	{ "token-file", required_argument, NULL, OPT_TOKEN_FILE },
	{ "policy", required_argument, NULL, OPT_POLICY },
	{ "workspace", required_argument, NULL, OPT_WORKSPACE },
	{ "ttl", required_argument, NULL, OPT_TTL },
	{ "idle-freeze", required_argument, NULL, OPT_IDLE_FREEZE },
	{ "label", required_argument, NULL, OPT_LABEL },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

struct create_args {
	json_t *body;
	json_t *labels;
	const char *workspace;
	bool json;
};

static int put_policy(json_t *body, const char *file)
{
	json_error_t jerr;
	json_t *p;

	if (json_object_get(body, "policy"))
		return usage_error(&create_verb, "--policy is given twice");
	p = json_load_file(file, JSON_REJECT_DUPLICATES, &jerr);
	if (!p) {
		if (jerr.line > 0)
			cli_error("--policy %s:%d:%d: %s", file, jerr.line,
				  jerr.column, jerr.text);
		else
			cli_error("--policy %s: %s", file, jerr.text);
		return EXIT_CORRAL;
	}
	if (!json_is_object(p)) {
		cli_error("--policy %s: a policy is a JSON object ({...}), this file holds another JSON value",
			  file);
		json_decref(p);
		return EXIT_CORRAL;
	}
	return put(body, "policy", p);
}

/* The API counts in seconds: whole ones as an integer, "1.5s" as 1.5. */
static int put_seconds(json_t *body, const char *key, uint64_t ms)
{
	if (ms % 1000 == 0)
		return put(body, key, json_integer((json_int_t)(ms / 1000)));
	return put(body, key, json_real((double)ms / 1000.0));
}

static int put_ttl(json_t *body, const char *arg)
{
	uint64_t ms;
	int code = parse_duration(&create_verb, "--ttl", arg, &ms);

	if (code)
		return code;
	return put_seconds(body, "ttl_seconds", ms);
}

static int put_idle_freeze(json_t *body, const char *arg)
{
	uint64_t ms;
	int code = parse_duration(&create_verb, "--idle-freeze", arg, &ms);

	if (code)
		return code;
	return put(body, "idle_freeze_ms", json_integer((json_int_t)ms));
}

/*
 * Over the unix socket the daemon shares this host but not our working
 * directory: send the absolute, resolved path.  Over TCP the path is on the
 * daemon's host, which may be another one: nothing here can check it.
 */
static int put_workspace(json_t *body, const char *dir, bool remote)
{
	struct stat st;
	char *abs;
	int code;

	if (remote) {
		if (dir[0] != '/')
			return usage_error(&create_verb, "--workspace: over --url the path is on the daemon's host and must be absolute (got \"%s\")",
					   dir);
		return put_text(&create_verb, body, "workspace", "--workspace", dir);
	}
	abs = realpath(dir, NULL);
	if (!abs) {
		cli_error("--workspace %s: %s", dir, strerror(errno));
		return EXIT_CORRAL;
	}
	if (stat(abs, &st) < 0 || !S_ISDIR(st.st_mode)) {
		cli_error("--workspace %s: not a directory", dir);
		free(abs);
		return EXIT_CORRAL;
	}
	code = put_text(&create_verb, body, "workspace", "--workspace", abs);
	free(abs);
	return code;
}

static int create_option(void *arg, int opt, const char *val)
{
	struct create_args *a = arg;

	switch (opt) {
	case OPT_POLICY:
		return put_policy(a->body, val);
	case OPT_WORKSPACE:
		a->workspace = val;
		return 0;
	case OPT_TTL:
		return put_ttl(a->body, val);
	case OPT_IDLE_FREEZE:
		return put_idle_freeze(a->body, val);
	case OPT_LABEL:
		return put_pair(&create_verb, a->labels, "--label", val);
	case OPT_JSON:
		a->json = true;
		return 0;
	}
	return usage_error(&create_verb, "option %d is not handled", opt);
}

static int create_send(struct conn *c, const struct create_args *a)
{
	const char *id;
	json_t *sb;
	int code;

	sb = call_json(c, "POST", "/v1/sandboxes", a->body);
	if (!sb)
		return EXIT_CORRAL;
	id = json_string_value(json_object_get(sb, "id"));
	if (a->json) {
		code = print_json(sb);
	} else if (id && client_valid_id(id)) {
		code = puts(id) == EOF ? EXIT_CORRAL : 0;
	} else {
		cli_error("the daemon's answer names no valid sandbox id");
		code = EXIT_CORRAL;
	}
	json_decref(sb);
	return code;
}

int cmd_create(int argc, char **argv)
{
	struct create_args a = { .body = json_object(), .labels = json_object() };
	struct conn c = { 0 };
	int code;

	if (!a.body || !a.labels) {
		code = out_of_memory();
		goto out;
	}
	code = parse_options(&create_verb, create_options, ":h", argc, argv,
			     &c, create_option, &a);
	if (code)
		goto out;
	if (optind < argc) {
		code = usage_error(&create_verb, "create takes no operands (got \"%s\")",
				   argv[optind]);
		goto out;
	}
	if (a.workspace) {
		code = put_workspace(a.body, a.workspace, c.url != NULL);
		if (code)
			goto out;
	}
	if (json_object_size(a.labels)) {
		code = put(a.body, "labels", json_incref(a.labels));
		if (code)
			goto out;
	}
	code = conn_open(&c, &create_verb);
	if (!code)
		code = create_send(&c, &a);
out:
	conn_close(&c);
	json_decref(a.labels);
	json_decref(a.body);
	return code == HELP_SHOWN ? 0 : finish(code);
}

/* ---- exec -------------------------------------------------------------- */

static const struct verb exec_verb = {
	.name = "exec",
	.head =
"Usage: corral exec [OPTIONS] ID -- COMMAND [ARG...]\n"
"       corral exec [OPTIONS] ID --command 'SHELL TEXT'\n"
"       corral exec --background [OPTIONS] ID -- COMMAND [ARG...]\n"
"\n"
"Run COMMAND in the sandbox ID (from `corral create`) and wait for it, as\n"
"`corral run` does in a fresh one: its stdout and stderr reach corral's own\n"
"as they are written, and corral exits with its status.  Options go before\n"
"the \"--\"; everything after it is the command, run as an argv (no shell).\n"
"An idle-frozen sandbox is thawed first; a paused or halted one refuses.\n"
"\n"
"Options:\n"
"  -c, --command TEXT   run /bin/sh -c TEXT instead of an argv\n"
"  --tool-call ID       the tool call this is: the result and every event of\n"
"                       the call carry it (1 to 120 letters, digits and\n"
"                       ._:-; default: the daemon makes one up)\n"
"  --cwd DIR            the working directory inside the sandbox\n"
"  --env NAME=VALUE     set a variable for this call (repeatable)\n"
"  --stdin-file FILE    give the command FILE as its stdin (\"-\": corral's)\n"
"  -i                   give the command corral's own stdin\n"
"                       Both are read to the end before the command starts,\n"
"                       and must be UTF-8 text: the API carries stdin as a\n"
"                       JSON string, in a body of at most 1 MiB.  Without\n"
"                       either, the command's stdin is empty.\n"
"  --timeout DURATION   wall-clock limit for this call (\"30s\", \"500ms\",\n"
"                       \"2m\"; a bare number is seconds)\n"
"  --no-stream          wait for the end, then write the output at once;\n"
"                       the daemon keeps a bounded amount of each stream\n"
"  --json               print only the result object (status, exit_code,\n"
"                       signal, reason, stdout, stderr, *_truncated,\n"
"                       duration_ms, sandbox, tool_call, ...), the one\n"
"                       `corral run --json` prints; implies --no-stream\n"
"  --background         start COMMAND and return at once: print its pid, as\n"
"                       the sandbox sees it (the whole answer with --json);\n"
"                       `corral logs ID` shows how it is doing\n",
	.tail =
"Exit status, as `corral run`'s: the command's own; 128+N if it died of\n"
"signal N (137 when the memory limit or an abort killed it); 124 on timeout;\n"
"126 the command cannot be executed; 127 not found; 125 if corral could not\n"
"run it (the sandbox is paused, halted or unknown, the daemon refused or\n"
"could not be reached); 2 bad usage.  With --background, 0 once started.\n"
"Without --json, how the command ended is told on stderr whenever it did not\n"
"simply exit (\"corral: timed out after 30 s\", \"corral: halted: ...\").\n"
"\n"
"Examples:\n"
"  corral exec \"$id\" -- python3 -c 'print(6 * 7)'\n"
"  corral exec \"$id\" --tool-call call-7 --json -- pytest -q\n"
"  git diff | corral exec \"$id\" -i -- patch -p1\n"
"  corral exec \"$id\" -c 'ls -l | wc -l'\n"
"  corral exec \"$id\" --background -- python3 -m http.server 8000\n",
};

static const struct option exec_options[] = {
	{ "socket", required_argument, NULL, OPT_SOCKET },
	{ "url", required_argument, NULL, OPT_URL },
	{ "token-file", required_argument, NULL, OPT_TOKEN_FILE },
	{ "command", required_argument, NULL, 'c' },
	{ "tool-call", required_argument, NULL, OPT_TOOL_CALL },
	{ "cwd", required_argument, NULL, OPT_CWD },
	{ "env", required_argument, NULL, OPT_ENV },
	{ "stdin-file", required_argument, NULL, OPT_STDIN_FILE },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "no-stream", no_argument, NULL, OPT_NO_STREAM },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "background", no_argument, NULL, OPT_BACKGROUND },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

struct exec_args {
	json_t *body;
	json_t *env;
	const char *id;
	const char *command;		/* -c */
	const char *stdin_file;		/* --stdin-file, or "-" for -i */
	bool json, no_stream, background;
};

static int put_tool_call(json_t *body, const char *id)
{
	static const char call_chars[] =
		"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		"0123456789._:-";
	size_t n = strlen(id);

	if (!n || n > 120 || strspn(id, call_chars) != n)
		return usage_error(&exec_verb, "--tool-call: 1 to 120 characters of letters, digits and ._:- (got \"%s\")",
				   id);
	return put(body, "tool_call_id", json_string(id));
}

static int put_timeout(json_t *body, const char *arg)
{
	uint64_t ms;
	int code = parse_duration(&exec_verb, "--timeout", arg, &ms);

	if (code)
		return code;
	return put_seconds(body, "timeout_seconds", ms);
}

static int set_stdin(struct exec_args *a, const char *file)
{
	if (a->stdin_file)
		return usage_error(&exec_verb, "give stdin once: one of --stdin-file FILE and -i");
	a->stdin_file = file;
	return 0;
}

static int exec_option(void *arg, int opt, const char *val)
{
	struct exec_args *a = arg;

	switch (opt) {
	case 'c':
		a->command = val;
		return 0;
	case OPT_TOOL_CALL:
		return put_tool_call(a->body, val);
	case OPT_CWD:
		return put_text(&exec_verb, a->body, "cwd", "--cwd", val);
	case OPT_ENV:
		return put_pair(&exec_verb, a->env, "--env", val);
	case OPT_STDIN_FILE:
		return set_stdin(a, val);
	case 'i':
		return set_stdin(a, "-");
	case OPT_TIMEOUT:
		return put_timeout(a->body, val);
	case OPT_NO_STREAM:
		a->no_stream = true;
		return 0;
	case OPT_JSON:
		a->json = true;
		return 0;
	case OPT_BACKGROUND:
		a->background = true;
		return 0;
	}
	return usage_error(&exec_verb, "option %d is not handled", opt);
}

static int put_stdin(json_t *body, const char *file)
{
	const char *name = strcmp(file, "-") ? file : "standard input";
	char *buf;
	size_t len;
	json_t *s;
	int code;

	code = read_local(file, JSON_BODY_MAX, &buf, &len);
	if (code)
		return code;
	s = json_stringn(buf, len);
	free(buf);
	if (!s) {
		cli_error("stdin: %s is not UTF-8 text, and the API carries stdin as a JSON string; copy binary input in with `corral cp`",
			  name);
		return EXIT_CORRAL;
	}
	return put(body, "stdin", s);
}

static int put_argv(json_t *body, char **cmd, int n)
{
	json_t *av = json_array();
	int i;

	if (!av)
		return out_of_memory();
	for (i = 0; i < n; i++) {
		json_t *s = json_string(cmd[i]);

		if (!s) {
			json_decref(av);
			return usage_error(&exec_verb, "argument \"%s\" is not UTF-8 text",
					   cmd[i]);
		}
		if (json_array_append_new(av, s) < 0) {
			json_decref(av);
			return out_of_memory();
		}
	}
	return put(body, "argv", av);
}

/*
 * Options end at the first "--"; what follows is the command, never parsed
 * as options.  Before it, the one operand is the sandbox id.  They are
 * parsed in order ("+"), not permuted, so that `exec ID ls -l` is told to
 * put "--" before the command instead of "unknown option -l".
 */
static int exec_parse(struct exec_args *a, struct conn *c, int argc,
		      char **argv)
{
	int dd = 1, ncmd, code;

	while (dd < argc && strcmp(argv[dd], "--"))
		dd++;
	optind = 1;
	for (;;) {
		code = parse_more(&exec_verb, exec_options, "+:hic:", dd, argv,
				  c, exec_option, a);
		if (code)
			return code;
		if (optind >= dd)
			break;
		if (a->id)
			return usage_error(&exec_verb, "one sandbox ID, then \"--\" and the command (got \"%s\" after \"%s\")",
					   argv[optind], a->id);
		a->id = argv[optind++];
	}
	if (!a->id)
		return usage_error(&exec_verb, "no sandbox ID given");
	code = check_id(&exec_verb, a->id);
	if (code)
		return code;
	ncmd = dd < argc ? argc - dd - 1 : 0;
	if (a->command && ncmd)
		return usage_error(&exec_verb, "give the command once: after \"--\" or with --command");
	if (!a->command && !ncmd)
		return usage_error(&exec_verb, dd < argc ? "no command after \"--\"" :
				   "no command: corral exec ID -- COMMAND [ARG...]");
	if (a->command)
		return put_text(&exec_verb, a->body, "command", "--command", a->command);
	return put_argv(a->body, argv + dd + 1, ncmd);
}

int client_exit_code(const json_t *result)
{
	const json_t *code = json_object_get(result, "exit_code");
	struct corral_result res = { 0 };

	/* the daemon's result, mapped as corral run maps its own */
	if (corral_status_from_name(json_string_value(json_object_get(result, "status")),
				    &res.status) < 0 || !json_is_integer(code))
		return -1;
	res.exit_code = (int)json_integer_value(code);
	res.signal = (int)json_integer_value(json_object_get(result, "signal"));
	return corral_result_exit_code(&res);
}

/* As `corral run` does: say how the call ended when it did not simply exit. */
static void tell_end(const json_t *result, int code)
{
	const char *status = json_string_value(json_object_get(result, "status"));
	const char *reason = json_string_value(json_object_get(result, "reason"));

	if (status && !strcmp(status, "exited") && code < 126)
		return;
	daemon_error(reason ? reason : status ? status : "the call ended", "");
}

static int result_code(const json_t *result, bool tell)
{
	int code = client_exit_code(result);

	if (code < 0) {
		cli_error("the daemon's result says neither a status nor an exit code");
		return EXIT_CORRAL;
	}
	if (tell)
		tell_end(result, code);
	return code;
}

static int write_data(FILE *f, const json_t *s)
{
	if (!json_is_string(s))
		return 0;
	if (fwrite(json_string_value(s), 1, json_string_length(s), f) !=
	    json_string_length(s) || fflush(f) == EOF) {
		cli_error("writing the command's output: %s", strerror(errno));
		return -1;
	}
	return 0;
}

struct exec_stream {
	json_t *result;			/* from the "end" line */
};

/* One NDJSON line of an exec stream: output goes out as it comes. */
static int on_exec_line(void *arg, char *line, size_t len)
{
	struct exec_stream *st = arg;
	const char *type, *detail;
	json_t *o;
	int ret = 0;

	if (len && line[len - 1] == '\r')
		len--;
	if (!len)
		return 0;
	o = json_loadb(line, len, 0, NULL);
	if (!json_is_object(o)) {
		cli_error("the daemon's exec stream has a line that is not a JSON object");
		json_decref(o);
		return -1;
	}
	type = json_string_value(json_object_get(o, "type"));
	detail = json_string_value(json_object_get(o, "detail"));
	if (!type && detail) {
		daemon_error(detail, " (in the exec stream)");
		ret = -1;
	} else if (type && !strcmp(type, "stdout")) {
		ret = write_data(stdout, json_object_get(o, "data"));
	} else if (type && !strcmp(type, "stderr")) {
		ret = write_data(stderr, json_object_get(o, "data"));
	} else if (type && !strcmp(type, "end")) {
		json_decref(st->result);
		st->result = json_incref(json_object_get(o, "result"));
	}
	/* "start", and types newer than this client, are not for the terminal */
	json_decref(o);
	return ret;
}

static int exec_stream(struct conn *c, const char *path, const json_t *body)
{
	struct exec_stream st = { 0 };
	struct reply r = { .max = REPLY_MAX, .line = on_exec_line, .arg = &st };
	struct request q = { .method = "POST", .path = path,
			     .type = "Content-Type: application/json" };
	char *text = json_dumps(body, JSON_COMPACT);
	int code = EXIT_CORRAL;

	if (!text)
		return out_of_memory();
	q.body = text;
	q.body_len = strlen(text);
	if (perform(c, &q, &r) < 0 || check_reply(&r) < 0)
		goto out;
	if (!json_is_object(st.result)) {
		cli_error("the daemon's exec stream ended without the call's result");
		goto out;
	}
	code = result_code(st.result, true);
out:
	json_decref(st.result);
	reply_free(&r);
	free(text);
	return code;
}

static int exec_wait(struct conn *c, const char *path, const json_t *body,
		     bool as_json)
{
	json_t *res = call_json(c, "POST", path, body);
	int code;

	if (!res)
		return EXIT_CORRAL;
	if (as_json) {
		code = print_json(res);
		if (!code)
			code = result_code(res, false);
		json_decref(res);
		return code;
	}
	if (write_data(stdout, json_object_get(res, "stdout")) < 0 ||
	    write_data(stderr, json_object_get(res, "stderr")) < 0) {
		json_decref(res);
		return EXIT_CORRAL;
	}
	if (json_is_true(json_object_get(res, "stdout_truncated")))
		cli_error("the daemon kept only part of stdout; without --no-stream it all comes through");
	if (json_is_true(json_object_get(res, "stderr_truncated")))
		cli_error("the daemon kept only part of stderr; without --no-stream it all comes through");
	code = result_code(res, true);
	json_decref(res);
	return code;
}

static int exec_background(struct conn *c, const char *id, const json_t *body,
			   bool as_json)
{
	char *path = sandbox_path(c, id, "/processes");
	json_t *res, *pid;
	int code;

	if (!path)
		return EXIT_CORRAL;
	res = call_json(c, "POST", path, body);
	free(path);
	if (!res)
		return EXIT_CORRAL;
	pid = json_object_get(res, "pid");
	if (as_json) {
		code = print_json(res);
	} else if (json_is_integer(pid)) {
		code = printf("%" JSON_INTEGER_FORMAT "\n", json_integer_value(pid)) < 0 ?
		       EXIT_CORRAL : 0;
	} else {
		cli_error("the daemon's answer has no pid");
		code = EXIT_CORRAL;
	}
	json_decref(res);
	return code;
}

static int exec_send(struct conn *c, struct exec_args *a)
{
	bool stream = !a->json && !a->no_stream;
	char *path;
	int code;

	if (a->background)
		return exec_background(c, a->id, a->body, a->json);
	code = put(a->body, "stream", json_boolean(stream));
	if (code)
		return code;
	path = sandbox_path(c, a->id, "/exec");
	if (!path)
		return EXIT_CORRAL;
	if (stream)
		code = exec_stream(c, path, a->body);
	else
		code = exec_wait(c, path, a->body, a->json);
	free(path);
	return code;
}

int cmd_exec(int argc, char **argv)
{
	struct exec_args a = { .body = json_object(), .env = json_object() };
	struct conn c = { 0 };
	int code;

	if (!a.body || !a.env) {
		code = out_of_memory();
		goto out;
	}
	code = exec_parse(&a, &c, argc, argv);
	if (code)
		goto out;
	if (json_object_size(a.env)) {
		code = put(a.body, "env", json_incref(a.env));
		if (code)
			goto out;
	}
	code = conn_target(&c, &exec_verb);
	if (code)
		goto out;
	if (a.stdin_file) {
		code = put_stdin(a.body, a.stdin_file);
		if (code)
			goto out;
	}
	code = conn_open(&c, &exec_verb);
	if (!code)
		code = exec_send(&c, &a);
out:
	conn_close(&c);
	json_decref(a.env);
	json_decref(a.body);
	return code == HELP_SHOWN ? 0 : finish(code);
}

/* ---- cp ---------------------------------------------------------------- */

static const struct verb cp_verb = {
	.name = "cp",
	.head =
"Usage: corral cp [--json] SRC DST\n"
"       corral cp --list [--json] ID:/DIR\n"
"\n"
"Copy one regular file into or out of the sandbox ID.  One of SRC and DST is\n"
"ID:/PATH, an absolute path inside the sandbox; the other is a local path,\n"
"or \"-\" for corral's stdin (as SRC) or stdout (as DST).  A local DST that is\n"
"a directory, or an ID:/PATH that ends in \"/\", gets the file under its own\n"
"name; an existing local file is overwritten.  The daemon resolves PATH\n"
"beneath the sandbox's root, with the rights of the sandbox's user: a\n"
"symlink anywhere in it is refused, never followed, and /proc and /sys are\n"
"refused.  Files go either way up to 64 MiB.  A local name with a colon in\n"
"it is written ./NAME.\n"
"\n"
"Options:\n"
"  --list               list the directory ID:/DIR instead: for each entry\n"
"                       its type and mode (as ls -l shows them), its size\n"
"                       and its name, sorted by name; bytes of a name that a\n"
"                       terminal would act on are shown as \\xNN\n"
"  --json               print the daemon's answer: {\"path\", \"size\"} for a\n"
"                       copy in, the listing object with --list; a copy out\n"
"                       prints nothing more\n",
	.tail =
"Exit status: 0 copied (or listed); 2 bad usage; 125 a local file cannot be\n"
"read or written, the daemon refused (no such file, a symlink in the path,\n"
"not a regular file, too large) or could not be reached.\n"
"\n"
"Examples:\n"
"  corral cp main.py \"$id\":/workspace/main.py\n"
"  corral cp \"$id\":/workspace/out/report.json .\n"
"  corral cp \"$id\":/tmp/log.txt - | less\n"
"  corral cp --list \"$id\":/workspace\n",
};

static const struct option cp_options[] = {
	{ "socket", required_argument, NULL, OPT_SOCKET },
	{ "url", required_argument, NULL, OPT_URL },
	{ "token-file", required_argument, NULL, OPT_TOKEN_FILE },
	{ "list", no_argument, NULL, OPT_LIST },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

struct cp_args {
	bool list, json;
};

static int cp_option(void *arg, int opt, const char *val)
{
	struct cp_args *a = arg;

	if (opt == OPT_LIST)
		a->list = true;
	else if (opt == OPT_JSON)
		a->json = true;
	else
		return usage_error(&cp_verb, "option %d is not handled", opt);
	return 0;
}

bool client_split_remote(const char *arg, char *id, size_t idlen,
			 const char **path)
{
	const char *colon = strchr(arg, ':');
	size_t n;

	if (!colon || colon[1] != '/')
		return false;
	n = colon - arg;
	if (n == 0 || n >= idlen)
		return false;
	memcpy(id, arg, n);
	id[n] = '\0';
	if (!client_valid_id(id))
		return false;
	*path = colon + 1;
	return true;
}

static int cp_in(struct conn *c, const char *src, const char *id,
		 const char *dst, bool as_json)
{
	struct request q = { .method = "PUT",
			     .type = "Content-Type: application/octet-stream" };
	struct reply r = { .max = REPLY_MAX };
	char *full = NULL, *buf = NULL, *path = NULL;
	json_t *o = NULL;
	size_t len;
	int code;

	if (dst[strlen(dst) - 1] == '/') {
		if (!strcmp(src, "-"))
			return usage_error(&cp_verb, "with \"-\" as SRC, DST must name the file (got %s:%s)",
					   id, dst);
		if (asprintf(&full, "%s%s", dst, base_name(src)) < 0)
			return out_of_memory();
		dst = full;
	}
	code = read_local(src, FILE_MAX, &buf, &len);
	if (code)
		goto out;
	code = EXIT_CORRAL;
	path = files_path(c, id, dst, false);
	if (!path)
		goto out;
	q.path = path;
	q.body = buf;
	q.body_len = len;
	if (perform(c, &q, &r) < 0 || check_reply(&r) < 0)
		goto out;
	code = 0;
	if (as_json) {
		o = reply_object(&r);
		code = o ? print_json(o) : EXIT_CORRAL;
	}
out:
	json_decref(o);
	reply_free(&r);
	free(path);
	free(buf);
	free(full);
	return code;
}

static int cp_out(struct conn *c, const char *id, const char *src,
		  const char *dst)
{
	struct request q = { .method = "GET" };
	struct reply r = { .max = FILE_MAX };
	char *path, *full = NULL;
	struct stat st;
	int code = EXIT_CORRAL;

	path = files_path(c, id, src, false);
	if (!path)
		return EXIT_CORRAL;
	q.path = path;
	/* the whole file first: a refusal must not truncate DST */
	if (perform(c, &q, &r) < 0 || check_reply(&r) < 0)
		goto out;
	if (strcmp(dst, "-") && stat(dst, &st) == 0 && S_ISDIR(st.st_mode)) {
		if (asprintf(&full, "%s/%s", dst, base_name(src)) < 0) {
			full = NULL;
			code = out_of_memory();
			goto out;
		}
		dst = full;
	}
	code = write_local(dst, r.buf ? r.buf : "", r.len);
out:
	reply_free(&r);
	free(full);
	free(path);
	return code;
}

static int entry_cmp(const void *a, const void *b)
{
	const char *x = json_string_value(json_object_get(*(json_t *const *)a, "name"));
	const char *y = json_string_value(json_object_get(*(json_t *const *)b, "name"));

	return strcmp(x ? x : "", y ? y : "");
}

static void mode_string(const char *type, json_int_t mode, char out[11])
{
	static const char rwx[] = "rwxrwxrwx";
	int i;

	out[0] = !type ? '?' : !strcmp(type, "dir") ? 'd' :
		 !strcmp(type, "symlink") ? 'l' : !strcmp(type, "file") ? '-' : '?';
	for (i = 0; i < 9; i++)
		out[1 + i] = mode & (0400 >> i) ? rwx[i] : '-';
	out[10] = '\0';
}

static int print_entry(const json_t *e)
{
	const char *name = json_string_value(json_object_get(e, "name"));
	const char *type = json_string_value(json_object_get(e, "type"));
	char mode[11], *safe;
	int n;

	mode_string(type, json_integer_value(json_object_get(e, "mode")), mode);
	safe = printable(name ? name : "?", name ? strlen(name) : 1);
	if (!safe)
		return out_of_memory();
	n = printf("%s %12" JSON_INTEGER_FORMAT " %s%s\n", mode,
		   json_integer_value(json_object_get(e, "size")), safe,
		   type && !strcmp(type, "dir") ? "/" : "");
	free(safe);
	return n < 0 ? EXIT_CORRAL : 0;
}

static int print_listing(const json_t *o)
{
	json_t *entries = json_object_get(o, "entries"), **v;
	size_t n = json_array_size(entries), i;
	int code = 0;

	if (!json_is_array(entries)) {
		cli_error("the daemon's listing has no entries");
		return EXIT_CORRAL;
	}
	v = calloc(n ? n : 1, sizeof(*v));
	if (!v)
		return out_of_memory();
	for (i = 0; i < n; i++)
		v[i] = json_array_get(entries, i);
	qsort(v, n, sizeof(*v), entry_cmp);
	for (i = 0; i < n && !code; i++)
		code = print_entry(v[i]);
	free(v);
	return code;
}

static int cp_list(struct conn *c, const char *id, const char *dir,
		   bool as_json)
{
	char *path = files_path(c, id, dir, true);
	json_t *o;
	int code;

	if (!path)
		return EXIT_CORRAL;
	o = call_json(c, "GET", path, NULL);
	free(path);
	if (!o)
		return EXIT_CORRAL;
	code = as_json ? print_json(o) : print_listing(o);
	json_decref(o);
	return code;
}

static int cp_run(struct conn *c, const struct cp_args *a, int n, char **ops)
{
	const char *src_path, *dst_path;
	char src_id[128], dst_id[128];
	bool src_remote, dst_remote;
	int code;

	if (a->list) {
		if (n != 1 || !client_split_remote(ops[0], src_id, sizeof(src_id), &src_path))
			return usage_error(&cp_verb, "--list takes one ID:/DIR");
		code = conn_open(c, &cp_verb);
		return code ? code : cp_list(c, src_id, src_path, a->json);
	}
	if (n != 2)
		return usage_error(&cp_verb, "cp takes SRC and DST (got %d operand%s)",
				   n, n == 1 ? "" : "s");
	src_remote = client_split_remote(ops[0], src_id, sizeof(src_id), &src_path);
	dst_remote = client_split_remote(ops[1], dst_id, sizeof(dst_id), &dst_path);
	if (src_remote == dst_remote)
		return usage_error(&cp_verb, "one of SRC and DST must be ID:/PATH and the other a local path (got \"%s\" and \"%s\")",
				   ops[0], ops[1]);
	if (!*ops[src_remote ? 1 : 0])
		return usage_error(&cp_verb, "an empty local path");
	code = conn_open(c, &cp_verb);
	if (code)
		return code;
	if (dst_remote)
		return cp_in(c, ops[0], dst_id, dst_path, a->json);
	return cp_out(c, src_id, src_path, ops[1]);
}

int cmd_cp(int argc, char **argv)
{
	struct cp_args a = { 0 };
	struct conn c = { 0 };
	int code;

	code = parse_options(&cp_verb, cp_options, ":h", argc, argv, &c,
			     cp_option, &a);
	if (!code)
		code = cp_run(&c, &a, argc - optind, argv + optind);
	conn_close(&c);
	return code == HELP_SHOWN ? 0 : finish(code);
}

/* ---- pause, resume, halt ----------------------------------------------- */

static const struct verb pause_verb = {
	.name = "pause",
	.head =
"Usage: corral pause [--json] ID\n"
"\n"
"Freeze every process of the sandbox ID and keep it frozen: it uses no CPU,\n"
"keeps its memory and its files, and refuses exec (HTTP 409) until `corral\n"
"resume ID`.  Unlike the freeze of an idle sandbox, an exec does not thaw\n"
"it.  Prints ID.\n"
"\n"
"Options:\n"
"  --json               print the sandbox object (state \"paused\") instead\n",
	.tail =
"Exit status: 0 paused; 2 bad usage; 125 the daemon refused (no such\n"
"sandbox, a halted one) or could not be reached.\n"
"\n"
"Example:\n"
"  corral pause \"$id\" && corral ls && corral resume \"$id\"\n",
};

static const struct verb resume_verb = {
	.name = "resume",
	.head =
"Usage: corral resume [--json] ID\n"
"\n"
"Thaw the sandbox ID that `corral pause` froze: its processes go on where\n"
"they stopped, and exec is accepted again.  Prints ID.\n"
"\n"
"Options:\n"
"  --json               print the sandbox object instead\n",
	.tail =
"Exit status: 0 resumed; 2 bad usage; 125 the daemon refused (no such\n"
"sandbox, a halted one) or could not be reached.\n"
"\n"
"Example:\n"
"  corral resume \"$id\"\n",
};

static const struct verb halt_verb = {
	.name = "halt",
	.head =
"Usage: corral halt [--reason TEXT] [--json] ID\n"
"\n"
"Halt the sandbox ID as a met abort criterion would: the supervisor freezes\n"
"it first (which keeps the evidence), records why, then kills it or holds it\n"
"frozen as the policy's on_abort says.  From then on the sandbox refuses\n"
"every call with HTTP 409 and the reason, until `corral rm ID` destroys it.\n"
"There is no way back: to stop it for a while, use `corral pause`.\n"
"Prints ID.\n"
"\n"
"Options:\n"
"  --reason TEXT        why: the halt reason later calls are refused with,\n"
"                       and that the events record (default: \"halted by\n"
"                       `corral halt`\")\n"
"  --json               print the sandbox object (state \"halted\") instead\n",
	.tail =
"Exit status: 0 halted; 2 bad usage; 125 the daemon refused (no such\n"
"sandbox) or could not be reached.\n"
"\n"
"Example:\n"
"  corral halt --reason \"agent tried to read ~/.ssh\" \"$id\"\n",
};

static const struct option state_options[] = {
	{ "socket", required_argument, NULL, OPT_SOCKET },
	{ "url", required_argument, NULL, OPT_URL },
	{ "token-file", required_argument, NULL, OPT_TOKEN_FILE },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "reason", required_argument, NULL, OPT_REASON },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

struct state_args {
	const struct verb *verb;
	const char *reason;
	bool json;
};

static int state_option(void *arg, int opt, const char *val)
{
	struct state_args *a = arg;

	if (opt == OPT_JSON) {
		a->json = true;
		return 0;
	}
	if (opt == OPT_REASON && a->verb == &halt_verb) {
		a->reason = val;
		return 0;
	}
	return usage_error(a->verb, "unknown option \"--reason\"");
}

static int state_send(struct conn *c, const struct state_args *a,
		      const char *id, const json_t *body)
{
	char rest[16];
	char *path;
	json_t *sb;
	int code;

	snprintf(rest, sizeof(rest), "/%s", a->verb->name);
	path = sandbox_path(c, id, rest);
	if (!path)
		return EXIT_CORRAL;
	sb = call_json(c, "POST", path, body);
	free(path);
	if (!sb)
		return EXIT_CORRAL;
	if (a->json)
		code = print_json(sb);
	else
		code = puts(id) == EOF ? EXIT_CORRAL : 0;
	json_decref(sb);
	return code;
}

/* pause, resume and halt: one POST to /v1/sandboxes/ID/VERB. */
static int state_cmd(const struct verb *v, int argc, char **argv)
{
	struct state_args a = { .verb = v };
	struct conn c = { 0 };
	json_t *body = NULL;
	int code;

	code = parse_options(v, state_options, ":h", argc, argv, &c,
			     state_option, &a);
	if (code)
		goto out;
	if (argc - optind != 1) {
		code = usage_error(v, "%s takes one sandbox ID", v->name);
		goto out;
	}
	code = check_id(v, argv[optind]);
	if (code)
		goto out;
	if (v == &halt_verb) {
		body = json_object();
		code = body ? put_text(v, body, "reason", "--reason",
				       a.reason ? a.reason : "halted by `corral halt`") :
			      out_of_memory();
		if (code)
			goto out;
	}
	code = conn_open(&c, v);
	if (!code)
		code = state_send(&c, &a, argv[optind], body);
out:
	json_decref(body);
	conn_close(&c);
	return code == HELP_SHOWN ? 0 : finish(code);
}

int cmd_pause(int argc, char **argv)
{
	return state_cmd(&pause_verb, argc, argv);
}

int cmd_resume(int argc, char **argv)
{
	return state_cmd(&resume_verb, argc, argv);
}

int cmd_halt(int argc, char **argv)
{
	return state_cmd(&halt_verb, argc, argv);
}

/* ---- rm ---------------------------------------------------------------- */

static const struct verb rm_verb = {
	.name = "rm",
	.head =
"Usage: corral rm [--json] ID...\n"
"\n"
"Destroy each sandbox ID: its processes are killed, and its mounts,\n"
"cgroups, network namespace and files go, the changes in its /workspace copy\n"
"too (copy out what you need first, with `corral cp`).  Its events stay in\n"
"the daemon's audit log.  Prints each ID once it is destroyed, and goes on\n"
"with the next when one fails.\n"
"\n"
"Options:\n"
"  --json               print the daemon's answer for each, one a line:\n"
"                       {\"id\", \"state\": \"destroyed\", \"meters\"}, with the\n"
"                       final CPU-seconds, memory peak, active and frozen time\n",
	.tail =
"Exit status: 0 all destroyed; 2 bad usage; 125 at least one was not (the\n"
"daemon refused, or could not be reached); the others were.\n"
"\n"
"Examples:\n"
"  corral rm \"$id\"\n"
"  corral rm $(corral ls -q)\n",
};

static const struct option json_options[] = {
	{ "socket", required_argument, NULL, OPT_SOCKET },
	{ "url", required_argument, NULL, OPT_URL },
	{ "token-file", required_argument, NULL, OPT_TOKEN_FILE },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static int json_flag(void *arg, int opt, const char *val)
{
	bool *json = arg;

	if (opt != OPT_JSON)
		return EXIT_CORRAL;
	*json = true;
	return 0;
}

static int rm_one(struct conn *c, const char *id, bool as_json)
{
	char *path = sandbox_path(c, id, "");
	json_t *o;
	int code;

	if (!path)
		return EXIT_CORRAL;
	o = call_json(c, "DELETE", path, NULL);
	free(path);
	if (!o)
		return EXIT_CORRAL;
	code = as_json ? print_json(o) : puts(id) == EOF ? EXIT_CORRAL : 0;
	json_decref(o);
	/* the next one's error should follow this one's line, not pass it */
	fflush(stdout);
	return code;
}

int cmd_rm(int argc, char **argv)
{
	struct conn c = { 0 };
	bool as_json = false;
	int code, i;

	code = parse_options(&rm_verb, json_options, ":h", argc, argv, &c,
			     json_flag, &as_json);
	if (code)
		goto out;
	if (optind >= argc) {
		code = usage_error(&rm_verb, "no sandbox ID given");
		goto out;
	}
	for (i = optind; i < argc && !code; i++)
		code = check_id(&rm_verb, argv[i]);
	if (code)
		goto out;
	code = conn_open(&c, &rm_verb);
	if (code)
		goto out;
	for (i = optind; i < argc; i++)
		if (rm_one(&c, argv[i], as_json))
			code = EXIT_CORRAL;
out:
	conn_close(&c);
	return code == HELP_SHOWN ? 0 : finish(code);
}

/* ---- ls ---------------------------------------------------------------- */

static const struct verb ls_verb = {
	.name = "ls",
	.head =
"Usage: corral ls [--json | -q]\n"
"\n"
"List the daemon's sandboxes, one a line:\n"
"  ID        as `corral create` printed it\n"
"  STATE     running (a call or a process runs), idle, frozen (idle: thawed\n"
"            by the next exec), paused (`corral pause`), halted (refuses\n"
"            every call: `corral ls --json` has its halt_reason); the\n"
"            daemon may also show \"dead\" (it ended by itself; it is\n"
"            kept until `corral rm`, so that its record can be read)\n"
"  AGE       time since it was created (s, m, h, d)\n"
"  CPU       CPU-seconds used so far\n"
"  MEM PEAK  the most memory it used at once\n"
"  LABELS    KEY=VALUE,... from `corral create --label`\n"
"Bytes of a label that a terminal would act on are shown as \\xNN.\n"
"\n"
"Options:\n"
"  --json               print the daemon's answer, {\"sandboxes\": [...]}, with\n"
"                       every field: meters, halt_reason, limits, ...\n"
"  -q, --quiet          print only the ids, one a line\n",
	.tail =
"Exit status: 0 listed (also when there are none); 2 bad usage; 125 the\n"
"daemon could not be reached, or refused.\n"
"\n"
"Examples:\n"
"  corral ls\n"
"  corral ls --json | jq '.sandboxes[] | select(.state == \"halted\")'\n",
};

static const struct option ls_options[] = {
	{ "socket", required_argument, NULL, OPT_SOCKET },
	{ "url", required_argument, NULL, OPT_URL },
	{ "token-file", required_argument, NULL, OPT_TOKEN_FILE },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "quiet", no_argument, NULL, 'q' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

struct ls_args {
	bool json, quiet;
};

static int ls_option(void *arg, int opt, const char *val)
{
	struct ls_args *a = arg;

	if (opt == OPT_JSON)
		a->json = true;
	else if (opt == 'q')
		a->quiet = true;
	else
		return usage_error(&ls_verb, "option %d is not handled", opt);
	return 0;
}

enum { COL_ID, COL_STATE, COL_AGE, COL_CPU, COL_MEM, COL_LABELS, NCOLS };

static const char *const col_names[NCOLS] = {
	"ID", "STATE", "AGE", "CPU", "MEM PEAK", "LABELS",
};

struct row {
	char *cell[NCOLS];
};

/* "2026-11-30T06:26:17Z", with or without a fraction of a second */
static bool parse_time(const char *s, time_t *t)
{
	struct tm tm = { 0 };
	const char *end = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;

	if (!end)
		return false;
	if (*end == '.')
		for (end++; *end >= '0' && *end <= '9'; end++)
			;
	if (strcmp(end, "Z"))
		return false;
	*t = timegm(&tm);
	return *t != (time_t)-1;
}

static char *age_cell(const char *created, time_t now)
{
	long long s;
	time_t t;
	char *out;
	int n;

	if (!parse_time(created, &t))
		return strdup("?");
	s = now > t ? (long long)(now - t) : 0;
	if (s < 120)
		n = asprintf(&out, "%llds", s);
	else if (s < 2 * 3600)
		n = asprintf(&out, "%lldm", s / 60);
	else if (s < 2 * 86400)
		n = asprintf(&out, "%lldh", s / 3600);
	else
		n = asprintf(&out, "%lldd", s / 86400);
	return n < 0 ? NULL : out;
}

static char *cpu_cell(const json_t *meters)
{
	const json_t *v = json_object_get(meters, "cpu_seconds");
	char *out;

	if (!json_is_number(v))
		return strdup("-");
	if (asprintf(&out, "%.2fs", json_number_value(v)) < 0)
		return NULL;
	return out;
}

static char *mem_cell(const json_t *meters)
{
	const json_t *v = json_object_get(meters, "memory_peak_bytes");
	char buf[32];

	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return strdup("-");
	corral_format_size((uint64_t)json_integer_value(v), buf, sizeof(buf));
	return strdup(buf);
}

static char *labels_cell(const json_t *labels)
{
	const char *key;
	char *buf = NULL, *safe;
	size_t size = 0;
	json_t *val;
	FILE *m;
	bool first = true;

	if (!json_object_size(labels))
		return strdup("-");
	m = open_memstream(&buf, &size);
	if (!m)
		return NULL;
	json_object_foreach((json_t *)labels, key, val) {
		const char *s = json_string_value(val);

		fprintf(m, "%s%s=%s", first ? "" : ",", key, s ? s : "?");
		first = false;
	}
	if (fclose(m) == EOF) {
		free(buf);
		return NULL;
	}
	safe = printable(buf, size);
	free(buf);
	return safe;
}

static int fill_row(struct row *r, const json_t *sb, time_t now)
{
	const char *id = json_string_value(json_object_get(sb, "id"));
	const char *state = json_string_value(json_object_get(sb, "state"));
	const json_t *meters = json_object_get(sb, "meters");
	int i;

	r->cell[COL_ID] = printable(id ? id : "?", id ? strlen(id) : 1);
	r->cell[COL_STATE] = printable(state ? state : "?", state ? strlen(state) : 1);
	r->cell[COL_AGE] = age_cell(json_string_value(json_object_get(sb, "created")), now);
	r->cell[COL_CPU] = cpu_cell(meters);
	r->cell[COL_MEM] = mem_cell(meters);
	r->cell[COL_LABELS] = labels_cell(json_object_get(sb, "labels"));
	for (i = 0; i < NCOLS; i++)
		if (!r->cell[i])
			return out_of_memory();
	return 0;
}

static void free_rows(struct row *rows, size_t n)
{
	size_t i;
	int j;

	for (i = 0; i < n; i++)
		for (j = 0; j < NCOLS; j++)
			free(rows[i].cell[j]);
	free(rows);
}

static void print_row(const char *const *cell, const int *width)
{
	int i;

	for (i = 0; i < NCOLS - 1; i++)
		printf("%-*s  ", width[i], cell[i]);
	printf("%s\n", cell[NCOLS - 1]);
}

static int print_table(const json_t *list)
{
	size_t n = json_array_size(list), i;
	time_t now = time(NULL);
	int width[NCOLS], j, code = 0;
	struct row *rows;

	rows = calloc(n ? n : 1, sizeof(*rows));
	if (!rows)
		return out_of_memory();
	for (j = 0; j < NCOLS; j++)
		width[j] = strlen(col_names[j]);
	for (i = 0; i < n && !code; i++) {
		code = fill_row(&rows[i], json_array_get(list, i), now);
		for (j = 0; j < NCOLS && !code; j++)
			if ((int)strlen(rows[i].cell[j]) > width[j])
				width[j] = strlen(rows[i].cell[j]);
	}
	if (!code) {
		print_row(col_names, width);
		for (i = 0; i < n; i++)
			print_row((const char *const *)rows[i].cell, width);
	}
	free_rows(rows, n);
	return code;
}

static int print_ids(const json_t *list)
{
	size_t i;
	json_t *sb;

	json_array_foreach(list, i, sb) {
		const char *id = json_string_value(json_object_get(sb, "id"));

		if (id && client_valid_id(id) && puts(id) == EOF)
			return EXIT_CORRAL;
	}
	return 0;
}

int cmd_ls(int argc, char **argv)
{
	struct ls_args a = { 0 };
	struct conn c = { 0 };
	json_t *o = NULL, *list;
	int code;

	code = parse_options(&ls_verb, ls_options, ":hq", argc, argv, &c,
			     ls_option, &a);
	if (code)
		goto out;
	if (optind < argc) {
		code = usage_error(&ls_verb, "ls takes no operands (got \"%s\")",
				   argv[optind]);
		goto out;
	}
	if (a.json && a.quiet) {
		code = usage_error(&ls_verb, "--json and --quiet exclude each other");
		goto out;
	}
	code = conn_open(&c, &ls_verb);
	if (code)
		goto out;
	o = call_json(&c, "GET", "/v1/sandboxes", NULL);
	if (!o) {
		code = EXIT_CORRAL;
		goto out;
	}
	list = json_object_get(o, "sandboxes");
	if (!json_is_array(list)) {
		cli_error("the daemon's answer has no list of sandboxes");
		code = EXIT_CORRAL;
	} else {
		code = a.json ? print_json(o) : a.quiet ? print_ids(list) :
		       print_table(list);
	}
out:
	json_decref(o);
	conn_close(&c);
	return code == HELP_SHOWN ? 0 : finish(code);
}

/* ---- logs -------------------------------------------------------------- */

static const struct verb logs_verb = {
	.name = "logs",
	.head =
"Usage: corral logs [--json] ID [PID]\n"
"\n"
"Show the processes of the sandbox ID that `corral exec --background`\n"
"started, and what they wrote.  For each process, a header line\n"
"  == pid PID  call TOOL_CALL  STATE  COMMAND\n"
"where STATE is \"running\" or how it ended (\"exited with status 0\"), then\n"
"\"-- stdout\" and \"-- stderr\" each followed by the last 64 KiB of that\n"
"stream as the daemon keeps it (a stream with nothing in it is left out).\n"
"The output is shown as the process wrote it.  With PID (as `corral exec\n"
"--background` printed it), only that process.\n"
"\n"
"Options:\n"
"  --json               print the daemon's answer instead: with PID, the\n"
"                       process object with its stdout and stderr; without,\n"
"                       {\"processes\": [...]} as the daemon lists them (its\n"
"                       list leaves the output out)\n",
	.tail =
"Exit status: 0 shown; 2 bad usage; 125 the daemon refused (no such\n"
"sandbox or process) or could not be reached.\n"
"\n"
"Examples:\n"
"  corral logs \"$id\"\n"
"  corral logs --json \"$id\" 12 | jq -r .stdout\n",
};

static int write_stream(const json_t *p, const char *name)
{
	const json_t *s = json_object_get(p, name);
	size_t len = json_string_length(s);
	const char *text = json_string_value(s);

	if (!len)
		return 0;
	printf("-- %s\n", name);
	if (fwrite(text, 1, len, stdout) != len)
		return EXIT_CORRAL;
	if (text[len - 1] != '\n' && putchar('\n') == EOF)
		return EXIT_CORRAL;
	return 0;
}

static char *argv_text(const json_t *argv)
{
	char *buf = NULL, *safe;
	size_t size = 0, i;
	json_t *arg;
	FILE *m;

	if (json_is_string(argv))
		return printable(json_string_value(argv), json_string_length(argv));
	m = open_memstream(&buf, &size);
	if (!m)
		return NULL;
	json_array_foreach(argv, i, arg) {
		const char *s = json_string_value(arg);

		fprintf(m, "%s%s", i ? " " : "", s ? s : "?");
	}
	if (fclose(m) == EOF) {
		free(buf);
		return NULL;
	}
	safe = printable(buf, size);
	free(buf);
	return safe;
}

static int print_process(const json_t *p)
{
	const char *call = json_string_value(json_object_get(p, "tool_call_id"));
	const char *state = json_string_value(json_object_get(p, "state"));
	const char *reason = json_string_value(json_object_get(json_object_get(p, "result"),
								"reason"));
	char *cmd = argv_text(json_object_get(p, "argv"));
	char *how = NULL, *safe_call = NULL;
	const char *h;
	int code = 0;

	h = reason ? reason : state ? state : "?";
	how = printable(h, strlen(h));
	safe_call = printable(call ? call : "-", call ? strlen(call) : 1);
	if (!cmd || !how || !safe_call) {
		code = out_of_memory();
		goto out;
	}
	if (printf("== pid %" JSON_INTEGER_FORMAT "  call %s  %s  %s\n",
		   json_integer_value(json_object_get(p, "pid")), safe_call, how,
		   cmd) < 0)
		code = EXIT_CORRAL;
	if (!code)
		code = write_stream(p, "stdout");
	if (!code)
		code = write_stream(p, "stderr");
out:
	free(cmd);
	free(how);
	free(safe_call);
	return code;
}

/* GET .../processes or .../processes/PID (pid < 0). */
static json_t *get_processes(struct conn *c, const char *id, long long pid)
{
	char rest[64];
	char *path;
	json_t *o;

	if (pid < 0)
		snprintf(rest, sizeof(rest), "/processes");
	else
		snprintf(rest, sizeof(rest), "/processes/%lld", pid);
	path = sandbox_path(c, id, rest);
	if (!path)
		return NULL;
	o = call_json(c, "GET", path, NULL);
	free(path);
	return o;
}

/* The daemon's list leaves the output out: each process has it on its own. */
static int print_listed(struct conn *c, const char *id, const json_t *p)
{
	const json_t *pid = json_object_get(p, "pid");
	json_t *full;
	int code;

	if (json_object_get(p, "stdout") || !json_is_integer(pid))
		return print_process(p);
	full = get_processes(c, id, json_integer_value(pid));
	if (!full)
		return EXIT_CORRAL;
	code = print_process(full);
	json_decref(full);
	return code;
}

static int print_processes(struct conn *c, const char *id, const json_t *o)
{
	const json_t *list = json_object_get(o, "processes");
	json_t *p;
	size_t i;
	int code = 0;

	if (!json_is_array(list)) {
		cli_error("the daemon's answer has no list of processes");
		return EXIT_CORRAL;
	}
	json_array_foreach(list, i, p) {
		code = print_listed(c, id, p);
		if (code)
			break;
	}
	return code;
}

static int logs_send(struct conn *c, const char *id, long long pid,
		     bool as_json)
{
	json_t *o = get_processes(c, id, pid);
	int code;

	if (!o)
		return EXIT_CORRAL;
	if (as_json)
		code = print_json(o);
	else if (pid >= 0)
		code = print_process(o);
	else
		code = print_processes(c, id, o);
	json_decref(o);
	return code;
}

static int parse_pid(const char *arg, long long *pid)
{
	size_t n = strlen(arg);

	if (!n || n > 9 || strspn(arg, "0123456789") != n)
		return usage_error(&logs_verb, "PID: expected a process id as `corral exec --background` printed it (got \"%s\")",
				   arg);
	*pid = strtoll(arg, NULL, 10);
	return 0;
}

int cmd_logs(int argc, char **argv)
{
	struct conn c = { 0 };
	bool as_json = false;
	long long pid = -1;
	int code;

	code = parse_options(&logs_verb, json_options, ":h", argc, argv, &c,
			     json_flag, &as_json);
	if (code)
		goto out;
	if (argc - optind < 1 || argc - optind > 2) {
		code = usage_error(&logs_verb, "logs takes a sandbox ID and an optional PID");
		goto out;
	}
	code = check_id(&logs_verb, argv[optind]);
	if (code)
		goto out;
	if (argc - optind == 2) {
		code = parse_pid(argv[optind + 1], &pid);
		if (code)
			goto out;
	}
	code = conn_open(&c, &logs_verb);
	if (!code)
		code = logs_send(&c, argv[optind], pid, as_json);
out:
	conn_close(&c);
	return code == HELP_SHOWN ? 0 : finish(code);
}

/* ---- events ------------------------------------------------------------ */

static const struct verb events_verb = {
	.name = "events",
	.head =
"Usage: corral events [--follow] [ID]\n"
"\n"
"Print the daemon's events, one JSON object a line, as they stand in its\n"
"audit log: exec start and end, egress allowed and denied, denied syscalls,\n"
"tripwires, limits hit, halts; of every sandbox, or only of ID.  Lines are\n"
"written byte for byte as the daemon sends them: each one's \"prev\" is the\n"
"SHA-256 of the line before it in the log, so the whole log (no ID) can be\n"
"checked with `corral audit verify`; with ID the lines of the other\n"
"sandboxes are missing and the chain shows the gaps.  `corral audit show`\n"
"reads either as a timeline.\n"
"\n"
"Options:\n"
"  -f, --follow         do not stop at the end: print new events as they\n"
"                       happen, until interrupted\n",
	.tail =
"Exit status: 0 all events were printed; 2 bad usage; 125 the daemon\n"
"refused (no such sandbox) or could not be reached, or, with --follow, it\n"
"closed the stream.  Interrupted (Ctrl-C), corral dies of SIGINT, as usual.\n"
"\n"
"Examples:\n"
"  corral events > events.jsonl && corral audit verify events.jsonl\n"
"  corral events \"$id\" > sb.jsonl && corral audit show sb.jsonl --type egress\n"
"  corral events --follow \"$id\"\n",
};

static const struct option events_options[] = {
	{ "socket", required_argument, NULL, OPT_SOCKET },
	{ "url", required_argument, NULL, OPT_URL },
	{ "token-file", required_argument, NULL, OPT_TOKEN_FILE },
	{ "follow", no_argument, NULL, 'f' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static int events_option(void *arg, int opt, const char *val)
{
	bool *follow = arg;

	if (opt != 'f')
		return usage_error(&events_verb, "option %d is not handled", opt);
	*follow = true;
	return 0;
}

/* Byte for byte: `corral audit verify` hashes these lines. */
static int on_event_line(void *arg, char *line, size_t len)
{
	if (fwrite(line, 1, len, stdout) != len || putchar('\n') == EOF ||
	    fflush(stdout) == EOF) {
		cli_error("writing to standard output: %s", strerror(errno));
		return -1;
	}
	return 0;
}

static int events_send(struct conn *c, const char *id, bool follow)
{
	struct reply r = { .max = REPLY_MAX, .line = on_event_line };
	struct request q = { .method = "GET" };
	char *path = NULL;
	int n, code = EXIT_CORRAL;

	n = asprintf(&path, "/v1/events%s%s%s", id ? "?sandbox=" : "",
		     id ? id : "", follow ? (id ? "&follow=1" : "?follow=1") : "");
	if (n < 0)
		return out_of_memory();
	q.path = path;
	if (perform(c, &q, &r) == 0 && check_reply(&r) == 0) {
		code = 0;
		if (follow) {
			cli_error("the daemon closed the event stream");
			code = EXIT_CORRAL;
		}
	}
	reply_free(&r);
	free(path);
	return code;
}

int cmd_events(int argc, char **argv)
{
	struct conn c = { 0 };
	const char *id = NULL;
	bool follow = false;
	int code;

	code = parse_options(&events_verb, events_options, ":hf", argc, argv,
			     &c, events_option, &follow);
	if (code)
		goto out;
	if (argc - optind > 1) {
		code = usage_error(&events_verb, "events takes at most one sandbox ID");
		goto out;
	}
	if (argc - optind == 1) {
		id = argv[optind];
		code = check_id(&events_verb, id);
		if (code)
			goto out;
	}
	code = conn_open(&c, &events_verb);
	if (!code)
		code = events_send(&c, id, follow);
out:
	conn_close(&c);
	return code == HELP_SHOWN ? 0 : finish(code);
}
