/*
 * box.h - what the files of a long-lived sandbox share (box.c, call.c,
 * attribution.c, boxfiles.c, meter.c, log.c).  Not installed.
 */
#ifndef CORRAL_BOX_H
#define CORRAL_BOX_H

#include "internal.h"
#include "sandbox.h"
#include "outkeep.h"

#include <event2/event.h>
#include <jansson.h>

#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BOX_DRAIN_MS	250	/* output after the call's end, at most */
/* what the pipes still hold then, read at most (a pipe's longest: 1 MiB) */
#define BOX_DRAIN_MAX	(1024 * 1024)
#define BOX_TICK_MS	1000	/* meters, budgets */
/*
 * One process owns many boxes: each box's egress proxy may hold at most
 * this share of the open-files limit, and so may its running calls
 * (call.c), so that one sandbox's connections or one client's calls
 * leave the others (and the daemon's API) fds to work with.
 */
#define BOX_FD_SHARES	8
#define BOX_IDLE_CPU_NS	5000000	/* less CPU than this in the idle window: idle */
#define LINGER_MAX	64	/* calls remembered for attribution without cgroups */
/* lingering groups read by one pass on the loop (call.c's lingering_batch) */
#define LINGER_VISIT_MAX 32
/* every lingering group read once the box's own counts moved: twice in this at most */
#define LINGER_ALL_MS	8000
#define CALL_DENIALS_KEPT 100
#define CALL_STDIN_MAX	(1024 * 1024)	/* stdin given, not yet read */	/* denied events kept in a call's result */

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
	struct outkeep keep;
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
	uint32_t fid;		/* init's name for its process (MSG_FORK) */
	int gate;
	/* its process, from its "r" until the call is done (call.c, call_gate_pidfd) */
	int pidfd;
	struct cg_move *mv;	/* its process's move into cg, under way */
	/* the call, kept until its process is in its cgroup (then sent) */
	struct exec_msg *pend;
	int pend_fds[3];
	bool sent;
	bool live;		/* counted in calls_live (call.c) */
	struct event *ev_gate, *ev_timeout, *ev_drain, *ev_stdin;
	struct event *ev_start;	/* exec.start, after corral_box_exec returned */
	int in_fd;
	char *in_data;
	size_t in_len, in_off;
	bool in_eof;		/* no more stdin will come: close once written */
	char **argv;		/* copies: the caller's may go once exec returns */
	char *cwd;
	struct stream out, err;
	uint64_t cap;
	uint64_t t0;
	struct cg_stats st0;	/* the box's counters when the call began */
	uint64_t lost0;		/* the box's event lines lost before it began */
	json_t *denials;	/* this call's denied events, for its result */
	uint64_t ndenied;	/* all of them, kept in denials or not */
	json_t *order;		/* [[stream, bytes], ...] when asked for */
	bool started, exited, done, timed_out, halted, announced;
	bool in_exec;		/* sent within corral_box_exec: announce later */
	bool held;		/* output not read until the caller says so */
	bool paced;		/* output not read until its turn (outpace.c) */
	struct corral_call *pace_next, **pace_prev;	/* in its box's queue */
	uint64_t t_short;	/* its last short read, corral_now_ms() */
	bool default_timeout;	/* its timeout is limits.call_timeout's */
	char timeout_why[256];	/* corral_call_time_out's reason, or "" */
	int send_err;		/* errno of a send of the call that failed, or 0 */
	char move_why[192];	/* why a move of its process failed (killed then), or "" */
	int sent_sig;		/* the last signal corral_call_kill sent it, or 0 */
	/* once done: its group's OOM kills and refused forks, as last read */
	uint64_t seen_oom, seen_pids;
	/* while it runs: what finished calls' background met (call.c) */
	uint64_t bg_oom;
	char bg_said[CORRAL_ERR_MAX];
	/*
	 * What its group counted before the call reached a process in it: a
	 * process forked for it that died first (call_lost), the spare's
	 * (spare_died).  Not the call's: its verdict counts from these.
	 */
	uint64_t cg_oom0, cg_pids0;
	unsigned lost;		/* its processes that died before the call reached them */
	struct exec_fail fail;
	int status;
	struct corral_result res;
	/*
	 * With o.tty: the pty's master, from the call's process (out.fd
	 * reads a dup of it), the input waiting for room, a size to set.
	 */
	int pty;
	struct event *ev_pty_room;
	bool resize_pending, room_wanted, hungup;
};

