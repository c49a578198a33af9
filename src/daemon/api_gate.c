/*
 * api_gate.c - what a connection meets before the API: the caps on
 * connections (per listener, per peer address), the idle and header
 * timeouts, and a look at every request head before evhttp reads a byte of
 * its body: the token (over TCP) and the framing (one Content-Length, not
 * with Transfer-Encoding; a Transfer-Encoding of "chunked" alone; no header
 * folded onto a second line).
 *
 * evhttp (libevent 2.1) gives no hook between a head and its body on the
 * server side, and none at accept.  So the gate makes each connection's
 * bufferevent itself (evhttp_set_bevcb) and watches its input buffer: a
 * callback on the buffer runs when the socket's bytes are added, before
 * evhttp's read callback sees them.  While a head is incomplete, the read
 * low-water mark holds evhttp back; a head the gate refuses is cut out of
 * the buffer with everything after it, and replaced by a request of no
 * body that asks to close, which api_handle() answers with the gate's
 * verdict (401, 400, 413, 431).  Body bytes of a refused request are
 * dropped as they arrive: memory never grows with what a client without a
 * token sends.
 *
 * The framing is found with http-parser, which refuses two Content-Length
 * headers and a Content-Length with Transfer-Encoding (RFC 9112 6.3),
 * paused at the end of every head and every message.
 */
#include "api.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>

#include <arpa/inet.h>
#include <errno.h>
#include <http_parser.h>
#include <nettle/sha2.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#define GATE_HEAD_MAX	(64 * 1024)	/* request line and headers, as evhttp */
#define GATE_AUTH_MAX	512
/*
 * What a connection's input may hold that evhttp has not taken: past it the
 * socket is not read.  While an answer streams (events, an exec, a
 * process's output) evhttp reads nothing, and pipelined requests behind it
 * grew the daemon by all a client sent (300 MiB for 300 MiB).  evhttp takes
 * a body only once all of it is in (one chunk of a chunked one), so the
 * largest body the API takes, and its head, must fit: a connection holds
 * what one request may make it hold, no more.
 */
#define GATE_INPUT_MAX	(API_FILE_MAX + 2 * GATE_HEAD_MAX)
#define GATE_RETRY_S	1		/* after EMFILE: try to accept again */
/* wrong tokens from one TCP address, this close together, lock it out */
#define GATE_GUESSES		10
#define GATE_GUESS_WINDOW_MS	60000
#define GATE_LOCKOUT_MS		60000
#define GATE_GUESSERS		256	/* addresses remembered, the oldest forgotten */
#define GUESSER_KEY_MAX		(INET6_ADDRSTRLEN + 3)	/* an address, or a /64 */
#define GATE_HELLOERS		256	/* TLS peers whose handshake rate is kept */

/* What the gate put in place of a refused head: api_handle answers it. */
static const char refused_request[] =
	"GET / HTTP/1.1\r\nHost: corral\r\nConnection: close\r\n"
	"Content-Length: 0\r\n\r\n";

enum phase {
	PH_IDLE,		/* between requests: nothing of the next yet */
	PH_HEAD,		/* a head is arriving; evhttp is held back */
	PH_BODY,		/* an admitted request's body is passing */
	PH_REFUSED,		/* everything from here on is dropped */
};

enum { CB_NONE, CB_FIELD, CB_VALUE };

struct gate_conn {
	struct gate_conn *next, *prev;
	struct gate *g;
	struct bufferevent *bev;
	struct evhttp_connection *evcon;	/* once admitted */
	struct event *ev_timer;		/* the idle or header timeout */
	struct event *ev_admit;		/* admit(), once */
	struct evbuffer_cb_entry *watch;
	http_parser hp;
	enum phase phase;
	bool admitted, in_cb, headers_done, message_done;
	bool busy;			/* a request is in the API's hands */
	uint64_t heads_ok;		/* heads the gate let through */
	uint64_t served;		/* requests that reached the API */
	uint64_t total;			/* bytes the socket gave, ever */
	uint64_t fed;			/* of those, the parser has taken */
	uint64_t head_at;		/* where the current head began */
	size_t head_len;
	/* the current head's Authorization, and which header the parser is in */
	char auth[GATE_AUTH_MAX + 1];
	size_t auth_len, name_len;
	char name[24];		/* Authorization, Transfer-Encoding */
	char name_end;			/* the last byte of the name so far */
	bool name_ws;			/* a name ended in a blank: refused */
	int last_cb;
	bool in_auth, auth_seen, auth_bad;
	/* a Transfer-Encoding value as it arrives: te_bad once one is not "chunked" */
	char te[16];
	size_t te_len;
	bool in_te, te_bad;
	/* of the CRLF that ends a chunk's data, bytes not yet seen */
	unsigned crlf_left;
	/*
	 * The body arriving (held_in()): of a declared length, the bytes yet
	 * to come; of a chunked one, those passed on to evhttp's request.
	 * throttled: a declared body past the room left, not read further
	 * (throttle_read()) until there is room for the rest (throttle_end()).
	 */
	uint64_t promised, chunked_in;
	bool throttled;
	bool head_nl;			/* the head's last byte seen was '\n' */
	const char *feed_end;		/* the end of what feed() parses */
	/* the verdict on a refused head */
	int status;
	const char *error;
	char detail[160];
	char peer[INET6_ADDRSTRLEN];
	char key[GUESSER_KEY_MAX];	/* who it counts as: guesser_key(peer) */
	void (*closecb)(struct evhttp_connection *, void *);
	void *closecb_arg;
};

/* An address that sent wrong tokens: how many since when, locked till when. */
struct guesser {
	char peer[GUESSER_KEY_MAX];	/* guesser_key() */
	unsigned wrong;
	uint64_t first_ms, until_ms;
};

/* A peer's TLS handshakes: a bucket of one second's worth, refilled as time goes. */
struct helloer {
	char peer[GUESSER_KEY_MAX];	/* guesser_key() */
	uint64_t at_ms;			/* when milli was last brought up to date */
	uint64_t milli;			/* handshakes it may begin, in thousandths */
	bool said;			/* refused, and logged, since it was last full */
};

struct gate {
	struct daemon *d;
	struct evhttp *http;
	struct evconnlistener *lev;
	const char *name;		/* for the log: the socket or HOST:PORT */
	bool tcp;
	size_t nconns;
	struct gate_conn *conns;
	struct gate *next_gate;
	struct gate *next_listener;	/* gates_by_listener */
	bool full;			/* the listener waits: at its cap */
	bool said_full;
	bool emfile;			/* ... or out of fds; said once */
	struct event *ev_retry;
	struct guesser guessers[GATE_GUESSERS];	/* TCP */
	struct helloer helloers[GATE_HELLOERS];	/* TLS */
};

/* ---- the connections ----------------------------------------------------- */

static struct gate_conn *conn_of(struct daemon *d, struct evhttp_connection *evcon);
static void throttle_end(struct daemon *d);

