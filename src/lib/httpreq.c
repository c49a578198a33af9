/*
 * httpreq.c - request heads for the forward proxy, over http-parser.
 *
 * http-parser (2.9.4, as Debian builds it: the lenient, non-strict flavour)
 * finds the message boundaries: request line, headers, Content-Length and
 * chunked bodies, pipelined messages.  It is paused at the end of every
 * head and every message, so each one is reported on its own.  Everything
 * the lenient build lets through and a stricter upstream might read
 * differently is checked again here, because the head the upstream gets is
 * written from what this file understood.
 *
 * The head is copied into a buffer the connection owns (at most
 * HTTPREQ_HEAD_MAX bytes) before the parser sees it, so every callback
 * pointer is an offset into that one buffer, however the bytes arrived.
 * Body bytes are parsed where they lie and never copied.
 */
#include "httpreq.h"
#include "hostname.h"
#include "livemem.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define HEAD_INITIAL	1024
#define ROOM_REWRITE	512	/* Host and Connection lines we may add */

enum { CB_NONE, CB_FIELD, CB_VALUE };

/* ---- small checks ----------------------------------------------------- */

static bool tchar(uint8_t ch)
{
	/* RFC 9110 5.6.2 */
	if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	    (ch >= '0' && ch <= '9'))
		return true;
	return ch && strchr("!#$%&'*+-.^_`|~", ch);
}

static bool token_ok(const uint8_t *s, size_t n)
{
	size_t i;

	if (n == 0)
		return false;
	for (i = 0; i < n; i++)
		if (!tchar(s[i]))
			return false;
	return true;
}

/*
 * field-value: visible ASCII, SP, HTAB and obs-text.  No CR or LF: a
 * folded line shows up here as one value spanning CR LF SP, and a proxy
 * must not pass obs-fold on (RFC 9112 5.2).
 */
static bool value_ok(const uint8_t *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if ((s[i] < 0x20 && s[i] != '\t') || s[i] == 0x7f)
			return false;
	return true;
}

