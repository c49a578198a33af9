/*
 * cgroup_reap.c - killing and removing groups without holding the event loop.
 *
 * Removing a sandbox's groups is kernel work that waits: the kill rounds
 * of v1 (freeze, SIGKILL each, thaw, again for the stragglers; each a read
 * of cgroup.procs in every group of every hierarchy), the wait
 * until the last task has left, an rmdir per group and hierarchy, each
 * under the kernel's cgroup mutex that every other sandbox on the host
 * contends for.  The daemon serves every sandbox from one loop, so that
 * work runs in a helper process, forked for the purpose, and the loop
 * hears of its end through the helper's pidfd.
 *
 * A process, not a thread: the daemon starts each sandbox with a raw
 * clone(), which runs no atfork handler, and the child goes on to use
 * malloc and stdio.  A thread of ours inside either at that moment would
 * leave the lock taken, in the child, for ever.  A forked helper has its
 * own copy of everything and shares no lock with the daemon.
 */
#include "cgroup_internal.h"

#include <event2/event.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

struct reap_job {
	struct cg **cgs;
	size_t n;
	pid_t pid;
	int pidfd;
	struct event *ev;
};

/* The handle only: the kernel's side is the helper's (or gone). */
static void cg_forget(struct cg *cg)
{
	if (!cg)
		return;
	cg_op_cancel(cg);
	cg_free_hiers(cg);
	free(cg);
}

static void job_free(struct reap_job *j)
{
	for (size_t i = 0; i < j->n; i++)
		cg_forget(j->cgs[i]);
	if (j->ev)
		event_free(j->ev);
	if (j->pidfd >= 0)
		close(j->pidfd);
	free(j->cgs);
	free(j);
}

static void destroy_all(struct cg **cgs, size_t n);

/*
 * The helper is gone: reaped, and if it was killed (the OOM killer, a
 * person) a box's tree may still be FROZEN, its init too, which the loop
 * waits on, and nothing else would ever kill them.  Here and now, then:
 * slow, but rare.
 */
