/* httpc - one HTTP/1.1 request over corral serve's unix socket (or, with
 * no --unix-socket, over plain TCP to the URL's HOST:PORT), for the
 * tests: the part of curl's command line that tests/serve.sh, files.sh
 * and snapshot.sh send their API calls with, in a program that starts in a millisecond.
 * curl loads 33 shared libraries, 40-55 ms of CPU a start on this host,
 * and those suites make some 1,300 calls a lane; the rest of the suites
 * keep curl, the client users have.  The answer is read by http_parser.
 *
 *   httpc [-sS] [--max-time SECONDS] [--unix-socket PATH] [-X METHOD]
 *         [-H HEADER]... [-d DATA | --data-binary DATA]... [-D FILE]
 *         [-o FILE] [-w '%{http_code}'] [--stderr FILE] [--exit-0]
 *         [--repeat N] http://HOST[:PORT]/PATH
 *
 * As curl: -d's "@FILE" is the file without its CR and LF, --data-binary's
 * "@FILE" the file as it is, several are joined by '&', and data makes the
 * request a form POST unless -X or -H say otherwise; -w prints the status
 * ("000" when none came) whatever happened; failures exit with curl's
 * numbers (7 no connection, 18 a cut answer, 28 out of time) and say so on
 * stderr.  Any other option is refused (exit 2), so that a curl option the
 * harness starts to use is not silently ignored.
 *
 * --repeat N (curl has none) makes the same request N times, one after
 * another, each on a connection of its own and within --max-time of its
 * own; it stops at the first answer that is not 2xx, and -o, -D and -w
 * are the last answer's.  The tests that leave 300 calls' groups in a box
 * made each call by a process of bash's (3-4 forks of some 4-7 ms each on
 * a pti=on guest): 300 of them were 40% of such a test's CPU.
 *
 * --stderr FILE is curl's: what would go to stderr goes to FILE.  --exit-0
 * (curl has none) exits 0 whatever happened: -w's status, 000 when none
 * came, and stderr say what.  With both, serve.sh's api() ends in httpc
 * with no redirection and no "|| true", so that bash execs it in place of
 * a $( )'s subshell: a fork less an API call.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <http_parser.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define HEADERS_MAX	32

struct buf {
	char *p;
	size_t len, cap;
};

struct answer {
	FILE *body, *headers;
	int status;
	bool complete;
	bool in_value;		/* the last header callback was a value */
};

static const char *http_code_fmt;
static int status_seen;
static bool exit_0;

static void put(struct buf *b, const void *p, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		b->cap = (b->len + n + 1) * 2;
		b->p = realloc(b->p, b->cap);
		if (!b->p) {
			perror("httpc: realloc");
			exit(1);
		}
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void putf(struct buf *b, const char *fmt, ...)
{
	char line[8192];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(line)) {
		fprintf(stderr, "httpc: a request line or header too long\n");
		exit(2);
	}
	put(b, line, (size_t)n);
}

static void finish(int code)
{
	if (http_code_fmt)
		printf("%03d", status_seen);
	fflush(stdout);
	exit(exit_0 ? 0 : code);
}

/* curl's way: "httpc: (N) what", exit N */
static void die(int code, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "httpc: (%d) ", code);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	finish(code);
}

static void read_file(struct buf *b, const char *path, bool strip_newlines)
{
	char chunk[65536];
	ssize_t n;
	int fd;

	fd = strcmp(path, "-") ? open(path, O_RDONLY | O_CLOEXEC) : 0;
	if (fd < 0)
		die(26, "cannot read %s: %s", path, strerror(errno));
	while ((n = read(fd, chunk, sizeof(chunk))) > 0) {
		if (!strip_newlines) {
			put(b, chunk, (size_t)n);
			continue;
		}
		for (ssize_t i = 0; i < n; i++)
			if (chunk[i] != '\r' && chunk[i] != '\n')
				put(b, &chunk[i], 1);
	}
	if (n < 0)
		die(26, "cannot read %s: %s", path, strerror(errno));
	if (fd)
		close(fd);
}

