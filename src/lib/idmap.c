/*
 * idmap.c - the workspace and the caller's binds through idmapped mounts.
 *
 * As root with corral's id range (ns.c) the agent is the range's uid 1000,
 * a host id no file of the caller's has.  So that it is still the owner
 * of the workspace it was given, the supervisor takes the workspace (and
 * each bind) as a detached copy of its mount (open_tree) and idmaps it
 * (mount_setattr MOUNT_ATTR_IDMAP) with a throwaway user namespace whose
 * only line maps the directory's owner to the agent's host id: inside,
 * the owner's files are the agent's (uid 1000), what the agent creates
 * through a writable bind lands on the host as that owner, and files of
 * any other owner show as nobody and cannot be written.  The workspace
 * mount is overlayfs's lower layer (read-only; idmapped lower layers need
 * Linux 5.19), so a root-owned workspace is copy-on-write all the way
 * down instead of read-only below its top.  Only the kernel's init user
 * namespace may idmap a host filesystem's mount, hence the supervisor, and
 * hence before init is cloned: init inherits the fds.
 *
 * Who is mapped follows ns_pick_ids' rule: a daemon's client names the
 * path, so its owner is mapped only within the daemon's host uid range;
 * a writable bind never maps host root (the agent could leave a setuid
 * root file on the host), the read-only workspace lower layer may.
 */
#include "internal.h"
#include "sandbox.h"
#include "image.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

/*
 * The helper's half: a user namespace of its own, "u" (or "e") on ready,
 * then it waits for EOF on go.  It shares the supervisor's memory
 * (CLONE_VM: a fork copied the supervisor's page tables, 1 ms of the
 * 1.2 ms this took on a paravirtualized host), so it runs on a stack of
 * its own, with every signal blocked, and makes raw syscalls only.  The
 * one that can fail, unshare, sets errno while the supervisor sleeps in
 * its read of ready, and the supervisor reads no errno of that.
 */
struct userns_helper {
	int go, ready;		/* the helper's ends */
	int go_wr, ready_rd;	/* the supervisor's, closed in the helper */
};

__attribute__((no_sanitize("address", "undefined")))
static int userns_helper(void *arg)
{
	struct userns_helper *h = arg;
	char x;

	syscall(SYS_close, h->go_wr);
	syscall(SYS_close, h->ready_rd);
	x = syscall(SYS_unshare, CLONE_NEWUSER) < 0 ? 'e' : 'u';
	if (syscall(SYS_write, h->ready, &x, 1) == 1)
		syscall(SYS_read, h->go, &x, 1);	/* EOF: the parent has it */
	syscall(SYS_exit, 0);
	return 0;
}

#define USERNS_HELPER_STACK	(16 << 10)

/*
 * A user namespace that maps host owner/gowner (as "inside" ids) to the
 * agent's host ids: made by a helper that waits while we write its maps,
 * kept by an fd after the helper is gone.
 */
static int owner_userns(uid_t owner, gid_t gowner, uid_t agent, gid_t gagent,
			char *why, size_t len)
{
	char stack[USERNS_HELPER_STACK] __attribute__((aligned(16)));
	char path[64], map[64], x = 0;
	int go[2], ready[2], fd = -1, mapfd;
	struct userns_helper h;
	sigset_t all, old;
	pid_t c;

	if (pipe2(go, O_CLOEXEC) < 0) {
		snprintf(why, len, "pipe: %s", strerror(errno));
		return -1;
	}
	if (pipe2(ready, O_CLOEXEC) < 0) {
		snprintf(why, len, "pipe: %s", strerror(errno));
		close(go[0]);
		close(go[1]);
		return -1;
	}
	h = (struct userns_helper){ go[0], ready[1], go[1], ready[0] };
	/* no handler of ours may run on the helper's stack, in our memory */
	sigfillset(&all);
	if (sigprocmask(SIG_SETMASK, &all, &old) < 0) {
		c = -1;
		snprintf(why, len, "sigprocmask: %s", strerror(errno));
	} else {
		c = clone(userns_helper, stack + sizeof(stack), CLONE_VM | SIGCHLD, &h);
		if (c < 0)
			snprintf(why, len, "clone: %s", strerror(errno));
		sigprocmask(SIG_SETMASK, &old, NULL);
	}
	close(go[0]);
	close(ready[1]);
	if (c < 0)
		goto out;
	if (read(ready[0], &x, 1) != 1 || x != 'u') {
		snprintf(why, len, "the helper could not make a user namespace");
		goto out;
	}
	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "/proc/%d/%s", (int)c, i ? "uid_map" : "gid_map");
		snprintf(map, sizeof(map), "%u %u 1\n", i ? owner : gowner, i ? agent : gagent);
		mapfd = open(path, O_WRONLY | O_CLOEXEC);
		if (mapfd < 0 || write(mapfd, map, strlen(map)) != (ssize_t)strlen(map)) {
			snprintf(why, len, "cannot write %s \"%.*s\": %s", path,
				 (int)strlen(map) - 1, map, strerror(errno));
			if (mapfd >= 0)
				close(mapfd);
			goto out;
		}
		close(mapfd);
	}
	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)c);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		snprintf(why, len, "open %s: %s", path, strerror(errno));
