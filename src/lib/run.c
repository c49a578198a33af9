/*
 * run.c - corral_run: one command in a fresh sandbox, and how it ended.
 *
 * The one-shot front end over sandbox_spawn() (sandbox.c): it makes the
 * cgroup, the command's stdio (pipes it relays to the caller's 0-2 or
 * captures, or a pty made inside: stdrelay.c) and the event loop, spawns,
 * then supervises until the command is gone and its output read: budgets,
 * the timeout, signals to forward, the abort criteria.  It explains the
 * end in a corral_result.
 */
#include "internal.h"
#include "sandbox.h"
#include "events.h"
#include "abort.h"
#include "export.h"
#include "stdrelay.h"
#include "outkeep.h"

#include <event2/event.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define DRAIN_MS 2000	/* how long output may stall after the end */
#define COMMAND_PIPE_SIZE (1 << 20)

struct supervise;
static void kill_tree(struct supervise *s);

struct capture {
	int fd;
	struct corral_output *out;
	struct outkeep keep;
	struct event *ev;
	struct supervise *s;
};

struct supervise {
	struct event_base *base;
	struct sandbox *sb;
	struct cg *cg;
	int sigfd;
	int export_stop;	/* the signal that ended the export */
	struct capture out, err;
	struct event *ev_sig, *ev_deadline, *ev_drain;
	struct event *ev_judged;	/* after the end: until the last verdict */
	uint64_t timeout_ms;
	bool timed_out;
	bool exited;
	struct child_msg setup;	/* MSG_SETUP_FAILED / MSG_EXEC_FAILED, if any */
	/* init said READY, and not MSG_NOT_STARTED: the command may have run */
	bool ready;
	int setup_signal;	/* a signal to stop that came before the command */
	int forwarded;		/* the last of the caller's signals passed on */
	bool have_status;
	int status;		/* the command's wait status */
	struct events *ev;
	const struct corral_policy *p;
	uint64_t t0;
	struct abort_state *abort;
	struct event *ev_usage;	/* CPU and wall budgets, polled */
	bool halted;		/* an abort criterion was met */
	bool halt_killed;
	bool halt_held;		/* on_abort "freeze": held until timeout/signal */
	bool halt_frozen;
	bool halt_late;		/* met once the command had ended: nothing to stop */
	char halt_reason[CORRAL_ERR_MAX];
	struct stdrelay *relay;	/* the caller's 0-2 <-> the command's pipes or pty */
	bool tty;
	int master;		/* with tty: the pty's master, from init */
	int winfd;		/* the caller's terminal whose size the pty follows */
	bool raw;		/* the caller's stdin, a terminal, made raw */
	struct termios saved;	/* its settings before */
	int null[3];		/* /dev/null on a caller's fd that was closed */
	int held[3];		/* an O_PATH fd that held its number, set aside */
};

static void drop_event(struct event **ev)
{
	if (*ev)
		event_free(*ev);
	*ev = NULL;
}

/*
 * Done when the command is gone, every pipe from the sandbox is closed,
 * the output is all relayed and the connections the sandbox made before
 * it ended (taken from the backlogs by proxy_drain) each have their
 * verdict, recorded and counted: within DRAIN_MS in any case.
 */
static void maybe_done(struct supervise *s)
{
	if (s->exited && s->sb->ctl < 0 && s->out.fd < 0 && s->err.fd < 0 &&
	    stdrelay_done(s->relay) && !sandbox_egress_judging(s->sb))
		event_base_loopbreak(s->base);
}

/*
 * A connection's verdict comes from its bufferevent's callbacks, which
 * tell no one: after the end, look again every JUDGED_POLL_MS.  The
 * sandbox is gone, so nothing new comes: each waits only for bytes
 * already in its socket, or for its end.
 */
#define JUDGED_POLL_MS	10

static void on_judged_poll(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	maybe_done(arg);
}

/* Output still moving after the end: the drain's deadline moves with it. */
static void on_relay(void *arg)
{
	struct supervise *s = arg;
	struct timeval drain = { DRAIN_MS / 1000, (DRAIN_MS % 1000) * 1000 };

	if (s->ev_drain)
		evtimer_add(s->ev_drain, &drain);
	maybe_done(s);
}

/*
 * The pty's master, from init: relayed both ways to the caller's 0 and 1.
 * Init set its first size; SIGWINCH brings the next ones (on_signal).
 */
static void take_master(struct supervise *s)
{
	int fl;

	if (s->master >= 0 || s->sb->ptyfd < 0)
		return;
	s->master = steal_fd(&s->sb->ptyfd);
	fl = fcntl(s->master, F_GETFL);
	if (fl < 0 || fcntl(s->master, F_SETFL, fl | O_NONBLOCK) < 0 ||
	    stdrelay_add(s->relay, s->master, false, 1, false, true) < 0 ||
	    stdrelay_add_tty_input(s->relay, 0, s->master) < 0) {
		/* no terminal to give: the command is not left without one */
		events_emit(s->ev, "error", json_pack("{s:s}", "reason",
			    "cannot relay the sandbox's pty"));
		kill_tree(s);
	}
}

