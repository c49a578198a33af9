/*
 * call.c - one tool call in a box, from its start to its explained end.
 *
 * The supervisor makes a child cgroup for the call (made ahead: the
 * spare), and init a process for it (the spare's, forked ahead too).  The
 * process says "r" on its gate, and the kernel attaches its credentials,
 * so the supervisor learns its host pid and has it moved into the call's
 * cgroup (by the mover, cgroup_move.c: not on the loop) before sending it
 * the call itself on the gate: its argv, and its three stdio fds unless
 * it has a terminal.  Only then does it exec.  Everything the call
 * starts is born in that cgroup, which is how a background process found
 * probing ports an hour later is still charged to the call: its group
 * lingers after the call (attribution.c).
 */
#include "internal.h"
#include "tripwire.h"
#include "box.h"
#include "fdpass.h"
#include "events.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>

size_t box_calls_running(const struct corral_box *b)
{
	size_t n = 0;

	for (const struct corral_call *c = b->calls; c; c = c->next)
		n += !c->done;
	return n;
}

/* Those of them a spare waits for: a background process runs for hours. */
static size_t box_fg_calls_running(const struct corral_box *b)
{
	size_t n = 0;

	for (const struct corral_call *c = b->calls; c; c = c->next)
		n += !c->done && !c->o.background;
	return n;
}

/* ---- calls: ending ----------------------------------------------- */

/* how long into a call its successor's group waits (corral_box_exec) */
#define SPARE_GROUP_DELAY_MS	20
/* how long after a call's end its empty group waits for its removal */
#define SWEEP_DELAY_MS		5
/* how long after an answer the next call's process waits, calls spaced */
#define SPARE_AFTER_ANSWER_MS	2
/* calls closer than this are a caller's loop: its spare is made at once */
#define CALLS_QUICK_MS		20
/*
 * how often a next call's spare that waits (spare_waits) looks again: a
 * timer's wake of 1-2 us, 20 a second a box at most, and only for a second
 */
#define SPARE_WAIT_POLL_MS	50
/* and how long it waits at most, whatever the load */
#define SPARE_WAIT_MAX_MS	1000
/* what a call's own group says of it (call_finish); the rest is the box's */
#define CALL_COUNTERS	(CG_ST_CPU | CG_ST_MEM_PEAK | CG_ST_OOM | CG_ST_PIDS)
/* what a call reads of its box's group: its start, its end, the idle timer */
#define BOX_COUNTERS	(CG_ST_HITS | CG_ST_TCP | CG_ST_CPU | CG_ST_MEM_PEAK)
/* how long after its last call a box keeps those files open (call_counters_rest) */
#define BOX_COUNTERS_KEEP_MS	10000

/*
 * Work for a call yet to come (its group made, its process moved in,
 * empty groups removed) waits behind what is due now: the lowest
 * priority of the loop, if it has several (the daemon's has).
 */
static struct event *housekeeping(struct event *ev)
{
	if (ev)
		event_priority_set(ev, event_base_get_npriorities(
				   event_get_base(ev)) - 1);
	return ev;
}

/*
 * calls of this process's boxes asked for and not ended yet, background
 * processes aside: they run for hours, no burst (c->live)
 */
static size_t calls_live;

/*
 * When a call last started (ms), in which box (its id), and when one
 * last started in a box other than that one: so that any box can ask
 * when another's last began (others_started_ms).
 */
static uint64_t start_last_ms, start_other_ms;
static char start_last_box[CORRAL_SANDBOX_ID_MAX + 1];

static void note_call_start(const struct corral_box *b)
{
	if (strcmp(b->id, start_last_box)) {
		start_other_ms = start_last_ms;
		snprintf(start_last_box, sizeof(start_last_box), "%s", b->id);
	}
	start_last_ms = corral_now_ms();
}

/* When a box other than b last started a call (ms), or 0. */
static uint64_t others_started_ms(const struct corral_box *b)
{
	return strcmp(b->id, start_last_box) ? start_last_ms : start_other_ms;
}

/* Out of calls_live, once: ended, or freed. */
static void call_gone(struct corral_call *c)
{
	if (!c->live)
		return;
	c->live = false;
	calls_live--;
}

static void drop_pend(struct corral_call *c);
static void close_gate(struct corral_call *c);

/*
 * SO_PASSPIDFD and SCM_PIDFD (Linux 6.5), where the headers predate them:
 * asm-generic's values, which these architectures use.
 */
#if !defined(SO_PASSPIDFD) && (defined(__x86_64__) || defined(__i386__) || \
	defined(__aarch64__) || defined(__arm__) || defined(__riscv))
#define SO_PASSPIDFD	76
#define SCM_PIDFD	0x04
#endif
#ifndef SO_PASSPIDFD
#define SO_PASSPIDFD	-1	/* refused: setsockopt's EINVAL or ENOPROTOOPT */
#define SCM_PIDFD	-1
#endif
/* every gate has SO_PASSPIDFD: an "r" without SCM_PIDFD is a process gone */
static bool pidfd_passed;

#ifndef PIDFD_SIGNAL_PROCESS_GROUP
#define PIDFD_SIGNAL_PROCESS_GROUP	(1U << 2)	/* Linux 6.9 */
#endif
static void spare_fork(struct corral_box *b, bool group_next);
static void arm_spare(struct corral_box *b, unsigned delay_ms);
static void announce(struct corral_call *c);

static void call_describe(struct corral_call *c, const struct cg_stats *hits)
{
	struct corral_result *res = &c->res;

	if (c->halted) {
		res->status = CORRAL_HALTED;
		res->signal = SIGKILL;
		snprintf(res->reason, sizeof(res->reason), "halted: %.400s; the "
			 "sandbox accepts no more calls", c->b->halt_reason);
		goto limits;
	}
	if (c->timed_out && c->timeout_why[0]) {
		res->status = CORRAL_TIMEOUT;
		res->signal = SIGKILL;
		snprintf(res->reason, sizeof(res->reason), "killed: %s",
			 c->timeout_why);
		goto limits;
	}
	if (c->timed_out) {
		result_timeout(res, c->o.timeout_ms);
		if (c->default_timeout)
			snprintf(res->reason + strlen(res->reason), sizeof(res->reason) -
				 strlen(res->reason), " (the policy's limits.call_timeout, "
				 "the default for a call that gives no timeout_seconds)");
		goto limits;
	}
	/* its processes lost before it had the call, and nobody ended it */
	if (c->exited && !c->sent && c->lost && !c->sent_sig) {
		result_not_reached(res, c->status, c->lost);
		if (c->send_err)
			snprintf(res->reason + strlen(res->reason), sizeof(res->reason) -
				 strlen(res->reason), " (the daemon could not send it the "
				 "call: %s)", strerror(c->send_err));
		else if (c->move_why[0])
			snprintf(res->reason + strlen(res->reason), sizeof(res->reason) -
				 strlen(res->reason), " (the daemon killed it: it could not "
				 "be moved into the call's group: %s)", c->move_why);
		goto limits;
	}
	if (c->fail.stage == EXEC_STAGE_EXEC) {
		result_exec_failed(res, c->o.argv[0], c->fail.err);
		return;
	}
	if (c->fail.stage == EXEC_STAGE_TTY) {
		res->status = CORRAL_EXITED;
		res->exit_code = 126;
		snprintf(res->reason, sizeof(res->reason), "cannot make the "
			 "call's terminal (a pty of the sandbox's devpts): %s",
			 strerror(c->fail.err));
		return;
	}
	if (c->fail.stage) {
		res->status = CORRAL_EXITED;
		res->exit_code = 126;
		snprintf(res->reason, sizeof(res->reason), "%s: %s: %s",
			 c->fail.stage == EXEC_STAGE_CWD ? "cannot enter the "
			 "working directory" : "cannot apply the rlimits",
			 c->fail.stage == EXEC_STAGE_CWD ?
			 (c->o.cwd ? c->o.cwd : "/workspace") : c->o.argv[0],
			 strerror(c->fail.err));
		return;
	}
	/*
	 * The box died under its memory limit: its init is in no call's
	 * group, as small as the command's processes and of the same
	 * oom_score_adj, and the OOM killer took it (a command that fills
	 * its tmpfs has no RSS to be chosen by), and every process with it.
	 * "the sandbox died" alone read as corral's failure.
	 */
	if (!c->exited && !c->b->gone && hits->oom_kills) {
		char size[32], share[CG_SHARE_SAID];

		corral_format_size(c->b->p->memory_bytes, size, sizeof(size));
		res->status = CORRAL_OOM;
		res->signal = SIGKILL;
		snprintf(res->reason, sizeof(res->reason), "killed: memory limit %s "
			 "reached (%llu process%s killed by the OOM killer)%s, and the "
			 "sandbox died: the OOM killer took its init, as a rule, and "
			 "every process went with it", size,
			 (unsigned long long)hits->oom_kills,
			 hits->oom_kills == 1 ? "" : "es",
			 cg_memory_share_said(hits, share));
		return;
	}
	if (!c->exited || c->b->gone) {
		res->status = CORRAL_ERROR;
		snprintf(res->reason, sizeof(res->reason), "%s", c->b->gone ?
			 c->b->gone : "the sandbox died while the call ran");
		return;
	}
	/*
	 * The halt began while this call ran and its freeze is not done yet:
	 * the command ended first (a tripwire's opener gets EPERM and exits at
	 * once), but what the caller must learn is the halt.
	 */
	if (c->b->state == CORRAL_BOX_HALTED) {
		result_halted_after_end(res, c->status, c->b->halt_reason,
					"the sandbox accepts no more calls; ");
	} else {
		result_from_wait(res, c->status);
		/*
		 * "killed by signal 9" read the same whether the sandbox sent
		 * it to itself or the daemon did, at a client's word: the
		 * record must say which, and only ours can be said.
		 */
		if (res->status == CORRAL_SIGNALED && res->signal == c->sent_sig) {
			res->kill_said = true;
			snprintf(res->reason + strlen(res->reason), sizeof(res->reason) -
				 strlen(res->reason), "; corral sent it, at its client's "
				 "request (the process's DELETE or signal, or the client gone)");
		}
	}
limits:
	/* whatever ended it, each limit that bit is said (OOM, pids, CPU) */
	result_limits(res, c->b->p, hits);
}

static void call_stop_io(struct corral_call *c)
{
	cg_move_cancel(c->mv);
	c->mv = NULL;
	drop_event(&c->ev_gate);
	drop_event(&c->ev_start);
	drop_event(&c->ev_timeout);
	drop_event(&c->ev_drain);
	drop_event(&c->ev_stdin);
	drop_event(&c->out.ev);
	drop_event(&c->err.ev);
	outpace_drop(c);
	drop_event(&c->ev_pty_room);
	/* the terminal closes with the call: what it left gets a hang-up */
	close_fd(&c->pty);
	/* a process not sent its call yet reads EOF and exits */
	close_gate(c);
	close_fd(&c->pidfd);
	drop_pend(c);
	close_fd(&c->in_fd);
	close_fd(&c->out.fd);
	close_fd(&c->err.fd);
}

/* The sandbox's writable tmpfs (/tmp, home, the workspace's changes). */
static bool disk_full(struct corral_box *b)
{
	return !b->killed && mount_scratch_full(b->sb->scratchfd);
}

static uint64_t since(uint64_t now, uint64_t then)
{
	return now > then ? now - then : 0;
}

/*
 * The limits the call hit, read where the kernel counts them.  cgroup v2
 * counts an OOM kill in the victim's group and every group above it, and a
 * refused fork in the group whose pids.max said no (the box's) and above:
 * the box's counters since the call began.  cgroup v1 counts both only in
 * the group of the process (the victim, the forker): the call's own group,
 * fresh for it.  Either way the larger of the two is this call's.
 */
