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
#include "srt_made.h"
#include "srt_pin.h"

#include <errno.h>
#include <stdarg.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <dirent.h>
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
	struct corral_srt_made *made;	/* what keep_read_only holds and made */
	json_t *pins;		/* [dir, path] of its binds beneath dir (srt_pin.c) */
	json_t *links;		/* the user's links kept as themselves, absolute */
	struct corral_err refused;	/* what could not be kept: the run refused */
	char via[PATH_MAX];	/* the last link kept on the way, for the refusal */
};

static void say(struct srt *s, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * A line quotes the settings' strings, which a project may have written:
 * their control bytes as \xNN, a newline too, so that one line is one key
 * (a value's newline and ESC wrote a line of their own, "corral: ...",
 * and a title, on the operator's stderr).  The CLI shows the rest with
 * printable().
 */
static void say(struct srt *s, const char *key, const char *fmt, ...)
{
	char *line = NULL;
	va_list ap;
	int n;

	fprintf(s->report, "%s: ", key);
	va_start(ap, fmt);
	n = vasprintf(&line, fmt, ap);
	va_end(ap);
	for (int i = 0; i < n; i++) {
		unsigned char c = line[i];

		if (c < 0x20 || c == 0x7f)
			fprintf(s->report, "\\x%02x", c);
		else
			fputc(c, s->report);
	}
	if (n < 0)
		fputs("(out of memory)", s->report);
	free(line);
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
 * straight into the host's project, run by the user's next commit.
 * Besides srt's: .envrc (direnv), a .git that is a file (a worktree's or
 * a submodule's: its "gitdir:" line names the repository git runs the
 * config and hooks of) and .git/commondir (where git takes the config
 * from), where they exist.  Directories first: a file in one is kept
 * with it.
 */
static const struct kept {
	const char *rel;
	bool dir;
	bool made;		/* made where it is not there (as srt does) */
	const char *as;		/* why, for the report; NULL: srt's list */
	const char *content;	/* a file made holds it; NULL: empty */
} kept_read_only[] = {
	{ ".git/hooks", true, true, NULL, NULL }, { ".vscode", true, true, NULL, NULL },
	{ ".idea", true, true, NULL, NULL }, { ".claude/commands", true, true, NULL, NULL },
	{ ".claude/agents", true, true, NULL, NULL },
	/*
	 * Not srt's, but what Claude Code, srt's embedder, keeps with
	 * commands and agents: skills, which the next agent loads as its
	 * own (as .claude/settings*.json below are kept).
	 */
	{ ".claude/skills", true, true, "as Claude Code keeps it", NULL },
	{ ".git/config", false, true, NULL, NULL },
	{ ".gitconfig", false, true, NULL, NULL }, { ".gitmodules", false, true, NULL, NULL },
	{ ".bashrc", false, true, NULL, NULL }, { ".bash_profile", false, true, NULL, NULL },
	{ ".zshrc", false, true, NULL, NULL }, { ".zprofile", false, true, NULL, NULL },
	{ ".profile", false, true, NULL, NULL }, { ".ripgreprc", false, true, NULL, NULL },
	/*
	 * A JSON file made holds an empty object: one a killed run left
	 * (until the project's next run removes it) is no parse error to
	 * the agent that reads it, nor to a tool in the sandbox.
	 */
	{ ".mcp.json", false, true, NULL, "{}\n" },
	{ ".claude/settings.json", false, true, NULL, "{}\n" },
	{ ".claude/settings.local.json", false, true, NULL, "{}\n" },
	{ ".envrc", false, true, "as direnv runs it", NULL },
	/*
	 * A .git file is kept where it is; a .git directory by its parts
	 * (made empty above where there is no .git, as srt does: an empty
	 * one is no repository to git).  A commondir made holds ".", git's
	 * own directory: git goes on as before (an empty one stops it:
	 * "failed to read .git/commondir").  An empty config.worktree is
	 * no config.
	 */
	{ ".git", false, false, "as git follows its gitdir: line", NULL },
	{ ".git/commondir", false, true, "as git takes the config from where it names", ".\n" },
	{ ".git/config.worktree", false, true, "as git reads it as config", NULL },
};

/*
 * Where the write path is the caller's home directory: what else the
 * user's login shell and git read there, of the kinds srt's list keeps
 * (.bash_profile, .zprofile, .gitconfig) but does not name: bash reads
 * .bash_login where there is no .bash_profile (the one made for the run
 * is removed after it), zsh .zshenv for every zsh and .zlogin, git
 * ~/.config/git/config as it reads ~/.gitconfig (a core.fsmonitor there
 * ran on the user's next git status).  Only there: in a project they
 * are files no tool reads, made for nothing.
 */
static const struct kept kept_in_home[] = {
	{ ".bash_login", false, true, "as bash reads it at login", NULL },
	{ ".bash_logout", false, true, "as bash reads it at logout", NULL },
	{ ".zshenv", false, true, "as every zsh reads it", NULL },
	{ ".zlogin", false, true, "as zsh reads it at login", NULL },
	{ ".zlogout", false, true, "as zsh reads it at logout", NULL },
	{ ".config/git/config", false, true, "as git reads it as ~/.gitconfig", NULL },
};

/* where commondir is in the table (config.worktree follows it) */
#define KEPT_COMMONDIR (sizeof(kept_read_only) / sizeof(kept_read_only[0]) - 2)

static bool listed(json_t *arr, const char *path)
{
	json_t *v;
	size_t i;

	json_array_foreach(arr, i, v)
		if (!strcmp(json_string_value(v), path))
			return true;
	return false;
}

/* What is there at dir/rel, without following a link at its end. */
static bool there(const char *dir, const char *rel, bool *is_dir)
{
	char p[PATH_MAX];
	struct stat st;

	if ((size_t)snprintf(p, sizeof(p), "%s/%s", dir, rel) >= sizeof(p) || lstat(p, &st) < 0)
		return false;
	*is_dir = S_ISDIR(st.st_mode);
	return true;
}

/* in the list of what was made: the file system took no mark */
#define UNMARKED " (unmarked)"

/*
 * links followed from one kept path, at most: a chain, or a loop.  The
 * kernel's own bound (MAXSYMLINKS): a path through more links than
 * this resolves to nothing (ELOOP), on the host too, and with each of
 * them kept as itself it stays so.
 */
#define KEPT_LINKS_MAX 40
/* links outside the write binds followed on a target's way, at most (as the kernel's) */
#define HOST_LINKS_MAX 40

static int open_top(struct srt *srt, const char *dir, struct corral_err *err);

/* The first refusal of what cannot be kept: the run is refused with it. */
static void refuse(struct srt *srt, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void refuse(struct srt *srt, int code, const char *fmt, ...)
{
	va_list ap;

	if (srt->refused.code)
		return;
	va_start(ap, fmt);
	vsnprintf(srt->refused.msg, sizeof(srt->refused.msg), fmt, ap);
	va_end(ap);
	/*
	 * The link may be one an earlier run's sandbox left (in a
	 * repository it made): the user is told which, to remove it.
	 */
	if (srt->via[0]) {
		char hint[sizeof(srt->via) + 128];
		size_t n = strlen(srt->refused.msg), k;

		snprintf(hint, sizeof(hint), " (if the link %s is not yours, an earlier run's "
			 "sandbox may have left it: remove it to run again)", srt->via);
		k = strlen(hint);
		if (k > sizeof(srt->refused.msg) - 1 - n)
			k = sizeof(srt->refused.msg) - 1 - n;	/* cut, as vsnprintf cuts */
		memcpy(srt->refused.msg + n, hint, k);
		srt->refused.msg[n + k] = '\0';
	}
	srt->refused.code = code;
}

/*
 * path lies in a read-only bind of the translation's already (a kept
 * path, made or found): a link kept as itself is no such bind, as what
 * lies beyond it is the link's target's.
 */
static bool kept_under(struct srt *srt, json_t *fs, const char *path)
{
	json_t *v;
	size_t i;

	json_array_foreach(json_object_get(fs, "ro"), i, v)
		if (under(path, json_string_value(v)) && !listed(srt->links, json_string_value(v)))
			return true;
	return false;
}

/*
 * The write bind that shows the host's path at that same path, and that
 * a sandbox writes there: its directory (the translation's allowWrite,
 * or a --rw flag's or --policy's of the same path), or NULL where the
 * deepest bind that holds path is read-only, or none holds it.
 * *elsewhere: the deepest is a write bind shown at another path (--rw
 * SRC:DST), which a bind kept at path would not cover.
 */
static const char *write_top(struct srt *srt, json_t *fs, const char *path, bool *elsewhere)
{
	const char *top = NULL;
	size_t best = 0, n;
	bool writable = false;
	json_t *v;
	size_t i;

	*elsewhere = false;
	/* at one depth read-only wins (mount.c): judged last */
	for (int ro = 0; ro < 2; ro++)
		json_array_foreach(json_object_get(fs, ro ? "ro" : "rw"), i, v) {
			const char *s = json_string_value(v);

			if (under(path, s) && (n = strlen(s)) >= best &&
			    (!ro || !listed(srt->links, s))) {
				best = n;
				writable = !ro;
			}
		}
	for (i = 0; srt->base && i < srt->base->nbinds; i++) {
		const struct corral_bind *b = &srt->base->binds[i];

		if (under(path, b->src) && ((n = strlen(b->src)) > best ||
					    (n == best && !b->writable))) {
			best = n;
			writable = b->writable;
			*elsewhere = b->writable && strcmp(b->src, b->dst);
		}
	}
	if (!writable || *elsewhere)
		return NULL;
	/* the outermost write bind of the same path holds it: its directory is walked from */
	json_array_foreach(srt->rw, i, v)
		if (under(path, json_string_value(v)) &&
		    (!top || strlen(json_string_value(v)) < strlen(top)))
			top = json_string_value(v);
	for (i = 0; srt->base && i < srt->base->nbinds; i++) {
		const struct corral_bind *b = &srt->base->binds[i];

		if (b->writable && !strcmp(b->src, b->dst) && under(path, b->src) &&
		    (!top || strlen(b->src) < strlen(top)))
			top = b->src;
	}
	return top;
}

static void keep_at(struct srt *srt, json_t *fs, const char *key, const char *dir,
		    const char *top, const char *rel, const struct kept *kr, int hops,
		    char *missing, size_t mlen);

/* one more component of a path, its "." and ".." left as they are */
static bool append(char *buf, size_t len, const char *tail)
{
	size_t n = strlen(buf);

	if (!*tail)
		return true;
	return (size_t)snprintf(buf + n, len - n, "%s%s", n && buf[n - 1] == '/' ? "" : "/",
				tail) < len - n;
}

/* a ".." among the components of s */
static bool climbs(const char *s)
{
	for (const char *c = s; (c = strstr(c, "..")); c += 2)
		if ((c == s || c[-1] == '/') && (!c[2] || c[2] == '/'))
			return true;
	return false;
}

/*
 * What a kept link names (path, absolute, with what followed the link
 * in the kept path), kept as the link's own name would be: walked one
 * component at a time from "/", a link outside every write bind followed
 * (the host's, which no sandbox changes, up to HOST_LINKS_MAX), up to
 * the first component in a write bind that is no directory (a link, a
 * file, what is not there) or the last, from where keep_at walks it
 * with no link followed, keeping each link on the way.  A target no
 * write bind holds needs nothing: the sandbox sees it read-only, or not
 * at all.  A ".." that keep_at would walk (after a link in a write bind,
 * or a name not there, which the sandbox could make a link) is refused,
 * as is a target that is a write bind's own directory.
 */
static void keep_target(struct srt *srt, json_t *fs, const char *key, const char *dir,
			const char *path, const struct kept *kr, int hops, char *missing,
			size_t mlen)
{
	char cur[PATH_MAX] = "", rest[PATH_MAX], next[PATH_MAX], t[PATH_MAX];
	const char *top, *c = rest, *slash;
	bool elsewhere;
	int follows = 0;
	struct stat st;
	ssize_t n;

	if ((size_t)snprintf(rest, sizeof(rest), "%s", path) >= sizeof(rest))
		goto long_path;
	for (;;) {
		c += strspn(c, "/");
		if (!*c && !cur[0])
			break;
		if (!*c) {
			/* all walked: the last was a "." or "..", or is outside the binds */
			top = write_top(srt, fs, cur, &elsewhere);
			if (!top && !elsewhere)
				break;
			memcpy(next, cur, strlen(cur) + 1);
			*(strrchr(cur, '/')) = '\0';
			slash = c;
		} else {
			slash = strchrnul(c, '/');
			if (slash - c == 1 && c[0] == '.') {
				c = slash;
				continue;
			}
			if (slash - c == 2 && c[0] == '.' && c[1] == '.') {
				*(strrchr(cur, '/') ? strrchr(cur, '/') : cur) = '\0';
				c = slash;
				continue;
			}
			if ((size_t)snprintf(next, sizeof(next), "%s/%.*s", cur, (int)(slash - c), c) >=
			    sizeof(next))
				goto long_path;
			top = write_top(srt, fs, next, &elsewhere);
		}
		if (elsewhere) {
			refuse(srt, -EXDEV, "%s: the link's target %s lies in a write bind shown at "
			       "another path (at %s), where corral cannot keep it read-only: refused",
			       key, path, next);
			return;
		}
		if (top && !strcmp(next, top) && !*slash) {
			refuse(srt, -EINVAL, "%s: the link's target %s is a write bind's own "
			       "directory, which cannot be kept read-only in it: refused", key, next);
			return;
		}
		if (top && !strcmp(next, top)) {
			/* as the bind shows it, whatever link the user named it through */
			memcpy(cur, next, strlen(next) + 1);
			c = slash;
			continue;
		}
		if (top && *slash && lstat(next, &st) == 0 && S_ISDIR(st.st_mode)) {
			/* a directory there: a ".." after it climbs as the kernel would */
			memcpy(cur, next, strlen(next) + 1);
			c = slash;
			continue;
		}
		if (top) {
			/*
			 * A link, a file, what is not there, or the end: kept
			 * from top with no link followed (keep_at), a link there
			 * kept and followed in turn.
			 */
			if (climbs(slash)) {
				refuse(srt, -EINVAL, "%s: the link's target %s climbs (\"..\") past %s, "
				       "in the write bind %s: not kept, refused", key, path, next, top);
				return;
			}
			if ((size_t)snprintf(t, sizeof(t), "%s%s", next + strlen(top) + 1, slash) >=
			    sizeof(t))
				goto long_path;
			if (kept_under(srt, fs, next) && !*slash)
				return;	/* kept already (another link to it) */
			keep_at(srt, fs, key, dir, top, t, kr, hops, missing, mlen);
			return;
		}
		if (lstat(next, &st) < 0 || (!S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode) && *slash))
			break;	/* not there (or not a directory): outside the write binds */
		if (!S_ISLNK(st.st_mode)) {
			memcpy(cur, next, strlen(next) + 1);
			c = slash;
			continue;
		}
		/* the host's link, outside every write bind: followed */
		n = readlink(next, t, sizeof(t) - 1);
		if (n < 0 || ++follows > HOST_LINKS_MAX)
			break;	/* as the kernel: ELOOP, nothing there */
		t[n] = '\0';
		if (!append(t, sizeof(t), slash))
			goto long_path;
		if (t[0] == '/')
			cur[0] = '\0';
		memcpy(rest, t, strlen(t) + 1);
		c = rest;
	}
	say(srt, key, "%s leads to %s, outside every write bind or read-only in it: the "
	    "sandbox cannot write there", kr->rel, path);
	return;
long_path:
	refuse(srt, -ENAMETOOLONG, "%s: the link's target %s: path too long: refused", key, path);
}

/*
 * A kept path's component is a symbolic link (the user's own: .envrc ->
 * envs/dev, .git/hooks -> ../githooks, a .claude from dotfiles): kept as
 * the link, bound onto itself read-only (a mount point: the sandbox can
 * neither remove, rename nor replace it; the bind takes the link, never
 * what it names), and what it names kept as the path itself would be.
 * Before, such a link was not kept: the sandbox removed .envrc and made
 * its own, which the host's direnv ran, or wrote through it.
 */
static void keep_link(struct srt *srt, json_t *fs, const char *key, const char *dir,
		      const char *top, const char *link, const struct srt_link *l,
		      const struct kept *kr, int hops, char *missing, size_t mlen)
{
	char path[PATH_MAX], parent[PATH_MAX];
	struct stat st;

	if (!listed(srt->links, link)) {
		push(fs, "ro", link);
		json_array_append_new(srt->links, json_string(link));
		json_array_append_new(srt->pins, json_pack("[sss]", top, link, l->target));
		say(srt, key, "%s is a symbolic link to \"%s\": kept as the link -> filesystem.ro "
		    "\"%s\" (bound onto itself: it cannot be removed, renamed or replaced); "
		    "what it names is kept as %s is", under(link, dir) && strcmp(link, dir) ?
		    link + strlen(dir) + 1 : link, l->target, link, kr->rel);
	}
	/* a .git that names a repository directory: its parts are the table's */
	if (!kr->made && !l->after[0] && stat(link, &st) == 0 && S_ISDIR(st.st_mode))
		return;
	snprintf(srt->via, sizeof(srt->via), "%s", link);
	if (hops >= KEPT_LINKS_MAX) {
		/*
		 * A loop, or a chain past the kernel's bound: every link on
		 * it is kept as itself, so no path through them resolves,
		 * on the host either.  Refused before, a loop an earlier
		 * run's sandbox left (nested/.git/hooks -> hooks, in a
		 * repository it made) refused every later run.
		 */
		say(srt, key, "%s: more than %d symbolic links one after the other, or a loop "
		    "(at %s): each kept as the link; they name nothing (ELOOP), on the host "
		    "too", kr->rel, KEPT_LINKS_MAX, link);
		return;
	}
	snprintf(parent, sizeof(parent), "%s", link);
	*strrchr(parent, '/') = '\0';
	if ((size_t)snprintf(path, sizeof(path), "%s%s%s", l->target[0] == '/' ? "" : parent,
			     l->target[0] == '/' ? "" : "/", l->target) >= sizeof(path) ||
	    !append(path, sizeof(path), l->after)) {
		refuse(srt, -ENAMETOOLONG, "%s: the link %s: its target is too long: refused",
		       key, link);
		return;
	}
	keep_target(srt, fs, key, dir, path, kr, hops + 1, missing, mlen);
}

/*
 * top/rel kept read-only (top a write bind's directory; dir the write
 * path whose key the report says it under): what srt_made_keep found or
 * made bound read-only, the directories on its way bound onto
 * themselves, a link on its way kept as itself and followed.
 */
static void keep_at(struct srt *srt, json_t *fs, const char *key, const char *dir,
		    const char *top, const char *rel, const struct kept *kr, int hops,
		    char *missing, size_t mlen)
{
	char *bind = NULL, *pins[SRT_PINS_MAX], why[PATH_MAX + 128], full[PATH_MAX];
	struct srt_link link;
	struct corral_err e = { 0 };
	enum srt_made_kind kind;
	size_t npins = 0;
	const char *as_said;
	int r;

	snprintf(full, sizeof(full), "%s/%s", top, rel);
	if (hops && open_top(srt, top, &e) < 0) {
		refuse(srt, e.code, "%s: %s: %s", key, kr->rel, e.msg);
		return;
	}
	r = srt_made_keep(srt->made, top, rel, kr->dir, kr->content,
			  &bind, pins, &npins, &link, why, sizeof(why));
	if (r < 0 && hops) {
		refuse(srt, r, "%s: %s: what its link names is not kept read-only: %s: refused",
		       key, kr->rel, why);
	} else if (r < 0) {
		/*
		 * Never one left writable: before, the run went on without
		 * it (a killed run's janitor holding it, a disk a sandbox
		 * filled, a user's directory of mode 0555 on its way), and
		 * its sandbox made the file the host's tools run.
		 */
		refuse(srt, r, "%s: %s: cannot be kept read-only: %s: refused", key, kr->rel, why);
	} else if (r == SRT_KEEP_UNMAKEABLE) {
		say(srt, key, "%s: not kept read-only, as not made: %s (the sandbox cannot "
		    "make it either)", kr->rel, why);
	} else {
		/*
		 * Each directory on the way, bound onto itself: a mount point,
		 * which no one renames.  Else `mv .git .git-old` took the
		 * kept hooks and config along, and a .git the sandbox made
		 * in its place was the one the host's next git status ran.
		 */
		for (size_t i = 0; i < npins; i++) {
			if (!listed(json_object_get(fs, "rw"), pins[i]))
				push(fs, "rw", pins[i]);
			json_array_append_new(srt->pins, json_pack("[ss]", top, pins[i]));
		}
		if (r == SRT_KEEP_LINK) {
			keep_link(srt, fs, key, dir, top, bind, &link, kr, hops, missing, mlen);
			goto out;
		}
		push(fs, "ro", bind);
		json_array_append_new(srt->pins, json_pack("[ss]", top, bind));
		kind = srt_made_kind(srt->made, bind);
		as_said = under(bind, dir) ? bind + strlen(dir) + 1 : bind;
		if (kind != SRT_FOUND)	/* said with the others, in one line */
			snprintf(missing + strlen(missing), mlen - strlen(missing), "%s%s%s",
				 missing[0] ? ", " : "", as_said,
				 kind == SRT_ADOPTED ? " (made by another run)" :
				 kind == SRT_MADE_UNMARKED ? UNMARKED : "");
		else if (strcmp(bind, full))
			say(srt, key, "%s lies under the file %s, kept read-only instead (the "
			    "sandbox would remove it to make the directory) -> filesystem.ro \"%s\"",
			    hops ? full : kr->rel, as_said, bind);
		else
			say(srt, key, "%s -> filesystem.ro \"%s\", %s%s", hops ? as_said : kr->rel,
			    bind, hops ? "as the link names it" : kr->as ? kr->as : "as srt keeps it",
			    npins ? " (the directories on its way bound onto themselves: none can "
			    "be renamed)" : "");
	}
out:
	for (size_t i = 0; i < npins; i++)
		free(pins[i]);
	free(bind);
}

static void keep_one(struct srt *srt, json_t *fs, const char *key, const char *dir,
		     const struct kept *kr, char *missing, size_t mlen)
{
	char full[PATH_MAX];
	bool is_dir;

	snprintf(full, sizeof(full), "%s/%s", dir, kr->rel);
	/* in a kept (or made) directory already, or bound read-only by the settings */
	if (kept_under(srt, fs, full))
		return;
	if (!kr->made && (!there(dir, kr->rel, &is_dir) ||
					(!strcmp(kr->rel, ".git") && is_dir)))
		return;	/* only a .git that is a file: a directory's parts are kept */
	keep_at(srt, fs, key, dir, dir, kr->rel, kr, 0, missing, mlen);
}

/*
 * The repositories in a write bind besides its own .git, which git runs
 * the hooks and config of as well: a nested one's (the host's git in it,
 * or a shell prompt that runs git status on cd), a submodule's (git
 * status in the superproject recurses into each), kept as its own .git
 * is, where found: a .git directory's hooks and config, a .git file (a
 * submodule's "gitdir:") itself, and each repository under
 * .git/modules.  As srt, which looks NESTED_DEPTH levels deep; what lies
 * deeper, or past NESTED_MAX entries, is not looked for, and the report
 * says so.  No link is followed; node_modules is not looked in.
 */
#define NESTED_DEPTH 3
#define NESTED_MAX 20000

/* Lexically: "//", "." and ".." collapsed; false when it climbs above "/". */
static bool collapse(char *path)
{
	char *out = path, *c = path, *slash;

	while (*c) {
		while (*c == '/')
			c++;
		slash = strchrnul(c, '/');
		if (slash - c == 1 && c[0] == '.') {
			/* nothing */
		} else if (slash - c == 2 && c[0] == '.' && c[1] == '.') {
			if (out == path)
				return false;
			while (out > path && *--out != '/')
				;
		} else if (slash > c) {
			*out++ = '/';
			memmove(out, c, (size_t)(slash - c));
			out += slash - c;
		}
		c = slash;
	}
	if (out == path)
		*out++ = '/';
	*out = '\0';
	return true;
}

/*
 * The files a repository's config includes (include.path,
 * includeIf.*.path) that lie in the bind: config git reads as its own
 * (a core.fsmonitor there runs as one in .git/config does), kept as the
 * config is; one not there is made (git skips an include it cannot
 * find, and the sandbox could make it).  A relative path is the config
 * file's directory's, "~/" the caller's $HOME, as git reads them.  Only
 * the config's own includes: an included file's are not followed.
 */
#define INCLUDES_MAX 16

static void keep_includes(struct srt *srt, json_t *fs, const char *key, const char *dir,
			  const char *gitdir, char *missing, size_t mlen)
{
	char path[PATH_MAX], line[PATH_MAX], inc[PATH_MAX];
	const char *home = getenv("HOME");
	bool section = false;
	unsigned n = 0;
	FILE *f;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s/config", dir, gitdir) >= sizeof(path) ||
	    !(f = fopen(path, "re")))
		return;
	while (n < INCLUDES_MAX && fgets(line, sizeof(line), f)) {
		char *k = line + strspn(line, " \t"), *v, *end;

		if (*k == '[') {
			section = !strncasecmp(k, "[include]", 9) || !strncasecmp(k, "[includeIf ", 11);
			continue;
		}
		if (!section || strncasecmp(k, "path", 4) || !(v = strchr(k + 4, '=')) ||
		    k[4 + strspn(k + 4, " \t")] != '=')
			continue;
		v += 1 + strspn(v + 1, " \t\"");
		end = v + strcspn(v, "\"\r\n");
		while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
			end--;
		*end = '\0';
		if (!*v)
			continue;
		if (v[0] == '~' && v[1] == '/') {
			if (!home || home[0] != '/' ||
			    (size_t)snprintf(inc, sizeof(inc), "%s/%s", home, v + 2) >= sizeof(inc))
				continue;
		} else if ((size_t)snprintf(inc, sizeof(inc), "%s%s%s/%s", v[0] == '/' ? "" : dir,
					    v[0] == '/' ? "" : "/", v[0] == '/' ? "" : gitdir,
					    v[0] == '/' ? v + 1 : v) >= sizeof(inc)) {
			continue;
		}
		if (!collapse(inc) || !under(inc, dir) || !strcmp(inc, dir))
			continue;
		n++;
		{
			const struct kept kr = { inc + strlen(dir) + (strcmp(dir, "/") != 0), false,
						 true, "as the config it includes", NULL };

			keep_one(srt, fs, key, dir, &kr, missing, mlen);
		}
	}
	if (n == INCLUDES_MAX)
		say(srt, key, "%s/config: more than %d includes: the rest not kept read-only",
		    gitdir, INCLUDES_MAX);
	fclose(f);
}

/*
 * A repository's working directory (repo: "" for the write path's own)
 * is never taken by git for a bare repository of the sandbox's.  git
 * looks for .git first, then at the directory itself (HEAD, objects/
 * and refs/), and .git's HEAD, objects and refs are git's to write: a
 * sandbox moved .git/HEAD aside, made HEAD, objects, refs and a config
 * (core.worktree, core.fsmonitor) at the top, and the user's next git
 * status there ran the fsmonitor, outside any sandbox.  One of the three
 * kept read-only, and made where it is not there as a file git cannot
 * enter (refs, 0444, empty), stops it: refs, or where the user's refs
 * is a directory objects, else HEAD (an empty one is no HEAD to git; not
 * the first choice, as "git diff HEAD" at the top would then also name
 * a file).
 */
static void keep_bare(struct srt *srt, json_t *fs, const char *key, const char *dir,
		      const char *repo, char *missing, size_t mlen)
{
	static const char *const marks[] = { "refs", "objects", "HEAD" };
	char rel[PATH_MAX], path[PATH_MAX];
	struct stat st;
	bool is_dir;

	for (size_t i = 0; i < sizeof(marks) / sizeof(marks[0]); i++) {
		const struct kept k = { rel, false, true, "so that git never takes the "
					"directory for a bare repository the sandbox made", NULL };

		if ((size_t)snprintf(rel, sizeof(rel), "%s%s%s", repo, repo[0] ? "/" : "",
				     marks[i]) >= sizeof(rel))
			return;
		if (i + 1 < sizeof(marks) / sizeof(marks[0]) && there(dir, rel, &is_dir) &&
		    (size_t)snprintf(path, sizeof(path), "%s/%s", dir, rel) < sizeof(path) &&
		    stat(path, &st) == 0 && S_ISDIR(st.st_mode))
			continue;	/* the user's directory (or a link to one): another of the three */
		keep_one(srt, fs, key, dir, &k, missing, mlen);
		return;
	}
}

static void keep_repo(struct srt *srt, json_t *fs, const char *key, const char *dir,
		      const char *gitdir, char *missing, size_t mlen)
{
	char hooks[PATH_MAX], config[PATH_MAX], common[PATH_MAX], cw[PATH_MAX];
	const struct kept k[] = {
		{ hooks, true, true, NULL, NULL }, { config, false, true, NULL, NULL },
		{ common, false, true, kept_read_only[KEPT_COMMONDIR].as, ".\n" },
		{ cw, false, true, kept_read_only[KEPT_COMMONDIR + 1].as, NULL },
	};

	snprintf(hooks, sizeof(hooks), "%s/hooks", gitdir);
	snprintf(config, sizeof(config), "%s/config", gitdir);
	snprintf(common, sizeof(common), "%s/commondir", gitdir);
	snprintf(cw, sizeof(cw), "%s/config.worktree", gitdir);
	for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++)
		keep_one(srt, fs, key, dir, &k[i], missing, mlen);
	keep_includes(srt, fs, key, dir, gitdir, missing, mlen);
}

