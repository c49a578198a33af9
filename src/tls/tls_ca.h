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
/* plugin.c: the table corral looks up (TLS_PLUGIN_SYMBOL) */
extern const struct tls_ops corral_tls_ops;
/* Why an upstream handshake failed, one line. */
void tls_error_text(SSL *ssl, unsigned long e, char *buf, size_t len);

#endif
