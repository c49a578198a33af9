/*
 * seccomp.c - the kernel surface the sandbox does not get.
 *
 * A deny list, not an allow list: agents run compilers, interpreters and
 * build tools whose syscall needs nobody can enumerate.  What is denied is
 * what lets code reach past the other layers: namespaces and mounts, kernel
 * modules and kexec, tracing other processes, the BPF and perf subsystems,
 * the keyring, io_uring (its own syscall-free path around this filter),
 * userfaultfd (a race amplifier for kernel exploits), NUMA memory policy,
 * terminal injection and line disciplines, TCP upper-layer protocols
 * (kernel TLS), sending unix out-of-band data, and the host-wide AIO
 * pool; and no more than Docker's default profile lets through.  Every
 * rule lives in a table below so it can be audited.
 *
 * Two things keep the list from going stale silently:
 * - a syscall newer than the table (a number above the highest one it was
 *   written for) is denied, so a kernel upgrade never widens the surface;
 * - a name this libseccomp does not know is added by number (numbers[]),
 *   not skipped; tests/unit_seccomp.c fails for a name that has neither.
 *
 * Sockets are the one allow list (sock_allow[]): the families and
 * protocols programs use.  Any other protocol reaches the kernel's lookup,
 * which loads modules (SCTP, DCCP, L2TP, ...) on distribution kernels.
 *
 * libseccomp compiles the table; the ceiling is a few BPF instructions put
 * in front of its program (as runc does), since libseccomp has no rule for
 * a range of syscall numbers, and so is personality's "neither PER_LINUX
 * nor the query", which libseccomp can only say in 62 rules.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#ifndef PR_SET_MEMORY_MERGE
#define PR_SET_MEMORY_MERGE 67	/* Linux 6.4 */
#endif
#ifndef IPPROTO_MPTCP
#define IPPROTO_MPTCP 262
#endif

#define NS_FLAGS (CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | \
		  CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWCGROUP | CLONE_NEWTIME)

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* ---- the deny list ---------------------------------------------------- */

enum arg_match {
	ANY,		/* deny every call */
	A0_MASK,	/* deny when (arg0 & val) != 0 */
	A1_MASK,	/* deny when (arg1 & val) != 0 */
	A2_MASK,	/* deny when (arg2 & val) != 0 */
	A3_MASK,	/* deny when (arg3 & val) != 0 */
	A0_LOW32_EQ,	/* deny when (uint32_t)arg0 == val */
	A1_LOW32_EQ,	/* deny when (uint32_t)arg1 == val */
	A1_LOW32_EQ_A2_SET, /* deny when (uint32_t)arg1 == val and arg2 != 0 */
	A2_LOW32_EQ,	/* deny when (uint32_t)arg2 == val */
	A0_NOT_IN,	/* personality: deny unless arg0 is val or 0xffffffff */
	A12_LOW32_EQ,	/* deny when (uint32_t)arg1 == val >> 32 and
			 * (uint32_t)arg2 == (uint32_t)val */
	A12_MASKS,	/* deny when arg1 & (val >> 32) and arg2 & (uint32_t)val */
	A23_MASKS,	/* the same of arg2 and arg3 */
};

/* setsockopt's level and option name, as one A12_LOW32_EQ value */
#define SOCKOPT(level, name) (((uint64_t)(uint32_t)(level) << 32) | (uint32_t)(name))

struct deny {
	const char *name;
	int err;
	enum arg_match match;
	uint64_t val;
	const char *why;
};


