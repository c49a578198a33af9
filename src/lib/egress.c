/*
 * egress.c - which destinations a sandbox may reach: allow and deny
 * patterns, a compiled rule set, and the two questions the proxy asks of
 * it.  Decisions only; no sockets.  See egress.h for the rules.
 *
 * Everything a client wrote is made canonical before it is compared: names
 * lowercase without their trailing dot, addresses as the bytes they are
 * (so "2852039166", "0xa9fea9fe" and "[::ffff:169.254.169.254]" are all
 * 169.254.169.254).  Whatever cannot be made canonical is refused, never
 * passed on: the proxy must not connect to something we did not judge.
 */
#include "egress.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How much of an offending string a reason quotes. */
#define QUOTE_MAX	60
#define QUOTE_BUF	(QUOTE_MAX + 16)
/* "[" address "]:" port */
#define HOSTPORT_MAX	(EGRESS_NAME_MAX + 16)

struct egress_ip {
	int family;		/* AF_INET or AF_INET6 */
	uint8_t a[16];		/* IPv4 in a[0..3] */
};

struct egress_host {
	char name[EGRESS_NAME_MAX + 1];
	struct egress_ip ip;
};

/* A network one of this host's interfaces is on (its address, masked). */
struct egress_net {
	struct egress_ip net;
	unsigned prefix;
};

struct egress {
	struct egress_pattern *allow;
	size_t nallow;
	struct egress_pattern *deny;
	size_t ndeny;
	struct egress_host *hosts;
	size_t nhosts;
	struct egress_ip *local;	/* this host's interface addresses */
	size_t nlocal;
	struct egress_net *onlink;	/* the networks they are on */
	size_t nonlink;
};

/* A host as a client wrote it, made canonical. */
struct host {
	bool is_ip;
	struct egress_ip ip;
	char name[EGRESS_NAME_MAX + 1];	/* the name, or the address as text */
};

/* ---- small helpers --------------------------------------------------- */

