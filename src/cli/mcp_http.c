/*
 * mcp_http.c - one request to the daemon from a tools/call's thread.
 *
 * client.c serves the verbs, one request at a time with one handle and its
 * failures said on stderr; a tool call needs its own handle (calls run at
 * once), its failure as a sentence for the model, and a way to be
 * cancelled while the daemon says nothing (a `sleep 600`): libcurl's
 * progress callback, called about once a second whatever comes, ends the
 * transfer when the call's cancel flag is set.  The daemon cancels an exec
 * whose client went away, with everything it started.
 */
#include "mcp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int grow(struct mcp_http *h, const char *data, size_t n)
{
	size_t need = h->len + n + 1, cap;
	char *p;

	if (h->len + n > h->max)
		return -1;
	if (need > h->cap) {
		cap = h->cap ? h->cap : 4096;
		while (cap < need)
			cap *= 2;
		p = realloc(h->buf, cap);
		if (!p)
			return -1;
		h->buf = p;
		h->cap = cap;
	}
	memcpy(h->buf + h->len, data, n);
	h->len += n;
	h->buf[h->len] = '\0';
	return 0;
}

/* Complete lines to h->line; the partial last one stays in buf. */
static int lines(struct mcp_http *h, size_t from)
{
	size_t start = 0;
	char *nl;

	while ((nl = memchr(h->buf + from, '\n', h->len - from))) {
		int r;

		*nl = '\0';
		r = h->line(h->arg, h->buf + start, nl - (h->buf + start));
		if (r > 0)
			h->enough = true;
		if (r != 0)
			return -1;
		start = from = nl - h->buf + 1;
	}
	memmove(h->buf, h->buf + start, h->len - start);
	h->len -= start;
	h->buf[h->len] = '\0';
	return 0;
}

struct transfer {
	struct mcp_http *h;
	CURL *curl;
	struct mcp_sock sock;
	bool too_large;
};

static size_t on_data(char *data, size_t size, size_t nmemb, void *arg)
{
	struct transfer *t = arg;
	struct mcp_http *h = t->h;
	size_t n = size * nmemb, old = h->len;

	if (!h->status &&
	    curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &h->status) != CURLE_OK)
		h->status = 0;
	if (grow(h, data, n) < 0) {
		t->too_large = true;
		return 0;
	}
	if (h->line && h->status >= 200 && h->status < 300 && lines(h, old) < 0)
		return 0;
	return n;
}

static int on_progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut,
		       curl_off_t un)
{
	struct transfer *t = arg;

	if (t->h->deadline_ms && corral_now_ms() >= t->h->deadline_ms) {
		t->h->timed_out = true;
		return 1;
	}
	return t->h->cancel && atomic_load(t->h->cancel) ? 1 : 0;
}

/* "cannot talk to the corral daemon at WHERE: WHY" */
static char *unreachable(const char *where, const char *why, const char *hint)
{
	char *s;

	if (asprintf(&s, "cannot talk to the corral daemon at %s: %s%s", where, why,
		     hint) < 0)
		return NULL;
	return s;
}

/*
 * Each request connects anew, and the check of who listens that `corral
 * mcp` made at its start says nothing of a socket that another user put
 * at the path since (the daemon restarted, the path in /tmp).  So every
 * connection's listener is checked as the verbs check theirs, once
 * libcurl has connected and before it sends anything: the socket is
 * noted when libcurl makes it, and checked when it is about to ask.
 */
static int on_socket(void *arg, curl_socket_t fd, curlsocktype purpose)
{
	struct mcp_sock *w = arg;

	(void)purpose;
	w->fd = fd;
	return CURL_SOCKOPT_OK;
}

static int on_connected(void *arg, char *ip, char *local_ip, int port,
			int local_port)
{
	struct mcp_sock *w = arg;
	uid_t peer = (uid_t)-1;

	(void)ip, (void)local_ip, (void)port, (void)local_port;
	if (w->fd != CURL_SOCKET_BAD && sock_check_peer(w->conn, w->fd, &peer) == 0)
		return CURL_PREREQFUNC_OK;
	if (peer == (uid_t)-1)
		snprintf(w->refused, sizeof(w->refused), "who listens there "
			 "cannot be told: nothing was sent to it");
	else
		snprintf(w->refused, sizeof(w->refused), "it is served by uid %u, "
			 "not by this session's uid %u or root: nothing was sent to it",
			 (unsigned)peer, (unsigned)geteuid());
	return CURL_PREREQFUNC_ABORT;
}

