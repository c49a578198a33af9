/*
 * dnsmsg.c - DNS queries in, responses out.
 *
 * The header is looked at first: it decides whether a packet gets an
 * answer at all (never a response, never something shorter than a
 * header).  Then the whole message is walked, every record of every
 * section, bounded by the packet: names of at most 255 bytes, labels of
 * at most 63, and a compression pointer only ever pointing back, before
 * itself, so that no name can loop.  The question is echoed exactly as
 * asked, case included, because resolvers that randomise case (DNS 0x20)
 * check it.
 *
 * This was ldns; but its messages drag in its DNSSEC code and with it
 * OpenSSL's libcrypto, which corral no longer links (tls_plugin.h), and a
 * responder that reads one question and writes addresses needs little of
 * it.  tests/unit_dns.c and fuzz/fuzz_dns.c still decode what comes out
 * with ldns, an independent reader.
 */
#include "dnsmsg.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#define DNS_FLAG_QR		0x80	/* in byte 2 */
#define DNS_FLAG_RD		0x01	/* in byte 2 */
#define DNS_FLAG_AA		0x04	/* in byte 2 */
#define DNS_FLAG_TC		0x02	/* in byte 2 */
#define DNS_FLAG_RA		0x80	/* in byte 3 */
#define DNS_LABEL_MAX		63
#define DNS_OPCODE_QUERY	0
#define DNS_TYPE_OPT		41
#define DNS_POINTER		0xc0	/* a label byte's top bits: compression */
#define DNS_RR_FIXED		10	/* type, class, TTL, RDLENGTH */

/* Everything a response is built from. */
struct resp {
	uint16_t id;
	int opcode;
	bool rd;
	int rcode;
	bool tc;
	const uint8_t *qname;		/* NULL: no question section */
	size_t qname_len;
	uint16_t qtype;
	uint16_t qclass;
	const struct sockaddr_storage *addrs;
	size_t naddrs;
	uint32_t ttl;
};

static uint16_t be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static bool host_char(uint8_t ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	       (ch >= '0' && ch <= '9') || ch == '-' || ch == '_';
}

/*
 * Uncompressed wire name -> "label.label", lowercase.  A label with a byte
 * that is not a hostname character ('.', NUL, '*', spaces ...) cannot be
 * in the allowlist and could be misread by anything that prints the name,
 * so it is not turned into text at all: -EILSEQ.
 */
static int wire_to_name(const uint8_t *w, size_t n, char *out, size_t outsize)
{
	size_t i = 0, o = 0, k;

	for (;;) {
		uint8_t l;

		if (i >= n)
			return -EINVAL;
		l = w[i++];
		if (l == 0)
			break;
		if (l > DNS_LABEL_MAX || l > n - i)
			return -EINVAL;
		if (o && o < outsize)
			out[o++] = '.';
		for (k = 0; k < l; k++) {
			uint8_t ch = w[i + k];

			if (!host_char(ch))
				return -EILSEQ;
			if (o + 1 >= outsize)
				return -EINVAL;
			out[o++] = (char)(ch >= 'A' && ch <= 'Z' ? ch + 32 : ch);
		}
		i += l;
	}
	if (i != n)
		return -EINVAL;
	out[o] = '\0';
	return 0;
}

/*
 * The name at *off, uncompressed into out (at most DNS_WIRE_NAME_MAX
 * bytes, *outlen set); *off moves past it as it sits in the packet.
 */
static int read_name(const uint8_t *pkt, size_t len, size_t *off, uint8_t *out,
		     size_t *outlen)
{
	size_t at = *off, o = 0, limit = *off;
	bool jumped = false;

	for (;;) {
		uint8_t l;

		if (at >= len)
			return -EINVAL;
		l = pkt[at];
		if ((l & DNS_POINTER) == DNS_POINTER) {
			size_t to;

			if (at + 1 >= len)
				return -EINVAL;
			to = (size_t)(l & ~DNS_POINTER) << 8 | pkt[at + 1];
			if (!jumped)
				*off = at + 2;
			/*
			 * only backwards, before where this part of the name
			 * began: each jump lands lower than the last, no loop;
			 * and never into the header, where no name is
			 */
			if (to >= limit || to < DNS_HEADER_LEN)
				return -EINVAL;
			jumped = true;
			at = limit = to;
			continue;
		}
		if (l > DNS_LABEL_MAX || l >= len - at || o + 1 + l > DNS_WIRE_NAME_MAX)
			return -EINVAL;
		memcpy(out + o, pkt + at, 1 + (size_t)l);
		o += 1 + (size_t)l;
		at += 1 + (size_t)l;
		if (l == 0)
			break;
	}
	if (!jumped)
		*off = at;
	*outlen = o;
	return 0;
}

/*
 * A whole message with exactly one question: the question into q (name,
 * type, class), every other record read to its end, an OPT record's UDP
 * size taken (EDNS).  -EINVAL for anything out of bounds.
 */
