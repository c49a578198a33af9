/*
 * box.c - a sandbox that lives across many tool calls (corral serve).
 *
 * The box is spawned as every sandbox is (sandbox_spawn), but its init
 * waits on the control socket for calls (call.c) instead of running one
 * command.  The supervisor, here, runs on the caller's event loop: one
 * process owns many boxes, and nothing in this file blocks for longer
 * than a cgroup write (a freeze is asked for here and completes from the
 * loop: freeze_done).  This file holds the box's life: create, the
 * messages of init, freeze and thaw (idle, pause), halt, destroy.
 */
#include "internal.h"
#include "box.h"
#include "events.h"
#include "abort.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

int corral_cleanup_stale(void)
{
	return cg_cleanup_stale();
}

int corral_cleanup_owner(pid_t pid)
{
	return cg_cleanup_owner(pid);
}

/* ---- state ------------------------------------------------------- */

const char *corral_box_id(const struct corral_box *b)
{
	return b->id;
}

size_t corral_box_running(const struct corral_box *b)
{
	return box_calls_running(b);
}

enum corral_box_state corral_box_state(const struct corral_box *b)
{
	if (b->state == CORRAL_BOX_IDLE && box_calls_running(b))
		return CORRAL_BOX_RUNNING;
	return b->state;
}

const char *corral_box_state_name(enum corral_box_state s)
{
	static const char *const names[] = {
		[CORRAL_BOX_STARTING] = "starting",
		[CORRAL_BOX_RUNNING] = "running",
		[CORRAL_BOX_IDLE] = "idle",
		[CORRAL_BOX_FROZEN] = "frozen",
		[CORRAL_BOX_PAUSED] = "paused",
		[CORRAL_BOX_HALTED] = "halted",
		[CORRAL_BOX_DEAD] = "dead",
	};

	return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}

const char *corral_box_halt_reason(const struct corral_box *b)
{
	return b->halt_reason[0] ? b->halt_reason : NULL;
}

void corral_box_layers(const struct corral_box *b, struct corral_layers *l)
{
	l->landlock_abi = b->sb ? b->sb->landlock_abi : 0;
	l->seccomp = true;
	l->seccomp_notify = b->sb && b->sb->sensor;
	l->limits = cg_mode_name(b->cg);
	if (b->sb)
		l->ids = b->sb->ids;
}

/* ---- the freezer ------------------------------------------------------ */

static void freeze_done(void *arg, int r, const struct corral_err *err);

/* 1: frozen now; 0: under way, freeze_done() says why it was; <0: cannot. */
static int set_frozen(struct corral_box *b, enum box_freeze why,
		      struct corral_err *err)
{
	int r;

	if (b->frozen)
		return 1;
	if (b->freezing) {
		b->freezing = why;
		return 0;
	}
	r = cg_freeze_start(b->cg, b->base, freeze_done, b, err);
	if (r == 0)
		b->freezing = why;
	if (r == 1) {
		box_meter(b);
		b->frozen = true;
	}
	return r;
}

int box_freeze(struct corral_box *b, enum box_freeze why, struct corral_err *err)
{
	return set_frozen(b, why, err);
}

/* Thawed when the write returns (no wait); a freeze under way is dropped. */
int box_set_thawed(struct corral_box *b, struct corral_err *err)
{
	int r;

	if (b->snap)
		box_snap_cancel(b, -EAGAIN, "the sandbox was thawed (a call) before "
				"the snapshot was made: try again");

	if (!b->frozen && !b->freezing)
		return 0;
	b->freezing = BF_NONE;
	box_meter(b);
	r = cg_thaw(b->cg, err);
	if (r == 0)
		b->frozen = false;
	return r;
}

/* ---- halt and pause: the freezer's users ------------------------------ */

static void kill_all(struct corral_box *b)
{
	sandbox_kill(b->sb);
	cg_kill_async(b->cg, b->base);	/* v1: its rounds off the loop */
}

static void halt_calls(struct corral_box *b)
{
	struct corral_call *c, *next;

	for (c = b->calls; c; c = next) {
		next = c->next;	/* on_done may free c */
		if (!c->done) {
			c->halted = true;
			call_finish(c);
		}
	}
}