static void conn_free(struct gate_conn *c)
{
	struct gate *g = c->g;

	if (c->prev)
		c->prev->next = c->next;
	else
		g->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	g->nconns--;
	if (c->ev_timer)
		event_free(c->ev_timer);
	if (c->ev_admit)
		event_free(c->ev_admit);
	explicit_bzero(c->auth, sizeof(c->auth));
	free(c);
	throttle_end(g->d);
	if (g->nconns <= g->d->limits.max_connections / 2)
		g->said_full = false;
	if (g->lev && g->full && g->nconns < g->d->limits.max_connections) {
		g->full = false;
		evconnlistener_enable(g->lev);
	}
}

/*
 * evhttp frees the connection (and our bufferevent with it).  Over TLS its
 * end is a close_notify first, whatever ended it (an answer that closes,
 * an error, a timeout, a refusal): libevent frees the SSL without one and
 * shuts the socket bare, and a strict client read every such end as "EOF
 * occurred in violation of protocol", which it cannot tell from a
 * truncation (an answer to HTTP/1.0, streamed, is delimited by the close).
 * Written now, on a socket that does not block: a peer whose window is
 * full gets the FIN alone (corral_tls_server_end).  Not where an answer
 * is cut short (its request still the API's, or bytes of it unsent: a
 * write timeout, a stream given up): there the bare FIN is the truth,
 * and a close_notify would pass the cut answer off as whole.
 */
static void on_conn_close(struct evhttp_connection *evcon, void *arg)
{
	struct gate_conn *c = arg;

	if (c->closecb)
		c->closecb(evcon, c->closecb_arg);
	if (c->g->tcp && !c->busy && !evbuffer_get_length(bufferevent_get_output(c->bev)))
		corral_tls_server_end(c->g->d->tls, c->bev);
	if (c->watch)
		evbuffer_remove_cb_entry(bufferevent_get_input(c->bev), c->watch);
	/* gone before admit(): the reference new_conn() took is ours to drop */
	if (!c->admitted)
		bufferevent_decref(c->bev);
	conn_free(c);
}

/* The evhttp connection is known: the gate hears when it ends. */
static void conn_bind(struct gate_conn *c, struct evhttp_connection *evcon)
{
	if (c->evcon)
		return;
	c->evcon = evcon;
	evhttp_connection_set_closecb(evcon, on_conn_close, c);
}

/* Close it as evhttp closes a connection that timed out: no reply. */
static void conn_drop(struct gate_conn *c)
{
	bufferevent_trigger_event(c->bev, BEV_EVENT_TIMEOUT | BEV_EVENT_READING,
				  BEV_TRIG_DEFER_CALLBACKS);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	conn_drop(arg);
}

static void timer_arm(struct gate_conn *c, unsigned seconds)
{
	struct timeval tv = { .tv_sec = seconds };

	if (c->ev_timer)
		event_add(c->ev_timer, &tv);
}

static void timer_stop(struct gate_conn *c)
{
	if (c->ev_timer)
		event_del(c->ev_timer);
}

static void hold(struct gate_conn *c, bool on)
{
	/* evhttp's read callback runs only with this many bytes in */
	bufferevent_setwatermark(c->bev, EV_READ, on ? (size_t)1 << 30 : 0,
				 GATE_INPUT_MAX);
}

/*
 * A throttled connection's socket is not read: not by the high mark,
 * at which libevent 2.1 calls evhttp again on every turn of the loop
 * while reading is on (the input stays above it: a body is taken only
 * whole), a core spent for as long as it waits.  evhttp turns reading
 * on again as it starts each request (and its answer's write): the
 * next bytes, a read's worth, turn it off again (on_input).
 */
static void throttle_read(struct gate_conn *c)
{
	if (c->throttled)
		bufferevent_disable(c->bev, EV_READ);
	else
		bufferevent_enable(c->bev, EV_READ);
}

/* ---- heads --------------------------------------------------------------- */

static int on_message_begin(http_parser *p)
{
	struct gate_conn *c = p->data;

	c->auth_len = 0;
	c->auth_seen = c->auth_bad = c->in_auth = false;
	c->in_te = c->te_bad = false;
	c->name_ws = false;
	c->last_cb = CB_NONE;
	c->headers_done = c->message_done = false;
	return 0;
}

/*
 * A Transfer-Encoding value is whole: evhttp reads a body as chunked only
 * when the (first) value is "chunked" and nothing else, where http-parser
 * takes any list that ends in chunked ("gzip, chunked", or "gzip" and
 * "chunked" as two headers).  For such a head the gate would have judged
 * a chunked body that evhttp took for the next request's head.
 */
static void te_end(struct gate_conn *c)
{
	size_t n = c->te_len;

	while (n && (c->te[n - 1] == ' ' || c->te[n - 1] == '\t'))
		n--;
	if (n != 7 || strncasecmp(c->te, "chunked", 7))
		c->te_bad = true;
	c->in_te = false;
}

static int on_header_field(http_parser *p, const char *at, size_t n)
{
	struct gate_conn *c = p->data;

	if (c->phase != PH_HEAD)
		return 0;	/* a chunked body's trailers */
	if (c->in_te)
		te_end(c);
	if (c->last_cb != CB_FIELD)
		c->name_len = 0;
	if (n)
		c->name_end = at[n - 1];
	if (c->name_len + n < sizeof(c->name)) {
		memcpy(c->name + c->name_len, at, n);
		c->name_len += n;
	} else {
		c->name_len = sizeof(c->name);	/* longer than any we look for */
	}
	c->last_cb = CB_FIELD;
	return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t n)
{
	struct gate_conn *c = p->data;

	if (c->phase != PH_HEAD)
		return 0;
	if (c->last_cb != CB_VALUE) {
		/*
		 * "Content-Length : 5": http-parser, as Debian builds it (not
		 * strict), takes a blank before the colon as no part of a
		 * Content-Length's or Transfer-Encoding's name, where evhttp
		 * keeps it in the name and finds no such header: the gate framed
		 * a body that evhttp read as the next request's head, unjudged
		 * (a body it announced so held the input past every check).
		 * RFC 9112 5.1: a server must refuse it.
		 */
		if (c->name_end == ' ' || c->name_end == '\t')
			c->name_ws = true;
		c->in_auth = c->name_len == 13 &&
			     !strncasecmp(c->name, "Authorization", 13);
		if (c->in_auth && c->auth_seen)
			c->auth_bad = true;	/* two: neither counts */
		if (c->in_auth)
			c->auth_seen = true;
		c->in_te = c->name_len == 17 &&
			   !strncasecmp(c->name, "Transfer-Encoding", 17);
		c->te_len = 0;
	}
	c->last_cb = CB_VALUE;
	if (c->in_te) {
		/* "chunked" and its trailing blanks: more is not chunked anyway */
		if (c->te_len + n < sizeof(c->te)) {
			memcpy(c->te + c->te_len, at, n);
			c->te_len += n;
		} else {
			c->te_bad = true;
		}
		return 0;
	}
	if (!c->in_auth)
		return 0;
	if (c->auth_len + n > GATE_AUTH_MAX) {
		c->auth_bad = true;
		return 0;
	}
	memcpy(c->auth + c->auth_len, at, n);
	c->auth_len += n;
	return 0;
}

