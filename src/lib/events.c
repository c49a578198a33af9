/*
 * events.c - every decision the supervisor makes, as one JSON line.
 *
 * Lines are appended with a single write(2) on an O_APPEND descriptor, so
 * concurrent runs appending to one file never interleave within a line.
 *
 * The lines form a hash chain (audit.h): each carries "prev", the SHA-256
 * of the line before it as written.  The chain lives in this struct, read
 * from the file's last line at open: one writer per file.  Two supervisors
 * appending to one file at once (two `corral run --events F` in parallel,
 * or two struct events on one path) each chain to their own last line and
 * the file no longer verifies.  One supervisor owns a log.
 *
 * A sandbox can repeat a denied call as fast as it can make a syscall, and
 * each denial used to be a line: seconds of denied mount() calls wrote tens
 * of MiB.  So what a sandbox can repeat at will is summarised (see "rated"
 * below): the first few events of a kind are written whole, then one
 * summary per kind per interval carries the count.  Past the sandbox's
 * budget of bytes, nothing it repeats is written whole any more.  The hook
 * (the abort criteria) and the result still see every event, written or not.
 */
#include "audit.h"
#include "events.h"

#include <errno.h>
#include <fcntl.h>
#include <nettle/sha2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/*
 * Lines the file did not take since the last one it did, one entry a
 * sandbox, said (a log.gap line each) before any line is written again.
 * Bounded: GAP_SANDBOXES entries, the rest one entry with no sandbox;
 * GAP_CALLS calls named an entry, the rest counted.
 */
#define GAP_SANDBOXES	64
#define GAP_CALLS	16

struct gap_entry {
	char *sandbox;		/* NULL: the sandboxes past GAP_SANDBOXES */
	uint64_t lost;		/* lines not written */
	uint64_t seq_first, seq_last;	/* of those that had one (0: none) */
	char since[64], until[64];	/* the first lost line's time, the last's */
	int err;		/* why the first was not written */
	json_t *types;		/* type -> lines of it lost */
	json_t *calls;		/* the calls those lines named */
	uint64_t calls_more;	/* lines naming a call past GAP_CALLS */
	json_t *denied;		/* what the lost denials named, GAP_CALLS of it */
};

/* One file and its chain; shared by every sandbox a daemon runs. */
struct events_log {
	int fd;
	char *path;
	char prev[AUDIT_HASH_HEX + 1];	/* hash of the file's last line */
	bool torn;		/* the file ends inside a line: begin with '\n' */
	bool resync;		/* a write failed: read the tail again first */
	int werr;		/* errno of the last failed write, 0 after a good one */
	uint64_t lost;		/* lines not written, a write failed (all told) */
	int lost_errno;		/* the first of those failures' errno */
	struct gap_entry *gap;	/* the lines lost since the last one written */
	size_t ngap;		/* entries in gap, one a sandbox */
	int refs;
	events_line_fn observer;	/* sees every line written */
	void *observer_arg;
};

/*
 * The events a sandbox can repeat at will, each of a kind named by its
 * fields: the syscall, the destination, the file.  Each kind's first
 * `verbatim` are written whole (capped), the rest counted into summaries.
 * Allowed connections each take a round trip to a host the policy allows:
 * they (and the masking of their answers) are written whole until the
 * budget, and only then counted.
 */
struct rated {
	const char *type, *summary;
	const char *key, *key2;		/* the fields that name a kind */
	bool capped;
};

static const struct rated rated_types[] = {
	{ "syscall.denied", "syscall.denied.summary", "syscall", NULL, true },
	/* drops the sensor counted (sensor.c): one kind, each its count */
	{ "syscall.unseen", "syscall.unseen.summary", "syscall", NULL, true },
	{ "egress.denied", "egress.denied.summary", "host", "port", true },
	{ "tripwire", "tripwire.summary", "path", NULL, true },
	{ "egress.allowed", "egress.allowed.summary", "host", "port", false },
	{ "egress.closed", "egress.closed.summary", "host", "port", false },
	{ "egress.tls_refused", "egress.tls_refused.summary", "host", "port", true },
	/* one a connection whose answer showed a secret: as many as it opens */
	{ "egress.masked", "egress.masked.summary", "host", "port", false },
	/* one a file an export held back: the sandbox writes as many as it likes */
	{ "export.held", "export.held.summary", "path", NULL, false },
};
#define NRATED (sizeof(rated_types) / sizeof(rated_types[0]))

/*
 * Kinds named one by one, per type; past them (a sweep of ports, DNS
 * queries for random names) the rest of a type are one kind, "other".
 */
#define KINDS_MAX	128
#define KIND_SLOTS	1024		/* a hash table, open addressing */
#define KIND_KEY_MAX	320

/*
 * Yet each destination of "other" is named once: 140 lookups of made-up
 * names, then the one that mattered, used to leave no line naming it.
 * The first event of each new one is written whole while the type's
 * whole lines of "other" are under a quarter of the budget (a flood of
 * names leaves the rest to everything else) and events.verbatim is not
 * 0 (counts only, as asked); past that, each summary of
 * "other" lists the new ones since the one before, up to NAMES_LISTED
 * (NAMES_BYTES), and counts the rest.  Which ones were named is kept as
 * 64 bits of their SHA-256 (a made-up name that passes for another is a
 * second preimage of those bits, 2^64 tries), at most SEEN_MAX / 2.
 */
#define SEEN_MIN	1024		/* slots, open addressing, half full at most */
#define SEEN_MAX	(1u << 16)	/* 512 KiB: past a 16 MiB budget's quarter */
#define NAMES_LISTED	32
#define NAMES_BYTES	4096

struct kind {
	const struct rated *r;
	char *key;		/* "mount", "evil.test:80"; NULL: the other kinds */
	json_t *names;		/* the fields that name it, as its first event had them */
	uint64_t total;		/* events of this kind, all */
	uint64_t whole;		/* written whole */
	uint64_t pending;	/* counted since the last summary */
	uint64_t since_ms;	/* when the first of those came */
	/* "other" only: its new destinations past its share of whole lines */
	uint64_t fresh_bytes;	/* its lines written whole, first of their kind */
	json_t *listed;		/* the new ones for its next summary */
	size_t listed_bytes;
	uint64_t unlisted;	/* events of new ones not listed since then */
};

/* The destinations of "other" kinds named in the log, by hash. */
struct seen {
	uint64_t *h;		/* 0: a free slot */
	size_t cap, n;
};

struct events {
	struct events_log *log;	/* NULL: memory only */
	char *sandbox;
	char *call;		/* the tool call, "call" in every event */
	events_hook_fn hook;	/* sees every event after it is written */
	void *hook_arg;
	events_attr_fn attr;	/* names the call of an event's pid */
	void *attr_arg;
	uint64_t seq;
	json_t *denials;
	size_t keep_denials;	/* at most this many in denials */
	uint64_t ndenied;	/* all denials, kept or not */
	uint64_t nunseen;	/* of them, the calls syscall.unseen counted */
	struct corral_event_limits lim;
	uint64_t bytes;		/* written for this sandbox */
	uint64_t lost;		/* its lines the file did not take */
	int lost_errno;		/* why the first of them was not taken */
	bool over;		/* the budget is reached: log.budget written */
	uint64_t next_due;	/* when a summary is due; UINT64_MAX: none */
	struct kind **slots;	/* KIND_SLOTS, made at the first rated event */
	size_t nkinds[NRATED];
	struct kind other[NRATED];
	struct seen seen;
	uint32_t metadata[NRATED];	/* of metadata_hosts, those written whole */
};

