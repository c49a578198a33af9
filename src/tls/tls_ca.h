/*
 * tls_ca.h - inside corral-tls.so: one sandbox's CA (ca.c) and the
 * OpenSSL objects of its connections, for the plugin's ops (plugin.c) and
 * tests/unit_tls.c.  Nothing in the corral binary includes it.
 */
#ifndef CORRAL_TLS_CA_H
#define CORRAL_TLS_CA_H

#include "tls_plugin.h"

#include <openssl/ssl.h>

struct tls_ca *tls_ca_new(const char *upstream_ca, char *why, size_t whylen);
void tls_ca_free(struct tls_ca *ca);
/* The CA's certificate, PEM (what goes inside). */
const char *tls_ca_pem(const struct tls_ca *ca);
/* Its private key, which only this process has (unit_tls checks a fork). */
EVP_PKEY *tls_ca_key(const struct tls_ca *ca);
/* A server-side SSL for host: a certificate minted for it (cached). */
SSL *tls_ca_server(struct tls_ca *ca, const char *host, char *why, size_t whylen);
/*
 * A client-side SSL to host, verifying its chain (system roots, plus the
 * policy's upstream_ca) and its name; never below min_version.
 */
SSL *tls_ca_client(struct tls_ca *ca, const char *host, int min_version,
		   char *why, size_t whylen);
/* OpenSSL's secure heap, made once and wiped in every fork: before a key is made or read. */
int tls_secure_heap(char *why, size_t whylen);
/* listener.c: the daemon's TCP listener */
struct tls_listener *tls_listener_new(const struct tls_listener_files *f,
				      char *why, size_t whylen);
struct bufferevent *tls_listener_bev(struct tls_listener *l, struct event_base *base);
bool tls_listener_end(struct bufferevent *bev);
void tls_listener_free(struct tls_listener *l);
/* plugin.c: the table corral looks up (TLS_PLUGIN_SYMBOL) */
extern const struct tls_ops corral_tls_ops;
/*
 * memory.c: whether OpenSSL's allocations are ours (set when the object
 * is loaded); tls_memory_forget() zeroes every live one, in a fork.
 */
bool tls_memory_wrapped(void);
void tls_memory_forget(void);
int tls_memory_unshared(void);
/* Why an upstream handshake failed, one line. */
void tls_error_text(SSL *ssl, unsigned long e, char *buf, size_t len);

#endif