/* .git/modules/NAME (and their own modules/): each a submodule's repository */
static void modules(struct srt *srt, json_t *fs, const char *key, const char *dir,
		    const char *rel, unsigned depth, size_t *seen, char *missing, size_t mlen)
{
	char path[PATH_MAX], sub[PATH_MAX], head[PATH_MAX];
	struct dirent *de;
	bool is_dir;
	DIR *d;

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	if (depth > 2 * NESTED_DEPTH || !(d = opendir(path)))
		return;
	while ((de = readdir(d)) && ++*seen <= NESTED_MAX) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if ((size_t)snprintf(sub, sizeof(sub), "%s/%s", rel, de->d_name) >= sizeof(sub) - 16 ||
		    !there(dir, sub, &is_dir) || !is_dir)
			continue;
		if ((size_t)snprintf(head, sizeof(head), "%s/HEAD", sub) < sizeof(head) &&
		    there(dir, head, &is_dir)) {
			keep_repo(srt, fs, key, dir, sub, missing, mlen);
			snprintf(sub + strlen(sub), sizeof(sub) - strlen(sub), "/modules");
		}
		/* a name with a slash (sub/dir) is a directory of directories */
		modules(srt, fs, key, dir, sub, depth + 1, seen, missing, mlen);
	}
	closedir(d);
}

