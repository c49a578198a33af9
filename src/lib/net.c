/*
 * net.c - transparent egress: inside a sandbox's netns, every TCP
 * connection goes to the supervisor's listener whatever address a program
 * dials, and DNS to any server lands on the supervisor's responder.
 *
 * Runs in the sandbox's init, in its new netns, before its identity is
 * taken and before anything of the sandbox's runs (proxy.c,
 * proxy_listeners_send).  Two pieces: a default route
 * over lo, so that a connect() to an outside address is routed at all
 * (there is no other interface: nothing can leave), and nftables nat rules
 * in the output hook that redirect it to our port (nft.c).
 */
#include "internal.h"
#include "net.h"
#include "nft.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

struct route_req {
	struct nlmsghdr nh;
	struct rtmsg rt;
	char attrs[64];
};

int net_rtnl_ask(const struct nlmsghdr *req)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	char buf[512] __attribute__((aligned(NLMSG_ALIGNTO)));
	const struct nlmsghdr *ack = (const struct nlmsghdr *)buf;
	ssize_t n;
	int fd, r = 0;

	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0)
		return -errno;
	if (sendto(fd, req, req->nlmsg_len, 0, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = -errno;
	} else {
		n = recv(fd, buf, sizeof(buf), 0);
		if (n < (ssize_t)NLMSG_LENGTH(sizeof(struct nlmsgerr)))
			r = n < 0 ? -errno : -EIO;
		else if (ack->nlmsg_type == NLMSG_ERROR)
			r = ((const struct nlmsgerr *)NLMSG_DATA(ack))->error;
	}
	close(fd);
	return r;
}

static int add_default_route(int family, int ifindex)
{
	struct route_req req = { 0 };
	struct rtattr *rta;

	req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg));
	req.nh.nlmsg_type = RTM_NEWROUTE;
	req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK;
	req.rt.rtm_family = family;
	req.rt.rtm_table = RT_TABLE_MAIN;
	req.rt.rtm_protocol = RTPROT_BOOT;
	req.rt.rtm_scope = RT_SCOPE_LINK;
	req.rt.rtm_type = RTN_UNICAST;
	rta = (struct rtattr *)((char *)&req + NLMSG_ALIGN(req.nh.nlmsg_len));
	rta->rta_type = RTA_OIF;
	rta->rta_len = RTA_LENGTH(sizeof(int));
	memcpy(RTA_DATA(rta), &ifindex, sizeof(int));
	req.nh.nlmsg_len = NLMSG_ALIGN(req.nh.nlmsg_len) + RTA_ALIGN(rta->rta_len);
	/*
	 * The source must be the loopback address: without it a connection
	 * leaves from 0.0.0.0 and the redirected listener's replies go nowhere.
	 */
	rta = (struct rtattr *)((char *)&req + req.nh.nlmsg_len);
	rta->rta_type = RTA_PREFSRC;
	if (family == AF_INET) {
		struct in_addr lo4 = { htonl(INADDR_LOOPBACK) };

		rta->rta_len = RTA_LENGTH(sizeof(lo4));
		memcpy(RTA_DATA(rta), &lo4, sizeof(lo4));
	} else {
		rta->rta_len = RTA_LENGTH(sizeof(in6addr_loopback));
		memcpy(RTA_DATA(rta), &in6addr_loopback, sizeof(in6addr_loopback));
	}
	req.nh.nlmsg_len += RTA_ALIGN(rta->rta_len);
	return net_rtnl_ask(&req.nh);
}

struct addr_req {
	struct nlmsghdr nh;
	struct ifaddrmsg ifa;
	char attrs[64];
};

/*
 * glibc's getaddrinfo() with AI_ADDRCONFIG (the default when no hints are
 * given) returns nothing for IPv4 unless some interface has a non-loopback
 * IPv4 address.  A loopback-only netns has none, so one harmless address
 * (from the CGNAT range, local to lo, reaching nothing) is added.
 */
int net_add_lo_address(char *why, size_t len)
{
	struct addr_req req = { 0 };
	struct in_addr a = { htonl(NET_LO_EXTRA_ADDR) };
	struct rtattr *rta;
	int r;

	req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct ifaddrmsg));
	req.nh.nlmsg_type = RTM_NEWADDR;
	req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK;
	req.ifa.ifa_family = AF_INET;
	req.ifa.ifa_prefixlen = 32;
	req.ifa.ifa_scope = RT_SCOPE_HOST;
	req.ifa.ifa_index = if_nametoindex("lo");
	rta = (struct rtattr *)((char *)&req + NLMSG_ALIGN(req.nh.nlmsg_len));
	rta->rta_type = IFA_LOCAL;
	rta->rta_len = RTA_LENGTH(sizeof(a));
	memcpy(RTA_DATA(rta), &a, sizeof(a));
	req.nh.nlmsg_len = NLMSG_ALIGN(req.nh.nlmsg_len) + RTA_ALIGN(rta->rta_len);
	r = net_rtnl_ask(&req.nh);
	if (r == -EEXIST)
		r = 0;
	if (r < 0)
		snprintf(why, len, "cannot add an address to lo: %s", strerror(-r));
	return r;
}

/*
 * The entries conntrack keeps for what the proxy redirects are host
 * kernel memory no cgroup of the sandbox's is charged for, up to the
 * host's nf_conntrack_max in this netns, which only the host may lower.
 * The timeouts are this netns's own: a flow the sandbox ended or never
 * had answered goes in seconds, not minutes, so a flood of them holds a
 * tenth of what it did.  An established flow keeps the kernel's.  Best
 * effort: a kernel without these files tracks as before.
 */
