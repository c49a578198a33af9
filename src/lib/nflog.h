/*
 * nflog.h - what leaves a sandbox's loopback other than TCP and DNS (UDP,
 * ICMP), as nfnetlink_log reports the packets nftables dropped (nflog.c).
 */
#ifndef CORRAL_NFLOG_H
#define CORRAL_NFLOG_H

#include <linux/netlink.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* The group nft.c's log rule reports to: any will do in a netns of our own. */
#define NFLOG_GROUP	7
/*
 * The prefix of the log rules of new flows past the sandbox's rate bound
 * (nft.c: a TCP connection refused, a DNS question dropped); the other log
 * rule, of what leaves loopback, has none.
 */
#define NFLOG_PREFIX_OVER_RATE	"corral over rate"
/* bytes of a packet copied to us: an IPv6 header, extension headers, 8 of transport */
#define NFLOG_COPY	128

struct nflog_packet {
	int family;			/* AF_INET or AF_INET6 */
	uint8_t proto;			/* IPPROTO_UDP, IPPROTO_ICMP, ... */
	/* addresses; ports where the protocol has them (else 0) */
	struct sockaddr_storage src, dst;
	int port;			/* the destination's port (UDP, TCP, ...); -1: none */
	int icmp_type;			/* ICMP and ICMPv6; -1: none */
	bool over_rate;			/* logged with NFLOG_PREFIX_OVER_RATE */
	bool has_uid;
	uint32_t uid;			/* the sender's, as its user namespace sees it */
};

/*
 * In init, in the sandbox's netns with CAP_NET_ADMIN there: a netlink
 * socket bound to group's packets, each sent at once with its first
 * NFLOG_COPY bytes.  The fd, or -errno with why said.
 */
int nflog_open(uint16_t group, char *why, size_t len);

/*
 * One message read from that socket: 1 and *p filled for a logged
 * packet, 0 for any other message, -EINVAL for one too short for what
 * it says it holds.
 */
int nflog_parse(const struct nlmsghdr *nh, size_t len, struct nflog_packet *p);

/* "udp", "icmp", "icmpv6", "tcp", else "ip/N": an event's protocol */
const char *nflog_proto_name(uint8_t proto, char *buf, size_t len);

#endif
