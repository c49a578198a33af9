/*
 * box.c - a sandbox that lives across many tool calls (corral serve).
 *
 * The box's first process is built exactly as corral_run's (child.c), but
 * instead of one command it waits on the control socket for calls.  The
 * supervisor, here, runs on the caller's event loop: one process owns many
 * boxes, and nothing in this file blocks for longer than a cgroup write
 * (a freeze is asked for here and completes from the loop: freeze_done).
 *
 * A call: the supervisor makes a child cgroup for it, sends init the argv
 * with four fds (stdin, stdout, stderr, a gate).  init forks; the new
 * process says "r" on the gate, and the kernel attaches its credentials,
 * so the supervisor learns its host pid and moves it into the call's
 * cgroup before answering "g".  Only then does it exec.  Everything the
 * call starts is born in that cgroup, which is how a background process
 * found probing ports an hour later is still charged to the call.
 */
#include "internal.h"
#include "sandbox.h"
#include "events.h"
#include "proxy.h"
#include "sensor.h"
#include "abort.h"
#include "tripwire.h"

#include <event2/event.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif

#define BOX_DRAIN_MS	250	/* output after the call's end, at most */
#define BOX_TICK_MS	1000	/* meters, budgets */
#define BOX_IDLE_CPU_NS	5000000	/* less CPU than this in the idle window: idle */
#define BOX_ID_MAX	48
#define LINGER_MAX	64	/* calls remembered for attribution without cgroups */

struct corral_log {
	struct events_log *log;
	void (*fn)(void *arg, const char *sandbox, const char *line, size_t len);
	void *arg;
};

struct stream {
	int fd;
	struct event *ev;
	struct corral_output *out;
	struct corral_call *c;
	int no;			/* 1 or 2 */
};

struct corral_call {
	struct corral_box *b;
	struct corral_call *next;
	uint32_t id;
	char tool_call[128];
	struct corral_call_opts o;
	struct cg *cg;
	uint64_t cgid;		/* its cgroup2 id, for sockets it made */
	pid_t spid, host_pid;
	int gate;
	struct event *ev_gate, *ev_timeout, *ev_drain, *ev_stdin;
	int in_fd;
	char *in_data;
	size_t in_len, in_off;
	char **argv;		/* copies: the caller's may go once exec returns */
	char *cwd;
	struct stream out, err;
	uint64_t cap;
	uint64_t t0;
	struct cg_stats st0;	/* the box's counters when the call began */
	json_t *denials;	/* this call's denied events, for its result */
	bool started, exited, done, timed_out, halted, announced;
	bool held;		/* output not read until the caller says so */
	struct exec_fail fail;
	int status;
	struct corral_result res;
};

/* A call's cgroup that outlived the call: its background processes. */
struct lingerer {
	struct lingerer *next;
	uint32_t id;
	char tool_call[128];
	struct cg *cg;
	uint64_t cgid;
	pid_t sid;		/* the call's session, where there is no cgroup */
};

/*
 * Why the box's group is being frozen.  The kernel takes a moment (a busy
 * task stops at its next tick), so a freeze is asked for and finishes in
 * freeze_done() from the loop; a newer reason takes over one under way.
 */
enum box_freeze { BF_NONE, BF_IDLE, BF_PAUSE, BF_HALT };

struct corral_box {
	struct event_base *base;
	struct corral_policy *p;
	struct corral_box_opts o;
	char id[BOX_ID_MAX + 1];
	enum corral_box_state state;
	struct cg *cg;
	pid_t pid;
	int pidfd, ctl, sync_wr;
	int rootfd;		/* the sandbox's "/": tripwires and files */
	struct event *ev_ctl, *ev_exit, *ev_tick, *ev_idle;
	struct events *ev;
	struct proxy *px;
	struct sensor *sensor;
	struct tripwire *tripwire;
	struct abort_state *abort;
	char **envp;
	uid_t host_uid;
	gid_t host_gid;
	int landlock_abi;
	uint32_t next_id;
	struct corral_call *calls;
	struct lingerer *lingering;
	struct cg *spare;	/* the next call's group, made ahead */
	uint32_t spare_id;
	struct event *ev_spare;
	struct event *ev_sweep;	/* empty call groups, removed next turn */
	char halt_reason[CORRAL_ERR_MAX];
	const char *gone;	/* why calls still running were ended */
	/* meters */
	uint64_t t_created, t_mark, active_ms, frozen_ms, calls_total;
	uint64_t idle_cpu_ns;
	double mem_byte_ms;
	uint64_t mem_last, mem_peak, cpu_ns;
	bool frozen;		/* idle-frozen or paused or held after halt */
	bool killed;		/* halted and killed: its files went with it */
	enum box_freeze freezing;	/* a freeze under way, and what for */
	/* a halt's record, written once the tree is frozen (halt_record) */
	char halt_criterion[64];	/* "": by request */
	char *halt_text;		/* the whole reason (halt_reason is cut) */
	json_t *halt_evidence;
};

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void drop_event(struct event **ev)
{
	if (*ev)
		event_free(*ev);
	*ev = NULL;
}

static struct timeval tv_ms(uint64_t ms)
{
	return (struct timeval){ ms / 1000, (ms % 1000) * 1000 };
}

/* ---- the audit log ----------------------------------------------------- */

static void log_line(void *arg, const char *line, size_t len, json_t *event)
{
	struct corral_log *l = arg;
	const char *sb = json_string_value(json_object_get(event, "sandbox"));

	if (l->fn)
		l->fn(l->arg, sb ? sb : "", line, len);
}

int corral_log_open(struct corral_log **out, const char *path,
		    struct corral_err *err)
{
	struct corral_log *l = calloc(1, sizeof(*l));
	int r;

	*out = NULL;
	if (!l)
		return corral_set_err(err, -ENOMEM, "out of memory");
	r = events_log_open(&l->log, path, err);
	if (r < 0) {
		free(l);
		return r;
	}
	events_log_observe(l->log, log_line, l);
	*out = l;
	return 0;
}

void corral_log_observe(struct corral_log *l,
			void (*fn)(void *arg, const char *sandbox,
				   const char *line, size_t len),
			void *arg)
{
	l->fn = fn;
	l->arg = arg;
}

int corral_log_error(const struct corral_log *l)
{
	return l ? events_log_error(l->log) : 0;
}

void corral_log_close(struct corral_log *l)
{
	if (!l)
		return;
	events_log_observe(l->log, NULL, NULL);
	events_log_put(l->log);
	free(l);
}

void corral_log_note(struct corral_log *l, const char *sandbox,
		     uint64_t after_seq, const char *type, const char *reason)
{
	struct corral_err err;
	struct events *ev;

	if (events_new(&ev, l ? l->log : NULL, sandbox, &err) < 0)
		return;
	events_set_seq(ev, after_seq);
	events_emit(ev, type, json_pack("{s:s}", "reason", reason));
	events_close(ev);
}

int corral_cleanup_stale(void)
{
	return cg_cleanup_stale();
}

int corral_cleanup_owner(pid_t pid)
{
	return cg_cleanup_owner(pid);
}

/* ---- meters ------------------------------------------------------------ */

/* Bring the meters up to now; called at every change of state. */
static void meter(struct corral_box *b)
{
	uint64_t now = corral_now_ms(), dt = now - b->t_mark;
	struct cg_stats st;

	if (b->state == CORRAL_BOX_STARTING || b->state == CORRAL_BOX_DEAD) {
		b->t_mark = now;
		return;
	}
	if (b->frozen)
		b->frozen_ms += dt;
	else
		b->active_ms += dt;
	b->mem_byte_ms += (double)b->mem_last * dt;
	b->t_mark = now;
	/* a frozen group neither uses CPU nor changes its memory */
	if (!b->frozen && cg_stats(b->cg, &st) == 0 && st.valid) {
		b->cpu_ns = st.cpu_ns;
		b->mem_last = st.mem_current;
		if (st.mem_peak > b->mem_peak)
			b->mem_peak = st.mem_peak;
	}
}

void corral_box_meters(struct corral_box *b, struct corral_meters *m)
{
	meter(b);
	m->cpu_seconds = b->cpu_ns / 1e9;
	m->memory_peak_bytes = b->mem_peak;
	m->memory_byte_seconds = b->mem_byte_ms / 1000.0;
	m->active_seconds = b->active_ms / 1000.0;
	m->frozen_seconds = b->frozen_ms / 1000.0;
	m->calls = b->calls_total;
}

