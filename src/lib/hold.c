/*
 * hold.c - the changes that must not leave a sandbox unasked: files a host
 * tool reads later and then runs code they name (git's config, hooks and
 * attributes, editor tasks, direnv).  The GitSpawn class: core.fsmonitor
 * in .git/config runs on the next `git status`, on the host, outside any
 * sandbox.
 *
 * One table, hold_defaults[], says which paths are looked at and how, each
 * with where that behaviour is documented; hold_formats.c reads each
 * format and its lists say which settings run something.  A change is held when its new content has a risky
 * item its old content did not have (a user's own credential.helper does
 * not hold back an agent's commit); content that cannot be read as its
 * format is itself a risky item (git might read it otherwise).
 */
#include "export.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Larger than this, a file a rule must read is held unread. */
#define HOLD_READ_MAX	(4u << 20)

/* The reasons several rules share, each said once. */
static const char why_mise[] =
	"mise runs its [hooks] and env._.source scripts in the shell that enters the directory";
static const char src_mise[] = "mise.jdx.dev/configuration.html";
static const char why_lefthook[] =
	"lefthook's git hooks run the commands its config lists on commit, push and more";
static const char src_lefthook[] = "lefthook.dev/configuration";
static const char why_claude[] =
	"Claude Code runs the hooks and MCP servers a project's settings name, on the host";
static const char src_claude[] = "docs.anthropic.com/en/docs/claude-code/settings";

