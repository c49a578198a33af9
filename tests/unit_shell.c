/*
 * unit_shell.c - shell.c's simple command lines, held against dash itself:
 * the words it takes must be the words dash makes of the line, and the
 * environment it hands on must be the one dash hands on (but for order).
 */
#include "internal.h"
#include "sandbox.h"
#include "unit.h"

#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* What a child wrote to stdout, run with argv and envp; NULL if it failed. */
static char *run_out(char *const argv[], char *const envp[], size_t *len)
{
	int p[2], status;
	char *buf = NULL;
	size_t cap = 0, n = 0;
	ssize_t r;
	pid_t pid;

	if (pipe(p) < 0)
		return NULL;
	pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		execve(argv[0], argv, envp);
		_exit(127);
	}
	close(p[1]);
	for (;;) {
		if (n == cap) {
			char *nb = realloc(buf, cap = cap ? cap * 2 : 4096);

			if (!nb)
				break;
			buf = nb;
		}
		r = read(p[0], buf + n, cap - n);
		if (r <= 0)
			break;
		n += r;
	}
	close(p[0]);
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status)) {
		free(buf);
		return NULL;
	}
	*len = n;
	return buf;
}

/* dash's words for line: set -- LINE, then each as printf prints it. */
static char *dash_words(const char *line, size_t *len)
{
	char script[8192];
	char *argv[] = { "/bin/dash", "-c", script, NULL };
	char *envp[] = { "PATH=/usr/bin:/bin", NULL };

	snprintf(script, sizeof(script), "set -- %s\nprintf '%%s\\0' \"$@\"", line);
	return run_out(argv, envp, len);
}

/* words as one NUL-separated block, as dash_words prints them */
static bool same_words(char **words, const char *block, size_t len)
{
	size_t off = 0;

	for (size_t i = 0; words[i]; i++) {
		size_t n = strlen(words[i]) + 1;

		if (off + n > len || memcmp(block + off, words[i], n))
			return false;
		off += n;
	}
	return off == len;
}

/* The words of a line taken with no cd and no 2>&1, else NULL. */
static char **words_of(const char *line, struct sh_simple *s)
{
	if (sh_simple_parse(line, s) < 0)
		return NULL;
	if (s->cd || s->err_to_out) {
		sh_simple_free(s);
		return NULL;
	}
	return s->argv;
}

static void check_split(const char *line, const char *const *want)
{
	struct sh_simple s;
	char **w = words_of(line, &s);
	size_t i = 0, len;
	char *block;

	if (!want) {
		if (w)
			fprintf(stderr, "  taken, should need the shell: [%s]\n", line);
		CHECK(!w);
		if (w)
			sh_simple_free(&s);
		return;
	}
	CHECK(w != NULL);
	if (!w) {
		fprintf(stderr, "  needs the shell, should be taken: [%s]\n", line);
		return;
	}
	for (; want[i] && w[i]; i++)
		CHECK(!strcmp(w[i], want[i]));
	CHECK(!want[i] && !w[i]);
	block = dash_words(line, &len);
	CHECK(block && same_words(w, block, len));
	free(block);
	sh_simple_free(&s);
}

#define W(...) ((const char *const[]){ __VA_ARGS__, NULL })

TEST(simple_lines_split_as_dash_splits_them)
{
	check_split("/bin/true", W("/bin/true"));
	check_split("  ls\t-l   /tmp  ", W("ls", "-l", "/tmp"));
	check_split("python3 -c 'print(1); import os'", W("python3", "-c", "print(1); import os"));
	check_split("grep -rn \"foo bar|baz*\" src/", W("grep", "-rn", "foo bar|baz*", "src/"));
	check_split("printf-x a'b c'\"d\"e", W("printf-x", "ab cde"));
	check_split("cmd '' \"\" x''y", W("cmd", "", "", "xy"));
	check_split("dd if=/dev/zero of=/tmp/x bs=1k count=1", W("dd", "if=/dev/zero", "of=/tmp/x", "bs=1k", "count=1"));
	check_split("git log --format=%H@%an,x:y+z", W("git", "log", "--format=%H@%an,x:y+z"));
	check_split("'/usr/bin/printf' \"!#&;|<>(){}[]*?~ \"", W("/usr/bin/printf", "!#&;|<>(){}[]*?~ "));
}

