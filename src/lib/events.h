/*
 * events.h - the supervisor's record: one JSON object a line, appended.
 */
#ifndef CORRAL_EVENTS_H
#define CORRAL_EVENTS_H

#include "internal.h"

#include <jansson.h>

struct events;

/* The first denials of a run kept for its result; the file has them all. */
#define EVENTS_DENIALS_KEPT 1000

typedef void (*events_hook_fn)(void *arg, const char *type, json_t *event);

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
 * sandbox and type first, and in the file "prev" last; egress.denied
 * events are also kept for the result (without "prev").
 */
void events_emit(struct events *ev, const char *type, json_t *fields);
/* The denials so far, as a JSON array (new reference). */
json_t *events_denials(struct events *ev);
/* Every later event carries "call": call (the tool call it belongs to). */
int events_set_call(struct events *ev, const char *call);
/* hook(arg, type, event) after each event is recorded (the abort rules). */
void events_set_hook(struct events *ev, events_hook_fn hook, void *arg);
size_t events_count_denied(const struct events *ev);
void events_close(struct events *ev);

#endif