/* Keep the head and the tail; read all the rest, so the writer never blocks. */
static void on_capture(evutil_socket_t fd, short what, void *arg)
{
	struct capture *cp = arg;
	char buf[65536];
	ssize_t n = read(fd, buf, sizeof(buf));

	(void)what;
	if (n <= 0) {
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			return;
		drop_event(&cp->ev);
		close(cp->fd);
		cp->fd = -1;
		maybe_done(cp->s);
		return;
	}
	outkeep_add(&cp->keep, cp->out, buf, n);
}

/* init's news; the fds it sends and the tripwires are sandbox.c's */
static void on_msg(void *arg, const struct child_msg *m)
{
	struct supervise *s = arg;

	switch (m->kind) {
	case MSG_SETUP_FAILED:
	case MSG_EXEC_FAILED:
		s->setup = *m;
		break;
	case MSG_EXITED:
		s->have_status = true;
		s->status = m->code;
		break;
	case MSG_PTY_FD:
		take_master(s);
		break;
	case MSG_READY:
		s->ready = true;
		break;
	case MSG_NOT_STARTED:	/* a signal forwarded after READY stopped it */
		s->setup_signal = m->code;
		s->ready = false;
		break;
	}
}

static void on_closed(void *arg)
{
	maybe_done(arg);
}

static void kill_tree(struct supervise *s)
{
	sandbox_kill(s->sb);	/* NULL while it is still being spawned */
	cg_kill(s->cg);
}

/*
 * The policy's decision, carried out: freeze first (nothing runs, the
 * evidence stays), record, then kill or hold frozen as the policy says.
 */
static void halt(struct supervise *s, struct abort_verdict *v)
{
	struct corral_err err;
	bool kill_now = s->p->abort.kill;

	s->halted = true;
	snprintf(s->halt_reason, sizeof(s->halt_reason), "%s", v->reason);
	/*
	 * What the command did last can be read after it ended (a loaded
	 * host, the queues drained at the end): the criterion still halts
	 * the run, but there is nothing left to freeze or kill, and saying
	 * so would hide how the command itself ended.
	 */
	s->halt_late = s->have_status || s->exited || sandbox_gone(s->sb);
	if (!s->halt_late)
		s->halt_frozen = cg_freeze(s->cg, true, &err) == 0;
	/* its writes from before the freeze go no further */
	sandbox_halt_egress(s->sb);
	events_emit(s->ev, "abort", json_pack("{s:s, s:s, s:o, s:s, s:b}",
		    "criterion", v->criterion, "reason", v->reason,
		    "evidence", v->evidence ? v->evidence : json_null(),
		    "on_abort", kill_now ? "kill" : "freeze",
		    "frozen", s->halt_frozen));
	v->evidence = NULL;
	/* Without a freezer there is nothing to hold: it is killed. */
	if (s->halt_late) {
		/* init may linger a moment: the kill makes sure, it costs nothing */
		kill_tree(s);
	} else if (kill_now || !s->halt_frozen) {
		s->halt_killed = true;
		kill_tree(s);
	} else {
		s->halt_held = true;
	}
	events_emit(s->ev, "halt", json_pack("{s:s, s:s}", "reason", v->reason,
		    "state", s->halt_late ? "the command had already ended" :
		    s->halt_killed ? "killed" : "frozen, held until the "
		    "timeout or a signal to corral"));
}

static void on_event(void *arg, const char *type, json_t *event)
{
	struct supervise *s = arg;
	struct abort_verdict v = { 0 };

	if (!s->halted && abort_note(s->abort, type, event, &v))
		halt(s, &v);
}

static void on_usage(evutil_socket_t fd, short what, void *arg)
{
	struct supervise *s = arg;
	struct abort_verdict v = { 0 };
	uint64_t cpu_ns = 0;
	bool counted;

	(void)fd;
	(void)what;
	if (s->halted || s->exited)
		return;
	/* without a cgroup that counts it, from /proc (proctree.c) */
	counted = s->p->abort.max_cpu_ms && cg_cpu_ns(s->cg, s->sb->pid, &cpu_ns) == 0;
	if (abort_check_usage(s->abort, corral_now_ms() - s->t0, cpu_ns / 1000000,
			      counted, &v))
		halt(s, &v);
}

static void on_drain_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct supervise *s = arg;

	(void)fd;
	(void)what;
	event_base_loopbreak(s->base);
}