/* ---- state --------------------------------------------------------------- */

const char *corral_box_id(const struct corral_box *b)
{
	return b->id;
}

static size_t calls_running(const struct corral_box *b)
{
	size_t n = 0;

	for (const struct corral_call *c = b->calls; c; c = c->next)
		n += !c->done;
	return n;
}

size_t corral_box_running(const struct corral_box *b)
{
	return calls_running(b);
}

enum corral_box_state corral_box_state(const struct corral_box *b)
{
	if (b->state == CORRAL_BOX_IDLE && calls_running(b))
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
	l->landlock_abi = b->landlock_abi;
	l->seccomp = true;
	l->seccomp_notify = b->sensor != NULL;
	l->limits = cg_mode_name(b->cg);
}

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
		meter(b);
		b->frozen = true;
	}
	return r;
}

/* Thawed when the write returns (no wait); a freeze under way is dropped. */
static int set_thawed(struct corral_box *b, struct corral_err *err)
{
	int r;

	if (!b->frozen && !b->freezing)
		return 0;
	b->freezing = BF_NONE;
	meter(b);
	r = cg_thaw(b->cg, err);
	if (r == 0)
		b->frozen = false;
	return r;
}

static void arm_idle(struct corral_box *b);

/* ---- calls: ending ------------------------------------------------------- */

static void call_describe(struct corral_call *c, const struct cg_stats *bst)
{
	struct corral_result *res = &c->res;
	const struct corral_policy *p = c->b->p;
	char size[32];
	int st = c->status;

	if (c->halted) {
		res->status = CORRAL_HALTED;
		res->signal = SIGKILL;
		snprintf(res->reason, sizeof(res->reason), "halted: %.400s; the "
			 "sandbox accepts no more calls", c->b->halt_reason);
		return;
	}
	if (c->timed_out) {
		res->status = CORRAL_TIMEOUT;
		res->signal = SIGKILL;
		snprintf(res->reason, sizeof(res->reason), "killed: wall-clock "
			 "timeout of %.3g s reached", c->o.timeout_ms / 1000.0);
		return;
	}
	if (c->fail.stage) {
		res->status = CORRAL_EXITED;
		res->exit_code = c->fail.stage == EXEC_STAGE_EXEC &&
			(c->fail.err == ENOENT || c->fail.err == ENOTDIR) ? 127 : 126;
		snprintf(res->reason, sizeof(res->reason), "%s: %s: %s",
			 c->fail.stage == EXEC_STAGE_CWD ? "cannot enter the "
			 "working directory" : c->fail.stage == EXEC_STAGE_RLIMIT ?
			 "cannot apply the rlimits" : res->exit_code == 127 ?
			 "not found" : "cannot execute",
			 c->fail.stage == EXEC_STAGE_CWD ?
			 (c->o.cwd ? c->o.cwd : "/workspace") : c->o.argv[0],
			 strerror(c->fail.err));
		return;
	}
	if (!c->exited || c->b->gone) {
		res->status = CORRAL_ERROR;
		snprintf(res->reason, sizeof(res->reason), "%s", c->b->gone ?
			 c->b->gone : "the sandbox died while the call ran");
		return;
	}
	if (WIFSIGNALED(st)) {
		res->status = CORRAL_SIGNALED;
		res->signal = WTERMSIG(st);
		snprintf(res->reason, sizeof(res->reason), "killed by signal %d "
			 "(SIG%s)", res->signal, sigabbrev_np(res->signal) ?: "?");
	} else {
		res->status = CORRAL_EXITED;
		res->exit_code = WEXITSTATUS(st);
		snprintf(res->reason, sizeof(res->reason), "exited with status %d",
			 res->exit_code);
	}
	if (bst->valid && bst->oom_kills > c->st0.oom_kills) {
		corral_format_size(p->memory_bytes, size, sizeof(size));
		res->status = CORRAL_OOM;
		snprintf(res->reason, sizeof(res->reason), "killed: memory limit "
			 "%s reached", size);
	} else if (bst->valid && bst->pids_max_hits > c->st0.pids_max_hits) {
		res->status = CORRAL_PIDS_LIMIT;
		snprintf(res->reason, sizeof(res->reason), "pids limit %llu "
			 "reached: %llu fork(s) refused; the command %s",
			 (unsigned long long)p->pids,
			 (unsigned long long)(bst->pids_max_hits - c->st0.pids_max_hits),
			 res->status == CORRAL_SIGNALED ? "was killed" : "exited");
	}
}

static void call_stop_io(struct corral_call *c)
{
	drop_event(&c->ev_gate);
	drop_event(&c->ev_timeout);
	drop_event(&c->ev_drain);
	drop_event(&c->ev_stdin);
	drop_event(&c->out.ev);
	drop_event(&c->err.ev);
	close_fd(&c->gate);
	close_fd(&c->in_fd);
	close_fd(&c->out.fd);
	close_fd(&c->err.fd);
}

/* The sandbox's writable tmpfs (/tmp, home, the workspace's changes). */
static bool disk_full(struct corral_box *b)
{
	struct statvfs sv;
	bool full = false;
	int fd;

	if (b->rootfd < 0 || b->killed)
		return false;
	fd = openat(b->rootfd, "tmp", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 && fstatvfs(fd, &sv) == 0)
		full = sv.f_bavail == 0 || sv.f_favail == 0;
	if (fd >= 0)
		close(fd);
	return full;
}

static void call_finish(struct corral_call *c)
{
	struct corral_box *b = c->b;
	struct cg_stats st = { 0 }, bst = { 0 };
	struct corral_result *res = &c->res;

	if (c->done)
		return;
	c->done = true;
	call_stop_io(c);
	cg_stats(b->cg, &bst);
	call_describe(c, &bst);
	if (cg_stats(c->cg, &st) == 0 && st.valid) {
		res->cpu_ms = st.cpu_ns / 1000000;
		res->max_rss_kb = st.mem_peak / 1024;
	}
	res->duration_ms = corral_now_ms() - c->t0;
	events_limit_hits(b->ev, c->tool_call, &c->st0, &bst, b->p, disk_full(b));
	if (c->denials) {
		events_explain_denials(res, c->denials, events_count_denied(b->ev), b->p);
		res->denials = json_dumps(c->denials, JSON_COMPACT | JSON_ENSURE_ASCII);
	}
	corral_box_layers(b, &res->layers);
	snprintf(res->sandbox_id, sizeof(res->sandbox_id), "%s", b->id);
	snprintf(res->tool_call, sizeof(res->tool_call), "%s", c->tool_call);
	events_emit(b->ev, "exec.end", json_pack("{s:s, s:s, s:i, s:i, s:i, s:s}",
		    "call", c->tool_call, "status", corral_status_name(res->status),
		    "exit_code", corral_result_exit_code(res), "signal", res->signal,
		    "sandbox_pid", (int)c->spid, "reason", res->reason));
	if (c->o.on_done)
		c->o.on_done(c->o.arg, c, res);
	if (!calls_running(b))
		arm_idle(b);
}

static void maybe_finish(struct corral_call *c)
{
	if (c->exited && c->out.fd < 0 && c->err.fd < 0)
		call_finish(c);
}

static void on_drain(evutil_socket_t fd, short what, void *arg)
{
	struct corral_call *c = arg;
	struct timeval tv = tv_ms(BOX_DRAIN_MS);

	(void)fd;
	(void)what;
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

/* ---- calls: output ------------------------------------------------------- */

static void keep(struct corral_call *c, struct corral_output *o,
		 const char *buf, size_t n)
{
	size_t cap = c->cap, take;
	char *grown;

	if (c->o.keep_tail && n + o->len > cap) {
		/* keep the last cap bytes: drop from the front */
		size_t drop = n >= cap ? o->len : o->len + n - cap;

		if (n > cap) {
			buf += n - cap;
			n = cap;
		}
		memmove(o->data, o->data + drop, o->len - drop);
		o->len -= drop;
		o->truncated = true;
	}
	take = o->len < cap ? cap - o->len : 0;
	if (take > n)
		take = n;
	if (take < n)
		o->truncated = true;
	if (!take)
		return;
	grown = realloc(o->data, o->len + take + 1);
	if (!grown) {
		o->truncated = true;
		return;
	}
	memcpy(grown + o->len, buf, take);
	o->len += take;
	grown[o->len] = '\0';
	o->data = grown;
}

static void on_stream(evutil_socket_t fd, short what, void *arg)
{
	struct stream *s = arg;
	struct corral_call *c = s->c;
	char buf[65536];
	ssize_t n = read(fd, buf, sizeof(buf));

	(void)what;
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		drop_event(&s->ev);
		close_fd(&s->fd);
		maybe_finish(c);
		return;
	}
	keep(c, s->out, buf, n);
	if (c->o.on_output)
		c->o.on_output(c->o.arg, c, s->no, buf, n);
}