int events_log_open(struct events_log **out, const char *path,
		    struct corral_err *err)
{
	struct events_log *log = calloc(1, sizeof(*log));
	int r;

	*out = NULL;
	if (!log)
		return corral_set_err(err, -ENOMEM, "out of memory opening the events log %s",
				      path);
	log->refs = 1;
	log->fd = -1;
	log->path = strdup(path);
	if (!log->path) {
		free(log);
		return corral_set_err(err, -ENOMEM, "out of memory opening the events log %s",
				      path);
	}
	/* Read as well: the chain goes on from the file's last line. */
	log->fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY,
		       0600);
	if (log->fd < 0) {
		r = -errno;
		events_log_put(log);
		return corral_set_errno(err, -r, "events file %s", path);
	}
	r = audit_tail(log->fd, path, log->prev, &log->torn, err);
	if (r < 0) {
		events_log_put(log);
		return r;
	}
	*out = log;
	return 0;
}

static bool gap_say(struct events_log *log);
static void gap_free(struct events_log *log);

void events_log_put(struct events_log *log)
{
	if (!log || --log->refs > 0)
		return;
	/* the file may take it now: a gap said at the end, else in no line */
	if (log->fd >= 0 && log->ngap)
		gap_say(log);
	gap_free(log);
	if (log->fd >= 0)
		close(log->fd);
	free(log->path);
	free(log);
}

int events_log_error(const struct events_log *log)
{
	return log ? log->werr : 0;
}

void events_log_observe(struct events_log *log, events_line_fn fn, void *arg)
{
	log->observer = fn;
	log->observer_arg = arg;
}

int events_new(struct events **out, struct events_log *log, const char *sandbox,
	       struct corral_err *err)
{
	struct events *ev = calloc(1, sizeof(*ev));

	*out = NULL;
	if (!ev)
		return corral_set_err(err, -ENOMEM, "out of memory for the events of sandbox %s",
				      sandbox);
	ev->sandbox = strdup(sandbox);
	ev->denials = json_array();
	ev->next_due = UINT64_MAX;
	events_set_limits(ev, NULL);
	for (size_t i = 0; i < NRATED; i++)
		ev->other[i].r = &rated_types[i];
	if (!ev->sandbox || !ev->denials) {
		events_close(ev);
		return corral_set_err(err, -ENOMEM, "out of memory for the events of sandbox %s",
				      sandbox);
	}
	if (log) {
		ev->log = log;
		log->refs++;
	}
	*out = ev;
	return 0;
}

int events_open(struct events **out, const char *path, const char *sandbox,
		struct corral_err *err)
{
	struct events_log *log = NULL;
	int r;

	*out = NULL;
	if (path) {
		r = events_log_open(&log, path, err);
		if (r < 0)
			return r;
	}
	r = events_new(out, log, sandbox, err);
	events_log_put(log);
	return r;
}

/*
 * o as the next line of the chain.  "prev" is the last key: the line reads
 * as before (seq, time, sandbox, type, then the event's own fields), so
 * what greps a log for '"sandbox":"ID","type":"T"' still finds it, and it
 * ends in a fixed ',"prev":"<64 hex>"}' that a reader can strip off.
 */
static char *chained_text(struct events_log *log, json_t *o)
{
	static const char tail[] = ",\"" AUDIT_KEY_PREV "\":\"";
	size_t hl = strlen(log->prev), n;
	char *text = NULL, *body, *p;
	json_t *line;

	/*
	 * Most events: o's text with the tail spliced in before its '}', the
	 * same bytes as dumping a copy with "prev" added, without the copy
	 * (a hash table of a dozen keys made and freed for each line).
	 */
	if (!json_object_get(o, AUDIT_KEY_PREV) && json_object_size(o)) {
		body = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
		n = body ? strlen(body) : 0;
		if (n >= 2 && body[n - 1] == '}')
			text = malloc(n - 1 + sizeof(tail) - 1 + hl + sizeof("\"}"));
		if (text) {
			p = mempcpy(text, body, n - 1);
			p = mempcpy(p, tail, sizeof(tail) - 1);
			p = mempcpy(p, log->prev, hl);
			memcpy(p, "\"}", sizeof("\"}"));
		}
		free(body);
		return text;
	}
	/* one of its own named "prev" goes, and the chain's comes last */
	line = json_copy(o);	/* shallow: o is kept for the result */
	if (!line)
		return NULL;
	json_object_del(line, AUDIT_KEY_PREV);
	if (json_object_set_new(line, AUDIT_KEY_PREV, json_string(log->prev)) == 0)
		text = json_dumps(line, JSON_COMPACT | JSON_ENSURE_ASCII);
	json_decref(line);
	return text;
}

/*
 * One write(2) a line.  After a torn tail (a write cut short, found at open
 * or left by a failed write) the same write begins with '\n', so the torn
 * bytes end as a line of their own and this one's "prev" is their hash.
 * *cost: the bytes it tried to write.  False when the file did not take it.
 */
static bool put_line(struct events_log *log, json_t *o, size_t *cost)
{
	struct corral_err err;
	char *text, *buf;
	size_t len, n = 0;
	ssize_t w;
	bool ok;

	*cost = 0;
	if (log->resync && audit_tail(log->fd, log->path, log->prev, &log->torn,
				     &err) == 0)
		log->resync = false;
	text = chained_text(log, o);
	if (!text)
		return false;
	len = strlen(text);
	buf = malloc(len + 2);
	if (!buf) {
		free(text);
		return false;
	}
	if (log->torn)
		buf[n++] = '\n';
	memcpy(buf + n, text, len);
	n += len;
	buf[n++] = '\n';
	/* A full disk must not stop the sandbox's supervision: noted, no more. */
	w = write(log->fd, buf, n);
	if (w != (ssize_t)n)
		log->werr = w < 0 ? errno : ENOSPC;
	ok = w == (ssize_t)n && audit_hash(text, len, log->prev) == 0;
	if (ok) {
		log->torn = false;
		log->werr = 0;
		if (log->observer)
			log->observer(log->observer_arg, text, len, o);
	} else {
		log->resync = true;
	}
	free(buf);
	free(text);
	*cost = n;
	return ok;
}

/* ---- lines lost: counted, and said when the file takes lines again ------ */

static void gap_entry_free(struct gap_entry *g)
{
	free(g->sandbox);
	json_decref(g->types);
	json_decref(g->calls);
	json_decref(g->denied);
	memset(g, 0, sizeof(*g));
}

static void gap_free(struct events_log *log)
{
	for (size_t i = 0; i < log->ngap; i++)
		gap_entry_free(&log->gap[i]);
	free(log->gap);
	log->gap = NULL;
	log->ngap = 0;
}

/* The entry of sandbox sb: found, made, or past the bound the shared one. */
static struct gap_entry *gap_entry(struct events_log *log, const char *sb)
{
	struct gap_entry *g = NULL, *shared = NULL;

	if (!log->gap && !(log->gap = calloc(GAP_SANDBOXES + 1, sizeof(*log->gap))))
		return NULL;
	for (size_t i = 0; i < log->ngap; i++) {
		if (!log->gap[i].sandbox)
			shared = &log->gap[i];
		else if (!strcmp(log->gap[i].sandbox, sb))
			return &log->gap[i];
	}
	if (log->ngap < GAP_SANDBOXES) {
		g = &log->gap[log->ngap];
		g->sandbox = strdup(sb);
		if (!g->sandbox)
			return NULL;
		log->ngap++;
	} else if (shared) {
		g = shared;
	} else {
		g = &log->gap[log->ngap++];	/* the one past the bound */
	}
	if (!g->types)
		g->types = json_object();
	if (!g->calls)
		g->calls = json_array();
	if (!g->denied)
		g->denied = json_array();
	return g;
}

