/*
 * unit_mount.c - what of the sandbox's filesystem view is logic, not
 * mounts: its tables (the writable paths Landlock is given, where a
 * tripwire may go), the scratch tmpfs's inode limit, and the opening of
 * the scratch area beneath a sandbox's "/".  The mounts themselves need
 * namespaces: tests/integration.sh covers them.
 */
#include "internal.h"
#include "sandbox.h"
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static bool is_writable_path(const char *path)
{
	for (size_t i = 0; mount_writable_paths[i]; i++)
		if (!strcmp(mount_writable_paths[i], path))
			return true;
	return false;
}

TEST(writable_paths_table)
{
	size_t i;

	for (i = 0; mount_writable_paths[i]; i++) {
		CHECK(mount_writable_paths[i][0] == '/');
		CHECK(!strstr(mount_writable_paths[i], ".."));
	}
	CHECK(i == 4);	/* NULL-terminated, and nothing slipped in */
	CHECK(is_writable_path("/workspace"));
	CHECK(is_writable_path("/tmp"));
	CHECK(is_writable_path("/home/agent"));
	CHECK(is_writable_path("/dev"));
	CHECK(!is_writable_path("/"));
	CHECK(!is_writable_path("/etc"));
}

TEST(tripwire_tops)
{
	static const char *const inside[] = {
		"/tmp/x", "/home/agent/.aws/credentials", "/workspace/a/b/c",
	};
	static const char *const outside[] = {
		"/tmp", "/tmp/", "/tmpx/y", "/etc/passwd", "/home/agentx/y",
		"/home/agent", "/workspace", "/", "", "tmp/x", "/dev/x",
	};

	for (size_t i = 0; i < sizeof(inside) / sizeof(inside[0]); i++) {
		const char *top = mount_tripwire_top(inside[i]);

		CHECK(top != NULL);
		/* planted only where the sandbox may write anyway */
		CHECK(top && is_writable_path(top));
		CHECK(top && !strncmp(inside[i], top, strlen(top)));
	}
	for (size_t i = 0; i < sizeof(outside) / sizeof(outside[0]); i++)
		CHECK(mount_tripwire_top(outside[i]) == NULL);
}

TEST(scratch_inodes)
{
	/* one inode per 4 KiB of disk, with a floor of 4,096 */
	CHECK(mount_scratch_inodes(0) == 4096);
	CHECK(mount_scratch_inodes(1 << 20) == 4096);
	CHECK(mount_scratch_inodes(16ULL << 20) == 4096);
	CHECK(mount_scratch_inodes((16ULL << 20) + 4096) == 4097);
	CHECK(mount_scratch_inodes(1ULL << 30) == 262144);
	CHECK(mount_scratch_inodes(UINT64_MAX) == UINT64_MAX / 4096);
}

TEST(scratch_open)
{
	char dir[] = "/tmp/corral-unit-mount.XXXXXX", path[64];
	int rootfd, fd;

	if (!mkdtemp(dir)) {
		CHECK(!"mkdtemp");
		return;
	}
	rootfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	CHECK(rootfd >= 0);
	/* nothing there yet */
	CHECK(mount_scratch_open(rootfd) == -ENOENT);
	/* a symlink in its place is not followed */
	snprintf(path, sizeof(path), "%s/tmp", dir);
	CHECK(symlink("/", path) == 0);
	fd = mount_scratch_open(rootfd);
	CHECK(fd == -ENOTDIR);
	CHECK(unlink(path) == 0);
	CHECK(mkdir(path, 0700) == 0);
	fd = mount_scratch_open(rootfd);
	CHECK(fd >= 0);
	/* a file system with room left is not full; no fd is never full */
	CHECK(!mount_scratch_full(fd));
	CHECK(!mount_scratch_full(-1));
	if (fd >= 0)
		close(fd);
	rmdir(path);
	rmdir(dir);
	if (rootfd >= 0)
		close(rootfd);
}

/* our own mount namespace (and user namespace, unprivileged) */
static bool own_mount_ns(void)
{
	char map[64];
	int fd;

	if (geteuid() == 0)
		return unshare(CLONE_NEWNS) == 0 &&
		       mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0;
	snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)geteuid());
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
		return false;
	fd = open("/proc/self/uid_map", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, map, strlen(map)) != (ssize_t)strlen(map)) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	close(fd);
	return mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0;
}

/* 0 taken, else the errno mountinfo_open failed with */
static int opened(const char *path)
{
	FILE *f = mountinfo_open(AT_FDCWD, path);

	if (!f)
		return errno;
	fclose(f);
	return 0;
}

/*
 * A test's child in a mount namespace of its own: 0 passed, 100 none to
 * be had here (skipped, said), else bit i of its status a failed step.
 */
static void child_passed(pid_t pid)
{
	int st = 0;

	CHECK(pid > 0);
	if (pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
	    WEXITSTATUS(st) == 100)
		fprintf(stderr, "  (skipped: no mount namespace to test in)\n");
	else
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	if (WIFEXITED(st) && WEXITSTATUS(st) && WEXITSTATUS(st) != 100)
		fprintf(stderr, "  failed steps: 0x%x\n", WEXITSTATUS(st));
}

/*
 * The mount table checks are judged by is procfs's own: a file mounted
 * over its name (a CA bundle an image's link led there, another proc
 * file) is refused, not read as the table.  In a child, in a mount
 * namespace of its own: bit i of its status a failed step.
 */
