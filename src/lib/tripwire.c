/*
 * tripwire.c - the supervisor's watch on the decoys planted in a sandbox,
 * and what the decoys say.
 *
 * A tripwire is a file no honest program has a reason to open: fake cloud
 * keys, a fake SSH key.  The sandbox plants them (mount.c) before anything
 * untrusted runs; this watches them from outside.  Both kernels' interfaces
 * mark the inode, so a hard link or a path the sandbox invents later leads
 * to the same mark.
 *
 * fanotify (root): FAN_OPEN_PERM on each file.  An open waits until we
 * answer; we answer FAN_DENY, always, for every permission event read
 * (an unanswered one would leave the opener hanging), then report.
 * inotify (anyone): IN_OPEN and IN_ACCESS, after the fact and without a
 * pid.  In both modes inotify also reports IN_DELETE_SELF, IN_MOVE_SELF,
 * IN_ATTRIB and IN_MODIFY: removing, replacing or truncating a tripwire
 * is touching it.
 *
 * Our own opens happen before any mark exists, and the fds are closed
 * right after marking (a held fd would also delay IN_DELETE_SELF until
 * its close).
 */
#include "internal.h"
#include "tripwire.h"

#include <event2/event.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define HOW_FANOTIFY	"fanotify: open denied"
#define HOW_OPEN	"inotify: after the open, no pid"
#define HOW_READ	"inotify: read after an open not seen, no pid"
#define HOW_DELETED	"removed: deleted"
#define HOW_RENAMED	"removed: renamed"
#define HOW_ATTRIB	"tampered: attributes or links changed"
#define HOW_MODIFIED	"tampered: contents changed (truncated or written)"

/*
 * What inotify watches besides opens: tampering.  IN_MODIFY for
 * truncate(2), which changes a file by its path without opening it (and
 * gives no IN_ATTRIB): a decoy emptied so is as gone as one deleted.
 */
#define IN_TAMPER	(IN_DELETE_SELF | IN_MOVE_SELF | IN_ATTRIB | IN_MODIFY)

/* One read's worth of events: bounded work per callback. */
#define EVENT_BUF	4096

struct wire {
	char *path;		/* as reported: the path inside the sandbox */
	dev_t dev;
	ino_t ino;
	int wd;			/* inotify watch, -1 once the kernel dropped it */
	bool opened;		/* an open was reported (inotify mode) */
};

struct tripwire {
	const char *mode;
	tripwire_hit_fn hit;
	void *arg;
	int fan_fd, in_fd;
	struct event *fan_ev, *in_ev;
	struct wire *w;
	size_t n;
	bool delivering;	/* inside hit(): tripwire_free() waits */
	bool freed;
};

struct hit {
	const struct wire *w;
	pid_t pid;
	const char *how;
	char group[64];		/* the opener's cgroup, its last part */
};

/*
 * Where the opener's cgroup is, read before we answer: once denied, it
 * exits, and its pid names nothing.
 */
static void opener_group(pid_t pid, char *buf, size_t len)
{
	struct cg_proc where;

	buf[0] = '\0';
	if (cg_proc_read(&where, pid) == 0)
		snprintf(buf, len, "%s", cg_proc_group(&where));
}

bool tripwire_is_wire(const struct tripwire *t, const struct stat *st)
{
	for (size_t i = 0; t && i < t->n; i++)
		if (t->w[i].dev == st->st_dev && t->w[i].ino == st->st_ino)
			return true;
	return false;
}

const char *tripwire_mode(const struct tripwire *t)
{
	return t ? t->mode : "none";
}

static void destroy(struct tripwire *t)
{
	size_t i;

	if (t->fan_ev)
		event_free(t->fan_ev);
	if (t->in_ev)
		event_free(t->in_ev);
	if (t->fan_fd >= 0)
		close(t->fan_fd);
	if (t->in_fd >= 0)
		close(t->in_fd);
	for (i = 0; i < t->n; i++)
		free(t->w[i].path);
	free(t->w);
	free(t);
}

void tripwire_free(struct tripwire *t)
{
	if (!t)
		return;
	if (t->delivering) {
		t->freed = true;
		return;
	}
	destroy(t);
}

/*
 * Hand the hits of one batch to the caller, after every permission event
 * of the batch was answered.  Returns false when the callback freed us.
 */
