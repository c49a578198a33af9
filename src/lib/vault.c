/*
 * vault.c - memory for what no child process may inherit.
 *
 * The supervisor forks: each sandbox's init is a fork that never execs,
 * and so are the helpers that read hostile input (an image's layers, a
 * box's files).  A fork copies the whole address space, so everything the
 * supervisor holds would be in each of them, behind only "not dumpable":
 * the real values of the policy's secrets, the daemon's API token, the
 * daemon's environment.  A vault block is its own anonymous mapping,
 * marked MADV_WIPEONFORK (a child finds zeros there, the kernel sees to
 * it, before the child runs a single instruction) and MADV_DONTDUMP (no
 * core file has it).  The environment cannot move into one: a fork that
 * becomes a daemon needs it.  corral_forget() wipes it instead, first
 * thing in every child that takes hostile input.  What passes through
 * (a request's head, a proxied request with its secret swapped in) lives
 * in libevent's buffers: libevent's blocks are zeroed when freed, and the
 * live ones dropped by corral_forget (livemem.c).
 */
#include "internal.h"
#include "livemem.h"
#include "tls_plugin.h"

#include <errno.h>
#include <event2/event.h>
#include <jansson.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

/* a block's length, in front of what the caller gets (which stays aligned) */
#define VAULT_HEAD	16

void *vault_alloc(size_t len)
{
	size_t total = len + VAULT_HEAD;
	char *p;

	if (len > SIZE_MAX - VAULT_HEAD) {
		errno = ENOMEM;
		return NULL;
	}
	p = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	/* without the first, what it holds would reach every child: no block */
	if (madvise(p, total, MADV_WIPEONFORK) < 0 ||
	    madvise(p, total, MADV_DONTDUMP) < 0) {
		int e = errno;

		munmap(p, total);
		errno = e;
		return NULL;
	}
	memcpy(p, &total, sizeof(total));
	return p + VAULT_HEAD;
}

void vault_free(void *ptr)
{
	char *p = ptr;
	size_t total;

	if (!p)
		return;
	p -= VAULT_HEAD;
	memcpy(&total, p, sizeof(total));
	explicit_bzero(p, total);
	munmap(p, total);
}

/* len bytes of s and a NUL, in the vault */
char *vault_memdup(const void *s, size_t len)
{
	char *v = len < SIZE_MAX ? vault_alloc(len + 1) : NULL;

	if (!v)
		return NULL;
	memcpy(v, s, len);
	v[len] = '\0';
	return v;
}

/*
 * Where the process's arguments (stat fields 48 and 49) and environment
 * (50 and 51) lie: from /proc/self/stat, read without sscanf (its code is
 * pages a fresh init never faulted in).  0 when they were found.
 */
static int stat_areas(unsigned long v[4])
{
	char buf[1024], *e, *p = proc_stat_fields(0, buf, sizeof(buf));

	/* p is at the space before the state, field 3 */
	if (p)
		p--;
	for (int field = 2; p && field < 48; field++)
		p = strchr(p + 1, ' ');
	for (int i = 0; p && i < 4; i++) {
		v[i] = strtoul(p, &e, 10);
		if (e == p || (*e != ' ' && *e != '\n'))
			return -1;
		p = e;
	}
	return p ? 0 : -1;
}

/*
 * In a child of the supervisor that takes hostile input, before it reads
 * any.  The environment the process started with is zeroed where it lies
 * (the stack's top: always writable, unlike a string a program gave
 * putenv), and the child has none: a sandbox's command gets the one the
 * policy made, never this.  With a title, the arguments too, title in
 * their place: a caller keeps no pointer into them.
 */
void corral_forget(const char *title)
{
	extern char **environ;
	static char *none[1];
	unsigned long v[4];
	char *execfn;

	environ = none;
	/* what libevent and OpenSSL hold: every sandbox's live connections */
	livemem_forget();
	tls_plugin_forget();
	if (stat_areas(v) < 0)
		return;
	/* bounds no environment or argument list passes (ARG_MAX) */
	if (v[3] > v[2] && v[3] - v[2] <= (64 << 20))
		memset((void *)v[2], 0, v[3] - v[2]);
	if (title && v[1] > v[0] && v[1] - v[0] <= (1 << 20)) {
		memset((void *)v[0], 0, v[1] - v[0]);
		snprintf((char *)v[0], v[1] - v[0], "%s", title);
	}
	/* the path execve was given (argv[0]'s, often), above the environment */
	if (title && (execfn = (char *)getauxval(AT_EXECFN)))
		memset(execfn, 0, strlen(execfn));
}

char *corral_secret_dup(const char *s, size_t len)
{
	return vault_memdup(s, len);
}

void corral_secret_free(char *s)
{
	vault_free(s);
}

/* jansson's allocator: glibc's, but nothing it frees keeps its bytes */
static void zeroing_free(void *p)
{
	if (!p)
		return;
	explicit_bzero(p, malloc_usable_size(p));
	free(p);
}

void corral_memory_init(void)
{
	/* what is under way in the proxy and the API: wiped in a fork too */
	event_set_mem_functions(livemem_malloc, livemem_realloc, livemem_free);
	/*
	 * jansson: every request body and policy is parsed into its strings
	 * (a policy's env.set, a call's argv, env and stdin).  It grows
	 * nothing with realloc: malloc, copy, free.
	 */
	json_set_alloc_funcs(malloc, zeroing_free);
}

int corral_memory_unshared(void)
{
	int r = livemem_unshared(), t = tls_plugin_unshared();

	return r < 0 ? r : t;
}
