/*
 * internal.h - interfaces between the library's modules.  Not installed.
 */
#ifndef CORRAL_INTERNAL_H
#define CORRAL_INTERNAL_H

#include "corral.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>

#define CORRAL_AGENT_UID 1000
#define CORRAL_AGENT_GID 1000

/* err.c: fill err, return code (a negative errno). */
int corral_set_err(struct corral_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Prefix an existing message: "what: <old msg>". */
int corral_wrap_err(struct corral_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * ---- cleanup by attribute, as bubblewrap and crun do -------------------
 * cleanup_close int fd = -1;  cleanup_free char *s = NULL;  released when
 * the variable goes out of scope, on every return.  steal_fd/steal_pointer
 * hand ownership on and leave -1/NULL behind, so nothing is released twice.
 */
static inline void cleanup_closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;	/* a cleanup must not change the error */

		close(*fd);
		errno = saved;
	}
	*fd = -1;
}

static inline void cleanup_freep(void *p)
{
	free(*(void **)p);
}

#define cleanup_close __attribute__((cleanup(cleanup_closep)))
#define cleanup_free __attribute__((cleanup(cleanup_freep)))

static inline int steal_fd(int *fd)
{
	int r = *fd;

	*fd = -1;
	return r;
}

#define steal_pointer(pp) \
	({ __typeof__(*(pp)) stolen_ = *(pp); *(pp) = NULL; stolen_; })

/* ---- cgroup*.c: limits, freezer, kill (cgroup v2, v1, or rlimits) ---- */
#include "cgroup.h"

/* ---- seccomp.c ------------------------------------------------------- */

/*
 * Load the deny-list filter into the calling thread (after no_new_privs).
 * notify_fd non-NULL: denials notify the holder of *notify_fd (USER_NOTIF)
 * where the kernel and libseccomp can; *notify_fd is -1 where they cannot.
 */
int seccomp_apply(int *notify_fd, struct corral_err *err);
bool seccomp_available(void);
bool seccomp_notify_available(void);
/* Why the table denies syscall nr, for events. */
const char *seccomp_deny_why(int nr);

/* ---- landlock.c ------------------------------------------------------ */

struct ll_rule {
	const char *path;
	bool writable;
};

int landlock_abi(void);		/* 0 if unsupported/disabled */
/*
 * Restrict the calling thread: read/execute everywhere under the given paths,
 * write only where writable; with tcp_ports (ABI >= 4), TCP connect only to
 * those ports.  Returns the ABI used (> 0), 0 if Landlock is
 * not available, or a negative errno.
 */
int landlock_apply(const struct ll_rule *rules, size_t n,
		   const uint16_t *tcp_ports, size_t nports, struct corral_err *err);

#endif
