/*
 * unit_audit.c - the hash chain of the events file: written by events.c,
 * checked by corral_audit_verify(), shown by corral_audit_show().  Every edit, deletion
 * and reordering must break the chain at the line it touched or the next.
 */
#include "internal.h"
#include "audit.h"
#include "events.h"
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NLINES 8
#define ZEROS "0000000000000000000000000000000000000000000000000000000000000000"

static char dir[] = "/tmp/corral-unit-audit.XXXXXX";
static char path[64];

/* ---- helpers ------------------------------------------------------------ */

static char *slurp(const char *p, size_t *len)
{
	struct stat st;
	char *buf;
	int fd = open(p, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st) < 0)
		return NULL;
	buf = malloc(st.st_size + 1);
	if (buf && read(fd, buf, st.st_size) != st.st_size) {
		free(buf);
		buf = NULL;
	}
	if (buf)
		buf[st.st_size] = '\0';
	*len = st.st_size;
	close(fd);
	return buf;
}

static void spill(const char *p, const char *buf, size_t len)
{
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	CHECK(fd >= 0);
	CHECK(write(fd, buf, len) == (ssize_t)len);
	close(fd);
}

/* Start of line n (from 1) in buf, and its length without the '\n'. */
static size_t line_at(const char *buf, size_t n, size_t *len)
{
	size_t off = 0;

	for (size_t i = 1; i < n; i++)
		off += strcspn(buf + off, "\n") + 1;
	*len = strcspn(buf + off, "\n");
	return off;
}

/* A fresh log of n events from the writer itself. */
static void write_log(const char *p, int n)
{
	struct corral_err err = { 0 };
	struct events *ev;

	unlink(p);
	CHECK(events_open(&ev, p, "sb-1", &err) == 0);
	for (int i = 0; i < n; i++)
		events_emit(ev, i % 2 ? "egress.denied" : "exec.start",
			    json_pack("{s:s, s:s, s:i, s:s}", "call", "c1",
				      "host", "evil.test", "port", 80 + i,
				      "reason", "not in the allowlist"));
	events_close(ev);
}

static struct corral_audit_report verify(const char *p)
{
	struct corral_err err = { 0 };
	struct corral_audit_report r;

	memset(&r, 0x5a, sizeof(r));
	CHECK(corral_audit_verify(p, &r, &err) == 0);
	return r;
}

/* ---- the writer ------------------------------------------------------------ */

TEST(chain_of_n_lines_verifies)
{
	struct corral_audit_report r;
	char *buf, hash[AUDIT_HASH_HEX + 1], want[128];
	size_t len, off, n, prev_off = 0, prev_n = 0;

	write_log(path, NLINES);
	r = verify(path);
	CHECK(r.bad_line == 0);
	CHECK(r.lines == NLINES);
	CHECK(!r.incomplete);
	CHECK_STR_CONTAINS(r.reason, "8 lines verified");
	buf = slurp(path, &len);
	CHECK(buf != NULL);
	if (!buf)
		return;
	for (size_t i = 1; i <= NLINES; i++) {
		off = line_at(buf, i, &n);
		/* the old layout up front, "prev" last */
		CHECK(!strncmp(buf + off, "{\"seq\":", 7));
		CHECK_STR_CONTAINS(buf + off, "\"sandbox\":\"sb-1\",\"type\":\"");
		if (i == 1)
			strcpy(hash, ZEROS);
		else
			CHECK(audit_hash(buf + prev_off, prev_n, hash) == 0);
		snprintf(want, sizeof(want), ",\"prev\":\"%s\"}", hash);
		CHECK(n > strlen(want) && !strncmp(buf + off + n - strlen(want),
						   want, strlen(want)));
		prev_off = off;
		prev_n = n;
	}
	CHECK(audit_hash(buf + prev_off, prev_n, hash) == 0);
	CHECK(!strcmp(r.head, hash));
	free(buf);
}

/* utc_stamp is gmtime's date and time, across eras and leap days */
TEST(utc_stamp_is_gmtime)
{
	static const long long at[] = {
		0, -1, 86399, 86400, 951782400 /* 2000-02-29 */, 951868800,
		4107542400LL /* 2100-03-01 */, -2208988800LL /* 1900-01-01 */,
		1796074762, 253402300799LL /* 9999-12-31T23:59:59 */,
		-62135596800LL /* 0001-01-01 */,
	};
	char mine[64], want[64];
	struct timespec ts;
	struct tm tm;

	for (size_t i = 0; i < sizeof(at) / sizeof(at[0]) + 2000; i++) {
		ts.tv_sec = i < sizeof(at) / sizeof(at[0]) ? (time_t)at[i] :
			(time_t)((long long)(i * 2654435761u) * 997 % 8000000000LL - 2000000000LL);
		ts.tv_nsec = (long)(i * 7919 % 1000000000);
		CHECK(gmtime_r(&ts.tv_sec, &tm));
		snprintf(want, sizeof(want), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ",
			 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
			 tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
		utc_stamp(mine, sizeof(mine), &ts);
		if (strcmp(mine, want))
			fprintf(stderr, "  %lld: %s, gmtime %s\n", (long long)ts.tv_sec, mine, want);
		CHECK(!strcmp(mine, want));
	}
}

TEST(sha256_is_sha256)
{
	char hex[AUDIT_HASH_HEX + 1];

	CHECK(audit_hash("abc", 3, hex) == 0);
	CHECK(!strcmp(hex, "ba7816bf8f01cfea414140de5dae2223"
			   "b00361a396177a9cb410ff61f20015ad"));
	CHECK(audit_hash("", 0, hex) == 0);
	CHECK(!strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb924"
			   "27ae41e4649b934ca495991b7852b855"));
}

