/*
 * seccomp.c - the kernel surface the sandbox does not get.
 *
 * A deny list, not an allow list: agents run compilers, interpreters and
 * build tools whose syscall needs nobody can enumerate.  What is denied is
 * what lets code reach past the other layers: namespaces and mounts, kernel
 * modules and kexec, tracing other processes, the BPF and perf subsystems,
 * the keyring, io_uring (its own syscall-free path around this filter),
 * userfaultfd (a race amplifier for kernel exploits), and terminal
 * injection.  Every rule lives in the table below so it can be audited.
 */
#include "internal.h"

#include <errno.h>
#include <linux/sched.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/personality.h>
#include <sys/socket.h>

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

#define NS_FLAGS (CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | \
		  CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWCGROUP | CLONE_NEWTIME)

enum arg_match {
	ANY,		/* deny every call */
	A0_MASK,	/* deny when (arg0 & val) != 0 */
	A1_LOW32_EQ,	/* deny when (uint32_t)arg1 == val */
	A0_NOT_IN,	/* personality: deny unless arg0 is val or 0xffffffff */
	A0_RANGE,	/* deny when val <= (uint32_t)arg0 <= hi */
	A0_GE,		/* deny when arg0 >= val */
};

struct deny {
	const char *name;
	int err;
	enum arg_match match;
	uint64_t val;
	uint64_t hi;
	const char *why;
};

