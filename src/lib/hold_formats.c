/*
 * hold_formats.c - what a file holds that makes a host tool run code, read
 * in the file's own format: git's config syntax (also .gitmodules and
 * .lfsconfig), .gitattributes lines, VS Code's JSON with comments.  Each
 * finding is one string ("core.fsmonitor = x"); content the format cannot
 * read is itself a finding, since the tool might read it otherwise.  Pure
 * functions of the bytes (fuzz/fuzz_hold.c); the table that says which
 * file gets which check is hold.c.
 */
#include "export.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A value longer than this is not read (the file is held unread). */
#define VALUE_MAX	(4u << 20)

/* ---- findings --------------------------------------------------------- */

struct found {
	char *v;		/* NUL-separated items */
	size_t len, n;
	bool nomem;
};

static void add_found(struct found *f, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void add_found(struct found *f, const char *fmt, ...)
{
	va_list ap;
	char *s, *grown;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0 || !(grown = realloc(f->v, f->len + n + 1))) {
		if (n >= 0)
			free(s);
		f->nomem = true;
		return;
	}
	memcpy(grown + f->len, s, n + 1);
	f->v = grown;
	f->len += n + 1;
	f->n++;
	free(s);
}

/* ---- git config --------------------------------------------------------- */

/*
 * Settings that run a program, a hook or a remote command, or bring in
 * settings from elsewhere (git-config(1), "Variables"; the names are
 * matched lower-cased, "*" a subsection).  Later keys that do the same
 * are caught by their name's ending (config_tails).
 */
static const char *const config_keys[] = {
	"core.fsmonitor",		/* runs on every status/diff */
	"core.hookspath",		/* hooks from anywhere */
	"core.sshcommand", "core.gitproxy", "core.pager", "core.editor",
	"core.askpass", "core.alternaterefscommand",
	"core.worktree",		/* git then works on another directory */
	"credential.helper", "credential.*.helper",
	"diff.external", "diff.*.textconv", "diff.*.command",
	"difftool.*.cmd", "difftool.*.path",
	"mergetool.*.cmd", "mergetool.*.path",
	"filter.*.clean", "filter.*.smudge", "filter.*.process",
	"merge.*.driver",
	"gpg.program", "gpg.*.program", "gpg.ssh.defaultkeycommand",
	"sequence.editor", "interactive.difffilter",
	"pager.*",			/* pager.<cmd> is a command line */
	"alias.*",			/* "!cmd", or -c settings for a command */
	"include.path", "includeif.*.path",
	"remote.*.uploadpack", "remote.*.receivepack", "remote.*.vcs",
	"submodule.*.update",		/* checked by value below */
	"trailer.*.command", "trailer.*.cmd",
	"web.browser", "browser.*.cmd", "browser.*.path",
	"man.*.cmd", "man.*.path", "guitool.*.cmd",
	"sendemail.smtpserver", "sendemail.tocmd", "sendemail.cccmd",
	"sendemail.sendmailcmd",
	"protocol.allow", "protocol.*.allow",	/* lets ext:: run */
	"uploadpack.packobjectshook",
	"lfs.customtransfer.*.path", "lfs.extension.*.clean",
	"lfs.extension.*.smudge",
	NULL,
};

/* Name endings that, in any section, say "this runs something". */
static const char *const config_tails[] = {
	"command", "cmd", "program", "helper", "hook", "hookspath", "editor",
	"pager", "driver", "textconv", "external", "askpass", "process",
	"clean", "smudge", NULL,
};

static bool key_matches(const char *pattern, const char *sec, const char *sub,
			const char *name)
{
	char key[512];

	/* "a.*.b": any subsection; "a.b": none */
	if (sub)
		snprintf(key, sizeof(key), "%s.*.%s", sec, name);
	else
		snprintf(key, sizeof(key), "%s.%s", sec, name);
	return !strcmp(pattern, key) ||
	       (!strcmp(pattern, "pager.*") && !strcmp(sec, "pager")) ||
	       (!strcmp(pattern, "alias.*") && !strcmp(sec, "alias"));
}

