/*
 * proxy.h - the supervisor's listeners inside a sandbox's network namespace:
 * an HTTP/CONNECT proxy, SOCKS5, a DNS responder (dnsd.c) and transparent
 * mode's port (transparent.c), each deciding every connection by the
 * policy's allowlist.
 */
#ifndef CORRAL_PROXY_H
#define CORRAL_PROXY_H

#include "internal.h"
#include "events.h"

#include <event2/event.h>

#define PROXY_HTTP_PORT		3128
#define PROXY_SOCKS_PORT	1080
#define PROXY_DNS_PORT		53
#define PROXY_TRANSPARENT_PORT	3129	/* where nftables sends every TCP connection */

struct proxy;

/*
 * In init, in its own new netns, with every capability there and before
 * it takes its identity (nothing of the sandbox's has run): bring lo up,
 * open the proxy's listeners (for transparent mode, route everything over
 * lo and load the redirect rules: net.c, nft.c), send them all on sock and
 * close them.  A failure is sent as well: the supervisor says it.  0, or
 * -EPIPE if the supervisor did not get the message.
 */
/*
 * New flows a second a sandbox may begin in transparent mode, for each
 * connection it may hold: what the nat rules make conntrack keep is
 * kernel memory no cgroup of the sandbox's is charged for (net.c, nft.c).
 */
#define PROXY_NEW_FLOWS_PER_CONN	4
#define PROXY_NEW_FLOWS_MIN		256
int proxy_listeners_send(int sock, bool transparent, uint64_t connections);

/* The supervisor's side: the sockets init sent on sync, served on base. */
struct tlsbox;
/*
 * tls: the sandbox's CA, rules and secrets (tls.h), or NULL: no termination.
 * The proxy holds at most p->connections connections at once, and no more
 * than 1/fd_shares of the process's open-files limit allows (0 or 1: all
 * of it).
 */
int proxy_start(struct event_base *base, int sync, const struct corral_policy *p,
		unsigned fd_shares, struct events *ev, struct tlsbox *tls,
		struct proxy **out, struct corral_err *err);
/*
 * The sandbox ended: what it sent before (UDP, ICMP nftables logged, DNS
 * questions, connections in the listeners' backlogs, already queued for
 * us) is read and recorded now, not lost with the loop.
 */
void proxy_drain(struct proxy *px);
/* Some connection still waits for its verdict (its request, its hello). */
bool proxy_judging(const struct proxy *px);
/*
 * The sandbox is halted: every connection is reset, and what the sandbox
 * sent that is not yet upstream is dropped; connections still to come
 * (made before the freeze, waiting in a backlog) are reset at accept.
 */
void proxy_halt(struct proxy *px);
void proxy_free(struct proxy *px);

#endif
