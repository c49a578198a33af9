/*
 * unit_dns.c - the DNS messages of the sandbox's resolver (dnsmsg.c):
 * queries parsed, answers built (and checked with ldns), truncation for
 * UDP, garbage, compression loops and pointers forwards, TCP framing.
 */
#include "dnsmsg.h"
#include "proxy_int.h"
#include "unit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <ldns/ldns.h>
#include <stdio.h>

/* ---- DNS ------------------------------------------------------------------ */

/* A query made by ldns, as a stub resolver would send it. */
static size_t make_query(const char *name, ldns_rr_type type, uint16_t id,
			 bool edns, uint8_t *out, size_t room)
{
	ldns_rdf *dname = ldns_dname_new_frm_str(name);
	uint8_t *wire = NULL;
	size_t size = 0;
	ldns_pkt *p;

	if (!dname)
		return 0;
	p = ldns_pkt_query_new(dname, type, LDNS_RR_CLASS_IN, LDNS_RD);
	if (!p)
		return 0;
	ldns_pkt_set_id(p, id);
	if (edns)
		ldns_pkt_set_edns_udp_size(p, 1232);
	if (ldns_pkt2wire(&wire, p, &size) != LDNS_STATUS_OK || size > room)
		size = 0;
	else
		memcpy(out, wire, size);
	free(wire);
	ldns_pkt_free(p);
	return size;
}

static ldns_pkt *decode(const uint8_t *wire, size_t n)
{
	ldns_pkt *p = NULL;

	if (ldns_wire2pkt(&p, wire, n) != LDNS_STATUS_OK) {
		ldns_pkt_free(p);
		return NULL;
	}
	return p;
}

static void set_v4(struct sockaddr_storage *ss, const char *a)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)ss;

	memset(ss, 0, sizeof(*ss));
	sin->sin_family = AF_INET;
	inet_pton(AF_INET, a, &sin->sin_addr);
}

static void set_v6(struct sockaddr_storage *ss, const char *a)
{
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	sin6->sin6_family = AF_INET6;
	inet_pton(AF_INET6, a, &sin6->sin6_addr);
}

TEST(dns_parse_query)
{
	uint8_t pkt[512];
	struct dns_query q;
	size_t n;

	n = make_query("WWW.Example.COM.", LDNS_RR_TYPE_A, 0x1234, false, pkt, sizeof(pkt));
	CHECK(n > 0);
	CHECK(dnsmsg_parse_query(pkt, n, &q) == 0);
	CHECK(q.id == 0x1234 && q.rd);
	CHECK(q.qtype == DNS_TYPE_A && q.qclass == DNS_CLASS_IN);
	CHECK(!strcmp(q.name, "www.example.com"));
	CHECK(q.qname_wire_len == 17 && !memcmp(q.qname_wire, "\x03WWW\x07" "Example\x03" "COM", 16));
	CHECK(!q.edns);

	n = make_query("a.test.", LDNS_RR_TYPE_AAAA, 7, true, pkt, sizeof(pkt));
	CHECK(dnsmsg_parse_query(pkt, n, &q) == 0);
	CHECK(q.qtype == DNS_TYPE_AAAA && q.edns && q.edns_udp_size == 1232);

	n = make_query(".", LDNS_RR_TYPE_NS, 8, false, pkt, sizeof(pkt));
	CHECK(dnsmsg_parse_query(pkt, n, &q) == 0 && !strcmp(q.name, ""));
}