static CURLcode watch_socket(const struct mcp_daemon *d, CURL *curl,
			     struct mcp_sock *w)
{
	CURLcode rc;

	*w = (struct mcp_sock){ .conn = &d->conn, .fd = CURL_SOCKET_BAD };
	rc = curl_easy_setopt(curl, CURLOPT_SOCKOPTFUNCTION, on_socket);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(curl, CURLOPT_SOCKOPTDATA, w);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(curl, CURLOPT_PREREQFUNCTION, on_connected);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(curl, CURLOPT_PREREQDATA, w);
	return rc;
}

CURLcode mcp_curl_to(const struct mcp_daemon *d, CURL *curl, const char *url,
		     char *errbuf, struct mcp_sock *w)
{
	CURLcode rc = curl_easy_setopt(curl, CURLOPT_URL, url);

	if (rc == CURLE_OK && d->conn.socket)
		rc = curl_easy_setopt(curl, CURLOPT_UNIX_SOCKET_PATH, d->conn.socket);
	if (rc == CURLE_OK && d->conn.socket)
		rc = watch_socket(d, curl, w);
	if (rc == CURLE_OK)
		rc = conn_curl_tls(&d->conn, curl);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
	/* libcurl must not raise SIGPIPE or use signals for its timeouts:
	 * threads run requests at once */
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 10L);
	return rc;
}

static CURLcode setup(const struct mcp_daemon *d, CURL *curl, const char *url,
		      const char *method, const char *body, size_t body_len,
		      struct curl_slist *hdr, struct transfer *t, char *errbuf)
{
	CURLcode rc = mcp_curl_to(d, curl, url, errbuf, &t->sock);

	if (rc == CURLE_OK)
		rc = curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdr);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_data);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(curl, CURLOPT_WRITEDATA, t);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(curl, CURLOPT_XFERINFODATA, t);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
	if (rc == CURLE_OK && (body || !strcmp(method, "POST") || !strcmp(method, "PUT"))) {
		rc = curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
				      (curl_off_t)body_len);
		if (rc == CURLE_OK)
			rc = curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body ? body : "");
		if (rc == CURLE_OK && strcmp(method, "POST"))
			rc = curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
	} else if (rc == CURLE_OK && strcmp(method, "GET")) {
		rc = curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
	}
	return rc;
}

static int headers(const struct mcp_daemon *d, const char *type,
		   struct curl_slist **h)
{
	const char *lines[] = { "Expect:", d->conn.auth, type ? type : "Content-Type:" };

	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		struct curl_slist *n;

		if (!lines[i])
			continue;
		n = curl_slist_append(*h, lines[i]);
		if (!n)
			return -1;
		*h = n;
	}
	return 0;
}

static int http_once(const struct mcp_daemon *d, const char *method,
		     const char *path, const char *body, size_t body_len,
		     const char *type, struct mcp_http *h, char **why,
		     curl_off_t *retry_after)
{
	char errbuf[CURL_ERROR_SIZE] = "";
	struct transfer t = { .h = h };
	struct curl_slist *hdr = NULL;
	char *url = NULL;
	CURLcode rc;
	int ret = -1;

	*why = NULL;
	h->status = 0;
	if (!h->max)
		h->max = REPLY_MAX;
	t.curl = curl_easy_init();
	if (!t.curl || asprintf(&url, "%s%s", d->conn.base, path) < 0 ||
	    headers(d, type, &hdr) < 0) {
		url = NULL;
		*why = strdup("out of memory");
		goto out;
	}
	rc = setup(d, t.curl, url, method, body, body_len, hdr, &t, errbuf);
	if (rc == CURLE_OK)
		rc = curl_easy_perform(t.curl);
	/* a deadline reached, or all the caller keeps, is an answer cut short */
	if (((rc == CURLE_ABORTED_BY_CALLBACK && h->timed_out) ||
	     (rc == CURLE_WRITE_ERROR && h->enough)) &&
	    curl_easy_getinfo(t.curl, CURLINFO_RESPONSE_CODE, &h->status) == CURLE_OK) {
		ret = 0;
		goto out;
	}
	if (t.sock.refused[0]) {
		*why = unreachable(d->conn.socket, t.sock.refused, "");
		goto out;
	}
	if (rc == CURLE_ABORTED_BY_CALLBACK) {
		*why = strdup(h->timed_out ? "no answer before the deadline" : "cancelled");
		goto out;
	}
	if (t.too_large) {
		*why = strdup("the daemon's answer is larger than this client keeps");
		goto out;
	}
	if (rc != CURLE_OK) {
		*why = unreachable(d->conn.socket ? d->conn.socket : d->conn.url,
				   errbuf[0] ? errbuf : curl_easy_strerror(rc),
				   conn_tls_hint(&d->conn, rc));
		goto out;
	}
	if (curl_easy_getinfo(t.curl, CURLINFO_RESPONSE_CODE, &h->status) != CURLE_OK) {
		*why = strdup("libcurl did not tell the HTTP status of the answer");
		goto out;
	}
	/* 0: none said, or not as seconds */
	if (curl_easy_getinfo(t.curl, CURLINFO_RETRY_AFTER, retry_after) != CURLE_OK)
		*retry_after = 0;
	/* a stream's last line may lack its newline */
	if (h->line && h->status >= 200 && h->status < 300 && h->len) {
		if (h->line(h->arg, h->buf, h->len) < 0) {
			*why = strdup("the daemon's stream could not be read");
			goto out;
		}
		h->len = 0;
	}
	ret = 0;
out:
	if (ret < 0 && !*why)
		*why = strdup("out of memory");
	curl_slist_free_all(hdr);
	if (t.curl)
		curl_easy_cleanup(t.curl);
	free(url);
	return ret;
}

