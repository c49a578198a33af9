/*
 * audit.c - the hash chain of an events file: its tail for the writer,
 * verification and a readable timeline for `corral audit`.
 *
 * SHA-256 comes from nettle (linked in already for libarchive), not
 * OpenSSL, which a cold start would pay to load (issue 17); nothing here is
 * a hand-made digest.  Files are read through a fixed buffer of AUDIT_LINE_MAX + 1
 * bytes, so a log of any size, or with lines of any length, costs bounded
 * memory; a longer line is a bad line.
 */
#include "audit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <jansson.h>
#include <nettle/sha2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TAIL_CHUNK 16384

/* ---- hashing ------------------------------------------------------------ */

static void to_hex(const unsigned char *md, char hex[AUDIT_HASH_HEX + 1])
{
	static const char digits[] = "0123456789abcdef";

	for (int i = 0; i < AUDIT_HASH_HEX / 2; i++) {
		hex[2 * i] = digits[md[i] >> 4];
		hex[2 * i + 1] = digits[md[i] & 0xf];
	}
	hex[AUDIT_HASH_HEX] = '\0';
}

void audit_hash_zero(char hex[AUDIT_HASH_HEX + 1])
{
	memset(hex, '0', AUDIT_HASH_HEX);
	hex[AUDIT_HASH_HEX] = '\0';
}

int audit_hash(const void *buf, size_t len, char hex[AUDIT_HASH_HEX + 1])
{
	unsigned char md[SHA256_DIGEST_SIZE];
	struct sha256_ctx ctx;

	sha256_init(&ctx);
	sha256_update(&ctx, len, buf);
	sha256_digest(&ctx, sizeof(md), md);
	to_hex(md, hex);
	return 0;
}

/* ---- the tail of a file, for the writer --------------------------------- */

/* Exactly n bytes at off, or -EIO when the file is shorter (it shrank). */
static int pread_full(int fd, void *buf, size_t n, off_t off)
{
	size_t done = 0;

	while (done < n) {
		ssize_t got = pread(fd, (char *)buf + done, n - done, off + done);

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return -errno;
		if (got == 0)
			return -EIO;
		done += got;
	}
	return 0;
}

/* *start: just after the last '\n' before end, or 0. */
static int line_start(int fd, off_t end, off_t *start)
{
	char buf[TAIL_CHUNK];
	off_t pos = end;

	while (pos > 0) {
		size_t n = pos < TAIL_CHUNK ? (size_t)pos : TAIL_CHUNK;
		char *nl;
		int r = pread_full(fd, buf, n, pos - n);

		if (r < 0)
			return r;
		nl = memrchr(buf, '\n', n);
		if (nl) {
			*start = pos - n + (nl - buf) + 1;
			return 0;
		}
		pos -= n;
	}
	*start = 0;
	return 0;
}

static int hash_range(int fd, off_t from, off_t to, char hex[AUDIT_HASH_HEX + 1])
{
	unsigned char md[SHA256_DIGEST_SIZE];
	char buf[TAIL_CHUNK];
	struct sha256_ctx ctx;
	int r;

	sha256_init(&ctx);
	while (from < to) {
		size_t n = to - from < TAIL_CHUNK ? (size_t)(to - from) : TAIL_CHUNK;

		r = pread_full(fd, buf, n, from);
		if (r < 0)
			return r;
		sha256_update(&ctx, n, (const uint8_t *)buf);
		from += n;
	}
	sha256_digest(&ctx, sizeof(md), md);
	to_hex(md, hex);
	return 0;
}

int audit_tail(int fd, const char *path, char hex[AUDIT_HASH_HEX + 1],
	       bool *torn, struct corral_err *err)
{
	char h[AUDIT_HASH_HEX + 1];
	struct stat st;
	off_t end, start;
	bool t = false;
	char last;
	int r;

	if (fstat(fd, &st) < 0)
		return corral_set_errno(err, errno, "events file %s", path);
	audit_hash_zero(h);
	if (S_ISREG(st.st_mode) && st.st_size > 0) {
		end = st.st_size;
		r = pread_full(fd, &last, 1, end - 1);
		if (r == 0) {
			if (last == '\n')
				end--;
			else
				t = true;
			r = line_start(fd, end, &start);
		}
		if (r == 0)
			r = hash_range(fd, start, end, h);
		if (r < 0)
			return corral_set_err(err, r, "events file %s: cannot read "
					      "its last line to continue the hash "
					      "chain: %s", path, r == -EIO ?
					      "it changed while being read, or the "
					      "digest failed" : strerror(-r));
	}
	memcpy(hex, h, sizeof(h));
	*torn = t;
	return 0;
}

