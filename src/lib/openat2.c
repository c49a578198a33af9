/*
 * openat2.c - a path resolved by the kernel beneath a root, again when the
 * host raced the walk.
 *
 * With RESOLVE_IN_ROOT or RESOLVE_BENEATH, the kernel refuses a walk
 * through ".." during which any mount or rename happened anywhere on the
 * host (the global mount and rename seqlocks moved): EAGAIN, "may be
 * retried" (openat2(2)).  On a host where containers start and stop, that
 * is every few milliseconds, and a client's GET of "/workspace/.." failed
 * with 409 (seen in CI beside the containerd lane).
 *
 * And the name such a walk arrives at (corral_path_in_root): where an
 * engine's runtime mounts, through the image's links.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Enough for any churn a host survives; the last EAGAIN is the caller's. */
#define OPENAT2_TRIES	64

int openat2_retry(int dirfd, const char *path, const struct open_how *how)
{
	int fd = -1;

	for (int i = 0; i < OPENAT2_TRIES; i++) {
		fd = (int)syscall(SYS_openat2, dirfd, path, how, sizeof(*how));
		if (fd >= 0 || errno != EAGAIN)
			break;
	}
	return fd;
}

/* out = head + "/" + tail, head "/" or a path; -ENAMETOOLONG */
static int join(char *out, size_t len, const char *head, const char *tail)
{
	int n = snprintf(out, len, "%s%s%s", strcmp(head, "/") ? head : "",
			 *tail ? "/" : "", tail);

	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	if (!out[0])
		snprintf(out, len, "/");
	return 0;
}

static bool has_dotdot(const char *path)
{
	for (const char *c = path; (c = strstr(c, "..")); c += 2)
		if ((c == path || c[-1] == '/') && (c[2] == '/' || c[2] == '\0'))
			return true;
	return false;
}

/* where the fd lies, as a name beneath root's own (rlen long); -1 if not */
static int name_in_root(int fd, const char *rpath, size_t rlen, char *out, size_t len)
{
	char self[64], got[PATH_MAX];
	ssize_t n;

	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	n = readlink(self, got, sizeof(got) - 1);
	if (n <= 0)
		return -1;
	got[n] = '\0';
	if (strncmp(got, rpath, rlen) || (got[rlen] != '/' && got[rlen] != '\0'))
		return -1;
	return join(out, len, "/", got[rlen] == '/' ? got + rlen + 1 : "") ? -1 : 0;
}

int corral_path_in_root(int root, const char *path, char *out, size_t len)
{
	struct open_how how = {
		.flags = O_PATH | O_CLOEXEC,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
	};
	char rpath[PATH_MAX], self[64], prefix[PATH_MAX], found[PATH_MAX] = "/";
	const char *rest = path, *end;
	ssize_t rlen;

	if (join(out, len, "/", path[0] == '/' ? path + 1 : path) < 0)
		return -ENAMETOOLONG;
	snprintf(self, sizeof(self), "/proc/self/fd/%d", root);
	rlen = readlink(self, rpath, sizeof(rpath) - 1);
	if (path[0] != '/' || has_dotdot(path) || rlen <= 0)
		return 0;
	rpath[rlen] = '\0';
	if (!strcmp(rpath, "/"))
		rlen = 0;
	/* the longest prefix that resolves; each walk from root, as runc's */
	while (*rest) {
		int fd;

		while (*rest == '/')
			rest++;
		end = rest + strcspn(rest, "/");
		if (end == rest)
			break;
		if ((size_t)(end - path) >= sizeof(prefix))
			return 0;
		memcpy(prefix, path, (size_t)(end - path));
		prefix[end - path] = '\0';
		fd = openat2_retry(root, prefix, &how);
		if (fd < 0)
			break;
		if (name_in_root(fd, rpath, (size_t)rlen, found, sizeof(found)) < 0) {
			close(fd);
			return 0;
		}
		close(fd);
		rest = end;
	}
	while (*rest == '/')
		rest++;
	return join(out, len, found, rest);
}
