/*
 * newapi.c - the kernel's newer interfaces (Linux 6.x), tried from inside.
 *
 *   newapi [PROBE...]     (none: every probe)
 *
 * Each probe tries to reach past the sandbox through an interface a deny
 * list written earlier might not know: another mount namespace by id
 * (listmount, statmount, nsfs iteration), a parent namespace from a pidfd,
 * the page cache of a host file (cachestat), /dev/userfaultfd, the i386
 * ABI by int 0x80 is attack.c's.  One line a probe: "NAME held: ..." when
 * the kernel or the sandbox stopped it, "NAME LEAK: ..." when it did not;
 * exit 1 when any leaked.  Debian 12's headers stop at Linux 6.1: the
 * structures and numbers are the kernel's ABI, written out here.  Static,
 * so it needs nothing from the sandbox's view of the host.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define NR_CACHESTAT		451
#define NR_STATMOUNT		457
#define NR_LISTMOUNT		458
#define NR_PIDFD_OPEN		434
#define NR_LANDLOCK_CREATE	444
#define NR_LANDLOCK_RESTRICT	446

#define LL_READ_FILE		(1ull << 2)
#define LL_LOG_NEW_EXEC_ON	(1u << 1)	/* ABI 7 */

#define LSMT_ROOT		0xffffffffffffffffull
#define STATMOUNT_MNT_BASIC	0x2u
#define STATMOUNT_MNT_NS_ID	0x80u	/* 6.11 */

#define NSIO			0xb7
#define NS_GET_USERNS		_IO(NSIO, 0x1)
#define NS_GET_PARENT		_IO(NSIO, 0x2)
#define NS_GET_MNTNS_ID		_IOR(NSIO, 0x5, uint64_t)

/* include/uapi/linux/nsfs.h (6.12) */
struct mnt_ns_info {
	uint32_t size;
	uint32_t nr_mounts;
	uint64_t mnt_ns_id;
};
#define NS_MNT_GET_NEXT		_IOR(NSIO, 11, struct mnt_ns_info)
#define NS_MNT_GET_PREV		_IOR(NSIO, 12, struct mnt_ns_info)

#define PIDFS_IOCTL_MAGIC	0xFF
#define PIDFD_GET_MNT_NAMESPACE	_IO(PIDFS_IOCTL_MAGIC, 3)
#define PIDFD_GET_PID_NAMESPACE	_IO(PIDFS_IOCTL_MAGIC, 5)
#define PIDFD_GET_USER_NAMESPACE _IO(PIDFS_IOCTL_MAGIC, 9)

/* include/uapi/linux/mount.h, MNT_ID_REQ_SIZE_VER1 */
struct mnt_id_req {
	uint32_t size;
	uint32_t spare;
	uint64_t mnt_id;
	uint64_t param;
	uint64_t mnt_ns_id;
};

/* the head of struct statmount: what MNT_BASIC fills */
struct statmount_head {
	uint32_t size, mnt_opts;
	uint64_t mask;
	uint32_t sb_dev_major, sb_dev_minor;
	uint64_t sb_magic;
	uint32_t sb_flags, fs_type;
	uint64_t mnt_id, mnt_parent_id;
	uint32_t mnt_id_old, mnt_parent_id_old;
	uint64_t mnt_attr, mnt_propagation, mnt_peer_group, mnt_master;
	uint64_t propagate_from;
	uint32_t mnt_root, mnt_point;
	uint64_t mnt_ns_id;
	uint64_t spare[64];
};

/* include/uapi/linux/mman.h (6.5) */
struct cachestat_range { uint64_t off, len; };
struct cachestat {
	uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

static int leaks;

static void held(const char *name, const char *fmt, const char *detail)
{
	printf("%s held: %s%s\n", name, fmt, detail ? detail : "");
}

static void leak(const char *name, const char *what)
{
	printf("%s LEAK: %s\n", name, what);
	leaks++;
}

static uint64_t own_mntns_id(void)
{
	uint64_t id = 0;
	int fd = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		if (ioctl(fd, NS_GET_MNTNS_ID, &id) < 0)
			id = 0;
		close(fd);
	}
	return id;
}

