/*
 * nft.c - transparent mode's nftables rules, sent to the kernel as one
 * nf_tables netlink batch.
 *
 * The same rules were loaded through libnftables from their text: the
 * library brought five more shared objects, a parser and a cache of the
 * whole ruleset, and cost 13 ms of every `--net proxy` start on a
 * paravirtualized host, against well under one for the messages below.
 * The expressions are the ones nft itself makes from that text, as
 * `nft --debug=netlink list ruleset` prints them (tests/net.sh compares
 * the listing):
 *
 *   table ip corral {
 *     chain raw_out { ... }		(add_untracked)
 *     chain tcp_over_rate {
 *       limit rate 25/second burst 25 packets log prefix "corral over rate" group 7
 *       reject with tcp reset
 *     }
 *     chain dns_over_rate {
 *       limit rate 25/second burst 25 packets log prefix "corral over rate" group 7
 *       drop
 *     }
 *     chain out {
 *       type nat hook output priority -100; policy accept;
 *       ip daddr 127.0.0.0/8 return
 *       meta l4proto tcp ct state new limit rate over FLOWS/second burst FLOWS packets jump tcp_over_rate
 *       udp dport 53 ct state new limit rate over FLOWS/second burst FLOWS packets jump dns_over_rate
 *       meta l4proto tcp redirect to :TCP_PORT
 *       udp dport 53 redirect to :DNS_PORT
 *     }
 *     chain filter_out {
 *       type filter hook output priority 0; policy accept;
 *       ip daddr != 127.0.0.0/8 limit rate 100/second burst 100 packets log group 7
 *       ip daddr != 127.0.0.0/8 drop
 *     }
 *   }
 *
 * and the same for ip6 with ::1.  nat: TCP and DNS to anywhere come to
 * us.  filter (after nat): whatever still heads for a non-loopback
 * address (other UDP, ICMP) is dropped, so the sender gets EPERM instead
 * of a packet looping on lo.
 *
 * The log rules are a transaction of their own (nft_log_rules), each
 * put in front of a drop or a reject once init holds the nfnetlink_log
 * socket they report to (nflog.c): a kernel without nfnetlink_log
 * refuses them (the logger is not found), and the rules above must load
 * all the same.  Their limits are what a flood costs the supervisor: at
 * most that many packets a second are logged, the rest only dropped.
 * Each family's table has rules and limits of its own, so each gets half
 * of NFT_LOG_RATE: a spray at IPv4 and IPv6 addresses at once was logged
 * 400 a second.  The flows over the rate are logged by rules of their
 * own, marked by their prefix, NFT_RATE_LOG a second each.
 *
 * The batch is one transaction: the kernel commits all of it or nothing.
 * It is processed in our sendmsg, so every answer is queued when that
 * returns, and reading them never waits.
 */
#include "internal.h"
#include "nft.h"
#include "nflog.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nf_nat.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define NFT_BATCH_SIZE	16384
#define NFT_MAX_MSGS	48
/*
 * Packets logged a second at most, and as many at once (the burst), by
 * the IPv4 and IPv6 rules together: each has half.
 */
#define NFT_LOG_RATE	200
/*
 * And of the new flows the rate bound refuses, by each of the four rules
 * (TCP and DNS, IPv4 and IPv6): 100 a second in all.
 */
#define NFT_RATE_LOG	25

/* A batch under construction; a message that does not fit sets full. */
struct nft_batch {
	char buf[NFT_BATCH_SIZE];
	size_t len;
	bool full;
	uint32_t seq;
	const char *family;		/* the table the next commands are for */
	const char *what[NFT_MAX_MSGS];	/* by seq: what that message makes */
	const char *table[NFT_MAX_MSGS];	/* and in which table */
};

static void *put(struct nft_batch *b, const void *data, size_t n)
{
	size_t aligned = NLMSG_ALIGN(n);
	void *p;

	if (b->full || b->len + aligned > sizeof(b->buf)) {
		b->full = true;
		return NULL;
	}
	p = b->buf + b->len;
	memset(p, 0, aligned);
	if (data)
		memcpy(p, data, n);
	b->len += aligned;
	return p;
}

