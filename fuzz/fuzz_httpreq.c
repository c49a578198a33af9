/*
 * fuzz_httpreq.c - libFuzzer target for httpreq.c (with http-parser).
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE \
 *         -Iinclude -Isrc/lib fuzz/fuzz_httpreq.c src/lib/httpreq.c \
 *         -lhttp_parser -o fuzz_httpreq
 *
 * Checks, besides memory safety:
 *  - the same requests, bodies and verdict (refused or not) whether the stream arrives at
 *    once or in pieces (the first byte picks their size); only a body an
 *    error cuts short may have been passed on further in pieces;
 *  - the head written for the upstream parses back to the same method,
 *    host, port, path and framing: what the proxy judged is what goes out.
 */
#include "httpreq.h"

#include <stdlib.h>
#include <string.h>

#define MAX_REQS 64

struct seen {
	int method;
	char host[HTTPREQ_HOST_MAX + 1];
	uint16_t port;
	char path[256];
	size_t path_len;
	uint64_t body;
	bool complete;
};

struct run {
	struct seen req[MAX_REQS];
	size_t nreq;
	int last;
	int status;
};

static char out[HTTPREQ_HEAD_MAX + 1024];

/* The rewritten head must parse back to what was judged. */
static void round_trip(const struct httpreq_conn *c)
{
	const struct httpreq *r = &c->req;
	struct httpreq_conn back;
	size_t n, used;
	int ret;

	if (r->form == HTTPREQ_AUTHORITY)
		return;
	if (httpreq_origin_form(c, out, sizeof(out), &n))
		abort();
	/* a head at the very limits may grow past them by the Host line */
	if (n + 512 > HTTPREQ_HEAD_MAX || r->nfields >= HTTPREQ_HEADERS_MAX - 1)
		return;
	httpreq_init(&back);
	ret = httpreq_feed(&back, (const uint8_t *)out, n, &used);
	if (ret != HTTPREQ_HEAD || used != n ||
	    back.req.form != HTTPREQ_ORIGIN ||
	    back.req.method != r->method ||
	    strcmp(back.req.host, r->host) ||
	    back.req.host_ipv6 != r->host_ipv6 ||
	    back.req.port != r->port ||
	    back.req.path_len != r->path_len ||
	    memcmp(back.req.path, r->path, r->path_len) ||
	    back.req.chunked != r->chunked ||
	    back.req.has_content_length != r->has_content_length ||
	    back.req.content_length != r->content_length ||
	    back.req.keep_alive != r->keep_alive)
		abort();
	httpreq_free(&back);
}

static void feed(struct run *run, const uint8_t *data, size_t size,
		 size_t step, bool check)
{
	struct httpreq_conn c;
	size_t off = 0;
	int r = HTTPREQ_NEED_MORE;

	memset(run, 0, sizeof(*run));
	httpreq_init(&c);
	while (off < size) {
		size_t chunk = step ? step : size - off, used = 0;

		if (chunk > size - off)
			chunk = size - off;
		r = httpreq_feed(&c, data + off, chunk, &used);
		if (used > chunk)
			abort();
		off += used;
		if (r == HTTPREQ_HEAD) {
			struct seen *s;

			if (run->nreq == MAX_REQS)
				break;
			s = &run->req[run->nreq++];
			s->method = c.req.method;
			memcpy(s->host, c.req.host, sizeof(s->host));
			s->port = c.req.port;
			s->path_len = c.req.path_len;
			memcpy(s->path, c.req.path,
			       c.req.path_len < sizeof(s->path) ? c.req.path_len : sizeof(s->path));
			if (!c.req.host[0] || c.req.port == 0 || !c.req.path_len)
				abort();
			s->complete = c.req.complete;
			if (check)
				round_trip(&c);
		} else if (r == HTTPREQ_BODY) {
			if (run->nreq == 0)
				abort();
			run->req[run->nreq - 1].body += used;
			run->req[run->nreq - 1].complete = c.req.complete;
		} else if (r == HTTPREQ_ERROR) {
			if (c.status < 400 || c.status > 599 || !c.reason)
				abort();
			run->status = c.status;
			break;
		} else if (r == HTTPREQ_TUNNEL) {
			break;
		} else if (used != chunk) {
			abort();	/* NEED_MORE takes everything */
		}
	}
	run->last = r;
	httpreq_free(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct run whole, pieces;
	size_t step, i;

	if (size < 1)
		return 0;
	step = 1 + data[0] % 13;
	data++;
	size--;
	feed(&whole, data, size, 0, true);
	feed(&pieces, data, size, step, false);
	/*
	 * Both refuse or neither; the status may differ, since http-parser
	 * reports a header name when it ends or when the input does, so a
	 * 101st name can be counted before or after its bad byte is seen.
	 */
	if (whole.nreq != pieces.nreq || !whole.status != !pieces.status)
		abort();
	for (i = 0; i < whole.nreq; i++) {
		const struct seen *a = &whole.req[i], *b = &pieces.req[i];

		if (a->method != b->method || strcmp(a->host, b->host) ||
		    a->port != b->port || a->path_len != b->path_len ||
		    memcmp(a->path, b->path, a->path_len < sizeof(a->path) ?
			   a->path_len : sizeof(a->path)) ||
		    a->complete != b->complete)
			abort();
		/*
		 * A body cut short by an error may have been passed on in part
		 * when it came in pieces; whole requests must agree exactly.
		 */
		if (a->complete ? a->body != b->body : a->body > b->body)
			abort();
	}
	return 0;
}