static bool gap_listed(json_t *calls, const char *call)
{
	size_t i;
	json_t *v;

	json_array_foreach(calls, i, v)
		if (!strcmp(json_string_value(v), call))
			return true;
	return false;
}

/*
 * What a lost denial named ("syscall mount", "evil.test:443"): the gap
 * says which were hidden, not only how many, GAP_CALLS of them.
 */
static void gap_denied(struct gap_entry *g, json_t *o, const char *type)
{
	const char *sc = json_string_value(json_object_get(o, "syscall"));
	const char *host = json_string_value(json_object_get(o, "host"));
	char what[160];

	if (!g->denied || json_array_size(g->denied) >= GAP_CALLS)
		return;
	/* a summary's count too: its kind named as its events' */
	if (!strncmp(type, "syscall.denied", strlen("syscall.denied")))
		snprintf(what, sizeof(what), "syscall %.100s", sc ? sc : "?");
	else if (!strncmp(type, "egress.denied", strlen("egress.denied")))
		snprintf(what, sizeof(what), "%.100s:%d", host ? host : "?",
			 (int)json_integer_value(json_object_get(o, "port")));
	else
		return;
	if (!gap_listed(g->denied, what))
		json_array_append_new(g->denied, corral_json_bytes(what, strlen(what)));
}

/* o was not written (err): counted into its sandbox's entry. */
static void gap_note(struct events_log *log, json_t *o, int err)
{
	const char *sb = json_string_value(json_object_get(o, "sandbox"));
	const char *type = json_string_value(json_object_get(o, "type"));
	const char *when = json_string_value(json_object_get(o, "time"));
	const char *call = json_string_value(json_object_get(o, "call"));
	json_int_t seq = json_integer_value(json_object_get(o, "seq"));
	struct gap_entry *g = gap_entry(log, sb ? sb : "");

	if (!g)
		return;
	if (!g->lost++) {
		g->err = err;
		snprintf(g->since, sizeof(g->since), "%s", when ? when : "?");
	}
	snprintf(g->until, sizeof(g->until), "%s", when ? when : "?");
	if (seq > 0 && (!g->seq_first || (uint64_t)seq < g->seq_first))
		g->seq_first = seq;
	if (seq > 0 && (uint64_t)seq > g->seq_last)
		g->seq_last = seq;
	if (type && g->types)
		json_object_set_new(g->types, type, json_integer(
				    json_integer_value(json_object_get(g->types, type)) + 1));
	if (type)
		gap_denied(g, o, type);
	if (!call || !g->calls || gap_listed(g->calls, call))
		return;
	if (json_array_size(g->calls) < GAP_CALLS)
		json_array_append_new(g->calls, json_string(call));
	else
		g->calls_more++;
}

/* The log.gap line of entry g: what was lost, whose, between when. */
static json_t *gap_object(const struct events_log *log, const struct gap_entry *g)
{
	char when[64], why[1024], seqs[64] = "";
	struct timespec ts;
	json_t *o;

	clock_gettime(CLOCK_REALTIME, &ts);
	utc_stamp(when, sizeof(when), &ts);
	if (g->seq_first)
		snprintf(seqs, sizeof(seqs), " (seq %llu to %llu)",
			 (unsigned long long)g->seq_first,
			 (unsigned long long)g->seq_last);
	snprintf(why, sizeof(why), "%llu event line%s of %s%s could not be written "
		 "to %.200s between %s and %s: %s; the record has a gap there, "
		 "and goes on from this line (\"types\": what was lost, \"calls\": "
		 "the calls those lines named)", (unsigned long long)g->lost,
		 g->lost == 1 ? "" : "s", g->sandbox ? "this sandbox" :
		 "sandboxes past the first 64 of this gap", seqs, log->path,
		 g->since, g->until, strerror(g->err ? g->err : EIO));
	/* the reason as bytes: a state directory's name need not be UTF-8 */
	o = json_pack("{s:s, s:s, s:s, s:I, s:s, s:s, s:s, s:O, s:O, s:o}",
		      "time", when, "sandbox", g->sandbox ? g->sandbox : "",
		      "type", "log.gap", "lost", (json_int_t)g->lost,
		      "since", g->since, "until", g->until,
		      "error", strerror(g->err ? g->err : EIO),
		      "types", g->types, "calls", g->calls,
		      "reason", corral_json_bytes(why, strlen(why)));
	if (o && g->seq_first) {
		json_object_set_new(o, "seq_first", json_integer((json_int_t)g->seq_first));
		json_object_set_new(o, "seq_last", json_integer((json_int_t)g->seq_last));
	}
	if (o && g->calls_more)
		json_object_set_new(o, "calls_more", json_integer((json_int_t)g->calls_more));
	if (o && json_array_size(g->denied))
		json_object_set(o, "denied", g->denied);
	if (o && !g->sandbox)
		json_object_set_new(o, "other_sandboxes", json_true());
	return o;
}

/*
 * Every entry's line, first of all lines once the file takes them again;
 * those written are dropped.  False while one is not written: the lines
 * after it wait (are lost too), so no line follows a gap that is unsaid,
 * whatever room a sandbox leaves (a short line fitting where this one
 * does not).
 */
static bool gap_say(struct events_log *log)
{
	size_t done = 0, cost;
	bool ok = true;
	json_t *o;

	while (done < log->ngap && ok) {
		/* out of memory for it: not said, rather than no record at all */
		o = gap_object(log, &log->gap[done]);
		ok = !o || put_line(log, o, &cost);
		json_decref(o);
		if (ok)
			gap_entry_free(&log->gap[done++]);
	}
	if (ok) {
		gap_free(log);
		return true;
	}
	/* the rest move up, to be said first next time */
	memmove(log->gap, log->gap + done, (log->ngap - done) * sizeof(*log->gap));
	memset(log->gap + log->ngap - done, 0, done * sizeof(*log->gap));
	log->ngap -= done;
	return false;
}

/*
 * o as the next line, after the gap's lines if lines were lost before.
 * Returns what it cost (the bytes tried); *ok: the file took it.
 */
static size_t write_line(struct events_log *log, json_t *o, bool *ok)
{
	size_t cost = 0;

	*ok = (!log->ngap || gap_say(log)) && put_line(log, o, &cost);
	if (!*ok) {
		if (!log->lost++)
			log->lost_errno = log->werr ? log->werr : EIO;
		gap_note(log, o, log->werr ? log->werr : EIO);
	}
	return cost;
}

/*
 * Every event says in a sentence what it means; the sites that know more
 * say more, these are for the rest.
 */
static const struct {
	const char *type, *reason;
} default_reasons[] = {
	{ "sandbox.create", "the sandbox is being built" },
	{ "sandbox.ready", "the sandbox's layers are in place; it accepts calls" },
	{ "sandbox.destroy", "the sandbox was destroyed: its processes killed, its cgroups and mounts removed" },
	{ "exec.start", "a tool call started" },
	{ "tripwire.armed", "the decoy files the policy names are planted and watched" },
	{ "pause", "paused by request: frozen until resumed, calls refused" },
	{ "resume", "resumed by request" },
	{ "egress.closed", "an allowed connection ended" },
	{ "egress.allowed", "a connection was allowed" },
	{ "egress.denied", "a connection was denied" },
	{ "syscall.denied", "a system call was denied" },
	{ "syscall.unseen", "denied system calls were interrupted before they could be read" },
	{ "signal.forwarded", "corral's caller sent this signal; corral passed it on to the command" },
};

