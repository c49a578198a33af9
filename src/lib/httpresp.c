/*
 * httpresp.c - the answers on a connection whose responses are read
 * (httpresp.h): message ends, content and framing, codings.
 */
#include "httpresp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void httpresp_init(struct httpresp *r)
{
	memset(r, 0, sizeof(*r));
	http_parser_init(&r->parser, HTTP_RESPONSE);
	r->parser.data = r;
}

void httpresp_free(struct httpresp *r)
{
	free(r->cuts);
	free(r->scratch);
	r->cuts = NULL;
	r->scratch = NULL;
}

bool httpresp_idle(const struct httpresp *r)
{
	return !r->pending && !r->in_msg;
}

int httpresp_sent(struct httpresp *r, bool head)
{
	if (r->pending == HTTPRESP_PENDING_MAX)
		return -1;
	if (head)
		r->heads |= 1ULL << r->pending;
	r->pending++;
	return 0;
}

static struct httpresp *of(http_parser *p)
{
	return p->data;
}

static int on_begin(http_parser *p)
{
	struct httpresp *r = of(p);

	r->in_head = true;
	r->in_msg = true;
	/*
	 * Bytes the upstream sent beyond an answer it got wrong (a body
	 * longer than its Content-Length said) are no answer of a request:
	 * placed as one, whatever they frame (a message cut inside a value)
	 * would go on.
	 */
	if (!r->pending) {
		snprintf(r->why, sizeof(r->why), "an answer to no request sent");
		return -1;
	}
	return 0;
}

/* false: not all of it had room */
static bool append(char *dst, size_t *n, size_t cap, const char *at, size_t len)
{
	size_t k = len < cap - 1 - *n ? len : cap - 1 - *n;

	memcpy(dst + *n, at, k);
	*n += k;
	dst[*n] = '\0';
	return k == len;
}

static bool trimmed_is(const char *v, const char *want)
{
	size_t n = strlen(v);

	while (*v == ' ' || *v == '\t')
		v++, n--;
	while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
		n--;
	return n == strlen(want) && !strncasecmp(v, want, n);
}

/*
 * Why an answer cannot be read, by its header: the coding named if it is
 * one a user meets, never the value as it came, which is the upstream's
 * bytes, unmasked (a server that put a request's credentials there would
 * show them in the event and in the 502 the sandbox gets).
 */
static void refuse_coding(struct httpresp *r, const char *header, const char *other)
{
	static const char *const known[] = {
		"gzip", "x-gzip", "deflate", "br", "zstd", "compress", "x-compress",
	};

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		if (trimmed_is(r->value, known[i])) {
			snprintf(r->why, sizeof(r->why), "%s: %s", header, known[i]);
			return;
		}
	}
	snprintf(r->why, sizeof(r->why), "a %s other than %s", header, other);
}

/* a header's name and value are whole: is it a coding we cannot read? */
static void header_done(struct httpresp *r)
{
	if (!r->in_value)
		return;
	r->in_value = false;
	/* a value longer than its room may say more after what was kept */
	if (!strcasecmp(r->name, "content-encoding") && !r->why[0] &&
	    (r->value_long || (!trimmed_is(r->value, "") && !trimmed_is(r->value, "identity"))))
		refuse_coding(r, "Content-Encoding", "identity");
	if (!strcasecmp(r->name, "transfer-encoding") && !r->why[0] &&
	    (r->value_long || !trimmed_is(r->value, "chunked")))
		refuse_coding(r, "Transfer-Encoding", "chunked");
	r->value_long = false;
	r->nname = r->nvalue = 0;
	r->name[0] = r->value[0] = '\0';
}

static int on_field(http_parser *p, const char *at, size_t len)
{
	struct httpresp *r = of(p);

	/*
	 * A chunked body's trailers: content as a head is, from the last
	 * chunk's data on, also while they are not whole (content_end would
	 * have stopped at that data, and the trailers gone on unread).
	 */
	if (!r->in_head)
		r->body_open = false;
	header_done(r);
	append(r->name, &r->nname, sizeof(r->name), at, len);
	return 0;
}

