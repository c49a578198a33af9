/*
 * oci_path.c - the directory of a file the engine names (--pid-file,
 * --log), and the socket it names (--console-socket), opened as root
 * with no link followed that another user could have left.
 *
 * The engine's paths often lie in a bundle, and a bundle may be a
 * tenant's to write: a link of theirs in a directory above the file had
 * root make the pid file, or append a log line, in any directory of the
 * host it named.  runc follows such links (its createPidFile and --log
 * open the path as given); systemd's chase() with CHASE_SAFE is the model
 * here: a link is followed only where it sits in a directory that only
 * root (or the caller) may write, so /var/run -> /run still works, and a
 * link in anyone else's directory is refused.  Walked by fd, a component
 * at a time, so that no rename between the check and the use moves it.
 */
#include "oci.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* Linux 6.5's and 6.11's, which Debian 12's headers predate */
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif
#ifndef PIDFD_GET_PID_NAMESPACE
#define PIDFD_GET_PID_NAMESPACE _IO(0xFF, 5)
#endif

/* The kernel's own bound on links in one lookup (MAXSYMLINKS) */
#define OCI_PATH_LINKS 40

/* Only root or the caller may write dir: its links are theirs. */
static bool dir_is_ours(int dir)
{
	struct stat st;

	if (fstat(dir, &st) < 0)
		return false;
	return (st.st_uid == 0 || st.st_uid == geteuid()) &&
	       !(st.st_mode & (S_IWGRP | S_IWOTH));
}

static int walk(int *cur, const char *path, const char *whole, int *links,
		struct corral_err *err);
static int last_of(int *dir, char *target, char *name, const char *whole, int *links,
		   struct corral_err *err);

/* A link at name in *cur (its O_PATH fd lnk): followed if *cur is ours. */
static int follow(int *cur, int lnk, const char *name, const char *whole, int *links,
		  struct corral_err *err)
{
	char target[PATH_MAX];
	ssize_t n;

	if (++*links > OCI_PATH_LINKS)
		return corral_set_err(err, -ELOOP, "%s: more than %d links", whole, OCI_PATH_LINKS);
	if (!dir_is_ours(*cur))
		return corral_set_err(err, -ELOOP, "%s: %s is a link in a directory another "
				      "user may write: not followed as root", whole, name);
	n = readlinkat(lnk, "", target, sizeof(target) - 1);
	if (n < 0)
		return corral_set_errno(err, errno, "%s: cannot read the link %s", whole, name);
	target[n] = '\0';
	if (target[0] == '/') {
		int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);

		if (root < 0)
			return corral_set_errno(err, errno, "%s: cannot open /", whole);
		close(*cur);
		*cur = root;
	}
	return walk(cur, target, whole, links, err);
}

/* Each component of path beneath *cur, which ends as the last directory. */
static int walk(int *cur, const char *path, const char *whole, int *links,
		struct corral_err *err)
{
	char name[NAME_MAX + 1];
	struct stat st;
	int fd, r;

	while (*path) {
		size_t len = strcspn(path, "/");

		if (len > NAME_MAX)
			return corral_set_err(err, -ENAMETOOLONG, "%s: a name too long", whole);
		memcpy(name, path, len);
		name[len] = '\0';
		path += len + strspn(path + len, "/");
		if (!len || !strcmp(name, "."))
			continue;
		fd = openat(*cur, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return corral_set_errno(err, errno, "%s: cannot open %s", whole, name);
		if (fstat(fd, &st) < 0) {
			r = corral_set_errno(err, errno, "%s: cannot stat %s", whole, name);
			close(fd);
			return r;
		}
		if (S_ISLNK(st.st_mode)) {
			r = follow(cur, fd, name, whole, links, err);
			close(fd);
			if (r < 0)
				return r;
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			close(fd);
			return corral_set_err(err, -ENOTDIR, "%s: %s is not a directory", whole, name);
		}
		close(*cur);
		*cur = fd;
	}
	return 0;
}

/* path's directory, walked; *base its last name, whole what err's say. */
static int open_dir_of(const char *what, const char *path, const char **base,
		       char *whole, size_t wlen, int *links, struct corral_err *err)
{
	const char *slash = strrchr(path, '/');
	char dir[PATH_MAX];
	int cur, r;

	snprintf(whole, wlen, "%s %s", what, path);
	*base = slash ? slash + 1 : path;
	if (!**base || !strcmp(*base, ".") || !strcmp(*base, ".."))
		return corral_set_err(err, -EISDIR, "%s: names a directory, not a file", whole);
	if ((size_t)snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - path) : 0,
			     path) >= sizeof(dir))
		return corral_set_err(err, -ENAMETOOLONG, "%s: too long", whole);
	cur = open(path[0] == '/' ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (cur < 0)
		return corral_set_errno(err, errno, "%s: cannot open %s", whole,
					path[0] == '/' ? "/" : "the working directory");
	r = walk(&cur, dir, whole, links, err);
	if (r < 0) {
		close(cur);
		return r;
	}
	return cur;
}

