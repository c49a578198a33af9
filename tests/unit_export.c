/*
 * unit_export.c - the workspace's way out: Myers' diff against a brute
 * force, patches that git apply takes, the hold table on each trap, and
 * diff/export/apply on real overlays made here (unshare -Urm, mount -t
 * overlay), including a symlink swapped in during the export.
 */
#include "unit.h"
#include "export.h"
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmp[256];

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int sh(const char *fmt, ...)
{
	char *cmd;
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vasprintf(&cmd, fmt, ap);
	va_end(ap);
	if (r < 0)
		return -1;
	r = system(cmd);
	free(cmd);
	return WIFEXITED(r) ? WEXITSTATUS(r) : -1;
}

static char *slurp(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	char *buf;

	if (fd < 0 || fstat(fd, &st) < 0) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	buf = malloc(st.st_size + 1);
	if (buf && read(fd, buf, st.st_size) != st.st_size) {
		free(buf);
		buf = NULL;
	}
	if (buf)
		buf[st.st_size] = '\0';
	if (len)
		*len = st.st_size;
	close(fd);
	return buf;
}

static void spit(const char *path, const char *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0 || write(fd, data, len) != (ssize_t)len)
		fprintf(stderr, "cannot write %s\n", path);
	if (fd >= 0)
		close(fd);
}

/* ---- Myers against the longest common subsequence, by brute force ----- */

static size_t lcs(const uint32_t *a, size_t na, const uint32_t *b, size_t nb)
{
	static size_t t[65][65];

	for (size_t i = 0; i <= na; i++)
		for (size_t j = 0; j <= nb; j++)
			t[i][j] = !i || !j ? 0 : a[i - 1] == b[j - 1] ? t[i - 1][j - 1] + 1 :
				t[i - 1][j] > t[i][j - 1] ? t[i - 1][j] : t[i][j - 1];
	return t[na][nb];
}

/* overlays need a user namespace to mount them in (set in main) */
static bool ovl_ok;

TEST(myers_minimal_and_correct)
{
	uint32_t a[64], b[64];
	bool del[64], ins[64];

	srand(42);
	for (int round = 0; round < 2000; round++) {
		size_t na = rand() % 40, nb = rand() % 40, nd = 0, ni = 0, i = 0, j = 0;
		int alpha = 2 + rand() % 4;
		bool ok = true;

		for (size_t k = 0; k < na; k++)
			a[k] = rand() % alpha;
		for (size_t k = 0; k < nb; k++)
			b[k] = rand() % alpha;
		CHECK(linediff(a, na, b, nb, del, ins) == 0);
		/* the kept lines of a are exactly the kept lines of b, in order */
		while (i < na || j < nb) {
			while (i < na && del[i])
				i++, nd++;
			while (j < nb && ins[j])
				j++, ni++;
			if (i < na && j < nb) {
				ok &= a[i] == b[j];
				i++;
				j++;
			} else {
				ok &= i == na && j == nb;
				break;
			}
		}
		CHECK(ok);
		/* and as few edits as there can be */
		CHECK(nd + ni == na + nb - 2 * lcs(a, na, b, nb));
		if (!ok || nd + ni != na + nb - 2 * lcs(a, na, b, nb))
			break;
	}
}

TEST(myers_large_input_is_bounded)
{
	size_t n = 200000;
	uint32_t *a = malloc(n * sizeof(*a)), *b = malloc(n * sizeof(*b));
	bool *del = malloc(n), *ins = malloc(n);
	size_t nd = 0, ni = 0;

	for (size_t i = 0; i < n; i++) {
		a[i] = i * 2;		/* nothing in common: the worst case */
		b[i] = i * 2 + 1;
	}
	CHECK(linediff(a, n, b, n, del, ins) == 0);
	for (size_t i = 0; i < n; i++) {
		nd += del[i];
		ni += ins[i];
	}
	CHECK(nd == n && ni == n);
	free(a);
	free(b);
	free(del);
	free(ins);
}

/* ---- patches through the host's git apply ------------------------------ */

static void round_trip(const char *name, const char *old, size_t oldlen,
		       unsigned int oldmode, const char *new, size_t newlen,
		       unsigned int newmode)
{
	struct patch_buf pb = { 0 };
	char dir[512], path[600], *got;
	size_t len;
	struct stat st;

	snprintf(dir, sizeof(dir), "%s/git-%s", tmp, name);
	CHECK(sh("rm -rf '%s' && mkdir -p '%s' && git -C '%s' init -q", dir, dir, dir) == 0);
	snprintf(path, sizeof(path), "%s/f", dir);
	if (old && oldmode == 0120000) {
		char *t = strndup(old, oldlen);

		CHECK(symlink(t, path) == 0);
		free(t);
	} else if (old) {
		spit(path, old, oldlen);
		chmod(path, oldmode & 0777);
	}
	CHECK(patch_file(&pb, "f", old, oldlen, oldmode, new, newlen, newmode) == 0);
	snprintf(path, sizeof(path), "%s/p.diff", tmp);
	spit(path, pb.data ? pb.data : "", pb.len);
	if (sh("cd '%s' && git apply '%s/p.diff'", dir, tmp) != 0) {
		fprintf(stderr, "  %s: git apply failed on:\n%s\n", name, pb.data);
		CHECK(!"git apply");
	}
	snprintf(path, sizeof(path), "%s/f", dir);
	if (!new) {
		CHECK(lstat(path, &st) < 0 && errno == ENOENT);
	} else if (newmode == 0120000) {
		char t[4096];
		ssize_t n = readlink(path, t, sizeof(t));

		CHECK(n == (ssize_t)newlen && !memcmp(t, new, newlen));
	} else {
		got = slurp(path, &len);
		CHECK(got && len == newlen && !memcmp(got, new, newlen));
		CHECK(stat(path, &st) == 0 && (st.st_mode & 0100) == (newmode & 0100));
		free(got);
	}
	free(pb.data);
}

