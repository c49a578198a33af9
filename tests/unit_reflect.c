/*
 * unit_reflect.c - what comes back from a host secrets go to: the forms
 * of a value (secrets.c), found and masked in an answer's content
 * wherever its reads and its chunks split it (httpresp.c), and where
 * the answer may go on.  The proxy's loop (proxy.c's mask_relay) is
 * played here on byte strings, split at every point.
 */
#include "tls.h"
#include "httpresp.h"
#include "spell.h"
#include "unit.h"

#include <errno.h>
#include <nettle/base64.h>
#include <stdlib.h>
#include <string.h>

#define SECRET "real/secret+value"

static const char policy_text[] =
	"{\"network\": {\"mode\": \"proxy\", \"allow\": [\"api.test\", \"other.test\"]}, "
	"\"secrets\": [{\"name\": \"API_KEY\", \"from_env\": \"UNIT_REFLECT_SECRET\", "
	"\"hosts\": [\"api.test\"], \"header\": \"Authorization\"}]}";

/* The secrets of policy text, the one it names from env set to value. */
static struct secrets *secrets_of(struct corral_policy *p, const char *text,
				  const char *env, const char *value)
{
	struct corral_err err = { 0 };

	setenv(env, value, 1);
	corral_policy_init(p);
	CHECK(corral_policy_load_string(p, text, strlen(text), "unit", &err) == 0);
	return secrets_new(p, &err);
}

static struct secrets *secrets_for_test(struct corral_policy *p)
{
	return secrets_of(p, policy_text, "UNIT_REFLECT_SECRET", SECRET);
}

struct sim {
	char out[8192];
	size_t nout;
	char why[160];
	bool cut;
	size_t masked;
};

/*
 * The proxy's loop (mask_relay) around the library's step it calls,
 * secrets_mask_answer: the stream arrives in pieces (cut at each offset
 * of `at`, then the rest), each appended to what was held, fed, masked,
 * and what may go on moved to out; the end flushes.  An answer it cannot
 * read cuts the stream where that answer begins: the whole ones before
 * it go on, masked (mask_cut).
 */
static void play_sent(struct secrets_mask *m, const char *sent, const char *stream,
		      size_t len, const size_t *at, size_t nat, struct sim *s)
{
	struct httpresp r;
	char buf[8192];
	size_t held = 0, from = 0;

	memset(s, 0, sizeof(*s));
	httpresp_init(&r);
	/* the requests sent, in order: 'H' a HEAD, any other letter a GET */
	for (const char *k = sent; *k; k++)
		httpresp_sent(&r, *k == 'H');
	for (size_t i = 0; i <= nat; i++) {
		size_t to = i < nat ? at[i] : len, rel;
		ssize_t masked;

		memcpy(buf + held, stream + from, to - from);
		held += to - from;
		from = to;
		if (httpresp_feed(&r, buf, held) < 0) {
			s->cut = true;
			snprintf(s->why, sizeof(s->why), "%s", r.why);
			masked = secrets_mask_answer(m, &r, buf, r.start, true, &rel);
			s->masked += masked > 0 ? masked : 0;
			memcpy(s->out + s->nout, buf, rel);
			s->nout += rel;
			break;
		}
		masked = secrets_mask_answer(m, &r, buf, held, i == nat, &rel);
		s->masked += masked > 0 ? masked : 0;
		memcpy(s->out + s->nout, buf, rel);
		s->nout += rel;
		memmove(buf, buf + rel, held - rel);
		held -= rel;
		httpresp_release(&r, rel);
	}
	s->out[s->nout] = '\0';
	httpresp_free(&r);
}

/* play_sent after n GETs */
static void play(struct secrets_mask *m, int n, const char *stream, size_t len,
		 const size_t *at, size_t nat, struct sim *s)
{
	play_sent(m, n == 1 ? "G" : n == 2 ? "GG" : "GGGGGGGG", stream, len, at, nat, s);
}