static void on_exited(void *arg)
{
	struct supervise *s = arg;
	struct timeval drain = { DRAIN_MS / 1000, (DRAIN_MS % 1000) * 1000 };

	s->exited = true;
	drop_event(&s->ev_deadline);
	drop_event(&s->ev_sig);
	/* Output still in the pipes is read, but not forever. */
	s->ev_drain = evtimer_new(s->base, on_drain_timeout, s);
	if (!s->ev_drain || evtimer_add(s->ev_drain, &drain) < 0)
		event_base_loopbreak(s->base);
	if (sandbox_egress_judging(s->sb)) {
		struct timeval poll = { 0, JUDGED_POLL_MS * 1000 };

		s->ev_judged = event_new(s->base, -1, EV_PERSIST, on_judged_poll, s);
		if (s->ev_judged)
			evtimer_add(s->ev_judged, &poll);
	}
	maybe_done(s);
}

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct supervise *s = arg;

	(void)fd;
	(void)what;
	if (s->halted) {	/* held frozen until now */
		s->halt_killed = true;
		kill_tree(s);
		return;
	}
	s->timed_out = true;
	events_emit(s->ev, "timeout", json_pack("{s:I, s:s}", "limit_ms",
		    (json_int_t)s->timeout_ms, "reason", "the run's wall-clock "
		    "timeout was reached: everything in the sandbox is killed"));
	kill_tree(s);
}

/*
 * SIGTSTP with a tty (block_signals): ^Z on a raw terminal is a byte for
 * the pty, so this one came from elsewhere (kill -TSTP): corral stops as
 * the caller has it, its terminal cooked meanwhile, and raw again after.
 */
static void stop_as_asked(struct supervise *s)
{
	if (corral_term_stop(s->raw ? 0 : -1, &s->saved) < 0)
		s->raw = false;
}

static void on_signal(evutil_socket_t fd, short what, void *arg)
{
	struct supervise *s = arg;
	struct signalfd_siginfo si;

	(void)what;
	if (read(fd, &si, sizeof(si)) != sizeof(si))
		return;
	if (si.ssi_signo == SIGTSTP) {
		stop_as_asked(s);
		return;
	}
	if (si.ssi_signo == SIGWINCH) {	/* the caller's window, to the pty */
		struct winsize ws;

		corral_term_winsize(s->winfd, &ws);
		if (s->master >= 0 && ws.ws_row)
			ioctl(s->master, TIOCSWINSZ, &ws);
		return;
	}
	/*
	 * Init sends READY before it starts the command, and cannot start it
	 * without (send_msg): until we have read it, nothing of the command's
	 * has run, and killing init keeps it so, however long its setup
	 * would still take.  After READY the signal is forwarded; init looks
	 * for one once more before it starts the command (stop_if_signaled).
	 */
	if (!s->ready) {
		if (!s->setup_signal)
			s->setup_signal = si.ssi_signo;
		kill_tree(s);
		return;
	}
	if (s->halted) {	/* a person ends the hold */
		s->halt_killed = true;
		kill_tree(s);
		return;
	}
	/* the command's end may be the caller's doing: the record says so */
	if (kill(s->sb->pid, si.ssi_signo) == 0) {
		s->forwarded = (int)si.ssi_signo;
		events_emit(s->ev, "signal.forwarded", json_pack("{s:i, s:s, s:i}",
			    "signal", (int)si.ssi_signo, "name",
			    sigabbrev_np(si.ssi_signo) ?: "?", "from_pid",
			    (int)si.ssi_pid));
	}
}

/*
 * A signal to corral once the command has ended, while what it made goes
 * out (a 1 GiB patch takes a while): it ends the export, which leaves
 * what it wrote whole, rather than wait for it or kill corral midway.
 * SIGWINCH is only the terminal's size.
 */
static int export_stop(void *arg)
{
	struct supervise *s = arg;
	struct signalfd_siginfo si;

	while (!s->export_stop && s->sigfd >= 0 &&
	       read(s->sigfd, &si, sizeof(si)) == sizeof(si))
		if (si.ssi_signo == SIGTSTP)
			stop_as_asked(s);	/* a pause, not the export's end */
		else if (si.ssi_signo != SIGWINCH)
			s->export_stop = (int)si.ssi_signo;
	return s->export_stop;
}

/*
 * A signal to stop that came while the sandbox was being set up, before
 * any of it was spawned; read off sigfd, so it is not forwarded again.
 */
static int setup_signaled(int sigfd)
{
	struct signalfd_siginfo si;

	while (sigfd >= 0 && read(sigfd, &si, sizeof(si)) == sizeof(si))
		if (si.ssi_signo == SIGTSTP)
			corral_term_stop(-1, NULL);	/* not raw yet: a pause */
		else if (si.ssi_signo != SIGWINCH)
			return si.ssi_signo;
	return 0;
}

static int add_fd_event(struct supervise *s, struct event **ev, int fd,
			event_callback_fn cb, void *arg, struct corral_err *err)
{
	if (fd < 0)
		return 0;
	*ev = event_new(s->base, fd, EV_READ | EV_PERSIST, cb, arg);
	if (!*ev || event_add(*ev, NULL) < 0)
		return corral_set_err(err, -ENOMEM, "cannot watch the sandbox's fds");
	return 0;
}

