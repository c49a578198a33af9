/*
 * oci_create.c - `create` and `exec`: the two verbs that start processes.
 *
 * create forks the container's monitor (corral_container_monitor), which
 * spawns the sandbox with its init as our child; once the monitor says
 * "created PID" (init waits for `start`), we write the state and the pid
 * file and exit, and the shim, a subreaper, adopts init (and the
 * monitor).  Our 0-2 are the shim's: they go to the container's process
 * as they are, the one place host fds go in, since the shim owns them.
 */
#include "cli.h"
#include "oci.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/*
 * The engine's console socket: the pty's master goes there.  Connected
 * by its path as given, a link of a tenant's on the way (its bundle) had
 * root connect to a socket of the tenant's choosing, one it may not
 * reach itself, and hand whatever listens there the container's
 * terminal: oci_path.c follows no such link.
 */
static int connect_console(const char *path, struct corral_err *err)
{
	return oci_connect_socket("--console-socket", path, err);
}

/* <audit_dir>/<id>.jsonl: the container's hash-chained events. */
static int events_path(const struct oci_global *g, const struct oci_operator *op,
		       const char *id, char *buf, size_t len, struct corral_err *err)
{
	char dir[PATH_MAX];

	if (op->audit_dir)
		snprintf(dir, sizeof(dir), "%s", op->audit_dir);
	else
		snprintf(dir, sizeof(dir), "%s/audit", g->root);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return corral_set_errno(err, errno, "cannot make the audit directory %s", dir);
	if ((size_t)snprintf(buf, len, "%s/%s.jsonl", dir, id) >= len)
		return corral_set_err(err, -ENAMETOOLONG, "the audit path in %s is "
				      "too long", dir);
	return 0;
}

static char *now_rfc3339(void)
{
	struct timespec ts;
	struct tm tm;
	char buf[64];

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), ".%09ldZ", ts.tv_nsec);
	return strdup(buf);
}

/* The CRI's names for the pod, "namespace/name", for the events' "call". */
static const char *pod_of(json_t *ann)
{
	static char pod[512];
	const char *name = json_string_value(json_object_get(ann,
				"io.kubernetes.cri.sandbox-name"));
	const char *ns = json_string_value(json_object_get(ann,
				"io.kubernetes.cri.sandbox-namespace"));

	if (!name)
		return NULL;
	snprintf(pod, sizeof(pod), "%s%s%s", ns ? ns : "", ns ? "/" : "", name);
	return pod;
}

/*
 * The monitor outlives create: of what the engine left open in create
 * (conmon's and the shim's own pipes), it keeps none but 0-2 and keep[]
 * (-1s allowed), so that nothing of theirs waits on it for an EOF.
 */
static void close_others(const int *keep, size_t n)
{
	unsigned int from = 3;

	for (;;) {
		unsigned int next = ~0U;

		for (size_t i = 0; i < n; i++)
			if (keep[i] >= (int)from && (unsigned int)keep[i] < next)
				next = keep[i];
		if (next > from)
			syscall(SYS_close_range, from, next - 1, 0);
		if (next == ~0U)
			return;
		from = next + 1;
	}
}