/* ---- reading a log line by line, in bounded memory ---------------------- */

enum { LINE_END, LINE_OK, LINE_PARTIAL, LINE_TOO_LONG };

struct line_reader {
	int fd;
	char *buf;			/* AUDIT_LINE_MAX + 1 bytes */
	size_t start, end;		/* unread: buf[start, end) */
	size_t lineno;			/* of the line last returned */
	bool eof;
	bool skipping;			/* inside a line that was too long */
};

static int reader_open(struct line_reader *lr, const char *path,
		       struct corral_err *err)
{
	memset(lr, 0, sizeof(*lr));
	lr->fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (lr->fd < 0)
		return corral_set_errno(err, errno, "%s", path);
	lr->buf = malloc(AUDIT_LINE_MAX + 1);
	if (!lr->buf) {
		close(lr->fd);
		return corral_set_err(err, -ENOMEM, "%s: out of memory", path);
	}
	return 0;
}

static void reader_close(struct line_reader *lr)
{
	free(lr->buf);
	close(lr->fd);
}

/* More bytes into the buffer; 0 at end of file, else > 0 or -errno. */
static ssize_t reader_fill(struct line_reader *lr)
{
	ssize_t got;

	if (lr->start > 0) {
		memmove(lr->buf, lr->buf + lr->start, lr->end - lr->start);
		lr->end -= lr->start;
		lr->start = 0;
	}
	do
		got = read(lr->fd, lr->buf + lr->end, AUDIT_LINE_MAX + 1 - lr->end);
	while (got < 0 && errno == EINTR);
	if (got < 0)
		return -errno;
	lr->end += got;
	lr->eof = got == 0;
	return got;
}

/*
 * The next line, without its '\n': LINE_OK; LINE_PARTIAL for bytes at the
 * end of the file that no '\n' ends; LINE_TOO_LONG (the line is skipped);
 * LINE_END; or -errno.
 */
static int next_line(struct line_reader *lr, const char **line, size_t *len)
{
	for (;;) {
		char *p = lr->buf + lr->start;
		char *nl = memchr(p, '\n', lr->end - lr->start);
		ssize_t got;

		if (nl) {
			lr->start += nl - p + 1;
			if (lr->skipping) {
				lr->skipping = false;
				continue;
			}
			*line = p;
			*len = nl - p;
			lr->lineno++;
			return LINE_OK;
		}
		if (lr->end - lr->start == AUDIT_LINE_MAX + 1 ||
		    (lr->skipping && lr->start < lr->end)) {
			lr->start = lr->end = 0;
			if (!lr->skipping) {
				lr->skipping = true;
				lr->lineno++;
				return LINE_TOO_LONG;
			}
		}
		if (lr->eof)
			goto at_end;
		got = reader_fill(lr);
		if (got < 0)
			return got;
	}
at_end:
	if (lr->skipping || lr->start == lr->end)
		return LINE_END;
	*line = lr->buf + lr->start;
	*len = lr->end - lr->start;
	lr->start = lr->end;
	lr->lineno++;
	return LINE_PARTIAL;
}

/* ---- verify --------------------------------------------------------------- */