static bool deliver(struct tripwire *t, const struct hit *h, size_t n)
{
	size_t i;

	t->delivering = true;
	for (i = 0; i < n && !t->freed; i++)
		t->hit(t->arg, h[i].w ? h[i].w->path : "?", h[i].pid, h[i].how,
		       h[i].group);
	t->delivering = false;
	if (t->freed) {
		destroy(t);
		return false;
	}
	return true;
}

static struct wire *wire_by_inode(struct tripwire *t, int fd)
{
	struct stat st;
	size_t i;

	if (fstat(fd, &st) < 0)
		return NULL;
	for (i = 0; i < t->n; i++)
		if (t->w[i].dev == st.st_dev && t->w[i].ino == st.st_ino)
			return &t->w[i];
	return NULL;
}

static struct wire *wire_by_wd(struct tripwire *t, int wd)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		if (t->w[i].wd == wd)
			return &t->w[i];
	return NULL;
}

static void on_fanotify(evutil_socket_t fd, short what, void *arg)
{
	alignas(struct fanotify_event_metadata) char buf[EVENT_BUF];
	struct hit hits[EVENT_BUF / FAN_EVENT_METADATA_LEN];
	struct tripwire *t = arg;
	const struct fanotify_event_metadata *m;
	size_t nh = 0;
	ssize_t len;

	(void)what;
	len = read(fd, buf, sizeof(buf));
	if (len <= 0)
		return;		/* EAGAIN, EINTR: called again while readable */
	for (m = (const void *)buf; FAN_EVENT_OK(m, len); m = FAN_EVENT_NEXT(m, len)) {
		if (m->vers != FANOTIFY_METADATA_VERSION)
			break;	/* cannot happen with the headers we built with */
		if (m->fd < 0)
			continue;	/* FAN_NOFD: overflow, none with an unlimited queue */
		hits[nh] = (struct hit){ wire_by_inode(t, m->fd), m->pid,
					 HOW_FANOTIFY, "" };
		opener_group(m->pid, hits[nh].group, sizeof(hits[nh].group));
		nh++;
		if (m->mask & FAN_OPEN_PERM) {
			struct fanotify_response resp = { .fd = m->fd,
							  .response = FAN_DENY };

			if (write(fd, &resp, sizeof(resp)) < 0) {
				/* the opener is gone (killed): nobody waits */
			}
		}
		close(m->fd);
	}
	deliver(t, hits, nh);
}

/*
 * inotify: per wire, what this batch saw.  A read stream gives one
 * IN_ACCESS a read(2): report the open, not each read; and an unlink
 * gives IN_ATTRIB (the link count) then IN_DELETE_SELF: report the
 * removal only.
 */
static void on_inotify(evutil_socket_t fd, short what, void *arg)
{
	alignas(struct inotify_event) char buf[EVENT_BUF];
	struct tripwire *t = arg;
	uint32_t seen[TRIPWIRE_MAX_FILES] = { 0 };
	struct hit hits[TRIPWIRE_MAX_FILES * 3];
	const struct inotify_event *e;
	size_t nh = 0, i;
	ssize_t len;
	char *p;

	(void)what;
	len = read(fd, buf, sizeof(buf));
	if (len <= 0)
		return;
	for (p = buf; p + sizeof(*e) <= buf + len; p += sizeof(*e) + e->len) {
		struct wire *w;

		e = (const void *)p;
		/* IN_Q_OVERFLOW: what filled the queue was read before it */
		w = e->wd >= 0 ? wire_by_wd(t, e->wd) : NULL;
		if (!w)
			continue;
		seen[w - t->w] |= e->mask;
		if (e->mask & IN_IGNORED)
			w->wd = -1;	/* the kernel dropped the watch */
	}
	for (i = 0; i < t->n; i++) {
		struct wire *w = &t->w[i];

		if (seen[i] & IN_OPEN) {
			hits[nh++] = (struct hit){ w, -1, HOW_OPEN, "" };
			w->opened = true;
		} else if ((seen[i] & IN_ACCESS) && !w->opened) {
			hits[nh++] = (struct hit){ w, -1, HOW_READ, "" };
			w->opened = true;
		}
		if (seen[i] & IN_DELETE_SELF)
			hits[nh++] = (struct hit){ w, -1, HOW_DELETED, "" };
		else if (seen[i] & IN_MOVE_SELF)
			hits[nh++] = (struct hit){ w, -1, HOW_RENAMED, "" };
		else if (seen[i] & IN_ATTRIB)
			hits[nh++] = (struct hit){ w, -1, HOW_ATTRIB, "" };
		else if (seen[i] & IN_MODIFY)
			hits[nh++] = (struct hit){ w, -1, HOW_MODIFIED, "" };
	}
	deliver(t, hits, nh);
}

