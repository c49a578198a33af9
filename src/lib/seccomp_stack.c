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
 * sandbox's start (its processes share them; init loads them on a thread
 * of its own while it builds the sandbox: below; a daemon once for all its
 * sandboxes: sc_prefill, launcher.c); at run time the kernel's
 * cache lets most calls skip every filter, and the others run a jump and
 * a return more for each (ioctl 1.4 to 1.6 us in this VM).  What a
 * process inside may stack is then at most SC_STACK_FREE + 9
 * instructions, 14.4 KB of the pool.
 */
#include "internal.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/futex.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/prctl.h>
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

/*
 * buf's first n instructions made a filter that allows (a jump over n-2
 * "ja 0" to ret), or back to all "ja 0" (set false).  Runs on the filling
 * thread too: no sanitizer's code, which keeps its state in TLS.
 */
__attribute__((no_sanitize("address", "undefined")))
static void pad_ends(struct sock_filter *buf, size_t n, bool set)
{
	buf[0] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JA,
					      set ? (uint32_t)(n - 2) : 0, 0, 0);
	buf[n - 1] = set ? (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW) :
			   (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JA, 0, 0, 0);
}

/* A filter of n instructions that allows, loaded on this thread. */
static int load_pad(struct sock_filter *buf, size_t n)
{
	struct sock_fprog fp = { .len = (unsigned short)n, .filter = buf };
	int r;

	pad_ends(buf, n, true);
	r = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fp);
	pad_ends(buf, n, false);
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

void sc_pad_buf_free(struct sock_filter *buf)
{
	munmap(buf, PAD_BUF_LEN);
}

/*
 * A filling filter's instructions, all "ja 0" (load_pad sets the first
 * and last), PAD_BUF_LEN bytes to munmap; NULL with err set.  mmap, not
 * malloc: this runs in a sandbox's init after a fork.
 */
struct sock_filter *sc_pad_buf(struct corral_err *err)
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
 * Filling filters this process loaded ahead (sc_prefill), or the thread
 * it was cloned from (launcher.c), as the kernel counts them (n + 8
 * each); its forks inherit them and this count.  0: none, and a filter
 * found before corral's is another's (outer).
 */
static size_t prefilled;

/* Room an own program longer than the longest built in may still take. */
#define PREFILL_MARGIN	512

size_t sc_prefilled(void)
{
	return prefilled;
}

/*
 * The launcher (launcher.c) fills a thread of the supervisor's instead, a
 * filter at a time between its requests: what it is to fill for programs
 * of up to own_max converted, as sc_prefill; 0 if nothing.
 */
size_t sc_prefill_size(size_t own_max)
{
	if (own_max + UNDER_PENALTY + PREFILL_MARGIN + SC_STACK_FREE >= PATH_MAX_INSNS)
		return 0;
	return PATH_MAX_INSNS - SC_STACK_FREE - own_max - UNDER_PENALTY - PREFILL_MARGIN;
}

/*
 * One filling filter of *left on this thread (buf from sc_pad_buf):
 * *left less what the kernel counts of it; -errno if refused (EACCES:
 * neither no_new_privs nor CAP_SYS_ADMIN).  Whether there is room for
 * one more: sc_prefill_more.
 */
int sc_prefill_one(struct sock_filter *buf, size_t *left)
{
	size_t n = *left - PAD_EXTRA < BPF_MAXINSNS ? *left - PAD_EXTRA : BPF_MAXINSNS;
	int r = load_pad(buf, n);

	if (r == 0)
		*left -= n + PAD_EXTRA;
	return r;
}

bool sc_prefill_more(size_t left)
{
	return left >= PAD_MIN + PAD_EXTRA;
}

/* A clone of the launcher's: it starts with the chain the launcher filled. */
void sc_prefilled_set(size_t n)
{
	prefilled = n;
}

/*
 * Fill this process's chain ahead, up to what corral's longest program
 * (own_max converted) and SC_STACK_FREE need after it, plus a margin: a
 * sandbox forked from it then loads its program on top and fills only
 * the margin and what its own program is shorter (sc_pad_chain), one
 * small filter instead of eight of 4096.  Its filters allow every call, so this
 * process's own calls pass them through the kernel's cache.
 */
