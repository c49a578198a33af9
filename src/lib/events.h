/*
 * events.h - the supervisor's record: one JSON object a line, appended.
 */
#ifndef CORRAL_EVENTS_H
#define CORRAL_EVENTS_H

#include "internal.h"

#include <jansson.h>

struct events;

/* A field the attributor reads and removes: a socket's cgroup2 id. */
#define EVENTS_KEY_CGROUP "socket_cgroup"
/* ... and the last part of a process's cgroup path, read while it lived. */
#define EVENTS_KEY_GROUP "cgroup_group"

/* The first denials of a run kept for its result; the file counts them all. */
#define EVENTS_DENIALS_KEPT 1000

typedef void (*events_hook_fn)(void *arg, const char *type, json_t *event);
/* A line as written to the file (no newline), and the event it holds. */
typedef void (*events_line_fn)(void *arg, const char *line, size_t len,
			       json_t *event);
/*
 * Set "call" (and "sandbox_pid") in an event from its "pid" or its
 * EVENTS_KEY_CGROUP; false when they belong to no known call.
 */
typedef bool (*events_attr_fn)(void *arg, json_t *event);

/*
 * One events file and its hash chain, shared by every struct events made
 * on it (a daemon's sandboxes all write one audit log, one chain).
 */
struct events_log;

int events_log_open(struct events_log **out, const char *path,
		    struct corral_err *err);
void events_log_put(struct events_log *log);	/* drop a reference */
/* errno of the last write that failed (a full disk), 0 once one succeeds */
int events_log_error(const struct events_log *log);
void events_log_observe(struct events_log *log, events_line_fn fn, void *arg);
/* Events of one sandbox into log (NULL: memory only); takes a reference. */
int events_new(struct events **out, struct events_log *log, const char *sandbox,
	       struct corral_err *err);

/*
 * Append to the events file at path (created 0600), continuing the hash
 * chain from its last line (see audit.h), so path must be readable too.
 * One writer per file: appending to one file from two struct events at
 * once breaks the chain.  path NULL: keep events in memory only (for the
 * result's denials).
 */
int events_open(struct events **out, const char *path, const char *sandbox,
		struct corral_err *err);
/*
 * Record one event; fields is stolen (may be NULL).  Adds seq, time,
 * sandbox and type first, and in the file "prev" last; denials are also
 * kept for the result (without "prev") where asked (events_keep_denials).
 * What a sandbox can repeat at will (denials, connections, tripwire hits)
 * is written whole only the first events.verbatim times of a kind and
 * within the budget; the rest is
 * counted into "<type>.summary" events (of, the kind's fields, count,
 * interval_ms, total), at most one per kind per interval, and carries no
 * seq.  The hook sees every event, written or only counted.
 */
void events_emit(struct events *ev, const char *type, json_t *fields);
/* The sandbox's policy for its log (NULL: the built-in default's). */
void events_set_limits(struct events *ev, const struct corral_event_limits *lim);
/*
 * Keep the first max denials for events_denials() (corral run's result:
 * EVENTS_DENIALS_KEPT).  None by default: a daemon's sandbox keeps its
 * calls' own (call.c), and a copy here was megabytes of the daemon's
 * memory a flooding sandbox, read by no one.
 */
void events_keep_denials(struct events *ev, size_t max);
/* The denials kept so far, as a JSON array (new reference). */
json_t *events_denials(struct events *ev);
/* Every later event carries "call": call (the tool call it belongs to). */
int events_set_call(struct events *ev, const char *call);
/* hook(arg, type, event) after each event is recorded (the abort rules). */
void events_set_hook(struct events *ev, events_hook_fn hook, void *arg);
void events_set_attributor(struct events *ev, events_attr_fn fn, void *arg);
/* limit.hit events for what grew between two readings of a cgroup. */
void events_limit_hits(struct events *ev, const char *call,
		       const struct cg_stats *before, const struct cg_stats *after,
		       const struct corral_policy *p, bool disk_full);
/*
 * limit.hit events for what a finished call's background processes met
 * (oom: of them OOM-killed; pids: their forks refused), naming that call
 * with "background": true.
 */
void events_background_hits(struct events *ev, const char *call, uint64_t oom,
			    uint64_t pids, const struct corral_policy *p);
/* "; disk limit 1 MiB reached: ..." after res->reason. */
void events_explain_disk(struct corral_result *res, const struct corral_policy *p);
/*
 * "; denied: connection to X (why); N denials ..." after res->reason.
 * d: the call's denials kept (the first is named); n: all of the call's;
 * so_far: the sandbox's, all calls together.
 */
void events_explain_denials(struct corral_result *res, json_t *d, size_t n,
			    size_t so_far, const struct corral_policy *p);
/* The next event's seq is last + 1 (a sandbox's events across daemons). */
void events_set_seq(struct events *ev, uint64_t last);
/* Denials so far, all of them, whether written whole or only counted. */
size_t events_count_denied(const struct events *ev);
/* "; N of them interrupted before they could be read", if any were */
void events_explain_unseen(struct corral_result *res, const struct events *ev);
/*
 * Lines the events file did not take: a write failed (a full disk, a
 * quota), counted since the log was opened, every sandbox writing to it
 * together; *first_errno says why the first failed.  0 without a file.
 * A sandbox that fills the file system its log is on (an rw bind there)
 * silences the record: the run must say so, not read as whole.
 */
uint64_t events_lost(const struct events *ev, int *first_errno);
/*
 * Lines of this sandbox's own (ev's) the file did not take, since ev was
 * made; *first_errno why the first was not.  A daemon's call says those
 * lost while it ran (call.c).  Once the file takes lines again, the first
 * written are "log.gap" lines, one a sandbox whose lines were lost: how
 * many, their seq and types, the calls they named, between when; no other
 * line is written before them, so a record that goes on after a gap says so.
 */
uint64_t events_lost_own(const struct events *ev, int *first_errno);
/* The events file's path; NULL for events kept in memory only. */
const char *events_file(const struct events *ev);
/*
 * Refuse (-EPERM, err says which bind) an events file that a writable
 * bind of *p would give the sandbox: the file bound itself, or lying in a
 * bound directory (by inode, however the paths name them).  The chain has
 * no key: through the bind the sandbox could rewrite its record, chain
 * and all, and a write of ours that failed (the bind's file system full)
 * continues the chain from the file's tail as the sandbox left it.
 */
int events_check_reach(const struct events *ev, const struct corral_policy *p,
		       struct corral_err *err);
/* Write the summaries still waiting now, as events_close() would. */
void events_flush(struct events *ev);
/* Writes the summaries still waiting, then frees ev. */
void events_close(struct events *ev);

#endif
