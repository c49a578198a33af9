/*
 * srt.c - the settings file of Anthropic's sandbox-runtime (srt), read as
 * a corral policy, so that users moving from srt keep their file.
 *
 * srt starts from the host's whole filesystem, readable, and takes away
 * (denyRead) and gives writes (allowWrite, minus denyWrite); corral starts
 * from the system's directories read-only and adds binds.  What translates:
 *
 *   network.allowedDomains   network.allow (and mode "proxy")
 *   network.deniedDomains    network.deny
 *   filesystem.allowWrite    "rw" binds, each at its own path
 *   filesystem.allowRead     "ro" binds
 *   filesystem.denyWrite     "ro" binds over a path a write bind holds
 *                            (the settings', a --policy's or a --rw
 *                            flag's); elsewhere already read-only
 *   filesystem.denyRead      nothing to do where corral does not show the
 *                            path; under a bind filesystem.hide: masked
 *                            there (a project's ./.env under allowWrite
 *                            "."), which the sandbox would read otherwise;
 *                            the --policy's binds and workspace too, at
 *                            the path they show it, and the --workspace,
 *                            --ro and --rw flags' (the CLI applies them
 *                            before the settings)
 *
 * Everything else is said, key by key, in the report: what it was and why
 * it did not map.  "~" is the caller's $HOME, a relative path is under the
 * current directory, as srt reads them.
 */
#include "internal.h"
#include "policy_int.h"
#include "egress.h"

#include <errno.h>
#include <stdarg.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What corral's view of the host holds without any bind (mount.c). */
static const char *const shown[] = {
	"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
	"/etc/ssl", "/etc/ca-certificates", "/etc/alternatives", "/etc/localtime",
	"/etc/ld.so.cache", "/etc/mime.types",
};

struct srt {
	json_t *policy;		/* the translation */
	FILE *report;		/* one line a key */
	json_t *rw;		/* paths bound writable, absolute */
	const struct corral_policy *base;	/* the --policy's, loaded before */
};

static void say(struct srt *s, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void say(struct srt *s, const char *key, const char *fmt, ...)
{
	va_list ap;

	fprintf(s->report, "%s: ", key);
	va_start(ap, fmt);
	vfprintf(s->report, fmt, ap);
	va_end(ap);
	fputc('\n', s->report);
}

/* "~/x", "./x", "x" -> absolute; NULL if it cannot be. */
static char *absolute(const char *path)
{
	const char *home = getenv("HOME");
	char cwd[PATH_MAX], *out = NULL;

	if (path[0] == '/')
		return strdup(path);
	if (path[0] == '~' && (path[1] == '/' || !path[1])) {
		if (!home || home[0] != '/')
			return NULL;
		return asprintf(&out, "%s%s", home, path + 1) < 0 ? NULL : out;
	}
	if (!getcwd(cwd, sizeof(cwd)))
		return NULL;
	if (!strcmp(path, "."))
		return strdup(cwd);
	return asprintf(&out, "%s/%s", cwd, path[0] == '.' && path[1] == '/' ?
			path + 2 : path) < 0 ? NULL : out;
}

static bool under(const char *path, const char *top)
{
	size_t n = strlen(top);

	return !strncmp(path, top, n) && (path[n] == '/' || !path[n] ||
					  (n == 1 && top[0] == '/'));
}

static json_t *obj(json_t *parent, const char *key)
{
	json_t *o = json_object_get(parent, key);

	if (!o) {
		o = json_object();
		json_object_set_new(parent, key, o);
	}
	return o;
}

static void push(json_t *parent, const char *key, const char *value)
{
	json_t *a = json_object_get(parent, key);

	if (!a) {
		a = json_array();
		json_object_set_new(parent, key, a);
	}
	json_array_append_new(a, json_string(value));
}

/* each element of an array of strings, with its key for the report */
#define FOREACH_STRING(arr, i, v, key, s)                                      \
	for (i = 0; i < json_array_size(arr) &&                               \
		    (v = json_array_get(arr, i), 1) &&                        \
		    (snprintf(key, sizeof(key), "%.60s[%zu]", name, i), 1); i++)\
		if (!(s = json_string_value(v)))                              \
			say(srt, key, "not mapped: not a string");            \
		else

static void domains(struct srt *srt, json_t *arr, const char *name, bool allow)
{
	json_t *net = obj(srt->policy, "network"), *v;
	char key[96], why[256];
	struct egress_pattern ep;
	const char *s;
	size_t i;

	if (!json_is_array(arr)) {
		say(srt, name, "not mapped: not an array");
		return;
	}
	json_object_set_new(net, "mode", json_string("proxy"));
	if (allow && json_array_size(arr) == 0)
		say(srt, name, "empty: network.mode \"proxy\" with nothing allowed");
	FOREACH_STRING(arr, i, v, key, s) {
		if (egress_pattern_parsen(s, strlen(s), &ep, allow, why, sizeof(why))) {
			say(srt, key, "not mapped: %s (got \"%.100s\")", why, s);
			continue;
		}
		push(net, allow ? "allow" : "deny", s);
		say(srt, key, "\"%.100s\" -> network.%s", s, allow ? "allow" : "deny");
	}
}

static bool exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0;
}

