/*
 * rm.c - corral rm: destroy sandboxes of the daemon's (DELETE .../ID), one
 * after the other, going on past one that fails.
 */
#include "client.h"

#include <stdio.h>
#include <stdlib.h>

static const struct verb rm_verb = {
	.name = "rm",
	.head =
"Usage: corral rm [--json] ID...\n"
"\n"
"Destroy each sandbox ID: its processes are killed, and its mounts,\n"
"cgroups, network namespace and files go, the changes in its /workspace copy\n"
"too (copy out what you need first, with `corral cp`).  Its events stay in\n"
"the daemon's audit log.  Prints each ID once it is destroyed, and goes on\n"
"with the next when one fails.\n"
"\n"
"Options:\n"
"  --json               print the daemon's answer for each, one a line:\n"
"                       {\"id\", \"state\": \"destroyed\", \"meters\"}, with the\n"
"                       final CPU-seconds, memory peak, active and frozen time\n",
	.tail =
"Exit status: 0 all destroyed; 2 bad usage; 125 at least one was not (the\n"
"daemon refused, or could not be reached); the others were.\n"
"\n"
"Examples:\n"
"  corral rm \"$id\"\n"
"  corral rm $(corral ls -q)\n",
};

static int rm_one(struct conn *c, const char *id, bool as_json)
{
	char *path = conn_sandbox_path(c, id, "");
	json_t *o;
	int code;

	if (!path)
		return EXIT_CORRAL;
	o = conn_call_json(c, "DELETE", path, NULL);
	free(path);
	if (!o)
		return EXIT_CORRAL;
	code = print_id_or_json(id, o, as_json);
	json_decref(o);
	/* the next one's error should follow this one's line, not pass it */
	fflush(stdout);
	return code;
}

int cmd_rm(int argc, char **argv)
{
	struct conn c = { 0 };
	bool as_json = false;
	int code, i;

	code = verb_parse(&rm_verb, verb_json_options, ":h", argc, argv, &c,
			  set_json_flag, &as_json);
	if (code)
		goto out;
	if (optind >= argc) {
		code = verb_usage_error(&rm_verb, "no sandbox ID given");
		goto out;
	}
	for (i = optind; i < argc && !code; i++)
		code = verb_check_id(&rm_verb, argv[i]);
	if (code)
		goto out;
	code = conn_open(&c, &rm_verb);
	if (code)
		goto out;
	for (i = optind; i < argc; i++)
		if (rm_one(&c, argv[i], as_json)) {
			code = EXIT_CORRAL;
			/* each id's line: its object, or the error it met */
			cli_json_flush();
		}
out:
	conn_close(&c);
	return code == HELP_SHOWN ? 0 : verb_finish(code);
}
