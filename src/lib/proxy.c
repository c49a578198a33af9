/*
 * proxy.c - egress by name: the supervisor's side of a sandbox's network.
 *
 * The sandbox's netns has loopback only.  Its listeners (HTTP/CONNECT on
 * 3128, SOCKS5 on 1080, DNS on 53, transparent mode's 3129, on 127.0.0.1
 * and ::1) belong to the supervisor: the sandbox's init creates them as
 * soon as it has made its netns, before anything of the sandbox's runs
 * and while it still has its capabilities there, and hands them over on
 * its sync socket, keeping none (proxy_listeners_send).
 * The sandbox holds no relay, no socket of ours, nothing it could replace.
 * Every connection is judged by egress.c before anything is resolved or
 * connected, and again after resolution (rebinding/SSRF guard).
 *
 * This file holds the listeners and the connections that name their
 * destination (HTTP/CONNECT, SOCKS5); dnsd.c answers DNS, transparent.c
 * takes the connections nftables redirected in transparent mode.
 *
 * A new connection is what an agent pays for most often, and here each
 * syscall and each wakeup is dear (a paravirtualized VM), so its path takes
 * as few trips through the loop as it can: the request is read when the
 * connection is accepted (the client has mostly sent it by then; if not,
 * with one recv when it comes), an upstream connect that completed inside
 * connect() (loopback, a near host) is relayed at once instead of after
 * EPOLLOUT, with no bufferevent for it, and a judged tunnel goes to the
 * kernel (relay.c), also one whose first bytes are still to be judged (a
 * TLS hello's SNI, and the second hello a HelloRetryRequest asks for: the
 * relay shows them to judge_first before any goes on).  The fast path
 * skips no judgement: the name is judged, the address judged again and
 * egress.allowed written before the upstream connect starts, as on the
 * slow path.
 */
#include "proxy_int.h"
#include "egress.h"
#include "sni.h"
#include "net.h"
#include "relay.h"
#include "peer.h"
#include "tls.h"
#include "fdpass.h"
#include "nflog.h"
#include "nft.h"

_Static_assert(NSPECS + 2 <= FD_SEND_MAX, "init sends every listener, diag and nflog at once");

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <fcntl.h>
#include <net/if.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <strings.h>

#define RELAY_HIGH_WATER	(1 << 20)	/* bytes queued before we stop reading */
#define CONNECT_TIMEOUT_S	30
#define FIRST_READ		(16 << 10)	/* read at accept: a request head, mostly */
#define CONN_BUDGET_MIN		8	/* connections, whatever the fd limit's share */
/* SO_RCVBUF (the kernel doubles it): the sandbox's side, over loopback; the upstream's */
#define DOWN_RCVBUF		(2 << 20)
#define UP_RCVBUF		(4 << 20)

struct listen_spec {
	int family;
	int type;
	const char *addr;
	uint16_t port;
	enum listen_kind kind;
};

static const struct listen_spec listen_specs[] = {
	{ AF_INET, SOCK_STREAM, "127.0.0.1", PROXY_HTTP_PORT, L_HTTP },
	{ AF_INET6, SOCK_STREAM, "::1", PROXY_HTTP_PORT, L_HTTP },
	{ AF_INET, SOCK_STREAM, "127.0.0.1", PROXY_SOCKS_PORT, L_SOCKS },
	{ AF_INET6, SOCK_STREAM, "::1", PROXY_SOCKS_PORT, L_SOCKS },
	{ AF_INET, SOCK_STREAM, "127.0.0.1", PROXY_DNS_PORT, L_DNS_TCP },
	{ AF_INET6, SOCK_STREAM, "::1", PROXY_DNS_PORT, L_DNS_TCP },
	{ AF_INET, SOCK_DGRAM, "127.0.0.1", PROXY_DNS_PORT, L_DNS_UDP },
	{ AF_INET6, SOCK_DGRAM, "::1", PROXY_DNS_PORT, L_DNS_UDP },
	{ AF_INET, SOCK_STREAM, "127.0.0.1", PROXY_TRANSPARENT_PORT, L_TRANSPARENT },
	{ AF_INET6, SOCK_STREAM, "::1", PROXY_TRANSPARENT_PORT, L_TRANSPARENT },
};

_Static_assert(sizeof(listen_specs) / sizeof(listen_specs[0]) == NSPECS,
	       "proxy_int.h's NSPECS counts listen_specs");

/*
 * Both legs of every connection send what they hold at once.  With Nagle
 * on, a small write that follows one not yet acknowledged (a TLS Finished
 * then the request, a response's head then its body) waits for the peer's
 * delayed ACK, 40 ms on Linux, on each leg.  The endpoints already chose
 * how to segment their bytes; a relay passes them on as they come.
 * Best effort: a socket that refuses it still works, only slower.
 */
static void conn_nodelay(int fd)
{
	int one = 1;

	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/*
 * What a connection's two sockets may hold is the host's kernel memory,
 * charged to no cgroup of the sandbox's.  Left to autotuning, a peer that
 * reads fast and then stops leaves a socket holding up to tcp_rmem's and
 * tcp_wmem's maximum behind a full pipe: 100 tunnels that never drained
 * held 1.4 GiB, 14 MiB each.  The receive buffer is fixed (autotuning
 * overrides TCP_WINDOW_CLAMP, so only SO_RCVBUF bounds it): 4 MiB on the
 * sandbox's side, loopback, 8 MiB on the upstream's (the kernel doubles
 * what is asked).  What waits to be sent is left to tcp_wmem's maximum:
 * TCP_NOTSENT_LOWAT, and smaller receive buffers, cost downloads a
 * quarter to a third of bench/proxy.py's throughput here.  With the
 * relay's two 256 KiB pipes a tunnel that never drains holds about
 * 20 MiB (27 unbounded); limits.connections is what bounds a sandbox's
 * whole.  Best effort: a socket that refuses them still works, only
 * unbounded.
 */
static void conn_sock_bound(int fd, int rcvbuf)
{
	if (rcvbuf && setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)) < 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
}

/*
 * Without CAP_NET_ADMIN, SO_RCVBUF is cut to net.core.rmem_max (208 KiB
 * by default): a buffer that small would halve what a tunnel moves, so
 * then it is left to autotuning (0), unbounded as it was.
 */
static int rcvbuf_wanted(int want)
{
	unsigned long long max = 0;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), r;
	FILE *f;

	if (fd < 0)
		return 0;
	r = setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &want, sizeof(want));
	close(fd);
	if (r == 0)
		return want;
	f = fopen("/proc/sys/net/core/rmem_max", "re");
	if (!f)
		return 0;
	if (fscanf(f, "%llu", &max) != 1)
		max = 0;
	fclose(f);
	return max >= (unsigned long long)want ? want : 0;
}

/*
 * A bufferevent moves 16 KiB a wakeup by default (libevent 2.1): a body
 * relayed through user space (plain HTTP, terminated TLS) then costs a trip
 * through the loop each 16 KiB on each side.  The read high-water marks
 * still bound what we hold.
 */
void conn_bev_tune(struct bufferevent *bev)
{
	bufferevent_set_max_single_read(bev, BEV_SINGLE_MAX);
	bufferevent_set_max_single_write(bev, BEV_SINGLE_MAX);
}

/* ---- listeners, made inside the sandbox's netns -------------------------- */

static int bind_spec(const struct listen_spec *sp)
{
	struct sockaddr_storage ss = { 0 };
	socklen_t len;
	int fd, one = 1;

	if (sp->family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)&ss;

		sin->sin_family = AF_INET;
		sin->sin_port = htons(sp->port);
		inet_pton(AF_INET, sp->addr, &sin->sin_addr);
		len = sizeof(*sin);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;

		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(sp->port);
		inet_pton(AF_INET6, sp->addr, &sin6->sin6_addr);
		len = sizeof(*sin6);
	}
	fd = socket(sp->family, sp->type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (sp->family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, len) < 0 ||
	    (sp->type == SOCK_STREAM && listen(fd, SOMAXCONN) < 0)) {
		int e = -errno;

		close(fd);
		return e;
	}
	return fd;
}

/*
 * Bigger packets on the sandbox's loopback (IPv4 BIG TCP, Linux 6.3): the
 * sandbox's side of every tunnel is TCP over this lo, and its cost for the
 * client and for us is per packet more than per byte; 64 KiB packets made
 * the relay's share of the CPU about what an endpoint's is.  With 256 KiB
 * a tunnel moved 256 MiB 15-30% faster (measured on a shared 2-core host).
 * Only this netns's lo changes: the upstream's side is the host's.  Older
 * kernels do not know the attributes and refuse them: nothing changes.
 */
#ifndef IFLA_GSO_IPV4_MAX_SIZE
#define IFLA_GSO_IPV4_MAX_SIZE	63
#define IFLA_GRO_IPV4_MAX_SIZE	64
#endif
#define LO_GSO_SIZE		(256 << 10)

static void lo_big_packets(void)
{
	struct {
		struct nlmsghdr nh;
		struct ifinfomsg ifi;
		char attrs[2 * RTA_SPACE(sizeof(uint32_t))];
	} req = { 0 };
	const unsigned short types[2] = { IFLA_GSO_IPV4_MAX_SIZE, IFLA_GRO_IPV4_MAX_SIZE };

	req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct ifinfomsg));
	req.nh.nlmsg_type = RTM_NEWLINK;
	req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	req.ifi.ifi_family = AF_UNSPEC;
	req.ifi.ifi_index = (int)if_nametoindex("lo");
	for (size_t i = 0; i < 2; i++) {
		struct rtattr *rta = (struct rtattr *)((char *)&req + NLMSG_ALIGN(req.nh.nlmsg_len));
		uint32_t v = LO_GSO_SIZE;

		rta->rta_type = types[i];
		rta->rta_len = RTA_LENGTH(sizeof(v));
		memcpy(RTA_DATA(rta), &v, sizeof(v));
		req.nh.nlmsg_len = NLMSG_ALIGN(req.nh.nlmsg_len) + RTA_ALIGN(rta->rta_len);
	}
	/* best effort: the answer (an error on an older kernel) changes nothing */
	if (req.ifi.ifi_index > 0)
		(void)net_rtnl_ask(&req.nh);
}

/* What init sends the supervisor, with the sockets as SCM_RIGHTS. */
struct listeners_msg {
	int codes[NSPECS];	/* 0: a socket follows; < 0: -errno */
	int diag;		/* 1: a sock_diag socket follows the listeners */
	int nflog;		/* 1: an nfnetlink_log socket follows it; else 0 or -errno */
	int setup;		/* lo, its address, transparent mode: 0 or -errno */
	char why[256];		/* if setup failed */
	char nflog_why[128];	/* if nflog < 0 */
	uint64_t netns;		/* the inode of init's netns (peer.c's filter) */
};

/*
 * Transparent mode: UDP and ICMP off loopback logged before they are
 * dropped (nflog.c).  The socket first, so that the rule has a reader
 * when it loads.  A kernel without nfnetlink_log refuses one or the
 * other: the run goes on as before, without those events (m->nflog says
 * why; corral doctor tries the same).
 */
static int open_nflog(struct listeners_msg *m)
{
	int fd = nflog_open(NFLOG_GROUP, m->nflog_why, sizeof(m->nflog_why));
	int r;

	if (fd < 0) {
		m->nflog = fd;
		return -1;
	}
	r = nft_log_rules(NFLOG_GROUP, m->nflog_why, sizeof(m->nflog_why));
	if (r < 0) {
		close(fd);
		m->nflog = r;
		return -1;
	}
	m->nflog = 1;
	return fd;
}

/*
 * Conntrack keeps a closed flow through its TIME_WAIT (10 s here, net.c),
 * about 400 bytes each: 4 new flows a second for each connection the
 * proxy may hold, 1024 a second by default (TCP and DNS, IPv4 and IPv6,
 * each a rate of its own), bounds a flood to about 10,000 entries each,
 * 4 MB, 16 MB for all four (it held 67 MB under --memory 32M before
 * anything bounded it), and leaves an agent far more than it opens.  A
 * flow the proxy closed and the sandbox keeps open stays in CLOSE_WAIT,
 * 60 s (the kernel's): six times that, for a sandbox that holds the fds
 * (SECURITY.md).
 */
