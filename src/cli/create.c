/*
 * create.c - corral create: POST /v1/sandboxes, a sandbox of the daemon's
 * built from a policy file, a workspace and limits given here.
 */
#include "client.h"

#include <errno.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const struct verb create_verb = {
	.name = "create",
	.head =
"Usage: corral create [--policy FILE] [--workspace DIR] [--image REF] [--user root]\n"
"                     [--ttl DURATION] [--idle-freeze DURATION] [--label KEY=VALUE]... [--json]\n"
"\n"
"Ask the daemon (`corral serve`) for a sandbox that lives across many calls,\n"
"and print its id.  The sandbox is built from the daemon's policy (its\n"
"--policy, else the built-in default) with FILE merged over it, then waits\n"
"for `corral exec`.  When no call has run in it for a while it is frozen\n"
"(no CPU, its memory kept) and the next exec thaws it.  It lives until\n"
"`corral rm ID`, or until its TTL runs out.\n"
"\n"
"Options:\n"
"  --policy FILE        a JSON policy file (`corral policy check FILE`); it\n"
"                       is sent as an object and the daemon checks it\n"
"  --workspace DIR      show DIR at /workspace, copy-on-write: the host copy\n"
"                       is never written.  Over the unix socket DIR is made\n"
"                       absolute here and must be a directory; over --url it\n"
"                       is a path on the daemon's host and must be absolute\n"
"  --image REF          the root is image REF of the daemon's store\n"
"                       (STATE_DIR/images: `corral image import --state-dir`)\n"
"  --user root|agent    root: calls run as uid 0 of the sandbox's user\n"
"                       namespace with a few file capabilities (apt-get\n"
"                       install on an image); only if the daemon was started\n"
"                       with --allow-root-inside (else 403)\n"
"  --ttl DURATION       destroy the sandbox this long after it was created\n"
"                       (\"90s\", \"30m\", \"2h\", \"1d\"; a bare number is\n"
"                       seconds); absent or 0: no TTL\n"
"  --idle-freeze DURATION\n"
"                       freeze the sandbox once no call or process has run\n"
"                       for this long (default 2s; 0: never freeze it)\n"
"  --label KEY=VALUE    attach a label (repeatable); `corral ls` shows them\n"
"  --json               print the whole sandbox object, not only its id\n",
	.tail =
"Exit status: 0 the sandbox exists and its id was printed; 2 bad usage (an\n"
"unknown option, a bad DURATION or KEY=VALUE); 125 FILE or DIR cannot be\n"
"used, the daemon refused (a policy it rejects reads \"corral: KEY: reason\n"
"(got ...) (HTTP 422)\"), or the daemon could not be reached.\n"
"\n"
"Example:\n"
"  id=$(corral create --policy policies/offline.json --workspace . --ttl 1h)\n"
"  corral exec \"$id\" -- make test\n"
"  corral rm \"$id\"\n",
};

enum { OPT_POLICY = OPT_OWN, OPT_WORKSPACE, OPT_TTL, OPT_IDLE_FREEZE, OPT_LABEL,
       OPT_IMAGE, OPT_USER };

