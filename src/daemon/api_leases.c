/*
 * api_leases.c - POST /v1/leases: sandboxes bound to a client's connection.
 *
 * A client that must leave nothing behind however it dies (corral mcp on a
 * shared daemon: SIGKILLed with its whole cgroup, the OOM killer) opens a
 * lease and creates its sandboxes with "lease": ID.  The lease is the
 * connection that asked for it: the reply's first line names it, and the
 * reply is never ended by the daemon while it lives.  The kernel closes a
 * dead process's sockets whatever killed it, so the daemon hears the end
 * (EOF, a reset, a TCP keepalive that went unanswered) and destroys every
 * sandbox still bound, each with a "lease.closed" event, a few a turn of
 * its loop.  A sandbox removed
 * before (DELETE, its TTL, a halt's kill) is simply no longer bound: a lease
 * keeps no list, a sandbox points to its lease.
 *
 * What an attacker gets from it:
 *  - ids are 128 bits from getrandom(), in hex: not guessed.  The id is
 *    compared in constant time all the same.
 *  - a lease is its opener's: over the unix socket the peer's uid
 *    (SO_PEERCRED), over TCP every client that has the token (the daemon
 *    tells no TCP clients apart).  A create naming another principal's
 *    lease is 403, one that names no open lease 404.
 *  - --max-leases open at once (503 beyond); sandboxes a lease binds are
 *    under --max-sandboxes as any; a lease costs one struct and its
 *    connection, which the listener's caps count.
 *  - what the client sends after its request is read and dropped as it
 *    arrives (the gate no longer parses it: it is no request), so the
 *    connection's close is still seen and memory does not grow; the daemon
 *    sends one line, so a client that never reads holds nothing but that.
 *  - a lease gives no sandbox more life: its TTL still ends it.
 * A lease does not outlive the daemon, and neither do its sandboxes: a
 * daemon's sandboxes die with it (serve.c), and the next start records
 * them lost; leases are not written to the state directory.
 */
#include "api.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>

#define LEASE_ID_BYTES		16	/* 128 bits */
#define LEASE_REAP_STEP		4	/* sandboxes destroyed a turn of the loop */

struct lease {
	struct lease *next, *prev;
	struct daemon *d;
	struct evhttp_request *req;
	struct bufferevent *bev;
	struct evbuffer_cb_entry *drop;	/* the client's bytes, dropped */
	char id[LEASE_ID_MAX];
	uint64_t serial;		/* never reused: a key, unlike id, no secret */
	bool tcp;			/* every token holder's; else uid's */
	uid_t uid;
	size_t nbound;
	bool closed;			/* its connection ended: its sandboxes going */
	struct event *ev_reap;		/* lease_reap_step, while they are */
};

static bool lease_new_id(char *buf, size_t len)
{
	unsigned char r[LEASE_ID_BYTES];
	size_t at;

	if (getrandom(r, sizeof(r), 0) != sizeof(r))
		return false;
	at = snprintf(buf, len, "ls-");
	for (size_t i = 0; i < sizeof(r) && at + 2 < len; i++)
		at += snprintf(buf + at, len - at, "%02x", r[i]);
	explicit_bzero(r, sizeof(r));
	return true;
}

/* Who asked: the unix peer's uid (-1 when the kernel did not say), or TCP. */
static void principal_of(struct daemon *d, struct evhttp_request *req, bool *tcp,
			 uid_t *uid)
{
	struct evhttp_connection *conn = evhttp_request_get_connection(req);
	struct bufferevent *bev = conn ? evhttp_connection_get_bufferevent(conn) : NULL;
	int fd = bev ? bufferevent_getfd(bev) : -1;
	struct ucred cr;
	socklen_t len = sizeof(cr);

	*tcp = api_over_tcp(d, req);
	*uid = (uid_t)-1;
	if (!*tcp && fd >= 0 && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0)
		*uid = cr.uid;
}

/* The connection is going: nothing of it is ours any more. */
static void lease_let_go(struct lease *l)
{
	if (!l->bev)
		return;
	if (l->drop)
		evbuffer_remove_cb_entry(bufferevent_get_input(l->bev), l->drop);
	bufferevent_decref(l->bev);
	l->bev = NULL;
	l->drop = NULL;
	l->req = NULL;
}

