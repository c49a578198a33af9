/*
 * unit_seccomp.c - the filter's tables, and what its compiled program
 * decides, without loading it: a small classic-BPF interpreter runs the
 * program sc_apply() would load over syscall numbers and arguments.
 */
#include "internal.h"
#include "unit.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <linux/netlink.h>
#include <sched.h>
#include <signal.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <stddef.h>
#include <unistd.h>

#define NR_SOCKET 41
#define NR_SOCKETPAIR 53
#define X32_BIT 0x40000000u

#define BAD_PROGRAM 0xdeadbeefu

/* Classic BPF as the kernel runs a seccomp filter; BAD_PROGRAM on an
 * opcode the interpreter does not know (the test then fails). */
static uint32_t run(const struct sock_filter *prog, size_t len,
		    const struct seccomp_data *d)
{
	uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = { 0 };

	for (size_t pc = 0; pc < len; pc++) {
		const struct sock_filter *i = &prog[pc];
		bool jump;

		switch (i->code) {
		case BPF_LD | BPF_W | BPF_ABS:
			if (i->k > sizeof(*d) - 4)
				return BAD_PROGRAM;
			memcpy(&a, (const char *)d + i->k, 4);
			continue;
		case BPF_LD | BPF_MEM:
			a = mem[i->k % BPF_MEMWORDS];
			continue;
		case BPF_LDX | BPF_MEM:
			x = mem[i->k % BPF_MEMWORDS];
			continue;
		case BPF_ST:
			mem[i->k % BPF_MEMWORDS] = a;
			continue;
		case BPF_STX:
			mem[i->k % BPF_MEMWORDS] = x;
			continue;
		case BPF_MISC | BPF_TAX:
			x = a;
			continue;
		case BPF_MISC | BPF_TXA:
			a = x;
			continue;
		case BPF_ALU | BPF_AND | BPF_K:
			a &= i->k;
			continue;
		case BPF_JMP | BPF_JA:
			pc += i->k;
			continue;
		case BPF_RET | BPF_K:
			return i->k;
		case BPF_JMP | BPF_JEQ | BPF_K:
			jump = a == i->k;
			break;
		case BPF_JMP | BPF_JGT | BPF_K:
			jump = a > i->k;
			break;
		case BPF_JMP | BPF_JGE | BPF_K:
			jump = a >= i->k;
			break;
		case BPF_JMP | BPF_JSET | BPF_K:
			jump = (a & i->k) != 0;
			break;
		default:
			fprintf(stderr, "  unknown BPF opcode 0x%x at %zu\n", i->code, pc);
			return BAD_PROGRAM;
		}
		pc += jump ? i->jt : i->jf;
	}
	return BAD_PROGRAM;	/* fell off the end: the kernel refuses such a program */
}

struct prog {
	struct sock_filter *insns;
	size_t len;
	struct sc_summary sum;
};

static bool compile(struct prog *p, bool notify, enum corral_net_mode net)
{
	struct corral_policy pol;
	struct corral_err err = { 0 };
	int r;

	corral_policy_init(&pol);
	pol.net = net;
	r = sc_program(&pol, notify, &p->insns, &p->len, &p->sum, &err);
	corral_policy_free(&pol);
	if (r < 0)
		fprintf(stderr, "  sc_program: %s\n", err.msg);
	return r == 0;
}

static uint32_t decide(const struct prog *p, uint32_t arch, uint32_t nr,
		       uint64_t a0, uint64_t a1, uint64_t a2)
{
	struct seccomp_data d = { .nr = (int)nr, .arch = arch,
				  .args = { a0, a1, a2 } };

	return run(p->insns, p->len, &d);
}

static uint32_t call(const struct prog *p, uint32_t nr, uint64_t a0, uint64_t a1,
		     uint64_t a2)
{
	return decide(p, SCMP_ARCH_X86_64, nr, a0, a1, a2);
}

static bool x86_64_here(void)
{
	if (seccomp_arch_native() == SCMP_ARCH_X86_64)
		return true;
	printf("  (not x86_64: the numbers below are x86_64's; skipped)\n");
	return false;
}

/* Every name of the deny table resolves on x86_64, by libseccomp or by the
 * table's own numbers; a name with neither would add no rule at all. */
TEST(table_names_resolve_on_x86_64)
{
	for (size_t i = 0; i < sc_table_len(); i++) {
		const char *name = sc_table_name(i);
		int nr = sc_resolve(SCMP_ARCH_X86_64, name);

		if (nr == __NR_SCMP_ERROR)
			fprintf(stderr, "  %s: unknown to libseccomp %u.%u.%u and without a number\n",
				name, seccomp_version()->major, seccomp_version()->minor,
				seccomp_version()->micro);
		CHECK(nr != __NR_SCMP_ERROR);
	}
	CHECK(sc_table_name(sc_table_len()) == NULL);
}

/* The numbers the table carries agree with libseccomp where it knows the
 * name, and sit at or below the ceiling (else they would be unreachable). */
