/*
 * cp_stream.c - `corral cp - ID:/DIR/`: the tar on stdin sent as it is
 * read, in frames over a connection upgraded to "corral-tar" (docs/API.md,
 * Files), never held whole here nor by the daemon.  It was read whole
 * (64 MiB at most) and PUT as one body, which the daemon held whole too,
 * three times over: 8 such copies of 60 MiB at once peaked it at 311 MB.
 *
 * A daemon that answers the upgrade with no 101 but a success is older:
 * it took the request as a PUT of no body (an empty archive, DIR made),
 * and the caller sends the tar its old way (CP_STREAM_OLD).  A busy daemon
 * (503, all its workers unpacking) is asked again, as the Python client
 * does, every second for 30 s at most: nothing of stdin is read before
 * the 101.  Over --url, whose connection is libcurl's, a busy is said.
 */
#include "client.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define FRAME_DATA	(256 * 1024)	/* stdin read and sent a piece at a time */
#define HEAD_MAX	(64 * 1024)
#define ANSWER_MAX	(1024 * 1024)
#define BUSY_TRIES	30		/* a second apart */
#define CP_STREAM_BUSY	(-3)

struct stream {
	struct conn *c;
	int fd;
	char *in;			/* what came from the daemon */
	size_t len, cap;
	bool eof;
};

/* What the connection has now, onto s->in: 1 some, 0 none yet, -1 failed (said). */
static int recv_some(struct stream *s, size_t max)
{
	const char *why = "";
	size_t n = 0;
	int rc;

	if (s->len + 65536 + 1 > s->cap) {
		size_t cap = s->len + 65536 + 1;
		char *p;

		if (cap > max + 65536 + 1) {
			cli_error("the daemon sent more than %zu bytes as its answer", max);
			return -1;
		}
		p = realloc(s->in, cap);
		if (!p)
			return out_of_memory("for the daemon's answer"), -1;
		s->in = p;
		s->cap = cap;
	}
	rc = conn_raw_recv(s->c, s->in + s->len, s->cap - s->len - 1, &n, &why);
	if (rc == 0)
		return 0;
	if (rc < 0) {
		cli_error("reading from the daemon: %s", why);
		cli_json_code("connection_lost");
		return -1;
	}
	s->eof = n == 0;
	s->len += n;
	s->in[s->len] = '\0';
	return 1;
}

/* Wait for the connection (events), bounded by nothing but the daemon. */
static int wait_for(struct stream *s, short events)
{
	struct pollfd pfd = { .fd = s->fd, .events = events };

	if (poll(&pfd, 1, -1) < 0 && errno != EINTR) {
		cli_error("poll on the connection to the daemon: %s", strerror(errno));
		return -1;
	}
	return pfd.revents;
}

/*
 * All of data sent, waiting for room; 1 when the daemon answered first
 * (a refusal midway: what it says is read next), 0 sent, -1 failed.
 */
static int send_all(struct stream *s, const void *data, size_t len)
{
	const char *p = data;

	while (len) {
		const char *why = "";
		size_t n = 0;
		int rc = conn_raw_send(s->c, p, len, &n, &why), ev;

		if (rc < 0) {
			/* the daemon closed after its answer: that says why */
			if (recv_some(s, ANSWER_MAX) > 0)
				return 1;
			cli_error("sending the archive to the daemon: %s", why);
			cli_json_code("connection_lost");
			return -1;
		}
		p += n;
		len -= n;
		if (rc == 1 && n)
			continue;
		ev = wait_for(s, POLLOUT | POLLIN);
		if (ev < 0)
			return -1;
		if (ev & (POLLIN | POLLHUP))
			return 1;
	}
	return 0;
}

/* The answer's head, whole: its length; s->in holds it and what followed. */
static long read_head(struct stream *s, long *status)
{
	char *end;

	while (!(end = s->len ? memmem(s->in, s->len, "\r\n\r\n", 4) : NULL)) {
		int r;

		if (s->eof) {
			cli_error("the daemon closed the connection without an answer");
			cli_json_code("connection_lost");
			return -1;
		}
		r = recv_some(s, HEAD_MAX);
		if (r < 0 || (r == 0 && wait_for(s, POLLIN) < 0))
			return -1;
	}
	if (sscanf(s->in, "HTTP/1.%*1d %ld", status) != 1) {
		cli_error("the daemon's answer is not HTTP");
		cli_json_code("bad_answer");
		return -1;
	}
	return end + 4 - s->in;
}

/* Until the daemon's end, at most max bytes in all. */
static int read_to_end(struct stream *s, size_t max)
{
	while (!s->eof) {
		int r = recv_some(s, max);

		if (r < 0 || (r == 0 && wait_for(s, POLLIN) < 0))
			return -1;
	}
	return 0;
}

