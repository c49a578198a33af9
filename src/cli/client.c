/*
 * client.c - the daemon's client side of docs/API.md: where the daemon is
 * (its unix socket, or a URL and a bearer token), one HTTP request and its
 * answer (over the socket by sockhttp.c, over TCP by libcurl), the
 * daemon's refusals as sentences, and the API's paths.  The verbs
 * (create.c, exec.c ...) build on these.
 */
#include "client.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* ---- connection -------------------------------------------------------- */

/* Where the daemon listens when no --socket says: as docs/API.md has it. */
static int find_socket(struct conn *c)
{
	const char *env = getenv("CORRAL_SOCKET"), *run;
	int n;

	if (c->socket)
		return 0;
	if (env && *env) {
		c->socket = env;
		c->socket_from = "$CORRAL_SOCKET";
		return 0;
	}
	if (geteuid() == 0) {
		c->socket = "/run/corral/corral.sock";
		c->socket_from = "the default as root";
		return 0;
	}
	run = getenv("XDG_RUNTIME_DIR");
	if (!run || run[0] != '/') {
		cli_error("cannot tell where the daemon's socket is: XDG_RUNTIME_DIR is not set to an absolute path; give --socket PATH or set CORRAL_SOCKET");
		cli_json_code("unreachable");
		return EXIT_CORRAL;
	}
	n = snprintf(c->socket_buf, sizeof(c->socket_buf), "%s/corral.sock",
		     run);
	if (n < 0 || (size_t)n >= sizeof(c->socket_buf)) {
		cli_error("XDG_RUNTIME_DIR is too long (%zu bytes)", strlen(run));
		return EXIT_CORRAL;
	}
	c->socket = c->socket_buf;
	c->socket_from = "$XDG_RUNTIME_DIR/corral.sock";
	return 0;
}

/* The token is the first line of the file; it must fit in a header. */
static int read_token(struct conn *c)
{
	char *line = NULL;
	size_t cap = 0, i;
	ssize_t n;
	FILE *f;
	int code = EXIT_CORRAL;

	f = fopen(c->token_file, "re");
	if (!f) {
		int e = errno;

		cli_error("--token-file %s: %s", c->token_file, strerror(e));
		cli_json_errno(e);
		return EXIT_CORRAL;
	}
	n = getline(&line, &cap, f);
	if (n < 0 && ferror(f))
		cli_error("--token-file %s: %s", c->token_file, strerror(errno));
	else if (n < 0)
		cli_error("--token-file %s: the file is empty", c->token_file);
	fclose(f);
	if (n < 0)
		goto out;
	while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		line[--n] = '\0';
	for (i = 0; i < (size_t)n; i++)
		if ((unsigned char)line[i] <= ' ' || line[i] == 0x7f)
			break;
	if (n == 0 || i < (size_t)n) {
		cli_error("--token-file %s: the first line must be the token: not empty, no spaces or control characters",
			  c->token_file);
		goto out;
	}
	if (asprintf(&c->auth, "Authorization: Bearer %s", line) < 0) {
		c->auth = NULL;
		code = out_of_memory("for the bearer token");
		goto out;
	}
	code = 0;
out:
	if (line)
		explicit_bzero(line, cap);
	free(line);
	return code;
}

/* libcurl would say only that the handshake failed: name the file now */
static int check_readable(const char *flag, const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);

	if (fd < 0) {
		int e = errno;

		cli_error("%s %s: %s", flag, path, strerror(e));
		cli_json_errno(e);
		return EXIT_CORRAL;
	}
	close(fd);
	return 0;
}

/* --cert-file and --key-file: both or neither, for an https:// daemon */
static int check_client_cert(const struct conn *c, const struct verb *v)
{
	int code;

	if (!c->cert_file && !c->key_file)
		return 0;
	if (!c->cert_file != !c->key_file)
		return verb_usage_error(v, "--%s needs --%s: a client certificate goes with its key",
					c->cert_file ? "cert-file" : "key-file",
					c->cert_file ? "key-file" : "cert-file");
	if (strncmp(c->url, "https://", 8))
		return verb_usage_error(v, "--cert-file goes with an https:// --url (got \"%s\")",
					c->url);
	code = check_readable("--cert-file", c->cert_file);
	return code ? code : check_readable("--key-file", c->key_file);
}

