/*
 * api_access.c - what of the host an API client may hand a sandbox: the
 * daemon's environment (env.pass), host paths (the workspace, binds) and,
 * through the workspace's owner, a host uid.  The API is a trust boundary:
 * a client gets what the operator of corral serve allowed, never the
 * daemon's own identity or host.
 *
 *  - env.pass: a unix-socket client running as the daemon's user (or as
 *    root) may pass the daemon's variables; any other client only the
 *    names given with --allow-env.
 *  - host paths, resolved first (symlinks, ".."): never /proc, /sys, /dev
 *    or the state directory (nor what is under them), the socket's
 *    directory, the token's or TLS key's file, nor a directory that holds
 *    one of these (binds are recursive), nor the socket itself; then
 *    allowed under an --allow-host-path prefix; else, for a unix-socket
 *    client only, when
 *    that client (SO_PEERCRED, SO_PEERGROUPS) could read it, or write it
 *    for an rw bind.  TCP clients get no other host path.
 *  - the uid: a root daemon runs a sandbox as the workspace's owner only
 *    within --uid-range (default: none, so 65534).
 *  - identity.user "root" (capabilities inside the sandbox's user
 *    namespace): only with --allow-root-inside, for any client; a client
 *    never grants itself capabilities.
 *
 * A host path is opened once and judged by what was opened (its path now,
 * its inode, the client's access to that inode); the fd goes into the
 * policy (pinned), and the sandbox gets that object or is refused: the
 * owner of a directory on the way who swaps it for a symlink after the
 * check gains nothing (mount.c, idmap.c).
 */
#include "api.h"

#include <event2/bufferevent.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define PEER_GROUPS_MAX	256

struct client {
	bool tcp;
	bool known;			/* unix: the credentials were read */
	uid_t uid;
	gid_t gid;
	gid_t groups[PEER_GROUPS_MAX];
	int ngroups;
};

static void client_of(struct evhttp_request *req, bool tcp, struct client *c)
{
	struct evhttp_connection *conn = evhttp_request_get_connection(req);
	struct bufferevent *bev = conn ? evhttp_connection_get_bufferevent(conn) : NULL;
	int fd = bev ? bufferevent_getfd(bev) : -1;
	struct ucred cr;
	socklen_t len = sizeof(cr);

	*c = (struct client){ .tcp = tcp };
	if (tcp || fd < 0 || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0)
		return;
	c->uid = cr.uid;
	c->gid = cr.gid;
	c->known = true;
	len = sizeof(c->groups);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, c->groups, &len) == 0)
		c->ngroups = len / sizeof(gid_t);
	else
		c->ngroups = 0;		/* too many, or an old kernel: only its gid */
}

/* The daemon's own user, or root: nothing of the daemon is new to it. */
static bool client_is_us(const struct client *c)
{
	return !c->tcp && c->known && (c->uid == 0 || c->uid == geteuid());
}

bool path_under(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	if (n == 1 && dir[0] == '/')
		return true;
	return !strncmp(path, dir, n) && (path[n] == '\0' || path[n] == '/');
}

/* Equal, under, or holding: a recursive bind of either shows the other. */
static bool path_meets(const char *a, const char *b)
{
	return path_under(a, b) || path_under(b, a);
}

/*
 * As the caller's fs ids: real leads to pin's object (a swap since
 * changes it), and mode is granted on that object.  Async-signal-safe
 * calls only: it runs in a fork of the daemon too.
 */
static bool reaches(const char *real, int pin, int mode)
{
	struct stat a, b;
	int fd = open(real, O_PATH | O_CLOEXEC);
	bool ok;

	if (fd < 0)
		return false;
	ok = fstat(fd, &a) == 0 && fstat(pin, &b) == 0 && a.st_dev == b.st_dev &&
	     a.st_ino == b.st_ino &&
	     syscall(SYS_faccessat2, pin, "", mode, AT_EACCESS | AT_EMPTY_PATH) == 0;
	close(fd);
	return ok;
}

/*
 * Whether the client could open pin's object, at real (R_OK, with W_OK
 * for an rw bind; X_OK for a directory, to enter it).  As another user a
 * root daemon asks in a child that takes the client's fs ids and groups:
 * a fork, a few syscalls and a wait, on the event loop, once a host path
 * of a create.
 */
