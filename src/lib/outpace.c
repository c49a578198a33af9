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
 * - every paced call of the loop resumes on the same tick, as a rule (the
 *   timers' ends fall within a millisecond): one wake of the loop for all
 *   of them, whatever their number; each is then read once.
 *
 * A writer slower than a write every 10 ms is read at each write, as
 * before: what pacing bounds is the reads a call makes the loop do, about
 * 1000 / PACE_MS a second; not the calls a sandbox runs at once.
 */
#include "box.h"

#include <event2/event.h>

#define PACE_MS		5	/* a paced call waits for the next multiple of this */
#define PACE_WINDOW_MS	(2 * PACE_MS)	/* two short reads closer than this: paced */
#define PACE_SHORT	4096	/* a read of fewer bytes is short */

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

static void on_pace(evutil_socket_t fd, short what, void *arg)
{
	struct corral_call *c = arg;

	(void)fd;
	(void)what;
	c->paced = false;
	streams_watch(c);
}

void outpace_pause(struct corral_call *c)
{
	uint64_t now = corral_now_ms();
	struct timeval tv = tv_ms(PACE_MS - now % PACE_MS);

	if (c->paced)
		return;
	if (!c->ev_pace)
		c->ev_pace = evtimer_new(c->b->base, on_pace, c);
	/* no timer: read as before, unpaced, rather than never again */
	if (!c->ev_pace || evtimer_add(c->ev_pace, &tv) < 0)
		return;
	c->paced = true;
	streams_watch(c);
}

void outpace_end(struct corral_call *c)
{
	c->t_short = 0;
	if (!c->paced)
		return;
	evtimer_del(c->ev_pace);
	c->paced = false;
	streams_watch(c);
}
