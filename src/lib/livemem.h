/*
 * livemem.h - blocks zeroed when freed, and all live ones dropped (read
 * as zero) in a fork that forgets (livemem.c says for whom).  One set of
 * mappings per object linked: libcorral's (libevent) and corral-tls.so's
 * (OpenSSL).
 */
#ifndef CORRAL_LIVEMEM_H
#define CORRAL_LIVEMEM_H

#include <stddef.h>

void *livemem_malloc(size_t len);
void *livemem_realloc(void *p, size_t len);
void livemem_free(void *p);
/* in a fork that will never use the list's library again */
void livemem_forget(void);
/*
 * From now on no fork inherits a live block (MADV_WIPEONFORK: a fork
 * reads zeros there): for a process none of whose forks use the library.
 * 0, or -errno of the madvise that failed (the flag stays set for the
 * mappings to come).
 */
int livemem_unshared(void);

#endif