int conn_target(struct conn *c, const struct verb *v)
{
	struct sockaddr_un sa;
	size_t n;
	int code;

	if (c->url && c->socket)
		return verb_usage_error(v, "--socket and --url exclude each other");
	if (c->token_file && !c->url)
		return verb_usage_error(v, "--token-file goes with --url; the unix socket needs no token");
	if ((c->cert_file || c->key_file) && !c->url)
		return verb_usage_error(v, "--cert-file and --key-file go with an https:// --url; "
					"the unix socket needs no certificate");
	if (c->url) {
		if (strncmp(c->url, "http://", 7) && strncmp(c->url, "https://", 8))
			return verb_usage_error(v, "--url: expected http://HOST:PORT or https://HOST:PORT (got \"%s\")",
						c->url);
		if (c->ca_file && strncmp(c->url, "https://", 8))
			return verb_usage_error(v, "--ca-file goes with an https:// --url (got \"%s\")",
						c->url);
		code = check_client_cert(c, v);
		if (code)
			return code;
		if (!c->token_file)
			return verb_usage_error(v, "--url needs --token-file: over TCP the daemon answers only requests that carry its token");
		code = read_token(c);
		if (code)
			return code;
		c->base = strdup(c->url);
		if (!c->base)
			return out_of_memory("for the daemon's URL");
		n = strlen(c->base);
		while (n > 0 && c->base[n - 1] == '/')
			c->base[--n] = '\0';
		return 0;
	}
	code = find_socket(c);
	if (code)
		return code;
	if (strlen(c->socket) >= sizeof(sa.sun_path)) {
		cli_error("socket path %s (%s) is too long: %zu bytes, a unix socket path has at most %zu",
			  c->socket, c->socket_from, strlen(c->socket),
			  sizeof(sa.sun_path) - 1);
		return EXIT_CORRAL;
	}
	/* the host part is not looked at: the socket decides where it goes */
	c->base = strdup("http://localhost");
	if (!c->base)
		return out_of_memory("for the daemon's URL");
	return 0;
}

/* Idempotent up to here: exec checks the target before it reads stdin. */
int conn_open(struct conn *c, const struct verb *v)
{
	int code = c->base ? 0 : conn_target(c, v);

	if (code)
		return code;
	if (!c->url)
		return 0;	/* sockhttp.c: libcurl is not loaded */
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		cli_error("libcurl could not be initialised");
		return EXIT_CORRAL;
	}
	c->curl_global = true;
	c->curl = curl_easy_init();
	if (!c->curl)
		return out_of_memory("starting libcurl");
	return 0;
}

void conn_close(struct conn *c)
{
	if (c->raw)
		close(c->raw_fd);
	c->raw = false;
	if (c->curl)
		curl_easy_cleanup(c->curl);
	if (c->curl_global)
		curl_global_cleanup();
	if (c->auth)
		explicit_bzero(c->auth, strlen(c->auth));
	free(c->auth);
	free(c->base);
}

/* ---- requests and replies ---------------------------------------------- */

static bool is_success(long status)
{
	return status >= 200 && status < 300;
}

int reply_append(struct reply *r, const char *data, size_t n)
{
	size_t need = r->len + n + 1, cap;
	char *p;

	if (r->len + n > r->max) {
		char size[32];

		corral_format_size(r->max, size, sizeof(size));
		cli_error("the daemon's answer is larger than %s; stopped reading it",
			  size);
		return -1;
	}
	if (need > r->cap) {
		cap = r->cap ? r->cap : 4096;
		while (cap < need)
			cap *= 2;
		p = realloc(r->buf, cap);
		if (!p) {
			out_of_memory("for the daemon's reply");
			return -1;
		}
		r->buf = p;
		r->cap = cap;
	}
	memcpy(r->buf + r->len, data, n);
	r->len += n;
	r->buf[r->len] = '\0';
	return 0;
}

/* Hand the complete lines in buf to r->line; keep the partial last one. */
static int reply_lines(struct reply *r, size_t from)
{
	size_t start = 0;
	char *nl;

	while ((nl = memchr(r->buf + from, '\n', r->len - from))) {
		*nl = '\0';
		if (r->line(r->arg, r->buf + start, nl - (r->buf + start)) < 0)
			return -1;
		start = from = nl - r->buf + 1;
	}
	memmove(r->buf, r->buf + start, r->len - start);
	r->len -= start;
	r->buf[r->len] = '\0';
	return 0;
}

