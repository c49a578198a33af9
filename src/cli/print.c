/*
 * print.c - what the client verbs print: text a sandbox may have chosen
 * made safe for a terminal (one rule, cli_escape_next), corral's own
 * errors (cli_error), the daemon's answers as JSON, and the check that
 * all of it was written.
 */
#include "client.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int out_of_memory(const char *what)
{
	cli_error("out of memory %s", what);
	return EXIT_CORRAL;
}

bool cli_end_worth_telling(const char *status, int exit_code, const char *reason)
{
	char plain[64];

	if (!status || strcmp(status, "exited") || exit_code >= 126)
		return true;
	if (exit_code == 0)
		return false;	/* nothing failed: denials are in --json, --events */
	snprintf(plain, sizeof(plain), "exited with status %d", exit_code);
	return reason && strcmp(reason, plain);
}

size_t cli_bidi_control(const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;

	if (n >= 2 && u[0] == 0xd8 && u[1] == 0x9c)
		return 2;	/* U+061C ARABIC LETTER MARK */
	if (n < 3 || u[0] != 0xe2)
		return 0;
	if (u[1] == 0x80 && (u[2] == 0x8e || u[2] == 0x8f ||
			     (u[2] >= 0xaa && u[2] <= 0xae)))
		return 3;	/* LRM, RLM; LRE, RLE, PDF, LRO, RLO */
	if (u[1] == 0x81 && u[2] >= 0xa6 && u[2] <= 0xa9)
		return 3;	/* LRI, RLI, FSI, PDI */
	return 0;
}

size_t cli_hidden_control(const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t bidi = cli_bidi_control(s, n);

	if (bidi)
		return bidi;
	if (n >= 3 && u[0] == 0xe2 && u[1] == 0x80 &&
	    (u[2] == 0x8b || u[2] == 0xa8 || u[2] == 0xa9))
		return 3;	/* ZERO WIDTH SPACE; LINE, PARAGRAPH SEPARATOR */
	if (n >= 3 && u[0] == 0xe2 && u[1] == 0x81 &&
	    ((u[2] >= 0xa0 && u[2] <= 0xa4) || (u[2] >= 0xaa && u[2] <= 0xaf)))
		return 3;	/* WORD JOINER, U+2061..2064; U+206A..206F */
	if (n >= 3 && u[0] == 0xef &&
	    ((u[1] == 0xbb && u[2] == 0xbf) || (u[1] == 0xbf && u[2] >= 0xb9 && u[2] <= 0xbb)))
		return 3;	/* U+FEFF (ZWNBSP, BOM); U+FFF9..FFFB */
	if (n >= 4 && u[0] == 0xf3 && u[1] == 0xa0 && (u[2] == 0x80 || u[2] == 0x81))
		return 4;	/* the tags, U+E0000..E007F */
	if (n >= 4 && u[0] == 0xf3 && u[1] == 0xa0 && u[2] >= 0x84 && u[2] <= 0x87)
		return 4;	/* VARIATION SELECTOR-17..256, U+E0100..E01EF */
	if (n >= 3 && u[0] == 0xef && u[1] == 0xb8 && u[2] >= 0x80 && u[2] <= 0x8d)
		return 3;	/* VARIATION SELECTOR-1..14 (15, 16: emoji's) */
	if (n >= 2 && u[0] == 0xcd && u[1] == 0x8f)
		return 2;	/* COMBINING GRAPHEME JOINER */
	if (n >= 3 && ((u[0] == 0xe1 && u[1] == 0x85 && (u[2] == 0x9f || u[2] == 0xa0)) ||
		       (u[0] == 0xe3 && u[1] == 0x85 && u[2] == 0xa4) ||
		       (u[0] == 0xef && u[1] == 0xbe && u[2] == 0xa0)))
		return 3;	/* the Hangul fillers, U+115F, 1160, 3164, FFA0 */
	if (n >= 3 && u[0] == 0xe1 &&
	    ((u[1] == 0x9e && (u[2] == 0xb4 || u[2] == 0xb5)) || (u[1] == 0xa0 && u[2] == 0x8e)))
		return 3;	/* KHMER VOWEL INHERENT AQ, AA; MONGOLIAN VOWEL SEPARATOR */
	return 0;
}

