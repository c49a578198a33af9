/*
 * mcp_reaper.c - the sandboxes a session made on a shared daemon, removed
 * when the session ends.
 *
 * A private daemon takes the session's sandboxes with it: it destroys them
 * on the SIGTERM it gets when the session ends or dies.  A shared daemon
 * (--socket, --url, $CORRAL_SOCKET, the default socket) outlives the
 * session, and would keep what the session made for ever.
 *
 * A daemon with leases (POST /v1/leases) removes them itself when the
 * session's lease connection ends (mcp_lease.c): the kernel closes it
 * whatever killed the session, its whole cgroup or the OOM killer too,
 * and every create carries the lease, so the daemon has bound a sandbox
 * before its id reaches us.  Still, at a session's own end (stdin's end,
 * SIGTERM, SIGINT, SIGHUP) the sandboxes are DELETEd here, by this
 * process, before the lease is closed: the session then exits only once
 * its sandboxes are gone, says which it removed, and exits 125 naming any
 * it could not (a daemon that stopped answering), rather than leave the
 * removal to happen some time after its exit.
 *
 * A daemon without leases (404 to POST /v1/leases: older than this corral)
 * or that refused one (503: its --max-leases reached) gets what was done
 * before leases, and is the only reason the forked reaper remains: a
 * child forked at the start.  The session tells it each sandbox made
 * ("+ID\n") and destroyed ("-ID\n") over a pipe; the pipe's end is its cue
 * to DELETE those still there.  The pipe ends when the session does,
 * whatever way: stdin's end, a signal, SIGKILL.  So that a signal sent to
 * the session's process group (a terminal's ^C, `timeout -s KILL`) does
 * not take the reaper too, it has a process group of its own and ignores
 * SIGTERM, SIGINT and SIGHUP; it ends by itself within MCP_REAP_SECONDS.
 * What that still leaves behind: the reaper itself killed (a SIGKILL to
 * its pid, to the whole cgroup, the OOM killer), and a sandbox whose
 * create the daemon had answered when the session was SIGKILLed before
 * it told the reaper.
 */
#include "mcp.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define REAP_REQUEST_MS		10000	/* one DELETE, at most */
/*
 * One DELETE once another got no answer at all: a daemon stopped or hung
 * would cost REAP_REQUEST_MS a sandbox, 10 s for each the session made,
 * to no end; it is still asked, in case it only lost one request.
 */
#define REAP_SILENT_MS		1000
#define REAP_LINE_MAX		(CORRAL_SANDBOX_ID_MAX + 2)	/* "+ID" */

/* The session's live sandboxes, as the reaper knows them. */
struct mcp_live {
	char **ids;
	size_t n, cap;
};

static void live_add(struct mcp_live *l, const char *id)
{
	char *dup = strdup(id), **grown;

	if (dup && l->n == l->cap) {
		grown = realloc(l->ids, (l->cap ? l->cap * 2 : 16) * sizeof(*grown));
		if (grown) {
			l->ids = grown;
			l->cap = l->cap ? l->cap * 2 : 16;
		}
	}
	if (!dup || l->n == l->cap) {
		fprintf(stderr, "corral mcp: out of memory recording sandbox %s: it will not be removed at the session's end\n",
			id);
		free(dup);
		return;
	}
	l->ids[l->n++] = dup;
}

static void live_drop(struct mcp_live *l, const char *id)
{
	for (size_t i = 0; i < l->n; i++) {
		if (strcmp(l->ids[i], id))
			continue;
		free(l->ids[i]);
		l->ids[i] = l->ids[--l->n];
		return;
	}
}

static void on_line(struct mcp_live *l, char *line)
{
	if ((line[0] != '+' && line[0] != '-') || !client_valid_id(line + 1)) {
		fprintf(stderr, "corral mcp: the reaper got a line it does not know: \"%.80s\"\n",
			line);
		return;
	}
	if (line[0] == '+')
		live_add(l, line + 1);
	else
		live_drop(l, line + 1);
}

/* The session's lines until the pipe ends (the session did). */
static void listen_to(int fd, struct mcp_live *l)
{
	char buf[4096], line[REAP_LINE_MAX + 1];
	size_t len = 0;
	bool skipping = false;

	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			fprintf(stderr, "corral mcp: the reaper's pipe: %s\n", strerror(errno));
		if (n <= 0)
			return;
		for (ssize_t i = 0; i < n; i++) {
			if (buf[i] == '\n') {
				line[len] = '\0';
				if (!skipping)
					on_line(l, line);
				len = 0;
				skipping = false;
			} else if (len < REAP_LINE_MAX) {
				line[len++] = buf[i];
			} else {
				skipping = true;
			}
		}
	}
}

