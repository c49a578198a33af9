/*
 * random.c - random bytes from the kernel, for placeholders and the like:
 * getrandom(2) rather than a library's generator, which would have to be
 * loaded and seeded at every start (OpenSSL's was, issue 17).
 */
#include "internal.h"

#include <errno.h>
#include <sys/random.h>

int corral_random(void *buf, size_t n)
{
	unsigned char *p = buf;
	size_t done = 0;

	while (done < n) {
		/* blocks only until the pool is first initialised, at boot */
		ssize_t r = getrandom(p + done, n - done, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		/* reads up to 256 bytes are never short; longer ones may be */
		if (r == 0)
			return -EIO;
		done += (size_t)r;
	}
	return 0;
}