static const struct { const char *name, *value; } conntrack_timeouts[] = {
	{ "nf_conntrack_tcp_timeout_time_wait", "10" },		/* 120 */
	{ "nf_conntrack_tcp_timeout_syn_sent", "20" },		/* 120 */
	{ "nf_conntrack_udp_timeout", "10" },			/* 30 */
};

static void conntrack_shorten(void)
{
	char path[128];

	for (size_t i = 0; i < sizeof(conntrack_timeouts) / sizeof(conntrack_timeouts[0]); i++) {
		const char *v = conntrack_timeouts[i].value;
		ssize_t w;
		int fd;

		snprintf(path, sizeof(path), "/proc/sys/net/netfilter/%s",
			 conntrack_timeouts[i].name);
		fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		w = write(fd, v, strlen(v));
		(void)w;	/* refused: the kernel's timeout, as before */
		close(fd);
	}
}

/*
 * Host kernel memory charged to no cgroup that this netns's own sysctls
 * bound (SECURITY.md, Known limits, for what none bounds), and kernel
 * code one turns off that a loopback-only netns has no use for:
 *
 * What a socket holds of its options (TCP_MD5SIG and TCP-AO keys, IPv6
 * sticky options, multicast source lists, a sendmsg's long control data,
 * MSG_ZEROCOPY's notices), up to net.core.optmem_max a socket: 128 KiB
 * on recent kernels (this one's), raised for MSG_ZEROCOPY on fast NICs,
 * 20 KiB for years before.  Measured: one process under --memory 64M
 * gave 1000 TCP sockets 963 keys each, 180 MB of the host's memory, its
 * group 3.7 MB.  Back to the old default: a sixth of that.  It is a bound
 * a socket, so the sandbox's whole is still its sockets' count times it.
 *
 * TIME_WAIT buckets, made in the packet path for each connection whose
 * side in this netns closed first and kept 60 s, up to
 * net.ipv4.tcp_max_tw_buckets, which a new netns sets to half the host's
 * TCP hash (131,072 here, more on a larger host): 150,000 loopback
 * connections held 47 MiB of unreclaimable slab, the group 4.2 MB.  4096
 * is a whole bound, about 1 MiB; past it a closing connection skips
 * TIME_WAIT (counted in TCPTimeWaitOverflow, nothing logged), which in a
 * sandbox's netns, loopback only, costs nothing: no late segment of an
 * old connection is in flight, and the port is free sooner.  Not in a
 * pod's netns (sandbox.c): it has a real network, where a late segment
 * could reach a new connection of the same ports, and a pod's server that
 * closes first passes 4096 at 70 connections a second; its TIME_WAIT is
 * its operator's to bound.
 *
 * MPTCP, on by default where built: a second TCP stack of the kernel's
 * (subflows, path manager, its own use-after-frees and double frees in
 * 2023-2025's stable fixes) that any process reaches with one socket()
 * (IPPROTO_MPTCP), and that a netns with only loopback has no use for:
 * it joins paths, and there is one.  Off, a socket() for it is the
 * kernel's ENOPROTOOPT, as on a host that turned it off, unrecorded (the
 * seccomp table lets it through so that Go's listeners, which try it
 * first, make no denial), and Go falls back to TCP.  A pod's netns has
 * a real network and keeps it.
 *
 * Only ever lowered; best effort: a kernel where one is the host's alone
 * (not in a netns's /proc/sys) keeps the host's, as before.
 */
static const struct {
	const char *path;
	long long max;
	bool loopback_only;	/* changes TCP's behaviour on a real network */
} net_bounds[] = {
	{ "/proc/sys/net/core/optmem_max", 20480, false },
	{ "/proc/sys/net/ipv4/tcp_max_tw_buckets", 4096, true },
	{ "/proc/sys/net/mptcp/enabled", 0, true },
};

static void net_lower(const char *path, long long max)
{
	char buf[32], v[24];
	long long now;
	ssize_t n;
	int fd;

	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return;
	n = read(fd, buf, sizeof(buf) - 1);
	if (n > 0) {
		buf[n] = '\0';
		now = strtoll(buf, NULL, 10);
		if (now > max) {
			snprintf(v, sizeof(v), "%lld\n", max);
			n = pwrite(fd, v, strlen(v), 0);
			(void)n;	/* refused: the host's value, as before */
		}
	}
	close(fd);
}

void net_bound_uncharged(bool real_network)
{
	for (size_t i = 0; i < sizeof(net_bounds) / sizeof(net_bounds[0]); i++)
		if (!real_network || !net_bounds[i].loopback_only)
			net_lower(net_bounds[i].path, net_bounds[i].max);
}

int net_transparent_setup(uint16_t tcp_port, uint16_t dns_port, uint32_t flows,
			  char *why, size_t len)
{
	int lo = if_nametoindex("lo"), r;

	if (!lo) {
		snprintf(why, len, "no loopback interface: %s", strerror(errno));
		return -errno;
	}
	r = add_default_route(AF_INET, lo);
	if (r < 0 && r != -EEXIST) {
		snprintf(why, len, "cannot route IPv4 over lo: %s", strerror(-r));
		return r;
	}
	/* IPv6 may be disabled in this kernel: then there is nothing to route */
	r = add_default_route(AF_INET6, lo);
	if (r < 0 && r != -EEXIST && r != -EAFNOSUPPORT && r != -EOPNOTSUPP) {
		snprintf(why, len, "cannot route IPv6 over lo: %s", strerror(-r));
		return r;
	}
	r = nft_redirect_rules(tcp_port, dns_port, flows, why, len);
	if (r == 0)
		conntrack_shorten();	/* the rules made conntrack's files appear */
	return r;
}

int net_lo_up(void)
{
	struct ifreq ifr = { 0 };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), r = 0;

	if (fd < 0)
		return -errno;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
		r = -errno;
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (r == 0 && ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
		r = -errno;
	close(fd);
	return r;
}
