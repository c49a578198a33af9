/*
 * wireswap.c - an agent that tries to make the daemon open a tripwire
 * while it archives a directory (GET .../archive): the walk stats a name,
 * then opens it; between the two the name may have become a hard link of
 * the tripwire.
 *
 *   wireswap DIR WIRE COUNT
 *
 * Makes COUNT files of 1 KiB in DIR (WIRE, a tripwire, is in DIR too),
 * prints "ready" and waits for the directory to be opened (the daemon's
 * walk, seen through inotify); then hard-links WIRE as DIR/L and, while
 * the daemon's opens of the files come in, keeps exchanging a file a few
 * ahead of them with L (renameat2 RENAME_EXCHANGE): the file the walk
 * stats next is a plain one or the tripwire, turn about.  Ends when the
 * walk has gone past the last file, or after 60 s.  Static: it needs
 * nothing from the sandbox's view of the host.
 */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE	(1 << 1)
#endif
#define AHEAD	40	/* files ahead of the walk's last open */

static atomic_int pos = -1, done;
static int dfd, count;

static int xchg(const char *a, const char *b)
{
	return syscall(SYS_renameat2, dfd, a, dfd, b, RENAME_EXCHANGE);
}

static void *flipper(void *arg)
{
	char cur[32] = "";
	int flipped = 0, target = -1;

	(void)arg;
	while (!done) {
		int p = pos;

		if (p < 0)
			continue;
		if (target < 0 || p >= target) {
			if (flipped && xchg(cur, "L") == 0)
				flipped = 0;
			target = p + AHEAD;
			if (target >= count)
				break;
			snprintf(cur, sizeof(cur), "f%06d", target);
		}
		if (xchg(cur, "L") == 0)
			flipped ^= 1;
	}
	if (flipped)
		xchg(cur, "L");
	return NULL;
}

/* The next events, or none after 100 ms: n bytes of them in buf. */
static ssize_t events(int in, char *buf, size_t len)
{
	struct pollfd p = { .fd = in, .events = POLLIN };

	if (poll(&p, 1, 100) <= 0)
		return 0;
	return read(in, buf, len);
}

int main(int argc, char **argv)
{
	char buf[4096] __attribute__((aligned(8))), name[32];
	time_t until;
	pthread_t th;
	int in;

	if (argc != 4) {
		fprintf(stderr, "usage: wireswap DIR WIRE COUNT\n");
		return 2;
	}
	count = atoi(argv[3]);
	dfd = open(argv[1], O_RDONLY | O_DIRECTORY);
	if (dfd < 0) {
		perror(argv[1]);
		return 1;
	}
	memset(buf, 'x', 1024);
	for (int i = 0; i < count; i++) {
		int fd;

		snprintf(name, sizeof(name), "f%06d", i);
		fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || write(fd, buf, 1024) != 1024 || close(fd) < 0) {
			perror(name);
			return 1;
		}
	}
	in = inotify_init1(IN_NONBLOCK);
	if (in < 0 || inotify_add_watch(in, argv[1], IN_OPEN) < 0) {
		perror("inotify");
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	until = time(NULL) + 60;
	/* the walk opens the directory first: an event with no name */
	while (pos < 0 && time(NULL) < until) {
		ssize_t n = events(in, buf, sizeof(buf));

		for (char *p = buf; n > 0 && p < buf + n;) {
			struct inotify_event *e = (void *)p;

			if (!e->len && (e->mask & IN_ISDIR))
				pos = 0;
			p += sizeof(*e) + e->len;
		}
	}
	if (linkat(dfd, argv[2], dfd, "L", 0) < 0) {
		perror("link");
		return 1;
	}
	pthread_create(&th, NULL, flipper, NULL);
	while (pos < count - AHEAD - 1 && time(NULL) < until) {
		ssize_t n = events(in, buf, sizeof(buf));

		for (char *p = buf; n > 0 && p < buf + n;) {
			struct inotify_event *e = (void *)p;

			if (e->len && e->name[0] == 'f' && atoi(e->name + 1) > pos)
				pos = atoi(e->name + 1);
			p += sizeof(*e) + e->len;
		}
	}
	done = 1;
	pthread_join(th, NULL);
	printf("done at %d\n", (int)pos);
	return 0;
}
