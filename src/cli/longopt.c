/*
 * longopt.c - long options spelled whole.
 *
 * getopt_long takes any unambiguous prefix of a long option: "--pid host"
 * was read as --pids host (and refused for a count, naming limits.pids),
 * "--mem 1G" as --memory 1G.  A sandbox's command line is often written
 * from docker's, whose options share corral's first letters, and a
 * prefix that happens to be unambiguous today becomes another option
 * when one is added: corral takes its long options only whole.
 */
#include "cli.h"

#include <getopt.h>
#include <string.h>

const char *option_abbreviated(char **argv, const struct option *opts, int idx)
{
	const char *typed;
	size_t n;

	if (idx < 0 || optind < 1)
		return NULL;	/* a short option: getopt set no index */
	typed = argv[optind - 1];
	/* "--memory 1G": the value is the element, the option the one before */
	if (optarg && optarg == argv[optind - 1] && optind >= 2)
		typed = argv[optind - 2];
	if (strncmp(typed, "--", 2) != 0)
		return NULL;
	n = strcspn(typed + 2, "=");
	if (n == strlen(opts[idx].name) && !strncmp(typed + 2, opts[idx].name, n))
		return NULL;
	return typed;
}

void say_abbreviated(const char *verb, const char *typed, const char *name)
{
	const char *hint = docker_flag_hint(verb, typed);
	size_t n = strcspn(typed, "=");

	if (hint)
		cli_error("unknown option \"%.*s\": %s; see `corral %s --help`",
			  (int)n, typed, hint, verb);
	else
		cli_error("unknown option \"%.*s\": long options are spelled whole "
			  "(--%s?); see `corral %s --help`", (int)n, typed, name, verb);
	cli_json_amend("usage", NULL, 0);
}

/*
 * "--image -- true", "--tool-call -- ls": a long option whose value was
 * left out takes the "--" that ends the options as its value, and the
 * command word after it is then read as the command.  A value of "--"
 * is never meant (an image, a path, a name, a duration); the error
 * should be the missing value, not "image name \"--\": bad component".
 */
bool value_is_dashes(char **argv, int idx)
{
	return idx >= 0 && optarg && optind >= 1 && optarg == argv[optind - 1] &&
	       !strcmp(optarg, "--");
}