out:
	close(go[1]);
	close(ready[0]);
	/* its stack is ours: not left before it is gone */
	while (c > 0 && waitpid(c, NULL, 0) < 0 && errno == EINTR)
		;
	return fd;
}

/*
 * A detached, idmapped copy of the mount at fd (all its submounts too).
 * -1 and why when the kernel or the filesystem refuses.
 */
static int idmapped_tree(int fd, int userns, char *why, size_t len)
{
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_IDMAP, .userns_fd = userns };
	int tree;

	tree = syscall(SYS_open_tree, fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC |
		       AT_EMPTY_PATH | AT_RECURSIVE);
	if (tree < 0) {
		snprintf(why, len, "open_tree: %s", strerror(errno));
		return -1;
	}
	if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr,
		    sizeof(attr)) < 0) {
		snprintf(why, len, "mount_setattr(MOUNT_ATTR_IDMAP): %s%s", strerror(errno),
			 errno == EINVAL ? " (the filesystem cannot be idmapped)" : "");
		close(tree);
		return -1;
	}
	return tree;
}

/*
 * overlayfs takes an idmapped lower layer from Linux 5.19 on; before, the
 * idmap succeeds here and the overlay fails in init.  Probing it would
 * cost a namespace and three mounts per sandbox: the release says it.
 */
static bool overlay_takes_idmapped(char *why, size_t len)
{
	struct utsname u;
	unsigned major = 0, minor = 0;

	if (uname(&u) < 0 || sscanf(u.release, "%u.%u", &major, &minor) != 2) {
		snprintf(why, len, "cannot read the kernel's release");
		return false;
	}
	if (major > 5 || (major == 5 && minor >= 19))
		return true;
	snprintf(why, len, "Linux %u.%u: overlayfs takes idmapped lower layers from 5.19",
		 major, minor);
	return false;
}

/*
 * One path: -1 with *refused false when it is not ours to map (absent,
 * refused by mount.c's rules, an owner that grants nothing): init then
 * opens it as before and says what is wrong with it.  pin >= 0: the
 * object the caller judged (corral_policy_add_pinned_bind), taken as it
 * is, never path again: what is mapped is what was checked.  bind: its
 * copy is recursive, so what is mounted beneath it is judged too (the
 * workspace is overlayfs's lower layer, which takes no submount).
 */
/*
 * The user namespaces made for one idmap_prepare, one an owner: the next
 * path of the same owner takes its namespace again.  Each is a helper
 * process (owner_userns): an srt settings file's kept paths, 20 binds of
 * one owner, made a root run 15 ms slower, one helper each.
 */
#define OWNERS_MAX 8

struct owners {
	struct { uid_t uid; gid_t gid; int fd; } v[OWNERS_MAX];
	size_t n;
};

/* *own: the fd is the caller's to close (past OWNERS_MAX owners) */
static int owner_userns_cached(struct owners *o, uid_t owner, gid_t gowner,
			       const struct corral_ids *ids, bool *own, char *why, size_t len)
{
	int fd;

	*own = false;
	for (size_t i = 0; i < o->n; i++)
		if (o->v[i].uid == owner && o->v[i].gid == gowner)
			return o->v[i].fd;
	fd = owner_userns(owner, gowner, ids->uid, ids->gid, why, len);
	if (fd >= 0 && o->n < OWNERS_MAX) {
		o->v[o->n].uid = owner;
		o->v[o->n].gid = gowner;
		o->v[o->n++].fd = fd;
	} else {
		*own = fd >= 0;
	}
	return fd;
}

static void owners_close(struct owners *o)
{
	for (size_t i = 0; i < o->n; i++)
		close(o->v[i].fd);
	o->n = 0;
}

