/* main.c - corral: dispatch to a verb. */
#include "cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

static const char usage[] =
"Usage: corral COMMAND [OPTIONS]\n"
"\n"
"Run code an AI agent wrote behind a boundary the Linux kernel enforces.\n"
"\n"
"Commands:\n"
"  run [OPTIONS] -- CMD [ARG...]   run one command in a fresh sandbox\n"
"  doctor                          what this host's kernel offers, and which\n"
"                                  layers the default policy gets\n"
"  policy check FILE               validate a policy file\n"
"  audit verify FILE               check the hash chain of an events file\n"
"  audit show FILE [FILTERS]       an events file as a readable timeline\n"
"  serve [OPTIONS]                 the daemon: sandboxes that live across\n"
"                                  many calls, over an HTTP API (docs/API.md)\n"
"  create [OPTIONS]                a sandbox of the daemon's; prints its id\n"
"  exec [OPTIONS] ID -- CMD...     run a command in sandbox ID\n"
"  cp SRC DST                      copy a file in or out (ID:/PATH)\n"
"  pause ID, resume ID             freeze sandbox ID until resumed\n"
"  halt ID [--reason TEXT]         stop sandbox ID for good, keep evidence\n"
"  rm ID...                        destroy sandboxes\n"
"  ls                              list the daemon's sandboxes\n"
"  logs ID                         background processes and their output\n"
"  events [ID] [--follow]          the daemon's events, as JSON lines\n"
"  image import|ls|rm|inspect      OCI images kept on this machine\n"
"  version                         print the version\n"
"\n"
"`corral COMMAND --help` describes each command.\n";

void cli_error(const char *fmt, ...)
{
	va_list ap;

	fputs("corral: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/*
 * The supervisor holds six descriptors for every tunnel it relays (two
 * sockets, two pipes): take the whole hard limit, not the soft default.
 */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

int main(int argc, char **argv)
{
	raise_nofile();
	if (argc < 2) {
		fputs(usage, stderr);
		return 2;
	}
	if (!strcmp(argv[1], "run"))
		return cmd_run(argc - 1, argv + 1);
	if (!strcmp(argv[1], "doctor"))
		return cmd_doctor(argc - 1, argv + 1);
	if (!strcmp(argv[1], "policy"))
		return cmd_policy(argc - 1, argv + 1);
	if (!strcmp(argv[1], "audit"))
		return cmd_audit(argc - 1, argv + 1);
	if (!strcmp(argv[1], "serve"))
		return cmd_serve(argc - 1, argv + 1);
	if (!strcmp(argv[1], "create"))
		return cmd_create(argc - 1, argv + 1);
	if (!strcmp(argv[1], "exec"))
		return cmd_exec(argc - 1, argv + 1);
	if (!strcmp(argv[1], "cp"))
		return cmd_cp(argc - 1, argv + 1);
	if (!strcmp(argv[1], "pause"))
		return cmd_pause(argc - 1, argv + 1);
	if (!strcmp(argv[1], "resume"))
		return cmd_resume(argc - 1, argv + 1);
	if (!strcmp(argv[1], "halt"))
		return cmd_halt(argc - 1, argv + 1);
	if (!strcmp(argv[1], "rm"))
		return cmd_rm(argc - 1, argv + 1);
	if (!strcmp(argv[1], "ls"))
		return cmd_ls(argc - 1, argv + 1);
	if (!strcmp(argv[1], "logs"))
		return cmd_logs(argc - 1, argv + 1);
	if (!strcmp(argv[1], "events"))
		return cmd_events(argc - 1, argv + 1);
	if (!strcmp(argv[1], "image"))
		return cmd_image(argc - 1, argv + 1);
	if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version")) {
		printf("corral %s\n", CORRAL_VERSION);
		return 0;
	}
	if (!strcmp(argv[1], "help") || !strcmp(argv[1], "--help") ||
	    !strcmp(argv[1], "-h")) {
		fputs(usage, stdout);
		return 0;
	}
	cli_error("unknown command \"%s\"; see `corral --help`", argv[1]);
	return 2;
}