/*
 * .git/worktrees/NAME: a linked worktree's own part of the repository
 * (its checkout lies elsewhere, maybe outside the bind): its commondir
 * (where git takes the config and hooks from) and config.worktree.
 */
static void worktrees(struct srt *srt, json_t *fs, const char *key, const char *dir,
		      const char *gitdir, size_t *seen, char *missing, size_t mlen)
{
	char path[PATH_MAX], common[PATH_MAX], cw[PATH_MAX];
	struct dirent *de;
	bool is_dir;
	DIR *d;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s/worktrees", dir, gitdir) >= sizeof(path) ||
	    !(d = opendir(path)))
		return;
	while ((de = readdir(d)) && ++*seen <= NESTED_MAX) {
		const struct kept k[] = {
			{ common, false, false, kept_read_only[KEPT_COMMONDIR].as, NULL },
			{ cw, false, true, kept_read_only[KEPT_COMMONDIR + 1].as, NULL },
		};

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    (size_t)snprintf(common, sizeof(common), "%s/worktrees/%s/commondir", gitdir,
				     de->d_name) >= sizeof(common) ||
		    (size_t)snprintf(cw, sizeof(cw), "%s/worktrees/%s/config.worktree", gitdir,
				     de->d_name) >= sizeof(cw) ||
		    !there(dir, common, &is_dir))
			continue;
		for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++)
			keep_one(srt, fs, key, dir, &k[i], missing, mlen);
	}
	closedir(d);
}

