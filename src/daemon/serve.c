/*
 * serve.c - corral serve: daemon_run(), the listeners, the watchdog,
 * start and stop (the state directory: state.c).  The API itself is in api.c; the command line that fills
 * struct daemon_opts is the front end's (src/cli/serve.c).
 *
 * One process, one event loop: every sandbox's supervisor, every request
 * and every follower of the event stream share it.  What would hold it
 * for long, killing what a destroyed sandbox left (frozen on the loop)
 * and removing its cgroups, runs in a short-lived helper process
 * (cgroup_reap.c; a process, not a thread, says why).  The sandboxes die
 * with the daemon (their init has a parent-death signal and reads EOF on
 * its control socket); what a killed daemon leaves behind, cgroups and
 * state files, is removed by the next start.
 */
#include "api.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* ---- listeners ------------------------------------------------------------- */

/*
 * A dead daemon's socket is in our way and goes; anything else at that
 * name is not ours: -EEXIST (a mistyped --socket must not delete a file).
 */
static int unlink_socket(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
}

/*
 * Bound and listening under a name of its own, then renamed to path: a
 * client that finds the socket (a test's or a supervisor's readiness
 * check) never meets one still between bind and listen, where connect
 * is refused.  0600 from birth: no window in which another user could
 * connect.  A path with no room for the suffix is bound in place.
 */
static int bind_listening(int fd, struct sockaddr_un *sa, const char *path)
{
	char tmp[sizeof(sa->sun_path)];
	bool aside = snprintf(tmp, sizeof(tmp), "%s.new", path) < (int)sizeof(tmp);
	bool bound;
	mode_t old;
	int r;

	if (aside) {
		unlink_socket(tmp);	/* a dead daemon's, half made */
		strcpy(sa->sun_path, tmp);
	}
	old = umask(0177);
	r = bind(fd, (struct sockaddr *)sa, sizeof(*sa));
	umask(old);
	bound = r == 0;
	if (r == 0)
		r = listen(fd, 1024);
	if (r == 0 && aside)
		r = rename(tmp, path);
	r = r < 0 ? -errno : 0;
	/* only the name we bound is ours to take back */
	if (r < 0 && aside && bound)
		unlink(tmp);
	strcpy(sa->sun_path, path);
	return r;
}

static int listen_unix(struct daemon *d, struct corral_err *err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct evhttp_bound_socket *bound;
	char dir[PATH_MAX], *slash;
	struct stat st;
	int fd, r;

	if (strlen(d->socket_path) >= sizeof(sa.sun_path))
		return corral_set_err(err, -ENAMETOOLONG, "socket path %s is longer than %zu bytes",
				      d->socket_path, sizeof(sa.sun_path) - 1);
	snprintf(dir, sizeof(dir), "%s", d->socket_path);
	slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		r = daemon_mkdir_p(dir, 0700);
		if (r < 0)
			return corral_set_errno(err, -r, "socket directory %s",
					      dir);
	}
	strcpy(sa.sun_path, d->socket_path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return corral_set_errno(err, errno, "socket");
	/* a live daemon answers on it; a dead one's socket is in our way */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		close(fd);
		return corral_set_err(err, -EADDRINUSE, "a daemon is already listening on %s",
				      d->socket_path);
	}
	close(fd);
	r = unlink_socket(d->socket_path);
	if (r == -EEXIST)
		return corral_set_err(err, r, "%s exists and is not a socket: not "
				      "replaced (--socket names the daemon's socket)",
				      d->socket_path);
	if (r < 0)
		return corral_set_errno(err, -r, "cannot remove the old socket %s",
				      d->socket_path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return corral_set_errno(err, errno, "socket");
	r = bind_listening(fd, &sa, d->socket_path);
	d->socket_bound = r == 0;
	if (r < 0) {
		close(fd);
		return corral_set_errno(err, -r, "cannot listen on %s",
				      d->socket_path);
	}
	/* the socket itself, under any name, is no client's to bind (api_access.c) */
	if (stat(d->socket_path, &st) < 0) {
		r = -errno;
		close(fd);
		return corral_set_errno(err, -r, "stat %s", d->socket_path);
	}
	d->socket_dev = st.st_dev;
	d->socket_ino = st.st_ino;
	bound = evhttp_accept_socket_with_handle(d->http_unix, fd);
	if (!bound) {
		close(fd);
		return corral_set_err(err, -ENOMEM, "cannot listen on %s: libevent did not take the socket",
				      d->socket_path);
	}
	return api_gate_listen(d, d->http_unix, bound, d->socket_path, false, err);
}

