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
 * directory (0555) or a file (0444: empty, "{}" for a JSON file, or
 * what git needs to find there to go on as before, .git/commondir's
 * "."), held open with a shared
 * flock(2) for the run, as is each kept path that existed: another run of
 * the same project that finds it there keeps it too.  After the run
 * (corral_srt_made_remove) each made one is removed only if no other run
 * holds it (an exclusive lock, not waited for), it is still the inode
 * made, and still empty: removing a mount point of another run's mount
 * namespace would detach its bind, and with it the protection.
 *
 * Each one made carries the xattr user.corral.placeholder (SRT_MARK),
 * set before it has a content or its final mode: so a later run, or the
 * run that holds it last, knows it for corral's and removes it when no
 * run holds it (adopted: a run that found another's, and a run that
 * finds one a killed run left), and the user can tell (getfattr).  One
 * found unmarked is the user's, whatever it holds, and never removed;
 * so is one marked but not as made (a directory that holds anything, a
 * file that holds more): a sandbox marks what it may write.
 * A file system without user xattrs (EOPNOTSUPP) makes them unmarked:
 * only the run that made them may remove them, as before.  A run killed
 * alone has them removed by its janitor (srt_made_watch), once its
 * sandbox is gone.
 *
 * Each write path's directory is opened once (srt_made_top) and held:
 * what is made is made beneath that fd, and removed beneath it, its
 * directories on the way reached with no link followed.  Beneath
 * another write bind, the one a sandbox writes, it is reached from that
 * bind's directory with no link followed either: a link there, which a
 * sandbox may have put, refuses it.
 */
#include "internal.h"
#include "srt_made.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

struct made {
	char *path;		/* absolute, as bound */
	int top;		/* its write path's directory (a top's fd, not its own) */
	char *parent;		/* path's directory, beneath top ("": top itself) */
	const char *name;	/* path's last component (in path) */
	int fd;			/* O_RDONLY, flock LOCK_SH held */
	bool made;		/* corral's: removed after the run if no run holds it */
	bool adopted;		/* corral's, made by another run (or a killed one) */
	bool marked;		/* carries SRT_MARK */
	bool may_adopt;		/* found where one may be made: corral's if marked later */
	bool is_dir;		/* what one made there is */
	const char *content;	/* what it was made with (a file), or NULL */
	dev_t dev;
	ino_t ino;
};

/* a write path's directory, opened once (srt_made_top) */
struct top {
	char *path;
	int fd;			/* O_PATH */
};

struct corral_srt_made {
	struct made *v;
	size_t n;
	struct top *tops;
	size_t ntops;
	int janitor;		/* srt_made_watch's socket, told once removed; -1: none */
	pid_t janitor_pid;
};

struct corral_srt_made *srt_made_new(void)
{
	struct corral_srt_made *m = calloc(1, sizeof(struct corral_srt_made));

	if (m)
		m->janitor = -1;
	return m;
}

static int put(struct corral_srt_made *m, const struct top *t, const char *path, int fd,
	       bool made, const struct stat *st)
{
	struct made *v = realloc(m->v, (m->n + 1) * sizeof(*v));
	const char *slash = strrchr(path, '/'), *rel = path + strlen(t->path) + 1;

	if (!v)
		return -ENOMEM;
	m->v = v;
	if (!slash || slash < rel - 1)
		return -EINVAL;	/* root/rel: never the root itself */
	/*
	 * The parent and name split now: corral_srt_made_unmake runs in a
	 * signal handler, where nothing may be formatted or allocated.
	 */
	v[m->n] = (struct made){ .path = strdup(path), .fd = fd, .made = made, .top = t->fd,
				 .parent = strndup(rel, slash < rel ? 0 : (size_t)(slash - rel)),
				 .dev = st->st_dev, .ino = st->st_ino };
	if (!v[m->n].path || !v[m->n].parent) {
		free(v[m->n].path);
		free(v[m->n].parent);
		return -ENOMEM;
	}
	v[m->n].name = v[m->n].path + (slash - path) + 1;
	m->n++;
	return 0;
}

