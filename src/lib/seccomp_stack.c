/*
 * seccomp_stack.c - how much seccomp filter a process inside may stack.
 *
 * Every seccomp filter is compiled by the kernel's BPF JIT into one pool
 * for the whole host (net.core.bpf_jit_limit, 504 MiB here), charged to
 * no cgroup; past it no unprivileged process loads a filter where the
 * kernel has no interpreter (CONFIG_BPF_JIT_ALWAYS_ON), the next
 * sandbox's own included.  Programs inside load filters of their own
 * (apt's methods with APT::Sandbox::Seccomp, 121 instructions; man-db
 * loads its 455 and 582 only where no filter is loaded yet), so seccomp()
 * stays open; what the kernel bounds is a process's chain:
 * MAX_INSNS_PER_PATH (32768) instructions of the filters as converted to
 * eBPF, and 4 more for each filter under a new one.  A child shares its
 * parent's filters, so what one sandbox holds is its processes (pids)
 * times what each may add of its own: 32768 less corral's filter, at up
 * to 14.2 bytes of the pool an instruction (divisions by a constant,
 * bench/seccomp_jit.c), about 450 KB a process; 1024 processes could
 * hold 87% of the pool.
 *
 * So corral's own chain is filled up to SC_STACK_FREE below the kernel's
 * bound with filters that allow every call and compile to almost nothing:
 * a jump over jumps to the next instruction, which the JIT drops (under
 * 600 bytes of the pool for 4096 instructions).  Its cost, measured here:
 * 0.3 ms of kernel CPU to load a 4096-instruction filter, 3-4 ms a
 * sandbox's start (its processes share them); at run time the kernel's
 * cache lets most calls skip every filter, and the others run a jump and
 * a return more for each (ioctl 1.4 to 1.6 us in this VM).  What a
 * process inside may stack is then at most SC_STACK_FREE + 9
 * instructions, 14.4 KB of the pool.
 */
#include "internal.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define PATH_MAX_INSNS	32768	/* the kernel's MAX_INSNS_PER_PATH */
#define UNDER_PENALTY	4	/* counted for each filter under a new one */
#define PAD_MIN		2	/* a jump and the return */
/* a filling filter of n is n + 4 converted (prologue, the return's mov), 4 under */
#define PAD_EXTRA	(4 + UNDER_PENALTY)

/*
 * The length of p as the kernel converts it to eBPF (net/core/filter.c:
 * bpf_convert_filter), which is what MAX_INSNS_PER_PATH counts: three
 * instructions of prologue; a return of a constant is two (mov, exit); a
 * conditional jump with both branches away from the next instruction is
 * two (a jump and a jump always), unless its false branch is the next
 * (or its true branch is and it is no JSET), and a negative constant
 * compared is moved to a register first; division by X is five (the
 * check for zero).  Checked against the kernel by unit_seccomp.
 */
size_t sc_ebpf_len(const struct sock_filter *p, size_t n)
{
	size_t len = 3;

	for (size_t i = 0; i < n; i++) {
		uint16_t code = p[i].code;

		switch (BPF_CLASS(code)) {
		case BPF_RET:
			len += BPF_RVAL(code) == BPF_K ? 2 : 1;
			break;
		case BPF_JMP:
			len++;
			if (BPF_OP(code) == BPF_JA)
				break;
			if (BPF_SRC(code) == BPF_K && (int32_t)p[i].k < 0)
				len++;
			if (p[i].jf && (p[i].jt || BPF_OP(code) == BPF_JSET))
				len++;
			break;
		case BPF_ALU:
			len += BPF_OP(code) == BPF_DIV && BPF_SRC(code) == BPF_X ? 5 : 1;
			break;
		default:
			len++;
		}
	}
	return len;
}

/* A filter of n instructions that allows: a jump over n-2 "ja 0" to ret. */
static int load_pad(struct sock_filter *buf, size_t n)
{
	struct sock_fprog fp = { .len = (unsigned short)n, .filter = buf };
	int r;

	buf[0] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JA, (uint32_t)(n - 2), 0, 0);
	buf[n - 1] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	r = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fp);
	buf[0] = buf[n - 1] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JA, 0, 0, 0);
	return r < 0 ? -errno : 0;
}

/*
 * In a child, which shares the chain so far: would a filling filter of n
 * still leave a process SC_STACK_FREE (a filling filter of SC_STACK_FREE
 * - 4 is that many converted)?
 */