TEST(dns_answer_a_records)
{
	struct sockaddr_storage addrs[3];
	uint8_t pkt[512], out[DNS_UDP_MAX];
	struct dns_query q;
	size_t n, outlen = sizeof(out);
	ldns_pkt *p;
	ldns_rr *rr;

	set_v4(&addrs[0], "192.0.2.1");
	set_v6(&addrs[1], "2001:db8::1");
	set_v4(&addrs[2], "192.0.2.2");
	n = make_query("Allowed.Test.", LDNS_RR_TYPE_A, 0xbeef, false, pkt, sizeof(pkt));
	CHECK(dnsmsg_parse_query(pkt, n, &q) == 0);
	CHECK(dnsmsg_answer(&q, addrs, 3, 60, out, &outlen) == 0);
	p = decode(out, outlen);
	CHECK(p != NULL);
	if (!p)
		return;
	CHECK(ldns_pkt_id(p) == 0xbeef && ldns_pkt_qr(p) && ldns_pkt_rd(p));
	CHECK(ldns_pkt_get_rcode(p) == LDNS_RCODE_NOERROR && !ldns_pkt_tc(p));
	CHECK(ldns_pkt_qdcount(p) == 1 && ldns_pkt_ancount(p) == 2);
	/* the question comes back with the case it was asked in */
	rr = ldns_rr_list_rr(ldns_pkt_question(p), 0);
	CHECK(rr && ldns_rdf_size(ldns_rr_owner(rr)) == q.qname_wire_len &&
	      !memcmp(ldns_rdf_data(ldns_rr_owner(rr)), q.qname_wire, q.qname_wire_len));
	rr = ldns_rr_list_rr(ldns_pkt_answer(p), 1);
	CHECK(rr && ldns_rr_get_type(rr) == LDNS_RR_TYPE_A && ldns_rr_ttl(rr) == 60);
	CHECK(rr && !memcmp(ldns_rdf_data(ldns_rr_rdf(rr, 0)), "\xc0\x00\x02\x02", 4));
	ldns_pkt_free(p);
}

TEST(dns_answer_aaaa_and_other_types)
{
	struct sockaddr_storage addrs[2];
	uint8_t pkt[512], out[DNS_UDP_MAX];
	struct dns_query q;
	size_t n, outlen;
	ldns_pkt *p;

	set_v4(&addrs[0], "192.0.2.1");
	set_v6(&addrs[1], "2001:db8::1");
	n = make_query("a.test.", LDNS_RR_TYPE_AAAA, 1, false, pkt, sizeof(pkt));
	CHECK(dnsmsg_parse_query(pkt, n, &q) == 0);
	outlen = sizeof(out);
	CHECK(dnsmsg_answer(&q, addrs, 2, 60, out, &outlen) == 0);
	p = decode(out, outlen);
	CHECK(p && ldns_pkt_ancount(p) == 1);
	ldns_pkt_free(p);

	/* MX, TXT, HTTPS...: NOERROR with nothing in it */
	n = make_query("a.test.", LDNS_RR_TYPE_TXT, 2, false, pkt, sizeof(pkt));
	CHECK(dnsmsg_parse_query(pkt, n, &q) == 0);
	outlen = sizeof(out);
	CHECK(dnsmsg_answer(&q, addrs, 2, 60, out, &outlen) == 0);
	p = decode(out, outlen);
	CHECK(p && ldns_pkt_ancount(p) == 0 &&
	      ldns_pkt_get_rcode(p) == LDNS_RCODE_NOERROR);
	ldns_pkt_free(p);
}

TEST(dns_answer_truncates_for_udp)
{
	static struct sockaddr_storage addrs[40];
	static uint8_t out[DNS_TCP_MAX];
	uint8_t pkt[512];
	struct dns_query q;
	size_t n, i, outlen;
	ldns_pkt *p;

	for (i = 0; i < 40; i++)
		set_v6(&addrs[i], "2001:db8::1");
	n = make_query("a.test.", LDNS_RR_TYPE_AAAA, 3, false, pkt, sizeof(pkt));
	CHECK(dnsmsg_parse_query(pkt, n, &q) == 0);
	outlen = DNS_UDP_MAX;
	CHECK(dnsmsg_answer(&q, addrs, 40, 60, out, &outlen) == 0);
	CHECK(outlen <= DNS_UDP_MAX);
	p = decode(out, outlen);
	CHECK(p && ldns_pkt_tc(p) && ldns_pkt_ancount(p) == 0 && ldns_pkt_qdcount(p) == 1);
	ldns_pkt_free(p);
	/* over TCP it all fits, capped at DNS_ANSWERS_MAX */
	outlen = DNS_TCP_MAX;
	CHECK(dnsmsg_answer(&q, addrs, 40, 60, out, &outlen) == 0);
	p = decode(out, outlen);
	CHECK(p && !ldns_pkt_tc(p) && ldns_pkt_ancount(p) == DNS_ANSWERS_MAX);
	ldns_pkt_free(p);
	outlen = 8;
	CHECK(dnsmsg_answer(&q, addrs, 40, 60, out, &outlen) == -ENOSPC);
}