const struct hold_rule hold_defaults[] = {
	{ ".git", HOLD_ALWAYS,
	  "a .git file (\"gitdir: PATH\") points git at another repository, whose config and hooks then run",
	  "gitrepository-layout(5)" },
	{ "**/.git/**/config", HOLD_GIT_CONFIG,
	  "git runs the programs its config names", "git-config(1)" },
	{ "**/.git/**/config.worktree", HOLD_GIT_CONFIG,
	  "git runs the programs its config names", "git-config(1), git-worktree(1)" },
	{ "**/.git/**/commondir", HOLD_ALWAYS,
	  "commondir points git at another directory, whose config and hooks then run",
	  "gitrepository-layout(5)" },
	{ "**/.git/**/gitdir", HOLD_ALWAYS,
	  "a worktree's gitdir file points git at another repository", "gitrepository-layout(5)" },
	{ "**/.git/**/objects/info/alternates", HOLD_ALWAYS,
	  "alternates make git read objects from other directories", "gitrepository-layout(5)" },
	{ "**/.git/**/hooks/**", HOLD_ALWAYS,
	  "git runs hooks on commit, checkout, merge, push and more", "githooks(5)" },
	{ "**/.git/**/info/attributes", HOLD_GITATTRIBUTES,
	  "attributes name the filter, diff and merge drivers git runs", "gitattributes(5)" },
	{ ".gitattributes", HOLD_GITATTRIBUTES,
	  "attributes name the filter, diff and merge drivers git runs", "gitattributes(5)" },
	{ ".gitmodules", HOLD_GITMODULES,
	  "git submodule update runs \"!command\" updates and ext:: URLs", "gitmodules(5)" },
	{ ".lfsconfig", HOLD_GIT_CONFIG,
	  "git-lfs reads it as git config", "git-lfs-config(5)" },
	{ "config", HOLD_GIT_BARE_CONFIG,
	  "a directory with HEAD and objects/ is a bare repository: git runs what its config names", "git-config(1), safe.bareRepository" },
	{ "**/.vscode/tasks.json", HOLD_VSCODE_TASKS,
	  "VS Code runs tasks with runOn \"folderOpen\" when the folder is opened", "code.visualstudio.com/docs/editor/tasks" },
	{ "**/.vscode/settings.json", HOLD_VSCODE_SETTINGS,
	  "VS Code and its extensions run the programs settings name", "code.visualstudio.com/docs/getstarted/settings" },
	{ "*.code-workspace", HOLD_VSCODE_WORKSPACE,
	  "a VS Code workspace file carries settings and tasks", "code.visualstudio.com/docs/editor/workspaces" },
	{ ".envrc", HOLD_ALWAYS,
	  "direnv runs .envrc in the shell that enters its directory", "direnv(1)" },
	{ ".devcontainer.json", HOLD_ALWAYS,
	  "dev container tools run its initializeCommand on the host", "containers.dev/implementors/json_reference" },
	{ "**/.devcontainer/**", HOLD_ALWAYS,
	  "dev container tools run its initializeCommand on the host", "containers.dev/implementors/json_reference" },
	{ ".husky/**", HOLD_ALWAYS,
	  "husky's hooks (core.hooksPath .husky/_) run .husky/<hook> on commit, checkout, push and more", "typicode.github.io/husky" },
	{ ".pre-commit-config.yaml", HOLD_ALWAYS,
	  "pre-commit, installed as a git hook, runs the hooks it lists (a local one is any command) on commit", "pre-commit.com" },
	{ "lefthook*.*", HOLD_ALWAYS, why_lefthook, src_lefthook },
	{ ".lefthook*.*", HOLD_ALWAYS, why_lefthook, src_lefthook },
	{ "**/.hg/hgrc", HOLD_ALWAYS,
	  "Mercurial runs the hooks its [hooks] section names on commit, update, pull and more", "hgrc(5)" },
	/* mise, activated in a shell, reads these on cd, as direnv reads .envrc */
	{ "mise.toml", HOLD_ALWAYS, why_mise, src_mise },
	{ ".mise.toml", HOLD_ALWAYS, why_mise, src_mise },
	{ "mise.*.toml", HOLD_ALWAYS, why_mise, src_mise },
	{ ".mise.*.toml", HOLD_ALWAYS, why_mise, src_mise },
	{ "**/.mise/**", HOLD_ALWAYS, why_mise, src_mise },
	{ "**/.config/mise.toml", HOLD_ALWAYS, why_mise, src_mise },
	{ "**/.config/mise/**", HOLD_ALWAYS, why_mise, src_mise },
	/*
	 * The agents people run beside corral read a project's settings and
	 * run the hooks and MCP servers (commands) they name, on the host,
	 * outside any sandbox: an agent inside must not write them out.
	 */
	{ "**/.claude/settings.json", HOLD_ALWAYS, why_claude, src_claude },
	{ "**/.claude/settings.local.json", HOLD_ALWAYS, why_claude, src_claude },
	{ ".mcp.json", HOLD_ALWAYS,
	  "Claude Code starts the MCP servers (commands) a project's .mcp.json names, on the host", "docs.anthropic.com/en/docs/claude-code/mcp" },
	{ "**/.vscode/mcp.json", HOLD_ALWAYS,
	  "VS Code starts the MCP servers (commands) a workspace's mcp.json names, on the host", "code.visualstudio.com/docs/copilot/chat/mcp-servers" },
	{ "**/.cursor/mcp.json", HOLD_ALWAYS,
	  "Cursor starts the MCP servers (commands) a project's mcp.json names, on the host", "docs.cursor.com/context/model-context-protocol" },
	{ "**/.cursor/hooks.json", HOLD_ALWAYS,
	  "Cursor runs the hooks a project's hooks.json names, on the host", "docs.cursor.com/agent/hooks" },
	{ "**/.gemini/settings.json", HOLD_ALWAYS,
	  "Gemini CLI starts the MCP servers (commands) and runs the hooks a project's settings name, on the host", "github.com/google-gemini/gemini-cli" },
	{ NULL, HOLD_ALWAYS, NULL, NULL },
};

/* ---- globs ------------------------------------------------------------ */

/* One glob component at a time; "**" takes zero or more components. */
static bool match_parts(const char *g, const char *p, int flags)
{
	size_t gl, pl;
	const char *gnext, *pnext;
	char gc[256], pc[256];

	if (!*g)
		return !*p;
	gl = strcspn(g, "/");
	gnext = g[gl] ? g + gl + 1 : g + gl;
	pl = strcspn(p, "/");
	pnext = p[pl] ? p + pl + 1 : p + pl;
	if (gl == 2 && g[0] == '*' && g[1] == '*')
		return match_parts(gnext, p, flags) || (*p && match_parts(g, pnext, flags));
	if (!*p || gl >= sizeof(gc) || pl >= sizeof(pc))
		return false;
	memcpy(gc, g, gl);
	gc[gl] = '\0';
	memcpy(pc, p, pl);
	pc[pl] = '\0';
	return !fnmatch(gc, pc, flags) && match_parts(gnext, pnext, flags);
}