/* Open path beneath rootfd, as the sandbox sees it, and check it. */
static int open_wire(int rootfd, const char *path, struct corral_err *err)
{
	struct open_how how = {
		.flags = O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS |
			   RESOLVE_NO_MAGICLINKS,
	};
	struct stat st;
	int fd, e;

	if (path[0] != '/')
		return corral_set_err(err, -EINVAL,
				      "tripwire %s: not an absolute path", path);
	fd = openat2_retry(rootfd, path + 1, &how);
	if (fd < 0) {
		e = errno;
		return corral_set_err(err, -e, "tripwire %s: %s%s", path,
				      strerror(e), e == ELOOP ?
				      " (a symlink on the way: refused)" : "");
	}
	if (fstat(fd, &st) < 0) {
		e = errno;
		close(fd);
		return corral_set_errno(err, e, "tripwire %s", path);
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return corral_set_err(err, -EINVAL,
				      "tripwire %s: not a regular file", path);
	}
	return fd;
}

/* Watch the open file fd for w, by inode: no path is looked up again. */
static int mark_wire(struct tripwire *t, struct wire *w, int fd,
		     struct corral_err *err)
{
	uint32_t mask = IN_TAMPER;
	char self[64];
	struct stat st;
	int e;

	if (fstat(fd, &st) < 0) {
		e = errno;
		return corral_set_errno(err, e, "tripwire %s", w->path);
	}
	w->dev = st.st_dev;
	w->ino = st.st_ino;
	if (t->fan_fd >= 0 &&
	    fanotify_mark(t->fan_fd, FAN_MARK_ADD, FAN_OPEN_PERM, fd, NULL) < 0) {
		e = errno;
		return corral_set_errno(err, e, "tripwire %s: fanotify_mark",
				      w->path);
	}
	if (t->fan_fd < 0)
		mask |= IN_OPEN | IN_ACCESS;
	/* The magic link is the open file itself, wherever it lives. */
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	w->wd = inotify_add_watch(t->in_fd, self, mask);
	if (w->wd < 0) {
		e = errno;
		return corral_set_err(err, -e, "tripwire %s: inotify_add_watch: %s%s",
				      w->path, strerror(e), e == ENOSPC ?
				      " (fs.inotify.max_user_watches reached)" : "");
	}
	return 0;
}

static int open_notifiers(struct tripwire *t, unsigned int flags,
			  struct corral_err *err)
{
	int e;

	if (!(flags & TRIPWIRE_NO_FANOTIFY)) {
		/* An unlimited queue: every open is seen (each one blocks). */
		t->fan_fd = fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC |
					  FAN_NONBLOCK | FAN_UNLIMITED_QUEUE,
					  O_RDONLY | O_LARGEFILE | O_CLOEXEC);
		if (t->fan_fd < 0 && errno != EPERM && errno != ENOSYS &&
		    errno != EINVAL) {
			e = errno;
			return corral_set_errno(err, e, "fanotify_init");
		}
	}
	t->mode = t->fan_fd >= 0 ? "fanotify" : "inotify";
	t->in_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (t->in_fd < 0) {
		e = errno;
		/* EMFILE is a per-user count used up here, not our open files */
		return corral_set_err(err, e == EMFILE ? -EUSERS : -e, "inotify_init1: %s%s",
				      strerror(e), e == EMFILE ? " (the caller's inotify "
				      "instances, fs.inotify.max_user_instances, are all in "
				      "use: its other sandboxes count against them too)" : "");
	}
	return 0;
}

/*
 * What the kernel has queued, reported now rather than on the loop's next
 * turn: a call whose command opened a decoy and ended is judged after
 * its open is known (both kernels queue the event at the open, before
 * the opener can exit).
 */
void tripwire_drain(struct tripwire *t)
{
	if (!t || t->delivering)
		return;
	if (t->fan_fd >= 0)
		on_fanotify(t->fan_fd, EV_READ, t);
	if (t->in_fd >= 0)
		on_inotify(t->in_fd, EV_READ, t);
}

