/*
 * memscan.c - does a process's memory hold a string?  For the tests that
 * a sandbox's init (a fork of its supervisor) holds none of the
 * supervisor's credentials.
 *
 *   memscan PID STRING    exit 0 and print where if any readable mapping
 *                         of PID holds STRING, 1 if none does, 2 on error
 *   memscan PID -x HEX    the same for the bytes HEX spells (a key)
 *
 * Reads /proc/PID/mem, which needs ptrace access: as root.  The process
 * is not stopped: the tests scan a supervisor or a sandbox that waits.
 * A mapping over 1 TiB is skipped: only a sanitizer's shadow is that big.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHUNK	(1 << 20)

/* 1 if [start, end) of mem holds needle; overlapping reads catch a straddle */
static int scan(int mem, unsigned long start, unsigned long end,
		const char *needle, size_t len, char *buf, unsigned long *at)
{
	unsigned long off = start;

	while (off < end) {
		size_t want = end - off < CHUNK ? end - off : CHUNK;
		ssize_t n = pread(mem, buf, want, (off_t)off);
		char *hit;

		if (n <= 0)
			return 0;	/* unreadable (a guard page, gone): nothing */
		hit = memmem(buf, n, needle, len);
		if (hit) {
			*at = off + (hit - buf);
			return 1;
		}
		if ((size_t)n < len || off + n >= end)
			break;
		off += n - (len - 1);
	}
	return 0;
}

/* the bytes of an even-length hex string, in place; their count, or 0 */
static size_t unhex(char *s)
{
	size_t n = strlen(s), i;

	if (!n || n % 2)
		return 0;
	for (i = 0; i < n / 2; i++) {
		unsigned int b;

		if (sscanf(s + 2 * i, "%2x", &b) != 1)
			return 0;
		s[i] = (char)b;
	}
	return n / 2;
}

int main(int argc, char **argv)
{
	char path[64], line[512], *buf;
	const char *needle;
	size_t len;
	FILE *maps;
	int mem, found = 0;

	if (argc == 4 && !strcmp(argv[2], "-x")) {
		needle = argv[3];
		len = unhex(argv[3]);
	} else {
		needle = argc == 3 ? argv[2] : "";
		len = strlen(needle);
	}
	if (!len) {
		fprintf(stderr, "usage: memscan PID STRING | memscan PID -x HEX\n");
		return 2;
	}
	snprintf(path, sizeof(path), "/proc/%s/maps", argv[1]);
	maps = fopen(path, "re");
	snprintf(path, sizeof(path), "/proc/%s/mem", argv[1]);
	mem = open(path, O_RDONLY | O_CLOEXEC);
	buf = malloc(CHUNK);
	if (!maps || mem < 0 || !buf) {
		fprintf(stderr, "memscan: %s: %s\n", path, strerror(errno));
		return 2;
	}
	while (!found && fgets(line, sizeof(line), maps)) {
		unsigned long start, end, at;
		char perms[5];

		if (sscanf(line, "%lx-%lx %4s", &start, &end, perms) != 3)
			continue;
		if (perms[0] != 'r' || strstr(line, "[vvar") || strstr(line, "[vsyscall]"))
			continue;
		/* AddressSanitizer's high shadow (15 TiB, never data): not read */
		if (end - start > (1UL << 40))
			continue;
		if (scan(mem, start, end, needle, len, buf, &at)) {
			printf("at %#lx in %s", at, line);
			found = 1;
		}
	}
	fclose(maps);
	close(mem);
	free(buf);
	return found ? 0 : 1;
}
