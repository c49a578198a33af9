/*
 * api_untar.c - an archive streamed in: PUT /v1/sandboxes/ID/archive?path=DIR
 * with "Connection: Upgrade", "Upgrade: corral-tar" and no body is
 * answered "101 Switching Protocols" (or refused as the PUT would be:
 * path, room); the client then sends the tar in frames, each a 32-bit
 * big-endian length and that many bytes (at most UPLOAD_FRAME_MAX), and a
 * frame of length 0 after the last.  Each frame goes to a spool file of
 * the state directory as it comes (no name: O_TMPFILE), the worker
 * unpacks from it (corral_box_untar_fd_start, every refusal of the
 * archive's as for a PUT's body), and the daemon writes the answer, one
 * JSON object, the PUT's with its "status" (201: "path", "entries",
 * "bytes"; else "error", "detail"), and closes.
 *
 * Why: evhttp (libevent 2.1) gives a server a request's body only whole,
 * and the PUT's 64 MiB were held by the daemon three times over (the body,
 * made contiguous, copied for the worker's fork): 8 clients' 60 MiB tars at
 * once peaked it at 311 MB.  Here it holds a frame at most (the read is
 * stopped past UPLOAD_READ_AHEAD until the spool has taken it).  As
 * api_tty.c does, the handler takes the connection's bufferevent after the
 * 101, and frees the connection when done, which tells the gate.
 *
 * The upload counts for its sandbox's owner (builds_room) from the 101 to
 * its answer, and holds one of the daemon's workers only while the worker
 * unpacks, as the PUT's unpack did: whole, it waits for one.  Held from
 * the 101, a worker was the client's for as long as it took to send: two
 * TCP peers that each sent a byte every 20 s into two uploads held all
 * BUILDS_MAX workers, and every diff, export, snapshot and archive of every
 * other client, the unix socket's too, was a 503 for as long as they
 * liked.  What arriving takes is a spool of the state directory's disk:
 * at most UPLOAD_SPOOLS of them at once, TCP peers' UPLOAD_SPOOLS_TCP, and
 * each at most API_FILE_MAX, as the PUT's body; a client that sends
 * nothing for UPLOAD_IDLE_S is closed, its spool freed.
 */
#include "api.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define UPLOAD_FRAME_HEAD	4
#define UPLOAD_FRAME_MAX	(1024 * 1024)
#define UPLOAD_READ_AHEAD	(256 * 1024)	/* read, not yet spooled */
#define UPLOAD_IDLE_S		30
#define UPLOAD_LINGER_MS	2000		/* the client's close awaited */
/* arriving or whole at once: the state dir's disk they take as before, when each held a worker */
#define UPLOAD_SPOOLS		BUILDS_MAX
/*
 * What a spool leaves free of the state directory's disk: the audit log's
 * lines (a write that fails loses them, counted), the sandboxes' state.
 */
#define UPLOAD_DISK_RESERVE	(64ull << 20)
#define UPLOAD_SPOOLS_TCP	(UPLOAD_SPOOLS * 3 / 4)	/* of them, TCP peers' */

struct upload {
	struct upload *next;			/* the daemon's, oldest first */
	struct worker_owner owner;
	bool owned;				/* owner counted (worker_hold) */
	bool tcp;				/* a TCP peer's sandbox's */
	bool waiting;				/* whole, for a worker */
	struct event *ev_start;			/* a worker was given back */
	struct event *ev_gone;			/* the client's end, once whole */
	struct daemon *d;
	struct evhttp_connection *evcon;	/* NULL once closed */
	struct bufferevent *bev;
	struct corral_box_untar_job *job;	/* the worker, once the tar is whole */
	struct event *ev_close;
	int spool;
	uint64_t len;				/* spooled */
	uint32_t left;				/* of the frame being read */
	bool in_frame, ended, answered;
	char id[64];				/* the sandbox's: found again at the end */
	char path[4096];
};

static void upload_unlink(struct upload *u)
{
	for (struct upload **p = &u->d->uploads; *p; p = &(*p)->next)
		if (*p == u) {
			*p = u->next;
			break;
		}
	u->next = NULL;
}

static void upload_maybe_free(struct upload *u)
{
	if (u->evcon || u->job)
		return;
	upload_unlink(u);
	if (u->owned)
		worker_disown(u->d, &u->owner);
	if (u->spool >= 0)
		close(u->spool);
	if (u->ev_close)
		event_free(u->ev_close);
	if (u->ev_start)
		event_free(u->ev_start);
	if (u->ev_gone)
		event_free(u->ev_gone);
	free(u);
}

static void on_close(evutil_socket_t fd, short what, void *arg)
{
	struct upload *u = arg;

	(void)fd;
	(void)what;
	/* calls upload_conn_closed() (through the gate's close hook) */
	if (u->evcon)
		evhttp_connection_free(u->evcon);
}

