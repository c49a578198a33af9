/*
 * tlsbox.c - one sandbox's TLS termination, as the supervisor holds it:
 * its rules and secrets (httprules.c, secrets.c), and its CA, which
 * corral-tls.so makes and keeps (tls_plugin.h: OpenSSL is loaded only
 * for a policy that terminates); the variables that tell the clients
 * inside where the CA is.
 */
#include "tls.h"
#include "sandbox.h"

#include <errno.h>
#include <stdlib.h>

/* ---- the whole, per sandbox ---------------------------------------------- */

struct tlsbox *tlsbox_new(const struct corral_policy *p, struct corral_err *err)
{
	const char *upstream_ca = NULL;
	struct tlsbox *t;

	err->code = 0;
	if (p->net != CORRAL_NET_PROXY || !tls_policy_active(p))
		return NULL;
	t = calloc(1, sizeof(*t));
	if (!t) {
		corral_set_err(err, -ENOMEM, "out of memory for TLS termination");
		return NULL;
	}
	if (p->net_tls && p->net_tls->net)
		upstream_ca = json_string_value(json_object_get(p->net_tls->net,
								"upstream_ca"));
	t->rules = httprules_new(p, err);
	if (t->rules)
		t->secrets = secrets_new(p, err);
	if (t->rules && t->secrets)
		t->ops = tls_plugin_load(err);
	if (t->ops) {
		char why[CORRAL_ERR_MAX] = "";

		t->ca = t->ops->ca_new(upstream_ca, why, sizeof(why));
		if (!t->ca)
			corral_set_err(err, -EPROTO, "%s", why);
	}
	if (!t->ca) {
		tlsbox_free(t);
		return NULL;
	}
	return t;
}

void tlsbox_free(struct tlsbox *t)
{
	if (!t)
		return;
	if (t->ca)
		t->ops->ca_free(t->ca);
	httprules_free(t->rules);
	secrets_free(t->secrets);
	free(t);
}

/*
 * Each client's own variable: most replace the roots (the bundle: the
 * host's and ours), NODE_EXTRA_CA_CERTS adds to them (the CA alone).
 */
static const struct { const char *name, *path; } ca_env[] = {
	{ "SSL_CERT_FILE", TLS_BUNDLE_PATH },
	{ "REQUESTS_CA_BUNDLE", TLS_BUNDLE_PATH },
	{ "CURL_CA_BUNDLE", TLS_BUNDLE_PATH },
	{ "GIT_SSL_CAINFO", TLS_BUNDLE_PATH },
	{ "PIP_CERT", TLS_BUNDLE_PATH },
	{ "NODE_EXTRA_CA_CERTS", TLS_CA_PATH },
};

int tlsbox_env(const struct tlsbox *t, char ***envp, size_t *n)
{
	int r = 0;

	if (!t)
		return 0;
	for (size_t i = 0; r == 0 && i < sizeof(ca_env) / sizeof(ca_env[0]); i++)
		r = sandbox_env_add(envp, n, ca_env[i].name, ca_env[i].path);
	for (size_t i = 0; r == 0 && i < secrets_count(t->secrets); i++)
		r = sandbox_env_add(envp, n, secrets_name(t->secrets, i),
				    secrets_placeholder(t->secrets, i));
	return r;
}
