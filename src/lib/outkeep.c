/*
 * outkeep.c - the head and the tail of a stream of output, within a cap.
 *
 * The first half of the cap is the head, kept as it comes; once it is
 * full, the second half is a ring of the latest bytes, so that a command
 * that writes a gigabyte costs one copy of each byte, not a move of the
 * kept tail per read.  At the end the two are joined, and the result says
 * how many bytes were dropped and where (corral_output.dropped_at).
 */
#include "outkeep.h"

#include <stdlib.h>
#include <string.h>

/* Append to o->data, NUL-terminated; false when out of memory. */
static bool append(struct corral_output *o, const char *buf, size_t n)
{
	char *grown;

	if (!n)
		return true;
	grown = realloc(o->data, o->len + n + 1);
	if (!grown)
		return false;
	memcpy(grown + o->len, buf, n);
	o->len += n;
	grown[o->len] = '\0';
	o->data = grown;
	return true;
}

static void lose(struct corral_output *o, size_t n)
{
	o->dropped += n;
	o->truncated = true;
}

/*
 * Keep the latest bytes in o->data itself, a live view of a process: at
 * most cap, and once past it at least cap - cap / 8.  A trim makes room
 * for cap / 8 more, so that the view moves once per that many bytes, not
 * once a read: a sandbox's process writing a byte at a time made each of
 * the daemon's reads a move of the whole cap (1 MiB), 88% of its loop's
 * time, some 40% of a CPU.
 */
static void add_tail_only(struct outkeep *k, struct corral_output *o,
			  const char *buf, size_t n)
{
	size_t cap = k->cap, keep = cap - cap / 8;

	if (n > cap) {
		lose(o, n - cap);
		buf += n - cap;
		n = cap;
	}
	if (o->len + n > cap) {
		size_t drop = n >= keep ? o->len : o->len + n - keep;

		memmove(o->data, o->data + drop, o->len - drop);
		o->len -= drop;
		o->data[o->len] = '\0';
		lose(o, drop);
	}
	if (!append(o, buf, n))
		lose(o, n);
}

static void ring_put(struct outkeep *k, struct corral_output *o,
		     const char *buf, size_t n)
{
	size_t size = k->ring_size, first;

	if (n > size) {			/* only its last size bytes can stay */
		lose(o, n - size);
		buf += n - size;
		n = size;
	}
	if (k->ring_len + n > size)	/* the oldest of the ring give way */
		lose(o, k->ring_len + n - size);
	first = size - k->ring_pos < n ? size - k->ring_pos : n;
	memcpy(k->ring + k->ring_pos, buf, first);
	memcpy(k->ring, buf + first, n - first);
	k->ring_pos = (k->ring_pos + n) % size;
	k->ring_len = k->ring_len + n > size ? size : k->ring_len + n;
}

void outkeep_add(struct outkeep *k, struct corral_output *o, const char *buf,
		 size_t n)
{
	size_t head = k->cap - k->cap / 2, take;

	if (k->tail_only) {
		add_tail_only(k, o, buf, n);
		return;
	}
	take = o->len < head ? head - o->len : 0;
	if (take > n)
		take = n;
	if (!append(o, buf, take))
		lose(o, take);
	buf += take;
	n -= take;
	if (!n)
		return;
	if (!k->ring) {
		k->ring_size = k->cap / 2;
		k->ring = k->ring_size ? malloc(k->ring_size) : NULL;
		if (!k->ring) {
			lose(o, n);
			return;
		}
	}
	ring_put(k, o, buf, n);
}

void outkeep_end(struct outkeep *k, struct corral_output *o)
{
	size_t start = (k->ring_pos + k->ring_size - k->ring_len) %
		       (k->ring_size ? k->ring_size : 1);
	size_t first = k->ring_size - start < k->ring_len ?
		       k->ring_size - start : k->ring_len;

	if (k->tail_only || !k->ring)
		return;
	o->dropped_at = o->len;
	if (!append(o, k->ring + start, first) ||
	    !append(o, k->ring, k->ring_len - first))
		o->truncated = true;	/* the head alone, still said truncated */
	outkeep_free(k);
}

void outkeep_free(struct outkeep *k)
{
	free(k->ring);
	k->ring = NULL;
	k->ring_size = k->ring_len = k->ring_pos = 0;
}