static int on_value(http_parser *p, const char *at, size_t len)
{
	struct httpresp *r = of(p);

	r->in_value = true;
	if (!append(r->value, &r->nvalue, sizeof(r->value), at, len))
		r->value_long = true;
	return 0;
}

static int on_headers(http_parser *p)
{
	struct httpresp *r = of(p);
	bool head;

	header_done(r);
	r->in_head = false;
	/* the proxy never asks for an upgrade on a connection it reads */
	if (!r->why[0] && p->status_code == 101)
		snprintf(r->why, sizeof(r->why), "101 Switching Protocols, unasked");
	/*
	 * nor for a range (secrets.c drops Range): a piece of an echo (a range
	 * in the query) may cut a value where no whole spelling is left
	 */
	if (!r->why[0] && p->status_code == 206)
		snprintf(r->why, sizeof(r->why), "206 Partial Content, unasked");
	if (r->why[0]) {
		r->head_refused = true;
		return -1;
	}
	/* an interim answer (100 Continue) comes before the request's own */
	if (p->status_code < 200)
		return 0;
	head = r->pending && (r->heads & 1);
	r->heads >>= 1;
	if (r->pending)
		r->pending--;
	/*
	 * http_parser reads a 204's or a 304's Content-Length as a body's;
	 * a client reads none (RFC 9112 6.3): framed as the client frames it
	 */
	r->bodiless = head || p->status_code == 204 || p->status_code == 304;
	return r->bodiless ? 1 : 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
	struct httpresp *r = of(p);
	size_t off = at - r->base;

	if (r->body_open && off > r->body_end) {
		if (r->ncuts == r->capcuts) {
			size_t cap = r->capcuts ? 2 * r->capcuts : 16;
			struct httpresp_cut *grown = realloc(r->cuts, cap * sizeof(*grown));

			if (!grown) {
				snprintf(r->why, sizeof(r->why), "no memory to read it");
				return -1;
			}
			r->cuts = grown;
			r->capcuts = cap;
		}
		r->cuts[r->ncuts++] = (struct httpresp_cut){ r->body_end, off - r->body_end };
	}
	r->body_open = true;
	r->body_end = off + len;
	return 0;
}

static int on_complete(http_parser *p)
{
	struct httpresp *r = of(p);

	r->body_open = false;
	r->in_msg = false;
	/* a 1xx before the answer is not it: bodiless is the last final one's */
	if (r->bodiless && p->status_code >= 200)
		r->ended = true;
	r->bodiless = false;
	/* stop here: where the message ends is where execute returns */
	http_parser_pause(p, 1);
	return 0;
}

static const http_parser_settings settings = {
	.on_message_begin = on_begin,
	.on_header_field = on_field,
	.on_header_value = on_value,
	.on_headers_complete = on_headers,
	.on_body = on_body,
	.on_message_complete = on_complete,
};

/* bytes after an answer with no body: whose they are cannot be known */
static int after_end(struct httpresp *r)
{
	snprintf(r->why, sizeof(r->why), "bytes after an answer that has no body "
		 "(a HEAD's, a 204, a 304)");
	return -1;
}

int httpresp_feed(struct httpresp *r, const char *buf, size_t len)
{
	r->base = buf;
	while (r->fed < len) {
		enum http_errno e;
		size_t n;

		if (r->ended)
			return after_end(r);
		n = http_parser_execute(&r->parser, &settings, buf + r->fed, len - r->fed);
		e = HTTP_PARSER_ERRNO(&r->parser);

		r->fed += n;
		if (e == HPE_PAUSED) {
			r->start = r->fed;
			http_parser_pause(&r->parser, 0);
			continue;
		}
		if (e != HPE_OK) {
			if (!r->why[0])
				snprintf(r->why, sizeof(r->why), "not HTTP the proxy can read (%s)",
					 http_errno_name(e));
			return -1;
		}
		if (n == 0)
			break;
	}
	if (r->in_head && r->fed - r->start > HTTPRESP_HEAD_MAX) {
		snprintf(r->why, sizeof(r->why), "a head over %d bytes", HTTPRESP_HEAD_MAX);
		r->head_refused = true;
		return -1;
	}
	return 0;
}

