/*
 * oci.c - `corral oci` (or the binary named corral-oci): runc's global
 * flags, its error log, and the verbs found from one table.
 *
 * containerd's runc shim and podman run the runtime as
 *   RUNTIME --root DIR --log FILE --log-format json VERB [FLAGS] ID
 * and, when it fails, read the last {"level":"error","msg":...} line of
 * FILE: that is where an error must be for the engine to show it.
 */
#include "cli.h"
#include "oci.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char oci_usage[] =
"Usage: corral oci [GLOBAL FLAGS] COMMAND [FLAGS] ID\n"
"       corral-oci ...  (the same, for containerd's BinaryName)\n"
"\n"
"An OCI runtime with runc's command line, for containerd's\n"
"io.containerd.runc.v2 shim and podman: the bundle's config.json runs\n"
"inside a corral sandbox (docs/kubernetes.md).\n"
"\n"
"Global flags:\n"
"  --root DIR           state directories (default " OCI_DEFAULT_ROOT ")\n"
"  --log FILE           errors also as JSON lines here (the shim reads it)\n"
"  --log-format json|text\n"
"  --systemd-cgroup     accepted; corral makes its own cgroups either way\n"
"  --debug              also debug lines in the log\n"
"  --corral-config FILE the operator's limits on config.json (default\n"
"                       $CORRAL_OCI_CONFIG, else " OCI_OPERATOR_CONFIG ")\n"
"  --version            print the version\n"
"  --rootless V, --criu PATH, --no-new-keyring\n"
"                       runc's, accepted and ignored (engines pass them)\n"
"\n"
"Commands:\n"
"  create --bundle DIR [--pid-file F] [--console-socket S] [--no-pivot]\n"
"         [--no-new-keyring] [--preserve-fds 0] ID\n"
"  start ID | state ID | kill [--all] ID [SIGNAL] | delete [--force] ID\n"
"  exec [--detach] [--pid-file F] [--console-socket S] [-e|--env NAME=VALUE]...\n"
"       [--preserve-fds 0] --process FILE ID | [--tty] [--cwd DIR] ID COMMAND [ARG]...\n"
"  ps [--format json] ID | pause ID | resume ID\n"
"  update --resources FILE|- ID | features\n"
"  events [--stats] [--interval 5s] ID\n"
"\n"
"--no-pivot and --no-new-keyring change nothing: corral always pivots into\n"
"the container's root, and the kernel keyring is refused inside (seccomp).\n"
"--preserve-fds takes 0 alone: no host fd but stdio goes in.\n"
"\n"
"Exit status, as runc's: 0 done; 1 any failure, a usage error included;\n"
"exec without --detach: the process's own status (128+N killed by signal\n"
"N), 255 where it could not be started.\n"
"\n"
"Each command's errors go to stderr and, with --log, to the log, where\n"
"the shim reads them.  Example, as containerd's shim calls it:\n"
"  corral oci --root /run/corral-oci --log log.json --log-format json \\\n"
"      create --bundle /path/to/bundle --pid-file init.pid mybox\n"
"";

/*
 * logfmt's quoting of a value already printable(): '"' and '\\' escaped,
 * so that a '"' of config.json's cannot end msg="..." and begin fields
 * of its own (level=info).  malloc'd; NULL when out of memory.
 */
static char *logfmt_value(const char *safe)
{
	char *out = malloc(strlen(safe) * 2 + 1), *w = out;

	if (!out)
		return NULL;
	for (; *safe; safe++) {
		if (*safe == '"' || *safe == '\\')
			*w++ = '\\';
		*w++ = *safe;
	}
	*w = '\0';
	return out;
}

/*
 * One line in the log, runc's (logrus's) fields, and the text on stderr.
 * msg quotes config.json (a mount's destination, an annotation), which an
 * image's author writes through the engine: on stderr and in the text
 * log its controls are \xNN (a newline there began a line of its own,
 * ESC drove the terminal of whoever reads the engine's error); in the
 * JSON log it is whole, but valid UTF-8: cut at 2 KiB inside a character,
 * json_pack() refused it and the line, the error's only record, was lost.
 */
static void log_line(const struct oci_global *g, const char *level,
		     const char *fmt, va_list ap)
{
	char msg[2048], stamp[40];
	char *safe, *text;
	struct corral_err err = { 0 };
	struct timespec ts;
	const char *base;
	struct stat st;
	struct tm tm;
	int fd, dir;
	json_t *o;
	char *line;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	safe = printable(msg, strlen(msg));
	if (!strcmp(level, "error"))
		fprintf(stderr, "corral-oci: %s\n", safe ? safe : "(out of memory)");
	if (!g->log || !safe) {
		free(safe);
		return;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &tm);
	/*
	 * Not through a link, at its name or (oci_path.c) above it: the
	 * engine's log lies in its bundle, which may be a tenant's to
	 * write, and a link there had root append this line
	 * to the host file it named, or make one (/etc/ld.so.preload takes
	 * any word of it that names a file; msg holds config.json's).
	 */
	dir = oci_open_parent("--log", g->log, &base, &err);
	if (dir < 0) {
		fprintf(stderr, "corral-oci: %s\n", err.msg);
		free(safe);
		return;
	}
	/*
	 * Not blocking, and only a file: a FIFO a tenant made at the name
	 * held the runtime in open() until they read root's lines.
	 */
	fd = openat(dir, base, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK |
		    O_CLOEXEC, 0600);
	close(dir);
	if (fd < 0) {
		free(safe);
		return;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		fprintf(stderr, "corral-oci: --log %s: not a regular file\n", g->log);
		close(fd);
		free(safe);
		return;
	}
	if (g->log_json) {
		o = json_pack("{s:s, s:o, s:s}", "level", level, "msg",
			      corral_json_bytes(msg, strlen(msg)), "time", stamp);
		line = o ? json_dumps(o, JSON_COMPACT) : NULL;
		json_decref(o);
		if (line)
			dprintf(fd, "%s\n", line);
		free(line);
	} else if ((text = logfmt_value(safe))) {
		dprintf(fd, "time=\"%s\" level=%s msg=\"%s\"\n", stamp, level, text);
		free(text);
	}
	close(fd);
	free(safe);
}