static bool digits_ok(const uint8_t *s, size_t n)
{
	size_t i;

	if (n == 0)
		return false;
	for (i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

/* Origin-form target: visible ASCII only, no fragment. */
static bool path_ok(const uint8_t *s, size_t n)
{
	size_t i;

	if (n == 0 || s[0] != '/')
		return false;
	for (i = 0; i < n; i++)
		if (s[i] <= 0x20 || s[i] >= 0x7f || s[i] == '#')
			return false;
	return true;
}

static bool span_is(const struct httpreq_conn *c, struct httpreq_span s,
		    const char *word)
{
	size_t n = strlen(word);

	return s.len == n && !strncasecmp((const char *)c->head + s.off, word, n);
}

/* ---- the request being built ----------------------------------------- */

struct host {
	char name[HTTPREQ_HOST_MAX + 1];
	bool ipv6;
	uint16_t port;
	bool port_given;
};

/* Check a host as written (IPv6 without brackets) and copy it. */
static bool host_set(struct host *h, const uint8_t *s, size_t n, bool ipv6)
{
	char tmp[INET6_ADDRSTRLEN];
	struct in6_addr a6;

	if (ipv6) {
		/* inet_pton also refuses zone ids ("%25eth0") and IPvFuture */
		if (n == 0 || n >= sizeof(tmp))
			return false;
		memcpy(tmp, s, n);
		tmp[n] = '\0';
		if (inet_pton(AF_INET6, tmp, &a6) != 1)
			return false;
	} else if (!hostname_valid(s, n, HTTPREQ_HOST_MAX, true)) {
		return false;
	}
	memcpy(h->name, s, n);
	h->name[n] = '\0';
	h->ipv6 = ipv6;
	return true;
}

/* ":port" or nothing; 1..65535. */
static bool port_parse(const uint8_t *s, size_t n, struct host *h)
{
	unsigned long v = 0;
	size_t i;

	h->port_given = false;
	if (n == 0)
		return true;
	if (s[0] != ':' || n < 2 || n > 6)
		return false;
	for (i = 1; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (s[i] - '0');
	}
	if (v == 0 || v > 65535)
		return false;
	h->port = (uint16_t)v;
	h->port_given = true;
	return true;
}

/* A Host header value: host or [IPv6], then an optional ":port". */
static bool authority_parse(const uint8_t *s, size_t n, struct host *h)
{
	const uint8_t *end;
	size_t hn;

	if (n == 0)
		return false;
	if (s[0] == '[') {
		end = memchr(s, ']', n);
		if (!end)
			return false;
		hn = (size_t)(end - s) - 1;
		return host_set(h, s + 1, hn, true) &&
		       port_parse(end + 1, n - hn - 2, h);
	}
	end = memchr(s, ':', n);
	hn = end ? (size_t)(end - s) : n;
	return host_set(h, s, hn, false) && port_parse(s + hn, n - hn, h);
}

static int fail(struct httpreq_conn *c, int status, const char *reason)
{
	c->phase = HTTPREQ_PH_FAILED;
	c->status = status;
	c->reason = reason;
	return HTTPREQ_ERROR;
}

/* ---- http-parser callbacks ------------------------------------------- */

static uint32_t head_off(const struct httpreq_conn *c, const char *at)
{
	return (uint32_t)((const uint8_t *)at - c->head);
}

static int on_url(http_parser *p, const char *at, size_t n)
{
	struct httpreq_conn *c = p->data;
	struct httpreq_span *t = &c->req.target;
	uint32_t off = head_off(c, at);

	if (t->len == 0)
		t->off = off;
	t->len = (uint32_t)(off + n - t->off);
	if (t->len > HTTPREQ_URL_MAX) {
		c->status = 414;
		c->reason = "request-target longer than 8 KiB";
		return -1;
	}
	return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t n)
{
	struct httpreq_conn *c = p->data;
	struct httpreq *r = &c->req;
	struct httpreq_field *f;
	uint32_t off;

	/* trailers of a chunked body: forwarded as body bytes, not kept */
	if (c->phase != HTTPREQ_PH_HEAD)
		return 0;
	off = head_off(c, at);
	f = r->nfields ? &r->fields[r->nfields - 1] : NULL;
	/* a new name, unless this piece continues the last one exactly */
	if (c->last_cb != CB_FIELD || !f || off != f->name.off + f->name.len) {
		if (r->nfields == HTTPREQ_HEADERS_MAX) {
			c->status = 431;
			c->reason = "more than 100 header fields";
			return -1;
		}
		f = &r->fields[r->nfields++];
		memset(f, 0, sizeof(*f));
		f->name.off = off;
	}
	f->name.len = (uint32_t)(off + n - f->name.off);
	c->last_cb = CB_FIELD;
	return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t n)
{
	struct httpreq_conn *c = p->data;
	struct httpreq *r = &c->req;
	struct httpreq_field *f;
	uint32_t off;

	if (c->phase != HTTPREQ_PH_HEAD)
		return 0;
	if (r->nfields == 0)
		return -1;
	off = head_off(c, at);
	f = &r->fields[r->nfields - 1];
	/* a later piece of the same value (or a folded line) extends it */
	if (c->last_cb != CB_VALUE)
		f->value.off = off;
	f->value.len = (uint32_t)(off + n - f->value.off);
	c->last_cb = CB_VALUE;
	return 0;
}

/*
 * A chunk's data ends in CRLF (RFC 9112 7.1).  The lenient http-parser
 * skips any two bytes there; an upstream that reads the rest of the line
 * instead takes what follows for another chunk size, and a request the
 * proxy passed as body is one it serves, never judged.  Checked as far as
 * the bytes fed go; the rest in the next feed (crlf_left).
 */
static int crlf_check(struct httpreq_conn *c, const uint8_t *at, size_t avail)
{
	static const char crlf[] = "\r\n";
	size_t i, from = 2 - c->crlf_left;

	for (i = 0; i < c->crlf_left && i < avail; i++) {
		if (at[i] != (uint8_t)crlf[from + i]) {
			c->status = 400;
			c->reason = "chunk data not followed by CRLF";
			return -1;
		}
	}
	c->crlf_left -= (uint8_t)i;
	return 0;
}

/* The last bytes of a chunk's data (nothing of it left): its CRLF next. */
static int on_body(http_parser *p, const char *at, size_t n)
{
	struct httpreq_conn *c = p->data;
	const uint8_t *end = (const uint8_t *)at + n;

	if (!(p->flags & F_CHUNKED) || p->content_length != 0)
		return 0;
	c->crlf_left = 2;
	return crlf_check(c, end, (size_t)(c->feed_end - end));
}

static int on_headers_complete(http_parser *p)
{
	struct httpreq_conn *c = p->data;

	c->headers_done = true;
	http_parser_pause(p, 1);
	return 0;
}

static int on_message_complete(http_parser *p)
{
	struct httpreq_conn *c = p->data;

	c->req.complete = true;
	http_parser_pause(p, 1);
	return 0;
}

static const http_parser_settings parser_settings = {
	.on_url = on_url,
	.on_header_field = on_header_field,
	.on_header_value = on_header_value,
	.on_headers_complete = on_headers_complete,
	.on_body = on_body,
	.on_message_complete = on_message_complete,
};

/* ---- judging a complete head ----------------------------------------- */

/* Names a proxy must not forward (RFC 9110 7.6.1) or that it replaces. */
static bool hop_by_hop(const struct httpreq_conn *c, struct httpreq_span name)
{
	static const char *const hop[] = {
		"connection", "proxy-connection", "keep-alive", "te",
		"proxy-authorization", "proxy-authenticate", "upgrade", "host",
	};
	size_t i;

	for (i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
		if (span_is(c, name, hop[i]))
			return true;
	return false;
}

/* Trim OWS the parser left around a value. */
static void trim(const struct httpreq_conn *c, struct httpreq_span *v)
{
	while (v->len && (c->head[v->off] == ' ' || c->head[v->off] == '\t')) {
		v->off++;
		v->len--;
	}
	while (v->len && (c->head[v->off + v->len - 1] == ' ' ||
			  c->head[v->off + v->len - 1] == '\t'))
		v->len--;
}

/*
 * The next token of the comma-separated list v from *i on, without its
 * blanks, in *tok; false at the list's end.  Empty elements are skipped.
 */
static bool list_next(const struct httpreq_conn *c, struct httpreq_span v,
		      uint32_t *i, struct httpreq_span *tok)
{
	uint32_t start, end;

	while (*i < v.len) {
		while (*i < v.len && (c->head[v.off + *i] == ',' ||
				      c->head[v.off + *i] == ' ' ||
				      c->head[v.off + *i] == '\t'))
			(*i)++;
		start = *i;
		while (*i < v.len && c->head[v.off + *i] != ',')
			(*i)++;
		end = *i;
		while (end > start && (c->head[v.off + end - 1] == ' ' ||
				       c->head[v.off + end - 1] == '\t'))
			end--;
		if (end > start) {
			*tok = (struct httpreq_span){ v.off + start, end - start };
			return true;
		}
	}
	return false;
}

/*
 * The names a Connection header lists are hop-by-hop too.  Listing a
 * framing header there would have the proxy strip it and the upstream read
 * the body as the next request: refused.
 */
static int connection_tokens(struct httpreq_conn *c, struct httpreq_span v)
{
	struct httpreq *r = &c->req;
	struct httpreq_span tok;
	uint32_t i = 0;
	size_t k;

	while (list_next(c, v, &i, &tok)) {
		if (span_is(c, tok, "content-length") ||
		    span_is(c, tok, "transfer-encoding") ||
		    span_is(c, tok, "host"))
			return fail(c, 400, "Connection header names a framing header");
		for (k = 0; k < r->nfields; k++)
			if (r->fields[k].name.len == tok.len &&
			    !strncasecmp((const char *)c->head + tok.off,
					 (const char *)c->head + r->fields[k].name.off,
					 tok.len))
				r->fields[k].hop = true;
	}
	return 0;
}

/* Is the token word in the comma-separated list v? */
static bool list_has(const struct httpreq_conn *c, struct httpreq_span v, const char *word)
{
	struct httpreq_span tok;
	uint32_t i = 0;

	while (list_next(c, v, &i, &tok))
		if (span_is(c, tok, word))
			return true;
	return false;
}

/*
 * A WebSocket handshake and nothing else (RFC 6455 4.1): an h2c or other
 * upgrade would carry requests the proxy cannot read, so only this one is
 * kept for the upstream.
 */
static bool is_websocket(const struct httpreq_conn *c)
{
	const struct httpreq *r = &c->req;
	bool upgrade = false, connection = false;
	size_t i;

	if (r->method != HTTP_GET || r->http_minor != 1 || r->chunked ||
	    (r->has_content_length && r->content_length))
		return false;
	for (i = 0; i < r->nfields; i++) {
		const struct httpreq_field *f = &r->fields[i];

		if (span_is(c, f->name, "upgrade")) {
			if (upgrade || !span_is(c, f->value, "websocket"))
				return false;
			upgrade = true;
		} else if (span_is(c, f->name, "connection") &&
			   list_has(c, f->value, "upgrade")) {
			connection = true;
		}
	}
	return upgrade && connection;
}

/* Every header on its own; returns the index of Host in *host or -1. */
static int check_fields(struct httpreq_conn *c, int *host)
{
	struct httpreq *r = &c->req;
	size_t i, te = 0;
	int ret;

	*host = -1;
	for (i = 0; i < r->nfields; i++) {
		struct httpreq_field *f = &r->fields[i];

		if (!token_ok(c->head + f->name.off, f->name.len))
			return fail(c, 400, "header name is not a token");
		trim(c, &f->value);
		if (!value_ok(c->head + f->value.off, f->value.len))
			return fail(c, 400, "header value with a control character or a folded line");
		f->hop = hop_by_hop(c, f->name);
		if (span_is(c, f->name, "host")) {
			if (*host >= 0)
				return fail(c, 400, "more than one Host header");
			*host = (int)i;
		} else if (span_is(c, f->name, "transfer-encoding")) {
			/* only what both ends surely read alike */
			if (te++ || !span_is(c, f->value, "chunked"))
				return fail(c, 501, "Transfer-Encoding other than a single \"chunked\"");
			/* HTTP/1.0 has no chunked framing (RFC 9112 6.1) */
			if (r->http_minor == 0)
				return fail(c, 400, "Transfer-Encoding in an HTTP/1.0 request");
		} else if (span_is(c, f->name, "content-length")) {
			if (!digits_ok(c->head + f->value.off, f->value.len))
				return fail(c, 400, "Content-Length is not a number");
		}
	}
	for (i = 0; i < r->nfields; i++) {
		if (!span_is(c, r->fields[i].name, "connection"))
			continue;
		ret = connection_tokens(c, r->fields[i].value);
		if (ret)
			return ret;
	}
	return 0;
}

static void take_host(struct httpreq *r, const struct host *h)
{
	memcpy(r->host, h->name, sizeof(r->host));
	r->host_ipv6 = h->ipv6;
	r->port = h->port;
	r->port_given = h->port_given;
}

/* The URL parser's host, and whether it was in brackets. */
static bool url_host(const uint8_t *t, const struct http_parser_url *u,
		     struct host *h)
{
	uint16_t off = u->field_data[UF_HOST].off;
	bool v6 = off > 0 && t[off - 1] == '[';

	return host_set(h, t + off, u->field_data[UF_HOST].len, v6);
}

/* "CONNECT host:port": a port is required, nothing else may follow. */
static int target_authority(struct httpreq_conn *c, const uint8_t *t, size_t n)
{
	const uint16_t want = 1 << UF_HOST | 1 << UF_PORT;
	struct httpreq *r = &c->req;
	struct http_parser_url u;
	struct host h;

	http_parser_url_init(&u);
	if (http_parser_parse_url((const char *)t, n, 1, &u) || u.field_set != want)
		return fail(c, 400, "CONNECT target is not host:port");
	if (!url_host(t, &u, &h))
		return fail(c, 400, "CONNECT host is not a hostname or IP address");
	if (u.port == 0)
		return fail(c, 400, "CONNECT to port 0");
	h.port = u.port;
	h.port_given = true;
	take_host(r, &h);
	r->form = HTTPREQ_AUTHORITY;
	return 0;
}

/* "GET http://host[:port]/path?query": http only, no userinfo. */
static int target_absolute(struct httpreq_conn *c, const uint8_t *t, size_t n)
{
	struct httpreq *r = &c->req;
	struct http_parser_url u;
	size_t auth_end;
	struct host h;
	uint16_t set;

	http_parser_url_init(&u);
	if (http_parser_parse_url((const char *)t, n, 0, &u))
		return fail(c, 400, "malformed URL");
	set = u.field_set;
	/*
	 * "http://allowed.test@evil.test/" names evil.test.  Any '@' before
	 * the path counts, also an empty userinfo the URL parser passes over.
	 */
	auth_end = set & 1 << UF_PATH ? u.field_data[UF_PATH].off : n;
	if (set & 1 << UF_USERINFO || memchr(t, '@', auth_end))
		return fail(c, 400, "userinfo (user@) in the URL");
	if (!(set & 1 << UF_SCHEMA) || !(set & 1 << UF_HOST))
		return fail(c, 400, "request-target is neither a path nor an absolute URL");
	if (u.field_data[UF_SCHEMA].len != 4 ||
	    strncasecmp((const char *)t + u.field_data[UF_SCHEMA].off, "http", 4))
		return fail(c, 400, "URL scheme other than http (use CONNECT for https)");
	if (set & 1 << UF_FRAGMENT)
		return fail(c, 400, "fragment (#) in the request-target");
	if (!url_host(t, &u, &h))
		return fail(c, 400, "URL host is not a hostname or IP address");
	h.port = 80;
	h.port_given = false;
	if (set & 1 << UF_PORT) {
		if (u.port == 0)
			return fail(c, 400, "URL port 0");
		h.port = u.port;
		h.port_given = true;
	}
	if (set & 1 << UF_PATH) {
		r->path_span.off = r->target.off + u.field_data[UF_PATH].off;
		r->path_span.len = (uint32_t)(n - u.field_data[UF_PATH].off);
		if (!path_ok(c->head + r->path_span.off, r->path_span.len))
			return fail(c, 400, "URL path with characters that must be escaped");
	} else if (set & 1 << UF_QUERY) {
		return fail(c, 400, "URL with a query but no path");
	}
	take_host(r, &h);
	r->form = HTTPREQ_ABSOLUTE;
	return 0;
}

/* "GET /path" (transparent mode): the Host header names the target. */
static int target_origin(struct httpreq_conn *c, const uint8_t *t, size_t n,
			 int host)
{
	struct httpreq *r = &c->req;
	struct httpreq_span v;
	struct host h;

	if (!path_ok(t, n))
		return fail(c, 400, "request-target is not a path (or has characters that must be escaped)");
	if (host < 0)
		return fail(c, 400, "request without a Host header");
	v = r->fields[host].value;
	if (!authority_parse(c->head + v.off, v.len, &h))
		return fail(c, 400, "Host header is not host[:port]");
	if (!h.port_given)
		h.port = 80;
	r->path_span = r->target;
	take_host(r, &h);
	r->form = HTTPREQ_ORIGIN;
	return 0;
}

/* A Host header next to an absolute or authority target must agree. */
static int host_agrees(struct httpreq_conn *c, int host)
{
	struct httpreq *r = &c->req;
	struct httpreq_span v;
	struct host h;

	if (host < 0)
		return 0;
	v = r->fields[host].value;
	if (!authority_parse(c->head + v.off, v.len, &h))
		return fail(c, 400, "Host header is not host[:port]");
	if (h.ipv6 != r->host_ipv6 || strcasecmp(h.name, r->host))
		return fail(c, 400, "URL host and Host header disagree");
	if (r->form == HTTPREQ_ABSOLUTE && (h.port_given ? h.port : 80) != r->port)
		return fail(c, 400, "URL port and Host header port disagree");
	if (r->form == HTTPREQ_AUTHORITY && h.port_given && h.port != r->port)
		return fail(c, 400, "CONNECT port and Host header port disagree");
	return 0;
}

static int analyze(struct httpreq_conn *c)
{
	const http_parser *p = &c->parser;
	struct httpreq *r = &c->req;
	const uint8_t *t = c->head + r->target.off;
	size_t n = r->target.len;
	int host, ret;

	r->method = (enum http_method)p->method;
	r->method_name = http_method_str(r->method);
	r->http_major = p->http_major;
	r->http_minor = p->http_minor;
	if (r->http_major != 1 || r->http_minor > 1)
		return fail(c, 505, "HTTP version other than 1.0 and 1.1");
	if (n == 0)
		return fail(c, 400, "request without a target");
	ret = check_fields(c, &host);
	if (ret)
		return ret;
	if (r->method == HTTP_CONNECT)
		ret = target_authority(c, t, n);
	else if (t[0] == '/')
		ret = target_origin(c, t, n, host);
	else if (t[0] == '*')
		ret = fail(c, 400, "asterisk-form (OPTIONS *) is not proxied");
	else
		ret = target_absolute(c, t, n);
	if (ret)
		return ret;
	if (r->form != HTTPREQ_ORIGIN) {
		ret = host_agrees(c, host);
		if (ret)
			return ret;
	}
	if (r->path_span.len) {
		r->path = (const char *)c->head + r->path_span.off;
		r->path_len = r->path_span.len;
	} else {
		r->path = "/";
		r->path_len = 1;
	}
	r->keep_alive = http_should_keep_alive(p);
	r->chunked = p->flags & F_CHUNKED;
	r->has_content_length = p->flags & F_CONTENTLENGTH;
	if (r->has_content_length)
		r->content_length = p->content_length;
	r->websocket = is_websocket(c);
	return 0;
}

/* ---- feeding ---------------------------------------------------------- */

static int parser_error(struct httpreq_conn *c, enum http_errno e)
{
	/* a callback already said what was wrong */
	if (c->status)
		return fail(c, c->status, c->reason);
	switch (e) {
	case HPE_HEADER_OVERFLOW:
		return fail(c, 431, "request head too large");
	case HPE_INVALID_TRANSFER_ENCODING:
		return fail(c, 501, "Transfer-Encoding other than chunked");
	case HPE_UNEXPECTED_CONTENT_LENGTH:
		return fail(c, 400, "Content-Length twice, or with Transfer-Encoding");
	default:
		return fail(c, 400, http_errno_description(e));
	}
}

static void start_request(struct httpreq_conn *c)
{
	c->head_used = 0;
	c->headers_done = false;
	c->last_cb = CB_NONE;
	c->reset_pending = false;
	c->crlf_left = 0;
	memset(&c->req, 0, sizeof(c->req));
}

/* The current request is complete: what may come next on the connection. */
static void end_message(struct httpreq_conn *c)
{
	if (c->req.method == HTTP_CONNECT)
		c->phase = HTTPREQ_PH_TUNNEL;
	else if (!c->req.keep_alive)
		c->phase = HTTPREQ_PH_CLOSED;
	else
		c->phase = HTTPREQ_PH_HEAD;
	c->reset_pending = true;
}

static int head_reserve(struct httpreq_conn *c, size_t need)
{
	size_t cap = c->head_cap ? c->head_cap : HEAD_INITIAL;
	uint8_t *p;

	if (need <= c->head_cap)
		return 0;
	while (cap < need)
		cap *= 2;
	if (cap > HTTPREQ_HEAD_MAX)
		cap = HTTPREQ_HEAD_MAX;
	/* a request under way (a body's first bytes too): not in a fork */
	p = livemem_realloc(c->head, cap);
	if (!p)
		return -ENOMEM;
	c->head = p;
	c->head_cap = cap;
	return 0;
}

static int finish_head(struct httpreq_conn *c)
{
	struct httpreq *r = &c->req;
	int ret;

	ret = analyze(c);
	if (ret)
		return ret;
	r->head_len = c->head_used;
	r->has_body = !r->complete;
	if (r->method == HTTP_CONNECT) {
		/* whatever follows is the tunnel, never parsed as HTTP */
		c->phase = HTTPREQ_PH_TUNNEL;
		c->reset_pending = true;
	} else if (r->complete) {
		end_message(c);
	} else {
		c->phase = HTTPREQ_PH_BODY;
	}
	return HTTPREQ_HEAD;
}

static int feed_head(struct httpreq_conn *c, const uint8_t *in, size_t len,
		     size_t *consumed)
{
	size_t start = c->head_used, n = len, k;
	enum http_errno e;
	char *data;

	if (n > HTTPREQ_HEAD_MAX - c->head_used)
		n = HTTPREQ_HEAD_MAX - c->head_used;
	if (head_reserve(c, c->head_used + n))
		return fail(c, 503, "out of memory for the request head");
	data = (char *)c->head + c->head_used;
	memcpy(data, in, n);
	/* no body is parsed here (paused at the head's end), but bound it */
	c->feed_end = (const uint8_t *)data + n;
	k = http_parser_execute(&c->parser, &parser_settings, data, n);
	c->head_used += k;
	*consumed = k;
	e = HTTP_PARSER_ERRNO(&c->parser);
	if (e == HPE_OK) {
		if (c->head_used >= HTTPREQ_HEAD_MAX)
			return fail(c, 431, "request head larger than 64 KiB");
		return HTTPREQ_NEED_MORE;
	}
	if (e != HPE_PAUSED || !c->headers_done)
		return parser_error(c, e);

	/*
	 * Paused in on_headers_complete, on the head's last byte (the LF,
	 * still unparsed and inside data).  Let the parser take that byte:
	 * it then checks Transfer-Encoding and ends a request without body.
	 */
	http_parser_pause(&c->parser, 0);
	k = http_parser_execute(&c->parser, &parser_settings,
				(const char *)c->head + c->head_used, 1);
	c->head_used += k;
	*consumed = c->head_used - start;
	e = HTTP_PARSER_ERRNO(&c->parser);
	if (e == HPE_PAUSED && c->req.complete)
		http_parser_pause(&c->parser, 0);
	else if (e != HPE_OK)
		return parser_error(c, e);
	return finish_head(c);
}

static int feed_body(struct httpreq_conn *c, const uint8_t *in, size_t len,
		     size_t *consumed)
{
	enum http_errno e;
	size_t k;

	if (crlf_check(c, in, len))
		return fail(c, c->status, c->reason);
	c->feed_end = in + len;
	k = http_parser_execute(&c->parser, &parser_settings,
				(const char *)in, len);
	*consumed = k;
	e = HTTP_PARSER_ERRNO(&c->parser);
	if (e == HPE_PAUSED && c->req.complete)
		http_parser_pause(&c->parser, 0);
	else if (e != HPE_OK)
		return parser_error(c, e);
	c->req.body_len += k;
	if (c->req.complete)
		end_message(c);
	return HTTPREQ_BODY;
}

void httpreq_init(struct httpreq_conn *c)
{
	memset(c, 0, sizeof(*c));
	http_parser_init(&c->parser, HTTP_REQUEST);
	c->parser.data = c;
	c->phase = HTTPREQ_PH_HEAD;
	c->last_cb = CB_NONE;
}

void httpreq_free(struct httpreq_conn *c)
{
	livemem_free(c->head);
	c->head = NULL;
	c->head_cap = 0;
	c->head_used = 0;
}

int httpreq_feed(struct httpreq_conn *c, const uint8_t *in, size_t len,
		 size_t *consumed)
{
	*consumed = 0;
	/* the struct may have been moved since the last call */
	c->parser.data = c;
	switch (c->phase) {
	case HTTPREQ_PH_FAILED:
		return HTTPREQ_ERROR;
	case HTTPREQ_PH_TUNNEL:
		return HTTPREQ_TUNNEL;
	case HTTPREQ_PH_CLOSED:
		/* old clients end a body with a stray CRLF: harmless */
		while (*consumed < len && (in[*consumed] == '\r' ||
					   in[*consumed] == '\n'))
			++*consumed;
		if (*consumed == len)
			return HTTPREQ_NEED_MORE;
		return fail(c, 400, "request after \"Connection: close\"");
	default:
		break;
	}
	/* a zero-length execute means end of stream to http-parser */
	if (len == 0)
		return HTTPREQ_NEED_MORE;
	if (!in)
		return fail(c, 500, "httpreq_feed: no buffer");
	if (c->phase == HTTPREQ_PH_HEAD) {
		if (c->reset_pending)
			start_request(c);
		return feed_head(c, in, len, consumed);
	}
	return feed_body(c, in, len, consumed);
}

bool httpreq_idle(const struct httpreq_conn *c)
{
	return c->phase == HTTPREQ_PH_HEAD &&
	       (c->reset_pending || c->head_used == 0);
}

/* ---- the head for the upstream ---------------------------------------- */

struct wbuf {
	char *p;
	size_t cap;
	size_t len;
	bool full;
};

static void put(struct wbuf *w, const void *s, size_t n)
{
	if (w->full || n > w->cap - w->len) {
		w->full = true;
		return;
	}
	memcpy(w->p + w->len, s, n);
	w->len += n;
}

static void put_str(struct wbuf *w, const char *s)
{
	put(w, s, strlen(s));
}

static void put_span(struct wbuf *w, const struct httpreq_conn *c,
		     struct httpreq_span s)
{
	put(w, c->head + s.off, s.len);
}

size_t httpreq_origin_form_max(const struct httpreq_conn *c)
{
	return c->req.head_len + ROOM_REWRITE;
}

int httpreq_origin_form(const struct httpreq_conn *c, char *out,
			size_t outsize, size_t *outlen)
{
	const struct httpreq *r = &c->req;
	struct wbuf w = { out, outsize, 0, false };
	char port[8];
	size_t i;

	*outlen = 0;
	if (c->phase == HTTPREQ_PH_FAILED || !r->method_name ||
	    r->form == HTTPREQ_AUTHORITY)
		return -EINVAL;
	put_str(&w, r->method_name);
	put_str(&w, " ");
	put(&w, r->path, r->path_len);
	put_str(&w, r->http_minor ? " HTTP/1.1\r\n" : " HTTP/1.0\r\n");

	put_str(&w, "Host: ");
	put_str(&w, r->host_ipv6 ? "[" : "");
	put_str(&w, r->host);
	put_str(&w, r->host_ipv6 ? "]" : "");
	if (r->port != 80) {
		snprintf(port, sizeof(port), ":%u", (unsigned)r->port);
		put_str(&w, port);
	}
	put_str(&w, "\r\n");

	for (i = 0; i < r->nfields; i++) {
		if (r->fields[i].hop)
			continue;
		put_span(&w, c, r->fields[i].name);
		put_str(&w, ": ");
		put_span(&w, c, r->fields[i].value);
		put_str(&w, "\r\n");
	}
	if (r->websocket)
		put_str(&w, "Connection: Upgrade\r\nUpgrade: websocket\r\n");
	else if (!r->keep_alive)
		put_str(&w, "Connection: close\r\n");
	else if (r->http_minor == 0)
		put_str(&w, "Connection: keep-alive\r\n");
	put_str(&w, "\r\n");
	if (w.full)
		return -ENOSPC;
	*outlen = w.len;
	return 0;
}