static const struct deny deny_table[] = {
	/* mounts and namespaces: the filesystem view is fixed before exec */
	{ "mount", EPERM, ANY, 0, 0, "change the filesystem view" },
	{ "umount", EPERM, ANY, 0, 0, "uncover what the mounts hide" },
	{ "umount2", EPERM, ANY, 0, 0, "uncover what the mounts hide" },
	{ "pivot_root", EPERM, ANY, 0, 0, "change the root" },
	{ "chroot", EPERM, ANY, 0, 0, "change the root" },
	{ "fsopen", EPERM, ANY, 0, 0, "new mount API" },
	{ "fsconfig", EPERM, ANY, 0, 0, "new mount API" },
	{ "fsmount", EPERM, ANY, 0, 0, "new mount API" },
	{ "fspick", EPERM, ANY, 0, 0, "new mount API" },
	{ "open_tree", EPERM, ANY, 0, 0, "new mount API" },
	{ "move_mount", EPERM, ANY, 0, 0, "new mount API" },
	{ "mount_setattr", EPERM, ANY, 0, 0, "new mount API" },
	{ "unshare", EPERM, A0_MASK, NS_FLAGS, 0, "new namespaces" },
	{ "clone", EPERM, A0_MASK, NS_FLAGS, 0, "new namespaces" },
	/* clone3 passes flags in memory seccomp cannot read: make libc fall back */
	{ "clone3", ENOSYS, ANY, 0, 0, "flags unreadable by seccomp" },
	{ "setns", EPERM, ANY, 0, 0, "join other namespaces" },
	/* other processes */
	{ "ptrace", EPERM, ANY, 0, 0, "trace processes" },
	{ "process_vm_readv", EPERM, ANY, 0, 0, "read another process's memory" },
	{ "process_vm_writev", EPERM, ANY, 0, 0, "write another process's memory" },
	{ "kcmp", EPERM, ANY, 0, 0, "probe other processes' kernel objects" },
	{ "pidfd_getfd", EPERM, ANY, 0, 0, "steal another process's fds" },
	/* kernel subsystems with a history of exploits */
	{ "bpf", EPERM, ANY, 0, 0, "load BPF programs" },
	{ "perf_event_open", EPERM, ANY, 0, 0, "perf side channels" },
	{ "userfaultfd", EPERM, ANY, 0, 0, "race amplifier for kernel exploits" },
	{ "io_uring_setup", EPERM, ANY, 0, 0, "bypasses syscall filtering" },
	{ "io_uring_enter", EPERM, ANY, 0, 0, "bypasses syscall filtering" },
	{ "io_uring_register", EPERM, ANY, 0, 0, "bypasses syscall filtering" },
	{ "keyctl", EPERM, ANY, 0, 0, "kernel keyring (not namespaced)" },
	{ "add_key", EPERM, ANY, 0, 0, "kernel keyring (not namespaced)" },
	{ "request_key", EPERM, ANY, 0, 0, "kernel keyring (not namespaced)" },
	{ "fanotify_init", EPERM, ANY, 0, 0, "filesystem-wide monitoring" },
	{ "open_by_handle_at", EPERM, ANY, 0, 0, "open files outside the mounts" },
	{ "name_to_handle_at", EPERM, ANY, 0, 0, "file handles for open_by_handle_at" },
	/* the machine itself */
	{ "kexec_load", EPERM, ANY, 0, 0, "replace the kernel" },
	{ "kexec_file_load", EPERM, ANY, 0, 0, "replace the kernel" },
	{ "init_module", EPERM, ANY, 0, 0, "load kernel code" },
	{ "finit_module", EPERM, ANY, 0, 0, "load kernel code" },
	{ "delete_module", EPERM, ANY, 0, 0, "unload kernel code" },
	{ "reboot", EPERM, ANY, 0, 0, "stop the machine" },
	{ "swapon", EPERM, ANY, 0, 0, "change swap" },
	{ "swapoff", EPERM, ANY, 0, 0, "change swap" },
	{ "acct", EPERM, ANY, 0, 0, "process accounting" },
	{ "settimeofday", EPERM, ANY, 0, 0, "change the clock" },
	{ "clock_settime", EPERM, ANY, 0, 0, "change the clock" },
	{ "clock_adjtime", EPERM, ANY, 0, 0, "change the clock" },
	{ "adjtimex", EPERM, ANY, 0, 0, "change the clock" },
	{ "syslog", EPERM, ANY, 0, 0, "kernel log (address leaks)" },
	{ "quotactl", EPERM, ANY, 0, 0, "filesystem quotas" },
	{ "lookup_dcookie", EPERM, ANY, 0, 0, "kernel internals" },
	{ "vhangup", EPERM, ANY, 0, 0, "hang up terminals" },
	/* odd execution domains have hidden kernel bugs before */
	{ "personality", EPERM, A0_NOT_IN, PER_LINUX, 0, "execution domain changes" },
	/* terminal injection: push keystrokes into whoever reads the tty */
	{ "ioctl", EPERM, A1_LOW32_EQ, TIOCSTI, 0, "type into the terminal" },
	{ "ioctl", EPERM, A1_LOW32_EQ, TIOCLINUX, 0, "console injection" },
	/*
	 * Socket families: unix, inet, inet6, netlink and packet stay.  The
	 * rest are rarely needed and some are not namespaced at all (vsock
	 * reaches the VM's host whatever the netns) or have long CVE lists.
	 */
	{ "socket", EPERM, A0_RANGE, AF_AX25, AF_X25, "obscure families (3-9)" },
	{ "socket", EPERM, A0_RANGE, AF_ROSE, AF_KEY, "obscure families, PF_KEY (11-15)" },
	{ "socket", EPERM, A0_GE, AF_PACKET + 1, 0, "vsock, alg, bluetooth, tipc, rds, xdp, ..." },
	{ "socketpair", EPERM, A0_RANGE, AF_AX25, AF_X25, "as socket" },
	{ "socketpair", EPERM, A0_RANGE, AF_ROSE, AF_KEY, "as socket" },
	{ "socketpair", EPERM, A0_GE, AF_PACKET + 1, 0, "as socket" },
};

static int add_rule(scmp_filter_ctx ctx, const struct deny *d, bool notify,
		    struct corral_err *err)
{
	/* EPERM denials go to the supervisor, which answers EPERM and records */
	uint32_t action = notify && d->err == EPERM ? SCMP_ACT_NOTIFY :
		SCMP_ACT_ERRNO(d->err);
	int nr, r;

	nr = seccomp_syscall_resolve_name(d->name);
	if (nr == __NR_SCMP_ERROR)
		return 0;	/* not on this architecture */