/* How the removals go: when they must end, and whether the daemon went silent. */
struct reap_run {
	uint64_t end_ms;
	bool silent;		/* a DELETE got no answer in its time */
};

/*
 * DELETE one sandbox: 0 when it is gone, 1 when it was gone already (404:
 * its TTL, the daemon's operator), else -1 with why.
 */
static int delete_before(const struct mcp_daemon *d, const char *id,
			 struct reap_run *run, char *why, size_t whylen)
{
	uint64_t now = corral_now_ms(), end_ms = run->end_ms;
	uint64_t wait = run->silent ? REAP_SILENT_MS : REAP_REQUEST_MS;
	const char *after = run->silent ?
		" (given 1 s: the daemon had not answered the DELETE before)" : "";
	struct mcp_http h = {
		.max = 65536,
		.deadline_ms = now + wait < end_ms ? now + wait : end_ms,
	};
	char *path, *err = NULL;
	int ret = -1;

	if (now >= end_ms) {
		snprintf(why, whylen, "not tried: the removal's %d s were spent",
			 MCP_REAP_SECONDS);
		return -1;
	}
	path = mcp_sandbox_path(id, "");
	if (!path)
		snprintf(why, whylen, "out of memory");
	else if (mcp_http_do(d, "DELETE", path, NULL, 0, NULL, &h, &err) < 0)
		snprintf(why, whylen, "%s%s", err ? err : "out of memory", after);
	else if (h.status >= 200 && h.status < 300)
		ret = 0;
	else if (h.status == 404)
		ret = 1;
	else if (!h.status)
		snprintf(why, whylen, "no answer within %llu s%s",
			 (unsigned long long)wait / 1000, after);
	else
		snprintf(why, whylen, "the daemon answered HTTP %ld: %.*s", h.status,
			 (int)(h.len < 300 ? h.len : 300), h.buf ? h.buf : "");
	if (ret < 0 && !h.status && corral_now_ms() >= h.deadline_ms)
		run->silent = true;
	free(err);
	free(path);
	mcp_http_free(&h);
	return ret;
}

static int reap_one(const struct mcp_daemon *d, const char *id, struct reap_run *run)
{
	char why[512], *shown;
	int r = delete_before(d, id, run, why, sizeof(why));

	if (r == 0)
		fprintf(stderr, "corral mcp: removed sandbox %s, left by the session\n", id);
	if (r >= 0)
		return 0;
	/* why may quote the daemon's answer: shown as text on MCP's stderr */
	shown = printable(why, strlen(why));
	fprintf(stderr, "corral mcp: could not remove sandbox %s, made by this session, from the daemon at %s: %s\n",
		id, d->conn.socket ? d->conn.socket : d->conn.url, shown ? shown : "(not shown: out of memory)");
	free(shown);
	return -1;
}

static int ignore_signals(void)
{
	int sigs[] = { SIGTERM, SIGINT, SIGHUP, SIGPIPE };

	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (signal(sigs[i], SIG_IGN) == SIG_ERR)
			return -1;
	return 0;
}

/* The child: listens, then removes; exits 0 when all are gone. */
static void reaper_run(const struct mcp_daemon *d, int fd)
{
	struct mcp_live l = { 0 };
	struct reap_run run = { 0 };
	int failed = 0;

	/* stdout is the protocol's: the client must see it end with the session */
	if (ignore_signals() < 0 || setpgid(0, 0) < 0 ||
	    dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
		fprintf(stderr, "corral mcp: the reaper cannot set itself up: %s\n",
			strerror(errno));
		_exit(EXIT_CORRAL);
	}
	close(STDIN_FILENO);
	listen_to(fd, &l);
	close(fd);
	run.end_ms = corral_now_ms() + MCP_REAP_SECONDS * 1000ull;
	for (size_t i = 0; i < l.n; i++)
		failed |= reap_one(d, l.ids[i], &run) < 0;
	fflush(NULL);
	_exit(failed ? EXIT_CORRAL : 0);
}

/* The lease taken: the live ids are kept here, for the end. */
static int lease_taken(struct mcp_owned *o, const struct mcp_daemon *d)
{
	o->live = calloc(1, sizeof(*o->live));
	if (!o->live) {
		mcp_lease_close(o);
		return out_of_memory("the session's list of sandboxes");
	}
	o->d = d;
	fprintf(stderr, "corral mcp: the session's sandboxes are bound to its lease on %s: the daemon destroys them when the session ends, however it ends\n",
		d->conn.socket ? d->conn.socket : d->conn.url);
	return 0;
}

