/*
 * unit_client.c - the client verbs' logic without a daemon: what their
 * command lines put in the JSON body, which usage errors they give, where
 * they look for the daemon, the API paths they build and escape, the exit
 * status a result maps to, and how the daemon's text reaches a terminal.
 *
 * Linked against the CLI's objects (build/libcli.a) but its main(); this
 * file brings the cli_error() that main.c has.  What a verb prints is
 * captured (capture_begin/end) and checked, not shown.
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
#include <unistd.h>

void cli_error(const char *fmt, ...)
{
	va_list ap;

	fputs("corral: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

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

static void exec_refused(const char *what, int code, struct parsed *p)
{
	CHECK(p->code == code);
	CHECK_STR_CONTAINS(cap_err, what);
	if (code == 2)
		CHECK_STR_CONTAINS(cap_err, "see `corral exec --help`");
	exec_done(p);
}

TEST(exec_usage_errors)
{
	struct parsed p;

	EXEC(&p, "exec", "sb-1", "ls", "-l");
	exec_refused("one sandbox ID, then \"--\" and the command", 2, &p);
	EXEC(&p, "exec", "sb-1");
	exec_refused("no command: corral exec ID -- COMMAND", 2, &p);
	EXEC(&p, "exec", "sb-1", "--");
	exec_refused("no command after \"--\"", 2, &p);
	EXEC(&p, "exec", "--", "ls");
	exec_refused("no sandbox ID given", 2, &p);
	EXEC(&p, "exec", "../sb", "--", "ls");
	exec_refused("\"../sb\" is not a sandbox id", 2, &p);
	EXEC(&p, "exec", "sb-1", "-c", "x", "--", "ls");
	exec_refused("give the command once", 2, &p);
	EXEC(&p, "exec", "sb-1", "-i", "--stdin-file", "f", "--", "ls");
	exec_refused("give stdin once", 2, &p);
	EXEC(&p, "exec", "sb-1", "--timeout", "soon", "--", "ls");
	exec_refused("--timeout: ", 2, &p);
	EXEC(&p, "exec", "sb-1", "--timeout", "1000000d", "--", "ls");
	exec_refused("--timeout: too long", 2, &p);
	EXEC(&p, "exec", "sb-1", "--tool-call", "call\xff", "--", "ls");
	exec_refused("--tool-call: tool_call_id is not UTF-8", 2, &p);
	EXEC(&p, "exec", "sb-1", "--tool-call", "", "--", "ls");
	exec_refused("--tool-call: tool_call_id must be 1 to 127 bytes", 2, &p);
	EXEC(&p, "exec", "sb-1", "--env", "A=1", "--env", "A=2", "--", "ls");
	exec_refused("--env: A is given twice", 2, &p);
	EXEC(&p, "exec", "sb-1", "--env", "=1", "--", "ls");
	exec_refused("--env: expected KEY=VALUE", 2, &p);
	EXEC(&p, "exec", "sb-1", "--", "ls", "\xff");
	exec_refused("is not UTF-8 text", 2, &p);
	EXEC(&p, "exec", "--bogus", "sb-1", "--", "ls");
	exec_refused("unknown option \"--bogus\"", 2, &p);
	EXEC(&p, "exec", "-Z", "sb-1", "--", "ls");
	exec_refused("unknown option \"-Z\"", 2, &p);
	EXEC(&p, "exec", "sb-1", "--cwd");
	exec_refused("option \"--cwd\" needs a value", 2, &p);

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
	CHECK(VERB(cmd_cp, "cp", "--socket", sock, "-", "sb-1:/dir/") == 2);
	CHECK_STR_CONTAINS(cap_err, "with \"-\" as SRC, DST must name the file");

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
