/*
 * patch.c - one file's change as git writes it (git-diff(1), "generating
 * patch text with -p"), so that `git apply` takes it: extended headers for
 * new, deleted and mode-changed files, unified hunks with three lines of
 * context for text, and for binary content a "GIT binary patch" (zlib
 * deflate, then git's base85 in lines of at most 52 bytes, as
 * diff.c:emit_binary_diff_body writes it), which git apply only takes with
 * full blob ids on the index line.
 */
#include "export.h"

#include <errno.h>
#include <nettle/sha1.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define CONTEXT 3
#define NULL_ID "0000000000000000000000000000000000000000"

/* The caller's stop said so: the sink takes no more. */
static bool pb_stopped(struct patch_buf *pb)
{
	if (pb->stop && !pb->stopped && (pb->stopped = pb->stop(pb->stop_arg)))
		pb->failed = true;
	return pb->stopped;
}

static bool pb_write(struct patch_buf *pb, const char *s, size_t n)
{
	if (pb_stopped(pb))
		return false;
	while (n) {
		ssize_t w = write(pb->fd, s, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			pb->werr = w < 0 ? errno : EIO;
			pb->failed = true;
			return false;
		}
		s += w;
		n -= (size_t)w;
		pb->flushed += (uint64_t)w;
	}
	return true;
}

bool pb_flush(struct patch_buf *pb)
{
	if (pb->failed)
		return false;
	if (!pb->sink || !pb->len)
		return true;
	if (!pb_write(pb, pb->data, pb->len))
		return false;
	pb->len = 0;
	return true;
}

void pb_add(struct patch_buf *pb, const char *s, size_t n)
{
	if (pb->failed)
		return;
	/* a sink holds at most PB_FLUSH: a longer piece goes out as it is */
	if (pb->sink && pb->len + n > PB_FLUSH) {
		if (!pb_flush(pb))
			return;
		if (n >= PB_FLUSH) {
			pb_write(pb, s, n);
			return;
		}
	}
	if (pb->len + n + 1 > pb->cap) {
		size_t cap = pb->cap ? pb->cap : 4096;
		char *d;

		while (cap < pb->len + n + 1)
			cap *= 2;
		d = realloc(pb->data, cap);
		if (!d) {
			pb->failed = true;
			return;
		}
		pb->data = d;
		pb->cap = cap;
	}
	memcpy(pb->data + pb->len, s, n);
	pb->len += n;
	pb->data[pb->len] = '\0';
}

void pb_printf(struct patch_buf *pb, const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0) {
		pb->failed = true;
		return;
	}
	pb_add(pb, s, n);
	free(s);
}

