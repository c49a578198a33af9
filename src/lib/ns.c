/*
 * ns.c - the user namespace's identity: which host ids a sandbox uses.
 *
 * The agent is uid/gid 1000 inside.  So that ids behave as on a normal
 * host (chown to root, setreuid to nobody answer EPERM, not EINVAL, and an
 * image's files owned by its system users keep their owners), the other
 * inside ids 0..65535 are mapped too when the caller can:
 *
 *  - root: to corral's reserved range, host ids CORRAL_IDS_BASE + k.  The
 *    range is above every id a distribution allocates to users (< 60000,
 *    /etc/subuid ranges from 100000 by default) and outside systemd's
 *    container range (524288 .. 0x6fffffff) and foreign range (0x7ffe0000
 *    ..), and it is checked at every spawn against the host's /etc/passwd,
 *    /etc/group, /etc/subuid and /etc/subgid (read again when a stat of
 *    one differs): on a clash the sandbox falls back to one mapped id and
 *    says why.  The range is shared by every
 *    sandbox: sandboxes are apart by their pid, ipc, net and mount
 *    namespaces, not by their ids, and a shared range keeps a snapshot's
 *    owners (the agent's host uid) the same in the next sandbox.  The agent
 *    itself is CORRAL_IDS_BASE + 1000 (on an image too: the layers' owner,
 *    image.h) when the workspace and binds can be shown through idmapped
 *    mounts (idmap.c), else, as before, the workspace's owner or nobody
 *    (ns_pick_ids).
 *  - unprivileged, with an entry in /etc/subuid and /etc/subgid and the
 *    setuid newuidmap/newgidmap (Debian's uidmap): to that entry, written
 *    by those helpers; the agent stays the caller.
 *  - else only the agent, as the caller.
 * Host root is never mapped, whatever the caller.  As root, the user
 * namespace itself is owned by a uid of its own (ns_owner_next), not by
 * root: the kernel counts per-user resources against the owner.
 */
#include "internal.h"
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/securebits.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define NEWUIDMAP "/usr/bin/newuidmap"
#define NEWGIDMAP "/usr/bin/newgidmap"

/* text, whole, into an existing file: a /proc or /sys knob (internal.h) */
int proc_write(const char *path, const char *text, struct corral_err *err)
{
	size_t len = strlen(text);
	ssize_t n;
	int fd;

	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return corral_set_errno(err, errno, "cannot open %s", path);
	n = write(fd, text, len);
	if (n < 0 || (size_t)n != len) {
		int e = n < 0 ? errno : EIO;

		close(fd);
		return corral_set_errno(err, e, "cannot write \"%.*s\" to %s",
				      (int)strcspn(text, "\n"), text, path);
	}
	close(fd);
	return 0;
}

/* The pre-range rule for root's agent: the workspace's owner, or nobody. */
int ns_pick_ids(const struct corral_policy *p, uid_t *uid, gid_t *gid)
{
	struct stat st;

	if (geteuid() != 0) {
		*uid = geteuid();
		*gid = getegid();
		return 0;
	}
	*uid = 65534;
	*gid = 65534;
	/* pinned: the owner of the directory judged, which is the one mounted */
	if (!p->workspace || (p->workspace_pinned ? fstat(p->workspace_fd, &st) :
			      stat(p->workspace, &st)) < 0 || st.st_uid == 0)
		return 0;
	if (!ns_owner_grants(p, st.st_uid))
		return 0;
	*uid = st.st_uid;
	*gid = st.st_gid ? st.st_gid : st.st_uid;
	return 0;
}

/* a daemon's client names the workspace: its owner is no grant */
bool ns_owner_grants(const struct corral_policy *p, uid_t owner)
{
	return !(p->host_uid_min || p->host_uid_max) ||
	       (owner >= p->host_uid_min && owner <= p->host_uid_max);
}

/* what stat says of a file: any edit, rename over or new link changes it */
struct file_id {
	int err;		/* stat's errno; 0: the rest is its answer */
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime, ctime;
};

static void file_id_set(struct file_id *id, const struct stat *st)
{
	id->dev = st->st_dev;
	id->ino = st->st_ino;
	id->size = st->st_size;
	id->mtime = st->st_mtim;
	id->ctime = st->st_ctim;
}

