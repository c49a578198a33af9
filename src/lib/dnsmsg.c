/*
 * dnsmsg.c - DNS queries in, responses out.
 *
 * The header is looked at first: it decides whether a packet gets an
 * answer at all (never a response, never something shorter than a
 * header, only opcode QUERY with one question).  Then glibc's resolver
 * reads the message: ns_initparse() walks every record of every section
 * and refuses a message that does not end exactly at its last one;
 * ns_parserr() reads the question and each record with its name
 * uncompressed, and ns_name_unpack() the question's name as it was asked,
 * case included, because resolvers that randomise case (DNS 0x20) check
 * the echo.  glibc bounds every read by the message, a name by 255
 * bytes, a label by 63; a compression pointer may point anywhere inside
 * the message, forwards or into the header as well as back, and a name
 * that loops is refused once it has gone further than the message is
 * long (resolv/ns_name_unpack.c).  On top of that our own rules: only
 * letters, digits, '-' and '_' in labels, the text name lowercased, no
 * answer or authority records in a query, at most DNS_RECORDS_MAX records
 * besides the question (read_message says why).  The response echoes
 * the question uncompressed: nothing a pointer reached is pointed at again.
 *
 * Why glibc's: it is libc's own code, kept and fixed with it (its
 * ns_name_unpack backs every getaddrinfo() over DNS), and it needs no
 * libcrypto.  This was ldns, whose messages drag in its DNSSEC code and
 * with it OpenSSL's libcrypto, which corral no longer links
 * (tls_plugin.h).  tests/unit_dns.c and fuzz/fuzz_dns.c still decode what
 * comes out with ldns, an independent reader.  Writing a response is
 * fixed layout: the header, the question, records named by a pointer to
 * offset 12, 4 or 16 bytes of address each.
 */
#include "dnsmsg.h"

#include <arpa/nameser.h>
#include <dlfcn.h>
#include <errno.h>
#include <gnu/lib-names.h>
#include <netinet/in.h>
#include <pthread.h>
#include <resolv.h>
#include <stdlib.h>
#include <string.h>

#define DNS_FLAG_QR		0x80	/* in byte 2 */
#define DNS_FLAG_RD		0x01	/* in byte 2 */
#define DNS_FLAG_AA		0x04	/* in byte 2 */
#define DNS_FLAG_TC		0x02	/* in byte 2 */
#define DNS_FLAG_RA		0x80	/* in byte 3 */
#define DNS_OPCODE_QUERY	0
#define DNS_POINTER		0xc0	/* a label byte's top bits: compression */
#define DNS_RR_FIXED		10	/* type, class, TTL, RDLENGTH */
#define DNS_RECORDS_MAX		4	/* in a query, besides its question */

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

static bool host_char(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	       (ch >= '0' && ch <= '9') || ch == '-' || ch == '_';
}

/*
 * The question's name as glibc printed it (ns_name_ntop: "label.label",
 * "" for the root, a '.' or any other special or unprintable byte inside
 * a label escaped with '\') -> lowercase.  A name with anything but
 * hostname characters between its dots cannot be in the allowlist and
 * could be misread by whatever prints it, so it is not taken at all:
 * -EILSEQ.  The backslash of an escape is such a character.
 */
static int text_to_name(const char *text, char *out, size_t outsize)
{
	size_t i;

	for (i = 0; text[i]; i++) {
		char ch = text[i];

		if (ch != '.' && !host_char(ch))
			return -EILSEQ;
		if (i + 1 >= outsize)
			return -EINVAL;
		out[i] = (char)(ch >= 'A' && ch <= 'Z' ? ch + 32 : ch);
	}
	out[i] = '\0';
	return 0;
}

/*
 * ns_initparse and ns_parserr are libresolv's (dn_skipname and
 * ns_name_unpack are libc's since glibc 2.34), and nothing else of it is
 * used.  Linked, it was loaded and relocated at every start of every
 * corral process: about 0.25 ms of a cold `corral run` on the 2-core
 * host (issue 17), where most runs never parse a DNS message.  So it is
 * opened at the first message instead, once per process, and kept.  The
 * dynamic linker finds it exactly as it found the libraries linked in,
 * with the search path it read at the process's start: nothing a later
 * caller sets chooses it.
 */
static int (*resolv_initparse)(const unsigned char *, int, ns_msg *);
static int (*resolv_parserr)(ns_msg *, ns_sect, int, ns_rr *);
static pthread_once_t resolv_once = PTHREAD_ONCE_INIT;