static int supervise_start(struct supervise *s, struct corral_err *err)
{
	int r;

	r = add_fd_event(s, &s->out.ev, s->out.fd, on_capture, &s->out, err);
	if (r == 0)
		r = add_fd_event(s, &s->err.ev, s->err.fd, on_capture, &s->err, err);
	if (r == 0)
		r = add_fd_event(s, &s->ev_sig, s->sigfd, on_signal, s, err);
	if (r == 0 && (s->p->abort.max_cpu_ms || s->p->abort.max_wall_ms)) {
		s->ev_usage = event_new(s->base, -1, EV_PERSIST, on_usage, s);
		struct timeval tick = { 0, 250 * 1000 };

		if (!s->ev_usage || event_add(s->ev_usage, &tick) < 0)
			r = corral_set_err(err, -ENOMEM, "cannot watch the budgets");
	}
	if (r == 0 && s->timeout_ms) {
		struct timeval tv = { s->timeout_ms / 1000, (s->timeout_ms % 1000) * 1000 };

		s->ev_deadline = evtimer_new(s->base, on_deadline, s);
		if (!s->ev_deadline || evtimer_add(s->ev_deadline, &tv) < 0)
			r = corral_set_err(err, -ENOMEM, "cannot arm the timeout");
	}
	return r;
}

static void supervise_stop(struct supervise *s)
{
	drop_event(&s->ev_sig);
	drop_event(&s->ev_deadline);
	drop_event(&s->ev_drain);
	drop_event(&s->ev_judged);
	drop_event(&s->ev_usage);
	drop_event(&s->out.ev);
	drop_event(&s->err.ev);
}

static void describe(struct corral_result *res, const struct supervise *s,
		     const struct corral_policy *p, const struct cg_stats *st,
		     const char *cmd)
{
	int status = s->status;

	if (s->setup_signal && !s->ready) {
		result_not_started(res, s->setup_signal);
		return;
	}
	/* READY was on its way: the command may have run, and was killed */
	if (s->setup_signal) {
		result_from_wait(res, W_EXITCODE(0, s->setup_signal));
		return;
	}
	if (s->halted && s->halt_late && s->have_status) {
		result_halted_after_end(res, status, s->halt_reason,
					"the criterion was met once ");
	} else if (s->halted) {
		res->status = CORRAL_HALTED;
		res->signal = SIGKILL;
		snprintf(res->reason, sizeof(res->reason), "halted: %.300s; %s", s->halt_reason,
			 s->halt_late ? "the sandbox had already ended" :
			 s->halt_frozen ? (s->halt_held ?
			 "the sandbox was held frozen, then killed" :
			 "the sandbox was frozen, then killed") :
			 "the sandbox was killed (no freezer to hold it)");
	} else if (s->timed_out) {
		result_timeout(res, p->timeout_ms);
	} else if (s->setup.kind == MSG_EXEC_FAILED) {
		result_exec_failed(res, cmd, s->setup.code);
		return;
	} else {
		if (!s->have_status)	/* PID 1 itself died: only a kill does that */
			status = W_EXITCODE(0, SIGKILL);
		result_from_wait(res, status);
		if (res->status == CORRAL_SIGNALED && res->signal == s->forwarded) {
			res->kill_said = true;
			snprintf(res->reason + strlen(res->reason), sizeof(res->reason) -
				 strlen(res->reason), "; corral's caller sent it, and "
				 "corral passed it on to the command");
		}
	}
	/* whatever ended it, each limit that bit is said (OOM, pids, CPU) */
	result_limits(res, p, st);
}

static const struct sandbox_hooks run_hooks = {
	.msg = on_msg,
	.closed = on_closed,
	.exited = on_exited,
};

/*
 * One of the command's pipes: its end (blocking, as programs expect) goes
 * into the sandbox through child[i], ours is non-blocking.  fd 0's pipe
 * is read inside, the others are written inside.
 */
static int command_pipe(int i, int child[3], int *ours, struct corral_err *err)
{
	static const char *const names[] = { "stdin", "stdout", "stderr" };
	int p[2];

	if (pipe2(p, O_CLOEXEC) < 0)
		return corral_set_err(err, -errno, "cannot make the %s pipe: %s",
				      names[i], strerror(errno));
	child[i] = p[i == 0 ? 0 : 1];
	*ours = p[i == 0 ? 1 : 0];
	/* fewer trips through the relay; a smaller pipe is only slower */
	fcntl(*ours, F_SETPIPE_SZ, COMMAND_PIPE_SIZE);
	/* a new pipe's only status flag is its access mode, which F_SETFL keeps */
	if (fcntl(*ours, F_SETFL, O_NONBLOCK) < 0)
		return corral_set_err(err, -errno, "cannot make the %s pipe "
				      "non-blocking: %s", names[i], strerror(errno));
	return 0;
}

/*
 * Relay the caller's stdin, unless it is the terminal of a job in the
 * background: reading it would stop corral (SIGTTIN) for a command that
 * may never read; the command gets EOF instead.
 */
