/*
 * api_exec.c - POST /v1/sandboxes/ID/exec: one call, answered with its
 * result, or streamed as NDJSON lines (start, stdout, stderr, end) to a
 * client whose pace holds the command's output; with "tty": true and an
 * Upgrade, a terminal (api_tty.c).  Also the checks of a call's body that
 * POST .../processes shares.
 */
#include "api.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void unwatch_client(struct pending *pd);

static void pending_gone(struct evhttp_connection *conn, void *arg)
{
	struct pending *pd = arg;

	(void)conn;
	unwatch_client(pd);	/* its fd is about to be closed */
	forget_request(pd->req);
	pd->req = NULL;
	/* the caller is gone: so is the reason to run the call */
	if (pd->call && !corral_call_result(pd->call))
		corral_call_kill(pd->call, SIGKILL);
}

/*
 * A client that closes its end before the answer cancels its call: the
 * caller is gone, and so is the reason to run it.  evhttp notices a closed
 * connection only when it writes, which a plain exec does at the end.
 */
static void on_client_closed(evutil_socket_t fd, short what, void *arg)
{
	struct pending *pd = arg;

	(void)fd;
	(void)what;
	if (pd->ev_closed)
		event_del(pd->ev_closed);
	if (pd->call && !corral_call_result(pd->call))
		corral_call_kill(pd->call, SIGKILL);
}

static void watch_client(struct pending *pd, struct evhttp_request *req)
{
	struct evhttp_connection *conn = evhttp_request_get_connection(req);
	struct bufferevent *bev = conn ? evhttp_connection_get_bufferevent(conn) : NULL;
	evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;

	if (fd < 0)
		return;
	pd->ev_closed = event_new(pd->sb->d->base, fd, EV_CLOSED, on_client_closed, pd);
	if (pd->ev_closed && event_add(pd->ev_closed, NULL) < 0) {
		event_free(pd->ev_closed);
		pd->ev_closed = NULL;
	}
}

static void unwatch_client(struct pending *pd)
{
	if (pd->ev_closed)
		event_free(pd->ev_closed);
	pd->ev_closed = NULL;
}

static void pending_detach(struct pending *pd)
{
	unwatch_client(pd);
	if (pd->req)
		api_set_closecb(pd->sb->d, pd->req, NULL, NULL);
}

/*
 * Called from the connection's write callback, which over TLS runs
 * deferred (see api_reply_end): one scheduled as an earlier chunk drained
 * can come while the chunk that set the hold is still queued.  evhttp keeps
 * us as the callback until the next chunk, so a call with output still
 * queued is passed over and the drain that empties it calls again.
 */
static void stream_drained(struct evhttp_connection *conn, void *arg)
{
	struct pending *pd = arg;

	(void)conn;
	if (pd->req && api_queued(pd->req))
		return;
	if (pd->held && pd->call) {
		pd->held = false;
		corral_call_hold_output(pd->call, false);
	}
}

static void stream_line(struct pending *pd, json_t *o)
{
	struct evbuffer *buf;
	char *text;

	if (!pd->req) {
		json_decref(o);
		return;
	}
	text = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
	json_decref(o);
	buf = evbuffer_new();
	if (text && buf) {
		evbuffer_add(buf, text, strlen(text));
		evbuffer_add(buf, "\n", 1);
		/*
		 * A client that reads slower than the command writes must not
		 * grow us: past STREAM_QUEUE_MAX the call's output waits (its
		 * writes block) until what is queued has been sent.
		 */
		if (!pd->held && pd->call && api_queued(pd->req) + evbuffer_get_length(buf) >
		    STREAM_QUEUE_MAX) {
			pd->held = true;
			corral_call_hold_output(pd->call, true);
			evhttp_send_reply_chunk_with_cb(pd->req, buf, stream_drained, pd);
		} else {
			evhttp_send_reply_chunk(pd->req, buf);
		}
	}
	if (buf)
		evbuffer_free(buf);
	free(text);
}

/*
 * The result as an object, never through its text: a dump and a parse of
 * 1 MiB of output a stream that is not ASCII (6 MiB of \\uXXXX) were two
 * of the three passes over it that held the loop, 0.3-0.45 s a call.
 */
json_t *result_json(const struct corral_result *res)
{
	json_t *o = corral_result_object(res);

	/* one name for it in the API, as requests give it: tool_call_id */
	if (o) {
		json_object_del(o, "tool_call");
		json_object_set_new(o, "tool_call_id", json_string(res->tool_call));
	}
	return o;
}