int reply_take(struct reply *r, const char *data, size_t n)
{
	size_t old = r->len;

	if (r->sink && is_success(r->status)) {
		if (r->sink(r->arg, data, n) < 0)
			goto stop;
		return 0;
	}
	if (reply_append(r, data, n) < 0)
		goto stop;
	if (r->line && is_success(r->status) && reply_lines(r, old) < 0)
		goto stop;
	return 0;
stop:
	r->stopped = true;
	return -1;
}

/* The status and the media type are known by the body's first bytes. */
static size_t on_data(char *data, size_t size, size_t nmemb, void *arg)
{
	struct reply *r = arg;
	size_t n = size * nmemb;
	const char *type = NULL;

	if (!r->status) {
		if (curl_easy_getinfo(r->curl, CURLINFO_RESPONSE_CODE, &r->status) != CURLE_OK)
			r->status = 0;
		if (curl_easy_getinfo(r->curl, CURLINFO_CONTENT_TYPE, &type) == CURLE_OK && type)
			snprintf(r->type, sizeof(r->type), "%s", type);
	}
	/* 0 ends the transfer: CURLE_WRITE_ERROR */
	return reply_take(r, data, n) < 0 ? 0 : n;
}

void reply_free(struct reply *r)
{
	free(r->buf);
	r->buf = NULL;
	r->len = r->cap = 0;
}

/*
 * A daemon that asks for a client certificate ends the connection of one
 * that has none, and libcurl reports only the broken connection
 * ("getpeername() failed with errno 107").
 */
const char *conn_tls_hint(const struct conn *c, CURLcode rc)
{
	if (!c->url || c->cert_file)
		return "";
	switch (rc) {
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_SSL_CONNECT_ERROR:
		return " (if the daemon asks for a client certificate, give --cert-file and --key-file)";
	default:
		return "";
	}
}

/* Say why the socket would not connect; most often: no daemon there. */
static void connect_said(const struct conn *c, int os_errno)
{
	struct stat st = { 0 };

	if (stat(c->socket, &st) < 0 && errno == ENOENT) {
		cli_error("no daemon socket at %s (%s); start the daemon with `corral serve`, or name its socket with --socket PATH",
			  c->socket, c->socket_from);
		return;
	}
	if (st.st_mode && !S_ISSOCK(st.st_mode)) {
		cli_error("%s (%s) is not a socket; name the daemon's with --socket PATH",
			  c->socket, c->socket_from);
		return;
	}
	if (os_errno == EACCES || os_errno == EPERM)
		cli_error("%s: permission denied; the daemon's socket is mode 0600: run as the user who started `corral serve`",
			  c->socket);
	else if (os_errno == ECONNREFUSED)
		cli_error("nothing answers at %s (%s): a socket left by a daemon that is gone?  Start one with `corral serve`",
			  c->socket, c->socket_from);
	else if (os_errno == EAGAIN)
		cli_error("the daemon at %s accepts no connection: it let none in for %d s",
			  c->socket, CONNECT_WAIT_S);
	else
		cli_error("cannot connect to the daemon at %s: %s", c->socket,
			  strerror(os_errno));
}

void conn_connect_error(const struct conn *c, int os_errno)
{
	connect_said(c, os_errno);
	cli_json_code("unreachable");
}

/* Say why nothing came back over libcurl (a --url). */
static void transport_error(const struct conn *c, CURLcode rc,
			    const char *errbuf)
{
	const char *what = errbuf[0] ? errbuf : curl_easy_strerror(rc);

	cli_error("cannot talk to the daemon at %s: %s%s", c->url, what,
		  conn_tls_hint(c, rc));
	cli_json_code("unreachable");
}

static int append_header(struct curl_slist **h, const char *line)
{
	struct curl_slist *n = curl_slist_append(*h, line);

	if (!n) {
		out_of_memory("building the request headers");
		return -1;
	}
	*h = n;
	return 0;
}

static int build_headers(const struct conn *c, const struct request *q,
			 struct curl_slist **h)
{
	/* Send a body at once, without waiting for a "100 Continue". */
	if (append_header(h, "Expect:") < 0)
		return -1;
	if (c->auth && append_header(h, c->auth) < 0)
		return -1;
	/* "Content-Type:" alone drops libcurl's form-urlencoded default. */
	if (append_header(h, q->type ? q->type : "Content-Type:") < 0)
		return -1;
	if (q->accept && append_header(h, q->accept) < 0)
		return -1;
	return 0;
}

