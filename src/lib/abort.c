/*
 * abort.c - decisions written before the run, carried out during it.
 *
 * A detector that only raises an alarm leaves the decision to a person who
 * may be hours away.  The policy says in advance what ends a run: so many
 * denied connections, a sweep of distinct destinations within a window,
 * denied syscalls, a touched tripwire, a CPU or wall-time budget.  This
 * module only counts and says when; sandbox.c halts.
 */
#include "abort.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DESTS_KEPT 64		/* without a distinct criterion: evidence only */
#define EVIDENCE_MAX 16

/* A destination denied, and when it was last. */
struct dest {
	uint64_t at_ms;
	char *name;		/* "host:port" */
};

struct abort_state {
	struct corral_abort a;
	uint64_t denied_egress;
	uint64_t denied_syscalls;
	/*
	 * Each distinct destination denied once, oldest denial first: a
	 * repeat refreshes its entry and adds none, so repeating one denial
	 * cannot push the others of a sweep out of what is counted.  At most
	 * max_distinct_denied + 1 entries: the one more fires.
	 */
	struct dest *dests;
	size_t ndests, alloc, cap;
	json_t *last_syscalls;			/* evidence for syscall aborts */
	bool fired;
};

bool abort_any(const struct corral_abort *a)
{
	return a->max_denied_egress || a->max_distinct_denied ||
	       a->max_denied_syscalls || a->ntripwires || a->max_cpu_ms ||
	       a->max_wall_ms;
}

struct abort_state *abort_new(const struct corral_abort *a)
{
	struct abort_state *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->a = *a;		/* tripwire strings stay the policy's */
	s->cap = a->max_distinct_denied ? a->max_distinct_denied + 1 : DESTS_KEPT;
	s->last_syscalls = json_array();
	return s;
}

void abort_free(struct abort_state *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->ndests; i++)
		free(s->dests[i].name);
	free(s->dests);
	json_decref(s->last_syscalls);
	free(s);
}

static bool fire(struct abort_state *s, struct abort_verdict *v,
		 const char *criterion, json_t *evidence)
{
	if (s->fired) {
		json_decref(evidence);
		return false;
	}
	s->fired = true;
	v->criterion = criterion;
	v->evidence = evidence;
	return true;
}

/* Remove entry i, keeping the order. */
static void dest_drop(struct abort_state *s, size_t i)
{
	free(s->dests[i].name);
	memmove(&s->dests[i], &s->dests[i + 1], (s->ndests - i - 1) * sizeof(*s->dests));
	s->ndests--;
}

/*
 * Note a denial of name at now: its entry moves to the end.  Entries
 * older than the window go first; without a distinct criterion, the
 * oldest gives way when full (they are evidence, not a count).  False
 * when out of memory: that denial is not among them.
 */
static bool dest_note(struct abort_state *s, const char *name, uint64_t now)
{
	size_t i;
	char *copy;

	while (s->a.window_ms && s->ndests && now - s->dests[0].at_ms > s->a.window_ms)
		dest_drop(s, 0);
	for (i = 0; i < s->ndests; i++)
		if (!strcmp(s->dests[i].name, name))
			break;
	if (i < s->ndests) {
		copy = s->dests[i].name;
		memmove(&s->dests[i], &s->dests[i + 1], (s->ndests - i - 1) * sizeof(*s->dests));
		s->dests[s->ndests - 1] = (struct dest){ now, copy };
		return true;
	}
	if (s->ndests == s->cap)
		dest_drop(s, 0);	/* only without a distinct criterion */
	if (s->ndests == s->alloc) {
		size_t n = s->alloc ? s->alloc * 2 : 16;
		struct dest *grown;

		if (n > s->cap)
			n = s->cap;
		grown = realloc(s->dests, n * sizeof(*grown));
		if (!grown)
			return false;
		s->dests = grown;
		s->alloc = n;
	}
	copy = strdup(name);
	if (!copy)
		return false;
	s->dests[s->ndests++] = (struct dest){ now, copy };
	return true;
}

/* The distinct destinations denied (within the window), newest first. */
static json_t *dests_json(const struct abort_state *s)
{
	json_t *seen = json_array();

	for (size_t i = s->ndests; seen && i > 0 && s->ndests - i < DESTS_KEPT; i--)
		json_array_append_new(seen, json_string(s->dests[i - 1].name));
	return seen;
}