TEST(numbers_agree_with_libseccomp)
{
	int highest = sc_highest(SCMP_ARCH_X86_64);

	CHECK(highest == 469);
	for (size_t i = 0; i < sc_numbers_len(); i++) {
		uint32_t arch;
		int nr, lib;
		const char *name = sc_number(i, &nr, &arch);

		CHECK(arch == 0 || arch == SCMP_ARCH_X86_64);
		CHECK(nr > 0 && nr <= highest);
		CHECK(sc_resolve(SCMP_ARCH_X86_64, name) == nr);
		lib = seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86_64, name);
		if (lib >= 0 && lib != nr)
			fprintf(stderr, "  %s: libseccomp says %d, the table %d\n", name, lib, nr);
		CHECK(lib < 0 || lib == nr);
	}
	/* a call only on other architectures is not an error */
	CHECK(sc_resolve(SCMP_ARCH_X86_64, "umount") < 0);
	CHECK(sc_resolve(SCMP_ARCH_X86_64, "umount") != __NR_SCMP_ERROR);
	CHECK(sc_resolve(SCMP_ARCH_X86_64, "no_such_call") == __NR_SCMP_ERROR);
}

TEST(names_for_events)
{
	char buf[64];

	CHECK(!strcmp(sc_name(SCMP_ARCH_X86_64, 237, buf, sizeof(buf)), "mbind"));
	CHECK(!strcmp(sc_name(SCMP_ARCH_X86_64, 467, buf, sizeof(buf)), "open_tree_attr"));
	CHECK(!strcmp(sc_name(SCMP_ARCH_X86_64, 336, buf, sizeof(buf)), "uprobe"));
	CHECK(!strcmp(sc_name(SCMP_ARCH_X86_64, 470, buf, sizeof(buf)), "syscall 470"));
	CHECK(!strcmp(sc_name(SCMP_ARCH_X86_64, 1000, buf, sizeof(buf)), "syscall 1000"));
	if (!x86_64_here())
		return;
	CHECK(sc_deny_errno(237) == EPERM);
	CHECK(sc_deny_errno(470) == ENOSYS);
	CHECK_STR_CONTAINS(sc_deny_why(237, 0, 0), "NUMA");
	CHECK_STR_CONTAINS(sc_deny_why(470, 0, 0), "newer than the kernel");
	CHECK_STR_CONTAINS(sc_deny_why(NR_SOCKET, 0, 0), "SCTP");
	/* one call, several rules: the one the arguments matched */
	CHECK_STR_CONTAINS(sc_deny_why(16, TIOCSTI, 0), "type into");
	CHECK_STR_CONTAINS(sc_deny_why(16, 0x100000000ull | TIOCSETD, 0), "line disciplines");
	/* setsockopt's by level and name: SOL_SOCKET holds two reasons */
	CHECK_STR_CONTAINS(sc_deny_why(54, SOL_SOCKET, SO_ATTACH_FILTER), "classic BPF");
	CHECK_STR_CONTAINS(sc_deny_why(54, SOL_SOCKET, SO_RCVLOWAT), "SO_RCVLOWAT");
	CHECK_STR_CONTAINS(sc_deny_why(54, IPPROTO_TCP, TCP_ULP), "kernel TLS");
}

TEST(program_fits_and_counts)
{
	struct prog p;

	if (!x86_64_here())
		return;
	CHECK(compile(&p, true, CORRAL_NET_NONE));
	CHECK(p.len > 6 && p.len <= BPF_MAXINSNS);
	CHECK(p.sum.highest == 469);
	CHECK(p.sum.unresolved == 0);
	CHECK(p.sum.rules > sc_table_len());
	CHECK(!strcmp(p.sum.arch, "x86_64"));
	free(p.insns);
}

/*
 * init compiles ahead (sc_compile) and loads later (sc_load): what it
 * loads is the program sc_program makes, instruction for instruction,
 * and a load with nothing compiled fails before it changes anything.
 */
TEST(compiled_ahead_is_the_same_program)
{
	struct corral_policy pol;
	struct corral_err err = { 0 };
	struct sc_compiled f, none = { 0 };
	struct sock_filter *prog = NULL;
	size_t len = 0;
	int fd = 5;

	corral_policy_init(&pol);
	pol.net = CORRAL_NET_PROXY;
	CHECK(sc_compile(&pol, false, &f, &err) == 0);
	CHECK(!f.notify);
	CHECK(sc_program(&pol, false, &prog, &len, NULL, &err) == 0);
	CHECK(f.len == len && len > 0);
	CHECK(f.prog && prog && !memcmp(f.prog, prog, len * sizeof(*prog)));
	free(prog);
	sc_discard(&f);
	CHECK(!f.prog);
	/* the built-in notify program; whether the kernel takes it is sc_load's */
	CHECK(sc_compile(&pol, true, &f, &err) == 0);
	CHECK(f.notify == (f.prebuilt != NULL || sc_notify_available()));
	sc_discard(&f);
	CHECK(sc_load(&none, &fd, &err) == -EINVAL);
	CHECK(fd == -1);
	CHECK(prctl(PR_GET_SECCOMP, 0, 0, 0, 0) == 0);
	corral_policy_free(&pol);
}

/*
 * The programs built into corral (tools/sc_prebuild.c) are what libseccomp
 * compiles now, instruction for instruction, and sc_compile hands them out:
 * a stale or wrong table fails here, not in a sandbox.  On the machine that
 * built corral every combination libseccomp compiles is there (notify ones
 * where the kernel has USER_NOTIF).
 */