static void default_reason(json_t *o, const char *type)
{
	if (json_object_get(o, "reason"))
		return;
	for (size_t i = 0; i < sizeof(default_reasons) / sizeof(default_reasons[0]); i++) {
		if (!strcmp(default_reasons[i].type, type)) {
			json_object_set_new(o, "reason",
					    json_string(default_reasons[i].reason));
			return;
		}
	}
	json_object_set_new(o, "reason", json_string("recorded by the supervisor"));
}

/*
 * The call an event belongs to: the one whose cgroup holds the event's
 * pid, when the attributor can tell; else the call the events are for.
 */
static void attribute(struct events *ev, json_t *o)
{
	bool done = ev->attr && ev->attr(ev->attr_arg, o);

	json_object_del(o, EVENTS_KEY_CGROUP);
	json_object_del(o, EVENTS_KEY_GROUP);
	if (done)
		return;
	if (ev->call)
		json_object_set_new(o, "call", json_string(ev->call));
}

/* ---- repeats and the budget -------------------------------------------- */

static const struct rated *rated_find(const char *type)
{
	for (size_t i = 0; i < NRATED; i++)
		if (!strcmp(rated_types[i].type, type))
			return &rated_types[i];
	return NULL;
}

/*
 * A syscall number the filter knows no name for: "syscall 1000", as the
 * sensor names a number above the ceiling (answered ENOSYS).
 */
static bool unnamed_syscall(const struct rated *r, const char *name)
{
	const char *p;

	if (strcmp(r->type, "syscall.denied") || !name ||
	    strncmp(name, "syscall ", strlen("syscall ")))
		return false;
	p = name + strlen("syscall ");
	if (*p == '-')
		p++;
	if (!*p)
		return false;
	for (; *p; p++)
		if (*p < '0' || *p > '9')
			return false;
	return true;
}

/*
 * "mount", "evil.test:80": what names an event's kind.  Unnamed syscall
 * numbers are one kind, UNNAMED_SYSCALL, whatever the number: a loop of
 * syscall(1000 + i) made the type's KINDS_MAX kinds in a millisecond, and
 * the denials that matter after it (mount, ptrace, unshare) were in the
 * log only as a count of "kinds beyond the first 128", their names lost.
 * The named calls on the deny list are fewer than KINDS_MAX.
 */
#define UNNAMED_SYSCALL "syscall N"

static void kind_key(const struct rated *r, json_t *fields, char *key, size_t len)
{
	const char *a = json_string_value(json_object_get(fields, r->key));
	json_int_t v;
	char num[24], *p = num + sizeof(num);
	size_t alen, nlen;
	bool neg;

	if (!a)
		a = "?";
	if (unnamed_syscall(r, a))
		a = UNNAMED_SYSCALL;
	alen = strlen(a);
	if (!r->key2) {
		snprintf(key, len, "%s", a);
		return;
	}
	/* by hand, not snprintf: two of these a proxied connection */
	v = json_integer_value(json_object_get(fields, r->key2));
	neg = v < 0;
	do {
		*--p = (char)('0' + (neg ? -(v % 10) : v % 10));
		v /= 10;
	} while (v);
	if (neg)
		*--p = '-';
	nlen = (size_t)(num + sizeof(num) - p);
	if (alen + 1 + nlen >= len) {
		snprintf(key, len, "%s:%.*s", a, (int)nlen, p);
		return;
	}
	memcpy(key, a, alen);
	key[alen] = ':';
	memcpy(key + alen + 1, p, nlen);
	key[alen + 1 + nlen] = '\0';
}

static size_t key_slot(const struct rated *r, const char *key)
{
	uint32_t h = 2166136261u;	/* FNV-1a, over the type's index and the key */

	h = (h ^ (uint32_t)(r - rated_types)) * 16777619u;
	for (const unsigned char *p = (const unsigned char *)key; *p; p++)
		h = (h ^ *p) * 16777619u;
	return h % KIND_SLOTS;
}

static struct kind *kind_new(const struct rated *r, const char *key, json_t *fields)
{
	struct kind *k = calloc(1, sizeof(*k));

	if (!k)
		return NULL;
	k->r = r;
	k->key = strdup(key);
	k->names = json_object();
	if (!k->key || !k->names) {
		free(k->key);
		json_decref(k->names);
		free(k);
		return NULL;
	}
	/* the kind's name, not its first number's: the summary counts them all */
	if (!strcmp(r->type, "syscall.denied") && !strcmp(key, UNNAMED_SYSCALL))
		json_object_set_new(k->names, r->key, json_string(key));
	else
		json_object_set(k->names, r->key, json_object_get(fields, r->key) ?: json_null());
	if (r->key2)
		json_object_set(k->names, r->key2,
				json_object_get(fields, r->key2) ?: json_null());
	return k;
}

/*
 * The kind of an event of type r: found, made, or, past KINDS_MAX kinds of
 * the type (or out of memory), the type's "other" kind.  Bounded memory
 * whatever names a sandbox makes up.
 */
static struct kind *kind_get(struct events *ev, const struct rated *r, json_t *fields,
			     const char *key)
{
	struct kind *other = &ev->other[r - rated_types];
	size_t i;

	if (!ev->slots && !(ev->slots = calloc(KIND_SLOTS, sizeof(*ev->slots))))
		return other;
	for (i = key_slot(r, key); ev->slots[i]; i = (i + 1) % KIND_SLOTS)
		if (ev->slots[i]->r == r && !strcmp(ev->slots[i]->key, key))
			return ev->slots[i];
	if (ev->nkinds[r - rated_types] >= KINDS_MAX)
		return other;
	ev->slots[i] = kind_new(r, key, fields);
	if (!ev->slots[i])
		return other;
	ev->nkinds[r - rated_types]++;
	return ev->slots[i];
}

/* ---- the destinations of "other", each named once -------------------- */

/* 64 bits of the SHA-256 of type r's key; never 0, a free slot's mark. */
static uint64_t seen_hash(const struct rated *r, const char *key)
{
	uint8_t md[SHA256_DIGEST_SIZE], t = (uint8_t)(r - rated_types);
	struct sha256_ctx ctx;
	uint64_t h = 0;

	sha256_init(&ctx);
	sha256_update(&ctx, 1, &t);	/* "a:1" of two types: two kinds */
	sha256_update(&ctx, strlen(key), (const uint8_t *)key);
	sha256_digest(&ctx, sizeof(md), md);
	for (size_t i = 0; i < sizeof(h); i++)
		h = h << 8 | md[i];
	return h ? h : 1;
}

/* h's slot, or the free one where it would go (cap is a power of two) */
static size_t seen_slot(const struct seen *s, uint64_t h)
{
	size_t i = (size_t)h & (s->cap - 1);

	while (s->h[i] && s->h[i] != h)
		i = (i + 1) & (s->cap - 1);
	return i;
}

static bool seen_has(const struct seen *s, uint64_t h)
{
	return s->cap && s->h[seen_slot(s, h)] == h;
}

/*
 * Room for one more, made before the event is written, so that one written
 * is always marked (one unmarked would be written whole again and again):
 * 0, or -ENOSPC past SEEN_MAX, -ENOMEM.
 */