static const struct option create_options[] = {
	CONN_OPTIONS,
	{ "policy", required_argument, NULL, OPT_POLICY },
	{ "workspace", required_argument, NULL, OPT_WORKSPACE },
	{ "ttl", required_argument, NULL, OPT_TTL },
	{ "idle-freeze", required_argument, NULL, OPT_IDLE_FREEZE },
	{ "label", required_argument, NULL, OPT_LABEL },
	{ "image", required_argument, NULL, OPT_IMAGE },
	{ "user", required_argument, NULL, OPT_USER },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static int put_policy(json_t *body, const char *file)
{
	json_error_t jerr;
	json_t *p;

	if (json_object_get(body, "policy"))
		return verb_usage_error(&create_verb, "--policy is given twice");
	p = json_load_file(file, JSON_REJECT_DUPLICATES, &jerr);
	if (!p) {
		int open_errno = errno;

		if (jerr.line > 0)
			cli_error("--policy %s:%d:%d: %s", file, jerr.line,
				  jerr.column, jerr.text);
		else
			cli_error("--policy %s: %s", file, jerr.text);
		if (json_error_code(&jerr) == json_error_cannot_open_file)
			cli_json_errno(open_errno);
		else
			cli_json_code("policy");
		return EXIT_CORRAL;
	}
	if (!json_is_object(p)) {
		cli_error("--policy %s: a policy is a JSON object ({...}), this file holds another JSON value",
			  file);
		cli_json_code("policy");
		json_decref(p);
		return EXIT_CORRAL;
	}
	return body_put(body, "policy", p);
}

static int put_ttl(json_t *body, const char *arg)
{
	uint64_t ms;
	int code = verb_duration(&create_verb, "--ttl", arg, &ms);

	if (code)
		return code;
	return body_put_seconds(body, "ttl_seconds", ms);
}

static int put_idle_freeze(json_t *body, const char *arg)
{
	uint64_t ms;
	int code = verb_duration(&create_verb, "--idle-freeze", arg, &ms);

	if (code)
		return code;
	return body_put(body, "idle_freeze_ms", json_integer((json_int_t)ms));
}

/*
 * Over the unix socket the daemon shares this host but not our working
 * directory: send the absolute, resolved path.  Over TCP the path is on the
 * daemon's host, which may be another one: nothing here can check it.
 */
static int put_workspace(json_t *body, const char *dir, bool remote)
{
	struct stat st;
	char *abs;
	int code;

	if (remote) {
		if (dir[0] != '/')
			return verb_usage_error(&create_verb, "--workspace: over --url the path is on the daemon's host and must be absolute (got \"%s\")",
						dir);
		return body_put_text(&create_verb, body, "workspace", "--workspace", dir);
	}
	abs = realpath(dir, NULL);
	if (!abs) {
		cli_error("--workspace %s: %s", dir, strerror(errno));
		return EXIT_CORRAL;
	}
	if (stat(abs, &st) < 0 || !S_ISDIR(st.st_mode)) {
		cli_error("--workspace %s: not a directory", dir);
		free(abs);
		return EXIT_CORRAL;
	}
	code = body_put_text(&create_verb, body, "workspace", "--workspace", abs);
	free(abs);
	return code;
}

static int create_option(void *arg, int opt, const char *val)
{
	struct create_args *a = arg;

	switch (opt) {
	case OPT_POLICY:
		return put_policy(a->body, val);
	case OPT_WORKSPACE:
		a->workspace = val;
		return 0;
	case OPT_TTL:
		return put_ttl(a->body, val);
	case OPT_IDLE_FREEZE:
		return put_idle_freeze(a->body, val);
	case OPT_LABEL:
		return body_put_pair(&create_verb, a->labels, "--label", val);
	case OPT_JSON:
		a->json = true;
		return 0;
	case OPT_IMAGE:
		return body_put_text(&create_verb, a->body, "image", "--image", val);
	case OPT_USER:
		return body_put_text(&create_verb, a->body, "user", "--user", val);
	}
	return verb_usage_error(&create_verb, "option %d is not handled", opt);
}

/*
 * A workspace the daemon does not map to the agent (as root, its owner
 * outside --uid-range): its files are nobody's inside, and the first
 * exec that edits one meets "Permission denied" with no word why; the
 * reason was only in the sandbox's JSON (ids.note).  Said on stderr when
 * the note names the workspace; stdout keeps the id alone, for
 * id=$(corral create ...).
 */
static void tell_workspace_note(const json_t *sb, const json_t *body)
{
	const char *ws = json_string_value(json_object_get(body, "workspace"));
	const char *note = json_string_value(json_object_get(json_object_get(sb, "ids"),
							     "note"));
	char named[61];
	char *safe;

	if (!ws || !note)
		return;
	/* the note names at most 60 bytes of the path (idmap.c) */
	snprintf(named, sizeof(named), "%s", ws);
	if (!strstr(note, named))
		return;
	safe = printable(note, strlen(note));
	cli_error("note: %s%s", safe ? safe : "(out of memory)",
		  strstr(note, "--uid-range") ?
		  "; the daemon maps a workspace's owner only within its --uid-range, from uid 1 (root's files never): chown the workspace to such a user, or start `corral serve --uid-range FROM-TO` to cover its owner" : "");
	free(safe);
}

static int create_send(struct conn *c, const struct create_args *a)
{
	const char *id;
	json_t *sb;
	int code;

	sb = conn_call_json(c, "POST", "/v1/sandboxes", a->body);
	if (!sb)
		return EXIT_CORRAL;
	id = json_string_value(json_object_get(sb, "id"));
	if (a->json) {
		code = print_json(sb);
	} else if (id && client_valid_id(id)) {
		code = puts(id) == EOF ? EXIT_CORRAL : 0;
	} else {
		cli_error("the daemon's answer names no valid sandbox id");
		code = EXIT_CORRAL;
	}
	/*
	 * An id that did not reach the caller (stdout closed, a full disk)
	 * is a sandbox no one can name, alive until its TTL: removed, and
	 * create fails as it would have before the daemon made it.
	 */
	if (code == 0 && id && client_valid_id(id) &&
	    (fflush(stdout) == EOF || ferror(stdout))) {
		int e = errno;
		char *path = conn_sandbox_path(c, id, "");
		json_t *o = path ? conn_call_json(c, "DELETE", path, NULL) : NULL;

		cli_error("cannot write the new sandbox's id %s to stdout: %s; %s",
			  id, strerror(e), o ? "it was removed" :
			  "it is left: remove it with `corral rm ID`");
		json_decref(o);
		free(path);
		/* the id left in the buffer is said lost: not again at exit */
		__fpurge(stdout);
		clearerr(stdout);
		code = EXIT_CORRAL;
	}
	if (code == 0 && !a->json)
		tell_workspace_note(sb, a->body);
	json_decref(sb);
	return code;
}

/* The command line, into a->body: nothing is sent yet. */
int create_parse(struct create_args *a, struct conn *c, int argc, char **argv)
{
	int code;

	code = verb_parse(&create_verb, create_options, ":h", argc, argv,
			  c, create_option, a);
	if (code)
		return code;
	if (optind < argc)
		return verb_usage_error(&create_verb, "create takes no operands (got \"%s\")",
					argv[optind]);
	if (a->workspace) {
		code = put_workspace(a->body, a->workspace, c->url != NULL);
		if (code)
			return code;
	}
	if (json_object_size(a->labels))
		return body_put(a->body, "labels", json_incref(a->labels));
	return 0;
}

int cmd_create(int argc, char **argv)
{
	struct create_args a = { .body = json_object(), .labels = json_object() };
	struct conn c = { 0 };
	int code;

	if (!a.body || !a.labels)
		code = out_of_memory("building the create request");
	else
		code = create_parse(&a, &c, argc, argv);
	if (!code)
		code = conn_open(&c, &create_verb);
	if (!code)
		code = create_send(&c, &a);
	conn_close(&c);
	json_decref(a.labels);
	json_decref(a.body);
	return code == HELP_SHOWN ? 0 : verb_finish(code);
}