/* The monitor's process: it never returns. */
static __attribute__((noreturn)) void run_monitor(struct oci_spec *s,
						  struct oci_state *st,
						  const char *evpath, int console,
						  int ready)
{
	struct corral_container_opts o = {
		.p = &s->p, .id = st->id, .argv = s->argv, .hostname = s->hostname,
		.rlimits = s->rlimits, .nrlimits = s->nrlimits, .net_fd = s->net_fd,
		.stdio = { -1, -1, -1 }, .tty = s->tty, .console_fd = console,
		.console_rows = s->console_rows, .console_cols = s->console_cols,
		.ctl_path = st->ctl, .events_path = evpath,
		.call = pod_of(s->annotations), .ready_fd = ready,
	};
	struct corral_err err = { 0 };
	int keep[4 + s->p.nbinds];

	/* out of the engine's session and process group: its signals are its */
	setsid();
	/* and the root and binds' sources as judged: the sandbox gets those or none */
	keep[0] = console, keep[1] = ready, keep[2] = s->net_fd;
	keep[3] = s->p.root_pinned ? s->p.root_fd : -1;
	for (size_t i = 0; i < s->p.nbinds; i++)
		keep[4 + i] = s->p.binds[i].pinned ? s->p.binds[i].fd : -1;
	close_others(keep, 4 + s->p.nbinds);
	for (int i = 0; !s->tty && i < 3; i++)
		o.stdio[i] = fcntl(i, F_DUPFD_CLOEXEC, 3);
	if (chdir("/") < 0) {
		/* nothing here depends on the working directory */
	}
	_exit(corral_container_monitor(&o, &err) < 0 ? 1 : 0);
}

/* "created PID", or the monitor's error; -EIO if it said nothing. */
static int wait_created(int fd, pid_t *pid, struct corral_err *err)
{
	char line[CORRAL_ERR_MAX + 64];
	size_t off = 0;
	ssize_t n;
	int p;

	while (off < sizeof(line) - 1 &&
	       (n = read(fd, line + off, sizeof(line) - 1 - off)) > 0)
		off += n;
	line[off] = '\0';
	line[strcspn(line, "\n")] = '\0';
	if (sscanf(line, "created %d", &p) == 1 && p > 0) {
		*pid = p;
		return 0;
	}
	if (!strncmp(line, "error ", 6))
		return corral_set_err(err, -EIO, "%s", line + 6);
	return corral_set_err(err, -EIO, "the container's monitor ended before "
			      "the container was created");
}

enum { C_BUNDLE = 256, C_PID_FILE, C_CONSOLE, C_NO_PIVOT, C_PRESERVE,
       C_IGNORED, C_DETACH, C_PROCESS, C_TTY, C_CWD, C_ENV };

static const struct option create_options[] = {
	{ "bundle", required_argument, NULL, 'b' },
	{ "pid-file", required_argument, NULL, C_PID_FILE },
	{ "console-socket", required_argument, NULL, C_CONSOLE },
	{ "no-pivot", no_argument, NULL, C_NO_PIVOT },
	{ "preserve-fds", required_argument, NULL, C_PRESERVE },
	{ "no-new-keyring", no_argument, NULL, C_IGNORED },
	{ NULL, 0, NULL, 0 },
};

struct create_args {
	const char *bundle, *pid_file, *console, *id;
};

static int create_parse(const struct oci_global *g, int argc, char **argv,
			struct create_args *a)
{
	int opt;

	optind = 0;
	while ((opt = getopt_long_only(argc, argv, "+b:", create_options, NULL)) != -1) {
		switch (opt) {
		case 'b':
			a->bundle = optarg;
			break;
		case C_PID_FILE:
			a->pid_file = optarg;
			break;
		case C_CONSOLE:
			a->console = optarg;
			break;
		case C_PRESERVE:
			/* sandbox_spawn hands in stdio only: more would be host fds */
			if (strcmp(optarg, "0")) {
				oci_error(g, "--preserve-fds %s: corral passes only "
					  "stdin, stdout and stderr in", optarg);
				return -1;
			}
			break;
		case C_NO_PIVOT:	/* corral's root is always pivoted into */
		case C_IGNORED:
			break;
		default:
			oci_error(g, "create: unknown flag %s", argv[optind - 1]);
			return -1;
		}
	}
	if (optind != argc - 1) {
		oci_error(g, "create: expected one container id");
		return -1;
	}
	a->id = argv[optind];
	return 0;
}

/*
 * --bundle DIR made absolute by the directory opened (O_PATH: a mount at
 * the name is entered, nothing of it asked), judged before anything
 * there is: realpath()'s lstat of a tenant's bundle that is a FUSE mount
 * whose daemon never answers held create.  malloc'd; NULL with err.
 */