static void add_data(struct buf *body, const char *arg, bool binary)
{
	/* an empty -d still makes a body: "Content-Length: 0" */
	put(body, "&", body->p ? 1 : 0);
	if (arg[0] == '@')
		read_file(body, arg + 1, !binary);
	else
		put(body, arg, strlen(arg));
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static int on_status(http_parser *p, const char *at, size_t len)
{
	struct answer *a = p->data;

	if (a->headers)
		fprintf(a->headers, "HTTP/%u.%u %u %.*s\r\n", p->http_major,
			p->http_minor, p->status_code, (int)len, at);
	return 0;
}

static int on_field(http_parser *p, const char *at, size_t len)
{
	struct answer *a = p->data;

	if (a->headers) {
		if (a->in_value)
			fputs("\r\n", a->headers);
		fwrite(at, 1, len, a->headers);
	}
	a->in_value = false;
	return 0;
}

static int on_value(http_parser *p, const char *at, size_t len)
{
	struct answer *a = p->data;

	if (a->headers) {
		if (!a->in_value)
			fputs(": ", a->headers);
		fwrite(at, 1, len, a->headers);
	}
	a->in_value = true;
	return 0;
}

static int on_headers_complete(http_parser *p)
{
	struct answer *a = p->data;

	a->status = (int)p->status_code;
	status_seen = a->status;
	if (a->headers) {
		if (a->in_value)
			fputs("\r\n", a->headers);
		fputs("\r\n", a->headers);
		fflush(a->headers);
	}
	return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
	struct answer *a = p->data;

	if (fwrite(at, 1, len, a->body) != len)
		die(23, "writing the body: %s", strerror(errno));
	return 0;
}

static int on_message_complete(http_parser *p)
{
	struct answer *a = p->data;

	a->complete = true;
	http_parser_pause(p, 1);
	return 0;
}

static int connect_unix(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		die(7, "socket path too long: %s", path);
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		die(7, "socket: %s", strerror(errno));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS)
		die(7, "Couldn't connect to server %s: %s", path, strerror(errno));
	return fd;
}

/* connect_tcp HOST[:PORT]: a TCP connection to a host named as in a URL,
 * by its address (IPv4, or IPv6 in brackets: no resolver in a static
 * program), made within the deadline.  For serve.sh's tests of the
 * daemon's plain TCP front, which asked curl (its start 40-55 ms of
 * CPU) some 300 times a lane. */
