/*
 * mcp.c - corral mcp: a Model Context Protocol server on stdio.
 *
 * One JSON-RPC message a line in, one a line out; stdout carries nothing
 * but the protocol, what we have to say goes to stderr.  jansson parses
 * every message and builds every answer.  The main thread reads stdin and
 * answers what is quick (initialize, ping, tools/list, server/discover);
 * each tools/call runs on a thread of its own (mcp_tools.c), so that a
 * notifications/cancelled read meanwhile can end it.  The session ends at
 * stdin's end or on SIGTERM/SIGINT/SIGHUP: calls in flight are cancelled,
 * the sandboxes it made on a shared daemon are removed (mcp_reaper.c; the
 * daemon removes them itself when the session dies otherwise: its lease,
 * mcp_lease.c), a private daemon is stopped and its directory removed.
 */
#include "mcp.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Newest first: an unknown version is answered with the first. */
static const char *const versions[] = {
	"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05",
};

static const char instructions[] =
"corral runs commands in Linux sandboxes: create one with sandbox_create, "
"run commands in it with exec (a command that fails is a normal result: read "
"exit_code, status and reason), move files with file_write/file_read/file_list, "
"and destroy it with sandbox_destroy when done.  Network access is only to "
"the hosts the sandbox's policy allows; sandbox_events shows what was denied.";

static const struct verb mcp_verb = {
	.name = "mcp",
	.no_json = true,
	.head =
"Usage: corral mcp [--policy FILE] [--policy-dir DIR]... [--private]\n"
"                  [--max-sandboxes N]\n"
"                  [--socket PATH | --url URL --token-file FILE [--ca-file FILE]\n"
"                   [--cert-file FILE --key-file FILE]]\n"
"\n"
"A Model Context Protocol server on stdin/stdout for agent harnesses: its\n"
"tools create sandboxes, run commands in them, move files, and read their\n"
"events.  It talks to a running `corral serve`, or, when none answers at the\n"
"default socket, starts a private daemon for the session (in a private\n"
"directory under $TMPDIR, removed when the session ends).  Its tools reach\n"
"only the sandboxes the session created: a shared daemon's others were made\n"
"under other policies.\n"
"\n"
"When the session ends (stdin's end, SIGTERM, SIGINT, SIGHUP), the sandboxes\n"
"it made and did not destroy are removed: a private daemon's with it, a\n"
"shared daemon's by the session before it exits (at most 60 s; a sandbox it\n"
"could not remove is named on stderr).  However the session dies (SIGKILL to\n"
"it and every process it started, its cgroup's kill, the OOM killer), a\n"
"shared daemon destroys them itself: they are bound to the session's lease,\n"
"a connection the kernel closes with the session.  A daemon older than\n"
"leases, or with none left, gets a reaper instead (said on stderr): a child\n"
"in a process group of its own, which removes them unless it is killed too;\n"
"remove what that leaves with `corral ls` and `corral rm`.\n"
"\n"
"Options:\n"
"  --policy FILE        the operator's policy: every sandbox starts from it,\n"
"                       and what a model asks for (hosts, limits, host\n"
"                       paths, workspace) may narrow it, never widen it.\n"
"                       Default: the built-in default policy (no network,\n"
"                       no host directories)\n"
"  --policy-dir DIR     where named policies are (\"policy\": \"NAME\" is\n"
"                       DIR/NAME.json); may be given more than once\n"
"  --private            always start a private daemon\n"
"  --max-sandboxes N    sandboxes the session holds at once, 1 to 1000\n"
"                       (default 16): each has the policy's limits, and a\n"
"                       sandbox_create past N is refused until one is\n"
"                       destroyed (or its TTL ends)\n",
	.tail =
"\n"
"Configuration, e.g. for Claude Code:\n"
"  claude mcp add corral -- corral mcp --policy /etc/corral/agent.json\n"
"or in an mcpServers entry:\n"
"  {\"command\": \"corral\", \"args\": [\"mcp\"]}\n"
"\n"
"Exit status: 0 when stdin ends or on SIGTERM/SIGINT/SIGHUP, 2 on a usage\n"
"error, 125 when no daemon can be reached or started, or a sandbox of the\n"
"session could not be removed at its end.\n",
};

enum { OPT_POLICY = OPT_OWN, OPT_POLICY_DIR, OPT_PRIVATE, OPT_MAX_SANDBOXES };

