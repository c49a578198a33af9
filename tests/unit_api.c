/*
 * unit_api.c - corral serve's API without a sandbox: the routing tables
 * (method and path to handler, 404 and 405), the errno-to-HTTP mapping,
 * the checks of request bodies and queries, and a few requests through
 * api_handle() over a real unix socket to a daemon that may build none.
 */
#include "api.h"
#include "unit.h"

#include <event2/event.h>
#include <event2/http.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* serve.c's sandbox log: this daemon has no state directory */
int state_write(struct daemon *d, struct sandbox *sb)
{
	(void)d;
	(void)sb;
	return 0;
}

void state_remove(struct daemon *d, struct sandbox *sb)
{
	(void)d;
	(void)sb;
}

/* ---- the routing tables ----------------------------------------------------- */

static int route(const struct api_route *t, const char *path, int method,
		 const struct api_route **r, const char **rest)
{
	*r = NULL;
	*rest = NULL;
	return api_route_find(t, path, method, r, rest);
}

TEST(routes_top_level)
{
	const struct api_route *r;
	const char *rest;

	CHECK(route(api_routes, "/v1/health", EVHTTP_REQ_GET, &r, &rest) == 0);
	CHECK(r && r->on_daemon == health_get && rest && !*rest);
	CHECK(route(api_routes, "/v1/health", EVHTTP_REQ_HEAD, &r, &rest) == 0);
	CHECK(route(api_routes, "/v1/metrics", EVHTTP_REQ_GET, &r, &rest) == 0);
	CHECK(r && r->on_daemon == metrics_get);
	CHECK(route(api_routes, "/v1/events", EVHTTP_REQ_GET, &r, &rest) == 0);
	CHECK(r && r->on_daemon == events_get);
	CHECK(route(api_routes, "/v1/sandboxes", EVHTTP_REQ_POST, &r, &rest) == 0);
	CHECK(r && r->on_daemon == sandboxes_create);
	CHECK(route(api_routes, "/v1/sandboxes", EVHTTP_REQ_GET, &r, &rest) == 0);
	CHECK(r && r->on_daemon == sandboxes_list);
	/* everything under a sandbox goes to one place, which finds it first */
	CHECK(route(api_routes, "/v1/sandboxes/sb-1/exec", EVHTTP_REQ_PATCH, &r,
		    &rest) == 0);
	CHECK(r && r->on_daemon && rest && !strcmp(rest, "sb-1/exec"));
}

TEST(routes_top_level_405)
{
	const struct api_route *r;
	const char *rest;

	CHECK(route(api_routes, "/v1/health", EVHTTP_REQ_POST, &r, &rest) == 405);
	CHECK(r && !strcmp(r->allow, "/v1/health: GET"));
	CHECK(route(api_routes, "/v1/metrics", EVHTTP_REQ_DELETE, &r, &rest) == 405);
	CHECK(route(api_routes, "/v1/events", EVHTTP_REQ_HEAD, &r, &rest) == 405);
	CHECK(r && !strcmp(r->allow, "events: GET"));
	CHECK(route(api_routes, "/v1/sandboxes", EVHTTP_REQ_PUT, &r, &rest) == 405);
	CHECK(r && !strcmp(r->allow, "sandboxes: GET or POST"));
	CHECK(route(api_routes, "/v1/sandboxes", EVHTTP_REQ_DELETE, &r, &rest) == 405);
}

TEST(routes_top_level_404)
{
	const struct api_route *r;
	const char *rest;

	CHECK(route(api_routes, "/", EVHTTP_REQ_GET, &r, &rest) == 404);
	CHECK(r == NULL);
	CHECK(route(api_routes, "", EVHTTP_REQ_GET, &r, &rest) == 404);
	CHECK(route(api_routes, "/v1/nope", EVHTTP_REQ_GET, &r, &rest) == 404);
	CHECK(route(api_routes, "/v1/healthz", EVHTTP_REQ_GET, &r, &rest) == 404);
	CHECK(route(api_routes, "/v1/health/", EVHTTP_REQ_GET, &r, &rest) == 404);
	CHECK(route(api_routes, "/v1/Health", EVHTTP_REQ_GET, &r, &rest) == 404);
	CHECK(route(api_routes, "/v2/health", EVHTTP_REQ_GET, &r, &rest) == 404);
	/* no sandbox id at all */
	CHECK(route(api_routes, "/v1/sandboxes/", EVHTTP_REQ_GET, &r, &rest) == 404);
	CHECK(route(api_routes, "/v1/sandboxe", EVHTTP_REQ_GET, &r, &rest) == 404);
}