TEST(chain_continues_across_opens)
{
	struct corral_err err = { 0 };
	struct corral_audit_report r;
	struct events *ev;

	unlink(path);
	for (int round = 0; round < 3; round++) {
		CHECK(events_open(&ev, path, round ? "sb-2" : "sb-1", &err) == 0);
		events_emit(ev, "exec.start", NULL);
		events_emit(ev, "exec.end", json_pack("{s:s}", "reason", "done"));
		events_close(ev);
		r = verify(path);
		CHECK(r.bad_line == 0);
		CHECK(r.lines == (size_t)(round + 1) * 2);
	}
}

TEST(denials_in_the_result_carry_no_prev)
{
	struct corral_err err = { 0 };
	struct events *ev;
	json_t *d;

	write_log(path, 0);
	CHECK(events_open(&ev, path, "sb-1", &err) == 0);
	events_keep_denials(ev, EVENTS_DENIALS_KEPT);	/* as corral run asks */
	events_emit(ev, "egress.denied", json_pack("{s:s}", "host", "a.test"));
	d = events_denials(ev);
	CHECK(json_array_size(d) == 1);
	CHECK(json_object_get(json_array_get(d, 0), "prev") == NULL);
	json_decref(d);
	events_close(ev);
}

/*
 * A line reads as jansson writes the object (compact, ASCII), "prev" last
 * and once, whether or not the event brought a field of that name.
 */
TEST(lines_are_compact_dumps_with_prev_last)
{
	struct corral_err err = { 0 };
	struct events *ev;
	char *buf, *line, *save = NULL;
	size_t len, n = 0;

	write_log(path, 0);
	CHECK(events_open(&ev, path, "sb-1", &err) == 0);
	events_emit(ev, "egress.allowed", json_pack("{s:s, s:i, s:s}", "host", "caf\xc3\xa9.test",
						     "port", 443, "reason", "q\"uote"));
	events_emit(ev, "exec.start", json_pack("{s:s}", "prev", "forged"));
	events_close(ev);
	buf = slurp(path, &len);
	CHECK(buf != NULL);
	for (line = buf ? strtok_r(buf, "\n", &save) : NULL; line; line = strtok_r(NULL, "\n", &save)) {
		json_t *o = json_loads(line, JSON_DISABLE_EOF_CHECK, NULL);
		char *again = o ? json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
		const char *last = NULL;
		const char *key;
		json_t *v;

		CHECK(again && !strcmp(again, line));
		json_object_foreach(o, key, v)
			last = key;
		CHECK(last && !strcmp(last, "prev"));
		CHECK(strlen(json_string_value(json_object_get(o, "prev"))) == AUDIT_HASH_HEX);
		free(again);
		json_decref(o);
		n++;
	}
	CHECK(n == 2);
	free(buf);
}

TEST(not_a_regular_file_and_memory_only)
{
	struct corral_err err = { 0 };
	struct events *ev;

	CHECK(events_open(&ev, "/dev/null", "sb-1", &err) == 0);
	events_emit(ev, "exec.start", NULL);
	events_close(ev);
	CHECK(events_open(&ev, NULL, "sb-1", &err) == 0);
	events_emit(ev, "egress.denied", NULL);
	CHECK(events_count_denied(ev) == 1);
	events_close(ev);
}

static void every_hook(void *arg, const char *type, json_t *event)
{
	(void)type;
	(void)event;
	(*(int *)arg)++;
}

/*
 * Memory only and no hook, an allowed connection's events are counted,
 * not made: the seq of what is made next (a denial, kept for the result)
 * is what it would have been.  A hook still sees every event.
 */
TEST(unseen_events_are_counted_not_made)
{
	struct corral_err err = { 0 };
	struct events *ev;
	int seen = 0;
	json_t *d;

	for (int hooked = 0; hooked < 2; hooked++) {
		CHECK(events_open(&ev, NULL, "sb-1", &err) == 0);
		events_keep_denials(ev, EVENTS_DENIALS_KEPT);	/* as corral run asks */
		if (hooked)
			events_set_hook(ev, every_hook, &seen);
		for (int i = 0; i < 3; i++) {
			events_emit(ev, "egress.allowed", json_pack("{s:s, s:i}", "host",
								    "a.test", "port", 80));
			events_emit(ev, "egress.closed", json_pack("{s:s, s:i}", "host",
								   "a.test", "port", 80));
		}
		events_emit(ev, "egress.denied", json_pack("{s:s, s:i}", "host", "b.test",
							   "port", 80));
		d = events_denials(ev);
		CHECK(json_array_size(d) == 1);
		CHECK(json_integer_value(json_object_get(json_array_get(d, 0), "seq")) == 7);
		json_decref(d);
		events_close(ev);
	}
	CHECK(seen == 7);
}