int mcp_reaper_start(struct mcp_owned *o, const struct mcp_daemon *d)
{
	char *why = NULL;
	int p[2], r;
	pid_t pid;

	o->reaper_fd = -1;
	o->reaper = 0;
	r = mcp_lease_open(o, d, &why);
	if (r == 0)
		return lease_taken(o, d);
	fprintf(stderr, "corral mcp: %s; a reaper process removes the session's sandboxes at its end instead, which a kill of the reaper too (its cgroup, the OOM killer) defeats\n",
		r == 1 ? "the daemon has no leases (it is older than this corral)" :
		why ? why : "no lease");
	free(why);
	if (pipe2(p, O_CLOEXEC) < 0) {
		cli_error("mcp: a pipe for the reaper: %s", strerror(errno));
		return EXIT_CORRAL;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		cli_error("mcp: fork the reaper: %s", strerror(errno));
		close(p[0]);
		close(p[1]);
		return EXIT_CORRAL;
	}
	if (pid == 0) {
		close(p[1]);
		reaper_run(d, p[0]);
	}
	close(p[0]);
	o->reaper_fd = p[1];
	o->reaper = pid;
	return 0;
}

/* Called with o->lock held. */
void mcp_reaper_tell(struct mcp_owned *o, char op, const char *id)
{
	char line[REAP_LINE_MAX + 1];
	int n;

	if (o->live) {
		if (op == '+')
			live_add(o->live, id);
		else
			live_drop(o->live, id);
		return;
	}
	if (o->reaper_fd < 0)
		return;
	n = snprintf(line, sizeof(line), "%c%s\n", op, id);
	if (n < 0 || (size_t)n >= sizeof(line))
		return;		/* not an id: the daemon's ids are short */
	/* n <= PIPE_BUF: one write, whole, whatever the other threads write */
	while (write(o->reaper_fd, line, n) < 0) {
		if (errno == EINTR)
			continue;
		cli_error("mcp: cannot tell the reaper about sandbox %s (%s): it will not be removed at the session's end",
			  id, strerror(errno));
		break;
	}
}

/* With a lease: DELETE here, then close it; it takes what is left. */
static int lease_finish(struct mcp_owned *o)
{
	struct reap_run run = { corral_now_ms() + MCP_REAP_SECONDS * 1000ull, false };
	struct mcp_live *l;
	int failed = 0;

	pthread_mutex_lock(&o->lock);
	l = o->live;
	o->live = NULL;
	pthread_mutex_unlock(&o->lock);
	for (size_t i = 0; i < l->n; i++) {
		failed |= reap_one(o->d, l->ids[i], &run) < 0;
		free(l->ids[i]);
	}
	if (failed)
		fprintf(stderr, "corral mcp: the daemon destroys what is left when it sees the session's lease %s closed\n",
			o->lease);
	mcp_lease_close(o);
	free(l->ids);
	free(l);
	return failed ? -1 : 0;
}

int mcp_reaper_finish(struct mcp_owned *o)
{
	struct timespec tick = { 0, 50 * 1000000L };
	int status = 0;
	pid_t pid;

	if (o->live)
		return lease_finish(o);
	pthread_mutex_lock(&o->lock);
	if (o->reaper_fd >= 0)
		close(o->reaper_fd);	/* the reaper's cue */
	o->reaper_fd = -1;
	pid = o->reaper;
	o->reaper = 0;
	pthread_mutex_unlock(&o->lock);
	if (pid <= 0)
		return 0;
	/* it bounds itself; this bound is for a reaper stuck anyway */
	for (int i = 0; i < (MCP_REAP_SECONDS + 10) * 20; i++) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid && WIFSIGNALED(status))
			cli_error("mcp: the reaper (pid %d) was killed by signal %d: the sandboxes it had not removed are left",
				  (int)pid, WTERMSIG(status));
		if (r == pid)
			return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
		if (r < 0 && errno != EINTR) {
			cli_error("mcp: waitpid for the reaper (pid %d): %s", (int)pid,
				  strerror(errno));
			return -1;
		}
		nanosleep(&tick, NULL);
	}
	cli_error("mcp: the reaper (pid %d) did not end within %d s; killing it: the sandboxes it had not removed are left",
		  (int)pid, MCP_REAP_SECONDS + 10);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return -1;
}
