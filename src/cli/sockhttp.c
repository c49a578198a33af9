/*
 * sockhttp.c - one HTTP/1.1 exchange with the daemon over its unix socket,
 * without libcurl.
 *
 * Loading libcurl and the thirty libraries it brings took some 20 ms of
 * the 30 a `corral exec` took (bench/serve.py, section 6), and over the
 * unix socket they have nothing to do: no TLS, no name to resolve, no
 * proxy.  So here the request is written as docs/API.md has it and the
 * answer is read with http-parser, the parser the daemon's api_gate.c
 * trusts with hostile input.  A --url (TCP, TLS) still goes through
 * libcurl (client.c).
 *
 * One connection a request: a unix connect costs tens of microseconds,
 * and a connection never reused is one the daemon cannot have closed
 * under us between two requests.
 */
#include "client.h"

#include <errno.h>
#include <fcntl.h>
#include <http_parser.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#define READ_CHUNK	65536

struct exchange {
	struct reply *r;
	char field[16];		/* the header's name, while it comes: "content-type" fits */
	size_t field_len;
	bool field_long;	/* longer than field: not one we keep */
	bool in_value;		/* a value came last: the next name is a new one */
	bool in_type;		/* the value coming is Content-Type's */
	size_t type_len;
	bool complete;
};

/*
 * The daemon's socket is mode 0600, its user's: a socket another user
 * serves is not our daemon but somebody's listener at a path we were
 * given (a /tmp one, taken before the daemon came up), and it would get
 * every request, commands and the files sent in, and tell us what it
 * liked.  So the peer (SO_PEERCRED: who listened) must be us or root.
 */
int sock_check_peer(const struct conn *c, int fd, uid_t *peer)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0) {
		cli_error("SO_PEERCRED on the connection to %s: %s", c->socket,
			  strerror(errno));
		return -1;
	}
	if (peer)
		*peer = cr.uid;
	if (cr.uid == geteuid() || cr.uid == 0)
		return 0;
	cli_error("the socket at %s (%s) is served by uid %u, not by you (uid %u) or root: "
		  "refusing to send it anything", c->socket, c->socket_from,
		  (unsigned)cr.uid, (unsigned)geteuid());
	cli_json_code("unreachable");
	return -1;
}

/*
 * A socket connected to c->socket: 0, or the errno that stopped it.  A
 * full backlog makes a blocking connect() wait: with wait, for
 * SO_SNDTIMEO, then EAGAIN; without, EAGAIN at once.
 */
static int connect_to(const struct conn *c, bool wait, int *fdp)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval most = { .tv_sec = CONNECT_WAIT_S }, none = { 0 };
	size_t len = strlen(c->socket);
	int fd, e;

	if (len >= sizeof(sa.sun_path))	/* conn_target said why */
		return ENAMETOOLONG;
	memcpy(sa.sun_path, c->socket, len + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (wait ? 0 : SOCK_NONBLOCK), 0);
	if (fd < 0)
		return errno;
	if ((wait && setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &most, sizeof(most)) < 0) ||
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    (wait && setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof(none)) < 0)) {
		e = errno;
		close(fd);
		return e;
	}
	*fdp = fd;
	return 0;
}

int sock_connect(const struct conn *c, int *fdp)
{
	int e = connect_to(c, true, fdp);

	if (e) {
		conn_connect_error(c, e);
		return -1;
	}
	if (sock_check_peer(c, *fdp, NULL) < 0) {
		close(*fdp);
		return -1;
	}
	return 0;
}

bool sock_foreign(const struct conn *c)
{
	bool foreign;
	int fd;

	if (connect_to(c, false, &fd))
		return false;
	foreign = sock_check_peer(c, fd, NULL) < 0;
	close(fd);
	return foreign;
}

/* ---- the answer, as http-parser hands it over ------------------------------ */

static int on_header_field(http_parser *p, const char *at, size_t n)
{
	struct exchange *x = p->data;

	if (x->in_value) {
		x->in_value = false;
		x->field_len = 0;
		x->field_long = false;
	}
	if (x->field_len + n >= sizeof(x->field)) {
		x->field_long = true;
		return 0;
	}
	memcpy(x->field + x->field_len, at, n);
	x->field_len += n;
	return 0;
}

/* The media type is all the verbs need of the headers (export.c). */
static int on_header_value(http_parser *p, const char *at, size_t n)
{
	struct exchange *x = p->data;
	struct reply *r = x->r;
	size_t room;

	if (!x->in_value) {		/* the value's first piece */
		x->in_value = true;
		x->in_type = !x->field_long && x->field_len == 12 &&
			     !strncasecmp(x->field, "Content-Type", 12);
		if (x->in_type)
			x->type_len = 0;
	}
	if (!x->in_type)
		return 0;
	room = sizeof(r->type) - 1 - x->type_len;
	if (n > room)
		n = room;	/* longer than any type the API has: kept cut */
	memcpy(r->type + x->type_len, at, n);
	x->type_len += n;
	r->type[x->type_len] = '\0';
	return 0;
}

static int on_headers_complete(http_parser *p)
{
	struct exchange *x = p->data;

	x->r->status = p->status_code;
	return 0;
}

static int on_body(http_parser *p, const char *at, size_t n)
{
	struct exchange *x = p->data;

	return reply_take(x->r, at, n) < 0 ? -1 : 0;
}