struct mcp_args {
	struct mcp *m;
	const char *policy;
	bool private;
};

static int on_option(void *arg, int opt, const char *val)
{
	struct mcp_args *a = arg;
	struct mcp_bounds *b = &a->m->b;
	char **dirs, *end;
	long n;

	switch (opt) {
	case OPT_POLICY:
		if (a->policy)
			return verb_usage_error(&mcp_verb, "--policy is given twice");
		a->policy = val;
		return 0;
	case OPT_POLICY_DIR:
		dirs = realloc(b->policy_dirs, (b->npolicy_dirs + 1) * sizeof(*dirs));
		if (!dirs)
			return out_of_memory("listing the policy directories");
		dirs[b->npolicy_dirs++] = (char *)val;
		b->policy_dirs = dirs;
		return 0;
	case OPT_PRIVATE:
		a->private = true;
		return 0;
	case OPT_MAX_SANDBOXES:
		errno = 0;
		n = strtol(val, &end, 10);
		if (errno || end == val || *end || n < 1 || n > MCP_SANDBOXES_MAX)
			return verb_usage_error(&mcp_verb, "--max-sandboxes: expected a number 1 to %d (got \"%s\")",
						MCP_SANDBOXES_MAX, val);
		a->m->owned.max = n;
		return 0;
	}
	return 2;
}

/* ---- output -------------------------------------------------------------- */

size_t mcp_send(struct mcp *m, json_t *msg)
{
	size_t sent = 0;
	char *text;

	if (!msg)
		return 0;
	if (!json_object_get(msg, "jsonrpc"))
		json_object_set_new(msg, "jsonrpc", json_string("2.0"));
	text = json_dumps(msg, JSON_COMPACT);
	json_decref(msg);
	if (!text) {
		cli_error("mcp: out of memory for an answer");
		return 0;
	}
	pthread_mutex_lock(&m->out_lock);
	if (!m->stdout_broken &&
	    (fputs(text, stdout) == EOF || fputc('\n', stdout) == EOF ||
	     fflush(stdout) == EOF)) {
		cli_error("mcp: stdout: %s", strerror(errno));
		m->stdout_broken = true;
	} else if (!m->stdout_broken) {
		sent = strlen(text) + 1;
	}
	pthread_mutex_unlock(&m->out_lock);
	free(text);
	return sent;
}

static void send_error(struct mcp *m, json_t *id, int code, const char *msg)
{
	mcp_send(m, json_pack("{s:O,s:{s:i,s:s}}", "id", id ? id : json_null(),
			      "error", "code", code, "message", msg));
}

static void send_result(struct mcp *m, json_t *id, json_t *result)
{
	if (!result) {
		send_error(m, id, -32603, "out of memory");
		return;
	}
	mcp_send(m, json_pack("{s:O,s:o}", "id", id, "result", result));
}

size_t mcp_progress(struct mcp_call *call, const char *message, size_t len)
{
	json_t *msg;

	if (!call->progress_token || atomic_load(&call->cancelled))
		return 0;
	call->progress += 1;
	msg = json_pack("{s:s,s:{s:O,s:f,s:s#}}", "method", "notifications/progress",
			"params", "progressToken", call->progress_token, "progress",
			call->progress, "message", message, len);
	return mcp_send(call->m, msg);
}

/* ---- the methods ------------------------------------------------------------ */

static json_t *capabilities(void)
{
	return json_pack("{s:{s:b}}", "tools", "listChanged", 0);
}

static json_t *server_info(void)
{
	return json_pack("{s:s,s:s,s:s}", "name", "corral", "title", "corral sandboxes",
			 "version", CORRAL_VERSION);
}

static json_t *initialize(const json_t *params)
{
	const char *asked = json_string_value(json_object_get(params, "protocolVersion"));
	const char *v = versions[0];

	for (size_t i = 0; asked && i < sizeof(versions) / sizeof(versions[0]); i++)
		if (!strcmp(asked, versions[i]))
			v = versions[i];
	return json_pack("{s:s,s:o,s:o,s:s}", "protocolVersion", v, "capabilities",
			 capabilities(), "serverInfo", server_info(), "instructions",
			 instructions);
}

/*
 * The 2026-07-28 revision's discovery: the versions we speak (all of the
 * initialize era, so a newer client falls back to the handshake), what we
 * offer, who we are.
 */
