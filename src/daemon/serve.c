/*
 * serve.c - corral serve: the listeners, the state directory, start and
 * stop.  The API itself is in api.c.
 *
 * One process, one event loop: every sandbox's supervisor, every request
 * and every follower of the event stream share it.  The sandboxes die
 * with the daemon (their init has a parent-death signal and reads EOF on
 * its control socket); what a killed daemon leaves behind, cgroups and
 * state files, is removed by the next start.
 */
#include "daemon.h"
#include "../cli/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static const char help[] =
"Usage: corral serve [--socket PATH] [--listen HOST:PORT --token-file FILE]\n"
"                    [--state-dir DIR] [--max-sandboxes N] [--pool N]\n"
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

static int mkdir_p(const char *path, mode_t mode)
{
	char buf[PATH_MAX];

	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	for (char *s = buf + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	if (mkdir(buf, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* ---- the state directory ------------------------------------------------- */

int state_write(struct daemon *d, struct sandbox *sb)
{
	char path[PATH_MAX], tmp[PATH_MAX + 8], *text;
	json_t *o;
	size_t len;
	int r, fd;

	snprintf(path, sizeof(path), "%s/sandboxes/%s.json", d->state_dir, sb->id);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	o = json_pack("{s:s, s:i, s:s, s:O}", "id", sb->id, "daemon_pid",
		      (int)getpid(), "created", sb->created, "labels", sb->labels);
	if (!o)
		return -ENOMEM;
	text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!text)
		return -ENOMEM;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	len = strlen(text);
	r = fd < 0 ? -errno : 0;
	errno = 0;
	if (r == 0 && write(fd, text, len) != (ssize_t)len)
		r = errno ? -errno : -ENOSPC;
	if (fd >= 0 && close(fd) < 0 && r == 0)
		r = -errno;
	free(text);
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0)
		unlink(tmp);
	return r;
}

void state_remove(struct daemon *d, const char *id)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/sandboxes/%s.json", d->state_dir, id);
	unlink(path);
}

/* The last seq of each lost sandbox in the audit log (lost: id -> 0). */
static void last_seqs(struct daemon *d, json_t *lost)
{
	char path[PATH_MAX], *line = NULL;
	size_t cap = 0;
	ssize_t n;
	FILE *f;

	snprintf(path, sizeof(path), "%s/audit.jsonl", d->state_dir);
	f = fopen(path, "re");
	while (f && (n = getline(&line, &cap, f)) > 0) {
		const char *id;
		json_t *v;

		json_object_foreach(lost, id, v) {
			char key[128];
			json_t *e;

			snprintf(key, sizeof(key), "\"sandbox\":\"%s\"", id);
			if (!memmem(line, n, key, strlen(key)))
				continue;
			e = json_loadb(line, n, 0, NULL);
			if (json_integer_value(json_object_get(e, "seq")) >
			    json_integer_value(v))
				json_integer_set(v, json_integer_value(json_object_get(e, "seq")));
			json_decref(e);
		}
	}
	free(line);
	if (f)
		fclose(f);
}

/*
 * A daemon that was killed left a file per sandbox it had: those sandboxes
 * died with it.  Say so in the audit log, then forget them.
 */
static void state_recover(struct daemon *d)
{
	char dir[PATH_MAX];
	json_t *lost = json_object(), *v;
	struct dirent *de;
	const char *id;
	DIR *dp;

	snprintf(dir, sizeof(dir), "%s/sandboxes", d->state_dir);
	dp = opendir(dir);
	while (dp && lost && (de = readdir(dp))) {
		char path[PATH_MAX * 2], *dot = strrchr(de->d_name, '.');

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (dot && !strcmp(dot, ".json")) {
			*dot = '\0';
			json_object_set_new(lost, de->d_name, json_integer(0));
		}
		unlink(path);
	}
	if (dp)
		closedir(dp);
	if (json_object_size(lost))
		last_seqs(d, lost);
	json_object_foreach(lost, id, v)
		corral_log_note(d->log, id, json_integer_value(v), "sandbox.lost",
				"the daemon that ran this sandbox stopped without "
				"destroying it; it died with the daemon");
	json_decref(lost);
}

static int state_open(struct daemon *d)
{
	char path[PATH_MAX];
	struct corral_err err;
	int r;

	r = mkdir_p(d->state_dir, 0700);
	if (r == 0) {
		snprintf(path, sizeof(path), "%s/sandboxes", d->state_dir);
		r = mkdir_p(path, 0700);
	}
	if (r < 0) {
		cli_error("state directory %s: %s", d->state_dir, strerror(-r));
		return r;
	}
	snprintf(path, sizeof(path), "%s/daemon.lock", d->state_dir);
	d->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (d->lock_fd < 0) {
		cli_error("%s: %s", path, strerror(errno));
		return -errno;
	}
	if (flock(d->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		cli_error("another corral serve is using the state directory %s",
			  d->state_dir);
		return -EBUSY;
	}
	snprintf(path, sizeof(path), "%s/audit.jsonl", d->state_dir);
	r = corral_log_open(&d->log, path, &err);
	if (r < 0) {
		cli_error("%s", err.msg);
		return r;
	}
	corral_log_observe(d->log, api_on_log_line, d);
	state_recover(d);
	return 0;
}

/* ---- listeners ------------------------------------------------------------- */

static int listen_unix(struct daemon *d)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char dir[PATH_MAX], *slash;
	int fd, r;

	if (strlen(d->socket_path) >= sizeof(sa.sun_path)) {
		cli_error("socket path %s is longer than %zu bytes", d->socket_path,
			  sizeof(sa.sun_path) - 1);
		return -ENAMETOOLONG;
	}
	snprintf(dir, sizeof(dir), "%s", d->socket_path);
	slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		r = mkdir_p(dir, 0700);
		if (r < 0) {
			cli_error("socket directory %s: %s", dir, strerror(-r));
			return r;
		}
	}
	strcpy(sa.sun_path, d->socket_path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	/* a live daemon answers on it; a dead one's socket is in our way */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		cli_error("a daemon is already listening on %s", d->socket_path);
		close(fd);
		return -EADDRINUSE;
	}
	unlink(d->socket_path);
	close(fd);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	/* 0600 from birth: no window in which another user could connect */
	mode_t old = umask(0177);

	r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (r < 0 || listen(fd, 1024) < 0) {
		r = -errno;
		cli_error("cannot listen on %s: %s", d->socket_path, strerror(-r));
		close(fd);
		return r;
	}
	if (evhttp_accept_socket(d->http_unix, fd) < 0) {
		close(fd);
		return -ENOMEM;
	}
	return 0;
}