static bool ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), t = strlen(tail);

	return n >= t && !strcmp(s + n - t, tail);
}

static bool submodule_update_ok(const char *v)
{
	static const char *const ok[] = { "checkout", "rebase", "merge", "none" };

	for (size_t i = 0; i < 4; i++)
		if (!strcmp(v, ok[i]))
			return true;
	return false;
}

bool gitcfg_key_runs(const struct gitcfg_item *it)
{
	for (size_t i = 0; config_keys[i]; i++)
		if (key_matches(config_keys[i], it->sec, it->sub, it->name))
			return true;
	for (size_t i = 0; config_tails[i]; i++)
		if (ends_with(it->name, config_tails[i]))
			return true;
	return false;
}

static void judge_config(struct found *f, const struct gitcfg_item *it,
			 bool modules)
{
	const char *v = it->value ? it->value : "";

	if (modules) {
		/* gitmodules(5): only url, path, update ... are read; these run */
		if (strcmp(it->sec, "submodule"))
			return;
		if ((!strcmp(it->name, "update") && !submodule_update_ok(v)) ||
		    (!strcmp(it->name, "url") && (strstr(v, "ext::") || v[0] == '-')) ||
		    (!strcmp(it->name, "path") && v[0] == '-'))
			add_found(f, "submodule.%s.%s = %s", it->sub ? it->sub : "",
				  it->name, v);
		return;
	}
	/* url.<base>.insteadOf: the rewritten URL is the subsection */
	if (!strcmp(it->sec, "url") && it->sub && strstr(it->sub, "ext::")) {
		add_found(f, "url.%s.%s = %s", it->sub, it->name, v);
		return;
	}
	if (!strcmp(it->sec, "remote") && (!strcmp(it->name, "url") ||
					   !strcmp(it->name, "pushurl")) &&
	    strstr(v, "ext::")) {
		add_found(f, "remote.%s.%s = %s", it->sub ? it->sub : "", it->name, v);
		return;
	}
	if (!strcmp(it->sec, "submodule") && !strcmp(it->name, "update")) {
		if (!submodule_update_ok(v))
			add_found(f, "submodule.%s.update = %s", it->sub ? it->sub : "", v);
		return;
	}
	if (!gitcfg_key_runs(it))
		return;
	if (it->sub)
		add_found(f, "%s.%s.%s = %s", it->sec, it->sub, it->name, v);
	else
		add_found(f, "%s.%s = %s", it->sec, it->name, v);
}

/*
 * git's own syntax (config.c: get_base_var, get_value, parse_value):
 * "[section]", "[section \"sub\"]" or "[section.sub]", then "name = value"
 * or a bare "name"; a header may share its line with a key; values take
 * quotes, \\ \" \n \t \b escapes and a backslash-newline continuation;
 * '#' and ';' start comments outside quotes.  Anything else is an error
 * here as in git (where it stops git cold: then nothing runs).
 */
struct cfg_parser {
	const char *s, *end;
	char sec[128], sub[256], name[128];
	bool has_sub;
	char *val;
	size_t vlen, vcap;
};

static int cfg_peek(struct cfg_parser *p)
{
	return p->s < p->end ? (unsigned char)*p->s : -1;
}

static void cfg_skip_line(struct cfg_parser *p)
{
	while (p->s < p->end && *p->s != '\n')
		p->s++;
}

static int cfg_val_put(struct cfg_parser *p, char c)
{
	if (p->vlen + 2 > p->vcap) {
		size_t cap = p->vcap ? p->vcap * 2 : 128;
		char *v;

		if (cap > VALUE_MAX || !(v = realloc(p->val, cap)))
			return -ENOMEM;
		p->val = v;
		p->vcap = cap;
	}
	p->val[p->vlen++] = c;
	p->val[p->vlen] = '\0';
	return 0;
}

