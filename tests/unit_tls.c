/*
 * unit_tls.c - the policy's TLS part (tls_policy.c), placeholders swapped
 * or refused (secrets.c), base64 (result.c), methods, paths and caps
 * (httprules.c), and the sandbox's CA and its minted certificates
 * (src/tls/ca.c: corral-tls.so's objects, linked in).
 */
#include "tls.h"
#include "tls_ca.h"
#include "unit.h"

#include <errno.h>
#include <nettle/base64.h>
#include <fcntl.h>
#include <openssl/core_names.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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
	/* after a later "?", in the parameter before it (url's, here) */
	snprintf(head, sizeof(head), "GET /x?url=http://e.test/?key=%s HTTP/1.1\r\n\r\n",
		 secrets_placeholder(s, 1));
	CHECK(secrets_rewrite_head(s, head, strlen(head), "api.test", 443, true, &out, &len,
				   why, sizeof(why)) == -EACCES);
	snprintf(head, sizeof(head), "GET /x??key=%s HTTP/1.1\r\n\r\n", secrets_placeholder(s, 1));
	CHECK(secrets_rewrite_head(s, head, strlen(head), "api.test", 443, true, &out, &len,
				   why, sizeof(why)) == -EACCES);
	/*
	 * nor after a ";" (a separator to some servers: url's, to others)
	 * or an encoded "?" or "&" (a byte of url's value, decoded after
	 * the split), nor followed by ";": never a whole parameter's to all
	 */
	{
		static const char *const forms[][2] = {
			{ "GET /x?url=http://e.test/;key=", " HTTP/1.1\r\n\r\n" },
			{ "GET /x?url=http://e.test/%3Fkey=", " HTTP/1.1\r\n\r\n" },
			{ "GET /x?url=http://e.test/%26key=", " HTTP/1.1\r\n\r\n" },
			{ "GET /x?key=", ";url=http://e.test/ HTTP/1.1\r\n\r\n" },
		};

		for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
			snprintf(head, sizeof(head), "%s%s%s", forms[i][0],
				 secrets_placeholder(s, 1), forms[i][1]);
			CHECK(secrets_rewrite_head(s, head, strlen(head), "api.test", 443, true,
						   &out, &len, why, sizeof(why)) == -EACCES);
		}
	}
	snprintf(head, sizeof(head), "GET /x?key=%s HTTP/1.1\r\n\r\n", secrets_placeholder(s, 1));
	CHECK(secrets_rewrite_head(s, head, strlen(head), "api.test", 443, true, &out, &len,
				   why, sizeof(why)) == 0);
	CHECK_STR_CONTAINS(out, "GET /x?key=" SECRET " HTTP/1.1");
	free(out);
	/* "agent:PH" base64-encoded in Basic credentials */
	{
		char plain[128], b64[256];

		snprintf(plain, sizeof(plain), "agent:%s", secrets_placeholder(s, 0));
		base64_encode_raw(b64, strlen(plain), (const uint8_t *)plain);
		b64[BASE64_ENCODE_RAW_LENGTH(strlen(plain))] = 0;
		snprintf(head, sizeof(head), "GET / HTTP/1.1\r\nAuthorization: Basic %s\r\n\r\n", b64);
		CHECK(secrets_rewrite_head(s, head, strlen(head), "api.test", 443, true, &out,
					   &len, why, sizeof(why)) == 0);
		base64_encode_raw(b64, strlen("agent:" SECRET), (const uint8_t *)"agent:" SECRET);
		b64[BASE64_ENCODE_RAW_LENGTH(strlen("agent:" SECRET))] = 0;
		CHECK_STR_CONTAINS(out, b64);
		free(out);
		CHECK(secrets_rewrite_head(s, head, strlen(head), "other.test", 443, true, &out,
					   &len, why, sizeof(why)) == -EACCES);
	}
	/*
	 * The attacker's spelling: "agent:PHx" in base64 whose last character
	 * carries stray bits (not canonical, though lenient decoders take it).
	 * It is not decoded, so nothing is swapped in: the head goes as it
	 * came, and neither the secret nor its base64 is in it.
	 */
	{
		char plain[128], b64[256], enc_secret[256];
		size_t n;

		snprintf(plain, sizeof(plain), "agent:%sx", secrets_placeholder(s, 0));
		n = BASE64_ENCODE_RAW_LENGTH(strlen(plain));
		base64_encode_raw(b64, strlen(plain), (const uint8_t *)plain);
		b64[n] = 0;
		CHECK(n > 2 && b64[n - 1] == '=' && b64[n - 2] == '=');
		/* its last data character is A, Q, g or w (low 4 bits zero): +1 */
		b64[n - 3]++;
		snprintf(head, sizeof(head), "GET / HTTP/1.1\r\nAuthorization: Basic %s\r\n\r\n", b64);
		out = NULL;
		CHECK(secrets_rewrite_head(s, head, strlen(head), "api.test", 443, true, &out,
					   &len, why, sizeof(why)) == 0);
		/* but for the identity coding every request to a secret's host asks for */
		n = strlen(head) - 2;
		CHECK(out && len == n + 29 && !memcmp(out, head, n) &&
		      !memcmp(out + n, "Accept-Encoding: identity\r\n\r\n", 29));
		base64_encode_raw(enc_secret, strlen("agent:" SECRET), (const uint8_t *)"agent:" SECRET);
		enc_secret[BASE64_ENCODE_RAW_LENGTH(strlen("agent:" SECRET))] = 0;
		CHECK(out && !memmem(out, len, SECRET, strlen(SECRET)) &&
		      !memmem(out, len, enc_secret, strlen(enc_secret)));
		free(out);
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
	secrets_scan_free(&st);
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
	/* a path the upstream may resolve to another matches no path rule */
	CHECK(check_req(r, "gh.test", "GET /repos/acme/../../admin HTTP/1.1\r\nHost: gh.test\r\n\r\n", why) == 403);
	CHECK_STR_CONTAINS(why, "matches no path rule");
	CHECK(check_req(r, "gh.test", "GET /repos/acme/%2E%2e/x HTTP/1.1\r\nHost: gh.test\r\n\r\n", why) == 403);
	CHECK(check_req(r, "gh.test", "GET /repos/acme/..;/x HTTP/1.1\r\nHost: gh.test\r\n\r\n", why) == 403);
	CHECK(check_req(r, "gh.test", "GET /repos/acme/.. HTTP/1.1\r\nHost: gh.test\r\n\r\n", why) == 403);
	CHECK(check_req(r, "gh.test", "GET /repos/acme/./x HTTP/1.1\r\nHost: gh.test\r\n\r\n", why) == 403);
	CHECK(check_req(r, "gh.test", "GET /repos/acme/x%2F..%2Fy HTTP/1.1\r\nHost: gh.test\r\n\r\n", why) == 403);
	CHECK(check_req(r, "gh.test", "GET /repos/acme/x\\..\\y HTTP/1.1\r\nHost: gh.test\r\n\r\n", why) == 403);
	/* dots that are only part of a name are not segments */
	CHECK(check_req(r, "gh.test", "GET /repos/acme/.x/...y/z.. HTTP/1.1\r\nHost: gh.test\r\n\r\n", why) == 0);
	CHECK(check_req(r, "gh.test", "GET /repos/acme/x?q=../.. HTTP/1.1\r\nHost: gh.test\r\n\r\n", why) == 0);
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
	char why[CORRAL_ERR_MAX] = "";
	struct tls_ca *ca = tls_ca_new(NULL, why, sizeof(why));
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
	ssl = tls_ca_server(ca, "api.test", why, sizeof(why));
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

/* 1 if ca mints a certificate for host that verifies against root */
static int mints_valid(struct tls_ca *ca, X509 *root, const char *host)
{
	X509_STORE *store = X509_STORE_new();
	X509_STORE_CTX *ctx = X509_STORE_CTX_new();
	char why[CORRAL_ERR_MAX] = "";
	SSL *ssl = tls_ca_server(ca, host, why, sizeof(why));
	X509 *leaf = ssl ? SSL_get_certificate(ssl) : NULL;
	int ok = 0;

	if (store && ctx && leaf && X509_STORE_add_cert(store, root) == 1 &&
	    X509_STORE_CTX_init(ctx, store, leaf, NULL) == 1)
		ok = X509_verify_cert(ctx) == 1;
	SSL_free(ssl);
	X509_STORE_CTX_free(ctx);
	X509_STORE_free(store);
	return ok;
}

/*
 * How many times this process's readable memory holds the 32 bytes
 * key ^ mask (either byte order), key's own copy at skip not counted.
 * Reads itself through /proc/self/mem: no allocation, no OpenSSL.
 */
static int key_copies(const unsigned char *masked, unsigned char mask,
		      unsigned char *key, unsigned char *rev)
{
	static char buf[1 << 16];
	char line[512];
	int maps = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	int mem = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
	int copies = 0;
	ssize_t n, len = 0;
	char *l;

	for (int i = 0; i < 32; i++) {
		key[i] = masked[i] ^ mask;
		rev[31 - i] = key[i];
	}
	/* the maps file, whole, into buf's second half: the text stays put */
	while (maps >= 0 && len < (ssize_t)sizeof(buf) / 2 - 1 &&
	       (n = read(maps, buf + sizeof(buf) / 2 + len, sizeof(buf) / 2 - 1 - len)) > 0)
		len += n;
	buf[sizeof(buf) / 2 + len] = '\0';
	for (l = buf + sizeof(buf) / 2; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		unsigned long a, b;
		char perms[5];

		snprintf(line, sizeof(line), "%.*s", (int)strcspn(l, "\n"), l);
		if (sscanf(line, "%lx-%lx %4s", &a, &b, perms) != 3 || perms[0] != 'r' ||
		    strstr(line, "[vvar") || strstr(line, "[vsyscall]") || b - a > (1UL << 40))
			continue;
		for (unsigned long off = a; off < b; off += sizeof(buf) / 2 - 32) {
			size_t want = b - off < sizeof(buf) / 2 ? b - off : sizeof(buf) / 2;

			n = pread(mem, buf, want, (off_t)off);
			for (ssize_t i = 0; n >= 32 && i + 32 <= n; i++) {
				char *at = (char *)(off + i);

				if (at == (char *)key || at == (char *)rev ||
				    (at >= buf && at < buf + sizeof(buf)))
					continue;
				/* the first byte first: a memcmp a byte of memory,
				 * under ASan's interceptor, was 20 s of the check */
				if ((buf[i] == (char)key[0] && !memcmp(buf + i, key, 32)) ||
				    (buf[i] == (char)rev[0] && !memcmp(buf + i, rev, 32)))
					copies++;
			}
			if ((size_t)n < want || off + want >= b)
				break;
		}
	}
	if (maps >= 0)
		close(maps);
	if (mem >= 0)
		close(mem);
	return copies;
}

/*
 * A fork of the supervisor (every sandbox's init) holds no CA's private
 * key: it lives in memory the kernel wipes in a child.  The supervisor's
 * own copy is found by the same scan, and still signs.
 */
TEST(ca_key_not_in_a_fork)
{
	char why[CORRAL_ERR_MAX] = "";
	struct tls_ca *ca = tls_ca_new(NULL, why, sizeof(why));
	unsigned char masked[32], key[32], rev[32], mask = 0x5a;
	BIGNUM *d = NULL;
	BIO *bio;
	X509 *root;
	pid_t pid;
	int status = -1;

	CHECK(ca != NULL);
	if (!ca)
		return;
	bio = BIO_new_mem_buf(tls_ca_pem(ca), -1);
	root = PEM_read_bio_X509(bio, NULL, NULL, NULL);
	BIO_free(bio);
	CHECK(root && mints_valid(ca, root, "before.test"));
	CHECK(EVP_PKEY_get_bn_param(tls_ca_key(ca), OSSL_PKEY_PARAM_PRIV_KEY, &d) == 1);
	CHECK(d && BN_bn2binpad(d, key, 32) == 32);
	BN_clear_free(d);
	for (int i = 0; i < 32; i++)
		masked[i] = key[i] ^ mask;
	explicit_bzero(key, sizeof(key));
	CHECK(key_copies(masked, mask, key, rev) >= 1);
	explicit_bzero(key, sizeof(key));
	explicit_bzero(rev, sizeof(rev));
	pid = fork();
	if (pid == 0)
		_exit(key_copies(masked, mask, key, rev) == 0 ? 0 : 1);
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(mints_valid(ca, root, "after.test"));
	X509_free(root);
	tls_ca_free(ca);
}

/* the client's traffic secret, as the keylog line gives it, masked */
static unsigned char traffic_masked[32];
static bool traffic_seen;

static void keylog(const SSL *ssl, const char *line)
{
	static const char want[] = "CLIENT_TRAFFIC_SECRET_0 ";
	const char *hex = strncmp(line, want, strlen(want)) ? NULL : strrchr(line, ' ');
	unsigned int b;

	(void)ssl;
	if (!hex || strlen(hex + 1) != 64)
		return;
	for (int i = 0; i < 32; i++) {
		if (sscanf(hex + 1 + 2 * i, "%2x", &b) != 1)
			return;
		traffic_masked[i] = (unsigned char)b ^ 0x5a;
	}
	traffic_seen = true;
}

/* a client and ca's server for host, handshaken over a BIO pair */
static bool session_pair(struct tls_ca *ca, SSL_CTX *cctx, SSL **client, SSL **server)
{
	char why[CORRAL_ERR_MAX] = "";
	BIO *a = NULL, *b = NULL;
	int done = 0;

	*server = tls_ca_server(ca, "session.test", why, sizeof(why));
	*client = SSL_new(cctx);
	if (!*server || !*client || !BIO_new_bio_pair(&a, 0, &b, 0))
		return false;
	SSL_set_bio(*server, a, a);
	SSL_set_bio(*client, b, b);
	SSL_set_accept_state(*server);
	SSL_set_connect_state(*client);
	/* bounded: each round moves what the other side wrote */
	for (int i = 0; i < 20 && done != 3; i++) {
		if (SSL_do_handshake(*client) == 1)
			done |= 1;
		if (SSL_do_handshake(*server) == 1)
			done |= 2;
	}
	return done == 3;
}

/*
 * A fork that forgets (corral_forget, in a sandbox's init) holds no live
 * connection's TLS secrets: OpenSSL's blocks are zeroed there.  The
 * session's traffic secret (from the keylog, 32 bytes with a SHA-256
 * suite) is found in the process first, and is still there after.
 */
TEST(tls_sessions_not_in_a_forgetting_fork)
{
	char why[CORRAL_ERR_MAX] = "", buf[64];
	struct tls_ca *ca = tls_ca_new(NULL, why, sizeof(why));
	SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
	unsigned char key[32], rev[32];
	SSL *client = NULL, *server = NULL;
	pid_t pid;
	int status = -1;

	CHECK(ca != NULL && cctx != NULL);
	if (!ca || !cctx)
		return;
	CHECK(SSL_CTX_set_ciphersuites(cctx, "TLS_AES_128_GCM_SHA256") == 1);
	SSL_CTX_set_min_proto_version(cctx, TLS1_3_VERSION);
	SSL_CTX_set_keylog_callback(cctx, keylog);
	CHECK(session_pair(ca, cctx, &client, &server));
	CHECK(traffic_seen);
	CHECK(SSL_write(client, "a request", 9) == 9);
	CHECK(SSL_read(server, buf, sizeof(buf)) == 9);
	CHECK(key_copies(traffic_masked, 0x5a, key, rev) >= 1);
	explicit_bzero(key, sizeof(key));
	explicit_bzero(rev, sizeof(rev));
	pid = fork();
	if (pid == 0) {
		corral_tls_ops.forget();
		_exit(key_copies(traffic_masked, 0x5a, key, rev) == 0 ? 0 : 1);
	}
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* the process's own connection goes on */
	CHECK(SSL_write(client, "another", 7) == 7);
	CHECK(SSL_read(server, buf, sizeof(buf)) == 7);
	SSL_free(client);
	SSL_free(server);
	SSL_CTX_free(cctx);
	tls_ca_free(ca);
}

/* what the plugin's table gives corral is what ca.c does */
TEST(plugin_table_is_complete)
{
	CHECK(corral_tls_ops.abi == TLS_PLUGIN_ABI);
	CHECK(corral_tls_ops.ca_new == tls_ca_new && corral_tls_ops.ca_pem == tls_ca_pem &&
	      corral_tls_ops.ca_free == tls_ca_free);
	CHECK(corral_tls_ops.server && corral_tls_ops.server_close && corral_tls_ops.client &&
	      corral_tls_ops.client_error && corral_tls_ops.forget == tls_memory_forget &&
	      corral_tls_ops.unshared == tls_memory_unshared);
}

/* An upstream_ca that does not load is named, with OpenSSL's reason. */
TEST(ca_upstream_ca_missing_is_named)
{
	char why[CORRAL_ERR_MAX] = "";
	struct tls_ca *ca = tls_ca_new("/nonexistent/unit-ca.pem", why, sizeof(why));

	CHECK(ca == NULL);
	CHECK_STR_CONTAINS(why, "/nonexistent/unit-ca.pem: cannot load network.tls_upstream_ca: ");
	tls_ca_free(ca);
}

static bool b64_is(const char *in, const char *want, size_t wantlen)
{
	char *out = NULL;
	size_t n = 0;
	bool ok = corral_base64_decode(in, strlen(in), &out, &n) == 0 && n == wantlen &&
		  !memcmp(out, want, n);

	free(out);
	return ok;
}

static bool b64_refused(const char *in)
{
	char *out = (char *)1;
	size_t n = 1;
	bool ok = corral_base64_decode(in, strlen(in), &out, &n) == -EINVAL && !out && !n;

	return ok;
}

/*
 * base64 as nettle does it, as OpenSSL's EVP_*Block did before: the same
 * text out, the same bytes back (the padding not counted), and nothing
 * taken that EVP_DecodeBlock refused.
 */
TEST(base64_padding_and_refusals)
{
	static const struct { const char *plain, *enc; } v[] = {
		{ "", "" }, { "f", "Zg==" }, { "fo", "Zm8=" }, { "foo", "Zm9v" },
		{ "foob", "Zm9vYg==" }, { "fooba", "Zm9vYmE=" }, { "foobar", "Zm9vYmFy" },
		{ "\xff\xfe\x00", "//4A" }, { "\xfb\xef", "++8=" },
	};
	json_t *j;

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		size_t n = strlen(v[i].enc) / 4 * 3 - (strstr(v[i].enc, "==") ? 2 :
			   strchr(v[i].enc, '=') ? 1 : 0);

		j = corral_json_base64(v[i].plain, n);
		CHECK(j && !strcmp(json_string_value(j), v[i].enc));
		json_decref(j);
		CHECK(b64_is(v[i].enc, v[i].plain, n));
	}
	/* a zero byte at the end is data, not padding */
	CHECK(b64_is("AAAA", "\0\0\0", 3));
	CHECK(b64_is("YQA=", "a\0", 2));
	CHECK(b64_refused("Zg="));		/* not groups of four */
	CHECK(b64_refused("Zg=a"));		/* data after padding */
	CHECK(b64_refused("Z==="));		/* three pads */
	CHECK(b64_refused("===="));
	CHECK(b64_refused("Zm9*"));		/* not the alphabet */
	CHECK(b64_refused("Zm-_"));		/* nor base64url's */
	CHECK(b64_refused("Zm 9"));		/* no whitespace */
	CHECK(b64_refused("Zm9v\n"));
	CHECK(b64_refused("Zm\0v"));
	CHECK(b64_refused("Zh=="));		/* stray bits before the padding */
}