/*
 * The first line of file, into the vault (no fork of the daemon has it);
 * read with read(2) into the stack, not stdio, whose buffer would be
 * freed with the token still in it.
 */
static int read_token(struct daemon *d, const char *file,
		      struct corral_err *err)
{
	char buf[512];
	struct stat st;
	ssize_t n;
	int fd = open(file, O_RDONLY | O_CLOEXEC | O_NOCTTY), r = 0;

	if (fd < 0)
		return corral_set_errno(err, errno, "token file %s", file);
	if (fstat(fd, &st) == 0 && (st.st_mode & 077))
		fprintf(stderr, "corral: warning: token file %s is open to its "
			"group or others (mode %o)\n", file, st.st_mode & 0777);
	while ((n = read(fd, buf, sizeof(buf) - 1)) < 0 && errno == EINTR)
		;
	r = n < 0 ? -errno : 0;
	close(fd);
	if (r < 0)
		return corral_set_errno(err, -r, "token file %s", file);
	buf[n] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	if (!buf[0])
		r = corral_set_err(err, -EINVAL, "token file %s is empty", file);
	else if (strlen(buf) < 16)
		r = corral_set_err(err, -EINVAL, "the token in %s is shorter than 16 characters",
				   file);
	else if (!(d->token = corral_secret_dup(buf, strlen(buf))))
		r = corral_set_errno(err, errno, "no memory for the token of %s", file);
	explicit_bzero(buf, sizeof(buf));
	return r;
}

/* 127.0.0.0/8, ::1 or "localhost": no one else sees what passes. */
static bool is_loopback(const char *host)
{
	struct in6_addr a6;
	struct in_addr a4;

	if (!strcmp(host, "localhost"))
		return true;
	if (inet_pton(AF_INET, host, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	return inet_pton(AF_INET6, host, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

/*
 * HOST's first address, bound and listening, as libevent's own bind would
 * have it (SO_REUSEADDR, the first address getaddrinfo gives), but done
 * here so that a port in use says so rather than only that it failed.
 */
static int tcp_listener(const char *host, long port, const char *spec,
			int *fdp, struct corral_err *err)
{
	struct addrinfo hints = {
		.ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM,
		.ai_flags = AI_PASSIVE,
	};
	struct addrinfo *ai;
	char serv[8];
	int fd, one = 1, r;

	snprintf(serv, sizeof(serv), "%ld", port);
	r = getaddrinfo(host, serv, &hints, &ai);
	if (r)
		return corral_set_err(err, -EADDRNOTAVAIL, "--listen %s: %s", spec,
				      r == EAI_SYSTEM ? strerror(errno) : gai_strerror(r));
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		r = -errno;
		freeaddrinfo(ai);
		return corral_set_errno(err, -r, "cannot listen on %s: socket", spec);
	}
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 1024) < 0) {
		r = -errno;
		close(fd);
		freeaddrinfo(ai);
		return corral_set_errno(err, -r, "cannot listen on %s", spec);
	}
	freeaddrinfo(ai);
	*fdp = fd;
	return 0;
}

static int listen_tcp(struct daemon *d, const char *spec,
		      struct corral_err *err)
{
	char host[256];
	const char *colon = strrchr(spec, ':');
	struct evhttp_bound_socket *bound;
	char *end;
	long port;
	int fd = -1, r;

	if (!colon || colon == spec || (size_t)(colon - spec) >= sizeof(host))
		return corral_set_err(err, -EINVAL, "--listen: expected HOST:PORT (got \"%s\")",
				      spec);
	port = strtol(colon + 1, &end, 10);
	if (*end || port < 1 || port > 65535)
		return corral_set_err(err, -EINVAL, "--listen: bad port in \"%s\"",
				      spec);
	snprintf(host, sizeof(host), "%.*s", (int)(colon - spec), spec);
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		memmove(host, host + 1, strlen(host));
		host[strlen(host) - 1] = '\0';
	}
	if (!d->tls && !is_loopback(host))
		return corral_set_err(err, -EPERM, "--listen %s: not a loopback address, and "
				      "without --tls-cert and --tls-key the token and every "
				      "request would cross the network in clear; give them, or "
				      "listen on 127.0.0.1 behind a TLS proxy", spec);
	r = tcp_listener(host, port, spec, &fd, err);
	if (r < 0)
		return r;
	d->http_tcp = evhttp_new(d->base);
	bound = d->http_tcp ? evhttp_accept_socket_with_handle(d->http_tcp, fd) : NULL;
	if (!bound) {
		close(fd);
		return corral_set_err(err, -ENOMEM, "cannot listen on %s: libevent did not take the socket",
				      spec);
	}
	return api_gate_listen(d, d->http_tcp, bound, spec, true, err);
}