static int read_message(const uint8_t *pkt, size_t len, struct dns_query *q)
{
	uint8_t name[DNS_WIRE_NAME_MAX];
	size_t off = DNS_HEADER_LEN, n, records;

	if (len < DNS_HEADER_LEN || be16(pkt + 4) != 1)
		return -EINVAL;
	if (read_name(pkt, len, &off, q->qname_wire, &q->qname_wire_len) < 0 ||
	    len - off < 4)
		return -EINVAL;
	q->qtype = be16(pkt + off);
	q->qclass = be16(pkt + off + 2);
	off += 4;
	records = (size_t)be16(pkt + 6) + be16(pkt + 8) + be16(pkt + 10);
	for (size_t i = 0; i < records; i++) {
		if (read_name(pkt, len, &off, name, &n) < 0 || len - off < DNS_RR_FIXED)
			return -EINVAL;
		n = be16(pkt + off + 8);		/* RDLENGTH */
		if (len - off - DNS_RR_FIXED < n)
			return -EINVAL;
		/* OPT's class is the sender's UDP payload size */
		if (i >= records - be16(pkt + 10) && be16(pkt + off) == DNS_TYPE_OPT) {
			q->edns = true;
			q->edns_udp_size = be16(pkt + off + 2);
		}
		off += DNS_RR_FIXED + n;
	}
	return 0;
}

int dnsmsg_parse_query(const uint8_t *pkt, size_t len, struct dns_query *q)
{
	int r;

	memset(q, 0, sizeof(*q));
	if (!pkt)
		return -EBADMSG;
	if (len >= 2)
		q->id = be16(pkt);
	if (len < DNS_HEADER_LEN || pkt[2] & DNS_FLAG_QR)
		return -EBADMSG;
	q->rd = pkt[2] & DNS_FLAG_RD;
	if ((pkt[2] >> 3 & 0x0f) != DNS_OPCODE_QUERY)
		return -EOPNOTSUPP;
	/* exactly one question; a query carries no answers or authority */
	if (be16(pkt + 4) != 1 || be16(pkt + 6) || be16(pkt + 8))
		return -EINVAL;
	r = read_message(pkt, len, q);
	if (r == 0)
		r = wire_to_name(q->qname_wire, q->qname_wire_len, q->name, sizeof(q->name));
	if (r == -EINVAL) {	/* nothing but the header's part is kept */
		uint16_t id = q->id;
		bool rd = q->rd;

		memset(q, 0, sizeof(*q));
		q->id = id;
		q->rd = rd;
	}
	if (r)
		q->name[0] = '\0';
	return r;
}

int dnsmsg_rcode_for(int err)
{
	switch (err) {
	case 0:
		return DNS_RCODE_NOERROR;
	case -EINVAL:
		return DNS_RCODE_FORMERR;
	case -EOPNOTSUPP:
		return DNS_RCODE_NOTIMP;
	case -EILSEQ:
		return DNS_RCODE_NXDOMAIN;
	default:
		return -1;
	}
}

/* ---- building responses ----------------------------------------------- */

