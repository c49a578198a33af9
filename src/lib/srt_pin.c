/*
 * srt_pin.c - the binds an srt settings file's translation adds beneath
 * a write bind (what it keeps read-only, and each directory on the way
 * bound onto itself) pinned to the objects there now.
 *
 * Those binds lie inside a directory that sandboxes write: another run
 * of the project (or any of its sandbox's processes) may put a link
 * where one of them is, after the translation walked to it following no
 * link.  Taken by path, the source followed that link (mount.c: host
 * paths mean what they mean on the host): as root the supervisor opened
 * "nested" through a link to another user's directory, a link taken away
 * again before init walked to the mount point (which follows none), and
 * the sandbox wrote in that directory as its owner (idmapped).  Pinned
 * (corral_policy_pin_bind), each is the object found beneath the write
 * bind's directory with no link followed, or the run is refused.
 */
#include "internal.h"
#include "srt_pin.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* path's object, beneath top's directory (path lies in top), no link followed */
static int open_beneath(const char *top, const char *path, struct corral_err *err)
{
	struct open_how how = {
		.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	size_t n = strlen(top);
	int dir, fd, e;

	if (strncmp(path, top, n) || path[n] != '/' || !path[n + 1])
		return corral_set_err(err, -EINVAL, "%s: not beneath %s", path, top);
	dir = open(top, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0)
		return corral_set_errno(err, errno, "cannot open %s", top);
	fd = openat2_retry(dir, path + n + 1, &how);
	e = errno;
	close(dir);
	if (fd < 0)
		return corral_set_err(err, -e, "%s changed since the settings were read "
				      "(%s): refused", path, e == ELOOP ?
				      "a symbolic link is on its way" : strerror(e));
	return fd;
}

/*
 * A kept link (fd, O_PATH of the link itself) is still a link holding
 * target: one put there since with another target would be bound, and
 * what it names left writable.
 */
static int same_link(int fd, const char *path, const char *target, struct corral_err *err)
{
	char now[PATH_MAX];
	struct stat st;
	ssize_t n;

	if (fstat(fd, &st) < 0)
		return corral_set_errno(err, errno, "cannot stat %s", path);
	n = S_ISLNK(st.st_mode) ? readlinkat(fd, "", now, sizeof(now) - 1) : -1;
	if (n >= 0)
		now[n] = '\0';
	if (n < 0 || strcmp(now, target))
		return corral_set_err(err, -EACCES, "%s changed since the settings were read "
				      "(it was a symbolic link to %s): refused", path, target);
	return 0;
}

/*
 * A file kept read-only (fd, O_PATH) with a second name: the sandbox
 * writes it through a name in the write bind (`ln envs/dev alias`, made
 * by the user, or by an earlier run's sandbox while nothing kept the
 * file), and the host's direnv or git then reads what it wrote, while
 * the report said the file was kept.  Where the other names lie cannot
 * be known from the file, so it is refused; a directory has none, a
 * link cannot be written.
 */
static int one_name(int fd, const char *path, struct corral_err *err)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return corral_set_errno(err, errno, "cannot stat %s", path);
	if (S_ISREG(st.st_mode) && st.st_nlink > 1)
		return corral_set_err(err, -EMLINK, "%s has %ju hard links: the sandbox "
				      "could write it through another name, which corral "
				      "cannot keep read-only: refused (a symbolic link to it "
				      "is kept; to run, give it one name: copy it over itself, "
				      "or remove the other)", path, (uintmax_t)st.st_nlink);
	return 0;
}

int srt_pin_binds(struct corral_policy *p, json_t *pins, struct corral_err *err)
{
	json_t *pin;
	size_t k;

	json_array_foreach(pins, k, pin) {
		const char *top = json_string_value(json_array_get(pin, 0));
		const char *path = json_string_value(json_array_get(pin, 1));
		const char *target = json_string_value(json_array_get(pin, 2));
		int fd = top && path ? open_beneath(top, path, err) :
			 corral_set_err(err, -ENOMEM, "out of memory pinning srt's binds");

		if (fd < 0)
			return fd;
		if ((target ? same_link(fd, path, target, err) : one_name(fd, path, err)) < 0) {
			close(fd);
			return err->code;
		}
		/* a --policy's or a flag's bind of the same path onto itself too */
		for (size_t i = 0; i < p->nbinds; i++) {
			const struct corral_bind *b = &p->binds[i];
			int dup;

			if (b->pinned || strcmp(b->src, path) || strcmp(b->dst, path))
				continue;
			dup = fcntl(fd, F_DUPFD_CLOEXEC, 3);
			if (dup < 0) {
				close(fd);
				return corral_set_errno(err, errno, "cannot pin %s", path);
			}
			if (corral_policy_pin_bind(p, i, dup, err) < 0) {
				close(fd);
				return err->code;
			}
		}
		close(fd);
	}
	return 0;
}