static void exec_start(void *arg, struct corral_call *c)
{
	struct pending *pd = arg;

	if (pd->stream)
		stream_line(pd, json_pack("{s:s, s:s, s:i}", "type", "start",
					  "tool_call_id", corral_call_id(c),
					  "pid", (int)corral_call_pid(c)));
}

/* Bytes at the end of s[0, n) that begin a UTF-8 sequence not complete yet. */
static size_t utf8_cut(const char *s, size_t n)
{
	for (size_t back = 1; back <= 3 && back <= n; back++) {
		unsigned char b = s[n - back];
		size_t need;

		if ((b & 0xc0) == 0x80)		/* a continuation: look further */
			continue;
		need = (b & 0xe0) == 0xc0 ? 2 : (b & 0xf0) == 0xe0 ? 3 :
		       (b & 0xf8) == 0xf0 ? 4 : 1;
		return need > back ? back : 0;
	}
	return 0;
}

static void stream_data(struct pending *pd, int stream, const char *data,
			size_t len)
{
	stream_line(pd, json_pack("{s:s, s:o}", "type", stream == 2 ? "stderr" :
				  "stdout", "data", pd->base64 ?
				  corral_json_base64(data, len) : api_bytes(data, len)));
}

/*
 * A read may end inside a character: its first bytes wait for the rest,
 * so that valid UTF-8 arrives exact, whatever the pipe's chunks.
 */
static void exec_output(void *arg, struct corral_call *c, int stream,
			const char *data, size_t len)
{
	struct pending *pd = arg;
	int i = stream == 2;
	size_t cut, joined;
	char *buf;

	(void)c;
	if (!pd->stream)
		return;
	if (pd->base64) {
		stream_data(pd, stream, data, len);
		return;
	}
	buf = malloc(pd->ncarry[i] + len);
	if (!buf) {
		stream_data(pd, stream, data, len);
		return;
	}
	memcpy(buf, pd->carry[i], pd->ncarry[i]);
	memcpy(buf + pd->ncarry[i], data, len);
	joined = pd->ncarry[i] + len;
	cut = utf8_cut(buf, joined);
	memcpy(pd->carry[i], buf + joined - cut, cut);
	pd->ncarry[i] = cut;
	if (joined > cut)
		stream_data(pd, stream, buf, joined - cut);
	free(buf);
}

static void exec_done(void *arg, struct corral_call *c,
		      const struct corral_result *res)
{
	struct pending *pd = arg;

	pending_detach(pd);
	for (int i = 0; i < 2; i++)	/* a character never completed */
		if (pd->req && pd->stream && pd->ncarry[i])
			stream_data(pd, i + 1, pd->carry[i], pd->ncarry[i]);
	if (pd->req && pd->stream) {
		stream_line(pd, json_pack("{s:s, s:o}", "type", "end", "result",
					  result_json(res)));
		api_reply_end(pd->req);
	} else if (pd->req) {
		reply_json(pd->req, 200, result_json(res));
	}
	corral_call_free(c);
	free(pd);
}

/* argv from "argv" or "command", env from an object: validated, no NULs. */

/* argv from "argv" or "command": validated, no NULs; points into o. */
static char **exec_argv(json_t *o, struct api_fault *f)
{
	json_t *argv = json_object_get(o, "argv"), *cmd = json_object_get(o, "command");
	char **v;
	size_t n;

	if (!argv == !cmd) {
		api_fault(f, 400, "bad_request", "give exactly one of \"argv\" "
			  "(an array of strings) and \"command\" (a string)");
		return NULL;
	}
	if (cmd) {
		if (!json_is_string(cmd) || !json_string_length(cmd) ||
		    strlen(json_string_value(cmd)) != json_string_length(cmd)) {
			api_fault(f, 400, "bad_request", "command must be a "
				  "non-empty string with no NUL");
			return NULL;
		}
		v = calloc(4, sizeof(char *));
		if (v) {
			v[0] = "/bin/sh";
			v[1] = "-c";
			v[2] = (char *)json_string_value(cmd);
		} else {
			api_fault(f, 500, "internal", "out of memory building the command line");
		}
		return v;
	}
	n = json_array_size(argv);
	if (!json_is_array(argv) || n == 0 || n > 4096) {
		api_fault(f, 400, "bad_request", "argv must be an array of 1 to "
			  "4096 strings");
		return NULL;
	}
	v = calloc(n + 1, sizeof(char *));
	for (size_t i = 0; v && i < n; i++) {
		json_t *a = json_array_get(argv, i);

		if (!json_is_string(a) || strlen(json_string_value(a)) !=
		    json_string_length(a) || (i == 0 && !json_string_length(a))) {
			api_fault(f, 400, "bad_request", "argv[%zu] must be a "
				  "string with no NUL (argv[0] not empty)", i);
			free(v);
			return NULL;
		}
		v[i] = (char *)json_string_value(a);
	}
	if (!v)
		api_fault(f, 500, "internal", "out of memory building the command line");
	return v;
}