static int on_headers_complete(http_parser *p)
{
	struct gate_conn *c = p->data;

	if (c->in_te)
		te_end(c);
	c->headers_done = true;
	http_parser_pause(p, 1);
	return 0;
}

/* The verdict on a refused head, which api_gate_request() answers. */
static bool refuse(struct gate_conn *c, int status, const char *error,
		   const char *detail)
{
	c->status = status;
	c->error = error;
	snprintf(c->detail, sizeof(c->detail), "%s", detail);
	return false;
}

/*
 * A chunk's data ends in CRLF (RFC 9112 7.1).  http-parser, as Debian
 * builds it (not strict), skips any two bytes there, where evhttp reads the
 * rest of the line as the next chunk's size: "2\r\n{}ab1f\r\n" is a
 * chunk of 31 to the gate, of 0xab1f to evhttp, and the two would part on
 * where the body ends, the gate judging as a head what evhttp reads as
 * body, or the reverse.  Checked as far as this feed goes, the rest at the
 * start of the next (feed()).
 */
static int crlf_check(struct gate_conn *c, const char *at, size_t avail)
{
	static const char crlf[] = "\r\n";
	size_t i, from = 2 - c->crlf_left;

	for (i = 0; i < c->crlf_left && i < avail; i++)
		if (at[i] != crlf[from + i]) {
			refuse(c, 400, "bad_request", "chunk data not followed by CRLF");
			return -1;
		}
	c->crlf_left -= (unsigned)i;
	return 0;
}

/* The last bytes of a chunk's data (none of it left): its CRLF next. */
static int on_body(http_parser *p, const char *at, size_t n)
{
	struct gate_conn *c = p->data;

	if (p->flags & F_CHUNKED)
		c->chunked_in += n;
	else
		c->promised -= n < c->promised ? n : c->promised;
	if (!(p->flags & F_CHUNKED) || p->content_length != 0)
		return 0;
	c->crlf_left = 2;
	return crlf_check(c, at + n, (size_t)(c->feed_end - (at + n)));
}

static int on_message_complete(http_parser *p)
{
	struct gate_conn *c = p->data;

	c->message_done = true;
	c->promised = c->chunked_in = 0;	/* evhttp has it whole: the API's */
	http_parser_pause(p, 1);
	return 0;
}

static const http_parser_settings gate_settings = {
	.on_message_begin = on_message_begin,
	.on_header_field = on_header_field,
	.on_header_value = on_header_value,
	.on_headers_complete = on_headers_complete,
	.on_body = on_body,
	.on_message_complete = on_message_complete,
};

static void token_digest(const char *p, size_t n, uint8_t out[SHA256_DIGEST_SIZE])
{
	struct sha256_ctx ctx;

	sha256_init(&ctx);
	sha256_update(&ctx, n, (const uint8_t *)p);
	sha256_digest(&ctx, SHA256_DIGEST_SIZE, out);
}

/*
 * The digests are compared, not the tokens: a comparison that returned
 * early on a length that differs told the token's length by its time.
 * What hashing the sent value takes depends on what the client sent only.
 */
bool api_token_ok(const struct daemon *d, const char *h, size_t len)
{
	uint8_t want[SHA256_DIGEST_SIZE], got[SHA256_DIGEST_SIZE];
	unsigned char diff = 0;

	if (len < 7 || strncmp(h, "Bearer ", 7) != 0)
		return false;
	token_digest(d->token, strlen(d->token), want);
	token_digest(h + 7, len - 7, got);
	for (size_t i = 0; i < SHA256_DIGEST_SIZE; i++)
		diff |= want[i] ^ got[i];
	return diff == 0;
}

/* ---- guessing the token ---------------------------------------------------- */

static void peer_name(struct gate_conn *c);

static struct guesser *guesser_of(struct gate *g, const char *peer, bool make)
{
	struct guesser *oldest = &g->guessers[0];

	for (size_t i = 0; i < GATE_GUESSERS; i++) {
		struct guesser *x = &g->guessers[i];

		if (!strcmp(x->peer, peer))
			return x;
		if (!x->peer[0] || (oldest->peer[0] && x->first_ms < oldest->first_ms))
			oldest = x;
	}
	if (!make)
		return NULL;
	*oldest = (struct guesser){ 0 };
	snprintf(oldest->peer, sizeof(oldest->peer), "%s", peer);
	return oldest;
}

/*
 * Who guesses: an IPv4 address, or an IPv6 address's /64, which one host
 * is commonly given whole (a /128 a guess would cost nothing).
 */
static void guesser_key(const char *peer, char *key, size_t len)
{
	struct in6_addr a;

	snprintf(key, len, "%s", peer);
	if (inet_pton(AF_INET6, peer, &a) != 1 || IN6_IS_ADDR_V4MAPPED(&a))
		return;
	memset(a.s6_addr + 8, 0, 8);
	if (inet_ntop(AF_INET6, &a, key, len))
		snprintf(key + strlen(key), len - strlen(key), "/64");
}

/* ms left of the address's lockout; 0: not locked out */
static uint64_t locked_out(struct gate *g, const char *peer, uint64_t now)
{
	struct guesser *x = guesser_of(g, peer, false);

	return x && x->until_ms > now ? x->until_ms - now : 0;
}

/*
 * A token at least 16 characters long cannot be guessed if it was drawn
 * at random, but an operator may have chosen a word: an address that
 * sends GATE_GUESSES wrong ones within the window is refused for the
 * lockout, right token or not, and the log says so once.
 */
static void wrong_token(struct gate *g, const char *peer, uint64_t now)
{
	struct guesser *x = guesser_of(g, peer, true);

	if (now - x->first_ms > GATE_GUESS_WINDOW_MS) {
		x->first_ms = now;
		x->wrong = 0;
	}
	if (++x->wrong < GATE_GUESSES)
		return;
	x->until_ms = now + GATE_LOCKOUT_MS;
	x->first_ms = x->until_ms;	/* counting starts again after it */
	x->wrong = 0;
	fprintf(stderr, "corral serve: %s: %d wrong tokens within %d s on %s; its requests "
		"are refused for %d s\n", peer, GATE_GUESSES, GATE_GUESS_WINDOW_MS / 1000,
		g->name, GATE_LOCKOUT_MS / 1000);
}

/*
 * What the daemon holds of requests not yet in the API's hands: the
 * connection's input evhttp has not taken (a body of a declared length
 * stays there until all of it is in; requests pipelined behind a stream),
 * a declared body's bytes still to come, a chunked body's passed on.
 */
static uint64_t held_in(const struct gate_conn *c)
{
	return evbuffer_get_length(bufferevent_get_input(c->bev)) +
	       (c->throttled ? 0 : c->promised) + c->chunked_in;
}

/* What the others hold: all connections, the TCP ones, the TCP peer's. */
struct held {
	uint64_t all, tcp, peer;
};

/*
 * Of every connection but self, and of the TCP peer key's (NULL: none),
 * what held_in() counts (in) or what their clients have not read (out).
 */
