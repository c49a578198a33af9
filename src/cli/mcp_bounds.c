/*
 * mcp_bounds.c - what a model may ask of `corral mcp`, bounded by the
 * operator's policy (`--policy FILE`, else the built-in default).
 *
 * A model's sandbox_create may name a policy, give one inline, a list of
 * hosts and limits.  They are merged over the operator's policy object
 * (objects key by key, anything else replaced), and the result is loaded
 * exactly as the daemon will load it (over the built-in default).  Then
 * every field that could widen what the sandbox may do is compared with
 * the operator's: the model may narrow (lower limits, fewer hosts, more
 * denials), never widen; a request that widens is refused with the field,
 * the bound and what was asked, so the model can ask again within it.
 * Limits, network, abort criteria, the log and export holds are judged
 * by the library (corral_policy_within, which corral serve uses too);
 * host paths, the workspace, env.pass, the image and identity.user here,
 * where the operator's policy is their bound as well.
 */
#include "mcp.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *say(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	return n < 0 ? NULL : s;
}

int mcp_bounds_load(struct mcp_bounds *b, const char *file)
{
	struct corral_err err = { 0 };
	json_error_t jerr;

	corral_policy_init(&b->limit);
	if (!file) {
		b->policy = json_object();
		return b->policy ? 0 : out_of_memory("the operator's policy");
	}
	if (corral_policy_load_file(&b->limit, file, &err) < 0) {
		cli_error("mcp: --policy %s", err.msg);
		return 2;
	}
	b->policy = json_load_file(file, JSON_REJECT_DUPLICATES, &jerr);
	if (!json_is_object(b->policy)) {
		cli_error("mcp: --policy %s: not a JSON object", file);
		return 2;
	}
	return 0;
}

void mcp_bounds_free(struct mcp_bounds *b)
{
	json_decref(b->policy);
	corral_policy_free(&b->limit);
	free(b->policy_dirs);
}

/* "policy": NAME -> NAME.json in one of the --policy-dir directories. */
static json_t *named_policy(const struct mcp_bounds *b, const char *name,
			    char **why)
{
	json_error_t jerr;
	char path[PATH_MAX];

	if (!strcmp(name, "default"))
		return json_object();
	for (const char *c = name; *c; c++)
		if (!isalnum((unsigned char)*c) && *c != '-' && *c != '_') {
			*why = say("policy: a policy name is letters, digits, - and _ (got \"%.64s\")",
				   name);
			return NULL;
		}
	for (size_t i = 0; i < b->npolicy_dirs; i++) {
		json_t *o;

		if (snprintf(path, sizeof(path), "%s/%s.json", b->policy_dirs[i],
			     name) >= (int)sizeof(path))
			continue;
		if (access(path, R_OK) < 0)
			continue;
		o = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
		if (!json_is_object(o)) {
			json_decref(o);
			*why = say("policy \"%s\": %s is not a JSON object", name, path);
			return NULL;
		}
		json_object_del(o, "description");
		return o;
	}
	*why = say("policy: no policy named \"%.64s\"%s; give \"default\" or an inline policy object",
		   name, b->npolicy_dirs ? " in the operator's policy directories" :
		   " (the operator gave no --policy-dir)");
	return NULL;
}

/* The model's asks as one policy object: policy, allow_hosts, limits. */
static json_t *asked_policy(const struct mcp_bounds *b, const json_t *args,
			    char **why)
{
	json_t *p = json_object_get(args, "policy"), *asked, *v;

	if (json_is_string(p))
		asked = named_policy(b, json_string_value(p), why);
	else if (json_is_object(p))
		asked = json_deep_copy(p);
	else if (!p)
		asked = json_object();
	else {
		*why = say("policy: a policy name (string) or a policy object");
		return NULL;
	}
	if (!asked)
		return NULL;
	v = json_object_get(args, "allow_hosts");
	if (v) {
		json_t *net = json_pack("{s:{s:s,s:O}}", "network", "mode", "proxy",
					"allow", v);

		if (!json_is_array(v) || !net || corral_json_merge(asked, net) < 0) {
			json_decref(net);
			json_decref(asked);
			*why = say("allow_hosts: a list of host patterns");
			return NULL;
		}
		json_decref(net);
	}
	v = json_object_get(args, "limits");
	if (v) {
		json_t *lim = json_pack("{s:O}", "limits", v);

		if (!json_is_object(v) || !lim || corral_json_merge(asked, lim) < 0) {
			json_decref(lim);
			json_decref(asked);
			*why = say("limits: an object like {\"memory\": \"512M\", \"pids\": 64}");
			return NULL;
		}
		json_decref(lim);
	}
	return asked;
}

static bool in_list(char **list, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(list[i], s))
			return true;
	return false;
}

static bool bind_allowed(const struct corral_bind *b, const struct corral_policy *l)
{
	for (size_t i = 0; i < l->nbinds; i++)
		if (!strcmp(b->src, l->binds[i].src) && !strcmp(b->dst, l->binds[i].dst) &&
		    (!b->writable || l->binds[i].writable))
			return true;
	return false;
}

void mcp_pin_close(struct mcp_pin *pin)
{
	if (pin->fd >= 0)
		close(pin->fd);
	pin->fd = -1;
}

