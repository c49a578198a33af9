/*
 * cli.h - the verbs of the corral command, each in a file of its own and
 * found by main.c's table of commands.
 */
#ifndef CORRAL_CLI_H
#define CORRAL_CLI_H

#include "corral.h"

#define EXIT_CORRAL 125		/* corral itself could not do what was asked */
#define EXIT_SIGPIPE 141	/* 128 + SIGPIPE: its reader went, as for a filter */

/* cmd_NAME is in NAME.c (cmd_resume in pause.c) */
int cmd_run(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_policy(int argc, char **argv);
int cmd_audit(int argc, char **argv);
int cmd_serve(int argc, char **argv);		/* then daemon_run() */
/* clients of the daemon's API, over client.h */
int cmd_create(int argc, char **argv);
int cmd_exec(int argc, char **argv);
int cmd_cp(int argc, char **argv);
int cmd_pause(int argc, char **argv);
int cmd_resume(int argc, char **argv);
int cmd_halt(int argc, char **argv);
int cmd_rm(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_logs(int argc, char **argv);
int cmd_events(int argc, char **argv);
int cmd_image(int argc, char **argv);
int cmd_mcp(int argc, char **argv);		/* a client too, over mcp.h */
int cmd_diff(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_snapshot(int argc, char **argv);
int cmd_oci(int argc, char **argv);		/* also as corral-oci (oci.c) */

/* "corral: MESSAGE" on stderr, shown by printable()'s rule (print.c) */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/*
 * With --json, an error the CLI raises is one JSON object on stdout too,
 * {"error": CODE, "detail": SENTENCE}, as the daemon's (jsonerr.c).
 * cli_json_scan: whether opts' json_opt is among argv's options (getopt
 * over a copy; optind is 0 after).  cli_error() notes each line; the
 * first that is not a "note: " is the detail, its code "failed" until
 * cli_json_amend() names it ("usage", the daemon's word, with its HTTP
 * status; a detail of the daemon's own).  cli_json_printed: the verb's
 * JSON answer reached stdout, and no error object follows it.
 * cli_json_flush: print the error noted now (one of many, as rm's);
 * cli_json_end: at the verb's end, with its exit status, which it returns.
 */
struct option;
void cli_json_scan(int argc, char **argv, const char *shorts,
		   const struct option *opts, int json_opt);
void cli_json_on(void);
bool cli_json_is_on(void);
void cli_json_note(const char *line);
void cli_json_amend(const char *code, const char *detail, long http_status);
/*
 * The line just said was a local failure of this kind: CODE one of
 * docs/API.md's table of the CLI's own errors ("unreachable", "policy",
 * ...); cli_json_errno: the word for a local file's errno (cli_errno_code).
 */
void cli_json_code(const char *code);
void cli_json_errno(int err);
/* a policy file's load failed with err: its file's word, else "policy" */
void cli_json_policy_errno(int err);
const char *cli_errno_code(int err);
void cli_json_printed(void);
int cli_json_flush(void);
int cli_json_end(int code);
/*
 * For an option docker's VERB ("run", "exec", "create") has and corral's
 * lacks (OPT as given: "-e", "--volume=/a:/b"): a sentence naming corral's
 * way, or NULL (docker_flags.c).
 */
const char *docker_flag_hint(const char *verb, const char *opt);
/* the same for a docker command corral has under another name, or NULL */
const char *docker_verb_hint(const char *name);
/*
 * After getopt_long returned the option at opts[idx] (idx -1 before the
 * call stays -1 for a short one): the argument as typed if it was only a
 * prefix of the option's name ("--mem" for --memory), else NULL; and the
 * error that says so, naming corral's way or the whole name (longopt.c).
 */
struct option;
const char *option_abbreviated(char **argv, const struct option *opts, int idx);
void say_abbreviated(const char *verb, const char *typed, const char *name);
/* a long option given "--" as its value: it had none (longopt.c) */
bool value_is_dashes(char **argv, int idx);
/*
 * Text a sandbox may have chosen (file names, labels, reasons, details,
 * whether the daemon relays it or a run reports it): C0 controls, DEL and
 * the C1 controls become \xNN, and so does any byte of no well-formed
 * UTF-8 character (a lone 0x9b).  malloc'd; NULL when out of memory.
 */
char *printable(const char *s, size_t n);
/* printable(), but a newline and a tab are themselves: text of lines */
char *printable_lines(const char *s, size_t n);
/*
 * printable(), and "," and "=" as \x2c and \x3d too: a key or a value of
 * a KEY=VALUE,... list (`corral ls`'s labels), where a label the sandbox's
 * agent chose ("a,approved=yes") would read as two.
 */
char *printable_field(const char *s, size_t n);
/*
 * The one rule all of the above and cli_error() show text by: the
 * character at s (n > 0 bytes left) as it is to be shown, into out, NUL
 * ended; returns the bytes of s it took (at least 1).  how: CLI_KEEP_*,
 * what stays itself; CLI_ESCAPE_SEPARATORS, "," and "=" as \xNN.
 */
#define CLI_KEEP_NEWLINE	1u
#define CLI_KEEP_TAB		2u
#define CLI_ESCAPE_SEPARATORS	4u
size_t cli_escape_next(const char *s, size_t n, unsigned how, char out[17]);
/*
 * The length of the bidirectional formatting character at s (U+061C,
 * U+200E, U+200F, U+202A..U+202E, U+2066..U+2069: Trojan Source's,
 * CVE-2021-42574), 0 if there is none: printable() and cli_error() show
 * its bytes as \xNN, as they do a control's.  A name with U+202E shows
 * "x<RLO>gnp.sh" as "xhs.png", and it may turn the rest of the line.
 */
size_t cli_bidi_control(const char *s, size_t n);
/*
 * cli_bidi_control's characters, and those a terminal draws as nothing or
 * a log's reader (an editor, a browser, JavaScript) breaks a line at: the
 * length of the one at s, 0 if none.  U+2028 and U+2029 began a line
 * there in an error that is one line; U+200B, U+2060..2064, U+206A..206F,
 * U+FEFF, U+FFF9..FFFB and the tags (U+E0000..E007F, which spell ASCII
 * no person sees and a model reads) hid text in a name.  So do the
 * variation selectors (a run of them after one character carries any
 * bytes, one per selector: "emoji smuggling"), the combining grapheme
 * joiner, the Hangul fillers (a blank a person reads as a space or as
 * nothing), Khmer's inherent vowels and the Mongolian vowel separator,
 * each of which draws nothing.  ZWJ and ZWNJ stay: scripts and emoji are
 * written with them; and so do VS15 and VS16 (U+FE0E, U+FE0F), which
 * pick an emoji's text or picture form: a run of them still carries bits.
 */
size_t cli_hidden_control(const char *s, size_t n);
/*
 * When f is a terminal: end any string a command's raw output left open
 * there and reset its rendition, so that the line corral writes next is
 * seen (print.c says which).  Nothing otherwise.
 */
void cli_ground_terminal(FILE *f);
/*
 * After a command's raw output reached the caller's terminal (stdout's,
 * stderr's if another), and before corral's words: the modes a command
 * may leave set there are reset (print.c says which), not the screen.
 */
void cli_terminal_after_output(void);
/*
 * While a command's output is streamed raw to the caller's terminal:
 * true, a signal that ends corral (SIGINT, SIGTERM, SIGHUP, SIGQUIT; not
 * one the caller ignores) writes that reset first, and ^Z before corral
 * stops; false, as before.
 */
void cli_terminal_reset_on_signals(bool on);
/*
 * The same for ^Z (SIGTSTP): the reset, then corral stops as it would
 * have; once continued, nothing more.  Part of the above; alone where
 * corral_run has the other signals (run's forwarding), and with -t, where
 * a SIGTSTP from elsewhere comes here from corral_term_stop.
 */
void cli_terminal_reset_on_stop(bool on);
/*
 * Whether a run's or a call's end is worth a line on stderr: it did not
 * simply exit, or it exited non-zero and its reason says more than
 * "exited with status N" (a limit behind the failure, the network off by
 * policy, denials), which without --json is the only place the caller
 * would learn it.
 */
bool cli_end_worth_telling(const char *status, int exit_code, const char *reason);

#endif
