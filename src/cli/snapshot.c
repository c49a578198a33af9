/*
 * snapshot.c - corral snapshot: a sandbox's workspace kept as an object
 * (POST .../snapshot), for sandboxes to start on later (POST /v1/sandboxes
 * {"from_snapshot": ID}).
 */
#include "client.h"

#include <stdlib.h>

static const struct verb snapshot_verb = {
	.name = "snapshot",
	.head =
"Usage: corral snapshot [--json] ID\n"
"\n"
"Keep the workspace of the sandbox ID as it is now: the daemon freezes the\n"
"sandbox (a few milliseconds), copies what it changed (its overlay upper\n"
"layer) into its state directory, and thaws it.  Prints the snapshot's id.\n"
"A sandbox created with {\"from_snapshot\": SNAPSHOT} (POST /v1/sandboxes)\n"
"starts with that workspace: several forks can try different fixes from\n"
"one state.  GET /v1/snapshots lists them, DELETE /v1/snapshots/SNAPSHOT\n"
"removes one; together they may take at most the daemon's\n"
"--snapshot-budget.\n"
"\n"
"The copy brings nothing out to the host: no device node (but overlay\n"
"whiteouts, which mark deleted files), no setuid bit, symlinks as links.\n"
"Without a usable freezer (an unprivileged daemon without delegated\n"
"cgroups) the sandbox is copied running: the answer says \"frozen\": false.\n"
"\n"
"Options:\n"
"  --json               print the snapshot object {id, sandbox, workspace,\n"
"                       created, bytes, files, skipped, frozen}\n",
	.tail =
"Exit status: 0 kept; 2 bad usage; 125 the daemon refused (no such\n"
"sandbox, no workspace, the budget spent: HTTP 507) or could not be reached.\n"
"\n"
"Example:\n"
"  snap=$(corral snapshot \"$id\")\n"
"  curl --unix-socket \"$sock\" -d \"{\\\"from_snapshot\\\": \\\"$snap\\\"}\" localhost/v1/sandboxes\n",
};

int cmd_snapshot(int argc, char **argv)
{
	struct conn c = { 0 };
	bool json = false;
	char *path = NULL;
	json_t *o = NULL;
	int code;

	code = verb_parse(&snapshot_verb, verb_json_options, ":h", argc, argv, &c,
			  set_json_flag, &json);
	if (code)
		goto out;
	if (argc - optind != 1) {
		code = verb_usage_error(&snapshot_verb, "snapshot takes one sandbox ID");
		goto out;
	}
	code = verb_check_id(&snapshot_verb, argv[optind]);
	if (!code)
		code = conn_open(&c, &snapshot_verb);
	if (!code) {
		path = conn_sandbox_path(&c, argv[optind], "/snapshot");
		o = path ? conn_call_json(&c, "POST", path, NULL) : NULL;
		code = o ? print_id_or_json(json_string_value(json_object_get(o, "id")),
					    o, json) : EXIT_CORRAL;
	}
out:
	json_decref(o);
	free(path);
	conn_close(&c);
	return code == HELP_SHOWN ? 0 : verb_finish(code);
}