/*
 * Until the ms of corral_now_ms(), in steps that see the call cancelled
 * or its deadline come: false then.
 */
static bool busy_wait(const struct mcp_http *h, uint64_t until)
{
	uint64_t now;

	while ((now = corral_now_ms()) < until) {
		uint64_t ms = until - now < 100 ? until - now : 100;
		struct timespec ts = { 0, (long)ms * 1000000L };

		if ((h->cancel && atomic_load(h->cancel)) ||
		    (h->deadline_ms && now >= h->deadline_ms))
			return false;
		nanosleep(&ts, NULL);
	}
	return !(h->cancel && atomic_load(h->cancel));
}

/*
 * A 503 that says Retry-After was refused before the daemon did anything
 * of the request (its workers, or its memory for answers, all taken): a
 * model's listing or archive asked while other sessions' diffs ran got
 * the 503 as its answer, and nothing asked again.  Asked again here, as
 * it says, at most MCP_BUSY_TRIES times in all within MCP_BUSY_MS, while
 * the call is not cancelled; each time said on stderr (the operator's
 * log).  A refused answer is no 2xx: nothing of it went to h->line.
 */
#define MCP_BUSY_TRIES	5
#define MCP_BUSY_MS	30000

int mcp_http_do(const struct mcp_daemon *d, const char *method,
		const char *path, const char *body, size_t body_len,
		const char *type, struct mcp_http *h, char **why)
{
	uint64_t end = corral_now_ms() + MCP_BUSY_MS;

	for (int tries = 1; ; tries++) {
		curl_off_t wait = 0;
		uint64_t until;
		int r = http_once(d, method, path, body, body_len, type, h, why, &wait);

		if (r < 0 || h->status != 503 || wait <= 0 || tries >= MCP_BUSY_TRIES)
			return r;
		until = corral_now_ms() + (uint64_t)wait * 1000;
		if (until > end || (h->deadline_ms && until > h->deadline_ms))
			return r;
		fprintf(stderr, "corral mcp: the daemon is busy (503) for %s %.200s: asking "
			"again in %lld s (try %d of %d)\n", method, path, (long long)wait,
			tries + 1, MCP_BUSY_TRIES);
		if (!busy_wait(h, until))
			return r;	/* the 503 stays the answer */
		h->len = 0;
	}
}

void mcp_http_free(struct mcp_http *h)
{
	free(h->buf);
	h->buf = NULL;
	h->len = h->cap = 0;
}

/* RFC 3986 unreserved bytes stay; the rest becomes %XX. */
char *mcp_escape(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(s), j = 0;
	char *out = malloc(3 * n + 1);

	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = s[i];

		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		    (c >= '0' && c <= '9') || strchr("-._~/", c)) {
			out[j++] = c;
		} else {
			out[j++] = '%';
			out[j++] = hex[c >> 4];
			out[j++] = hex[c & 15];
		}
	}
	out[j] = '\0';
	return out;
}

char *mcp_sandbox_path(const char *id, const char *rest)
{
	char *esc = mcp_escape(id), *path;

	if (!esc)
		return NULL;
	if (asprintf(&path, "/v1/sandboxes/%s%s", esc, rest) < 0)
		path = NULL;
	free(esc);
	return path;
}
