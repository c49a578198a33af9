/*
 * openat2.c - a path resolved by the kernel beneath a root, again when the
 * host raced the walk.
 *
 * With RESOLVE_IN_ROOT or RESOLVE_BENEATH, the kernel refuses a walk
 * through ".." during which any mount or rename happened anywhere on the
 * host (the global mount and rename seqlocks moved): EAGAIN, "may be
 * retried" (openat2(2)).  On a host where containers start and stop, that
 * is every few milliseconds, and a client's GET of "/workspace/.." failed
 * with 409 (seen in CI beside the containerd lane).
 */
#include "internal.h"

#include <errno.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Enough for any churn a host survives; the last EAGAIN is the caller's. */
#define OPENAT2_TRIES	64

int openat2_retry(int dirfd, const char *path, const struct open_how *how)
{
	int fd = -1;

	for (int i = 0; i < OPENAT2_TRIES; i++) {
		fd = (int)syscall(SYS_openat2, dirfd, path, how, sizeof(*how));
		if (fd >= 0 || errno != EAGAIN)
			break;
	}
	return fd;
}