static void file_id_of(const char *path, struct file_id *id)
{
	struct stat st;

	memset(id, 0, sizeof(*id));
	if (stat(path, &st) < 0) {
		id->err = errno;
		return;
	}
	file_id_set(id, &st);
}

static bool overlaps(unsigned long a, unsigned long na, unsigned long b,
		     unsigned long nb)
{
	return a < b + nb && b < a + na;
}

/*
 * The first line of a colon-separated host file that puts an id (field
 * idf, and field 3 of passwd too) or a "name:start:count" range (ranges)
 * inside [start, start + count): its text, in clash.  id, when asked
 * for, is the file as opened, before a byte is read (fstat of the open
 * file, or the open's errno): a stat first would ask the same again.
 */
static bool file_clashes(const char *path, bool ranges, size_t idf, bool gidf,
			 unsigned long start, unsigned long count, char *clash,
			 size_t len, struct file_id *id)
{
	char line[1024], fbuf[4096];
	bool hit = false;
	struct stat st;
	FILE *f = fopen(path, "re");

	if (id)
		memset(id, 0, sizeof(*id));
	if (!f) {
		if (id)
			id->err = errno;
		return false;
	}
	if (id) {
		if (fstat(fileno(f), &st) < 0)
			id->err = errno;	/* compares unequal to any stat: read again next time */
		else
			file_id_set(id, &st);
		/* our buffer: stdio's own would be sized by a second fstat */
		setvbuf(f, fbuf, _IOFBF, sizeof(fbuf));
	}
	while (!hit && fgets(line, sizeof(line), f)) {
		char *field[7] = { line }, *s = line;
		size_t n = 1;

		while (n < 7 && (s = strchr(s, ':'))) {
			*s++ = '\0';
			field[n++] = s;
		}
		if (ranges && n >= 3)
			hit = overlaps(strtoul(field[1], NULL, 10),
				       strtoul(field[2], NULL, 10), start, count);
		else if (!ranges && n > idf)
			hit = overlaps(strtoul(field[idf], NULL, 10), 1, start, count) ||
			      (gidf && n > idf + 1 &&
			       overlaps(strtoul(field[idf + 1], NULL, 10), 1, start, count));
		if (hit)
			snprintf(clash, len, "%s lists \"%.64s\" inside it", path, field[0]);
	}
	fclose(f);
	return hit;
}

static const struct {
	const char *path;
	bool ranges;
	size_t idf;
	bool gidf;
} range_files[] = {
	{ "/etc/passwd", false, 2, true }, { "/etc/group", false, 2, false },
	{ "/etc/subuid", true, 0, false }, { "/etc/subgid", true, 0, false },
};
#define NRANGE_FILES (sizeof(range_files) / sizeof(range_files[0]))

static bool file_id_same(const struct file_id *a, const struct file_id *b)
{
	return a->err == b->err && a->dev == b->dev && a->ino == b->ino &&
	       a->size == b->size && a->mtime.tv_sec == b->mtime.tv_sec &&
	       a->mtime.tv_nsec == b->mtime.tv_nsec &&
	       a->ctime.tv_sec == b->ctime.tv_sec &&
	       a->ctime.tv_nsec == b->ctime.tv_nsec;
}

/*
 * The last answer, and the files as they were when it was read.  Every
 * root create asks (a daemon's burst: 100 times in a second), and the
 * answer changes only when one of the files does: a stat each tells,
 * where reading all four cost an open, reads and a close each, and a
 * parse of every line of /etc/passwd (issue 17).  State of the process,
 * not of a sandbox: the host's files are the process's too.  An edit
 * that keeps the inode, the size and both times to the nanosecond (two
 * writes within one tick of a filesystem's coarse clock) is read at the
 * next change.
 */