static int map_path(const struct corral_policy *p, const char *path, int pin,
		    bool writable, bool bind, const struct corral_ids *ids, struct owners *o,
		    bool *refused, char *why, size_t len, char *unmapped, size_t ulen)
{
	struct open_how how = { .flags = O_PATH | O_CLOEXEC,
				.resolve = RESOLVE_NO_MAGICLINKS };
	cleanup_close int fd = -1, root = -1, owned = -1;
	bool own;
	int userns;
	struct corral_err err = { 0 };
	struct stat st;
	int tree;

	*refused = false;
	fd = pin >= 0 ? fcntl(pin, F_DUPFD_CLOEXEC, 3) : openat2_retry(AT_FDCWD, path, &how);
	root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || root < 0 || fstat(fd, &st) < 0 ||
	    mount_check_host_fd(root, fd, path, &err) < 0 ||
	    (bind && mount_check_submounts(root, fd, path, &err) < 0))
		return -1;
	/*
	 * Not mapped by rule: its files stay nobody's inside, which the
	 * agent cannot change.  Said in the ids' note (the first one only),
	 * since all the command sees is EACCES.
	 */
	if (!ns_owner_grants(p, st.st_uid) || (writable && st.st_uid == 0)) {
		if (!unmapped[0] && writable && st.st_uid == 0)
			snprintf(unmapped, ulen, "the rw bind %.60s is host root's, never "
				 "mapped for writing: its files are nobody's to the agent, "
				 "writable only where their mode lets anyone (chown it to "
				 "the user whose files it should hold)", path);
		else if (!unmapped[0])
			snprintf(unmapped, ulen, "%.60s is host uid %u's, outside the "
				 "daemon's --uid-range: not mapped, its files are nobody's "
				 "to the agent, writable only where their mode lets anyone", path,
				 (unsigned)st.st_uid);
		return -1;
	}
	userns = owner_userns_cached(o, st.st_uid, st.st_gid, ids, &own, why, len);
	if (own)
		owned = userns;
	tree = userns < 0 ? -1 : idmapped_tree(fd, userns, why, len);
	*refused = tree < 0;
	return tree;
}

void idmap_close(struct idmap_fds *m)
{
	cleanup_closep(&m->ws);
	for (size_t i = 0; m->binds && i < m->nbinds; i++)
		cleanup_closep(&m->binds[i]);
	free(m->binds);
	m->binds = NULL;
	m->nbinds = 0;
}

/*
 * A root layer of host uid 65534's: a layer an older corral unpacked that
 * was not migrated (image_migrate.c), or a --rootfs tree chowned to 65534
 * for the agent of then.  Its files are the agent's only if the agent is
 * that uid: it runs so, as it did, and the note says why.
 */
static const char *legacy_layer(const struct corral_policy *p)
{
	struct stat st;

	/* a pinned root by what was judged: its path may lead elsewhere by now */
	for (size_t i = 0; i < p->nroot_layers; i++)
		if ((p->root_pinned ? fstat(p->root_fd, &st) : stat(p->root_layers[i], &st)) == 0 &&
		    st.st_uid == IMAGE_LEGACY_UID)
			return p->root_layers[i];
	return NULL;
}

void idmap_prepare(const struct corral_policy *p, struct corral_ids *ids,
		   struct idmap_fds *out)
{
	const char *legacy;
	char why[160] = "", unmapped[sizeof(ids->note)] = "";
	const char *what = NULL;
	struct owners o = { .n = 0 };
	bool refused = false;
	uid_t uid;
	gid_t gid;

