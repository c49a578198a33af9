/*
 * livemem.c - an allocator for a library whose live blocks a fork must
 * not keep: libevent's (the daemon's requests and the proxy's buffers
 * under way, a terminated request's plaintext with a secret swapped in)
 * and OpenSSL's (the live connections' traffic secrets, record buffers,
 * minted keys).
 *
 * Freed blocks are zeroed here.  Live ones cannot be freed in a fork,
 * whose libraries' invariants and locks are the parent's; so every block
 * lives in mappings of this file's own, never in malloc's heap, and
 * livemem_forget() drops those mappings' pages (MADV_DONTNEED: they read
 * as zero after) in a fork that will never use the library again: the
 * children corral_forget() is called in (init, the unpacker, the export
 * and mount helpers).  It walks the list of mappings without the lock: a
 * fork has one thread, and these libraries are used only by the
 * supervisor's loop, the thread that forks.
 *
 * Why mappings of its own: blocks on malloc's heap had to be written over
 * one by one, and each page a live block touched was a copy-on-write
 * fault in the fork (a page copied, then zeroed).  In a burst of 100
 * creates each box's init found about 3000 live blocks (300 KiB of
 * requests and buffers, spread over the daemon's heap) and spent 28 ms on
 * them on average; dropping the pages copies none.  MADV_WIPEONFORK would
 * do it at the fork itself, but for every fork, and some forks (the MCP
 * front's private daemon, an OCI container's monitor) go on using the
 * libraries they inherit.
 *
 * A daemon whose forks all forget or never use the library (`corral
 * serve`: inits, helpers, the watchdog) asks for more: livemem_unshared()
 * marks every mapping, now and later, MADV_WIPEONFORK, so that a fork
 * gets none of their pages, not even until it forgets.  That is also the
 * daemon's time: a fork write-protects every page the two then share,
 * and the daemon's next write to each (libevent's buffers and events,
 * written at every request) is a fault and a copy while the last init
 * still maps it.  In a burst of 100 creates that took the daemon's page
 * faults from about 6200 to 4500 (bench/serve.py, issue 17).
 *
 * Blocks come from slabs by power-of-two class, each class with a free
 * list; a block beyond the largest class has a mapping of its own,
 * unmapped when it is freed.  Blocks of a page or more (libevent reads a
 * socket into chains of 4 KiB, OpenSSL's records take 16 and 32) are
 * whole pages in slabs of their class, their headers in the slab's first
 * pages: once the class holds FREE_RESIDENT_MAX bytes of free blocks in
 * memory, a freed one's pages go back to the system (MADV_DONTNEED).
 * Without that a 60 MB upload, read in 15,000 chains, kept 57 MB of the
 * daemon's memory for good.  Smaller blocks share slabs with their
 * headers in front of them, and stay: their pages hold the daemon's peak
 * of small blocks.
 *
 * Built twice: into libcorral (libevent's, vault.c) and into corral-tls.so
 * (OpenSSL's, src/tls/memory.c), each with mappings of its own.
 */
#include "livemem.h"

#include <errno.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
#define POISON(p, n)	ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n)	ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n)	((void)(p), (void)(n))
#define UNPOISON(p, n)	((void)(p), (void)(n))
#endif

/* a mapping of ours: a slab, or one large block */
struct region {
	struct region *next, *prev;
	void *base;
	size_t len;
};

/*
 * In front of each small or large block; its size keeps the block as
 * aligned as malloc's, and off a page boundary, which only a page
 * block's data starts on.
 */
struct block {
	struct block *next_free;	/* on its class's free list */
	struct region *own;		/* a large block's mapping; NULL in a slab */
	size_t cap;			/* usable bytes: the class's, or the mapping's */
	size_t used;			/* the most the caller asked for: zeroed at free */
	alignas(max_align_t) unsigned char data[];
};

/* a page block's header, in its slab's first pages */
struct pblock {
	struct pblock *next_free;
	size_t used;			/* or USED_RELEASED while its pages are gone */
};

/* a slab of page blocks, SLAB_LEN long and aligned: a block finds it */
struct pslab {
	size_t cap;			/* its blocks' size, a multiple of the page */
	size_t nblocks, carved;
	unsigned char *data;		/* block i at data + i * cap */
	struct pblock hdr[];
};

/*
 * A class's usable size is a power of two (libevent asks for those: a
 * buffer's chain, its header included).
 */
#define CLASS_MIN_SHIFT	5		/* 32 bytes */
#define CLASS_MAX_SHIFT	15		/* 32 KiB: an OpenSSL record buffer fits */
#define NCLASSES	(CLASS_MAX_SHIFT - CLASS_MIN_SHIFT + 1)
#define SLAB_LEN	((size_t)1 << 20)	/* its untouched pages cost nothing */
#define FREE_RESIDENT_MAX	((size_t)1 << 20)	/* of a class's free page blocks */
#define USED_RELEASED	SIZE_MAX

