/*
 * srt_made.c - what an srt settings file's translation holds and makes on
 * the host, so that a path srt keeps read-only inside a write bind is
 * there to bind read-only: the sandbox could make it otherwise (a
 * .vscode/tasks.json, a .bashrc, a .claude/settings.json where there was
 * none), and a bind needs something to be laid over.
 *
 * sandbox-runtime does the same with bwrap: `--ro-bind /dev/null` (or an
 * empty directory) at the first component that does not exist, which
 * bwrap makes on the host, removed after the command.  Here each is made
 * beneath the bind's directory without following a link, an empty
 * directory (0555) or a file (0444: empty, or what git needs to find
 * there to go on as before, .git/commondir's "."), held open with a shared
 * flock(2) for the run, as is each kept path that existed: another run of
 * the same project that finds it there keeps it too.  After the run
 * (corral_srt_made_remove) each made one is removed only if no other run
 * holds it (an exclusive lock, not waited for), it is still the inode
 * made, and still empty: removing a mount point of another run's mount
 * namespace would detach its bind, and with it the protection.
 */
#include "internal.h"
#include "srt_made.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct made {
	char *path;		/* absolute, as bound */
	int fd;			/* O_RDONLY, flock LOCK_SH held */
	bool made;		/* corral made it: removed after the run */
	const char *content;	/* what it was made with (a file), or NULL */
	dev_t dev;
	ino_t ino;
};

struct corral_srt_made {
	struct made *v;
	size_t n;
};

struct corral_srt_made *srt_made_new(void)
{
	return calloc(1, sizeof(struct corral_srt_made));
}