static bool room_after(struct sock_filter *buf, size_t n)
{
	int status;
	pid_t pid = fork();

	if (pid == 0)
		_exit(load_pad(buf, n) == 0 && load_pad(buf, SC_STACK_FREE - 4) == 0 ? 0 : 1);
	if (pid < 0)
		return false;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return false;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

#define PAD_BUF_LEN	(BPF_MAXINSNS * sizeof(struct sock_filter))

/*
 * A filling filter's instructions, all "ja 0" (load_pad sets the first
 * and last), PAD_BUF_LEN bytes to munmap; NULL with err set.  mmap, not
 * malloc: this runs in a sandbox's init after a fork.
 */
static struct sock_filter *pad_buf(struct corral_err *err)
{
	struct sock_filter *buf;

	buf = mmap(NULL, PAD_BUF_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		   -1, 0);
	if (buf == MAP_FAILED) {
		corral_set_errno(err, errno, "seccomp: no memory for the %zu-byte filling "
				 "filter", PAD_BUF_LEN);
		return NULL;
	}
	for (size_t i = 0; i < BPF_MAXINSNS; i++)
		buf[i] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JA, 0, 0, 0);
	return buf;
}

/*
 * Filling filters this process loaded ahead (sc_prefill), as the kernel
 * counts them (n + 8 each); its forks inherit them and this count.  0:
 * none, and a filter found before corral's is another's (outer).
 */
static size_t prefilled;

/* Room an own program longer than the longest built in may still take. */
#define PREFILL_MARGIN	512

size_t sc_prefilled(void)
{
	return prefilled;
}

/*
 * Fill this process's chain ahead, up to what corral's longest program
 * (own_max converted) and SC_STACK_FREE need after it, plus a margin: a
 * sandbox forked from it then loads its program on top and fills only
 * the margin and what its own program is shorter (sc_pad_chain), one
 * small filter instead of eight of 4096.  Its filters allow every call,
 * so this process's own calls pass them through the kernel's cache.
 */
int sc_prefill(size_t own_max, struct corral_err *err)
{
	size_t left, n;
	struct sock_filter *buf;

	if (prefilled || own_max + UNDER_PENALTY + PREFILL_MARGIN + SC_STACK_FREE >=
			 PATH_MAX_INSNS)
		return 0;
	left = PATH_MAX_INSNS - SC_STACK_FREE - own_max - UNDER_PENALTY - PREFILL_MARGIN;
	buf = pad_buf(err);
	if (!buf)
		return err->code;
	while (left >= PAD_MIN + PAD_EXTRA) {
		n = left - PAD_EXTRA < BPF_MAXINSNS ? left - PAD_EXTRA : BPF_MAXINSNS;
		/* refused (no CAP_SYS_ADMIN, the pool full): each sandbox fills the rest */
		if (load_pad(buf, n) < 0)
			break;
		prefilled += n + PAD_EXTRA;
		left -= n + PAD_EXTRA;
	}
	munmap(buf, PAD_BUF_LEN);
	return 0;
}

/* At most this many filling filters tried under an outer chain. */
#define PROBE_MAX 64

/*
 * After corral's filter of own_len eBPF instructions: allowing filters
 * until SC_STACK_FREE (to SC_STACK_FREE + 9) are left.  Where the chain
 * held a filter before corral's (outer: corral under Docker's), its
 * length is unknown here, so each filling filter is tried first in a
 * child (room_after), halving it when a process would be left less:
 * about 20 forks, there only.
 */
int sc_pad_chain(size_t own_len, bool outer, struct corral_err *err)
{
	size_t left = PATH_MAX_INSNS - SC_STACK_FREE, n = BPF_MAXINSNS;
	struct sock_filter *buf;
	int r = 0;

	if (!outer && own_len + UNDER_PENALTY + prefilled >= left)
		return 0;
	left -= outer ? 0 : own_len + UNDER_PENALTY + prefilled;
	buf = pad_buf(err);
	if (!buf)
		return err->code;
	for (int tries = 0; tries < PROBE_MAX; tries++) {
		if (outer) {
			if (n < PAD_MIN)
				break;
			if (!room_after(buf, n)) {
				n /= 2;
				continue;
			}
		} else {
			if (left < PAD_MIN + PAD_EXTRA)
				break;
			n = left - PAD_EXTRA < BPF_MAXINSNS ? left - PAD_EXTRA : BPF_MAXINSNS;
		}
		r = load_pad(buf, n);
		if (r == -ENOMEM) {	/* fuller than counted: leave it */
			r = 0;
			break;
		}
		if (r < 0) {
			r = sc_load_failed(err, -r, n);
			break;
		}
		left -= outer ? 0 : n + PAD_EXTRA;
	}
	munmap(buf, PAD_BUF_LEN);
	return r;
}