static int seen_room(struct seen *s)
{
	size_t cap = s->cap ? s->cap * 2 : SEEN_MIN;
	uint64_t *h;

	if ((s->n + 1) * 2 <= s->cap)
		return 0;
	if (cap > SEEN_MAX)
		return -ENOSPC;
	h = calloc(cap, sizeof(*h));
	if (!h)
		return -ENOMEM;
	for (size_t i = 0; i < s->cap; i++) {
		struct seen grown = { h, cap, 0 };

		if (s->h[i])
			h[seen_slot(&grown, s->h[i])] = s->h[i];
	}
	free(s->h);
	s->h = h;
	s->cap = cap;
	return 0;
}

/* after seen_room() */
static void seen_put(struct seen *s, uint64_t h)
{
	s->h[seen_slot(s, h)] = h;
	s->n++;
}

/* The bytes of "other"'s first lines a type may write whole. */
static uint64_t fresh_share(const struct events *ev)
{
	return ev->lim.budget_bytes / 4;
}

/*
 * A new destination of "other" k not written whole: listed for its next
 * summary while the list has room.  Whether it was.
 */
static bool list_fresh(struct kind *k, const char *key)
{
	size_t len = strlen(key);

	if (!k->listed)
		k->listed = json_array();
	if (!k->listed || json_array_size(k->listed) >= NAMES_LISTED ||
	    k->listed_bytes + len > NAMES_BYTES ||
	    json_array_append_new(k->listed, json_string(key)) < 0) {
		k->unlisted++;
		return false;
	}
	k->listed_bytes += len;
	return true;
}

/*
 * The cloud's metadata services (AWS, its IPv6 and ECS endpoints, Alibaba,
 * GCP's names, Azure's WireServer): a try at one is what a flood of names
 * would hide, so its first event of a type is written whole whatever came
 * before it, past the share and the budget too: at most this many lines a
 * type.
 */
static const char *const metadata_hosts[] = {
	"169.254.169.254", "fd00:ec2::254", "169.254.170.2", "100.100.100.200",
	"metadata.google.internal", "metadata.goog", "168.63.129.16",
};
#define NMETADATA (sizeof(metadata_hosts) / sizeof(metadata_hosts[0]))

/* Which of metadata_hosts the event names (its trailing dot or not), or -1. */
static int metadata_host(const struct rated *r, json_t *fields)
{
	const char *host;
	size_t len;

	if (strcmp(r->key, "host"))
		return -1;
	host = json_string_value(json_object_get(fields, "host"));
	len = host ? strlen(host) : 0;
	if (len && host[len - 1] == '.')
		len--;
	for (size_t i = 0; i < NMETADATA; i++)
		if (len == strlen(metadata_hosts[i]) &&
		    !strncasecmp(host, metadata_hosts[i], len))
			return (int)i;
	return -1;
}

/* Summaries may go on past the budget by this much, then wait for the end. */
static uint64_t reserve(const struct events *ev)
{
	return ev->lim.budget_bytes / 8;
}

static void emit(struct events *ev, const char *type, json_t *fields,
		 uint64_t now);

/*
 * One line: how many of k were counted, not written, and over what span.
 * folded: k stands for that many kinds of its type, held past the reserve.
 */
static void summarise(struct events *ev, struct kind *k, uint64_t now,
		      size_t folded)
{
	char why[CORRAL_ERR_MAX], what[KIND_KEY_MAX + 64];
	uint64_t span = now - k->since_ms, n = k->pending;
	json_t *o;

	if (folded)
		snprintf(what, sizeof(what), "of %zu kind%s, held past the budget "
			 "and its reserve for summaries", folded, folded == 1 ? "" : "s");
	else if (k->key)
		snprintf(what, sizeof(what), "%s", k->key);
	else
		snprintf(what, sizeof(what), "kinds beyond the first %d named one by one",
			 KINDS_MAX);
	snprintf(why, sizeof(why), "%llu more %s event%s (%s) in %.3g s: counted, "
		 "not written one by one", (unsigned long long)n, k->r->type,
		 n == 1 ? "" : "s", what, span / 1000.0);
	if (!folded)
		snprintf(why + strlen(why), sizeof(why) - strlen(why),
			 " (%llu in all, %llu written whole)",
			 (unsigned long long)k->total, (unsigned long long)k->whole);
	if (k->listed || k->unlisted)
		snprintf(why + strlen(why), sizeof(why) - strlen(why),
			 "; new ones not written whole: %zu named in \"names\", "
			 "%llu event(s) of others not named", json_array_size(k->listed),
			 (unsigned long long)k->unlisted);
	o = json_pack("{s:s}", "of", k->r->type);
	if (o && folded)
		json_object_set_new(o, "kinds", json_integer((json_int_t)folded));
	else if (o && k->names)
		json_object_update(o, k->names);
	else if (o)
		json_object_set_new(o, "other", json_true());
	if (o && k->listed && json_array_size(k->listed))
		json_object_set(o, "names", k->listed);
	if (o && k->unlisted)
		json_object_set_new(o, "names_unlisted", json_integer((json_int_t)k->unlisted));
	json_decref(k->listed);
	k->listed = NULL;
	k->listed_bytes = 0;
	k->unlisted = 0;
	if (o && json_object_set_new(o, "count", json_integer((json_int_t)n)) == 0 &&
	    json_object_set_new(o, "interval_ms", json_integer((json_int_t)span)) == 0 &&
	    (folded || json_object_set_new(o, "total", json_integer((json_int_t)k->total)) == 0))
		json_object_set_new(o, "reason", json_string(why));
	k->pending = 0;
	emit(ev, k->r->summary, o, now);
}

/*
 * Write the summaries that are due, or all that wait (all).  Past the
 * budget's reserve they wait for the log's end (final), and are then
 * folded into one a type: a bounded end, however many kinds waited.
 */
static void flush(struct events *ev, uint64_t now, bool all, bool final)
{
	struct kind fold[NRATED] = { 0 };
	size_t nfold[NRATED] = { 0 };
	uint64_t next = UINT64_MAX;

	ev->next_due = UINT64_MAX;	/* no rescans from the summaries' own emits */
	for (size_t i = 0; i < KIND_SLOTS + NRATED; i++) {
		struct kind *k = i < KIND_SLOTS ? (ev->slots ? ev->slots[i] : NULL) :
				 &ev->other[i - KIND_SLOTS];
		size_t t;

		if (!k || !k->pending)
			continue;
		if (!all && now - k->since_ms < ev->lim.interval_ms) {
			if (k->since_ms + ev->lim.interval_ms < next)
				next = k->since_ms + ev->lim.interval_ms;
			continue;
		}
		if (ev->bytes < ev->lim.budget_bytes + reserve(ev)) {
			summarise(ev, k, now, 0);
			continue;
		}
		if (!final)
			continue;
		t = k->r - rated_types;
		if (!nfold[t]++ || k->since_ms < fold[t].since_ms)
			fold[t].since_ms = k->since_ms;
		fold[t].r = k->r;
		fold[t].pending += k->pending;
		k->pending = 0;
		if (!k->key) {	/* "other": its new ones go with the fold */
			fold[t].listed = k->listed;
			fold[t].listed_bytes = k->listed_bytes;
			fold[t].unlisted = k->unlisted;
			k->listed = NULL;
			k->listed_bytes = 0;
			k->unlisted = 0;
		}
	}
	for (size_t t = 0; t < NRATED; t++)
		if (nfold[t])
			summarise(ev, &fold[t], now, nfold[t]);
	if (next < ev->next_due)
		ev->next_due = next;
}

