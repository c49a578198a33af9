/*
 * events.c - corral events: the daemon's audit log (GET /v1/events), line
 * for line as the daemon sends it, to the end or following it.
 */
#include "client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct verb events_verb = {
	.name = "events",
	.head =
"Usage: corral events [--follow] [--json] [ID]\n"
"\n"
"Print the daemon's events, one JSON object a line, as they stand in its\n"
"audit log: exec start and end, egress allowed and denied, denied syscalls,\n"
"tripwires, limits hit, halts; of every sandbox, or only of ID.  Lines are\n"
"written byte for byte as the daemon sends them: each one's \"prev\" is the\n"
"SHA-256 of the line before it in the log, so the whole log (no ID) can be\n"
"checked with `corral audit verify`; with ID the lines of the other\n"
"sandboxes are missing and the chain shows the gaps.  Over TCP the lines\n"
"come without \"prev\" (it would show where a line not served was).\n"
"`corral audit show` reads either as a timeline.\n"
"\n"
"Options:\n"
"  -f, --follow         do not stop at the end: print new events as they\n"
"                       happen, until interrupted\n"
"  --json               JSON Lines for a program (`| jq -c`): every line is\n"
"                       one JSON object in ASCII; a daemon's line is the\n"
"                       same as without --json, one that is not JSON is\n"
"                       replaced by {\"error\": \"bad_answer\", \"detail\",\n"
"                       \"line\"}, one with raw bytes in it is written again\n"
"                       escaped; an error is a last {\"error\", \"detail\"}\n",
	.tail =
"Exit status: 0 all events were printed; 2 bad usage; 125 the daemon\n"
"refused (no such sandbox) or could not be reached, or, with --follow, it\n"
"closed the stream, or, with --json, a line of its was not JSON.  Interrupted (Ctrl-C), corral dies of SIGINT, as usual.\n"
"\n"
"Examples:\n"
"  corral events > events.jsonl && corral audit verify events.jsonl\n"
"  corral events \"$id\" > sb.jsonl && corral audit show sb.jsonl --type egress\n"
"  corral events --follow \"$id\"\n",
};

static const struct option events_options[] = {
	CONN_OPTIONS,
	{ "follow", no_argument, NULL, 'f' },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

struct events_args {
	bool follow, json;
	bool bad_line;		/* --json: a line of the daemon's was not JSON */
};

static int events_option(void *arg, int opt, const char *val)
{
	struct events_args *a = arg;

	if (opt == 'f')
		a->follow = true;
	else if (opt == OPT_JSON)
		a->json = true;
	else
		return verb_usage_error(&events_verb, "option %d is not handled", opt);
	return 0;
}

static int put_line(const char *text, size_t len)
{
	if (fwrite(text, 1, len, stdout) != len || putchar('\n') == EOF ||
	    fflush(stdout) == EOF) {
		cli_error("writing to standard output: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* Whether each byte is printable ASCII: as the daemon writes its lines. */
static bool plain_ascii(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f)
			return false;
	return true;
}

/*
 * --json: every line one JSON object, in ASCII, for a program that reads
 * a line at a time (jq -c, a JSON Lines reader).  A corral daemon's line
 * is that already (events.c: JSON_ENSURE_ASCII) and goes byte for byte:
 * `corral audit verify` hashes it.  A line that is not (a socket that is
 * no corral daemon, a proxy between) is no such line as it is: with a raw
 * control byte or invalid UTF-8 in it, \xNN (printable) is no JSON escape,
 * and a program's parser stopped there.  One that parses (a C1 control,
 * any character past ASCII, raw) is written again escaped (its chain is
 * then broken, as it was by its bytes); one that does not (a raw ESC,
 * invalid UTF-8, no JSON) becomes an error object holding its text as
 * printable() shows it, and the verb ends 125.
 */
/* o (taken; NULL: out of memory) as one line of ASCII JSON */
static int put_object(json_t *o)
{
	char *text = o ? json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII |
				    JSON_PRESERVE_ORDER) : NULL;
	int r;

	json_decref(o);
	if (!text)
		return out_of_memory("for an event line"), -1;
	r = put_line(text, strlen(text));
	free(text);
	return r;
}

static int json_event_line(struct events_args *a, char *line, size_t len)
{
	json_error_t jerr;
	json_t *o = NULL;
	char *safe;
	int r;

	if (plain_ascii(line, len)) {
		o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
		r = json_is_object(o) ? put_line(line, len) : 1;
		json_decref(o);
		if (r <= 0)
			return r;
		o = NULL;
	} else {
		o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
	}
	if (json_is_object(o))
		return put_object(o);
	json_decref(o);
	a->bad_line = true;
	safe = printable(line, len);
	o = safe ? json_pack("{s:s, s:s, s:s}", "error", "bad_answer", "detail",
			     "a line of the daemon's events that is not a JSON object",
			     "line", safe) : NULL;
	free(safe);
	return put_object(o);
}

/*
 * Byte for byte: `corral audit verify` hashes these lines.  The daemon
 * writes them as ASCII JSON (events.c: JSON_ENSURE_ASCII), which has no
 * control byte; a line with one did not come from a corral daemon, and its
 * control bytes are shown as \xNN, never sent to a terminal as they are.
 */
static int on_event_line(void *arg, char *line, size_t len)
{
	struct events_args *a = arg;
	char *safe;
	int r;

	if (a->json)
		return json_event_line(a, line, len);
	safe = printable(line, len);
	if (!safe)
		return out_of_memory("for an event line"), -1;
	r = put_line(safe, strlen(safe));
	free(safe);
	return r;
}

/* id was checked: a sandbox id's characters need no escaping in a query. */
char *events_path(const char *id, bool follow)
{
	char *path;

	if (asprintf(&path, "/v1/events%s%s%s", id ? "?sandbox=" : "",
		     id ? id : "", follow ? (id ? "&follow=1" : "?follow=1") : "") < 0) {
		out_of_memory("building the events path");
		return NULL;
	}
	return path;
}

static int events_send(struct conn *c, const char *id, struct events_args *a)
{
	struct reply r = { .max = REPLY_MAX, .line = on_event_line, .arg = a };
	struct request q = { .method = "GET" };
	char *path = events_path(id, a->follow);
	int code = EXIT_CORRAL;

	if (!path)
		return EXIT_CORRAL;
	q.path = path;
	if (conn_perform(c, &q, &r) == 0 && reply_check(&r) == 0) {
		code = 0;
		if (a->follow) {
			cli_error("the daemon closed the event stream");
			code = EXIT_CORRAL;
		} else if (a->bad_line) {
			cli_error("a line of the daemon's events was not a JSON object "
				  "(said as a bad_answer line)");
			cli_json_code("bad_answer");
			code = EXIT_CORRAL;
		}
	}
	reply_free(&r);
	free(path);
	return code;
}

int cmd_events(int argc, char **argv)
{
	struct conn c = { 0 };
	struct events_args a = { 0 };
	const char *id = NULL;
	int code;

	code = verb_parse(&events_verb, events_options, ":hf", argc, argv,
			  &c, events_option, &a);
	if (code)
		goto out;
	if (argc - optind > 1) {
		code = verb_usage_error(&events_verb, "events takes at most one sandbox ID");
		goto out;
	}
	if (argc - optind == 1) {
		id = argv[optind];
		code = verb_check_id(&events_verb, id);
		if (code)
			goto out;
	}
	code = conn_open(&c, &events_verb);
	if (!code)
		code = events_send(&c, id, &a);
out:
	conn_close(&c);
	return code == HELP_SHOWN ? 0 : verb_finish(code);
}
