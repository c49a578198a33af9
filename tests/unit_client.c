/*
 * unit_client.c - the client verbs' logic without a daemon: what their
 * command lines put in the JSON body, which usage errors they give, where
 * they look for the daemon, the API paths they build and escape, the exit
 * status a result maps to, how the daemon's text reaches a terminal, and
 * how sockhttp.c reads answers from a socket that plays the daemon (one
 * that lies, stops short or floods included).
 *
 * Linked against the CLI's objects (build/libcli.a) but its main().  What
 * a verb prints is captured (capture_begin/end) and checked, not shown.
 */
#include "cli.h"
#include "client.h"
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <grp.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>


/* argv for a parser: a NULL-terminated array of the given words */
#define ARGV(...)	((char *[]){ __VA_ARGS__, NULL })
#define ARGC(...)	((int)(sizeof((char *[]){ __VA_ARGS__ }) / sizeof(char *)))
#define CALL(fn, ...)	fn(ARGC(__VA_ARGS__), ARGV(__VA_ARGS__))

static char tmpdir[] = "/tmp/corral-unit-client.XXXXXX";

/* ---- what a verb prints ------------------------------------------------ */

static char cap_out[65536], cap_err[65536];
static int saved_out = -1, saved_err = -1;
static FILE *file_out, *file_err;

static void capture_begin(void)
{
	fflush(stdout);
	fflush(stderr);
	file_out = tmpfile();
	file_err = tmpfile();
	saved_out = dup(STDOUT_FILENO);
	saved_err = dup(STDERR_FILENO);
	if (!file_out || !file_err || saved_out < 0 || saved_err < 0 ||
	    dup2(fileno(file_out), STDOUT_FILENO) < 0 ||
	    dup2(fileno(file_err), STDERR_FILENO) < 0) {
		perror("unit_client: capture");
		exit(1);
	}
}

static void slurp(FILE *f, char *buf, size_t size)
{
	size_t n;

	rewind(f);
	n = fread(buf, 1, size - 1, f);
	buf[n] = '\0';
	fclose(f);
}

static void capture_end(void)
{
	fflush(stdout);
	fflush(stderr);
	clearerr(stdout);
	if (dup2(saved_out, STDOUT_FILENO) < 0 ||
	    dup2(saved_err, STDERR_FILENO) < 0) {
		perror("unit_client: capture");
		exit(1);
	}
	close(saved_out);
	close(saved_err);
	slurp(file_out, cap_out, sizeof(cap_out));
	slurp(file_err, cap_err, sizeof(cap_err));
}

static char *write_file(const char *name, const char *text, mode_t mode)
{
	char *path;
	FILE *f;

	if (asprintf(&path, "%s/%s", tmpdir, name) < 0)
		return NULL;
	f = fopen(path, "w");
	if (!f || fputs(text, f) == EOF || fclose(f) == EOF ||
	    chmod(path, mode) < 0) {
		perror(path);
		exit(1);
	}
	return path;
}

/* ---- ids and ID:/PATH -------------------------------------------------- */

TEST(valid_id)
{
	char long_id[CORRAL_SANDBOX_ID_MAX + 2];

	CHECK(client_valid_id("sb-0123abcd"));
	CHECK(client_valid_id("a.b_c-D9"));
	/* the library's limit: no sandbox has a longer id */
	memset(long_id, 'a', CORRAL_SANDBOX_ID_MAX);
	long_id[CORRAL_SANDBOX_ID_MAX] = '\0';
	CHECK(client_valid_id(long_id));
	long_id[CORRAL_SANDBOX_ID_MAX] = 'a';
	long_id[CORRAL_SANDBOX_ID_MAX + 1] = '\0';
	CHECK(!client_valid_id(long_id));
	CHECK(!client_valid_id(""));
	CHECK(!client_valid_id(".hidden"));
	CHECK(!client_valid_id(".."));
	CHECK(!client_valid_id("../x"));
	CHECK(!client_valid_id("a/b"));
	CHECK(!client_valid_id("a b"));
	CHECK(!client_valid_id("a%2e"));
	CHECK(!client_valid_id("a?b"));
}

TEST(split_remote)
{
	char id[128];
	const char *path = NULL;

	CHECK(client_split_remote("sb-1:/workspace/a.txt", id, sizeof(id), &path));
	CHECK(!strcmp(id, "sb-1") && !strcmp(path, "/workspace/a.txt"));
	CHECK(client_split_remote("sb-1:/", id, sizeof(id), &path));
	CHECK(!strcmp(path, "/"));
	/* local paths, however colons sit in them */
	CHECK(!client_split_remote("sb-1:relative", id, sizeof(id), &path));
	CHECK(!client_split_remote(":/x", id, sizeof(id), &path));
	CHECK(!client_split_remote("./a:/b", id, sizeof(id), &path));
	CHECK(!client_split_remote("/tmp/x:/y", id, sizeof(id), &path));
	CHECK(!client_split_remote("file.txt", id, sizeof(id), &path));
	CHECK(!client_split_remote("..:/etc", id, sizeof(id), &path));
	/* an id longer than the buffer is not cut short into another id */
	CHECK(!client_split_remote("abcdefgh:/x", id, 8, &path));
	CHECK(client_split_remote("abcdefg:/x", id, 8, &path));
}

/* ---- result to exit status --------------------------------------------- */

static int exit_code_of(const char *json)
{
	json_t *o = json_loads(json, 0, NULL);
	int code = client_exit_code(o);

	json_decref(o);
	return code;
}

TEST(exit_code)
{
	CHECK(exit_code_of("{\"status\": \"exited\", \"exit_code\": 0}") == 0);
	CHECK(exit_code_of("{\"status\": \"exited\", \"exit_code\": 3}") == 3);
	CHECK(exit_code_of("{\"status\": \"exited\", \"exit_code\": 127}") == 127);
	CHECK(exit_code_of("{\"status\": \"signaled\", \"exit_code\": -1, \"signal\": 9}") == 137);
	CHECK(exit_code_of("{\"status\": \"signaled\", \"exit_code\": -1, \"signal\": 15}") == 143);
	CHECK(exit_code_of("{\"status\": \"timeout\", \"exit_code\": -1, \"signal\": 9}") == 124);
	/* the same rules as corral run's, from the library */
	for (int s = CORRAL_EXITED; s <= CORRAL_ERROR; s++) {
		struct corral_result res = { .status = s, .exit_code = 5, .signal = 9 };
		char json[128];

		snprintf(json, sizeof(json),
			 "{\"status\": \"%s\", \"exit_code\": 5, \"signal\": 9}",
			 corral_status_name(s));
		CHECK(exit_code_of(json) == corral_result_exit_code(&res));
	}
	/* what does not say */
	CHECK(exit_code_of("{}") == -1);
	CHECK(exit_code_of("{\"exit_code\": 0}") == -1);
	CHECK(exit_code_of("{\"status\": \"exploded\", \"exit_code\": 0}") == -1);
	CHECK(exit_code_of("{\"status\": \"exited\"}") == -1);
	CHECK(exit_code_of("{\"status\": \"exited\", \"exit_code\": \"0\"}") == -1);
}