static void binds(struct srt *srt, json_t *arr, const char *name, bool writable)
{
	json_t *fs = obj(srt->policy, "filesystem"), *v;
	char key[96];
	const char *s;
	size_t i;

	FOREACH_STRING(arr, i, v, key, s) {
		char *p = absolute(s);

		if (!p || !exists(p)) {
			say(srt, key, "not mapped: \"%.100s\" %s", s,
			    p ? "does not exist (corral binds what exists)" :
			    "has no absolute path");
		} else if (!strcmp(p, "/")) {
			say(srt, key, "not mapped: corral never binds the host's root");
		} else {
			push(fs, writable ? "rw" : "ro", p);
			if (writable)
				json_array_append_new(srt->rw, json_string(p));
			say(srt, key, "\"%.100s\" -> filesystem.%s \"%s\"", s,
			    writable ? "rw" : "ro", p);
		}
		free(p);
	}
}

/* The write bind that holds path, or NULL. */
static const char *in_rw(struct srt *srt, const char *path)
{
	json_t *v;
	size_t i;

	json_array_foreach(srt->rw, i, v)
		if (under(path, json_string_value(v)))
			return json_string_value(v);
	return NULL;
}

static const char *in_shown(const char *path)
{
	for (size_t i = 0; i < sizeof(shown) / sizeof(shown[0]); i++)
		if (under(path, shown[i]))
			return shown[i];
	return NULL;
}

/*
 * The base policy's writable bind (a --policy's, or a --rw flag's) that
 * holds the host path, or NULL; the sandbox's path in *out.  The deepest:
 * a read-only bind over part of it is that one's.
 */
static const char *base_rw(const struct corral_policy *b, const char *path, char **out)
{
	const struct corral_bind *best = NULL;

	*out = NULL;
	for (size_t i = 0; b && i < b->nbinds; i++)
		if (under(path, b->binds[i].src) &&
		    (!best || strlen(b->binds[i].src) > strlen(best->src)))
			best = &b->binds[i];
	if (!best || !best->writable ||
	    asprintf(out, "%s%s", best->dst, path + strlen(best->src)) < 0) {
		*out = NULL;
		return NULL;
	}
	return best->src;
}

