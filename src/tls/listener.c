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
 *
 * A listener is made whole and never changed: SIGHUP makes a new one from
 * the same files (tls_server.c), each connection's SSL holds a reference
 * to the context it began with, and the old key leaves the secure heap,
 * zeroed, with the last of them.
 */
#include "tls_ca.h"

#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
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

/* A BIO on a caller's fd: unbuffered, so no stdio buffer keeps the key's text */
static BIO *fd_bio(int fd)
{
	return BIO_new_fd(fd, BIO_NOCLOSE);
}

/*
 * The same, read through a buffer, for certificates (public): PEM is read
 * a line at a time, and a bare fd BIO reads a line a byte at a time, one
 * read(2) each.  A chain of 512 certificates (296 KB) was 296,000 reads,
 * 0.45 s; it scaled with the file (linear, 0.87 ms a certificate), but
 * was the daemon's whole start.  BIO_free_all() it.
 */
static BIO *fd_bio_buffered(int fd)
{
	BIO *raw = fd_bio(fd), *buf = raw ? BIO_new(BIO_f_buffer()) : NULL;

	if (!buf || BIO_set_read_buffer_size(buf, 65536) != 1) {
		BIO_free(buf);
		BIO_free(raw);
		return NULL;
	}
	return BIO_push(buf, raw);
}

/* SSL_CTX_use_certificate_chain_file's work, from the fd: the leaf, then its chain */
static bool use_chain(SSL_CTX *ctx, int fd)
{
	BIO *bio = fd_bio_buffered(fd);
	X509 *x = bio ? PEM_read_bio_X509_AUX(bio, NULL, no_passphrase, NULL) : NULL;
	bool ok = x && SSL_CTX_use_certificate(ctx, x) == 1;
	unsigned long e;

	X509_free(x);
	while (ok && (x = PEM_read_bio_X509(bio, NULL, no_passphrase, NULL))) {
		ok = SSL_CTX_add0_chain_cert(ctx, x) == 1;
		if (!ok)
			X509_free(x);
	}
	BIO_free_all(bio);
	/* the loop ends at the file's end: anything else is a broken chain */
	e = ERR_peek_last_error();
	if (ok && ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE)
		ERR_clear_error();
	else if (ok && e)
		ok = false;
	return ok;
}

static EVP_PKEY *read_key(int fd)
{
	BIO *bio = fd_bio(fd);
	EVP_PKEY *key;

	/* no passphrase: a daemon has no one to ask (OpenSSL's default asks the tty) */
	key = bio ? PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, NULL) : NULL;
	BIO_free(bio);
	return key;
}

/* Whether x is one of the store's own: the --tls-client-ca file's. */
static bool in_store(X509_STORE *store, X509 *x)
{
	STACK_OF(X509_OBJECT) *objs = X509_STORE_get0_objects(store);

	for (int i = 0; i < sk_X509_OBJECT_num(objs); i++) {
		X509 *c = X509_OBJECT_get0_X509(sk_X509_OBJECT_value(objs, i));

		if (c && !X509_cmp(c, x))
			return true;
	}
	return false;
}

/*
 * OpenSSL's checks, and two more on the client's own certificate, once
 * its chain verified: it is no CA's (CA:TRUE, keyCertSign, or a v1 root:
 * a CA's key mints certificates, it is no one client's), and one of the
 * --tls-client-ca certificates signed it, not a CA that one of them
 * certified.  OpenSSL takes both: whoever held a CA:TRUE certificate the
 * client CA issued by mistake could mint clients without end.  A chain of
 * one is a self-signed certificate the file itself lists: the operator
 * pinned that very client (`openssl req -x509` makes it CA:TRUE).
 */
static int verify_client(int ok, X509_STORE_CTX *x)
{
	STACK_OF(X509) *chain = X509_STORE_CTX_get0_chain(x);

	if (!ok || X509_STORE_CTX_get_error_depth(x) != 0 || !chain ||
	    sk_X509_num(chain) == 1)
		return ok;
	if (X509_check_ca(sk_X509_value(chain, 0)) != 0) {
		X509_STORE_CTX_set_error(x, X509_V_ERR_INVALID_PURPOSE);
		return 0;
	}
	if (!in_store(X509_STORE_CTX_get0_store(x), sk_X509_value(chain, 1))) {
		X509_STORE_CTX_set_error(x, X509_V_ERR_CERT_UNTRUSTED);
		return 0;
	}
	return ok;
}

