/*
 * terminate.c - TLS from the sandbox ends at the supervisor.
 *
 * For a host the policy terminates (httprules.c), once the ClientHello's
 * SNI was judged (proxy.c's conn_on_sni), the proxy answers the handshake
 * itself with a certificate minted for the name by the sandbox's own CA
 * (tls.c), and reads what comes next as HTTP/1.1 requests: each judged by
 * method, path and size, its placeholders swapped or refused (proxy.c).
 * Upstream it is a client of its own, verifying the host's certificate and
 * name, never below the protocol version the sandbox negotiated.
 *
 * The filter over the sandbox's socket is made without BEV_OPT_CLOSE_ON_FREE
 * so that a connection closing can free it and still flush what it had
 * already encrypted into the socket's bufferevent.
 */
#include "proxy_int.h"

#include <event2/buffer.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <stdio.h>
#include <string.h>

bool conn_should_terminate(struct conn *c)
{
	return c->px->tls && httprules_terminate(c->px->tls->rules, c->host, c->port);
}

static void on_down_handshake(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;

	if (what & BEV_EVENT_CONNECTED) {
		/* requests from here on, each judged as plain HTTP is */
		c->st = C_HEAD;
		c->proto = "https";
		httpreq_free(&c->hr);
		httpreq_init(&c->hr);
		bufferevent_setwatermark(bev, EV_READ, 0, HEAD_MAX);
		bufferevent_setcb(bev, conn_on_http_head, NULL, conn_down_event, c);
		bufferevent_enable(bev, EV_READ | EV_WRITE);
		if (evbuffer_get_length(bufferevent_get_input(bev)))
			conn_http_from_down(c);
		return;
	}
	/* a client that does not trust our CA stops here: nothing went out */
	events_emit(c->px->ev, "egress.tls_refused",
		    json_pack("{s:s, s:s, s:i, s:s}", "protocol", c->proto, "host", c->host,
			      "port", c->port, "reason",
			      "the sandbox's client did not complete TLS with the sandbox's CA"));
	conn_free(c);
}

void conn_terminate(struct conn *c)
{
	struct corral_err err = { 0 };
	struct bufferevent *filter;
	SSL *ssl = tls_ca_server(c->px->tls->ca, c->host, &err);

	if (!ssl) {
		conn_deny(c, err.msg);
		return;
	}
	filter = bufferevent_openssl_filter_new(c->px->base, c->down, ssl,
						BUFFEREVENT_SSL_ACCEPTING,
						BEV_OPT_DEFER_CALLBACKS);
	if (!filter) {
		SSL_free(ssl);
		conn_free(c);
		return;
	}
	conn_bev_tune(filter);
	/* the ClientHello already read is the filter's first input */
	bufferevent_setwatermark(c->down, EV_READ, 0, 0);
	c->raw = c->down;
	c->down = filter;
	c->down_ssl = ssl;
	c->terminated = true;
	bufferevent_setcb(filter, NULL, NULL, on_down_handshake, c);
	bufferevent_enable(filter, EV_READ | EV_WRITE);
	bufferevent_enable(c->raw, EV_READ | EV_WRITE);
	if (evbuffer_get_length(bufferevent_get_input(c->raw)))
		bufferevent_trigger(c->raw, EV_READ, BEV_TRIG_IGNORE_WATERMARKS);
}

void conn_untls_down(struct conn *c)
{
	if (!c->raw)
		return;
	/* close_notify, so that a client reading to the end sees an end */
	SSL_shutdown(c->down_ssl);
	bufferevent_free(c->down);
	SSL_free(c->down_ssl);
	c->down_ssl = NULL;
	c->down = c->raw;
	c->raw = NULL;
}

struct bufferevent *conn_tls_upstream(struct conn *c, char *why, size_t whylen)
{
	struct corral_err err = { 0 };
	int version = c->down_ssl ? SSL_version(c->down_ssl) : 0;
	SSL *ssl = tls_ca_client(c->px->tls->ca, c->host, version, &err);
	struct bufferevent *bev;

	if (!ssl) {
		snprintf(why, whylen, "%s", err.msg);
		return NULL;
	}
	bev = bufferevent_openssl_socket_new(c->px->base, -1, ssl, BUFFEREVENT_SSL_CONNECTING,
					     BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	if (!bev) {
		SSL_free(ssl);
		snprintf(why, whylen, "out of memory for TLS to %s", c->host);
	}
	return bev;
}

bool conn_tls_upstream_error(struct conn *c, char *why, size_t whylen)
{
	SSL *ssl = c->up ? bufferevent_openssl_get_ssl(c->up) : NULL;
	unsigned long e = c->up ? bufferevent_get_openssl_error(c->up) : 0;
	char detail[CORRAL_ERR_MAX];

	ERR_clear_error();
	/* neither a TLS error nor a failed check: a socket error, said already */
	if (!e && (!ssl || SSL_get_verify_result(ssl) == X509_V_OK))
		return false;
	tls_error_text(ssl, e, detail, sizeof(detail));
	snprintf(why, whylen, "%s:%u: %s", c->host, c->port, detail);
	return true;
}