TEST(routes_sandbox)
{
	const struct api_route *r;
	const char *rest;

	CHECK(route(api_sandbox_routes, "", EVHTTP_REQ_GET, &r, &rest) == 0);
	CHECK(r && r->on_sandbox == sandbox_get);
	CHECK(route(api_sandbox_routes, "", EVHTTP_REQ_DELETE, &r, &rest) == 0);
	CHECK(r && r->on_sandbox == sandbox_delete);
	CHECK(route(api_sandbox_routes, "/exec", EVHTTP_REQ_POST, &r, &rest) == 0);
	CHECK(r && r->on_sandbox == exec_post);
	CHECK(route(api_sandbox_routes, "/processes", EVHTTP_REQ_POST, &r, &rest) == 0);
	CHECK(r && r->on_sandbox == procs_post);
	CHECK(route(api_sandbox_routes, "/processes", EVHTTP_REQ_GET, &r, &rest) == 0);
	CHECK(r && r->on_sandbox == procs_list);
	CHECK(route(api_sandbox_routes, "/processes/12", EVHTTP_REQ_GET, &r, &rest) == 0);
	CHECK(r && r->on_sandbox == proc_get && rest && !strcmp(rest, "12"));
	CHECK(route(api_sandbox_routes, "/processes/12", EVHTTP_REQ_DELETE, &r,
		    &rest) == 0);
	CHECK(r && r->on_sandbox == proc_delete);
	/* the handler, not the router, says "12x" or "1/2" is no process */
	CHECK(route(api_sandbox_routes, "/processes/1/2", EVHTTP_REQ_GET, &r, &rest) == 0);
	CHECK(rest && !strcmp(rest, "1/2"));
	CHECK(route(api_sandbox_routes, "/files", EVHTTP_REQ_GET, &r, &rest) == 0);
	CHECK(r && r->on_sandbox == files_get);
	CHECK(route(api_sandbox_routes, "/files", EVHTTP_REQ_PUT, &r, &rest) == 0);
	CHECK(r && r->on_sandbox == files_put);
	CHECK(route(api_sandbox_routes, "/files", EVHTTP_REQ_DELETE, &r, &rest) == 0);
	CHECK(r && r->on_sandbox == files_delete);
	CHECK(route(api_sandbox_routes, "/pause", EVHTTP_REQ_POST, &r, &rest) == 0);
	CHECK(r && r->on_sandbox == sandbox_pause);
	CHECK(route(api_sandbox_routes, "/resume", EVHTTP_REQ_POST, &r, &rest) == 0);
	CHECK(r && r->on_sandbox == sandbox_resume);
	CHECK(route(api_sandbox_routes, "/halt", EVHTTP_REQ_POST, &r, &rest) == 0);
	CHECK(r && r->on_sandbox == sandbox_halt);
}

TEST(routes_process_and_file_verbs)
{
	const struct api_route *r;
	const char *rest;

	/* a '*' inside a pattern is one segment; the handler gets "PID/verb" */
	CHECK(route(api_sandbox_routes, "/processes/12/stdin", EVHTTP_REQ_POST, &r,
		    &rest) == 0);
	CHECK(r && r->on_sandbox == proc_stdin && rest && !strcmp(rest, "12/stdin"));
	CHECK(route(api_sandbox_routes, "/processes/12/signal", EVHTTP_REQ_POST, &r,
		    &rest) == 0);
	CHECK(r && r->on_sandbox == proc_signal);
	CHECK(route(api_sandbox_routes, "/processes/7/output", EVHTTP_REQ_GET, &r,
		    &rest) == 0);
	CHECK(r && r->on_sandbox == proc_output && !strcmp(rest, "7/output"));
	CHECK(route(api_sandbox_routes, "/processes/7/wait", EVHTTP_REQ_GET, &r,
		    &rest) == 0);
	CHECK(r && r->on_sandbox == proc_wait);
	/* no segment, or two, is not the verb's route */
	CHECK(route(api_sandbox_routes, "/processes//stdin", EVHTTP_REQ_POST, &r,
		    &rest) == 405);
	CHECK(route(api_sandbox_routes, "/processes/1/2/stdin", EVHTTP_REQ_POST, &r,
		    &rest) == 405);
	CHECK(route(api_sandbox_routes, "/processes/1/stdinx", EVHTTP_REQ_POST, &r,
		    &rest) == 405);
	CHECK(route(api_sandbox_routes, "/files/mkdir", EVHTTP_REQ_POST, &r, &rest) == 0);
	CHECK(r && r->on_sandbox == files_mkdir);
	CHECK(route(api_sandbox_routes, "/files/rename", EVHTTP_REQ_POST, &r, &rest) == 0);
	CHECK(r && r->on_sandbox == files_rename);
	CHECK(route(api_sandbox_routes, "/files/mkdir", EVHTTP_REQ_GET, &r, &rest) == 405);
	CHECK(route(api_sandbox_routes, "/archive", EVHTTP_REQ_GET, &r, &rest) == 0);
	CHECK(r && r->on_sandbox == archive_get);
	CHECK(route(api_sandbox_routes, "/archive", EVHTTP_REQ_PUT, &r, &rest) == 0);
	CHECK(r && r->on_sandbox == archive_put);
	CHECK(route(api_sandbox_routes, "/keepalive", EVHTTP_REQ_POST, &r, &rest) == 0);
	CHECK(r && r->on_sandbox == sandbox_keepalive);
}