static void free_env(char **e)
{
	for (size_t i = 0; e && e[i]; i++)
		free(e[i]);
	free(e);
}

/* env from an object, as NAME=VALUE strings; NULL and true: none given. */
static char **exec_env(json_t *o, bool *ok, struct api_fault *f)
{
	json_t *env = json_object_get(o, "env"), *v;
	const char *k;
	char **e;
	size_t i = 0;

	*ok = true;
	if (!env)
		return NULL;
	if (!json_is_object(env) || json_object_size(env) > 1024) {
		*ok = api_fault(f, 400, "bad_request", "env must be an object of "
				"at most 1024 string values");
		return NULL;
	}
	e = calloc(json_object_size(env) + 1, sizeof(char *));
	json_object_foreach(env, k, v) {
		if (!e || !json_is_string(v) || !k[0] || strchr(k, '=') ||
		    strlen(json_string_value(v)) != json_string_length(v) ||
		    strlen(k) > 255 ||
		    asprintf(&e[i++], "%s=%s", k, json_string_value(v)) < 0) {
			*ok = api_fault(f, 400, "bad_request", "env \"%.100s\": names "
					"are 1 to 255 bytes without '=', values "
					"strings without NUL", k);
			free_env(e);
			return NULL;
		}
	}
	return e;
}

/* "tty": a pty inside; "rows", "cols": its first size (exec only). */
static bool tty_fields(json_t *o, bool background, struct call_args *a,
		       struct api_fault *f)
{
	json_t *tty = json_object_get(o, "tty");
	const char *dim[2] = { "rows", "cols" };
	unsigned short *to[2] = { &a->co.rows, &a->co.cols };

	if (tty && !json_is_boolean(tty))
		return api_fault(f, 400, "bad_request", "tty must be true or false");
	a->co.tty = json_is_true(tty);
	if (a->co.tty && background)
		return api_fault(f, 400, "bad_request", "tty is for exec, not "
				 "processes");
	for (int i = 0; i < 2; i++) {
		long long n = 0;

		if (!json_object_get(o, dim[i]))
			continue;
		if (!a->co.tty)
			return api_fault(f, 400, "bad_request", "%s is for tty: true",
					 dim[i]);
		if (!int_field(o, dim[i], 1, 65535, &n, f))
			return false;
		*to[i] = (unsigned short)n;
	}
	return true;
}

/*
 * How the result carries the output: "output_encoding" text (UTF-8, what
 * is not valid as U+FFFD) or base64 (any bytes, exact); "output_bytes",
 * what is kept of each stream (head and tail), at most the policy's
 * limits.output; "output_order", the streams' interleaving.  A background
 * process keeps the tail of its output as text: none of these are for it.
 */
static bool output_fields(json_t *o, bool background, struct corral_call_opts *co,
			  struct api_fault *f)
{
	json_t *enc = json_object_get(o, "output_encoding");
	json_t *bytes = json_object_get(o, "output_bytes");
	json_t *order = json_object_get(o, "output_order");
	const char *e = json_string_value(enc);
	long long nbytes = 0;

	if (background && (enc || bytes || order))
		return api_fault(f, 400, "bad_request", "output_encoding, "
				 "output_bytes and output_order are for exec, "
				 "not processes");
	if (enc && (!e || (strcmp(e, "text") && strcmp(e, "base64"))))
		return api_fault(f, 400, "bad_request", "output_encoding must be "
				 "\"text\" or \"base64\"");
	if (!int_field(o, "output_bytes", 1, LLONG_MAX, &nbytes, f))
		return false;
	if (order && !json_is_boolean(order))
		return api_fault(f, 400, "bad_request", "output_order must be "
				 "true or false");
	co->output_base64 = e && !strcmp(e, "base64");
	co->output_bytes = bytes ? (uint64_t)nbytes : 0;
	co->output_order = json_is_true(order);
	return true;
}

bool call_args_check(json_t *o, bool background, struct call_args *a,
		     struct api_fault *f)
{
	static const char *const known[] = { "argv", "command", "tool_call_id",
		"cwd", "env", "stdin", "timeout_seconds", "stream", "tty", "rows",
		"cols", "output_encoding", "output_bytes", "output_order", NULL };
	json_t *stream = json_object_get(o, "stream"), *in = json_object_get(o, "stdin");
	struct corral_err err;
	bool ok;