#define HTTP_STALL_TIMEOUT_S	900

/*
 * evhttp's read and write timeout, seconds; CORRAL_TEST_HTTP_TIMEOUT
 * makes it shorter, for the tests of what must outlive it.
 */
static int stall_timeout(void)
{
	const char *t = getenv("CORRAL_TEST_HTTP_TIMEOUT");
	long s = t && *t ? strtol(t, NULL, 10) : 0;

	return s > 0 && s < HTTP_STALL_TIMEOUT_S ? (int)s : HTTP_STALL_TIMEOUT_S;
}

static void setup_http(struct daemon *d, struct evhttp *http)
{
	evhttp_set_max_body_size(http, API_FILE_MAX + 1);
	evhttp_set_max_headers_size(http, 64 * 1024);
	/*
	 * A body that stalls, a client that stops reading an answer; idle
	 * connections and slow heads are the gate's (api_gate.c), in seconds.
	 * A call with a body runs as long as its own timeout: evhttp stops
	 * reading once the body is in.  A request without one (a GET, a POST
	 * of none) leaves the connection read, and its read timeout running
	 * while it is answered: the gate takes it off while the API holds a
	 * request (api_gate_request), and a connection held open by design
	 * (a lease, a terminal) has its timeouts taken off (api_gate_upgrade).
	 */
	d->http_timeout_s = stall_timeout();
	evhttp_set_timeout(http, d->http_timeout_s);
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
/*
 * Whether the daemon's pid is still the daemon's, or nobody's.  Once the
 * daemon is reaped its pid is anyone's (a sandbox wraps this host's
 * pid_max in seconds), and the groups named by it are another live
 * process's: not ours to remove (the next start sweeps ours once that
 * process is gone).  A zombie still holds its pid.
 */
static bool daemon_pid_ours(int pidfd, pid_t daemon)
{
	if (pidfd < 0)
		return true;	/* no pidfd: as before it */
	if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) == 0)
		return true;
	return kill(daemon, 0) < 0 && errno == ESRCH;
}