/*
 * The next call's process, forked by init while the box idles and moved
 * into the spare group then, so that no cgroup write is on the call's
 * path (call.c).  It runs nothing until a call is sent on its gate.
 */
struct spare_proc {
	uint32_t fid;		/* 0: none */
	int gate;
	struct event *ev;
	struct cg *cg;		/* the group it is for (b->spare), or NULL */
	pid_t host_pid, spid;
	int pidfd;		/* from its "r" (call_gate_pidfd), or -1 */
	struct cg_move *mv;	/* its move into cg, under way */
};

/* A call's cgroup that outlived the call: its background processes. */
struct lingerer {
	struct lingerer *next;
	uint32_t id;
	char tool_call[128];
	struct cg *cg;
	uint64_t cgid;
	pid_t sid;		/* the call's session, where there is no cgroup */
	uint64_t seen_oom, seen_pids;	/* as corral_call's */
	struct corral_box *b;
	struct cg_move *rm;	/* its removal, under way off the loop */
	bool tried;		/* removed once, and found in use */
	bool removed;		/* its group is gone: the sweep unlinks it */
};

/*
 * Why the box's group is being frozen.  The kernel takes a moment (a busy
 * task stops at its next tick), so a freeze is asked for and finishes in
 * freeze_done() from the loop; a newer reason takes over one under way.
 */
enum box_freeze { BF_NONE, BF_IDLE, BF_PAUSE, BF_HALT, BF_SNAPSHOT };

struct corral_box {
	struct event_base *base;
	struct corral_policy *p;
	struct corral_box_opts o;
	char id[CORRAL_SANDBOX_ID_MAX + 1];
	enum corral_box_state state;
	struct cg *cg;
	struct sandbox *sb;	/* init, its sockets, proxy, sensor, tripwires */
	struct event *ev_tick, *ev_idle;
	struct events *ev;
	struct abort_state *abort;
	uint32_t next_id;
	uint32_t named;		/* the call box_attribute named last (its id), or 0 */
	struct corral_call *calls;
	struct lingerer *lingering;
	uint64_t bit_seen;	/* the box's own counts of limits that bit, last read */
	bool bit_pending;	/* they moved since every lingering group was read */
	uint64_t all_read_ms[2];	/* when every lingering group was read, the last two times */
	uint64_t host_kills;	/* the host's OOM kills then (oom_kills_host), v1 */
	int oom_efd;		/* v1: the OOM events of its limit (cg_oom_events_open), or -1 */
	uint64_t oom_first_ms, oom_last_ms;	/* when the first and last of them owed a read came, 0: none */
	/* outpace.c: its paced calls, in the order they paused, and their tick */
	struct corral_call *pace_head, **pace_tail;
	struct event *ev_pace;
	struct cg *spare;	/* the next call's group, made ahead */
	uint32_t spare_id;
	uint64_t spare_oom0, spare_pids0;	/* its counts, as a call's cg_oom0 */
	struct event *ev_spare;
	uint64_t spare_waited;	/* since when (ms) the next call's spare waits, or 0 */
	bool starting_counted;	/* in box.c's count of boxes starting */
	struct spare_proc sp;	/* the next call's process, forked ahead */
	uint64_t t_ended;	/* when the last call ended (ms), or 0 */
	bool calls_quick;	/* the last call came soon after the one before */
	uint32_t next_fid;
	struct event *ev_sweep;	/* empty call groups, removed soon after */
	char halt_reason[CORRAL_ERR_MAX];
	const char *gone;	/* why calls still running were ended */
	char gone_why[CORRAL_ERR_MAX];	/* gone's words, with the front end's */
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
	/* box_export.c: the workspace as the box started on it */
	int lowerfd;			/* the host workspace; -1: none */
	struct baseline *ws_base;	/* its files' stats then, for conflicts */
	struct box_snap *snap;		/* snapshot.c: waiting for the freeze */
	struct box_job *jobs;		/* box_job.c: workers under way */
	struct corral_box_work *works;		/* box_job.c: walks, unpacks, under way */
	/* in a worker's copy of the box only (box_job.c): */
	uint64_t job_rss0;		/* its resident bytes at the fork */
	uint64_t job_mem_max;		/* what it may take beyond its fork's, or 0 */
};