static void bad(struct corral_audit_report *r, size_t lineno, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void bad(struct corral_audit_report *r, size_t lineno, const char *fmt, ...)
{
	va_list ap;
	int n;

	r->bad_line = lineno;
	n = snprintf(r->reason, sizeof(r->reason), "line %zu: ", lineno);
	va_start(ap, fmt);
	vsnprintf(r->reason + n, sizeof(r->reason) - n, fmt, ap);
	va_end(ap);
}

static bool is_hash_hex(const char *s)
{
	if (strlen(s) != AUDIT_HASH_HEX)
		return false;
	for (; *s; s++)
		if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
			return false;
	return true;
}

/* The "prev" of a line, or NULL if it is not a chained events line. */
static const char *line_prev(const char *line, size_t len, json_t **obj,
			     json_error_t *jerr)
{
	json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, jerr);

	*obj = o;
	if (!o || !json_is_object(o))
		return NULL;
	return json_string_value(json_object_get(o, AUDIT_KEY_PREV));
}

enum { LINE_CHAINS, LINE_BAD, LINE_NOT_JSON };

/* Whether the line continues the chain from expect; r says why not. */
static int check_line(const char *line, size_t len, size_t lineno,
		      const char *expect, struct corral_audit_report *r)
{
	json_error_t jerr;
	json_t *o;
	const char *prev = line_prev(line, len, &o, &jerr);
	int ret = LINE_BAD;

	if (!o) {
		bad(r, lineno, "not valid JSON: %s (column %d)", jerr.text,
		    jerr.column);
		return LINE_NOT_JSON;
	}
	if (!json_is_object(o))
		bad(r, lineno, "not a JSON object");
	else if (!prev)
		bad(r, lineno, "no \"%s\" string: not a line of a chained "
		    "events file", AUDIT_KEY_PREV);
	else if (!is_hash_hex(prev))
		bad(r, lineno, "\"%s\" is not a SHA-256 in lowercase hex",
		    AUDIT_KEY_PREV);
	else if (strcmp(prev, expect) && lineno == 1)
		bad(r, lineno, "prev is not 64 zeros, so the file does not "
		    "start where its log started (first lines deleted?)");
	else if (strcmp(prev, expect))
		bad(r, lineno, "prev does not match the hash of line %zu "
		    "(edited, deleted or reordered)", lineno - 1);
	else
		ret = LINE_CHAINS;
	/*
	 * Lines the writer could not write (a full disk) leave the chain
	 * whole, and are said by the line written next: counted, so that a
	 * file that verifies does not read as the whole record.
	 */
	if (ret == LINE_CHAINS &&
	    !strcmp(json_string_value(json_object_get(o, "type")) ?: "", "log.gap")) {
		if (!r->gaps++)
			r->gap_line = lineno;
		r->gap_lost += json_integer_value(json_object_get(o, "lost"));
	}
	json_decref(o);
	return ret;
}

int corral_audit_verify(const char *path, struct corral_audit_report *r,
			struct corral_err *err)
{
	struct line_reader lr;
	char expect[AUDIT_HASH_HEX + 1], hash[AUDIT_HASH_HEX + 1];
	char torn_reason[CORRAL_ERR_MAX];
	size_t torn_at = 0;
	const char *line;
	size_t len;
	int ret;

