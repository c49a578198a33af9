/*
 * api_sandboxes.c - /v1/sandboxes and /v1/sandboxes/ID: create (with its
 * policy, workspace, TTL and labels), list, show, destroy, and the
 * sandbox's controls (pause, resume, halt).
 */
#include "api.h"

#include <event2/keyvalq_struct.h>
#include <sys/queue.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

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

/*
 * The directories the sandbox's --rw binds share, as "DEV:INO": what a
 * client writing a host file for it (an export's patch, a copy out) must
 * not follow a symlink in (corral_dest_parent).  Identities, not paths,
 * so a TCP client learns nothing of the host from them.
 */
static json_t *rw_dirs_json(struct sandbox *sb)
{
	struct corral_dir_id *ids;
	json_t *a = json_array();
	size_t n;

	if (!a || corral_box_rw_dirs(sb->box, &ids, &n) < 0)
		return a;
	for (size_t i = 0; i < n; i++) {
		char s[48];

		snprintf(s, sizeof(s), "%llu:%llu", (unsigned long long)ids[i].dev,
			 (unsigned long long)ids[i].ino);
		json_array_append_new(a, json_string(s));
	}
	free(ids);
	return a;
}

json_t *sandbox_json(struct sandbox *sb)
{
	struct corral_layers l = { 0 };
	const char *halt = corral_box_halt_reason(sb->box);

	corral_box_layers(sb->box, &l);
	/* a halt's reason is text a client or an abort criterion chose: bytes */
	return json_pack("{s:s, s:s, s:s, s:O, s:f, s:s?, s:I, s:I, s:I, s:o?, s:s, s:i, s:o, s:o?, s:o?}",
			 "id", sb->id,
			 "state", corral_box_state_name(corral_box_state(sb->box)),
			 "created", sb->created, "labels", sb->labels,
			 "ttl_seconds", sb->ttl_ms / 1000.0,
			 "expires_at", sb->expires[0] ? sb->expires : NULL,
			 "idle_freeze_ms", (json_int_t)sb->idle_freeze_ms,
			 "processes", (json_int_t)sb->nprocs,
			 "running", (json_int_t)corral_box_running(sb->box),
			 "halt_reason", halt ? api_bytes(halt, strlen(halt)) : NULL,
			 "limits", l.limits ? l.limits : "none",
			 "landlock_abi", l.landlock_abi,
			 "meters", meters_json(sb->box),
			 "ids", corral_ids_json(&l.ids),
			 "rw_dirs", rw_dirs_json(sb));
}

static bool labels_ok(json_t *labels, struct api_fault *f)
{
	const char *k;
	json_t *v;

	if (!json_is_object(labels) || json_object_size(labels) > API_LABELS_MAX)
		return api_fault(f, 400, "bad_request", "labels must be an object "
				 "of at most %d string values", API_LABELS_MAX);
	json_object_foreach(labels, k, v) {
		if (!json_is_string(v) || strlen(k) > 128 || json_string_length(v) > 1024)
			return api_fault(f, 400, "bad_request", "label \"%.100s\": "
					 "values are strings of at most 1024 bytes, "
					 "keys at most 128", k);
	}
	return true;
}

/* What POST /v1/sandboxes asks for, checked whole before anything is built. */
struct create_args {
	json_t *policy, *labels;
	const char *workspace;
	const char *image;		/* a reference into the daemon's store */
	const char *from_snapshot;
	const char *user;		/* "agent" or "root": over identity.user */
	const char *lease;		/* an open lease of this client's */
	uint64_t ttl_ms, idle_ms;
	bool ttl_given, idle_given;
	bool ws_inode;			/* the workspace must be this object: */
	unsigned long long ws_dev, ws_ino;
};

/* A decimal number of at most 64 bits at *s, up to end (or the string's). */
static bool decimal(const char **s, char end, unsigned long long *out)
{
	char *after;

	if (**s < '0' || **s > '9')
		return false;
	errno = 0;
	*out = strtoull(*s, &after, 10);
	if (errno || *after != end)
		return false;
	*s = after + (end ? 1 : 0);
	return true;
}

/*
 * "workspace_inode": "DEV:INO", decimal, as stat gives them: the directory
 * a client judged itself and holds open.  Whatever else is found at the
 * path when the daemon opens it, the create is refused.
 */
