/*
 * dnsd.c - the DNS responder on the sandbox's 127.0.0.1:53 and [::1]:53,
 * UDP and TCP: answered here, never forwarded.  A name the allowlist does
 * not name is NXDOMAIN before any resolver hears of it; an allowed one is
 * answered from the policy's hosts map, in transparent mode with the
 * address that stands for it (transparent.c), else from the host's
 * resolver, keeping only addresses the resolution guard lets through.
 */
#include "proxy_int.h"
#include "egress.h"
#include "dnsmsg.h"
#include "events.h"
#include "peer.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <event2/util.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/*
 * Answers queued on a DNS TCP connection before we stop reading it: a
 * client that asks and never reads would otherwise grow the supervisor
 * (an answer is longer than its question) without end.
 */
#define DNS_TCP_OUT_HIGH	(64 << 10)

/*
 * Questions waiting for the host's resolver at once, for one sandbox: each
 * holds memory here and in libevent until answered or timed out (seconds),
 * and questions over UDP cost the sandbox nothing to send.  A burst past
 * this gets SERVFAIL, which a resolver client takes as "ask again".
 */
#define DNS_PENDING_MAX		1024

struct dns_tcp {
	struct proxy *px;
	struct dns_tcp *next, *prev;	/* px->dns_conns */
	struct bufferevent *bev;
	struct sockaddr_storage peer;	/* the client's end, to find its process */
	int refs;			/* the connection + its pending answers */
	bool closed;
};

struct dns_pending {
	struct proxy *px;
	struct dns_pending *next, *prev;
	struct dns_query q;
	int udp_fd;			/* UDP: where to answer */
	struct sockaddr_storage peer;
	socklen_t peerlen;
	struct dns_tcp *tcp;		/* TCP: where to answer */
	struct evdns_getaddrinfo_request *gai;
};

static void dns_tcp_put(struct dns_tcp *t)
{
	struct proxy *px = t->px;

	if (--t->refs != 0)
		return;
	if (t->bev)
		bufferevent_free(t->bev);
	if (t->prev)
		t->prev->next = t->next;
	else
		px->dns_conns = t->next;
	if (t->next)
		t->next->prev = t->prev;
	px->nconns--;
	free(t);
}

static void dns_send(struct proxy *px, int udp_fd, const struct sockaddr_storage *peer,
		     socklen_t peerlen, struct dns_tcp *tcp, const uint8_t *msg,
		     size_t len)
{
	uint8_t prefix[2];

	(void)px;
	if (tcp) {
		if (!tcp->closed && dnsmsg_tcp_prefix(prefix, len) == 0) {
			bufferevent_write(tcp->bev, prefix, 2);
			bufferevent_write(tcp->bev, msg, len);
		}
		return;
	}
	if (sendto(udp_fd, msg, len, MSG_DONTWAIT, (const struct sockaddr *)peer,
		   peerlen) < 0) {
		/* a full socket buffer drops an answer; the client asks again */
	}
}

static void dns_pending_free(struct dns_pending *d)
{
	struct proxy *px = d->px;

	if (d->gai)
		evdns_getaddrinfo_cancel(d->gai);
	if (d->prev)
		d->prev->next = d->next;
	else
		px->pending = d->next;
	if (d->next)
		d->next->prev = d->prev;
	px->npending--;
	if (d->tcp)
		dns_tcp_put(d->tcp);
	free(d);
}

static void dns_tcp_close(struct dns_tcp *t);

void dnsd_free(struct proxy *px)
{
	while (px->pending)
		dns_pending_free(px->pending);
	/* no answer holds one now: closing frees it */
	while (px->dns_conns)
		dns_tcp_close(px->dns_conns);
}

static void dns_reply(struct dns_pending *d, const struct sockaddr_storage *addrs,
		      size_t n, int rcode)
{
	uint8_t out[DNS_TCP_MAX];
	size_t outlen = d->tcp ? sizeof(out) : DNS_UDP_MAX;
	int r;

	if (rcode == DNS_RCODE_NOERROR)
		r = dnsmsg_answer(&d->q, addrs, n, 60, out, &outlen);
	else
		r = dnsmsg_error(&d->q, NULL, 0, rcode, out, &outlen);
	if (r == 0)
		dns_send(d->px, d->udp_fd, &d->peer, d->peerlen, d->tcp, out, outlen);
}