TEST(built_in_programs_are_compiled_ones)
{
	uint32_t arch = seccomp_arch_native();
	struct corral_err err = { 0 };
	size_t checked = 0;

	/* every program libseccomp compiles here is built in */
	for (int notify = 0; notify <= (int)sc_notify_available(); notify++)
		for (int net = 0; net <= 1; net++)
			for (int hostw = 0; hostw <= 1; hostw++) {
				struct corral_policy pol;
				struct sock_filter *prog = NULL;
				size_t len = 0;

				corral_policy_init(&pol);
				pol.net = net ? CORRAL_NET_PROXY : CORRAL_NET_NONE;
				CHECK(!hostw || corral_policy_add_bind(&pol, "/tmp", true, &err) == 0);
				CHECK(sc_host_writable(&pol) == hostw);
				if (sc_program(&pol, notify, &prog, &len, NULL, &err) == 0)
					CHECK(sc_prebuilt_find(arch, notify, net, hostw));
				free(prog);
				corral_policy_free(&pol);
			}
	for (size_t i = 0; i < sc_nprebuilt; i++) {
		const struct sc_prebuilt *pb = &sc_prebuilt[i];
		struct corral_policy pol;
		struct sock_filter *prog = NULL;
		struct sc_compiled f = { 0 };
		size_t len = 0;

		CHECK(pb->arch == arch);
		corral_policy_init(&pol);
		pol.net = pb->net ? CORRAL_NET_PROXY : CORRAL_NET_NONE;
		CHECK(!pb->hostw || corral_policy_add_bind(&pol, "/tmp", true, &err) == 0);
		CHECK(sc_program(&pol, pb->notify, &prog, &len, NULL, &err) == 0);
		CHECK(len == pb->len && !memcmp(prog, pb->prog, len * sizeof(*prog)));
		CHECK(sc_prebuilt_find(arch, pb->notify, pb->net, pb->hostw) == pb);
		CHECK(sc_compile(&pol, pb->notify, &f, &err) == 0);
		CHECK(f.prebuilt == pb && f.prog == pb->prog);
		CHECK(f.notify == pb->notify && f.len == len &&
		      !memcmp(f.prog, prog, len * sizeof(*prog)));
		sc_discard(&f);
		free(prog);
		corral_policy_free(&pol);
		checked++;
	}
	CHECK(checked == sc_nprebuilt);
	/* another ABI is never served one of these */
	CHECK(!sc_prebuilt_find(SCMP_ARCH_X86, false, false, false));
	CHECK(!sc_prebuilt_find(SCMP_ARCH_X32, true, true, true));
}

/*
 * sc_load in a child of ours, on a kernel made to refuse the listener
 * flag or not (refuse_listener): a filter of the test's own answers
 * EINVAL to seccomp(SET_MODE_FILTER) with NEW_LISTENER, as a kernel before
 * 5.0 does, also to libseccomp's probes.  The exit status says what held:
 * 0, or the bits of what did not.
 */
#define LOAD_FAILED	0x01
#define NOT_BUILT_IN	0x02
#define LISTENER_WRONG	0x04
#define NOT_FILTERED	0x08
#define KEYCTL_ALLOWED	0x10
#define NO_CHILD	0x80

static int load_in_child(bool refuse_listener, bool *got_listener)
{
	struct sock_filter refuse[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_seccomp, 0, 5),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SECCOMP_SET_MODE_FILTER, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
		BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, SECCOMP_FILTER_FLAG_NEW_LISTENER, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EINVAL),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog fp = { sizeof(refuse) / sizeof(refuse[0]), refuse };
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return NO_CHILD;
	if (pid == 0) {
		struct corral_policy pol;
		struct corral_err err = { 0 };
		struct sc_compiled f;
		int fd = -2, bad = 0;

		corral_policy_init(&pol);
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
		    (refuse_listener && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fp) < 0))
			_exit(NO_CHILD);
		if (sc_compile(&pol, true, &f, &err) < 0 || !f.prebuilt || !f.notify)
			bad |= NOT_BUILT_IN;
		if (sc_load(&f, &fd, &err) < 0) {
			fprintf(stderr, "  sc_load: %s\n", err.msg);
			_exit(bad | LOAD_FAILED);
		}
		if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) != SECCOMP_MODE_FILTER)
			bad |= NOT_FILTERED;
		/* refused: denials fail in the kernel, nobody to notify */
		if (refuse_listener && (fd != -1 ||
		    syscall(__NR_keyctl, 0, 0, 0, 0, 0) != -1 || errno != EPERM))
			bad |= fd != -1 ? LISTENER_WRONG : KEYCTL_ALLOWED;
		/* taken: a listener (a denied call would wait on it: none made) */
		if (!refuse_listener && fd < 0)
			bad |= LISTENER_WRONG;
		_exit(bad | (fd >= 0 ? 0x40 : 0));
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return NO_CHILD;
	*got_listener = WEXITSTATUS(status) & 0x40;
	return WEXITSTATUS(status) & ~0x40;
}

/* The built-in notify program goes in as it is, with its listener. */
TEST(built_in_program_loads)
{
	bool listener = false;

	if (!x86_64_here() || !sc_notify_available())
		return;
	CHECK(load_in_child(false, &listener) == 0);
	CHECK(listener);
}

/*
 * A kernel that refuses the built-in program's listener gets libseccomp's
 * program for it, probed then (no listener, denials EPERM in the kernel),
 * not an error and not no filter.
 */
TEST(refused_built_in_program_is_compiled_instead)
{
	bool listener = true;
	int r;

	if (!x86_64_here())
		return;
	r = load_in_child(true, &listener);
	if (r)
		fprintf(stderr, "  child: 0x%x\n", r);
	CHECK(r == 0);
	CHECK(!listener);
}