static char *bundle_path(const char *bundle, struct corral_err *err)
{
	char self[64], abs[PATH_MAX], what[PATH_MAX + 16], *dup = NULL;
	ssize_t n = -1;
	int fd = open(bundle, O_PATH | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0) {
		corral_set_errno(err, errno, "--bundle %s", bundle);
		return NULL;
	}
	snprintf(what, sizeof(what), "--bundle %s", bundle);
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	if (corral_root_fd_check(fd, what, err) == 0 &&
	    (n = readlink(self, abs, sizeof(abs) - 1)) < 0)
		corral_set_errno(err, errno, "--bundle %s", bundle);
	close(fd);
	if (n < 0)
		return NULL;
	abs[n] = '\0';
	if (!(dup = strdup(abs)))
		corral_set_err(err, -ENOMEM, "out of memory for --bundle");
	return dup;
}

int oci_create(const struct oci_global *g, int argc, char **argv)
{
	struct create_args a = { .bundle = "." };
	struct oci_operator op;
	struct oci_spec s = { .net_fd = -1 };
	struct oci_state st = { 0 };
	struct corral_err err = { 0 };
	char evpath[PATH_MAX];
	int ready[2] = { -1, -1 }, console = -1, r;
	bool made = false;
	pid_t mon = -1;

	if (create_parse(g, argc, argv, &a) < 0)
		return OCI_USAGE;
	r = oci_operator_load(&op, g->config, &err);
	if (r == 0)
		r = oci_check_id(a.id, &err);
	if (r == 0 && !(st.bundle = bundle_path(a.bundle, &err)))
		r = err.code;
	if (r == 0)
		r = oci_spec_load(&op, st.bundle, NULL, &s, &err);
	if (r == 0 && s.tty && !a.console)
		r = corral_set_err(&err, -EINVAL, "process.terminal is set: "
				   "--console-socket is required");
	if (r == 0) {
		char *bundle = st.bundle;

		r = oci_state_new(g, a.id, &st, &err);	/* clears st */
		st.bundle = bundle;
		made = r == 0;
	}
	if (r == 0 && s.tty && (console = connect_console(a.console, &err)) < 0)
		r = console;
	if (r == 0)
		r = events_path(g, &op, a.id, evpath, sizeof(evpath), &err);
	if (r == 0 && pipe2(ready, O_CLOEXEC) < 0)
		r = corral_set_errno(&err, errno, "pipe");
	if (r == 0 && (mon = fork()) < 0)
		r = corral_set_errno(&err, errno, "cannot start the container's monitor");
	if (r == 0 && mon == 0) {
		close(ready[0]);
		run_monitor(&s, &st, evpath, console, ready[1]);
	}
	if (ready[1] >= 0)
		close(ready[1]);
	if (console >= 0)
		close(console);
	if (r == 0)
		r = wait_created(ready[0], &st.pid, &err);
	if (r == 0) {
		st.monitor = mon;
		st.rootfs = strdup(s.rootfs);
		st.created = now_rfc3339();
		st.annotations = json_incref(s.annotations);
		/* the document judged now is the one exec and update judge by */
		st.config = json_incref(s.doc);
		r = st.rootfs && st.created ? oci_state_write(&st, &err) :
		    corral_set_err(&err, -ENOMEM, "out of memory for the state");
	}
	if (r == 0 && a.pid_file)
		r = oci_write_pid_file(a.pid_file, st.pid, &err);
	if (ready[0] >= 0)
		close(ready[0]);
	if (r < 0) {
		oci_error(g, "%s", err.msg);
		if (mon > 0) {	/* its init, if any, dies with it or is killed */
			struct corral_err e2;
			char reply[16];

			corral_container_ctl(st.ctl, "kill 9", reply, sizeof(reply), &e2);
			waitpid(mon, NULL, 0);
		}
		if (made)
			oci_state_remove(&st, &err);
	}
	oci_state_free(&st);
	oci_spec_free(&s);
	oci_operator_free(&op);
	return r < 0 ? 1 : 0;
}

