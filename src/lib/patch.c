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

static bool pb_write(struct patch_buf *pb, const char *s, size_t n)
{
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

bool patch_path_ok(const char *path)
{
	const char *p = path;

	/* git's verify_path: no ".git" component, in any case (NTFS, HFS) */
	while (*p) {
		size_t n = strcspn(p, "/");

		if (n >= 4 && !strncasecmp(p, ".git", 4) &&
		    strspn(p + 4, ". ") >= n - 4)
			return false;
		if (n == 5 && !strncasecmp(p, "git~1", 5))
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

/* ---- text ------------------------------------------------------------- */

struct lines {
	const char **start;
	size_t *len;		/* with the newline, if it has one */
	uint32_t *id;
	size_t n;
};

static int split_lines(const char *data, size_t len, struct lines *l)
{
	size_t n = 0, cap = 0;

	*l = (struct lines){ 0 };
	for (size_t i = 0; i < len;) {
		const char *nl = memchr(data + i, '\n', len - i);
		size_t ll = nl ? (size_t)(nl - (data + i)) + 1 : len - i;

		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			const char **s = realloc(l->start, cap * sizeof(*s));
			size_t *z = s ? realloc(l->len, cap * sizeof(*z)) : NULL;

			if (s)
				l->start = s;
			if (!s || !z)
				return -ENOMEM;
			l->len = z;
		}
		l->start[n] = data + i;
		l->len[n] = ll;
		n++;
		i += ll;
	}
	l->n = n;
	l->id = calloc(n + 1, sizeof(uint32_t));
	return l->id ? 0 : -ENOMEM;
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

/* The same id for equal lines of both files: an open-addressing table. */
static int number_lines(struct lines *a, struct lines *b)
{
	size_t cap = 16, total = a->n + b->n;
	struct slot { const char *s; size_t len; uint32_t id; } *t;
	uint32_t next = 1;

	while (cap < total * 2)
		cap *= 2;
	t = calloc(cap, sizeof(*t));
	if (!t)
		return -ENOMEM;
	for (int side = 0; side < 2; side++) {
		struct lines *l = side ? b : a;

		for (size_t i = 0; i < l->n; i++) {
			size_t h = hash_line(l->start[i], l->len[i]) & (cap - 1);

			while (t[h].s && (t[h].len != l->len[i] ||
					  memcmp(t[h].s, l->start[i], l->len[i])))
				h = (h + 1) & (cap - 1);
			if (!t[h].s)
				t[h] = (struct slot){ l->start[i], l->len[i], next++ };
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
	size_t i, j;		/* a's and b's line before the op */
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

		ops[n++] = (struct op){ t, i, j };
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
	if (old && new && oldmode == newmode && !strcmp(oid, nid))
		return 0;

	pb_add(pb, "diff --git ", 11);
	put_name(pb, "a/", path);
	pb_add(pb, " ", 1);
	put_name(pb, "b/", path);
	pb_add(pb, "\n", 1);
	if (!old)
		pb_printf(pb, "new file mode %06o\n", newmode);
	else if (!new)
		pb_printf(pb, "deleted file mode %06o\n", oldmode);
	else if (oldmode != newmode)
		pb_printf(pb, "old mode %06o\nnew mode %06o\n", oldmode, newmode);
	if (old && new && !strcmp(oid, nid))
		return pb->failed ? -ENOMEM : 0;	/* a mode change only */
	pb_printf(pb, "index %s..%s", oid, nid);
	if (old && new && oldmode == newmode)
		pb_printf(pb, " %06o", oldmode);
	pb_add(pb, "\n", 1);

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