static void held_sum(const struct daemon *d, const struct gate_conn *self,
		     const char *key, bool in, struct held *h)
{
	*h = (struct held){ 0, 0, 0 };
	for (const struct gate *g = d->gates; g; g = g->next_gate)
		for (const struct gate_conn *c = g->conns; c; c = c->next) {
			uint64_t n = c == self ? 0 : in ? held_in(c) :
				     evbuffer_get_length(bufferevent_get_output(c->bev));

			h->all += n;
			if (g->tcp)
				h->tcp += n;
			if (key && g->tcp && !strcmp(c->key, key))
				h->peer += n;
		}
}

/*
 * Whether len more bytes fit what the daemon holds for its clients
 * (--answer-memory: answers unread, and apart the same again of requests
 * arriving), and what a TCP peer may hold of it: half, so that one peer
 * that asks and never reads, or announces bodies and sends them slowly,
 * leaves the others room.  The TCP peers together hold at most three
 * quarters: two peers' halves, bodies announced and sent a byte now and
 * then, left the unix socket's clients no room, their bodies unread for
 * as long as the peers liked.  A peer that holds nothing yet may have
 * one, as large as the total allows, and so may a body when nothing is
 * held (the API takes 64 MiB, whatever the budget).  False: why, into why.
 */
static bool room_said(const struct daemon *d, bool tcp, const char *key, bool in,
		      const struct held *h, uint64_t len, char *why, size_t whylen);

static bool room_for(const struct daemon *d, const struct gate_conn *self,
		     const char *key, bool in, uint64_t len, char *why, size_t whylen)
{
	struct held h;

	held_sum(d, self, key, in, &h);
	return room_said(d, key != NULL, key, in, &h, len, why, whylen);
}

/* room_for's verdict, of what the others hold (h) */
static bool room_said(const struct daemon *d, bool tcp, const char *key, bool in,
		      const struct held *h, uint64_t len, char *why, size_t whylen)
{
	uint64_t budget = d->limits.answer_memory, share = budget / 2;
	const char *what = in ? "requests still arriving" : "answers not read yet";

	/*
	 * an answer past the budget never fits; a body when nothing is held.
	 * To a TCP peer not how much: the unix socket's clients' is in it.
	 */
	if ((h->all || !in) && h->all + len > budget && tcp)
		snprintf(why, whylen, "the daemon holds too many %s for this one "
			 "(--answer-memory %llu)", what, (unsigned long long)budget);
	else if ((h->all || !in) && h->all + len > budget)
		snprintf(why, whylen, "the daemon holds %llu bytes of %s (--answer-memory %llu)",
			 (unsigned long long)h->all, what, (unsigned long long)budget);
	else if (tcp && h->peer && h->peer + len > share)
		snprintf(why, whylen, "%s holds %llu bytes of %s, half of --answer-memory "
			 "is a TCP peer's", key, (unsigned long long)h->peer, what);
	else if (tcp && h->tcp && h->tcp + len > budget - budget / 4)
		snprintf(why, whylen, "TCP peers hold %llu bytes of %s, a quarter of "
			 "--answer-memory is the unix socket's", (unsigned long long)h->tcp,
			 what);
	else
		return true;
	return false;
}

/*
 * Whether a body of len more bytes fits room_for(); else why, in
 * c->detail.  What the connection itself holds is not counted against
 * it: the input it has not passed on is at most GATE_INPUT_MAX (a
 * request), and counted, a body behind the requests it pipelined, or
 * behind its own head, waited for room that only it could give back.
 */
static bool body_room(struct gate_conn *c, uint64_t len)
{
	char why[128];

	if (room_for(c->g->d, c, c->g->tcp ? c->key : NULL, true, len, why, sizeof(why)))
		return true;
	snprintf(c->detail, sizeof(c->detail), "a body of %llu bytes: %s",
		 (unsigned long long)len, why);
	return false;
}

/* What the TCP connections of one peer key hold (throttle_end). */
struct key_held {
	const char *key;
	uint64_t n;
};

static int key_order(const void *a, const void *b)
{
	return strcmp(((const struct key_held *)a)->key, ((const struct key_held *)b)->key);
}

/*
 * The TCP peers' keys and what each holds of bodies arriving, sorted by
 * key, and what all connections, and the TCP ones, hold, into *all and
 * *tcp: the number of keys, or
 * -1 without memory for them.
 */
static ssize_t keys_held(const struct daemon *d, struct key_held **out, uint64_t *all,
			 uint64_t *tcp)
{
	struct key_held *k;
	size_t n = 0, u = 0;

	*all = *tcp = 0;
	for (const struct gate *g = d->gates; g; g = g->next_gate)
		for (const struct gate_conn *c = g->conns; c; c = c->next)
			n++;
	k = calloc(n ? n : 1, sizeof(*k));
	if (!k)
		return -1;
	n = 0;
	for (const struct gate *g = d->gates; g; g = g->next_gate)
		for (const struct gate_conn *c = g->conns; c; c = c->next) {
			uint64_t h = held_in(c);

			*all += h;
			if (g->tcp) {
				*tcp += h;
				k[n++] = (struct key_held){ c->key, h };
			}
		}
	qsort(k, n, sizeof(*k), key_order);
	for (size_t i = 0; i < n; i++) {
		if (u && !strcmp(k[u - 1].key, k[i].key))
			k[u - 1].n += k[i].n;
		else
			k[u++] = k[i];
	}
	*out = k;
	return (ssize_t)u;
}

/*
 * Room was given back (a body complete, a connection closed, a request
 * answered): each connection whose body waits for room, and that has it
 * now, is read again, in the order they came.  What the others hold is
 * summed once a pass, by peer: each waiting connection summing every
 * connection held the loop connections x connections a pass, and a pass
 * comes with every request answered (8 peers' 247 waiting bodies made
 * each request of any client 1.4-1.5 ms of the loop, 21-28 us without).
 */
static void throttle_end(struct daemon *d)
{
	struct key_held *k = NULL, *kc;
	uint64_t all, tcp, self;
	struct held h;
	bool any = false;
	ssize_t nk;
	char why[128];

	for (struct gate *g = d->gates; g && !any; g = g->next_gate)
		for (struct gate_conn *c = g->conns; c && !any; c = c->next)
			any = c->throttled;
	if (!any)
		return;
	nk = keys_held(d, &k, &all, &tcp);
	for (struct gate *g = d->gates; g; g = g->next_gate)
		for (struct gate_conn *c = g->conns; c; c = c->next) {
			if (!c->throttled)
				continue;
			if (nk < 0) {	/* no memory for the sums: each its own */
				if (body_room(c, c->promised)) {
					c->throttled = false;
					throttle_read(c);
				}
				continue;
			}
			self = held_in(c);
			kc = g->tcp ? bsearch(&(struct key_held){ c->key, 0 }, k, (size_t)nk,
					      sizeof(*k), key_order) : NULL;
			h = (struct held){ all - self, g->tcp ? tcp - self : tcp,
					   kc ? kc->n - self : 0 };
			if (!room_said(d, g->tcp, c->key, true, &h, c->promised,
				       why, sizeof(why)))
				continue;
			c->throttled = false;
			throttle_read(c);
			/* its promise is held now (held_in()) */
			all += c->promised;
			if (g->tcp)
				tcp += c->promised;
			if (kc)
				kc->n += c->promised;
		}
	free(k);
}

