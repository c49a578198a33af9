/*
 * api_tty.c - a terminal over the API: POST /v1/sandboxes/ID/exec with
 * "tty": true and the headers "Connection: Upgrade", "Upgrade: corral-tty"
 * is answered "101 Switching Protocols", and the connection then carries
 * frames both ways (docs/API.md, "Terminals"): input and window sizes in,
 * output and the call's result out.  The call's pty is made inside the
 * sandbox (call.c); nothing of the host's is handed in.
 *
 * Why an upgrade with frames of our own, not a websocket: evhttp (libevent
 * 2.1) has neither websockets nor a way to read a request body as it comes
 * in, but once a request has been read it leaves the connection's
 * bufferevent alone until the answer.  The handler writes the 101 itself,
 * takes the bufferevent's callbacks, and frees the connection through
 * evhttp_connection_free() when done, which also frees the request and
 * tells the gate.  A websocket would add a handshake hash, masking and
 * fragmentation for nothing a client of this daemon needs; a frame here is
 * a kind byte and a length.
 *
 * The frame reader holds what one frame may be, never more: a length over
 * TTY_FRAME_MAX, or an unknown kind, ends the session with an error frame.
 * Input the pty does not take stops the reading of the connection until it
 * does; output the client does not read stops the call's output.  A client
 * that goes away hangs the terminal up (SIGHUP inside, as a closed terminal
 * window) and its call is killed TTY_HANGUP_GRACE_MS later if it has not
 * ended; when it ends, what it started is killed with it (its cgroup;
 * without cgroups, its process group: a job of an interactive shell in a
 * group of its own that ignores SIGHUP is left to the sandbox's end).
 *
 * A session neither side uses (no frame from the client, no output for
 * --tty-idle-timeout seconds: a client that went quiet, or stopped
 * reading) ends as a timeout does: the call is killed, and its result
 * and the record say why.  Activity is only noted as it comes; the one
 * timer looks at it when due, rather than being re-armed at each frame.
 */
#include "api.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http_struct.h>

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#define TTY_FRAME_HEAD		5		/* kind, then a 32-bit big-endian length */
#define TTY_FRAME_MAX		(64 * 1024)	/* a client's frame's payload, at most */
#define TTY_HANGUP_GRACE_MS	1000		/* SIGHUP's turn before SIGKILL */
#define TTY_LINGER_MS		2000		/* the client's close awaited, at most */

struct tty_session {
	struct daemon *d;
	struct evhttp_connection *evcon;	/* NULL once closed */
	struct bufferevent *bev;
	struct corral_call *call;		/* NULL once done */
	struct evbuffer *input;			/* typed, not yet taken by the pty */
	struct event *ev_kill;
	struct event *ev_idle;			/* --tty-idle-timeout */
	uint64_t active_ms;			/* the last frame in or output out */
	uint64_t cpu_ns;			/* the call's CPU when last looked at */
	struct event *ev_close;			/* the connection's end, from the loop */
	bool held;				/* the call's output waits for the client */
	bool ending;				/* the last frame is queued */
	bool lingering;				/* ... and written: session_linger() */
};

static void session_maybe_free(struct tty_session *s)
{
	if (s->evcon || s->call)
		return;
	if (s->ev_kill)
		event_free(s->ev_kill);
	if (s->ev_idle)
		event_free(s->ev_idle);
	if (s->ev_close)
		event_free(s->ev_close);
	if (s->input)
		evbuffer_free(s->input);
	free(s);
}

static void on_close(evutil_socket_t fd, short what, void *arg)
{
	struct tty_session *s = arg;

	(void)fd;
	(void)what;
	/* calls session_conn_closed() (through the gate's close hook) */
	if (s->evcon)
		evhttp_connection_free(s->evcon);
}

/*
 * Close the connection from the loop, not from under a callback of its
 * own bufferevent or of the call that may be freed on the way back.
 */
