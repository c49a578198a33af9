/*
 * api_errors.c - the answers evhttp writes by itself, as every other
 * answer of the API: {"error": CODE, "detail": SENTENCE} in JSON.
 *
 * evhttp (libevent 2.1) answers some requests before any callback of ours
 * runs: a chunked body over the size limit (413), a request line it cannot
 * parse (400), an Expect it does not know (417), a method it was not told
 * to allow (501).  It has no hook for these pages: it calls its own
 * exported evhttp_send_error(), through the library's PLT, and writes an
 * HTML page.  The program's definition below takes the place of the
 * library's (the dynamic linker binds the library's call to the first
 * definition in lookup order, the executable's), so these answers are
 * JSON too; the daemon's own code calls it for its last-resort replies.
 * tests/results.sh holds each of them to JSON: a libevent linked so that
 * its calls do not go through the PLT (-Bsymbolic) fails there, not
 * silently.
 */
#include "api.h"

#include <event2/buffer.h>

#include <stdio.h>
#include <string.h>

/* The API's word for an HTTP status (docs/API.md, "Errors"). */
static const char *error_word(int code)
{
	switch (code) {
	case 400:
	case 417:
		return "bad_request";
	case 404:
		return "not_found";
	case 405:
	case 501:
		return "method_not_allowed";
	case 408:
		return "timeout";
	case 413:
	case 431:
		return "too_large";
	case 503:
		return "busy";
	default:
		return "internal";
	}
}

static const char *error_sentence(int code)
{
	switch (code) {
	case 400:
		return "the request could not be parsed as HTTP/1.1";
	case 413:
		return "the body is larger than the API takes (64 MiB)";
	case 417:
		return "unsupported Expect header (only 100-continue is)";
	case 501:
		return "no route of the API takes this method";
	default:
		return "the daemon could not answer the request";
	}
}

void evhttp_send_error(struct evhttp_request *req, int error, const char *reason)
{
	struct evbuffer *buf = evbuffer_new();
	char text[512];
	int n;

	/* the reason evhttp gives is an HTTP phrase; ours is a sentence */
	n = snprintf(text, sizeof(text), "{\"error\":\"%s\",\"detail\":\"%s\"}\n",
		     error_word(error), error_sentence(error));
	(void)reason;
	if (buf && n > 0 && (size_t)n < sizeof(text))
		evbuffer_add(buf, text, n);
	evhttp_remove_header(evhttp_request_get_output_headers(req), "Content-Type");
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
			  "application/json");
	/* what came before the error cannot be trusted to frame the next */
	evhttp_add_header(evhttp_request_get_output_headers(req), "Connection",
			  "close");
	api_send_reply(req, error, NULL, buf);
	if (buf)
		evbuffer_free(buf);
}
