/*
 * zerofree.c - in corral's binary, nothing freed keeps its bytes.
 *
 * Each sandbox's init, and each helper that reads hostile input, is a
 * fork of the supervisor (in a daemon: of the daemon) that never execs:
 * it inherits the whole heap, free chunks included.  Before this, a box's
 * init held what every earlier request had left there: another client's
 * policy (its env.set values), a call's argv, environment and stdin, the
 * JSON they were parsed from, error strings, and whatever OpenSSL freed
 * (session secrets, record buffers).  Those are freed by corral's code in
 * hundreds of places and by five libraries, each with its own free;
 * zeroing at each would be a list that is never complete.  So this binary
 * defines free() and realloc() itself: the dynamic linker binds every
 * library's calls to them (glibc's own included: it calls its allocator
 * through the PLT precisely so that it can be replaced), and they hand
 * the block to glibc's allocator (__libc_free) zeroed.
 *
 * A block malloc got from mmap is not zeroed: free unmaps it, and no
 * later fork can see it (a read buffer sized to a limit, mostly never
 * touched, would otherwise be faulted in page by page only to be zeroed).
 *
 * Under AddressSanitizer, its runtime owns free(): its quarantine is told
 * to zero what it holds instead (__asan_default_options).
 */
#include <malloc.h>
#include <stddef.h>
#include <string.h>

#ifdef __SANITIZE_ADDRESS__

const char *__asan_default_options(void);

const char *__asan_default_options(void)
{
	return "max_free_fill_size=2147483647:free_fill_byte=0";
}

#else

void __libc_free(void *p);

/*
 * glibc's chunk header: the size word in front of the block, whose bit 1
 * says the chunk is a mapping of its own (IS_MMAPPED in malloc.c; the same
 * word malloc_usable_size reads).
 */
static int chunk_is_mmapped(const void *p)
{
	size_t size;

	memcpy(&size, (const char *)p - sizeof(size), sizeof(size));
	return (size & 2) != 0;
}

void free(void *p)
{
	if (!p)
		return;
	if (!chunk_is_mmapped(p))
		explicit_bzero(p, malloc_usable_size(p));
	__libc_free(p);
}

/*
 * glibc's realloc frees the old block unzeroed when it moves it, and the
 * tail it cuts off when it shrinks one.  So a block never shrinks, and
 * grows by a copy; by half again at least, so that a list grown one
 * element at a time is copied a logarithmic number of times, as glibc's
 * realloc would be.
 */
void *realloc(void *p, size_t len)
{
	size_t old, want;
	void *n;

	if (!p)
		return malloc(len);
	if (!len) {
		free(p);
		return NULL;
	}
	old = malloc_usable_size(p);
	if (len <= old)
		return p;
	want = old + old / 2 > len ? old + old / 2 : len;
	n = malloc(want);
	if (!n)
		n = malloc(want = len);
	if (!n)
		return NULL;
	memcpy(n, p, old);
	free(p);
	return n;
}

#endif
