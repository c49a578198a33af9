/*
 * quote.c - an offending value, quoted for an error message: the one
 * escaper of the library's messages.  At most max bytes of the value, so
 * a message stays a sentence, with "..." when cut; '"' and '\\' escaped;
 * control characters never reach a terminal raw.  Two spellings of the
 * rest, by where the message goes:
 *   QUOTE_JSON   a JSON string literal (C0 and C1 controls as \u00NN,
 *                the rest of UTF-8 kept, as the CLI's printable() does):
 *                the policy loader's, so the user finds it in the file;
 *   QUOTE_ASCII  every byte outside printable ASCII as \xNN: egress
 *                reasons, which also travel in log lines and HTTP headers.
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>

void text_quote(const char *s, size_t n, char *buf, size_t len, size_t max,
		enum quote_style style)
{
	bool cut = false, c1 = false;
	size_t off = 0, i, m;
	char esc[8];

	if (len < max + 8) {
		if (len)
			buf[0] = '\0';
		return;
	}
	buf[off++] = '"';
	for (i = 0; i < n; i += 1 + c1) {
		unsigned char c = s[i];

		/* a C1 control (U+0080..U+009F) is one to a terminal too */
		c1 = style == QUOTE_JSON && c == 0xc2 && i + 1 < n &&
		     (unsigned char)s[i + 1] >= 0x80 &&
		     (unsigned char)s[i + 1] <= 0x9f;
		if (c1)
			snprintf(esc, sizeof(esc), "\\u%04x", (unsigned char)s[i + 1]);
		else if (c == '"' || c == '\\')
			snprintf(esc, sizeof(esc), "\\%c", c);
		else if (style == QUOTE_ASCII && (c < 0x20 || c >= 0x7f))
			snprintf(esc, sizeof(esc), "\\x%02x", c);
		else if (c < 0x20 || c == 0x7f)
			snprintf(esc, sizeof(esc), "\\u%04x", c);
		else
			snprintf(esc, sizeof(esc), "%c", c);
		m = strlen(esc);
		if (off + m > max + 1) {
			cut = true;
			break;
		}
		memcpy(buf + off, esc, m);
		off += m;
	}
	/* never end on half a UTF-8 character (QUOTE_ASCII has none) */
	if (cut && style == QUOTE_JSON && ((unsigned char)s[i] & 0xc0) == 0x80) {
		while (off > 1 && ((unsigned char)buf[off - 1] & 0xc0) == 0x80)
			off--;
		if (off > 1)
			off--;
	}
	buf[off++] = '"';
	if (cut) {
		memcpy(buf + off, "...", 3);
		off += 3;
	}
	buf[off] = '\0';
}