static int read_token(struct daemon *d, const char *file)
{
	char buf[512];
	struct stat st;
	FILE *f = fopen(file, "re");

	if (!f) {
		cli_error("token file %s: %s", file, strerror(errno));
		return -errno;
	}
	if (fstat(fileno(f), &st) == 0 && (st.st_mode & 077))
		fprintf(stderr, "corral: warning: token file %s is readable by "
			"others (mode %o)\n", file, st.st_mode & 0777);
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		cli_error("token file %s is empty", file);
		return -EINVAL;
	}
	fclose(f);
	buf[strcspn(buf, "\r\n")] = '\0';
	if (strlen(buf) < 16) {
		cli_error("the token in %s is shorter than 16 characters", file);
		return -EINVAL;
	}
	d->token = strdup(buf);
	return d->token ? 0 : -ENOMEM;
}

static int listen_tcp(struct daemon *d, const char *spec)
{
	char host[256];
	const char *colon = strrchr(spec, ':');
	char *end;
	long port;

	if (!colon || colon == spec || (size_t)(colon - spec) >= sizeof(host)) {
		cli_error("--listen: expected HOST:PORT (got \"%s\")", spec);
		return -EINVAL;
	}
	port = strtol(colon + 1, &end, 10);
	if (*end || port < 1 || port > 65535) {
		cli_error("--listen: bad port in \"%s\"", spec);
		return -EINVAL;
	}
	snprintf(host, sizeof(host), "%.*s", (int)(colon - spec), spec);
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		memmove(host, host + 1, strlen(host));
		host[strlen(host) - 1] = '\0';
	}
	d->http_tcp = evhttp_new(d->base);
	if (!d->http_tcp || !evhttp_bind_socket_with_handle(d->http_tcp, host, port)) {
		cli_error("cannot listen on %s", spec);
		return -EADDRNOTAVAIL;
	}
	return 0;
}

static void setup_http(struct daemon *d, struct evhttp *http)
{
	evhttp_set_max_body_size(http, API_FILE_MAX + 1);
	evhttp_set_max_headers_size(http, 64 * 1024);
	/* idle and slow clients; a call runs as long as its own timeout */
	evhttp_set_timeout(http, 900);
	/* every method reaches the router, which answers a JSON 405 */
	evhttp_set_allowed_methods(http, EVHTTP_REQ_GET | EVHTTP_REQ_POST |
				   EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
				   EVHTTP_REQ_HEAD | EVHTTP_REQ_OPTIONS |
				   EVHTTP_REQ_PATCH | EVHTTP_REQ_TRACE);
	evhttp_set_gencb(http, api_handle, d);
}

