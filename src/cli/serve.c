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
"Usage: corral serve [--socket PATH] [--listen HOST:PORT --token-file FILE\n"
"                    [--tls-cert FILE --tls-key FILE [--tls-client-ca FILE]]]\n"
"                    [--state-dir DIR] [--policy FILE]\n"
"                    [--max-sandboxes N] [--max-sandboxes-per-peer N] [--pool N]\n"
"                    [--max-ttl SECONDS] [--max-idle-freeze SECONDS]\n"
"                    [--max-connections N] [--max-connections-per-peer N]\n"
"                    [--max-leases N] [--lease-timeout SECONDS]\n"
"                    [--tls-handshake-rate N]\n"
"                    [--header-timeout SECONDS] [--idle-timeout SECONDS]\n"
"                    [--tty-idle-timeout SECONDS]\n"
"                    [--allow-host-path PREFIX]... [--allow-env NAME]...\n"
"                    [--uid-range FROM-TO] [--allow-root-inside]\n"
"                    [--snapshot-budget SIZE] [--answer-memory SIZE]\n"
"\n"
"Run the corral daemon: it creates sandboxes that live across many tool\n"
"calls, runs calls in them, freezes them when idle, and supervises every\n"
"one of them (events, abort criteria, halts).  The API is HTTP/1.1 with\n"
"JSON bodies, described in docs/API.md; `corral create`, `exec`, `cp`,\n"
"`pause`, `resume`, `halt`, `rm`, `ls`, `logs`, `events`, `diff`, `export`\n"
"and `snapshot` are its clients.\n"
"\n"
"Options:\n"
"  --socket PATH       the unix socket to listen on (mode 0600).  Default:\n"
"                      /run/corral/corral.sock as root, else\n"
"                      $CORRAL_SOCKET (where the clients look first), else\n"
"                      $XDG_RUNTIME_DIR/corral.sock\n"
"  --listen HOST:PORT  also listen on TCP; every request must then carry\n"
"                      \"Authorization: Bearer TOKEN\".  An address other\n"
"                      than loopback (127.0.0.0/8, ::1) needs --tls-cert:\n"
"                      the token must not cross a network in clear\n"
"  --token-file FILE   the token for --listen (its first line); required\n"
"                      with --listen.  At least 16 characters (`openssl\n"
"                      rand -hex 32 > FILE`); a FILE its group or others\n"
"                      may read is warned about\n"
"  --tls-cert FILE     serve --listen over TLS (1.2 or later) with this PEM\n"
"                      certificate, its chain after it; clients give\n"
"                      https:// URLs (`corral ls --url https://HOST:PORT\n"
"                      --ca-file CA.pem`)\n"
"  --tls-key FILE      the certificate's PEM private key; refused if anyone\n"
"                      may read it\n"
"  --tls-client-ca FILE\n"
"                      also require a client certificate signed by this PEM\n"
"                      CA (mutual TLS): a handshake without one fails; the\n"
"                      token is still required.  Clients give --cert-file\n"
"                      and --key-file\n"
"  --state-dir DIR     audit.jsonl (every event of every sandbox, one hash\n"
"                      chain), the lock and one file per live sandbox.\n"
"                      Default: /var/lib/corral as root, else\n"
"                      $XDG_STATE_HOME/corral (~/.local/state/corral)\n"
"  --policy FILE       the operator's policy (the format of `corral run\n"
"                      --policy`): the base of every sandbox and the bound\n"
"                      of what any client may ask.  A create without a\n"
"                      policy gets it; a create's policy is laid over it\n"
"                      (objects key by key, anything else replaced) and may\n"
"                      narrow it, never widen it: more memory, pids, CPUs,\n"
"                      disk, output, connections, open files or time than\n"
"                      it gives (or none), a host not in its\n"
"                      network.allow, transparent off, one of its denials,\n"
"                      abort criteria, tripwires or export holds removed:\n"
"                      refused (403, naming the field, the bound and what\n"
"                      was asked), as is a call's timeout_seconds beyond\n"
"                      its limits.timeout.  Host paths, env.pass and\n"
"                      identity.user stay gated by --allow-host-path,\n"
"                      --allow-env and --allow-root-inside.  Without it\n"
"                      the built-in default (policies/default.json) is the\n"
"                      base, and the bound of a TCP client (anyone with\n"
"                      the token): no network, 2G, 1024 pids; a\n"
"                      unix-socket client (the daemon's user, or one it\n"
"                      let connect) is not bounded\n"
"  --max-sandboxes N   refuse creates beyond N live sandboxes (default 1000)\n"
"  --max-sandboxes-per-peer N\n"
"                      a TCP peer (an IPv4 address, an IPv6 /64) holds at\n"
"                      most N of them, dead ones until deleted; its next\n"
"                      create is refused (429) until it destroys one\n"
"                      (default 100; the unix socket's clients: only\n"
"                      --max-sandboxes)\n"
"  --max-ttl SECONDS   a TCP client's sandbox lives at most this long past\n"
"                      its create or its last keepalive: it gets this TTL\n"
"                      when it names none, and a longer one or 0 (none) is\n"
"                      refused (403) (default 86400, at most 2592000)\n"
"  --max-idle-freeze SECONDS\n"
"                      a TCP client's idle sandbox is frozen within this:\n"
"                      an idle_freeze_ms longer, or 0 (never), is refused\n"
"                      (403), and one naming none gets 2 s or this if\n"
"                      less (default 600)\n"
"  --pool N            keep N sandboxes of the --policy (else the default\n"
"                      one) built ahead, handed out by creates that ask for\n"
"                      nothing else (default 0)\n"
"  --max-connections N each listener stops accepting at N open connections\n"
"                      until one closes (default 256)\n"
"  --max-connections-per-peer N\n"
"                      a TCP peer's (an IPv4 address's, an IPv6 /64's)\n"
"                      further connections are closed at once (default 32)\n"
"  --max-leases N      open leases (POST /v1/leases: sandboxes destroyed when\n"
"                      their client's connection ends) at most (default 64)\n"
"  --lease-timeout SECONDS\n"
"                      a TCP lease holder not heard from this long (gone\n"
"                      without closing: powered off, cut off) has its lease\n"
"                      closed, and its sandboxes destroyed (default 120);\n"
"                      any other TCP client gone so while it waits for an\n"
"                      answer (an events follow) has its connection closed\n"
"  --tls-handshake-rate N\n"
"                      TLS handshakes a second a peer (an IPv4 address, an\n"
"                      IPv6 /64) may begin, a second's worth at once; more\n"
"                      are refused at their first message, before the\n"
"                      server's cryptography (default 200)\n"
"  --header-timeout SECONDS\n"
"                      a request head not complete this long after its first\n"
"                      byte closes the connection (default 10)\n"
"  --idle-timeout SECONDS\n"
"                      a connection with no request this long is closed\n"
"                      (default 60)\n"
"  --tty-idle-timeout SECONDS\n"
"                      a terminal session (an exec upgraded to corral-tty)\n"
"                      with no frame from its client, no output and no work\n"
"                      of its command (under 0.1 s of CPU) this long ends:\n"
"                      its call is killed, its result \"timeout\" (a\n"
"                      pause holds the clock); a client that takes none\n"
"                      of the output queued for it this long is closed\n"
"                      (default 900, at most 86400; for every client)\n"
"  --allow-host-path PREFIX\n"
"                      host paths under PREFIX (symlinks resolved) may be a\n"
"                      workspace or a bind, for any client.  Otherwise a\n"
"                      unix-socket client may use what it could read itself\n"
"                      (write, for an rw bind), a TCP client nothing.  /proc,\n"
"                      /sys, /dev, the state and socket directories: never\n"
"  --allow-env NAME    env.pass may copy the daemon's NAME for any client;\n"
"                      otherwise only for a unix-socket client that is the\n"
"                      daemon's user or root\n"
"  --uid-range FROM-TO as root: a workspace's or bind's owner within\n"
"                      FROM-TO is mapped to the agent (its files are the\n"
"                      agent's inside; never root for an rw bind), another\n"
"                      owner's files are nobody's to it and cannot be\n"
"                      changed (default: only 65534 is mapped; the result's\n"
"                      ids.note names the path).  Where no idmapped mount\n"
"                      can be had, the sandbox runs as that owner or 65534\n"
"  --allow-root-inside identity.user \"root\" may be asked for: uid 0 of the\n"
"                      sandbox's user namespace with a few file capabilities\n"
"                      (apt-get install on an image); refused (403) otherwise\n"
"  --snapshot-budget SIZE  what all snapshots (POST .../snapshot) may take\n"
"                      in the state directory, e.g. 512M, 4G (default 1G);\n"
"                      a snapshot past it is refused (507)\n"
"  --answer-memory SIZE  answers the daemon may hold for clients that have\n"
"                      not read them yet, all connections together (a file\n"
"                      or an archive is read whole before it is sent; the\n"
"                      default 256M): one that would pass it is refused\n"
"                      (503, Retry-After), so clients that never read\n"
"                      cannot fill the host's memory; request bodies\n"
"                      arriving are held to the same size apart (one\n"
"                      past it waits, unread); a TCP peer (address,\n"
"                      IPv6 /64) to half of either, the TCP\n"
"                      peers together to three quarters\n"
"  -h, --help          this text\n"
"\n"
"SIGTERM or SIGINT: every sandbox is destroyed, the socket removed, exit 0.\n"
"SIGHUP, with --tls-cert: the certificate, key and client CA are read again\n"
"from the same paths, with the same checks; new connections use them, open\n"
"ones keep the old.  If any fails, the old ones go on serving and the log\n"
"says why.  Without --tls-cert, SIGHUP is not caught (it ends the daemon).\n"
"If the daemon is killed, its sandboxes die with it; the next start with\n"
"the same state directory records them as lost and removes what is left.\n"
"\n"
"Exit status: 0 after a clean stop, 2 on a usage error, 125 when the\n"
"daemon cannot start (the message names the path or value at fault; a\n"
"--policy whose sandboxes this host could not start, its open_files x\n"
"pids past a quarter of fs.file-max, is one).\n"
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
	char **paths, **envs;		/* --allow-host-path, --allow-env */
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