static void call_hits(const struct corral_call *c, const struct cg_stats *bst,
		      const struct cg_stats *cst, struct cg_stats *hits)
{
	const struct cg_stats *st0 = &c->st0;
	/* v2 counted the background's kills (background_hits) in the box's too */
	uint64_t oom = since(since(bst->oom_kills, st0->oom_kills), c->bg_oom);
	uint64_t pids = since(bst->pids_max_hits, st0->pids_max_hits);
	/* its group's own, since before a process in it had the call */
	uint64_t own_oom = since(cst->oom_kills, c->cg_oom0);
	uint64_t own_pids = since(cst->pids_max_hits, c->cg_pids0);

	*hits = (struct cg_stats){ .valid = bst->valid || cst->valid };
	if (!bst->valid)
		oom = pids = 0;
	hits->oom_kills = cst->valid && own_oom > oom ? own_oom : oom;
	hits->pids_max_hits = cst->valid && own_pids > pids ? own_pids : pids;
	hits->throttled = bst->valid ? since(bst->throttled, st0->throttled) : 0;
	/* the box's limit; its peak counts from the last call that met it */
	if (bst->valid) {
		hits->tcp_limit = bst->tcp_limit;
		hits->tcp_peak = bst->tcp_peak;
	}
}

/*
 * A finished call's background processes stay in its group, charged to
 * it (keep_lingering), and cgroup v1 counts an OOM kill in the victim's
 * group alone, a refused fork in the forker's: a later call whose memory
 * got one of them killed said nothing of it, and no event did.  Each
 * group a finished call left is read again on the box's tick, before the
 * sweep removes it, and when a call ends (LINGER_VISIT_MAX of them a
 * pass, in turn: lingering_batch); what it counted since it was
 * last read is a limit.hit naming its call ("background": true), and a
 * clause of the reason of each call that runs (and of ending, which is
 * done already): the box's limit bit while it ran.
 */
static void background_hits(struct corral_box *b, struct cg *cg,
			    const char *tool_call, uint64_t *seen_oom,
			    uint64_t *seen_pids, struct corral_call *ending)
{
	struct corral_result words = { 0 };
	struct cg_stats st;
	uint64_t oom, pids;

	if (!cg || cg_mode(cg) == CG_NONE ||
	    cg_stats_some(cg, CG_ST_OOM | CG_ST_PIDS, &st) < 0 || !st.valid)
		return;
	oom = since(st.oom_kills, *seen_oom);
	pids = since(st.pids_max_hits, *seen_pids);
	*seen_oom = st.oom_kills;
	*seen_pids = st.pids_max_hits;
	if (!oom && !pids)
		return;
	events_background_hits(b->ev, tool_call, oom, pids, b->p);
	result_background_hits(&words, b->p, tool_call, oom, pids);
	for (struct corral_call *c = b->calls; c; c = c->next) {
		size_t n = strlen(c->bg_said);

		if (c->done && c != ending)
			continue;
		/* v2 counts the kills in the box's group too (call_hits) */
		c->bg_oom += oom;
		snprintf(c->bg_said + n, sizeof(c->bg_said) - n, "%s", words.reason);
	}
}

/*
 * Whether a limit bit in the box since the last look, by the box's own
 * group.  On v2 it counts every OOM kill below it and every fork its
 * pids.max refused.  On v1 it counts neither (the victim's group, the
 * forker's: a call's), nor here its refused charges (its failcnt and
 * memsw.failcnt stayed 0 through a call's OOM kill on 6.18): its peak at
 * its limit says a charge met it (and maybe an OOM kill followed), and is
 * started again from now to say the next.  A fork refused on v1 shows
 * nowhere in the box's group.
 */
#define BOX_PEAK_SLACK	(1u << 20)	/* charges go in batches of 64 pages */

static bool box_bit(struct corral_box *b)
{
	uint64_t limit = b->p->memory_bytes, n;
	struct cg_stats st;
	bool bit = false;

	if (cg_stats_some(b->cg, CG_ST_OOM | CG_ST_PIDS | CG_ST_MEM_PEAK, &st) < 0 ||
	    !st.valid)
		return false;
	n = st.oom_kills + st.pids_max_hits;
	if (n != b->bit_seen) {
		b->bit_seen = n;
		bit = true;
	}
	if (cg_mode(b->cg) == CG_V1 && limit && st.mem_peak + BOX_PEAK_SLACK >= limit) {
		/* the meter's peak (meter.c) is the same file: keep what it said */
		if (st.mem_peak > b->mem_peak)
			b->mem_peak = st.mem_peak;
		cg_mem_rearm(b->cg);
		bit = true;
	}
	return bit;
}

/*
 * A pass reads LINGER_VISIT_MAX lingering groups (lingering_batch), so
 * with n of them a background process's OOM kill was said up to n / 32
 * passes late: in the reason of a later call, not of the one it came in.
 * Once the box says that its limit bit, every lingering group's counters
 * are read at once instead, at most twice in LINGER_ALL_MS: a sandbox can
 * keep its memory at its limit at will, and 1000 groups read every pass
 * held the loop 12-14 ms a second.  A tick takes one of the two at most:
 * the other is a call's end's, whose reason waits on it.  v2's box
 * counts the kill itself (box_bit), never early.
 */
static void read_all_lingering(struct corral_box *b, struct corral_call *ending,
			       uint64_t now)
{
	b->all_read_ms[0] = b->all_read_ms[1];
	b->all_read_ms[1] = now;
	for (struct lingerer *l = b->lingering; l; l = l->next)
		if (!l->rm)	/* its removal is under way off the loop */
			background_hits(b, l->cg, l->tool_call, &l->seen_oom,
					&l->seen_pids, ending);
}

/*
 * v1 with the box's OOM events (cg_oom_events_open): each one comes as
 * the OOM killer starts for the box's limit, whoever's charge met it, and
 * only then; other groups' kills on the host do not move it.  Its kill is
 * counted some milliseconds later (32 ms at most of 20 here, more while
 * other OOM kills on the host hold the killer's lock), so a tick reads
 * once the first event is OOM_SETTLE_MS old, and a call's end at once:
 * where its own charge called the OOM killer, the charge returned after
 * the kill.  Events too recent for the read stay owed, for a later one.
 * Without lingering groups nothing is owed: a kill then was a call's own.
 */
#define OOM_SETTLE_MS	500

static bool lingering_oomed(struct corral_box *b, struct corral_call *ending)
{
	uint64_t now = corral_now_ms(), n;
	uint64_t last = b->all_read_ms[ending ? 0 : 1];

	if (eventfd_read(b->oom_efd, &n) == 0) {
		if (!b->oom_first_ms)
			b->oom_first_ms = now;
		b->oom_last_ms = now;
	}
	if (!b->lingering)
		b->oom_first_ms = 0;
	if (!b->oom_first_ms || now - last < LINGER_ALL_MS ||
	    (!ending && now - b->oom_first_ms < OOM_SETTLE_MS))
		return false;
	b->oom_first_ms = now - b->oom_last_ms < OOM_SETTLE_MS ? b->oom_last_ms : 0;
	read_all_lingering(b, ending, now);
	return true;
}

/*
 * Without them (v2, or v1 where the events could not be had) the box's
 * own group says a limit bit (box_bit).  Twice, as the box's peak meets
 * its limit before the kill (the charge refused, the reclaim, then the
 * OOM killer): a tick between them read too early.  Under load the
 * reclaim took a second and more, ticks in it spent both reads before
 * the kill, and the call whose memory got a background process killed
 * said nothing of it: its end could read no more.  So on v1 a read waits
 * for the host's count of OOM kills to move (oom_kills_host; the peak
 * says only that one may come, and pending stays until it does); any
 * other group's kill on the host moves it too.  true: they were read.
 */
static bool lingering_bitten(struct corral_box *b, struct corral_call *ending)
{
	bool v1 = cg_mode(b->cg) == CG_V1;
	uint64_t now = corral_now_ms(), kills = 0;
	uint64_t last = b->all_read_ms[v1 && !ending ? 1 : 0];
	bool counted;

	if (cg_mode(b->cg) == CG_NONE)
		return false;
	if (b->oom_efd >= 0)
		return lingering_oomed(b, ending);
	if (!b->lingering)
		return false;
	b->bit_pending |= box_bit(b);
	if (!b->bit_pending || now - last < LINGER_ALL_MS)
		return false;
	counted = v1 && oom_kills_host(&kills) == 0;
	if (counted && kills == b->host_kills)
		return false;
	if (counted)
		b->host_kills = kills;
	b->bit_pending = false;
	read_all_lingering(b, ending, now);
	return true;
}

/*
 * background_hits of every finished call's group but ending's, and of
 * the next LINGER_VISIT_MAX groups left lingering (lingering_batch): the
 * rest are read by later calls' ends and ticks, or all of them at once
 * where the box's group says a limit bit (lingering_bitten).
 */
static void background_hits_all(struct corral_box *b, struct corral_call *ending)
{
	struct lingerer *batch[LINGER_VISIT_MAX];
	/* without cgroups nothing to read, and the list's order is its age */
	size_t n = cg_mode(b->cg) == CG_NONE || lingering_bitten(b, ending) ? 0 :
		   lingering_batch(b, batch, LINGER_VISIT_MAX);

	for (struct corral_call *c = b->calls; c; c = c->next)
		if (c != ending && c->done)
			background_hits(b, c->cg, c->tool_call, &c->seen_oom,
					&c->seen_pids, ending);
	for (size_t i = 0; i < n; i++)
		/* read by the sweep as it began its removal; refused, read again */
		if (!batch[i]->rm)
			background_hits(b, batch[i]->cg, batch[i]->tool_call,
					&batch[i]->seen_oom, &batch[i]->seen_pids,
					ending);
}

/*
 * The sandbox's record, when the audit log did not take all of it while
 * the call ran (a full disk: a sandbox with a writable bind on the state
 * directory's file system can fill it): said at the reason's end, and
 * whole there, a long reason cut before it.  Else a call whose denial was
 * lost read "exited with status 0" with a record that seemed whole.  at:
 * where the clause begins; said again, with the exec.end line counted,
 * when that one was lost as well.
 */
static void call_explain_lost(struct corral_call *c, size_t at)
{
	struct corral_result *res = &c->res;
	char said[256];
	uint64_t lost;
	int e, n;

	lost = since(events_lost_own(c->b->ev, &e), c->lost0);
	if (!lost || lost == res->events_lost)
		return;
	res->events_lost = lost;
	n = snprintf(said, sizeof(said), "; %llu event%s of this sandbox could "
		     "not be written to %.120s while the call ran: %s",
		     (unsigned long long)lost, lost == 1 ? "" : "s",
		     events_file(c->b->ev) ?: "the audit log", strerror(e ? e : EIO));
	if (n < 0)
		return;
	if (at + (size_t)n >= sizeof(res->reason))
		at = sizeof(res->reason) - (size_t)n - 1;
	snprintf(res->reason + at, sizeof(res->reason) - at, "%s", said);
}