/* ---- the watchdog ---------------------------------------------------------- */

/*
 * The sandboxes die with the daemon: their init has a parent-death signal.
 * A frozen one cannot act on it until it is thawed, so a small watchdog
 * outlives the daemon: when the pipe it reads ends (the daemon is gone,
 * however it went), it removes the daemon's cgroups, which thaws and
 * kills whatever they still hold.  A clean stop tells it "q" instead.
 */
static void watchdog_main(int fd, pid_t daemon)
{
	ssize_t n;
	char c = 0;

	prctl(PR_SET_NAME, "corral-watchdog", 0, 0, 0);
	/* nothing of the daemon's: not its socket, not its lock */
	if (fd > 3)
		syscall(SYS_close_range, 3, fd - 1, 0);
	syscall(SYS_close_range, fd + 1, ~0U, 0);
	signal(SIGTERM, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	while ((n = read(fd, &c, 1)) < 0 && errno == EINTR)
		;
	if (n == 1 && c == 'q')
		_exit(0);
	corral_cleanup_owner(daemon);
	_exit(0);
}

static void start_watchdog(struct daemon *d)
{
	int p[2];
	pid_t self = getpid(), pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return;
	pid = fork();
	if (pid == 0) {
		close(p[1]);
		watchdog_main(p[0], self);
	}
	close(p[0]);
	if (pid < 0) {
		close(p[1]);
		return;
	}
	d->watchdog_fd = p[1];
	d->watchdog_pid = pid;
}

static void stop_watchdog(struct daemon *d)
{
	if (d->watchdog_fd < 0)
		return;
	if (write(d->watchdog_fd, "q", 1) != 1) {
		/* it is gone already */
	}
	close(d->watchdog_fd);
	d->watchdog_fd = -1;
	waitpid(d->watchdog_pid, NULL, 0);
}

/* ---- start and stop -------------------------------------------------------- */

static void on_stop(evutil_socket_t sig, short what, void *arg)
{
	struct daemon *d = arg;

	(void)what;
	fprintf(stderr, "corral serve: signal %d, destroying %zu sandbox(es)\n",
		(int)sig, d->nsandboxes);
	event_base_loopbreak(d->base);
}

static void shutdown_all(struct daemon *d)
{
	while (d->sandboxes)
		sandbox_destroy(d->sandboxes, "the daemon stopped");
	while (d->followers) {
		struct follower *f = d->followers;

		d->followers = f->next;
		evhttp_connection_set_closecb(evhttp_request_get_connection(f->req),
					      NULL, NULL);
		evhttp_send_reply_end(f->req);
		free(f);
	}
}

static int parse_args(struct daemon *d, int argc, char **argv,
		      const char **listen, const char **token_file)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "listen", required_argument, NULL, 'l' },
		{ "token-file", required_argument, NULL, 't' },
		{ "state-dir", required_argument, NULL, 'd' },
		{ "max-sandboxes", required_argument, NULL, 'm' },
		{ "pool", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	char *end;
	long v;
	int c;

	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			free(d->socket_path);
			d->socket_path = strdup(optarg);
			break;
		case 'l':
			*listen = optarg;
			break;
		case 't':
			*token_file = optarg;
			break;
		case 'd':
			free(d->state_dir);
			d->state_dir = strdup(optarg);
			break;
		case 'm':
		case 'p':
			v = strtol(optarg, &end, 10);
			if (*end || v < (c == 'm') || v > 100000) {
				cli_error("--%s: expected a number %d to 100000 (got \"%s\")",
					  c == 'm' ? "max-sandboxes" : "pool",
					  c == 'm', optarg);
				return 2;
			}
			*(c == 'm' ? &d->max_sandboxes : &d->pool_size) = v;
			break;
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
	if (*listen && !*token_file) {
		cli_error("--listen needs --token-file: the API is never open on TCP "
			  "without a token");
		return 2;
	}
	return 0;
}

/* Each sandbox holds about six fds here: say when the limit is the cap. */
static void warn_fd_limit(const struct daemon *d)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur < d->max_sandboxes * 6 + 128)
		fprintf(stderr, "corral serve: warning: the open-files limit (%llu) "
			"allows about %llu sandboxes, fewer than --max-sandboxes %zu; "
			"raise it with ulimit -n\n", (unsigned long long)rl.rlim_cur,
			(unsigned long long)(rl.rlim_cur > 128 ? (rl.rlim_cur - 128) / 6 : 0),
			d->max_sandboxes);
}

