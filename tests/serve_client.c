/*
 * serve_client.c - the smallest client of corral serve: plain sockets,
 * hand-written HTTP/1.1, jansson for the answers.  A test of the daemon,
 * not a client library: it checks that a program with nothing but a unix
 * socket can create a sandbox, run `echo hi` in it and delete it, all on
 * one kept-alive connection.
 *
 *   serve_client SOCKET
 *
 * Prints "serve_client: ok" and exits 0, or says what was wrong and exits 1.
 */
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define TIMEOUT_MS	30000
#define RESP_MAX	(1 << 20)

struct conn {
	int fd;
	char buf[RESP_MAX];
	size_t len;		/* bytes in buf not yet consumed */
};

struct response {
	int status;
	char *body;		/* NUL-terminated, malloc'd */
	size_t body_len;
	char content_type[128];
};

static int failures;

__attribute__((format(printf, 1, 2)))
static void bad(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("serve_client: FAIL: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	failures++;
}

static int connect_unix(struct conn *c, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	if (strlen(path) >= sizeof(sa.sun_path)) {
		bad("socket path too long: %s", path);
		return -1;
	}
	strcpy(sa.sun_path, path);
	c->len = 0;
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		bad("connect %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

static int send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= w;
	}
	return 0;
}

/* Read more bytes into the buffer, with a deadline; 0 at EOF. */
static ssize_t fill(struct conn *c)
{
	struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
	ssize_t r;

	if (c->len == sizeof(c->buf)) {
		errno = EMSGSIZE;
		return -1;
	}
	r = poll(&pfd, 1, TIMEOUT_MS);
	if (r == 0) {
		errno = ETIMEDOUT;
		return -1;
	}
	if (r < 0)
		return -1;
	r = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
	if (r > 0)
		c->len += r;
	return r;
}

static void consume(struct conn *c, size_t n)
{
	memmove(c->buf, c->buf + n, c->len - n);
	c->len -= n;
}

/* One line ending in CRLF, without it; its length, or -1. */
static ssize_t read_line(struct conn *c, char *out, size_t max)
{
	for (;;) {
		char *nl = memmem(c->buf, c->len, "\r\n", 2);

		if (nl) {
			size_t n = nl - c->buf;

			if (n >= max)
				return -1;
			memcpy(out, c->buf, n);
			out[n] = '\0';
			consume(c, n + 2);
			return n;
		}
		if (fill(c) <= 0)
			return -1;
	}
}

static int read_exact(struct conn *c, char *out, size_t n)
{
	while (c->len < n)
		if (fill(c) <= 0)
			return -1;
	memcpy(out, c->buf, n);
	consume(c, n);
	return 0;
}

/* One response: status line, headers, a Content-Length or chunked body. */
static int read_response(struct conn *c, struct response *r)
{
	char line[8192];
	long clen = -1;
	int chunked = 0;
	size_t cap = 0;

	memset(r, 0, sizeof(*r));
	if (read_line(c, line, sizeof(line)) < 0 ||
	    sscanf(line, "HTTP/1.1 %d", &r->status) != 1) {
		bad("no HTTP/1.1 status line (got \"%.100s\")", line);
		return -1;
	}
	for (;;) {
		char *colon, *v;

		if (read_line(c, line, sizeof(line)) < 0) {
			bad("truncated headers");
			return -1;
		}
		if (!line[0])
			break;
		colon = strchr(line, ':');
		if (!colon)
			continue;
		*colon = '\0';
		for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
			;
		if (!strcasecmp(line, "Content-Length"))
			clen = strtol(v, NULL, 10);
		else if (!strcasecmp(line, "Transfer-Encoding") && strstr(v, "chunked"))
			chunked = 1;
		else if (!strcasecmp(line, "Content-Type"))
			snprintf(r->content_type, sizeof(r->content_type), "%s", v);
	}
	if (!chunked) {
		if (clen < 0 || clen > RESP_MAX) {
			bad("no usable Content-Length (%ld)", clen);
			return -1;
		}
		r->body = malloc(clen + 1);
		if (!r->body || read_exact(c, r->body, clen) < 0) {
			bad("body shorter than its Content-Length %ld", clen);
			return -1;
		}
		r->body[clen] = '\0';
		r->body_len = clen;
		return 0;
	}
	for (;;) {
		long n;
		char *g;

		if (read_line(c, line, sizeof(line)) < 0) {
			bad("bad chunk header");
			return -1;
		}
		n = strtol(line, NULL, 16);
		if (n < 0 || n > RESP_MAX || r->body_len + n > RESP_MAX) {
			bad("chunk too large");
			return -1;
		}
		if (r->body_len + n + 1 > cap) {
			cap = r->body_len + n + 1;
			g = realloc(r->body, cap);
			if (!g)
				return -1;
			r->body = g;
		}
		if (n == 0) {
			read_line(c, line, sizeof(line));	/* the last CRLF */
			r->body[r->body_len] = '\0';
			return 0;
		}
		if (read_exact(c, r->body + r->body_len, n) < 0 ||
		    read_line(c, line, sizeof(line)) != 0) {
			bad("truncated chunk");
			return -1;
		}
		r->body_len += n;
	}
}

/* One request on the kept-alive connection; the answer's body as JSON. */
static json_t *request(struct conn *c, const char *method, const char *path,
		       const char *body, int want_status)
{
	char head[1024];
	struct response r;
	json_error_t je;
	json_t *o;
	size_t blen = body ? strlen(body) : 0;
	int n;

	n = snprintf(head, sizeof(head),
		     "%s %s HTTP/1.1\r\n"
		     "Host: localhost\r\n"
		     "User-Agent: corral-serve-client-test\r\n"
		     "Content-Type: application/json\r\n"
		     "Content-Length: %zu\r\n"
		     "\r\n", method, path, blen);
	if (send_all(c->fd, head, n) < 0 || (blen && send_all(c->fd, body, blen) < 0)) {
		bad("%s %s: send: %s", method, path, strerror(errno));
		return NULL;
	}
	if (read_response(c, &r) < 0) {
		bad("%s %s: no complete response (%s)", method, path, strerror(errno));
		free(r.body);
		return NULL;
	}
	if (r.status != want_status)
		bad("%s %s: status %d, want %d: %.300s", method, path, r.status,
		    want_status, r.body);
	if (strncmp(r.content_type, "application/json", 16))
		bad("%s %s: Content-Type \"%s\", want application/json", method,
		    path, r.content_type);
	o = json_loadb(r.body, r.body_len, 0, &je);
	if (!o)
		bad("%s %s: the body is not JSON (%s): %.300s", method, path,
		    je.text, r.body);
	free(r.body);
	return o;
}

static const char *str(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_string(v) ? json_string_value(v) : NULL;
}

static void expect_str(const char *what, json_t *o, const char *key,
		       const char *want)
{
	const char *got = str(o, key);

	if (!got || strcmp(got, want))
		bad("%s: %s is \"%s\", want \"%s\"", what, key, got ? got : "(none)",
		    want);
}

static void expect_int(const char *what, json_t *o, const char *key,
		       json_int_t want)
{
	json_t *v = json_object_get(o, key);

	if (!json_is_integer(v) || json_integer_value(v) != want)
		bad("%s: %s is not %lld", what, key, (long long)want);
}

int main(int argc, char **argv)
{
	static struct conn c;
	char path[256], exec_path[300];
	json_t *o;
	const char *id;
	char idbuf[64];

	if (argc != 2) {
		fprintf(stderr, "usage: serve_client SOCKET\n");
		return 2;
	}
	if (connect_unix(&c, argv[1]) < 0)
		return 1;

	o = request(&c, "POST", "/v1/sandboxes",
		    "{\"labels\": {\"client\": \"serve_client.c\"}}", 201);
	if (!o)
		return 1;
	id = str(o, "id");
	if (!id || strncmp(id, "sb-", 3) || strlen(id) >= sizeof(idbuf)) {
		bad("create: no id \"sb-...\"");
		json_decref(o);
		return 1;
	}
	snprintf(idbuf, sizeof(idbuf), "%s", id);
	json_decref(o);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s", idbuf);
	snprintf(exec_path, sizeof(exec_path), "%s/exec", path);

	/* the same connection: HTTP/1.1 keep-alive */
	o = request(&c, "POST", exec_path,
		    "{\"argv\": [\"echo\", \"hi\"], \"tool_call_id\": \"client-1\"}", 200);
	if (o) {
		expect_str("exec", o, "status", "exited");
		expect_int("exec", o, "exit_code", 0);
		expect_str("exec", o, "stdout", "hi\n");
		expect_str("exec", o, "stderr", "");
		expect_str("exec", o, "sandbox", idbuf);
		expect_str("exec", o, "tool_call_id", "client-1");
		json_decref(o);
	}

	o = request(&c, "DELETE", path, NULL, 200);
	if (o) {
		expect_str("delete", o, "id", idbuf);
		expect_str("delete", o, "state", "destroyed");
		if (!json_is_object(json_object_get(o, "meters")))
			bad("delete: no meters");
		json_decref(o);
	}

	o = request(&c, "GET", path, NULL, 404);
	if (o) {
		expect_str("get after delete", o, "error", "not_found");
		if (!str(o, "detail"))
			bad("get after delete: no detail");
		json_decref(o);
	}
	close(c.fd);
	if (failures)
		return 1;
	puts("serve_client: ok");
	return 0;
}