static bool glob_match(const char *glob, const char *path, int flags)
{
	const char *base;

	if (!strchr(glob, '/')) {
		base = strrchr(path, '/');
		return !fnmatch(glob, base ? base + 1 : path, flags);
	}
	return match_parts(glob, path, flags);
}

bool hold_glob_match(const char *glob, const char *path)
{
	return glob_match(glob, path, 0);
}

/*
 * Whether a path beneath p could match g through p's own last component,
 * named by a component of g that is not "**": p a symlink (to a directory
 * the table does not look at by this name), g ".vscode/tasks.json" and p
 * ".vscode", say.  named: the last component taken was so named.
 */
static bool beneath_match(const char *g, const char *p, int flags, bool named)
{
	size_t gl, pl;
	const char *gnext, *pnext;
	char gc[256], pc[256];

	if (!*p)
		return named && *g;
	if (!*g)
		return false;
	gl = strcspn(g, "/");
	gnext = g[gl] ? g + gl + 1 : g + gl;
	pl = strcspn(p, "/");
	pnext = p[pl] ? p + pl + 1 : p + pl;
	if (gl == 2 && g[0] == '*' && g[1] == '*')
		return beneath_match(gnext, p, flags, named) ||
		       beneath_match(g, pnext, flags, false);
	if (gl >= sizeof(gc) || pl >= sizeof(pc))
		return false;
	memcpy(gc, g, gl);
	gc[gl] = '\0';
	memcpy(pc, p, pl);
	pc[pl] = '\0';
	return !fnmatch(gc, pc, flags) && beneath_match(gnext, pnext, flags, true);
}

/*
 * path as the hold table reads it: each component some filesystem takes
 * for ".git" (".GIT", ".git.", "git~1") spelled ".git"; the rules then
 * match it in any case.  The host's workspace may be case-insensitive
 * (a casefold directory, vfat or exfat, an SMB share, WSL's drvfs):
 * there ".GIT/hooks/post-checkout" or ".ENVRC" is the file git or direnv
 * runs, and a table read case by case let it out.  NULL: out of memory.
 */
static char *hold_key(const char *path)
{
	char *key = malloc(strlen(path) + 1), *k = key;

	/* an alias is never shorter than ".git": the key fits */
	for (const char *p = path; key && *p;) {
		size_t n = strcspn(p, "/");

		if (git_dir_alias(p, n)) {
			memcpy(k, ".git", 4);
			k += 4;
		} else {
			memcpy(k, p, n);
			k += n;
		}
		p += n;
		if (*p == '/')
			*k++ = *p++;
	}
	if (key)
		*k = '\0';
	return key;
}

/* ---- one export's table ----------------------------------------------------- */

struct hold_ctx {
	struct hold_rule *rules;	/* defaults, the policy's, includes */
	size_t n;
	char **owned;			/* strings the rules point into */
	size_t nowned;
};

static int ctx_add(struct hold_ctx *h, const char *glob, enum hold_check check,
		   const char *why, const char *source, bool own)
{
	struct hold_rule *v = realloc(h->rules, (h->n + 1) * sizeof(*v));
	char *copy = NULL;

	if (!v)
		return -ENOMEM;
	h->rules = v;
	if (own) {
		char **o = realloc(h->owned, (h->nowned + 1) * sizeof(char *));

		if (!o || !(copy = strdup(glob))) {
			if (o)
				h->owned = o;
			return -ENOMEM;
		}
		h->owned = o;
		h->owned[h->nowned++] = copy;
		glob = copy;
	}
	h->rules[h->n++] = (struct hold_rule){ glob, check, why, source };
	return 0;
}