static void nested_repos(struct srt *srt, json_t *fs, const char *key, const char *dir,
			 const char *rel, unsigned depth, size_t *seen, char *missing,
			 size_t mlen)
{
	char path[PATH_MAX], sub[PATH_MAX];
	struct dirent *de;
	struct stat st;
	bool is_dir;
	DIR *d;

	snprintf(path, sizeof(path), "%s%s%s", dir, rel[0] ? "/" : "", rel);
	if (depth > NESTED_DEPTH || !(d = opendir(path)))
		return;
	while ((de = readdir(d)) && ++*seen <= NESTED_MAX) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    !strcmp(de->d_name, "node_modules"))
			continue;
		/* the entry's type where the directory tells it: one lstat a file cost 2 ms in 1000 */
		if (de->d_type != DT_UNKNOWN && de->d_type != DT_DIR && strcmp(de->d_name, ".git"))
			continue;
		if ((size_t)snprintf(sub, sizeof(sub), "%s%s%s", rel, rel[0] ? "/" : "",
				     de->d_name) >= sizeof(sub) - 16 || !there(dir, sub, &is_dir))
			continue;
		if (!strcmp(de->d_name, ".git")) {
			/* the user's link to a repository: kept as the link, its parts where it names them */
			bool linked = !is_dir && (size_t)snprintf(path, sizeof(path), "%s/%s", dir,
								   sub) < sizeof(path) &&
				      stat(path, &st) == 0 && S_ISDIR(st.st_mode);

			if (!is_dir && rel[0]) {
				const struct kept k = { sub, false, false,
							kept_read_only[KEPT_COMMONDIR - 1].as, NULL };

				keep_one(srt, fs, key, dir, &k, missing, mlen);
			}
			if (is_dir || linked) {
				if (rel[0]) {
					keep_repo(srt, fs, key, dir, sub, missing, mlen);
					keep_bare(srt, fs, key, dir, rel, missing, mlen);
				}
				else	/* the bind's own: its hooks and config are the table's */
					keep_includes(srt, fs, key, dir, sub, missing, mlen);
				worktrees(srt, fs, key, dir, sub, seen, missing, mlen);
				snprintf(sub + strlen(sub), sizeof(sub) - strlen(sub), "/modules");
				modules(srt, fs, key, dir, sub, 0, seen, missing, mlen);
			}
		} else if (is_dir && depth < NESTED_DEPTH) {
			nested_repos(srt, fs, key, dir, sub, depth + 1, seen, missing, mlen);
		}
	}
	closedir(d);
}