static void lease_free(struct lease *l)
{
	struct daemon *d = l->d;

	lease_let_go(l);
	if (l->prev)
		l->prev->next = l->next;
	else
		d->leases = l->next;
	if (l->next)
		l->next->prev = l->prev;
	d->nleases--;
	if (l->ev_reap)
		event_free(l->ev_reap);
	free(l);
}

/*
 * The bound sandboxes go, each saying why, LEASE_REAP_STEP a turn of the
 * loop: a destroy holds the loop about 3 ms (measured here), and a lease
 * may bind --max-sandboxes of them; other clients are served between.
 */
static void lease_reap_step(evutil_socket_t fd, short what, void *arg)
{
	struct lease *l = arg;
	struct sandbox *sb = l->d->sandboxes, *next;
	size_t n = 0, max = l->ev_reap ? LEASE_REAP_STEP : SIZE_MAX;
	char why[160];

	(void)fd;
	(void)what;
	snprintf(why, sizeof(why), "the lease %s it was created under closed (its "
		 "client's connection ended): destroyed with it", l->id);
	for (; sb && l->nbound && n < max; sb = next) {
		next = sb->next;
		if (sb->lease != l)
			continue;
		corral_box_note(sb->box, "lease.closed", why);
		sandbox_destroy(sb, why);	/* unbinds it */
		n++;
	}
	if (l->nbound && l->ev_reap) {
		if (event_add(l->ev_reap, &(struct timeval){ 0 }) == 0)
			return;
		/* no next turn to be had: the rest now, at once */
		event_free(l->ev_reap);
		l->ev_reap = NULL;
		lease_reap_step(fd, what, l);
		return;
	}
	lease_free(l);	/* every sandbox bound is gone: none points here */
}

static void lease_gone(struct evhttp_connection *conn, void *arg)
{
	struct lease *l = arg;

	(void)conn;
	forget_request(l->req);
	lease_let_go(l);
	l->closed = true;	/* binds nothing more; freed once its sandboxes are gone */
	l->ev_reap = evtimer_new(l->d->base, lease_reap_step, l);
	lease_reap_step(-1, 0, l);
}

/*
 * What the client sends on a lease is no request: dropped as it comes in.
 * evhttp's read callback is off while a reply streams, but the socket is
 * still read (for its close), into this buffer.
 */
static void drop_input(struct evbuffer *buf, const struct evbuffer_cb_info *info,
		       void *arg)
{
	(void)arg;
	if (info->n_added)
		evbuffer_drain(buf, evbuffer_get_length(buf));
}

/*
 * A TCP peer gone without a word (powered off, cut off by a firewall) sends
 * no FIN: found --lease-timeout after it was last heard from, also when
 * bytes of ours wait unacknowledged (where keepalive does not probe, and
 * retransmissions alone take ~15 minutes).
 */
static void keepalive(struct lease *l)
{
	char what[64];
	int fd = bufferevent_getfd(l->bev);

	if (!l->tcp || fd < 0)
		return;
	snprintf(what, sizeof(what), "lease %s", l->id);
	api_tcp_keepalive(fd, l->d->limits.lease_timeout_s, true, what);
}