void corral_call_hold_output(struct corral_call *c, bool hold)
{
	struct stream *s[2] = { &c->out, &c->err };

	if (c->done)
		return;
	c->held = hold;
	for (int i = 0; i < 2; i++) {
		if (!s[i]->ev)
			continue;
		if (hold)
			event_del(s[i]->ev);
		else
			event_add(s[i]->ev, NULL);
	}
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
		close_fd(&c->in_fd);
	}
}

/* ---- calls: starting ----------------------------------------------------- */

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct corral_call *c = arg;

	(void)fd;
	(void)what;
	c->timed_out = true;
	events_emit(c->b->ev, "timeout", json_pack("{s:s, s:I, s:s}", "call",
		    c->tool_call, "limit_ms", (json_int_t)c->o.timeout_ms, "reason",
		    "the call's wall-clock timeout was reached: it and everything "
		    "it started are killed"));
	corral_call_kill(c, SIGKILL);
}

/* exec.start once both pids are known (they come by two ways). */
static void announce(struct corral_call *c)
{
	if (c->announced || !c->spid || !c->host_pid)
		return;
	c->announced = true;
	events_emit(c->b->ev, "exec.start", json_pack("{s:s, s:i, s:i, s:s}",
		    "call", c->tool_call, "pid", (int)c->host_pid,
		    "sandbox_pid", (int)c->spid, "command", c->o.argv[0]));
	if (c->o.on_start)
		c->o.on_start(c->o.arg, c);
}

/* "r" with credentials: move the pid into the call's cgroup, say "g". */
static void gate_ready(struct corral_call *c, pid_t pid)
{
	struct corral_err err;

	c->host_pid = pid;
	if (cg_attach(c->cg, pid, &err) < 0) {
		/* unattributed is not acceptable: the call does not run */
		kill(pid, SIGKILL);
		events_emit(c->b->ev, "exec.error", json_pack("{s:s, s:s}", "call",
			    c->tool_call, "reason", err.msg));
		return;
	}
	if (send(c->gate, "g", 1, MSG_NOSIGNAL) != 1)
		kill(pid, SIGKILL);
	announce(c);
}

static void on_gate(evutil_socket_t fd, short what, void *arg)
{
	struct corral_call *c = arg;
	char cbuf[CMSG_SPACE(sizeof(struct ucred))];
	struct exec_fail f;
	struct iovec iov = { &f, sizeof(f) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm;
	ssize_t n;

	(void)what;
	n = recvmsg(fd, &mh, MSG_DONTWAIT);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n == 1 && !c->host_pid) {
		for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
			struct ucred uc;

			if (cm->cmsg_level != SOL_SOCKET ||
			    cm->cmsg_type != SCM_CREDENTIALS)
				continue;
			memcpy(&uc, CMSG_DATA(cm), sizeof(uc));
			if (uc.pid > 0)
				gate_ready(c, uc.pid);
		}
		return;
	}
	if (n == sizeof(f))
		c->fail = f;
	/* EOF: exec'd (the gate is close-on-exec), or died */
	drop_event(&c->ev_gate);
	close_fd(&c->gate);
}