/*
 * The outermost write bind that holds dir (this translation's, or the
 * base policy's), as a copy in *out, compared as collapsed paths; NULL
 * when none does.  A sandbox writes it: a link there is its to put.
 */
static const char *outer_rw(struct srt *srt, const char *dir, char **out)
{
	char d[PATH_MAX], o[PATH_MAX];
	const char *best = NULL;
	json_t *v;
	size_t i;

	*out = NULL;
	if (snprintf(d, sizeof(d), "%s", dir) >= (int)sizeof(d) || !collapse(d))
		return NULL;
	json_array_foreach(srt->rw, i, v) {
		const char *s = json_string_value(v);

		if (snprintf(o, sizeof(o), "%s", s) < (int)sizeof(o) && collapse(o) &&
		    strcmp(o, d) && under(d, o) && (!best || strlen(o) < strlen(best)))
			best = s;
	}
	for (i = 0; srt->base && i < srt->base->nbinds; i++) {
		const struct corral_bind *b = &srt->base->binds[i];

		if (b->writable && snprintf(o, sizeof(o), "%s", b->src) < (int)sizeof(o) &&
		    collapse(o) && strcmp(o, d) && under(d, o) &&
		    (!best || strlen(o) < strlen(best)))
			best = b->src;
	}
	if (!best || snprintf(o, sizeof(o), "%s", best) >= (int)sizeof(o) || !collapse(o) ||
	    asprintf(out, "%s", o) < 0)
		return NULL;
	return *out;
}