/* The calls of issue 19, the ceiling, and the ABI kills. */
TEST(numbers_decided)
{
	static const unsigned denied[] = {
		154, 237, 238, 256, 279, 440, 443, 450, 459, 460, 461,
		467, 468, 469, 165, 101, 321, 425,
	};
	/* uretprobe and uprobe (335, 336): the kernel skips filters for them */
	static const unsigned allowed[] = {
		0, 1, 2, 39, 59, 60, 231, 335, 336, 424, 437, 451, 457, 458, 462, 463,
	};
	unsigned wrong = 0;
	struct prog p;

	if (!x86_64_here() || !compile(&p, true, CORRAL_NET_NONE))
		return;
	for (size_t i = 0; i < sizeof(denied) / sizeof(denied[0]); i++) {
		if (call(&p, denied[i], 0, 0, 0) != SECCOMP_RET_USER_NOTIF)
			fprintf(stderr, "  %u not denied\n", denied[i]);
		CHECK(call(&p, denied[i], 0, 0, 0) == SECCOMP_RET_USER_NOTIF);
	}
	/* get_mempolicy (239): ENOSYS, unrecorded, as without CONFIG_NUMA */
	CHECK(call(&p, 239, 0, 0, 0) == (SECCOMP_RET_ERRNO | ENOSYS));
	for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++) {
		if (call(&p, allowed[i], 0, 0, 0) != SECCOMP_RET_ALLOW)
			fprintf(stderr, "  %u not allowed\n", allowed[i]);
		CHECK(call(&p, allowed[i], 0, 0, 0) == SECCOMP_RET_ALLOW);
	}
	/* above the ceiling, near and far, up to the x32 bit */
	for (uint32_t nr = 470; nr < 2000; nr++)
		if (call(&p, nr, 0, 0, 0) != SECCOMP_RET_USER_NOTIF && wrong++ < 5)
			fprintf(stderr, "  %u, above the ceiling, not denied\n", nr);
	CHECK(wrong == 0);
	CHECK(call(&p, X32_BIT - 1, 0, 0, 0) == SECCOMP_RET_USER_NOTIF);
	/* x32 and i386 are killed, nr -1 (a tracer's "skip") passes */
	CHECK(call(&p, X32_BIT | 39, 0, 0, 0) == SECCOMP_RET_KILL_PROCESS);
	CHECK(call(&p, X32_BIT | 1000, 0, 0, 0) == SECCOMP_RET_KILL_PROCESS);
	CHECK(decide(&p, SCMP_ARCH_X86, 20, 0, 0, 0) == SECCOMP_RET_KILL_PROCESS);
	CHECK(decide(&p, SCMP_ARCH_X86, 1000, 0, 0, 0) == SECCOMP_RET_KILL_PROCESS);
	CHECK(call(&p, 0xffffffffu, 0, 0, 0) == SECCOMP_RET_ALLOW);
	/* clone3: ENOSYS from the filter, so libc falls back to clone */
	CHECK(call(&p, 435, 0, 0, 0) == (SECCOMP_RET_ERRNO | ENOSYS));
	/* io_setup: ENOSYS, as without CONFIG_AIO (a host-wide pool) */
	CHECK(call(&p, 206, 1, 0, 0) == (SECCOMP_RET_ERRNO | ENOSYS));
	free(p.insns);

	/* without USER_NOTIF: EPERM in the kernel, ENOSYS above the ceiling */
	if (!compile(&p, false, CORRAL_NET_NONE))
		return;
	CHECK(call(&p, 237, 0, 0, 0) == (SECCOMP_RET_ERRNO | EPERM));
	CHECK(call(&p, 470, 0, 0, 0) == (SECCOMP_RET_ERRNO | ENOSYS));
	CHECK(call(&p, X32_BIT | 39, 0, 0, 0) == SECCOMP_RET_KILL_PROCESS);
	free(p.insns);
}

TEST(arguments_decided)
{
	struct prog p;

	if (!x86_64_here() || !compile(&p, true, CORRAL_NET_NONE))
		return;
	/* clone and unshare: only namespace flags */
	CHECK(call(&p, 56, SIGCHLD, 0, 0) == SECCOMP_RET_ALLOW);
	CHECK(call(&p, 56, CLONE_NEWUSER | SIGCHLD, 0, 0) == SECCOMP_RET_USER_NOTIF);
	CHECK(call(&p, 272, CLONE_FILES, 0, 0) == SECCOMP_RET_ALLOW);
	CHECK(call(&p, 272, CLONE_NEWNET, 0, 0) == SECCOMP_RET_USER_NOTIF);
	/* personality: the query and PER_LINUX only */
	CHECK(call(&p, 135, 0xffffffff, 0, 0) == SECCOMP_RET_ALLOW);
	CHECK(call(&p, 135, PER_LINUX, 0, 0) == SECCOMP_RET_ALLOW);
	CHECK(call(&p, 135, ADDR_NO_RANDOMIZE, 0, 0) == SECCOMP_RET_USER_NOTIF);
	/* setsockopt: classic BPF socket filters and SO_RCVLOWAT only, at SOL_SOCKET */
	CHECK(call(&p, 54, 3, SOL_SOCKET, SO_ATTACH_FILTER) == SECCOMP_RET_USER_NOTIF);
	CHECK(call(&p, 54, 3, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF) == SECCOMP_RET_USER_NOTIF);
	CHECK(call(&p, 54, 3, SOL_SOCKET, SO_DETACH_FILTER) == SECCOMP_RET_ALLOW);
	CHECK(call(&p, 54, 3, SOL_SOCKET, SO_RCVBUF) == SECCOMP_RET_ALLOW);
	/* SO_RCVLOWAT grows a listener's buffers past rmem_max */
	CHECK(call(&p, 54, 3, SOL_SOCKET, SO_RCVLOWAT) == SECCOMP_RET_USER_NOTIF);
	CHECK(call(&p, 54, 3, SOL_SOCKET, SO_SNDLOWAT) == SECCOMP_RET_ALLOW);
	CHECK(call(&p, 54, 3, IPPROTO_TCP, SO_RCVLOWAT) == SECCOMP_RET_ALLOW);
	CHECK(call(&p, 54, 3, IPPROTO_IP, SO_ATTACH_FILTER) == SECCOMP_RET_ALLOW);
	free(p.insns);
}

