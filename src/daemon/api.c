/*
 * api.c - the HTTP API of corral serve (docs/API.md), over libcorral's
 * boxes.  Every handler validates all of its input before it creates
 * anything: a request that fails leaves nothing behind.
 */
#include "daemon.h"
#include "events.h"		/* json_bytes */

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/keyvalq_struct.h>
#include <sys/queue.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#define IDLE_FREEZE_DEFAULT_MS	2000

/* ---- replies ------------------------------------------------------------- */

static void reply_json(struct evhttp_request *req, int code, json_t *o)
{
	struct evbuffer *buf = evbuffer_new();
	char *text = o ? json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;

	json_decref(o);
	if (!buf || !text) {
		free(text);
		if (buf)
			evbuffer_free(buf);
		evhttp_send_error(req, 500, "out of memory");
		return;
	}
	evbuffer_add(buf, text, strlen(text));
	evbuffer_add(buf, "\n", 1);
	free(text);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
			  "application/json");
	evhttp_send_reply(req, code, code < 300 ? "OK" : "Error", buf);
	evbuffer_free(buf);
}

__attribute__((format(printf, 4, 5)))
static void reply_error(struct evhttp_request *req, int code, const char *error,
			const char *fmt, ...)
{
	char detail[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	reply_json(req, code, json_pack("{s:s, s:s}", "error", error,
					"detail", detail));
}

/* A library error, with the status its errno deserves. */
static void reply_err(struct evhttp_request *req, const struct corral_err *err)
{
	switch (err->code) {
	case -EINVAL:
	case -E2BIG:
	case -ENAMETOOLONG:
	case -ELOOP:
	case -EXDEV:
	case -EISDIR:
	case -ENOTDIR:
		reply_error(req, 400, "bad_request", "%s", err->msg);
		break;
	case -ENOENT:
	case -ESRCH:
		reply_error(req, 404, "not_found", "%s", err->msg);
		break;
	case -EACCES:
	case -EPERM:
	case -EROFS:
		reply_error(req, err->code == -EPERM ? 409 : 403,
			    err->code == -EPERM ? "conflict" : "forbidden", "%s",
			    err->msg);
		break;
	case -EBUSY:
	case -EALREADY:
	case -EAGAIN:
		reply_error(req, 409, "conflict", "%s", err->msg);
		break;
	case -EMFILE:
	case -ENFILE:
		reply_error(req, 503, "busy", "%s (the daemon's open-files limit; "
			    "raise it with ulimit -n)", err->msg);
		break;
	case -ENOSPC:
	case -EDQUOT:
	case -EFBIG:
		reply_error(req, 507, "no_space", "%s", err->msg);
		break;
	default:
		reply_error(req, 500, "internal", "%s", err->msg);
	}
}

/* ---- request bodies -------------------------------------------------------- */

/* The body as JSON, strictly: an object, no duplicate keys, size-capped. */
static json_t *body_json(struct evhttp_request *req, bool required)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t len = evbuffer_get_length(in);
	json_error_t je;
	json_t *o;

	if (len > API_JSON_MAX) {
		reply_error(req, 413, "too_large", "the JSON body is %zu bytes; "
			    "the limit is %d", len, API_JSON_MAX);
		return NULL;
	}
	if (len == 0 && !required)
		return json_object();
	o = json_loadb((const char *)evbuffer_pullup(in, -1), len,
		       JSON_REJECT_DUPLICATES, &je);
	if (!o) {
		reply_error(req, 400, "bad_request", "the body is not JSON: %s "
			    "(line %d, column %d)", je.text, je.line, je.column);
		return NULL;
	}
	if (!json_is_object(o)) {
		json_decref(o);
		reply_error(req, 400, "bad_request", "the body must be a JSON object");
		return NULL;
	}
	return o;
}

/* Unknown fields are errors: a typo must not silently mean "default". */
static bool only_fields(struct evhttp_request *req, json_t *o,
			const char *const *known)
{
	const char *key;
	json_t *v;

	json_object_foreach(o, key, v) {
		size_t i;

		for (i = 0; known[i] && strcmp(known[i], key); i++)
			;
		if (!known[i]) {
			reply_error(req, 400, "bad_request", "unknown field \"%.100s\"",
				    key);
			return false;
		}
	}
	return true;
}

/* A whole number of ms from a number of seconds, in range. */
static bool seconds_field(struct evhttp_request *req, json_t *o, const char *key,
			  double max, uint64_t *ms)
{
	json_t *v = json_object_get(o, key);
	double s;

	if (!v || json_is_null(v))
		return true;
	if (!json_is_number(v) || (s = json_number_value(v)) < 0 || s > max) {
		reply_error(req, 400, "bad_request", "%s must be a number of seconds "
			    "from 0 to %.0f", key, max);
		return false;
	}
	*ms = (uint64_t)(s * 1000 + 0.5);
	return true;
}

static bool string_field(struct evhttp_request *req, json_t *o, const char *key,
			 size_t max, const char **out)
{
	json_t *v = json_object_get(o, key);

	if (!v || json_is_null(v))
		return true;
	if (!json_is_string(v) || json_string_length(v) == 0 ||
	    json_string_length(v) > max ||
	    strlen(json_string_value(v)) != json_string_length(v)) {
		reply_error(req, 400, "bad_request", "%s must be a string of 1 to "
			    "%zu bytes with no NUL", key, max);
		return false;
	}
	*out = json_string_value(v);
	return true;
}

/* ---- sandboxes -------------------------------------------------------------- */

static struct sandbox *find(struct daemon *d, const char *id)
{
	for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next)
		if (!sb->pooled && !strcmp(sb->id, id))
			return sb;
	return NULL;
}

static json_t *meters_json(struct corral_box *b)
{
	struct corral_meters m;

	corral_box_meters(b, &m);
	return json_pack("{s:f, s:I, s:f, s:f, s:f, s:I}", "cpu_seconds", m.cpu_seconds,
			 "memory_peak_bytes", (json_int_t)m.memory_peak_bytes,
			 "memory_byte_seconds", m.memory_byte_seconds,
			 "active_seconds", m.active_seconds,
			 "frozen_seconds", m.frozen_seconds,
			 "calls", (json_int_t)m.calls);
}