/* "a/./b/../c" -> "a/c" in place; -1 if it climbs out of the top. */
int path_normalize(char *path)
{
	char out[4096], *in = path;
	size_t o = 0;

	while (*in) {
		size_t n = strcspn(in, "/");

		if (n == 2 && in[0] == '.' && in[1] == '.') {
			if (o == 0)
				return -1;
			while (o > 0 && out[o - 1] != '/')
				o--;
			o -= o > 0;	/* the slash before it */
		} else if (n && !(n == 1 && in[0] == '.')) {
			if (o + n + 2 > sizeof(out))
				return -1;
			if (o)
				out[o++] = '/';
			memcpy(out + o, in, n);
			o += n;
		}
		in += n + (in[n] == '/');
	}
	out[o] = '\0';
	memcpy(path, out, o + 1);
	return o ? 0 : -1;
}

/* path as a glob that matches it alone: the table's globs are fnmatch(3)'s */
static int glob_escape(const char *path, char *glob, size_t size)
{
	size_t o = 0;

	for (; *path; path++) {
		if (o + 3 > size)
			return -1;
		if (strchr("*?[\\", *path))
			glob[o++] = '\\';
		glob[o++] = *path;
	}
	glob[o] = '\0';
	return 0;
}

/*
 * A key of the lower's .git/config that runs a program (core.fsmonitor,
 * an alias "!tools/x", a filter "sh tools/clean" ...) naming a path into
 * the working tree, where git starts it: that file is the sandbox's to
 * change, and the user's next git status or diff runs it.  Each word
 * with a '/' is taken for one (a bare name is looked up in PATH, an
 * absolute one is the host's); a word that is not a program is held for
 * nothing worse than a flag to let it out.
 */
static int program_one(struct hold_ctx *h, const struct gitcfg_item *it)
{
	char path[4096], glob[8192];
	const char *v = it->value;
	int r = 0;

	while (v && *v && r == 0) {
		size_t n;
		bool quoted;

		v += strspn(v, " \t;|&<>()!");
		quoted = *v == '"' || *v == '\'';
		n = quoted ? strcspn(v + 1, *v == '"' ? "\"" : "'") :
			     strcspn(v, " \t;|&<>()");
		if (quoted)
			v++;
		if (n && n < sizeof(path) && memchr(v, '/', n) && !strchr("/~$-", *v)) {
			memcpy(path, v, n);
			path[n] = '\0';
			/* out of the tree: not the sandbox's to change */
			if (path_normalize(path) == 0 && glob_escape(path, glob, sizeof(glob)) == 0)
				r = ctx_add(h, glob, HOLD_ALWAYS,
					    "the workspace's .git/config runs this file (a program a key names: core.fsmonitor, an alias, a filter ...)",
					    "git-config(1)", true);
		}
		v += n + (quoted && v[n]);
	}
	return r;
}

/*
 * core.hooksPath in the lower's .git/config: git runs the files of that
 * directory as hooks, and one in the workspace (".githooks", committed
 * with the project) is the sandbox's to change.  Relative to the top of
 * the working tree; an absolute one is out of the tree.
 */
static int hookspath_one(struct hold_ctx *h, const struct gitcfg_item *it)
{
	char path[4096], glob[8192];

	if (!it->value || !it->value[0] || it->value[0] == '/' || it->value[0] == '~')
		return 0;
	if (snprintf(path, sizeof(path), "%s", it->value) >= (int)sizeof(path))
		return 0;
	/* the directory's every entry, the working tree's whole for "." */
	if (strspn(path, "./") == strlen(path) && !strstr(path, ".."))
		strcpy(glob, "**");
	else if (path_normalize(path) < 0 || glob_escape(path, glob, sizeof(glob) - 3) < 0)
		return 0;	/* out of the tree: not the sandbox's to change */
	else
		strcat(glob, "/**");
	return ctx_add(h, glob, HOLD_ALWAYS,
		       "the workspace's .git/config names this directory core.hooksPath: git runs its files as hooks",
		       "git-config(1), core.hooksPath", true);
}

/*
 * The lower's .git/config is the user's own, but a file it includes can
 * sit in the workspace, where the sandbox may change it: each such file
 * is checked as git config.  Relative paths are relative to .git/.
 */