/* An interim answer (1xx) is followed by the real one. */
static int on_message_complete(http_parser *p)
{
	struct exchange *x = p->data;

	if (p->status_code >= 100 && p->status_code < 200) {
		x->r->status = 0;
		x->r->type[0] = '\0';
		return 0;
	}
	x->complete = true;
	http_parser_pause(p, 1);	/* nothing after it is ours */
	return 0;
}

static const http_parser_settings answer = {
	.on_header_field = on_header_field,
	.on_header_value = on_header_value,
	.on_headers_complete = on_headers_complete,
	.on_body = on_body,
	.on_message_complete = on_message_complete,
};

/* ---- the exchange ---------------------------------------------------------- */

/*
 * The verbs escape what they put in a path (conn_escape): a space or a
 * line break that got there all the same would end the request line and
 * begin a header of somebody else's choosing.
 */
static bool plain_token(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s <= ' ' || *s == 0x7f)
			return false;
	return true;
}

static char *request_head(const struct request *q)
{
	char length[48] = "";
	char *head;

	if (request_has_body(q))
		snprintf(length, sizeof(length), "Content-Length: %zu\r\n",
			 q->body_len);
	if (asprintf(&head, "%s %s HTTP/1.1\r\nHost: localhost\r\n%s%s%s%s%s\r\n",
		     q->method, q->path, q->type ? q->type : "",
		     q->type ? "\r\n" : "", q->accept ? q->accept : "",
		     q->accept ? "\r\n" : "", length) < 0)
		return NULL;
	return head;
}

/*
 * The head and the body in as few sends as the socket takes (a daemon
 * woken once reads the request whole), or the errno that stopped them.
 * A daemon that refuses early (413) may close before the body is sent:
 * what it answered is still read, so that error is for the caller to weigh.
 */
static int send_all(int fd, const char *head, const char *body, size_t body_len)
{
	struct iovec iov[2] = {
		{ .iov_base = (void *)head, .iov_len = strlen(head) },
		{ .iov_base = (void *)body, .iov_len = body ? body_len : 0 },
	};
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = 2 };

	while (iov[0].iov_len || iov[1].iov_len) {
		ssize_t n = sendmsg(fd, &m, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno;
		for (int i = 0; i < 2 && n > 0; i++) {
			size_t k = (size_t)n < iov[i].iov_len ? (size_t)n : iov[i].iov_len;

			iov[i].iov_base = (char *)iov[i].iov_base + k;
			iov[i].iov_len -= k;
			n -= k;
		}
	}
	return 0;
}

static int send_request(int fd, const struct request *q)
{
	char *head;
	int err;

	if (!plain_token(q->method) || !plain_token(q->path) || !*q->path) {
		char *safe = printable(q->path, strlen(q->path));

		cli_error("refusing to send the request path \"%s\": it holds a space or a control character",
			  safe ? safe : "?");
		free(safe);
		return -1;
	}
	head = request_head(q);
	if (!head) {
		out_of_memory("building the request");
		return -1;
	}
	err = send_all(fd, head, q->body, q->body_len);
	free(head);
	return err;
}

static int parse_error(const struct conn *c, http_parser *p)
{
	enum http_errno e = HTTP_PARSER_ERRNO(p);

	cli_error("the answer at %s is not HTTP as the daemon speaks it: %s (%s)",
		  c->socket, http_errno_description(e), http_errno_name(e));
	cli_json_code("bad_answer");
	return -1;
}

/* Until the answer is whole: 0, or -1 (said). */
static int read_answer(int fd, const struct conn *c, struct exchange *x,
		       int send_err)
{
	http_parser p;
	char *buf = malloc(READ_CHUNK);
	bool any = false;
	int ret = -1;

	if (!buf)
		return out_of_memory("for the daemon's answer"), -1;
	http_parser_init(&p, HTTP_RESPONSE);
	p.data = x;
	while (!x->complete) {
		ssize_t n = read(fd, buf, READ_CHUNK);
		size_t used;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			cli_error("reading the daemon's answer at %s: %s", c->socket,
				  strerror(errno));
			cli_json_code("connection_lost");
			goto out;
		}
		any |= n > 0;
		/* n == 0 tells the parser of the end: an answer without length ends there */
		used = http_parser_execute(&p, &answer, buf, n);
		if (x->r->stopped)
			goto out;
		if (x->complete)
			break;
		if (n == 0) {
			if (send_err && !any)
				cli_error("sending the request to the daemon at %s: %s",
					  c->socket, strerror(send_err));
			else
				cli_error("the daemon at %s closed the connection before its answer was whole%s",
					  c->socket, any ? "" : " (it sent nothing)");
			cli_json_code("connection_lost");
			goto out;
		}
		if (HTTP_PARSER_ERRNO(&p) != HPE_OK || used != (size_t)n) {
			parse_error(c, &p);
			goto out;
		}
	}
	ret = 0;
out:
	free(buf);
	return ret;
}

int sock_perform(struct conn *c, const struct request *q, struct reply *r)
{
	struct exchange x = { .r = r };
	int fd, err, ret;

	r->type[0] = '\0';
	if (sock_connect(c, &fd) < 0)
		return -1;
	err = send_request(fd, q);
	if (err < 0) {
		close(fd);
		return -1;
	}
	/* EPIPE, ECONNRESET: the daemon ended early; its answer says why */
	if (err && err != EPIPE && err != ECONNRESET) {
		cli_error("sending the request to the daemon at %s: %s", c->socket,
			  strerror(err));
		cli_json_code("connection_lost");
		close(fd);
		return -1;
	}
	ret = read_answer(fd, c, &x, err);
	close(fd);
	return ret;
}
