/*
 * floor_exit.c - a program that only exits: no libc, no ld.so, no
 * auxiliary vector read.  bench/serve.py runs it as the exec round trip's
 * floor on the path that avoids the start every glibc program makes
 * (init_cpu_features and the cache sizes: CPUID, dozens of times, which a
 * paravirtualized host like this one traps at tens of microseconds each),
 * by posix_spawn from C and through the daemon, so that the table shows
 * what of a warm exec is corral's and what is the command's own start.
 *
 *   cc -O2 -static -nostdlib -ffreestanding -fno-stack-protector \
 *      -o floor_exit floor_exit.c
 */
void _start(void) __attribute__((noreturn));

void _start(void)
{
#if defined(__x86_64__)
	__asm__ volatile("mov $231, %eax\n\txor %edi, %edi\n\tsyscall");	/* exit_group(0) */
#elif defined(__aarch64__)
	__asm__ volatile("mov x8, #94\n\tmov x0, #0\n\tsvc #0");		/* exit_group(0) */
#else
#error "floor_exit.c: exit_group for x86_64 and aarch64 only"
#endif
	for (;;)
		;
}