/* Whether fd (O_RDONLY) carries corral's mark. */
static bool marked(int fd)
{
	char v[128];

	return fgetxattr(fd, SRT_MARK, v, sizeof(v)) >= 0 || errno == ERANGE;
}

/*
 * Mark fd (made, still writable by its owner) as corral's: the maker's
 * pid and boot, for a person who finds one.  0, or -errno: EOPNOTSUPP
 * on a file system without user xattrs.
 */
static int mark(int fd)
{
	char v[128], boot[40] = "?";
	int b = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (b >= 0) {
		n = read(b, boot, sizeof(boot) - 1);
		boot[n > 0 ? n : 0] = '\0';
		boot[strcspn(boot, "\n")] = '\0';
		close(b);
	}
	snprintf(v, sizeof(v), "corral run --settings, pid %d, boot %s", (int)getpid(), boot);
	return fsetxattr(fd, SRT_MARK, v, strlen(v), XATTR_CREATE) < 0 ? -errno : 0;
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
 * A directory (fd, O_RDONLY) holds nothing: as made.  The mark is no
 * proof: a sandbox sets it on any directory it may write, as the ones
 * on a kept path's way (bound onto themselves, writable) are.  Taken by
 * the mark alone, a project's .git or .claude marked so was reported as
 * made by another run, bound read-only whole in every later run, and
 * removed after the next one where it was empty.
 */
static bool empty_dir(int fd)
{
	int own = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *de;
	bool empty = true;
	DIR *d;

	if (own < 0)
		return false;
	d = fdopendir(own);
	if (!d) {
		close(own);
		return false;
	}
	errno = 0;
	while (empty && (de = readdir(d)))
		empty = !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..");
	if (errno)
		empty = false;
	closedir(d);
	return empty;
}

/* A file holds content (NULL: nothing), no more: as made. */
static bool holds_only(int fd, const struct stat *st, const char *content)
{
	size_t n = content ? strlen(content) : 0;
	char buf[64];

	if ((size_t)st->st_size != n || n > sizeof(buf))
		return false;
	return !n || (pread(fd, buf, n, 0) == (ssize_t)n && !memcmp(buf, content, n));
}

/*
 * Hold the existing name in dir with a shared lock; 0, or 1 when it went
 * away meanwhile (another run removing what it made: made again by the
 * caller), or -errno.  made: this run made it.  Else, with adopt, one
 * that carries corral's mark and is still as made (a directory if
 * want_dir, else a file holding content) is taken as corral's too:
 * another run's, or a killed run's, removed after this run if no run
 * holds it then.
 */
static int hold(struct corral_srt_made *m, const struct top *t, int dir, const char *name,
		const char *path, bool made, bool adopt, bool want_dir, const char *content)
{
	struct stat st;
	int fd = hold_open(dir, name), e;
	bool mk, ours;

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
	mk = marked(fd);
	ours = made || (adopt && mk && (want_dir ? S_ISDIR(st.st_mode) && empty_dir(fd) :
					S_ISREG(st.st_mode) && holds_only(fd, &st, content)));
	if ((e = put(m, t, path, fd, ours, &st)) < 0) {
		close(fd);
		return e;
	}
	m->v[m->n - 1].marked = mk;
	m->v[m->n - 1].adopted = ours && !made;
	m->v[m->n - 1].may_adopt = adopt;
	m->v[m->n - 1].is_dir = want_dir;
	if (!want_dir)
		m->v[m->n - 1].content = content;
	return 0;
}

/* A short pause between tries while another run removes a placeholder it made. */
static void pause_a_little(void)
{
	struct timespec ts = { 0, 10 * 1000 * 1000 };

	nanosleep(&ts, NULL);
}

/* Whether dir's name (a directory) is a placeholder: marked, and empty. */
static bool placeholder_dir_at(int dir, const char *name)
{
	int fd = hold_open(dir, name);
	bool r;

	if (fd < 0)
		return false;
	r = marked(fd) && empty_dir(fd);
	close(fd);
	return r;
}

/*
 * Make dir's name: an empty directory, or a file holding content,
 * marked while its owner may still write it (a user xattr needs write
 * access), then given its mode.  0, 1 when it is there already (made
 * by another run meanwhile), or -errno with why said; a file is not
 * left half made.
 */
static int make_stub(int dir, const char *name, const char *path, bool d, const char *content,
		     char *why, size_t whylen)
{
	size_t n = !d && content ? strlen(content) : 0;
	int fd = -1, r = 0;

	if (d ? mkdirat(dir, name, 0700) < 0 :
	    (fd = openat(dir, name, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC,
			 0600)) < 0) {
		if (errno == EEXIST)
			return 1;
		snprintf(why, whylen, "cannot make %s: %s", path, strerror(errno));
		return -errno;
	}
	if (d && (fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		r = -errno;
		snprintf(why, whylen, "cannot open %s: %s", path, strerror(errno));
		(void)unlinkat(dir, name, AT_REMOVEDIR);
		return r;
	}
	/* unmarked (no user xattrs there): only this run removes it */
	(void)mark(fd);
	if (n && write(fd, content, n) != (ssize_t)n) {
		r = -(errno ? errno : EIO);
		snprintf(why, whylen, "cannot write %s: %s", path, strerror(-r));
	} else if (fchmod(fd, d ? 0555 : 0444) < 0) {
		r = -errno;
		snprintf(why, whylen, "cannot chmod %s: %s", path, strerror(errno));
	}
	close(fd);
	if (r < 0)
		(void)unlinkat(dir, name, d ? AT_REMOVEDIR : 0);
	return r;
}

/*
 * Open root, a write path's directory, for what is kept beneath it:
 * as beneath (root's path from outer's) in outer (a write bind holding
 * it, or NULL) with no link followed, as a sandbox writing outer may have put one there (to
 * another user's directory, for corral to make files in, as root
 * anywhere); else by its path, the user's, links and all.
 */
int srt_made_top(struct corral_srt_made *m, const char *root, const char *outer,
		 const char *beneath, char *why, size_t whylen)
{
	struct open_how how = {
		.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	struct top *t;
	int fd, o, e;

	for (size_t i = 0; i < m->ntops; i++)
		if (!strcmp(m->tops[i].path, root))
			return 0;
	if (outer) {
		o = open(outer, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (o < 0) {
			e = errno;
			snprintf(why, whylen, "cannot open %s: %s", outer, strerror(e));
			return -e;
		}
		fd = openat2_retry(o, beneath, &how);
		e = errno;
		close(o);
	} else {
		fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
		e = errno;
	}
	if (fd < 0) {
		if (outer && e == ELOOP)
			snprintf(why, whylen, "%s: a symbolic link is on its way beneath the "
				 "write bind %s (a sandbox writing there may have put it): "
				 "refused", root, outer);
		else
			snprintf(why, whylen, "cannot open %s: %s", root, strerror(e));
		return -e;
	}
	t = realloc(m->tops, (m->ntops + 1) * sizeof(*t));
	if (!t) {
		close(fd);
		return -ENOMEM;
	}
	m->tops = t;
	t[m->ntops] = (struct top){ .path = strdup(root), .fd = fd };
	if (!t[m->ntops].path) {
		close(fd);
		return -ENOMEM;
	}
	m->ntops++;
	return 0;
}

static const struct top *top_of(const struct corral_srt_made *m, const char *root)
{
	for (size_t i = 0; i < m->ntops; i++)
		if (!strcmp(m->tops[i].path, root))
			return &m->tops[i];
	return NULL;
}

/* dir's name is a symbolic link now (no link followed to tell) */
static bool is_link(int dir, const char *name)
{
	struct stat st;

	return fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
}

/*
 * The link at dir's name (path), for the caller to keep: its target
 * read from the directory walked to, no path followed again.
 */
static int link_found(int dir, const char *name, const char *path, const char *after,
		      struct srt_link *link, char **bind, char *why, size_t whylen)
{
	ssize_t n = readlinkat(dir, name, link->target, sizeof(link->target) - 1);

	if (n < 0 || (size_t)n == sizeof(link->target) - 1) {
		snprintf(why, whylen, "cannot read the link %s: %s", path,
			 n < 0 ? strerror(errno) : "its target is too long");
		return n < 0 ? -errno : -ENAMETOOLONG;
	}
	link->target[n] = '\0';
	link->after = after;
	*bind = strdup(path);
	return *bind ? SRT_KEEP_LINK : -ENOMEM;
}

/*
 * make_stub's error r in dir is the sandbox's too: a read-only file
 * system, or a directory that takes no new name from this user and is
 * not the user's.  One of the user's the sandbox could chmod u+w and
 * then write what is kept (a .claude of mode 0555: its commands/), and
 * an error the sandbox need not meet (ENOSPC, a directory full of
 * names, EAGAIN) is no reason to leave a kept path writable.
 */
static bool unmakeable(int dir, int r)
{
	struct stat st;

	if (r == -EROFS)
		return true;
	return (r == -EACCES || r == -EPERM) && fstat(dir, &st) == 0 && st.st_uid != geteuid();
}

/*
 * The pieces of root/rel walked so far; a directory on the way is
 * pinned (bound onto itself, so it cannot be renamed away) unless it is
 * corral's placeholder, which is kept itself, as the run that made it
 * kept it.
 */
int srt_made_keep(struct corral_srt_made *m, const char *root, const char *rel,
		  bool directory, const char *content, char **bind, char **pins,
		  size_t *npins, struct srt_link *link, char *why, size_t whylen)
{
	const struct top *t = top_of(m, root);
	char part[PATH_MAX], path[PATH_MAX];
	int r = 1;

	*bind = NULL;
	*npins = 0;
	why[0] = '\0';
	if (!t) {
		snprintf(why, whylen, "%s was not opened (srt_made_top)", root);
		return -EINVAL;
	}
	/* bounded: another run may be removing a placeholder it made as we look */
	for (int tries = 0; r == 1 && tries < 50; tries++) {
		int dir = fcntl(t->fd, F_DUPFD_CLOEXEC, 3), next;
		const char *c = rel, *slash;
		bool last = false;

		if (tries)
			pause_a_little();
		if (dir < 0) {
			snprintf(why, whylen, "cannot dup %s: %s", root, strerror(errno));
			return -errno;
		}
		for (size_t i = 0; i < *npins; i++)
			free(pins[i]);
		*npins = 0;
		r = 0;
		while (r == 0 && !last) {
			const char *has;
			bool d;
			int e;

			slash = strchr(c, '/');
			last = !slash;
			snprintf(part, sizeof(part), "%.*s", last ? (int)strlen(c) : (int)(slash - c), c);
			snprintf(path, sizeof(path), "%s/%.*s", root, (int)(c - rel) + (int)strlen(part), rel);
			next = last ? -1 : step(dir, part, true);
			e = errno;	/* step's, judged below */
			if (next < 0 && is_link(dir, part)) {
				r = link_found(dir, part, path, last ? "" : slash + 1, link,
					       bind, why, whylen);
				break;
			}
			errno = e;
			if (next >= 0 && placeholder_dir_at(dir, part)) {
				/* a placeholder directory: kept as its maker kept it */
				close(next);
				next = -1;
				last = true;
			} else if (!last && next >= 0) {
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
			if (!last && errno != ENOENT) {
				/*
				 * A file on the way (a worktree's .git): kept
				 * itself, else the sandbox removes it and makes
				 * the directory (srt skips the path: "nothing
				 * can be made beneath a file").
				 */
				r = hold(m, t, dir, part, path, false, false, false, NULL);
				if (r < 0)
					snprintf(why, whylen, "cannot open %s: %s", path, strerror(-r));
				if (r == 0 && !(*bind = strdup(path)))
					r = -ENOMEM;
				break;
			}
			/* the last component, a placeholder directory, or the first that is not there */
			d = directory || strcmp(path + strlen(root) + 1, rel);
			has = d ? NULL : content;
			r = hold(m, t, dir, part, path, false, true, d, has);
			if (r == 1) {
				r = make_stub(dir, part, path, d, has, why, whylen);
				if (r == 0)
					r = hold(m, t, dir, part, path, true, false, d, has);
				else if (r < 0 && unmakeable(dir, r))
					r = SRT_KEEP_UNMAKEABLE;
			} else if (r < 0) {
				snprintf(why, whylen, "cannot open %s: %s", path, strerror(-r));
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

enum srt_made_kind srt_made_kind(const struct corral_srt_made *m, const char *path)
{
	for (size_t i = 0; m && i < m->n; i++) {
		const struct made *d = &m->v[i];

		if (!strcmp(d->path, path))
			return !d->made ? SRT_FOUND : d->adopted ? SRT_ADOPTED :
				d->marked ? SRT_MADE : SRT_MADE_UNMARKED;
	}
	return SRT_FOUND;
}

/*
 * Still the thing made, at its name, and no run holds it: removed; else
 * left.  Its directory is found beneath the write path's held one, no
 * link followed: by its path, from /, a write path named through a
 * link (~/src -> /data/src) was never found (O_NOFOLLOW), and what was
 * made there stayed.  Only calls a signal handler may make.
 */
static void unmake(const struct made *d)
{
	struct open_how how = {
		.flags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	struct stat st;
	int dir;

	/* another run holds it: its bind is there; that run will remove it */
	if (flock(d->fd, LOCK_EX | LOCK_NB) < 0)
		return;
	dir = d->parent[0] ? (int)syscall(SYS_openat2, d->top, d->parent, &how, sizeof(how)) :
			     d->top;
	if (dir < 0)
		return;
	if (fstatat(dir, d->name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_dev == d->dev &&
	    st.st_ino == d->ino && (S_ISDIR(st.st_mode) || (S_ISREG(st.st_mode) &&
							 holds_only(d->fd, &st, d->content))))
		(void)unlinkat(dir, d->name, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0);
	if (dir != d->top)
		close(dir);
}

/*
 * Found unmarked where one is made, and marked now: another run's,
 * made as this one looked (between its mkdir and its mark), which that
 * run left to this one, holding it.
 */
static bool marked_since(const struct made *d)
{
	struct stat st;

	return d->may_adopt && marked(d->fd) && fstat(d->fd, &st) == 0 &&
	       (d->is_dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode));
}

void corral_srt_made_unmake(const struct corral_srt_made *m)
{
	/* the deepest first: a made directory may hold another made one */
	for (size_t i = m ? m->n : 0; i-- > 0;)
		if (m->v[i].made || marked_since(&m->v[i]))
			unmake(&m->v[i]);
}

/*
 * The janitor (srt_made_watch's child) after its maker died without
 * saying it removed what it made (SIGKILL, the OOM killer): each one
 * waited for until no process holds it (the maker's sandbox's init, a
 * fork of it, holds the maker's lock until the sandbox is gone: its
 * binds lie on them till then), then removed as the maker would have,
 * and let go, the deepest first.  One at a time: holding those it had
 * while it waited for one another run holds (that run's settings keep
 * fewer), it kept every later run of the project from holding them
 * ("another run kept removing it") as long as that run lasted.
 * Only syscalls: a fork of a process that may have had threads.
 */
static void janitor(struct corral_srt_made *m, int done)
{
	char c = 0;
	ssize_t n;

	do
		n = read(done, &c, 1);
	while (n < 0 && errno == EINTR);
	if (n == 1 && c == 'r')
		_exit(0);	/* removed by the maker */
	for (size_t i = m->n; i-- > 0;) {
		struct made *d = &m->v[i];

		if (!d->made && !d->may_adopt)
			continue;
		while (flock(d->fd, LOCK_EX) < 0 && errno == EINTR)
			;
		if (d->made || marked_since(d))
			unmake(d);
		(void)flock(d->fd, LOCK_UN);
	}
	_exit(0);
}

/* the janitor's own lock on each one: a new open file description, at fd's number */
static int own_lock(int fd)
{
	char self[40];
	int n;

	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	n = open(self, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (n < 0 || dup3(n, fd, O_CLOEXEC) < 0)
		return -1;
	close(n);
	return 0;
}

static bool kept_fd(const struct corral_srt_made *m, int fd, int done)
{
	if (fd == done)
		return true;
	for (size_t i = 0; i < m->n; i++)
		if (m->v[i].fd == fd)
			return true;
	for (size_t i = 0; i < m->ntops; i++)
		if (m->tops[i].fd == fd)
			return true;
	return false;
}

/*
 * What a run made is removed also when the run is killed alone (kill -9
 * of corral, timeout -s KILL, the OOM killer choosing it): a child in a
 * session of its own, holding nothing but what it removes, waits for
 * the run to say it removed them; told nothing (its socket closed by
 * the run's death), it removes them once no process holds them.  Before,
 * they stayed until the project's next --settings run (an empty
 * .bash_profile in the way of .profile, a .git/commondir, an empty
 * .envrc in git status).  Killed with its run (a process group or
 * cgroup killed whole, a power cut), the next run removes them.
 */
int srt_made_watch(struct corral_srt_made *m)
{
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	struct rlimit rl;
	int p[2], nul, max = 1024, top = 2;
	sigset_t none;
	pid_t pid;

	if (!m->n)
		return 0;
	/* a socket, not a pipe: told with MSG_NOSIGNAL, a janitor gone is no SIGPIPE */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -errno;
	}
	if (pid > 0) {
		close(p[0]);
		m->janitor = p[1];
		m->janitor_pid = pid;
		return 0;
	}
	/*
	 * The janitor: its own locks, no other fd, no terminal, none of
	 * the run's signal handlers (a stop one would unmake and say the
	 * run's words) or blocked signals.
	 */
	close(p[1]);
	for (int sig = 1; sig < NSIG; sig++)
		(void)sigaction(sig, &dfl, NULL);
	sigemptyset(&none);
	(void)sigprocmask(SIG_SETMASK, &none, NULL);
	setsid();
	prctl(PR_SET_NAME, "corral-janitor", 0, 0, 0);
	for (size_t i = 0; i < m->n; i++)
		if (own_lock(m->v[i].fd) < 0)
			_exit(1);	/* the run, held, removes them as before */
	nul = open("/dev/null", O_RDWR | O_CLOEXEC);
	for (int fd = 0; fd < 3 && nul >= 0; fd++)
		if (fd != nul)
			(void)dup2(nul, fd);
	/*
	 * No directory read (malloc, after a fork): the numbers above the
	 * highest kept at once, the ones below it each.
	 */
	top = p[0];
	for (size_t i = 0; i < m->n; i++)
		top = m->v[i].fd > top ? m->v[i].fd : top;
	for (size_t i = 0; i < m->ntops; i++)
		top = m->tops[i].fd > top ? m->tops[i].fd : top;
	if (syscall(SYS_close_range, top + 1, ~0U, 0) < 0) {
		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
			max = rl.rlim_cur > 65536 ? 65536 : (int)rl.rlim_cur;
		for (int fd = top + 1; fd < max; fd++)
			close(fd);
	}
	for (int fd = 3; fd <= top; fd++)
		if (!kept_fd(m, fd, p[0]))
			close(fd);
	janitor(m, p[0]);
	return 0;
}

void corral_srt_made_remove(struct corral_srt_made *m)
{
	if (!m)
		return;
	corral_srt_made_unmake(m);
	if (m->janitor >= 0) {
		/* removed: the janitor has nothing to do */
		if (send(m->janitor, "r", 1, MSG_NOSIGNAL) < 0)
			(void)0;	/* it ended already (killed): nothing to tell */
		close(m->janitor);
		/* it ends at once, told; no zombie left to the caller */
		while (waitpid(m->janitor_pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	for (size_t i = m->n; i-- > 0;) {
		close(m->v[i].fd);
		free(m->v[i].path);
		free(m->v[i].parent);
	}
	for (size_t i = 0; i < m->ntops; i++) {
		close(m->tops[i].fd);
		free(m->tops[i].path);
	}
	free(m->v);
	free(m->tops);
	free(m);
}