void call_finish(struct corral_call *c)
{
	struct corral_box *b = c->b;
	struct cg_stats st = { 0 }, bst = { 0 }, hits;
	struct corral_result *res = &c->res;
	bool full;
	size_t at;

	if (c->done)
		return;
	c->done = true;
	/* nothing is signalled by it any more (corral_call_kill) */
	close_fd(&c->pidfd);
	call_gone(c);
	/* a decoy this call opened halts the box now, and the call with it */
	if (b->sb)
		tripwire_drain(b->sb->tripwire);
	call_stop_io(c);
	outkeep_end(&c->out.keep, &res->out);
	outkeep_end(&c->err.keep, &res->err);
	if (c->order)
		res->output_order = json_dumps(c->order, JSON_COMPACT);
	/* what the result reports: the box's hits since the start, the call's own */
	cg_stats_some(b->cg, CG_ST_HITS | CG_ST_TCP, &bst);
	/*
	 * Kept from this read on where on_start_due did not keep them (a
	 * call that ended first: a quick one, as a rule): the sweep reads
	 * its OOM and fork counters once more (background_hits), with a
	 * pread each then, not an open, a read and a close (issue 17).
	 */
	cg_keep_counters(c->cg, 0);
	if (cg_stats_some(c->cg, CALL_COUNTERS, &st) == 0 && st.valid) {
		res->cpu_ms = st.cpu_ns / 1000000;
		res->max_rss_kb = st.mem_peak / 1024;
	}
	/* what its group counts from now on is its background's */
	c->seen_oom = st.valid ? st.oom_kills : UINT64_MAX;
	c->seen_pids = st.valid ? st.pids_max_hits : UINT64_MAX;
	background_hits_all(b, c);
	call_hits(c, &bst, &st, &hits);
	if (cg_tcp_reached(&hits))
		cg_tcp_rearm(b->cg);
	if (hits.pids_max_hits)
		hits.pids_share = cg_pids_share_met(b->cg);
	if (hits.oom_kills)
		hits.mem_share = cg_memory_share_met(b->cg);
	call_describe(c, &hits);
	snprintf(res->reason + strlen(res->reason), sizeof(res->reason) -
		 strlen(res->reason), "%s", c->bg_said);
	if (cg_mode(c->cg) == CG_NONE)
		result_explain_rlimits(res, b->p);
	result_explain_open_files(res, b->p, b->sb ? b->sb->nofile : 0);
	result_explain_network(res, b->p);
	res->duration_ms = corral_now_ms() - c->t0;
	full = disk_full(b);
	events_limit_hits(b->ev, c->tool_call, &(struct cg_stats){ .valid = true },
			  &hits, b->p, full);
	if (full)
		events_explain_disk(res, b->p);
	if (c->denials) {
		events_explain_denials(res, c->denials, c->ndenied,
				       events_count_denied(b->ev), b->p);
		res->denials = json_dumps(c->denials, JSON_COMPACT | JSON_ENSURE_ASCII);
		res->denials_total = c->ndenied;
	}
	at = strlen(res->reason);
	corral_box_layers(b, &res->layers);
	snprintf(res->sandbox_id, sizeof(res->sandbox_id), "%s", b->id);
	snprintf(res->tool_call, sizeof(res->tool_call), "%s", c->tool_call);
	/*
	 * A call sent inline (its spare was ready) is announced by a zero
	 * timer, and libevent runs a dispatch's I/O before the timers that
	 * expire with it: a command that ran and ended before the loop came
	 * back would finish unannounced, and look as if it never started.
	 */
	if (!c->fail.stage) {
		c->in_exec = false;
		announce(c);
	}
	call_explain_lost(c, at);
	/*
	 * The reason is cut to its buffer, maybe inside a character of a
	 * command's name: as bytes, so that the event keeps its fields.
	 */
	events_emit(b->ev, "exec.end", json_pack("{s:s, s:s, s:i, s:i, s:i, s:o}",
		    "call", c->tool_call, "status", corral_status_name(res->status),
		    "exit_code", corral_result_exit_code(res), "signal", res->signal,
		    "sandbox_pid", (int)c->spid,
		    "reason", corral_json_bytes(res->reason, strlen(res->reason))));
	/* the exec.end line itself not written: the caller learns it still */
	call_explain_lost(c, at);
	/*
	 * The next call's process is asked for by a timer, after this answer
	 * is written.  Asked for before it, init's fork (a copy of its page
	 * tables), woken on the daemon's CPU, ran first and held the answer
	 * back by about its own length.  Asked for at once after it, the
	 * fork and the group's five mkdirs held back the caller instead:
	 * woken by our write on our CPU as a rule, it waited there to read
	 * the answer (0.25-0.45 ms on a 2-core host with other work,
	 * bench/exec_path.py's last stretch).  So a caller that spaces its
	 * calls (an agent: a model's turn between two) has its answer read
	 * first; one that calls in a loop has its next process made at once,
	 * or its next call would fork its own, the move's wait on its path.
	 * Armed before on_done, which frees the call: its group's removal
	 * (the sweep, later still) comes after the fork is asked for.
	 */
	b->t_ended = corral_now_ms();
	if (!box_calls_running(b))
		box_arm_idle(b);
	if (!box_fg_calls_running(b)) {
		b->spare_waited = 0;	/* its second, if it waits, from now */
		arm_spare(b, b->calls_quick ? 0 : SPARE_AFTER_ANSWER_MS);
	}
	if (c->o.on_done)
		c->o.on_done(c->o.arg, c, res);
}

static void maybe_finish(struct corral_call *c)
{
	if (c->exited && c->out.fd < 0 && c->err.fd < 0)
		call_finish(c);
}

static ssize_t stream_read(struct stream *s);

/*
 * What a pipe still holds when the drain time is up: written before the
 * command ended, not yet read by a loop that had other work (32 streamed
 * calls at once on a loaded host lost up to 64 KiB of stderr each, said
 * nowhere; of 1 MB in a pipe the command made 1 MiB long, a loop slowed
 * by strace kept 128-192 KiB).  Read to its end for now, but at most
 * BOX_DRAIN_MAX: a background child that goes on writing cannot hold the
 * call.  Stops when a slow reader holds the output.
 */
static void drain_stream(struct stream *s)
{
	size_t got = 0;
	ssize_t n;

	while (s->fd >= 0 && !s->c->held && got < BOX_DRAIN_MAX &&
	       (n = stream_read(s)) > 0)
		got += (size_t)n;
}

static void on_drain(evutil_socket_t fd, short what, void *arg)
{
	struct corral_call *c = arg;
	struct timeval tv = tv_ms(BOX_DRAIN_MS);

	(void)fd;
	(void)what;
	drain_stream(&c->out);
	drain_stream(&c->err);
	/* output held for a slow reader: what is left in the pipes waits too */
	if (c->held && evtimer_add(c->ev_drain, &tv) == 0)
		return;
	call_finish(c);
}

static void call_exited(struct corral_call *c, int status)
{
	struct timeval tv = tv_ms(BOX_DRAIN_MS);

	c->exited = true;
	c->status = status;
	drop_event(&c->ev_timeout);
	/* what its pipes hold, and their end, read now, not a pace later */
	outpace_end(c);
	/*
	 * Background children keep the pipes open: read what is there, but
	 * the call has ended when its first process has.
	 */
	c->ev_drain = evtimer_new(c->b->base, on_drain, c);
	if (!c->ev_drain || evtimer_add(c->ev_drain, &tv) < 0)
		call_finish(c);
	else
		maybe_finish(c);
}

/* ---- calls: output ----------------------------------------------- */

/* Order segments kept at most; past it the order is said to be cut. */
#define CALL_ORDER_MAX 10000

/* The read order of the streams: a new segment when the stream changes. */
static void note_order(struct corral_call *c, int no, size_t n)
{
	const char *name = no == 2 ? "stderr" : "stdout";
	size_t len = json_array_size(c->order);
	json_t *last = len ? json_array_get(c->order, len - 1) : NULL;

	if (last && json_is_array(last) &&
	    !strcmp(json_string_value(json_array_get(last, 0)), name)) {
		json_t *bytes = json_array_get(last, 1);

		json_integer_set(bytes, json_integer_value(bytes) + (json_int_t)n);
		return;
	}
	if (len == CALL_ORDER_MAX)
		json_array_append_new(c->order, json_string("..."));
	if (len >= CALL_ORDER_MAX)
		return;
	json_array_append_new(c->order, json_pack("[s, I]", name, (json_int_t)n));
}

/*
 * One read of s: what came is the call's output.  The bytes read, 0 when
 * the stream is done (its end, or a read error: closed), -1 when the pipe
 * is empty for now.
 */
static ssize_t stream_read(struct stream *s)
{
	struct corral_call *c = s->c;
	char buf[65536];
	ssize_t n = read(s->fd, buf, sizeof(buf));

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return -1;
	if (n <= 0) {
		drop_event(&s->ev);
		close_fd(&s->fd);
		return 0;
	}
	/*
	 * Output read in the dispatch whose zero timer would announce the
	 * call (I/O runs before a dispatch's timers): the announcement first,
	 * so that a stream's "start" comes before its first output.  This
	 * runs from the loop, never inside corral_box_exec: the caller has
	 * its handle.
	 */
	c->in_exec = false;
	announce(c);
	outkeep_add(&s->keep, s->out, buf, n);
	if (c->order)
		note_order(c, s->no, n);
	if (c->o.on_output)
		c->o.on_output(c->o.arg, c, s->no, buf, n);
	return n;
}

static void on_stream(evutil_socket_t fd, short what, void *arg)
{
	struct stream *s = arg;
	struct corral_call *c = s->c;
	ssize_t n;

	(void)fd;
	(void)what;
	n = stream_read(s);
	if (n == 0)
		maybe_finish(c);
	/* a writer of a few bytes a write is read a pace at a time (outpace.c) */
	else if (n > 0 && !c->held && outpace_due(c, (size_t)n))
		outpace_pause(c);
}

void corral_call_hold_output(struct corral_call *c, bool hold)
{
	if (c->done)
		return;
	c->held = hold;
	/* a paced call's streams come back at its pace's end */
	outpace_watch(c);
}

static void on_stdin(evutil_socket_t fd, short what, void *arg)
{
	struct corral_call *c = arg;
	ssize_t n;

	(void)what;
	n = write(fd, c->in_data + c->in_off, c->in_len - c->in_off);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n > 0)
		c->in_off += n;
	if (n < 0 || c->in_off == c->in_len) {	/* EPIPE: it stopped reading */
		drop_event(&c->ev_stdin);
		/* an open stdin waits for more (corral_call_write_stdin) */
		if (n < 0 || !c->o.stdin_open || c->in_eof)
			close_fd(&c->in_fd);
	}
}

int corral_call_write_stdin(struct corral_call *c, const void *data, size_t len,
			    bool eof, struct corral_err *err)
{
	size_t unsent = c->in_len - c->in_off;
	char *g;

	if (c->done || c->in_fd < 0 || c->in_eof)
		return corral_set_err(err, -EPIPE, "the call's stdin is closed "
				      "(it has ended, closed it, or was started "
				      "without an open stdin)");
	if (unsent + len > CALL_STDIN_MAX)
		return corral_set_err(err, -EAGAIN, "the call has not read the %zu "
				      "bytes of stdin it was given yet (at most "
				      "%d wait)", unsent, CALL_STDIN_MAX);
	/* what was written goes: the buffer holds only what waits (none
	 * yet: no buffer, and a bare eof brings no data) */
	if (unsent && c->in_off)
		memmove(c->in_data, c->in_data + c->in_off, unsent);
	g = realloc(c->in_data, unsent + len + 1);
	if (!g)
		return corral_set_err(err, -ENOMEM, "out of memory for %zu bytes "
				      "of stdin", len);
	if (len)
		memcpy(g + unsent, data, len);
	c->in_data = g;
	c->in_off = 0;
	c->in_len = unsent + len;
	c->in_eof = eof;
	if (c->in_len == 0) {
		if (eof)
			close_fd(&c->in_fd);
		return 0;
	}
	if (!c->ev_stdin) {
		c->ev_stdin = event_new(c->b->base, c->in_fd, EV_WRITE | EV_PERSIST,
					on_stdin, c);
		if (!c->ev_stdin || event_add(c->ev_stdin, NULL) < 0) {
			drop_event(&c->ev_stdin);
			return corral_set_err(err, -ENOMEM, "cannot watch the "
					      "call's stdin");
		}
	}
	return 0;
}

/* ---- calls: starting --------------------------------------------- */

/* The record says which bound ended the call, and that it is killed. */
static void time_out(struct corral_call *c, uint64_t limit_ms, const char *why)
{
	char reason[sizeof(c->timeout_why) + 64];

	c->timed_out = true;
	snprintf(reason, sizeof(reason), "%s: it and everything it started "
		 "are killed", why);
	events_emit(c->b->ev, "timeout", json_pack("{s:s, s:I, s:s}", "call",
		    c->tool_call, "limit_ms", (json_int_t)limit_ms, "reason", reason));
	corral_call_kill(c, SIGKILL);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct corral_call *c = arg;

	(void)fd;
	(void)what;
	time_out(c, c->o.timeout_ms, "the call's wall-clock timeout was reached");
}

int corral_call_time_out(struct corral_call *c, uint64_t limit_ms, const char *why)
{
	if (c->done || c->timed_out)
		return 0;
	snprintf(c->timeout_why, sizeof(c->timeout_why), "%s", why);
	/* the wall clock can no longer be what ended it */
	drop_event(&c->ev_timeout);
	time_out(c, limit_ms, c->timeout_why);
	return 0;
}

int corral_call_cpu_ns(struct corral_call *c, uint64_t *ns)
{
	*ns = 0;
	if (c->done || !c->host_pid)
		return -ESRCH;
	return cg_cpu_ns(c->cg, c->host_pid, ns);
}

bool corral_call_paused(const struct corral_call *c)
{
	return !c->done && c->b->state == CORRAL_BOX_PAUSED;
}