TEST(dns_error_responses)
{
	uint8_t pkt[512], out[DNS_UDP_MAX];
	struct dns_query q;
	size_t n, outlen = sizeof(out);
	ldns_pkt *p;

	n = make_query("Denied.Test.", LDNS_RR_TYPE_A, 0x4242, false, pkt, sizeof(pkt));
	CHECK(dnsmsg_parse_query(pkt, n, &q) == 0);
	CHECK(dnsmsg_error(&q, pkt, n, DNS_RCODE_NXDOMAIN, out, &outlen) == 0);
	p = decode(out, outlen);
	CHECK(p && ldns_pkt_id(p) == 0x4242 && ldns_pkt_qr(p));
	CHECK(p && ldns_pkt_get_rcode(p) == LDNS_RCODE_NXDOMAIN);
	CHECK(p && ldns_pkt_qdcount(p) == 1 && ldns_pkt_ancount(p) == 0);
	ldns_pkt_free(p);

	outlen = sizeof(out);
	CHECK(dnsmsg_error(NULL, pkt, n, DNS_RCODE_REFUSED, out, &outlen) == 0);
	p = decode(out, outlen);
	CHECK(p && ldns_pkt_get_rcode(p) == LDNS_RCODE_REFUSED && ldns_pkt_qdcount(p) == 1);
	ldns_pkt_free(p);
}

TEST(dns_formerr_for_garbage)
{
	static const uint8_t junk[] = { 0xab, 0xcd, 0x01, 0x00, 0x00, 0x01, 0xff };
	uint8_t out[DNS_UDP_MAX];
	struct dns_query q;
	size_t outlen = sizeof(out);
	ldns_pkt *p;

	CHECK(dnsmsg_parse_query(junk, sizeof(junk), &q) == -EBADMSG);
	CHECK(q.id == 0xabcd);
	CHECK(dnsmsg_error(NULL, junk, sizeof(junk), DNS_RCODE_FORMERR, out, &outlen) == 0);
	CHECK(outlen == DNS_HEADER_LEN);
	p = decode(out, outlen);
	CHECK(p && ldns_pkt_id(p) == 0xabcd && ldns_pkt_rd(p) &&
	      ldns_pkt_get_rcode(p) == LDNS_RCODE_FORMERR && ldns_pkt_qdcount(p) == 0);
	ldns_pkt_free(p);
	outlen = sizeof(out);
	CHECK(dnsmsg_error(NULL, junk, 1, DNS_RCODE_FORMERR, out, &outlen) == -EINVAL);
}

TEST(dns_every_truncation)
{
	uint8_t pkt[512];
	struct dns_query q;
	size_t n, len;
	int ok = 1, r;

	n = make_query("www.example.test.", LDNS_RR_TYPE_A, 9, true, pkt, sizeof(pkt));
	for (len = 0; len < n; len++) {
		r = dnsmsg_parse_query(pkt, len, &q);
		if (r != -EBADMSG && r != -EINVAL)
			ok = 0;
	}
	CHECK(ok);
	CHECK(dnsmsg_parse_query(pkt, n, &q) == 0);
	CHECK(dnsmsg_parse_query(NULL, 0, &q) == -EBADMSG);
}

