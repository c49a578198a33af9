/*
 * api.c - the HTTP API of corral serve (docs/API.md), over libcorral's
 * boxes: the routing tables, the replies (with the one errno-to-HTTP
 * mapping) and the checks of request bodies the handlers share.  The
 * handlers are one file a resource (api_*.c); the sandboxes they act on
 * live in registry.c.  Every handler validates all of its input before it
 * creates anything: a request that fails leaves nothing behind.
 */
#include "api.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- replies ------------------------------------------------------------- */

void reply_json(struct evhttp_request *req, int code, json_t *o)
{
	struct evbuffer *buf = evbuffer_new();
	char *text = o ? json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;

	json_decref(o);
	if (!buf || !text) {
		free(text);
		if (buf)
			evbuffer_free(buf);
		evhttp_send_error(req, 500, "out of memory for the reply");
		return;
	}
	evbuffer_add(buf, text, strlen(text));
	evbuffer_add(buf, "\n", 1);
	free(text);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
			  "application/json");
	api_send_reply(req, code, code < 300 ? "OK" : "Error", buf);
	evbuffer_free(buf);
}

json_t *api_error_obj(const char *error, const char *fmt, va_list ap)
{
	char detail[1024];

	vsnprintf(detail, sizeof(detail), fmt, ap);
	/*
	 * A detail quotes what the sandbox named, in whatever bytes it chose
	 * (a file's name), and vsnprintf may cut a sequence at the end: as
	 * "s", such a string made json_pack fail, and the client a 500.
	 */
	return json_pack("{s:s, s:o}", "error", error,
			 "detail", api_bytes(detail, strlen(detail)));
}

void reply_error(struct evhttp_request *req, int code, const char *error,
		 const char *fmt, ...)
{
	va_list ap;
	json_t *o;

	va_start(ap, fmt);
	o = api_error_obj(error, fmt, ap);
	va_end(ap);
	reply_json(req, code, o);
}

int api_status(int code, const char **error)
{
	switch (code) {
	case -EINVAL:
	case -E2BIG:
	case -ENAMETOOLONG:
	case -ELOOP:
	case -EXDEV:
	case -EISDIR:
	case -ENOTDIR:
		*error = "bad_request";
		return 400;
	case -ENOENT:
	case -ESRCH:
	case CORRAL_E_GONE:
		*error = "not_found";
		return 404;
	case -EACCES:
	case -EPERM:	/* the kernel's: a halted sandbox is CORRAL_E_HALTED */
	case -EROFS:
	/*
	 * the kernel's, for an inode whose owner the sandbox's id mapping
	 * cannot name (a file of another host user in an idmapped workspace,
	 * --uid-range): the agent may not change it, nor may we as the agent
	 */
	case -EOVERFLOW:
		*error = "forbidden";
		return 403;
	case -EBUSY:
	case -EEXIST:
	case -ENOTEMPTY:	/* DELETE of a directory that holds something */
	case -ESTALE:
	case -EALREADY:
	case -EAGAIN:
	case -EPIPE:	/* a process's stdin, closed */
	case CORRAL_E_HALTED:
	case CORRAL_E_PAUSED:
	case CORRAL_E_STARTING:
		*error = "conflict";
		return 409;
	case -EMFILE:
	case -ENFILE:
	case -EUSERS:	/* a per-user kernel count the caller's sandboxes share */
		*error = "busy";
		return 503;
	case -ENOSPC:
	case -EDQUOT:
	case -EFBIG:
		*error = "no_space";
		return 507;
	/*
	 * What this host or this daemon's user cannot do at all (a pause
	 * with no freezer to be had): no fault of the daemon's, nor of the
	 * request's, and asking again will not help.
	 */
	case -ENOTSUP:
		*error = "not_supported";
		return 501;
	default:
		*error = "internal";
		return 500;
	}
}

