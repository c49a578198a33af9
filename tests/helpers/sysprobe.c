/*
 * sysprobe.c - call syscalls by number and say how each was answered.
 *
 *   sysprobe SPEC...      SPEC: NR[,ARG...]  (C notation: 41,2,1,0x84)
 *
 * Prints one line a SPEC: "SPEC ok", "SPEC EPERM" (the errno's name), or
 * "SPEC signal N" when the call killed its caller.  Each call runs in a
 * child of its own, so one that kills (a foreign ABI, uprobe outside a
 * trampoline) or changes the caller leaves the others alone; missing
 * arguments are 0, which every call the tests name takes harmlessly.
 * Static, so it needs nothing from the sandbox's view of the host.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int parse(const char *spec, long *nr, unsigned long args[6])
{
	char *end;
	int n = 0;

	memset(args, 0, 6 * sizeof(*args));
	errno = 0;
	*nr = strtol(spec, &end, 0);
	while (errno == 0 && *end == ',' && n < 6)
		args[n++] = strtoull(end + 1, &end, 0);
	return errno || *end ? -1 : 0;
}

/* In the child: the call's errno as the exit status, 0 for success. */
static void call(long nr, const unsigned long a[6])
{
	long r = syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);

	_exit(r < 0 ? (errno > 0 && errno < 255 ? errno : 255) : 0);
}

static int probe(const char *spec)
{
	unsigned long args[6];
	int status;
	pid_t pid;
	long nr;

	if (parse(spec, &nr, args) < 0) {
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
		call(nr, args);
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