static json_t *discover(void)
{
	json_t *list = json_array();

	for (size_t i = 0; list && i < sizeof(versions) / sizeof(versions[0]); i++)
		json_array_append_new(list, json_string(versions[i]));
	return json_pack("{s:s,s:o,s:o,s:o,s:s}", "resultType", "complete",
			 "supportedVersions", list, "capabilities", capabilities(),
			 "serverInfo", server_info(), "instructions", instructions);
}

/* ---- tools/call on a thread ------------------------------------------------- */

static void *call_thread(void *arg)
{
	struct mcp_call *call = arg;
	struct mcp *m = call->m;
	char *why = NULL;
	int code = 0;
	json_t *result = mcp_tools_call(call, &code, &why);

	/* a cancelled request is not answered (the client forgot it) */
	if (!atomic_load(&call->cancelled)) {
		if (result)
			send_result(m, call->id, result);
		else
			send_error(m, call->id, code ? code : -32603,
				   why ? why : "out of memory");
		result = NULL;
	}
	json_decref(result);
	free(why);
	/* the answer's copies are gone: the next big one may start */
	if (call->big)
		mcp_big_leave(m);
	pthread_mutex_lock(&m->calls_lock);
	json_decref(call->id);
	json_decref(call->params);
	json_decref(call->progress_token);
	call->id = call->params = call->progress_token = NULL;
	call->used = false;
	m->ncalls--;
	pthread_cond_broadcast(&m->calls_done);
	pthread_mutex_unlock(&m->calls_lock);
	return NULL;
}

static struct mcp_call *find_call(struct mcp *m, const json_t *id)
{
	for (size_t i = 0; i < MCP_CALLS_MAX; i++)
		if (m->calls[i].used && json_equal(m->calls[i].id, (json_t *)id))
			return &m->calls[i];
	return NULL;
}

static const char *type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT: return "an object";
	case JSON_ARRAY: return "an array";
	case JSON_STRING: return "a string";
	case JSON_INTEGER: return "an integer";
	case JSON_REAL: return "a number with a fraction or exponent";
	case JSON_TRUE:
	case JSON_FALSE: return "a boolean";
	case JSON_NULL: return "null";
	}
	return "unknown";
}

/*
 * params._meta.progressToken, as the spec types it (the TypeScript SDK's
 * ProgressTokenSchema: string | integer): it is echoed in every progress
 * notification, so nothing else, and nothing long, is taken.  false with
 * the -32602 message in why when it is not so.
 */
static bool meta_ok(const json_t *params, char *why, size_t len)
{
	const json_t *meta = json_object_get(params, "_meta");
	const json_t *token = json_object_get(meta, "progressToken");

	if (meta && !json_is_object(meta))
		snprintf(why, len, "params._meta must be an object, not %s",
			 type_name(meta));
	else if (token && !json_is_string(token) && !json_is_integer(token))
		snprintf(why, len, "params._meta.progressToken must be a string or an integer, not %s",
			 type_name(token));
	else if (json_string_length(token) > MCP_PROGRESS_TOKEN_MAX)
		snprintf(why, len, "params._meta.progressToken is a string of %zu bytes: at most %d",
			 json_string_length(token), MCP_PROGRESS_TOKEN_MAX);
	else
		return true;
	return false;
}

static void start_call(struct mcp *m, json_t *id, json_t *params)
{
	struct mcp_call *call = NULL;
	pthread_attr_t attr;
	const char *err = NULL;
	char why[160];
	int code = 0;

	if (!json_is_object(params) || !json_is_string(json_object_get(params, "name")) ||
	    (json_object_get(params, "arguments") &&
	     !json_is_object(json_object_get(params, "arguments")))) {
		send_error(m, id, -32602, "tools/call needs params {\"name\": TOOL, \"arguments\": {...}}");
		return;
	}
	if (!meta_ok(params, why, sizeof(why))) {
		send_error(m, id, -32602, why);
		return;
	}
	pthread_mutex_lock(&m->calls_lock);
	if (find_call(m, id)) {
		err = "a call with this id is still running";
		code = -32600;
	}
	for (size_t i = 0; !err && !call && i < MCP_CALLS_MAX; i++)
		if (!m->calls[i].used)
			call = &m->calls[i];
	if (!err && !call) {
		err = "too many tool calls at once (32); wait for one to end";
		code = -32000;
	}
	if (call) {
		*call = (struct mcp_call){
			.m = m, .id = json_incref(id), .params = json_incref(params),
			.progress_token = json_incref(json_object_get(
				json_object_get(params, "_meta"), "progressToken")),
			.used = true,
		};
		m->ncalls++;
	}
	pthread_mutex_unlock(&m->calls_lock);
	if (err) {
		send_error(m, id, code, err);
		return;
	}
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&call->thread, &attr, call_thread, call)) {
		pthread_mutex_lock(&m->calls_lock);
		json_decref(call->id);
		json_decref(call->params);
		json_decref(call->progress_token);
		call->used = false;
		m->ncalls--;
		pthread_mutex_unlock(&m->calls_lock);
		send_error(m, id, -32603, "cannot start a thread for the call");
	}
	pthread_attr_destroy(&attr);
}