static void session_close(struct tty_session *s)
{
	if (!s->bev)
		return;
	bufferevent_disable(s->bev, EV_READ | EV_WRITE);
	event_active(s->ev_close, 0, 0);
}

/*
 * The last frame is written: the client closes once it has it.  Until it
 * does (TTY_LINGER_MS at most), what it still sends is read and dropped:
 * a ^D it typed as the command ended.  Closed with those bytes unread,
 * the connection was reset, and over TCP what the kernel had not yet sent
 * of the last frames was thrown away with it.  The socket is shut for
 * writing, so that a client that waits for the end sees it now; over TLS
 * after a close_notify (libevent sends none: a strict client read the
 * bare FIN as an unexpected EOF).
 */
static void session_linger(struct tty_session *s)
{
	struct timeval tv = { TTY_LINGER_MS / 1000, TTY_LINGER_MS % 1000 * 1000 };
	int fd;

	if (!s->bev || s->lingering)
		return;
	s->lingering = true;
	evbuffer_drain(bufferevent_get_input(s->bev),
		       evbuffer_get_length(bufferevent_get_input(s->bev)));
	bufferevent_disable(s->bev, EV_WRITE);
	bufferevent_enable(s->bev, EV_READ);
	fd = bufferevent_getfd(s->bev);
	corral_tls_server_end(s->d->tls, s->bev);
	if (!bufferevent_get_underlying(s->bev) && fd >= 0 &&
	    shutdown(fd, SHUT_WR) < 0) {
		session_close(s);	/* the client is gone already */
		return;
	}
	/* EOF or an error comes to on_client_event(); else this timer */
	if (event_add(s->ev_close, &tv) < 0)
		session_close(s);
}

static void send_frame(struct tty_session *s, char kind, const void *data,
		       size_t len)
{
	unsigned char head[TTY_FRAME_HEAD] = { (unsigned char)kind, len >> 24,
					       len >> 16, len >> 8, len };
	struct evbuffer *out;

	if (!s->bev || s->ending)
		return;
	out = bufferevent_get_output(s->bev);
	evbuffer_add(out, head, sizeof(head));
	evbuffer_add(out, data, len);
}

/* The last frame: closed once the client has it. */
static void send_last(struct tty_session *s, char kind, json_t *o)
{
	char *text = o ? json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;

	json_decref(o);
	if (text)
		send_frame(s, kind, text, strlen(text));
	free(text);
	s->ending = true;
	if (s->bev && evbuffer_get_length(bufferevent_get_output(s->bev)) == 0)
		session_linger(s);
}

/* The session cannot go on: the terminal is hung up, the call killed. */
static void session_fail(struct tty_session *s, const char *error,
			 const char *detail)
{
	if (s->call) {
		corral_call_tty_hangup(s->call);
		corral_call_kill(s->call, SIGKILL);
	}
	send_last(s, 'e', json_pack("{s:s, s:s}", "error", error, "detail", detail));
}

/* ---- the call's side ------------------------------------------------------ */

static void tty_output(void *arg, struct corral_call *c, int stream,
		       const char *data, size_t len)
{
	struct tty_session *s = arg;

	(void)stream;
	s->active_ms = corral_now_ms();
	send_frame(s, 'o', data, len);
	/* a client that reads slower than the terminal writes holds it */
	if (!s->held && s->bev &&
	    evbuffer_get_length(bufferevent_get_output(s->bev)) > STREAM_QUEUE_MAX) {
		s->held = true;
		corral_call_hold_output(c, true);
	}
}

static void tty_done(void *arg, struct corral_call *c,
		     const struct corral_result *res)
{
	struct tty_session *s = arg;
	json_t *o = result_json(res);

	/* the output went out as frames already */
	if (o) {
		json_object_del(o, "stdout");
		json_object_del(o, "stderr");
		json_object_del(o, "stdout_truncated");
		json_object_del(o, "stderr_truncated");
	}
	/*
	 * The client went away before the end: what the call started (jobs
	 * that ignored the hang-up) goes with it, as the call would have.
	 */
	if (!s->evcon)
		corral_call_kill(c, SIGKILL);
	corral_call_free(c);
	s->call = NULL;
	if (s->ev_kill)
		event_del(s->ev_kill);
	event_del(s->ev_idle);
	send_last(s, 'x', o);
	session_maybe_free(s);
}

