/*
 * unit_shell.c - shell.c's simple command lines, held against dash itself:
 * the words it takes must be the words dash makes of the line, and the
 * environment it hands on must be the one dash hands on (but for order).
 */
#include "internal.h"
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

static void check_split(const char *line, const char *const *want)
{
	char **w = sh_simple_words(line);
	size_t i = 0, len;
	char *block;

	if (!want) {
		if (w)
			fprintf(stderr, "  taken, should need the shell: [%s]\n", line);
		CHECK(!w);
		free(w);
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
	free(w);
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

/* A line of 4097 words, and one over 64 KiB, go to the shell; 4096 do not. */
TEST(word_and_length_bounds)
{
	size_t n = 4097 * 2;
	char *line = malloc(70 << 10), **w;

	if (!line) {
		CHECK(line);
		return;
	}
	for (size_t i = 0; i < n; i += 2) {
		line[i] = 'a';
		line[i + 1] = ' ';
	}
	line[n - 1] = '\0';
	w = sh_simple_words(line);
	CHECK(!w);
	free(w);
	line[n - 3] = '\0';
	w = sh_simple_words(line);
	CHECK(w && w[4095] && !w[4096]);
	free(w);
	memset(line, 'a', (64 << 10) + 1);
	line[(64 << 10) + 1] = '\0';
	w = sh_simple_words(line);
	CHECK(!w);
	free(w);
	line[64 << 10] = '\0';
	w = sh_simple_words(line);
	CHECK(w && !w[1]);
	free(w);
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
		w = sh_simple_words(line);
		if (!w)
			continue;
		taken++;
		block = dash_words(line, &blen);
		CHECK(block && same_words(w, block, blen));
		if (!block || !same_words(w, block, blen))
			fprintf(stderr, "  differs from dash: [%s]\n", line);
		free(block);
		free(w);
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
static void check_env(char *const *envp, bool taken)
{
	char *made, **ours = sh_simple_env(envp, &made);
	char *dash_argv[] = { "/bin/dash", "-c", "exec /usr/bin/env -0", NULL };
	char *env_argv[] = { "/usr/bin/env", "-0", NULL };
	char *a, *b, sa[8192], sb[8192];
	size_t la = 0, lb = 0;

	CHECK(!ours == !taken);
	if (!ours)
		return;
	a = run_out(dash_argv, envp, &la);
	b = run_out(env_argv, ours, &lb);
	CHECK(a && b && la == lb && la < sizeof(sa));
	if (a && b && la == lb && la < sizeof(sa)) {
		sort_block(a, la, sa);
		sort_block(b, lb, sb);
		CHECK(!memcmp(sa, sb, la));
	}
	free(a);
	free(b);
	free(made);
	free(ours);
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
