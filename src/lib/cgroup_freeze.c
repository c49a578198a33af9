/*
 * cgroup_freeze.c - freezing and killing from an event loop.
 *
 * The kernel freezes a group in its own time: the request is one write,
 * then the tasks stop as they next reach the freezer (sleepers at once,
 * a busy task within a scheduler tick, a task in an uninterruptible wait
 * only when it leaves it).  The daemon runs every sandbox on one loop, so
 * it must not wait for that: it writes the request, looks once, and if
 * the group is not frozen yet a timer looks again (after 1, 2, 4, then
 * every 8 ms) until it is, or until CG_FREEZE_WAIT_MS, when the freeze is
 * undone.  A timer serves both managers: v1's freezer.state has no
 * notification, and for v2 the few looks cost less than an inotify fd a
 * group.  Thawing needs no wait: the kernel thaws in the write.
 *
 * Without cgroup.kill (v1, v2 before 5.14) a kill is: freeze, SIGKILL
 * every process (frozen, none can fork in between, so one pass reaches
 * all), thaw so that they can die, then a few passes for the ones still
 * exiting, on the same timer.
 *
 * Each pass reads cgroup.procs in every group of every hierarchy: for a
 * sandbox whose 900 calls each left a process (a group each) that is some
 * 9000 files, 0.5 s of the loop.  A teardown needs none of it on the loop:
 * cg_kill_begin only freezes (one write, the kernel freezes the subtree),
 * and cg_destroy_async's helper does the SIGKILLs, the thaw and the rounds.
 */
#include "cgroup_internal.h"

#include <event2/event.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define OP_FIRST_MS	1
#define OP_FREEZE_MS	8	/* between looks at a freeze, at most */
#define OP_ROUND_MS	128	/* between the rounds of a kill, at most */

struct cg_op {
	struct cg *cg;
	struct event *timer;
	bool kill;		/* else a freeze, with a done */
	bool killing;		/* kill: frozen and signalled, now the rounds */
	int rounds;
	unsigned delay_ms, max_ms;
	uint64_t deadline;
	cg_frozen_fn done;
	void *arg;
};

static void op_free(struct cg_op *op)
{
	if (op->cg->op == op)
		op->cg->op = NULL;
	event_free(op->timer);
	free(op);
}

void cg_op_cancel(struct cg *cg)
{
	if (cg->op)
		op_free(cg->op);
}

/* 0, or -ENOMEM when libevent could not take the timer. */
static int op_arm(struct cg_op *op)
{
	struct timeval tv = { 0, (long)op->delay_ms * 1000 };

	if (evtimer_add(op->timer, &tv) < 0)
		return -ENOMEM;
	if (op->delay_ms < op->max_ms)
		op->delay_ms *= 2;
	return 0;
}

static void on_op(evutil_socket_t fd, short what, void *arg);

static struct cg_op *op_new(struct cg *cg, struct event_base *base, bool kill,
			    unsigned wait_ms)
{
	struct cg_op *op = calloc(1, sizeof(*op));

	if (!op)
		return NULL;
	op->timer = evtimer_new(base, on_op, op);
	if (!op->timer) {
		free(op);
		return NULL;
	}
	op->cg = cg;
	op->kill = kill;
	op->delay_ms = OP_FIRST_MS;
	op->max_ms = OP_FREEZE_MS;
	op->deadline = corral_now_ms() + wait_ms;
	cg_op_cancel(cg);
	cg->op = op;
	return op;
}

/* ---- freezing ---------------------------------------------------------- */

static void freeze_step(struct cg_op *op)
{
	struct cg *cg = op->cg;
	struct corral_err err = { 0 };
	cg_frozen_fn done = op->done;
	void *arg = op->arg;
	int r;

	r = cg->ops->freeze_reached(cg, true, &err);
	if (r == 0 && corral_now_ms() < op->deadline) {
		if (op_arm(op) == 0)
			return;
		r = corral_set_err(&err, -ENOMEM, "cannot arm the timer that "
				   "watches the freeze of %s",
				   cg_hier_of(cg, C_FREEZER)->dir);
	}
	if (r == 0)
		r = cg_freeze_timeout(cg, true, CG_FREEZE_WAIT_MS, &err);
	else if (r < 0)
		cg->ops->freeze_request(cg, false, &(struct corral_err){ 0 });
	op_free(op);	/* done may free cg */
	done(arg, r < 0 ? r : 0, &err);
}

int cg_freeze_start(struct cg *cg, struct event_base *base, cg_frozen_fn done,
		    void *arg, struct corral_err *err)
{
	struct cg_op *op;
	int r;

	if (cg_mode(cg) == CG_NONE || !cg_hier_of(cg, C_FREEZER))
		return cg_no_freezer(cg, true, err);
	cg_op_cancel(cg);
	r = cg->ops->freeze_request(cg, true, err);
	if (r == 0)
		r = cg->ops->freeze_reached(cg, true, err);
	if (r > 0)
		return 1;
	if (r == 0) {
		op = op_new(cg, base, false, CG_FREEZE_WAIT_MS);
		if (op) {
			op->done = done;
			op->arg = arg;
			if (op_arm(op) == 0)
				return 0;
			op_free(op);
		}
		r = corral_set_err(err, -ENOMEM, "out of memory for the timer "
				   "that watches the freeze of %s",
				   cg_hier_of(cg, C_FREEZER)->dir);
	}
	/* do not leave it half frozen */
	cg->ops->freeze_request(cg, false, &(struct corral_err){ 0 });
	return r;
}