static int add_events(struct tripwire *t, struct event_base *base,
		      struct corral_err *err)
{
	if (t->fan_fd >= 0) {
		t->fan_ev = event_new(base, t->fan_fd, EV_READ | EV_PERSIST,
				      on_fanotify, t);
		if (!t->fan_ev || event_add(t->fan_ev, NULL) < 0)
			return corral_set_err(err, -ENOMEM,
					      "cannot watch the fanotify fd");
	}
	t->in_ev = event_new(base, t->in_fd, EV_READ | EV_PERSIST, on_inotify, t);
	if (!t->in_ev || event_add(t->in_ev, NULL) < 0)
		return corral_set_err(err, -ENOMEM, "cannot watch the inotify fd");
	return 0;
}

struct tripwire *tripwire_start_at(struct event_base *base, int rootfd,
				   const char *const *paths, size_t n,
				   unsigned int flags, tripwire_hit_fn hit,
				   void *arg, struct corral_err *err)
{
	struct tripwire *t;
	size_t i;
	int r = 0, fd;

	if (n > TRIPWIRE_MAX_FILES) {
		corral_set_err(err, -E2BIG, "%zu tripwires, at most %d", n,
			       TRIPWIRE_MAX_FILES);
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		corral_set_err(err, -ENOMEM, "out of memory for the tripwires");
		return NULL;
	}
	t->fan_fd = t->in_fd = -1;
	t->hit = hit;
	t->arg = arg;
	t->mode = "none";
	if (!n)
		return t;
	t->w = calloc(n, sizeof(*t->w));
	if (!t->w) {
		r = corral_set_err(err, -ENOMEM, "out of memory for %zu tripwires",
				   n);
		goto fail;
	}
	for (i = 0; i < n; i++) {
		t->w[i].wd = -1;
		t->w[i].path = strdup(paths[i]);
		if (!t->w[i].path) {
			r = corral_set_err(err, -ENOMEM, "out of memory for the tripwire %s",
					   paths[i]);
			goto fail;
		}
		t->n++;
	}
	r = open_notifiers(t, flags, err);
	for (i = 0; r == 0 && i < n; i++) {
		fd = open_wire(rootfd, paths[i], err);
		if (fd < 0) {
			r = fd;
			break;
		}
		r = mark_wire(t, &t->w[i], fd, err);
		close(fd);
	}
	if (r == 0)
		r = add_events(t, base, err);
	if (r == 0)
		return t;
fail:
	destroy(t);
	return NULL;
}

struct tripwire *tripwire_start(struct event_base *base, pid_t sandbox_pid,
				const struct corral_policy *p, tripwire_hit_fn hit,
				void *arg, struct corral_err *err)
{
	const char *const *paths = (const char *const *)p->abort.tripwires;
	struct tripwire *t;
	char root[64];
	const char *over;
	size_t i;
	int fd, e;

	for (i = 0; i < p->abort.ntripwires; i++) {
		over = tripwire_bind_over(p, paths[i]);
		if (over) {
			corral_set_err(err, -EINVAL,
				       "tripwire %s: lies under the bind on %s, a host directory",
				       paths[i], over);
			return NULL;
		}
	}
	if (!p->abort.ntripwires)
		return tripwire_start_at(base, -1, NULL, 0, 0, hit, arg, err);
	snprintf(root, sizeof(root), "/proc/%d/root", (int)sandbox_pid);
	fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		e = errno;
		corral_set_err(err, -e, "%s: %s%s", root, strerror(e),
			       e == EACCES ? " (the sandbox's PID 1 is no longer"
			       " dumpable: start the watch before that)" : "");
		return NULL;
	}
	t = tripwire_start_at(base, fd, paths, p->abort.ntripwires, 0, hit,
			      arg, err);
	close(fd);
	return t;
}

static bool under(const char *path, const char *top)
{
	size_t n = strlen(top);

	if (n == 1 && top[0] == '/')
		return true;
	return !strncmp(path, top, n) && (path[n] == '\0' || path[n] == '/');
}

const char *tripwire_bind_over(const struct corral_policy *p, const char *path)
{
	size_t i;

	for (i = 0; i < p->nbinds; i++)
		if (under(path, p->binds[i].dst))
			return p->binds[i].dst;
	return NULL;
}

/* ---- the decoys ------------------------------------------------------ */