/*
 * Open the write path dir for what is kept beneath it (srt_made_top):
 * beneath the write bind that holds it, if one does, no link followed.
 * A link there refuses the run (as mount.c refuses a bind through one):
 * else the translation made files in its target, and kept nothing.
 */
static int open_top(struct srt *srt, const char *dir, struct corral_err *err)
{
	char why[2 * PATH_MAX + 128], d[PATH_MAX], *outer = NULL;
	int r;

	/* collapsed as outer_rw compared it: d lies in outer */
	snprintf(d, sizeof(d), "%s", dir);
	r = outer_rw(srt, dir, &outer) && collapse(d) ?
		srt_made_top(srt->made, dir, outer, d + strlen(outer) + (strcmp(outer, "/") != 0),
			     why, sizeof(why)) :
		srt_made_top(srt->made, dir, NULL, NULL, why, sizeof(why));
	free(outer);
	return r < 0 ? corral_set_err(err, r, "%s", why) : 0;
}

/* st (a write path's directory) is the caller's $HOME, by its inode */
static bool is_home(const struct stat *st)
{
	const char *home = getenv("HOME");
	struct stat h;

	return home && home[0] == '/' && stat(home, &h) == 0 && h.st_dev == st->st_dev &&
	       h.st_ino == st->st_ino;
}