TEST(routes_sandbox_404_405)
{
	const struct api_route *r;
	const char *rest;

	CHECK(route(api_sandbox_routes, "", EVHTTP_REQ_PUT, &r, &rest) == 405);
	CHECK(r && !strcmp(r->allow, "a sandbox: GET or DELETE"));
	CHECK(route(api_sandbox_routes, "/exec", EVHTTP_REQ_GET, &r, &rest) == 405);
	CHECK(r && !strcmp(r->allow, "exec: POST"));
	CHECK(route(api_sandbox_routes, "/processes", EVHTTP_REQ_PUT, &r, &rest) == 405);
	CHECK(r && !strcmp(r->allow, "processes: GET or POST"));
	CHECK(route(api_sandbox_routes, "/processes/3", EVHTTP_REQ_POST, &r, &rest) == 405);
	CHECK(r && !strcmp(r->allow, "a process: GET or DELETE"));
	CHECK(route(api_sandbox_routes, "/files", EVHTTP_REQ_POST, &r, &rest) == 405);
	CHECK(r && !strcmp(r->allow, "files: GET, PUT or DELETE"));
	CHECK(route(api_sandbox_routes, "/pause", EVHTTP_REQ_GET, &r, &rest) == 405);
	CHECK(r && !strcmp(r->allow, "pause: POST"));
	CHECK(route(api_sandbox_routes, "/halt", EVHTTP_REQ_DELETE, &r, &rest) == 405);

	CHECK(route(api_sandbox_routes, "/", EVHTTP_REQ_GET, &r, &rest) == 404);
	CHECK(route(api_sandbox_routes, "/nope", EVHTTP_REQ_GET, &r, &rest) == 404);
	CHECK(route(api_sandbox_routes, "/exec/x", EVHTTP_REQ_POST, &r, &rest) == 404);
	CHECK(route(api_sandbox_routes, "/files/x", EVHTTP_REQ_GET, &r, &rest) == 404);
	CHECK(route(api_sandbox_routes, "/processes/", EVHTTP_REQ_GET, &r, &rest) == 404);
	CHECK(route(api_sandbox_routes, "/execute", EVHTTP_REQ_POST, &r, &rest) == 404);
}

/* Each entry well formed, and entries of one path agree on their 405 text. */
static void check_table(const struct api_route *t, bool sandbox)
{
	for (const struct api_route *a = t; a->path; a++) {
		CHECK(a->methods != 0);
		CHECK(sandbox ? a->on_sandbox && !a->on_daemon :
				a->on_daemon && !a->on_sandbox);
		for (const struct api_route *b = t; b < a; b++) {
			if (strcmp(a->path, b->path))
				continue;
			CHECK((a->methods & b->methods) == 0);
			CHECK(a->allow && b->allow && !strcmp(a->allow, b->allow));
		}
	}
}

TEST(routes_tables_consistent)
{
	check_table(api_routes, false);
	check_table(api_sandbox_routes, true);
}

/* ---- errno to HTTP ------------------------------------------------------------ */

static bool status_is(int (*map)(int, const char **), int code, int status,
		      const char *error)
{
	const char *e = NULL;
	int s = map(code, &e);

	if (s != status || !e || strcmp(e, error)) {
		fprintf(stderr, "  errno %d: got %d %s, want %d %s\n", -code, s,
			e ? e : "(null)", status, error);
		return false;
	}
	return true;
}

