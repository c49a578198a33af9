/*
 * outpace.c - a call's output read by the bytes it brings, not by the
 * writes that made it.
 *
 * The daemon reads every sandbox's pipes on its one loop, each as soon as
 * it is readable: a process writing a byte a write(2) (dd bs=1) made it
 * read a byte a read, 140,000-190,000 reads a second, 26-38% of a CPU
 * taken from every other sandbox (a neighbour's exec 5-16 ms -> 5-20 ms), and
 * the sandbox's own CPU limit did not bound it (the daemon is in none of
 * its groups).  So a call whose reads come short (fewer than PACE_SHORT
 * bytes) twice within PACE_WINDOW_MS has both its streams taken out of
 * the loop until the next multiple of PACE_MS of the monotonic clock: the
 * bytes gather in the pipe, and are read together.  A read that brings
 * PACE_SHORT bytes or more is never paused: its cost is its bytes.
 *
 * What it keeps:
 * - no byte lost: the pipe holds them (64 KiB; a writer that fills it
 *   waits, as for a slow reader);
 * - a paced call's output is at most PACE_MS late (a streaming client's,
 *   PACE_BOX_CALLS paced in its box at most,
 *   a follower's), and the first short read after a quiet spell (a
 *   prompt, a build's line) is not late at all;
 * - its end is not: the process's exit takes the streams back into the
 *   loop at once, and what they hold then, and their EOF, is read without
 *   a pause (outpace_end: the pace starts again, for a background child
 *   that goes on writing); an EOF before the exit waits at most a pace,
 *   but the call, which ends with its process, does not;
 * - stdout and stderr pause and come back together: neither's older bytes
 *   wait while the other's newer ones are read (API.md: output written
 *   faster than the daemon reads it is ordered as read);
 * - every paced call of a box resumes on the box's tick, a multiple of
 *   PACE_MS: one wake of the loop for all of them; each is then read once.
 *
 * A writer slower than a write every 10 ms is read at each write, as
 * before: what pacing bounds is the reads a call makes the loop do, about
 * 1000 / PACE_MS a second.  A sandbox chooses how many calls it runs at
 * once (up to its pids limit): a call each cost the loop its read and
 * its pipes' epoll_ctl each tick, and 100 calls of one box writing a byte
 * every 1 ms took 11% of the daemon's CPU (41-47% unpaced), 1000 would
 * take all of it.  So a box's tick resumes at most PACE_BOX_CALLS of its
 * paced calls, those that paused first; the others wait for the next
 * tick, in turn: a box's paced reads are at most PACE_BOX_CALLS * 1000 /
 * PACE_MS a second, and a call of n paced at once is up to PACE_MS *
 * ceil(n / PACE_BOX_CALLS) late.
 */
#include "box.h"

#include <event2/event.h>

#define PACE_MS		5	/* a paced call waits for the next multiple of this */
#define PACE_WINDOW_MS	(2 * PACE_MS)	/* two short reads closer than this: paced */
#define PACE_SHORT	4096	/* a read of fewer bytes is short */
#define PACE_BOX_CALLS	32	/* a box's paced calls resumed a tick, at most */

static void streams_watch(struct corral_call *c)
{
	struct stream *s[2] = { &c->out, &c->err };
	bool on = !c->held && !c->paced;

	for (int i = 0; i < 2; i++) {
		if (!s[i]->ev)
			continue;
		if (on)
			event_add(s[i]->ev, NULL);
		else
			event_del(s[i]->ev);
	}
}

void outpace_watch(struct corral_call *c)
{
	streams_watch(c);
}

bool outpace_due(struct corral_call *c, size_t n)
{
	uint64_t now, last;

	if (n >= PACE_SHORT)
		return false;
	now = corral_now_ms();
	last = c->t_short;
	c->t_short = now;
	return last && now - last < PACE_WINDOW_MS;
}

static void on_pace(evutil_socket_t fd, short what, void *arg);

/* c out of its box's queue: it waits for no tick (its place was the next's) */
static void pace_unlink(struct corral_call *c)
{
	struct corral_box *b = c->b;

	*c->pace_prev = c->pace_next;
	if (c->pace_next)
		c->pace_next->pace_prev = c->pace_prev;
	else
		b->pace_tail = c->pace_prev;
	c->pace_next = NULL;
	c->pace_prev = NULL;
	c->paced = false;
	/* the timer lives while a call waits: the box is freed after its calls */
	if (!b->pace_head)
		drop_event(&b->ev_pace);
}

static bool pace_arm(struct corral_box *b)
{
	uint64_t now = corral_now_ms();
	struct timeval tv = tv_ms(PACE_MS - now % PACE_MS);

	if (!b->ev_pace)
		b->ev_pace = evtimer_new(b->base, on_pace, b);
	if (b->ev_pace && evtimer_add(b->ev_pace, &tv) == 0)
		return true;
	drop_event(&b->ev_pace);
	return false;
}

/* The box's tick: the PACE_BOX_CALLS calls that paused first read again. */
static void on_pace(evutil_socket_t fd, short what, void *arg)
{
	struct corral_box *b = arg;
	uint64_t now = corral_now_ms();

	(void)fd;
	(void)what;
	for (int i = 0; i < PACE_BOX_CALLS && b->pace_head; i++) {
		struct corral_call *c = b->pace_head;

		pace_unlink(c);
		/*
		 * Its first read is short as a rule: paced again, though it
		 * waited past PACE_WINDOW_MS for its turn (it is no quiet
		 * spell's end), else read twice a turn.
		 */
		c->t_short = now;
		streams_watch(c);
	}
	/* no timer: the rest read as before, unpaced, rather than never again */
	while (b->pace_head && !pace_arm(b)) {
		struct corral_call *c = b->pace_head;

		pace_unlink(c);
		streams_watch(c);
	}
}

void outpace_pause(struct corral_call *c)
{
	struct corral_box *b = c->b;

	if (c->paced)
		return;
	/* no timer: read as before, unpaced, rather than never again */
	if (!b->pace_head && !pace_arm(b))
		return;
	if (!b->pace_head)
		b->pace_tail = &b->pace_head;
	c->pace_next = NULL;
	c->pace_prev = b->pace_tail;
	*b->pace_tail = c;
	b->pace_tail = &c->pace_next;
	c->paced = true;
	streams_watch(c);
}

void outpace_end(struct corral_call *c)
{
	c->t_short = 0;
	if (!c->paced)
		return;
	pace_unlink(c);
	streams_watch(c);
}

/* c is done: out of the queue, its streams' events its caller's to free */
void outpace_drop(struct corral_call *c)
{
	if (c->paced)
		pace_unlink(c);
}
