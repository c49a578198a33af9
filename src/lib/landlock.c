/*
 * landlock.c - the filesystem rules again, enforced by the kernel's LSM.
 *
 * The mounts already make the host read-only; Landlock is the second lock
 * on the same door, so a mistake in the mount table (or a kernel bug in
 * one of the filesystems) does not by itself give write access.  It also
 * scopes abstract unix sockets and signals (ABI 6): the sandbox cannot
 * talk to a host daemon's abstract socket nor signal anything outside.
 *
 * Since ABI 7 the kernel writes a Landlock denial into the host's audit
 * log, for a domain that asks (a process's denials before its next exec
 * are logged by default): a sandbox that makes a domain of its own inside
 * ours could write a record for every denial it provokes, without bound,
 * into a log the host keeps (auditd's, or the kernel's ring), and rotate
 * the host's own records out.  Our domain turns its subdomains' logging
 * off; the denials of ours are not logged after the exec either (the
 * kernel's default).
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <linux/openat2.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Debian 12's headers stop at ABI 3; the values are kernel ABI. */
#define LL_FS_EXECUTE		(1ull << 0)
#define LL_FS_WRITE_FILE	(1ull << 1)
#define LL_FS_READ_FILE		(1ull << 2)
#define LL_FS_READ_DIR		(1ull << 3)
#define LL_FS_REFER		(1ull << 13)	/* ABI 2 */
#define LL_FS_TRUNCATE		(1ull << 14)	/* ABI 3 */
#define LL_FS_IOCTL_DEV		(1ull << 15)	/* ABI 5 */
#define LL_NET_CONNECT_TCP	(1ull << 1)	/* ABI 4 */
#define LL_RULE_NET_PORT	2
#define LL_SCOPE_ABSTRACT_UNIX	(1ull << 0)	/* ABI 6 */
#define LL_SCOPE_SIGNAL		(1ull << 1)	/* ABI 6 */
#define LL_LOG_SUBDOMAINS_OFF	(1u << 2)	/* ABI 7: landlock_restrict_self */

#ifndef LANDLOCK_CREATE_RULESET_VERSION
#define LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#endif

struct ll_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;
	uint64_t scoped;
};

struct ll_net_port {
	uint64_t allowed_access;
	uint64_t port;
} __attribute__((packed));

struct ll_path_beneath {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

#define LL_READ (LL_FS_EXECUTE | LL_FS_READ_FILE | LL_FS_READ_DIR)
/* Rights that make sense on a non-directory. */
#define LL_FILE_RIGHTS (LL_FS_EXECUTE | LL_FS_WRITE_FILE | LL_FS_READ_FILE | \
			LL_FS_TRUNCATE | LL_FS_IOCTL_DEV)

int landlock_abi(void)
{
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0,
			   LANDLOCK_CREATE_RULESET_VERSION);

	return abi < 0 ? 0 : (int)abi;
}

static uint64_t fs_rights(int abi)
{
	uint64_t all = (1ull << 13) - 1;	/* ABI 1: bits 0..12 */

	if (abi >= 2)
		all |= LL_FS_REFER;
	if (abi >= 3)
		all |= LL_FS_TRUNCATE;
	if (abi >= 5)
		all |= LL_FS_IOCTL_DEV;
	return all;
}

static int add_path(int ruleset, const struct ll_rule *rule, uint64_t handled,
		    struct corral_err *err)
{
	struct ll_path_beneath pb = { 0 };
	struct stat st;
	int fd, r = 0;

	if (rule->no_symlinks) {
		struct open_how how = {
			.flags = O_PATH | O_CLOEXEC,
			.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
		};

		fd = openat2_retry(AT_FDCWD, rule->path, &how);
	} else {
		fd = open(rule->path, O_PATH | O_CLOEXEC);
	}
	if (fd < 0)
		return corral_set_errno(err, errno, "landlock: cannot open %s%s",
				      rule->path, errno == ELOOP ? " (a symbolic "
				      "link is on its way: not followed)" : "");
	pb.allowed_access = rule->writable ? handled : (LL_READ & handled);
	pb.parent_fd = fd;
	/*
	 * Rules are mostly directories: the rule is tried as one, and the
	 * kernel's EINVAL (rights beneath a directory asked of a file) makes
	 * us ask fstat what it is; a file then gets the file rights of its
	 * rule.  A stat of every path first cost a call a rule.
	 */
	if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH,
		    &pb, 0) == 0)
		goto out;
	if (errno == EINVAL && (pb.allowed_access & ~LL_FILE_RIGHTS)) {
		if (fstat(fd, &st) < 0) {
			r = corral_set_errno(err, errno, "landlock: cannot stat %s",
					   rule->path);
			goto out;
		}
		if (!S_ISDIR(st.st_mode)) {
			pb.allowed_access &= LL_FILE_RIGHTS;
			if (syscall(SYS_landlock_add_rule, ruleset,
				    LANDLOCK_RULE_PATH_BENEATH, &pb, 0) == 0)
				goto out;
		} else {
			errno = EINVAL;
		}
	}
	r = corral_set_errno(err, errno, "landlock: cannot add a rule for %s",
			   rule->path);
out:
	close(fd);
	return r;
}

static int add_ports(int ruleset, const uint16_t *ports, size_t n,
		     struct corral_err *err)
{
	for (size_t i = 0; i < n; i++) {
		struct ll_net_port np = { LL_NET_CONNECT_TCP, ports[i] };

		if (syscall(SYS_landlock_add_rule, ruleset, LL_RULE_NET_PORT, &np, 0) < 0)
			return corral_set_errno(err, errno,
					      "landlock: cannot allow TCP port %u",
					      ports[i]);
	}
	return 0;
}

int landlock_apply(const struct ll_rule *rules, size_t n,
		   const uint16_t *tcp_ports, size_t nports, struct corral_err *err)
{
	struct ll_ruleset_attr attr = { 0 };
	size_t attr_size;
	int abi, ruleset, r = 0;

	abi = landlock_abi();
	if (abi <= 0)
		return 0;

	attr.handled_access_fs = fs_rights(abi);
	attr_size = sizeof(attr.handled_access_fs);
	if (abi >= 4 && tcp_ports) {
		attr.handled_access_net = LL_NET_CONNECT_TCP;
		attr_size = offsetof(struct ll_ruleset_attr, scoped);
	}
	if (abi >= 6) {
		attr.scoped = LL_SCOPE_ABSTRACT_UNIX | LL_SCOPE_SIGNAL;
		attr_size = sizeof(attr);
	}

	ruleset = syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0);
	if (ruleset < 0)
		return corral_set_errno(err, errno, "landlock: cannot create a ruleset (ABI %d)",
				      abi);
	for (size_t i = 0; i < n && r == 0; i++)
		r = add_path(ruleset, &rules[i], attr.handled_access_fs, err);
	if (r == 0 && attr.handled_access_net)
		r = add_ports(ruleset, tcp_ports, nports, err);
	if (r == 0 && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		r = corral_set_errno(err, errno, "no_new_privs");
	if (r == 0 && syscall(SYS_landlock_restrict_self, ruleset,
			      abi >= 7 ? LL_LOG_SUBDOMAINS_OFF : 0) < 0)
		r = corral_set_errno(err, errno, "landlock: cannot restrict the sandbox");
	close(ruleset);
	return r < 0 ? r : abi;
}