/* Input the client sent before the pty had room for it. */
static bool feed_input(struct tty_session *s)
{
	while (s->call && evbuffer_get_length(s->input)) {
		size_t n = evbuffer_get_contiguous_space(s->input);
		ssize_t k = corral_call_tty_write(s->call, evbuffer_pullup(s->input, n), n);

		if (k < 0) {
			/* the terminal is gone (the call is ending): typing goes nowhere */
			evbuffer_drain(s->input, evbuffer_get_length(s->input));
			return true;
		}
		evbuffer_drain(s->input, k);
		if ((size_t)k < n)
			return false;	/* tty_room() comes back */
	}
	return true;
}

static void on_client_read(struct bufferevent *bev, void *arg);

static void tty_room(void *arg, struct corral_call *c)
{
	struct tty_session *s = arg;

	(void)c;
	if (feed_input(s) && s->bev && !s->ending) {
		bufferevent_enable(s->bev, EV_READ);
		on_client_read(s->bev, s);
	}
}

/* ---- the client's side ---------------------------------------------------- */

/* One whole frame of the client's; false when the session ended. */
static bool take_frame(struct tty_session *s, char kind, struct evbuffer *in,
		       size_t len)
{
	unsigned char ws[4];

	s->active_ms = corral_now_ms();
	switch (kind) {
	case 'i':
		evbuffer_remove_buffer(in, s->input, len);
		if (!feed_input(s))
			bufferevent_disable(s->bev, EV_READ);
		return true;
	case 'w':
		if (len != 4) {
			session_fail(s, "bad_request", "a window size frame ('w') "
				     "is 4 bytes: rows and columns, 16 bits each");
			return false;
		}
		evbuffer_remove(in, ws, 4);
		if (s->call)
			corral_call_tty_resize(s->call, ws[0] << 8 | ws[1],
					       ws[2] << 8 | ws[3]);
		return true;
	default:
		session_fail(s, "bad_request", "unknown frame kind: the client "
			     "sends 'i' (input) and 'w' (window size)");
		return false;
	}
}

static void on_client_read(struct bufferevent *bev, void *arg)
{
	struct tty_session *s = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	unsigned char head[TTY_FRAME_HEAD];
	size_t len;

	while (!s->ending && evbuffer_get_length(s->input) == 0 &&
	       evbuffer_copyout(in, head, sizeof(head)) == sizeof(head)) {
		len = (size_t)head[1] << 24 | head[2] << 16 | head[3] << 8 | head[4];
		if (len > TTY_FRAME_MAX) {
			evbuffer_drain(in, evbuffer_get_length(in));
			session_fail(s, "too_large", "a frame's payload is at most "
				     "65536 bytes");
			return;
		}
		if (evbuffer_get_length(in) < sizeof(head) + len)
			return;
		evbuffer_drain(in, sizeof(head));
		if (!take_frame(s, (char)head[0], in, len))
			return;
	}
	/* after the last frame, whatever the client sends is dropped */
	if (s->ending)
		evbuffer_drain(in, evbuffer_get_length(in));
}

static void on_client_write(struct bufferevent *bev, void *arg)
{
	struct tty_session *s = arg;

	(void)bev;
	if (s->ending) {
		session_linger(s);
		return;
	}
	if (s->held && s->call) {
		s->held = false;
		corral_call_hold_output(s->call, false);
	}
}

static void on_kill(evutil_socket_t fd, short what, void *arg)
{
	struct tty_session *s = arg;

	(void)fd;
	(void)what;
	if (s->call)
		corral_call_kill(s->call, SIGKILL);
}

