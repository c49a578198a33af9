/*
 * httpresp.h - the answers on a connection whose responses are read: where
 * each message ends, which bytes of it are content (a head, a body's data)
 * and which are a chunked body's framing, and whether its body can be read
 * at all (no Content-Encoding, no transfer coding but chunked).  Over nodejs
 * http-parser, as httpreq.c reads requests.
 *
 * The caller keeps the bytes not yet passed on at the start of one buffer
 * and feeds what arrived after them; offsets are from that buffer's start,
 * and httpresp_release() moves them when it passes bytes on.  No I/O, no
 * global state.
 */
#ifndef CORRAL_HTTPRESP_H
#define CORRAL_HTTPRESP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <http_parser.h>

#define HTTPRESP_PENDING_MAX	64	/* requests sent whose answers have not begun */
#define HTTPRESP_HEAD_MAX	(64 << 10)

/* framing between two pieces of a chunked body: not content */
struct httpresp_cut {
	size_t off, len;
};

struct httpresp {
	http_parser parser;
	uint64_t heads;			/* bit i: the i-th pending request is a HEAD */
	unsigned pending;
	size_t fed;			/* bytes of the buffer parsed */
	size_t start;			/* where the current message began (after the last) */
	bool in_head;			/* its head is not complete yet */
	bool body_open;			/* a body's pieces are coming: a gap is framing */
	size_t body_end;		/* where the last piece ended */
	struct httpresp_cut *cuts;
	size_t ncuts, capcuts;
	/* the header being read: a coding the proxy cannot read stops it */
	char name[24], value[64];
	size_t nname, nvalue;
	bool in_value;
	bool value_long;		/* past value's room: no coding it names is one read */
	char why[160];			/* set when the answer cannot be read */
	bool head_refused;		/* for its head: nothing of it went on */
	bool bodiless;			/* the answer being read has no body by its request or status */
	bool ended;			/* a bodiless answer ended: nothing after it is placed */
	bool in_msg;			/* an answer has begun and not ended */
	const char *base;		/* the buffer, while feeding */
	char *scratch;			/* content copied out of framing (httpresp_mask) */
	size_t capscratch;
};

void httpresp_init(struct httpresp *r);
/* Every request sent is answered whole: no answer is awaited or coming. */
bool httpresp_idle(const struct httpresp *r);
void httpresp_free(struct httpresp *r);
/* A request went up (head: a HEAD, whose answer has no body); -1: too many. */
int httpresp_sent(struct httpresp *r, bool head);
/*
 * Parse buf[r->fed, len).  0, or -1 with r->why: the answer cannot be read
 * (malformed, a coding other than identity, a 101 or a 206 to a request
 * that asked for no upgrade or range, a head over HTTPRESP_HEAD_MAX, an
 * answer to no request, bytes after an answer that has no body).
 * Whole messages before it end at r->start.
 *
 * An answer with no body (a HEAD's, a 204, a 304) ends what is read
 * (r->ended): a server that sends a body anyway (Python's http.server
 * writes one after send_response(204), a do_HEAD = do_GET handler a
 * GET's) puts bytes on the stream that look like the next answer's, and
 * whose message they are no reading of the stream can tell.  The caller
 * closes the connection once that answer went on.
 */
int httpresp_feed(struct httpresp *r, const char *buf, size_t len);
/*
 * How many bytes of buf[0, len) may go on once a tail of `hold` content
 * bytes is kept back: not into a head still incomplete, and all of a
 * message that has ended.
 */
size_t httpresp_releasable(const struct httpresp *r, size_t len, size_t hold);
/* n bytes went on: offsets move. */
void httpresp_release(struct httpresp *r, size_t n);
/*
 * The content of buf[0, len) (framing left out) as one run: buf itself
 * when nothing is cut, else r->scratch.  *n: its length.  NULL: no memory.
 * len may stop short of what was fed (r->start: the whole messages).
 */
char *httpresp_content(struct httpresp *r, char *buf, size_t len, size_t *n);
/* The content, changed, back into buf (a no-op when it is buf). */
void httpresp_content_back(const struct httpresp *r, char *buf, size_t len,
			   const char *content);

#endif