TEST(unreadable_events_path_is_an_error)
{
	struct corral_err err = { 0 };
	struct events *ev = (struct events *)1;
	char p[128];

	snprintf(p, sizeof(p), "%s/no/such/dir/log", dir);
	CHECK(events_open(&ev, p, "sb-1", &err) == -ENOENT);
	CHECK(ev == NULL);
	CHECK_STR_CONTAINS(err.msg, p);
}

/* ---- tampering ------------------------------------------------------------- */

TEST(one_byte_edit_in_any_line_breaks_the_chain)
{
	struct corral_audit_report r, orig;
	char *buf, *copy;
	size_t len, off, n;

	write_log(path, NLINES);
	orig = verify(path);
	buf = slurp(path, &len);
	copy = malloc(len);
	CHECK(buf && copy);
	if (!buf || !copy)
		goto out;
	for (size_t i = 1; i <= NLINES; i++) {
		off = line_at(buf, i, &n);
		for (size_t b = 0; b < n; b++) {
			memcpy(copy, buf, len);
			copy[off + b] ^= 0x01;
			spill(path, copy, len);
			r = verify(path);
			if (i < NLINES) {
				/* at the line itself or, if it still parses, the next */
				if (r.bad_line != i && r.bad_line != i + 1)
					fprintf(stderr, "  line %zu byte %zu: bad_line "
						"%zu\n", i, b, r.bad_line);
				CHECK(r.bad_line == i || r.bad_line == i + 1);
			} else if (b >= n - 2 - AUDIT_HASH_HEX && b < n - 2) {
				CHECK(r.bad_line == NLINES);	/* its prev */
			} else {
				/*
				 * The last line is covered by nothing after
				 * it: an edit that keeps it JSON verifies, and
				 * only the head shows it (see audit.h).
				 */
				CHECK(r.bad_line == NLINES ||
				      (r.bad_line == 0 && strcmp(r.head, orig.head)));
			}
		}
	}
	/* the message names both lines */
	memcpy(copy, buf, len);
	off = line_at(buf, 3, &n);
	copy[off + 17] ^= 0x01;	/* a digit of the time: still JSON */
	spill(path, copy, len);
	r = verify(path);
	CHECK(r.bad_line == 4);
	CHECK_STR_CONTAINS(r.reason, "line 4: prev does not match the hash of "
			   "line 3 (edited, deleted or reordered)");
out:
	free(copy);
	free(buf);
}

TEST(deleted_line_breaks_the_chain)
{
	struct corral_audit_report r, orig;
	char *buf, *copy;
	size_t len, off, n;

	write_log(path, NLINES);
	orig = verify(path);
	buf = slurp(path, &len);
	copy = malloc(len);
	CHECK(buf && copy);
	if (!buf || !copy)
		goto out;
	for (size_t i = 1; i <= NLINES; i++) {
		off = line_at(buf, i, &n);
		memcpy(copy, buf, off);
		memcpy(copy + off, buf + off + n + 1, len - off - n - 1);
		spill(path, copy, len - n - 1);
		r = verify(path);
		if (i < NLINES) {
			CHECK(r.bad_line == i);
		} else {
			/* cut off the end: only the head tells */
			CHECK(r.bad_line == 0 && r.lines == NLINES - 1);
			CHECK(strcmp(r.head, orig.head) != 0);
		}
	}
	off = line_at(buf, 2, &n);
	spill(path, buf + off, len - off);	/* the first line gone */
	r = verify(path);
	CHECK(r.bad_line == 1);
	CHECK_STR_CONTAINS(r.reason, "line 1: prev is not 64 zeros");
out:
	free(copy);
	free(buf);
}

TEST(swapped_lines_break_the_chain)
{
	struct corral_audit_report r;
	char *buf, *copy;
	size_t len, a, na, b, nb;

	write_log(path, NLINES);
	buf = slurp(path, &len);
	copy = malloc(len);
	CHECK(buf && copy);
	if (!buf || !copy)
		goto out;
	for (size_t i = 1; i < NLINES; i++) {
		a = line_at(buf, i, &na);
		b = line_at(buf, i + 1, &nb);
		memcpy(copy, buf, len);
		memcpy(copy + a, buf + b, nb);
		copy[a + nb] = '\n';
		memcpy(copy + a + nb + 1, buf + a, na);
		spill(path, copy, len);
		r = verify(path);
		CHECK(r.bad_line == i);
	}
out:
	free(copy);
	free(buf);
}

/* ---- a write cut short ------------------------------------------------------ */