/* The whole head is in: may evhttp have it (and its body)? */
static bool head_judge(struct gate_conn *c)
{
	http_parser *p = &c->hp;
	const char *h = c->auth;
	size_t n = c->auth_len;
	bool ok;

	/* value whitespace is not part of it (RFC 9110 5.5) */
	while (n && (h[n - 1] == ' ' || h[n - 1] == '\t'))
		n--;
	ok = !c->g->tcp || (!c->auth_bad && api_token_ok(c->g->d, h, n));

	/* judged: no copy of it stays for a fork of the daemon to find */
	explicit_bzero(c->auth, sizeof(c->auth));
	if (c->g->tcp) {
		uint64_t now = corral_now_ms(), left;
		const char *key = c->key;

		if (!c->peer[0])
			peer_name(c);
		left = locked_out(c->g, key, now);
		if (left) {
			snprintf(c->detail, sizeof(c->detail), "too many wrong tokens from %s: "
				 "refused for %llu s more", key,
				 (unsigned long long)(left + 999) / 1000);
			c->status = 429;
			c->error = "too_many_requests";
			return false;
		}
		if (!ok)
			wrong_token(c->g, key, now);
	}
	if (!ok)
		return refuse(c, 401, "unauthorized", "missing or wrong bearer token");
	if (c->te_bad)
		return refuse(c, 400, "bad_request", "Transfer-Encoding other than chunked");
	if (c->name_ws)
		return refuse(c, 400, "bad_request", "a blank between a header's name "
			      "and its colon");
	/*
	 * http-parser takes what follows a CONNECT head for another protocol,
	 * evhttp for its body: the gate would judge that body as heads.  No
	 * route of the API takes it.
	 */
	if (p->method == HTTP_CONNECT)
		return refuse(c, 400, "bad_request", "CONNECT is no method of the API");
	/* evhttp reads no body after these, whatever the head says */
	if ((p->method == HTTP_HEAD || p->method == HTTP_TRACE) &&
	    ((p->flags & F_CHUNKED) || ((p->flags & F_CONTENTLENGTH) &&
					p->content_length > 0)))
		return refuse(c, 400, "bad_request", "HEAD and TRACE take no body");
	if ((p->flags & F_CONTENTLENGTH) && p->content_length > API_FILE_MAX)
		return refuse(c, 413, "too_large", "the body is larger than the "
			      "API takes (64 MiB)");
	/*
	 * A declared body past the room left is not refused (a client that
	 * sends it whole would find the connection closed under it, not the
	 * answer): its socket is not read until there is room for it
	 * (throttle_read(), throttle_end()).
	 */
	c->throttled = (p->flags & F_CONTENTLENGTH) && !body_room(c, p->content_length);
	c->promised = (p->flags & F_CONTENTLENGTH) ? p->content_length : 0;
	c->chunked_in = 0;
	return true;
}

static bool parser_fault(struct gate_conn *c)
{
	enum http_errno e = HTTP_PARSER_ERRNO(&c->hp);

	if (e == HPE_CB_body)
		return false;	/* crlf_check() said why */
	if (e == HPE_UNEXPECTED_CONTENT_LENGTH)
		return refuse(c, 400, "bad_request", "Content-Length twice, or "
			      "with Transfer-Encoding");
	if (e == HPE_INVALID_TRANSFER_ENCODING)
		return refuse(c, 400, "bad_request", "Transfer-Encoding other "
			      "than chunked");
	if (e == HPE_HEADER_OVERFLOW)
		return refuse(c, 431, "too_large", "request head too large");
	return refuse(c, 400, "bad_request", http_errno_description(e));
}

/* Bytes [from, end of buf) go; those before stay. */
static void cut_tail(struct evbuffer *buf, size_t from)
{
	struct evbuffer *keep;

	if (from == 0) {
		evbuffer_drain(buf, evbuffer_get_length(buf));
		return;
	}
	keep = evbuffer_new();
	if (keep && evbuffer_remove_buffer(buf, keep, from) == (int)from) {
		evbuffer_drain(buf, evbuffer_get_length(buf));
		evbuffer_add_buffer(buf, keep);
	}
	if (keep)
		evbuffer_free(keep);
}

/*
 * The head that began at c->head_at is refused: it and all after it go,
 * the refusal takes its place.  When evhttp already read part of it (a
 * head that began while an earlier answer was being written), there is
 * nothing to replace: the connection is closed instead.
 */
static void head_refuse(struct gate_conn *c, struct evbuffer *buf)
{
	uint64_t len = evbuffer_get_length(buf);
	uint64_t first = c->total - len;	/* stream offset of buf[0] */
	bool admitted = c->phase == PH_BODY;	/* its body is at fault */

	c->phase = PH_REFUSED;
	c->promised = c->chunked_in = 0;	/* its body is dropped as it comes */
	if (c->throttled) {	/* its body is dropped: read it */
		c->throttled = false;
		throttle_read(c);
	}
	hold(c, false);
	timer_arm(c, c->g->d->limits.header_timeout_s);
	if (c->head_at < first) {
		cut_tail(buf, 0);
		conn_drop(c);
		return;
	}
	cut_tail(buf, c->head_at - first);
	/*
	 * A head let through whose body then failed (a bad chunk) never
	 * reaches the API: the refusal in its place is the one
	 * api_gate_request() answers with the verdict, not a "GET /".
	 */
	if (admitted)
		c->heads_ok--;
	evbuffer_add(buf, refused_request, sizeof(refused_request) - 1);
}

/*
 * A header line that begins with a blank continues the one before (obs-fold,
 * RFC 9112 5.2: a server must refuse or unfold it).  http-parser and evhttp
 * each join the lines their own way, and a folded Transfer-Encoding was
 * read by the two differently: no client of the API folds, so none may.
 */
static bool folded(struct gate_conn *c, const char *data, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (c->head_nl && (data[i] == ' ' || data[i] == '\t'))
			return true;
		c->head_nl = data[i] == '\n';
	}
	return false;
}

/*
 * Take up to n bytes at data (stream offset c->fed): returns how many were
 * parsed, 0 with c->phase PH_REFUSED when the head is refused.
 */