static struct region regions = { &regions, &regions, NULL, 0 };
static bool unshared;		/* livemem_unshared(): forks get no pages */
static struct block *free_list[NCLASSES];
static struct pblock *pfree_list[NCLASSES];
static struct pslab *pslab_cur[NCLASSES];	/* the class's newest page slab */
static size_t free_resident[NCLASSES];	/* bytes of free page blocks in memory */
static unsigned char *bump, *bump_end;	/* the newest small slab's uncarved rest */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static uintptr_t page_size(void)
{
	static uintptr_t pg;

	if (!pg)
		pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	return pg;
}

static struct block *block_of(void *p)
{
	return (struct block *)((unsigned char *)p - offsetof(struct block, data));
}

static size_t class_cap(unsigned c)
{
	return (size_t)1 << (CLASS_MIN_SHIFT + c);
}

/* the class of a block of len usable bytes; NCLASSES: too large for one */
static unsigned class_of(size_t len)
{
	unsigned c = 0;

	while (c < NCLASSES && class_cap(c) < len)
		c++;
	return c;
}

static bool is_page_class(unsigned c)
{
	return class_cap(c) % page_size() == 0;
}

static bool is_page_block(const void *p)
{
	return ((uintptr_t)p & (page_size() - 1)) == 0;
}

/* a fresh mapping of len bytes, on the list; with the lock held */
static struct region *region_map(size_t len)
{
	struct region *r = malloc(sizeof(*r));
	void *base;

	if (!r)
		return NULL;
	base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		    -1, 0);
	if (base == MAP_FAILED) {
		free(r);
		return NULL;
	}
	/* a promise made for every fork to come: a mapping that cannot keep it is none */
	if (unshared && madvise(base, len, MADV_WIPEONFORK) < 0) {
		munmap(base, len);
		free(r);
		return NULL;
	}
	r->base = base;
	r->len = len;
	r->prev = &regions;
	r->next = regions.next;
	regions.next->prev = r;
	regions.next = r;
	return r;
}

/*
 * Twice the length mapped, the aligned SLAB_LEN kept: what is around it
 * is unmapped, or stays in the region untouched should that fail.
 */
static unsigned char *region_map_aligned(void)
{
	struct region *r = region_map(2 * SLAB_LEN);
	uintptr_t base, start;

	if (!r)
		return NULL;
	base = (uintptr_t)r->base;
	start = (base + SLAB_LEN - 1) & ~(uintptr_t)(SLAB_LEN - 1);
	if ((start == base || munmap(r->base, start - base) == 0) &&
	    munmap((void *)(start + SLAB_LEN), base + 2 * SLAB_LEN - start - SLAB_LEN) == 0) {
		r->base = (void *)start;
		r->len = SLAB_LEN;
	}
	return (unsigned char *)start;
}

/* with the lock held */
static struct block *small_alloc(unsigned c)
{
	size_t cap = class_cap(c), size = sizeof(struct block) + cap;
	struct block *b = free_list[c];
	struct region *r;

	if (b) {
		UNPOISON(b, sizeof(*b));
		free_list[c] = b->next_free;
		b->next_free = NULL;
		return b;
	}
	/* a page block's data alone starts on a page */
	if (bump && is_page_block(((struct block *)bump)->data))
		bump += alignof(max_align_t);
	if (!bump || (size_t)(bump_end - bump) < size) {
		r = region_map(SLAB_LEN);
		if (!r)
			return NULL;
		/* the old slab's rest (less than a block) stays unused */
		bump = r->base;
		bump_end = bump + SLAB_LEN;
		/* the slab's start is a page's: its first block's data is not */
	}
	b = (struct block *)bump;
	bump += size;
	b->own = NULL;
	b->cap = cap;
	return b;
}

static struct pslab *pslab_new(unsigned c)
{
	size_t cap = class_cap(c), pg = page_size();
	size_t meta = (sizeof(struct pslab) + SLAB_LEN / cap * sizeof(struct pblock) +
		       pg - 1) & ~(pg - 1);
	struct pslab *s = (struct pslab *)region_map_aligned();

	if (!s)
		return NULL;
	s->cap = cap;
	s->nblocks = (SLAB_LEN - meta) / cap;
	s->carved = 0;
	s->data = (unsigned char *)s + meta;
	return s;
}

/* a page block of class c, its used set to len; with the lock held */
static unsigned char *page_alloc(unsigned c, size_t len)
{
	struct pblock *h = pfree_list[c];
	struct pslab *s;

	if (h) {
		pfree_list[c] = h->next_free;
		if (h->used != USED_RELEASED)
			free_resident[c] -= class_cap(c);
	} else {
		s = pslab_cur[c];
		if (!s || s->carved == s->nblocks) {
			s = pslab_new(c);
			if (!s)
				return NULL;
			pslab_cur[c] = s;
		}
		h = &s->hdr[s->carved++];
	}
	h->next_free = NULL;
	h->used = len;
	s = (struct pslab *)((uintptr_t)h & ~(uintptr_t)(SLAB_LEN - 1));
	return s->data + (size_t)(h - s->hdr) * s->cap;
}