/*
 * A daemon's (`corral serve`): once unshared, a fork finds none of
 * OpenSSL's blocks, made before the call or after, though it never
 * forgets.  Last: the mode is for the rest of the process.
 */
TEST(unshared_openssl_blocks_reach_no_fork)
{
	static const char secret[] = "traffic-secret-0123456789abcdef";
	char *before = OPENSSL_malloc(sizeof(secret)), *after;
	int status, bad = -1;
	pid_t pid;

	CHECK(tls_memory_wrapped());
	CHECK(before != NULL);
	if (!before)
		return;
	memcpy(before, secret, sizeof(secret));
	CHECK(corral_tls_ops.unshared() == 0);
	after = OPENSSL_malloc(40000);	/* a mapping of its own, made after */
	CHECK(after != NULL);
	if (!after)
		return;
	memcpy(after, secret, sizeof(secret));
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		bool zero = true;

		for (size_t i = 0; i < sizeof(secret); i++)
			zero = zero && before[i] == 0 && after[i] == 0;
		_exit(zero ? 0 : 1);
	}
	if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status))
		bad = WEXITSTATUS(status);
	CHECK(bad == 0);
	CHECK(!memcmp(before, secret, sizeof(secret)) && !memcmp(after, secret, sizeof(secret)));
	OPENSSL_free(before);
	OPENSSL_free(after);
}

int main(void)
{
	unit_run_all();
	UNIT_DONE();
}
