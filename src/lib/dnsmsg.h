/*
 * dnsmsg.h - DNS messages for the sandbox's responder.
 *
 * The responder inside the sandbox's netns answers every query itself:
 * names the policy allows get the addresses the supervisor chose, all
 * others NXDOMAIN or REFUSED, and nothing the sandbox asks is ever sent to
 * another resolver.  These functions turn a query's bytes into a struct
 * and a decision into a response's bytes.
 *
 * No I/O, no global state.  Safe on hostile input (read by glibc's
 * resolver, every read bounded by the packet, names by 255 bytes, looping
 * compression pointers refused: dnsmsg.c).  Responses carry no EDNS record, so over UDP they must fit in
 * DNS_UDP_MAX bytes: pass that as the room and a larger answer comes back
 * truncated (TC) for the client to retry over TCP.
 */
#ifndef CORRAL_DNSMSG_H
#define CORRAL_DNSMSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define DNS_HEADER_LEN		12
#define DNS_NAME_MAX		253	/* text, without trailing dot */
#define DNS_WIRE_NAME_MAX	255
#define DNS_UDP_MAX		512	/* responses over UDP (no EDNS in them) */
#define DNS_TCP_MAX		65535
#define DNS_ANSWERS_MAX		32	/* addresses put in one response */

#define DNS_RCODE_NOERROR	0
#define DNS_RCODE_FORMERR	1
#define DNS_RCODE_SERVFAIL	2
#define DNS_RCODE_NXDOMAIN	3
#define DNS_RCODE_NOTIMP	4
#define DNS_RCODE_REFUSED	5

#define DNS_TYPE_A		1
#define DNS_TYPE_AAAA		28
#define DNS_CLASS_IN		1

struct dns_query {
	uint16_t id;
	uint16_t qtype;
	uint16_t qclass;
	bool rd;			/* recursion desired, echoed */
	bool edns;			/* the query had an OPT record */
	uint16_t edns_udp_size;
	/*
	 * The name, lowercase, without the trailing dot ("" is the root).
	 * Only letters, digits, '-' and '_' in labels; anything else makes
	 * dnsmsg_parse_query() return -EILSEQ with name left "".
	 */
	char name[DNS_NAME_MAX + 1];
	/* the name exactly as asked (case kept: resolvers check the echo) */
	uint8_t qname_wire[DNS_WIRE_NAME_MAX];
	size_t qname_wire_len;
};

/*
 * Decode a query.  Returns 0 with *q filled, or
 *   -EBADMSG     not worth an answer: shorter than a header, or a response
 *                (QR=1; answering those invites loops); drop it;
 *   -EINVAL      malformed, not exactly one question, answer or authority
 *                records present: answer FORMERR;
 *   -EOPNOTSUPP  opcode other than QUERY: answer NOTIMP;
 *   -EILSEQ      well-formed, but the name is no hostname: *q is complete
 *                except q->name; answer it from q (NXDOMAIN or REFUSED).
 * q->id is set whenever the packet has one.
 */
int dnsmsg_parse_query(const uint8_t *pkt, size_t len, struct dns_query *q);

/* The response code for an error of dnsmsg_parse_query(), -1 for none. */
int dnsmsg_rcode_for(int err);

/*
 * A NOERROR response to q with one A or AAAA record per address (an
 * array of sockaddr_in / sockaddr_in6 in sockaddr_storage) of the
 * family q->qtype asks for (others are skipped; at most DNS_ANSWERS_MAX),
 * so a query of another type, or for the family with no address here, gets
 * an empty answer.  *outlen: the room in out on entry (DNS_UDP_MAX for UDP,
 * DNS_TCP_MAX for TCP), the response's length on return.  An answer that
 * does not fit is sent truncated (TC, no records).  Returns 0, -ENOSPC when
 * not even the question fits, -ENOMEM, -EINVAL.
 */
int dnsmsg_answer(const struct dns_query *q,
		  const struct sockaddr_storage *addrs, size_t n,
		  uint32_t ttl, uint8_t *out, size_t *outlen);

/*
 * An error response (rcode DNS_RCODE_*): to q when the query parsed (even
 * with -EILSEQ), otherwise to the raw packet, echoing its id, opcode, RD
 * and, when it can be decoded, its single question.  Returns 0, -EINVAL
 * when there is nothing to answer (no id, or a response), -ENOSPC,
 * -ENOMEM.
 */
int dnsmsg_error(const struct dns_query *q, const uint8_t *pkt, size_t len,
		 int rcode, uint8_t *out, size_t *outlen);

/*
 * DNS over TCP: every message has a 2-byte big-endian length in front.
 * dnsmsg_tcp_next() finds the next message in a stream buffer: 1 with
 * *msg, *msglen set and *used = 2 + *msglen; 0 if more bytes are needed;
 * -EINVAL for a zero length.
 */
int dnsmsg_tcp_next(const uint8_t *buf, size_t len, const uint8_t **msg,
		    size_t *msglen, size_t *used);
/* Write the length prefix for a message of msglen bytes; -EMSGSIZE. */
int dnsmsg_tcp_prefix(uint8_t out[2], size_t msglen);

#endif
