/*
 * unit_err.c - the error type every layer carries up: corral_set_err,
 * corral_set_errno (the errno's text once, at the end) and corral_wrap_err
 * (a prefix), all in the fixed buffer, cut rather than overflowed.
 */
#include "internal.h"
#include "unit.h"

#include <errno.h>
#include <string.h>

TEST(set_errno_appends_the_text_once)
{
	struct corral_err err = { 0 };

	CHECK(corral_set_errno(&err, ENOENT, "cannot open %s", "/x") == -ENOENT);
	CHECK(err.code == -ENOENT);
	CHECK(!strcmp(err.msg, "cannot open /x: No such file or directory"));
	/* an errno the C library has no name for still says something */
	CHECK(corral_set_errno(&err, 4000, "x") == -4000);
	CHECK_STR_CONTAINS(err.msg, "x: Unknown error 4000");
}

TEST(set_errno_cuts_a_long_message)
{
	struct corral_err err = { 0 };
	char big[CORRAL_ERR_MAX * 2];

	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	CHECK(corral_set_errno(&err, EIO, "%s", big) == -EIO);
	CHECK(strlen(err.msg) <= CORRAL_ERR_MAX - 1);
	/* the reason whole at the end, the cut said in the middle */
	CHECK(!strcmp(err.msg + strlen(err.msg) - strlen(": Input/output error"),
		      ": Input/output error"));
	CHECK_STR_CONTAINS(err.msg, "[... ");
	/* text that leaves room for the reason is not cut */
	big[CORRAL_ERR_MAX - 1 - strlen(": Input/output error")] = '\0';
	corral_set_errno(&err, EIO, "%s", big);
	CHECK(strlen(err.msg) == CORRAL_ERR_MAX - 1);
	CHECK(!strstr(err.msg, "[... "));
}

/*
 * A path of a few hundred bytes: the message kept what failed and the
 * path's start, and lost "Permission denied" (`corral run --policy` a
 * long path to a file it may not read said "corral: /tmp/ddd...ff" and
 * no more).  Cut in the path's middle now, never inside a character,
 * and the bytes it took are said.
 */
TEST(long_path_keeps_the_reason)
{
	struct corral_err err = { 0 };
	char path[2000], *mark;
	size_t i, cut;

	path[0] = '/';
	for (i = 1; i + 2 < sizeof(path) - 6; i += 2)
		memcpy(path + i, "\xc3\xa9", 2);	/* e acute, two bytes each */
	memcpy(path + i, "/file", 6);
	corral_set_errno(&err, EACCES, "reading the policy %s", path);
	CHECK(strlen(err.msg) <= CORRAL_ERR_MAX - 1);
	CHECK(!strncmp(err.msg, "reading the policy /", 20));
	CHECK(!strcmp(err.msg + strlen(err.msg) - strlen("/file: Permission denied"),
		      "/file: Permission denied"));
	mark = strstr(err.msg, "[... ");
	CHECK(mark && sscanf(mark, "[... %zu bytes cut ...]", &cut) == 1);
	if (!mark)
		return;
	/* what is kept and what is cut add up to the whole */
	CHECK(strlen(err.msg) - (strchr(mark, ']') + 1 - mark) + cut ==
	      strlen("reading the policy ") + strlen(path) + strlen(": Permission denied"));
	/* no character split: every kept byte begins one or continues one */
	for (const unsigned char *u = (const unsigned char *)err.msg; *u; u++)
		if (*u == 0xc3)
			CHECK(u[1] == 0xa9);
		else if (*u == 0xa9)
			CHECK(u > (const unsigned char *)err.msg && u[-1] == 0xc3);
	/* a wrapped error keeps its own reason too */
	corral_set_errno(&err, ENOENT, "open x");
	corral_wrap_err(&err, "bind %s", path);
	CHECK(!strcmp(err.msg + strlen(err.msg) - strlen("/file: open x: No such file or directory"),
		      "/file: open x: No such file or directory"));
}

/*
 * corral_set_err with the reason in its own format ("%s: %s", path,
 * strerror(errno), as fifty places write it): `corral cp ID:FILE` to a
 * path of 4000 bytes said "the local file's directory /tmp/xxx..." and
 * not why.  Its middle is cut too.
 */
TEST(set_err_keeps_the_end)
{
	struct corral_err err = { 0 };
	char path[4001];

	memset(path, 'x', sizeof(path) - 1);
	path[sizeof(path) - 1] = '\0';
	path[0] = '/';
	CHECK(corral_set_err(&err, -ENOENT, "the file's directory %s: %s", path,
			     strerror(ENOENT)) == -ENOENT);
	CHECK(strlen(err.msg) <= CORRAL_ERR_MAX - 1);
	CHECK(!strncmp(err.msg, "the file's directory /xxx", 25));
	CHECK(!strcmp(err.msg + strlen(err.msg) - strlen("xxx: No such file or directory"),
		      "xxx: No such file or directory"));
	CHECK_STR_CONTAINS(err.msg, " bytes cut ...]");
	/* a message that fits is as it was */
	corral_set_err(&err, -EINVAL, "bad %s", "x");
	CHECK(!strcmp(err.msg, "bad x"));
}

/* Whether s is UTF-8 throughout: what JSON (a result's reason) can carry. */
static bool all_utf8(const char *s)
{
	size_t n = strlen(s), i, k;

	for (i = 0; i < n; i += k)
		if (!(k = corral_utf8_char(s + i, n - i)))
			return false;
	return true;
}

/*
 * A text longer than the buffer it is formatted in (two paths and more:
 * CORRAL_ERR_MAX + PATH_MAX bytes, 4608) is cut at its end
 * there first: the character across that cut was kept in part, a lead
 * byte alone before ": Permission denied", and the message was not
 * UTF-8 (json_string() of it NULL).  Both parities of the cut.
 */
TEST(text_cut_at_its_buffer_keeps_whole_characters)
{
	struct corral_err err = { 0 };
	static char big[6001];
	size_t i;

	for (int pad = 0; pad < 2; pad++) {
		memset(big, 'x', (size_t)pad);
		for (i = (size_t)pad; i + 2 < sizeof(big); i += 2)
			memcpy(big + i, "\xc3\xa9", 2);	/* e acute */
		big[i] = '\0';
		corral_set_errno(&err, EACCES, "%s", big);
		CHECK(all_utf8(err.msg));
		CHECK(!strcmp(err.msg + strlen(err.msg) - strlen("\xc3\xa9: Permission denied"),
			      "\xc3\xa9: Permission denied"));
		corral_set_err(&err, -EACCES, "%s", big);
		CHECK(all_utf8(err.msg));
		corral_set_errno(&err, ENOENT, "x");
		corral_wrap_err(&err, "%s", big);
		CHECK(all_utf8(err.msg));
	}
}

TEST(wrap_prefixes)
{
	struct corral_err err = { 0 };

	corral_set_errno(&err, EACCES, "cannot open %s", "/y");
	CHECK(corral_wrap_err(&err, "--ro %s", "/y") == -EACCES);
	CHECK(!strcmp(err.msg, "--ro /y: cannot open /y: Permission denied"));
	CHECK(corral_set_err(&err, -EINVAL, "bad %d", 7) == -EINVAL);
	CHECK(!strcmp(err.msg, "bad 7") && err.code == -EINVAL);
}

int main(void)
{
	unit_run_all();
	UNIT_DONE();
}
