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

#include <dirent.h>
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

/*
 * A directory kept read-only whole (.git/hooks, .vscode, .claude/commands:
 * fd, O_PATH) holds no file with a second name: one there is written
 * through the other name as one_name's is (`ln scripts/pre-commit
 * .git/hooks/pre-commit`, the user's, or an earlier run's without
 * --settings: the sandbox wrote scripts/pre-commit, and the host's next
 * commit ran it, while the report said .git/hooks was kept).  The
 * sandbox cannot add one while the bind holds (link(2) from it is EXDEV,
 * into it EROFS).  At most SECOND_NAMES_MAX entries, SECOND_NAMES_DEPTH
 * levels are looked at (a home's .vscode holds its extensions): *more
 * says there were more.  0, or -EMLINK said.
 */
#define SECOND_NAMES_MAX 10000
#define SECOND_NAMES_DEPTH 16

static int no_second_names(int fd, const char *kept, const char *path, unsigned depth,
			   size_t *seen, bool *more, struct corral_err *err)
{
	int own = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), r = 0;
	struct dirent *de;
	struct stat st;
	DIR *d;

	if (own < 0)
		return corral_set_errno(err, errno, "cannot open %s", path);
	d = fdopendir(own);
	if (!d) {
		close(own);
		return corral_set_errno(err, errno, "cannot read %s", path);
	}
	while (r == 0 && (de = readdir(d))) {
		char sub[PATH_MAX];
		int next;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (++*seen > SECOND_NAMES_MAX) {
			*more = true;
			break;
		}
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;	/* gone meanwhile: nothing to write through */
		snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
		if (S_ISREG(st.st_mode) && st.st_nlink > 1)
			r = corral_set_err(err, -EMLINK, "%s has %ju hard links, in %s, which is "
					   "kept read-only: the sandbox could write it through "
					   "another name: refused (to run, give it one name: copy "
					   "it over itself, or remove the other)", sub,
					   (uintmax_t)st.st_nlink, kept);
		else if (S_ISDIR(st.st_mode) && depth >= SECOND_NAMES_DEPTH)
			*more = true;
		else if (S_ISDIR(st.st_mode) &&
			 (next = openat(dirfd(d), de->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW |
					O_CLOEXEC)) >= 0) {
			r = no_second_names(next, kept, sub, depth + 1, seen, more, err);
			close(next);
		}
	}
	closedir(d);
	return r;
}

int srt_pin_binds(struct corral_policy *p, json_t *pins, json_t *unchecked,
		  struct corral_err *err)
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
			size_t seen = 0;
			bool more = false;
			struct stat st;
			int dup;

			if (b->pinned || strcmp(b->src, path) || strcmp(b->dst, path))
				continue;
			/* a directory kept whole: its files' other names */
			if (!target && !b->writable && fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
				if (no_second_names(fd, path, path, 0, &seen, &more, err) < 0) {
					close(fd);
					return err->code;
				}
				if (more)
					json_array_append_new(unchecked, json_string(path));
			}
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