static const struct deny deny_table[] = {
	/* mounts and namespaces: the filesystem view is fixed before exec */
	{ "mount", EPERM, ANY, 0, "change the filesystem view" },
	{ "umount", EPERM, ANY, 0, "uncover what the mounts hide" },
	{ "umount2", EPERM, ANY, 0, "uncover what the mounts hide" },
	{ "pivot_root", EPERM, ANY, 0, "change the root" },
	{ "chroot", EPERM, ANY, 0, "change the root" },
	{ "fsopen", EPERM, ANY, 0, "new mount API" },
	{ "fsconfig", EPERM, ANY, 0, "new mount API" },
	{ "fsmount", EPERM, ANY, 0, "new mount API" },
	{ "fspick", EPERM, ANY, 0, "new mount API" },
	{ "open_tree", EPERM, ANY, 0, "new mount API" },
	{ "open_tree_attr", EPERM, ANY, 0, "new mount API (open_tree with attributes)" },
	{ "move_mount", EPERM, ANY, 0, "new mount API" },
	{ "mount_setattr", EPERM, ANY, 0, "new mount API" },
	{ "unshare", EPERM, A0_MASK, NS_FLAGS, "new namespaces" },
	{ "clone", EPERM, A0_MASK, NS_FLAGS, "new namespaces" },
	/* clone3 passes flags in memory seccomp cannot read: make libc fall back */
	{ "clone3", ENOSYS, ANY, 0, "flags unreadable by seccomp" },
	{ "setns", EPERM, ANY, 0, "join other namespaces" },
	{ "sethostname", EPERM, ANY, 0, "the sandbox's names are corral's" },
	{ "setdomainname", EPERM, ANY, 0, "the sandbox's names are corral's" },
	/* other processes */
	{ "ptrace", EPERM, ANY, 0, "trace processes" },
	{ "process_vm_readv", EPERM, ANY, 0, "read another process's memory" },
	{ "process_vm_writev", EPERM, ANY, 0, "write another process's memory" },
	{ "process_madvise", EPERM, ANY, 0, "advise on another process's memory" },
	{ "kcmp", EPERM, ANY, 0, "probe other processes' kernel objects" },
	{ "pidfd_getfd", EPERM, ANY, 0, "steal another process's fds" },
	/* kernel subsystems with a history of exploits */
	{ "bpf", EPERM, ANY, 0, "load BPF programs" },
	{ "perf_event_open", EPERM, ANY, 0, "perf side channels" },
	{ "userfaultfd", EPERM, ANY, 0, "race amplifier for kernel exploits" },
	{ "io_uring_setup", EPERM, ANY, 0, "bypasses syscall filtering" },
	{ "io_uring_enter", EPERM, ANY, 0, "bypasses syscall filtering" },
	{ "io_uring_register", EPERM, ANY, 0, "bypasses syscall filtering" },
	/*
	 * Linux AIO contexts come from one pool for the whole host
	 * (fs.aio-max-nr, 65536), counted for no user or namespace: one
	 * sandbox's io_setup calls took all of it, and every io_setup on the
	 * host failed with EAGAIN while it lived.  ENOSYS, as from a kernel
	 * built without AIO: libaio's users (InnoDB, fio) fall back to
	 * threads, and nothing of io_submit and the rest works without it.
	 */
	{ "io_setup", ENOSYS, ANY, 0, "a host-wide pool (fs.aio-max-nr)" },
	{ "keyctl", EPERM, ANY, 0, "kernel keyring (not namespaced)" },
	{ "add_key", EPERM, ANY, 0, "kernel keyring (not namespaced)" },
	{ "request_key", EPERM, ANY, 0, "kernel keyring (not namespaced)" },
	{ "fanotify_init", EPERM, ANY, 0, "filesystem-wide monitoring" },
	{ "open_by_handle_at", EPERM, ANY, 0, "open files outside the mounts" },
	{ "name_to_handle_at", EPERM, ANY, 0, "file handles for open_by_handle_at" },
	/* NUMA policy: real kernel code behind real arguments, CVEs; libnuma
	 * and hwloc take EPERM as "no NUMA" (Docker wants CAP_SYS_NICE) */
	{ "mbind", EPERM, ANY, 0, "NUMA memory policy" },
	{ "set_mempolicy", EPERM, ANY, 0, "NUMA memory policy" },
	/*
	 * The query only, unrecorded: libnuma asks it in its constructor, so
	 * every program linked to it (procps's ps and top, hwloc's users)
	 * made a denial, one an agent's `ps -ef` added to the record and to
	 * abort.max_denied_syscalls.  ENOSYS, as from a kernel without
	 * CONFIG_NUMA: libnuma then says "no NUMA" and sets no policy.
	 */
	{ "get_mempolicy", ENOSYS, ANY, 0, "NUMA memory policy (the query)" },
	{ "set_mempolicy_home_node", EPERM, ANY, 0, "NUMA memory policy" },
	{ "migrate_pages", EPERM, ANY, 0, "move a process's pages between NUMA nodes" },
	{ "move_pages", EPERM, ANY, 0, "move a process's pages between NUMA nodes" },
	/* odd corners no program an agent runs needs */
	{ "modify_ldt", EPERM, ANY, 0, "16-bit segments (Wine, DOS emulators), old CVEs" },
	{ "lsm_get_self_attr", EPERM, ANY, 0, "LSM attributes (Docker wants CAP_SYS_ADMIN)" },
	{ "lsm_set_self_attr", EPERM, ANY, 0, "LSM attributes (Docker wants CAP_SYS_ADMIN)" },
	{ "lsm_list_modules", EPERM, ANY, 0, "LSM attributes (Docker wants CAP_SYS_ADMIN)" },
	{ "file_getattr", EPERM, ANY, 0, "inode attributes by path (6.17), refused by Docker" },
	{ "file_setattr", EPERM, ANY, 0, "inode attributes by path (6.17), refused by Docker" },
	{ "uselib", EPERM, ANY, 0, "a.out libraries (still built into older kernels)" },
	{ "ustat", EPERM, ANY, 0, "obsolete filesystem query" },
	{ "sysfs", EPERM, ANY, 0, "obsolete filesystem-type query" },
	/* the machine itself */
	{ "kexec_load", EPERM, ANY, 0, "replace the kernel" },
	{ "kexec_file_load", EPERM, ANY, 0, "replace the kernel" },
	{ "init_module", EPERM, ANY, 0, "load kernel code" },
	{ "finit_module", EPERM, ANY, 0, "load kernel code" },
	{ "delete_module", EPERM, ANY, 0, "unload kernel code" },
	{ "reboot", EPERM, ANY, 0, "stop the machine" },
	{ "swapon", EPERM, ANY, 0, "change swap" },
	{ "swapoff", EPERM, ANY, 0, "change swap" },
	{ "acct", EPERM, ANY, 0, "process accounting" },
	{ "settimeofday", EPERM, ANY, 0, "change the clock" },
	{ "clock_settime", EPERM, ANY, 0, "change the clock" },
	{ "clock_adjtime", EPERM, ANY, 0, "change the clock" },
	{ "adjtimex", EPERM, ANY, 0, "change the clock" },
	{ "syslog", EPERM, ANY, 0, "kernel log (address leaks)" },
	{ "quotactl", EPERM, ANY, 0, "filesystem quotas" },
	{ "quotactl_fd", EPERM, ANY, 0, "filesystem quotas" },
	{ "lookup_dcookie", EPERM, ANY, 0, "kernel internals" },
	{ "vhangup", EPERM, ANY, 0, "hang up terminals" },
	{ "iopl", EPERM, ANY, 0, "raw I/O port access" },
	{ "ioperm", EPERM, ANY, 0, "raw I/O port access" },
	/* odd execution domains have hidden kernel bugs before */
	{ "personality", EPERM, A0_NOT_IN, PER_LINUX, "execution domain changes" },
	/* terminal injection: push keystrokes into whoever reads the tty */
	{ "ioctl", EPERM, A1_LOW32_EQ, TIOCSTI, "type into the terminal" },
	{ "ioctl", EPERM, A1_LOW32_EQ, TIOCLINUX, "console injection" },
	/*
	 * A line discipline not yet registered is loaded as a module
	 * (tty-ldisc-N) for anyone where dev.tty.ldisc_autoload is on, as on
	 * distribution kernels: n_hdlc, n_gsm, slip, ppp, each with a CVE
	 * history (CVE-2017-2636).  Any process can make a pty to ask on.
	 */
	{ "ioctl", EPERM, A1_LOW32_EQ, TIOCSETD, "line disciplines (their modules load)" },
	/*
	 * TCP upper-layer protocols: kernel TLS and ESP-in-TCP take over a
	 * connected socket for anyone where they are loaded or built in,
	 * and have a use-after-free history (CVE-2023-0461, its exploit a
	 * kCTF container escape; the tls_sw races of CVE-2024-26583/26585).
	 * OpenSSL and GnuTLS use it only when asked, and fall back to TLS
	 * in user space when it fails.  The level and name are int.
	 */
	{ "setsockopt", EPERM, A12_LOW32_EQ, SOCKOPT(IPPROTO_TCP, TCP_ULP),
	  "kernel TLS and other TCP upper-layer protocols (CVE-2023-0461)" },
	/*
	 * Out-of-band data on unix stream sockets (CONFIG_AF_UNIX_OOB, on in
	 * distribution kernels and here) is a side path through every read
	 * of them, with a use-after-free history: CVE-2025-38236, 6.9 to
	 * 6.15, exploited from Chrome's renderer sandbox to the kernel, and
	 * CVE-2024-36972 before it.  A unix socket holds such data only if a
	 * process sent it, so refusing the flag to the senders keeps that
	 * code out of reach; receiving stays (no filter on the hot path of
	 * recv).  seccomp cannot tell a unix socket from TCP, whose urgent
	 * data goes with it: telnet's interrupt, BSD ftp's abort.  Flags are
	 * unsigned int; bit 0 is the same in any width.  The cost: the three
	 * calls now walk every filter, as ioctl does (the kernel's cache
	 * skipped them), about 400 ns more a send in this VM (SECURITY.md).
	 */
	{ "sendto", EPERM, A3_MASK, MSG_OOB, "MSG_OOB (unix out-of-band data: CVE-2025-38236)" },
	{ "sendmsg", EPERM, A2_MASK, MSG_OOB, "MSG_OOB (unix out-of-band data: CVE-2025-38236)" },
	{ "sendmmsg", EPERM, A3_MASK, MSG_OOB, "MSG_OOB (unix out-of-band data: CVE-2025-38236)" },
	/*
	 * Classic BPF socket filters are JIT-compiled into the host's one
	 * pool of executable BPF memory (net.core.bpf_jit_limit, 504 MiB
	 * here), charged to no cgroup; past it an unprivileged program
	 * cannot be compiled, and where the kernel has no interpreter
	 * (CONFIG_BPF_JIT_ALWAYS_ON, as here and on many distributions) no
	 * seccomp filter either: one sandbox holding 9,000 filters of 4096
	 * instructions on its sockets left the next sandbox unable to load
	 * its filter, and uid 65534 on the host too.  Filters on the
	 * families allowed here (unix, TCP, UDP, routing netlink) are
	 * rare: they serve packet capture, whose sockets are refused.
	 */
	{ "setsockopt", EPERM, A12_LOW32_EQ, SOCKOPT(SOL_SOCKET, SO_ATTACH_FILTER),
	  "classic BPF socket filters (the host's one BPF JIT pool)" },
	{ "setsockopt", EPERM, A12_LOW32_EQ, SOCKOPT(SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF),
	  "classic BPF socket filters (the host's one BPF JIT pool)" },
	/*
	 * SO_RCVLOWAT on a TCP listener grows its receive buffer to what the
	 * low mark asks, up to tcp_rmem's maximum (32 MiB here, 6 MiB by
	 * default), past net.core.rmem_max, which bounds SO_RCVBUF; each
	 * connection it has not accepted inherits that buffer and fills it
	 * from its client, charged to no memory cgroup until accept(), only
	 * to the host's one tcp_mem: 50 such connections held 20 MB each,
	 * 983 MiB of it (one listener's 110 would reach this host's 2.2 GiB,
	 * past which every TCP socket of the host is refused memory), 128 KiB
	 * each without it.  Programs that set a low mark (zerocopy receive)
	 * are rare; apt, pip, curl, node, python set none.
	 */
	{ "setsockopt", EPERM, A12_LOW32_EQ, SOCKOPT(SOL_SOCKET, SO_RCVLOWAT),
	  "SO_RCVLOWAT (grows a listener's buffers past rmem_max, charged to no cgroup)" },
	/*
	 * Huge pages come from one pool for the host (vm.nr_hugepages, kept
	 * for its databases and VMs), charged to no memory cgroup of the
	 * sandbox's: under --memory 16M a sandbox took all 64 MiB of it and
	 * the host's own MAP_HUGETLB failed.  ENOMEM, as an empty pool
	 * answers: programs that ask fall back to ordinary pages.  No
	 * hugetlbfs is mounted inside; these are the other ways in.
	 */
	{ "mmap", ENOMEM, A3_MASK, MAP_HUGETLB, "the host's huge page pool" },
	{ "memfd_create", ENOMEM, A1_MASK, MFD_HUGETLB, "the host's huge page pool" },
	{ "shmget", ENOMEM, A2_MASK, SHM_HUGETLB, "the host's huge page pool" },
	/*
	 * The sandbox's core limit is 1 (child.c: no_core_dumps), the one
	 * value that keeps a crash from the host's core_pattern pipe helper
	 * (systemd-coredump, apport: root, the host's namespaces, the host's
	 * disk); 0 would start it.  A program that lowers the limit wants no
	 * core and gets none: answered 0, unrecorded, the limit kept.  A
	 * prlimit64 without a new limit (a query) reaches the kernel.
	 */
	{ "setrlimit", 0, A0_LOW32_EQ, RLIMIT_CORE, "the core limit stays 1" },
	{ "prlimit64", 0, A1_LOW32_EQ_A2_SET, RLIMIT_CORE, "the core limit stays 1" },
	/*
	 * KSM: where the host runs ksmd, pages a sandbox offers for merging
	 * are merged with the host's own of the same contents, so a write's
	 * copy-on-write time tells the sandbox what the host holds (the
	 * dedup side channel), and a merged page is one a Rowhammer flip in
	 * the sandbox's view changes for its other owners (Flip Feng Shui);
	 * ksmd's scanning is charged to no cgroup of the sandbox's.  EINVAL,
	 * as from a kernel without CONFIG_KSM; unrecorded, as programs that
	 * offer (QEMU) go on without it.
	 */
	{ "madvise", EINVAL, A2_LOW32_EQ, MADV_MERGEABLE, "KSM: merge with the host's pages" },
	{ "prctl", EINVAL, A0_LOW32_EQ, PR_SET_MEMORY_MERGE, "KSM: merge with the host's pages" },
};

