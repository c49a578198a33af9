/*
 * attack.c - one attempt to get past the sandbox, named on the command line.
 *
 * Prints "blocked: <detail>" and exits 0 when the sandbox stopped it,
 * "ESCAPED: <detail>" and exits 1 when it did not.  Attempts that the
 * sandbox answers by killing the process (foreign syscall ABIs) are
 * judged by the caller from the exit signal.  Static, so it needs nothing
 * from the sandbox's view of the host.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <dirent.h>
#include <sys/socket.h>

static int verdict(long r, const char *what)
{
	if (r < 0) {
		printf("blocked: %s: %s (errno %d)\n", what, strerror(errno), errno);
		return 0;
	}
	printf("ESCAPED: %s succeeded (returned %ld)\n", what, r);
	return 1;
}

static int do_ptrace(void)
{
	pid_t pid = fork();
	long r;

	if (pid == 0) {
		pause();
		_exit(0);
	}
	r = ptrace(PTRACE_ATTACH, pid, 0, 0);
	int e = errno;
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	errno = e;
	return verdict(r, "ptrace(PTRACE_ATTACH) of a sibling");
}

static int do_clone_ns(void)
{
	long r = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);

	if (r == 0)
		_exit(0);
	if (r > 0)
		waitpid(r, NULL, 0);
	return verdict(r, "clone(CLONE_NEWUSER)");
}

static int do_clone3(void)
{
	char args[88] = { 0 };
	long r = syscall(SYS_clone3, args, sizeof(args));

	if (r == 0)
		_exit(0);
	if (r < 0 && errno == ENOSYS) {
		printf("blocked: clone3: ENOSYS (errno %d)\n", errno);
		return 0;
	}
	if (r > 0)
		waitpid(r, NULL, 0);
	return verdict(r, "clone3");
}

static int do_tiocsti(void)
{
	char c = 'x';
	int fd = open("/dev/tty", O_RDWR);

	/* No controlling terminal (setsid) is the first lock; try fd 0 too. */
	if (fd < 0)
		fd = 0;
	return verdict(ioctl(fd, TIOCSTI, &c), "ioctl(TIOCSTI)");
}

static int do_tiocsti_high(void)
{
	char c = 'x';

	/* The high 32 bits are ignored by the kernel; the filter must too. */
	return verdict(syscall(SYS_ioctl, 0, 0x100000000ull | TIOCSTI, &c),
		       "ioctl(TIOCSTI | 1<<32)");
}

static int do_bpf(void)
{
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.map_type = BPF_MAP_TYPE_ARRAY;
	attr.key_size = 4;
	attr.value_size = 4;
	attr.max_entries = 1;
	return verdict(syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof(attr)), "bpf");
}

static int do_perf(void)
{
	struct perf_event_attr pe;

	memset(&pe, 0, sizeof(pe));
	pe.type = PERF_TYPE_SOFTWARE;
	pe.size = sizeof(pe);
	pe.config = PERF_COUNT_SW_CPU_CLOCK;
	return verdict(syscall(SYS_perf_event_open, &pe, 0, -1, -1, 0),
		       "perf_event_open");
}

static int do_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int bad = 0;

	if (!d)
		return verdict(-1, "opendir /proc/self/fd");
	while ((de = readdir(d))) {
		int fd = atoi(de->d_name);

		if (de->d_name[0] == '.' || fd <= 2 || fd == dirfd(d))
			continue;
		char link[256] = "";
		char path[64];

		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		if (readlink(path, link, sizeof(link) - 1) < 0)
			strcpy(link, "?");
		printf("ESCAPED: inherited fd %d -> %s\n", fd, link);
		bad = 1;
	}
	closedir(d);
	if (!bad)
		printf("blocked: no fd beyond 0-2\n");
	return bad;
}

static int do_x32(void)
{
	/* getpid through the x32 ABI: the filter must kill us. */
	long r = syscall(0x40000000 | SYS_getpid);

	return verdict(r < 0 ? r : 1, "x32 getpid");
}

static int do_int80(void)
{
	long r;

	/* getpid through the i386 ABI (int 0x80): the filter must kill us. */
	__asm__ volatile("int $0x80" : "=a"(r) : "a"(20) : "memory");
	if (r < 0) {
		errno = -r;
		r = -1;
	}
	return verdict(r, "int 0x80 getpid");
}

struct attack {
	const char *name;
	int (*fn)(void);
};