/*
 * A terminal must not take what a sandbox chose for control sequences.
 * C0 controls, DEL and the C1 controls (UTF-8 c2 80..9f) become \xNN, and
 * so does every byte that is not part of a well-formed UTF-8 character: a
 * lone 0x9b is CSI to a terminal that reads 8-bit controls (and 0x80..0x9f
 * are all C1 there), and a lead byte cut off at the end of one string
 * could join with what the next write begins with.  The bidirectional
 * formatting characters too, and what draws nothing or breaks a line
 * where a terminal does not (cli_hidden_control), each byte as \xNN: the
 * name still reads as its bytes, in the order they are.  The one rule:
 * printable(), printable_lines() and cli_error() all show text by it.
 */
size_t cli_escape_next(const char *s, size_t n, unsigned how, char out[17])
{
	unsigned char ch = s[0];
	size_t len = corral_utf8_char(s, n), hidden = len ? cli_hidden_control(s, len) : 0;
	char *w = out;

	if (hidden) {
		for (size_t k = 0; k < hidden; k++)
			w += sprintf(w, "\\x%02x", (unsigned char)s[k]);
		return hidden;
	}
	if ((ch == '\n' && (how & CLI_KEEP_NEWLINE)) || (ch == '\t' && (how & CLI_KEEP_TAB))) {
		out[0] = (char)ch, out[1] = '\0';
		return 1;
	}
	if (len == 0 || ch < 0x20 || ch == 0x7f ||
	    ((ch == ',' || ch == '=') && (how & CLI_ESCAPE_SEPARATORS)) ||
	    (ch == 0xc2 && (unsigned char)s[1] <= 0x9f)) {
		/* one byte at a time: a C1's second byte is then invalid */
		sprintf(out, "\\x%02x", ch);
		return 1;
	}
	memcpy(out, s, len);
	out[len] = '\0';
	return len;
}

static char *shown(const char *s, size_t n, unsigned how)
{
	char *out = malloc(n * 4 + 1), *w = out, piece[17];

	if (!out)
		return NULL;
	for (size_t i = 0; i < n; ) {
		i += cli_escape_next(s + i, n - i, how, piece);
		w = stpcpy(w, piece);
	}
	*w = '\0';
	return out;
}

/*
 * An error often quotes what an image, a sandbox or a daemon's client
 * wrote (an image's Env, a file's name): its control bytes are shown as
 * \xNN, never sent to the operator's terminal as escape sequences.  A
 * newline too: one in an image's Env began a line of the image's own
 * ("corral: imported ...") under ours; every message here is one line.
 */