TEST(truncated_last_line_verifies_up_to_the_last_complete_line)
{
	struct corral_audit_report r;
	char *buf;
	size_t len;

	write_log(path, NLINES);
	buf = slurp(path, &len);
	CHECK(buf != NULL);
	if (!buf)
		return;
	spill(path, buf, len - 20);	/* the newline and the end of "prev" */
	r = verify(path);
	CHECK(r.bad_line == 0);
	CHECK(r.incomplete);
	CHECK(r.lines == NLINES - 1);
	CHECK_STR_CONTAINS(r.reason, "verified up to line 7, the last complete "
			   "line; line 8 has no newline");
	spill(path, buf, len - 1);	/* only the newline gone */
	r = verify(path);
	CHECK(r.bad_line == 0 && r.incomplete && r.lines == NLINES - 1);
	free(buf);
}

TEST(writer_goes_on_after_a_torn_line)
{
	struct corral_err err = { 0 };
	struct corral_audit_report r;
	struct events *ev;
	char *buf, hash[AUDIT_HASH_HEX + 1];
	size_t len, off, n;

	write_log(path, 3);
	buf = slurp(path, &len);
	CHECK(buf != NULL);
	if (!buf)
		return;
	spill(path, buf, len - 30);
	free(buf);
	CHECK(events_open(&ev, path, "sb-2", &err) == 0);
	events_emit(ev, "exec.start", NULL);
	events_emit(ev, "exec.end", NULL);
	events_close(ev);

	buf = slurp(path, &len);
	CHECK(buf != NULL);
	if (!buf)
		return;
	/* the torn bytes became line 3; line 4 starts on a line of its own */
	off = line_at(buf, 3, &n);
	CHECK(audit_hash(buf + off, n, hash) == 0);
	off = line_at(buf, 4, &n);
	CHECK(!strncmp(buf + off, "{\"seq\":1,", 9));
	CHECK_STR_CONTAINS(buf + off, hash);
	free(buf);
	/* a crash, not an edit: the chain holds across the torn bytes */
	r = verify(path);
	CHECK(r.bad_line == 0);
	CHECK(r.torn == 1 && r.torn_line == 3);
	CHECK(r.lines == 4);
	CHECK_STR_CONTAINS(r.reason, "4 lines verified; 1 line cut short by a "
			   "crash (the first: line 3)");
}

/* ---- what is not a chained line ---------------------------------------------- */

TEST(garbage_lines)
{
	static const struct {
		const char *line;
		const char *why;
	} cases[] = {
		{ "hello", "not valid JSON" },
		{ "", "not valid JSON" },
		{ "[1,2]", "not a JSON object" },
		{ "{\"seq\":1}", "no \"prev\" string" },
		{ "{\"prev\":7}", "no \"prev\" string" },
		{ "{\"prev\":\"" ZEROS "\",\"prev\":\"" ZEROS "\"}", "not valid JSON" },
		{ "{\"prev\":\"abc\"}", "not a SHA-256" },
		{ "{\"prev\":\"" "0000000000000000000000000000000000000000000000000000"
		  "00000000000A\"}", "not a SHA-256" },
		{ "{\"prev\":\"" ZEROS "\"} x", "not valid JSON" },
	};
	char text[512];
	struct corral_audit_report r;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		/* as the first line, and after a good one */
		snprintf(text, sizeof(text), "%s\n", cases[i].line);
		spill(path, text, strlen(text));
		r = verify(path);
		CHECK(r.bad_line == 1);
		CHECK_STR_CONTAINS(r.reason, cases[i].why);
		snprintf(text, sizeof(text), "{\"prev\":\"%s\"}\n%s\n", ZEROS,
			 cases[i].line);
		spill(path, text, strlen(text));
		r = verify(path);
		CHECK(r.bad_line == 2);
		CHECK_STR_CONTAINS(r.reason, cases[i].why);
	}
	/* a hand-made chain in the same format verifies: no hidden rules */
	{
		char h[AUDIT_HASH_HEX + 1];
		const char *l1 = "{\"prev\":\"" ZEROS "\"}";

		CHECK(audit_hash(l1, strlen(l1), h) == 0);
		snprintf(text, sizeof(text), "%s\n{\"x\":1,\"prev\":\"%s\"}\n", l1, h);
		spill(path, text, strlen(text));
		r = verify(path);
		CHECK(r.bad_line == 0 && r.lines == 2);
	}
}

TEST(empty_file_verifies_with_no_lines)
{
	struct corral_audit_report r;

	spill(path, "", 0);
	r = verify(path);
	CHECK(r.bad_line == 0 && r.lines == 0 && !r.incomplete);
	CHECK(!strcmp(r.head, ZEROS));
	CHECK_STR_CONTAINS(r.reason, "0 lines verified");
}

TEST(missing_file_is_an_error_not_a_verdict)
{
	struct corral_err err = { 0 };
	struct corral_audit_report r;
	char p[128];

	snprintf(p, sizeof(p), "%s/nonexistent", dir);
	CHECK(corral_audit_verify(p, &r, &err) == -ENOENT);
	CHECK_STR_CONTAINS(err.msg, p);
	CHECK(corral_audit_show(p, NULL, stdout, &err) == -ENOENT);
}