TEST(lines_that_need_the_shell_are_left_to_it)
{
	static const char *const lines[] = {
		"", "   ", "true", "echo hi", "printf x", "test -f x", "[ -f x ]",
		"cd /tmp", "exec ls", "exit 3", "kill -9 1", "pwd", "time ls",
		"if true; then ls; fi", "! ls", "{ ls; }", ". ./x", ": x",
		"FOO=1 ls", "'FOO=1' ls", "ls; id", "ls && id", "ls || id",
		"ls | wc", "ls &", "ls > /tmp/x", "ls < x", "ls 2>&1",
		"(ls)", "ls $HOME", "ls ${HOME}", "ls `id`", "ls $(id)",
		"ls \"$HOME\"", "ls \"`id`\"", "ls \"a\\b\"", "ls a\\ b",
		"ls ~", "ls ~/x", "ls *.c", "ls x?", "ls [ab]", "ls {a,b}",
		"ls #x", "ls\nid", "ls\rid", "'unterminated", "\"unterminated",
		"ls '\x81'", "ls \xc3\xa9", "ls '\t'", "ls a^b", "ls a!b", "ls '\x7f'",
		"'' x", "\"\"",
	};

	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
		check_split(lines[i], NULL);
}

static void check_shape(const char *line, const char *cd, bool err_to_out,
			const char *const *want)
{
	struct sh_simple s;
	size_t i = 0;

	if (sh_simple_parse(line, &s) < 0) {
		CHECK(!want);
		if (want)
			fprintf(stderr, "  needs the shell, should be taken: [%s]\n", line);
		return;
	}
	CHECK(want != NULL);
	if (!want) {
		fprintf(stderr, "  taken, should need the shell: [%s]\n", line);
		sh_simple_free(&s);
		return;
	}
	CHECK(!cd == !s.cd && (!cd || !strcmp(cd, s.cd)));
	CHECK(s.err_to_out == err_to_out);
	for (; want[i] && s.argv[i]; i++)
		CHECK(!strcmp(s.argv[i], want[i]));
	CHECK(!want[i] && !s.argv[i]);
	sh_simple_free(&s);
}

TEST(cd_before_and_stderr_after_are_taken)
{
	check_shape("cd /workspace && ls -l", "/workspace", false, W("ls", "-l"));
	check_shape("  cd\t'my dir'  &&\tmake   ", "my dir", false, W("make"));
	check_shape("python3 x.py 2>&1", NULL, true, W("python3", "x.py"));
	check_shape("cd src && npm test  2>&1 ", "src", true, W("npm", "test"));
	check_shape("ls '2>&1'", NULL, false, W("ls", "2>&1"));
	/* what dash would read otherwise, or does more than cd and exec */
	static const char *const shell[] = {
		"cd", "cd x", "cd x &&", "cd x && ", "cd -P x && ls", "cd - && ls",
		"cd -- x && ls", "cd '' && ls", "cd x&&ls", "cd x &&ls",
		"cd x && echo y", "cd x && cd y && ls", "cd x || ls", "cd x; ls",
		"cd $HOME && ls", "cd ~ && ls", "ls && cd x", "ls 2>&1 | cat",
		"ls a2>&1", "ls 2>&1 2>&1", "2>&1", " 2>&1", "ls 1>&2", "ls >&2",
		"ls 2>&1x", "ls 2> &1", "cd x && FOO=1 ls", "cd x && 2>&1",
	};
	for (size_t i = 0; i < sizeof(shell) / sizeof(shell[0]); i++)
		check_shape(shell[i], NULL, false, NULL);
}