/*
 * The second half of a halt, once the tree is frozen (or cannot be): the
 * record, then kill or hold frozen as the policy says.
 */
static void halt_record(struct corral_box *b, bool frozen)
{
	const char *criterion = b->halt_criterion[0] ? b->halt_criterion : NULL;
	const char *reason = b->halt_text ? b->halt_text : b->halt_reason;
	bool kill_now = b->p->abort.kill;
	json_t *evidence = b->halt_evidence;
	struct corral_err err;

	b->halt_evidence = NULL;
	if (criterion)
		events_emit(b->ev, "abort", json_pack("{s:s, s:s, s:o, s:s, s:b}",
			    "criterion", criterion, "reason", reason,
			    "evidence", evidence ? evidence : json_null(),
			    "on_abort", kill_now ? "kill" : "freeze", "frozen", frozen));
	else
		json_decref(evidence);
	if (kill_now || !frozen) {
		b->killed = true;
		kill_all(b);
		box_set_thawed(b, &err);	/* let the killed exit */
	}
	events_emit(b->ev, "halt", json_pack("{s:s, s:s, s:s}", "reason", reason,
		    "by", criterion ? "abort criterion" : "request",
		    "state", kill_now || !frozen ? "killed" :
		    "frozen, held until destroyed"));
	free(b->halt_text);
	b->halt_text = NULL;
	halt_calls(b);
	if (b->o.on_halt)
		b->o.on_halt(b->o.arg, b);
}

/*
 * The policy's decision (or a person's), carried out: freeze first, so
 * nothing runs and the evidence stays, record, then kill or hold frozen.
 * Calls are refused from here on; the record waits for the freeze.
 */
static void box_halt(struct corral_box *b, const char *criterion,
		     const char *reason, json_t *evidence)
{
	struct corral_err err;
	int r;

	box_meter(b);
	snprintf(b->halt_reason, sizeof(b->halt_reason), "%s", reason);
	/*
	 * Cut, never inside a character: the reason is the client's UTF-8
	 * and goes into every JSON the sandbox is shown in, where half a
	 * character made json_pack fail (a halt answered 500, ls lost it).
	 */
	if (strlen(reason) >= sizeof(b->halt_reason)) {
		size_t n = strlen(b->halt_reason), i = n;

		while (i > 0 && ((unsigned char)b->halt_reason[i - 1] & 0xc0) == 0x80)
			i--;
		if (i > 0 && (unsigned char)b->halt_reason[i - 1] >= 0xc0 &&
		    corral_utf8_char(b->halt_reason + i - 1, n - i + 1) == 0)
			b->halt_reason[i - 1] = '\0';
	}
	snprintf(b->halt_criterion, sizeof(b->halt_criterion), "%s",
		 criterion ? criterion : "");
	b->halt_text = strdup(reason);	/* NULL: the cut halt_reason will do */
	b->halt_evidence = evidence;
	b->state = CORRAL_BOX_HALTED;
	box_works_halt(b);
	drop_event(&b->ev_idle);
	/* its writes from before the freeze go no further, nor new ones */
	sandbox_halt_egress(b->sb);
	r = set_frozen(b, BF_HALT, &err);
	if (r != 0)
		halt_record(b, r > 0);
}

int corral_box_halt(struct corral_box *b, const char *reason,
		    struct corral_err *err)
{
	if (b->state == CORRAL_BOX_HALTED)
		return corral_set_err(err, -EALREADY, "already halted: %s",
				      b->halt_reason);
	if (b->state == CORRAL_BOX_DEAD || b->state == CORRAL_BOX_STARTING)
		return corral_set_err(err, CORRAL_E_GONE, "the sandbox is %s",
				      corral_box_state_name(b->state));
	box_halt(b, NULL, reason && reason[0] ? reason : "halted by request",
		 NULL);
	return 0;
}

static void on_event(void *arg, const char *type, json_t *event)
{
	struct corral_box *b = arg;
	struct abort_verdict v = { 0 };

	call_note_denial(b, type, event);
	if (b->state != CORRAL_BOX_HALTED && b->abort &&
	    abort_note(b->abort, type, event, &v)) {
		json_t *evidence = v.evidence;

		v.evidence = NULL;
		box_halt(b, v.criterion, v.reason, evidence);
	}
}