/*
 * listmount and statmount name a mount namespace by its 64-bit id (6.11),
 * ids that count up from the host's first: the ids below and a little
 * above our own are every namespace made before ours (the host's, other
 * sandboxes').  The kernel answers only for our own namespace or one whose
 * owning user namespace we hold CAP_SYS_ADMIN in.
 */
static void p_listmount(void)
{
	uint64_t own = own_mntns_id(), ids[64], first = 1, last;
	int other = 0, reached = 0, errs[3] = { 0 };
	char why[160];

	if (!own) {
		held("listmount", "no NS_GET_MNTNS_ID here (kernel < 6.11)", NULL);
		return;
	}
	last = own + 64;
	if (own > 4096)
		first = own - 4096;	/* ids are sparse only after long uptimes */
	for (uint64_t ns = first; ns <= last; ns++) {
		struct mnt_id_req req = { .size = sizeof(req), .mnt_id = LSMT_ROOT,
					  .mnt_ns_id = ns };
		long n;

		if (ns == own)
			continue;
		other++;
		n = syscall(NR_LISTMOUNT, &req, ids, 64, 0);
		if (n >= 0) {
			reached++;
			continue;
		}
		errs[errno == ENOENT ? 0 : errno == EPERM ? 1 : 2]++;
	}
	snprintf(why, sizeof(why), "own namespace %llu; %d others tried: %d ENOENT, "
		 "%d EPERM, %d other errors, %d listed", (unsigned long long)own,
		 other, errs[0], errs[1], errs[2], reached);
	if (reached)
		leak("listmount", why);
	else
		held("listmount", why, NULL);
}

/* statmount of a mount of another namespace, by namespace id */
static void p_statmount(void)
{
	uint64_t own = own_mntns_id(), first = 1;
	struct statmount_head sm;
	int reached = 0;
	char why[160];

	if (!own) {
		held("statmount", "no NS_GET_MNTNS_ID here (kernel < 6.11)", NULL);
		return;
	}
	if (own > 4096)
		first = own - 4096;
	for (uint64_t ns = first; ns <= own + 64; ns++) {
		/* the first mounts of a namespace: ids from 0x100000001 */
		for (uint64_t m = 0x100000001ull; m < 0x100000001ull + 4; m++) {
			struct mnt_id_req req = { .size = sizeof(req), .mnt_id = m,
						  .param = STATMOUNT_MNT_BASIC,
						  .mnt_ns_id = ns };
			if (ns == own)
				continue;
			if (syscall(NR_STATMOUNT, &req, &sm, sizeof(sm), 0) == 0)
				reached++;
		}
	}
	snprintf(why, sizeof(why), "%d mounts of other namespaces described", reached);
	if (reached)
		leak("statmount", why);
	else
		held("statmount", why, NULL);
}

/*
 * The mount namespaces made before and after ours, walked from ours
 * (NS_MNT_GET_PREV/NEXT, 6.12): each answer would be an fd of another
 * namespace (the host's, another sandbox's), for listmount to read.
 */