static int pack_strings(struct exec_msg *m, char *const *v, uint32_t *count)
{
	for (size_t i = 0; v && v[i]; i++) {
		size_t len = strlen(v[i]) + 1;

		if (m->len + len > sizeof(m->data))
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

	for (size_t i = 0; b->envp[i]; i++) {
		char *eq = strchr(b->envp[i], '=');
		char name[256];

		snprintf(name, sizeof(name), "%.*s", (int)(eq - b->envp[i]), b->envp[i]);
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

static int send_exec(struct corral_box *b, struct corral_call *c, int fds[4],
		     struct corral_err *err)
{
	struct exec_msg *m = calloc(1, sizeof(*m));
	char cbuf[CMSG_SPACE(4 * sizeof(int))] = { 0 };
	struct iovec iov;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	char **envp = call_env(b, c->o.env);
	const char *cwd = c->o.cwd ? c->o.cwd : "/workspace";
	int r = 0;

	if (!m || !envp) {
		r = corral_set_err(err, -ENOMEM, "out of memory");
		goto out;
	}
	m->kind = MSG_EXEC;
	m->id = c->id;
	if (pack_strings(m, c->o.argv, &m->nargv) < 0 ||
	    pack_strings(m, envp, &m->nenv) < 0 ||
	    m->len + strlen(cwd) + 1 > sizeof(m->data)) {
		r = corral_set_err(err, -E2BIG, "argv, env and cwd together are "
				   "over %d KiB", EXEC_DATA_MAX / 1024);
		goto out;
	}
	memcpy(m->data + m->len, cwd, strlen(cwd) + 1);
	m->len += strlen(cwd) + 1;
	iov = (struct iovec){ m, offsetof(struct exec_msg, data) + m->len };
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(4 * sizeof(int));
	memcpy(CMSG_DATA(cm), fds, 4 * sizeof(int));
	if (sendmsg(b->ctl, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		r = corral_set_err(err, -errno, "cannot reach the sandbox's init: %s",
				   strerror(errno));
out:
	sandbox_env_free(envp);
	free(m);
	return r;
}

static void free_strings(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

static char **copy_strings(char *const *v)
{
	size_t n = 0;
	char **c;

	while (v[n])
		n++;
	c = calloc(n + 1, sizeof(char *));
	for (size_t i = 0; c && i < n; i++) {
		c[i] = strdup(v[i]);
		if (!c[i]) {
			free_strings(c);
			return NULL;
		}
	}
	return c;
}

/*
 * The next call's cgroup, made while this one runs (or the box idles):
 * mkdir in every hierarchy is off the path of the call that will use it.
 */
static void on_spare(evutil_socket_t fd, short what, void *arg)
{
	struct corral_box *b = arg;
	struct corral_err err;
	char name[32];

	(void)fd;
	(void)what;
	if (b->spare || cg_mode(b->cg) == CG_NONE || b->state == CORRAL_BOX_DEAD ||
	    b->state == CORRAL_BOX_HALTED)
		return;
	b->spare_id = b->next_id + 1;
	snprintf(name, sizeof(name), "c%u", b->spare_id);
	if (cg_create_child(b->cg, name, &b->spare, &err) < 0)
		b->spare = NULL;
}

static void arm_spare(struct corral_box *b)
{
	struct timeval now = { 0, 0 };

	if (b->state == CORRAL_BOX_DEAD || b->state == CORRAL_BOX_HALTED)
		return;
	if (!b->ev_spare)
		b->ev_spare = evtimer_new(b->base, on_spare, b);
	if (b->ev_spare && !b->spare)
		evtimer_add(b->ev_spare, &now);
}

static int check_exec(struct corral_box *b, const struct corral_call_opts *o,
		      struct corral_err *err)
{
	if (!o->argv || !o->argv[0] || !o->argv[0][0])
		return corral_set_err(err, -EINVAL, "no command to run");
	if (o->cwd && o->cwd[0] != '/')
		return corral_set_err(err, -EINVAL, "cwd must be an absolute path "
				      "(got \"%.200s\")", o->cwd);
	if (o->tool_call && (!o->tool_call[0] || strlen(o->tool_call) >= 128))
		return corral_set_err(err, -EINVAL, "tool_call_id must be 1 to 127 "
				      "characters");
	switch (b->state) {
	case CORRAL_BOX_HALTED:
		return corral_set_err(err, -EPERM, "halted: %s", b->halt_reason);
	case CORRAL_BOX_PAUSED:
		return corral_set_err(err, -EBUSY, "the sandbox is paused; "
				      "resume it first");
	case CORRAL_BOX_DEAD:
		return corral_set_err(err, -ESRCH, "the sandbox is dead");
	case CORRAL_BOX_STARTING:
		return corral_set_err(err, -EAGAIN, "the sandbox is still starting");
	default:
		return 0;
	}
}

static int call_pipes(struct corral_call *c, int fds[4], struct corral_err *err)
{
	int in[2] = { -1, -1 }, out[2] = { -1, -1 }, er[2] = { -1, -1 }, g[2];
	int one = 1;

	if (pipe2(in, O_CLOEXEC | O_NONBLOCK) < 0 ||
	    pipe2(out, O_CLOEXEC | O_NONBLOCK) < 0 ||
	    pipe2(er, O_CLOEXEC | O_NONBLOCK) < 0 ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, g) < 0) {
		int e = errno;

		close_fd(&in[0]);
		close_fd(&in[1]);
		close_fd(&out[0]);
		close_fd(&out[1]);
		close_fd(&er[0]);
		close_fd(&er[1]);
		return corral_set_err(err, -e, "pipe: %s", strerror(e));
	}
	/* the child's end must block; ours must not */
	fcntl(in[0], F_SETFL, 0);
	fcntl(out[1], F_SETFL, 0);
	fcntl(er[1], F_SETFL, 0);
	setsockopt(g[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));
	fds[0] = in[0];
	fds[1] = out[1];
	fds[2] = er[1];
	fds[3] = g[1];
	c->in_fd = in[1];
	c->out.fd = out[0];
	c->err.fd = er[0];
	c->gate = g[0];
	return 0;
}

static int call_watch(struct corral_call *c, struct corral_err *err)
{
	struct event_base *base = c->b->base;
	struct timeval tv = tv_ms(c->o.timeout_ms);

	c->out.ev = event_new(base, c->out.fd, EV_READ | EV_PERSIST, on_stream, &c->out);
	c->err.ev = event_new(base, c->err.fd, EV_READ | EV_PERSIST, on_stream, &c->err);
	c->ev_gate = event_new(base, c->gate, EV_READ | EV_PERSIST, on_gate, c);
	if (!c->out.ev || !c->err.ev || !c->ev_gate || event_add(c->out.ev, NULL) < 0 ||
	    event_add(c->err.ev, NULL) < 0 || event_add(c->ev_gate, NULL) < 0)
		return corral_set_err(err, -ENOMEM, "cannot watch the call");
	if (c->in_len) {
		c->ev_stdin = event_new(base, c->in_fd, EV_WRITE | EV_PERSIST, on_stdin, c);
		if (!c->ev_stdin || event_add(c->ev_stdin, NULL) < 0)
			return corral_set_err(err, -ENOMEM, "cannot watch the call");
	} else {
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
	int fds[4] = { -1, -1, -1, -1 }, r;

	*out = NULL;
	r = check_exec(b, o, err);
	if (r < 0)
		return r;
	drop_event(&b->ev_idle);
	if (b->state == CORRAL_BOX_FROZEN || b->freezing) {
		r = set_thawed(b, err);
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
		return corral_set_err(err, -ENOMEM, "out of memory");
	c->b = b;
	c->o = *o;
	c->id = ++b->next_id;
	c->gate = c->in_fd = -1;
	c->out = (struct stream){ -1, NULL, &c->res.out, c, 1 };
	c->err = (struct stream){ -1, NULL, &c->res.err, c, 2 };
	c->cap = b->p->output_bytes;
	c->t0 = corral_now_ms();
	if (!c->o.timeout_ms)
		c->o.timeout_ms = b->p->timeout_ms;
	if (o->tool_call)
		snprintf(c->tool_call, sizeof(c->tool_call), "%s", o->tool_call);
	else
		snprintf(c->tool_call, sizeof(c->tool_call), "%s-%u", b->id, c->id);
	c->o.tool_call = c->tool_call;
	if (o->stdin_len) {
		c->in_data = malloc(o->stdin_len);
		if (!c->in_data) {
			free(c);
			return corral_set_err(err, -ENOMEM, "out of memory");
		}
		memcpy(c->in_data, o->stdin_data, o->stdin_len);
		c->in_len = o->stdin_len;
	}
	c->o.stdin_data = NULL;
	c->argv = copy_strings(o->argv);
	c->cwd = strdup(o->cwd ? o->cwd : "/workspace");
	if (!c->argv || !c->cwd) {
		free_strings(c->argv);
		free(c->cwd);
		free(c->in_data);
		free(c);
		return corral_set_err(err, -ENOMEM, "out of memory");
	}
	c->o.argv = c->argv;
	c->o.cwd = c->cwd;
	c->next = b->calls;
	b->calls = c;
	snprintf(name, sizeof(name), "c%u", c->id);
	if (b->spare && b->spare_id == c->id) {
		c->cg = b->spare;
		b->spare = NULL;
		r = 0;
	} else {
		r = cg_create_child(b->cg, name, &c->cg, err);
	}
	arm_spare(b);
	if (r == 0) {
		c->cgid = cg_id(c->cg);
		r = call_pipes(c, fds, err);
	}
	if (r == 0)
		r = send_exec(b, c, fds, err);
	c->o.env = NULL;	/* sent; the caller's may go */
	for (int i = 0; i < 4; i++)
		close_fd(&fds[i]);
	if (r == 0)
		r = call_watch(c, err);
	if (r < 0) {
		c->done = true;	/* no on_done for a call that never was */
		corral_call_free(c);
		if (!calls_running(b))
			arm_idle(b);
		return r;
	}
	cg_stats(b->cg, &bst);
	c->st0 = bst;
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

int corral_call_kill(struct corral_call *c, int sig)
{
	int r;

	if (cg_mode(c->cg) == CG_NONE) {
		/* no cgroup: the call's session is all we can name */
		if (c->host_pid > 0 && kill(-c->host_pid, sig) < 0 && errno != ESRCH)
			return -errno;
		return 0;
	}
	if (sig == SIGKILL)
		return cg_kill_start(c->cg, c->b->base);
	r = 0;
	if (c->host_pid > 0 && kill(-c->host_pid, sig) < 0 && errno != ESRCH)
		r = -errno;
	return r;
}

/*
 * What a finished call left running stays in its cgroup, still charged to
 * it; the group goes when it is empty (swept on the tick) or with the box.
 */
static void trim_lingering(struct corral_box *b);
static void arm_sweep(struct corral_box *b);

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
	l->id = c->id;
	l->cgid = c->cgid;
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
		cg_destroy(l->cg);
		free(l);
	}
}

static void sweep_lingering(struct corral_box *b, bool all)
{
	struct lingerer **pp = &b->lingering, *l;

	while ((l = *pp)) {
		if (!all && (cg_mode(l->cg) == CG_NONE || cg_try_remove(l->cg) < 0)) {
			pp = &l->next;
			continue;
		}
		*pp = l->next;
		cg_destroy(l->cg);
		free(l);
	}
}

static void on_sweep(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	sweep_lingering(arg, false);
}

static void arm_sweep(struct corral_box *b)
{
	struct timeval now = { 0, 0 };

	/* a dead box sweeps nothing: destroy takes every group with it */
	if (b->state == CORRAL_BOX_DEAD)
		return;
	if (!b->ev_sweep)
		b->ev_sweep = evtimer_new(b->base, on_sweep, b);
	if (b->ev_sweep && !evtimer_pending(b->ev_sweep, NULL))
		evtimer_add(b->ev_sweep, &now);
}

void corral_call_free(struct corral_call *c)
{
	if (!c)
		return;
	if (!c->done)
		corral_call_kill(c, SIGKILL);
	call_stop_io(c);
	call_unlink(c);
	if (c->done && c->cg)
		keep_lingering(c);
	cg_destroy(c->cg);
	free(c->in_data);
	free_strings(c->argv);
	free(c->cwd);
	json_decref(c->denials);
	corral_result_free(&c->res);
	free(c);
}

static struct corral_call *call_by_id(struct corral_box *b, uint32_t id)
{
	for (struct corral_call *c = b->calls; c; c = c->next)
		if (c->id == id)
			return c;
	return NULL;
}

/* ---- attribution ----------------------------------------------------------- */

/* The id of the call whose cgroup holds host pid ("corral-cN"), or 0. */
static uint32_t call_id_of_pid(pid_t pid)
{
	struct cg_proc where;
	unsigned id;

	if (cg_proc_read(&where, pid) < 0)
		return 0;
	for (size_t i = 0; i < where.n; i++) {
		const char *at = strstr(where.e[i].path, "/corral-c");

		if (at && sscanf(at, "/corral-c%u", &id) == 1)
			return id;
	}
	return 0;
}

/* The session of host pid: a call's first process leads one (setsid). */
static pid_t session_of(pid_t pid)
{
	char path[64], buf[512], *end;
	pid_t sid = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* after "(comm)": state ppid pgrp session */
	end = strrchr(buf, ')');
	if (end && sscanf(end + 1, " %*c %*d %*d %d", &sid) != 1)
		sid = 0;
	return sid;
}

/* The pid as the sandbox sees it: the last NSpid field. */
static pid_t inner_pid(pid_t pid)
{
	char path[64], line[256];
	pid_t inner = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "NSpid:", 6) == 0) {
			char *last = strrchr(line, '\t');

			inner = last ? atoi(last + 1) : 0;
			break;
		}
	}
	fclose(f);
	return inner;
}

static bool name_call(json_t *event, const char *tool_call, bool background)
{
	json_object_set_new(event, "call", json_string(tool_call));
	if (background)
		json_object_set_new(event, "background", json_true());
	return true;
}

/* What an event's process is known by, in the order it is tried. */
enum call_key { BY_CGROUP2, BY_ID, BY_SESSION };

static uint64_t call_key_of(const struct corral_call *c, enum call_key k)
{
	return k == BY_CGROUP2 ? c->cgid : k == BY_ID ? c->id : (uint64_t)c->host_pid;
}

static uint64_t lingerer_key_of(const struct lingerer *l, enum call_key k)
{
	return k == BY_CGROUP2 ? l->cgid : k == BY_ID ? l->id : (uint64_t)l->sid;
}

/* The call, running or left behind, that key names: into the event. */
static bool name_by(struct corral_box *b, json_t *event, enum call_key k,
		    uint64_t key)
{
	if (!key)
		return false;
	for (struct corral_call *c = b->calls; c; c = c->next)
		if (call_key_of(c, k) == key)
			return name_call(event, c->tool_call, c->done);
	for (struct lingerer *l = b->lingering; l; l = l->next)
		if (lingerer_key_of(l, k) == key)
			return name_call(event, l->tool_call, true);
	return false;
}

/*
 * The call an event belongs to: by the cgroup2 group that made its socket
 * (it outlives the process), by the group its process was seen in before
 * it could exit, by the group its pid is in now, and without cgroups by
 * the session the call's first process leads.
 */
static bool attribute(void *arg, json_t *event)
{
	struct corral_box *b = arg;
	json_int_t pid = json_integer_value(json_object_get(event, "pid"));
	const char *group = json_string_value(json_object_get(event, EVENTS_KEY_GROUP));
	unsigned id = 0;

	if (pid > 0 && !json_object_get(event, "sandbox_pid")) {
		pid_t inner = inner_pid(pid);

		if (inner > 0)
			json_object_set_new(event, "sandbox_pid", json_integer(inner));
	}
	if (name_by(b, event, BY_CGROUP2,
		    json_integer_value(json_object_get(event, EVENTS_KEY_CGROUP))))
		return true;
	if (group && sscanf(group, "corral-c%u", &id) == 1 &&
	    name_by(b, event, BY_ID, id))
		return true;
	if (pid <= 0)
		return false;
	if (name_by(b, event, BY_ID, call_id_of_pid(pid)))
		return true;
	return cg_mode(b->cg) == CG_NONE &&
	       name_by(b, event, BY_SESSION, session_of(pid));
}

/* ---- halt ---------------------------------------------------------------- */

static void kill_all(struct corral_box *b)
{
	if (b->pidfd >= 0)
		syscall(SYS_pidfd_send_signal, b->pidfd, SIGKILL, NULL, 0);
	cg_kill_start(b->cg, b->base);	/* v1: its rounds run on the loop */
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
		set_thawed(b, &err);	/* let the killed exit */
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

	meter(b);
	snprintf(b->halt_reason, sizeof(b->halt_reason), "%s", reason);
	snprintf(b->halt_criterion, sizeof(b->halt_criterion), "%s",
		 criterion ? criterion : "");
	b->halt_text = strdup(reason);	/* NULL: the cut halt_reason will do */
	b->halt_evidence = evidence;
	b->state = CORRAL_BOX_HALTED;
	drop_event(&b->ev_idle);
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
		return corral_set_err(err, -ESRCH, "the sandbox is %s",
				      corral_box_state_name(b->state));
	box_halt(b, NULL, reason && reason[0] ? reason : "halted by request",
		 NULL);
	return 0;
}

#define CALL_DENIALS_KEPT 100

/* A denial goes in the result of the call it is attributed to. */
static void note_denial(struct corral_box *b, const char *type, json_t *event)
{
	const char *call = json_string_value(json_object_get(event, "call"));

	if (!call || (strcmp(type, "egress.denied") && strcmp(type, "syscall.denied")))
		return;
	for (struct corral_call *c = b->calls; c; c = c->next) {
		if (c->done || strcmp(c->tool_call, call))
			continue;
		if (!c->denials)
			c->denials = json_array();
		if (json_array_size(c->denials) < CALL_DENIALS_KEPT)
			json_array_append(c->denials, event);
		return;
	}
}

static void on_event(void *arg, const char *type, json_t *event)
{
	struct corral_box *b = arg;
	struct abort_verdict v = { 0 };

	note_denial(b, type, event);
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
		return corral_set_err(err, -EPERM, "halted: %s", b->halt_reason);
	if (b->state == CORRAL_BOX_DEAD || b->state == CORRAL_BOX_STARTING)
		return corral_set_err(err, -ESRCH, "the sandbox is %s",
				      corral_box_state_name(b->state));
	if (paused == (b->state == CORRAL_BOX_PAUSED))
		return 0;
	/* a pause still freezing has no "pause" event yet: say so */
	resume = !paused && b->freezing ? "resumed by request before the "
		 "freeze of the pause completed" : NULL;
	r = paused ? set_frozen(b, BF_PAUSE, err) : set_thawed(b, err);
	if (r < 0)
		return r;
	drop_event(&b->ev_idle);
	b->state = paused ? CORRAL_BOX_PAUSED : CORRAL_BOX_IDLE;
	/* paused: calls are refused now; the event once the tree is frozen */
	if (!paused || r == 1)
		events_emit(b->ev, paused ? "pause" : "resume", resume ?
			    json_pack("{s:s}", "reason", resume) : NULL);
	if (!paused && !calls_running(b))
		arm_idle(b);
	return 0;
}

/* The freeze a pause asked for did not take: running again, and why. */
static void pause_failed(struct corral_box *b, const struct corral_err *err)
{
	b->state = CORRAL_BOX_IDLE;
	events_emit(b->ev, "resume", json_pack("{s:s+}", "reason",
		    "the freeze of the pause did not complete, the sandbox runs "
		    "again: ", err->msg));
	if (!calls_running(b))
		arm_idle(b);
}

/* ---- idle and the tick ------------------------------------------------------ */

static void idle_frozen(struct corral_box *b);

static void on_idle(evutil_socket_t fd, short what, void *arg)
{
	struct corral_box *b = arg;
	struct corral_err err;
	struct cg_stats st = { 0 };

	(void)fd;
	(void)what;
	drop_event(&b->ev_idle);
	if (b->state != CORRAL_BOX_IDLE || calls_running(b))
		return;
	/* a background process still at work keeps the box awake */
	cg_stats(b->cg, &st);
	if (st.valid && st.cpu_ns - b->idle_cpu_ns > BOX_IDLE_CPU_NS) {
		arm_idle(b);
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
		meter(b);
		b->frozen = true;
	}
	if (why == BF_IDLE && r == 0 && b->state == CORRAL_BOX_IDLE &&
	    !calls_running(b))
		idle_frozen(b);
	else if (why == BF_PAUSE && b->state == CORRAL_BOX_PAUSED && r == 0)
		events_emit(b->ev, "pause", NULL);
	else if (why == BF_PAUSE && b->state == CORRAL_BOX_PAUSED)
		pause_failed(b, err);
	else if (why == BF_HALT && b->state == CORRAL_BOX_HALTED)
		halt_record(b, r == 0);
}

static void arm_idle(struct corral_box *b)
{
	struct timeval tv = tv_ms(b->o.idle_freeze_ms);
	struct cg_stats st = { 0 };

	if (!b->o.idle_freeze_ms || b->state != CORRAL_BOX_IDLE ||
	    cg_mode(b->cg) == CG_NONE)
		return;
	drop_event(&b->ev_idle);
	cg_stats(b->cg, &st);
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
	if (!calls_running(b))
		arm_idle(b);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct corral_box *b = arg;
	struct abort_verdict v = { 0 };

	(void)fd;
	(void)what;
	if (b->frozen || b->state == CORRAL_BOX_HALTED)
		return;
	meter(b);
	sweep_lingering(b, false);
	if (b->abort && abort_check_usage(b->abort, corral_now_ms() - b->t_created,
					  b->cpu_ns / 1000000, true, &v)) {
		json_t *evidence = v.evidence;

		v.evidence = NULL;
		box_halt(b, v.criterion, v.reason, evidence);
	}
}

/* ---- init's messages ------------------------------------------------------- */

static void box_died(struct corral_box *b)
{
	struct corral_call *c, *next;
	bool was_up = b->state != CORRAL_BOX_DEAD &&
		      b->state != CORRAL_BOX_HALTED;
	bool starting = b->state == CORRAL_BOX_STARTING;

	drop_event(&b->ev_ctl);
	drop_event(&b->ev_exit);
	drop_event(&b->ev_idle);
	drop_event(&b->ev_tick);
	close_fd(&b->ctl);
	meter(b);
	if (b->state != CORRAL_BOX_HALTED)
		b->state = CORRAL_BOX_DEAD;
	for (c = b->calls; c; c = next) {
		next = c->next;
		call_finish(c);
	}
	if (starting && b->o.on_ready) {
		struct corral_err err;

		corral_set_err(&err, -EIO, "the sandbox's init died while starting");
		b->o.on_ready(b->o.arg, b, &err);
		return;
	}
	if (was_up) {
		events_emit(b->ev, "sandbox.died", json_pack("{s:s}", "reason",
			    "the sandbox's init died"));
		if (b->o.on_dead)
			b->o.on_dead(b->o.arg, b);
	}
}

static void on_tripwire(void *arg, const char *path, pid_t pid, const char *how,
			const char *group)
{
	struct corral_box *b = arg;
	json_t *o = json_pack("{s:s, s:i, s:s, s:s}", "path", path, "pid", (int)pid,
			      "how", how, "reason",
			      "a decoy file planted by the policy was touched");
	struct corral_call *only = NULL;

	if (o && group[0])	/* read while the opener still waited */
		json_object_set_new(o, EVENTS_KEY_GROUP, json_string(group));
	/* inotify names no pid: the call is known only if one call runs */
	if (o && pid <= 0 && calls_running(b) == 1) {
		for (only = b->calls; only && only->done; only = only->next)
			;
		json_object_set_new(o, "call", json_string(only->tool_call));
		json_object_set_new(o, "attributed", json_string("the only call "
				    "running when the file was touched"));
	}
	events_emit(b->ev, "tripwire", o);
}

static void box_ready(struct corral_box *b, int landlock_abi)
{
	struct corral_err err = { 0 };
	struct timeval tick = tv_ms(BOX_TICK_MS);

	b->landlock_abi = landlock_abi;
	if (b->p->abort.ntripwires) {
		const char *over = NULL;

		for (size_t i = 0; i < b->p->abort.ntripwires && !over; i++)
			over = tripwire_bind_over(b->p, b->p->abort.tripwires[i]);
		if (over)
			corral_set_err(&err, -EINVAL, "a tripwire lies under the "
				       "bind on %s", over);
		else if (b->rootfd < 0)
			corral_set_err(&err, -EBADF, "the sandbox sent no root");
		else
			b->tripwire = tripwire_start_at(b->base, b->rootfd,
					(const char *const *)b->p->abort.tripwires,
					b->p->abort.ntripwires, 0, on_tripwire, b, &err);
		events_emit(b->ev, "tripwire.armed", json_pack("{s:s, s:i, s:s}",
			    "mode", b->tripwire ? tripwire_mode(b->tripwire) : "none",
			    "files", (int)b->p->abort.ntripwires,
			    "detail", b->tripwire ? "" : err.msg));
	}
	if (b->sync_wr >= 0 && send(b->sync_wr, "t", 1, MSG_NOSIGNAL) != 1) {
		/* init died: its exit is handled by on_exit */
	}
	close_fd(&b->sync_wr);
	b->state = CORRAL_BOX_IDLE;
	b->t_mark = corral_now_ms();
	b->ev_tick = event_new(b->base, -1, EV_PERSIST, on_tick, b);
	if (b->ev_tick)
		event_add(b->ev_tick, &tick);
	events_emit(b->ev, "sandbox.ready", json_pack("{s:i, s:s, s:i}",
		    "landlock_abi", landlock_abi, "limits", cg_mode_name(b->cg),
		    "pid", (int)b->pid));
	arm_idle(b);
	arm_spare(b);
	if (b->o.on_ready)
		b->o.on_ready(b->o.arg, b, NULL);
}

static void handle_msg(struct corral_box *b, const struct child_msg *m)
{
	struct corral_call *c;
	struct corral_err err;

	switch (m->kind) {
	case MSG_READY:
		box_ready(b, m->landlock_abi);
		break;
	case MSG_SETUP_FAILED:
		if (b->state == CORRAL_BOX_STARTING) {
			b->state = CORRAL_BOX_DEAD;
			corral_set_err(&err, m->code ? m->code : -EIO, "%.*s",
				       (int)sizeof(m->text) - 1, m->text);
			drop_event(&b->ev_ctl);
			if (b->o.on_ready)
				b->o.on_ready(b->o.arg, b, &err);
		}
		break;
	case MSG_STARTED:
		c = call_by_id(b, m->id);
		if (!c || c->done)
			break;
		if (m->code < 0) {
			c->fail = (struct exec_fail){ EXEC_STAGE_EXEC, -m->code };
			c->exited = true;
			call_finish(c);
			break;
		}
		c->spid = m->code;
		c->started = true;
		announce(c);
		break;
	case MSG_CALL_EXITED:
		c = call_by_id(b, m->id);
		if (c && !c->done)
			call_exited(c, m->code);
		break;
	}
}

static void on_ctl(evutil_socket_t fd, short what, void *arg)
{
	struct corral_box *b = arg;
	struct child_msg m;
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &m, sizeof(m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm;
	ssize_t n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);

	(void)what;
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		box_died(b);
		return;
	}
	cm = CMSG_FIRSTHDR(&mh);
	if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
		int nfd;

		memcpy(&nfd, CMSG_DATA(cm), sizeof(int));
		if (n == sizeof(m) && m.kind == MSG_NOTIFY_FD && !b->sensor)
			b->sensor = sensor_start(b->base, nfd, b->ev);
		else if (n == sizeof(m) && m.kind == MSG_ROOT_FD && b->rootfd < 0)
			b->rootfd = nfd;
		else
			close(nfd);
		return;
	}
	if (n == sizeof(m))
		handle_msg(b, &m);
}

static void on_exit_ready(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	box_died(arg);
}

/* ---- create and destroy ----------------------------------------------------- */

static int check_id(const char *id, struct corral_err *err)
{
	size_t n = id ? strlen(id) : 0;

	if (n == 0 || n > BOX_ID_MAX || id[0] == '.' ||
	    strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		   "0123456789._-") != n)
		return corral_set_err(err, -EINVAL, "bad sandbox id \"%.64s\": 1 to "
				      "%d of [A-Za-z0-9._-]", id ? id : "", BOX_ID_MAX);
	return 0;
}