/* ---- exec's command line ------------------------------------------------ */

struct parsed {
	struct exec_args a;
	struct conn c;
	int code;
};

#define EXEC(p, ...)	exec_run(p, ARGC(__VA_ARGS__), ARGV(__VA_ARGS__))

static void exec_run(struct parsed *p, int argc, char **argv)
{
	memset(p, 0, sizeof(*p));
	p->a.body = json_object();
	p->a.env = json_object();
	capture_begin();
	p->code = exec_parse(&p->a, &p->c, argc, argv);
	capture_end();
}

static void exec_done(struct parsed *p)
{
	json_decref(p->a.body);
	json_decref(p->a.env);
	conn_close(&p->c);
}

static const char *str(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* o[key] is the string want (a missing key is not, and does not crash) */
static bool str_is(const json_t *o, const char *key, const char *want)
{
	const char *s = str(o, key);

	return s && !strcmp(s, want);
}

TEST(exec_body)
{
	struct parsed p;
	json_t *argv;

	EXEC(&p, "exec", "--env", "A=1", "sb-1", "--timeout", "1500ms",
	     "--cwd", "/w", "--tool-call", "call:7", "--env", "B=x=y", "--",
	     "ls", "-l", "--json");
	CHECK(p.code == 0);
	CHECK(p.a.id && !strcmp(p.a.id, "sb-1"));
	argv = json_object_get(p.a.body, "argv");
	CHECK(json_array_size(argv) == 3);
	CHECK(json_string_value(json_array_get(argv, 2)) &&
	      !strcmp(json_string_value(json_array_get(argv, 2)), "--json"));
	CHECK(!p.a.json);		/* after "--" it is the command's */
	CHECK(json_real_value(json_object_get(p.a.body, "timeout_seconds")) == 1.5);
	CHECK(str_is(p.a.body, "cwd", "/w"));
	CHECK(str_is(p.a.body, "tool_call_id", "call:7"));
	CHECK(str_is(json_object_get(p.a.body, "env"), "A", "1"));
	CHECK(str_is(json_object_get(p.a.body, "env"), "B", "x=y"));
	CHECK(!json_object_get(p.a.body, "command"));
	CHECK(!json_object_get(p.a.body, "stdin"));	/* read later */
	exec_done(&p);

	EXEC(&p, "exec", "--json", "--no-stream", "--background", "-i",
	     "--timeout", "2", "sb-1", "-c", "echo hi | wc");
	CHECK(p.code == 0);
	CHECK(p.a.json && p.a.no_stream && p.a.background);
	CHECK(p.a.stdin_file && !strcmp(p.a.stdin_file, "-"));
	CHECK(str_is(p.a.body, "command", "echo hi | wc"));
	CHECK(json_integer_value(json_object_get(p.a.body, "timeout_seconds")) == 2);
	CHECK(!json_object_get(p.a.body, "argv"));
	CHECK(!json_object_get(p.a.body, "env"));
	exec_done(&p);

	/* connection options are the connection's */
	EXEC(&p, "exec", "--socket", "/x/s.sock", "sb-1", "--", "true");
	CHECK(p.code == 0 && p.c.socket && !strcmp(p.c.socket, "/x/s.sock"));
	exec_done(&p);
}

/*
 * exec's usage error is EXIT_CORRAL, not 2, which the command's own
 * status may be (docker exec's 125; helper-169's one rule).
 */
static void exec_refused(const char *what, struct parsed *p)
{
	CHECK(p->code == EXIT_CORRAL);
	CHECK_STR_CONTAINS(cap_err, what);
	CHECK_STR_CONTAINS(cap_err, "see `corral exec --help`");
	exec_done(p);
}

TEST(exec_usage_errors)
{
	struct parsed p;

	EXEC(&p, "exec", "sb-1", "ls", "-l");
	exec_refused("one sandbox ID, then \"--\" and the command", &p);
	EXEC(&p, "exec", "sb-1");
	exec_refused("no command: corral exec ID -- COMMAND", &p);
	EXEC(&p, "exec", "sb-1", "--");
	exec_refused("no command after \"--\"", &p);
	EXEC(&p, "exec", "--", "ls");
	exec_refused("no sandbox ID given", &p);
	EXEC(&p, "exec", "../sb", "--", "ls");
	exec_refused("\"../sb\" is not a sandbox id", &p);
	EXEC(&p, "exec", "sb-1", "-c", "x", "--", "ls");
	exec_refused("give the command once", &p);
	EXEC(&p, "exec", "sb-1", "-i", "--stdin-file", "f", "--", "ls");
	exec_refused("give stdin once", &p);
	EXEC(&p, "exec", "sb-1", "--timeout", "soon", "--", "ls");
	exec_refused("--timeout: ", &p);
	EXEC(&p, "exec", "sb-1", "--timeout", "1000000d", "--", "ls");
	exec_refused("--timeout: too long", &p);
	EXEC(&p, "exec", "sb-1", "--tool-call", "call\xff", "--", "ls");
	exec_refused("--tool-call: tool_call_id is not UTF-8", &p);
	EXEC(&p, "exec", "sb-1", "--tool-call", "", "--", "ls");
	exec_refused("--tool-call: tool_call_id must be 1 to 127 bytes", &p);
	EXEC(&p, "exec", "sb-1", "--env", "A=1", "--env", "A=2", "--", "ls");
	exec_refused("--env: A is given twice", &p);
	EXEC(&p, "exec", "sb-1", "--env", "=1", "--", "ls");
	exec_refused("--env: expected KEY=VALUE", &p);
	EXEC(&p, "exec", "sb-1", "--", "ls", "\xff");
	exec_refused("is not UTF-8 text", &p);
	EXEC(&p, "exec", "--bogus", "sb-1", "--", "ls");
	exec_refused("unknown option \"--bogus\"", &p);
	EXEC(&p, "exec", "-Z", "sb-1", "--", "ls");
	exec_refused("unknown option \"-Z\"", &p);
	EXEC(&p, "exec", "sb-1", "--cwd");
	exec_refused("option \"--cwd\" needs a value", &p);

	EXEC(&p, "exec", "--help");
	CHECK(p.code == HELP_SHOWN);
	CHECK_STR_CONTAINS(cap_out, "Usage: corral exec [OPTIONS] ID -- COMMAND");
	CHECK_STR_CONTAINS(cap_out, "Connection (every verb that talks to the daemon)");
	exec_done(&p);
}

/* ---- create's command line ---------------------------------------------- */

#define CREATE(a, c, ...)	create_run(a, c, ARGC(__VA_ARGS__), ARGV(__VA_ARGS__))

static int create_run(struct create_args *a, struct conn *c, int argc,
		      char **argv)
{
	int code;

	memset(a, 0, sizeof(*a));
	memset(c, 0, sizeof(*c));
	a->body = json_object();
	a->labels = json_object();
	capture_begin();
	code = create_parse(a, c, argc, argv);
	capture_end();
	return code;
}

static void create_done(struct create_args *a, struct conn *c)
{
	json_decref(a->body);
	json_decref(a->labels);
	conn_close(c);
}

TEST(create_body)
{
	char *policy = write_file("p.json", "{\"limits\": {\"memory\": \"64M\"}}", 0644);
	char *ws_real = realpath(tmpdir, NULL);
	struct create_args a;
	struct conn c;
	json_t *labels;

	CHECK(CREATE(&a, &c, "create", "--ttl", "90s", "--idle-freeze", "1500ms",
		     "--label", "a=b", "--json", "--label", "c=d=e",
		     "--policy", policy, "--workspace", tmpdir) == 0);
	CHECK(json_is_integer(json_object_get(a.body, "ttl_seconds")));
	CHECK(json_integer_value(json_object_get(a.body, "ttl_seconds")) == 90);
	CHECK(json_integer_value(json_object_get(a.body, "idle_freeze_ms")) == 1500);
	labels = json_object_get(a.body, "labels");
	CHECK(json_object_size(labels) == 2);
	CHECK(str_is(labels, "c", "d=e"));
	CHECK(str_is(json_object_get(json_object_get(a.body, "policy"), "limits"),
		     "memory", "64M"));
	CHECK(ws_real && str_is(a.body, "workspace", ws_real));
	CHECK(a.json);
	create_done(&a, &c);

	CHECK(CREATE(&a, &c, "create", "--ttl", "1.5s") == 0);
	CHECK(json_real_value(json_object_get(a.body, "ttl_seconds")) == 1.5);
	CHECK(!json_object_get(a.body, "labels"));
	CHECK(!json_object_get(a.body, "workspace"));
	create_done(&a, &c);

	/* over --url the path is the daemon host's: sent as given */
	CHECK(CREATE(&a, &c, "create", "--url", "http://h:1", "--workspace",
		     "/srv/w") == 0);
	CHECK(str_is(a.body, "workspace", "/srv/w"));
	create_done(&a, &c);
	free(policy);
	free(ws_real);
}

TEST(create_usage_errors)
{
	char *array = write_file("array.json", "[1, 2]", 0644);
	char *broken = write_file("broken.json", "{\"a\": ", 0644);
	char *file = write_file("notadir", "x", 0644);
	struct create_args a;
	struct conn c;

	CHECK(CREATE(&a, &c, "create", "extra") == 2);
	CHECK_STR_CONTAINS(cap_err, "create takes no operands (got \"extra\")");
	create_done(&a, &c);
	CHECK(CREATE(&a, &c, "create", "--label", "novalue") == 2);
	CHECK_STR_CONTAINS(cap_err, "--label: expected KEY=VALUE");
	create_done(&a, &c);
	CHECK(CREATE(&a, &c, "create", "--ttl", "x") == 2);
	create_done(&a, &c);
	CHECK(CREATE(&a, &c, "create", "--policy", array, "--policy", array) == EXIT_CORRAL);
	CHECK_STR_CONTAINS(cap_err, "a policy is a JSON object");
	create_done(&a, &c);
	CHECK(CREATE(&a, &c, "create", "--policy", broken) == EXIT_CORRAL);
	CHECK_STR_CONTAINS(cap_err, "broken.json:1:");
	create_done(&a, &c);
	CHECK(CREATE(&a, &c, "create", "--workspace", file) == EXIT_CORRAL);
	CHECK_STR_CONTAINS(cap_err, "not a directory");
	create_done(&a, &c);
	CHECK(CREATE(&a, &c, "create", "--url", "http://h:1", "--workspace",
		     "rel/dir") == 2);
	CHECK_STR_CONTAINS(cap_err, "must be absolute (got \"rel/dir\")");
	create_done(&a, &c);
	free(array);
	free(broken);
	free(file);
}

/* ---- where the daemon is ------------------------------------------------ */

static const struct verb test_verb = { .name = "test", .head = "", .tail = "" };

static int target(struct conn *c)
{
	int code;

	capture_begin();
	code = conn_target(c, &test_verb);
	capture_end();
	return code;
}

TEST(conn_target_rules)
{
	char *tok = write_file("tok", "s3cret-token-0123\r\nsecond line\n", 0600);
	char *spaced = write_file("spaced", "two words\n", 0600);
	char *empty = write_file("empty", "", 0600);
	char long_path[200];
	struct conn c;

	c = (struct conn){ .socket = "/a", .url = "http://h:1" };
	CHECK(target(&c) == 2);
	CHECK_STR_CONTAINS(cap_err, "--socket and --url exclude each other");
	conn_close(&c);
	c = (struct conn){ .token_file = tok };
	CHECK(target(&c) == 2);
	CHECK_STR_CONTAINS(cap_err, "--token-file goes with --url");
	conn_close(&c);
	c = (struct conn){ .url = "ftp://h:1", .token_file = tok };
	CHECK(target(&c) == 2);
	conn_close(&c);
	c = (struct conn){ .url = "http://h:1" };
	CHECK(target(&c) == 2);
	CHECK_STR_CONTAINS(cap_err, "--url needs --token-file");
	conn_close(&c);

	c = (struct conn){ .url = "http://h:1//", .token_file = tok };
	CHECK(target(&c) == 0);
	CHECK(c.base && !strcmp(c.base, "http://h:1"));
	CHECK(c.auth && !strcmp(c.auth, "Authorization: Bearer s3cret-token-0123"));
	conn_close(&c);
	c = (struct conn){ .url = "http://h:1", .token_file = spaced };
	CHECK(target(&c) == EXIT_CORRAL);
	CHECK_STR_CONTAINS(cap_err, "the first line must be the token");
	conn_close(&c);
	c = (struct conn){ .url = "http://h:1", .token_file = empty };
	CHECK(target(&c) == EXIT_CORRAL);
	CHECK_STR_CONTAINS(cap_err, "the file is empty");
	conn_close(&c);

	/* the unix socket: --socket, else $CORRAL_SOCKET, else the default */
	c = (struct conn){ .socket = "/run/x.sock", .socket_from = "--socket" };
	CHECK(target(&c) == 0);
	CHECK(c.base && !strcmp(c.base, "http://localhost") && !c.auth);
	conn_close(&c);
	setenv("CORRAL_SOCKET", "/env/corral.sock", 1);
	c = (struct conn){ 0 };
	CHECK(target(&c) == 0);
	CHECK(c.socket && !strcmp(c.socket, "/env/corral.sock"));
	CHECK(c.socket_from && !strcmp(c.socket_from, "$CORRAL_SOCKET"));
	conn_close(&c);
	unsetenv("CORRAL_SOCKET");
	setenv("XDG_RUNTIME_DIR", "/run/user/4242", 1);
	c = (struct conn){ 0 };
	CHECK(target(&c) == 0);
	CHECK(c.socket && !strcmp(c.socket, geteuid() == 0 ?
				  "/run/corral/corral.sock" :
				  "/run/user/4242/corral.sock"));
	conn_close(&c);
	if (geteuid() != 0) {
		setenv("XDG_RUNTIME_DIR", "relative", 1);
		c = (struct conn){ 0 };
		CHECK(target(&c) == EXIT_CORRAL);
		CHECK_STR_CONTAINS(cap_err, "XDG_RUNTIME_DIR is not set to an absolute path");
		conn_close(&c);
	}
	memset(long_path, 'a', sizeof(long_path) - 1);
	long_path[0] = '/';
	long_path[sizeof(long_path) - 1] = '\0';
	c = (struct conn){ .socket = long_path, .socket_from = "--socket" };
	CHECK(target(&c) == EXIT_CORRAL);
	CHECK_STR_CONTAINS(cap_err, "is too long: 199 bytes");
	conn_close(&c);
	free(tok);
	free(spaced);
	free(empty);
}

/* ---- the API's paths ---------------------------------------------------- */

static bool path_is(char *got, const char *want)
{
	bool same = got && !strcmp(got, want);

	if (!same)
		fprintf(stderr, "  path: got %s, want %s\n", got ? got : "NULL", want);
	free(got);
	return same;
}

TEST(api_paths)
{
	struct conn c = { .socket = "/nowhere.sock", .socket_from = "--socket" };

	CHECK(conn_open(&c, &test_verb) == 0);
	CHECK(path_is(conn_sandbox_path(&c, "sb-1", ""), "/v1/sandboxes/sb-1"));
	CHECK(path_is(conn_sandbox_path(&c, "sb-1", "/exec"), "/v1/sandboxes/sb-1/exec"));
	CHECK(path_is(conn_sandbox_path(&c, "sb.1_x-Y", "/processes/12"),
		      "/v1/sandboxes/sb.1_x-Y/processes/12"));
	/* escaping: whatever a path holds cannot end the query or add to it */
	CHECK(path_is(conn_files_path(&c, "sb-1", "/workspace/a b&c=d?e#f%g+h", false),
		      "/v1/sandboxes/sb-1/files?path=%2Fworkspace%2Fa%20b%26c%3Dd%3Fe%23f%25g%2Bh"));
	CHECK(path_is(conn_files_path(&c, "sb-1", "/workspace", true),
		      "/v1/sandboxes/sb-1/files?path=%2Fworkspace&list=1"));
	CHECK(path_is(conn_files_path(&c, "sb-1", "/w/\xc3\xa9\n", false),
		      "/v1/sandboxes/sb-1/files?path=%2Fw%2F%C3%A9%0A"));
	/* belt and braces: an id is checked before, and escaped all the same */
	CHECK(path_is(conn_sandbox_path(&c, "../x", ""), "/v1/sandboxes/..%2Fx"));
	conn_close(&c);

	CHECK(path_is(events_path(NULL, false), "/v1/events"));
	CHECK(path_is(events_path(NULL, true), "/v1/events?follow=1"));
	CHECK(path_is(events_path("sb-1", false), "/v1/events?sandbox=sb-1"));
	CHECK(path_is(events_path("sb-1", true), "/v1/events?sandbox=sb-1&follow=1"));
}

/* ---- the daemon's words ------------------------------------------------- */

TEST(printable_text)
{
	char *s = printable("a\x1b[2Jb\x7f" "c\xc2\x9b" "d\xc3\xa9\xc2\xa0" "e\n", 17);

	CHECK(s && !strcmp(s, "a\\x1b[2Jb\\x7fc\\xc2\\x9bd\xc3\xa9\xc2\xa0" "e\\x0a"));
	free(s);
	/*
	 * Bytes of no UTF-8 character: a lone 0x9b (CSI on an 8-bit terminal)
	 * or any 0x80..0x9f, a lead byte cut off at the end (the next write
	 * could complete it), an overlong form of ESC, a surrogate.
	 */
	s = printable("a\x9b" "2Jb\x85" "c\xc2", 8);
	CHECK(s && !strcmp(s, "a\\x9b2Jb\\x85c\\xc2"));
	free(s);
	s = printable("\xc0\x9b" "d\xed\xa0\x80" "e\xe2\x82", 9);
	CHECK(s && !strcmp(s, "\\xc0\\x9bd\\xed\\xa0\\x80e\\xe2\\x82"));
	free(s);
	/* and what is well-formed stays: 3- and 4-byte characters */
	s = printable("\xe2\x82\xac\xf0\x9f\x90\x8e", 7);
	CHECK(s && !strcmp(s, "\xe2\x82\xac\xf0\x9f\x90\x8e"));
	free(s);
	s = printable("nul\0byte", 8);
	CHECK(s && !strcmp(s, "nul\\x00byte"));
	free(s);
	/*
	 * The bidirectional formatting characters as bytes (RLO, LRI, PDI,
	 * ALM, RLM), their neighbours (U+202F, U+2065, U+200D) as they are
	 */
	s = printable("x\xe2\x80\xae" "a\xe2\x81\xa6" "b\xe2\x81\xa9" "c\xd8\x9c"
		      "d\xe2\x80\x8f" "e\xe2\x80\xaf\xe2\x81\xa5\xe2\x80\x8d", 29);
	CHECK(s && !strcmp(s, "x\\xe2\\x80\\xaea\\xe2\\x81\\xa6b\\xe2\\x81\\xa9"
			   "c\\xd8\\x9cd\\xe2\\x80\\x8fe"
			   "\xe2\x80\xaf\xe2\x81\xa5\xe2\x80\x8d"));
	free(s);
	/*
	 * What a log's reader breaks a line at (U+2028, U+2029) and what draws
	 * nothing (U+200B, U+2060, U+FEFF, a tag: U+E0041, a hidden "A"), as
	 * bytes; ZWJ and ZWNJ, which scripts and emoji need, as they are
	 */
	s = printable("a\xe2\x80\xa8" "b\xe2\x80\xa9" "c\xe2\x80\x8b" "d\xe2\x81\xa0"
		      "e\xef\xbb\xbf" "f\xf3\xa0\x81\x81" "g\xe2\x80\x8c\xe2\x80\x8d", 32);
	CHECK(s && !strcmp(s, "a\\xe2\\x80\\xa8b\\xe2\\x80\\xa9c\\xe2\\x80\\x8b"
			   "d\\xe2\\x81\\xa0e\\xef\\xbb\\xbff\\xf3\\xa0\\x81\\x81"
			   "g\xe2\x80\x8c\xe2\x80\x8d"));
	free(s);
	/* a patch's lines: a newline and a tab as they are, CR not */
	s = printable_lines("a\tb\nc\x1b[2K\r+d\xe2\x80\xae", 15);
	CHECK(s && !strcmp(s, "a\tb\nc\\x1b[2K\\x0d+d\\xe2\\x80\\xae"));
	free(s);
	/*
	 * What else draws nothing: VS1 and VS17 (a run of selectors carries
	 * bytes), CGJ, the Hangul fillers, Khmer's inherent vowel, the
	 * Mongolian vowel separator, as bytes; VS16 after an emoji as it is
	 */
	s = printable("a\xef\xb8\x80" "b\xf3\xa0\x84\x80" "c\xcd\x8f" "d\xe3\x85\xa4"
		      "e\xe1\x85\x9f" "f\xef\xbe\xa0" "g\xe1\x9e\xb4" "h\xe1\xa0\x8e"
		      "\xe2\x9d\xa4\xef\xb8\x8f", 38);
	CHECK(s && !strcmp(s, "a\\xef\\xb8\\x80b\\xf3\\xa0\\x84\\x80c\\xcd\\x8f"
			   "d\\xe3\\x85\\xa4e\\xe1\\x85\\x9ff\\xef\\xbe\\xa0"
			   "g\\xe1\\x9e\\xb4h\\xe1\\xa0\\x8e\xe2\x9d\xa4\xef\xb8\x8f"));
	free(s);
	CHECK(cli_hidden_control("\xf3\xa0\x88\x80", 4) == 0);	/* U+E0200 */
	CHECK(cli_hidden_control("\xef\xb8\x8e", 3) == 0);	/* VS15 */
	CHECK(cli_hidden_control("\xf3\xa0\x82\x80", 4) == 0);	/* U+E0080 */
	CHECK(cli_hidden_control("\xe2\x81\xa5", 3) == 0);	/* U+2065 */
	CHECK(cli_bidi_control("\xe2\x80", 2) == 0);
	CHECK(cli_bidi_control("\xe2\x80\xad", 3) == 3);
}

/*
 * cli_error() shows a message by printable()'s rule (one rule for the
 * CLI), a tab kept: it had a loop of its own, which wrote a C1 control
 * as "\\u009b" where printable() writes "\\xc2\\x9b", the same byte pair
 * said two ways on one terminal.
 */
TEST(errors_shown_by_the_one_rule)
{
	static const char hostile[] =
		"a\x1b]52;c;eA==\x07" "b\xc2\x9d" "0;t\xc2\x9c" "c\x9b" "2J"
		"d\xe2\x80\xae" "e\xe2\x80\x8b" "f\n" "g\r" "h\xf3\xa0\x81\x81" "i\xe2\x82";
	char want[512], *s = printable(hostile, strlen(hostile));

	CHECK(s != NULL);
	snprintf(want, sizeof(want), "corral: %s\tx\n", s ? s : "");
	capture_begin();
	cli_error("%s\tx", hostile);
	capture_end();
	CHECK(!strcmp(cap_err, want));
	CHECK(strstr(cap_err, "b\\xc2\\x9d0;t\\xc2\\x9c") != NULL);
	free(s);
}

/*
 * A label's key and value in `corral ls`: "," and "=" as \x2c and \x3d,
 * so that each one shown is corral's separator, and controls as ever.
 */
TEST(label_fields_keep_their_separators)
{
	char *s = printable_field("ci,approved=yes\x1b[2J", 19);

	CHECK(s && !strcmp(s, "ci\\x2capproved\\x3dyes\\x1b[2J"));
	free(s);
	s = printable("a,b=c", 5);
	CHECK(s && !strcmp(s, "a,b=c"));
	free(s);
}

static int check_status(long status, const char *body)
{
	struct reply r = { .status = status, .buf = (char *)body,
			   .len = strlen(body) };
	int ret;

	capture_begin();
	ret = reply_check(&r);
	capture_end();
	return ret;
}

TEST(daemon_refusals)
{
	json_t *o;
	struct reply r;

	CHECK(check_status(200, "{}") == 0);
	CHECK(check_status(201, "") == 0);
	CHECK(check_status(409, "{\"error\": \"halted\", \"detail\": \"halted: \\u001b[31mred\"}") == -1);
	CHECK(!strcmp(cap_err, "corral: halted: \\x1b[31mred (HTTP 409)\n"));
	CHECK(check_status(404, "{\"error\": \"not_found\"}") == -1);
	CHECK(!strcmp(cap_err, "corral: not_found (HTTP 404)\n"));
	CHECK(check_status(502, "<html>bad\x1b gateway</html>") == -1);
	CHECK(!strcmp(cap_err, "corral: the daemon answered HTTP 502: <html>bad\\x1b gateway</html>\n"));

	r = (struct reply){ .status = 200, .buf = "[1]", .len = 3 };
	capture_begin();
	o = reply_object(&r);
	capture_end();
	CHECK(!o);
	CHECK_STR_CONTAINS(cap_err, "not a JSON object");
	r = (struct reply){ .status = 200, .buf = "{\"id\": \"x\"}", .len = 11 };
	o = reply_object(&r);
	CHECK(o && str_is(o, "id", "x"));
	json_decref(o);
}

/* ---- whole verbs, where they end before the daemon ---------------------- */

static int verb(int (*fn)(int, char **), int argc, char **argv)
{
	int code;

	capture_begin();
	code = fn(argc, argv);
	capture_end();
	return code;
}

#define VERB(fn, ...)	verb(fn, ARGC(__VA_ARGS__), ARGV(__VA_ARGS__))

TEST(verb_exit_statuses)
{
	char sock[256], notsock[256];

	snprintf(sock, sizeof(sock), "%s/no.sock", tmpdir);
	free(write_file("file.sock", "", 0600));
	snprintf(notsock, sizeof(notsock), "%s/file.sock", tmpdir);

	CHECK(VERB(cmd_pause, "pause", "--help") == 0);
	CHECK_STR_CONTAINS(cap_out, "Usage: corral pause [--json] ID");
	CHECK(VERB(cmd_halt, "halt", "-h") == 0);
	CHECK_STR_CONTAINS(cap_out, "--reason TEXT");
	CHECK(VERB(cmd_rm, "rm") == 2);
	CHECK_STR_CONTAINS(cap_err, "no sandbox ID given; see `corral rm --help`");
	CHECK(VERB(cmd_rm, "rm", "sb-1", "../x") == 2);
	CHECK(VERB(cmd_pause, "pause", "sb-1", "sb-2") == 2);
	CHECK_STR_CONTAINS(cap_err, "pause takes one sandbox ID");
	CHECK(VERB(cmd_resume, "resume", "--reason", "x", "sb-1") == 2);
	CHECK_STR_CONTAINS(cap_err, "unknown option \"--reason\"");
	CHECK(VERB(cmd_halt, "halt", "sb-1", "--reason") == 2);
	CHECK_STR_CONTAINS(cap_err, "option \"--reason\" needs a value");
	CHECK(VERB(cmd_ls, "ls", "--json", "-q") == 2);
	CHECK(VERB(cmd_ls, "ls", "x") == 2);
	CHECK(VERB(cmd_logs, "logs", "sb-1", "12x") == 2);
	CHECK_STR_CONTAINS(cap_err, "PID: expected a process id");
	CHECK(VERB(cmd_logs, "logs", "sb-1", "1234567890") == 2);
	CHECK(VERB(cmd_events, "events", "sb-1", "sb-2") == 2);
	CHECK(VERB(cmd_cp, "cp", "a", "b") == 2);
	CHECK_STR_CONTAINS(cap_err, "one of SRC and DST must be ID:/PATH");
	CHECK(VERB(cmd_cp, "cp", "sb-1:/a", "sb-2:/b") == 2);
	CHECK(VERB(cmd_cp, "cp", "--list", "a") == 2);
	CHECK(VERB(cmd_cp, "cp", "", "sb-1:/a") == 2);
	CHECK_STR_CONTAINS(cap_err, "an empty local path");
	/* a tar on stdin, into the directory: asked of the daemon (none here) */
	CHECK(VERB(cmd_cp, "cp", "--socket", sock, "-", "sb-1:/dir/") == EXIT_CORRAL);
	CHECK_STR_CONTAINS(cap_err, "no daemon socket at");

	/* no daemon there: 125, and the message says what to do */
	CHECK(VERB(cmd_ls, "ls", "--socket", sock) == EXIT_CORRAL);
	CHECK_STR_CONTAINS(cap_err, "no daemon socket at");
	CHECK_STR_CONTAINS(cap_err, "(--socket); start the daemon with `corral serve`");
	CHECK(VERB(cmd_rm, "rm", "--socket", notsock, "sb-1") == EXIT_CORRAL);
	CHECK_STR_CONTAINS(cap_err, "is not a socket");
	CHECK(VERB(cmd_exec, "exec", "--socket", sock, "sb-1", "--", "true") == EXIT_CORRAL);
	CHECK(VERB(cmd_create, "create", "--socket", sock) == EXIT_CORRAL);
}

/* A socket that nobody listens on: what a daemon that died leaves. */
TEST(stale_socket)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/stale.sock", tmpdir);
	CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	if (fd >= 0)
		close(fd);
	CHECK(VERB(cmd_ls, "ls", "--socket", sa.sun_path) == EXIT_CORRAL);
	CHECK_STR_CONTAINS(cap_err, "nothing answers at");
	unlink(sa.sun_path);
}