/*
 * k (a path the tables name, beneath an anchor: the project, the home)
 * kept where the write path dir holds it: rel is where it lies beneath
 * dir, from the anchor's and dir's real paths (ar, dr); false where dir
 * holds none of it.
 */
static bool around(const char *ar, const char *dr, const char *k, char *rel, size_t len)
{
	size_t a = strlen(ar), d = strlen(dr);

	if (d < a && !strncmp(ar, dr, d) && (ar[d] == '/' || d == 1))
		/* dir holds the anchor (the project's parent, /home) */
		return (size_t)snprintf(rel, len, "%s/%s", ar + d + (d > 1), k) < len;
	if (d > a && !strncmp(dr, ar, a) && (dr[a] == '/' || a == 1) &&
	    !strncmp(dr + a + (a > 1), k, d - a - (a > 1)) && k[d - a - (a > 1)] == '/')
		/* dir is in the anchor (./.git, ~/.config, ~/.claude): k's rest beneath it */
		return (size_t)snprintf(rel, len, "%s", k + (d - a - (a > 1)) + 1) < len;
	return false;
}

/* dir (dr, real) is k beneath the anchor ar, or lies in it */
static bool within(const char *ar, const char *dr, const char *k)
{
	size_t a = strlen(ar), n = strlen(k);

	return !strncmp(dr, ar, a) && (dr[a] == '/' || a == 1) &&
	       !strncmp(dr + a + (a > 1), k, n) && (!dr[a + (a > 1) + n] || dr[a + (a > 1) + n] == '/');
}

/* the anchors srt's list is kept beneath: the project (the current directory), the home */
struct anchors {
	char cwd[PATH_MAX], home[PATH_MAX];
	const char *path[2];
};

static void anchors_of(struct anchors *an)
{
	const char *home = getenv("HOME");
	char cwd[PATH_MAX];

	an->path[0] = getcwd(cwd, sizeof(cwd)) && realpath(cwd, an->cwd) ? an->cwd : NULL;
	an->path[1] = home && home[0] == '/' && realpath(home, an->home) ? an->home : NULL;
}

static const struct kept *const tables[] = { kept_read_only, kept_in_home };
static const size_t table_sizes[] = { sizeof(kept_read_only) / sizeof(kept_read_only[0]),
				      sizeof(kept_in_home) / sizeof(kept_in_home[0]) };

/*
 * A write path (dr, real; st its) that is a path srt keeps beneath the
 * project or the home, or lies in a directory kept ("./.git/hooks",
 * "./.envrc", "~/.claude/commands", a worktree's ".git" file): bound
 * read-only whole, as srt's read-only bind over it makes it.  Before,
 * it was writable whole.
 */
static bool kept_whole(struct srt *srt, json_t *fs, const char *key, const char *dir,
		       const char *dr, const struct stat *st, const struct anchors *an)
{
	for (size_t i = 0; i < 2; i++)
		for (size_t t = 0; an->path[i] && t <= i; t++)
			for (size_t k = 0; k < table_sizes[t]; k++) {
				const struct kept *kr = &tables[t][k];

				/* a .git directory is git's to write: its parts are kept */
				if ((!kr->made && S_ISDIR(st->st_mode)) ||
				    !within(an->path[i], dr, kr->rel))
					continue;
				if (!listed(json_object_get(fs, "ro"), dir))
					push(fs, "ro", dir);
				say(srt, key, "is %s/%s or lies in it, which srt keeps read-only: "
				    "bound read-only whole", an->path[i], kr->rel);
				return true;
			}
	return false;
}

/*
 * What srt keeps is kept where srt keeps it: beneath the project (the
 * current directory, as srt resolves its list against it) and, of the
 * kinds it keeps, the caller's home, whichever write path holds it.
 * The tables are kept at each write path's own top besides.  A write
 * path (dir, dr real) that holds the project or the home (its parent,
 * "/home") keeps their files where they lie in it; one in them keeps
 * those that lie beneath it ("./.git": hooks and config; "~/.config":
 * git/config; "~/.claude": settings.json, commands).  Before, only a
 * write path's top was looked at: with allowWrite "./.git" the sandbox
 * wrote .git/hooks/pre-commit and core.fsmonitor into .git/config, with
 * "~/.config" ~/.config/git/config, each run by the user's next git
 * command, with the home's parent ~/.bashrc.
 */
