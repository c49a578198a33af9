/*
 * api_export.c - /v1/sandboxes/ID/diff and /export: what the sandbox
 * changed in its workspace, and the way out (corral_box_diff_start and
 * corral_box_export_start do the work in a worker, api_builds.c answers).
 *
 * A patch only reads, and goes back in the reply.  "to" and "apply" write
 * on the daemon's host, so they are for unix-socket clients only, and are
 * written as that client (its SO_PEERCRED uid and gid, its groups): a
 * client never writes where it could not write itself.  A TCP client is
 * somewhere else: the host's paths are not its to name (403).
 */
#include "api.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/keyvalq_struct.h>
#include <sys/queue.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#define ALLOW_RISKY_MAX	64

/* ?path=P&format=patch|json, decoded. */
static bool diff_query(const char *q, char *path, size_t len, bool *patch,
		       struct api_fault *f)
{
	struct evkeyvalq kv;
	const char *v, *fmt;
	bool ok = true;

	TAILQ_INIT(&kv);
	path[0] = '\0';
	*patch = false;
	if (!q)
		return true;
	if (evhttp_parse_query_str(q, &kv) < 0) {
		evhttp_clear_headers(&kv);
		return api_fault(f, 400, "bad_request", "a query that does not parse");
	}
	v = evhttp_find_header(&kv, "path");
	fmt = evhttp_find_header(&kv, "format");
	if (v && (strstr(q, "%00") || strlen(v) >= len))
		ok = api_fault(f, 400, "bad_request", "path must be under %zu bytes, "
			       "with no NUL", len);
	else if (v)
		snprintf(path, len, "%s", v);
	if (ok && fmt && strcmp(fmt, "patch") && strcmp(fmt, "json"))
		ok = api_fault(f, 400, "bad_request", "format is json or patch "
			       "(got \"%.50s\")", fmt);
	*patch = fmt && !strcmp(fmt, "patch");
	evhttp_clear_headers(&kv);
	return ok;
}

/* Made by a worker, sent from its spool (api_builds.c): never on the loop. */
void diff_get(struct sandbox *sb, struct evhttp_request *req, const char *rest)
{
	const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
	struct api_fault f;
	char path[4096];
	bool patch;

	(void)rest;
	if (!diff_query(q, path, sizeof(path), &patch, &f)) {
		reply_fault(req, &f);
		return;
	}
	build_start(sb, req, patch ? BUILD_DIFF_PATCH : BUILD_DIFF_JSON,
		    path[0] ? path : NULL, NULL);
}

/* The unix client's uid and gid; false for a TCP client or none known. */
static bool peer_creds(struct sandbox *sb, struct evhttp_request *req,
		       uid_t *uid, gid_t *gid)
{
	struct evhttp_connection *conn = evhttp_request_get_connection(req);
	struct bufferevent *bev = conn ? evhttp_connection_get_bufferevent(conn) : NULL;
	struct ucred cr;
	socklen_t n = sizeof(cr);
	evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;

	if (fd < 0 || api_over_tcp(sb->d, req) ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &n) < 0 || n != sizeof(cr))
		return false;
	*uid = cr.uid;
	*gid = cr.gid;
	return true;
}

/* {"to": DIR} | {"apply": true} | {"patch": true}, "allow_risky": [GLOB...] */
static bool export_body(json_t *o, struct corral_box_export_opts *x,
			char **globs, struct api_fault *f)
{
	static const char *const known[] = { "to", "apply", "patch", "allow_risky", NULL };
	json_t *apply = json_object_get(o, "apply"), *patch = json_object_get(o, "patch");
	json_t *allow = json_object_get(o, "allow_risky"), *g;
	size_t i;

	if (!only_fields(o, known, f) || !string_field(o, "to", 4095, &x->to, f))
		return false;
	if ((apply && !json_is_boolean(apply)) || (patch && !json_is_boolean(patch)))
		return api_fault(f, 400, "bad_request", "apply and patch are true or false");
	x->apply = json_is_true(apply);
	x->patch = json_is_true(patch);
	if (!!x->to + x->apply + x->patch != 1)
		return api_fault(f, 400, "bad_request", "give one of \"to\": DIR, "
				 "\"apply\": true or \"patch\": true");
	if (x->to && x->to[0] != '/')
		return api_fault(f, 400, "bad_request", "to must be an absolute path");
	if (allow && (!json_is_array(allow) || json_array_size(allow) > ALLOW_RISKY_MAX))
		return api_fault(f, 400, "bad_request", "allow_risky is an array of at "
				 "most %d globs", ALLOW_RISKY_MAX);
	json_array_foreach(allow, i, g) {
		if (!json_is_string(g) || !json_string_length(g) ||
		    json_string_length(g) > 1024 ||
		    strlen(json_string_value(g)) != json_string_length(g))
			return api_fault(f, 400, "bad_request", "allow_risky[%zu]: a glob "
					 "of 1 to 1024 bytes with no NUL", i);
		globs[i] = (char *)json_string_value(g);
	}
	x->allow_risky = globs;
	x->nallow_risky = json_array_size(allow);
	return true;
}

/* Whether the request's Accept names type (parameters aside). */
static bool accepts(struct evhttp_request *req, const char *type)
{
	const char *a = evhttp_find_header(evhttp_request_get_input_headers(req),
					   "Accept");
	size_t n = strlen(type);

	while (a && *a) {
		a += strspn(a, " \t,");
		if (!strncasecmp(a, type, n) &&
		    (a[n] == '\0' || strchr(" \t;,", a[n])))
			return true;
		a = strchr(a, ',');
	}
	return false;
}

void export_post(struct sandbox *sb, struct evhttp_request *req, const char *rest)
{
	struct corral_box_export_opts x = { 0 };
	char *globs[ALLOW_RISKY_MAX] = { 0 };
	struct api_fault f;
	json_t *o = body_json(req, true);

	(void)rest;
	if (!o)
		return;
	if (!export_body(o, &x, globs, &f)) {
		reply_fault(req, &f);
		json_decref(o);
		return;
	}
	if (!x.patch && !peer_creds(sb, req, &x.uid, &x.gid)) {
		reply_error(req, 403, "forbidden", "to and apply write on the daemon's "
			    "host: only for a client on its unix socket (use patch)");
		json_decref(o);
		return;
	}
	/* a worker makes it (api_builds.c); the globs and paths go with its fork */
	build_start(sb, req, !x.patch ? BUILD_EXPORT_WRITE :
		    accepts(req, EXPORT_STREAM_TYPE) ? BUILD_EXPORT_STREAM :
		    BUILD_EXPORT_PATCH, NULL, &x);
	json_decref(o);
}