static char *chunked(const char *body, size_t size)
{
	static char out[8192];
	size_t n = 0, len = strlen(body);

	n += sprintf(out, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
	for (size_t i = 0; i < len; i += size) {
		size_t k = len - i < size ? len - i : size;

		n += sprintf(out + n, "%zx\r\n%.*s\r\n", k, (int)k, body + i);
	}
	sprintf(out + n, "0\r\n\r\n");
	return out;
}

TEST(every_form_masked_at_every_split)
{
	struct corral_policy p;
	struct secrets *ss = secrets_for_test(&p);
	struct secrets_mask *m = ss ? secrets_mask_new(ss, "api.test", 443) : NULL;
	char basic[128], b64[128], body[512], resp[1024];
	const char *forms[4];
	struct sim s;

	CHECK(m != NULL);
	if (!m)
		return;
	base64_encode_raw(basic, strlen("agent:" SECRET), (const uint8_t *)"agent:" SECRET);
	basic[BASE64_ENCODE_RAW_LENGTH(strlen("agent:" SECRET))] = 0;
	base64_encode_raw(b64, strlen("xy:" SECRET), (const uint8_t *)"xy:" SECRET);
	b64[BASE64_ENCODE_RAW_LENGTH(strlen("xy:" SECRET))] = 0;
	forms[0] = SECRET;
	forms[1] = "real%2Fsecret%2Bvalue";
	forms[2] = basic;
	forms[3] = b64;
	for (size_t f = 0; f < 4; f++) {
		size_t blen = snprintf(body, sizeof(body), "key: %s; again %s.", forms[f], forms[f]);
		size_t rlen = snprintf(resp, sizeof(resp), "HTTP/1.1 200 OK\r\nContent-Length: "
				       "%zu\r\nX-Echo: %s\r\n\r\n%s", blen, forms[f], body);

		for (size_t cut = 1; cut < rlen; cut++) {
			play(m, 1, resp, rlen, &cut, 1, &s);
			CHECK(!s.cut && s.nout == rlen);
			if (strstr(s.out, SECRET) || strstr(s.out, "secret%2B") ||
			    strstr(s.out, basic + 8) || strstr(s.out, b64 + 4)) {
				fprintf(stderr, "  form %zu cut at %zu: %s\n", f, cut, s.out);
				CHECK(!"a form came through");
				break;
			}
			CHECK(s.masked == 3);
		}
	}
	/* chunked, 1 to 9 bytes a chunk, read in pieces of 1 to 13 */
	snprintf(body, sizeof(body), "invalid key: Bearer %s (try again)", SECRET);
	for (size_t size = 1; size < 10; size++) {
		const char *c = chunked(body, size);
		size_t len = strlen(c);

		for (size_t step = 1; step < 14; step++) {
			size_t at[1024], nat = 0;

			for (size_t k = step; k < len && nat < 1024; k += step)
				at[nat++] = k;
			play(m, 1, c, len, at, nat, &s);
			CHECK(!s.cut && s.nout == len);
			CHECK(s.masked == 1);
			/* the client's view: the chunks' data joined */
			char joined[512] = "";
			for (const char *q = strstr(s.out, "\r\n\r\n") + 4; *q;) {
				size_t k = strtoul(q, NULL, 16);

				q = strstr(q, "\r\n") + 2;
				strncat(joined, q, k);
				q += k + 2;
				if (!k)
					break;
			}
			if (strstr(joined, "real/") || !strstr(joined, "Bearer *****************")) {
				fprintf(stderr, "  chunk %zu step %zu: %s [%s]\n", size, step, joined, s.out);
				CHECK(!"chunked");
			}
		}
	}
	secrets_mask_free(m);
	secrets_free(ss);
	corral_policy_free(&p);
}

/* A value that holds what encoders escape, a space, é and U+1F600. */
#define ESC "a/b+c=d&e<f>g\"h i'\xc3\xa9\xf0\x9f\x98\x80"

static const char esc_policy_text[] =
	"{\"network\": {\"mode\": \"proxy\", \"allow\": [\"api.test\"]}, "
	"\"secrets\": [{\"name\": \"ESC\", \"from_env\": \"UNIT_REFLECT_ESC\", "
	"\"hosts\": [\"api.test\"], \"header\": \"Authorization\"}]}";

static struct secrets *esc_secrets(struct corral_policy *p)
{
	return secrets_of(p, esc_policy_text, "UNIT_REFLECT_ESC", ESC);
}

/* ESC as the encoders of servers that reflect a request write it */
static const char *const spellings[] = {
	/* PHP's json_encode */
	"a\\/b+c=d&e<f>g\\\"h i'\\u00e9\\ud83d\\ude00",
	/* .NET's System.Text.Json */
	"a/b\\u002Bc=d\\u0026e\\u003Cf\\u003Eg\\u0022h i\\u0027\\u00E9\\uD83D\\uDE00",
	/* Go's encoding/json */
	"a/b+c=d\\u0026e\\u003cf\\u003eg\\\"h i'\xc3\xa9\xf0\x9f\x98\x80",
	/* every character \u, as any encoder may */
	"\\u0061\\u002f\\u0062\\u002b\\u0063\\u003d\\u0064\\u0026\\u0065\\u003c\\u0066"
	"\\u003e\\u0067\\u0022\\u0068\\u0020\\u0069\\u0027\\u00e9\\ud83d\\ude00",
	/* JSON inside JSON */
	"a\\\\/b+c=d&e<f>g\\\\\\\"h i'\\\\u00e9\\\\ud83d\\\\ude00",
	/* Python's html.escape */
	"a/b+c=d&amp;e&lt;f&gt;g&quot;h i&#x27;\xc3\xa9\xf0\x9f\x98\x80",
	/* XML's decimal references */
	"a&#47;b&#43;c&#61;d&#38;e&#60;f&#62;g&#34;h&#32;i&#39;&#233;&#128512;",
	/* named, upper case, leading zeros */
	"a&sol;b&plus;c&equals;d&AMP;e&LT;f&GT;g&QUOT;h i&apos;&#x000E9;&#X1f600;",
	/* HTML escaped twice */
	"a/b+c=d&amp;amp;e&amp;lt;f&amp;gt;g&amp;quot;h i&amp;#x27;\xc3\xa9\xf0\x9f\x98\x80",
	/* HTML inside .NET's JSON */
	"a/b+c=d\\u0026amp;e\\u0026lt;f\\u0026gt;g\\u0026quot;h i\\u0026#x27;\xc3\xa9\xf0\x9f\x98\x80",
	/* percent, lower case */
	"a%2fb%2bc%3dd%26e%3cf%3eg%22h%20i%27%c3%a9%f0%9f%98%80",
	/* a query's form encoding */
	"a%2Fb%2Bc%3Dd%26e%3Cf%3Eg%22h+i%27%C3%A9%F0%9F%98%80",
	/* percent twice (a URL inside a redirect's Location) */
	"a%252Fb%252Bc%253Dd%2526e%253Cf%253Eg%2522h%2520i%2527%25C3%25A9%25F0%259F%2598%2580",
	/* JavaScript's \xHH (OWASP ESAPI), \u past U+00FF */
	"a\\x2Fb\\x2Bc\\x3Dd\\x26e\\x3Cf\\x3Eg\\x22h\\x20i\\x27\\xe9\\uD83D\\uDE00",
	/* a string of bytes escaped so (é and U+1F600 as their UTF-8) */
	"a/b+c=d&e<f>g\"h i'\\xc3\\xa9\\xF0\\x9f\\x98\\x80",
	/* CSS's escapes (CSS.escape, a serializer): hex, a space after */
	"\\61 \\2f \\62 \\2B \\63 \\3d \\64 \\26 \\65 \\3c \\66 \\3E \\67 \\22 \\68 \\20 "
	"\\69 \\27 \\e9 \\1F600 ",
	/* CSS's six digits, no space; one with CR LF after it, one a tab */
	"\\000061\\00002f\\000062\\00002b\\000063\\00003d\\000064\\000026\\000065"
	"\\00003c\\000066\\00003e\\000067\\000022\\000068\\000020\\000069\r\n\\000027"
	"\\0000e9\t\\01f600",
	/* octal (C, JavaScript's old strings, git's quoted paths): UTF-8 bytes */
	"a\\057b\\053c\\075d\\046e\\074f\\076g\\042h\\040i\\047\\303\\251\\360\\237\\230\\200",
	/* ES6's \u{H} */
	"\\u{61}\\u{2f}\\u{62}\\u{2B}\\u{63}\\u{3d}\\u{64}\\u{26}\\u{65}\\u{3c}\\u{66}"
	"\\u{3E}\\u{67}\\u{22}\\u{68}\\u{20}\\u{69}\\u{27}\\u{e9}\\u{0001f600}",
	/* a backslash before punctuation and space (Perl's quotemeta, a regex's) */
	"a\\/b\\+c\\=d\\&e\\<f\\>g\\\"h\\ i\\'\xc3\xa9\xf0\x9f\x98\x80",
	/* mixed: each character in its own escape */
	"a\\/b%2Bc&#61;d\\u0026e&lt;f%3eg\\\"h+i&#x27;%C3%A9\\ud83d\\ude00",
};

#define NSPELLINGS	(sizeof(spellings) / sizeof(spellings[0]))

/*
 * ESC in its longest spelling, a character at a time: what the mask holds
 * back at a write's end must be as long (spell_max()).
 */
static const char *longest(void)
{
	static const uint32_t cps[] = { 'a', '/', 'b', '+', 'c', '=', 'd', '&', 'e', '<',
					'f', '>', 'g', '"', 'h', ' ', 'i', '\'', 0xe9, 0x1f600 };
	static char out[1024];
	size_t n = 0;

	for (size_t i = 0; i < sizeof(cps) / sizeof(cps[0]); i++) {
		uint32_t c = cps[i];

		if (c > 0xffff)
			n += sprintf(out + n, "&#x0000005C;u%04X&#x0000005C;u%04X",
				     0xd800 + ((c - 0x10000) >> 10), 0xdc00 + ((c - 0x10000) & 0x3ff));
		else if (c == '/' || c == '"')
			n += sprintf(out + n, "&#x0000005C;&#x%08X;", c);
		else
			n += sprintf(out + n, "&#x00000026;#x%08X;", c);
	}
	return out;
}

static const char *spelling(size_t f)
{
	return f < NSPELLINGS ? spellings[f] : longest();
}

static void stars(char *out, const char *pre, size_t n, const char *post)
{
	size_t k = strlen(pre);

	memcpy(out, pre, k);
	memset(out + k, '*', n);
	strcpy(out + k + n, post);
}

/* Each spelling, raw in a body or across reads, is masked whole, in place. */
TEST(every_escaped_spelling_masked_at_every_split)
{
	struct corral_policy p;
	struct secrets *ss = esc_secrets(&p);
	struct secrets_mask *m = ss ? secrets_mask_new(ss, "api.test", 443) : NULL;
	char resp[1024], want[1024];
	struct sim s;

	CHECK(m != NULL);
	if (!m)
		return;
	for (size_t f = 0; f <= NSPELLINGS; f++) {
		size_t len = strlen(spelling(f)), head;
		size_t rlen = snprintf(resp, sizeof(resp), "HTTP/1.1 200 OK\r\nContent-Length: "
				       "%zu\r\n\r\n\"key\": \"%s\"", len + 9, spelling(f));

		head = rlen - len - 9;
		memcpy(want, resp, head);
		stars(want + head, "\"key\": \"", len, "\"");
		for (size_t cut = 1; cut < rlen; cut++) {
			play(m, 1, resp, rlen, &cut, 1, &s);
			if (s.cut || s.nout != rlen || strcmp(s.out, want) || s.masked != 1) {
				fprintf(stderr, "  spelling %zu cut at %zu: %s (%zu masked)\n", f, cut,
					s.out, s.masked);
				CHECK(!"a spelling came through");
				break;
			}
		}
	}
	secrets_mask_free(m);
	secrets_free(ss);
	corral_policy_free(&p);
}

/* In a chunked body, each spelling split across chunks and reads alike. */
TEST(escaped_spellings_masked_across_chunks)
{
	struct corral_policy p;
	struct secrets *ss = esc_secrets(&p);
	struct secrets_mask *m = ss ? secrets_mask_new(ss, "api.test", 443) : NULL;
	char body[1024];

	CHECK(m != NULL);
	if (!m)
		return;
	for (size_t f = 0; f <= NSPELLINGS; f++) {
		snprintf(body, sizeof(body), "<p>invalid key %s</p>", spelling(f));
		for (size_t size = 1; size < 8; size += 3) {
			const char *c = chunked(body, size);
			size_t len = strlen(c);

			for (size_t step = 1; step < 12; step += 5) {
				size_t at[2048], nat = 0;
				char joined[1024] = "";
				struct sim s;

				for (size_t k = step; k < len && nat < 2048; k += step)
					at[nat++] = k;
				play(m, 1, c, len, at, nat, &s);
				for (const char *q = strstr(s.out, "\r\n\r\n") + 4; *q;) {
					size_t k = strtoul(q, NULL, 16);

					q = strstr(q, "\r\n") + 2;
					strncat(joined, q, k);
					q += k + 2;
					if (!k)
						break;
				}
				if (s.cut || s.nout != len || s.masked != 1 ||
				    strlen(joined) != strlen(body) || strstr(joined, "/b") ||
				    strstr(joined, "i'") || strstr(joined, "2Fb")) {
					fprintf(stderr, "  spelling %zu chunk %zu step %zu: %s\n", f,
						size, step, joined);
					CHECK(!"chunked");
					break;
				}
			}
		}
	}
	secrets_mask_free(m);
	secrets_free(ss);
	corral_policy_free(&p);
}

/*
 * The user's side: the same escapes of a value that is not the secret
 * (its last character other, or cut short) pass byte for byte, nothing
 * held at their end; a spelling's start at the end is held.
 */
TEST(escaped_near_values_pass_unchanged)
{
	static const char *const near[] = {
		"a\\/b+c=d&e<f>g\\\"h i'\\u00e9\\ud83d\\ude01",
		"a&#47;b&#43;c&#61;d&#38;e&#60;f&#62;g&#34;h&#32;i&#39;&#233;",
		"a%2fb%2bc%3dd%26e%3cf%3eg%22h%20i%27%c3%a9%f0%9f%98%81",
		"a%252Fb%252Bc%253Dd%2526e%253Cf%253Eg%2522h%2520i%2527%25C3%25A9X",
		"\\u0061\\u002f\\u0062\\u002b\\u0063 &amp;&lt;&#47;%2F\\/\\u002B",
	};
	struct corral_policy p;
	struct secrets *ss = esc_secrets(&p);
	struct secrets_mask *m = ss ? secrets_mask_new(ss, "api.test", 443) : NULL;
	char body[512];

	CHECK(m != NULL);
	if (!m)
		return;
	for (size_t i = 0; i < sizeof(near) / sizeof(near[0]); i++) {
		size_t n = snprintf(body, sizeof(body), "x %s y", near[i]);

		CHECK(secrets_mask_apply(m, body, n) == 0);
		CHECK(!strncmp(body + 2, near[i], strlen(near[i])));
		CHECK(secrets_mask_partial(m, body, n) == 0);
	}
	/* a spelling's start, at the end of what came: held until the rest */
	snprintf(body, sizeof(body), "ok a\\/b%%2Bc&#6");
	CHECK(secrets_mask_partial(m, body, strlen(body)) == strlen(body) - 3);
	snprintf(body, sizeof(body), "ok a%%252Fb&amp;");
	CHECK(secrets_mask_partial(m, body, strlen(body)) == strlen(body) - 3);
	secrets_mask_free(m);
	secrets_free(ss);
	corral_policy_free(&p);
}

/* The request side sees the same spellings of the real value, across reads. */
TEST(escaped_value_in_a_request_refused)
{
	struct corral_policy p;
	struct secrets *ss = esc_secrets(&p);
	char why[256], *out = NULL, head[1024];
	size_t outlen;

	CHECK(ss != NULL);
	if (!ss)
		return;
	for (size_t f = 0; f <= NSPELLINGS; f++) {
		struct secrets_scan st = { 0 };
		size_t len = strlen(spelling(f));

		CHECK(secrets_scan(ss, &st, "{\"v\": \"", 7, why, sizeof(why)) == 0);
		CHECK(secrets_scan(ss, &st, spelling(f), len / 2, why, sizeof(why)) == 0);
		CHECK(secrets_scan(ss, &st, spelling(f) + len / 2, len - len / 2, why,
				   sizeof(why)) == -EACCES);
		secrets_scan_free(&st);
		snprintf(head, sizeof(head), "GET / HTTP/1.1\r\nHost: o\r\nX-A: %s\r\n\r\n",
			 spelling(f));
		CHECK(secrets_rewrite_head(ss, head, strlen(head), "other.test", 443, true, &out,
					   &outlen, why, sizeof(why)) == -EACCES);
		CHECK_STR_CONTAINS(why, "the value of secret ESC");
	}
	secrets_free(ss);
	corral_policy_free(&p);
}

/* An answer without a value is passed on byte for byte, and none held. */
TEST(answers_without_a_value_unchanged_and_not_held)
{
	struct corral_policy p;
	struct secrets *ss = secrets_for_test(&p);
	struct secrets_mask *m = ss ? secrets_mask_new(ss, "api.test", 443) : NULL;
	/* two answers kept alive, the first ending with a value's start */
	const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\ntail real"
			    "HTTP/1.1 204 No Content\r\n\r\n";
	const char head_resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n";
	struct httpresp r;
	struct sim s;
	size_t at = sizeof(resp) - 1;

	CHECK(m != NULL);
	if (!m)
		return;
	play(m, 2, resp, sizeof(resp) - 1, &at, 1, &s);
	CHECK(s.nout == sizeof(resp) - 1 && !memcmp(s.out, resp, s.nout) && !s.masked);
	/* the first alone: its end goes, though it is a value's start */
	httpresp_init(&r);
	httpresp_sent(&r, false);
	CHECK(httpresp_feed(&r, resp, 47) == 0);
	CHECK(httpresp_releasable(&r, 47, secrets_mask_partial(m, resp, 47)) == 47);
	httpresp_free(&r);
	/* the same bytes in a body still coming: the start is held */
	httpresp_init(&r);
	httpresp_sent(&r, false);
	CHECK(httpresp_feed(&r, resp, 46) == 0);
	CHECK(secrets_mask_partial(m, resp, 46) == 3);
	CHECK(httpresp_releasable(&r, 46, 3) == 43);
	httpresp_free(&r);
	/* a chunk of a stream goes on with its CRLF, the next not yet come */
	{
		static const char part[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
					   "6\r\nevent\n\r\n";

		httpresp_init(&r);
		httpresp_sent(&r, false);
		CHECK(httpresp_feed(&r, part, sizeof(part) - 1) == 0);
		CHECK(httpresp_releasable(&r, sizeof(part) - 1, 0) == sizeof(part) - 1);
		httpresp_free(&r);
	}
	/* a HEAD's answer has no body: the next answer follows its head */
	httpresp_init(&r);
	httpresp_sent(&r, true);
	CHECK(httpresp_feed(&r, head_resp, sizeof(head_resp) - 1) == 0);
	CHECK(r.start == sizeof(head_resp) - 1 && !r.in_head);
	httpresp_free(&r);
	/* a host no secret goes to: nothing to mask */
	errno = 0;
	CHECK(secrets_mask_new(ss, "other.test", 443) == NULL && errno == 0);
	CHECK(!secrets_bound(ss, "other.test", 443) && secrets_bound(ss, "api.test", 443));
	secrets_mask_free(m);
	secrets_free(ss);
	corral_policy_free(&p);
}

/* A body the proxy cannot read is refused at its head, before any of it goes. */
TEST(codings_refused_at_the_head)
{
	static const char *const bad[] = {
		"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 3\r\n\r\nabc",
		"HTTP/1.1 200 OK\r\ncontent-encoding: BR\r\nContent-Length: 3\r\n\r\nabc",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
		"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\n",
		"NOT HTTP AT ALL\r\n\r\n",
		/* past the 63 bytes of a value kept: not "identity" for that */
		"HTTP/1.1 200 OK\r\nContent-Encoding: identity                        "
		"                                    , gzip\r\nContent-Length: 3\r\n\r\nabc",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked                        "
		"                                     , gzip\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
		/* a piece, never asked for (secrets.c drops Range) */
		"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-2/9\r\n"
		"Content-Length: 3\r\n\r\nabc",
		/* a value the proxy does not name: not said as it came */
		"HTTP/1.1 200 OK\r\nContent-Encoding: " SECRET "\r\nContent-Length: 3\r\n\r\nabc",
	};
	static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Encoding: identity\r\n"
				 "Content-Length: 3\r\n\r\nabc";

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct httpresp r;
		size_t half = strlen(bad[i]) / 2;

		httpresp_init(&r);
		httpresp_sent(&r, false);
		/* the first half: nothing of the head may go */
		if (httpresp_feed(&r, bad[i], half) == 0)
			CHECK(httpresp_releasable(&r, half, 0) == 0);
		CHECK(httpresp_feed(&r, bad[i], strlen(bad[i])) < 0);
		CHECK(r.why[0] != '\0');
		CHECK(i == 4 || r.head_refused);
		CHECK(!strstr(r.why, SECRET) && !strstr(r.why, "identity  "));
		httpresp_free(&r);
	}
	{
		struct httpresp r;

		httpresp_init(&r);
		httpresp_sent(&r, false);
		CHECK(httpresp_feed(&r, ok, sizeof(ok) - 1) == 0 && !r.why[0]);
		httpresp_free(&r);
	}
}

/*
 * One read can hold a pipelined echo and, behind it, an answer the proxy
 * cannot read: the echo goes on, masked, and the rest is cut off.  Behind
 * a chunked echo too, and with the answer refused in its own chunks,
 * whose framing (cuts) lies past where the stream is cut.
 */
TEST(answers_before_an_unreadable_one_masked)
{
	struct corral_policy p;
	struct secrets *ss = secrets_for_test(&p);
	struct secrets_mask *m = ss ? secrets_mask_new(ss, "api.test", 443) : NULL;
	static const char *const after[] = {
		"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 3\r\n\r\nabc",
		"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n",
		"NOT HTTP AT ALL\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n"
		"4\r\ndefg\r\nzz\r\n",
	};
	char echo[256], stream[2048];
	struct sim s;

	CHECK(m != NULL);
	if (!m)
		return;
	for (size_t c = 0; c < 2; c++) {
		for (size_t i = 0; i < sizeof(after) / sizeof(after[0]); i++) {
			size_t elen, len;

			if (c == 0)
				elen = snprintf(echo, sizeof(echo), "HTTP/1.1 200 OK\r\nContent-Length: "
						"%zu\r\n\r\nBearer %s", strlen("Bearer " SECRET), SECRET);
			else
				elen = snprintf(echo, sizeof(echo), "%s", chunked("Bearer " SECRET, 5));
			len = snprintf(stream, sizeof(stream), "%s%s", echo, after[i]);
			/* at once (one read), and in two at every point */
			for (size_t cut = 0; cut < len; cut++) {
				play(m, 2, stream, len, &cut, cut ? 1 : 0, &s);
				/* the last's first chunks may go on, as a stream's do */
				if (!s.cut || (i == 3 ? s.nout < elen : s.nout != elen) ||
				    strstr(s.out, SECRET) ||
				    strstr(s.out, "secret+") || s.masked != 1) {
					fprintf(stderr, "  %s echo, answer %zu, cut at %zu: %s\n",
						c ? "chunked" : "whole", i, cut, s.out);
					CHECK(!"an echo before an unreadable answer");
					break;
				}
			}
		}
	}
	secrets_mask_free(m);
	secrets_free(ss);
	corral_policy_free(&p);
}

/*
 * resp played through the mask cut in two at every byte: false, said, at
 * the first cut where it was cut off, came out another length, showed the
 * value, was not masked once, or lost keep (NULL: nothing to keep).
 */
static bool masked_at_every_split(const char *resp, const char *keep, const char *what)
{
	struct corral_policy p;
	struct secrets *ss = secrets_for_test(&p);
	struct secrets_mask *m = ss ? secrets_mask_new(ss, "api.test", 443) : NULL;
	size_t len = strlen(resp);
	bool ok = m != NULL;
	struct sim s;

	for (size_t cut = 1; ok && cut < len; cut++) {
		play(m, 1, resp, len, &cut, 1, &s);
		if (s.cut || s.nout != len || strstr(s.out, SECRET) || s.masked != 1 ||
		    (keep && !strstr(s.out, keep))) {
			fprintf(stderr, "  %s, cut at %zu: %s\n", what, cut, s.out);
			ok = false;
		}
	}
	secrets_mask_free(m);
	secrets_free(ss);
	corral_policy_free(&p);
	return ok;
}

/*
 * A chunked answer's trailers are content: a value echoed there is masked
 * however the reads cut them, also while the trailers are not yet whole.
 * (The chunk's "!!!" begins no form: nothing is held for it.)
 */
TEST(trailers_masked_at_every_split)
{
	CHECK(masked_at_every_split("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
				    "3\r\n!!!\r\n0\r\nX-Echo: Bearer " SECRET "\r\nX-More: 1\r\n\r\n",
				    NULL, "a trailer's value"));
}

/*
 * A chunk's extension is framing, not content: a value a server wrote
 * there is masked in the bytes as they came, however the reads cut it,
 * and the chunks' data still joins as it did.
 */
TEST(chunk_extensions_masked_at_every_split)
{
	CHECK(masked_at_every_split("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
				    "3\r\n!!!\r\n3;e=\"" SECRET "\"\r\n!!!\r\n0\r\n\r\n",
				    "\r\n!!!\r\n0\r\n", "an extension's value"));
}

/* utf8 (valid) as UTF-16, big-endian or little, into out: its length */
static size_t utf16(const char *utf8, bool be, char *out)
{
	struct spell_unit u[256];
	size_t n = spell_units(utf8, strlen(utf8), u), k = 0;

	for (size_t i = 0; i < n; i++) {
		uint32_t c = u[i].cp, unit[2] = { c, 0 };
		size_t m = 1;

		if (c > 0xffff) {
			unit[0] = 0xd800 + ((c - 0x10000) >> 10);
			unit[1] = 0xdc00 + ((c - 0x10000) & 0x3ff);
			m = 2;
		}
		for (size_t j = 0; j < m; j++, k += 2) {
			out[k + !be] = (char)(unit[j] >> 8);
			out[k + be] = (char)(unit[j] & 0xff);
		}
	}
	return k;
}

/*
 * A JSON file with v in it saved as UTF-16 (a BOM, then two bytes a
 * unit), big-endian or little, through m at every split: masked whole,
 * however the reads cut it (a unit's two bytes too).
 */
static bool utf16_masked(struct secrets_mask *m, const char *v, bool be)
{
	char body[512], value[256], resp[1024];
	size_t nv = utf16(v, be, value), nb = 2, len;
	struct sim s;

	memcpy(body, be ? "\xfe\xff" : "\xff\xfe", 2);
	nb += utf16("{\"key\": \"", be, body + nb);
	memcpy(body + nb, value, nv);
	nb += nv;
	nb += utf16("\"}\n", be, body + nb);
	len = snprintf(resp, sizeof(resp), "HTTP/1.1 200 OK\r\nContent-Type: application/json; "
		       "charset=utf-16\r\nContent-Length: %zu\r\n\r\n", nb);
	memcpy(resp + len, body, nb);
	len += nb;
	for (size_t cut = 0; cut < len; cut++) {
		play(m, 1, resp, len, &cut, cut ? 1 : 0, &s);
		if (s.cut || s.nout != len || s.masked != 1 || memmem(s.out, s.nout, value, nv) ||
		    memmem(s.out, s.nout, value + 2, nv - 4) ||
		    memcmp(s.out + len - nb, body, 2 + 17) ||
		    memcmp(s.out + len - 5, body + nb - 5, 5)) {
			fprintf(stderr, "  UTF-16%s, cut at %zu: %zu masked\n", be ? "BE" : "LE",
				cut, s.masked);
			return false;
		}
	}
	return true;
}

/* a value of ASCII (one form for both orders) and one past U+00FF (two) */
TEST(utf16_answers_masked_at_every_split)
{
	struct corral_policy p, q;
	struct secrets *ss = secrets_for_test(&p), *es = esc_secrets(&q);
	struct secrets_mask *m = ss ? secrets_mask_new(ss, "api.test", 443) : NULL;
	struct secrets_mask *e = es ? secrets_mask_new(es, "api.test", 443) : NULL;

	CHECK(m && e);
	for (int be = 0; m && e && be < 2; be++) {
		CHECK(utf16_masked(m, SECRET, be));
		CHECK(utf16_masked(e, ESC, be));
	}
	secrets_mask_free(m);
	secrets_mask_free(e);
	secrets_free(ss);
	secrets_free(es);
	corral_policy_free(&p);
	corral_policy_free(&q);
}

/*
 * An answer a server framed wrong, played after the requests `sent`: the
 * bytes it sends beyond it frame, as an attacker wrote them in an echo, a
 * message that ends inside the value ("Bearer re").  At once and cut in
 * two at every byte: only `first` (the answer framed right) goes on, then
 * the stream is cut off; the value's first bytes never.
 */
static bool misframed_cut(const char *sent, const char *first, const char *what)
{
	struct corral_policy p;
	struct secrets *ss = secrets_for_test(&p);
	struct secrets_mask *m = ss ? secrets_mask_new(ss, "api.test", 443) : NULL;
	char stream[1024];
	size_t len = snprintf(stream, sizeof(stream), "%sHTTP/1.1 200 OK\r\nContent-Length: 9"
			      "\r\n\r\nBearer re" "al/secret+value\"}", first);
	bool ok = m != NULL;
	struct sim s;

	for (size_t cut = 0; ok && cut < len; cut++) {
		play_sent(m, sent, stream, len, &cut, cut ? 1 : 0, &s);
		if (!s.cut || s.nout != strlen(first) || strncmp(s.out, first, s.nout) ||
		    strstr(s.out, "Bearer r")) {
			fprintf(stderr, "  %s, cut at %zu (%s): %s\n", what, cut, s.why, s.out);
			ok = false;
		}
	}
	secrets_mask_free(m);
	secrets_free(ss);
	corral_policy_free(&p);
	return ok;
}

/*
 * A HEAD answered with a body (a do_HEAD = do_GET handler), a 204 or a 304
 * with one (Python's http.server writes what it is given): the body looks
 * like the next answer's bytes, and one request behind it (pipelined) had
 * taken them for its answer, released whole at its Content-Length's end,
 * inside the value.  Nothing after an answer with no body is read.
 */
TEST(bytes_after_a_bodiless_answer_cut_off)
{
	CHECK(misframed_cut("HG", "HTTP/1.1 200 OK\r\nContent-Length: 60\r\n\r\n",
			    "a HEAD's answer with a body"));
	CHECK(misframed_cut("GG", "HTTP/1.1 204 No Content\r\n\r\n", "a 204 with a body"));
	CHECK(misframed_cut("GG", "HTTP/1.1 304 Not Modified\r\nContent-Length: 60\r\n\r\n",
			    "a 304 with a body"));
	/* a 100 Continue is no answer: the one after it is read */
	CHECK(masked_at_every_split("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"
				    "Content-Length: 26\r\n\r\n"
				    "Bearer " SECRET "\r\n", "\r\n", "an answer after 100 Continue"));
}

/*
 * A server whose Content-Length is short of what it sends (a length in
 * characters, UTF-8 written): what follows is an answer to no request,
 * which it would frame as the attacker wrote it.  Cut off.
 */
TEST(an_answer_to_no_request_cut_off)
{
	CHECK(misframed_cut("G", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n\"\xc3\xa9\xc3\xa9",
			    "bytes past a Content-Length"));
}

/*
 * A streaming echo's first write ends with `echo`; the second, later, with
 * what follows: the guesses counted (secrets_mask_take_guesses), played
 * with the read cut between the two writes.
 */
static size_t guesses_of(struct secrets_mask *m, const char *echo, const char *next)
{
	char stream[512];
	size_t len, at;
	struct sim s;

	at = snprintf(stream, sizeof(stream), "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
		      "%zx\r\n%s\r\n", strlen(echo), echo);
	len = at + snprintf(stream + at, sizeof(stream) - at, "%zx\r\n%s\r\n0\r\n\r\n",
			    strlen(next), next);
	play(m, 1, stream, len, &at, 1, &s);
	CHECK(!s.cut && s.nout == len);
	return secrets_mask_take_guesses(m);
}

/*
 * The echo's first part only, then its connection ends (the agent closed
 * it once the guess was held): the hold still counts.
 */
static size_t abandoned_guesses_of(struct secrets_mask *m, const char *echo)
{
	char stream[512];
	struct httpresp r;
	size_t len, rel;

	len = snprintf(stream, sizeof(stream), "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked"
		       "\r\n\r\n%zx\r\n%s\r\n", strlen(echo), echo);
	httpresp_init(&r);
	httpresp_sent(&r, false);
	CHECK(httpresp_feed(&r, stream, len) == 0);
	secrets_mask_answer(m, &r, stream, len, false, &rel);
	httpresp_free(&r);
	secrets_mask_abandon(m);
	return secrets_mask_take_guesses(m);
}

/*
 * A hold of a value's first 8 bytes or more that went on unmasked told
 * the agent its guess was right (the hold's delay): counted, once.  A
 * shorter one, a value that came whole, an echo of no value's start: not.
 */
TEST(holds_that_went_no_further_counted)
{
	struct corral_policy p;
	struct secrets *ss = secrets_for_test(&p);
	struct secrets_mask *m = ss ? secrets_mask_new(ss, "api.test", 443) : NULL;

	CHECK(m != NULL);
	if (!m)
		return;
	CHECK(guesses_of(m, "k=real/secr", "!") == 1);
	CHECK(guesses_of(m, "k=real%2Fsecret", "%2B!") == 1);
	CHECK(guesses_of(m, "k=real/sec", "!") == 1);
	CHECK(guesses_of(m, "k=real/se", "!") == 0);
	CHECK(guesses_of(m, "k=real/secr", "et+value!") == 0);
	CHECK(guesses_of(m, "k=nothing", "!") == 0);
	CHECK(abandoned_guesses_of(m, "k=real/secr") == 1);
	CHECK(abandoned_guesses_of(m, "k=real/se") == 0);
	CHECK(abandoned_guesses_of(m, "k=nothing") == 0);
	secrets_mask_free(m);
	secrets_free(ss);
	corral_policy_free(&p);
}

/* The real value, in any form, in a request body: refused, also across reads. */
TEST(value_in_a_request_refused)
{
	struct corral_policy p;
	struct secrets *ss = secrets_for_test(&p);
	struct secrets_scan st = { 0 };
	char why[256], *out = NULL, basic[128];
	size_t outlen;
	char head[256];

	CHECK(ss != NULL);
	if (!ss)
		return;
	CHECK(secrets_scan(ss, &st, "x=real/sec", 10, why, sizeof(why)) == 0);
	CHECK(secrets_scan(ss, &st, "ret+value&y", 11, why, sizeof(why)) == -EACCES);
	CHECK_STR_CONTAINS(why, "the value of secret API_KEY in a request body");
	CHECK(!strstr(why, SECRET));
	secrets_scan_free(&st);
	base64_encode_raw(basic, strlen("u:" SECRET), (const uint8_t *)"u:" SECRET);
	basic[BASE64_ENCODE_RAW_LENGTH(strlen("u:" SECRET))] = 0;
	snprintf(head, sizeof(head), "GET / HTTP/1.1\r\nHost: other.test\r\nX-A: Basic %s\r\n\r\n",
		 basic);
	CHECK(secrets_rewrite_head(ss, head, strlen(head), "other.test", 443, true, &out,
				   &outlen, why, sizeof(why)) == -EACCES);
	CHECK_STR_CONTAINS(why, "the value of secret API_KEY in the head");
	snprintf(head, sizeof(head), "GET /?v=real%%2fsecret%%2bvalue HTTP/1.1\r\nHost: o\r\n\r\n");
	CHECK(secrets_rewrite_head(ss, head, strlen(head), "other.test", 443, true, &out,
				   &outlen, why, sizeof(why)) == -EACCES);
	/* a TRACE never carries one; a GET asks for an answer as it is */
	snprintf(head, sizeof(head), "TRACE / HTTP/1.1\r\nHost: api.test\r\nAuthorization: %s\r\n\r\n",
		 secrets_placeholder(ss, 0));
	CHECK(secrets_rewrite_head(ss, head, strlen(head), "api.test", 443, true, &out,
				   &outlen, why, sizeof(why)) == -EACCES);
	CHECK_STR_CONTAINS(why, "TRACE");
	snprintf(head, sizeof(head), "GET / HTTP/1.1\r\nHost: api.test\r\nAccept-Encoding: gzip, br\r\n"
		 "Authorization: %s\r\n\r\n", secrets_placeholder(ss, 0));
	CHECK(secrets_rewrite_head(ss, head, strlen(head), "api.test", 443, true, &out,
				   &outlen, why, sizeof(why)) == 0);
	CHECK(out && memmem(out, outlen, "Accept-Encoding: identity\r\n\r\n", 29) &&
	      !memmem(out, outlen, "gzip", 4));
	free(out);
	/* nor a piece of one: its answer comes whole, to be masked whole */
	snprintf(head, sizeof(head), "GET / HTTP/1.1\r\nHost: api.test\r\nrange: bytes=9-12\r\n"
		 "If-Range: \"e\"\r\nRanger: kept\r\nRequest-Range: bytes=1-2\r\n"
		 "Authorization: %s\r\n\r\n",
		 secrets_placeholder(ss, 0));
	CHECK(secrets_rewrite_head(ss, head, strlen(head), "api.test", 443, true, &out,
				   &outlen, why, sizeof(why)) == 0);
	CHECK(out && !memmem(out, outlen, "bytes=", 6) && !memmem(out, outlen, "If-Range", 8) &&
	      memmem(out, outlen, "Ranger: kept\r\n", 14));
	free(out);
	/* a host no secret goes to: asked for as the client asked */
	CHECK(secrets_rewrite_head(ss, head, strlen(head), "other.test", 443, true, &out,
				   &outlen, why, sizeof(why)) == -EACCES);
	snprintf(head, sizeof(head), "GET / HTTP/1.1\r\nHost: other.test\r\nRange: bytes=9-12\r\n\r\n");
	CHECK(secrets_rewrite_head(ss, head, strlen(head), "other.test", 443, true, &out,
				   &outlen, why, sizeof(why)) == 0);
	CHECK(out && memmem(out, outlen, "Range: bytes=9-12\r\n", 19));
	free(out);
	secrets_free(ss);
	corral_policy_free(&p);
}

int main(void)
{
	unit_run_all();
	UNIT_DONE();
}