static int cfg_header(struct cfg_parser *p)
{
	size_t n = 0;
	int c;

	p->s++;	/* '[' */
	p->has_sub = false;
	while ((c = cfg_peek(p)) >= 0 && (isalnum(c) || c == '-' || c == '.')) {
		if (n + 1 >= sizeof(p->sec))
			return -EINVAL;
		p->sec[n++] = tolower(c);
		p->s++;
	}
	p->sec[n] = '\0';
	if (!n)
		return -EINVAL;
	if (c == ' ' || c == '\t') {
		size_t m = 0;

		while ((c = cfg_peek(p)) == ' ' || c == '\t')
			p->s++;
		if (c != '"')
			return -EINVAL;
		p->s++;
		while ((c = cfg_peek(p)) >= 0 && c != '"' && c != '\n') {
			if (c == '\\') {
				p->s++;
				if ((c = cfg_peek(p)) < 0 || c == '\n')
					return -EINVAL;
			}
			if (m + 1 >= sizeof(p->sub))
				return -EINVAL;
			p->sub[m++] = c;
			p->s++;
		}
		if (c != '"')
			return -EINVAL;
		p->s++;
		p->sub[m] = '\0';
		p->has_sub = true;
		c = cfg_peek(p);
	} else {
		/* [section.sub]: the old form, the subsection lower-cased */
		char *dot = strchr(p->sec, '.');

		if (dot) {
			snprintf(p->sub, sizeof(p->sub), "%s", dot + 1);
			*dot = '\0';
			p->has_sub = true;
			/* "[.x]", "[x.]": names no key git acts on; read as an error */
			if (!p->sec[0] || !p->sub[0])
				return -EINVAL;
		}
	}
	if (c != ']')
		return -EINVAL;
	p->s++;
	return 0;
}

/* name [= value]; the value unquoted and unescaped into p->val */
static int cfg_keyvalue(struct cfg_parser *p, bool *has_value)
{
	size_t n = 0, space = 0;
	bool quoted = false;
	int c;

	while ((c = cfg_peek(p)) >= 0 && (isalnum(c) || c == '-')) {
		if (n + 1 >= sizeof(p->name))
			return -EINVAL;
		p->name[n++] = tolower(c);
		p->s++;
	}
	p->name[n] = '\0';
	if (!n || !isalpha((unsigned char)p->name[0]))
		return -EINVAL;
	while ((c = cfg_peek(p)) == ' ' || c == '\t')
		p->s++;
	p->vlen = 0;
	if (p->val)
		p->val[0] = '\0';
	*has_value = c == '=';
	if (c != '=') {
		if (c == '\n' || c == '#' || c == ';' || c < 0 || c == '\r') {
			cfg_skip_line(p);
			return 0;
		}
		return -EINVAL;
	}
	p->s++;
	while ((c = cfg_peek(p)) == ' ' || c == '\t')
		p->s++;
	for (;;) {
		c = cfg_peek(p);
		if (c < 0 || (c == '\n' && !quoted))
			break;
		if (c == '\n')
			return -EINVAL;		/* newline inside quotes */
		p->s++;
		if (!quoted && (c == '#' || c == ';')) {
			cfg_skip_line(p);
			break;
		}
		/* as git: each blank inside a value stays one space, trailing go */
		if (!quoted && isspace(c)) {
			space += p->vlen > 0;
			continue;
		}
		for (; space; space--)
			if (cfg_val_put(p, ' ') < 0)
				return -ENOMEM;
		if (c == '\\') {
			c = cfg_peek(p);
			p->s++;
			switch (c) {
			case '\n': continue;	/* continuation */
			case 't': c = '\t'; break;
			case 'b': c = '\b'; break;
			case 'n': c = '\n'; break;
			case '\\': case '"': break;
			default: return -EINVAL;
			}
		} else if (c == '"') {
			quoted = !quoted;
			continue;
		}
		if (cfg_val_put(p, c) < 0)
			return -ENOMEM;
	}
	if (quoted)
		return -EINVAL;
	if (!p->val && cfg_val_put(p, '\0') == 0)
		p->vlen = 0;
	return 0;
}