static int include_one(struct hold_ctx *h, const struct gitcfg_item *it)
{
	char path[4096], glob[8192];

	if (!it->value || strcmp(it->name, "path") || it->value[0] == '/' ||
	    it->value[0] == '~')
		return 0;
	if (snprintf(path, sizeof(path), ".git/%s", it->value) >= (int)sizeof(path) ||
	    path_normalize(path) < 0 || glob_escape(path, glob, sizeof(glob)) < 0)
		return 0;	/* out of the tree: not the sandbox's to change */
	return ctx_add(h, glob, HOLD_GIT_CONFIG,
		       "the workspace's .git/config includes this file: git runs the programs it names",
		       "git-config(1), Includes", true);
}

/* What of the working tree one key of the lower's .git/config makes git run. */
static int config_one(void *arg, const struct gitcfg_item *it)
{
	struct hold_ctx *h = arg;

	if (!strcmp(it->sec, "include") || !strcmp(it->sec, "includeif"))
		return include_one(h, it);
	if (!strcmp(it->sec, "core") && !it->sub && !strcmp(it->name, "hookspath"))
		return hookspath_one(h, it);
	return gitcfg_key_runs(it) ? program_one(h, it) : 0;
}

/* Rules for what the lower's .git/config runs from the working tree. */
static int add_config_rules(struct hold_ctx *h, const struct layers *l)
{
	char *data = NULL;
	size_t len;
	int r;

	if (l->lower < 0 || read_beneath(l->lower, ".git/config", HOLD_READ_MAX,
					 &data, &len) < 0)
		return 0;
	/* a config git cannot read runs nothing (git stops on it) */
	r = gitcfg_parse(data, len, config_one, h, NULL);
	free(data);
	return r == -ENOMEM ? r : 0;
}

int hold_ctx_new(struct hold_ctx **out, const struct corral_policy *p,
		 const struct layers *l, struct corral_err *err)
{
	struct hold_ctx *h = calloc(1, sizeof(*h));
	int r = 0;

	if (!h)
		return corral_set_err(err, -ENOMEM, "out of memory building the export's hold table");
	for (size_t i = 0; r == 0 && hold_defaults[i].glob; i++)
		r = ctx_add(h, hold_defaults[i].glob, hold_defaults[i].check,
			    hold_defaults[i].why, hold_defaults[i].source, false);
	for (size_t i = 0; r == 0 && p && i < p->export.nhold; i++) {
		enum hold_check check = HOLD_ALWAYS;

		if (p->export.hold[i].check &&
		    hold_check_parse(p->export.hold[i].check, &check) < 0) {
			hold_ctx_free(h);
			return corral_set_err(err, -EINVAL, "export.hold: unknown check \"%s\"",
					      p->export.hold[i].check);
		}
		r = ctx_add(h, p->export.hold[i].path, check,
			    "the policy's export.hold names it", "the policy", true);
	}
	if (r == 0)
		r = add_config_rules(h, l);
	if (r < 0) {
		hold_ctx_free(h);
		return corral_set_err(err, r, "out of memory building the export's hold table");
	}
	*out = h;
	return 0;
}

void hold_ctx_free(struct hold_ctx *h)
{
	if (!h)
		return;
	for (size_t i = 0; i < h->nowned; i++)
		free(h->owned[i]);
	free(h->owned);
	free(h->rules);
	free(h);
}

/* Whether the directory of path holds HEAD and objects/: a bare repo. */
static bool in_git_dir(const struct layers *l, const char *path)
{
	char buf[4096];
	const char *slash = strrchr(path, '/');
	int n = slash ? (int)(slash - path) : 0;

	snprintf(buf, sizeof(buf), "%.*s%sHEAD", n, path, n ? "/" : "");
	if (!layers_exists(l, buf))
		return false;
	snprintf(buf, sizeof(buf), "%.*s%sobjects", n, path, n ? "/" : "");
	return layers_exists(l, buf);
}

