/*
 * outkeep.h - what a result keeps of a stream of output when there is more
 * than its cap: the head and the tail (a program's error is usually at its
 * end, its context at its start), with the count of bytes dropped between
 * them; or, for a process followed while it runs, only the tail.
 */
#ifndef CORRAL_OUTKEEP_H
#define CORRAL_OUTKEEP_H

#include "corral.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct outkeep {
	size_t cap;		/* bytes kept at most (head + tail) */
	bool tail_only;		/* keep the last cap bytes, readable as they come */
	char *ring;		/* the tail while the stream runs */
	size_t ring_size, ring_len, ring_pos;
};

/* Bytes read from the stream, in order. */
void outkeep_add(struct outkeep *k, struct corral_output *o, const char *buf,
		 size_t n);
/* The stream ended: o->data is head then tail, o->dropped_at between them. */
void outkeep_end(struct outkeep *k, struct corral_output *o);
void outkeep_free(struct outkeep *k);

#endif
