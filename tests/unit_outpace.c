/*
 * unit_outpace.c - a box's paced calls (outpace.c) on a loop of their own:
 * which calls a tick reads again, in what order, and that a call ended
 * or freed while it waits for its turn leaves nothing behind.
 */
#include "internal.h"
#include "box.h"
#include "unit.h"

#include <event2/event.h>
#include <stdlib.h>
#include <unistd.h>

#define NCALLS	100
#define SHARE	32	/* outpace.c's PACE_BOX_CALLS */

struct bed {
	struct event_base *base;
	struct corral_box *b;
	struct corral_call *c[NCALLS];
	int fds[NCALLS][2];
};

static void never(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
}

/* n calls of one box, each with both streams watched on a pipe's empty end */
static bool bed_make(struct bed *t, int n)
{
	*t = (struct bed){ .base = event_base_new() };
	t->b = calloc(1, sizeof(*t->b));
	if (!t->base || !t->b)
		return false;
	t->b->base = t->base;
	for (int i = 0; i < n; i++) {
		struct corral_call *c = calloc(1, sizeof(*c));

		if (!c || pipe(t->fds[i]) < 0)
			return false;
		c->b = t->b;
		c->out.c = c->err.c = c;
		c->out.ev = event_new(t->base, t->fds[i][0], EV_READ | EV_PERSIST, never, NULL);
		c->err.ev = event_new(t->base, t->fds[i][0], EV_READ | EV_PERSIST, never, NULL);
		if (!c->out.ev || !c->err.ev || event_add(c->out.ev, NULL) < 0 ||
		    event_add(c->err.ev, NULL) < 0)
			return false;
		t->c[i] = c;
	}
	return true;
}

static void call_gone(struct corral_call *c)
{
	outpace_drop(c);
	drop_event(&c->out.ev);
	drop_event(&c->err.ev);
	free(c);
}

static void bed_free(struct bed *t, int n)
{
	for (int i = 0; i < n; i++) {
		if (t->c[i])
			call_gone(t->c[i]);
		close(t->fds[i][0]);
		close(t->fds[i][1]);
	}
	/* the box's tick went with its last waiting call */
	CHECK(t->b->ev_pace == NULL);
	free(t->b);
	event_base_free(t->base);
}

static bool watched(const struct corral_call *c)
{
	return event_pending(c->out.ev, EV_READ, NULL) &&
	       event_pending(c->err.ev, EV_READ, NULL);
}

/*
 * 100 calls of one box paced at once: each of them resumed on the same
 * tick, so a sandbox's calls, as many as its pids limit, each cost the
 * loop a read and four epoll_ctl a tick (100 writers of a byte every ms:
 * 11% of the daemon's CPU).  A tick resumes SHARE of them, those that
 * paused first; the others wait for the next ticks, in turn.  A call
 * resumed is paced again at its next short read, though its turn came
 * past the window of two short reads.
 */
TEST(tick_resumes_a_share_in_turn)
{
	struct bed t;
	int next = 0, ticks = 0;

	CHECK(bed_make(&t, NCALLS));
	for (int i = 0; t.c[NCALLS - 1] && i < NCALLS; i++) {
		outpace_pause(t.c[i]);
		CHECK(t.c[i]->paced && !watched(t.c[i]));
	}
	while (next < NCALLS && ticks < 2 * NCALLS) {
		uint64_t t0 = corral_now_ms();
		int resumed = 0;

		CHECK(event_base_loop(t.base, EVLOOP_ONCE) == 0);
		ticks++;
		for (int i = 0; i < NCALLS; i++) {
			if (t.c[i]->paced || i < next)
				continue;
			resumed++;
			CHECK(watched(t.c[i]));
			/*
			 * its next short read paces it again, however long it
			 * waited for its turn (it was read twice a turn): its
			 * last short read is the tick's.  Not outpace_due()
			 * here: on a loaded host (ASan, make check's lanes) the
			 * 32nd resumed call was checked past PACE_WINDOW_MS
			 * after the tick.
			 */
			CHECK(t.c[i]->t_short >= t0);
			/* in the order they paused */
			CHECK(i == next);
			next = i + 1;
		}
		if (resumed > SHARE)
			fprintf(stderr, "  tick %d resumed %d of %d paced calls\n",
				ticks, resumed, NCALLS);
		CHECK(resumed <= SHARE);
	}
	CHECK(next == NCALLS);
	CHECK(ticks == (NCALLS + SHARE - 1) / SHARE);
	bed_free(&t, NCALLS);
}

/*
 * A call whose process exits while it waits is read at once (and leaves
 * its place to the next); one freed while it waits is no longer in the
 * box's queue (ASan: no read of it at the tick); one whose output is held
 * for a slow reader is not read at its turn, but when the hold ends.
 */
TEST(ended_freed_held_while_waiting)
{
	struct bed t;

	CHECK(bed_make(&t, 4));
	t.c[2]->held = true;
	for (int i = 0; t.c[3] && i < 4; i++)
		outpace_pause(t.c[i]);
	outpace_end(t.c[1]);
	CHECK(!t.c[1]->paced && watched(t.c[1]));
	call_gone(t.c[3]);
	t.c[3] = NULL;
	CHECK(t.b->ev_pace != NULL);
	CHECK(event_base_loop(t.base, EVLOOP_ONCE) == 0);
	CHECK(!t.c[0]->paced && watched(t.c[0]));
	CHECK(!t.c[2]->paced && !watched(t.c[2]));
	t.c[2]->held = false;
	outpace_watch(t.c[2]);
	CHECK(watched(t.c[2]));
	/* nothing waits: no tick is armed, none was left behind */
	CHECK(t.b->ev_pace == NULL && t.b->pace_head == NULL);
	bed_free(&t, 4);
}

int main(void)
{
	unit_run_all();
	UNIT_DONE();
}
