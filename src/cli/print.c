/*
 * print.c - what the client verbs print: the daemon's text made safe for a
 * terminal, its answers as JSON, and the check that all of it was written.
 */
#include "client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/*
 * A terminal must not take what a sandbox chose for control sequences.
 * C0 controls, DEL and the C1 controls (UTF-8 c2 80..9f) become \xNN, and
 * so does every byte that is not part of a well-formed UTF-8 character: a
 * lone 0x9b is CSI to a terminal that reads 8-bit controls (and 0x80..0x9f
 * are all C1 there), and a lead byte cut off at the end of one string
 * could join with what the next write begins with.  The bidirectional
 * formatting characters too (cli_bidi_control), each byte as \xNN: the
 * name still reads as its bytes, in the order they are.
 */
char *printable(const char *s, size_t n)
{
	char *out = malloc(n * 4 + 1), *w = out;
	size_t i, len;

	if (!out)
		return NULL;
	for (i = 0; i < n; i += len) {
		unsigned char ch = s[i];

		len = corral_utf8_char(s + i, n - i);
		if (len && cli_bidi_control(s + i, len)) {
			for (size_t k = 0; k < len; k++)
				w += sprintf(w, "\\x%02x", (unsigned char)s[i + k]);
		} else if (len == 0 || ch < 0x20 || ch == 0x7f ||
		    (ch == 0xc2 && (unsigned char)s[i + 1] <= 0x9f)) {
			/* one byte at a time: a C1's second byte is then invalid */
			w += sprintf(w, "\\x%02x", ch);
			len = 1;
		} else {
			memcpy(w, s + i, len);
			w += len;
		}
	}
	*w = '\0';
	return out;
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

int print_id_or_json(const char *id, const json_t *o, bool as_json)
{
	if (as_json)
		return print_json(o);
	return puts(id) == EOF ? EXIT_CORRAL : 0;
}

int verb_finish(int code)
{
	if (fflush(stdout) == EOF || ferror(stdout)) {
		cli_error("writing to standard output: %s", strerror(errno));
		return code ? code : EXIT_CORRAL;
	}
	return code;
}
