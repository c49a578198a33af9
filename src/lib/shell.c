/*
 * shell.c - a command line that /bin/sh would only look up and exec.
 *
 * A call given as a command line runs as /bin/sh -c LINE.  For most of
 * them dash does nothing but split the line into words, search PATH and
 * run the first word in a child of its own: an exec of the shell, then a
 * fork and an exec, where one exec would do; 2-3 ms on these hosts
 * (issue 17).  Such a line is exec'd here without the shell, as dash
 * would exec it: the same words, the same PATH search (execvp's), the
 * environment with PWD set as dash sets it.  Two shapes agents write all
 * the time are taken too: "cd DIR && COMMAND" (dash's cd: the logical
 * path, PWD and OLDPWD) and "COMMAND 2>&1".  Anything else goes to the
 * shell: an expansion, another redirection or separator, a builtin or
 * keyword, an assignment, an environment dash would change, a /bin/sh
 * that is not dash.  So does a line whose cd or exec fails, from where it
 * began, so that the shell reports the failure in its own words and with
 * its own exit status.
 *
 * Only quoting with no expansion is taken: 'single' as is, "double" when
 * it holds no $, ` or \.  Every byte must be printable ASCII: dash keeps
 * bytes from 0x81 up as its own markers, and a line that holds them is
 * the shell's to read.
 */
#include "internal.h"
#include "sandbox.h"

#include <errno.h>
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

static bool blank(char c)
{
	return c == ' ' || c == '\t';
}

static const char *skip_blanks(const char *p)
{
	while (blank(*p))
		p++;
	return p;
}

/*
 * One word from *p into *out (NUL-terminated); false where the line needs
 * the shell.  The word ends at a blank or the end of the line.
 */
