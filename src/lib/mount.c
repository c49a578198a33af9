/*
 * mount.c - the sandbox's view of the filesystem.
 *
 * Runs in the sandbox's first process, inside its new user and mount
 * namespaces, before anything untrusted exists.  The recipe is bubblewrap's:
 * a tmpfs becomes the new root with the host's root below it at /oldroot;
 * each piece of the view is taken from /oldroot, made read-only where it
 * must be, and /oldroot is detached at the end.  Host paths are resolved
 * with RESOLVE_IN_ROOT beneath /oldroot, so a symlink in a host path means
 * what it means on the host and cannot lead outside it.
 */
#include "internal.h"
#include "net.h"
#include "policy_int.h"
#include "sandbox.h"
#include "tripwire.h"
#include "tls.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <linux/magic.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define OLDROOT "/oldroot"
#define SCRATCH "/.scratch"	/* detached before the sandbox runs */
/* an image's root, stacked by the supervisor (see stack_layers) */
#define STAGE "/tmp"
#define STAGE_ROOT STAGE "/root"
#define STAGE_UPPER STAGE "/root.upper"
#define STAGE_WORK STAGE "/root.work"

const char *const mount_writable_paths[] = {
	"/workspace", "/tmp", "/home/agent", "/dev", NULL,
};

static const char *const host_dirs[] = {
	"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
};

/* Read-only pieces of the host's /etc that programs really use. */
static const char *const host_etc[] = {
	"/etc/ld.so.cache", "/etc/ssl", "/etc/ca-certificates",
	"/etc/alternatives", "/etc/localtime", "/etc/mime.types",
};

const char *mount_host_source(size_t i)
{
	size_t ndirs = sizeof(host_dirs) / sizeof(host_dirs[0]);

	if (i < ndirs)
		return host_dirs[i];
	i -= ndirs;
	return i < sizeof(host_etc) / sizeof(host_etc[0]) ? host_etc[i] : NULL;
}

static const char *const dev_nodes[] = {
	"null", "zero", "full", "random", "urandom", "tty",
};

/* Kernel interfaces in /proc that leak or change host state. */
static const char *const proc_ro[] = {
	"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/fs",
};
static const char *const proc_masked[] = {
	"/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug",
	"/proc/kallsyms", "/proc/kmsg", "/proc/latency_stats", "/proc/timer_stats",
	/*
	 * The host's kernel config (which bugs it can have), its boot line
	 * (a VM's or initrd's arguments carry addresses, and at times keys and
	 * tokens).  Its boot id gets its own file: boot_id_own.
	 */
	"/proc/config.gz", "/proc/cmdline",
	/*
	 * Every CPU's interrupts by source: device names, and counts that
	 * show the host's other work as it happens, its thermal events among
	 * them (the side channel for which Docker, Kubernetes, podman, CRI-O
	 * and containerd mask it since 2025: GHSA-6fw5-f8r9-fgfm).
	 */
	"/proc/interrupts",
};
/*
 * The host's hardware, as Docker masks it: an empty read-only tmpfs over
 * each.  And what Docker leaves readable that names the machine's own
 * devices: bus/input/devices gives each keyboard's and mouse's name and
 * its Uniq, a Bluetooth device's address; bus/pci the host's PCI cards
 * (lspci reads it where there is no /sys); driver/ a GPU's UUID
 * (driver/nvidia/gpus/).  No device of theirs is in the sandbox's /dev.
 */
static const char *const proc_masked_dirs[] = {
	"/proc/acpi", "/proc/asound", "/proc/scsi", "/proc/bus", "/proc/driver",
};

static int sys_mount_setattr(const char *path, unsigned int flags,
			     uint64_t set, uint64_t clr)
{
	struct mount_attr attr = { .attr_set = set, .attr_clr = clr };

	return syscall(SYS_mount_setattr, AT_FDCWD, path, flags, &attr,
		       sizeof(attr));
}

static int do_mount(const char *src, const char *dst, const char *type,
		    unsigned long flags, const char *data, struct corral_err *err)
{
	if (mount(src, dst, type, flags, data) < 0)
		return corral_set_errno(err, errno, "cannot mount %s on %s%s%s",
				      src ? src : type ? type : "(null)", dst,
				      data ? " with " : "",
				      data ? data : "");
	return 0;
}

/* Read-only, nosuid, nodev for the whole subtree; noexec on request. */
static int make_ro(const char *path, bool noexec, struct corral_err *err)
{
	uint64_t set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;

	if (noexec)
		set |= MOUNT_ATTR_NOEXEC;
	if (sys_mount_setattr(path, AT_RECURSIVE, set, 0) < 0)
		return corral_set_errno(err, errno, "cannot make %s read-only",
				      path);
	return 0;
}

/* An empty read-only tmpfs over a directory, where this host has it. */
static int mask_dir(const char *path, struct corral_err *err)
{
	if (mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  "mode=0555") < 0 && errno != ENOENT)
		return corral_set_errno(err, errno, "cannot mount tmpfs on %s", path);
	return 0;
}

static int mkdir_p(const char *path, mode_t mode, struct corral_err *err)
{
	char buf[4096];
	size_t len = strlen(path);

	/* mostly the parent is there (built just before): one call, not one a level */
	if (mkdir(path, mode) == 0 || errno == EEXIST)
		return 0;
	if (errno != ENOENT)
		return corral_set_errno(err, errno, "cannot create %s", path);
	if (len >= sizeof(buf))
		return corral_set_err(err, -ENAMETOOLONG, "path too long: %s", path);
	memcpy(buf, path, len + 1);
	for (char *p = buf + 1; ; p++) {
		if (*p == '/' || *p == '\0') {
			char c = *p;

			*p = '\0';
			if (mkdir(buf, mode) < 0 && errno != EEXIST)
				return corral_set_errno(err, errno, "cannot create %s",
						      buf);
			*p = c;
			if (c == '\0')
				break;
		}
	}
	return 0;
}