static bool client_can(const struct client *c, const char *real, int pin, int mode)
{
	pid_t pid;
	int status;

	if (c->uid == 0)
		return true;
	if (c->uid == geteuid())
		return reaches(real, pin, mode);
	if (geteuid() != 0)
		return false;	/* an unprivileged daemon cannot ask as another */
	pid = fork();
	if (pid < 0)
		return false;
	if (pid == 0) {
		/* raw syscalls: this thread's credentials, nothing else's */
		if (syscall(SYS_setgroups, c->ngroups, c->groups) < 0)
			_exit(2);
		setfsgid(c->gid);
		setfsuid(c->uid);
		if ((gid_t)setfsgid(-1) != c->gid || (uid_t)setfsuid(-1) != c->uid)
			_exit(2);
		_exit(reaches(real, pin, mode) ? 0 : 1);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return false;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/*
 * Whether a TCP client's host path (as the policy loader gave it:
 * absolute, no "." or "..") lies by name under an --allow-host-path
 * prefix, resolved or as the operator named it.
 */
static bool named_allowed(const struct daemon *d, const char *path)
{
	for (size_t i = 0; i < d->access.nallow_paths; i++)
		if (path_under(path, d->access.allow_paths[i]) ||
		    (d->allow_named && d->allow_named[i] &&
		     path_under(path, d->allow_named[i])))
			return true;
	return false;
}

/*
 * *path (a host path of the policy) opened (symlinks and ".." resolved
 * as the daemon sees them), judged by what was opened, replaced by that
 * object's path; *pin holds the object for the policy.
 */
static bool host_path_ok(struct daemon *d, const struct client *c, char **path,
			 const char *what, bool write, int *pin, struct api_fault *f)
{
	static const char *const kernel[] = { "/proc", "/sys", "/dev" };
	struct corral_err err = { 0 };
	char real[PATH_MAX], self[64], *dup;
	struct stat st;
	ssize_t n;
	int mode;

	/*
	 * A TCP client's path outside every prefix is refused unopened: the
	 * answer to an open (ENOENT, ENOTDIR, a path resolved into /proc)
	 * would tell a remote client what the host holds, and the open itself
	 * is the host's (an automount triggered, a hung mount waited on).
	 */
	*pin = -1;
	if (c->tcp && !named_allowed(d, *path))
		return api_fault(f, 403, "forbidden", "%s %.300s: host paths are "
				 "off for TCP clients (corral serve --allow-host-path "
				 "PREFIX allows some)", what, *path);
	*pin = open(*path, O_PATH | O_CLOEXEC);
	if (*pin < 0)
		return api_fault(f, 400, "bad_request", "%s %.300s: %s", what,
				 *path, strerror(errno));
	snprintf(self, sizeof(self), "/proc/self/fd/%d", *pin);
	n = readlink(self, real, sizeof(real) - 1);
	if (n < 0 || fstat(*pin, &st) < 0) {
		api_fault(f, 500, "internal", "%s %.300s: %s", what, *path,
			  strerror(errno));
		goto refused;
	}
	real[n] = '\0';
	for (size_t i = 0; i < sizeof(kernel) / sizeof(kernel[0]); i++)
		if (path_meets(real, kernel[i])) {
			api_fault(f, 403, "forbidden", "%s %.300s (%.300s): "
				  "the host's %s is never shown to a sandbox",
				  what, *path, real, kernel[i]);
			goto refused;
		}
	/*
	 * What the build would refuse (the host's /run, /tmp, /var/tmp, a
	 * session's runtime directory: their unix sockets), refused here as the
	 * client's: a 403 with why, not a failed build's 500.
	 */
	if (corral_host_path_check(*pin, real, &err) < 0) {
		if (err.code == -EACCES)
			api_fault(f, 403, "forbidden", "%s %.300s: %s", what, *path, err.msg);
		else
			api_fault(f, 500, "internal", "%s %.300s: %s", what, *path, err.msg);
		goto refused;
	}
	/* under the socket's directory is another file; at or above it, the socket */
	if (path_meets(real, d->state_real) || path_under(d->socket_dir_real, real)) {
		api_fault(f, 403, "forbidden", "%s %.300s (%.300s): the "
			  "daemon's state and socket directories are never "
			  "shown to a sandbox", what, *path, real);
		goto refused;
	}
	/*
	 * Nor the token's file or the TLS key's (an unprivileged daemon's
	 * sandbox is its uid, which reads them): with either a sandbox's code
	 * could be a TCP client, or pass for the daemon, wherever it sent it.
	 */
	for (size_t i = 0; i < 2; i++)
		if (d->key_real[i] && path_meets(real, d->key_real[i])) {
			api_fault(f, 403, "forbidden", "%s %.300s (%.300s): the "
				  "daemon's token and TLS key are never shown to a "
				  "sandbox", what, *path, real);
			goto refused;
		}
	/*
	 * Nor the socket itself, by its name or a hard link's: a sandbox that
	 * can connect to it (an unprivileged daemon's agent is the daemon's
	 * own uid) would be a client as the daemon's user, with its host
	 * paths and its environment, and every other sandbox.
	 */
	if (S_ISSOCK(st.st_mode) && d->socket_ino &&
	    st.st_dev == d->socket_dev && st.st_ino == d->socket_ino) {
		api_fault(f, 403, "forbidden", "%s %.300s (%.300s): the "
			  "daemon's own socket is never shown to a sandbox",
			  what, *path, real);
		goto refused;
	}
	for (size_t i = 0; i < d->access.nallow_paths; i++)
		if (path_under(real, d->access.allow_paths[i]))
			goto ok;
	if (c->tcp) {
		api_fault(f, 403, "forbidden", "%s %.300s: host paths are "
			  "off for TCP clients (corral serve --allow-host-path "
			  "PREFIX allows some)", what, *path);
		goto refused;
	}
	mode = R_OK | (write ? W_OK : 0);
	if (S_ISDIR(st.st_mode))
		mode |= X_OK;
	if (!c->known || !client_can(c, real, *pin, mode)) {
		api_fault(f, 403, "forbidden", "%s %.300s: the client (uid "
			  "%u) could not %s it itself", what, *path,
			  (unsigned)c->uid, write ? "write" : "read");
		goto refused;
	}
ok:
	dup = strdup(real);
	if (!dup) {
		api_fault(f, 500, "internal", "out of memory");
		goto refused;
	}
	free(*path);
	*path = dup;
	return true;
refused:
	close(*pin);
	*pin = -1;
	return false;
}

static bool env_ok(struct daemon *d, const struct client *c, const char *name,
		   struct api_fault *f)
{
	if (client_is_us(c))
		return true;
	for (size_t i = 0; i < d->access.nallow_env; i++)
		if (!strcmp(d->access.allow_env[i], name))
			return true;
	return api_fault(f, 403, "forbidden", "env.pass %.100s: the daemon's "
			 "environment is not passed to %s clients (corral serve "
			 "--allow-env NAME allows one)", name,
			 c->tcp ? "TCP" : "other users'");
}

bool api_access_check(struct daemon *d, struct evhttp_request *req,
		      bool tcp, struct corral_policy *p, struct api_fault *f)
{
	struct corral_err err = { 0 };
	const char *kind, *name;
	struct client c;
	int pin;

	client_of(req, tcp, &c);
	if (p->root_inside && !d->access.allow_root_inside)
		return api_fault(f, 403, "forbidden", "identity.user root: this daemon "
				 "does not run commands as root inside a sandbox "
				 "(corral serve --allow-root-inside allows it)");
	for (size_t i = 0; i < p->nenv_pass; i++)
		if (!env_ok(d, &c, p->env_pass[i], f))
			return false;
	/* secrets and the upstream CA: read by the daemon, like env.pass */
	for (size_t i = 0; corral_policy_host_read(p, i, &kind, &name) == 0; i++) {
		if (!strcmp(kind, "env") && !env_ok(d, &c, name, f))
			return false;
		if (!strcmp(kind, "file") && !client_is_us(&c))
			return api_fault(f, 403, "forbidden", "%.200s: the daemon reads files "
					 "for secrets and CAs only for its own user's clients",
					 name);
	}
	/* each pinned as judged: the sandbox gets those objects or none */
	if (p->workspace) {
		if (!host_path_ok(d, &c, &p->workspace, "workspace", false, &pin, f))
			return false;
		if (corral_policy_pin_workspace(p, pin, &err) < 0)
			return api_fault(f, 500, "internal", "%s", err.msg);
	}
	for (size_t i = 0; i < p->nbinds; i++) {
		if (!host_path_ok(d, &c, &p->binds[i].src, p->binds[i].writable ?
				  "rw bind" : "ro bind", p->binds[i].writable, &pin, f))
			return false;
		if (corral_policy_pin_bind(p, i, pin, &err) < 0)
			return api_fault(f, 500, "internal", "%s", err.msg);
	}
	/* nor a view of the secrets' files (the operator's among them) */
	if (corral_policy_secrets_unseen(p, &err) < 0)
		return api_fault(f, err.code == -EACCES ? 403 : 500, err.code == -EACCES ?
				 "forbidden" : "internal", "%s", err.msg);
	p->host_uid_min = d->access.uid_min;
	p->host_uid_max = d->access.uid_max;
	return true;
}

bool api_access_remote_path(const struct daemon *d, const char *real)
{
	for (size_t i = 0; i < d->access.nallow_paths; i++)
		if (path_under(real, d->access.allow_paths[i]))
			return true;
	return false;
}

static bool env_remote(const struct daemon *d, const char *name)
{
	for (size_t i = 0; i < d->access.nallow_env; i++)
		if (!strcmp(d->access.allow_env[i], name))
			return true;
	return false;
}

/*
 * What host_path_ok and env_ok would have refused a TCP client, judged on
 * what was built: once a sandbox exists any client drives it (its files,
 * exec, diff, export), so one made on the socket with more of the host
 * than a TCP client may have is kept from TCP clients (api.c: 404) rather
 * than handing them that.  The resolved prefixes only, as host_path_ok's
 * last word: a path judged is resolved already.  A pooled sandbox's binds
 * (the operator's --policy, never a client's, and not opened here) are
 * judged by the names the operator wrote.
 */
bool api_access_local(const struct daemon *d, const struct corral_policy *p)
{
	const char *kind, *name;

	if (p->workspace && !api_access_remote_path(d, p->workspace))
		return true;
	for (size_t i = 0; i < p->nbinds; i++)
		if (!api_access_remote_path(d, p->binds[i].src))
			return true;
	for (size_t i = 0; i < p->nenv_pass; i++)
		if (!env_remote(d, p->env_pass[i]))
			return true;
	for (size_t i = 0; corral_policy_host_read(p, i, &kind, &name) == 0; i++)
		if (strcmp(kind, "env") || !env_remote(d, name))
			return true;
	return false;
}
