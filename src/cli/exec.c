/*
 * exec.c - corral exec: a command in a sandbox of the daemon's, its output
 * streamed back (or all at once, or as the result object), its end as the
 * exit status `corral run` would give; or a background process.
 */
#include "client.h"

#include <errno.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>

static const struct verb exec_verb = {
	.name = "exec",
	.head =
"Usage: corral exec [OPTIONS] ID -- COMMAND [ARG...]\n"
"       corral exec [OPTIONS] ID --command 'SHELL TEXT'\n"
"       corral exec --background [OPTIONS] ID -- COMMAND [ARG...]\n"
"       corral exec -t [OPTIONS] ID -- COMMAND [ARG...]\n"
"\n"
"Run COMMAND in the sandbox ID (from `corral create`) and wait for it, as\n"
"`corral run` does in a fresh one: its stdout and stderr reach corral's own\n"
"as they are written, and corral exits with its status.  Options go before\n"
"the \"--\"; everything after it is the command, run as an argv (no shell).\n"
"An idle-frozen sandbox is thawed first; a paused or halted one refuses.\n"
"\n"
"Options:\n"
"  -c, --command TEXT   run /bin/sh -c TEXT instead of an argv\n"
"  --tool-call ID       the tool call this is: the result and every event of\n"
"                       the call carry it (1 to 127 bytes of UTF-8;\n"
"                       default: the daemon makes one up)\n"
"  --cwd DIR            the working directory inside the sandbox\n"
"  --env NAME=VALUE     set a variable for this call (repeatable)\n"
"  --stdin-file FILE    give the command FILE as its stdin (\"-\": corral's)\n"
"  -i                   give the command corral's own stdin\n"
"                       Both are read to the end before the command starts,\n"
"                       and must be UTF-8 text: the API carries stdin as a\n"
"                       JSON string, in a body of at most 1 MiB.  Without\n"
"                       either, the command's stdin is empty.\n"
"  --timeout DURATION   wall-clock limit for this call (\"30s\", \"500ms\",\n"
"                       \"2m\"; a bare number is seconds).  Default: the\n"
"                       sandbox policy's limits.timeout, else its\n"
"                       limits.call_timeout (10m unless set); none for\n"
"                       --background\n"
"  --no-stream          wait for the end, then write the output at once;\n"
"                       the daemon keeps a bounded amount of each stream\n"
"  --json               print only the result object (status, exit_code,\n"
"                       signal, reason, stdout, stderr, *_truncated,\n"
"                       duration_ms, sandbox, tool_call_id, ...), the one\n"
"                       `corral run --json` prints; implies --no-stream\n"
"  -t, --tty            give COMMAND a terminal: a pty made inside the\n"
"                       sandbox, joined to corral's own (raw while it runs,\n"
"                       restored after; its size follows the window).\n"
"                       ^C and ^Z reach the command's foreground job, not\n"
"                       corral; input that ends (a pipe, /dev/null) is\n"
"                       typed as ^D then.  Not with -i, --stdin-file, --json,\n"
"                       --no-stream or --background\n"
"  --background         start COMMAND and return at once: print its pid, as\n"
"                       the sandbox sees it (the whole answer with --json);\n"
"                       `corral logs ID` shows how it is doing\n",
	.tail =
"Exit status, as `corral run`'s: the command's own; 128+N if it died of\n"
"signal N (137 when the memory limit or an abort killed it); 124 on timeout;\n"
"126 the command cannot be executed; 127 not found; 125 if corral could not\n"
"run it: bad usage (not 2, which the command may exit with: docker exec's\n"
"125), the sandbox is paused, halted or unknown, the daemon refused or\n"
"could not be reached, or the output could not be written (a full disk);\n"
"or for a 0 when the daemon's audit log lost lines of the sandbox's record\n"
"while the call ran (its result's events_lost; the reason says so);\n"
"141 when what reads corral's output went (`| head`): nothing is said, and\n"
"the call is ended.  With --background, 0 once started.\n"
"With --json, an error of corral's is {\"error\", \"detail\"} on stdout too.\n"
"A halted call never exits 0 (its command had ended first: 1 for its 0).\n"
"Without --json, how the command ended is told on stderr whenever it did not\n"
"simply exit (\"corral: timed out after 30 s\", \"corral: halted: ...\"), or\n"
"a limit, the network's policy or a denial lies behind a non-zero exit.\n"
"\n"
"Examples:\n"
"  corral exec \"$id\" -- python3 -c 'print(6 * 7)'\n"
"  corral exec \"$id\" --tool-call call-7 --json -- pytest -q\n"
"  git diff | corral exec \"$id\" -i -- patch -p1\n"
"  corral exec \"$id\" -c 'ls -l | wc -l'\n"
"  corral exec -t \"$id\" -- /bin/bash\n"
"  corral exec \"$id\" --background -- python3 -m http.server 8000\n",
	.usage_status = EXIT_CORRAL,
};

