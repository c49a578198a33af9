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
#include "policy_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
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

/* the longest prefix of the plain path that resolves, into found; the rest */
static const char *walk_in_root(int root, const char *path, const char *rpath,
				size_t rlen, char *found, size_t len)
{
	struct open_how how = {
		.flags = O_PATH | O_CLOEXEC,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
	};
	char prefix[PATH_MAX];
	const char *rest = path;

	snprintf(found, len, "/");
	/* each walk from root, as runc's */
	while (*rest == '/' && rest[1]) {
		const char *end = rest + 1 + strcspn(rest + 1, "/");
		int fd, r;

		memcpy(prefix, path, (size_t)(end - path));
		prefix[end - path] = '\0';
		fd = openat2_retry(root, prefix, &how);
		if (fd < 0)
			break;
		r = name_in_root(fd, rpath, rlen, found, len);
		close(fd);
		if (r < 0)
			return NULL;
		rest = end;
	}
	return *rest == '/' ? rest + 1 : rest;
}

int corral_path_in_root(int root, const char *path, char *out, size_t len)
{
	char rpath[PATH_MAX], self[64], found[PATH_MAX], why[8], *plain = NULL;
	const char *rest = NULL;
	ssize_t rlen;
	int r;

	if (join(out, len, "/", path[0] == '/' ? path + 1 : path) < 0)
		return -ENAMETOOLONG;
	snprintf(self, sizeof(self), "/proc/self/fd/%d", root);
	rlen = readlink(self, rpath, sizeof(rpath) - 1);
	/* "//" and "." made plain; a ".." (refused) taken as written */
	if (rlen <= 0 || policy_normalise_path(path, strlen(path), "path", &plain,
					       why, sizeof(why)) < 0)
		return 0;
	rpath[rlen] = '\0';
	if (!strcmp(rpath, "/"))
		rlen = 0;
	rest = walk_in_root(root, plain, rpath, (size_t)rlen, found, sizeof(found));
	r = rest ? join(out, len, found, rest) : 0;
	free(plain);
	return r;
}