TEST(errno_to_http)
{
	CHECK(status_is(api_status, -EINVAL, 400, "bad_request"));
	CHECK(status_is(api_status, -ENAMETOOLONG, 400, "bad_request"));
	CHECK(status_is(api_status, -ELOOP, 400, "bad_request"));
	CHECK(status_is(api_status, -EISDIR, 400, "bad_request"));
	CHECK(status_is(api_status, -ENOENT, 404, "not_found"));
	CHECK(status_is(api_status, -ESRCH, 404, "not_found"));
	CHECK(status_is(api_status, -EACCES, 403, "forbidden"));
	CHECK(status_is(api_status, -EROFS, 403, "forbidden"));
	/* the kernel's EPERM is refused access, never the "halted" conflict */
	CHECK(status_is(api_status, -EPERM, 403, "forbidden"));
	CHECK(status_is(api_status, CORRAL_E_HALTED, 409, "conflict"));
	CHECK(status_is(api_status, CORRAL_E_PAUSED, 409, "conflict"));
	CHECK(status_is(api_status, CORRAL_E_STARTING, 409, "conflict"));
	CHECK(status_is(api_status, CORRAL_E_GONE, 404, "not_found"));
	CHECK(status_is(api_status, -EBUSY, 409, "conflict"));
	CHECK(status_is(api_status, -EAGAIN, 409, "conflict"));
	CHECK(status_is(api_status, -EMFILE, 503, "busy"));
	CHECK(status_is(api_status, -ENFILE, 503, "busy"));
	CHECK(status_is(api_status, -ENOSPC, 507, "no_space"));
	CHECK(status_is(api_status, -EDQUOT, 507, "no_space"));
	CHECK(status_is(api_status, -EFBIG, 507, "no_space"));
	CHECK(status_is(api_status, -EIO, 500, "internal"));
	CHECK(status_is(api_status, -ENOMEM, 500, "internal"));
	CHECK(status_is(api_status, 0, 500, "internal"));
}

TEST(errno_to_http_building)
{
	/* a path the request named is its fault */
	CHECK(status_is(api_build_status, -ENOENT, 400, "bad_request"));
	CHECK(status_is(api_build_status, -ENOTDIR, 400, "bad_request"));
	CHECK(status_is(api_build_status, -EINVAL, 400, "bad_request"));
	/* short of fds or processes: busy, as for any call */
	CHECK(status_is(api_build_status, -EMFILE, 503, "busy"));
	CHECK(status_is(api_build_status, -EAGAIN, 409, "conflict"));
	/* the rest is ours, whatever it would mean for a call */
	CHECK(status_is(api_build_status, -EACCES, 500, "internal"));
	CHECK(status_is(api_build_status, -EPERM, 500, "internal"));
	CHECK(status_is(api_build_status, -ENOSPC, 500, "internal"));
}

/* ---- request bodies ------------------------------------------------------------ */

static json_t *parse(const char *text, bool required, struct api_fault *f)
{
	return body_parse(text, strlen(text), required, f);
}

TEST(body_parse_strict)
{
	struct api_fault f = { 0 };
	json_t *o;

	o = parse("", false, &f);
	CHECK(o && json_is_object(o) && json_object_size(o) == 0);
	json_decref(o);
	o = parse("{\"a\": 1}", true, &f);
	CHECK(o && json_integer_value(json_object_get(o, "a")) == 1);
	json_decref(o);

	CHECK(!parse("", true, &f) && f.status == 400);
	CHECK(!parse("{", true, &f) && f.status == 400 &&
	      !strcmp(f.error, "bad_request"));
	CHECK_STR_CONTAINS(f.detail, "not JSON");
	CHECK(!parse("[1]", true, &f) && f.status == 400);
	CHECK_STR_CONTAINS(f.detail, "must be a JSON object");
	CHECK(!parse("\"x\"", false, &f) && f.status == 400);
	CHECK(!parse("{\"a\": 1, \"a\": 2}", true, &f) && f.status == 400);
	/* the size is judged before a byte is read */
	CHECK(!body_parse(NULL, API_JSON_MAX + 1, true, &f) && f.status == 413 &&
	      !strcmp(f.error, "too_large"));
}

TEST(only_fields_refuses_unknown)
{
	static const char *const known[] = { "a", "b", NULL };
	struct api_fault f = { 0 };
	json_t *o = json_pack("{s:i, s:i}", "a", 1, "b", 2);

	CHECK(only_fields(o, known, &f));
	json_object_set_new(o, "bogus", json_true());
	CHECK(!only_fields(o, known, &f) && f.status == 400);
	CHECK_STR_CONTAINS(f.detail, "\"bogus\"");
	json_decref(o);
}