/* ---- box.c: the box's life: create, freeze, halt, idle, destroy ---- */

/* Thawed when the write returns (no wait); a freeze under way is dropped. */
int box_set_thawed(struct corral_box *b, struct corral_err *err);
/* Freeze for why: 1 frozen now, 0 under way (freeze_done), <0 cannot. */
int box_freeze(struct corral_box *b, enum box_freeze why, struct corral_err *err);
/* With no call running: freeze after the idle window, if the box idles. */
void box_arm_idle(struct corral_box *b);
/* The budgets weighed now (a call or a resume is about to run): true halted. */
bool box_budgets_spent(struct corral_box *b);

/* ---- box_job.c: slow work in a forked worker, off the loop ---- */

/* In the worker: the work; its answer (any bytes) written to answer. */
typedef int (*box_job_work_fn)(struct corral_box *b, void *arg, int answer);
/* From the loop: the worker's answer (NULL: none) and wait status; -1: killed
 * with the box. */
typedef void (*box_job_end_fn)(void *arg, const char *answer, size_t len, int status);
/* The worker keeps the box's layers, its answer and fds[] (nfds <= 8). */
int box_job_start(struct corral_box *b, box_job_work_fn work, box_job_end_fn end,
		  void *arg, const int *fds, size_t nfds, struct box_job **out,
		  struct corral_err *err);
void box_job_kill(struct box_job *j);	/* SIGKILL, reaped; end not called */
/* In the worker: the bytes it took beyond what it had at the fork, at its peak. */
uint64_t box_job_memory(const struct corral_box *b);
void box_jobs_end(struct corral_box *b);	/* at destroy: killed, ends told */
/*
 * A work in a worker, as corral_box_work_start's, that answers out_len
 * bytes of out besides r and err (an unpack's counts): fds[] kept in the
 * worker, fd handed to the work; the sentences name the work: who (its
 * worker) "ended without an answer", "the sandbox was destroyed while"
 * doing, "halted: REASON; " halted.
 */
#define BOX_WORK_OUT_MAX	64
struct box_work_how {
	const int *fds;
	size_t nfds;
	int fd;
	size_t out_len;
	const char *who, *doing, *halted;
};
typedef int (*box_work_fn)(struct corral_box *b, void *work_arg, int fd, void *out,
			   struct corral_err *err);
typedef void (*box_work_end_fn)(void *arg, int r, const void *out,
				const struct corral_err *err);
int box_work_start(struct corral_box *b, const struct box_work_how *how, box_work_fn work,
		   void *work_arg, box_work_end_fn end, void *arg,
		   struct corral_box_work **out, struct corral_err *err);
/* The worker killed, and its end told code and why (as a halt's). */
void box_work_stop(struct corral_box_work *w, int code, const char *why);
/* at a halt: every work stops (walks, unpacks), its end told why */
void box_works_halt(struct corral_box *b);

/* ---- box_export.c: the workspace's layers for diff and export ---- */

/* Open the workspace and record it (before the spawn); no workspace: 0. */
int box_ws_open(struct corral_box *b, struct corral_err *err);
void box_ws_close(struct corral_box *b);

/* ---- boxfiles.c: a tree beneath the sandbox's root ---- */

#define BOX_WALK_DEPTH	256	/* directories deep, before a walk gives up */
/*
 * names a walk holds at once, across the directories it is in: they are
 * read whole to be sorted, before the entry limit applies
 */
#define BOX_WALK_NAMES	131072

/*
 * Called for each entry of a walk (a directory before what it holds),
 * with the directory's fd and the entry's name in it: 0 goes on, anything
 * else stops the walk and is returned (negative: an error, err set).
 */
