/*
 * linediff.c - Myers' difference algorithm ("An O(ND) Difference Algorithm
 * and Its Variations", E. Myers, 1986), in its linear-space form: find the
 * middle snake of the edit graph by searching from both ends at once, then
 * solve the two halves.  The same algorithm git's xdiff uses by default.
 *
 * Sequences are of integers (a line's id): equal ids, equal lines.  The
 * search is bounded: past a cost that would take quadratic time on a huge
 * input, the region left is reported as deleted and inserted whole, which
 * is a correct script, only a longer one.
 */
#include "export.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct ld {
	const uint32_t *a, *b;
	bool *del, *ins;
	long *v;		/* both frontiers, 2 * (N + M + 2) */
	long max_cost;		/* edit distance searched before giving up */
};

static void take_all(struct ld *d, long a0, long a1, long b0, long b1)
{
	for (long i = a0; i < a1; i++)
		d->del[i] = true;
	for (long j = b0; j < b1; j++)
		d->ins[j] = true;
}

/*
 * The middle snake of a[a0..a1) against b[b0..b1): a point (*x, *y) on a
 * shortest edit path that splits it in two.  v1 holds the furthest x the
 * forward search reached on each diagonal k = x - y, v2 the same counted
 * from the ends.  false: no point within the cost bound.
 */
static bool middle_snake(struct ld *d, long a0, long a1, long b0, long b1,
			 long *x, long *y)
{
	const uint32_t *a = d->a + a0, *b = d->b + b0;
	long n = a1 - a0, m = b1 - b0;
	long max_d = (n + m + 1) / 2, off = max_d, len = 2 * max_d + 2;
	long delta = n - m;
	bool front = delta % 2 != 0;
	long k1start = 0, k1end = 0, k2start = 0, k2end = 0;
	long *v1 = d->v, *v2 = d->v + len;

	for (long i = 0; i < len; i++)
		v1[i] = v2[i] = -1;
	v1[off + 1] = v2[off + 1] = 0;
	for (long dd = 0; dd < max_d && dd <= d->max_cost; dd++) {
		for (long k1 = -dd + k1start; k1 <= dd - k1end; k1 += 2) {
			long k1o = off + k1, x1, y1;

			if (k1 == -dd || (k1 != dd && v1[k1o - 1] < v1[k1o + 1]))
				x1 = v1[k1o + 1];
			else
				x1 = v1[k1o - 1] + 1;
			y1 = x1 - k1;
			while (x1 < n && y1 < m && a[x1] == b[y1])
				x1++, y1++;
			v1[k1o] = x1;
			if (x1 > n) {
				k1end += 2;	/* ran off the right of the graph */
			} else if (y1 > m) {
				k1start += 2;	/* off the bottom */
			} else if (front) {
				long k2o = off + delta - k1;

				if (k2o >= 0 && k2o < len && v2[k2o] != -1 &&
				    x1 >= n - v2[k2o]) {
					*x = a0 + x1;
					*y = b0 + y1;
					return true;
				}
			}
		}
		for (long k2 = -dd + k2start; k2 <= dd - k2end; k2 += 2) {
			long k2o = off + k2, x2, y2;

			if (k2 == -dd || (k2 != dd && v2[k2o - 1] < v2[k2o + 1]))
				x2 = v2[k2o + 1];
			else
				x2 = v2[k2o - 1] + 1;
			y2 = x2 - k2;
			while (x2 < n && y2 < m && a[n - x2 - 1] == b[m - y2 - 1])
				x2++, y2++;
			v2[k2o] = x2;
			if (x2 > n) {
				k2end += 2;
			} else if (y2 > m) {
				k2start += 2;
			} else if (!front) {
				long k1o = off + delta - k2;

				if (k1o >= 0 && k1o < len && v1[k1o] != -1) {
					long x1 = v1[k1o], y1 = off + x1 - k1o;

					if (x1 >= n - x2) {
						*x = a0 + x1;
						*y = b0 + y1;
						return true;
					}
				}
			}
		}
	}
	return false;
}

static void compare(struct ld *d, long a0, long a1, long b0, long b1)
{
	long x, y;

	/* common head and tail are no part of the script */
	while (a0 < a1 && b0 < b1 && d->a[a0] == d->b[b0])
		a0++, b0++;
	while (a0 < a1 && b0 < b1 && d->a[a1 - 1] == d->b[b1 - 1])
		a1--, b1--;
	if (a0 == a1 || b0 == b1 || !middle_snake(d, a0, a1, b0, b1, &x, &y)) {
		take_all(d, a0, a1, b0, b1);
		return;
	}
	compare(d, a0, x, b0, y);
	compare(d, x, a1, y, b1);
}

int linediff(const uint32_t *a, size_t na, const uint32_t *b, size_t nb,
	     bool *del, bool *ins)
{
	struct ld d = { .a = a, .b = b, .del = del, .ins = ins };
	/* about 2e8 steps of the search at most, whatever the sizes */
	long total = (long)(na + nb) + 1;

	memset(del, 0, na * sizeof(bool));
	memset(ins, 0, nb * sizeof(bool));
	d.max_cost = 200000000L / total;
	if (d.max_cost < 256)
		d.max_cost = 256;
	d.v = malloc(2 * ((na + nb + 1) / 2 * 2 + 2) * sizeof(long) + sizeof(long));
	if (!d.v)
		return -ENOMEM;
	compare(&d, 0, (long)na, 0, (long)nb);
	free(d.v);
	return 0;
}
