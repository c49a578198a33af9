/*
 * proxy_int.h - what the four parts of a sandbox's egress proxy share:
 * proxy.c (listeners, connections, HTTP/CONNECT, SOCKS5), transparent.c
 * (connections nftables redirected, and the names behind 100.64.0.0/16),
 * dnsd.c (the DNS responder) and nflog.c (UDP and ICMP nftables dropped).
 * Nothing outside them includes it.
 */
#ifndef CORRAL_PROXY_INT_H
#define CORRAL_PROXY_INT_H

#include "proxy.h"
#include "socks.h"
#include "httpreq.h"
#include "httpresp.h"
#include "peer.h"
#include "tls.h"

#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

#define HEAD_MAX		(64 << 10)	/* a request head or first bytes */
#define BEV_SINGLE_MAX		(256 << 10)	/* a bufferevent's read or write a wakeup */

enum listen_kind { L_HTTP, L_SOCKS, L_DNS_TCP, L_DNS_UDP, L_TRANSPARENT };

/* proxy.c's listen_specs: HTTP, SOCKS, DNS TCP and UDP, transparent; v4 and v6 */
#define NSPECS			10

struct udp_listener {
	struct proxy *px;
	int fd;
	struct event *ev;
};

/* HTTP, SOCKS, transparent: accepted one connection a wakeup (proxy.c) */
struct tcp_listener {
	struct proxy *px;
	int fd;
	enum listen_kind kind;
	bool nodelay;			/* TCP_NODELAY set on it: accepted ones inherit it */
	struct event *ev;
};

/* nflog.c: the packets nftables logged before dropping them */
struct nflog_state {
	int fd;				/* NETLINK_NETFILTER in the sandbox's netns, or -1 */
	struct event *ev;
	struct sockaddr_storage last_src;	/* the last sender asked for, and its answer */
	pid_t last_pid;
	uint64_t last_cgid;
	const char *last_missed;	/* why last_pid is 0 (peer_missed), or NULL */
	uint64_t asks_since;		/* this second's pid searches began at (ms) */
	unsigned asks;
	uint32_t over_rate;		/* new flows a second the rules let be */
};

struct proxy {
	struct event_base *base;
	struct events *ev;
	struct egress *rules;
	struct evdns_base *dns;
	char resolver[64];		/* whom dns asks, as a user would name it */
	struct evconnlistener *listeners[NSPECS];	/* DNS over TCP (dnsd.c) */
	struct tcp_listener tcp[NSPECS];
	struct udp_listener udp[NSPECS];
	struct conn *conns;		/* every live connection, for proxy_free */
	bool transparent;
	bool halted;			/* proxy_halt: nothing more is relayed */
	struct event *halt_ev;		/* its resets, on the loop's next turn */
	char **synth;			/* transparent: names behind 100.64.0.0/16 */
	size_t nsynth;
	uint32_t *synth_slots;		/* a hash of synth: index + 1, 0 empty */
	size_t synth_cap;		/* slots, a power of two, at most half full */
	uint32_t synth_seed;		/* names cannot be chosen to collide */
	struct dns_pending *pending;	/* DNS answers waiting on resolution */
	size_t npending;
	struct dns_tcp *dns_conns;	/* DNS over TCP connections (dnsd.c) */
	/*
	 * Connections held, DNS over TCP ones too, and how many may be: the
	 * policy's limits.connections, or fewer where our share of the fd
	 * limit is (max_conns_by_fds).
	 */
	size_t nconns, max_conns;
	bool max_conns_by_fds;
	int down_rcvbuf, up_rcvbuf;	/* each socket's SO_RCVBUF; 0: autotuned */
	struct tlsbox *tls;		/* CA, rules, secrets (tls.h); NULL: none */
	size_t guesses;			/* secrets_mask_take_guesses, all connections */
	struct event *resume;		/* listeners paused after EMFILE */
	int diag;			/* sock_diag in the sandbox's netns, or -1 */
	struct peer_rate searches;	/* for denials' pids (peer.h) */
	ino_t netns_ino;
	struct nflog_state nflog;
};

/* ---- connections ---------------------------------------------------------- */

enum conn_state {
	C_HEAD,		/* reading the request (HTTP) or handshake (SOCKS) */
	C_RESOLVE,	/* waiting for the host's resolver */
	C_CONNECT,	/* waiting for the upstream connection */
	C_SNI,		/* CONNECT to 443: waiting for the ClientHello */
	C_RELAY,	/* bytes flow both ways */
	C_CLOSING,	/* flushing a last answer to the sandbox */
};