/* An HTTP answer that is not the 101: its body, said as the other verbs say it. */
static int refused(struct stream *s, long status, size_t head_len)
{
	struct reply r = { .status = status };
	long want = 0;

	for (char *p = s->in, *eol; p < s->in + head_len; p = eol + 2) {
		eol = memmem(p, s->in + head_len - p, "\r\n", 2);
		if (!eol)
			break;
		if (!strncasecmp(p, "Content-Length:", 15))
			want = strtol(p + 15, NULL, 10);
	}
	if (want < 0 || want > ANSWER_MAX)
		want = 0;
	while (s->len - head_len < (size_t)want && !s->eof) {
		int n = recv_some(s, ANSWER_MAX);

		if (n < 0 || (n == 0 && wait_for(s, POLLIN) < 0))
			break;
	}
	r.buf = s->in + head_len;
	r.len = s->len - head_len < (size_t)want ? s->len - head_len : (size_t)want;
	r.buf[r.len] = '\0';
	reply_check(&r);
	return EXIT_CORRAL;
}

/* The tar from stdin, a frame at a time, then the empty frame: 0, 1 answered first, -1 */
static int send_frames(struct stream *s)
{
	unsigned char *buf = malloc(4 + FRAME_DATA);
	int r = 0;

	if (!buf)
		return out_of_memory("for the archive's frames"), -1;
	for (;;) {
		ssize_t n = read(STDIN_FILENO, buf + 4, FRAME_DATA);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;

			cli_error("reading standard input: %s", strerror(e));
			cli_json_errno(e);
			r = -1;
			break;
		}
		buf[0] = (unsigned char)(n >> 24);
		buf[1] = (unsigned char)(n >> 16);
		buf[2] = (unsigned char)(n >> 8);
		buf[3] = (unsigned char)n;
		r = send_all(s, buf, 4 + (size_t)n);
		if (r || n == 0)
			break;
	}
	free(buf);
	return r;
}

/* The daemon's answer after the frames: one JSON object with its "status". */
static int answer(struct stream *s, size_t from, bool as_json)
{
	struct reply r = { 0 };
	json_t *o;
	long status;
	int code = EXIT_CORRAL;

	if (read_to_end(s, ANSWER_MAX) < 0)
		return EXIT_CORRAL;
	if (s->len == from) {
		cli_error("the daemon closed the connection without its answer to the "
			  "archive (it stopped, or the sandbox went?)");
		cli_json_code("connection_lost");
		return EXIT_CORRAL;
	}
	o = json_loadb(s->in + from, s->len - from, 0, NULL);
	status = json_integer_value(json_object_get(o, "status"));
	if (!json_is_object(o) || status < 200 || status > 599) {
		cli_error("the daemon's answer to the archive is not the JSON it sends");
		cli_json_code("bad_answer");
		json_decref(o);
		return EXIT_CORRAL;
	}
	json_object_del(o, "status");
	if (status >= 200 && status < 300) {
		code = as_json ? print_json(o) : 0;
	} else {
		r.status = status;
		r.buf = json_dumps(o, JSON_COMPACT);
		r.len = r.buf ? strlen(r.buf) : 0;
		reply_check(&r);
		free(r.buf);
	}
	json_decref(o);
	return code;
}

/* One try: 0 done, CP_STREAM_OLD, CP_STREAM_BUSY, or the exit status (said). */
static int try_stream(struct conn *c, const char *path, bool as_json)
{
	struct stream s = { .c = c, .fd = -1 };
	long status = 0, head_len;
	char *head = NULL;
	int code = EXIT_CORRAL, r;

	if (conn_connect_raw(c, path, &s.fd) < 0)
		return EXIT_CORRAL;
	if (asprintf(&head, "PUT %s HTTP/1.1\r\nHost: corral\r\n"
		     "Connection: Upgrade\r\nUpgrade: corral-tar\r\n"
		     "Content-Length: 0\r\n%s%s\r\n", path, c->auth ? c->auth : "",
		     c->auth ? "\r\n" : "") < 0) {
		head = NULL;
		code = out_of_memory("building the archive's request");
		goto out;
	}
	r = send_all(&s, head, strlen(head));
	if (r < 0)
		goto out;
	head_len = read_head(&s, &status);
	if (head_len < 0)
		goto out;
	if (status == 503 && !c->url) {
		code = CP_STREAM_BUSY;
	} else if (status >= 200 && status < 300) {
		code = CP_STREAM_OLD;		/* it took no upgrade */
	} else if (status != 101) {
		code = refused(&s, status, (size_t)head_len);
	} else {
		r = send_frames(&s);
		code = r < 0 ? EXIT_CORRAL : answer(&s, (size_t)head_len, as_json);
	}
out:
	if (head)
		explicit_bzero(head, strlen(head));	/* it has the token */
	free(head);
	free(s.in);
	if (c->raw)
		close(c->raw_fd);
	c->raw = false;
	return code;
}

int cp_in_stream(struct conn *c, const char *path, bool as_json)
{
	int code = CP_STREAM_BUSY;

	for (int i = 0; i < BUSY_TRIES && code == CP_STREAM_BUSY; i++) {
		struct timespec ts = { 1, 0 };

		if (i)
			nanosleep(&ts, NULL);
		code = try_stream(c, path, as_json);
	}
	if (code == CP_STREAM_BUSY) {
		cli_error("the daemon stayed busy (all its workers unpacking or "
			  "walking) for %d s: try again later", BUSY_TRIES);
		cli_json_code("busy");
		code = EXIT_CORRAL;
	}
	return code;
}