static void attr(struct nft_batch *b, uint16_t type, const void *data, size_t n)
{
	struct nlattr na = { .nla_len = (uint16_t)(NLA_HDRLEN + n), .nla_type = type };

	if (put(b, &na, sizeof(na)))
		put(b, data, n);
}

static void attr_u32(struct nft_batch *b, uint16_t type, uint32_t v)
{
	uint32_t be = htonl(v);

	attr(b, type, &be, sizeof(be));
}

static void attr_str(struct nft_batch *b, uint16_t type, const char *s)
{
	attr(b, type, s, strlen(s) + 1);
}

/* Opens a nested attribute: its offset, for nest_end to set its length. */
static size_t nest(struct nft_batch *b, uint16_t type)
{
	size_t off = b->len;
	struct nlattr na = { .nla_type = NLA_F_NESTED | type };

	put(b, &na, sizeof(na));
	return off;
}

static void nest_end(struct nft_batch *b, size_t off)
{
	if (!b->full)
		((struct nlattr *)(b->buf + off))->nla_len = (uint16_t)(b->len - off);
}

static size_t msg(struct nft_batch *b, uint16_t type, uint16_t flags,
		  uint8_t family, uint16_t res_id, const char *what)
{
	size_t off = b->len;
	struct nlmsghdr nh = {
		.nlmsg_type = type,
		.nlmsg_flags = NLM_F_REQUEST | flags,
		.nlmsg_seq = b->seq,
	};
	struct nfgenmsg g = {
		.nfgen_family = family,
		.version = NFNETLINK_V0,
		.res_id = htons(res_id),
	};

	if (b->seq < NFT_MAX_MSGS) {
		b->what[b->seq] = what;
		b->table[b->seq] = b->family;
	} else {
		b->full = true;
	}
	b->seq++;
	put(b, &nh, sizeof(nh));
	put(b, &g, sizeof(g));
	return off;
}

static void msg_end(struct nft_batch *b, size_t off)
{
	if (!b->full)
		((struct nlmsghdr *)(b->buf + off))->nlmsg_len = (uint32_t)(b->len - off);
}

/* One command of the transaction; each asks for an answer. */
static size_t cmd(struct nft_batch *b, int type, uint16_t flags, uint8_t family,
		  const char *what)
{
	return msg(b, (NFNL_SUBSYS_NFTABLES << 8) | type,
		   NLM_F_CREATE | NLM_F_ACK | flags, family, 0, what);
}

/* Expressions: each an element of the rule's list, data nested in it. */
static size_t expr(struct nft_batch *b, const char *name, size_t *data)
{
	size_t elem = nest(b, NFTA_LIST_ELEM);

	attr_str(b, NFTA_EXPR_NAME, name);
	*data = nest(b, NFTA_EXPR_DATA);
	return elem;
}

static void expr_end(struct nft_batch *b, size_t elem, size_t data)
{
	nest_end(b, data);
	nest_end(b, elem);
}

static void e_payload(struct nft_batch *b, uint32_t base, uint32_t off, uint32_t len)
{
	size_t d, e = expr(b, "payload", &d);

	attr_u32(b, NFTA_PAYLOAD_DREG, NFT_REG_1);
	attr_u32(b, NFTA_PAYLOAD_BASE, base);
	attr_u32(b, NFTA_PAYLOAD_OFFSET, off);
	attr_u32(b, NFTA_PAYLOAD_LEN, len);
	expr_end(b, e, d);
}

static void e_l4proto(struct nft_batch *b)
{
	size_t d, e = expr(b, "meta", &d);

	attr_u32(b, NFTA_META_DREG, NFT_REG_1);
	attr_u32(b, NFTA_META_KEY, NFT_META_L4PROTO);
	expr_end(b, e, d);
}

static void e_cmp(struct nft_batch *b, uint32_t op, const void *v, size_t n)
{
	size_t data, d, e = expr(b, "cmp", &d);

	attr_u32(b, NFTA_CMP_SREG, NFT_REG_1);
	attr_u32(b, NFTA_CMP_OP, op);
	data = nest(b, NFTA_CMP_DATA);
	attr(b, NFTA_DATA_VALUE, v, n);
	nest_end(b, data);
	expr_end(b, e, d);
}