static uint32_t new_flows(uint64_t connections)
{
	uint64_t n = connections * PROXY_NEW_FLOWS_PER_CONN;

	if (n < PROXY_NEW_FLOWS_MIN)
		return PROXY_NEW_FLOWS_MIN;
	return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

int proxy_listeners_send(int sock, bool transparent, uint64_t connections)
{
	struct listeners_msg m = { 0 };
	int fds[NSPECS + 2], nfd = 0, fd;
	struct stat st;
	ssize_t sent;

	/*
	 * The netns's inode from here: once we are not dumpable, an
	 * unprivileged supervisor cannot stat our /proc/PID/ns/net.
	 */
	if (stat("/proc/self/ns/net", &st) == 0)
		m.netns = st.st_ino;
	m.setup = net_lo_up();
	if (m.setup < 0) {
		snprintf(m.why, sizeof(m.why), "cannot bring lo up: %s", strerror(-m.setup));
		goto send;
	}
	lo_big_packets();
	for (size_t i = 0; i < NSPECS; i++) {
		fd = bind_spec(&listen_specs[i]);
		m.codes[i] = fd < 0 ? fd : 0;
		if (fd >= 0)
			fds[nfd++] = fd;
	}
	/* to learn which process holds the other end of a connection */
	fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (fd >= 0) {
		fds[nfd++] = fd;
		m.diag = 1;
	}
	/* name lookups with AI_ADDRCONFIG need an IPv4 address to exist */
	m.setup = net_add_lo_address(m.why, sizeof(m.why));
	if (transparent && m.setup == 0)
		m.setup = net_transparent_setup(PROXY_TRANSPARENT_PORT, PROXY_DNS_PORT,
						new_flows(connections),
						m.why, sizeof(m.why));
	/* the last socket: the supervisor takes it from the end */
	if (transparent && m.setup == 0 && (fd = open_nflog(&m)) >= 0)
		fds[nfd++] = fd;
send:
	sent = fd_send(sock, &m, sizeof(m), fds, (size_t)nfd, MSG_NOSIGNAL);
	/* the supervisor's now: nothing that runs here later may hold one */
	while (nfd)
		close(fds[--nfd]);
	return sent == sizeof(m) ? 0 : -EPIPE;
}

/*
 * init's message: its sockets into fds (-1: none), px->diag, px->nflog.fd.  EOF:
 * init failed before it could send (its why comes on the control socket).
 */
static int listeners_recv(struct proxy *px, int sync, int fds[NSPECS],
			  struct corral_err *err)
{
	struct listeners_msg m;
	int got[NSPECS + 2], r = 0;
	size_t n = 0, j = 0;
	ssize_t len;

	for (size_t i = 0; i < NSPECS; i++)
		fds[i] = -1;
	len = fd_recv(sync, &m, sizeof(m), got, NSPECS + 2, &n, MSG_WAITALL);
	if (len != sizeof(m)) {
		while (n)
			close(got[--n]);
		if (len < 0)
			return corral_set_err(err, (int)len, "cannot receive the "
					      "sandbox's listeners: %s", strerror((int)-len));
		return corral_set_err(err, -EPIPE, "the sandbox's init ended before "
				      "its network namespace was made");
	}
	m.why[sizeof(m.why) - 1] = '\0';
	px->netns_ino = (ino_t)m.netns;
	if (m.setup < 0)
		r = corral_set_err(err, m.setup, "network setup: %s", m.why);
	if (m.nflog == 1 && n > 0)
		px->nflog.fd = got[--n];
	if (m.diag == 1 && n > 0)
		px->diag = got[--n];
	for (size_t i = 0; i < NSPECS; i++) {
		if (m.codes[i] == 0 && j < n)
			fds[i] = got[j++];
		else if (listen_specs[i].family == AF_INET && r == 0)
			r = corral_set_errno(err, m.codes[i] ? -m.codes[i] : EIO,
					     "cannot listen on %s:%u in the sandbox",
					     listen_specs[i].addr, listen_specs[i].port);
	}
	while (j < n)
		close(got[j++]);
	if (r < 0) {
		for (size_t i = 0; i < NSPECS; i++)
			if (fds[i] >= 0)
				close(fds[i]);
	}
	return r;
}

/* o[key] = v, v taken; false (v dropped) if there is no v or no room */
static bool put(json_t *o, const char *key, json_t *v)
{
	return v && json_object_set_new_nocheck(o, key, v) == 0;
}

/*
 * What every event of a connection starts with, as json_pack made it
 * (NULL if any part is missing), without its format parsing: two of
 * these a connection, and parsing was half of what each cost.
 */
static json_t *conn_base(const struct conn *c)
{
	json_t *o = json_object();

	if (o && put(o, "protocol", json_string(c->proto)) &&
	    put(o, "host", json_string(c->host)) && put(o, "port", json_integer(c->port)))
		return o;
	json_decref(o);
	return NULL;
}

static json_t *closed_fields(const struct conn *c)
{
	json_t *o = conn_base(c);

	if (o && c->halted && !put(o, "reason", json_string("reset by the halt: "
		"what the sandbox had sent and was not yet passed on was dropped"))) {
		json_decref(o);
		return NULL;
	}
	/* the one place a tunnel's client (TLS already begun) could learn it */
	if (o && c->unresolved && !put(o, "reason", corral_json_bytes(c->unresolved,
				       strlen(c->unresolved)))) {
		json_decref(o);
		return NULL;
	}
	if (o && put(o, "bytes_up", json_integer((json_int_t)c->bytes_up)) &&
	    put(o, "bytes_down", json_integer((json_int_t)c->bytes_down)) &&
	    put(o, "duration_ms", json_integer((json_int_t)(corral_now_ms() - c->t0_ms))) &&
	    (!c->masked || put(o, "masked", json_integer((json_int_t)c->masked))))
		return o;
	json_decref(o);
	return NULL;
}

static void note_guesses(struct conn *c);

void conn_free(struct conn *c)
{
	struct proxy *px = c->px;
	uint64_t up, down;

	/*
	 * A spliced tunnel's bytes, counted here and not only when both its
	 * directions ended: one cut short (a halt, the sandbox's end) moved
	 * bytes too, and its egress.closed said 0.
	 */
	relay_counts(c->relay, &up, &down);
	c->bytes_up += up;
	c->bytes_down += down;
	if (c->allowed_logged)
		events_emit(px->ev, "egress.closed", closed_fields(c));
	if (c->gai)
		evdns_getaddrinfo_cancel(c->gai);
	if (c->wait)
		event_free(c->wait);
	relay_free(c->relay);
	/* a terminated connection's filter does not own its session and socket */
	if (c->down_tls)
		conn_tls_free_down(c);
	else if (c->down)
		bufferevent_free(c->down);
	if (c->raw)
		bufferevent_free(c->raw);
	if (c->up)
		bufferevent_free(c->up);
	if (c->first)
		evbuffer_free(c->first);
	httpreq_free(&c->hr);
	free(c->unresolved);
	secrets_scan_free(&c->scan);
	if (c->mask) {
		secrets_mask_abandon(c->mask);
		note_guesses(c);
		secrets_mask_free(c->mask);
		httpresp_free(&c->resp);
	}
	px->nconns--;
	if (c->prev)
		c->prev->next = c->next;
	else
		px->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	free(c);
}

static json_t *conn_fields(struct conn *c, const char *reason)
{
	json_t *o = conn_base(c);

	if (o && !put(o, "reason", json_string(reason))) {
		json_decref(o);
		o = NULL;
	}
	if (o && c->pid > 0)
		json_object_set_new(o, "pid", json_integer(c->pid));
	else if (o && c->pid_missing)
		json_object_set_new(o, "pid_missing", json_string(c->pid_missing));
	/* for attribution only: events.c turns it into "call" */
	if (o && c->cgid)
		json_object_set_new(o, EVENTS_KEY_CGROUP, json_integer(c->cgid));

	if (o && c->sni[0])
		json_object_set_new(o, "sni", json_string(c->sni));
	if (o && c->method[0])
		json_object_set_new(o, "method", json_string(c->method));
	return o;
}

void conn_ask_pid(struct conn *c)
{
	struct sockaddr_storage to;
	bool known;

	if (c->pid_asked)
		return;
	c->pid_asked = true;
	if (!peer_rate_take(&c->px->searches, corral_now_ms())) {
		c->pid_missing = PEER_MISSED_RATE;
		return;
	}
	/* where it connected: the one socket on its port that did */
	known = c->down && peer_dst(bufferevent_getfd(c->down), &to) == 0;
	c->pid = peer_pid(c->px->diag, c->px->netns_ino, (struct sockaddr *)&c->peer,
			  known ? (struct sockaddr *)&to : NULL, &c->cgid);
	c->pid_missing = peer_missed();
}

/* A denial names its process, hence its tool call: worth a /proc walk. */
static json_t *denied_fields(struct conn *c, const char *reason)
{
	conn_ask_pid(c);
	return conn_fields(c, reason);
}

static void close_after_flush(struct conn *c);

/* Close once what is queued for the sandbox has been written. */
static void on_flushed(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;

	if (evbuffer_get_length(bufferevent_get_output(bev)) != 0)
		return;
	if (c->raw) {
		/* all encrypted: the socket's own bufferevent flushes the rest */
		conn_untls_down(c);
		bufferevent_disable(c->down, EV_READ);
		bufferevent_setcb(c->down, NULL, on_flushed, NULL, c);
		on_flushed(c->down, c);
		return;
	}
	conn_free(c);
}

void conn_close_after_flush(struct conn *c)
{
	close_after_flush(c);
}

static void close_after_flush(struct conn *c)
{
	c->st = C_CLOSING;
	if (c->up) {
		bufferevent_free(c->up);
		c->up = NULL;
	}
	bufferevent_disable(c->down, EV_READ);
	bufferevent_setcb(c->down, NULL, on_flushed, NULL, c);
	on_flushed(c->down, c);
}

static void http_error(struct conn *c, int code, const char *status,
		       const char *reason)
{
	evbuffer_add_printf(bufferevent_get_output(c->down),
			    "HTTP/1.1 %d %s\r\n"
			    "X-Corral-Denied: %s\r\n"
			    "Content-Type: text/plain\r\n"
			    "Content-Length: %zu\r\n"
			    "Connection: close\r\n\r\n"
			    "corral: %s\n",
			    code, status, reason, strlen(reason) + 9, reason);
	close_after_flush(c);
}

/* Tell the sandbox no, in its protocol's words, and close. */
static void refuse(struct conn *c, uint8_t socks_rep, int code, const char *status,
		   const char *reason)
{
	/* once the tunnel is open, what refuses a request in it is HTTP */
	if (c->kind == L_SOCKS && !c->answered) {
		uint8_t out[SOCKS_REPLY_MAX];
		size_t n = socks_reply(out, socks_rep, NULL);

		bufferevent_write(c->down, out, n);
		close_after_flush(c);
		return;
	}
	if (c->sni[0] && !c->terminated) {	/* mid-TLS: plain text would be noise */
		conn_free(c);
		return;
	}
	http_error(c, code, status, reason);
}

void conn_deny(struct conn *c, const char *reason)
{
	events_emit(c->px->ev, "egress.denied", denied_fields(c, reason));
	refuse(c, SOCKS_REP_NOT_ALLOWED, 403, "Forbidden", reason);
}

void conn_deny_gone(struct conn *c, const char *reason)
{
	events_emit(c->px->ev, "egress.denied", denied_fields(c, reason));
	conn_free(c);
}

/* ---- relaying ------------------------------------------------------------- */

static void relay_read(struct bufferevent *from, void *arg);
static void relay_event(struct bufferevent *bev, short what, void *arg);

static void on_drained(struct bufferevent *to, void *arg)
{
	struct conn *c = arg;
	struct bufferevent *from = to == c->up ? c->down : c->up;

	/* the other side may read again; stop watching for low water */
	bufferevent_setcb(to, relay_read, NULL, relay_event, c);
	bufferevent_setwatermark(to, EV_WRITE, 0, 0);
	if (!from)
		return;
	bufferevent_enable(from, EV_READ);
	/* a request read but not yet passed on (http_from_down stopped) */
	if (evbuffer_get_length(bufferevent_get_input(from)))
		relay_read(from, c);
}

/*
 * Back-pressure: a slow reader must not grow the supervisor.  true: to
 * holds its fill, from is not read until on_drained.
 */
static bool backed_up(struct conn *c, struct bufferevent *from, struct bufferevent *to)
{
	if (evbuffer_get_length(bufferevent_get_output(to)) < RELAY_HIGH_WATER)
		return false;
	bufferevent_disable(from, EV_READ);
	bufferevent_setwatermark(to, EV_WRITE, RELAY_HIGH_WATER / 2, RELAY_HIGH_WATER);
	bufferevent_setcb(to, relay_read, on_drained, relay_event, c);
	return true;
}

static void http_from_down(struct conn *c);
static bool splice_tunnel(struct conn *c, int ufd);
static bool sni_check(struct conn *c, const struct sni_hello *hello);

/* A hello that cannot be read could hide any name: refused, recorded. */
static enum relay_verdict hello_unreadable(struct conn *c, const char *which)
{
	char why[CORRAL_ERR_MAX];

	snprintf(why, sizeof(why), "a TLS handshake to %.200s:%u whose %s is not a readable "
		 "ClientHello", c->host, c->port, which);
	events_emit(c->px->ev, "egress.denied", denied_fields(c, why));
	conn_free(c);
	return RELAY_JUDGE_GONE;
}

/*
 * The client's hello after the server's HelloRetryRequest: in clear too,
 * and the one the server goes on with, so judged as the first was, and it
 * must name what the first named (RFC 8446 4.1.2: the same hello but for
 * its key shares, cookie, early data and padding).
 */
static enum relay_verdict judge_retry(struct conn *c, const uint8_t *p, size_t n,
				      bool full)
{
	struct sni_hello hello;
	char why[CORRAL_ERR_MAX];
	int r;

	r = sni_parse_retry(p, n, &hello);
	if (r == -EAGAIN && !full)
		return RELAY_JUDGE_MORE;
	if (r < 0)
		return hello_unreadable(c, "second hello (after a HelloRetryRequest)");
	if (hello.has_sni != (c->sni[0] != '\0') ||
	    (hello.has_sni && strcasecmp(hello.host, c->sni))) {
		snprintf(why, sizeof(why), "a second TLS hello (after a HelloRetryRequest) "
			 "names %.200s, the first named %.200s", hello.has_sni ? hello.host :
			 "no host", c->sni[0] ? c->sni : "no host");
		events_emit(c->px->ev, "egress.denied", denied_fields(c, why));
		conn_free(c);
		return RELAY_JUDGE_GONE;
	}
	if (!sni_check(c, &hello))
		return RELAY_JUDGE_GONE;
	c->tls_phase = TLS_BLIND;
	return RELAY_JUDGE_PASS;
}

/*
 * The sandbox's first bytes on a tunnel that may carry TLS (CONNECT,
 * SOCKS5, transparent by a name): a handshake's SNI must name the host
 * judged.  Shown by the relay before any byte goes upstream.  A hello
 * that passes goes on alone, and the rest waits for the server's answer
 * (judge_server): a HelloRetryRequest has the client send a second hello
 * in clear, which is judged too; anything else, and the tunnel is blind
 * from there.  full: no more will come for it.  RELAY_JUDGE_GONE:
 * refused, recorded, c freed.
 */
static enum relay_verdict judge_first(void *arg, const uint8_t *p, size_t n, bool full,
				      size_t *pass)
{
	struct conn *c = arg;
	struct sni_hello hello;
	int r;

	switch (c->tls_phase) {
	case TLS_SERVER:
		return RELAY_JUDGE_MORE;	/* held until the server answered */
	case TLS_RETRY:
		return judge_retry(c, p, n, full);
	case TLS_BLIND:
		return RELAY_JUDGE_PASS;
	case TLS_HELLO:
		break;
	}
	if (p[0] != 0x16) {
		/* an SSLv2-format hello is TLS too, and names nothing */
		r = sni_v2_hello(p, n);
		if (r < 0 && !full)
			return RELAY_JUDGE_MORE;
		memset(&hello, 0, sizeof(hello));
		if (r == 1 && !sni_check(c, &hello))
			return RELAY_JUDGE_GONE;
		c->peek_tls = false;	/* not TLS: nothing to compare */
		return RELAY_JUDGE_PASS;
	}
	r = sni_parse_hello(p, n, &hello);
	if (r == -EAGAIN && !full)
		return RELAY_JUDGE_MORE;
	if (r < 0)
		return hello_unreadable(c, "first message");
	if (!sni_check(c, &hello))
		return RELAY_JUDGE_GONE;
	c->tls_phase = TLS_SERVER;
	*pass = hello.bytes;
	return RELAY_JUDGE_PEER;
}

/*
 * The server's first bytes, after the client's hello went up: they go on
 * once they tell whether the server asks for a second hello.
 */
static enum relay_verdict judge_server(void *arg, const uint8_t *p, size_t n, bool full,
				       size_t *pass)
{
	struct conn *c = arg;
	int r = sni_server_retries(p, n);

	(void)pass;
	if (r == -EAGAIN && !full)
		return RELAY_JUDGE_MORE;
	/* no retry (or no telling in SNI_READ_MAX bytes): nothing more in clear */
	c->tls_phase = r == 1 ? TLS_RETRY : TLS_BLIND;
	return RELAY_JUDGE_PASS;
}

/*
 * The upstream's answer to a WebSocket handshake, once its status line
 * shows: 101, and nothing after it is HTTP (c->upgraded); anything else,
 * and the sandbox's next request is read as ever.  The sandbox is read
 * again either way.  false: not enough of the answer yet.
 */
static bool ws_answered(struct conn *c)
{
	static const char sw[] = "HTTP/1.1 101";
	struct evbuffer *in = bufferevent_get_input(c->up);
	const unsigned char *p;

	/* "HTTP/1.x 101" and the space or CR after it */
	if (evbuffer_get_length(in) < sizeof(sw))
		return false;
	p = evbuffer_pullup(in, sizeof(sw));
	c->ws_wait = false;
	c->upgraded = p && !memcmp(p, sw, 7) && !memcmp(p + 8, sw + 8, 4) &&
		      (p[12] == ' ' || p[12] == '\r');
	bufferevent_enable(c->down, EV_READ);
	return true;
}

/*
 * libevent 2.1 reads a socket 4 KiB a call (EVBUFFER_MAX_READ), whatever
 * bufferevent_set_max_single_read says: a connection relayed on its
 * bufferevents (plain HTTP, a tunnel whose requests are read) cost a
 * wakeup and two syscalls each 4 KiB, and moved a fifth of what a spliced
 * tunnel does.  After the bufferevent's read, what else the socket holds
 * is taken into buf with one recv, up to the relay's high water.  end_frozen:
 * buf is a bufferevent's input, which it keeps frozen at the end but while
 * it reads (as read_now).  EOF and errors are left for the bufferevent's
 * next read to meet.  Returns the bytes taken.
 */
static size_t read_more(int fd, struct evbuffer *buf, bool end_frozen)
{
	size_t queued = evbuffer_get_length(buf);
	struct evbuffer_iovec v;
	ssize_t n = -1;

	if (fd < 0 || queued >= RELAY_HIGH_WATER)
		return 0;
	if (end_frozen)
		evbuffer_unfreeze(buf, 0);
	if (evbuffer_reserve_space(buf, BEV_SINGLE_MAX, &v, 1) == 1) {
		n = recv(fd, v.iov_base, v.iov_len, MSG_DONTWAIT);
		v.iov_len = n > 0 ? (size_t)n : 0;
		/* reserved space not committed adds nothing */
		if (n > 0 && evbuffer_commit_space(buf, &v, 1) < 0)
			n = -1;
	}
	if (end_frozen)
		evbuffer_freeze(buf, 0);
	return n > 0 ? (size_t)n : 0;
}

/*
 * An answer that cannot be read for the values it may show (a coding, not
 * HTTP): the messages before it go on, it does not.  Its head not yet
 * passed on, the sandbox gets a 502 that says why in its place.
 */
static void mask_cut(struct conn *c)
{
	struct evbuffer *in = bufferevent_get_input(c->up);
	char why[CORRAL_ERR_MAX];

	snprintf(why, sizeof(why), "a response from %.100s:%u that the proxy cannot read "
		 "for the secrets' values it may show (%s): cut off; requests with a "
		 "value ask for Accept-Encoding: identity", c->host, c->port, c->resp.why);
	events_emit(c->px->ev, "egress.denied", denied_fields(c, why));
	c->bytes_down += c->resp.start;
	evbuffer_remove_buffer(in, bufferevent_get_output(c->down), c->resp.start);
	evbuffer_drain(in, evbuffer_get_length(in));
	if (c->resp.head_refused)
		http_error(c, 502, "Bad Gateway", why);
	else
		close_after_flush(c);
}

/*
 * Holds of a value's start that went on unmasked or were left by a closed
 * connection, the sandbox's whole count: each one told the agent, by the
 * hold's delay, that its echoed guess began a value, so each is one more
 * character of it learned (a wrong guess holds nothing and costs nothing).
 * Past GUESSES_MAX no request goes to a host a secret goes to (guessed()):
 * an agent learns at most the 7 bytes a hold too short to count shows and
 * GUESSES_MAX more, of a value of 20 to 200.
 */
#define GUESSES_MAX	8

static void note_guesses(struct conn *c)
{
	size_t n = secrets_mask_take_guesses(c->mask);
	char why[CORRAL_ERR_MAX];

	if (!n || c->px->guesses >= GUESSES_MAX)
		return;
	c->px->guesses += n;
	if (c->px->guesses < GUESSES_MAX)
		return;
	snprintf(why, sizeof(why), "answers from %.100s:%u held a secret's first bytes, which "
		 "went no further, %d times: a guess at its value by the hold's delay, a "
		 "character at a time; no more requests go to a host a secret goes to",
		 c->host, c->port, GUESSES_MAX);
	events_emit(c->px->ev, "egress.denied", denied_fields(c, why));
}

/* count values masked on c's answers; the first said once a connection */
static void note_masked(struct conn *c, size_t masked)
{
	json_t *o;

	if (!masked)
		return;
	c->masked += masked;
	if (c->mask_said)
		return;
	o = conn_fields(c, "a response showed a secret's value (raw or encoded): masked, "
			"byte for byte, before the sandbox read it");
	c->mask_said = true;
	if (o)
		json_object_set_new(o, "secrets", secrets_mask_names(c->mask));
	events_emit(c->px->ev, "egress.masked", o);
}

/*
 * An answer with no body (a HEAD's, a 204, a 304) ends buf[0, rel): what
 * the upstream sends after it cannot be told from a body it should not
 * have sent (httpresp.h), so nothing more is read.  It goes on saying
 * Connection: close, so that the sandbox's client asks its next request
 * on a new connection rather than on this one, closed.
 */
static void last_answer(struct conn *c, const char *buf, size_t rel)
{
	struct evbuffer *in = bufferevent_get_input(c->up);
	struct evbuffer *out = bufferevent_get_output(c->down);
	static const char close_head[] = "Connection: close\r\n\r\n";
	size_t keep = rel >= 4 && !memcmp(buf + rel - 4, "\r\n\r\n", 4) ? rel - 2 : rel;

	c->bytes_down += rel;
	evbuffer_remove_buffer(in, out, keep);
	if (keep < rel)
		evbuffer_add(out, close_head, sizeof(close_head) - 1);
	close_after_flush(c);
}

/*
 * What a host that secrets go to answers, on its way to the sandbox: each
 * message framed (httpresp.c), each value's forms in its content masked
 * (secrets.c), and a tail that may be the start of one held back until
 * what follows shows it is not, or its message ends (eof: all goes).
 * false: c is gone or closing.
 */
static bool mask_relay(struct conn *c, bool eof)
{
	struct evbuffer *in = bufferevent_get_input(c->up);
	size_t len = evbuffer_get_length(in), rel;
	ssize_t masked;
	char *buf;

	if (!len)
		return true;
	buf = (char *)evbuffer_pullup(in, len);
	if (!buf) {
		snprintf(c->resp.why, sizeof(c->resp.why), "no memory to read it");
		mask_cut(c);
		return false;
	}
	if (httpresp_feed(&c->resp, buf, len) < 0) {
		/*
		 * The whole messages before the one refused go on (mask_cut),
		 * masked as any: one read can hold a pipelined echo and,
		 * behind it, an answer the proxy cannot read.
		 */
		masked = secrets_mask_answer(c->mask, &c->resp, buf, c->resp.start, true, &rel);
		if (masked < 0)
			c->resp.start = 0;
		else
			note_masked(c, masked);
		mask_cut(c);
		return false;
	}
	masked = secrets_mask_answer(c->mask, &c->resp, buf, len, eof, &rel);
	if (masked < 0) {
		snprintf(c->resp.why, sizeof(c->resp.why), "no memory to read it");
		mask_cut(c);
		return false;
	}
	note_masked(c, masked);
	note_guesses(c);
	if (c->resp.ended) {
		last_answer(c, buf, rel);
		return false;
	}
	c->bytes_down += rel;
	evbuffer_remove_buffer(in, bufferevent_get_output(c->down), rel);
	httpresp_release(&c->resp, rel);
	backed_up(c, c->up, c->down);
	return true;
}

/* the last answer ended: the sandbox's next request is read (http_from_down) */
static void resume_requests(struct conn *c)
{
	if (!httpresp_idle(&c->resp) || c->st != C_RELAY || !httpreq_idle(&c->hr))
		return;
	bufferevent_enable(c->down, EV_READ);
	if (evbuffer_get_length(bufferevent_get_input(c->down)))
		http_from_down(c);
}

static void relay_read(struct bufferevent *from, void *arg)
{
	struct conn *c = arg;
	struct bufferevent *to = from == c->down ? c->up : c->down;
	bool answered = false;

	/* nothing of the sandbox's goes up before the upstream said 101 or not */
	if (from == c->down && c->ws_wait) {
		bufferevent_disable(c->down, EV_READ);
		return;
	}
	/* Plain HTTP, terminated TLS, a read tunnel: every request is judged. */
	if (from == c->down && !c->upgraded &&
	    (c->terminated || c->parsed || (c->kind == L_HTTP && !strcmp(c->proto, "http")))) {
		/* a TLS filter's socket holds ciphertext: only a plain one is read so */
		if (!c->terminated)
			read_more(bufferevent_getfd(from), bufferevent_get_input(from), true);
		http_from_down(c);
		return;
	}
	if (from == c->up && c->ws_wait) {
		if (!ws_answered(c))
			return;
		/* switched: a tunnel to the host judged, the kernel's from here */
		if (c->upgraded && !c->terminated &&
		    splice_tunnel(c, bufferevent_getfd(c->up)))
			return;
		answered = true;
	}
	if (from == c->up && c->mask) {
		if (mask_relay(c, false))
			resume_requests(c);
		return;
	}
	struct evbuffer *in = bufferevent_get_input(from);
	size_t n = evbuffer_get_length(in);

	if (!to) {
		evbuffer_drain(in, n);
		return;
	}
	if (from == c->down)
		c->bytes_up += n;
	else
		c->bytes_down += n;
	evbuffer_add_buffer(bufferevent_get_output(to), in);
	if (from == c->up && !c->terminated)
		c->bytes_down += read_more(bufferevent_getfd(from), bufferevent_get_output(to), false);
	backed_up(c, from, to);
	/* what the sandbox sent while the handshake's answer was awaited */
	if (answered && evbuffer_get_length(bufferevent_get_input(c->down)))
		relay_read(c->down, c);
}

/* c->up's queue went out after the sandbox's end: the upstream sees it too */
static void on_up_sent(struct bufferevent *up, void *arg)
{
	struct conn *c = arg;

	if (evbuffer_get_length(bufferevent_get_output(up)))
		return;
	bufferevent_setcb(up, relay_read, NULL, relay_event, c);
	(void)shutdown(bufferevent_getfd(up), SHUT_WR);
}

static void relay_event(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;
	struct bufferevent *other = bev == c->down ? c->up : c->down;

	if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)))
		return;
	/*
	 * The sandbox ended its sending side (shutdown: an HTTP/1.0 client's
	 * way) of a connection on bufferevents: what it sent goes on, then the
	 * upstream sees the end, and its answer still comes back (its EOF
	 * closes, below), as a spliced tunnel's does in relay.c.  Not under
	 * TLS we terminate: its end is a close_notify, not a FIN.
	 */
	if (bev == c->down && !(what & (BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)) &&
	    c->up && !c->terminated) {
		bufferevent_setwatermark(c->up, EV_WRITE, 0, 0);
		bufferevent_setcb(c->up, relay_read, on_up_sent, relay_event, c);
		on_up_sent(c->up, c);
		return;
	}
	if (bev == c->up && (what & BEV_EVENT_EOF) && other) {
		/* forward what is left, then close the sandbox's side */
		c->ws_wait = false;
		if (c->mask) {
			if (!mask_relay(c, true))
				return;
		} else {
			relay_read(bev, c);
		}
		bufferevent_free(c->up);
		c->up = NULL;
		close_after_flush(c);
		return;
	}
	conn_free(c);
}