int corral_box_pause(struct corral_box *b, bool paused, struct corral_err *err)
{
	const char *resume;
	int r;

	if (b->state == CORRAL_BOX_HALTED)
		return corral_set_err(err, CORRAL_E_HALTED, "halted: %s", b->halt_reason);
	if (b->state == CORRAL_BOX_DEAD || b->state == CORRAL_BOX_STARTING)
		return corral_set_err(err, CORRAL_E_GONE, "the sandbox is %s",
				      corral_box_state_name(b->state));
	if (paused == (b->state == CORRAL_BOX_PAUSED))
		return 0;
	if (!paused && box_budgets_spent(b))
		return corral_set_err(err, CORRAL_E_HALTED, "halted: %s", b->halt_reason);
	/* a pause still freezing has no "pause" event yet: say so */
	resume = !paused && b->freezing ? "resumed by request before the "
		 "freeze of the pause completed" : NULL;
	r = paused ? set_frozen(b, BF_PAUSE, err) : box_set_thawed(b, err);
	if (r < 0)
		return r;
	drop_event(&b->ev_idle);
	b->state = paused ? CORRAL_BOX_PAUSED : CORRAL_BOX_IDLE;
	/* paused: calls are refused now; the event once the tree is frozen */
	if (!paused || r == 1)
		events_emit(b->ev, paused ? "pause" : "resume", resume ?
			    json_pack("{s:s}", "reason", resume) : NULL);
	if (!paused && !box_calls_running(b))
		box_arm_idle(b);
	return 0;
}

/* The freeze a pause asked for did not take: running again, and why. */
static void pause_failed(struct corral_box *b, const struct corral_err *err)
{
	b->state = CORRAL_BOX_IDLE;
	events_emit(b->ev, "resume", json_pack("{s:s+}", "reason",
		    "the freeze of the pause did not complete, the sandbox runs "
		    "again: ", err->msg));
	if (!box_calls_running(b))
		box_arm_idle(b);
}

/* ---- idle and the tick -------------------------------------------------- */

static void idle_frozen(struct corral_box *b);

static void on_idle(evutil_socket_t fd, short what, void *arg)
{
	struct corral_box *b = arg;
	struct corral_err err;
	struct cg_stats st = { 0 };

	(void)fd;
	(void)what;
	drop_event(&b->ev_idle);
	if (b->state != CORRAL_BOX_IDLE || box_calls_running(b))
		return;
	/* a background process still at work keeps the box awake */
	cg_stats_some(b->cg, CG_ST_CPU, &st);
	if (st.valid && st.cpu_ns - b->idle_cpu_ns > BOX_IDLE_CPU_NS) {
		box_arm_idle(b);
		return;
	}
	if (set_frozen(b, BF_IDLE, &err) == 1)
		idle_frozen(b);
}

static void idle_frozen(struct corral_box *b)
{
	b->state = CORRAL_BOX_FROZEN;
	events_emit(b->ev, "freeze", json_pack("{s:s, s:I}", "reason",
		    "idle", "idle_ms", (json_int_t)b->o.idle_freeze_ms));
}

/*
 * A freeze asked for by set_frozen() is done (r 0) or did not take; what
 * it was for decides what follows, if the box is still in that state.
 */
static void freeze_done(void *arg, int r, const struct corral_err *err)
{
	struct corral_box *b = arg;
	enum box_freeze why = b->freezing;

	b->freezing = BF_NONE;
	if (r == 0) {
		box_meter(b);
		b->frozen = true;
	}
	if (b->snap)
		box_snap_frozen(b, r, err, why == BF_SNAPSHOT);
	if (why == BF_IDLE && r == 0 && b->state == CORRAL_BOX_IDLE &&
	    !box_calls_running(b))
		idle_frozen(b);
	else if (why == BF_PAUSE && b->state == CORRAL_BOX_PAUSED && r == 0)
		events_emit(b->ev, "pause", NULL);
	else if (why == BF_PAUSE && b->state == CORRAL_BOX_PAUSED)
		pause_failed(b, err);
	else if (why == BF_HALT && b->state == CORRAL_BOX_HALTED)
		halt_record(b, r == 0);
}