static void cancel_call(struct mcp *m, const json_t *params)
{
	struct mcp_call *call;

	pthread_mutex_lock(&m->calls_lock);
	call = find_call(m, json_object_get(params, "requestId"));
	if (call)
		atomic_store(&call->cancelled, true);
	pthread_mutex_unlock(&m->calls_lock);
}

/* ---- one message ------------------------------------------------------------ */

static void on_notification(struct mcp *m, const char *method, json_t *params)
{
	if (!strcmp(method, "notifications/cancelled"))
		cancel_call(m, params);
	/* notifications/initialized and the rest need nothing of us */
}

static void on_request(struct mcp *m, json_t *id, const char *method,
		       json_t *params)
{
	if (params && !json_is_object(params)) {
		send_error(m, id, -32602, "params must be an object");
		return;
	}
	if (!strcmp(method, "initialize"))
		send_result(m, id, initialize(params));
	else if (!strcmp(method, "ping"))
		send_result(m, id, json_object());
	else if (!strcmp(method, "server/discover"))
		send_result(m, id, discover());
	else if (!strcmp(method, "tools/list"))
		send_result(m, id, mcp_tools_list());
	else if (!strcmp(method, "tools/call"))
		start_call(m, id, params);
	else
		send_error(m, id, -32601, "method not found");
}

/* A string value holding NUL, which C strings would cut short. */
static bool holds_nul(json_t *v)
{
	const char *key;
	json_t *sub;
	size_t i;

	if (json_is_string(v))
		return strlen(json_string_value(v)) != json_string_length(v);
	json_object_foreach(v, key, sub)
		if (holds_nul(sub))
			return true;
	json_array_foreach(v, i, sub)
		if (holds_nul(sub))
			return true;
	return false;
}

/*
 * A number past int64 fails the whole line in jansson, and a parse error
 * has no id to be answered by: the client waited for its request's
 * answer.  Read again with every integer as a real, which takes any
 * number, for the id alone; the request is refused by it.  1 if answered.
 */
static int answer_overflow(struct mcp *m, const char *line, size_t len,
			   const json_error_t *jerr)
{
	json_t *msg, *id, *answer_id = NULL;
	double v;

	if (json_error_code(jerr) != json_error_numeric_overflow)
		return 0;
	msg = json_loadb(line, len, JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL |
			 JSON_ALLOW_NUL, NULL);
	id = json_object_get(msg, "id");
	if (json_is_string(id)) {
		answer_id = json_incref(id);
	} else if (json_is_real(id)) {
		v = json_real_value(id);
		/*
		 * An id that was an integer in int64's range (2^53 is exact);
		 * the range first: a double past int64 cast to one is
		 * undefined (an id of 2^63 or 1e30 in a line of an overflow).
		 */
		if (v >= -9007199254740992.0 && v <= 9007199254740992.0 &&
		    v == (double)(json_int_t)v)
			answer_id = json_integer((json_int_t)v);
	}
	if (answer_id) {
		char why[128];

		snprintf(why, sizeof(why), "invalid params: a number past 2^63 - 1 "
			 "at column %d: no value here takes one", jerr->column);
		send_error(m, answer_id, -32602, why);
	}
	json_decref(answer_id);
	json_decref(msg);
	return answer_id != NULL;
}