/* ---- exec ------------------------------------------------------------- */

static const struct option exec_options[] = {
	{ "process", required_argument, NULL, 'p' },
	{ "detach", no_argument, NULL, 'd' },
	{ "pid-file", required_argument, NULL, C_PID_FILE },
	{ "console-socket", required_argument, NULL, C_CONSOLE },
	{ "tty", no_argument, NULL, 't' },
	{ "cwd", required_argument, NULL, C_CWD },
	{ "env", required_argument, NULL, 'e' },
	{ "preserve-fds", required_argument, NULL, C_PRESERVE },
	{ NULL, 0, NULL, 0 },
};

struct exec_args {
	const char *process, *pid_file, *console, *cwd, *id;
	bool detach, tty;
	char **argv;		/* after the id, without --process */
	char **env;		/* each -e NAME=VALUE, in argv's strings */
	size_t nenv;
};

static int exec_parse(const struct oci_global *g, int argc, char **argv,
		      struct exec_args *a)
{
	int opt;

	a->env = calloc(argc, sizeof(char *));
	if (!a->env) {
		oci_error(g, "exec: out of memory");
		return -1;
	}
	optind = 0;
	while ((opt = getopt_long_only(argc, argv, "+p:dte:", exec_options, NULL)) != -1) {
		switch (opt) {
		case 'p':
			a->process = optarg;
			break;
		case 'd':
			a->detach = true;
			break;
		case 't':
			a->tty = true;
			break;
		case C_PID_FILE:
			a->pid_file = optarg;
			break;
		case C_CONSOLE:
			a->console = optarg;
			break;
		case C_CWD:
			a->cwd = optarg;
			break;
		case C_PRESERVE:
			if (strcmp(optarg, "0")) {
				oci_error(g, "--preserve-fds %s: corral passes only "
					  "stdin, stdout and stderr in", optarg);
				return -1;
			}
			break;
		case 'e':
			if (!strchr(optarg, '=') || optarg[0] == '=') {
				oci_error(g, "exec: --env %s: expected NAME=VALUE", optarg);
				return -1;
			}
			a->env[a->nenv++] = optarg;
			break;
		default:
			oci_error(g, "exec: unknown flag %s", argv[optind - 1]);
			return -1;
		}
	}
	if (optind >= argc) {
		oci_error(g, "exec: expected a container id");
		return -1;
	}
	a->id = argv[optind];
	a->argv = argv + optind + 1;
	if (!a->process && !a->argv[0]) {
		oci_error(g, "exec: --process FILE or a command after the id");
		return -1;
	}
	return 0;
}

/*
 * Each -e over the process's env: a NAME it has takes the new value in
 * its place (a program's getenv finds the first), others are appended.
 * runc ignores -e beside --process; here it applies to either, as a
 * user who gave both means.
 */
static int exec_env_apply(const struct exec_args *a, struct oci_spec *s,
			  struct corral_err *err)
{
	size_t n = 0, i, j, len;
	char **env;

	while (s->env && s->env[n])
		n++;
	env = realloc(s->env, (n + a->nenv + 1) * sizeof(char *));
	if (!env)
		return corral_set_err(err, -ENOMEM, "out of memory for --env");
	s->env = env;
	env[n] = NULL;
	for (i = 0; i < a->nenv; i++) {
		char *v = strdup(a->env[i]);

		if (!v)
			return corral_set_err(err, -ENOMEM, "out of memory for --env");
		len = strchr(v, '=') - v + 1;
		for (j = 0; j < n && strncmp(env[j], v, len); j++)
			;
		if (j < n) {
			free(env[j]);
		} else {
			env[n++] = NULL;
			env[n] = NULL;
		}
		env[j] = v;
	}
	return 0;
}