	memset(a, 0, sizeof(*a));
	a->o = o;
	if (!only_fields(o, known, f) ||
	    !seconds_field(o, "timeout_seconds", 7 * 86400, &a->co.timeout_ms, f) ||
	    !string_field(o, "tool_call_id", CORRAL_TOOL_CALL_ID_MAX,
			  &a->co.tool_call, f) ||
	    !string_field(o, "cwd", 4095, &a->co.cwd, f))
		return false;
	if (a->co.tool_call && corral_check_tool_call_id(a->co.tool_call, &err) < 0)
		return api_fault(f, 400, "bad_request", "%s", err.msg);
	if ((stream && !json_is_boolean(stream)) || (background && stream))
		return api_fault(f, 400, "bad_request", background ? "stream is "
				 "for exec, not processes" : "stream must be true "
				 "or false");
	if (in && !json_is_string(in))
		return api_fault(f, 400, "bad_request", "stdin must be a string");
	if (!tty_fields(o, background, a, f) ||
	    !output_fields(o, background, &a->co, f))
		return false;
	a->argv = exec_argv(o, f);
	if (!a->argv)
		return false;
	a->env = exec_env(o, &ok, f);
	if (!ok)
		return false;
	a->co.argv = a->argv;
	a->co.sh_fast = json_object_get(o, "command") != NULL;
	a->co.env = a->env;
	if (in) {
		a->co.stdin_data = json_string_value(in);
		a->co.stdin_len = json_string_length(in);
	}
	a->stream = stream && json_is_true(stream);
	a->co.background = background;
	return true;
}

/* Frees what call_args_check() made, not o. */
void call_args_free(struct call_args *a)
{
	free(a->argv);
	free_env(a->env);
	a->argv = a->env = NULL;
}

bool call_args_read(struct evhttp_request *req, bool background,
		    struct call_args *a)
{
	json_t *o = body_json(req, true);
	struct api_fault f;

	memset(a, 0, sizeof(*a));
	if (!o)
		return false;
	if (call_args_check(o, background, a, &f))
		return true;
	reply_fault(req, &f);
	call_args_free(a);
	json_decref(o);
	a->o = NULL;
	return false;
}

/*
 * A call's timeout_seconds replaces the policy's limits.timeout for that
 * call (lib/call.c): no longer than the client's bound's (client_bound).
 * Its call_timeout is a default for calls that give none, not a bound.
 */
bool call_timeout_within(struct daemon *d, const struct corral_policy *bound,
			 const struct corral_call_opts *co, struct api_fault *f)
{
	uint64_t lim = bound ? bound->timeout_ms : 0;

	if (!lim || co->timeout_ms <= lim)
		return true;
	return api_fault(f, 403, "forbidden", "timeout_seconds: %s allows at "
			 "most %g seconds (got %g)", bound_name(d, bound)->policy,
			 lim / 1000.0, co->timeout_ms / 1000.0);
}

void exec_post(struct sandbox *sb, struct evhttp_request *req, const char *rest)
{
	struct corral_err err = { 0 };
	struct api_fault f;
	struct call_args a;
	struct pending *pd;
	struct corral_call *c;

	if (!call_args_read(req, false, &a))
		return;
	if (!call_timeout_within(sb->d, client_bound(sb->d, req), &a.co, &f)) {
		reply_fault(req, &f);
		goto out;
	}
	if (tty_upgrade_asked(req)) {
		if (a.co.tty)
			tty_session_start(sb, req, &a);
		else
			reply_error(req, 400, "bad_request", "Upgrade: corral-tty "
				    "is for a call with \"tty\": true");
		goto out;
	}
	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		reply_error(req, 500, "internal", "out of memory for the exec request");
		goto out;
	}
	pd->sb = sb;
	pd->req = req;
	pd->stream = a.stream;
	pd->base64 = a.co.output_base64;
	a.co.on_start = exec_start;
	a.co.on_output = exec_output;
	a.co.on_done = exec_done;
	a.co.arg = pd;
	if (corral_box_exec(sb->box, &a.co, &c, &err) < 0) {
		reply_err(req, &err);
		free(pd);
		goto out;
	}
	sandbox_count_exec(sb);
	pd->call = c;
	api_set_closecb(sb->d, req, pending_gone, pd);
	watch_client(pd, req);
	if (pd->stream) {
		evhttp_add_header(evhttp_request_get_output_headers(req),
				  "Content-Type", "application/x-ndjson");
		evhttp_send_reply_start(req, 200, "OK");
	}
out:
	call_args_free(&a);
	json_decref(a.o);
}
