/*
 * unit_tls.c - the policy's TLS part (tls_policy.c), placeholders swapped
 * or refused (secrets.c), methods, paths and caps (httprules.c), and the
 * sandbox's CA and its minted certificates (tls.c).
 */
#include "tls.h"
#include "unit.h"

#include <errno.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <string.h>

#define SECRET "real-secret-value"

static const char policy_text[] =
	"{\"network\": {\"mode\": \"proxy\", \"allow\": [\"api.test\", "
	"{\"host\": \"gh.test\", \"methods\": [\"GET\"], \"paths\": [\"/repos/acme/*\", \"/meta\"]}, "
	"{\"host\": \"up.test\", \"max_body\": 10}], \"max_url\": 64, \"max_headers\": \"1k\"}, "
	"\"secrets\": [{\"name\": \"API_KEY\", \"from_env\": \"UNIT_TLS_SECRET\", "
	"\"hosts\": [\"api.test\"], \"header\": \"Authorization\"}, "
	"{\"name\": \"Q\", \"from_env\": \"UNIT_TLS_SECRET\", \"hosts\": [\"api.test\"], "
	"\"query\": \"key\"}]}";

static int load(struct corral_policy *p, const char *text, struct corral_err *err)
{
	corral_policy_init(p);
	return corral_policy_load_string(p, text, strlen(text), "unit", err);
}

static struct secrets *secrets_for_test(struct corral_policy *p)
{
	struct corral_err err = { 0 };

	setenv("UNIT_TLS_SECRET", SECRET, 1);
	CHECK(load(p, policy_text, &err) == 0);
	return secrets_new(p, &err);
}

/* Rewrite head (with PH standing for secret i's placeholder). */
static int rewrite(struct secrets *s, const char *tmpl, const char *host, bool swap,
		   char **out, char *why, size_t whylen)
{
	char head[1024], *ph;
	size_t len;

	snprintf(head, sizeof(head), "%s", tmpl);
	while ((ph = strstr(head, "PH"))) {
		char rest[1024];

		snprintf(rest, sizeof(rest), "%s", ph + 2);
		snprintf(ph, sizeof(head) - (ph - head), "%s%s", secrets_placeholder(s, 0), rest);
	}
	return secrets_rewrite_head(s, head, strlen(head), host, 443, swap, out, &len, why,
				    whylen);
}

TEST(policy_loads_and_is_active)
{
	struct corral_policy p, q;
	struct corral_err err = { 0 };

	setenv("UNIT_TLS_SECRET", SECRET, 1);
	CHECK(load(&p, policy_text, &err) == 0);
	CHECK(tls_policy_active(&p));
	CHECK(p.nnet_allow == 3);
	/* a load on top copies the TLS part whole */
	corral_policy_init(&q);
	{
		const char *more = "{\"network\": {\"tls\": \"terminate\"}}";

		CHECK(corral_policy_load_string(&p, more, strlen(more), "more", &err) == 0);
	}
	CHECK(json_is_true(json_object_get(p.net_tls->net, "terminate")));
	CHECK(json_array_size(p.net_tls->secrets) == 2);
	corral_policy_free(&p);
	corral_policy_free(&q);
}