/* exec.start once the call is sent and both pids are known (by two ways). */
static void announce(struct corral_call *c)
{
	char group[32];

	if (c->announced || !c->sent || !c->spid || !c->host_pid || c->in_exec)
		return;
	c->announced = true;
	/*
	 * Its group named for the attributor: the process is in it (moved
	 * before the call was sent), and otherwise the attributor reads
	 * /proc/PID/cgroup to learn that, while the process just woken
	 * waits for our CPU as a rule.
	 */
	snprintf(group, sizeof(group), "corral-c%u", c->id);
	events_emit(c->b->ev, "exec.start", json_pack("{s:s, s:i, s:i, s:o, s:s}",
		    "call", c->tool_call, "pid", (int)c->host_pid,
		    "sandbox_pid", (int)c->spid,
		    "command", corral_json_bytes(c->o.argv[0], strlen(c->o.argv[0])),
		    EVENTS_KEY_GROUP, group));
	if (c->o.on_start)
		c->o.on_start(c->o.arg, c);
}

static void on_start_due(evutil_socket_t fd, short what, void *arg)
{
	struct corral_call *c = arg;

	(void)fd;
	(void)what;
	c->in_exec = false;
	announce(c);
	/*
	 * The counters call_finish reads, opened now, while the command
	 * starts, rather than in line between its exit and the answer.  A
	 * foreground call only: a background one may run for hours, and the
	 * fds go with its group or when it lingers (keep_lingering).
	 */
	if (!c->done && c->cg && !c->o.background)
		cg_keep_counters(c->cg, CALL_COUNTERS);
}

/*
 * A pidfd of the process that said "r" on gate as pid, or -1 (errno set;
 * ESRCH: it has died).  The pid came with the "r", and the process may
 * have died since, reaped by init, its pid anyone's: a sandbox that forks
 * fast wraps pid_max (32768) in seconds, and the daemon, often root,
 * signalled that pid (SIGCONT as the call is sent, SIGKILL where it could
 * not be).  The kernel's own pidfd of the sender came with the "r" where
 * it makes one (SO_PASSPIDFD, 6.5): the process's, dead or alive; -2,
 * it had died; -3, none could be made (our fds: EMFILE).  Else one
 * opened by pid: the gate's other end is the process's alone, closed at
 * its exit before its pid is free, so no hang-up on it after the open
 * means the pidfd is that process's.
 */
int call_gate_pidfd(int gate, pid_t pid, int passed)
{
	struct pollfd p = { .fd = gate, .events = POLLRDHUP };
	int fd;

	if (passed >= 0)
		return passed;
	if (passed == -3) {
		errno = EMFILE;	/* alive, or may be: the caller drops it */
		return -1;
	}
	if (passed == -2 || pidfd_passed) {
		errno = ESRCH;
		return -1;
	}
	fd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (fd < 0)
		return -1;
	if (poll(&p, 1, 0) < 0 || (p.revents & (POLLHUP | POLLRDHUP | POLLERR))) {
		close(fd);
		errno = ESRCH;
		return -1;
	}
	return fd;
}

/*
 * SO_PASSPIDFD on a gate (6.5): each message then comes with the kernel's
 * pidfd of its sender (call_gate_pidfd).  Asked of the first gate; where it
 * is refused, call_gate_pidfd opens one by pid, with its check (which a test
 * has by CORRAL_TEST_NO_PASSPIDFD on a newer kernel).
 */
static void pass_pidfd(int gate)
{
	static int known;	/* 0 not asked, 1 yes, -1 no */
	int one = 1;

	if (!known && getenv("CORRAL_TEST_NO_PASSPIDFD"))
		known = -1;
	if (known >= 0)
		known = setsockopt(gate, SOL_SOCKET, SO_PASSPIDFD, &one,
				   sizeof(one)) == 0 ? 1 : -1;
	pidfd_passed = known > 0;
}

/* A signal to the call's process, by its pidfd: never by a pid it left. */
static void call_signal(struct corral_call *c, int sig)
{
	if (c->pidfd >= 0)
		(void)syscall(SYS_pidfd_send_signal, c->pidfd, sig, NULL, 0);
}

/* Its process has the gate until it execs or dies (the pidfd stays: call_group_signal). */
static void close_gate(struct corral_call *c)
{
	close_fd(&c->gate);
}

static void drop_pend(struct corral_call *c)
{
	for (int i = 0; i < 3; i++)
		close_fd(&c->pend_fds[i]);
	free(c->pend);
	c->pend = NULL;
}

/*
 * The call to its process, which is in the call's cgroup by now.  Not
 * sent, the call is kept: for a process forked anew when that one died
 * (call_lost), or dropped with the call.
 */
static int send_call(struct corral_call *c)
{
	struct exec_msg *m = c->pend;
	ssize_t n;

	if (c->gate < 0)
		return -EPIPE;	/* EOF on it before the call: it died */
	/*
	 * A process of the sandbox (its uid, its Landlock domain) may have
	 * stopped this one while it waited, a spare for a model's turn: it
	 * took the call and never ran it, exec.start saying it started, until
	 * the call's timeout.  SIGCONT also cancels a stop still pending; to a
	 * process not stopped it is nothing (SIG_DFL: discarded).  Fails only
	 * where it died: init's news of that comes.  By its pidfd: its pid,
	 * once it died, may be any host process's (call_gate_pidfd).
	 */
	call_signal(c, SIGCONT);
	n = fd_send(c->gate, m, offsetof(struct exec_msg, data) + m->len,
		    c->pend_fds, c->o.tty ? 0 : 3, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n < 0)
		return (int)n;
	drop_pend(c);
	c->sent = true;
	announce(c);
	return 0;
}

/* send_call's answer when the process had died: init's news of it will come */
static bool process_gone(int r)
{
	return r == -EPIPE || r == -ECONNRESET || r == -ENOTCONN;
}

/* The call's process is in the call's cgroup (r 0), or was killed. */
static void call_moved(void *arg, int r, const char *msg)
{
	struct corral_call *c = arg;

	c->mv = NULL;
	/* it ended before its move: init's news of it forks another (call_lost) */
	if (r == -ESRCH)
		return;
	if (r < 0) {
		/* unattributed is not acceptable: killed (move_end), and said */
		snprintf(c->move_why, sizeof(c->move_why), "%s", msg ? msg : "?");
		events_emit(c->b->ev, "exec.error", json_pack("{s:s, s:s}", "call",
			    c->tool_call, "reason", msg));
		return;
	}
	if (c->timed_out) {
		/* EOF before the call: it exits having run nothing */
		drop_event(&c->ev_gate);
		close_gate(c);
		return;
	}
	r = send_call(c);
	if (r < 0 && !process_gone(r)) {
		/* it waits for a call that cannot reach it: said, then killed */
		c->send_err = -r;
		events_emit(c->b->ev, "exec.error", json_pack("{s:s, s:s+}", "call",
			    c->tool_call, "reason", "cannot send the call to its "
			    "process: ", strerror(-r)));
		call_signal(c, SIGKILL);
	}
}

/* "r" with credentials: move the pid into the call's cgroup, then send the call. */
static void gate_ready(struct corral_call *c, pid_t pid, int pidfd)
{
	struct corral_err err;
	int r;

	c->host_pid = pid;
	c->pidfd = call_gate_pidfd(c->gate, pid, pidfd);
	/*
	 * Dead already: init's news of it comes (call_lost).  No pidfd to
	 * be had (EMFILE): EOF, and it exits having run nothing.
	 */
	if (c->pidfd < 0) {
		if (errno != ESRCH) {
			drop_event(&c->ev_gate);
			close_gate(c);
		}
		return;
	}
	if (c->timed_out) {
		call_moved(c, 0, NULL);
		return;
	}
	r = cg_move_start(c->b->base, c->cg, pid, c->pidfd, call_moved, c,
			  &c->mv, &err);
	if (r <= 0)
		call_moved(c, r, err.msg);
}

static void on_pty_room(evutil_socket_t fd, short what, void *arg)
{
	struct corral_call *c = arg;

	(void)fd;
	(void)what;
	c->room_wanted = false;
	if (c->o.on_tty_room && !c->done)
		c->o.on_tty_room(c->o.arg, c);
}

/*
 * The pty's master came with "p": the call's output is read from it as
 * stream 1 (EIO once the last slave closes ends it, as EOF ends a pipe),
 * its stdin given whole is written to it, and input waits for it.
 */
static int tty_attach(struct corral_call *c)
{
	struct event_base *base = c->b->base;
	struct winsize ws = { .ws_row = c->o.rows, .ws_col = c->o.cols };

	if (c->pty < 0 || c->hungup || fcntl(c->pty, F_SETFL, O_RDWR | O_NONBLOCK) < 0)
		return -1;
	c->out.fd = fcntl(c->pty, F_DUPFD_CLOEXEC, 3);
	if (c->out.fd < 0)
		return -1;
	c->out.ev = event_new(base, c->out.fd, EV_READ | EV_PERSIST, on_stream, &c->out);
	if (!c->out.ev || (!c->held && event_add(c->out.ev, NULL) < 0))
		return -1;
	if (c->in_len) {
		c->in_fd = fcntl(c->pty, F_DUPFD_CLOEXEC, 3);
		c->ev_stdin = c->in_fd < 0 ? NULL :
			      event_new(base, c->in_fd, EV_WRITE | EV_PERSIST, on_stdin, c);
		if (!c->ev_stdin || event_add(c->ev_stdin, NULL) < 0)
			return -1;
	}
	if (c->resize_pending && ws.ws_row)
		ioctl(c->pty, TIOCSWINSZ, &ws);
	c->resize_pending = false;
	c->ev_pty_room = event_new(base, c->pty, EV_WRITE, on_pty_room, c);
	if (!c->ev_pty_room)
		return -1;
	/* a caller that wrote before the pty was there hears it is */
	if (c->room_wanted)
		event_active(c->ev_pty_room, EV_WRITE, 0);
	return 0;
}

/*
 * An fd that came on the gate: kept only as the pty's master of a tty
 * call, once.  True when kept.
 */
static bool gate_fd(struct corral_call *c, int fd)
{
	struct stat st;
	unsigned int ptn;

	/* TIOCGPTN answers only on a master */
	if (!c->o.tty || !c->sent || c->pty >= 0 || fstat(fd, &st) < 0 ||
	    !S_ISCHR(st.st_mode) || ioctl(fd, TIOCGPTN, &ptn) < 0) {
		close(fd);
		return false;
	}
	c->pty = fd;
	return true;
}

/*
 * What the kernel's SCM_PIDFD of -errno says: -2, the sender had died
 * (ESRCH; EINVAL on older kernels: its pid had no process left); -3, none
 * to be had for one that may live (EMFILE, ENFILE, ENOMEM: our fds or
 * memory).  Taken for a death, a spare with no pidfd and no move was
 * kept, and the call that took it was sent at once, to a process outside
 * the call's cgroup, which the timeout's kill of that group missed.
 */
static int pidfd_none(int kernel_err)
{
	return kernel_err == -EINVAL || kernel_err == -ESRCH ? -2 : -3;
}

/*
 * One message of a gate: "r" and the sender's credentials, "p" and one
 * fd, struct exec_fail, or EOF (0).  *pid: the credentials' pid or 0;
 * *fd: the fd that came with "p", or -1 (any other is closed); *pidfd:
 * the sender's pidfd that came with "r" (SCM_PIDFD), or -1, or where the
 * kernel could not make one, -2 (it had died) or -3 (pidfd_none).
 */