/* A first line of exactly len bytes: {"prev":"0...0","pad":"xxx..."} */
static void write_big_line(int fd, size_t len)
{
	static const char head[] = "{\"prev\":\"" ZEROS "\",\"pad\":\"";
	char *buf = malloc(len + 1);

	CHECK(buf != NULL);
	if (!buf)
		return;
	memcpy(buf, head, strlen(head));
	memset(buf + strlen(head), 'x', len - strlen(head) - 2);
	memcpy(buf + len - 2, "\"}", 2);
	buf[len] = '\n';
	CHECK(write(fd, buf, len + 1) == (ssize_t)len + 1);
	free(buf);
}

TEST(huge_line)
{
	struct corral_err err = { 0 };
	struct corral_audit_report r;
	struct events *ev;
	char *out = NULL;
	size_t outlen = 0;
	FILE *mem;
	int fd;

	/* exactly the limit is fine, and the chain goes on from it */
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	write_big_line(fd, AUDIT_LINE_MAX);
	close(fd);
	CHECK(events_open(&ev, path, "sb-1", &err) == 0);
	events_emit(ev, "exec.start", NULL);
	events_close(ev);
	r = verify(path);
	CHECK(r.bad_line == 0 && r.lines == 2);

	/* one byte more is a bad line */
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	write_big_line(fd, AUDIT_LINE_MAX + 1);
	close(fd);
	r = verify(path);
	CHECK(r.bad_line == 1);
	CHECK_STR_CONTAINS(r.reason, "line 1: longer than 1048576 bytes");

	/* 3 MiB after a good line; show skips it and goes on */
	write_log(path, 1);
	fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
	write_big_line(fd, 3 * AUDIT_LINE_MAX);
	close(fd);
	CHECK(events_open(&ev, path, "sb-9", &err) == 0);
	events_emit(ev, "exec.end", NULL);
	events_close(ev);
	r = verify(path);
	CHECK(r.bad_line == 2);
	mem = open_memstream(&out, &outlen);
	CHECK(corral_audit_show(path, NULL, mem, &err) == 0);
	fclose(mem);
	CHECK_STR_CONTAINS(out, "-- line 2: longer than 1048576 bytes, skipped");
	CHECK_STR_CONTAINS(out, "sb-9");
	free(out);
}

/* ---- show ------------------------------------------------------------------- */

static char *show(const struct corral_audit_filter *f)
{
	struct corral_err err = { 0 };
	char *out = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&out, &len);

	CHECK(mem != NULL);
	if (!mem)
		return NULL;
	CHECK(corral_audit_show(path, f, mem, &err) == 0);
	fclose(mem);
	return out;
}

static size_t count_lines(const char *s, const char *needle)
{
	size_t n = 0;

	for (const char *p = s; p && (p = strstr(p, needle)); p++)
		n++;
	return n;
}

/* ---- repeats and the budget ---------------------------------------------- */

static void count_hook(void *arg, const char *type, json_t *event)
{
	(void)event;
	if (!strcmp(type, "syscall.denied") || !strcmp(type, "egress.denied"))
		(*(size_t *)arg)++;
}

/* Lines of type in the file at p, and the sum of their "count" fields. */
static size_t lines_of(const char *p, const char *type, json_int_t *count)
{
	char *buf, *line, *save = NULL;
	size_t len, n = 0;

	*count = 0;
	buf = slurp(p, &len);
	if (!buf)
		return 0;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		json_t *o = json_loads(line, 0, NULL);

		if (!strcmp(json_string_value(json_object_get(o, "type")) ?: "", type)) {
			n++;
			*count += json_integer_value(json_object_get(o, "count"));
		}
		json_decref(o);
	}
	free(buf);
	return n;
}

static json_t *mount_denied(void)
{
	return json_pack("{s:s, s:i, s:s}", "syscall", "mount", "pid", 42,
			 "reason", "mount denied (EPERM)");
}

TEST(repeats_are_summarised_and_all_counted)
{
	struct corral_event_limits lim = { 1 << 20, 3, 60000 };
	struct corral_err err = { 0 };
	struct corral_audit_report r;
	struct events *ev;
	size_t seen = 0;
	json_int_t counted;

	write_log(path, 0);
	CHECK(events_open(&ev, path, "sb-1", &err) == 0);
	events_set_limits(ev, &lim);
	events_set_hook(ev, count_hook, &seen);
	for (int i = 0; i < 1000; i++)
		events_emit(ev, "syscall.denied", mount_denied());
	events_emit(ev, "syscall.denied", json_pack("{s:s}", "syscall", "ptrace"));
	/* the hook (the abort criteria) saw every one */
	CHECK(seen == 1001);
	CHECK(events_count_denied(ev) == 1001);
	/* the call's end: what was counted is written before it */
	events_emit(ev, "exec.end", NULL);
	events_close(ev);
	CHECK(lines_of(path, "syscall.denied", &counted) == 4);
	CHECK(lines_of(path, "syscall.denied.summary", &counted) == 1);
	CHECK(counted == 997);
	r = verify(path);
	CHECK(r.bad_line == 0 && r.lines == 6);
}