void leases_create(struct daemon *d, struct evhttp_request *req, const char *rest)
{
	static const char *const known[] = { NULL };
	struct evhttp_connection *conn = evhttp_request_get_connection(req);
	struct bufferevent *bev = conn ? evhttp_connection_get_bufferevent(conn) : NULL;
	struct evbuffer *out;
	struct api_fault f;
	struct lease *l;
	json_t *o;

	(void)rest;
	o = body_json(req, false);
	if (!o)
		return;
	if (!only_fields(o, known, &f)) {
		json_decref(o);
		reply_fault(req, &f);
		return;
	}
	json_decref(o);
	if (d->nleases >= d->limits.max_leases) {
		reply_error(req, 503, "busy", "%zu leases are open, the limit "
			    "(--max-leases)", d->nleases);
		return;
	}
	if (!bev) {
		reply_error(req, 500, "internal", "the lease's connection is not known");
		return;
	}
	l = calloc(1, sizeof(*l));
	out = l ? evbuffer_new() : NULL;
	if (!out) {
		reply_error(req, 500, "internal", "out of memory for a lease");
		free(l);
		return;
	}
	if (!lease_new_id(l->id, sizeof(l->id))) {
		reply_error(req, 503, "busy", "no random bytes for a lease id "
			    "(getrandom: %s)", strerror(errno));
		evbuffer_free(out);
		free(l);
		return;
	}
	l->d = d;
	l->serial = ++d->lease_serial;
	l->req = req;
	l->bev = bev;
	bufferevent_incref(bev);	/* till lease_let_go: its input has our cb */
	principal_of(d, req, &l->tcp, &l->uid);
	l->next = d->leases;
	if (d->leases)
		d->leases->prev = l;
	d->leases = l;
	d->nleases++;
	api_set_closecb(d, req, lease_gone, l);
	/* no request follows on this connection: the gate stops reading heads */
	api_gate_upgrade(d, conn);
	l->drop = evbuffer_add_cb(bufferevent_get_input(bev), drop_input, l);
	evbuffer_drain(bufferevent_get_input(bev), evbuffer_get_length(bufferevent_get_input(bev)));
	keepalive(l);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
			  "application/x-ndjson");
	evhttp_send_reply_start(req, 200, "OK");
	evbuffer_add_printf(out, "{\"lease\":\"%s\",\"max_sandboxes\":%zu}\n", l->id,
			    d->max_sandboxes);
	evhttp_send_reply_chunk(req, out);
	evbuffer_free(out);
}

/* Equal strings, in time that depends on a's length only. */
static bool same_id(const char *a, const char *b)
{
	size_t n = strlen(a), m = strlen(b);
	unsigned char diff = n != m;

	for (size_t i = 0; i < n; i++)
		diff |= (unsigned char)a[i] ^ (unsigned char)(i < m ? b[i] : 0);
	return !diff;
}

struct lease *lease_for_create(struct daemon *d, struct evhttp_request *req,
			       const char *id, struct api_fault *f)
{
	struct lease *l;
	bool tcp;
	uid_t uid;

	for (l = d->leases; l; l = l->next)
		if (!l->closed && same_id(l->id, id))
			break;
	if (!l) {
		api_fault(f, 404, "not_found", "no open lease \"%.40s\": it was "
			  "closed (its connection ended) or never opened (POST "
			  "/v1/leases)", id);
		return NULL;
	}
	principal_of(d, req, &tcp, &uid);
	if (tcp != l->tcp || (!tcp && (uid != l->uid || uid == (uid_t)-1))) {
		api_fault(f, 403, "forbidden", "lease %.40s was opened by another "
			  "client (%s); a sandbox binds only to its own client's "
			  "lease", id, l->tcp ? "over TCP" : "another user on the "
			  "unix socket");
		return NULL;
	}
	return l;
}

/*
 * A lease's sandboxes count as one client's, as a TCP peer's do: one
 * `corral mcp` session on a shared daemon, whose model creates as many as
 * it likes, took every place --max-sandboxes allows, and every other
 * session's create was refused while it held them.  429 as for a peer.
 */
bool lease_room(struct daemon *d, const struct lease *l, struct api_fault *f)
{
	if (!l || l->nbound < d->limits.max_sandboxes_per_peer)
		return true;
	return api_fault(f, 429, "too_many_requests", "%zu sandboxes of this "
			 "lease's are alive, the limit (--max-sandboxes-per-peer): "
			 "destroy one first", l->nbound);
}

void lease_bind(struct lease *l, struct sandbox *sb)
{
	sb->lease = l;
	l->nbound++;
}

void lease_unbind(struct sandbox *sb)
{
	if (!sb->lease)
		return;
	sb->lease->nbound--;
	sb->lease = NULL;
}

uint64_t lease_serial(const struct lease *l)
{
	return l->serial;
}

/* The daemon stops: its sandboxes went first; each open lease's reply ends. */
void leases_stop(struct daemon *d)
{
	while (d->leases) {
		struct lease *l = d->leases;
		struct evhttp_request *req = l->req;

		if (req) {
			api_set_closecb(d, req, NULL, NULL);
			lease_let_go(l);
			api_reply_end(req);
		}
		lease_free(l);
	}
}