static bool inode_field(json_t *o, struct create_args *a, struct api_fault *f)
{
	const char *v = NULL, *c;

	if (!string_field(o, "workspace_inode", 41, &v, f))
		return false;
	if (!v)
		return true;
	c = v;
	if (!decimal(&c, ':', &a->ws_dev) || !decimal(&c, '\0', &a->ws_ino))
		return api_fault(f, 400, "bad_request", "workspace_inode must be "
				 "\"DEV:INO\", two decimal numbers (got \"%.41s\")", v);
	if (!a->workspace)
		return api_fault(f, 400, "bad_request", "workspace_inode is the "
				 "workspace's: it needs a workspace");
	a->ws_inode = true;
	return true;
}

static bool create_check(json_t *o, struct create_args *a, struct api_fault *f)
{
	static const char *const known[] = { "policy", "workspace", "ttl_seconds",
		"idle_freeze_ms", "labels", "image", "from_snapshot", "user",
		"workspace_inode", "lease", NULL };
	json_t *idle;

	if (!only_fields(o, known, f) ||
	    !seconds_field(o, "ttl_seconds", 30 * 86400, &a->ttl_ms, f) ||
	    !string_field(o, "workspace", 4095, &a->workspace, f) ||
	    !string_field(o, "image", 511, &a->image, f) ||
	    !string_field(o, "from_snapshot", 63, &a->from_snapshot, f) ||
	    !string_field(o, "user", 15, &a->user, f) ||
	    !string_field(o, "lease", LEASE_ID_MAX - 1, &a->lease, f) ||
	    !inode_field(o, a, f))
		return false;
	a->ttl_given = json_object_get(o, "ttl_seconds") &&
		       !json_is_null(json_object_get(o, "ttl_seconds"));
	if (a->user && strcmp(a->user, "agent") && strcmp(a->user, "root"))
		return api_fault(f, 400, "bad_request", "user must be \"agent\" or "
				 "\"root\" (got \"%.15s\")", a->user);
	if (a->from_snapshot && a->workspace)
		return api_fault(f, 400, "bad_request", "from_snapshot brings its "
				 "own workspace (the one snapshotted): no workspace "
				 "with it");
	idle = json_object_get(o, "idle_freeze_ms");
	if (idle) {
		long long ms = 0;

		if (!int_field(o, "idle_freeze_ms", 0, 86400000, &ms, f))
			return false;
		a->idle_ms = (uint64_t)ms;
		a->idle_given = true;
	}
	a->labels = json_object_get(o, "labels");
	if (a->labels && !labels_ok(a->labels, f))
		return false;
	a->policy = json_object_get(o, "policy");
	if (a->policy && !json_is_object(a->policy))
		return api_fault(f, 400, "bad_request", "policy must be a JSON object "
				 "in the policy-file format");
	return true;
}

/*
 * Whether the daemon can take one more sandbox now; else says why (to a
 * TCP client, counting only the sandboxes it may see: sandboxes_seen).
 */
static bool create_room(struct daemon *d, struct evhttp_request *req,
			struct api_fault *f)
{
	if (corral_log_error(d->log))
		return api_fault(f, 507, "no_space", "the audit log %s/audit.jsonl "
				 "cannot be written (%s): no new sandbox until it can",
				 d->state_dir, strerror(corral_log_error(d->log)));
	if (!fd_room(d)) {
		struct rlimit rl = { 0, 0 };

		getrlimit(RLIMIT_NOFILE, &rl);
		return api_fault(f, 503, "busy", "the daemon is near its open-files "
				 "limit (%llu, with %zu sandboxes): raise it (ulimit "
				 "-n) or destroy sandboxes",
				 (unsigned long long)rl.rlim_cur, sandboxes_seen(d, req));
	}
	if (d->nsandboxes - (pool_take(d, false) ? 1 : 0) >= d->max_sandboxes)
		return api_fault(f, 503, "busy", "%zu sandboxes are alive, the limit "
				 "(--max-sandboxes)", d->max_sandboxes);
	return true;
}

/*
 * A TCP client's sandbox lives at most --max-ttl past its create or its
 * last keepalive: one that asks for no TTL ("0": none) or a longer one is
 * refused, and one that names none gets --max-ttl.  A client that went
 * away (crashed, cut off, or never meant to come back) leaves nothing
 * holding the host's memory and pids for longer than that.
 */