static void e_verdict(struct nft_batch *b, int code)
{
	size_t data, verdict, d, e = expr(b, "immediate", &d);

	attr_u32(b, NFTA_IMMEDIATE_DREG, NFT_REG_VERDICT);
	data = nest(b, NFTA_IMMEDIATE_DATA);
	verdict = nest(b, NFTA_DATA_VERDICT);
	attr_u32(b, NFTA_VERDICT_CODE, (uint32_t)code);
	nest_end(b, verdict);
	nest_end(b, data);
	expr_end(b, e, d);
}

/* jump CHAIN: to a chain of the same table, and back unless it decides */
static void e_jump(struct nft_batch *b, const char *chain)
{
	size_t data, verdict, d, e = expr(b, "immediate", &d);

	attr_u32(b, NFTA_IMMEDIATE_DREG, NFT_REG_VERDICT);
	data = nest(b, NFTA_IMMEDIATE_DATA);
	verdict = nest(b, NFTA_DATA_VERDICT);
	attr_u32(b, NFTA_VERDICT_CODE, (uint32_t)NFT_JUMP);
	attr_str(b, NFTA_VERDICT_CHAIN, chain);
	nest_end(b, verdict);
	nest_end(b, data);
	expr_end(b, e, d);
}

/* redirect to :port, as nft makes it: the port in a register first */
static void e_redirect(struct nft_batch *b, uint16_t port)
{
	uint16_t be = htons(port);
	size_t data, d, e = expr(b, "immediate", &d);

	attr_u32(b, NFTA_IMMEDIATE_DREG, NFT_REG_1);
	data = nest(b, NFTA_IMMEDIATE_DATA);
	attr(b, NFTA_DATA_VALUE, &be, sizeof(be));
	nest_end(b, data);
	expr_end(b, e, d);

	e = expr(b, "redir", &d);
	attr_u32(b, NFTA_REDIR_REG_PROTO_MIN, NFT_REG_1);
	attr_u32(b, NFTA_REDIR_REG_PROTO_MAX, NFT_REG_1);
	attr_u32(b, NFTA_REDIR_FLAGS, NF_NAT_RANGE_PROTO_SPECIFIED);
	expr_end(b, e, d);
}

/* notrack: no conntrack entry for the packet */
static void e_notrack(struct nft_batch *b)
{
	size_t d, e = expr(b, "notrack", &d);

	expr_end(b, e, d);
}

static void attr_u64(struct nft_batch *b, uint16_t type, uint64_t v)
{
	uint64_t be = htobe64(v);

	attr(b, type, &be, sizeof(be));
}

/*
 * limit rate [over] N/second burst N packets: without over, past the rate
 * the rule stops there; with it, only past the rate does it go on.
 */
static void e_limit(struct nft_batch *b, uint64_t per_second, uint32_t burst,
		    bool over)
{
	size_t d, e = expr(b, "limit", &d);

	attr_u64(b, NFTA_LIMIT_RATE, per_second);
	attr_u64(b, NFTA_LIMIT_UNIT, 1);
	attr_u32(b, NFTA_LIMIT_BURST, burst);
	attr_u32(b, NFTA_LIMIT_TYPE, NFT_LIMIT_PKTS);
	attr_u32(b, NFTA_LIMIT_FLAGS, over ? NFT_LIMIT_F_INV : 0);
	expr_end(b, e, d);
}

/* ct state new: the first packet of a flow conntrack now tracks */
static void e_ct_new(struct nft_batch *b)
{
	const uint32_t mask = NF_CT_STATE_BIT(IP_CT_NEW), zero = 0;
	size_t data, d, e = expr(b, "ct", &d);

	attr_u32(b, NFTA_CT_KEY, NFT_CT_STATE);
	attr_u32(b, NFTA_CT_DREG, NFT_REG_1);
	expr_end(b, e, d);

	e = expr(b, "bitwise", &d);
	attr_u32(b, NFTA_BITWISE_SREG, NFT_REG_1);
	attr_u32(b, NFTA_BITWISE_DREG, NFT_REG_1);
	attr_u32(b, NFTA_BITWISE_LEN, sizeof(mask));
	data = nest(b, NFTA_BITWISE_MASK);
	attr(b, NFTA_DATA_VALUE, &mask, sizeof(mask));
	nest_end(b, data);
	data = nest(b, NFTA_BITWISE_XOR);
	attr(b, NFTA_DATA_VALUE, &zero, sizeof(zero));
	nest_end(b, data);
	expr_end(b, e, d);
	e_cmp(b, NFT_CMP_NEQ, &zero, sizeof(zero));
}