TEST(one_summary_per_interval)
{
	struct corral_event_limits lim = { 1 << 20, 0, 100 };
	struct corral_err err = { 0 };
	struct events *ev;
	json_int_t counted;

	write_log(path, 0);
	CHECK(events_open(&ev, path, "sb-1", &err) == 0);
	events_set_limits(ev, &lim);
	for (int i = 0; i < 5; i++)
		events_emit(ev, "syscall.denied", mount_denied());
	CHECK(lines_of(path, "syscall.denied.summary", &counted) == 0);
	usleep(150 * 1000);	/* past the interval: the next event brings the summary */
	events_emit(ev, "syscall.denied", mount_denied());
	CHECK(lines_of(path, "syscall.denied.summary", &counted) == 1);
	CHECK(counted == 5);
	events_close(ev);
	CHECK(lines_of(path, "syscall.denied.summary", &counted) == 2);
	CHECK(counted == 6);
	CHECK(lines_of(path, "syscall.denied", &counted) == 0);
}

/* A sweep of made-up names: bounded kinds, bounded bytes, exact counts. */
TEST(budget_bounds_the_log)
{
	struct corral_event_limits lim = { 16 << 10, 1000000, 60000 };
	struct corral_err err = { 0 };
	struct corral_audit_report r;
	struct events *ev;
	struct stat st;
	json_int_t counted, dummy;
	size_t whole, seen = 0;
	char host[64];

	write_log(path, 0);
	CHECK(events_open(&ev, path, "sb-1", &err) == 0);
	events_set_limits(ev, &lim);
	events_set_hook(ev, count_hook, &seen);
	for (int i = 0; i < 20000; i++) {
		snprintf(host, sizeof(host), "x%d.evil.test", i);
		events_emit(ev, "egress.denied", json_pack("{s:s, s:s, s:i, s:s}",
			    "protocol", "dns", "host", host, "port", 53,
			    "reason", "not in the allowlist"));
	}
	CHECK(seen == 20000);
	events_emit(ev, "exec.end", NULL);
	events_close(ev);
	CHECK(stat(path, &st) == 0);
	/* the budget, an eighth for summaries, a line over each, the end */
	CHECK(st.st_size < (16 << 10) + (2 << 10) + 4096);
	CHECK(lines_of(path, "log.budget", &dummy) == 1);
	whole = lines_of(path, "egress.denied", &dummy);
	CHECK(whole > 10 && whole < 200);
	lines_of(path, "egress.denied.summary", &counted);
	CHECK((json_int_t)whole + counted == 20000);
	r = verify(path);
	CHECK(r.bad_line == 0);
}

static void dns_denied(struct events *ev, const char *host)
{
	events_emit(ev, "egress.denied", json_pack("{s:s, s:s, s:i, s:s}",
		    "protocol", "dns", "host", host, "port", 53,
		    "reason", "not in the allowlist"));
}

/* The lines of the log at p that hold want. */
static size_t named_in(const char *p, const char *want)
{
	char *buf, *line, *save = NULL;
	size_t len, n = 0;

	buf = slurp(p, &len);
	for (line = buf ? strtok_r(buf, "\n", &save) : NULL; line;
	     line = strtok_r(NULL, "\n", &save))
		n += strstr(line, want) != NULL;
	free(buf);
	return n;
}

/*
 * 140 made-up names, then the one that mattered: past the 128 kinds a
 * type names, its first lookup is still written whole, once.  It was
 * counted among "other", its name nowhere in the log.
 */
TEST(new_destination_past_the_kinds_is_named)
{
	struct corral_event_limits lim = { 16 << 20, 10, 60000 };
	struct corral_err err = { 0 };
	struct events *ev;
	json_int_t counted, dummy;
	char host[64];

	write_log(path, 0);
	CHECK(events_open(&ev, path, "sb-1", &err) == 0);
	events_set_limits(ev, &lim);
	for (int i = 0; i < 140; i++) {
		snprintf(host, sizeof(host), "r%d.evil.test", i);
		dns_denied(ev, host);
	}
	for (int i = 0; i < 3; i++)
		dns_denied(ev, "metadata.target.test");
	events_close(ev);
	CHECK(named_in(path, "\"type\":\"egress.denied\",\"protocol\":\"dns\","
		       "\"host\":\"metadata.target.test\"") == 1);
	/* every name once: 128 kinds, 12 of "other", the target once */
	CHECK(lines_of(path, "egress.denied", &dummy) == 141);
	lines_of(path, "egress.denied.summary", &counted);
	CHECK(counted == 2);
}

/*
 * Past a quarter of the budget of such lines, new names are listed in the
 * summaries of "other" (NAMES_LISTED a summary), the rest counted: a flood
 * hides a name only within its window, and a name the list had no room
 * for is still new (its next lookup can be listed).
 */