static void watchdog_main(int fd, pid_t daemon)
{
	ssize_t n;
	char c = 0;
	int pidfd;

	prctl(PR_SET_NAME, "corral-watchdog", 0, 0, 0);
	/* nothing of the daemon's: not its socket, not its lock */
	if (fd > 3)
		syscall(SYS_close_range, 3, fd - 1, 0);
	syscall(SYS_close_range, fd + 1, ~0U, 0);
	signal(SIGTERM, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	/* exact while the daemon is our parent: else it died meanwhile */
	pidfd = (int)syscall(SYS_pidfd_open, daemon, 0);
	if (pidfd >= 0 && getppid() != daemon) {
		close(pidfd);
		pidfd = -1;
	}
	while ((n = read(fd, &c, 1)) < 0 && errno == EINTR)
		;
	if (n == 1 && c == 'q')
		_exit(0);
	if (!daemon_pid_ours(pidfd, daemon)) {
		fprintf(stderr, "corral-watchdog: pid %d is another process's now: "
			"the daemon's cgroups are left to the next start's sweep\n",
			(int)daemon);
		_exit(0);
	}
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

/*
 * SIGHUP, with TLS: the certificate, key and client CA read again from the
 * same names (a renewal).  Connections open keep what they began with; a
 * reload that fails leaves the old ones serving, said in one line.
 */
static void on_reload(evutil_socket_t sig, short what, void *arg)
{
	struct daemon *d = arg;
	struct corral_err err = { 0 };

	(void)sig;
	(void)what;
	if (corral_tls_server_reload(d->tls, &err) < 0)
		fprintf(stderr, "corral serve: SIGHUP: TLS not reloaded, the old "
			"certificate and key still serve: %s\n", err.msg);
	else
		fprintf(stderr, "corral serve: SIGHUP: TLS reloaded\n");
}

static void shutdown_all(struct daemon *d)
{
	while (d->sandboxes)
		sandbox_destroy(d->sandboxes, "the daemon stopped");
	leases_stop(d);
	api_events_stop(d);
	api_builds_stop(d);
	while (d->followers) {
		struct follower *f = d->followers;

		d->followers = f->next;
		api_set_closecb(d, f->req, NULL, NULL);
		api_reply_end(f->req);
		free(f);
	}
}

/*
 * Every connection and every sandbox holds fds: take the hard limit of
 * open files as ours, so that the default soft limit (often 1024) is not
 * what stops the daemon.
 */
static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			fprintf(stderr, "corral serve: warning: cannot raise the "
				"open-files limit to %llu: %s\n",
				(unsigned long long)rl.rlim_max, strerror(errno));
	}
}

/*
 * Each sandbox holds about six fds here, and one with calls up to seven
 * more (its counters' files, kept until it freezes or has been idle 10 s;
 * from its start, until its first tick if no call comes, too):
 * say when the limit is the cap.
 */
#define FDS_A_BUSY_SANDBOX	13

static void warn_fd_limit(const struct daemon *d)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur < d->max_sandboxes * FDS_A_BUSY_SANDBOX + 128)
		fprintf(stderr, "corral serve: warning: the open-files limit (%llu) "
			"allows about %llu busy sandboxes, fewer than --max-sandboxes %zu; "
			"raise it with ulimit -n\n", (unsigned long long)rl.rlim_cur,
			(unsigned long long)(rl.rlim_cur > 128 ?
					     (rl.rlim_cur - 128) / FDS_A_BUSY_SANDBOX : 0),
			d->max_sandboxes);
}

static void daemon_free(struct daemon *d)
{
	stop_watchdog(d);
	if (d->ev_pool)
		event_free(d->ev_pool);
	d->ev_pool = NULL;
	api_gate_stop(d);
	if (d->http_unix)
		evhttp_free(d->http_unix);
	if (d->http_tcp)
		evhttp_free(d->http_tcp);
	d->http_unix = d->http_tcp = NULL;
	api_gate_free(d);
	corral_tls_server_free(d->tls);
	d->tls = NULL;
	/* a start that failed before its bind leaves a live daemon's alone */
	if (d->socket_bound)
		unlink(d->socket_path);
	corral_log_close(d->log);
	corral_snapshot_tally_free(d->snap_tally);
	d->snap_tally = NULL;
	if (d->record_fd >= 0)
		close(d->record_fd);
	if (d->lock_fd >= 0)
		close(d->lock_fd);
	if (d->base)
		event_base_free(d->base);
	free(d->socket_path);
	free(d->state_dir);
	corral_secret_free(d->token);
	for (size_t i = 0; d->access.allow_paths && i < d->access.nallow_paths; i++)
		free(d->access.allow_paths[i]);
	free(d->access.allow_paths);
	for (size_t i = 0; d->allow_named && i < d->access.nallow_paths; i++)
		free(d->allow_named[i]);
	free(d->allow_named);
	free(d->state_real);
	free(d->socket_dir_real);
	free(d->key_real[0]);
	free(d->key_real[1]);
	corral_policy_free(d->bound);
	free(d->bound);
	corral_policy_free(&d->builtin);
	json_decref(d->bound_json);
	d->bound = NULL;
	d->bound_json = NULL;
}