enum {
	OPT_TOOL_CALL = OPT_OWN, OPT_CWD, OPT_ENV, OPT_STDIN_FILE, OPT_TIMEOUT,
	OPT_NO_STREAM, OPT_BACKGROUND,
};

static const struct option exec_options[] = {
	CONN_OPTIONS,
	{ "command", required_argument, NULL, 'c' },
	{ "tool-call", required_argument, NULL, OPT_TOOL_CALL },
	{ "cwd", required_argument, NULL, OPT_CWD },
	{ "env", required_argument, NULL, OPT_ENV },
	{ "stdin-file", required_argument, NULL, OPT_STDIN_FILE },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "no-stream", no_argument, NULL, OPT_NO_STREAM },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "background", no_argument, NULL, OPT_BACKGROUND },
	{ "tty", no_argument, NULL, 't' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static int put_tool_call(json_t *body, const char *id)
{
	struct corral_err err;

	if (corral_check_tool_call_id(id, &err) < 0)
		return verb_usage_error(&exec_verb, "--tool-call: %s", err.msg);
	return body_put(body, "tool_call_id", json_string(id));
}

static int put_timeout(json_t *body, const char *arg)
{
	uint64_t ms;
	int code = verb_duration(&exec_verb, "--timeout", arg, &ms);

	if (code)
		return code;
	return body_put_seconds(body, "timeout_seconds", ms);
}

static int set_stdin(struct exec_args *a, const char *file)
{
	if (a->stdin_file)
		return verb_usage_error(&exec_verb, "give stdin once: one of --stdin-file FILE and -i");
	a->stdin_file = file;
	return 0;
}

static int exec_option(void *arg, int opt, const char *val)
{
	struct exec_args *a = arg;

	switch (opt) {
	case 'c':
		a->command = val;
		return 0;
	case OPT_TOOL_CALL:
		return put_tool_call(a->body, val);
	case OPT_CWD:
		return body_put_text(&exec_verb, a->body, "cwd", "--cwd", val);
	case OPT_ENV:
		return body_put_pair(&exec_verb, a->env, "--env", val);
	case OPT_STDIN_FILE:
		return set_stdin(a, val);
	case 'i':
		return set_stdin(a, "-");
	case OPT_TIMEOUT:
		return put_timeout(a->body, val);
	case OPT_NO_STREAM:
		a->no_stream = true;
		return 0;
	case OPT_JSON:
		a->json = true;
		return 0;
	case OPT_BACKGROUND:
		a->background = true;
		return 0;
	case 't':
		a->tty = true;
		return 0;
	}
	return verb_usage_error(&exec_verb, "option %d is not handled", opt);
}

/* file's bytes as the call's stdin; no symlink the sandbox left followed to it */
static int put_stdin(struct conn *c, const char *id, json_t *body, const char *file)
{
	const char *name = strcmp(file, "-") ? file : "standard input";
	struct corral_dir_id *rw = NULL;
	size_t len, nrw = 0;
	char *buf;
	json_t *s;
	int code = 0;

	if (strcmp(file, "-"))
		code = sandbox_rw_dirs(c, id, &rw, &nrw);
	if (!code)
		code = read_local(file, JSON_BODY_MAX, &buf, &len, rw, nrw);
	free(rw);
	if (code)
		return code;
	s = json_stringn(buf, len);
	free(buf);
	if (!s) {
		cli_error("stdin: %s is not UTF-8 text, and the API carries stdin as a JSON string; copy binary input in with `corral cp`",
			  name);
		return EXIT_CORRAL;
	}
	return body_put(body, "stdin", s);
}

static int put_argv(json_t *body, char **cmd, int n)
{
	json_t *av = json_array();
	int i;

	if (!av)
		return out_of_memory("building the exec request");
	for (i = 0; i < n; i++) {
		json_t *s = json_string(cmd[i]);

		if (!s) {
			json_decref(av);
			return verb_usage_error(&exec_verb, "argument \"%s\" is not UTF-8 text",
						cmd[i]);
		}
		if (json_array_append_new(av, s) < 0) {
			json_decref(av);
			return out_of_memory("building the exec request");
		}
	}
	return body_put(body, "argv", av);
}

/*
 * Options end at the first "--"; what follows is the command, never parsed
 * as options.  Before it, the one operand is the sandbox id.  They are
 * parsed in order ("+"), not permuted, so that `exec ID ls -l` is told to
 * put "--" before the command instead of "unknown option -l".  Fills
 * a->body with all of it but stdin, which is read only once the daemon's
 * address is known to be right.
 */
int exec_parse(struct exec_args *a, struct conn *c, int argc, char **argv)
{
	int dd = 1, ncmd, code;

	while (dd < argc && strcmp(argv[dd], "--"))
		dd++;
	/* the command's own "--json" is not ours: only what comes before "--" */
	cli_json_scan(dd, argv, ":hitc:", exec_options, OPT_JSON);
	optind = 0;		/* as verb_parse(): "+" is taken afresh */
	for (;;) {
		code = verb_parse_more(&exec_verb, exec_options, "+:hitc:", dd, argv,
				       c, exec_option, a);
		if (code)
			return code;
		if (optind >= dd)
			break;
		if (a->id)
			return verb_usage_error(&exec_verb, "one sandbox ID, then \"--\" and the command (got \"%s\" after \"%s\")",
						argv[optind], a->id);
		a->id = argv[optind++];
	}
	if (!a->id)
		return verb_usage_error(&exec_verb, "no sandbox ID given");
	code = verb_check_id(&exec_verb, a->id);
	if (code)
		return code;
	/* docker's -it is -t here: -i reads all of stdin before the start */
	if (a->tty && (a->stdin_file || a->json || a->no_stream || a->background))
		return verb_usage_error(&exec_verb, "-t gives the command a terminal: not with %s",
					a->stdin_file ? "-i or --stdin-file (docker's -it is -t alone: the terminal takes your keyboard)" :
					a->json ? "--json" :
					a->no_stream ? "--no-stream" : "--background");
	ncmd = dd < argc ? argc - dd - 1 : 0;
	if (a->command && ncmd)
		return verb_usage_error(&exec_verb, "give the command once: after \"--\" or with --command");
	if (!a->command && !ncmd)
		return verb_usage_error(&exec_verb, dd < argc ? "no command after \"--\"" :
					"no command: corral exec ID -- COMMAND [ARG...]");
	if (a->command)
		code = body_put_text(&exec_verb, a->body, "command", "--command",
				     a->command);
	else
		code = put_argv(a->body, argv + dd + 1, ncmd);
	if (!code && json_object_size(a->env))
		code = body_put(a->body, "env", json_incref(a->env));
	return code;
}

int client_exit_code(const json_t *result)
{
	const json_t *code = json_object_get(result, "exit_code");
	struct corral_result res = { 0 };

	/* the daemon's result, mapped as corral run maps its own */
	if (corral_status_from_name(json_string_value(json_object_get(result, "status")),
				    &res.status) < 0 || !json_is_integer(code))
		return -1;
	res.exit_code = (int)json_integer_value(code);
	res.signal = (int)json_integer_value(json_object_get(result, "signal"));
	return corral_result_exit_code(&res);
}

/*
 * As `corral run` does: say how the call ended when it did not simply
 * exit, or when its reason says more (cli_end_worth_telling).
 */
static void tell_end(const json_t *result, int code)
{
	const char *status = json_string_value(json_object_get(result, "status"));
	const char *reason = json_string_value(json_object_get(result, "reason"));

	if (!cli_end_worth_telling(status, code, reason))
		return;
	daemon_error(reason ? reason : status ? status : "the call ended", "");
}

int exec_result_code(const json_t *result, bool tell)
{
	int code = client_exit_code(result);

	if (code < 0) {
		cli_error("the daemon's result says neither a status nor an exit code");
		return EXIT_CORRAL;
	}
	if (tell)
		tell_end(result, code);
	/*
	 * The sandbox's record lost lines while it ran (the daemon's audit
	 * log full): as `corral run` with its --events file, a 0 becomes 125
	 * and the reason, which says so, is told.
	 */
	if (code == 0 && json_integer_value(json_object_get(result, "events_lost")) > 0) {
		if (tell)
			daemon_error(json_string_value(json_object_get(result, "reason")) ?:
				     "event lines could not be written", "");
		code = EXIT_CORRAL;
	}
	return code;
}

/*
 * The command's output, as it wrote it: asked for as base64 (exact bytes).
 * -EPIPE, unsaid, when the reader is gone (`corral exec ... | head`): the
 * caller's choice, as for any filter; its exit is then EXIT_SIGPIPE.
 * Another failure (a full disk, ulimit -f) is said once: what stays
 * buffered is dropped, or verb_finish's flush would fail and say it again.
 */
static int write_data(FILE *f, const json_t *s, bool base64)
{
	const char *data = json_string_value(s);
	size_t len = json_string_length(s);
	char *bytes = NULL;
	int r = 0;

	if (!json_is_string(s))
		return 0;
	if (base64 && corral_base64_decode(data, len, &bytes, &len) < 0) {
		cli_error("the daemon's output is not the base64 asked for");
		return -EINVAL;
	}
	if (bytes)
		data = bytes;
	if (fwrite(data, 1, len, f) != len || fflush(f) == EOF) {
		r = errno ? -errno : -EIO;
		__fpurge(f);
		clearerr(f);
		if (r != -EPIPE)
			cli_error("writing the command's output: %s", strerror(-r));
	}
	free(bytes);
	return r;
}

struct exec_stream {
	json_t *result;			/* from the "end" line */
	bool reader_gone;		/* stdout or stderr: EPIPE */
};

/* One NDJSON line of an exec stream: output goes out as it comes. */
static int on_exec_line(void *arg, char *line, size_t len)
{
	struct exec_stream *st = arg;
	const char *type, *detail;
	json_t *o;
	int ret = 0;

	if (len && line[len - 1] == '\r')
		len--;
	if (!len)
		return 0;
	o = json_loadb(line, len, JSON_ALLOW_NUL, NULL);
	if (!json_is_object(o)) {
		cli_error("the daemon's exec stream has a line that is not a JSON object");
		json_decref(o);
		return -1;
	}
	type = json_string_value(json_object_get(o, "type"));
	detail = json_string_value(json_object_get(o, "detail"));
	if (!type && detail) {
		daemon_error(detail, " (in the exec stream)");
		ret = -1;
	} else if (type && !strcmp(type, "stdout")) {
		ret = write_data(stdout, json_object_get(o, "data"), true);
	} else if (type && !strcmp(type, "stderr")) {
		ret = write_data(stderr, json_object_get(o, "data"), true);
	} else if (type && !strcmp(type, "end")) {
		json_decref(st->result);
		st->result = json_incref(json_object_get(o, "result"));
	}
	/* "start", and types newer than this client, are not for the terminal */
	json_decref(o);
	if (ret == -EPIPE)
		st->reader_gone = true;
	return ret < 0 ? -1 : 0;
}

static int exec_stream(struct conn *c, const char *path, const json_t *body)
{
	struct exec_stream st = { 0 };
	struct reply r = { .max = REPLY_MAX, .line = on_exec_line, .arg = &st };
	struct request q = { .method = "POST", .path = path,
			     .type = "Content-Type: application/json" };
	char *text = json_dumps(body, JSON_COMPACT);
	int code = EXIT_CORRAL, performed;

	if (!text)
		return out_of_memory("building the exec request");
	q.body = text;
	q.body_len = strlen(text);
	/* ^C while it streams: the terminal is reset before corral ends */
	cli_terminal_reset_on_signals(true);
	performed = conn_perform(c, &q, &r);
	/* the output came raw: what it set on the terminal, undone first */
	cli_terminal_after_output();
	cli_terminal_reset_on_signals(false);
	if (performed < 0 || reply_check(&r) < 0) {
		if (st.reader_gone)
			code = EXIT_SIGPIPE;
		goto out;
	}
	if (!json_is_object(st.result)) {
		cli_error("the daemon's exec stream ended without the call's result");
		goto out;
	}
	code = exec_result_code(st.result, true);
out:
	json_decref(st.result);
	reply_free(&r);
	free(text);
	return code;
}

static int exec_wait(struct conn *c, const char *path, const json_t *body,
		     bool as_json)
{
	json_t *res = conn_call_json(c, "POST", path, body);
	int code;

	if (!res)
		return EXIT_CORRAL;
	if (as_json) {
		code = print_json(res);
		if (!code)
			code = exec_result_code(res, false);
		json_decref(res);
		return code;
	}
	cli_terminal_reset_on_signals(true);
	code = write_data(stdout, json_object_get(res, "stdout"), true);
	if (!code)
		code = write_data(stderr, json_object_get(res, "stderr"), true);
	cli_terminal_after_output();
	cli_terminal_reset_on_signals(false);
	if (code) {
		json_decref(res);
		return code == -EPIPE ? EXIT_SIGPIPE : EXIT_CORRAL;
	}
	if (json_is_true(json_object_get(res, "stdout_truncated")))
		cli_error("the daemon kept only part of stdout; without --no-stream it all comes through");
	if (json_is_true(json_object_get(res, "stderr_truncated")))
		cli_error("the daemon kept only part of stderr; without --no-stream it all comes through");
	code = exec_result_code(res, true);
	json_decref(res);
	return code;
}

static int exec_background(struct conn *c, const char *id, const json_t *body,
			   bool as_json)
{
	char *path = conn_sandbox_path(c, id, "/processes");
	json_t *res, *pid;
	int code;

	if (!path)
		return EXIT_CORRAL;
	res = conn_call_json(c, "POST", path, body);
	free(path);
	if (!res)
		return EXIT_CORRAL;
	pid = json_object_get(res, "pid");
	if (as_json) {
		code = print_json(res);
	} else if (json_is_integer(pid)) {
		code = printf("%" JSON_INTEGER_FORMAT "\n", json_integer_value(pid)) < 0 ?
		       EXIT_CORRAL : 0;
	} else {
		cli_error("the daemon's answer has no pid");
		code = EXIT_CORRAL;
	}
	json_decref(res);
	return code;
}

static int exec_send(struct conn *c, struct exec_args *a)
{
	bool stream = !a->json && !a->no_stream;
	char *path;
	int code;

	if (a->background)
		return exec_background(c, a->id, a->body, a->json);
	if (a->tty)
		return exec_tty(c, a->id, a->body);
	code = body_put(a->body, "stream", json_boolean(stream));
	/* the terminal gets the bytes as written; --json the result as is */
	if (!code && !a->json)
		code = body_put(a->body, "output_encoding", json_string("base64"));
	if (code)
		return code;
	path = conn_sandbox_path(c, a->id, "/exec");
	if (!path)
		return EXIT_CORRAL;
	if (stream)
		code = exec_stream(c, path, a->body);
	else
		code = exec_wait(c, path, a->body, a->json);
	free(path);
	return code;
}

int cmd_exec(int argc, char **argv)
{
	struct exec_args a = { .body = json_object(), .env = json_object() };
	struct conn c = { 0 };
	int code;

	if (!a.body || !a.env) {
		code = out_of_memory("building the exec request");
		goto out;
	}
	code = exec_parse(&a, &c, argc, argv);
	if (code)
		goto out;
	code = conn_target(&c, &exec_verb);
	if (code)
		goto out;
	code = conn_open(&c, &exec_verb);
	if (!code && a.stdin_file)
		code = put_stdin(&c, a.id, a.body, a.stdin_file);
	if (!code)
		code = exec_send(&c, &a);
out:
	conn_close(&c);
	json_decref(a.env);
	json_decref(a.body);
	return code == HELP_SHOWN ? 0 : verb_finish(code);
}