/* The sandbox's share of the log is used up: said once, clearly. */
static void budget_reached(struct events *ev, uint64_t now)
{
	char size[32], every[32], why[CORRAL_ERR_MAX];

	ev->over = true;
	corral_format_size(ev->lim.budget_bytes, size, sizeof(size));
	snprintf(every, sizeof(every), "%.3g s", ev->lim.interval_ms / 1000.0);
	snprintf(why, sizeof(why), "this sandbox's events reached their budget of %s "
		 "(events.budget): from now on what it repeats (denials, connections, "
		 "tripwire hits) is counted, one summary per kind every %s, and no "
		 "longer written one by one; the abort criteria still count every event",
		 size, every);
	emit(ev, "log.budget", json_pack("{s:I, s:I, s:s}", "budget",
		 (json_int_t)ev->lim.budget_bytes, "written", (json_int_t)ev->bytes,
		 "reason", why), now);
}

/* ---- recording ---------------------------------------------------------- */

static json_t *event_object(struct events *ev, const char *type, json_t *fields,
			    bool numbered)
{
	struct timespec ts;
	char when[64];
	json_t *o;

	clock_gettime(CLOCK_REALTIME, &ts);
	utc_stamp(when, sizeof(when), &ts);
	/* seq numbers the lines written: an event only counted has none */
	o = numbered ? json_pack("{s:I}", "seq", (json_int_t)++ev->seq) : json_object();
	if (!o || json_object_set_new(o, "time", json_string(when)) ||
	    json_object_set_new(o, "sandbox", json_string(ev->sandbox)) ||
	    json_object_set_new(o, "type", json_string(type))) {
		json_decref(o);
		json_decref(fields);
		return NULL;
	}
	if (fields)
		json_object_update(o, fields);
	json_decref(fields);
	default_reason(o, type);
	attribute(ev, o);
	return o;
}

/* k's event was written whole, or is counted for its next summary */
static void count(struct events *ev, struct kind *k, bool whole, uint64_t now)
{
	if (k && whole) {
		k->whole++;
	} else if (k && k->pending++ == 0) {
		k->since_ms = now;
		if (now + ev->lim.interval_ms < ev->next_due)
			ev->next_due = now + ev->lim.interval_ms;
	}
}

/* A syscall.unseen stands for its count of calls, the others for one. */
static uint64_t denials_in(const char *type, json_t *o)
{
	json_int_t n;

	if (strcmp(type, "syscall.unseen"))
		return 1;
	n = json_integer_value(json_object_get(o, "count"));
	return n > 0 ? (uint64_t)n : 1;
}

static void emit(struct events *ev, const char *type, json_t *fields,
		 uint64_t now)
{
	const struct rated *r = rated_find(type);
	bool whole = true, denial, fresh = false, room = false, listed, written;
	char key[KIND_KEY_MAX];
	struct kind *k = NULL;
	uint64_t h = 0, n;
	int meta;
	json_t *o;

	if (now >= ev->next_due)
		flush(ev, now, false, false);
	if (r) {
		kind_key(r, fields, key, sizeof(key));
		k = kind_get(ev, r, fields, key);
		k->total++;
		/*
		 * "other": is its destination named yet?  Only for the capped
		 * types: the others are written whole until the budget, and
		 * their kinds (allowed hosts) must not fill the set.
		 */
		if (!k->key && r->capped) {
			h = seen_hash(r, key);
			fresh = !seen_has(&ev->seen, h);
			room = fresh && seen_room(&ev->seen) == 0;
		}
		if (k->key)
			whole = !ev->over && (!r->capped || k->whole < ev->lim.verbatim);
		else
			whole = !ev->over && (!r->capped || (room && ev->lim.verbatim &&
					      k->fresh_bytes < fresh_share(ev)));
		if (whole && ev->bytes >= ev->lim.budget_bytes) {
			budget_reached(ev, now);
			whole = false;
		}
		meta = r->capped ? metadata_host(r, fields) : -1;
		if (meta >= 0 && !(ev->metadata[r - rated_types] & 1u << meta)) {
			ev->metadata[r - rated_types] |= 1u << meta;
			whole = true;
		}
		/* with the set full, listed all the same, and maybe again */
		listed = fresh && !whole && list_fresh(k, key);
		if (room && (whole || listed))
			seen_put(&ev->seen, h);
	} else if (!strstr(type, ".summary") && strcmp(type, "log.budget")) {
		/* the sandbox's own record (exec.end, abort): what was counted first */
		flush(ev, now, true, false);
	}
	denial = !strcmp(type, "egress.denied") || !strcmp(type, "syscall.denied") ||
		 !strcmp(type, "syscall.unseen");
	if (!(whole && ev->log) && !denial && !ev->hook) {
		/*
		 * Nothing would see the object: no line to write, no hook, not
		 * a denial the result keeps.  Counted as if made (seq, the
		 * kind's counts), not made: an allowed connection's two events
		 * were 40% of the supervisor's instructions per connection.
		 */
		json_decref(fields);
		if (whole)
			ev->seq++;
		count(ev, k, whole, now);
		return;
	}
	o = event_object(ev, type, fields, whole);
	if (!o)
		return;
	if (whole && ev->log) {
		n = write_line(ev->log, o, &written);
		ev->bytes += n;
		if (fresh)
			k->fresh_bytes += n;
		if (!written && !ev->lost++)
			ev->lost_errno = events_log_error(ev->log) ?: EIO;
	}
	count(ev, k, whole, now);
	/* kept for the result, but a flood of denials must not grow us */
	if (denial) {
		n = denials_in(type, o);
		ev->ndenied += n;
		if (!strcmp(type, "syscall.unseen"))
			ev->nunseen += n;
		if (json_array_size(ev->denials) < ev->keep_denials)
			json_array_append(ev->denials, o);
	}
	if (ev->hook)
		ev->hook(ev->hook_arg, type, o);
	json_decref(o);
}

void events_emit(struct events *ev, const char *type, json_t *fields)
{
	if (!ev) {
		json_decref(fields);
		return;
	}
	emit(ev, type, fields, corral_now_ms());
}

void events_set_limits(struct events *ev, const struct corral_event_limits *lim)
{
	struct corral_policy def;

	if (!lim) {	/* the built-in policy's */
		corral_policy_init(&def);
		ev->lim = def.events;
		corral_policy_free(&def);
		return;
	}
	ev->lim = *lim;
}

int events_set_call(struct events *ev, const char *call)
{
	char *c = strdup(call);

	if (!c)
		return -ENOMEM;
	free(ev->call);
	ev->call = c;
	return 0;
}

void events_set_hook(struct events *ev, events_hook_fn hook, void *arg)
{
	ev->hook = hook;
	ev->hook_arg = arg;
}

static void limit_hit(struct events *ev, const char *call, json_t *o)
{
	if (o && call)
		json_object_set_new(o, "call", json_string(call));
	events_emit(ev, "limit.hit", o);
}