TEST(patch_round_trips_through_git_apply)
{
	char bin[3000], bin2[3000];
	char big[20000];
	size_t o = 0;

	for (size_t i = 0; i < sizeof(bin); i++) {
		bin[i] = (char)(i * 7 % 256);
		bin2[i] = (char)(i * 13 % 251);
	}
	for (int i = 0; i < 1000; i++)
		o += snprintf(big + o, sizeof(big) - o, "line %d\n", i);
	round_trip("edit", "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n", 20, 0100644,
		   "a\nB\nc\nd\ne\nf\ng\nh\nI\nj\nk\n", 22, 0100644);
	round_trip("nonl", "one\ntwo", 7, 0100644, "one\nthree", 9, 0100644);
	round_trip("addnl", "x", 1, 0100644, "x\n", 2, 0100644);
	round_trip("add", NULL, 0, 0, "new\nfile\n", 9, 0100755);
	round_trip("addempty", NULL, 0, 0, "", 0, 0100644);
	round_trip("delete", "gone\n", 5, 0100644, NULL, 0, 0);
	round_trip("chmod", "#!/bin/sh\n", 10, 0100644, "#!/bin/sh\n", 10, 0100755);
	round_trip("binary", bin, sizeof(bin), 0100644, bin2, sizeof(bin2), 0100644);
	round_trip("binadd", NULL, 0, 0, bin, sizeof(bin), 0100644);
	round_trip("bindel", bin, 100, 0100644, NULL, 0, 0);
	round_trip("symlink", NULL, 0, 0, "target/x", 8, 0120000);
	round_trip("relink", "a", 1, 0120000, "bb", 2, 0120000);
	{
		/* far-apart edits in a long file: several hunks */
		char *b2 = strdup(big);

		b2[8] = 'X';
		b2[o / 2] = 'Y';
		b2[o - 10] = 'Z';
		round_trip("hunks", big, o, 0100644, b2, o, 0100644);
		free(b2);
	}
}

/*
 * A side read a slice at a time makes the bytes the whole in memory makes
 * (zlib's output does not depend on how its input is sliced), and a text
 * past PATCH_TEXT_LINES comes out binary, and applies.
 */
TEST(patch_of_big_sides_streamed)
{
	size_t n = 3 * PATCH_SLICE + 12345, lines = PATCH_TEXT_LINES / 2 + 1;
	char *old = malloc(n), *new = malloc(n), *text = malloc(2 * lines);
	struct patch_buf whole = { 0 }, sliced = { 0 };
	char path[600];
	int fd;

	CHECK(old && new && text);
	srand(7);
	for (size_t i = 0; i < n; i++) {
		old[i] = (char)(i % 251 ? rand() % 7 : 0);	/* compressible, binary */
		new[i] = (char)(i % 3 ? old[i] : rand());
	}
	CHECK(patch_file(&whole, "f", old, n, 0100644, new, n, 0100644) == 0);
	/* the new side from a file, the old from memory */
	snprintf(path, sizeof(path), "%s/big-new", tmp);
	spit(path, new, n);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	{
		struct patch_src os = { .data = old, .fd = -1, .len = n };
		struct patch_src ns = { .fd = fd, .len = n };

		CHECK(patch_file_src(&sliced, "f", &os, 0100644, &ns, 0100644) == 0);
		/* a file shorter than said: its blob id and literal would disagree */
		ns.len = n + 1;
		CHECK(patch_file_src(&sliced, "g", &os, 0100644, &ns, 0100644) == -ESTALE);
	}
	close(fd);
	CHECK(whole.len > 0 && strstr(whole.data, "GIT binary patch"));
	CHECK(sliced.len >= whole.len && !memcmp(whole.data, sliced.data, whole.len));
	round_trip("streamed", old, n, 0100644, new, n, 0100644);
	/* a text of more lines than a line diff may take: binary, and it applies */
	for (size_t i = 0; i < lines; i++)
		memcpy(text + 2 * i, i % 1000 ? "a\n" : "b\n", 2);
	round_trip("many-lines", text, 2 * lines - 2, 0100644, text, 2 * lines, 0100644);
	free(whole.data);
	whole = (struct patch_buf){ 0 };
	CHECK(patch_file(&whole, "f", text, 2 * lines - 2, 0100644, text, 2 * lines,
			 0100644) == 0);
	CHECK(whole.data && strstr(whole.data, "GIT binary patch") && !strstr(whole.data, "@@"));
	free(whole.data);
	pb_done(&sliced);
	free(sliced.data);
	free(old);
	free(new);
	free(text);
}

TEST(patch_paths)
{
	CHECK(!patch_path_ok(".git/config"));
	CHECK(!patch_path_ok("sub/.GIT/hooks/x"));
	CHECK(!patch_path_ok(".git. /x"));
	CHECK(patch_path_ok(".github/workflows/ci.yml"));
	CHECK(patch_path_ok("a/.gitignore"));
}

/* ---- the hold table ------------------------------------------------------ */

static const char *held_item(enum hold_check check, const char *text)
{
	static char first[512];
	char *found = NULL;
	size_t n = 0;

	first[0] = '\0';
	if (hold_findings(check, text, strlen(text), &found, &n) == 0 && n)
		snprintf(first, sizeof(first), "%s", found);
	free(found);
	return n ? first : NULL;
}

TEST(hold_globs)
{
	CHECK(hold_glob_match("**/.git/**/config", ".git/config"));
	CHECK(hold_glob_match("**/.git/**/config", "sub/.git/modules/x/config"));
	CHECK(!hold_glob_match("**/.git/**/config", ".git/config.worktree"));
	CHECK(hold_glob_match("**/.git/**/hooks/**", ".git/hooks/pre-commit"));
	CHECK(hold_glob_match("**/.git/**/hooks/**", "a/b/.git/hooks/sub/x"));
	CHECK(!hold_glob_match("**/.git/**/hooks/**", "hooks/pre-commit"));
	CHECK(hold_glob_match(".envrc", "deep/dir/.envrc"));
	CHECK(hold_glob_match(".envrc", ".envrc"));
	CHECK(!hold_glob_match(".envrc", ".envrc.bak"));
	CHECK(hold_glob_match("**/.devcontainer/**", ".devcontainer/devcontainer.json"));
	CHECK(hold_glob_match("*.code-workspace", "x/my.code-workspace"));
	CHECK(hold_glob_match("**/.vscode/tasks.json", ".vscode/tasks.json"));
	{
		/* every default rule has a reason and a source */
		size_t n = 0;

		for (const struct hold_rule *r = hold_defaults; r->glob; r++, n++)
			CHECK(r->why && *r->why && r->source && *r->source);
		CHECK(n >= 15);
	}
	CHECK(hold_glob_match("**/.git/**/commondir", ".git/worktrees/w/commondir"));
	CHECK(!hold_glob_match("**/.vscode/tasks.json", ".vscode/tasks.json.orig"));
}