/* ---- where a bind writes to the host ----------------------------------- */

/*
 * A setuid or setgid file in a directory a bind writes to is one any local
 * user of the host may run as its owner there: the bind's owner through
 * the idmapped mount, else corral's agent uid, which all of root's
 * sandboxes share (a user who becomes it may signal or trace every one).
 * Inside, set-id bits do nothing (nosuid, no_new_privs), so while such a
 * bind is mounted no mode with one is set, anywhere.  A write, truncate
 * or chown clears the bits for anyone without CAP_FSETID in the host's
 * namespace, root inside included, so a file made with them stays empty;
 * the calls that make one are refused all the same, and openat2, whose
 * mode seccomp cannot read, is ENOSYS (libc and Go fall back to openat).
 * Seccomp cannot tell a directory from a file: a directory's setgid bit
 * goes with them, so GNU chmod, which keeps that bit (chmod 755 of a
 * setgid directory asks for 02755), fails on one; mkdir's mode is let
 * through, and a new directory in a setgid one still inherits it.
 */
#define SETID (S_ISUID | S_ISGID)
/* open's flags that make a file with a mode (O_TMPFILE's own bit) */
#define CREATES (O_CREAT | __O_TMPFILE)
#define CREATE_SETID (((uint64_t)CREATES << 32) | SETID)
#define SETID_WHY "a setuid or setgid bit, while a bind writes to the host"

static const struct deny hostw_table[] = {
	{ "chmod", EPERM, A1_MASK, SETID, SETID_WHY },
	{ "fchmod", EPERM, A1_MASK, SETID, SETID_WHY },
	{ "fchmodat", EPERM, A2_MASK, SETID, SETID_WHY },
	{ "fchmodat2", EPERM, A2_MASK, SETID, SETID_WHY },
	{ "creat", EPERM, A1_MASK, SETID, SETID_WHY },
	{ "mknod", EPERM, A1_MASK, SETID, SETID_WHY },
	{ "mknodat", EPERM, A2_MASK, SETID, SETID_WHY },
	{ "open", EPERM, A12_MASKS, CREATE_SETID, SETID_WHY },
	{ "openat", EPERM, A23_MASKS, CREATE_SETID, SETID_WHY },
	{ "openat2", ENOSYS, ANY, 0, "its mode is out of seccomp's sight, while a bind "
	  "writes to the host" },
};

/* ---- numbers for names libseccomp does not know ------------------------ */

/*
 * libseccomp resolves names from its own tables; Debian 12's 2.5.4 stops
 * at futex_requeue (456), and a rule naming a newer call would do nothing.
 * These are their numbers: from 424 on, one numbering is shared by every
 * architecture in ceilings[] (arch 0 here); the uprobe pair is x86_64's.
 * Used only where libseccomp has no answer, and checked against it where
 * it has one (tests/unit_seccomp.c).
 */
struct number {
	const char *name;
	int nr;
	uint32_t arch;		/* 0: the common numbering from 424 on */
	const char *why;
};

