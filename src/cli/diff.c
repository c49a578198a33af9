/*
 * diff.c - corral diff: what a sandbox of the daemon's changed in its
 * workspace (GET .../diff[?path=P][&format=patch]), as a list, as JSON or
 * as a git patch.
 */
#include "client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct verb diff_verb = {
	.name = "diff",
	.head =
"Usage: corral diff [--patch | --json] ID [PATH]\n"
"\n"
"Show what the sandbox ID changed under its workspace: read from the\n"
"overlay's upper layer, never following a symlink the sandbox made, so\n"
"nothing here runs or opens what the agent planted.  PATH (relative to the\n"
"workspace, or /workspace/...) keeps the changes at or beneath it.\n"
"\n"
"One line a change: A added, M modified, D deleted, T type changed (a file\n"
"became a symlink, say), m mode only; then the path, and for a symlink its\n"
"target (as text: \" -> TARGET\").  Names the sandbox chose are printed with\n"
"control characters escaped (\\xNN).\n"
"\n"
"Options:\n"
"  --patch              a git patch instead (binary files as git binary\n"
"                       patches) that `git apply` takes.  It holds what\n"
"                       `corral export --patch` would let out: changes the\n"
"                       policy's export table holds back (git config that\n"
"                       runs programs, hooks, editor tasks...) and paths\n"
"                       inside .git are left out; `corral export` lists them\n"
"  --json               the daemon's answer: a JSON array of changes\n"
"                       {path, change, type, mode, size, target, ...}\n",
	.tail =
"Exit status: 0 shown; 2 bad usage; 125 the daemon refused (no such\n"
"sandbox, no workspace) or could not be reached.\n"
"\n"
"Examples:\n"
"  corral diff \"$id\"\n"
"  corral diff --patch \"$id\" src > agent.patch && git apply --check agent.patch\n",
};

enum { OPT_PATCH = OPT_OWN };

static const struct option diff_options[] = {
	CONN_OPTIONS,
	{ "json", no_argument, NULL, OPT_JSON },
	{ "patch", no_argument, NULL, OPT_PATCH },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

struct diff_args {
	bool json, patch;
};

static int diff_option(void *arg, int opt, const char *val)
{
	struct diff_args *a = arg;

	(void)val;
	if (opt == OPT_JSON)
		a->json = true;
	else if (opt == OPT_PATCH)
		a->patch = true;
	else
		return verb_usage_error(&diff_verb, "option %d is not handled", opt);
	return 0;
}

/* The words are change_kind_name()'s (src/lib/diff.c), the daemon's. */
static char change_letter(const char *change)
{
	static const char *const names[] = { "added", "modified", "deleted",
					     "type_changed", "mode_changed" };
	static const char letters[] = "AMDTm";

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (change && !strcmp(change, names[i]))
			return letters[i];
	return '?';
}

static int print_changes(const struct reply *r)
{
	json_error_t jerr;
	json_t *v = json_loadb(r->buf ? r->buf : "", r->len, 0, &jerr), *e;
	size_t i;
	int code = 0;

	if (!json_is_array(v)) {
		cli_error("the daemon's answer is not a JSON array");
		json_decref(v);
		return EXIT_CORRAL;
	}
	json_array_foreach(v, i, e) {
		const char *p = json_string_value(json_object_get(e, "path"));
		const char *t = json_string_value(json_object_get(e, "target"));
		char *pp = printable(p ? p : "", p ? strlen(p) : 0);
		char *pt = t ? printable(t, strlen(t)) : NULL;

		if (!pp || (t && !pt))
			code = out_of_memory("printing the diff");
		else if (printf("%c %s%s%s\n",
				change_letter(json_string_value(json_object_get(e, "change"))),
				pp, pt ? " -> " : "", pt ? pt : "") < 0)
			code = EXIT_CORRAL;
		free(pp);
		free(pt);
		if (code)
			break;
	}
	json_decref(v);
	return code;
}

/* A patch goes out as it comes: it is as large as the sandbox made it. */
static int patch_out(void *arg, const char *data, size_t n)
{
	return local_out_write(arg, data, n) ? -1 : 0;
}

static int diff_get(struct conn *c, const char *id, const char *sub,
		    const struct diff_args *a)
{
	struct request q = { .method = "GET" };
	struct reply r = { .max = REPLY_MAX };
	struct local_out out;
	char *esc = sub ? conn_escape(sub) : NULL, *rest = NULL;
	char *path = NULL;
	int code = EXIT_CORRAL;

	if ((sub && !esc) ||
	    asprintf(&rest, "/diff%s%s%s", a->patch ? "?format=patch" : "",
		     sub ? (a->patch ? "&path=" : "?path=") : "", sub ? esc : "") < 0) {
		rest = NULL;
		code = out_of_memory("building the diff's path");
		goto out;
	}
	path = conn_sandbox_path(c, id, rest);
	if (!path)
		goto out;
	q.path = path;
	if (a->patch) {
		code = local_out_open(&out, "-", NULL, 0);
		if (code)
			goto out;
		local_out_for_reading(&out);
		r.sink = patch_out;
		r.arg = &out;
	}
	if (conn_perform(c, &q, &r) < 0 || reply_check(&r) < 0)
		code = EXIT_CORRAL;
	else if (a->patch)
		code = local_out_close(&out, true);
	else if (a->json)
		code = fwrite(r.buf ? r.buf : "", 1, r.len, stdout) == r.len &&
		       putchar('\n') != EOF ? 0 : EXIT_CORRAL;
	else
		code = print_changes(&r);
out:
	reply_free(&r);
	free(esc);
	free(rest);
	free(path);
	return code;
}

int cmd_diff(int argc, char **argv)
{
	struct diff_args a = { 0 };
	struct conn c = { 0 };
	int code, n;

	code = verb_parse(&diff_verb, diff_options, ":h", argc, argv, &c,
			  diff_option, &a);
	if (code)
		goto out;
	n = argc - optind;
	if (n < 1 || n > 2) {
		code = verb_usage_error(&diff_verb, "diff takes a sandbox ID and "
					"at most one PATH");
		goto out;
	}
	if (a.patch && a.json) {
		code = verb_usage_error(&diff_verb, "--patch or --json, not both");
		goto out;
	}
	code = verb_check_id(&diff_verb, argv[optind]);
	if (!code)
		code = conn_open(&c, &diff_verb);
	if (!code)
		code = diff_get(&c, argv[optind], n == 2 ? argv[optind + 1] : NULL, &a);
out:
	conn_close(&c);
	return code == HELP_SHOWN ? 0 : verb_finish(code);
}