TEST(dns_compression_loops)
{
	/* header: id, RD, QDCOUNT 1; the name is a pointer to itself */
	static const uint8_t self[] = {
		0, 1, 0x01, 0, 0, 1, 0, 0, 0, 0, 0, 0,
		0xc0, 12, 0, 1, 0, 1,
	};
	/* two pointers to each other */
	static const uint8_t pair[] = {
		0, 1, 0x01, 0, 0, 1, 0, 0, 0, 0, 0, 0,
		1, 'a', 0xc0, 16, 0xc0, 12, 0, 1, 0, 1,
	};
	/* a pointer past the end */
	static const uint8_t past[] = {
		0, 1, 0x01, 0, 0, 1, 0, 0, 0, 0, 0, 0,
		0xc0, 200, 0, 1, 0, 1,
	};
	/* a label running past the end */
	static const uint8_t label[] = {
		0, 1, 0x01, 0, 0, 1, 0, 0, 0, 0, 0, 0,
		40, 'a', 'b', 0, 0, 1, 0, 1,
	};
	struct dns_query q;

	CHECK(dnsmsg_parse_query(self, sizeof(self), &q) == -EINVAL);
	CHECK(dnsmsg_parse_query(pair, sizeof(pair), &q) == -EINVAL);
	CHECK(dnsmsg_parse_query(past, sizeof(past), &q) == -EINVAL);
	CHECK(dnsmsg_parse_query(label, sizeof(label), &q) == -EINVAL);
}

/*
 * glibc's reader (dnsmsg.c): a pointer may go forwards or into the
 * header, the question is echoed uncompressed whatever it pointed at, a
 * loop through a forward pointer is cut, and a message must end at its
 * last record.
 */
TEST(dns_pointers_forwards_and_trailing_bytes)
{
	/* "WwW" then a pointer forwards to the additional record's "tEst" */
	static const uint8_t fwd[] = {
		0, 13, 0x01, 0, 0, 1, 0, 0, 0, 0, 0, 1,
		3, 'W', 'w', 'W', 0xc0, 22, 0, 1, 0, 1,
		4, 't', 'E', 's', 't', 0, 0, 1, 0, 1, 0, 0, 0, 9, 0, 4, 192, 0, 2, 1,
	};
	/* the question points forwards to a name that points back to it */
	static const uint8_t loop[] = {
		0, 14, 0x01, 0, 0, 1, 0, 0, 0, 0, 0, 1,
		0xc0, 18, 0, 1, 0, 1,
		1, 'b', 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 9, 0, 0,
	};
	/* into the header: the id's bytes are a label "a", the flags' a "\0" */
	static const uint8_t hdr[] = {
		1, 'a', 0x01, 0, 0, 1, 0, 0, 0, 0, 0, 0,
		0xc0, 0, 0, 1, 0, 1,
	};
	uint8_t pkt[512], out[DNS_UDP_MAX];
	struct sockaddr_storage a;
	struct dns_query q;
	size_t n, outlen = sizeof(out);
	ldns_pkt *p;
	ldns_rr *rr;

	CHECK(dnsmsg_parse_query(fwd, sizeof(fwd), &q) == 0);
	CHECK(!strcmp(q.name, "www.test") && q.qname_wire_len == 10 &&
	      !memcmp(q.qname_wire, "\x03WwW\x04tEst", 10));
	set_v4(&a, "192.0.2.7");
	CHECK(dnsmsg_answer(&q, &a, 1, 60, out, &outlen) == 0);
	p = decode(out, outlen);
	rr = p ? ldns_rr_list_rr(ldns_pkt_question(p), 0) : NULL;
	CHECK(rr && ldns_rdf_size(ldns_rr_owner(rr)) == 10 &&
	      !memcmp(ldns_rdf_data(ldns_rr_owner(rr)), q.qname_wire, 10));
	rr = p ? ldns_rr_list_rr(ldns_pkt_answer(p), 0) : NULL;
	CHECK(rr && ldns_rdf_size(ldns_rr_owner(rr)) == 10 &&
	      !memcmp(ldns_rdf_data(ldns_rr_owner(rr)), q.qname_wire, 10));
	ldns_pkt_free(p);

	CHECK(dnsmsg_parse_query(loop, sizeof(loop), &q) == -EINVAL);

	CHECK(dnsmsg_parse_query(hdr, sizeof(hdr), &q) == -EILSEQ);
	CHECK(q.id == 0x0161 && q.qname_wire_len == 5 &&
	      !memcmp(q.qname_wire, "\x01" "a\x01\x00\x00", 5));

	/* one byte after the last record */
	n = make_query("a.test.", LDNS_RR_TYPE_A, 15, true, pkt, sizeof(pkt) - 1);
	CHECK(n > 0 && dnsmsg_parse_query(pkt, n, &q) == 0);
	pkt[n] = 0;
	CHECK(dnsmsg_parse_query(pkt, n + 1, &q) == -EINVAL && q.id == 15);
}