static void deny_write(struct srt *srt, json_t *arr, const char *name)
{
	json_t *fs = obj(srt->policy, "filesystem"), *v;
	char key[96];
	const char *s;
	size_t i;

	FOREACH_STRING(arr, i, v, key, s) {
		char *p = absolute(s), *at = NULL, *spec = NULL;
		const char *top = p ? in_rw(srt, p) : NULL, *btop = NULL;

		if (!p)
			say(srt, key, "not mapped: \"%.100s\" has no absolute path", s);
		else if (!top && (btop = base_rw(srt->base, p, &at)) && !exists(p))
			say(srt, key, "not mapped: \"%.100s\" is under the policy's write bind "
			    "of %s but does not exist (corral cannot make a path read-only "
			    "before it exists)", s, btop);
		else if (btop) {
			/*
			 * A --rw flag's or --policy's bind, judged too: it was
			 * said to be read-only, and the sandbox wrote it.  A
			 * read-only bind of the host path at the sandbox's.
			 */
			if (asprintf(&spec, "%s:%s", p, at) < 0) {
				spec = NULL;
				say(srt, key, "not mapped: \"%.100s\": out of memory", s);
			} else {
				push(fs, "ro", spec);
				say(srt, key, "\"%.100s\" -> filesystem.ro \"%s\", over the "
				    "policy's write bind of %s", s, spec, btop);
			}
			free(spec);
		} else if (!top)
			say(srt, key, "\"%.100s\": already read-only in corral (no write bind holds it)", s);
		else if (!exists(p))
			say(srt, key, "not mapped: \"%.100s\" is under the write bind %s but does "
			    "not exist (corral cannot make a path read-only before it exists)", s, top);
		else {
			push(fs, "ro", p);
			say(srt, key, "\"%.100s\" -> filesystem.ro \"%s\", over the write bind %s",
			    s, p, top);
		}
		free(at);
		free(p);
	}
}

/*
 * What srt keeps read-only inside every path it lets the sandbox write,
 * whatever the settings say (sandbox-runtime's mandatory denials): files
 * the user's git, shell, editor or agent runs or reads as configuration
 * later, outside any sandbox.  Without them an allowWrite of "." let the
 * sandbox write .git/hooks/pre-commit and .git/config's core.fsmonitor
 * straight into the host's project, run by the user's next commit.  A
 * path that does not exist cannot be bound, and is said.
 */
static const char *const kept_read_only[] = {
	".git/hooks", ".git/config", ".gitconfig", ".gitmodules",
	".bashrc", ".bash_profile", ".zshrc", ".zprofile", ".profile",
	".ripgreprc", ".mcp.json", ".vscode", ".idea", ".claude/commands",
	".claude/agents", ".claude/settings.json", ".claude/settings.local.json",
};

static bool listed(json_t *arr, const char *path)
{
	json_t *v;
	size_t i;

	json_array_foreach(arr, i, v)
		if (!strcmp(json_string_value(v), path))
			return true;
	return false;
}

static void keep_read_only(struct srt *srt)
{
	json_t *fs = obj(srt->policy, "filesystem"), *top;
	size_t i;

	json_array_foreach(srt->rw, i, top) {
		const char *dir = json_string_value(top);
		char key[96], missing[512] = "", *p, *real;
		struct stat st;

		/* a file bound alone holds none of them */
		if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
			continue;
		snprintf(key, sizeof(key), "filesystem.allowWrite \"%.60s\"", dir);
		for (size_t k = 0; k < sizeof(kept_read_only) / sizeof(kept_read_only[0]); k++) {
			if (asprintf(&p, "%s%s%s", dir, strcmp(dir, "/") ? "/" : "",
				     kept_read_only[k]) < 0) {
				say(srt, key, "not mapped: %s: out of memory", kept_read_only[k]);
				continue;
			}
			/*
			 * A link on the way (.git/hooks -> hooks) cannot be
			 * bound over (binds follow no link: the run was
			 * refused), and the sandbox may replace it: said.
			 */
			real = realpath(p, NULL);
			if (!real)
				snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing),
					 "%s%s", missing[0] ? ", " : "", kept_read_only[k]);
			else if (strcmp(real, p))
				say(srt, key, "%s is reached through a link (to %s): not kept "
				    "read-only (the sandbox may replace the link)", kept_read_only[k],
				    real);
			else if (!listed(json_object_get(fs, "ro"), real)) {
				push(fs, "ro", real);
				say(srt, key, "%s -> filesystem.ro \"%s\", as srt keeps it",
				    kept_read_only[k], real);
			}
			free(real);
			free(p);
		}
		if (missing[0])
			say(srt, key, "not kept read-only as srt would, as they do not exist "
			    "(corral cannot make a path read-only before it exists; the "
			    "sandbox may make them): %s", missing);
	}
}