/*
 * reject with tcp reset: the connecting socket reads ECONNREFUSED at once.
 * An ICMP port unreachable would not do: it comes while connect() holds
 * the socket, is taken for a soft error, and the SYN goes again a second
 * later.
 */
static void e_reset(struct nft_batch *b)
{
	const uint8_t code = 0;
	size_t d, e = expr(b, "reject", &d);

	attr_u32(b, NFTA_REJECT_TYPE, NFT_REJECT_TCP_RST);
	attr(b, NFTA_REJECT_ICMP_CODE, &code, sizeof(code));
	expr_end(b, e, d);
}

/*
 * log [prefix P] group N: the packet to nfnetlink_log's instance of that
 * group, with P (NULL: none) to tell which rule logged it.
 */
static void e_log_group(struct nft_batch *b, uint16_t group, const char *prefix)
{
	uint16_t be = htons(group);
	size_t d, e = expr(b, "log", &d);

	attr(b, NFTA_LOG_GROUP, &be, sizeof(be));
	if (prefix)
		attr_str(b, NFTA_LOG_PREFIX, prefix);
	expr_end(b, e, d);
}

/* What differs between the two families: where loopback is, and what. */
struct nft_family {
	uint8_t nfproto;
	const char *name;
	uint32_t daddr_off, lo_len;	/* in the network header */
	const void *lo;			/* compared with lo_len bytes there */
	uint32_t saddr_off, addr_len;	/* the source address, and its length */
	const void *listen;		/* the address the proxy listens on */
};

static void add_table(struct nft_batch *b, const struct nft_family *f)
{
	size_t m = cmd(b, NFT_MSG_NEWTABLE, 0, f->nfproto, "the table");

	attr_str(b, NFTA_TABLE_NAME, "corral");
	msg_end(b, m);
}

static void add_chain(struct nft_batch *b, const struct nft_family *f,
		      const char *name, const char *type, int prio,
		      const char *what)
{
	size_t hook, m = cmd(b, NFT_MSG_NEWCHAIN, 0, f->nfproto, what);

	attr_str(b, NFTA_CHAIN_TABLE, "corral");
	attr_str(b, NFTA_CHAIN_NAME, name);
	hook = nest(b, NFTA_CHAIN_HOOK);
	attr_u32(b, NFTA_HOOK_HOOKNUM, NF_INET_LOCAL_OUT);
	attr_u32(b, NFTA_HOOK_PRIORITY, (uint32_t)prio);
	nest_end(b, hook);
	attr_u32(b, NFTA_CHAIN_POLICY, NF_ACCEPT);
	attr_str(b, NFTA_CHAIN_TYPE, type);
	msg_end(b, m);
}

/* A chain without a hook: reached only by a jump to it. */
static void add_regular_chain(struct nft_batch *b, const struct nft_family *f,
			      const char *name, const char *what)
{
	size_t m = cmd(b, NFT_MSG_NEWCHAIN, 0, f->nfproto, what);

	attr_str(b, NFTA_CHAIN_TABLE, "corral");
	attr_str(b, NFTA_CHAIN_NAME, name);
	msg_end(b, m);
}

/* A rule's message, its expression list open; rule_end closes both. */
static void rule(struct nft_batch *b, const struct nft_family *f,
		 const char *chain, const char *what, size_t *m, size_t *list)
{
	*m = cmd(b, NFT_MSG_NEWRULE, NLM_F_APPEND, f->nfproto, what);
	attr_str(b, NFTA_RULE_TABLE, "corral");
	attr_str(b, NFTA_RULE_CHAIN, chain);
	*list = nest(b, NFTA_RULE_EXPRESSIONS);
}

static void rule_end(struct nft_batch *b, size_t m, size_t list)
{
	nest_end(b, list);
	msg_end(b, m);
}