/* path is lim or inside it (lim is the operator's: resolved by name). */
static bool path_within(const char *path, const char *lim)
{
	char b[PATH_MAX];
	size_t n;

	if (!realpath(lim, b))
		return false;
	n = strlen(b);
	if (n == 1)
		return true;
	return !strncmp(path, b, n) && (path[n] == '\0' || path[n] == '/');
}

/*
 * The directory dir names, opened once (symlinks followed, as the model
 * named it) and judged by where what was opened is: a name checked and
 * handed on could be swapped between the check and the daemon's open.
 */
static char *pin_workspace(const char *dir, const char *lim, struct mcp_pin *pin)
{
	char self[64];
	struct stat st;
	ssize_t n;

	pin->fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (pin->fd < 0)
		return say("workspace: %s: %s", dir, strerror(errno));
	snprintf(self, sizeof(self), "/proc/self/fd/%d", pin->fd);
	n = readlink(self, pin->path, sizeof(pin->path) - 1);
	if (n < 0 || fstat(pin->fd, &st) < 0) {
		int e = errno;

		mcp_pin_close(pin);
		return say("workspace: %s: %s", dir, strerror(e));
	}
	pin->path[n] = '\0';
	pin->dev = st.st_dev;
	pin->ino = st.st_ino;
	if (pin->path[0] != '/' || !path_within(pin->path, lim)) {
		mcp_pin_close(pin);
		return say("workspace: %s (%s) is not the operator's workspace %s or inside it",
			   dir, pin->path, lim);
	}
	return NULL;
}

static char *check_files(const struct corral_policy *p,
			 const struct corral_policy *l, const char *workspace,
			 struct mcp_pin *pin)
{
	size_t i;

	for (i = 0; i < p->nbinds; i++)
		if (!bind_allowed(&p->binds[i], l))
			return say("filesystem: the host path %s (%s at %s) is not one the operator's policy shows",
				   p->binds[i].src, p->binds[i].writable ? "writable" :
				   "read-only", p->binds[i].dst);
	/*
	 * The root the operator chose: an image of the store holds what the
	 * operator imported for other uses (its tools, its files), and the
	 * host's /usr is not the model's to swap for one either.
	 */
	if (p->image && (!l->image || strcmp(p->image, l->image)))
		return say("filesystem.image: the operator's policy runs on %s%s; the model cannot pick another root (got %s)",
			   l->image ? "the image " : "the host's /usr",
			   l->image ? l->image : "", p->image);
	if (p->root_inside && !l->root_inside)
		return say("identity.user: the operator's policy runs commands as \"agent\" (got \"root\")");
	for (i = 0; i < p->nenv_pass; i++)
		if (!in_list(l->env_pass, l->nenv_pass, p->env_pass[i]))
			return say("env.pass: %s is not passed by the operator's policy",
				   p->env_pass[i]);
	/* the daemon takes the create's workspace over the policy's: that one last */
	for (i = 0; i < 2; i++) {
		const char *w = i ? workspace : p->workspace;
		char *why;

		if (!w)
			continue;
		if (!l->workspace)
			return say("workspace: the operator's policy shows no host directory as a workspace (got %s)",
				   w);
		mcp_pin_close(pin);
		why = pin_workspace(w, l->workspace, pin);
		if (why)
			return why;
	}
	return NULL;
}

json_t *mcp_bounds_policy(const struct mcp_bounds *b, const json_t *args,
			  const char *workspace, struct mcp_pin *pin, char **why)
{
	struct corral_err err = { 0 };
	struct corral_policy p;
	json_t *asked, *eff;
	char *text;

	pin->fd = -1;
	asked = asked_policy(b, args, why);
	if (!asked)
		return NULL;
	eff = json_deep_copy(b->policy);
	if (!eff || corral_json_merge(eff, asked) < 0) {
		json_decref(asked);
		json_decref(eff);
		*why = say("out of memory");
		return NULL;
	}
	json_decref(asked);
	text = json_dumps(eff, JSON_COMPACT);
	corral_policy_init(&p);
	if (!text) {
		*why = say("out of memory");
	} else if (corral_policy_load_string(&p, text, strlen(text), "policy", &err) < 0) {
		*why = say("%s", err.msg);
	} else if (corral_policy_within(&p, &b->limit, &err) < 0) {
		*why = say("%s", err.msg);
	} else {
		*why = check_files(&p, &b->limit, workspace, pin);
	}
	corral_policy_free(&p);
	free(text);
	if (*why) {
		mcp_pin_close(pin);
		json_decref(eff);
		return NULL;
	}
	return eff;
}

int mcp_bounds_timeout(const struct mcp_bounds *b, double asked, double *out,
		       char **why)
{
	double lim = b->limit.timeout_ms / 1000.0;

	*why = NULL;
	if (asked < 0) {
		*out = MCP_EXEC_TIMEOUT_DEFAULT;
		if (lim > 0 && lim < *out)
			*out = lim;
		return 0;
	}
	if (asked == 0 || (lim > 0 && asked > lim)) {
		*why = lim > 0 ? say("timeout_seconds: the operator's policy allows at most %g seconds (got %g)",
				     lim, asked) :
				 say("timeout_seconds: must be more than 0 (got %g)", asked);
		return -1;
	}
	*out = asked;
	return 0;
}
