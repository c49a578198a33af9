/*
 * unit_nft.c - transparent mode's nftables batch (src/lib/nft.c), each
 * test in a user and network namespace of its own, never the host's:
 * the rules load; a refusal names the command the kernel refused, and
 * the batch commits nothing; without CAP_NET_ADMIN nothing loads.
 * tests/net.sh compares the loaded rules with nft's own listing.
 */
#include "nft.h"
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

struct outcome {
	int r;		/* nft_redirect_rules' result */
	int listed;	/* what `nft list tables` found: bit 0 ip, bit 1 ip6 */
	char why[512];
};

static bool write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	bool ok = fd >= 0 && write(fd, s, strlen(s)) == (ssize_t)strlen(s);

	if (fd >= 0)
		close(fd);
	return ok;
}

/* Root of a new user namespace (mapped to us) with a netns of its own. */
static bool own_netns(void)
{
	char map[64];
	uid_t uid = geteuid();
	gid_t gid = getegid();

	if (unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0)
		return false;
	snprintf(map, sizeof(map), "0 %u 1", (unsigned)uid);
	if (!write_file("/proc/self/uid_map", map))
		return false;
	snprintf(map, sizeof(map), "0 %u 1", (unsigned)gid);
	return write_file("/proc/self/setgroups", "deny") &&
	       write_file("/proc/self/gid_map", map);
}

static bool nft_present(void)
{
	return access("/usr/sbin/nft", X_OK) == 0;
}

/* Which corral tables nft lists in this netns (-1: nft not run). */
static int listed_tables(void)
{
	FILE *p = popen("/usr/sbin/nft list tables 2>/dev/null", "r");
	char line[128];
	int found = 0;

	if (!p)
		return -1;
	while (fgets(line, sizeof(line), p)) {
		found |= strcmp(line, "table ip corral\n") == 0;
		found |= (strcmp(line, "table ip6 corral\n") == 0) << 1;
	}
	pclose(p);
	return found;
}

static bool drop_net_admin(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d) < 0)
		return false;
	d[0].effective &= ~(1u << CAP_NET_ADMIN);
	d[0].permitted &= ~(1u << CAP_NET_ADMIN);
	return syscall(SYS_capset, &h, d) == 0;
}

enum setup { PLAIN, CHAIN_IN_THE_WAY, NO_NET_ADMIN };

/*
 * In a child: the namespaces, the setup asked for, the rules; what came
 * of it back over a pipe.  r = -ENOSYS: the namespaces could not be made.
 */
static struct outcome attempt(enum setup setup)
{
	struct outcome o = { .r = -ENOSYS, .listed = -1 };
	int p[2], status;
	pid_t pid;

	if (pipe(p) < 0)
		return o;
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		if (!own_netns())
			_exit(write(p[1], &o, sizeof(o)) == sizeof(o) ? 0 : 1);
		if (setup == CHAIN_IN_THE_WAY &&
		    system("/usr/sbin/nft 'add table ip corral; add chain ip corral out "
			   "{ type filter hook input priority 0; }'") != 0)
			_exit(2);
		if (setup == NO_NET_ADMIN && !drop_net_admin())
			_exit(3);
		o.r = nft_redirect_rules(3129, 53, o.why, sizeof(o.why));
		if (nft_present() && setup != NO_NET_ADMIN)
			o.listed = listed_tables();
		_exit(write(p[1], &o, sizeof(o)) == sizeof(o) ? 0 : 1);
	}
	close(p[1]);
	if (pid < 0 || read(p[0], &o, sizeof(o)) != sizeof(o))
		o.r = -EIO;
	close(p[0]);
	if (pid > 0)
		waitpid(pid, &status, 0);
	return o;
}

TEST(rules_load_in_both_families)
{
	struct outcome o = attempt(PLAIN);

	if (o.r == -ENOSYS) {
		printf("# skip: no user namespace here\n");
		return;
	}
	CHECK(o.r == 0);
	if (o.r)
		fprintf(stderr, "  why: %s\n", o.why);
	if (nft_present())
		CHECK(o.listed == 3);
}

TEST(a_refusal_names_the_command_and_commits_nothing)
{
	struct outcome o;

	if (!nft_present()) {
		printf("# skip: no /usr/sbin/nft to put a chain in the way\n");
		return;
	}
	o = attempt(CHAIN_IN_THE_WAY);
	if (o.r == -ENOSYS) {
		printf("# skip: no user namespace here\n");
		return;
	}
	CHECK(o.r < 0);
	CHECK_STR_CONTAINS(o.why, "nftables refused the nat chain of table ip corral: ");
	/* ip corral was there before; ip6 corral, in the same batch, is not */
	CHECK(o.listed == 1);
}

TEST(without_cap_net_admin_nothing_loads)
{
	struct outcome o = attempt(NO_NET_ADMIN);

	if (o.r == -ENOSYS) {
		printf("# skip: no user namespace here\n");
		return;
	}
	CHECK(o.r == -EPERM);
	CHECK_STR_CONTAINS(o.why, "nftables refused the batch: Operation not permitted");
}

int main(void)
{
	unit_run_all();
	UNIT_DONE();
}