TEST(seconds_field_range)
{
	struct api_fault f = { 0 };
	uint64_t ms = 7;
	json_t *o = json_object();

	CHECK(seconds_field(o, "t", 10, &ms, &f) && ms == 7);	/* absent */
	json_object_set_new(o, "t", json_null());
	CHECK(seconds_field(o, "t", 10, &ms, &f) && ms == 7);
	json_object_set_new(o, "t", json_real(1.5));
	CHECK(seconds_field(o, "t", 10, &ms, &f) && ms == 1500);
	json_object_set_new(o, "t", json_integer(10));
	CHECK(seconds_field(o, "t", 10, &ms, &f) && ms == 10000);
	json_object_set_new(o, "t", json_real(0.0004));
	CHECK(seconds_field(o, "t", 10, &ms, &f) && ms == 0);
	json_object_set_new(o, "t", json_integer(-1));
	CHECK(!seconds_field(o, "t", 10, &ms, &f) && f.status == 400);
	json_object_set_new(o, "t", json_real(10.5));
	CHECK(!seconds_field(o, "t", 10, &ms, &f) && f.status == 400);
	json_object_set_new(o, "t", json_string("5"));
	CHECK(!seconds_field(o, "t", 10, &ms, &f) && f.status == 400);
	CHECK_STR_CONTAINS(f.detail, "t must be a number of seconds from 0 to 10 (got \"5\")");
	json_decref(o);
}

TEST(query_numbers_finite_and_in_range)
{
	static const char *const bad[] = { "nan", "NaN", "-nan", "inf", "-inf",
		"infinity", "1e999", "-1", "86400.5", "0x10", " 5", "5 ", "5s", "",
		".", "e5", "-", "1e-400", NULL };
	static const char *const badcount[] = { "-1", "+1", " 1", "1.0", "1e3",
		"0x1", "18446744073709551616", "99999999999999999999", "", NULL };
	struct api_fault f = { 0 };
	uint64_t u = 7;
	double d = 7;

	CHECK(query_number("t", NULL, 0, 86400, &d, &f) && d == 7);
	CHECK(query_number("t", "0", 0, 86400, &d, &f) && d == 0);
	CHECK(query_number("t", "2.5", 0, 86400, &d, &f) && d == 2.5);
	CHECK(query_number("t", "86400", 0, 86400, &d, &f) && d == 86400);
	CHECK(query_number("t", "1e2", 0, 86400, &d, &f) && d == 100);
	for (size_t i = 0; bad[i]; i++) {
		d = 7;
		f = (struct api_fault){ 0 };
		if (query_number("t", bad[i], 0, 86400, &d, &f) || f.status != 400 || d != 7)
			fprintf(stderr, "  \"%s\" taken\n", bad[i]);
		CHECK(f.status == 400 && d == 7);
		CHECK_STR_CONTAINS(f.detail, "t must be a number from 0 to 86400 (got \"");
	}
	CHECK(!query_number("timeout_seconds", "nan", 0, 86400, &d, &f));
	CHECK_STR_CONTAINS(f.detail, "(got \"nan\")");
	CHECK(query_count("n", "18446744073709551615", UINT64_MAX, &u, &f) &&
	      u == UINT64_MAX);
	CHECK(query_count("n", "0", UINT64_MAX, &u, &f) && u == 0);
	CHECK(!query_count("n", "11", 10, &u, &f) && u == 0);
	for (size_t i = 0; badcount[i]; i++) {
		f = (struct api_fault){ 0 };
		if (query_count("n", badcount[i], UINT64_MAX, &u, &f))
			fprintf(stderr, "  \"%s\" taken\n", badcount[i]);
		CHECK(f.status == 400 && u == 0);
		CHECK_STR_CONTAINS(f.detail, "n must be a whole number");
	}
}

TEST(int_field_names_the_value)
{
	struct api_fault f = { 0 };
	long long n = 7;
	json_t *o = json_object();

	CHECK(int_field(o, "n", 1, 10, &n, &f) && n == 7);
	json_object_set_new(o, "n", json_integer(10));
	CHECK(int_field(o, "n", 1, 10, &n, &f) && n == 10);
	json_object_set_new(o, "n", json_integer(11));
	CHECK(!int_field(o, "n", 1, 10, &n, &f) && f.status == 400);
	CHECK_STR_CONTAINS(f.detail, "n must be an integer from 1 to 10 (got 11)");
	json_object_set_new(o, "n", json_real(1.5));
	CHECK(!int_field(o, "n", 1, 10, &n, &f));
	CHECK_STR_CONTAINS(f.detail, "(got 1.5)");
	json_object_set_new(o, "n", json_string("3"));
	CHECK(!int_field(o, "n", 1, 10, &n, &f));
	CHECK_STR_CONTAINS(f.detail, "(got \"3\")");
	json_decref(o);
}

