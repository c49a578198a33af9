/*
 * unit_outkeep.c - what a stream's keeper keeps (src/lib/outkeep.c): for a
 * process followed while it runs (tail_only), the latest bytes in the
 * result's own buffer, and a bounded count of moves of that buffer however
 * the writer cuts its output: a process inside the sandbox that writes a
 * byte at a time made each of the daemon's reads a move of the whole cap
 * (1 MiB by default), 88% of the loop's time.
 */
#include "unit.h"
#include "../src/lib/outkeep.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CAP	4096

/* The byte at offset i of the test's stream: not periodic within CAP. */
static char stream_byte(size_t i)
{
	return (char)('a' + (i * 7 + i / 26) % 26);
}

/* Whether o holds the stream's bytes [total - o->len, total), in order. */
static bool holds_tail(const struct corral_output *o, size_t total)
{
	size_t from = total - o->len;

	for (size_t i = 0; i < o->len; i++)
		if (o->data[i] != stream_byte(from + i))
			return false;
	return o->data[o->len] == '\0';
}

/*
 * CAP bytes, then 4 CAP more one byte a read: the view moved at most once
 * per CAP / 8 bytes (it moved at every read before: 4 CAP times), holds
 * at most CAP bytes and at least 7/8 of it, always the latest, and what
 * it dropped is counted.
 */
TEST(tail_moves_once_per_eighth_of_its_cap)
{
	struct outkeep k = { .cap = CAP, .tail_only = true };
	struct corral_output o = { 0 };
	char first[CAP];
	size_t total = CAP, moves = 0, len_min = CAP, len_max = 0;
	bool tail_ok = true;

	for (size_t i = 0; i < CAP; i++)
		first[i] = stream_byte(i);
	outkeep_add(&k, &o, first, CAP);
	CHECK(o.len == CAP && holds_tail(&o, total));
	for (size_t i = 0; i < 4 * CAP; i++) {
		char c = stream_byte(total);
		uint64_t dropped = o.dropped;

		outkeep_add(&k, &o, &c, 1);
		total++;
		moves += o.dropped != dropped;	/* the view was trimmed: one move */
		len_min = o.len < len_min ? o.len : len_min;
		len_max = o.len > len_max ? o.len : len_max;
		tail_ok &= o.len > 0 && o.data[o.len - 1] == c;
	}
	CHECK(tail_ok);
	CHECK(holds_tail(&o, total));
	CHECK(moves <= 4 * 8 + 1);
	CHECK(len_max <= CAP);
	CHECK(len_min >= CAP - CAP / 8);
	CHECK(o.dropped == total - o.len && o.truncated);
	outkeep_end(&k, &o);
	CHECK(holds_tail(&o, total));
	free(o.data);
}

/* One read over the cap: its last CAP bytes, the rest counted dropped. */
TEST(tail_of_one_read_over_its_cap)
{
	struct outkeep k = { .cap = CAP, .tail_only = true };
	struct corral_output o = { 0 };
	size_t n = 3 * CAP + 5;
	char *big = malloc(n);

	CHECK(big != NULL);
	if (!big)
		return;
	for (size_t i = 0; i < n; i++)
		big[i] = stream_byte(i);
	outkeep_add(&k, &o, big, 10);
	outkeep_add(&k, &o, big + 10, n - 10);
	CHECK(o.len == CAP);
	CHECK(holds_tail(&o, n));
	CHECK(o.dropped == n - CAP);
	free(big);
	free(o.data);
}

int main(void)
{
	unit_run_all();
	UNIT_DONE();
}