int sc_prefill(size_t own_max, struct corral_err *err)
{
	size_t left = sc_prefill_size(own_max), start = left;
	struct sock_filter *buf;

	if (prefilled || !left)
		return 0;
	buf = sc_pad_buf(err);
	if (!buf)
		return err->code;
	/* refused (no CAP_SYS_ADMIN, the pool full): each sandbox fills the rest */
	while (sc_prefill_more(left) && sc_prefill_one(buf, &left) == 0)
		;
	prefilled += start - left;
	sc_pad_buf_free(buf);
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

	/* filled ahead to within a filter's least (a daemon's, init's thread) */
	if (!outer && own_len + UNDER_PENALTY + prefilled + PAD_MIN + PAD_EXTRA > left)
		return 0;
	left -= outer ? 0 : own_len + UNDER_PENALTY + prefilled;
	buf = sc_pad_buf(err);
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

/* ---- the filling on a thread of init's ---------------------------------- */

/*
 * Loading the filling is 3 ms of kernel CPU, and init's setup (its mounts
 * above all) is the critical path of a start, during which the supervisor
 * mostly sleeps: so init fills on a second thread meanwhile, on the other
 * core.  seccomp() loads a filter on the calling thread only; the last
 * filling filter is loaded with SECCOMP_FILTER_FLAG_TSYNC, which gives
 * every thread of the process the caller's chain, and the kernel allows
 * it because the main thread's chain (none: under an outer filter or a
 * daemon's filling no thread is made) is an ancestor of the thread's.
 * init may load filters without no_new_privs: it holds CAP_SYS_ADMIN in
 * its user namespace, and the thread keeps those creds while the main
 * thread's change (set_identity, drop_caps: creds are a thread's own).
 * What else of init's setup meets the thread: unshare of a network or
 * cgroup namespace and setns are a thread's own, allowed with threads;
 * the move into the cgroups ("0" to cgroup.procs) takes every thread;
 * Landlock, capabilities and no_new_privs are set on the main thread
 * only, which is the one that goes on to run the sandbox's processes,
 * and TSYNC hands no_new_privs only from the caller to the others.  The
 * main thread joins the thread right before it loads its own filter
 * (sc_fill_join): the chain is whole, and nothing of the sandbox's ran
 * yet, or runs while a second thread exists.
 *
 * The thread is made by clone() in a process that is itself a raw clone
 * of a supervisor that may have threads (the MCP server): no
 * pthread_create, which would take glibc's locks in a state copied
 * mid-flight.  Without CLONE_SETTLS it shares the main thread's TLS, so
 * it makes no call that touches TLS: glibc's syscall() writes errno on a
 * failure (the main thread's errno, which it may be reading), so the
 * system call is made by the instruction itself; no sanitizer code
 * (theirs keeps per-thread state in TLS); no libc call at all.  glibc's
 * clone() itself touches no TLS in the child: it calls fn and then the
 * exit system call (since 2.25, which dropped the pid cache), and the
 * kernel registers no rseq area for a CLONE_VM child.  The thread starts
 * with every signal blocked (glibc's own two as well, by the raw
 * syscall), so no handler of the supervisor's, copied into init, ever
 * runs on it; the process's signals go to the main thread.  CLONE_FILES
 * and not a copy of the table: the thread holds no second reference to
 * the supervisor's ends of the sync socket, whose last close tells init
 * that the supervisor is gone; not CLONE_FS, as setns into a mount
 * namespace refuses a thread whose fs_struct is shared (mntns_install).
 */
#if defined(__x86_64__) || defined(__aarch64__)
#define FILL_THREAD	1
#else
#define FILL_THREAD	0	/* no raw system call written here: filled in line */
#endif

#define FILL_STACK	(16 << 10)
#define FILL_MAP_LEN	(PAD_BUF_LEN + FILL_STACK)
#define FILL_FLAGS	(CLONE_VM | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | \
			 CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID)

/* seccomp(SECCOMP_SET_MODE_FILTER, flags, fp), returning -errno, no errno */
__attribute__((no_sanitize("address", "undefined")))
static long raw_set_filter(unsigned long flags, struct sock_fprog *fp)
{
#if defined(__x86_64__)
	long r;

	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "0"((long)SYS_seccomp), "D"((long)SECCOMP_SET_MODE_FILTER),
			   "S"(flags), "d"(fp)
			 : "rcx", "r11", "memory");
	return r;