static void dns_event(struct proxy *px, const char *type, const char *name,
		      const char *reason)
{
	events_emit(px->ev, type, json_pack("{s:s, s:s, s:i, s:s}", "protocol", "dns",
					    "host", name, "port", PROXY_DNS_PORT,
					    "reason", reason));
}

/*
 * Where a TCP question's asker connected (peer_dst), or NULL: the one
 * socket on its port that did is its.
 */
static const struct sockaddr *tcp_dst(struct dns_tcp *t, struct sockaddr_storage *to)
{
	return t->bev && peer_dst(bufferevent_getfd(t->bev), to) == 0 ?
	       (const struct sockaddr *)to : NULL;
}

/*
 * A denied name names the process that asked, hence its tool call (as a
 * denied connection does, proxy.c): the querier waits for our answer, so
 * its socket is still there to be found.  Only denials pay for the search.
 */
static void dns_denied(struct proxy *px, const struct sockaddr_storage *peer,
		       struct dns_tcp *tcp, const char *name, const char *reason)
{
	json_t *o = json_pack("{s:s, s:s, s:i, s:s}", "protocol", "dns", "host",
			      name, "port", PROXY_DNS_PORT, "reason", reason);
	/*
	 * A UDP asker sent to port 53, ours or (transparent mode) any
	 * address's that nftables redirected here, connected or not.
	 */
	struct sockaddr_in dns_dst = { .sin_family = AF_INET,
				       .sin_port = htons(PROXY_DNS_PORT) };
	struct sockaddr_storage to;
	uint64_t cgid = 0;
	pid_t pid = 0;

	if (o && peer && peer->ss_family &&
	    !peer_rate_take(&px->searches, corral_now_ms())) {
		json_object_set_new(o, "pid_missing", json_string(PEER_MISSED_RATE));
	} else if (o && peer && peer->ss_family) {
		pid = tcp ? peer_pid(px->diag, px->netns_ino, (const struct sockaddr *)peer,
				     tcp_dst(tcp, &to), &cgid) :
			peer_pid_udp(px->diag, px->netns_ino, (const struct sockaddr *)peer,
				     (const struct sockaddr *)&dns_dst, &cgid);
		if (pid > 0)
			json_object_set_new(o, "pid", json_integer(pid));
		else if (peer_missed())
			json_object_set_new(o, "pid_missing", json_string(peer_missed()));
		/* for attribution only: events.c turns it into "call" */
		if (cgid)
			json_object_set_new(o, EVENTS_KEY_CGROUP, json_integer(cgid));
	}
	events_emit(px->ev, "egress.denied", o);
}

static const struct sockaddr_storage *pending_peer(const struct dns_pending *d)
{
	return d->tcp ? &d->tcp->peer : &d->peer;
}

/* Keep only addresses the resolution guard lets through. */
static size_t dns_filter(struct dns_pending *d, struct evutil_addrinfo *res,
			 struct sockaddr_storage *addrs)
{
	size_t n = 0;

	for (struct evutil_addrinfo *ai = res; ai && n < DNS_ANSWERS_MAX; ai = ai->ai_next) {
		struct egress_verdict v;

		if (egress_check_addr(d->px->rules, d->q.name, ai->ai_addr, &v) < 0 ||
		    !v.allowed) {
			dns_denied(d->px, pending_peer(d), d->tcp, d->q.name,
				   v.reason);
			continue;
		}
		memcpy(&addrs[n++], ai->ai_addr, ai->ai_addrlen);
	}
	return n;
}