/* ---- sockhttp.c: answers from a socket that plays the daemon ------------ */

/*
 * What the fake daemon does: answer with these pieces (a few ms apart, so
 * they come as separate reads), having read the request's head and, with
 * read_body, its Content-Length's worth.  The request it got is in
 * fake_got afterwards.
 */
struct fake {
	const char *pieces[4];
	size_t lens[4];			/* 0: strlen */
	bool read_body;
};

static char fake_sock[256], fake_got[8192];

static size_t want_body(const char *head)
{
	const char *cl = strcasestr(head, "\r\nContent-Length: ");

	return cl ? strtoul(cl + 18, NULL, 10) : 0;
}

static void fake_serve(int l, const struct fake *f)
{
	size_t got = 0, body = 0;
	char *end = NULL;
	int c = accept(l, NULL, NULL), out;

	if (c < 0)
		_exit(1);
	while (got < sizeof(fake_got) - 1) {
		ssize_t n = read(c, fake_got + got, sizeof(fake_got) - 1 - got);

		if (n <= 0)
			break;
		got += n;
		fake_got[got] = '\0';
		end = strstr(fake_got, "\r\n\r\n");
		if (end && !f->read_body)
			break;
		if (end && got - (end + 4 - fake_got) >= (body = want_body(fake_got)))
			break;
	}
	for (int i = 0; i < 4 && f->pieces[i]; i++) {
		size_t len = f->lens[i] ? f->lens[i] : strlen(f->pieces[i]);

		if (i)
			usleep(3000);
		if (send(c, f->pieces[i], len, MSG_NOSIGNAL) < 0)
			break;
	}
	out = open(fake_sock, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	(void)!write(out, fake_got, got);
	_exit(0);
	(void)body;
}

/* conn_perform() against f: its return; the request the fake got in fake_got. */
static int fake_exchange(const struct fake *f, const struct request *q,
			 struct reply *r)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct conn c = { .socket_from = "--socket" };
	int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), ret, fd;
	ssize_t n;
	pid_t pid;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/fake.sock", tmpdir);
	snprintf(fake_sock, sizeof(fake_sock), "%s/fake.got", tmpdir);
	unlink(sa.sun_path);
	if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(l, 1) < 0) {
		perror("unit_client: fake daemon");
		exit(1);
	}
	pid = fork();
	if (pid == 0)
		fake_serve(l, f);
	close(l);
	c.socket = sa.sun_path;
	capture_begin();
	ret = conn_open(&c, &test_verb) ? -1 : conn_perform(&c, q, r);
	capture_end();
	conn_close(&c);
	/* the fake ends on its own: it reads no more than one request */
	if (pid > 0)
		waitpid(pid, NULL, 0);
	fake_got[0] = '\0';
	fd = open(fake_sock, O_RDONLY | O_CLOEXEC);
	n = fd < 0 ? 0 : read(fd, fake_got, sizeof(fake_got) - 1);
	fake_got[n > 0 ? n : 0] = '\0';
	if (fd >= 0)
		close(fd);
	unlink(fake_sock);
	unlink(sa.sun_path);
	return ret;
}