static json_t *sandbox_json(struct sandbox *sb)
{
	struct corral_layers l = { 0 };
	const char *halt = corral_box_halt_reason(sb->box);

	corral_box_layers(sb->box, &l);
	return json_pack("{s:s, s:s, s:s, s:O, s:f, s:I, s:I, s:I, s:s?, s:s, s:i, s:o}",
			 "id", sb->id,
			 "state", corral_box_state_name(corral_box_state(sb->box)),
			 "created", sb->created, "labels", sb->labels,
			 "ttl_seconds", sb->ttl_ms / 1000.0,
			 "idle_freeze_ms", (json_int_t)sb->idle_freeze_ms,
			 "processes", (json_int_t)sb->nprocs,
			 "running", (json_int_t)corral_box_running(sb->box),
			 "halt_reason", halt,
			 "limits", l.limits ? l.limits : "none",
			 "landlock_abi", l.landlock_abi,
			 "meters", meters_json(sb->box));
}

static void proc_free(struct proc *pr)
{
	if (pr->creating)
		reply_error(pr->creating, 410, "gone", "the sandbox was destroyed");
	if (pr->deleting)
		reply_error(pr->deleting, 410, "gone", "the sandbox was destroyed");
	corral_call_free(pr->call);
	json_decref(pr->argv);
	free(pr);
}

void sandbox_destroy(struct sandbox *sb, const char *why)
{
	struct daemon *d = sb->d;

	if (sb->creating)
		reply_error(sb->creating, 500, "internal", "%s", why);
	while (sb->procs) {
		struct proc *pr = sb->procs;

		sb->procs = pr->next;
		proc_free(pr);
	}
	if (sb->ev_ttl)
		event_free(sb->ev_ttl);
	if (sb->prev)
		sb->prev->next = sb->next;
	else
		d->sandboxes = sb->next;
	if (sb->next)
		sb->next->prev = sb->prev;
	d->nsandboxes--;
	corral_box_destroy(sb->box);
	state_remove(d, sb->id);
	json_decref(sb->labels);
	free(sb);
}

static void on_ttl(evutil_socket_t fd, short what, void *arg)
{
	struct sandbox *sb = arg;

	(void)fd;
	(void)what;
	corral_box_note(sb->box, "ttl.expired",
			"the sandbox outlived its ttl_seconds and was destroyed");
	sandbox_destroy(sb, "the sandbox's TTL expired");
}

static void arm_ttl(struct sandbox *sb)
{
	struct timeval tv = { sb->ttl_ms / 1000, (sb->ttl_ms % 1000) * 1000 };

	if (!sb->ttl_ms)
		return;
	sb->ev_ttl = evtimer_new(sb->d->base, on_ttl, sb);
	if (sb->ev_ttl)
		evtimer_add(sb->ev_ttl, &tv);
}

/*
 * Hand a ready sandbox to the request that asked for it.  A sandbox the
 * daemon cannot record (its state directory full) is not handed out: after
 * a crash nobody would know it had existed.
 */
static void hand_out(struct sandbox *sb, struct evhttp_request *req)
{
	int r = state_write(sb->d, sb);

	if (r < 0) {
		reply_error(req, 507, "no_space", "cannot record the sandbox in "
			    "%s/sandboxes: %s", sb->d->state_dir, strerror(-r));
		sandbox_destroy(sb, "unrecorded");
		return;
	}
	sb->pooled = false;
	corral_box_set_idle_freeze(sb->box, sb->idle_freeze_ms);
	arm_ttl(sb);
	reply_json(req, 201, sandbox_json(sb));
}

/* A path the request names that is not there is the request's fault. */
static void create_failed(struct evhttp_request *req, const struct corral_err *err)
{
	if (err->code == -ENOENT || err->code == -ENOTDIR || err->code == -EINVAL)
		reply_error(req, 400, "bad_request", "the sandbox could not be built: "
			    "%s", err->msg);
	else if (err->code == -EMFILE || err->code == -ENFILE || err->code == -EAGAIN)
		reply_err(req, err);
	else
		reply_error(req, 500, "internal", "the sandbox could not be built: "
			    "%s", err->msg);
}

static void on_ready(void *arg, struct corral_box *b, const struct corral_err *err)
{
	struct sandbox *sb = arg;
	struct evhttp_request *req = sb->creating;

	(void)b;
	sb->creating = NULL;
	if (err) {
		if (req)
			create_failed(req, err);
		sandbox_destroy(sb, err->msg);
		return;
	}
	sb->ready = true;
	if (req)
		hand_out(sb, req);
}

static void on_dead(void *arg, struct corral_box *b)
{
	(void)b;
	(void)arg;
	/* kept, in state "dead", until deleted: its record says what happened */
}

static void new_id(char *buf, size_t len)
{
	unsigned char r[6] = { 0 };

	if (getrandom(r, sizeof(r), 0) != sizeof(r)) {
		uint64_t t = (uint64_t)time(NULL) ^ (uint64_t)getpid() << 16;

		memcpy(r, &t, sizeof(r));
	}
	snprintf(buf, len, "sb-%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3],
		 r[4], r[5]);
}

static struct sandbox *sandbox_new(struct daemon *d, struct corral_policy *p,
				   struct corral_err *err)
{
	struct sandbox *sb = calloc(1, sizeof(*sb));
	struct corral_box_opts o = { 0 };
	time_t now = time(NULL);

	if (!sb) {
		corral_policy_free(p);
		free(p);
		corral_set_err(err, -ENOMEM, "out of memory");
		return NULL;
	}
	sb->d = d;
	new_id(sb->id, sizeof(sb->id));
	strftime(sb->created, sizeof(sb->created), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	sb->labels = json_object();
	sb->idle_freeze_ms = IDLE_FREEZE_DEFAULT_MS;
	o.id = sb->id;
	o.log = d->log;
	o.on_ready = on_ready;
	o.on_dead = on_dead;
	o.arg = sb;
	if (corral_box_create(d->base, p, &o, &sb->box, err) < 0) {
		json_decref(sb->labels);
		free(sb);
		return NULL;
	}
	sb->next = d->sandboxes;
	if (d->sandboxes)
		d->sandboxes->prev = sb;
	d->sandboxes = sb;
	d->nsandboxes++;
	return sb;
}

/*
 * A sandbox holds a few fds in the daemon (pidfd, control socket, root,
 * seccomp listener; more in proxy mode) and each call a few more while it
 * runs.  Refuse a create that would leave less than a margin under the
 * limit, rather than fail later in the middle of a call.
 */
#define FD_MARGIN	64

static int open_fds(void)
{
	DIR *dir = opendir("/proc/self/fd");
	int n = 0;

	if (!dir)
		return -1;
	while (readdir(dir))
		n++;
	closedir(dir);
	return n - 2;
}

static bool fd_room(struct daemon *d)
{
	struct rlimit rl;
	int n;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		return true;
	/* far from the limit by any count: no need to list /proc/self/fd */
	if ((rlim_t)(d->nsandboxes * 16 + 4 * FD_MARGIN) < rl.rlim_cur)
		return true;
	n = open_fds();
	return n < 0 || (rlim_t)n + FD_MARGIN < rl.rlim_cur;
}

static struct corral_policy *default_policy(void)
{
	struct corral_policy *p = malloc(sizeof(*p));

