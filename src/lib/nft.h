/* nft.h - transparent mode's nftables rules, as one netlink batch (nft.c). */
#ifndef CORRAL_NFT_H
#define CORRAL_NFT_H

#include <stddef.h>
#include <stdint.h>

/*
 * In the sandbox's netns, with CAP_NET_ADMIN there: TCP to anywhere
 * redirected to tcp_port, UDP DNS to dns_port, loopback left alone, and
 * what else leaves loopback dropped; at most flows new tracked flows a
 * second of each family, one past them refused.  0, or -errno with why said.
 */
int nft_redirect_rules(uint16_t tcp_port, uint16_t dns_port, uint32_t flows,
		       char *why, size_t len);

/*
 * After nft_redirect_rules, in the same netns: what leaves loopback is
 * logged to nfnetlink_log's group (at most 200 packets a second, IPv4
 * and IPv6 together) before it is dropped.  0, or -errno with why said (-ENOENT: the kernel has no
 * nfnetlink_log); the redirect rules stay as they were either way.
 */
int nft_log_rules(uint16_t group, char *why, size_t len);

#endif