/* A line of 4097 words, and one over 64 KiB, go to the shell; 4096 do not. */
TEST(word_and_length_bounds)
{
	size_t n = 4097 * 2;
	char *line = malloc(70 << 10), **w;
	struct sh_simple s;

	if (!line) {
		CHECK(line);
		return;
	}
	for (size_t i = 0; i < n; i += 2) {
		line[i] = 'a';
		line[i + 1] = ' ';
	}
	line[n - 1] = '\0';
	CHECK(!words_of(line, &s));
	line[n - 3] = '\0';
	w = words_of(line, &s);
	CHECK(w && w[4095] && !w[4096]);
	if (w)
		sh_simple_free(&s);
	memset(line, 'a', (64 << 10) + 1);
	line[(64 << 10) + 1] = '\0';
	CHECK(!words_of(line, &s));
	line[64 << 10] = '\0';
	w = words_of(line, &s);
	CHECK(w && !w[1]);
	if (w)
		sh_simple_free(&s);
	free(line);
}

static uint32_t next_rand(uint32_t *seed)
{
	*seed = *seed * 1103515245 + 12345;
	return *seed >> 16;
}

/* n bytes of set at random */
static size_t put_random(char *o, const char *set, size_t n, uint32_t *seed)
{
	for (size_t i = 0; i < n; i++)
		o[i] = set[next_rand(seed) % strlen(set)];
	return n;
}

/*
 * Random lines of random pieces: bare words, quoted text holding any
 * printable byte, blanks, and now and then a byte that needs the shell.
 * Every line taken must split as dash splits it.
 */