TEST(hold_git_config)
{
	static const struct { const char *text; const char *want; } risky[] = {
		{ "[core]\n\tfsmonitor = touch /tmp/x\n", "core.fsmonitor = touch /tmp/x" },
		{ "[core] hooksPath = /tmp/h\n", "core.hookspath = /tmp/h" },
		{ "[CORE]\n  PAGER = \"sh -c 'id'\" ; c\n", "core.pager = sh -c 'id'" },
		{ "[core]\n\teditor = vi\\\n  m\n", "core.editor = vi  m" },
		{ "[core]\nsshCommand=ssh -oProxyCommand=x\n", "core.sshcommand = ssh -oProxyCommand=x" },
		{ "[credential]\n\thelper = !x\n", "credential.helper = !x" },
		{ "[credential \"https://h\"]\n\thelper = !x\n", "credential.https://h.helper = !x" },
		{ "[diff]\n\texternal = x\n", "diff.external = x" },
		{ "[diff \"bin\"]\n\ttextconv = x\n", "diff.bin.textconv = x" },
		{ "[filter \"f\"]\n\tclean = x\n\tsmudge = y\n", "filter.f.clean = x" },
		{ "[filter \"lfs\"]\n\tprocess = x\n", "filter.lfs.process = x" },
		{ "[merge \"m\"]\n\tdriver = x %A\n", "merge.m.driver = x %A" },
		{ "[gpg]\n\tprogram = x\n", "gpg.program = x" },
		{ "[sequence]\n\teditor = x\n", "sequence.editor = x" },
		{ "[alias]\n\tst = !touch /tmp/x\n", "alias.st = !touch /tmp/x" },
		{ "[url \"ext::sh -c touch% /tmp/x\"]\n\tinsteadOf = https://\n",
		  "url.ext::sh -c touch% /tmp/x.insteadof = https://" },
		{ "[include]\n\tpath = ../evil.cfg\n", "include.path = ../evil.cfg" },
		{ "[includeIf \"gitdir:/\"]\n\tpath = x\n", "includeif.gitdir:/.path = x" },
		{ "[diff.x]\n\ttextconv = y\n", "diff.x.textconv = y" },
		{ "[pager]\n\tlog = touch /tmp/x\n", "pager.log = touch /tmp/x" },
		{ "[remote \"o\"]\n\tuploadpack = touch /tmp/x\n", "remote.o.uploadpack = touch /tmp/x" },
		{ "[newtool]\n\tfrobcommand = x\n", "newtool.frobcommand = x" },
		{ "[core]\n\tfsmonitor\n", "core.fsmonitor = " },
		{ "[core\n\tfsmonitor = x\n", "line 1 cannot be read as git config (git could read it otherwise)" },
		{ "[core]\n\tfsmonitor = \"x\n", "line 2 cannot be read as git config (git could read it otherwise)" },
	};
	static const char *const benign[] = {
		"[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n"
		"\tlogallrefupdates = true\n[remote \"origin\"]\n\turl = https://x/y.git\n"
		"\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n"
		"\tremote = origin\n\tmerge = refs/heads/main\n",
		"# comment\n; another\n[user]\n\tname = A \"B\" C\n\temail = a@b\n",
		"",
	};

	for (size_t i = 0; i < sizeof(risky) / sizeof(risky[0]); i++) {
		const char *got = held_item(HOLD_GIT_CONFIG, risky[i].text);

		if (!got || strcmp(got, risky[i].want)) {
			fprintf(stderr, "  config %zu: got \"%s\", want \"%s\"\n", i,
				got ? got : "(nothing)", risky[i].want);
			CHECK(!"risky config item");
		}
	}
	for (size_t i = 0; i < sizeof(benign) / sizeof(benign[0]); i++) {
		const char *got = held_item(HOLD_GIT_CONFIG, benign[i]);

		if (got)
			fprintf(stderr, "  benign %zu held: %s\n", i, got);
		CHECK(!got);
	}
}

TEST(hold_other_formats)
{
	CHECK_STR_CONTAINS(held_item(HOLD_GITATTRIBUTES, "*.c text\n*.bin filter=evil\n"),
			   "filter=evil");
	CHECK_STR_CONTAINS(held_item(HOLD_GITATTRIBUTES, "[attr]x diff=y\n"), "diff=y");
	CHECK_STR_CONTAINS(held_item(HOLD_GITATTRIBUTES, "* merge=m\n"), "merge=m");
	CHECK(!held_item(HOLD_GITATTRIBUTES, "# filter=x\n*.png binary -diff\n* text=auto eol=lf\n"));
	CHECK_STR_CONTAINS(held_item(HOLD_GITMODULES,
				     "[submodule \"s\"]\n\tpath = s\n\turl = x\n\tupdate = !touch /tmp/x\n"),
			   "submodule.s.update = !touch /tmp/x");
	CHECK_STR_CONTAINS(held_item(HOLD_GITMODULES,
				     "[submodule \"s\"]\n\tpath = s\n\turl = ext::sh -c x\n"),
			   "ext::");
	CHECK_STR_CONTAINS(held_item(HOLD_GITMODULES,
				     "[submodule \"s\"]\n\tpath = s\n\turl = --upload-pack=x\n"),
			   "url = --upload-pack");
	CHECK(!held_item(HOLD_GITMODULES,
			 "[submodule \"s\"]\n\tpath = s\n\turl = https://x\n\tupdate = rebase\n"));
	CHECK_STR_CONTAINS(held_item(HOLD_VSCODE_TASKS,
				     "{ // c\n \"version\": \"2.0.0\", \"tasks\": [{\"label\": \"x\",\n"
				     " /* c */ \"runOptions\": {\"runOn\": \"folderOpen\"},}]}"),
			   "runOn = folderOpen");
	/* an escape VS Code decodes must not hide it */
	CHECK_STR_CONTAINS(held_item(HOLD_VSCODE_TASKS,
				     "{\"tasks\": [{\"runOptions\": {\"run\\u004fn\": \"folder\\u004fpen\"}}]}"),
			   "runOn = folderOpen");
	CHECK(!held_item(HOLD_VSCODE_TASKS, "{\"tasks\": [{\"label\": \"build\"}]}"));
	CHECK_STR_CONTAINS(held_item(HOLD_VSCODE_TASKS, "{ not json"), "not JSON");
	CHECK_STR_CONTAINS(held_item(HOLD_VSCODE_SETTINGS,
				     "{\"python.defaultInterpreterPath\": \"/tmp/x\"}"),
			   "python.defaultInterpreterPath");
	CHECK_STR_CONTAINS(held_item(HOLD_VSCODE_SETTINGS,
				     "{\"terminal.integrated.profiles.linux\": {}}"),
			   "terminal.integrated");
	CHECK(!held_item(HOLD_VSCODE_SETTINGS, "{\"editor.formatOnSave\": true, \"files.eol\": \"\\n\"}"));
	CHECK(held_item(HOLD_ALWAYS, ""));
}