/* Closed from the loop, not from under a callback of its own bufferevent. */
static void upload_close(struct upload *u)
{
	if (!u->bev)
		return;
	bufferevent_disable(u->bev, EV_READ | EV_WRITE);
	event_active(u->ev_close, 0, 0);
}

/*
 * The answer, once: written, then the socket shut for writing so that the
 * client sees its end; what the client still sends is dropped until it
 * closes (UPLOAD_LINGER_MS at most), as api_tty.c's last frame.
 */
static void upload_answer(struct upload *u, json_t *o)
{
	char *text = o ? json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;

	json_decref(o);
	/* answered: the spool's disk is given back now, not at the close */
	if (!u->job && u->spool >= 0) {
		close(u->spool);
		u->spool = -1;
	}
	u->waiting = false;
	if (u->ev_gone)
		event_del(u->ev_gone);
	if (u->answered || !u->bev) {
		free(text);
		return;
	}
	u->answered = true;
	if (!text) {
		upload_close(u);
		return;
	}
	evbuffer_add(bufferevent_get_output(u->bev), text, strlen(text));
	evbuffer_add(bufferevent_get_output(u->bev), "\n", 1);
	free(text);
	bufferevent_enable(u->bev, EV_WRITE);
}

static void upload_fail(struct upload *u, int status, const char *error,
			const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void upload_fail(struct upload *u, int status, const char *error,
			const char *fmt, ...)
{
	json_t *o = json_pack("{s:i}", "status", status), *e;
	va_list ap;

	va_start(ap, fmt);
	e = api_error_obj(error, fmt, ap);
	va_end(ap);
	if (!o || !e || json_object_update(o, e) < 0) {
		json_decref(o);
		o = NULL;	/* upload_answer closes, unanswered */
	}
	json_decref(e);
	upload_answer(u, o);
}

static void upload_fail_err(struct upload *u, const struct corral_err *err)
{
	const char *error;
	int status = api_status(err->code, &error);

	upload_fail(u, status, error, "%s", err->msg);
}

static void unpacked(void *arg, int r, const struct corral_untar *st,
		     const struct corral_err *err)
{
	struct upload *u = arg;

	u->job = NULL;	/* the spool is closed with the answer */
	worker_release(u->d, &u->owner);
	if (r < 0)
		upload_fail_err(u, err);
	else
		upload_answer(u, json_pack("{s:i, s:s, s:I, s:I}", "status", 201,
					   "path", u->path,
					   "entries", (json_int_t)st->entries,
					   "bytes", (json_int_t)st->bytes));
	if (!u->evcon)
		upload_maybe_free(u);
}

/*
 * The archive whole: the sandbox found again (it may be gone), its worker
 * started, or the upload waits for one (untar_stream_room).
 */
static void upload_start(struct upload *u)
{
	struct sandbox *sb = sandbox_find(u->d, u->id);
	struct corral_err err = { 0 };

	u->waiting = false;
	if (!sb) {
		upload_fail(u, 410, "gone", "the sandbox %s was destroyed while its "
			    "archive came", u->id);
		return;
	}
	if (!worker_take(u->d, &u->owner)) {
		u->waiting = true;
		return;
	}
	if (corral_box_untar_fd_start(sb->box, u->path, u->spool, unpacked, u,
				      &u->job, &err) < 0) {
		worker_release(u->d, &u->owner);
		upload_fail_err(u, &err);
	}
}

static void on_client_gone(evutil_socket_t fd, short what, void *arg);

/* The end frame. */
static void upload_unpack(struct upload *u)
{
	int fd = bufferevent_getfd(u->bev);

	u->ended = true;
	/*
	 * No more frames: what else the client sends waits unread, and its
	 * close is heard of as a PUT's is (watch_closed): the unpack, or the
	 * wait for a worker, stops.
	 */
	bufferevent_disable(u->bev, EV_READ);
	if (fd >= 0 && (u->ev_gone = event_new(u->d->base, fd, EV_CLOSED,
					       on_client_gone, u)) &&
	    event_add(u->ev_gone, NULL) < 0) {
		event_free(u->ev_gone);
		u->ev_gone = NULL;
	}
	upload_start(u);
}

/* A worker was given back: the oldest upload that waits for one tries. */
void untar_stream_room(struct daemon *d)
{
	for (struct upload *u = d->uploads; u; u = u->next)
		if (u->waiting) {
			event_active(u->ev_start, 0, 0);
			return;
		}
}

static void on_start(evutil_socket_t fd, short what, void *arg)
{
	struct upload *u = arg;

	(void)fd;
	(void)what;
	if (!u->waiting || !u->bev)
		return;
	upload_start(u);
	/* started (or answered): the next one, if there is room for it too */
	if (!u->waiting)
		untar_stream_room(u->d);
}

/*
 * Whether n more bytes leave the state directory's disk its reserve; else
 * the upload is refused (a 507).  A client's spools filled it, and then
 * the audit log lost every sandbox's events until they were gone.
 */
static bool spool_fits(struct upload *u, size_t n)
{
	struct statvfs sv;
	uint64_t free_bytes;

	if (fstatvfs(u->spool, &sv) < 0)
		return true;	/* not told: the write says */
	free_bytes = (uint64_t)sv.f_bavail * sv.f_frsize;
	if (free_bytes >= n + UPLOAD_DISK_RESERVE)
		return true;
	upload_fail(u, 507, "no_space", "the state directory's disk has %llu bytes "
		    "free: an archive's spool leaves it %llu (the audit log's, "
		    "the sandboxes' state)", (unsigned long long)free_bytes,
		    UPLOAD_DISK_RESERVE);
	return false;
}

/* Frames out of the input: the spool takes their bytes. */
static void on_client_read(struct bufferevent *bev, void *arg)
{
	struct upload *u = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	while (!u->ended && !u->answered && evbuffer_get_length(in)) {
		unsigned char h[UPLOAD_FRAME_HEAD];
		size_t n;
		int k;

		if (!u->in_frame) {
			if (evbuffer_get_length(in) < sizeof(h))
				return;
			evbuffer_remove(in, h, sizeof(h));
			u->left = (uint32_t)h[0] << 24 | h[1] << 16 | h[2] << 8 | h[3];
			if (u->left == 0) {
				upload_unpack(u);
				return;
			}
			if (u->left > UPLOAD_FRAME_MAX) {
				upload_fail(u, 400, "bad_request", "a frame of %u bytes: "
					    "at most %d", u->left, UPLOAD_FRAME_MAX);
				return;
			}
			u->in_frame = true;
		}
		n = evbuffer_get_length(in);
		/*
		 * A head whose bytes came alone: its data is awaited.  Written
		 * as a write of 0 bytes, it failed the upload with the errno
		 * of the socket's last read (a 409, "Resource temporarily
		 * unavailable"), whenever a read ended right after a head.
		 */
		if (!n)
			return;
		if (n > u->left)
			n = u->left;
		if (u->len + n > API_FILE_MAX) {
			upload_fail(u, 413, "too_large", "the archive is over %d bytes, "
				    "the limit", API_FILE_MAX);
			return;
		}
		if (!spool_fits(u, n))
			return;
		k = evbuffer_write_atmost(in, u->spool, (ev_ssize_t)n);
		if (k <= 0) {
			struct corral_err err = { 0 };

			corral_set_errno(&err, k < 0 ? errno : EIO, "writing the "
					 "archive's spool in the state directory");
			upload_fail_err(u, &err);
			return;
		}
		u->len += (uint64_t)k;
		u->left -= (uint32_t)k;
		u->in_frame = u->left > 0;
	}
}

/* After the answer: what the client still sends is dropped. */
static void on_linger_read(struct bufferevent *bev, void *arg)
{
	struct evbuffer *in = bufferevent_get_input(bev);

	(void)arg;
	evbuffer_drain(in, evbuffer_get_length(in));
}

static void on_client_event(struct bufferevent *bev, short what, void *arg);

/* The answer written: the client's end is awaited, bounded. */
static void on_client_write(struct bufferevent *bev, void *arg)
{
	struct upload *u = arg;
	struct timeval tv = { UPLOAD_LINGER_MS / 1000, UPLOAD_LINGER_MS % 1000 * 1000 };
	int fd = bufferevent_getfd(bev);

	if (!u->answered)
		return;		/* the 101 */
	bufferevent_setcb(bev, on_linger_read, NULL, on_client_event, u);
	bufferevent_disable(bev, EV_WRITE);
	bufferevent_enable(bev, EV_READ);
	on_linger_read(bev, u);
	/*
	 * Shut for writing, so that a client reading to the end sees it now;
	 * over TLS after a close_notify (libevent 2.1 sends none, here or at
	 * the close, and a strict client read an unexpected EOF after the
	 * answer).  The TLS listener's bufferevent is its socket's own.
	 */
	corral_tls_server_end(u->d->tls, bev);
	if ((!bufferevent_get_underlying(bev) && (fd < 0 || shutdown(fd, SHUT_WR) < 0)) ||
	    event_add(u->ev_close, &tv) < 0)
		upload_close(u);
}

static void on_client_event(struct bufferevent *bev, short what, void *arg)
{
	struct upload *u = arg;

	(void)bev;
	(void)what;
	/* EOF, an error or the idle timeout: the client is gone */
	if (u->job)
		corral_box_untar_cancel(u->job);	/* unpacked(), now */
	upload_close(u);
}

static void on_client_gone(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	on_client_event(NULL, what, arg);
}

/* The connection is being freed (by us, by the client's end, at shutdown). */
static void upload_conn_closed(struct evhttp_connection *evcon, void *arg)
{
	struct upload *u = arg;

	(void)evcon;
	u->evcon = NULL;
	u->bev = NULL;
	if (u->job) {
		/* unpacked(), now: its answer to nobody, and u freed there */
		corral_box_untar_cancel(u->job);
		return;
	}
	upload_maybe_free(u);
}

/*
 * Whether one more spool may be taken (TCP peers' in a share of their own,
 * so that they leave the unix socket's clients room); f says why not.
 */
static bool spool_room(struct daemon *d, bool tcp, struct api_fault *f)
{
	int all = 0, peers = 0;

	/* an answered one's spool is closed, its connection not yet */
	for (struct upload *u = d->uploads; u; u = u->next) {
		all += u->spool >= 0;
		peers += u->spool >= 0 && u->tcp;
	}
	if (all >= UPLOAD_SPOOLS)
		return api_fault(f, 503, "busy", "%d archives are being streamed in, "
				 "or wait to be unpacked, the daemon's limit: try "
				 "again when one is done", all);
	if (tcp && peers >= UPLOAD_SPOOLS_TCP)
		return api_fault(f, 503, "busy", "%d archives of TCP peers' sandboxes "
				 "are being streamed in, or wait to be unpacked, the "
				 "most TCP peers may have: try again when one is done",
				 peers);
	return true;
}

/* "Connection: Upgrade" and "Upgrade: corral-tar", in HTTP/1.1 (api_tty.c). */
bool untar_stream_asked(struct evhttp_request *req)
{
	return api_upgrade_asked(req, "corral-tar");
}

void untar_stream_start(struct sandbox *sb, struct evhttp_request *req,
			const char *path)
{
	static const char switching[] =
		"HTTP/1.1 101 Switching Protocols\r\n"
		"Connection: Upgrade\r\nUpgrade: corral-tar\r\n\r\n";
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
	struct timeval idle = { UPLOAD_IDLE_S, 0 };
	struct api_fault f;
	struct upload *u;

	if (!bev) {
		reply_error(req, 500, "internal", "the connection has no bufferevent");
		return;
	}
	if (!spool_room(sb->d, sb->peer[0] != '\0', &f)) {
		reply_busy(req, &f);
		return;
	}
	if (evbuffer_get_length(evhttp_request_get_input_buffer(req))) {
		reply_error(req, 400, "bad_request", "an archive streamed in comes "
			    "after the 101, not as the request's body");
		return;
	}
	u = calloc(1, sizeof(*u));
	if (!u || !(u->ev_close = event_new(sb->d->base, -1, 0, on_close, u)) ||
	    !(u->ev_start = event_new(sb->d->base, -1, 0, on_start, u))) {
		if (u && u->ev_close)
			event_free(u->ev_close);
		free(u);
		reply_error(req, 500, "internal", "out of memory for an archive's upload");
		return;
	}
	u->d = sb->d;
	u->spool = spool_open(sb->d);
	if (u->spool < 0) {
		struct corral_err err = { 0 };

		corral_set_errno(&err, errno, "a spool for the archive in the state "
				 "directory %s", sb->d->state_dir);
		u->evcon = NULL;
		upload_maybe_free(u);
		reply_err(req, &err);
		return;
	}
	u->evcon = evcon;
	u->bev = bev;
	snprintf(u->id, sizeof(u->id), "%s", sb->id);
	snprintf(u->path, sizeof(u->path), "%s", path);
	u->tcp = sb->peer[0] != '\0';
	worker_hold(sb->d, &u->owner, sb);
	u->owned = true;
	/* the daemon's list, at its end: the oldest waits first */
	for (struct upload **p = &sb->d->uploads;; p = &(*p)->next)
		if (!*p) {
			*p = u;
			break;
		}
	/* from here the connection is ours: no HTTP, no gate */
	api_gate_upgrade(sb->d, evcon);
	api_set_closecb(sb->d, req, upload_conn_closed, u);
	bufferevent_setcb(bev, on_client_read, on_client_write, on_client_event, u);
	bufferevent_set_timeouts(bev, &idle, &idle);
	bufferevent_setwatermark(bev, EV_READ, 0, UPLOAD_READ_AHEAD);
	bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
	evbuffer_add(bufferevent_get_output(bev), switching, sizeof(switching) - 1);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
	/* what came right after the request (a client should wait for the 101) */
	if (evbuffer_get_length(bufferevent_get_input(bev)))
		on_client_read(bev, u);
}