TEST(string_field_bounds)
{
	struct api_fault f = { 0 };
	const char *s = NULL;
	json_t *o = json_object();

	CHECK(string_field(o, "s", 3, &s, &f) && s == NULL);
	json_object_set_new(o, "s", json_string("abc"));
	CHECK(string_field(o, "s", 3, &s, &f) && s && !strcmp(s, "abc"));
	json_object_set_new(o, "s", json_string("abcd"));
	CHECK(!string_field(o, "s", 3, &s, &f) && f.status == 400);
	json_object_set_new(o, "s", json_string(""));
	CHECK(!string_field(o, "s", 3, &s, &f));
	json_object_set_new(o, "s", json_stringn("a\0b", 3));
	CHECK(!string_field(o, "s", 3, &s, &f));
	json_object_set_new(o, "s", json_integer(1));
	CHECK(!string_field(o, "s", 3, &s, &f));
	json_decref(o);
}

/* call_args_check on a body given as JSON text; the fault's status, or 0. */
static int call_check(const char *text, bool background, struct call_args *a,
		      struct api_fault *f)
{
	/* NULs let through, for the checks that refuse them to see them */
	json_t *o = json_loads(text, JSON_ALLOW_NUL, NULL);
	int status;

	if (!o)
		return -1;
	status = call_args_check(o, background, a, f) ? 0 : f->status;
	if (status) {
		call_args_free(a);
		json_decref(o);
		a->o = NULL;
	}
	return status;
}

static void call_done(struct call_args *a)
{
	call_args_free(a);
	json_decref(a->o);
}

TEST(call_args_command_and_argv)
{
	struct api_fault f = { 0 };
	struct call_args a;

	CHECK(call_check("{\"command\": \"echo hi\"}", false, &a, &f) == 0);
	CHECK(a.argv && !strcmp(a.argv[0], "/bin/sh") && !strcmp(a.argv[1], "-c") &&
	      !strcmp(a.argv[2], "echo hi") && !a.argv[3]);
	CHECK(a.co.argv == a.argv && !a.stream && !a.env);
	call_done(&a);
	CHECK(call_check("{\"argv\": [\"ls\", \"-l\", \"\"]}", false, &a, &f) == 0);
	CHECK(a.argv && !strcmp(a.argv[0], "ls") && !strcmp(a.argv[2], "") &&
	      !a.argv[3]);
	call_done(&a);

	CHECK(call_check("{}", false, &a, &f) == 400);
	CHECK_STR_CONTAINS(f.detail, "exactly one of");
	CHECK(call_check("{\"argv\": [\"ls\"], \"command\": \"ls\"}", false, &a, &f) == 400);
	CHECK(call_check("{\"argv\": []}", false, &a, &f) == 400);
	CHECK(call_check("{\"argv\": \"ls\"}", false, &a, &f) == 400);
	CHECK(call_check("{\"argv\": [\"ls\", 1]}", false, &a, &f) == 400);
	CHECK_STR_CONTAINS(f.detail, "argv[1]");
	CHECK(call_check("{\"argv\": [\"\"]}", false, &a, &f) == 400);
	CHECK(call_check("{\"command\": \"\"}", false, &a, &f) == 400);
	CHECK(call_check("{\"command\": \"a\\u0000b\"}", false, &a, &f) == 400);
	CHECK(call_check("{\"argv\": [\"ls\", \"a\\u0000b\"]}", false, &a, &f) == 400);
}