static struct {
	pthread_mutex_t lock;
	bool valid, clash;
	struct file_id id[NRANGE_FILES];
	char why[256];
} range_cache = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Why corral's range cannot be used on this host, or false if it can. */
bool ns_range_clashes(char *why, size_t len)
{
	struct file_id now[NRANGE_FILES];
	bool known, same = false, clash = false;
	char text[sizeof(range_cache.why)] = "";

	/*
	 * Taken before the files are read: an edit while they are is seen
	 * next time.  With nothing kept yet (a one-shot run) there is nothing
	 * to compare: each id is taken by the read, from its open file.
	 */
	pthread_mutex_lock(&range_cache.lock);
	known = range_cache.valid;
	pthread_mutex_unlock(&range_cache.lock);
	if (known) {
		for (size_t i = 0; i < NRANGE_FILES; i++)
			file_id_of(range_files[i].path, &now[i]);
		pthread_mutex_lock(&range_cache.lock);
		same = range_cache.valid;
		for (size_t i = 0; i < NRANGE_FILES && same; i++)
			same = file_id_same(&now[i], &range_cache.id[i]);
		if (same) {
			clash = range_cache.clash;
			snprintf(text, sizeof(text), "%s", range_cache.why);
		}
		pthread_mutex_unlock(&range_cache.lock);
	}
	for (size_t i = 0; i < NRANGE_FILES && !same; i++) {
		if (clash && !known)	/* the files after a clash are not read */
			file_id_of(range_files[i].path, &now[i]);
		else if (!clash)
			clash = file_clashes(range_files[i].path, range_files[i].ranges,
					     range_files[i].idf, range_files[i].gidf,
					     CORRAL_IDS_BASE,
					     CORRAL_IDS_COUNT + CORRAL_OWNERS_COUNT, text,
					     sizeof(text), known ? NULL : &now[i]);
	}
	if (!same) {
		pthread_mutex_lock(&range_cache.lock);
		memcpy(range_cache.id, now, sizeof(now));
		range_cache.clash = clash;
		memcpy(range_cache.why, text, sizeof(text));
		range_cache.valid = true;
		pthread_mutex_unlock(&range_cache.lock);
	}
	if (clash)
		snprintf(why, len, "%s", text);
	return clash;
}

/* The caller's first entry in /etc/subuid or /etc/subgid, by name or id. */
static bool subid_entry(const char *path, const char *name, unsigned long id,
			unsigned long *start, unsigned long *count)
{
	char line[512], num[16];
	bool found = false;
	FILE *f = fopen(path, "re");

	if (!f)
		return false;
	snprintf(num, sizeof(num), "%lu", id);
	while (!found && fgets(line, sizeof(line), f)) {
		char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;

		if (!b)
			continue;
		*a = '\0';
		if (strcmp(line, num) && (!name || strcmp(line, name)))
			continue;
		*start = strtoul(a + 1, NULL, 10);
		*count = strtoul(b + 1, NULL, 10);
		found = *count > 0 && *start > 0;
	}
	fclose(f);
	return found;
}

/*
 * Where [*start, *start + count) meets a range of path's "name:start:count"
 * lines, *start moves past it; true if it moved.  One pass: the caller
 * passes again until nothing moves.
 */
static bool subid_skip_used(const char *path, unsigned long *start,
			    unsigned long count)
{
	char line[512];
	bool moved = false;
	FILE *f = fopen(path, "re");

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
		unsigned long s, n;

		if (!b)
			continue;
		s = strtoul(a + 1, NULL, 10);
		n = strtoul(b + 1, NULL, 10);
		if (n && overlaps(*start, count, s, n)) {
			*start = s + n;
			moved = true;
		}
	}
	fclose(f);
	return moved;
}

/*
 * A range of 65536 ids for `usermod --add-subuids`, free in both files
 * and outside corral's own: from 100000 up, as useradd picks one (its
 * SUB_UID_MIN), so that the line doctor prints can be pasted as it is.
 * False when none is found below 2^32 in a bounded number of passes.
 */
static bool subid_free(unsigned long *start)
{
	const unsigned long count = 65536, top = 0xffffffffUL;

	*start = 100000;
	for (int pass = 0; pass < 64; pass++) {
		bool moved = subid_skip_used("/etc/subuid", start, count);

		moved |= subid_skip_used("/etc/subgid", start, count);
		if (overlaps(*start, count, CORRAL_IDS_BASE,
			     CORRAL_OWNERS_BASE + CORRAL_OWNERS_COUNT - CORRAL_IDS_BASE)) {
			*start = CORRAL_OWNERS_BASE + CORRAL_OWNERS_COUNT;
			moved = true;
		}
		if (*start > top - count)
			return false;
		if (!moved)
			return true;
	}
	return false;
}