/* The gate's limits: numbers from 1. */
static int parse_limit(const char *name, const char *arg, size_t max, size_t *out)
{
	char *end;
	long v = strtol(arg, &end, 10);

	if (*end || v < 1 || (size_t)v > max) {
		cli_error("--%s: expected a number 1 to %zu (got \"%s\")", name,
			  max, arg);
		return 2;
	}
	*out = v;
	return 0;
}

static int parse_seconds(const char *name, const char *arg, unsigned *out)
{
	size_t v;
	int code = parse_limit(name, arg, 86400, &v);

	if (!code)
		*out = v;
	return code;
}

static int push(char ***v, size_t *n, const char *s)
{
	char **nv = reallocarray(*v, *n + 1, sizeof(char *));

	if (!nv) {
		cli_error("out of memory");
		return 2;
	}
	nv[(*n)++] = (char *)s;
	*v = nv;
	return 0;
}

static int parse_uid_range(const char *arg, struct daemon_access *a)
{
	unsigned long lo, hi;
	char *end;

	lo = strtoul(arg, &end, 10);
	if (*end == '-')
		hi = strtoul(end + 1, &end, 10);
	else
		hi = lo;
	if (*end || !arg[0] || lo == 0 || lo > hi || hi >= 0xffffffffUL) {
		cli_error("--uid-range: expected FROM-TO, host uids from 1 (got \"%s\")",
			  arg);
		return 2;
	}
	a->uid_min = lo;
	a->uid_max = hi;
	a->uid_range = true;
	return 0;
}