TEST(call_args_options)
{
	struct api_fault f = { 0 };
	struct call_args a;

	CHECK(call_check("{\"command\": \"x\", \"env\": {\"A\": \"1\", \"B\": \"\"}, "
			 "\"stdin\": \"in\", \"timeout_seconds\": 2, \"cwd\": \"/tmp\", "
			 "\"tool_call_id\": \"t-1\", \"stream\": true}", false, &a, &f) == 0);
	CHECK(a.env && !strcmp(a.env[0], "A=1") && !strcmp(a.env[1], "B=") && !a.env[2]);
	CHECK(a.co.env == a.env);
	CHECK(a.co.stdin_len == 2 && !memcmp(a.co.stdin_data, "in", 2));
	CHECK(a.co.timeout_ms == 2000);
	CHECK(a.co.cwd && !strcmp(a.co.cwd, "/tmp"));
	CHECK(a.co.tool_call && !strcmp(a.co.tool_call, "t-1"));
	CHECK(a.stream);
	call_done(&a);

	CHECK(call_check("{\"command\": \"x\", \"env\": {\"A\": 1}}", false, &a, &f) == 400);
	CHECK(call_check("{\"command\": \"x\", \"env\": {\"A=B\": \"x\"}}", false, &a, &f) == 400);
	CHECK(call_check("{\"command\": \"x\", \"env\": {\"\": \"x\"}}", false, &a, &f) == 400);
	CHECK(call_check("{\"command\": \"x\", \"env\": [\"A=B\"]}", false, &a, &f) == 400);
	CHECK(call_check("{\"command\": \"x\", \"stdin\": 5}", false, &a, &f) == 400);
	CHECK(call_check("{\"command\": \"x\", \"stream\": \"yes\"}", false, &a, &f) == 400);
	CHECK(call_check("{\"command\": \"x\", \"timeout_seconds\": -1}", false, &a, &f) == 400);
	CHECK(call_check("{\"command\": \"x\", \"tool_call_id\": \"\"}", false, &a, &f) == 400);
	CHECK(call_check("{\"command\": \"x\", \"bogus\": 1}", false, &a, &f) == 400);
	/* a background process has no stream to give */
	CHECK(call_check("{\"command\": \"x\", \"stream\": false}", true, &a, &f) == 400);
	CHECK_STR_CONTAINS(f.detail, "stream is for exec");
	CHECK(call_check("{\"command\": \"x\"}", true, &a, &f) == 0);
	call_done(&a);
}

/* ---- queries ---------------------------------------------------------------------- */

TEST(file_query_path)
{
	struct api_fault f = { 0 };
	char path[64];
	bool list = true;

	CHECK(file_query("path=/workspace/a", path, sizeof(path), &list, &f));
	CHECK(!strcmp(path, "/workspace/a") && !list);
	CHECK(file_query("path=/a%20b&list=1", path, sizeof(path), &list, &f));
	CHECK(!strcmp(path, "/a b") && list);
	CHECK(file_query("list=false&path=/", path, sizeof(path), &list, &f));
	CHECK(!strcmp(path, "/") && !list);

	CHECK(!file_query(NULL, path, sizeof(path), &list, &f) && f.status == 400);
	CHECK(!file_query("list=1", path, sizeof(path), &list, &f) && f.status == 400);
	CHECK(!file_query("path=", path, sizeof(path), &list, &f));
	CHECK(!file_query("path=relative/x", path, sizeof(path), &list, &f));
	CHECK(!file_query("path=/a%00b", path, sizeof(path), &list, &f));
	CHECK_STR_CONTAINS(f.detail, "no NUL");
	CHECK(!file_query("path=/0123456789012345678901234567890123456789"
			  "012345678901234567890123", path, sizeof(path), &list, &f));
}

TEST(events_query_filter)
{
	struct api_fault f = { 0 };
	char sb[64];
	bool follow = true;

	CHECK(events_query(NULL, sb, sizeof(sb), &follow, &f) && !sb[0] && !follow);
	CHECK(events_query("sandbox=sb-1&follow=1", sb, sizeof(sb), &follow, &f));
	CHECK(!strcmp(sb, "sb-1") && follow);
	CHECK(events_query("follow=0", sb, sizeof(sb), &follow, &f) && !sb[0] && !follow);
	CHECK(!events_query("sandbox=a%22b", sb, sizeof(sb), &follow, &f) &&
	      f.status == 400);
	CHECK(!events_query("sandbox=0123456789012345678901234567890123456789"
			    "0123456789012345678901234", sb, sizeof(sb), &follow, &f));
}

TEST(query_flag_words)
{
	CHECK(!query_flag(NULL));
	CHECK(!query_flag("0"));
	CHECK(!query_flag("false"));
	CHECK(query_flag("1"));
	CHECK(query_flag("true"));
	CHECK(query_flag("yes"));
}

/* ---- through api_handle ------------------------------------------------------------- */

static struct daemon dm;
static char dir[] = "/tmp/corral-unit-api.XXXXXX";
static struct sockaddr_un addr = { .sun_family = AF_UNIX };

static bool daemon_up(void)
{
	int fd;

	if (!mkdtemp(dir))
		return false;
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/sock", dir);
	dm.base = event_base_new();
	dm.http_unix = dm.base ? evhttp_new(dm.base) : NULL;
	dm.state_dir = dir;
	dm.max_sandboxes = 0;		/* nothing is ever built */
	dm.lock_fd = -1;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (!dm.http_unix || fd < 0 ||
	    bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
	    listen(fd, 16) < 0 || evhttp_accept_socket(dm.http_unix, fd) < 0) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	evhttp_set_gencb(dm.http_unix, api_handle, &dm);
	return true;
}