/*
 * Where content ends: in a chunked body, what came after its last piece
 * is framing (a CRLF, the next size) until a piece follows it.
 */
static size_t content_end(const struct httpresp *r, size_t len)
{
	return r->body_open && r->body_end < len ? r->body_end : len;
}

/* where content byte x is in the buffer */
static size_t wire_of(const struct httpresp *r, size_t x)
{
	size_t w = x;

	for (size_t i = 0; i < r->ncuts && r->cuts[i].off <= w; i++)
		w += r->cuts[i].len;
	return w;
}

size_t httpresp_releasable(const struct httpresp *r, size_t len, size_t hold)
{
	size_t content = content_end(r, len), w;

	for (size_t i = 0; i < r->ncuts; i++)
		content -= r->cuts[i].len;
	/*
	 * Nothing held: all goes, a chunk's CRLF too, which a client reads
	 * before it hands the chunk on (a stream's event would wait for the
	 * next one); a size line cut short is the next feed's first cut.
	 */
	w = hold ? wire_of(r, content - (hold < content ? hold : content)) : len;
	if (w > len)
		w = len;
	/* all of a message that ended goes; nothing of a head not yet whole */
	if (r->in_head)
		return r->start;
	return w > r->start ? w : r->start;
}

void httpresp_release(struct httpresp *r, size_t n)
{
	size_t k = 0;

	r->fed -= n;
	r->start = r->start > n ? r->start - n : 0;
	r->body_end = r->body_end > n ? r->body_end - n : 0;
	for (size_t i = 0; i < r->ncuts; i++) {
		struct httpresp_cut c = r->cuts[i];
		size_t end = c.off + c.len;

		if (end <= n)
			continue;
		r->cuts[k++] = c.off < n ? (struct httpresp_cut){ 0, end - n } :
					   (struct httpresp_cut){ c.off - n, c.len };
	}
	r->ncuts = k;
}

/*
 * The i-th run of content in buf[0, len): [*from, *to); false past the
 * last.  A cut at or past len (a message after len, its framing read
 * already) is not in it.
 */
static bool content_run(const struct httpresp *r, size_t len, size_t i, size_t *from,
			size_t *to)
{
	if (i > r->ncuts)
		return false;
	*from = i ? r->cuts[i - 1].off + r->cuts[i - 1].len : 0;
	*to = i < r->ncuts && r->cuts[i].off < len ? r->cuts[i].off : len;
	return *from < len;
}

char *httpresp_content(struct httpresp *r, char *buf, size_t len, size_t *n)
{
	size_t from, to, k = 0;

	len = content_end(r, len);
	*n = len;
	if (!r->ncuts)
		return buf;
	if (r->capscratch < len) {
		char *grown = realloc(r->scratch, len);

		if (!grown)
			return NULL;
		r->scratch = grown;
		r->capscratch = len;
	}
	for (size_t i = 0; content_run(r, len, i, &from, &to); i++) {
		memcpy(r->scratch + k, buf + from, to - from);
		k += to - from;
	}
	*n = k;
	return r->scratch;
}

void httpresp_content_back(const struct httpresp *r, char *buf, size_t len,
			   const char *content)
{
	size_t from, to, k = 0;

	len = content_end(r, len);
	if (content == buf)
		return;
	for (size_t i = 0; content_run(r, len, i, &from, &to); i++) {
		memcpy(buf + from, content + k, to - from);
		k += to - from;
	}
}