static size_t feed(struct gate_conn *c, struct evbuffer *buf, const char *data,
		   size_t n)
{
	size_t k;
	enum http_errno e;

	if (c->phase == PH_IDLE) {
		c->phase = PH_HEAD;
		c->head_at = c->fed;
		c->head_len = 0;
		c->head_nl = false;
		/*
		 * evhttp waits for the head, unless bytes of the request before
		 * it are still to be read: those must not wait on this one (a
		 * refusal then closes the connection, head_refuse()).
		 */
		hold(c, c->head_at == c->total - evbuffer_get_length(buf));
		timer_arm(c, c->g->d->limits.header_timeout_s);
	}
	if (c->phase == PH_HEAD && n > GATE_HEAD_MAX - c->head_len)
		n = GATE_HEAD_MAX - c->head_len + 1;
	if (c->crlf_left && crlf_check(c, data, n) < 0) {
		head_refuse(c, buf);
		return 0;
	}
	c->feed_end = data + n;
	k = http_parser_execute(&c->hp, &gate_settings, data, n);
	e = HTTP_PARSER_ERRNO(&c->hp);
	if (e != HPE_OK && e != HPE_PAUSED) {
		parser_fault(c);
		head_refuse(c, buf);
		return 0;
	}
	if (c->phase == PH_HEAD && folded(c, data, k)) {
		refuse(c, 400, "bad_request", "a header folded onto a second line "
		       "(obs-fold): send each header on one line");
		head_refuse(c, buf);
		return 0;
	}
	if (c->phase == PH_HEAD && !c->headers_done) {
		c->head_len += k;
		if (c->head_len > GATE_HEAD_MAX) {
			refuse(c, 431, "too_large", "request head larger than 64 KiB");
			head_refuse(c, buf);
			return 0;
		}
		return k;
	}
	if (c->phase == PH_HEAD) {
		/*
		 * Paused on the head's last byte, still unparsed: judge, then
		 * let the parser take it (it ends a request without body).
		 */
		if (!head_judge(c)) {
			head_refuse(c, buf);
			return 0;
		}
		c->phase = PH_BODY;
		c->heads_ok++;
		c->headers_done = false;
		timer_stop(c);
		hold(c, false);
		http_parser_pause(&c->hp, 0);
		return k;
	}
	/* PH_BODY: paused at the end of a message, or everything taken */
	if (e == HPE_PAUSED && c->message_done) {
		http_parser_pause(&c->hp, 0);
		c->message_done = false;
		c->phase = PH_IDLE;
		if (c->throttled) {	/* a body within what was read */
			c->throttled = false;
			throttle_read(c);
		}
		throttle_end(c->g->d);	/* its promise is the API's now */
	}
	return k;
}

/*
 * Room ahead in the input, a growing share of what it holds.  evhttp takes
 * a body only once all of it is in, and nothing behind a stream, so the
 * input can hold 64 MiB; libevent 2.1 reads 4 KiB at a time, a chain each,
 * and finding the new bytes (evbuffer_ptr_set) walks every chain from the
 * start: a 60 MiB upload cost the loop 4.2 s of CPU, every other client
 * waiting.  With room made ahead the reads fill a few large chains: a
 * quarter of what is held, at most 1 MiB, allocated only as bytes come.
 */
#define GATE_ROOM_FROM	(64 * 1024)
#define GATE_ROOM_MAX	(1024 * 1024)

static void room_ahead(struct evbuffer *buf, size_t len)
{
	size_t want = len / 4;

	if (len < GATE_ROOM_FROM)
		return;
	/* a no-op while the last chain has that much free */
	(void)evbuffer_expand(buf, want < GATE_ROOM_MAX ? want : GATE_ROOM_MAX);
}

/* Bytes the socket added to the input: judged before evhttp reads them. */
static void on_input(struct evbuffer *buf, const struct evbuffer_cb_info *info,
		     void *arg)
{
	struct gate_conn *c = arg;
	size_t len = evbuffer_get_length(buf), n = info->n_added;
	int idle_turns = 0;

	/* our own changes to the buffer call back here too */
	if (c->in_cb || n == 0 || n > len)
		return;
	c->in_cb = true;
	c->total += n;
	if (c->phase == PH_REFUSED) {
		cut_tail(buf, len - n);
		c->fed = c->total;
	}
	while (c->fed < c->total && c->phase != PH_REFUSED) {
		size_t off = len - (c->total - c->fed), k;
		struct evbuffer_ptr at;
		struct evbuffer_iovec v;

		if (evbuffer_ptr_set(buf, &at, off, EVBUFFER_PTR_SET) < 0 ||
		    evbuffer_peek(buf, len - off, &at, &v, 1) < 1)
			break;
		if (v.iov_len > len - off)
			v.iov_len = len - off;
		k = feed(c, buf, v.iov_base, v.iov_len);
		c->fed += k;
		/* a pause may take nothing on its way out, never twice */
		if (k == 0 && ++idle_turns > 2)
			break;
		if (k)
			idle_turns = 0;
	}
	/* a chunked body, whose length no head said, as it grows */
	if (c->phase == PH_BODY && c->chunked_in && !body_room(c, 0)) {
		c->status = 503;
		c->error = "busy";
		head_refuse(c, buf);
	}
	if (c->throttled)
		throttle_read(c);
	if (c->phase != PH_REFUSED)
		room_ahead(buf, evbuffer_get_length(buf));
	c->in_cb = false;
}

/* ---- accepting ----------------------------------------------------------- */

/* Admitted connections from key: one address, or one IPv6 /64 (guesser_key()). */
static size_t peer_count(struct gate *g, const char *key)
{
	size_t n = 0;

	for (struct gate_conn *c = g->conns; c; c = c->next)
		n += c->admitted && !strcmp(c->key, key);
	return n;
}

/* The peer of socket fd, as text ("?" if it cannot be told) */
static void peer_of_fd(int fd, char *peer, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	snprintf(peer, len, "?");
	if (fd >= 0 && getpeername(fd, (struct sockaddr *)&ss, &sl) == 0) {
		if (ss.ss_family == AF_INET)
			inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, peer, len);
		else if (ss.ss_family == AF_INET6)
			inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, peer, len);
	}
}

static void peer_name(struct gate_conn *c)
{
	peer_of_fd(bufferevent_getfd(c->bev), c->peer, sizeof(c->peer));
	/*
	 * An IPv6 host is commonly given a /64 whole: capped by address, it
	 * would open as many connections as it liked, one an address.
	 */
	guesser_key(c->peer, c->key, sizeof(c->key));
}

/* ---- the rate of TLS handshakes ---------------------------------------------- */

static struct helloer *helloer_of(struct gate *g, const char *key, uint64_t now,
				  uint64_t full)
{
	struct helloer *oldest = &g->helloers[0];

	for (size_t i = 0; i < GATE_HELLOERS; i++) {
		struct helloer *h = &g->helloers[i];

		if (!strcmp(h->peer, key))
			return h;
		if (!h->peer[0] || (oldest->peer[0] && h->at_ms < oldest->at_ms))
			oldest = h;
	}
	*oldest = (struct helloer){ .at_ms = now, .milli = full };
	snprintf(oldest->peer, sizeof(oldest->peer), "%s", key);
	return oldest;
}

/*
 * A TLS handshake costs the server a key exchange and a signature before
 * any token is seen, and the caps bound how many connections a peer holds,
 * not how fast it makes new ones.  So a peer (an address, an IPv6 /64) may
 * begin --tls-handshake-rate a second, a second's worth at once; asked at
 * its ClientHello (corral_tls_server_check_hello), before that work.  The
 * refusal is logged once until the peer's bucket has filled again.
 */