static void daemon_down(void)
{
	if (dm.http_unix)
		evhttp_free(dm.http_unix);
	if (dm.base)
		event_base_free(dm.base);
	unlink(addr.sun_path);
	rmdir(dir);
}

/* One request; the reply's status and (the start of) its body. */
static int ask(const char *method, const char *path, const char *body,
	       char *out, size_t outlen)
{
	char req[1024], buf[4096];
	size_t got = 0;
	int c, code = -1, n;

	out[0] = '\0';
	n = snprintf(req, sizeof(req), "%s %s HTTP/1.1\r\nHost: x\r\n"
		     "Connection: close\r\nContent-Length: %zu\r\n\r\n%s", method,
		     path, strlen(body), body);
	c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c < 0 || connect(c, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
	    write(c, req, n) != n) {
		if (c >= 0)
			close(c);
		return -1;
	}
	fcntl(c, F_SETFL, O_NONBLOCK);
	/* bounded: the daemon answers these without waiting for anything */
	for (int turn = 0; turn < 2000; turn++) {
		struct pollfd p = { c, POLLIN, 0 };
		ssize_t r;

		event_base_loop(dm.base, EVLOOP_NONBLOCK);
		r = read(c, buf + got, sizeof(buf) - 1 - got);
		if (r == 0 || (r < 0 && errno != EAGAIN) || got == sizeof(buf) - 1)
			break;
		if (r > 0) {
			got += r;
			continue;
		}
		poll(&p, 1, 5);
	}
	close(c);
	buf[got] = '\0';
	if (sscanf(buf, "HTTP/1.%*d %d", &code) != 1)
		return -1;
	snprintf(out, outlen, "%s", strstr(buf, "\r\n\r\n") ?
		 strstr(buf, "\r\n\r\n") + 4 : "");
	return code;
}

TEST(handle_dispatch)
{
	char body[1024];

	if (!daemon_up()) {
		CHECK(!"cannot serve a unix socket in /tmp");
		daemon_down();
		return;
	}
	CHECK(ask("GET", "/v1/health", "", body, sizeof(body)) == 200);
	CHECK_STR_CONTAINS(body, "\"status\":\"ok\"");
	CHECK(ask("POST", "/v1/health", "", body, sizeof(body)) == 405);
	CHECK_STR_CONTAINS(body, "method_not_allowed");
	CHECK(ask("GET", "/v1/nope", "", body, sizeof(body)) == 404);
	CHECK_STR_CONTAINS(body, "no route /v1/nope");
	CHECK(ask("GET", "/v1/sandboxes", "", body, sizeof(body)) == 200);
	CHECK_STR_CONTAINS(body, "\"sandboxes\":[]");
	/* an unknown sandbox is a 404 whatever follows, method included */
	CHECK(ask("PUT", "/v1/sandboxes/sb-000000000000/exec", "", body,
		  sizeof(body)) == 404);
	CHECK_STR_CONTAINS(body, "no sandbox \\\"sb-000000000000\\\"");
	/* the body is checked before the daemon's room */
	CHECK(ask("POST", "/v1/sandboxes", "{\"bogus\": 1}", body, sizeof(body)) == 400);
	CHECK_STR_CONTAINS(body, "unknown field");
	CHECK(ask("POST", "/v1/sandboxes", "{}", body, sizeof(body)) == 503);
	CHECK_STR_CONTAINS(body, "--max-sandboxes");
	CHECK(ask("GET", "/v1/events?sandbox=a%22b", "", body, sizeof(body)) == 400);
	CHECK(dm.requests == 8);
	daemon_down();
}

int main(void)
{
	unit_run_all();
	UNIT_DONE();
}

/* ---- the bearer token ------------------------------------------------------- */

static bool token_is(struct daemon *d, const char *h)
{
	return api_token_ok(d, h, strlen(h));
}

TEST(token_compared_whole)
{
	struct daemon d = { .token = "k3y-0123456789abcdef" };

	CHECK(token_is(&d, "Bearer k3y-0123456789abcdef"));
	/* a prefix, a longer one, one byte off, empty, another scheme */
	CHECK(!token_is(&d, "Bearer k3y-0123456789abcde"));
	CHECK(!token_is(&d, "Bearer k3y-0123456789abcdefg"));
	CHECK(!token_is(&d, "Bearer k3y-0123456789abcdeF"));
	CHECK(!token_is(&d, "Bearer "));
	CHECK(!token_is(&d, "Bearer"));
	CHECK(!token_is(&d, "Basic k3y-0123456789abcdef"));
	/* a NUL in what was sent is part of it */
	CHECK(!api_token_ok(&d, "Bearer k3y-0123456789abcdef\0x", 29));
}