static bool wanted(const struct resp *r, const struct sockaddr_storage *ss)
{
	if (r->qclass != DNS_CLASS_IN)
		return false;
	return (r->qtype == DNS_TYPE_A && ss->ss_family == AF_INET) ||
	       (r->qtype == DNS_TYPE_AAAA && ss->ss_family == AF_INET6);
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/*
 * The header, the question as asked, then an A or AAAA record per address
 * wanted, each named by a pointer to the question's name (which starts
 * right after the header), or by the root's one byte, shorter than a
 * pointer.  -ENOSPC when it does not fit in *outlen.
 */
static int build(const struct resp *r, uint8_t *out, size_t *outlen)
{
	size_t room = *outlen, n = DNS_HEADER_LEN, added = 0;
	bool aa = r->rcode == DNS_RCODE_NOERROR || r->rcode == DNS_RCODE_NXDOMAIN;

	if (room < DNS_HEADER_LEN)
		return -ENOSPC;
	memset(out, 0, DNS_HEADER_LEN);
	put16(out, r->id);
	out[2] = (uint8_t)(DNS_FLAG_QR | (r->opcode & 0x0f) << 3 | (aa ? DNS_FLAG_AA : 0) |
			   (r->tc ? DNS_FLAG_TC : 0) | (r->rd ? DNS_FLAG_RD : 0));
	out[3] = (uint8_t)(DNS_FLAG_RA | (r->rcode & 0x0f));
	if (r->qname) {
		if (room - n < r->qname_len + 4)
			return -ENOSPC;
		memcpy(out + n, r->qname, r->qname_len);
		n += r->qname_len;
		put16(out + n, r->qtype);
		put16(out + n + 2, r->qclass);
		n += 4;
		put16(out + 4, 1);
	}
	for (size_t i = 0; r->qname && !r->tc && i < r->naddrs; i++) {
		const struct sockaddr_storage *ss = &r->addrs[i];
		bool v4 = ss->ss_family == AF_INET;
		size_t alen = v4 ? 4 : 16, owner = r->qname_len == 1 ? 1 : 2;

		if (!wanted(r, ss) || added == DNS_ANSWERS_MAX)
			continue;
		if (room - n < owner + DNS_RR_FIXED + alen)
			return -ENOSPC;
		if (owner == 1)
			out[n] = 0;
		else
			put16(out + n, DNS_POINTER << 8 | DNS_HEADER_LEN);
		n += owner;
		put16(out + n, r->qtype);
		put16(out + n + 2, DNS_CLASS_IN);
		put16(out + n + 4, (uint16_t)(r->ttl >> 16));
		put16(out + n + 6, (uint16_t)r->ttl);
		put16(out + n + 8, (uint16_t)alen);
		memcpy(out + n + DNS_RR_FIXED,
		       v4 ? (const void *)&((const struct sockaddr_in *)ss)->sin_addr :
		       (const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr, alen);
		n += DNS_RR_FIXED + alen;
		added++;
	}
	put16(out + 6, (uint16_t)added);
	*outlen = n;
	return 0;
}

/* Build r; if it does not fit, the same without records and with TC. */
static int build_or_truncate(struct resp *r, uint8_t *out, size_t *outlen)
{
	size_t room = *outlen;
	int ret;

	ret = build(r, out, outlen);
	if (ret != -ENOSPC)
		return ret;
	r->tc = true;
	*outlen = room;
	return build(r, out, outlen);
}

static void resp_from_query(struct resp *r, const struct dns_query *q)
{
	memset(r, 0, sizeof(*r));
	r->id = q->id;
	r->opcode = DNS_OPCODE_QUERY;
	r->rd = q->rd;
	if (q->qname_wire_len) {
		r->qname = q->qname_wire;
		r->qname_len = q->qname_wire_len;
		r->qtype = q->qtype;
		r->qclass = q->qclass;
	}
}

int dnsmsg_answer(const struct dns_query *q,
		  const struct sockaddr_storage *addrs, size_t n,
		  uint32_t ttl, uint8_t *out, size_t *outlen)
{
	struct resp r;

	if (!q || !out || !outlen || (n && !addrs) || !q->qname_wire_len)
		return -EINVAL;
	resp_from_query(&r, q);
	r.rcode = DNS_RCODE_NOERROR;
	r.addrs = addrs;
	r.naddrs = n;
	r.ttl = ttl;
	return build_or_truncate(&r, out, outlen);
}

/*
 * The question of a packet that dnsmsg_parse_query() refused, if the
 * message can still be read with exactly one.
 */
static void raw_question(const uint8_t *pkt, size_t len, struct dns_query *tmp,
			 struct resp *r)
{
	memset(tmp, 0, sizeof(*tmp));
	/* a name that is no hostname is still echoed as it was asked */
	if (read_message(pkt, len, tmp) == 0 &&
	    wire_to_name(tmp->qname_wire, tmp->qname_wire_len, tmp->name,
			 sizeof(tmp->name)) != -EINVAL) {
		r->qname = tmp->qname_wire;
		r->qname_len = tmp->qname_wire_len;
		r->qtype = tmp->qtype;
		r->qclass = tmp->qclass;
	}
}

int dnsmsg_error(const struct dns_query *q, const uint8_t *pkt, size_t len,
		 int rcode, uint8_t *out, size_t *outlen)
{
	struct dns_query tmp;
	struct resp r;

	if (!out || !outlen || rcode < 0 || rcode > 15)
		return -EINVAL;
	if (q) {
		resp_from_query(&r, q);
	} else {
		if (!pkt || len < 2)
			return -EINVAL;
		memset(&r, 0, sizeof(r));
		r.id = be16(pkt);
		if (len >= 3) {
			if (pkt[2] & DNS_FLAG_QR)
				return -EINVAL;
			r.opcode = pkt[2] >> 3 & 0x0f;
			r.rd = pkt[2] & DNS_FLAG_RD;
		}
		raw_question(pkt, len, &tmp, &r);
	}
	r.rcode = rcode;
	return build_or_truncate(&r, out, outlen);
}

/* ---- TCP framing -------------------------------------------------------- */

int dnsmsg_tcp_next(const uint8_t *buf, size_t len, const uint8_t **msg,
		    size_t *msglen, size_t *used)
{
	size_t n;

	*msg = NULL;
	*msglen = 0;
	*used = 0;
	if (len < 2)
		return 0;
	n = be16(buf);
	if (n == 0)
		return -EINVAL;
	if (len - 2 < n)
		return 0;
	*msg = buf + 2;
	*msglen = n;
	*used = 2 + n;
	return 1;
}

int dnsmsg_tcp_prefix(uint8_t out[2], size_t msglen)
{
	if (msglen > DNS_TCP_MAX)
		return -EMSGSIZE;
	out[0] = (uint8_t)(msglen >> 8);
	out[1] = (uint8_t)msglen;
	return 0;
}
