/*
 * api_events.c - GET /v1/events[?sandbox=ID][&follow=1]: the audit log
 * as NDJSON, all of it or one sandbox's, and with follow its new lines as
 * they are written (api_on_log_line) to each follower that keeps reading.
 *
 * The log is never rotated and grows for the daemon's life, so it is
 * never read whole: a reader (struct events_reader) reads EVENTS_STEP bytes of
 * it at a time from its own fd, sends what matches as one chunk and reads
 * on only when the client has taken that chunk (or, when nothing matched,
 * at the loop's next turn).  A client holds at most one step's bytes of
 * the daemon's memory however large the log, and the loop is never held
 * for more than one step.  A line longer than a step that matches is sent
 * from the file again, a step at a time.  With follow, once a reader has
 * reached the end of the file it becomes a follower in the same turn of
 * the loop, which is also the only place lines are written: no line is
 * missed or sent twice.
 */
#include "api.h"

#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>
#include <sys/queue.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EVENTS_STEP	(64 * 1024)	/* bytes of the log read a step */
#define EVENTS_KEY_MAX	96		/* "sandbox":"ID" */

/*
 * A TCP client's lines go without their "prev", the chain's last key
 * (audit.h: every line ends ',"prev":"<64 hex>"}'): it is the hash of the
 * line before in the file, and so said whether that one was a line the
 * client does not get (a local sandbox's), and when: the socket's clients'
 * work, timed by the client's own events.  A chain with lines left out
 * would not verify anyway.  PREV_TAIL: ',"prev":"<64 hex>"'.
 */
#define PREV_HEAD	",\"prev\":\""
#define PREV_TAIL	(sizeof(PREV_HEAD) - 1 + CORRAL_AUDIT_HASH_HEX + 1)

static bool prev_tail(const char *p)
{
	size_t h = sizeof(PREV_HEAD) - 1;

	return !memcmp(p, PREV_HEAD, h) && p[PREV_TAIL - 1] == '"' &&
	       strspn(p + h, "0123456789abcdef") == CORRAL_AUDIT_HASH_HEX;
}

/* How much of line (ending "}", then '\n' or not) comes before its prev. */
static size_t before_prev(const char *line, size_t len)
{
	size_t body = len && line[len - 1] == '\n' ? len - 1 : len;

	if (body < PREV_TAIL + 1 || line[body - 1] != '}' ||
	    !prev_tail(line + body - 1 - PREV_TAIL))
		return len;
	return body - 1 - PREV_TAIL;
}

/* line into out: without its prev when strip (a TCP client's). */
static void line_add(struct evbuffer *out, const char *line, size_t len, bool strip)
{
	size_t keep = strip ? before_prev(line, len) : len;

	evbuffer_add(out, line, keep);
	if (keep < len)
		evbuffer_add(out, line + keep + PREV_TAIL, len - keep - PREV_TAIL);
}

static bool line_matches(const char *line, size_t len, const char *sandbox)
{
	char key[96];

	if (!sandbox[0])
		return true;
	snprintf(key, sizeof(key), "\"sandbox\":\"%s\"", sandbox);
	return memmem(line, len, key, strlen(key)) != NULL;
}

void api_on_log_line(void *arg, const char *sandbox, const char *line, size_t len)
{
	struct daemon *d = arg;
	struct follower **pp = &d->followers, *f;

	while ((f = *pp)) {
		struct evbuffer *buf;

		if (!line_matches(line, len, f->sandbox) ||
		    (f->tcp && sandbox_id_local(sandbox))) {
			pp = &f->next;
			continue;
		}
		/* a follower that does not read is cut off, not buffered for */
		if (api_queued(f->req) > FOLLOW_QUEUE_MAX) {
			*pp = f->next;
			api_set_closecb(f->d, f->req, NULL, NULL);
			api_reply_end(f->req);
			free(f);
			continue;
		}
		pp = &f->next;
		buf = evbuffer_new();
		if (!buf)
			continue;
		line_add(buf, line, len, f->tcp);
		evbuffer_add(buf, "\n", 1);
		evhttp_send_reply_chunk(f->req, buf);
		evbuffer_free(buf);
	}
}

static void follower_gone(struct evhttp_connection *conn, void *arg)
{
	struct follower *f = arg;
	struct follower **pp;

	(void)conn;
	forget_request(f->req);
	for (pp = &f->d->followers; *pp; pp = &(*pp)->next) {
		if (*pp == f) {
			*pp = f->next;
			break;
		}
	}
	free(f);
}

