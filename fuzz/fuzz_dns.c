/*
 * fuzz_dns.c - libFuzzer target for dnsmsg.c (ldns reads its answers) and the
 * network-off responder's answer (dnsoff.c).
 *
 *   make build-fuzz/fuzz_dns
 *
 * Queries are read by glibc's resolver (libresolv, libc), which is not
 * built with the fuzzer's instrumentation: coverage guides the inputs
 * through our side only, and ASan sees only what our code touches.
 *
 * Every packet goes through what the responder does with it: parse, then
 * answer or refuse.  Whatever is sent back must fit the room it was given,
 * decode with ldns, carry the query's id and be marked a response.  The
 * input is also read as a TCP stream of length-prefixed messages.
 */
#include "dnsmsg.h"
#include "dnsoff.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include <ldns/ldns.h>

static void check_response(const uint8_t *wire, size_t n, size_t room,
			   uint16_t id)
{
	ldns_pkt *p = NULL;

	if (n < DNS_HEADER_LEN || n > room)
		abort();
	if (ldns_wire2pkt(&p, wire, n) != LDNS_STATUS_OK)
		abort();
	if (ldns_pkt_id(p) != id || !ldns_pkt_qr(p) || ldns_pkt_qdcount(p) > 1)
		abort();
	ldns_pkt_free(p);
}

static void respond(const uint8_t *pkt, size_t len)
{
	static uint8_t out[DNS_TCP_MAX];
	struct sockaddr_storage addrs[3];
	struct sockaddr_in6 *sin6;
	struct sockaddr_in *sin;
	struct dns_query q;
	size_t outlen, i;
	char name[DNS_NAME_MAX + 2];
	int r, rcode;

	/* network off: an answer to anything worth one, a printable name */
	outlen = DNS_UDP_MAX;
	if (dnsoff_reply(pkt, len, out, &outlen, name, sizeof(name)) == 0)
		check_response(out, outlen, DNS_UDP_MAX,
			       len >= 2 ? (uint16_t)(pkt[0] << 8 | pkt[1]) : 0);
	if (!memchr(name, '\0', sizeof(name)) || !name[0])
		abort();

	memset(addrs, 0, sizeof(addrs));
	sin = (struct sockaddr_in *)&addrs[0];
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = htonl(0xc0000201);
	sin6 = (struct sockaddr_in6 *)&addrs[1];
	sin6->sin6_family = AF_INET6;
	sin6->sin6_addr.s6_addr[15] = 1;
	addrs[2] = addrs[0];

	r = dnsmsg_parse_query(pkt, len, &q);
	if (r == 0) {
		if (q.qname_wire_len == 0 || strlen(q.name) > DNS_NAME_MAX)
			abort();
		for (i = 0; q.name[i]; i++)
			if (q.name[i] >= 'A' && q.name[i] <= 'Z')
				abort();
		outlen = DNS_UDP_MAX;
		if (dnsmsg_answer(&q, addrs, 3, 60, out, &outlen) == 0)
			check_response(out, outlen, DNS_UDP_MAX, q.id);
		outlen = sizeof(out);
		if (dnsmsg_error(&q, pkt, len, DNS_RCODE_NXDOMAIN, out, &outlen))
			abort();
		check_response(out, outlen, sizeof(out), q.id);
		return;
	}
	if (r == -EBADMSG)
		return;
	if (r != -EINVAL && r != -EOPNOTSUPP && r != -EILSEQ)
		abort();
	rcode = dnsmsg_rcode_for(r);
	outlen = DNS_UDP_MAX;
	if (dnsmsg_error(r == -EILSEQ ? &q : NULL, pkt, len, rcode, out, &outlen))
		abort();
	check_response(out, outlen, DNS_UDP_MAX, q.id);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *msg;
	size_t msglen, used, off = 0;

	respond(data, size);
	/* the same bytes as a DNS-over-TCP stream */
	while (dnsmsg_tcp_next(data + off, size - off, &msg, &msglen, &used) == 1) {
		if (used != msglen + 2 || used > size - off || msg != data + off + 2)
			abort();
		respond(msg, msglen);
		off += used;
	}
	return 0;
}