/* The paths are the daemon's own copies: daemon_free() frees them. */
static int daemon_init(struct daemon *d, const struct daemon_opts *o,
		       struct corral_err *err)
{
	*d = (struct daemon){
		.max_sandboxes = o->max_sandboxes, .pool_size = o->pool_size,
		.snapshot_budget = o->snapshot_bytes,
		.lock_fd = -1, .record_fd = -1, .watchdog_fd = -1, .limits = o->limits,
	};
	corral_policy_init(&d->builtin);
	if (!d->limits.max_connections)
		d->limits.max_connections = DAEMON_MAX_CONNECTIONS;
	if (!d->limits.max_per_peer)
		d->limits.max_per_peer = DAEMON_MAX_PER_PEER;
	if (!d->limits.header_timeout_s)
		d->limits.header_timeout_s = DAEMON_HEADER_TIMEOUT_S;
	if (!d->limits.idle_timeout_s)
		d->limits.idle_timeout_s = DAEMON_IDLE_TIMEOUT_S;
	if (!d->limits.max_leases)
		d->limits.max_leases = DAEMON_MAX_LEASES;
	if (!d->limits.tls_handshake_rate)
		d->limits.tls_handshake_rate = DAEMON_TLS_HANDSHAKE_RATE;
	if (!d->limits.lease_timeout_s)
		d->limits.lease_timeout_s = DAEMON_LEASE_TIMEOUT_S;
	if (!d->limits.tty_idle_timeout_s)
		d->limits.tty_idle_timeout_s = DAEMON_TTY_IDLE_TIMEOUT_S;
	if (!d->limits.answer_memory)
		d->limits.answer_memory = DAEMON_ANSWER_MEMORY;
	if (!d->limits.max_ttl_s)
		d->limits.max_ttl_s = DAEMON_MAX_TTL_S;
	if (!d->limits.max_idle_freeze_s)
		d->limits.max_idle_freeze_s = DAEMON_MAX_IDLE_FREEZE_S;
	if (!d->limits.max_sandboxes_per_peer)
		d->limits.max_sandboxes_per_peer = DAEMON_MAX_SANDBOXES_PER_PEER;
	if (o->listen && !o->token_file)
		return corral_set_err(err, -EINVAL, "listening on %s needs a token: the API is never open on TCP without one",
				      o->listen);
	if (!o->tls_cert != !o->tls_key || (o->tls_cert && !o->listen))
		return corral_set_err(err, -EINVAL, "--tls-cert and --tls-key go together, "
				      "with --listen");
	if (o->tls_client_ca && !o->tls_cert)
		return corral_set_err(err, -EINVAL, "--tls-client-ca needs --tls-cert and --tls-key");
	d->socket_path = strdup(o->socket_path);
	d->state_dir = strdup(o->state_dir);
	if (!d->socket_path || !d->state_dir) {
		free(d->socket_path);
		free(d->state_dir);
		return corral_set_err(err, -ENOMEM, "out of memory for the paths %s and %s",
				      o->socket_path, o->state_dir);
	}
	return 0;
}

/*
 * --policy FILE: checked by the loader first (its errors name the line),
 * then kept as JSON, what a client's policy is laid over; the bound is
 * that JSON loaded as a create's base is, so the two cannot differ.
 */
static int policy_init(struct daemon *d, const char *file, struct corral_err *err)
{
	struct corral_policy check;
	json_error_t jerr;
	int r;

	if (!file)
		return 0;
	corral_policy_init(&check);
	r = corral_policy_load_file(&check, file, err);
	corral_policy_free(&check);
	if (r < 0)
		return r;
	/* read again: the file may have changed since (an editor's save) */
	d->bound_json = json_load_file(file, JSON_REJECT_DUPLICATES, &jerr);
	if (!d->bound_json)
		return corral_set_err(err, -EINVAL, "--policy %s: line %d: %s", file,
				      jerr.line, jerr.text);
	if (!json_is_object(d->bound_json))
		return corral_set_err(err, -EINVAL, "--policy %s: not a JSON object",
				      file);
	d->bound = daemon_policy(d, NULL, err);
	if (!d->bound)
		return err->code;
	/*
	 * Valid anywhere, but not here (a file-table share this host has not):
	 * said now, not by every create and every pool step after.
	 */
	if (corral_policy_check_host(d->bound, err) < 0) {
		char why[sizeof(err->msg)];

		snprintf(why, sizeof(why), "%s", err->msg);
		return corral_set_err(err, err->code, "--policy %s: no sandbox of it "
				      "can start on this host: %s", file, why);
	}
	return 0;
}