TEST(policy_export_section)
{
	struct corral_policy p, q;
	struct corral_err err = { 0 };
	static const char good[] =
		"{\"export\": {\"hold\": [\"*.sh\", {\"path\": \"conf/*.ini\", \"check\": \"git-config\"}],"
		" \"max_files\": 50, \"max_bytes\": \"10M\"}}";
	static const struct { const char *text, *want; } bad[] = {
		{ "{\"export\": {\"hold\": [{\"path\": \"x\", \"check\": \"nope\"}]}}", "unknown check" },
		{ "{\"export\": {\"hold\": [\"/etc/x\"]}}", "relative to the workspace" },
		{ "{\"export\": {\"hold\": [{\"check\": \"always\"}]}}", "needs \"path\"" },
		{ "{\"export\": {\"hold\": [{\"path\": \"x\", \"run\": 1}]}}", "unknown key" },
		{ "{\"export\": {\"max_files\": 0}}", "at least 1" },
		{ "{\"export\": {\"max_bytes\": \"0\"}}", "more than 0" },
		{ "{\"export\": {\"holds\": []}}", "expected one of: hold, max_files, max_bytes" },
	};
	struct export_limits lim;
	struct hold_ctx *h = NULL;
	struct layers l = { -1, -1, NULL };

	corral_policy_init(&p);
	CHECK(corral_policy_load_string(&p, good, strlen(good), "t.json", &err) == 0);
	CHECK(p.export.nhold == 2 && p.export.max_files == 50 &&
	      p.export.max_bytes == 10 << 20);
	CHECK(p.export.nhold == 2 && !strcmp(p.export.hold[1].check, "git-config"));
	export_limits_of(&p, &lim);
	CHECK(lim.max_files == 50);
	CHECK(hold_ctx_new(&h, &p, &l, &err) == 0);
	hold_ctx_free(h);
	/* a later file adds to the rules, a failed one leaves them alone */
	CHECK(corral_policy_load_string(&p, bad[0].text, strlen(bad[0].text), "b.json", &err) < 0);
	CHECK(p.export.nhold == 2);
	corral_policy_free(&p);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		corral_policy_init(&q);
		CHECK(corral_policy_load_string(&q, bad[i].text, strlen(bad[i].text), "b.json", &err) < 0);
		CHECK_STR_CONTAINS(err.msg, bad[i].want);
		corral_policy_free(&q);
	}
	corral_policy_init(&q);
	export_limits_of(&q, &lim);
	CHECK(lim.max_files == 100000 && lim.max_bytes == 1ULL << 30);
	corral_policy_free(&q);
}

/* ---- real overlays ------------------------------------------------------- */

struct ovl {
	char lower[300], upper[300], work[300], merged[300];
	struct layers l;
};

/*
 * Build lower with `setup`, mount the overlay in a user namespace of
 * its own (as the sandbox does: userxattr), run `ops` in the merged
 * view, unmount (the namespace goes); then open both layers.
 */
