/*
 * transparent.c - transparent mode: every TCP connection the sandbox makes
 * is redirected by nftables (net.c) to the proxy's port 3129, where the
 * name it was meant for is found again: from the address our DNS gave for
 * it (one per name, from 100.64.0.0/16, which routes nowhere), or from the
 * first bytes (TLS SNI, HTTP Host).  A connection judged by that name is
 * connected to that name, never to the address the sandbox dialled.
 */
#include "proxy_int.h"
#include "egress.h"
#include "sni.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/util.h>
#include <linux/netfilter_ipv4.h>
#include <linux/netfilter_ipv6/ip6_tables.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SYNTH_NET	0x64400000u	/* 100.64.0.0/16: names, not hosts */
#define SYNTH_MAX	65534
#define SYNTH_SLOTS_MIN	64

/*
 * FNV-1a from a random start, so a sandbox cannot pick names that share a
 * slot.  Its low bits, the slot, depend on the low bits alone of what
 * went in (the parity of the bytes decides bit 0, whatever the seed): the
 * high half is folded in.
 */
static uint32_t synth_hash(const struct proxy *px, const char *name)
{
	uint32_t h = 2166136261u ^ px->synth_seed;

	for (; *name; name++)
		h = (h ^ (uint8_t)*name) * 16777619u;
	return h ^ (h >> 16);
}

/* The slot that holds name, or the empty one where it would go. */
static uint32_t *synth_slot(const struct proxy *px, const char *name)
{
	size_t mask = px->synth_cap - 1, i = synth_hash(px, name) & mask;

	while (px->synth_slots[i] && strcmp(px->synth[px->synth_slots[i] - 1], name))
		i = (i + 1) & mask;
	return &px->synth_slots[i];
}

/*
 * Room for one more name, the slots at most half full.  Names are found
 * by hash: a wildcard lets a sandbox ask for 65534 names, and a scan of
 * them all for each question took the supervisor's loop 0.6 ms a question.
 */
static int synth_reserve(struct proxy *px)
{
	size_t cap = px->synth_cap ? px->synth_cap * 2 : SYNTH_SLOTS_MIN, i;
	uint32_t *slots;
	char **grown;

	if (px->nsynth >= SYNTH_MAX)
		return -ENOSPC;
	if (!px->synth_cap && corral_random(&px->synth_seed, sizeof(px->synth_seed)))
		return -EIO;
	if ((px->nsynth + 1) * 2 <= px->synth_cap)
		return 0;
	/* the names' array grows in the same steps, first: slots index it */
	grown = realloc(px->synth, cap / 2 * sizeof(char *));
	if (!grown)
		return -ENOMEM;
	px->synth = grown;
	slots = calloc(cap, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	free(px->synth_slots);
	px->synth_slots = slots;
	px->synth_cap = cap;
	for (i = 0; i < px->nsynth; i++)
		*synth_slot(px, px->synth[i]) = (uint32_t)i + 1;
	return 0;
}

/*
 * The address an allowed name resolves to inside: one per name, from a
 * range that routes nowhere, so a connection to it can only mean that name.
 */
int transparent_addr(struct proxy *px, const char *name, struct sockaddr_storage *out)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)out;
	uint32_t *slot = px->synth_cap ? synth_slot(px, name) : NULL;
	size_t i;
	int r;

	if (slot && *slot) {
		i = *slot - 1;
	} else {
		r = synth_reserve(px);
		if (r)
			return r;
		i = px->nsynth;
		px->synth[i] = strdup(name);
		if (!px->synth[i])
			return -ENOMEM;
		*synth_slot(px, name) = (uint32_t)i + 1;
		px->nsynth++;
	}
	memset(out, 0, sizeof(*out));
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = htonl(SYNTH_NET + i + 1);
	return 0;
}

static const char *synth_name(const struct proxy *px, const struct sockaddr_storage *ss)
{
	const struct sockaddr_in *sin = (const struct sockaddr_in *)ss;
	uint32_t a;

	if (ss->ss_family != AF_INET)
		return NULL;
	a = ntohl(sin->sin_addr.s_addr);
	if ((a & 0xffff0000u) != SYNTH_NET || (a & 0xffff) == 0 ||
	    (a & 0xffff) > px->nsynth)
		return NULL;
	return px->synth[(a & 0xffff) - 1];
}

/*
 * A connection to a bare address that ended before its first bytes named
 * a host.  A connect() scan sends nothing: every port answered "open" (the
 * proxy accepts them all), and each ended unjudged, with no event and not
 * counted by the abort criteria.  Nothing was forwarded; it is a denial.
 */
static void on_transparent_end(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;
	char why[CORRAL_ERR_MAX];

	(void)bev;
	if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)))
		return;
	snprintf(why, sizeof(why), "a connection to the address %s:%u ended before "
		 "it named a host (neither TLS SNI nor HTTP Host): nothing was "
		 "forwarded", c->host, c->port);
	conn_deny_gone(c, why);
}