static int connect_tcp(const char *hostport, long long deadline)
{
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
	struct pollfd pfd = { .events = POLLOUT };
	char host[64];
	const char *colon, *end = hostport + strlen(hostport);
	socklen_t len = sizeof(int), salen;
	unsigned long port = 80;
	char *pend;
	int fd, err, rc;

	if (*hostport == '[') {
		end = strchr(hostport, ']');
		if (!end)
			die(3, "URL host %s: no ']'", hostport);
		colon = end[1] == ':' ? end + 1 : NULL;
		hostport++;
	} else {
		colon = strrchr(hostport, ':');
		if (colon)
			end = colon;
	}
	if ((size_t)(end - hostport) >= sizeof(host))
		die(3, "URL host too long: %s", hostport);
	memcpy(host, hostport, (size_t)(end - hostport));
	host[end - hostport] = 0;
	if (colon) {
		errno = 0;
		port = strtoul(colon + 1, &pend, 10);
		if (errno || pend == colon + 1 || *pend || port == 0 || port > 65535)
			die(3, "URL port %s: not a port", colon + 1);
	}
	if (inet_pton(AF_INET, host, &sin->sin_addr) == 1) {
		sin->sin_family = AF_INET;
		sin->sin_port = htons((uint16_t)port);
		salen = sizeof(*sin);
	} else if (inet_pton(AF_INET6, host, &sin6->sin6_addr) == 1) {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons((uint16_t)port);
		salen = sizeof(*sin6);
	} else {
		die(6, "Could not resolve host %s: httpc takes an address, not a name", host);
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		die(7, "socket: %s", strerror(errno));
	if (connect(fd, (struct sockaddr *)&ss, salen) < 0 && errno != EINPROGRESS)
		die(7, "Couldn't connect to server %s port %lu: %s", host, port, strerror(errno));
	pfd.fd = fd;
	for (;;) {
		long long left = deadline - now_ms();

		if (left <= 0)
			die(28, "Connection timed out");
		rc = poll(&pfd, 1, (int)(left > 60000 ? 60000 : left));
		if (rc > 0)
			break;
		if (rc < 0 && errno != EINTR)
			die(7, "poll: %s", strerror(errno));
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		die(7, "getsockopt: %s", strerror(errno));
	if (err)
		die(7, "Couldn't connect to server %s port %lu: %s", host, port, strerror(err));
	return fd;
}

/* Send the request while reading the answer: a daemon may answer (413,
 * 400) and close before it has read a large body. */
static void exchange(int fd, const struct buf *req, struct answer *a,
		     long long deadline)
{
	static const http_parser_settings settings = {
		.on_status = on_status,
		.on_header_field = on_field,
		.on_header_value = on_value,
		.on_headers_complete = on_headers_complete,
		.on_body = on_body,
		.on_message_complete = on_message_complete,
	};
	http_parser parser;
	char chunk[65536];
	size_t sent = 0;
	ssize_t n;

	http_parser_init(&parser, HTTP_RESPONSE);
	parser.data = a;
	while (!a->complete) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		long long left = deadline - now_ms();

		if (sent < req->len)
			pfd.events |= POLLOUT;
		if (left <= 0)
			die(28, "Operation timed out");
		if (poll(&pfd, 1, (int)(left > 60000 ? 60000 : left)) < 0) {
			if (errno == EINTR)
				continue;
			die(56, "poll: %s", strerror(errno));
		}
		if (pfd.revents & POLLOUT && sent < req->len) {
			n = send(fd, req->p + sent, req->len - sent, MSG_NOSIGNAL);
			if (n >= 0)
				sent += (size_t)n;
			else if (errno == EPIPE || errno == ECONNRESET)
				sent = req->len;	/* the answer says why */
			else if (errno != EAGAIN && errno != EINTR)
				die(55, "Failed sending data: %s", strerror(errno));
		}
		if (!(pfd.revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		n = recv(fd, chunk, sizeof(chunk), 0);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			die(56, "Failure when receiving data: %s", strerror(errno));
		}
		if ((size_t)http_parser_execute(&parser, &settings, chunk, (size_t)n) != (size_t)n &&
		    !a->complete)
			die(8, "Weird server reply: %s",
			    http_errno_description(HTTP_PARSER_ERRNO(&parser)));
		if (n == 0 && !a->complete)
			die(a->status ? 18 : 52, a->status ? "transfer closed with data outstanding"
							    : "Empty reply from server");
	}
}

static FILE *open_out(const char *path)
{
	FILE *f = fopen(path, "w");

	if (!f)
		die(23, "cannot write %s: %s", path, strerror(errno));
	return f;
}

/* one exchange of req on a connection of its own; false when the answer
 * could not be written out */
static bool ask(struct answer *a, const struct buf *req, const char *sock,
		const char *host, const char *out, const char *dump, double max_time)
{
	long long deadline;
	bool ok;
	int fd;

	*a = (struct answer){ 0 };
	a->body = out ? open_out(out) : stdout;
	a->headers = dump ? open_out(dump) : NULL;
	deadline = now_ms() + (max_time > 0 ? (long long)(max_time * 1000) : 86400000LL);
	fd = sock ? connect_unix(sock) : connect_tcp(host, deadline);
	exchange(fd, req, a, deadline);
	close(fd);
	ok = fflush(a->body) != EOF && (!a->headers || fflush(a->headers) != EOF);
	if (out)
		ok &= fclose(a->body) == 0;
	if (a->headers)
		ok &= fclose(a->headers) == 0;
	return ok;
}

int main(int argc, char **argv)
{
	enum { OPT_MAX_TIME = 256, OPT_UNIX, OPT_DATA_BINARY, OPT_REPEAT, OPT_STDERR, OPT_EXIT_0 };
	static const struct option opts[] = {
		{ "max-time", required_argument, NULL, OPT_MAX_TIME },
		{ "unix-socket", required_argument, NULL, OPT_UNIX },
		{ "data-binary", required_argument, NULL, OPT_DATA_BINARY },
		{ "data", required_argument, NULL, 'd' },
		{ "request", required_argument, NULL, 'X' },
		{ "header", required_argument, NULL, 'H' },
		{ "output", required_argument, NULL, 'o' },
		{ "dump-header", required_argument, NULL, 'D' },
		{ "write-out", required_argument, NULL, 'w' },
		{ "repeat", required_argument, NULL, OPT_REPEAT },
		{ "stderr", required_argument, NULL, OPT_STDERR },
		{ "exit-0", no_argument, NULL, OPT_EXIT_0 },
		{ NULL, 0, NULL, 0 },
	};
	const char *sock = NULL, *method = NULL, *out = NULL, *dump = NULL;
	const char *headers[HEADERS_MAX], *url, *host, *path;
	struct buf body = { 0 }, req = { 0 };
	struct answer a = { 0 };
	double max_time = 0;
	bool has_type = false, has_accept = false;
	int opt, nheaders = 0;
	long repeat = 1;
	char *end;

	while ((opt = getopt_long(argc, argv, "sSX:H:d:o:D:w:", opts, NULL)) != -1) {
		switch (opt) {
		case 's':
		case 'S':
			break;
		case OPT_MAX_TIME:
			max_time = strtod(optarg, NULL);
			break;
		case OPT_UNIX:
			sock = optarg;
			break;
		case 'X':
			method = optarg;
			break;
		case 'H':
			if (nheaders == HEADERS_MAX) {
				fprintf(stderr, "httpc: more than %d headers\n", HEADERS_MAX);
				return 2;
			}
			headers[nheaders++] = optarg;
			has_type |= !strncasecmp(optarg, "content-type:", 13);
			has_accept |= !strncasecmp(optarg, "accept:", 7);
			break;
		case 'd':
			add_data(&body, optarg, false);
			break;
		case OPT_DATA_BINARY:
			add_data(&body, optarg, true);
			break;
		case 'o':
			out = optarg;
			break;
		case 'D':
			dump = optarg;
			break;
		case OPT_STDERR:
			if (!freopen(optarg, "w", stderr)) {
				perror(optarg);
				return 2;
			}
			break;
		case OPT_EXIT_0:
			exit_0 = true;
			break;
		case OPT_REPEAT:
			errno = 0;
			repeat = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || repeat < 1 || repeat > 100000) {
				fprintf(stderr, "httpc: --repeat %s: not a count from 1 to 100000\n", optarg);
				return 2;
			}
			break;
		case 'w':
			if (strcmp(optarg, "%{http_code}")) {
				fprintf(stderr, "httpc: -w takes only %%{http_code}\n");
				return 2;
			}
			http_code_fmt = optarg;
			break;
		default:
			fprintf(stderr, "httpc: an option curl has and httpc has not; use curl\n");
			return 2;
		}
	}
	if (optind != argc - 1 || strncmp(argv[optind], "http://", 7)) {
		fprintf(stderr, "usage: httpc [-sS] [--max-time S] [--unix-socket PATH] "
			"[-X METHOD] [-H H]... [-d DATA]... [-D FILE] [-o FILE] "
			"[-w '%%{http_code}'] [--stderr FILE] [--exit-0] [--repeat N] "
			"http://HOST[:PORT]/PATH\n");
		return 2;
	}
	url = argv[optind] + 7;
	path = strchr(url, '/');
	host = strndup(url, path ? (size_t)(path - url) : strlen(url));
	if (!host)
		return 1;
	if (!path)
		path = "/";
	if (!method)
		method = body.p ? "POST" : "GET";

	/* as curl: a -H of the same name takes the default's place */
	putf(&req, "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: httpc\r\n%s",
	     method, path, host, has_accept ? "" : "Accept: */*\r\n");
	for (int i = 0; i < nheaders; i++)
		putf(&req, "%s\r\n", headers[i]);
	if (body.p) {
		putf(&req, "Content-Length: %zu\r\n", body.len);
		if (!has_type)
			putf(&req, "Content-Type: application/x-www-form-urlencoded\r\n");
	}
	put(&req, "\r\n", 2);
	if (body.p)
		put(&req, body.p, body.len);

	for (long i = 1; i <= repeat; i++) {
		if (!ask(&a, &req, sock, host, out, dump, max_time))
			die(23, "writing the answer: %s", strerror(errno));
		if (repeat > 1 && (a.status < 200 || a.status > 299)) {
			fprintf(stderr, "httpc: request %ld of %ld answered %d\n", i, repeat, a.status);
			break;
		}
	}
	finish(0);
}