static const struct number numbers[] = {
	/* for naming only: the kernel runs these past every seccomp filter
	 * (seccomp_uprobe_exception); outside its trampoline, ENXIO */
	{ "uretprobe", 335, SCMP_ARCH_X86_64, "Linux 6.11, the uretprobe trampoline's: for naming" },
	{ "uprobe", 336, SCMP_ARCH_X86_64, "the uprobe trampoline's: for naming" },
	{ "statmount", 457, 0, "Linux 6.8: for naming" },
	{ "listmount", 458, 0, "Linux 6.8: for naming" },
	{ "lsm_get_self_attr", 459, 0, "Linux 6.8: denied" },
	{ "lsm_set_self_attr", 460, 0, "Linux 6.8: denied" },
	{ "lsm_list_modules", 461, 0, "Linux 6.8: denied" },
	{ "mseal", 462, 0, "Linux 6.10: for naming" },
	{ "setxattrat", 463, 0, "Linux 6.13: for naming" },
	{ "getxattrat", 464, 0, "Linux 6.13: for naming" },
	{ "listxattrat", 465, 0, "Linux 6.13: for naming" },
	{ "removexattrat", 466, 0, "Linux 6.13: for naming" },
	{ "open_tree_attr", 467, 0, "Linux 6.15: denied (open_tree is)" },
	{ "file_getattr", 468, 0, "Linux 6.17: denied" },
	{ "file_setattr", 469, 0, "Linux 6.17: denied" },
};

/*
 * The highest syscall number of each architecture in the kernel this
 * table was last reviewed against (Linux 6.18: file_setattr, 469).  Every
 * number above it is denied, answered ENOSYS as by a kernel that lacks
 * the call (so libc falls back, as with clone3) and recorded.  On x86_64,
 * numbers with the x32 bit stay with libseccomp, which kills the caller.
 * Raise a ceiling only after reviewing the calls below it.
 */
struct ceiling {
	uint32_t arch;
	const char *arch_name;
	uint32_t highest;
	uint32_t libseccomp_from;	/* numbers from here on: libseccomp's */
};

static const struct ceiling ceilings[] = {
	{ SCMP_ARCH_X86_64, "x86_64", 469, 0x40000000 },
	{ SCMP_ARCH_AARCH64, "aarch64", 469, 0xffffffff },
	{ SCMP_ARCH_RISCV64, "riscv64", 469, 0xffffffff },
};

/* ---- sockets: the one allow list --------------------------------------- */

#define SOCK_FLAGS (SOCK_NONBLOCK | SOCK_CLOEXEC)
#define ANY_TYPE (-1)

struct sock_allow {
	int family;
	int type;		/* SOCK_* without SOCK_FLAGS, or ANY_TYPE */
	int nproto;		/* 0: any protocol the family has */
	int proto[3];		/* 0 is the type's default protocol */
	bool net_only;		/* only where the policy gives a network */
	const char *why;
};

static const struct sock_allow sock_allow[] = {
	{ AF_UNIX, ANY_TYPE, 0, { 0 }, false, "local IPC; the kernel has no protocols for it" },
	/* MPTCP: Go >= 1.24 listeners try it first; a denial per listen is noise
	 * (net.c turns it off in the sandbox's netns: the kernel refuses it) */
	{ AF_INET, SOCK_STREAM, 3, { 0, IPPROTO_TCP, IPPROTO_MPTCP }, false, "TCP" },
	{ AF_INET6, SOCK_STREAM, 3, { 0, IPPROTO_TCP, IPPROTO_MPTCP }, false, "TCP" },
	{ AF_INET, SOCK_DGRAM, 2, { 0, IPPROTO_UDP }, false, "UDP" },
	{ AF_INET6, SOCK_DGRAM, 2, { 0, IPPROTO_UDP }, false, "UDP" },
	{ AF_INET, SOCK_DGRAM, 1, { IPPROTO_ICMP }, true, "ICMP echo (unprivileged ping)" },
	{ AF_INET6, SOCK_DGRAM, 1, { IPPROTO_ICMPV6 }, true, "ICMP echo (unprivileged ping)" },
	/*
	 * Addresses and routes: getaddrinfo(AI_ADDRCONFIG), getifaddrs, ip.
	 * Not NETLINK_SOCK_DIAG: only the supervisor (proxy.c, outside this
	 * filter) uses it; ss inside gets a denial.
	 */
	{ AF_NETLINK, ANY_TYPE, 1, { NETLINK_ROUTE }, false, "routing netlink" },
};

/* socketpair exists only for AF_UNIX; others still create (and load) first */
static const struct sock_allow pair_allow[] = {
	{ AF_UNIX, ANY_TYPE, 0, { 0 }, false, "the only family with pairs" },
};

static const char sock_why[] =
	"a socket family or protocol programs do not use (SCTP, DCCP, L2TP, "
	"netlink crypto/rdma, raw, packet, vsock, ...): its module would load";

/* ---- building the filter ------------------------------------------------ */

struct filter {
	scmp_filter_ctx ctx;
	uint32_t arch;
	bool notify;
	bool net;
	bool hostw;		/* a bind writes to the host */
	bool in_prefix;		/* A0_NOT_IN rules go in the prefix (not_in_block) */
	struct sc_summary sum;
	struct corral_err *err;
};

static uint32_t deny_action(const struct filter *f, int err)
{
	/* EPERM denials go to the supervisor, which answers EPERM and records */
	return f->notify && err == EPERM ? SCMP_ACT_NOTIFY : SCMP_ACT_ERRNO(err);
}

int sc_resolve(uint32_t arch, const char *name)
{
	int nr = seccomp_syscall_resolve_name_arch(arch, name);

	if (nr != __NR_SCMP_ERROR)
		return nr;	/* a number, or libseccomp's "not on this arch" (< 0) */
	for (size_t i = 0; i < ARRAY_LEN(numbers); i++)
		if (!strcmp(numbers[i].name, name) &&
		    (numbers[i].arch == arch ||
		     (numbers[i].arch == 0 && sc_highest(arch) >= 0)))
			return numbers[i].nr;
	return __NR_SCMP_ERROR;
}

int sc_highest(uint32_t arch)
{
	for (size_t i = 0; i < ARRAY_LEN(ceilings); i++)
		if (ceilings[i].arch == arch)
			return (int)ceilings[i].highest;
	return -1;
}

static int rule(struct filter *f, uint32_t action, int nr, const char *what,
		unsigned n, const struct scmp_arg_cmp *cmp)
{
	int r = seccomp_rule_add_array(f->ctx, action, nr, n, cmp);

	if (r < 0)
		return corral_set_errno(f->err, -r, "seccomp: cannot add a rule for %s",
				      what);
	f->sum.rules++;
	return 0;
}