static void on_message(struct mcp *m, const char *line, size_t len)
{
	json_error_t jerr;
	/*
	 * "\u0000" is JSON: read, so that the request it is in is answered
	 * by its id (a client waits for that id), then refused whole.
	 */
	json_t *msg = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY |
				 JSON_ALLOW_NUL, &jerr);
	json_t *id, *method;

	if (!msg) {
		if (!answer_overflow(m, line, len, &jerr))
			send_error(m, NULL, -32700, "parse error: not one JSON value "
				   "on the line");
		return;
	}
	if (json_is_array(msg)) {
		/* MCP 2025-06-18 removed JSON-RPC batches */
		send_error(m, NULL, -32600, "batches are not supported: send one message a line");
		json_decref(msg);
		return;
	}
	id = json_object_get(msg, "id");
	method = json_object_get(msg, "method");
	if (json_is_object(msg) && !method && id &&
	    (json_object_get(msg, "result") || json_object_get(msg, "error"))) {
		json_decref(msg);	/* an answer: we never asked anything */
		return;
	}
	if (!json_is_object(msg) ||
	    !json_is_string(json_object_get(msg, "jsonrpc")) ||
	    strcmp(json_string_value(json_object_get(msg, "jsonrpc")), "2.0") ||
	    !json_is_string(method) ||
	    (id && !json_is_string(id) && !json_is_integer(id))) {
		send_error(m, json_is_string(id) || json_is_integer(id) ? id : NULL,
			   -32600, "invalid request: {\"jsonrpc\": \"2.0\", \"id\": string or integer, \"method\": string}");
		json_decref(msg);
		return;
	}
	if (holds_nul(msg)) {
		if (id)
			send_error(m, id, -32602, "invalid params: a string holds NUL "
				   "(\\u0000); send such bytes as base64");
		json_decref(msg);
		return;
	}
	if (id)
		on_request(m, id, json_string_value(method), json_object_get(msg, "params"));
	else
		on_notification(m, json_string_value(method), json_object_get(msg, "params"));
	json_decref(msg);
}

/* ---- the session --------------------------------------------------------- */

struct line_buf {
	char *buf;
	size_t len, cap;
	bool skipping;		/* the rest of a line too long to keep */
};

/* The lines in b, one message each; keeps the partial last one. */
static void feed(struct mcp *m, struct line_buf *b)
{
	size_t start = 0;
	char *nl;

	while ((nl = memchr(b->buf + start, '\n', b->len - start))) {
		size_t n = nl - (b->buf + start);

		if (b->skipping)
			b->skipping = false;
		else if (n && !(n == 1 && b->buf[start] == '\r'))
			on_message(m, b->buf + start, n);
		start += n + 1;
	}
	memmove(b->buf, b->buf + start, b->len - start);
	b->len -= start;
	/*
	 * One answer a message, however long: the rest of one refused is
	 * dropped as it comes, not kept up to MCP_LINE_MAX and refused again
	 * (a line of 40 MiB had five answers, each with a null id).
	 */
	if (b->skipping) {
		b->len = 0;
	} else if (b->len >= MCP_LINE_MAX) {
		send_error(m, NULL, -32700, "parse error: a message longer than 8 MiB");
		b->len = 0;
		b->skipping = true;
	}
}

/*
 * Until stdin ends (1) or SIGTERM/SIGINT/SIGHUP comes (0); -1 on a read
 * error.
 */
static int session(struct mcp *m, const sigset_t *unblocked)
{
	struct line_buf b = { .cap = 65536 };
	struct pollfd pfd = { .fd = STDIN_FILENO, .events = POLLIN };
	int ret = 0;

	b.buf = malloc(b.cap);
	if (!b.buf)
		return out_of_memory("reading the client's messages"), -1;
	for (;;) {
		ssize_t n;

		if (ppoll(&pfd, 1, NULL, unblocked) < 0) {
			if (errno == EINTR)
				break;		/* SIGTERM, SIGINT, SIGHUP */
			cli_error("mcp: poll: %s", strerror(errno));
			ret = -1;
			break;
		}
		if (b.cap - b.len < 4096) {
			char *p = realloc(b.buf, b.cap * 2);

			if (!p) {
				out_of_memory("growing the message buffer");
				ret = -1;
				break;
			}
			b.buf = p;
			b.cap *= 2;
		}
		n = read(STDIN_FILENO, b.buf + b.len, b.cap - b.len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			cli_error("mcp: stdin: %s", strerror(errno));
			ret = -1;
			break;
		}
		if (n == 0) {
			if (b.len)		/* a last line without its newline */
				on_message(m, b.buf, b.len);
			ret = 1;
			break;
		}
		b.len += n;
		feed(m, &b);
	}
	free(b.buf);
	return ret;
}