void oci_error(const struct oci_global *g, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_line(g, "error", fmt, ap);
	va_end(ap);
}

void oci_debug(const struct oci_global *g, const char *fmt, ...)
{
	va_list ap;

	if (!g->debug)
		return;
	va_start(ap, fmt);
	log_line(g, "debug", fmt, ap);
	va_end(ap);
}

/* runc's shape: the engines read the first line's last word. */
static int oci_version(const struct oci_global *g, int argc, char **argv)
{
	(void)g;
	(void)argc;
	(void)argv;
	printf("corral-oci version %s\nspec: %s\n", CORRAL_VERSION, OCI_VERSION);
	return 0;
}

static const struct oci_command {
	const char *name;
	int (*fn)(const struct oci_global *g, int argc, char **argv);
	bool needs_root;	/* namespaces and cgroups of others: root only */
} oci_commands[] = {
	{ "create", oci_create, true },
	{ "start", oci_start, true },
	{ "state", oci_state_cmd, false },
	{ "kill", oci_kill, true },
	{ "delete", oci_delete, true },
	{ "exec", oci_exec, true },
	{ "ps", oci_ps, true },
	{ "pause", oci_pause, true },
	{ "resume", oci_resume, true },
	{ "features", oci_features, false },
	{ "update", oci_update, true },
	{ "events", oci_events, true },
	{ "version", oci_version, false },
};

enum { G_ROOT = 256, G_LOG, G_LOG_FORMAT, G_SYSTEMD, G_DEBUG, G_VERSION,
       G_HELP, G_IGNORED, G_IGNORED_ARG, G_CONFIG };

static const struct option global_options[] = {
	{ "root", required_argument, NULL, G_ROOT },
	{ "log", required_argument, NULL, G_LOG },
	{ "log-format", required_argument, NULL, G_LOG_FORMAT },
	{ "systemd-cgroup", no_argument, NULL, G_SYSTEMD },
	{ "debug", no_argument, NULL, G_DEBUG },
	{ "version", no_argument, NULL, G_VERSION },
	{ "help", no_argument, NULL, G_HELP },
	{ "corral-config", required_argument, NULL, G_CONFIG },
	/* runc's, which podman may pass: meaningless here */
	{ "rootless", required_argument, NULL, G_IGNORED_ARG },
	{ "criu", required_argument, NULL, G_IGNORED_ARG },
	{ "no-new-keyring", no_argument, NULL, G_IGNORED },
	{ NULL, 0, NULL, 0 },
};

int cmd_oci(int argc, char **argv)
{
	struct oci_global g = { .root = OCI_DEFAULT_ROOT };
	int opt;

	optind = 0;
	opterr = 0;
	while ((opt = getopt_long_only(argc, argv, "+hv", global_options, NULL)) != -1) {
		switch (opt) {
		case G_ROOT:
			g.root = optarg;
			break;
		case G_LOG:
			g.log = optarg;
			break;
		case G_LOG_FORMAT:
			if (strcmp(optarg, "json") && strcmp(optarg, "text")) {
				oci_error(&g, "--log-format %s: json or text", optarg);
				return OCI_USAGE;
			}
			g.log_json = !strcmp(optarg, "json");
			break;
		case G_SYSTEMD:
			g.systemd_cgroup = true;
			break;
		case G_DEBUG:
			g.debug = true;
			break;
		case G_CONFIG:
			g.config = optarg;
			break;
		case 'v':
		case G_VERSION:
			return oci_version(&g, 0, NULL);
		case 'h':
		case G_HELP:
			fputs(oci_usage, stdout);
			return 0;
		case G_IGNORED:
		case G_IGNORED_ARG:
			break;
		default:
			oci_error(&g, "unknown global flag %s", argv[optind - 1]);
			return OCI_USAGE;
		}
	}
	if (optind >= argc) {
		fputs(oci_usage, stderr);
		return OCI_USAGE;
	}
	for (size_t i = 0; i < sizeof(oci_commands) / sizeof(oci_commands[0]); i++) {
		const struct oci_command *c = &oci_commands[i];

		if (strcmp(argv[optind], c->name))
			continue;
		/*
		 * `runc create --help`: the flag right after the command (a
		 * later one may be an exec'd command's own), whoever asks.
		 */
		if (optind + 1 < argc && (!strcmp(argv[optind + 1], "--help") ||
					  !strcmp(argv[optind + 1], "-h"))) {
			fputs(oci_usage, stdout);
			return 0;
		}
		if (c->needs_root && geteuid() != 0) {
			oci_error(&g, "%s: corral's OCI runtime must run as root (it "
				  "joins and makes namespaces and cgroups for an engine "
				  "that runs as root); uid %d cannot", c->name,
				  (int)geteuid());
			return 1;
		}
		oci_debug(&g, "%s", c->name);
		return c->fn(&g, argc - optind, argv + optind);
	}
	oci_error(&g, "unknown command \"%s\"", argv[optind]);
	return OCI_USAGE;
}