static char lines_got[256];

static int take_line(void *arg, char *line, size_t len)
{
	(void)arg;
	strncat(lines_got, line, len);
	strcat(lines_got, "|");
	return 0;
}

TEST(sock_requests_as_sent)
{
	struct request get = { .method = "GET", .path = "/v1/sandboxes?x=%2F" };
	struct request post = { .method = "POST", .path = "/v1/sandboxes/sb-1/exec",
				.body = "{\"command\":\"true\"}", .body_len = 18,
				.type = "Content-Type: application/json",
				.accept = "Accept: application/x-ndjson" };
	struct request put = { .method = "PUT", .path = "/f" };
	struct fake ok = { .pieces = { "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}" },
			   .read_body = true };
	struct reply r = { .max = REPLY_MAX };

	CHECK(fake_exchange(&ok, &get, &r) == 0 && r.status == 200);
	CHECK(!strcmp(fake_got, "GET /v1/sandboxes?x=%2F HTTP/1.1\r\nHost: localhost\r\n\r\n"));
	CHECK(r.len == 2 && !strcmp(r.buf, "{}"));
	reply_free(&r);
	CHECK(fake_exchange(&ok, &post, &r) == 0 && r.status == 200);
	CHECK(!strcmp(fake_got, "POST /v1/sandboxes/sb-1/exec HTTP/1.1\r\nHost: localhost\r\n"
		      "Content-Type: application/json\r\nAccept: application/x-ndjson\r\n"
		      "Content-Length: 18\r\n\r\n{\"command\":\"true\"}"));
	reply_free(&r);
	/* a PUT of nothing still says how long nothing is */
	CHECK(fake_exchange(&ok, &put, &r) == 0);
	CHECK_STR_CONTAINS(fake_got, "PUT /f HTTP/1.1\r\n");
	CHECK_STR_CONTAINS(fake_got, "Content-Length: 0\r\n\r\n");
	reply_free(&r);
	/* a path that would end the request line is not sent */
	get.path = "/v1/x HTTP/1.1\r\nX-Evil: 1\r\n";
	CHECK(fake_exchange(&ok, &get, &r) == -1);
	CHECK_STR_CONTAINS(cap_err, "refusing to send the request path \"/v1/x HTTP/1.1\\x0d\\x0aX-Evil");
	CHECK(fake_got[0] == '\0');
	reply_free(&r);
}