int oci_open_parent(const char *what, const char *path, const char **base,
		    struct corral_err *err)
{
	char whole[PATH_MAX + 64];
	int links = 0;

	return open_dir_of(what, path, base, whole, sizeof(whole), &links, err);
}

/*
 * The object path names, an O_PATH fd: its last name too is followed
 * only where it is a link in a directory that is ours, as the ones
 * before it.
 */
static int open_last(const char *what, const char *path, struct corral_err *err)
{
	char whole[PATH_MAX + 64], target[PATH_MAX], name[NAME_MAX + 1];
	const char *base;
	struct stat st;
	int links = 0, dir, fd = -1, r;
	ssize_t n;

	dir = open_dir_of(what, path, &base, whole, sizeof(whole), &links, err);
	if (dir < 0)
		return dir;
	if (strlen(base) > NAME_MAX) {
		close(dir);
		return corral_set_err(err, -ENAMETOOLONG, "%s: a name too long", whole);
	}
	memcpy(name, base, strlen(base) + 1);
	for (;;) {
		fd = openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &st) < 0) {
			r = corral_set_errno(err, errno, "%s: cannot open %s", whole, name);
			break;
		}
		if (!S_ISLNK(st.st_mode)) {
			close(dir);
			return fd;
		}
		if (++links > OCI_PATH_LINKS) {
			r = corral_set_err(err, -ELOOP, "%s: more than %d links", whole,
					   OCI_PATH_LINKS);
			break;
		}
		if (!dir_is_ours(dir)) {
			r = corral_set_err(err, -ELOOP, "%s: %s is a link in a directory "
					   "another user may write: not followed as root",
					   whole, name);
			break;
		}
		n = readlinkat(fd, "", target, sizeof(target) - 1);
		if (n < 0) {
			r = corral_set_errno(err, errno, "%s: cannot read the link %s", whole, name);
			break;
		}
		target[n] = '\0';
		close(fd);
		fd = -1;
		/* the target's directories from where the link lies, or "/" */
		r = last_of(&dir, target, name, whole, &links, err);
		if (r < 0)
			break;
	}
	if (fd >= 0)
		close(fd);
	close(dir);
	return r;
}

/*
 * A link's target: *dir becomes the directory its last name is in (the
 * walk from *dir, or "/"), name that name.
 */
static int last_of(int *dir, char *target, char *name, const char *whole, int *links,
		   struct corral_err *err)
{
	char *slash = strrchr(target, '/');
	const char *last = slash ? slash + 1 : target;

	if (!*last || !strcmp(last, ".") || !strcmp(last, ".."))
		return corral_set_err(err, -EISDIR, "%s: a link to a directory, not a file",
				      whole);
	if (strlen(last) > NAME_MAX)
		return corral_set_err(err, -ENAMETOOLONG, "%s: a name too long", whole);
	memcpy(name, last, strlen(last) + 1);
	if (target[0] == '/') {
		int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);

		if (root < 0)
			return corral_set_errno(err, errno, "%s: cannot open /", whole);
		close(*dir);
		*dir = root;
	}
	if (!slash)
		return 0;
	*slash = '\0';
	return walk(dir, target, whole, links, err);
}

/*
 * The pid namespace of the process at the other end of s, an nsfs fd:
 * by the pidfd the kernel took at the peer's listen() (Linux 6.5, and
 * 6.11 for the ioctl), so no pid reused since is judged; on an older
 * kernel by /proc/PID of the pid it took then.  -errno.
 */