void box_arm_idle(struct corral_box *b)
{
	struct timeval tv = tv_ms(b->o.idle_freeze_ms);
	struct cg_stats st = { 0 };

	if (!b->o.idle_freeze_ms || b->state != CORRAL_BOX_IDLE ||
	    cg_mode(b->cg) == CG_NONE)
		return;
	drop_event(&b->ev_idle);
	cg_stats_some(b->cg, CG_ST_CPU, &st);
	b->idle_cpu_ns = st.cpu_ns;
	b->ev_idle = evtimer_new(b->base, on_idle, b);
	if (b->ev_idle)
		evtimer_add(b->ev_idle, &tv);
}

void corral_box_note(struct corral_box *b, const char *type, const char *reason)
{
	events_emit(b->ev, type, json_pack("{s:s}", "reason", reason));
}

void corral_box_set_idle_freeze(struct corral_box *b, uint64_t ms)
{
	b->o.idle_freeze_ms = ms;
	if (!box_calls_running(b))
		box_arm_idle(b);
}

/* The CPU and wall-time budgets against the meters as they stand. */
static void check_budgets(struct corral_box *b)
{
	struct abort_verdict v = { 0 };

	if (b->abort && abort_check_usage(b->abort, corral_now_ms() - b->t_created,
					  b->cpu_ns / 1000000, true, &v)) {
		json_t *evidence = v.evidence;

		v.evidence = NULL;
		box_halt(b, v.criterion, v.reason, evidence);
	}
}

/*
 * Before a frozen (or idle) box runs anything again: the tick skips a
 * frozen box, yet its wall time goes on, and CPU spent since the last
 * tick is not yet weighed.  Without this a call that came after a budget
 * was spent ran until the next tick, up to a second of it.
 */
bool box_budgets_spent(struct corral_box *b)
{
	if (!b->abort || b->state == CORRAL_BOX_HALTED ||
	    b->state == CORRAL_BOX_DEAD || b->state == CORRAL_BOX_STARTING)
		return b->state == CORRAL_BOX_HALTED;
	box_meter(b);
	check_budgets(b);
	return b->state == CORRAL_BOX_HALTED;
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct corral_box *b = arg;

	(void)fd;
	(void)what;
	call_counters_rest(b);
	if (b->frozen || b->state == CORRAL_BOX_HALTED)
		return;
	box_meter(b);
	call_sweep_lingering(b, false);
	check_budgets(b);
}

/* ---- init's messages --------------------------------------------- */

/*
 * Why init died, where the kernel says: on cgroup v1 the box's own group
 * counts the OOM kills of its own processes alone, and init is the one
 * that lives there (every call has a group of its own), so a count there
 * is init's kill, which takes the sandbox with it.  v2 counts every kill
 * below the box too, whose victims init outlived: nothing is added there.
 */
static const char *died_why(struct corral_box *b, char *buf, size_t len)
{
	struct cg_stats st;
	char size[32];

	if (cg_mode(b->cg) != CG_V1 || cg_stats_some(b->cg, CG_ST_OOM, &st) < 0 ||
	    !st.valid || !st.oom_kills)
		return "the sandbox's init died";
	corral_format_size(b->p->memory_bytes, size, sizeof(size));
	snprintf(buf, len, "the sandbox's init died: the OOM killer took it "
		 "(memory limit %s reached), and every process went with it", size);
	return buf;
}