int cg_thaw(struct cg *cg, struct corral_err *err)
{
	int r;

	if (cg_mode(cg) == CG_NONE || !cg_hier_of(cg, C_FREEZER))
		return cg_no_freezer(cg, false, err);
	/* a kill under way ends thawed anyway: let it finish its rounds */
	if (cg->op && !cg->op->kill)
		cg_op_cancel(cg);
	r = cg->ops->freeze_request(cg, false, err);
	if (r == 0)
		r = cg->ops->freeze_reached(cg, false, err);
	if (r == 0)
		r = corral_set_err(err, -EIO, "cgroup %s is still frozen after "
				   "the thaw was written",
				   cg_hier_of(cg, C_FREEZER)->dir);
	return r < 0 ? r : 0;
}

/* ---- killing ------------------------------------------------------------- */

/* Frozen (or with no freezer to wait for): SIGKILL each, thaw, rounds. */
static void kill_pass(struct cg_op *op, bool frozen)
{
	struct cg *cg = op->cg;

	op->killing = true;
	op->rounds = 0;
	op->delay_ms = OP_FIRST_MS;
	op->max_ms = OP_ROUND_MS;	/* as cg_kill_rounds: 1 to 128 ms */
	cg_procs_all(cg, true);
	if (frozen)
		cg->ops->freeze_request(cg, false, &(struct corral_err){ 0 });
}

static void kill_step(struct cg_op *op)
{
	struct cg *cg = op->cg;
	struct corral_err err;
	int r;

	if (!op->killing) {
		r = cg->ops->freeze_reached(cg, true, &err);
		if (r == 0 && corral_now_ms() < op->deadline &&
		    op_arm(op) == 0)
			return;
		/* frozen, or not in time: kill now (then racing what forks) */
		kill_pass(op, true);
	} else if (cg_procs_all(cg, true) <= 0 ||
		   ++op->rounds >= CG_KILL_ROUNDS) {
		op_free(op);	/* empty, or all there is to do is done */
		return;
	}
	if (op_arm(op) < 0)
		op_free(op);	/* signalled; destroy's wait gets the rest */
}

static void on_op(evutil_socket_t fd, short what, void *arg)
{
	struct cg_op *op = arg;

	(void)fd;
	(void)what;
	if (op->kill)
		kill_step(op);
	else
		freeze_step(op);
}

/*
 * What every kill tries first: 1 when the rounds of SIGKILLs are still
 * to do (no cgroup.kill here), else what to return (the kernel's
 * cgroup.kill did it all, no group, or no cgroups at all).
 */
int cg_kill_by_kernel(struct cg *cg)
{
	int r;

	if (cg_mode(cg) == CG_NONE)
		return -ENOTSUP;
	if (!cg->hier[0].dir)
		return 0;
	r = cg->ops->kill(cg);
	return r == -EOPNOTSUPP ? 1 : r;
}

int cg_kill_start(struct cg *cg, struct event_base *base)
{
	struct corral_err err;
	bool freezer;
	struct cg_op *op;
	int r;

	r = cg_kill_by_kernel(cg);
	if (r != 1)
		return r;
	if (cg_procs_all(cg, false) <= 0)
		return 0;
	op = op_new(cg, base, true, CG_KILL_FREEZE_MS);
	if (!op)
		return cg_kill_rounds(cg);	/* no timer: the waiting way */
	freezer = cg_hier_of(cg, C_FREEZER) != NULL;
	r = freezer ? cg->ops->freeze_request(cg, true, &err) : -ENOTSUP;
	if (r == 0)
		r = cg->ops->freeze_reached(cg, true, &err);
	/* frozen already (a halt), or no freezer to wait for: kill now */
	if (r != 0)
		kill_pass(op, freezer);
	if (op_arm(op) < 0) {
		op_free(op);
		return r != 0 ? 0 : cg_kill_rounds(cg);	/* the waiting way */
	}
	return 0;
}

int cg_kill_begin(struct cg *cg, struct event_base *base)
{
	struct corral_err err;
	int r;

	if (cg_mode(cg) == CG_NONE)
		return -ENOTSUP;
	if (!cg->hier[0].dir)
		return 0;
	cg_op_cancel(cg);	/* a freeze under way: its done is not called */
	r = cg->ops->kill(cg);
	if (r != -EOPNOTSUPP)
		return r < 0 ? r : 0;	/* the kernel's cgroup.kill did it all */
	/*
	 * v1 freezes a group's descendants in the write itself (each task
	 * stops at its next return to user space): one write stops the box
	 * and every call's group below it, however many, with no walk here.
	 * Frozen, a task keeps a SIGKILL pending until the thaw (one sent
	 * before it stopped is not held: it dies then): the helper's kill
	 * sends them and thaws, and nothing can fork before it.
	 */
	if (cg_hier_of(cg, C_FREEZER) &&
	    cg->ops->freeze_request(cg, true, &err) == 0)
		return 1;
	/* no freezer (or it failed): SIGKILL each here, before the answer */
	r = cg_kill_start(cg, base);
	return r < 0 ? r : 0;
}
