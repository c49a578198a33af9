/*
 * export.c - corral export: a sandbox's workspace changes out to the host
 * (POST .../export): into a new directory, onto the workspace itself, or
 * as a git patch; what was held back or in conflict, with why.
 */
#include "client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static const struct verb export_verb = {
	.name = "export",
	.head =
"Usage: corral export [--allow-risky GLOB]... [--json] ID\n"
"                     (--to DIR | --apply | --patch FILE)\n"
"\n"
"Bring out what the sandbox ID changed under its workspace, read from its\n"
"overlay's upper layer:\n"
"\n"
"  --to DIR             a new directory DIR: the workspace as the sandbox\n"
"                       left it (DIR must not exist)\n"
"  --apply              the changes onto the host workspace the sandbox was\n"
"                       made on; a host file that changed since the sandbox\n"
"                       started (or since an earlier --apply wrote it) is\n"
"                       not overwritten but listed as a conflict\n"
"  --patch FILE         a git patch of the changes to FILE (\"-\": standard\n"
"                       output), for `git apply`; nothing else is written.\n"
"                       It is written as it comes, never held whole, into\n"
"                       a new file beside FILE, without a name until it\n"
"                       is complete (O_TMPFILE; else FILE.corral-export.PID),\n"
"                       then renamed onto FILE: a failed or killed export\n"
"                       leaves FILE as it was.  No symlink that\n"
"                       lies in one of the sandbox's --rw binds is\n"
"                       followed on the way to FILE's directory\n"
"\n"
"Every host write is resolved beneath the destination with no symlink\n"
"followed.  No device node, fifo, socket, setuid/setgid bit, hardlink to\n"
"an outside file or symlink that leaves the tree comes out.  Changes that\n"
"would make a host tool run code later (the policy's export table: git\n"
"config keys such as core.fsmonitor, hooks, .gitattributes drivers,\n"
".gitmodules commands, editor tasks, .envrc ...) are held back and listed\n"
"with the reason.  --to and --apply write as you: the daemon takes your\n"
"uid, gid and groups (from its unix socket) for the writes, so nothing is\n"
"written where you could not write yourself; over --url they are refused\n"
"(the host's paths are not a remote client's to name), use --patch.\n"
"\n"
"Options:\n"
"  --allow-risky GLOB   let changes at paths matching GLOB through the\n"
"                       export table (each one is recorded as an event);\n"
"                       may be repeated\n"
"  --json               print the daemon's report {mode, changes, exported,\n"
"                       held, conflicts} instead of the summary\n"
"\n"
"The summary (on standard output): one line a change held back or in\n"
"conflict, \"held PATH: REASON\" or \"conflict PATH: REASON\", then\n"
"\"exported N, held N, conflicts N\".\n",
	.tail =
"Exit status: 0 exported (held-back changes and conflicts are listed, not\n"
"errors); 2 bad usage; 125 the daemon refused (no such sandbox, DIR\n"
"exists, a limit, a halted sandbox) or could not be reached.\n"
"\n"
"Examples:\n"
"  corral export --to ~/review/run-7 \"$id\"\n"
"  corral export --patch agent.patch \"$id\" && git apply --check agent.patch\n"
"  corral export --apply --allow-risky .vscode/settings.json \"$id\"\n",
};

#define ALLOW_RISKY_MAX 64

enum { OPT_TO = OPT_OWN, OPT_APPLY, OPT_PATCH, OPT_ALLOW_RISKY };