/*
 * A path the request names that is not there (or a workspace that is no
 * directory) is the request's fault; running short of fds or processes is
 * the daemon being busy, as for any call; anything else is ours.
 */
int api_build_status(int code, const char **error)
{
	switch (code) {
	case -ENOENT:
	case -ENOTDIR:
	case -EINVAL:
		*error = "bad_request";
		return 400;
	case -EMFILE:
	case -ENFILE:
	case -EAGAIN:
	case -EUSERS:
		return api_status(code, error);
	default:
		*error = "internal";
		return 500;
	}
}

/* A library error, with the status its errno deserves. */
void reply_err(struct evhttp_request *req, const struct corral_err *err)
{
	const char *error;
	int code = api_status(err->code, &error);

	if (err->code == -EMFILE || err->code == -ENFILE)
		reply_error(req, code, error, "%s (the daemon's open-files limit; "
			    "raise it with ulimit -n)", err->msg);
	else
		reply_error(req, code, error, "%s", err->msg);
}

void reply_build_err(struct evhttp_request *req, const struct corral_err *err)
{
	const char *error;
	int code = api_build_status(err->code, &error);

	if (code == 400 || code == 500)
		reply_error(req, code, error, "the sandbox could not be built: %s",
			    err->msg);
	else
		reply_err(req, err);
}

bool api_fault(struct api_fault *f, int status, const char *error,
	       const char *fmt, ...)
{
	va_list ap;

	f->status = status;
	f->error = error;
	va_start(ap, fmt);
	vsnprintf(f->detail, sizeof(f->detail), fmt, ap);
	va_end(ap);
	return false;
}

void reply_fault(struct evhttp_request *req, const struct api_fault *f)
{
	reply_error(req, f->status, f->error, "%s", f->detail);
}

json_t *api_bytes(const char *data, size_t len)
{
	return corral_json_bytes(data, len);
}

size_t api_queued(struct evhttp_request *req)
{
	struct evhttp_connection *conn = evhttp_request_get_connection(req);
	struct bufferevent *bev = conn ? evhttp_connection_get_bufferevent(conn) : NULL;

	return bev ? evbuffer_get_length(bufferevent_get_output(bev)) : 0;
}

/*
 * evhttp ends a request when the connection's write callback runs, which
 * it takes to mean that all it queued is sent.  A TLS connection's
 * (bufferevent_openssl) runs deferred: one scheduled as an earlier write
 * drained could run after the reply was queued.  evhttp then finished the
 * request with the reply unsent and stopped writing, and the client waited
 * for ever: a streamed exec's end over https in about 200; and every
 * answer to a request with "Expect: 100-continue" whose body came right
 * after its head (the "100 Continue" drained, the body read and answered,
 * then the callback).  So after evhttp queues an answer or an end, its
 * write callback is wrapped, to pass on only when nothing is left to send;
 * evhttp sets its own again whenever it writes anew.
 */
static bufferevent_data_cb evhttp_write;	/* evhttp's, one for every connection */

static void write_when_drained(struct bufferevent *bev, void *arg)
{
	if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		evhttp_write(bev, arg);
}

static struct bufferevent *bev_hold(struct evhttp_request *req)
{
	struct evhttp_connection *conn = evhttp_request_get_connection(req);
	struct bufferevent *bev = conn ? evhttp_connection_get_bufferevent(conn) : NULL;

	/* the end may free the connection: its bufferevent is kept till we are done */
	if (bev)
		bufferevent_incref(bev);
	return bev;
}

static void bev_wrap_write(struct bufferevent *bev)
{
	bufferevent_data_cb rcb, wcb;
	bufferevent_event_cb ecb;
	void *arg;

	if (!bev)
		return;
	bufferevent_getcb(bev, &rcb, &wcb, &ecb, &arg);
	if (wcb && wcb != write_when_drained) {
		evhttp_write = wcb;
		bufferevent_setcb(bev, rcb, write_when_drained, ecb, arg);
	}
	bufferevent_decref(bev);
}