TEST(new_destinations_past_the_share_are_listed)
{
	struct corral_event_limits lim = { 64 << 10, 10, 100 };
	struct corral_err err = { 0 };
	struct events *ev;
	struct stat st;
	json_int_t counted, dummy;
	size_t whole;
	char host[64];

	write_log(path, 0);
	CHECK(events_open(&ev, path, "sb-1", &err) == 0);
	events_set_limits(ev, &lim);
	for (int i = 0; i < 400; i++) {
		snprintf(host, sizeof(host), "r%d.evil.test", i);
		dns_denied(ev, host);
	}
	dns_denied(ev, "metadata.target.test");	/* past the 32 listed */
	usleep(150 * 1000);	/* past the interval: its own window */
	dns_denied(ev, "metadata.target.test");
	events_close(ev);
	whole = lines_of(path, "egress.denied", &dummy);
	CHECK(whole > 128 && whole < 400);
	lines_of(path, "egress.denied.summary", &counted);
	CHECK((json_int_t)whole + counted == 402);
	CHECK(named_in(path, "\"r399.evil.test:53\"") == 0);
	CHECK(named_in(path, "\"names\":[\"metadata.target.test:53\"]") == 1);
	CHECK(named_in(path, "\"names_unlisted\":") == 1);
	CHECK(lines_of(path, "log.budget", &dummy) == 0);
	CHECK(stat(path, &st) == 0 && st.st_size < (64 << 10));
}

/* A metadata service's address after a flood past the budget: named once. */
TEST(metadata_service_named_past_the_budget)
{
	struct corral_event_limits lim = { 4 << 10, 10, 60000 };
	struct corral_err err = { 0 };
	struct events *ev;
	json_int_t dummy;
	char host[64];

	write_log(path, 0);
	CHECK(events_open(&ev, path, "sb-1", &err) == 0);
	events_set_limits(ev, &lim);
	for (int i = 0; i < 200; i++) {
		snprintf(host, sizeof(host), "r%d.evil.test", i);
		dns_denied(ev, host);
	}
	for (int i = 0; i < 3; i++)
		events_emit(ev, "egress.denied", json_pack("{s:s, s:s, s:i}", "protocol",
			    "transparent", "host", "169.254.169.254", "port", 80 + i));
	dns_denied(ev, "METADATA.google.internal.");
	events_close(ev);
	CHECK(lines_of(path, "log.budget", &dummy) == 1);
	CHECK(named_in(path, "\"type\":\"egress.denied\",\"protocol\":\"transparent\","
		       "\"host\":\"169.254.169.254\",\"port\":80,") == 1);
	CHECK(named_in(path, "\"host\":\"169.254.169.254\",\"port\":81,") == 0);
	CHECK(named_in(path, "\"type\":\"egress.denied\",\"protocol\":\"dns\","
		       "\"host\":\"METADATA.google.internal.\"") == 1);
}

TEST(show_filters_and_formats)
{
	struct corral_err err = { 0 };
	struct corral_audit_filter f = { 0 };
	struct events *ev;
	char *out;

	unlink(path);
	CHECK(events_open(&ev, path, "sb-A", &err) == 0);
	events_emit(ev, "exec.start", json_pack("{s:s, s:i, s:s}", "call", "c1",
						"pid", 42, "command", "sh"));
	events_emit(ev, "egress.denied", json_pack("{s:s, s:s, s:s, s:i, s:s}",
		    "call", "c1", "protocol", "http", "host", "evil.test",
		    "port", 80, "reason", "evil.test:80 is not in the allowlist"));
	events_emit(ev, "egress.allowed", json_pack("{s:s, s:s, s:i}", "call", "c2",
						    "host", "pypi.org", "port", 443));
	events_close(ev);
	CHECK(events_open(&ev, path, "sb-B", &err) == 0);
	events_emit(ev, "egress.denied", json_pack("{s:s, s:s, s:i}", "call", "c1",
						   "host", "b.test", "port", 22));
	events_close(ev);

	out = show(NULL);
	CHECK(count_lines(out, "\n") == 5);	/* a date line and 4 events */
	CHECK_STR_CONTAINS(out, "-- 20");
	CHECK_STR_CONTAINS(out, "  1     sb-A                  c1        exec.start"
			   "      pid=42 command=sh / a tool call started\n");
	CHECK_STR_CONTAINS(out, "egress.denied   evil.test:80 protocol=http / "
			   "evil.test:80 is not in the allowlist\n");
	CHECK(out && out[13] == '\n' && out[16] == ':' && out[19] == ':' &&
	      out[22] == '.' && out[26] == ' ');
	free(out);

	f.type = "egress.denied";
	out = show(&f);
	CHECK(count_lines(out, "egress.denied") == 2);
	CHECK(count_lines(out, "exec.start") == 0);
	free(out);

	f.type = "egress";
	out = show(&f);
	CHECK(count_lines(out, "  egress.") == 3);
	free(out);

	f.type = "egress.den";		/* no prefix match within a name */
	out = show(&f);
	CHECK(count_lines(out, "egress") == 0);
	free(out);

	f.type = "egress.denied";
	f.sandbox = "sb-B";
	out = show(&f);
	CHECK(count_lines(out, "egress.denied") == 1);
	CHECK_STR_CONTAINS(out, "b.test:22");
	free(out);

	f.type = NULL;
	f.sandbox = NULL;
	f.call = "c2";
	out = show(&f);
	CHECK(count_lines(out, "  c2  ") == 1);
	CHECK_STR_CONTAINS(out, "pypi.org:443");
	free(out);
}