/* Wait up to secs for the calls in flight to end; 0 when they all did. */
static int wait_calls(struct mcp *m, int secs)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += secs;
	while (m->ncalls &&
	       pthread_cond_timedwait(&m->calls_done, &m->calls_lock, &until) == 0)
		;
	return m->ncalls ? -1 : 0;
}

/*
 * At stdin's end the calls in flight get MCP_EOF_GRACE seconds to answer
 * (`printf REQUEST | corral mcp` wants its answer); after that, or on a
 * signal at once, they are cancelled and the threads waited for (bounded).
 */
static void end_calls(struct mcp *m, bool eof)
{
	pthread_mutex_lock(&m->calls_lock);
	if (eof && wait_calls(m, MCP_EOF_GRACE) == 0) {
		pthread_mutex_unlock(&m->calls_lock);
		return;
	}
	for (size_t i = 0; i < MCP_CALLS_MAX; i++)
		if (m->calls[i].used)
			atomic_store(&m->calls[i].cancelled, true);
	if (wait_calls(m, 15) < 0)
		cli_error("mcp: %zu call(s) did not end within 15 s", m->ncalls);
	pthread_mutex_unlock(&m->calls_lock);
}

static void on_signal(int sig)
{
	(void)sig;	/* ppoll returns EINTR: the session ends */
}

static int watch_signals(sigset_t *unblocked)
{
	struct sigaction sa = { .sa_handler = on_signal };
	sigset_t block;
	int sigs[] = { SIGTERM, SIGINT, SIGHUP };

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&block);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		sigaddset(&block, sigs[i]);
		if (sigaction(sigs[i], &sa, NULL) < 0)
			return -1;
	}
	/* blocked everywhere but in ppoll: the threads made later inherit it */
	if (pthread_sigmask(SIG_BLOCK, &block, unblocked))
		return -1;
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigdelset(unblocked, sigs[i]);
	return 0;
}

int cmd_mcp(int argc, char **argv)
{
	static const struct option opts[] = {
		CONN_OPTIONS,
		{ "policy", required_argument, NULL, OPT_POLICY },
		{ "policy-dir", required_argument, NULL, OPT_POLICY_DIR },
		{ "private", no_argument, NULL, OPT_PRIVATE },
		{ "max-sandboxes", required_argument, NULL, OPT_MAX_SANDBOXES },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static struct mcp m;
	struct mcp_args a = { .m = &m };
	sigset_t unblocked;
	int code, r = 0;

	m.owned.reaper_fd = -1;
	m.owned.max = MCP_SANDBOXES_DEFAULT;
	pthread_mutex_init(&m.out_lock, NULL);
	pthread_mutex_init(&m.calls_lock, NULL);
	pthread_mutex_init(&m.owned.lock, NULL);
	pthread_mutex_init(&m.big_lock, NULL);
	pthread_cond_init(&m.big_free, NULL);
	pthread_cond_init(&m.calls_done, NULL);
	code = verb_parse(&mcp_verb, opts, "h", argc, argv, &m.d.conn, on_option, &a);
	if (code == HELP_SHOWN)
		return 0;
	if (!code && optind < argc)
		code = verb_usage_error(&mcp_verb, "unexpected argument \"%s\"", argv[optind]);
	if (!code)
		code = mcp_bounds_load(&m.b, a.policy);
	if (code) {
		mcp_bounds_free(&m.b);
		return code;
	}
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		cli_error("mcp: libcurl could not be initialised");
		mcp_bounds_free(&m.b);
		return EXIT_CORRAL;
	}
	/* before any thread and with signals as they were: it may fork */
	code = mcp_daemon_open(&m.d, &mcp_verb, a.private);
	/* a private daemon takes the sandboxes with it; a shared one needs a
	 * lease, or the reaper (forked: still before any thread) */
	if (!code && !m.d.pid)
		code = mcp_reaper_start(&m.owned, &m.d);
	if (!code && watch_signals(&unblocked) < 0) {
		cli_error("mcp: cannot watch signals: %s", strerror(errno));
		code = EXIT_CORRAL;
	}
	if (!code && (r = session(&m, &unblocked)) < 0)
		code = EXIT_CORRAL;
	end_calls(&m, r == 1);
	if (mcp_reaper_finish(&m.owned) < 0 && !code)
		code = EXIT_CORRAL;
	mcp_daemon_close(&m.d);
	mcp_bounds_free(&m.b);
	mcp_owned_free(&m.owned);
	curl_global_cleanup();
	return code;
}
