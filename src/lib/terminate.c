/*
 * terminate.c - TLS from the sandbox ends at the supervisor.
 *
 * For a host the policy terminates (httprules.c), once the ClientHello's
 * SNI was judged (proxy.c's conn_on_sni), the proxy answers the handshake
 * itself with a certificate minted for the name by the sandbox's own CA
 * (src/tls/ca.c), and reads what comes next as HTTP/1.1 requests: each
 * judged by method, path and size, its placeholders swapped or refused
 * (proxy.c).  To a host secrets go to, what comes back is read too
 * (proxy.c's mask_relay): each answer framed (httpresp.c), the values'
 * forms in it masked (secrets.c), since a server that echoes a request
 * would show the value swapped into it.
 * Upstream it is a client of its own, verifying the host's certificate and
 * name, never below the protocol version the sandbox negotiated.
 *
 * The TLS itself is corral-tls.so's (tls_plugin.h), through the sandbox's
 * tlsbox's ops: its filter over the sandbox's socket does not own the
 * socket's bufferevent, so that a connection closing can free the filter
 * and still flush what it had already encrypted into the socket.
 */
#include "proxy_int.h"

#include <errno.h>
#include <event2/buffer.h>
#include <stdio.h>
#include <string.h>

bool conn_should_terminate(struct conn *c)
{
	return c->px->tls && httprules_terminate(c->px->tls->rules, c->host, c->port);
}

bool conn_should_parse(struct conn *c)
{
	return c->px->tls && !conn_should_terminate(c) &&
	       httprules_narrowed(c->px->tls->rules, c->host, c->port);
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
	const struct tlsbox *t = c->px->tls;
	char why[CORRAL_ERR_MAX];
	struct bufferevent *filter;
	struct tls_session *sess;

	/* what this host answers may show a value swapped in: read on the way back */
	c->mask = secrets_mask_new(t->secrets, c->host, c->port);
	if (!c->mask && errno) {
		conn_deny(c, "out of memory for the masks of a secret's host");
		return;
	}
	if (c->mask)
		httpresp_init(&c->resp);
	filter = t->ops->server(t->ca, c->px->base, c->down, c->host, &sess, why,
				sizeof(why));
	if (!filter) {
		conn_deny(c, why);
		return;
	}
	conn_bev_tune(filter);
	/* the ClientHello already read is the filter's first input */
	bufferevent_setwatermark(c->down, EV_READ, 0, 0);
	c->raw = c->down;
	c->down = filter;
	c->down_tls = sess;
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
	c->px->tls->ops->server_close(c->down, c->down_tls, true);
	c->down_tls = NULL;
	c->down = c->raw;
	c->raw = NULL;
}

void conn_tls_free_down(struct conn *c)
{
	c->px->tls->ops->server_close(c->down, c->down_tls, false);
	c->down_tls = NULL;
	c->down = NULL;
}

struct bufferevent *conn_tls_upstream(struct conn *c, char *why, size_t whylen)
{
	const struct tlsbox *t = c->px->tls;

	return t->ops->client(t->ca, c->px->base, c->host, c->down_tls, why, whylen);
}

bool conn_tls_upstream_error(struct conn *c, char *why, size_t whylen)
{
	char detail[CORRAL_ERR_MAX];

	if (!c->up || !c->px->tls->ops->client_error(c->up, detail, sizeof(detail)))
		return false;
	snprintf(why, whylen, "%s:%u: %s", c->host, c->port, detail);
	return true;
}