/*
 * Only what the client CA signed is trusted (a server context starts with
 * an empty store: not the system's roots), and its names are sent in the
 * certificate request.  OpenSSL checks the chain's dates and, for a leaf
 * with an extended key usage, that it allows clientAuth; verify_client()
 * the rest.
 */
static bool use_client_ca(SSL_CTX *ctx, int fd)
{
	X509_STORE *store = SSL_CTX_get_cert_store(ctx);
	STACK_OF(X509_INFO) *info;
	BIO *bio = fd_bio_buffered(fd);
	int n = 0;
	bool ok = true;

	info = bio ? PEM_X509_INFO_read_bio(bio, NULL, no_passphrase, NULL) : NULL;
	BIO_free_all(bio);
	for (int i = 0; info && ok && i < sk_X509_INFO_num(info); i++) {
		X509 *x = sk_X509_INFO_value(info, i)->x509;

		if (!x)
			continue;
		ok = X509_STORE_add_cert(store, x) == 1 && SSL_CTX_add_client_CA(ctx, x) == 1;
		n++;
	}
	sk_X509_INFO_pop_free(info, X509_INFO_free);
	if (!ok || !n)
		return false;
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, verify_client);
	return true;
}

static int client_hello(SSL *ssl, int *alert, void *arg)
{
	const struct tls_hello_check *h = arg;

	if (!h->fn || h->fn(SSL_get_fd(ssl), h->arg))
		return SSL_CLIENT_HELLO_SUCCESS;
	*alert = SSL_AD_HANDSHAKE_FAILURE;
	return SSL_CLIENT_HELLO_ERROR;
}

struct tls_listener *tls_listener_new(const struct tls_listener_files *f,
				      char *why, size_t whylen)
{
	struct tls_listener *l = calloc(1, sizeof(*l));
	EVP_PKEY *key;
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
		return fail(l, why, whylen, f->cert_file, "cannot make a TLS server context");
	SSL_CTX_set_options(l->ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_TICKET |
			    SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE);
	SSL_CTX_set_session_cache_mode(l->ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_num_tickets(l->ctx, 0);
	if (!use_chain(l->ctx, f->cert_fd))
		return fail(l, why, whylen, f->cert_file, "not a PEM certificate (chain)");
	key = read_key(f->key_fd);
	if (!key)
		return fail(l, why, whylen, f->key_file,
			    "not a PEM private key (one without a passphrase)");
	r = SSL_CTX_use_PrivateKey(l->ctx, key) == 1 && SSL_CTX_check_private_key(l->ctx) == 1;
	EVP_PKEY_free(key);
	if (!r)
		return fail(l, why, whylen, f->key_file, "not the key of the certificate");
	if (f->client_ca_file && !use_client_ca(l->ctx, f->client_ca_fd))
		return fail(l, why, whylen, f->client_ca_file, "no PEM CA certificate in it");
	if (f->hello)
		SSL_CTX_set_client_hello_cb(l->ctx, client_hello, (void *)f->hello);
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

/*
 * libevent never sends a close_notify: a connection's end was a bare FIN,
 * which a strict client (Python's ssl without suppress_ragged_eofs,
 * OpenSSL 3 without SSL_OP_IGNORE_UNEXPECTED_EOF) reads as an error, or
 * as a truncation attack, after an upgraded stream whose end is its
 * close (an archive's answer, exec -t's last frame).  Written straight
 * to the socket: the bufferevent's output is empty by then.  The client
 * may still send; SSL_read goes on taking it.
 */
bool tls_listener_end(struct bufferevent *bev)
{
	SSL *ssl = bufferevent_openssl_get_ssl(bev);

	if (!ssl)
		return false;
	/*
	 * Once: the gate ends every connection so as evhttp frees it, also
	 * one whose upgraded stream sent its close_notify already (and shut
	 * its socket since: a second one would be written after the FIN).
	 * Before the handshake is done there is nothing to end (OpenSSL
	 * refuses: "shutdown while in init").
	 */
	if ((SSL_get_shutdown(ssl) & SSL_SENT_SHUTDOWN) || !SSL_is_init_finished(ssl))
		return true;
	if (SSL_shutdown(ssl) < 0)
		ERR_clear_error();	/* its socket full or gone: the FIN ends it */
	return true;
}

void tls_listener_free(struct tls_listener *l)
{
	if (!l)
		return;
	SSL_CTX_free(l->ctx);
	free(l);
}
