/*
 * curl.c - libcurl, loaded when a client verb first needs it.
 *
 * Linked in, libcurl brings some thirty libraries of its own (TLS, HTTP/2,
 * IDN, LDAP, SSH ...), and every `corral run` would pay for loading them
 * before it starts a sandbox.  Only the client verbs with a --url (client.c)
 * and corral mcp use it (over the unix socket the verbs speak HTTP
 * themselves, sockhttp.c), so the few functions they call are resolved
 * here with dlopen() on first use; the rest of corral never loads it.  This
 * file defines those functions under their own names, forwarding to libcurl.
 */
#define CURL_DISABLE_TYPECHECK
#include <curl/curl.h>

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

struct curl_api {
	CURLcode (*global_init)(long);
	void (*global_cleanup)(void);
	CURL *(*easy_init)(void);
	void (*easy_cleanup)(CURL *);
	void (*easy_reset)(CURL *);
	CURLcode (*easy_perform)(CURL *);
	CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
	CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
	const char *(*easy_strerror)(CURLcode);
	char *(*easy_escape)(CURL *, const char *, int);
	void (*free)(void *);
	struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
	void (*slist_free_all)(struct curl_slist *);
	CURLcode (*easy_send)(CURL *, const void *, size_t, size_t *);
	CURLcode (*easy_recv)(CURL *, void *, size_t, size_t *);
};

/*
 * The one piece of global state in corral: what dlopen gave, for the
 * process's life, as linking would have.  The CLI is main's domain; the
 * library keeps none.
 */
static struct curl_api api;
static void *lib;

/* Resolve everything once; a client verb cannot go on without it. */
static void load(void)
{
	struct {
		const char *name;
		void **slot;
	} syms[] = {
		{ "curl_global_init", (void **)&api.global_init },
		{ "curl_global_cleanup", (void **)&api.global_cleanup },
		{ "curl_easy_init", (void **)&api.easy_init },
		{ "curl_easy_cleanup", (void **)&api.easy_cleanup },
		{ "curl_easy_reset", (void **)&api.easy_reset },
		{ "curl_easy_perform", (void **)&api.easy_perform },
		{ "curl_easy_setopt", (void **)&api.easy_setopt },
		{ "curl_easy_getinfo", (void **)&api.easy_getinfo },
		{ "curl_easy_strerror", (void **)&api.easy_strerror },
		{ "curl_easy_escape", (void **)&api.easy_escape },
		{ "curl_free", (void **)&api.free },
		{ "curl_slist_append", (void **)&api.slist_append },
		{ "curl_slist_free_all", (void **)&api.slist_free_all },
		{ "curl_easy_send", (void **)&api.easy_send },
		{ "curl_easy_recv", (void **)&api.easy_recv },
	};

	if (lib)
		return;
	lib = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "corral: cannot load libcurl (libcurl4 is needed by "
			"--url and corral mcp): %s\n", dlerror());
		exit(125);
	}
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		*syms[i].slot = dlsym(lib, syms[i].name);
		if (!*syms[i].slot) {
			fprintf(stderr, "corral: libcurl lacks %s\n", syms[i].name);
			exit(125);
		}
	}
}

CURLcode curl_global_init(long flags)
{
	load();
	return api.global_init(flags);
}

void curl_global_cleanup(void)
{
	if (lib)
		api.global_cleanup();
}

CURL *curl_easy_init(void)
{
	load();
	return api.easy_init();
}

void curl_easy_cleanup(CURL *c)
{
	load();
	api.easy_cleanup(c);
}

void curl_easy_reset(CURL *c)
{
	load();
	api.easy_reset(c);
}

CURLcode curl_easy_perform(CURL *c)
{
	load();
	return api.easy_perform(c);
}

/*
 * One argument follows the option; its type is in the option's number
 * (see curl.h: CURLOPTTYPE_*), so it is read as what it is.
 */
CURLcode curl_easy_setopt(CURL *c, CURLoption opt, ...)
{
	va_list ap;
	CURLcode r;

	load();
	va_start(ap, opt);
	if (opt < CURLOPTTYPE_OBJECTPOINT)
		r = api.easy_setopt(c, opt, va_arg(ap, long));
	else if (opt >= CURLOPTTYPE_OFF_T && opt < CURLOPTTYPE_BLOB)
		r = api.easy_setopt(c, opt, va_arg(ap, curl_off_t));
	else
		r = api.easy_setopt(c, opt, va_arg(ap, void *));
	va_end(ap);
	return r;
}

/* Every CURLINFO takes a pointer to where the answer goes. */
CURLcode curl_easy_getinfo(CURL *c, CURLINFO info, ...)
{
	va_list ap;
	CURLcode r;

	load();
	va_start(ap, info);
	r = api.easy_getinfo(c, info, va_arg(ap, void *));
	va_end(ap);
	return r;
}

const char *curl_easy_strerror(CURLcode code)
{
	load();
	return api.easy_strerror(code);
}

char *curl_easy_escape(CURL *c, const char *s, int len)
{
	load();
	return api.easy_escape(c, s, len);
}

void curl_free(void *p)
{
	load();
	api.free(p);
}

struct curl_slist *curl_slist_append(struct curl_slist *l, const char *s)
{
	load();
	return api.slist_append(l, s);
}

void curl_slist_free_all(struct curl_slist *l)
{
	load();
	api.slist_free_all(l);
}

CURLcode curl_easy_send(CURL *c, const void *buf, size_t len, size_t *n)
{
	load();
	return api.easy_send(c, buf, len, n);
}

CURLcode curl_easy_recv(CURL *c, void *buf, size_t len, size_t *n)
{
	load();
	return api.easy_recv(c, buf, len, n);
}