/*
 * The sandbox failed while we were still starting it: if its init said
 * why, that is the error worth reporting, not the broken pipe we met.
 */
static void spawn_failed(struct corral_box *b, struct corral_err *err)
{
	struct child_msg m;

	syscall(SYS_pidfd_send_signal, b->pidfd, SIGKILL, NULL, 0);
	waitpid(b->pid, NULL, 0);
	b->pid = -1;
	while (b->ctl >= 0 && recv(b->ctl, &m, sizeof(m), MSG_DONTWAIT) == sizeof(m)) {
		if (m.kind == MSG_SETUP_FAILED) {
			m.text[sizeof(m.text) - 1] = '\0';
			corral_set_err(err, m.code ? m.code : -EIO, "%s", m.text);
			return;
		}
	}
}

static int box_spawn(struct corral_box *b, struct corral_err *err)
{
	int sync[2] = { -1, -1 }, msg[2] = { -1, -1 }, r;
	struct child_ctx c = { 0 };

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sync) < 0 ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, msg) < 0) {
		r = corral_set_err(err, -errno, "socketpair: %s", strerror(errno));
		goto out;
	}
	c.p = b->p;
	c.envp = b->envp;
	c.caller_root = geteuid() == 0;
	c.cg_none = cg_mode(b->cg) == CG_NONE;
	c.serve = true;
	c.sync_rd = sync[0];
	c.msg_wr = msg[1];
	c.out_wr = c.err_wr = -1;
	b->pid = syscall(SYS_clone, CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID |
			 CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_PIDFD |
			 SIGCHLD, NULL, &b->pidfd, NULL, 0);
	if (b->pid < 0) {
		r = corral_set_err(err, -errno, "cannot create the namespaces: %s",
				   strerror(errno));
		goto out;
	}
	if (b->pid == 0)
		sandbox_child(&c);
	close_fd(&sync[0]);
	close_fd(&msg[1]);
	b->ctl = msg[0];
	msg[0] = -1;
	r = ns_write_id_maps(b->pid, b->host_uid, b->host_gid, err);
	if (r == 0 && b->p->net == CORRAL_NET_PROXY)
		r = proxy_start(b->base, b->pid, b->p, b->ev, &b->px, err);
	if (r == 0 && send(sync[1], "g", 1, MSG_NOSIGNAL) != 1)
		r = corral_set_err(err, -errno, "cannot start the sandbox: %s",
				   strerror(errno));
	if (r == 0)
		r = cg_attach(b->cg, b->pid, err);
	if (r == 0 && send(sync[1], "c", 1, MSG_NOSIGNAL) != 1)
		r = corral_set_err(err, -errno, "cannot start the sandbox: %s",
				   strerror(errno));
	if (r == 0 && b->p->abort.ntripwires) {
		b->sync_wr = sync[1];	/* answered on READY */
		sync[1] = -1;
	}
	if (r == 0) {
		b->ev_ctl = event_new(b->base, b->ctl, EV_READ | EV_PERSIST, on_ctl, b);
		b->ev_exit = event_new(b->base, b->pidfd, EV_READ, on_exit_ready, b);
		if (!b->ev_ctl || !b->ev_exit || event_add(b->ev_ctl, NULL) < 0 ||
		    event_add(b->ev_exit, NULL) < 0)
			r = corral_set_err(err, -ENOMEM, "cannot watch the sandbox");
	}
	if (r < 0 && b->pid > 0)
		spawn_failed(b, err);
