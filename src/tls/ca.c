/*
 * ca.c - in corral-tls.so (tls_plugin.h): a certificate authority made for
 * one sandbox, and the TLS contexts of its terminated connections.
 *
 * The CA is an EC P-256 key and a self-signed certificate, made when the
 * sandbox is made and gone with it: the key is only ever in this process's
 * memory, the certificate goes inside (mount.c, env.c).  A certificate for
 * each name the sandbox reaches through termination is minted on demand,
 * all with one leaf key, and kept for the sandbox's life.
 *
 * Upstream, the supervisor is an ordinary verifying client: the host's
 * roots (plus network.tls_upstream_ca, for a private CA), the name checked,
 * TLS 1.2 at least and never less than the sandbox itself negotiated.
 *
 * Every sandbox's init is a fork of this process (of the daemon, with
 * every other sandbox's CA): the private keys live in OpenSSL's secure
 * heap, and that heap is marked MADV_WIPEONFORK, so that a fork finds
 * zeros where they are (src/lib/vault.c says the rest).
 */
#include "tls_ca.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MINT_CACHE_MAX		512	/* names, then the oldest is minted anew */
/* a P-256 key's scalar takes 32 bytes of it: some 30,000 sandboxes' CAs */
#define SECURE_HEAP		(1 << 20)
#define CA_DAYS			365
#define LEAF_DAYS		30

struct minted {
	char host[256];
	X509 *cert;
};

struct tls_ca {
	EVP_PKEY *key;		/* the CA's: never written anywhere */
	X509 *cert;
	EVP_PKEY *leaf_key;
	char *pem;
	SSL_CTX *server;	/* towards the sandbox */
	SSL_CTX *client;	/* towards the upstream */
	struct minted cache[MINT_CACHE_MAX];
	size_t ncache, next;	/* next: the slot a full cache reuses */
};

/* "[name: ]what: OpenSSL's first reason": -EPROTO */
static int ssl_fail_at(char *why, size_t whylen, const char *name, const char *what)
{
	char buf[160];
	unsigned long e = ERR_get_error();

	ERR_error_string_n(e, buf, sizeof(buf));
	ERR_clear_error();
	snprintf(why, whylen, "%.255s%s%s: %s", name ? name : "", name ? ": " : "", what,
		 e ? buf : "failed");
	return -EPROTO;
}

static int ssl_fail(char *why, size_t whylen, const char *what)
{
	return ssl_fail_at(why, whylen, NULL, what);
}

/* The mapping of /proc/self/maps that holds addr: 0, or -errno. */
static int mapping_of(const void *addr, unsigned long *start, unsigned long *end)
{
	unsigned long a = (unsigned long)addr;
	char line[512];
	FILE *f = fopen("/proc/self/maps", "re");
	int r = -ENOENT;

	if (!f)
		return -errno;
	while (r == -ENOENT && fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx", start, end) == 2 && a >= *start && a < *end)
			r = 0;
	fclose(f);
	return r;
}

/*
 * OpenSSL's secure heap, once, wiped in every fork.  OpenSSL keeps a
 * private key's scalar there (BN_secure_new) once the heap exists; the
 * heap is one mapping, found by where a block of it lies.
 */
int tls_secure_heap(char *why, size_t whylen)
{
	static bool done;
	unsigned long start, end;
	void *probe;
	int r;

	if (done)
		return 0;
	if (!CRYPTO_secure_malloc_initialized() &&
	    CRYPTO_secure_malloc_init(SECURE_HEAP, 32) == 0)
		return ssl_fail(why, whylen, "cannot make OpenSSL's secure heap for private keys");
	probe = OPENSSL_secure_malloc(1);
	if (!probe || !CRYPTO_secure_allocated(probe)) {
		OPENSSL_secure_free(probe);
		return ssl_fail(why, whylen, "OpenSSL's secure heap gives no memory for private keys");
	}
	r = mapping_of(probe, &start, &end);
	OPENSSL_secure_free(probe);
	if (r < 0 || madvise((void *)start, end - start, MADV_WIPEONFORK) < 0) {
		snprintf(why, whylen, "cannot keep private keys out of forks "
			 "(MADV_WIPEONFORK on OpenSSL's secure heap): %s",
			 strerror(r < 0 ? -r : errno));
		return -EPROTO;
	}
	done = true;
	return 0;
}

static EVP_PKEY *ec_key(void)
{
	return EVP_EC_gen("P-256");
}

/* A random positive serial: two certificates never share one. */
static int set_serial(X509 *x)
{
	unsigned char b[16];
	BIGNUM *bn;
	int ok;

	if (RAND_bytes(b, sizeof(b)) != 1)
		return 0;
	b[0] &= 0x7f;
	bn = BN_bin2bn(b, sizeof(b), NULL);
	ok = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) != NULL;
	BN_free(bn);
	return ok;
}