/* ?sandbox=ID&follow=1: the sandbox to keep to ("" for all), and whether to follow. */
bool events_query(const char *q, char *sandbox, size_t len, bool *follow,
		  struct api_fault *f)
{
	struct evkeyvalq kv;
	const char *sb;

	TAILQ_INIT(&kv);
	if (q && evhttp_parse_query_str(q, &kv) < 0)
		return api_fault(f, 400, "bad_request", "bad query string");
	sb = evhttp_find_header(&kv, "sandbox");
	if (sb && (strlen(sb) >= len || strchr(sb, '"'))) {
		evhttp_clear_headers(&kv);
		return api_fault(f, 400, "bad_request", "bad sandbox id");
	}
	snprintf(sandbox, len, "%s", sb ? sb : "");
	*follow = query_flag(evhttp_find_header(&kv, "follow"));
	evhttp_clear_headers(&kv);
	return true;
}

/* ---- a reader: the log so far, a step at a time ------------------------- */

struct events_reader {
	struct events_reader *next, *prev;
	struct daemon *d;
	struct evhttp_request *req;
	struct event *ev_step;		/* the next step when nothing was sent */
	int fd;				/* the log; -1: there is none */
	off_t pos;			/* the next byte to read */
	off_t end;			/* where to stop; -1 (follow): its end as it grows */
	off_t line_at;			/* the current line's first byte (a filter) */
	off_t range_to;			/* -1, or [pos, range_to) goes out whole */
	off_t resume;			/* 0, or after the range: "}\n", then on here */
	bool follow, started, matched;
	/*
	 * A TCP client's reader of every line: key is a local sandbox's
	 * (SANDBOX_LOCAL_PREFIX), and a line goes out when it is not there.
	 */
	bool tcp, hide;
	char want[64];			/* "": every line */
	char key[EVENTS_KEY_MAX];
	size_t keylen;
	char carry[EVENTS_KEY_MAX];	/* the current line's last keylen - 1 bytes */
	size_t ncarry;
};

static void reader_free(struct events_reader *r)
{
	if (r->prev)
		r->prev->next = r->next;
	else
		r->d->readers = r->next;
	if (r->next)
		r->next->prev = r->prev;
	if (r->ev_step)
		event_free(r->ev_step);
	if (r->fd >= 0)
		close(r->fd);
	free(r);
}

static void reader_gone(struct evhttp_connection *conn, void *arg)
{
	struct events_reader *r = arg;

	(void)conn;
	forget_request(r->req);
	reader_free(r);
}

static void reader_start(struct events_reader *r)
{
	if (r->started)
		return;
	evhttp_add_header(evhttp_request_get_output_headers(r->req), "Content-Type",
			  "application/x-ndjson");
	evhttp_send_reply_start(r->req, 200, "OK");
	r->started = true;
}

/* The end of what there was: a 404, the end of the reply, or a follower. */
static void reader_end(struct events_reader *r)
{
	struct evhttp_request *req = r->req;
	struct daemon *d = r->d;
	struct follower *fl;

	api_set_closecb(d, req, NULL, NULL);
	/* a destroyed sandbox's events stay readable; a name never seen is not one */
	if (!r->started && r->want[0] && !sandbox_find(d, r->want)) {
		reply_error(req, 404, "not_found", "no sandbox \"%s\", live or in "
			    "the audit log", r->want);
		reader_free(r);
		return;
	}
	if (!r->started && !r->follow) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
				  "application/x-ndjson");
		api_send_reply(req, 200, "OK", NULL);
		reader_free(r);
		return;
	}
	reader_start(r);
	fl = r->follow ? calloc(1, sizeof(*fl)) : NULL;
	if (!fl) {
		api_reply_end(req);
		reader_free(r);
		return;
	}
	fl->req = req;
	fl->d = d;
	fl->tcp = r->tcp;
	snprintf(fl->sandbox, sizeof(fl->sandbox), "%s", r->want);
	fl->next = d->followers;
	d->followers = fl;
	api_set_closecb(d, req, follower_gone, fl);
	reader_free(r);
}