	if (p)
		corral_policy_init(p);
	return p;
}

#define POOL_QUIET_MS	100	/* refill once requests have paused this long */

static void pool_step(evutil_socket_t fd, short what, void *arg);

/*
 * Keep pool_size default sandboxes built ahead, one a turn of the loop,
 * and only while no request has come for POOL_QUIET_MS: building one holds
 * the loop for a cgroup attach, and during a burst the requests come first.
 */
void pool_fill(struct daemon *d)
{
	uint64_t quiet = corral_now_ms() - d->last_create;
	struct timeval tv = { 0, quiet >= POOL_QUIET_MS ? 0 :
			      (POOL_QUIET_MS - quiet) * 1000 };

	if (!d->pool_size)
		return;
	if (!d->ev_pool)
		d->ev_pool = evtimer_new(d->base, pool_step, d);
	if (d->ev_pool && !evtimer_pending(d->ev_pool, NULL))
		evtimer_add(d->ev_pool, &tv);
}

static void pool_step(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;
	struct corral_err err;
	struct corral_policy *p;
	struct sandbox *sb;
	size_t n = 0;

	(void)fd;
	(void)what;
	for (sb = d->sandboxes; sb; sb = sb->next)
		n += sb->pooled;
	if (n >= d->pool_size || d->nsandboxes >= d->max_sandboxes || !fd_room(d))
		return;
	if (corral_now_ms() - d->last_create < POOL_QUIET_MS) {
		pool_fill(d);	/* still busy: later */
		return;
	}
	p = default_policy();
	sb = p ? sandbox_new(d, p, &err) : NULL;
	if (!sb)
		return;		/* tried again by the next create */
	sb->pooled = true;
	pool_fill(d);
}

static struct sandbox *pool_take(struct daemon *d)
{
	for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next)
		if (sb->pooled && sb->ready)
			return sb;
	return NULL;
}

static bool labels_ok(struct evhttp_request *req, json_t *labels)
{
	const char *k;
	json_t *v;

	if (!json_is_object(labels) || json_object_size(labels) > API_LABELS_MAX) {
		reply_error(req, 400, "bad_request", "labels must be an object of at "
			    "most %d string values", API_LABELS_MAX);
		return false;
	}
	json_object_foreach(labels, k, v) {
		if (!json_is_string(v) || strlen(k) > 128 || json_string_length(v) > 1024) {
			reply_error(req, 400, "bad_request", "label \"%.100s\": values are "
				    "strings of at most 1024 bytes, keys at most 128", k);
			return false;
		}
	}
	return true;
}

static void create(struct daemon *d, struct evhttp_request *req)
{
	static const char *const known[] = { "policy", "workspace", "ttl_seconds",
		"idle_freeze_ms", "labels", NULL };
	json_t *o, *pol, *labels, *idle;
	struct corral_policy *p = NULL;
	struct corral_err err = { 0 };
	const char *ws = NULL;
	uint64_t ttl = 0, idle_ms = IDLE_FREEZE_DEFAULT_MS;
	struct sandbox *sb;

	d->last_create = corral_now_ms();	/* the pool waits for a burst to pass */
	o = body_json(req, false);
	if (!o)
		return;
	if (!only_fields(req, o, known) ||
	    !seconds_field(req, o, "ttl_seconds", 30 * 86400, &ttl) ||
	    !string_field(req, o, "workspace", 4095, &ws))
		goto out;
	idle = json_object_get(o, "idle_freeze_ms");
	if (idle && (!json_is_integer(idle) || json_integer_value(idle) < 0 ||
		     json_integer_value(idle) > 86400000)) {
		reply_error(req, 400, "bad_request", "idle_freeze_ms must be an "
			    "integer from 0 to 86400000");
		goto out;
	}
	if (idle)
		idle_ms = json_integer_value(idle);
	labels = json_object_get(o, "labels");
	if (labels && !labels_ok(req, labels))
		goto out;
	pol = json_object_get(o, "policy");
	if (pol && !json_is_object(pol)) {
		reply_error(req, 400, "bad_request", "policy must be a JSON object "
			    "in the policy-file format");
		goto out;
	}
	if (corral_log_error(d->log)) {
		reply_error(req, 507, "no_space", "the audit log %s/audit.jsonl "
			    "cannot be written (%s): no new sandbox until it can",
			    d->state_dir, strerror(corral_log_error(d->log)));
		goto out;
	}
	if (!fd_room(d)) {
		struct rlimit rl = { 0, 0 };

		getrlimit(RLIMIT_NOFILE, &rl);
		reply_error(req, 503, "busy", "the daemon is near its open-files "
			    "limit (%llu, with %zu sandboxes): raise it (ulimit -n) "
			    "or destroy sandboxes", (unsigned long long)rl.rlim_cur,
			    d->nsandboxes);
		goto out;
	}
	if (d->nsandboxes - (pool_take(d) ? 1 : 0) >= d->max_sandboxes) {
		reply_error(req, 503, "busy", "%zu sandboxes are alive, the limit "
			    "(--max-sandboxes)", d->max_sandboxes);
		goto out;
	}
	if (!pol && !ws && (sb = pool_take(d))) {
		/* built ahead with exactly this (default) policy */
	} else {
		p = default_policy();
		if (!p) {
			reply_error(req, 500, "internal", "out of memory");
			goto out;
		}
		if (pol) {
			char *text = json_dumps(pol, JSON_COMPACT);

			if (!text || corral_policy_load_string(p, text, strlen(text),
							       "policy", &err) < 0) {
				free(text);
				reply_error(req, 422, "policy", "%s", err.msg[0] ?
					    err.msg : "out of memory");
				corral_policy_free(p);
				free(p);
				goto out;
			}
			free(text);
		}
		if (ws && corral_policy_set_workspace(p, ws, &err) < 0) {
			reply_error(req, 400, "bad_request", "%s", err.msg);
			corral_policy_free(p);
			free(p);
			goto out;
		}
		sb = sandbox_new(d, p, &err);	/* takes p */
		if (!sb) {
			create_failed(req, &err);
			goto out;
		}
	}
	sb->ttl_ms = ttl;
	sb->idle_freeze_ms = idle_ms;
	if (labels)
		json_object_update(sb->labels, labels);
	if (sb->ready)
		hand_out(sb, req);
	else
		sb->creating = req;
	pool_fill(d);
out:
	json_decref(o);
}

