/*
 * mcp_lease.c - the session's lease on a shared daemon (POST /v1/leases,
 * docs/API.md): a connection this process holds open for the whole
 * session, whose end the daemon takes as the cue to destroy every sandbox
 * created under it.  The kernel closes it when the process dies, whatever
 * killed it (SIGKILL to the session or to its whole cgroup, the OOM
 * killer), so no sandbox of the session outlives it, not even one whose
 * create was answered in the session's last instant: the daemon bound it
 * before it answered.
 *
 * libcurl makes the connection (unix socket, or TCP with TLS and the
 * token, as every request of the session) and then lets it be: the request
 * is written and its answer's first line read by hand (CURLOPT_CONNECT_ONLY),
 * and the handle is kept, never read again, until the session ends.  The
 * daemon sends nothing more, so nothing piles up on either side.
 */
#include "mcp.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEASE_WAIT_MS	10000	/* for the daemon's first line */
#define LEASE_REPLY_MAX	16384	/* the head and the first line, at most */

/* Until fd is ready (POLLIN or POLLOUT) or end_ms: 0, else -1. */
static int wait_fd(curl_socket_t fd, short events, uint64_t end_ms)
{
	struct pollfd p = { .fd = fd, .events = events };
	uint64_t now = corral_now_ms();
	int r;

	if (now >= end_ms)
		return -1;
	do
		r = poll(&p, 1, (int)(end_ms - now));
	while (r < 0 && errno == EINTR);
	return r > 0 ? 0 : -1;
}

static int send_all(CURL *curl, curl_socket_t fd, const char *buf, size_t len,
		    uint64_t end_ms)
{
	size_t off = 0;

	while (off < len) {
		size_t n = 0;
		CURLcode rc = curl_easy_send(curl, buf + off, len - off, &n);

		if (rc == CURLE_AGAIN) {
			if (wait_fd(fd, POLLOUT, end_ms) < 0)
				return -1;
			continue;
		}
		if (rc != CURLE_OK)
			return -1;
		off += n;
	}
	return 0;
}

/*
 * The answer's head and first body line into buf (NUL-terminated): 0,
 * or -1 when the daemon closed, was silent till end_ms or said too much.
 */
static int read_first_line(CURL *curl, curl_socket_t fd, char *buf, size_t cap,
			   uint64_t end_ms)
{
	size_t len = 0;

	buf[0] = '\0';
	for (;;) {
		char *head_end = strstr(buf, "\r\n\r\n");
		char *line = head_end ? strchr(head_end, '{') : NULL;
		size_t n = 0;
		CURLcode rc;

		/*
		 * A 200's first JSON line (after a chunk's size, which may come
		 * in a TLS record of its own); any other status's body as far as
		 * it came.
		 */
		if (head_end && (strncmp(buf + 9, "200", 3) || (line && strchr(line, '\n'))))
			return 0;
		if (len + 1 >= cap)
			return -1;
		rc = curl_easy_recv(curl, buf + len, cap - len - 1, &n);
		if (rc == CURLE_AGAIN) {
			if (wait_fd(fd, POLLIN, end_ms) < 0)
				return head_end ? 0 : -1;
			continue;
		}
		if (rc != CURLE_OK || n == 0)
			return head_end ? 0 : -1;
		len += n;
		buf[len] = '\0';
	}
}

/* {"lease": "ls-..."} out of a 200's body (chunked or not): the id, or NULL. */
static const char *lease_id(const char *body, char *id, size_t len)
{
	const char *line = strchr(body, '{'), *v;
	json_t *o = line ? json_loadb(line, strcspn(line, "\n"), 0, NULL) : NULL;

	v = json_string_value(json_object_get(o, "lease"));
	if (v && !strncmp(v, "ls-", 3) && strlen(v) < len &&
	    strspn(v + 3, "0123456789abcdef") == strlen(v + 3) && strlen(v) > 3)
		snprintf(id, len, "%s", v);
	else
		v = NULL;
	json_decref(o);
	return v ? id : NULL;
}