static void resolv_open(void)
{
	void *h = dlopen(LIBRESOLV_SO, RTLD_NOW | RTLD_LOCAL);

	if (!h)
		return;
	*(void **)&resolv_initparse = dlsym(h, "ns_initparse");
	*(void **)&resolv_parserr = dlsym(h, "ns_parserr");
	if (!resolv_initparse || !resolv_parserr) {
		resolv_initparse = NULL;
		resolv_parserr = NULL;
		dlclose(h);
	}
}

/* -ENOSYS: no parser (libresolv not there): the message goes unanswered */
static int resolv_ready(void)
{
	pthread_once(&resolv_once, resolv_open);
	return resolv_initparse ? 0 : -ENOSYS;
}

/*
 * A whole message with exactly one question, read by glibc's resolver
 * (ns_initparse, ns_parserr): the question into q (its name uncompressed
 * as asked, type, class) and its name's text into text; every other
 * record read with its name; an OPT record's UDP size taken (EDNS).
 * -EINVAL for anything glibc refuses, and for more than DNS_RECORDS_MAX
 * records: glibc follows a name's pointers until it has gone as far as
 * the message is long, so thousands of names each pointing at one long
 * chain of pointers made a 64 KiB message cost 150 ms; a query carries
 * one OPT record, perhaps a signature (TSIG, SIG(0)).
 */
static int read_message(const uint8_t *pkt, size_t len, struct dns_query *q,
			char text[NS_MAXDNAME])
{
	static const ns_sect records[] = { ns_s_an, ns_s_ns, ns_s_ar };
	ns_msg msg;
	ns_rr rr;
	int n;

	n = resolv_ready();
	if (n < 0)
		return n;
	/* ns_initparse() takes an int; no DNS message is longer */
	if (len > DNS_TCP_MAX || resolv_initparse(pkt, (int)len, &msg) < 0 ||
	    ns_msg_count(msg, ns_s_qd) != 1 ||
	    ns_msg_count(msg, ns_s_an) + ns_msg_count(msg, ns_s_ns) +
	    ns_msg_count(msg, ns_s_ar) > DNS_RECORDS_MAX ||
	    resolv_parserr(&msg, ns_s_qd, 0, &rr) < 0)
		return -EINVAL;
	q->qtype = ns_rr_type(rr);
	q->qclass = ns_rr_class(rr);
	memcpy(text, rr.name, NS_MAXDNAME);	/* "" for the root */
	text[NS_MAXDNAME - 1] = '\0';
	/* the question comes right after the header */
	if (ns_name_unpack(pkt, pkt + len, pkt + DNS_HEADER_LEN, q->qname_wire,
			   sizeof(q->qname_wire)) < 0)
		return -EINVAL;
	n = dn_skipname(q->qname_wire, q->qname_wire + sizeof(q->qname_wire));
	if (n < 1)
		return -EINVAL;
	q->qname_wire_len = (size_t)n;
	for (size_t s = 0; s < sizeof(records) / sizeof(records[0]); s++) {
		for (int i = 0; i < ns_msg_count(msg, records[s]); i++) {
			if (resolv_parserr(&msg, records[s], i, &rr) < 0)
				return -EINVAL;
			/* OPT's class is the sender's UDP payload size */
			if (records[s] == ns_s_ar && ns_rr_type(rr) == ns_t_opt) {
				q->edns = true;
				q->edns_udp_size = ns_rr_class(rr);
			}
		}
	}
	return 0;
}

_Static_assert(sizeof(HEADER) == DNS_HEADER_LEN, "glibc's HEADER is the wire's 12 bytes");

int dnsmsg_parse_query(const uint8_t *pkt, size_t len, struct dns_query *q)
{
	char text[NS_MAXDNAME];
	HEADER h;
	int r;

	memset(q, 0, sizeof(*q));
	if (!pkt)
		return -EBADMSG;
	if (len >= 2)
		q->id = be16(pkt);
	if (len < sizeof(h))
		return -EBADMSG;
	memcpy(&h, pkt, sizeof(h));	/* the fixed header, in glibc's layout */
	if (h.qr)
		return -EBADMSG;
	q->rd = h.rd;
	if (h.opcode != ns_o_query)
		return -EOPNOTSUPP;
	/* exactly one question; a query carries no answers or authority */
	if (ntohs(h.qdcount) != 1 || h.ancount || h.nscount)
		return -EINVAL;
	r = read_message(pkt, len, q, text);
	if (r == 0)
		r = text_to_name(text, q->name, sizeof(q->name));
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
	char text[NS_MAXDNAME];

	memset(tmp, 0, sizeof(*tmp));
	/* a name that is no hostname is still echoed as it was asked */
	if (read_message(pkt, len, tmp, text) == 0) {
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