void events_limit_hits(struct events *ev, const char *call,
		       const struct cg_stats *before, const struct cg_stats *after,
		       const struct corral_policy *p, bool disk_full)
{
	char size[32], why[CORRAL_ERR_MAX], share[CG_SHARE_SAID];

	if (after->valid && after->oom_kills > before->oom_kills) {
		corral_format_size(p->memory_bytes, size, sizeof(size));
		snprintf(why, sizeof(why), "memory limit %s reached: %llu process(es) "
			 "killed by the OOM killer%s", size,
			 (unsigned long long)(after->oom_kills - before->oom_kills),
			 cg_memory_share_said(after, share));
		limit_hit(ev, call, json_pack("{s:s, s:I, s:s}", "limit",
			    "memory", "value", (json_int_t)p->memory_bytes, "reason", why));
	}
	if (after->valid && after->pids_max_hits > before->pids_max_hits) {
		snprintf(why, sizeof(why), "pids limit %llu reached: %llu fork(s) "
			 "refused%s", (unsigned long long)p->pids,
			 (unsigned long long)(after->pids_max_hits - before->pids_max_hits),
			 cg_pids_share_said(after, share));
		limit_hit(ev, call, json_pack("{s:s, s:I, s:s}", "limit",
			    "pids", "value", (json_int_t)p->pids, "reason", why));
	}
	if (after->valid && after->throttled > before->throttled) {
		snprintf(why, sizeof(why), "CPU limit %.3g cores reached: throttled "
			 "in %llu period(s) of 100 ms", p->cpus,
			 (unsigned long long)(after->throttled - before->throttled));
		limit_hit(ev, call, json_pack("{s:s, s:f, s:s}", "limit",
			    "cpu", "value", p->cpus, "reason", why));
	}
	if (cg_tcp_reached(after) && !cg_tcp_reached(before))
		limit_hit(ev, call, json_pack("{s:s, s:I, s:s}", "limit", "tcp",
			    "value", (json_int_t)after->tcp_limit, "reason",
			    cg_tcp_said(after, why, sizeof(why))));
	if (disk_full) {
		corral_format_size(p->disk_bytes, size, sizeof(size));
		snprintf(why, sizeof(why), "disk limit %s reached: the sandbox's "
			 "writable space is full (no room or no file left)", size);
		limit_hit(ev, call, json_pack("{s:s, s:I, s:s}", "limit",
			    "disk", "value", (json_int_t)p->disk_bytes, "reason", why));
	}
}

void events_background_hits(struct events *ev, const char *call, uint64_t oom,
			    uint64_t pids, const struct corral_policy *p)
{
	char size[32], why[CORRAL_ERR_MAX];
	json_t *o;

	if (oom) {
		corral_format_size(p->memory_bytes, size, sizeof(size));
		snprintf(why, sizeof(why), "memory limit %s reached: %llu background "
			 "process(es) of call %s killed by the OOM killer", size,
			 (unsigned long long)oom, call);
		o = json_pack("{s:s, s:I, s:s, s:b}", "limit", "memory", "value",
			      (json_int_t)p->memory_bytes, "reason", why, "background", 1);
		limit_hit(ev, call, o);
	}
	if (pids) {
		snprintf(why, sizeof(why), "pids limit %llu reached: %llu fork(s) of "
			 "call %s's background processes refused",
			 (unsigned long long)p->pids, (unsigned long long)pids, call);
		o = json_pack("{s:s, s:I, s:s, s:b}", "limit", "pids", "value",
			      (json_int_t)p->pids, "reason", why, "background", 1);
		limit_hit(ev, call, o);
	}
}

/*
 * The disk limit said in the result, not only as an event: a command that
 * failed with ENOSPC (out of bytes, or of files) reads as what it was.
 */
void events_explain_disk(struct corral_result *res, const struct corral_policy *p)
{
	size_t len = strlen(res->reason);
	char size[32];

	corral_format_size(p->disk_bytes, size, sizeof(size));
	snprintf(res->reason + len, sizeof(res->reason) - len,
		 "; disk limit %s reached: no room or no file left in the "
		 "sandbox's writable space (/tmp, /home/agent, /dev/shm, the "
		 "workspace's changes)", size);
}

/* A protocol of nflog.c's events: a packet dropped, not a connection refused. */
static bool packet_proto(const char *proto)
{
	return !strcmp(proto, "udp") || !strcmp(proto, "icmp") ||
	       !strcmp(proto, "icmpv6") || !strcmp(proto, "tcp") || !strncmp(proto, "ip/", 3);
}

/*
 * The abort limit a denial like first counts toward: a syscall's is
 * max_denied_syscalls (none for one abort.ignore_syscalls names), a
 * connection's max_denied_egress.  A syscall's denial once read "the
 * abort limit is 40 denied connections", and not the 5 syscalls that
 * would halt the sandbox.
 */
static void abort_limit(const struct corral_policy *p, json_t *first, char *buf,
			size_t len)
{
	const char *what = json_string_value(json_object_get(first, "type"));
	const char *sc = json_string_value(json_object_get(first, "syscall"));
	const struct corral_abort *a = &p->abort;

	buf[0] = '\0';
	if (what && (!strcmp(what, "syscall.denied") || !strcmp(what, "syscall.unseen"))) {
		for (size_t i = 0; sc && i < a->nignore_syscalls; i++)
			if (!strcmp(a->ignore_syscalls[i], sc))
				return;
		if (a->max_denied_syscalls)
			snprintf(buf, len, "; the abort limit is %llu denied syscalls",
				 (unsigned long long)a->max_denied_syscalls);
	} else if (a->max_denied_egress) {
		snprintf(buf, len, "; the abort limit is %llu denied connections",
			 (unsigned long long)a->max_denied_egress);
	}
}

/*
 * A call that was refused something says so in its reason, with the abort
 * limit it is nearing: an agent loop reads this sentence, and a bare
 * "exited with status 1" after a refused connection invites a retry.
 * d: the call's denials kept; n: all of the call's, kept or not (a flood
 * keeps its first ones only); so_far: the sandbox's, all calls together.
 */
void events_explain_denials(struct corral_result *res, json_t *d, size_t n,
			    size_t so_far, const struct corral_policy *p)
{
	size_t len = strlen(res->reason);
	const char *what, *host, *why, *proto;
	char limit[96] = "", total[64] = "";
	json_t *first;

	if (n == 0 || json_array_size(d) == 0 || res->status == CORRAL_HALTED)
		return;
	first = json_array_get(d, 0);
	what = json_string_value(json_object_get(first, "type"));
	host = json_string_value(json_object_get(first, "host"));
	why = json_string_value(json_object_get(first, "reason"));
	proto = json_string_value(json_object_get(first, "protocol"));
	if (so_far > n)
		snprintf(total, sizeof(total), ", %zu in this sandbox so far", so_far);
	abort_limit(p, first, limit, sizeof(limit));
	if (what && !strcmp(what, "syscall.unseen"))
		snprintf(res->reason + len, sizeof(res->reason) - len,
			 "; denied: %lld syscall%s interrupted before %s could be "
			 "read; %zu denial%s%s%s",
			 (long long)json_integer_value(json_object_get(first, "count")),
			 json_integer_value(json_object_get(first, "count")) == 1 ? "" : "s",
			 json_integer_value(json_object_get(first, "count")) == 1 ? "it" : "they",
			 n, n == 1 ? "" : "s", total, limit);
	else if (what && !strcmp(what, "syscall.denied"))
		snprintf(res->reason + len, sizeof(res->reason) - len,
			 "; denied: syscall %s; %zu denial%s%s%s",
			 json_string_value(json_object_get(first, "syscall")) ?: "?",
			 n, n == 1 ? "" : "s", total, limit);
	else if (proto && !strcmp(proto, "dns"))	/* a lookup names no port */
		snprintf(res->reason + len, sizeof(res->reason) - len,
			 "; denied: lookup of %.100s (%.120s); %zu denial%s%s%s",
			 host ? host : "?", why ? why : "not allowed", n,
			 n == 1 ? "" : "s", total, limit);
	else if (proto && packet_proto(proto))
		snprintf(res->reason + len, sizeof(res->reason) - len,
			 "; denied: %.16s to %.100s:%d (%.120s); %zu denial%s%s%s", proto,
			 host ? host : "?",
			 (int)json_integer_value(json_object_get(first, "port")),
			 why ? why : "not allowed", n, n == 1 ? "" : "s", total, limit);
	else
		snprintf(res->reason + len, sizeof(res->reason) - len,
			 "; denied: connection to %.100s:%d (%.120s); %zu denial%s%s%s",
			 host ? host : "?",
			 (int)json_integer_value(json_object_get(first, "port")),
			 why ? why : "not allowed", n, n == 1 ? "" : "s", total, limit);
}