/* OPT and up to three more records; past that, FORMERR before any is read */
TEST(dns_records_bounded)
{
	static const uint8_t rec[] = { 0, 0, 1, 0, 1, 0, 0, 0, 9, 0, 4, 192, 0, 2, 1 };
	uint8_t pkt[512];
	struct dns_query q;
	size_t n;
	int i;

	n = make_query("a.test.", LDNS_RR_TYPE_A, 16, true, pkt, sizeof(pkt) - 5 * sizeof(rec));
	CHECK(n > 0 && pkt[11] == 1);
	for (i = 2; i <= 5; i++) {
		memcpy(pkt + n, rec, sizeof(rec));
		n += sizeof(rec);
		pkt[11] = (uint8_t)i;
		CHECK(dnsmsg_parse_query(pkt, n, &q) == (i <= 4 ? 0 : -EINVAL));
	}
	CHECK(q.id == 16);
}

TEST(dns_long_names)
{
	/* a name of 128 one-byte labels: 256 bytes on the wire, over the limit */
	uint8_t pkt[512];
	struct dns_query q;
	size_t n = 0, i;

	memcpy(pkt, "\x00\x02\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00", 12);
	n = 12;
	for (i = 0; i < 128; i++) {
		pkt[n++] = 1;
		pkt[n++] = 'a';
	}
	pkt[n++] = 0;
	memcpy(pkt + n, "\x00\x01\x00\x01", 4);
	n += 4;
	CHECK(dnsmsg_parse_query(pkt, n, &q) == -EINVAL);
	/* 127 labels: 255 bytes, the largest name */
	n = 12;
	for (i = 0; i < 127; i++) {
		pkt[n++] = 1;
		pkt[n++] = 'a';
	}
	pkt[n++] = 0;
	memcpy(pkt + n, "\x00\x01\x00\x01", 4);
	n += 4;
	CHECK(dnsmsg_parse_query(pkt, n, &q) == 0);
	CHECK(strlen(q.name) == 253);
}

TEST(dns_question_counts_and_sections)
{
	uint8_t pkt[512];
	struct dns_query q;
	size_t n;

	n = make_query("a.test.", LDNS_RR_TYPE_A, 5, false, pkt, sizeof(pkt));
	pkt[5] = 2;		/* QDCOUNT 2 */
	CHECK(dnsmsg_parse_query(pkt, n, &q) == -EINVAL);
	pkt[5] = 0;
	CHECK(dnsmsg_parse_query(pkt, n, &q) == -EINVAL);
	pkt[5] = 1;
	pkt[7] = 1;		/* ANCOUNT 1 */
	CHECK(dnsmsg_parse_query(pkt, n, &q) == -EINVAL);
	CHECK(dnsmsg_rcode_for(-EINVAL) == DNS_RCODE_FORMERR);
	pkt[7] = 0;
	pkt[11] = 3;		/* ARCOUNT 3, none there */
	CHECK(dnsmsg_parse_query(pkt, n, &q) == -EINVAL);
}