/* The bind (either kind) that holds path, or NULL. */
static const char *bound_at(json_t *fs, const char *path)
{
	json_t *b;
	size_t i;

	for (int rw = 0; rw < 2; rw++)
		json_array_foreach(json_object_get(fs, rw ? "rw" : "ro"), i, b)
			if (under(path, json_string_value(b)))
				return json_string_value(b);
	return NULL;
}

/*
 * Where the base policy (a --policy loaded before the settings) shows the
 * host path: the sandbox's path in *out, the host directory it is under
 * as the result; NULL where it does not.  Its binds may show a host
 * directory at another path, its workspace is at /workspace.
 */
static const char *base_view(const struct corral_policy *b, const char *path, char **out)
{
	const char *src = NULL, *dst = NULL;

	for (size_t i = 0; b && i < b->nbinds; i++)
		if (under(path, b->binds[i].src) &&
		    (!src || strlen(b->binds[i].src) > strlen(src))) {
			src = b->binds[i].src;
			dst = b->binds[i].dst;
		}
	if (!src && b && b->workspace && under(path, b->workspace)) {
		src = b->workspace;
		dst = "/workspace";
	}
	if (!src || asprintf(out, "%s%s", dst, path + strlen(src)) < 0)
		return NULL;
	return src;
}

static void deny_read(struct srt *srt, json_t *arr, const char *name)
{
	json_t *fs = obj(srt->policy, "filesystem"), *v;
	char key[96];
	const char *s;
	size_t i;

	FOREACH_STRING(arr, i, v, key, s) {
		char *p = absolute(s), *at = NULL;
		const char *top = p ? bound_at(fs, p) : NULL;

		if (!p)
			say(srt, key, "not mapped: \"%.100s\" has no absolute path", s);
		else if (top && !exists(p))
			/*
			 * Nothing to mask: what the sandbox makes there is its
			 * own.  Said, since what the host makes there during
			 * the run the sandbox reads.
			 */
			say(srt, key, "\"%.100s\" is inside the bind %s but does not exist: "
			    "nothing to hide (a file the host makes there during the run "
			    "is readable)", s, top);
		else if (top) {
			push(fs, "hide", p);
			say(srt, key, "\"%.100s\" -> filesystem.hide \"%s\", inside the bind %s",
			    s, p, top);
		} else if ((top = base_view(srt->base, p, &at)) && !exists(p)) {
			say(srt, key, "\"%.100s\" is inside the policy's bind of %s but does not "
			    "exist: nothing to hide (a file the host makes there during the run "
			    "is readable)", s, top);
		} else if (top) {
			push(fs, "hide", at);
			say(srt, key, "\"%.100s\" -> filesystem.hide \"%s\", inside the policy's "
			    "bind of %s", s, at, top);
		} else if ((top = in_shown(p)))
			say(srt, key, "not mapped: corral shows the host's %s read-only", top);
		else
			say(srt, key, "\"%.100s\": already unreadable (not in corral's view of the host)", s);
		free(at);
		free(p);
	}
}

static const char *const net_unmapped[][2] = {
	{ "allowUnixSockets", "corral does not filter connect(2): a host Unix socket is "
			      "reachable when a bind shows it (bind its file to pass one; "
			      "/run, /tmp, /var/tmp and session runtime directories are refused "
			      "as binds)" },
	{ "allowAllUnixSockets", "corral does not filter connect(2): a host Unix socket is "
				 "reachable when a bind shows it (bind its file to pass one; "
				 "/run, /tmp, /var/tmp and session runtime directories are refused "
				 "as binds)" },
	{ "allowLocalBinding", "always so in corral: the sandbox binds on its own loopback, "
			       "which the host cannot reach" },
	{ "httpProxyPort", "corral's proxy listens inside the sandbox on 3128 (HTTP_PROXY is set)" },
	{ "socksProxyPort", "corral's proxy listens inside the sandbox on 1080 (ALL_PROXY is set)" },
};

