/*
 * livemem.c - an allocator for a library whose live blocks a fork must
 * not keep: libevent's (the daemon's requests and the proxy's buffers
 * under way, a terminated request's plaintext with a secret swapped in)
 * and OpenSSL's (the live connections' traffic secrets, record buffers,
 * minted keys).
 *
 * Freed blocks are zeroed, here or by the program's free (glibc's
 * realloc would free a moved block unzeroed: a block grows by a copy
 * here).  Live ones cannot be freed in
 * a fork, whose libraries' invariants and locks are the parent's, so
 * every block is on a list and livemem_forget() zeroes each, in a fork
 * that will never use the library again: the children corral_forget()
 * is called in (init, the unpacker, the export and mount helpers).  It
 * walks the list without the lock: a fork has one thread, and these
 * libraries are used only by the supervisor's loop, the thread that forks.
 *
 * Built twice: into libcorral (libevent's, vault.c) and into corral-tls.so
 * (OpenSSL's, src/tls/memory.c), each with a list of its own.
 */
#include "livemem.h"

#include <pthread.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* in front of each block; its size keeps the block as aligned as malloc's */
struct block {
	struct block *next, *prev;
	size_t len;
	alignas(max_align_t) unsigned char data[];
};

static struct block live = { &live, &live, 0 };

/*
 * Defined by a program whose free() zeroes what it frees (corral's own,
 * src/cli/zerofree.c): a block is then not written over twice, which cost
 * the proxy's TLS downloads 3.6%, every relayed chunk being one of
 * libevent's blocks.  Elsewhere (a program linking libcorral, the TLS
 * plugin, which the binary does not export it to) it is not there.
 */
extern const int corral_free_zeroes __attribute__((weak));
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static struct block *block_of(void *p)
{
	return (struct block *)((unsigned char *)p - offsetof(struct block, data));
}

void *livemem_malloc(size_t len)
{
	struct block *b;

	if (len > SIZE_MAX - sizeof(*b))
		return NULL;
	b = malloc(sizeof(*b) + len);
	if (!b)
		return NULL;
	b->len = len;
	b->prev = &live;
	pthread_mutex_lock(&lock);
	b->next = live.next;
	live.next->prev = b;
	live.next = b;
	pthread_mutex_unlock(&lock);
	return b->data;
}

void livemem_free(void *p)
{
	struct block *b;

	if (!p)
		return;
	b = block_of(p);
	pthread_mutex_lock(&lock);
	b->prev->next = b->next;
	b->next->prev = b->prev;
	pthread_mutex_unlock(&lock);
	if (!&corral_free_zeroes)
		explicit_bzero(b, sizeof(*b) + b->len);
	free(b);
}

void *livemem_realloc(void *p, size_t len)
{
	size_t old;
	void *n;

	if (!p)
		return livemem_malloc(len);
	if (!len) {
		livemem_free(p);
		return NULL;
	}
	old = block_of(p)->len;
	if (len <= old)
		return p;
	n = livemem_malloc(len);
	if (!n)
		return NULL;
	memcpy(n, p, old);
	livemem_free(p);
	return n;
}

void livemem_forget(void)
{
	for (struct block *b = live.next; b != &live; b = b->next)
		explicit_bzero(b->data, b->len);
}