int gitcfg_parse(const char *data, size_t len,
		 int (*fn)(void *arg, const struct gitcfg_item *it), void *arg,
		 int *errline)
{
	struct cfg_parser p = { .s = data, .end = data + len };
	bool in_section = false;
	int line = 1, r = 0;

	/* a UTF-8 BOM is skipped, as git does */
	if (len >= 3 && !memcmp(data, "\xef\xbb\xbf", 3))
		p.s += 3;
	while (p.s < p.end && r == 0) {
		int c = cfg_peek(&p);
		bool has_value;

		if (c == '\n') {
			line++;
			p.s++;
		} else if (isspace(c)) {
			p.s++;
		} else if (c == '#' || c == ';') {
			cfg_skip_line(&p);
		} else if (c == '[') {
			r = cfg_header(&p);
			in_section = r == 0;
		} else if (isalpha(c) && in_section) {
			const char *before = p.s;

			r = cfg_keyvalue(&p, &has_value);
			if (r == 0) {
				struct gitcfg_item it = { p.sec, p.has_sub ? p.sub : NULL,
							  p.name, has_value ? p.val : NULL };

				r = fn(arg, &it);
				for (const char *q = before; q < p.s; q++)
					line += *q == '\n';
			}
		} else {
			r = -EINVAL;
		}
	}
	free(p.val);
	if (errline)
		*errline = line;
	return r;
}

struct judge_arg {
	struct found *f;
	bool modules;
};

static int judge_one(void *arg, const struct gitcfg_item *it)
{
	struct judge_arg *j = arg;

	judge_config(j->f, it, j->modules);
	return j->f->nomem ? -ENOMEM : 0;
}

static void git_config_findings(struct found *f, const char *data, size_t len,
				bool modules)
{
	struct judge_arg j = { f, modules };
	int line = 0, r = gitcfg_parse(data, len, judge_one, &j, &line);

	if (r == -ENOMEM)
		f->nomem = true;
	else if (r < 0)
		add_found(f, "line %d cannot be read as git config (git could read it otherwise)",
			  line);
}

/* ---- .gitattributes ------------------------------------------------------ */

static void attributes_findings(struct found *f, const char *data, size_t len)
{
	const char *s = data, *end = data + len;
	int line = 0;

	while (s < end) {
		const char *nl = memchr(s, '\n', end - s);
		size_t ll = nl ? (size_t)(nl - s) : (size_t)(end - s);
		char buf[1024];
		char *tok, *save = NULL;
		bool first = true;

		line++;
		snprintf(buf, sizeof(buf), "%.*s", (int)(ll < sizeof(buf) - 1 ? ll : sizeof(buf) - 1), s);
		if (ll >= sizeof(buf))
			add_found(f, "line %d is longer than %zu bytes", line, sizeof(buf) - 1);
		for (tok = strtok_r(buf, " \t\r", &save); tok;
		     tok = strtok_r(NULL, " \t\r", &save)) {
			if (first && tok[0] == '#')
				break;
			/* the pattern (or "[attr]name" of a macro) comes first */
			if (first) {
				first = false;
				continue;
			}
			if (!strncmp(tok, "filter=", 7) || !strncmp(tok, "diff=", 5) ||
			    !strncmp(tok, "merge=", 6))
				add_found(f, "%s", tok);
		}
		s += ll + 1;
	}
}

/* ---- VS Code: JSON with comments ----------------------------------------- */

/*
 * VS Code reads JSONC: comments and trailing commas.  Strip both (outside
 * strings) and read what is left as JSON, so that escapes in keys and
 * values mean what they mean to VS Code.
 */
static char *jsonc_to_json(const char *s, size_t len)
{
	char *out = malloc(len + 1);
	size_t o = 0;
	bool str = false;

	if (!out)
		return NULL;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];

		if (str) {
			out[o++] = c;
			if (c == '\\' && i + 1 < len)
				out[o++] = s[++i];
			else if (c == '"')
				str = false;
		} else if (c == '"') {
			str = true;
			out[o++] = c;
		} else if (c == '/' && i + 1 < len && s[i + 1] == '/') {
			while (i < len && s[i] != '\n')
				i++;
			if (i < len)
				out[o++] = '\n';
		} else if (c == '/' && i + 1 < len && s[i + 1] == '*') {
			for (i += 2; i + 1 < len && !(s[i] == '*' && s[i + 1] == '/'); i++)
				;
			i++;
			out[o++] = ' ';
		} else if (c == ',') {
			size_t j = i + 1;

			while (j < len && isspace((unsigned char)s[j]))
				j++;
			if (j < len && (s[j] == '}' || s[j] == ']'))
				continue;	/* a trailing comma */
			out[o++] = c;
		} else {
			out[o++] = c;
		}
	}
	out[o] = '\0';
	return out;
}

