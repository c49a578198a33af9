/*
 * plugin.c - corral-tls.so's ops (tls_plugin.h): the OpenSSL half of
 * terminating a sandbox's TLS, over libevent's bufferevent_openssl.
 *
 * Towards the sandbox, a filter over the socket's bufferevent made without
 * BEV_OPT_CLOSE_ON_FREE, so that a connection closing can free it and
 * still flush what it had already encrypted into the socket's
 * bufferevent (terminate.c).  Towards the upstream, a socket bufferevent
 * that owns its SSL.  libevent itself is the one corral is linked with:
 * this object and libevent_openssl need libevent-2.1.so, which is already
 * loaded.
 */
#include "tls_ca.h"

#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <stdio.h>

static struct bufferevent *server(struct tls_ca *ca, struct event_base *base,
				  struct bufferevent *raw, const char *host,
				  struct tls_session **sess, char *why, size_t whylen)
{
	SSL *ssl = tls_ca_server(ca, host, why, whylen);
	struct bufferevent *filter;

	*sess = NULL;
	if (!ssl)
		return NULL;
	filter = bufferevent_openssl_filter_new(base, raw, ssl, BUFFEREVENT_SSL_ACCEPTING,
						BEV_OPT_DEFER_CALLBACKS);
	if (!filter) {
		SSL_free(ssl);
		snprintf(why, whylen, "out of memory for TLS towards the sandbox");
		return NULL;
	}
	*sess = (struct tls_session *)ssl;
	return filter;
}

static void server_close(struct bufferevent *filter, struct tls_session *sess,
			 bool notify)
{
	SSL *ssl = (SSL *)sess;

	if (notify && ssl)
		SSL_shutdown(ssl);
	if (filter)
		bufferevent_free(filter);
	SSL_free(ssl);
}

static struct bufferevent *client(struct tls_ca *ca, struct event_base *base,
				  const char *host, const struct tls_session *sess,
				  char *why, size_t whylen)
{
	int version = sess ? SSL_version((const SSL *)sess) : 0;
	SSL *ssl = tls_ca_client(ca, host, version, why, whylen);
	struct bufferevent *bev;

	if (!ssl)
		return NULL;
	bev = bufferevent_openssl_socket_new(base, -1, ssl, BUFFEREVENT_SSL_CONNECTING,
					     BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	if (!bev) {
		SSL_free(ssl);
		snprintf(why, whylen, "out of memory for TLS to %s", host);
	}
	return bev;
}

static bool client_error(struct bufferevent *bev, char *why, size_t whylen)
{
	SSL *ssl = bev ? bufferevent_openssl_get_ssl(bev) : NULL;
	unsigned long e = bev ? bufferevent_get_openssl_error(bev) : 0;

	ERR_clear_error();
	/* neither a TLS error nor a failed check: a socket error, said already */
	if (!e && (!ssl || SSL_get_verify_result(ssl) == X509_V_OK))
		return false;
	tls_error_text(ssl, e, why, whylen);
	return true;
}

/* the only symbol this object exports (-fvisibility=hidden elsewhere) */
__attribute__((visibility("default")))
const struct tls_ops corral_tls_ops = {
	.abi = TLS_PLUGIN_ABI,
	.ca_new = tls_ca_new,
	.ca_pem = tls_ca_pem,
	.ca_free = tls_ca_free,
	.server = server,
	.server_close = server_close,
	.client = client,
	.client_error = client_error,
	.listener_new = tls_listener_new,
	.listener_bev = tls_listener_bev,
	.listener_end = tls_listener_end,
	.listener_free = tls_listener_free,
	.forget = tls_memory_forget,
	.unshared = tls_memory_unshared,
};