static bool relay_stdin(void)
{
	pid_t fg = isatty(0) ? tcgetpgrp(0) : -1;

	return fg <= 0 || fg == getpgrp();
}

/*
 * The command's stdio: never the caller's fds (what an fd reaches, the
 * sandbox would reach: the caller's terminal, the host file behind a
 * redirection, a directory's parent).  Pipes relayed to the caller's 0-2,
 * or captured (--json); with tty, a pty init makes (take_master).
 */
static int stdio_setup(struct supervise *s, const struct corral_run_opts *o,
		       struct corral_result *res, int child[3],
		       struct corral_err *err)
{
	int in = -1, r;

	s->relay = stdrelay_new(s->base, on_relay, s);
	if (!s->relay)
		return corral_set_err(err, -ENOMEM, "out of memory for the stdio relay");
	if (o->tty)
		return 0;
	r = command_pipe(0, child, &in, err);
	if (r < 0)
		return r;
	if (!relay_stdin())
		close(in);	/* EOF inside */
	else if (stdrelay_add(s->relay, 0, false, in, true, false) < 0)
		return corral_set_err(err, -ENOMEM, "cannot relay stdin");
	r = command_pipe(1, child, &s->out.fd, err);
	if (r == 0)
		r = command_pipe(2, child, &s->err.fd, err);
	if (r < 0 || o->capture) {
		s->out.out = &res->out;
		s->err.out = &res->err;
		return r;
	}
	/* relayed, not captured: the streams own the pipes now */
	if (stdrelay_add(s->relay, steal_fd(&s->out.fd), true, 1, false, true) < 0 ||
	    stdrelay_add(s->relay, steal_fd(&s->err.fd), true, 2, false, true) < 0)
		return corral_set_err(err, -ENOMEM, "cannot relay stdout and stderr");
	return 0;
}

/*
 * A caller's fd 0-2 that is closed is /dev/null for the run: a pipe made
 * now must not take its number and be mistaken for the caller's.  So is
 * one that is an O_PATH fd (no read, no write: the CLI holds a closed
 * number so, from its start); that one is set aside and put back after.
 */
static void hold_closed_stdio(int null[3], int held[3])
{
	for (int i = 0; i < 3; i++) {
		int fl = fcntl(i, F_GETFL);

		null[i] = held[i] = -1;
		if (fl >= 0 && (fl & O_PATH)) {
			held[i] = fcntl(i, F_DUPFD_CLOEXEC, 3);
			if (held[i] < 0)
				continue;
			null[i] = open("/dev/null", O_RDWR | O_CLOEXEC);
			if (null[i] < 0 || dup3(null[i], i, O_CLOEXEC) < 0) {
				cleanup_closep(&null[i]);
				cleanup_closep(&held[i]);
				continue;
			}
			close(null[i]);
			null[i] = i;
			continue;
		}
		if (fl >= 0 || errno != EBADF)
			continue;
		null[i] = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (null[i] >= 0 && null[i] != i)
			cleanup_closep(&null[i]);
	}
}

/*
 * SIGPIPE is blocked while the relay runs: a reader gone outside is EPIPE
 * on one stream, not the end of corral (unblock_signals discards it).
 * The signals to forward, and SIGWINCH and SIGTSTP with a tty, are read
 * from sigfd; with a tty those to forward are forwarded whatever the
 * caller asked, so that no SIGINT, SIGTERM or SIGHUP ends corral with the
 * caller's terminal raw, nor SIGTSTP stops it so (stop_as_asked); one the
 * caller ignores, which cannot end it either, is left alone.
 */
static int block_signals(bool forward, bool tty, sigset_t *old, int *sigfd,
			 struct corral_err *err)
{
	static const int stops[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
	sigset_t set, pipe;

	*sigfd = -1;
	sigemptyset(&pipe);
	sigaddset(&pipe, SIGPIPE);
	if (sigprocmask(SIG_BLOCK, &pipe, old) < 0)
		return corral_set_err(err, -errno, "sigprocmask: %s", strerror(errno));
	if (!forward && !tty)
		return 0;
	sigemptyset(&set);
	/*
	 * With a raw terminal, corral must not die of them: they are
	 * forwarded.  One the caller ignores is not: nohup's SIGHUP, a
	 * script's `corral run ... &` with SIGINT and SIGQUIT ignored.  A
	 * blocked signal is queued even when ignored, so read off sigfd it
	 * killed the command the caller had meant to keep out of it.
	 */
	for (size_t i = 0; i < sizeof(stops) / sizeof(stops[0]); i++) {
		struct sigaction sa;

		if (sigaction(stops[i], NULL, &sa) < 0) {
			int e = errno;

			sigprocmask(SIG_SETMASK, old, NULL);
			return corral_set_errno(err, e, "sigaction %d", stops[i]);
		}
		if (sa.sa_handler != SIG_IGN)
			sigaddset(&set, stops[i]);
	}
	if (tty) {
		struct sigaction sa;

		sigaddset(&set, SIGWINCH);
		/* stopped with the terminal cooked (stop_as_asked), unless ignored */
		if (sigaction(SIGTSTP, NULL, &sa) == 0 && sa.sa_handler != SIG_IGN)
			sigaddset(&set, SIGTSTP);
	}
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0) {
		int e = errno;

		sigprocmask(SIG_SETMASK, old, NULL);
		return corral_set_err(err, -e, "sigprocmask: %s", strerror(e));
	}
	*sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (*sigfd < 0) {
		int e = errno;

		sigprocmask(SIG_SETMASK, old, NULL);
		return corral_set_errno(err, e, "signalfd");
	}
	return 0;
}

