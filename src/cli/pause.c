/*
 * pause.c - corral pause and corral resume: a person freezes a sandbox of
 * the daemon's and thaws it again (POST .../pause, .../resume).  The
 * request and its answer are post_state(), which halt.c shares.
 */
#include "client.h"

#include <stdio.h>
#include <stdlib.h>

static const struct verb pause_verb = {
	.name = "pause",
	.head =
"Usage: corral pause [--json] ID\n"
"\n"
"Freeze every process of the sandbox ID and keep it frozen: it uses no CPU,\n"
"keeps its memory and its files, and refuses exec (HTTP 409) until `corral\n"
"resume ID`.  Unlike the freeze of an idle sandbox, an exec does not thaw\n"
"it.  Prints ID.\n"
"\n"
"Options:\n"
"  --json               print the sandbox object (state \"paused\") instead\n",
	.tail =
"Exit status: 0 paused; 2 bad usage; 125 the daemon refused (no such\n"
"sandbox, a halted one) or could not be reached.\n"
"\n"
"Example:\n"
"  corral pause \"$id\" && corral ls && corral resume \"$id\"\n",
};

static const struct verb resume_verb = {
	.name = "resume",
	.head =
"Usage: corral resume [--json] ID\n"
"\n"
"Thaw the sandbox ID that `corral pause` froze: its processes go on where\n"
"they stopped, and exec is accepted again.  Prints ID.\n"
"\n"
"Options:\n"
"  --json               print the sandbox object instead\n",
	.tail =
"Exit status: 0 resumed; 2 bad usage; 125 the daemon refused (no such\n"
"sandbox, a halted one) or could not be reached.\n"
"\n"
"Example:\n"
"  corral resume \"$id\"\n",
};

int post_state(struct conn *c, const char *id, const char *action,
	       const json_t *body, bool as_json)
{
	char rest[16];
	char *path;
	json_t *sb;
	int code;

	snprintf(rest, sizeof(rest), "/%s", action);
	path = conn_sandbox_path(c, id, rest);
	if (!path)
		return EXIT_CORRAL;
	sb = conn_call_json(c, "POST", path, body);
	free(path);
	if (!sb)
		return EXIT_CORRAL;
	code = print_id_or_json(id, sb, as_json);
	json_decref(sb);
	return code;
}

/* pause and resume: one POST to /v1/sandboxes/ID/VERB, without a body. */
static int pause_cmd(const struct verb *v, int argc, char **argv)
{
	struct conn c = { 0 };
	bool as_json = false;
	int code;

	code = verb_parse(v, verb_json_options, ":h", argc, argv, &c,
			  set_json_flag, &as_json);
	if (!code && argc - optind != 1)
		code = verb_usage_error(v, "%s takes one sandbox ID", v->name);
	if (!code)
		code = verb_check_id(v, argv[optind]);
	if (!code)
		code = conn_open(&c, v);
	if (!code)
		code = post_state(&c, argv[optind], v->name, NULL, as_json);
	conn_close(&c);
	return code == HELP_SHOWN ? 0 : verb_finish(code);
}

int cmd_pause(int argc, char **argv)
{
	return pause_cmd(&pause_verb, argc, argv);
}

int cmd_resume(int argc, char **argv)
{
	return pause_cmd(&resume_verb, argc, argv);
}