static int add_deny(struct filter *f, const struct deny *d)
{
	uint32_t action = deny_action(f, d->err);
	struct scmp_arg_cmp c[2];
	int nr, r = 0;

	nr = sc_resolve(f->arch, d->name);
	if (nr == __NR_SCMP_ERROR) {
		f->sum.unresolved++;	/* corral doctor names it; the unit test fails */
		return 0;
	}
	if (nr < 0)
		return 0;	/* libseccomp knows it is not on this architecture */

	switch (d->match) {
	case ANY:
		return rule(f, action, nr, d->name, 0, NULL);
	case A0_MASK:
	case A1_MASK:
	case A2_MASK:
	case A3_MASK:
		/* one rule a bit: seccomp compares for equality, not "!= 0" */
		for (int bit = 0; bit < 64 && r == 0; bit++) {
			uint64_t b = 1ull << bit;

			c[0] = SCMP_CMP((unsigned)(d->match - A0_MASK),
					SCMP_CMP_MASKED_EQ, b, b);
			if (d->val & b)
				r = rule(f, action, nr, d->name, 1, c);
		}
		return r;
	case A0_LOW32_EQ:
		c[0] = SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, d->val);
		return rule(f, action, nr, d->name, 1, c);
	case A1_LOW32_EQ:
		c[0] = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, d->val);
		return rule(f, action, nr, d->name, 1, c);
	case A2_LOW32_EQ:
		c[0] = SCMP_A2(SCMP_CMP_MASKED_EQ, 0xffffffffu, d->val);
		return rule(f, action, nr, d->name, 1, c);
	case A1_LOW32_EQ_A2_SET:
		c[0] = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, d->val);
		c[1] = SCMP_A2(SCMP_CMP_NE, 0);
		return rule(f, action, nr, d->name, 2, c);
	case A12_LOW32_EQ:
		c[0] = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, d->val >> 32);
		c[1] = SCMP_A2(SCMP_CMP_MASKED_EQ, 0xffffffffu, (uint32_t)d->val);
		return rule(f, action, nr, d->name, 2, c);
	case A12_MASKS:
	case A23_MASKS:
		/* one rule a pair of bits, the first argument's and the second's */
		for (int i = 0; i < 32 && r == 0; i++)
			for (int j = 0; j < 32 && r == 0; j++) {
				uint64_t a = 1ull << i, b = 1ull << j;
				unsigned arg = d->match == A12_MASKS ? 1 : 2;

				if (!((d->val >> 32) & a) || !(d->val & b))
					continue;
				c[0] = SCMP_CMP(arg, SCMP_CMP_MASKED_EQ, a, a);
				c[1] = SCMP_CMP(arg + 1, SCMP_CMP_MASKED_EQ, b, b);
				r = rule(f, action, nr, d->name, 2, c);
			}
		return r;
	case A0_NOT_IN:
		if (f->in_prefix) {
			f->sum.rules++;		/* in front of libseccomp's program */
			return 0;
		}
		/*
		 * "arg0 is neither val (0) nor the 0xffffffff query", with only
		 * equality tests: a nonzero value with bit 31 clear, or bit 31
		 * set with some other bit clear.  personality() takes 32 bits.
		 */
		for (int bit = 0; bit < 31 && r == 0; bit++) {
			uint64_t b = 1ull << bit, top = 1ull << 31;

			c[0] = SCMP_A0(SCMP_CMP_MASKED_EQ, top | b, b);
			r = rule(f, action, nr, d->name, 1, c);
			c[0] = SCMP_A0(SCMP_CMP_MASKED_EQ, top | b, top);
			if (r == 0)
				r = rule(f, action, nr, d->name, 1, c);
		}
		return r;
	}
	return corral_set_err(f->err, -EINVAL, "seccomp: %s: unknown match %d",
			      d->name, (int)d->match);
}

/*
 * Deny when argument arg is in [lo, hi], on top of the comparisons in
 * pre[]: one MASKED_EQ a power-of-two block (seccomp has no range test
 * and libseccomp takes one comparison an argument).  The kernel reads
 * these arguments as int, so blocks compare the low 32 bits, less the
 * bits in ignore; an open range (hi == UINT64_MAX) is one 64-bit GE, which
 * also denies any value with high bits set.
 */
static int deny_range(struct filter *f, int nr, const char *what,
		      const struct scmp_arg_cmp *pre, unsigned npre,
		      unsigned arg, uint32_t ignore, uint64_t lo, uint64_t hi)
{
	struct scmp_arg_cmp c[3];
	uint32_t action = deny_action(f, EPERM);
	int r = 0;

	if (npre)
		memcpy(c, pre, npre * sizeof(*pre));
	if (hi == UINT64_MAX) {
		c[npre] = (struct scmp_arg_cmp){ arg, SCMP_CMP_GE, lo, 0 };
		return rule(f, action, nr, what, npre + 1, c);
	}
	for (uint64_t v = lo; v <= hi && r == 0; ) {
		uint64_t size = v ? v & -v : 1ull << 32;

		while (v + size - 1 > hi)
			size >>= 1;
		c[npre] = (struct scmp_arg_cmp){ arg, SCMP_CMP_MASKED_EQ,
			(uint32_t)~(size - 1) & ~ignore, v };
		r = rule(f, action, nr, what, npre + 1, c);
		v += size;
	}
	return r;
}

/* Deny every value of arg outside the sorted set allowed[0..n). */
static int deny_outside(struct filter *f, int nr, const char *what,
			const struct scmp_arg_cmp *pre, unsigned npre, unsigned arg,
			uint32_t ignore, const uint64_t *allowed, size_t n, uint64_t max)
{
	uint64_t lo = 0;
	int r = 0;

	for (size_t i = 0; i < n && r == 0; i++) {
		if (allowed[i] > lo)
			r = deny_range(f, nr, what, pre, npre, arg, ignore, lo, allowed[i] - 1);
		lo = allowed[i] + 1;
	}
	if (r == 0 && lo <= max)
		r = deny_range(f, nr, what, pre, npre, arg, ignore, lo, max);
	return r;
}

static void add_sorted(uint64_t *set, size_t *n, uint64_t v)
{
	size_t i = 0;

	while (i < *n && set[i] < v)
		i++;
	if (i < *n && set[i] == v)
		return;
	memmove(set + i + 1, set + i, (*n - i) * sizeof(*set));
	set[i] = v;
	(*n)++;
}

/* The protocols of (family, type) in the table; false: any protocol. */
static bool allowed_protos(const struct filter *f, const struct sock_allow *t,
			   size_t nt, int family, int type, uint64_t *set, size_t *n)
{
	*n = 0;
	for (size_t i = 0; i < nt; i++) {
		if (t[i].family != family || t[i].type != type ||
		    (t[i].net_only && !f->net))
			continue;
		if (t[i].nproto == 0)
			return false;
		for (int k = 0; k < t[i].nproto; k++)
			add_sorted(set, n, (uint32_t)t[i].proto[k]);
	}
	return true;
}

/*
 * Within one allowed family: deny the types and then the protocols the
 * table does not list.  A family listed with ANY_TYPE has its protocols
 * checked whatever the type (netlink: SOCK_RAW or SOCK_DGRAM alike).
 */
static int sock_family_rules(struct filter *f, int nr, const char *what,
			     const struct sock_allow *t, size_t nt, int family)
{
	struct scmp_arg_cmp pre[2] = { SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, family) };
	uint64_t types[16], protos[8];
	size_t ntypes = 0, nprotos;
	bool any_type = false;
	int r = 0;

	for (size_t i = 0; i < nt; i++) {
		if (t[i].family != family || (t[i].net_only && !f->net))
			continue;
		if (t[i].type == ANY_TYPE)
			any_type = true;
		else
			add_sorted(types, &ntypes, (uint64_t)t[i].type);
	}
	if (any_type) {
		if (!allowed_protos(f, t, nt, family, ANY_TYPE, protos, &nprotos))
			return 0;
		return deny_outside(f, nr, what, pre, 1, 2, 0, protos, nprotos, UINT64_MAX);
	}
	/* types above SOCK_PACKET (10) are EINVAL in the kernel already */
	r = deny_outside(f, nr, what, pre, 1, 1, SOCK_FLAGS, types, ntypes, 15);
	for (size_t i = 0; i < ntypes && r == 0; i++) {
		if (!allowed_protos(f, t, nt, family, (int)types[i], protos, &nprotos))
			continue;
		pre[1] = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu & ~SOCK_FLAGS, types[i]);
		r = deny_outside(f, nr, what, pre, 2, 2, 0, protos, nprotos, UINT64_MAX);
	}
	return r;
}