static bool ttl_within(struct daemon *d, struct evhttp_request *req, uint64_t ms,
		       struct api_fault *f)
{
	uint64_t max = (uint64_t)d->limits.max_ttl_s * 1000;

	if (!api_over_tcp(d, req) || (ms && ms <= max))
		return true;
	if (!ms)
		return api_fault(f, 403, "forbidden", "ttl_seconds: the daemon gives "
				 "a TCP client's sandbox a TTL of at most %u s "
				 "(--max-ttl); it cannot be removed (got 0: none)",
				 d->limits.max_ttl_s);
	return api_fault(f, 403, "forbidden", "ttl_seconds: the daemon gives a TCP "
			 "client's sandbox a TTL of at most %u s (--max-ttl) "
			 "(got %.15g)", d->limits.max_ttl_s, ms / 1000.0);
}

/*
 * A TCP client's sandbox, idle, is frozen within --max-idle-freeze: its
 * idle_freeze_ms may be shorter, not longer, nor 0 (never).
 */
static bool idle_within(struct daemon *d, struct evhttp_request *req, uint64_t ms,
			struct api_fault *f)
{
	uint64_t max = (uint64_t)d->limits.max_idle_freeze_s * 1000;

	if (!api_over_tcp(d, req) || (ms && ms <= max))
		return true;
	if (!ms)
		return api_fault(f, 403, "forbidden", "idle_freeze_ms: the daemon "
				 "freezes a TCP client's idle sandbox within %llu ms "
				 "(--max-idle-freeze %u s); it cannot be turned off "
				 "(got 0: never)", (unsigned long long)max,
				 d->limits.max_idle_freeze_s);
	return api_fault(f, 403, "forbidden", "idle_freeze_ms: the daemon freezes "
			 "a TCP client's idle sandbox within %llu ms "
			 "(--max-idle-freeze %u s) (got %llu)",
			 (unsigned long long)max, d->limits.max_idle_freeze_s,
			 (unsigned long long)ms);
}

/*
 * A create's life: a TCP client's within the daemon's bounds, or refused.
 * One that names no idle freeze gets the default only within the bound
 * (--max-idle-freeze 1 is less than IDLE_FREEZE_DEFAULT_MS).
 */
static bool life_within(struct daemon *d, struct evhttp_request *req,
			struct create_args *a, struct api_fault *f)
{
	uint64_t idle_max = (uint64_t)d->limits.max_idle_freeze_s * 1000;

	if (api_over_tcp(d, req)) {
		if (!a->ttl_given)
			a->ttl_ms = (uint64_t)d->limits.max_ttl_s * 1000;
		if (!a->idle_given && a->idle_ms > idle_max)
			a->idle_ms = idle_max;
	}
	return ttl_within(d, req, a->ttl_ms, f) &&
	       (!a->idle_given || idle_within(d, req, a->idle_ms, f));
}

/*
 * One TCP peer (an IPv4 address, an IPv6 /64: as --max-connections-per-
 * peer counts) holds at most --max-sandboxes-per-peer sandboxes alive,
 * being built, or dead and not yet deleted (each under --max-sandboxes as
 * well), so that no one peer takes every one --max-sandboxes allows.
 * 429, not 403: nothing in the request is beyond a bound, the same create
 * is made once the peer destroys one of its own; not 503: the daemon has
 * room, this peer has none.  Counted from the list, so every way a
 * sandbox goes (DELETE, TTL, lease, the daemon's end) gives its place back.
 */
static bool peer_room(struct daemon *d, const char *peer, struct api_fault *f)
{
	size_t n = 0;

	if (!peer[0])
		return true;
	for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next)
		n += !sb->pooled && !strcmp(sb->peer, peer);
	if (n < d->limits.max_sandboxes_per_peer)
		return true;
	return api_fault(f, 429, "too_many_requests", "%zu sandboxes of this peer's "
			 "(%.60s) are alive, the limit (--max-sandboxes-per-peer): "
			 "destroy one first", n, peer);
}

/* "image" of the request: over any filesystem.image of its policy. */
static int set_image(struct corral_policy *p, const char *ref, struct corral_err *err)
{
	json_t *o = json_pack("{s:{s:s}}", "filesystem", "image", ref);
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	int r;

	json_decref(o);
	if (!text)
		return corral_set_err(err, -ENOMEM, "out of memory");
	r = corral_policy_load_string(p, text, strlen(text), "image", err);
	free(text);
	return r;
}

