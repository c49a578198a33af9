/*
 * logs.c - corral logs: the background processes of a sandbox of the
 * daemon's (GET .../processes) and what they wrote.
 */
#include "client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct verb logs_verb = {
	.name = "logs",
	.head =
"Usage: corral logs [--json] ID [PID]\n"
"\n"
"Show the processes of the sandbox ID that `corral exec --background`\n"
"started, and what they wrote.  For each process, a header line\n"
"  == pid PID  call TOOL_CALL  STATE  COMMAND\n"
"where STATE is \"running\" or how it ended (\"exited with status 0\"), then\n"
"\"-- stdout\" and \"-- stderr\" each followed by the last 64 KiB of that\n"
"stream as the daemon keeps it (a stream with nothing in it is left out).\n"
"On a terminal the output is shown as text: its control bytes (escape\n"
"sequences, a carriage return, C1 controls, bidirectional overrides) as\n"
"\\xNN, line breaks and tabs as they are; never sent to the terminal to\n"
"act on.  To a file or a pipe it goes as the process wrote it (a byte that\n"
"is not UTF-8 as U+FFFD, as the daemon keeps text).  The header's fields\n"
"are shown as text either way.  With PID (as `corral exec --background`\n"
"printed it), only that process.\n"
"\n"
"Options:\n"
"  --json               print the daemon's answer instead: with PID, the\n"
"                       process object with its stdout and stderr; without,\n"
"                       {\"processes\": [...]} as the daemon lists them (its\n"
"                       list leaves the output out)\n",
	.tail =
"Exit status: 0 shown; 2 bad usage; 125 the daemon refused (no such\n"
"sandbox or process) or could not be reached.\n"
"\n"
"Examples:\n"
"  corral logs \"$id\"\n"
"  corral logs --json \"$id\" 12 | jq -r .stdout\n",
};

/*
 * On a terminal the output is shown, not played: its control bytes as
 * \xNN, line breaks and tabs as they are, as `corral cp ID:FILE -` shows
 * a file (printable_lines).  Written raw, a background process's OSC 52
 * set the operator's clipboard, its CSI 21 t asked a terminal that answers
 * it to type the window's title into the shell, its ESC [ 1 A ESC [ 2 K
 * erased the "== pid" header above it.  To a file or a pipe, the bytes
 * as the daemon keeps them (`corral logs ID | less -R` plays them).
 */
static int write_stream(const json_t *p, const char *name)
{
	const json_t *s = json_object_get(p, name);
	size_t len = json_string_length(s);
	const char *text = json_string_value(s);
	char *shown = NULL;
	int code = 0;

	if (!len)
		return 0;
	if (isatty(STDOUT_FILENO)) {
		shown = printable_lines(text, len);
		if (!shown)
			return out_of_memory("showing the log on the terminal");
		text = shown;
		len = strlen(shown);
	}
	if (printf("-- %s\n", name) < 0 || fwrite(text, 1, len, stdout) != len ||
	    (text[len - 1] != '\n' && putchar('\n') == EOF))
		code = EXIT_CORRAL;
	free(shown);
	return code;
}

static char *argv_text(const json_t *argv)
{
	char *buf = NULL, *safe;
	size_t size = 0, i;
	json_t *arg;
	FILE *m;

	if (json_is_string(argv))
		return printable(json_string_value(argv), json_string_length(argv));
	m = open_memstream(&buf, &size);
	if (!m)
		return NULL;
	json_array_foreach(argv, i, arg) {
		const char *s = json_string_value(arg);

		fprintf(m, "%s%s", i ? " " : "", s ? s : "?");
	}
	if (fclose(m) == EOF) {
		free(buf);
		return NULL;
	}
	safe = printable(buf, size);
	free(buf);
	return safe;
}