/* A mount point of the same kind as the source: directory or empty file. */
static int make_mountpoint(const char *dst, bool dir, struct corral_err *err)
{
	char parent[4096];
	char *slash;
	int fd, r, e;

	if (dir)
		return mkdir_p(dst, 0755, err);
	/* mostly new: one mknod, where open and close were two calls */
	if (mknod(dst, S_IFREG | 0644, 0) == 0)
		return 0;
	/* there already: what open makes of it, as before (a link is ELOOP) */
	fd = open(dst, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	e = errno;
	/* its directory is not there yet: make it, then the file */
	snprintf(parent, sizeof(parent), "%s", dst);
	slash = strrchr(parent, '/');
	if (fd < 0 && e == ENOENT && slash && slash != parent) {
		*slash = '\0';
		r = mkdir_p(parent, 0755, err);
		if (r < 0)
			return r;
		fd = open(dst, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
		e = errno;
	}
	if (fd < 0)
		return corral_set_errno(err, e, "cannot create %s", dst);
	close(fd);
	return 0;
}

static int write_text(const char *path, const char *text, struct corral_err *err)
{
	size_t len = strlen(text);
	int fd;

	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return corral_set_errno(err, errno, "cannot create %s", path);
	if (write(fd, text, len) != (ssize_t)len) {
		int e = errno ? errno : EIO;

		close(fd);
		return corral_set_errno(err, e, "cannot write %s", path);
	}
	close(fd);
	return 0;
}

static int cannot_open_host(const char *path, int e, struct corral_err *err)
{
	return corral_set_err(err, -e, "cannot open %s on the host: %s%s", path,
			      strerror(e), e != EACCES ? "" :
			      " (host paths are opened as the sandbox's unprivileged"
			      " host user, never as root: make it readable to that user)");
}

/* Open a host path beneath /oldroot, symlinks resolved as on the host. */
static int open_host(int oldroot, const char *path, struct corral_err *err)
{
	struct open_how how = {
		.flags = O_PATH | O_CLOEXEC,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	int fd;

	fd = openat2_retry(oldroot, path, &how);
	if (fd < 0)
		return cannot_open_host(path, errno, err);
	return fd;
}

/*
 * A source the caller opened and judged (corral_policy_add_pinned_bind):
 * its fd names a mount of the caller's namespace, which the kernel will
 * not clone into this one (open_tree and bind mounts take only mounts of
 * the caller's own: EINVAL), so src is opened again, following no
 * symlink, and taken only if it is that same object.  A path swapped
 * since the check (a component replaced by a link, a directory renamed
 * over) is refused: never the object the check did not see.
 */
static int open_pinned(int oldroot, const char *src, int pin, struct corral_err *err)
{
	struct open_how how = {
		.flags = O_PATH | O_CLOEXEC,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	struct stat want, got;
	int fd, e;

	if (fstat(pin, &want) < 0)
		return corral_set_errno(err, errno, "cannot stat the checked %s", src);
	/* a link judged (srt's kept one): the link itself, never what it names */
	if (S_ISLNK(want.st_mode))
		how.flags |= O_NOFOLLOW;
	fd = openat2_retry(oldroot, src, &how);
	e = errno;
	if (fd < 0 && e == EACCES)
		return cannot_open_host(src, e, err);
	if (fd >= 0 && fstat(fd, &got) == 0 && got.st_dev == want.st_dev &&
	    got.st_ino == want.st_ino)
		return fd;
	if (fd >= 0)
		close(fd);
	return corral_set_err(err, -EACCES, "%s is not what was checked any more "
			      "(%s): refused", src, fd >= 0 ? "another file is there" :
			      e == ELOOP ? "a symbolic link is on its way" : strerror(e));
}

/*
 * A host path the caller names (a bind, the workspace) may never show the
 * host's kernel: /proc (every host process and its command line), /sys,
 * /dev (and what is mounted there), nor the host's root, which holds them
 * all (binds are recursive).  Judged on what was opened, after every
 * symlink and ".." was resolved, so /proc/self/.. or a link to /sys is
 * caught, and a link swapped after any earlier check too.
 */
static const char *const host_never[] = { "proc", "sys", "dev", "dev/shm",
	"dev/pts", "dev/mqueue", "dev/hugepages" };

static bool kernel_fs(long type)
{
	switch (type) {
	case PROC_SUPER_MAGIC: case SYSFS_MAGIC: case DEVPTS_SUPER_MAGIC:
	case CGROUP_SUPER_MAGIC: case CGROUP2_SUPER_MAGIC: case DEBUGFS_MAGIC:
	case TRACEFS_MAGIC: case SECURITYFS_MAGIC: case BPF_FS_MAGIC:
	case 0x19800202 /* mqueue */: case HUGETLBFS_MAGIC: case PSTOREFS_MAGIC:
	case EFIVARFS_MAGIC: case BINFMTFS_MAGIC:
		return true;
	default:
		return false;
	}
}

/*
 * The host's runtime directories hold the unix sockets (and FIFOs) of its
 * services and sessions: the system bus, journald, docker's and podman's,
 * a user's ssh-agent, gpg-agent, tmux and X11, an ssh ControlMaster's.  A
 * read-only bind does not close them: connect(2), like a FIFO's open for
 * writing, asks for permission on the inode, never for a writable mount,
 * and an unprivileged caller's sandbox is its uid to the kernel's checks.
 * So neither /run, /tmp, /var/tmp (as /tmp, any user's to leave a socket
 * in, and kept across boots), /run/user nor a session's directory in it
 * may be a bind's source (what lies below them may, named one by one).
 * Judged by identity, after every symlink: /var/run is /run.
 */
static const char *const host_sockets[] = { "run", "tmp", "var/tmp", "run/user" };

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* /run/user holds a directory for each session: more is not a host's */
#define SESSION_DIRS_MAX 4096

/*
 * A session's own, /run/user/UID, by identity: also where the host shows
 * it by another path (a bind of it elsewhere), whose ".." is not
 * /run/user.
 */
static bool session_dir(int oldroot, const struct stat *st)
{
	struct dirent *e;
	struct stat nv;
	unsigned n = 0;
	bool found = false;
	int fd;
	DIR *d;

	fd = openat(oldroot, "run/user", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	while (!found && n++ < SESSION_DIRS_MAX && (e = readdir(d)))
		found = e->d_name[0] != '.' &&
			fstatat(dirfd(d), e->d_name, &nv, AT_SYMLINK_NOFOLLOW) == 0 &&
			same_file(&nv, st);
	closedir(d);
	return found;
}

static bool runtime_dir(int oldroot, int fd, const struct stat *st)
{
	struct stat nv, up;

	for (size_t i = 0; i < sizeof(host_sockets) / sizeof(host_sockets[0]); i++)
		if (fstatat(oldroot, host_sockets[i], &nv, 0) == 0 && same_file(&nv, st))
			return true;
	if (!S_ISDIR(st->st_mode))
		return false;
	/* a session's own: /run/user/UID */
	if (fstatat(fd, "..", &up, 0) == 0 &&
	    fstatat(oldroot, "run/user", &nv, 0) == 0 && same_file(&nv, &up))
		return true;
	return session_dir(oldroot, st);
}

/*
 * A directory that holds one of them as a plain directory, not a mount
 * (runtime_dir_beneath sees those): /var, whose tmp a bind shows as
 * binding /var/tmp would.  The others' holders, the host's root and
 * /run, are refused themselves.  By identity, as runtime_dir: a symlink
 * to /var, a bind of it elsewhere.  A /var/tmp that is a symlink (to
 * /tmp) shows nothing of the host's through /var: no refusal then.
 */
static const char *runtime_dir_holder(int oldroot, const struct stat *st)
{
	char up[PATH_MAX];
	struct stat nv, rt;

	if (!S_ISDIR(st->st_mode))
		return NULL;
	for (size_t i = 0; i < sizeof(host_sockets) / sizeof(host_sockets[0]); i++) {
		const char *slash = strrchr(host_sockets[i], '/');
		size_t n = slash ? (size_t)(slash - host_sockets[i]) : 0;

		if (!n || n >= sizeof(up))
			continue;
		memcpy(up, host_sockets[i], n);
		up[n] = '\0';
		if (fstatat(oldroot, host_sockets[i], &rt, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISDIR(rt.st_mode) && fstatat(oldroot, up, &nv, 0) == 0 &&
		    same_file(&nv, st))
			return host_sockets[i];
	}
	return NULL;
}

/*
 * A mount beneath a bind's source that is one of the host's runtime
 * directories (a chroot's /tmp or /run bound there, as schroot and
 * pbuilder make them): the recursive bind would show its sockets as
 * binding it would.  at is the mount point as the mount table names it,
 * from the caller's root.  What the caller cannot open there, the
 * sandbox (its uid, or a lesser one) cannot reach through the bind either.
 */
static bool runtime_dir_beneath(int oldroot, const char *at)
{
	struct open_how how = {
		.flags = O_PATH | O_CLOEXEC,
		.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	struct stat st;
	bool r;
	int fd;

	fd = openat2_retry(AT_FDCWD, at, &how);
	if (fd < 0)
		return false;
	r = fstat(fd, &st) == 0 && runtime_dir(oldroot, fd, &st);
	close(fd);
	return r;
}

int mount_check_host_fd(int oldroot, int fd, const char *path,
			struct corral_err *err)
{
	struct stat st, root, nv;
	const char *held;
	struct statfs sf;

	if (fstat(fd, &st) < 0 || fstatfs(fd, &sf) < 0 || fstat(oldroot, &root) < 0)
		return corral_set_err(err, -errno, "cannot stat %s: %s", path,
				      strerror(errno));
	if (kernel_fs(sf.f_type))
		goto refuse;
	if (st.st_dev == root.st_dev && st.st_ino == root.st_ino)
		goto refuse;
	for (size_t i = 0; i < sizeof(host_never) / sizeof(host_never[0]); i++)
		if (fstatat(oldroot, host_never[i], &nv, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISDIR(nv.st_mode) && nv.st_dev == st.st_dev &&
		    nv.st_dev != root.st_dev)
			goto refuse;
	if (runtime_dir(oldroot, fd, &st))
		return corral_set_err(err, -EACCES, "%s is the host's /run, /tmp, "
				      "/var/tmp or a session's runtime directory: it "
				      "holds the unix sockets of the host's services "
				      "and sessions, which "
				      "even a read-only bind lets a sandbox connect to; "
				      "bind what you need from it by name", path);
	held = runtime_dir_holder(oldroot, &st);
	if (held)
		return corral_set_err(err, -EACCES, "%s holds the host's /%s, "
				      "where any user may leave a unix socket, which even "
				      "a read-only bind lets a sandbox connect to; bind "
				      "what you need from it by name", path, held);
	return 0;
refuse:
	return corral_set_err(err, -EACCES, "%s is (or holds) the host's /proc, "
			      "/sys or /dev, or is the host's root: never shown "
			      "to a sandbox", path);
}

static bool kernel_fs_name(const char *type)
{
	static const char *const names[] = {
		"proc", "sysfs", "devpts", "devtmpfs", "cgroup", "cgroup2",
		"debugfs", "tracefs", "securityfs", "bpf", "mqueue", "hugetlbfs",
		"pstore", "efivarfs", "binfmt_misc", "configfs", "fusectl",
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(type, names[i]))
			return true;
	return false;
}

/* init's view has the host at OLDROOT: a mount point as the host names it */
static const char *host_name(const char *at)
{
	return strncmp(at, OLDROOT "/", strlen(OLDROOT "/")) ? at : at + strlen(OLDROOT);
}

/*
 * A bind takes what is mounted beneath its source too (bind_fd and the
 * idmapped copy are recursive): a kernel filesystem there (a chroot's
 * /proc, a sysfs) would show the host's kernel as surely as the source
 * itself being one, and a bind of the host's /tmp or /run there its
 * sockets (runtime_dir_beneath).  Judged in the mount table of the view
 * the bind is taken from (only root mounts there, so nothing swaps it
 * meanwhile).
 */
int mount_check_submounts(int rootfd, int fd, const char *path,
			  struct corral_err *err)
{
	char self[64], dir[PATH_MAX], *line = NULL;
	size_t cap = 0, n;
	ssize_t len;
	FILE *f;
	int r = 0;

	/* rootfd's proc: init, not yet given its own, has the host's */
	snprintf(self, sizeof(self), "proc/self/fd/%d", fd);
	len = readlinkat(rootfd, self, dir, sizeof(dir) - 1);
	if (len <= 0 || dir[0] != '/')
		return corral_set_err(err, -EACCES, "%s: where it lies is unknown "
				      "(%s): refused", path, len < 0 ? strerror(errno) :
				      "not a path");
	dir[len] = '\0';
	n = strcmp(dir, "/") ? (size_t)len : 0;
	f = mountinfo_open(rootfd, "proc/self/mountinfo");
	if (!f)
		return corral_set_errno(err, errno, "cannot read the mount table%s",
					errno == EXDEV ? " (another file is mounted over "
					"it): what a bind holds cannot be judged" : "");
	while (r == 0 && getline(&line, &cap, f) > 0) {
		char *save = NULL, *at, *type, *dash = strstr(line, " - ");

		if (!dash)
			continue;
		*dash = '\0';
		type = strtok_r(dash + 3, " ", &save);
		save = NULL;
		at = strtok_r(line, " ", &save);
		/* id, parent, dev, root, then the mount point */
		for (int k = 0; at && k < 4; k++)
			at = strtok_r(NULL, " ", &save);
		if (!at || !type)
			continue;
		mountinfo_unescape(at);
		if (strncmp(at, dir, n) || at[n] != '/' || !at[n + 1])
			continue;
		if (kernel_fs_name(type)) {
			r = corral_set_err(err, -EACCES, "%s holds a %s mount (at %s): a "
					   "bind brings what is mounted beneath it, and the "
					   "host's kernel filesystems are never shown to a "
					   "sandbox", path, type, host_name(at));
		} else if (runtime_dir_beneath(rootfd, at)) {
			r = corral_set_err(err, -EACCES, "%s holds a mount of the host's "
					   "/run, /tmp, /var/tmp or a session's runtime "
					   "directory (at "
					   "%s): a bind brings what is mounted beneath it, and "
					   "those hold the unix sockets of the host's services "
					   "and sessions, which even a read-only bind lets a "
					   "sandbox connect to", path, host_name(at));
		}
	}
	free(line);
	fclose(f);
	return r;
}

/*
 * Bind the host's src (an O_PATH fd) onto dst in the new root, with a copy
 * of the whole subtree, so that submounts come along.
 */
/*
 * srcfd's mount cloned onto dst; *treep the clone's fd for the caller to
 * close (-1 when open_tree failed), so that bind_host closes it with its
 * source in one call.
 */
static int bind_fd_keep(int srcfd, const char *what, const char *dst,
			int *treep, struct corral_err *err)
{
	int tree;

	tree = syscall(SYS_open_tree, srcfd, "",
		       OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH |
		       AT_RECURSIVE);
	*treep = tree;
	if (tree < 0)
		return corral_set_errno(err, errno, "cannot clone the mount of %s",
				      what);
	if (syscall(SYS_move_mount, tree, "", AT_FDCWD, dst,
		    MOVE_MOUNT_F_EMPTY_PATH) < 0)
		return corral_set_errno(err, errno, "cannot bind %s on %s", what,
				      dst);
	return 0;
}

static int bind_fd(int srcfd, const char *what, const char *dst,
		   struct corral_err *err)
{
	int tree, r;

	r = bind_fd_keep(srcfd, what, dst, &tree, err);
	if (tree >= 0)
		close(tree);
	return r;
}

/*
 * Two fds we opened, closed: in one close_range when the kernel gave them
 * adjacent numbers (as it does a source and its clone opened one after
 * the other with nothing free between), else one by one.  13 binds of
 * /usr, /etc and /dev a sandbox: 13 calls fewer.
 */
static void close_pair(int a, int b)
{
	if (b < 0) {
		close(a);
		return;
	}
	if (b == a + 1 && close_range((unsigned)a, (unsigned)b, 0) == 0)
		return;
	close(a);
	close(b);
}

/*
 * How a bind is made: read-only or not; device nodes must keep "dev"; the
 * caller's own binds (BIND_USER_*) are judged by mount_check_host_fd() first.
 */
enum bind_kind { BIND_RO, BIND_RW, BIND_DEVICE, BIND_USER_RO, BIND_USER_RW };

/* A detached mount the supervisor made (idmap.c) onto dst. */
static int bind_tree(int tree, const char *what, const char *dst,
		     struct corral_err *err)
{
	if (syscall(SYS_move_mount, tree, "", AT_FDCWD, dst,
		    MOVE_MOUNT_F_EMPTY_PATH) < 0)
		return corral_set_errno(err, errno, "cannot mount the idmapped %s on %s",
				      what, dst);
	return 0;
}

/*
 * dst's directory in the new root, walked one component at a time from
 * "/" and made where missing, following no symlink; *leaf is dst's last
 * component.  A bind's mount point may lie beneath an earlier bind of a
 * host directory that another sandbox writes: a link it left there (to
 * /oldroot/tmp, the host's tree while the view is built) made init
 * create the directory or file on the host and mount there
 * (CVE-2024-45310 in runc).  The image's own links are no concern: the
 * parents of every bind are directories of the upper layer (stage_dirs).
 */
static int open_dst_parent(const char *dst, const char **leaf,
			   struct corral_err *err)
{
	struct open_how how = {
		.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	char buf[4096];
	int dfd, nfd;

	*leaf = strrchr(dst, '/');
	if (dst[0] != '/' || !*leaf || !(*leaf)[1] ||
	    snprintf(buf, sizeof(buf), "%s", dst) >= (int)sizeof(buf))
		return corral_set_err(err, -EINVAL, "mount point \"%s\": not an "
				      "absolute path to a name", dst);
	(*leaf)++;
	buf[*leaf - dst] = '\0';	/* the parent, with its last slash */
	dfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return corral_set_errno(err, errno, "open /");
	for (char *s = buf + 1, *slash; (slash = strchr(s, '/')); s = slash + 1) {
		if (slash == s)
			continue;
		*slash = '\0';
		if (mkdirat(dfd, s, 0755) < 0 && errno != EEXIST)
			nfd = -1;
		else
			nfd = openat2_retry(dfd, s, &how);
		if (nfd < 0) {
			int e = errno;

			close(dfd);
			return corral_set_err(err, -e, "cannot open %s beneath the "
					      "sandbox's root: %s%s", buf, strerror(e),
					      e == ELOOP ? " (a symlink: not followed "
					      "to a mount point)" : "");
		}
		*slash = '/';
		close(dfd);
		dfd = nfd;
	}
	return dfd;
}

/*
 * An O_PATH fd of leaf in dir, no symlink followed: a mount on it, if
 * any.  link: leaf is one, taken as itself (a bind of a link onto itself).
 */
static int open_leaf(int dir, const char *leaf, bool link)
{
	struct open_how how = {
		.flags = O_PATH | O_CLOEXEC | (link ? O_NOFOLLOW : 0),
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};

	return openat2_retry(dir, leaf, &how);
}

/*
 * A bind of the policy's, made onto dst by fds (open_dst_parent): made,
 * its attributes set on what was mounted, not on whatever a path names
 * by then.  tree >= 0: the supervisor's detached copy; else fd's clone.
 * type: the source's (S_IFDIR, S_IFLNK ...); a link (pinned: srt's kept
 * one) is mounted onto the link at dst, which move_mount does not follow,
 * and is then a mount point the sandbox cannot remove, rename or replace.
 */
static uint64_t bind_attrs(enum bind_kind kind)
{
	return MOUNT_ATTR_NOSUID | (kind == BIND_RO ? MOUNT_ATTR_RDONLY |
	       MOUNT_ATTR_NODEV : kind == BIND_RW ? MOUNT_ATTR_NODEV :
	       MOUNT_ATTR_NOEXEC);
}

static int bind_user(int fd, int tree, const char *what, const char *dst,
		     mode_t type, uint64_t set, struct corral_err *err)
{
	struct mount_attr attr = { .attr_set = set };
	cleanup_close int parent = -1, at = -1, clone = -1, mnt = -1;
	struct stat want, got;
	const char *leaf;

	parent = open_dst_parent(dst, &leaf, err);
	if (parent < 0)
		return parent;
	if ((S_ISDIR(type) ? mkdirat(parent, leaf, 0755) :
	     mknodat(parent, leaf, S_IFREG | 0644, 0)) < 0 && errno != EEXIST)
		return corral_set_errno(err, errno, "cannot create %s", dst);
	at = open_leaf(parent, leaf, S_ISLNK(type));
	if (at < 0)
		return corral_set_errno(err, errno, "cannot open %s", dst);
	if (tree < 0) {
		clone = syscall(SYS_open_tree, fd, "", OPEN_TREE_CLONE |
				OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
		if (clone < 0)
			return corral_set_errno(err, errno, "cannot clone the mount "
						"of %s", what);
		tree = clone;
	}
	if (syscall(SYS_move_mount, tree, "", at, "", MOVE_MOUNT_F_EMPTY_PATH |
		    MOVE_MOUNT_T_EMPTY_PATH) < 0)
		return corral_set_errno(err, errno, "cannot bind %s on %s", what, dst);
	/* what lies at dst now: our mount's root, or the bind is refused */
	mnt = open_leaf(parent, leaf, S_ISLNK(type));
	if (mnt < 0 || fstat(mnt, &got) < 0 || fstat(fd, &want) < 0)
		return corral_set_errno(err, errno, "cannot open %s", dst);
	if (got.st_dev != want.st_dev || got.st_ino != want.st_ino)
		return corral_set_err(err, -EXDEV, "%s is no longer the bind of %s "
				      "(renamed beneath us)", dst, what);
	if (syscall(SYS_mount_setattr, mnt, "", AT_EMPTY_PATH | AT_RECURSIVE,
		    &attr, sizeof(attr)) < 0)
		return corral_set_errno(err, errno, "cannot make %s %s", dst,
					set & MOUNT_ATTR_RDONLY ? "read-only" : "nosuid");
	return 0;
}

/*
 * A bind onto itself (src is dst) beneath an earlier bind of the same
 * host directory: its source, opened through the links on src's way
 * (as root by the supervisor, to idmap it, before init starts), must be
 * the object at its mount point, reached with none.  That directory may
 * be one sandboxes write: another run's put a link at src just before
 * the open and took it away before the walk to the mount point (which a
 * link stops), and this sandbox read and wrote the link's target,
 * another user's directory, as its owner.  Not judged where dst's
 * directory is not src's (the parent bound from elsewhere), or nothing
 * is at dst yet.  link: src is a link bound as itself (srt's kept one),
 * found at dst as itself.
 */
static int same_object_at_dst(int oldroot, int fd, const char *src, bool link,
			      struct corral_err *err)
{
	cleanup_close int parent = -1, at = -1, host = -1;
	char dir[4096];
	struct stat st_at, st_src, st_parent, st_host;
	const char *leaf;

	parent = open_dst_parent(src, &leaf, err);
	if (parent < 0)
		return parent;
	at = open_leaf(parent, leaf, link);
	if (at < 0)
		return 0;	/* made by bind_user: nothing there to be swapped */
	if ((size_t)snprintf(dir, sizeof(dir), "%.*s", (int)(leaf - src), src) >= sizeof(dir))
		return corral_set_err(err, -ENAMETOOLONG, "%s: too long", src);
	host = open_host(oldroot, dir, err);
	if (host < 0)
		return host;
	if (fstat(at, &st_at) < 0 || fstat(fd, &st_src) < 0 || fstat(parent, &st_parent) < 0 ||
	    fstat(host, &st_host) < 0)
		return corral_set_errno(err, errno, "cannot stat %s", src);
	if (st_parent.st_dev != st_host.st_dev || st_parent.st_ino != st_host.st_ino)
		return 0;
	if (st_at.st_dev != st_src.st_dev || st_at.st_ino != st_src.st_ino)
		return corral_set_err(err, -EACCES, "%s is not what was opened any more "
				      "(a symbolic link was on its way, or another file "
				      "is there now): refused", src);
	return 0;
}

/*
 * tree >= 0: src as the supervisor's idmapped copy, already judged;
 * pin >= 0: the object the caller judged, which src must still be.
 */
static int bind_host(int oldroot, const char *src, const char *dst,
		     enum bind_kind kind, bool optional, int tree, int pin,
		     struct corral_err *err)
{
	struct stat st;
	int fd, clone = -1, r;

	if (tree >= 0)
		fd = fcntl(tree, F_DUPFD_CLOEXEC, 3);
	else if (pin >= 0)
		fd = open_pinned(oldroot, src, pin, err);
	else
		fd = open_host(oldroot, src, err);
	if (fd < 0 && tree >= 0)
		return corral_set_errno(err, errno, "dup %s", src);
	if (fd < 0)
		return optional && fd == -ENOENT ? 0 : fd;
	if (tree < 0 && (kind == BIND_USER_RO || kind == BIND_USER_RW)) {
		r = mount_check_host_fd(oldroot, fd, src, err);
		if (r == 0)
			r = mount_check_submounts(oldroot, fd, src, err);
		if (r < 0)
			goto out;
	}
	if (fstat(fd, &st) < 0) {
		r = corral_set_errno(err, errno, "cannot stat %s", src);
		goto out;
	}
	if (kind == BIND_USER_RO || kind == BIND_USER_RW) {
		r = strcmp(src, dst) ? 0 : same_object_at_dst(oldroot, fd, src,
							       S_ISLNK(st.st_mode), err);
		if (r == 0)
			r = bind_user(fd, tree, src, dst, st.st_mode & S_IFMT,
				      bind_attrs(kind == BIND_USER_RO ? BIND_RO : BIND_RW),
				      err);
		goto out;
	}
	r = make_mountpoint(dst, S_ISDIR(st.st_mode), err);
	if (r == 0)
		r = tree >= 0 ? bind_tree(tree, src, dst, err) :
				bind_fd_keep(fd, src, dst, &clone, err);
	if (r == 0 && kind == BIND_RO)
		r = make_ro(dst, false, err);
	if (r == 0 && kind != BIND_RO && sys_mount_setattr(dst, AT_RECURSIVE,
			MOUNT_ATTR_NOSUID |
			(kind == BIND_RW ? MOUNT_ATTR_NODEV : MOUNT_ATTR_NOEXEC), 0) < 0)
		r = corral_set_errno(err, errno, "cannot make %s nosuid", dst);
out:
	close_pair(fd, clone);
	return r;
}

/* /bin -> usr/bin on merged-usr hosts: copy the link, not the target. */
static int host_dir(int oldroot, const char *path, struct corral_err *err)
{
	char target[4096];
	struct stat st;
	ssize_t n;

	if (fstatat(oldroot, path + 1, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 :
			corral_set_errno(err, errno, "cannot stat %s", path);
	if (!S_ISLNK(st.st_mode))
		return bind_host(oldroot, path, path, BIND_RO, false, -1, -1, err);
	n = readlinkat(oldroot, path + 1, target, sizeof(target) - 1);
	if (n < 0)
		return corral_set_errno(err, errno, "cannot read link %s", path);
	target[n] = '\0';
	if (symlink(target, path) < 0)
		return corral_set_errno(err, errno, "cannot create link %s",
				      path);
	return 0;
}

/* ---- /etc: corral's entries, an image's merged below them --------------- */

#define IMAGE_ETC_MAX (1u << 20)

/*
 * An image's own /etc file, from the stacked root: never through a
 * symlink nor onto another mount (the host's root is still at /oldroot),
 * never waiting on a FIFO.  NULL when it is not there or not a plain file.
 */
static char *read_image_etc(const char *path)
{
	struct open_how how = {
		.flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
			   RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
	};
	struct stat st;
	char *buf = NULL;
	ssize_t n = -1;
	int fd;

	fd = openat2_retry(AT_FDCWD, path + 1, &how);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= IMAGE_ETC_MAX &&
	    (buf = malloc(st.st_size + 1)))
		n = read(fd, buf, st.st_size);
	close(fd);
	if (n < 0) {
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	return buf;
}

enum etc_kind { ETC_PASSWD, ETC_GROUP, ETC_HOSTS, ETC_RESOLV };

static bool field_is(const char *line, size_t field, const char *value)
{
	size_t len = strlen(value);

	for (size_t i = 0; i < field && line; i++) {
		line = strchr(line, ':');
		line = line ? line + 1 : NULL;
	}
	return line && !strncmp(line, value, len) && (line[len] == ':' || !line[len]);
}

/*
 * Whether an image's line stays beside corral's: an account whose name
 * or id is not one of corral's (root, the sandbox's user, nobody); a host
 * that is not loopback; resolv.conf's search domains only (its
 * nameservers are corral's, or none).
 */
static bool keep_line(enum etc_kind kind, const char *line, const char *user)
{
	static const char *const names[] = { "root", "agent", "nobody", "nogroup" };
	static const char *const ids[] = { "0", "1000", "65534" };
	size_t colons = 0;

	if (!*line || *line == '#' || *line == '+' || *line == '-')
		return false;
	if (kind == ETC_HOSTS)
		return strncmp(line, "127.", 4) && strncmp(line, "::1", 3) && *line != ' ' &&
		       *line != '\t';
	if (kind == ETC_RESOLV)
		return !strncmp(line, "search ", 7) || !strncmp(line, "domain ", 7);
	for (const char *s = line; (s = strchr(s, ':')); s++)
		colons++;
	if (colons != (kind == ETC_PASSWD ? 6u : 3u) || field_is(line, 0, user))
		return false;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (field_is(line, 0, names[i]))
			return false;
	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
		if (field_is(line, 2, ids[i]))
			return false;
	return true;
}

/* corral's text, then the lines of the image's file that keep_line keeps. */
static int write_merged(const char *path, const char *ours, enum etc_kind kind,
			const char *user, bool from_image, struct corral_err *err)
{
	char *theirs = from_image ? read_image_etc(path) : NULL, *text = NULL;
	size_t len = 0;
	FILE *f;
	int r;

	if (from_image && unlink(path) < 0 && errno != ENOENT) {
		free(theirs);
		return corral_set_err(err, -errno, "cannot replace the image's %s: %s",
				      path, strerror(errno));
	}
	/*
	 * Nothing to merge (the host's view, or an image without the file):
	 * ours as it is.  A memory stream here cost init the lazy binding of
	 * libc's calloc, nine page faults of the dynamic linker's tables.
	 */
	if (!theirs)
		return write_text(path, ours, err);
	f = open_memstream(&text, &len);
	if (!f) {
		free(theirs);
		return corral_set_err(err, -errno, "%s: %s", path, strerror(errno));
	}
	fputs(ours, f);
	for (char *line = theirs, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (keep_line(kind, line, user))
			fprintf(f, "%s\n", line);
	}
	free(theirs);
	if (fclose(f) != 0) {
		free(text);
		return corral_set_err(err, -ENOMEM, "%s: out of memory", path);
	}
	r = write_text(path, text, err);
	free(text);
	return r;
}

/* The system's roots (the image's, else the host's), or NULL. */
static char *read_roots(int oldroot, bool img, size_t *len)
{
	struct open_how how = { .flags = O_RDONLY | O_CLOEXEC,
				.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
	size_t cap = 0;
	char *buf = NULL;
	ssize_t n;
	int fd;

	*len = 0;
	/*
	 * An image's bundle resolves in the image: its links may stay in the
	 * overlay but not cross onto /oldroot (a link to "/oldroot/home/..."
	 * would copy a host file into the sandbox's bundle).
	 */
	if (img) {
		int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);

		/* and a FIFO of the image's there is not waited on */
		how.flags |= O_NONBLOCK;
		how.resolve |= RESOLVE_NO_XDEV;
		fd = root < 0 ? -1 : openat2_retry(root, TLS_SYSTEM_BUNDLE, &how);
		if (root >= 0)
			close(root);
	} else {
		fd = openat2_retry(oldroot, TLS_SYSTEM_BUNDLE, &how);
	}
	if (fd < 0)
		return NULL;
	do {
		if (*len == cap) {
			char *grown = cap < (16u << 20) ? realloc(buf, cap + (256u << 10)) : NULL;

			if (!grown) {
				free(buf);
				close(fd);
				return NULL;
			}
			buf = grown;
			cap += 256u << 10;
		}
		n = read(fd, buf + *len, cap - *len - 1);
		if (n > 0)
			*len += n;
	} while (n > 0);
	close(fd);
	if (n < 0) {
		free(buf);
		return NULL;
	}
	buf[*len] = 0;
	return buf;
}

/*
 * corral's own directory in an image's root: what the image put there
 * goes (a link to "/oldroot/..." would have corral write on the host,
 * through it; its files would stand in the way of ours).
 */
static int own_image_dir(const char *dir, struct corral_err *err)
{
	static const char *const ours[] = { TLS_CA_PATH, TLS_BUNDLE_PATH };
	struct stat st;

	if (lstat(dir, &st) == 0 && !S_ISDIR(st.st_mode) && unlink(dir) < 0)
		return corral_set_errno(err, errno, "cannot replace the image's %s", dir);
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return corral_set_errno(err, errno, "cannot create %s", dir);
	for (size_t i = 0; i < sizeof(ours) / sizeof(ours[0]); i++)
		if (unlink(ours[i]) < 0 && errno != ENOENT)
			return corral_set_errno(err, errno, "cannot replace the image's %s",
						ours[i]);
	return 0;
}

/*
 * corral's bundle over the system's, read-only: where read_roots found it,
 * resolved as it was (an image's links stay in the image's mount) and
 * mounted by fd.  Followed as a path, an image's link to
 * "/oldroot/proc/self/mountinfo" laid the bundle over init's view of the
 * host's mount table, which the check of a writable bind's submounts
 * then read (mount_check_submounts): certificates, no proc beneath the
 * bind, and the host's processes were in the sandbox.  Not a file of
 * the root's own (a link out, none): nothing is covered.
 */
static int cover_system_bundle(bool img, struct corral_err *err)
{
	struct open_how how = {
		.flags = O_PATH | O_CLOEXEC,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS |
			   (img ? RESOLVE_NO_XDEV : 0),
	};
	struct mount_attr attr = {
		.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
			    MOUNT_ATTR_NOEXEC,
	};
	cleanup_close int root = -1, at = -1, tree = -1;
	struct stat st;

	root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return corral_set_errno(err, errno, "open /");
	at = openat2_retry(root, TLS_SYSTEM_BUNDLE, &how);
	if (at < 0 && (errno == ENOENT || errno == ENOTDIR || errno == EXDEV ||
		       errno == ELOOP))
		return 0;
	if (at < 0 || fstat(at, &st) < 0)
		return corral_set_errno(err, errno, "cannot open %s", TLS_SYSTEM_BUNDLE);
	if (!S_ISREG(st.st_mode))
		return 0;
	tree = (int)syscall(SYS_open_tree, AT_FDCWD, TLS_BUNDLE_PATH,
			    OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (tree < 0)
		return corral_set_errno(err, errno, "cannot clone %s", TLS_BUNDLE_PATH);
	if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
		return corral_set_errno(err, errno, "cannot make %s read-only", TLS_BUNDLE_PATH);
	if (syscall(SYS_move_mount, tree, "", at, "", MOVE_MOUNT_F_EMPTY_PATH |
		    MOVE_MOUNT_T_EMPTY_PATH) < 0)
		return corral_set_errno(err, errno, "cannot mount %s on %s", TLS_BUNDLE_PATH,
					TLS_SYSTEM_BUNDLE);
	return 0;
}

/*
 * Egress terminated by the supervisor: the sandbox trusts its CA, alone in
 * TLS_CA_PATH (for clients that add to their roots) and after the system's
 * roots in TLS_BUNDLE_PATH, which also stands in for the system bundle
 * (clients that read it without asking the environment).  No key is here.
 */
static int build_tls_trust(int oldroot, const char *pem, bool img,
			   struct corral_err *err)
{
	size_t len;
	char *roots = read_roots(oldroot, img, &len), *bundle = NULL;
	int r;

	r = img ? own_image_dir("/etc/corral", err) : mkdir_p("/etc/corral", 0755, err);
	if (r == 0)
		r = write_text(TLS_CA_PATH, pem, err);
	if (r == 0 && asprintf(&bundle, "%s%s%s", roots ? roots : "",
			       len && roots[len - 1] != '\n' ? "\n" : "", pem) < 0)
		r = corral_set_err(err, -ENOMEM, "out of memory for %s", TLS_BUNDLE_PATH);
	if (r == 0)
		r = write_text(TLS_BUNDLE_PATH, bundle, err);
	free(roots);
	free(bundle);
	if (r == 0)
		r = cover_system_bundle(img, err);
	return r;
}

static int build_etc(int oldroot, const struct corral_policy *p,
		     const char *tls_ca_pem, struct corral_err *err)
{
	const char *user = p->user_name ? p->user_name : "agent";
	const char *home = p->user_home ? p->user_home : "/home/agent";
	bool img = p->nroot_layers > 0;
	char passwd[512], group[256];
	int r;

	snprintf(passwd, sizeof(passwd),
		 "root:x:0:0:root:/root:/usr/sbin/nologin\n"
		 "%s:x:1000:1000:%s:%s:/bin/sh\n"
		 "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		 user, user, home);
	snprintf(group, sizeof(group), "root:x:0:\n%s:x:1000:\nnogroup:x:65534:\n", user);
	r = mkdir_p("/etc", 0755, err);
	/* an image's own entries stay, below corral's, where they do not clash */
	if (r == 0)
		r = write_merged("/etc/passwd", passwd, ETC_PASSWD, user, img, err);
	if (r == 0)
		r = write_merged("/etc/group", group, ETC_GROUP, user, img, err);
	if (r == 0)
		r = write_merged("/etc/hosts", "127.0.0.1\tlocalhost corral\n"
				 "::1\tlocalhost ip6-localhost\n", ETC_HOSTS, user, img, err);
	for (size_t i = 0; r == 0 && img && i < 2; i++)
		if (unlink(i ? "/etc/nsswitch.conf" : "/etc/hostname") < 0 && errno != ENOENT)
			r = corral_set_err(err, -errno, "cannot replace the image's %s: %s",
					   i ? "/etc/nsswitch.conf" : "/etc/hostname",
					   strerror(errno));
	if (r == 0)
		r = write_text("/etc/hostname", "corral\n", err);
	if (r == 0)
		r = write_text("/etc/nsswitch.conf",
			       "passwd: files\ngroup: files\nhosts: files dns\n", err);
	/*
	 * The supervisor answers DNS inside: allowed names in proxy mode; with
	 * the network off, every name NXDOMAIN, each a denial (dnsoff.c).
	 */
	if (r == 0)
		r = write_merged("/etc/resolv.conf", p->net == CORRAL_NET_PROXY ?
				 "# corral: answered by the supervisor, allowed names only\n"
				 "nameserver 127.0.0.1\noptions edns0\n" :
				 "# corral: the network is off by policy (network.mode none):\n"
				 "# every name is answered NXDOMAIN by the supervisor\n"
				 "nameserver 127.0.0.1\n", ETC_RESOLV, user,
				 img, err);
	/* an image's root has its own loader cache, certificates, zone info */
	for (size_t i = 0; r == 0 && !img && i < sizeof(host_etc) / sizeof(host_etc[0]); i++)
		r = bind_host(oldroot, host_etc[i], host_etc[i], BIND_RO, true, -1, -1, err);
	/*
	 * The host's TLS private keys come with /etc/ssl, and no program needs
	 * them: an unprivileged caller's sandbox keeps its groups where it has
	 * no subuid entry, ssl-cert's (postgres's) among them, which read them.
	 */
	if (r == 0 && !img)
		r = mask_dir(MOUNT_HOST_MASKED, err);
	if (r == 0 && tls_ca_pem)
		r = build_tls_trust(oldroot, tls_ca_pem, img, err);
	return r;
}

/*
 * Ptys one sandbox may hold at once.  Every devpts instance but the
 * host's draws on one pool, kernel.pty.max (4096) less the 1024 reserved
 * for the host's own: unbounded, one sandbox opening /dev/ptmx 3072
 * times left none for any other sandbox's -t, nor any other container's.
 * Shells, tmux panes and expect-style tests use a few.
 */
#define SANDBOX_PTYS_MAX	128
#define STRINGIFY_(x)		#x
#define STRINGIFY(x)		STRINGIFY_(x)

static int build_dev(int oldroot, struct corral_err *err)
{
	static const struct { const char *path, *target; } links[] = {
		{ "/dev/fd", "/proc/self/fd" }, { "/dev/stdin", "/proc/self/fd/0" },
		{ "/dev/stdout", "/proc/self/fd/1" }, { "/dev/stderr", "/proc/self/fd/2" },
		{ "/dev/ptmx", "pts/ptmx" },
	};
	char path[64];
	int r;

	r = mkdir_p("/dev", 0755, err);
	if (r == 0)
		r = do_mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
			     "mode=0755,size=1m", err);
	for (size_t i = 0; r == 0 && i < sizeof(dev_nodes) / sizeof(dev_nodes[0]); i++) {
		snprintf(path, sizeof(path), "/dev/%s", dev_nodes[i]);
		r = bind_host(oldroot, path, path, BIND_DEVICE, false, -1, -1, err);
	}
	for (size_t i = 0; r == 0 && i < sizeof(links) / sizeof(links[0]); i++)
		if (symlink(links[i].target, links[i].path) < 0)
			r = corral_set_errno(err, errno, "cannot create %s",
					   links[i].path);
	if (r == 0)
		r = mkdir_p("/dev/pts", 0755, err);
	if (r == 0)
		r = do_mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
			     "newinstance,ptmxmode=0666,mode=0620,max="
			     STRINGIFY(SANDBOX_PTYS_MAX), err);
	/* a mount point: /dev/shm is a directory of the scratch tmpfs */
	if (r == 0)
		r = mkdir_p("/dev/shm", 01777, err);
	return r;
}

/*
 * Files the scratch tmpfs may hold.  An empty file costs no block of the
 * disk budget but about 1 KiB of host kernel memory (inode and dentry),
 * which no cgroup may be there to charge: unbounded, a sandbox with
 * --disk 1M made 300,000 files and 300 MiB of slab.  One inode per 4 KiB
 * of disk (the smallest a file with data takes anyway) keeps that to about
 * a quarter of the budget, with a floor for small disks holding a source
 * tree: 1 GiB allows 262,144 files, 1 MiB allows 4,096.
 */
#define SCRATCH_BYTES_PER_INODE	4096
#define SCRATCH_INODES_MIN	4096

uint64_t mount_scratch_inodes(uint64_t disk_bytes)
{
	uint64_t n = disk_bytes / SCRATCH_BYTES_PER_INODE;

	return n < SCRATCH_INODES_MIN ? SCRATCH_INODES_MIN : n;
}

/* /dev/shm: a directory of the scratch tmpfs, not a tmpfs of its own. */
static int bind_shm(struct corral_err *err)
{
	int r;

	r = do_mount(SCRATCH "/shm", "/dev/shm", NULL, MS_BIND, NULL, err);
	if (r == 0 && sys_mount_setattr("/dev/shm", 0, MOUNT_ATTR_NOSUID |
				       MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, 0) < 0)
		r = corral_set_errno(err, errno, "cannot make /dev/shm noexec");
	return r;
}

/*
 * A snapshot the workspace starts as (snapshot.c): its tree, as a detached
 * mount the supervisor made (as root: the sandbox's user could not walk
 * to it) or opened here by its path (the supervisor's own uid), copied
 * into the upper layer before the overlay is mounted over it.
 */
static int workspace_layer(int oldroot, const struct corral_policy *p,
			   struct corral_err *err)
{
	const char *dst = SCRATCH "/snapshot";
	int r = 0, fd;

	if (mkdir(dst, 0755) < 0)
		return corral_set_err(err, -errno, "mkdir %s: %s", dst, strerror(errno));
	if (p->workspace_layer_fd >= 0) {
		if (syscall(SYS_move_mount, p->workspace_layer_fd, "", AT_FDCWD, dst,
			    MOVE_MOUNT_F_EMPTY_PATH) < 0)
			r = corral_set_err(err, -errno, "cannot mount the snapshot %s: %s",
					   p->workspace_layer_path, strerror(errno));
	} else {
		fd = open_host(oldroot, p->workspace_layer_path, err);
		if (fd < 0)
			return fd;
		r = bind_fd(fd, p->workspace_layer_path, dst, err);
		close(fd);
	}
	if (r == 0)
		r = make_ro(dst, false, err);
	if (r == 0) {
		cleanup_close int from = open(dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		cleanup_close int to = open(SCRATCH "/upper", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		r = from < 0 || to < 0 ? corral_set_err(err, -errno, "cannot open the "
			"snapshot or the upper layer: %s", strerror(errno)) :
			snapshot_fill(from, to, p, err);
	}
	/* copied: the snapshot is not the sandbox's to see */
	if (umount2(dst, MNT_DETACH) < 0 && r == 0)
		r = corral_set_err(err, -errno, "umount %s: %s", dst, strerror(errno));
	return r;
}

/*
 * One tmpfs of the policy's disk size holds everything the sandbox may
 * write (/tmp, $HOME, /dev/shm, the workspace's upper layer): one budget
 * of bytes and of files, one place a disk filler runs out of room.
 */
static int build_scratch(int oldroot, const struct corral_policy *p,
			 const struct idmap_fds *pre, int *upperfd,
			 struct corral_err *err)
{
	static const char *const dirs[] = {
		SCRATCH "/tmp", SCRATCH "/home", SCRATCH "/upper",
		SCRATCH "/work", SCRATCH "/workspace", SCRATCH "/shm",
	};
	char opts[128];
	int r, fd;

	snprintf(opts, sizeof(opts), "mode=0755,size=%llu,nr_inodes=%llu",
		 (unsigned long long)p->disk_bytes,
		 (unsigned long long)mount_scratch_inodes(p->disk_bytes));
	r = mkdir_p(SCRATCH, 0755, err);
	/*
	 * On an image, the tmpfs under the root's upper layer (stack_layers);
	 * then off the host's /tmp, which it covered, so that binds and a
	 * workspace from there are found.
	 */
	if (r == 0 && p->nroot_layers) {
		r = do_mount(OLDROOT STAGE, SCRATCH, NULL, MS_BIND, NULL, err);
		if (r == 0 && umount2(OLDROOT STAGE, MNT_DETACH) < 0)
			r = corral_set_err(err, -errno, "cannot uncover the host's %s: %s",
					   STAGE, strerror(errno));
	} else if (r == 0)
		r = do_mount("tmpfs", SCRATCH, "tmpfs", MS_NOSUID | MS_NODEV, opts, err);
	for (size_t i = 0; r == 0 && i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if (mkdir(dirs[i], 0755) < 0)
			r = corral_set_errno(err, errno, "cannot create %s",
					   dirs[i]);
	if (r == 0 && chmod(SCRATCH "/tmp", 01777) < 0)
		r = corral_set_errno(err, errno, "cannot chmod /tmp");
	if (r == 0 && chmod(SCRATCH "/shm", 01777) < 0)
		r = corral_set_errno(err, errno, "cannot chmod /dev/shm");
	if (r == 0)
		r = bind_shm(err);
	if (r < 0)
		return r;

	r = mkdir_p("/tmp", 0755, err);
	if (r == 0)
		r = mkdir_p("/home/agent", 0755, err);
	if (r == 0)
		r = mkdir_p("/workspace", 0755, err);
	if (r == 0)
		r = do_mount(SCRATCH "/tmp", "/tmp", NULL, MS_BIND, NULL, err);
	if (r == 0)
		r = do_mount(SCRATCH "/home", "/home/agent", NULL, MS_BIND, NULL, err);
	/* an image's user keeps its home: the same scratch directory there */
	if (r == 0 && p->nroot_layers && p->user_home && strcmp(p->user_home, "/home/agent")) {
		r = mkdir_p(p->user_home, 0755, err);
		if (r == 0)
			r = do_mount(SCRATCH "/home", p->user_home, NULL, MS_BIND, NULL, err);
		if (r < 0)
			return corral_wrap_err(err, "the image user's home %s", p->user_home);
	}
	if (r < 0)
		return r;

	if (!p->workspace)
		return do_mount(SCRATCH "/workspace", "/workspace", NULL, MS_BIND,
				NULL, err);

	/*
	 * Bind the host copy first so no host path ends up in overlay options:
	 * the supervisor's idmapped copy (its owner's files are the agent's),
	 * or the host's directory as the agent's host user reaches it.
	 */
	if (pre && pre->ws >= 0) {
		r = bind_tree(pre->ws, p->workspace, SCRATCH "/workspace", err);
	} else {
		fd = p->workspace_pinned ? open_pinned(oldroot, p->workspace,
						       p->workspace_fd, err) :
		     open_host(oldroot, p->workspace, err);
		if (fd < 0)
			return corral_wrap_err(err, "workspace %s", p->workspace);
		r = mount_check_host_fd(oldroot, fd, p->workspace, err);
		if (r == 0)
			r = bind_fd(fd, p->workspace, SCRATCH "/workspace", err);
		close(fd);
	}
	if (r == 0)
		r = make_ro(SCRATCH "/workspace", false, err);
	/* a snapshot the workspace starts as: read-only, over the workspace */
	if (r == 0 && p->workspace_layer)
		r = workspace_layer(oldroot, p, err);
	if (r == 0)
		r = do_mount("overlay", "/workspace", "overlay", MS_NOSUID | MS_NODEV,
			     "userxattr,lowerdir=" SCRATCH "/workspace,upperdir="
			     SCRATCH "/upper,workdir=" SCRATCH "/work", err);
	if (r < 0)
		return corral_wrap_err(err, "workspace %s", p->workspace);
	/* held open, it keeps the scratch tmpfs after it is detached */
	if (upperfd) {
		*upperfd = open(SCRATCH "/upper", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (*upperfd < 0)
			return corral_set_err(err, -errno, "cannot open the workspace's upper layer: %s",
					      strerror(errno));
	}
	return 0;
}

/*
 * For the supervisor: the scratch tmpfs, through the sandbox's "/" while the
 * sandbox lives (its mounts are gone with its namespace, the tmpfs is not
 * while this fd holds it).
 */
int mount_scratch_open(int rootfd)
{
	int fd = openat(rootfd, "tmp", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

/* The disk limit was hit: no block or no file left on the scratch tmpfs. */
bool mount_scratch_full(int scratchfd)
{
	struct statvfs sv;

	return scratchfd >= 0 && fstatvfs(scratchfd, &sv) == 0 &&
	       (sv.f_bavail == 0 || sv.f_favail == 0);
}

/* ---- tripwires ------------------------------------------------------- */

/* Where tripwires may be planted: on the scratch tmpfs or the overlay. */
static const char *const tripwire_tops[] = {
	"/home/agent", "/tmp", "/workspace",
};

/* The writable area a tripwire's path lies strictly under, or NULL. */
const char *mount_tripwire_top(const char *path)
{
	for (size_t i = 0; i < sizeof(tripwire_tops) / sizeof(tripwire_tops[0]); i++) {
		size_t n = strlen(tripwire_tops[i]);

		if (!strncmp(path, tripwire_tops[i], n) && path[n] == '/' && path[n + 1])
			return tripwire_tops[i];
	}
	return NULL;
}

/*
 * One step down from dirfd: never a symlink, never onto another mount (a
 * bind the policy placed below a writable area).
 */
static int open_beneath(int dirfd, const char *name, int flags, mode_t mode)
{
	struct open_how how = {
		.flags = flags | O_CLOEXEC | O_NOFOLLOW,
		.mode = mode,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
			   RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
	};

	return openat2_retry(dirfd, name, &how);
}

static int write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		buf += n;
		len -= n;
	}
	return 0;
}

/* Create path's missing parents (0700) beneath top; return the parent's fd. */
static int plant_parents(const char *path, const char *top, char *rest,
			 const char **name, struct corral_err *err)
{
	char *comp = rest, *slash;
	int dirfd, fd;

	dirfd = open(top, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (dirfd < 0)
		return corral_set_errno(err, errno, "tripwire %s: cannot open %s",
				      path, top);
	while ((slash = strchr(comp, '/'))) {
		*slash = '\0';
		if (mkdirat(dirfd, comp, 0700) == 0) {
			/* exactly 0700, whatever the umask */
			if (fchmodat(dirfd, comp, 0700, 0) < 0) {
				fd = -errno;
				goto fail;
			}
		} else if (errno != EEXIST) {
			fd = -errno;
			goto fail;
		}
		fd = open_beneath(dirfd, comp, O_PATH | O_DIRECTORY, 0);
		if (fd < 0) {
			fd = -errno;
			goto fail;
		}
		close(dirfd);
		dirfd = fd;
		*slash = '/';
		comp = slash + 1;
	}
	*name = comp;
	return dirfd;
fail:
	close(dirfd);
	return corral_set_err(err, fd, "tripwire %s: cannot create %s/%s: %s%s",
			      path, top, rest,
			      strerror(-fd), fd == -EXDEV ? " (another mount is there)" :
			      fd == -ELOOP || fd == -ENOTDIR ?
			      " (a file or a symlink is there: never followed)" : "");
}

static int plant_tripwire(const struct corral_policy *p, const char *path,
			  struct corral_err *err)
{
	char rest[TRIPWIRE_PATH_MAX + 1], decoy[TRIPWIRE_DECOY_MAX];
	const char *top, *name = NULL, *over;
	struct stat st;
	ssize_t len;
	int dirfd, fd, r;

	top = mount_tripwire_top(path);
	if (!top || strlen(path) > TRIPWIRE_PATH_MAX)
		return corral_set_err(err, -EINVAL,
				      "tripwire %.300s: not a file under /home/agent, /tmp or /workspace, or longer than %d bytes",
				      path, TRIPWIRE_PATH_MAX);
	over = tripwire_bind_over(p, path);
	if (over)
		return corral_set_err(err, -EINVAL,
				      "tripwire %s: lies under the bind on %s, a host directory",
				      path, over);
	snprintf(rest, sizeof(rest), "%s", path + strlen(top) + 1);
	dirfd = plant_parents(path, top, rest, &name, err);
	if (dirfd < 0)
		return dirfd;
	fd = open_beneath(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOCTTY, 0600);
	r = fd < 0 ? -errno : 0;
	close(dirfd);
	if (r < 0)
		return corral_set_err(err, r, "tripwire %s: %s%s", path,
				      strerror(-r), r != -EEXIST ? "" :
				      " (a tripwire is planted only where nothing is)");
	len = tripwire_decoy(path, decoy, sizeof(decoy), err);
	r = len < 0 ? corral_wrap_err(err, "tripwire %s", path) : 0;
	if (r == 0 && (r = write_all(fd, decoy, len)) < 0)
		corral_set_errno(err, -r, "tripwire %s: cannot write", path);
	if (r == 0 && (fchmod(fd, 0600) < 0 || fstat(fd, &st) < 0))
		r = corral_set_errno(err, errno, "tripwire %s", path);
	if (r == 0 && st.st_uid != CORRAL_AGENT_UID)
		r = corral_set_err(err, -EPERM, "tripwire %s: owned by uid %u, not %d",
				   path, (unsigned)st.st_uid, CORRAL_AGENT_UID);
	explicit_bzero(decoy, sizeof(decoy));
	close(fd);
	return r;
}

int mount_plant_tripwires(const struct corral_policy *p, struct corral_err *err)
{
	for (size_t i = 0; i < p->abort.ntripwires; i++) {
		int r = plant_tripwire(p, p->abort.tripwires[i], err);

		if (r < 0)
			return r;
	}
	return 0;
}

/*
 * inotify instances and watches are counted per uid at each level of user
 * namespaces, up to the host's: a sandbox's count also against its
 * caller's uid there, whose limit (fs.inotify.max_user_instances, 128 by
 * default) the caller's own processes share: the daemon watching the next
 * sandbox's tripwires, systemd's watches when the caller is root.
 * Unbounded, one sandbox took all 128 and left its caller none.  Our user
 * namespace's own limits (user.max_inotify_*, INT_MAX when it is made)
 * keep each uid inside to a quarter of the host's.
 */
static const struct { const char *host, *ours; } inotify_counts[] = {
	{ "/proc/sys/fs/inotify/max_user_instances", "/proc/sys/user/max_inotify_instances" },
	{ "/proc/sys/fs/inotify/max_user_watches", "/proc/sys/user/max_inotify_watches" },
};
#define INOTIFY_SHARE	4	/* a sandbox's uid: 1/INOTIFY_SHARE of the host's */

/* A number from a sysctl file; -ENOENT where this kernel lacks it. */
static long long read_sysctl(const char *path, struct corral_err *err)
{
	char buf[32], *end;
	long long v;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return errno == ENOENT ? -ENOENT : corral_set_errno(err, errno, "cannot open %s", path);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return corral_set_errno(err, errno, "cannot read %s", path);
	buf[n] = '\0';
	errno = 0;
	v = strtoll(buf, &end, 10);
	if (errno || end == buf || v < 0)
		return corral_set_err(err, -EINVAL, "%s: not a count: '%.20s'", path, buf);
	return v;
}

/* Through the proc just mounted, before /proc/sys is made read-only. */
static int limit_inotify(struct corral_err *err)
{
	for (size_t i = 0; i < sizeof(inotify_counts) / sizeof(inotify_counts[0]); i++) {
		long long host = read_sysctl(inotify_counts[i].host, err);
		char ours[32];
		int r;

		if (host == -ENOENT)
			continue;	/* no inotify in this kernel: nothing to count */
		if (host < 0)
			return (int)host;
		snprintf(ours, sizeof(ours), "%lld\n", host / INOTIFY_SHARE);
		r = proc_write(inotify_counts[i].ours, ours, err);
		if (r < 0)
			return r;
	}
	return 0;
}

/*
 * The host's boot id is the same in every sandbox: two tell that they
 * share a host, and one names it to whoever it reports to.  It read
 * empty; programs that parse it (systemd's tools, journal readers, some
 * telemetry) want a UUID: each sandbox gets a random one of its own, in a
 * file of the root's tmpfs bound over it read-only, then unlinked (the
 * mount keeps it; nothing is left in the sandbox's / to name it).
 */
#define BOOT_ID "/proc/sys/kernel/random/boot_id"
#define BOOT_ID_FILE "/.corral-boot_id"

static int boot_id_own(struct corral_err *err)
{
	unsigned char b[16];
	char text[40];
	int r;

	if (access(BOOT_ID, F_OK) < 0)
		return errno == ENOENT ? 0 :
		       corral_set_errno(err, errno, "cannot look at %s", BOOT_ID);
	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
		return corral_set_errno(err, errno, "cannot make a boot id");
	b[6] = (b[6] & 0x0f) | 0x40;	/* version 4: random */
	b[8] = (b[8] & 0x3f) | 0x80;	/* RFC 4122's variant */
	snprintf(text, sizeof(text), "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
		 "%02x%02x%02x%02x%02x%02x\n", b[0], b[1], b[2], b[3], b[4], b[5],
		 b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
	r = write_text(BOOT_ID_FILE, text, err);
	if (r == 0)
		r = do_mount(BOOT_ID_FILE, BOOT_ID, NULL, MS_BIND, NULL, err);
	if (r == 0)
		r = do_mount(NULL, BOOT_ID, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY |
			     MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL, err);
	if (unlink(BOOT_ID_FILE) < 0 && errno != ENOENT && r == 0)
		r = corral_set_errno(err, errno, "cannot remove %s", BOOT_ID_FILE);
	return r;
}

static int build_proc(bool own_net, struct corral_err *err)
{
	bool null_seen = false;	/* /dev/null known to be there */
	char target[64];
	int r, e;

	r = mkdir_p("/proc", 0555, err);
	if (r == 0)
		r = do_mount("proc", "/proc", "proc",
			     MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL, err);
	if (r == 0)
		r = limit_inotify(err);
	/*
	 * The netns's own bounds, through this proc, not the host's: on this
	 * host the first open of /proc/sys/net/core/optmem_max from a new
	 * netns took 290-410 us through the host's proc, whose net/ entries
	 * every live netns shares by name (their lookups compare against
	 * each), and 17-25 us in a proc just mounted; on every create.  Still
	 * before anything of the sandbox's runs, and before /proc/sys is made
	 * read-only.
	 */
	if (r == 0 && own_net)
		net_bound_uncharged(false);
	/*
	 * What this kernel's /proc lacks is skipped: the bind's ENOENT says so
	 * (its source is its target), one call where an access() first made
	 * two; a mask's ENOENT is the target's only once /dev/null, its
	 * source, is known to be there: a mask made before proves it, else
	 * one access() does (not one a missing file).  Nothing else runs in
	 * this mount namespace yet to remove it between.
	 */
	for (size_t i = 0; r == 0 && i < sizeof(proc_ro) / sizeof(proc_ro[0]); i++) {
		if (mount(proc_ro[i], proc_ro[i], NULL, MS_BIND | MS_REC, NULL) < 0) {
			if (errno != ENOENT)
				r = corral_set_errno(err, errno, "cannot mount %s on %s",
						     proc_ro[i], proc_ro[i]);
			continue;
		}
		r = make_ro(proc_ro[i], true, err);
	}
	for (size_t i = 0; r == 0 && i < sizeof(proc_masked) / sizeof(proc_masked[0]); i++) {
		snprintf(target, sizeof(target), "%s", proc_masked[i]);
		if (mount("/dev/null", target, NULL, MS_BIND, NULL) == 0) {
			null_seen = true;
			continue;
		}
		e = errno;
		if (e == ENOENT && !null_seen) {
			/* without /dev/null every file this kernel has would be
			 * left unmasked */
			if (access("/dev/null", F_OK) < 0)
				r = corral_set_errno(err, errno, "cannot mask %s: "
						     "/dev/null", target);
			null_seen = r == 0;
		}
		if (r == 0 && e != ENOENT)
			r = corral_set_errno(err, e, "cannot mount /dev/null on %s", target);
	}
	for (size_t i = 0; r == 0 && i < sizeof(proc_masked_dirs) /
	     sizeof(proc_masked_dirs[0]); i++)
		r = mask_dir(proc_masked_dirs[i], err);
	if (r == 0)
		r = boot_id_own(err);
	return r;
}

/* Components of an absolute, normalised path: "/" 0, "/a" 1, "/a/b" 2. */
static size_t path_depth(const char *path)
{
	size_t n = 0;

	for (; *path; path++)
		n += *path == '/' && path[1];
	return n;
}

static int build_bind(int oldroot, const struct corral_policy *p,
		      const struct idmap_fds *pre, size_t i, struct corral_err *err)
{
	const struct corral_bind *b = &p->binds[i];
	int tree = pre && i < pre->nbinds ? pre->binds[i] : -1;
	int r = bind_host(oldroot, b->src, b->dst, b->writable ? BIND_USER_RW :
			  BIND_USER_RO, false, tree, b->pinned ? b->fd : -1, err);

	return r < 0 ? corral_wrap_err(err, "--%s %s:%s", b->writable ? "rw" : "ro",
				       b->src, b->dst) : 0;
}

/*
 * A tmpfs the policy asks for (corral_policy_add_tmpfs): not a tmpfs but
 * a fresh directory of the scratch, SCRATCH/tmpfs/N, in its one budget of
 * bytes and files (a tmpfs of its own would be a second pool to fill past
 * the disk limit), bound at dst as a bind is: the mount point made and
 * reached with no symlink followed (open_dst_parent; on an image it is a
 * directory of the upper layer, stage_dirs), what is mounted there checked
 * to be it.  nosuid and nodev whatever was asked.
 */
/* Another of the policy's mounts lies beneath the tmpfs i (not at it). */
static bool tmpfs_has_beneath(const struct corral_policy *p, size_t i)
{
	const char *dst = p->tmpfs[i].dst;

	for (size_t k = 0; k < p->ntmpfs; k++)
		if (k != i && strcmp(p->tmpfs[k].dst, dst) &&
		    policy_path_under(p->tmpfs[k].dst, dst))
			return true;
	for (size_t k = 0; k < p->nbinds; k++)
		if (strcmp(p->binds[k].dst, dst) && policy_path_under(p->binds[k].dst, dst))
			return true;
	return false;
}

static int build_tmpfs(const struct corral_policy *p, size_t i, struct corral_err *err)
{
	const struct corral_tmpfs *t = &p->tmpfs[i];
	/* read-only once the mount points beneath it are made (tmpfs_ro_late) */
	bool late = t->ro && tmpfs_has_beneath(p, i);
	uint64_t set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
		       (t->ro && !late ? MOUNT_ATTR_RDONLY : 0) |
		       (t->noexec ? MOUNT_ATTR_NOEXEC : 0);
	cleanup_close int fd = -1;
	char dir[64];
	int r;

	if (mkdir(SCRATCH "/tmpfs", 0700) < 0 && errno != EEXIST)
		return corral_set_errno(err, errno, "cannot create %s", SCRATCH "/tmpfs");
	snprintf(dir, sizeof(dir), SCRATCH "/tmpfs/%zu", i);
	if (mkdir(dir, 0700) < 0)
		return corral_set_errno(err, errno, "cannot create %s", dir);
	fd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return corral_set_errno(err, errno, "cannot open %s", dir);
	/* the mode asked, not the umask's (init made it a moment ago) */
	if (chmod(dir, t->mode) < 0)
		return corral_set_errno(err, errno, "cannot chmod %s to %04o", dir,
					(unsigned)t->mode);
	r = bind_user(fd, -1, "a tmpfs", t->dst, S_IFDIR, set, err);
	return r < 0 ? corral_wrap_err(err, "the tmpfs on %s", t->dst) : 0;
}

/*
 * A read-only tmpfs with mounts beneath it: made writable, as their mount
 * points had to be made in it, and read-only now, its own mount alone
 * (theirs keep their flags).  Reached as it was bound, no link followed,
 * and checked to be the tmpfs's directory.
 */
static int tmpfs_ro_late(const struct corral_policy *p, size_t i, struct corral_err *err)
{
	const struct corral_tmpfs *t = &p->tmpfs[i];
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_RDONLY };
	cleanup_close int parent = -1, mnt = -1;
	struct stat want, got;
	const char *leaf;
	char dir[64];

	snprintf(dir, sizeof(dir), SCRATCH "/tmpfs/%zu", i);
	if (stat(dir, &want) < 0)
		return corral_set_errno(err, errno, "cannot stat %s", dir);
	parent = open_dst_parent(t->dst, &leaf, err);
	if (parent < 0)
		return corral_wrap_err(err, "the tmpfs on %s", t->dst);
	mnt = open_leaf(parent, leaf, false);
	if (mnt < 0 || fstat(mnt, &got) < 0)
		return corral_set_errno(err, errno, "cannot open %s", t->dst);
	if (got.st_dev != want.st_dev || got.st_ino != want.st_ino)
		return corral_set_err(err, -EXDEV, "%s is no longer the tmpfs bound "
				      "there", t->dst);
	if (syscall(SYS_mount_setattr, mnt, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
		return corral_set_errno(err, errno, "cannot make the tmpfs on %s "
					"read-only", t->dst);
	return 0;
}

/*
 * Shallowest first, in their order among equals: a bind under another is
 * mounted on it, never hidden by it.  In list order, {"ro":
 * ["/data/secret"], "rw": ["/data"]} left /data/secret writable, under
 * the rw bind of /data mounted after it; and which list came first was
 * only the order of the policy file's keys.  At one depth the writable
 * ones first: two binds there overlap only when they are the same path,
 * and a path bound both ways is read-only (srt's denyWrite of an
 * allowWrite path is one), not whichever list or flag came last.
 */
static int build_binds(int oldroot, const struct corral_policy *p,
		       const struct idmap_fds *pre, struct corral_err *err)
{
	size_t *rank, k = 0, next, n = p->ntmpfs + p->nbinds;
	int r = 0;

	if (!n)
		return 0;
	rank = calloc(n, sizeof(*rank));
	if (!rank)
		return corral_set_err(err, -ENOMEM, "out of memory for %zu binds", n);
	/*
	 * a depth is at most a path's length: 2 * depth + 1 cannot overflow;
	 * the tmpfs mounts first (a bind beneath one is mounted in it), as
	 * writable as the writable binds of their depth
	 */
	for (size_t i = 0; i < p->ntmpfs; i++)
		rank[i] = 2 * path_depth(p->tmpfs[i].dst);
	for (size_t i = 0; i < p->nbinds; i++)
		rank[p->ntmpfs + i] = 2 * path_depth(p->binds[i].dst) + !p->binds[i].writable;
	/* each rank there is, from the least: as many rounds as ranks */
	for (bool more = true; r == 0 && more; k = next) {
		more = false;
		next = SIZE_MAX;
		for (size_t i = 0; r == 0 && i < n; i++) {
			if (rank[i] == k) {
				r = i < p->ntmpfs ? build_tmpfs(p, i, err) :
				    build_bind(oldroot, p, pre, i - p->ntmpfs, err);
			} else if (rank[i] > k && rank[i] < next) {
				next = rank[i];
				more = true;
			}
		}
	}
	free(rank);
	for (size_t i = 0; r == 0 && i < p->ntmpfs; i++)
		if (p->tmpfs[i].ro && tmpfs_has_beneath(p, i))
			r = tmpfs_ro_late(p, i, err);
	return r;
}

/* ---- hidden paths (filesystem.hide) ------------------------------------ */

/*
 * srt's denyRead inside a bind: the path keeps its place, its content is
 * gone.  Each is opened without following a symlink on the way (a link
 * there, made by another sandbox sharing the bind, would aim the mask at
 * something else, and leave the file) and masked through that fd: a file
 * gets /dev/null over it (it reads empty, a write goes nowhere), a
 * directory an empty read-only tmpfs.  The agent cannot unlink, rename or
 * link a mount point (EBUSY, EXDEV); the directories above it in a
 * writable bind are made mount points too (hide_pin_parents), so that
 * none is renamed away from the next run's mask.  Another bind showing the same host path is masked
 * there too (hide_aliases).  What would still show the content is
 * refused: a file with another name (a hard link a bind may show, also
 * of a file in a hidden directory), a bind of part of a hidden
 * directory.  A path that is not there is left alone: what the agent
 * makes there is its own (SECURITY.md says what the host makes there
 * later).
 */
static int hide_open(const char *path, int *fdp, struct stat *st, struct corral_err *err)
{
	struct open_how how = {
		.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	int fd = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));

	*fdp = -1;
	/* not there (a file where a directory would be is not there either) */
	if (fd < 0 && (errno == ENOENT || errno == ENOTDIR))
		return 0;
	if (fd < 0 && errno == ELOOP)
		return corral_set_err(err, -ELOOP, "filesystem.hide %s: a symlink on the way "
				      "or at the end: hide the path it names", path);
	if (fd < 0)
		return corral_set_errno(err, errno, "filesystem.hide: cannot open %s", path);
	if (fstat(fd, st) < 0) {
		int e = errno;

		close(fd);
		return corral_set_errno(err, e, "filesystem.hide: cannot stat %s", path);
	}
	if (S_ISLNK(st->st_mode) || (!S_ISDIR(st->st_mode) && st->st_nlink > 1)) {
		close(fd);
		if (S_ISLNK(st->st_mode))
			return corral_set_err(err, -ELOOP, "filesystem.hide %s: a symlink: "
					      "hide the path it names", path);
		return corral_set_err(err, -EMLINK, "filesystem.hide %s: the file has %ju "
				      "names (hard links): another name would show it",
				      path, (uintmax_t)st->st_nlink);
	}
	*fdp = fd;
	return 0;
}

/*
 * A hidden directory's files, each with one name: a hard link elsewhere
 * in a bind would show one past the mask.  Bounded (a walk per start):
 * past HIDE_WALK_MAX entries or HIDE_WALK_DEPTH levels it is refused,
 * not half-judged.
 */
#define HIDE_WALK_MAX 4096
#define HIDE_WALK_DEPTH 16

static int hide_walk(int at, const char *path, unsigned depth, size_t *seen,
		     struct corral_err *err)
{
	int fd = openat(at, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), r = 0;
	struct dirent *de;
	struct stat st;
	DIR *d;

	if (fd < 0)
		return corral_set_errno(err, errno, "filesystem.hide %s: cannot read the directory", path);
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return corral_set_errno(err, ENOMEM, "filesystem.hide %s: cannot read the directory", path);
	}
	while (r == 0 && (errno = 0, de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (++*seen > HIDE_WALK_MAX || depth > HIDE_WALK_DEPTH) {
			r = corral_set_err(err, -E2BIG, "filesystem.hide %s: more than %d entries or "
					   "%d levels: each file's other names cannot be checked; hide less",
					   path, HIDE_WALK_MAX, HIDE_WALK_DEPTH);
		} else if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno != ENOENT)
				r = corral_set_errno(err, errno, "filesystem.hide %s: cannot stat %s",
						     path, de->d_name);
		} else if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) {
			r = corral_set_err(err, -EMLINK, "filesystem.hide %s: %s in it has %ju names "
					   "(hard links): another name would show it", path,
					   de->d_name, (uintmax_t)st.st_nlink);
		} else if (S_ISDIR(st.st_mode)) {
			int sub = openat(fd, de->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (sub < 0 && errno != ENOENT)
				r = corral_set_errno(err, errno, "filesystem.hide %s: cannot open %s",
						     path, de->d_name);
			if (sub >= 0) {
				r = hide_walk(sub, path, depth + 1, seen, err);
				close(sub);
			}
		}
	}
	if (r == 0 && errno)
		r = corral_set_errno(err, errno, "filesystem.hide %s: cannot read the directory", path);
	closedir(d);
	return r;
}

/* A detached mount to lay over a hidden path: /dev/null or an empty tmpfs. */
static int hide_mask(bool dir, const char *path, struct corral_err *err)
{
	struct mount_attr attr = {
		.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC,
	};
	int fs, m;

	if (!dir) {
		m = (int)syscall(SYS_open_tree, AT_FDCWD, "/dev/null",
				 OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
		if (m < 0)
			return corral_set_errno(err, errno, "filesystem.hide %s: cannot clone /dev/null", path);
		if (syscall(SYS_mount_setattr, m, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0) {
			int e = errno;

			close(m);
			return corral_set_errno(err, e, "filesystem.hide %s: cannot make /dev/null read-only", path);
		}
		return m;
	}
	fs = (int)syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC);
	if (fs < 0)
		return corral_set_errno(err, errno, "filesystem.hide %s: cannot open a tmpfs", path);
	if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "mode", "0555", 0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "size", "4k", 0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0 ||
	    (m = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_RDONLY |
			      MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC)) < 0) {
		int e = errno;

		close(fs);
		return corral_set_errno(err, e, "filesystem.hide %s: cannot make an empty tmpfs", path);
	}
	close(fs);
	return m;
}

/*
 * Each directory above a hidden path in a writable bind, up to the bind's
 * root, made a mount point (a recursive bind onto itself), which no one
 * renames (EBUSY): the agent renamed ./conf, and the mask went along with
 * it, but the next run's mask, at ./conf/.env, found nothing there and
 * showed ./conf2/.env.  The workspace needs none: its renames stay in
 * its upper layer (a lower directory is copied, EXDEV).  Through fds,
 * no symlink followed.
 */
static int hide_pin_one(int dir, const char *path, struct corral_err *err)
{
	int t = (int)syscall(SYS_open_tree, dir, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC |
			     AT_RECURSIVE | AT_EMPTY_PATH), r = 0;

	if (t < 0)
		return corral_set_errno(err, errno, "filesystem.hide: cannot pin %s", path);
	if (syscall(SYS_move_mount, t, "", dir, "", MOVE_MOUNT_F_EMPTY_PATH |
		    MOVE_MOUNT_T_EMPTY_PATH) < 0)
		r = corral_set_errno(err, errno, "filesystem.hide: cannot pin %s", path);
	close(t);
	return r;
}

static int hide_pin_parents(const char *path, struct corral_err *err)
{
	struct open_how how = {
		.flags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	char dir[PATH_MAX], *slash;
	struct statx stx;
	struct statvfs sv;
	struct statfs sf;
	int fd, r = 0;

	if ((size_t)snprintf(dir, sizeof(dir), "%s", path) >= sizeof(dir))
		return corral_set_err(err, -ENAMETOOLONG, "filesystem.hide %s: path too long", path);
	while (r == 0 && (slash = strrchr(dir, '/')) && slash != dir) {
		*slash = '\0';
		fd = (int)syscall(SYS_openat2, AT_FDCWD, dir, &how, sizeof(how));
		if (fd < 0)
			return corral_set_errno(err, errno, "filesystem.hide %s: cannot open %s", path, dir);
		if (syscall(SYS_statx, fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &stx) < 0 ||
		    fstatvfs(fd, &sv) < 0 || fstatfs(fd, &sf) < 0) {
			r = corral_set_errno(err, errno, "filesystem.hide %s: cannot stat %s", path, dir);
		} else if ((stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
			   (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT)) {
			close(fd);
			break;	/* the bind's root (or a mount's): it stays */
		} else if (!(stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT)) {
			r = corral_set_err(err, -ENOSYS, "filesystem.hide %s: this kernel does not "
					   "tell a mount's root (statx, Linux 5.8)", path);
		} else if (!(sv.f_flag & ST_RDONLY) && sf.f_type != OVERLAYFS_SUPER_MAGIC) {
			r = hide_pin_one(fd, dir, err);
		}
		close(fd);
	}
	return r;
}

/*
 * Mask path; with want, only where it is that inode (another view of a
 * hidden file, found by identity: a mask there already, or a bind over
 * that place, is not it, and is left as it is).  Its directories in a
 * writable bind pinned first (an fd held from before would name the
 * mount beneath).
 */
static int hide_one(const char *path, const struct stat *want, struct corral_err *err)
{
	struct stat st;
	int fd, m, r = hide_open(path, &fd, &st, err);

	size_t seen = 0;

	if (r < 0 || fd < 0)
		return r;
	if (want && (st.st_dev != want->st_dev || st.st_ino != want->st_ino)) {
		close(fd);
		return 0;
	}
	close(fd);
	r = hide_pin_parents(path, err);
	if (r == 0)
		r = hide_open(path, &fd, &st, err);
	if (r < 0 || fd < 0)
		return r;
	if (S_ISDIR(st.st_mode) && (r = hide_walk(fd, path, 0, &seen, err)) < 0) {
		close(fd);
		return r;
	}
	m = hide_mask(S_ISDIR(st.st_mode), path, err);
	if (m >= 0 && syscall(SYS_move_mount, m, "", fd, "",
			      MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		r = corral_set_errno(err, errno, "filesystem.hide: cannot mask %s", path);
	if (m >= 0)
		close(m);
	close(fd);
	return m < 0 ? m : r;
}

/* The host's directories the sandbox shows: the binds, then the workspace. */
static bool view(const struct corral_policy *p, size_t i, const char **src,
		 const char **dst)
{
	if (i < p->nbinds) {
		*src = p->binds[i].src;
		*dst = p->binds[i].dst;
		return true;
	}
	*src = p->workspace;
	*dst = "/workspace";
	return i == p->nbinds && p->workspace;
}

/* Each view found by identity that the names did not: done. */
static void hide_views_done(struct hide_view *v, size_t n, const char *path)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].path && !strcmp(v[i].path, path)) {
			free(v[i].path);
			v[i].path = NULL;
		}
}

/*
 * The same host path shown at other places (an "ro" of /src at /a and an
 * "rw" of it at /b; the workspace's directory bound again): each of those
 * is masked too, by its path (an overlay's view and a bind's of one file
 * do not share an inode number: the path is what tells); a bind of
 * something inside a hidden directory would show it past the mask, and
 * is refused.  By name here; by identity in hide_paths (a host bind
 * mount, a symlink in a bind's source name the same directory too): the
 * views found here are taken off that list (v).
 */
static int hide_aliases(const struct corral_policy *p, const char *path,
			struct hide_view *v, size_t nv, struct corral_err *err)
{
	char host[PATH_MAX], alias[PATH_MAX];
	const char *src, *dst, *bsrc = NULL, *bdst = NULL;
	int r = 0;

	/* the deepest view holding the path shows it */
	for (size_t i = 0; view(p, i, &src, &dst); i++)
		if (policy_path_under(path, dst) && (!bdst || strlen(dst) > strlen(bdst))) {
			bsrc = src;
			bdst = dst;
		}
	if (!bdst)
		return 0;
	if ((size_t)snprintf(host, sizeof(host), "%s%s", bsrc,
			     path + strlen(bdst)) >= sizeof(host))
		return corral_set_err(err, -ENAMETOOLONG, "filesystem.hide %s: path too long", path);
	for (size_t i = 0; r == 0 && view(p, i, &src, &dst); i++) {
		if (dst == bdst)
			continue;
		if (policy_path_under(src, host) && strcmp(src, host))
			return corral_set_err(err, -EPERM, "filesystem.hide %s: the bind of %s "
					      "at %s shows part of it", path, src, dst);
		if (!policy_path_under(host, src))
			continue;
		if ((size_t)snprintf(alias, sizeof(alias), "%s%s", dst,
				     host + strlen(src)) >= sizeof(alias))
			return corral_set_err(err, -ENAMETOOLONG, "filesystem.hide %s: path too long", path);
		hide_views_done(v, nv, alias);
		r = hide_one(alias, NULL, err);
	}
	return r;
}

/*
 * Mounts the sandbox will not have: the host's old root and the scratch
 * are detached before it runs (the workspace's host directory there is
 * what /workspace shows).
 */
static const char *const hide_unseen[] = { OLDROOT, SCRATCH };

static int hide_path(const struct corral_policy *p, char **roots, const char *path,
		     struct corral_err *err)
{
	const struct hide_where w = {
		.mountinfo = OLDROOT "/proc/self/mountinfo",
		.proc = OLDROOT "/proc",
		.lower = p->workspace ? SCRATCH "/workspace" : NULL,
		.lower_view = "/workspace",
		.unseen = hide_unseen,
		.nunseen = sizeof(hide_unseen) / sizeof(hide_unseen[0]),
		.roots = roots,
		.nroots = roots ? p->nroot_layers : 0,
	};
	struct hide_view *v;
	struct stat want;
	size_t nv;
	int r;

	/* before the mask: it is the object's place that tells its views */
	r = hide_views(&w, path, &v, &nv, &want, err);
	if (r < 0)
		return r;
	hide_views_done(v, nv, path);
	r = hide_one(path, NULL, err);
	/* by name first: its refusals say which bind */
	if (r == 0)
		r = hide_aliases(p, path, v, nv, err);
	for (size_t i = 0; r == 0 && i < nv; i++) {
		if (v[i].path && v[i].part)
			r = corral_set_err(err, -EPERM, "filesystem.hide %s: the mount at %s "
					   "shows part of it (by another name)", path, v[i].path);
		else if (v[i].path)
			r = hide_one(v[i].path, v[i].same_inode ? &want : NULL, err);
	}
	hide_views_free(v, nv);
	return r;
}

static int hide_paths(const struct corral_policy *p, struct corral_err *err)
{
	char **roots = NULL;
	size_t n = 0;
	int r = 0;

	if (!p->nhide)
		return 0;
	/* the root's layers, where the host's root is now */
	if (p->nroot_layers && !(roots = calloc(p->nroot_layers, sizeof(*roots))))
		return corral_set_err(err, -ENOMEM, "out of memory for the root's layers");
	for (; r == 0 && n < p->nroot_layers; n++)
		if (asprintf(&roots[n], OLDROOT "%s", p->root_layers[n]) < 0) {
			roots[n] = NULL;
			r = corral_set_err(err, -ENOMEM, "out of memory for the root's layers");
		}
	/*
	 * The path first, so that a refusal names it; its other views after
	 * (a mount sits on one mount's dentry: the mask at /a leaves /b's
	 * view of the same directory as it was).
	 */
	for (size_t i = 0; r == 0 && i < p->nhide; i++)
		r = hide_path(p, roots, p->hide[i], err);
	for (size_t i = 0; i < n; i++)
		free(roots[i]);
	free(roots);
	return r;
}

/* ---- an image's root ---------------------------------------------------- */

/*
 * An image's layers (or one --rootfs tree) are stacked by the supervisor,
 * in the sandbox's mount namespace, before the sandbox's init does
 * anything there: the image store is its caller's own (mode 0700), and
 * the sandbox's user (for root a range id) cannot walk into it.  A child
 * of the supervisor joins that namespace (unprivileged, its user
 * namespace first, whose owner holds every capability there), makes it
 * private, mounts at STAGE the sandbox's one scratch tmpfs (disk_bytes,
 * the files budget: build_scratch takes it over rather than mounting its
 * own) and over it the overlay: the layers read-only, the upper on the
 * tmpfs.  The upper gets, owned by the sandbox's user, the directories
 * corral mounts on and the working directory, so that init can build the
 * rest of the view as usual; with root_writable it also takes what the
 * sandbox writes, in the same budget as /tmp, $HOME and the workspace.
 * Costs a fork and three mounts on the caller's thread.
 */

static int stage_dir(const char *rel, uid_t uid, gid_t gid, struct corral_err *err)
{
	char path[4200];

	snprintf(path, sizeof(path), STAGE_UPPER "/%s", rel);
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return corral_set_err(err, -errno, "mkdir %s: %s", path, strerror(errno));
	if (chown(path, uid, gid) < 0)
		return corral_set_err(err, -errno, "chown %s: %s", path, strerror(errno));
	return 0;
}

/*
 * The absolute path abs (normalised: no "." or ".."), one directory at a
 * time; its last component too unless parents_only.
 */
static int stage_path(const char *abs, bool parents_only, uid_t uid, gid_t gid,
		      struct corral_err *err)
{
	char wd[4096];
	int r = 0;

	if (!abs || snprintf(wd, sizeof(wd), "%s", abs + 1) >= (int)sizeof(wd))
		return 0;
	if (parents_only) {
		char *slash = strrchr(wd, '/');

		if (!slash)
			return 0;
		*slash = '\0';
	}
	for (char *s = wd; r == 0 && *wd; s++) {
		if (*s != '/' && *s)
			continue;
		char c = *s;

		*s = '\0';
		r = stage_dir(wd, uid, gid, err);
		*s = c;
		if (!c)
			break;
	}
	return r;
}

/*
 * Every directory init makes or mounts on in the image's root is made here
 * first, in the upper layer: a directory there hides whatever the layers
 * have at that name, so that no link of the image's (say "opt" ->
 * "/oldroot/home/me") leads init's mkdir or mount onto the host's root,
 * which is still at /oldroot while init builds the view.
 */
static int stage_dirs(const struct corral_policy *p, uid_t uid, gid_t gid,
		      struct corral_err *err)
{
	static const char *const dirs[] = {
		"", "oldroot", ".scratch", "tmp", "home", "home/agent", "workspace",
		"dev", "proc", "etc",
	};
	int r = 0;

	for (size_t i = 0; r == 0 && i < sizeof(dirs) / sizeof(dirs[0]); i++)
		r = stage_dir(dirs[i], uid, gid, err);
	if (r == 0)
		r = stage_path(p->workdir, false, uid, gid, err);
	/* the image user's home (image_user.c); a bind's parents (it is a file or a dir) */
	if (r == 0)
		r = stage_path(p->user_home, false, uid, gid, err);
	for (size_t i = 0; r == 0 && i < p->nbinds; i++)
		r = stage_path(p->binds[i].dst, true, uid, gid, err);
	/* a tmpfs's mount point too: a directory, whatever the image has there */
	for (size_t i = 0; r == 0 && i < p->ntmpfs; i++)
		r = stage_path(p->tmpfs[i].dst, false, uid, gid, err);
	return r;
}

/*
 * The root the caller judged (corral_policy_pin_root), as a pinned bind's
 * source: overlayfs takes no lower layer from another mount namespace's
 * mount (EINVAL), so the path is opened again here, with no symlink
 * followed, and taken only if it is that same directory.
 */
static int open_pinned_root(const char *path, int pin, struct corral_err *err)
{
	int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC), fd;

	if (root < 0)
		return corral_set_errno(err, errno, "open /");
	fd = open_pinned(root, path, pin, err);
	close(root);
	return fd;
}

/*
 * The first mount point strictly beneath the directory open at fd, as
 * this process's mount table names it, into at: 1; 0 none, or no table.
 * Read by name only, nothing beneath stat'ed (a FUSE daemon's, say).
 */
static int layer_mount_beneath(int fd, char *at, size_t len)
{
	char self[64], path[PATH_MAX], *line = NULL;
	size_t cap = 0, n;
	ssize_t got;
	int r = 0;
	FILE *f;

	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	got = readlink(self, path, sizeof(path) - 1);
	if (got <= 0 || path[0] != '/')
		return 0;
	path[got] = '\0';
	n = strcmp(path, "/") ? (size_t)got : 0;
	f = mountinfo_open(AT_FDCWD, "/proc/self/mountinfo");
	if (!f)
		return 0;
	while (!r && getline(&line, &cap, f) > 0) {
		char *save = NULL, *mp = strtok_r(line, " ", &save);

		/* id, parent, dev, root, then the mount point */
		for (int k = 0; mp && k < 4; k++)
			mp = strtok_r(NULL, " ", &save);
		if (!mp)
			continue;
		mountinfo_unescape(mp);
		if (!strncmp(mp, path, n) && mp[n] == '/' && mp[n + 1]) {
			snprintf(at, len, "%s", mp);
			r = 1;
		}
	}
	free(line);
	fclose(f);
	return r;
}

/*
 * The overlay refused its layers (EINVAL): a mount beneath one is the
 * likely why, said with its path.  The host's mounts are locked in the
 * sandbox's namespace (copied into a user namespace of its own), and the
 * kernel lends no lower layer that would show what such a mount covers
 * ("overlayfs: failed to clone lowerpath"); runc, root in the host's
 * namespaces, binds the tree with its mounts instead.  True when err
 * says so.
 */
static bool layers_refused(const struct corral_policy *p, const int *fds, size_t n,
			   struct corral_err *err)
{
	char at[PATH_MAX];

	for (size_t i = 0; i < n; i++)
		if (layer_mount_beneath(fds[i], at, sizeof(at)) == 1) {
			corral_set_err(err, -EINVAL, "the root's layers: %s has a mount "
				       "beneath it, at %s, which a sandbox's overlay "
				       "cannot take as a lower layer (the kernel keeps "
				       "the host's mounts over what they cover there); "
				       "unmount it, or give the tree without it",
				       p->root_layers[i], at);
			return true;
		}
	return false;
}

static int stack_layers(const struct corral_policy *p, uid_t uid, gid_t gid,
			struct corral_err *err)
{
	char opts[8192], size[64];
	int fds[p->nroot_layers ? p->nroot_layers : 1];
	size_t len;
	int r, fd;

	snprintf(size, sizeof(size), "mode=0755,size=%llu,nr_inodes=%llu",
		 (unsigned long long)p->disk_bytes,
		 (unsigned long long)mount_scratch_inodes(p->disk_bytes));
	r = do_mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL, err);
	/*
	 * The layers by fd, opened in this namespace before the tmpfs covers
	 * STAGE (a layer may live below it); overlay takes /proc/self/fd/N.
	 */
	len = snprintf(opts, sizeof(opts), "userxattr,upperdir=" STAGE_UPPER
		       ",workdir=" STAGE_WORK ",lowerdir=");
	for (size_t i = p->nroot_layers; r == 0 && i-- > 0 && len < sizeof(opts);) {
		if (p->root_pinned)
			fd = open_pinned_root(p->root_layers[i], p->root_fd, err);
		else if ((fd = open(p->root_layers[i], O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
			return corral_set_err(err, -errno, "root layer %s: %s", p->root_layers[i],
					      strerror(errno));
		if (fd < 0)
			return fd;
		fds[i] = fd;
		/* lowerdir lists the top layer first */
		len += snprintf(opts + len, sizeof(opts) - len, "%s/proc/self/fd/%d",
				i + 1 < p->nroot_layers ? ":" : "", fd);
	}
	if (len >= sizeof(opts))
		return corral_set_err(err, -E2BIG, "%zu layers do not fit one overlay's options",
				      p->nroot_layers);
	if (r == 0)
		r = do_mount("tmpfs", STAGE, "tmpfs", MS_NOSUID | MS_NODEV, size, err);
	/* init, the sandbox's user, makes its directories in it (build_scratch) */
	if (r == 0 && chown(STAGE, uid, gid) < 0)
		r = corral_set_err(err, -errno, "chown %s: %s", STAGE, strerror(errno));
	if (r == 0)
		r = mkdir_p(STAGE_WORK, 0700, err);
	if (r == 0)
		r = mkdir_p(STAGE_ROOT, 0755, err);
	if (r == 0)
		r = mkdir_p(STAGE_UPPER, 0755, err);
	if (r == 0)
		r = stage_dirs(p, uid, gid, err);
	if (r < 0)
		return r;
	/* the helper exits after this: its fds go with it */
	r = do_mount("overlay", STAGE_ROOT, "overlay", MS_NOSUID | MS_NODEV, opts, err);
	if (r == -EINVAL && layers_refused(p, fds, p->nroot_layers, err))
		return r;
	return r < 0 ? corral_wrap_err(err, "the root's layers") : 0;
}

static __attribute__((noreturn)) void stack_helper(pid_t pid, const struct corral_policy *p,
						   uid_t uid, gid_t gid, int wr)
{
	struct corral_err err = { 0 };
	char path[64];
	int userfd, mntfd;

	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
	userfd = open(path, O_RDONLY | O_CLOEXEC);
	snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)pid);
	mntfd = open(path, O_RDONLY | O_CLOEXEC);
	if (userfd < 0 || mntfd < 0)
		corral_set_err(&err, -errno, "cannot open the sandbox's namespaces: %s",
			       strerror(errno));
	else if (geteuid() != 0 && setns(userfd, CLONE_NEWUSER) < 0)
		corral_set_err(&err, -errno, "cannot join the sandbox's user namespace: %s",
			       strerror(errno));
	else if (setns(mntfd, CLONE_NEWNS) < 0)
		corral_set_err(&err, -errno, "cannot join the sandbox's mount namespace: %s",
			       strerror(errno));
	else
		stack_layers(p, geteuid() != 0 ? CORRAL_AGENT_UID : uid,
			     geteuid() != 0 ? CORRAL_AGENT_GID : gid, &err);
	if (write(wr, &err, sizeof(err)) != (ssize_t)sizeof(err))
		_exit(1);
	_exit(0);
}

int mount_stack_root(pid_t pid, const struct corral_policy *p, uid_t host_uid,
		     gid_t host_gid, struct corral_err *err)
{
	struct corral_err got = { 0 };
	int pipefd[2], status;
	ssize_t n;
	pid_t helper;

	if (!p->nroot_layers)
		return 0;
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return corral_set_err(err, -errno, "pipe: %s", strerror(errno));
	helper = fork();
	if (helper < 0) {
		close(pipefd[0]);
		close(pipefd[1]);
		return corral_set_err(err, -errno, "fork: %s", strerror(errno));
	}
	if (helper == 0) {
		corral_forget(NULL);
		close(pipefd[0]);
		stack_helper(pid, p, host_uid, host_gid, pipefd[1]);
	}
	close(pipefd[1]);
	do
		n = read(pipefd[0], &got, sizeof(got));
	while (n < 0 && errno == EINTR);
	close(pipefd[0]);
	while (waitpid(helper, &status, 0) < 0 && errno == EINTR)
		;
	if (n != (ssize_t)sizeof(got))
		return corral_set_err(err, -EIO, "the root's layers: the helper ended without a word");
	if (got.code < 0) {
		*err = got;
		return got.code;
	}
	return 0;
}

/* init's side: the stacked root is there; pivot into it. */
static int enter_stacked_root(struct corral_err *err)
{
	int r = do_mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL, err);

	if (r < 0)
		return r;
	if (chdir(STAGE_ROOT) < 0)
		return corral_set_err(err, -errno, "chdir %s: %s", STAGE_ROOT, strerror(errno));
	if (syscall(SYS_pivot_root, ".", "oldroot") < 0)
		return corral_set_err(err, -errno, "pivot_root: %s", strerror(errno));
	if (chdir("/") < 0)
		return corral_set_err(err, -errno, "chdir /: %s", strerror(errno));
	return 0;
}

static int enter_new_root(struct corral_err *err)
{
	int r;

	/* Nothing we mount may propagate back to the host. */
	r = do_mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL, err);
	if (r == 0)
		r = do_mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV,
			     "mode=0755,size=4m", err);
	if (r < 0)
		return r;
	if (chdir("/tmp") < 0 || mkdir("oldroot", 0755) < 0)
		return corral_set_errno(err, errno, "cannot prepare the new root");
	if (syscall(SYS_pivot_root, ".", "oldroot") < 0)
		return corral_set_errno(err, errno, "pivot_root");
	if (chdir("/") < 0)
		return corral_set_errno(err, errno, "chdir /");
	return 0;
}

/*
 * Every umount waits for an expedited RCU grace period (namespace_unlock:
 * an IPI to every CPU of the host), and a move waits for none.  So the
 * scratch is moved under the old root, onto the host's /tmp (where the new
 * root was made: it is there), and goes with it: one umount for both.
 * Only onto that directory itself, never through a symlink (a /tmp that
 * is one would lead into the new root, where the sandbox would see the
 * scratch); where it is one, the scratch is detached on its own.
 */
static int detach_scratch(struct corral_err *err)
{
	int fd = open(OLDROOT "/tmp", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int r = fd < 0 ? -1 : (int)syscall(SYS_move_mount, AT_FDCWD, SCRATCH, fd, "",
					   MOVE_MOUNT_T_EMPTY_PATH);

	if (fd >= 0)
		close(fd);
	if (r < 0 && umount2(SCRATCH, MNT_DETACH) < 0)
		return corral_set_errno(err, errno, "cannot detach %s", SCRATCH);
	if (rmdir(SCRATCH) < 0)
		return corral_set_errno(err, errno, "cannot remove %s", SCRATCH);
	return 0;
}

static int leave_old_root(const struct corral_policy *p, struct corral_err *err)
{
	int r = detach_scratch(err);

	if (r < 0)
		return r;
	if (umount2(OLDROOT, MNT_DETACH) < 0)
		return corral_set_errno(err, errno, "cannot detach the host root");
	if (rmdir(OLDROOT) < 0)
		return corral_set_errno(err, errno, "cannot remove %s", OLDROOT);
	if (sys_mount_setattr("/dev", 0, MOUNT_ATTR_RDONLY, 0) < 0)
		return corral_set_errno(err, errno, "cannot make /dev read-only");
	/* root_writable: copy-on-write over an image's root, in its budget */
	if (sys_mount_setattr("/", 0, (p->root_writable && p->nroot_layers ? 0 : MOUNT_ATTR_RDONLY) |
			      MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0) < 0)
		return corral_set_errno(err, errno, "cannot make / read-only");
	return 0;
}

int mount_build(const struct corral_policy *p, const struct idmap_fds *pre,
		const char *tls_ca_pem, int *upperfd, bool own_net,
		struct corral_err *err)
{
	int oldroot, r;

	r = p->nroot_layers ? enter_stacked_root(err) : enter_new_root(err);
	if (r < 0)
		return r;
	oldroot = open(OLDROOT, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (oldroot < 0)
		return corral_set_errno(err, errno, "cannot open %s", OLDROOT);

	for (size_t i = 0; r == 0 && !p->nroot_layers && i < sizeof(host_dirs) / sizeof(host_dirs[0]); i++)
		r = host_dir(oldroot, host_dirs[i], err);
	if (r == 0)
		r = build_etc(oldroot, p, tls_ca_pem, err);
	if (r == 0)
		r = build_dev(oldroot, err);
	if (r == 0)
		r = build_scratch(oldroot, p, pre, upperfd, err);
	if (r == 0)
		r = build_binds(oldroot, p, pre, err);
	/* decoys, in the sandbox's own files, before anything untrusted runs */
	if (r == 0)
		r = mount_plant_tripwires(p, err);
	/* after the binds and the decoys: nothing is mounted over a mask */
	if (r == 0)
		r = hide_paths(p, err);
	/* proc must be mounted while the host's proc is still visible */
	if (r == 0)
		r = build_proc(own_net, err);
	close(oldroot);
	if (r == 0)
		r = leave_old_root(p, err);
	return r;
}