/*
 * A fork: the snapshot's workspace, its upper layer starting as a copy of
 * the snapshot's tree (made while the sandbox is built: mount.c).
 */
static struct sandbox *create_from_snapshot(struct daemon *d, struct evhttp_request *req,
					    const struct create_args *a,
					    struct corral_policy *p, bool local)
{
	struct corral_err err = { 0 };
	struct api_fault f;
	struct sandbox *sb = NULL;
	char *ws = NULL;
	int fd = -1;

	if (snapshot_layer(d, a->from_snapshot, p, &ws, &fd, &f) < 0) {
		reply_fault(req, &f);
	} else {
		sb = sandbox_new(d, p, local, &err);	/* takes p */
		p = NULL;
		if (!sb)
			reply_build_err(req, &err);
	}
	/* built (or not): the tree is copied, its detached mount no longer needed */
	if (fd >= 0)
		close(fd);
	free(ws);
	if (p) {
		corral_policy_free(p);
		free(p);
	}
	return sb;
}

/* The workspace opened and pinned (api_access_check) is the client's. */
static bool workspace_is(const struct corral_policy *p, const struct create_args *a,
			 struct api_fault *f)
{
	struct stat st;

	if (!p->workspace_pinned || fstat(p->workspace_fd, &st) < 0)
		return api_fault(f, 500, "internal", "workspace %.300s: not "
				 "opened to compare with workspace_inode", p->workspace);
	if ((unsigned long long)st.st_dev != a->ws_dev ||
	    (unsigned long long)st.st_ino != a->ws_ino)
		return api_fault(f, 409, "conflict", "workspace %.300s is not the "
				 "directory the client checked (inode %llu:%llu, "
				 "found %llu:%llu): it was replaced since",
				 a->workspace, a->ws_dev, a->ws_ino,
				 (unsigned long long)st.st_dev,
				 (unsigned long long)st.st_ino);
	return true;
}

const struct corral_policy *client_bound(struct daemon *d, struct evhttp_request *req)
{
	if (d->bound)
		return d->bound;
	return api_over_tcp(d, req) ? &d->builtin : NULL;
}

const struct corral_bound_name *bound_name(struct daemon *d, const struct corral_policy *bound)
{
	static const struct corral_bound_name operators = {
		.policy = "the operator's policy", .owner = "the operator's",
	}, builtin = {
		.policy = "the daemon's default bound for TCP clients (no --policy)",
		.owner = "the daemon's default bound's (no --policy)",
	};

	return bound == &d->builtin ? &builtin : &operators;
}

/*
 * The client's bound (client_bound): its policy, laid over the operator's,
 * may narrow it, never widen it; a widening is refused (403) naming the
 * field, the bound and what was asked.  Host paths, env.pass and
 * identity.user are api_access_check's.  Frees p when it is refused.
 */
static bool within_bound(struct daemon *d, struct evhttp_request *req,
			 struct corral_policy *p)
{
	const struct corral_policy *bound = client_bound(d, req);
	struct corral_err err = { 0 };

	if (!bound || corral_policy_within_named(p, bound, bound_name(d, bound), &err) == 0)
		return true;
	reply_error(req, 403, "forbidden", "%s", err.msg);
	corral_policy_free(p);
	free(p);
	return false;
}