out:
	close_fd(&sync[0]);
	close_fd(&sync[1]);
	close_fd(&msg[0]);
	close_fd(&msg[1]);
	return r;
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
	r = check_id(o->id, err);
	if (r == 0 && p->disk_bytes == 0)
		r = corral_set_err(err, -EINVAL, "limits.disk must be > 0");
	if (r == 0 && p->workspace) {
		struct stat st;

		if (stat(p->workspace, &st) < 0)
			r = corral_set_err(err, -EINVAL, "workspace %s: %s",
					   p->workspace, strerror(errno));
		else if (!S_ISDIR(st.st_mode))
			r = corral_set_err(err, -EINVAL, "workspace %s: not a "
					   "directory", p->workspace);
	}
	b = r == 0 ? calloc(1, sizeof(*b)) : NULL;
	if (!b) {
		if (r == 0)
			r = corral_set_err(err, -ENOMEM, "out of memory");
		corral_policy_free(p);
		free(p);
		return r;
	}
	b->base = base;
	b->p = p;
	b->o = *o;
	snprintf(b->id, sizeof(b->id), "%s", o->id);
	b->o.id = b->id;
	b->state = CORRAL_BOX_STARTING;
	b->pidfd = b->ctl = b->sync_wr = b->rootfd = -1;
	b->t_created = b->t_mark = corral_now_ms();
	ns_pick_ids(p, &b->host_uid, &b->host_gid);
	b->envp = sandbox_env(p);
	if (!b->envp) {
		r = corral_set_err(err, -ENOMEM, "out of memory");
		goto fail;
	}
	r = events_new(&b->ev, o->log ? o->log->log : NULL, b->id, err);
	if (r < 0)
		goto fail;
	events_set_attributor(b->ev, attribute, b);
	if (abort_any(&p->abort)) {
		b->abort = abort_new(&p->abort);
		if (!b->abort) {
			r = corral_set_err(err, -ENOMEM, "out of memory");
			goto fail;
		}
	}
	events_set_hook(b->ev, on_event, b);
	/* the daemon's pid in the name: a restart removes what a crash left */
	snprintf(name, sizeof(name), "%d-%s", (int)getpid(), b->id);
	r = cg_create(&b->cg, name, p, CG_V2_ID, err);
	if (r == 0)
		r = box_spawn(b, err);
	if (r < 0)
		goto fail;
	events_emit(b->ev, "sandbox.create", json_pack("{s:s, s:s}", "limits",
		    cg_mode_name(b->cg), "net", p->net == CORRAL_NET_PROXY ?
		    "proxy" : "none"));
	*out = b;
	return 0;