/* up, down: conn_free counts them, as it does for a tunnel cut short */
static void on_relay_done(void *arg, uint64_t up, uint64_t down)
{
	(void)up;
	(void)down;
	conn_free(arg);
}

/* Bytes that would go upstream before anything the relay reads itself. */
static bool up_pending(struct conn *c)
{
	return (c->first && evbuffer_get_length(c->first)) ||
	       evbuffer_get_length(bufferevent_get_input(c->down)) ||
	       (c->up && evbuffer_get_length(bufferevent_get_output(c->up)));
}

/*
 * Hand a judged tunnel to the kernel: what the bufferevents hold goes
 * first, then splice(2) moves the rest; with c->peek_tls the sandbox's
 * first bytes (those held too) go to judge_first on the way.  The
 * relay takes the sockets themselves (ufd: the upstream's, on c->up or
 * none yet): its events are added before the bufferevents let go of them
 * (bufferevent_setfd -1, so that freeing them closes nothing), which
 * leaves each socket registered with epoll throughout.
 * false: nothing changed, the connection stays on its bufferevents.
 */
static bool splice_tunnel(struct conn *c, int ufd)
{
	static const struct relay_judges tls_judges = {
		.first = judge_first, .peer = judge_server, .max = SNI_READ_MAX,
	};
	struct evbuffer *to_up = NULL, *to_down = NULL;
	struct evbuffer *up_out = c->up ? bufferevent_get_output(c->up) : NULL;
	struct evbuffer *up_in = c->up ? bufferevent_get_input(c->up) : NULL;
	struct evbuffer *down_in = bufferevent_get_input(c->down);
	struct evbuffer *down_out = bufferevent_get_output(c->down);
	int dfd = bufferevent_getfd(c->down);
	bool ok = false;

	/* most new tunnels hold nothing yet: no buffers made for nothing */
	if (up_pending(c) && !(to_up = evbuffer_new()))
		goto out;
	if ((evbuffer_get_length(down_out) || (up_in && evbuffer_get_length(up_in))) &&
	    !(to_down = evbuffer_new()))
		goto out;
	/*
	 * The relay counts every byte it sends, to_up's too: those on up_out
	 * were counted as they were queued there, and are not counted again.
	 */
	if (up_out)
		c->bytes_up -= evbuffer_get_length(up_out);
	/* a bufferevent freezes its output's start: thaw it to take the bytes */
	if (up_out)
		evbuffer_unfreeze(up_out, 1);
	evbuffer_unfreeze(down_out, 1);
	if ((to_up && ((up_out && evbuffer_add_buffer(to_up, up_out) < 0) ||
		       (c->first && evbuffer_add_buffer(to_up, c->first) < 0) ||
		       evbuffer_add_buffer(to_up, down_in) < 0)) ||
	    (to_down && (evbuffer_add_buffer(to_down, down_out) < 0 ||
			 (up_in && evbuffer_add_buffer(to_down, up_in) < 0)))) {
		conn_free(c);
		ok = true;
		goto out;
	}
	c->relay = relay_start(c->px->base, dfd, ufd, to_up, to_down,
			       c->peek_tls ? &tls_judges : NULL, on_relay_done, c);
	/* the relay owns the sockets now, even when it failed (it closed them) */
	bufferevent_setfd(c->down, -1);
	bufferevent_free(c->down);
	if (c->up) {
		bufferevent_setfd(c->up, -1);
		bufferevent_free(c->up);
	}
	c->down = c->up = NULL;
	if (!c->relay)
		conn_free(c);
	ok = true;
out:
	if (to_up)
		evbuffer_free(to_up);
	if (to_down)
		evbuffer_free(to_down);
	return ok;
}