void cli_error(const char *fmt, ...)
{
	/*
	 * Room for two whole paths and a library error after them: in 4096
	 * bytes a path of 4000 ("%s: %s", path, strerror) cut the reason off
	 */
	char buf[2 * PATH_MAX + 2 * CORRAL_ERR_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	cli_json_note(buf);
	cli_ground_terminal(stderr);
	fputs("corral: ", stderr);
	/*
	 * By printable()'s rule (cli_escape_next), a tab kept: a
	 * lone 0x9b of a layer's file name, U+009B of an image's Env (CSI to
	 * xterm), a character cut short (it joins what follows) as \xNN
	 */
	for (size_t i = 0, n = strlen(buf); i < n; ) {
		char piece[17];

		i += cli_escape_next(buf + i, n - i, CLI_KEEP_TAB, piece);
		fputs(piece, stderr);
	}
	fputc('\n', stderr);
}

char *printable(const char *s, size_t n)
{
	return shown(s, n, 0);
}

char *printable_lines(const char *s, size_t n)
{
	return shown(s, n, CLI_KEEP_NEWLINE | CLI_KEEP_TAB);
}

char *printable_field(const char *s, size_t n)
{
	return shown(s, n, CLI_ESCAPE_SEPARATORS);
}

/*
 * Before a line of corral's own on a terminal that a command's output
 * reached raw (the command's own stream, relayed as it wrote it, as ssh
 * and docker do): that output may end inside a string the terminal
 * swallows to its end (DCS "ESC P", OSC "ESC ]", APC, PM, SOS), in text
 * made invisible (SGR 8, black on black) or in the line-drawing set
 * (SO after "ESC ) 0": "corral" drawn as boxes), and then the line that
 * says why the command was killed was never seen.  ST ends such a string
 * and is nothing outside one; SI, "ESC ( B" and SGR 0 are what `tput
 * sgr0` sends.  Not to a file or a pipe: there corral's words stay as
 * they are.
 */
void cli_ground_terminal(FILE *f)
{
	static const char ground[] = "\x1b\\\x0f\x1b(B\x1b[0m";

	if (isatty(fileno(f)))
		fputs(ground, f);
}

/*
 * What a command's output may leave set on the caller's terminal after it
 * ends (killed, or on purpose), each undone in a form that is nothing
 * when the terminal is already so: xterm, VTE, tmux and the Linux
 * console take each, or ignore what they do not know.  A command that
 * set them and was killed left the operator's terminal on the alternate
 * screen (corral's line then hidden with the rest when the next program
 * leaves it), with a scroll region, no cursor, every mouse click sent as
 * typed bytes, paste bracketed, keys in application mode, no wrap, and
 * inserting.  Not a full reset (RIS), which clears the screen and the
 * scrollback, and not the colours OSC 10/11 set (SECURITY.md's "Known
 * limits": a shell may have set them on purpose).  tmux sends as much
 * when it leaves a terminal (tty_stop_tty); ssh, docker and script(1)
 * give back only the termios.
 *   ?1047l   the main screen, the cursor left where it is: ?1049l would
 *            also restore the cursor saved at the last ?1049h, and tmux
 *            does so on the main screen too, where that is stale
 *   ?2026l   a synchronized update ends: until then the terminal drew
 *            nothing more (kitty, foot, WezTerm: for up to a second)
 *   ESC 7, ?69l, CSI r, ESC 8   the whole screen scrolls, no left and
 *            right margins (xterm's DECLRMM; its reset clears them), as
 *            tmux leaves it (CSI r homes the cursor: saved around it)
 *   CSI 2 l  the keyboard unlocked (KAM: xterm took no key)
 *   ?5l      normal video, not the whole screen reversed (a killed
 *            `tput flash`; on the Linux console `setterm --inversescreen`
 *            too, which a user sets on purpose and `setterm` sets back)
 *   CSI > 4 m   xterm's modifyOtherKeys back to its configured value
 *            (tmux's own reset when it leaves a terminal); CSI < 99 u
 *            pops the kitty keyboard protocol's flags (CSI > N u pushes;
 *            an emptied stack leaves none): every key was sent to the
 *            shell as CSI ... u.  Both are nothing on the Linux console,
 *            VTE and tmux 3.3 (a private marker they do not know), and
 *            an SGR 0 follows for a terminal that would read them as SGR.
 * Not the origin mode (?6): its reset homes the cursor on xterm, VTE and
 * tmux even where it was not set (corral's line then written over the
 * first), and ESC 7 and ESC 8 save and restore it; with the scroll region
 * and margins the whole screen it moves nothing (SECURITY.md).
 */
static const char after_output[] =
	"\x1b\\"					/* ST: an open string ends */
	"\x1b[?2026l"					/* drawn again */
	"\x1b[?1047l"
	"\x1b" "7\x1b[?69l\x1b[r\x1b" "8"
	"\x1b[?25h"					/* the cursor shown */
	"\x1b[?7h\x1b[4l\x1b[2l"			/* wrap on, insert off, keys */
	"\x1b[?5l"					/* normal video */
	"\x1b[?1l\x1b>"					/* cursor keys, keypad normal */
	"\x1b[>4m\x1b[<99u"				/* keys not encoded */
	"\x1b[?9l\x1b[?1000l\x1b[?1002l\x1b[?1003l"	/* no mouse reports */
	"\x1b[?1005l\x1b[?1006l\x1b[?1015l"		/* in no encoding */
	"\x1b[?1004l\x1b[?2004l"			/* no focus events, paste plain */
	"\x0f\x1b(B\x1b[0m";				/* as cli_ground_terminal */

static bool same_terminal(int a, int b)
{
	struct stat sa, sb;

	return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_rdev == sb.st_rdev;
}

void cli_terminal_after_output(void)
{
	/* a terminal gone takes no reset, and corral's words say the rest */
	fflush(stdout);
	if (isatty(STDOUT_FILENO)) {
		fputs(after_output, stdout);
		fflush(stdout);
	}
	if (isatty(STDERR_FILENO) &&
	    !(isatty(STDOUT_FILENO) && same_terminal(STDOUT_FILENO, STDERR_FILENO)))
		fputs(after_output, stderr);
}

/*
 * A command's output streamed to the terminal, and corral ended by the
 * caller's ^C (or SIGTERM, SIGHUP, SIGQUIT) before its end: the reset
 * above is written from the handler, then the signal ends corral as it
 * would have.  Without it `corral exec ID -- CMD` stopped with ^C, the
 * natural answer to a screen gone strange, left the terminal on the
 * alternate screen with mouse reports on and no cursor, and the shell's
 * prompt went there.  Only write(2) here: a handler.  A signal the caller
 * ignores (nohup, a background job's SIGINT) stays ignored.
 */
static const int reset_signals[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
#define NRESET_SIGNALS (sizeof(reset_signals) / sizeof(reset_signals[0]))
static struct sigaction reset_old[NRESET_SIGNALS];
static volatile sig_atomic_t reset_fds;	/* 1 stdout's terminal, 2 stderr's */

static void write_reset(int fd)
{
	const char *p = after_output;
	size_t left = sizeof(after_output) - 1;
	ssize_t n;

	while (left > 0) {
		n = write(fd, p, left);
		if (n > 0)
			p += n, left -= (size_t)n;
		else if (n == 0 || errno != EINTR)
			return;		/* the terminal gone: nothing to reset */
	}
}

/* SA_RESETHAND, every signal blocked: the raise kills once this returns */
static void reset_then_end(int sig)
{
	int saved = errno;

	if (reset_fds & 1)
		write_reset(STDOUT_FILENO);
	if (reset_fds & 2)
		write_reset(STDERR_FILENO);
	errno = saved;
	raise(sig);
}

/*
 * ^Z (SIGTSTP) while a command's output streams to the terminal: corral
 * stopped with the command's modes still set until `fg`, and the shell's
 * prompt, and every command typed meanwhile, worked on the alternate
 * screen with mouse reports on and no cursor.  The reset first, then the
 * stop, as less(1) and vim do: SIGTSTP at its default, unblocked, raised;
 * once continued, this handler back.  On SIGCONT nothing more: the
 * command's next output sets what it needs.  Not when another process
 * group has the terminal (a job in the background): its modes are that
 * program's.  SIGSTOP cannot be caught: it still stops corral as it is.
 * With -t a ^Z is the pty's; a SIGTSTP from elsewhere is raised again by
 * corral_term_stop, once the terminal is cooked, and comes here then.
 */
static struct sigaction stop_old;
static volatile sig_atomic_t stop_fds;	/* 1 stdout's terminal, 2 stderr's */
static volatile pid_t stop_pid;		/* corral's, not its clones' */

static bool ours_to_reset(int fd)
{
	pid_t fg = tcgetpgrp(fd);	/* async-signal-safe */

	return fg < 0 || fg == getpgrp();	/* not our ctty: no job to ask */
}

static void reset_then_stop(int sig)
{
	struct sigaction dfl = { .sa_handler = SIG_DFL }, self;
	int saved = errno;
	sigset_t tstp;

	/*
	 * The sandbox's init is cloned from corral with this handler: as its
	 * namespace's PID 1 it was never stopped, nor is it now, and a
	 * `kill -TSTP 1` from inside must reach nothing of this.
	 */
	if (getpid() != stop_pid)
		return;
	if ((stop_fds & 1) && ours_to_reset(STDOUT_FILENO))
		write_reset(STDOUT_FILENO);
	if ((stop_fds & 2) && ours_to_reset(STDERR_FILENO))
		write_reset(STDERR_FILENO);
	sigemptyset(&tstp);
	sigaddset(&tstp, sig);
	if (sigaction(sig, &dfl, &self) == 0) {
		/* the handler's return gives the interrupted code its mask back */
		sigprocmask(SIG_UNBLOCK, &tstp, NULL);
		raise(sig);		/* stopped here until SIGCONT */
		/* a ^Z meanwhile waits for this handler, not the default */
		sigprocmask(SIG_BLOCK, &tstp, NULL);
		sigaction(sig, &self, NULL);
	}
	errno = saved;
}

static int terminal_fds(void)
{
	return (isatty(STDOUT_FILENO) ? 1 : 0) |
	       (isatty(STDERR_FILENO) &&
		!(isatty(STDOUT_FILENO) && same_terminal(STDOUT_FILENO, STDERR_FILENO)) ? 2 : 0);
}

void cli_terminal_reset_on_stop(bool on)
{
	struct sigaction sa = { .sa_handler = reset_then_stop, .sa_flags = SA_RESTART };

	if (!on) {
		if (stop_fds && stop_old.sa_handler != SIG_IGN)
			sigaction(SIGTSTP, &stop_old, NULL);
		stop_fds = 0;
		return;
	}
	if (stop_fds)
		return;		/* on already: stop_old is the caller's */
	stop_fds = terminal_fds();
	if (!stop_fds)
		return;
	stop_pid = getpid();
	sigfillset(&sa.sa_mask);
	/* one the caller ignores (a shell without job control) stays ignored */
	if (sigaction(SIGTSTP, NULL, &stop_old) < 0)
		stop_old.sa_handler = SIG_IGN;
	else if (stop_old.sa_handler != SIG_IGN)
		sigaction(SIGTSTP, &sa, NULL);
}

void cli_terminal_reset_on_signals(bool on)
{
	struct sigaction sa = { .sa_handler = reset_then_end, .sa_flags = SA_RESETHAND };

	cli_terminal_reset_on_stop(on);
	if (!on) {
		if (!reset_fds)
			return;
		for (size_t i = 0; i < NRESET_SIGNALS; i++)
			if (reset_old[i].sa_handler != SIG_IGN)
				sigaction(reset_signals[i], &reset_old[i], NULL);
		reset_fds = 0;
		return;
	}
	if (reset_fds)
		return;		/* on already: reset_old are the caller's */
	reset_fds = terminal_fds();
	if (!reset_fds)
		return;
	sigfillset(&sa.sa_mask);
	for (size_t i = 0; i < NRESET_SIGNALS; i++) {
		if (sigaction(reset_signals[i], NULL, &reset_old[i]) < 0)
			reset_old[i].sa_handler = SIG_IGN;	/* then left alone */
		else if (reset_old[i].sa_handler != SIG_IGN)
			sigaction(reset_signals[i], &sa, NULL);
	}
}

void daemon_error(const char *text, const char *suffix)
{
	char *safe = printable(text, strlen(text));

	cli_error("%s%s", safe ? safe : "(out of memory)", suffix);
	free(safe);
}

int print_json(const json_t *o)
{
	if (json_dumpf(o, stdout, JSON_COMPACT | JSON_ENSURE_ASCII) < 0 ||
	    putchar('\n') == EOF) {
		cli_error("writing to standard output: %s", strerror(errno));
		return EXIT_CORRAL;
	}
	cli_json_printed();
	return 0;
}

/*
 * id may be the daemon's (a snapshot's): an answer without one is said,
 * not passed to puts(), and one that holds controls is shown as text.
 */
int print_id_or_json(const char *id, const json_t *o, bool as_json)
{
	char *shown;
	int r;

	if (as_json)
		return print_json(o);
	if (!id) {
		cli_json_code("bad_answer");
		cli_error("the daemon's answer holds no \"id\"");
		return EXIT_CORRAL;
	}
	shown = printable(id, strlen(id));
	if (!shown) {
		cli_error("out of memory");
		return EXIT_CORRAL;
	}
	r = puts(shown) == EOF ? EXIT_CORRAL : 0;
	free(shown);
	return r;
}

int verb_finish(int code)
{
	if (fflush(stdout) == EOF || ferror(stdout)) {
		cli_error("writing to standard output: %s", strerror(errno));
		return code ? code : EXIT_CORRAL;
	}
	return code;
}