/* ---- exec ------------------------------------------------------------------- */

/*
 * The client went away while we held its request.  libevent has handed
 * the request to us (it is no longer on the connection): ending it frees
 * it.  A request still on its connection is libevent's to free.
 */
static void forget_request(struct evhttp_request *req)
{
	if (req && !evhttp_request_get_connection(req))
		evhttp_send_reply_end(req);
}

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
		evhttp_connection_set_closecb(evhttp_request_get_connection(pd->req),
					      NULL, NULL);
}

/* Bytes evhttp still holds for this client. */
static size_t queued(struct evhttp_request *req)
{
	struct evhttp_connection *conn = evhttp_request_get_connection(req);
	struct bufferevent *bev = conn ? evhttp_connection_get_bufferevent(conn) : NULL;

	return bev ? evbuffer_get_length(bufferevent_get_output(bev)) : 0;
}

static void stream_drained(struct evhttp_connection *conn, void *arg)
{
	struct pending *pd = arg;

	(void)conn;
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
		if (!pd->held && pd->call && queued(pd->req) + evbuffer_get_length(buf) >
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

static json_t *result_json(const struct corral_result *res)
{
	char *text = corral_result_json(res);
	json_t *o = text ? json_loads(text, 0, NULL) : NULL;

	free(text);
	if (o)
		json_object_set_new(o, "tool_call_id", json_string(res->tool_call));
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

static void exec_output(void *arg, struct corral_call *c, int stream,
			const char *data, size_t len)
{
	struct pending *pd = arg;

	(void)c;
	if (pd->stream)
		stream_line(pd, json_pack("{s:s, s:o}", "type", stream == 2 ?
					  "stderr" : "stdout", "data",
					  json_bytes(data, len)));
}

static void exec_done(void *arg, struct corral_call *c,
		      const struct corral_result *res)
{
	struct pending *pd = arg;

	pending_detach(pd);
	if (pd->req && pd->stream) {
		stream_line(pd, json_pack("{s:s, s:o}", "type", "end", "result",
					  result_json(res)));
		evhttp_send_reply_end(pd->req);
	} else if (pd->req) {
		reply_json(pd->req, 200, result_json(res));
	}
	corral_call_free(c);
	free(pd);
}

/* argv from "argv" or "command", env from an object: validated, no NULs. */
static char **exec_argv(struct evhttp_request *req, json_t *o)
{
	json_t *argv = json_object_get(o, "argv"), *cmd = json_object_get(o, "command");
	char **v;
	size_t n;

	if (!argv == !cmd) {
		reply_error(req, 400, "bad_request", "give exactly one of \"argv\" "
			    "(an array of strings) and \"command\" (a string)");
		return NULL;
	}
	if (cmd) {
		if (!json_is_string(cmd) || !json_string_length(cmd) ||
		    strlen(json_string_value(cmd)) != json_string_length(cmd)) {
			reply_error(req, 400, "bad_request", "command must be a "
				    "non-empty string with no NUL");
			return NULL;
		}
		v = calloc(4, sizeof(char *));
		if (v) {
			v[0] = "/bin/sh";
			v[1] = "-c";
			v[2] = (char *)json_string_value(cmd);
		}
		return v;
	}
	n = json_array_size(argv);
	if (!json_is_array(argv) || n == 0 || n > 4096) {
		reply_error(req, 400, "bad_request", "argv must be an array of 1 to "
			    "4096 strings");
		return NULL;
	}
	v = calloc(n + 1, sizeof(char *));
	for (size_t i = 0; v && i < n; i++) {
		json_t *a = json_array_get(argv, i);

		if (!json_is_string(a) || strlen(json_string_value(a)) !=
		    json_string_length(a) || (i == 0 && !json_string_length(a))) {
			reply_error(req, 400, "bad_request", "argv[%zu] must be a "
				    "string with no NUL (argv[0] not empty)", i);
			free(v);
			return NULL;
		}
		v[i] = (char *)json_string_value(a);
	}
	if (!v)
		reply_error(req, 500, "internal", "out of memory");
	return v;
}

static char **exec_env(struct evhttp_request *req, json_t *o, bool *ok)
{
	json_t *env = json_object_get(o, "env"), *v;
	const char *k;
	char **e;
	size_t i = 0;

	*ok = true;
	if (!env)
		return NULL;
	if (!json_is_object(env) || json_object_size(env) > 1024) {
		reply_error(req, 400, "bad_request", "env must be an object of at "
			    "most 1024 string values");
		*ok = false;
		return NULL;
	}
	e = calloc(json_object_size(env) + 1, sizeof(char *));
	json_object_foreach(env, k, v) {
		if (!e || !json_is_string(v) || !k[0] || strchr(k, '=') ||
		    strlen(json_string_value(v)) != json_string_length(v) ||
		    strlen(k) > 255 ||
		    asprintf(&e[i++], "%s=%s", k, json_string_value(v)) < 0) {
			reply_error(req, 400, "bad_request", "env \"%.100s\": names "
				    "are 1 to 255 bytes without '=', values strings "
				    "without NUL", k);
			for (size_t j = 0; e && e[j]; j++)
				free(e[j]);
			free(e);
			*ok = false;
			return NULL;
		}
	}
	return e;
}

static void free_env(char **e)
{
	for (size_t i = 0; e && e[i]; i++)
		free(e[i]);
	free(e);
}

static void proc_done(void *arg, struct corral_call *c,
		      const struct corral_result *res);
static void proc_start(void *arg, struct corral_call *c);

static json_t *proc_json(struct proc *pr, bool output)
{
	const struct corral_result *res = corral_call_result(pr->call);
	json_t *o = json_pack("{s:i, s:s, s:O, s:s}", "pid", (int)pr->pid,
			      "tool_call_id", corral_call_id(pr->call),
			      "argv", pr->argv, "state", res ? "exited" : "running");

	if (o && res)
		json_object_set_new(o, "result", result_json(res));
	if (o && output) {
		const struct corral_output *out = corral_call_output(pr->call, 1);
		const struct corral_output *er = corral_call_output(pr->call, 2);

		json_object_set_new(o, "stdout", json_bytes(out->data, out->len));
		json_object_set_new(o, "stderr", json_bytes(er->data, er->len));
	}
	return o;
}

static void start_call(struct sandbox *sb, struct evhttp_request *req,
		       bool background)
{
	static const char *const known[] = { "argv", "command", "tool_call_id",
		"cwd", "env", "stdin", "timeout_seconds", "stream", NULL };
	json_t *o = body_json(req, true), *stream, *in;
	struct corral_call_opts co = { 0 };
	struct corral_err err = { 0 };
	struct pending *pd = NULL;
	struct proc *pr = NULL;
	struct corral_call *c;
	char **argv = NULL, **env = NULL;
	bool ok = true;

	if (!o)
		return;
	if (!only_fields(req, o, known) ||
	    !seconds_field(req, o, "timeout_seconds", 7 * 86400, &co.timeout_ms) ||
	    !string_field(req, o, "tool_call_id", 127, &co.tool_call) ||
	    !string_field(req, o, "cwd", 4095, &co.cwd))
		goto out;
	stream = json_object_get(o, "stream");
	in = json_object_get(o, "stdin");
	if ((stream && !json_is_boolean(stream)) || (background && stream)) {
		reply_error(req, 400, "bad_request", background ? "stream is for "
			    "exec, not processes" : "stream must be true or false");
		goto out;
	}
	if (in && !json_is_string(in)) {
		reply_error(req, 400, "bad_request", "stdin must be a string");
		goto out;
	}
	argv = exec_argv(req, o);
	if (!argv)
		goto out;
	env = exec_env(req, o, &ok);
	if (!ok)
		goto out;
	co.argv = argv;
	co.env = env;
	if (in) {
		co.stdin_data = json_string_value(in);
		co.stdin_len = json_string_length(in);
	}
	if (background) {
		pr = calloc(1, sizeof(*pr));
		if (!pr) {
			reply_error(req, 500, "internal", "out of memory");
			goto out;
		}
		pr->sb = sb;
		co.keep_tail = true;
		co.on_start = proc_start;
		co.on_done = proc_done;
		co.arg = pr;
	} else {
		pd = calloc(1, sizeof(*pd));
		if (!pd) {
			reply_error(req, 500, "internal", "out of memory");
			goto out;
		}
		pd->sb = sb;
		pd->req = req;
		pd->stream = stream && json_is_true(stream);
		co.on_start = exec_start;
		co.on_output = exec_output;
		co.on_done = exec_done;
		co.arg = pd;
	}
	if (corral_box_exec(sb->box, &co, &c, &err) < 0) {
		reply_err(req, &err);
		free(pd);
		free(pr);
		goto out;
	}
	sb->d->execs++;
	if (pr) {
		pr->call = c;
		pr->argv = json_object_get(o, "argv") ?
			   json_deep_copy(json_object_get(o, "argv")) :
			   json_pack("[s, s, O]", "/bin/sh", "-c",
				     json_object_get(o, "command"));
		pr->next = sb->procs;
		sb->procs = pr;
		sb->nprocs++;
		/* answered by proc_start, once the pid is known */
		pr->creating = req;
	} else {
		pd->call = c;
		evhttp_connection_set_closecb(evhttp_request_get_connection(req),
					      pending_gone, pd);
		watch_client(pd, req);
		if (pd->stream) {
			evhttp_add_header(evhttp_request_get_output_headers(req),
					  "Content-Type", "application/x-ndjson");
			evhttp_send_reply_start(req, 200, "OK");
		}
	}
out:
	free(argv);
	free_env(env);
	json_decref(o);
}

/* ---- background processes ------------------------------------------------------ */

static void proc_start(void *arg, struct corral_call *c)
{
	struct proc *pr = arg;

	pr->pid = corral_call_pid(c);
	if (pr->creating) {
		reply_json(pr->creating, 201, json_pack("{s:i, s:s}", "pid",
			   (int)pr->pid, "tool_call_id", corral_call_id(c)));
		pr->creating = NULL;
	}
}

static void proc_done(void *arg, struct corral_call *c,
		      const struct corral_result *res)
{
	struct proc *pr = arg;

	(void)c;
	/* it never started (not found, bad cwd): the POST gets the result */
	if (pr->creating) {
		reply_json(pr->creating, 201, json_pack("{s:i, s:s, s:o}", "pid", 0,
			   "tool_call_id", res->tool_call, "result",
			   result_json(res)));
		pr->creating = NULL;
	}
	if (pr->deleting) {
		reply_json(pr->deleting, 200, proc_json(pr, true));
		pr->deleting = NULL;
	}
}

static struct proc *find_proc(struct sandbox *sb, const char *pid_text)
{
	char *end;
	long pid = strtol(pid_text, &end, 10);

	if (*end || pid <= 0)
		return NULL;
	for (struct proc *pr = sb->procs; pr; pr = pr->next)
		if (pr->pid == pid)
			return pr;
	return NULL;
}

/* Keep at most API_PROCS_KEPT records: the oldest ended ones go first. */
static void procs_trim(struct sandbox *sb)
{
	while (sb->nprocs > API_PROCS_KEPT) {
		struct proc **pp, **old = NULL;

		for (pp = &sb->procs; *pp; pp = &(*pp)->next)
			if (corral_call_result((*pp)->call) && !(*pp)->deleting)
				old = pp;
		if (!old)
			return;
		struct proc *pr = *old;

		*old = pr->next;
		sb->nprocs--;
		proc_free(pr);
	}
}

static void processes(struct sandbox *sb, struct evhttp_request *req,
		      const char *pid)
{
	enum evhttp_cmd_type m = evhttp_request_get_command(req);
	struct proc *pr;

	if (!pid) {
		if (m == EVHTTP_REQ_POST) {
			procs_trim(sb);
			start_call(sb, req, true);
		} else if (m == EVHTTP_REQ_GET) {
			json_t *a = json_array();

			for (pr = sb->procs; pr; pr = pr->next)
				if (pr->pid)
					json_array_append_new(a, proc_json(pr, false));
			reply_json(req, 200, json_pack("{s:o}", "processes", a));
		} else {
			reply_error(req, 405, "method_not_allowed", "processes: GET "
				    "or POST");
		}
		return;
	}
	pr = find_proc(sb, pid);
	if (!pr) {
		reply_error(req, 404, "not_found", "no process %.32s in sandbox %s",
			    pid, sb->id);
		return;
	}
	if (m == EVHTTP_REQ_GET) {
		reply_json(req, 200, proc_json(pr, true));
	} else if (m == EVHTTP_REQ_DELETE) {
		if (corral_call_result(pr->call) || pr->deleting) {
			reply_json(req, 200, proc_json(pr, true));
			return;
		}
		pr->deleting = req;
		corral_call_kill(pr->call, SIGKILL);
	} else {
		reply_error(req, 405, "method_not_allowed", "a process: GET or DELETE");
	}
}

/* ---- files ------------------------------------------------------------------ */

/* ?path=P[&list=1], decoded; a NUL inside the path is an error. */
static bool file_query(struct evhttp_request *req, char *path, size_t len,
		       bool *list)
{
	const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
	struct evkeyvalq kv;
	const char *v, *l;
	bool ok = true;

	TAILQ_INIT(&kv);
	if (!q || evhttp_parse_query_str(q, &kv) < 0 ||
	    !(v = evhttp_find_header(&kv, "path"))) {
		evhttp_clear_headers(&kv);
		reply_error(req, 400, "bad_request", "the query must give "
			    "path=/absolute/path/in/the/sandbox");
		return false;
	}
	/* evhttp decodes %00 into the string: a shorter string than sent */
	if (strstr(q, "%00") || strlen(v) >= len || v[0] != '/') {
		reply_error(req, 400, "bad_request", "path must be absolute, under "
			    "%zu bytes, with no NUL (got \"%.200s\")", len, v);
		ok = false;
	}
	snprintf(path, len, "%s", v);
	l = evhttp_find_header(&kv, "list");
	*list = l && strcmp(l, "0") && strcmp(l, "false");
	evhttp_clear_headers(&kv);
	return ok;
}

static void file_get(struct sandbox *sb, struct evhttp_request *req,
		     const char *path)
{
	struct corral_err err = { 0 };
	struct evbuffer *buf;
	struct stat st;
	int fd;

	if (corral_box_open(sb->box, path, O_RDONLY, &fd, &err) < 0) {
		reply_err(req, &err);
		return;
	}
	if (fstat(fd, &st) < 0 || st.st_size > API_FILE_MAX) {
		close(fd);
		reply_error(req, 413, "too_large", "%s is %lld bytes; the limit is "
			    "%d", path, (long long)st.st_size, API_FILE_MAX);
		return;
	}
	buf = evbuffer_new();
	/* evbuffer_add_file takes fd (and closes it) */
	if (!buf || (st.st_size && evbuffer_add_file(buf, fd, 0, st.st_size) < 0)) {
		if (buf)
			evbuffer_free(buf);
		if (!st.st_size || !buf)
			close(fd);
		reply_error(req, 500, "internal", "cannot read %s", path);
		return;
	}
	if (!st.st_size)
		close(fd);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
			  "application/octet-stream");
	evhttp_send_reply(req, 200, "OK", buf);
	evbuffer_free(buf);
}

static void file_put(struct sandbox *sb, struct evhttp_request *req,
		     const char *path)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t len = evbuffer_get_length(in), off = 0;
	struct corral_err err = { 0 };
	const char *data;
	int fd;

	if (len > API_FILE_MAX) {
		reply_error(req, 413, "too_large", "the file is %zu bytes; the limit "
			    "is %d", len, API_FILE_MAX);
		return;
	}
	if (corral_box_open(sb->box, path, O_WRONLY, &fd, &err) < 0) {
		reply_err(req, &err);
		return;
	}
	data = len ? (const char *)evbuffer_pullup(in, -1) : "";
	while (off < len) {
		ssize_t n = write(fd, data + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int e = n < 0 ? errno : EIO;

			close(fd);
			/* half a file is worse than none */
			corral_box_unlink(sb->box, path, &(struct corral_err){ 0 });
			corral_set_err(&err, -e, "%s: %s (the sandbox's disk limit?)",
					 path, strerror(e));
			reply_err(req, &err);
			return;
		}
		off += n;
	}
	close(fd);
	reply_json(req, 201, json_pack("{s:s, s:I}", "path", path, "size",
				       (json_int_t)len));
}

static void file_list(struct sandbox *sb, struct evhttp_request *req,
		      const char *path)
{
	struct corral_err err = { 0 };
	struct corral_dirent *v;
	json_t *a;
	size_t n;

	if (corral_box_list(sb->box, path, &v, &n, &err) < 0) {
		reply_err(req, &err);
		return;
	}
	a = json_array();
	for (size_t i = 0; i < n; i++) {
		const char *type = v[i].type == 'f' ? "file" : v[i].type == 'd' ?
			"dir" : v[i].type == 'l' ? "symlink" : "other";

		json_array_append_new(a, json_pack("{s:o, s:s, s:I, s:i}", "name",
				      json_bytes(v[i].name, strlen(v[i].name)),
				      "type", type, "size", (json_int_t)v[i].size,
				      "mode", (int)v[i].mode));
	}
	free(v);
	reply_json(req, 200, json_pack("{s:s, s:o}", "path", path, "entries", a));
}

static void files(struct sandbox *sb, struct evhttp_request *req)
{
	enum evhttp_cmd_type m = evhttp_request_get_command(req);
	struct corral_err err = { 0 };
	char path[4096];
	bool list;

	if (!file_query(req, path, sizeof(path), &list))
		return;
	if (corral_box_state(sb->box) == CORRAL_BOX_STARTING) {
		reply_error(req, 409, "conflict", "the sandbox is still starting");
		return;
	}
	if (m == EVHTTP_REQ_GET && list) {
		file_list(sb, req, path);
	} else if (m == EVHTTP_REQ_GET) {
		file_get(sb, req, path);
	} else if (m == EVHTTP_REQ_PUT) {
		file_put(sb, req, path);
	} else if (m == EVHTTP_REQ_DELETE) {
		if (corral_box_unlink(sb->box, path, &err) < 0)
			reply_err(req, &err);
		else
			reply_json(req, 200, json_pack("{s:s, s:b}", "path", path,
						       "deleted", 1));
	} else {
		reply_error(req, 405, "method_not_allowed", "files: GET, PUT or DELETE");
	}
}

/* ---- one sandbox ---------------------------------------------------------------- */

static void control(struct sandbox *sb, struct evhttp_request *req,
		    const char *verb)
{
	struct corral_err err = { 0 };
	json_t *o;
	int r;

	if (!strcmp(verb, "halt")) {
		static const char *const known[] = { "reason", NULL };
		const char *reason = NULL;

		o = body_json(req, false);
		if (!o)
			return;
		if (!only_fields(req, o, known) ||
		    !string_field(req, o, "reason", 1000, &reason)) {
			json_decref(o);
			return;
		}
		r = corral_box_halt(sb->box, reason, &err);
		json_decref(o);
	} else {
		r = corral_box_pause(sb->box, !strcmp(verb, "pause"), &err);
	}
	if (r < 0)
		reply_err(req, &err);
	else
		reply_json(req, 200, sandbox_json(sb));
}

static void one_sandbox(struct daemon *d, struct evhttp_request *req,
			char *rest)
{
	enum evhttp_cmd_type m = evhttp_request_get_command(req);
	char *sub = strchr(rest, '/'), *arg = NULL;
	struct sandbox *sb;

	if (sub) {
		*sub++ = '\0';
		arg = strchr(sub, '/');
		if (arg)
			*arg++ = '\0';
	}
	sb = find(d, rest);
	if (!sb) {
		reply_error(req, 404, "not_found", "no sandbox \"%.64s\"", rest);
		return;
	}
	if (!sub) {
		if (m == EVHTTP_REQ_GET) {
			reply_json(req, 200, sandbox_json(sb));
		} else if (m == EVHTTP_REQ_DELETE) {
			json_t *o = json_pack("{s:s, s:s, s:o}", "id", sb->id, "state",
					      "destroyed", "meters", meters_json(sb->box));

			sandbox_destroy(sb, "destroyed by request");
			reply_json(req, 200, o);
		} else {
			reply_error(req, 405, "method_not_allowed", "a sandbox: GET "
				    "or DELETE");
		}
		return;
	}
	if (!sb->ready) {
		reply_error(req, 409, "conflict", "the sandbox is still starting");
		return;
	}
	if (!strcmp(sub, "processes")) {
		processes(sb, req, arg);
		return;
	}
	if (arg) {
		reply_error(req, 404, "not_found", "no such route");
		return;
	}
	if (!strcmp(sub, "files")) {
		files(sb, req);
	} else if (m != EVHTTP_REQ_POST && (!strcmp(sub, "exec") ||
		   !strcmp(sub, "pause") || !strcmp(sub, "resume") ||
		   !strcmp(sub, "halt"))) {
		reply_error(req, 405, "method_not_allowed", "%s: POST", sub);
	} else if (!strcmp(sub, "exec")) {
		start_call(sb, req, false);
	} else if (!strcmp(sub, "pause") || !strcmp(sub, "resume") ||
		   !strcmp(sub, "halt")) {
		control(sb, req, sub);
	} else {
		reply_error(req, 404, "not_found", "no such route");
	}
}

static void list_sandboxes(struct daemon *d, struct evhttp_request *req)
{
	json_t *a = json_array();

	for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next)
		if (!sb->pooled && sb->ready)
			json_array_append_new(a, sandbox_json(sb));
	reply_json(req, 200, json_pack("{s:o}", "sandboxes", a));
}