void api_reply_end(struct evhttp_request *req)
{
	struct bufferevent *bev = bev_hold(req);

	evhttp_send_reply_end(req);
	bev_wrap_write(bev);
}

void api_send_reply(struct evhttp_request *req, int code, const char *reason,
		    struct evbuffer *body)
{
	struct bufferevent *bev = bev_hold(req);

	/*
	 * An answer to HEAD ends with its head (RFC 9112 6.3): evhttp (2.1)
	 * leaves out the Content-Length but writes the body all the same,
	 * and a client or proxy on the connection took those bytes for the
	 * start of the next answer.  The head says what a GET would get.
	 */
	if (body && evhttp_request_get_command(req) == EVHTTP_REQ_HEAD) {
		struct evkeyvalq *h = evhttp_request_get_output_headers(req);
		char len[32];

		snprintf(len, sizeof(len), "%zu", evbuffer_get_length(body));
		if (!evhttp_find_header(h, "Content-Length"))
			evhttp_add_header(h, "Content-Length", len);
		evbuffer_drain(body, evbuffer_get_length(body));
	}
	evhttp_send_reply(req, code, reason, body);
	bev_wrap_write(bev);
}

/*
 * The client went away while we held its request.  libevent has handed
 * the request to us (it is no longer on the connection): ending it frees
 * it.  A request still on its connection is libevent's to free.
 */
void forget_request(struct evhttp_request *req)
{
	if (req && !evhttp_request_get_connection(req))
		evhttp_send_reply_end(req);
}

/* ---- request bodies and queries -------------------------------------------- */

json_t *body_parse(const char *data, size_t len, bool required,
		   struct api_fault *f)
{
	json_error_t je;
	json_t *o;

	if (len > API_JSON_MAX) {
		api_fault(f, 413, "too_large", "the JSON body is %zu bytes; the "
			  "limit is %d", len, API_JSON_MAX);
		return NULL;
	}
	if (len == 0 && !required)
		return json_object();
	o = json_loadb(data, len, JSON_REJECT_DUPLICATES, &je);
	if (!o) {
		api_fault(f, 400, "bad_request", "the body is not JSON: %s "
			  "(line %d, column %d)", je.text, je.line, je.column);
		return NULL;
	}
	if (!json_is_object(o)) {
		json_decref(o);
		api_fault(f, 400, "bad_request", "the body must be a JSON object");
		return NULL;
	}
	return o;
}

json_t *body_json(struct evhttp_request *req, bool required)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t len = evbuffer_get_length(in);
	struct api_fault f;
	json_t *o;

	/* the length is checked before the body is made contiguous */
	o = body_parse(len > API_JSON_MAX || !len ? NULL :
		       (const char *)evbuffer_pullup(in, -1), len, required, &f);
	if (!o)
		reply_fault(req, &f);
	return o;
}

/* Unknown fields are errors: a typo must not silently mean "default". */
bool only_fields(json_t *o, const char *const *known, struct api_fault *f)
{
	const char *key;
	json_t *v;

	json_object_foreach(o, key, v) {
		size_t i;

		for (i = 0; known[i] && strcmp(known[i], key); i++)
			;
		if (!known[i])
			return api_fault(f, 400, "bad_request", "unknown field "
					 "\"%.100s\"", key);
	}
	return true;
}

/* What a fault says a JSON value was: the value as JSON, cut short. */
const char *api_json_text(const json_t *v, char *buf, size_t len)
{
	char *text = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY |
				    JSON_ENSURE_ASCII) : NULL;

	snprintf(buf, len, "%s", text ? text : "?");
	free(text);
	return buf;
}

/*
 * A whole number of ms from a number of seconds, in range.  jansson's
 * parser refuses NaN, infinities and overflows, so a JSON number is
 * finite; the check says so anyway, as query_number does.
 */