/* Up to EVENTS_STEP bytes at pos, short of end or range_to; 0 at the end. */
static ssize_t reader_read(struct events_reader *r, char *buf)
{
	off_t stop = r->range_to >= 0 ? r->range_to : r->end;
	size_t want = EVENTS_STEP;
	ssize_t n;

	if (r->fd < 0)
		return 0;
	if (stop >= 0 && stop - r->pos < (off_t)want)
		want = (size_t)(stop - r->pos);
	if (!want)
		return 0;
	do
		n = pread(r->fd, buf, want, r->pos);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n;
}

/* Whether the key is in the line's part seg, or across from the carry. */
static bool key_in(struct events_reader *r, const char *seg, size_t len)
{
	char joint[2 * EVENTS_KEY_MAX];
	size_t take = len < r->keylen - 1 ? len : r->keylen - 1;

	if (memmem(seg, len, r->key, r->keylen))
		return true;
	if (!r->ncarry)
		return false;
	memcpy(joint, r->carry, r->ncarry);
	memcpy(joint + r->ncarry, seg, take);
	return memmem(joint, r->ncarry + take, r->key, r->keylen) != NULL;
}

/* Keep the last keylen - 1 bytes of the line so far, for the next read. */
static void keep_carry(struct events_reader *r, const char *seg, size_t len)
{
	size_t keep = r->keylen - 1;
	char joint[2 * EVENTS_KEY_MAX];
	size_t n;

	if (len >= keep) {
		memcpy(r->carry, seg + len - keep, keep);
		r->ncarry = keep;
		return;
	}
	memcpy(joint, r->carry, r->ncarry);
	memcpy(joint + r->ncarry, seg, len);
	n = r->ncarry + len;
	r->ncarry = n < keep ? n : keep;
	memcpy(r->carry, joint + n - r->ncarry, r->ncarry);
}

/*
 * The line from line_at to end (past its '\n') to go out from the file:
 * without its prev to a TCP client (its tail read again to find it).
 */
static void range_line(struct events_reader *r, off_t end)
{
	char tail[PREV_TAIL + 2];
	ssize_t n = -1;

	r->range_to = end;
	if (r->tcp && end - r->line_at > (off_t)sizeof(tail)) {
		do
			n = pread(r->fd, tail, sizeof(tail), end - (off_t)sizeof(tail));
		while (n < 0 && errno == EINTR);
	}
	if (n == (ssize_t)sizeof(tail) && before_prev(tail, sizeof(tail)) == 0) {
		r->range_to = end - (off_t)sizeof(tail);
		r->resume = end;
	}
	r->pos = r->line_at;
	r->line_at = end;
}

/*
 * The matching lines of buf (n bytes read at pos) into out.  A matching
 * line that began before buf is sent from the file (range_to); pos is
 * left where the next read begins.
 */
static void reader_lines(struct events_reader *r, const char *buf, size_t n,
			 struct evbuffer *out)
{
	size_t i = 0;
	bool send;

	while (i < n) {
		const char *nl = memchr(buf + i, '\n', n - i);
		size_t seg = (nl ? (size_t)(nl - buf) + 1 : n) - i;

		if (!r->matched)
			r->matched = key_in(r, buf + i, seg);
		if (!nl) {
			keep_carry(r, buf + i, seg);
			break;
		}
		i += seg;
		send = r->matched != r->hide;
		if (send && r->line_at >= r->pos) {
			line_add(out, buf + (r->line_at - r->pos),
				 (size_t)(r->pos + (off_t)i - r->line_at), r->tcp);
		} else if (send) {
			/* begun in an earlier read: from the file again, whole */
			range_line(r, r->pos + (off_t)i);
			r->matched = false;
			r->ncarry = 0;
			return;
		}
		r->line_at = r->pos + (off_t)i;
		r->matched = false;
		r->ncarry = 0;
	}
	r->pos += (off_t)n;
}

static void reader_sent(struct evhttp_connection *conn, void *arg);