/* The complement of t[] as deny rules on syscall name (socket, socketpair). */
static int sock_rules(struct filter *f, const char *name,
		      const struct sock_allow *t, size_t nt)
{
	uint64_t fams[8];
	size_t nfams = 0;
	int nr = sc_resolve(f->arch, name), r;

	if (nr < 0)
		return 0;	/* socketcall-only architectures: not in ceilings[] */
	for (size_t i = 0; i < nt; i++)
		if (!t[i].net_only || f->net)
			add_sorted(fams, &nfams, (uint64_t)t[i].family);
	r = deny_outside(f, nr, name, NULL, 0, 0, 0, fams, nfams, UINT64_MAX);
	for (size_t i = 0; i < nfams && r == 0; i++)
		r = sock_family_rules(f, nr, name, t, nt, (int)fams[i]);
	return r;
}

static int build(struct filter *f)
{
	int r = seccomp_attr_set(f->ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);

	if (r < 0)
		return corral_set_errno(f->err, -r, "seccomp: cannot refuse foreign ABIs");
	/*
	 * A binary tree by syscall number, not a list of ifs: loading the
	 * filter (the kernel runs it for every syscall number to find those it
	 * may skip) takes 0.44-0.54 ms instead of 0.63-0.67, and a syscall
	 * whose arguments are checked walks a few rules, not all (issue 17)
	 */
	r = seccomp_attr_set(f->ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	if (r < 0)
		return corral_set_errno(f->err, -r, "seccomp: cannot ask for a binary tree");
	for (size_t i = 0; i < ARRAY_LEN(deny_table) && r == 0; i++)
		r = add_deny(f, &deny_table[i]);
	for (size_t i = 0; f->hostw && i < ARRAY_LEN(hostw_table) && r == 0; i++)
		r = add_deny(f, &hostw_table[i]);
	if (r == 0)
		r = sock_rules(f, "socket", sock_allow, ARRAY_LEN(sock_allow));
	if (r == 0)
		r = sock_rules(f, "socketpair", pair_allow, ARRAY_LEN(pair_allow));
	f->sum.highest = sc_highest(f->arch);
	if (f->sum.highest >= 0)
		f->sum.rules++;		/* the ceiling */
	return r;
}

/* ---- the ceiling in front of libseccomp's program ------------------------ */

static int export_program(scmp_filter_ctx ctx, struct sock_filter **out,
			  size_t *len, struct corral_err *err)
{
	struct stat st;
	int fd, r;

	fd = memfd_create("corral-seccomp", MFD_CLOEXEC);
	if (fd < 0)
		return corral_set_errno(err, errno, "seccomp: memfd for the filter");
	r = seccomp_export_bpf(ctx, fd);
	if (r < 0) {
		corral_set_errno(err, -r, "seccomp: cannot compile the filter");
		goto out;
	}
	if (fstat(fd, &st) < 0 || st.st_size <= 0 ||
	    st.st_size % sizeof(struct sock_filter)) {
		r = corral_set_err(err, -EIO, "seccomp: compiled filter of %lld bytes",
				   (long long)st.st_size);
		goto out;
	}
	*len = st.st_size / sizeof(struct sock_filter);
	*out = malloc(st.st_size);
	if (!*out) {
		r = corral_set_err(err, -ENOMEM, "seccomp: no memory for a %zu-instruction filter",
				   *len);
		goto out;
	}
	if (pread(fd, *out, st.st_size, 0) != st.st_size) {
		free(*out);
		*out = NULL;
		r = corral_set_err(err, -EIO, "seccomp: cannot read the compiled filter back");
	}
out:
	close(fd);
	return r;
}

#define CEILING_LEN 6
#define NOT_IN_LEN 6
/* the low half of a 64-bit argument, as the kernel lays seccomp_data out */
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define ARG0_LOW (offsetof(struct seccomp_data, args[0]) + 4)
#else
#define ARG0_LOW offsetof(struct seccomp_data, args[0])
#endif

/*
 * One A0_NOT_IN rule (personality) as a block of the prefix: deny native
 * call nr unless the low 32 bits of arg0 are val or 0xffffffff (the
 * query).  libseccomp takes one equality test an argument: it needed 62
 * rules and 189 of a 500-instruction program for this, which the kernel
 * checks, converts and JIT-compiles at every sandbox's start (measured
 * here: 500 instructions load in 0.86-1.13 ms, 311 in 0.65-0.75 ms).
 */
static void not_in_block(int nr, uint32_t val, uint32_t deny, struct sock_filter *b)
{
	b[0] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
					    offsetof(struct seccomp_data, nr));
	b[1] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, 4);
	b[2] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG0_LOW);
	b[3] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, val, 2, 0);
	b[4] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0xffffffffu, 1, 0);
	b[5] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, deny);
}

/* The A0_NOT_IN rules of the table with a number on arch: their blocks. */
static size_t not_in_rules(uint32_t arch, const struct deny **out, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < ARRAY_LEN(deny_table); i++)
		if (deny_table[i].match == A0_NOT_IN && sc_resolve(arch, deny_table[i].name) >= 0) {
			if (n < max)
				out[n] = &deny_table[i];
			n++;
		}
	return n;
}

#define NOT_IN_MAX 4

/*
 * Native calls numbered above the ceiling are denied before libseccomp's
 * program runs, and so are the A0_NOT_IN rules' calls with other values;
 * everything else (foreign ABIs, x32, nr -1) goes on to it.  Returns the
 * prefix's length (prog NULL: only that).
 */
static size_t ceiling_prefix(const struct ceiling *c, bool notify, struct sock_filter *p)
{
	const uint32_t deny = notify ? SECCOMP_RET_USER_NOTIF :
		SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA);
	const uint32_t deny_eperm = notify ? SECCOMP_RET_USER_NOTIF :
		SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA);
	const struct deny *not_in[NOT_IN_MAX];
	size_t k = not_in_rules(c->arch, not_in, NOT_IN_MAX);
	size_t len = CEILING_LEN + k * NOT_IN_LEN;

	if (!p)
		return len;
	/* to the end of the prefix: libseccomp's program */
	p[0] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
					    offsetof(struct seccomp_data, arch));
	p[1] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, c->arch, 0,
					    (uint8_t)(len - 2));
	p[2] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
					    offsetof(struct seccomp_data, nr));
	p[3] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K,
					    c->libseccomp_from, (uint8_t)(len - 4), 0);
	p[4] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, c->highest, 0, 1);
	p[5] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, deny);
	for (size_t i = 0; i < k; i++)
		not_in_block(sc_resolve(c->arch, not_in[i]->name), (uint32_t)not_in[i]->val,
			     not_in[i]->err == EPERM ? deny_eperm :
			     SECCOMP_RET_ERRNO | ((uint32_t)not_in[i]->err & SECCOMP_RET_DATA),
			     p + CEILING_LEN + i * NOT_IN_LEN);
	return len;
}

static const struct ceiling *ceiling_of(uint32_t arch)
{
	for (size_t i = 0; i < ARRAY_LEN(ceilings); i++)
		if (ceilings[i].arch == arch)
			return &ceilings[i];
	return NULL;
}