static const struct option export_options[] = {
	CONN_OPTIONS,
	{ "json", no_argument, NULL, OPT_JSON },
	{ "to", required_argument, NULL, OPT_TO },
	{ "apply", no_argument, NULL, OPT_APPLY },
	{ "patch", required_argument, NULL, OPT_PATCH },
	{ "allow-risky", required_argument, NULL, OPT_ALLOW_RISKY },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

struct export_args {
	const char *to, *patch;
	const char *allow[ALLOW_RISKY_MAX];
	size_t nallow;
	bool apply, json;
};

static int export_option(void *arg, int opt, const char *val)
{
	struct export_args *a = arg;

	switch (opt) {
	case OPT_JSON:
		a->json = true;
		return 0;
	case OPT_TO:
		a->to = val;
		return 0;
	case OPT_APPLY:
		a->apply = true;
		return 0;
	case OPT_PATCH:
		a->patch = val;
		return 0;
	case OPT_ALLOW_RISKY:
		if (a->nallow == ALLOW_RISKY_MAX)
			return verb_usage_error(&export_verb, "at most %d --allow-risky",
						ALLOW_RISKY_MAX);
		a->allow[a->nallow++] = val;
		return 0;
	default:
		return verb_usage_error(&export_verb, "option %d is not handled", opt);
	}
}

/* --to as an absolute path: the daemon resolves it, not our cwd. */
static int put_to(struct export_args *a, json_t *body)
{
	char cwd[PATH_MAX], *abs = NULL;
	int code;

	if (a->to[0] == '/')
		return body_put_text(&export_verb, body, "to", "--to", a->to);
	if (!getcwd(cwd, sizeof(cwd))) {
		cli_error("--to %s: cannot tell the current directory: %s", a->to,
			  strerror(errno));
		return EXIT_CORRAL;
	}
	if (asprintf(&abs, "%s/%s", cwd, a->to) < 0)
		return out_of_memory("building the export request");
	code = body_put_text(&export_verb, body, "to", "--to", abs);
	free(abs);
	return code;
}

static json_t *export_body(struct export_args *a, int *code)
{
	json_t *body = json_object(), *allow = json_array();

	*code = body && allow ? 0 : out_of_memory("building the export request");
	for (size_t i = 0; !*code && i < a->nallow; i++)
		*code = json_array_append_new(allow, json_string(a->allow[i])) < 0 ?
			verb_usage_error(&export_verb, "--allow-risky %s: not UTF-8",
					 a->allow[i]) : 0;
	if (!*code && a->to)
		*code = put_to(a, body);
	if (!*code && a->apply)
		*code = body_put(body, "apply", json_true()) < 0 ? out_of_memory("building the export request") : 0;
	if (!*code && a->patch)
		*code = body_put(body, "patch", json_true()) < 0 ? out_of_memory("building the export request") : 0;
	if (!*code && a->nallow) {
		*code = body_put(body, "allow_risky", allow) < 0 ? out_of_memory("building the export request") : 0;
		allow = NULL;
	}
	json_decref(allow);
	if (*code) {
		json_decref(body);
		return NULL;
	}
	return body;
}

static int print_list(FILE *f, json_t *report, const char *key, const char *word)
{
	json_t *e;
	size_t i;

	json_array_foreach(json_object_get(report, key), i, e) {
		const char *p = json_string_value(json_object_get(e, "path"));
		const char *why = json_string_value(json_object_get(e, "reason"));
		char *pp = printable(p ? p : "", p ? strlen(p) : 0);
		char *pw = printable(why ? why : "", why ? strlen(why) : 0);
		int bad = !pp || !pw || fprintf(f, "%s %s: %s\n", word, pp, pw) < 0;

		free(pp);
		free(pw);
		if (bad)
			return EXIT_CORRAL;
	}
	return 0;
}

/* The report: as JSON, or the summary (on f). */
static int print_report(const struct export_args *a, json_t *rep, FILE *f)
{
	int code;

	if (a->json)
		return print_json(rep);
	code = print_list(f, rep, "held", "held");
	if (!code)
		code = print_list(f, rep, "conflicts", "conflict");
	if (!code && fprintf(f, "exported %zu, held %zu, conflicts %zu\n",
			    json_array_size(json_object_get(rep, "exported")),
			    json_array_size(json_object_get(rep, "held")),
			    json_array_size(json_object_get(rep, "conflicts"))) < 0)
		code = EXIT_CORRAL;
	return code;
}

/*
 * A patch export's answer as it comes (EXPORT_STREAM_TYPE): the report's
 * line, then the patch, written to the file as it arrives.  The patch may
 * be as large as the policy's export.max_bytes and more: never held.
 */
struct patch_in {
	struct reply *r;
	struct local_out out;
	struct reply line;		/* the report, until its newline */
	json_t *report;
};

static bool stream_answer(struct reply *r)
{
	return !strncasecmp(r->type, EXPORT_STREAM_TYPE, strlen(EXPORT_STREAM_TYPE));
}

static int report_line(struct patch_in *p, const char *data, size_t n)
{
	json_error_t jerr;

	if (reply_append(&p->line, data, n) < 0)
		return -1;
	if (p->line.buf[p->line.len - 1] != '\n')
		return 0;
	p->report = json_loadb(p->line.buf, p->line.len - 1, 0, &jerr);
	if (!json_is_object(p->report)) {
		cli_error("the daemon's export report is not a JSON object: %s", jerr.text);
		return -1;
	}
	return 0;
}

static int patch_take(void *arg, const char *data, size_t n)
{
	struct patch_in *p = arg;
	const char *nl;
	size_t take;

	if (!n)
		return 0;
	if (!p->report && !p->line.len && !stream_answer(p->r)) {
		cli_error("the daemon answered the patch export with no patch stream "
			  "(is it older than this client?)");
		return -1;
	}
	if (!p->report) {
		nl = memchr(data, '\n', n);
		take = nl ? (size_t)(nl - data) + 1 : n;
		if (report_line(p, data, take) < 0)
			return -1;
		data += take;
		n -= take;
	}
	return n && local_out_write(&p->out, data, n) ? -1 : 0;
}

static int export_patch(struct conn *c, const char *id, const char *path,
			const char *text, struct export_args *a)
{
	struct request q = { .method = "POST", .path = path, .body = text,
			     .body_len = strlen(text),
			     .type = "Content-Type: application/json",
			     .accept = "Accept: " EXPORT_STREAM_TYPE };
	struct reply r = { .max = REPLY_MAX, .sink = patch_take };
	struct patch_in p = { .r = &r, .line = { .max = REPLY_MAX } };
	struct corral_dir_id *rw = NULL;
	size_t nrw = 0;
	int code = 0;

	/* FILE's directory judged by what the sandbox writes, before it answers */
	if (strcmp(a->patch, "-"))
		code = sandbox_rw_dirs(c, id, &rw, &nrw);
	if (!code)
		code = local_out_open(&p.out, a->patch, rw, nrw);
	free(rw);
	if (code)
		return code;
	local_out_for_reading(&p.out);

	r.arg = &p;
	if (conn_perform(c, &q, &r) < 0 || reply_check(&r) < 0)
		code = EXIT_CORRAL;
	if (!code && !p.report) {
		cli_error("the daemon's answer ended before its report did");
		code = EXIT_CORRAL;
	}
	/* the file takes FILE's name only when the whole answer came */
	if (local_out_close(&p.out, !code) && !code)
		code = EXIT_CORRAL;
	/* a patch on standard output keeps it to itself: the summary goes to stderr */
	if (!code)
		code = print_report(a, p.report, strcmp(a->patch, "-") ? stdout : stderr);
	json_decref(p.report);
	reply_free(&p.line);
	reply_free(&r);
	return code;
}

static int export_post(struct conn *c, const char *id, struct export_args *a,
		       json_t *body)
{
	char *path = conn_sandbox_path(c, id, "/export"), *text = NULL;
	json_t *rep = NULL;
	int code = EXIT_CORRAL;

	if (path && a->patch) {
		text = json_dumps(body, JSON_COMPACT);
		code = text ? export_patch(c, id, path, text, a) :
		       out_of_memory("building the request body");
	} else if (path && (rep = conn_call_json(c, "POST", path, body))) {
		code = print_report(a, rep, stdout);
	}
	json_decref(rep);
	free(text);
	free(path);
	return code;
}

int cmd_export(int argc, char **argv)
{
	struct export_args a = { 0 };
	struct conn c = { 0 };
	json_t *body = NULL;
	int code;

	code = verb_parse(&export_verb, export_options, ":h", argc, argv, &c,
			  export_option, &a);
	if (code)
		goto out;
	if (argc - optind != 1) {
		code = verb_usage_error(&export_verb, "export takes one sandbox ID");
		goto out;
	}
	if (!!a.to + a.apply + !!a.patch != 1) {
		code = verb_usage_error(&export_verb, "give one of --to DIR, --apply "
					"or --patch FILE");
		goto out;
	}
	if (a.json && a.patch && !strcmp(a.patch, "-")) {
		code = verb_usage_error(&export_verb, "--json and --patch - both "
					"want standard output");
		goto out;
	}
	code = verb_check_id(&export_verb, argv[optind]);
	if (!code)
		body = export_body(&a, &code);
	if (!code)
		code = conn_open(&c, &export_verb);
	if (!code)
		code = export_post(&c, argv[optind], &a, body);
out:
	json_decref(body);
	conn_close(&c);
	return code == HELP_SHOWN ? 0 : verb_finish(code);
}