static void plan_subid(struct corral_ids *ids)
{
	unsigned long us = 0, uc = 0, gs = 0, gc = 0;
	struct passwd pw, *pwp = NULL;
	char buf[1024];

	getpwuid_r(geteuid(), &pw, buf, sizeof(buf), &pwp);
	if (!subid_entry("/etc/subuid", pwp ? pwp->pw_name : NULL, geteuid(), &us, &uc) ||
	    !subid_entry("/etc/subgid", pwp ? pwp->pw_name : NULL, getegid(), &gs, &gc)) {
		/* what to do too: a new user reads this in doctor's WEAK line */
		unsigned long f;
		char range[24] = "FROM-TO";	/* 4294901759-4294967294 at most */

		if (subid_free(&f))
			snprintf(range, sizeof(range), "%lu-%lu", f, f + 65535);
		snprintf(ids->note, sizeof(ids->note), "only uid 1000 is mapped: no "
			 "/etc/subuid and /etc/subgid entry for uid %d (chown, setuid "
			 "to other ids: EINVAL); as root: usermod "
			 "--add-subuids %s --add-subgids %s %.32s",
			 (int)geteuid(), range, range, pwp ? pwp->pw_name : "USER");
		return;
	}
	if (access(NEWUIDMAP, X_OK) < 0 || access(NEWGIDMAP, X_OK) < 0) {
		snprintf(ids->note, sizeof(ids->note), "only uid 1000 is mapped: "
			 "%s or %s is missing (install uidmap)", NEWUIDMAP, NEWGIDMAP);
		return;
	}
	snprintf(ids->mapping, sizeof(ids->mapping), "subuid");
	ids->range_uid = us;
	ids->range_gid = gs;
	ids->count = uc < gc ? uc : gc;
	if (ids->count > CORRAL_IDS_COUNT)
		ids->count = CORRAL_IDS_COUNT;
}

void ns_plan_ids(const struct corral_policy *p, struct corral_ids *ids)
{
	uid_t uid;
	gid_t gid;

	memset(ids, 0, sizeof(*ids));
	snprintf(ids->mapping, sizeof(ids->mapping), "single");
	ns_pick_ids(p, &uid, &gid);
	ids->uid = uid;
	ids->gid = gid;
	if (geteuid() != 0) {
		plan_subid(ids);
		return;
	}
	if (ns_range_clashes(ids->note, sizeof(ids->note))) {
		char why[sizeof(ids->note)];

		memcpy(why, ids->note, sizeof(why));
		snprintf(ids->note, sizeof(ids->note), "only uid 1000 is mapped: "
			 "corral's id range %u-%u is in use (%.150s)", CORRAL_IDS_BASE,
			 CORRAL_OWNERS_BASE + CORRAL_OWNERS_COUNT - 1, why);
		return;
	}
	snprintf(ids->mapping, sizeof(ids->mapping), "range");
	ids->range_uid = ids->range_gid = CORRAL_IDS_BASE;
	ids->count = CORRAL_IDS_COUNT;
	ids->owner = ns_owner_next();
}

/*
 * A sandbox's user namespace is owned by the euid that made it, and the
 * kernel counts what its processes hold of a per-user resource against
 * each level of user namespaces up to the host's, there against that
 * owner: inotify instances (fs.inotify.max_user_instances, 128) and
 * watches, pending signals, message queue bytes.  Made by root, every
 * sandbox counted against root: four sandboxes of 32 inotify instances
 * each (mount.c's quarter) left the host's root processes none, and the
 * next sandbox too.  Root's sandboxes are owned by a uid of their own
 * instead, from a range no host file names and no sandbox maps, so that
 * no process on the host runs as an owner (an owner has every
 * capability in the namespaces it owns).  In turn: one process's
 * sandboxes differ until 65536 are made; two processes' (corral run's)
 * share one by chance, and then only those counts.
 */
static uint32_t next_owner;