/* ---- events, health, metrics ---------------------------------------------------- */

static bool line_matches(const char *line, size_t len, const char *sandbox)
{
	char key[96];

	if (!sandbox[0])
		return true;
	snprintf(key, sizeof(key), "\"sandbox\":\"%s\"", sandbox);
	return memmem(line, len, key, strlen(key)) != NULL;
}

void api_on_log_line(void *arg, const char *sandbox, const char *line, size_t len)
{
	struct daemon *d = arg;
	struct follower **pp = &d->followers, *f;

	(void)sandbox;
	while ((f = *pp)) {
		struct evbuffer *buf;

		if (!line_matches(line, len, f->sandbox)) {
			pp = &f->next;
			continue;
		}
		/* a follower that does not read is cut off, not buffered for */
		if (queued(f->req) > FOLLOW_QUEUE_MAX) {
			*pp = f->next;
			evhttp_connection_set_closecb(evhttp_request_get_connection(f->req),
						      NULL, NULL);
			evhttp_send_reply_end(f->req);
			free(f);
			continue;
		}
		pp = &f->next;
		buf = evbuffer_new();
		if (!buf)
			continue;
		evbuffer_add(buf, line, len);
		evbuffer_add(buf, "\n", 1);
		evhttp_send_reply_chunk(f->req, buf);
		evbuffer_free(buf);
	}
}

