/*
 * shell.c - a command line that /bin/sh would only look up and exec.
 *
 * A call given as a command line runs as /bin/sh -c LINE.  For most of
 * them dash does nothing but split the line into words, search PATH and
 * run the first word in a child of its own: an exec of the shell, then a
 * fork and an exec, where one exec would do; 2-3 ms on these hosts
 * (issue 17).  Such a line is exec'd here without the shell, as dash
 * would exec it: the same words, the same PATH search (execvp's), the
 * environment with PWD set as dash sets it.  Anything else goes to the
 * shell: an expansion, a redirection, a separator, a builtin or keyword,
 * an assignment, an environment dash would change, a /bin/sh that is not
 * dash.  So does a line whose exec fails, so that the shell reports the
 * failure in its own words and with its own exit status.
 *
 * Only quoting with no expansion is taken: 'single' as is, "double" when
 * it holds no $, ` or \.  Every byte must be printable ASCII: dash keeps
 * bytes from 0x81 up as its own markers, and a line that holds them is
 * the shell's to read.
 */
#include "internal.h"

#include <limits.h>
#include <string.h>
#include <sys/stat.h>

/*
 * dash's builtins and keywords, and bash's and busybox ash's, for an image
 * whose sh is dash but whose user expects another: a name here always
 * runs in the shell, even where a program of that name exists (echo,
 * printf, test, kill, pwd, time, ...) and would behave differently.
 */
static const char *const shell_words[] = {
	"!", ".", ":", "[", "[[", "]]", "{", "}", "alias", "bg", "bind",
	"break", "builtin", "caller", "case", "cd", "chdir", "command",
	"compgen", "complete", "compopt", "continue", "coproc", "declare",
	"dirs", "disown", "do", "done", "echo", "elif", "else", "enable",
	"esac", "eval", "exec", "exit", "export", "false", "fc", "fg", "fi",
	"for", "function", "getopts", "hash", "help", "history", "if", "in",
	"jobs", "kill", "let", "local", "logout", "mapfile", "popd", "printf",
	"pushd", "pwd", "read", "readarray", "readonly", "return", "select",
	"set", "shift", "shopt", "source", "suspend", "test", "then", "time",
	"times", "trap", "true", "type", "typeset", "ulimit", "umask",
	"unalias", "unset", "until", "wait", "while",
};

#define SH_WORDS_MAX 4096
#define SH_LINE_MAX (64 << 10)

static bool word_byte(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || (c && strchr("_-./,:+@%=", c));
}

/* Inside "...": printable ASCII but what dash would expand or escape. */
static bool dquoted_byte(unsigned char c)
{
	return c >= 0x20 && c < 0x7f && c != '$' && c != '`' && c != '\\' && c != '"';
}

static bool squoted_byte(unsigned char c)
{
	return c >= 0x20 && c < 0x7f && c != '\'';
}

static bool is_shell_word(const char *w)
{
	for (size_t i = 0; i < sizeof(shell_words) / sizeof(shell_words[0]); i++)
		if (!strcmp(w, shell_words[i]))
			return true;
	return false;
}

/*
 * One word from *p into *out (NUL-terminated); false where the line needs
 * the shell.  The word ends at a blank or the end of the line.
 */
static bool take_word(const char **p, char **out)
{
	const char *s = *p;
	char *o = *out;

	while (*s && *s != ' ' && *s != '\t') {
		unsigned char q = *s;

		if (q == '\'' || q == '"') {
			for (s++; *s && *s != (char)q; s++) {
				if (q == '\'' ? !squoted_byte(*s) : !dquoted_byte(*s))
					return false;
				*o++ = *s;
			}
			if (!*s)
				return false;	/* unterminated: sh's error */
			s++;
		} else if (word_byte(q)) {
			*o++ = *s++;
		} else {
			return false;
		}
	}
	*o++ = '\0';
	*p = s;
	*out = o;
	return true;
}

/*
 * The words of a simple command line, one allocation (free() it), or
 * NULL where the line needs the shell: see the top of this file.
 */