void git_blob_id(const char *data, size_t len, char hex[41])
{
	unsigned char md[SHA1_DIGEST_SIZE];
	char hdr[32];
	int n = snprintf(hdr, sizeof(hdr), "blob %zu", len) + 1;	/* with its NUL */
	struct sha1_ctx ctx;

	sha1_init(&ctx);
	sha1_update(&ctx, n, (const uint8_t *)hdr);
	sha1_update(&ctx, len, (const uint8_t *)data);
	sha1_digest(&ctx, sizeof(md), md);
	for (unsigned int i = 0; i < sizeof(md); i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	hex[40] = '\0';
}

bool git_dir_alias(const char *name, size_t n)
{
	/* git's verify_path: ".git" in any case (NTFS, HFS), trailing dots and spaces (NTFS), its 8.3 name */
	return (n >= 4 && !strncasecmp(name, ".git", 4) && strspn(name + 4, ". ") >= n - 4) ||
	       (n == 5 && !strncasecmp(name, "git~1", 5));
}

bool patch_path_ok(const char *path)
{
	const char *p = path;

	/* no ".git" component, in any spelling a filesystem takes for it */
	while (*p) {
		size_t n = strcspn(p, "/");

		if (git_dir_alias(p, n))
			return false;
		p += n;
		p += *p == '/';
	}
	return true;
}

/* "a/path" as git writes it: quoted C-style when it must be. */
static void put_name(struct patch_buf *pb, const char *prefix, const char *path)
{
	const unsigned char *s = (const unsigned char *)path;
	bool quote = false;

	for (; *s; s++)
		if (*s < 0x20 || *s >= 0x7f || *s == '"' || *s == '\\')
			quote = true;
	if (!quote) {
		pb_printf(pb, "%s%s", prefix, path);
		return;
	}
	pb_printf(pb, "\"%s", prefix);
	for (s = (const unsigned char *)path; *s; s++) {
		static const char esc[] = "\a\b\t\n\v\f\r";
		const char *e = *s ? strchr(esc, *s) : NULL;

		if (*s == '"' || *s == '\\')
			pb_printf(pb, "\\%c", *s);
		else if (e)
			pb_printf(pb, "\\%c", "abtnvfr"[e - esc]);
		else if (*s < 0x20 || *s >= 0x7f)
			pb_printf(pb, "\\%03o", *s);
		else
			pb_add(pb, (const char *)s, 1);
	}
	pb_add(pb, "\"", 1);
}

/* git's heuristic (xdiff-interface.c): a NUL in the first 8000 bytes. */
static bool is_binary(const char *data, size_t len)
{
	return data && memchr(data, '\0', len < 8000 ? len : 8000);
}

/* ---- binary ------------------------------------------------------------ */

static const char b85[] =
	"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	"!#$%&()*+-;<=>?@^_`{|}~";

static void put_base85(struct patch_buf *pb, const unsigned char *d, size_t n)
{
	while (n) {
		size_t line = n > 52 ? 52 : n;
		char out[80];
		size_t o = 0;

		out[o++] = line <= 26 ? 'A' + line - 1 : 'a' + line - 27;
		for (size_t i = 0; i < line; i += 4) {
			uint32_t acc = 0;

			for (size_t j = 0; j < 4; j++)
				acc = (acc << 8) | (i + j < line ? d[i + j] : 0);
			for (int j = 4; j >= 0; j--) {
				out[o + j] = b85[acc % 85];
				acc /= 85;
			}
			o += 5;
		}
		out[o++] = '\n';
		pb_add(pb, out, o);
		d += line;
		n -= line;
	}
}

static int put_literal(struct patch_buf *pb, const char *data, size_t len)
{
	uLongf zlen = compressBound(len);
	unsigned char *z = malloc(zlen);

	if (!z)
		return -ENOMEM;
	if (compress2(z, &zlen, (const Bytef *)(data ? data : ""), len,
		      Z_BEST_COMPRESSION) != Z_OK) {
		free(z);
		return -EIO;
	}
	pb_printf(pb, "literal %zu\n", len);
	put_base85(pb, z, zlen);
	pb_add(pb, "\n", 1);
	free(z);
	return 0;
}

/* ---- a side read a slice at a time ------------------------------------ */

/*
 * len bytes of s from off into buf: from memory, or pread from its fd.
 * A file that shrank under us (the sandbox may still write) is -ESTALE:
 * its blob id and literal would not agree.
 */
static int src_read(const struct patch_src *s, uint64_t off, unsigned char *buf, size_t len)
{
	size_t got = 0;

	if (s->data) {
		memcpy(buf, s->data + off, len);
		return 0;
	}
	while (got < len) {
		ssize_t n = pread(s->fd, buf + got, len - got, (off_t)(off + got));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ESTALE;
		got += (size_t)n;
	}
	return 0;
}

/* git_blob_id of a side, a slice at a time (a 1 GiB one takes seconds). */
static int src_blob_id(struct patch_buf *pb, const struct patch_src *s,
		       unsigned char *buf, char hex[41])
{
	unsigned char md[SHA1_DIGEST_SIZE];
	char hdr[32];
	int n = snprintf(hdr, sizeof(hdr), "blob %llu", (unsigned long long)s->len) + 1;
	struct sha1_ctx ctx;

	sha1_init(&ctx);
	sha1_update(&ctx, n, (const uint8_t *)hdr);
	for (uint64_t off = 0; off < s->len;) {
		size_t len = s->len - off < PATCH_SLICE ? (size_t)(s->len - off) : PATCH_SLICE;
		int r = pb_stopped(pb) ? -EINTR : src_read(s, off, buf, len);

		if (r < 0)
			return r;
		sha1_update(&ctx, len, buf);
		off += len;
	}
	sha1_digest(&ctx, sizeof(md), md);
	for (unsigned int i = 0; i < sizeof(md); i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	hex[40] = '\0';
	return 0;
}

struct patch_stream {
	z_stream z;		/* deflateReset between literals: as made anew */
	unsigned char in[PATCH_SLICE];
};

void pb_done(struct patch_buf *pb)
{
	if (!pb->zs)
		return;
	deflateEnd(&pb->zs->z);
	free(pb->zs);
	pb->zs = NULL;
}

/*
 * The slice and zlib's state, made once for a whole patch: a file at a
 * time they would be 700 KB each, which ASan's quarantine keeps.
 */
static struct patch_stream *pb_stream(struct patch_buf *pb)
{
	if (pb->zs)
		return pb->zs;
	pb->zs = calloc(1, sizeof(*pb->zs));
	if (pb->zs && deflateInit(&pb->zs->z, Z_BEST_COMPRESSION) != Z_OK) {
		free(pb->zs);
		pb->zs = NULL;
	}
	return pb->zs;
}

/*
 * put_literal of a side without holding it: deflated a slice at a time
 * (zlib's output does not depend on how its input is sliced, so the
 * bytes are compress2's), base85 lines cut at every 52 bytes of the
 * stream, as put_base85 cuts the whole.
 */
static int put_literal_src(struct patch_buf *pb, const struct patch_src *s, unsigned char *in)
{
	unsigned char out[52 * 1024];
	size_t held = 0;
	uint64_t off = 0;
	z_stream *zp = &pb->zs->z;
	int zr = Z_OK, r = 0;

	if (deflateReset(zp) != Z_OK)
		return -EIO;
	pb_printf(pb, "literal %llu\n", (unsigned long long)s->len);
	/* a sink that failed (a write, or the caller's stop) takes no more */
	while (zr != Z_STREAM_END && r == 0 && !pb->failed) {
		int flush = Z_NO_FLUSH;

		if (zp->avail_in == 0 && off < s->len) {
			size_t len = s->len - off < PATCH_SLICE ? (size_t)(s->len - off) :
				     PATCH_SLICE;

			r = src_read(s, off, in, len);
			if (r < 0)
				break;
			zp->next_in = in;
			zp->avail_in = (uInt)len;
			off += len;
		}
		if (off >= s->len)
			flush = Z_FINISH;
		zp->next_out = out + held;
		zp->avail_out = (uInt)(sizeof(out) - held);
		zr = deflate(zp, flush);
		if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR) {
			r = -EIO;
			break;
		}
		held = sizeof(out) - zp->avail_out;
		/* whole lines out; a short one only at the stream's end */
		if (zr == Z_STREAM_END || held == sizeof(out)) {
			size_t whole = zr == Z_STREAM_END ? held : held / 52 * 52;

			put_base85(pb, out, whole);
			memmove(out, out + whole, held - whole);
			held -= whole;
		}
	}
	if (r == 0)
		pb_add(pb, "\n", 1);
	return r;
}

/* ---- text ------------------------------------------------------------- */

struct lines {
	const char **start;
	size_t *len;		/* with the newline, if it has one */
	uint32_t *id;
	size_t n;
};

static size_t lines_of(const char *data, size_t len);

/* Each line's start and length, sized once: at most PATCH_TEXT_LINES. */
static int split_lines(const char *data, size_t len, struct lines *l)
{
	size_t n = lines_of(data, len), k = 0;

	*l = (struct lines){ 0 };
	l->start = malloc((n + 1) * sizeof(*l->start));
	l->len = malloc((n + 1) * sizeof(*l->len));
	l->id = calloc(n + 1, sizeof(uint32_t));
	if (!l->start || !l->len || !l->id)
		return -ENOMEM;
	for (size_t i = 0; i < len; k++) {
		const char *nl = memchr(data + i, '\n', len - i);
		size_t ll = nl ? (size_t)(nl - (data + i)) + 1 : len - i;

		l->start[k] = data + i;
		l->len[k] = ll;
		i += ll;
	}
	l->n = k;
	return 0;
}

static void lines_free(struct lines *l)
{
	free(l->start);
	free(l->len);
	free(l->id);
}

static uint64_t hash_line(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ULL;	/* FNV-1a */

	while (n--)
		h = (h ^ (unsigned char)*s++) * 1099511628211ULL;
	return h;
}

/*
 * The same id for equal lines of both files: an open-addressing table of
 * 8 bytes a slot (a line's side and index, its id), at most half full.
 */
static int number_lines(struct lines *a, struct lines *b)
{
	size_t cap = 16, total = a->n + b->n;
	struct slot { uint32_t ref, id; } *t;	/* ref: side << 31 | index */
	uint32_t next = 1;

	while (cap < total * 2)
		cap *= 2;
	t = calloc(cap, sizeof(*t));
	if (!t)
		return -ENOMEM;
	for (uint32_t side = 0; side < 2; side++) {
		struct lines *l = side ? b : a;

		for (size_t i = 0; i < l->n; i++) {
			size_t h = hash_line(l->start[i], l->len[i]) & (cap - 1);

			while (t[h].id) {
				const struct lines *o = t[h].ref >> 31 ? b : a;
				size_t k = t[h].ref & 0x7fffffffu;

				if (o->len[k] == l->len[i] &&
				    !memcmp(o->start[k], l->start[i], l->len[i]))
					break;
				h = (h + 1) & (cap - 1);
			}
			if (!t[h].id)
				t[h] = (struct slot){ side << 31 | (uint32_t)i, next++ };
			l->id[i] = t[h].id;
		}
	}
	free(t);
	return 0;
}

static void put_line(struct patch_buf *pb, char sign, const char *s, size_t n)
{
	pb_add(pb, &sign, 1);
	pb_add(pb, s, n);
	if (!n || s[n - 1] != '\n')
		pb_add(pb, "\n\\ No newline at end of file\n", 29);
}

/* "-start,count" as git prints it: ",1" left out, start 0-based when empty */
static void put_range(struct patch_buf *pb, char sign, size_t start, size_t count)
{
	pb_printf(pb, "%c%zu", sign, count ? start + 1 : start);
	if (count != 1)
		pb_printf(pb, ",%zu", count);
}

struct op {
	char t;			/* '=' both, '-' a's line goes, '+' b's comes */
	uint32_t i, j;		/* a's and b's line before the op (< PATCH_TEXT_LINES) */
};

/*
 * Hunks from the edit script: each run of changes with CONTEXT equal
 * lines around it; two runs closer than 2 * CONTEXT share one hunk.
 * Deletions come before insertions, as git writes them.
 */
static int put_hunks(struct patch_buf *pb, const struct lines *a,
		     const struct lines *b, const bool *del, const bool *ins)
{
	struct op *ops = malloc((a->n + b->n + 1) * sizeof(*ops));
	size_t n = 0, i = 0, j = 0, k = 0, done = 0;

	if (!ops)
		return -ENOMEM;
	while (i < a->n || j < b->n) {
		char t = i < a->n && del[i] ? '-' : j < b->n && ins[j] ? '+' : '=';

		ops[n++] = (struct op){ t, (uint32_t)i, (uint32_t)j };
		i += t != '+';
		j += t != '-';
	}
	while (k < n) {
		size_t start = k, end = k, eq, stop, ac = 0, bc = 0;

		if (ops[k].t == '=') {
			k++;
			continue;
		}
		while (start > done && k - start < CONTEXT && ops[start - 1].t == '=')
			start--;
		for (;;) {
			while (end < n && ops[end].t != '=')
				end++;
			eq = end;
			while (eq < n && ops[eq].t == '=')
				eq++;
			if (eq < n && eq - end <= 2 * CONTEXT) {
				end = eq;
				continue;
			}
			break;
		}
		stop = end + CONTEXT < eq ? end + CONTEXT : eq;
		for (size_t x = start; x < stop; x++) {
			ac += ops[x].t != '+';
			bc += ops[x].t != '-';
		}
		pb_add(pb, "@@ ", 3);
		put_range(pb, '-', ops[start].i, ac);
		pb_add(pb, " ", 1);
		put_range(pb, '+', ops[start].j, bc);
		pb_add(pb, " @@\n", 4);
		for (size_t x = start; x < stop; x++) {
			if (ops[x].t == '+')
				put_line(pb, '+', b->start[ops[x].j], b->len[ops[x].j]);
			else
				put_line(pb, ops[x].t == '-' ? '-' : ' ',
					 a->start[ops[x].i], a->len[ops[x].i]);
		}
		k = done = stop;
	}
	free(ops);
	return 0;
}

/* The lines split_lines would find (a last one without its newline too). */
static size_t lines_of(const char *data, size_t len)
{
	size_t n = 0;

	for (const char *p = data, *end = data + len; p && p < end; n++) {
		p = memchr(p, '\n', (size_t)(end - p));
		p = p ? p + 1 : end;
	}
	return n;
}

static int put_text(struct patch_buf *pb, const char *old, size_t oldlen,
		    const char *new, size_t newlen)
{
	struct lines a, b;
	bool *del = NULL, *ins = NULL;
	int r;

	r = split_lines(old ? old : "", old ? oldlen : 0, &a);
	if (r == 0)
		r = split_lines(new ? new : "", new ? newlen : 0, &b);
	else
		b = (struct lines){ 0 };
	if (r == 0)
		r = number_lines(&a, &b);
	if (r == 0) {
		del = calloc(a.n + 1, sizeof(bool));
		ins = calloc(b.n + 1, sizeof(bool));
		r = del && ins ? linediff(a.id, a.n, b.id, b.n, del, ins) : -ENOMEM;
	}
	if (r == 0)
		r = put_hunks(pb, &a, &b, del, ins);
	free(del);
	free(ins);
	lines_free(&a);
	lines_free(&b);
	return r;
}

/*
 * The header up to the body: 1 if nothing follows (the same bytes, a mode
 * change only), 0 if the body does.
 */
static int put_header(struct patch_buf *pb, const char *path, bool had,
		      unsigned int oldmode, const char *oid, bool has,
		      unsigned int newmode, const char *nid)
{
	if (had && has && oldmode == newmode && !strcmp(oid, nid))
		return 1;
	pb_add(pb, "diff --git ", 11);
	put_name(pb, "a/", path);
	pb_add(pb, " ", 1);
	put_name(pb, "b/", path);
	pb_add(pb, "\n", 1);
	if (!had)
		pb_printf(pb, "new file mode %06o\n", newmode);
	else if (!has)
		pb_printf(pb, "deleted file mode %06o\n", oldmode);
	else if (oldmode != newmode)
		pb_printf(pb, "old mode %06o\nnew mode %06o\n", oldmode, newmode);
	if (had && has && !strcmp(oid, nid))
		return 1;	/* a mode change only */
	pb_printf(pb, "index %s..%s", oid, nid);
	if (had && has && oldmode == newmode)
		pb_printf(pb, " %06o", oldmode);
	pb_add(pb, "\n", 1);
	return 0;
}

int patch_file(struct patch_buf *pb, const char *path,
	       const char *old, size_t oldlen, unsigned int oldmode,
	       const char *new, size_t newlen, unsigned int newmode)
{
	char oid[41], nid[41];
	bool binary = is_binary(old, oldlen) || is_binary(new, newlen);
	int r = 0;

	if (old)
		git_blob_id(old, oldlen, oid);
	else
		memcpy(oid, NULL_ID, 41);
	if (new)
		git_blob_id(new, newlen, nid);
	else
		memcpy(nid, NULL_ID, 41);
	if (put_header(pb, path, old, oldmode, oid, new, newmode, nid))
		return pb->failed ? -ENOMEM : 0;
	/* past PATCH_TEXT_LINES a text's line diff costs too much: binary */
	if (!binary && lines_of(old, oldlen) + lines_of(new, newlen) > PATCH_TEXT_LINES)
		binary = true;

	if (binary) {
		pb_add(pb, "GIT binary patch\n", 17);
		r = put_literal(pb, new, new ? newlen : 0);
		if (r == 0)
			r = put_literal(pb, old, old ? oldlen : 0);
	} else if ((old && oldlen) || (new && newlen)) {
		pb_add(pb, "--- ", 4);
		if (old)
			put_name(pb, "a/", path);
		else
			pb_add(pb, "/dev/null", 9);
		pb_add(pb, "\n+++ ", 5);
		if (new)
			put_name(pb, "b/", path);
		else
			pb_add(pb, "/dev/null", 9);
		pb_add(pb, "\n", 1);
		r = put_text(pb, old, oldlen, new, newlen);
	}
	if (r == 0 && pb->failed)
		r = -ENOMEM;
	return r;
}

int patch_file_src(struct patch_buf *pb, const char *path,
		   const struct patch_src *old, unsigned int oldmode,
		   const struct patch_src *new, unsigned int newmode)
{
	char oid[41] = NULL_ID, nid[41] = NULL_ID;
	struct patch_stream *zs = pb_stream(pb);
	unsigned char *buf = zs ? zs->in : NULL;
	int r = zs ? 0 : -ENOMEM;

	if (r == 0 && old)
		r = src_blob_id(pb, old, buf, oid);
	if (r == 0 && new)
		r = src_blob_id(pb, new, buf, nid);
	if (r == 0 && !put_header(pb, path, old, oldmode, oid, new, newmode, nid)) {
		static const struct patch_src none = { .data = "", .fd = -1 };

		pb_add(pb, "GIT binary patch\n", 17);
		r = put_literal_src(pb, new ? new : &none, buf);
		if (r == 0)
			r = put_literal_src(pb, old ? old : &none, buf);
	}
	if (r == 0 && pb->failed)
		r = -ENOMEM;
	return r;
}