	*out = (struct idmap_fds){ .ws = -1 };
	if (geteuid() != 0 || strcmp(ids->mapping, "range"))
		return;
	/*
	 * The range's 1000, on an image too: its layers are that id's
	 * (image.h), so that the image's files are the agent's own (a
	 * writable root copies them up).
	 */
	ids->uid = CORRAL_IDS_BASE + CORRAL_AGENT_UID;
	ids->gid = CORRAL_IDS_BASE + CORRAL_AGENT_GID;
	legacy = legacy_layer(p);
	if (legacy) {
		ids->uid = IMAGE_LEGACY_UID;
		ids->gid = IMAGE_LEGACY_GID;
		snprintf(ids->note, sizeof(ids->note), "the agent runs as host uid %u, the "
			 "owner of the root layer %.80s (an older corral's image layer "
			 "not migrated yet, or a tree chowned so), not as a range id",
			 IMAGE_LEGACY_UID, legacy);
	}
	if (p->nbinds) {
		out->binds = malloc(p->nbinds * sizeof(*out->binds));
		if (!out->binds) {
			snprintf(why, sizeof(why), "out of memory");
			what = "the binds";
			refused = true;
			goto fallback;
		}
		out->nbinds = p->nbinds;
		for (size_t i = 0; i < p->nbinds; i++)
			out->binds[i] = -1;
	}
	if (p->workspace) {
		what = p->workspace;
		refused = !overlay_takes_idmapped(why, sizeof(why));
		if (!refused)
			out->ws = map_path(p, p->workspace, p->workspace_pinned ?
					   p->workspace_fd : -1, false, false, ids, &o, &refused,
					   why, sizeof(why), unmapped, sizeof(unmapped));
	}
	for (size_t i = 0; !refused && i < p->nbinds; i++) {
		out->binds[i] = map_path(p, p->binds[i].src, p->binds[i].pinned ?
					 p->binds[i].fd : -1, p->binds[i].writable,
					 true, ids, &o, &refused, why, sizeof(why), unmapped,
					 sizeof(unmapped));
		what = p->binds[i].src;
	}
	owners_close(&o);
	ids->idmapped = out->ws >= 0;
	for (size_t i = 0; i < out->nbinds; i++)
		ids->idmapped |= out->binds[i] >= 0;
	if (!refused) {
		if (!ids->note[0] && unmapped[0])
			memcpy(ids->note, unmapped, sizeof(ids->note));
		return;
	}
fallback:
	owners_close(&o);
	idmap_close(out);
	ns_pick_ids(p, &uid, &gid);
	ids->uid = uid;
	ids->gid = gid;
	ids->idmapped = false;
	snprintf(ids->note, sizeof(ids->note), "no idmapped mount of %.60s (%.96s): the "
		 "agent runs as host uid %u, the workspace's owner or nobody",
		 what ? what : "?", why, ids->uid);
}

/*
 * Measured, for the doctor: an overlay over the idmapped tree, in a child
 * with a mount namespace of its own (and a tmpfs on its /tmp for the
 * upper layer), as a sandbox's workspace is made.
 */
static bool overlay_over(int tree, char *why, size_t len)
{
	static const char *const dirs[] = { "/tmp/l", "/tmp/u", "/tmp/w", "/tmp/m" };
	int status;
	pid_t c;

	c = fork();
	if (c < 0) {
		snprintf(why, len, "fork: %s", strerror(errno));
		return false;
	}
	if (c == 0) {
		if (unshare(CLONE_NEWNS) < 0 ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
		    mount("tmpfs", "/tmp", "tmpfs", 0, "size=1m") < 0)
			_exit(2);
		for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
			if (mkdir(dirs[i], 0755) < 0)
				_exit(2);
		if (syscall(SYS_move_mount, tree, "", AT_FDCWD, "/tmp/l",
			    MOVE_MOUNT_F_EMPTY_PATH) < 0)
			_exit(2);
		_exit(mount("overlay", "/tmp/m", "overlay", 0,
			    "lowerdir=/tmp/l,upperdir=/tmp/u,workdir=/tmp/w") < 0 ? 1 : 0);
	}
	while (waitpid(c, &status, 0) < 0)
		if (errno != EINTR)
			return false;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return true;
	snprintf(why, len, "%s", WIFEXITED(status) && WEXITSTATUS(status) == 1 ?
		 "overlayfs refuses an idmapped lower layer here (Linux 5.19 takes "
		 "one): the agent runs as the workspace's owner" :
		 "cannot set up the overlay probe");
	return false;
}

bool idmap_probe(const char *dir, char *why, size_t len)
{
	cleanup_close int fd = -1, userns = -1, tree = -1;
	struct stat st;

	if (geteuid() != 0) {
		snprintf(why, len, "only root may idmap a host filesystem's mount; the "
			 "agent is the caller, who owns its workspace");
		return false;
	}
	fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		snprintf(why, len, "%s: %s", dir, strerror(errno));
		return false;
	}
	userns = owner_userns(st.st_uid, st.st_gid, CORRAL_IDS_BASE + CORRAL_AGENT_UID,
			      CORRAL_IDS_BASE + CORRAL_AGENT_GID, why, len);
	if (userns >= 0)
		tree = idmapped_tree(fd, userns, why, len);
	if (tree < 0 || !overlay_over(tree, why, len))
		return false;
	snprintf(why, len, "workspace and binds idmapped: their owner is the agent inside "
		 "(measured on %s, under an overlay)", dir);
	return true;
}