static void follower_gone(struct evhttp_connection *conn, void *arg)
{
	struct follower *f = arg;
	struct follower **pp;

	(void)conn;
	forget_request(f->req);
	for (pp = &f->d->followers; *pp; pp = &(*pp)->next) {
		if (*pp == f) {
			*pp = f->next;
			break;
		}
	}
	free(f);
}

static void events_get(struct daemon *d, struct evhttp_request *req)
{
	const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
	struct evkeyvalq kv;
	const char *sandbox, *follow;
	char path[4096], *line = NULL, want[64] = "";
	struct evbuffer *buf;
	size_t cap = 0;
	ssize_t n;
	FILE *f;

	TAILQ_INIT(&kv);
	if (q && evhttp_parse_query_str(q, &kv) < 0) {
		reply_error(req, 400, "bad_request", "bad query string");
		return;
	}
	sandbox = evhttp_find_header(&kv, "sandbox");
	follow = evhttp_find_header(&kv, "follow");
	if (sandbox && (strlen(sandbox) >= sizeof(want) || strchr(sandbox, '"'))) {
		evhttp_clear_headers(&kv);
		reply_error(req, 400, "bad_request", "bad sandbox id");
		return;
	}
	snprintf(want, sizeof(want), "%s", sandbox ? sandbox : "");
	bool following = follow && strcmp(follow, "0") && strcmp(follow, "false");

	evhttp_clear_headers(&kv);
	snprintf(path, sizeof(path), "%s/audit.jsonl", d->state_dir);
	buf = evbuffer_new();
	f = fopen(path, "re");
	while (buf && f && (n = getline(&line, &cap, f)) > 0)
		if (line_matches(line, n, want))
			evbuffer_add(buf, line, n);
	free(line);
	if (f)
		fclose(f);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
			  "application/x-ndjson");
	if (!following) {
		evhttp_send_reply(req, 200, "OK", buf);
		if (buf)
			evbuffer_free(buf);
		return;
	}
	struct follower *fl = calloc(1, sizeof(*fl));

	evhttp_send_reply_start(req, 200, "OK");
	if (buf) {
		evhttp_send_reply_chunk(req, buf);
		evbuffer_free(buf);
	}
	if (!fl) {
		evhttp_send_reply_end(req);
		return;
	}
	fl->req = req;
	fl->d = d;
	snprintf(fl->sandbox, sizeof(fl->sandbox), "%s", want);
	fl->next = d->followers;
	d->followers = fl;
	evhttp_connection_set_closecb(evhttp_request_get_connection(req),
				      follower_gone, fl);
}

