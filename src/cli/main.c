/* main.c - corral: dispatch to a verb, from one table. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

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
"  mcp [OPTIONS]                   a Model Context Protocol server on stdio\n"
"  diff ID [PATH] [--patch]        what sandbox ID changed in its workspace\n"
"  export ID --to DIR|--apply|--patch FILE  bring those changes out\n"
"  snapshot ID                     keep sandbox ID's workspace, to fork from\n"
"  oci COMMAND ...                 an OCI runtime for containerd and podman\n"
"  version [--json]                print the version\n"
"\n"
"`corral COMMAND --help` (or `corral help COMMAND`) describes each command.\n";

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

/*
 * SIGCHLD ignored is handed down through exec (a caller's harness, a
 * Python that set it, `nohup`-like wrappers): the kernel then reaps our
 * children itself.  corral-init, a clone of this process, never learned
 * how its command ended and every run waited forever, deaf to SIGTERM
 * (forwarded to a command already gone).  Our children are ours to wait
 * for.
 */
static void own_children(void)
{
	struct sigaction dfl = { .sa_handler = SIG_DFL };

	sigemptyset(&dfl.sa_mask);
	if (sigaction(SIGCHLD, &dfl, NULL) < 0) {
		cli_error("cannot set SIGCHLD to its default action: %s",
			  strerror(errno));
		exit(125);
	}
}

/*
 * A caller's RLIMIT_FSIZE (ulimit -f in a CI job or a cron script) must
 * not kill corral: at SIG_DFL, a write past it was SIGXFSZ, which ended
 * the supervisor mid-relay of stdout to a file and mid-write of --patch's
 * FILE (153, as if the command's own, and nothing said).  Ignored, that
 * write fails with EFBIG, which each writer reports as it does ENOSPC.
 * The command gets SIG_DFL back (exec_command resets every signal).
 */
static void no_death_by_file_size(void)
{
	struct sigaction ign = { .sa_handler = SIG_IGN };

	sigemptyset(&ign.sa_mask);
	if (sigaction(SIGXFSZ, &ign, NULL) < 0) {
		cli_error("cannot ignore SIGXFSZ: %s", strerror(errno));
		exit(125);
	}
}

/*
 * A blocked mask is handed down through exec too (a harness that blocked
 * SIGTERM around its fork, a thread's mask): `corral serve` then never
 * got systemd's SIGTERM, nor SIGINT, and could only be killed, its
 * sandboxes with it.  Each verb blocks what it reads from a signalfd
 * itself.
 */
static void unblock_inherited(void)
{
	sigset_t none;

	sigemptyset(&none);
	if (sigprocmask(SIG_SETMASK, &none, NULL) < 0) {
		cli_error("cannot unblock the signals corral was started with: %s",
			  strerror(errno));
		exit(125);
	}
}

/*
 * A caller's fd 0, 1 or 2 that is closed must stay closed to our reads
 * and writes, but not free: the first socket or pipe made took its
 * number.  `corral create >&-` wrote the new sandbox's id into its own
 * connection to the daemon and exited 0 (a sandbox no one can name);
 * the daemon's log went into whatever had fd 2.  An O_PATH fd of
 * /dev/null holds the number: a read or write there fails with EBADF,
 * as on the closed fd (corral run still gives the command /dev/null).
 */
static void hold_closed_stdio(void)
{
	for (int i = 0; i < 3; i++) {
		int fd;

		if (fcntl(i, F_GETFD) >= 0 || errno != EBADF)
			continue;
		/* the numbers below are taken: this is i */
		fd = open("/dev/null", O_PATH | O_CLOEXEC);
		if (fd != i) {
			cli_error("cannot hold closed fd %d with /dev/null: %s", i,
				  fd < 0 ? strerror(errno) : "another number came");
			exit(125);
		}
	}
}

static const char version_usage[] =
"Usage: corral version [--json]\n"
"\n"
"Print corral's version: \"corral VERSION\", or {\"version\": VERSION}\n"
"with --json.\n"
"\n"
"Exit status: 0 printed; 2 bad usage; 125 stdout could not be written.\n";

/*
 * Anything else on the line is refused, never ignored: `corral version
 * --json` printed the text line, and a program that asked for JSON got
 * none.
 */
static int cmd_version(int argc, char **argv)
{
	bool json = false;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(version_usage, stdout);
			return 0;
		}
		if (!strcmp(argv[i], "--json")) {
			json = true;
			cli_json_on();
		}
	}
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json")) {
			cli_error("version takes only --json (got \"%s\"); see `corral version --help`",
				  argv[i]);
			cli_json_amend("usage", NULL, 0);
			return 2;
		}
	}
	if (json)
		printf("{\"version\":\"%s\"}\n", CORRAL_VERSION);
	else
		printf("corral %s\n", CORRAL_VERSION);
	if (fflush(stdout) == EOF || ferror(stdout)) {
		cli_error("writing to standard output: %s", strerror(errno));
		return EXIT_CORRAL;
	}
	if (json)
		cli_json_printed();
	return 0;
}