bool request_has_body(const struct request *q)
{
	return q->body || !strcmp(q->method, "POST") || !strcmp(q->method, "PUT");
}

/* POSTFIELDS with CUSTOMREQUEST is how libcurl sends a PUT from memory. */
static CURLcode set_method(CURL *curl, const struct request *q)
{
	bool with_body = request_has_body(q);
	CURLcode rc = CURLE_OK;

	if (with_body) {
		rc = curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
				      (curl_off_t)q->body_len);
		if (rc == CURLE_OK)
			rc = curl_easy_setopt(curl, CURLOPT_POSTFIELDS,
					      q->body ? q->body : "");
	}
	if (rc == CURLE_OK && strcmp(q->method, with_body ? "POST" : "GET"))
		rc = curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, q->method);
	return rc;
}

CURLcode conn_curl_tls(const struct conn *c, CURL *curl)
{
	CURLcode rc = CURLE_OK;

	if (c->ca_file)
		rc = curl_easy_setopt(curl, CURLOPT_CAINFO, c->ca_file);
	if (rc == CURLE_OK && c->cert_file)
		rc = curl_easy_setopt(curl, CURLOPT_SSLCERT, c->cert_file);
	if (rc == CURLE_OK && c->key_file)
		rc = curl_easy_setopt(curl, CURLOPT_SSLKEY, c->key_file);
	return rc;
}

static CURLcode set_options(const struct conn *c, const struct request *q,
			    struct reply *r, const char *url,
			    struct curl_slist *h, char *errbuf)
{
	CURL *curl = c->curl;
	CURLcode rc;

	rc = curl_easy_setopt(curl, CURLOPT_URL, url);
	if (rc == CURLE_OK && c->socket)
		rc = curl_easy_setopt(curl, CURLOPT_UNIX_SOCKET_PATH, c->socket);
	if (rc == CURLE_OK)
		rc = conn_curl_tls(c, curl);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(curl, CURLOPT_HTTPHEADER, h);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_data);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(curl, CURLOPT_WRITEDATA, r);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 10L);
	if (rc == CURLE_OK)
		rc = set_method(curl, q);
	return rc;
}

static int curl_perform(struct conn *c, const struct request *q,
			struct reply *r)
{
	char errbuf[CURL_ERROR_SIZE] = "";
	struct curl_slist *h = NULL;
	char *url = NULL;
	CURLcode rc;
	int ret = -1;

	if (asprintf(&url, "%s%s", c->base, q->path) < 0) {
		url = NULL;
		out_of_memory("building the request URL");
		goto out;
	}
	if (build_headers(c, q, &h) < 0)
		goto out;
	curl_easy_reset(c->curl);
	r->curl = c->curl;
	r->status = 0;
	rc = set_options(c, q, r, url, h, errbuf);
	if (rc != CURLE_OK) {
		cli_error("libcurl: %s", curl_easy_strerror(rc));
		goto out;
	}
	rc = curl_easy_perform(c->curl);
	if (rc != CURLE_OK) {
		if (!r->stopped)
			transport_error(c, rc, errbuf);
		goto out;
	}
	if (curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &r->status) != CURLE_OK) {
		cli_error("libcurl did not tell the HTTP status of the answer");
		goto out;
	}
	ret = 0;
out:
	curl_slist_free_all(h);
	free(url);
	return ret;
}

int conn_perform(struct conn *c, const struct request *q, struct reply *r)
{
	r->status = 0;
	r->type[0] = '\0';
	if ((c->url ? curl_perform(c, q, r) : sock_perform(c, q, r)) < 0)
		return -1;
	/* a stream's last line may lack its newline */
	if (r->line && is_success(r->status) && r->len) {
		if (r->line(r->arg, r->buf, r->len) < 0)
			return -1;
		r->len = 0;
	}
	return 0;
}

/* Over the unix socket: ours, non-blocking, as libcurl's CONNECT_ONLY is. */
static int sock_connect_raw(struct conn *c, int *fd)
{
	if (sock_connect(c, fd) < 0)
		return -1;
	if (fcntl(*fd, F_SETFL, O_NONBLOCK) < 0) {
		cli_error("fcntl O_NONBLOCK on the connection to %s: %s", c->socket,
			  strerror(errno));
		close(*fd);
		return -1;
	}
	c->raw = true;
	c->raw_fd = *fd;
	return 0;
}