bool seconds_field(json_t *o, const char *key, double max, uint64_t *ms,
		   struct api_fault *f)
{
	json_t *v = json_object_get(o, key);
	char got[48];
	double s;

	if (!v || json_is_null(v))
		return true;
	if (!json_is_number(v) || !isfinite(s = json_number_value(v)) ||
	    s < 0 || s > max)
		return api_fault(f, 400, "bad_request", "%s must be a number of "
				 "seconds from 0 to %.0f (got %s)", key, max,
				 api_json_text(v, got, sizeof(got)));
	*ms = (uint64_t)(s * 1000 + 0.5);
	return true;
}

bool int_field(json_t *o, const char *key, long long min, long long max,
	       long long *out, struct api_fault *f)
{
	json_t *v = json_object_get(o, key);
	char got[48];

	if (!v)
		return true;
	if (!json_is_integer(v) || json_integer_value(v) < min ||
	    json_integer_value(v) > max)
		return api_fault(f, 400, "bad_request", "%s must be an integer "
				 "from %lld to %lld (got %s)", key, min, max,
				 api_json_text(v, got, sizeof(got)));
	*out = json_integer_value(v);
	return true;
}

/*
 * A number in a query: plain decimal digits, a point and an exponent
 * (strtod alone would take "nan", "inf", hex and leading blanks), finite
 * and within [min, max].
 */
bool query_number(const char *key, const char *v, double min, double max,
		  double *out, struct api_fault *f)
{
	char *end;
	double n;

	if (!v)
		return true;
	errno = 0;
	n = *v && strspn(v, "0123456789.eE+-") == strlen(v) ? strtod(v, &end) : NAN;
	if (isnan(n) || *end || errno == ERANGE || !isfinite(n) || n < min || n > max)
		return api_fault(f, 400, "bad_request", "%s must be a number from "
				 "%g to %g (got \"%.40s\")", key, min, max, v);
	*out = n;
	return true;
}

/* A count in a query: decimal digits only, at most max. */
bool query_count(const char *key, const char *v, uint64_t max, uint64_t *out,
		 struct api_fault *f)
{
	unsigned long long n = 0;
	char *end = NULL;

	if (!v)
		return true;
	errno = 0;
	if (*v && strspn(v, "0123456789") == strlen(v))
		n = strtoull(v, &end, 10);
	if (!end || *end || errno == ERANGE || n > max)
		return api_fault(f, 400, "bad_request", "%s must be a whole number "
				 "from 0 to %llu (got \"%.40s\")", key,
				 (unsigned long long)max, v);
	*out = n;
	return true;
}

bool string_field(json_t *o, const char *key, size_t max, const char **out,
		  struct api_fault *f)
{
	json_t *v = json_object_get(o, key);