static bool hello_check(int fd, void *arg)
{
	struct gate *g = arg;
	uint64_t rate = g->d->limits.tls_handshake_rate, full = rate * 1000;
	uint64_t now = corral_now_ms();
	char peer[INET6_ADDRSTRLEN], key[GUESSER_KEY_MAX];
	struct helloer *h;

	peer_of_fd(fd, peer, sizeof(peer));
	guesser_key(peer, key, sizeof(key));
	h = helloer_of(g, key, now, full);
	h->milli += (now - h->at_ms) * rate;
	h->at_ms = now;
	if (h->milli >= full) {
		h->milli = full;
		h->said = false;
	}
	if (h->milli >= 1000) {
		h->milli -= 1000;
		return true;
	}
	if (!h->said)
		fprintf(stderr, "corral serve: %s: TLS handshakes faster than %llu a second on "
			"%s (--tls-handshake-rate); the next are refused at their first "
			"message until it slows down\n", key, (unsigned long long)rate, g->name);
	h->said = true;
	return false;
}

/*
 * Right after evhttp took the connection: its evhttp_connection is the
 * bufferevent's callback argument.  A peer over its cap is closed now.
 */
static void admit(evutil_socket_t fd, short what, void *arg)
{
	struct gate_conn *c = arg;
	bufferevent_event_cb eventcb = NULL;
	void *cbarg = NULL;
	char conn[192];

	(void)fd;
	(void)what;
	bufferevent_getcb(c->bev, NULL, NULL, &eventcb, &cbarg);
	if (!eventcb || !cbarg) {
		/* evhttp gave it up while setting it up: ours is the last ref */
		bufferevent_decref(c->bev);
		conn_free(c);
		return;
	}
	conn_bind(c, cbarg);
	c->admitted = true;
	bufferevent_decref(c->bev);
	if (c->g->tcp) {
		peer_name(c);
		/*
		 * Over TLS evhttp's head and body leave as two records, two
		 * writes: under Nagle the second waited for the client's
		 * delayed ACK, 40 ms of every new connection's first answer.
		 */
		if (setsockopt(bufferevent_getfd(c->bev), IPPROTO_TCP, TCP_NODELAY,
			       &(int){ 1 }, sizeof(int)) < 0)
			fprintf(stderr, "corral serve: TCP_NODELAY on %s's connection from %s: %s\n",
				c->g->name, c->peer, strerror(errno));
		/*
		 * A request answered at length (an events follow, a wait) has
		 * no read timeout (read_timeout()), and may send nothing for
		 * long: a peer that vanished meanwhile is found by keepalive,
		 * as a lease's is.  Probes only while nothing of ours is
		 * unacknowledged: a client slow to read is the write timeout's.
		 */
		snprintf(conn, sizeof(conn), "%s's connection from %s", c->g->name, c->peer);
		api_tcp_keepalive(bufferevent_getfd(c->bev), c->g->d->limits.lease_timeout_s,
				  false, conn);
		if (peer_count(c->g, c->key) > c->g->d->limits.max_per_peer) {
			conn_drop(c);
			return;
		}
	}
	/* a request already in hand runs as long as it takes */
	if (c->phase == PH_IDLE && !c->busy)
		timer_arm(c, c->g->d->limits.idle_timeout_s);
}

/*
 * A client that asks for a file and never reads it leaves it in the
 * daemon's memory until the write timeout: 64 MiB a connection, and a
 * token holder may open 256 (16 GiB).  Each connection's follows and
 * streams are bounded on their own (daemon.h); the answers read whole
 * share one budget, against what all connections hold now.
 */
bool api_answer_room(struct daemon *d, struct evhttp_request *req, uint64_t len,
		     const char *what)
{
	struct gate_conn *c = conn_of(d, evhttp_request_get_connection(req));
	char why[160];

	if (c && c->g->tcp && !c->peer[0])
		peer_name(c);
	if (room_for(d, NULL, c && c->g->tcp ? c->key : NULL, false, len, why, sizeof(why)))
		return true;
	evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "1");
	reply_error(req, 503, "busy", "%s: %llu bytes, and %s: try again when they "
		    "have been read", what, (unsigned long long)len, why);
	return false;
}

#define KEEPALIVE_PROBES	3	/* unanswered, after the idle half */

void api_tcp_keepalive(int fd, unsigned timeout_s, bool unacked, const char *what)
{
	unsigned t = timeout_s ? timeout_s : 1;
	int on = 1, idle = t / 2 ? t / 2 : 1, cnt = KEEPALIVE_PROBES;
	int intvl = (t - t / 2) / cnt ? (t - t / 2) / cnt : 1;
	unsigned user_ms = t * 1000;

	if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on)) < 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)) < 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl)) < 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt)) < 0 ||
	    (unacked && setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_ms,
				   sizeof(user_ms)) < 0))
		fprintf(stderr, "corral serve: TCP keepalive on %s: %s (a peer that "
			"vanishes without a word keeps it open)\n", what, strerror(errno));
}

static struct bufferevent *new_conn(struct event_base *base, void *arg)
{
	struct gate *g = arg;
	struct gate_conn *c = calloc(1, sizeof(*c));
	struct bufferevent *bev;

	if (g->emfile) {
		fprintf(stderr, "corral serve: accepting on %s again\n", g->name);
		g->emfile = false;
	}
	/* over TLS, the input the gate watches is what the client sent, decrypted */
	if (g->tcp && g->d->tls)
		bev = corral_tls_server_bev(g->d->tls, base);
	else
		bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (!c || !bev) {
		/* evhttp makes its own; this connection is not gated: drop it */
		free(c);
		if (bev)
			bufferevent_free(bev);
		return NULL;
	}
	c->g = g;
	c->bev = bev;
	c->ev_timer = evtimer_new(base, on_timer, c);
	c->ev_admit = evtimer_new(base, admit, c);
	http_parser_init(&c->hp, HTTP_REQUEST);
	c->hp.data = c;
	c->watch = evbuffer_add_cb(bufferevent_get_input(bev), on_input, c);
	bufferevent_setwatermark(bev, EV_READ, 0, GATE_INPUT_MAX);
	/* until admit() runs, the bufferevent is ours too */
	bufferevent_incref(bev);
	c->next = g->conns;
	if (g->conns)
		g->conns->prev = c;
	g->conns = c;
	if (++g->nconns >= g->d->limits.max_connections) {
		/* said once until the listener has been at half its cap again */
		if (!g->said_full)
			fprintf(stderr, "corral serve: %zu connections on %s, its cap "
				"(--max-connections): new ones wait in the kernel's "
				"queue until one closes\n", g->nconns, g->name);
		g->said_full = true;
		g->full = true;
		evconnlistener_disable(g->lev);
	}
	/* admit() on the next turn of the loop, when evhttp has set it up */
	if (!c->ev_timer || !c->ev_admit || !c->watch ||
	    event_add(c->ev_admit, &(struct timeval){ 0 }) < 0)
		conn_drop(c);
	return bev;
}

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
	struct gate *g = arg;

	(void)fd;
	(void)what;
	if (g->lev && !g->full)
		evconnlistener_enable(g->lev);
}