TEST(random_lines_split_as_dash_splits_them)
{
	static const char bare[] = "abc-./=%,:@+_0";
	static const char any[] = "ab $\\\"'`;|&*?~#!{}()[]<>^ \t";
	static const char unsafe[] = "$\\;*~#&|<>()`!^?[]{}\n";
	uint32_t seed = 0x5eed;
	int taken = 0;

	for (int round = 0; round < 600; round++) {
		struct sh_simple s;
		char line[200], **w, *block;
		size_t len = 0, blen;
		int pieces = 1 + next_rand(&seed) % 8;

		len += put_random(line, "xyz", 1, &seed);	/* a command name */
		for (int i = 0; i < pieces; i++) {
			switch (next_rand(&seed) % 10) {
			case 0: case 1: case 2: case 3:
				len += put_random(line + len, bare, 1 + next_rand(&seed) % 3, &seed);
				break;
			case 4: case 5:
				line[len++] = '\'';
				len += put_random(line + len, any, next_rand(&seed) % 5, &seed);
				line[len++] = '\'';
				break;
			case 6:
				line[len++] = '"';
				len += put_random(line + len, any, next_rand(&seed) % 5, &seed);
				line[len++] = '"';
				break;
			case 7: case 8:
				len += put_random(line + len, " \t", 1 + next_rand(&seed) % 2, &seed);
				break;
			default:
				len += put_random(line + len, unsafe, 1, &seed);
			}
		}
		line[len] = '\0';
		w = words_of(line, &s);
		if (!w)
			continue;
		taken++;
		block = dash_words(line, &blen);
		CHECK(block && same_words(w, block, blen));
		if (!block || !same_words(w, block, blen))
			fprintf(stderr, "  differs from dash: [%s]\n", line);
		free(block);
		sh_simple_free(&s);
	}
	/* a run that takes few lines tests little */
	CHECK(taken > 150);
	if (taken <= 150)
		fprintf(stderr, "  only %d of 600 lines taken\n", taken);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A NUL-separated environment, sorted, as one block again. */
static void sort_block(char *block, size_t len, char *out)
{
	char *v[256];
	size_t n = 0, off = 0;

	for (size_t i = 0; i < len && n < 256; i += strlen(block + i) + 1)
		v[n++] = block + i;
	qsort(v, n, sizeof(char *), cmp_str);
	for (size_t i = 0; i < n; i++) {
		memcpy(out + off, v[i], strlen(v[i]) + 1);
		off += strlen(v[i]) + 1;
	}
}

/* What env -0 prints run by dash with envp, and run with ours. */
/*
 * What env -0 prints run by dash with envp (after "cd DIR &&" when cd),
 * and run with ours; with cd, also where each ends up.
 */
static void check_env_cd(char *const *envp, const char *cd, bool taken)
{
	char script[512], real[PATH_MAX];
	char *dash_argv[] = { "/bin/dash", "-c", script, NULL };
	char *env_argv[] = { "/usr/bin/env", "-0", NULL };
	char *a, *b, *where, sa[8192], sb[8192];
	size_t la = 0, lb = 0, lw = 0;
	const char *dir = NULL;
	char **env = sh_simple_env(envp, cd, &dir);
	bool ours = env != NULL;

	CHECK(ours == taken);
	if (!ours) {
		if (taken)
			fprintf(stderr, "  left to the shell: cd [%s]\n", cd ? cd : "");
		return;
	}
	if (cd) {
		/* dash's physical directory after its cd, and ours: or both fail */
		int dash_err = open("/dev/null", O_WRONLY | O_CLOEXEC), saved = dup(2);
		bool ours_ok = realpath(dir, real) != NULL;

		snprintf(script, sizeof(script), "cd %s && exec /bin/pwd -P", cd);
		dup2(dash_err, 2);	/* "can't cd to" is expected of some */
		where = run_out(dash_argv, envp, &lw);
		dup2(saved, 2);
		close(saved);
		close(dash_err);
		CHECK(!where == !ours_ok);
		if (!where || !ours_ok) {
			if (where || ours_ok)
				fprintf(stderr, "  cd [%s]: dash %s, ours %s\n", cd,
					where ? "went" : "failed", ours_ok ? "would go" : "fails");
			free(where);
			sandbox_env_free(env);
			return;
		}
		where[lw - 1] = '\0';
		CHECK(!strcmp(where, real));
		if (strcmp(where, real))
			fprintf(stderr, "  cd [%s]: dash in %s, ours %s\n", cd, where, real);
		free(where);
	}
	snprintf(script, sizeof(script), "%s%s%sexec /usr/bin/env -0",
		 cd ? "cd " : "", cd ? cd : "", cd ? " && " : "");
	a = run_out(dash_argv, envp, &la);
	b = run_out(env_argv, env, &lb);
	CHECK(a && b && la == lb && la < sizeof(sa));
	if (a && b && la == lb && la < sizeof(sa)) {
		sort_block(a, la, sa);
		sort_block(b, lb, sb);
		CHECK(!memcmp(sa, sb, la));
	} else {
		fprintf(stderr, "  environments differ: cd [%s]\n", cd ? cd : "");
	}
	free(a);
	free(b);
	sandbox_env_free(env);
}

static void check_env(char *const *envp, bool taken)
{
	check_env_cd(envp, NULL, taken);
}

TEST(environment_is_the_one_dash_hands_on)
{
	char dir[] = "/tmp/unit_shell.XXXXXX", link[64], cwd[PATH_MAX];
	char pwd_link[80], pwd_dir[80];

	if (!mkdtemp(dir) || !getcwd(cwd, sizeof(cwd))) {
		CHECK(0);
		return;
	}
	snprintf(link, sizeof(link), "%s.link", dir);
	CHECK(symlink(dir, link) == 0);
	CHECK(chdir(dir) == 0);
	snprintf(pwd_link, sizeof(pwd_link), "PWD=%s", link);
	snprintf(pwd_dir, sizeof(pwd_dir), "PWD=%s/../%s", dir, dir + 5);
	/* no PWD: dash's getcwd; one naming "." by a link or with ..: kept */
	check_env((char *[]){ "PATH=/usr/bin:/bin", "A=1", NULL }, true);
	check_env((char *[]){ "PATH=/usr/bin:/bin", pwd_link, NULL }, true);
	check_env((char *[]){ "PATH=/usr/bin:/bin", pwd_dir, NULL }, true);
	/* one naming another directory, or relative: replaced */
	check_env((char *[]){ "PATH=/usr/bin:/bin", "PWD=/", NULL }, true);
	check_env((char *[]){ "PATH=/usr/bin:/bin", "PWD=tmp", "LINENO=9", NULL }, true);
	/* what dash drops or resets, a name twice, no PATH: the shell's */
	check_env((char *[]){ "PATH=/usr/bin:/bin", "A-B=1", NULL }, false);
	check_env((char *[]){ "PATH=/usr/bin:/bin", "1A=1", NULL }, false);
	check_env((char *[]){ "PATH=/usr/bin:/bin", "=x", NULL }, false);
	check_env((char *[]){ "PATH=/usr/bin:/bin", "IFS=:", NULL }, false);
	check_env((char *[]){ "PATH=/usr/bin:/bin", "OPTIND=3", NULL }, false);
	check_env((char *[]){ "PATH=/usr/bin:/bin", "PPID=5", NULL }, false);
	check_env((char *[]){ "PATH=/usr/bin:/bin", "A=1", "A=2", NULL }, false);
	check_env((char *[]){ "PATH=/usr/bin:/bin%builtin", NULL }, false);
	check_env((char *[]){ "HOME=/", NULL }, false);
	CHECK(chdir(cwd) == 0);
	unlink(link);
	rmdir(dir);
}

/*
 * cd as dash does it: to the logical path (a link's .. goes back to where
 * the link was), PWD and OLDPWD exported, from a PWD given or not.
 */
TEST(cd_goes_where_dash_goes)
{
	char dir[] = "/tmp/unit_shell_cd.XXXXXX", cwd[PATH_MAX], path[256];
	char pwd_link[300], pwd_dir[300];
	static const char *const dirs[] = {
		"sub", "./sub", "sub/", "sub//deep/./..", "..", "../", ".", "./",
		"link", "link/..", "link/../sub", "link/deep", "/", "//", "///",
		"//tmp", "/tmp/../tmp", "/tmp/./", "sub/../../",
	};

	if (!mkdtemp(dir) || !getcwd(cwd, sizeof(cwd))) {
		CHECK(0);
		return;
	}
	snprintf(path, sizeof(path), "%s/sub", dir);
	CHECK(mkdir(path, 0755) == 0);
	snprintf(path, sizeof(path), "%s/sub/deep", dir);
	CHECK(mkdir(path, 0755) == 0);
	snprintf(path, sizeof(path), "%s/home", dir);
	CHECK(mkdir(path, 0755) == 0);
	snprintf(path, sizeof(path), "%s/home/link", dir);
	CHECK(symlink("../sub", path) == 0);
	snprintf(path, sizeof(path), "%s/home", dir);
	CHECK(chdir(path) == 0);
	snprintf(pwd_link, sizeof(pwd_link), "PWD=%s/home", dir);
	snprintf(pwd_dir, sizeof(pwd_dir), "PWD=%s/sub/../home", dir);
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		if (!strncmp(dirs[i], "sub", 3) || !strncmp(dirs[i], "./sub", 5))
			continue;	/* no sub below home: see the second pass */
		check_env_cd((char *[]){ "PATH=/usr/bin:/bin", NULL }, dirs[i], true);
		check_env_cd((char *[]){ "PATH=/usr/bin:/bin", pwd_link, "OLDPWD=/x", NULL }, dirs[i], true);
		check_env_cd((char *[]){ "PATH=/usr/bin:/bin", pwd_dir, NULL }, dirs[i], true);
	}
	CHECK(chdir(dir) == 0);
	snprintf(pwd_link, sizeof(pwd_link), "PWD=%s/home/link/..", dir);
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		if (!strncmp(dirs[i], "link", 4))
			continue;
		check_env_cd((char *[]){ "PATH=/usr/bin:/bin", NULL }, dirs[i], true);
		check_env_cd((char *[]){ "PATH=/usr/bin:/bin", pwd_link, NULL }, dirs[i], true);
	}
	/* CDPATH: dash would search it, and print where it went */
	check_env_cd((char *[]){ "PATH=/usr/bin:/bin", "CDPATH=/tmp", NULL }, "sub", false);
	CHECK(chdir(cwd) == 0);
	snprintf(path, sizeof(path), "%s/home/link", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/home", dir);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/sub/deep", dir);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/sub", dir);
	rmdir(path);
	rmdir(dir);
}

TEST(sh_is_dash_here)
{
	char t[64];
	ssize_t n = readlink("/bin/sh", t, sizeof(t) - 1);

	/* Debian's and Ubuntu's /bin/sh, the hosts these tests run on */
	CHECK(n > 0);
	if (n > 0) {
		t[n] = '\0';
		CHECK(sh_is_dash() == !strcmp(strrchr(t, '/') ? strrchr(t, '/') + 1 : t, "dash"));
	}
}

int main(void)
{
	unit_run_all();
	UNIT_DONE();
}
