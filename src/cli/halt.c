/*
 * halt.c - corral halt: stop a sandbox of the daemon's for good, as a met
 * abort criterion would, with the reason it is refused with from then on
 * (POST .../halt {"reason"}).
 */
#include "client.h"

static const struct verb halt_verb = {
	.name = "halt",
	.head =
"Usage: corral halt [--reason TEXT] [--json] ID\n"
"\n"
"Halt the sandbox ID as a met abort criterion would: the supervisor freezes\n"
"it first (which keeps the evidence), records why, then kills it or holds it\n"
"frozen as the policy's on_abort says.  From then on the sandbox refuses\n"
"every call with HTTP 409 and the reason, until `corral rm ID` destroys it.\n"
"There is no way back: to stop it for a while, use `corral pause`.\n"
"Prints ID.\n"
"\n"
"Options:\n"
"  --reason TEXT        why: the halt reason later calls are refused with,\n"
"                       and that the events record (default: \"halted by\n"
"                       `corral halt`\")\n"
"  --json               print the sandbox object (state \"halted\") instead\n",
	.tail =
"Exit status: 0 halted; 2 bad usage; 125 the daemon refused (no such\n"
"sandbox) or could not be reached.\n"
"\n"
"Example:\n"
"  corral halt --reason \"agent tried to read ~/.ssh\" \"$id\"\n",
};

enum { OPT_REASON = OPT_OWN };

static const struct option halt_options[] = {
	CONN_OPTIONS,
	{ "json", no_argument, NULL, OPT_JSON },
	{ "reason", required_argument, NULL, OPT_REASON },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

struct halt_args {
	const char *reason;
	bool json;
};

static int halt_option(void *arg, int opt, const char *val)
{
	struct halt_args *a = arg;

	if (opt == OPT_JSON)
		a->json = true;
	else if (opt == OPT_REASON)
		a->reason = val;
	else
		return verb_usage_error(&halt_verb, "option %d is not handled", opt);
	return 0;
}

int cmd_halt(int argc, char **argv)
{
	struct halt_args a = { .reason = "halted by `corral halt`" };
	struct conn c = { 0 };
	json_t *body = NULL;
	int code;

	code = verb_parse(&halt_verb, halt_options, ":h", argc, argv, &c,
			  halt_option, &a);
	if (code)
		goto out;
	if (argc - optind != 1) {
		code = verb_usage_error(&halt_verb, "halt takes one sandbox ID");
		goto out;
	}
	code = verb_check_id(&halt_verb, argv[optind]);
	if (code)
		goto out;
	body = json_object();
	code = body ? body_put_text(&halt_verb, body, "reason", "--reason", a.reason) :
		      out_of_memory("building the halt request");
	if (!code)
		code = conn_open(&c, &halt_verb);
	if (!code)
		code = post_state(&c, argv[optind], "halt", body, a.json);
out:
	json_decref(body);
	conn_close(&c);
	return code == HELP_SHOWN ? 0 : verb_finish(code);
}