static int cmd_help(int argc, char **argv);


/* Every verb, found by its name; each lives in a file of its own. */
static const struct command {
	const char *name;
	int (*fn)(int argc, char **argv);
} commands[] = {
	{ "run", cmd_run },
	{ "doctor", cmd_doctor },
	{ "policy", cmd_policy },
	{ "audit", cmd_audit },
	{ "serve", cmd_serve },
	{ "create", cmd_create },
	{ "exec", cmd_exec },
	{ "cp", cmd_cp },
	{ "pause", cmd_pause },
	{ "resume", cmd_resume },
	{ "halt", cmd_halt },
	{ "rm", cmd_rm },
	{ "ls", cmd_ls },
	{ "logs", cmd_logs },
	{ "events", cmd_events },
	{ "image", cmd_image },
	{ "mcp", cmd_mcp },
	{ "diff", cmd_diff },
	{ "export", cmd_export },
	{ "snapshot", cmd_snapshot },
	{ "oci", cmd_oci },
	{ "version", cmd_version },
	{ "--version", cmd_version },
	{ "help", cmd_help },
	{ "--help", cmd_help },
	{ "-h", cmd_help },
};

static const struct command *find_command(const char *name)
{
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(name, commands[i].name))
			return &commands[i];
	return NULL;
}

/*
 * `corral help VERB` is `corral VERB --help`, as git and docker take it
 * (it printed this list, and the reader had to guess the other spelling).
 */
static int cmd_help(int argc, char **argv)
{
	const struct command *c;
	char *verb_argv[3];

	if (argc < 2 || !strcmp(argv[1], "help") || argv[1][0] == '-') {
		fputs(usage, stdout);
		return 0;
	}
	/* `help run exec` showed run's and dropped the rest */
	if (argc > 2) {
		cli_error("help takes one command (got \"%s\" after \"%s\"); see `corral --help`",
			  argv[2], argv[1]);
		return 2;
	}
	c = find_command(argv[1]);
	if (!c) {
		cli_error("help: unknown command \"%s\"%s%s; see `corral --help`", argv[1],
			  docker_verb_hint(argv[1]) ? ": " : "",
			  docker_verb_hint(argv[1]) ?: "");
		return 2;
	}
	verb_argv[0] = argv[1];
	verb_argv[1] = "--help";
	verb_argv[2] = NULL;
	return c->fn(2, verb_argv);
}

/*
 * A verb that succeeded but whose output stdout did not take (a full
 * disk, `corral doctor > /dev/full`) exited 0 with the output lost:
 * doctor, policy check, audit verify and every --help wrote with printf
 * and never looked.  Verbs that check stdout themselves (ls, version)
 * say it and return 125 already, as `corral run` does for its relay.
 */
static int stdout_taken(int code)
{
	bool flushed;

	if (code != 0)
		return code;
	flushed = fflush(stdout) == 0;
	if (flushed && !ferror(stdout))
		return 0;
	/* errno is the flush's; after an earlier failed write it is stale */
	cli_error("writing to standard output: %s",
		  flushed ? "an earlier write failed" : strerror(errno));
	return EXIT_CORRAL;
}

static const char *basename_of(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

int main(int argc, char **argv)
{
	const struct command *cmd;

	hold_closed_stdio();
	corral_memory_init();
	raise_nofile();
	own_children();
	no_death_by_file_size();
	unblock_inherited();
	/* containerd's BinaryName names one program: corral-oci is `corral oci` */
	if (!strcmp(basename_of(argv[0]), "corral-oci"))
		return cmd_oci(argc, argv);
	if (argc < 2) {
		fputs(usage, stderr);
		return 2;
	}
	/*
	 * `corral run` is over when its command is: with the streams flushed,
	 * all exit() has left to do is the libraries' destructors, which only
	 * page their code in (six page faults, about 0.1 ms here, issue 17).
	 */
#ifndef __SANITIZE_ADDRESS__	/* LeakSanitizer checks from exit()'s handlers */
	if (!strcmp(argv[1], "run")) {
		int r = stdout_taken(cli_json_end(cmd_run(argc - 1, argv + 1)));

		fflush(NULL);
		_exit(r);
	}
#endif
	cmd = find_command(argv[1]);
	/* mcp's stdout is the protocol's: it says a broken one, and its 0 stays */
	if (cmd && cmd->fn == cmd_mcp)
		return cli_json_end(cmd->fn(argc - 1, argv + 1));
	if (cmd)
		return stdout_taken(cli_json_end(cmd->fn(argc - 1, argv + 1)));
	if (docker_verb_hint(argv[1]))
		cli_error("unknown command \"%s\": %s; see `corral --help`", argv[1],
			  docker_verb_hint(argv[1]));
	else
		cli_error("unknown command \"%s\"; see `corral --help`", argv[1]);
	return 2;
}