/* A connection to a bare address: the first bytes must name the host. */
static void on_transparent_head(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t len = evbuffer_get_length(in);
	const uint8_t *data = evbuffer_pullup(in, len);
	struct sni_hello hello = { 0 };
	char addr[sizeof(c->host)];
	int r;

	snprintf(addr, sizeof(addr), "%s", c->host);
	if (len && data[0] == 0x16) {
		r = sni_parse_hello(data, len, &hello);
		if (r == -EAGAIN && len < SNI_READ_MAX)
			return;
		if (r < 0 || !hello.has_sni) {
			conn_deny(c, "a TLS connection to an address names no host (no readable SNI)");
			return;
		}
		snprintf(c->host, sizeof(c->host), "%s", hello.host);
		snprintf(c->sni, sizeof(c->sni), "%s", hello.host);
	} else {
		struct httpreq_conn hr;
		size_t used = 0;

		httpreq_init(&hr);
		r = httpreq_feed(&hr, data, len, &used);
		if (r == HTTPREQ_NEED_MORE && len < HEAD_MAX) {
			httpreq_free(&hr);
			return;
		}
		if (r != HTTPREQ_HEAD || !hr.req.host[0]) {
			httpreq_free(&hr);
			conn_deny(c, "a connection to an address names no host (neither TLS SNI nor HTTP Host)");
			return;
		}
		snprintf(c->host, sizeof(c->host), "%s", hr.req.host);
		snprintf(c->method, sizeof(c->method), "%s", hr.req.method_name);
		httpreq_free(&hr);
	}
	/* named: its end from now on is an ordinary connection's */
	bufferevent_setcb(bev, on_transparent_head, NULL, conn_down_event, c);
	/* Judged by the name it gave; connected to that name, never to addr. */
	if (!conn_decide(c) || !conn_ech_ok(c, &hello))
		return;
	if (c->sni[0] && conn_should_terminate(c)) {
		conn_terminate(c);
		return;
	}
	/*
	 * HTTP: the head just read (still in `in`) is the first request read
	 * and judged, and so is every one after it on this connection: the
	 * next one's Host could name another host on the same address.
	 */
	if (!c->sni[0]) {
		conn_parse_tunnel(c);
		return;
	}
	conn_connect_with(c, in);
}

/*
 * A connection whose name is known and allowed: to a terminated host the
 * ClientHello first, as for CONNECT; to a host whose requests are narrowed
 * each request read; to port 80 a hello or HTTP, each request read (as
 * conn_read_port80 says); else connected, its first bytes shown to the
 * SNI check if peek.
 */
static void transparent_decided(struct conn *c, bool peek)
{
	if (conn_should_terminate(c)) {
		c->st = C_SNI;
		bufferevent_setwatermark(c->down, EV_READ, 0, SNI_READ_MAX);
		bufferevent_setcb(c->down, conn_on_sni, NULL, conn_down_event, c);
		return;
	}
	if (conn_should_parse(c)) {
		conn_parse_tunnel(c);
		return;
	}
	if (c->port == 80) {
		conn_read_port80(c);
		return;
	}
	c->peek_tls = peek;
	c->hold = true;
	conn_connect(c);
}

static int original_dst(int fd, struct sockaddr_storage *dst)
{
	socklen_t len = sizeof(*dst);

	if (getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, dst, &len) == 0)
		return 0;
	len = sizeof(*dst);
	if (getsockopt(fd, SOL_IPV6, IP6T_SO_ORIGINAL_DST, dst, &len) == 0)
		return 0;
	return -errno;
}

void transparent_start(struct conn *c, int fd)
{
	struct sockaddr_storage dst;
	struct egress_verdict v;
	const char *name;

	c->proto = "transparent";
	if (original_dst(fd, &dst) < 0) {
		snprintf(c->host, sizeof(c->host), "?");
		conn_deny(c, "transparent connection without an original destination");
		return;
	}
	c->port = ntohs(dst.ss_family == AF_INET ?
			((struct sockaddr_in *)&dst)->sin_port :
			((struct sockaddr_in6 *)&dst)->sin6_port);
	name = synth_name(c->px, &dst);
	if (name) {
		snprintf(c->host, sizeof(c->host), "%s", name);
		if (conn_decide(c))
			transparent_decided(c, true);
		return;
	}
	/*
	 * A bare address, no name from our DNS: what a port sweep looks like.
	 * Ask now who holds it; by the time it is judged, a probe that
	 * connected and left has no process to name.
	 */
	conn_ask_pid(c);
	evutil_inet_ntop(dst.ss_family, dst.ss_family == AF_INET ?
			 (void *)&((struct sockaddr_in *)&dst)->sin_addr :
			 (void *)&((struct sockaddr_in6 *)&dst)->sin6_addr,
			 c->host, sizeof(c->host));
	/* an address the allowlist names outright needs no further name */
	if (egress_check_name(c->px->rules, c->host, c->port, &v) == 0 && v.allowed) {
		snprintf(c->host, sizeof(c->host), "%s", v.host);
		snprintf(c->why, sizeof(c->why), "%s", v.reason);
		c->is_ip = true;
		transparent_decided(c, false);
		return;
	}
	bufferevent_setcb(c->down, on_transparent_head, NULL, on_transparent_end, c);
}

void transparent_free(struct proxy *px)
{
	for (size_t i = 0; i < px->nsynth; i++)
		free(px->synth[i]);
	free(px->synth);
	free(px->synth_slots);
	px->synth = NULL;
	px->synth_slots = NULL;
	px->nsynth = 0;
	px->synth_cap = 0;
}