TEST(policy_errors_say_where)
{
	struct corral_policy p;
	struct corral_err err = { 0 };

	CHECK(load(&p, "{\"network\": {\"tls\": \"sometimes\"}}", &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "network.tls");
	corral_policy_free(&p);
	CHECK(load(&p, "{\"network\": {\"allow\": [{\"host\": \"a.test\", \"methods\": [\"get\"]}]}}",
		   &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "network.allow[0].methods[0]");
	corral_policy_free(&p);
	CHECK(load(&p, "{\"network\": {\"allow\": [{\"host\": \"*\"}]}}", &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "network.allow[0].host");
	corral_policy_free(&p);
	CHECK(load(&p, "{\"secrets\": [{\"name\": \"K\", \"from_env\": \"A\", \"from_file\": \"/b\", "
		   "\"hosts\": [\"a.test\"], \"header\": \"X\"}]}", &err) < 0);
	CHECK_STR_CONTAINS(err.msg, "one of \"from_env\" and \"from_file\"");
	corral_policy_free(&p);
	CHECK(load(&p, "{\"network\": {\"mode\": \"proxy\"}}", &err) == 0);
	CHECK(!tls_policy_active(&p));
	corral_policy_free(&p);
}

TEST(placeholder_swapped_in_its_header_only)
{
	struct corral_policy p;
	struct secrets *s = secrets_for_test(&p);
	char why[256], *out = NULL;

	CHECK(s && secrets_count(s) == 2);
	CHECK(strncmp(secrets_placeholder(s, 0), "corral-ph-", 10) == 0);
	CHECK(strcmp(secrets_placeholder(s, 0), secrets_placeholder(s, 1)) != 0);
	CHECK(rewrite(s, "GET / HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer PH\r\n\r\n",
		      "api.test", true, &out, why, sizeof(why)) == 0);
	CHECK_STR_CONTAINS(out, "Authorization: Bearer " SECRET "\r\n");
	CHECK(!strstr(out, "corral-ph-"));
	free(out);
	/* another header, another host, not terminated, the URL: refused */
	CHECK(rewrite(s, "GET / HTTP/1.1\r\nX-Key: PH\r\n\r\n", "api.test", true, &out, why,
		      sizeof(why)) == -EACCES);
	CHECK_STR_CONTAINS(why, "secret API_KEY in a header");
	CHECK(!strstr(why, SECRET));
	CHECK(rewrite(s, "GET / HTTP/1.1\r\nAuthorization: PH\r\n\r\n", "other.test", true, &out,
		      why, sizeof(why)) == -EACCES);
	CHECK(rewrite(s, "GET / HTTP/1.1\r\nAuthorization: PH\r\n\r\n", "api.test", false, &out,
		      why, sizeof(why)) == -EACCES);
	CHECK(rewrite(s, "GET /PH HTTP/1.1\r\n\r\n", "api.test", true, &out, why,
		      sizeof(why)) == -EACCES);
	CHECK_STR_CONTAINS(why, "in the URL");
	CHECK(rewrite(s, "GET / HTTP/1.1\r\nPH: x\r\n\r\n", "api.test", true, &out, why,
		      sizeof(why)) == -EACCES);
	CHECK(out == NULL);
	secrets_free(s);
	corral_policy_free(&p);
}

TEST(placeholder_in_query_and_basic_auth)
{
	struct corral_policy p;
	struct secrets *s = secrets_for_test(&p);
	char why[256], head[512], *out = NULL;
	size_t len;

	/* secret 1 (Q) may be the value of "key" */
	snprintf(head, sizeof(head), "GET /x?a=1&key=%s&b=2 HTTP/1.1\r\n\r\n",
		 secrets_placeholder(s, 1));
	CHECK(secrets_rewrite_head(s, head, strlen(head), "api.test", 443, true, &out, &len,
				   why, sizeof(why)) == 0);
	CHECK_STR_CONTAINS(out, "GET /x?a=1&key=" SECRET "&b=2 HTTP/1.1");
	free(out);
	snprintf(head, sizeof(head), "GET /x?xkey=%s HTTP/1.1\r\n\r\n", secrets_placeholder(s, 1));
	CHECK(secrets_rewrite_head(s, head, strlen(head), "api.test", 443, true, &out, &len,
				   why, sizeof(why)) == -EACCES);
	/* "agent:PH" base64-encoded in Basic credentials */
	{
		char plain[128], b64[256];
		int n;

		snprintf(plain, sizeof(plain), "agent:%s", secrets_placeholder(s, 0));
		n = EVP_EncodeBlock((unsigned char *)b64, (unsigned char *)plain, strlen(plain));
		b64[n] = 0;
		snprintf(head, sizeof(head), "GET / HTTP/1.1\r\nAuthorization: Basic %s\r\n\r\n", b64);
		CHECK(secrets_rewrite_head(s, head, strlen(head), "api.test", 443, true, &out,
					   &len, why, sizeof(why)) == 0);
		n = EVP_EncodeBlock((unsigned char *)b64, (unsigned char *)"agent:" SECRET,
				    strlen("agent:" SECRET));
		b64[n] = 0;
		CHECK_STR_CONTAINS(out, b64);
		free(out);
		CHECK(secrets_rewrite_head(s, head, strlen(head), "other.test", 443, true, &out,
					   &len, why, sizeof(why)) == -EACCES);
	}
	secrets_free(s);
	corral_policy_free(&p);
}

TEST(placeholder_in_a_body_across_reads)
{
	struct corral_policy p;
	struct secrets *s = secrets_for_test(&p);
	struct secrets_scan st = { 0 };
	const char *ph = secrets_placeholder(s, 0);
	char why[256];
	size_t half = strlen(ph) / 2;

	CHECK(secrets_scan(s, &st, "harmless bytes", 14, why, sizeof(why)) == 0);
	CHECK(secrets_scan(s, &st, ph, half, why, sizeof(why)) == 0);
	CHECK(secrets_scan(s, &st, ph + half, strlen(ph) - half, why, sizeof(why)) == -EACCES);
	CHECK_STR_CONTAINS(why, "secret API_KEY in a request body");
	secrets_free(s);
	corral_policy_free(&p);
}

static int check_req(struct httprules *r, const char *host, const char *req, char *why)
{
	struct httpreq_conn c;
	size_t used;
	int st;

	httpreq_init(&c);
	st = httpreq_feed(&c, (const uint8_t *)req, strlen(req), &used);
	CHECK(st == HTTPREQ_HEAD);
	st = st == HTTPREQ_HEAD ? httprules_check(r, host, 443, &c.req, why, 256) : -1;
	httpreq_free(&c);
	return st;
}

TEST(methods_paths_and_caps)
{
	struct corral_policy p;
	struct corral_err err = { 0 };
	struct httprules *r;
	char why[256];

	setenv("UNIT_TLS_SECRET", SECRET, 1);
	CHECK(load(&p, policy_text, &err) == 0);
	r = httprules_new(&p, &err);
	CHECK(r != NULL);
	CHECK(httprules_terminate(r, "gh.test", 443));		/* narrowed: terminated */
	CHECK(httprules_terminate(r, "api.test", 443));		/* a secret's host */
	CHECK(!httprules_terminate(r, "api.test", 80));		/* never plain HTTP */
	CHECK(!httprules_terminate(r, "pypi.test", 443));
	CHECK(check_req(r, "gh.test", "GET /repos/acme/x/y HTTP/1.1\r\nHost: gh.test\r\n\r\n", why) == 0);
	CHECK(check_req(r, "gh.test", "GET /meta/x?y HTTP/1.1\r\nHost: gh.test\r\n\r\n", why) == 0);
	CHECK(check_req(r, "gh.test", "POST /repos/acme/x HTTP/1.1\r\nHost: gh.test\r\n"
			"Content-Length: 0\r\n\r\n", why) == 403);
	CHECK_STR_CONTAINS(why, "POST /repos/acme/x on gh.test is outside");
	CHECK(check_req(r, "gh.test", "GET /repos/other HTTP/1.1\r\nHost: gh.test\r\n\r\n", why) == 403);
	CHECK(check_req(r, "api.test", "GET /anything HTTP/1.1\r\nHost: api.test\r\n\r\n", why) == 0);
	CHECK(check_req(r, "api.test", "GET /aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
			" HTTP/1.1\r\nHost: api.test\r\n\r\n", why) == 414);
	CHECK(check_req(r, "up.test", "POST / HTTP/1.1\r\nHost: up.test\r\nContent-Length: 11\r\n\r\n",
			why) == 413);
	CHECK(check_req(r, "up.test", "POST / HTTP/1.1\r\nHost: up.test\r\nContent-Length: 10\r\n\r\n",
			why) == 0);
	httprules_free(r);
	corral_policy_free(&p);
}

TEST(ca_mints_verifiable_certificates)
{
	struct corral_err err = { 0 };
	struct tls_ca *ca = tls_ca_new(NULL, &err);
	X509_STORE *store = X509_STORE_new();
	X509_STORE_CTX *ctx = X509_STORE_CTX_new();
	BIO *bio;
	X509 *root, *leaf;
	SSL *ssl;

	CHECK(ca != NULL);
	if (!ca)
		return;
	CHECK(strstr(tls_ca_pem(ca), "BEGIN CERTIFICATE") && !strstr(tls_ca_pem(ca), "PRIVATE"));
	bio = BIO_new_mem_buf(tls_ca_pem(ca), -1);
	root = PEM_read_bio_X509(bio, NULL, NULL, NULL);
	BIO_free(bio);
	X509_STORE_add_cert(store, root);
	ssl = tls_ca_server(ca, "api.test", &err);
	CHECK(ssl != NULL);
	leaf = ssl ? SSL_get_certificate(ssl) : NULL;
	CHECK(leaf && X509_check_host(leaf, "api.test", 0, 0, NULL) == 1);
	CHECK(leaf && X509_check_host(leaf, "other.test", 0, 0, NULL) != 1);
	X509_STORE_CTX_init(ctx, store, leaf, NULL);
	X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_SERVER);
	CHECK(X509_verify_cert(ctx) == 1);
	SSL_free(ssl);
	X509_STORE_CTX_free(ctx);
	X509_STORE_free(store);
	X509_free(root);
	tls_ca_free(ca);
}

int main(void)
{
	unit_run_all();
	UNIT_DONE();
}
