/*
 * tls.h - TLS termination for a sandbox's egress, and what it makes
 * possible: secrets kept outside (placeholders inside), and holes narrower
 * than a host (methods, paths, size caps).
 *
 *   tls_policy.c  the policy's part: network.tls, network.tls_upstream_ca,
 *                 allowlist objects, network.max_*, the "secrets" section;
 *                 validated when loaded, kept as JSON, compiled per sandbox
 *   tlsbox.c      one sandbox's part: the CA (made by corral-tls.so, which
 *                 mints certificates from it and verifies upstreams:
 *                 tls_plugin.h), rules, secrets
 *   httprules.c   which hosts are terminated; methods, paths and caps
 *   secrets.c     placeholders and the real values, swapped in a request
 *                 head only where the policy says; the values' forms,
 *                 refused in requests and masked in what comes back
 *   httpresp.c    the answers of a secret's host, framed for that mask
 *   spell.c       a value as encoders spell it (percent, JSON, HTML), found
 *
 * One struct tlsbox per sandbox, made before the sandbox (its environment
 * carries the placeholders and the CA's path) and owned by the supervisor:
 * the CA's private key lives in the supervisor's memory only.
 */
#ifndef CORRAL_TLS_H
#define CORRAL_TLS_H

#include "internal.h"
#include "httpreq.h"

#include "tls_plugin.h"

#include <jansson.h>

/* Where the sandbox finds the CA (mount.c writes them, env.c names them). */
#define TLS_CA_PATH		"/etc/corral/ca.pem"
#define TLS_BUNDLE_PATH		"/etc/corral/bundle.pem"
/* the host's roots, which the bundle extends */
#define TLS_SYSTEM_BUNDLE	"/etc/ssl/certs/ca-certificates.crt"

/* ---- the policy's part (tls_policy.c) ------------------------------------ */

/*
 * Validated JSON, compiled per sandbox: {"terminate": bool, "upstream_ca":
 * path, "max_url": n, "max_headers": n, "max_body": n, "rules": [{"host",
 * "tls", "methods", "paths", "max_body"}]} and the secrets array as written.
 */
struct corral_tls_policy {
	json_t *net;
	json_t *secrets;
};

struct loader;
/* policy_schema.c's hooks: network.tls etc., allow objects, "secrets" */
int tls_policy_apply_mode(struct loader *l, json_t *v);
int tls_policy_apply_upstream_ca(struct loader *l, json_t *v);
int tls_policy_apply_cap(struct loader *l, const char *key, json_t *v);
/* an allowlist object: *host set to its pattern (the loader adds it) */
int tls_policy_apply_rule(struct loader *l, json_t *obj, const char **host,
			  size_t *hostlen);
int tls_policy_apply_secrets(struct loader *l, json_t *v);
/* network.allow replaced by a later layer: its objects go with it */
void tls_policy_clear_rules(struct corral_policy *p);
int tls_policy_copy(struct corral_policy *dst, const struct corral_policy *src);
void tls_policy_free(struct corral_policy *p);
/* Does this policy terminate anything (or hold secrets, which need it)? */
bool tls_policy_active(const struct corral_policy *p);

/* ---- rules by host, method, path; caps (httprules.c) ---------------------- */

struct httprules;

struct httprules *httprules_new(const struct corral_policy *p,
				struct corral_err *err);
void httprules_free(struct httprules *r);
/* Is host:port terminated (network.tls, a rule, a secret for it)? */
bool httprules_terminate(const struct httprules *r, const char *host,
			 uint16_t port);
/*
 * Does a rule narrow host:port (its methods, paths or max_body)?  Then each
 * request to it must be read, also on a tunnel that is not terminated
 * (plain HTTP on port 80): passed on blind, a tunnel carries any request.
 */
bool httprules_narrowed(const struct httprules *r, const char *host,
			uint16_t port);
/*
 * May this request (its head parsed) go to host:port?  0, or an HTTP status
 * (403, 413, 414, 431) with why set.
 */
int httprules_check(const struct httprules *r, const char *host, uint16_t port,
		    const struct httpreq *rq, char *why, size_t whylen);
/* Does an allow pattern name host:port (host canonical, as egress gave it)? */
struct egress_pattern;
bool httprules_host_matches(const struct egress_pattern *p, const char *host,
			    uint16_t port);
/* The body cap for host:port, 0: none. */
uint64_t httprules_max_body(const struct httprules *r, const char *host,
			    uint16_t port);

/* ---- secrets (secrets.c) -------------------------------------------------- */

struct secrets;