bool sc_host_writable(const struct corral_policy *p)
{
	for (size_t i = 0; p && i < p->nbinds; i++)
		if (p->binds[i].writable)
			return true;
	return false;
}

int sc_program(const struct corral_policy *p, bool notify, struct sock_filter **prog,
	       size_t *len, struct sc_summary *sum, struct corral_err *err)
{
	struct filter f = {
		.arch = seccomp_arch_native(), .notify = notify,
		.net = p && p->net != CORRAL_NET_NONE, .hostw = sc_host_writable(p),
		.err = err,
	};
	const struct ceiling *c = ceiling_of(f.arch);
	struct sock_filter *body = NULL;
	size_t n = 0, pre = c ? ceiling_prefix(c, notify, NULL) : 0;
	int r;

	*prog = NULL;
	*len = 0;
	if (c && not_in_rules(c->arch, NULL, 0) > NOT_IN_MAX)
		return corral_set_err(err, -E2BIG, "seccomp: more A0_NOT_IN rules than "
				      "the prefix's %d", NOT_IN_MAX);
	f.in_prefix = c != NULL;
	f.ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!f.ctx)
		return corral_set_err(err, -ENOMEM, "seccomp: cannot create a filter context");
	r = build(&f);
	if (r == 0)
		r = export_program(f.ctx, &body, &n, err);
	seccomp_release(f.ctx);
	if (r < 0)
		return r;
	*len = n + pre;
	if (*len > BPF_MAXINSNS) {
		free(body);
		return corral_set_err(err, -E2BIG, "seccomp: the filter has %zu instructions, "
				      "more than the kernel's %d", *len, BPF_MAXINSNS);
	}
	*prog = malloc(*len * sizeof(**prog));
	if (!*prog) {
		free(body);
		return corral_set_err(err, -ENOMEM, "seccomp: no memory for a %zu-instruction filter",
				      *len);
	}
	if (c)
		ceiling_prefix(c, notify, *prog);
	memcpy(*prog + pre, body, n * sizeof(*body));
	free(body);
	if (sum) {
		*sum = f.sum;
		sum->arch = c ? c->arch_name : "this architecture";
	}
	return 0;
}

/* ---- loading ------------------------------------------------------------ */

bool sc_available(void)
{
	return prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0;
}

bool sc_notify_available(void)
{
	return seccomp_api_get() >= 5;
}

/*
 * A program built in for this ABI, notify and network.  Not asked of
 * libseccomp's API level: that costs nine probing seccomp() calls in every
 * sandbox, and what it stood for is proved by the load itself (sc_load).
 */
const struct sc_prebuilt *sc_prebuilt_find(uint32_t arch, bool notify, bool net, bool hostw)
{
	for (size_t i = 0; i < sc_nprebuilt; i++)
		if (sc_prebuilt[i].arch == arch && sc_prebuilt[i].notify == notify &&
		    sc_prebuilt[i].net == net && sc_prebuilt[i].hostw == hostw)
			return &sc_prebuilt[i];
	return NULL;
}

/* What libseccomp compiles, checking each action against this kernel. */
static int compile_here(struct sc_compiled *f, bool notify, struct corral_err *err)
{
	struct sock_filter *prog;
	int r;

	f->prebuilt = NULL;
	f->notify = notify;
	r = sc_program(f->p, f->notify, &prog, &f->len, NULL, err);
	f->prog = prog;
	return r;
}

int sc_compile(const struct corral_policy *p, bool want_notify, struct sc_compiled *f,
	       struct corral_err *err)
{
	*f = (struct sc_compiled){ .p = p, .want_notify = want_notify };
	f->prebuilt = sc_prebuilt_find(seccomp_arch_native(), want_notify,
				       p && p->net != CORRAL_NET_NONE, sc_host_writable(p));
	if (!f->prebuilt)
		return compile_here(f, want_notify && sc_notify_available(), err);
	/* const and loaded as it is: no copy, no page of heap to fault in */
	f->prog = f->prebuilt->prog;
	f->len = f->prebuilt->len;
	f->notify = want_notify;
	return 0;
}

void sc_discard(struct sc_compiled *f)
{
	if (!f->prebuilt)
		free((void *)f->prog);
	f->prog = NULL;
	f->prebuilt = NULL;
}

static int load_program(const struct sc_compiled *f)
{
	struct sock_fprog fp = { .len = (unsigned short)f->len,
				 .filter = (struct sock_filter *)f->prog };

	return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
		       f->notify ? SECCOMP_FILTER_FLAG_NEW_LISTENER : 0, &fp);
}

/*
 * Whether the kernel runs every action of a built-in program, asked the
 * cheapest way.  The notify programs are loaded with the listener flag,
 * which a kernel without USER_NOTIF (before 5.0) refuses with EINVAL; one
 * that has it also has every other action they use (KILL_PROCESS, 4.14).
 * The others hold KILL_PROCESS for foreign ABIs: one question, where an
 * older kernel would take the program and kill only the thread.
 */
static bool kernel_runs(const struct sc_compiled *f)
{
	uint32_t action = SECCOMP_RET_KILL_PROCESS;

	return f->notify ||
	       syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) == 0;
}

/*
 * 524 is the kernel's ENOTSUPP, which libc has no text for: a kernel
 * without the BPF interpreter (CONFIG_BPF_JIT_ALWAYS_ON) whose JIT
 * refused, as it does for every process but root's once the host's
 * net.core.bpf_jit_limit is used up, by other processes' seccomp filters
 * (another sandbox's) or socket filters.  Said so, for the operator.
 */
#define KERNEL_ENOTSUPP 524

int sc_load_failed(struct corral_err *err, int errnum, size_t len)
{
	if (errnum == KERNEL_ENOTSUPP)
		return corral_set_err(err, -errnum, "seccomp: cannot load the %zu-instruction "
				      "filter: the kernel could not compile it (ENOTSUPP): the "
				      "host's BPF JIT memory (net.core.bpf_jit_limit) is used up "
				      "by other processes' filters", len);
	return corral_set_errno(err, errnum, "seccomp: cannot load the %zu-instruction filter",
				len);
}

int sc_load(struct sc_compiled *f, int *notify_fd, struct corral_err *err)
{
	bool outer;
	int r;

	if (notify_fd)
		*notify_fd = -1;
	if (!f->prog) {
		r = corral_set_err(err, -EINVAL, "seccomp: no compiled filter to load");
		goto out;
	}
	/* what seccomp_load() does first: no privilege gained by exec after */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		r = corral_set_errno(err, errno, "seccomp: PR_SET_NO_NEW_PRIVS");
		goto out;
	}
	/*
	 * A filter before ours (corral under Docker's): seccomp_stack.c.  Not
	 * the filling a daemon loaded ahead, whose length is known.
	 */
	outer = prctl(PR_GET_SECCOMP, 0, 0, 0, 0) != 0 && !sc_prefilled();
	if (f->prebuilt && kernel_runs(f)) {
		r = load_program(f);
		if (r >= 0 || errno != EINVAL)
			goto loaded;
	}
	/*
	 * The kernel refused a built-in program: its listener flag (a notify
	 * one) or KILL_PROCESS (the others).  Compile the program without a
	 * listener, as a kernel without USER_NOTIF always got it (denials fail
	 * in the kernel, unrecorded; the result's layers say so), through
	 * libseccomp, which checks every other action against this kernel and
	 * refuses with a reason what it lacks: never a weaker program.
	 */
	if (f->prebuilt) {
		r = compile_here(f, false, err);
		if (r < 0)
			goto out;
	}
	r = load_program(f);
