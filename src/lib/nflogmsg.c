/*
 * nflogmsg.c - a packet nfnetlink_log reported (nflog.c), read: its
 * addresses, protocol, destination port or ICMP type, sender's uid.
 *
 * The headers are the kernel's, but what they hold is the sandbox's
 * choice (IPv6 extension headers, fragments, any protocol number), and
 * the copy is cut at NFLOG_COPY bytes: every length is checked against
 * what was copied.  fuzz/fuzz_nflog.c.
 */
#include "nflog.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <stdio.h>
#include <string.h>

static void set_port(struct sockaddr_storage *ss, const uint8_t *p)
{
	uint16_t port;

	memcpy(&port, p, sizeof(port));
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)ss)->sin_port = port;
	else
		((struct sockaddr_in6 *)ss)->sin6_port = port;
}

/* The network header: addresses, protocol, where the transport's starts. */
static int ip_header(const uint8_t *d, size_t n, struct nflog_packet *p, size_t *l4)
{
	if (p->family == AF_INET) {
		struct sockaddr_in *src = (struct sockaddr_in *)&p->src;
		struct sockaddr_in *dst = (struct sockaddr_in *)&p->dst;
		size_t ihl;

		if (n < 20 || d[0] >> 4 != 4 || (ihl = (size_t)(d[0] & 0xf) * 4) < 20)
			return -EINVAL;
		src->sin_family = dst->sin_family = AF_INET;
		memcpy(&src->sin_addr, d + 12, 4);
		memcpy(&dst->sin_addr, d + 16, 4);
		p->proto = d[9];
		/* a fragment after the first carries no transport header */
		*l4 = (d[6] & 0x1f) || d[7] ? n : ihl;
		return 0;
	}
	struct sockaddr_in6 *src = (struct sockaddr_in6 *)&p->src;
	struct sockaddr_in6 *dst = (struct sockaddr_in6 *)&p->dst;
	size_t off = 40;
	uint8_t next;

	if (n < 40 || d[0] >> 4 != 6)
		return -EINVAL;
	src->sin6_family = dst->sin6_family = AF_INET6;
	memcpy(&src->sin6_addr, d + 8, 16);
	memcpy(&dst->sin6_addr, d + 24, 16);
	next = d[6];
	/* extension headers, as far as the copy goes: the protocol is past them */
	while ((next == 0 || next == 43 || next == 60 || next == 44) && off + 8 <= n) {
		uint8_t this = next;

		next = d[off];
		if (this == 44) {	/* fragment: past the first, no transport header */
			if ((d[off + 2] << 8 | d[off + 3]) & 0xfff8)
				off = n;
			off += 8;
		} else {
			off += ((size_t)d[off + 1] + 1) * 8;
		}
	}
	p->proto = next;
	*l4 = off;
	return 0;
}

int nflog_parse(const struct nlmsghdr *nh, size_t len, struct nflog_packet *p)
{
	const struct nfgenmsg *g = NLMSG_DATA(nh);
	const struct nlattr *na;
	const uint8_t *d = NULL;
	size_t n = 0, l4, left;

	if (len < sizeof(*nh) || nh->nlmsg_len > len ||
	    nh->nlmsg_type != ((NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET))
		return 0;
	if (nh->nlmsg_len < NLMSG_LENGTH(sizeof(*g)))
		return -EINVAL;
	memset(p, 0, sizeof(*p));
	p->port = p->icmp_type = -1;
	p->family = g->nfgen_family;
	if (p->family != AF_INET && p->family != AF_INET6)
		return 0;
	left = nh->nlmsg_len - NLMSG_LENGTH(sizeof(*g));
	na = (const struct nlattr *)((const char *)g + NLMSG_ALIGN(sizeof(*g)));
	while (left >= NLA_HDRLEN && na->nla_len >= NLA_HDRLEN && na->nla_len <= left) {
		const uint8_t *v = (const uint8_t *)na + NLA_HDRLEN;
		size_t vlen = na->nla_len - NLA_HDRLEN;

		switch (na->nla_type & NLA_TYPE_MASK) {
		case NFULA_PAYLOAD:
			d = v;
			n = vlen;
			break;
		case NFULA_PREFIX:
			/* the kernel's copy ends in its NUL */
			p->over_rate = vlen == sizeof(NFLOG_PREFIX_OVER_RATE) &&
				       !memcmp(v, NFLOG_PREFIX_OVER_RATE, vlen);
			break;
		case NFULA_UID:
			if (vlen >= 4) {
				p->uid = (uint32_t)v[0] << 24 | v[1] << 16 | v[2] << 8 | v[3];
				p->has_uid = true;
			}
			break;
		}
		if ((size_t)NLA_ALIGN(na->nla_len) >= left)
			break;
		left -= NLA_ALIGN(na->nla_len);
		na = (const struct nlattr *)((const char *)na + NLA_ALIGN(na->nla_len));
	}
	if (!d || ip_header(d, n, p, &l4) < 0)
		return -EINVAL;
	switch (p->proto) {
	case IPPROTO_UDP:
	case IPPROTO_UDPLITE:
	case IPPROTO_TCP:
	case IPPROTO_SCTP:
	case IPPROTO_DCCP:
		if (l4 + 4 <= n) {
			set_port(&p->src, d + l4);
			set_port(&p->dst, d + l4 + 2);
			p->port = d[l4 + 2] << 8 | d[l4 + 3];
		}
		break;
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6:
		if (l4 < n)
			p->icmp_type = d[l4];
		break;
	}
	return 1;
}

const char *nflog_proto_name(uint8_t proto, char *buf, size_t len)
{
	switch (proto) {
	case IPPROTO_UDP:
		return "udp";
	case IPPROTO_ICMP:
		return "icmp";
	case IPPROTO_ICMPV6:
		return "icmpv6";
	case IPPROTO_TCP:
		return "tcp";
	}
	snprintf(buf, len, "ip/%u", proto);
	return buf;
}
