/* audit.c - corral audit verify|show: the events file as evidence. */
#include "cli.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char audit_usage[] =
"Usage: corral audit verify FILE\n"
"       corral audit show FILE [--sandbox ID] [--call ID] [--type TYPE]\n"
"\n"
"Check and read an events file, as `corral run --events FILE` writes it.\n"
"The supervisor, outside every sandbox, appends one JSON object a line;\n"
"nothing inside a sandbox can reach the file.  Each line ends with the key\n"
"\"prev\": the SHA-256 (lowercase hex) of the line before it, byte for byte\n"
"as it stands in the file without its newline; the first line has 64 zeros.\n"
"A run that appends to an existing file continues its chain.\n"
"\n"
"  verify FILE   check the chain from the first line to the last.  Prints\n"
"                \"FILE: ok, N lines verified; head HASH\" and exits 0, or\n"
"                names the first line that breaks it and why, and exits 1:\n"
"                  line 7: prev does not match the hash of line 6 (edited,\n"
"                  deleted or reordered)\n"
"                An edit shows at the line edited or the one after it; a\n"
"                deleted or moved line at the line after the gap.  A last\n"
"                line without a newline (a write cut short by a crash) is\n"
"                reported and not checked; the lines before it are.  Lines\n"
"                longer than 1 MiB are bad lines.  Lines the writer could\n"
"                not write (a full disk) leave the chain whole: the line\n"
"                written next, \"log.gap\", says them, and ok counts those\n"
"                (\"; 1 gap said (log.gap, the first: line 9): 3 event lines\n"
"                could not be written\").\n"
"  show FILE     print the events as a timeline, one line each:\n"
"                  HH:MM:SS.mmm  SEQ  SANDBOX  CALL  TYPE  HOST:PORT\n"
"                  KEY=VALUE... / REASON\n"
"                with \"-- YYYY-MM-DD\" (UTC) whenever the day changes.  Lines\n"
"                that are not events are named (\"-- line 9: ...\"), never\n"
"                dropped in silence; bytes outside printable ASCII are\n"
"                shown as \\xNN.  show does not verify: run verify first.\n"
"\n"
"Options of show (together, an event must match all of them):\n"
"  --sandbox ID  only events of the sandbox ID\n"
"  --call ID     only events of the tool call ID\n"
"  --type TYPE   only events of type TYPE (\"egress.denied\"); a TYPE without\n"
"                a dot also matches its subtypes (\"egress\": egress.*)\n"
"                and a TYPE its summaries (TYPE.summary: repeats counted)\n"
"  -h, --help    this text\n"
"\n"
"What the chain cannot show by itself: lines cut off the end of the file,\n"
"and an edit of the last line outside its \"prev\".  Keep the head HASH that\n"
"verify prints somewhere the sandboxes cannot write, and compare.  One\n"
"supervisor writes a file at a time: two runs appending to the same file\n"
"at once break its chain.\n"
"\n"
"Exit status: 0 the chain holds (verify) or the timeline was printed\n"
"(show); 1 the chain is broken; 2 bad usage, or FILE cannot be read.\n"
"\n"
"Examples:\n"
"  corral run --net proxy --allow pypi.org --events run.log -- pip download x\n"
"  corral audit verify run.log\n"
"  corral audit show run.log --type egress.denied\n";

static bool is_help(const char *arg)
{
	return !strcmp(arg, "--help") || !strcmp(arg, "-h");
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("corral: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("; see `corral audit --help`\n", stderr);
	return 2;
}

static int audit_verify_cmd(int argc, char **argv)
{
	struct corral_err err = { 0 };
	struct corral_audit_report r;
	char *file, *why;
	int code = 0;

	if (argc == 2 && is_help(argv[1])) {
		fputs(audit_usage, stdout);
		return 0;
	}
	/* an option is not a FILE: "--bogus: No such file or directory" was said */
	if (argc == 3 && !strcmp(argv[1], "--"))
		argv++, argc--;
	else if (argc == 2 && argv[1][0] == '-' && argv[1][1])
		return usage_error("audit verify: unknown option \"%s\" (a FILE that "
				   "begins with \"-\" goes after \"--\")", argv[1]);
	if (argc != 2)
		return usage_error("audit verify takes one FILE");
	if (corral_audit_verify(argv[1], &r, &err) < 0) {
		cli_error("%s", err.msg);
		return 2;
	}
	/*
	 * The reason may quote the bad line (jansson's "near '...'", up to
	 * 20 bytes): a tampered log is what this reads, and its U+009D
	 * "52;c;..." U+009C set the operator's clipboard, U+009B "2J" cleared
	 * the screen.  Shown as printable() shows text, the FILE too.
	 */
	file = printable(argv[1], strlen(argv[1]));
	why = printable(r.reason, strlen(r.reason));
	if (!file || !why)
		code = (cli_error("out of memory saying the verdict"), EXIT_CORRAL);
	else if (r.bad_line)
		fprintf(stderr, "%s: %s\n", file, why);
	else
		printf("%s: ok, %s; head %s\n", file, why, r.head);
	free(file);
	free(why);
	return code ? code : r.bad_line ? 1 : 0;
}

enum { OPT_SANDBOX = 256, OPT_CALL, OPT_TYPE };

static const struct option show_options[] = {
	{ "sandbox", required_argument, NULL, OPT_SANDBOX },
	{ "call", required_argument, NULL, OPT_CALL },
	{ "type", required_argument, NULL, OPT_TYPE },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static int audit_show_cmd(int argc, char **argv)
{
	struct corral_err err = { 0 };
	struct corral_audit_filter f = { 0 };
	int opt, idx = -1;
	const char *prefix;

	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "h", show_options, &idx)) != -1) {
		prefix = option_abbreviated(argv, show_options, idx);
		if (prefix) {
			say_abbreviated("audit show", prefix, show_options[idx].name);
			return 2;
		}
		idx = -1;
		switch (opt) {
		case OPT_SANDBOX:
			f.sandbox = optarg;
			break;
		case OPT_CALL:
			f.call = optarg;
			break;
		case OPT_TYPE:
			f.type = optarg;
			break;
		case 'h':
			fputs(audit_usage, stdout);
			return 0;
		default:
			return usage_error("audit show: unknown or incomplete "
					   "option \"%s\"", argv[optind - 1]);
		}
	}
	if (argc - optind != 1)
		return usage_error("audit show takes one FILE");
	if (corral_audit_show(argv[optind], &f, stdout, &err) < 0) {
		cli_error("%s", err.msg);
		return 2;
	}
	return 0;
}

int cmd_audit(int argc, char **argv)
{
	if (argc >= 2 && is_help(argv[1])) {
		fputs(audit_usage, stdout);
		return 0;
	}
	if (argc >= 2 && !strcmp(argv[1], "verify"))
		return audit_verify_cmd(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "show"))
		return audit_show_cmd(argc - 1, argv + 1);
	if (argc < 2) {
		fputs(audit_usage, stderr);
		return 2;
	}
	return usage_error("audit: unknown subcommand \"%s\"; use verify or show",
			   argv[1]);
}