/*
 * How many of the denials counted were calls interrupted before the
 * sensor could read them (syscall.unseen): said, since the first denial
 * the reason names is one that was read.
 */
void events_explain_unseen(struct corral_result *res, const struct events *ev)
{
	size_t len = strlen(res->reason);

	if (!ev || !ev->nunseen || res->status == CORRAL_HALTED)
		return;
	snprintf(res->reason + len, sizeof(res->reason) - len,
		 "; %llu of them interrupted before they could be read",
		 (unsigned long long)ev->nunseen);
}

void events_set_seq(struct events *ev, uint64_t last)
{
	ev->seq = last;
}

void events_set_attributor(struct events *ev, events_attr_fn fn, void *arg)
{
	ev->attr = fn;
	ev->attr_arg = arg;
}

void events_keep_denials(struct events *ev, size_t max)
{
	ev->keep_denials = max;
}

json_t *events_denials(struct events *ev)
{
	return ev ? json_incref(ev->denials) : json_array();
}

size_t events_count_denied(const struct events *ev)
{
	return ev ? ev->ndenied : 0;
}

/* ---- out of the sandbox's reach ------------------------------------------ */

/* Mounts beneath a writable bind's source, added as its own (writable_binds). */
struct beneath {
	struct stat *st;
	const char **src;
	const char *of;
	size_t n, max;
	bool over;
};

static bool beneath_add(const struct stat *st, void *arg)
{
	struct beneath *b = arg;

	if (b->n >= b->max) {
		b->over = true;
		return true;
	}
	b->st[b->n] = *st;
	b->src[b->n++] = b->of;
	return false;
}

/*
 * The objects the writable binds of *p give the sandbox, by inode: each
 * source, and each mount beneath it.  Past max, (size_t)-1.
 */
static size_t writable_binds(const struct corral_policy *p, struct stat *st,
			     const char **src, size_t max)
{
	struct beneath m = { st, src, NULL, 0, max, false };

	for (size_t i = 0; i < p->nbinds; i++) {
		const struct corral_bind *b = &p->binds[i];
		int dir;

		if (!b->writable)
			continue;
		if (m.n >= max)
			return (size_t)-1;
		/* one that cannot be reached fails the start anyway */
		if ((b->pinned ? fstat(b->fd, &st[m.n]) : stat(b->src, &st[m.n])) < 0)
			continue;
		src[m.n++] = b->src;
		if (!S_ISDIR(st[m.n - 1].st_mode))
			continue;
		dir = b->pinned ? b->fd : open(b->src, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (dir < 0)
			continue;
		/* a bind is recursive: what is mounted beneath it is its too */
		m.of = b->src;
		mounts_beneath(dir, beneath_add, &m);
		if (!b->pinned)
			close(dir);
		if (m.over)
			return (size_t)-1;
	}
	return m.n;
}

static const char *bound_as(const struct stat *at, const struct stat *st,
			    const char **src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (st[i].st_dev == at->st_dev && st[i].st_ino == at->st_ino)
			return src[i];
	return NULL;
}

struct binds_seen {
	const struct stat *st;
	const char **src;
	size_t n;
	const char *hit;
};

static bool bind_visit(const struct stat *at, void *arg)
{
	struct binds_seen *b = arg;

	b->hit = bound_as(at, b->st, b->src, b->n);
	return b->hit != NULL;
}

/*
 * Which writable bind holds the file open at fd: the file itself bound, or
 * a directory on its way up to "/", walked by "..", so that a host bind
 * mount that names it otherwise is seen.  The walk starts where the file
 * is (realpath): a symlink outside every bind to a log inside one is the
 * sandbox's to replace all the same.
 */
static const char *log_under_bind(int fd, const char *path, const struct stat *st,
				  const char **src, size_t n)
{
	char *real = realpath(path, NULL), *slash;
	struct binds_seen b = { .st = st, .src = src, .n = n };
	struct stat at;
	int d = -1;

	if (fstat(fd, &at) < 0 || bind_visit(&at, &b)) {
		free(real);
		return b.hit;
	}
	slash = real ? strrchr(real, '/') : NULL;
	if (slash) {
		slash[slash == real ? 1 : 0] = '\0';
		d = open(real, O_PATH | O_DIRECTORY | O_CLOEXEC);
	}
	free(real);
	if (d >= 0) {
		walk_up(d, bind_visit, &b);
		close(d);
	}
	return b.hit;
}

#define BINDS_CHECKED 256

int events_check_reach(const struct events *ev, const struct corral_policy *p,
		       struct corral_err *err)
{
	struct stat st[BINDS_CHECKED];
	const char *src[BINDS_CHECKED], *hit;
	size_t n;

	if (!ev || !ev->log || !p)
		return 0;
	n = writable_binds(p, st, src, BINDS_CHECKED);
	if (n == (size_t)-1)
		return corral_set_err(err, -E2BIG, "the events file %s: over %d writable "
				      "binds and mounts beneath them to judge whether "
				      "the sandbox could rewrite it; refused",
				      ev->log->path, BINDS_CHECKED);
	hit = n ? log_under_bind(ev->log->fd, ev->log->path, st, src, n) : NULL;
	if (!hit)
		return 0;
	return corral_set_err(err, -EPERM, "the events file %s lies in the writable "
			      "bind %s: the sandbox could rewrite its own record (the "
			      "chain has no key); keep it out of every rw bind",
			      ev->log->path, hit);
}

uint64_t events_lost(const struct events *ev, int *first_errno)
{
	*first_errno = ev && ev->log ? ev->log->lost_errno : 0;
	return ev && ev->log ? ev->log->lost : 0;
}

uint64_t events_lost_own(const struct events *ev, int *first_errno)
{
	*first_errno = ev ? ev->lost_errno : 0;
	return ev ? ev->lost : 0;
}

const char *events_file(const struct events *ev)
{
	return ev && ev->log ? ev->log->path : NULL;
}

void events_flush(struct events *ev)
{
	if (ev)
		flush(ev, corral_now_ms(), true, true);
}

void events_close(struct events *ev)
{
	if (!ev)
		return;
	/* the counts still waiting, past the budget's reserve or not; the
	 * owner's hooks may be gone already */
	ev->hook = NULL;
	ev->attr = NULL;
	flush(ev, corral_now_ms(), true, true);
	for (size_t i = 0; ev->slots && i < KIND_SLOTS; i++) {
		if (!ev->slots[i])
			continue;
		free(ev->slots[i]->key);
		json_decref(ev->slots[i]->names);
		free(ev->slots[i]);
	}
	free(ev->slots);
	for (size_t i = 0; i < NRATED; i++)
		json_decref(ev->other[i].listed);
	free(ev->seen.h);
	events_log_put(ev->log);
	json_decref(ev->denials);
	free(ev->sandbox);
	free(ev->call);
	free(ev);
}
