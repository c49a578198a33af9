/*
 * unit_ns.c - the check of corral's id range against the host's
 * /etc/passwd, /etc/group, /etc/subuid and /etc/subgid (src/lib/ns.c):
 * an edited file is honoured at the next check, and an unchanged one is
 * not read again.
 *
 * The test edits a copy of /etc/passwd bound over the real one in a
 * mount namespace of its own (with a user namespace when not root): the
 * host's file is never written.
 */
#include "internal.h"
#include "sandbox.h"
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

static char copy[] = "/tmp/unit_ns.XXXXXX";
static char *host_passwd;	/* its text, as read at the start */
static size_t host_len;
static bool ready, made;	/* the copy exists: main() removes it */

static char *slurp(const char *path, size_t *len)
{
	char *buf = NULL;
	size_t cap = 0;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	*len = 0;
	if (fd < 0)
		return NULL;
	do {
		if (*len == cap) {
			char *b = realloc(buf, cap = cap ? 2 * cap : 4096);

			if (!b) {
				free(buf);
				close(fd);
				return NULL;
			}
			buf = b;
		}
		n = read(fd, buf + *len, cap - *len);
		if (n > 0)
			*len += (size_t)n;
	} while (n > 0);
	close(fd);
	return buf;
}

static bool write_map(const char *file, const char *text)
{
	int fd = open(file, O_WRONLY | O_CLOEXEC);
	bool ok = fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text);

	if (fd >= 0)
		close(fd);
	return ok;
}

/* our own mount namespace, /etc/passwd a copy we may write */
static bool setup(void)
{
	uid_t uid = geteuid();
	gid_t gid = getegid();
	char map[64];
	int fd;

	host_passwd = slurp("/etc/passwd", &host_len);
	if (!host_passwd)
		return false;
	if (uid != 0) {
		if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
			return false;
		snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)uid);
		if (!write_map("/proc/self/setgroups", "deny") ||
		    !write_map("/proc/self/uid_map", map))
			return false;
		snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)gid);
		if (!write_map("/proc/self/gid_map", map))
			return false;
	} else if (unshare(CLONE_NEWNS) < 0) {
		return false;
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return false;
	fd = mkstemp(copy);
	if (fd < 0)
		return false;
	made = true;
	if (write(fd, host_passwd, host_len) != (ssize_t)host_len) {
		close(fd);
		return false;
	}
	close(fd);
	return mount(copy, "/etc/passwd", NULL, MS_BIND, NULL) == 0;
}

/* the copy's text made host's + extra, written in place (its inode kept) */
static bool rewrite(const char *extra)
{
	int fd = open(copy, O_WRONLY | O_TRUNC | O_CLOEXEC);
	bool ok = fd >= 0 &&
		  write(fd, host_passwd, host_len) == (ssize_t)host_len &&
		  write(fd, extra, strlen(extra)) == (ssize_t)strlen(extra);

	if (fd >= 0)
		close(fd);
	return ok;
}

/* read(2) calls this thread has made: /proc/self/io's syscr */
static long reads_made(void)
{
	char buf[512], *p;
	int fd = open("/proc/self/io", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	p = strstr(buf, "syscr:");
	return p ? strtol(p + 6, NULL, 10) : -1;
}

TEST(an_edited_passwd_is_honoured_at_the_next_check)
{
	char why[256] = "", line[128];

	ready = setup();
	CHECK(ready);
	if (!ready)
		return;
	if (ns_range_clashes(why, sizeof(why))) {
		fprintf(stderr, "  (skipped: this host's files clash already: %s)\n", why);
		ready = false;
		return;
	}
	/* a user the host added since, inside corral's range */
	snprintf(line, sizeof(line), "corral-unit:x:%u:%u::/:/bin/false\n",
		 CORRAL_IDS_BASE + 7, CORRAL_IDS_BASE + 7);
	CHECK(rewrite(line));
	CHECK(ns_range_clashes(why, sizeof(why)));
	CHECK_STR_CONTAINS(why, "corral-unit");
	/* and removed again: the range is free once more */
	CHECK(rewrite(""));
	CHECK(!ns_range_clashes(why, sizeof(why)));
	/* the owners' range above it is checked too: no host user may own a sandbox */
	snprintf(line, sizeof(line), "corral-owner:x:%u:%u::/:/bin/false\n",
		 CORRAL_OWNERS_BASE + 7, CORRAL_OWNERS_BASE + 7);
	CHECK(rewrite(line));
	CHECK(ns_range_clashes(why, sizeof(why)));
	CHECK_STR_CONTAINS(why, "corral-owner");
	CHECK(rewrite(""));
	CHECK(!ns_range_clashes(why, sizeof(why)));
	/* the same length as the clashing text, a line outside the range */
	snprintf(line, sizeof(line), "corral-unit:x:%u:%u::/:/bin/false\n",
		 CORRAL_IDS_BASE - 7, CORRAL_IDS_BASE - 7);
	CHECK(rewrite(line));
	CHECK(!ns_range_clashes(why, sizeof(why)));
}

TEST(unchanged_files_are_not_read_again)
{
	char why[256];
	long r0, r1, r2;

	if (!ready)
		return;
	ns_range_clashes(why, sizeof(why));
	/* what reads_made itself costs, then a check between two of them */
	r0 = reads_made();
	r1 = reads_made();
	ns_range_clashes(why, sizeof(why));
	r2 = reads_made();
	CHECK(r0 >= 0 && r1 >= 0 && r2 >= 0);
	CHECK(r2 - r1 == r1 - r0);
	/* an edit is read, all the same */
	CHECK(rewrite("\n"));
	r0 = reads_made();
	ns_range_clashes(why, sizeof(why));
	r1 = reads_made();
	CHECK(r1 - r0 > 1);
}

/* one process's sandboxes differ in owner until the range wraps */
TEST(owners_differ_and_stay_in_their_range)
{
	uid_t first = ns_owner_next(), prev = first, o;

	CHECK(first >= CORRAL_OWNERS_BASE && first < CORRAL_OWNERS_BASE + CORRAL_OWNERS_COUNT);
	for (int i = 0; i < 1000; i++) {
		o = ns_owner_next();
		CHECK(o >= CORRAL_OWNERS_BASE && o < CORRAL_OWNERS_BASE + CORRAL_OWNERS_COUNT);
		CHECK(o != prev && o != first);
		prev = o;
	}
	/* above the ids sandboxes map: no sandbox can make a file its owner's */
	CHECK(CORRAL_OWNERS_BASE >= CORRAL_IDS_BASE + CORRAL_IDS_COUNT);
}

int main(void)
{
	unit_run_all();
	if (made)
		unlink(copy);
	free(host_passwd);
	UNIT_DONE();
}