static bool take_word(const char **p, char **out)
{
	const char *s = *p;
	char *o = *out;

	while (*s && !blank(*s)) {
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
 * Words from p to the end, after argv[*n]; false where the line needs the
 * shell.  buf: room for them and their NULs.
 */
static bool take_words(const char *p, char **argv, size_t *n, char **buf)
{
	for (;;) {
		p = skip_blanks(p);
		if (!*p)
			return true;
		if (*n == SH_WORDS_MAX)
			return false;
		argv[(*n)++] = *buf;
		if (!take_word(&p, buf))
			return false;
	}
}

void sh_simple_free(struct sh_simple *s)
{
	free(s->argv);
	*s = (struct sh_simple){ 0 };
}

/*
 * A simple command line taken apart into s (sh_simple_free() it), or -1
 * where it needs the shell: see the top of this file.
 */
int sh_simple_parse(const char *line, struct sh_simple *s)
{
	size_t len = strlen(line), n = 0;
	const char *p;
	char *copy, *buf;

	*s = (struct sh_simple){ 0 };
	if (len > SH_LINE_MAX)
		return -1;
	/*
	 * One block: argv (at most one word per two bytes: a word and its
	 * blank, or ''), the words with their NULs (len + 1 bytes at most),
	 * and the line to take them from, its " 2>&1" cut off.
	 */
	s->argv = malloc((len / 2 + 2) * sizeof(char *) + 2 * (len + 1));
	if (!s->argv)
		return -1;
	buf = (char *)(s->argv + len / 2 + 2);
	copy = buf + len + 1;
	memcpy(copy, line, len + 1);
	while (len && blank(copy[len - 1]))
		copy[--len] = '\0';
	/* the blank before it: "a2>&1" is the word a2 and stdout to fd 1 */
	if (len > 5 && !memcmp(copy + len - 4, "2>&1", 4) && blank(copy[len - 5])) {
		s->err_to_out = true;
		copy[len - 4] = '\0';
	}
	p = skip_blanks(copy);
	if (!strncmp(p, "cd", 2) && blank(p[2])) {
		p = skip_blanks(p + 2);
		s->cd = buf;
		/* no option, no "cd -", no "cd ''" (dash's cd .) */
		if (*p == '-' || !take_word(&p, &buf) || !s->cd[0])
			goto shell;
		p = skip_blanks(p);
		if (strncmp(p, "&&", 2) || !blank(p[2]))
			goto shell;
		p += 2;
	}
	if (!take_words(p, s->argv, &n, &buf))
		goto shell;
	s->argv[n] = NULL;
	/* no command; a builtin or keyword; an assignment, quoted or not */
	if (!n || !s->argv[0][0] || is_shell_word(s->argv[0]) ||
	    strchr(s->argv[0], '='))
		goto shell;
	return 0;
shell:
	sh_simple_free(s);
	return -1;
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

/* dash's PWD at start: the given one if it names ".", else getcwd's. */
static char *start_dir(const char *given)
{
	struct stat dot, st;
	char cwd[PATH_MAX];

	if (given && given[0] == '/' && !stat(".", &dot) && !stat(given, &st) &&
	    dot.st_dev == st.st_dev && dot.st_ino == st.st_ino)
		return strdup(given);
	return getcwd(cwd, sizeof(cwd)) ? strdup(cwd) : NULL;
}

/*
 * Where dash's cd DIR goes from cur: the logical path, . and .. taken out
 * by their text (a .. of a symlink's target goes back to where the link
 * was, not to the target's parent), a leading "//" kept as POSIX allows.
 */
static char *cd_path(const char *cur, const char *dir)
{
	char *out = malloc(strlen(cur) + strlen(dir) + 3), *o = out, *lim;
	const char *p = dir;

	if (!out)
		return NULL;
	lim = out + 1;
	if (dir[0] != '/') {
		o = stpcpy(out, cur);
		if (o == out || o[-1] != '/')
			*o++ = '/';
		if (o > lim && *lim == '/')
			lim++;
	} else {
		*o++ = '/';
		if (dir[1] == '/' && dir[2] != '/') {
			*o++ = '/';
			lim++;
		}
	}
	while (*p) {
		const char *end;
		size_t n;

		while (*p == '/')
			p++;
		if (!*p)
			break;
		end = strchrnul(p, '/');
		n = end - p;
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			/* back over the last name and its '/', never past lim */
			while (o > lim) {
				o--;
				if (o[-1] == '/')
					break;
			}
		} else if (!(n == 1 && p[0] == '.')) {
			memcpy(o, p, n);
			o += n;
			*o++ = '/';
		}
		p = end;
	}
	if (o > lim)
		o--;
	*o = '\0';
	return out;
}

/* name's entry in v[0..n): its index, or n */
static size_t find_var(char *const *v, size_t n, const char *name)
{
	size_t len = strlen(name);

	for (size_t i = 0; i < n; i++)
		if (!strncmp(v[i], name, len) && v[i][len] == '=')
			return i;
	return n;
}

/*
 * The environment dash would hand the command (sandbox_env_free() it),
 * from envp and, with cd, the directory it changes to (*dir: chdir there,
 * PWD's value in the result); NULL where dash would change it otherwise:
 * a name that is no shell name (dash drops it), IFS, OPTIND or PPID (it
 * resets them), a name given twice, an entry with no '=', no PATH or one
 * with a '%' (dash's default PATH and its % entries are not execvp's),
 * CDPATH with cd.  dash orders the environment by its own hash; this
 * keeps the given order.
 */
char **sh_simple_env(char *const *envp, const char *cd, const char **dir)
{
	size_t n = 0, pwd;
	char *cur, *to = NULL, **out;
	bool path = false;
	int r = 0;

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
		if (len == 4 && !memcmp(envp[i], "PATH", 4)) {
			if (strchr(envp[i], '%'))
				return NULL;
			path = true;
		}
		if (cd && len == 6 && !memcmp(envp[i], "CDPATH", 6))
			return NULL;
	}
	pwd = find_var(envp, n, "PWD");
	if (!path || !(cur = start_dir(pwd < n ? envp[pwd] + 4 : NULL)))
		return NULL;
	out = sandbox_env_copy(envp);
	if (out && cd) {
		to = cd_path(cur, cd);
		r = to ? sandbox_env_add(&out, &n, "OLDPWD", cur) : -ENOMEM;
	}
	/* dash's PWD: where cd went, else where it started (kept if given so) */
	if (out && r == 0)
		r = sandbox_env_add(&out, &n, "PWD", to ? to : cur);
	free(cur);
	free(to);
	if (!out || r < 0) {
		sandbox_env_free(out);
		return NULL;
	}
	if (dir)
		*dir = out[find_var(out, n, "PWD")] + 4;
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