typedef int (*box_walk_fn)(void *arg, int dfd, const char *name,
			   const struct corral_entry *e, const struct stat *st);
/* 0 walked, 1 stopped at max entries, <0 err set; as the sandbox's user. */
int box_walk(struct corral_box *b, const char *path, bool recursive, size_t max,
	     box_walk_fn fn, void *arg, struct corral_err *err);
/* check_path and the open beneath the root, for boxarchive.c */
int box_path_ok(struct corral_box *b, const char *path, bool write,
		struct corral_err *err);
int box_open_in_root(struct corral_box *b, const char *path, uint64_t flags,
		     uint64_t mode, struct corral_err *err);
void box_as_agent(struct corral_box *b, bool on);

/* ---- snapshot.c ---- */

/* The freeze a snapshot waits for is done (r 0) or failed; ours: thaw after. */
void box_snap_frozen(struct corral_box *b, int r, const struct corral_err *err,
		     bool ours);
/* A thaw or destroy came first: the snapshot fails with code, why. */
void box_snap_cancel(struct corral_box *b, int code, const char *why);

/* ---- meter.c ---- */

/* Bring the meters up to now; called at every change of state. */
void box_meter(struct corral_box *b);

/* ---- call.c: one tool call's life ---- */

size_t box_calls_running(const struct corral_box *b);
/* The call's end: result, exec.end, on_done.  Once; on_done may free c. */
void call_finish(struct corral_call *c);
/* init's MSG_STARTED and MSG_CALL_EXITED, for the call they name. */
void call_msg(struct corral_box *b, const struct child_msg *m);
/* Make the next call's cgroup and process ahead, off that call's path. */
void call_arm_spare(struct corral_box *b);
/* whether a box of this process is starting (its create not answered) */
bool box_any_starting(void);
void box_left_starting(struct corral_box *b);
/* Let the spare process go (it exits: EOF on its gate); the box goes. */
void call_drop_spare(struct corral_box *b);
/*
 * Remove the groups of ended calls that are empty (all: every one, else
 * at most LINGER_VISIT_MAX of them, the next ones in turn).
 */
void call_sweep_lingering(struct corral_box *b, bool all);
/* Keep the box's counters' files open from its start, for its first call. */
void call_counters_keep(struct corral_box *b);
/* Close the box's counters' files once it is frozen or long idle. */
void call_counters_rest(struct corral_box *b);
/*
 * The next at most max lingerers into out, moved to the list's tail so
 * that the next batch starts past them: each one is in a batch within
 * ceil(n / max) of them.  Returns how many.
 */
size_t lingering_batch(struct corral_box *b, struct lingerer **out, size_t max);
/* A denial goes in the result of the call it is attributed to. */
void call_note_denial(struct corral_box *b, const char *type, json_t *event);
/*
 * A gate's message (its "r", "p" with a pty, an exec_fail, EOF) and what
 * came with it; and the pidfd the "r"'s sender is signalled by from then
 * on (-1: gone, or none to be had).  Not static: tests/unit_box.c.
 */
ssize_t call_gate_recv(int gate, struct exec_fail *f, pid_t *pid, int *fd,
		       int *pidfd);
int call_gate_pidfd(int gate, pid_t pid, int passed);

/* ---- attribution.c ---- */

/* events_attr_fn: name the call an event belongs to (arg: the box). */
bool box_attribute(void *arg, json_t *event);
/* A process in the sandbox (init's pid namespace) not init's, not of session sid. */
bool box_others_alive(pid_t init, pid_t sid);

/* outpace.c: a call's output read by its bytes, not by its writes */
bool outpace_due(struct corral_call *c, size_t n);
void outpace_pause(struct corral_call *c);
void outpace_end(struct corral_call *c);
void outpace_drop(struct corral_call *c);
void outpace_watch(struct corral_call *c);

static inline void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static inline void drop_event(struct event **ev)
{
	if (*ev)
		event_free(*ev);
	*ev = NULL;
}

static inline struct timeval tv_ms(uint64_t ms)
{
	return (struct timeval){ ms / 1000, (ms % 1000) * 1000 };
}

#endif