/* Items of new not in old: what the change brings. */
static const char *first_new_item(const char *nv, size_t nn, const char *ov,
				  size_t on)
{
	for (size_t i = 0; i < nn; i++, nv += strlen(nv) + 1) {
		const char *o = ov;
		bool seen = false;

		for (size_t j = 0; j < on && !seen; j++, o += strlen(o) + 1)
			seen = !strcmp(o, nv);
		if (!seen)
			return nv;
	}
	return NULL;
}

/*
 * A symlink the table must hold for what it leads to: inside a .git
 * directory (git reads .git/modules, worktrees, info, objects through
 * one), or where a rule names a directory (".vscode" -> a directory whose
 * tasks.json runs on folder open): the rules read the target's entries
 * by other names, never through the link.  The rule's why, or NULL.
 */
static const char *link_hold(const struct hold_ctx *h, const char *key)
{
	static const char in_git[] = "git reads what a link inside .git leads to as its own";

	for (const char *p = key; *p;) {
		size_t n = strcspn(p, "/");

		if (p[n] == '/' && n == 4 && !memcmp(p, ".git", 4))
			return in_git;
		p += n + (p[n] == '/');
	}
	for (size_t i = 0; i < h->n; i++)
		if (strchr(h->rules[i].glob, '/') &&
		    beneath_match(h->rules[i].glob, key, FNM_CASEFOLD, false))
			return h->rules[i].why;
	return NULL;
}

int hold_decide(struct hold_ctx *h, const struct layers *l,
		const struct change *c, char *why, size_t whylen,
		char **data, size_t *len)
{
	char *nv = NULL, *ov = NULL, *old = NULL, *key;
	size_t nn = 0, on = 0, oldlen = 0;
	int r = 0;

	*data = NULL;
	*len = 0;
	why[0] = '\0';
	/* directories run nothing; deletions bring nothing */
	if (c->kind == CH_DELETED || S_ISDIR(c->mode))
		return 0;
	key = hold_key(c->path);
	if (!key)
		return -ENOMEM;
	if (S_ISLNK(c->mode)) {
		const char *lw = link_hold(h, key);

		if (lw)
			snprintf(why, whylen, "a symlink where the hold table looks beneath "
				 "it, whose target it does not check: %s", lw);
	}
	for (size_t i = 0; i < h->n && !why[0]; i++) {
		const struct hold_rule *rule = &h->rules[i];
		const char *item;

		if (!glob_match(rule->glob, key, FNM_CASEFOLD))
			continue;
		if (rule->check == HOLD_GIT_BARE_CONFIG && !in_git_dir(l, c->path))
			continue;
		if (rule->check == HOLD_ALWAYS || !S_ISREG(c->mode)) {
			snprintf(why, whylen, "%s (%s)", rule->why, rule->source);
			break;
		}
		if (!*data) {
			r = read_beneath(l->upper, c->path, HOLD_READ_MAX, data, len);
			if (r == -EFBIG) {
				snprintf(why, whylen, "%s (%s); larger than %u bytes, held unread",
					 rule->why, rule->source, HOLD_READ_MAX);
				r = 0;
				break;
			}
			if (r < 0) {
				snprintf(why, whylen, "%s (%s); cannot be read to check: %s",
					 rule->why, rule->source, strerror(-r));
				r = 0;
				break;
			}
		}
		r = hold_findings(rule->check, *data, *len, &nv, &nn);
		if (r == 0 && l->lower >= 0 && c->kind != CH_ADDED &&
		    read_beneath(l->lower, c->path, HOLD_READ_MAX, &old, &oldlen) == 0)
			r = hold_findings(rule->check, old, oldlen, &ov, &on);
		if (r < 0)
			break;
		item = first_new_item(nv, nn, ov, on);
		if (item)
			snprintf(why, whylen, "%s: %s (%s)", item, rule->why, rule->source);
		free(nv);
		free(ov);
		free(old);
		nv = ov = old = NULL;
		nn = on = 0;
	}
	free(nv);
	free(ov);
	free(old);
	free(key);
	if (r < 0 || why[0]) {
		free(*data);
		*data = NULL;
		*len = 0;
	}
	return r;
}