/* A sandbox for a, from the pool when a asks for nothing but defaults. */
static struct sandbox *create_sandbox(struct daemon *d, struct evhttp_request *req,
				      const struct create_args *a)
{
	struct corral_err err = { 0 };
	struct corral_image *img = NULL;
	struct corral_policy *p;
	struct api_fault f;
	struct sandbox *sb;
	bool local = false;
	int r;

	if (!a->policy && !a->workspace && !a->image && !a->from_snapshot && !a->user &&
	    (sb = pool_take(d, api_over_tcp(d, req))))
		return sb;	/* built ahead with exactly this (the operator's) policy */
	p = daemon_policy(d, a->policy, &err);
	if (!p) {
		if (err.code == -ENOMEM)
			reply_error(req, 500, "internal", "%s", err.msg);
		else
			reply_error(req, 422, "policy", "%s", err.msg);
		return NULL;
	}
	if (!within_bound(d, req, p))
		return NULL;	/* before anything of the host is opened for it */
	if (a->workspace && corral_policy_set_workspace(p, a->workspace, &err) < 0) {
		reply_error(req, 400, "bad_request", "%s", err.msg);
		corral_policy_free(p);
		free(p);
		return NULL;
	}
	if (a->image && set_image(p, a->image, &err) < 0) {
		reply_error(req, 422, "image", "%s", err.msg);
		corral_policy_free(p);
		free(p);
		return NULL;
	}
	/*
	 * An image only from the daemon's own store: a client names one, it
	 * never makes the daemon read an archive or a tree of the host.
	 */
	if (p->image && (r = corral_policy_use_image(p, d->state_dir, &img, &err)) < 0) {
		reply_error(req, r == -ENOENT ? 404 : r == -EAGAIN ? 503 : 422,
			    r == -EAGAIN ? "busy" : "image", "%s", err.msg);
		corral_policy_free(p);
		free(p);
		return NULL;
	}
	corral_image_free(img);	/* its layers, Env, WorkingDir are in p now */
	if (a->user)
		p->root_inside = !strcmp(a->user, "root");
	/* again on what will be built: an image's config, the user, applied */
	if (!within_bound(d, req, p))
		return NULL;
	/*
	 * A fork's policy is a client's too: its binds and env.pass checked,
	 * and the snapshot's workspace, a host directory as any other (another
	 * client's, its current files in the fork's lower layer).  A local
	 * sandbox's snapshot makes a local fork: its tree may hold what that
	 * one had of the host (a bind's file copied into the workspace).
	 */
	if ((a->from_snapshot &&
	     snapshot_workspace(d, req, a->from_snapshot, p, &local, &f) < 0) ||
	    !api_access_check(d, req, api_over_tcp(d, req), p, &f) ||
	    (a->ws_inode && !workspace_is(p, a, &f))) {
		reply_fault(req, &f);
		corral_policy_free(p);
		free(p);
		return NULL;
	}
	if (a->from_snapshot)
		return create_from_snapshot(d, req, a, p, local);
	sb = sandbox_new(d, p, false, &err);	/* takes p */
	if (!sb)
		reply_build_err(req, &err);
	return sb;
}

void sandboxes_create(struct daemon *d, struct evhttp_request *req, const char *rest)
{
	struct create_args a = { .idle_ms = IDLE_FREEZE_DEFAULT_MS };
	struct lease *lease = NULL;
	char peer[DAEMON_PEER_KEY_MAX] = "";
	struct api_fault f;
	struct sandbox *sb;
	json_t *o;

	pool_hold(d);
	o = body_json(req, false);
	if (!o)
		return;
	/* a TCP connection the gate does not know still counts, as one peer */
	if (!api_peer_key(d, req, peer, sizeof(peer)) && api_over_tcp(d, req))
		snprintf(peer, sizeof(peer), "?");
	if (!create_check(o, &a, &f) || !life_within(d, req, &a, &f) ||
	    (a.lease && !(lease = lease_for_create(d, req, a.lease, &f))) ||
	    !create_room(d, req, &f) || !peer_room(d, peer, &f) || !lease_room(d, lease, &f)) {
		reply_fault(req, &f);
		goto out;
	}
	sb = create_sandbox(d, req, &a);
	if (!sb)
		goto out;
	/* counted from now, while it is built too (peer_room) */
	snprintf(sb->peer, sizeof(sb->peer), "%s", peer);
	/* bound before anything can end it: the lease may close at the next turn */
	if (lease)
		lease_bind(lease, sb);
	sb->ttl_ms = a.ttl_ms;
	sb->idle_freeze_ms = a.idle_ms;
	if (a.labels)
		json_object_update(sb->labels, a.labels);
	if (sb->ready)
		sandbox_hand_out(sb, req);
	else
		sandbox_await(sb, req);
	pool_fill(d);
out:
	json_decref(o);
}

