/*
 * dnsmsg.c - DNS queries in, responses out, over ldns.
 *
 * The header is looked at by hand first: it decides whether a packet gets
 * an answer at all (never a response, never something shorter than a
 * header) before ldns spends any work on it.  ldns then decodes the whole
 * message, following compression pointers with its own bounds (names of at
 * most 255 bytes, a limited number of jumps), and builds the responses.
 * The question is echoed exactly as asked, case included, because
 * resolvers that randomise case (DNS 0x20) check it.
 */
#include "dnsmsg.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include <ldns/ldns.h>

#define DNS_FLAG_QR		0x80	/* in byte 2 */
#define DNS_FLAG_RD		0x01	/* in byte 2 */
#define DNS_LABEL_MAX		63

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

static int take_question(const ldns_pkt *p, struct dns_query *q)
{
	const ldns_rr_list *list = ldns_pkt_question(p);
	const ldns_rdf *owner;
	const ldns_rr *rr;
	size_t n;
	int r;

	if (!list || ldns_rr_list_rr_count(list) != 1)
		return -EINVAL;
	rr = ldns_rr_list_rr(list, 0);
	owner = rr ? ldns_rr_owner(rr) : NULL;
	if (!owner || ldns_rdf_get_type(owner) != LDNS_RDF_TYPE_DNAME)
		return -EINVAL;
	n = ldns_rdf_size(owner);
	if (n == 0 || n > sizeof(q->qname_wire))
		return -EINVAL;
	memcpy(q->qname_wire, ldns_rdf_data(owner), n);
	q->qname_wire_len = n;
	q->qtype = (uint16_t)ldns_rr_get_type(rr);
	q->qclass = (uint16_t)ldns_rr_get_class(rr);
	q->edns = ldns_pkt_edns(p);
	q->edns_udp_size = ldns_pkt_edns_udp_size(p);
	r = wire_to_name(q->qname_wire, n, q->name, sizeof(q->name));
	if (r)
		q->name[0] = '\0';
	return r;
}

int dnsmsg_parse_query(const uint8_t *pkt, size_t len, struct dns_query *q)
{
	ldns_pkt *p = NULL;
	int r;

	memset(q, 0, sizeof(*q));
	if (!pkt)
		return -EBADMSG;
	if (len >= 2)
		q->id = be16(pkt);
	if (len < DNS_HEADER_LEN || pkt[2] & DNS_FLAG_QR)
		return -EBADMSG;
	q->rd = pkt[2] & DNS_FLAG_RD;
	if ((pkt[2] >> 3 & 0x0f) != LDNS_PACKET_QUERY)
		return -EOPNOTSUPP;
	/* exactly one question; a query carries no answers or authority */
	if (be16(pkt + 4) != 1 || be16(pkt + 6) || be16(pkt + 8))
		return -EINVAL;
	if (ldns_wire2pkt(&p, pkt, len) != LDNS_STATUS_OK) {
		ldns_pkt_free(p);
		return -EINVAL;
	}
	r = take_question(p, q);
	ldns_pkt_free(p);
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

static ldns_rr *rr_new(const struct resp *r, uint16_t type, bool question)
{
	ldns_rdf *owner;
	ldns_rr *rr;

	rr = ldns_rr_new();
	if (!rr)
		return NULL;
	owner = ldns_dname_new_frm_data((uint16_t)r->qname_len, r->qname);
	if (!owner) {
		ldns_rr_free(rr);
		return NULL;
	}
	ldns_rr_set_owner(rr, owner);
	ldns_rr_set_type(rr, (ldns_rr_type)type);
	ldns_rr_set_class(rr, (ldns_rr_class)(question ? r->qclass : DNS_CLASS_IN));
	ldns_rr_set_question(rr, question);
	ldns_rr_set_ttl(rr, r->ttl);
	return rr;
}

/* An A or AAAA record for one address; NULL only when out of memory. */
static ldns_rr *rr_address(const struct resp *r, const struct sockaddr_storage *ss)
{
	const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)ss;
	const struct sockaddr_in *sin = (const struct sockaddr_in *)ss;
	ldns_rdf *rd;
	ldns_rr *rr;

	rr = rr_new(r, r->qtype, false);
	if (!rr)
		return NULL;
	if (ss->ss_family == AF_INET)
		rd = ldns_rdf_new_frm_data(LDNS_RDF_TYPE_A, 4, &sin->sin_addr);
	else
		rd = ldns_rdf_new_frm_data(LDNS_RDF_TYPE_AAAA, 16, &sin6->sin6_addr);
	/* ldns_rr_push_rdf() takes the rdf itself, not a copy */
	if (!rd || !ldns_rr_push_rdf(rr, rd)) {
		ldns_rdf_deep_free(rd);
		ldns_rr_free(rr);
		return NULL;
	}
	return rr;
}