static int print_process(const json_t *p)
{
	const char *call = json_string_value(json_object_get(p, "tool_call_id"));
	const char *state = json_string_value(json_object_get(p, "state"));
	const char *reason = json_string_value(json_object_get(json_object_get(p, "result"),
								"reason"));
	char *cmd = argv_text(json_object_get(p, "argv"));
	char *how = NULL, *safe_call = NULL;
	const char *h;
	int code = 0;

	h = reason ? reason : state ? state : "?";
	how = printable(h, strlen(h));
	safe_call = printable(call ? call : "-", call ? strlen(call) : 1);
	if (!cmd || !how || !safe_call) {
		code = out_of_memory("printing the log");
		goto out;
	}
	if (printf("== pid %" JSON_INTEGER_FORMAT "  call %s  %s  %s\n",
		   json_integer_value(json_object_get(p, "pid")), safe_call, how,
		   cmd) < 0)
		code = EXIT_CORRAL;
	if (!code)
		code = write_stream(p, "stdout");
	if (!code)
		code = write_stream(p, "stderr");
out:
	free(cmd);
	free(how);
	free(safe_call);
	return code;
}

/* GET .../processes or .../processes/PID (pid < 0). */
static json_t *get_processes(struct conn *c, const char *id, long long pid)
{
	char rest[64];
	char *path;
	json_t *o;

	if (pid < 0)
		snprintf(rest, sizeof(rest), "/processes");
	else
		snprintf(rest, sizeof(rest), "/processes/%lld", pid);
	path = conn_sandbox_path(c, id, rest);
	if (!path)
		return NULL;
	o = conn_call_json(c, "GET", path, NULL);
	free(path);
	return o;
}

/* The daemon's list leaves the output out: each process has it on its own. */
static int print_listed(struct conn *c, const char *id, const json_t *p)
{
	const json_t *pid = json_object_get(p, "pid");
	json_t *full;
	int code;

	if (json_object_get(p, "stdout") || !json_is_integer(pid))
		return print_process(p);
	full = get_processes(c, id, json_integer_value(pid));
	if (!full)
		return EXIT_CORRAL;
	code = print_process(full);
	json_decref(full);
	return code;
}

static int print_processes(struct conn *c, const char *id, const json_t *o)
{
	const json_t *list = json_object_get(o, "processes");
	json_t *p;
	size_t i;
	int code = 0;

	if (!json_is_array(list)) {
		cli_error("the daemon's answer has no list of processes");
		return EXIT_CORRAL;
	}
	json_array_foreach(list, i, p) {
		code = print_listed(c, id, p);
		if (code)
			break;
	}
	return code;
}

static int logs_send(struct conn *c, const char *id, long long pid,
		     bool as_json)
{
	json_t *o = get_processes(c, id, pid);
	int code;

	if (!o)
		return EXIT_CORRAL;
	if (as_json)
		code = print_json(o);
	else if (pid >= 0)
		code = print_process(o);
	else
		code = print_processes(c, id, o);
	json_decref(o);
	return code;
}

static int parse_pid(const char *arg, long long *pid)
{
	size_t n = strlen(arg);

	if (!n || n > 9 || strspn(arg, "0123456789") != n)
		return verb_usage_error(&logs_verb, "PID: expected a process id as `corral exec --background` printed it (got \"%s\")",
					arg);
	*pid = strtoll(arg, NULL, 10);
	return 0;
}

int cmd_logs(int argc, char **argv)
{
	struct conn c = { 0 };
	bool as_json = false;
	long long pid = -1;
	int code;

	code = verb_parse(&logs_verb, verb_json_options, ":h", argc, argv, &c,
			  set_json_flag, &as_json);
	if (code)
		goto out;
	if (argc - optind < 1 || argc - optind > 2) {
		code = verb_usage_error(&logs_verb, "logs takes a sandbox ID and an optional PID");
		goto out;
	}
	code = verb_check_id(&logs_verb, argv[optind]);
	if (code)
		goto out;
	if (argc - optind == 2) {
		code = parse_pid(argv[optind + 1], &pid);
		if (code)
			goto out;
	}
	code = conn_open(&c, &logs_verb);
	if (!code)
		code = logs_send(&c, argv[optind], pid, as_json);
out:
	conn_close(&c);
	return code == HELP_SHOWN ? 0 : verb_finish(code);
}
