/*
 * policy_int.h - what the parts of policy loading share: the loader and
 * the policy's own helpers (policy.c), sizes and durations (units.c), and
 * the schema (policy_schema.c).  Nothing outside them includes it.
 */
#ifndef CORRAL_POLICY_INT_H
#define CORRAL_POLICY_INT_H

#include "internal.h"
#include "jsonpos.h"

#include <jansson.h>
#include <stdint.h>

#define KiB (UINT64_C(1) << 10)
#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)
#define TiB (UINT64_C(1) << 40)

#define ENV_VALUE_MAX		(32 * KiB)

/* How much of an offending value an error message quotes. */
#define GOT_MAX			60

/* ---- policy.c: the loader, a policy being filled from one JSON document -- */

/* Deepest path the schema has: network.allow[N].methods[M]. */
#define LOADER_DEPTH 5

struct loader {
	const char *text;
	size_t len;
	const char *name;
	struct corral_policy *p;		/* a copy; swapped in on success */
	struct corral_err *err;
	struct jsonpos_step path[LOADER_DEPTH];
	size_t depth;
	/*
	 * false (corral_policy_load_*): a list in the document replaces the
	 * policy's, as corral_json_merge does; true: it is added to it (an
	 * srt settings file's grants and denials, over the policy: srt.c).
	 */
	bool append;
};

/* corral_policy_load_string, with the choice of lists added, not replaced */
int policy_load_layer(struct corral_policy *p, const char *text, size_t len,
		      const char *name, bool append, struct corral_err *err);

/* s[0..n) as a JSON string literal of at most GOT_MAX bytes; len >= GOT_MAX + 8. */
void policy_quote(const char *s, size_t n, char *buf, size_t len);

/* "NAME:LINE:COL: dotted.key: reason (got VALUE)"; returns -EINVAL. */
int loader_fail(struct loader *l, bool at_key, const json_t *got,
		const char *fmt, ...) __attribute__((format(printf, 4, 5)));
int loader_fail_relative(struct loader *l, const json_t *got, const char *what,
			 const char *flag);
int loader_nomem(struct loader *l);
int loader_push_key(struct loader *l, const char *key);
int loader_push_index(struct loader *l, size_t index);
void loader_pop(struct loader *l);
int loader_get_string(struct loader *l, const json_t *v, const char **s,
		      size_t *n);

/* ---- policy.c: paths, binds and the policy's arrays ------------------------ */

int policy_normalise_path(const char *in, size_t n, const char *what,
			  char **out, char *why, size_t whylen);
bool policy_path_under(const char *path, const char *top);
/* 0, or -EINVAL and why: dst is "/" or within corral's own trees */
int policy_check_dst(const char *dst, char *why, size_t whylen);
int policy_parse_bind(const char *spec, size_t n, struct corral_bind *b,
		      char *why, size_t whylen);
int policy_bind_append(struct corral_policy *p, struct corral_bind *b);
int policy_pair_put(struct corral_env **pairs, size_t *n, const char *name,
		    size_t nlen, const char *value, size_t vlen);
int policy_env_put(struct corral_policy *p, const char *name, size_t nlen,
		   const char *value, size_t vlen);
int policy_strv_put(char ***v, size_t *count, const char *s, size_t n);
int policy_pass_put(struct corral_policy *p, const char *name);
/* one more rule of the export section's hold table (copies both strings) */
int policy_hold_rule_put(struct corral_export_policy *e, const char *path,
			 const char *check);
/* a layer's list replaces the earlier one's: these empty it first */
void policy_strv_clear(char ***v, size_t *count);
void policy_binds_clear(struct corral_policy *p, bool writable);
void policy_hold_clear(struct corral_export_policy *e);
const char *policy_env_name_problem(const char *s, size_t n);
int policy_net_mode(const char *s, enum corral_net_mode *mode);

/* ---- units.c --------------------------------------------------------------- */

/* Why s is not a size (a duration, in ms), or NULL with the value set. */
const char *units_size(const char *s, uint64_t *bytes);
const char *units_duration(const char *s, uint64_t *ms);

/* ---- policy_schema.c ------------------------------------------------------- */

/* Apply a policy document's root object to l->p, key by key. */
int policy_schema_apply(struct loader *l, json_t *root);
/* corral_policy_tls_within, the refusal naming the bound as n says */
int policy_tls_check(const struct corral_policy *p, const struct corral_policy *bound,
		     const struct corral_bound_name *n, struct corral_err *err);

#endif