bool labels_match(const char *query, json_t *labels, struct api_fault *f)
{
	struct evkeyvalq kv;
	struct evkeyval *h;
	bool ok = true, matched = true;

	f->status = 0;
	TAILQ_INIT(&kv);
	if (query && evhttp_parse_query_str(query, &kv) < 0) {
		api_fault(f, 400, "bad_request", "bad query string");
		return false;
	}
	TAILQ_FOREACH(h, &kv, next) {
		const char *eq = strchr(h->value, '=');
		size_t klen = eq ? (size_t)(eq - h->value) : strlen(h->value);
		char key[256];
		json_t *v;

		if (strcmp(h->key, "label")) {
			ok = api_fault(f, 400, "bad_request", "unknown query "
				       "parameter \"%.100s\" (filter with "
				       "label=KEY or label=KEY=VALUE)", h->key);
			break;
		}
		if (!klen || klen >= sizeof(key)) {
			ok = api_fault(f, 400, "bad_request", "label=KEY[=VALUE]: a "
				       "key of 1 to 255 bytes");
			break;
		}
		snprintf(key, sizeof(key), "%.*s", (int)klen, h->value);
		if (!labels)	/* only the query judged */
			continue;
		v = json_object_get(labels, key);
		if (!v || (eq && strcmp(json_string_value(v) ?: "", eq + 1)))
			matched = false;
	}
	evhttp_clear_headers(&kv);
	return ok && matched;
}

/* GET /v1/sandboxes[?label=K=V...]: the ones whose labels match every filter. */
void sandboxes_list(struct daemon *d, struct evhttp_request *req, const char *rest)
{
	const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
	json_t *a = json_array();
	struct api_fault f = { 0 };

	/* the query is judged once, even when no sandbox is there to match */
	labels_match(q, NULL, &f);
	if (f.status) {
		json_decref(a);
		reply_fault(req, &f);
		return;
	}
	for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next)
		if (!sb->pooled && sb->ready && sandbox_seen(d, req, sb) &&
		    labels_match(q, sb->labels, &f))
			json_array_append_new(a, sandbox_json(sb));
	reply_json(req, 200, json_pack("{s:o}", "sandboxes", a));
}

void sandbox_get(struct sandbox *sb, struct evhttp_request *req, const char *rest)
{
	reply_json(req, 200, sandbox_json(sb));
}

void sandbox_delete(struct sandbox *sb, struct evhttp_request *req, const char *rest)
{
	json_t *o = json_pack("{s:s, s:s, s:o}", "id", sb->id, "state",
			      "destroyed", "meters", meters_json(sb->box));

	sandbox_destroy(sb, "destroyed by request");
	reply_json(req, 200, o);
}

static void reply_control(struct sandbox *sb, struct evhttp_request *req, int r,
			  const struct corral_err *err)
{
	if (r < 0)
		reply_err(req, err);
	else
		reply_json(req, 200, sandbox_json(sb));
}

void sandbox_pause(struct sandbox *sb, struct evhttp_request *req, const char *rest)
{
	struct corral_err err = { 0 };

	reply_control(sb, req, corral_box_pause(sb->box, true, &err), &err);
}

void sandbox_resume(struct sandbox *sb, struct evhttp_request *req, const char *rest)
{
	struct corral_err err = { 0 };

	reply_control(sb, req, corral_box_pause(sb->box, false, &err), &err);
}

void sandbox_halt(struct sandbox *sb, struct evhttp_request *req, const char *rest)
{
	static const char *const known[] = { "reason", NULL };
	struct corral_err err = { 0 };
	const char *reason = NULL;
	struct api_fault f;
	json_t *o;
	int r;

	o = body_json(req, false);
	if (!o)
		return;
	if (!only_fields(o, known, &f) ||
	    !string_field(o, "reason", 1000, &reason, &f)) {
		reply_fault(req, &f);
		json_decref(o);
		return;
	}
	r = corral_box_halt(sb->box, reason, &err);
	json_decref(o);
	reply_control(sb, req, r, &err);
}

/* POST keepalive [{"ttl_seconds": N}]: the TTL (or a new one) from now. */
void sandbox_keepalive(struct sandbox *sb, struct evhttp_request *req, const char *rest)
{
	static const char *const known[] = { "ttl_seconds", NULL };
	uint64_t ms = sb->ttl_ms;
	struct api_fault f;
	json_t *o;

	o = body_json(req, false);
	if (!o)
		return;
	if (!only_fields(o, known, &f) ||
	    !seconds_field(o, "ttl_seconds", 30 * 86400, &ms, &f) ||
	    /*
	     * A bodyless keepalive of a sandbox without a TTL (a unix
	     * client's) keeps it without one: no life is given, none bounded.
	     */
	    ((json_object_get(o, "ttl_seconds") || ms) && !ttl_within(sb->d, req, ms, &f))) {
		reply_fault(req, &f);
		json_decref(o);
		return;
	}
	json_decref(o);
	sb->ttl_ms = ms;
	sandbox_arm_ttl(sb);
	reply_json(req, 200, sandbox_json(sb));
}