static void box_died(struct corral_box *b)
{
	char why[CORRAL_ERR_MAX];
	struct corral_call *c, *next;
	bool was_up = b->state != CORRAL_BOX_DEAD &&
		      b->state != CORRAL_BOX_HALTED;
	bool starting = b->state == CORRAL_BOX_STARTING;

	box_left_starting(b);
	sandbox_unwatch(b->sb);
	drop_event(&b->ev_idle);
	drop_event(&b->ev_tick);
	box_meter(b);
	if (b->state != CORRAL_BOX_HALTED)
		b->state = CORRAL_BOX_DEAD;
	for (c = b->calls; c; c = next) {
		next = c->next;
		call_finish(c);
	}
	if (starting && b->o.on_ready) {
		struct corral_err err;

		if (b->sb && b->sb->start_err[0])
			corral_set_err(&err, -EIO, "%s", b->sb->start_err);
		else
			corral_set_err(&err, -EIO, "the sandbox's init died while starting");
		b->o.on_ready(b->o.arg, b, &err);
		return;
	}
	if (was_up) {
		events_emit(b->ev, "sandbox.died", json_pack("{s:s}", "reason",
			    died_why(b, why, sizeof(why))));
		if (b->o.on_dead)
			b->o.on_dead(b->o.arg, b);
	}
}

/*
 * inotify names no pid: the call is known only if one call runs, and
 * nothing else does: a finished call's leftover (or a process that left
 * its call's session) may have touched the file as well, and naming the
 * running call then blamed it for another's act.
 */
static void on_tripwire(void *arg, json_t *event, pid_t pid)
{
	struct corral_box *b = arg;
	struct corral_call *only;

	if (pid > 0 || box_calls_running(b) != 1)
		return;
	for (only = b->calls; only && only->done; only = only->next)
		;
	if (!only)
		return;
	if (!b->sb || box_others_alive(b->sb->pid, only->host_pid)) {
		json_object_set_new(event, "attributed", json_sprintf("to no call: "
				    "inotify names no pid, and besides the one call "
				    "running (%s) other processes of the sandbox lived "
				    "(a finished call's leftovers)", only->tool_call));
		return;
	}
	json_object_set_new(event, "call", json_string(only->tool_call));
	json_object_set_new(event, "attributed", json_string("the only call "
			    "running when the file was touched"));
}

/*
 * Boxes starting, for the spares of next calls (call.c), which wait while
 * any is.  Boxes live on their loop's thread only: a count without a lock.
 */
static size_t boxes_starting;

bool box_any_starting(void)
{
	return boxes_starting > 0;
}

/* Out of the count, once, whichever way it stops starting. */
void box_left_starting(struct corral_box *b)
{
	if (!b->starting_counted)
		return;
	b->starting_counted = false;
	boxes_starting--;
}

/* The layers are in place (the tripwires armed): calls may come. */
static void box_ready(struct corral_box *b)
{
	struct timeval tick = tv_ms(BOX_TICK_MS);

	box_left_starting(b);
	b->state = CORRAL_BOX_IDLE;
	b->t_mark = corral_now_ms();
	b->ev_tick = event_new(b->base, -1, EV_PERSIST, on_tick, b);
	if (b->ev_tick)
		event_add(b->ev_tick, &tick);
	/*
	 * init is 1 in its own pid namespace: said here, or the attributor
	 * learnt it from /proc/PID/status (an open, the file made and read:
	 * about 1% of the daemon's CPU in a burst of creates, issue 17).
	 */
	events_emit(b->ev, "sandbox.ready", json_pack("{s:i, s:s, s:i, s:i}",
		    "landlock_abi", b->sb->landlock_abi, "limits", cg_mode_name(b->cg),
		    "pid", (int)b->sb->pid, "sandbox_pid", 1));
	call_counters_keep(b);
	box_arm_idle(b);
	call_arm_spare(b);
	if (b->o.on_ready)
		b->o.on_ready(b->o.arg, b, NULL);
}

static void on_msg(void *arg, const struct child_msg *m)
{
	struct corral_box *b = arg;
	struct corral_err err;

	switch (m->kind) {
	case MSG_READY:
		box_ready(b);
		break;
	case MSG_SETUP_FAILED:
		if (b->state == CORRAL_BOX_STARTING) {
			box_left_starting(b);
			b->state = CORRAL_BOX_DEAD;
			corral_set_err(&err, m->code ? m->code : -EIO, "%s", m->text);
			sandbox_unwatch(b->sb);
			if (b->o.on_ready)
				b->o.on_ready(b->o.arg, b, &err);
		}
		break;
	case MSG_STARTED:
	case MSG_CALL_EXITED:
		call_msg(b, m);
		break;
	}
}