TEST(dns_two_real_questions)
{
	/* two well-formed questions: a.test A, b.test A */
	static const uint8_t two[] = {
		0, 6, 0x01, 0, 0, 2, 0, 0, 0, 0, 0, 0,
		1, 'a', 4, 't', 'e', 's', 't', 0, 0, 1, 0, 1,
		1, 'b', 0xc0, 14, 0, 1, 0, 1,
	};
	uint8_t out[DNS_UDP_MAX];
	struct dns_query q;
	size_t outlen = sizeof(out);
	ldns_pkt *p;

	CHECK(dnsmsg_parse_query(two, sizeof(two), &q) == -EINVAL);
	CHECK(dnsmsg_error(NULL, two, sizeof(two), DNS_RCODE_FORMERR, out, &outlen) == 0);
	p = decode(out, outlen);
	CHECK(p && ldns_pkt_qdcount(p) == 0 && ldns_pkt_id(p) == 6);
	ldns_pkt_free(p);
}

TEST(dns_responses_and_opcodes)
{
	uint8_t pkt[512], out[DNS_UDP_MAX];
	struct dns_query q;
	size_t n, outlen = sizeof(out);
	ldns_pkt *p;

	n = make_query("a.test.", LDNS_RR_TYPE_A, 10, false, pkt, sizeof(pkt));
	pkt[2] |= 0x80;		/* QR: a response */
	CHECK(dnsmsg_parse_query(pkt, n, &q) == -EBADMSG);
	CHECK(dnsmsg_rcode_for(-EBADMSG) == -1);
	CHECK(dnsmsg_error(NULL, pkt, n, DNS_RCODE_FORMERR, out, &outlen) == -EINVAL);
	pkt[2] &= 0x7f;
	pkt[2] |= 5 << 3;	/* opcode UPDATE */
	CHECK(dnsmsg_parse_query(pkt, n, &q) == -EOPNOTSUPP);
	outlen = sizeof(out);
	CHECK(dnsmsg_error(NULL, pkt, n, dnsmsg_rcode_for(-EOPNOTSUPP), out, &outlen) == 0);
	p = decode(out, outlen);
	CHECK(p && ldns_pkt_get_rcode(p) == LDNS_RCODE_NOTIMPL &&
	      ldns_pkt_get_opcode(p) == LDNS_PACKET_UPDATE);
	ldns_pkt_free(p);
}

TEST(dns_names_that_are_not_hostnames)
{
	/* "a.b" as one label, and a label with NUL */
	static const uint8_t dot[] = {
		0, 11, 0x01, 0, 0, 1, 0, 0, 0, 0, 0, 0,
		3, 'a', '.', 'b', 4, 't', 'e', 's', 't', 0, 0, 1, 0, 1,
	};
	static const uint8_t nul[] = {
		0, 12, 0x01, 0, 0, 1, 0, 0, 0, 0, 0, 0,
		3, 'a', 0, 'b', 4, 't', 'e', 's', 't', 0, 0, 1, 0, 1,
	};
	uint8_t out[DNS_UDP_MAX];
	struct dns_query q;
	size_t outlen = sizeof(out);
	ldns_pkt *p;
	ldns_rr *rr;

	CHECK(dnsmsg_parse_query(dot, sizeof(dot), &q) == -EILSEQ);
	CHECK(q.name[0] == '\0' && q.id == 11 && q.qtype == DNS_TYPE_A);
	CHECK(dnsmsg_error(&q, dot, sizeof(dot), DNS_RCODE_NXDOMAIN, out, &outlen) == 0);
	p = decode(out, outlen);
	rr = p ? ldns_rr_list_rr(ldns_pkt_question(p), 0) : NULL;
	CHECK(rr && ldns_rdf_size(ldns_rr_owner(rr)) == 10 &&
	      !memcmp(ldns_rdf_data(ldns_rr_owner(rr)), dot + 12, 10));
	ldns_pkt_free(p);
	CHECK(dnsmsg_parse_query(nul, sizeof(nul), &q) == -EILSEQ);
	CHECK(dnsmsg_rcode_for(-EILSEQ) == DNS_RCODE_NXDOMAIN);
}

