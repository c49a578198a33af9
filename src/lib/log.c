/*
 * log.c - the daemon's audit log, shared by its boxes (corral_log_*): one
 * hash chain, lines handed to an observer (the daemon's event streams).
 */
#include "internal.h"
#include "box.h"
#include "events.h"

#include <errno.h>
#include <stdlib.h>

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
		return corral_set_err(err, -ENOMEM, "out of memory for the audit log");
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