static void on_dns_resolved(int result, struct evutil_addrinfo *res, void *arg)
{
	struct dns_pending *d = arg;
	struct sockaddr_storage addrs[DNS_ANSWERS_MAX] = { 0 };
	size_t n;

	/*
	 * Cancelled by dns_pending_free: libevent says so later, from the
	 * loop, when d is gone already.  Nothing of it may be touched.
	 */
	if (result == EVUTIL_EAI_CANCEL) {
		if (res)
			evutil_freeaddrinfo(res);
		return;
	}
	d->gai = NULL;
	if (result != 0) {
		dns_reply(d, NULL, 0, result == EVUTIL_EAI_NONAME ?
			  DNS_RCODE_NXDOMAIN : DNS_RCODE_SERVFAIL);
	} else {
		n = dns_filter(d, res, addrs);
		dns_reply(d, addrs, n, n || !res ? DNS_RCODE_NOERROR : DNS_RCODE_REFUSED);
	}
	if (res)
		evutil_freeaddrinfo(res);
	dns_pending_free(d);
}

static void dns_question(struct proxy *px, const uint8_t *pkt, size_t len, int udp_fd,
			 const struct sockaddr_storage *peer, socklen_t peerlen,
			 struct dns_tcp *tcp)
{
	struct sockaddr_storage addr;
	struct egress_verdict v;
	struct evutil_addrinfo hints = { 0 };
	struct evdns_getaddrinfo_request *gai;
	struct dns_pending *d;
	uint8_t out[DNS_UDP_MAX];
	size_t outlen = sizeof(out);
	int r, rcode;

	d = calloc(1, sizeof(*d));
	if (!d)
		return;
	d->px = px;
	d->udp_fd = udp_fd;
	if (peer)
		memcpy(&d->peer, peer, peerlen);
	d->peerlen = peerlen;
	d->next = px->pending;
	if (px->pending)
		px->pending->prev = d;
	px->pending = d;
	px->npending++;
	if (tcp) {
		d->tcp = tcp;
		tcp->refs++;
	}

	r = dnsmsg_parse_query(pkt, len, &d->q);
	if (r < 0) {
		rcode = dnsmsg_rcode_for(r);
		if (rcode >= 0 && dnsmsg_error(NULL, pkt, len, rcode, out, &outlen) == 0)
			dns_send(px, udp_fd, peer, peerlen, tcp, out, outlen);
		dns_denied(px, pending_peer(d), tcp,
			   d->q.name[0] ? d->q.name : "?", "malformed DNS query");
		dns_pending_free(d);
		return;
	}
	if (egress_check_dns(px->rules, d->q.name, &v) < 0 || !v.allowed) {
		dns_denied(px, pending_peer(d), tcp, d->q.name, v.reason);
		dns_reply(d, NULL, 0, DNS_RCODE_NXDOMAIN);
		dns_pending_free(d);
		return;
	}
	dns_event(px, "egress.allowed", d->q.name, v.reason);
	if (d->q.qtype != DNS_TYPE_A && d->q.qtype != DNS_TYPE_AAAA) {
		dns_reply(d, NULL, 0, DNS_RCODE_NOERROR);
		dns_pending_free(d);
		return;
	}
	/* Transparent: a name's address inside is a token for that name. */
	if (px->transparent) {
		bool a = d->q.qtype == DNS_TYPE_A;

		if (a && transparent_addr(px, d->q.name, &addr) < 0)
			dns_reply(d, NULL, 0, DNS_RCODE_SERVFAIL);
		else
			dns_reply(d, &addr, a ? 1 : 0, DNS_RCODE_NOERROR);
		dns_pending_free(d);
		return;
	}
	if (egress_resolve_static(px->rules, d->q.name, 0, &addr) == 0) {
		bool match = (addr.ss_family == AF_INET) == (d->q.qtype == DNS_TYPE_A);

		dns_reply(d, &addr, match ? 1 : 0, DNS_RCODE_NOERROR);
		dns_pending_free(d);
		return;
	}
	if (px->npending > DNS_PENDING_MAX) {
		dns_denied(px, pending_peer(d), tcp, d->q.name,
			   "too many DNS questions waiting for the resolver at once");
		dns_reply(d, NULL, 0, DNS_RCODE_SERVFAIL);
		dns_pending_free(d);
		return;
	}
	hints.ai_family = d->q.qtype == DNS_TYPE_A ? AF_INET : AF_INET6;
	hints.ai_socktype = SOCK_STREAM;
	gai = evdns_getaddrinfo(px->dns, d->q.name, NULL, &hints, on_dns_resolved, d);
	/* NULL: on_dns_resolved ran inside the call already and freed d */
	if (gai)
		d->gai = gai;
}