/*
 * What clients may use, resolved as their paths will be: the operator's
 * prefixes, and the directories no client may ever reach.
 */
static int access_init(struct daemon *d, const struct daemon_opts *o,
		       struct corral_err *err)
{
	char dir[PATH_MAX], *slash;

	d->access = o->access;
	d->access.allow_paths = calloc(o->access.nallow_paths + 1, sizeof(char *));
	if (!d->access.allow_paths)
		return corral_set_err(err, -ENOMEM, "out of memory for --allow-host-path");
	d->allow_named = calloc(o->access.nallow_paths + 1, sizeof(char *));
	if (!d->allow_named)
		return corral_set_err(err, -ENOMEM, "out of memory for --allow-host-path");
	for (size_t i = 0; i < o->access.nallow_paths; i++) {
		d->access.allow_paths[i] = realpath(o->access.allow_paths[i], NULL);
		if (!d->access.allow_paths[i])
			return corral_set_err(err, -errno, "--allow-host-path %s: %s",
					      o->access.allow_paths[i], strerror(errno));
		/*
		 * As named too, in the form a client's host path takes (a
		 * policy's): NULL for a relative one, or one with "..", which
		 * only its resolved form names.
		 */
		if (corral_path_normalise(o->access.allow_paths[i], &d->allow_named[i],
					  &(struct corral_err){ 0 }) < 0)
			d->allow_named[i] = NULL;
	}
	/* as root, no range given: a sandbox runs as 65534, whoever owns what */
	if (!o->access.uid_range)
		d->access.uid_min = d->access.uid_max = 65534;
	snprintf(dir, sizeof(dir), "%s", d->socket_path);
	slash = strrchr(dir, '/');
	if (slash)
		*(slash == dir ? slash + 1 : slash) = '\0';
	d->state_real = realpath(d->state_dir, NULL);
	d->socket_dir_real = realpath(slash ? dir : ".", NULL);
	if (!d->state_real || !d->socket_dir_real)
		return corral_set_err(err, -errno, "cannot resolve %s or %s: %s",
				      d->state_dir, dir, strerror(errno));
	/* the token's and the TLS key's files: whoever reads one is a client */
	for (size_t i = 0; i < 2; i++) {
		const char *f = i ? o->tls_key : o->token_file;

		if (f && !(d->key_real[i] = realpath(f, NULL)))
			return corral_set_errno(err, errno, "cannot resolve %s", f);
	}
	return 0;
}

/* Everything that can fail before the first request: err says what. */
static int daemon_start(struct daemon *d, const struct daemon_opts *o,
			struct corral_err *err)
{
	int r;

	/*
	 * Every fork of ours forgets libevent's blocks (a sandbox's init) or
	 * never touches them (the helpers, the watchdog): none inherits them,
	 * and a burst of creates copies none of their pages (livemem.c).
	 */
	r = corral_memory_unshared();
	if (r < 0)
		return corral_set_errno(err, -r, "cannot keep libevent's memory "
					"from the daemon's forks (MADV_WIPEONFORK)");
	/* each sandbox's start then skips 3 ms of seccomp filling (root) */
	r = corral_seccomp_prefill(err);
	if (r < 0)
		return r;
	/* unprivileged (none filled above): on a thread, cloning the inits */
	corral_launcher_start();
	d->base = event_base_new();
	/*
	 * Three priorities, every event in the middle one unless it says
	 * otherwise: the boxes' housekeeping (the next call's group and
	 * process, sweeping empty groups) takes the lowest, so that an
	 * answer ready in the same turn of the loop is written first.
	 */
	if (d->base && event_base_priority_init(d->base, 3) < 0)
		return corral_set_err(err, -ENOMEM, "cannot set up the event "
				      "loop's priorities (libevent)");
	d->http_unix = d->base ? evhttp_new(d->base) : NULL;
	if (!d->http_unix)
		return corral_set_err(err, -ENOMEM, "cannot set up the event loop (libevent)");
	if (o->token_file) {
		r = read_token(d, o->token_file, err);
		if (r < 0)
			return r;
	}
	r = state_open(d, err);
	if (r < 0)
		return r;
	setup_http(d, d->http_unix);
	if (!o->listen)
		return 0;
	if (o->tls_cert && !(d->tls = corral_tls_server_new(o->tls_cert, o->tls_key,
							    o->tls_client_ca, err)))
		return err->code;
	r = listen_tcp(d, o->listen, err);
	if (r == 0)
		setup_http(d, d->http_tcp);
	return r;
}