fail:
	corral_box_destroy(b);
	return r;
}

/*
 * What a destroyed box leaves to the kernel: its init's exit (the
 * namespaces' teardown takes milliseconds) and then its cgroups.  Reaped
 * on the loop, so that a destroy does not hold every other request.
 */
struct reaper {
	pid_t pid;
	int pidfd;
	struct event *ev;
	struct cg *cgs[2 * LINGER_MAX + 1];	/* calls' groups first, the box's last */
	size_t ncgs;
};

static void reap(struct reaper *r)
{
	if (r->pid > 0)
		waitpid(r->pid, NULL, 0);
	for (size_t i = 0; i < r->ncgs; i++)
		cg_destroy(r->cgs[i]);
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
	if (r->ncgs < sizeof(r->cgs) / sizeof(r->cgs[0]) - 1)
		r->cgs[r->ncgs++] = *cg;
	else
		cg_destroy(*cg);	/* more than we keep: now */
	*cg = NULL;
}

void corral_box_destroy(struct corral_box *b)
{
	struct reaper *r;
	bool started;

	if (!b)
		return;
	started = b->state != CORRAL_BOX_STARTING;
	/* a halt whose freeze had not completed is still recorded */
	if (b->freezing == BF_HALT) {
		b->freezing = BF_NONE;
		halt_record(b, false);
	}
	drop_event(&b->ev_ctl);
	drop_event(&b->ev_exit);
	drop_event(&b->ev_tick);
	drop_event(&b->ev_idle);
	drop_event(&b->ev_spare);
	drop_event(&b->ev_sweep);
	r = calloc(1, sizeof(*r));
	if (b->pid > 0)
		kill_all(b);
	if (b->frozen || b->freezing) {	/* the killed must run to die */
		struct corral_err err;

		set_thawed(b, &err);
		b->frozen = false;
	}
	b->state = CORRAL_BOX_DEAD;	/* nothing may arm a timer now */
	/* every call still running gets its end, and its caller an answer */
	b->gone = "the sandbox was destroyed while the call ran";
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
	sweep_lingering(b, true);
	if (b->ev && started)
		events_emit(b->ev, "sandbox.destroy", NULL);
	sensor_free(b->sensor);
	tripwire_free(b->tripwire);
	proxy_free(b->px);
	close_fd(&b->ctl);
	close_fd(&b->sync_wr);
	close_fd(&b->rootfd);
	if (b->ev)
		events_set_hook(b->ev, NULL, NULL);
	abort_free(b->abort);
	events_close(b->ev);
	if (r) {
		r->pid = b->pid;
		r->pidfd = b->pidfd;
		b->pidfd = -1;
		reaper_add(r, &b->cg);
		if (r->pid > 0 && r->pidfd >= 0)
			r->ev = event_new(b->base, r->pidfd, EV_READ, on_reap, r);
		if (!r->ev || event_add(r->ev, NULL) < 0)
			reap(r);	/* no loop to wait on: here and now */
	} else {
		if (b->pid > 0)
			waitpid(b->pid, NULL, 0);
		cg_destroy(b->cg);
	}
	close_fd(&b->pidfd);
	/* nothing of the calls' ends may have left a timer on b */
	drop_event(&b->ev_sweep);
	drop_event(&b->ev_spare);
	drop_event(&b->ev_idle);
	sandbox_env_free(b->envp);
	free(b->halt_text);
	json_decref(b->halt_evidence);
	corral_policy_free(b->p);
	free(b->p);
	free(b);
}