/*
 * A command at work prints nothing for a while (a build, a test run): the
 * session is in use while it runs.  So is one whose command used at
 * least TTY_BUSY_CPU_MS of CPU since the last look; an idle shell uses
 * none.  A sandbox that wants its session kept can print anyway: this
 * bounds the client's abandonment, not the sandbox.
 */
#define TTY_BUSY_CPU_MS	100

static bool session_busy(struct tty_session *s)
{
	uint64_t ns;
	bool busy;

	if (corral_call_cpu_ns(s->call, &ns) < 0)
		return false;
	busy = ns >= s->cpu_ns && ns - s->cpu_ns >= TTY_BUSY_CPU_MS * 1000000ull;
	s->cpu_ns = ns;
	return busy;
}

/*
 * Due: a session quiet for --tty-idle-timeout ends as timed out, unless
 * its command worked meanwhile or its sandbox is paused; one used since
 * the timer was armed is looked at again when it would be.
 */
static void on_idle(evutil_socket_t fd, short what, void *arg)
{
	struct tty_session *s = arg;
	uint64_t limit_ms = (uint64_t)s->d->limits.tty_idle_timeout_s * 1000;
	uint64_t quiet_ms = corral_now_ms() - s->active_ms;
	char why[192];

	(void)fd;
	(void)what;
	if (!s->call)
		return;
	/* a pause (a person's) holds the clock: nothing inside can answer */
	if (quiet_ms >= limit_ms && (corral_call_paused(s->call) || session_busy(s))) {
		s->active_ms = corral_now_ms();
		quiet_ms = 0;
	}
	if (quiet_ms < limit_ms) {
		struct timeval tv = { (limit_ms - quiet_ms) / 1000,
				      (limit_ms - quiet_ms) % 1000 * 1000 };

		if (event_add(s->ev_idle, &tv) == 0)
			return;
	}
	snprintf(why, sizeof(why), "its terminal had no input from its client "
		 "and no output, and its command no work, for %u s (corral serve "
		 "--tty-idle-timeout)",
		 s->d->limits.tty_idle_timeout_s);
	corral_call_time_out(s->call, limit_ms, why);
}

/* The connection is being freed (by us, by the client's end, at shutdown). */
static void session_conn_closed(struct evhttp_connection *evcon, void *arg)
{
	struct tty_session *s = arg;
	struct timeval tv = { TTY_HANGUP_GRACE_MS / 1000,
			      TTY_HANGUP_GRACE_MS % 1000 * 1000 };

	(void)evcon;
	s->evcon = NULL;
	s->bev = NULL;
	/* the terminal is closed: SIGHUP inside, then make sure */
	if (s->call) {
		corral_call_tty_hangup(s->call);
		if (!s->ev_kill || event_add(s->ev_kill, &tv) < 0)
			corral_call_kill(s->call, SIGKILL);
	}
	session_maybe_free(s);
}

static void on_client_event(struct bufferevent *bev, short what, void *arg)
{
	struct tty_session *s = arg;

	(void)bev;
	(void)what;
	/* EOF, an error or the gate's timeout: the client is gone */
	session_close(s);
}

static void idle_arm(struct tty_session *s)
{
	struct timeval tv = { s->d->limits.tty_idle_timeout_s, 0 };

	s->active_ms = corral_now_ms();
	/* without it the session is bounded by its call's timeout alone */
	if (event_add(s->ev_idle, &tv) < 0)
		fprintf(stderr, "corral serve: cannot arm a terminal's idle "
			"timeout (--tty-idle-timeout)\n");
}

/* ---- the upgrade ---------------------------------------------------------- */

bool api_has_token(const char *value, const char *token)
{
	size_t n = strlen(token);

	for (const char *p = value; p && *p; p++) {
		p += strspn(p, " \t,");
		if (!strncasecmp(p, token, n) && strchr(" \t,", p[n]))
			return true;
		p = strchr(p, ',');
		if (!p)
			break;
	}
	return false;
}