static void on_gone(void *arg)
{
	box_died(arg);
}

static const struct sandbox_hooks box_hooks = {
	.msg = on_msg,
	.closed = on_gone,
	.exited = on_gone,
	.tripwire = on_tripwire,
};

/* ---- create and destroy ------------------------------------------ */

/*
 * The freezer's switch, held on while the daemon has a box (cg_freezer_hold
 * says why): made with the first box, released with the last.  Boxes live
 * on their loop's thread only, so a count without a lock.
 */
static struct cg *freezer_hold;
static size_t freezer_holders;

static void hold_freezer(void)
{
	static unsigned made;
	struct corral_err err;
	char name[64];

	if (freezer_holders++ || freezer_hold)
		return;
	/*
	 * '.': no sandbox id starts so, no box's group can be named so; the
	 * count: the last hold may still be being removed by its helper
	 */
	snprintf(name, sizeof(name), "%d-.freezer-hold-%u", (int)getpid(), ++made);
	cg_freezer_hold(&freezer_hold, name, &err);	/* no hold: slower, not wrong */
}

static void release_freezer(struct event_base *base)
{
	if (!freezer_holders || --freezer_holders)
		return;
	cg_destroy_async(base, &freezer_hold, 1);
	freezer_hold = NULL;
	/* nor is the mover left when no box is: the next move forks one */
	cg_mover_stop();
}

static int box_spawn(struct corral_box *b, struct corral_err *err)
{
	struct sandbox_opts so = {
		.base = b->base, .p = b->p, .ev = b->ev, .cg = b->cg,
		.stdio = { -1, -1, -1 }, .hooks = &box_hooks, .arg = b,
		.want_upper = b->p->workspace != NULL,	/* diff, export */
		.move_off_loop = true,
		.fd_shares = BOX_FD_SHARES,
	};

	return sandbox_spawn(&b->sb, &so, err);
}

/*
 * cgroup v1 counts an OOM kill in the victim's group alone: the box's
 * own OOM events say when its limit took a process of a lingering group
 * (call.c's lingering_oomed).  Where they cannot be had, the host's count
 * of kills does, less well; the kills before the box are none of its.
 */
static void box_watch_oom(struct corral_box *b)
{
	struct corral_err err;

	b->oom_efd = cg_oom_events_open(b->cg, &err);
	if (b->oom_efd < 0)
		oom_kills_host(&b->host_kills);
}

int corral_box_create(struct event_base *base, struct corral_policy *p,
		      const struct corral_box_opts *o, struct corral_box **out,
		      struct corral_err *err)
{
	struct corral_box *b;
	char name[96];
	int r;

	*out = NULL;
	err->code = 0;
	err->msg[0] = '\0';
	r = corral_check_sandbox_id(o->id, err);
	if (r == 0)
		r = sandbox_check_policy(p, err);
	b = r == 0 ? calloc(1, sizeof(*b)) : NULL;
	if (!b) {
		if (r == 0)
			r = corral_set_err(err, -ENOMEM, "out of memory for a sandbox");
		corral_policy_free(p);
		free(p);
		return r;
	}
	hold_freezer();		/* released by corral_box_destroy, on every path */
	b->base = base;
	b->p = p;
	b->o = *o;
	snprintf(b->id, sizeof(b->id), "%s", o->id);
	b->o.id = b->id;
	b->state = CORRAL_BOX_STARTING;
	b->starting_counted = true;
	boxes_starting++;
	b->t_created = b->t_mark = corral_now_ms();
	b->lowerfd = -1;
	b->oom_efd = -1;
	r = events_new(&b->ev, o->log ? o->log->log : NULL, b->id, err);
	if (r == 0)
		r = events_check_reach(b->ev, p, err);
	if (r < 0)
		goto fail;
	events_set_attributor(b->ev, box_attribute, b);
	events_set_limits(b->ev, &p->events);
	if (abort_any(&p->abort)) {
		b->abort = abort_new(&p->abort);
		if (!b->abort) {
			r = corral_set_err(err, -ENOMEM, "out of memory for "
					   "the abort criteria");
			goto fail;
		}
	}
	events_set_hook(b->ev, on_event, b);
	/* the daemon's pid in the name: a restart removes what a crash left */
	snprintf(name, sizeof(name), "%d-%s", (int)getpid(), b->id);
	r = cg_create(&b->cg, name, p, CG_V2_ID, err);
	if (r == 0 && cg_mode(b->cg) == CG_V1)
		box_watch_oom(b);
	if (r == 0)
		r = box_ws_open(b, err);
	if (r == 0)
		r = box_spawn(b, err);
	if (r < 0)
		goto fail;
	/* open_files: each process's hard RLIMIT_NOFILE here (0: none) */
	events_emit(b->ev, "sandbox.create", json_pack("{s:s, s:s, s:I}", "limits",
		    cg_mode_name(b->cg), "net", p->net == CORRAL_NET_PROXY ?
		    "proxy" : "none", "open_files", (json_int_t)b->sb->nofile));
	*out = b;
	return 0;
fail:
	corral_box_destroy(b);
	return r;
}