TEST(sock_answers_read_whole)
{
	struct request get = { .method = "GET", .path = "/v1/events" };
	struct fake chunked = { .pieces = {
		"HTTP/1.1 200 OK\r\nContent-Typ",
		"e: application/vnd.corral.export-patch; v=1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\na\nb",
		"\r\n3\r\n\nc\n\r\n1\r\nd\r\n",
		"0\r\n\r\n" } };
	struct fake interim = { .pieces = {
		"HTTP/1.1 100 Continue\r\n\r\n",
		"HTTP/1.1 409 Conflict\r\nContent-Length: 2\r\n\r\n{}" } };
	struct fake to_close = { .pieces = { "HTTP/1.0 200 OK\r\n\r\nall of it" } };
	struct reply r = { .max = REPLY_MAX, .line = take_line };

	/* pieces cut anywhere, lines across chunks, the last one unended */
	lines_got[0] = '\0';
	CHECK(fake_exchange(&chunked, &get, &r) == 0 && r.status == 200);
	CHECK(!strcmp(lines_got, "a|b|c|d|"));
	CHECK(!strcmp(r.type, "application/vnd.corral.export-patch; v=1"));
	reply_free(&r);
	r = (struct reply){ .max = REPLY_MAX };
	CHECK(fake_exchange(&interim, &get, &r) == 0 && r.status == 409);
	CHECK(r.type[0] == '\0' && r.len == 2);
	reply_free(&r);
	CHECK(fake_exchange(&to_close, &get, &r) == 0 && r.status == 200);
	CHECK(r.buf && !strcmp(r.buf, "all of it"));
	reply_free(&r);
}

