/*
 * seccomp_jit.c - what a stacked seccomp filter costs the host's one BPF
 * JIT pool (net.core.bpf_jit_limit), and how many a process may stack:
 * the numbers of SECURITY.md's seccomp row and Known limits.
 *
 *   seccomp_jit path KIND LEN       stack filters of KIND, LEN classic
 *                                   instructions each, in a fresh child
 *                                   until the kernel refuses; print how
 *                                   many and why (ENOMEM: the 32768 a
 *                                   process, MAX_INSNS_PER_PATH)
 *   seccomp_jit pool KIND LEN PACKS [STEP]
 *                                   load filters one at a time (in holders
 *                                   of a full chain each) until PACKS more
 *                                   2 MiB bpf_prog_pack areas showed up in
 *                                   /proc/vmallocinfo than at the first
 *                                   new one; bytes a filter = what they
 *                                   hold over the filters between (root);
 *                                   the packs are counted every STEP
 *                                   filters (1), a STEP's error each way
 *
 *   seccomp_jit fill PROCS SECONDS  PROCS children each stack filters of
 *                                   divisions (the most pool an
 *                                   instruction), 4096 and then halves,
 *                                   until none loads; hold them SECONDS:
 *                                   count the packs outside meanwhile
 *
 * KIND: allow (LEN-1 "ja 0" and ret ALLOW), skip (a jump over LEN-2 "ja 0"
 * to ret ALLOW), divk (LEN-2 divisions by a constant), divx (by X), jeq
 * (LEN-2 comparisons of nr, each jumping to the end if equal), lshx (LEN-2
 * shifts by X), tiny (one
 * ret ALLOW, LEN ignored).  Every filter returns ALLOW.
 *
 * The pool's use is not exported; the packs are: the x86 JIT puts every
 * image below 1 MiB in 2 MiB packs, charged to bpf_jit_limit by the same
 * 64-byte chunks it takes of them, so the filters between two new packs
 * fill one.  Other loads on the host meanwhile blur it: repeat.  PACKS
 * stays small (each is 2 MiB of the pool: never near it), and at most
 * 60 s and 40000 filters are made.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PACK_BYTES	(2u << 20)
#define MAX_FILTERS	40000
#define MAX_SECONDS	60
#define MAX_HOLDERS	512
#define HOLDER_MAX	512	/* filters a holder loads: the kernel walks its chain at each */

static struct sock_filter prog[BPF_MAXINSNS];

static int build(const char *kind, int len)
{
	const struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	int n = len;

	if (len < 3 || len > BPF_MAXINSNS)
		return -1;
	for (int i = 0; i < len; i++)
		prog[i] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JA, 0, 0, 0);
	if (!strcmp(kind, "tiny")) {
		n = 1;
	} else if (!strcmp(kind, "skip")) {
		prog[0] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JA, (unsigned)len - 2, 0, 0);
	} else if (!strcmp(kind, "divk") || !strcmp(kind, "divx")) {
		prog[0] = (struct sock_filter)BPF_STMT(BPF_LDX | BPF_W | BPF_IMM, 3);
		for (int i = 1; i < len - 1; i++)
			prog[i] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_DIV |
				(kind[3] == 'k' ? BPF_K : BPF_X), 3);
	} else if (!strcmp(kind, "lshx")) {
		prog[0] = (struct sock_filter)BPF_STMT(BPF_LDX | BPF_W | BPF_IMM, 3);
		for (int i = 1; i < len - 1; i++)
			prog[i] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_LSH | BPF_X, 0);
	} else if (!strcmp(kind, "jeq")) {
		prog[0] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
						       offsetof(struct seccomp_data, nr));
		for (int i = 1; i < len - 1; i++) {
			int to_end = len - 2 - i;

			prog[i] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
				100000u + (unsigned)i, to_end > 255 ? 255 : to_end, 0);
		}
	} else if (strcmp(kind, "allow")) {
		return -1;
	}
	prog[n - 1] = allow;
	return n;
}

static int load(int n)
{
	struct sock_fprog fp = { .len = (unsigned short)n, .filter = prog };

	return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fp);
}

/* In a child: stack until refused; report count and errno on fd. */
static void stack_all(int n, int fd)
{
	int count = 0, err = 0;

	while (count < MAX_FILTERS) {
		if (load(n) < 0) {
			err = errno;
			break;
		}
		count++;
	}
	dprintf(fd, "%d %d\n", count, err);
}

static int path(const char *kind, int len)
{
	int p[2], n = build(kind, len), count, err;
	pid_t pid;
	FILE *f;

	if (n < 0 || pipe(p) < 0)
		return 2;
	pid = fork();
	if (pid < 0)
		return 2;
	if (pid == 0) {
		close(p[0]);
		stack_all(n, p[1]);
		_exit(0);
	}
	close(p[1]);
	f = fdopen(p[0], "r");
	if (!f || fscanf(f, "%d %d", &count, &err) != 2)
		return 2;
	waitpid(pid, NULL, 0);
	printf("path %s %d: %d filters stacked, then %s\n", kind, n, count,
	       err ? strerror(err) : "the cap");
	return 0;
}