void dnsd_on_udp(evutil_socket_t fd, short what, void *arg)
{
	struct udp_listener *u = arg;
	struct sockaddr_storage peer;
	socklen_t peerlen;
	uint8_t pkt[DNS_TCP_MAX];

	(void)what;
	/* a bounded batch, so one flood cannot starve the rest of the loop */
	for (int i = 0; i < 64; i++) {
		ssize_t n;

		peerlen = sizeof(peer);
		n = recvfrom(fd, pkt, sizeof(pkt), MSG_DONTWAIT,
			     (struct sockaddr *)&peer, &peerlen);
		if (n < 0)
			return;
		dns_question(u->px, pkt, n, fd, &peer, peerlen, NULL);
	}
}

/*
 * Nothing more is read or answered on t; it goes once no answer still
 * pending holds it.  Once only: a stream that ends after a bad message
 * must not drop the reference twice.
 */
static void dns_tcp_close(struct dns_tcp *t)
{
	if (t->closed)
		return;
	t->closed = true;
	bufferevent_disable(t->bev, EV_READ | EV_WRITE);
	dns_tcp_put(t);
}

static void on_dns_tcp_read(struct bufferevent *bev, void *arg);
static void on_dns_tcp_event(struct bufferevent *bev, short what, void *arg);

/* The client read its answers: read its questions again. */
static void on_dns_tcp_drained(struct bufferevent *bev, void *arg)
{
	struct dns_tcp *t = arg;

	if (t->closed)
		return;
	bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
	bufferevent_setcb(bev, on_dns_tcp_read, NULL, on_dns_tcp_event, t);
	bufferevent_enable(bev, EV_READ);
	/* the questions read before we stopped are still in */
	on_dns_tcp_read(bev, t);
}

static void on_dns_tcp_read(struct bufferevent *bev, void *arg)
{
	struct dns_tcp *t = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	for (;;) {
		size_t len = evbuffer_get_length(in), msglen, used;
		const uint8_t *msg;
		int r;

		if (evbuffer_get_length(bufferevent_get_output(bev)) >= DNS_TCP_OUT_HIGH) {
			bufferevent_disable(bev, EV_READ);
			bufferevent_setwatermark(bev, EV_WRITE, DNS_TCP_OUT_HIGH / 2, 0);
			bufferevent_setcb(bev, on_dns_tcp_read, on_dns_tcp_drained,
					  on_dns_tcp_event, t);
			return;
		}
		r = dnsmsg_tcp_next(evbuffer_pullup(in, len), len, &msg, &msglen, &used);
		/* a message not all in yet: the next read brings the rest */
		if (r == 0)
			return;
		if (r < 0) {
			dns_tcp_close(t);
			return;
		}
		dns_question(t->px, msg, msglen, -1, NULL, 0, t);
		evbuffer_drain(in, used);
	}
}

static void on_dns_tcp_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		dns_tcp_close(arg);
}

void dnsd_on_accept(struct evconnlistener *l, evutil_socket_t fd,
			  struct sockaddr *sa, int salen, void *arg)
{
	struct proxy *px = arg;
	struct dns_tcp *t;

	(void)l;
	/* each is an fd of ours: the proxy's budget holds for them too */
	if (!proxy_conn_room(px, "dns")) {
		close(fd);
		return;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		close(fd);
		return;
	}
	if (salen > 0 && (size_t)salen <= sizeof(t->peer))
		memcpy(&t->peer, sa, salen);
	t->px = px;
	t->bev = bufferevent_socket_new(px->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (!t->bev) {
		close(fd);
		free(t);
		return;
	}
	t->refs = 1;
	t->next = px->dns_conns;
	if (px->dns_conns)
		px->dns_conns->prev = t;
	px->dns_conns = t;
	px->nconns++;
	bufferevent_setwatermark(t->bev, EV_READ, 0, DNS_TCP_MAX + 2);
	bufferevent_setcb(t->bev, on_dns_tcp_read, NULL, on_dns_tcp_event, t);
	bufferevent_enable(t->bev, EV_READ | EV_WRITE);
}
