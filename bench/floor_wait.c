/*
 * floor_wait.c - the least a waiting call's process can be: no libc, a
 * few pages.  It reads one byte on fd 3, then execs argv[1] with
 * argv[1..] and its environment.  bench/floor_waiter.c times that exec
 * against the exec of a waiting fork (what init's spare is): the
 * difference is what an exec spends tearing the fork's copy down.
 *
 *   cc -O2 -static -nostdlib -ffreestanding -fno-stack-protector \
 *      -o floor_wait floor_wait.c
 */
#if !defined(__x86_64__)
#error "floor_wait.c: x86_64 only"
#endif

#define NR_READ		0
#define NR_EXECVE	59
#define NR_EXIT_GROUP	231

static long sys3(long nr, long a, long b, long c)
{
	long r;

	__asm__ volatile("syscall" : "=a"(r) : "a"(nr), "D"(a), "S"(b), "d"(c)
			 : "rcx", "r11", "memory");
	return r;
}

/* sp: the kernel's initial stack, argc then argv, NULL, envp */
__attribute__((noreturn, used)) static void start_c(long *sp)
{
	char **argv = (char **)(sp + 1);
	char **envp = argv + sp[0] + 1;
	char c;

	if (sp[0] >= 2 && sys3(NR_READ, 3, (long)&c, 1) == 1)
		sys3(NR_EXECVE, (long)argv[1], (long)(argv + 1), (long)envp);
	sys3(NR_EXIT_GROUP, 127, 0, 0);
	for (;;)
		;
}

__asm__(".globl _start\n_start:\n\tmov %rsp, %rdi\n\tand $-16, %rsp\n\tcall start_c\n");