int conn_connect_raw(struct conn *c, const char *path, int *fd)
{
	char errbuf[CURL_ERROR_SIZE] = "";
	char *url = NULL;
	CURLcode rc;
	int ret = -1;

	if (!c->url)
		return sock_connect_raw(c, fd);
	if (asprintf(&url, "%s%s", c->base, path) < 0) {
		out_of_memory("building the request URL");
		return -1;
	}
	curl_easy_reset(c->curl);
	rc = curl_easy_setopt(c->curl, CURLOPT_URL, url);
	if (rc == CURLE_OK)
		rc = conn_curl_tls(c, c->curl);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, errbuf);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT, 10L);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(c->curl, CURLOPT_CONNECT_ONLY, 1L);
	if (rc != CURLE_OK) {
		cli_error("libcurl: %s", curl_easy_strerror(rc));
		goto out;
	}
	rc = curl_easy_perform(c->curl);
	if (rc != CURLE_OK) {
		transport_error(c, rc, errbuf);
		goto out;
	}
	if (curl_easy_getinfo(c->curl, CURLINFO_ACTIVESOCKET, fd) != CURLE_OK ||
	    *fd == CURL_SOCKET_BAD) {
		cli_error("libcurl did not tell the connection's socket");
		goto out;
	}
	ret = 0;
out:
	/* errbuf goes with this frame: libcurl must not write to it later */
	curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, NULL);
	free(url);
	return ret;
}

