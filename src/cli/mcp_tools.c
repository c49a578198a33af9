/*
 * mcp_tools.c - the tools of `corral mcp`, each one or two requests of
 * docs/API.md: the table (names, descriptions a model can act on, input and
 * output JSON Schemas, annotations) and what each one does.
 *
 * The rule for results: a tool that did its job answers a result, whatever
 * the command it ran did (a non-zero exit, a timeout, a denied connection
 * are the command's story, told in structuredContent and in the text);
 * isError is for the tool failing: no such sandbox, bad arguments, the
 * daemon refusing, the operator's policy refusing.
 *
 * Host paths are the operator's: no tool takes one (an export writes only
 * onto the workspace the operator's policy offered, or answers a patch).
 */
#include "mcp.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PROGRESS_CHUNK_MAX	4096	/* of output a progress message carries */
#define EVENTS_DEFAULT		50
#define EVENTS_MAX		1000
#define FOLLOW_DEFAULT_S	30	/* process_output follow:true, at most */
#define OUTPUT_ANSWER_MAX	(8u << 20)	/* of a stream in one process_output */

/* ---- results ------------------------------------------------------------- */

static json_t *text_content_n(const char *text, size_t len)
{
	return json_pack("[{s:s,s:s#}]", "type", "text", "text", text, len);
}

static json_t *text_content(const char *text)
{
	return text_content_n(text, strlen(text));
}

/*
 * "stdout: DATA" as progress: the first PROGRESS_CHUNK_MAX bytes of a
 * stream's piece (len bytes of UTF-8, NUL included), cut before a
 * character, never inside one (a message that is not UTF-8 is not sent).
 *
 * A call's progress carries at most the operator's limits.output, counted
 * as the lines written (escapes and envelopes too; one notification more
 * at most): the daemon's stream goes on past the result's cap, and a
 * program that writes a byte at a time makes a notification of each, so
 * the sandbox would otherwise decide how much the client reads (`yes` sent
 * it 4 MB a second, a byte a write 40000 notifications a second).  One
 * last notification says where it stopped; the result holds the output
 * as always.
 */
static void progress_output(struct mcp_call *c, const char *type,
			    const char *data, size_t len)
{
	size_t n = len, tl = strlen(type);
	char *msg;

	if (!c->progress_token || c->progress_ended)
		return;
	if (c->progress_bytes >= c->m->b.limit.output_bytes) {
		char note[160];

		c->progress_ended = true;
		snprintf(note, sizeof(note), "%s: no more output as progress (%llu bytes "
			 "sent, the operator's limits.output); the result holds it",
			 type, (unsigned long long)c->progress_bytes);
		mcp_progress(c, note, strlen(note));
		return;
	}
	if (n > PROGRESS_CHUNK_MAX) {
		n = PROGRESS_CHUNK_MAX;
		while (n && ((unsigned char)data[n] & 0xC0) == 0x80)
			n--;
	}
	msg = malloc(tl + 2 + n);
	if (!msg)
		return;
	memcpy(msg, type, tl);
	memcpy(msg + tl, ": ", 2);
	memcpy(msg + tl + 2, data, n);
	c->progress_bytes += mcp_progress(c, msg, tl + 2 + n);
	free(msg);
}

static json_t *tool_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static json_t *tool_error(const char *fmt, ...)
{
	va_list ap;
	char *s;
	json_t *r;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	r = json_pack("{s:o,s:b}", "content", text_content(s ? s : "out of memory"),
		      "isError", 1);
	free(s);
	return r;
}

/* structured as the result, and as its JSON text; takes structured. */
static json_t *tool_ok(json_t *structured)
{
	char *text = json_dumps(structured, JSON_COMPACT | JSON_INDENT(0));
	json_t *r;

	if (!text) {
		json_decref(structured);
		return NULL;
	}
	r = json_pack("{s:o,s:o}", "content", text_content(text),
		      "structuredContent", structured);
	free(text);
	return r;
}

/* The daemon's {"error", "detail"} answer as the tool's failure. */
static json_t *daemon_refused(const struct mcp_http *h)
{
	json_t *o = json_loadb(h->buf ? h->buf : "", h->len, JSON_ALLOW_NUL, NULL);
	const char *err = json_string_value(json_object_get(o, "error"));
	const char *detail = json_string_value(json_object_get(o, "detail"));
	json_t *r;

	r = tool_error("the corral daemon refused (HTTP %ld %s): %s", h->status,
		       err ? err : "error", detail ? detail :
		       (h->buf && !o ? h->buf : "no detail"));
	json_decref(o);
	return r;
}

/* ---- arguments ----------------------------------------------------------- */

struct args {
	const json_t *a;
	struct mcp *m;
	char *why;			/* the first bad argument, said */
};