/* 0 to go on, 1 when --help was shown, or an exit status. */
/* getopt's '?' (unknown) or ':' (no value), said as the other verbs say it */
static int bad_serve_option(int c, char **argv)
{
	if (c == ':')
		cli_error("serve: option \"%s\" needs a value; see `corral serve --help`",
			  argv[optind - 1]);
	else if (optopt > 0 && optopt < 256)
		cli_error("serve: unknown option \"-%c\"; see `corral serve --help`",
			  optopt);
	else
		cli_error("serve: unknown option \"%s\"; see `corral serve --help`",
			  argv[optind - 1]);
	return 2;
}

static int parse_args(struct serve_args *a, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "listen", required_argument, NULL, 'l' },
		{ "token-file", required_argument, NULL, 't' },
		{ "tls-cert", required_argument, NULL, 'c' },
		{ "tls-key", required_argument, NULL, 'k' },
		{ "tls-client-ca", required_argument, NULL, 'a' },
		{ "state-dir", required_argument, NULL, 'd' },
		{ "max-sandboxes", required_argument, NULL, 'm' },
		{ "max-sandboxes-per-peer", required_argument, NULL, 'S' },
		{ "max-ttl", required_argument, NULL, 'X' },
		{ "max-idle-freeze", required_argument, NULL, 'F' },
		{ "pool", required_argument, NULL, 'p' },
		{ "max-connections", required_argument, NULL, 'C' },
		{ "max-connections-per-peer", required_argument, NULL, 'P' },
		{ "max-leases", required_argument, NULL, 'L' },
		{ "header-timeout", required_argument, NULL, 'H' },
		{ "idle-timeout", required_argument, NULL, 'I' },
		{ "lease-timeout", required_argument, NULL, 'T' },
		{ "tty-idle-timeout", required_argument, NULL, 'W' },
		{ "tls-handshake-rate", required_argument, NULL, 'K' },
		{ "allow-host-path", required_argument, NULL, 'A' },
		{ "allow-env", required_argument, NULL, 'E' },
		{ "uid-range", required_argument, NULL, 'U' },
		{ "allow-root-inside", no_argument, NULL, 'R' },
		{ "snapshot-budget", required_argument, NULL, 'B' },
		{ "answer-memory", required_argument, NULL, 'M' },
		{ "policy", required_argument, NULL, 'Y' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c, code, idx = -1;
	const char *prefix;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:h", opts, &idx)) != -1) {
		prefix = option_abbreviated(argv, opts, idx);
		if (prefix) {
			say_abbreviated("serve", prefix, opts[idx].name);
			return 2;
		}
		idx = -1;
		switch (c) {
		case 's':
			free(a->socket_path);
			a->socket_path = strdup(optarg);
			break;
		case 'l':
			a->o.listen = optarg;
			break;
		case 'Y':
			a->o.policy_file = optarg;
			break;
		case 't':
			a->o.token_file = optarg;
			break;
		case 'c':
			a->o.tls_cert = optarg;
			break;
		case 'k':
			a->o.tls_key = optarg;
			break;
		case 'a':
			a->o.tls_client_ca = optarg;
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
		case 'C':
			code = parse_limit("max-connections", optarg, 100000,
					   &a->o.limits.max_connections);
			if (code)
				return code;
			break;
		case 'P':
			code = parse_limit("max-connections-per-peer", optarg, 100000,
					   &a->o.limits.max_per_peer);
			if (code)
				return code;
			break;
		case 'L':
			code = parse_limit("max-leases", optarg, 100000,
					   &a->o.limits.max_leases);
			if (code)
				return code;
			break;
		case 'S':
			code = parse_limit("max-sandboxes-per-peer", optarg, 100000,
					   &a->o.limits.max_sandboxes_per_peer);
			if (code)
				return code;
			break;
		case 'X':
		case 'F': {
			/* a create's own bounds: ttl_seconds 30 days, idle_freeze_ms a day */
			size_t v;

			code = parse_limit(c == 'X' ? "max-ttl" : "max-idle-freeze", optarg,
					   c == 'X' ? 30 * 86400 : 86400, &v);
			if (code)
				return code;
			*(c == 'X' ? &a->o.limits.max_ttl_s : &a->o.limits.max_idle_freeze_s) = v;
			break;
		}
		case 'H':
		case 'I':
			code = parse_seconds(c == 'H' ? "header-timeout" : "idle-timeout",
					     optarg, c == 'H' ? &a->o.limits.header_timeout_s :
					     &a->o.limits.idle_timeout_s);
			if (code)
				return code;
			break;
		case 'K':
			code = parse_limit("tls-handshake-rate", optarg, 100000,
					   &a->o.limits.tls_handshake_rate);
			if (code)
				return code;
			break;
		case 'T':
			code = parse_seconds("lease-timeout", optarg,
					     &a->o.limits.lease_timeout_s);
			if (code)
				return code;
			break;
		case 'W':
			code = parse_seconds("tty-idle-timeout", optarg,
					     &a->o.limits.tty_idle_timeout_s);
			if (code)
				return code;
			break;
		case 'A':
			code = push(&a->paths, &a->o.access.nallow_paths, optarg);
			a->o.access.allow_paths = a->paths;
			if (code)
				return code;
			break;
		case 'E':
			code = push(&a->envs, &a->o.access.nallow_env, optarg);
			a->o.access.allow_env = a->envs;
			if (code)
				return code;
			break;
		case 'R':
			a->o.access.allow_root_inside = true;
			break;
		case 'U':
			code = parse_uid_range(optarg, &a->o.access);
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
		case 'M': {
			struct corral_err err = { 0 };

			if (corral_parse_size(optarg, &a->o.limits.answer_memory, &err) < 0 ||
			    !a->o.limits.answer_memory) {
				cli_error("--answer-memory: %s", err.msg[0] ? err.msg :
					  "must be more than 0");
				return 2;
			}
			break;
		}
		case 'h':
			fputs(help, stdout);
			return 1;
		default:
			/* the option at fault, not 150 lines of help it scrolls off */
			return bad_serve_option(c, argv);
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
	if (!a->o.tls_cert != !a->o.tls_key) {
		cli_error("--%s needs --%s: the certificate and its key go together",
			  a->o.tls_cert ? "tls-cert" : "tls-key",
			  a->o.tls_cert ? "tls-key" : "tls-cert");
		return 2;
	}
	if (a->o.tls_cert && !a->o.listen) {
		cli_error("--tls-cert is for --listen: the unix socket needs no TLS");
		return 2;
	}
	if (a->o.tls_client_ca && !a->o.tls_cert) {
		cli_error("--tls-client-ca needs --tls-cert and --tls-key: client "
			  "certificates are asked for in a TLS handshake");
		return 2;
	}
	return 0;
}

/* Where the socket and the state go when no option says: as docs/API.md. */
static int default_paths(struct serve_args *a)
{
	const char *env = getenv("CORRAL_SOCKET");
	bool ignored_env = false;

	/*
	 * Where the clients look first: one setting serves both ends.  Not
	 * for root: a root daemon does not take a path from an environment
	 * it may have inherited from a user (su, sudo -E) and bind, rename
	 * or replace a socket there; --socket says it.
	 */
	if (!a->socket_path && env && *env && geteuid() != 0)
		a->socket_path = strdup(env);
	else if (!a->socket_path) {
		ignored_env = env && *env;	/* as root: said below */
		a->socket_path = default_path("/run/corral/corral.sock",
					      "XDG_RUNTIME_DIR", NULL, NULL,
					      "corral.sock");
	}
	if (!a->state_dir)
		a->state_dir = default_path("/var/lib/corral", "XDG_STATE_HOME",
					    "HOME", ".local/state", "corral");
	/*
	 * The clients still take it first, root's too: `CORRAL_SOCKET=X
	 * corral serve &` then `corral ls` found no daemon at X, and nothing
	 * had said that the daemon was elsewhere.
	 */
	if (ignored_env && a->socket_path && strcmp(env, a->socket_path))
		cli_error("note: CORRAL_SOCKET=%s is not taken as root (a root "
			  "daemon takes no path from its environment): the socket "
			  "is %s, where clients with CORRAL_SOCKET set do not look; "
			  "--socket %s puts it there", env, a->socket_path, env);
	if (!a->socket_path || !a->state_dir) {
		cli_error("no %s: set %s or pass %s", !a->socket_path ? "socket path" :
			  "state directory", !a->socket_path ?
			  "CORRAL_SOCKET or XDG_RUNTIME_DIR" : "HOME",
			  !a->socket_path ? "--socket" : "--state-dir");
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
	free(a.paths);
	free(a.envs);
	return code;
}
