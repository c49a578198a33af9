/*
 * listener.c - TLS on `corral serve --listen`: one server context, made
 * from the operator's certificate chain and key, and a bufferevent for
 * each connection, whose input the daemon's gate (api_gate.c) judges as
 * it does a plain socket's: it is what the client sent, decrypted.
 *
 * Over TCP the daemon is reached by remote parties, and the bearer token
 * rides in every request: in clear, whoever sees the traffic has the
 * daemon.  The key's secret is read into OpenSSL's secure heap, which is
 * wiped in every fork (a sandbox's init is one).  No session is resumed:
 * a ticket key or a session cache would be secrets in the ordinary heap
 * that forks keep, and a client of this API makes few connections.
 */
#include "tls_ca.h"

#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

struct tls_listener {
	SSL_CTX *ctx;
};

/* "FILE: what: OpenSSL's first reason" */
static struct tls_listener *fail(struct tls_listener *l, char *why, size_t whylen,
				 const char *file, const char *what)
{
	char buf[160];
	unsigned long e = ERR_peek_last_error();

	ERR_error_string_n(e, buf, sizeof(buf));
	ERR_clear_error();
	snprintf(why, whylen, "%.255s: %s%s%s", file, what, e ? ": " : "", e ? buf : "");
	tls_listener_free(l);
	return NULL;
}

static int no_passphrase(char *buf, int size, int rwflag, void *arg)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	(void)arg;
	return 0;
}

struct tls_listener *tls_listener_new(const char *cert_file, const char *key_file,
				      char *why, size_t whylen)
{
	struct tls_listener *l = calloc(1, sizeof(*l));
	EVP_PKEY *key;
	BIO *bio;
	bool r;

	if (!l) {
		snprintf(why, whylen, "out of memory for the TLS listener");
		return NULL;
	}
	/* before the key is read: its secret goes where no fork finds it */
	if (tls_secure_heap(why, whylen) < 0) {
		tls_listener_free(l);
		return NULL;
	}
	l->ctx = SSL_CTX_new(TLS_server_method());
	if (!l->ctx || !SSL_CTX_set_min_proto_version(l->ctx, TLS1_2_VERSION))
		return fail(l, why, whylen, cert_file, "cannot make a TLS server context");
	SSL_CTX_set_options(l->ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_TICKET |
			    SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE);
	SSL_CTX_set_session_cache_mode(l->ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_num_tickets(l->ctx, 0);
	if (SSL_CTX_use_certificate_chain_file(l->ctx, cert_file) != 1)
		return fail(l, why, whylen, cert_file, "not a PEM certificate (chain)");
	bio = BIO_new_file(key_file, "r");
	/* no passphrase: a daemon has no one to ask (OpenSSL's default asks the tty) */
	key = bio ? PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, NULL) : NULL;
	BIO_free(bio);
	if (!key)
		return fail(l, why, whylen, key_file,
			    "not a PEM private key (one without a passphrase)");
	r = SSL_CTX_use_PrivateKey(l->ctx, key) == 1 && SSL_CTX_check_private_key(l->ctx) == 1;
	EVP_PKEY_free(key);
	if (!r)
		return fail(l, why, whylen, key_file, "not the key of the certificate");
	return l;
}

struct bufferevent *tls_listener_bev(struct tls_listener *l, struct event_base *base)
{
	SSL *ssl = SSL_new(l->ctx);
	struct bufferevent *bev;

	if (!ssl)
		return NULL;
	/* it owns the SSL and, once evhttp sets it, the socket */
	bev = bufferevent_openssl_socket_new(base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING,
					     BEV_OPT_CLOSE_ON_FREE);
	if (!bev) {
		SSL_free(ssl);
		return NULL;
	}
	/* a client that hangs up without close_notify has still been answered */
	bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	return bev;
}

void tls_listener_free(struct tls_listener *l)
{
	if (!l)
		return;
	SSL_CTX_free(l->ctx);
	free(l);
}