/*
 * The caller's mask back, without a SIGPIPE the relay met on the way, nor
 * a signal that came for the run after its last read of sigfd: those were
 * the sandbox's to get.  One sent twice at once (timeout(1) signals its
 * child, then its whole process group) was read once, then the second
 * ended corral with it: 143, not the command's status.
 */
static void unblock_signals(const sigset_t *old)
{
	static const int drop[] = { SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT,
				    SIGWINCH };
	struct timespec zero = { 0, 0 };
	sigset_t set, blocked;

	sigemptyset(&set);
	sigprocmask(SIG_BLOCK, NULL, &blocked);
	for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
		if (sigismember(&blocked, drop[i]) && !sigismember(old, drop[i]))
			sigaddset(&set, drop[i]);
	while (sigtimedwait(&set, NULL, &zero) > 0)
		;
	sigprocmask(SIG_SETMASK, old, NULL);
}

/*
 * The record itself, when the events file did not take all of it (a full
 * disk: a sandbox with an rw bind on the file system of the --events file
 * can fill it): said, and like output that was lost, a 0 becomes 125 (the
 * CLI), else a silent gap reads as a run with nothing more to say.
 */
static void explain_events_lost(struct corral_result *res, const struct events *ev,
				const char *path)
{
	size_t n = strlen(res->reason);
	uint64_t lost;
	int e;

	lost = events_lost(ev, &e);
	if (!lost)
		return;
	if (!res->output_errno)
		res->output_errno = e ? e : EIO;
	res->events_lost = lost;
	snprintf(res->reason + n, sizeof(res->reason) - n, "; %llu event%s could "
		 "not be written to the events file %s: %s",
		 (unsigned long long)lost, lost == 1 ? "" : "s", path ? path : "?",
		 strerror(e ? e : EIO));
}

/* The end, explained: the result's fields and the exec.end event. */
static void conclude(struct supervise *s, const char *cmd, const struct rusage *ru,
		     struct corral_result *res)
{
	const struct corral_policy *p = s->p;
	struct cg_stats st = { 0 };
	bool disk_full;
	json_t *d;

	cg_stats(s->cg, &st);
	if (st.pids_max_hits)
		st.pids_share = cg_pids_share_met(s->cg);
	if (st.oom_kills)
		st.mem_share = cg_memory_share_met(s->cg);
	/* a fresh group: what its counters say all happened in this run */
	disk_full = mount_scratch_full(s->sb->scratchfd);
	events_limit_hits(s->ev, NULL, &(struct cg_stats){ .valid = true }, &st, p, disk_full);
	describe(res, s, p, &st, cmd);
	/*
	 * Bytes the command wrote that never reached the caller's file (a
	 * full disk, ulimit -f, a quota): said, else the run read as whole.  A
	 * reader gone (EPIPE: `| head`) is the caller's choice, not a loss.
	 */
	for (int fd = 1; fd <= 2; fd++) {
		int e = stdrelay_error(s->relay, fd);
		size_t n = strlen(res->reason);

		if (!e || e == EPIPE || res->output_errno)
			continue;
		res->output_errno = e;
		snprintf(res->reason + n, sizeof(res->reason) - n, "; its %s "
			 "could not all be written to corral's fd %d: %s",
			 fd == 1 ? "stdout" : "stderr", fd, strerror(e));
	}
	if (cg_mode(s->cg) == CG_NONE)
		result_explain_rlimits(res, p);
	result_explain_open_files(res, p, s->sb ? s->sb->nofile : 0);
	result_explain_network(res, p);
	if (disk_full)
		events_explain_disk(res, p);
	d = events_denials(s->ev);
	/* the count, not the kept: a flood keeps its first EVENTS_DENIALS_KEPT */
	events_explain_denials(res, d, events_count_denied(s->ev),
			       events_count_denied(s->ev), p);
	events_explain_unseen(res, s->ev);
	json_decref(d);
	res->duration_ms = corral_now_ms() - s->t0;
	/* without cpuacct, init's rusage: the processes it reaped, and itself */
	res->cpu_ms = st.valid && cg_counts_cpu(s->cg) ? st.cpu_ns / 1000000 :
		(uint64_t)(ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) * 1000 +
		(uint64_t)(ru->ru_utime.tv_usec + ru->ru_stime.tv_usec) / 1000;
	res->max_rss_kb = ru->ru_maxrss;
	res->layers.landlock_abi = s->sb->landlock_abi;
	res->layers.seccomp = true;
	res->layers.seccomp_notify = s->sb->sensor != NULL;
	res->layers.limits = cg_mode_name(s->cg);
	res->layers.ids = s->sb->ids;
	events_emit(s->ev, "exec.end", json_pack("{s:s, s:i, s:i, s:o}",
		    "status", corral_status_name(res->status),
		    "exit_code", corral_result_exit_code(res), "signal", res->signal,
		    "reason", corral_json_bytes(res->reason, strlen(res->reason))));
}

