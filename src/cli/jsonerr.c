/*
 * jsonerr.c - with --json, an error the CLI raises itself is one JSON
 * object on stdout as well as the line on stderr.
 *
 * A program that runs `corral VERB --json` reads stdout; a usage error,
 * an unreachable daemon or the daemon's refusal printed only "corral:
 * ..." on stderr, and the program parsed nothing (an empty stdout is no
 * JSON document).  Now it reads {"error": CODE, "detail": SENTENCE}, the
 * shape of the daemon's own errors (docs/API.md, Errors): CODE is
 * "usage" for the command line, the daemon's word when the daemon refused
 * (with "http_status"), a word of the table below for a local failure
 * (cli_json_code, cli_json_errno), else "failed"; SENTENCE is the line
 * stderr got.
 *
 * cli_error() is called from every file of the CLI, so what it said is
 * kept here, not threaded through each caller: one process runs one verb,
 * and the state below is that verb's.  An answer the verb printed itself
 * (a result, a listing) is its JSON: no error object follows it.
 */
#include "client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
	bool on;		/* the verb was given --json */
	bool printed;		/* stdout got a JSON answer */
	bool pending;		/* an error not yet printed as JSON */
	bool last;		/* ... and it is the last line cli_error said */
	long http_status;	/* the daemon's refusal's, or 0 */
	char code[32];
	/*
	 * Whole, as printable() made it (valid UTF-8): cut at a fixed size,
	 * a character across the cut made json_pack() refuse the string, and
	 * a long path's error printed no object at all (and "out of memory").
	 */
	char *detail;
} je;

/* the detail is now safe, shown as printable() shows text; false: no memory */
static bool set_detail(const char *text)
{
	char *safe = printable(text, strlen(text));

	if (!safe)
		return false;
	free(je.detail);
	je.detail = safe;
	return true;
}

void cli_json_scan(int argc, char **argv, const char *shorts,
		   const struct option *opts, int json_opt)
{
	char **copy;
	int opt, saved_opterr = opterr;

	/* a copy: GNU getopt permutes what it scans, the verb's parse must not see it so */
	copy = malloc(sizeof(*copy) * ((size_t)argc + 1));
	if (!copy)
		return;		/* then the errors are said on stderr alone */
	memcpy(copy, argv, sizeof(*copy) * (size_t)argc);
	copy[argc] = NULL;
	opterr = 0;
	optind = 0;
	while ((opt = getopt_long(argc, copy, shorts, opts, NULL)) != -1)
		if (opt == json_opt)
			je.on = true;
	optind = 0;
	opterr = saved_opterr;
	free(copy);
}

void cli_json_on(void)
{
	je.on = true;
}

bool cli_json_is_on(void)
{
	return je.on;
}

void cli_json_note(const char *line)
{
	if (!je.on)
		return;
	/* a note beside the work is not why it failed */
	if (!strncmp(line, "note: ", 6) || je.pending) {
		je.last = false;
		return;
	}
	/* a name's bytes that are not UTF-8 cannot be a JSON string as they are */
	if (!set_detail(line)) {
		free(je.detail);
		je.detail = NULL;	/* said as "(out of memory)" */
	}
	snprintf(je.code, sizeof(je.code), "failed");
	je.http_status = 0;
	je.pending = je.last = true;
}

void cli_json_amend(const char *code, const char *detail, long http_status)
{
	if (!je.on || !je.pending || !je.last)
		return;
	snprintf(je.code, sizeof(je.code), "%s", code);
	je.http_status = http_status;
	if (detail)
		set_detail(detail);	/* else the line said stays */
}

/*
 * A local failure's word (docs/API.md, "The CLI's own errors"), from the
 * errno of a local file's open, read or write: the daemon's words where
 * they mean the same (not_found, forbidden, too_large, no_space), so a
 * program that handles the daemon's "not_found" handles a local one too;
 * "http_status" is absent from a local one.  Any other errno is "io".
 */
const char *cli_errno_code(int err)
{
	switch (err < 0 ? -err : err) {
	case ENOENT:
	case ENOTDIR:
		return "not_found";
	case EACCES:
	case EPERM:
	case EROFS:
	case ELOOP:
	case ETXTBSY:
		return "forbidden";
	case EFBIG:
		return "too_large";
	case ENOSPC:
	case EDQUOT:
		return "no_space";
	case EISDIR:
		return "not_supported";
	default:
		return "io";
	}
}

void cli_json_code(const char *code)
{
	cli_json_amend(code, NULL, 0);
}

void cli_json_errno(int err)
{
	cli_json_amend(cli_errno_code(err), NULL, 0);
}

void cli_json_policy_errno(int err)
{
	switch (err < 0 ? -err : err) {
	case ENOENT:
	case ENOTDIR:
	case EACCES:
	case EPERM:
	case ELOOP:
	case EISDIR:
	case EFBIG:
	case EIO:
		cli_json_errno(err);	/* the file, not what it says */
		break;
	default:
		cli_json_code("policy");
	}
}

void cli_json_printed(void)
{
	je.printed = true;
}

int cli_json_flush(void)
{
	json_t *o;
	int r;

	if (!je.on || !je.pending)
		return 0;
	je.pending = je.last = false;
	o = json_pack("{s:s, s:s}", "error", je.code, "detail",
		      je.detail ? je.detail : "(out of memory)");
	if (o && je.http_status &&
	    json_object_set_new(o, "http_status", json_integer(je.http_status)) < 0) {
		json_decref(o);
		o = NULL;
	}
	if (!o)
		return out_of_memory("building the JSON error");
	r = print_json(o);
	json_decref(o);
	if (!r)
		fflush(stdout);
	return r;
}

int cli_json_end(int code)
{
	if (code && !je.printed && cli_json_flush() == 0)
		fflush(stdout);
	return code;
}
