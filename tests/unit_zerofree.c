/*
 * unit_zerofree.c - the binary's free() (src/cli/zerofree.c): what it
 * freed reads as zero, to the byte, and a large block's pages that were
 * never touched are not faulted in to be zeroed.
 *
 * Linked with zerofree.o, so free() here is corral's.  The freed block is
 * read through /proc/self/mem: a read of the kernel's, which neither the
 * compiler nor AddressSanitizer sees as a use after free.
 */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define BLOCK		(256 * 1024)
/*
 * What glibc writes into a free chunk: its list pointers at the front, at
 * most; and at the end, where the next chunk's header begins, the size of
 * this one (the next's prev_size, part of the usable size while in use).
 */
#define CHUNK_LINKS	32
#define CHUNK_FOOT	sizeof(size_t)

static size_t pg;

/* p's usable size in *len, if p is there and that fits in cap bytes */
static bool usable(void *p, size_t cap, size_t *len)
{
	CHECK(p != NULL);
	if (!p)
		return false;
	*len = malloc_usable_size(p);
	CHECK(*len <= cap);
	return *len <= cap;
}

static bool resident(uintptr_t page)
{
	unsigned char v = 0;

	return mincore((void *)(page & ~(uintptr_t)(pg - 1)), pg, &v) == 0 && (v & 1);
}

/*
 * A heap block of BLOCK bytes (never a mapping of its own: glibc would
 * unmap that), its pages as yet untouched and never huge, and a block
 * after it, so that freeing it neither trims nor merges the heap's top.
 */
static unsigned char *heap_block(void **guard)
{
	unsigned char *p;
	uintptr_t a;

	mallopt(M_MMAP_THRESHOLD, 4 * BLOCK);
	mallopt(M_TRIM_THRESHOLD, 64 * BLOCK);
	p = malloc(BLOCK);
	*guard = malloc(64);
	if (!p || !*guard)
		return NULL;
	/* an earlier test's block, read through /proc/self/mem, may be here */
	a = ((uintptr_t)p + pg - 1) & ~(uintptr_t)(pg - 1);
	madvise((void *)a, BLOCK - (a - (uintptr_t)p) - pg, MADV_NOHUGEPAGE);
	madvise((void *)a, BLOCK - (a - (uintptr_t)p) - pg, MADV_DONTNEED);
	return p;
}

TEST(large_block_reads_as_zero)
{
	static unsigned char buf[2 * BLOCK];
	size_t len, marks[] = { CHUNK_LINKS, 5 * pg + 17, 40 * pg, 0 };
	void *guard = NULL;
	unsigned char *p = heap_block(&guard);
	volatile uintptr_t a = (uintptr_t)p;

	if (!usable(p, sizeof(buf), &len))
		return;
	marks[3] = len - 64;
	for (size_t i = 0; i < sizeof(marks) / sizeof(marks[0]); i++)
		memset(p + marks[i], 0xa5, 64);
	free(p);
	CHECK(unit_peek(a, buf, len));
	CHECK(unit_all_zero(buf + CHUNK_LINKS, len - CHUNK_LINKS - CHUNK_FOOT));
	free(guard);
}

TEST(untouched_pages_not_faulted_in)
{
	void *guard = NULL;
	unsigned char *p = heap_block(&guard);
	volatile uintptr_t first;
	int untouched = 0, faulted = 0;

	CHECK(p != NULL);
	if (!p)
		return;
	/* the first whole page, and the one 10 pages on, are written */
	first = ((uintptr_t)p + pg - 1) & ~(uintptr_t)(pg - 1);
	memset((void *)first, 0x5a, pg);
	memset((void *)(first + 10 * pg), 0x5a, pg);
	for (int i = 2; i < 10; i++)
		untouched += !resident(first + i * pg);
	CHECK(untouched == 8);	/* else the test proves nothing */
	free(p);
	for (int i = 2; i < 10; i++)
		faulted += resident(first + i * pg);
#ifdef __SANITIZE_ADDRESS__
	/* ASan's quarantine writes the whole block: only the bytes are checked */
	(void)faulted;
#else
	CHECK(faulted == 0);
#endif
	free(guard);
}

TEST(small_block_reads_as_zero)
{
	unsigned char buf[256];
	unsigned char *p = malloc(200);
	volatile uintptr_t a = (uintptr_t)p;	/* an address, no longer a pointer */
	size_t len;

	if (!usable(p, sizeof(buf), &len))
		return;
	memset(p, 0x77, len);
	free(p);
	CHECK(unit_peek(a, buf, len));
	CHECK(unit_all_zero(buf + CHUNK_LINKS, len - CHUNK_LINKS - CHUNK_FOOT));
}

TEST(free_keeps_errno)
{
	void *guard = NULL;
	unsigned char *p = heap_block(&guard);

	CHECK(p != NULL);
	if (!p)
		return;
	p[BLOCK / 2] = 1;
	errno = EBADMSG;
	free(p);
	CHECK(errno == EBADMSG);
	free(guard);
}

int main(void)
{
	pg = (size_t)sysconf(_SC_PAGESIZE);
	unit_run_all();
	UNIT_DONE();
}