/*
 * The supervisor's loop takes no tuning from the environment (EVENT_NOEPOLL
 * and the like): libevent asks getuid, geteuid, getgid and getegid before
 * each variable it reads, sixteen calls at every start.
 */
static struct event_base *loop_new(void)
{
	struct event_config *cfg = event_config_new();
	struct event_base *base;

	if (!cfg)
		return NULL;
	event_config_set_flag(cfg, EVENT_BASE_FLAG_IGNORE_ENV);
	base = event_base_new_with_config(cfg);
	event_config_free(cfg);
	return base;
}

/* The loop, the log and the cgroup the sandbox is spawned into. */
static int prepare(struct supervise *s, const struct corral_run_opts *o,
		   struct corral_result *res, struct corral_err *err)
{
	char name[64];
	int r;

	if (o->tool_call && corral_check_tool_call_id(o->tool_call, err) < 0)
		return err->code;
	snprintf(name, sizeof(name), "%d-%llu", getpid(),
		 (unsigned long long)(s->t0 ^ ((uint64_t)rand() << 20)));
	snprintf(res->sandbox_id, sizeof(res->sandbox_id), "%s", name);
	s->base = loop_new();
	if (!s->base)
		return corral_set_err(err, -ENOMEM, "cannot create an event loop");
	r = events_open(&s->ev, o->events_path, name, err);
	if (r == 0)
		r = events_check_reach(s->ev, s->p, err);
	if (r < 0)
		return r;
	events_set_limits(s->ev, &s->p->events);
	events_keep_denials(s->ev, EVENTS_DENIALS_KEPT);
	snprintf(res->tool_call, sizeof(res->tool_call), "%s",
		 o->tool_call ? o->tool_call : name);
	if (events_set_call(s->ev, res->tool_call) < 0)
		return corral_set_err(err, -ENOMEM, "out of memory naming the call "
				      "in the events");
	if (abort_any(&s->p->abort)) {
		s->abort = abort_new(&s->p->abort);
		if (!s->abort)
			return corral_set_err(err, -ENOMEM, "out of memory for the "
					      "abort criteria");
		events_set_hook(s->ev, on_event, s);
	}
	/*
	 * Made by sandbox_spawn, beside the sandbox's first steps.  Only a
	 * halt freezes: without abort criteria, no freezer.
	 */
	return cg_create(&s->cg, name, s->p, CG_LATER |
			 (s->abort ? 0 : CG_LIMITS_ONLY), err);
}

int corral_run(const struct corral_policy *p, const struct corral_run_opts *o,
	       struct corral_result *res, struct corral_err *err)
{
	struct supervise s = {
		.p = p, .timeout_ms = p->timeout_ms, .t0 = corral_now_ms(), .sigfd = -1,
		.master = -1, .winfd = -1,
		.out = { .fd = -1, .keep = { .cap = p->output_bytes }, .s = &s },
		.err = { .fd = -1, .keep = { .cap = p->output_bytes }, .s = &s },
	};
	struct sandbox_opts so = { .p = p, .argv = o->argv, .stdio = { -1, -1, -1 },
				   .hooks = &run_hooks, .arg = &s };
	struct rusage ru = { 0 };
	struct run_export xr = { .lower = -1, .dest_dir = -1 };
	sigset_t oldmask;
	bool masked = false;
	int r, ws = 0;

	memset(res, 0, sizeof(*res));
	res->status = CORRAL_ERROR;
	err->code = 0;
	err->msg[0] = '\0';

	if (!o->argv || !o->argv[0] || !o->argv[0][0])
		r = corral_set_err(err, -EINVAL, "no command to run");
	else
		r = sandbox_check_policy(p, err);
	if (r == 0 && o->export)
		r = run_export_prepare(&xr, p, o->export, err);
	so.want_upper = o->export != NULL;
	if (r == 0 && o->tty && o->capture)
		r = corral_set_err(err, -EINVAL, "a terminal's output cannot be "
				   "captured: tty and capture exclude each other");
	hold_closed_stdio(s.null, s.held);
	if (r < 0)
		goto fail;
	/*
	 * From here a signal to stop is ours to handle, in setup too: read
	 * before the spawn, it is the end of the run, with nothing started
	 * (setup_signaled); after, on_signal tells whether it is.
	 */
	r = block_signals(o->forward_signals, o->tty, &oldmask, &s.sigfd, err);
	if (r < 0)
		goto fail;
	masked = true;
	r = prepare(&s, o, res, err);
	if (r == 0)
		r = stdio_setup(&s, o, res, so.stdio, err);
	if (r < 0)
		goto fail_signals;
	s.setup_signal = setup_signaled(s.sigfd);
	if (s.setup_signal) {
		result_not_started(res, s.setup_signal);
		res->duration_ms = corral_now_ms() - s.t0;
		goto fail_signals;
	}
	/* the pty's first size: the caller's terminal's (a SIGWINCH before is read) */
	if (o->tty) {
		s.tty = so.tty = true;
		s.winfd = isatty(0) ? 0 : isatty(1) ? 1 : -1;
		if (s.winfd >= 0)
			corral_term_winsize(s.winfd, &so.winsize);
	}