static void helper_reaped(struct reap_job *j)
{
	int st = 0;

	while (waitpid(j->pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		destroy_all(j->cgs, j->n);
		j->n = 0;
	}
	job_free(j);
}

static void on_helper_exit(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	helper_reaped(arg);
}

/*
 * Killed first, the last first: the box's group, listed after its calls'
 * groups, holds them, so its kill reaches every process and its thaw lets
 * a tree cg_kill_begin froze die.  Then each cg_destroy finds its group
 * empty, one rmdir a hierarchy; its own kill (freeze, SIGKILL, thaw) would
 * not do for a call's group while the box's above it is still FROZEN: the
 * tasks stay frozen, and each group would wait out CG_EMPTY_WAIT_MS.
 */
static void destroy_all(struct cg **cgs, size_t n)
{
	for (size_t i = n; i-- > 0;) {
		/* one hierarchy read a group; the kill reads them all */
		if (cgs[i] && cg_nprocs(cgs[i]) != 0)
			cg_kill(cgs[i]);
	}
	for (size_t i = 0; i < n; i++)
		cg_destroy(cgs[i]);
}

/* In the helper: nothing of the daemon's loop, its signals or its exit. */
static __attribute__((noreturn)) void helper(struct reap_job *j)
{
	/* told apart from the daemon in ps and top (its comm; the cmdline is the daemon's) */
	prctl(PR_SET_NAME, "corral-reap", 0, 0, 0);
	/*
	 * libevent's handlers would write into the daemon's signal pipe; and
	 * a ^C to the terminal's group must not cut the removal short (it
	 * is bounded: cg_destroy's waits), or the groups would be left
	 */
	cg_helper_signals();
	/* nor the sandboxes' sockets: an init hears of the daemon's end by EOF */
	syscall(SYS_close_range, 3, ~0U, 0);
	/*
	 * tests/serve.sh t_teardown_off_loop holds the kill and the removal:
	 * a box's tree stays FROZEN (cg_kill_begin) until the byte comes
	 */
	cg_hold_for_test("CORRAL_TEST_REAP_FIFO");
	destroy_all(j->cgs, j->n);
	_exit(0);
}

void cg_destroy_async(struct event_base *base, struct cg **cgs, size_t n)
{
	struct reap_job *j = calloc(1, sizeof(*j));
	size_t i;

	if (j)
		j->cgs = calloc(n ? n : 1, sizeof(*j->cgs));
	if (!j || !j->cgs || !base) {
		free(j ? j->cgs : NULL);
		free(j);
		destroy_all(cgs, n);	/* no memory: here and now */
		return;
	}
	j->pidfd = -1;
	for (i = 0; i < n; i++) {
		if (!cgs[i])
			continue;
		/* the loop's timers are the loop's: none may fire on a forgotten handle */
		cg_op_cancel(cgs[i]);
		/*
		 * Nor its counters' fds, closed here: the helper's close_range
		 * would leave their numbers to files it opens, which its
		 * cg_destroy would then close; and cg_forget would leak them.
		 */
		cg_drop_counters(cgs[i]);
		j->cgs[j->n++] = cgs[i];
	}
	for (i = 0; i < j->n && cg_mode(j->cgs[i]) == CG_NONE; i++)
		;
	if (i == j->n) {	/* rlimits only: nothing of the kernel's to remove */
		destroy_all(j->cgs, j->n);
		j->n = 0;
		job_free(j);
		return;
	}
	j->pid = fork();
	if (j->pid == 0)
		helper(j);
	if (j->pid > 0)
		j->pidfd = (int)syscall(SYS_pidfd_open, j->pid, 0);
	if (j->pidfd >= 0)
		j->ev = event_new(base, j->pidfd, EV_READ, on_helper_exit, j);
	if (j->ev && event_add(j->ev, NULL) == 0)
		return;
	if (j->pid > 0) {
		/* forked, but the loop cannot watch it: wait for it here */
		helper_reaped(j);
		return;
	}
	destroy_all(j->cgs, j->n);	/* no fork: here and now */
	j->n = 0;
	job_free(j);
}

/*
 * In the helper: a halt's kill, the group's handle the fork's copy.  No
 * freeze: the caller has sent init its SIGKILL, and init's death takes
 * every process of its pid namespace with it (which gives no new pids
 * from then on), so a fork between two rounds escapes neither.
 * Were there a freeze here, this helper killed before its thaw (the OOM
 * killer, a person) would leave the tree frozen for the loop to find.
 * No removal: a halted box keeps its groups until it is destroyed.
 */
static __attribute__((noreturn)) void kill_helper(struct cg *cg)
{
	unsigned delay = 1;

	prctl(PR_SET_NAME, "corral-kill", 0, 0, 0);
	cg_helper_signals();
	syscall(SYS_close_range, 3, ~0U, 0);
	for (int round = 0; round < CG_KILL_ROUNDS; round++) {
		if (cg_procs_all(cg, true) <= 0)
			_exit(0);
		cg_sleep_ms(delay);
		delay *= 2;
	}
	_exit(cg_procs_all(cg, false) > 0 ? 1 : 0);
}

/*
 * A halt's kill whose walks the sandbox sizes: without cgroup.kill each
 * round reads cgroup.procs in every group of every hierarchy, and a
 * sandbox makes a group a call that leaves a process (up to its pids
 * limit); a halt is what its own abort criteria make of what it does.
 * 1000 such groups held every other sandbox's exec 0.5-1.3 s on the loop.
 * The caller has sent init its SIGKILL (sandbox_kill) first.
 */
int cg_kill_async(struct cg *cg, struct event_base *base)
{
	struct reap_job *j;
	int r;

	r = cg_kill_by_kernel(cg);
	if (r != 1)
		return r;
	j = base ? calloc(1, sizeof(*j)) : NULL;
	if (!j)
		return cg_kill_start(cg, base);	/* the loop's way */
	j->pidfd = -1;
	/* a freeze under way is the loop's: it must not fire on the copy */
	cg_op_cancel(cg);
	j->pid = fork();
	if (j->pid == 0)
		kill_helper(cg);
	if (j->pid > 0)
		j->pidfd = (int)syscall(SYS_pidfd_open, j->pid, 0);
	if (j->pidfd >= 0)
		j->ev = event_new(base, j->pidfd, EV_READ, on_helper_exit, j);
	if (j->ev && event_add(j->ev, NULL) == 0)
		return 0;
	if (j->pid > 0) {
		helper_reaped(j);	/* forked, not watched: wait for it here */
		return 0;
	}
	job_free(j);
	return cg_kill_start(cg, base);	/* no fork: the loop's way */
}