/* ip saddr LISTEN PROTO sport PORT return: an answer of one of ours */
static void keep_tracked(struct nft_batch *b, const struct nft_family *f,
			 uint8_t proto, uint16_t port, const char *what)
{
	const uint16_t be = htons(port);
	size_t m, l;

	rule(b, f, "raw_out", what, &m, &l);
	e_payload(b, NFT_PAYLOAD_NETWORK_HEADER, f->saddr_off, f->addr_len);
	e_cmp(b, NFT_CMP_EQ, f->listen, f->addr_len);
	e_l4proto(b);
	e_cmp(b, NFT_CMP_EQ, &proto, sizeof(proto));
	e_payload(b, NFT_PAYLOAD_TRANSPORT_HEADER, 0, sizeof(be));
	e_cmp(b, NFT_CMP_EQ, &be, sizeof(be));
	e_verdict(b, NFT_RETURN);
	rule_end(b, m, l);
}

/*
 * The nat rules turn conntrack on in the sandbox's netns, and its entries
 * are kernel memory no cgroup of the sandbox's is charged for, up to the
 * host's nf_conntrack_max in each netns: a UDP spray on loopback held
 * 67 MB under --memory 32M.  Loopback's own traffic needs no translation
 * and is left untracked, but for the answers of the transparent listener
 * and of DNS, which go loopback to loopback too (a redirected
 * connection's source is 127.0.0.1) and must be translated back.  Only
 * the proxy holds those ports there: 53 is privileged, and a listening
 * TCP port is no one else's.
 */
static void add_untracked(struct nft_batch *b, const struct nft_family *f,
			  uint16_t tcp_port, uint16_t dns_port)
{
	size_t m, l;

	add_chain(b, f, "raw_out", "filter", -300, "the raw chain");
	keep_tracked(b, f, IPPROTO_TCP, tcp_port, "the transparent listener's answers");
	keep_tracked(b, f, IPPROTO_UDP, dns_port, "the DNS answers");
	rule(b, f, "raw_out", "the rule that leaves loopback untracked", &m, &l);
	e_payload(b, NFT_PAYLOAD_NETWORK_HEADER, f->daddr_off, f->lo_len);
	e_cmp(b, NFT_CMP_EQ, f->lo, f->lo_len);
	e_notrack(b);
	rule_end(b, m, l);
}

/* meta l4proto tcp */
static void e_is_tcp(struct nft_batch *b)
{
	const uint8_t tcp = IPPROTO_TCP;

	e_l4proto(b);
	e_cmp(b, NFT_CMP_EQ, &tcp, sizeof(tcp));
}

/* udp dport 53 */
static void e_is_dns(struct nft_batch *b)
{
	const uint8_t udp = IPPROTO_UDP;
	const uint16_t dns = htons(53);

	e_l4proto(b);
	e_cmp(b, NFT_CMP_EQ, &udp, sizeof(udp));
	e_payload(b, NFT_PAYLOAD_TRANSPORT_HEADER, 2, sizeof(dns));
	e_cmp(b, NFT_CMP_EQ, &dns, sizeof(dns));
}

/*
 * Where the flows past the rate bound go: each chain holds the verdict, so
 * that the log rule (add_log) can be put in front of it in a transaction
 * of its own, with a limit of its own -- one in the bound's rule would
 * either log every refused packet or refuse only what it logged.
 */
static void add_over_rate(struct nft_batch *b, const struct nft_family *f)
{
	size_t m, l;

	add_regular_chain(b, f, "tcp_over_rate", "the chain of TCP flows over the rate");
	rule(b, f, "tcp_over_rate", "the refusal of TCP flows over the rate", &m, &l);
	e_reset(b);
	rule_end(b, m, l);
	add_regular_chain(b, f, "dns_over_rate", "the chain of DNS flows over the rate");
	rule(b, f, "dns_over_rate", "the drop of DNS flows over the rate", &m, &l);
	e_verdict(b, NF_DROP);
	rule_end(b, m, l);
}