static bool note_egress(struct abort_state *s, json_t *event, struct abort_verdict *v)
{
	const char *host = json_string_value(json_object_get(event, "host"));
	json_int_t port = json_integer_value(json_object_get(event, "port"));
	uint64_t now = corral_now_ms();
	char dest[300];

	s->denied_egress++;
	snprintf(dest, sizeof(dest), "%s:%lld", host ? host : "?", (long long)port);
	dest_note(s, dest, now);
	if (s->a.max_distinct_denied && s->ndests > s->a.max_distinct_denied) {
		/*
		 * Without a window, the span from the first of them: "now" is
		 * the host's uptime, and "within 3.89e+04 s" explained nothing.
		 */
		if (s->a.window_ms)
			snprintf(v->reason, sizeof(v->reason), "probing: %zu distinct "
				 "destinations denied within the window of %.3g s (limit %llu)",
				 s->ndests, s->a.window_ms / 1000.0,
				 (unsigned long long)s->a.max_distinct_denied);
		else
			snprintf(v->reason, sizeof(v->reason), "probing: %zu distinct "
				 "destinations denied in %.3f s (limit %llu)", s->ndests,
				 (now - s->dests[0].at_ms) / 1000.0,
				 (unsigned long long)s->a.max_distinct_denied);
		return fire(s, v, "max_distinct_denied_destinations", dests_json(s));
	}
	if (s->a.max_denied_egress && s->denied_egress > s->a.max_denied_egress) {
		snprintf(v->reason, sizeof(v->reason),
			 "%llu connections denied (limit %llu), the last to %s",
			 (unsigned long long)s->denied_egress,
			 (unsigned long long)s->a.max_denied_egress, dest);
		return fire(s, v, "max_denied_egress", dests_json(s));
	}
	return false;
}

static bool ignored(const struct corral_abort *a, const char *name)
{
	for (size_t i = 0; name && i < a->nignore_syscalls; i++)
		if (!strcmp(a->ignore_syscalls[i], name))
			return true;
	return false;
}

static bool note_syscall(struct abort_state *s, json_t *event, struct abort_verdict *v)
{
	/* a tool's ordinary probe (policy: abort.ignore_syscalls) is no attack */
	if (ignored(&s->a, json_string_value(json_object_get(event, "syscall"))))
		return false;
	s->denied_syscalls++;
	if (json_array_size(s->last_syscalls) >= EVIDENCE_MAX)
		json_array_remove(s->last_syscalls, 0);
	json_array_append(s->last_syscalls, json_object_get(event, "syscall"));
	if (!s->a.max_denied_syscalls || s->denied_syscalls <= s->a.max_denied_syscalls)
		return false;
	snprintf(v->reason, sizeof(v->reason), "%llu syscalls denied (limit %llu), the last %s",
		 (unsigned long long)s->denied_syscalls,
		 (unsigned long long)s->a.max_denied_syscalls,
		 json_string_value(json_object_get(event, "syscall")) ?: "?");
	return fire(s, v, "max_denied_syscalls", json_deep_copy(s->last_syscalls));
}

/*
 * Denied calls the sensor could only count (sensor.c): each one toward
 * the limit, whatever it was; no name, so abort.ignore_syscalls cannot
 * spare them.
 */
static bool note_unseen(struct abort_state *s, json_t *event, struct abort_verdict *v)
{
	json_int_t n = json_integer_value(json_object_get(event, "count"));

	s->denied_syscalls += n > 0 ? (uint64_t)n : 1;
	if (!s->a.max_denied_syscalls || s->denied_syscalls <= s->a.max_denied_syscalls)
		return false;
	snprintf(v->reason, sizeof(v->reason), "%llu syscalls denied (limit %llu), the last "
		 "%lld interrupted before they could be read",
		 (unsigned long long)s->denied_syscalls,
		 (unsigned long long)s->a.max_denied_syscalls, (long long)(n > 0 ? n : 1));
	return fire(s, v, "max_denied_syscalls", json_deep_copy(s->last_syscalls));
}

bool abort_note(struct abort_state *s, const char *type, json_t *event,
		struct abort_verdict *v)
{
	if (!s || s->fired)
		return false;
	if (!strcmp(type, "egress.denied"))
		return note_egress(s, event, v);
	if (!strcmp(type, "syscall.denied"))
		return note_syscall(s, event, v);
	if (!strcmp(type, "syscall.unseen"))
		return note_unseen(s, event, v);
	if (!strcmp(type, "tripwire")) {
		snprintf(v->reason, sizeof(v->reason), "tripwire %s was touched",
			 json_string_value(json_object_get(event, "path")) ?: "?");
		return fire(s, v, "tripwire", json_deep_copy(event));
	}
	return false;
}

bool abort_check_usage(struct abort_state *s, uint64_t wall_ms, uint64_t cpu_ms,
		       bool cpu_ms_valid, struct abort_verdict *v)
{
	if (!s || s->fired)
		return false;
	if (s->a.max_cpu_ms && cpu_ms_valid && cpu_ms > s->a.max_cpu_ms) {
		/* to the millisecond: "1 s used (limit 1 s)" explains nothing */
		snprintf(v->reason, sizeof(v->reason), "CPU budget spent: %.3f s used (limit %.3g s)",
			 cpu_ms / 1000.0, s->a.max_cpu_ms / 1000.0);
		return fire(s, v, "max_cpu_seconds",
			    json_pack("{s:I}", "cpu_ms", (json_int_t)cpu_ms));
	}
	if (s->a.max_wall_ms && wall_ms > s->a.max_wall_ms) {
		snprintf(v->reason, sizeof(v->reason), "wall-time budget spent: %.3f s (limit %.3g s)",
			 wall_ms / 1000.0, s->a.max_wall_ms / 1000.0);
		return fire(s, v, "max_wall_seconds",
			    json_pack("{s:I}", "wall_ms", (json_int_t)wall_ms));
	}
	return false;
}
