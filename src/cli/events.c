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
"Usage: corral events [--follow] [ID]\n"
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
"                       happen, until interrupted\n",
	.tail =
"Exit status: 0 all events were printed; 2 bad usage; 125 the daemon\n"
"refused (no such sandbox) or could not be reached, or, with --follow, it\n"
"closed the stream.  Interrupted (Ctrl-C), corral dies of SIGINT, as usual.\n"
"\n"
"Examples:\n"
"  corral events > events.jsonl && corral audit verify events.jsonl\n"
"  corral events \"$id\" > sb.jsonl && corral audit show sb.jsonl --type egress\n"
"  corral events --follow \"$id\"\n",
};

static const struct option events_options[] = {
	CONN_OPTIONS,
	{ "follow", no_argument, NULL, 'f' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static int events_option(void *arg, int opt, const char *val)
{
	bool *follow = arg;

	if (opt != 'f')
		return verb_usage_error(&events_verb, "option %d is not handled", opt);
	*follow = true;
	return 0;
}

/*
 * Byte for byte: `corral audit verify` hashes these lines.  The daemon
 * writes them as ASCII JSON (events.c: JSON_ENSURE_ASCII), which has no
 * control byte; a line with one did not come from a corral daemon, and its
 * control bytes are shown as \xNN, never sent to a terminal as they are.
 */
static int on_event_line(void *arg, char *line, size_t len)
{
	char *safe = printable(line, len);

	if (!safe)
		return out_of_memory("for an event line"), -1;
	len = strlen(safe);
	if (fwrite(safe, 1, len, stdout) != len || putchar('\n') == EOF ||
	    fflush(stdout) == EOF) {
		cli_error("writing to standard output: %s", strerror(errno));
		free(safe);
		return -1;
	}
	free(safe);
	return 0;
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

static int events_send(struct conn *c, const char *id, bool follow)
{
	struct reply r = { .max = REPLY_MAX, .line = on_event_line };
	struct request q = { .method = "GET" };
	char *path = events_path(id, follow);
	int code = EXIT_CORRAL;

	if (!path)
		return EXIT_CORRAL;
	q.path = path;
	if (conn_perform(c, &q, &r) == 0 && reply_check(&r) == 0) {
		code = 0;
		if (follow) {
			cli_error("the daemon closed the event stream");
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
	const char *id = NULL;
	bool follow = false;
	int code;

	code = verb_parse(&events_verb, events_options, ":hf", argc, argv,
			  &c, events_option, &follow);
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
		code = events_send(&c, id, follow);
out:
	conn_close(&c);
	return code == HELP_SHOWN ? 0 : verb_finish(code);
}
