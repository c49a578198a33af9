/*
 * memory.c - inside corral-tls.so: OpenSSL's memory, wiped in a fork.
 *
 * A daemon's sandboxes are forks of it, so each box's init held the live
 * TLS state of every other box's terminated connections: traffic and
 * exporter secrets (enough to decrypt a capture of that box's traffic),
 * record buffers with their plaintext, the minted certificates' key.
 * Every block OpenSSL allocates comes from this object's own livemem
 * mappings (src/lib/livemem.c), whose pages tls_memory_forget() drops.
 *
 * CRYPTO_set_mem_functions works only before OpenSSL's first allocation:
 * this object's constructor, which runs when it is loaded, after
 * libcrypto's own (which allocate nothing) and before any of its code.
 */
#include "tls_ca.h"
#include "livemem.h"

#include <openssl/crypto.h>

static bool wrapped;

static void *ssl_malloc(size_t len, const char *file, int line)
{
	(void)file, (void)line;
	return livemem_malloc(len);
}

static void *ssl_realloc(void *p, size_t len, const char *file, int line)
{
	(void)file, (void)line;
	return livemem_realloc(p, len);
}

static void ssl_free(void *p, const char *file, int line)
{
	(void)file, (void)line;
	livemem_free(p);
}

__attribute__((constructor))
static void tls_memory_init(void)
{
	wrapped = CRYPTO_set_mem_functions(ssl_malloc, ssl_realloc, ssl_free) == 1;
}

bool tls_memory_wrapped(void)
{
	return wrapped;
}

void tls_memory_forget(void)
{
	livemem_forget();
}

int tls_memory_unshared(void)
{
	return livemem_unshared();
}