static int put(struct corral_srt_made *m, const char *path, int fd, bool made,
	       const struct stat *st)
{
	struct made *v = realloc(m->v, (m->n + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	m->v = v;
	v[m->n] = (struct made){ .path = strdup(path), .fd = fd, .made = made,
				 .dev = st->st_dev, .ino = st->st_ino };
	if (!v[m->n].path)
		return -ENOMEM;
	m->n++;
	return 0;
}

/* One component beneath dir, no link followed (O_PATH). */
static int step(int dir, const char *name, bool directory)
{
	struct open_how how = {
		.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC | (directory ? O_DIRECTORY : 0),
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};

	return (int)syscall(SYS_openat2, dir, name, &how, sizeof(how));
}

/*
 * The kept path's last component, opened to be held: O_RDONLY (flock
 * needs more than O_PATH), O_NONBLOCK (a fifo there must not hang the
 * run), no link followed.
 */
static int hold_open(int dir, const char *name)
{
	struct open_how how = {
		.flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};

	return (int)syscall(SYS_openat2, dir, name, &how, sizeof(how));
}

/*
 * Hold the existing name in dir with a shared lock; 0, or 1 when it went
 * away meanwhile (another run removing what it made: made again by the
 * caller), or -errno.
 */
static int hold(struct corral_srt_made *m, int dir, const char *name, const char *path,
		bool made)
{
	struct stat st;
	int fd = hold_open(dir, name), e;

	if (fd < 0)
		return errno == ENOENT ? 1 : -errno;
	if (flock(fd, LOCK_SH | LOCK_NB) < 0 || fstat(fd, &st) < 0) {
		e = errno;
		close(fd);
		return e == EWOULDBLOCK ? 1 : -e;
	}
	if (st.st_nlink == 0) {
		close(fd);
		return 1;
	}
	if (put(m, path, fd, made, &st) < 0) {
		close(fd);
		return -ENOMEM;
	}
	return 0;
}

/* A short pause between tries while another run removes its stub. */
static void pause_a_little(void)
{
	struct timespec ts = { 0, 10 * 1000 * 1000 };

	nanosleep(&ts, NULL);
}

int srt_made_keep(struct corral_srt_made *m, const char *root, const char *rel,
		  bool directory, const char *content, char **bind, char **pins,
		  size_t *npins, char *why, size_t whylen)
{
	char part[PATH_MAX], path[PATH_MAX];
	int r = 1;

	*bind = NULL;
	*npins = 0;
	why[0] = '\0';
	/* bounded: another run may be removing its stub as we look */
	for (int tries = 0; r == 1 && tries < 50; tries++) {
		int dir = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC), next;
		const char *c = rel, *slash;
		bool last = false;

		if (tries)
			pause_a_little();
		if (dir < 0) {
			snprintf(why, whylen, "cannot open %s: %s", root, strerror(errno));
			return -errno;
		}
		for (size_t i = 0; i < *npins; i++)
			free(pins[i]);
		*npins = 0;
		r = 0;
		while (r == 0 && !last) {
			slash = strchr(c, '/');
			last = !slash;
			snprintf(part, sizeof(part), "%.*s", last ? (int)strlen(c) : (int)(slash - c), c);
			snprintf(path, sizeof(path), "%s/%.*s", root, (int)(c - rel) + (int)strlen(part), rel);
			next = last ? -1 : step(dir, part, true);
			if (!last && next >= 0) {
				/* a directory on the way: pinned, so it cannot be renamed away */
				if (*npins == SRT_PINS_MAX) {
					close(next);
					snprintf(why, whylen, "more than %d directories on the way",
						 SRT_PINS_MAX);
					r = -ENAMETOOLONG;
					break;
				}
				if (!(pins[(*npins)++] = strdup(path)))
					r = -ENOMEM;
				close(dir);
				dir = next;
				c = slash + 1;
				continue;
			}
			if (!last && errno == ELOOP) {
				r = -ELOOP;
				snprintf(why, whylen, "%s is a symlink (the sandbox may replace it)",
					 path);
				break;
			}
			if (!last && errno != ENOENT) {
				/*
				 * A file on the way (a worktree's .git): kept
				 * itself, else the sandbox removes it and makes
				 * the directory (srt skips the path: "nothing
				 * can be made beneath a file").
				 */
				r = hold(m, dir, part, path, false);
				if (r < 0)
					snprintf(why, whylen, "cannot open %s: %s", path, strerror(-r));
				if (r == 0 && !(*bind = strdup(path)))
					r = -ENOMEM;
				break;
			}
			/* the last component, or the first that is not there */
			r = hold(m, dir, part, path, false);
			if (r == 1) {
				bool d = directory || !last;

				if (d ? mkdirat(dir, part, 0555) < 0 :
				    (next = openat(dir, part, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW |
						   O_CLOEXEC, 0444)) < 0) {
					r = errno == EEXIST ? 1 : -errno;
					if (r < 0)
						snprintf(why, whylen, "cannot make %s: %s", path, strerror(errno));
				} else {
					size_t n = !d && content ? strlen(content) : 0;

					if (n && write(next, content, n) != (ssize_t)n) {
						r = -(errno ? errno : EIO);
						snprintf(why, whylen, "cannot write %s: %s", path,
							 strerror(-r));
						/* not left half made on the host */
						(void)unlinkat(dir, part, 0);
					}
					if (!d)
						close(next);
					if (r == 1)
						r = hold(m, dir, part, path, true);
					if (r == 0 && n)
						m->v[m->n - 1].content = content;
				}
			} else if (r < 0) {
				snprintf(why, whylen, "cannot open %s: %s", path, strerror(-r));
				if (r == -ELOOP)
					snprintf(why, whylen, "%s is a symlink (the sandbox may replace it)", path);
			}
			if (r == 0 && !(*bind = strdup(path)))
				r = -ENOMEM;
			last = true;
		}
		close(dir);
	}
	if (r == 1) {
		snprintf(why, whylen, "%s/%s: another run kept removing it", root, rel);
		r = -EAGAIN;
	}
	return r;
}

bool srt_made_was_made(const struct corral_srt_made *m, const char *path)
{
	for (size_t i = 0; m && i < m->n; i++)
		if (m->v[i].made && !strcmp(m->v[i].path, path))
			return true;
	return false;
}

/* A made file holds what it was made with (nothing, or content), no more. */
static bool still_as_made(const struct made *d, const struct stat *st)
{
	size_t n = d->content ? strlen(d->content) : 0;
	char buf[64];

	if ((size_t)st->st_size != n || n > sizeof(buf))
		return false;
	return !n || (pread(d->fd, buf, n, 0) == (ssize_t)n && !memcmp(buf, d->content, n));
}

/* Still the thing made, at its name: removed; else left. */
static void unmake(const struct made *d)
{
	char parent[PATH_MAX];
	const char *name = strrchr(d->path, '/');
	struct stat st;
	int dir;

	if (!name || name == d->path || (size_t)(name - d->path) >= sizeof(parent))
		return;
	snprintf(parent, sizeof(parent), "%.*s", (int)(name - d->path), d->path);
	name++;
	/* another run holds it: its bind is there; that run did not make it */
	if (flock(d->fd, LOCK_EX | LOCK_NB) < 0)
		return;
	dir = open(parent, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dir < 0)
		return;
	if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_dev == d->dev &&
	    st.st_ino == d->ino && (S_ISDIR(st.st_mode) || (S_ISREG(st.st_mode) &&
							 still_as_made(d, &st))))
		(void)unlinkat(dir, name, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0);
	close(dir);
}

void corral_srt_made_remove(struct corral_srt_made *m)
{
	if (!m)
		return;
	/* the deepest first: a made directory may hold another made one */
	for (size_t i = m->n; i-- > 0;) {
		if (m->v[i].made)
			unmake(&m->v[i]);
		close(m->v[i].fd);
		free(m->v[i].path);
	}
	free(m->v);
	free(m);
}
