/*
 * sysprobe.c - call syscalls by number and say how each was answered.
 *
 *   sysprobe SPEC...      SPEC: NR[,ARG...]  (C notation: 41,2,1,0x84)
 *                         or int80,NR[,ARG...]: the i386 ABI's call NR,
 *                         made with int 0x80, five arguments at most
 *                         (x86_64 only)
 *
 * Prints one line a SPEC: "SPEC ok", "SPEC EPERM" (the errno's name), or
 * "SPEC signal N" when the call killed its caller.  Each call runs in a
 * child of its own, so one that kills (a foreign ABI, uprobe outside a
 * trampoline) or changes the caller leaves the others alone; missing
 * arguments are 0, which every call the tests name takes harmlessly.
 * Static, so it needs nothing from the sandbox's view of the host.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int parse(const char *spec, long *nr, unsigned long args[6], bool *i386)
{
	char *end;
	int n = 0;

	memset(args, 0, 6 * sizeof(*args));
	*i386 = !strncmp(spec, "int80,", 6);
	if (*i386)
		spec += 6;
	errno = 0;
	*nr = strtol(spec, &end, 0);
	while (errno == 0 && *end == ',' && n < 6)
		args[n++] = strtoull(end + 1, &end, 0);
	return errno || *end ? -1 : 0;
}

/*
 * The i386 ABI from a 64-bit process: int 0x80 takes the call's number in
 * eax and its arguments in ebx, ecx, edx, esi, edi (32 bits each; the
 * sixth, in ebp, is left out: the compiler may hold its frame there) and
 * answers -errno in eax.
 */
static long call_int80(long nr, const unsigned long a[6])
{
#if defined(__x86_64__)
	long r = nr;

	__asm__ volatile("int $0x80"
			 : "+a"(r)
			 : "b"(a[0]), "c"(a[1]), "d"(a[2]), "S"(a[3]), "D"(a[4])
			 : "memory", "cc");
	if (r < 0 && r > -4096) {
		errno = (int)-r;
		return -1;
	}
	return r;
#else
	(void)nr;
	(void)a;
	errno = ENOSYS;
	return -1;
#endif
}

/* In the child: the call's errno as the exit status, 0 for success. */
static void call(long nr, const unsigned long a[6], bool i386)
{
	long r = i386 ? call_int80(nr, a) :
		 syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);

	_exit(r < 0 ? (errno > 0 && errno < 255 ? errno : 255) : 0);
}

static int probe(const char *spec)
{
	unsigned long args[6];
	bool i386;
	int status;
	pid_t pid;
	long nr;

	if (parse(spec, &nr, args, &i386) < 0) {
		fprintf(stderr, "sysprobe: bad spec '%s' (NR[,ARG...])\n", spec);
		return -1;
	}
	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "sysprobe: fork: %s\n", strerror(errno));
		return -1;
	}
	if (pid == 0)
		call(nr, args, i386);
	if (waitpid(pid, &status, 0) < 0) {
		fprintf(stderr, "sysprobe: waitpid: %s\n", strerror(errno));
		return -1;
	}
	if (WIFSIGNALED(status))
		printf("%s signal %d\n", spec, WTERMSIG(status));
	else if (WEXITSTATUS(status) == 0)
		printf("%s ok\n", spec);
	else
		printf("%s %s\n", spec, strerrorname_np(WEXITSTATUS(status)) ?:
		       "errno-unknown");
	return 0;
}

int main(int argc, char **argv)
{
	int rc = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: sysprobe NR[,ARG...]...\n");
		return 2;
	}
	for (int i = 1; i < argc; i++)
		if (probe(argv[i]) < 0)
			rc = 2;
	return rc;
}