	memset(r, 0, sizeof(*r));
	audit_hash_zero(expect);
	ret = reader_open(&lr, path, err);
	if (ret < 0)
		return ret;
	for (;;) {
		ret = next_line(&lr, &line, &len);
		if (ret < 0) {
			corral_set_errno(err, -ret, "%s", path);
			break;
		}
		if (ret == LINE_END)
			break;
		if (ret == LINE_PARTIAL) {
			r->incomplete = true;
			break;
		}
		if (ret == LINE_TOO_LONG) {
			bad(r, lr.lineno, "longer than %d bytes", AUDIT_LINE_MAX);
			break;
		}
		ret = audit_hash(line, len, hash);
		if (ret < 0) {
			corral_set_err(err, ret, "%s: SHA-256 failed", path);
			break;
		}
		ret = check_line(line, len, lr.lineno, expect, r);
		/*
		 * Not JSON: a write cut short by a crash, if the next line
		 * chains to these very bytes (events.c goes on that way); that
		 * is not what an edit looks like, and the chain still holds.
		 */
		if (ret == LINE_NOT_JSON && !torn_at) {
			torn_at = lr.lineno;
			memcpy(torn_reason, r->reason, sizeof(torn_reason));
			r->bad_line = 0;
			memcpy(expect, hash, sizeof(expect));
			continue;
		}
		if (torn_at && ret == LINE_CHAINS) {
			if (!r->torn++)
				r->torn_line = torn_at;
			torn_at = 0;
		}
		if (ret != LINE_CHAINS)
			break;
		memcpy(expect, hash, sizeof(expect));
		r->lines++;
	}
	reader_close(&lr);
	if (ret < 0 && ret != LINE_BAD && ret != LINE_NOT_JSON)
		return ret;
	if (torn_at && (!r->bad_line || r->bad_line == torn_at + 1)) {
		r->bad_line = torn_at;
		snprintf(r->reason, sizeof(r->reason), "%.300s; no line after it "
			 "chains to it", torn_reason);
	}
	memcpy(r->head, expect, sizeof(r->head));
	if (r->bad_line)
		return 0;
	if (r->incomplete)
		snprintf(r->reason, sizeof(r->reason), "verified up to line %zu, "
			 "the last complete line; line %zu has no newline (a "
			 "write cut short) and is not checked", r->lines + r->torn,
			 r->lines + r->torn + 1);
	else
		snprintf(r->reason, sizeof(r->reason), "%zu line%s verified",
			 r->lines, r->lines == 1 ? "" : "s");
	if (r->torn) {
		size_t n = strlen(r->reason);

		snprintf(r->reason + n, sizeof(r->reason) - n, "; %zu line%s cut "
			 "short by a crash (the first: line %zu) and the next line "
			 "chains to %s bytes", r->torn, r->torn == 1 ? "" : "s",
			 r->torn_line, r->torn == 1 ? "its" : "their");
	}
	if (r->gaps) {
		size_t n = strlen(r->reason);

		snprintf(r->reason + n, sizeof(r->reason) - n, "; %zu gap%s said "
			 "(log.gap, the first: line %zu): %llu event line%s could not "
			 "be written", r->gaps, r->gaps == 1 ? "" : "s", r->gap_line,
			 (unsigned long long)r->gap_lost, r->gap_lost == 1 ? "" : "s");
	}
	return 0;
}

/* ---- show ------------------------------------------------------------------ */

/*
 * Write n bytes of s with everything outside printable ASCII as \xNN (and
 * a backslash doubled), so nothing a sandbox wrote can drive the terminal.
 * Returns the characters written.
 */
static size_t put_safe(FILE *out, const char *s, size_t n)
{
	size_t w = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = s[i];

		if (c == '\\')
			w += fprintf(out, "\\\\");
		else if (c < 0x20 || c > 0x7e)
			w += fprintf(out, "\\x%02x", c);
		else
			w += fputc(c, out) == EOF ? 0 : 1;
	}
	return w;
}