TEST(mountinfo_only_procfs_own)
{
	char file[] = "/tmp/corral-unit-mountinfo.XXXXXX";
	int fd = mkstemp(file);
	pid_t pid;

	CHECK(fd >= 0);
	if (fd < 0)
		return;
	close(fd);
	pid = fork();
	if (pid == 0) {
		int bad = 0;

		if (!own_mount_ns())
			_exit(100);	/* no namespace here to test in */
		bad |= opened("/proc/self/mountinfo") != 0;
		bad |= (opened(file) != EXDEV) << 1;
		bad |= (mount(file, "/proc/self/mountinfo", NULL, MS_BIND, NULL) < 0) << 2;
		bad |= (opened("/proc/self/mountinfo") != EXDEV) << 3;
		bad |= (umount2("/proc/self/mountinfo", MNT_DETACH) < 0) << 4;
		bad |= (opened("/proc/self/mountinfo") != 0) << 5;
		bad |= (mount("/proc/self/stat", "/proc/self/mountinfo", NULL,
			      MS_BIND, NULL) < 0) << 6;
		bad |= (opened("/proc/self/mountinfo") != EXDEV) << 7;
		_exit(bad);
	}
	child_passed(pid);
	unlink(file);
}

/* path in the tree at root, as corral_path_in_root names it */
static bool in_root_is(int root, const char *path, const char *want)
{
	char got[PATH_MAX];
	int r = corral_path_in_root(root, path, got, sizeof(got));

	if (r == 0 && !strcmp(got, want))
		return true;
	fprintf(stderr, "  %s: got %d \"%s\", want \"%s\"\n", path, r,
		r == 0 ? got : "", want);
	return false;
}

/*
 * An engine's mount destination as runc finds it: the image's links
 * followed inside its tree, never out of it; a loop, a "..", a missing
 * name or a mount beneath taken as written.
 */
TEST(path_in_root)
{
	char dir[] = "/tmp/corral-unit-inroot.XXXXXX", p[128], small[8];
	static const char *const made[] = { "run", "etc", "var", "a", "a/b", "mnt" };
	static const char *const links[][2] = {
		{ "var/run", "../run" }, { "abs", "/run" }, { "esc", "../../../../../etc" },
		{ "l1", "l2" }, { "l2", "l1" }, { "a/b/up", "../../etc" },
		{ "magic", "/proc/self/root" }, { "mnt/in", "/etc" },
	};
	int root;
	pid_t pid;

	if (!mkdtemp(dir)) {
		CHECK(!"mkdtemp");
		return;
	}
	for (size_t i = 0; i < ARRAY_SIZE(made); i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, made[i]);
		CHECK(mkdir(p, 0755) == 0);
	}
	for (size_t i = 0; i < ARRAY_SIZE(links); i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, links[i][0]);
		CHECK(symlink(links[i][1], p) == 0);
	}
	snprintf(p, sizeof(p), "%s/file", dir);
	CHECK(close(open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0644)) == 0);
	root = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	CHECK(root >= 0);
	CHECK(in_root_is(root, "/var/run/x", "/run/x"));
	CHECK(in_root_is(root, "//var//run/", "/run"));
	CHECK(in_root_is(root, "/abs/y/z", "/run/y/z"));
	CHECK(in_root_is(root, "/esc/secret", "/etc/secret"));
	CHECK(in_root_is(root, "/a/b/up/x", "/etc/x"));
	CHECK(in_root_is(root, "/l1/x", "/l1/x"));
	CHECK(in_root_is(root, "/magic/etc", "/magic/etc"));
	CHECK(in_root_is(root, "/var/../etc", "/var/../etc"));
	CHECK(in_root_is(root, "/var/..", "/var/.."));
	CHECK(in_root_is(root, "/var/..x/y", "/var/..x/y"));
	CHECK(in_root_is(root, "/nope/a", "/nope/a"));
	CHECK(in_root_is(root, "/var/run/nope/a", "/run/nope/a"));
	CHECK(in_root_is(root, "/file/x", "/file/x"));
	CHECK(in_root_is(root, "/", "/"));
	CHECK(in_root_is(root, "/./var/./run", "/run"));
	CHECK(corral_path_in_root(root, "/var/run/xyz", small, sizeof(small)) ==
	      -ENAMETOOLONG);
	/* a mount beneath: not walked into, its links not followed */
	pid = fork();
	if (pid == 0) {
		if (!own_mount_ns())
			_exit(100);
		snprintf(p, sizeof(p), "%s/mnt", dir);
		if (mount(p, p, NULL, MS_BIND, NULL) < 0)
			_exit(2);
		/* opened again: the fd of before is the first namespace's mount */
		root = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
		_exit(root < 0 ? 3 : in_root_is(root, "/mnt/in/x", "/mnt/in/x") &&
		      in_root_is(root, "/var/run", "/run") ? 0 : 1);
	}
	child_passed(pid);
	CHECK(in_root_is(root, "/mnt/in/x", "/etc/x"));	/* without it */
	close(root);
	for (size_t i = 0; i < ARRAY_SIZE(links); i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, links[i][0]);
		unlink(p);
	}
	snprintf(p, sizeof(p), "%s/file", dir);
	unlink(p);
	for (size_t i = ARRAY_SIZE(made); i-- > 0;) {
		snprintf(p, sizeof(p), "%s/%s", dir, made[i]);
		rmdir(p);
	}
	CHECK(rmdir(dir) == 0);
}

int main(void)
{
	unit_run_all();
	UNIT_DONE();
}