/*
 * "Connection: Upgrade" and "Upgrade: PROTOCOL" (tokens, any case), in an
 * HTTP/1.1 request.  An HTTP/1.0 one's Upgrade is ignored (RFC 9110 7.8:
 * a server MUST): it was honoured, a 101 sent to a client of a version
 * without one, a cache or proxy before us not knowing the connection
 * had become another protocol's.  evhttp (2.1) gives the version through
 * no function; its struct, in the installed compatibility header
 * <event2/http_struct.h>, holds it as the request line said it.
 */
bool api_upgrade_asked(struct evhttp_request *req, const char *protocol)
{
	struct evkeyvalq *h = evhttp_request_get_input_headers(req);
	const char *up = evhttp_find_header(h, "Upgrade");
	const char *conn = evhttp_find_header(h, "Connection");

	if (req->major != 1 || req->minor < 1)
		return false;
	return up && conn && api_has_token(up, protocol) && api_has_token(conn, "upgrade");
}

bool tty_upgrade_asked(struct evhttp_request *req)
{
	return api_upgrade_asked(req, "corral-tty");
}

void tty_session_start(struct sandbox *sb, struct evhttp_request *req,
		       struct call_args *a)
{
	static const char switching[] =
		"HTTP/1.1 101 Switching Protocols\r\n"
		"Connection: Upgrade\r\nUpgrade: corral-tty\r\n\r\n";
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
	struct timeval write_tv = { sb->d->limits.tty_idle_timeout_s, 0 };
	struct corral_err err = { 0 };
	struct tty_session *s;

	if (!bev) {
		reply_error(req, 500, "internal", "the connection has no bufferevent");
		return;
	}
	s = calloc(1, sizeof(*s));
	if (!s || !(s->input = evbuffer_new()) ||
	    !(s->ev_kill = evtimer_new(sb->d->base, on_kill, s)) ||
	    !(s->ev_idle = evtimer_new(sb->d->base, on_idle, s)) ||
	    !(s->ev_close = event_new(sb->d->base, -1, 0, on_close, s))) {
		if (s)
			session_maybe_free(s);
		reply_error(req, 500, "internal", "out of memory for a terminal session");
		return;
	}
	s->d = sb->d;
	s->evcon = evcon;
	s->bev = bev;
	a->co.tty = true;
	a->co.on_output = tty_output;
	a->co.on_done = tty_done;
	a->co.on_tty_room = tty_room;
	a->co.arg = s;
	if (corral_box_exec(sb->box, &a->co, &s->call, &err) < 0) {
		s->evcon = NULL;
		session_maybe_free(s);
		reply_err(req, &err);
		return;
	}
	sandbox_count_exec(sb);
	idle_arm(s);
	/*
	 * From here the connection is ours: no HTTP, no gate.  One timeout,
	 * --tty-idle-timeout for a write: a client that takes none of what
	 * is queued for it that long is closed (on_client_event), the call
	 * with it.  A session that ended, or was timed out, waits for its
	 * client to take its output; without the timeout a client that
	 * kept the connection open and read nothing held the connection,
	 * the call and their fds as long as it liked.
	 */
	api_gate_upgrade(sb->d, evcon);
	api_set_closecb(sb->d, req, session_conn_closed, s);
	bufferevent_setcb(bev, on_client_read, on_client_write, on_client_event, s);
	bufferevent_set_timeouts(bev, NULL, &write_tv);
	/* at most two frames' worth read ahead: a frame is taken whole */
	bufferevent_setwatermark(bev, EV_READ, 0, 2 * (TTY_FRAME_HEAD + TTY_FRAME_MAX));
	bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
	evbuffer_add(bufferevent_get_output(bev), switching, sizeof(switching) - 1);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
	/* what came right after the request (a client should wait for the 101) */
	if (evbuffer_get_length(bufferevent_get_input(bev)))
		on_client_read(bev, s);
}
