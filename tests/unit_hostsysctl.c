/*
 * unit_hostsysctl.c - a host sysctl's text kept HOST_SYSCTL_TTL_MS and no
 * longer (hostsysctl.c), on a clock the test gives: files of its own
 * stand in for /proc/sys's, rewritten between reads.
 */
#include "internal.h"
#include "unit.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* the paths are the cache's keys, kept as pointers: static storage */
static char file_a[64], file_b[64], file_gone[64], spare[3][64];

static void put(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	CHECK(fd >= 0);
	if (fd < 0)
		return;
	CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
	close(fd);
}

static void make_path(char *buf, const char *what)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(buf, 64, "%s/unit-hostsysctl-%d-%s", tmp && tmp[0] ? tmp : "/tmp",
		 (int)getpid(), what);
}

TEST(kept_for_the_ttl_then_read_again)
{
	char buf[96];

	make_path(file_a, "a");
	put(file_a, "2466246\n");
	CHECK(host_sysctl_read_at(file_a, buf, sizeof(buf), 5000) == 8);
	CHECK(!strcmp(buf, "2466246\n"));
	/* the operator changes it: not seen within the TTL ... */
	put(file_a, "1000\n");
	CHECK(host_sysctl_read_at(file_a, buf, sizeof(buf), 5000 + HOST_SYSCTL_TTL_MS - 1) == 8);
	CHECK(!strcmp(buf, "2466246\n"));
	/* ... and seen once it is that old */
	CHECK(host_sysctl_read_at(file_a, buf, sizeof(buf), 5000 + HOST_SYSCTL_TTL_MS) == 5);
	CHECK(!strcmp(buf, "1000\n"));
	unlink(file_a);
}

TEST(each_file_its_own)
{
	char buf[96];

	make_path(file_b, "b");
	put(file_a, "1\n");
	put(file_b, "287907\t383878\t575814\n");
	CHECK(host_sysctl_read_at(file_a, buf, sizeof(buf), 20000) == 2);
	CHECK(!strcmp(buf, "1\n"));
	CHECK(host_sysctl_read_at(file_b, buf, sizeof(buf), 20000) == 21);
	CHECK(!strcmp(buf, "287907\t383878\t575814\n"));
	CHECK(host_sysctl_read_at(file_a, buf, sizeof(buf), 20001) == 2);
	CHECK(!strcmp(buf, "1\n"));
	unlink(file_b);
}

TEST(an_error_is_kept_as_long)
{
	char buf[32];

	make_path(file_gone, "gone");
	unlink(file_gone);
	CHECK(host_sysctl_read_at(file_gone, buf, sizeof(buf), 30000) == -ENOENT);
	put(file_gone, "5\n");
	CHECK(host_sysctl_read_at(file_gone, buf, sizeof(buf), 30001) == -ENOENT);
	CHECK(host_sysctl_read_at(file_gone, buf, sizeof(buf), 30000 + HOST_SYSCTL_TTL_MS) == 2);
	CHECK(!strcmp(buf, "5\n"));
	unlink(file_gone);
}

TEST(cut_as_a_short_read_would)
{
	char small[4], buf[32];

	put(file_a, "123456\n");
	CHECK(host_sysctl_read_at(file_a, small, sizeof(small), 40000) == 3);
	CHECK(!strcmp(small, "123"));
	/* the text kept is whole: a larger buffer within the TTL gets it all */
	CHECK(host_sysctl_read_at(file_a, buf, sizeof(buf), 40001) == 7);
	CHECK(!strcmp(buf, "123456\n"));
	CHECK(host_sysctl_read_at(file_a, small, 0, 40001) == -EINVAL);
}

/* no clock (0): never fresh, every read is the file's */
TEST(no_clock_reads_each_time)
{
	char buf[32];

	put(file_a, "1\n");
	CHECK(host_sysctl_read_at(file_a, buf, sizeof(buf), 0) == 2);
	put(file_a, "22\n");
	CHECK(host_sysctl_read_at(file_a, buf, sizeof(buf), 0) == 3);
	CHECK(!strcmp(buf, "22\n"));
}

/*
 * Past the slots a file is read each time, as before, never refused: a, b
 * and gone took three, s0 takes the last, s1 and s2 are read afresh.
 */
TEST(more_files_than_slots_still_read)
{
	char buf[32];

	for (int i = 0; i < 3; i++) {
		make_path(spare[i], i == 0 ? "s0" : i == 1 ? "s1" : "s2");
		put(spare[i], "7\n");
		CHECK(host_sysctl_read_at(spare[i], buf, sizeof(buf), 50000) == 2);
		put(spare[i], "88\n");
		CHECK(host_sysctl_read_at(spare[i], buf, sizeof(buf), 50001) ==
		      (i == 0 ? 2 : 3));
		unlink(spare[i]);
	}
	unlink(file_a);
}

int main(void)
{
	unit_run_all();
	UNIT_DONE();
}