static void owner_seed(void)
{
	if (corral_random(&next_owner, sizeof(next_owner)) < 0)
		next_owner = (uint32_t)getpid() * 2654435761u;
}

uid_t ns_owner_next(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	uint32_t k;

	pthread_once(&once, owner_seed);
	k = __atomic_fetch_add(&next_owner, 1, __ATOMIC_RELAXED);
	return CORRAL_OWNERS_BASE + k % CORRAL_OWNERS_COUNT;
}

/*
 * clone() with this thread's euid the owner's for the call, and back.
 * The raw syscalls change this thread alone (glibc's setresuid() would
 * change every thread); SECBIT_NO_SETUID_FIXUP keeps its capabilities
 * meanwhile, so the namespaces are made by a privileged caller still
 * (AppArmor restricts an unprivileged caller's user namespaces).  The
 * child gets the securebits and dumpable flag back at once; the euid is
 * its ids inside once the maps are written.  Where the switch cannot be
 * made (no CAP_SETPCAP, the owner not mapped where we are), the caller
 * owns the namespace, as before: ids->owner is then 0.
 */
static pid_t clone_raw(unsigned long flags, int *pidfd)
{
	return (pid_t)syscall(SYS_clone, flags, NULL, pidfd, NULL, 0);
}

/* This thread as owner, capabilities kept; false (nothing changed) if not. */
static bool become_owner(uid_t owner, int bits)
{
	if (prctl(PR_SET_SECUREBITS, bits | SECBIT_NO_SETUID_FIXUP, 0, 0, 0) < 0)
		return false;
	if (syscall(SYS_setresuid, -1, owner, -1) == 0)
		return true;
	if (prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) < 0)
		abort();
	return false;
}

pid_t ns_clone_owned(unsigned long flags, int *pidfd, struct corral_ids *ids)
{
	int bits = -1, dumpable = -1, e;
	pid_t pid;

	if (ids->owner) {
		bits = prctl(PR_GET_SECUREBITS, 0, 0, 0, 0);
		dumpable = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
	}
	if (bits < 0 || dumpable < 0 || !become_owner(ids->owner, bits)) {
		ids->owner = 0;
		return clone_raw(flags, pidfd);
	}
	pid = clone_raw(flags, pidfd);
	e = errno;
	if (pid == 0) {
		/* all capabilities in the new user namespace: CAP_SETPCAP too */
		if (prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) < 0 ||
		    prctl(PR_SET_DUMPABLE, dumpable, 0, 0, 0) < 0)
			_exit(127);
		return 0;
	}
	/* a thread left as the owner would make files as the owner: never */
	if (syscall(SYS_setresuid, -1, 0, -1) < 0 ||
	    prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) < 0 ||
	    prctl(PR_SET_DUMPABLE, dumpable, 0, 0, 0) < 0)
		abort();
	errno = e;
	return pid;
}

/*
 * identity.user root (child.c's capabilities at uid 0 inside) needs:
 *  - a root of its own (an image, --rootfs): over the host's /usr there is
 *    nothing for root to install into, and nothing to gain;
 *  - every id 0..65535 mapped: dpkg chowns to the owners in the .deb, apt
 *    drops to _apt; with one mapped id, uid 0 is not even a uid here.
 */
int root_inside_refused(const struct corral_policy *p, const struct corral_ids *ids,
			struct corral_err *err)
{
	if (!p->nroot_layers)
		return corral_set_err(err, -EINVAL, "identity.user root (--user root) "
				      "needs an image or --rootfs: the host's /usr is "
				      "never root's inside");
	if (strcmp(ids->mapping, "single") && ids->count >= CORRAL_IDS_COUNT)
		return 0;
	return corral_set_err(err, -EPERM, "identity.user root (--user root) needs "
			      "ids 0-%u mapped; here %.200s",
			      CORRAL_IDS_COUNT - 1, ids->note[0] ? ids->note :
			      !strcmp(ids->mapping, "single") ? "only uid 1000 is mapped" :
			      "fewer are (a shorter /etc/subuid or /etc/subgid entry)");
}

/*
 * "inside host count" lines: inside k -> range + k for k < count, but
 * 1000 -> the agent's id.  At most three lines; agent may be range + 1000.
 */
