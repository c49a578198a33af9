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
 * Open the listeners in the netns of pid (which must be a sandbox this
 * process created) and serve them on base.  Nothing runs in the sandbox:
 * a short-lived helper joins its namespaces, makes the sockets and hands
 * them back.
 */
struct tlsbox;
/* tls: the sandbox's CA, rules and secrets (tls.h), or NULL: no termination */
int proxy_start(struct event_base *base, pid_t pid, const struct corral_policy *p,
		struct events *ev, struct tlsbox *tls, struct proxy **out,
		struct corral_err *err);
void proxy_free(struct proxy *px);

#endif