static int packs(void)
{
	char line[512];
	int n = 0;
	FILE *f = fopen("/proc/vmallocinfo", "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "bpf_prog_pack_alloc"))
			n++;
	fclose(f);
	return n;
}

/* A holder loads one filter for each byte it reads, answers 1 or 0. */
static pid_t holder(int n, int *to, int *from)
{
	int a[2], b[2];
	int held = 0;
	pid_t pid;
	char c;

	if (pipe(a) < 0 || pipe(b) < 0)
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		close(a[1]);
		close(b[0]);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		while (read(a[0], &c, 1) == 1) {
			c = held < HOLDER_MAX && load(n) == 0;
			held += c;
			if (write(b[1], &c, 1) != 1)
				break;
		}
		_exit(0);
	}
	close(a[0]);
	close(b[1]);
	*to = a[1];
	*from = b[0];
	return pid;
}

static int pool(const char *kind, int len, int want, int step)
{
	pid_t holders[MAX_HOLDERS];
	int keep[MAX_HOLDERS];
	int nh = 0, to = -1, from = -1, n = build(kind, len), base, seen = 0;
	int first = -1, last = -1, loaded = 0, r = 1;
	time_t start = time(NULL);
	char c = 'x';

	if (n < 0 || want < 1 || want > 8 || step < 1 || (base = packs()) < 0)
		return 2;
	while (loaded < MAX_FILTERS && time(NULL) - start < MAX_SECONDS) {
		int now;

		if (to < 0) {
			if (nh == MAX_HOLDERS)
				break;
			keep[nh] = -1;
			holders[nh] = holder(n, &to, &from);
			if (holders[nh++] < 0)
				break;
		}
		if (write(to, &c, 1) != 1 || read(from, &c, 1) != 1)
			break;
		if (!c) {		/* this holder's chain is full: it waits */
			keep[nh - 1] = to;
			close(from);
			to = from = -1;
			c = 'x';
			continue;
		}
		if (++loaded % step)
			continue;
		now = packs();
		if (now > base + seen) {
			seen = now - base;
			if (first < 0)
				first = loaded;
			else
				last = loaded;
			printf("pack %d at filter %d\n", seen, loaded);
			if (seen > want) {
				r = 0;
				break;
			}
		}
	}
	if (r == 0 && last > first)
		printf("pool %s %d: %d filters filled %d packs: %.0f bytes a filter "
		       "(%d holders)\n", kind, n, last - first, seen - 1,
		       (double)PACK_BYTES * (seen - 1) / (last - first), nh);
	else
		printf("pool %s %d: no measure (%d filters, %d new packs)\n", kind, n,
		       loaded, seen);
	if (to >= 0) {
		close(to);
		close(from);
	}
	for (int i = 0; i < nh; i++)
		if (keep[i] >= 0)
			close(keep[i]);
	for (int i = 0; i < nh; i++)
		if (holders[i] > 0) {
			kill(holders[i], SIGKILL);
			waitpid(holders[i], NULL, 0);
		}
	return r;
}

/* What one process inside may hold: the largest filters that still load. */
static void fill_one(void)
{
	for (int len = BPF_MAXINSNS; len >= 3; ) {
		if (load(build("divk", len)) < 0)
			len /= 2;
	}
}

static int fill(int procs, int seconds)
{
	pid_t kids[MAX_HOLDERS];
	int n = 0, p[2];
	char c;

	if (procs < 1 || procs > MAX_HOLDERS || seconds < 1 || seconds > MAX_SECONDS ||
	    pipe(p) < 0)
		return 2;
	for (; n < procs; n++) {
		kids[n] = fork();
		if (kids[n] < 0)
			break;
		if (kids[n] == 0) {
			close(p[0]);
			fill_one();
			c = 1;
			if (write(p[1], &c, 1) != 1)
				_exit(1);
			pause();
			_exit(0);
		}
	}
	close(p[1]);
	for (int i = 0; i < n; i++)
		if (read(p[0], &c, 1) != 1)
			break;
	printf("held %d\n", n);
	fflush(stdout);
	sleep((unsigned)seconds);
	for (int i = 0; i < n; i++) {
		kill(kids[i], SIGKILL);
		waitpid(kids[i], NULL, 0);
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return 2;
	if (argc == 4 && !strcmp(argv[1], "path"))
		return path(argv[2], atoi(argv[3]));
	if ((argc == 5 || argc == 6) && !strcmp(argv[1], "pool"))
		return pool(argv[2], atoi(argv[3]), atoi(argv[4]),
			    argc == 6 ? atoi(argv[5]) : 1);
	if (argc == 4 && !strcmp(argv[1], "fill"))
		return fill(atoi(argv[2]), atoi(argv[3]));
	fprintf(stderr, "usage: seccomp_jit path KIND LEN | pool KIND LEN PACKS [STEP] | "
		"fill PROCS SECONDS\n");
	return 2;
}
