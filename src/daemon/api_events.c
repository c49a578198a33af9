/*
 * api_events.c - GET /v1/events[?sandbox=ID][&follow=1]: the audit log
 * as NDJSON, all of it or one sandbox's, and with follow its new lines as
 * they are written (api_on_log_line) to each follower that keeps reading.
 */
#include "api.h"

#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>
#include <sys/queue.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool line_matches(const char *line, size_t len, const char *sandbox)
{
	char key[96];

	if (!sandbox[0])
		return true;
	snprintf(key, sizeof(key), "\"sandbox\":\"%s\"", sandbox);
	return memmem(line, len, key, strlen(key)) != NULL;
}

void api_on_log_line(void *arg, const char *sandbox, const char *line, size_t len)
{
	struct daemon *d = arg;
	struct follower **pp = &d->followers, *f;

	(void)sandbox;
	while ((f = *pp)) {
		struct evbuffer *buf;

		if (!line_matches(line, len, f->sandbox)) {
			pp = &f->next;
			continue;
		}
		/* a follower that does not read is cut off, not buffered for */
		if (api_queued(f->req) > FOLLOW_QUEUE_MAX) {
			*pp = f->next;
			api_set_closecb(f->d, f->req, NULL, NULL);
			evhttp_send_reply_end(f->req);
			free(f);
			continue;
		}
		pp = &f->next;
		buf = evbuffer_new();
		if (!buf)
			continue;
		evbuffer_add(buf, line, len);
		evbuffer_add(buf, "\n", 1);
		evhttp_send_reply_chunk(f->req, buf);
		evbuffer_free(buf);
	}
}

static void follower_gone(struct evhttp_connection *conn, void *arg)
{
	struct follower *f = arg;
	struct follower **pp;

	(void)conn;
	forget_request(f->req);
	for (pp = &f->d->followers; *pp; pp = &(*pp)->next) {
		if (*pp == f) {
			*pp = f->next;
			break;
		}
	}
	free(f);
}

/* ?sandbox=ID&follow=1: the sandbox to keep to ("" for all), and whether to follow. */
bool events_query(const char *q, char *sandbox, size_t len, bool *follow,
		  struct api_fault *f)
{
	struct evkeyvalq kv;
	const char *sb;

	TAILQ_INIT(&kv);
	if (q && evhttp_parse_query_str(q, &kv) < 0)
		return api_fault(f, 400, "bad_request", "bad query string");
	sb = evhttp_find_header(&kv, "sandbox");
	if (sb && (strlen(sb) >= len || strchr(sb, '"'))) {
		evhttp_clear_headers(&kv);
		return api_fault(f, 400, "bad_request", "bad sandbox id");
	}
	snprintf(sandbox, len, "%s", sb ? sb : "");
	*follow = query_flag(evhttp_find_header(&kv, "follow"));
	evhttp_clear_headers(&kv);
	return true;
}

void events_get(struct daemon *d, struct evhttp_request *req, const char *rest)
{
	const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
	char path[4096], *line = NULL, want[64];
	struct api_fault fault;
	struct follower *fl;
	struct evbuffer *buf;
	bool following, seen = false;
	size_t cap = 0;
	ssize_t n;
	FILE *f;

	if (!events_query(q, want, sizeof(want), &following, &fault)) {
		reply_fault(req, &fault);
		return;
	}
	snprintf(path, sizeof(path), "%s/audit.jsonl", d->state_dir);
	buf = evbuffer_new();
	f = fopen(path, "re");
	while (buf && f && (n = getline(&line, &cap, f)) > 0)
		if (line_matches(line, n, want) && (seen = true))
			evbuffer_add(buf, line, n);
	free(line);
	if (f)
		fclose(f);
	/* a destroyed sandbox's events stay readable; a name never seen is not one */
	if (want[0] && !seen && !sandbox_find(d, want)) {
		if (buf)
			evbuffer_free(buf);
		reply_error(req, 404, "not_found", "no sandbox \"%s\", live or in "
			    "the audit log", want);
		return;
	}
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
			  "application/x-ndjson");
	if (!following) {
		evhttp_send_reply(req, 200, "OK", buf);
		if (buf)
			evbuffer_free(buf);
		return;
	}
	fl = calloc(1, sizeof(*fl));
	evhttp_send_reply_start(req, 200, "OK");
	if (buf) {
		evhttp_send_reply_chunk(req, buf);
		evbuffer_free(buf);
	}
	if (!fl) {
		evhttp_send_reply_end(req);
		return;
	}
	fl->req = req;
	fl->d = d;
	snprintf(fl->sandbox, sizeof(fl->sandbox), "%s", want);
	fl->next = d->followers;
	d->followers = fl;
	api_set_closecb(d, req, follower_gone, fl);
}
