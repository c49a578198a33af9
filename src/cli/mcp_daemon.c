/*
 * mcp_daemon.c - the daemon behind `corral mcp`.
 *
 * So that `{"command": "corral", "args": ["mcp"]}` is the whole setup, a
 * session with no daemon to talk to starts its own: a child process running
 * daemon_run() on a socket in a private 0700 directory (with its state
 * directory, so the audit log is its own too), stopped and removed when the
 * session ends.  The child gets SIGTERM when we die (PR_SET_PDEATHSIG), so
 * a killed session leaves no daemon behind; the daemon itself destroys its
 * sandboxes on SIGTERM.
 */
#include "mcp.h"
#include "../daemon/daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define START_TRIES	200	/* x 50 ms: how long a private daemon may take */

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* The HTTP status of GET /v1/health at d's target; 0 when none came. */
/* The daemon's HTTP status for /v1/health; 0 with *why (if asked) if none. */
static long health(const struct mcp_daemon *d, char **why_out)
{
	struct mcp_http h = { .max = 65536 };
	char *why = NULL;
	long status = 0;

	if (mcp_http_do(d, "GET", "/v1/health", NULL, 0, NULL, &h, &why) == 0)
		status = h.status;
	if (why_out && !status) {
		*why_out = why;
		why = NULL;
	}
	free(why);
	mcp_http_free(&h);
	return status;
}

static bool answers(const struct mcp_daemon *d)
{
	return health(d, NULL) == 200;
}

/* The child: the daemon, with stdout (the protocol's) sent to stderr. */
static void run_daemon(struct mcp_daemon *d, pid_t parent)
{
	struct daemon_opts o = {
		.socket_path = d->socket_path, .state_dir = d->state_dir,
		.max_sandboxes = 1000,
	};
	struct corral_err err = { 0 };

	/* the session may have died before the death signal was set */
	if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent)
		_exit(EXIT_CORRAL);
	if (dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
		_exit(EXIT_CORRAL);
	close(STDIN_FILENO);
	if (open("/dev/null", O_RDONLY | O_CLOEXEC) < 0)
		_exit(EXIT_CORRAL);
	if (daemon_run(&o, &err) < 0) {
		fprintf(stderr, "corral mcp: the private daemon could not start: %s\n",
			err.msg);
		_exit(EXIT_CORRAL);
	}
	_exit(0);
}

static int private_paths(struct mcp_daemon *d)
{
	const char *tmp = getenv("TMPDIR");
	char *tmpl;

	if (!tmp || tmp[0] != '/')
		tmp = "/tmp";
	if (asprintf(&tmpl, "%s/corral-mcp.XXXXXX", tmp) < 0)
		return out_of_memory("naming the private daemon's directory");
	/* mkdtemp makes it 0700: nobody else reaches the socket in it */
	if (!mkdtemp(tmpl)) {
		cli_error("mcp: cannot make a private directory %s: %s", tmpl,
			  strerror(errno));
		free(tmpl);
		return EXIT_CORRAL;
	}
	d->dir = tmpl;
	if (asprintf(&d->socket_path, "%s/corral.sock", d->dir) < 0 ||
	    asprintf(&d->state_dir, "%s/state", d->dir) < 0)
		return out_of_memory("naming the private daemon's socket");
	if (mkdir(d->state_dir, 0700) < 0) {
		cli_error("mcp: mkdir %s: %s", d->state_dir, strerror(errno));
		return EXIT_CORRAL;
	}
	return 0;
}

static int start_private(struct mcp_daemon *d)
{
	int code = private_paths(d), status;
	pid_t self = getpid();

	if (code)
		return code;
	free(d->conn.base);
	d->conn.base = strdup("http://localhost");
	if (!d->conn.base)
		return out_of_memory("the private daemon's address");
	d->conn.socket = d->socket_path;
	d->conn.socket_from = "the session's private daemon";
	fflush(NULL);
	d->pid = fork();
	if (d->pid < 0) {
		d->pid = 0;
		cli_error("mcp: fork: %s", strerror(errno));
		return EXIT_CORRAL;
	}
	if (d->pid == 0)
		run_daemon(d, self);
	for (int i = 0; i < START_TRIES; i++) {
		if (answers(d)) {
			fprintf(stderr, "corral mcp: started a private daemon (pid %d) on %s\n",
				(int)d->pid, d->socket_path);
			return 0;
		}
		if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
			d->pid = 0;
			cli_error("mcp: the private daemon exited before it answered (status 0x%x)",
				  status);
			return EXIT_CORRAL;
		}
		sleep_ms(50);
	}
	cli_error("mcp: the private daemon did not answer on %s within %d s",
		  d->socket_path, START_TRIES * 50 / 1000);
	return EXIT_CORRAL;
}

int mcp_daemon_open(struct mcp_daemon *d, const struct verb *v, bool private)
{
	bool named = d->conn.socket || d->conn.url || getenv("CORRAL_SOCKET");
	long status = 0;
	char *why = NULL;
	int code;

	if (private && named)
		return verb_usage_error(v, "--private excludes --socket, --url and $CORRAL_SOCKET");
	if (private)
		return start_private(d);
	code = conn_target(&d->conn, v);
	if (code && named)
		return code;
	if (!code && d->conn.socket && sock_foreign(&d->conn))
		return EXIT_CORRAL;
	if (!code && (status = health(d, &why)) == 200) {
		fprintf(stderr, "corral mcp: using the daemon at %s\n",
			d->conn.socket ? d->conn.socket : d->conn.url);
		return 0;
	}
	if (named && status) {
		cli_error("mcp: the daemon at %s answered HTTP %ld%s",
			  d->conn.socket ? d->conn.socket : d->conn.url, status,
			  status == 401 ? ": the token of --token-file is not its token" : "");
		return EXIT_CORRAL;
	}
	if (named) {
		/*
		 * Over TCP, why names the daemon and what TLS or the network
		 * said; over a socket, libcurl's words would name port 80.
		 */
		if (why && d->conn.url)
			cli_error("mcp: %s; start one with `corral serve`, or leave out --socket/--url to have corral mcp start its own",
				  why);
		else
			cli_error("mcp: no daemon answers at %s; start one with `corral serve`, or leave out --socket/--url to have corral mcp start its own",
				  d->conn.socket ? d->conn.socket : d->conn.url);
		free(why);
		return EXIT_CORRAL;
	}
	free(why);
	return start_private(d);
}

static int remove_entry(const char *path, const struct stat *st, int flag,
			struct FTW *ftw)
{
	if (remove(path) < 0 && errno != ENOENT)
		fprintf(stderr, "corral mcp: cannot remove %s: %s\n", path,
			strerror(errno));
	return 0;
}

void mcp_daemon_close(struct mcp_daemon *d)
{
	int status;

	if (d->pid > 0) {
		kill(d->pid, SIGTERM);
		/* it destroys its sandboxes first: give it a while, bounded */
		for (int i = 0; i < 200; i++) {
			if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
				d->pid = 0;
				break;
			}
			sleep_ms(50);
		}
		if (d->pid > 0) {
			fprintf(stderr, "corral mcp: the private daemon did not stop in 10 s; killing it\n");
			kill(d->pid, SIGKILL);
			waitpid(d->pid, &status, 0);
			d->pid = 0;
		}
	}
	if (d->dir)
		nftw(d->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(d->dir);
	free(d->socket_path);
	free(d->state_dir);
	d->dir = d->socket_path = d->state_dir = NULL;
	conn_close(&d->conn);
}