/* ---- files ------------------------------------------------------------------- */

/*
 * Everything a file operation touches is resolved by the kernel from the
 * sandbox's root: RESOLVE_IN_ROOT keeps ".." and absolute symlinks inside,
 * RESOLVE_NO_SYMLINKS refuses any symlink the agent planted, so no path
 * string the sandbox could swap is ever walked by us.  The fs uid is the
 * sandbox user's: as root we would otherwise read what the agent cannot.
 */
static int as_agent(struct corral_box *b, bool on)
{
	if (geteuid() != 0)
		return 0;
	setfsgid(on ? b->host_gid : 0);
	setfsuid(on ? b->host_uid : 0);
	return 0;
}

/*
 * A halted sandbox's files are evidence: readable while it is held
 * frozen, never changed; once it is killed its mounts are gone with it.
 */
static int check_path(struct corral_box *b, const char *path, bool write,
		      struct corral_err *err)
{
	if (b->state == CORRAL_BOX_HALTED && b->killed)
		return corral_set_err(err, -EPERM, "halted: %s; the sandbox was "
				      "killed and its files went with it",
				      b->halt_reason);
	if (b->state == CORRAL_BOX_HALTED && write)
		return corral_set_err(err, -EPERM, "halted: %s; its files can be "
				      "read, not changed", b->halt_reason);
	if (b->rootfd < 0 || b->state == CORRAL_BOX_DEAD)
		return corral_set_err(err, -ESRCH, "the sandbox is dead: its files "
				      "went with it");
	if (!path || path[0] != '/')
		return corral_set_err(err, -EINVAL, "path must be absolute inside "
				      "the sandbox (got \"%.200s\")", path ? path : "");
	if (strlen(path) >= 4096)
		return corral_set_err(err, -ENAMETOOLONG, "path is over 4095 bytes");
	return 0;
}

static int open_in_root(struct corral_box *b, const char *path, uint64_t flags,
			uint64_t mode, struct corral_err *err)
{
	struct open_how how = {
		.flags = flags | O_CLOEXEC | (flags & O_PATH ? 0 : O_NOCTTY),
		.mode = mode,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS |
			   RESOLVE_NO_MAGICLINKS,
	};
	struct statfs sf;
	int fd, e;

	if (!(flags & O_CREAT))
		how.mode = 0;
	as_agent(b, true);
	fd = syscall(SYS_openat2, b->rootfd, path, &how, sizeof(how));
	e = errno;
	as_agent(b, false);
	if (fd < 0)
		return corral_set_err(err, -e, "%.300s: %s", path, e == ELOOP ?
				      "a symlink is in the path (symlinks are "
				      "never followed)" : e == EXDEV ?
				      "the path leaves the sandbox" : strerror(e));
	if (fstatfs(fd, &sf) == 0 && (sf.f_type == PROC_SUPER_MAGIC ||
				      sf.f_type == SYSFS_MAGIC)) {
		close(fd);
		return corral_set_err(err, -EACCES, "%.300s: /proc and /sys are "
				      "not served", path);
	}
	return fd;
}

/*
 * The directory a file is in, resolved as the file will be: /proc and
 * /sys are refused there, before the file's own permissions could give a
 * different answer.
 */
static int check_parent(struct corral_box *b, const char *path,
			struct corral_err *err)
{
	const char *slash = strrchr(path, '/');
	char dir[4096];
	int fd;

	snprintf(dir, sizeof(dir), "%.*s", slash > path ? (int)(slash - path) : 1, path);
	fd = open_in_root(b, dir, O_PATH | O_DIRECTORY, 0, err);
	if (fd < 0)
		return fd;
	close(fd);
	return 0;
}

int corral_box_open(struct corral_box *b, const char *path, int flags,
		    int *fd, struct corral_err *err)
{
	bool write = (flags & O_ACCMODE) != O_RDONLY;
	struct stat st;
	int r;

	*fd = -1;
	r = check_path(b, path, write, err);
	if (r == 0)
		r = check_parent(b, path, err);
	if (r < 0)
		return r;
	/* no O_TRUNC before we know it is a regular file; no FIFO may block us */
	r = open_in_root(b, path, (write ? O_WRONLY | O_CREAT : O_RDONLY) |
			 O_NONBLOCK | O_NOFOLLOW, 0644, err);
	if (r < 0)
		return r;
	if (fstat(r, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(r);
		return corral_set_err(err, S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL,
				      "%.300s: not a regular file", path);
	}
	if (write && ftruncate(r, 0) < 0) {
		int e = errno;

		close(r);
		return corral_set_err(err, -e, "%.300s: %s", path, strerror(e));
	}
	fcntl(r, F_SETFL, write ? O_WRONLY : O_RDONLY);
	*fd = r;
	return 0;
}

/* The parent directory, resolved in the root, and the last component. */
static int open_parent(struct corral_box *b, const char *path, char *dir,
		       size_t len, const char **base, struct corral_err *err)
{
	const char *slash;
	int r;

	r = check_path(b, path, true, err);
	if (r < 0)
		return r;
	slash = strrchr(path, '/');
	*base = slash + 1;
	if (!**base || !strcmp(*base, ".") || !strcmp(*base, ".."))
		return corral_set_err(err, -EINVAL, "%.300s: names no file", path);
	snprintf(dir, len, "%.*s", (int)(slash - path) ? (int)(slash - path) : 1,
		 path);
	return open_in_root(b, dir, O_PATH | O_DIRECTORY, 0, err);
}

int corral_box_unlink(struct corral_box *b, const char *path,
		      struct corral_err *err)
{
	char dir[4096];
	const char *base;
	struct stat st;
	int dfd, r = 0;

	dfd = open_parent(b, path, dir, sizeof(dir), &base, err);
	if (dfd < 0)
		return dfd;
	as_agent(b, true);
	if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    unlinkat(dfd, base, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) < 0)
		r = -errno;
	as_agent(b, false);
	close(dfd);
	if (r < 0)
		return corral_set_err(err, r, "%.300s: %s", path, strerror(-r));
	return 0;
}

int corral_box_list(struct corral_box *b, const char *path,
		    struct corral_dirent **out, size_t *n, struct corral_err *err)
{
	struct corral_dirent *v = NULL;
	struct dirent *de;
	size_t cap = 0;
	DIR *d;
	int fd, r;

	*out = NULL;
	*n = 0;
	r = check_path(b, path, false, err);
	if (r < 0)
		return r;
	fd = open_in_root(b, path, O_RDONLY | O_DIRECTORY, 0, err);
	if (fd < 0)
		return fd;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return corral_set_err(err, -errno, "%.300s: %s", path, strerror(errno));
	}
	as_agent(b, true);
	while ((de = readdir(d))) {
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (*n == cap) {
			struct corral_dirent *g = realloc(v, (cap = cap ? cap * 2 : 32) *
							  sizeof(*v));
			if (!g) {
				r = corral_set_err(err, -ENOMEM, "out of memory");
				break;
			}
			v = g;
		}
		memset(&v[*n], 0, sizeof(v[*n]));
		snprintf(v[*n].name, sizeof(v[*n].name), "%s", de->d_name);
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
			v[*n].type = S_ISREG(st.st_mode) ? 'f' : S_ISDIR(st.st_mode) ?
				'd' : S_ISLNK(st.st_mode) ? 'l' : 'o';
			v[*n].size = st.st_size;
			v[*n].mode = st.st_mode & 07777;
		} else {
			v[*n].type = 'o';
		}
		(*n)++;
	}
	as_agent(b, false);
	closedir(d);
	if (r < 0) {
		free(v);
		*n = 0;
		return r;
	}
	*out = v;
	return 0;
}