static void metrics(struct daemon *d, struct evhttp_request *req)
{
	static const char *const states[] = { "starting", "running", "idle",
		"frozen", "paused", "halted", "dead" };
	struct evbuffer *buf = evbuffer_new();
	size_t count[7] = { 0 };

	if (!buf) {
		evhttp_send_error(req, 500, "out of memory");
		return;
	}
	for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next)
		count[corral_box_state(sb->box)]++;
	evbuffer_add_printf(buf, "# HELP corral_sandboxes Sandboxes by state.\n"
			    "# TYPE corral_sandboxes gauge\n");
	for (size_t i = 0; i < 7; i++)
		evbuffer_add_printf(buf, "corral_sandboxes{state=\"%s\"} %zu\n",
				    states[i], count[i]);
	evbuffer_add_printf(buf, "# TYPE corral_requests_total counter\n"
			    "corral_requests_total %" PRIu64 "\n"
			    "# TYPE corral_execs_total counter\n"
			    "corral_execs_total %" PRIu64 "\n", d->requests, d->execs);
	static const char *const names[] = { "cpu_seconds_total",
		"memory_peak_bytes", "memory_byte_seconds_total",
		"active_seconds_total", "frozen_seconds_total" };

	for (size_t k = 0; k < 5; k++) {
		evbuffer_add_printf(buf, "# TYPE corral_sandbox_%s %s\n", names[k],
				    k == 1 ? "gauge" : "counter");
		for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next) {
			struct corral_meters m;
			double v[5];

			if (sb->pooled || !sb->ready)
				continue;
			corral_box_meters(sb->box, &m);
			v[0] = m.cpu_seconds;
			v[1] = m.memory_peak_bytes;
			v[2] = m.memory_byte_seconds;
			v[3] = m.active_seconds;
			v[4] = m.frozen_seconds;
			evbuffer_add_printf(buf, "corral_sandbox_%s{id=\"%s\"} %.6g\n",
					    names[k], sb->id, v[k]);
		}
	}
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
			  "text/plain; version=0.0.4");
	evhttp_send_reply(req, 200, "OK", buf);
	evbuffer_free(buf);
}