static int peer_pid_ns(int s, pid_t pid)
{
	char proc[64];
	socklen_t len = sizeof(int);
	int pidfd, ns;

	if (getsockopt(s, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) == 0) {
		ns = ioctl(pidfd, PIDFD_GET_PID_NAMESPACE, 0);
		if (ns < 0 && errno != ENOTTY && errno != EINVAL) {
			ns = -errno;
			close(pidfd);
			return ns;
		}
		close(pidfd);
		if (ns >= 0)
			return ns;
	} else if (errno != ENOPROTOOPT) {
		return -errno;
	}
	snprintf(proc, sizeof(proc), "/proc/%d/ns/pid", (int)pid);
	ns = open(proc, O_RDONLY | O_CLOEXEC);
	return ns < 0 ? -errno : ns;
}

/*
 * Who listens at s: the engine, that is root or the caller, in this pid
 * namespace.  The socket's owner says who bound it, not who listens now
 * nor where: root in another engine's container (no user namespace) with
 * a host directory bound in binds a socket of uid 0, and a tenant who
 * writes the directory of the engine's socket (its bundle) could then
 * give it this name.  SO_PEERCRED is the listener's, taken by the kernel
 * at its listen(), in this process's namespaces: a uid outside ours is
 * the overflow uid, a process outside our pid namespace's tree pid 0.
 * The engines (containerd's shim, conmon, a recvtty) listen in the pid
 * namespace of the runtime they start.
 */
static int listener_is_the_engines(int s, const char *what, const char *path,
				   struct corral_err *err)
{
	struct ucred uc;
	struct stat mine, theirs;
	socklen_t len = sizeof(uc);
	int ns, r = 0;

	if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0)
		return corral_set_errno(err, errno, "%s %s: SO_PEERCRED", what, path);
	if (uc.uid != 0 && uc.uid != geteuid())
		return corral_set_err(err, -EPERM, "%s %s: listened on by uid %u, not the "
				      "engine (root): not handed the terminal", what, path,
				      (unsigned int)uc.uid);
	if (uc.pid <= 0)
		return corral_set_err(err, -EPERM, "%s %s: listened on by a process outside "
				      "this pid namespace, not the engine: not handed the "
				      "terminal", what, path);
	ns = peer_pid_ns(s, uc.pid);
	if (ns < 0)
		return corral_set_err(err, ns, "%s %s: the pid namespace of its listener "
				      "(pid %d): %s", what, path, (int)uc.pid, strerror(-ns));
	if (fstat(ns, &theirs) < 0 || stat("/proc/self/ns/pid", &mine) < 0)
		r = corral_set_errno(err, errno, "%s %s: cannot stat a pid namespace", what,
				     path);
	else if (theirs.st_dev != mine.st_dev || theirs.st_ino != mine.st_ino)
		r = corral_set_err(err, -EPERM, "%s %s: listened on by pid %d of another pid "
				   "namespace (a container's), not the engine: not handed "
				   "the terminal", what, path, (int)uc.pid);
	close(ns);
	return r;
}

int oci_connect_socket(const char *what, const char *path, struct corral_err *err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int fd = open_last(what, path, err), s, r;

	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0) {
		s = corral_set_errno(err, errno, "%s %s: cannot stat it", what, path);
		goto out;
	}
	if (!S_ISSOCK(st.st_mode)) {
		s = corral_set_err(err, -ENOTSOCK, "%s %s: not a socket", what, path);
		goto out;
	}
	/*
	 * Bound by root or the caller: the engine's.  A bind makes the
	 * socket its binder's, and no one else can make one of root's, so a
	 * socket another user bound at the name (a tenant in its bundle, the
	 * engine's renamed away) is refused, where runc hands it the
	 * terminal.  What is checked is what is connected: the fd's inode.
	 */
	if (st.st_uid != 0 && st.st_uid != geteuid()) {
		s = corral_set_err(err, -EPERM, "%s %s: a socket of uid %u, not the "
				   "engine's (root's): not handed the terminal", what,
				   path, (unsigned int)st.st_uid);
		goto out;
	}
	/* its fd's name: the kernel looks up nothing that could have moved */
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d", fd);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0) {
		s = corral_set_errno(err, errno, "%s %s: socket", what, path);
		goto out;
	}
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;

		close(s);
		s = corral_set_errno(err, e, "%s %s", what, path);
	} else if ((r = listener_is_the_engines(s, what, path, err)) < 0) {
		close(s);
		s = r;
	}
out:
	close(fd);
	return s;
}