static struct pblock *page_header(void *p, size_t *cap)
{
	struct pslab *s = (struct pslab *)((uintptr_t)p & ~(uintptr_t)(SLAB_LEN - 1));

	*cap = s->cap;
	return &s->hdr[(size_t)((unsigned char *)p - s->data) / s->cap];
}

static struct block *large_alloc(size_t len)
{
	size_t pg = page_size();
	size_t total = (sizeof(struct block) + len + pg - 1) & ~(pg - 1);
	struct region *r = region_map(total);
	struct block *b;

	if (!r)
		return NULL;
	b = r->base;
	b->own = r;
	b->cap = total - sizeof(*b);
	return b;
}

void *livemem_malloc(size_t len)
{
	struct block *b;
	unsigned char *p;
	unsigned c;

	if (len > SIZE_MAX / 2)
		return NULL;
	c = class_of(len);
	pthread_mutex_lock(&lock);
	if (c < NCLASSES && is_page_class(c)) {
		p = page_alloc(c, len);
		pthread_mutex_unlock(&lock);
		if (p) {
			UNPOISON(p, len);
			POISON(p + len, class_cap(c) - len);
		}
		return p;
	}
	b = c < NCLASSES ? small_alloc(c) : large_alloc(len);
	pthread_mutex_unlock(&lock);
	if (!b)
		return NULL;
	b->used = len;
	/* what lies past len is not the caller's to touch */
	UNPOISON(b->data, len);
	POISON(b->data + len, b->cap - len);
	return b->data;
}

/*
 * Zeroed, or its pages given back once its class keeps enough in memory
 * (they read as zero after).
 */
static void page_free(void *p)
{
	size_t cap;
	struct pblock *h;
	unsigned c;

	pthread_mutex_lock(&lock);
	h = page_header(p, &cap);
	UNPOISON(p, cap);
	c = class_of(cap);
	if (free_resident[c] >= FREE_RESIDENT_MAX && madvise(p, cap, MADV_DONTNEED) == 0) {
		h->used = USED_RELEASED;
	} else {
		explicit_bzero(p, h->used);
		free_resident[c] += cap;
	}
	h->next_free = pfree_list[c];
	pfree_list[c] = h;
	pthread_mutex_unlock(&lock);
	POISON(p, cap);
}

void livemem_free(void *p)
{
	struct block *b;
	struct region *r;
	unsigned c;

	if (!p)
		return;
	if (is_page_block(p)) {
		page_free(p);
		return;
	}
	b = block_of(p);
	r = b->own;
	if (r) {
		/* unmapped: no later fork can see it */
		pthread_mutex_lock(&lock);
		r->prev->next = r->next;
		r->next->prev = r->prev;
		pthread_mutex_unlock(&lock);
		/* the sanitizer's marks outlive the mapping: the next one there is clean */
		UNPOISON(r->base, r->len);
		/* off the list, a mapping left would outlive forget: empty it */
		if (munmap(r->base, r->len) < 0)
			explicit_bzero(r->base, r->len);
		free(r);
		return;
	}
	/* past used, the block is as zero as it was handed out */
	UNPOISON(b->data, b->cap);
	explicit_bzero(b->data, b->used);
	c = class_of(b->cap);
	pthread_mutex_lock(&lock);
	b->next_free = free_list[c];
	free_list[c] = b;
	pthread_mutex_unlock(&lock);
	POISON(b->data, b->cap);
}

void *livemem_realloc(void *p, size_t len)
{
	struct block *b;
	struct pblock *h = NULL;
	size_t cap, *used;
	void *n;

	if (!p)
		return livemem_malloc(len);
	if (!len) {
		livemem_free(p);
		return NULL;
	}
	if (is_page_block(p)) {
		pthread_mutex_lock(&lock);
		h = page_header(p, &cap);
		pthread_mutex_unlock(&lock);
		used = &h->used;
	} else {
		b = block_of(p);
		cap = b->cap;
		used = &b->used;
	}
	if (len <= cap) {
		UNPOISON(p, len);
		if (len > *used)
			*used = len;
		return p;
	}
	n = livemem_malloc(len);
	if (!n)
		return NULL;
	memcpy(n, p, *used);
	livemem_free(p);
	return n;
}

int livemem_unshared(void)
{
	int r = 0;

	pthread_mutex_lock(&lock);
	unshared = true;
	for (struct region *m = regions.next; m != &regions && !r; m = m->next)
		if (madvise(m->base, m->len, MADV_WIPEONFORK) < 0)
			r = -errno;
	pthread_mutex_unlock(&lock);
	return r;
}

void livemem_forget(void)
{
	for (struct region *r = regions.next; r != &regions; r = r->next)
		if (madvise(r->base, r->len, MADV_DONTNEED) < 0)
			explicit_bzero(r->base, r->len);	/* slower, as sure */
	/* nothing here is handed out again, should the library be called */
	memset(free_list, 0, sizeof(free_list));
	memset(pfree_list, 0, sizeof(pfree_list));
	memset(pslab_cur, 0, sizeof(pslab_cur));
	memset(free_resident, 0, sizeof(free_resident));
	bump = bump_end = NULL;
}