struct conn {
	struct proxy *px;
	struct conn *next, *prev;
	enum listen_kind kind;
	enum conn_state st;
	const char *proto;		/* "connect", "http", "socks", "transparent" */
	struct bufferevent *down;	/* the sandbox's side */
	struct bufferevent *up;		/* the upstream */
	struct evdns_getaddrinfo_request *gai;
	char *unresolved;		/* why its allowed name led nowhere, or NULL */
	struct socks_conn socks;
	struct httpreq_conn hr;
	char host[256];
	char sni[256];
	char method[16];
	char why[CORRAL_ERR_MAX];	/* the rule that allowed it */
	uint16_t port;
	bool allowed_logged;
	bool halted;			/* reset by proxy_halt */
	struct sockaddr_storage peer;	/* the sandbox's end, as accepted */
	pid_t pid;			/* who holds it (host view), once asked */
	uint64_t cgid;			/* the cgroup2 group of its maker */
	bool pid_asked;
	const char *pid_missing;	/* asked, and why no pid (peer_missed), or NULL */
	bool peek_tls;			/* the relay judges a TLS hello's SNI (judge_first) */
	bool is_ip;			/* host is an address (conn_decide): a hello needs no SNI */
	/*
	 * Where a judged TLS tunnel's handshake is: after its hello passed,
	 * the server's answer is read; a HelloRetryRequest has the client send
	 * a second hello in clear, judged as the first.
	 */
	enum { TLS_HELLO, TLS_SERVER, TLS_RETRY, TLS_BLIND } tls_phase;
	bool answered;			/* CONNECT's 200 or SOCKS5's success went out */
	bool parsed;			/* a tunnel whose requests are read (conn_parse_tunnel) */
	bool ws_wait;			/* a WebSocket handshake went up: its answer decides */
	bool upgraded;			/* the upstream said 101 to it: no more HTTP either way */
	bool hold;			/* not read while its upstream connects in the loop */
	struct event *wait;		/* the request not in at accept: read_now once it is */
	uint64_t bytes_up, bytes_down;
	uint64_t t0_ms;			/* accepted at (corral_now_ms): duration_ms */
	struct evbuffer *first;		/* bytes for upstream once connected */
	/* terminated TLS (terminate.c): down is the TLS filter over raw */
	bool terminated;
	struct bufferevent *raw;	/* the sandbox's socket under the filter */
	struct tls_session *down_tls;	/* the filter's, freed with it (terminate.c) */
	struct secrets_scan scan;	/* placeholders, values split across body reads */
	/*
	 * Terminated, to a host secrets go to: every answer is framed (resp)
	 * and the values' forms in it masked (secrets.c) before the sandbox
	 * reads it.  masked: how many; mask_said: the event went.
	 */
	struct secrets_mask *mask;
	struct httpresp resp;
	uint64_t masked;
	bool mask_said;
	struct relay *relay;		/* a judged tunnel, spliced by the kernel */
};

/* proxy.c: a connection's life */
/* One more connection may be held; false: refused, with an event naming the limit. */
bool proxy_conn_room(struct proxy *px, const char *protocol);
/* larger reads and writes a wakeup for a bufferevent that relays bodies */
void conn_bev_tune(struct bufferevent *bev);
void conn_free(struct conn *c);
/* Learn who holds the sandbox's end (once); a denial names it. */
void conn_ask_pid(struct conn *c);
/* Log the denial and answer it in the connection's protocol. */
void conn_deny(struct conn *c, const char *reason);
/* Log the denial of a connection whose sandbox end is gone, and free it. */
void conn_deny_gone(struct conn *c, const char *reason);
/* Judge c->host:c->port as the sandbox named it; false: denied and answered. */
bool conn_decide(struct conn *c);
/* The name was allowed: resolve it (hosts map or the host's DNS), connect. */
void conn_connect(struct conn *c);
/* the same, after the bytes in that judged it (kept, sent first) */
void conn_connect_with(struct conn *c, struct evbuffer *in);
void conn_down_event(struct bufferevent *bev, short what, void *arg);

/* proxy.c: a request of a parsed connection (plain HTTP, terminated) */
void conn_http_from_down(struct conn *c);
void conn_on_http_head(struct bufferevent *bev, void *arg);
/* CONNECT to 443, transparent to a name: read the ClientHello, judge its SNI */
void conn_on_sni(struct bufferevent *bev, void *arg);
/* A hello with Encrypted Client Hello, refused unless terminated; false: c is gone. */
struct sni_hello;
bool conn_ech_ok(struct conn *c, const struct sni_hello *hello);
/*
 * A tunnel (CONNECT, SOCKS5, transparent) to a host whose requests are
 * narrowed but not terminated: read each request as plain HTTP is.
 */
void conn_parse_tunnel(struct conn *c);
/*
 * A plaintext port's tunnel (80) to a host no rule narrows: its first
 * bytes must be a TLS hello (whose SNI is judged) or HTTP (each request
 * read, as conn_parse_tunnel); anything else cannot be judged by name.
 */
void conn_read_port80(struct conn *c);
/* Say why, answer it in the connection's protocol, close. */
void conn_refuse_http(struct conn *c, int code, const char *status, const char *why);
/* Flush what is queued for the sandbox, then close. */
void conn_close_after_flush(struct conn *c);

/* terminate.c: is host:port terminated?  Then take the sandbox's TLS. */
bool conn_should_terminate(struct conn *c);
/* Not terminated, but narrowed by a rule: its requests are read (plain HTTP). */
bool conn_should_parse(struct conn *c);
void conn_terminate(struct conn *c);

/* the upstream's side of a terminated connection (not yet connected) */
struct bufferevent *conn_tls_upstream(struct conn *c, char *why, size_t whylen);
/* Why an upstream TLS connection failed (after BEV_EVENT_ERROR). */
bool conn_tls_upstream_error(struct conn *c, char *why, size_t whylen);
/* Free the TLS filter, keep the sandbox's socket (closing: flush it). */
void conn_untls_down(struct conn *c);
/* Free the TLS filter and its session (c->down_tls set), without a word. */
void conn_tls_free_down(struct conn *c);

/* transparent.c */
void transparent_start(struct conn *c, int fd);
/* The address inside that stands for name (A records only). */
int transparent_addr(struct proxy *px, const char *name, struct sockaddr_storage *out);
void transparent_free(struct proxy *px);

/* dnsd.c: the listeners' callbacks, and the answers still waiting */
void dnsd_on_udp(evutil_socket_t fd, short what, void *arg);
void dnsd_on_accept(struct evconnlistener *l, evutil_socket_t fd,
		    struct sockaddr *sa, int salen, void *arg);
void dnsd_free(struct proxy *px);

/* nflog.c: each packet logged on fd (taken) an egress.denied event */
int nflog_serve(struct proxy *px, int fd);
/* what is waiting on it, read now (bounded) */
void nflog_drain(struct proxy *px);
void nflog_free(struct proxy *px);

#endif