TEST(show_escapes_what_the_sandbox_wrote)
{
	struct corral_err err = { 0 };
	struct events *ev;
	char *out;

	unlink(path);
	CHECK(events_open(&ev, path, "sb-A", &err) == 0);
	events_emit(ev, "egress.denied", json_pack("{s:s, s:s}", "host",
		    "\x1b]0;owned\x07\x1b[2J.test", "reason", "r\xc2\x9b" "1m\n"));
	events_close(ev);
	out = show(NULL);
	CHECK(out && !strchr(out, '\x1b') && !strchr(out, '\x07'));
	CHECK(out && !strstr(out, "\xc2\x9b"));
	CHECK_STR_CONTAINS(out, "\\x1b]0;owned\\x07\\x1b[2J.test / r\\xc2\\x9b1m\\x0a\n");
	free(out);
}

TEST(show_names_lines_that_are_not_events)
{
	char *out;
	const char text[] = "{\"seq\":1,\"type\":\"a\",\"prev\":\"" ZEROS "\"}\n"
			    "junk\n[1]\n{\"seq\":2,\"type\":\"b\"";

	spill(path, text, strlen(text));
	out = show(NULL);
	CHECK_STR_CONTAINS(out, "-- line 2: not a JSON object, skipped\n");
	CHECK_STR_CONTAINS(out, "-- line 3: not a JSON object, skipped\n");
	CHECK_STR_CONTAINS(out, "-- line 4: incomplete (a write cut short), skipped\n");
	CHECK_STR_CONTAINS(out, "--:--:--.---  1     -");
	free(out);
}

/* ---- lines the file did not take ------------------------------------------ */

static void fsize_limit(rlim_t soft)
{
	struct rlimit rl;

	CHECK(getrlimit(RLIMIT_FSIZE, &rl) == 0);
	rl.rlim_cur = soft;
	CHECK(setrlimit(RLIMIT_FSIZE, &rl) == 0);
}

/*
 * Lines lost to a full file (RLIMIT_FSIZE here: EFBIG, SIGXFSZ ignored as
 * corral does) are said by a log.gap line before any other is written.
 * Room for part of a line: the gap's line is cut there (torn bytes, which
 * the next line chains past), and the short line after it is lost too,
 * not written ahead of the gap's.
 */
TEST(lost_lines_said_by_a_gap_before_any_line)
{
	struct sigaction ign = { .sa_handler = SIG_IGN }, old;
	struct corral_err err = { 0 };
	struct corral_audit_report r;
	struct events *ev;
	struct stat st;
	char *buf, *gap;
	size_t len;
	int e;

	unlink(path);
	CHECK(events_open(&ev, path, "sb-gap", &err) == 0);
	if (!ev)
		return;
	events_emit(ev, "exec.start", json_pack("{s:s}", "call", "c-1"));
	CHECK(stat(path, &st) == 0);
	CHECK(sigaction(SIGXFSZ, &ign, &old) == 0);
	fsize_limit(st.st_size);	/* full: no byte more */
	events_emit(ev, "syscall.denied", json_pack("{s:s, s:s}", "syscall",
		    "mount", "call", "c-1"));
	events_emit(ev, "syscall.denied", json_pack("{s:s, s:s}", "syscall",
		    "ptrace", "call", "c-1"));
	fsize_limit(st.st_size + 120);	/* room for part of a line */
	events_emit(ev, "pause", NULL);
	CHECK(events_lost_own(ev, &e) == 3 && e == EFBIG);
	fsize_limit(RLIM_INFINITY);
	CHECK(sigaction(SIGXFSZ, &old, NULL) == 0);
	events_emit(ev, "resume", NULL);
	CHECK(events_lost_own(ev, &e) == 3);
	events_close(ev);

	buf = slurp(path, &len);
	CHECK(buf != NULL);
	if (!buf)
		return;
	CHECK(!strstr(buf, "\"type\":\"pause\""));
	gap = strstr(buf, "\"type\":\"log.gap\",\"lost\":3,");
	CHECK(gap != NULL);
	CHECK(gap && strstr(gap, "\"type\":\"resume\""));
	CHECK_STR_CONTAINS(buf, "\"syscall.denied\":2");
	CHECK_STR_CONTAINS(buf, "\"pause\":1");
	CHECK_STR_CONTAINS(buf, "\"calls\":[\"c-1\"]");
	CHECK_STR_CONTAINS(buf, "\"seq_first\":2,\"seq_last\":4");
	CHECK_STR_CONTAINS(buf, "\"denied\":[\"syscall mount\",\"syscall ptrace\"]");
	CHECK_STR_CONTAINS(buf, "File too large");
	free(buf);
	r = verify(path);
	CHECK(r.bad_line == 0 && r.gaps == 1 && r.gap_lost == 3 && r.torn == 1);
	CHECK_STR_CONTAINS(r.reason, "; 1 gap said (log.gap, the first: line ");
	CHECK_STR_CONTAINS(r.reason, "): 3 event lines could not be written");
}

int main(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(path, sizeof(path), "%s/events", dir);
	unit_run_all();
	unlink(path);
	rmdir(dir);
	UNIT_DONE();
}