/* A non-blocking send's or recv's outcome, as conn_raw_send() says it. */
static int raw_outcome(ssize_t k, size_t *n, const char **why)
{
	if (k < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (k < 0) {
		*why = strerror(errno);
		return -1;
	}
	*n = k;
	return 1;
}

static int curl_outcome(CURLcode rc, const char **why)
{
	if (rc == CURLE_AGAIN)
		return 0;
	if (rc != CURLE_OK) {
		*why = curl_easy_strerror(rc);
		return -1;
	}
	return 1;
}

int conn_raw_send(struct conn *c, const void *buf, size_t len, size_t *n,
		  const char **why)
{
	*n = 0;
	if (c->raw)
		return raw_outcome(send(c->raw_fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT),
				   n, why);
	return curl_outcome(curl_easy_send(c->curl, buf, len, n), why);
}

int conn_raw_recv(struct conn *c, void *buf, size_t len, size_t *n,
		  const char **why)
{
	*n = 0;
	if (c->raw)
		return raw_outcome(recv(c->raw_fd, buf, len, MSG_DONTWAIT), n, why);
	return curl_outcome(curl_easy_recv(c->curl, buf, len, n), why);
}

/* {"error": CODE, "detail": SENTENCE} -> "corral: SENTENCE (HTTP 409)" */
static void reply_error(const struct reply *r)
{
	json_t *o = json_loadb(r->buf ? r->buf : "", r->len, JSON_ALLOW_NUL, NULL);
	const char *detail = json_string_value(json_object_get(o, "detail"));
	char suffix[160], id[64];

	if (!detail)
		detail = json_string_value(json_object_get(o, "error"));
	/*
	 * A sandbox id mistyped, or of one gone: the daemon's 404 names it,
	 * and the verb that lists what there is is ours to point to; a
	 * paused one's 409 names it too, and ours resumes it.
	 */
	if (r->status == 409 && detail &&
	    sscanf(detail, "sandbox %63[A-Za-z0-9_-] is paused;", id) == 1)
		snprintf(suffix, sizeof(suffix), " (HTTP %ld); `corral resume %s` "
			 "resumes it", r->status, id);
	else
		snprintf(suffix, sizeof(suffix), " (HTTP %ld)%s", r->status,
			 r->status == 404 && detail && !strncmp(detail, "no sandbox \"", 12) ?
			 "; `corral ls` lists the sandboxes" : "");
	if (detail) {
		daemon_error(detail, suffix);
	} else {
		char *safe = printable(r->buf ? r->buf : "",
				       r->len < 200 ? r->len : 200);

		cli_error("the daemon answered HTTP %ld%s%s", r->status,
			  safe && *safe ? ": " : "", safe ? safe : "");
		free(safe);
	}
	/* with --json: the daemon's own word and sentence, and its status */
	cli_json_amend(json_string_value(json_object_get(o, "error")) ?: "failed",
		       detail, r->status);
	json_decref(o);
}

int reply_check(const struct reply *r)
{
	if (is_success(r->status))
		return 0;
	reply_error(r);
	return -1;
}

json_t *reply_object(const struct reply *r)
{
	json_error_t jerr;
	json_t *o = json_loadb(r->buf ? r->buf : "", r->len, JSON_ALLOW_NUL, &jerr);

	if (!o) {
		cli_error("the daemon's answer is not JSON: %s", jerr.text);
		cli_json_code("bad_answer");
		return NULL;
	}
	if (!json_is_object(o)) {
		cli_error("the daemon's answer is not a JSON object");
		cli_json_code("bad_answer");
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *conn_call_json(struct conn *c, const char *method, const char *path,
		       const json_t *body)
{
	struct request q = { .method = method, .path = path };
	struct reply r = { .max = REPLY_MAX };
	json_t *o = NULL;
	char *text = NULL;

	if (body) {
		text = json_dumps(body, JSON_COMPACT);
		if (!text) {
			out_of_memory("building the request body");
			return NULL;
		}
		q.body = text;
		q.body_len = strlen(text);
		q.type = "Content-Type: application/json";
	}
	if (conn_perform(c, &q, &r) == 0 && reply_check(&r) == 0)
		o = reply_object(&r);
	free(text);
	reply_free(&r);
	return o;
}

/* "/v1/sandboxes/ID" + rest; the id was checked, escaping is belt and braces. */
/* "DEV:INO", as the daemon writes a rw directory's identity */
static bool dir_id_parse(const char *s, struct corral_dir_id *id)
{
	unsigned long long dev, ino;
	int end = 0;

	if (sscanf(s, "%llu:%llu%n", &dev, &ino, &end) != 2 || s[end])
		return false;
	*id = (struct corral_dir_id){ .dev = dev, .ino = ino };
	return true;
}

int sandbox_rw_dirs(struct conn *c, const char *id, struct corral_dir_id **ids,
		    size_t *n)
{
	char *path = conn_sandbox_path(c, id, "");
	json_t *o = path ? conn_call_json(c, "GET", path, NULL) : NULL, *a, *v;
	size_t i;
	int code = 0;

	*ids = NULL;
	*n = 0;
	free(path);
	if (!o)
		return EXIT_CORRAL;
	a = json_object_get(o, "rw_dirs");
	if (json_array_size(a) && !(*ids = calloc(json_array_size(a), sizeof(**ids))))
		code = out_of_memory("reading the sandbox's rw directories");
	json_array_foreach(a, i, v) {
		if (code)
			break;
		if (!json_is_string(v) || !dir_id_parse(json_string_value(v), &(*ids)[(*n)++])) {
			cli_error("the daemon's rw_dirs holds a bad entry");
			code = EXIT_CORRAL;
		}
	}
	if (code) {
		free(*ids);
		*ids = NULL;
		*n = 0;
	}
	json_decref(o);
	return code;
}

/* What curl_easy_escape() gives: all but RFC 3986's unreserved as %XX. */
char *conn_escape(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t len = strlen(s);
	char *out = malloc(len * 3 + 1), *o = out;

	if (!out)
		return NULL;
	for (; *s; s++) {
		unsigned char ch = *s;

		if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
		    (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' ||
		    ch == '_' || ch == '~') {
			*o++ = ch;
		} else {
			*o++ = '%';
			*o++ = hex[ch >> 4];
			*o++ = hex[ch & 15];
		}
	}
	*o = '\0';
	return out;
}

char *conn_sandbox_path(struct conn *c, const char *id, const char *rest)
{
	char *esc = conn_escape(id), *path;

	if (!esc) {
		out_of_memory("building the sandbox's path");
		return NULL;
	}
	if (asprintf(&path, "/v1/sandboxes/%s%s", esc, rest) < 0) {
		path = NULL;
		out_of_memory("building the sandbox's path");
	}
	free(esc);
	return path;
}

char *conn_files_path(struct conn *c, const char *id, const char *file,
		      bool list)
{
	char *esc = conn_escape(file), *rest, *path;

	if (!esc) {
		out_of_memory("building the file's path");
		return NULL;
	}
	if (asprintf(&rest, "/files?path=%s%s", esc, list ? "&list=1" : "") < 0) {
		free(esc);
		out_of_memory("building the file's path");
		return NULL;
	}
	free(esc);
	path = conn_sandbox_path(c, id, rest);
	free(rest);
	return path;
}
