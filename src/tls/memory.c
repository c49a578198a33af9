/*
 * memory.c - inside corral-tls.so: OpenSSL's memory, wiped in a fork.
 *
 * A daemon's sandboxes are forks of it, so each box's init held the live
 * TLS state of every other box's terminated connections: traffic and
 * exporter secrets (enough to decrypt a capture of that box's traffic),
 * record buffers with their plaintext (a swapped-in secret among it), the
 * minted certificates' keys.  Freed state is zeroed by corral's free
 * (src/cli/zerofree.c); live state cannot be freed in the child, whose
 * other threads' locks and the libraries' invariants are the parent's.
 * So every block OpenSSL allocates is on a list, and tls_memory_forget()
 * zeroes each, in a fork that will never use OpenSSL: the children
 * corral_forget() is called in.  It walks the list without the lock: a
 * fork has one thread, and OpenSSL is used only by the supervisor's
 * loop, the thread that forks.
 *
 * CRYPTO_set_mem_functions works only before OpenSSL's first allocation:
 * this object's constructor, which runs when it is loaded, after
 * libcrypto's own (which allocate nothing) and before any of its code.
 */
#include "tls_ca.h"

#include <openssl/crypto.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

/* in front of each block; its size keeps the block as aligned as malloc's */
struct block {
	struct block *next, *prev;
	size_t len;
	alignas(max_align_t) unsigned char data[];
};

static struct block live = { &live, &live, 0 };
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool wrapped;

static void *block_malloc(size_t len, const char *file, int line)
{
	struct block *b;

	(void)file, (void)line;
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

static void block_free(void *p, const char *file, int line)
{
	struct block *b;

	(void)file, (void)line;
	if (!p)
		return;
	b = (struct block *)((unsigned char *)p - offsetof(struct block, data));
	pthread_mutex_lock(&lock);
	b->prev->next = b->next;
	b->next->prev = b->prev;
	pthread_mutex_unlock(&lock);
	explicit_bzero(b, sizeof(*b) + b->len);
	free(b);
}

/* never in place: glibc's realloc would free the old block unzeroed */
static void *block_realloc(void *p, size_t len, const char *file, int line)
{
	struct block *b;
	void *n;

	if (!p)
		return block_malloc(len, file, line);
	if (!len) {
		block_free(p, file, line);
		return NULL;
	}
	b = (struct block *)((unsigned char *)p - offsetof(struct block, data));
	if (len <= b->len)
		return p;
	n = block_malloc(len, file, line);
	if (!n)
		return NULL;
	memcpy(n, p, b->len);
	block_free(p, file, line);
	return n;
}

__attribute__((constructor))
static void tls_memory_init(void)
{
	wrapped = CRYPTO_set_mem_functions(block_malloc, block_realloc, block_free) == 1;
}

bool tls_memory_wrapped(void)
{
	return wrapped;
}

void tls_memory_forget(void)
{
	for (struct block *b = live.next; b != &live; b = b->next)
		explicit_bzero(b->data, b->len);
}