static int do_mount(void) { return verdict(mount("none", "/tmp", "tmpfs", 0, NULL), "mount tmpfs"); }
static int do_umount(void) { return verdict(umount2("/proc", MNT_DETACH), "umount /proc"); }
static int do_unshare(void) { return verdict(unshare(CLONE_NEWUSER), "unshare(CLONE_NEWUSER)"); }
static int do_unshare_net(void) { return verdict(unshare(CLONE_NEWNET), "unshare(CLONE_NEWNET)"); }
static int do_setns(void) { return verdict(setns(open("/proc/self/ns/net", O_RDONLY), 0), "setns"); }
static int do_keyctl(void) { return verdict(syscall(SYS_keyctl, 0 /* GET_KEYRING_ID */, -3, 0), "keyctl"); }
static int do_add_key(void) { return verdict(syscall(SYS_add_key, "user", "x", "y", 1, -3), "add_key"); }
static int do_io_uring(void) { char p[120] = { 0 }; return verdict(syscall(SYS_io_uring_setup, 4, p), "io_uring_setup"); }
static int do_userfaultfd(void) { return verdict(syscall(SYS_userfaultfd, 0), "userfaultfd"); }
static int do_personality(void) { return verdict(personality(READ_IMPLIES_EXEC), "personality(READ_IMPLIES_EXEC)"); }
static int do_pvr(void) { char b[8]; struct iovec l = { b, 8 }, r = { b, 8 }; return verdict(process_vm_readv(1, &l, 1, &r, 1, 0), "process_vm_readv of pid 1"); }
static int do_pivot(void) { return verdict(syscall(SYS_pivot_root, "/tmp", "/tmp"), "pivot_root"); }
static int do_chroot(void) { return verdict(chroot("/tmp"), "chroot"); }
static int do_handle(void) { char h[136] = { 0 }; ((unsigned int *)h)[0] = 8; return verdict(syscall(SYS_open_by_handle_at, AT_FDCWD, h, O_RDONLY), "open_by_handle_at"); }
static int do_fsopen(void) { return verdict(syscall(SYS_fsopen, "tmpfs", 0), "fsopen"); }
static int do_open_tree(void) { return verdict(syscall(SYS_open_tree, AT_FDCWD, "/", 1 /* CLONE */), "open_tree"); }
static int do_kexec(void) { return verdict(syscall(SYS_kexec_load, 0, 0, 0, 0), "kexec_load"); }
static int do_init_module(void) { return verdict(syscall(SYS_init_module, "", 0, ""), "init_module"); }
static int do_acct(void) { return verdict(acct("/tmp/acct"), "acct"); }
static int do_swapon(void) { return verdict(syscall(SYS_swapon, "/tmp/swap", 0), "swapon"); }
static int do_reboot(void) { return verdict(syscall(SYS_reboot, 0xfee1dead, 672274793, 0x4321fedc, 0), "reboot"); }
static int do_vsock(void) { return verdict(socket(40 /* AF_VSOCK */, SOCK_STREAM, 0), "socket(AF_VSOCK): the VM host"); }
static int do_af_alg(void) { return verdict(socket(38 /* AF_ALG */, SOCK_SEQPACKET, 0), "socket(AF_ALG)"); }
static int do_af_key(void) { return verdict(socket(15 /* AF_KEY */, SOCK_RAW, 2), "socket(AF_KEY)"); }
static int do_pidfd_getfd(void) { return verdict(syscall(SYS_pidfd_getfd, 0, 0, 0), "pidfd_getfd"); }

static const struct attack attacks[] = {
	{ "ptrace", do_ptrace }, { "mount", do_mount }, { "umount", do_umount },
	{ "unshare", do_unshare }, { "unshare-net", do_unshare_net },
	{ "clone-ns", do_clone_ns }, { "clone3", do_clone3 }, { "setns", do_setns },
	{ "keyctl", do_keyctl }, { "add_key", do_add_key }, { "bpf", do_bpf },
	{ "io_uring", do_io_uring }, { "perf", do_perf },
	{ "userfaultfd", do_userfaultfd }, { "tiocsti", do_tiocsti },
	{ "tiocsti-high", do_tiocsti_high }, { "personality", do_personality },
	{ "process_vm_readv", do_pvr }, { "pivot_root", do_pivot },
	{ "chroot", do_chroot }, { "open_by_handle_at", do_handle },
	{ "fsopen", do_fsopen }, { "open_tree", do_open_tree },
	{ "kexec", do_kexec }, { "init_module", do_init_module },
	{ "acct", do_acct }, { "swapon", do_swapon }, { "reboot", do_reboot },
	{ "pidfd_getfd", do_pidfd_getfd }, { "fds", do_fds },
	{ "vsock", do_vsock }, { "af_alg", do_af_alg }, { "af_key", do_af_key },
	{ "x32", do_x32 }, { "int80", do_int80 },
};

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "list")) {
		for (size_t i = 0; i < sizeof(attacks) / sizeof(attacks[0]); i++)
			printf("%s\n", attacks[i].name);
		return 0;
	}
	for (size_t i = 0; argc == 2 && i < sizeof(attacks) / sizeof(attacks[0]); i++)
		if (!strcmp(argv[1], attacks[i].name))
			return attacks[i].fn();
	fprintf(stderr, "usage: attack NAME | list\n");
	return 2;
}