/*
 * A kernel without the BPF interpreter answers 524 (ENOTSUPP, no text in
 * libc) when its JIT pool is used up: the error names the pool.
 */
TEST(jit_pool_refusal_named)
{
	struct corral_err err = { 0 };

	CHECK(sc_load_failed(&err, 524, 406) == -524);
	CHECK(strstr(err.msg, "406-instruction filter") != NULL);
	CHECK(strstr(err.msg, "net.core.bpf_jit_limit") != NULL);
	CHECK(sc_load_failed(&err, EINVAL, 406) == -EINVAL);
	CHECK(strstr(err.msg, "bpf_jit_limit") == NULL);
	CHECK(strstr(err.msg, "cannot load the 406-instruction filter") != NULL);
}

/* A filter of n instructions (n - 1 "ja 0", ret ALLOW) loaded here. */
static int load_allow(size_t n)
{
	static struct sock_filter f[BPF_MAXINSNS];
	struct sock_fprog fp = { .len = (unsigned short)n, .filter = f };

	for (size_t i = 0; i + 1 < n; i++)
		f[i] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JA, 0, 0, 0);
	f[n - 1] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fp);
}

/* 0: load_allow(n) succeeds in a child. */
static int try_allow(size_t n)
{
	int status;
	pid_t pid;

	pid = fork();
	if (pid == 0)
		_exit(load_allow(n) == 0 ? 0 : 1);
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/*
 * In a child: corral's program p and its filling (sc_pad_chain), then the
 * eBPF instructions a filter of the child's own may still have, found by
 * the kernel itself (a filter of n classic "ja"s and a return is n + 4);
 * -1 if none, or past one filter's 4100.  thread: the filling loaded
 * first by a thread of the child's, as init does (sc_fill_start); -1 if
 * its chain did not reach the child's main thread.
 */
static __attribute__((noreturn)) void measure_left(const struct prog *p, size_t outer,
						    bool thread, int wfd)
{
	struct sock_fprog fp = { .len = (unsigned short)p->len, .filter = p->insns };
	struct corral_err err = { 0 };
	int lo = 0, hi = BPF_MAXINSNS + 1;	/* lo loads (0: none), hi does not */
	struct sc_fill t;
	int status;

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    (outer && load_allow(outer) < 0))
		_exit(1);
	if (thread) {
		if (!sc_fill_start(&t, sc_ebpf_len(p->insns, p->len)))
			_exit(1);
		sc_fill_join(&t);
		if (!sc_prefilled() || prctl(PR_GET_SECCOMP, 0, 0, 0, 0) != 2)
			_exit(1);
	}
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fp) < 0 ||
	    sc_pad_chain(sc_ebpf_len(p->insns, p->len), outer > 0, &err) < 0)
		_exit(1);
	while (hi - lo > 1) {
		int mid = (lo + hi) / 2, r = try_allow((size_t)mid);

		if (r < 0)
			_exit(1);
		if (r == 0)
			lo = mid;
		else
			hi = mid;
	}
	status = lo && hi <= BPF_MAXINSNS ? lo + 4 : -1;
	_exit(write(wfd, &status, sizeof(status)) == sizeof(status) ? 0 : 1);
}

/* What a child that wrote an int to fd[1] wrote; -1 if nothing. */
static int read_child(pid_t pid, int fd[2])
{
	int v = -1;

	close(fd[1]);
	if (pid < 0 || read(fd[0], &v, sizeof(v)) != sizeof(v))
		v = -1;
	close(fd[0]);
	if (pid > 0)
		waitpid(pid, NULL, 0);
	return v;
}

static int left_after(const struct prog *p, size_t outer, bool thread)
{
	int fd[2];
	pid_t pid;

	if (pipe(fd) < 0)
		return -1;
	pid = fork();
	if (pid == 0)
		measure_left(p, outer, thread, fd[1]);
	return read_child(pid, fd);
}

/*
 * A process inside may stack SC_STACK_FREE to SC_STACK_FREE + 9 eBPF
 * instructions of filters of its own, behind each of corral's programs:
 * sc_ebpf_len counts them as this kernel converts them (a count short of
 * the kernel's left room to 32768, past it the filling stopped early);
 * under an outer filter too, found by trying in a child.
 */