static char lower(char c)
{
	return (c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c;
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_hex(char c)
{
	c = lower(c);
	return is_digit(c) || (c >= 'a' && c <= 'f');
}

static bool name_char(char c)
{
	return (c >= 'a' && c <= 'z') || is_digit(c) || c == '-' || c == '_';
}

/* A reason's quoting: printable ASCII, safe in a log line and an HTTP header. */
static void quote(const char *s, size_t n, char *buf, size_t len)
{
	text_quote(s, n, buf, len, QUOTE_MAX, QUOTE_ASCII);
}

static int why_set(char *why, size_t whylen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Write a reason to why; returns -EINVAL for "return why_set(...)". */
static int why_set(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	if (!whylen)
		return -EINVAL;
	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* A byte as a reason can show it. */
static void describe_char(char c, char *buf, size_t len)
{
	unsigned char u = c;

	if (u == '"' || u == '\\')
		snprintf(buf, len, "'%c'", u);
	else if (u == ' ')
		snprintf(buf, len, "a space");
	else if (u == '\0')
		snprintf(buf, len, "a NUL byte");
	else if (u < 0x20 || u == 0x7f)
		snprintf(buf, len, "a control character (\\x%02x)", u);
	else if (u >= 0x80)
		snprintf(buf, len, "a non-ASCII byte (\\x%02x); write international names in punycode (xn--...)",
			 u);
	else
		snprintf(buf, len, "\"%c\"", u);
}

/* ---- addresses ------------------------------------------------------- */

static const uint8_t v4mapped_prefix[12] = {
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff,
};

/* ::ffff:a.b.c.d is a.b.c.d: the kernel connects to it over IPv4. */
static void ip_normalise(struct egress_ip *ip)
{
	if (ip->family != AF_INET6 ||
	    memcmp(ip->a, v4mapped_prefix, sizeof(v4mapped_prefix)))
		return;
	memmove(ip->a, ip->a + 12, 4);
	memset(ip->a + 4, 0, 12);
	ip->family = AF_INET;
}

/*
 * Any spelling inet_aton() accepts: 1 to 4 parts, each decimal, octal
 * (leading 0) or hex (0x).  The characters are checked first, because
 * glibc's inet_aton() also accepts an address followed by a space and
 * anything at all.
 */
static int ipv4_any(const char *s, size_t n, struct egress_ip *ip)
{
	char buf[EGRESS_NAME_MAX + 2];
	struct in_addr in;
	size_t i;

	if (!n || n >= sizeof(buf))
		return -EINVAL;
	for (i = 0; i < n; i++)
		if (!is_hex(s[i]) && lower(s[i]) != 'x' && s[i] != '.')
			return -EINVAL;
	memcpy(buf, s, n);
	buf[n] = '\0';
	if (!inet_aton(buf, &in))
		return -EINVAL;
	*ip = (struct egress_ip){ .family = AF_INET };
	memcpy(ip->a, &in.s_addr, 4);
	return 0;
}

/* A dotted quad and nothing else (for the "hosts" map). */
static int ipv4_strict(const char *s, size_t n, struct egress_ip *ip)
{
	char buf[INET_ADDRSTRLEN + 1];

	if (!n || n >= sizeof(buf) || memchr(s, '\0', n))
		return -EINVAL;
	memcpy(buf, s, n);
	buf[n] = '\0';
	*ip = (struct egress_ip){ .family = AF_INET };
	return inet_pton(AF_INET, buf, ip->a) == 1 ? 0 : -EINVAL;
}

static int ipv6_parse(const char *s, size_t n, struct egress_ip *ip)
{
	char buf[INET6_ADDRSTRLEN + 1];

	if (!n || n >= sizeof(buf) || memchr(s, '\0', n))
		return -EINVAL;
	memcpy(buf, s, n);
	buf[n] = '\0';
	*ip = (struct egress_ip){ .family = AF_INET6 };
	return inet_pton(AF_INET6, buf, ip->a) == 1 ? 0 : -EINVAL;
}

/* A "hosts" address: a dotted quad or an IPv6 address, nothing looser. */
static int addr_strict(const char *s, size_t n, struct egress_ip *ip)
{
	if (ipv4_strict(s, n, ip) && ipv6_parse(s, n, ip))
		return -EINVAL;
	ip_normalise(ip);
	return 0;
}

static unsigned ip_bits(int family)
{
	return family == AF_INET ? 32 : 128;
}

static void ip_text(const struct egress_ip *ip, char *buf, size_t len)
{
	if (!inet_ntop(ip->family, ip->a, buf, len))
		snprintf(buf, len, "?");
}

/* "10.0.0.5" or "[2001:db8::1]": an address as a pattern writes it. */
static void ip_pattern_text(const struct egress_ip *ip, char *buf, size_t len)
{
	char t[INET6_ADDRSTRLEN];

	ip_text(ip, t, sizeof(t));
	snprintf(buf, len, ip->family == AF_INET6 ? "[%s]" : "%s", t);
}

/* Are the first prefix bits of a and net the same? */
static bool prefix_match(const uint8_t *a, const uint8_t *net, unsigned prefix)
{
	unsigned bytes = prefix / 8, bits = prefix % 8;
	uint8_t mask;

	if (memcmp(a, net, bytes))
		return false;
	if (!bits)
		return true;
	mask = (uint8_t)(0xff << (8 - bits));
	return (a[bytes] & mask) == (net[bytes] & mask);
}

static bool ip_equal(const struct egress_ip *a, const struct egress_ip *b)
{
	return a->family == b->family &&
	       !memcmp(a->a, b->a, a->family == AF_INET ? 4 : 16);
}

static bool ip_in(const struct egress_ip *ip, int family, const uint8_t *net,
		  unsigned prefix)
{
	return ip->family == family && prefix_match(ip->a, net, prefix);
}

/* ---- names ----------------------------------------------------------- */

/* Does the last label read as a number (decimal, or 0x hex)? */
static bool numeric_tail(const char *name)
{
	const char *last = strrchr(name, '.');

	last = last ? last + 1 : name;
	if (last[0] == '0' && last[1] == 'x') {
		for (last += 2; *last; last++)
			if (!is_hex(*last))
				return false;
		return true;
	}
	for (; *last; last++)
		if (!is_digit(*last))
			return false;
	return true;
}

/*
 * s[0..n) lowercased into out, one trailing dot dropped, each label 1-63
 * bytes of [a-z0-9_-], 253 bytes in all.  A name whose last label is a
 * number is refused: URL parsers read it as an IPv4 address, and it is not
 * one (inet_aton, tried first by the callers, said no).
 */
static int name_canon(const char *s, size_t n, char *out, char *why,
		      size_t whylen)
{
	size_t i, label = 0;
	char what[128];

	if (n && s[n - 1] == '.')
		n--;
	if (!n)
		return why_set(why, whylen, "empty host name");
	if (n > EGRESS_NAME_MAX)
		return why_set(why, whylen,
			       "host name longer than %d characters",
			       EGRESS_NAME_MAX);
	for (i = 0; i < n; i++) {
		char c = lower(s[i]);

		if (c == '.') {
			if (!label)
				return why_set(why, whylen,
					       "host name has an empty label");
			label = 0;
		} else if (name_char(c)) {
			if (++label > EGRESS_LABEL_MAX)
				return why_set(why, whylen,
					       "host name has a label longer than %d characters",
					       EGRESS_LABEL_MAX);
		} else {
			describe_char(s[i], what, sizeof(what));
			return why_set(why, whylen,
				       "not a host name: contains %s", what);
		}
		out[i] = c;
	}
	out[n] = '\0';
	if (!label)
		return why_set(why, whylen, "host name has an empty label");
	if (numeric_tail(out))
		return why_set(why, whylen,
			       "looks like an IPv4 address but is not a valid one");
	return 0;
}

int egress_name_canon(const char *s, size_t len, char *out, char *why,
		      size_t whylen)
{
	struct egress_ip ip;
	size_t n = len;

	if (!s)
		return why_set(why, whylen, "empty host name");
	if (memchr(s, '\0', len))
		return why_set(why, whylen, "not a host name: contains a NUL byte");
	if (n && s[n - 1] == '.')
		n--;
	if (!ipv4_any(s, n, &ip) ||
	    (memchr(s, ':', len) && !ipv6_parse(s, len, &ip)))
		return why_set(why, whylen, "an IP address, not a host name");
	return name_canon(s, len, out, why, whylen);
}

int egress_addr_canon(const char *s, size_t len, char *out, char *why,
		      size_t whylen)
{
	struct egress_ip ip;

	if (!s || addr_strict(s, len, &ip))
		return why_set(why, whylen,
			       "not an IP address, expected an IPv4 dotted quad or an IPv6 address");
	ip_text(&ip, out, INET6_ADDRSTRLEN);
	return 0;
}

/*
 * A host as a client wrote it: "[v6]" or bare v6, any inet_aton spelling
 * of an IPv4 address, or a name.
 */
static int host_parse(const char *s, size_t n, struct host *h, char *why,
		      size_t whylen)
{
	char what[128];
	size_t m = n;

	*h = (struct host){ 0 };
	if (!s || !n)
		return why_set(why, whylen, "empty host name");
	if (memchr(s, '\0', n)) {
		describe_char('\0', what, sizeof(what));
		return why_set(why, whylen, "not a host name: contains %s",
			       what);
	}
	if (s[0] == '[') {
		if (n < 2 || s[n - 1] != ']' || ipv6_parse(s + 1, n - 2, &h->ip))
			return why_set(why, whylen,
				       "not an IPv6 address inside [...]");
		h->is_ip = true;
	} else if (memchr(s, ':', n) && !ipv6_parse(s, n, &h->ip)) {
		h->is_ip = true;
	} else {
		if (s[m - 1] == '.')
			m--;
		if (!ipv4_any(s, m, &h->ip))
			h->is_ip = true;
		else if (name_canon(s, n, h->name, why, whylen))
			return -EINVAL;
	}
	if (h->is_ip) {
		ip_normalise(&h->ip);
		ip_text(&h->ip, h->name, sizeof(h->name));
	}
	return 0;
}

/* "example.org:443", "10.0.0.5:443", "[2001:db8::1]:443" */
static void host_port_text(const struct host *h, uint16_t port, char *buf,
			   size_t len)
{
	if (h->is_ip && h->ip.family == AF_INET6)
		snprintf(buf, len, "[%s]:%u", h->name, port);
	else
		snprintf(buf, len, "%s:%u", h->name, port);
}

/* ---- patterns -------------------------------------------------------- */

/* Decimal, no sign, no leading zero (no octal doubt), from min to max. */
static int parse_number(const char *s, size_t n, unsigned min, unsigned max,
			unsigned *out)
{
	unsigned v = 0;
	size_t i;

	if (!n || n > 5 || (n > 1 && s[0] == '0'))
		return -EINVAL;
	for (i = 0; i < n; i++) {
		if (!is_digit(s[i]))
			return -EINVAL;
		v = v * 10 + (s[i] - '0');
	}
	if (v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_port(const char *s, size_t n, struct egress_pattern *p,
		      char *why, size_t whylen)
{
	unsigned port;

	if (parse_number(s, n, 1, 65535, &port))
		return why_set(why, whylen,
			       "port must be a number from 1 to 65535");
	p->port = (uint16_t)port;
	return 0;
}

/* addr (already parsed into p) with "/prefix" s[0..n), or none if !s. */
static int set_net(struct egress_pattern *p, const struct egress_ip *ip,
		   const char *s, size_t n, char *why, size_t whylen)
{
	unsigned bits = ip_bits(ip->family), prefix = bits, i;
	struct egress_ip net = *ip;
	char t[INET6_ADDRSTRLEN + 2];

	if (s && parse_number(s, n, 0, bits, &prefix))
		return why_set(why, whylen,
			       "prefix length must be a number from 0 to %u",
			       bits);
	for (i = prefix; i < bits; i++)
		net.a[i / 8] &= (uint8_t)~(0x80 >> (i % 8));
	if (!ip_equal(&net, ip)) {
		ip_pattern_text(&net, t, sizeof(t));
		return why_set(why, whylen,
			       "address has bits set beyond the /%u prefix (did you mean %s/%u?)",
			       prefix, t, prefix);
	}
	/* ::ffff:0:0/96 and narrower is IPv4, as requests are judged */
	if (net.family == AF_INET6 && prefix >= 96 &&
	    !memcmp(net.a, v4mapped_prefix, sizeof(v4mapped_prefix))) {
		ip_normalise(&net);
		prefix -= 96;
	}
	if (p->allow && prefix == 0)
		return why_set(why, whylen,
			       "a /0 network would allow every address; name the networks to allow");
	p->kind = EGRESS_NET;
	p->family = net.family;
	memcpy(p->addr, net.a, sizeof(p->addr));
	p->prefix = prefix;
	return 0;
}

/* "[v6]", "[v6/N]" or "[v6]/N", then optionally ":port". */
static int parse_bracketed(const char *s, size_t n, struct egress_pattern *p,
			   char *why, size_t whylen)
{
	const char *close = memchr(s, ']', n), *slash, *rest, *pfx = NULL;
	size_t inner, nrest, npfx = 0;
	struct egress_ip ip, v4;

	if (!close)
		return why_set(why, whylen, "'[' without a closing ']'");
	inner = close - s - 1;
	rest = close + 1;
	nrest = n - (rest - s);
	slash = memchr(s + 1, '/', inner);
	if (slash) {
		pfx = slash + 1;
		npfx = close - pfx;
		inner = slash - s - 1;
	} else if (nrest && rest[0] == '/') {
		pfx = rest + 1;
		for (npfx = 0; npfx < nrest - 1 && pfx[npfx] != ':'; npfx++)
			;
		rest = pfx + npfx;
		nrest = n - (rest - s);
	}
	if (ipv6_parse(s + 1, inner, &ip))
		return why_set(why, whylen, ipv4_any(s + 1, inner, &v4) ?
			       "not an IPv6 address inside [...]" :
			       "brackets are only for IPv6 addresses; write an IPv4 address without them");
	if (nrest && rest[0] != ':')
		return why_set(why, whylen,
			       "unexpected text after ']', expected \":PORT\"");
	if (nrest && parse_port(rest + 1, nrest - 1, p, why, whylen))
		return -EINVAL;
	return set_net(p, &ip, pfx, npfx, why, whylen);
}

/* a letter in s[0..n): a host's name, not an address (which failed to parse) */
static bool looks_like_name(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z'))
			return true;
	return false;
}

/* "*", "*.name", a name, or an IPv4 address / network (port already cut). */
static int parse_host_part(const char *s, size_t n, struct egress_pattern *p,
			   char *why, size_t whylen)
{
	const char *slash = memchr(s, '/', n), *star = memchr(s, '*', n);
	struct egress_ip ip;
	size_t m = n;

	if (slash) {
		/* "pypi.org/simple": a host and a path, not a network */
		if (ipv4_any(s, slash - s, &ip))
			return why_set(why, whylen, looks_like_name(s, slash - s) ?
				       "a host pattern has no path: give the host alone, as in \"example.com\" (a policy's allow object narrows paths: \"paths\": [...])" :
				       "not an IPv4 address before '/' (IPv6 networks go in brackets, as in \"[2001:db8::/32]\")");
		return set_net(p, &ip, slash + 1, n - (slash + 1 - s), why,
			       whylen);
	}
	if (n == 1 && star) {
		if (p->allow)
			return why_set(why, whylen,
				       "\"*\" would allow every host; list the hosts to allow");
		p->kind = EGRESS_ANY;
		return 0;
	}
	if (star) {
		if (n < 3 || s[0] != '*' || s[1] != '.' ||
		    memchr(s + 1, '*', n - 1))
			return why_set(why, whylen,
				       "'*' may only be the whole first label, as in \"*.example.com\"");
		if (!ipv4_any(s + 2, n - 2 - (s[n - 1] == '.'), &ip))
			return why_set(why, whylen,
				       "a wildcard cannot cover an IP address; use a network such as \"10.0.0.0/8\"");
		if (name_canon(s + 2, n - 2, p->name, why, whylen))
			return -EINVAL;
		if (p->allow && !strchr(p->name, '.'))
			return why_set(why, whylen,
				       "a wildcard over a whole top-level domain is not allowed; use a domain under it, as in \"*.example.com\"");
		p->kind = EGRESS_SUBDOMAINS;
		return 0;
	}
	if (s[m - 1] == '.')
		m--;
	if (!ipv4_any(s, m, &ip))
		return set_net(p, &ip, NULL, 0, why, whylen);
	if (name_canon(s, n, p->name, why, whylen))
		return -EINVAL;
	if (p->allow && !strchr(p->name, '.'))
		return why_set(why, whylen,
			       "a name of one label (a bare top-level domain) is not allowed; name a host under it, as in \"example.com\"");
	p->kind = EGRESS_NAME;
	return 0;
}

int egress_pattern_parsen(const char *text, size_t len,
			  struct egress_pattern *out, bool for_allow,
			  char *why, size_t whylen)
{
	struct egress_pattern p = { .allow = for_allow };
	const char *colon;
	char what[128];
	size_t n = len;
	int r;

	if (!text || !len)
		return why_set(why, whylen, "empty pattern");
	if (len > EGRESS_PATTERN_MAX)
		return why_set(why, whylen,
			       "pattern longer than %d characters",
			       EGRESS_PATTERN_MAX);
	if (memchr(text, '\0', len)) {
		describe_char('\0', what, sizeof(what));
		return why_set(why, whylen, "contains %s", what);
	}
	memcpy(p.text, text, len);
	p.text[len] = '\0';
	/* a URL pasted for a host was "port must be a number" (the "//") */
	if (memmem(text, len, "://", 3))
		return why_set(why, whylen,
			       "a URL, not a host pattern: give its host, as in \"example.com\" or \"example.com:8443\"");
	if (text[0] == '[') {
		r = parse_bracketed(text, len, &p, why, whylen);
	} else {
		colon = memchr(text, ':', len);
		if (colon && memrchr(text, ':', len) != colon)
			return why_set(why, whylen,
				       "more than one ':' (an IPv6 address must be in brackets, as in \"[2001:db8::1]:443\")");
		if (colon) {
			n = colon - text;
			r = parse_port(colon + 1, len - n - 1, &p, why, whylen);
			if (r)
				return r;
			if (!n)
				return why_set(why, whylen,
					       "no host before \":PORT\"");
		}
		r = parse_host_part(text, n, &p, why, whylen);
	}
	if (r)
		return r;
	*out = p;
	return 0;
}

int egress_pattern_parse(const char *text, struct egress_pattern *out,
			 bool for_allow, struct corral_err *err)
{
	size_t n = text ? strlen(text) : 0;
	char why[256], got[QUOTE_BUF];

	if (!egress_pattern_parsen(text, n, out, for_allow, why, sizeof(why)))
		return 0;
	quote(text ? text : "", n, got, sizeof(got));
	return corral_set_err(err, -EINVAL, "%s (got %s)", why, got);
}

/* ---- matching -------------------------------------------------------- */

static bool host_matches(const struct egress_pattern *p, const struct host *h)
{
	size_t hl, pl;

	switch (p->kind) {
	case EGRESS_ANY:
		return true;
	case EGRESS_NAME:
		return !h->is_ip && !strcmp(p->name, h->name);
	case EGRESS_SUBDOMAINS:
		if (h->is_ip)
			return false;
		hl = strlen(h->name);
		pl = strlen(p->name);
		return hl > pl + 1 && h->name[hl - pl - 1] == '.' &&
		       !strcmp(h->name + hl - pl, p->name);
	case EGRESS_NET:
		return h->is_ip && ip_in(&h->ip, p->family, p->addr, p->prefix);
	}
	return false;
}

static bool port_matches(const struct egress_pattern *p, uint16_t port)
{
	if (p->port)
		return p->port == port;
	return !p->allow || port == 80 || port == 443;
}

#define PORTS_SHOWN 8

static void port_add(unsigned *ports, size_t *n, bool *more, unsigned port)
{
	size_t i, j;

	for (i = 0; i < *n && ports[i] < port; i++)
		;
	if (i < *n && ports[i] == port)
		return;
	if (*n == PORTS_SHOWN) {
		*more = true;
		if (i == *n)
			return;
		(*n)--;
	}
	for (j = *n; j > i; j--)
		ports[j] = ports[j - 1];
	ports[i] = port;
	(*n)++;
}

/* The ports allow entries give a host, ascending: "80, 443, 8443". */
static void allowed_ports(const struct egress *e, const struct host *h,
			  char *buf, size_t len)
{
	unsigned ports[PORTS_SHOWN];
	size_t i, n = 0, off = 0;
	bool more = false;

	buf[0] = '\0';
	for (i = 0; i < e->nallow; i++) {
		if (!host_matches(&e->allow[i], h))
			continue;
		if (e->allow[i].port) {
			port_add(ports, &n, &more, e->allow[i].port);
		} else {
			port_add(ports, &n, &more, 80);
			port_add(ports, &n, &more, 443);
		}
	}
	for (i = 0; i < n && off < len; i++)
		off += snprintf(buf + off, len - off, "%s%u", i ? ", " : "",
				ports[i]);
	if (more && off < len)
		snprintf(buf + off, len - off, ", ...");
}

static void say(struct egress_verdict *v, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The verdict's reason (cut at CORRAL_ERR_MAX, as every message is). */
static void say(struct egress_verdict *v, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(v->reason, sizeof(v->reason), fmt, ap);
	va_end(ap);
}

static void verdict_reset(struct egress_verdict *v, uint16_t port)
{
	*v = (struct egress_verdict){ .port = port };
}

/* ip and port as a socket address, ready for connect(). */
static void ip_sockaddr(const struct egress_ip *ip, uint16_t port,
			struct sockaddr_storage *out)
{
	struct sockaddr_in *s4 = (struct sockaddr_in *)out;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)out;

	memset(out, 0, sizeof(*out));
	if (ip->family == AF_INET) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		memcpy(&s4->sin_addr, ip->a, 4);
	} else {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		memcpy(&s6->sin6_addr, ip->a, 16);
	}
}

static int refuse_host(struct egress_verdict *v, const char *host, size_t len,
		       const char *why)
{
	char got[QUOTE_BUF];

	quote(host ? host : "", host ? len : 0, got, sizeof(got));
	say(v, "%s is not a valid host (%s)", got, why);
	return -EINVAL;
}

int egress_check_namen(const struct egress *e, const char *host, size_t len,
		       uint16_t port, struct egress_verdict *v)
{
	char why[256], hp[HOSTPORT_MAX], ports[64];
	const struct egress_pattern *p;
	bool host_known = false;
	struct host h;
	size_t i;

	verdict_reset(v, port);
	if (host_parse(host, len, &h, why, sizeof(why)))
		return refuse_host(v, host, len, why);
	memcpy(v->host, h.name, sizeof(v->host));
	v->is_ip = h.is_ip;
	if (h.is_ip)
		ip_sockaddr(&h.ip, port, &v->addr);
	if (!port) {
		say(v, "port 0 of %s is not a valid port", h.name);
		return -EINVAL;
	}
	host_port_text(&h, port, hp, sizeof(hp));
	for (i = 0; i < e->ndeny; i++) {
		p = &e->deny[i];
		if (host_matches(p, &h) && port_matches(p, port)) {
			v->rule = p;
			say(v, "%s is denied by \"%s\"", hp, p->text);
			return -EACCES;
		}
	}
	for (i = 0; i < e->nallow; i++) {
		p = &e->allow[i];
		if (!host_matches(p, &h))
			continue;
		host_known = true;
		if (port_matches(p, port)) {
			v->rule = p;
			v->allowed = true;
			say(v, "%s is allowed by \"%s\"", hp, p->text);
			return 0;
		}
	}
	if (host_known) {
		allowed_ports(e, &h, ports, sizeof(ports));
		say(v, "port %u of %s is not allowed (allowed ports: %s)",
		    port, h.name, ports);
	} else if (h.is_ip) {
		say(v, "%s is not in the allowlist (an IP address is allowed only by an IP or CIDR entry)",
		    hp);
	} else {
		say(v, "%s is not in the allowlist", hp);
	}
	return -EACCES;
}

int egress_check_name(const struct egress *e, const char *host, uint16_t port,
		      struct egress_verdict *v)
{
	return egress_check_namen(e, host, host ? strlen(host) : 0, port, v);
}

/*
 * A DNS question names no port: a name resolves when some allow entry
 * would let a connection to it through, and no deny entry for every port
 * matches it.  Anything else is answered inside and never asked outside.
 */
int egress_check_dns(const struct egress *e, const char *name,
		     struct egress_verdict *v)
{
	char why[256];
	struct host h;
	size_t len = name ? strlen(name) : 0;

	verdict_reset(v, 0);
	if (host_parse(name, len, &h, why, sizeof(why)))
		return refuse_host(v, name, len, why);
	memcpy(v->host, h.name, sizeof(v->host));
	v->is_ip = h.is_ip;
	for (size_t i = 0; i < e->ndeny; i++) {
		if (host_matches(&e->deny[i], &h) && !e->deny[i].port) {
			v->rule = &e->deny[i];
			say(v, "DNS name %s is denied by \"%s\"", h.name, e->deny[i].text);
			return -EACCES;
		}
	}
	for (size_t i = 0; i < e->nallow; i++) {
		if (host_matches(&e->allow[i], &h)) {
			v->rule = &e->allow[i];
			v->allowed = true;
			say(v, "DNS name %s is allowed by \"%s\"", h.name, e->allow[i].text);
			return 0;
		}
	}
	say(v, "DNS name %s is not in the allowlist", h.name);
	return -EACCES;
}

/* ---- the resolution guard -------------------------------------------- */

struct special_range {
	int family;
	uint8_t net[16];
	unsigned prefix;
	const char *what;
	bool self;		/* the range is this host anyway (loopback) */
};

/* Most specific first: the first match names the address. */
static const struct special_range special_ranges[] = {
	{ AF_INET, { 169, 254, 169, 254 }, 32,
	  "a link-local address (the cloud metadata service)", false },
	/*
	 * Public, but Azure's host channel on every VM there (WireServer:
	 * goal state, extension settings, and the VM's certificates
	 * encrypted to a key the asker sends); its agent lets only uid 0
	 * reach it, as a root supervisor is.
	 */
	{ AF_INET, { 168, 63, 129, 16 }, 32,
	  "Azure's WireServer (the VM agent's channel to its host)", false },
	{ AF_INET, { 255, 255, 255, 255 }, 32, "the broadcast address", false },
	{ AF_INET, { 0 }, 8, "an unspecified address", false },
	{ AF_INET, { 10 }, 8, "a private address", false },
	{ AF_INET, { 100, 64 }, 10, "a carrier-grade NAT address", false },
	{ AF_INET, { 127 }, 8, "a loopback address", true },
	{ AF_INET, { 169, 254 }, 16, "a link-local address", false },
	{ AF_INET, { 172, 16 }, 12, "a private address", false },
	{ AF_INET, { 192, 168 }, 16, "a private address", false },
	{ AF_INET, { 224 }, 4, "a multicast address", false },
	{ AF_INET, { 240 }, 4, "a reserved address", false },
	{ AF_INET6, { 0 }, 128, "an unspecified address", false },
	{ AF_INET6, { [15] = 1 }, 128, "a loopback address", true },
	{ AF_INET6, { 0 }, 96, "a reserved (IPv4-compatible) address", false },
	{ AF_INET6, { 0x00, 0x64, 0xff, 0x9b, 0x00, 0x01 }, 48,
	  "a private (local-use NAT64) address", false },
	{ AF_INET6, { 0xfe, 0x80 }, 10, "a link-local address", false },
	{ AF_INET6, { 0xfe, 0xc0 }, 10, "a site-local address", false },
	{ AF_INET6, { 0xfc }, 7, "a private address", false },
	{ AF_INET6, { 0xff }, 8, "a multicast address", false },
};

static const uint8_t nat64_prefix[12] = { 0x00, 0x64, 0xff, 0x9b };

/* Why an address is not to be reached, and the network that says so. */
struct special {
	const char *what;
	struct egress_ip net;
	unsigned prefix;
	bool self;		/* loopback: "of this host" goes without saying */
	bool nat64;		/* 64:ff9b::/96 around a special IPv4 address */
};

static bool classify4or6(const struct egress_ip *ip, struct special *s)
{
	const struct special_range *r;
	size_t i;

	for (i = 0; i < sizeof(special_ranges) / sizeof(special_ranges[0]); i++) {
		r = &special_ranges[i];
		if (!ip_in(ip, r->family, r->net, r->prefix))
			continue;
		s->what = r->what;
		s->self = r->self;
		s->net = (struct egress_ip){ .family = r->family };
		memcpy(s->net.a, r->net, sizeof(s->net.a));
		s->prefix = r->prefix;
		return true;
	}
	return false;
}

/*
 * 64:ff9b::a.b.c.d reaches a.b.c.d through a NAT64 gateway: judged as the
 * IPv4 address inside, overridable by an IPv6 entry within the same span.
 */
static bool classify(const struct egress_ip *ip, struct special *s)
{
	struct egress_ip v4 = { .family = AF_INET };

	*s = (struct special){ 0 };
	if (ip->family == AF_INET6 &&
	    !memcmp(ip->a, nat64_prefix, sizeof(nat64_prefix))) {
		memcpy(v4.a, ip->a + 12, 4);
		if (!classify4or6(&v4, s))
			return false;
		s->nat64 = true;
		s->net.family = AF_INET6;
		memmove(s->net.a + 12, s->net.a, 4);
		memcpy(s->net.a, nat64_prefix, sizeof(nat64_prefix));
		s->prefix += 96;
		return true;
	}
	return classify4or6(ip, s);
}

static bool is_local(const struct egress *e, const struct egress_ip *ip)
{
	size_t i;

	for (i = 0; i < e->nlocal; i++)
		if (ip_equal(&e->local[i], ip))
			return true;
	return false;
}

/*
 * Is ip on a network of this host's interfaces (a neighbour: the LAN's
 * router, printer, NAS, another VM of the subnet)?  The nets were taken
 * without host routes and loopback, so this is never the host itself.
 */
static const struct egress_net *on_link(const struct egress *e,
					const struct egress_ip *ip)
{
	size_t i;

	for (i = 0; i < e->nonlink; i++)
		if (ip_in(ip, e->onlink[i].net.family, e->onlink[i].net.a,
			  e->onlink[i].prefix))
			return &e->onlink[i];
	return NULL;
}

/*
 * An allow entry that names ip explicitly: its network covers ip and lies
 * inside [net/prefix], the span that made ip special (so "0.0.0.0/1" does
 * not open 10.0.0.0/8, but "10.0.0.0/8" and "10.0.0.5" do).
 */
static const struct egress_pattern *
explicit_allow(const struct egress *e, const struct egress_ip *ip,
	       uint16_t port, const struct egress_ip *net, unsigned prefix)
{
	const struct egress_pattern *p;
	size_t i;

	for (i = 0; i < e->nallow; i++) {
		p = &e->allow[i];
		if (p->kind != EGRESS_NET || p->family != net->family ||
		    p->prefix < prefix || !prefix_match(p->addr, net->a, prefix) ||
		    !ip_in(ip, p->family, p->addr, p->prefix))
			continue;
		if (!port || port_matches(p, port))
			return p;
	}
	return NULL;
}

static const struct egress_host *hosts_find(const struct egress *e,
					    const char *name)
{
	size_t i;

	for (i = 0; i < e->nhosts; i++)
		if (!strcmp(e->hosts[i].name, name))
			return &e->hosts[i];
	return NULL;
}

static int sockaddr_ip(const struct sockaddr *sa, struct egress_ip *ip,
		       uint16_t *port)
{
	const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
	const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;

	if (sa->sa_family == AF_INET) {
		*ip = (struct egress_ip){ .family = AF_INET };
		memcpy(ip->a, &s4->sin_addr, 4);
		*port = ntohs(s4->sin_port);
		return 0;
	}
	if (sa->sa_family == AF_INET6) {
		*ip = (struct egress_ip){ .family = AF_INET6 };
		memcpy(ip->a, &s6->sin6_addr, 16);
		*port = ntohs(s6->sin6_port);
		return 0;
	}
	return -EAFNOSUPPORT;
}

/*
 * The guard proper: ip is special (loopback, private ...) or this host's
 * own; only an allow entry that names it explicitly lets it through.
 * lead reads "NAME resolved to ADDR," or "ADDR is".
 */
static int guard(const struct egress *e, const struct egress_ip *ip,
		 uint16_t port, const char *lead, struct egress_verdict *v)
{
	char v4[INET_ADDRSTRLEN], allow[INET6_ADDRSTRLEN + 2];
	char lan[INET6_ADDRSTRLEN + 2];
	const struct egress_pattern *p;
	const struct egress_net *link = NULL;
	struct egress_ip net;
	struct special s;
	bool special = classify(ip, &s), local = is_local(e, ip);
	unsigned prefix;

	if (!special && !local)
		link = on_link(e, ip);
	if (!special && !local && !link) {
		v->allowed = true;
		say(v, "%s a public address", lead);
		return 0;
	}
	/* this host's own address: only an entry for exactly it will do */
	net = local ? *ip : link ? link->net : s.net;
	prefix = local ? ip_bits(ip->family) : link ? link->prefix : s.prefix;
	p = explicit_allow(e, ip, port, &net, prefix);
	if (p) {
		v->rule = p;
		v->allowed = true;
		say(v, "%s allowed explicitly by \"%s\"", lead, p->text);
		return 0;
	}
	ip_pattern_text(ip, allow, sizeof(allow));
	if (special && s.nat64) {
		inet_ntop(AF_INET, ip->a + 12, v4, sizeof(v4));
		say(v, "%s the NAT64 form of %s, %s; allow %s explicitly to reach it",
		    lead, v4, s.what, allow);
	} else if (special) {
		say(v, "%s %s%s; allow %s explicitly to reach it", lead, s.what,
		    local && !s.self ? " of this host" : "", allow);
	} else if (link) {
		ip_pattern_text(&link->net, lan, sizeof(lan));
		say(v, "%s an address on this host's network %s/%u; allow %s explicitly to reach it",
		    lead, lan, link->prefix, allow);
	} else {
		say(v, "%s an address of this host; allow %s explicitly to reach it",
		    lead, allow);
	}
	return -EACCES;
}

int egress_check_addr(const struct egress *e, const char *host,
		      const struct sockaddr *sa, struct egress_verdict *v)
{
	char why[256], shown[INET6_ADDRSTRLEN], lead[EGRESS_NAME_MAX + 64];
	const struct egress_pattern *p;
	const struct egress_host *mapped;
	struct egress_ip ip;
	struct host h;
	uint16_t port = 0;
	size_t i;
	int r;

	verdict_reset(v, 0);
	if (host_parse(host, host ? strlen(host) : 0, &h, why, sizeof(why)))
		return refuse_host(v, host, host ? strlen(host) : 0, why);
	memcpy(v->host, h.name, sizeof(v->host));
	if (!sa) {
		say(v, "no address given for %s", v->host);
		return -EINVAL;
	}
	r = sockaddr_ip(sa, &ip, &port);
	if (r) {
		say(v, "%s resolved to an address that is neither IPv4 nor IPv6",
		    v->host);
		return r;
	}
	v->port = port;
	memcpy(&v->addr, sa, sa->sa_family == AF_INET ?
	       sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
	ip_normalise(&ip);
	ip_text(&ip, shown, sizeof(shown));
	if (h.is_ip)
		snprintf(lead, sizeof(lead), "%s is", shown);
	else
		snprintf(lead, sizeof(lead), "%s resolved to %s,", v->host, shown);

	for (i = 0; i < e->ndeny; i++) {
		p = &e->deny[i];
		if (p->kind != EGRESS_NET ||
		    !ip_in(&ip, p->family, p->addr, p->prefix) ||
		    (port && !port_matches(p, port)))
			continue;
		v->rule = p;
		say(v, "%s denied by \"%s\"", lead, p->text);
		return -EACCES;
	}
	mapped = hosts_find(e, v->host);
	if (mapped && ip_equal(&mapped->ip, &ip)) {
		v->allowed = true;
		say(v, "%s is mapped to %s by the policy's hosts map", v->host,
		    shown);
		return 0;
	}
	return guard(e, &ip, port, lead, v);
}

int egress_hosts_lookup(const struct egress *e, const char *name,
			struct sockaddr_storage *out)
{
	const struct egress_host *m;
	char canon[EGRESS_NAME_MAX + 1], why[128];

	if (egress_name_canon(name, name ? strlen(name) : 0, canon, why,
			      sizeof(why)))
		return -EINVAL;
	m = hosts_find(e, canon);
	if (!m)
		return -ENOENT;
	ip_sockaddr(&m->ip, 0, out);
	return 0;
}

int egress_resolve_static(const struct egress *e, const char *host,
			  uint16_t port, struct sockaddr_storage *out)
{
	const struct egress_host *m;
	char why[256];
	struct host h;

	if (host_parse(host, host ? strlen(host) : 0, &h, why, sizeof(why)))
		return -EINVAL;
	if (h.is_ip) {
		ip_sockaddr(&h.ip, port, out);
		return 0;
	}
	m = hosts_find(e, h.name);
	if (!m)
		return -ENOENT;
	ip_sockaddr(&m->ip, port, out);
	return 0;
}

/* ---- the compiled rule set ------------------------------------------- */

static int compile_list(char *const *texts, size_t n, bool allow,
			struct egress_pattern **out, size_t *count,
			struct corral_err *err)
{
	char why[256], got[QUOTE_BUF];
	struct egress_pattern *v;
	size_t i;

	if (!n)
		return 0;
	v = calloc(n, sizeof(*v));
	if (!v)
		return corral_set_err(err, -ENOMEM, "out of memory for %zu egress patterns",
				      n);
	for (i = 0; i < n; i++) {
		if (!egress_pattern_parsen(texts[i], texts[i] ? strlen(texts[i]) : 0,
					   &v[i], allow, why, sizeof(why)))
			continue;
		quote(texts[i] ? texts[i] : "", texts[i] ? strlen(texts[i]) : 0,
		      got, sizeof(got));
		free(v);
		return corral_set_err(err, -EINVAL, "network.%s[%zu]: %s (got %s)",
				      allow ? "allow" : "deny", i, why, got);
	}
	*out = v;
	*count = n;
	return 0;
}

static int compile_hosts(struct egress *e, const struct corral_policy *p,
			 struct corral_err *err)
{
	char why[256], got[QUOTE_BUF];
	const struct corral_env *h;
	struct egress_host *eh;
	size_t i;

	if (!p->nnet_hosts)
		return 0;
	e->hosts = calloc(p->nnet_hosts, sizeof(*e->hosts));
	if (!e->hosts)
		return corral_set_err(err, -ENOMEM, "out of memory for the %zu net.hosts entries",
				      p->nnet_hosts);
	for (i = 0; i < p->nnet_hosts; i++) {
		h = &p->net_hosts[i];
		eh = &e->hosts[e->nhosts];
		if (egress_name_canon(h->name, h->name ? strlen(h->name) : 0,
				      eh->name, why, sizeof(why))) {
			quote(h->name ? h->name : "", h->name ? strlen(h->name) : 0,
			      got, sizeof(got));
			return corral_set_err(err, -EINVAL,
					      "network.hosts: %s (got %s)", why, got);
		}
		if (!h->value || addr_strict(h->value, strlen(h->value),
					     &eh->ip)) {
			quote(h->value ? h->value : "",
			      h->value ? strlen(h->value) : 0, got, sizeof(got));
			return corral_set_err(err, -EINVAL,
					      "network.hosts.%s: not an IP address, expected an IPv4 dotted quad or an IPv6 address (got %s)",
					      eh->name, got);
		}
		e->nhosts++;
	}
	return 0;
}

/* A netmask's length: its leading one bits. */
static unsigned mask_prefix(const struct egress_ip *mask)
{
	unsigned bits = ip_bits(mask->family), n = 0;

	while (n < bits && (mask->a[n / 8] & (0x80 >> (n % 8))))
		n++;
	return n;
}

/*
 * The network i's address is on, if it has neighbours there: not a host
 * route (/32, /128: a point-to-point link, a cloud VM's one address), not
 * a /0, not loopback.  false: nothing to take.
 */
static bool take_onlink(const struct ifaddrs *i, const struct egress_ip *ip,
			struct egress_net *out)
{
	struct egress_ip mask;
	struct special s;
	uint16_t port;
	unsigned b;

	if (!i->ifa_netmask || i->ifa_netmask->sa_family != i->ifa_addr->sa_family ||
	    sockaddr_ip(i->ifa_netmask, &mask, &port) ||
	    (classify(ip, &s) && s.self))
		return false;
	out->prefix = mask_prefix(&mask);
	if (out->prefix == 0 || out->prefix >= ip_bits(ip->family))
		return false;
	out->net = *ip;
	for (b = out->prefix; b < ip_bits(ip->family); b++)
		out->net.a[b / 8] &= (uint8_t)~(0x80 >> (b % 8));
	return true;
}

/*
 * This host's addresses, and the networks they are on, as the guard
 * compares them: a name that resolves to a neighbour on the host's LAN
 * (a global IPv6 /64 holds the home router's and printer's addresses
 * too, none of them private) is as much a way in as one that resolves
 * to the host.
 */
static int take_local_addrs(struct egress *e, struct corral_err *err)
{
	struct ifaddrs *ifa, *i;
	struct egress_ip ip;
	uint16_t port;
	size_t n = 0;
	int r;

	if (getifaddrs(&ifa) < 0) {
		r = -errno;
		return corral_set_errno(err, -r,
				      "cannot list this host's addresses (getifaddrs)");
	}
	for (i = ifa; i; i = i->ifa_next)
		if (i->ifa_addr && (i->ifa_addr->sa_family == AF_INET ||
				    i->ifa_addr->sa_family == AF_INET6))
			n++;
	e->local = n ? calloc(n, sizeof(*e->local)) : NULL;
	e->onlink = n ? calloc(n, sizeof(*e->onlink)) : NULL;
	if (n && (!e->local || !e->onlink)) {
		freeifaddrs(ifa);
		return corral_set_err(err, -ENOMEM, "out of memory for the %zu host addresses",
				      n);
	}
	for (i = ifa; i; i = i->ifa_next) {
		if (!i->ifa_addr || sockaddr_ip(i->ifa_addr, &ip, &port))
			continue;
		ip_normalise(&ip);
		e->local[e->nlocal++] = ip;
		if (take_onlink(i, &ip, &e->onlink[e->nonlink]))
			e->nonlink++;
	}
	freeifaddrs(ifa);
	return 0;
}

struct egress *egress_new(const struct corral_policy *p,
			  struct corral_err *err)
{
	struct egress *e = calloc(1, sizeof(*e));
	int r;

	if (!e) {
		corral_set_err(err, -ENOMEM,
			       "out of memory for the egress filter");
		return NULL;
	}
	r = compile_list(p->net_allow, p->nnet_allow, true, &e->allow,
			 &e->nallow, err);
	if (!r)
		r = compile_list(p->net_deny, p->nnet_deny, false, &e->deny,
				 &e->ndeny, err);
	if (!r)
		r = compile_hosts(e, p, err);
	if (!r)
		r = take_local_addrs(e, err);
	if (r) {
		egress_free(e);
		return NULL;
	}
	return e;
}

void egress_free(struct egress *e)
{
	if (!e)
		return;
	free(e->allow);
	free(e->deny);
	free(e->hosts);
	free(e->local);
	free(e->onlink);
	free(e);
}