char **sh_simple_words(const char *line)
{
	size_t len = strlen(line), n = 0;
	char **argv, *buf;
	const char *p = line;

	/*
	 * at most one word per two bytes (a word and its blank, or ''), and
	 * the NULL; the words and their NULs fit in len + 1 bytes
	 */
	if (len > SH_LINE_MAX)
		return NULL;
	argv = malloc((len / 2 + 2) * sizeof(char *) + len + 1);
	if (!argv)
		return NULL;
	buf = (char *)(argv + len / 2 + 2);
	for (;;) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			break;
		if (n == SH_WORDS_MAX)
			goto shell;
		argv[n++] = buf;
		if (!take_word(&p, &buf))
			goto shell;
	}
	argv[n] = NULL;
	/* no command; a builtin or keyword; an assignment, quoted or not */
	if (!n || !argv[0][0] || is_shell_word(argv[0]) || strchr(argv[0], '='))
		goto shell;
	return argv;
shell:
	free(argv);
	return NULL;
}

/* A name dash takes from the environment as a variable of its own. */
static bool shell_name(const char *s, size_t n)
{
	if (!n || (s[0] >= '0' && s[0] <= '9'))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
			return false;
	return true;
}

/* dash resets these at start, whatever the environment says */
static bool shell_reset(const char *s, size_t n)
{
	return (n == 3 && !memcmp(s, "IFS", 3)) || (n == 6 && !memcmp(s, "OPTIND", 6)) ||
	       (n == 4 && !memcmp(s, "PPID", 4));
}

/* PWD as dash leaves it: the given one if it names ".", else getcwd's. */
static char *shell_pwd(const char *given)
{
	struct stat dot, st;
	char cwd[PATH_MAX], *e;

	if (given && given[0] == '/' && !stat(".", &dot) && !stat(given, &st) &&
	    dot.st_dev == st.st_dev && dot.st_ino == st.st_ino)
		return NULL;	/* kept as it is */
	if (!getcwd(cwd, sizeof(cwd)))
		return (char *)-1;
	e = malloc(strlen(cwd) + 5);
	if (e) {
		memcpy(e, "PWD=", 4);
		strcpy(e + 4, cwd);
	}
	return e ? e : (char *)-1;
}

/*
 * envp as dash would hand it to the command, in a new vector (free() it,
 * not its strings, but for the one PWD it made: *made), or NULL where dash
 * would change it otherwise: a name that is no shell name (dash drops it),
 * IFS, OPTIND or PPID (it resets them), a name given twice, an entry with
 * no '=', and no PATH or one with a '%' (dash's default PATH and its %
 * entries are not execvp's).  dash orders the environment by its own hash; this keeps the
 * given order.
 */
char **sh_simple_env(char *const *envp, char **made)
{
	size_t n = 0, pwd = SIZE_MAX;
	bool path = false;
	char **out, *fix;

	*made = NULL;
	while (envp[n])
		n++;
	if (n > 1024)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		const char *eq = strchr(envp[i], '=');
		size_t len = eq ? (size_t)(eq - envp[i]) : 0;

		if (!eq || !shell_name(envp[i], len) || shell_reset(envp[i], len))
			return NULL;
		for (size_t j = 0; j < i; j++)
			if (!strncmp(envp[j], envp[i], len + 1))
				return NULL;
		if (len == 3 && !memcmp(envp[i], "PWD", 3))
			pwd = i;
		if (len == 4 && !memcmp(envp[i], "PATH", 4)) {
			if (strchr(envp[i], '%'))
				return NULL;
			path = true;
		}
	}
	if (!path)
		return NULL;
	fix = shell_pwd(pwd == SIZE_MAX ? NULL : envp[pwd] + 4);
	if (fix == (char *)-1)
		return NULL;
	out = malloc((n + 2) * sizeof(char *));
	if (!out) {
		free(fix);
		return NULL;
	}
	memcpy(out, envp, n * sizeof(char *));
	if (fix && pwd != SIZE_MAX)
		out[pwd] = fix;
	else if (fix)
		out[n++] = fix;
	out[n] = NULL;
	*made = fix;
	return out;
}

/* /bin/sh is dash: the one shell whose start this file knows. */
bool sh_is_dash(void)
{
	char target[PATH_MAX];
	ssize_t n = readlink("/bin/sh", target, sizeof(target) - 1);
	const char *base;

	if (n <= 0)
		return false;
	target[n] = '\0';
	base = strrchr(target, '/');
	return !strcmp(base ? base + 1 : target, "dash");
}