TEST(stack_left_to_processes)
{
	static const struct { bool notify; enum corral_net_mode net; } v[] = {
		{ true, CORRAL_NET_NONE }, { true, CORRAL_NET_PROXY },
		{ false, CORRAL_NET_NONE }, { false, CORRAL_NET_PROXY },
	};
	static const struct sock_filter ret = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	static const struct sock_filter jeq_neg[] = {
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0xc000003e, 1, 2),
		BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 1, 0, 1),
		BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 5, 0, 1),
		BPF_STMT(BPF_ALU | BPF_DIV | BPF_X, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	int left;

	CHECK(sc_ebpf_len(&ret, 1) == 5);
	/* 3 + (1 + a register for the constant + a jump) + 2 + 1 + 5 + 2 */
	CHECK(sc_ebpf_len(jeq_neg, 5) == 16);
	if (!sc_available())
		return;
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		struct prog p;

		if (!compile(&p, v[i].notify, v[i].net))
			continue;
		/* and under an outer filter (Docker's), whose length corral cannot read */
		for (size_t outer = 0; outer <= 3000; outer += 3000) {
			left = left_after(&p, outer, false);
			if (left < SC_STACK_FREE || left > SC_STACK_FREE + 9)
				fprintf(stderr, "  %zu, outer %zu: %d eBPF instructions left\n",
					i, outer, left);
			CHECK(left >= SC_STACK_FREE && left <= SC_STACK_FREE + 9);
		}
		free(p.insns);
	}
}

/*
 * The same bound where init's thread loaded the filling first and handed
 * it to the main thread (TSYNC), which then loads its program on top and
 * fills what is left (seccomp_stack.c): the thread's part counted as
 * filled ahead, or the child gives up.  With no_new_privs, which the
 * thread inherits, as uid 65534 too (init needs none: CAP_SYS_ADMIN in
 * its user namespace).
 */
TEST(stack_left_after_init_thread)
{
	int left;

	if (!sc_available())
		return;
	for (int notify = 0; notify <= 1; notify++) {
		for (int net = 0; net <= 1; net++) {
			struct prog p;

			if (!compile(&p, notify, net ? CORRAL_NET_PROXY : CORRAL_NET_NONE))
				continue;
			left = left_after(&p, 0, true);
			if (left < SC_STACK_FREE || left > SC_STACK_FREE + 9)
				fprintf(stderr, "  notify %d, net %d: %d eBPF instructions left\n",
					notify, net, left);
			CHECK(left >= SC_STACK_FREE && left <= SC_STACK_FREE + 9);
			free(p.insns);
		}
	}
}

/* ---- the launcher's filling (launcher.c) -------------------------------- */

static pid_t plain_clone(void *arg)
{
	(void)arg;
	return (pid_t)syscall(SYS_clone, SIGCHLD, NULL, NULL, NULL, 0);
}

struct measure {
	const struct prog *p;	/* NULL: write sc_prefilled() */
	int wfd;
};

static void measure_child(void *arg)
{
	struct measure *m = arg;
	int v = (int)sc_prefilled();

	if (m->p)
		measure_left(m->p, 0, false, m->wfd);
	_exit(write(m->wfd, &v, sizeof(v)) == sizeof(v) ? 0 : 1);
}

/* In the launcher's process: m run in a clone of the launcher's; -1 if not. */
static int launched(struct measure *m)
{
	int fd[2];
	pid_t pid;

	if (pipe(fd) < 0)
		return -1;
	m->wfd = fd[1];
	if (!launcher_clone(plain_clone, NULL, measure_child, m, &pid))
		pid = -1;
	return read_child(pid, fd);
}

/*
 * In a process with a launcher: once it has filled (at most 5 s; until
 * then it clones nothing), its clones start with its chain (sc_prefilled), this thread with none and
 * no no_new_privs; what a process inside may stack behind each of
 * corral's programs, filled up after it (sc_pad_chain), is the same
 * bound.  In a child: the launcher is a thread for good.
 */
static int launcher_chain(void)
{
	size_t want = sc_prefill_size(sc_own_max());
	struct measure m = { .p = NULL };
	int filled = 0;

	corral_launcher_start();
	/* it clones nothing until it has filled */
	for (int i = 0; i < 500 && (filled = launched(&m)) < 0; i++)
		usleep(10000);
	if (filled < 0 || (size_t)filled < want - 16) {
		fprintf(stderr, "  the launcher filled %d of %zu\n", filled, want);
		return 1;
	}
	if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) != 0 || prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 0) {
		fprintf(stderr, "  the caller's thread has a filter or no_new_privs\n");
		return 1;
	}
	for (int notify = 0; notify <= 1; notify++) {
		for (int net = 0; net <= 1; net++) {
			struct prog p;
			int left;

			if (!compile(&p, notify, net ? CORRAL_NET_PROXY : CORRAL_NET_NONE))
				return 1;
			m.p = &p;
			left = launched(&m);
			free(p.insns);
			if (left < SC_STACK_FREE || left > SC_STACK_FREE + 9) {
				fprintf(stderr, "  notify %d, net %d: %d eBPF instructions left\n",
					notify, net, left);
				return 1;
			}
		}
	}
	return 0;
}

TEST(stack_left_after_launcher)
{
	int status;
	pid_t pid;

	if (!sc_available() || !sc_own_max())
		return;
	pid = fork();
	if (pid == 0)
		_exit(launcher_chain());
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	      WEXITSTATUS(status) == 0);
}