/*
 * What a destroyed box leaves to the kernel: its processes' end, its
 * init's exit (the namespaces' teardown takes milliseconds) and its
 * cgroups.  On the loop, before the answer, the tree is only stopped
 * (cg_kill_begin: cgroup.kill, or one write that freezes it); the SIGKILL
 * of each process, the thaw that lets them die and the groups' removal run
 * in a helper process (cg_destroy_async), and the loop reaps init when it
 * has exited.  Each of the kill's passes reads cgroup.procs in every group
 * of every hierarchy: made on the loop, a sandbox whose 900 calls each
 * left a process held every other request 0.5-1 s.
 */
struct reaper {
	pid_t pid;
	int pidfd;
	struct event *ev;
	/*
	 * The calls' groups first, the box's last.  Sized at the start for
	 * every call and lingerer the box has (bounded only by its pids
	 * limit): one that did not fit would be destroyed on the loop, where
	 * under a frozen box it waits its CG_EMPTY_WAIT_MS for nothing.
	 */
	struct cg **cgs;
	size_t ncgs, cap;
};

static struct reaper *reaper_new(const struct corral_box *b)
{
	struct reaper *r = calloc(1, sizeof(*r));
	size_t n = 2;	/* the box's group and the spare */

	for (const struct corral_call *c = b->calls; c; c = c->next)
		n++;
	for (const struct lingerer *l = b->lingering; l; l = l->next)
		n++;
	if (r)
		r->cgs = calloc(n, sizeof(*r->cgs));
	if (!r || !r->cgs) {
		free(r);
		return NULL;
	}
	r->cap = n;
	r->pidfd = -1;
	return r;
}

static void reap(struct reaper *r)
{
	if (r->pid > 0)
		waitpid(r->pid, NULL, 0);
	free(r->cgs);
	if (r->ev)
		event_free(r->ev);
	if (r->pidfd >= 0)
		close(r->pidfd);
	free(r);
}

static void on_reap(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	reap(arg);
}

static void reaper_add(struct reaper *r, struct cg **cg)
{
	if (!*cg)
		return;
	if (r->ncgs < r->cap)
		r->cgs[r->ncgs++] = *cg;
	else
		cg_destroy(*cg);	/* reaper_new counted them all: never */
	*cg = NULL;
}

void corral_box_destroy(struct corral_box *b)
{
	corral_box_destroy_for(b, NULL);
}

