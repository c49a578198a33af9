/*
 * abort.h - the policy's abort criteria, applied as events happen.
 */
#ifndef CORRAL_ABORT_H
#define CORRAL_ABORT_H

#include "internal.h"

#include <jansson.h>

struct abort_state;

struct abort_verdict {
	const char *criterion;		/* "max_denied_egress", "tripwire", ... */
	char reason[CORRAL_ERR_MAX];	/* "port sweep: 9 distinct ... (limit 8)" */
	json_t *evidence;		/* what made it so (owned by the caller) */
};

struct abort_state *abort_new(const struct corral_abort *a);
void abort_free(struct abort_state *s);
/* Feed one event; true (once) when a criterion is met, with *v filled. */
bool abort_note(struct abort_state *s, const char *type, json_t *event,
		struct abort_verdict *v);
/* Time and CPU budgets; cpu_ms_valid false where no cgroup measures it. */
bool abort_check_usage(struct abort_state *s, uint64_t wall_ms, uint64_t cpu_ms,
		       bool cpu_ms_valid, struct abort_verdict *v);
bool abort_any(const struct corral_abort *a);

#endif