ssize_t call_gate_recv(int gate, struct exec_fail *f, pid_t *pid, int *fd,
		       int *pidfd)
{
	char cbuf[CMSG_SPACE(sizeof(struct ucred)) + 2 * CMSG_SPACE(sizeof(int))];
	struct iovec iov = { f, sizeof(*f) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm;
	ssize_t n;

	*pid = 0;
	*fd = *pidfd = -1;
	n = recvmsg(gate, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return -errno;
	for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		size_t nfd = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		struct ucred uc;
		int one;

		if (cm->cmsg_level != SOL_SOCKET)
			continue;
		if (cm->cmsg_type == SCM_CREDENTIALS) {
			memcpy(&uc, CMSG_DATA(cm), sizeof(uc));
			*pid = uc.pid;
		} else if (cm->cmsg_type == SCM_PIDFD && nfd == 1) {
			memcpy(&one, CMSG_DATA(cm), sizeof(int));
			if (n == 1 && *(char *)f == 'r' && *pidfd == -1)
				*pidfd = one >= 0 ? one : pidfd_none(one);
			else if (one >= 0)
				close(one);
		} else if (cm->cmsg_type == SCM_RIGHTS) {
			/* every fd that came is ours now: one kept, the rest closed */
			for (size_t i = 0; i < nfd; i++) {
				memcpy(&one, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
				if (n == 1 && *(char *)f == 'p' && *fd < 0)
					*fd = one;
				else
					close(one);
			}
		}
	}
	return n;
}

static void on_gate(evutil_socket_t fd, short what, void *arg)
{
	struct corral_call *c = arg;
	struct exec_fail f;
	pid_t pid;
	ssize_t n;
	int pty, pidfd;

	(void)what;
	n = call_gate_recv(fd, &f, &pid, &pty, &pidfd);
	if (n == -EINTR || n == -EAGAIN)
		return;
	if (n == 1 && *(char *)&f == 'r') {
		if (pid > 0 && !c->host_pid)
			gate_ready(c, pid, pidfd);
		else if (pidfd >= 0)
			close(pidfd);
		return;
	}
	if (n == 1 && *(char *)&f == 'p') {
		if (pty >= 0 && gate_fd(c, pty) && tty_attach(c) < 0)
			call_signal(c, SIGKILL);
		return;
	}
	if (n == sizeof(f))
		c->fail = f;
	/* EOF: exec'd (the gate is close-on-exec), or died */
	drop_event(&c->ev_gate);
	close_gate(c);
}

/* into m's data, cap bytes long */
static int pack_strings(struct exec_msg *m, size_t cap, char *const *v,
			uint32_t *count)
{
	for (size_t i = 0; v && v[i]; i++) {
		size_t len = strlen(v[i]) + 1;

		if (m->len + len > cap)
			return -E2BIG;
		memcpy(m->data + m->len, v[i], len);
		m->len += len;
		(*count)++;
	}
	return 0;
}

/* The policy's environment, then the call's NAME=VALUE over it. */
static char **call_env(const struct corral_box *b, char *const *extra)
{
	char **envp = NULL;
	size_t n = 0;

	char *const *base = b->sb->envp;

	for (size_t i = 0; base[i]; i++) {
		char *eq = strchr(base[i], '=');
		char name[256];

		snprintf(name, sizeof(name), "%.*s", (int)(eq - base[i]), base[i]);
		if (sandbox_env_add(&envp, &n, name, eq + 1) < 0)
			goto fail;
	}
	for (size_t i = 0; extra && extra[i]; i++) {
		const char *eq = strchr(extra[i], '=');
		char name[256];

		if (!eq || eq == extra[i] || eq - extra[i] >= (ptrdiff_t)sizeof(name))
			continue;
		snprintf(name, sizeof(name), "%.*s", (int)(eq - extra[i]), extra[i]);
		if (sandbox_env_add(&envp, &n, name, eq + 1) < 0)
			goto fail;
	}
	return envp;
fail:
	sandbox_env_free(envp);
	return NULL;
}

static size_t strings_len(char *const *v)
{
	size_t n = 0;

	for (size_t i = 0; v && v[i]; i++)
		n += strlen(v[i]) + 1;
	return n;
}

/*
 * The call's message, kept in c->pend until its process may have it.
 * Its block is as long as what it carries: a whole struct exec_msg (60
 * KiB) was cleared by calloc and again at its free (zerofree.c), 23-28 us
 * a call on a 2-core PVM guest, after its process was woken.
 */
static int build_exec(struct corral_box *b, struct corral_call *c,
		      struct corral_err *err)
{
	char **envp = call_env(b, c->o.env);
	const char *cwd = c->o.cwd ? c->o.cwd : "/workspace";
	struct exec_msg *m = NULL;
	size_t need;
	int r = 0;

	if (!envp) {
		r = corral_set_err(err, -ENOMEM, "out of memory for the call's "
				   "environment");
		goto out;
	}
	need = strings_len(c->o.argv) + strings_len(envp) + strlen(cwd) + 1;
	if (need > EXEC_DATA_MAX) {
		r = corral_set_err(err, -E2BIG, "argv, env and cwd together are "
				   "over %d KiB", EXEC_DATA_MAX / 1024);
		goto out;
	}
	m = calloc(1, offsetof(struct exec_msg, data) + need);
	if (!m) {
		r = corral_set_err(err, -ENOMEM, "out of memory for the call's "
				   "argv and environment");
		goto out;
	}
	m->kind = EXEC_MSG_KIND;
	m->id = c->id;
	if (c->o.sh_fast)
		m->flags |= EXEC_SH_FAST;
	if (c->o.tty) {
		m->flags |= EXEC_TTY;
		m->rows = c->o.rows;
		m->cols = c->o.cols;
	}
	if (pack_strings(m, need, c->o.argv, &m->nargv) < 0 ||
	    pack_strings(m, need, envp, &m->nenv) < 0 ||
	    m->len + strlen(cwd) + 1 > need) {
		r = corral_set_err(err, -E2BIG, "argv, env and cwd together are "
				   "over %d KiB", EXEC_DATA_MAX / 1024);
		goto out;
	}
	memcpy(m->data + m->len, cwd, strlen(cwd) + 1);
	m->len += strlen(cwd) + 1;
	c->pend = m;
	m = NULL;
out:
	free(m);
	sandbox_env_free(envp);
	return r;
}

/*
 * Ask init for a process (MSG_FORK) with a new gate: *gate is our end.
 * *fid: the fork's id, which init's news of it carries.
 */
static int ask_fork(struct corral_box *b, uint32_t *fid, int *gate,
		    struct corral_err *err)
{
	struct fork_msg m = { .kind = MSG_FORK };
	int g[2], one = 1;
	ssize_t n;

	if (!b->sb || b->sb->ctl < 0)
		return corral_set_err(err, -EPIPE, "the sandbox's init is gone");
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, g) < 0)
		return corral_set_errno(err, errno, "socketpair for a call's gate");
	/* before it can send: its "r" must carry its credentials */
	if (setsockopt(g[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) < 0) {
		n = -errno;
		close(g[0]);
		close(g[1]);
		return corral_set_errno(err, (int)-n, "SO_PASSCRED on a call's gate");
	}
	pass_pidfd(g[0]);
	if (++b->next_fid == 0)
		b->next_fid = 1;
	m.id = b->next_fid;
	n = fd_send(b->sb->ctl, &m, sizeof(m), &g[1], 1, MSG_DONTWAIT | MSG_NOSIGNAL);
	close(g[1]);
	if (n < 0) {
		close(g[0]);
		return corral_set_errno(err, (int)-n, "cannot reach the sandbox's init");
	}
	*fid = m.id;
	*gate = g[0];
	return 0;
}

/* forked anew, at most, for a call whose process died before it had the call */
#define CALL_LOST_MAX	1

/*
 * A process forked for a call died before a call reached it: the spare
 * as the box idled (spare_msg), or the call's own before the call was
 * sent (call_lost); c NULL for the spare.  Its group's counts now (cg,
 * NULL if it was in none yet) are where the call's verdict counts from
 * (*oom0, *pids0): it was alone in the group, and a kill counted there
 * since was its own, the OOM killer's when it died of SIGKILL.  An
 * exec.lost event says it, and a limit.hit of the box's (no call's) the
 * OOM kill.  True when it was one.
 */
static bool lost_process(struct corral_box *b, struct cg *cg, const struct corral_call *c,
			 pid_t spid, int status, uint64_t *oom0, uint64_t *pids0)
{
	struct cg_stats st = { 0 };
	char size[32], how[96], whose[160], group[32], why[CORRAL_ERR_MAX];
	bool oom = false, again = c && c->lost < CALL_LOST_MAX;
	json_t *o;

	if (cg && cg_mode(cg) != CG_NONE &&
	    cg_stats_some(cg, CG_ST_OOM | CG_ST_PIDS, &st) == 0 && st.valid) {
		oom = st.oom_kills > *oom0 && WIFSIGNALED(status) &&
		      WTERMSIG(status) == SIGKILL;
		*oom0 = st.oom_kills;
		*pids0 = st.pids_max_hits;
	}
	corral_format_size(b->p->memory_bytes, size, sizeof(size));
	if (oom)
		snprintf(how, sizeof(how), "was killed by the OOM killer (memory "
			 "limit %s reached)", size);
	else if (WIFSIGNALED(status))
		snprintf(how, sizeof(how), "was killed by signal %d (SIG%s)",
			 WTERMSIG(status), sigabbrev_np(WTERMSIG(status)) ?: "?");
	else
		snprintf(how, sizeof(how), "exited with status %d", WEXITSTATUS(status));
	if (c)
		snprintf(whose, sizeof(whose), "the process forked for call %.128s",
			 c->tool_call);
	else
		snprintf(whose, sizeof(whose), "the process forked ahead for the next call");
	snprintf(why, sizeof(why), "%s %s before %s reached it; %s", whose, how,
		 c ? "the call" : "any call", !c ? "the next call runs in a new one" :
		 again ? "the call runs in a new one" : "the call is not run");
	/*
	 * No "pid": the host pid of a process init has reaped may be any
	 * process's by now, and the attributor would read its cgroup.  The
	 * call's is named by its group, as exec.start's.
	 */
	o = json_pack("{s:s}", "reason", why);
	if (o && c) {
		snprintf(group, sizeof(group), "corral-c%u", c->id);
		json_object_set_new(o, EVENTS_KEY_GROUP, json_string(group));
	}
	if (o && spid > 0)
		json_object_set_new(o, "sandbox_pid", json_integer(spid));
	if (o && WIFSIGNALED(status))
		json_object_set_new(o, "signal", json_integer(WTERMSIG(status)));
	else if (o)
		json_object_set_new(o, "exit_code", json_integer(WEXITSTATUS(status)));
	events_emit(b->ev, "exec.lost", o);
	if (oom) {
		snprintf(why, sizeof(why), "memory limit %s reached: %s killed by "
			 "the OOM killer", size, whose);
		events_emit(b->ev, "limit.hit", json_pack("{s:s, s:I, s:s}", "limit",
			    "memory", "value", (json_int_t)b->p->memory_bytes,
			    "reason", why));
	}
	return oom;
}

/*
 * The call's process died before the call was sent to it (the spare,
 * killed as the box idled, whose news came after the call took it; a
 * process of the sandbox that kills it): the call did not run, and its
 * end is not the call's.  Said (lost_process), and in the call's reason
 * when the OOM killer took it; the call is sent to a process forked anew,
 * once, else ends unstarted (result_not_reached).
 */
static void call_lost(struct corral_call *c, int status)
{
	struct corral_box *b = c->b;
	uint64_t before = c->cg_oom0;
	struct corral_err err;
	char size[32];
	size_t n;

	if (lost_process(b, c->cg, c, c->spid, status, &c->cg_oom0, &c->cg_pids0)) {
		/* v2 counted it in the box's too (call_hits) */
		c->bg_oom += c->cg_oom0 - before;
		corral_format_size(b->p->memory_bytes, size, sizeof(size));
		n = strlen(c->bg_said);
		snprintf(c->bg_said + n, sizeof(c->bg_said) - n, "; memory limit %s "
			 "reached too: the process forked for this call was killed "
			 "by the OOM killer before the call reached it", size);
	}
	cg_move_cancel(c->mv);
	c->mv = NULL;
	drop_event(&c->ev_gate);
	close_gate(c);
	close_fd(&c->pidfd);
	c->host_pid = c->spid = 0;
	c->started = false;
	if (c->lost++ < CALL_LOST_MAX && ask_fork(b, &c->fid, &c->gate, &err) == 0) {
		c->ev_gate = event_new(b->base, c->gate, EV_READ | EV_PERSIST, on_gate, c);
		if (c->ev_gate && event_add(c->ev_gate, NULL) == 0)
			return;
		drop_event(&c->ev_gate);
		close_gate(c);
	}
	call_exited(c, status);
}

void call_drop_spare(struct corral_box *b)
{
	drop_event(&b->sp.ev);
	cg_move_cancel(b->sp.mv);
	if (b->sp.fid) {
		close_fd(&b->sp.gate);	/* EOF: it exits, having run nothing */
		close_fd(&b->sp.pidfd);
	}
	b->sp = (struct spare_proc){ .gate = -1, .pidfd = -1 };
}

static void spare_moved(void *arg, int r, const char *msg)
{
	struct corral_box *b = arg;
	json_t *o;

	b->sp.mv = NULL;
	/* it ended before its move: init's news of it (spare_msg) says how */
	if (r >= 0 || r == -ESRCH)
		return;
	/*
	 * Killed (move_end), and dropped before init's news of its end,
	 * which would name no one: the kill is the daemon's, said here.
	 */
	o = json_pack("{s:s++, s:i}", "reason", "the daemon killed the process "
		      "forked ahead for the next call, as it could not be moved "
		      "into its group (", msg ? msg : "?", "); the next call runs "
		      "in a new one", "signal", SIGKILL);
	if (o && b->sp.spid > 0)
		json_object_set_new(o, "sandbox_pid", json_integer(b->sp.spid));
	events_emit(b->ev, "exec.lost", o);
	call_drop_spare(b);
}

/* The spare's "r": into the spare group now, while nobody waits for it. */
static void on_spare_gate(evutil_socket_t fd, short what, void *arg)
{
	struct corral_box *b = arg;
	struct spare_proc *sp = &b->sp;
	struct corral_err err;
	struct exec_fail f;
	pid_t pid;
	ssize_t n;
	int pty, pidfd, r;

	(void)what;
	n = call_gate_recv(fd, &f, &pid, &pty, &pidfd);
	if (n == -EINTR || n == -EAGAIN)
		return;
	if (pty >= 0)
		close(pty);
	if (n == 1 && *(char *)&f == 'r' && pid > 0 && !sp->host_pid) {
		sp->host_pid = pid;
		/* dead already: init's news of it (spare_msg); else no pidfd */
		sp->pidfd = call_gate_pidfd(fd, pid, pidfd);
		if (sp->pidfd < 0) {
			if (errno != ESRCH)
				call_drop_spare(b);
			return;
		}
		/* off the loop: its grace period is nobody's wait */
		r = sp->cg ? cg_move_start(b->base, sp->cg, pid, sp->pidfd,
					   spare_moved, b, &sp->mv, &err) : 0;
		if (r <= 0)
			spare_moved(b, r, NULL);
		return;
	}
	if (pidfd >= 0)
		close(pidfd);
	/* it died: init's news of its end (spare_msg) says how */
	if (n == 0) {
		drop_event(&sp->ev);
		return;
	}
	/* it said what it may not: the next call forks its own */
	call_drop_spare(b);
}

/*
 * A spare process only while no call runs: it would otherwise hold a pid
 * of the box's pids.max that the running call may want, and a frozen or
 * ending box has no use for one.  A background process aside: it runs
 * for hours (a dev server), and beside it every call forked its process
 * and waited for its move (3.6-14.5 ms a call instead of 2.6-3.5, cgroup
 * v1); the spare holds one pid of its pids.max meanwhile.
 */
static void spare_fork(struct corral_box *b, bool group_next)
{
	struct spare_proc sp = { .gate = -1, .pidfd = -1 };
	struct corral_err err;
	bool none = cg_mode(b->cg) == CG_NONE;

	if (b->sp.fid || box_fg_calls_running(b) || b->frozen || b->freezing ||
	    b->state != CORRAL_BOX_IDLE || (!none && !b->spare && !group_next))
		return;
	if (ask_fork(b, &sp.fid, &sp.gate, &err) < 0)
		return;
	/* group_next: on_spare sets it once made, before "r" can be read */
	sp.cg = none ? NULL : b->spare;
	sp.ev = housekeeping(event_new(b->base, sp.gate, EV_READ | EV_PERSIST,
				       on_spare_gate, b));
	b->sp = sp;
	if (!sp.ev || event_add(sp.ev, NULL) < 0)
		call_drop_spare(b);
}

/* init's news of the spare: its pid inside, or that it is gone. */
static void spare_msg(struct corral_box *b, const struct child_msg *m)
{
	struct spare_proc *sp = &b->sp;

	if (m->kind == MSG_STARTED && m->code > 0) {
		sp->spid = m->code;
		return;
	}
	/*
	 * Ended, and not by our drop (which forgets it first): the OOM
	 * killer took it as the box idled, or a process of the sandbox
	 * killed it.  Said; what its group counted is not the next call's.
	 */
	if (m->kind == MSG_CALL_EXITED)
		lost_process(b, sp->cg && sp->cg == b->spare ? sp->cg : NULL, NULL,
			     sp->spid, m->code, &b->spare_oom0, &b->spare_pids0);
	/* not forked (pids.max?), or ended: not retried until a call ends */
	call_drop_spare(b);
}

/*
 * Whether the spare of a box's next call waits: while another box is
 * starting or runs a call.  In a burst of 100 creates, each with its
 * first call, the next calls' groups and processes (five mkdirs, a fork
 * in init, a move) took 14% of the daemon's CPU and 13% of the boxes'
 * before the burst's last answer (bench/serve.py, issue 17), for calls
 * that an agent makes a model's turn later.  It does not wait for a box's
 * first call (the next thing its caller does), nor in a caller's loop
 * (calls_quick: its next call comes at once).  At most SPARE_WAIT_MAX_MS
 * from a call's start or its answer (each starts the wait anew):
 * under a load that never ends, a call that finds no spare makes its own
 * group and process, as it did when it came before its spare was made.
 * A burst is calls that began lately: another box's call counts while
 * one began within SPARE_WAIT_MAX_MS.  A call that has run longer (a
 * background process, a dev server, for hours; a long build) had every
 * other box's spare wait its full second after each call, for as long
 * as it ran: a call 50-200 ms after its box's answer then paid the group
 * and process on its path (2.5-3.9 -> 7-16 ms median, 2 boxes, cgroup v1).
 */
static bool spare_waits(struct corral_box *b)
{
	uint64_t now = corral_now_ms();

	if (!b->calls_total || b->calls_quick ||
	    (!box_any_starting() && (calls_live == box_fg_calls_running(b) ||
	     now - others_started_ms(b) >= SPARE_WAIT_MAX_MS))) {
		b->spare_waited = 0;
		return false;
	}
	if (!b->spare_waited)
		b->spare_waited = now;
	return now - b->spare_waited < SPARE_WAIT_MAX_MS;
}

/*
 * The next call's cgroup and process, made while the box idles (the
 * cgroup also while a call runs): mkdir in every hierarchy, the fork and
 * the move into the group are off the path of the call that uses them.
 */
static void on_spare(evutil_socket_t fd, short what, void *arg)
{
	struct corral_box *b = arg;
	struct corral_err err;
	char name[32];
	bool make = !b->spare && cg_mode(b->cg) != CG_NONE;

	(void)fd;
	(void)what;
	if (b->state == CORRAL_BOX_DEAD || b->state == CORRAL_BOX_HALTED)
		return;
	if (spare_waits(b)) {
		arm_spare(b, SPARE_WAIT_POLL_MS);
		return;
	}
	/*
	 * init is asked for the fork first: it forks on its CPU while we make
	 * the group here (a mkdir in every hierarchy, 0.2-0.4 ms), where it
	 * once waited for them.  Its "r", which needs the group, is read
	 * after this returns; a group not made takes the spare with it.
	 */
	spare_fork(b, make);
	if (make) {
		b->spare_id = b->next_id + 1;
		b->spare_oom0 = b->spare_pids0 = 0;
		snprintf(name, sizeof(name), "c%u", b->spare_id);
		if (cg_create_child(b->cg, name, &b->spare, &err) < 0)
			b->spare = NULL;
		/* its id (a stat) now, not on the call's path before it is sent */
		cg_id(b->spare);
		/* the process just asked for: into this group, or gone */
		if (b->sp.fid && !b->sp.cg) {
			if (b->spare)
				b->sp.cg = b->spare;
			else
				call_drop_spare(b);
		}
	}
}

static void arm_spare(struct corral_box *b, unsigned delay_ms)
{
	struct timeval tv = { delay_ms / 1000, (delay_ms % 1000) * 1000 };

	if (b->state == CORRAL_BOX_DEAD || b->state == CORRAL_BOX_HALTED)
		return;
	if (!b->ev_spare)
		b->ev_spare = housekeeping(evtimer_new(b->base, on_spare, b));
	if (b->ev_spare && (!b->spare || !b->sp.fid))
		evtimer_add(b->ev_spare, &tv);
}

void call_arm_spare(struct corral_box *b)
{
	arm_spare(b, 0);
}

/*
 * The call's process: the spare when it was forked for the call's group
 * (already in it, unless its "r" has not come yet), else one asked for now.
 */
static int call_process(struct corral_box *b, struct corral_call *c,
			struct corral_err *err)
{
	struct spare_proc *sp = &b->sp;

	if (sp->fid && (cg_mode(c->cg) == CG_NONE || sp->cg == c->cg)) {
		c->fid = sp->fid;
		c->gate = sp->gate;
		c->host_pid = sp->host_pid;
		c->pidfd = sp->pidfd;
		c->spid = sp->spid;
		c->started = c->spid > 0;
		/* its move may be under way still: the call sends when it ends */
		c->mv = sp->mv;
		if (c->mv)
			cg_move_retarget(c->mv, call_moved, c);
		drop_event(&sp->ev);
		*sp = (struct spare_proc){ .gate = -1, .pidfd = -1 };
		return 0;
	}
	return ask_fork(b, &c->fid, &c->gate, err);
}

/* A call not ended yet that goes by name. */
static bool call_running_named(const struct corral_box *b, const char *name)
{
	for (const struct corral_call *c = b->calls; c; c = c->next)
		if (!c->done && !strcmp(c->tool_call, name))
			return true;
	return false;
}

/*
 * A call the caller did not name is SANDBOX-N; a client may have given
 * that very name to a call still running: then SANDBOX-N-2, -3 ...
 */
static void call_name_generated(struct corral_box *b, struct corral_call *c)
{
	snprintf(c->tool_call, sizeof(c->tool_call), "%s-%u", b->id, c->id);
	for (unsigned k = 2; call_running_named(b, c->tool_call); k++)
		snprintf(c->tool_call, sizeof(c->tool_call), "%s-%u-%u", b->id,
			 c->id, k);
}

/*
 * A running call's fds here: its stdout's and stderr's pipes, stdin's,
 * its pidfd (a background process held 3.0, measured over 328).
 */
#define CALL_FDS	4
#define CALLS_FD_MIN	8	/* calls at once, whatever the limit's share */

/*
 * How many calls one box may run at once: its share of the open-files
 * limit (BOX_FD_SHARES), as its proxy's connections.  Without it one
 * client's background processes (328 sleeps in one box, the limit 1024)
 * took every fd of the daemon: every other box's calls were refused
 * ("pipe: Too many open files") or killed unmoved, its spare's "r" came
 * with no pidfd, and the API accepted no connection.
 */
static size_t calls_fd_budget(void)
{
	struct rlimit rl;
	size_t n;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		return SIZE_MAX;
	n = rl.rlim_cur > 256 ? (size_t)(rl.rlim_cur - 128) / CALL_FDS / BOX_FD_SHARES : 0;
	return n > CALLS_FD_MIN ? n : CALLS_FD_MIN;
}

static int check_exec(struct corral_box *b, const struct corral_call_opts *o,
		      struct corral_err *err)
{
	size_t running = box_calls_running(b), budget = calls_fd_budget();

	if (!o->argv || !o->argv[0] || !o->argv[0][0])
		return corral_set_err(err, -EINVAL, "no command to run");
	if (o->sh_fast && (strcmp(o->argv[0], "/bin/sh") || !o->argv[1] ||
			   strcmp(o->argv[1], "-c") || !o->argv[2] || o->argv[3]))
		return corral_set_err(err, -EINVAL, "sh_fast needs argv "
				      "{ \"/bin/sh\", \"-c\", LINE }");
	if (o->cwd && o->cwd[0] != '/')
		return corral_set_err(err, -EINVAL, "cwd must be an absolute path "
				      "(got \"%.200s\")", o->cwd);
	if (o->tool_call && corral_check_tool_call_id(o->tool_call, err) < 0)
		return err->code;
	/*
	 * The record names a call by its id: two running at once under one
	 * name would be one call in the audit log, their denials anyone's.
	 */
	if (o->tool_call && call_running_named(b, o->tool_call))
		return corral_set_err(err, -EEXIST, "tool_call_id \"%s\" is in use "
				      "by a call still running in this sandbox; "
				      "give each call an id of its own", o->tool_call);
	if (running >= budget)
		return corral_set_err(err, -EMFILE, "%zu calls of this sandbox are "
				      "running, what its share of the open files "
				      "allows (an eighth of the limit); one more is "
				      "refused until one ends", running);
	switch (b->state) {
	case CORRAL_BOX_HALTED:
		return corral_set_err(err, CORRAL_E_HALTED, "halted: %s", b->halt_reason);
	case CORRAL_BOX_PAUSED:
		return corral_set_err(err, CORRAL_E_PAUSED, "sandbox %s is paused; "
				      "resume it first", b->id);
	case CORRAL_BOX_DEAD:
		return corral_set_err(err, CORRAL_E_GONE, "the sandbox is dead");
	case CORRAL_BOX_STARTING:
		return corral_set_err(err, CORRAL_E_STARTING,
				      "the sandbox is still starting");
	default:
		return 0;
	}
}

static int call_pipes(struct corral_call *c, struct corral_err *err)
{
	int in[2] = { -1, -1 }, out[2] = { -1, -1 }, er[2] = { -1, -1 };

	/* a terminal's call makes its own stdio: the pty (tty_attach) */
	if (c->o.tty)
		return 0;
	if (pipe2(in, O_CLOEXEC | O_NONBLOCK) < 0 ||
	    pipe2(out, O_CLOEXEC | O_NONBLOCK) < 0 ||
	    pipe2(er, O_CLOEXEC | O_NONBLOCK) < 0) {
		int e = errno;

		close_fd(&in[0]);
		close_fd(&in[1]);
		close_fd(&out[0]);
		close_fd(&out[1]);
		close_fd(&er[0]);
		close_fd(&er[1]);
		return corral_set_errno(err, e, "pipe");
	}
	/* the child's end must block; ours must not */
	fcntl(in[0], F_SETFL, 0);
	fcntl(out[1], F_SETFL, 0);
	fcntl(er[1], F_SETFL, 0);
	c->pend_fds[0] = in[0];
	c->pend_fds[1] = out[1];
	c->pend_fds[2] = er[1];
	c->in_fd = in[1];
	c->out.fd = out[0];
	c->err.fd = er[0];
	return 0;
}

static int call_watch(struct corral_call *c, struct corral_err *err)
{
	struct event_base *base = c->b->base;
	struct timeval tv = tv_ms(c->o.timeout_ms);

	c->ev_gate = event_new(base, c->gate, EV_READ | EV_PERSIST, on_gate, c);
	if (!c->ev_gate || event_add(c->ev_gate, NULL) < 0)
		return corral_set_err(err, -ENOMEM, "cannot watch the call");
	if (!c->o.tty) {
		c->out.ev = event_new(base, c->out.fd, EV_READ | EV_PERSIST, on_stream, &c->out);
		c->err.ev = event_new(base, c->err.fd, EV_READ | EV_PERSIST, on_stream, &c->err);
		if (!c->out.ev || !c->err.ev || event_add(c->out.ev, NULL) < 0 ||
		    event_add(c->err.ev, NULL) < 0)
			return corral_set_err(err, -ENOMEM, "cannot watch the call");
	}
	/* a terminal's stdin given whole waits for the pty (tty_attach) */
	if (c->in_len && !c->o.tty) {
		c->ev_stdin = event_new(base, c->in_fd, EV_WRITE | EV_PERSIST, on_stdin, c);
		if (!c->ev_stdin || event_add(c->ev_stdin, NULL) < 0)
			return corral_set_err(err, -ENOMEM, "cannot watch the call");
	} else if (!c->o.stdin_open) {
		close_fd(&c->in_fd);
	}
	if (c->o.timeout_ms) {
		c->ev_timeout = evtimer_new(base, on_timeout, c);
		if (!c->ev_timeout || evtimer_add(c->ev_timeout, &tv) < 0)
			return corral_set_err(err, -ENOMEM, "cannot arm the timeout");
	}
	return 0;
}

static void call_unlink(struct corral_call *c)
{
	for (struct corral_call **pp = &c->b->calls; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			return;
		}
	}
}