/* The process to run: --process FILE, else the command line's; then -e. */
static int exec_process_of(const struct oci_operator *op, const struct exec_args *a,
			   struct oci_spec *s, struct corral_err *err)
{
	size_t n = 0;
	int r;

	if (a->process) {
		r = oci_process_load(op, a->process, s, err);
		return r < 0 ? r : exec_env_apply(a, s, err);
	}
	while (a->argv[n])
		n++;
	for (char **v = s->argv; v && *v; v++)
		free(*v);
	free(s->argv);
	s->argv = calloc(n + 1, sizeof(char *));
	for (size_t i = 0; s->argv && i < n; i++)
		if (!(s->argv[i] = strdup(a->argv[i])))
			return corral_set_err(err, -ENOMEM, "out of memory for the command");
	if (!s->argv)
		return corral_set_err(err, -ENOMEM, "out of memory for the command");
	s->tty = a->tty;
	s->console_rows = s->console_cols = 0;	/* the container's is not its */
	free(s->cwd);
	s->cwd = strdup(a->cwd ? a->cwd : "/");
	if (!s->cwd)
		return corral_set_err(err, -ENOMEM, "out of memory for --cwd");
	return exec_env_apply(a, s, err);
}

int oci_exec(const struct oci_global *g, int argc, char **argv)
{
	struct exec_args a = { 0 };
	struct oci_operator op;
	struct oci_spec s = { .net_fd = -1 };
	struct oci_state st = { 0 };
	struct corral_err err = { 0 };
	struct corral_container_exec_opts o = { .console_fd = -1 };
	const char *status;
	pid_t pid = -1;
	int r, ws;

	if (exec_parse(g, argc, argv, &a) < 0) {
		free(a.env);
		return OCI_USAGE;
	}
	r = oci_operator_load(&op, g->config, &err);
	if (r == 0)
		r = oci_state_load(g, a.id, &st, &err);
	if (r == 0) {
		status = oci_state_status(&st);
		if (strcmp(status, "running") && strcmp(status, "created"))
			r = corral_set_err(&err, -ESRCH, "cannot exec in a %s container",
					   status);
	}
	/*
	 * The container's policy, as create made it, for the same layers:
	 * from the config.json create read, kept in its state, not from the
	 * bundle's, which whoever owns the bundle may have changed since.
	 */
	if (r == 0)
		r = oci_spec_load(&op, st.bundle, st.config, &s, &err);
	if (r == 0)
		r = exec_process_of(&op, &a, &s, &err);
	if (r == 0 && s.tty && !a.console)
		r = corral_set_err(&err, -EINVAL, "process.terminal is set: "
				   "--console-socket is required");
	if (r == 0 && s.tty && (o.console_fd = connect_console(a.console, &err)) < 0)
		r = o.console_fd;
	if (r == 0) {
		o.p = &s.p;
		o.init = st.pid;
		o.ctl_path = st.ctl;
		o.argv = s.argv;
		o.envp = s.env;
		o.cwd = s.cwd;
		o.rlimits = s.rlimits;
		o.nrlimits = s.nrlimits;
		o.tty = s.tty;
		o.console_rows = s.console_rows;
		o.console_cols = s.console_cols;
		r = corral_container_exec(&o, &pid, &err);
	}
	if (o.console_fd >= 0)
		close(o.console_fd);
	if (r == 0 && a.pid_file)
		r = oci_write_pid_file(a.pid_file, pid, &err);
	oci_state_free(&st);
	oci_spec_free(&s);
	oci_operator_free(&op);
	free(a.env);
	if (r < 0) {
		oci_error(g, "%s", err.msg);
		if (pid > 0) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
		}
		return r == -ESRCH ? 1 : 255;
	}
	if (a.detach)	/* the shim, a subreaper, waits for it */
		return 0;
	if (waitpid(pid, &ws, 0) < 0)
		return 255;
	return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}