#elif defined(__aarch64__)
	register long x8 __asm__("x8") = SYS_seccomp;
	register long x0 __asm__("x0") = SECCOMP_SET_MODE_FILTER;
	register long x1 __asm__("x1") = (long)flags;
	register long x2 __asm__("x2") = (long)fp;

	__asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
	return x0;
#else
	(void)flags, (void)fp;
	return -ENOSYS;
#endif
}

/*
 * The thread: fill t->left (as sc_pad_chain would), the last filter with
 * TSYNC.  Its result, read after the kernel cleared t->tid: t->filled, as
 * the kernel counts it, or 0 and t->error (-errno, or the id of a thread
 * that could not take the chain).  The buffer's pages are first touched
 * here, their faults off the main thread's line too.
 */
__attribute__((no_sanitize("address", "undefined")))
static int fill_thread(void *arg)
{
	struct sc_fill *t = arg;
	size_t left = t->left, n;
	long r = 0;

	for (size_t i = 0; i < BPF_MAXINSNS; i++)
		t->buf[i] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JA, 0, 0, 0);
	while (left >= PAD_MIN + PAD_EXTRA) {
		struct sock_fprog fp;

		n = left - PAD_EXTRA < BPF_MAXINSNS ? left - PAD_EXTRA : BPF_MAXINSNS;
		left -= n + PAD_EXTRA;
		fp = (struct sock_fprog){ .len = (unsigned short)n, .filter = t->buf };
		pad_ends(t->buf, n, true);
		r = raw_set_filter(left < PAD_MIN + PAD_EXTRA ? SECCOMP_FILTER_FLAG_TSYNC : 0,
				   &fp);
		pad_ends(t->buf, n, false);
		if (r != 0)
			break;
	}
	t->error = (int)r;
	t->filled = r == 0 ? t->left - left : 0;
	/* before the kernel's clearing of t->tid, which the main thread reads */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return 0;
}

bool sc_fill_start(struct sc_fill *t, size_t own_len)
{
	uint64_t all = ~0ULL, old;
	char *map;
	pid_t tid;

	*t = (struct sc_fill){ .error = 0 };
	/*
	 * An outer chain (length unknown: probed in line), or one filled
	 * ahead (a daemon's, its launcher's): the margin left is one small
	 * filter, in line, less than a thread costs.
	 */
	if (!FILL_THREAD || prctl(PR_GET_SECCOMP, 0, 0, 0, 0) != 0 ||
	    own_len + UNDER_PENALTY + SC_STACK_FREE + PAD_MIN + PAD_EXTRA > PATH_MAX_INSNS)
		return false;
	map = mmap(NULL, FILL_MAP_LEN, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (map == MAP_FAILED)
		return false;
	t->buf = (struct sock_filter *)map;
	t->left = PATH_MAX_INSNS - SC_STACK_FREE - own_len - UNDER_PENALTY;
	if (syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, &old, sizeof(all)) < 0) {
		munmap(map, FILL_MAP_LEN);
		return false;
	}
	tid = clone(fill_thread, map + FILL_MAP_LEN, FILL_FLAGS, t, &t->tid, NULL, &t->tid);
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, sizeof(old));
	if (tid < 0) {	/* EAGAIN at a pids limit, say: filled in line */
		munmap(map, FILL_MAP_LEN);
		return false;
	}
	t->map = map;
	return true;
}

/*
 * Wait for the thread to be gone: the kernel clears t->tid at its exit
 * (CLONE_CHILD_CLEARTID) and wakes this futex.  What it filled counts as
 * filled ahead (prefilled, for sc_pad_chain), once the kernel shows this
 * thread under a filter; otherwise sc_load fills in line, as it did
 * without a thread, and meets what refused the thread (a full BPF JIT
 * pool) with the same error.
 */
void sc_fill_join(struct sc_fill *t)
{
	pid_t tid;

	if (!t->map)
		return;
	while ((tid = __atomic_load_n(&t->tid, __ATOMIC_ACQUIRE)) != 0)
		syscall(SYS_futex, &t->tid, FUTEX_WAIT, tid, NULL, NULL, 0);
	if (t->filled && prctl(PR_GET_SECCOMP, 0, 0, 0, 0) == 2)
		prefilled += t->filled;
	munmap(t->map, FILL_MAP_LEN);
	t->map = NULL;
}