static void add_family(struct nft_batch *b, const struct nft_family *f,
		       uint16_t tcp_port, uint16_t dns_port, uint32_t flows)
{
	size_t m, l;

	b->family = f->name;
	add_table(b, f);
	add_untracked(b, f, tcp_port, dns_port);
	add_over_rate(b, f);
	add_chain(b, f, "out", "nat", -100, "the nat chain");
	rule(b, f, "out", "the rule that lets loopback be", &m, &l);
	e_payload(b, NFT_PAYLOAD_NETWORK_HEADER, f->daddr_off, f->lo_len);
	e_cmp(b, NFT_CMP_EQ, f->lo, f->lo_len);
	e_verdict(b, NFT_RETURN);
	rule_end(b, m, l);
	/*
	 * What stays tracked, the redirected flows, is bounded by the rate at
	 * which they begin: each lives its TIME_WAIT (10 s, net.c) once
	 * closed, or its CLOSE_WAIT (the kernel's 60 s) when the proxy closed
	 * it and the sandbox keeps its end (SECURITY.md).  Here, where only a
	 * flow's first packet comes, and only one bound for the sandbox
	 * (loopback's answers of our DNS are tracked too, each "new" while no
	 * reply is seen, and must not be counted).  Not a `ct count`:
	 * connlimit drops a closed flow from its count while conntrack still
	 * holds it.  TCP and DNS each have a rule, and a rate, of their own.
	 */
	rule(b, f, "out", "the bound on new TCP flows", &m, &l);
	e_is_tcp(b);
	e_ct_new(b);
	e_limit(b, flows, flows, true);
	e_jump(b, "tcp_over_rate");
	rule_end(b, m, l);
	rule(b, f, "out", "the bound on new DNS flows", &m, &l);
	e_is_dns(b);
	e_ct_new(b);
	e_limit(b, flows, flows, true);
	e_jump(b, "dns_over_rate");
	rule_end(b, m, l);
	rule(b, f, "out", "the TCP redirect", &m, &l);
	e_is_tcp(b);
	e_redirect(b, tcp_port);
	rule_end(b, m, l);
	rule(b, f, "out", "the DNS redirect", &m, &l);
	e_is_dns(b);
	e_redirect(b, dns_port);
	rule_end(b, m, l);

	add_chain(b, f, "filter_out", "filter", 0, "the filter chain");
	rule(b, f, "filter_out", "the drop of what leaves loopback", &m, &l);
	e_payload(b, NFT_PAYLOAD_NETWORK_HEADER, f->daddr_off, f->lo_len);
	e_cmp(b, NFT_CMP_NEQ, f->lo, f->lo_len);
	e_verdict(b, NF_DROP);
	rule_end(b, m, l);
}

/* First in chain, in front of its verdict: a refused flow, logged. */
static void add_rate_log(struct nft_batch *b, const struct nft_family *f,
			 const char *chain, uint16_t group)
{
	size_t m, l;

	m = cmd(b, NFT_MSG_NEWRULE, 0, f->nfproto, "the log of flows over the rate");
	attr_str(b, NFTA_RULE_TABLE, "corral");
	attr_str(b, NFTA_RULE_CHAIN, chain);
	l = nest(b, NFTA_RULE_EXPRESSIONS);
	e_limit(b, NFT_RATE_LOG, NFT_RATE_LOG, false);
	e_log_group(b, group, NFLOG_PREFIX_OVER_RATE);
	rule_end(b, m, l);
}

/*
 * Without NLM_F_APPEND the rule goes first in filter_out: in front of the
 * drop, which it does not replace (a packet past the limit goes on to it).
 */
static void add_log(struct nft_batch *b, const struct nft_family *f, uint16_t group)
{
	size_t m, l;

	b->family = f->name;
	m = cmd(b, NFT_MSG_NEWRULE, 0, f->nfproto, "the log of what leaves loopback");
	attr_str(b, NFTA_RULE_TABLE, "corral");
	attr_str(b, NFTA_RULE_CHAIN, "filter_out");
	l = nest(b, NFTA_RULE_EXPRESSIONS);
	e_payload(b, NFT_PAYLOAD_NETWORK_HEADER, f->daddr_off, f->lo_len);
	e_cmp(b, NFT_CMP_NEQ, f->lo, f->lo_len);
	e_limit(b, NFT_LOG_RATE / 2, NFT_LOG_RATE / 2, false);
	e_log_group(b, group, NULL);
	rule_end(b, m, l);
	add_rate_log(b, f, "tcp_over_rate", group);
	add_rate_log(b, f, "dns_over_rate", group);
}