static void network(struct srt *srt, json_t *net)
{
	const char *k;
	json_t *v;

	json_object_foreach(net, k, v) {
		char key[96];
		size_t i;

		snprintf(key, sizeof(key), "network.%s", k);
		if (!strcmp(k, "allowedDomains") || !strcmp(k, "deniedDomains")) {
			domains(srt, v, key, k[0] == 'a');
			continue;
		}
		for (i = 0; i < sizeof(net_unmapped) / sizeof(net_unmapped[0]); i++)
			if (!strcmp(k, net_unmapped[i][0]))
				break;
		say(srt, key, "not mapped: %s", i < sizeof(net_unmapped) / sizeof(net_unmapped[0]) ?
		    net_unmapped[i][1] : "no corral equivalent");
	}
}

static int filesystem(struct srt *srt, json_t *fs, struct corral_err *err)
{
	const char *k;
	json_t *v;

	/* writes first: denyWrite and denyRead are judged against the binds */
	binds(srt, json_object_get(fs, "allowWrite"), "filesystem.allowWrite", true);
	binds(srt, json_object_get(fs, "allowRead"), "filesystem.allowRead", false);
	deny_write(srt, json_object_get(fs, "denyWrite"), "filesystem.denyWrite");
	keep_read_only(srt);
	deny_read(srt, json_object_get(fs, "denyRead"), "filesystem.denyRead");
	json_object_foreach(fs, k, v)
		if (strcmp(k, "allowWrite") && strcmp(k, "allowRead") &&
		    strcmp(k, "denyWrite") && strcmp(k, "denyRead"))
			say(srt, "filesystem", "%s: not mapped: no corral equivalent", k);
	return 0;
}

/* Translate settings (srt's JSON) into a policy document and a report. */
static int translate(json_t *settings, struct srt *srt, struct corral_err *err)
{
	const char *k;
	json_t *v;

	if (!json_is_object(settings))
		return corral_set_err(err, -EINVAL, "srt settings: expected a JSON object");
	json_object_foreach(settings, k, v) {
		if (!strcmp(k, "network") && json_is_object(v))
			network(srt, v);
		else if (!strcmp(k, "filesystem") && json_is_object(v)) {
			if (filesystem(srt, v, err) < 0)
				return err->code;
		}
		else
			say(srt, k, "not mapped: %s", !strcmp(k, "ignoreViolations") ?
			    "corral records every violation as an event; abort criteria decide" :
			    !strcmp(k, "enableWeakerNestedSandbox") ?
			    "corral has no weaker mode" : "no corral equivalent");
	}
	return 0;
}

int corral_policy_load_srt_file(struct corral_policy *p, const char *path,
				char **report, struct corral_err *err)
{
	struct srt srt = { .policy = json_object(), .rw = json_array(), .base = p };
	size_t report_len = 0;
	json_error_t je;
	json_t *settings = NULL;
	char *text = NULL, name[PATH_MAX + 8];
	FILE *f;
	int r;

	*report = NULL;
	srt.report = open_memstream(report, &report_len);
	if (!srt.policy || !srt.rw || !srt.report) {
		r = corral_set_err(err, -ENOMEM, "out of memory translating %s", path);
		goto out;
	}
	/* opened here: jansson's own open failure is "PATH:-1:-1: unable to open PATH" */
	f = fopen(path, "re");
	if (!f) {
		r = corral_set_errno(err, errno, "%s", path);
		goto out;
	}
	settings = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
	fclose(f);
	if (!settings) {
		r = corral_set_err(err, -EINVAL, "%s:%d:%d: %s", path, je.line, je.column, je.text);
		goto out;
	}
	r = translate(settings, &srt, err);
	if (r == 0) {
		text = json_dumps(srt.policy, JSON_SORT_KEYS);
		snprintf(name, sizeof(name), "%s (srt)", path);
		/*
		 * Added to the policy, not replacing its lists: srt's keys
		 * grant (allowedDomains, allowWrite) and take away
		 * (deniedDomains) over a base, and a --policy's denials must
		 * outlive a settings file that has some of its own.
		 */
		r = text ? policy_load_layer(p, text, strlen(text), name, true, err) :
			   corral_set_err(err, -ENOMEM, "out of memory translating %s", path);
	}
out:
	if (srt.report)
		fclose(srt.report);
	if (r < 0) {
		free(*report);
		*report = NULL;
	}
	free(text);
	json_decref(settings);
	json_decref(srt.policy);
	json_decref(srt.rw);
	return r;
}
