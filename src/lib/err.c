/* err.c - the error type every layer carries up. */
#include "internal.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>


/* the bytes of s[0..len) that begin a character, so a cut splits none */
static size_t char_start(const char *s, size_t at, size_t len)
{
	while (at > 0 && at < len && ((unsigned char)s[at] & 0xc0) == 0x80)
		at--;
	return at;
}

/*
 * A text vsnprintf cut at len (its buffer's end) may end inside a
 * character, its last bytes lost with the rest: that character is left
 * out too, or the message was not UTF-8 and JSON (a result's reason, the
 * daemon's detail) could not carry it.
 */
static size_t whole_chars(const char *s, size_t len)
{
	size_t at = len;

	while (at > 0 && len - at < 4 && ((unsigned char)s[at - 1] & 0xc0) == 0x80)
		at--;
	if (at > 0 && (unsigned char)s[at - 1] >= 0xc0 &&
	    !corral_utf8_char(s + at - 1, len - at + 1))
		return at - 1;
	return len;
}

/*
 * s (len bytes of it here, total in all) into out, keep bytes at most and
 * a NUL: when it does not fit, its middle is cut and the cut says how
 * much it took.  A message's middle is where a long path's directories
 * are: what was being done stays at the front, the file's name at the end.
 */
static size_t put_cut(char *out, const char *s, size_t len, size_t total,
		      size_t keep)
{
	char mark[48];
	size_t m, front, back, kept;

	if (total <= keep) {
		memcpy(out, s, len);
		return len;
	}
	/* the mark's length as long as total's digits can make it */
	m = (size_t)snprintf(mark, sizeof(mark), "[... %zu bytes cut ...]", total);
	if (keep <= m) {
		memcpy(out, s, keep);
		return char_start(s, keep, len);
	}
	kept = keep - m;
	front = char_start(s, kept / 2, len);
	back = len - (kept - kept / 2);
	while (back < len && ((unsigned char)s[back] & 0xc0) == 0x80)
		back++;
	memcpy(out, s, front);
	m = (size_t)snprintf(mark, sizeof(mark), "[... %zu bytes cut ...]",
			     total - front - (len - back));
	memcpy(out + front, mark, m);
	memcpy(out + front + m, s + back, len - back);
	return front + m + len - back;
}

/*
 * msg = fmt's text, then ": tail"; tail must not point into err->msg.
 * The tail is the reason ("Permission denied", a wrapped error's words):
 * a path of a few hundred bytes in fmt's text cut it off, and the
 * message said what failed but not why.  When both do not fit, fmt's
 * text is cut in its middle; the tail is cut only past what leaves fmt's
 * text HEAD_KEPT bytes.
 */
#define HEAD_KEPT 160

static void set_msg_tail(struct corral_err *err, const char *tail,
			 const char *fmt, va_list ap)
{
	char head[CORRAL_ERR_MAX + PATH_MAX];
	int n = vsnprintf(head, sizeof(head), fmt, ap);
	size_t total = n < 0 ? 0 : (size_t)n, hlen = total, tlen = strlen(tail);
	size_t room = sizeof(err->msg) - 1 - 2, hkeep = hlen, tkeep = tlen, w;

	if (hlen >= sizeof(head))	/* cut at the end, counted in total */
		hlen = whole_chars(head, sizeof(head) - 1);
	if (total + tlen > room) {
		size_t hmin = total < HEAD_KEPT ? total : HEAD_KEPT;

		if (tkeep > room - hmin)
			tkeep = room - hmin;
		hkeep = room - tkeep;
	}
	w = put_cut(err->msg, head, hlen, total, hkeep);
	memcpy(err->msg + w, ": ", 2);
	w += 2;
	w += put_cut(err->msg + w, tail, tlen, tlen, tkeep);
	err->msg[w] = '\0';
}

/*
 * A message whose reason its format wrote itself ("%s: %s", path,
 * strerror(errno): fifty places do) keeps it too: cut in its middle.
 */
int corral_set_err(struct corral_err *err, int code, const char *fmt, ...)
{
	char text[CORRAL_ERR_MAX + PATH_MAX];
	va_list ap;
	size_t w;
	int n;

	err->code = code;
	va_start(ap, fmt);
	n = vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0, text[0] = '\0';
	w = put_cut(err->msg, text, (size_t)n < sizeof(text) ? (size_t)n :
		    whole_chars(text, sizeof(text) - 1), (size_t)n, sizeof(err->msg) - 1);
	err->msg[w] = '\0';
	return code;
}

int corral_set_errno(struct corral_err *err, int errnum, const char *fmt, ...)
{
	char buf[128];
	va_list ap;

	err->code = -errnum;
	va_start(ap, fmt);
	/* the GNU strerror_r: it may return a static string instead of buf */
	set_msg_tail(err, strerror_r(errnum, buf, sizeof(buf)), fmt, ap);
	va_end(ap);
	return -errnum;
}

int corral_wrap_err(struct corral_err *err, const char *fmt, ...)
{
	char old[CORRAL_ERR_MAX];
	va_list ap;

	memcpy(old, err->msg, sizeof(old));
	va_start(ap, fmt);
	set_msg_tail(err, old, fmt, ap);
	va_end(ap);
	return err->code;
}
