/*
 * serve.c - corral serve: the daemon's command line, and the defaults
 * docs/API.md gives its paths; daemon_run() (src/daemon) does the rest.
 */
#include "cli.h"
#include "../daemon/daemon.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char help[] =
"Usage: corral serve [--socket PATH] [--listen HOST:PORT --token-file FILE]\n"
"                    [--state-dir DIR] [--max-sandboxes N] [--pool N]\n"
"                    [--snapshot-budget SIZE]\n"
"\n"
"Run the corral daemon: it creates sandboxes that live across many tool\n"
"calls, runs calls in them, freezes them when idle, and supervises every\n"
"one of them (events, abort criteria, halts).  The API is HTTP/1.1 with\n"
"JSON bodies, described in docs/API.md; `corral create`, `exec`, `cp`,\n"
"`pause`, `resume`, `halt`, `rm`, `ls`, `logs` and `events` are its clients.\n"
"\n"
"Options:\n"
"  --socket PATH       the unix socket to listen on (mode 0600).  Default:\n"
"                      /run/corral/corral.sock as root, else\n"
"                      $XDG_RUNTIME_DIR/corral.sock\n"
"  --listen HOST:PORT  also listen on TCP; every request must then carry\n"
"                      \"Authorization: Bearer TOKEN\"\n"
"  --token-file FILE   the token for --listen (its first line); required\n"
"                      with --listen\n"
"  --state-dir DIR     audit.jsonl (every event of every sandbox, one hash\n"
"                      chain), the lock and one file per live sandbox.\n"
"                      Default: /var/lib/corral as root, else\n"
"                      $XDG_STATE_HOME/corral (~/.local/state/corral)\n"
"  --max-sandboxes N   refuse creates beyond N live sandboxes (default 1000)\n"
"  --pool N            keep N sandboxes of the default policy built ahead,\n"
"                      handed out by creates that ask for nothing else\n"
"                      (default 0)\n"
"  --snapshot-budget SIZE  what all snapshots (POST .../snapshot) may take\n"
"                      in the state directory, e.g. 512M, 4G (default 1G);\n"
"                      a snapshot past it is refused (507)\n"
"  -h, --help          this text\n"
"\n"
"SIGTERM or SIGINT: every sandbox is destroyed, the socket removed, exit 0.\n"
"If the daemon is killed, its sandboxes die with it; the next start with\n"
"the same state directory records them as lost and removes what is left.\n"
"\n"
"Exit status: 0 after a clean stop, 2 on a usage error, 125 when the\n"
"daemon cannot start (the message names the path or value at fault).\n"
"\n"
"Example:\n"
"  corral serve --socket /tmp/corral.sock --state-dir /tmp/corral-state &\n"
"  curl --unix-socket /tmp/corral.sock -X POST localhost/v1/sandboxes\n";

/*
 * root_path as root; else leaf under $env, or under $fallback_env/
 * fallback_sub; NULL when neither is an absolute path (or out of memory).
 */
static char *default_path(const char *root_path, const char *env,
			  const char *fallback_env, const char *fallback_sub,
			  const char *leaf)
{
	const char *base = getenv(env);
	char *p = NULL;

	if (geteuid() == 0)
		return strdup(root_path);
	if (base && base[0] == '/') {
		if (asprintf(&p, "%s/%s", base, leaf) < 0)
			return NULL;
		return p;
	}
	base = fallback_env ? getenv(fallback_env) : NULL;
	if (!base || base[0] != '/')
		return NULL;
	if (asprintf(&p, "%s/%s/%s", base, fallback_sub, leaf) < 0)
		return NULL;
	return p;
}

struct serve_args {
	struct daemon_opts o;
	char *socket_path, *state_dir;	/* ours, from --socket or the defaults */
};

static int parse_number(int c, const char *arg, size_t *out)
{
	char *end;
	long v = strtol(arg, &end, 10);

	/* --max-sandboxes from 1, --pool from 0 */
	if (*end || v < (c == 'm') || v > 100000) {
		cli_error("--%s: expected a number %d to 100000 (got \"%s\")",
			  c == 'm' ? "max-sandboxes" : "pool", c == 'm', arg);
		return 2;
	}
	*out = v;
	return 0;
}

/* 0 to go on, 1 when --help was shown, or an exit status. */
static int parse_args(struct serve_args *a, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "listen", required_argument, NULL, 'l' },
		{ "token-file", required_argument, NULL, 't' },
		{ "state-dir", required_argument, NULL, 'd' },
		{ "max-sandboxes", required_argument, NULL, 'm' },
		{ "pool", required_argument, NULL, 'p' },
		{ "snapshot-budget", required_argument, NULL, 'B' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c, code;

	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			free(a->socket_path);
			a->socket_path = strdup(optarg);
			break;
		case 'l':
			a->o.listen = optarg;
			break;
		case 't':
			a->o.token_file = optarg;
			break;
		case 'd':
			free(a->state_dir);
			a->state_dir = strdup(optarg);
			break;
		case 'm':
		case 'p':
			code = parse_number(c, optarg, c == 'm' ? &a->o.max_sandboxes :
					    &a->o.pool_size);
			if (code)
				return code;
			break;
		case 'B': {
			struct corral_err err = { 0 };

			if (corral_parse_size(optarg, &a->o.snapshot_bytes, &err) < 0 ||
			    !a->o.snapshot_bytes) {
				cli_error("--snapshot-budget: %s", err.msg[0] ? err.msg :
					  "must be more than 0");
				return 2;
			}
			break;
		}
		case 'h':
			fputs(help, stdout);
			return 1;
		default:
			fputs(help, stderr);
			return 2;
		}
	}
	if (optind < argc) {
		cli_error("serve: unexpected argument \"%s\"", argv[optind]);
		return 2;
	}
	if (a->o.listen && !a->o.token_file) {
		cli_error("--listen needs --token-file: the API is never open on TCP "
			  "without a token");
		return 2;
	}
	return 0;
}

/* Where the socket and the state go when no option says: as docs/API.md. */
static int default_paths(struct serve_args *a)
{
	if (!a->socket_path)
		a->socket_path = default_path("/run/corral/corral.sock",
					      "XDG_RUNTIME_DIR", NULL, NULL,
					      "corral.sock");
	if (!a->state_dir)
		a->state_dir = default_path("/var/lib/corral", "XDG_STATE_HOME",
					    "HOME", ".local/state", "corral");
	if (!a->socket_path || !a->state_dir) {
		cli_error("no %s: set %s or pass %s", !a->socket_path ? "socket path" :
			  "state directory", !a->socket_path ? "XDG_RUNTIME_DIR" :
			  "HOME", !a->socket_path ? "--socket" : "--state-dir");
		return 2;
	}
	a->o.socket_path = a->socket_path;
	a->o.state_dir = a->state_dir;
	return 0;
}

int cmd_serve(int argc, char **argv)
{
	struct serve_args a = { .o = { .max_sandboxes = 1000 } };
	struct corral_err err = { 0 };
	int code;

	code = parse_args(&a, argc, argv);
	if (!code)
		code = default_paths(&a);
	if (!code && daemon_run(&a.o, &err) < 0) {
		cli_error("%s", err.msg);
		code = EXIT_CORRAL;
	}
	if (code == 1)		/* --help */
		code = 0;
	free(a.socket_path);
	free(a.state_dir);
	return code;
}