/* 127.0.0.0/8: its first byte; 127.0.0.1, where the proxy listens */
static const uint8_t lo4 = 127;
static const uint8_t listen4[4] = { 127, 0, 0, 1 };
static const struct nft_family families[] = {
	{ NFPROTO_IPV4, "ip", 16, 1, &lo4, 12, 4, listen4 },
	{ NFPROTO_IPV6, "ip6", 24, 16, &in6addr_loopback, 8, 16, &in6addr_loopback },
};

static void batch_edge(struct nft_batch *b, uint16_t type)
{
	size_t m = msg(b, type, 0, AF_UNSPEC, NFNL_SUBSYS_NFTABLES, "the batch");

	msg_end(b, m);
}

/*
 * The kernel's answers: one per command (each asked for one), an error
 * for any that failed.  The first error is the one reported.
 */
static int read_answers(int fd, const struct nft_batch *b, const char *what,
			char *why, size_t len)
{
	char buf[16384] __attribute__((aligned(NLMSG_ALIGNTO)));
	uint32_t last = b->seq - 2;	/* the last command, before BATCH_END */
	bool done = false;
	int r = 0;

	for (int i = 0; i < NFT_MAX_MSGS * 2 && !done; i++) {
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		struct nlmsghdr *nh = (struct nlmsghdr *)buf;

		if (n < 0)
			break;
		for (; NLMSG_OK(nh, (size_t)n); nh = NLMSG_NEXT(nh, n)) {
			const struct nlmsgerr *e = NLMSG_DATA(nh);

			if (nh->nlmsg_type != NLMSG_ERROR ||
			    nh->nlmsg_len < NLMSG_LENGTH(sizeof(*e)))
				continue;
			if (e->error < 0 && r == 0) {
				uint32_t s = nh->nlmsg_seq;

				r = e->error;
				if (s > 0 && s <= last)	/* not BATCH_BEGIN or _END */
					snprintf(why, len, "nftables refused %s of table %s corral: %s",
						 b->what[s], b->table[s], strerror(-r));
				else
					snprintf(why, len, "nftables refused the batch: %s",
						 strerror(-r));
			}
			if (nh->nlmsg_seq == last)
				done = true;
		}
	}
	if (r == 0 && !done) {
		snprintf(why, len, "nftables gave no answer to %s", what);
		r = -EIO;
	}
	return r;
}

/* Send b (its edges added here), read the answers: 0 or -errno with why. */
static int send_batch(struct nft_batch *b, const char *what, char *why, size_t len)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	int fd, r;

	if (b->full) {
		snprintf(why, len, "%s do not fit in %d bytes", what, NFT_BATCH_SIZE);
		return -E2BIG;
	}
	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
	if (fd < 0) {
		r = -errno;
		snprintf(why, len, "netlink (nftables): %s", strerror(-r));
		return r;
	}
	if (sendto(fd, b->buf, b->len, 0, (struct sockaddr *)&sa, sizeof(sa)) !=
	    (ssize_t)b->len) {
		r = -errno;
		snprintf(why, len, "cannot send %s: %s", what, strerror(-r));
	} else {
		r = read_answers(fd, b, what, why, len);
	}
	close(fd);
	return r;
}

int nft_redirect_rules(uint16_t tcp_port, uint16_t dns_port, uint32_t flows,
		       char *why, size_t len)
{
	struct nft_batch b = { .len = 0 };

	batch_edge(&b, NFNL_MSG_BATCH_BEGIN);
	for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++)
		add_family(&b, &families[i], tcp_port, dns_port, flows);
	batch_edge(&b, NFNL_MSG_BATCH_END);
	return send_batch(&b, "the redirect rules", why, len);
}

int nft_log_rules(uint16_t group, char *why, size_t len)
{
	struct nft_batch b = { .len = 0 };

	batch_edge(&b, NFNL_MSG_BATCH_BEGIN);
	for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++)
		add_log(&b, &families[i], group);
	batch_edge(&b, NFNL_MSG_BATCH_END);
	return send_batch(&b, "the log rules", why, len);
}