static CURLcode connect_only(const struct mcp_daemon *d, CURL *curl, const char *url,
			     char *errbuf, struct mcp_sock *w)
{
	CURLcode rc = mcp_curl_to(d, curl, url, errbuf, w);

	if (rc == CURLE_OK)
		rc = curl_easy_setopt(curl, CURLOPT_CONNECT_ONLY, 1L);
	if (rc == CURLE_OK)
		rc = curl_easy_perform(curl);
	return rc;
}

int mcp_lease_open(struct mcp_owned *o, const struct mcp_daemon *d, char **why)
{
	const char *where = d->conn.socket ? d->conn.socket : d->conn.url;
	char errbuf[CURL_ERROR_SIZE] = "", *url = NULL, *req = NULL, *reply = NULL;
	uint64_t end_ms = corral_now_ms() + LEASE_WAIT_MS;
	struct mcp_sock sock = { .refused = "" };
	curl_socket_t fd = CURL_SOCKET_BAD;
	CURL *curl = curl_easy_init();
	long status = 0;
	int ret = -1;
	CURLcode rc;

	*why = NULL;
	if (asprintf(&url, "%s/v1/leases", d->conn.base) < 0)
		url = NULL;
	if (asprintf(&req, "POST /v1/leases HTTP/1.1\r\nHost: corral\r\n%s%s"
		     "Content-Length: 0\r\n\r\n", d->conn.auth ? d->conn.auth : "",
		     d->conn.auth ? "\r\n" : "") < 0)
		req = NULL;
	reply = malloc(LEASE_REPLY_MAX);
	if (!curl || !url || !req || !reply)
		goto out;	/* out of memory */
	rc = connect_only(d, curl, url, errbuf, &sock);
	if (rc == CURLE_OK)
		rc = curl_easy_getinfo(curl, CURLINFO_ACTIVESOCKET, &fd);
	if (rc != CURLE_OK || fd == CURL_SOCKET_BAD) {
		if (asprintf(why, "cannot connect to %s: %s%s", where,
			     sock.refused[0] ? sock.refused :
			     errbuf[0] ? errbuf : curl_easy_strerror(rc),
			     conn_tls_hint(&d->conn, rc)) < 0)
			*why = NULL;
		goto out;
	}
	/* no child of ours may hold the lease open after we are gone */
	if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0 ||
	    send_all(curl, fd, req, strlen(req), end_ms) < 0 ||
	    read_first_line(curl, fd, reply, LEASE_REPLY_MAX, end_ms) < 0) {
		if (asprintf(why, "no answer from %s to POST /v1/leases within %d s",
			     where, LEASE_WAIT_MS / 1000) < 0)
			*why = NULL;
		goto out;
	}
	if (sscanf(reply, "HTTP/1.%*d %ld", &status) != 1)
		status = 0;
	if (status == 404 || status == 405) {
		ret = 1;	/* a daemon older than leases */
		goto out;
	}
	if (status != 200 || !lease_id(strstr(reply, "\r\n\r\n") + 4, o->lease,
				       sizeof(o->lease))) {
		const char *body = strstr(reply, "\r\n\r\n") + 4;

		if (asprintf(why, "%s answered POST /v1/leases with HTTP %ld: %.300s",
			     where, status, status == 200 ? "no lease id" : body) < 0)
			*why = NULL;
		goto out;
	}
	o->lease_conn = curl;
	curl = NULL;
	ret = 0;
out:
	if (ret < 0 && !*why)
		*why = strdup("out of memory");
	if (curl)
		curl_easy_cleanup(curl);
	free(reply);
	free(req);
	free(url);
	return ret;
}

void mcp_lease_close(struct mcp_owned *o)
{
	if (o->lease_conn)
		curl_easy_cleanup(o->lease_conn);
	o->lease_conn = NULL;
	o->lease[0] = '\0';
}
