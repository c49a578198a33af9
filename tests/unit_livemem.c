/*
 * unit_livemem.c - the allocator of libevent's and OpenSSL's blocks
 * (src/lib/livemem.c): a fork that forgets finds every live block zeroed
 * and copies no page to get there; a fork that does not forget keeps
 * them, unless the process asked that none do (a daemon's); a freed
 * block reads as zero; realloc keeps what it moves; freed blocks past a
 * class's megabyte go back to the system.
 *
 * Freed blocks are read through /proc/self/mem: a read of the kernel's,
 * which neither the compiler nor AddressSanitizer sees as a use after free.
 */
#include "unit.h"
#include "../src/lib/livemem.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define NBLOCKS		2048
#define SMALL		200
#define LARGE		(100 * 1024)
#define SECRET		"Bearer sk-live-0123456789abcdef"

static void fill(unsigned char *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		p[i] = SECRET[i % (sizeof(SECRET) - 1)];
}

static bool filled(const unsigned char *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != (unsigned char)SECRET[i % (sizeof(SECRET) - 1)])
			return false;
	return true;
}

static long minor_faults(void)
{
	struct rusage ru;

	return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_minflt : -1;
}

/*
 * Live blocks as a daemon holds them mid-burst: many small ones, between
 * malloc's own (a request's, a policy's), and a large one.
 */
struct live {
	unsigned char *small[NBLOCKS], *large;
	void *plain[NBLOCKS];
};

static bool live_make(struct live *l)
{
	for (size_t i = 0; i < NBLOCKS; i++) {
		l->small[i] = livemem_malloc(SMALL);
		l->plain[i] = malloc(SMALL);
		if (!l->small[i] || !l->plain[i])
			return false;
		fill(l->small[i], SMALL);
	}
	l->large = livemem_malloc(LARGE);
	if (!l->large)
		return false;
	fill(l->large, LARGE);
	return true;
}

static void live_free(struct live *l)
{
	for (size_t i = 0; i < NBLOCKS; i++) {
		livemem_free(l->small[i]);
		free(l->plain[i]);
	}
	livemem_free(l->large);
}

/* the child's exit status: 0, or bits for what was wrong */
#define BAD_CONTENT	1
#define BAD_FAULTS	2

static int run_child(struct live *l, bool forget)
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (pid == 0) {
		int bad = 0;
		long f0 = minor_faults(), f1;

		if (forget)
			livemem_forget();
		f1 = minor_faults();
		/*
		 * Each page a live block touched was a fault when they were
		 * written over (a page copied, then zeroed): 2048 blocks of
		 * 200 bytes are 100 pages and more.  Dropped, they cost none
		 * (a sanitizer's runtime may fault a few pages of its own).
		 */
		if (f0 < 0 || f1 < 0 || f1 - f0 > 32)
			bad |= BAD_FAULTS;
		for (size_t i = 0; i < NBLOCKS; i++)
			if (forget ? !unit_all_zero(l->small[i], SMALL) :
			    !filled(l->small[i], SMALL))
				bad |= BAD_CONTENT;
		if (forget ? !unit_all_zero(l->large, LARGE) : !filled(l->large, LARGE))
			bad |= BAD_CONTENT;
		_exit(bad);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

TEST(forget_drops_every_live_block_without_copying_a_page)
{
	struct live l;
	int r;

	CHECK(live_make(&l));
	r = run_child(&l, true);
	CHECK(r >= 0);
	CHECK(!(r & BAD_CONTENT));
	CHECK(!(r & BAD_FAULTS));
	/* the parent's blocks are its own still */
	CHECK(filled(l.small[0], SMALL) && filled(l.small[NBLOCKS - 1], SMALL));
	CHECK(filled(l.large, LARGE));
	live_free(&l);
}

/* the MCP front's private daemon, an OCI monitor: forks that go on */
TEST(a_fork_that_does_not_forget_keeps_the_blocks)
{
	struct live l;

	CHECK(live_make(&l));
	CHECK(run_child(&l, false) == 0);
	live_free(&l);
}

TEST(a_freed_block_reads_as_zero)
{
	size_t sizes[] = { 1, 40, SMALL, 4000, 30000 };

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		unsigned char *p = livemem_malloc(sizes[i]), buf[30000];

		CHECK(p != NULL);
		if (!p)
			continue;
		fill(p, sizes[i]);
		livemem_free(p);
		CHECK(unit_peek((uintptr_t)p, buf, sizes[i]));
		CHECK(unit_all_zero(buf, sizes[i]));
	}
}

TEST(realloc_keeps_the_bytes_and_zeroes_the_old_block)
{
	size_t steps[] = { 10, 100, 1000, 20000, LARGE, 3 * LARGE };
	unsigned char *p = livemem_malloc(steps[0]), *old, buf[SMALL];

	CHECK(p != NULL);
	if (!p)
		return;
	fill(p, steps[0]);
	for (size_t i = 1; i < sizeof(steps) / sizeof(steps[0]); i++) {
		old = p;
		p = livemem_realloc(p, steps[i]);
		CHECK(p != NULL);
		if (!p)
			return;
		CHECK(filled(p, steps[i - 1]));
		fill(p, steps[i]);
		/* a small block moved: the one left behind holds nothing */
		if (p != old && steps[i - 1] <= SMALL) {
			CHECK(unit_peek((uintptr_t)old, buf, steps[i - 1]));
			CHECK(unit_all_zero(buf, steps[i - 1]));
		}
	}
	CHECK(livemem_realloc(p, 0) == NULL);
}