static int add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX ctx;
	X509_EXTENSION *ext;
	int ok;

	X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
	ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	if (!ext)
		return 0;
	ok = X509_add_ext(x, ext, -1);
	X509_EXTENSION_free(ext);
	return ok;
}

/* The common part: version 3, serial, validity from an hour ago. */
static X509 *cert_start(EVP_PKEY *pub, const char *cn, int days)
{
	X509 *x = X509_new();
	X509_NAME *name;

	if (!x || !X509_set_version(x, 2) || !set_serial(x) ||
	    !X509_gmtime_adj(X509_getm_notBefore(x), -3600) ||
	    !X509_gmtime_adj(X509_getm_notAfter(x), (long)days * 86400) ||
	    !X509_set_pubkey(x, pub))
		goto fail;
	name = X509_get_subject_name(x);
	if (!X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
					(const unsigned char *)"corral", -1, -1, 0) ||
	    !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
					(const unsigned char *)cn, -1, -1, 0))
		goto fail;
	return x;
fail:
	X509_free(x);
	return NULL;
}

static int make_ca(struct tls_ca *ca, char *why, size_t whylen)
{
	unsigned char id[6];
	char cn[64];
	BIO *bio;
	char *data;
	long n;

	ca->key = ec_key();
	ca->leaf_key = ec_key();
	if (!ca->key || !ca->leaf_key || RAND_bytes(id, sizeof(id)) != 1)
		return ssl_fail(why, whylen, "cannot make the sandbox's CA keys");
	snprintf(cn, sizeof(cn), "corral sandbox CA %02x%02x%02x%02x%02x%02x",
		 id[0], id[1], id[2], id[3], id[4], id[5]);
	ca->cert = cert_start(ca->key, cn, CA_DAYS);
	if (!ca->cert ||
	    !X509_set_issuer_name(ca->cert, X509_get_subject_name(ca->cert)) ||
	    !add_ext(ca->cert, ca->cert, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
	    !add_ext(ca->cert, ca->cert, NID_key_usage, "critical,keyCertSign,cRLSign") ||
	    !add_ext(ca->cert, ca->cert, NID_subject_key_identifier, "hash") ||
	    !X509_sign(ca->cert, ca->key, EVP_sha256()))
		return ssl_fail(why, whylen, "cannot make the sandbox's CA certificate");
	bio = BIO_new(BIO_s_mem());
	if (!bio || !PEM_write_bio_X509(bio, ca->cert)) {
		BIO_free(bio);
		return ssl_fail(why, whylen, "cannot write the sandbox's CA certificate");
	}
	n = BIO_get_mem_data(bio, &data);
	ca->pem = strndup(data, n);
	BIO_free(bio);
	if (!ca->pem) {
		snprintf(why, whylen, "out of memory for the CA certificate");
		return -ENOMEM;
	}
	return 0;
}

static X509 *mint(struct tls_ca *ca, const char *host)
{
	unsigned char ip[16];
	char san[300];
	bool is_ip = inet_pton(AF_INET, host, ip) == 1 || inet_pton(AF_INET6, host, ip) == 1;
	X509 *x = cert_start(ca->leaf_key, host, LEAF_DAYS);

	snprintf(san, sizeof(san), "%s:%s", is_ip ? "IP" : "DNS", host);
	if (!x || !X509_set_issuer_name(x, X509_get_subject_name(ca->cert)) ||
	    !add_ext(x, ca->cert, NID_basic_constraints, "critical,CA:FALSE") ||
	    !add_ext(x, ca->cert, NID_key_usage, "critical,digitalSignature") ||
	    !add_ext(x, ca->cert, NID_ext_key_usage, "serverAuth") ||
	    !add_ext(x, ca->cert, NID_subject_alt_name, san) ||
	    !add_ext(x, ca->cert, NID_authority_key_identifier, "keyid:always") ||
	    !X509_sign(x, ca->key, EVP_sha256())) {
		X509_free(x);
		return NULL;
	}
	return x;
}

static X509 *minted_for(struct tls_ca *ca, const char *host)
{
	struct minted *m;
	X509 *x;

	for (size_t i = 0; i < ca->ncache; i++)
		if (!strcmp(ca->cache[i].host, host))
			return ca->cache[i].cert;
	x = mint(ca, host);
	if (!x)
		return NULL;
	if (ca->ncache < MINT_CACHE_MAX) {
		m = &ca->cache[ca->ncache++];
	} else {
		m = &ca->cache[ca->next];
		ca->next = (ca->next + 1) % MINT_CACHE_MAX;
		X509_free(m->cert);
	}
	snprintf(m->host, sizeof(m->host), "%s", host);
	m->cert = x;
	return x;
}

static int make_contexts(struct tls_ca *ca, const char *upstream_ca,
			 char *why, size_t whylen)
{
	ca->server = SSL_CTX_new(TLS_server_method());
	ca->client = SSL_CTX_new(TLS_client_method());
	if (!ca->server || !ca->client)
		return ssl_fail(why, whylen, "cannot make the TLS contexts");
	SSL_CTX_set_min_proto_version(ca->server, TLS1_2_VERSION);
	SSL_CTX_set_min_proto_version(ca->client, TLS1_2_VERSION);
	/* the relay is HTTP/1.1: no ALPN offered, h2 never chosen */
	SSL_CTX_set_verify(ca->client, SSL_VERIFY_PEER, NULL);
	if (SSL_CTX_set_default_verify_paths(ca->client) != 1)
		return ssl_fail(why, whylen, "cannot load the host's trusted roots");
	if (upstream_ca &&
	    SSL_CTX_load_verify_locations(ca->client, upstream_ca, NULL) != 1)
		return ssl_fail_at(why, whylen, upstream_ca,
				   "cannot load network.tls_upstream_ca");
	return 0;
}

struct tls_ca *tls_ca_new(const char *upstream_ca, char *why, size_t whylen)
{
	struct tls_ca *ca = calloc(1, sizeof(*ca));

	if (!ca) {
		snprintf(why, whylen, "out of memory for the sandbox's CA");
		return NULL;
	}
	/* else a fork of this process would hold every connection's secrets */
	if (!tls_memory_wrapped()) {
		snprintf(why, whylen, "OpenSSL allocated memory before corral-tls.so could "
			 "take its allocator (CRYPTO_set_mem_functions): its connections' "
			 "secrets could not be kept out of forks");
		free(ca);
		return NULL;
	}
	if (tls_secure_heap(why, whylen) < 0) {
		free(ca);
		return NULL;
	}
	if (make_ca(ca, why, whylen) < 0 || make_contexts(ca, upstream_ca, why, whylen) < 0) {
		tls_ca_free(ca);
		return NULL;
	}
	return ca;
}

void tls_ca_free(struct tls_ca *ca)
{
	if (!ca)
		return;
	for (size_t i = 0; i < ca->ncache; i++)
		X509_free(ca->cache[i].cert);
	SSL_CTX_free(ca->server);
	SSL_CTX_free(ca->client);
	EVP_PKEY_free(ca->key);
	EVP_PKEY_free(ca->leaf_key);
	X509_free(ca->cert);
	free(ca->pem);
	free(ca);
}

const char *tls_ca_pem(const struct tls_ca *ca)
{
	return ca->pem;
}

EVP_PKEY *tls_ca_key(const struct tls_ca *ca)
{
	return ca->key;
}

SSL *tls_ca_server(struct tls_ca *ca, const char *host, char *why, size_t whylen)
{
	X509 *leaf = minted_for(ca, host);
	SSL *ssl;

	if (!leaf) {
		ssl_fail_at(why, whylen, host, "cannot mint a certificate");
		return NULL;
	}
	ssl = SSL_new(ca->server);
	if (!ssl || SSL_use_certificate(ssl, leaf) != 1 ||
	    SSL_use_PrivateKey(ssl, ca->leaf_key) != 1 ||
	    SSL_add1_chain_cert(ssl, ca->cert) != 1) {
		SSL_free(ssl);
		ssl_fail(why, whylen, "cannot set up TLS towards the sandbox");
		return NULL;
	}
	return ssl;
}

SSL *tls_ca_client(struct tls_ca *ca, const char *host, int min_version,
		   char *why, size_t whylen)
{
	unsigned char ip[16];
	bool is_ip = inet_pton(AF_INET, host, ip) == 1 || inet_pton(AF_INET6, host, ip) == 1;
	SSL *ssl = SSL_new(ca->client);

	if (!ssl)
		goto fail;
	if (min_version > TLS1_2_VERSION &&
	    SSL_set_min_proto_version(ssl, min_version) != 1)
		goto fail;
	if (is_ip) {
		if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host) != 1)
			goto fail;
	} else if (SSL_set_tlsext_host_name(ssl, host) != 1 ||
		   SSL_set1_host(ssl, host) != 1) {
		goto fail;
	}
	return ssl;
fail:
	SSL_free(ssl);
	ssl_fail(why, whylen, "cannot set up TLS towards the upstream");
	return NULL;
}

void tls_error_text(SSL *ssl, unsigned long e, char *buf, size_t len)
{
	long v = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;

	if (v != X509_V_OK) {
		snprintf(buf, len, "the upstream's certificate did not verify: %s",
			 X509_verify_cert_error_string(v));
		return;
	}
	if (e) {
		char s[160];

		ERR_error_string_n(e, s, sizeof(s));
		snprintf(buf, len, "TLS with the upstream failed: %s", s);
		return;
	}
	snprintf(buf, len, "TLS with the upstream failed");
}