static bool ovl_make(struct ovl *o, const char *name, const char *setup,
		     const char *ops)
{
	snprintf(o->lower, sizeof(o->lower), "%s/%s/lower", tmp, name);
	snprintf(o->upper, sizeof(o->upper), "%s/%s/upper", tmp, name);
	snprintf(o->work, sizeof(o->work), "%s/%s/work", tmp, name);
	snprintf(o->merged, sizeof(o->merged), "%s/%s/merged", tmp, name);
	if (sh("mkdir -p '%s' '%s' '%s' '%s' && cd '%s' && %s", o->lower, o->upper,
	       o->work, o->merged, o->lower, setup) != 0)
		return false;
	if (sh("unshare -Urm sh -ec 'mount -t overlay overlay -o userxattr,lowerdir=%s,"
	       "upperdir=%s,workdir=%s %s; cd %s; %s'", o->lower, o->upper, o->work,
	       o->merged, o->merged, ops) != 0)
		return false;
	o->l.upper = open(o->upper, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	o->l.lower = open(o->lower, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	o->l.planted = NULL;	/* no policy: no tripwire left out */
	return o->l.upper >= 0 && o->l.lower >= 0;
}

static void ovl_close(struct ovl *o)
{
	close(o->l.upper);
	close(o->l.lower);
}

static const struct change *find(const struct changes *c, const char *path)
{
	for (size_t i = 0; i < c->n; i++)
		if (!strcmp(c->v[i].path, path))
			return &c->v[i];
	return NULL;
}

static bool kind_is(const struct changes *c, const char *path, enum change_kind k)
{
	const struct change *x = find(c, path);

	if (!x || x->kind != k)
		fprintf(stderr, "  %s: %s, want %s\n", path,
			x ? change_kind_name(x->kind) : "no change", change_kind_name(k));
	return x && x->kind == k;
}

static const struct export_limits big_limits = { 100000, 1 << 30 };

/* A whole small file at dir/name: 0, or -1 */
static int put_text(int dir, const char *name, const char *text)
{
	int fd = openat(dir, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

static bool has_text(int dir, const char *name, const char *text)
{
	char buf[64] = "";
	int fd = openat(dir, name, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n >= 0 && !strcmp(buf, text);
}

/*
 * A file left beside the name by a writer killed while it held it, under
 * the name ours would take (its pid ours again), is passed over: the new
 * file still takes its place, and the leftover is not touched.  It used to
 * fail the export at its very end, all written.
 */
TEST(newfile_passes_over_a_leftover)
{
	char dir[] = "/tmp/corral-unit-newfile.XXXXXX", left[128];
	struct corral_newfile f;
	struct corral_err err = { 0 };
	int d, fd, entries = 0;
	struct dirent *e;
	DIR *ls;

	if (!mkdtemp(dir)) {
		CHECK(!"mkdtemp");
		return;
	}
	d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	snprintf(left, sizeof(left), "out.corral-export.%d", (int)getpid());
	CHECK(d >= 0 && put_text(d, "out", "old") == 0 && put_text(d, left, "left") == 0);
	fd = corral_newfile_open(&f, d, "out", 0644, &err);
	CHECK(fd >= 0);
	CHECK(fd >= 0 && write(fd, "new", 3) == 3);
	CHECK(corral_newfile_keep(&f, &err) == 0);
	if (err.msg[0])
		fprintf(stderr, "  why: %s\n", err.msg);
	CHECK(has_text(d, "out", "new"));
	CHECK(has_text(d, left, "left"));
	/* out and the leftover, nothing else */
	ls = fdopendir(dup(d));
	while (ls && (e = readdir(ls)))
		entries += e->d_name[0] != '.';
	if (ls)
		closedir(ls);
	CHECK(entries == 2);
	unlinkat(d, "out", 0);
	unlinkat(d, left, 0);
	close(d);
	rmdir(dir);
}

TEST(diff_of_a_real_overlay)
{
	struct ovl o;
	struct changes c;
	struct corral_err err = { 0 };
	const struct change *x;

	if (!ovl_ok)
		return;	/* no user namespaces: skipped in main */
	if (!ovl_make(&o, "diff",
		      "echo a > edit; echo same > touched; echo b > gone; mkdir -p d/e; "
		      "echo c > d/e/f; echo k > d/keep; mkdir opq; echo o > opq/old; "
		      "echo m > modeonly; ln -s edit link; echo t > totype; mkdir dir2file; "
		      "echo z > dir2file/z",
		      "echo A >> edit; touch touched; rm gone; rm -r d/e; echo n > new; "
		      "mkdir -p nd/sub; echo q > nd/sub/q; rm -r opq; mkdir opq; echo x > opq/new; "
		      "chmod 755 modeonly; ln -sfn ../../outside link; rm totype; mkdir totype; "
		      "rm -r dir2file; ln -s /etc/shadow dir2file; mkfifo fifo")) {
		CHECK(!"overlay");
		return;
	}
	CHECK(diff_changes(&o.l, &big_limits, &c, &err) == 0);
	if (err.code)
		fprintf(stderr, "  %s\n", err.msg);
	CHECK(kind_is(&c, "edit", CH_MODIFIED));
	CHECK(!find(&c, "touched"));	/* copied up, same bytes */
	CHECK(kind_is(&c, "gone", CH_DELETED));
	CHECK(kind_is(&c, "d/e/f", CH_DELETED));
	CHECK(kind_is(&c, "d/e", CH_DELETED));
	CHECK(!find(&c, "d/keep"));
	CHECK(kind_is(&c, "new", CH_ADDED));
	CHECK(kind_is(&c, "nd", CH_ADDED));
	CHECK(kind_is(&c, "nd/sub/q", CH_ADDED));
	CHECK(kind_is(&c, "opq/old", CH_DELETED));
	CHECK(kind_is(&c, "opq/new", CH_ADDED));
	x = find(&c, "opq");
	CHECK(x && x->opaque);
	CHECK(kind_is(&c, "modeonly", CH_MODE));
	CHECK(kind_is(&c, "link", CH_MODIFIED));
	x = find(&c, "link");
	CHECK(x && x->target && !strcmp(x->target, "../../outside") &&
	      !strcmp(x->old_target, "edit"));
	CHECK(kind_is(&c, "totype", CH_TYPE));
	CHECK(kind_is(&c, "dir2file", CH_TYPE));
	CHECK(kind_is(&c, "dir2file/z", CH_DELETED));
	CHECK(kind_is(&c, "fifo", CH_ADDED));
	/* a directory's entries go before the directory itself */
	CHECK(find(&c, "d/e/f") < find(&c, "d/e"));
	CHECK(find(&c, "dir2file/z") < find(&c, "dir2file"));
	CHECK(layers_exists(&o.l, "d/keep"));
	CHECK(!layers_exists(&o.l, "d/e/f"));
	CHECK(!layers_exists(&o.l, "opq/old"));
	CHECK(layers_exists(&o.l, "opq/new"));
	CHECK(layers_exists(&o.l, "nd/sub/q"));
	changes_free(&c);
	{
		/* limits say which one was hit */
		struct export_limits lim = { 3, 1 << 30 };

		CHECK(diff_changes(&o.l, &lim, &c, &err) == -EFBIG);
		CHECK_STR_CONTAINS(err.msg, "export.max_files");
	}
	ovl_close(&o);
}

/*
 * The policy's tripwires under /workspace are corral's decoys (planted
 * through the overlay, so the upper layer holds them): no change, nor a
 * directory added only for one; one that holds the agent's file stays.
 */
TEST(diff_leaves_the_tripwires_out)
{
	char *wires[] = { "/home/agent/.aws/credentials", "/workspace/.aws/credentials",
			  "/workspace/deep/er/key.pem", "/workspace/lone" };
	struct corral_policy p = { .abort = { .tripwires = wires, .ntripwires = 4 } };
	struct corral_err err = { 0 };
	struct changes c;
	struct ovl o;

	if (!ovl_ok)
		return;
	if (!ovl_make(&o, "wires", "echo k > keep",
		      "mkdir -p .aws deep/er empty; echo decoy > .aws/credentials; "
		      "echo mine > .aws/config; echo decoy > deep/er/key.pem; "
		      "echo decoy > lone; echo n > new; mkdir -p nd/lone")) {
		CHECK(!"overlay");
		return;
	}
	o.l.planted = &p;
	CHECK(diff_changes(&o.l, &big_limits, &c, &err) == 0);
	CHECK(!find(&c, ".aws/credentials"));
	CHECK(kind_is(&c, ".aws", CH_ADDED));	/* it holds the agent's config */
	CHECK(kind_is(&c, ".aws/config", CH_ADDED));
	CHECK(!find(&c, "deep/er/key.pem") && !find(&c, "deep/er") && !find(&c, "deep"));
	CHECK(!find(&c, "lone"));
	CHECK(kind_is(&c, "empty", CH_ADDED));	/* the agent's own, empty */
	CHECK(kind_is(&c, "nd/lone", CH_ADDED));	/* a directory, not the wire */
	CHECK(kind_is(&c, "new", CH_ADDED));
	CHECK(c.n == 6);
	changes_free(&c);
	/* without the policy, every one is a change */
	o.l.planted = NULL;
	CHECK(diff_changes(&o.l, &big_limits, &c, &err) == 0);
	CHECK(kind_is(&c, ".aws/credentials", CH_ADDED) && kind_is(&c, "deep/er", CH_ADDED));
	changes_free(&c);
	ovl_close(&o);
}

static json_t *run_export(struct export_req *r, int *ret)
{
	struct corral_err err = { 0 };
	json_t *rep = NULL;

	*ret = export_run(r, &rep, &err);
	if (*ret < 0 && getenv("UNIT_VERBOSE"))
		fprintf(stderr, "  export: %s\n", err.msg);
	return rep;
}

static bool listed(json_t *rep, const char *list, const char *path, const char *reason)
{
	json_t *a = json_object_get(rep, list), *e;
	size_t i;

	json_array_foreach(a, i, e) {
		const char *p = json_string_value(json_object_get(e, "path"));
		const char *why = json_string_value(json_object_get(e, "reason"));

		if (p && !strcmp(p, path) && (!reason || (why && strstr(why, reason))))
			return true;
	}
	fprintf(stderr, "  %s not in %s%s%s\n", path, list, reason ? " for " : "",
		reason ? reason : "");
	if (getenv("UNIT_VERBOSE")) {
		char *d = json_dumps(rep, JSON_INDENT(1));

		fprintf(stderr, "%s\n", d);
		free(d);
	}
	return false;
}

static const char *hostile_ops =
	"ln -s /etc/shadow shadow; ln -s ../../outside out; ln -s sub/../../x tricky; "
	"ln -s ok-target fine; echo t > ok-target; mkfifo fifo; "
	"echo s > suid; chmod 4755 suid; echo h > hard; ln hard hard2; "
	"mkdir -p .git/hooks; printf \"[core]\\n\\tfsmonitor = touch MARK\\n\" > .git/config; "
	"echo x > .git/hooks/post-checkout; echo \"* filter=evil\" > .gitattributes; "
	"echo \"use flake\" > .envrc; echo ok > normal.txt; "
	"mkdir -p bare.git/objects notes; echo ref > bare.git/HEAD; "
	"printf \"[core]\\n\\tfsmonitor = x\\n\" > bare.git/config; "
	"printf \"[core]\\n\\tfsmonitor = x\\n\" > notes/config; "
	"echo \"gitdir: /etc\" > sub.git; mkdir nested && echo \"gitdir: /x\" > nested/.git";

TEST(export_to_a_new_directory)
{
	struct ovl o;
	struct export_req r = { .apply_fd = -1 };
	char to[400], path[500];
	struct stat st;
	json_t *rep;
	int ret;

	if (!ovl_ok)
		return;	/* no user namespaces: skipped in main */
	if (!ovl_make(&o, "to", "echo l > lowerfile; ln -s /etc/passwd lowerlink; mkdir .git; echo \"[core]\" > .git/config",
		      hostile_ops)) {
		CHECK(!"overlay");
		return;
	}
	snprintf(to, sizeof(to), "%s/to/out", tmp);
	r.layers = o.l;
	r.to = to;
	rep = run_export(&r, &ret);
	CHECK(ret == 0);
	CHECK(listed(rep, "held", "shadow", "leaves the tree"));
	CHECK(listed(rep, "held", "out", "leaves the tree"));
	CHECK(listed(rep, "held", "tricky", "leaves the tree"));
	CHECK(listed(rep, "held", "fifo", "fifo"));
	CHECK(listed(rep, "held", ".git/config", "core.fsmonitor"));
	CHECK(listed(rep, "held", ".git/hooks/post-checkout", "hooks"));
	CHECK(listed(rep, "held", ".gitattributes", "filter=evil"));
	CHECK(listed(rep, "held", ".envrc", "direnv"));
	CHECK(listed(rep, "held", "lowerlink", "leaves the tree"));
	CHECK(listed(rep, "held", "bare.git/config", "bare repository"));
	CHECK(listed(rep, "exported", "notes/config", NULL));
	CHECK(listed(rep, "held", "nested/.git", "gitdir"));
	CHECK(listed(rep, "exported", "sub.git", NULL));
	CHECK(listed(rep, "exported", "fine", NULL));
	CHECK(listed(rep, "exported", "suid", NULL));
	snprintf(path, sizeof(path), "%s/shadow", to);
	CHECK(lstat(path, &st) < 0);
	snprintf(path, sizeof(path), "%s/fifo", to);
	CHECK(lstat(path, &st) < 0);
	snprintf(path, sizeof(path), "%s/suid", to);
	CHECK(stat(path, &st) == 0 && (st.st_mode & 07777) == 0755);
	snprintf(path, sizeof(path), "%s/hard2", to);
	CHECK(stat(path, &st) == 0 && st.st_nlink == 1);
	snprintf(path, sizeof(path), "%s/fine", to);
	CHECK(lstat(path, &st) == 0 && S_ISLNK(st.st_mode));
	snprintf(path, sizeof(path), "%s/lowerfile", to);
	CHECK(stat(path, &st) == 0 && st.st_uid == geteuid());
	/* the lower's own .git/config, not the agent's */
	snprintf(path, sizeof(path), "%s/.git/config", to);
	{
		char *cfg = slurp(path, NULL);

		CHECK(cfg && !strstr(cfg, "fsmonitor"));
		free(cfg);
	}
	json_decref(rep);
	/* a second export to the same place is refused, not merged */
	rep = run_export(&r, &ret);
	CHECK(ret == -EEXIST);
	json_decref(rep);
	{
		/* --allow-risky lets a named one out, and only it */
		char *const allow[] = { ".envrc" };

		snprintf(to, sizeof(to), "%s/to/out2", tmp);
		r.to = to;
		r.allow_risky = allow;
		r.nallow_risky = 1;
		rep = run_export(&r, &ret);
		CHECK(listed(rep, "exported", ".envrc", NULL));
		CHECK(listed(rep, "held", ".git/config", "fsmonitor"));
		json_decref(rep);
	}
	ovl_close(&o);
}

TEST(apply_with_conflicts)
{
	struct ovl o;
	struct export_req r = { 0 };
	struct baseline *base = NULL;
	struct corral_err err = { 0 };
	struct export_limits lim = big_limits;
	char path[500], *s;
	struct stat st;
	json_t *rep;
	int ret;

	if (!ovl_ok)
		return;	/* no user namespaces: skipped in main */
	if (!ovl_make(&o, "apply",
		      "echo a > edit; echo b > mine; echo c > del; mkdir d; echo x > d/x; "
		      "echo o > outside-target; ln outside-target linked; ln -s /etc hostlink",
		      "echo A > edit; echo B > mine; rm del; echo n > d/new; echo L > linked; "
		      "ln -s /etc/shadow shadow; ln -s hostlink/passwd via; ln -s d/x inlink")) {
		CHECK(!"overlay");
		return;
	}
	CHECK(baseline_take(o.l.lower, &lim, &base, &err) == 0);
	/* the host changes "mine" while the sandbox runs */
	snprintf(path, sizeof(path), "%s/mine", o.lower);
	CHECK(sh("sleep 0.01; echo host > '%s'", path) == 0);
	r.layers = o.l;
	r.apply_fd = o.l.lower;
	r.base = base;
	rep = run_export(&r, &ret);
	CHECK(ret == 0);
	CHECK(listed(rep, "conflicts", "mine", "changed on the host"));
	CHECK(listed(rep, "exported", "edit", NULL));
	CHECK(listed(rep, "exported", "del", NULL));
	CHECK(listed(rep, "exported", "d/new", NULL));
	CHECK(listed(rep, "held", "shadow", NULL));
	/* lexically inside, but out through the host's own symlink */
	CHECK(listed(rep, "conflicts", "via", "leads out of the tree"));
	CHECK(listed(rep, "exported", "inlink", NULL));
	s = slurp(path, NULL);
	CHECK(s && !strcmp(s, "host\n"));
	free(s);
	snprintf(path, sizeof(path), "%s/edit", o.lower);
	s = slurp(path, NULL);
	CHECK(s && !strcmp(s, "A\n"));
	free(s);
	snprintf(path, sizeof(path), "%s/del", o.lower);
	CHECK(lstat(path, &st) < 0);
	/* a file hardlinked on the host is replaced, its other name untouched */
	snprintf(path, sizeof(path), "%s/outside-target", o.lower);
	s = slurp(path, NULL);
	CHECK(s && !strcmp(s, "o\n"));
	free(s);
	json_decref(rep);
	baseline_free(base);
	ovl_close(&o);
}

/*
 * Apply, the sandbox edits again, apply again: the first apply's writes
 * are in the baseline.  With a host write of the same size just after
 * the first apply's rename, before its record is taken (the window a
 * stat by name would have), the second apply finds a conflict.
 */
struct window {
	const char *lower;
	int hits;
};

static void host_writes(void *arg, const char *path)
{
	struct window *w = arg;

	if (strcmp(path, "f"))
		return;
	w->hits++;
	sh("printf 'H\\n' 1<> '%s/f'", w->lower);
}

static int apply_twice(const char *name, struct window *w, json_t **second)
{
	struct corral_err err = { 0 };
	struct export_limits lim = big_limits;
	struct baseline *base = NULL;
	struct export_req r = { 0 };
	struct ovl o;
	json_t *rep;
	int ret = -1;

	if (!ovl_make(&o, name, "echo a > f; echo k > keep", "echo B > f; echo l > link-target; ln -s link-target l"))
		return -1;
	if (baseline_take(o.l.lower, &lim, &base, &err) < 0)
		goto out;
	r.layers = o.l;
	r.apply_fd = o.l.lower;
	r.base = base;
	r.wrote = json_array();
	r.after_write = w ? host_writes : NULL;
	r.fault_arg = w;
	rep = run_export(&r, &ret);
	json_decref(rep);
	if (ret < 0 || baseline_update(base, r.wrote, &lim, &err) < 0)
		goto out;
	/* the sandbox works on: its upper layer changes again */
	if (sh("cd '%s' && echo C > f && ln -sfn f l && echo m > keep", o.upper) != 0)
		goto out;
	json_decref(r.wrote);
	r.wrote = json_array();
	r.after_write = NULL;
	*second = run_export(&r, &ret);
out:
	json_decref(r.wrote);
	baseline_free(base);
	ovl_close(&o);
	return ret;
}

TEST(apply_again)
{
	struct window w = { 0 };
	char path[500], *s;
	json_t *rep = NULL;

	if (!ovl_ok)
		return;	/* no user namespaces: skipped in main */
	CHECK(apply_twice("again", NULL, &rep) == 0);
	CHECK(json_array_size(json_object_get(rep, "conflicts")) == 0);
	CHECK(listed(rep, "exported", "f", NULL));
	CHECK(listed(rep, "exported", "l", NULL));
	snprintf(path, sizeof(path), "%s/again/lower/f", tmp);
	s = slurp(path, NULL);
	CHECK(s && !strcmp(s, "C\n"));
	free(s);
	json_decref(rep);
	rep = NULL;

	snprintf(path, sizeof(path), "%s/window/lower", tmp);
	w.lower = path;
	CHECK(apply_twice("window", &w, &rep) == 0 && w.hits == 1);
	CHECK(listed(rep, "conflicts", "f", "since corral last applied it"));
	CHECK(listed(rep, "exported", "l", NULL));
	snprintf(path, sizeof(path), "%s/window/lower/f", tmp);
	s = slurp(path, NULL);
	CHECK(s && !strcmp(s, "H\n"));
	free(s);
	json_decref(rep);
}

/* The race: between the walk and the write, the source becomes a symlink. */
struct swap {
	const char *upper;
	const char *dest;
	const char *outside;
	int hits;
};

static void swap_source(void *arg, const char *path)
{
	struct swap *s = arg;

	if (strcmp(path, "victim"))
		return;
	s->hits++;
	sh("cd '%s' && rm -f victim && ln -s '%s/secret' victim", s->upper, s->outside);
}

static void swap_dest(void *arg, const char *path)
{
	struct swap *s = arg;

	if (strcmp(path, "sub/file"))
		return;
	s->hits++;
	/* the directory being written into becomes a symlink out */
	sh("cd '%s' && rm -rf sub && ln -s '%s' sub", s->dest, s->outside);
}

TEST(export_race_never_follows)
{
	struct ovl o;
	struct export_req r = { .apply_fd = -1 };
	struct swap sw = { 0 };
	char to[400], outside[400], path[500], *s;
	struct stat st;
	json_t *rep;
	int ret;

	if (!ovl_ok)
		return;	/* no user namespaces: skipped in main */
	if (!ovl_make(&o, "race", "true", "echo v > victim; mkdir sub; echo f > sub/file")) {
		CHECK(!"overlay");
		return;
	}
	snprintf(outside, sizeof(outside), "%s/race/outside", tmp);
	CHECK(sh("mkdir -p '%s' && echo TOPSECRET > '%s/secret'", outside, outside) == 0);
	snprintf(to, sizeof(to), "%s/race/out", tmp);
	sw.upper = o.upper;
	sw.outside = outside;
	r.layers = o.l;
	r.to = to;
	r.fault = swap_source;
	r.fault_arg = &sw;
	rep = run_export(&r, &ret);
	CHECK(ret == 0 && sw.hits == 1);
	CHECK(listed(rep, "conflicts", "victim", "never followed"));
	snprintf(path, sizeof(path), "%s/victim", to);
	s = slurp(path, NULL);
	CHECK(!s || !strstr(s, "TOPSECRET"));
	free(s);
	json_decref(rep);

	/* the destination's directory swapped for a symlink out */
	snprintf(to, sizeof(to), "%s/race/out2", tmp);
	sw.dest = to;
	sw.hits = 0;
	r.to = to;
	r.fault = swap_dest;
	rep = run_export(&r, &ret);
	CHECK(ret == 0 && sw.hits == 1);
	CHECK(listed(rep, "conflicts", "sub/file", "never followed"));
	snprintf(path, sizeof(path), "%s/file", outside);
	CHECK(lstat(path, &st) < 0);
	json_decref(rep);
	ovl_close(&o);
}

TEST(patch_of_a_session_applies)
{
	struct ovl o;
	struct export_req r = { .apply_fd = -1 };
	char patch[400];
	json_t *rep;
	int ret;

	if (!ovl_ok)
		return;	/* no user namespaces: skipped in main */
	if (!ovl_make(&o, "patch",
		      "git init -q . && printf \"a\\nb\\nc\\n\" > edit && echo r > ren && "
		      "echo x > gone && printf \"#!/bin/sh\\n\" > run.sh && "
		      "git add -A && git -c user.name=t -c user.email=t@t commit -qm init",
		      "printf \"a\\nB\\nc\\nd\\n\" > edit; mv ren renamed; rm gone; chmod +x run.sh; "
		      "head -c 3000 /dev/urandom > bin; echo new > added; "
		      "printf \"[core]\\n\\tfsmonitor = x\\n\" >> .git/config")) {
		CHECK(!"overlay");
		return;
	}
	snprintf(patch, sizeof(patch), "%s/patch/p.diff", tmp);
	r.layers = o.l;
	r.patch = patch;
	rep = run_export(&r, &ret);
	CHECK(ret == 0);
	CHECK(listed(rep, "held", ".git/config", "fsmonitor"));
	/* a copy of the host's workspace, patched, is the sandbox's view */
	CHECK(sh("cd '%s/patch' && cp -a lower copy && cd copy && git apply '%s' && "
		 "cmp edit ../upper/edit && cmp bin ../upper/bin && cmp added ../upper/added && "
		 "cmp renamed ../upper/renamed && test ! -e ren && test ! -e gone && "
		 "test -x run.sh && ! grep -q fsmonitor .git/config", tmp, patch) == 0);
	json_decref(rep);
	ovl_close(&o);
}

/* walk_up: each level by "..", the start first, up to "/" (walkup.c) */
struct levels {
	struct stat seen[64];
	size_t n;
	ino_t stop_at;
};

static bool level_visit(const struct stat *st, void *arg)
{
	struct levels *l = arg;

	if (l->n < 64)
		l->seen[l->n++] = *st;
	return l->stop_at && st->st_ino == l->stop_at;
}

TEST(walk_up_each_level_to_the_root)
{
	char top[] = "/tmp/unit_walkup.XXXXXX", path[PATH_MAX];
	struct stat root, a, b;
	struct levels l = { .n = 0 };
	int fd;

	CHECK(mkdtemp(top) != NULL);
	snprintf(path, sizeof(path), "%s/a", top);
	CHECK(mkdir(path, 0700) == 0 && stat(path, &a) == 0);
	snprintf(path, sizeof(path), "%s/a/b", top);
	CHECK(mkdir(path, 0700) == 0 && stat(path, &b) == 0);
	CHECK(stat("/", &root) == 0);
	fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	CHECK(fd >= 0);
	CHECK(walk_up(fd, level_visit, &l) == 0);
	CHECK(l.n >= 4);
	CHECK(l.seen[0].st_ino == b.st_ino && l.seen[1].st_ino == a.st_ino);
	CHECK(l.n && l.seen[l.n - 1].st_ino == root.st_ino &&
	      l.seen[l.n - 1].st_dev == root.st_dev);
	/* stopped where the visit says, and the caller's fd left open */
	l = (struct levels){ .stop_at = a.st_ino };
	CHECK(walk_up(fd, level_visit, &l) == 1 && l.n == 2);
	CHECK(fcntl(fd, F_GETFD) >= 0);
	close(fd);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/a", top);
	rmdir(path);
	rmdir(top);
}

int main(void)
{
	const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";

	snprintf(tmp, sizeof(tmp), "%s/unit_export.XXXXXX", base);
	if (!mkdtemp(tmp)) {
		perror("mkdtemp");
		return 1;
	}
	/* the overlay tests need a user namespace to mount one in */
	ovl_ok = sh("unshare -Urm true 2>/dev/null") == 0;
	if (!ovl_ok)
		printf("ok - overlays # SKIP no user namespaces here\n");
	unit_run_all();
	sh("chmod -R u+rwX '%s' 2>/dev/null; rm -rf '%s'", tmp, tmp);
	UNIT_DONE();
}