/* One step: read, send what matches (then wait for it to be taken), or on. */
static void reader_run(struct events_reader *r)
{
	static const struct timeval now = { 0, 0 };
	char buf[EVENTS_STEP];
	struct evbuffer *out = evbuffer_new();
	ssize_t n = out ? reader_read(r, buf) : -ENOMEM;

	if (n > 0 && (r->range_to >= 0 || (!r->want[0] && !r->hide))) {
		evbuffer_add(out, buf, (size_t)n);
		r->pos += n;
		if (r->pos == r->range_to)
			r->range_to = -1;
		if (r->range_to < 0 && r->resume) {
			evbuffer_add(out, "}\n", 2);
			r->pos = r->resume;
			r->resume = 0;
		}
	} else if (n > 0) {
		reader_lines(r, buf, (size_t)n, out);
	} else if (n == 0 && r->want[0] && !r->tcp && r->matched && r->line_at < r->pos) {
		/*
		 * a last line with no '\n' (a write cut short): as it is; not
		 * to a TCP reader, which cannot tell whose it is (hiding) nor
		 * have it without its prev (cut short, or not)
		 */
		r->range_to = r->pos;
		r->pos = r->line_at;
		r->line_at = r->range_to;
		r->matched = false;
	} else {
		/* the end, or a read error: what was sent stands */
		if (out)
			evbuffer_free(out);
		reader_end(r);
		return;
	}
	if (evbuffer_get_length(out)) {
		reader_start(r);
		evhttp_send_reply_chunk_with_cb(r->req, out, reader_sent, r);
	} else if (event_add(r->ev_step, &now) < 0) {
		evbuffer_free(out);
		api_set_closecb(r->d, r->req, NULL, NULL);
		if (r->started)
			api_reply_end(r->req);
		else
			reply_error(r->req, 500, "internal", "cannot schedule the "
				    "next read of the audit log");
		reader_free(r);
		return;
	}
	evbuffer_free(out);
}

static void reader_sent(struct evhttp_connection *conn, void *arg)
{
	(void)conn;
	reader_run(arg);
}

static void reader_step(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	reader_run(arg);
}

static struct events_reader *reader_new(struct daemon *d, struct evhttp_request *req,
				 const char *want, bool follow, bool tcp)
{
	struct events_reader *r = calloc(1, sizeof(*r));
	char path[4096];
	struct stat st;

	if (!r)
		return NULL;
	r->d = d;
	r->req = req;
	r->follow = follow;
	r->end = -1;
	r->range_to = -1;
	r->tcp = tcp;
	r->hide = tcp && !want[0];
	snprintf(r->want, sizeof(r->want), "%s", want);
	if (r->hide)
		r->keylen = (size_t)snprintf(r->key, sizeof(r->key), "\"sandbox\":\"%s",
					     SANDBOX_LOCAL_PREFIX);
	else
		r->keylen = (size_t)snprintf(r->key, sizeof(r->key), "\"sandbox\":\"%s\"",
					     want);
	r->ev_step = evtimer_new(d->base, reader_step, r);
	/* nor a line an earlier daemon wrote, whose ids do not say whose */
	if (tcp)
		r->pos = r->line_at = d->tcp_since_bytes;
	snprintf(path, sizeof(path), "%s/audit.jsonl", d->state_dir);
	r->fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	/* without follow, the log as it is now: a busy daemon's log keeps growing */
	if (r->fd >= 0 && !follow)
		r->end = fstat(r->fd, &st) == 0 ? st.st_size : 0;
	if (!r->ev_step || (r->fd < 0 && errno != ENOENT)) {
		if (r->ev_step)
			event_free(r->ev_step);
		if (r->fd >= 0)
			close(r->fd);
		free(r);
		return NULL;
	}
	r->next = d->readers;
	if (r->next)
		r->next->prev = r;
	d->readers = r;
	return r;
}

void events_get(struct daemon *d, struct evhttp_request *req, const char *rest)
{
	const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
	struct api_fault fault;
	struct events_reader *r;
	bool following;
	char want[64];

	(void)rest;
	if (!events_query(q, want, sizeof(want), &following, &fault)) {
		reply_fault(req, &fault);
		return;
	}
	/* a local sandbox is not there for a TCP client, live or in the log */
	if (want[0] && !sandbox_id_seen(d, req, want)) {
		reply_error(req, 404, "not_found", "no sandbox \"%s\", live or in "
			    "the audit log", want);
		return;
	}
	r = reader_new(d, req, want, following, api_over_tcp(d, req));
	if (!r) {
		reply_error(req, 500, "internal", "cannot read the audit log %s/audit.jsonl: %s",
			    d->state_dir, strerror(errno));
		return;
	}
	api_set_closecb(d, req, reader_gone, r);
	reader_run(r);
}

/* The daemon stops: every reader's reply ends where it is. */
void api_events_stop(struct daemon *d)
{
	while (d->readers) {
		struct events_reader *r = d->readers;

		api_set_closecb(d, r->req, NULL, NULL);
		if (r->started)
			api_reply_end(r->req);
		else
			reply_error(r->req, 503, "busy", "the daemon is stopping");
		reader_free(r);
	}
}
