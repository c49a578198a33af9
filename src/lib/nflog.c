/*
 * nflog.c - UDP and ICMP that try to leave the sandbox, made events.
 *
 * In transparent mode every TCP connection and every DNS question reach
 * the supervisor, which judges and records them.  Anything else headed
 * for an address off loopback (UDP to any other port, QUIC, ICMP) is
 * dropped by nftables inside the sandbox's netns (nft.c) and used to leave
 * no trace: no event, nothing the abort criteria could count.  So the drop
 * is preceded by `log group NFLOG_GROUP`, rate-limited, and the packets it
 * logs come here, to a NETLINK_NETFILTER socket that init opened and bound
 * in its netns while it still had CAP_NET_ADMIN there, and handed over
 * with the listeners (proxy_listeners_send).  Each (read by nflogmsg.c)
 * is an egress.denied event with its protocol, destination address and
 * port (ICMP: its type), counted by the abort criteria as a denied
 * connection is.
 *
 * What bounds a flood: the rules' limits (nft.c: at most 200 packets a
 * second, IPv4 and IPv6 together, reach this socket, the rest are only
 * dropped), this socket's receive buffer (the kernel drops what it cannot
 * hold), a bounded number of reads a wakeup, and events.c's summaries
 * (the first few events of a destination are written whole, the rest
 * counted).
 *
 * The socket belongs to the sandbox's netns, so only the sandbox's
 * packets come to it; the sandbox cannot reach it (seccomp allows no
 * NETLINK_NETFILTER socket, and rebinding the group needs CAP_NET_ADMIN
 * and this socket's port id).
 */
#include "proxy_int.h"
#include "nflog.h"
#include "peer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NFLOG_READS	64	/* messages a wakeup: the loop's other work goes on */
#define NFLOG_DRAIN	4096	/* at the sandbox's end: what it sent before, bounded */
#define NFLOG_PID_ASKS	16	/* /proc searches a second for the sender's pid */

/* ---- init's side: the socket, bound to the group -------------------------- */

static void put_attr(char *buf, size_t *len, uint16_t type, const void *v, size_t n)
{
	struct nlattr *na = (struct nlattr *)(buf + *len);

	na->nla_type = type;
	na->nla_len = (uint16_t)(NLA_HDRLEN + n);
	memcpy((char *)na + NLA_HDRLEN, v, n);
	*len += NLA_ALIGN(na->nla_len);
}

/*
 * One message binds the group and sets the copy: the first NFLOG_COPY
 * bytes of each packet (headers, no payload), sent as soon as it is
 * logged (a queue threshold of 1), so that what a sandbox sent just before
 * it ended is already ours when we see it end (nflog_drain).
 */
static int nflog_config(int fd, uint16_t group)
{
	char buf[256] __attribute__((aligned(NLMSG_ALIGNTO))) = { 0 };
	struct nlmsghdr *nh = (struct nlmsghdr *)buf;
	struct nfgenmsg *g = NLMSG_DATA(nh);
	struct nfulnl_msg_config_cmd cmd = { NFULNL_CFG_CMD_BIND };
	struct nfulnl_msg_config_mode mode = {
		.copy_range = htonl(NFLOG_COPY),
		.copy_mode = NFULNL_COPY_PACKET,
	};
	uint32_t qthresh = htonl(1);
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	size_t len = NLMSG_LENGTH(sizeof(*g));
	ssize_t n;

	nh->nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG;
	nh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	nh->nlmsg_seq = 1;
	g->nfgen_family = AF_UNSPEC;
	g->version = NFNETLINK_V0;
	g->res_id = htons(group);
	put_attr(buf, &len, NFULA_CFG_CMD, &cmd, sizeof(cmd));
	put_attr(buf, &len, NFULA_CFG_MODE, &mode, sizeof(mode));
	put_attr(buf, &len, NFULA_CFG_QTHRESH, &qthresh, sizeof(qthresh));
	nh->nlmsg_len = (uint32_t)len;
	if (sendto(fd, buf, len, 0, (struct sockaddr *)&sa, sizeof(sa)) != (ssize_t)len)
		return -errno;
	/* processed in our sendmsg: the answer is queued by now */
	n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
	if (n < 0)
		return -errno;
	if ((size_t)n < NLMSG_LENGTH(sizeof(struct nlmsgerr)) || nh->nlmsg_type != NLMSG_ERROR)
		return -EIO;
	return ((struct nlmsgerr *)NLMSG_DATA(nh))->error;
}

int nflog_open(uint16_t group, char *why, size_t len)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	int fd, r;

	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_NETFILTER);
	if (fd < 0) {
		r = -errno;
		snprintf(why, len, "netlink (nfnetlink_log): %s", strerror(-r));
		return r;
	}
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = -errno;
		snprintf(why, len, "cannot bind a netlink socket (nfnetlink_log): %s",
			 strerror(-r));
		close(fd);
		return r;
	}
	r = nflog_config(fd, group);
	if (r < 0) {
		snprintf(why, len, "nfnetlink_log refused group %u: %s", group, strerror(-r));
		close(fd);
		return r;
	}
	return fd;
}

/* ---- the supervisor's side: each packet an event ---------------------------- */

static bool same_src(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return !memcmp(a, b, sizeof(struct sockaddr_in));
	return !memcmp(a, b, sizeof(struct sockaddr_in6));
}