TEST(blocks_are_aligned_as_mallocs)
{
	for (size_t len = 1; len < 70000; len = len * 3 + 1) {
		void *p = livemem_malloc(len);

		CHECK(p != NULL);
		CHECK(((uintptr_t)p & (_Alignof(max_align_t) - 1)) == 0);
		livemem_free(p);
	}
}

/*
 * A large block is a mapping of its own, unmapped when freed.  Under
 * AddressSanitizer its tail past the length asked for is marked off
 * limits; the marks must go with the mapping, or whatever is mapped
 * there next (a file libevent sends, another block) reads as poisoned.
 */
TEST(a_mapping_where_a_large_block_was_is_clean)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	/* the block's mapping: its header (under 64 bytes) and 40000, in pages */
	size_t len = (40000 + 64 + pg - 1) & ~(pg - 1);
	unsigned char *p = livemem_malloc(40000), *base, *m;
	char buf[64];

	CHECK(p != NULL);
	if (!p)
		return;
	base = (unsigned char *)((uintptr_t)p & ~(uintptr_t)(pg - 1));
	livemem_free(p);
	m = mmap(base, len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	CHECK(m == base);
	if (m != base)
		return;
	/* memset and snprintf are checked by the sanitizer: a mark would stop them here */
	memset(m, 1, len);
	snprintf(buf, sizeof(buf), "%.10s", (char *)m + 40000);
	CHECK(m[40000] == 1);
	munmap(m, len);
}

/* bytes of [p, p + len) in memory, counted by whole pages */
static size_t resident(const void *p, size_t len)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = (uintptr_t)p & ~(uintptr_t)(pg - 1);
	size_t n = ((uintptr_t)p + len - lo + pg - 1) / pg, in = 0;
	unsigned char *vec = malloc(n);

	if (!vec || mincore((void *)lo, n * pg, vec) < 0) {
		free(vec);
		return SIZE_MAX;
	}
	for (size_t i = 0; i < n; i++)
		in += (vec[i] & 1) * pg;
	free(vec);
	return in;
}

/*
 * A 60 MB upload is read in libevent's chains of 4 KiB; OpenSSL's records
 * take 16 and 32.  Freed, all but a megabyte of a class go back to the
 * system, read as zero, and serve the next request as well.
 */
#define BURST		400

static void burst(size_t len)
{
	unsigned char *p[BURST], *buf = malloc(len);
	size_t before = 0, after = 0;
	bool zero = true;

	CHECK(buf != NULL);
	if (!buf)
		return;
	for (size_t i = 0; i < BURST; i++) {
		p[i] = livemem_malloc(len);
		CHECK(p[i] != NULL);
		if (!p[i])
			return;
		fill(p[i], len);
	}
	for (size_t i = 0; i < BURST; i++)
		before += resident(p[i], len);
	for (size_t i = 0; i < BURST; i++)
		livemem_free(p[i]);
	for (size_t i = 0; i < BURST; i++) {
		after += resident(p[i], len);
		if (!unit_peek((uintptr_t)p[i], buf, len) || !unit_all_zero(buf, len))
			zero = false;
	}
	CHECK(before >= (size_t)BURST * len);
	/* a megabyte kept, and the block that went past it */
	CHECK(after <= (1u << 20) + 2 * len);
	CHECK(zero);
	for (size_t i = 0; i < BURST; i++) {
		p[i] = livemem_malloc(len);
		CHECK(p[i] != NULL);
		if (p[i])
			fill(p[i], len);
	}
	for (size_t i = 0; i < BURST; i++) {
		CHECK(p[i] && filled(p[i], len));
		livemem_free(p[i]);
	}
	free(buf);
}

TEST(freed_blocks_past_a_megabyte_go_back_to_the_system)
{
	burst(4096);
	burst(30000);
}

/*
 * A daemon's (livemem_unshared, `corral serve`): a fork that never
 * forgets still finds no live block, made before the call or after, and
 * the parent rewrites its blocks while the fork lives without a fault a
 * page (without it: a copy each, 100 pages and more).  Last: the mode is
 * for the rest of the process.
 */
TEST(unshared_blocks_reach_no_fork_and_cost_its_parent_no_copy)
{
	unsigned char *later;
	struct live l;
	int go[2], status, bad = -1;
	long f0, f1;
	pid_t pid;

	CHECK(live_make(&l));
	CHECK(livemem_unshared() == 0);
	later = livemem_malloc(LARGE);	/* a mapping made after the call */
	CHECK(later != NULL);
	if (!later || pipe(go) < 0)
		return;
	fill(later, LARGE);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		char c;

		bad = 0;
		for (size_t i = 0; i < NBLOCKS; i++)
			if (!unit_all_zero(l.small[i], SMALL))
				bad |= BAD_CONTENT;
		if (!unit_all_zero(l.large, LARGE) || !unit_all_zero(later, LARGE))
			bad |= BAD_CONTENT;
		/* alive while the parent writes: a page still shared would be copied */
		close(go[1]);
		while (read(go[0], &c, 1) < 0)
			;
		_exit(bad);
	}
	close(go[0]);
	f0 = minor_faults();
	for (size_t i = 0; i < NBLOCKS; i++)
		fill(l.small[i], SMALL);
	fill(l.large, LARGE);
	fill(later, LARGE);
	f1 = minor_faults();
	close(go[1]);
	if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status))
		bad = WEXITSTATUS(status);
	CHECK(bad == 0);
	/* a sanitizer's runtime may fault a few pages of its own */
	CHECK(f0 >= 0 && f1 - f0 <= 32);
	CHECK(filled(l.small[0], SMALL) && filled(later, LARGE));
	live_free(&l);
	livemem_free(later);
}

int main(void)
{
	unit_run_all();
	UNIT_DONE();
}