int corral_box_exec(struct corral_box *b, const struct corral_call_opts *o,
		    struct corral_call **out, struct corral_err *err)
{
	struct corral_call *c;
	struct cg_stats bst = { 0 };
	char name[32];
	int r;

	*out = NULL;
	box_budgets_spent(b);	/* spent: halted, and check_exec says so */
	r = check_exec(b, o, err);
	if (r < 0)
		return r;
	drop_event(&b->ev_idle);
	if (b->state == CORRAL_BOX_FROZEN || b->freezing) {
		r = box_set_thawed(b, err);
		if (r < 0)
			return r;
	}
	if (b->state == CORRAL_BOX_FROZEN) {
		b->state = CORRAL_BOX_IDLE;
		events_emit(b->ev, "thaw", json_pack("{s:s}", "reason",
			    "a call arrived"));
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return corral_set_err(err, -ENOMEM, "out of memory for a call");
	c->b = b;
	c->o = *o;
	c->id = ++b->next_id;
	c->gate = c->pidfd = c->in_fd = c->pty = -1;
	c->pend_fds[0] = c->pend_fds[1] = c->pend_fds[2] = -1;
	c->in_exec = true;	/* until on_start_due: see there */
	c->out = (struct stream){ -1, NULL, &c->res.out, c, 1, { 0 } };
	c->err = (struct stream){ -1, NULL, &c->res.err, c, 2, { 0 } };
	/* the policy's cap is the ceiling; a call may ask for less */
	c->cap = b->p->output_bytes;
	if (o->output_bytes && o->output_bytes < c->cap)
		c->cap = o->output_bytes;
	c->out.keep = (struct outkeep){ .cap = c->cap, .tail_only = o->keep_tail };
	c->err.keep = c->out.keep;
	c->res.output_base64 = o->output_base64;
	c->t0 = corral_now_ms();
	c->lost0 = events_lost_own(b->ev, &(int){ 0 });
	b->calls_quick = b->t_ended && c->t0 - b->t_ended < CALLS_QUICK_MS;
	/* the call's own, else the policy's limits.timeout, else its default */
	if (!c->o.timeout_ms)
		c->o.timeout_ms = b->p->timeout_ms;
	if (!c->o.timeout_ms && !o->background) {
		c->o.timeout_ms = b->p->call_timeout_ms;
		c->default_timeout = true;
	}
	if (o->tool_call)
		snprintf(c->tool_call, sizeof(c->tool_call), "%s", o->tool_call);
	else
		call_name_generated(b, c);
	c->o.tool_call = c->tool_call;
	if (o->stdin_len) {
		c->in_data = malloc(o->stdin_len);
		if (!c->in_data) {
			free(c);
			return corral_set_err(err, -ENOMEM, "out of memory for "
					      "the call's stdin");
		}
		memcpy(c->in_data, o->stdin_data, o->stdin_len);
		c->in_len = o->stdin_len;
	}
	c->o.stdin_data = NULL;
	c->argv = sandbox_env_copy(o->argv);
	c->cwd = strdup(o->cwd ? o->cwd : "/workspace");
	if (o->output_order)
		c->order = json_array();
	if (!c->argv || !c->cwd || (o->output_order && !c->order)) {
		sandbox_env_free(c->argv);
		free(c->cwd);
		json_decref(c->order);
		free(c->in_data);
		free(c);
		return corral_set_err(err, -ENOMEM, "out of memory copying "
				      "the call's argv, cwd and order");
	}
	c->o.argv = c->argv;
	c->o.cwd = c->cwd;
	c->next = b->calls;
	b->calls = c;
	c->live = !c->o.background;
	calls_live += c->live;
	note_call_start(b);
	snprintf(name, sizeof(name), "c%u", c->id);
	if (b->spare && b->spare_id == c->id) {
		c->cg = b->spare;
		b->spare = NULL;
		/* what it counted before the call: its spare's death's, not the call's */
		c->cg_oom0 = b->spare_oom0;
		c->cg_pids0 = b->spare_pids0;
		r = 0;
	} else {
		r = cg_create_child(b->cg, name, &c->cg, err);
	}
	if (r == 0)
		r = call_process(b, c, err);
	/*
	 * The next call's group, while this one runs, but not at once: the
	 * call's process was just woken, on our CPU as a rule, and waited
	 * for our five mkdirs (0.2-0.4 ms measured).  A call that ends first
	 * has it made after its answer (call_finish).
	 */
	b->spare_waited = 0;
	arm_spare(b, SPARE_GROUP_DELAY_MS);
	if (r == 0) {
		c->cgid = cg_id(c->cg);
		r = call_pipes(c, err);
	}
	if (r == 0)
		r = build_exec(b, c, err);
	c->o.env = NULL;	/* packed; the caller's may go */
	/*
	 * The box's counts before the call (what bit during it is the
	 * difference), read before the call's process is woken: it is woken
	 * on our CPU as a rule and waits while we work.
	 */
	if (r == 0) {
		/*
		 * The box's files, kept open while it has calls: each read
		 * was an open, a read and a close, three before the call is
		 * sent and five between its exit and the answer (~10 us an
		 * open of a cgroup v1 file on a 2-core PVM guest).
		 */
		cg_keep_counters(b->cg, BOX_COUNTERS);
		cg_stats_some(b->cg, CG_ST_HITS, &bst);
		c->st0 = bst;
		r = call_watch(c, err);
	}
	/*
	 * A spare already in the call's group: no cgroup write on this path.
	 * One that died as the box idled, its news not read yet, refuses the
	 * call: init's news of it (call_lost) forks the call another, where
	 * it once failed, "cannot reach the call's process".
	 */
	if (r == 0 && c->host_pid && !c->mv) {
		r = send_call(c);
		if (process_gone(r))
			r = 0;
		else if (r < 0)
			r = corral_set_errno(err, -r, "cannot reach the call's process");
	}
	/* on_start may not run before the caller has its handle */
	if (r == 0 && !c->sent)
		c->in_exec = false;
	if (r == 0 && c->sent) {
		struct timeval now = { 0, 0 };

		c->ev_start = evtimer_new(b->base, on_start_due, c);
		if (!c->ev_start || evtimer_add(c->ev_start, &now) < 0)
			r = corral_set_err(err, -ENOMEM, "cannot watch the call");
	}
	if (r < 0) {
		c->done = true;	/* no on_done for a call that never was */
		corral_call_free(c);
		if (!box_calls_running(b))
			box_arm_idle(b);
		return r;
	}
	b->calls_total++;
	*out = c;
	return 0;
}

pid_t corral_call_pid(const struct corral_call *c)
{
	return c->spid;
}

pid_t corral_call_host_pid(const struct corral_call *c)
{
	return c->host_pid;
}

const char *corral_call_id(const struct corral_call *c)
{
	return c->tool_call;
}

const struct corral_result *corral_call_result(const struct corral_call *c)
{
	return c->done ? &c->res : NULL;
}

const struct corral_output *corral_call_output(const struct corral_call *c,
					       int stream)
{
	return stream == 2 ? &c->res.err : &c->res.out;
}

/*
 * The call's session, its first process's group: by the pidfd (Linux
 * 6.9), which reaches the group of that process's struct pid, whoever
 * leads it now, and no other.  By the number, kill(-pid) reached the
 * session of whatever process had that pid again once the call's were
 * all gone, and made a session: a call ending, or ended.  Before 6.9
 * (EINVAL) by the number only while the first process has not exited,
 * when the group can be no one else's; else nothing.
 */
static int call_group_signal(struct corral_call *c, int sig)
{
	struct pollfd p = { .fd = c->pidfd, .events = POLLIN };
	/* (the older way on a newer kernel, for its test) */
	static int group_flag = -1;

	if (group_flag < 0)
		group_flag = !getenv("CORRAL_TEST_NO_PIDFD_GROUP");
	if (c->pidfd < 0)
		return 0;	/* not had its "r", or ended: none of its own */
	errno = EINVAL;
	if (group_flag && (syscall(SYS_pidfd_send_signal, c->pidfd, sig, NULL,
		    PIDFD_SIGNAL_PROCESS_GROUP) == 0 || errno == ESRCH))
		return 0;
	if (errno != EINVAL)
		return -errno;
	if (poll(&p, 1, 0) != 0 || c->host_pid <= 0)
		return 0;	/* exited (readable), or cannot tell */
	if (kill(-c->host_pid, sig) < 0 && errno != ESRCH)
		return -errno;
	return 0;
}

int corral_call_kill(struct corral_call *c, int sig)
{
	c->sent_sig = sig;	/* said in the result, if it is what ended it */

	if (!c->sent && !c->done && sig == SIGKILL && c->gate >= 0) {
		/*
		 * Its process has not had the call (nor maybe its cgroup):
		 * EOF on the gate, and it dies of SIGKILL having run nothing.
		 * Its move, if one is under way, would send the call dropped
		 * here when it ends: the call has no more use for it.
		 */
		cg_move_cancel(c->mv);
		c->mv = NULL;
		drop_event(&c->ev_gate);
		close_gate(c);
		drop_pend(c);
		return 0;
	}
	/* no cgroup: the call's session is all we can name */
	if (cg_mode(c->cg) == CG_NONE || sig != SIGKILL)
		return call_group_signal(c, sig);
	return cg_kill_start(c->cg, c->b->base);
}

/* ---- a call's terminal ------------------------------------------- */

ssize_t corral_call_tty_write(struct corral_call *c, const void *data, size_t len)
{
	ssize_t n;

	if (!c->o.tty)
		return -ENOTTY;
	if (c->done || c->hungup)
		return -EIO;
	if (c->pty < 0) {
		c->room_wanted = true;
		return 0;
	}
	n = write(c->pty, data, len);
	if (n < 0 && errno != EAGAIN && errno != EINTR)
		return -errno;
	if (n < 0)
		n = 0;
	if ((size_t)n < len && c->ev_pty_room) {
		c->room_wanted = true;
		event_add(c->ev_pty_room, NULL);
	}
	return n;
}

int corral_call_tty_resize(struct corral_call *c, unsigned short rows,
			   unsigned short cols)
{
	struct winsize ws = { .ws_row = rows, .ws_col = cols };

	if (!c->o.tty)
		return -ENOTTY;
	if (c->done || c->hungup)
		return -EIO;
	c->o.rows = rows;
	c->o.cols = cols;
	if (c->pty < 0) {
		c->resize_pending = true;
		return 0;
	}
	/* the kernel sends SIGWINCH to the terminal's foreground job */
	return ioctl(c->pty, TIOCSWINSZ, &ws) < 0 ? -errno : 0;
}

void corral_call_tty_hangup(struct corral_call *c)
{
	if (!c->o.tty || c->hungup)
		return;
	c->hungup = true;
	/*
	 * The last fd of the master closed: the kernel hangs up the slave
	 * (SIGHUP and SIGCONT to the session's leader and its foreground
	 * job, EIO to readers).  The call ends as its process does.
	 */
	drop_event(&c->ev_pty_room);
	drop_event(&c->ev_stdin);
	drop_event(&c->out.ev);
	close_fd(&c->in_fd);
	close_fd(&c->out.fd);
	close_fd(&c->pty);
}

/* ---- what outlives a call ---------------------------------------- */

static void lingerer_free(struct lingerer *l)
{
	cg_move_cancel(l->rm);
	cg_destroy(l->cg);
	free(l);
}

/* Without cgroups: the records of the last LINGER_MAX calls, no more. */
static void trim_lingering(struct corral_box *b)
{
	struct lingerer **pp = &b->lingering;
	size_t n = 0;

	while (*pp && ++n < LINGER_MAX)
		pp = &(*pp)->next;
	while (*pp) {
		struct lingerer *l = *pp;

		*pp = l->next;
		lingerer_free(l);
	}
}

/* Its group's removal is over: gone (r 0), or still in use (kept). */
static void lingerer_removed(void *arg, int r, const char *msg)
{
	struct lingerer *l = arg;

	(void)msg;
	l->rm = NULL;
	if (r < 0)
		return;		/* a later sweep tries again */
	for (struct lingerer **pp = &l->b->lingering; *pp; pp = &(*pp)->next) {
		if (*pp == l) {
			*pp = l->next;
			lingerer_free(l);
			return;
		}
	}
}

/*
 * The sandbox chooses how many groups linger: each call that leaves a
 * process behind (`sleep 1d &`) leaves one, up to its pids limit, and a
 * group's read is two to five files and an rmdir (EBUSY) on the loop
 * every other sandbox of a daemon waits on.  All of them at each call's
 * end and each tick: 1000 held a daemon's loop some 40 ms a call and
 * 14 ms a second.  So a pass reads a batch, the next one the next.
 */
size_t lingering_batch(struct corral_box *b, struct lingerer **out, size_t max)
{
	struct lingerer **pp = &b->lingering, *head = b->lingering, **tail;
	size_t n = 0;

	while (*pp && n < max) {
		out[n++] = *pp;
		pp = &(*pp)->next;
	}
	if (!*pp || !n)
		return n;	/* the whole list: its order is kept */
	b->lingering = *pp;
	*pp = NULL;		/* out[n - 1]'s next: the batch ends the list */
	for (tail = &b->lingering; *tail; tail = &(*tail)->next)
		;
	*tail = head;
	return n;
}

static void free_lingerers(struct corral_box *b, bool all)
{
	struct lingerer **pp = &b->lingering, *l;

	while ((l = *pp)) {
		if (!all && !l->removed) {
			pp = &l->next;
			continue;
		}
		*pp = l->next;
		lingerer_free(l);
	}
}

/*
 * The first removal of a group, right after its call (empty, as a rule),
 * by the cgroup mover (cg_remove_start), not on the loop: an rmdir in the
 * cgroup2 tree waits on RCU now and then (7.3 ms seen), and held every
 * request meanwhile, the next call's among them.  A group found in use
 * then (a background process) is tried again in later passes, here: a
 * refused rmdir is quick, and 900 such groups are not 900 messages a
 * second in the queue that the next call's move waits in.  A pass takes
 * a batch of them (lingering_batch).
 */
void call_sweep_lingering(struct corral_box *b, bool all)
{
	struct lingerer *batch[LINGER_VISIT_MAX], *l;
	/*
	 * Without cgroups nothing is read or removed here, and the order of
	 * the list is its age, newest first, which trim_lingering keeps.
	 */
	size_t n = all || cg_mode(b->cg) == CG_NONE ? 0 :
		   lingering_batch(b, batch, LINGER_VISIT_MAX);
	int r;

	if (!all)
		lingering_bitten(b, NULL);

	for (size_t i = 0; i < n; i++) {
		l = batch[i];
		if (l->rm)
			continue;	/* its removal is under way off the loop */
		/* its last process's OOM kill may be what emptied it */
		background_hits(b, l->cg, l->tool_call, &l->seen_oom,
				&l->seen_pids, NULL);
		/* a lingering group is read no more often than this */
		if (l->cg)
			cg_drop_counters(l->cg);
		r = cg_mode(l->cg) == CG_NONE ? -EBUSY :
		    l->tried ? cg_try_remove(l->cg) :
		    cg_remove_start(b->base, l->cg, lingerer_removed, l, &l->rm);
		l->tried = true;
		l->removed = r == 0;
	}
	free_lingerers(b, all);
}

/*
 * From the box's start: its first call comes next as a rule, and the
 * reads before it (the idle timer's, the meter's at the call) opened
 * three of those files once more each and closed them again, the CPU
 * twice (issue 17: a burst of creates and first calls is bound by the
 * daemon's CPU).  A box that gets no call drops them at its tick.
 */
void call_counters_keep(struct corral_box *b)
{
	cg_keep_counters(b->cg, BOX_COUNTERS);
}

/*
 * A daemon's many idle boxes do not hold their counters' files (five to
 * seven fds each): closed once the box is frozen, or has had no call for
 * BOX_COUNTERS_KEEP_MS.  On the box's tick.
 */
void call_counters_rest(struct corral_box *b)
{
	if (!box_calls_running(b) &&
	    (b->frozen || corral_now_ms() - b->t_ended > BOX_COUNTERS_KEEP_MS))
		cg_drop_counters(b->cg);
}

static void on_sweep(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	call_sweep_lingering(arg, false);
}

static void arm_sweep(struct corral_box *b)
{
	/*
	 * Not at once for a caller that spaces its calls: the group's rmdirs
	 * (0.1-0.2 ms) would come right after the call's answer is written,
	 * while the caller, woken by it on our CPU as a rule, waits there to
	 * read it.  A caller's loop has them at once, as its spare (see
	 * call_finish): later, they would land on its next call's path.
	 */
	struct timeval later = { 0, b->calls_quick ? 0 : SWEEP_DELAY_MS * 1000 };

	/* a dead box sweeps nothing: destroy takes every group with it */
	if (b->state == CORRAL_BOX_DEAD)
		return;
	if (!b->ev_sweep)
		b->ev_sweep = housekeeping(evtimer_new(b->base, on_sweep, b));
	if (b->ev_sweep && !evtimer_pending(b->ev_sweep, NULL))
		evtimer_add(b->ev_sweep, &later);
}

/*
 * What a finished call left running stays in its cgroup, still charged to
 * it; the group goes when it is empty (swept on the tick) or with the box.
 */
static void keep_lingering(struct corral_call *c)
{
	struct corral_box *b = c->b;
	bool none = cg_mode(c->cg) == CG_NONE;
	struct lingerer *l;

	/*
	 * Kept either way: an empty group is removed by the sweep on the
	 * next turn of the loop, after the call's answer has been written;
	 * without cgroups nothing says whether the call left anyone.
	 */
	l = calloc(1, sizeof(*l));
	if (!l) {
		cg_destroy(c->cg);
		c->cg = NULL;
		return;
	}
	/*
	 * Its counters' files stay open until the sweep, which reads them
	 * once more (background_hits) and closes them: here their closes
	 * came before the answer was written (the write waits for the loop).
	 */
	l->b = b;
	l->id = c->id;
	l->cgid = c->cgid;
	l->seen_oom = c->seen_oom;
	l->seen_pids = c->seen_pids;
	l->sid = c->host_pid;
	memcpy(l->tool_call, c->tool_call, sizeof(l->tool_call));
	l->cg = c->cg;
	l->next = b->lingering;
	b->lingering = l;
	c->cg = NULL;
	if (none)
		trim_lingering(b);
	else
		arm_sweep(b);
}

void corral_call_free(struct corral_call *c)
{
	if (!c)
		return;
	call_gone(c);
	if (!c->done)
		corral_call_kill(c, SIGKILL);
	call_stop_io(c);
	call_unlink(c);
	if (c->done && c->cg)
		keep_lingering(c);
	cg_destroy(c->cg);
	free(c->in_data);
	sandbox_env_free(c->argv);
	free(c->cwd);
	json_decref(c->denials);
	json_decref(c->order);
	outkeep_free(&c->out.keep);
	outkeep_free(&c->err.keep);
	corral_result_free(&c->res);
	free(c);
}

/* ---- init's news of calls ---------------------------------------- */

/* The call whose process init forked as fid. */
static struct corral_call *call_by_fid(struct corral_box *b, uint32_t fid)
{
	for (struct corral_call *c = b->calls; c; c = c->next)
		if (c->fid == fid)
			return c;
	return NULL;
}

#define CALL_DENIALS_KEPT 100

/*
 * A denial goes in the result of the call it is attributed to: the one
 * box_attribute found (b->named), not whichever call has its name, which
 * an ended call whose background process made the denial may share.
 */
void call_note_denial(struct corral_box *b, const char *type, json_t *event)
{
	uint32_t named = b->named;

	b->named = 0;
	if (!named || (strcmp(type, "egress.denied") && strcmp(type, "syscall.denied")))
		return;
	for (struct corral_call *c = b->calls; c; c = c->next) {
		if (c->done || c->id != named)
			continue;
		if (!c->denials)
			c->denials = json_array();
		c->ndenied++;
		if (json_array_size(c->denials) < CALL_DENIALS_KEPT)
			json_array_append(c->denials, event);
		return;
	}
}

void call_msg(struct corral_box *b, const struct child_msg *m)
{
	struct corral_call *c = call_by_fid(b, m->id);

	if (!c && b->sp.fid && b->sp.fid == m->id) {
		spare_msg(b, m);
		return;
	}
	if (!c || c->done)
		return;
	if (m->kind == MSG_CALL_EXITED) {
		/* dead before its call, which nobody ended: not the call's end */
		if (!c->sent && !c->timed_out && !c->sent_sig)
			call_lost(c, m->code);
		else
			call_exited(c, m->code);
		return;
	}
	if (m->kind != MSG_STARTED)
		return;
	if (m->code < 0) {
		c->fail = (struct exec_fail){ EXEC_STAGE_EXEC, -m->code };
		c->exited = true;
		call_finish(c);
		return;
	}
	c->spid = m->code;
	c->started = true;
	announce(c);	/* when the call was sent before this came */
}