/* Any "runOn": "folderOpen", at any depth (tasks, their os variants). */
static void tasks_walk(struct found *f, json_t *v, int depth)
{
	const char *key;
	json_t *x;
	size_t i;

	if (depth > 64)
		return;
	if (json_is_object(v)) {
		json_object_foreach(v, key, x) {
			if (!strcmp(key, "runOn") && json_is_string(x) &&
			    !strcmp(json_string_value(x), "folderOpen"))
				add_found(f, "runOn = folderOpen");
			tasks_walk(f, x, depth + 1);
		}
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, x)
			tasks_walk(f, x, depth + 1);
	}
}

/*
 * Settings keys that name a program, a shell, an interpreter or its
 * environment (python.defaultInterpreterPath, terminal.integrated.*,
 * git.path, *.server.path, go.alternateTools, eslint.runtime ...), or that
 * let tasks and workspaces run unasked.  Matched as parts of the key,
 * lower-cased: broad on purpose.
 */
static const char *const settings_words[] = {
	"path", "executable", "command", "cmd", "shell", "interpreter",
	"program", "binary", "server", "tool", "runtime", "env", "terminal",
	"launch", "args", "profile", "manager", "exec", "java.home", "task.",
	"trust", "script", "hook", NULL,
};

static void settings_object(struct found *f, json_t *o)
{
	const char *key;
	json_t *v;

	if (!json_is_object(o))
		return;
	json_object_foreach(o, key, v) {
		char low[256];
		size_t i;

		for (i = 0; key[i] && i + 1 < sizeof(low); i++)
			low[i] = tolower((unsigned char)key[i]);
		low[i] = '\0';
		for (i = 0; settings_words[i]; i++)
			if (strstr(low, settings_words[i])) {
				add_found(f, "setting \"%s\"", key);
				break;
			}
	}
}

static void vscode_findings(struct found *f, enum hold_check check,
			    const char *data, size_t len)
{
	char *text = jsonc_to_json(data, len);
	json_error_t je;
	json_t *doc;

	if (!text) {
		f->nomem = true;
		return;
	}
	doc = json_loads(text, JSON_REJECT_DUPLICATES, &je);
	free(text);
	if (!doc) {
		add_found(f, "not JSON this check can read (line %d: %s)", je.line, je.text);
		return;
	}
	if (check == HOLD_VSCODE_TASKS || check == HOLD_VSCODE_WORKSPACE)
		tasks_walk(f, doc, 0);
	if (check == HOLD_VSCODE_SETTINGS)
		settings_object(f, doc);
	if (check == HOLD_VSCODE_WORKSPACE)
		settings_object(f, json_object_get(doc, "settings"));
	json_decref(doc);
}

int hold_findings(enum hold_check check, const char *data, size_t len,
		  char **out, size_t *nout)
{
	struct found f = { 0 };

	switch (check) {
	case HOLD_ALWAYS:
		add_found(&f, "any content");
		break;
	case HOLD_GIT_CONFIG:
	case HOLD_GIT_BARE_CONFIG:
		git_config_findings(&f, data, len, false);
		break;
	case HOLD_GITMODULES:
		git_config_findings(&f, data, len, true);
		break;
	case HOLD_GITATTRIBUTES:
		attributes_findings(&f, data, len);
		break;
	case HOLD_VSCODE_TASKS:
	case HOLD_VSCODE_SETTINGS:
	case HOLD_VSCODE_WORKSPACE:
		vscode_findings(&f, check, data, len);
		break;
	}
	if (f.nomem) {
		free(f.v);
		return -ENOMEM;
	}
	*out = f.v;
	*nout = f.n;
	return 0;
}