static void bad(struct args *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bad(struct args *g, const char *fmt, ...)
{
	va_list ap;

	if (g->why)
		return;
	va_start(ap, fmt);
	if (vasprintf(&g->why, fmt, ap) < 0)
		g->why = NULL;
	va_end(ap);
}

static const char *arg_str(struct args *g, const char *key, bool required)
{
	json_t *v = json_object_get(g->a, key);

	if (!v && required)
		bad(g, "%s is required", key);
	else if (v && !json_is_string(v))
		bad(g, "%s must be a string", key);
	return json_string_value(v);
}

/* ---- the session's sandboxes --------------------------------------------- */

int mcp_owned_add(struct mcp_owned *o, const char *id)
{
	char *dup = strdup(id);
	struct mcp_box *grown;
	int r = 0;

	pthread_mutex_lock(&o->lock);
	/* first: even a sandbox the model cannot reach is removed at the end */
	mcp_reaper_tell(o, '+', id);
	if (dup && o->n == o->cap) {
		grown = realloc(o->boxes, (o->cap ? o->cap * 2 : 16) * sizeof(*grown));
		if (grown) {
			o->boxes = grown;
			o->cap = o->cap ? o->cap * 2 : 16;
		}
	}
	if (dup && o->n < o->cap)
		o->boxes[o->n++] = (struct mcp_box){ .id = dup, .seq = o->seq++ };
	else
		r = -1;
	pthread_mutex_unlock(&o->lock);
	if (r < 0)
		free(dup);
	return r;
}

void mcp_owned_gone(struct mcp_owned *o, const char *id)
{
	pthread_mutex_lock(&o->lock);
	mcp_reaper_tell(o, '-', id);
	for (size_t i = 0; i < o->n; i++)
		if (!strcmp(o->boxes[i].id, id))
			o->boxes[i].gone = true;
	pthread_mutex_unlock(&o->lock);
}

bool mcp_owned_has(struct mcp_owned *o, const char *id)
{
	bool has = false;

	pthread_mutex_lock(&o->lock);
	for (size_t i = 0; !has && i < o->n; i++)
		has = !strcmp(o->boxes[i].id, id);
	pthread_mutex_unlock(&o->lock);
	return has;
}

void mcp_owned_free(struct mcp_owned *o)
{
	for (size_t i = 0; i < o->n; i++)
		free(o->boxes[i].id);
	free(o->boxes);
	o->boxes = NULL;
	o->n = o->cap = 0;
}

static json_t *call_json(struct mcp_call *c, const char *method, const char *path,
			 const json_t *body, json_t **out);

/* The session's sandboxes not known gone, and those being made; o->lock held. */
static size_t owned_alive(const struct mcp_owned *o)
{
	size_t n = o->making;

	for (size_t i = 0; i < o->n; i++)
		n += !o->boxes[i].gone;
	return n;
}

static bool listed(const json_t *list, const char *id)
{
	const json_t *v;
	size_t i;

	json_array_foreach(list, i, v)
		if (!strcmp(json_string_value(json_object_get(v, "id")) ?: "", id))
			return true;
	return false;
}

/*
 * What the daemon removed itself (a TTL's end, a lease's, its own
 * shutdown of one) frees the place too: the sandboxes recorded before
 * the list was asked for and absent from it are gone.  Those recorded
 * since may be missing from it only because they were made after it.
 */
static json_t *owned_refresh(struct mcp_call *c)
{
	struct mcp_owned *o = &c->m->owned;
	json_t *answer, *list, *err;
	uint64_t before;

	pthread_mutex_lock(&o->lock);
	before = o->seq;
	pthread_mutex_unlock(&o->lock);
	err = call_json(c, "GET", "/v1/sandboxes", NULL, &answer);
	if (err)
		return err;
	list = json_object_get(answer, "sandboxes");
	if (!json_is_array(list)) {
		json_decref(answer);
		return tool_error("the daemon's list of sandboxes has no \"sandboxes\" array");
	}
	pthread_mutex_lock(&o->lock);
	for (size_t i = 0; i < o->n; i++)
		if (o->boxes[i].seq < before && !listed(list, o->boxes[i].id))
			o->boxes[i].gone = true;
	pthread_mutex_unlock(&o->lock);
	json_decref(answer);
	return NULL;
}

/*
 * A place for one more sandbox, taken before its create is sent (calls
 * run at once: 32 creates must not all pass one count), given back by
 * owned_made.  NULL, or the tool error to return.
 */
static json_t *owned_place(struct mcp_call *c)
{
	struct mcp_owned *o = &c->m->owned;
	size_t alive;
	json_t *err;

	for (int pass = 0; pass < 2; pass++) {
		pthread_mutex_lock(&o->lock);
		alive = owned_alive(o);
		if (alive < o->max)
			o->making++;
		pthread_mutex_unlock(&o->lock);
		if (alive < o->max)
			return NULL;
		if (pass == 0 && (err = owned_refresh(c)))
			return err;
	}
	return tool_error("refused: this session holds %zu sandboxes (those being made included), "
			  "the operator's limit (corral mcp --max-sandboxes %zu): destroy one "
			  "with sandbox_destroy first, or run the command in one it has",
			  alive, o->max);
}

static void owned_made(struct mcp_owned *o)
{
	pthread_mutex_lock(&o->lock);
	o->making--;
	pthread_mutex_unlock(&o->lock);
}

/* A sandbox id of this session: the daemon's other sandboxes are not the model's. */
static const char *arg_id(struct args *g)
{
	const char *id = arg_str(g, "sandbox_id", true);

	if (id && !client_valid_id(id))
		bad(g, "sandbox_id: \"%.64s\" is not a sandbox id (sb-..., from sandbox_create or sandbox_list)",
		    id);
	else if (id && !mcp_owned_has(&g->m->owned, id))
		bad(g, "sandbox_id: no sandbox %s in this session (sandbox_create makes one, sandbox_list lists this session's)",
		    id);
	return id;
}

static json_int_t arg_int(struct args *g, const char *key, bool required,
			  json_int_t min, json_int_t max, json_int_t dflt)
{
	json_t *v = json_object_get(g->a, key);

	if (!v) {
		if (required)
			bad(g, "%s is required", key);
		return dflt;
	}
	if (!json_is_integer(v) || json_integer_value(v) < min ||
	    json_integer_value(v) > max) {
		bad(g, "%s must be an integer from %lld to %lld", key, (long long)min,
		    (long long)max);
		return dflt;
	}
	return json_integer_value(v);
}

static bool arg_bool(struct args *g, const char *key)
{
	json_t *v = json_object_get(g->a, key);

	if (v && !json_is_boolean(v))
		bad(g, "%s must be true or false", key);
	return json_is_true(v);
}

/* ---- the daemon ------------------------------------------------------------- */

/*
 * A request whose answer is a JSON object: the object (*out), or a tool
 * error to return.  body may be NULL.  cancel: the flag that cuts it
 * short, or NULL for a request that must be seen to its answer.
 */
/*
 * One request whose answer the caller reads from h: NULL once the daemon
 * answered 2xx, else the tool error to return.  path NULL: out of memory
 * (the caller's allocation of it failed).  The caller frees h either way.
 */
static json_t *daemon_ask(struct mcp_call *c, const char *method, const char *path,
			  const char *body, size_t len, const char *type, struct mcp_http *h)
{
	char *why = NULL;
	json_t *err = NULL;

	if (!path)
		return tool_error("out of memory");
	if (mcp_http_do(&c->m->d, method, path, body, len, type, h, &why) < 0)
		err = tool_error("%s", why);
	else if (h->status < 200 || h->status >= 300)
		err = daemon_refused(h);
	free(why);
	return err;
}

/* The answer's object (*out), or the tool error to return. */
static json_t *answer_object(const struct mcp_http *h, json_t **out)
{
	*out = json_loadb(h->buf ? h->buf : "", h->len, JSON_ALLOW_NUL, NULL);
	if (json_is_object(*out))
		return NULL;
	json_decref(*out);
	*out = NULL;
	return tool_error("the daemon's answer is not a JSON object");
}

static json_t *call_json_cancel(struct mcp_call *c, atomic_bool *cancel, const char *method,
				const char *path, const json_t *body, json_t **out)
{
	struct mcp_http h = { .cancel = cancel };
	char *text = NULL;
	json_t *err;

	*out = NULL;
	if (body && !(text = json_dumps(body, JSON_COMPACT)))
		return tool_error("out of memory");
	err = daemon_ask(c, method, path, text, text ? strlen(text) : 0,
			 text ? "Content-Type: application/json" : NULL, &h);
	if (!err)
		err = answer_object(&h, out);
	mcp_http_free(&h);
	free(text);
	return err;
}

/* Bytes sent as they are (a file, stdin, an archive); the answer is an object. */
static json_t *send_bytes(struct mcp_call *c, const char *method, const char *path,
			  const char *bytes, size_t len, const char *type)
{
	struct mcp_http h = { .cancel = &c->cancelled };
	json_t *o, *err = daemon_ask(c, method, path, bytes, len, type, &h);

	if (!err)
		err = answer_object(&h, &o);
	mcp_http_free(&h);
	return err ? err : tool_ok(o);
}

static json_t *call_json(struct mcp_call *c, const char *method, const char *path,
			 const json_t *body, json_t **out)
{
	return call_json_cancel(c, &c->cancelled, method, path, body, out);
}

/* A whole answer that is an object, as the tool's result. */
static json_t *simple(struct mcp_call *c, const char *method, char *path,
		      const json_t *body)
{
	json_t *o, *err = call_json(c, method, path, body, &o);

	free(path);
	return err ? err : tool_ok(o);
}

/* ---- sandboxes -------------------------------------------------------------- */

static json_t *t_create(struct mcp_call *c, struct args *g)
{
	const char *workspace = arg_str(g, "workspace", false);
	json_int_t ttl = arg_int(g, "ttl_seconds", false, 0, 30LL * 24 * 3600, 0);
	json_t *labels = json_object_get(g->a, "labels"), *policy, *body, *r;
	struct mcp_pin pin;
	char *why = NULL, inode[64];

	if (labels && !json_is_object(labels))
		bad(g, "labels must be an object of strings");
	if (g->why)
		return NULL;
	policy = mcp_bounds_policy(&c->m->b, g->a, workspace, &pin, &why);
	if (!policy) {
		r = tool_error("refused: %s", why ? why : "out of memory");
		free(why);
		return r;
	}
	body = json_pack("{s:o}", "policy", policy);
	/*
	 * The directory judged, held (pin.fd) until the daemon has answered:
	 * the daemon must find that very inode at that path, or refuse.
	 */
	snprintf(inode, sizeof(inode), "%llu:%llu", (unsigned long long)pin.dev,
		 (unsigned long long)pin.ino);
	if (body && pin.fd >= 0 &&
	    (json_object_set_new(body, "workspace", json_string(pin.path)) < 0 ||
	     json_object_set_new(body, "workspace_inode", json_string(inode)) < 0)) {
		json_decref(body);
		body = NULL;
	}
	if (body && ttl)
		json_object_set_new(body, "ttl_seconds", json_integer(ttl));
	/* bound by the daemon before it answers: no instant when a kill leaks it */
	if (body && c->m->owned.lease[0] &&
	    json_object_set_new(body, "lease", json_string(c->m->owned.lease)) < 0) {
		json_decref(body);
		body = NULL;
	}
	if (body && labels)
		json_object_set(body, "labels", labels);
	if (!body) {
		mcp_pin_close(&pin);
		return tool_error("out of memory");
	}
	if ((r = owned_place(c))) {
		mcp_pin_close(&pin);
		json_decref(body);
		return r;
	}
	{
		/*
		 * Not cut short by a cancel: the daemon makes the sandbox
		 * whether or not we wait, and one whose id we never read is
		 * no one's to remove (without a lease, the session's end and
		 * its reaper know only what they were told).  Waited for and
		 * recorded; a cancelled call's answer is not sent (mcp.c).
		 */
		json_t *o;
		const char *id;
		int recorded;

		r = call_json_cancel(c, NULL, "POST", "/v1/sandboxes", body, &o);
		id = json_string_value(json_object_get(o, "id"));
		mcp_pin_close(&pin);
		json_decref(body);
		/* recorded first, then its place given back: never counted out */
		recorded = !r && id ? mcp_owned_add(&c->m->owned, id) : -1;
		owned_made(&c->m->owned);
		if (r)
			return r;
		/* made, but unreachable to the model: better said than left */
		if (recorded < 0) {
			json_decref(o);
			return tool_error("the sandbox %s was made but cannot be recorded as this session's (out of memory)",
					  id ? id : "?");
		}
		return tool_ok(o);
	}
}

/* The daemon's list without the sandboxes of others; takes r. */
static json_t *own_only(struct mcp_call *c, json_t *r)
{
	json_t *sc = json_object_get(r, "structuredContent");
	json_t *list = json_object_get(sc, "sandboxes"), *mine, *v;
	size_t i;

	if (!json_is_array(list))
		return r;
	mine = json_array();
	json_array_foreach(list, i, v) {
		const char *id = json_string_value(json_object_get(v, "id"));

		if (mine && id && mcp_owned_has(&c->m->owned, id))
			json_array_append(mine, v);
	}
	json_decref(r);
	if (!mine)
		return tool_error("out of memory");
	return tool_ok(json_pack("{s:o}", "sandboxes", mine));
}

/* labels {"k": "v"} as ?label=k=v&...: the sandboxes with all of them */
static json_t *t_list(struct mcp_call *c, struct args *g)
{
	json_t *labels = json_object_get(g->a, "labels"), *v;
	char *path = strdup("/v1/sandboxes"), *kv, *esc, *grown;
	const char *k;

	if (labels && !json_is_object(labels))
		bad(g, "labels must be an object of strings");
	json_object_foreach(labels, k, v) {
		if (!json_is_string(v)) {
			bad(g, "labels.%s must be a string", k);
			break;
		}
		if (asprintf(&kv, "%s=%s", k, json_string_value(v)) < 0)
			kv = NULL;
		esc = kv ? mcp_escape(kv) : NULL;
		if (!path || !esc || asprintf(&grown, "%s%slabel=%s", path,
					      strchr(path, '?') ? "&" : "?", esc) < 0)
			grown = NULL;
		free(kv);
		free(esc);
		free(path);
		path = grown;
	}
	if (g->why) {
		free(path);
		return NULL;
	}
	return own_only(c, simple(c, "GET", path, NULL));
}

static json_t *t_keepalive(struct mcp_call *c, struct args *g)
{
	const char *id = arg_id(g);
	json_t *t = json_object_get(g->a, "ttl_seconds"), *body, *r;

	if (t && (!json_is_number(t) || json_number_value(t) < 0))
		bad(g, "ttl_seconds must be a number of seconds, 0 for none");
	if (g->why)
		return NULL;
	body = t ? json_pack("{s:O}", "ttl_seconds", t) : json_object();
	r = simple(c, "POST", mcp_sandbox_path(id, "/keepalive"), body);
	json_decref(body);
	return r;
}

static json_t *t_info(struct mcp_call *c, struct args *g)
{
	const char *id = arg_id(g);

	return g->why ? NULL : simple(c, "GET", mcp_sandbox_path(id, ""), NULL);
}

static json_t *t_state(struct mcp_call *c, struct args *g, const char *action)
{
	const char *id = arg_id(g);

	return g->why ? NULL : simple(c, "POST", mcp_sandbox_path(id, action), NULL);
}

static json_t *t_pause(struct mcp_call *c, struct args *g)
{
	return t_state(c, g, "/pause");
}

static json_t *t_resume(struct mcp_call *c, struct args *g)
{
	return t_state(c, g, "/resume");
}

static json_t *t_halt(struct mcp_call *c, struct args *g)
{
	const char *id = arg_id(g), *reason = arg_str(g, "reason", false);
	json_t *body, *r;

	if (g->why)
		return NULL;
	body = reason ? json_pack("{s:s}", "reason", reason) : json_object();
	r = simple(c, "POST", mcp_sandbox_path(id, "/halt"), body);
	json_decref(body);
	return r;
}

static json_t *t_destroy(struct mcp_call *c, struct args *g)
{
	const char *id = arg_id(g);
	char *path;
	json_t *o, *err;

	if (g->why)
		return NULL;
	path = mcp_sandbox_path(id, "");
	err = call_json(c, "DELETE", path, NULL, &o);
	free(path);
	if (err)
		return err;
	mcp_owned_gone(&c->m->owned, id);
	return tool_ok(o);
}

/* ---- bytes as base64 -------------------------------------------------------- */

static const char b64[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static char *b64_encode(const unsigned char *p, size_t n)
{
	char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;

	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i += 3) {
		unsigned v = p[i] << 16 | (i + 1 < n ? p[i + 1] << 8 : 0) |
			     (i + 2 < n ? p[i + 2] : 0);

		*o++ = b64[v >> 18 & 63];
		*o++ = b64[v >> 12 & 63];
		*o++ = i + 1 < n ? b64[v >> 6 & 63] : '=';
		*o++ = i + 2 < n ? b64[v & 63] : '=';
	}
	*o = '\0';
	return out;
}

/* Strict base64 (whitespace skipped); -1 on anything else. */
static int b64_decode(const char *s, unsigned char **out, size_t *len)
{
	size_t n = strlen(s), j = 0, pad = 0;
	unsigned v = 0, k = 0;
	unsigned char *p = malloc(n / 4 * 3 + 3);

	if (!p)
		return -1;
	for (size_t i = 0; i < n; i++) {
		const char *c;

		if (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t')
			continue;
		if (s[i] == '=') {
			pad++;
			continue;
		}
		c = strchr(b64, s[i]);
		if (!c || !s[i] || pad) {
			free(p);
			return -1;
		}
		v = v << 6 | (unsigned)(c - b64);
		if (++k == 4) {
			p[j++] = v >> 16;
			p[j++] = v >> 8;
			p[j++] = v;
			v = k = 0;
		}
	}
	if (k == 1 || pad > 2) {
		free(p);
		return -1;
	}
	if (k == 2)
		p[j++] = v >> 4;
	if (k == 3) {
		p[j++] = v >> 10;
		p[j++] = v >> 2;
	}
	*out = p;
	*len = j;
	return 0;
}

static char *file_path_to(struct args *g, const char *id, const char *route,
			  const char *tail);

static const char *arg_encoding(struct args *g)
{
	const char *e = arg_str(g, "encoding", false);

	if (e && strcmp(e, "text") && strcmp(e, "base64"))
		bad(g, "encoding must be \"text\" or \"base64\"");
	return e ? e : "text";
}

/* ---- exec ------------------------------------------------------------------ */

/* The body of .../exec and .../processes from the tool's arguments. */
static json_t *exec_body(struct mcp_call *c, struct args *g)
{
	json_t *argv = json_object_get(g->a, "argv"), *env = json_object_get(g->a, "env");
	const char *command = arg_str(g, "command", false);
	const char *cwd = arg_str(g, "cwd", false), *in = arg_str(g, "stdin", false);
	json_t *t = json_object_get(g->a, "timeout_seconds"), *body;
	double timeout;
	char *why = NULL;
	size_t i;
	json_t *v;
	const char *k;

	if (!!argv == !!command)
		bad(g, "give exactly one of command (a shell command line) and argv (a list of strings)");
	if (argv && (!json_is_array(argv) || !json_array_size(argv)))
		bad(g, "argv must be a non-empty list of strings");
	json_array_foreach(argv, i, v)
		if (!json_is_string(v))
			bad(g, "argv[%zu] must be a string", i);
	if (env && !json_is_object(env))
		bad(g, "env must be an object of strings");
	json_object_foreach(env, k, v)
		if (!json_is_string(v))
			bad(g, "env.%s must be a string", k);
	if (t && !json_is_number(t))
		bad(g, "timeout_seconds must be a number");
	if (g->why)
		return NULL;
	if (mcp_bounds_timeout(&c->m->b, t ? json_number_value(t) : -1, &timeout, &why) < 0) {
		bad(g, "%s", why);
		free(why);
		return NULL;
	}
	body = json_pack("{s:f}", "timeout_seconds", timeout);
	if (body && argv)
		json_object_set(body, "argv", argv);
	if (body && command)
		json_object_set_new(body, "command", json_string(command));
	if (body && cwd)
		json_object_set_new(body, "cwd", json_string(cwd));
	if (body && env)
		json_object_set(body, "env", env);
	if (body && in)
		json_object_set_new(body, "stdin", json_string(in));
	if (body && arg_bool(g, "stdin_open"))
		json_object_set_new(body, "stdin_open", json_true());
	if (!body)
		bad(g, "out of memory");
	return body;
}

struct stream {
	struct mcp_call *c;
	json_t *result;			/* the "end" line's */
};

static int on_line(void *arg, char *line, size_t len)
{
	struct stream *s = arg;
	json_t *o = json_loadb(line, len, JSON_ALLOW_NUL, NULL);
	const char *type = json_string_value(json_object_get(o, "type"));
	const char *data = json_string_value(json_object_get(o, "data"));

	if (!type) {
		json_decref(o);
		return len ? -1 : 0;
	}
	if (!strcmp(type, "end")) {
		json_decref(s->result);
		s->result = json_incref(json_object_get(o, "result"));
	} else if (data && (!strcmp(type, "stdout") || !strcmp(type, "stderr"))) {
		progress_output(s->c, type, data,
				json_string_length(json_object_get(o, "data")));
	}
	json_decref(o);
	return 0;
}

/*
 * What a person reads: how it ended, then the output, whole: a NUL the
 * program wrote is one more character, not where its output stops.
 */
static json_t *exec_text(const json_t *r)
{
	json_t *out = json_object_get(r, "stdout"), *err = json_object_get(r, "stderr");
	const char *reason = json_string_value(json_object_get(r, "reason"));
	const char *status = json_string_value(json_object_get(r, "status"));
	json_t *denials = json_object_get(r, "denials");
	json_int_t dropped = json_integer_value(json_object_get(r, "denials_dropped"));
	char *den = json_array_size(denials) ? json_dumps(denials, JSON_COMPACT) : NULL;
	char more[64] = "", *text = NULL;
	size_t len = 0;
	json_t *content = NULL;
	FILE *f = open_memstream(&text, &len);

	if (den && dropped > 0)
		snprintf(more, sizeof(more), " (and %lld more, not listed)", (long long)dropped);
	if (f) {
		fprintf(f, "status: %s, exit code %lld: %s\n%s%s%s%s--- stdout ---\n",
			status ? status : "?",
			(long long)json_integer_value(json_object_get(r, "exit_code")),
			reason ? reason : "", den ? "denied: " : "", den ? den : "",
			more, den ? "\n" : "");
		fwrite(json_string_value(out), 1, json_string_length(out), f);
		fputs("\n--- stderr ---\n", f);
		fwrite(json_string_value(err), 1, json_string_length(err), f);
		bool ok = !ferror(f);

		if (fclose(f) == 0 && ok)
			content = text_content_n(text, len);
	}
	free(text);
	free(den);
	return content;
}

static int big_enter(struct mcp_call *c);

/*
 * An answer that holds len bytes of a program's output waits for one of
 * the MCP_BIG_CALLS turns when that is more than MCP_BIG_OUTPUT; -1 when
 * the call is cancelled meanwhile.
 */
static int output_turn(struct mcp_call *c, size_t len)
{
	if (len <= MCP_BIG_OUTPUT || c->big)
		return 0;
	if (big_enter(c) < 0)
		return -1;
	c->big = true;
	return 0;
}

static size_t result_output_len(const json_t *r)
{
	return json_string_length(json_object_get(r, "stdout")) +
	       json_string_length(json_object_get(r, "stderr"));
}

static json_t *run_foreground(struct mcp_call *c, const char *id, json_t *body)
{
	struct stream s = { .c = c };
	struct mcp_http h = { .cancel = &c->cancelled, .line = on_line, .arg = &s };
	char *path = mcp_sandbox_path(id, "/exec"), *text = NULL;
	json_t *r;

	json_object_set_new(body, "stream", json_true());
	text = json_dumps(body, JSON_COMPACT);
	r = daemon_ask(c, "POST", text ? path : NULL, text, text ? strlen(text) : 0,
		       "Content-Type: application/json", &h);
	if (!r && !json_is_object(s.result))
		r = tool_error("the daemon's stream ended without the call's result");
	/* its buffer (the end line: the output, escaped) goes before a turn */
	mcp_http_free(&h);
	if (!r && output_turn(c, result_output_len(s.result)) < 0)
		r = tool_error("cancelled while waiting for a turn");
	if (!r)
		r = json_pack("{s:o,s:O}", "content", exec_text(s.result),
			      "structuredContent", s.result);
	json_decref(s.result);
	mcp_http_free(&h);
	free(path);
	free(text);
	return r;
}

static json_t *t_exec(struct mcp_call *c, struct args *g)
{
	const char *id = arg_id(g);
	bool background = arg_bool(g, "background");
	json_t *body = g->why ? NULL : exec_body(c, g), *r, *o;
	char *path;

	if (!body)
		return NULL;
	if (!background && json_object_get(body, "stdin_open")) {
		json_decref(body);
		bad(g, "stdin_open is for background:true (then process_stdin writes to it)");
		return NULL;
	}
	if (!background) {
		r = run_foreground(c, id, body);
		json_decref(body);
		return r;
	}
	path = mcp_sandbox_path(id, "/processes");
	r = call_json(c, "POST", path, body, &o);
	free(path);
	json_decref(body);
	if (r)
		return r;
	/* pid 0: it could not start, and its result says why */
	json_object_set_new(o, "status", json_string(json_integer_value(
		json_object_get(o, "pid")) ? "running" : "failed"));
	return tool_ok(o);
}

/* .../processes/PID + verb ("", "/wait", "/stdin?eof=1" ...) */
static char *proc_path_to(struct args *g, const char *id, const char *verb)
{
	json_int_t pid = arg_int(g, "pid", true, 1, 1 << 22, 0);
	char rest[160];

	if (g->why)
		return NULL;
	snprintf(rest, sizeof(rest), "/processes/%lld%s", (long long)pid, verb);
	return mcp_sandbox_path(id, rest);
}

static char *proc_path(struct args *g, const char *id)
{
	return proc_path_to(g, id, "");
}

static json_t *t_proc_list(struct mcp_call *c, struct args *g)
{
	const char *id = arg_id(g);

	return g->why ? NULL : simple(c, "GET", mcp_sandbox_path(id, "/processes"), NULL);
}

/*
 * The output lines of .../output gathered: the bytes of each stream,
 * offsets, the end.  A follow of a process that writes without end would
 * grow this without end, so each stream keeps at most max bytes an answer
 * (the operator's limits.output); the model reads on from the offsets.
 */
struct gather {
	struct mcp_call *c;
	char *text[2];			/* stdout, stderr */
	size_t len[2], cap[2], max;
	json_int_t next[2];		/* the offset after what came */
	json_int_t dropped;
	json_t *result;			/* the end line's, once ended */
	bool gone, full;
};

static int gather_add(struct gather *o, int no, const char *data, size_t n)
{
	size_t need = o->len[no] + n + 1, cap = o->cap[no] ? o->cap[no] : 4096;
	char *p;

	while (cap < need)
		cap *= 2;
	if (cap != o->cap[no]) {
		p = realloc(o->text[no], cap);
		if (!p)
			return -1;
		o->text[no] = p;
		o->cap[no] = cap;
	}
	memcpy(o->text[no] + o->len[no], data, n);
	o->len[no] += n;
	o->text[no][o->len[no]] = '\0';
	return 0;
}

static int on_output_line(void *arg, char *line, size_t len)
{
	struct gather *o = arg;
	json_t *v = json_loadb(line, len, JSON_ALLOW_NUL, NULL);
	const char *type = json_string_value(json_object_get(v, "type"));
	json_t *d = json_object_get(v, "data");
	int no = !type ? -1 : !strcmp(type, "stdout") ? 0 : !strcmp(type, "stderr") ? 1 : -1;
	int r = 0;

	if (no >= 0 && json_is_string(d)) {
		const char *data = json_string_value(d);
		size_t n = json_string_length(d);

		/* what it kept is the answer; the rest is read from next */
		if (o->len[no] && o->len[no] + n > o->max) {
			o->full = true;
			r = 1;
		} else if (gather_add(o, no, data, n) < 0) {
			r = -1;
		} else {
			o->next[no] = json_integer_value(json_object_get(v, "offset")) + n;
			progress_output(o->c, type, data, n);
			if (o->len[no] >= o->max) {
				o->full = true;
				r = 1;
			}
		}
	} else if (type && !strcmp(type, "dropped")) {
		o->dropped += json_integer_value(json_object_get(v, "bytes"));
	} else if (type && !strcmp(type, "end")) {
		json_decref(o->result);
		o->result = json_incref(json_object_get(v, "result"));
	} else if (type && !strcmp(type, "gone")) {
		o->gone = true;
	}
	json_decref(v);
	return r;
}

/*
 * The output from offset on; with follow, what comes until the process
 * ends, timeout_seconds pass or a stream has limits.output bytes (each
 * piece a progress message meanwhile).  stdout_next_offset /
 * stderr_next_offset are where to go on from.
 */
static json_t *t_proc_output(struct mcp_call *c, struct args *g)
{
	const char *id = arg_id(g), *stream = arg_str(g, "stream", false);
	json_int_t off = arg_int(g, "offset", false, 0, INT64_MAX, 0);
	bool follow = arg_bool(g, "follow");
	json_int_t secs = arg_int(g, "timeout_seconds", false, 1, 3600, FOLLOW_DEFAULT_S);
	struct gather o = { .c = c, .next = { off, off },
			    .max = c->m->b.limit.output_bytes ? c->m->b.limit.output_bytes :
				   OUTPUT_ANSWER_MAX };
	struct mcp_http h = { .cancel = &c->cancelled, .line = on_output_line, .arg = &o };
	char verb[160], *path = NULL;
	json_t *r = NULL;

	if (stream && strcmp(stream, "stdout") && strcmp(stream, "stderr") &&
	    strcmp(stream, "both"))
		bad(g, "stream must be stdout, stderr or both");
	snprintf(verb, sizeof(verb), "/output?offset=%lld&stream=%s%s", (long long)off,
		 stream ? stream : "both", follow ? "&follow=1" : "");
	if (!g->why)
		path = proc_path_to(g, id, verb);
	if (g->why)
		goto out;
	if (o.max > OUTPUT_ANSWER_MAX)
		o.max = OUTPUT_ANSWER_MAX;
	if (follow)
		h.deadline_ms = corral_now_ms() + (uint64_t)secs * 1000;
	r = daemon_ask(c, "GET", path, NULL, 0, NULL, &h);
	/* its buffer goes before a turn is waited for */
	mcp_http_free(&h);
	if (!r && output_turn(c, o.len[0] + o.len[1]) < 0)
		r = tool_error("cancelled while waiting for a turn");
	if (!r) {
		json_t *v = json_pack("{s:s%, s:s%, s:I, s:I, s:I, s:s}",
				      "stdout", o.text[0] ? o.text[0] : "", o.len[0],
				      "stderr", o.text[1] ? o.text[1] : "", o.len[1],
				      "stdout_next_offset", o.next[0],
				      "stderr_next_offset", o.next[1],
				      "dropped_bytes", o.dropped, "state",
				      o.result ? "exited" : o.gone ? "gone" : "running");

		/* no result key while it runs: the schema's result is an object */
		if (v && o.result)
			json_object_set(v, "result", o.result);
		if (v && o.full)
			json_object_set_new(v, "more", json_true());
		r = v ? tool_ok(v) : tool_error("out of memory");
	}
out:
	free(o.text[0]);
	free(o.text[1]);
	json_decref(o.result);
	mcp_http_free(&h);
	free(path);
	return r;
}

static json_t *t_proc_kill(struct mcp_call *c, struct args *g)
{
	const char *id = arg_id(g);
	char *path = g->why ? NULL : proc_path(g, id);

	return g->why ? NULL : simple(c, "DELETE", path, NULL);
}

/* Until the process ends or timeout_seconds pass: its record either way. */
static json_t *t_proc_wait(struct mcp_call *c, struct args *g)
{
	const char *id = arg_id(g);
	json_int_t secs = arg_int(g, "timeout_seconds", false, 1, 3600, 30);
	char verb[64];

	snprintf(verb, sizeof(verb), "/wait?timeout_seconds=%lld", (long long)secs);
	{
		char *path = g->why ? NULL : proc_path_to(g, id, verb);

		return g->why ? NULL : simple(c, "GET", path, NULL);
	}
}

static json_t *t_proc_stdin(struct mcp_call *c, struct args *g)
{
	const char *id = arg_id(g), *enc = arg_encoding(g);
	const char *data = arg_str(g, "data", false);
	bool eof = arg_bool(g, "eof");
	char *path = g->why ? NULL : proc_path_to(g, id, eof ? "/stdin?eof=1" : "/stdin");
	unsigned char *bytes = NULL;
	size_t len = data ? json_string_length(json_object_get(g->a, "data")) : 0;
	json_t *r;

	if (!data && !eof)
		bad(g, "give data, eof:true, or both");
	if (!g->why && data && !strcmp(enc, "base64") && b64_decode(data, &bytes, &len) < 0)
		bad(g, "data is not valid base64");
	if (g->why) {
		free(path);
		return NULL;
	}
	r = send_bytes(c, "POST", path, bytes ? (char *)bytes : data ? data : "", len,
		       "Content-Type: application/octet-stream");
	free(bytes);
	free(path);
	return r;
}

static json_t *t_proc_signal(struct mcp_call *c, struct args *g)
{
	const char *id = arg_id(g);
	json_t *sig = json_object_get(g->a, "signal"), *body, *r;
	char *path;

	if (!sig || (!json_is_string(sig) && !json_is_integer(sig)))
		bad(g, "signal is required: a name (\"TERM\", \"INT\", \"KILL\", \"USR1\" ...) or a number");
	path = g->why ? NULL : proc_path_to(g, id, "/signal");
	if (g->why)
		return NULL;
	body = json_pack("{s:O}", "signal", sig);
	r = simple(c, "POST", path, body);
	json_decref(body);
	return r;
}

/* ---- files ------------------------------------------------------------------ */

static char *file_path(struct args *g, const char *id, bool list)
{
	return file_path_to(g, id, "/files", list ? "&list=1" : "");
}

/* The escaped path argument ("path") under route, then tail. */
static char *file_path_to(struct args *g, const char *id, const char *route,
			  const char *tail)
{
	const char *path = arg_str(g, "path", true);
	char *esc, *rest, *p;

	if (g->why)
		return NULL;
	if (path[0] != '/') {
		bad(g, "path must be absolute inside the sandbox, like /workspace/a.txt");
		return NULL;
	}
	esc = mcp_escape(path);
	if (!esc || asprintf(&rest, "%s?path=%s%s", route, esc, tail) < 0) {
		free(esc);
		return NULL;
	}
	free(esc);
	p = mcp_sandbox_path(id, rest);
	free(rest);
	return p;
}

static json_t *t_write(struct mcp_call *c, struct args *g)
{
	const char *id = arg_id(g), *enc = arg_encoding(g);
	const char *content = arg_str(g, "content", true);
	bool parents = arg_bool(g, "parents");
	char *path = g->why ? NULL : file_path_to(g, id, "/files", parents ? "&parents=1" : "");
	unsigned char *bytes = NULL;
	size_t len = 0;
	json_t *r;

	if (g->why)
		return NULL;
	if (!strcmp(enc, "base64")) {
		if (b64_decode(content, &bytes, &len) < 0) {
			free(path);
			bad(g, "content is not valid base64");
			return NULL;
		}
	} else {
		len = json_string_length(json_object_get(g->a, "content"));
	}
	r = send_bytes(c, "PUT", path, bytes ? (char *)bytes : content, len,
		       "Content-Type: application/octet-stream");
	free(bytes);
	free(path);
	return r;
}

static json_t *t_read(struct mcp_call *c, struct args *g)
{
	const char *id = arg_id(g), *enc = arg_encoding(g);
	const char *file = arg_str(g, "path", true);
	char *path = g->why ? NULL : file_path(g, id, false), *b = NULL;
	struct mcp_http h = { .cancel = &c->cancelled, .max = FILE_MAX };
	json_t *r, *text = NULL;

	if (g->why)
		return NULL;
	r = daemon_ask(c, "GET", path, NULL, 0, NULL, &h);
	if (!r) {
		/* text only when it is UTF-8 without NULs: else base64 */
		if (!strcmp(enc, "text") && !memchr(h.buf ? h.buf : "", 0, h.len))
			text = json_stringn(h.buf ? h.buf : "", h.len);
		if (!text)
			b = b64_encode((unsigned char *)(h.buf ? h.buf : ""), h.len);
		if (!text && !b)
			r = tool_error("out of memory");
		else
			r = tool_ok(json_pack("{s:s,s:I,s:s,s:o}", "path", file, "size",
					      (json_int_t)h.len, "encoding",
					      text ? "text" : "base64", "content",
					      text ? text : json_string(b)));
	}
	free(b);
	mcp_http_free(&h);
	free(path);
	return r;
}

/* A listing's page: the first, or the one after cursor (a page's "next"). */
static json_t *t_files(struct mcp_call *c, struct args *g)
{
	const char *id = arg_id(g), *cursor = arg_str(g, "cursor", false);
	bool recursive = arg_bool(g, "recursive");
	char *esc = NULL, *tail = NULL, *path = NULL;

	if (g->why)
		return NULL;
	if (cursor && !(esc = mcp_escape(cursor)))
		return tool_error("out of memory");
	if (asprintf(&tail, "&list=1%s%s%s", recursive ? "&recursive=1" : "",
		     esc ? "&cursor=" : "", esc ? esc : "") < 0)
		tail = NULL;
	free(esc);
	if (!tail)
		return tool_error("out of memory");
	path = file_path_to(g, id, "/files", tail);
	free(tail);
	return g->why ? NULL : simple(c, "GET", path, NULL);
}

static json_t *t_delete_file(struct mcp_call *c, struct args *g)
{
	const char *id = arg_id(g);
	char *path = g->why ? NULL : file_path(g, id, false);

	return g->why ? NULL : simple(c, "DELETE", path, NULL);
}

static json_t *t_mkdir(struct mcp_call *c, struct args *g)
{
	const char *id = arg_id(g), *path = arg_str(g, "path", true);
	bool parents = arg_bool(g, "parents");
	json_t *body, *r;

	if (g->why)
		return NULL;
	body = json_pack("{s:s, s:b}", "path", path, "parents", parents);
	r = simple(c, "POST", mcp_sandbox_path(id, "/files/mkdir"), body);
	json_decref(body);
	return r;
}

static json_t *t_rename(struct mcp_call *c, struct args *g)
{
	const char *id = arg_id(g), *from = arg_str(g, "from", true);
	const char *to = arg_str(g, "to", true);
	bool over = arg_bool(g, "overwrite");
	json_t *body, *r;

	if (g->why)
		return NULL;
	body = json_pack("{s:s, s:s, s:b}", "from", from, "to", to, "overwrite", over);
	r = simple(c, "POST", mcp_sandbox_path(id, "/files/rename"), body);
	json_decref(body);
	return r;
}

/* A directory as a tar archive, in base64. */
static json_t *t_archive_read(struct mcp_call *c, struct args *g)
{
	const char *id = arg_id(g), *dir = arg_str(g, "path", true);
	char *path = g->why ? NULL : file_path_to(g, id, "/archive", ""), *b = NULL;
	struct mcp_http h = { .cancel = &c->cancelled, .max = FILE_MAX };
	json_t *r;

	if (g->why)
		return NULL;
	r = daemon_ask(c, "GET", path, NULL, 0, NULL, &h);
	if (!r && !(b = b64_encode((unsigned char *)(h.buf ? h.buf : ""), h.len)))
		r = tool_error("out of memory");
	if (!r)
		r = tool_ok(json_pack("{s:s, s:I, s:s, s:s}", "path", dir, "size",
				      (json_int_t)h.len, "encoding", "base64",
				      "content", b));
	free(b);
	mcp_http_free(&h);
	free(path);
	return r;
}

/* A tar archive (base64, plain or gzip'd) unpacked into a directory. */
static json_t *t_archive_write(struct mcp_call *c, struct args *g)
{
	const char *id = arg_id(g), *content = arg_str(g, "content", true);
	char *path = g->why ? NULL : file_path_to(g, id, "/archive", "");
	unsigned char *bytes = NULL;
	size_t len = 0;
	json_t *r;

	if (!g->why && b64_decode(content, &bytes, &len) < 0)
		bad(g, "content is not valid base64 (a tar archive, plain or gzip'd, in base64)");
	if (g->why) {
		free(path);
		return NULL;
	}
	r = send_bytes(c, "PUT", path, (char *)bytes, len, "Content-Type: application/x-tar");
	free(bytes);
	free(path);
	return r;
}

/* ---- the workspace: diff and export --------------------------------------- */

static json_t *t_diff(struct mcp_call *c, struct args *g)
{
	const char *id = arg_id(g), *sub = arg_str(g, "path", false);
	bool patch = arg_bool(g, "patch");
	struct mcp_http h = { .cancel = &c->cancelled, .max = FILE_MAX };
	char *esc = NULL, *rest = NULL, *path = NULL;
	json_t *r, *changes = NULL;

	if (g->why)
		return NULL;
	if (sub && !(esc = mcp_escape(sub)))
		return tool_error("out of memory");
	if (asprintf(&rest, "/diff%s%s%s%s", sub || patch ? "?" : "",
		     sub ? "path=" : "", sub ? esc : "",
		     patch ? (sub ? "&format=patch" : "format=patch") : "") < 0)
		rest = NULL;
	path = rest ? mcp_sandbox_path(id, rest) : NULL;
	r = daemon_ask(c, "GET", path, NULL, 0, NULL, &h);
	if (!r && !patch)
		changes = json_loadb(h.buf ? h.buf : "", h.len, 0, NULL);
	if (!r && patch)
		r = tool_ok(json_pack("{s:s, s:s%}", "format", "patch", "patch",
				      h.buf ? h.buf : "", h.len));
	else if (!r && !json_is_array(changes))
		r = tool_error("the daemon's diff is not a JSON array");
	else if (!r)
		r = tool_ok(json_pack("{s:s, s:O}", "format", "changes", "changes", changes));
	json_decref(changes);
	mcp_http_free(&h);
	free(esc);
	free(rest);
	free(path);
	return r;
}

/*
 * patch: the git patch of what may leave, in the answer; apply: the
 * changes onto the host workspace the sandbox was made on (the operator
 * offered it), a host file changed since then a conflict, never
 * overwritten.  An export "to" a new host directory is not offered: a
 * model names no host path.  Nor does it let a held change out (the
 * API's allow_risky): the hold table stands between the model's sandbox
 * and the host's git and editors, and a model may narrow the operator's
 * holds, never widen what leaves; a person lets one out with `corral
 * export --allow-risky`.
 */
static json_t *t_export(struct mcp_call *c, struct args *g)
{
	const char *id = arg_id(g), *mode = arg_str(g, "mode", false);
	json_t *body, *r;

	if (mode && strcmp(mode, "patch") && strcmp(mode, "apply"))
		bad(g, "mode must be \"patch\" (the default) or \"apply\"");
	if (g->why)
		return NULL;
	body = json_pack("{s:b}", mode && !strcmp(mode, "apply") ? "apply" : "patch", 1);
	r = simple(c, "POST", mcp_sandbox_path(id, "/export"), body);
	json_decref(body);
	return r;
}

/* ---- events ----------------------------------------------------------------- */

struct events {
	json_t *list;
	size_t max;
	bool denials;
};

static int on_event(void *arg, char *line, size_t len)
{
	struct events *e = arg;
	json_t *o = json_loadb(line, len, JSON_ALLOW_NUL, NULL);
	const char *type = json_string_value(json_object_get(o, "type"));

	if (type && (!e->denials || strstr(type, "denied") || !strcmp(type, "limit.hit") ||
		     !strcmp(type, "abort") || !strcmp(type, "halt"))) {
		json_array_append(e->list, o);
		if (json_array_size(e->list) > e->max)
			json_array_remove(e->list, 0);
	}
	json_decref(o);
	return 0;
}

static json_t *t_events(struct mcp_call *c, struct args *g)
{
	const char *id = arg_id(g);
	struct events e = {
		.max = arg_int(g, "limit", false, 1, EVENTS_MAX, EVENTS_DEFAULT),
		.denials = arg_bool(g, "denials_only"),
		.list = json_array(),
	};
	struct mcp_http h = { .cancel = &c->cancelled, .line = on_event, .arg = &e };
	char *path = NULL, *esc = NULL;
	json_t *r;

	if (g->why) {
		json_decref(e.list);
		return NULL;
	}
	esc = mcp_escape(id);
	if (!e.list || !esc || asprintf(&path, "/v1/events?sandbox=%s", esc) < 0)
		path = NULL;
	r = daemon_ask(c, "GET", path, NULL, 0, NULL, &h);
	if (!r)
		r = tool_ok(json_pack("{s:O}", "events", e.list));
	json_decref(e.list);
	mcp_http_free(&h);
	free(esc);
	free(path);
	return r;
}

/* ---- the table -------------------------------------------------------------- */

typedef json_t *(*tool_fn)(struct mcp_call *c, struct args *g);

struct tool {
	const char *name, *title, *description;
	const char *input;		/* the input schema's properties, as JSON */
	const char *required;		/* the required keys, as a JSON array */
	const char *output;		/* the output schema, as JSON */
	bool read_only, destructive, idempotent;
	tool_fn fn;
};

/*
 * The tools whose answer may hold a whole file (FILE_MAX), or as much in
 * names the sandbox or the model chose: a listing's page (32 MiB of
 * names, each byte that is not UTF-8 five in JSON: a recursive one was a
 * 186 MB answer, the server's peak 617 MB), the process records (up to
 * 256 ended and every running one, each with its argv of up to 60 KiB,
 * six bytes a control character: 400 of them were a 360 MB answer, three
 * at once took the server to 3.1 GB).  See MCP_BIG_CALLS.
 */
static bool is_big(const char *name)
{
	return !strcmp(name, "file_read") || !strcmp(name, "archive_read") ||
	       !strcmp(name, "workspace_diff") || !strcmp(name, "file_list") ||
	       !strcmp(name, "process_list");
}

/* One of the MCP_BIG_CALLS turns; -1 when the call is cancelled meanwhile. */
static int big_enter(struct mcp_call *c)
{
	struct mcp *m = c->m;
	int r = 0;

	pthread_mutex_lock(&m->big_lock);
	while (m->big_used >= MCP_BIG_CALLS && !atomic_load(&c->cancelled)) {
		struct timespec until;

		/* a cancel signals no condition: look again each second */
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 1;
		pthread_cond_timedwait(&m->big_free, &m->big_lock, &until);
	}
	if (atomic_load(&c->cancelled))
		r = -1;
	else
		m->big_used++;
	pthread_mutex_unlock(&m->big_lock);
	return r;
}

void mcp_big_leave(struct mcp *m)
{
	pthread_mutex_lock(&m->big_lock);
	m->big_used--;
	pthread_cond_signal(&m->big_free);
	pthread_mutex_unlock(&m->big_lock);
}

/*
 * The schemas are JSON texts that jansson parses when tools/list is asked:
 * easier to read and to check against the API than json_pack formats.
 */
#define ID_PROP "\"sandbox_id\": {\"type\": \"string\", \"description\": \"The sandbox's id (sb-...), from sandbox_create or sandbox_list.\"}"
#define PID_PROP "\"pid\": {\"type\": \"integer\", \"minimum\": 1, \"description\": \"The process's pid inside the sandbox, as exec with background:true returned it.\"}"
#define PATH_PROP(what) "\"path\": {\"type\": \"string\", \"description\": \"" what "\"}"
#define ANY_OBJECT "{\"type\": \"object\"}"

#define SANDBOX_OUT "{\"type\": \"object\", \"properties\": {" \
	"\"id\": {\"type\": \"string\"}, \"state\": {\"type\": \"string\"}, " \
	"\"created\": {\"type\": \"string\"}, \"ttl_seconds\": {\"type\": \"number\"}, " \
	"\"processes\": {\"type\": \"integer\"}, \"running\": {\"type\": \"integer\"}, " \
	"\"halt_reason\": {\"type\": [\"string\", \"null\"]}, \"limits\": {\"type\": \"string\"}, " \
	"\"meters\": {\"type\": \"object\"}}, \"required\": [\"id\", \"state\"]}"

#define EXEC_OUT "{\"type\": \"object\", \"properties\": {" \
	"\"status\": {\"type\": \"string\", \"description\": \"exited, signaled, timeout, killed ... (foreground); running or failed (background)\"}, " \
	"\"exit_code\": {\"type\": [\"integer\", \"null\"]}, \"signal\": {\"type\": \"integer\"}, " \
	"\"reason\": {\"type\": \"string\"}, \"stdout\": {\"type\": \"string\"}, " \
	"\"stderr\": {\"type\": \"string\"}, \"stdout_truncated\": {\"type\": \"boolean\"}, " \
	"\"duration_ms\": {\"type\": \"number\"}, \"denials\": {\"type\": \"array\"}, " \
	"\"pid\": {\"type\": \"integer\"}, \"tool_call_id\": {\"type\": \"string\"}}, " \
	"\"required\": [\"status\"]}"

#define OUTPUT_OUT "{\"type\": \"object\", \"properties\": {" \
	"\"state\": {\"type\": \"string\", \"enum\": [\"running\", \"exited\", \"gone\"]}, " \
	"\"stdout\": {\"type\": \"string\"}, \"stderr\": {\"type\": \"string\"}, " \
	"\"stdout_next_offset\": {\"type\": \"integer\"}, \"stderr_next_offset\": {\"type\": \"integer\"}, " \
	"\"dropped_bytes\": {\"type\": \"integer\"}, \"result\": {\"type\": \"object\"}, " \
	"\"more\": {\"type\": \"boolean\"}}, " \
	"\"required\": [\"state\", \"stdout\", \"stderr\"]}"

#define PROC_OUT "{\"type\": \"object\", \"properties\": {" \
	"\"pid\": {\"type\": \"integer\"}, \"tool_call_id\": {\"type\": \"string\"}, " \
	"\"argv\": {\"type\": \"array\"}, \"state\": {\"type\": \"string\"}, " \
	"\"result\": {\"type\": \"object\"}, \"stdout\": {\"type\": \"string\"}, " \
	"\"stderr\": {\"type\": \"string\"}}, \"required\": [\"pid\", \"state\"]}"

static const struct tool tools[] = {
	{ "sandbox_create", "Create a sandbox",
	  "Create a Linux sandbox that lives across calls and return its id (use it as sandbox_id). "
	  "It has no network unless allow_hosts names hosts (HTTP/HTTPS by name through corral's proxy), "
	  "a read-only view of the system, a writable /tmp and, with workspace, a copy-on-write /workspace "
	  "of a host directory. Everything here is bounded by the operator's policy: asking for more than "
	  "it allows is refused with the bound, ask again within it. Destroy it with sandbox_destroy when done.",
	  "\"policy\": {\"type\": [\"string\", \"object\"], \"description\": \"A policy name the operator offers (\\\"default\\\") or a policy object in corral's policy-file format, merged over the operator's policy.\"}, "
	  "\"workspace\": {\"type\": \"string\", \"description\": \"A host directory shown at /workspace (changes stay in the sandbox); must be within the operator's workspace.\"}, "
	  "\"allow_hosts\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}, \"description\": \"Hosts the sandbox may reach, like \\\"pypi.org\\\" or \\\"*.github.com:443\\\"; only hosts the operator's policy allows.\"}, "
	  "\"limits\": {\"type\": \"object\", \"description\": \"Lower limits: memory (\\\"512M\\\"), pids (64), cpus (1), disk (\\\"256M\\\"), timeout (\\\"30s\\\"), output (\\\"1M\\\"), open_files (4096 a process; open_files x pids within a quarter of the host's file table).\", "
	  "\"properties\": {\"memory\": {\"type\": [\"string\", \"integer\"]}, \"pids\": {\"type\": \"integer\"}, \"cpus\": {\"type\": [\"number\", \"string\"]}, "
	  "\"disk\": {\"type\": [\"string\", \"integer\"]}, \"timeout\": {\"type\": [\"string\", \"number\"]}, \"output\": {\"type\": [\"string\", \"integer\"]}, \"open_files\": {\"type\": \"integer\"}}}, "
	  "\"ttl_seconds\": {\"type\": \"integer\", \"minimum\": 0, \"description\": \"Destroy the sandbox after this many seconds (0: never; a daemon reached over TCP bounds it: then 0 gets its longest, and a longer one is refused).\"}, "
	  "\"labels\": {\"type\": \"object\", \"additionalProperties\": {\"type\": \"string\"}, \"description\": \"Your own key/value tags.\"}",
	  "[]", SANDBOX_OUT, false, false, false, t_create },
	{ "sandbox_list", "List sandboxes", "List the sandboxes this session created, with their state (running, idle, frozen, paused, halted, dead); labels keeps those that have all of them.",
	  "\"labels\": {\"type\": \"object\", \"additionalProperties\": {\"type\": \"string\"}, \"description\": \"Only sandboxes with these labels.\"}", "[]", "{\"type\": \"object\", \"properties\": {\"sandboxes\": {\"type\": \"array\", \"items\": " SANDBOX_OUT "}}, \"required\": [\"sandboxes\"]}",
	  true, false, true, t_list },
	{ "sandbox_keepalive", "Keep a sandbox alive", "Restart a sandbox's TTL from now (ttl_seconds: a new one; 0: none), so that it is not destroyed while still in use. Returns it, with expires_at.",
	  ID_PROP ", \"ttl_seconds\": {\"type\": \"number\", \"minimum\": 0, \"description\": \"The new TTL in seconds (default: the sandbox's own; a daemon reached over TCP refuses 0 and one past its longest).\"}",
	  "[\"sandbox_id\"]", SANDBOX_OUT, false, false, true, t_keepalive },
	{ "sandbox_info", "Describe a sandbox", "A sandbox's state, limits, halt reason and meters (CPU, memory, calls).",
	  ID_PROP, "[\"sandbox_id\"]", SANDBOX_OUT, true, false, true, t_info },
	{ "exec", "Run a command in a sandbox",
	  "Run a command in a sandbox and wait for it (or start it in the background). Give command (run by /bin/sh -c) "
	  "or argv. A command that fails is a normal result: read status, exit_code and reason (and denials, what the "
	  "sandbox refused it: hosts, syscalls). It is killed after timeout_seconds (default 60). With background:true "
	  "it returns its pid at once; read it with process_output, stop it with process_kill.",
	  ID_PROP ", "
	  "\"command\": {\"type\": \"string\", \"description\": \"A shell command line, run as /bin/sh -c COMMAND.\"}, "
	  "\"argv\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}, \"minItems\": 1, \"description\": \"The program and its arguments, without a shell.\"}, "
	  "\"cwd\": {\"type\": \"string\", \"description\": \"Working directory inside the sandbox (default /workspace or /tmp).\"}, "
	  "\"env\": {\"type\": \"object\", \"additionalProperties\": {\"type\": \"string\"}, \"description\": \"Environment variables to set.\"}, "
	  "\"stdin\": {\"type\": \"string\", \"description\": \"Text given to the command's standard input.\"}, "
	  "\"timeout_seconds\": {\"type\": \"number\", \"exclusiveMinimum\": 0, \"description\": \"Kill the command after this many seconds (default 60, at most the operator's limit).\"}, "
	  "\"background\": {\"type\": \"boolean\", \"description\": \"Start it and return its pid without waiting.\"}, "
	  "\"stdin_open\": {\"type\": \"boolean\", \"description\": \"With background: keep its standard input open; write to it with process_stdin.\"}",
	  "[\"sandbox_id\"]", EXEC_OUT, false, true, false, t_exec },
	{ "process_list", "List background processes", "The sandbox's background processes (running and ended), without their output.",
	  ID_PROP, "[\"sandbox_id\"]", "{\"type\": \"object\", \"properties\": {\"processes\": {\"type\": \"array\"}}, \"required\": [\"processes\"]}",
	  true, false, true, t_proc_list },
	{ "process_output", "Read a background process's output",
	  "A background process's output from offset on (what is kept: the last 64 KiB of each stream; dropped_bytes says how much before that is gone), "
	  "and its result once it ended. With follow:true it waits for more and returns when the process ends, timeout_seconds pass, or a stream has given as much as one answer holds (the operator's output limit; then more is true). "
	  "Call again with offset set to stdout_next_offset (and stream stdout, or stderr with stderr_next_offset) to read only what is new.",
	  ID_PROP ", " PID_PROP ", "
	  "\"offset\": {\"type\": \"integer\", \"minimum\": 0, \"description\": \"Bytes of each stream already read (default 0).\"}, "
	  "\"stream\": {\"type\": \"string\", \"enum\": [\"stdout\", \"stderr\", \"both\"], \"description\": \"Which output (default both).\"}, "
	  "\"follow\": {\"type\": \"boolean\", \"description\": \"Wait for output until the process ends or timeout_seconds pass.\"}, "
	  "\"timeout_seconds\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 3600, \"description\": \"How long follow waits (default 30).\"}",
	  "[\"sandbox_id\", \"pid\"]", OUTPUT_OUT, true, false, true, t_proc_output },
	{ "process_stdin", "Write to a background process's input",
	  "Write data to the standard input of a background process started with exec background:true and stdin_open:true; eof:true closes its input (after data). "
	  "A process that has ended, or whose input is closed, is refused.",
	  ID_PROP ", " PID_PROP ", "
	  "\"data\": {\"type\": \"string\", \"description\": \"Text to write (or base64 with encoding base64).\"}, "
	  "\"encoding\": {\"type\": \"string\", \"enum\": [\"text\", \"base64\"]}, "
	  "\"eof\": {\"type\": \"boolean\", \"description\": \"Close its standard input once written.\"}",
	  "[\"sandbox_id\", \"pid\"]",
	  "{\"type\": \"object\", \"properties\": {\"pid\": {\"type\": \"integer\"}, \"accepted\": {\"type\": \"integer\"}, \"eof\": {\"type\": \"boolean\"}}, \"required\": [\"pid\", \"accepted\"]}",
	  false, false, false, t_proc_stdin },
	{ "process_signal", "Signal a background process",
	  "Send a signal to a background process and everything it started: TERM to ask it to stop, INT as Ctrl-C, KILL to end it at once, HUP, USR1, USR2, STOP, CONT ...",
	  ID_PROP ", " PID_PROP ", "
	  "\"signal\": {\"type\": [\"string\", \"integer\"], \"description\": \"A name (TERM, INT, KILL, HUP, USR1 ...) or a number.\"}",
	  "[\"sandbox_id\", \"pid\", \"signal\"]",
	  "{\"type\": \"object\", \"properties\": {\"pid\": {\"type\": \"integer\"}, \"signal\": {\"type\": \"integer\"}, \"state\": {\"type\": \"string\"}}, \"required\": [\"pid\", \"signal\"]}",
	  false, true, false, t_proc_signal },
	{ "process_wait", "Wait for a background process",
	  "Wait until a background process ends (or timeout_seconds pass) and return its record: state, output, and its result once exited.",
	  ID_PROP ", " PID_PROP ", \"timeout_seconds\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 3600, \"description\": \"How long to wait (default 30); a process still running then is returned as it is.\"}",
	  "[\"sandbox_id\", \"pid\"]", PROC_OUT, true, false, true, t_proc_wait },
	{ "process_kill", "Kill a background process", "Kill a background process and everything it started; returns its record.",
	  ID_PROP ", " PID_PROP, "[\"sandbox_id\", \"pid\"]", PROC_OUT, false, true, true, t_proc_kill },
	{ "file_read", "Read a file", "Read a file inside the sandbox (up to 64 MiB). encoding text (the default) gives UTF-8 text; a file that is not UTF-8 comes back as base64 (encoding says which).",
	  ID_PROP ", " PATH_PROP("Absolute path inside the sandbox, like /workspace/main.py.") ", "
	  "\"encoding\": {\"type\": \"string\", \"enum\": [\"text\", \"base64\"]}",
	  "[\"sandbox_id\", \"path\"]",
	  "{\"type\": \"object\", \"properties\": {\"path\": {\"type\": \"string\"}, \"size\": {\"type\": \"integer\"}, "
	  "\"encoding\": {\"type\": \"string\", \"enum\": [\"text\", \"base64\"]}, \"content\": {\"type\": \"string\"}}, "
	  "\"required\": [\"path\", \"size\", \"encoding\", \"content\"]}", true, false, true, t_read },
	{ "file_write", "Write a file", "Create or replace a file inside the sandbox (parents:true makes its missing directories). content is text, or base64 with encoding base64.",
	  ID_PROP ", " PATH_PROP("Absolute path inside the sandbox, like /workspace/main.py.") ", "
	  "\"content\": {\"type\": \"string\"}, \"encoding\": {\"type\": \"string\", \"enum\": [\"text\", \"base64\"]}, "
	  "\"parents\": {\"type\": \"boolean\", \"description\": \"Make the missing directories of path first.\"}",
	  "[\"sandbox_id\", \"path\", \"content\"]",
	  "{\"type\": \"object\", \"properties\": {\"path\": {\"type\": \"string\"}, \"size\": {\"type\": \"integer\"}}, \"required\": [\"path\", \"size\"]}",
	  false, true, true, t_write },
	{ "file_list", "List a directory", "The entries of a directory inside the sandbox: name, type (file, dir, symlink, other), size, mode (octal, \"0644\"), mtime, and a symlink's target (never followed). recursive:true lists the whole tree, names relative to path. At most 100000 entries a page: truncated:true with next, a cursor, when there are more; call again with cursor:next for the page after.",
	  ID_PROP ", " PATH_PROP("Absolute directory path inside the sandbox, like /workspace.") ", "
	  "\"recursive\": {\"type\": \"boolean\", \"description\": \"The whole tree beneath (never through a symlink).\"}, "
	  "\"cursor\": {\"type\": \"string\", \"description\": \"The next of the page before, for the page after it (same path and recursive).\"}",
	  "[\"sandbox_id\", \"path\"]",
	  "{\"type\": \"object\", \"properties\": {\"path\": {\"type\": \"string\"}, \"entries\": {\"type\": \"array\", \"items\": {\"type\": \"object\", "
	  "\"properties\": {\"name\": {\"type\": \"string\"}, \"type\": {\"type\": \"string\"}, \"size\": {\"type\": \"integer\"}, \"mode\": {\"type\": [\"integer\", \"string\"]}}}}, "
	  "\"truncated\": {\"type\": \"boolean\"}, \"next\": {\"type\": \"string\"}}, "
	  "\"required\": [\"path\", \"entries\"]}", true, false, true, t_files },
	{ "file_delete", "Delete a file", "Delete a regular file inside the sandbox.",
	  ID_PROP ", " PATH_PROP("Absolute path inside the sandbox."), "[\"sandbox_id\", \"path\"]",
	  ANY_OBJECT, false, true, true, t_delete_file },
	{ "file_mkdir", "Make a directory", "Make a directory inside the sandbox; parents:true makes the missing ones above it too and is no error when it exists.",
	  ID_PROP ", " PATH_PROP("Absolute directory path inside the sandbox, like /workspace/src.") ", "
	  "\"parents\": {\"type\": \"boolean\", \"description\": \"As mkdir -p.\"}",
	  "[\"sandbox_id\", \"path\"]",
	  "{\"type\": \"object\", \"properties\": {\"path\": {\"type\": \"string\"}, \"mode\": {\"type\": \"string\"}}, \"required\": [\"path\"]}",
	  false, false, true, t_mkdir },
	{ "file_rename", "Rename a file or directory", "Move a file, directory or symlink to another path inside the sandbox (a symlink is moved, not followed). overwrite:true replaces what is there.",
	  ID_PROP ", \"from\": {\"type\": \"string\", \"description\": \"Absolute path inside the sandbox.\"}, "
	  "\"to\": {\"type\": \"string\", \"description\": \"Absolute path inside the sandbox.\"}, "
	  "\"overwrite\": {\"type\": \"boolean\", \"description\": \"Replace an existing to.\"}",
	  "[\"sandbox_id\", \"from\", \"to\"]",
	  "{\"type\": \"object\", \"properties\": {\"from\": {\"type\": \"string\"}, \"to\": {\"type\": \"string\"}}, \"required\": [\"from\", \"to\"]}",
	  false, true, false, t_rename },
	{ "archive_read", "Download a directory as a tar archive", "A directory inside the sandbox as a tar archive in base64 (files, directories, symlinks as links; up to 64 MiB).",
	  ID_PROP ", " PATH_PROP("Absolute directory path inside the sandbox, like /workspace/out."),
	  "[\"sandbox_id\", \"path\"]",
	  "{\"type\": \"object\", \"properties\": {\"path\": {\"type\": \"string\"}, \"size\": {\"type\": \"integer\"}, \"encoding\": {\"const\": \"base64\"}, \"content\": {\"type\": \"string\"}}, \"required\": [\"path\", \"size\", \"content\"]}",
	  true, false, true, t_archive_read },
	{ "archive_write", "Upload a tar archive into a directory", "Unpack a tar archive (base64; plain or gzip'd) into a directory inside the sandbox, made if missing. "
	  "Archives with absolute or .. names, devices, setuid files, links out of the archive or more bytes than the sandbox's disk holds are refused whole.",
	  ID_PROP ", " PATH_PROP("Absolute directory path inside the sandbox, like /workspace.") ", "
	  "\"content\": {\"type\": \"string\", \"description\": \"The tar archive in base64.\"}",
	  "[\"sandbox_id\", \"path\", \"content\"]",
	  "{\"type\": \"object\", \"properties\": {\"path\": {\"type\": \"string\"}, \"entries\": {\"type\": \"integer\"}, \"bytes\": {\"type\": \"integer\"}}, \"required\": [\"path\", \"entries\"]}",
	  false, true, false, t_archive_write },
	{ "workspace_diff", "Show what the sandbox changed", "What the sandbox changed under /workspace: a list of changes (path, change: added/modified/deleted/type_changed/mode_changed), or with patch:true a git patch of what an export would let out.",
	  ID_PROP ", \"path\": {\"type\": \"string\", \"description\": \"Only changes at or beneath this path (relative to the workspace, or /workspace/...).\"}, "
	  "\"patch\": {\"type\": \"boolean\", \"description\": \"A git patch instead of the list.\"}",
	  "[\"sandbox_id\"]",
	  "{\"type\": \"object\", \"properties\": {\"format\": {\"type\": \"string\", \"enum\": [\"changes\", \"patch\"]}, \"changes\": {\"type\": \"array\"}, \"patch\": {\"type\": \"string\"}}, \"required\": [\"format\"]}",
	  true, false, true, t_diff },
	{ "workspace_export", "Export the sandbox's changes", "Let the sandbox's workspace changes out: mode patch (the default) answers the git patch; mode apply writes them onto the host workspace the sandbox was made on "
	  "(a host file changed meanwhile is a conflict, never overwritten). Changes that would make host tools run code (hooks, build files) are held with the reason; only a person lets one out (corral export --allow-risky).",
	  ID_PROP ", \"mode\": {\"type\": \"string\", \"enum\": [\"patch\", \"apply\"]}",
	  "[\"sandbox_id\"]",
	  "{\"type\": \"object\", \"properties\": {\"mode\": {\"type\": \"string\"}, \"changes\": {\"type\": \"integer\"}, \"exported\": {\"type\": \"array\"}, \"held\": {\"type\": \"array\"}, \"conflicts\": {\"type\": \"array\"}, \"patch\": {\"type\": \"string\"}}, \"required\": [\"mode\"]}",
	  false, true, false, t_export },
	{ "sandbox_pause", "Pause a sandbox", "Freeze everything in the sandbox until sandbox_resume; exec is refused meanwhile.",
	  ID_PROP, "[\"sandbox_id\"]", SANDBOX_OUT, false, false, true, t_pause },
	{ "sandbox_resume", "Resume a sandbox", "Thaw a paused sandbox.",
	  ID_PROP, "[\"sandbox_id\"]", SANDBOX_OUT, false, false, true, t_resume },
	{ "sandbox_halt", "Halt a sandbox", "Stop a sandbox for good but keep it for inspection: its processes are killed (or held frozen), its files stay readable, every further exec is refused.",
	  ID_PROP ", \"reason\": {\"type\": \"string\", \"description\": \"Why, for the audit log.\"}",
	  "[\"sandbox_id\"]", SANDBOX_OUT, false, true, true, t_halt },
	{ "sandbox_destroy", "Destroy a sandbox", "Destroy a sandbox: kill everything in it and throw away its files. Returns its final meters.",
	  ID_PROP, "[\"sandbox_id\"]", "{\"type\": \"object\", \"properties\": {\"id\": {\"type\": \"string\"}, \"state\": {\"type\": \"string\"}, \"meters\": {\"type\": \"object\"}}, \"required\": [\"id\", \"state\"]}",
	  false, true, true, t_destroy },
	{ "sandbox_events", "Read a sandbox's events",
	  "The sandbox's most recent audit events (exec.start/end, egress.allowed/denied, syscall.denied, limit.hit, halt ...), each with a reason sentence. denials_only keeps what was refused.",
	  ID_PROP ", \"limit\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 1000, \"description\": \"How many of the latest events (default 50).\"}, "
	  "\"denials_only\": {\"type\": \"boolean\", \"description\": \"Only denials, limits hit, aborts and halts.\"}",
	  "[\"sandbox_id\"]", "{\"type\": \"object\", \"properties\": {\"events\": {\"type\": \"array\", \"items\": {\"type\": \"object\"}}}, \"required\": [\"events\"]}",
	  true, false, true, t_events },
};

#define NTOOLS (sizeof(tools) / sizeof(tools[0]))

static json_t *tool_json(const struct tool *t)
{
	char *props;
	json_t *input, *output, *required;

	if (asprintf(&props, "{%s}", t->input) < 0)
		return NULL;
	input = json_pack("{s:s,s:o,s:b}", "type", "object", "properties",
			  json_loads(props, 0, NULL), "additionalProperties", 0);
	free(props);
	required = json_loads(t->required, 0, NULL);
	if (input && json_array_size(required))
		json_object_set(input, "required", required);
	json_decref(required);
	output = json_loads(t->output, 0, NULL);
	return json_pack("{s:s,s:s,s:s,s:o,s:o,s:{s:s,s:b,s:b,s:b,s:b}}",
			 "name", t->name, "title", t->title, "description", t->description,
			 "inputSchema", input, "outputSchema", output,
			 "annotations", "title", t->title, "readOnlyHint", t->read_only,
			 "destructiveHint", t->destructive, "idempotentHint", t->idempotent,
			 "openWorldHint", 0);
}

json_t *mcp_tools_list(void)
{
	json_t *list = json_array();

	for (size_t i = 0; list && i < NTOOLS; i++) {
		json_t *t = tool_json(&tools[i]);

		if (!t) {
			cli_error("mcp: the schema of tool %s does not parse", tools[i].name);
			json_decref(list);
			return NULL;
		}
		json_array_append_new(list, t);
	}
	return json_pack("{s:o}", "tools", list);
}

/*
 * An argument the tool does not take is a mistake worth saying, with the
 * names it does take: a model that guessed "sandbox" for "sandbox_id"
 * corrects itself from the answer alone.
 */
static void unknown_args(const struct tool *t, struct args *g)
{
	char *props, takes[512] = "";
	size_t off = 0;
	json_t *p, *v, *pv;
	const char *k, *pk;

	if (asprintf(&props, "{%s}", t->input) < 0) {
		bad(g, "out of memory");
		return;
	}
	p = json_loads(props, 0, NULL);
	free(props);
	json_object_foreach(p, pk, pv) {
		int n = snprintf(takes + off, sizeof(takes) - off, "%s%s",
				 off ? ", " : "", pk);

		if (n < 0 || (size_t)n >= sizeof(takes) - off)
			break;	/* the schema in tools/list has them all */
		off += (size_t)n;
	}
	json_object_foreach((json_t *)g->a, k, v)
		if (!json_object_get(p, k))
			bad(g, "unknown argument \"%.64s\"; %s takes %s", k, t->name,
			    off ? takes : "none");
	json_decref(p);
}

json_t *mcp_tools_call(struct mcp_call *call, int *code, char **why)
{
	const char *name = json_string_value(json_object_get(call->params, "name"));
	json_t *a = json_object_get(call->params, "arguments");
	struct args g = { .a = a, .m = call->m };
	json_t *empty = NULL, *r;

	for (size_t i = 0; i < NTOOLS; i++) {
		if (strcmp(name, tools[i].name))
			continue;
		if (!a)
			g.a = empty = json_object();
		unknown_args(&tools[i], &g);
		if (!g.why && is_big(name)) {
			if (big_enter(call) < 0) {
				json_decref(empty);
				return tool_error("cancelled while waiting for a turn");
			}
			call->big = true;
		}
		r = g.why ? NULL : tools[i].fn(call, &g);
		if (g.why) {
			json_decref(r);
			r = tool_error("%s: %s", name, g.why);
			free(g.why);
		}
		json_decref(empty);
		return r;
	}
	*code = -32602;
	if (asprintf(why, "unknown tool \"%s\"; tools/list names them", name) < 0)
		*why = NULL;
	return NULL;
}