/*
 * accept() failed with something other than "try again": EMFILE, ENFILE,
 * ENOBUFS.  libevent's default logs and returns, and the listening socket
 * is readable again at once: a loop at full CPU writing one line a turn.
 * Say it once, stop accepting, try again in a second.
 */
/*
 * libevent calls a listener's error callback with the listener's own
 * argument, which evhttp owns (its struct evhttp): the gates are found by
 * listener here.  One daemon a process, so one list.
 */
static struct gate *gates_by_listener;

static struct gate *gate_of(struct evconnlistener *lev)
{
	for (struct gate *g = gates_by_listener; g; g = g->next_listener)
		if (g->lev == lev)
			return g;
	return NULL;
}

static void on_accept_error(struct evconnlistener *lev, void *arg)
{
	struct gate *g = gate_of(lev);
	struct timeval tv = { .tv_sec = GATE_RETRY_S };
	int e = errno;

	(void)arg;
	if (!g) {
		evconnlistener_disable(lev);
		return;
	}

	if (!g->emfile)
		fprintf(stderr, "corral serve: cannot accept on %s: %s; trying "
			"again every %d s until it works\n", g->name, strerror(e),
			GATE_RETRY_S);
	g->emfile = true;
	evconnlistener_disable(lev);
	event_add(g->ev_retry, &tv);
}

int api_gate_listen(struct daemon *d, struct evhttp *http,
		    struct evhttp_bound_socket *bound, const char *name,
		    bool tcp, struct corral_err *err)
{
	struct gate *g = calloc(1, sizeof(*g));

	if (!g || !(g->ev_retry = evtimer_new(d->base, on_retry, g))) {
		free(g);
		return corral_set_err(err, -ENOMEM, "out of memory for the listener %s",
				      name);
	}
	g->d = d;
	g->http = http;
	g->tcp = tcp;
	g->name = name;
	g->lev = evhttp_bound_socket_get_listener(bound);
	g->next_gate = d->gates;
	d->gates = g;
	g->next_listener = gates_by_listener;
	gates_by_listener = g;
	evconnlistener_set_error_cb(g->lev, on_accept_error);
	evhttp_set_bevcb(http, new_conn, g);
	if (tcp && d->tls)
		corral_tls_server_check_hello(d->tls, hello_check, g);
	return 0;
}

/* Before the evhttps are freed: their listeners go first. */
void api_gate_stop(struct daemon *d)
{
	for (struct gate *g = d->gates; g; g = g->next_gate)
		g->lev = NULL;
}

/* After the evhttps are freed (their connections with them). */
void api_gate_free(struct daemon *d)
{
	api_gate_stop(d);
	while (d->gates) {
		struct gate *g = d->gates, **pp = &gates_by_listener;

		d->gates = g->next_gate;
		while (*pp && *pp != g)
			pp = &(*pp)->next_listener;
		if (*pp)
			*pp = g->next_listener;
		while (g->conns) {
			/* evhttp let go of it before admit(): ours is the last ref */
			if (!g->conns->admitted)
				bufferevent_decref(g->conns->bev);
			conn_free(g->conns);
		}
		event_free(g->ev_retry);
		free(g);
	}
}

/* ---- for the handlers ---------------------------------------------------- */

/* By its bufferevent: known from the start, before admit() ran. */
static struct gate_conn *conn_of(struct daemon *d, struct evhttp_connection *evcon)
{
	struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;

	for (struct gate *g = d->gates; g && bev; g = g->next_gate)
		for (struct gate_conn *c = g->conns; c; c = c->next)
			if (c->bev == bev)
				return c;
	return NULL;
}

bool api_peer_key(struct daemon *d, struct evhttp_request *req, char *key, size_t len)
{
	struct gate_conn *c = conn_of(d, evhttp_request_get_connection(req));

	if (!c || !c->g->tcp)
		return false;
	if (!c->peer[0])
		peer_name(c);
	snprintf(key, len, "%s", c->key);
	return true;
}

/*
 * evhttp's read timeout (serve.c) bounds a body that stalls.  Once a
 * request is in the API's hands its body is in, but one without a body (a
 * GET) leaves the connection read, the timeout running while it is
 * answered: a client that waits in silence, as it should (an events
 * follow, a process's output follow or wait), was cut off that long after
 * it asked, whatever was sent to it.  Off while the API holds a request,
 * on again for the next one's body.
 */
static void read_timeout(struct gate_conn *c, bool on)
{
	struct timeval tv = { .tv_sec = c->g->d->http_timeout_s };

	if (tv.tv_sec)
		bufferevent_set_timeouts(c->bev, on ? &tv : NULL, &tv);
}

static void on_request_done(struct evhttp_request *req, void *arg)
{
	struct gate_conn *c = arg;

	(void)req;
	c->busy = false;
	read_timeout(c, true);
	throttle_end(c->g->d);
	if (c->phase == PH_IDLE)
		timer_arm(c, c->g->d->limits.idle_timeout_s);
}

bool api_gate_request(struct daemon *d, struct evhttp_request *req)
{
	struct gate_conn *c = conn_of(d, evhttp_request_get_connection(req));

	if (!c)
		return true;
	conn_bind(c, evhttp_request_get_connection(req));
	/* the requests before the refused head are answered as usual */
	if (c->phase == PH_REFUSED && c->served == c->heads_ok) {
		if (c->status == 503)
			evhttp_add_header(evhttp_request_get_output_headers(req),
					  "Retry-After", "1");
		reply_error(req, c->status, c->error, "%s", c->detail);
		return false;
	}
	c->served++;
	c->busy = true;
	timer_stop(c);
	read_timeout(c, false);
	evhttp_request_set_on_complete_cb(req, on_request_done, c);
	return true;
}

/*
 * After a 101 the bytes are another protocol's (api_tty.c), and after a
 * lease's first line none is a request (api_leases.c): the parser would
 * take them for heads.  The connection stays counted against the caps; it
 * is closed by its owner, not timed out.
 */
void api_gate_upgrade(struct daemon *d, struct evhttp_connection *evcon)
{
	struct gate_conn *c = conn_of(d, evcon);
	struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;

	/*
	 * Nor by evhttp's read timeout (serve.c), which a lease's request, of
	 * no body, left running: its client sends nothing after it, so every
	 * lease ended that long after it opened, and its sandboxes with it.
	 */
	if (bev)
		bufferevent_set_timeouts(bev, NULL, NULL);
	if (!c)
		return;
	conn_bind(c, evcon);
	if (c->watch)
		evbuffer_remove_cb_entry(bufferevent_get_input(c->bev), c->watch);
	c->watch = NULL;
	timer_stop(c);
	hold(c, false);
}

/* Who is told when the connection ends: the gate chains it to its own. */
void api_set_closecb(struct daemon *d, struct evhttp_request *req,
		     void (*cb)(struct evhttp_connection *, void *), void *arg)
{
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	struct gate_conn *c = conn_of(d, evcon);

	if (!evcon)
		return;
	if (!c) {
		evhttp_connection_set_closecb(evcon, cb, arg);
		return;
	}
	conn_bind(c, evcon);
	c->closecb = cb;
	c->closecb_arg = arg;
}
