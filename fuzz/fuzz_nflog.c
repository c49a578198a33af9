/*
 * fuzz_nflog.c - libFuzzer target for nflogmsg.c.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE \
 *         -Iinclude -Isrc/lib fuzz/fuzz_nflog.c src/lib/nflogmsg.c -o fuzz_nflog
 *   ./fuzz_nflog -max_total_time=60 fuzz/corpus/nflog
 *
 * The input is read twice: as a whole netlink message (any attributes,
 * any lengths), and as the copied bytes of a packet (the first byte its
 * family's choice) wrapped as nfnetlink_log wraps one, so that the IP
 * and extension header walk is reached without guessing the wrapping.
 * Beyond memory safety: only the documented results, and a port and an
 * ICMP type in range.
 */
#include "nflog.h"

#include <errno.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define MSG_MAX 4096

static void check(int r, const struct nflog_packet *p)
{
	if (r != 1 && r != 0 && r != -EINVAL)
		abort();
	if (r != 1)
		return;
	if (p->family != AF_INET && p->family != AF_INET6)
		abort();
	if (p->port < -1 || p->port > 65535 || p->icmp_type < -1 || p->icmp_type > 255)
		abort();
	if (p->dst.ss_family != p->family || p->src.ss_family != p->family)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char buf[MSG_MAX] __attribute__((aligned(NLMSG_ALIGNTO)));
	struct nlmsghdr *nh = (struct nlmsghdr *)buf;
	struct nfgenmsg *g = NLMSG_DATA(nh);
	struct nlattr *na = (struct nlattr *)((char *)g + NLMSG_ALIGN(sizeof(*g)));
	struct nflog_packet p;
	size_t n;

	if (size > MSG_MAX - 64)
		return 0;
	/* as a message */
	memset(buf, 0, sizeof(buf));
	memcpy(buf, data, size);
	if (size >= sizeof(*nh))
		check(nflog_parse(nh, size, &p), &p);
	/* as a packet's copy */
	if (size < 1)
		return 0;
	memset(buf, 0, sizeof(buf));
	nh->nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET;
	g->nfgen_family = data[0] & 1 ? AF_INET6 : AF_INET;
	na->nla_type = NFULA_PAYLOAD;
	na->nla_len = (uint16_t)(NLA_HDRLEN + size - 1);
	memcpy((char *)na + NLA_HDRLEN, data + 1, size - 1);
	n = NLMSG_LENGTH(sizeof(*g)) + NLA_ALIGN(na->nla_len);
	nh->nlmsg_len = (uint32_t)n;
	check(nflog_parse(nh, n, &p), &p);
	return 0;
}