static void p_mntns_walk(void)
{
	static const struct { unsigned long req; const char *name; } dirs[] = {
		{ NS_MNT_GET_PREV, "NS_MNT_GET_PREV" },
		{ NS_MNT_GET_NEXT, "NS_MNT_GET_NEXT" },
	};
	int fd = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
	char why[200];
	size_t w = 0;

	if (fd < 0) {
		held("mntns_walk", "/proc/self/ns/mnt: ", strerror(errno));
		return;
	}
	why[0] = 0;
	for (size_t i = 0; i < 2; i++) {
		struct mnt_ns_info info = { .size = sizeof(info) };
		int other = ioctl(fd, dirs[i].req, &info);

		if (other >= 0) {
			snprintf(why, sizeof(why), "%s gave namespace %llu (%u mounts)",
				 dirs[i].name, (unsigned long long)info.mnt_ns_id,
				 info.nr_mounts);
			leak("mntns_walk", why);
			close(other);
			close(fd);
			return;
		}
		w += snprintf(why + w, sizeof(why) - w, "%s%s: %s", i ? ", " : "",
			      dirs[i].name, strerror(errno));
	}
	held("mntns_walk", why, NULL);
	close(fd);
}

/*
 * From a pidfd of our own process: its namespaces (PIDFD_GET_*_NAMESPACE, 6.11),
 * then their parents (NS_GET_PARENT, NS_GET_USERNS of the user namespace),
 * which must stop at the sandbox's own.
 */
static void p_pidfd_ns(void)
{
	int pidfd = (int)syscall(NR_PIDFD_OPEN, getpid(), 0), ns, up;
	char why[160];

	if (pidfd < 0) {
		held("pidfd_ns", "pidfd_open: ", strerror(errno));
		return;
	}
	ns = ioctl(pidfd, PIDFD_GET_USER_NAMESPACE, 0);
	if (ns < 0) {
		held("pidfd_ns", "PIDFD_GET_USER_NAMESPACE: ", strerror(errno));
		close(pidfd);
		return;
	}
	up = ioctl(ns, NS_GET_PARENT, 0);
	if (up >= 0) {
		leak("pidfd_ns", "NS_GET_PARENT of the sandbox's user namespace gave "
		     "its parent (the host's side)");
		close(up);
	} else {
		snprintf(why, sizeof(why), "NS_GET_PARENT of the user namespace: %s",
			 strerror(errno));
		held("pidfd_ns", why, NULL);
	}
	close(ns);
	ns = ioctl(pidfd, PIDFD_GET_PID_NAMESPACE, 0);
	if (ns >= 0) {
		up = ioctl(ns, NS_GET_PARENT, 0);
		if (up >= 0) {
			leak("pidfd_pidns", "NS_GET_PARENT of the pid namespace gave its parent");
			close(up);
		} else {
			held("pidfd_pidns", "NS_GET_PARENT of the pid namespace: ",
			     strerror(errno));
		}
		close(ns);
	}
	close(pidfd);
}

/*
 * cachestat on a file of the host's read-only view: how much of it is in
 * the page cache, changing as the host's processes read it, is a side
 * channel mincore() closed in 5.0 for files the caller may not write; the
 * kernel checks the same here since 6.14.
 */
static void p_cachestat(const char *path)
{
	struct cachestat_range range = { 0, 0 };
	struct cachestat cs;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	char why[200];

	if (fd < 0) {
		snprintf(why, sizeof(why), "open %s: %s", path, strerror(errno));
		held("cachestat", why, NULL);
		return;
	}
	if (syscall(NR_CACHESTAT, fd, &range, &cs, 0) == 0) {
		snprintf(why, sizeof(why), "%s: %llu pages of it cached, readable",
			 path, (unsigned long long)cs.nr_cache);
		leak("cachestat", why);
	} else {
		snprintf(why, sizeof(why), "%s: %s", path, strerror(errno));
		held("cachestat", why, NULL);
	}
	close(fd);
}