/* This process's threads, as /proc counts them; -1 if unread. */
static int threads_here(void)
{
	char buf[4096];
	const char *v;
	ssize_t n;
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	v = strstr(buf, "\nThreads:");
	return v ? atoi(v + strlen("\nThreads:")) : -1;
}

/*
 * Under an outer filter (Docker's), whose length is unknown here, no
 * launcher is made: init fills its own, probing (sc_pad_chain), as
 * before.  In a child, with no_new_privs to load that filter.
 */
TEST(no_launcher_under_an_outer_filter)
{
	struct measure m = { .p = NULL };
	int status;
	pid_t pid;

	if (!sc_available())
		return;
	pid = fork();
	if (pid == 0) {
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || load_allow(100) < 0)
			_exit(2);
		corral_launcher_start();
		/* no thread made (pthread_create's is there once it returns), none used */
		_exit(threads_here() == 1 && launched(&m) == -1 ? 0 : 1);
	}
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	      WEXITSTATUS(status) == 0);
}

/*
 * personality is decided in front of libseccomp's program (not_in_block):
 * the kernel reads 32 bits, and only PER_LINUX and the query pass, each
 * bit alone and its complement denied; with or without a listener.
 */
TEST(personality_decided)
{
	static const uint64_t allowed[] = {
		0, 0xffffffff, 0x100000000ull, 0xffffffff00000000ull, 0x1ffffffffull,
	};
	struct prog p;

	if (!x86_64_here())
		return;
	for (int notify = 0; notify <= 1; notify++) {
		uint32_t deny = notify ? SECCOMP_RET_USER_NOTIF : SECCOMP_RET_ERRNO | EPERM;

		if (!compile(&p, notify, CORRAL_NET_NONE))
			return;
		for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
			CHECK(call(&p, 135, allowed[i], 0, 0) == SECCOMP_RET_ALLOW);
		for (int bit = 0; bit < 32; bit++) {
			uint32_t b = 1u << bit;

			CHECK(call(&p, 135, b, 0, 0) == deny);
			CHECK(call(&p, 135, ~b, 0, 0) == deny);
			CHECK(call(&p, 135, 0xffffffff00000000ull | b, 0, 0) == deny);
		}
		CHECK(call(&p, 135, READ_IMPLIES_EXEC, 0, 0) == deny);
		CHECK(call(&p, 135, PER_LINUX32, 0, 0) == deny);
		/* the blocks in front leave every other call to the program */
		CHECK(call(&p, 39, 5, 0, 0) == SECCOMP_RET_ALLOW);
		CHECK(call(&p, 0, 5, 0, 0) == SECCOMP_RET_ALLOW);
		CHECK(call(&p, 137, 5, 0, 0) == SECCOMP_RET_ALLOW);
		free(p.insns);
	}
}

TEST(arguments_decided_ioctl)
{
	struct prog p;

	if (!x86_64_here() || !compile(&p, true, CORRAL_NET_NONE))
		return;
	/* ioctl: TIOCSTI in the low 32 bits, whatever the high ones */
	CHECK(call(&p, 16, 0, TCGETS, 0) == SECCOMP_RET_ALLOW);
	CHECK(call(&p, 16, 0, TIOCSTI, 0) == SECCOMP_RET_USER_NOTIF);
	CHECK(call(&p, 16, 0, 0x100000000ull | TIOCSTI, 0) == SECCOMP_RET_USER_NOTIF);
	/* TIOCSETD: a line discipline's module would load */
	CHECK(call(&p, 16, 0, TIOCSETD, 0) == SECCOMP_RET_USER_NOTIF);
	CHECK(call(&p, 16, 0, 0x100000000ull | TIOCSETD, 0) == SECCOMP_RET_USER_NOTIF);
	CHECK(call(&p, 16, 0, TIOCGETD, 0) == SECCOMP_RET_ALLOW);
	free(p.insns);
}

/* What the socket table means, written again independently. */
static bool socket_allowed(uint64_t fam, uint64_t type, uint64_t proto, bool net)
{
	uint64_t t = type & ~(uint64_t)(SOCK_NONBLOCK | SOCK_CLOEXEC);

	if (fam == AF_UNIX)
		return true;
	if (fam == AF_NETLINK)
		return proto == NETLINK_ROUTE;
	if (fam != AF_INET && fam != AF_INET6)
		return false;
	if ((t & 0xffffffff) == SOCK_STREAM)
		return proto == 0 || proto == IPPROTO_TCP || proto == 262;
	if ((t & 0xffffffff) == SOCK_DGRAM)
		return proto == 0 || proto == IPPROTO_UDP ||
		       (net && proto == (fam == AF_INET ? IPPROTO_ICMP : IPPROTO_ICMPV6));
	/* other type bits: EINVAL from the kernel, either way harmless */
	return (t & 0xffffffff) > 15;
}