	if (!v || json_is_null(v))
		return true;
	if (!json_is_string(v) || json_string_length(v) == 0 ||
	    json_string_length(v) > max ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return api_fault(f, 400, "bad_request", "%s must be a string of 1 "
				 "to %zu bytes with no NUL", key, max);
	*out = json_string_value(v);
	return true;
}

bool query_flag(const char *v)
{
	return v && strcmp(v, "0") && strcmp(v, "false");
}

/* ---- routing ------------------------------------------------------------------- */

#define GET	EVHTTP_REQ_GET
#define HEAD	EVHTTP_REQ_HEAD
#define POST	EVHTTP_REQ_POST
#define PUT	EVHTTP_REQ_PUT
#define DELETE	EVHTTP_REQ_DELETE
#define ANY	(~0)

static void one_sandbox(struct daemon *d, struct evhttp_request *req,
			const char *rest);

const struct api_route api_routes[] = {
	{ "/v1/health", GET | HEAD, "/v1/health: GET", health_get, NULL },
	{ "/v1/metrics", GET | HEAD, "/v1/metrics: GET", metrics_get, NULL },
	{ "/v1/events", GET, "events: GET", events_get, NULL },
	{ "/v1/leases", POST, "leases: POST", leases_create, NULL },
	{ "/v1/sandboxes", POST, "sandboxes: GET or POST", sandboxes_create, NULL },
	{ "/v1/sandboxes", GET, "sandboxes: GET or POST", sandboxes_list, NULL },
	{ "/v1/snapshots", GET, "snapshots: GET", snapshots_list, NULL },
	{ "/v1/snapshots/*", GET, "a snapshot: GET or DELETE", snapshot_get, NULL },
	{ "/v1/snapshots/*", DELETE, "a snapshot: GET or DELETE", snapshot_delete, NULL },
	/* the sandbox first (404), then its routes, below */
	{ "/v1/sandboxes/*", ANY, NULL, one_sandbox, NULL },
	{ NULL, 0, NULL, NULL, NULL },
};

/* After /v1/sandboxes/ID; "" is the sandbox itself. */
const struct api_route api_sandbox_routes[] = {
	{ "", GET, "a sandbox: GET or DELETE", NULL, sandbox_get },
	{ "", DELETE, "a sandbox: GET or DELETE", NULL, sandbox_delete },
	{ "/exec", POST, "exec: POST", NULL, exec_post },
	{ "/processes", POST, "processes: GET or POST", NULL, procs_post },
	{ "/processes", GET, "processes: GET or POST", NULL, procs_list },
	/* a process's own routes before the process, whose '*' takes the rest */
	{ "/processes/*/output", GET, "output: GET", NULL, proc_output },
	{ "/processes/*/wait", GET, "wait: GET", NULL, proc_wait },
	{ "/processes/*/stdin", POST, "stdin: POST", NULL, proc_stdin },
	{ "/processes/*/signal", POST, "signal: POST", NULL, proc_signal },
	{ "/processes/*", GET, "a process: GET or DELETE", NULL, proc_get },
	{ "/processes/*", DELETE, "a process: GET or DELETE", NULL, proc_delete },
	{ "/files", GET, "files: GET, PUT or DELETE", NULL, files_get },
	{ "/files", PUT, "files: GET, PUT or DELETE", NULL, files_put },
	{ "/files", DELETE, "files: GET, PUT or DELETE", NULL, files_delete },
	{ "/files/mkdir", POST, "mkdir: POST", NULL, files_mkdir },
	{ "/files/rename", POST, "rename: POST", NULL, files_rename },
	{ "/archive", GET, "archive: GET or PUT", NULL, archive_get },
	{ "/archive", PUT, "archive: GET or PUT", NULL, archive_put },
	{ "/pause", POST, "pause: POST", NULL, sandbox_pause },
	{ "/resume", POST, "resume: POST", NULL, sandbox_resume },
	{ "/halt", POST, "halt: POST", NULL, sandbox_halt },
	{ "/keepalive", POST, "keepalive: POST", NULL, sandbox_keepalive },
	{ "/diff", GET, "diff: GET", NULL, diff_get },
	{ "/export", POST, "export: POST", NULL, export_post },
	{ "/snapshot", POST, "snapshot: POST", NULL, snapshot_post },
	{ NULL, 0, NULL, NULL, NULL },
};

/*
 * What of path is left after pattern, or NULL if it does not match.  A
 * '*' inside the pattern is one segment (no '/'), and what is left starts
 * there: "/processes/{*}/stdin" hands "12/stdin" to its handler.
 */
static const char *route_match(const char *pattern, const char *path)
{
	const char *star = strchr(pattern, '*'), *seg;
	size_t n = strlen(pattern);

	if (star && star[1]) {
		if (strncmp(pattern, path, star - pattern))
			return NULL;
		seg = path + (star - pattern);
		n = strcspn(seg, "/");
		return n && !strcmp(seg + n, star + 1) ? seg : NULL;
	}
	if (n && pattern[n - 1] == '*')
		return !strncmp(pattern, path, n - 1) && path[n - 1] ?
		       path + n - 1 : NULL;
	return strcmp(pattern, path) ? NULL : path + strlen(path);
}

int api_route_find(const struct api_route *table, const char *path, int method,
		   const struct api_route **out, const char **rest)
{
	const struct api_route *seen = NULL;

	for (const struct api_route *r = table; r->path; r++) {
		const char *left = route_match(r->path, path);

		if (!left)
			continue;
		if (r->methods & method) {
			*out = r;
			*rest = left;
			return 0;
		}
		if (!seen)
			seen = r;
	}
	*out = seen;
	return seen ? 405 : 404;
}

/*
 * /v1/sandboxes/ID[/...]: an unknown sandbox is a 404 whatever follows,
 * and one still starting answers nothing but itself.
 */
static void one_sandbox(struct daemon *d, struct evhttp_request *req,
			const char *rest)
{
	const char *sub = strchrnul(rest, '/'), *left;
	const struct api_route *r;
	char id[sizeof(((struct sandbox *)0)->id)];
	size_t n = sub - rest;
	struct sandbox *sb = NULL;

	if (n < sizeof(id)) {
		memcpy(id, rest, n);
		id[n] = '\0';
		sb = sandbox_find(d, id);
	}
	/* a local one is not there for a TCP client: the same 404, whatever follows */
	if (!sb || !sandbox_seen(d, req, sb)) {
		reply_error(req, 404, "not_found", "no sandbox \"%.*s\"",
			    (int)(n < 64 ? n : 64), rest);
		return;
	}
	if (*sub && !sb->ready) {
		reply_error(req, 409, "conflict", "the sandbox is still starting");
		return;
	}
	switch (api_route_find(api_sandbox_routes, sub,
			       evhttp_request_get_command(req), &r, &left)) {
	case 0:
		r->on_sandbox(sb, req, left);
		break;
	case 405:
		reply_error(req, 405, "method_not_allowed", "%s", r->allow);
		break;
	default:
		reply_error(req, 404, "not_found", "no such route");
	}
}

/*
 * Over TCP, every request shows the token.  Once judged, the header goes
 * (libevent's free zeroes it, corral_memory_init): a box this request
 * creates is a fork made while the request is still here.
 */
static bool authorized(struct daemon *d, struct evhttp_request *req)
{
	struct evkeyvalq *in = evhttp_request_get_input_headers(req);
	const char *h = evhttp_find_header(in, "Authorization");
	bool ok = h && api_token_ok(d, h, strlen(h));

	while (evhttp_remove_header(in, "Authorization") == 0)
		;
	return ok;
}

bool api_over_tcp(struct daemon *d, struct evhttp_request *req)
{
	struct evhttp_connection *conn = evhttp_request_get_connection(req);
	char *addr = NULL;
	ev_uint16_t port = 0;

	if (!d->http_tcp || !conn)
		return false;
	evhttp_connection_get_peer(conn, &addr, &port);
	/* unix peers have no port */
	return port != 0;
}

void api_handle(struct evhttp_request *req, void *arg)
{
	struct daemon *d = arg;
	const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
	const struct api_route *r;
	const char *rest;

	d->requests++;
	if (api_over_tcp(d, req))
		d->requests_tcp++;
	if (!api_gate_request(d, req))
		return;
	/* the gate judged the head already; this is the second look */
	if (api_over_tcp(d, req) && !authorized(d, req)) {
		reply_error(req, 401, "unauthorized", "missing or wrong bearer token");
		return;
	}
	if (!path || strlen(path) >= 512) {
		reply_error(req, 404, "not_found", "no such route");
		return;
	}
	switch (api_route_find(api_routes, path, evhttp_request_get_command(req),
			       &r, &rest)) {
	case 0:
		r->on_daemon(d, req, rest);
		break;
	case 405:
		reply_error(req, 405, "method_not_allowed", "%s", r->allow);
		break;
	default:
		reply_error(req, 404, "not_found", "no route %.200s", path);
	}
}