/* mincore of a read-only mapping of the same file: its pages as ours */
static void p_mincore(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	unsigned char vec[64];
	char why[200];
	size_t len = 64 * 4096;
	int in = 0;
	void *p;

	if (fd < 0) {
		snprintf(why, sizeof(why), "open %s: %s", path, strerror(errno));
		held("mincore", why, NULL);
		return;
	}
	p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		held("mincore", "mmap: ", strerror(errno));
		return;
	}
	if (mincore(p, len, vec) < 0) {
		held("mincore", "mincore: ", strerror(errno));
	} else {
		for (int i = 0; i < 64; i++)
			in += vec[i] & 1;
		/*
		 * For a file the caller may not write the kernel reports every
		 * page resident, whatever the cache holds: no answer.
		 */
		snprintf(why, sizeof(why), "%d of 64 untouched pages reported resident", in);
		if (in < 64)
			leak("mincore", why);
		else
			held("mincore", why, NULL);
	}
	munmap(p, len);
}

/* /dev/userfaultfd (6.1): userfaultfd without the syscall */
static void p_dev_userfaultfd(void)
{
	int fd = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);

	if (fd >= 0) {
		leak("dev_userfaultfd", "/dev/userfaultfd opened");
		close(fd);
	} else {
		held("dev_userfaultfd", "/dev/userfaultfd: ", strerror(errno));
	}
}

/*
 * A Landlock domain of the sandbox's own, nested in corral's: it may only
 * narrow (reads denied here), and its denials, which it asks the kernel to
 * log (LOG_NEW_EXEC_ON; its own exec's are logged by default), must not
 * become records in the host's audit log: corral's domain turns its
 * subdomains' logging off (LOG_SUBDOMAINS_OFF, ABI 7).  1000 denials: the
 * host's side counts the records (seccomp.sh, where audit is on).
 */
static void p_landlock_nested(void)
{
	struct { uint64_t fs; } attr = { LL_READ_FILE };
	int status, denied = 0, rs, st;
	pid_t pid = fork();

	if (pid == 0) {
		rs = (int)syscall(NR_LANDLOCK_CREATE, &attr, sizeof(attr), 0);
		if (rs < 0)
			_exit(200);
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
			_exit(201);
		st = (int)syscall(NR_LANDLOCK_RESTRICT, rs, LL_LOG_NEW_EXEC_ON);
		if (st < 0 && errno == EINVAL)	/* ABI < 7: no flags */
			st = (int)syscall(NR_LANDLOCK_RESTRICT, rs, 0);
		if (st < 0)
			_exit(202);
		for (int i = 0; i < 1000; i++) {
			int fd = open("/usr/bin/env", O_RDONLY | O_CLOEXEC);

			if (fd >= 0)
				close(fd);
			else
				denied += errno == EACCES;
		}
		_exit(denied == 1000 ? 0 : 1);
	}
	if (pid < 0 || waitpid(pid, &status, 0) < 0) {
		held("landlock_nested", "fork: ", strerror(errno));
		return;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		held("landlock_nested", "a nested domain narrowed: 1000 reads denied", NULL);
	else if (WIFEXITED(status) && WEXITSTATUS(status) >= 200)
		held("landlock_nested", "no nested domain could be made here", NULL);
	else
		leak("landlock_nested", "a nested domain did not deny reads");
}

struct probe {
	const char *name;
	void (*run)(void);
};

static void p_cachestat_host(void) { p_cachestat("/usr/bin/env"); }
static void p_mincore_host(void) { p_mincore("/usr/bin/env"); }

static const struct probe probes[] = {
	{ "listmount", p_listmount },
	{ "statmount", p_statmount },
	{ "mntns_walk", p_mntns_walk },
	{ "pidfd_ns", p_pidfd_ns },
	{ "cachestat", p_cachestat_host },
	{ "mincore", p_mincore_host },
	{ "dev_userfaultfd", p_dev_userfaultfd },
	{ "landlock_nested", p_landlock_nested },
};

int main(int argc, char **argv)
{
	size_t n = sizeof(probes) / sizeof(probes[0]);

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (size_t i = 0; i < n; i++) {
		bool want = argc < 2;

		for (int a = 1; a < argc; a++)
			want = want || !strcmp(argv[a], probes[i].name);
		if (want)
			probes[i].run();
	}
	return leaks ? 1 : 0;
}