static void check_sockets(const struct prog *p, bool net)
{
	static const uint64_t types[] = {
		0, SOCK_STREAM, SOCK_DGRAM, SOCK_RAW, SOCK_RDM, SOCK_SEQPACKET,
		6 /* DCCP */, 7, 8, 9, SOCK_PACKET, 11, 15,
	};
	static const uint64_t flags[] = {
		0, SOCK_NONBLOCK, SOCK_CLOEXEC, SOCK_NONBLOCK | SOCK_CLOEXEC,
	};
	unsigned wrong = 0;

	for (uint64_t fam = 0; fam < 48; fam++)
		for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++)
			for (size_t f = 0; f < 4; f++)
				for (uint64_t proto = 0; proto < 300; proto++) {
					uint64_t type = types[t] | flags[f];
					bool want = socket_allowed(fam, type, proto, net);
					uint32_t got = call(p, NR_SOCKET, fam, type, proto);

					if ((got == SECCOMP_RET_ALLOW) != want && wrong++ < 5)
						fprintf(stderr, "  socket(%llu, 0x%llx, %llu): 0x%x\n",
							(unsigned long long)fam,
							(unsigned long long)type,
							(unsigned long long)proto, got);
					if (got != SECCOMP_RET_ALLOW)
						CHECK(got == SECCOMP_RET_USER_NOTIF);
				}
	CHECK(wrong == 0);
}

/* Every family, type (with and without the flags) and protocol 0-299. */
TEST(socket_table)
{
	struct prog p;

	if (!x86_64_here() || !compile(&p, true, CORRAL_NET_NONE))
		return;
	check_sockets(&p, false);
	/* named ones, to read */
	CHECK(call(&p, NR_SOCKET, AF_INET, SOCK_STREAM, IPPROTO_SCTP) == SECCOMP_RET_USER_NOTIF);
	CHECK(call(&p, NR_SOCKET, AF_INET6, SOCK_SEQPACKET, IPPROTO_SCTP) == SECCOMP_RET_USER_NOTIF);
	CHECK(call(&p, NR_SOCKET, AF_INET, 6, IPPROTO_DCCP) == SECCOMP_RET_USER_NOTIF);
	CHECK(call(&p, NR_SOCKET, AF_INET, SOCK_DGRAM, 115 /* L2TP */) == SECCOMP_RET_USER_NOTIF);
	CHECK(call(&p, NR_SOCKET, AF_PPPOX, SOCK_DGRAM, 1 /* PX_PROTO_OL2TP */) == SECCOMP_RET_USER_NOTIF);
	CHECK(call(&p, NR_SOCKET, AF_NETLINK, SOCK_RAW, 21 /* crypto */) == SECCOMP_RET_USER_NOTIF);
	CHECK(call(&p, NR_SOCKET, AF_NETLINK, SOCK_RAW, 20 /* rdma */) == SECCOMP_RET_USER_NOTIF);
	CHECK(call(&p, NR_SOCKET, AF_NETLINK, SOCK_RAW, 4 /* sock_diag */) == SECCOMP_RET_USER_NOTIF);
	CHECK(call(&p, NR_SOCKET, AF_INET, SOCK_DGRAM, IPPROTO_ICMP) == SECCOMP_RET_USER_NOTIF);
	CHECK(call(&p, NR_SOCKET, AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, 0) == SECCOMP_RET_ALLOW);
	CHECK(call(&p, NR_SOCKET, AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		   IPPROTO_TCP) == SECCOMP_RET_ALLOW);
	/* the kernel reads ints: a protocol or family with high bits is refused */
	CHECK(call(&p, NR_SOCKET, AF_INET, SOCK_STREAM, 0x100000000ull | IPPROTO_TCP) ==
	      SECCOMP_RET_USER_NOTIF);
	CHECK(call(&p, NR_SOCKET, 0x100000000ull | AF_INET, SOCK_STREAM, 0) ==
	      SECCOMP_RET_USER_NOTIF);
	CHECK(call(&p, NR_SOCKET, AF_INET, SOCK_STREAM, 0xffffffffull) == SECCOMP_RET_USER_NOTIF);
	CHECK(call(&p, NR_SOCKET, 0xffffffffull, SOCK_STREAM, 0) == SECCOMP_RET_USER_NOTIF);
	/* socketpair: AF_UNIX only */
	CHECK(call(&p, NR_SOCKETPAIR, AF_UNIX, SOCK_STREAM, 0) == SECCOMP_RET_ALLOW);
	CHECK(call(&p, NR_SOCKETPAIR, AF_INET, SOCK_STREAM, 0) == SECCOMP_RET_USER_NOTIF);
	CHECK(call(&p, NR_SOCKETPAIR, AF_TIPC, SOCK_SEQPACKET, 0) == SECCOMP_RET_USER_NOTIF);
	free(p.insns);
}

/* With a network (proxy mode), ICMP echo sockets too. */
TEST(socket_table_with_network)
{
	struct prog p;

	if (!x86_64_here() || !compile(&p, true, CORRAL_NET_PROXY))
		return;
	check_sockets(&p, true);
	CHECK(call(&p, NR_SOCKET, AF_INET, SOCK_DGRAM, IPPROTO_ICMP) == SECCOMP_RET_ALLOW);
	CHECK(call(&p, NR_SOCKET, AF_INET6, SOCK_DGRAM, IPPROTO_ICMPV6) == SECCOMP_RET_ALLOW);
	CHECK(call(&p, NR_SOCKET, AF_INET, SOCK_RAW, IPPROTO_ICMP) == SECCOMP_RET_USER_NOTIF);
	CHECK(call(&p, NR_SOCKET, AF_INET6, SOCK_DGRAM, IPPROTO_ICMP) == SECCOMP_RET_USER_NOTIF);
	free(p.insns);
}

int main(void)
{
	unit_run_all();
	UNIT_DONE();
}