static void daemon_free(struct daemon *d)
{
	stop_watchdog(d);
	if (d->ev_pool)
		event_free(d->ev_pool);
	d->ev_pool = NULL;
	if (d->http_unix)
		evhttp_free(d->http_unix);
	if (d->http_tcp)
		evhttp_free(d->http_tcp);
	if (d->socket_path)
		unlink(d->socket_path);
	corral_log_close(d->log);
	if (d->lock_fd >= 0)
		close(d->lock_fd);
	if (d->base)
		event_base_free(d->base);
	free(d->socket_path);
	free(d->state_dir);
	free(d->token);
}

int cmd_serve(int argc, char **argv)
{
	struct daemon d = { .max_sandboxes = 1000, .lock_fd = -1, .watchdog_fd = -1 };
	const char *listen = NULL, *token_file = NULL;
	struct event *ev_term = NULL, *ev_int = NULL;
	int r;

	r = parse_args(&d, argc, argv, &listen, &token_file);
	if (r) {
		free(d.socket_path);
		free(d.state_dir);
		return r == 1 ? 0 : r;
	}
	if (!d.socket_path)
		d.socket_path = default_path("/run/corral/corral.sock",
					     "XDG_RUNTIME_DIR", NULL, NULL, "corral.sock");
	if (!d.state_dir)
		d.state_dir = default_path("/var/lib/corral", "XDG_STATE_HOME",
					   "HOME", ".local/state", "corral");
	if (!d.socket_path || !d.state_dir) {
		cli_error("no %s: set %s or pass %s", !d.socket_path ? "socket path" :
			  "state directory", !d.socket_path ? "XDG_RUNTIME_DIR" :
			  "HOME", !d.socket_path ? "--socket" : "--state-dir");
		daemon_free(&d);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	/*
	 * As root the file API works with the sandbox user's fs uid, but the
	 * supplementary groups would still be root's (gid 0 reads what is
	 * 0640 root:root): the daemon needs none.
	 */
	if (geteuid() == 0 && setgroups(0, NULL) < 0) {
		cli_error("setgroups: %s", strerror(errno));
		daemon_free(&d);
		return EXIT_CORRAL;
	}
	d.base = event_base_new();
	d.http_unix = d.base ? evhttp_new(d.base) : NULL;
	r = d.http_unix ? 0 : -ENOMEM;
	if (r == 0 && token_file)
		r = read_token(&d, token_file);
	if (r == 0)
		r = state_open(&d);
	if (r == 0) {
		setup_http(&d, d.http_unix);
		r = listen_unix(&d);
	}
	if (r == 0 && listen) {
		r = listen_tcp(&d, listen);
		if (r == 0)
			setup_http(&d, d.http_tcp);
	}
	if (r < 0) {
		if (r == -EADDRINUSE || r == -EBUSY) {
			free(d.socket_path);	/* not ours to remove */
			d.socket_path = NULL;
		}
		daemon_free(&d);
		return EXIT_CORRAL;
	}
	corral_cleanup_stale();
	start_watchdog(&d);
	warn_fd_limit(&d);
	ev_term = evsignal_new(d.base, SIGTERM, on_stop, &d);
	ev_int = evsignal_new(d.base, SIGINT, on_stop, &d);
	if (!ev_term || !ev_int || event_add(ev_term, NULL) < 0 ||
	    event_add(ev_int, NULL) < 0) {
		cli_error("cannot watch signals");
		daemon_free(&d);
		return EXIT_CORRAL;
	}
	pool_fill(&d);
	fprintf(stderr, "corral serve: listening on %s%s%s, state in %s\n",
		d.socket_path, listen ? " and " : "", listen ? listen : "",
		d.state_dir);
	event_base_dispatch(d.base);
	stop_watchdog(&d);
	d.pool_size = 0;
	if (d.ev_pool)
		event_free(d.ev_pool);
	d.ev_pool = NULL;
	shutdown_all(&d);
	event_free(ev_term);
	event_free(ev_int);
	evhttp_free(d.http_unix);
	d.http_unix = NULL;
	if (d.http_tcp)
		evhttp_free(d.http_tcp);
	d.http_tcp = NULL;
	/* what is left on the loop is the kernel's part of the destroys */
	event_base_dispatch(d.base);
	daemon_free(&d);
	return 0;
}
