/*
 * env.c - the environment a sandboxed command starts with.
 *
 * Nothing of the caller's environment goes in unless the policy names it:
 * a fixed base, the proxy variables in proxy mode, then the policy's own.
 */
#include "internal.h"
#include "sandbox.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SANDBOX_PATH "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"

int sandbox_env_add(char ***envp, size_t *n, const char *name, const char *value)
{
	size_t len = strlen(name);
	char *kv;

	if (!value)
		return 0;
	if (asprintf(&kv, "%s=%s", name, value) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < *n; i++) {
		if (strncmp((*envp)[i], name, len) == 0 && (*envp)[i][len] == '=') {
			free((*envp)[i]);
			(*envp)[i] = kv;
			return 0;
		}
	}
	char **grown = realloc(*envp, (*n + 2) * sizeof(char *));

	if (!grown) {
		free(kv);
		return -ENOMEM;
	}
	grown[(*n)++] = kv;
	grown[*n] = NULL;
	*envp = grown;
	return 0;
}

void sandbox_env_free(char **envp)
{
	for (size_t i = 0; envp && envp[i]; i++)
		free(envp[i]);
	free(envp);
}

char **sandbox_env_copy(char *const *envp)
{
	size_t n = 0;
	char **v;

	while (envp[n])
		n++;
	v = calloc(n + 1, sizeof(char *));
	for (size_t i = 0; v && i < n; i++) {
		v[i] = strdup(envp[i]);
		if (!v[i]) {
			sandbox_env_free(v);
			return NULL;
		}
	}
	return v;
}

static const struct { const char *name, *value; } proxy_env[] = {
	{ "HTTP_PROXY", "http://127.0.0.1:3128" },
	{ "HTTPS_PROXY", "http://127.0.0.1:3128" },
	{ "ALL_PROXY", "socks5h://127.0.0.1:1080" },
	{ "NO_PROXY", "localhost,127.0.0.1,::1" },
	{ "http_proxy", "http://127.0.0.1:3128" },
	{ "https_proxy", "http://127.0.0.1:3128" },
	{ "all_proxy", "socks5h://127.0.0.1:1080" },
	{ "no_proxy", "localhost,127.0.0.1,::1" },
};

/* The caller's environment stays outside; only what is named goes in. */
char **sandbox_env(const struct corral_policy *p)
{
	const char *lang = getenv("LANG"), *term = getenv("TERM");
	char **envp = calloc(1, sizeof(char *));
	size_t n = 0;
	int r = envp ? 0 : -ENOMEM;

	if (r == 0)
		r = sandbox_env_add(&envp, &n, "PATH", SANDBOX_PATH);
	if (r == 0)
		r = sandbox_env_add(&envp, &n, "HOME",
				     p->user_home ? p->user_home : "/home/agent");
	if (r == 0)
		r = sandbox_env_add(&envp, &n, "LANG", lang ? lang : "C.UTF-8");
	if (r == 0)
		r = sandbox_env_add(&envp, &n, "TERM", term ? term : "dumb");
	if (r == 0)
		r = sandbox_env_add(&envp, &n, "TMPDIR", "/tmp");
	if (r == 0)
		r = sandbox_env_add(&envp, &n, "USER",
				     p->user_name ? p->user_name : "agent");
	/* Proxy mode: every common client finds the way out by itself. */
	for (size_t i = 0; r == 0 && p->net == CORRAL_NET_PROXY &&
	     i < sizeof(proxy_env) / sizeof(proxy_env[0]); i++)
		r = sandbox_env_add(&envp, &n, proxy_env[i].name, proxy_env[i].value);
	for (size_t i = 0; r == 0 && i < p->nenv_pass; i++)
		r = sandbox_env_add(&envp, &n, p->env_pass[i], getenv(p->env_pass[i]));
	for (size_t i = 0; r == 0 && i < p->nenv; i++)
		r = sandbox_env_add(&envp, &n, p->env[i].name, p->env[i].value);
	if (r < 0) {
		sandbox_env_free(envp);
		return NULL;
	}
	return envp;
}