void corral_box_destroy_for(struct corral_box *b, const char *why)
{
	cleanup_close int pidfd = -1;
	struct reaper *r;
	bool started, left_frozen = false;
	pid_t pid;

	if (!b)
		return;
	if (b->snap)
		box_snap_cancel(b, -ESRCH, "the sandbox was destroyed before the "
				"snapshot was made");
	box_jobs_end(b);	/* its diffs and patches: killed, answered */
	started = b->state != CORRAL_BOX_STARTING;
	box_left_starting(b);
	/* a halt whose freeze had not completed is still recorded */
	if (b->freezing == BF_HALT) {
		b->freezing = BF_NONE;
		halt_record(b, false);
	}
	r = reaper_new(b);
	if (b->sb) {
		/*
		 * With a helper to finish the kill, only frozen here, init
		 * too: its SIGKILL is the helper's, with everyone's.  Before
		 * init hears of it: at EOF on its socket (sandbox_unwatch)
		 * init exits, as it would at a SIGKILL sent now, both faster
		 * than the freeze, and its namespace's teardown SIGKILLs
		 * whoever is not stopped yet.  Nothing would run either way,
		 * but what is left for the helper would be the kernel's draw.
		 */
		left_frozen = r && cg_kill_begin(b->cg, b->base) == 1;
		/* starting, init may not be in its groups yet: no freeze holds it */
		if (!left_frozen || !started)
			sandbox_kill(b->sb);
		if (!r)
			cg_kill_start(b->cg, b->base);	/* no memory: the walk here */
		sandbox_unwatch(b->sb);
	}
	drop_event(&b->ev_tick);
	drop_event(&b->ev_idle);
	drop_event(&b->ev_spare);
	drop_event(&b->ev_sweep);
	call_drop_spare(b);	/* its process dies with the pid namespace */
	if (left_frozen) {	/* thawed by the helper, once it has killed */
		box_meter(b);
		b->freezing = BF_NONE;
		b->frozen = false;
	} else if (b->frozen || b->freezing) {	/* the killed must run to die */
		struct corral_err err;

		box_set_thawed(b, &err);
		b->frozen = false;
	}
	b->state = CORRAL_BOX_DEAD;	/* nothing may arm a timer now */
	/* every call still running gets its end, and its caller an answer */
	snprintf(b->gone_why, sizeof(b->gone_why), "the sandbox was destroyed "
		 "while the call ran%s%.300s", why ? ": " : "", why ? why : "");
	b->gone = b->gone_why;
	for (struct corral_call *c = b->calls; c; ) {
		if (c->done) {
			c = c->next;
			continue;
		}
		call_finish(c);		/* on_done may free c */
		c = b->calls;
	}
	while (b->calls) {
		struct corral_call *c = b->calls;

		/* the caller holds no handle it may still use after destroy */
		c->done = true;
		if (r)
			reaper_add(r, &c->cg);
		corral_call_free(c);
	}
	for (struct lingerer *l = b->lingering; r && l; l = l->next)
		reaper_add(r, &l->cg);
	if (r)
		reaper_add(r, &b->spare);
	cg_destroy(b->spare);
	call_sweep_lingering(b, true);
	if (b->ev && started)
		events_emit(b->ev, "sandbox.destroy", NULL);
	pid = b->sb ? b->sb->pid : -1;
	pidfd = b->sb ? steal_fd(&b->sb->pidfd) : -1;
	sandbox_free(b->sb);
	box_ws_close(b);
	close_fd(&b->oom_efd);
	b->sb = NULL;
	if (b->ev)
		events_set_hook(b->ev, NULL, NULL);
	abort_free(b->abort);
	events_close(b->ev);
	if (r) {
		r->pid = pid;
		r->pidfd = steal_fd(&pidfd);
		reaper_add(r, &b->cg);
		/*
		 * Now, not once init has exited: a frozen init exits only
		 * after the helper's thaw.  The helper finds the groups
		 * still in use, kills, waits until they are empty, removes.
		 */
		cg_destroy_async(b->base, r->cgs, r->ncgs);
		r->ncgs = 0;
		if (r->pid > 0 && r->pidfd >= 0)
			r->ev = event_new(b->base, r->pidfd, EV_READ, on_reap, r);
		if (!r->ev || event_add(r->ev, NULL) < 0)
			reap(r);	/* no loop to wait on: here and now */
	} else {
		if (pid > 0)
			waitpid(pid, NULL, 0);
		cg_destroy(b->cg);
	}
	release_freezer(b->base);	/* every box made took its part */
	/* nothing of the calls' ends may have left a timer on b */
	drop_event(&b->ev_sweep);
	drop_event(&b->ev_spare);
	drop_event(&b->ev_idle);
	free(b->halt_text);
	json_decref(b->halt_evidence);
	corral_policy_free(b->p);
	free(b->p);
	free(b);
}