static int push(ldns_pkt *p, ldns_pkt_section s, ldns_rr *rr)
{
	if (!rr)
		return -ENOMEM;
	if (!ldns_pkt_push_rr(p, s, rr)) {
		ldns_rr_free(rr);
		return -ENOMEM;
	}
	return 0;
}

static bool wanted(const struct resp *r, const struct sockaddr_storage *ss)
{
	if (r->qclass != DNS_CLASS_IN)
		return false;
	return (r->qtype == DNS_TYPE_A && ss->ss_family == AF_INET) ||
	       (r->qtype == DNS_TYPE_AAAA && ss->ss_family == AF_INET6);
}

static int add_records(ldns_pkt *p, const struct resp *r)
{
	size_t i, added = 0;
	int ret;

	if (r->qname) {
		ret = push(p, LDNS_SECTION_QUESTION, rr_new(r, r->qtype, true));
		if (ret)
			return ret;
	}
	for (i = 0; r->qname && !r->tc && i < r->naddrs; i++) {
		if (!wanted(r, &r->addrs[i]) || added == DNS_ANSWERS_MAX)
			continue;
		ret = push(p, LDNS_SECTION_ANSWER, rr_address(r, &r->addrs[i]));
		if (ret)
			return ret;
		added++;
	}
	return 0;
}

static int build(const struct resp *r, uint8_t *out, size_t *outlen)
{
	uint8_t *wire = NULL;
	size_t size = 0;
	ldns_pkt *p;
	int ret;

	p = ldns_pkt_new();
	if (!p)
		return -ENOMEM;
	ldns_pkt_set_id(p, r->id);
	ldns_pkt_set_qr(p, true);
	ldns_pkt_set_opcode(p, (ldns_pkt_opcode)r->opcode);
	ldns_pkt_set_aa(p, r->rcode == DNS_RCODE_NOERROR ||
			   r->rcode == DNS_RCODE_NXDOMAIN);
	ldns_pkt_set_tc(p, r->tc);
	ldns_pkt_set_rd(p, r->rd);
	ldns_pkt_set_ra(p, true);
	ldns_pkt_set_rcode(p, (uint8_t)r->rcode);
	ret = add_records(p, r);
	if (!ret && ldns_pkt2wire(&wire, p, &size) != LDNS_STATUS_OK)
		ret = -ENOMEM;
	ldns_pkt_free(p);
	if (ret)
		return ret;
	if (size > *outlen) {
		free(wire);
		return -ENOSPC;
	}
	memcpy(out, wire, size);
	*outlen = size;
	free(wire);
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
	r->opcode = LDNS_PACKET_QUERY;
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
 * The question of a packet that dnsmsg_parse_query() refused, if ldns can
 * still decode exactly one.
 */
static void raw_question(const uint8_t *pkt, size_t len, struct dns_query *tmp,
			 struct resp *r)
{
	ldns_pkt *p = NULL;

	if (len < DNS_HEADER_LEN || be16(pkt + 4) != 1)
		return;
	if (ldns_wire2pkt(&p, pkt, len) != LDNS_STATUS_OK) {
		ldns_pkt_free(p);
		return;
	}
	memset(tmp, 0, sizeof(*tmp));
	/* a name that is no hostname is still echoed as it was asked */
	if (take_question(p, tmp) != -EINVAL && tmp->qname_wire_len) {
		r->qname = tmp->qname_wire;
		r->qname_len = tmp->qname_wire_len;
		r->qtype = tmp->qtype;
		r->qclass = tmp->qclass;
	}
	ldns_pkt_free(p);
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