TEST(dns_bit_flips_never_crash)
{
	uint8_t pkt[512], buf[512], out[DNS_UDP_MAX];
	struct sockaddr_storage a;
	struct dns_query q;
	size_t n, i, outlen;
	int bit, r, ok = 1;

	set_v4(&a, "192.0.2.9");
	n = make_query("www.example.test.", LDNS_RR_TYPE_A, 9, true, pkt, sizeof(pkt));
	for (i = 0; i < n; i++) {
		for (bit = 0; bit < 8; bit++) {
			memcpy(buf, pkt, n);
			buf[i] ^= (uint8_t)(1 << bit);
			r = dnsmsg_parse_query(buf, n, &q);
			outlen = sizeof(out);
			if (r == 0 || r == -EILSEQ)
				r = r ? dnsmsg_error(&q, buf, n, 3, out, &outlen) :
					dnsmsg_answer(&q, &a, 1, 5, out, &outlen);
			else if (r != -EBADMSG)
				r = dnsmsg_error(NULL, buf, n, 1, out, &outlen);
			else
				r = 0;
			if (r != 0 || outlen > sizeof(out))
				ok = 0;
		}
	}
	CHECK(ok);
}

TEST(dns_tcp_framing)
{
	static const uint8_t stream[] = {
		0x00, 0x03, 'a', 'b', 'c',
		0x00, 0x02, 'd', 'e',
		0x00, 0x05, 'f',
	};
	static const uint8_t zero[] = { 0x00, 0x00, 0x01 };
	const uint8_t *msg;
	size_t msglen, used, off = 0;
	uint8_t pre[2];

	CHECK(dnsmsg_tcp_next(stream, 1, &msg, &msglen, &used) == 0);
	CHECK(dnsmsg_tcp_next(stream, sizeof(stream), &msg, &msglen, &used) == 1);
	CHECK(msglen == 3 && msg == stream + 2 && used == 5);
	off += used;
	CHECK(dnsmsg_tcp_next(stream + off, sizeof(stream) - off, &msg, &msglen, &used) == 1);
	CHECK(msglen == 2 && !memcmp(msg, "de", 2));
	off += used;
	CHECK(dnsmsg_tcp_next(stream + off, sizeof(stream) - off, &msg, &msglen, &used) == 0);
	CHECK(dnsmsg_tcp_next(zero, sizeof(zero), &msg, &msglen, &used) == -EINVAL);
	CHECK(dnsmsg_tcp_prefix(pre, 300) == 0 && pre[0] == 1 && pre[1] == 44);
	CHECK(dnsmsg_tcp_prefix(pre, 65536) == -EMSGSIZE);
}

/* ---- transparent mode's names ------------------------------------------- */

/*
 * Every name of 100.64.0.0/16 (a wildcard lets a sandbox ask for them
 * all): each its own address, in the order asked, the same one when asked
 * again, after the table grew under it; the next name has none.  Found by
 * hash: with the scan it replaced, these 65534 names cost seconds here.
 */
TEST(transparent_names_all_of_the_range)
{
	struct proxy px = { 0 };
	struct sockaddr_storage ss;
	const struct sockaddr_in *sin = (const struct sockaddr_in *)&ss;
	char name[64];
	uint32_t i, bad = 0;

	for (i = 0; i < 65534; i++) {
		snprintf(name, sizeof(name), "n%u.example.test", i);
		if (transparent_addr(&px, name, &ss) ||
		    ntohl(sin->sin_addr.s_addr) != 0x64400000u + i + 1)
			bad++;
	}
	CHECK(bad == 0);
	for (i = 0; i < 65534; i += 7) {
		snprintf(name, sizeof(name), "n%u.example.test", i);
		if (transparent_addr(&px, name, &ss) ||
		    ntohl(sin->sin_addr.s_addr) != 0x64400000u + i + 1)
			bad++;
	}
	CHECK(bad == 0);
	CHECK(transparent_addr(&px, "one.more.test", &ss) == -ENOSPC);
	CHECK(px.nsynth == 65534);
	transparent_free(&px);
	CHECK(px.synth == NULL && px.synth_slots == NULL);
}

int main(void)
{
	unit_run_all();
	UNIT_DONE();
}
