/* policy.c - corral policy check FILE. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char policy_usage[] =
"Usage: corral policy check FILE...\n"
"\n"
"Validate policy files as `corral run --policy` would load them: unknown\n"
"keys, wrong types, bad sizes or durations and impossible values are errors\n"
"that name the key, the value and FILE:LINE:COLUMN.  Exit 0 if every file\n"
"is valid, 1 otherwise.  A valid file whose values do not fit this host\n"
"(limits.open_files x limits.pids against its file table) is still valid,\n"
"as it may be run elsewhere: what a sandbox's start here would refuse is\n"
"said on stderr.\n"
"\n"
"Host paths (filesystem.workspace, ro, rw) must be absolute: a policy is\n"
"read relative to no directory, not even its file's; corral run's\n"
"--workspace, --ro and --rw take a relative one from the working directory.\n"
"A size or a duration with its unit is a string: \"memory\": \"1G\",\n"
"\"timeout\": \"30s\".\n"
"\n"
"Exit status: 0 every FILE is valid; 1 one is not (or cannot be read);\n"
"2 bad usage.\n"
"\n"
"Example:\n"
"  corral policy check policies/offline.json my-policy.json\n"
"  policies/offline.json: ok\n"
"  my-policy.json:3:15: limits.memory: not a size, expected a number with\n"
"  an optional K/M/G/T suffix (got \"1 GB\")\n";

/*
 * "FILE" WORDS "TEXT", FILE and TEXT as printable() shows text: an error
 * quotes the file's value, which the loader gives back with U+202E,
 * U+2028 and zero-width characters as they were ("got \"<RLO>gnp.sh\""),
 * and a project may ship the policy its README says to check.
 */
static void say(FILE *f, const char *file, const char *words, const char *text)
{
	char *a = printable(file, strlen(file)), *b = printable(text, strlen(text));

	fprintf(f, "%s%s%s\n", a ? a : "(out of memory)", words, b ? b : "(out of memory)");
	free(a);
	free(b);
}

int cmd_policy(int argc, char **argv)
{
	int bad = 0;

	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		fputs(policy_usage, stdout);
		return 0;
	}
	if (argc < 2) {
		fputs(policy_usage, stderr);
		return 2;
	}
	/* say what was wrong, not only the usage: `policy lint`, `policy check` */
	if (strcmp(argv[1], "check")) {
		cli_error("policy: unknown subcommand \"%s\"; the one there is: corral policy check FILE...",
			  argv[1]);
		return 2;
	}
	/*
	 * An option is not a FILE: `policy check --json x` said "--json: No
	 * such file or directory", and `policy check --help` the same.  A
	 * FILE that begins with "-" comes after "--".
	 */
	for (int i = 2; i < argc && strcmp(argv[i], "--"); i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(policy_usage, stdout);
			return 0;
		}
		if (argv[i][0] == '-') {
			cli_error("policy check: unknown option \"%s\" (a FILE that begins with "
				  "\"-\" goes after \"--\"); see `corral policy --help`", argv[i]);
			return 2;
		}
	}
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--")) {
			memmove(argv + i, argv + i + 1, sizeof(*argv) * (size_t)(argc - i));
			argc--;
			break;
		}
	}
	if (argc < 3) {
		cli_error("policy check: no FILE given; usage: corral policy check FILE...");
		return 2;
	}
	for (int i = 2; i < argc; i++) {
		struct corral_policy p;
		struct corral_err err = { 0 };

		corral_policy_init(&p);
		if (corral_policy_load_file(&p, argv[i], &err) < 0) {
			say(stderr, "", "", err.msg);
			bad = 1;
		} else {
			say(stdout, argv[i], ": ok", "");
			if (corral_policy_check_host(&p, &err) < 0)
				say(stderr, argv[i], ": not on this host: ", err.msg);
		}
		corral_policy_free(&p);
	}
	return bad;
}
