/* net.h - transparent egress inside a sandbox's netns (see net.c). */
#ifndef CORRAL_NET_H
#define CORRAL_NET_H

#include <linux/netlink.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* 100.127.255.254: an IPv4 address on lo, so AI_ADDRCONFIG finds one. */
#define NET_LO_EXTRA_ADDR 0x647ffffeu

/* One rtnetlink request, req->nlmsg_len long, asking for an ack: 0 or -errno. */
int net_rtnl_ask(const struct nlmsghdr *req);

int net_add_lo_address(char *why, size_t len);

/*
 * The caller's netns's net.core.optmem_max and tcp_max_tw_buckets down
 * to corral's bounds (net.c): a sandbox's own, loopback only; or, with
 * real_network, a pod's an OCI container joins, which keeps its
 * TIME_WAIT bound.
 */
void net_bound_uncharged(bool real_network);

/* The netns's lo up (a new netns has it down): 0 or -errno. */
int net_lo_up(void);

/*
 * In the sandbox's netns: route all to lo, redirect TCP and DNS to us,
 * flows new tracked flows a second at most (nft_redirect_rules).
 */
int net_transparent_setup(uint16_t tcp_port, uint16_t dns_port, uint32_t flows,
			  char *why, size_t len);

#endif