/* Degraded, not down: the sandboxes it has are still supervised. */
static void health(struct daemon *d, struct evhttp_request *req)
{
	int e = corral_log_error(d->log);
	char detail[512] = "";

	if (e)
		snprintf(detail, sizeof(detail), "the audit log %s/audit.jsonl cannot be "
			 "written: %s; new sandboxes are refused", d->state_dir,
			 strerror(e));
	json_t *o = json_pack("{s:s, s:s, s:I}", "status", e ? "degraded" : "ok",
			      "version", CORRAL_VERSION, "sandboxes",
			      (json_int_t)d->nsandboxes);

	if (o && e)
		json_object_set_new(o, "detail", json_string(detail));
	reply_json(req, 200, o);
}

/* ---- routing ------------------------------------------------------------------- */

/* Over TCP, every request shows the token; compared in constant time. */
static bool authorized(struct daemon *d, struct evhttp_request *req)
{
	const char *h = evhttp_find_header(evhttp_request_get_input_headers(req),
					   "Authorization");
	size_t n = strlen(d->token);
	unsigned char diff = 0;

	if (!h || strncmp(h, "Bearer ", 7) != 0 || strlen(h + 7) != n)
		return false;
	for (size_t i = 0; i < n; i++)
		diff |= (unsigned char)h[7 + i] ^ (unsigned char)d->token[i];
	return diff == 0;
}

static bool over_tcp(struct daemon *d, struct evhttp_request *req)
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
	enum evhttp_cmd_type m = evhttp_request_get_command(req);
	const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
	char route[512];

	d->requests++;
	if (over_tcp(d, req) && !authorized(d, req)) {
		reply_error(req, 401, "unauthorized", "missing or wrong bearer token");
		return;
	}
	if (!path || strlen(path) >= sizeof(route)) {
		reply_error(req, 404, "not_found", "no such route");
		return;
	}
	snprintf(route, sizeof(route), "%s", path);
	if ((!strcmp(route, "/v1/health") || !strcmp(route, "/v1/metrics")) &&
	    m != EVHTTP_REQ_GET && m != EVHTTP_REQ_HEAD) {
		reply_error(req, 405, "method_not_allowed", "%s: GET", route);
	} else if (!strcmp(route, "/v1/health")) {
		health(d, req);
	} else if (!strcmp(route, "/v1/metrics")) {
		metrics(d, req);
	} else if (!strcmp(route, "/v1/events")) {
		if (m != EVHTTP_REQ_GET)
			reply_error(req, 405, "method_not_allowed", "events: GET");
		else
			events_get(d, req);
	} else if (!strcmp(route, "/v1/sandboxes")) {
		if (m == EVHTTP_REQ_POST)
			create(d, req);
		else if (m == EVHTTP_REQ_GET)
			list_sandboxes(d, req);
		else
			reply_error(req, 405, "method_not_allowed", "sandboxes: GET "
				    "or POST");
	} else if (!strncmp(route, "/v1/sandboxes/", 14) && route[14]) {
		one_sandbox(d, req, route + 14);
	} else {
		reply_error(req, 404, "not_found", "no route %.200s", route);
	}
}