/* Read the values (from_env, from_file), make a placeholder for each. */
struct secrets *secrets_new(const struct corral_policy *p, struct corral_err *err);
void secrets_free(struct secrets *s);
size_t secrets_count(const struct secrets *s);
/* NAME and placeholder of secret i, for the environment inside. */
const char *secrets_name(const struct secrets *s, size_t i);
const char *secrets_placeholder(const struct secrets *s, size_t i);
/*
 * A request head as httpreq_origin_form() wrote it: swap each placeholder
 * for its value where allowed (swap true: a terminated, verified connection
 * to host), into a new buffer *out (malloc'd) of *outlen bytes; to a host
 * a secret goes to, with "Accept-Encoding: identity" in place of the
 * client's (what comes back is scanned as it comes).  Returns 0, or
 * -EACCES with why (naming the secret, never its value) when a placeholder
 * sits anywhere it may not go, a value is in the head as it came (the
 * sandbox should not know one), or a TRACE would carry a value.
 */
int secrets_rewrite_head(const struct secrets *s, const char *head, size_t len,
			 const char *host, uint16_t port, bool swap, char **out,
			 size_t *outlen,
			 char *why, size_t whylen);
/*
 * Body bytes, in order: does any placeholder or value appear (also across
 * calls: tail keeps the last bytes, as many as the longest needle, in
 * memory made at the first call)?  -EACCES with why if so.  A body's state
 * starts zeroed (ntail 0 again for the next body); secrets_scan_free at
 * the connection's end.
 */
struct secrets_scan {
	char *tail;
	size_t ntail;
};
int secrets_scan(const struct secrets *s, struct secrets_scan *st,
		 const void *buf, size_t len, char *why, size_t whylen);
void secrets_scan_free(struct secrets_scan *st);

/* Every form of every value in p[0..n) masked (a path for an event); how many. */
size_t secrets_redact(const struct secrets *s, char *p, size_t n);
/* The name of the secret whose value p[0..n) spells; NULL: none. */
const char *secrets_value_in(const struct secrets *s, const char *p, size_t n);
/* Does a secret go to host:port (so that what it answers is scanned)? */
bool secrets_bound(const struct secrets *s, const char *host, uint16_t port);

/*
 * What comes back from a host that secrets go to: each form of each of
 * their values (raw, base64 at each alignment, both alphabets), in any
 * spelling (spell.h: percent, JSON and HTML escapes, mixed), overwritten
 * with a mask as long.  Pure: the caller frames the
 * bytes (httpresp.c) and holds back a tail that may be a value's start.
 * NULL with errno 0: no secret goes to host:port; ENOMEM.
 */
struct secrets_mask;
struct secrets_mask *secrets_mask_new(const struct secrets *s, const char *host,
				      uint16_t port);
void secrets_mask_free(struct secrets_mask *m);
/* Mask every form in p[0..n) in place; how many were masked. */
size_t secrets_mask_apply(struct secrets_mask *m, char *p, size_t n);
/* The longest tail of p[0..n) a spelling of a form begins (and runs on past). */
size_t secrets_mask_partial(const struct secrets_mask *m, const char *p, size_t n);
struct httpresp;
/*
 * buf[0, len): an answer as read, framed by r (httpresp_feed; after a
 * refusal, its whole messages before r->start).  Each form masked in the
 * content, joined across chunks, and where framing was left out in the
 * bytes as they came too.  *rel: how much may go on now: all at eof, else
 * less a tail of content or of framing that may begin a spelling, never
 * less than the whole messages.  The count masked, or -ENOMEM.
 */
ssize_t secrets_mask_answer(struct secrets_mask *m, struct httpresp *r, char *buf,
			    size_t len, bool eof, size_t *rel);
/*
 * How many holds of a value's first bytes (8 or more) went on since the
 * last call, the bytes after them no value: each told the agent, by its
 * delay, that what an echo had sent back began a value (a guess right).
 */
size_t secrets_mask_take_guesses(struct secrets_mask *m);
/*
 * The answer goes no further (its connection ends): a hold of a value's
 * first bytes still waiting is counted as a guess, as its delay was seen
 * all the same (an agent that closes once its guess is held).
 */
void secrets_mask_abandon(struct secrets_mask *m);
/* The names of the secrets masked so far, a JSON array (never a value). */
json_t *secrets_mask_names(const struct secrets_mask *m);

/* ---- the whole, per sandbox ---------------------------------------------- */

struct tlsbox {
	const struct tls_ops *ops;	/* corral-tls.so's */
	struct tls_ca *ca;		/* made by ops->ca_new; never NULL here */
	struct httprules *rules;
	struct secrets *secrets;
};

/*
 * NULL with err->code 0: the policy asks for none of this.  Otherwise it
 * loads corral-tls.so (the first time): without it, err and NULL.
 */
struct tlsbox *tlsbox_new(const struct corral_policy *p, struct corral_err *err);
void tlsbox_free(struct tlsbox *t);
/* The variables inside: the CA's paths for each client, the placeholders. */
int tlsbox_env(const struct tlsbox *t, char ***envp, size_t *n);

#endif