static void keep_around(struct srt *srt, json_t *fs, const char *key, const char *dir,
			const char *dr, const struct anchors *an, char *missing, size_t mlen)
{
	char rel[PATH_MAX], git[PATH_MAX];
	size_t d = strlen(dr);
	bool is_dir;

	for (size_t i = 0; i < 2; i++) {
		/* the write path's own top: kept by the tables */
		if (!an->path[i] || !strcmp(an->path[i], dr))
			continue;
		/*
		 * One it holds, at any depth (~/src/org/team/proj: deeper than
		 * nested_repos looks), is never a bare repository of the
		 * sandbox's either, as the write path's top is not.
		 */
		if (!strncmp(an->path[i], dr, d) && an->path[i][d] == '/' &&
		    (size_t)snprintf(git, sizeof(git), "%s/.git", an->path[i] + d + 1) < sizeof(git) &&
		    (!there(dir, git, &is_dir) || is_dir))
			keep_bare(srt, fs, key, dir, an->path[i] + d + 1, missing, mlen);
		for (size_t t = 0; t <= i; t++)
			for (size_t k = 0; k < table_sizes[t]; k++) {
				struct kept kr = tables[t][k];

				/* a .git file: nested_repos finds one the write path holds */
				if (!strcmp(kr.rel, ".git") ||
				    !around(an->path[i], dr, kr.rel, rel, sizeof(rel)))
					continue;
				kr.rel = rel;
				keep_one(srt, fs, key, dir, &kr, missing, mlen);
			}
	}
}

static int keep_read_only(struct srt *srt, struct corral_err *err)
{
	json_t *fs = obj(srt->policy, "filesystem"), *top;
	struct anchors an;
	size_t i;

	anchors_of(&an);
	json_array_foreach(srt->rw, i, top) {
		const char *dir = json_string_value(top);
		char key[96], missing[4096] = "", dr[PATH_MAX];
		size_t seen = 0;
		struct stat st;
		bool is_dir;

		snprintf(key, sizeof(key), "filesystem.allowWrite \"%.60s\"", dir);
		if (stat(dir, &st) < 0 || !strcmp(dir, "/") || !realpath(dir, dr) ||
		    kept_whole(srt, fs, key, dir, dr, &st, &an))
			continue;
		/* a file bound alone holds none of them */
		if (!S_ISDIR(st.st_mode))
			continue;
		if (open_top(srt, dir, err) < 0)
			return err->code;
		for (size_t k = 0; k < sizeof(kept_read_only) / sizeof(kept_read_only[0]); k++)
			keep_one(srt, fs, key, dir, &kept_read_only[k], missing, sizeof(missing));
		for (size_t k = 0; is_home(&st) && k < table_sizes[1]; k++)
			keep_one(srt, fs, key, dir, &kept_in_home[k], missing, sizeof(missing));
		keep_around(srt, fs, key, dir, dr, &an, missing, sizeof(missing));
		/* a .git file names its repository: git goes nowhere else */
		if (!there(dir, ".git", &is_dir) || is_dir)
			keep_bare(srt, fs, key, dir, "", missing, sizeof(missing));
		nested_repos(srt, fs, key, dir, "", 0, &seen, missing, sizeof(missing));
		/* what cannot be kept refuses the run: never one unprotected */
		if (srt->refused.code)
			return corral_set_err(err, srt->refused.code, "%s", srt->refused.msg);
		if (seen > NESTED_MAX)
			say(srt, key, "more than %d entries in its top %d levels: the repositories "
			    "deeper in were not looked for", NESTED_MAX, NESTED_DEPTH);
		if (missing[0])
			say(srt, key, "made empty and kept read-only, as they were not there "
			    "(so that the sandbox cannot make them; marked %s and removed "
			    "after the last run that holds them; a commondir holds \".\", "
			    "git's own directory, a .json file {}): %s%s", SRT_MARK, missing,
			    strstr(missing, UNMARKED) ? "; the file system takes no user xattrs: "
			    "one unmarked is left on the host if this run is killed, or ends "
			    "while another run holds it" : "");
	}
	return 0;
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
	if (keep_read_only(srt, err) < 0)
		return err->code;
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
				char **report, struct corral_srt_made **made,
				struct corral_err *err)
{
	struct srt srt = { .policy = json_object(), .rw = json_array(), .base = p,
			   .made = srt_made_new(), .pins = json_array(), .links = json_array() };
	size_t report_len = 0, i;
	json_error_t je;
	json_t *settings = NULL, *unchecked = json_array(), *v;
	char *text = NULL, name[PATH_MAX + 8];
	FILE *f;
	int r, w;

	*report = NULL;
	*made = NULL;
	srt.report = open_memstream(report, &report_len);
	if (!srt.policy || !srt.rw || !srt.report || !srt.made || !srt.pins || !srt.links ||
	    !unchecked) {
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
	/* what it keeps, as the objects it found: no link put there since */
	if (r == 0)
		r = srt_pin_binds(p, srt.pins, unchecked, err);
	if (r == 0 && (w = srt_made_watch(srt.made)) < 0)
		say(&srt, "filesystem.allowWrite", "no process to remove what was made if this "
		    "run is killed (%s): the project's next --settings run removes it then",
		    strerror(-w));
	json_array_foreach(r == 0 ? unchecked : NULL, i, v)
		say(&srt, "filesystem.allowWrite", "%s: kept read-only whole, with more entries "
		    "than were looked at for a file with a second name (a hard link, which the "
		    "sandbox would write through that name): the rest not looked at",
		    json_string_value(v));
out:
	if (srt.report)
		fclose(srt.report);
	if (r < 0) {
		free(*report);
		*report = NULL;
		corral_srt_made_remove(srt.made);
	} else {
		*made = srt.made;
	}
	free(text);
	json_decref(settings);
	json_decref(srt.policy);
	json_decref(srt.rw);
	json_decref(srt.pins);
	json_decref(srt.links);
	json_decref(unchecked);
	return r;
}