	switch (d->match) {
	case ANY:
		r = seccomp_rule_add(ctx, action, nr, 0);
		break;
	case A0_MASK:
		/* one rule a bit: seccomp compares for equality, not "!= 0" */
		r = 0;
		for (int bit = 0; bit < 64 && r == 0; bit++) {
			uint64_t b = 1ull << bit;

			if (d->val & b)
				r = seccomp_rule_add(ctx, action, nr, 1,
						     SCMP_A0(SCMP_CMP_MASKED_EQ, b, b));
		}
		break;
	case A1_LOW32_EQ:
		r = seccomp_rule_add(ctx, action, nr, 1,
				     SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, d->val));
		break;
	case A0_NOT_IN:
		/*
		 * "arg0 is neither val (0) nor the 0xffffffff query", with only
		 * equality tests: a nonzero value with bit 31 clear, or bit 31
		 * set with some other bit clear.  personality() takes 32 bits.
		 */
		r = 0;
		for (int bit = 0; bit < 31 && r == 0; bit++) {
			uint64_t b = 1ull << bit, top = 1ull << 31;

			r = seccomp_rule_add(ctx, action, nr, 1,
					     SCMP_A0(SCMP_CMP_MASKED_EQ, top | b, b));
			if (r == 0)
				r = seccomp_rule_add(ctx, action, nr, 1,
						     SCMP_A0(SCMP_CMP_MASKED_EQ, top | b, top));
		}
		break;
	case A0_RANGE:
		r = 0;
		for (uint64_t v = d->val; v <= d->hi && r == 0; v++)
			r = seccomp_rule_add(ctx, action, nr, 1,
					     SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, v));
		break;
	case A0_GE:
		r = seccomp_rule_add(ctx, action, nr, 1,
				     SCMP_A0(SCMP_CMP_GE, d->val));
		break;
	default:
		r = -EINVAL;
	}
	if (r < 0)
		return corral_set_err(err, r, "seccomp: cannot add rule for %s: %s",
				      d->name, strerror(-r));
	return 0;
}

bool seccomp_available(void)
{
	return prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0;
}

bool seccomp_notify_available(void)
{
	return seccomp_api_get() >= 5;
}

const char *seccomp_deny_why(int nr)
{
	for (size_t i = 0; i < sizeof(deny_table) / sizeof(deny_table[0]); i++)
		if (seccomp_syscall_resolve_name(deny_table[i].name) == nr)
			return deny_table[i].why;
	return "not allowed in the sandbox";
}

/*
 * Only the native ABI: a 32-bit (int 0x80) or x32 call would be a second,
 * unfiltered syscall table, so any call from a foreign ABI kills the process.
 * With notify_fd, denials are sent to whoever holds *notify_fd (the caller
 * must pass it to the supervisor and close it): the supervisor answers
 * EPERM and records each one.  Without USER_NOTIF, they are plain EPERM.
 */
int seccomp_apply(int *notify_fd, struct corral_err *err)
{
	bool notify = notify_fd && seccomp_notify_available();
	scmp_filter_ctx ctx;
	int r = 0;

	if (notify_fd)
		*notify_fd = -1;
	ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx)
		return corral_set_err(err, -ENOMEM, "seccomp: cannot create a filter");
	r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	if (r < 0) {
		corral_set_err(err, r, "seccomp: cannot refuse foreign ABIs: %s",
			       strerror(-r));
		goto out;
	}
	for (size_t i = 0; i < sizeof(deny_table) / sizeof(deny_table[0]); i++) {
		r = add_rule(ctx, &deny_table[i], notify, err);
		if (r < 0)
			goto out;
	}
	r = seccomp_load(ctx);
	if (r < 0) {
		corral_set_err(err, r, "seccomp: cannot load the filter: %s",
			       strerror(-r));
		goto out;
	}
	if (notify) {
		*notify_fd = seccomp_notify_fd(ctx);
		if (*notify_fd < 0)
			r = corral_set_err(err, -EIO, "seccomp: no notification fd");
	}
out:
	seccomp_release(ctx);
	return r;
}