loaded:
	if (r < 0) {
		r = sc_load_failed(err, errno, f->len);
		goto out;
	}
	if (f->notify && notify_fd)
		*notify_fd = r;
	/* what a process inside may stack of its own: seccomp_stack.c */
	r = sc_pad_chain(sc_ebpf_len(f->prog, f->len), outer, err);
	if (r < 0 && f->notify && notify_fd) {
		close(*notify_fd);
		*notify_fd = -1;
	}
out:
	sc_discard(f);
	return r;
}

/*
 * Only the native ABI: a 32-bit (int 0x80) or x32 call would be a second,
 * unfiltered syscall table, so any call from a foreign ABI kills the process.
 * With notify_fd, denials are sent to whoever holds *notify_fd (the caller
 * must pass it to the supervisor and close it): the supervisor answers
 * and records each one.  Without USER_NOTIF, they fail in the kernel.
 */
int sc_apply(const struct corral_policy *p, int *notify_fd, struct corral_err *err)
{
	struct sc_compiled f;
	int r;

	if (notify_fd)
		*notify_fd = -1;
	r = sc_compile(p, notify_fd != NULL, &f, err);
	if (r < 0)
		return r;
	return sc_load(&f, notify_fd, err);
}

/*
 * Root's daemon fills its chain once, so that each sandbox it forks does
 * not fill its own (3 ms of kernel CPU a start: seccomp_stack.c).  Not
 * under another's filter (its length unknown), nor where the built-in
 * programs may not be what loads (no listener: compiled at start), nor
 * without CAP_SYS_ADMIN, which loading a filter without no_new_privs
 * needs: an unprivileged daemon would have to set no_new_privs on itself,
 * and newuidmap, which it runs, is setuid.
 */
int corral_seccomp_prefill(struct corral_err *err)
{
	size_t own;

	if (geteuid() != 0 || prctl(PR_GET_SECCOMP, 0, 0, 0, 0) != 0)
		return 0;
	own = sc_own_max();
	return own ? sc_prefill(own, err) : 0;
}

/*
 * The longest built-in program for this machine, converted: what a chain
 * filled ahead leaves room for.  0 where the built-in programs may not be
 * what loads (no listener: compiled at start).
 */
size_t sc_own_max(void)
{
	uint32_t arch = seccomp_arch_native();
	size_t own = 0;

	if (!sc_notify_available())
		return 0;
	for (size_t i = 0; i < sc_nprebuilt; i++) {
		size_t n = sc_ebpf_len(sc_prebuilt[i].prog, sc_prebuilt[i].len);

		if (sc_prebuilt[i].arch == arch && n > own)
			own = n;
	}
	return own;
}

/* ---- what the filter is, for events and corral doctor -------------------- */

/*
 * A sandbox may stack filters of its own: one with SECCOMP_RET_LOG (or
 * SECCOMP_FILTER_FLAG_LOG) has the kernel write each call it matches to
 * the audit log, or the kernel's, ratelimited only there.  No filter of
 * ours can read another's program; the host's sysctl decides.
 */
static bool log_reaches_host(void)
{
	char buf[256], *w, *save = NULL;
	ssize_t n;
	int fd = open("/proc/sys/kernel/seccomp/actions_logged", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	for (w = strtok_r(buf, " \n", &save); w; w = strtok_r(NULL, " \n", &save))
		if (!strcmp(w, "log"))
			return true;
	return false;
}

void sc_probe(struct corral_features *f)
{
	struct corral_policy p;
	struct sc_summary sum = { 0 };
	struct corral_err err;
	struct sock_filter *prog;
	size_t len;

	f->seccomp = sc_available();
	f->seccomp_notify = f->seccomp && sc_notify_available();
	corral_policy_init(&p);
	if (sc_program(&p, f->seccomp_notify, &prog, &len, &sum, &err) == 0) {
		free(prog);
		f->seccomp_rules = sum.rules;
		f->seccomp_unresolved = sum.unresolved;
	}
	corral_policy_free(&p);
	f->seccomp_highest = sc_highest(seccomp_arch_native());
	f->seccomp_log_to_host = f->seccomp && log_reaches_host();
}

const char *sc_name(uint32_t arch, int nr, char *buf, size_t len)
{
	char *name = seccomp_syscall_resolve_num_arch(arch, nr);

	if (name) {
		snprintf(buf, len, "%s", name);
		free(name);
		return buf;
	}
	for (size_t i = 0; i < ARRAY_LEN(numbers); i++)
		if (numbers[i].nr == nr && (numbers[i].arch == arch ||
		    (numbers[i].arch == 0 && sc_highest(arch) >= 0))) {
			snprintf(buf, len, "%s", numbers[i].name);
			return buf;
		}
	snprintf(buf, len, "syscall %d", nr);
	return buf;
}

static bool above_ceiling(int nr)
{
	int highest = sc_highest(seccomp_arch_native());

	return highest >= 0 && nr > highest;
}

int sc_deny_errno(int nr)
{
	return above_ceiling(nr) ? ENOSYS : EPERM;
}

/* arg1, arg2: the call's, to tell apart the rules of one call (ioctl's, setsockopt's) */
const char *sc_deny_why(int nr, uint64_t arg1, uint64_t arg2)
{
	uint32_t arch = seccomp_arch_native();

	if (above_ceiling(nr))
		return "newer than the kernel this filter was written for";
	for (size_t i = 0; i < ARRAY_LEN(deny_table); i++)
		if (sc_resolve(arch, deny_table[i].name) == nr &&
		    (deny_table[i].match != A1_LOW32_EQ || (uint32_t)arg1 == deny_table[i].val) &&
		    (deny_table[i].match != A12_LOW32_EQ ||
		     ((uint32_t)arg1 == deny_table[i].val >> 32 &&
		      (uint32_t)arg2 == (uint32_t)deny_table[i].val)))
			return deny_table[i].why;
	for (size_t i = 0; i < ARRAY_LEN(hostw_table); i++)
		if (sc_resolve(arch, hostw_table[i].name) == nr)
			return hostw_table[i].why;
	if (nr == sc_resolve(arch, "socket") || nr == sc_resolve(arch, "socketpair"))
		return sock_why;
	return "not allowed in the sandbox";
}

/* Both tables, the deny list's entries first. */
size_t sc_table_len(void)
{
	return ARRAY_LEN(deny_table) + ARRAY_LEN(hostw_table);
}

const char *sc_table_name(size_t i)
{
	if (i < ARRAY_LEN(deny_table))
		return deny_table[i].name;
	i -= ARRAY_LEN(deny_table);
	return i < ARRAY_LEN(hostw_table) ? hostw_table[i].name : NULL;
}

size_t sc_numbers_len(void)
{
	return ARRAY_LEN(numbers);
}

const char *sc_number(size_t i, int *nr, uint32_t *arch)
{
	if (i >= ARRAY_LEN(numbers))
		return NULL;
	*nr = numbers[i].nr;
	*arch = numbers[i].arch;
	return numbers[i].name;
}