/*
 * The socket, last: a client (a script, a unit's ExecStartPost) that sees
 * it takes the daemon for ready, and may at once reach --listen or send
 * SIGHUP or SIGTERM.  Made before the TLS files were read (a long chain,
 * a slow disk), it let the port refuse and the signals take their
 * default action: the daemon killed by a reload.
 */
static int daemon_publish(struct daemon *d, const struct daemon_opts *o,
			  struct corral_err *err)
{
	int r = listen_unix(d, err);

	return r < 0 ? r : access_init(d, o, err);
}

int daemon_run(const struct daemon_opts *o, struct corral_err *err)
{
	struct event *ev_term = NULL, *ev_int = NULL, *ev_hup = NULL;
	struct daemon d;
	int r;

	r = daemon_init(&d, o, err);
	if (r < 0)
		return r;
	r = policy_init(&d, o->policy_file, err);
	if (r < 0) {
		daemon_free(&d);
		return r;
	}
	signal(SIGPIPE, SIG_IGN);
	raise_fd_limit();
	/*
	 * As root the file API works with the sandbox user's fs uid, but the
	 * supplementary groups would still be root's (gid 0 reads what is
	 * 0640 root:root): the daemon needs none.
	 */
	if (geteuid() == 0 && setgroups(0, NULL) < 0) {
		r = corral_set_errno(err, errno, "setgroups");
		daemon_free(&d);
		return r;
	}
	r = daemon_start(&d, o, err);
	if (r < 0) {
		daemon_free(&d);
		return r;
	}
	corral_cleanup_stale();
	start_watchdog(&d);
	warn_fd_limit(&d);
	ev_term = evsignal_new(d.base, SIGTERM, on_stop, &d);
	ev_int = evsignal_new(d.base, SIGINT, on_stop, &d);
	/* without TLS there is nothing to reload: SIGHUP keeps its default */
	if (d.tls)
		ev_hup = evsignal_new(d.base, SIGHUP, on_reload, &d);
	if (!ev_term || !ev_int || (d.tls && !ev_hup) || event_add(ev_term, NULL) < 0 ||
	    event_add(ev_int, NULL) < 0 || (ev_hup && event_add(ev_hup, NULL) < 0)) {
		r = corral_set_err(err, -ENOMEM, "cannot watch SIGTERM, SIGINT and SIGHUP (libevent)");
		if (ev_term)
			event_free(ev_term);
		if (ev_int)
			event_free(ev_int);
		if (ev_hup)
			event_free(ev_hup);
		daemon_free(&d);
		return r;
	}
	r = daemon_publish(&d, o, err);
	if (r < 0) {
		event_free(ev_term);
		event_free(ev_int);
		if (ev_hup)
			event_free(ev_hup);
		daemon_free(&d);
		return r;
	}
	pool_fill(&d);
	fprintf(stderr, "corral serve: listening on %s%s%s%s, state in %s\n",
		d.socket_path, o->listen ? " and " : "", o->listen ? o->listen : "",
		d.tls ? " (TLS)" : "", d.state_dir);
	event_base_dispatch(d.base);
	stop_watchdog(&d);
	d.pool_size = 0;
	if (d.ev_pool)
		event_free(d.ev_pool);
	d.ev_pool = NULL;
	shutdown_all(&d);
	event_free(ev_term);
	event_free(ev_int);
	if (ev_hup)
		event_free(ev_hup);
	api_gate_stop(&d);
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