/*
 * A short answer to the sandbox (CONNECT's 200, a SOCKS reply) goes out at
 * once when nothing is queued before it, instead of after a wait for
 * EPOLLOUT: the client is waiting for it to say anything more.  What the
 * socket does not take, or an error, is left to the bufferevent.
 */
static void down_answer(struct conn *c, const void *p, size_t n)
{
	ssize_t k = 0;

	if (!c->raw && evbuffer_get_length(bufferevent_get_output(c->down)) == 0) {
		k = send(bufferevent_getfd(c->down), p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (k < 0)
			k = 0;
	}
	if ((size_t)k < n)
		bufferevent_write(c->down, (const char *)p + k, n - k);
}

/* Enable what is not yet: enabling EV_WRITE again costs a wakeup for nothing. */
static void bev_enable(struct bufferevent *bev, short what)
{
	short missing = what & ~bufferevent_get_enabled(bev);

	if (missing)
		bufferevent_enable(bev, missing);
}

/*
 * The upstream's bufferevent, made only now for a connection that did not
 * go to the kernel after all.  false: there is none, and the client has
 * its 502.
 */
static bool upstream_bev(struct conn *c, int ufd)
{
	c->up = bufferevent_socket_new(c->px->base, ufd,
				       BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	if (!c->up) {
		close(ufd);
		http_error(c, 502, "Bad Gateway", "out of memory");
		return false;
	}
	conn_bev_tune(c->up);
	return true;
}

/* ufd: the connected upstream's socket, on c->up or (none yet) bare */
static void start_relay(struct conn *c, int ufd)
{
	c->st = C_RELAY;
	/*
	 * A tunnel with nothing left to inspect but, maybe, its TLS handshake
	 * (the relay shows it to judge_first): the kernel moves it.  Only the
	 * relay judges a handshake past its first hello: without one (no
	 * memory) the tunnel ends.
	 */
	if (strcmp(c->proto, "http") && !c->terminated && !c->parsed &&
	    splice_tunnel(c, ufd))
		return;
	if (c->peek_tls) {
		if (!c->up)
			close(ufd);
		conn_free(c);
		return;
	}
	if (!c->up && !upstream_bev(c, ufd))
		return;
	/* the judged first bytes: counted here, the relay counts its own */
	if (c->first) {
		c->bytes_up += evbuffer_get_length(c->first);
		bufferevent_write_buffer(c->up, c->first);
	}
	bufferevent_setwatermark(c->down, EV_READ, 0, 0);
	bufferevent_setcb(c->down, relay_read, NULL, relay_event, c);
	bufferevent_setcb(c->up, relay_read, NULL, relay_event, c);
	bev_enable(c->down, EV_READ | EV_WRITE);
	bev_enable(c->up, EV_READ | EV_WRITE);
	/* bytes the sandbox sent after its request head */
	if (evbuffer_get_length(bufferevent_get_input(c->down)))
		relay_read(c->down, c);
}

/* ---- resolving and connecting -------------------------------------------- */

static void on_upstream_event(struct bufferevent *bev, short what, void *arg);
static void upstream_ready(struct conn *c, int ufd);

/*
 * The upstream connect goes on in the loop (a name to resolve, a TLS
 * handshake, a handshake not done inside connect()): a connection whose
 * client must not be read meanwhile (c->hold) stops reading now.  One whose
 * connect completed at once never stops: disabling and enabling again
 * would cost two epoll_ctl calls for nothing, no callback can run between.
 */
static void hold_down(struct conn *c)
{
	if (c->hold)
		bufferevent_disable(c->down, EV_READ);
}

/*
 * Start a connection to sa: a socket, non-blocking, already TCP_NODELAY.
 * *done: it is up already (a loopback or nearby upstream often is once
 * connect() returns, its handshake run in that call), so nothing need wait
 * for the loop to say it is writable.  Returns the socket or -errno.
 */
static int dial(const struct proxy *px, const struct sockaddr *sa, socklen_t len,
		bool *done)
{
	struct pollfd pfd;
	int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	*done = false;
	if (fd < 0)
		return -errno;
	conn_nodelay(fd);
	conn_sock_bound(fd, px->up_rcvbuf);
	if (connect(fd, sa, len) == 0) {
		*done = true;
		return fd;
	}
	if (errno != EINPROGRESS) {
		int e = -errno;

		close(fd);
		return e;
	}
	/* only a clean POLLOUT: an error is left to the loop to report */
	pfd = (struct pollfd){ .fd = fd, .events = POLLOUT };
	*done = poll(&pfd, 1, 0) == 1 && pfd.revents == POLLOUT;
	return fd;
}

/* An upstream connect that failed before the loop saw it: 502. */
static void connect_failed(struct conn *c, int e)
{
	char why[CORRAL_ERR_MAX];

	snprintf(why, sizeof(why), "cannot connect to %s:%u: %s", c->host, c->port,
		 strerror(e));
	http_error(c, 502, "Bad Gateway", why);
}

/* c->up's callbacks and buffers, before its connect completes. */
static void upstream_setup(struct conn *c)
{
	conn_bev_tune(c->up);
	bufferevent_setcb(c->up, NULL, NULL, on_upstream_event, c);
	c->st = C_CONNECT;
}

/*
 * The loop watches c->up's connect (sa: starts it; NULL: it is under way),
 * with a limit on how long it takes, the client held meanwhile.  False if
 * it could not (the client has its 502).
 */
static bool await_upstream(struct conn *c, const struct sockaddr *sa, socklen_t len)
{
	struct timeval tv = { CONNECT_TIMEOUT_S, 0 };

	bufferevent_set_timeouts(c->up, NULL, &tv);
	hold_down(c);
	if (bufferevent_socket_connect(c->up, sa, len) == 0)
		return true;
	connect_failed(c, errno);
	return false;
}

/*
 * The upstream of a connection we do not terminate: relayed at once if the
 * connection is already up, else once the loop sees it complete (or fail,
 * or time out).
 */
static void connect_plain(struct conn *c, const struct sockaddr *sa, socklen_t len)
{
	char why[CORRAL_ERR_MAX];
	bool done;
	int fd = dial(c->px, sa, len, &done);

	if (fd < 0) {
		snprintf(why, sizeof(why), "cannot connect to %s:%u: %s", c->host,
			 c->port, strerror(-fd));
		refuse(c, SOCKS_REP_REFUSED, 502, "Bad Gateway", why);
		return;
	}
	/*
	 * Up already: a tunnel goes to the kernel with the bare socket, and
	 * only a connection that stays in user space gets a bufferevent
	 * (start_relay): a bufferevent made and freed for nothing cost
	 * instructions, and its first read of the sandbox an ioctl(FIONREAD).
	 */
	if (done) {
		upstream_ready(c, fd);
		return;
	}
	c->up = bufferevent_socket_new(c->px->base, fd,
				       BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	if (!c->up) {
		close(fd);
		http_error(c, 502, "Bad Gateway", "out of memory");
		return;
	}
	upstream_setup(c);
	await_upstream(c, NULL, 0);
}

static void connect_upstream(struct conn *c, const struct sockaddr *sa,
			     socklen_t len)
{
	struct egress_verdict v;
	char why[CORRAL_ERR_MAX];

	if (egress_check_addr(c->px->rules, c->host, sa, &v) < 0 || !v.allowed) {
		conn_deny(c, v.reason);
		return;
	}
	if (!c->terminated) {
		connect_plain(c, sa, len);
		return;
	}
	c->up = conn_tls_upstream(c, why, sizeof(why));
	if (!c->up) {
		http_error(c, 502, "Bad Gateway", why);
		return;
	}
	upstream_setup(c);
	if (await_upstream(c, sa, len)) {
		conn_nodelay(bufferevent_getfd(c->up));
		conn_sock_bound(bufferevent_getfd(c->up), c->px->up_rcvbuf);
	}
}

static void on_upstream_event(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;
	char why[CORRAL_ERR_MAX];

	(void)bev;
	if (what & BEV_EVENT_CONNECTED) {
		bufferevent_set_timeouts(c->up, NULL, NULL);
		upstream_ready(c, bufferevent_getfd(c->up));
		return;
	}
	snprintf(why, sizeof(why), "cannot connect to %s:%u: %s", c->host, c->port,
		 what & BEV_EVENT_TIMEOUT ? "timed out" :
		 evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
	/* a certificate that does not verify: refused, and said so */
	if (c->terminated && !(what & BEV_EVENT_TIMEOUT) &&
	    conn_tls_upstream_error(c, why, sizeof(why)))
		events_emit(c->px->ev, "egress.denied", denied_fields(c, why));
	bufferevent_free(c->up);
	c->up = NULL;
	refuse(c, SOCKS_REP_REFUSED, 502, "Bad Gateway", why);
}

static void on_resolved(int result, struct evutil_addrinfo *res, void *arg)
{
	struct conn *c = arg;
	char why[1024];		/* the name twice, and what to do */

	/*
	 * Cancelled by conn_free: libevent says so later, from the loop, when
	 * c is gone already.  Nothing of it may be touched.
	 */
	if (result == EVUTIL_EAI_CANCEL) {
		if (res)
			evutil_freeaddrinfo(res);
		return;
	}
	c->gai = NULL;
	if (result != 0 || !res) {
		/*
		 * Allowed, and nowhere to go: a name that only the user's
		 * world knows (a test's, a private network's) is given an
		 * address in the policy, which is what to say.
		 */
		snprintf(why, sizeof(why), "cannot resolve %s: %s (asked %s); "
			 "to give it an address, map it in the policy's "
			 "network.hosts: {\"%s\": \"ADDRESS\"}", c->host,
			 evutil_gai_strerror(result), c->px->resolver, c->host);
		if (res)
			evutil_freeaddrinfo(res);
		c->unresolved = strdup(why);
		/* in the sandbox's protocol: a SOCKS client reads no HTTP */
		refuse(c, SOCKS_REP_HOST_UNREACHABLE, 502, "Bad Gateway", why);
		return;
	}
	connect_upstream(c, res->ai_addr, res->ai_addrlen);
	evutil_freeaddrinfo(res);
}

/* The name was allowed: find its address (hosts map, or the host's DNS). */
/*
 * A judged connection whose first bytes (a ClientHello) were read to judge
 * it: they go upstream first, once connected, through the relay's judge;
 * the client is not read while the connect goes on in the loop (hold_down).
 */
void conn_connect_with(struct conn *c, struct evbuffer *in)
{
	/*
	 * A ClientHello judged: the relay shows it to judge_first again, with
	 * what follows it (a second hello after a HelloRetryRequest).
	 */
	c->peek_tls = true;
	c->first = evbuffer_new();
	if (!c->first) {
		conn_free(c);
		return;
	}
	evbuffer_add_buffer(c->first, in);
	c->hold = true;
	conn_connect(c);
}

void conn_connect(struct conn *c)
{
	struct evutil_addrinfo hints = { 0 };
	struct evdns_getaddrinfo_request *gai;
	struct sockaddr_storage ss;
	char port[8];

	events_emit(c->px->ev, "egress.allowed", conn_fields(c, c->why[0] ? c->why :
							     "in the allowlist"));
	c->allowed_logged = true;
	if (egress_resolve_static(c->px->rules, c->host, c->port, &ss) == 0) {
		connect_upstream(c, (struct sockaddr *)&ss,
				 ss.ss_family == AF_INET ? sizeof(struct sockaddr_in) :
				 sizeof(struct sockaddr_in6));
		return;
	}
	c->st = C_RESOLVE;
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = EVUTIL_AI_ADDRCONFIG;
	snprintf(port, sizeof(port), "%u", c->port);
	hold_down(c);
	gai = evdns_getaddrinfo(c->px->dns, c->host, port, &hints, on_resolved, c);
	/* NULL: on_resolved ran inside the call already, and c may be gone */
	if (gai)
		c->gai = gai;
}

/* Judge a destination as the sandbox named it; false: denied and answered. */
bool conn_decide(struct conn *c)
{
	struct egress_verdict v;

	if (egress_check_name(c->px->rules, c->host, c->port, &v) < 0 || !v.allowed) {
		conn_deny(c, v.reason);
		return false;
	}
	snprintf(c->host, sizeof(c->host), "%s", v.host);
	snprintf(c->why, sizeof(c->why), "%s", v.reason);
	c->is_ip = v.is_ip;
	return true;
}

/* ---- HTTP: CONNECT and absolute-form requests ----------------------------- */

static const char established[] = "HTTP/1.1 200 Connection established\r\n\r\n";

#define on_sni conn_on_sni

static const char *status_text(int code)
{
	switch (code) {
	case 413: return "Content Too Large";
	case 414: return "URI Too Long";
	case 431: return "Request Header Fields Too Large";
	case 429: return "Too Many Requests";
	default: return "Forbidden";
	}
}

/* A request refused by its method, path, size or a placeholder in it. */
static void deny_request(struct conn *c, int code, const char *why)
{
	const struct httpreq *rq = &c->hr.req;
	json_t *o = denied_fields(c, why);

	if (o && rq->path_len) {
		/* the URL is at most 8 KiB (httpreq.c) */
		char path[HTTPREQ_URL_MAX];
		size_t n = rq->path_len < sizeof(path) ? rq->path_len : sizeof(path);

		/*
		 * A value refused in the URL is not written down either: masked
		 * in the whole URL before its first 200 bytes are kept, or one
		 * that the cut crosses would leave its start.
		 */
		memcpy(path, rq->path, n);
		if (c->px->tls)
			secrets_redact(c->px->tls->secrets, path, n);
		json_object_set_new(o, "path", json_stringn(path, n < 200 ? n : 200));
	}
	events_emit(c->px->ev, "egress.denied", o);
	http_error(c, code, status_text(code), why);
}

/* Methods, paths, caps; false: refused and answered. */
static bool request_ok(struct conn *c)
{
	char why[CORRAL_ERR_MAX];
	const char *name;
	int code;

	snprintf(c->method, sizeof(c->method), "%s", c->hr.req.method_name);
	c->scan.ntail = 0;
	if (!c->px->tls)
		return true;
	/*
	 * A value in the URL is refused for what it is before the rules
	 * judge the path: their refusal says the path, and would write the
	 * value (or, cut at 200 bytes, its start) into the event and the 403.
	 */
	name = secrets_value_in(c->px->tls->secrets, c->hr.req.path, c->hr.req.path_len);
	if (name) {
		snprintf(why, sizeof(why), "the value of secret %s in the URL of a request to "
			 "%.100s: a value the sandbox should not know is never sent on", name,
			 c->host);
		deny_request(c, 403, why);
		return false;
	}
	code = httprules_check(c->px->tls->rules, c->host, c->port, &c->hr.req, why,
			       sizeof(why));
	if (code == 0)
		return true;
	deny_request(c, code, why);
	return false;
}

/* past GUESSES_MAX: a request to a host a secret goes to is refused (-EACCES) */
static int guessed(struct conn *c)
{
	char why[CORRAL_ERR_MAX];

	if (!c->mask || c->px->guesses < GUESSES_MAX)
		return 0;
	snprintf(why, sizeof(why), "a request to %.100s, a host a secret goes to, after its "
		 "answers held a secret's first bytes that went no further %d times (a guess "
		 "at its value by the hold's delay)", c->host, GUESSES_MAX);
	deny_request(c, 403, why);
	return -EACCES;
}

/*
 * Write the head the upstream gets to `to`: origin form, hop-by-hop headers
 * gone, placeholders swapped where allowed.  -EACCES: refused and answered.
 */
static int forward_head(struct conn *c, struct evbuffer *to)
{
	const struct secrets *sec = c->px->tls ? c->px->tls->secrets : NULL;
	size_t max = httpreq_origin_form_max(&c->hr), len = 0, outlen = 0;
	char why[CORRAL_ERR_MAX], *buf = malloc(max), *out = NULL;
	int r;

	if (!buf)
		return -ENOMEM;
	if (guessed(c) < 0) {
		free(buf);
		return -EACCES;
	}
	r = httpreq_origin_form(&c->hr, buf, max, &len);
	if (r == 0 && secrets_count(sec)) {
		r = secrets_rewrite_head(sec, buf, len, c->host, c->port, c->terminated,
					 &out, &outlen, why, sizeof(why));
		if (r == -EACCES)
			deny_request(c, 403, why);
	}
	/* its answer is framed: a HEAD's has no body */
	if (r == 0 && c->mask && httpresp_sent(&c->resp, c->hr.req.method == HTTP_HEAD) < 0) {
		deny_request(c, 429, "more requests to a host secrets go to than the proxy "
			     "holds unanswered (64)");
		r = -EACCES;
	}
	if (r == 0) {
		if (c->up && to == bufferevent_get_output(c->up))
			c->bytes_up += out ? outlen : len;
		evbuffer_add(to, out ? out : buf, out ? outlen : len);
	}
	if (out) {
		explicit_bzero(out, outlen);
		free(out);
	}
	free(buf);
	return r;
}

/* The first request's head, kept until the upstream is connected. */
static int first_head(struct conn *c)
{
	c->first = evbuffer_new();
	if (!c->first)
		return -ENOMEM;
	return forward_head(c, c->first);
}

/*
 * Is rq for the host c was judged for?  Spelled as egress.c spells names
 * (case, a trailing dot, an address's forms), and a port, if given, the
 * connection's.
 */
static bool same_host(const struct conn *c, const struct httpreq *rq)
{
	struct egress_verdict v;

	if (rq->form == HTTPREQ_AUTHORITY || (rq->port_given && rq->port != c->port))
		return false;
	/* only the name as egress.c writes it matters here, not the verdict */
	(void)egress_check_name(c->px->rules, rq->host, c->port, &v);
	return v.host[0] && !strcmp(v.host, c->host);
}

/*
 * A request went up: if it is a WebSocket handshake, the upstream's answer
 * decides whether the connection stays HTTP (ws_answered), and nothing
 * more of the sandbox's is read until then.
 */
static void ws_mark(struct conn *c)
{
	c->ws_wait = c->hr.req.websocket;
}

/*
 * A later request's head, to the upstream already open.  true: it went,
 * and what follows it (its body, the next request) is read on at once;
 * false: refused (answered), or c is gone.
 */
static bool forward_next(struct conn *c)
{
	int r = forward_head(c, bufferevent_get_output(c->up));

	if (r == 0) {
		ws_mark(c);
		return true;
	}
	if (r != -EACCES)
		conn_free(c);
	return false;
}

/*
 * A request on a terminated connection or a read tunnel: for the name the
 * connection was judged for (no Host of another behind it), then judged
 * like any; the first one opens the upstream.  true: read on (forward_next).
 */
static bool handle_tunnel_head(struct conn *c)
{
	const struct httpreq *rq = &c->hr.req;
	char why[CORRAL_ERR_MAX];
	int r;

	if (!same_host(c, rq)) {
		snprintf(why, sizeof(why), "a request for %.100s on a %s connection to %.100s:%u "
			 "(its Host must name the host the connection was judged for)",
			 rq->host, c->terminated ? "TLS" : c->proto, c->host, c->port);
		deny_request(c, 403, why);
		return false;
	}
	if (!request_ok(c))
		return false;
	/* terminated: HTTP/1.1 only, its bodies scanned; the upgrade stays here */
	if (c->terminated)
		c->hr.req.websocket = false;
	if (c->up)
		return forward_next(c);
	/* the rest is read once the upstream is there (start_relay) */
	r = first_head(c);
	if (r == 0) {
		ws_mark(c);
		conn_connect(c);
	} else if (r != -EACCES) {
		conn_free(c);
	}
	return false;
}

/*
 * Tell the client its tunnel is open (CONNECT's 200, SOCKS5's success with
 * the upstream's local address if ufd >= 0), once; a transparent client
 * thinks it is connected already.
 */
static void tunnel_answer(struct conn *c, int ufd)
{
	uint8_t out[SOCKS_REPLY_MAX];
	struct sockaddr_storage local;
	socklen_t len = sizeof(local);
	bool bound;

	if (c->answered || c->kind == L_TRANSPARENT)
		return;
	c->answered = true;
	if (c->kind != L_SOCKS) {
		down_answer(c, established, sizeof(established) - 1);
		return;
	}
	bound = ufd >= 0 && getsockname(ufd, (struct sockaddr *)&local, &len) == 0;
	down_answer(c, out, socks_reply(out, SOCKS_REP_SUCCEEDED,
					bound ? (struct sockaddr *)&local : NULL));
}

/*
 * A port-80 tunnel's first bytes: a TLS hello goes to the SNI check (its
 * name must be the tunnel's), anything else is read as HTTP, request by
 * request, and refused if it is not HTTP.
 */
static void on_port80_first(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;
	uint8_t b;

	if (evbuffer_copyout(bufferevent_get_input(bev), &b, 1) != 1)
		return;
	if (b != 0x16) {
		conn_parse_tunnel(c);
		return;
	}
	c->st = C_SNI;
	bufferevent_setwatermark(c->down, EV_READ, 0, SNI_READ_MAX);
	bufferevent_setcb(c->down, on_sni, NULL, relay_event, c);
	on_sni(c->down, c);
}

void conn_read_port80(struct conn *c)
{
	c->st = C_HEAD;
	bufferevent_setwatermark(c->down, EV_READ, 0, HEAD_MAX);
	bufferevent_setcb(c->down, on_port80_first, NULL, conn_down_event, c);
	bev_enable(c->down, EV_READ | EV_WRITE);
	if (evbuffer_get_length(bufferevent_get_input(c->down)))
		on_port80_first(c->down, c);
}

void conn_parse_tunnel(struct conn *c)
{
	c->parsed = true;
	c->st = C_HEAD;
	httpreq_free(&c->hr);
	httpreq_init(&c->hr);
	bufferevent_setwatermark(c->down, EV_READ, 0, HEAD_MAX);
	bufferevent_setcb(c->down, conn_on_http_head, NULL, conn_down_event, c);
	bev_enable(c->down, EV_READ | EV_WRITE);
	if (evbuffer_get_length(bufferevent_get_input(c->down)))
		http_from_down(c);
}

/*
 * A tunnel whose name was allowed (CONNECT, SOCKS5): what it carries is
 * judged the same way whichever asked for it.  To 443 or a terminated
 * host, the ClientHello is read before anything leaves; to a host whose
 * requests are narrowed, each request is read; to port 80, a hello or
 * HTTP, each request read (a Host for another name on the same address
 * would reach that name: shared hosting, CDNs); else the first bytes go to
 * judge_first on their way (a TLS hello's SNI must name the host).
 */
static void tunnel_decided(struct conn *c)
{
	if (c->port == 443 || conn_should_terminate(c)) {
		tunnel_answer(c, -1);
		c->st = C_SNI;
		bufferevent_setwatermark(c->down, EV_READ, 0, SNI_READ_MAX);
		bufferevent_setcb(c->down, on_sni, NULL, relay_event, c);
		bev_enable(c->down, EV_READ | EV_WRITE);
		if (evbuffer_get_length(bufferevent_get_input(c->down)))
			on_sni(c->down, c);
		return;
	}
	if (conn_should_parse(c)) {
		tunnel_answer(c, -1);
		conn_parse_tunnel(c);
		return;
	}
	if (c->port == 80) {
		tunnel_answer(c, -1);
		conn_read_port80(c);
		return;
	}
	c->peek_tls = true;
	conn_connect(c);
}

/* ufd: the connected upstream's socket, on c->up or bare (start_relay) */
static void upstream_ready(struct conn *c, int ufd)
{
	/* a tunnel not answered yet (plain HTTP's judged head is c->first) */
	if (strcmp(c->proto, "http"))
		tunnel_answer(c, ufd);
	start_relay(c, ufd);
}

/* true: read on (forward_next) */
static bool handle_head(struct conn *c)
{
	const struct httpreq *rq = &c->hr.req;
	bool first = c->up == NULL;
	int r;

	if (c->terminated || c->parsed)
		return handle_tunnel_head(c);
	if (!first) {
		/* a pipelined request: same destination, or the connection ends */
		struct egress_verdict v = { 0 };

		if (rq->form != HTTPREQ_ABSOLUTE ||
		    egress_check_name(c->px->rules, rq->host, rq->port, &v) < 0 ||
		    !v.allowed || strcmp(v.host, c->host) || rq->port != c->port) {
			char why[CORRAL_ERR_MAX];

			snprintf(why, sizeof(why), "%.100s:%u after %.100s:%u on one connection: %.250s",
				 rq->host, rq->port, c->host, c->port,
				 v.allowed ? "one destination per proxy connection" : v.reason);
			events_emit(c->px->ev, "egress.denied", denied_fields(c, why));
			conn_free(c);
			return false;
		}
		return request_ok(c) && forward_next(c);
	}

	snprintf(c->host, sizeof(c->host), "%s", rq->host);
	snprintf(c->method, sizeof(c->method), "%s", rq->method_name);
	c->port = rq->port;
	switch (rq->form) {
	case HTTPREQ_AUTHORITY:
		c->proto = "connect";
		if (conn_decide(c))
			tunnel_decided(c);
		return false;
	case HTTPREQ_ABSOLUTE:
		c->proto = "http";
		if (!conn_decide(c) || !request_ok(c))
			return false;
		r = first_head(c);
		if (r == 0) {
			ws_mark(c);
			conn_connect(c);
		} else if (r != -EACCES) {
			conn_free(c);
		}
		return false;
	case HTTPREQ_ORIGIN:
		c->proto = "http";
		conn_deny(c, "not a proxy request: send absolute-form (http://host/...) or CONNECT");
		return false;
	}
	return false;
}

/*
 * A placeholder in a body never goes anywhere: refused before it leaves.
 * A chunked body is held to the host's cap as it flows, framing counted.
 */
static bool body_ok(struct conn *c, const void *p, size_t n)
{
	const struct tlsbox *t = c->px->tls;
	char why[CORRAL_ERR_MAX];
	uint64_t cap;

	if (!t)
		return true;
	cap = httprules_max_body(t->rules, c->host, c->port);
	if (cap && c->hr.req.chunked && c->hr.req.body_len > cap) {
		snprintf(why, sizeof(why), "a chunked body to %.100s over its cap of %llu bytes",
			 c->host, (unsigned long long)cap);
		deny_request(c, 413, why);
		return false;
	}
	if (!secrets_count(t->secrets) ||
	    secrets_scan(t->secrets, &c->scan, p, n, why, sizeof(why)) == 0)
		return true;
	deny_request(c, 403, why);
	return false;
}

/* Parse what the sandbox sent; act at each boundary the parser reports. */
static void http_from_down(struct conn *c)
{
	struct evbuffer *in = bufferevent_get_input(c->down);

	while (evbuffer_get_length(in) && (c->st == C_HEAD || c->st == C_RELAY) &&
	       !c->ws_wait) {
		struct evbuffer_iovec v;
		size_t used = 0;
		int r;

		/*
		 * To a host secrets go to, a request goes up once the last
		 * answer ended (resume_requests): bytes a server sends past
		 * its answer (a Content-Length short of its body) then come
		 * while no request waits, and are cut off (httpresp.c), where
		 * a request pipelined behind took them for its answer, framed
		 * as the agent's echo in them said.
		 */
		if (c->mask && httpreq_idle(&c->hr) && !httpresp_idle(&c->resp)) {
			bufferevent_disable(c->down, EV_READ);
			return;
		}

		if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
			return;
		r = httpreq_feed(&c->hr, v.iov_base, v.iov_len, &used);
		switch (r) {
		case HTTPREQ_NEED_MORE:
			evbuffer_drain(in, used);
			break;
		case HTTPREQ_HEAD:
			evbuffer_drain(in, used);
			if (c->st == C_HEAD)
				c->st = C_RESOLVE;	/* until upstream_ready */
			if (!handle_head(c))
				return;
			break;
		case HTTPREQ_BODY:
			if (!body_ok(c, v.iov_base, used))
				return;
			if (c->up) {
				c->bytes_up += used;
				evbuffer_remove_buffer(in, bufferevent_get_output(c->up), used);
				/* the rest once the upstream took this (on_drained) */
				if (backed_up(c, c->down, c->up))
					return;
			} else {
				evbuffer_drain(in, used);
			}
			break;
		case HTTPREQ_TUNNEL:
			return;
		default: {
			const char *what = c->hr.reason ? c->hr.reason : "bad request";
			char why[CORRAL_ERR_MAX];

			if (c->parsed)
				snprintf(why, sizeof(why), "a %s tunnel to %.100s:%u that does "
					 "not carry HTTP the proxy can read (%s): its plaintext is "
					 "judged by each request's Host, and what is not HTTP names no host",
					 c->proto, c->host, c->port, what);
			else
				snprintf(why, sizeof(why), "malformed request: %s", what);
			if (!c->host[0])
				snprintf(c->host, sizeof(c->host), "?");
			events_emit(c->px->ev, "egress.denied", denied_fields(c, why));
			http_error(c, c->hr.status ? c->hr.status : 400, "Bad Request", why);
			return;
		}
		}
	}
}

void conn_on_http_head(struct bufferevent *bev, void *arg)
{
	(void)bev;
	http_from_down(arg);
}

void conn_http_from_down(struct conn *c)
{
	http_from_down(c);
}

/*
 * Encrypted Client Hello: the SNI in clear is only the client-facing
 * server's public name, and a server that can decrypt the inner hello
 * (a CDN's) serves the name inside it, which no one here can read.
 * Allowed only where the proxy terminates the TLS itself: it has no ECH
 * key, so the handshake it answers is the outer one, for the judged name.
 * false: refused, recorded, c freed.
 */
bool conn_ech_ok(struct conn *c, const struct sni_hello *hello)
{
	char why[CORRAL_ERR_MAX];

	if (!hello->has_ech || conn_should_terminate(c))
		return true;
	snprintf(why, sizeof(why), "a TLS Encrypted Client Hello to %.200s:%u: the name the "
		 "server would act on is encrypted, and only a name in clear can be judged",
		 c->host, c->port);
	events_emit(c->px->ev, "egress.denied", denied_fields(c, why));
	conn_free(c);
	return false;
}

/*
 * No domain fronting: the name inside TLS must be the name judged.  A
 * hello without one, to a host reached by name, leaves the server to pick
 * the site (its default, or by the Host inside, unseen here): clients send
 * the name they connect to (curl, Python and Node do), and none for an
 * address (RFC 6066 3), which the policy allowed as an address.
 * Terminated, the proxy answers the handshake itself and reads each Host.
 */
static bool sni_check(struct conn *c, const struct sni_hello *hello)
{
	char why[CORRAL_ERR_MAX];

	if (!conn_ech_ok(c, hello))
		return false;
	if (!hello->has_sni && (c->is_ip || conn_should_terminate(c)))
		return true;
	if (!hello->has_sni) {
		snprintf(why, sizeof(why), "a TLS hello without SNI to %.200s:%u: the server "
			 "would choose the site itself, unseen here (a client names the host "
			 "it reaches by name)", c->host, c->port);
		events_emit(c->px->ev, "egress.denied", denied_fields(c, why));
		conn_free(c);
		return false;
	}
	snprintf(c->sni, sizeof(c->sni), "%s", hello->host);
	if (strcasecmp(hello->host, c->host) == 0)
		return true;
	snprintf(why, sizeof(why), "TLS SNI %.200s does not match the %s name %.200s",
		 hello->host, c->kind == L_SOCKS ? "SOCKS5" :
		 c->kind == L_TRANSPARENT ? "judged" : "CONNECT", c->host);
	events_emit(c->px->ev, "egress.denied", denied_fields(c, why));
	conn_free(c);
	return false;
}

void conn_on_sni(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t len = evbuffer_get_length(in);
	struct sni_hello hello;
	char why[CORRAL_ERR_MAX];
	int r;

	r = sni_parse_hello(evbuffer_pullup(in, len), len, &hello);
	if (r == -EAGAIN && len < SNI_READ_MAX)
		return;
	if (r < 0) {
		snprintf(why, sizeof(why), "a %s tunnel to %s:%u did not start with a TLS ClientHello",
			 c->proto, c->host, c->port);
		events_emit(c->px->ev, "egress.denied", denied_fields(c, why));
		conn_free(c);
		return;
	}
	if (!sni_check(c, &hello))
		return;
	if (conn_should_terminate(c)) {
		conn_terminate(c);
		return;
	}
	conn_connect_with(c, in);
}

/* ---- SOCKS5 --------------------------------------------------------------- */

static void on_socks(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	while (evbuffer_get_length(in) && c->st == C_HEAD) {
		uint8_t out[SOCKS_OUT_MAX];
		size_t used = 0, outlen = sizeof(out);
		struct evbuffer_iovec v;
		int r;

		if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
			return;
		r = socks_feed(&c->socks, v.iov_base, v.iov_len, &used, out, &outlen);
		evbuffer_drain(in, used);
		if (outlen)
			bufferevent_write(c->down, out, outlen);
		if (r == SOCKS_ERROR) {
			if (!c->host[0])
				snprintf(c->host, sizeof(c->host), "?");
			events_emit(c->px->ev, "egress.denied",
				    denied_fields(c, c->socks.reason ? c->socks.reason :
						"malformed SOCKS5 handshake"));
			close_after_flush(c);
			return;
		}
		if (r == SOCKS_REQUEST_READY) {
			snprintf(c->host, sizeof(c->host), "%s", c->socks.host);
			c->port = c->socks.port;
			c->st = C_RESOLVE;
			c->hold = true;
			if (conn_decide(c))
				tunnel_decided(c);
			return;
		}
	}
}

/* ---- accepting ------------------------------------------------------------ */

void conn_down_event(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;

	(void)bev;
	/*
	 * The sandbox's end, after a request (or first bytes) that waits for
	 * its upstream: kept.  The bufferevent stopped reading; start_relay
	 * reads again and meets the end again, in relay_event.
	 */
	if (!(what & (BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)) && c->first &&
	    (c->st == C_RESOLVE || c->st == C_CONNECT))
		return;
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT))
		conn_free(c);
}

/*
 * HTTP and SOCKS clients speak first, and most have sent their request by
 * the time the loop reports the connection: read it now, not after a trip
 * through the loop.  Nothing there yet (or EOF, an error): the bufferevent
 * reads as ever when the loop says so.
 */
static void read_now(struct conn *c, int fd);

/*
 * The request came after the connection was reported: read it with
 * read_now's one recv, not the bufferevent's ioctl(FIONREAD) and readv, a
 * syscall more between the client's request and our answer.  The
 * bufferevent reads again first (the socket stays registered with epoll
 * throughout: no epoll_ctl), for whatever comes after.
 */
static void on_first_bytes(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;

	(void)what;
	bufferevent_enable(c->down, EV_READ);
	event_free(c->wait);
	c->wait = NULL;
	read_now(c, fd);
}

/* Wait for the request with our own event, not the bufferevent's read. */
static void wait_first_bytes(struct conn *c, int fd)
{
	c->wait = event_new(c->px->base, fd, EV_READ | EV_PERSIST, on_first_bytes, c);
	if (!c->wait || event_add(c->wait, NULL) < 0) {
		/* the bufferevent reads it then, as it would have */
		if (c->wait)
			event_free(c->wait);
		c->wait = NULL;
		return;
	}
	bufferevent_disable(c->down, EV_READ);
}

static void read_now(struct conn *c, int fd)
{
	struct evbuffer *in = bufferevent_get_input(c->down);
	struct evbuffer_iovec v;
	ssize_t n;
	int e = 0;

	/* a bufferevent freezes its input's end but while it reads: so do we */
	evbuffer_unfreeze(in, 0);
	n = evbuffer_reserve_space(in, FIRST_READ, &v, 1) < 1 ? -1 :
	    recv(fd, v.iov_base, v.iov_len < FIRST_READ ? v.iov_len : FIRST_READ,
		 MSG_DONTWAIT);
	if (n < 0)
		e = errno;
	if (n > 0) {
		v.iov_len = n;
		if (evbuffer_commit_space(in, &v, 1) < 0)
			n = -1;
	}
	/* reserved space not committed adds nothing */
	evbuffer_freeze(in, 0);
	if (n < 0 && e == EAGAIN && !c->wait && c->st == C_HEAD &&
	    !evbuffer_get_length(in))
		wait_first_bytes(c, fd);
	if (n <= 0)
		return;
	if (c->kind == L_SOCKS)
		on_socks(c->down, c);
	else
		conn_on_http_head(c->down, c);
}

/* Which of a proxy's connection limits is px->max_conns: policy or fds. */
static const char *conn_limit_reason(const struct proxy *px, char *buf, size_t len)
{
	if (px->max_conns_by_fds)
		snprintf(buf, len, "the open-files limit leaves this sandbox's proxy "
			 "room for %zu connections: too many connections open "
			 "at once, one more refused", px->max_conns);
	else
		snprintf(buf, len, "limits.connections (%zu) reached: too many "
			 "connections open at once, one more refused", px->max_conns);
	return buf;
}

bool proxy_conn_room(struct proxy *px, const char *protocol)
{
	char why[CORRAL_ERR_MAX];

	if (px->nconns < px->max_conns)
		return true;
	/* an egress.denied, rated: a loop of refusals is summarised (events.c) */
	events_emit(px->ev, "egress.denied",
		    json_pack("{s:s, s:s, s:i, s:s, s:s, s:I}", "protocol", protocol,
			      "host", "?", "port", 0, "reason",
			      conn_limit_reason(px, why, sizeof(why)), "limit",
			      px->max_conns_by_fds ? "open_files" : "connections",
			      "value", (json_int_t)px->max_conns));
	return false;
}

/*
 * An HTTP proxy's client is told why, not only reset: one short answer,
 * whatever its request turns out to be, and only what the socket takes
 * now (it is closed next).
 */
static void refuse_at_accept(struct proxy *px, int fd)
{
	char why[CORRAL_ERR_MAX], msg[CORRAL_ERR_MAX + 256];
	int n;

	conn_limit_reason(px, why, sizeof(why));
	n = snprintf(msg, sizeof(msg), "HTTP/1.1 503 Service Unavailable\r\n"
		     "X-Corral-Denied: %s\r\nContent-Type: text/plain\r\n"
		     "Content-Length: %zu\r\nConnection: close\r\n\r\ncorral: %s\n",
		     why, strlen(why) + strlen("corral: \n"), why);
	if (n > 0 && (size_t)n < sizeof(msg))
		(void)send(fd, msg, n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static void on_accept(struct tcp_listener *tl, int fd, struct sockaddr *sa, int salen)
{
	struct proxy *px = tl->px;
	enum listen_kind kind = tl->kind;
	struct conn *c;

	/* made before the halt's freeze, accepted after: nothing to relay */
	if (px->halted) {
		relay_sock_reset(fd);
		close(fd);
		return;
	}
	/* A sandbox that hoards connections must not exhaust our fds. */
	if (!proxy_conn_room(px, "tcp")) {
		if (kind == L_HTTP)
			refuse_at_accept(px, fd);
		close(fd);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return;
	}
	c->px = px;
	c->kind = kind;
	c->proto = kind == L_SOCKS ? "socks" : "http";
	if (sa && salen > 0 && (size_t)salen <= sizeof(c->peer))
		memcpy(&c->peer, sa, salen);
	c->t0_ms = corral_now_ms();
	if (!tl->nodelay)
		conn_nodelay(fd);
	conn_sock_bound(fd, px->down_rcvbuf);
	c->down = bufferevent_socket_new(px->base, fd, BEV_OPT_CLOSE_ON_FREE |
					 BEV_OPT_DEFER_CALLBACKS);
	if (!c->down) {
		close(fd);
		free(c);
		return;
	}
	conn_bev_tune(c->down);
	c->next = px->conns;
	if (px->conns)
		px->conns->prev = c;
	px->conns = c;
	px->nconns++;
	httpreq_init(&c->hr);
	socks_init(&c->socks);
	/* A request head or handshake that never ends holds nothing for long. */
	bufferevent_setwatermark(c->down, EV_READ, 0, HEAD_MAX);
	bufferevent_setcb(c->down, kind == L_SOCKS ? on_socks : conn_on_http_head, NULL,
			  conn_down_event, c);
	/* a new bufferevent has EV_WRITE enabled: its event waits for bytes */
	bev_enable(c->down, EV_READ | EV_WRITE);
	if (kind == L_TRANSPARENT)
		transparent_start(c, fd);
	else
		read_now(c, fd);
}


static void on_resume(evutil_socket_t fd, short what, void *arg)
{
	struct proxy *px = arg;

	(void)fd;
	(void)what;
	for (size_t i = 0; i < NSPECS; i++) {
		if (px->listeners[i])
			evconnlistener_enable(px->listeners[i]);
		if (px->tcp[i].ev)
			event_add(px->tcp[i].ev, NULL);
	}
}

/*
 * accept() failing (EMFILE, ENFILE, ENOBUFS) would otherwise wake the loop
 * for the same pending connection forever: pause the listeners a moment.
 */
static void pause_listeners(struct proxy *px)
{
	struct timeval pause = { 0, 100 * 1000 };

	for (size_t i = 0; i < NSPECS; i++) {
		if (px->listeners[i])
			evconnlistener_disable(px->listeners[i]);
		if (px->tcp[i].ev)
			event_del(px->tcp[i].ev);
	}
	if (px->resume)
		evtimer_add(px->resume, &pause);
}

static void on_accept_error(struct evconnlistener *l, void *arg)
{
	(void)l;
	pause_listeners(arg);
}

/*
 * One connection a wakeup: the listener stays readable while more wait, and
 * a connection at a time is what a client makes; an accept() to learn that
 * none is left would be a syscall more for each.
 */
static void on_listen(evutil_socket_t fd, short what, void *arg)
{
	struct tcp_listener *tl = arg;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int c;

	(void)what;
	c = accept4(fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (c >= 0) {
		on_accept(tl, c, (struct sockaddr *)&ss, (int)len);
		return;
	}
	/* a client gone before we took it, or none after all: nothing wrong */
	if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
		pause_listeners(tl->px);
}

/* ---- start and stop ------------------------------------------------------- */

/*
 * The host's resolver, for allowed names the policy's hosts map does not
 * give.  Queries carry only names that were allowed: nothing the sandbox
 * asks for otherwise reaches a resolver.
 */
static int make_resolver(struct proxy *px, const struct corral_policy *p,
			 struct corral_err *err)
{
	int r;

	px->dns = evdns_base_new(px->base, 0);
	if (!px->dns)
		return corral_set_err(err, -ENOMEM, "cannot create a resolver");
	if (p->net_resolver) {
		snprintf(px->resolver, sizeof(px->resolver), "network.resolver %s",
			 p->net_resolver);
		r = evdns_base_nameserver_ip_add(px->dns, p->net_resolver);
		if (r != 0)
			return corral_set_err(err, -EINVAL, "network.resolver: cannot use \"%s\"",
					      p->net_resolver);
		return 0;
	}
	/*
	 * No resolv.conf: only the hosts map and literals resolve.  Its
	 * search domains (or the host name's domain) are not taken: a name
	 * judged is resolved as written, and "gone.test" that does not exist
	 * must not become "gone.test.corp.example", a name no one allowed.
	 */
	snprintf(px->resolver, sizeof(px->resolver), "the host's resolvers, "
		 "/etc/resolv.conf");
	evdns_base_resolv_conf_parse(px->dns, DNS_OPTIONS_ALL & ~DNS_OPTION_SEARCH,
				     "/etc/resolv.conf");
	return 0;
}

/*
 * Six fds a tunnel (two sockets, two pipes), some kept for everything
 * else.  A daemon's sandboxes share its limit: each proxy gets 1/shares
 * of it, so that one sandbox's connections cannot take every fd the
 * others (and the daemon's API) need.
 */
static size_t conn_budget(unsigned shares)
{
	struct rlimit rl;
	size_t n;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		n = 10000;
	else
		n = rl.rlim_cur > 256 ? (rl.rlim_cur - 128) / 6 : 16;
	if (shares > 1)
		n /= shares;
	return n > CONN_BUDGET_MIN ? n : CONN_BUDGET_MIN;
}

static int tcp_listen(struct proxy *px, size_t i, int fd)
{
	struct tcp_listener *tl = &px->tcp[i];

	tl->px = px;
	tl->fd = fd;
	tl->kind = listen_specs[i].kind;
	/* Linux: an accepted socket inherits it, one setsockopt fewer a connection */
	tl->nodelay = setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int)) == 0;
	tl->ev = event_new(px->base, fd, EV_READ | EV_PERSIST, on_listen, tl);
	if (!tl->ev || event_add(tl->ev, NULL) < 0)
		return -ENOMEM;
	return 0;
}

int proxy_start(struct event_base *base, int sync, const struct corral_policy *p,
		unsigned fd_shares, struct events *ev, struct tlsbox *tls,
		struct proxy **out, struct corral_err *err)
{
	struct proxy *px = calloc(1, sizeof(*px));
	int fds[NSPECS];
	int r;

	*out = NULL;
	if (!px)
		return corral_set_err(err, -ENOMEM,
				      "out of memory for the egress proxy");
	px->base = base;
	px->ev = ev;
	px->tls = tls;
	px->transparent = p->net_transparent;
	px->down_rcvbuf = rcvbuf_wanted(DOWN_RCVBUF);
	px->up_rcvbuf = rcvbuf_wanted(UP_RCVBUF);
	px->max_conns = p->connections ? p->connections : SIZE_MAX;
	if (conn_budget(fd_shares) < px->max_conns) {
		px->max_conns = conn_budget(fd_shares);
		px->max_conns_by_fds = true;
	}
	px->diag = px->nflog.fd = -1;
	px->nflog.over_rate = new_flows(p->connections);
	for (size_t i = 0; i < NSPECS; i++)
		px->udp[i].fd = px->tcp[i].fd = -1;
	px->resume = evtimer_new(base, on_resume, px);
	if (!px->resume) {
		r = corral_set_err(err, -ENOMEM, "out of memory for the egress proxy");
		goto fail;
	}
	px->rules = egress_new(p, err);
	if (!px->rules) {
		r = err->code ? err->code : -EINVAL;
		goto fail;
	}
	/* while init opens the listeners (proxy_listeners_send) */
	r = make_resolver(px, p, err);
	if (r == 0)
		r = listeners_recv(px, sync, fds, err);
	if (r < 0)
		goto fail;
	for (size_t i = 0; i < NSPECS; i++) {
		if (fds[i] < 0)
			continue;
		if (listen_specs[i].kind == L_DNS_UDP) {
			px->udp[i] = (struct udp_listener){ px, fds[i], NULL };
			px->udp[i].ev = event_new(base, fds[i], EV_READ | EV_PERSIST,
						  dnsd_on_udp, &px->udp[i]);
			if (!px->udp[i].ev || event_add(px->udp[i].ev, NULL) < 0)
				r = -ENOMEM;
			continue;
		}
		if (listen_specs[i].kind != L_DNS_TCP) {
			if (tcp_listen(px, i, fds[i]) < 0)
				r = -ENOMEM;
			continue;
		}
		px->listeners[i] = evconnlistener_new(base, dnsd_on_accept,
				px, LEV_OPT_CLOSE_ON_FREE, 0, fds[i]);
		if (!px->listeners[i]) {
			close(fds[i]);
			r = -ENOMEM;
		} else {
			evconnlistener_set_error_cb(px->listeners[i], on_accept_error);
		}
	}
	if (r == 0 && px->nflog.fd >= 0)
		r = nflog_serve(px, px->nflog.fd);
	if (r < 0) {
		corral_set_err(err, r, "cannot serve the sandbox's listeners");
		goto fail;
	}
	*out = px;
	return 0;
fail:
	proxy_free(px);
	return r;
}

/*
 * At most this many of the connections a sandbox left in the listeners'
 * backlogs are taken at its end: each backlog holds somaxconn (4096).
 */
#define DRAIN_ACCEPT_MAX	4096
/* ... and DNS questions, in dnsd_on_udp's batches of 64 */
#define DRAIN_DNS_BATCHES	64

/*
 * What the sandbox sent before it ended and we had not read: the loop
 * ends with the run, and a connection left in a backlog, or a question in
 * a socket's queue, was never judged, recorded nor counted.  A sweep sent
 * in the run's last moments (a hundred denied connections, then exit)
 * left one event in ten and no halt.  Each connection accepted here is
 * judged as any other; proxy_judging says while some wait for a verdict.
 */
void proxy_drain(struct proxy *px)
{
	size_t taken = 0;

	if (!px)
		return;
	nflog_drain(px);
	for (size_t i = 0; i < NSPECS; i++) {
		struct udp_listener *u = &px->udp[i];

		for (int b = 0; u->ev && u->fd >= 0 && b < DRAIN_DNS_BATCHES; b++) {
			int queued = 0;

			if (ioctl(u->fd, FIONREAD, &queued) < 0 || queued <= 0)
				break;
			dnsd_on_udp(u->fd, EV_READ, u);
		}
	}
	for (size_t i = 0; i < NSPECS && !px->halted; i++) {
		struct tcp_listener *tl = &px->tcp[i];

		while (tl->ev && tl->fd >= 0 && taken < DRAIN_ACCEPT_MAX) {
			struct sockaddr_storage ss;
			socklen_t len = sizeof(ss);
			int c = accept4(tl->fd, (struct sockaddr *)&ss, &len,
					SOCK_NONBLOCK | SOCK_CLOEXEC);

			if (c < 0 && errno == ECONNABORTED)
				continue;
			if (c < 0)
				break;
			taken++;
			on_accept(tl, c, (struct sockaddr *)&ss, (int)len);
		}
	}
}

bool proxy_judging(const struct proxy *px)
{
	for (const struct conn *c = px ? px->conns : NULL; c; c = c->next)
		if (!c->halted && (c->st == C_HEAD || c->st == C_SNI))
			return true;
	return false;
}

static void bev_reset(struct bufferevent *bev)
{
	if (bev)
		relay_sock_reset(bufferevent_getfd(bev));
}

/*
 * A halt stops what the sandbox started, its connections too.  Closed
 * the ordinary way, a connection's sockets would go on sending after the
 * close what their queues hold, the sandbox's writes from before the
 * freeze: megabytes on loopback, to the upstream, for as long as it
 * reads.  Reset, they are dropped.
 */
static void conn_mark_reset(struct conn *c)
{
	relay_reset(c->relay);
	bev_reset(c->up);
	bev_reset(c->down);
	bev_reset(c->raw);
	c->halted = true;
}

static void on_halt(evutil_socket_t fd, short what, void *arg)
{
	struct proxy *px = arg;
	struct conn *c;

	(void)fd;
	(void)what;
	while ((c = px->conns)) {
		conn_mark_reset(c);
		conn_free(c);
	}
}

/*
 * The verdict may come from one of our own events (a denial here counted
 * the last one), inside a connection's callback: the connections go on
 * the loop's next turn, not under it, with whatever that callback still
 * started; no connection is accepted from now on.
 */
void proxy_halt(struct proxy *px)
{
	if (!px || px->halted)
		return;
	px->halted = true;
	px->halt_ev = event_new(px->base, -1, 0, on_halt, px);
	if (px->halt_ev) {
		event_active(px->halt_ev, 0, 0);
		return;
	}
	/* out of memory: each resets when it ends (freed here, one could be in use) */
	for (struct conn *c = px->conns; c; c = c->next)
		conn_mark_reset(c);
}

void proxy_free(struct proxy *px)
{
	if (!px)
		return;
	while (px->conns)
		conn_free(px->conns);
	dnsd_free(px);
	nflog_free(px);
	for (size_t i = 0; i < NSPECS; i++) {
		if (px->listeners[i])
			evconnlistener_free(px->listeners[i]);
		if (px->udp[i].ev)
			event_free(px->udp[i].ev);
		if (px->udp[i].fd >= 0)
			close(px->udp[i].fd);
		if (px->tcp[i].ev)
			event_free(px->tcp[i].ev);
		if (px->tcp[i].fd >= 0)
			close(px->tcp[i].fd);
	}
	if (px->resume)
		event_free(px->resume);
	if (px->halt_ev)
		event_free(px->halt_ev);
	if (px->diag >= 0)
		close(px->diag);
	if (px->dns)
		evdns_base_free(px->dns, 1);
	egress_free(px->rules);
	transparent_free(px);
	free(px);
}