/* An answer cut short is a failure, never taken for the whole answer. */
TEST(sock_answers_refused)
{
	struct request get = { .method = "GET", .path = "/v1/health" };
	struct request big = { .method = "PUT", .path = "/f", .body_len = 8u << 20 };
	struct fake short_len = { .pieces = { "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc" } };
	struct fake short_chunk = { .pieces = {
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab" } };
	struct fake nothing = { .pieces = { NULL } };
	struct fake head_only = { .pieces = { "HTTP/1.1 200 OK\r\nContent-" } };
	struct fake not_http = { .pieces = { "SSH-2.0-OpenSSH_9.2\r\n\r\n" } };
	struct fake bad_chunk = { .pieces = {
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n" } };
	struct fake two_lengths = { .pieces = {
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab" } };
	struct fake early = { .pieces = {
		"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 25\r\n\r\n{\"error\": \"too_large\"}   " } };
	struct fake huge = { .pieces = { "HTTP/1.1 200 OK\r\nContent-Length: 300000000\r\n\r\n" },
			     .read_body = true };
	static char flood[100 * 1024];
	struct fake flood_head = { .pieces = { "HTTP/1.1 200 OK\r\nX: ", flood } };
	struct reply r = { .max = REPLY_MAX };
	char *body = calloc(1, big.body_len);

	CHECK(fake_exchange(&short_len, &get, &r) == -1);
	CHECK_STR_CONTAINS(cap_err, "closed the connection before its answer was whole\n");
	reply_free(&r);
	CHECK(fake_exchange(&short_chunk, &get, &r) == -1);
	CHECK_STR_CONTAINS(cap_err, "before its answer was whole");
	reply_free(&r);
	CHECK(fake_exchange(&nothing, &get, &r) == -1);
	CHECK_STR_CONTAINS(cap_err, "before its answer was whole (it sent nothing)");
	CHECK(fake_exchange(&head_only, &get, &r) == -1);
	CHECK_STR_CONTAINS(cap_err, "before its answer was whole\n");
	CHECK(fake_exchange(&not_http, &get, &r) == -1);
	CHECK_STR_CONTAINS(cap_err, "is not HTTP as the daemon speaks it");
	CHECK(fake_exchange(&bad_chunk, &get, &r) == -1);
	CHECK_STR_CONTAINS(cap_err, "HPE_INVALID_CONTENT_LENGTH");
	CHECK(fake_exchange(&two_lengths, &get, &r) == -1);
	CHECK_STR_CONTAINS(cap_err, "HPE_UNEXPECTED_CONTENT_LENGTH");
	reply_free(&r);
	/* a header without end: refused at http-parser's 80 KiB */
	memset(flood, 'x', sizeof(flood));
	flood_head.lens[1] = sizeof(flood);
	CHECK(fake_exchange(&flood_head, &get, &r) == -1);
	CHECK_STR_CONTAINS(cap_err, "HPE_HEADER_OVERFLOW");
	/* more than the reply may hold: stopped, said once */
	r = (struct reply){ .max = 1024 };
	memset(flood, 'y', sizeof(flood));
	huge.pieces[1] = flood;
	huge.lens[1] = sizeof(flood);
	CHECK(fake_exchange(&huge, &get, &r) == -1);
	CHECK(!strcmp(cap_err, "corral: the daemon's answer is larger than 1 KiB; stopped reading it\n"));
	reply_free(&r);
	/* refused before the body was read: the refusal, not a broken pipe */
	r = (struct reply){ .max = REPLY_MAX };
	big.body = body;
	CHECK(body && fake_exchange(&early, &big, &r) == 0 && r.status == 413);
	CHECK_STR_CONTAINS(r.buf ? r.buf : "", "too_large");
	reply_free(&r);
	free(body);
}

/*
 * A socket another user listens on (a path in /tmp, taken before the
 * daemon came up) is refused before a byte is sent to it.  Root only: the
 * listener must be another uid's.
 */
TEST(sock_refuses_another_users_socket)
{
	char dir[300], path[320];
	int ready[2], res[2], code;
	ssize_t got = -1;
	pid_t pid;

	if (geteuid() != 0) {
		fprintf(stderr, "  (skipped: only root can listen as another uid)\n");
		return;
	}
	snprintf(dir, sizeof(dir), "%s/other", tmpdir);
	snprintf(path, sizeof(path), "%s/s", dir);
	CHECK(mkdir(dir, 0777) == 0 && chmod(dir, 0777) == 0);
	chmod(tmpdir, 0755);
	CHECK(pipe(ready) == 0 && pipe(res) == 0);
	pid = fork();
	if (pid == 0) {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		struct pollfd pf;
		char buf[4096];
		ssize_t n = -1;
		int l, c;

		strcpy(sa.sun_path, path);
		if (setgroups(0, NULL) < 0 || setgid(4242) < 0 || setuid(4242) < 0)
			_exit(1);
		l = socket(AF_UNIX, SOCK_STREAM, 0);
		if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
		    chmod(path, 0666) < 0 || listen(l, 1) < 0)
			_exit(1);
		(void)!write(ready[1], "r", 1);
		pf = (struct pollfd){ .fd = l, .events = POLLIN };
		if (poll(&pf, 1, 10000) == 1 && (c = accept(l, NULL, NULL)) >= 0) {
			pf = (struct pollfd){ .fd = c, .events = POLLIN };
			n = poll(&pf, 1, 5000) == 1 ? read(c, buf, sizeof(buf)) : -1;
		}
		(void)!write(res[1], &n, sizeof(n));
		_exit(0);
	}
	close(ready[1]);
	close(res[1]);
	CHECK(read(ready[0], &(char){ 0 }, 1) == 1);
	code = VERB(cmd_ls, "ls", "--socket", path);
	CHECK(code == EXIT_CORRAL);
	CHECK_STR_CONTAINS(cap_err, "is served by uid 4242, not by you (uid 0) or root: refusing to send it anything");
	CHECK(read(res[0], &got, sizeof(got)) == sizeof(got));
	CHECK(got == 0);	/* connected, and closed with nothing sent */
	waitpid(pid, NULL, 0);
	close(ready[0]);
	close(res[0]);
	unlink(path);
	rmdir(dir);
	chmod(tmpdir, 0700);
}

static int remove_one(const char *path, const struct stat *st, int flag,
		      struct FTW *ftw)
{
	return remove(path);
}

int main(void)
{
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	unsetenv("CORRAL_SOCKET");
	unit_run_all();
	if (nftw(tmpdir, remove_one, 16, FTW_DEPTH | FTW_PHYS) < 0)
		perror(tmpdir);
	UNIT_DONE();
}