/*
 * The process that sent it, by its UDP socket (peer.c): a denial names
 * its pid and through it its tool call.  A flood from one socket asks
 * once; a flood from many asks at most NFLOG_PID_ASKS times a second, a
 * walk of the sandbox's /proc each.  0 when not found (the sender closed
 * its socket already) or not asked.
 */
static pid_t sender(struct proxy *px, const struct nflog_packet *p, uint64_t *cgid,
		    const char **missed)
{
	struct nflog_state *s = &px->nflog;
	uint64_t now = corral_now_ms();

	*cgid = 0;
	*missed = NULL;
	if (p->proto != IPPROTO_UDP || px->diag < 0 || p->port < 0)
		return 0;
	if (same_src(&s->last_src, &p->src)) {
		*cgid = s->last_cgid;
		*missed = s->last_missed;
		return s->last_pid;
	}
	if (now - s->asks_since >= 1000) {
		s->asks_since = now;
		s->asks = 0;
	}
	if (s->asks >= NFLOG_PID_ASKS) {
		*missed = "not searched for: this sandbox's 16 searches of the second "
			  "for a dropped packet's sender were made (NFLOG_PID_ASKS)";
		return 0;
	}
	s->asks++;
	s->last_src = p->src;
	/* the packet's destination: its sender's, connected or not */
	s->last_pid = peer_pid_udp(px->diag, px->netns_ino, (const struct sockaddr *)&p->src,
				   (const struct sockaddr *)&p->dst, &s->last_cgid);
	*cgid = s->last_cgid;
	*missed = s->last_missed = peer_missed();
	return s->last_pid;
}

/*
 * A flow the rate bound turned away (nft.c): a TCP connection reset before
 * it reached the proxy, a DNS question dropped before the resolver.
 */
static json_t *over_rate_reason(const struct proxy *px, const struct nflog_packet *p)
{
	return json_sprintf("%s: more than %u new %s a second (%d for each of "
			    "limits.connections, at least %d)",
			    p->proto == IPPROTO_TCP ? "refused" : "dropped",
			    px->nflog.over_rate,
			    p->proto == IPPROTO_TCP ? "connections" : "DNS questions",
			    PROXY_NEW_FLOWS_PER_CONN,
			    PROXY_NEW_FLOWS_MIN);
}

static void emit(struct proxy *px, const struct nflog_packet *p)
{
	char host[INET6_ADDRSTRLEN] = "?", name[16];
	const char *proto = nflog_proto_name(p->proto, name, sizeof(name));
	const void *a = p->family == AF_INET ?
		(const void *)&((const struct sockaddr_in *)&p->dst)->sin_addr :
		(const void *)&((const struct sockaddr_in6 *)&p->dst)->sin6_addr;
	const char *missed;
	uint64_t cgid;
	pid_t pid;
	json_t *o;

	inet_ntop(p->family, a, host, sizeof(host));
	/* port: the destination's, or 0 (ICMP): the abort criteria count host:port */
	o = json_pack("{s:s, s:s, s:i}", "protocol", proto, "host", host,
		      "port", p->port >= 0 ? p->port : 0);
	if (!o)
		return;
	json_object_set_new(o, "reason", p->over_rate ? over_rate_reason(px, p) :
			    json_string("dropped: only TCP, through the proxy, and DNS leave the sandbox"));
	if (p->icmp_type >= 0)
		json_object_set_new(o, "icmp_type", json_integer(p->icmp_type));
	if (p->has_uid)
		json_object_set_new(o, "uid", json_integer(p->uid));
	pid = sender(px, p, &cgid, &missed);
	if (pid > 0)
		json_object_set_new(o, "pid", json_integer(pid));
	else if (missed)
		json_object_set_new(o, "pid_missing", json_string(missed));
	/* for attribution only: events.c turns it into "call" */
	if (cgid)
		json_object_set_new(o, EVENTS_KEY_CGROUP, json_integer((json_int_t)cgid));
	events_emit(px->ev, "egress.denied", o);
}

/* At most max reads; a full receive buffer (ENOBUFS) lost some, not all. */
static void nflog_read(struct proxy *px, size_t max)
{
	char buf[16384] __attribute__((aligned(NLMSG_ALIGNTO)));
	struct nflog_packet p;

	for (size_t i = 0; i < max; i++) {
		ssize_t n = recv(px->nflog.fd, buf, sizeof(buf), MSG_DONTWAIT);
		const struct nlmsghdr *nh = (const struct nlmsghdr *)buf;

		if (n < 0 && (errno == ENOBUFS || errno == EINTR))
			continue;
		if (n <= 0)
			return;
		for (int left = (int)n; NLMSG_OK(nh, left); nh = NLMSG_NEXT(nh, left))
			if (nflog_parse(nh, (size_t)left, &p) == 1)
				emit(px, &p);
	}
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	nflog_read(arg, NFLOG_READS);
}

int nflog_serve(struct proxy *px, int fd)
{
	px->nflog.fd = fd;
	px->nflog.ev = event_new(px->base, fd, EV_READ | EV_PERSIST, on_readable, px);
	if (!px->nflog.ev || event_add(px->nflog.ev, NULL) < 0)
		return -ENOMEM;
	return 0;
}

void nflog_drain(struct proxy *px)
{
	if (px && px->nflog.fd >= 0)
		nflog_read(px, NFLOG_DRAIN);
}

void nflog_free(struct proxy *px)
{
	if (px->nflog.ev)
		event_free(px->nflog.ev);
	if (px->nflog.fd >= 0)
		close(px->nflog.fd);
	px->nflog.ev = NULL;
	px->nflog.fd = -1;
}
