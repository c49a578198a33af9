/*
 * httpreq.h - request heads for the forward proxy, over nodejs http-parser.
 *
 * One struct httpreq_conn per client connection.  The event loop feeds the
 * bytes the client sent; httpreq_feed() stops at every boundary the proxy
 * must act on and says how many bytes it took:
 *
 *   HTTPREQ_HEAD   a request head is complete and judged well-formed;
 *                  c->req describes it.  Those bytes are not forwarded:
 *                  httpreq_origin_form() writes the head the upstream gets.
 *   HTTPREQ_BODY   the bytes taken are body framing of the current request
 *                  (Content-Length bytes, or chunks with their sizes and
 *                  trailers, as sent): forward them as they are.  When
 *                  c->req.complete turns true the request has ended, and
 *                  the next feed starts on the next (pipelined) request.
 *   HTTPREQ_TUNNEL after a CONNECT head: the rest of the stream is the
 *                  tunnel, nothing is taken.
 *   HTTPREQ_NEED_MORE  everything was taken, the head is not complete yet.
 *   HTTPREQ_ERROR  malformed or refused: answer c->status (400, 414, 431,
 *                  501 or 505) with c->reason and close.
 *
 * The parser never lets a request through that two HTTP parsers could read
 * differently: Content-Length with Transfer-Encoding, any Transfer-Encoding
 * but "chunked", two Host headers, a URL host that differs from Host,
 * userinfo in the URL, folded or control-character header values, header
 * names that are not tokens, framing headers named in Connection.  The head
 * the upstream gets is written anew from what was parsed, not copied.
 *
 * No I/O, no global state; heap use is the head buffer (at most
 * HTTPREQ_HEAD_MAX), freed by httpreq_free().
 */
#ifndef CORRAL_HTTPREQ_H
#define CORRAL_HTTPREQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <http_parser.h>

#define HTTPREQ_HEAD_MAX	65536	/* request line + headers, bytes */
#define HTTPREQ_HEADERS_MAX	100
#define HTTPREQ_URL_MAX		8192
#define HTTPREQ_HOST_MAX	253	/* a DNS name; IPv6 literals are shorter */

/* Return values of httpreq_feed(). */
#define HTTPREQ_ERROR		(-1)
#define HTTPREQ_NEED_MORE	0
#define HTTPREQ_HEAD		1
#define HTTPREQ_BODY		2
#define HTTPREQ_TUNNEL		3

enum httpreq_form {
	HTTPREQ_ORIGIN,		/* "GET /path" with a Host header (transparent) */
	HTTPREQ_ABSOLUTE,	/* "GET http://host:port/path" */
	HTTPREQ_AUTHORITY,	/* "CONNECT host:port" */
};

/* Bytes of the head buffer (httpreq_conn.head). */
struct httpreq_span {
	uint32_t off;
	uint32_t len;
};

struct httpreq_field {
	struct httpreq_span name;
	struct httpreq_span value;	/* without surrounding whitespace */
	bool hop;			/* hop-by-hop: not forwarded upstream */
};

struct httpreq {
	enum http_method method;
	const char *method_name;	/* "GET", static */
	enum httpreq_form form;
	unsigned short http_major, http_minor;	/* 1.0 or 1.1 */

	/*
	 * The target, as written (not lowercased, no trailing dot removed):
	 * from the URL for absolute and authority form, from Host for origin
	 * form.  IPv6 literals without their brackets, host_ipv6 set.
	 */
	char host[HTTPREQ_HOST_MAX + 1];
	bool host_ipv6;
	uint16_t port;			/* never 0; 80 when not given (http) */
	bool port_given;

	/* origin-form target for the upstream ("/a?b"), not NUL-terminated */
	const char *path;
	size_t path_len;

	bool keep_alive;		/* the connection may carry another request */
	bool chunked;
	bool has_content_length;
	uint64_t content_length;
	bool has_body;			/* body framing follows the head */
	/*
	 * A WebSocket handshake (GET, HTTP/1.1, no body, one "Upgrade:
	 * websocket", "upgrade" in Connection): httpreq_origin_form() keeps
	 * the upgrade while it is set.  Clear it to send the request plain.
	 */
	bool websocket;

	size_t head_len;		/* bytes the head took on the wire */
	uint64_t body_len;		/* body framing bytes taken so far */
	bool complete;			/* head and body have been seen in full */

	/* where the parts are in the head buffer, for rewriting */
	struct httpreq_span target;	/* request-target as sent */
	struct httpreq_span path_span;	/* its origin-form part; len 0 = "/" */
	size_t nfields;
	struct httpreq_field fields[HTTPREQ_HEADERS_MAX];
};

enum httpreq_phase {
	HTTPREQ_PH_HEAD = 0,
	HTTPREQ_PH_BODY,
	HTTPREQ_PH_TUNNEL,
	HTTPREQ_PH_CLOSED,	/* after a request without keep-alive */
	HTTPREQ_PH_FAILED,
};

struct httpreq_conn {
	http_parser parser;
	enum httpreq_phase phase;
	bool reset_pending;	/* the last request ended: next feed starts anew */
	bool headers_done;
	int last_cb;		/* which header callback ran last */

	uint8_t *head;		/* the current head as received */
	size_t head_used;
	size_t head_cap;

	struct httpreq req;

	/* the CRLF after a chunk's data: checked here, http-parser does not */
	const uint8_t *feed_end;	/* the end of the bytes being fed */
	uint8_t crlf_left;	/* its bytes still to come in a later feed */

	/* after HTTPREQ_ERROR */
	int status;		/* HTTP status to answer with */
	const char *reason;	/* static text for the response and the event */
};

void httpreq_init(struct httpreq_conn *c);
void httpreq_free(struct httpreq_conn *c);

/*
 * Feed bytes from the client; see the top of this file.  *consumed says how
 * many of them the call took.  c->req stays valid until the next call that
 * starts a new request.
 */
int httpreq_feed(struct httpreq_conn *c, const uint8_t *in, size_t len,
		 size_t *consumed);

/* True between requests: nothing of a next request has arrived yet. */
bool httpreq_idle(const struct httpreq_conn *c);

/*
 * Write the head of the current request as the upstream should get it:
 * "METHOD path HTTP/1.x", a Host line made from the parsed host and port,
 * every header except Host and the hop-by-hop ones (Connection,
 * Proxy-Connection, Keep-Alive, Proxy-Authorization, Proxy-Authenticate,
 * TE, Upgrade, and those Connection names), then "Connection: close" when
 * the client did not ask for keep-alive, or "Connection: Upgrade" and
 * "Upgrade: websocket" for a request whose req.websocket is set.  Returns 0 with *outlen set,
 * -ENOSPC if outsize is too small (httpreq_origin_form_max() always is
 * enough), -EINVAL if there is no head or it is a CONNECT.
 */
int httpreq_origin_form(const struct httpreq_conn *c, char *out,
			size_t outsize, size_t *outlen);
size_t httpreq_origin_form_max(const struct httpreq_conn *c);

#endif