/* A string member, escaped, padded to width; "-" if absent. */
static void put_column(FILE *out, json_t *o, const char *key, int width)
{
	json_t *v = json_object_get(o, key);
	size_t w;

	if (json_is_string(v))
		w = put_safe(out, json_string_value(v), json_string_length(v));
	else if (json_is_integer(v))
		w = fprintf(out, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
	else
		w = fprintf(out, "-");
	for (; (int)w < width; w++)
		fputc(' ', out);
}

/* A value: a plain word as it is, anything else as JSON (quoted). */
static void put_value(FILE *out, json_t *v)
{
	const char *s = json_string_value(v);
	size_t n = json_string_length(v);
	char *text;

	if (s && n && !memchr(s, ' ', n) && !memchr(s, '"', n)) {
		put_safe(out, s, n);
		return;
	}
	text = json_dumps(v, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_ENCODE_ANY);
	if (text)
		put_safe(out, text, strlen(text));
	free(text);
}

static bool is_column(const char *key)
{
	static const char *const keys[] = {
		"seq", "time", "sandbox", AUDIT_KEY_CALL, "type", "host", "port",
		"reason", AUDIT_KEY_PREV,
	};

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (!strcmp(key, keys[i]))
			return true;
	return false;
}

/* "host:port key=value ... / reason" */
static void put_details(FILE *out, json_t *o)
{
	json_t *host = json_object_get(o, "host"), *port = json_object_get(o, "port");
	json_t *reason = json_object_get(o, "reason"), *v;
	const char *key, *sep = "";

	if (json_is_string(host)) {
		put_safe(out, json_string_value(host), json_string_length(host));
		if (json_is_integer(port))
			fprintf(out, ":%" JSON_INTEGER_FORMAT, json_integer_value(port));
		sep = " ";
	}
	json_object_foreach(o, key, v) {
		if (is_column(key))
			continue;
		fprintf(out, "%s", sep);
		put_safe(out, key, strlen(key));
		fputc('=', out);
		put_value(out, v);
		sep = " ";
	}
	if (json_is_string(reason)) {
		fprintf(out, "%s/ ", sep);
		put_safe(out, json_string_value(reason), json_string_length(reason));
	}
	fputc('\n', out);
}

static bool member_is(json_t *o, const char *key, const char *want)
{
	const char *s = json_string_value(json_object_get(o, key));

	return !want || (s && !strcmp(s, want));
}

/*
 * --type egress matches egress.* as well as egress itself; --type
 * syscall.denied matches syscall.denied.summary too, the counts of the
 * denials that were not written one by one (events.c).
 */
static bool type_matches(json_t *o, const char *want)
{
	const char *s = json_string_value(json_object_get(o, "type"));
	size_t n;

	if (!want)
		return true;
	if (!s)
		return false;
	n = strlen(want);
	return !strncmp(s, want, n) && (s[n] == '\0' || !strcmp(s + n, ".summary") ||
					(s[n] == '.' && !strchr(want, '.')));
}

static bool matches(json_t *o, const struct corral_audit_filter *f)
{
	return !f || (member_is(o, "sandbox", f->sandbox) &&
		      member_is(o, AUDIT_KEY_CALL, f->call) &&
		      type_matches(o, f->type));
}

/* "2024-05-01T12:34:56.789Z": day and HH:MM:SS.mmm. */
static void show_event(FILE *out, json_t *o, char day[11])
{
	const char *t = json_string_value(json_object_get(o, "time"));
	bool have_time = t && strlen(t) >= 23 && t[10] == 'T';

	if (have_time && strncmp(day, t, 10)) {
		memcpy(day, t, 10);
		day[10] = '\0';
		fputs("-- ", out);
		put_safe(out, day, 10);
		fputc('\n', out);
	}
	if (have_time)
		put_safe(out, t + 11, 12);
	else
		fputs("--:--:--.---", out);
	fputs("  ", out);
	put_column(out, o, "seq", 4);
	fputs("  ", out);
	put_column(out, o, "sandbox", 20);
	fputs("  ", out);
	put_column(out, o, AUDIT_KEY_CALL, 8);
	fputs("  ", out);
	put_column(out, o, "type", 14);
	fputs("  ", out);
	put_details(out, o);
}

int corral_audit_show(const char *path, const struct corral_audit_filter *f,
		      FILE *out, struct corral_err *err)
{
	struct line_reader lr;
	char day[11] = "";
	const char *line;
	size_t len;
	int ret;

	ret = reader_open(&lr, path, err);
	if (ret < 0)
		return ret;
	while ((ret = next_line(&lr, &line, &len)) > LINE_END) {
		json_t *o;

		if (ret == LINE_TOO_LONG) {
			fprintf(out, "-- line %zu: longer than %d bytes, skipped\n",
				lr.lineno, AUDIT_LINE_MAX);
			continue;
		}
		o = json_loadb(line, len, 0, NULL);
		if (json_is_object(o) && matches(o, f))
			show_event(out, o, day);
		else if (!json_is_object(o))
			fprintf(out, "-- line %zu: %s, skipped\n", lr.lineno,
				ret == LINE_PARTIAL ? "incomplete (a write cut short)" :
				"not a JSON object");
		json_decref(o);
	}
	reader_close(&lr);
	if (ret < 0)
		return corral_set_errno(err, -ret, "%s", path);
	if (fflush(out) == EOF || ferror(out))
		return corral_set_err(err, -EIO, "%s: cannot write the timeline",
				      path);
	return 0;
}