static const char upper32[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
static const char alnum[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
static const char b64[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* n characters of alphabet, uniformly (rejection sampling). */
static int rand_chars(char *out, size_t n, const char *alphabet,
		      struct corral_err *err)
{
	size_t alen = strlen(alphabet), limit = 256 - 256 % alen, i = 0;
	unsigned char pool[256];
	size_t used = sizeof(pool);
	int r;

	while (i < n) {
		if (used == sizeof(pool)) {
			r = corral_random(pool, sizeof(pool));
			if (r < 0)
				return corral_set_errno(err, -r, "no random bytes for a decoy");
			used = 0;
		}
		if (pool[used] < limit)
			out[i++] = alphabet[pool[used] % alen];
		used++;
	}
	return 0;
}

/* Appends to a buffer that is known to be large enough. */
struct text {
	char *buf;
	size_t len, cap;
	struct corral_err *err;
	int r;
};

static void put(struct text *t, const char *s)
{
	size_t n = strlen(s);

	if (t->r)
		return;
	if (t->len + n > t->cap) {
		t->r = corral_set_err(t->err, -ENOBUFS, "decoy larger than %zu bytes",
				      t->cap);
		return;
	}
	memcpy(t->buf + t->len, s, n);
	t->len += n;
}

static void put_rand(struct text *t, size_t n, const char *alphabet)
{
	if (t->r)
		return;
	if (t->len + n > t->cap) {
		t->r = corral_set_err(t->err, -ENOBUFS, "decoy larger than %zu bytes",
				      t->cap);
		return;
	}
	t->r = rand_chars(t->buf + t->len, n, alphabet, t->err);
	if (!t->r)
		t->len += n;
}

/*
 * An OpenSSH private key block: the real header ("openssh-key-v1", no
 * cipher, one key) and key type, then random base64 of about the right
 * length, 70 a line.
 */
static void put_ssh_key(struct text *t, const char *name)
{
	static const char magic[] =
		"b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAA";
	const char *type = "MwAAAAtzc2gtZWQyNTUxOQAAACA";	/* ssh-ed25519 */
	size_t total = 399, line, done;
	char body[3000];

	if (!strcmp(name, "id_rsa")) {
		type = "lwAAAAdzc2gtcnNhAAAAAwEAAQAAAYEA";	/* ssh-rsa */
		total = 2590;
	} else if (!strcmp(name, "id_ecdsa")) {
		type = "aAAAABNlY2RzYS1zaGEyLW5pc3RwMjU2AAAACG5pc3RwMjU2AAAAQQ";
		total = 492;
	}
	snprintf(body, sizeof(body), "%s%s", magic, type);
	done = strlen(body);
	if (!t->r)
		t->r = rand_chars(body + done, total - done, b64, t->err);
	body[total] = '\0';
	put(t, "-----BEGIN OPENSSH PRIVATE KEY-----\n");
	for (done = 0; done < total && !t->r; done += line) {
		char chunk[72];

		line = total - done < 70 ? total - done : 70;
		memcpy(chunk, body + done, line);
		chunk[line] = '\n';
		chunk[line + 1] = '\0';
		put(t, chunk);
	}
	put(t, "-----END OPENSSH PRIVATE KEY-----\n");
}

ssize_t tripwire_decoy(const char *path, char *buf, size_t len,
		       struct corral_err *err)
{
	struct text t = { buf, 0, len, err, 0 };
	const char *name = strrchr(path, '/');
	size_t nlen;

	name = name ? name + 1 : path;
	nlen = strlen(name);
	/* ".aws/credentials", or any "credentials": the AWS CLI's file */
	if (!strcmp(name, "credentials")) {
		put(&t, "[default]\naws_access_key_id = AKIA");
		put_rand(&t, 16, upper32);
		put(&t, "\naws_secret_access_key = ");
		put_rand(&t, 40, b64);
		put(&t, "\n");
	} else if (!strncmp(name, "id_", 3) &&
		   !(nlen > 4 && !strcmp(name + nlen - 4, ".pub"))) {
		put_ssh_key(&t, name);
	} else if (!strcmp(name, ".netrc")) {
		put(&t, "machine github.com\n  login agent\n  password ghp_");
		put_rand(&t, 36, alnum);
		put(&t, "\n");
	} else if (!strcmp(name, ".git-credentials")) {
		put(&t, "https://agent:ghp_");
		put_rand(&t, 36, alnum);
		put(&t, "@github.com\n");
	} else if (!strcmp(name, ".env") || !strncmp(name, ".env.", 5)) {
		put(&t, "OPENAI_API_KEY=sk-proj-");
		put_rand(&t, 48, alnum);
		put(&t, "\nDATABASE_URL=postgres://app:");
		put_rand(&t, 24, alnum);
		put(&t, "@db.internal:5432/app\n");
	} else {
		put(&t, "api_token = ");
		put_rand(&t, 40, alnum);
		put(&t, "\n");
	}
	return t.r ? t.r : (ssize_t)t.len;
}