	so.base = s.base;
	so.ev = s.ev;
	so.cg = s.cg;
	r = sandbox_spawn(&s.sb, &so, err);
	so.stdio[0] = so.stdio[1] = so.stdio[2] = -1;	/* the sandbox's now */
	if (r == 0) {
		r = supervise_start(&s, err);
		if (r < 0) {
			kill_tree(&s);
			waitpid(s.sb->pid, NULL, 0);
		}
	}
	if (r < 0)
		goto fail_signals;
	/*
	 * Groups that killed supervisors left: swept while the sandbox loads
	 * its filters and execs the command on the other core, not before.
	 */
	cg_cleanup_stale_groups();
	/* the counters conclude() reads, opened now rather than in line then */
	cg_keep_counters(s.cg, CG_ST_ALL);

	/* a name is bytes: one that is not UTF-8 must not empty the event */
	events_emit(s.ev, "exec.start", json_pack("{s:i, s:o}", "pid", s.sb->pid,
		    "command", corral_json_bytes(o->argv[0], strlen(o->argv[0]))));
	/* raw from here; restored at fail_signals, every way out passes there */
	if (s.tty && isatty(0) && corral_term_raw(0, &s.saved) == 0)
		s.raw = true;
	event_base_dispatch(s.base);
	if (!s.exited)
		kill_tree(&s);
	wait4(s.sb->pid, &ws, 0, &ru);
	if (s.setup.kind == MSG_SETUP_FAILED) {
		r = corral_set_err(err, s.setup.code, "%s", s.setup.text);
		goto fail_signals;
	}
	if (o->capture) {
		outkeep_end(&s.out.keep, &res->out);
		outkeep_end(&s.err.keep, &res->err);
	}
	conclude(&s, o->argv[0], &ru, res);
	/* nothing ran: nothing to export */
	if (o->export && !(s.setup_signal && !s.ready))
		run_export_finish(&xr, p, o->export, s.sb->upperfd, s.ev,
				  export_stop, &s, res);

fail_signals:
	if (s.raw)
		corral_term_restore(0, &s.saved);
	supervise_stop(&s);
	cleanup_closep(&s.sigfd);
fail:
	stdrelay_free(s.relay);
	cleanup_closep(&s.master);
	if (masked)
		unblock_signals(&oldmask);
	for (int i = 0; i < 3; i++) {
		cleanup_closep(&so.stdio[i]);
		cleanup_closep(&s.null[i]);
		/* held as it was: nothing the CLI opens next takes the number */
		if (s.held[i] >= 0 && dup3(s.held[i], i, O_CLOEXEC) < 0)
			close(i);	/* closed, as the caller had it */
		cleanup_closep(&s.held[i]);
	}
	cleanup_closep(&s.out.fd);
	cleanup_closep(&s.err.fd);
	outkeep_free(&s.out.keep);
	outkeep_free(&s.err.keep);
	sandbox_free(s.sb);
	if (s.ev)
		events_set_hook(s.ev, NULL, NULL);
	abort_free(s.abort);
	if (s.ev) {
		json_t *d = events_denials(s.ev);

		res->denials = json_dumps(d, JSON_COMPACT | JSON_ENSURE_ASCII);
		res->denials_total = events_count_denied(s.ev);
		json_decref(d);
		/* the summaries too, before the file's gaps are counted */
		events_flush(s.ev);
		if (r == 0)
			explain_events_lost(res, s.ev, o->events_path);
	}
	events_close(s.ev);
	/* let libevent finish what freeing the proxy deferred, then free it */
	if (s.base) {
		event_base_loop(s.base, EVLOOP_NONBLOCK);
		event_base_free(s.base);
	}
	cg_destroy(s.cg);
	run_export_free(&xr);
	if (r < 0) {
		res->status = CORRAL_ERROR;
		snprintf(res->reason, sizeof(res->reason), "%s", err->msg);
	}
	return r;
}

void corral_result_free(struct corral_result *res)
{
	free(res->out.data);
	free(res->err.data);
	free(res->denials);
	free(res->export_report);
	free(res->output_order);
	res->out.data = res->err.data = NULL;
	res->denials = NULL;
	res->export_report = NULL;
	res->output_order = NULL;
}