static int map_lines(unsigned long agent, unsigned long range, unsigned long count,
		     unsigned long out[3][3])
{
	int n = 0;

	if (count > CORRAL_AGENT_UID) {
		out[n][0] = 0, out[n][1] = range, out[n][2] = CORRAL_AGENT_UID;
		n++;
	} else if (count) {
		out[n][0] = 0, out[n][1] = range, out[n][2] = count;
		n++;
	}
	out[n][0] = CORRAL_AGENT_UID, out[n][1] = agent, out[n][2] = 1;
	n++;
	if (count > CORRAL_AGENT_UID + 1) {
		out[n][0] = CORRAL_AGENT_UID + 1;
		out[n][1] = range + CORRAL_AGENT_UID + 1;
		out[n][2] = count - CORRAL_AGENT_UID - 1;
		n++;
	}
	return n;
}

/*
 * newuidmap/newgidmap: setuid helpers that check the lines against the
 * caller's /etc/subuid entry.  A fork and an exec each (about a
 * millisecond), on the caller's thread, waited for.
 */
static int run_helper(const char *helper, pid_t pid, unsigned long lines[3][3],
		      int n, struct corral_err *err)
{
	char args[10][24], *argv[12];
	int status, argc = 0;
	pid_t h;

	argv[argc++] = (char *)helper;
	snprintf(args[0], sizeof(args[0]), "%d", (int)pid);
	argv[argc++] = args[0];
	for (int i = 0; i < n; i++)
		for (int j = 0; j < 3; j++) {
			snprintf(args[1 + i * 3 + j], sizeof(args[0]), "%lu", lines[i][j]);
			argv[argc++] = args[1 + i * 3 + j];
		}
	argv[argc] = NULL;
	h = fork();
	if (h < 0)
		return corral_set_errno(err, errno, "cannot fork %s", helper);
	if (h == 0) {
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);

		/* its complaints go in our error, not on the caller's terminal */
		if (null >= 0)
			dup2(null, 1);
		execve(helper, argv, (char *[]){ NULL });
		_exit(127);
	}
	while (waitpid(h, &status, 0) < 0)
		if (errno != EINTR)
			return corral_set_errno(err, errno, "waitpid %s", helper);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		return corral_set_err(err, -EPERM, "%s %d %lu %lu %lu ... failed (status "
				      "%d): is the /etc/subuid or /etc/subgid entry right?",
				      helper, (int)pid, lines[0][0], lines[0][1],
				      lines[0][2], status);
	return 0;
}

static int write_map(pid_t pid, const char *which, unsigned long lines[3][3],
		     int n, struct corral_err *err)
{
	char path[64], map[192];
	size_t len = 0;

	for (int i = 0; i < n; i++)
		len += snprintf(map + len, sizeof(map) - len, "%lu %lu %lu\n",
				lines[i][0], lines[i][1], lines[i][2]);
	snprintf(path, sizeof(path), "/proc/%d/%s", pid, which);
	return proc_write(path, map, err);
}

/*
 * Written by the supervisor for the child.  A privileged writer may leave
 * setgroups allowed: the child uses that once, to drop the caller's
 * supplementary groups (root's group 0 must not follow it in).
 */
int ns_write_id_maps(pid_t pid, const struct corral_ids *ids, struct corral_err *err)
{
	unsigned long lu[3][3], lg[3][3];
	char path[64];
	int nu, ng, r;

	nu = map_lines(ids->uid, ids->range_uid, ids->count, lu);
	ng = map_lines(ids->gid, ids->range_gid, ids->count, lg);
	if (!strcmp(ids->mapping, "subuid")) {
		r = run_helper(NEWGIDMAP, pid, lg, ng, err);
		return r < 0 ? r : run_helper(NEWUIDMAP, pid, lu, nu, err);
	}
	snprintf(path, sizeof(path), "/proc/%d/setgroups", pid);
	r = proc_write(path, geteuid() == 0 ? "allow" : "deny", err);
	if (r < 0 && r != -ENOENT)
		return r;
	r = write_map(pid, "gid_map", lg, ng, err);
	return r < 0 ? r : write_map(pid, "uid_map", lu, nu, err);
}
